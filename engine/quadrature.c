/* felab quadrature rules.
 *
 * All rules come from one 1D building block, Gauss-Jacobi on [-1,1] with the weight
 * (1 - s)^a (a = 0 is Gauss-Legendre):
 *   - the n nodes are the eigenvalues of the symmetric tridiagonal Jacobi matrix of the
 *     orthogonal polynomials P_n^{(a,0)}; each is found by bisection with Sturm counts,
 *     which cannot miss or duplicate a root, then polished by Newton on P_n^{(a,0)};
 *   - the weights are w_i = 2^(a+1) / ((1 - s_i^2) P_n'(s_i)^2) (for b = 0 the gamma
 *     factors of the general formula cancel).
 * n points integrate polynomials of degree 2n - 1 against the weight exactly.
 *
 * Quadrilaterals and hexahedra take tensor products on [-1,1]^d (point i + n (j + n k) sits
 * at (s_i, s_j, s_k)). Triangles and tetrahedra use the collapsed (Duffy / Stroud conical)
 * map from the unit cube,
 *   x = u (1 - v) (1 - w),  y = v (1 - w),  z = w,   dx dy dz = (1 - v) (1 - w)^2 du dv dw,
 * with Gauss-Legendre in u and Gauss-Jacobi a = 1 in v and a = 2 in w, so the Jacobian is
 * carried by the weights and a polynomial of total degree p stays of degree p in each of
 * u, v, w: n = ceil((p + 1) / 2) points per direction suffice. Prisms are triangle x line. */
#include "engine/quadrature.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

#define MAX_LINE_POINTS 64 /* degree 127: well past anything felab integrates */

/* Diagonal and squared off-diagonal of the Jacobi matrix of P_k^{(a,0)}, k < n. */
static void jacobi_matrix(int n, double a, double *diag, double *offsq)
{
  diag[0] = -a / (a + 2);
  for (int k = 1; k < n; k++) {
    double s = 2 * k + a;
    diag[k] = -a * a / (s * (s + 2));
    offsq[k] = 4.0 * k * k * (k + a) * (k + a) / (s * s * (s + 1) * (s - 1));
  }
}

/* Number of eigenvalues of the Jacobi matrix below x (Sturm count of the LDL^T pivots). */
static int sturm_count(int n, const double *diag, const double *offsq, double x)
{
  int count = 0;
  double q = diag[0] - x;
  for (int k = 0;;) {
    if (q == 0) q = -1e-300; /* a zero pivot: nudge it, the count stays correct */
    count += q < 0;
    if (++k == n) break;
    q = diag[k] - x - offsq[k] / q;
  }
  return count;
}

/* P_n^{(a,0)}(s) by the three-term recurrence; its derivative in *dp. */
static double jacobi_eval(int n, double a, double s, double *dp)
{
  double p0 = 1, d0 = 0;
  double p1 = (a + 1) + (a + 2) * (s - 1) / 2, d1 = (a + 2) / 2;
  if (n == 0) {
    *dp = 0;
    return 1;
  }
  for (int k = 2; k <= n; k++) {
    double c = 2 * k + a;
    double lead = 2.0 * k * (k + a) * (c - 2);
    double slope = (c - 1) * c * (c - 2), shift = (c - 1) * a * a;
    double back = 2.0 * (k + a - 1) * (k - 1) * c;
    double p2 = ((slope * s + shift) * p1 - back * p0) / lead;
    double d2 = ((slope * s + shift) * d1 + slope * p1 - back * d0) / lead;
    p0 = p1, p1 = p2, d0 = d1, d1 = d2;
  }
  *dp = d1;
  return p1;
}

