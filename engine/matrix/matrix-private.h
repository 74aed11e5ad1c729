/* felab matrices, private: what the files of engine/matrix/ share and nothing else includes
 * (matrix.c: the element matrices; elemat-cache.c: their kernels, kept with the operator;
 * pattern.c: the assembly's pattern; pattern-fill.c: its second pass and the cpu's fill;
 * host-fill.c: the element matrices the cpu's fill makes as its rows need them; assemble.c:
 * fe_operator_assemble; sparse.c: the CSR and SELL products). Private to those files. */
#ifndef FE_MATRIX_PRIVATE_H
#define FE_MATRIX_PRIVATE_H

#include <stddef.h>

#include "engine/matrix/matrix.h"
#include "engine/operator/strategy.h"

#define EM_ITEMS 128 /* items per group of fe_assemble and fe_spmv (elemat.knl) */

/* ---- the element matrices' kernels, kept with the operator (elemat-cache.c) ---- */

/* What an element-matrix kernel's source depends on beside its operator (the space, the
 * physics and the rules): the method and its variant, where it runs, its cells per work
 * group, the form of the geometry it reads (the fields of fe_realization_spec that differ
 * between realizations: colored, geo_shared) and the method's own shape. */
typedef struct elemat_key {
  const fe_elemat_method *method;
  int variant;           /* quadrature's (elemat_variants), -1: the method has none */
  fe_backend *be;
  fe_precision prec;
  int block;             /* cells per work group */
  int colored, geo_shared; /* of the realization whose geometry it reads */
  int shape;             /* the method's own (tensor: cells contracted concurrently), else 0 */
} elemat_key;

/* The key of method m's kernel in variant v with `block` cells per group and its own shape,
 * reading r's geometry. */
elemat_key elemat_key_of(const fe_realization *r, const fe_elemat_method *m, int v, int block,
                         int shape);
/* Kernel `entry` of key on A: from A's cache (*compile_s 0), or compiled from the source
 * write(ctx, &src) makes, and kept there (past a bound, the least recently used is freed:
 * a kernel serves the call that asked for it). */
int elemat_kernel(fe_operator *A, const elemat_key *key, int (*write)(const void *ctx, char **src),
                  const void *ctx, const char *entry, fe_kernel **k, double *compile_s);

/* Keep M as A's last assembled matrix (named, not held: fe_operator_assembled_find), where
 * A's Jacobian is linear. */
void elemat_keep_assembled(fe_operator *A, fe_csr *M);

/* ---- the element matrices (matrix.c) ---- */

/* The variants of method "quadrature": reg_nojac, reg_jac, shm_nojac, shm_jac, gemm,
 * gemm_mma (cuda, double). */
#define FE_ELEMAT_VARIANTS 6

/* One variant of strategy "quadrature" (the table elemat_variants in matrix.c). */
typedef struct elemat_variant {
  const char *name;
  int shm, nojac;
  const char *summary; /* the report's line (shm, gemm: its shape is added) */
  int gemm;            /* 1: kernel fe_elemat_gemm */
  int mma;             /* 1: its phase 3 on fp64 tensor cores (GM_MMA: cuda, double only) */
} elemat_variant;

extern const elemat_variant elemat_variants[FE_ELEMAT_VARIANTS];

/* How one variant's kernel is compiled and launched. */
typedef struct elemat_shape {
  int v;          /* the variant */
  int block;      /* cells per work group (BLOCK) */
  int pc;         /* columns per part (EM_PC; reg: all of them) */
  size_t shared;  /* bytes of shared memory per work group */
  size_t dynamic; /* the same when they are dynamic (cuda, above the static limit), else 0 */
  size_t items;   /* work-group size */
  /* gemm: the slots kept per component (the value, the DIM reference derivatives), points
   * per chunk, the register tile (rows x columns of K per item), sums kept in registers
   * over the chunks (1: an item per tile) */
  int gv, gg, qc, ti, tj, reg;
  int warps; /* gemm_mma: warps per group, each owning strips of 8x8 tiles of K */
} elemat_shape;

