/* felab matrices, fe_operator_assemble: the Jacobian assembled into CSR on a backend, in
 * phases: the options, the pattern (on the host: pattern.c; on the device: pattern-device.c),
 * the element matrices (stored, or with the cpu's fill made as the rows need them:
 * host-fill.c), the matrix's arrays, the fill (the device's rows, or its adds), the product's
 * format (sparse.c), the report. Three ways: the cpu's fill (by_rows: the host's pattern,
 * its second pass summing each row); the device's rows (dev_rows: stored element matrices
 * summed row by row on the device, into the device's pattern or the host's, uploaded); the
 * device's adds (atomic or by color, into the host's pattern). */
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
  int lattice;          /* by_rows' pattern from a box's lattice (pattern-lattice.c) */
  int dev_rows;         /* the device's fill: each row sums its cells' stored entries */
  int dev_pattern;      /* the pattern built on the device (dev_rows only) */
  int dev_matrices;     /* dev_rows' element matrices by reg_jac in the mesh's order (the
                         * nodes carry the map, no block or geometry asked), else stored ones
                         * from fe_element_matrices */
  int wide;             /* the most cells of a node, where the device's pattern could not take
                         * them (built on the host instead), else 0 */
  device_pattern D;     /* dev_rows: the device's arrays of the pattern */
  fe_backend *be;
  fe_precision prec;
  size_t w;             /* bytes of a real */
  double t0;            /* the call's start */
  int *fixed;           /* per dof: 1 constrained */
  int *rowptr;          /* M's, on the host */
  int rowptr_m;         /* rowptr is M's own (the host's fill), not to free */
  pattern P;
  long long nnz;
  fe_elemats *K;        /* the stored element matrices (the device's adds) */
  fe_report krep;       /* what the report counts of the element matrices */
  host_fill F;          /* the host's fill's element matrices */
  fe_realization *r;
  double compile_s, transfer, seconds, setup;
  double compile_product; /* of compile_s: the product's module (the rest: the pattern's
                           * kernels, D.compile_s, and the element matrices') */
  double precompile;      /* the modules compiled side by side ahead (cuda), wall seconds */
  double sell_host, sell_s; /* the SELL copy, from the filled values */
  int *cols, nfill;
  long long made;       /* the host fill's element matrices computed */
  double *vals;         /* the device path's start: zeros and the identity's rows */
  fe_csr *M;
  fe_buffer bcells, bfixed, border;
  fe_kernel *kasm;
  fe_module *amod;      /* kasm's */
  int *order, *cstart, ncolors; /* scatter "color": the cells by color */
  fe_setup_parts parts; /* the call's setup, part by part (the report's) */
  double lap;           /* the clock at the end of the last part timed */
} assembly;

/* Part name of the setup: the time since the last part, less excl (what another part counts),
 * and the bytes of what it built that the matrix keeps. */
static void assemble_part(assembly *S, const char *name, double excl, double bytes)
{
  double now = fe_clock(), s = now - S->lap - excl;
  fe_setup_part_add(&S->parts, name, s > 0 ? s : 0, bytes);
  S->lap = now;
}

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
  FE_CHECK(check_format(&S->mo, asked));
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
  int pat = S->mo.pattern;
  if (S->scatter == FE_SCATTER_AUTO)
    S->scatter = !host || jac || pat == FE_PATTERN_DEVICE ? FE_SCATTER_NODES : FE_SCATTER_ATOMIC;
  FE_ASSERT(pat != FE_PATTERN_DEVICE || S->scatter == FE_SCATTER_NODES ||
            S->scatter == FE_SCATTER_ROWS, FE_ERR_ARG, "assemble: pattern = \"device\" is "
            "filled by its rows (scatter = \"nodes\" or \"rows\"); scatter = \"%s\" adds into "
            "the host's pattern", S->scatter == FE_SCATTER_COLOR ? "color" : "atomic");
  /* nodes: on the cpu, with the host's pattern and the Jacobian from the nodes, the fused
   * fill; else the device's rows, from stored element matrices */
  S->by_rows = S->scatter == FE_SCATTER_NODES && host && jac && pat != FE_PATTERN_DEVICE;
  S->dev_rows = (S->scatter == FE_SCATTER_NODES && !S->by_rows) || S->scatter == FE_SCATTER_ROWS;
  S->dev_pattern = S->dev_rows && pat != FE_PATTERN_HOST;
  S->dev_matrices = S->dev_rows && jac && !S->mo.block && S->mo.geometry == FE_GEOMETRY_AUTO;
  S->prec = fe_precision_default();
  if (o && o->precision >= 0) S->prec = (fe_precision)o->precision;
  S->w = fe_precision_size(S->prec);
  return 0;
}

