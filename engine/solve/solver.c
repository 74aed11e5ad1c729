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
 * fly (fe_vector_cg_direction). Where the backend keeps CG's scalars on the device (cuda,
 * and the cpu in a state of its own: fe_vector_cg_begin), alpha and beta are made there, x
 * moves in the direction's pass, and (p, q) comes from the apply where it can (cg_parts); on
 * cuda no step waits for the host: it reads step it's norms while the device runs step
 * it + 1 (cg_device_loop), so a converged solve has queued one apply past its last step.
 * A space split over ranks keeps the same passes, its scalars added over the ranks between a
 * step's parts (cg_split_loop: two waits a step, each with one MPI_Allreduce).
 * J (and its diagonal) is taken at the state
 * o->at: zero for linear physics, Newton's current iterate for nonlinear (engine/solve/newton.c).
 * Every other preconditioner is a unit of the layer (engine/solve/precond.h), made for the solve
 * (and freed by it) or given made beforehand (o->precond, reused across solves). Its z is
 * stored: the update returns (r, r) alone, then come z = M^-1 r (fe_precond_apply: the
 * unit's work, counted per iteration as it states it), (r, z) and p = z + beta p.
 * Its setup (Chebyshev's Lanczos steps, AMG's hierarchy) is timed apart from the
 * iterations.
 * For linear physics, residual(u) = 0 is J u = b with
 * b = J u0 - residual(u0): we start from u0 carrying the boundary values and iterate on
 * r0 = -residual(u0). */
#include "engine/solve/solver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/link.h"
#include "engine/solve/precond/units.h"
#include "engine/core/progress.h"

void fe_solver_opts_default(fe_solver_opts *o)
{
  memset(o, 0, sizeof *o);
  o->pc = "jacobi";
  o->rtol = 1e-8;
  fe_precond_opts_default(&o->pc_opts);
  o->atol = 1e-50;
  o->maxit = 1000;
  o->restart = 30;
  fe_action_opts_default(&o->act);
}

/* "cpu in double": where the actions of act run, into out. */
static int place_name(const fe_action_opts *act, char *out, size_t size)
{
  fe_backend *be;
  FE_CHECK(fe_backend_get(act->backend, &be));
  fe_precision prec = act->precision >= 0 ? (fe_precision)act->precision : fe_precision_default();
  snprintf(out, size, "%s in %s", be->name, fe_precision_name(prec));
  return 0;
}

int fe_solver_precond(const char *name, fe_operator *A, const fe_solver_opts *o,
                      fe_precond **P, int *made, fe_solver_info *info)
{
  *P = NULL;
  *made = 0;
  info->pc_setup_seconds = 0;
  if (o->precond) {
    fe_precond *G = o->precond;
    FE_ASSERT(G->A == A, FE_ERR_ARG,
              "%s: the preconditioner (%s) was made for another operator", name, G->describe);
    if (!fe_precond_matches(G, A, &o->act)) {
      char made_on[64], runs_on[64];
      FE_CHECK(place_name(&G->act, made_on, sizeof made_on));
      FE_CHECK(place_name(&o->act, runs_on, sizeof runs_on));
      FE_ERROR(FE_ERR_ARG, "%s: the preconditioner (%s) was made for %s, the solve runs on %s "
               "(make it with the solve's backend and precision)", name, G->describe, made_on,
               runs_on);
    }
    *P = G;
  } else {
    FE_ASSERT(o->pc, FE_ERR_ARG, "%s: no preconditioner named (pc is NULL)", name);
    if (strcmp(o->pc, "none") && strcmp(o->pc, "jacobi")) {
      fe_precond_opts po = o->pc_opts;
      po.name = o->pc;
      FE_CHECK(fe_precond_create(A, o->at, &o->act, &po, P));
      *made = 1;
      info->pc_setup_seconds = (*P)->setup_seconds;
    }
  }
  snprintf(info->pc, sizeof info->pc, "%s", *P ? (*P)->describe : o->pc);
  return 0;
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
  (*x)->dist = fe_operator_space(A)->dist;
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
 * Without a preconditioner z = r: (r, z) is (r, r), counted once. With the scalars on the
 * device (device = 1) x moves in the direction's pass, which reads p anyway: the update
 * reads r, q (and d) and writes r (3n words fewer), the direction also reads and writes x
 * (2n more): n words fewer, 12n (10n without the pass of (p, q)). */
static void cg_vector_model(double n, double w, int jacobi, int device, double *flops,
                            double *bytes, int *launches)
{
  *flops = 2 * n + (jacobi ? 9 * n : 6 * n) + (jacobi ? 3 * n : 2 * n);
  *bytes = (2 * n + (jacobi ? 7 * n : 6 * n) + (jacobi ? 4 * n : 3 * n) - (device ? n : 0)) * w;
  *launches = 3;
}

/* The same with a unit of the layer, its own work left out: (p, q) 2n flops, 2n words;
 * cg_update without d (6n, 6n words); (r, z) (2n, 2n words); p = z + beta p (3n, 3n words). */
static void cg_unfused_model(double n, double w, double *flops, double *bytes, int *launches)
{
  *flops = 13 * n;
  *bytes = 13 * n * w;
  *launches = 4;
}

typedef struct cg_work {
  fe_vector *r, *p, *q, *d; /* no z with jacobi or none: the fused operations recompute it */
  fe_vector *z;             /* z = M^-1 r of a unit applied through the layer */
  fe_precond *P;            /* the unit (o->precond, or made here when made = 1), or NULL */
  int made;
  double xseconds;          /* a split space: the applies' exchanges, seconds summed */
  int node_steps;           /* a split space: the steps whose sums the devices made */
} cg_work;

static void cg_work_free(cg_work *k)
{
  fe_vector_free(k->r);
  fe_vector_free(k->p);
  fe_vector_free(k->q);
  fe_vector_free(k->d);
  fe_vector_free(k->z);
  if (k->made) fe_precond_free(k->P);
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

/* (p, J p) of step it must be positive: else the solve ends in an error (J is not
 * positive definite, or the iteration diverged). */
static int cg_positive(fe_solver_info *info, double pq, int it)
{
  if (pq > 0) return 0;
  snprintf(info->reason, sizeof info->reason, "breakdown: (p, Jp) = %.3g at iteration %d", pq, it);
  FE_ERROR(FE_ERR_SOLVER, "cg %s: the operator is not positive definite (or the solve diverged)",
           info->reason);
}

/* Record step it's residual norm sqrt(rr); *stop = 1 where the solve converged on it. A
 * norm that is not finite is an error. */
static int cg_record(const fe_solver_opts *o, fe_solver_info *info, int it, double rr,
                     double r0, double target, int *stop)
{
  double rn = sqrt(rr);
  *stop = 0;
  FE_CHECK(history_add(info, rn));
  if (o->monitor) printf("  cg %4d  |r| = %.6e\n", it, rn);
  fe_progress_iteration(it, o->maxit, rn, target);
  if (!isfinite(rn)) {
    snprintf(info->reason, sizeof info->reason, "diverged: |r| = %g at iteration %d", rn, it);
    FE_ERROR(FE_ERR_SOLVER, "cg %s", info->reason);
  }
  info->iterations = it;
  if (rn <= o->rtol * r0 || rn <= o->atol) {
    info->converged = 1;
    snprintf(info->reason, sizeof info->reason, rn <= o->atol ? "atol" : "rtol");
    *stop = 1;
  }
  return 0;
}

/* Step it's scalars from the device: (p, q) must be positive; its norm recorded (*stop). */
static int cg_device_read(fe_cg_device *g, int it, const fe_solver_opts *o, fe_solver_info *info,
                          double r0, double target, int *stop)
{
  double pq, rr, rz;
  FE_CHECK(fe_vector_cg_wait(g, it, &pq, &rr, &rz));
  FE_CHECK(cg_positive(info, pq, it));
  return cg_record(o, info, it, rr, r0, target, stop);
}

/* Step it's q = J(at) p, queued; where fused its (p, q) parts added into the state's
 * (apply_rep->pq_added says whether they were). */
static int cg_apply_step(fe_operator *A, const fe_solver_opts *o, const fe_action_opts *act,
                         cg_work *k, fe_cg_device *g, int fused, int it, fe_report *apply_rep,
                         int *applies)
{
  fe_action_opts a = *act;
  fe_buffer parts = {0};
  if (fused) FE_CHECK(fe_vector_cg_parts(g, it, &parts, &a.pq_slot));
  a.pq = parts.ptr ? &parts : NULL;
  FE_CHECK(fe_operator_apply(A, k->p, o->at, &a, &k->q, apply_rep));
  (*applies)++;
  k->xseconds += apply_rep->exchange_seconds;
  return 0;
}

/* The iteration with its scalars on the device (Jacobi or none; fe_vector_cg_begin): the
 * host queues step it's apply and (p, q), then reads step it - 1's scalars (done by then:
 * the device is already at work on step it), stops there or queues step it's update and
 * direction. The device never waits for the host; a converged solve has queued one apply
 * and (p, q) past its last step (counted in *applies), which changes no x or r. On a
 * synchronous backend (the cpu: each call's work done when it returns) there is nothing to
 * overlap: the host reads step it's scalars right after the step, and no apply runs past
 * the last one. */
static int cg_device_loop(fe_operator *A, fe_vector *x, const fe_solver_opts *o,
                          const fe_action_opts *act, cg_work *k, const fe_vector *d,
                          fe_cg_device *g, int fused, double r0, double target,
                          fe_solver_info *info, fe_report *apply_rep, int *applies,
                          int *pq_passes)
{
  const int lag = !x->be->info.synchronous; /* read step it - 1 after queueing step it */
  int stop = 0;
  for (int it = 1; it <= o->maxit; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(cg_apply_step(A, o, act, k, g, fused, it, apply_rep, applies));
    if (!apply_rep->pq_added) { /* (p, q) in a pass of its own */
      FE_CHECK(fe_vector_cg_pq(g, k->p, k->q, it));
      (*pq_passes)++;
    }
    if (lag && it > 1) {
      FE_CHECK(cg_device_read(g, it - 1, o, info, r0, target, &stop));
      if (stop) return 0;
    }
    FE_CHECK(fe_vector_cg_step(g, x, k->r, k->p, k->q, d, it, 0));
    if (!lag) {
      FE_CHECK(cg_device_read(g, it, o, info, r0, target, &stop));
      if (stop) return 0;
    }
  }
  return lag ? cg_device_read(g, o->maxit, o, info, r0, target, &stop) : 0;
}

/* A split space's step it: (p, q) summed over the ranks by the host, each rank's share its
 * cells' parts (added) or its pass's less the entries another rank owns; where the ranks
 * differ (one rank's strategy adds the parts, another's does not), every rank's pass again.
 * *agreed: every rank added, or none. */
static int split_pq(const fe_dist *dist, fe_cg_device *g, cg_work *k, int it, int added,
                    int *pq_passes, double *pq, int *agreed)
{
  double s[2] = {0, added};
  FE_CHECK(fe_vector_cg_split(g, it, FE_CG_PQ_READ, &s[0], NULL));
  if (!added) FE_CHECK(fe_dist_reduce_owned(dist, k->p, k->q, 0, s));
  FE_CHECK(fe_dist_reduce_sum(dist, s, 2));
  *agreed = s[1] == 0 || s[1] == dist->size;
  if (!*agreed) {
    FE_CHECK(fe_vector_cg_pq(g, k->p, k->q, it));
    FE_CHECK(fe_dist_reduce_begin(dist, k->p, k->q));
    (*pq_passes)++;
    FE_CHECK(fe_vector_cg_split(g, it, FE_CG_PQ_READ, &s[0], NULL));
    FE_CHECK(fe_dist_reduce_dot(dist, k->p, k->q, &s[0]));
  }
  *pq = s[0];
  return 0;
}

/* Step it's update and direction with the sums made on the devices (fe_node_sum), queued:
 * the host waits for nothing. */
static int split_node_step(const fe_dist *dist, fe_cg_device *g, fe_vector *x, cg_work *k,
                           const fe_vector *d, int it, int added)
{
  fe_node_sum ns;
  int on;
  FE_CHECK(fe_dist_reduce_node(dist, x, !added, &ns, &on));
  FE_CHECK(fe_vector_cg_split(g, it, FE_CG_PQ_NODE, NULL, &ns));
  FE_CHECK(fe_vector_cg_step(g, x, k->r, k->p, k->q, d, it, 3)); /* no copy: the sums' own */
  FE_CHECK(fe_dist_reduce_begin_cg(dist, k->r, d));
  FE_CHECK(fe_dist_reduce_node(dist, x, 1, &ns, &on));
  FE_CHECK(fe_vector_cg_split(g, it, FE_CG_SUMS_NODE, NULL, &ns));
  return fe_vector_cg_step(g, x, k->r, k->p, k->q, d, it, 2);
}

/* The iteration of a split space (x->dist) with its scalars on the device: the device loop's
 * passes, the ranks' sums put between a step's parts. Through the host (split_pq): its
 * (p, q) read, added over the ranks and put back before the update reads it, the update's
 * (r, r) and (r, z) likewise before the direction reads them: two waits on the device a
 * step, each with one MPI_Allreduce (the host loop: three waits, and 13 words a dof where
 * these passes move 10); the direction moves x, so it runs before the step's stop is read.
 * Where every rank has a device of its own on one machine (fe_dist_reduce_node), from step
 * 2 on (once step 1 found every rank's (p, q) share alike) the sums are made on the devices,
 * the host waits for none and reads step it - 1's norm while step it runs, as the device
 * loop does. */
static int cg_split_loop(fe_operator *A, fe_vector *x, const fe_solver_opts *o,
                         const fe_action_opts *act, cg_work *k, const fe_vector *d,
                         fe_cg_device *g, int fused, double r0, double target,
                         fe_solver_info *info, fe_report *apply_rep, int *applies,
                         int *pq_passes)
{
  const fe_dist *dist = x->dist;
  int stop = 0, node = 0;
  for (int it = 1; it <= o->maxit; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(cg_apply_step(A, o, act, k, g, fused, it, apply_rep, applies));
    int added = apply_rep->pq_added, agreed;
    if (!added) { /* (p, q) in a pass of its own, the correction queued before the read */
      FE_CHECK(fe_vector_cg_pq(g, k->p, k->q, it));
      FE_CHECK(fe_dist_reduce_begin(dist, k->p, k->q));
      (*pq_passes)++;
    }
    if (node) {
      if (it > 2) FE_CHECK(cg_device_read(g, it - 1, o, info, r0, target, &stop));
      if (stop) return 0;
      FE_CHECK(split_node_step(dist, g, x, k, d, it, added));
      k->node_steps++;
      continue;
    }
    double s[2], pq, rr, rz;
    FE_CHECK(split_pq(dist, g, k, it, added, pq_passes, &pq, &agreed));
    FE_CHECK(cg_positive(info, pq, it));
    FE_CHECK(fe_vector_cg_split(g, it, FE_CG_PQ_PUT, &pq, NULL));
    FE_CHECK(fe_vector_cg_step(g, x, k->r, k->p, k->q, d, it, 1));
    FE_CHECK(fe_dist_reduce_begin_cg(dist, k->r, d));
    FE_CHECK(fe_vector_cg_wait(g, it, &s[0], &rr, &rz));
    FE_CHECK(fe_dist_reduce_cg(dist, k->r, d, &rr, &rz));
    s[0] = rr, s[1] = rz;
    FE_CHECK(fe_vector_cg_split(g, it, FE_CG_SUMS_PUT, s, NULL));
    FE_CHECK(fe_vector_cg_step(g, x, k->r, k->p, k->q, d, it, 2));
    FE_CHECK(cg_record(o, info, it, rr, r0, target, &stop));
    if (stop) return 0;
    if (it == 1 && agreed && !x->be->info.synchronous)
      FE_CHECK(fe_dist_reduce_node(dist, x, 0, NULL, &node));
  }
  return node && o->maxit > 1 ? cg_device_read(g, o->maxit, o, info, r0, target, &stop) : 0;
}

/* The iteration with its scalars on the host (any preconditioner; U: one that runs through
 * the layer, else Jacobi (d) or none fused into the updates), from rz = (r, z) of the start. */
static int cg_host_loop(fe_operator *A, fe_vector *x, const fe_solver_opts *o,
                        const fe_action_opts *act, cg_work *k, const fe_vector *d, fe_precond *U,
                        double rz, double r0, double target, fe_solver_info *info,
                        fe_report *apply_rep, int *applies)
{
  double rr, rz_new, pq;
  for (int it = 1; it <= o->maxit && !info->converged; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(fe_operator_apply(A, k->p, o->at, act, &k->q, apply_rep)); /* q = J(at) p */
    (*applies)++;
    k->xseconds += apply_rep->exchange_seconds;
    FE_CHECK(fe_vector_dot(k->p, k->q, &pq));
    FE_CHECK(cg_positive(info, pq, it));
    double alpha = rz / pq;
    /* x <- x + alpha p, r <- r - alpha q; rr = (r, r), rz_new = (r, z) with z = r ./ diag
     * (a unit's rz_new comes below, from its stored z) */
    FE_CHECK(fe_vector_cg_update(x, k->r, k->p, k->q, d, alpha, NULL, &rr, &rz_new));
    int stop;
    FE_CHECK(cg_record(o, info, it, rr, r0, target, &stop));
    if (stop) break;
    if (U) {
      FE_CHECK(fe_precond_apply(U, k->r, &k->z)); /* z = M^-1 r */
      FE_CHECK(fe_vector_dot(k->r, k->z, &rz_new));
      if (!(rz_new > 0)) {
        snprintf(info->reason, sizeof info->reason,
                 "breakdown: (r, M^-1 r) = %.3g at iteration %d", rz_new, it);
        FE_ERROR(FE_ERR_SOLVER, "cg %s: the preconditioner (%s) is not positive definite",
                 info->reason, U->describe);
      }
      FE_CHECK(fe_vector_axpby(k->p, 1.0, k->z, rz_new / rz)); /* p <- z + beta p */
    } else {
      /* p <- z + beta p (every backend has the fused slots; the unfused fallback would make
       * its own z at each call) */
      FE_CHECK(fe_vector_cg_direction(k->p, k->r, d, rz_new / rz, NULL));
    }
    rz = rz_new;
  }
  return 0;
}

/* The solve's report: its iterations, each an apply plus the vector work (vflops, vbytes,
 * vlaunches a step), and the setup's times. */
static int cg_report(const fe_vector *x, const fe_report *rep, const fe_report *apply_rep,
                     int applies, double vflops, double vbytes, int vlaunches, double t0,
                     double compile_s, double setup_s, int pq_fused, fe_solver_info *info)
{
  FE_CHECK(x->be->ops->finish(x->be->impl));
  /* the report: the iterations, each an apply plus the vector work */
  fe_report *r = &info->report;
  double seconds = fe_clock() - t0;
  int n = info->iterations;
  *r = n ? *apply_rep : *rep; /* the kind of call, backend and sizes (no iteration: the setup's) */
  snprintf(r->action, sizeof r->action, "cg");
  r->iterations = n;
  /* an apply queued past the last step (the device loop's, run before its stop was read)
   * with its (p, q): work done, counted */
  int extra = applies > n ? applies - n : 0;
  double pq_words = pq_fused ? 0 : 2 * x->n, pq_bytes = pq_words * (double)fe_precision_size(x->prec);
  r->flops = n * (apply_rep->flops + vflops) + extra * (apply_rep->flops + pq_words);
  r->bytes = n * (apply_rep->bytes + vbytes) + extra * (apply_rep->bytes + pq_bytes);
  r->launches = n * (apply_rep->launches + vlaunches) + extra * (apply_rep->launches + !pq_fused);
  /* the model: the applies, each at its own model, and the steps' vector kernels */
  r->calls = n ? n + extra : 0;
  r->extra_flops = n * vflops + extra * pq_words;
  r->extra_bytes = n * vbytes + extra * pq_bytes;
  r->extra_launches = n * vlaunches + extra * !pq_fused;
  r->seconds = seconds;
  r->compile_seconds = compile_s;
  r->setup_seconds = setup_s + info->pc_setup_seconds;
  FE_CHECK(fe_perf_predict(x->be, x->prec, r));
  return 0;
}

/* A split space (x's dist): the model's exchanges, every apply's, and reductions, each step's
 * (p, q) and its update's (r, r) and (r, z) (and (r, z) of a unit's z): through the host each
 * gathering two vectors' entries another rank owns, reading them, and an MPI_Allreduce; made
 * on the devices (node_steps of the steps) a node's sum for (p, q) and one for the update's
 * after their correction (fe_perf_reduction_node); added to the prediction of r. Nothing on
 * one rank. */
static int cg_predict_split(const fe_vector *x, int applies, int steps, int node_steps,
                            int unit, const fe_report *apply_rep, fe_report *r)
{
  const fe_dist *d = x->dist;
  if (!d || d->size == 1) return 0;
  const fe_link *l;
  FE_CHECK(fe_link_get(&l));
  r->exchange_predicted = applies * apply_rep->exchange_predicted;
  r->exchange_link = applies * apply_rep->exchange_link;
  r->exchange_device = applies * apply_rep->exchange_device;
  const fe_calibration *c = &x->be->calib[x->prec];
  const double word = (double)fe_precision_size(x->prec);
  r->reduce_predicted = (2.0 + unit) * (steps - node_steps) *
                            fe_perf_reduction(c, l, 2.0 * d->nnot, word, d->size) +
                        node_steps * (fe_perf_reduction_node(c, 0, word) +
                                      fe_perf_reduction_node(c, 2.0 * d->nnot, word));
  r->predicted_seconds += r->exchange_predicted + r->reduce_predicted;
  return 0;
}

/* Whether (p, q) may come from the apply's quadrature (its element forms, w masked at the
 * constrained rows): it equals (p, J p) where p is zero on those rows, at every step when r
 * is zero there at the start (z, p, q and r then stay zero there). A split space's ranks
 * agree (each rank's cells' forms, added, are the whole's; a rank's pass is its owned rows'). */
static int cg_pq_fused(fe_operator *A, const fe_vector *r, const fe_action_opts *act, int *fused)
{
  double rc_norm;
  FE_CHECK(fe_operator_constrained_norm(A, r, act, &rc_norm));
  double f = rc_norm == 0;
  FE_CHECK(fe_dist_reduce_minmax(r->dist, &f, 0));
  *fused = f > 0;
  return 0;
}

/* The iteration itself; x holds the initial guess and receives the solution. */
static int cg_iterate(fe_operator *A, const fe_vector *b, fe_vector *x, const fe_solver_opts *o,
                      cg_work *k, fe_solver_info *info)
{
  fe_action_opts act = o->act;
  act.nolog = 1;
  fe_report rep, apply_rep = {0};
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
  FE_CHECK(fe_solver_precond("cg", A, o, &k->P, &k->made, info));
  /* jacobi and none fuse into the updates; any other unit runs through the layer (U) */
  int jacobi = k->P ? k->P->kind == &fe_precond_jacobi : !strcmp(o->pc, "jacobi");
  fe_precond *U = k->P && !jacobi && k->P->kind != &fe_precond_none ? k->P : NULL;
  if (jacobi && !k->P) FE_CHECK(fe_operator_diagonal(A, o->at, &act, &k->d, &rep));
  const fe_vector *d = jacobi ? (k->P ? k->P->diag : k->d) : NULL; /* M = diag(J), or none */
  double rz, r0;
  FE_CHECK(fe_vector_norm(k->r, &r0));
  FE_CHECK(history_add(info, r0));
  /* p = z = M^-1 r, rz = (r, z) */
  if (U) {
    FE_CHECK(fe_precond_apply(U, k->r, &k->z));
    FE_CHECK(fe_vector_copy(k->p, k->z));
  } else if (jacobi) {
    FE_CHECK(fe_vector_pointwise(k->p, k->r, d, 1));
  } else {
    FE_CHECK(fe_vector_copy(k->p, k->r));
  }
  FE_CHECK(fe_vector_dot(k->r, k->p, &rz));
  if (o->monitor) printf("  cg %4d  |r| = %.6e\n", 0, r0);
  double target = fmax(o->rtol * r0, o->atol); /* the norm the solve stops at */
  fe_progress_iteration(0, o->maxit, r0, target);
  snprintf(info->reason, sizeof info->reason, "maxit");
  if (r0 <= o->atol) {
    info->converged = 1;
    snprintf(info->reason, sizeof info->reason, "atol");
  }
  fe_cg_device *g = NULL; /* the scalars on the device, where the backend can */
  if (!U && !info->converged && o->maxit > 0) FE_CHECK(fe_vector_cg_begin(x, rz, &g));
  int fused = 0;
  if (g && !o->pq_pass) FE_CHECK(cg_pq_fused(A, k->r, &act, &fused));
  double vflops, vbytes;
  int vlaunches;
  if (U) {
    cg_unfused_model(x->n, (double)fe_precision_size(x->prec), &vflops, &vbytes, &vlaunches);
    vflops += U->flops;
    vbytes += U->bytes;
    vlaunches += U->launches;
  } else {
    cg_vector_model(x->n, (double)fe_precision_size(x->prec), jacobi, g != NULL, &vflops,
                    &vbytes, &vlaunches);
  }
  double t0 = fe_clock();
  int applies = 0, pq_passes = 0;
  act.nowait = 1; /* the applies queued, not waited for: the next read waits for them */
  if (g) {
    int rc = (x->dist ? cg_split_loop : cg_device_loop)(A, x, o, &act, k, d, g, fused, r0,
                                                         target, info, &apply_rep, &applies,
                                                         &pq_passes);
    fe_vector_cg_end(g);
    FE_CHECK(rc);
  }
  if (!g) FE_CHECK(cg_host_loop(A, x, o, &act, k, d, U, rz, r0, target, info, &apply_rep, &applies));
  else if (pq_passes == 0 && applies > 0) { /* every (p, q) from the applies: no pass and no
                                              * launch of its own; its flops, still counted
                                              * here, are done in the apply's quadrature */
    vbytes -= 2.0 * x->n * (double)fe_precision_size(x->prec);
    vlaunches -= 1;
    info->pq_from_apply = 1;
  }
  FE_CHECK(cg_report(x, &rep, &apply_rep, applies, vflops, vbytes, vlaunches, t0, compile_s,
                     setup_s, info->pq_from_apply, info));
  /* a split space: every apply's exchange (the same bytes and messages each) */
  info->report.exchange_bytes = applies * apply_rep.exchange_bytes;
  info->report.exchange_messages = applies * apply_rep.exchange_messages;
  info->report.exchange_seconds = k->xseconds;
  info->report.exchange_beside = apply_rep.exchange_beside;
  info->report.exchange_direct = apply_rep.exchange_direct;
  info->report.exchange_follows = apply_rep.exchange_follows;
  info->report.exchange_cold = apply_rep.exchange_cold;
  info->report.exchange_host = apply_rep.exchange_host;
  info->report.device_sharers = apply_rep.device_sharers;
  info->report.device_turns = apply_rep.device_turns;
  info->report.device_threads = apply_rep.device_threads;
  info->report.device_cores = apply_rep.device_cores;
  return cg_predict_split(x, applies, info->iterations, k->node_steps, U != NULL, &apply_rep,
                          &info->report);
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
  fe_progress_begin("cg", o->monitor);
  if (!rc) rc = cg_iterate(A, bb, *x, o, &k, info);
  fe_progress_end();
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
