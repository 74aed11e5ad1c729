/* felab matrices: element matrices of the Jacobian, their assembly into CSR on the device,
 * and the CSR product (kernels: engine/kernels/elemat.knl).
 *
 * Element matrices reuse the data of strategy "transpose" (its stored cell order, geometric
 * factors per point, per-cell constants, fields) and compile one more template against the
 * same physics: the linearization fe_df applied to each trial basis function in turn. The
 * assembled matrix has its pattern from the dof map, built once on the host, and its values
 * from the element matrices, added by the device with atomics at positions found by binary
 * search in the sorted rows. */
#include "engine/matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen.h"
#include "engine/error.h"
#include "engine/strategy.h"

#define EM_ITEMS 128 /* items per group of fe_assemble and fe_spmv (elemat.knl) */

int fe_elemat_source(const fe_realization *r, int lanes, char **src)
{
  fe_kernel_spec s;
  char defines[64];
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.template_name = "elemat";
  snprintf(defines, sizeof defines, "#define EM_LANES %d /* items per row of fe_spmv */\n", lanes);
  s.defines = defines;
  return fe_codegen_action(&s, r->be->name, r->be->ops->preamble(r->be->impl, r->prec), src);
}

/* Compile the elemat module on first use; *seconds the compile time. */
static int elemat_module(fe_realization *r, double *seconds)
{
  *seconds = 0;
  if (r->emodule) return 0;
  char *src;
  FE_CHECK(fe_elemat_source(r, 1, &src));
  int cached = 0;
  int rc = r->be->ops->compile(r->be->impl, src, &r->emodule, seconds, &cached);
  free(src);
  FE_CHECK(rc);
  return r->be->ops->kernel(r->be->impl, r->emodule, "fe_elemat", &r->elemat);
}

/* Counted flops of the element matrices of one cell: per (column, point) the state's
 * value and gradient, the trial gradient, the physics, the pull-back and the test. */
static double elemat_flops_per_cell(const fe_realization *r, const fe_kernel_spec *s)
{
  const fe_space *V = r->A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, dim = V->elem.dim, n = nb * nc;
  fe_action_needs need = fe_codegen_needs(s);
  double ff, fb;
  fe_codegen_field_counts(s, &ff, &fb);
  double per = (need.need_x ? 2.0 * nb * 3 : 0) + ff + fe_codegen_eval_flops(nb, dim, nc, need.need_u) +
               2.0 * dim * dim + need.phys_flops + 1 + nc * (dim * (2.0 * dim + 1) + 1) +
               (double)n * ((need.has_f0 ? 2.0 : 0) + 2.0 * dim);
  return (double)n * s->quad->npoints * per;
}

/* Upload ints computed from r's stored order: the cell map (NB nodes per stored cell) and
 * ids (the mesh cell of each stored cell, -1 for padding). */
static int upload_stored(fe_realization *r, fe_buffer *cells, fe_buffer *ids)
{
  const fe_space *V = r->A->V;
  size_t nb = (size_t)V->elem.nbasis, npad = r->npad;
  int *c = malloc(sizeof(int) * (npad * nb + 1)), *id = malloc(sizeof(int) * (npad + 1));
  int rc = 0;
  if (!c || !id) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (size_t s = 0; !rc && s < npad; s++) {
    memcpy(c + s * nb, V->cell_nodes + (size_t)fe_stored_cell(r->perm, s) * nb, sizeof(int) * nb);
    id[s] = r->perm[s] >= 0 ? r->perm[s] : -1;
  }
  if (!rc) rc = fe_upload_ints(r->be, c, npad * nb, cells);
  if (!rc) rc = fe_upload_ints(r->be, id, npad, ids);
  free(c);
  free(id);
  return rc;
}

