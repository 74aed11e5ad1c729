/* felab element matrices, strategy "tensor": reference-tensor contraction (Kirby, Knepley,
 * Logg and Scott; on GPUs Knepley and Terrel). Kernel: engine/codegen/kernels/tensor.knl.
 *
 * On an affine simplex with a linearization that is constant per cell, the element matrix
 * is a contraction K = R : G. At a point the linearization is [df0; df1] = M [w; dw] with M
 * constant on the cell, so with slots alpha = 0 (a basis value) and alpha = 1 + a (its
 * reference derivative d/dxi_a):
 *   K[(bi,ki)][(bj,kj)] = sum_{alpha,beta} R[bi][bj][alpha][beta] G[ki][kj][alpha][beta],
 *   R[bi][bj][alpha][beta] = integral over the reference cell of slot alpha of phi_bi times
 *                            slot beta of phi_bj   (once, on the host, at the apply rule),
 *   G[ki][kj][alpha][beta] = det J (P M P^T)[(ki,alpha)][(kj,beta)],  P = diag(1, J^{-1})
 *                            per component (per cell, in the kernel).
 * The kernel finds M itself by calling the generated fe_df with unit trial vectors, so
 * any such physics works, scalar or vector, with per-cell constants a[] and named constants
 * k[]. Blocks of M the physics does not have (its g0..g3, or df0/df1 when it has no blocks)
 * are left out of R, G and the contraction at code generation. The matrices match strategy
 * "quadrature" entry by entry: same rule, same stored factors, same dof order. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/fem/element.h"
#include "engine/core/error.h"
#include "engine/matrix/matrix-private.h"
#include "engine/operator/strategy.h"
#include "engine/core/strbuf.h"

#define TN_ITEMS 256     /* items a GPU group aims at in the contraction phase (measured
                          * faster than 512 and 1024) */
#define TN_BLOCK 32      /* default cells per group, halved until shared memory fits */
#define TN_MAX_BLOCK 4096

/* The blocks of M the kernel keeps: w -> df0, dw -> df0, w -> df1, dw -> df1. */
typedef struct tensor_blocks {
  int vv, vg, gv, gg;
} tensor_blocks;

/* Terms per (ki, kj) and per (bi, bj) (tensor.knl's TN_NGK). */
static int tensor_terms(const tensor_blocks *u, int dim)
{
  return u->vv + dim * u->vg + dim * u->gv + dim * dim * u->gg;
}

/* Whether a C statement body reads the array `name` (an identifier followed by '['); the
 * first index, when it is a literal, in *index (else -1). */
