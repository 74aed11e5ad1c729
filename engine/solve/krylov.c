/* felab solvers: Krylov methods for nonsymmetric operators (BiCG, BiCGStab, GMRES).
 *
 * CG (engine/solve/solver.c) needs J symmetric positive definite. These three need only J
 * nonsingular, and each pays for it differently:
 *   BiCG      builds a second, "shadow" Krylov space with J^T and keeps the residuals of the
 *             two biorthogonal: one action of J and one of J^T per iteration, short
 *             recurrences, an irregular residual history.
 *   BiCGStab  replaces the J^T action by a second J action and a local minimization
 *             (omega) that smooths BiCG's history: two actions of J per iteration.
 *   GMRES(m)  minimizes ||b - J x|| over the Krylov space itself, keeping an orthonormal
 *             basis of it (modified Gram-Schmidt): one action per iteration, but the work
 *             and memory of iteration j grow with j, so the space is dropped (restarted
 *             from the current x) every m iterations.
 * All three are right-preconditioned: they solve J M^-1 y = b, x = M^-1 y, with M = diag(J)
 * (pc = "jacobi"), the identity (pc = "none"), or any unit of the preconditioner layer
 * (engine/solve/precond.h: "chebyshev", ...) applied as z = M^-1 r and counted per application.
 * Their residual is then the true one, b - J x, and they stop on it exactly as CG does:
 * ||r|| <= rtol ||r0|| or ||r|| <= atol. (GMRES's residual inside a cycle is its
 * least-squares estimate |g_{j+1}|, equal to the true norm in exact arithmetic; the stop is
 * confirmed on the true residual at the end of the cycle.) BiCG's shadow system needs M^-T:
 * diag(J) is its own transpose, and so is every unit made for a symmetric J; on a
 * nonsymmetric J use bicgstab or gmres with the other units.
 *
 * A breakdown is a scalar the recurrence must divide by coming out exactly zero (or not
 * finite): BiCG's rho = (z, r~) or (p~, J p), BiCGStab's rho = (r~, r), (r~, J p) or
 * (t, t), GMRES's singular Hessenberg matrix (J M^-1 singular on the Krylov space). The
 * solve then stops where it is and returns with converged = 0 and reason "breakdown: ...",
 * never as convergence and not as an error: the partial x and the history can be looked
 * at. A residual that becomes non-finite ends the same way with reason "diverged: ...".
 *
 * J and its diagonal are taken at o->at as in CG, and b == NULL solves residual(u) = 0 for
 * linear physics from u0 carrying the boundary values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/solve/precond/units.h"
#include "engine/core/progress.h"
#include "engine/solve/solver.h"

/* One solve's shared state: the operator, the options, the running account of work. */
typedef struct krylov {
  const char *name;         /* "bicg", "bicgstab", "gmres" */
  fe_operator *A, *AT;      /* AT: the transposed operator (bicg only) */
  const fe_solver_opts *o;
  fe_action_opts act;       /* o->act, kept out of the session log */
  const fe_vector *b;       /* NULL: residual(u) = 0 */
  fe_vector *x;             /* the iterate */
  fe_vector *diag;          /* diag J made by the solve for Jacobi, or NULL */
  const fe_vector *d;       /* M = diag J (diag or a given jacobi unit's), or NULL */
  fe_precond *pc;           /* the unit o->precond, or one made for the solve (made = 1) */
  fe_precond *U;            /* pc when applied through the layer (not none or jacobi) */
  int made;
  fe_solver_info *info;
  double r0;                /* ||r_0|| */
  fe_report last;           /* the last Jacobian action: the kind of call for the report */
  double flops, bytes;      /* counted work of the iterations */
  int launches;
  fe_call_tally calls;      /* of it, the operator's calls (applies, residuals) */
} krylov;

/* ---- counted building blocks ---- */

/* Add vector work on n reals: flops and words per entry, one launch. */
static void count_vector(krylov *k, double flops, double words)
{
  double n = k->x->n, w = (double)fe_precision_size(k->x->prec);
  k->flops += flops * n;
  k->bytes += words * n * w;
  k->launches += 1;
}

