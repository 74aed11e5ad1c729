/* felab matrices, fe_operator_assemble: the Jacobian assembled into CSR on a backend, in
 * phases: the options, the pattern on the host (pattern.c), the element matrices (stored, or
 * with the cpu's fill made as the rows need them: host-fill.c), the matrix's arrays, the
 * fill, the device's adds, the product's format (sparse.c), the report. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/matrix/matrix-private.h"

/* One assembly's state, from its options to its report. */
typedef struct assembly {
  fe_operator *A;
  const fe_vector *at;
  const fe_action_opts *o;
  fe_matrix_opts mo;    /* its own options (zeroed: the defaults) */
  int asked;            /* the lanes asked (0: the device's) */
  int scatter;          /* how the values are added (FE_SCATTER_*) */
  int format, chunk, sigma; /* the product's layout asked */
  int by_rows;          /* the host's fill: each row sums its cells' entries */
  fe_backend *be;
  fe_precision prec;
  size_t w;             /* bytes of a real */
  double t0;            /* the call's start */
  int *fixed;           /* per dof: 1 constrained */
  int *rowptr;          /* M's, on the host */
  pattern P;
  long long nnz;
  fe_elemats *K;        /* the stored element matrices (the device's adds) */
  fe_report krep;       /* what the report counts of the element matrices */
  host_fill F;          /* the host's fill's element matrices */
  fe_realization *r;
  double compile_s, transfer, seconds, setup;
  double sell_host, sell_s; /* the SELL copy, from the filled values */
  int *cols, nfill;
  long long made;       /* the host fill's element matrices computed */
  double *vals;         /* the device path's start: zeros and the identity's rows */
  fe_csr *M;
  fe_buffer bcells, bfixed, border;
  fe_kernel *kasm;
  int *order, *cstart, ncolors; /* scatter "color": the cells by color */
} assembly;

/* The options: the lanes and the product's layout checked, the backend, how the values are
 * added, the precision. */
static int assemble_options(assembly *S)
{
  const fe_action_opts *o = S->o;
  const fe_space *V = S->A->V;
  int asked = S->asked = S->mo.lanes;
  S->scatter = S->mo.scatter;
  FE_ASSERT(asked >= 0 && asked <= 64 && !(asked & (asked - 1)), FE_ERR_ARG, "lanes = %d: the "
            "items per row of the CSR product must be a power of two up to 64", asked);
  S->format = S->mo.format;
  S->chunk = S->mo.chunk;
  S->sigma = S->mo.sigma;
  FE_CHECK(check_format(S->format, S->chunk, S->sigma, asked));
  S->t0 = fe_clock();
  FE_CHECK(fe_backend_get(o ? o->backend : NULL, &S->be));
  fe_backend *be = S->be;
  /* The fill: where buffers are host memory (the cpu) each row sums its cells' entries as
   * the pattern is written, the element matrices made as the rows need them ("nodes",
   * measured fastest there; it computes the Jacobian from the nodes, which an order-1 space
   * on curved cells cannot); else the device adds stored element matrices, atomically (the
   * default) or color by color (measured 2.4x slower on the cpu, P1 48^3: a color's cells
   * are spread over the mesh, so each launch walks all of the values). */
  int host = be->ops->wrap && be->ops->host, jac = !V->curved || V->elem.order >= 2;
  if (S->scatter == FE_SCATTER_AUTO)
    S->scatter = host && jac ? FE_SCATTER_NODES : FE_SCATTER_ATOMIC;
  FE_ASSERT(S->scatter != FE_SCATTER_NODES || (host && jac), FE_ERR_ARG, "assemble: scatter = "
            "\"nodes\" (each row sums its cells' element matrices, made as the rows need them) "
            "%s; use \"atomic\" or \"color\"", !host ? "runs where buffers are host memory (the "
            "cpu)" : "computes the Jacobian from the nodes, which this order-1 space cannot on "
            "curved cells");
  S->by_rows = S->scatter == FE_SCATTER_NODES;
  S->prec = fe_precision_default();
  if (o && o->precision >= 0) S->prec = (fe_precision)o->precision;
  S->w = fe_precision_size(S->prec);
  return 0;
}

/* The pattern first, on the host: its nonzeros are counted before anything is computed, so
 * that a matrix that cannot fit is refused before its element matrices are made. Its arrays
 * before the count: the constrained marks and row pointers, each node's cells (a cell's
 * nodes once), counts a node, a thread's marks a node (count_rows, and the fill's two), the
 * fill's order (key, row, prefix: 28 bytes a node). */
