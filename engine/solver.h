/* felab Krylov solvers on matrix-free operators. */
#ifndef FE_SOLVER_H
#define FE_SOLVER_H

#include "engine/operator.h"

typedef struct fe_solver_opts {
  const char *pc;      /* "none" or "jacobi" */
  double rtol;         /* stop when ||r|| <= rtol ||r0|| ... */
  double atol;         /* ... or ||r|| <= atol */
  int maxit;
  fe_action_opts act;  /* backend, precision, strategy */
  int monitor;         /* print each iteration's residual norm */
} fe_solver_opts;

typedef struct fe_solver_info {
  int iterations;
  int converged;
  char reason[96];     /* "rtol", "atol", "maxit", "breakdown: ...", "interrupted" */
  int nhistory;
  double *history;     /* residual norms, iteration 0..iterations (malloc'd) */
  fe_report report;    /* the whole solve: flops, bytes and time of every kernel */
} fe_solver_info;

void fe_solver_opts_default(fe_solver_opts *o);
void fe_solver_info_free(fe_solver_info *info);

/* Preconditioned CG on J x = b (b != NULL), or on residual(u) = 0 for linear physics
 * (b == NULL: x = u0 + J^{-1}(-residual(u0)) where u0 carries the boundary values).
 * x0: initial guess or NULL. *x is made on the solve's backend. */
int fe_solve_cg(fe_operator *A, const fe_vector *b, const fe_vector *x0, const fe_solver_opts *o,
                fe_vector **x, fe_solver_info *info);

#endif
