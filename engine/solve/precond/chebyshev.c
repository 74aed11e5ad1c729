/* Jacobi-Chebyshev: a fixed polynomial in D^-1 J as the preconditioner (D = diag J).
 *
 * If the eigenvalues of D^-1 J lie in [a, b] (0 < a < b), the Chebyshev iteration on
 * D^-1 J z = D^-1 r from z_0 = 0 makes, after k steps, the residual polynomial
 *   1 - lambda p(lambda) = T_k((b + a - 2 lambda) / (b - a)) / T_k((b + a) / (b - a)),
 * the smallest on [a, b] of all degree-k polynomials that are 1 at 0. Its iterate
 * z_k = p(D^-1 J) D^-1 r is linear in r with coefficients fixed by a, b and k, so
 * M^-1 = p(D^-1 J) D^-1 is a fixed operator; it is symmetric when J is (it equals
 * D^-1/2 p(S) D^-1/2 with S = D^-1/2 J D^-1/2), and positive wherever lambda p(lambda) > 0:
 * on all of (0, b]. So it serves CG as long as b bounds the spectrum from above; eigenvalues
 * below a are only helped less. degree = k steps: k - 1 Jacobian actions per application.
 *
 * The three-term recurrence (Saad, Iterative Methods, alg. 12.1), theta = (b + a) / 2,
 * delta = (b - a) / 2, sigma = theta / delta, rho_0 = 1 / sigma:
 *   d_0 = D^-1 r / theta, z_1 = d_0, r_1 = r - J d_0
 *   rho_j = 1 / (2 sigma - rho_{j-1}),  d_j = rho_j rho_{j-1} d_{j-1} + (2 rho_j / delta) D^-1 r_j
 *   z_{j+1} = z_j + d_j,  r_{j+1} = r_j - J d_j.
 *
 * The bounds come from Lanczos, which Jacobi-PCG runs for free: m steps of PCG on J x = b
 * with coefficients alpha_j, beta_j give the Lanczos tridiagonal T of D^-1 J (Saad 6.7.3)
 *   T_00 = 1/alpha_0,  T_jj = 1/alpha_j + beta_{j-1}/alpha_{j-1},
 *   T_{j-1,j} = sqrt(beta_{j-1}) / alpha_{j-1},
 * whose eigenvalues (Ritz values) lie inside the spectrum and approach its ends first. Their
 * extremes lmin, lmax come from Sturm-sequence bisection. The largest converges fast but from
 * below, so upper = 1.1 lmax (a safety factor: the polynomial must not see an eigenvalue
 * above b). The smallest converges slowly, from above, yet lower = lmin as it comes (or
 * ratio * upper when ratio > 0), not scaled down: a wider interval raises the polynomial's
 * ripple 1/T_k over the whole bulk of the spectrum, while the few eigenvalues left below a
 * keep lambda p(lambda) > 0 and cost CG an iteration or so each (0.7 and 0.9 lmin took 1-2
 * iterations more than lmin on Q1/Q2 hexes and P2 tets; a bound well above lmin, ratio
 * 0.1-0.3, often fewer: docs/solvers.md). b is a deterministic pseudo-random vector, zero on
 * constrained rows: there J is the identity and never couples them to the free rows
 * (engine/operator/operator.h), so the Krylov space stays on the free rows, whose spectrum matters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/core/error.h"
#include "engine/parallel/dist.h"
#include "engine/solve/precond/units.h"

#define CHEB_DEGREE 3     /* default polynomial degree (Chebyshev steps) */
#define CHEB_LANCZOS 10   /* default Lanczos (PCG) steps for the bounds */
#define CHEB_SAFETY 1.1   /* upper = 1.1 lmax */

typedef struct chebyshev {
  int degree, steps;      /* Chebyshev steps; Lanczos steps taken */
  double lmin, lmax;      /* Lanczos' extreme Ritz values */
  double lower, upper;    /* the interval [a, b] the polynomial is built on */
  fe_vector *res, *q, *d; /* the running residual, scratch, the correction */
} chebyshev;

/* How many eigenvalues of the symmetric tridiagonal (diagonal a, squared off-diagonal b2)
 * are below x: the sign changes of the Sturm sequence (the pivots of T - x I). */