/* Gauss-Jacobi nodes (ascending) and weights for the weight (1 - s)^a on [-1,1]. */
static void gauss_jacobi(int n, double a, double *s, double *w)
{
  double diag[MAX_LINE_POINTS], offsq[MAX_LINE_POINTS];
  jacobi_matrix(n, a, diag, offsq);
  for (int i = 0; i < n; i++) {
    /* bisection for the i-th smallest eigenvalue, which lies in (-1, 1) */
    double lo = -1, hi = 1;
    for (;;) {
      double mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      if (sturm_count(n, diag, offsq, mid) > i)
        hi = mid;
      else
        lo = mid;
    }
    double x = 0.5 * (lo + hi), dp;
    for (int it = 0; it < 2; it++) { /* Newton polish: s <- s - P / P' */
      double p = jacobi_eval(n, a, x, &dp);
      double step = p / dp;
      if (!(fabs(step) < 1e-10)) break;
      x -= step;
    }
    jacobi_eval(n, a, x, &dp);
    s[i] = x;
    w[i] = pow(2.0, a + 1) / ((1 - x) * (1 + x) * dp * dp);
  }
}

/* Allocate a rule's arrays and set its header. */
static int rule_alloc(fe_quadrature *q, fe_cell_type cell, int dim, int npoints, int degree)
{
  q->cell = cell;
  q->dim = dim;
  q->npoints = npoints;
  q->degree = degree;
  FE_MALLOC(q->points, (size_t)npoints * dim, "quadrature points");
  FE_MALLOC(q->weights, npoints, "quadrature weights");
  return 0;
}

/* Points per direction for exactness to degree p, checked against the supported range. */
static int points_for_degree(int degree, int *n)
{
  FE_ASSERT(degree >= 0, FE_ERR_ARG, "quadrature: degree %d must be 0 or more", degree);
  FE_ASSERT(degree <= 2 * MAX_LINE_POINTS - 1, FE_ERR_ARG,
            "quadrature: degree %d is above the highest supported (%d)", degree,
            2 * MAX_LINE_POINTS - 1);
  *n = (degree + 2) / 2;
  return 0;
}

/* Gauss-Legendre with n points on [-1,1]. */
int fe_quadrature_line(int n, fe_quadrature *q)
{
  FE_ASSERT(q, FE_ERR_ARG, "quadrature: no rule to fill");
  memset(q, 0, sizeof *q);
  FE_ASSERT(n >= 1 && n <= MAX_LINE_POINTS, FE_ERR_ARG,
            "quadrature: %d Gauss points: the number must lie in 1..%d", n, MAX_LINE_POINTS);
  /* There is no line cell type: dim 1 marks a line rule (cell is set to quad, its tensor). */
  FE_CHECK(rule_alloc(q, FE_CELL_QUAD, 1, n, 2 * n - 1));
  gauss_jacobi(n, 0, q->points, q->weights);
  return 0;
}

/* Tensor Gauss rule with n points per direction on [-1,1]^dim, x fastest. */
static int rule_tensor(fe_quadrature *q, fe_cell_type cell, int dim, int n)
{
  double s[MAX_LINE_POINTS], w[MAX_LINE_POINTS];
  gauss_jacobi(n, 0, s, w);
  int npoints = dim == 2 ? n * n : n * n * n;
  FE_CHECK(rule_alloc(q, cell, dim, npoints, 2 * n - 1));
  for (int p = 0; p < npoints; p++) {
    int idx[3] = {p % n, (p / n) % n, p / (n * n)};
    q->weights[p] = 1;
    for (int d = 0; d < dim; d++) {
      q->points[p * dim + d] = s[idx[d]];
      q->weights[p] *= w[idx[d]];
    }
  }
  return 0;
}

/* Collapsed Gauss-Jacobi rule with n points per direction on the reference simplex. */
static int rule_simplex(fe_quadrature *q, fe_cell_type cell, int dim, int n)
{
  double s[3][MAX_LINE_POINTS], w[3][MAX_LINE_POINTS];
  for (int d = 0; d < dim; d++) { /* direction d has weight (1 - .)^d; map to [0,1] */
    gauss_jacobi(n, d, s[d], w[d]);
    for (int i = 0; i < n; i++) {
      s[d][i] = 0.5 * (1 + s[d][i]);
      w[d][i] *= pow(0.5, d + 1);
    }
  }
  int npoints = dim == 2 ? n * n : n * n * n;
  FE_CHECK(rule_alloc(q, cell, dim, npoints, 2 * n - 1));
  for (int p = 0; p < npoints; p++) {
    double u = s[0][p % n], v = s[1][(p / n) % n];
    double *x = q->points + p * dim;
    if (dim == 2) {
      x[0] = u * (1 - v);
      x[1] = v;
      q->weights[p] = w[0][p % n] * w[1][p / n];
    } else {
      double t = s[2][p / (n * n)];
      x[0] = u * (1 - v) * (1 - t);
      x[1] = v * (1 - t);
      x[2] = t;
      q->weights[p] = w[0][p % n] * w[1][(p / n) % n] * w[2][p / (n * n)];
    }
  }
  return 0;
}

