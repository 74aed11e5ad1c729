/* felab matrices: batches of element matrices of an operator's Jacobian, and the assembled
 * Jacobian in CSR on a backend (engine/matrix/: matrix.c, tensor.c, elemat-cache.c, assemble.c,
 * pattern.c, pattern-fill.c, host-fill.c, sparse.c; kernels in
 * engine/codegen/kernels/elemat.knl). */
#ifndef FE_MATRIX_H
#define FE_MATRIX_H

#include "engine/operator/operator.h"
#include "engine/perf/perf.h"

/* The element matrices' and the assembly's own options (A:element_matrices, A:assemble), beside
 * where they run (fe_action_opts: its backend and precision; the options it gives a strategy
 * are not theirs). Zeroed, or NULL where one is taken: every default. */
enum { FE_PATTERN_AUTO, FE_PATTERN_HOST, FE_PATTERN_DEVICE };

typedef struct fe_matrix_opts {
  int block;        /* cells per work group of the element matrices' kernel (0: automatic); the
                     * register variants' groups are those of the realization whose geometry
                     * they read (fe_operator_realize_geometry) */
  int geometry;     /* the factors they read: FE_GEOMETRY_AUTO, _STORED or _UNSHARED
                     * (engine/operator/operator.h; _VERTICES: stored all the same, since the
                     * kernels read factors) */
  int lanes;        /* the assembly's CSR product: items per row (0: 4 on a GPU, 1 on the cpu) */
  int scatter;      /* the assembly's adds: FE_SCATTER_AUTO, _ATOMIC, _NODES (each row summing
                     * its cells' entries: the cpu's fill, the device's rows) or _COLOR */
  int pattern;      /* where the assembly's pattern is built: FE_PATTERN_AUTO (the device
                     * where buffers are not host memory, else the host), _HOST or _DEVICE */
  int format;       /* the assembled product's layout: FE_FORMAT_* */
  int chunk, sigma; /* format SELL: rows per chunk and per sorting window (0: the device's) */
  int deltas;       /* format SELL: FE_SELL_ON: a chunk's columns after a row's first as 16-bit
                     * differences where they fit; _OFF: 32-bit columns; _AUTO: on, unless the
                     * environment's FELAB_SELL_DELTA=0 */
  int drop_zeros;   /* format SELL: FE_SELL_ON: the values of exactly zero left out of its copy;
                     * _OFF: kept; _AUTO: on, unless FELAB_SELL_ZEROS=keep */
} fe_matrix_opts;
enum { FE_SELL_AUTO, FE_SELL_ON, FE_SELL_OFF }; /* fe_matrix_opts' deltas and drop_zeros */

/* ncells matrices of n x n (n = basis functions x components), on a backend: cell c's
 * matrix row-major at c n^2, row = test dof, column = trial dof, a cell's dof b ncomp + k
 * for basis function b (the element's order, as in the space's cell map) and component k. */
typedef struct fe_elemats {
  const fe_space *V;
  fe_backend *be;
  fe_precision prec;
  int ncells, n;
  fe_buffer vals;
} fe_elemats;

/* A CSR matrix on a backend: sorted columns per row (amg's levels: hypre's order). Its product
 * reads the CSR arrays (format FE_FORMAT_CSR) or a SELL-C-sigma copy of them (FE_FORMAT_SELL,
 * engine/operator/operator.h), made from the filled values (fe_operator_assemble and
 * fe_csr_from_host make it last; nothing writes the values after, so the copy never goes
 * stale; code that writes them must make the copy again). The copy keeps each row's entries
 * in the CSR order, less those whose value is exactly zero (drop_zeros; either sign), and
 * sorts the rows by their kept entries: position p of the sorted order is row perm[p], in
 * chunk k = p / C at lane l = p % C.
 *   values: chunk k's slots are [cstart[k], cstart[k + 1]), width w = their count / C, slot
 *     j of lane l at cstart[k] + j C + l (svals).
 *   columns: one stream of 4-byte words (scols), chunk k's from word ccol[k] where
 *     ccol[k] >= 0 (16-bit chunk), else ~ccol[k] (32-bit chunk): C ints, each lane's first
 *     column, then slots 1 .. w - 1 of the lanes, lane l's slot j at entry (j - 1) C + l, of
 *     uint16 differences from the lane's previous column (16-bit chunk) or of int columns
 *     (32-bit). A chunk is 32-bit where deltas is off, or where one of its rows has two
 *     consecutive kept columns that descend or differ by more than 65535; a 16-bit chunk's
 *     stream is rounded up to whole words. The lane's running sum gives the column, as the
 *     one-item-a-row product walks its slots (sparse.knl's fe_sell_row).
 *   padding slots: value 0 and the lane's last column (difference 0); a row with no kept
 *     entry: its first column (0 when it has none), and 0 past n.
 * Its product makes the same adds in the same order as the CSR row's, less the 0 x[c] of
 * dropped entries: the same bits for finite x (the sum starts at +0.0, so it never is -0.0,
 * and adding a zero of either sign to it changes nothing). */