/* The shape of variant v on r (asked: the block asked, 0: none). */
int elemat_shape_of(const fe_realization *r, int asked, int v, elemat_shape *sh);
/* The source elemat_kernel_for compiles. */
int elemat_source_for(const fe_realization *r, const elemat_shape *sh, char **src);
/* Variant sh->v's kernel for its shape, reading r's geometry (elemat_kernel: compiled on
 * first use); *seconds the compile time. */
int elemat_kernel_for(const fe_realization *r, const elemat_shape *sh, fe_kernel **k,
                      double *seconds);
/* The realization whose geometry variant v's kernels read for the options o and mo (NULL:
 * the defaults): fe_operator_realize_geometry in groups of mo's block (the register
 * variants'; shm and gemm group their own cells) with mo's geometry. */
int elemat_geometry(fe_operator *A, const fe_action_opts *o, const fe_matrix_opts *mo, int v,
                    fe_realization **r);
/* Counted flops of the element matrix of one cell. */
double elemat_flops_per_cell(const fe_realization *r, const fe_kernel_spec *s,
                             const elemat_shape *sh);

/* ---- the assembly's pattern and fill (pattern.c, pattern-fill.c) ---- */

/* What the pattern is built from: V, its constrained dofs, each node's count of cells and
 * its first and last (pattern_make), the rows' order, the outliers' cells. */
typedef struct pattern {
  const fe_space *V;
  const int *fixed; /* per dof: 1 constrained */
  int *start;       /* the cells of the nodes before node a (a prefix of their counts) */
  int *first, *last; /* node a's first and last cell (-1: none) */
  int *list;        /* node_cells (the device's rows): node a's at list[start[a] ..), cell order */
  int *nfree;       /* free components per node */
  int maxdeg;       /* the most cells of one node */
  int *order, *pos; /* the fill's order: position -> node and back (NULL: the ids') */
  int *pre;         /* the cells of the rows before each position (start in the ids' order) */
  int fit;          /* the widest span (last - first) of a row listed from a chunk's band */
  int nout;         /* the outliers (rows of wider spans): their ids ascending, their cells */
  int *out, *ostart, *olist;
  /* pattern_keep: the first pass keeps each row's neighbours for the fill by cells, thread t
   * of nkept_threads its rows' (node_range) in order at kept[t] (see keep_row) */
  unsigned short **kept;
  size_t *kept_len, *kept_cap;
  int nkept, nkept_threads;
  /* lattice_rows: a box's lattice gives the rows (pattern-lattice.c; NULL: the passes above) */
  struct pattern_lattice *lattice;
} pattern;

/* A row's kept neighbours that do not fit: made again. */
#define KEPT_NONE 0xffff

/* The fused fill's element matrices (a backend whose buffers are host memory): variant
 * reg_jac (the Jacobian from the nodes: no stored factors) on a realization made here in the
 * mesh's cell order and not kept by A. Its coordinates and per-cell constants are the host's
 * own arrays, wrapped (converted once in single precision); its field maps are gathered per
 * cell; the named constants and the fields are bound as for any call. */
typedef struct host_fill {
  fe_realization h;
  elemat_shape sh;
  fe_kernel *k;
  int batch;            /* cells per launch of a window's front */
  int dbl;              /* the matrices in double (else float) */
  size_t kn;            /* entries of an element matrix */
  size_t window;        /* about the most matrices a thread's window holds */
  const char *aux;      /* per-cell constants, aux_bytes per cell (NULL: none) */
  size_t aux_bytes;
  const int *maps;      /* the fields' dof maps, nbf per cell (NULL: none) */
  int nbf;
  void *own[3];         /* what was allocated here: converted coordinates and constants, maps */
  fe_vector *u;         /* the state made here (zero, or converted), or NULL */
  fe_vector *tf[FE_PHYSICS_MAX_FIELDS];
  fe_arg args[15];      /* fe_elemat's; per launch: groups, cells, constants, maps, ids, K */
} host_fill;

/* A thread's window of element matrices: cells [front - W, front) at slots c mod W (W a
 * power of two), then maxdeg slots for a row's cells computed apart; end: past the last
 * cell its rows need; fit: the widest span of a row it takes. */
