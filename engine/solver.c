/* felab solvers: preconditioned conjugate gradients on a matrix-free operator.
 *
 * CG minimizes the energy norm of the error of J x = b over growing Krylov spaces
 * span{z0, M^-1 J z0, ...}; with a symmetric positive definite J and preconditioner M
 * each step is one Jacobian action, three dot products and three vector updates:
 *   q = J p, alpha = (r, z) / (p, q), x += alpha p, r -= alpha q,
 *   z = M^-1 r, beta = (r, z)_new / (r, z)_old, p = z + beta p.
 * Jacobi takes M = diag(J). The vector work after q = J p is three passes (launches on a
 * GPU): (p, q); one fused update of x and r that also returns (r, r) and (r, z) without
 * storing z (fe_vector_cg_update); and p = z + beta p with z = M^-1 r recomputed on the
 * fly (fe_vector_cg_direction). J (and its diagonal) is taken at the state o->at: zero for
 * linear physics, Newton's current iterate for nonlinear (engine/newton.c).
 * For linear physics, residual(u) = 0 is J u = b with
 * b = J u0 - residual(u0): we start from u0 carrying the boundary values and iterate on
 * r0 = -residual(u0). */
#include "engine/solver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

void fe_solver_opts_default(fe_solver_opts *o)
{
  memset(o, 0, sizeof *o);
  o->pc = "jacobi";
  o->rtol = 1e-8;
  o->atol = 1e-50;
  o->maxit = 1000;
  o->restart = 30;
  fe_action_opts_default(&o->act);
}

void fe_solver_info_free(fe_solver_info *info)
{
  free(info->history);
  info->history = NULL;
  info->nhistory = 0;
}

/* x <- x on free nodes and the boundary values g on constrained ones, as x .* mask + g0
 * with g0 = initial(0) and mask = initial(1) - initial(0) (exactly 1 on free nodes, 0 on
 * constrained ones). */
static int impose_boundary(fe_operator *A, const fe_action_opts *act, fe_vector *x)
{
  if (fe_operator_ndirichlet(A) == 0) return 0;
  fe_vector *g0 = NULL, *mask = NULL;
  int rc = fe_operator_initial(A, act, 0.0, &g0);
  if (!rc) rc = fe_operator_initial(A, act, 1.0, &mask);
  if (!rc) rc = fe_vector_axpby(mask, -1.0, g0, 1.0); /* mask <- initial(1) - g0 */
  if (!rc) rc = fe_vector_pointwise(x, x, mask, 0);   /* x <- x .* mask */
  if (!rc) rc = fe_vector_axpby(x, 1.0, g0, 1.0);     /* x <- x + g0 */
  fe_vector_free(g0);
  fe_vector_free(mask);
  FE_CHECK(rc);
  return 0;
}

