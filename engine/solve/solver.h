/* felab Krylov solvers on matrix-free operators. */
#ifndef FE_SOLVER_H
#define FE_SOLVER_H

#include "engine/operator/operator.h"
#include "engine/solve/precond.h"

typedef struct fe_solver_opts {
  const char *pc;      /* the preconditioner unit (engine/solve/precond.h): "none", "jacobi", ... */
  fe_precond_opts pc_opts; /* its options (pc_opts.name is ignored: pc names it) */
  fe_precond *precond; /* made beforehand and reused (time steps), not freed by the solve;
                        * NULL: the solve makes one from pc and pc_opts and frees it */
  double rtol;         /* stop when ||r|| <= rtol ||r0|| ... */
  double atol;         /* ... or ||r|| <= atol */
  int maxit;
  fe_action_opts act;  /* backend, precision, strategy */
  int monitor;         /* print each iteration's residual norm */
  const fe_vector *at; /* state at which J and diag(J) are taken (NULL: the zero state);
                        * Newton sets it to the current iterate */
  int restart;         /* gmres: Krylov vectors kept before a restart (30) */
  int pq_pass;         /* cg with its scalars on the device: 1 makes (p, q) in a pass of its
                        * own even where the apply can add it up (0: the apply's, where it can) */
} fe_solver_opts;

typedef struct fe_solver_info {
  int iterations;
  int converged;
  char reason[96];     /* "rtol", "atol", "maxit", "breakdown: ...", "interrupted" */
  int nhistory;
  double *history;     /* residual norms, iteration 0..iterations (malloc'd) */
  fe_report report;    /* the whole solve: flops, bytes and time of every kernel */
  char pc[200];        /* the preconditioner that ran (its describe) */
  double pc_setup_seconds; /* its setup in this solve (0: made beforehand), not in the
                            * iterations' time */
  int pq_from_apply;   /* cg: every step's (p, q) came from its apply (no pass of its own) */
} fe_solver_info;

void fe_solver_opts_default(fe_solver_opts *o);
void fe_solver_info_free(fe_solver_info *info);

/* The starting vector of a solve on the backend and precision of act: a copy of x0, or
 * (x0 NULL) the operator's boundary values on constrained nodes and zero elsewhere.
 * impose: put the boundary values on x0's constrained nodes too. Solves of residual(u) = 0
 * need it: the Jacobian action ignores the constrained entries of its direction (operator.h),
 * so it cannot account for boundary values that are still moving. */
int fe_solver_initial(fe_operator *A, const fe_vector *x0, const fe_action_opts *act, int impose,
                      fe_vector **x);
/* The preconditioner of a solve on A: o->precond (an error unless it was made for A on the
 * solve's backend and precision), or one made from o->pc and o->pc_opts at o->at (*made = 1:
 * the solve frees it), or NULL for pc "none" and "jacobi", which the solvers fuse into their
 * vector updates. name ("cg", ...) starts the messages; info->pc and pc_setup_seconds are
 * filled. */
int fe_solver_precond(const char *name, fe_operator *A, const fe_solver_opts *o,
                      fe_precond **P, int *made, fe_solver_info *info);
/* Append v to the history *h of *n norms (grown by doubling). */
int fe_solver_history_add(double **h, int *n, double v);

/* Preconditioned CG on J x = b (b != NULL), or on residual(u) = 0 for linear physics
 * (b == NULL: x = u0 + J^{-1}(-residual(u0)) where u0 carries the boundary values).
 * J and the Jacobi diagonal are taken at o->at. x0: initial guess or NULL (with b NULL, its
 * constrained entries are replaced by the boundary values). *x is made on the solve's
 * backend. The solve's report goes to the session log unless o->act.nolog. */
int fe_solve_cg(fe_operator *A, const fe_vector *b, const fe_vector *x0, const fe_solver_opts *o,
                fe_vector **x, fe_solver_info *info);

/* The nonsymmetric Krylov methods (engine/solve/krylov.c), with fe_solve_cg's arguments and
 * conventions, right-preconditioned: each stops on the true residual ||b - J x||. A
 * breakdown is a result, not an error: converged = 0 and reason "breakdown: ...". bicg
 * also needs J^T (fe_operator_transpose). */
int fe_solve_bicg(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                  const fe_solver_opts *o, fe_vector **x, fe_solver_info *info);
int fe_solve_bicgstab(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                      const fe_solver_opts *o, fe_vector **x, fe_solver_info *info);
int fe_solve_gmres(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                   const fe_solver_opts *o, fe_vector **x, fe_solver_info *info);
/* The solver named method ("cg", "bicg", "bicgstab", "gmres"); an unknown name is an error
 * listing them. */
int fe_solve_linear(const char *method, fe_operator *A, const fe_vector *b, const fe_vector *x0,
                    const fe_solver_opts *o, fe_vector **x, fe_solver_info *info);
/* Whether method names a solver fe_solve_linear knows. */
int fe_solver_known(const char *method);

#endif
