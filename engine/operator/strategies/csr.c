/* Strategy "csr": the Jacobian assembled once (engine/matrix/: element matrices, then
 * atomic adds into a pattern from the dof map), then every Jacobian action is one CSR
 * product (fe_spmv in engine/codegen/kernels/sparse.knl, `lanes` items per row), or with format
 * "sell" one SELL-C-sigma product (fe_spmv_sell, one item per row), or with "cusparse"
 * cuSPARSE's (cuda; the reference the others are held against). The matrix holds the
 * constrained rows as the identity's and no constrained column, so it masks the direction
 * itself. The residual and the diagonal are computed matrix-free by "transpose" (the matrix
 * would give the same diagonal; the residual needs the physics at the state). Applies to
 * physics whose Jacobian does not depend on the state (one assembly serves every call).
 * On a space split over the ranks, where phases are wanted (fe_realization_wants_phases), the
 * apply runs in two (fe_realization's phased): the rows of the shared dofs (fe_spmv_rows or
 * fe_spmv_sell_rows), then, while the exchange of their sums travels, the whole product, which
 * writes those rows' same bits again (each row's sum by the same code in both kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix.h"
#include "engine/operator/strategy.h"
#include "engine/parallel/dist.h"

typedef struct csr_data {
  fe_csr *M;
  int shared; /* M was A:assemble's (fe_operator_assembled_find), not made here */
  /* a split space's apply in two phases (r->phased): its first phase's rows, the shared
   * dofs (the dist's shared_at), as fe_csr_launch_rows reads them, their count and entries,
   * and the kernel (of the module whose product the second phase runs) */
  fe_buffer rows;
  int nrows;
  long long rows_nnz;
  fe_kernel *rows_kernel;
} csr_data;

int fe_stored_matrix_applies(const fe_operator *A, const fe_backend *be, fe_precision prec,
                             char *why, size_t n)
{
  if (fe_dense_tables_fit(A, be, prec, why, n)) return 1;
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[FE_ACTION_APPLY],
                      .action = FE_ACTION_APPLY, .prec = prec};
  if (fe_codegen_needs(&s).need_u) {
    snprintf(why, n, "the Jacobian of %s depends on the state (nonlinear): a matrix built once "
             "would be stale", A->pde->name);
    return 1;
  }
  return 0;
}

/* Its options, parsed (private to this file): block (of the element matrices it assembles
 * from), and the product's lanes, format, chunk, sigma, deltas and zeros
 * (engine/matrix/matrix.h). */
static const char *const csr_options[] = {"block", "lanes",  "format", "chunk",
                                          "sigma", "deltas", "zeros",  NULL};
typedef struct csr_opts {
  int block;  /* cells per work group of its elemat module (0: fe_elemat_reg_block) */
  int lanes;  /* items per row of a CSR product (0: the backend's) */
  int format; /* FE_FORMAT_* (auto: SELL on a GPU unless lanes are asked, else CSR) */
  int chunk;  /* SELL's rows per chunk (0: the backend's) */
  int sigma;  /* SELL's rows per sorting window (0: 8 chunks) */
  int deltas; /* SELL's columns: FE_SELL_AUTO, _ON (16-bit differences), _OFF (32-bit) */
  int zeros;  /* SELL's zeros: FE_SELL_AUTO, _ON (dropped), _OFF (kept) */
} csr_opts;

/* SELL's deltas (a boolean) and zeros ("drop" or "keep"). */
static int csr_read_sell(const fe_options *g, const char *caller, csr_opts *o)
{
  static const char *const zeros[] = {NULL, "drop", "keep"}; /* FE_SELL_ON, _OFF */
  int d = -1;
  FE_CHECK(fe_option_boolean(g, caller, "deltas", "a boolean (format \"sell\": the columns "
                             "as 16-bit differences where they fit)", &d));
  if (d >= 0) o->deltas = d ? FE_SELL_ON : FE_SELL_OFF;
  return fe_option_choice(g, caller, "zeros", zeros, 3, "\"drop\" or \"keep\" (format "
                          "\"sell\": the values of exactly zero left out of its copy or kept)",
                          &o->zeros);
}