/* y <- a x + b y */
static int axpby(krylov *k, fe_vector *y, double a, const fe_vector *x, double b)
{
  count_vector(k, 3, 3);
  return fe_vector_axpby(y, a, x, b);
}

static int dot(krylov *k, const fe_vector *x, const fe_vector *y, double *v)
{
  count_vector(k, 2, 2);
  return fe_vector_dot(x, y, v);
}

static int norm(krylov *k, const fe_vector *x, double *v)
{
  count_vector(k, 2, 1);
  return fe_vector_norm(x, v);
}

/* z <- M^-1 r (z is made when NULL) */
static int precondition(krylov *k, const fe_vector *r, fe_vector **z)
{
  if (k->U) {
    k->flops += k->U->flops;
    k->bytes += k->U->bytes;
    k->launches += k->U->launches;
    return fe_precond_apply(k->U, r, z);
  }
  if (!*z) FE_CHECK(fe_vector_duplicate(r, z));
  if (!k->d) {
    count_vector(k, 0, 2);
    return fe_vector_copy(*z, r);
  }
  count_vector(k, 1, 3);
  return fe_vector_pointwise(*z, r, k->d, 1);
}

/* Count an operator's call (an apply or a residual) with its report: the work, and the call
 * the report describes. */
static void count_call(krylov *k, const fe_report *rep)
{
  k->flops += rep->flops;
  k->bytes += rep->bytes;
  k->launches += rep->launches;
  fe_call_tally_add(&k->calls, rep);
  k->last = *rep;
}

/* y <- op w at o->at: J (op = A) or J^T (op = A's transpose). */
static int apply(krylov *k, fe_operator *op, const fe_vector *w, fe_vector **y)
{
  fe_report rep;
  FE_CHECK(fe_operator_apply(op, w, k->o->at, &k->act, y, &rep));
  count_call(k, &rep);
  return 0;
}

/* r <- b - J x, or -residual(x) when b is NULL (the initial residual and GMRES's restarts). */
static int true_residual(krylov *k, fe_vector **r)
{
  if (k->b) {
    FE_CHECK(apply(k, k->A, k->x, r));
    return axpby(k, *r, 1.0, k->b, -1.0);
  }
  fe_report rep;
  FE_CHECK(fe_operator_residual(k->A, k->x, &k->act, r, &rep));
  count_call(k, &rep);
  return axpby(k, *r, 0.0, *r, -1.0);
}

/* ---- stopping ---- */

/* Record iteration it's residual norm rn; 1 when the solve stops on it (converged, or a
 * non-finite norm: diverged). */
static int record(krylov *k, int it, double rn, int *stop)
{
  fe_solver_info *info = k->info;
  FE_CHECK(fe_solver_history_add(&info->history, &info->nhistory, rn));
  info->iterations = it;
  if (k->o->monitor) printf("  %s %4d  |r| = %.6e\n", k->name, it, rn);
  fe_progress_iteration(it, k->o->maxit, rn, fmax(k->o->rtol * k->r0, k->o->atol));
  *stop = 0;
  if (!isfinite(rn)) {
    snprintf(info->reason, sizeof info->reason, "diverged: |r| = %g at iteration %d", rn, it);
    *stop = 1;
  } else if (rn <= k->o->atol || rn <= k->o->rtol * k->r0) {
    info->converged = 1;
    snprintf(info->reason, sizeof info->reason, rn <= k->o->atol ? "atol" : "rtol");
    *stop = 1;
  }
  return 0;
}

/* Whether a scalar the recurrence divides by is degenerate; if so the solve stops with
 * reason "breakdown: <what> = <v> at iteration it". */
static int breakdown(krylov *k, double v, const char *what, int it)
{
  if (v != 0 && isfinite(v)) return 0;
  snprintf(k->info->reason, sizeof k->info->reason, "breakdown: %s = %g at iteration %d", what,
           v, it);
  k->info->converged = 0;
  return 1;
}

/* ---- BiCGStab ---- */

typedef struct bicgstab_work {
  fe_vector *r, *rt, *p, *v, *s, *t, *ph, *sh;
} bicgstab_work;