static int assemble_pattern_fits(const assembly *S)
{
  const fe_space *V = S->A->V;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  const int nn = V->nnodes, threads = omp_get_max_threads();
  FE_CHECK(fe_memory_check(8 * ((size_t)nd + 1) + 4 * (size_t)nc * nb +
                           (size_t)nn * (20 + 8 * (size_t)threads + (S->by_rows ? 28 : 0)),
                           "assemble: the pattern of %d rows (%d cells of %d nodes)", nd, nc, nb));
  return 0;
}

/* The constrained marks, each node's cells, the rows' counts (S->rowptr, S->nnz), then the
 * check that the matrix fits. Returns the first failure's code. */
static int assemble_pattern(assembly *S)
{
  fe_operator *A = S->A;
  const fe_space *V = A->V;
  fe_backend *be = S->be;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  S->fixed = calloc((size_t)nd + 1, sizeof(int));
  S->rowptr = malloc(sizeof(int) * ((size_t)nd + 1)); /* M's, on the host */
  S->P = (pattern){.V = V, .fixed = S->fixed};
  int rc = 0;
  if (!S->fixed || !S->rowptr)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (int i = 0; !rc && i < fe_operator_ndirichlet(A); i++) S->fixed[A->dir_nodes[i]] = 1;
  if (!rc) rc = node_cells(&S->P);
  if (!rc) rc = count_rows(&S->P, S->rowptr);
  if (!rc) { /* its columns and values: in M's buffers (the host's fill), or on the host first
              * (in double) and then in M's buffers, with the stored element matrices, which are
              * host memory too on the cpu */
    S->nnz = S->rowptr[nd];
    long long nnz = S->nnz;
    size_t w = S->w;
    const size_t nz = (size_t)nnz, dev = (sizeof(int) + w) * nz, n = (size_t)nb * V->ncomp;
    const size_t stored = dev + w * n * n * nc + 4 * ((size_t)nc * nb + (size_t)nd);
    rc = fe_memory_check(S->by_rows ? dev : (sizeof(int) + sizeof(double)) * nz +
                                                (be->ops->host ? stored : 0),
                         "assemble: the matrix of %d rows and %lld nonzeros", nd, nnz);
    if (!rc && !be->ops->host) /* and on the device: the matrix, its cell map and marks */
      rc = fe_memory_check_on(be, stored, "assemble: the matrix of %d rows and %lld nonzeros",
                              nd, nnz);
  }
  return rc;
}

/* The element matrices: the host's fill's (made as its rows need them), or stored ones made
 * here, with the realization they were made on. */
static int assemble_element_matrices(assembly *S)
{
  int rc = 0;
  if (S->by_rows) {
    rc = host_fill_make(S->A, S->at, S->be, S->prec, &S->F, &S->compile_s, &S->transfer);
    S->r = &S->F.h;
  } else {
    rc = fe_element_matrices(S->A, S->at, S->o, &S->mo, NULL, NULL, &S->K, &S->krep);
    /* the realization whose geometry they read (its backend, precision and data serve the
     * adds) */
    if (!rc) rc = elemat_geometry(S->A, S->o, &S->mo, 0, &S->r);
    S->compile_s = S->krep.compile_seconds;
    S->transfer = S->krep.transfer_seconds;
  }
  return rc;
}

/* The matrix S->M: its size, the lanes of its CSR product and its format. */
static int assemble_csr(assembly *S)
{
  fe_csr *M = S->M = calloc(1, sizeof *M);
  if (!M) return fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  const fe_realization *r = S->r;
  fe_matrix_opts lay = {.lanes = S->asked, .format = S->format, .chunk = S->chunk,
                        .sigma = S->sigma};
  fe_csr_layout(&r->be->info, &lay);
  /* the lanes of its fe_spmv in every format (its module's EM_LANES), used by CSR's */
  int lanes = S->asked > 0 ? S->asked : r->be->info.is_gpu ? 4 : 1;
  *M = (fe_csr){.be = r->be, .prec = r->prec, .n = S->A->V->ndofs, .lanes = lanes,
                .format = lay.format, .nnz = S->nnz, .nslots = S->nnz};
  if (M->format == FE_FORMAT_SELL) {
    M->chunk = lay.chunk;
    M->sigma = lay.sigma;
  }
  S->w = fe_precision_size(r->prec);
  return 0;
}

/* The arrays: with the host's fill, M's own buffers written in place; else columns and
 * values on the host. */
