/* Strategy "ebe" (element by element, Kiss et al.): every Jacobian action multiplies each
 * cell's element matrix by the cell's entries of the direction and adds the rows into y
 * (fe_ebe in engine/codegen/kernels/elemat.knl). No global matrix and no pattern. Like csr it
 * applies when the Jacobian does not depend on the state, and its residual and diagonal are
 * matrix-free (fe_stored_matrix_other). The transposed action BiCG needs comes from the
 * transposed physics' own element matrices, which are the transposes of these
 * (fe_operator_transpose). Two choices (Kiss et al. measure both):
 * - scatter: "atomic" (the default) adds each row atomically; "color" colors the cells so
 *   that no two cells of one color share a node and launches color by color with plain adds.
 *   Stored matrices and the cell map are sorted by color once, so that each launch streams
 *   a contiguous range (read through the color list, cells far apart, the cpu slows several
 *   times once the matrices outgrow its cache); recomputed ones come in the mesh's order
 *   and are read through the color list.
 * - recompute: false (the default) computes the element matrices once at setup and keeps
 *   them; true computes them again in every action into the same batch (engine/matrix/matrix.c),
 *   then multiplies: the on-the-fly variant. The batch holds every cell's matrix and is
 *   written and read back, so it saves neither memory nor traffic here: it measures what the
 *   element-matrix kernel costs per action. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/matrix/matrix.h"
#include "engine/operator/strategy.h"

#define EBE_ITEMS 128 /* EM_ITEMS of elemat.knl */

typedef struct ebe_data {
  fe_elemats *K;       /* the element matrices: kept (sorted by color with color), or
                        * recompute's batch (the mesh's order) */
  fe_buffer cells;     /* the mesh's cell map, in the order of K */
  int color;           /* 1: scatter by color (plain adds), 0: atomic adds */
  int recompute;       /* 1: K computed again in every action */
  int ncolors;
  int *color_start;    /* with color: color c's cells at positions [color_start[c],
                        * color_start[c + 1]) of the sorted order */
  fe_buffer order;     /* with color and recompute: the mesh's cells sorted by color */
  double em_flops, em_bytes; /* the element-matrix kernel's counts (its report) */
} ebe_data;

/* Its options, parsed (private to this file): block (of its element matrices), scatter
 * (atomic or color) and recompute. */
static const char *const ebe_options[] = {"block", "scatter", "recompute", NULL};
typedef struct ebe_opts {
  int block;     /* cells per work group of its elemat module (0: 32) */
  int scatter;   /* FE_SCATTER_AUTO, _ATOMIC or _COLOR */
  int recompute; /* 1: the element matrices computed in every action */
} ebe_opts;

static int ebe_read_options(const fe_options *g, const char *caller, void *opts)
{
  static const char *const scatters[] = {"auto", "atomic", NULL, "color"}; /* FE_SCATTER_* */
  ebe_opts *o = opts;
  FE_CHECK(fe_read_block(g, caller, &o->block));
  FE_CHECK(fe_option_choice(g, caller, "scatter", scatters, 4, "\"atomic\" (the default) "
                            "or \"color\" (plain adds, color by color) for strategy ebe "
                            "(\"nodes\" is sumfact's)", &o->scatter));
  return fe_option_boolean(g, caller, "recompute", "a boolean (strategy \"ebe\": the element "
                           "matrices computed in every action)", &o->recompute);
}

/* block 0 is 32, scatter "auto" is "atomic". */
static void ebe_effective_key(const fe_operator *A, fe_backend *be, fe_precision prec,
                              const void *opts, char *key, size_t n)
{
  (void)A, (void)be, (void)prec;
  const ebe_opts *o = opts;
  snprintf(key, n, "block=%d scatter=%s recompute=%d", o->block > 0 ? o->block : 32,
           o->scatter == FE_SCATTER_COLOR ? "color" : "atomic", o->recompute != 0);
}

static int ebe_configure(fe_realization *r, const void *opts)
{
  const ebe_opts *o = opts;
  FE_ASSERT(o->scatter != FE_SCATTER_NODES, FE_ERR_ARG, "ebe: scatter = \"nodes\" is sumfact's; "
            "ebe adds its rows by \"atomic\" (the default) or by \"color\"");
  ebe_data *d;
  FE_CALLOC(d, 1, "ebe data");
  r->data = d;
  r->block = o->block > 0 ? o->block : 32; /* the block of the elemat module's spec */
  r->colored = 0;                          /* ebe's colors are its own (d->color_start) */
  d->color = o->scatter == FE_SCATTER_COLOR;
  d->recompute = o->recompute != 0;
  return 0;
}