static int sturm_count(const double *a, const double *b2, int m, double x)
{
  int count = 0;
  double q = 1;
  for (int i = 0; i < m; i++) {
    q = a[i] - x - (i ? b2[i - 1] / q : 0); /* pivot i of the LDL^T of T - x I */
    if (q == 0) q = -1e-300;                /* x is an eigenvalue: count it below */
    count += q < 0;
  }
  return count;
}

/* Eigenvalue k (0: the smallest) of the tridiagonal, by bisection inside Gershgorin's
 * interval. */
static double tridiagonal_eigenvalue(const double *a, const double *b2, int m, int k)
{
  double lo = a[0], hi = a[0];
  for (int i = 0; i < m; i++) {
    double r = (i ? sqrt(b2[i - 1]) : 0) + (i < m - 1 ? sqrt(b2[i]) : 0);
    lo = fmin(lo, a[i] - r);
    hi = fmax(hi, a[i] + r);
  }
  for (int it = 0; it < 200 && hi - lo > 1e-14 * fmax(fabs(lo), fabs(hi)); it++) {
    double mid = 0.5 * (lo + hi);
    if (sturm_count(a, b2, m, mid) > k) hi = mid; /* more than k below mid: it is below */
    else lo = mid;
  }
  return 0.5 * (lo + hi);
}

/* A deterministic pseudo-random vector in [-1, 1) with zero on constrained rows. */
static int lanczos_start(fe_precond *P, fe_vector **b)
{
  int n = P->diag->n, rc = 0;
  /* a space split over ranks: the whole space's vector, each rank its nodes' entries (the
   * same start as on one rank, and the copies of a shared node alike) */
  const fe_space *V = fe_operator_space(P->A);
  const fe_dist *dist = V->dist;
  const long long whole = dist ? dist->ndofs : n;
  double *v = malloc(sizeof(double) * (size_t)(whole + 1));
  if (!v) FE_ERROR(FE_ERR_MEM, "chebyshev: out of host memory for %lld entries", whole);
  unsigned long long s = 0x9E3779B97F4A7C15ull;
  for (long long i = 0; i < whole; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull; /* a 64-bit LCG */
    v[i] = (double)(s >> 11) / 4503599627370496.0 - 1.0;      /* top 53 bits: [0, 2) - 1 */
  }
  for (int l = 0; dist && l < V->nnodes; l++) /* l2g increases: in place, front to back */
    for (int c = 0; c < V->ncomp; c++)
      v[(size_t)l * V->ncomp + c] = v[(size_t)dist->l2g[l] * V->ncomp + c];
  fe_vector *g0 = NULL, *mask = NULL;
  rc = fe_vector_duplicate(P->diag, b);
  if (!rc) rc = fe_vector_set(*b, v);
  if (!rc && fe_operator_ndirichlet(P->A) > 0) {
    rc = fe_operator_initial(P->A, &P->act, 0.0, &g0);
    if (!rc) rc = fe_operator_initial(P->A, &P->act, 1.0, &mask);
    if (!rc) rc = fe_vector_axpby(mask, -1.0, g0, 1.0); /* 1 on free rows, 0 on constrained */
    if (!rc) rc = fe_vector_pointwise(*b, *b, mask, 0); /* b <- b .* mask */
  }
  fe_vector_free(g0);
  fe_vector_free(mask);
  free(v);
  FE_CHECK(rc);
  return 0;
}

/* Up to m steps of Jacobi-PCG on J x = b from 0, the Lanczos tridiagonal from their alpha
 * and beta into a (diagonal) and b2 (squared off-diagonal); *steps gets the steps taken
 * (fewer when the residual vanishes: the Krylov space is invariant, T exact). *rep gets the
 * last Jacobian action's report. */
