/* felab solvers: Newton's method for nonlinear physics, matrix-free.
 *
 * We seek u with residual(u) = 0. Near a solution the residual is nearly linear,
 *   residual(u + du) ~ residual(u) + J(u) du,
 * so each step solves the linear model for its root and moves there:
 *   r_k = residual(u_k),   J(u_k) du = -r_k,   u_{k+1} = u_k + lambda du.
 * When J is the exact derivative of the discrete residual and the linear solves are
 * accurate, the error squares at every step once it is small (quadratic convergence):
 * ||r_{k+1}|| <= C ||r_k||^2. For linear physics the model is exact and one step solves.
 *
 * Matrix-free: J(u_k) is never formed. CG (engine/solve/solver.c) solves each step with the
 * Jacobian action at the state u_k (fe_operator_apply(A, w, at = u_k)) and the Jacobi
 * preconditioner diag J(u_k) (fe_operator_diagonal at u_k), from du = 0, to a fixed
 * relative tolerance: ||J du + r_k|| <= linear_rtol ||r_k||. The default 1e-12 is two
 * orders below the default rtol, so that linear physics meets rtol in its one step and
 * the inexact solves do not spoil the quadratic phase (no Eisenstat-Walker forcing: a
 * loose early solve would save CG iterations, at the price of tuning). CG needs J(u_k)
 * symmetric positive definite: true for physics that derive from a convex energy
 * (Poisson, p-Laplacian, ...). A quasi-linear -div(k(u) grad u) has a nonsymmetric J:
 * CG may still converge, slowly, or break down, which stops the solve naming the step.
 *
 * Strong Dirichlet rows read residual_i = u_i - g_i and (J w)_i = w_i, and the Jacobian
 * action ignores the constrained entries of w: J is the derivative of the residual only
 * along directions that keep the boundary values. So u_0 gets the boundary values on its
 * constrained nodes before the first step (fe_solver_initial), and every du is zero there.
 *
 * Globalization (linesearch = "backtrack", the default): try lambda = 1, 1/2, 1/4, ...
 * until ||r(u + lambda du)|| <= (1 - 1e-4 lambda) ||r(u)|| (sufficient decrease). Near
 * the solution lambda = 1 passes at once, and the trial's residual is the next step's, so
 * the search costs nothing there. No acceptable lambda after 12 halvings: the solve has
 * stagnated (at rounding level, or J is wrong) and stops unconverged. "none" takes full
 * steps. Either way a non-finite residual, or one above 1e12 ||r_0||, is a divergence.
 *
 * Stop when ||r_k|| <= rtol ||r_0|| or ||r_k|| <= atol (2-norms, constrained rows
 * included). Ctrl-C is checked between steps, between line-search trials and inside CG.
 *
 * linear = "bicg", "bicgstab" or "gmres" (engine/solve/krylov.c) solve each step instead of CG
 * when J(u) is nonsymmetric (convection, quasi-linear diffusion). A step whose solve breaks
 * down or diverges stops the solve with an error naming the step and the reason; one that
 * reaches linear_maxit takes its inexact du, as CG's does.
 *
 * pc names any unit of the preconditioner layer (engine/solve/precond.h); a unit other than
 * jacobi and none is made anew for J(u_k) in every step (Chebyshev's Lanczos bounds change
 * with u), and its setup time is summed in info->pc_setup_seconds. */
#include "engine/solve/newton.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/progress.h"

#define NEWTON_DIVERGED 1e12 /* ||r_k|| above this times ||r_0||: diverged */
#define LS_HALVINGS 12       /* backtracking tries lambda = 1 .. 2^-12 */
#define LS_ALPHA 1e-4        /* sufficient decrease factor */

void fe_newton_opts_default(fe_newton_opts *o)
{
  memset(o, 0, sizeof *o);
  o->linear = "cg";
  o->pc = "jacobi";
  fe_precond_opts_default(&o->pc_opts);
  o->rtol = 1e-10;
  o->atol = 1e-50;
  o->maxit = 50;
  o->linear_rtol = 1e-12;
  o->linear_maxit = 1000;
  o->restart = 30;
  o->linesearch = "backtrack";
  fe_action_opts_default(&o->act);
}

void fe_newton_info_free(fe_newton_info *info)
{
  free(info->history);
  info->history = NULL;
  info->nhistory = 0;
}

/* The solve's vectors and its running account of work. */
typedef struct newton_work {
  fe_vector *u, *r;    /* the iterate and its residual */
  fe_vector *ut, *rt;  /* a trial iterate u + lambda du and its residual */
  fe_vector *b, *du;   /* the linear step: J(u) du = b = -r */
  fe_vector *zero;     /* CG's initial guess */
  fe_action_opts act;  /* o->act, kept out of the session log */
  fe_report last;      /* the last residual's report: backend, device, sizes */
  fe_report setup;     /* per linear step: CG's initial apply and its diagonal */
  double flops, bytes, compile_s, transfer_s, setup_s;
  int launches;
  fe_call_tally calls; /* of the work, the operator's calls' (the model's) */
  char pc[200];        /* the last linear solve's preconditioner */
  double pc_setup_s;   /* the preconditioners' setups (in setup_s too) */
} newton_work;