static int body_reads(const char *body, const char *name, int *index)
{
  size_t n = strlen(name);
  for (const char *p = body ? strstr(body, name) : NULL; p; p = strstr(p + 1, name)) {
    int alone = (p == body || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'));
    const char *q = p + n;
    while (*q == ' ') q++;
    if (!alone || *q != '[') continue;
    if (index) {
      char *end;
      long v = strtol(q + 1, &end, 10);
      while (*end == ' ') end++;
      *index = end > q + 1 && (*end == ']' || *end == '*' || *end == '+') ? (int)v : -1;
    }
    return 1;
  }
  return 0;
}

/* The auxiliary field that holds field value i (the first field when i is unknown). */
static const char *field_of_value(const fe_physics *p, int i)
{
  for (int f = 0, off = 0; f < p->nfields; off += p->field_ncomp[f], f++)
    if (i >= off && i < off + p->field_ncomp[f]) return p->field_names[f];
  return p->nfields ? p->field_names[0] : "?";
}

static const char *cell_plural(fe_cell_type t)
{
  switch (t) {
  case FE_CELL_TRI: return "triangles";
  case FE_CELL_QUAD: return "quadrilaterals";
  case FE_CELL_TET: return "tetrahedra";
  case FE_CELL_HEX: return "hexahedra";
  case FE_CELL_PRISM: return "prisms";
  }
  return "cells";
}

/* 0 when strategy "tensor" computes A's element matrices, else FE_ERR_UNAVAILABLE with what
 * stops it: cells whose map is not affine, or a linearization that is not constant per cell
 * (it reads the state, x or an auxiliary field). */
static int tensor_applies(const fe_operator *A)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const char *head = "element matrices: strategy \"tensor\" (Knepley-Terrel) needs a Jacobian "
                     "constant per cell";
  if (!A->geo_affine) {
    int simplex = V->elem.cell == FE_CELL_TRI || V->elem.cell == FE_CELL_TET;
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s; %s%s: the Jacobian of the map is not constant per cell "
             "(use \"quadrature\")", head, simplex ? "curved " : "", cell_plural(V->elem.cell));
  }
  fe_kernel_spec s = {.V = V, .pde = p, .quad = &A->quad[FE_ACTION_APPLY],
                      .action = FE_ACTION_APPLY};
  const char *body[2] = {p->df0, p->df1};
  int reads_u = fe_codegen_needs(&s).need_u || p->nonlinear;
  for (int i = 0; i < 2; i++) reads_u = reads_u || body_reads(body[i], "u", NULL) ||
                                        body_reads(body[i], "du", NULL);
  FE_ASSERT(!reads_u, FE_ERR_UNAVAILABLE, "%s; the Jacobian of %s depends on the state "
            "(nonlinear): use \"quadrature\"", head, p->name);
  for (int i = 0; i < 2 && p->uses_x; i++)
    FE_ASSERT(!body_reads(body[i], "x", NULL), FE_ERR_UNAVAILABLE, "%s; the Jacobian of %s "
              "depends on x (a coefficient that varies inside a cell): use \"quadrature\"", head,
              p->name);
  for (int i = 0; i < 2 && p->nfields; i++) {
    int v = -1, g = -1;
    int f = body_reads(body[i], "f", &v), df = body_reads(body[i], "df", &g);
    FE_ASSERT(!f && !df, FE_ERR_UNAVAILABLE, "%s; the Jacobian of %s depends on the auxiliary "
              "field '%s': use \"quadrature\"", head, p->name,
              field_of_value(p, f ? v : g >= 0 ? g / V->elem.dim : -1));
  }
  return 0;
}

/* The blocks of M the physics has: its Jacobian blocks g0..g3 when it has them (traced or
 * raw physics), else all of df0's or df1's. At least one, so the tables are not empty. */
static tensor_blocks tensor_used(const fe_physics *p)
{
  tensor_blocks u;
  if (p->g[0] || p->g[1] || p->g[2] || p->g[3])
    u = (tensor_blocks){!!p->g[0], !!p->g[1], !!p->g[2], !!p->g[3]};
  else
    u = (tensor_blocks){!!p->df0, !!p->df0, !!p->df1, !!p->df1};
  if (!u.vv && !u.vg && !u.gv && !u.gg) u.vv = 1; /* a zero Jacobian: one zero term */
  return u;
}

/* The reference tensor R[(bi NB + bj) NGK + o] at rule Q, o over the used blocks in the
 * order vv | vg[b] | gv[a] | gg[a][b], as a constant table in *tables. */