/* BiCGStab (van der Vorst), right-preconditioned, from x with residual r:
 *   rho = (r~, r), beta = (rho / rho_old)(alpha / omega), p = r + beta (p - omega v)
 *   p^ = M^-1 p, v = J p^, alpha = rho / (r~, v), s = r - alpha v
 *   s^ = M^-1 s, t = J s^, omega = (t, s) / (t, t)
 *   x += alpha p^ + omega s^, r = s - omega t
 * with the shadow residual r~ = r0. A small s ends the iteration halfway (x += alpha p^). */
static int bicgstab_iterate(krylov *k, bicgstab_work *w)
{
  double rho_old = 1, alpha = 1, omega = 1, rho, rtv, ts, tt, sn, rn;
  int stop = 0;
  FE_CHECK(fe_vector_duplicate(k->x, &w->rt));
  FE_CHECK(fe_vector_copy(w->rt, w->r)); /* r~ = r0 */
  FE_CHECK(fe_vector_duplicate(k->x, &w->p));
  FE_CHECK(fe_vector_duplicate(k->x, &w->v));
  FE_CHECK(fe_vector_duplicate(k->x, &w->s));
  for (int it = 1; it <= k->o->maxit; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(dot(k, w->rt, w->r, &rho));
    if (breakdown(k, rho, "(r~, r)", it)) return 0;
    if (it == 1) {
      FE_CHECK(fe_vector_copy(w->p, w->r)); /* p = r */
    } else {
      double beta = (rho / rho_old) * (alpha / omega);
      FE_CHECK(axpby(k, w->p, -omega, w->v, 1.0)); /* p <- p - omega v */
      FE_CHECK(axpby(k, w->p, 1.0, w->r, beta));   /* p <- r + beta p */
    }
    FE_CHECK(precondition(k, w->p, &w->ph));       /* p^ = M^-1 p */
    FE_CHECK(apply(k, k->A, w->ph, &w->v));        /* v = J p^ */
    FE_CHECK(dot(k, w->rt, w->v, &rtv));
    if (breakdown(k, rtv, "(r~, J p)", it)) return 0;
    alpha = rho / rtv;
    FE_CHECK(fe_vector_copy(w->s, w->r));
    FE_CHECK(axpby(k, w->s, -alpha, w->v, 1.0));   /* s = r - alpha v */
    FE_CHECK(norm(k, w->s, &sn));
    if (sn <= k->o->atol || sn <= k->o->rtol * k->r0) {
      FE_CHECK(axpby(k, k->x, alpha, w->ph, 1.0)); /* x += alpha p^: done halfway */
      return record(k, it, sn, &stop);
    }
    FE_CHECK(precondition(k, w->s, &w->sh));       /* s^ = M^-1 s */
    FE_CHECK(apply(k, k->A, w->sh, &w->t));        /* t = J s^ */
    FE_CHECK(dot(k, w->t, w->t, &tt));
    if (breakdown(k, tt, "(t, t)", it)) return 0;
    FE_CHECK(dot(k, w->t, w->s, &ts));
    omega = ts / tt;
    FE_CHECK(axpby(k, k->x, alpha, w->ph, 1.0));   /* x += alpha p^ + omega s^ */
    FE_CHECK(axpby(k, k->x, omega, w->sh, 1.0));
    FE_CHECK(fe_vector_copy(w->r, w->s));
    FE_CHECK(axpby(k, w->r, -omega, w->t, 1.0));   /* r = s - omega t */
    FE_CHECK(norm(k, w->r, &rn));
    FE_CHECK(record(k, it, rn, &stop));
    if (stop || breakdown(k, omega, "omega", it)) return 0;
    rho_old = rho;
  }
  return 0;
}

static int bicgstab_run(krylov *k, fe_vector *r)
{
  bicgstab_work w = {r, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int rc = bicgstab_iterate(k, &w);
  fe_vector *v[] = {w.rt, w.p, w.v, w.s, w.t, w.ph, w.sh};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) fe_vector_free(v[i]);
  return rc;
}

/* ---- BiCG ---- */

typedef struct bicg_work {
  fe_vector *r, *rt, *z, *zt, *p, *pt, *q, *qt;
} bicg_work;

