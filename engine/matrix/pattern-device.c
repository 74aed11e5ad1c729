/* felab matrices, the assembly's pattern and its fill on the device (fe_operator_assemble,
 * assemble.c; kernels: engine/codegen/kernels/pattern.knl and pattern_rows.knl). The same
 * pattern as the host's (pattern.c) for any mesh, built where the matrix lives: the cells of
 * each node counted, listed and sorted, then per node the distinct nodes of its cells found
 * (each entry's previous one of its node, no sort), counted (the rows' lengths) and written
 * (the columns, with the values). Of the host's work only what is of the nodes' size: the
 * prefix sums of the counts (the lists' starts, the row pointers), which the product's
 * formats read anyway. The values sum each row's cells' stored element matrices in cell
 * order, as the host's fill does: no atomics, the same bits in every run, and the same as
 * into the host's pattern. The element matrices come from reg_jac in the mesh's order on a
 * realization of their own (device_pattern_matrices). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/strbuf.h"
#include "engine/matrix/matrix-private.h"

#define PT_ITEMS 128    /* pattern.knl's items per group */
#define PT_ROW_ITEMS 32 /* the row kernels' */
#define PT_CAP_MIN 32   /* the row kernels' caps: PT_CAP_MIN, 2x, .. PT_CAP_MAX */
#define PT_CAP_MAX 1024 /* its six arrays of ints: 24 KB of shared memory */

/* pattern_rows.knl's kernel for cap (its name's placeholder and PT_CAP set) into b. */
static void rows_kernel_text(fe_strbuf *b, int cap)
{
  const char *t = fe_kernel_template("pattern_rows"), *name = "fe_pt_rows_PT_CAP";
  fe_strbuf_printf(b, "#define PT_CAP %d\n", cap);
  for (const char *p = t, *q; *p; p = q + strlen(name)) {
    if (!(q = strstr(p, name))) {
      fe_strbuf_append(b, p);
      break;
    }
    fe_strbuf_printf(b, "%.*sfe_pt_rows_%d", (int)(q - p), p, cap);
  }
  fe_strbuf_append(b, "#undef PT_CAP\n");
}

/* The source of a module of the pattern's kernels: pattern.knl's (cap 0), or the row kernel
 * of cap; each its own, so that a cold start compiles only what it runs. */
static int dp_source(fe_backend *be, fe_precision prec, int cap, char **src)
{
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab's pattern on the device, %s backend, %s precision */\n"
                   "#define FE_DOUBLE %d\n#define FE_COLORED 0\n", be->name,
                   fe_precision_name(prec), prec == FE_DOUBLE);
  fe_strbuf_append(&b, be->ops->preamble(be->impl, prec));
  fe_strbuf_printf(&b, "#define PT_ITEMS %d\n#define PT_ROW_ITEMS %d\n"
                   "#define PT_NONE 2147483647\n", PT_ITEMS, PT_ROW_ITEMS);
  if (cap) rows_kernel_text(&b, cap);
  else fe_strbuf_append(&b, fe_kernel_template("pattern"));
  return fe_strbuf_finish(&b, src);
}

/* That module, compiled (the kernel cache keeps it). */
static int dp_compile(device_pattern *D, int cap, fe_module **mod)
{
  fe_backend *be = D->be;
  char *src;
  FE_CHECK(dp_source(be, D->prec, cap, &src));
  double s = 0;
  int rc = fe_compile(be, src, mod, &s, NULL);
  free(src);
  D->compile_s += s;
  return rc;
}

static int dp_module(device_pattern *D)
{
  FE_CHECK(dp_compile(D, 0, &D->mod));
  static const char *const names[] = {"fe_pt_zero", "fe_pt_count", "fe_pt_list", "fe_pt_sort",
                                      "fe_pt_fill", "fe_pt_iota"};
  fe_kernel **ks[] = {&D->zero, &D->count, &D->list_k, &D->sort, &D->fill, &D->iota};
  for (int i = 0; i < 6; i++) FE_CHECK(D->be->ops->kernel(D->be->impl, D->mod, names[i], ks[i]));
  return 0;
}