static int tensor_reference(const fe_element *el, const fe_quadrature *Q, const tensor_blocks *u,
                            char **tables)
{
  int nb = el->nbasis, nq = Q->npoints, dim = el->dim, ngk = tensor_terms(u, dim);
  double *B = malloc(sizeof(double) * nq * nb), *D = malloc(sizeof(double) * nq * nb * dim);
  double *R = calloc((size_t)nb * nb * ngk, sizeof(double));
  if (!B || !D || !R) {
    free(B);
    free(D);
    free(R);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the reference tensor (%d x %d x %d)", nb, nb, ngk);
  }
  fe_element_tabulate(el, nq, Q->points, B, D);
  for (int q = 0; q < nq; q++) {
    const double wq = Q->weights[q], *Bq = B + q * nb, *Dq = D + q * nb * dim;
    for (int i = 0; i < nb; i++)
      for (int j = 0; j < nb; j++) {
        double *r = R + ((size_t)i * nb + j) * ngk;
        int o = 0;
        if (u->vv) r[o++] += wq * Bq[i] * Bq[j];
        for (int b = 0; u->vg && b < dim; b++) r[o++] += wq * Bq[i] * Dq[j * dim + b];
        for (int a = 0; u->gv && a < dim; a++) r[o++] += wq * Dq[i * dim + a] * Bq[j];
        for (int a = 0; u->gg && a < dim; a++)
          for (int b = 0; b < dim; b++) r[o++] += wq * Dq[i * dim + a] * Dq[j * dim + b];
      }
  }
  fe_strbuf t = {0};
  fe_strbuf_printf(&t, "\n/* reference tensor at %d points (degree %d): R[(bi*NB + bj)*TN_NGK + o]"
                       " = integral of (phi_bi | dphi_bi/dxi_a) (phi_bj | dphi_bj/dxi_b),\n"
                       " * o over the blocks%s%s%s%s */\n", nq, Q->degree, u->vv ? " vv" : "",
                   u->vg ? " vg[b]" : "", u->gv ? " gv[a]" : "", u->gg ? " gg[a][b]" : "");
  fe_codegen_table(&t, "R", R, nb * nb * ngk);
  free(B);
  free(D);
  free(R);
  return fe_strbuf_finish(&t, tables);
}

/* Counted flops of one cell, as tensor.knl does them: the probes, the pull-backs into G,
 * and the contraction (a multiply and an add per term of every entry). */
static double tensor_flops_per_cell(const fe_operator *A, const tensor_blocks *u)
{
  const fe_space *V = A->V;
  double nc = V->ncomp, dim = V->elem.dim, n = V->elem.nbasis * nc, nf = nc * (1 + dim);
  double probes = nc * (1 + dim) * A->pde->flops_df;
  double trial = (u->vg || u->gg) ? nc * dim * nf * 2 * dim : 0;
  double pull = u->vv + dim * u->vg + (dim * u->gv + dim * dim * u->gg) * (2 * dim + 1);
  return probes + trial + nc * nc * pull + 2.0 * n * n * tensor_terms(u, V->elem.dim);
}

/* Shared memory of a group of `block` cells (tensor.knl): the geometric tensors, `terms`
 * reals per cell at an odd stride, and the cells' ids. */
static size_t tensor_shared(int block, size_t terms, size_t w)
{
  return terms * w * (size_t)(block | 1) + (size_t)block * sizeof(int);
}

/* Cells per group: asked (checked against shared memory), else TN_BLOCK halved to fit. */
static int tensor_block(const fe_backend *be, const fe_space *V, int asked, size_t terms,
                        size_t w, int *block)
{
  size_t limit = fe_shared_limit(be);
  if (asked <= 0) {
    int b = TN_BLOCK;
    while (b > 1 && tensor_shared(b, terms, w) > limit) b /= 2;
    *block = b;
    return 0;
  }
  FE_ASSERT(asked <= TN_MAX_BLOCK, FE_ERR_ARG, "element matrices (tensor): block = %d cells per "
            "work group is too large (at most %d)", asked, TN_MAX_BLOCK);
  size_t need = tensor_shared(asked, terms, w);
  FE_ASSERT(need <= limit || asked == 1, FE_ERR_ARG, "element matrices (tensor): block = %d "
            "cells of %s need %zu bytes of shared memory per work group; %s allows %zu (use a "
            "smaller block)", asked, V->name, need, be->name, limit);
  *block = asked;
  return 0;
}

/* The kernel's source for r with `block` cells per group and `conc` concurrent cells. */
static int tensor_source(const fe_realization *r, const tensor_blocks *u, int block, int conc,
                         char **src)
{
  const fe_operator *A = r->A;
  char *tables, defines[256];
  FE_CHECK(tensor_reference(&A->V->elem, &A->quad[FE_ACTION_APPLY], u, &tables));
  snprintf(defines, sizeof defines, "#define TN_VV %d\n#define TN_VG %d\n#define TN_GV %d\n"
           "#define TN_GG %d /* blocks of the linearization kept */\n"
           "#define TN_CONC %d /* cells contracted concurrently per entry */\n",
           u->vv, u->vg, u->gv, u->gg, conc);
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.block = block;
  s.dense = 0; /* no B, D, W: R replaces them */
  s.template_name = "tensor";
  s.defines = defines;
  s.tables = tables;
  int rc = fe_codegen_action(&s, r->be->name, r->be->ops->preamble(r->be->impl, r->prec), src);
  free(tables);
  return rc;
}