/* Preconditioned BiCG (the Templates book's form), the shadow system on J^T with r~0 = r0:
 *   z = M^-1 r, z~ = M^-T r~, rho = (z, r~), beta = rho / rho_old,
 *   p = z + beta p, p~ = z~ + beta p~, q = J p, q~ = J^T p~, alpha = rho / (p~, q),
 *   x += alpha p, r -= alpha q, r~ -= alpha q~.
 * M = diag(J) is its own transpose. */
static int bicg_iterate(krylov *k, bicg_work *w)
{
  double rho_old = 1, rho, pq, rn;
  int stop = 0;
  FE_CHECK(fe_vector_duplicate(k->x, &w->rt));
  FE_CHECK(fe_vector_copy(w->rt, w->r)); /* r~ = r0 */
  FE_CHECK(fe_vector_duplicate(k->x, &w->p));
  FE_CHECK(fe_vector_duplicate(k->x, &w->pt));
  for (int it = 1; it <= k->o->maxit; it++) {
    FE_CHECK_INTERRUPT();
    FE_CHECK(precondition(k, w->r, &w->z));
    FE_CHECK(precondition(k, w->rt, &w->zt));
    FE_CHECK(dot(k, w->z, w->rt, &rho));
    if (breakdown(k, rho, "(M^-1 r, r~)", it)) return 0;
    double beta = it == 1 ? 0.0 : rho / rho_old;
    FE_CHECK(axpby(k, w->p, 1.0, w->z, beta));    /* p = z + beta p */
    FE_CHECK(axpby(k, w->pt, 1.0, w->zt, beta));  /* p~ = z~ + beta p~ */
    FE_CHECK(apply(k, k->A, w->p, &w->q));        /* q = J p */
    FE_CHECK(apply(k, k->AT, w->pt, &w->qt));     /* q~ = J^T p~ */
    FE_CHECK(dot(k, w->pt, w->q, &pq));
    if (breakdown(k, pq, "(p~, J p)", it)) return 0;
    double alpha = rho / pq;
    FE_CHECK(axpby(k, k->x, alpha, w->p, 1.0));   /* x += alpha p */
    FE_CHECK(axpby(k, w->r, -alpha, w->q, 1.0));  /* r -= alpha q */
    FE_CHECK(axpby(k, w->rt, -alpha, w->qt, 1.0)); /* r~ -= alpha q~ */
    FE_CHECK(norm(k, w->r, &rn));
    FE_CHECK(record(k, it, rn, &stop));
    if (stop) return 0;
    rho_old = rho;
  }
  return 0;
}

static int bicg_run(krylov *k, fe_vector *r)
{
  bicg_work w = {r, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int rc = bicg_iterate(k, &w);
  fe_vector *v[] = {w.rt, w.z, w.zt, w.p, w.pt, w.q, w.qt};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) fe_vector_free(v[i]);
  return rc;
}

/* ---- GMRES(m) ---- */

typedef struct gmres_work {
  int m;
  fe_vector *r, **V, *z, *w; /* V: m + 1 basis vectors */
  double *H;                 /* (m + 1) x m Hessenberg, column-major: H[i + j (m + 1)] */
  double *cs, *sn, *g;       /* Givens rotations and the rotated right-hand side */
} gmres_work;

/* Column j of H: apply the earlier rotations, then make the one that zeroes H[j+1][j]. */
static void gmres_rotate(gmres_work *w, int j)
{
  double *h = w->H + (size_t)j * (w->m + 1);
  for (int i = 0; i < j; i++) {
    double a = w->cs[i] * h[i] + w->sn[i] * h[i + 1];
    h[i + 1] = -w->sn[i] * h[i] + w->cs[i] * h[i + 1];
    h[i] = a;
  }
  double rr = hypot(h[j], h[j + 1]);
  w->cs[j] = rr > 0 ? h[j] / rr : 1.0;
  w->sn[j] = rr > 0 ? h[j + 1] / rr : 0.0;
  h[j] = rr;
  h[j + 1] = 0;
  w->g[j + 1] = -w->sn[j] * w->g[j]; /* |g[j+1]|: the residual norm after j + 1 steps */
  w->g[j] = w->cs[j] * w->g[j];
}