static int dp_launch(device_pattern *D, fe_kernel *k, long long items, int nargs, fe_arg *args)
{
  long long ng = (items + PT_ITEMS - 1) / PT_ITEMS;
  FE_ASSERT(ng <= 2147483647LL, FE_ERR_ARG, "the pattern on the device: %lld groups", ng);
  args[0] = (fe_arg){.kind = FE_ARG_INT, .i = ng};
  if (!ng) return 0;
  return D->be->ops->launch(D->be->impl, k, (size_t)ng, PT_ITEMS, nargs, args, D->prec, NULL);
}

/* A zeroed buffer of n ints. */
static int dp_zeros(device_pattern *D, size_t n, fe_buffer *x)
{
  FE_CHECK(D->be->ops->alloc(D->be->impl, sizeof(int) * (n + 1), x));
  fe_arg a[3] = {{0}, {.kind = FE_ARG_INT, .i = (long long)n}, {.kind = FE_ARG_BUFFER, .buf = x}};
  return dp_launch(D, D->zero, (long long)n, 3, a);
}

static int dp_read_ints(device_pattern *D, const fe_buffer *x, size_t n, int *out)
{
  double t0 = fe_clock();
  int rc = D->be->ops->read(D->be->impl, x, 0, n * sizeof(int), out);
  D->transfer += fe_clock() - t0;
  return rc;
}

static int dp_write_ints(device_pattern *D, const int *v, size_t n, fe_buffer *x)
{
  double t0 = fe_clock();
  int rc = fe_upload_ints(D->be, v, n, x);
  D->transfer += fe_clock() - t0;
  return rc;
}

/* The cells of each node: counted, their starts (the host's prefix), listed, sorted. */
static int dp_node_cells(device_pattern *D, const fe_space *V, int *start)
{
  const int nn = V->nnodes, nb = V->elem.nbasis;
  const long long nent = (long long)V->mesh->ncells * nb;
  fe_buffer deg = {0};
  int rc = dp_zeros(D, (size_t)nn, &deg);
  fe_arg a[7] = {{0}, {.kind = FE_ARG_INT, .i = nent}, {.kind = FE_ARG_BUFFER, .buf = &D->cells},
                 {.kind = FE_ARG_BUFFER, .buf = &deg}};
  if (!rc) rc = dp_launch(D, D->count, nent, 4, a);
  if (!rc) rc = dp_read_ints(D, &deg, (size_t)nn, start + 1);
  if (deg.ptr) D->be->ops->release(D->be->impl, &deg);
  FE_CHECK(rc);
  start[0] = 0;
  D->maxdeg = 0;
  for (int i = 0; i < nn; i++) {
    D->maxdeg = start[i + 1] > D->maxdeg ? start[i + 1] : D->maxdeg;
    start[i + 1] += start[i];
  }
  fe_buffer pos = {0};
  rc = dp_write_ints(D, start, (size_t)nn + 1, &D->start);
  if (!rc) rc = D->be->ops->alloc(D->be->impl, sizeof(int) * ((size_t)nent + 1), &D->list);
  if (!rc) rc = dp_zeros(D, (size_t)nn, &pos);
  a[1] = (fe_arg){.kind = FE_ARG_INT, .i = nent};
  a[2] = (fe_arg){.kind = FE_ARG_INT, .i = nb};
  a[3] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &D->cells};
  a[4] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &D->start};
  a[5] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &pos};
  a[6] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &D->list};
  if (!rc) rc = dp_launch(D, D->list_k, nent, 7, a);
  if (pos.ptr) D->be->ops->release(D->be->impl, &pos);
  fe_arg s[4] = {{0}, {.kind = FE_ARG_INT, .i = nn}, {.kind = FE_ARG_BUFFER, .buf = &D->start},
                 {.kind = FE_ARG_BUFFER, .buf = &D->list}};
  if (!rc) rc = dp_launch(D, D->sort, nn, 4, s);
  return rc;
}