/* One point at the centroid: exact for degree 1. */
static int rule_centroid(fe_quadrature *q, fe_cell_type cell, int dim)
{
  FE_CHECK(rule_alloc(q, cell, dim, 1, 1));
  for (int d = 0; d < dim; d++) q->points[d] = 1.0 / (dim + 1);
  q->weights[0] = fe_reference_measure(cell);
  return 0;
}

/* Prism (triangle x [-1,1]): the triangle rule for `degree` times the Gauss line rule. */
static int rule_prism(fe_quadrature *q, int degree, int n)
{
  fe_quadrature tri;
  memset(&tri, 0, sizeof tri);
  FE_CHECK(fe_quadrature_create(FE_CELL_TRI, degree, &tri));
  double s[MAX_LINE_POINTS], w[MAX_LINE_POINTS];
  gauss_jacobi(n, 0, s, w);
  int achieved = tri.degree < 2 * n - 1 ? tri.degree : 2 * n - 1;
  int rc = rule_alloc(q, FE_CELL_PRISM, 3, tri.npoints * n, achieved);
  if (rc) {
    fe_quadrature_free(&tri);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  for (int k = 0, p = 0; k < n; k++)
    for (int t = 0; t < tri.npoints; t++, p++) {
      q->points[3 * p + 0] = tri.points[2 * t + 0];
      q->points[3 * p + 1] = tri.points[2 * t + 1];
      q->points[3 * p + 2] = s[k];
      q->weights[p] = tri.weights[t] * w[k];
    }
  fe_quadrature_free(&tri);
  return 0;
}

/* Dispatch on the cell type; fe_quadrature_create frees a half-made rule on failure. */
static int rule_create(fe_cell_type cell, int degree, fe_quadrature *q)
{
  int n = 0;
  FE_CHECK(points_for_degree(degree, &n));
  switch (cell) {
  case FE_CELL_QUAD: return rule_tensor(q, cell, 2, n);
  case FE_CELL_HEX: return rule_tensor(q, cell, 3, n);
  case FE_CELL_TRI:
  case FE_CELL_TET:
    if (degree <= 1) return rule_centroid(q, cell, fe_cell_dim(cell));
    return rule_simplex(q, cell, fe_cell_dim(cell), n);
  case FE_CELL_PRISM: return rule_prism(q, degree, n);
  }
  FE_ERROR(FE_ERR_ARG, "quadrature: unknown cell type %d", (int)cell);
}

/* A rule on the reference cell exact to `degree` (q->degree: what it achieves). */
int fe_quadrature_create(fe_cell_type cell, int degree, fe_quadrature *q)
{
  FE_ASSERT(q, FE_ERR_ARG, "quadrature: no rule to fill");
  memset(q, 0, sizeof *q);
  int rc = rule_create(cell, degree, q);
  if (rc) {
    fe_quadrature_free(q);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

/* Free a rule's arrays and clear it; safe on a cleared or failed rule. */
void fe_quadrature_free(fe_quadrature *q)
{
  if (!q) return;
  free(q->points);
  free(q->weights);
  memset(q, 0, sizeof *q);
}

/* Volume (area) of the reference cell. */
double fe_reference_measure(fe_cell_type cell)
{
  switch (cell) {
  case FE_CELL_TRI: return 0.5;
  case FE_CELL_QUAD: return 4.0;
  case FE_CELL_TET: return 1.0 / 6.0;
  case FE_CELL_HEX: return 8.0;
  case FE_CELL_PRISM: return 1.0;
  }
  return 0.0;
}