/* One launch of the contraction kernel into k->vals: ngroups groups of `block` cells, each
 * as many items as conc cells' entries or its probes (whole warps, up to the device's
 * largest group). */
static int tensor_launch(const fe_realization *r, fe_kernel *kern, int ngroups, int block,
                         int conc, const fe_buffer *ids, fe_elemats *k, double *seconds)
{
  const fe_space *V = r->A->V;
  const int nc = V->ncomp, n = V->elem.nbasis * nc;
  fe_arg args[8] = {
      {.kind = FE_ARG_INT, .i = ngroups},
      {.kind = FE_ARG_INT, .i = (long long)r->npad},
      {.kind = FE_ARG_INT, /* geo_n: one set of factors a cell, or a class */
       .i = (long long)fe_geometry_plane(r->A, &r->A->quad[FE_ACTION_APPLY], r->npad,
                                         r->geo_shared)},
      {.kind = FE_ARG_BUFFER, .buf = &r->geo[FE_ACTION_APPLY]},
      {.kind = FE_ARG_BUFFER, .buf = &r->aux},
      {.kind = FE_ARG_BUFFER, .buf = &r->params},
      {.kind = FE_ARG_BUFFER, .buf = ids},
      {.kind = FE_ARG_BUFFER, .buf = &k->vals},
  };
  size_t items = (size_t)conc * n * n, probes = (size_t)block * nc;
  if (items < probes) items = probes;
  size_t gs = (items + 31) / 32 * 32;
  if (gs > r->be->info.max_group) gs = r->be->info.max_group;
  return r->be->ops->launch(r->be->impl, kern, (size_t)ngroups, gs, 8, args, r->prec, seconds);
}

/* The report of one call: its line, the counted flops and bytes, the stage times, the
 * model's prediction (its code). */
static int tensor_report(fe_operator *A, const fe_realization *r, const tensor_blocks *u,
                         int block, int conc, double compile_s, double transfer, double setup,
                         double seconds, fe_report *rep)
{
  const fe_space *V = A->V;
  const int dim = V->elem.dim, nc = V->ncomp, n = V->elem.nbasis * nc, ncells = V->mesh->ncells;
  const int ngk = tensor_terms(u, dim);
  size_t w = fe_precision_size(r->prec);
  char line[160];
  snprintf(line, sizeof line, "reference tensor contraction: %d terms per entry, G per cell from "
           "%d probes; %d cells per group, %d concurrent", ngk, nc * (1 + dim), block, conc);
  fe_report_begin(rep, "element_matrices", r->be, r->prec, "tensor", line);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  rep->flops = ncells * tensor_flops_per_cell(A, u);
  /* the matrices written; per cell its factors, constants and id read; the named constants */
  rep->bytes = (double)ncells * n * n * w +
               (double)ncells * ((fe_geo_stride(dim) + A->pde->naux) * (double)w + 4.0) +
               A->pde->nconst * (double)w;
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = setup;
  rep->launches = 1;
  return fe_perf_predict(r->be, r->prec, rep);
}

/* What the contraction kernel is compiled from (elemat_kernel, on its first use): the source
 * for r of `block` cells per group, `conc` at once. */
typedef struct tensor_job {
  const fe_realization *r;
  const tensor_blocks *u;
  int block, conc;
} tensor_job;

static int tensor_write(const void *ctx, char **src)
{
  const tensor_job *j = ctx;
  return tensor_source(j->r, j->u, j->block, j->conc, src);
}