/* fe_pt_rows_<cap>: count (cnt) or write (cols and vals, from K). */
static int dp_rows(device_pattern *D, const fe_space *V, fe_buffer *cnt, const fe_buffer *rowptr,
                   fe_buffer *cols, const fe_buffer *K, fe_buffer *vals, double *seconds)
{
  char name[32];
  snprintf(name, sizeof name, "fe_pt_rows_%d", D->cap);
  fe_kernel *k;
  if (!D->rmod) FE_CHECK(dp_compile(D, D->cap, &D->rmod));
  FE_CHECK(D->be->ops->kernel(D->be->impl, D->rmod, name, &k));
  /* an argument the kernel does not read: a real buffer all the same */
  const fe_buffer *any = cnt ? cnt : cols;
  fe_arg a[15] = {{.kind = FE_ARG_INT, .i = V->nnodes}, {.kind = FE_ARG_INT, .i = V->nnodes},
                  {.kind = FE_ARG_INT, .i = V->elem.nbasis}, {.kind = FE_ARG_INT, .i = V->ncomp},
                  {.kind = FE_ARG_INT, .i = cols != NULL},
                  {.kind = FE_ARG_BUFFER, .buf = &D->cells},
                  {.kind = FE_ARG_BUFFER, .buf = &D->start},
                  {.kind = FE_ARG_BUFFER, .buf = &D->list},
                  {.kind = FE_ARG_BUFFER, .buf = &D->nfree},
                  {.kind = FE_ARG_BUFFER, .buf = &D->fixed},
                  {.kind = FE_ARG_BUFFER, .buf = cnt ? cnt : any},
                  {.kind = FE_ARG_BUFFER, .buf = rowptr ? rowptr : any},
                  {.kind = FE_ARG_BUFFER, .buf = cols ? cols : any},
                  {.kind = FE_ARG_BUFFER, .buf = K ? K : any},
                  {.kind = FE_ARG_BUFFER, .buf = vals ? vals : any}};
  if (!V->nnodes) return 0;
  return D->be->ops->launch(D->be->impl, k, (size_t)V->nnodes, PT_ROW_ITEMS, 15, a, D->prec,
                            seconds);
}

int device_pattern_make(const pattern *P, fe_backend *be, fe_precision prec, int *rowptr,
                        long long *nnz, device_pattern *D)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nc = V->ncomp, nd = V->ndofs, nb = V->elem.nbasis;
  const size_t ncell = (size_t)V->mesh->ncells;
  *D = (device_pattern){.be = be, .prec = prec};
  FE_ASSERT(ncell * nb <= 2147483647u, FE_ERR_ARG, "the matrix pattern: %zu (cell, node) pairs "
            "pass 2^31 (int indices)", ncell * nb);
  FE_CHECK(fe_memory_check_on(be, sizeof(int) * (2 * ncell * nb + 3 * (size_t)nn + nd),
                              "assemble: the pattern on the device (%zu cells of %d nodes)",
                              ncell, nb));
  int *start = malloc(sizeof(int) * ((size_t)nn + 1)), *nfree = malloc(sizeof(int) * (nn + 1u));
  int rc = !start || !nfree ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of "
                                           "host memory for the pattern's %d nodes", nn) : 0;
  for (int a = 0; !rc && a < nn; a++) {
    int f = 0;
    for (int k = 0; k < nc; k++) f += !P->fixed[a * nc + k];
    nfree[a] = f;
    start[a] = 0; /* its pages touched here: the copy into them is 10x slower if it faults */
  }
  if (!rc) rc = dp_module(D);
  if (!rc) rc = dp_write_ints(D, V->cell_nodes, ncell * nb, &D->cells);
  if (!rc) rc = dp_write_ints(D, nfree, (size_t)nn, &D->nfree);
  if (!rc) rc = dp_write_ints(D, P->fixed, (size_t)nd, &D->fixed);
  if (!rc) rc = dp_node_cells(D, V, start);
  if (!rc) {
    D->cap = PT_CAP_MIN;
    while ((long long)D->maxdeg * nb > D->cap) D->cap *= 2;
    /* FELAB_PATTERN_CAP: a smaller most (tests reach the host's way with it) */
    const char *cap = getenv("FELAB_PATTERN_CAP");
    int most = cap && atoi(cap) >= PT_CAP_MIN && atoi(cap) <= PT_CAP_MAX ? atoi(cap) : PT_CAP_MAX;
    if (D->cap > most) { /* wider than the row kernels: the caller builds it on the host */
      free(start);
      free(nfree);
      device_pattern_free(D);
      D->wide = 1;
      return 0;
    }
  }
  fe_buffer cnt = {0};
  if (!rc) rc = D->be->ops->alloc(be->impl, sizeof(int) * ((size_t)nn + 1), &cnt);
  if (!rc) rc = dp_rows(D, V, &cnt, NULL, NULL, NULL, NULL, NULL);
  if (!rc) rc = dp_read_ints(D, &cnt, (size_t)nn, nfree); /* now each free row's length */
  if (cnt.ptr) be->ops->release(be->impl, &cnt);
  long long nz = 0;
  for (int gi = 0; !rc && gi < nd; gi++) {
    rowptr[gi] = (int)nz;
    nz += P->fixed[gi] ? 1 : nfree[gi / nc];
    if (nz > 2147483647LL)
      rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "the matrix has more than "
                        "2^31 nonzeros (int indices)");
  }
  if (!rc) rowptr[nd] = (int)nz;
  *nnz = nz;
  free(start);
  free(nfree);
  if (rc) device_pattern_free(D);
  return rc;
}