/* The mesh's cells sorted by color (no two cells of one color share a node:
 * fe_space_cell_colors) into *order, their starts into d; a mesh that needs more than the
 * coloring's 64 colors is refused. */
static int ebe_colors(fe_realization *r, int **order)
{
  ebe_data *d = r->data;
  const fe_space *V = r->A->V;
  int rc = fe_space_cell_colors(V, order, &d->color_start, &d->ncolors);
  if (rc == FE_ERR_MESH)
    FE_ERROR(rc, "ebe: scatter = \"color\": the %d cells of %s need more than 64 colors (no two "
             "cells of one color may share a node); use scatter = \"atomic\"",
             V->mesh->ncells, V->name);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

/* d->K's cells in the order `order`, through the host (once, at setup: two host copies). */
static int ebe_sort_matrices(fe_realization *r, const int *order)
{
  ebe_data *d = r->data;
  size_t nc = (size_t)d->K->ncells, block = (size_t)d->K->n * d->K->n * fe_precision_size(r->prec);
  FE_CHECK(fe_memory_check(2 * nc * block, "operator %s on %s: sorting %zu element matrices of "
                           "%d x %d by color (two host copies)", r->A->pde->name,
                           r->A->V->name, nc, d->K->n, d->K->n));
  char *from = fe_alloc(nc * block + 1), *to = fe_alloc(nc * block + 1);
  int rc = 0;
  if (!from || !to) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host "
                                      "memory for sorting %zu element matrices by color", nc);
  if (!rc) rc = r->be->ops->read(r->be->impl, &d->K->vals, 0, nc * block, from);
  for (size_t k = 0; !rc && k < nc; k++)
    memcpy(to + k * block, from + (size_t)order[k] * block, block);
  if (!rc) rc = r->be->ops->write(r->be->impl, &d->K->vals, 0, nc * block, to);
  free(from);
  free(to);
  return rc;
}

/* The cell map uploaded in the order `order` (NULL: the mesh's). */
static int ebe_upload_cells(fe_realization *r, const int *order)
{
  ebe_data *d = r->data;
  const fe_space *V = r->A->V;
  size_t nc = (size_t)V->mesh->ncells, nb = (size_t)V->elem.nbasis;
  FE_CHECK(fe_memory_check_on(r->be, sizeof(int) * nc * nb, "operator %s on %s: the cell map "
                              "(%zu cells of %zu nodes)", r->A->pde->name, V->name, nc, nb));
  if (!order) return fe_upload_ints(r->be, V->cell_nodes, nc * nb, &d->cells);
  FE_CHECK(fe_memory_check(sizeof(int) * nc * nb, "operator %s on %s: the cell map sorted by "
                           "color (%zu cells of %zu nodes)", r->A->pde->name, V->name, nc, nb));
  int *c;
  FE_MALLOC(c, nc * nb + 1, "cell map sorted by color");
  for (size_t k = 0; k < nc; k++)
    memcpy(c + k * nb, V->cell_nodes + (size_t)order[k] * nb, sizeof(int) * nb);
  int rc = fe_upload_ints(r->be, c, nc * nb, &d->cells);
  free(c);
  return rc;
}

/* The element matrices into d->K on r's backend and precision at the state u (NULL: zero):
 * made at setup, overwritten by recompute. */
static int ebe_matrices(fe_realization *r, const fe_vector *u, fe_report *rep)
{
  ebe_data *d = r->data;
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = r->be->name;
  o.precision = (int)r->prec;
  o.nolog = 1;
  fe_elemats *K = d->K; /* kept when the call fails */
  FE_CHECK(fe_element_matrices(r->A, u, &o, NULL, NULL, NULL, &K, rep));
  d->K = K;
  return 0;
}