/* The matrices to write: reuse (checked against r), or a new batch on r's backend. */
static int tensor_target(const fe_realization *r, fe_elemats *reuse, fe_elemats **kout)
{
  const fe_space *V = r->A->V;
  const int n = V->elem.nbasis * V->ncomp, ncells = V->mesh->ncells;
  fe_elemats *k = reuse;
  if (k) {
    FE_ASSERT(k->V == V && k->be == r->be && k->prec == r->prec, FE_ERR_ARG, "element matrices "
              "to overwrite must be of this operator's space, backend and precision");
    *kout = k;
    return 0;
  }
  FE_CALLOC(k, 1, "element matrices");
  *k = (fe_elemats){.V = V, .be = r->be, .prec = r->prec, .ncells = ncells, .n = n};
  int rc = r->be->ops->alloc(r->be->impl, (size_t)ncells * n * n * fe_precision_size(r->prec),
                             &k->vals);
  if (rc) {
    free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *kout = k;
  return 0;
}

int fe_element_matrices_tensor(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                               const fe_matrix_opts *mo, fe_elemats **K, fe_report *rep)
{
  fe_elemats *reuse = *K; /* matrices to overwrite, or NULL */
  *K = NULL;
  FE_CHECK(tensor_applies(A));
  FE_ASSERT(!at || at->n == A->V->ndofs, FE_ERR_ARG, "the state has %d entries but the "
            "operator's space has %d", at ? at->n : 0, A->V->ndofs);
  double t0 = fe_clock(), compile_s = 0, transfer = 0, seconds = 0;
  fe_realization *r;
  /* its own block: the realization's groups only order the stored cells */
  FE_CHECK(fe_operator_realize_geometry(A, o, 0, mo ? mo->geometry : FE_GEOMETRY_AUTO, &r));
  const fe_space *V = A->V;
  const tensor_blocks u = tensor_used(A->pde);
  const int nc = V->ncomp, n = V->elem.nbasis * nc, ngk = tensor_terms(&u, V->elem.dim);
  int block = 0, in_order = r->be->info.items_in_order;
  FE_CHECK(tensor_block(r->be, V, mo ? mo->block : 0, (size_t)nc * nc * ngk,
                        fe_precision_size(r->prec), &block));
  /* the cpu walks a group's items in order: all cells at once keeps a matrix's stores
   * contiguous; a GPU group holds about TN_ITEMS (cell, entry) items */
  int conc = in_order ? block : TN_ITEMS / (n * n);
  if (conc < 1) conc = 1;
  if (conc > block) conc = block;
  int ngroups = (int)((r->npad + block - 1) / block);

  fe_kernel *kern = NULL;
  fe_elemats *k = NULL;
  fe_vector *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  elemat_key key = elemat_key_of(r, &fe_elemat_tensor, -1, block, conc);
  tensor_job job = {r, &u, block, conc};
  int rc = elemat_kernel(A, &key, tensor_write, &job, "fe_elemat_tensor", &kern, &compile_s);
  if (!rc) rc = tensor_target(r, reuse, &k);
  if (!rc) rc = fe_realization_stored_maps(r); /* the mesh cell of each stored cell */
  if (!rc) rc = fe_realization_bind(r, tf, &transfer); /* the named constants */
  double setup = fe_clock() - t0 - compile_s - transfer;
  if (!rc) rc = tensor_launch(r, kern, ngroups, block, conc, &r->stored_ids, k, &seconds);
  fe_realization_unbind(r, tf);
  if (!rc) rc = tensor_report(A, r, &u, block, conc, compile_s, transfer, setup, seconds, rep);
  if (rc) {
    if (k != reuse) fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *K = k;
  return 0;
}

/* Method "tensor" of element matrices (fe_elemat_method): it takes no variant. */
static int elemat_tensor_make(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                              const fe_matrix_opts *mo, const char *variant, fe_elemats **K,
                              fe_report *rep)
{
  (void)variant; /* fe_element_matrices refuses one */
  return fe_element_matrices_tensor(A, at, o, mo, K, rep);
}

const fe_elemat_method fe_elemat_tensor = {
    "tensor", "reference tensors contracted with a geometric tensor a cell (Knepley-Terrel)", 0,
    elemat_tensor_make};