typedef struct cell_window {
  int W, front, end, fit;
  void *K;
  int given, base; /* given: a row's cells' matrices are made already, at slots base, base + 1,
                    * ... of K (the fill by cells' rows apart, made together) */
} cell_window;

/* A thread's scratch for the fill: a launch's slots and a gathered row's cells (nodes,
 * constants, maps), the rows' marks and places (fill_row), a chunk's cells, its launches. */
typedef struct fill_scratch {
  int *ids, *gcells, *gmaps, *seen, *at, *nbr, *slot; /* seen, at: made on first use */
  int gcap;           /* the cells gcells, gmaps, gaux and ids hold */
  int *pcells, *prow, *pstart, np, npc; /* the fill by cells' rows apart waiting: their cells
                                         * (gcap), nodes and first cells, how many of each */
  unsigned char *atb; /* the fill by cells' places of a row's neighbours (at as bytes) */
  int *cstart, *list; /* a chunk of rows' cells (chunk_cells) */
  char *gaux;
  double *acc;
  int launches;
  long long made; /* cells' matrices computed (a cell in two threads' bands: twice) */
} fill_scratch;

/* A thread's plan of the fill by cells (cell-fill.c: scalar rows in double): each row's way,
 * sufmin, the ring of W cells' places of entries, the matrices of a batch and of a row apart;
 * the cells' front and end, the rows' front (q) in its chunk [qc, qn) of rows up to q1. */
typedef struct cell_plan {
  int W, B, front, end;
  int *sufmin;         /* from each row position on: the least first cell of the rows by cells */
  unsigned char *way;  /* per row position: by cells, apart (as a row), or no adds */
  char *ring;          /* cell c's places at slot c mod W: its rows' first places in the values
                        * (nb ints, -1: not this thread's row), then its entries' columns in
                        * them (nb x nb bytes, 255: a constrained column) */
  void *K;             /* B + maxdeg element matrices */
  int q, qc, qn, q1;
  const unsigned short *kept; /* the first pass's neighbours of the thread's rows (NULL: none) */
  size_t kp;           /* the next row's there */
} cell_plan;

/* The most (cell, node) pairs a chunk of rows lists at once (a thread's, 4 bytes each): a
 * chunk scans the cells its rows span, about a layer of a box beyond its own, so longer
 * chunks scan fewer cells twice. */
#define CHUNK_CELLS (1 << 21)

void pattern_free(pattern *P);
/* P->start, first, last, nfree, maxdeg. */
int node_spans(pattern *P);
/* The rows at positions [a0, a1) (P->order's, or the nodes' own): the power of two e, 2^e the
 * least bound of 99% of their spans from their first cell to their last. */
int span_exponent(const pattern *P, int a0, int a1);
/* node_spans, then the rows' order and the outliers (P->pre, order, pos, fit, out). */
int pattern_make(pattern *P);
/* P->list: every node's cells (for the device's rows; pattern_make made). */
int node_cells(pattern *P);
/* Thread t of nt's rows [*a0, *a1) of the fill's order: contiguous, balanced by their cells. */
void node_range(const pattern *P, int t, int nt, int *a0, int *a1);
/* Thread t of nt's positions [*a0, *a1) of n: contiguous, balanced by a prefix pre (n + 1). */
void prefix_share(const int *pre, int n, int t, int nt, int *a0, int *a1);
/* A chunk's capacity: CHUNK_CELLS, or the most cells of a node. */
int chunk_cap(const pattern *P);
/* The rows from position q0 of the fill's order, up to qend, cap of their cells and cap / 4
 * + 1 rows (cstart: that many and one more), listed:
 * row q's cells at list[cstart[q - q0] .. cstart[q - q0 + 1]), in cell order. Returns the
 * position past the chunk. */
int chunk_cells(const pattern *P, int q0, int qend, int cap, int *cstart, int *list);
/* The distinct nodes of node a's deg cells into nbr (seen: a thread's marks, seen[b] == a
 * once b is in); sorted when asked (insertion: rows are short). Returns their number. */
int node_neighbours(const pattern *P, int a, const int *cells, int deg, int *seen, int *nbr,
                    int sorted);