static int lanczos_pcg(fe_precond *P, fe_vector *x, fe_vector *r, fe_vector *p, int m,
                       double *a, double *b2, int *steps, fe_report *rep)
{
  fe_vector *q = NULL;
  double rz, rz_new, rr, pq, rr0, alpha_old = 0, beta_old = 0;
  int rc = fe_vector_pointwise(p, r, P->diag, 1); /* p = z = D^-1 r */
  if (!rc) rc = fe_vector_dot(r, p, &rz);
  if (!rc) rc = fe_vector_dot(r, r, &rr0);
  *steps = 0;
  for (int j = 0; !rc && j < m && rz > 0; j++) {
    rc = fe_operator_apply(P->A, p, P->at, &P->act, &q, rep); /* q = J p */
    if (!rc) rc = fe_vector_dot(p, q, &pq);
    if (rc) break;
    if (!(pq > 0)) {
      rc = fe_error_set(FE_ERR_SOLVER, __FILE__, __LINE__, __func__,
                        "chebyshev: Lanczos step %d found (p, Jp) = %.3g: the Jacobian is not "
                        "positive definite, and the polynomial needs it to be", j + 1, pq);
      break;
    }
    double alpha = rz / pq;
    /* x += alpha p, r -= alpha q, rr = (r, r), rz_new = (r, D^-1 r) */
    rc = fe_vector_cg_update(x, r, p, q, P->diag, alpha, NULL, &rr, &rz_new);
    if (rc) break;
    a[j] = 1 / alpha + (j ? beta_old / alpha_old : 0); /* T_jj */
    if (j) b2[j - 1] = beta_old / (alpha_old * alpha_old); /* T_{j-1,j}^2 */
    *steps = j + 1;
    beta_old = rz_new / rz;
    alpha_old = alpha;
    if (rr <= 1e-28 * rr0) break; /* an invariant space: T is exact */
    rc = fe_vector_cg_direction(p, r, P->diag, beta_old, NULL); /* p <- D^-1 r + beta p */
    rz = rz_new;
  }
  fe_vector_free(q);
  FE_CHECK(rc);
  return 0;
}

/* lmin and lmax of D^-1 J from o->lanczos steps of Jacobi-PCG; *rep as lanczos_pcg. */
static int lanczos_bounds(fe_precond *P, chebyshev *c, fe_report *rep)
{
  int m = P->o.lanczos > 0 ? P->o.lanczos : CHEB_LANCZOS;
  double *a = malloc(sizeof(double) * (size_t)m), *b2 = malloc(sizeof(double) * (size_t)m);
  fe_vector *x = NULL, *r = NULL;
  int rc = a && b2 ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                      "chebyshev: out of host memory for %d Lanczos steps", m);
  if (!rc) rc = lanczos_start(P, &r);
  if (!rc) rc = fe_vector_duplicate(P->diag, &x);
  if (!rc) rc = lanczos_pcg(P, x, r, c->d, m, a, b2, &c->steps, rep);
  if (!rc && c->steps == 0)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                      "chebyshev: no Lanczos step could run (the operator has no free rows)");
  if (!rc) {
    c->lmin = tridiagonal_eigenvalue(a, b2, c->steps, 0);
    c->lmax = tridiagonal_eigenvalue(a, b2, c->steps, c->steps - 1);
  }
  free(a);
  free(b2);
  fe_vector_free(x);
  fe_vector_free(r);
  FE_CHECK(rc);
  return 0;
}

static void chebyshev_destroy(fe_precond *P)
{
  chebyshev *c = P->impl;
  if (!c) return;
  fe_vector_free(c->res);
  fe_vector_free(c->q);
  fe_vector_free(c->d);
  free(c);
  P->impl = NULL;
}