static int csr_read_options(const fe_options *g, const char *caller, void *opts)
{
  static const char *const formats[] = {NULL, "csr", "sell", "cusparse"}; /* FE_FORMAT_* */
  csr_opts *o = opts;
  FE_CHECK(fe_read_block(g, caller, &o->block));
  FE_CHECK(fe_option_integer(g, caller, "lanes", 0, 64, 1, "0 or a power of two up to 64 "
                             "(strategy \"csr\": items per row of the product, 0: the "
                             "backend's)", &o->lanes));
  FE_CHECK(fe_option_choice(g, caller, "format", formats, 4, "\"csr\", \"sell\" "
                            "(SELL-C-sigma) or \"cusparse\" (cuSPARSE's product, cuda)",
                            &o->format));
  FE_CHECK(fe_option_integer(g, caller, "chunk", 1, 1024, 0, "an integer in 1..1024 (format "
                             "\"sell\": rows per chunk)", &o->chunk));
  FE_CHECK(fe_option_integer(g, caller, "sigma", 1, 1 << 30, 0, "an integer >= 1 (format "
                             "\"sell\": rows per sorting window)", &o->sigma));
  return csr_read_sell(g, caller, o);
}

/* The options' meaning, each default resolved as the assembly resolves it on be
 * (fe_csr_layout): block 0 is fe_elemat_reg_block's; the format, then CSR's lanes or SELL's
 * chunk and sigma.
 * An option the format does not read stays as asked (the assembly refuses it, naming it). */
static void csr_effective_key(const fe_operator *A, fe_backend *be, fe_precision prec,
                              const void *opts, char *key, size_t n)
{
  const csr_opts *o = opts;
  fe_matrix_opts mo = {.lanes = o->lanes, .format = o->format, .chunk = o->chunk,
                       .sigma = o->sigma, .deltas = o->deltas, .drop_zeros = o->zeros};
  fe_csr_layout(&be->info, &mo);
  int block = o->block > 0 ? o->block : fe_elemat_reg_block(A, be, prec);
  snprintf(key, n, "block=%d format=%d lanes=%d chunk=%d sigma=%d deltas=%d zeros=%d", block,
           mo.format, mo.lanes, mo.chunk, mo.sigma, mo.deltas, mo.drop_zeros);
}

static int csr_configure(fe_realization *r, const void *opts)
{
  const csr_opts *o = opts;
  csr_data *d;
  FE_CALLOC(d, 1, "csr data");
  r->data = d;
  /* the block of the elemat module's spec */
  r->block = o->block > 0 ? o->block : fe_elemat_reg_block(r->A, r->be, r->prec);
  r->colored = 0;
  return 0;
}

/* A split space's apply in two phases, where they are wanted and the product is felab's
 * (cuSPARSE's sums are the library's own: its apply stays whole): the list of the shared
 * dofs' rows (every neighbour's nodes times the components, ascending) made. */
static int csr_phases(fe_realization *r)
{
  csr_data *d = r->data;
  const fe_dist *x = r->A->V->dist;
  if (!fe_realization_wants_phases(r) || !fe_csr_rows_entry(d->M) || !x->nshared) return 0;
  /* CSR's rows are plain sums, which a GPU's compiler may contract into multiply-adds one way
   * in the whole product and another in the rows' kernel: there only SELL's explicit
   * multiply-adds (the GPUs' default) keep the copies of a shared row equal, unless the tests
   * ask (FELAB_EXCHANGE_PHASES=1: the bits are compared there) */
  if (d->M->format != FE_FORMAT_SELL && r->be->info.is_gpu && fe_realization_phases_forced() != 1)
    return 0;
  FE_CHECK(fe_csr_rows_list(d->M, x->shared_at, x->nshared, &d->rows, &d->rows_nnz));
  d->nrows = x->nshared;
  r->phased = 1;
  if (d->M->format == FE_FORMAT_SELL) { /* the product beside which the exchange runs */
    fe_report k = {0};
    fe_csr_launch_groups(d->M, &r->xgroups, &k.group_items);
    fe_perf_occupancy(r->be, d->M->spmv, &k);
    r->xresident = k.resident;
    r->xwave_known = !fe_csr_first_groups(d->M, (long long)r->be->info.compute_units * k.resident,
                                          r->xwave, FE_XWAVE_QUANTILES);
  }
  return 0;
}