/* x += M^-1 V y with R y = g over the first n columns; a zero pivot of R is a breakdown
 * (1 in *broke). */
static int gmres_update(krylov *k, gmres_work *w, int n, int it, int *broke)
{
  int ld = w->m + 1;
  double *y = w->g; /* solved in place */
  for (int i = n - 1; i >= 0; i--) {
    double s = y[i];
    for (int c = i + 1; c < n; c++) s -= w->H[i + (size_t)c * ld] * y[c];
    if ((*broke = breakdown(k, w->H[i + (size_t)i * ld], "a pivot of the Hessenberg matrix", it)))
      return 0;
    y[i] = s / w->H[i + (size_t)i * ld];
  }
  FE_CHECK(fe_vector_fill(w->w, 0.0));
  for (int i = 0; i < n; i++) FE_CHECK(axpby(k, w->w, y[i], w->V[i], 1.0)); /* V y */
  FE_CHECK(precondition(k, w->w, &w->z));
  return axpby(k, k->x, 1.0, w->z, 1.0); /* x += M^-1 V y */
}

/* One cycle from r = b - J x with ||r|| = beta: up to m Arnoldi steps, then the update.
 * *it counts iterations over cycles; *stop ends the solve. */
static int gmres_cycle(krylov *k, gmres_work *w, double beta, int *it, int *stop)
{
  int ld = w->m + 1, j, estimate = 0, broke = 0;
  FE_CHECK(fe_vector_copy(w->V[0], w->r));
  FE_CHECK(axpby(k, w->V[0], 0.0, w->r, 1.0 / beta)); /* v0 = r / beta */
  memset(w->g, 0, sizeof(double) * (size_t)ld);
  w->g[0] = beta;
  for (j = 0; j < w->m && *it < k->o->maxit && !estimate; j++) {
    FE_CHECK_INTERRUPT();
    double *h = w->H + (size_t)j * ld;
    ++*it;
    FE_CHECK(precondition(k, w->V[j], &w->z));
    FE_CHECK(apply(k, k->A, w->z, &w->V[j + 1])); /* w = J M^-1 v_j */
    for (int i = 0; i <= j; i++) {                 /* modified Gram-Schmidt */
      FE_CHECK(dot(k, w->V[j + 1], w->V[i], &h[i]));
      FE_CHECK(axpby(k, w->V[j + 1], -h[i], w->V[i], 1.0));
    }
    FE_CHECK(norm(k, w->V[j + 1], &h[j + 1]));
    int invariant = !(h[j + 1] > 0);                /* the space is invariant (or NaN) */
    if (!invariant) FE_CHECK(axpby(k, w->V[j + 1], 0.0, w->V[j + 1], 1.0 / h[j + 1]));
    gmres_rotate(w, j);
    double est = fabs(w->g[j + 1]);
    FE_CHECK(fe_solver_history_add(&k->info->history, &k->info->nhistory, est));
    if (k->o->monitor) printf("  %s %4d  |r| ~ %.6e (estimate)\n", k->name, *it, est);
    fe_progress_iteration(*it, k->o->maxit, est, fmax(k->o->rtol * k->r0, k->o->atol));
    k->info->iterations = *it;
    estimate = invariant || !isfinite(est) || est <= k->o->atol || est <= k->o->rtol * k->r0;
  }
  FE_CHECK(gmres_update(k, w, j, *it, &broke));
  if (broke) {
    *stop = 1;
    return 0;
  }
  FE_CHECK(true_residual(k, &w->r)); /* confirm on the true residual */
  double rn;
  FE_CHECK(norm(k, w->r, &rn));
  k->info->nhistory--; /* the cycle's last estimate is replaced by the true norm */
  return record(k, *it, rn, stop);
}