int fe_element_matrices(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                        const char *strategy, const char *variant, fe_elemats **K,
                        fe_report *rep)
{
  *K = NULL;
  if (strategy && strcmp(strategy, "quadrature")) {
    FE_ASSERT(strcmp(strategy, "tensor"), FE_ERR_UNAVAILABLE, "element matrices: strategy "
              "\"tensor\" (Knepley-Terrel) is not built yet; use \"quadrature\"");
    FE_ERROR(FE_ERR_ARG, "element matrices: unknown strategy '%s' (quadrature)", strategy);
  }
  if (variant && strcmp(variant, "reg_jac")) {
    const char *later[] = {"reg_nojac", "shm_jac", "shm_nojac"};
    for (int i = 0; i < 3; i++)
      FE_ASSERT(strcmp(variant, later[i]), FE_ERR_UNAVAILABLE, "element matrices: variant '%s' "
                "is not built yet; use \"reg_jac\"", variant);
    FE_ERROR(FE_ERR_ARG, "element matrices: unknown variant '%s' (reg_jac, reg_nojac, shm_jac, "
             "shm_nojac)", variant);
  }
  FE_ASSERT(!at || at->n == A->V->ndofs, FE_ERR_ARG, "the state has %d entries but the "
            "operator's space has %d", at ? at->n : 0, A->V->ndofs);
  fe_action_opts oo;
  if (o) oo = *o;
  else fe_action_opts_default(&oo);
  oo.strategy = "transpose"; /* its data: stored factors per point, dense tables */
  double t0 = fe_clock(), compile_s = 0, transfer = 0;
  fe_realization *r;
  char why[160];
  FE_CHECK(fe_operator_realize(A, &oo, &r, why, sizeof why));
  FE_CHECK(elemat_module(r, &compile_s));
  const fe_space *V = A->V;
  int n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  fe_elemats *k;
  FE_CALLOC(k, 1, "element matrices");
  *k = (fe_elemats){.V = V, .be = r->be, .prec = r->prec, .ncells = nc, .n = n};
  fe_buffer cells = {0}, ids = {0};
  fe_vector *u = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  const fe_vector *uu = at;
  int rc = upload_stored(r, &cells, &ids);
  if (!rc) rc = r->be->ops->alloc(r->be->impl, (size_t)nc * n * n * fe_precision_size(r->prec), &k->vals);
  if (!rc) {
    double t1 = fe_clock();
    if (!at) rc = fe_vector_create(r->be, r->prec, V->ndofs, &u); /* zeroed */
    else if (at->be != r->be || at->prec != r->prec) rc = fe_vector_convert(at, r->be, r->prec, &u);
    if (u) uu = u;
    transfer += fe_clock() - t1;
  }
  if (!rc) rc = fe_realization_bind(r, tf, &transfer);
  double setup = fe_clock() - t0 - compile_s - transfer, seconds = 0;
  if (!rc) {
    long long geo_n = (long long)r->npad * (A->geo_affine ? 1 : A->quad[FE_ACTION_APPLY].npoints);
    fe_arg args[16] = {
        {.kind = FE_ARG_INT, .i = r->ngroups},
        {.kind = FE_ARG_INT, .i = 0},
        {.kind = FE_ARG_INT, .i = geo_n},
        {.kind = FE_ARG_BUFFER, .buf = &r->groups},
        {.kind = FE_ARG_BUFFER, .buf = &cells},
        {.kind = FE_ARG_BUFFER, .buf = &r->geo[FE_ACTION_APPLY]},
    };
    fe_physics_args(r, uu, uu, (fe_vector *)uu, args + 6); /* coordinates .. fields, u */
    args[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &ids};
    args[15] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &k->vals};
    size_t gs = (size_t)r->block * n;
    gs = (gs + 31) / 32 * 32;
    if (gs > r->be->info.max_group) gs = r->be->info.max_group;
    rc = r->be->ops->launch(r->be->impl, r->elemat, (size_t)r->ngroups, gs, 16, args, r->prec,
                            &seconds);
  }
  fe_realization_unbind(r, tf);
  fe_vector_free(u);
  if (cells.ptr) r->be->ops->release(r->be->impl, &cells);
  if (ids.ptr) r->be->ops->release(r->be->impl, &ids);
  if (rc) {
    fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  fe_report_begin(rep, "element_matrices", r->be, r->prec, "quadrature", "variant reg_jac: a "
                  "column per item in registers, Jacobian factors stored per point");
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  double w = (double)fe_precision_size(r->prec), npts = A->geo_affine ? 1 : s.quad->npoints;
  rep->flops = nc * elemat_flops_per_cell(r, &s);
  /* the matrices written, the factors, the cell map and ids read, the state when it is read */
  rep->bytes = (double)nc * n * n * w + nc * npts * fe_geo_stride(V->elem.dim) * w +
               nc * (V->elem.nbasis + 1) * 4.0 + (fe_codegen_needs(&s).need_u ? V->ndofs * w : 0);
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = setup;
  rep->launches = 1;
  FE_CHECK(fe_perf_predict(r->be, r->prec, rep));
  *K = k;
  return 0;
}