static int assemble_arrays(assembly *S)
{
  fe_backend *be = S->be;
  fe_csr *M = S->M;
  int nd = S->A->V->ndofs, rc = 0;
  if (S->by_rows &&
      !(rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)nd + 1), &M->rowptr)))
    memcpy(be->ops->host(be->impl, &M->rowptr), S->rowptr, sizeof(int) * ((size_t)nd + 1));
  if (!rc && S->by_rows &&
      !(rc = be->ops->alloc(be->impl, sizeof(int) * (size_t)M->nnz, &M->cols)))
    rc = be->ops->alloc(be->impl, S->w * (size_t)M->nnz, &M->vals);
  if (!rc && S->by_rows) S->cols = be->ops->host(be->impl, &M->cols);
  else if (!rc && (!(S->cols = malloc(sizeof(int) * ((size_t)M->nnz + 1))) ||
                   !(S->vals = calloc((size_t)M->nnz + 1, sizeof(double)))))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for %lld "
                      "nonzeros", M->nnz);
  return rc;
}

/* The pattern's second pass (with the host's fill, the values too: S->seconds), then for the
 * device's adds the arrays uploaded with the cell map, the marks and the colors; the
 * product's module and the adds' kernel. */
static int assemble_fill(assembly *S)
{
  const fe_space *V = S->A->V;
  fe_backend *be = S->be;
  fe_realization *r = S->r;
  fe_csr *M = S->M;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis, by_rows = S->by_rows;
  double tf = fe_clock();
  int rc = fill_pattern(&S->P, S->rowptr, S->cols,
                        by_rows ? be->ops->host(be->impl, &M->vals) : NULL,
                        by_rows ? &S->F : NULL, &S->nfill, &S->made);
  if (by_rows) S->seconds = fe_clock() - tf; /* the fill is the pattern's second pass */
  for (int i = 0; !rc && !by_rows && i < nd; i++)
    if (S->fixed[i]) S->vals[S->rowptr[i]] = 1; /* the identity's row; the device adds the rest */
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, S->rowptr, (size_t)nd + 1, &M->rowptr);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, S->cols, (size_t)M->nnz, &M->cols);
  if (!rc && !by_rows) rc = fe_upload_reals(r->be, r->prec, S->vals, (size_t)M->nnz, &M->vals);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, V->cell_nodes, (size_t)nc * nb, &S->bcells);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, S->fixed, (size_t)nd, &S->bfixed);
  if (!rc && S->scatter == FE_SCATTER_COLOR)
    rc = fe_space_cell_colors(V, &S->order, &S->cstart, &S->ncolors);
  if (!rc && S->order) rc = fe_upload_ints(r->be, S->order, (size_t)nc, &S->border);
  if (!rc) {
    double cs;
    rc = csr_module(M, r, &cs);
    S->compile_s += cs;
  }
  if (!rc && !by_rows) rc = r->be->ops->kernel(r->be->impl, M->mod, "fe_assemble", &S->kasm);
  return rc;
}

/* The device's adds of the stored element matrices into the values: per color, or one
 * launch (S->seconds). */
static int assemble_adds(assembly *S)
{
  const fe_realization *r = S->r;
  fe_csr *M = S->M;
  fe_elemats *K = S->K;
  int nc = S->A->V->mesh->ncells, rc = 0, *order = S->order, *cstart = S->cstart;
  for (int c = 0; !rc && c < (order ? S->ncolors : 1); c++) { /* per color, or one */
    int first = order ? cstart[c] : 0, count = order ? cstart[c + 1] - first : nc;
    long long rows = (long long)count * K->n, ng = (rows + EM_ITEMS - 1) / EM_ITEMS;
    double sec = 0;
    fe_arg args[11] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = count},
        {.kind = FE_ARG_INT, .i = first},
        {.kind = FE_ARG_INT, .i = order != NULL},
        {.kind = FE_ARG_BUFFER, .buf = order ? &S->border : &S->bcells},
        {.kind = FE_ARG_BUFFER, .buf = &S->bcells},
        {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
        {.kind = FE_ARG_BUFFER, .buf = &M->cols},
        {.kind = FE_ARG_BUFFER, .buf = &S->bfixed},
        {.kind = FE_ARG_BUFFER, .buf = &K->vals},
        {.kind = FE_ARG_BUFFER, .buf = &M->vals},
    };
    if (ng)
      rc = r->be->ops->launch(r->be->impl, S->kasm, (size_t)ng, EM_ITEMS, 11, args, r->prec,
                              &sec);
    S->seconds += sec;
  }
  return rc;
}

/* What the report counts of the host's fill's element matrices: their kernel's flops, and
 * its bytes less the matrices (the fused fill never stores them). */
static void assemble_fill_counts(assembly *S)
{
  const fe_operator *A = S->A;
  const fe_space *V = A->V;
  const fe_realization *r = S->r;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  size_t w = S->w;
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  double ff, fb;
  fe_codegen_field_counts(&s, &ff, &fb);
  S->krep.flops = (double)S->made * elemat_flops_per_cell(r, &s, &S->F.sh); /* as many as it made */
  S->krep.bytes = V->nnodes * 3.0 * w + nc * (nb * 4.0 + A->pde->naux * w) + fb +
                  (fe_codegen_needs(&s).need_u ? nd * w : 0);
}