static void newton_work_free(newton_work *w)
{
  fe_vector *v[] = {w->r, w->ut, w->rt, w->b, w->du, w->zero};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) fe_vector_free(v[i]);
}

/* Add the operator's calls' work to the account: one call's, or a solve's (its calls, its
 * vector work apart). */
static void account_calls(newton_work *w, const fe_report *rep)
{
  w->flops += rep->flops;
  w->bytes += rep->bytes;
  w->launches += rep->launches;
  fe_call_tally_add(&w->calls, rep);
}

/* Add one call's counted work to the account. */
static void account(newton_work *w, const fe_report *rep)
{
  account_calls(w, rep);
  w->compile_s += rep->compile_seconds;
  w->transfer_s += rep->transfer_seconds;
  w->setup_s += rep->setup_seconds;
}

/* Add vector work on the solve's n reals: flops and words moved per entry, launches. */
static void account_vector(newton_work *w, double flops, double words, int launches)
{
  double n = w->u->n, wb = (double)fe_precision_size(w->u->prec);
  w->flops += flops * n;
  w->bytes += words * n * wb;
  w->launches += launches;
}

/* An error unless pc names a unit of the preconditioner layer; it lists them. */
static int check_pc(const char *pc)
{
  if (pc && fe_precond_find(pc)) return 0;
  char names[200];
  fe_precond_names(names, sizeof names);
  FE_ERROR(FE_ERR_ARG, "newton: unknown preconditioner '%s' (%s)", pc ? pc : "(null)", names);
}

static int check_opts(const fe_newton_opts *o)
{
  FE_ASSERT(fe_solver_known(o->linear), FE_ERR_ARG,
            "newton: unknown linear solver '%s' (cg, bicg, bicgstab, gmres)",
            o->linear ? o->linear : "(null)");
  FE_ASSERT(o->restart >= 1, FE_ERR_ARG, "newton: restart must be >= 1, got %d", o->restart);
  FE_CHECK(check_pc(o->pc));
  FE_ASSERT(o->linesearch && (!strcmp(o->linesearch, "backtrack") ||
                              !strcmp(o->linesearch, "none")),
            FE_ERR_ARG, "newton: unknown line search '%s' (backtrack, none)",
            o->linesearch ? o->linesearch : "(null)");
  FE_ASSERT(o->maxit >= 0, FE_ERR_ARG, "newton: maxit must be >= 0, got %d", o->maxit);
  FE_ASSERT(o->linear_maxit >= 0, FE_ERR_ARG, "newton: linear_maxit must be >= 0, got %d",
            o->linear_maxit);
  FE_ASSERT(o->rtol >= 0 && o->atol >= 0, FE_ERR_ARG, "newton: tolerances must be >= 0");
  FE_ASSERT(o->linear_rtol >= 0 && o->linear_rtol < 1, FE_ERR_ARG,
            "newton: linear_rtol must be in [0, 1), got %g", o->linear_rtol);
  return 0;
}

/* *r = residual(u) and *nrm = ||r||, accounted. */
static int residual_norm(fe_operator *A, newton_work *w, const fe_vector *u, fe_vector **r,
                         double *nrm)
{
  fe_report rep;
  FE_CHECK(fe_operator_residual(A, u, &w->act, r, &rep));
  FE_CHECK(fe_vector_norm(*r, nrm));
  account(w, &rep);
  w->last = rep;
  account_vector(w, 2, 1, 1);
  return 0;
}

/* Compile every action, then run the Jacobian action and diagonal once at u0 so that their
 * first-run driver work (PoCL compiles at the first launch) is compile time, not solve
 * time; their reports are the per-step cost of CG's setup. */
static int warm_up(fe_operator *A, const fe_newton_opts *o, newton_work *w)
{
  const char *actions[] = {"residual", "apply", "diagonal"};
  double cs;
  for (int i = 0; i < 3; i++) {
    FE_CHECK(fe_operator_prepare(A, actions[i], &w->act, &cs));
    w->compile_s += cs;
  }
  fe_report rep;
  FE_CHECK(fe_operator_apply(A, w->u, w->u, &w->act, &w->du, &w->setup));
  w->compile_s += w->setup.compile_seconds;
  w->setup_s += w->setup.setup_seconds;
  if (!strcmp(o->pc, "jacobi")) {
    FE_CHECK(fe_operator_diagonal(A, w->u, &w->act, &w->b, &rep));
    w->compile_s += rep.compile_seconds;
    w->setup.flops += rep.flops;
    w->setup.bytes += rep.bytes;
    w->setup.launches += rep.launches;
  }
  FE_CHECK(fe_vector_duplicate(w->u, &w->zero));
  if (!w->b) FE_CHECK(fe_vector_duplicate(w->u, &w->b));
  return 0;
}