/* The first pass: rowptr (ndofs + 1); with pattern_keep, each row's neighbours kept. */
int count_rows(pattern *P, int *rowptr);
/* Ask the first pass to keep each row's neighbours (2 bytes each) for the fill by cells. */
int pattern_keep(pattern *P);
/* Thread t of nt's kept neighbours, or NULL (none kept, or by another count of threads). */
const unsigned short *pattern_kept(const pattern *P, int t, int nt);
/* A scalar space on a box's vertices, filled in double (pattern-lattice.c): rowptr and
 * P->lattice from the lattice where the cells follow it (else P->lattice stays NULL and
 * nothing is written). */
int lattice_rows(pattern *P, int *rowptr);
/* The lattice's columns and values (P->lattice made), as fill_pattern's. */
int lattice_fill(const pattern *P, const int *rowptr, int *cols, double *vals,
                 const host_fill *F, int *launches, long long *made);
void pattern_lattice_free(pattern *P);
/* The second pass, writing cols (and with F vals) in place; *launches, *made: the fill's
 * (pattern-fill.c). */
int fill_pattern(const pattern *P, const int *rowptr, int *cols, void *vals,
                 const host_fill *F, int *launches, long long *made);

/* Row a of the second pass (fill_row: its columns, with F its values from its deg cells);
 * next, nnext: the next row's cells to prefetch (NULL: none). */
int fill_row(const pattern *P, const int *rowptr, int *cols, void *vals, const host_fill *F,
             cell_window *w, int a, const int *cells, int deg, const int *next, int nnext,
             fill_scratch *x);

/* A thread's marks for node_neighbours, made on first use (NULL: out of memory). */
int *fill_seen(const pattern *P, fill_scratch *x);
/* Whether the fill of P's rows in double (dbl) or single goes by cells (cell-fill.c: scalar
 * rows in double; FELAB_FILL_ROWS set: never), its rows' lengths allowing. */
int fill_by_cells_wanted(const pattern *P, int dbl);

/* The fill by cells (cell-fill.c), for scalar rows in double: thread rows [q0, q1)'s plan
 * (its arrays but the ring and the matrices: cell_plan_alloc, cell_plan_bytes of them), then
 * the fill. */
int cell_plan_make(const host_fill *F, const pattern *P, int q0, int q1, cell_plan *c);
size_t cell_plan_bytes(const host_fill *F, const pattern *P, const cell_plan *c);
int cell_plan_alloc(const host_fill *F, const pattern *P, cell_plan *c);
void cell_plan_free(cell_plan *c);
int fill_by_cells(const pattern *P, const int *rowptr, int *cols, double *vals,
                  const host_fill *F, cell_plan *c, int q0, int q1, fill_scratch *x);

/* ---- the pattern and the fill on the device (pattern-device.c) ---- */

/* The device's arrays of the pattern (pattern.knl): the cell map, each node's cells (start,
 * list, in cell order), the free components of each node and the constrained marks; the
 * kernels' module; the most cells of one node and the row kernel's cap. */
typedef struct device_pattern {
  fe_backend *be;
  fe_precision prec;
  fe_module *mod, *rmod; /* pattern.knl's kernels; the row kernel of cap */
  fe_kernel *zero, *count, *list_k, *sort, *fill, *iota;
  fe_buffer cells, start, list, nfree, fixed;
  int maxdeg, cap;
  int wide; /* device_pattern_make: a node's cells hold more entries than the row kernels take
             * (maxdeg of nb nodes): nothing made, the pattern is the host's to build */
  double compile_s, transfer; /* the module's compile (or load), the host's transfers */
  fe_realization h; /* device_pattern_matrices': the mesh's order, its arrays uploaded */
} device_pattern;

/* The pattern of P (its V and fixed marks) built on be: rowptr (ndofs + 1, on the host: the
 * prefix of the rows' lengths counted there) and *nnz; D keeps what the columns and the fill
 * read. A node whose cells hold more entries than the row kernels take: D->wide, nothing
 * made (the caller builds the pattern on the host). */
int device_pattern_make(const pattern *P, fe_backend *be, fe_precision prec, int *rowptr,
                        long long *nnz, device_pattern *D);
/* D from the host's pattern P (node_cells made): the fill's arrays uploaded. */
int device_pattern_from_host(const pattern *P, fe_backend *be, fe_precision prec,
                             device_pattern *D);