static int csr_setup(fe_realization *r)
{
  csr_data *d = r->data;
  const csr_opts *co = r->opts;
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = r->be->name;
  o.precision = (int)r->prec;
  o.nolog = 1;
  /* the product's items per row (0: the backend's) and its layout: CSR or SELL-C-sigma */
  fe_matrix_opts mo = {.lanes = co->lanes, .format = co->format, .chunk = co->chunk,
                       .sigma = co->sigma, .deltas = co->deltas, .drop_zeros = co->zeros};
  if ((d->M = fe_operator_assembled_find(r->A, r->be, r->prec, &mo))) {
    d->shared = 1; /* A:assemble made it: one matrix for both */
  } else {
    fe_report rep;
    FE_CHECK(fe_operator_assemble(r->A, NULL, &o, &mo, &d->M, &rep));
    fe_setup_parts_merge(&r->parts, &rep.parts); /* the assembly's parts, the first call's report */
  }
  return csr_phases(r);
}

static void csr_release(fe_realization *r)
{
  csr_data *d = r->data;
  if (!d) return;
  if (d->rows.ptr) r->be->ops->release(r->be->impl, &d->rows);
  fe_csr_free(d->M);
  free(d);
  r->data = NULL;
}

static const char *csr_entry(fe_action a)
{
  (void)a;
  return "fe_spmv"; /* the residual and the diagonal go through "transpose" */
}

static int csr_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  (void)a, (void)preamble; /* one module for every action: fe_spmv and fe_dirichlet */
  const csr_data *d = r->data;
  return fe_sparse_source(r->be, r->prec, d->M->lanes, src); /* the assembly's own */
}

const fe_strategy *fe_stored_matrix_delegate(fe_action a)
{
  return a == FE_ACTION_APPLY ? NULL : &fe_strategy_transpose;
}

int fe_stored_matrix_other(fe_realization *r, fe_action a, const fe_vector *u, fe_vector *y,
                           int *launches)
{
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = r->be->name;
  o.precision = (int)r->prec;
  o.strategy = "transpose";
  o.nolog = 1;
  fe_vector *t = NULL;
  fe_report rep;
  int rc = a == FE_ACTION_RESIDUAL ? fe_operator_residual(r->A, u, &o, &t, &rep)
                                   : fe_operator_diagonal(r->A, NULL, &o, &t, &rep);
  if (!rc) rc = fe_vector_copy(y, t);
  fe_vector_free(t);
  FE_CHECK(rc);
  r->delegated = 1; /* the whole action: a split space's ranks summed in it */
  r->xbytes = rep.exchange_bytes, r->xmessages = rep.exchange_messages;
  r->xseconds = rep.exchange_seconds, r->xbeside = rep.exchange_beside;
  memcpy(r->xparts, rep.exchange_parts, sizeof r->xparts);
  *launches += rep.launches;
  return 0;
}