int fe_elemats_get(const fe_elemats *K, int cell, double *out)
{
  FE_ASSERT(cell >= 0 && cell < K->ncells, FE_ERR_ARG, "cell %d is not in 0..%d", cell,
            K->ncells - 1);
  size_t nn = (size_t)K->n * K->n, w = fe_precision_size(K->prec);
  if (K->prec == FE_DOUBLE)
    return K->be->ops->read(K->be->impl, &K->vals, (size_t)cell * nn * w, nn * w, out);
  float *f;
  FE_MALLOC(f, nn, "element matrix");
  int rc = K->be->ops->read(K->be->impl, &K->vals, (size_t)cell * nn * w, nn * w, f);
  for (size_t i = 0; !rc && i < nn; i++) out[i] = f[i];
  free(f);
  return rc;
}

int fe_elemats_convert(const fe_elemats *K, fe_backend *be, fe_precision prec, fe_elemats **out)
{
  size_t nn = (size_t)K->n * K->n, total = nn * K->ncells;
  double *v;
  FE_MALLOC(v, total + 1, "element matrices");
  int rc = 0;
  for (int c = 0; !rc && c < K->ncells; c++) rc = fe_elemats_get(K, c, v + (size_t)c * nn);
  fe_elemats *k = NULL;
  if (!rc && !(k = calloc(1, sizeof *k)))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    *k = *K;
    k->be = be;
    k->prec = prec;
    k->vals = (fe_buffer){0};
    rc = fe_upload_reals(be, prec, v, total, &k->vals);
  }
  free(v);
  if (rc) {
    fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = k;
  return 0;
}

void fe_elemats_free(fe_elemats *K)
{
  if (!K) return;
  if (K->vals.ptr) K->be->ops->release(K->be->impl, &K->vals);
  free(K);
}

/* ---- assembly ---- */

/* The CSR pattern of V's dofs: row i couples to every dof of the cells that hold i's node,
 * sorted; a fixed row holds its diagonal only and no free row holds a fixed column. */