/* The columns (cols: nnz ints on be) of the rows rowptr (on be) and their values (vals):
 * each the sum of its cells' entries of the stored element matrices K (mesh order), cell
 * by cell in cell order; a constrained row holds 1. */
int device_pattern_write(device_pattern *D, const fe_space *V, const fe_buffer *rowptr,
                         fe_buffer *cols, const fe_buffer *K, fe_buffer *vals, double *seconds);
/* The values alone, into the host's pattern (rowptr, cols on be): the same sums, an item a
 * row (its columns' places by binary search). */
int device_pattern_fill(device_pattern *D, const fe_space *V, const fe_buffer *K,
                        const fe_buffer *rowptr, const fe_buffer *cols, fe_buffer *vals,
                        double *seconds);
/* The element matrices *K of the device's rows: variant reg_jac (the Jacobian from the
 * nodes: no stored factors) in the mesh's cell order, on a realization made here and not
 * kept by A (D->h: the coordinates, per-cell constants and field maps uploaded, the cell
 * map D's; the product's module is made from its source),
 * at the state at (NULL: zero); krep: their parts ("geometry": that realization,
 * "matrices": the kernel), the kernel's time, flops and bytes. The nodes must carry the
 * geometry's map (the caller checks). */
int device_pattern_matrices(device_pattern *D, fe_operator *A, const fe_vector *at,
                            fe_elemats **K, fe_report *krep, double *compile_s,
                            double *transfer);
/* Where the backend can (cuda), every module the device's rows will want (the pattern's
 * kernels, the row kernels of the common caps, the element matrices', the product's with
 * `lanes` items per row) compiled side by side ahead of them; returns the wall seconds. */
double device_pattern_precompile(fe_operator *A, fe_backend *be, fe_precision prec, int lanes);
void device_pattern_free(device_pattern *D);

/* ---- the cpu's element matrices, made as the rows need them (host-fill.c) ---- */

int host_fill_make(fe_operator *A, const fe_vector *at, fe_backend *be, fe_precision prec,
                   host_fill *F, double *compile_s, double *transfer);
void host_fill_free(host_fill *F);
/* The window for rows [a0, a1) of the fill's order. */
void window_make(const host_fill *F, const pattern *P, int a0, int a1, cell_window *w);
/* The bytes of window w's matrices. */
size_t window_bytes(const host_fill *F, const pattern *P, const cell_window *w);
/* A row's deg cells' slots into x->slot, their matrices made (a failure: its code). */
int window_row(const host_fill *F, const pattern *P, cell_window *w, const int *cells, int deg,
               fill_scratch *x);
/* The element matrices of cells [c0, c0 + n) into slots x->ids of K (kslots of them),
 * counted in x (a failure: its code). */
int host_fill_cells(const host_fill *F, int c0, int n, fill_scratch *x, void *K, size_t kslots);
/* Element matrices of n cells anywhere in the mesh (gathered into x's buffers, at most
 * x->gcap) into slots slot0 .. slot0 + n - 1 of K (kslots). Called by threads. */
int host_fill_gathered(const host_fill *F, const int *cells, int n, int slot0, fill_scratch *x,
                       void *K, size_t kslots);
/* Prefetch the matrices of a row's deg cells that the window holds. */
void window_prefetch(const host_fill *F, const cell_window *w, const int *cells, int deg);

/* ---- the product's formats (sparse.c) ---- */

/* M's product kernel (fe_spmv, or fe_spmv_sell) from the sparse module of its lanes. */
int csr_module(fe_csr *M, double *seconds);
/* The library's product (format "cusparse"): its descriptors of M's CSR arrays. */
int csr_make_library(fe_csr *M);
/* Check the asked layout of the product (mo's format, chunk, sigma, deltas, drop_zeros; lanes:
 * CSR's items per row). */
int check_format(const fe_matrix_opts *mo, int lanes);
/* M's SELL-C-sigma copy from its filled CSR arrays (engine/matrix/matrix.h's layout);
 * *host: the host's seconds; *seconds: the kernels'. */
int csr_make_sell(fe_csr *M, double *host, double *seconds);

#endif