static int ebe_setup(fe_realization *r)
{
  ebe_data *d = r->data;
  fe_report rep;
  FE_CHECK(ebe_matrices(r, NULL, &rep)); /* with recompute: the batch and its kernel made */
  d->em_flops = rep.flops;
  d->em_bytes = rep.bytes;
  /* the parts: the element matrices' own (geometry, cell map, matrices), their compile and
   * transfers; then the colors and the cell map in the product's order */
  fe_setup_parts_merge(&r->parts, &rep.parts);
  fe_setup_part_add(&r->parts, "compile", rep.compile_seconds, 0);
  fe_setup_part_add(&r->parts, "transfer", rep.transfer_seconds, 0);
  size_t n = (size_t)d->K->n, w = fe_precision_size(r->prec);
  fe_setup_part_add(&r->parts, "matrices", 0, d->recompute ? 0 : (double)(n * n * w) *
                    (double)r->A->V->mesh->ncells);
  double t0 = fe_clock();
  int *order = NULL, sort = d->color && !d->recompute;
  if (d->color) FE_CHECK(ebe_colors(r, &order));
  int rc = ebe_upload_cells(r, sort ? order : NULL);
  if (!rc && sort) rc = ebe_sort_matrices(r, order);
  if (!rc && order && !sort)
    rc = fe_upload_ints(r->be, order, (size_t)r->A->V->mesh->ncells, &d->order);
  free(order);
  fe_setup_part_add(&r->parts, d->color ? "format" : "cell_map", fe_clock() - t0,
                    4.0 * (double)r->A->V->mesh->ncells * (r->A->V->elem.nbasis + (d->color != 0)));
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

static void ebe_release(fe_realization *r)
{
  ebe_data *d = r->data;
  if (!d) return;
  fe_elemats_free(d->K);
  if (d->cells.ptr) r->be->ops->release(r->be->impl, &d->cells);
  if (d->order.ptr) r->be->ops->release(r->be->impl, &d->order);
  free(d->color_start);
  free(d);
  r->data = NULL;
}

static const char *ebe_entry(fe_action a)
{
  (void)a;
  return "fe_ebe"; /* the residual and the diagonal go through "transpose" */
}

static int ebe_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  (void)a, (void)preamble; /* one module for every action: fe_ebe and fe_dirichlet */
  return fe_elemat_source(r, src);
}

/* One launch of fe_ebe over count cells from position first: of K's order, or with gather
 * of d->order; plain adds (cells of one color) or atomic ones. */