int device_pattern_from_host(const pattern *P, fe_backend *be, fe_precision prec,
                             device_pattern *D)
{
  const fe_space *V = P->V;
  const size_t nent = (size_t)V->mesh->ncells * V->elem.nbasis;
  *D = (device_pattern){.be = be, .prec = prec};
  int rc = dp_module(D);
  if (!rc) rc = dp_write_ints(D, V->cell_nodes, nent, &D->cells);
  if (!rc) rc = dp_write_ints(D, P->start, (size_t)V->nnodes + 1, &D->start);
  if (!rc) rc = dp_write_ints(D, P->list, nent, &D->list);
  if (!rc) rc = dp_write_ints(D, P->fixed, (size_t)V->ndofs, &D->fixed);
  if (rc) device_pattern_free(D);
  return rc;
}

int device_pattern_write(device_pattern *D, const fe_space *V, const fe_buffer *rowptr,
                         fe_buffer *cols, const fe_buffer *K, fe_buffer *vals, double *seconds)
{
  return dp_rows(D, V, NULL, rowptr, cols, K, vals, seconds);
}

int device_pattern_fill(device_pattern *D, const fe_space *V, const fe_buffer *K,
                        const fe_buffer *rowptr, const fe_buffer *cols, fe_buffer *vals,
                        double *seconds)
{
  fe_arg a[12] = {{0},
                  {.kind = FE_ARG_INT, .i = V->ndofs},
                  {.kind = FE_ARG_INT, .i = V->elem.nbasis},
                  {.kind = FE_ARG_INT, .i = V->ncomp},
                  {.kind = FE_ARG_BUFFER, .buf = &D->cells},
                  {.kind = FE_ARG_BUFFER, .buf = &D->start},
                  {.kind = FE_ARG_BUFFER, .buf = &D->list},
                  {.kind = FE_ARG_BUFFER, .buf = &D->fixed},
                  {.kind = FE_ARG_BUFFER, .buf = rowptr},
                  {.kind = FE_ARG_BUFFER, .buf = cols},
                  {.kind = FE_ARG_BUFFER, .buf = K},
                  {.kind = FE_ARG_BUFFER, .buf = vals}};
  long long ng = ((long long)V->ndofs + PT_ITEMS - 1) / PT_ITEMS;
  a[0] = (fe_arg){.kind = FE_ARG_INT, .i = ng};
  if (!ng) return 0;
  return D->be->ops->launch(D->be->impl, D->fill, (size_t)ng, PT_ITEMS, 12, a, D->prec, seconds);
}

/* The realization of the device's element matrices: csr's block and the operator's
 * geometry sharing, the spec of csr's own realization, so that the product's module made from
 * this one's source is the one its action loads (one compile); its constants never current
 * (bind uploads them). */