static int build_pattern(const fe_space *V, const int *fixed, int **rowptr_out, int **cols_out)
{
  int nn = V->nnodes, nb = V->elem.nbasis, nc = V->ncomp, ncell = V->mesh->ncells;
  int nd = V->ndofs;
  int *start = calloc((size_t)nn + 1, sizeof(int)), *list = NULL, *mark = NULL, *nbr = NULL;
  int *rowptr = NULL, *cols = NULL, rc = 0;
  if (!start) FE_ERROR(FE_ERR_MEM, "out of host memory for the matrix pattern");
  for (size_t i = 0; i < (size_t)ncell * nb; i++) start[V->cell_nodes[i] + 1]++;
  for (int a = 0; a < nn; a++) start[a + 1] += start[a];
  list = malloc(sizeof(int) * ((size_t)ncell * nb + 1));
  mark = malloc(sizeof(int) * ((size_t)nn + 1));
  nbr = malloc(sizeof(int) * ((size_t)ncell * nb + 1)); /* one node's neighbours, at most */
  rowptr = malloc(sizeof(int) * ((size_t)nd + 1));
  if (!list || !mark || !nbr || !rowptr) {
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the matrix pattern");
    goto done;
  }
  {
    int *fill = malloc(sizeof(int) * ((size_t)nn + 1));
    if (!fill) {
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
      goto done;
    }
    memcpy(fill, start, sizeof(int) * (size_t)nn);
    for (int c = 0; c < ncell; c++)
      for (int b = 0; b < nb; b++) list[fill[V->cell_nodes[(size_t)c * nb + b]]++] = c;
    free(fill);
  }
  for (int a = 0; a < nn; a++) mark[a] = -1;
  /* two passes: count (cols NULL), then fill */
  for (int pass = 0; pass < 2 && !rc; pass++) {
    long long nz = 0;
    for (int a = 0; a < nn; a++) {
      int m = 0;
      for (int t = start[a]; t < start[a + 1]; t++) {
        const int *nodes = V->cell_nodes + (size_t)list[t] * nb;
        for (int b = 0; b < nb; b++)
          if (mark[nodes[b]] != a) {
            mark[nodes[b]] = a;
            nbr[m++] = nodes[b];
          }
      }
      if (pass) { /* sort the neighbours (insertion: rows are short) */
        for (int i = 1; i < m; i++) {
          int v = nbr[i], j = i - 1;
          while (j >= 0 && nbr[j] > v) nbr[j + 1] = nbr[j], j--;
          nbr[j + 1] = v;
        }
      }
      for (int k = 0; k < nc; k++) {
        int gi = a * nc + k;
        if (!pass) rowptr[gi] = (int)nz;
        if (fixed[gi]) {
          if (pass) cols[nz] = gi;
          nz++;
          continue;
        }
        for (int i = 0; i < m; i++)
          for (int kk = 0; kk < nc; kk++) {
            int gj = nbr[i] * nc + kk;
            if (fixed[gj]) continue;
            if (pass) cols[nz] = gj;
            nz++;
          }
      }
      if (nz > 2147483647LL) {
        rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "the matrix has more than "
                          "2^31 nonzeros (int indices)");
        break;
      }
    }
    if (!pass && !rc) {
      rowptr[nd] = (int)nz;
      cols = malloc(sizeof(int) * ((size_t)nz + 1));
      if (!cols) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for %lld nonzeros", nz);
      for (int a = 0; a < nn; a++) mark[a] = -1;
    }
  }
done:
  free(start);
  free(list);
  free(mark);
  free(nbr);
  if (rc) {
    free(rowptr);
    free(cols);
    return rc;
  }
  *rowptr_out = rowptr;
  *cols_out = cols;
  return 0;
}

/* The fe_spmv kernel of M, from the elemat module's source of realization r. */
static int csr_module(fe_csr *M, const fe_realization *r, double *seconds)
{
  char *src;
  int cached = 0;
  FE_CHECK(fe_elemat_source(r, M->lanes, &src));
  int rc = M->be->ops->compile(M->be->impl, src, &M->mod, seconds, &cached);
  free(src);
  FE_CHECK(rc);
  return M->be->ops->kernel(M->be->impl, M->mod, "fe_spmv", &M->spmv);
}