static int chebyshev_setup(fe_precond *P)
{
  FE_ASSERT(P->o.degree >= 0 && P->o.lanczos >= 0, FE_ERR_ARG,
            "chebyshev: degree (%d) and lanczos (%d) must be >= 0 (0: the defaults %d and %d)",
            P->o.degree, P->o.lanczos, CHEB_DEGREE, CHEB_LANCZOS);
  FE_ASSERT(P->o.ratio >= 0 && P->o.ratio < 1, FE_ERR_ARG,
            "chebyshev: ratio = %g must be in [0, 1) (lower bound = ratio * upper; 0: Lanczos')",
            P->o.ratio);
  chebyshev *c = calloc(1, sizeof *c);
  if (!c) FE_ERROR(FE_ERR_MEM, "chebyshev: out of host memory");
  P->impl = c;
  c->degree = P->o.degree > 0 ? P->o.degree : CHEB_DEGREE;
  fe_report diag_rep, apply_rep;
  FE_CHECK(fe_operator_diagonal(P->A, P->at, &P->act, &P->diag, &diag_rep));
  FE_CHECK(fe_vector_duplicate(P->diag, &c->res));
  FE_CHECK(fe_vector_duplicate(P->diag, &c->q));
  FE_CHECK(fe_vector_duplicate(P->diag, &c->d));
  FE_CHECK(lanczos_bounds(P, c, &apply_rep));
  c->upper = CHEB_SAFETY * c->lmax;
  c->lower = P->o.ratio > 0 ? P->o.ratio * c->upper : c->lmin;
  FE_ASSERT(c->lower > 0 && c->lower < c->upper, FE_ERR_SOLVER,
            "chebyshev: the Lanczos bounds [%g, %g] of D^-1 J are not an interval of positive "
            "numbers (is the Jacobian positive definite?)", c->lmin, c->lmax);
  /* counts per application: the first step (D^-1 r, scale, copy: 2 flops, 7 words, 3
   * launches; degree 1: 2 flops, 5 words, 2 launches), then degree - 1 times a Jacobian
   * action and r <- r - J d, q = D^-1 r, d <- c q + a d, z += d (10 flops, 12 words, 4) */
  double n = P->diag->n, w = (double)fe_precision_size(P->diag->prec), k = c->degree - 1;
  P->flops = 2 * n + k * (apply_rep.flops + 10 * n);
  P->bytes = (k ? 7 : 5) * n * w + k * (apply_rep.bytes + 12 * n * w);
  P->launches = (k ? 3 : 2) + (int)k * (apply_rep.launches + 4);
  snprintf(P->describe, sizeof P->describe,
           "Chebyshev-Jacobi degree %d on [%.4g, %.4g] (%d Lanczos steps)", c->degree, c->lower,
           c->upper, c->steps);
  if (P->o.verbose)
    printf("  chebyshev: %d Lanczos steps: Ritz values of D^-1 J in [%.6g, %.6g]; polynomial of "
           "degree %d on [%.6g, %.6g]\n", c->steps, c->lmin, c->lmax, c->degree, c->lower,
           c->upper);
  return 0;
}

/* z <- p(D^-1 J) D^-1 r by degree Chebyshev steps from z = 0 (see the top). */
static int chebyshev_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  chebyshev *c = P->impl;
  double theta = 0.5 * (c->upper + c->lower), delta = 0.5 * (c->upper - c->lower);
  double sigma = theta / delta, rho = 1 / sigma;
  fe_report rep;
  if (c->degree == 1) {
    FE_CHECK(fe_vector_pointwise(z, r, P->diag, 1));   /* z = D^-1 r */
    return fe_vector_axpby(z, 1 / theta, z, 0.0);      /* z <- z / theta */
  }
  FE_CHECK(fe_vector_pointwise(c->d, r, P->diag, 1));  /* d_0 = D^-1 r / theta */
  FE_CHECK(fe_vector_axpby(c->d, 1 / theta, c->d, 0.0));
  FE_CHECK(fe_vector_copy(z, c->d));                   /* z_1 = d_0 */
  const fe_vector *prev = r;                           /* r_0 */
  for (int j = 1; j < c->degree; j++) {
    FE_CHECK(fe_operator_apply(P->A, c->d, P->at, &P->act, &c->q, &rep)); /* q = J d */
    FE_CHECK(fe_vector_axpby(c->q, 1.0, prev, -1.0));  /* r_j = r_{j-1} - J d_{j-1} */
    fe_vector *t = c->res;
    c->res = c->q;
    c->q = t;
    prev = c->res;
    double rho_new = 1 / (2 * sigma - rho);
    FE_CHECK(fe_vector_pointwise(c->q, c->res, P->diag, 1)); /* q = D^-1 r_j */
    /* d_j = rho_j rho_{j-1} d_{j-1} + (2 rho_j / delta) D^-1 r_j */
    FE_CHECK(fe_vector_axpby(c->d, 2 * rho_new / delta, c->q, rho_new * rho));
    FE_CHECK(fe_vector_axpby(z, 1.0, c->d, 1.0));      /* z_{j+1} = z_j + d_j */
    rho = rho_new;
  }
  return 0;
}

const fe_precond_kind fe_precond_chebyshev = {
  "chebyshev", "a Chebyshev polynomial in D^-1 J (degree, bounds from lanczos PCG steps)",
  chebyshev_setup, chebyshev_apply, chebyshev_destroy,
};