/* Release what the assembly used on the way (not M, K or the report's counts). */
static void assemble_release(assembly *S)
{
  const fe_realization *r = S->r;
  free(S->order);
  free(S->cstart);
  if (S->border.ptr) r->be->ops->release(r->be->impl, &S->border);
  if (S->bcells.ptr) r->be->ops->release(r->be->impl, &S->bcells);
  if (S->bfixed.ptr) r->be->ops->release(r->be->impl, &S->bfixed);
  pattern_free(&S->P);
  free(S->fixed);
  free(S->rowptr);
  if (!S->by_rows) {
    free(S->cols);
    free(S->vals);
  }
  if (S->by_rows) host_fill_free(&S->F);
}

/* The report: how the matrix was made, the counted flops and bytes (the adds, then the
 * element matrices' own work), the stage times, the model's prediction; K released. */
static int assemble_report(assembly *S, fe_report *rep)
{
  fe_operator *A = S->A;
  const fe_space *V = A->V;
  fe_csr *M = S->M;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis, by_rows = S->by_rows;
  int ncolors = S->ncolors;
  size_t w = S->w;
  char how[160];
  if (by_rows) snprintf(how, sizeof how, "element matrices (reg_jac) made as the rows need them "
                        "(%lld for %d cells), each row summing its cells' entries", S->made, nc);
  else if (ncolors) snprintf(how, sizeof how, "element matrices (reg_nojac), then plain adds color "
                             "by color (%d colors) into a pattern built on the host", ncolors);
  else snprintf(how, sizeof how, "element matrices (reg_nojac), then atomic adds into a pattern "
                "built on the host");
  if (M->format == FE_FORMAT_SELL)
    snprintf(how + strlen(how), sizeof how - strlen(how), "; SELL-%d-%d, %.1f%% padding",
             M->chunk, M->sigma, 100.0 * (double)(M->nslots - M->nnz) / (double)M->nslots);
  fe_report_begin(rep, "assemble", M->be, M->prec, "quadrature", how);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  double nk = (double)nc * V->elem.nbasis * V->ncomp * V->elem.nbasis * V->ncomp;
  /* the adds, then the element matrices' own work; the device path stores the matrices and
   * reads them back */
  rep->flops = nk + S->krep.flops;
  rep->bytes = (by_rows ? 0 : nk * w + nc * nb * 4.0) + (double)M->nnz * (w + 4) +
               (nd + 1) * 4.0 + S->krep.bytes;
  if (M->format == FE_FORMAT_SELL) /* the fill: CSR and the layout read, the slots written */
    rep->bytes += (double)M->nnz * (w + 4) + (nd + 1) * 4.0 + nd * 4.0 +
                  (M->nchunks + 1) * 4.0 + (double)M->nslots * (w + 4);
  rep->seconds = S->seconds + S->sell_s + S->krep.seconds;
  rep->compile_seconds = S->compile_s;
  rep->transfer_seconds = S->transfer;
  rep->setup_seconds = S->setup + S->sell_host - S->krep.seconds;
  rep->launches = (by_rows ? S->nfill : 1 + (ncolors ? ncolors : 1)) +
                  (M->format == FE_FORMAT_SELL);
  fe_elemats_free(S->K);
  FE_CHECK(fe_perf_predict(M->be, M->prec, rep));
  return 0;
}

int fe_operator_assemble(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         const fe_matrix_opts *mo, fe_csr **Mout, fe_report *rep)
{
  *Mout = NULL;
  assembly S = {.A = A, .at = at, .o = o};
  if (mo) S.mo = *mo;
  FE_CHECK(assemble_options(&S));
  FE_CHECK(assemble_pattern_fits(&S));
  int rc = assemble_pattern(&S);
  if (!rc) rc = assemble_element_matrices(&S);
  if (!rc) rc = assemble_csr(&S);
  if (!rc) rc = assemble_arrays(&S);
  if (!rc) rc = assemble_fill(&S);
  S.setup = fe_clock() - S.t0 - S.compile_s - S.transfer - S.seconds;
  if (!rc && !S.by_rows) rc = assemble_adds(&S);
  if (!rc && S.M->format == FE_FORMAT_SELL)
    rc = csr_make_sell(S.M, S.rowptr, &S.sell_host, &S.sell_s);
  if (!rc && S.M->format == FE_FORMAT_CUSPARSE) rc = csr_make_library(S.M);
  if (!rc && S.by_rows) assemble_fill_counts(&S);
  assemble_release(&S);
  if (rc) {
    fe_elemats_free(S.K);
    fe_csr_free(S.M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  FE_CHECK(assemble_report(&S, rep));
  *Mout = S.M;
  return 0;
}