int fe_operator_assemble(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_csr **Mout, fe_report *rep)
{
  *Mout = NULL;
  int asked = o ? o->lanes : 0;
  FE_ASSERT(asked >= 0 && asked <= 64 && !(asked & (asked - 1)), FE_ERR_ARG, "lanes = %d: the "
            "items per row of the CSR product must be a power of two up to 64", asked);
  const fe_space *V = A->V;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  double t0 = fe_clock();
  fe_elemats *K = NULL;
  fe_report krep;
  FE_CHECK(fe_element_matrices(A, at, o, NULL, NULL, &K, &krep));
  fe_action_opts oo;
  if (o) oo = *o;
  else fe_action_opts_default(&oo);
  oo.strategy = "transpose";
  fe_realization *r;
  char why[160];
  int rc = fe_operator_realize(A, &oo, &r, why, sizeof why);
  int *fixed = calloc((size_t)nd + 1, sizeof(int)), *rowptr = NULL, *cols = NULL;
  double *vals = NULL;
  fe_csr *M = calloc(1, sizeof *M);
  fe_buffer bcells = {0}, bfixed = {0};
  fe_kernel *kasm = NULL;
  double compile_s = krep.compile_seconds, seconds = 0;
  if (!rc && (!fixed || !M)) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (int i = 0; !rc && i < fe_operator_ndirichlet(A); i++) fixed[A->dir_nodes[i]] = 1;
  if (!rc) rc = build_pattern(V, fixed, &rowptr, &cols);
  if (!rc) {
    int lanes = oo.lanes > 0 ? oo.lanes : r->be->info.is_gpu ? 4 : 1; /* measured, H100 P1 */
    *M = (fe_csr){.be = r->be, .prec = r->prec, .n = nd, .nnz = rowptr[nd], .lanes = lanes};
    vals = calloc((size_t)M->nnz + 1, sizeof(double));
    if (!vals) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
    for (int i = 0; !rc && i < nd; i++)
      if (fixed[i]) vals[rowptr[i]] = 1; /* the identity's row */
  }
  if (!rc) rc = fe_upload_ints(r->be, rowptr, (size_t)nd + 1, &M->rowptr);
  if (!rc) rc = fe_upload_ints(r->be, cols, (size_t)M->nnz, &M->cols);
  if (!rc) rc = fe_upload_reals(r->be, r->prec, vals, (size_t)M->nnz, &M->vals);
  if (!rc) rc = fe_upload_ints(r->be, V->cell_nodes, (size_t)nc * nb, &bcells);
  if (!rc) rc = fe_upload_ints(r->be, fixed, (size_t)nd, &bfixed);
  if (!rc) {
    double cs;
    rc = csr_module(M, r, &cs);
    compile_s += cs;
  }
  if (!rc) rc = r->be->ops->kernel(r->be->impl, M->mod, "fe_assemble", &kasm);
  double setup = fe_clock() - t0 - compile_s;
  if (!rc) {
    long long rows = (long long)nc * K->n, ng = (rows + EM_ITEMS - 1) / EM_ITEMS;
    fe_arg args[8] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = nc},
        {.kind = FE_ARG_BUFFER, .buf = &bcells},
        {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
        {.kind = FE_ARG_BUFFER, .buf = &M->cols},
        {.kind = FE_ARG_BUFFER, .buf = &bfixed},
        {.kind = FE_ARG_BUFFER, .buf = &K->vals},
        {.kind = FE_ARG_BUFFER, .buf = &M->vals},
    };
    rc = r->be->ops->launch(r->be->impl, kasm, (size_t)ng, EM_ITEMS, 8, args, r->prec, &seconds);
  }
  if (bcells.ptr) r->be->ops->release(r->be->impl, &bcells);
  if (bfixed.ptr) r->be->ops->release(r->be->impl, &bfixed);
  free(fixed);
  free(rowptr);
  free(cols);
  free(vals);
  if (rc) {
    fe_elemats_free(K);
    fe_csr_free(M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  fe_report_begin(rep, "assemble", r->be, r->prec, "quadrature", "element matrices (reg_jac), "
                  "then atomic adds into a pattern built on the host");
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  double w = (double)fe_precision_size(r->prec), nk = (double)nc * K->n * K->n;
  /* the adds, then the element matrices' own work */
  rep->flops = nk + krep.flops;
  rep->bytes = nk * w + (double)M->nnz * (w + 4) + (nd + 1) * 4.0 + nc * nb * 4.0 + krep.bytes;
  rep->seconds = seconds + krep.seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = krep.transfer_seconds;
  rep->setup_seconds = setup - krep.seconds;
  rep->launches = 2;
  fe_elemats_free(K);
  FE_CHECK(fe_perf_predict(M->be, M->prec, rep));
  *Mout = M;
  return 0;
}

int fe_csr_launch(const fe_csr *M, fe_kernel *k, const fe_buffer *x, fe_buffer *y, double *seconds)
{
  int rows = EM_ITEMS / M->lanes, ng = (M->n + rows - 1) / rows;
  fe_arg args[7] = {
      {.kind = FE_ARG_INT, .i = ng},
      {.kind = FE_ARG_INT, .i = M->n},
      {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
      {.kind = FE_ARG_BUFFER, .buf = &M->cols},
      {.kind = FE_ARG_BUFFER, .buf = &M->vals},
      {.kind = FE_ARG_BUFFER, .buf = x},
      {.kind = FE_ARG_BUFFER, .buf = y},
  };
  return M->be->ops->launch(M->be->impl, k, (size_t)ng, EM_ITEMS, 7, args, M->prec, seconds);
}

int fe_csr_apply(fe_csr *M, const fe_vector *x, fe_vector **y, fe_report *rep)
{
  FE_ASSERT(x->n == M->n, FE_ERR_ARG, "the vector has %d entries but the matrix has %d rows",
            x->n, M->n);
  fe_vector *xc = NULL;
  double t0 = fe_clock(), transfer = 0, seconds = 0;
  if (x->be != M->be || x->prec != M->prec) {
    FE_CHECK(fe_vector_convert(x, M->be, M->prec, &xc));
    x = xc;
  }
  transfer = fe_clock() - t0;
  int made = *y == NULL, rc = 0;
  if (made) rc = fe_vector_create(M->be, M->prec, M->n, y);
  else FE_ASSERT((*y)->be == M->be && (*y)->prec == M->prec && (*y)->n == M->n, FE_ERR_ARG,
                 "the output vector does not match the matrix");
  if (!rc) rc = fe_csr_launch(M, M->spmv, &x->buf, &(*y)->buf, &seconds);
  fe_vector_free(xc);
  if (rc) {
    if (made) {
      fe_vector_free(*y);
      *y = NULL;
    }
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char why[64];
  snprintf(why, sizeof why, "%s CSR, %d item%s per row", M->lanes > 1 ? "vector" : "scalar",
           M->lanes, M->lanes > 1 ? "s" : "");
  fe_report_begin(rep, "spmv", M->be, M->prec, "csr", why);
  rep->ndofs = M->n;
  double w = (double)fe_precision_size(M->prec);
  rep->flops = 2.0 * M->nnz;
  rep->bytes = M->nnz * (w + 4) + (M->n + 1) * 4.0 + 2.0 * M->n * w;
  rep->seconds = seconds;
  rep->transfer_seconds = transfer;
  rep->launches = 1;
  return fe_perf_predict(M->be, M->prec, rep);
}

int fe_csr_get(const fe_csr *M, int **rowptr, int **cols, double **vals)
{
  size_t nz = (size_t)M->nnz, w = fe_precision_size(M->prec);
  *rowptr = malloc(sizeof(int) * ((size_t)M->n + 1));
  *cols = malloc(sizeof(int) * (nz + 1));
  *vals = malloc(sizeof(double) * (nz + 1));
  void *raw = malloc(w * (nz + 1));
  int rc = 0;
  if (!*rowptr || !*cols || !*vals || !raw)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the matrix");
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->rowptr, 0, sizeof(int) * ((size_t)M->n + 1), *rowptr);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->cols, 0, sizeof(int) * nz, *cols);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->vals, 0, w * nz, raw);
  for (size_t i = 0; !rc && i < nz; i++)
    (*vals)[i] = M->prec == FE_DOUBLE ? ((double *)raw)[i] : ((float *)raw)[i];
  free(raw);
  if (rc) {
    free(*rowptr);
    free(*cols);
    free(*vals);
    *rowptr = *cols = NULL;
    *vals = NULL;
  }
  return rc;
}

int fe_csr_export_mtx(const fe_csr *M, const char *path)
{
  int *rowptr, *cols;
  double *vals;
  FE_CHECK(fe_csr_get(M, &rowptr, &cols, &vals));
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f) {
    rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  } else {
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% written by felab\n");
    fprintf(f, "%d %d %lld\n", M->n, M->n, M->nnz);
    for (int i = 0; i < M->n; i++)
      for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
        fprintf(f, "%d %d %.17g\n", i + 1, cols[k] + 1, vals[k]);
    if (fclose(f)) rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  }
  free(rowptr);
  free(cols);
  free(vals);
  return rc;
}

void fe_csr_free(fe_csr *M)
{
  if (!M) return;
  fe_buffer *bufs[] = {&M->rowptr, &M->cols, &M->vals};
  for (int i = 0; i < 3; i++)
    if (bufs[i]->ptr) M->be->ops->release(M->be->impl, bufs[i]);
  if (M->mod) M->be->ops->module_free(M->be->impl, M->mod);
  free(M);
}