int fe_solver_initial(fe_operator *A, const fe_vector *x0, const fe_action_opts *act, int impose,
                      fe_vector **x)
{
  *x = NULL;
  if (!x0) return fe_operator_initial(A, act, 0.0, x);
  FE_ASSERT(x0->n == fe_operator_space(A)->ndofs, FE_ERR_ARG,
            "the initial guess has %d entries but the operator's space has %d", x0->n,
            fe_operator_space(A)->ndofs);
  fe_backend *be;
  fe_precision prec = act->precision >= 0 ? (fe_precision)act->precision : fe_precision_default();
  FE_CHECK(fe_backend_get(act->backend, &be));
  FE_CHECK(fe_vector_convert(x0, be, prec, x));
  int rc = impose ? impose_boundary(A, act, *x) : 0;
  if (rc) {
    fe_vector_free(*x);
    *x = NULL;
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

/* Counted work of the vector operations of one CG iteration on n reals of w bytes, in
 * three launches:
 *   (p, q)        2n flops; reads p, q: 2n words
 *   cg_update     x += alpha p, r -= alpha q (4n), (r, r) (2n), and with Jacobi z = r ./ d
 *                 (n) and (r, z) (2n); reads x, p, r, q (and d), writes x, r: 6n (7n) words
 *   cg_direction  p = z + beta p (2n), with Jacobi z = r ./ d again (n); reads r, p (and d),
 *                 writes p: 3n (4n) words
 * Without a preconditioner z = r: (r, z) is (r, r), counted once. */
static void cg_vector_model(double n, double w, int jacobi, double *flops, double *bytes,
                            int *launches)
{
  *flops = 2 * n + (jacobi ? 9 * n : 6 * n) + (jacobi ? 3 * n : 2 * n);
  *bytes = (2 * n + (jacobi ? 7 * n : 6 * n) + (jacobi ? 4 * n : 3 * n)) * w;
  *launches = 3;
}

typedef struct cg_work {
  fe_vector *r, *p, *q, *d; /* no z: the fused vector operations recompute it */
} cg_work;

static void cg_work_free(cg_work *k)
{
  fe_vector_free(k->r);
  fe_vector_free(k->p);
  fe_vector_free(k->q);
  fe_vector_free(k->d);
}

int fe_solver_history_add(double **h, int *n, double v)
{
  if ((*n & (*n - 1)) == 0) { /* at powers of two: grow */
    double *grown = realloc(*h, sizeof(double) * (size_t)(2 * *n + 1));
    if (!grown) FE_ERROR(FE_ERR_MEM, "out of host memory for the residual history");
    *h = grown;
  }
  (*h)[(*n)++] = v;
  return 0;
}

/* Record a norm in the solve's history. */
static int history_add(fe_solver_info *info, double v)
{
  return fe_solver_history_add(&info->history, &info->nhistory, v);
}

/* The iteration itself; x holds the initial guess and receives the solution. */
static int cg_iterate(fe_operator *A, const fe_vector *b, fe_vector *x, const fe_solver_opts *o,
                      cg_work *k, fe_solver_info *info)
{
  fe_action_opts act = o->act;
  act.nolog = 1;
  fe_report rep, apply_rep = {0};
  int jacobi = !strcmp(o->pc, "jacobi");
  FE_ASSERT(jacobi || !strcmp(o->pc, "none"), FE_ERR_ARG,
            "unknown preconditioner '%s' (jacobi, none)", o->pc);
  double compile_s = 0, cs; /* compile outside the timed iterations */
  const char *actions[] = {"residual", "apply", "diagonal"};
  for (int i = 0; i < 3; i++) {
    FE_CHECK(fe_operator_prepare(A, actions[i], &act, &cs));
    compile_s += cs;
  }
  /* r = b - J x, or -residual(x) */
  if (b) {
    FE_CHECK(fe_operator_apply(A, x, o->at, &act, &k->r, &rep));
    FE_CHECK(fe_vector_axpby(k->r, 1.0, b, -1.0));
  } else {
    FE_CHECK(fe_operator_residual(A, x, &act, &k->r, &rep));
    FE_CHECK(fe_vector_axpby(k->r, 0.0, k->r, -1.0));
  }
  FE_CHECK(fe_vector_duplicate(x, &k->p));
  double setup_s = rep.setup_seconds; /* moving the operator's data: the first call reports it */
  if (jacobi) FE_CHECK(fe_operator_diagonal(A, o->at, &act, &k->d, &rep));
  const fe_vector *d = jacobi ? k->d : NULL; /* M = diag(J), or none */
  double rr, rz, rz_new, pq, r0;
  FE_CHECK(fe_vector_norm(k->r, &r0));
  FE_CHECK(history_add(info, r0));
  /* p = z = M^-1 r, rz = (r, z) */
  if (jacobi) FE_CHECK(fe_vector_pointwise(k->p, k->r, k->d, 1));
  else FE_CHECK(fe_vector_copy(k->p, k->r));
  FE_CHECK(fe_vector_dot(k->r, k->p, &rz));
  if (o->monitor) printf("  cg %4d  |r| = %.6e\n", 0, r0);
  double t0 = fe_clock(), vflops, vbytes;
  int vlaunches, it = 0;
  cg_vector_model(x->n, (double)fe_precision_size(x->prec), jacobi, &vflops, &vbytes, &vlaunches);
  snprintf(info->reason, sizeof info->reason, "maxit");
  if (r0 <= o->atol) {
    info->converged = 1;
    snprintf(info->reason, sizeof info->reason, "atol");
  }
  for (it = 1; it <= o->maxit && !info->converged; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(fe_operator_apply(A, k->p, o->at, &act, &k->q, &apply_rep)); /* q = J(at) p */
    FE_CHECK(fe_vector_dot(k->p, k->q, &pq));
    if (!(pq > 0)) {
      snprintf(info->reason, sizeof info->reason, "breakdown: (p, Jp) = %.3g at iteration %d", pq, it);
      FE_ERROR(FE_ERR_SOLVER, "cg %s: the operator is not positive definite (or the solve diverged)",
               info->reason);
    }
    double alpha = rz / pq;
    /* x <- x + alpha p, r <- r - alpha q; rr = (r, r), rz_new = (r, z) with z = r ./ diag */
    FE_CHECK(fe_vector_cg_update(x, k->r, k->p, k->q, d, alpha, NULL, &rr, &rz_new));
    double rn = sqrt(rr);
    FE_CHECK(history_add(info, rn));
    if (o->monitor) printf("  cg %4d  |r| = %.6e\n", it, rn);
    if (!isfinite(rn)) {
      snprintf(info->reason, sizeof info->reason, "diverged: |r| = %g at iteration %d", rn, it);
      FE_ERROR(FE_ERR_SOLVER, "cg %s", info->reason);
    }
    info->iterations = it;
    if (rn <= o->rtol * r0 || rn <= o->atol) {
      info->converged = 1;
      snprintf(info->reason, sizeof info->reason, rn <= o->atol ? "atol" : "rtol");
      break;
    }
    /* p <- z + beta p (every backend has the fused slots; the unfused fallback would make
     * its own z at each call) */
    FE_CHECK(fe_vector_cg_direction(k->p, k->r, d, rz_new / rz, NULL));
    rz = rz_new;
  }
  FE_CHECK(x->be->ops->finish(x->be->impl));
  /* the report: the iterations, each an apply plus the vector work */
  fe_report *r = &info->report;
  double seconds = fe_clock() - t0;
  int n = info->iterations;
  *r = n ? apply_rep : rep; /* the kind of call, backend and sizes (no iteration: the setup's) */
  snprintf(r->action, sizeof r->action, "cg");
  r->iterations = n;
  r->flops = n * (apply_rep.flops + vflops);
  r->bytes = n * (apply_rep.bytes + vbytes);
  r->launches = n * (apply_rep.launches + vlaunches);
  r->seconds = seconds;
  r->compile_seconds = compile_s;
  r->setup_seconds = setup_s;
  FE_CHECK(fe_perf_predict(x->be, x->prec, r));
  return 0;
}

int fe_solve_cg(fe_operator *A, const fe_vector *b, const fe_vector *x0, const fe_solver_opts *o,
                fe_vector **x, fe_solver_info *info)
{
  memset(info, 0, sizeof *info);
  FE_ASSERT(o->maxit >= 0, FE_ERR_ARG, "maxit must be >= 0, got %d", o->maxit);
  FE_ASSERT(o->rtol >= 0 && o->atol >= 0, FE_ERR_ARG, "tolerances must be >= 0");
  *x = NULL;
  FE_CHECK(fe_solver_initial(A, x0, &o->act, b == NULL, x));
  int rc = 0;
  const fe_vector *bb = b;
  fe_vector *bconv = NULL;
  if (b && (b->be != (*x)->be || b->prec != (*x)->prec)) {
    rc = fe_vector_convert(b, (*x)->be, (*x)->prec, &bconv);
    bb = bconv;
  }
  cg_work k = {0};
  if (!rc) rc = cg_iterate(A, bb, *x, o, &k, info);
  cg_work_free(&k);
  fe_vector_free(bconv);
  if (rc) {
    fe_vector_free(*x);
    *x = NULL;
    fe_solver_info_free(info);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (!o->act.nolog) fe_perf_log_add(&info->report);
  return 0;
}