/* The pattern first, on the host: its nonzeros are counted before anything is computed, so
 * that a matrix that cannot fit is refused before its element matrices are made. Its arrays
 * before the count: the constrained marks and row pointers, each node's count of cells, first
 * and last cell and free components (16 bytes a node), the rows' order (its key, row,
 * position and prefix: 32 bytes a node), a thread's marks and places (8 bytes a node) and
 * chunk of cells (CHUNK_CELLS), and for the device's rows every node's cells (a cell's nodes
 * once). */
static int assemble_pattern_fits(const assembly *S)
{
  const fe_space *V = S->A->V;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  const int nn = V->nnodes, threads = omp_get_max_threads();
  if (S->dev_pattern) /* the host: the marks, row pointers, starts and counts */
    return fe_memory_check(4 * (2 * (size_t)nd + 2 * (size_t)nn + 2), "assemble: the pattern "
                           "of %d rows, its counts on the host", nd);
  FE_CHECK(fe_memory_check(8 * ((size_t)nd + 1) + (S->dev_rows ? 4 * (size_t)nc * nb : 0) +
                           (size_t)nn * (48 + 8 * (size_t)threads) +
                           (size_t)threads * 5 * CHUNK_CELLS,
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
  if (!rc && S->dev_pattern && S->dev_matrices) /* every module it will want, side by side */
    S->precompile = device_pattern_precompile(S->A, be, S->prec, S->asked > 0 ? S->asked :
                                              be->info.is_gpu ? 4 : 1);
  if (!rc && S->dev_pattern)
    rc = device_pattern_make(&S->P, be, S->prec, S->rowptr, &S->nnz, &S->D);
  if (!rc && S->dev_pattern && S->D.wide) { /* too wide for its kernels: the host's, uploaded */
    S->wide = S->D.maxdeg;
    S->dev_pattern = 0;
    S->compile_s += S->D.compile_s; /* its module's compile, counted before it goes */
    S->transfer += S->D.transfer;
    S->D = (device_pattern){0};
    rc = assemble_pattern_fits(S);
  }
  /* the host's fill in double of a box's vertices: the rows from its lattice */
  if (!rc && S->by_rows && S->prec == FE_DOUBLE) rc = lattice_rows(&S->P, S->rowptr);
  const int lattice = S->lattice = S->P.lattice != NULL;
  if (!rc && !S->dev_pattern && !lattice) rc = pattern_make(&S->P);
  /* the fill by cells of cells of few nodes (P1 simplices): the first pass keeps each row's
   * neighbours for it (2 bytes each), which it would make again (a row's neighbours made
   * twice were a fifth of a P1 assembly; at P2 and Q1 their sort in the first pass cost what
   * the fill saved, docs/benchmarks.md) */
  if (!rc && S->by_rows && !lattice && fill_by_cells_wanted(&S->P, S->prec == FE_DOUBLE) &&
      nb <= 4)
    rc = pattern_keep(&S->P);
  if (!rc && !S->dev_pattern && !lattice) rc = count_rows(&S->P, S->rowptr);
  if (!rc && S->dev_rows && !S->dev_pattern) rc = node_cells(&S->P); /* the device's lists */
  if (!rc && S->dev_rows && !S->dev_pattern) /* the host's pattern, for the device's rows */
    rc = device_pattern_from_host(&S->P, be, S->prec, &S->D);
  if (!rc) { /* its columns and values: in M's buffers (the host's fill), or on the host first
              * (in double) and then in M's buffers, with the stored element matrices, which are
              * host memory too on the cpu; the device's rows: on the device alone (the host's
              * pattern: its columns on the host first) */
    S->compile_s += S->D.compile_s;
    S->transfer += S->D.transfer;
    S->nnz = S->rowptr[nd];
    long long nnz = S->nnz;
    size_t w = S->w;
    const size_t nz = (size_t)nnz, dev = (sizeof(int) + w) * nz, n = (size_t)nb * V->ncomp;
    const size_t stored = dev + w * n * n * nc + 4 * ((size_t)nc * nb + (size_t)nd);
    size_t onhost = S->by_rows ? dev : S->dev_pattern ? 0 : S->dev_rows ? sizeof(int) * nz
                    : (sizeof(int) + sizeof(double)) * nz;
    rc = fe_memory_check(onhost + (be->ops->host && !S->by_rows ? stored : 0),
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
  } else if (S->dev_matrices) {
    /* the device's rows: reg_jac in the mesh's order, on D's realization (the Jacobian from
     * the nodes: no geometry made, no cell map in another order) */
    rc = device_pattern_matrices(&S->D, S->A, S->at, &S->K, &S->krep, &S->compile_s,
                                 &S->transfer);
    S->r = &S->D.h;
  } else {
    rc = fe_element_matrices(S->A, S->at, S->o, &S->mo, NULL, NULL, &S->K, &S->krep);
    /* the realization whose geometry they read (its backend, precision and data serve the
     * adds) */
    if (!rc) rc = elemat_geometry(S->A, S->o, &S->mo, 0, &S->r);
    S->compile_s += S->krep.compile_seconds;
    S->transfer += S->krep.transfer_seconds;
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
                        .sigma = S->sigma, .deltas = S->mo.deltas,
                        .drop_zeros = S->mo.drop_zeros};
  fe_csr_layout(&r->be->info, &lay);
  /* the lanes of its fe_spmv in every format (its module's EM_LANES), used by CSR's */
  int lanes = S->asked > 0 ? S->asked : r->be->info.is_gpu ? 4 : 1;
  *M = (fe_csr){.be = r->be, .prec = r->prec, .n = S->A->V->ndofs, .lanes = lanes,
                .format = lay.format, .nnz = S->nnz, .nslots = S->nnz};
  if (M->format == FE_FORMAT_SELL) {
    M->chunk = lay.chunk;
    M->sigma = lay.sigma;
    M->deltas = lay.deltas == FE_SELL_ON;
    M->drop_zeros = lay.drop_zeros == FE_SELL_ON;
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
      !(rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)nd + 1), &M->rowptr))) {
    /* M's row pointers are host memory: the fill and the format read them there */
    int *host = be->ops->host(be->impl, &M->rowptr);
    memcpy(host, S->rowptr, sizeof(int) * ((size_t)nd + 1));
    if (!S->rowptr_m) free(S->rowptr);
    S->rowptr = host;
    S->rowptr_m = 1;
  }
  if (!rc && S->by_rows &&
      !(rc = be->ops->alloc(be->impl, sizeof(int) * (size_t)M->nnz, &M->cols)))
    rc = be->ops->alloc(be->impl, S->w * (size_t)M->nnz, &M->vals);
  if (!rc && S->dev_rows) { /* on the device: the rows, the columns (the host's pattern: on
                            * the host first), the values */
    rc = fe_upload_ints(be, S->rowptr, (size_t)nd + 1, &M->rowptr);
    if (!rc) rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)M->nnz + 1), &M->cols);
    if (!rc) rc = be->ops->alloc(be->impl, S->w * ((size_t)M->nnz + 1), &M->vals);
    if (!rc && !S->dev_pattern && !(S->cols = malloc(sizeof(int) * ((size_t)M->nnz + 1))))
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for %lld "
                        "columns", M->nnz);
  } else if (!rc && S->by_rows) S->cols = be->ops->host(be->impl, &M->cols);
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
  int rc = 0;
  if (S->dev_pattern) /* the columns and the values in one pass (the fill's time) */
    rc = device_pattern_write(&S->D, V, &M->rowptr, &M->cols, &S->K->vals, &M->vals,
                              &S->seconds);
  else if (S->P.lattice)
    rc = lattice_fill(&S->P, S->rowptr, S->cols, be->ops->host(be->impl, &M->vals), &S->F,
                      &S->nfill, &S->made);
  else rc = fill_pattern(&S->P, S->rowptr, S->cols,
                         by_rows ? be->ops->host(be->impl, &M->vals) : NULL,
                         by_rows ? &S->F : NULL, &S->nfill, &S->made);
  if (by_rows) S->seconds = fe_clock() - tf; /* the fill is the pattern's second pass */
  if (!rc && S->dev_rows && !S->dev_pattern)
    rc = be->ops->write(be->impl, &M->cols, 0, sizeof(int) * (size_t)M->nnz, S->cols);
  if (S->dev_rows) by_rows = 1; /* none of the adds' arrays below */
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
    rc = csr_module(M, &S->compile_product);
    S->compile_s += S->compile_product;
  }
  if (!rc && !by_rows) { /* the adds: the elemat module of r (its cells' dofs) */
    char *src;
    double cs = 0;
    rc = fe_elemat_source(r, &src);
    if (!rc) rc = fe_compile(r->be, src, &S->amod, &cs, NULL);
    free(src);
    S->compile_s += cs;
    if (!rc) rc = r->be->ops->kernel(r->be->impl, S->amod, "fe_assemble", &S->kasm);
  }
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
  if (S->dev_pattern) return 0; /* written with the columns (assemble_fill) */
  if (S->dev_rows) /* into the host's pattern */
    return device_pattern_fill(&S->D, S->A->V, &K->vals, &M->rowptr, &M->cols, &M->vals,
                               &S->seconds);
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