typedef struct fe_csr {
  fe_backend *be;
  fe_precision prec;
  int n;
  long long nnz;
  fe_buffer rowptr, cols, vals;
  int single_vals;       /* 1: the values stored in single precision in a double matrix (its
                          * products and vectors double: amg's device cycle), else in prec */
  int lanes;             /* items per row of its CSR product (1: scalar CSR, more: vector) */
  int format;            /* FE_FORMAT_CSR or FE_FORMAT_SELL: the layout its product reads */
  int chunk, sigma;      /* SELL: rows per chunk (C) and per sorting window */
  int nchunks;           /* SELL: ceil(n / C) */
  long long nslots;      /* SELL: value slots stored, padding included (CSR: nnz) */
  int deltas, drop_zeros; /* SELL: 16-bit column differences where they fit; zeros dropped */
  long long nkept;       /* SELL: the entries its slots hold (nnz less the zeros dropped) */
  long long ncolw;       /* SELL: 4-byte words of its column stream */
  int nwide;             /* SELL: its chunks of 32-bit columns */
  fe_buffer cstart, ccol, perm, scols, svals; /* SELL: chunk starts (values, columns), row
                          * of each position, the column stream, the values */
  struct fe_module *mod; /* its fe_spmv and fe_spmv_sell */
  struct fe_kernel *spmv; /* the product of its format */
  void *sparse;          /* FE_FORMAT_CUSPARSE: the library's state (backend op sparse_make) */
  int refs;              /* its holders less one (fe_csr_free releases it at none) */
  struct fe_csr **kept;  /* the operator's slot that names it (fe_operator_assembled_find),
                          * cleared when it is released */
} fe_csr;

/* The element matrices of A's Jacobian at the state at (NULL: zero) with strategy
 * "quadrature" (NULL: it; Banas et al.) in a variant (NULL: "reg_nojac", the factors stored
 * per point; also reg_jac, shm_nojac, shm_jac), or "tensor" (Knepley-Terrel: affine
 * simplices and a linearization constant per cell; fe_element_matrices_tensor), on the
 * backend and precision of o, with the options mo (NULL: the defaults; block and geometry).
 * *K: NULL (made), or matrices of A's space on that backend and precision to overwrite (kept
 * on error). The report has the stage times: setup (prepare), transfer (in), seconds (the
 * kernel), and the counted flops and bytes. Their geometry is read from a realization that
 * gives it (fe_operator_realize_geometry), their kernels kept with A (elemat-cache.c). */
int fe_element_matrices(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                        const fe_matrix_opts *mo, const char *strategy, const char *variant,
                        fe_elemats **K, fe_report *rep);
/* The same with strategy "tensor" (Knepley-Terrel, engine/matrix/tensor.c): the contraction of
 * reference tensors, computed once on the host, with a geometric tensor per cell, for affine
 * simplices and a Jacobian constant per cell (reading per-cell and named constants, not the
 * state, x or fields; otherwise FE_ERR_UNAVAILABLE saying what stops it). mo->block: cells
 * per work group (0: 32, fewer when shared memory asks). *K as above (NULL: made, else
 * overwritten); `at` is only checked (the Jacobian does not depend on it). The same report
 * stages as above. */
int fe_element_matrices_tensor(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                               const fe_matrix_opts *mo, fe_elemats **K, fe_report *rep);
/* The methods of element matrices, a table as the strategies are (engine/operator/strategy.h):
 * a name, whether it takes variants, and its make (as fe_element_matrices, with the variant,
 * NULL unless it takes them). fe_element_matrices looks the method up by name. */
typedef struct fe_elemat_method {
  const char *name;        /* "quadrature", "tensor" */
  const char *description; /* one line, for messages and help */
  int variants;            /* 1: takes a variant (quadrature's reg_nojac, ...) */
  int (*make)(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
              const fe_matrix_opts *mo, const char *variant, fe_elemats **K, fe_report *rep);
} fe_elemat_method;
extern const fe_elemat_method fe_elemat_quadrature; /* engine/matrix/matrix.c */
extern const fe_elemat_method fe_elemat_tensor;     /* engine/matrix/tensor.c */
/* The method named name (NULL: quadrature), or NULL when there is none. */
const fe_elemat_method *fe_elemat_method_find(const char *name);