/* A linear solver's error inside step k gets the step in its message. */
static int step_error(int rc, int step)
{
  if (rc != FE_ERR_SOLVER) return rc;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", fe_error_message());
  return fe_error_set(rc, __FILE__, __LINE__, __func__, "newton step %d: %s", step, msg);
}

/* w->du solves J(u) du = -r to linear_rtol; *its gets the linear solver's iterations. */
static int linear_step(fe_operator *A, const fe_newton_opts *o, newton_work *w, int step,
                       int *its)
{
  FE_CHECK(fe_vector_copy(w->b, w->r));
  FE_CHECK(fe_vector_axpby(w->b, 0.0, w->r, -1.0)); /* b <- -b = -r */
  account_vector(w, 3, 3, 1);
  fe_solver_opts co;
  fe_solver_opts_default(&co);
  co.pc = o->pc;
  co.pc_opts = o->pc_opts;
  co.rtol = o->linear_rtol;
  co.maxit = o->linear_maxit;
  co.act = w->act;
  co.at = w->u; /* J and its diagonal at the current iterate */
  co.restart = o->restart;
  fe_solver_info ci;
  fe_vector_free(w->du);
  w->du = NULL;
  int rc = fe_solve_linear(o->linear, A, w->b, w->zero, &co, &w->du, &ci);
  FE_CHECK(step_error(rc, step));
  if (!ci.converged && strcmp(ci.reason, "maxit") != 0) { /* a breakdown, a divergence */
    rc = fe_error_set(FE_ERR_SOLVER, __FILE__, __LINE__, __func__, "newton step %d: %s %s",
                      step, o->linear, ci.reason);
    fe_solver_info_free(&ci);
    return rc;
  }
  *its = ci.iterations;
  snprintf(w->pc, sizeof w->pc, "%s", ci.pc);
  w->pc_setup_s += ci.pc_setup_seconds;
  account(w, &ci.report);
  account_calls(w, &w->setup);
  fe_solver_info_free(&ci);
  return 0;
}

/* Trial ut = u + lambda du and its residual norm *rtn. */
static int trial(fe_operator *A, newton_work *w, double lambda, double *rtn)
{
  FE_CHECK_INTERRUPT();
  FE_CHECK(fe_vector_copy(w->ut, w->u));
  FE_CHECK(fe_vector_axpby(w->ut, lambda, w->du, 1.0)); /* ut <- u + lambda du */
  account_vector(w, 3, 5, 2);
  return residual_norm(A, w, w->ut, &w->rt, rtn);
}

/* Choose lambda along du (see the top): *rtn is the accepted trial's residual norm, or
 * *lambda = 0 when none was acceptable (stagnation). */
static int line_search(fe_operator *A, const fe_newton_opts *o, newton_work *w, int step,
                       double rn, double *lambda, double *rtn)
{
  int full = !strcmp(o->linesearch, "none"), finite = 0;
  *lambda = 1;
  for (int h = 0; h <= LS_HALVINGS; h++, *lambda /= 2) {
    FE_CHECK(trial(A, w, *lambda, rtn));
    finite |= isfinite(*rtn);
    if (full || *rtn <= (1 - LS_ALPHA * *lambda) * rn) return 0;
  }
  FE_ASSERT(finite, FE_ERR_SOLVER,
            "newton step %d diverged: |r| is not finite (%g) for every step length from 1 "
            "down to 2^-%d (|r| was %.6e before the step)", step, *rtn, LS_HALVINGS, rn);
  *lambda = 0;
  return 0;
}

/* Swap the accepted trial in: u <- ut, r <- rt. */
static void accept(newton_work *w)
{
  fe_vector *t = w->u;
  w->u = w->ut;
  w->ut = t;
  t = w->r;
  w->r = w->rt;
  w->rt = t;
}

/* Whether ||r|| meets the tolerances; sets the reason. */
static int converged(const fe_newton_opts *o, double rn, double r0, fe_newton_info *info)
{
  if (rn <= o->atol) snprintf(info->reason, sizeof info->reason, "atol");
  else if (rn <= o->rtol * r0) snprintf(info->reason, sizeof info->reason, "rtol");
  else return 0;
  return info->converged = 1;
}

/* One Newton step k from (u, r, rn): the linear solve, the line search, the checks. *stop
 * is set when the solve stagnated. */