/* The bytes the matrix holds, by the part that built them: the pattern (row pointers,
 * columns), the fill (values), the format (SELL's value slots, column stream, chunk starts
 * and its rows' order: fe_csr_matrix_bytes). */
static void assemble_memory(assembly *S)
{
  const fe_csr *M = S->M;
  double w = (double)fe_precision_size(M->prec);
  fe_setup_part_add(&S->parts, "pattern", 0, 4.0 * ((double)M->n + 1) + 4.0 * (double)M->nnz);
  fe_setup_part_add(&S->parts, "fill", 0, w * (double)M->nnz);
  if (M->format == FE_FORMAT_SELL)
    fe_setup_part_add(&S->parts, "format", 0, fe_csr_matrix_bytes(M));
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
  if (!S->rowptr_m) free(S->rowptr);
  if (!S->by_rows) {
    free(S->cols);
    free(S->vals);
  }
  if (S->by_rows) host_fill_free(&S->F);
  device_pattern_free(&S->D);
  if (S->amod) S->be->ops->module_free(S->be->impl, S->amod);
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
  char how[256];
  if (by_rows && S->lattice)
    snprintf(how, sizeof how, "element matrices (reg_jac) a batch of cubes at a time (%lld for "
             "%d cells) into rows from the box's lattice", S->made, nc);
  else if (by_rows) snprintf(how, sizeof how, "element matrices (reg_jac) made as the rows need "
                             "them (%lld for %d cells), each row summing its cells' entries",
                             S->made, nc);
  else if (S->dev_rows) snprintf(how, sizeof how, "element matrices stored, each row summing its "
                                 "cells' entries in cell order; pattern on the %s",
                                 S->wide ? "host (a node too wide)" : S->dev_pattern ? "device"
                                 : "host");
  else if (ncolors) snprintf(how, sizeof how, "element matrices (reg_nojac), then plain adds color "
                             "by color (%d colors) into a pattern built on the host", ncolors);
  else snprintf(how, sizeof how, "element matrices (reg_nojac), then atomic adds into a pattern "
                "built on the host");
  if (M->format == FE_FORMAT_SELL) /* brief: the report's why holds 160 characters */
    snprintf(how + strlen(how), sizeof how - strlen(how), "; SELL-%d-%d, %.1f%% padding, "
             "%s columns, %lld zeros out", M->chunk, M->sigma, 100.0 * (double)(M->nslots -
             M->nkept) / (double)(M->nslots + !M->nslots), !M->deltas ? "32-bit" : M->nwide ?
             "16/32-bit" : "16-bit", M->nnz - M->nkept);
  fe_report_begin(rep, "assemble", M->be, M->prec, "assembly", how);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  double nk = (double)nc * V->elem.nbasis * V->ncomp * V->elem.nbasis * V->ncomp;
  /* the adds, then the element matrices' own work; the device path stores the matrices and
   * reads them back */
  rep->flops = nk + S->krep.flops;
  rep->bytes = (by_rows ? 0 : nk * w + nc * nb * 4.0) + (double)M->nnz * (w + 4) +
               (nd + 1) * 4.0 + S->krep.bytes;
  if (M->format == FE_FORMAT_SELL) /* its count and fill: CSR read twice, the counts written,
                                    * the layout read, the copy written */
    rep->bytes += 2 * ((double)M->nnz * (w + 4) + (nd + 1) * 4.0) + nd * 4.0 +
                  fe_csr_matrix_bytes(M);
  rep->seconds = S->seconds + S->sell_s + S->krep.seconds;
  rep->compile_seconds = S->compile_s;
  rep->transfer_seconds = S->transfer;
  rep->setup_seconds = S->setup + S->sell_host - S->krep.seconds;
  rep->parts = S->parts;
  rep->launches = (by_rows ? S->nfill : S->dev_rows ? 2 : 1 + (ncolors ? ncolors : 1)) +
                  2 * (M->format == FE_FORMAT_SELL); /* its count and fill */
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
  S.lap = S.t0;
  int rc = assemble_pattern(&S);
  assemble_part(&S, "pattern", S.D.compile_s + S.D.transfer + S.precompile, 0);
  if (!rc) rc = assemble_element_matrices(&S);
  if (!S.by_rows) { /* the element matrices' own parts (geometry, cell map, matrices) */
    fe_setup_parts_merge(&S.parts, &S.krep.parts);
    S.lap = fe_clock();
  } else
    assemble_part(&S, "matrices", S.compile_s + S.transfer, 0);
  if (!rc) rc = assemble_csr(&S);
  if (!rc) rc = assemble_arrays(&S);
  double c0 = S.compile_s;
  if (!rc) rc = assemble_fill(&S);
  /* the host's fill, or the device's columns and values: the fill; the host's pattern's
   * second pass and uploads: the pattern's */
  assemble_part(&S, S.by_rows || S.dev_pattern ? "fill" : "pattern", S.compile_s - c0, 0);
  S.setup = fe_clock() - S.t0 - S.compile_s - S.transfer - S.seconds;
  if (!rc && !S.by_rows) rc = assemble_adds(&S);
  if (!rc && !S.by_rows) assemble_part(&S, "fill", 0, 0);
  if (!rc && S.M->format == FE_FORMAT_SELL)
    rc = csr_make_sell(S.M, &S.sell_host, &S.sell_s);
  if (!rc && S.M->format == FE_FORMAT_CUSPARSE) rc = csr_make_library(S.M);
  if (!rc && S.M->format != FE_FORMAT_CSR) assemble_part(&S, "format", 0, 0);
  if (!rc && S.by_rows) assemble_fill_counts(&S);
  assemble_release(&S);
  if (rc) {
    fe_elemats_free(S.K);
    fe_csr_free(S.M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  assemble_part(&S, "pattern", 0, 0); /* the release: the pattern's arrays */
  /* the compiles (or loads from the kernel cache) apart: the pattern's kernels, the element
   * matrices', the product's */
  fe_setup_part_add(&S.parts, "compile_ahead", S.precompile, 0);
  fe_setup_part_add(&S.parts, "compile_pattern", S.D.compile_s, 0);
  fe_setup_part_add(&S.parts, "compile_matrices", S.compile_s - S.D.compile_s -
                    S.compile_product, 0);
  fe_setup_part_add(&S.parts, "compile_product", S.compile_product, 0);
  fe_setup_part_add(&S.parts, "transfer", S.transfer, 0);
  assemble_memory(&S);
  elemat_keep_assembled(A, S.M); /* the csr strategy's setup takes it */
  FE_CHECK(assemble_report(&S, rep));
  *Mout = S.M;
  return 0;
}