static int ebe_launch(fe_realization *r, int first, int count, int plain, int gather,
                      const fe_vector *w, fe_vector *y)
{
  ebe_data *d = r->data;
  long long rows = (long long)count * d->K->n;
  fe_arg args[10] = {
      {.kind = FE_ARG_INT, .i = (rows + EBE_ITEMS - 1) / EBE_ITEMS},
      {.kind = FE_ARG_INT, .i = count},
      {.kind = FE_ARG_INT, .i = first},
      {.kind = FE_ARG_INT, .i = plain},
      {.kind = FE_ARG_INT, .i = gather},
      {.kind = FE_ARG_BUFFER, .buf = gather ? &d->order : &d->cells}, /* unread without gather */
      {.kind = FE_ARG_BUFFER, .buf = &d->cells},
      {.kind = FE_ARG_BUFFER, .buf = &d->K->vals},
      {.kind = FE_ARG_BUFFER, .buf = &w->buf},
      {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  return r->be->ops->launch(r->be->impl, r->kernel[FE_ACTION_APPLY], (size_t)args[0].i,
                            EBE_ITEMS, 10, args, r->prec, NULL);
}

static int ebe_integrate(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                         fe_vector *y, int *launches)
{
  if (a != FE_ACTION_APPLY) return fe_stored_matrix_other(r, a, u, y, launches);
  ebe_data *d = r->data;
  if (d->recompute) { /* K <- the element matrices (the Jacobian does not depend on u) */
    fe_report rep;
    FE_CHECK(ebe_matrices(r, u, &rep));
    *launches += rep.launches;
  }
  if (!d->color) {
    FE_CHECK(ebe_launch(r, 0, d->K->ncells, 0, 0, w, y));
    (*launches)++;
    return 0;
  }
  for (int c = 0; c < d->ncolors; c++) { /* in order: a color's adds follow the last's */
    int first = d->color_start[c], count = d->color_start[c + 1] - first;
    FE_CHECK(ebe_launch(r, first, count, 1, d->recompute, w, y));
    (*launches)++;
  }
  return 0;
}

/* The product: 2 flops per matrix entry; the matrices and the cell map read once, w gathered
 * and y added (at least once each). */
static void ebe_product(const fe_operator *A, fe_precision prec, double *flops, double *bytes)
{
  const fe_space *V = A->V;
  double w = (double)fe_precision_size(prec), nc = V->mesh->ncells;
  double n = (double)V->elem.nbasis * V->ncomp;
  *flops = 2 * nc * n * n;
  *bytes = nc * n * n * w + nc * V->elem.nbasis * 4.0 + 3.0 * V->ndofs * w;
}

/* The product's loads of x at the cells' nodes beyond the minimal bytes (from L2), and its
 * atomic adds (none when colored: plain adds, color by color). */
static void ebe_traffic(const fe_operator *A, fe_precision prec, int color, fe_work *w)
{
  const fe_space *V = A->V;
  double n = (double)V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  w->l2_bytes = nc * n * (double)fe_precision_size(prec);
  w->atomics = color ? 0 : nc * n;
  w->indexed = 2 * nc * n; /* x gathered and y added through the cell map */
  w->indexed_first = 2.0 * V->nnodes * V->ncomp; /* each node's first touch */
}

/* Before setup: the default variant (matrices stored, atomic adds). */
static void ebe_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         fe_action a, fe_work *w)
{
  if (a != FE_ACTION_APPLY) {
    fe_strategy_transpose.estimate(A, be, prec, a, w);
    return;
  }
  ebe_product(A, prec, &w->flops, &w->bytes);
  ebe_traffic(A, prec, 0, w);
}

/* The product, plus the color list read once when recomputed ones are colored, plus the
 * element-matrix kernel's own counts (its flops; the matrices it writes, its factors, cell
 * map and ids it reads), since the batch is written and read back in every action. */
static void ebe_count(const fe_realization *r, fe_action a, fe_work *w)
{
  const ebe_data *d = r->data;
  if (a != FE_ACTION_APPLY) {
    fe_strategy_transpose.estimate(r->A, r->be, r->prec, a, w);
    return;
  }
  ebe_product(r->A, r->prec, &w->flops, &w->bytes);
  ebe_traffic(r->A, r->prec, d->color, w);
  if (d->recompute) {
    if (d->color) w->bytes += 4.0 * r->A->V->mesh->ncells;
    w->flops += d->em_flops;
    w->bytes += d->em_bytes;
  }
}

/* ebe is never the default: it measured slower than csr wherever both ran, on a GPU and on
 * the cpu (docs/benchmarks.md). */
static int ebe_measured(const fe_operator *A, const fe_backend *be, fe_precision prec, char *why,
                        size_t n)
{
  (void)A, (void)be, (void)prec;
  snprintf(why, n, "applies, but slower than csr in the runs of docs/benchmarks.md: ask for it by name");
  return -1;
}

static void ebe_describe(const fe_realization *r, fe_action a, char *buf, size_t n)
{
  const ebe_data *d = r->data;
  if (a != FE_ACTION_APPLY) snprintf(buf, n, "matrix-free by transpose");
  else if (d->color) snprintf(buf, n, "matrices %s, adds by color (%d colors)",
                              d->recompute ? "recomputed" : "stored", d->ncolors);
  else snprintf(buf, n, "matrices %s, atomic adds", d->recompute ? "recomputed" : "stored");
}

const fe_strategy fe_strategy_ebe = {
    .name = "ebe",
    .summary = "element by element: each action multiplies the element matrices cell by cell "
               "(Kiss et al.); matrices stored on the device, or with recompute = true computed "
               "in every action; rows added atomically, or with scatter = \"color\" color by "
               "color with plain adds",
    .applies = fe_stored_matrix_applies,
    .options = ebe_options,
    .options_size = sizeof(ebe_opts),
    .read_options = ebe_read_options,
    .effective_key = ebe_effective_key,
    .configure = ebe_configure,
    .setup = ebe_setup,
    .release = ebe_release,
    .source = ebe_source,
    .entry = ebe_entry,
    .integrate = ebe_integrate,
    .count = ebe_count,
    .estimate = ebe_estimate,
    .measured = ebe_measured,
    .stores_matrix = 1,
    .delegate = fe_stored_matrix_delegate,
    .describe = ebe_describe,
};
