/* felab Newton's method for nonlinear physics: residual(u) = 0 with matrix-free Jacobian
 * actions and a preconditioned Krylov solve for each linear step (engine/solve/newton.c explains). */
#ifndef FE_NEWTON_H
#define FE_NEWTON_H

#include "engine/solve/solver.h"

typedef struct fe_newton_opts {
  const char *linear;     /* the linear solver of each step: "cg" (default), "bicg",
                           * "bicgstab" or "gmres" (J(u) nonsymmetric) */
  const char *pc;         /* its preconditioner unit (engine/solve/precond.h): "jacobi" (diag J(u),
                           * default), "none", "chebyshev", ...; made anew at every u */
  fe_precond_opts pc_opts; /* the unit's options (pc_opts.name is ignored: pc names it) */
  double rtol;            /* stop when ||r_k|| <= rtol ||r_0|| ... */
  double atol;            /* ... or ||r_k|| <= atol */
  int maxit;              /* Newton steps at most */
  double linear_rtol;     /* each step: ||J du + r_k|| <= linear_rtol ||r_k|| (fixed, 1e-12) */
  int linear_maxit;       /* linear iterations at most per step */
  int restart;            /* gmres: its restart (30) */
  const char *linesearch; /* "backtrack" (default: halve the step until ||r|| decreases) or
                           * "none" (full steps) */
  fe_action_opts act;     /* backend, precision, strategy of every action and vector */
  int monitor;            /* print each step's residual norm and CG iterations */
} fe_newton_opts;

typedef struct fe_newton_info {
  int iterations;        /* Newton steps taken */
  int converged;
  char reason[160];      /* "rtol", "atol", "maxit", "stagnated: ...", ... */
  int nhistory;
  double *history;       /* ||r_k||, k = 0..iterations (malloc'd) */
  int linear_iterations; /* linear iterations of all steps together */
  fe_report report;      /* the whole solve: residuals, CG solves and vector work */
  char pc[200];          /* the last step's preconditioner (its describe) */
  double pc_setup_seconds; /* the preconditioners' setups, all steps together */
} fe_newton_info;

void fe_newton_opts_default(fe_newton_opts *o);
void fe_newton_info_free(fe_newton_info *info);

/* Solve residual(u) = 0 by Newton's method from u0 (NULL: the boundary values, zero
 * elsewhere). *u is made on the solve's backend. A solve that ends without converging
 * (maxit, stagnation) returns 0 with info->converged = 0; a non-finite or exploding
 * residual, a breakdown of the linear solver (CG: J not positive definite at some step) or
 * Ctrl-C is an error naming the step. */
int fe_solve_newton(fe_operator *A, const fe_vector *u0, const fe_newton_opts *o, fe_vector **u,
                    fe_newton_info *info);

#endif