static int csr_integrate(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                         fe_vector *y, int *launches)
{
  csr_data *d = r->data;
  fe_csr *M = d->M;
  if (a != FE_ACTION_APPLY) return fe_stored_matrix_other(r, a, u, y, launches);
  if (r->phase == 1) { /* the shared dofs' rows, from the module the whole product runs */
    fe_module *mod = M->format == FE_FORMAT_SELL ? M->mod : r->module[a];
    if (!d->rows_kernel)
      FE_CHECK(r->be->ops->kernel(r->be->impl, mod, fe_csr_rows_entry(M), &d->rows_kernel));
    FE_CHECK(fe_csr_launch_rows(M, d->rows_kernel, &d->rows, d->nrows, &w->buf, &y->buf));
    (*launches)++;
    return 0;
  }
  /* every row (phase 2: the shared rows' same bits again). The module's entry is fe_spmv;
   * SELL runs the matrix's own fe_spmv_sell (same source), which adds CG's (w, J w) where
   * asked and the backend has its parts (cuda) */
  int pq = M->format == FE_FORMAT_SELL && r->pq && r->be->ops->cg_parts;
  FE_CHECK(fe_csr_launch_pq(M, M->format == FE_FORMAT_SELL ? M->spmv : r->kernel[a], &w->buf,
                            &y->buf, pq ? r->pq : NULL, r->pq_slot, NULL));
  r->pq_added |= pq;
  (*launches)++;
  return 0;
}

/* The product's counts for nnz nonzeros: 2 flops each; the values, columns, row pointers,
 * x and y once. */
static void spmv_counts(const fe_operator *A, fe_precision prec, double nnz, double *flops,
                        double *bytes)
{
  double w = (double)fe_precision_size(prec), n = A->V->ndofs;
  *flops = 2 * nnz;
  *bytes = nnz * (w + 4) + (n + 1) * 4 + 2 * n * w;
}

/* The product's loads of x through the column indices beyond the minimal bytes: one real per
 * nonzero, mostly from L2 (the rows of nearby nodes share their columns). On the cpu the rows,
 * x's loads through them included, go at the calibrated rate of csr's own row loop (fe_rows,
 * model.c), and each node's first touch a call is a value gathered from beyond L1 (the
 * indexed loops' first-touch rate). The other loads of x had been counted as the cell map's
 * indexed loops from L1 (a gather and an add into y a value): on a 2-core AMD EPYC that loop
 * ran at csr's rate (3.2-3.4 G/s against 2.8-3.7), on an Intel Xeon (Ice Lake) at 1.0-1.1 G/s
 * where csr's rows ran 1.4-1.6 G entries/s, its P1, Q1 and P2 boxes predicted 1.26-1.42 of
 * their time and a Q3 csr apply 1.24x transpose's where it measured 0.2-0.3 of it. */
static void csr_traffic(const fe_operator *A, fe_precision prec, fe_work *w)
{
  double nnz = w->flops / 2;
  w->l2_bytes = nnz * (double)fe_precision_size(prec);
  w->indexed = w->indexed_first = A->V->ndofs;
  w->rows = 1; /* the cpu: the rows' rate (fe_spmv's loop, as calibrated) */
}

static void csr_count(const fe_realization *r, fe_action a, fe_work *w)
{
  const csr_data *d = r->data;
  if (a == FE_ACTION_APPLY) {
    fe_csr_counts(d->M, &w->flops, &w->bytes); /* SELL: its padded slots too */
    if (r->phased) { /* the shared rows twice: their entries as CSR's, the list, y */
      double wd = (double)fe_precision_size(r->prec);
      w->flops += 2.0 * (double)d->rows_nnz;
      w->bytes += (double)d->rows_nnz * (wd + 4) + d->nrows * (12 + wd);
    }
    csr_traffic(r->A, r->prec, w);
    /* a GPU: the product's groups, resident side by side as the model takes a kernel's (the
     * library's: unknown). On the H200 csr's rows, their matrix from memory and x from L2 two
     * pipes near even, ran 0.81-0.93 of the larger alone */
    if (r->be->info.is_gpu && d->M->format != FE_FORMAT_CUSPARSE)
      fe_csr_launch_groups(d->M, &w->groups, &w->group_items);
    return;
  }
  fe_strategy_transpose.estimate(r->A, r->be, r->prec, a, w);
}

static fe_kernel *csr_counted_kernel(const fe_realization *r, fe_action a)
{
  const csr_data *d = r->data;
  return a == FE_ACTION_APPLY && d->M->format != FE_FORMAT_CUSPARSE ? d->M->spmv : NULL;
}