/* Cell c's matrix into out[n * n] (doubles, row-major). */
int fe_elemats_get(const fe_elemats *K, int cell, double *out);
/* A copy on another backend or precision. */
int fe_elemats_convert(const fe_elemats *K, fe_backend *be, fe_precision prec, fe_elemats **out);
void fe_elemats_free(fe_elemats *K);

/* The Jacobian at `at` assembled on the backend and precision of o: the pattern from the dof
 * map (on the host), the values added by the device from the element matrices (atomics).
 * mo (NULL: the defaults): the element matrices' block and geometry; lanes: items per row of
 * its CSR product (0: 4 on a GPU, 1 on the cpu); format, chunk, sigma: the product's layout
 * (engine/operator/operator.h; SELL is built on the device from the CSR arrays, after a
 * permutation and chunk starts computed on the host); scatter: how the values are added.
 * Constrained rows are the identity's and free rows have no constrained columns: M x equals
 * the matrix-free action. The report: setup (pattern and element matrices), seconds (the
 * adds). */
int fe_operator_assemble(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         const fe_matrix_opts *mo, fe_csr **M, fe_report *rep);
/* The product's layout a device of info gives the options mo (in place): format auto is SELL
 * on a GPU unless CSR's lanes are asked, else CSR; then CSR's lanes (0: 4 on a GPU, 1 on the
 * cpu), or SELL's chunk (0: 32 on a GPU, 8 on the cpu), sigma (0: 8 chunks), deltas and
 * drop_zeros (auto: on, unless the environment's FELAB_SELL_DELTA=0, FELAB_SELL_ZEROS=keep).
 * An option the format does not read stays as asked (the assembly refuses it). */
void fe_csr_layout(const fe_device_info *info, fe_matrix_opts *mo);
/* V's cells ordered by color, no two cells of one color sharing a node: color c's cells are
 * order[start[c] .. start[c + 1]) (malloc'd); FE_ERR_MESH past 64 colors. */
int fe_space_cell_colors(const fe_space *V, int **order, int **start, int *ncolors);
/* The elemat module's source for realization r (engine/operator/strategy.h): its physics,
 * fe_assemble, fe_ebe and fe_dirichlet, no element-matrix body. */
struct fe_realization;
int fe_elemat_source(const struct fe_realization *r, char **src);

/* The cells per work group of the register variants' element matrices of A on be in prec:
 * 32, or the largest power of two below it whose gathered cells and geometric factors (as
 * elemat_shape_of counts them: a cell's at every point where the cpu computes them per point)
 * fit the backend's static shared memory (Q3 hexes on cuda: 16; Q7 on the cpu: 16). csr's and
 * the device assembly's realizations take it. */
struct fe_operator;
int fe_elemat_reg_block(const struct fe_operator *A, const fe_backend *be, fe_precision prec);
/* The sparse products' module's source (sparse.knl, dirichlet.knl) on be in prec with `lanes`
 * items per row of its CSR product: no physics in it, so one module serves every operator
 * (the csr strategy's action and the assembly's products). */
int fe_sparse_source(const fe_backend *be, fe_precision prec, int lanes, char **src);
/* Launch y = M x with kernel k (M's own or a module of the same lanes: fe_spmv for CSR,
 * fe_spmv_sell for SELL); seconds: NULL, or block and time it. */
int fe_csr_launch(const fe_csr *M, struct fe_kernel *k, const fe_buffer *x, fe_buffer *y,
                  double *seconds);
/* The same, SELL's product adding (x, M x) into CG's parts pq at slot pq_slot where pq is
 * given and the backend's kernels have FE_PQ_SUM (cuda; backend.h's cg_parts); CSR's and
 * cuSPARSE's never do: the caller asks fe_csr_adds_pq. */
int fe_csr_launch_pq(const fe_csr *M, struct fe_kernel *k, const fe_buffer *x, fe_buffer *y,
                     const fe_buffer *pq, int pq_slot, double *seconds);
/* The product of some rows of M (a split space's shared rows, ahead of the rest: the csr
 * strategy's first phase): y's listed rows get the bits M's product (M->spmv, or a module of
 * the same lanes) writes there, by the same code for a row's sum (sparse.knl's fe_csr_lane
 * and fe_sell_row). The kernel's name in M's module: "fe_spmv_rows" (CSR) or
 * "fe_spmv_sell_rows" (SELL), NULL for cuSPARSE's product (whose sums are the library's). */
