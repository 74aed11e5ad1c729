/* felab matrices: batches of element matrices of an operator's Jacobian, and the assembled
 * Jacobian in CSR on a backend (engine/matrix.c, kernels in engine/kernels/elemat.knl). */
#ifndef FE_MATRIX_H
#define FE_MATRIX_H

#include "engine/operator.h"
#include "engine/perf.h"

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

/* A square CSR matrix on a backend: sorted columns per row. */
typedef struct fe_csr {
  fe_backend *be;
  fe_precision prec;
  int n;
  long long nnz;
  fe_buffer rowptr, cols, vals;
  int lanes;             /* items per row of its product (1: scalar CSR, more: vector CSR) */
  struct fe_module *mod; /* its fe_spmv */
  struct fe_kernel *spmv;
} fe_csr;

/* The element matrices of A's Jacobian at the state at (NULL: zero) with strategy
 * "quadrature" (the only one so far: NULL means it), variant "reg_jac" (NULL: it), on the
 * backend and precision of o. The report has the stage times: setup (prepare), transfer
 * (in), seconds (the kernel), and the counted flops and bytes. */
int fe_element_matrices(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                        const char *strategy, const char *variant, fe_elemats **K,
                        fe_report *rep);
/* Cell c's matrix into out[n * n] (doubles, row-major). */
int fe_elemats_get(const fe_elemats *K, int cell, double *out);
/* A copy on another backend or precision. */
int fe_elemats_convert(const fe_elemats *K, fe_backend *be, fe_precision prec, fe_elemats **out);
void fe_elemats_free(fe_elemats *K);

/* The Jacobian at `at` assembled on the device: the pattern from the dof map (on the host),
 * the values added by the device from the element matrices (atomics). o->lanes: items per
 * row of its product (0: 4 on a GPU, 1 on the cpu). Constrained rows are
 * the identity's and free rows have no constrained columns: M x equals the matrix-free
 * action. The report: setup (pattern and element matrices), seconds (the adds). */
int fe_operator_assemble(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_csr **M, fe_report *rep);
/* The elemat module's source for realization r (engine/strategy.h) with `lanes` items per
 * row in its product. */
struct fe_realization;
int fe_elemat_source(const struct fe_realization *r, int lanes, char **src);
/* Launch y = M x with kernel k (M's own or a module of the same lanes); seconds: NULL, or
 * block and time it. */
int fe_csr_launch(const fe_csr *M, struct fe_kernel *k, const fe_buffer *x, fe_buffer *y,
                  double *seconds);
/* y = M x (*y made when NULL; x converted when it lives elsewhere). */
int fe_csr_apply(fe_csr *M, const fe_vector *x, fe_vector **y, fe_report *rep);
/* The whole matrix on the host: rowptr[n + 1], cols[nnz], vals[nnz] (malloc'd). */
int fe_csr_get(const fe_csr *M, int **rowptr, int **cols, double **vals);
/* Matrix Market coordinate real general, 1-based. */
int fe_csr_export_mtx(const fe_csr *M, const char *path);
void fe_csr_free(fe_csr *M);

#endif