static int newton_step(fe_operator *A, const fe_newton_opts *o, newton_work *w, int k,
                       double r0, double *rn, int *stop, fe_newton_info *info)
{
  int its = 0;
  double lambda, rtn;
  FE_CHECK_INTERRUPT();
  FE_CHECK(linear_step(A, o, w, k, &its));
  info->linear_iterations += its;
  FE_CHECK(line_search(A, o, w, k, *rn, &lambda, &rtn));
  if (lambda == 0) {
    snprintf(info->reason, sizeof info->reason,
             "stagnated: no step length decreases |r| = %.3e at step %d", *rn, k);
    *stop = 1;
    return 0;
  }
  FE_ASSERT(isfinite(rtn) && rtn <= NEWTON_DIVERGED * r0, FE_ERR_SOLVER,
            "newton step %d diverged: |r| = %g (|r0| = %.6e)", k, rtn, r0);
  accept(w);
  *rn = rtn;
  info->iterations = k;
  FE_CHECK(fe_solver_history_add(&info->history, &info->nhistory, rtn));
  if (o->monitor)
    printf("  newton %3d  |r| = %.6e  %s %4d its  step %g\n", k, rtn, o->linear, its, lambda);
  fe_progress_iteration(k, o->maxit, rtn, fmax(o->rtol * r0, o->atol));
  return 0;
}

/* The steps themselves; w->u holds u0 and receives the solution. */
static int newton_iterate(fe_operator *A, const fe_newton_opts *o, newton_work *w,
                          fe_newton_info *info)
{
  double r0, rn;
  FE_CHECK(warm_up(A, o, w));
  FE_CHECK(fe_vector_duplicate(w->u, &w->ut));
  double t0 = fe_clock(), compile0 = w->compile_s;
  FE_CHECK(residual_norm(A, w, w->u, &w->r, &r0));
  FE_ASSERT(isfinite(r0), FE_ERR_SOLVER, "newton: the initial residual is not finite (%g)", r0);
  FE_CHECK(fe_solver_history_add(&info->history, &info->nhistory, r0));
  if (o->monitor) printf("  newton %3d  |r| = %.6e\n", 0, r0);
  fe_progress_iteration(0, o->maxit, r0, fmax(o->rtol * r0, o->atol));
  snprintf(info->reason, sizeof info->reason, "maxit");
  rn = r0;
  int stop = converged(o, rn, r0, info);
  for (int k = 1; k <= o->maxit && !stop; k++) {
    FE_CHECK(newton_step(A, o, w, k, r0, &rn, &stop, info));
    stop = stop || converged(o, rn, r0, info);
  }
  FE_CHECK(w->u->be->ops->finish(w->u->be->impl));
  /* the solve's time without the first residual's driver warm-up (counted as compile) */
  w->last.seconds = fe_clock() - t0 - (w->compile_s - compile0);
  return 0;
}

/* The report of the whole solve: every residual, every CG solve with its setup (initial
 * apply, diagonal) and the vector work of the steps and the line search. */
static int newton_report(const newton_work *w, fe_newton_info *info)
{
  fe_report *r = &info->report;
  *r = w->last; /* the kind of call: backend, device, precision, space, quadrature */
  snprintf(r->action, sizeof r->action, "newton");
  r->iterations = info->iterations;
  r->flops = w->flops;
  r->bytes = w->bytes;
  r->launches = w->launches;
  fe_report_calls(r, &w->calls); /* the model: the calls (residuals and Jacobian actions
                                   * alike) at the last residual's, the vector kernels beside */
  r->compile_seconds = w->compile_s;
  r->transfer_seconds = w->transfer_s;
  r->setup_seconds = w->setup_s;
  snprintf(info->pc, sizeof info->pc, "%s", w->pc);
  info->pc_setup_seconds = w->pc_setup_s;
  FE_CHECK(fe_perf_predict(w->u->be, w->u->prec, r));
  return 0;
}

int fe_solve_newton(fe_operator *A, const fe_vector *u0, const fe_newton_opts *o, fe_vector **u,
                    fe_newton_info *info)
{
  memset(info, 0, sizeof *info);
  *u = NULL;
  FE_CHECK(check_opts(o));
  newton_work w;
  memset(&w, 0, sizeof w);
  w.act = o->act;
  w.act.nolog = 1;
  snprintf(w.pc, sizeof w.pc, "%s", o->pc); /* until a linear solve says how it ran */
  FE_CHECK(fe_solver_initial(A, u0, &o->act, 1, &w.u));
  fe_progress_begin("newton", o->monitor);
  int rc = newton_iterate(A, o, &w, info);
  fe_progress_end();
  if (!rc) rc = newton_report(&w, info);
  newton_work_free(&w);
  if (rc) {
    fe_vector_free(w.u);
    fe_newton_info_free(info);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *u = w.u;
  if (!o->act.nolog) fe_perf_log_add(&info->report);
  return 0;
}