const char *fe_csr_rows_entry(const fe_csr *M);
/* The groups M's product launches (fe_csr_launch) and their items (felab's products). */
void fe_csr_launch_groups(const fe_csr *M, long long *groups, int *items);
/* The work of the first `groups` groups of M's product (fe_csr_launch_groups': the first wave
 * on a GPU), each group's SELL slots or CSR entries over the average group's, sorted: q[i] its
 * (i / nq)-quantile, i = 0 .. nq (read back from the device). Where rows of unequal length are
 * numbered by kind (a Q2 box's vertices first) the first wave's groups are not the average's.
 * 0, or 1 where it cannot say (cuSPARSE's product; out of memory). */
int fe_csr_first_groups(const fe_csr *M, long long groups, double *q, int nq);
/* The list that kernel reads for rows[nrows] (ascending rows of M) on M's backend, into *list
 * (none where nrows is 0): the rows for CSR, their positions in the SELL order (ascending) for
 * SELL; *nnz: their entries. The host reads M's row pointers (and SELL's order) once, to make
 * it. */
int fe_csr_rows_list(const fe_csr *M, const int *rows, int nrows, fe_buffer *list,
                     long long *nnz);
/* Launch y's listed rows of M x with kernel k (fe_csr_rows_entry's), list from
 * fe_csr_rows_list. */
int fe_csr_launch_rows(const fe_csr *M, struct fe_kernel *k, const fe_buffer *list, int nrows,
                       const fe_buffer *x, fe_buffer *y);
/* The counted flops (2 per nonzero of the pattern, as CSR's, so the formats' rates compare:
 * padding and dropped zeros do no useful work) and bytes (M's arrays a product reads:
 * fe_csr_matrix_bytes; x and y once) of y = M x. */
void fe_csr_counts(const fe_csr *M, double *flops, double *bytes);
/* The bytes of M's arrays one product reads: CSR's values, columns and row pointers; SELL's
 * value slots (padding included), column stream, chunk starts and permutation. */
double fe_csr_matrix_bytes(const fe_csr *M);
/* The bytes M holds on its backend: the CSR arrays, and the SELL copy where it has one. */
double fe_csr_bytes(const fe_csr *M);
/* SELL's layout in words for the reports ("SELL-C-sigma, <how>x% of the slots padding, z
 * zeros dropped, 16-bit column deltas"), into buf[n]. */
void fe_csr_sell_describe(const fe_csr *M, const char *how, char *buf, size_t n);
/* "csr" or "sell". */
const char *fe_csr_format_name(const fe_csr *M);
/* y = M x (*y made when NULL; x converted when it lives elsewhere). */
int fe_csr_apply(fe_csr *M, const fe_vector *x, fe_vector **y, fe_report *rep);
/* The whole matrix on the host: rowptr[n + 1], cols[nnz], vals[nnz] (malloc'd). */
int fe_csr_get(const fe_csr *M, int **rowptr, int **cols, double **vals);
/* Matrix Market coordinate real general, 1-based. */
int fe_csr_export_mtx(const fe_csr *M, const char *path);
/* A CSR matrix of n rows on be in prec from the host's arrays (any number of columns: x
 * has as many entries as the columns reach), its product's layout: format FE_FORMAT_CSR
 * with lanes items a row (0: 1), FE_FORMAT_SELL (a SELL-C-sigma copy beside the CSR arrays,
 * one item a row) or FE_FORMAT_AUTO (the device's: on a GPU SELL, or CSR with 8 or 32 lanes
 * where rows hold 24 or 64 entries on average; CSR on a CPU). single_vals (prec double):
 * the values stored in single precision, the products still double. */
int fe_csr_from_host(fe_backend *be, fe_precision prec, int format, int lanes, int single_vals,
                     int n, const int *rowptr, const int *cols, const double *vals, fe_csr **M);
/* Release one holder of M (the matrix itself with the last). */
void fe_csr_free(fe_csr *M);
/* The matrix A's last assembly made (fe_operator_assemble: kept, not held, by A) on be in
 * prec with the layout of mo (fe_csr_layout), with A's named constants as they are now, its
 * physics linear (the Jacobian the same at every state): a new holder of it (fe_csr_free
 * releases it), else NULL. The csr strategy's setup takes it instead of assembling again. */
fe_csr *fe_operator_assembled_find(fe_operator *A, const fe_backend *be, fe_precision prec,
                                   const fe_matrix_opts *mo);

#endif