/* Before assembling, the nonzeros are estimated as every cell's coupling counted once per
 * cell that shares it: the couplings of a node pair are shared by about as many cells as
 * the pair's nodes have in common, so this estimate is high (about 2-4x on P1 tets). */
static void csr_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         fe_action a, fe_work *w)
{
  if (a != FE_ACTION_APPLY) {
    fe_strategy_transpose.estimate(A, be, prec, a, w);
    return;
  }
  double n = (double)A->V->elem.nbasis * A->V->ncomp;
  spmv_counts(A, prec, A->V->mesh->ncells * n * n, &w->flops, &w->bytes);
  csr_traffic(A, prec, w);
}

/* csr is the default where it measured fastest of the strategies (docs/benchmarks.md:
 * Jacobi-PCG per iteration, fp64, setups alike): simplices of order 1 and 2 on the cpu and on
 * a GPU, Q1 hexes on a CPU, and Q2 and Q3 on a CPU that runs the GPUs' kernels (OpenCL on a
 * CPU, PoCL: no cells in its SIMD lanes), whose sumfact ran 3.7-4.1x csr's time at Q2 and
 * 1.4-1.5x at Q3 while the model, 5-6x short of that sumfact, put it first (Q5: sumfact 2x
 * ahead). Elsewhere the model decides: a Q2 row holds up to 125 entries, whose bytes outweigh
 * a matrix-free apply's. */
static int csr_measured(const fe_operator *A, const fe_backend *be, fe_precision prec,
                        char *why, size_t n)
{
  (void)prec;
  const fe_element *el = &A->V->elem;
  int simplex = el->cell == FE_CELL_TET || el->cell == FE_CELL_TRI;
  int tensor = el->cell == FE_CELL_HEX || el->cell == FE_CELL_QUAD;
  int gpu_kernels_on_cpu = !be->info.is_gpu && !be->info.cells_in_lanes;
  if (!(simplex && el->order <= 2) && !(tensor && el->order == 1 && !be->info.is_gpu) &&
      !(tensor && el->order <= 3 && gpu_kernels_on_cpu))
    return 0;
  snprintf(why, n, "csr measured fastest for linear physics on %s (%s, docs/benchmarks.md)",
           A->V->name, simplex ? "cpu and H100" : el->order == 1 ? "cpu" : "OpenCL on a cpu");
  return 1;
}

static void csr_describe(const fe_realization *r, fe_action a, char *buf, size_t n)
{
  const fe_csr *M = ((const csr_data *)r->data)->M;
  const char *whose = ((const csr_data *)r->data)->shared ? " of the matrix A:assemble made" : "";
  if (a != FE_ACTION_APPLY) snprintf(buf, n, "matrix-free by transpose");
  else if (M->format == FE_FORMAT_SELL)
    snprintf(buf, n, "SELL-%d-%d product%s (%s columns, zeros %s)", M->chunk, M->sigma, whose,
             M->deltas ? "16-bit delta" : "32-bit", M->drop_zeros ? "dropped" : "kept");
  else if (M->format == FE_FORMAT_CUSPARSE) snprintf(buf, n, "cuSPARSE product%s", whose);
  else snprintf(buf, n, "CSR product%s, %d item%s per row", whose, M->lanes, M->lanes > 1 ? "s" : "");
}

const fe_strategy fe_strategy_csr = {
    .name = "csr",
    .summary = "the Jacobian assembled once on the device (element matrices, atomic adds), "
               "then one CSR product per action",
    .applies = fe_stored_matrix_applies,
    .options = csr_options,
    .options_size = sizeof(csr_opts),
    .read_options = csr_read_options,
    .effective_key = csr_effective_key,
    .configure = csr_configure,
    .setup = csr_setup,
    .release = csr_release,
    .source = csr_source,
    .entry = csr_entry,
    .integrate = csr_integrate,
    .count = csr_count,
    .counted_kernel = csr_counted_kernel,
    .estimate = csr_estimate,
    .measured = csr_measured,
    .masks_direction = 1,
    .stores_matrix = 1,
    .delegate = fe_stored_matrix_delegate,
    .describe = csr_describe,
};