static int gmres_run(krylov *k, fe_vector *r)
{
  gmres_work w = {0};
  w.m = k->o->restart;
  w.r = r;
  int rc = 0, ld = w.m + 1, it = 0, stop = 0;
  w.V = calloc((size_t)ld, sizeof *w.V);
  w.H = calloc((size_t)ld * (size_t)w.m, sizeof *w.H);
  w.cs = malloc(sizeof(double) * (size_t)ld);
  w.sn = malloc(sizeof(double) * (size_t)ld);
  w.g = malloc(sizeof(double) * (size_t)ld);
  if (!w.V || !w.H || !w.cs || !w.sn || !w.g)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                      "out of host memory for gmres's restart = %d", w.m);
  for (int i = 0; !rc && i < ld; i++) rc = fe_vector_duplicate(k->x, &w.V[i]);
  if (!rc) rc = fe_vector_duplicate(k->x, &w.w);
  double beta = k->r0;
  while (!rc && !stop && it < k->o->maxit) {
    rc = gmres_cycle(k, &w, beta, &it, &stop);
    if (!rc) beta = k->info->history[k->info->nhistory - 1];
  }
  for (int i = 0; w.V && i < ld; i++) fe_vector_free(w.V[i]);
  fe_vector_free(w.z);
  fe_vector_free(w.w);
  free(w.V);
  free(w.H);
  free(w.cs);
  free(w.sn);
  free(w.g);
  return rc;
}

/* ---- the shared driver ---- */

typedef int (*krylov_method)(krylov *k, fe_vector *r);

/* Compile what the solve runs (outside the timed iterations): *compile_s. */
static int prepare(krylov *k, double *compile_s)
{
  const char *actions[] = {"residual", "apply", "diagonal"};
  double cs;
  *compile_s = 0;
  for (int i = 0; i < 3; i++) {
    FE_CHECK(fe_operator_prepare(k->A, actions[i], &k->act, &cs));
    *compile_s += cs;
  }
  if (k->AT && k->AT != k->A) {
    FE_CHECK(fe_operator_prepare(k->AT, "apply", &k->act, &cs));
    *compile_s += cs;
  }
  return 0;
}

/* Setup (r0, the diagonal), the method, then the report of the iterations. */
static int krylov_iterate(krylov *k, krylov_method method)
{
  const fe_solver_opts *o = k->o;
  fe_solver_info *info = k->info;
  double compile_s;
  FE_CHECK(prepare(k, &compile_s));
  fe_vector *r = NULL;
  fe_report rep;
  int rc = true_residual(k, &r);
  fe_report first = k->last;
  if (!rc) rc = fe_solver_precond(k->name, k->A, o, &k->pc, &k->made, info);
  int jacobi = !rc && (k->pc ? k->pc->kind == &fe_precond_jacobi : !strcmp(o->pc, "jacobi"));
  k->U = k->pc && !jacobi && k->pc->kind != &fe_precond_none ? k->pc : NULL;
  if (!rc && jacobi && !k->pc) rc = fe_operator_diagonal(k->A, o->at, &k->act, &k->diag, &rep);
  k->d = jacobi ? (k->pc ? k->pc->diag : k->diag) : NULL;
  if (!rc) rc = fe_vector_norm(r, &k->r0);
  if (!rc) rc = fe_solver_history_add(&info->history, &info->nhistory, k->r0);
  if (!rc && o->monitor) printf("  %s %4d  |r| = %.6e\n", k->name, 0, k->r0);
  if (!rc) fe_progress_iteration(0, o->maxit, k->r0, fmax(o->rtol * k->r0, o->atol));
  snprintf(info->reason, sizeof info->reason, "maxit");
  k->flops = k->bytes = 0; /* count the iterations only, as CG does */
  k->launches = 0;
  k->calls = (fe_call_tally){0};
  double setup_s = first.setup_seconds + info->pc_setup_seconds, t0 = fe_clock();
  if (!rc && !isfinite(k->r0)) {
    snprintf(info->reason, sizeof info->reason, "diverged: |r0| = %g", k->r0);
  } else if (!rc && k->r0 <= o->atol) {
    info->converged = 1;
    snprintf(info->reason, sizeof info->reason, "atol");
  } else if (!rc) {
    rc = method(k, r);
  }
  fe_vector_free(r);
  if (!rc) rc = k->x->be->ops->finish(k->x->be->impl);
  FE_CHECK(rc);
  fe_report *out = &info->report;
  *out = info->iterations ? k->last : first;
  snprintf(out->action, sizeof out->action, "%s", k->name);
  out->iterations = info->iterations;
  out->flops = k->flops;
  out->bytes = k->bytes;
  out->launches = k->launches;
  fe_report_calls(out, &k->calls); /* the model: each call at its own, the vectors beside */
  out->seconds = fe_clock() - t0;
  out->compile_seconds = compile_s;
  out->setup_seconds = setup_s;
  return fe_perf_predict(k->x->be, k->x->prec, out);
}