static fe_realization dp_realization(fe_operator *A, fe_backend *be, fe_precision prec)
{
  fe_realization h = {.A = A, .be = be, .prec = prec,
                      .block = fe_elemat_reg_block(A, be, prec),
                      .geo_shared = fe_geometry_shared(A, FE_GEOMETRY_AUTO)};
  h.params_version = A->pde->const_version - 1;
  return h;
}

/* Variant reg_jac's shape on h. */
static int dp_shape(const fe_realization *h, elemat_shape *sh)
{
  int v = 0;
  while (strcmp(elemat_variants[v].name, "reg_jac")) v++;
  return elemat_shape_of(h, 0, v, sh);
}

double device_pattern_precompile(fe_operator *A, fe_backend *be, fe_precision prec, int lanes)
{
  if (!be->ops->precompile) return 0;
  fe_realization h = dp_realization(A, be, prec);
  elemat_shape sh;
  char *src[8] = {NULL};
  int n = 0, rc = dp_shape(&h, &sh);
  static const int caps[] = {0, 64, 128, 256}; /* the common caps: P1 and P2 tets, Q1, Q2 */
  for (int i = 0; !rc && i < 4; i++) rc = dp_source(be, prec, caps[i], &src[n++]);
  if (!rc) rc = elemat_source_for(&h, &sh, &src[n++]);
  if (!rc) rc = fe_sparse_source(be, prec, lanes, &src[n++]);
  double s = rc ? 0 : fe_precompile(be, (const char *const *)src, n);
  for (int i = 0; i < n; i++) free(src[i]);
  fe_error_clear(); /* a failure here is the compiles' to report */
  return s;
}