/* What fe_solve_cg does around its iteration, for a nonsymmetric method. */
static int krylov_solve(const char *name, krylov_method method, fe_operator *A,
                        const fe_vector *b, const fe_vector *x0, const fe_solver_opts *o,
                        fe_vector **x, fe_solver_info *info)
{
  memset(info, 0, sizeof *info);
  *x = NULL;
  FE_ASSERT(o->maxit >= 0, FE_ERR_ARG, "%s: maxit must be >= 0, got %d", name, o->maxit);
  FE_ASSERT(o->rtol >= 0 && o->atol >= 0, FE_ERR_ARG, "%s: tolerances must be >= 0", name);
  FE_ASSERT(o->restart >= 1, FE_ERR_ARG, "%s: restart must be >= 1, got %d", name, o->restart);
  krylov k;
  memset(&k, 0, sizeof k);
  k.name = name;
  k.A = A;
  k.o = o;
  k.act = o->act;
  k.act.nolog = 1;
  k.info = info;
  if (method == bicg_run) FE_CHECK(fe_operator_transpose(A, &k.AT));
  FE_CHECK(fe_solver_initial(A, x0, &o->act, b == NULL, &k.x));
  int rc = 0;
  fe_vector *bconv = NULL;
  k.b = b;
  if (b && (b->be != k.x->be || b->prec != k.x->prec)) {
    rc = fe_vector_convert(b, k.x->be, k.x->prec, &bconv);
    k.b = bconv;
  }
  fe_progress_begin(name, o->monitor);
  if (!rc) rc = krylov_iterate(&k, method);
  fe_progress_end();
  fe_vector_free(bconv);
  fe_vector_free(k.diag);
  if (k.made) fe_precond_free(k.pc);
  if (rc) {
    fe_vector_free(k.x);
    fe_solver_info_free(info);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *x = k.x;
  if (!o->act.nolog) fe_perf_log_add(&info->report);
  return 0;
}

int fe_solve_bicg(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                  const fe_solver_opts *o, fe_vector **x, fe_solver_info *info)
{
  return krylov_solve("bicg", bicg_run, A, b, x0, o, x, info);
}

int fe_solve_bicgstab(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                      const fe_solver_opts *o, fe_vector **x, fe_solver_info *info)
{
  return krylov_solve("bicgstab", bicgstab_run, A, b, x0, o, x, info);
}

int fe_solve_gmres(fe_operator *A, const fe_vector *b, const fe_vector *x0,
                   const fe_solver_opts *o, fe_vector **x, fe_solver_info *info)
{
  return krylov_solve("gmres", gmres_run, A, b, x0, o, x, info);
}

/* The solvers by name. */
static const struct {
  const char *name;
  int (*solve)(fe_operator *, const fe_vector *, const fe_vector *, const fe_solver_opts *,
               fe_vector **, fe_solver_info *);
} solvers[] = {
    {"cg", fe_solve_cg},
    {"bicg", fe_solve_bicg},
    {"bicgstab", fe_solve_bicgstab},
    {"gmres", fe_solve_gmres},
};

int fe_solver_known(const char *method)
{
  for (size_t i = 0; method && i < sizeof solvers / sizeof solvers[0]; i++)
    if (!strcmp(solvers[i].name, method)) return 1;
  return 0;
}

int fe_solve_linear(const char *method, fe_operator *A, const fe_vector *b, const fe_vector *x0,
                    const fe_solver_opts *o, fe_vector **x, fe_solver_info *info)
{
  for (size_t i = 0; method && i < sizeof solvers / sizeof solvers[0]; i++)
    if (!strcmp(solvers[i].name, method)) return solvers[i].solve(A, b, x0, o, x, info);
  FE_ERROR(FE_ERR_ARG, "unknown linear solver '%s' (cg, bicg, bicgstab, gmres)",
           method ? method : "(null)");
}