int device_pattern_matrices(device_pattern *D, fe_operator *A, const fe_vector *at,
                            fe_elemats **Kout, fe_report *krep, double *compile_s,
                            double *transfer)
{
  fe_setup_parts *parts = &krep->parts;
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const int nc = V->mesh->ncells, nn = V->nnodes, n = V->elem.nbasis * V->ncomp;
  fe_backend *be = D->be;
  fe_precision prec = D->prec;
  double t0 = fe_clock(), c0 = *compile_s, x0 = *transfer;
  fe_realization *hp = &D->h, h = dp_realization(A, be, prec);
  elemat_shape sh;
  fe_kernel *k;
  FE_CHECK(dp_shape(&h, &sh));
  double kc = 0;
  FE_CHECK(elemat_kernel_for(&h, &sh, &k, &kc)); /* kept with A: the cache's */
  *compile_s += kc;
  size_t w = fe_precision_size(prec), kb = (size_t)nc * n * n * w;
  FE_CHECK(fe_memory_check_on(be, kb + 3 * (size_t)nn * w + (size_t)nc * (4 + p->naux * w),
                              "element matrices: %d cells' %d x %d matrices", nc, n, n));
  fe_elemats *K;
  FE_CALLOC(K, 1, "element matrices");
  *K = (fe_elemats){.V = V, .be = be, .prec = prec, .ncells = nc, .n = n};
  fe_buffer ids = {0};
  fe_vector *u = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  int *maps = NULL, rc = be->ops->alloc(be->impl, kb + w, &K->vals);
  double t1 = fe_clock();
  if (!rc) rc = fe_upload_coords(be, prec, V, &h.coords); /* less the origin */
  if (!rc && p->naux) rc = fe_upload_reals(be, prec, A->aux, (size_t)nc * p->naux, &h.aux);
  if (!rc && p->nfields) { /* the fields' maps side by side per cell, as fe_fields reads them */
    const int nbf = fe_codegen_field_map_width(p);
    if (!(maps = malloc(sizeof(int) * ((size_t)nc * nbf + 1))))
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
    for (int c = 0; maps && c < nc; c++)
      for (int f = 0, off = 0; f < p->nfields; off += p->field_space[f]->elem.nbasis, f++)
        memcpy(maps + (size_t)c * nbf + off, p->field_space[f]->cell_nodes +
               (size_t)c * p->field_space[f]->elem.nbasis,
               sizeof(int) * (size_t)p->field_space[f]->elem.nbasis);
    if (!rc) rc = fe_upload_ints(be, maps, (size_t)nc * nbf, &h.fmaps);
  }
  if (!rc) rc = fe_realization_bind(&h, tf, transfer);
  fe_kernel_spec s;
  fe_realization_spec(&h, FE_ACTION_APPLY, &s);
  const fe_vector *uu = at;
  if (!rc && at && (at->be != be || at->prec != prec)) rc = fe_vector_convert(at, be, prec, &u);
  else if (!rc && !at && fe_codegen_needs(&s).need_u) rc = fe_vector_create(be, prec, V->ndofs, &u);
  if (u) uu = u;
  *transfer += fe_clock() - t1;
  if (!rc) rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)nc + 1), &ids);
  fe_arg ia[3] = {{0}, {.kind = FE_ARG_INT, .i = nc}, {.kind = FE_ARG_BUFFER, .buf = &ids}};
  if (!rc) rc = dp_launch(D, D->iota, nc, 3, ia);
  double seconds = 0, t2 = fe_clock();
  if (!rc) {
    fe_arg a[15] = {
        {.kind = FE_ARG_INT, .i = (nc + sh.block - 1) / sh.block},
        {.kind = FE_ARG_INT, .i = nc},
        {.kind = FE_ARG_INT, .i = 0}, /* geo_n: jac reads no factors */
        {.kind = FE_ARG_BUFFER, .buf = &D->cells},
        {.kind = FE_ARG_BUFFER, .buf = &h.coords},
    };
    const fe_buffer *b[8] = {&h.coords, p->naux ? &h.aux : &h.params, &h.params,
                             p->nfields ? &h.fmaps : &h.params, h.fv[0] ? h.fv[0] : &h.params,
                             h.fv[1] ? h.fv[1] : &h.params, h.fv[2] ? h.fv[2] : &h.params,
                             uu ? &uu->buf : &h.params}; /* as fe_physics_args orders them */
    for (int i = 0; i < 8; i++) a[5 + i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = b[i]};
    a[13] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &ids};
    a[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &K->vals};
    if (nc) rc = be->ops->launch(be->impl, k, (size_t)a[0].i, sh.items, 15, a, prec, &seconds);
  }
  fe_realization_unbind(&h, tf);
  fe_vector_free(u);
  free(maps);
  if (ids.ptr) be->ops->release(be->impl, &ids);
  *hp = h; /* kept with D: the product's module is made from its source */
  if (rc) {
    fe_elemats_free(K);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  double rest = t2 - t0 - (*compile_s - c0) - (*transfer - x0);
  fe_setup_part_add(parts, "geometry", rest > 0 ? rest : 0, 0);
  fe_setup_part_add(parts, "matrices", fe_clock() - t2, 0);
  /* what the assembly's report counts of them: the kernel's flops and time; the matrices
   * written, the coordinates, cell map, constants and state read */
  krep->seconds = seconds;
  krep->flops = nc * elemat_flops_per_cell(&h, &s, &sh);
  krep->bytes = (double)kb + 3.0 * nn * (double)w + nc * (V->elem.nbasis * 4.0 + p->naux * (double)w) +
                (fe_codegen_needs(&s).need_u ? (double)V->ndofs * (double)w : 0);
  *Kout = K;
  return 0;
}

void device_pattern_free(device_pattern *D)
{
  fe_backend *be = D->be;
  if (!be) return;
  fe_buffer *own[] = {&D->h.coords, &D->h.aux, &D->h.fmaps, &D->h.params};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (own[i]->ptr) be->ops->release(be->impl, own[i]);
  fe_buffer *bs[] = {&D->cells, &D->start, &D->list, &D->nfree, &D->fixed};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    if (bs[i]->ptr) be->ops->release(be->impl, bs[i]);
  if (D->mod) be->ops->module_free(be->impl, D->mod);
  if (D->rmod) be->ops->module_free(be->impl, D->rmod);
  D->be = NULL;
}
