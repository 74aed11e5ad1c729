/* felab quadrature rules.
 *
 * Three families, all with positive weights:
 *
 * 1. Gauss-Jacobi on [-1,1] with the weight (1 - s)^a (a = 0 is Gauss-Legendre), the 1D
 *    building block of everything else:
 *   - the n nodes are the eigenvalues of the symmetric tridiagonal Jacobi matrix of the
 *     orthogonal polynomials P_n^{(a,0)}; each is found by bisection with Sturm counts,
 *     which cannot miss or duplicate a root, then polished by Newton on P_n^{(a,0)};
 *   - the weights are w_i = 2^(a+1) / ((1 - s_i^2) P_n'(s_i)^2) (for b = 0 the gamma
 *     factors of the general formula cancel).
 *   n points integrate polynomials of degree 2n - 1 against the weight exactly.
 *
 *   Quadrilaterals and hexahedra take tensor products on [-1,1]^d (point i + n (j + n k) sits
 *   at (s_i, s_j, s_k)). Triangles and tetrahedra can use the collapsed (Duffy / Stroud
 *   conical) map from the unit cube,
 *     x = u (1 - v) (1 - w),  y = v (1 - w),  z = w,   dx dy dz = (1 - v) (1 - w)^2 du dv dw,
 *   with Gauss-Legendre in u and Gauss-Jacobi a = 1 in v and a = 2 in w, so the Jacobian is
 *   carried by the weights and a polynomial of total degree p stays of degree p in each of
 *   u, v, w: n = ceil((p + 1) / 2) points per direction, n^d points, for any degree.
 *
 * 2. Gauss-Lobatto-Legendre (GLL): n >= 2 points on [-1,1] that include both endpoints. The
 *    n - 2 interior nodes are the roots of P'_{n-1}; they interlace with the n - 1 Gauss
 *    nodes (Rolle: one root of P'_{n-1} between two consecutive roots of P_{n-1}), so each is
 *    found by bisection between two Gauss nodes. The weights are
 *      w_i = 2 / (n (n - 1) P_{n-1}(s_i)^2),
 *    and the rule is exact to degree 2n - 3: two orders less than Gauss, the price of the
 *    fixed endpoints. Its worth is elsewhere: spectral elements put their nodes at the GLL
 *    points, so a GLL rule with the same points makes the mass matrix diagonal. Tensor GLL
 *    rules serve quads and hexes.
 *
 * 3. Symmetric simplex rules for low degrees. In barycentric coordinates (l_0, ..., l_d) a
 *    rule is symmetric when relabelling the vertices maps its point set onto itself with the
 *    same weights; its points then come in orbits, one weight per orbit:
 *      triangle: centroid (1 point), (a, a, 1-2a) (3), (a, b, 1-a-b) (6);
 *      tet:      centroid (1), (a, a, a, 1-3a) (4), (a, a, 1/2-a, 1/2-a) (6),
 *                (a, a, b, 1-2a-b) (12).
 *    Both the rule and the integral are invariant under relabelling, so a symmetric rule is
 *    exact on all polynomials of a degree as soon as it is exact on the symmetric ones: the
 *    moment equations are few. They were solved offline by Newton's method for chosen
 *    orbit structures, keeping solutions with positive weights and interior points, and the
 *    values are tabulated below to 17 digits (the unit tests prove the exactness); there are
 *    rules up to degree 8 on triangles and 6 on tets. Such a rule gives the same result
 *    whatever the vertex order of a cell, and at low degree it needs far fewer points than
 *    the collapsed rule (tet, degree 6: 24 points instead of 64).
 *
 * Choice (fe_quadrature_create_kind): FE_QUAD_AUTO takes the centroid for degree <= 1, then
 * the symmetric rule with the fewest points that reaches the degree, unless the collapsed
 * rule has fewer points (triangle, degree 3: 4 points against 6; a tie goes to the symmetric
 * rule) or no symmetric rule reaches the degree; tensor Gauss on quads/hexes; on prisms
 * (triangle x [-1,1]) the best triangle rule times Gauss on the line. FE_QUAD_GAUSS always
 * takes collapsed Gauss-Jacobi on simplices; FE_QUAD_GLL takes tensor GLL on quads/hexes
 * and GLL on the prism's line. Every rule records its true degree and its family's name. */
#include "engine/fem/quadrature.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"

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


/* GLL nodes (ascending, exactly symmetric) and weights with n >= 2 points on [-1,1]. */
static void gauss_lobatto(int n, double *s, double *w)
{
  const int m = n - 1; /* interior nodes: roots of P_m', between consecutive roots of P_m */
  double g[MAX_LINE_POINTS], gw[MAX_LINE_POINTS], dp;
  gauss_jacobi(m, 0, g, gw);
  s[0] = -1, s[n - 1] = 1;
  for (int i = 1; i < n - 1; i++) {
    double lo = g[i - 1], hi = g[i];
    jacobi_eval(m, 0, lo, &dp);
    const int sign_lo = dp > 0;
    for (;;) { /* bisection on the sign of P_m' down to the last bit */
      double mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      jacobi_eval(m, 0, mid, &dp);
      if ((dp > 0) == sign_lo)
        lo = mid;
      else
        hi = mid;
    }
    s[i] = 0.5 * (lo + hi);
  }
  for (int i = 0; i < n / 2; i++) { /* symmetric to the bit: average the two halves */
    double x = 0.5 * (s[n - 1 - i] - s[i]);
    s[i] = -x, s[n - 1 - i] = x;
  }
  if (n % 2) s[n / 2] = 0;
  for (int i = 0; i < n; i++) { /* w_i = 2 / (n (n - 1) P_m(s_i)^2) */
    double p = jacobi_eval(m, 0, fabs(s[i]), &dp);
    w[i] = 2.0 / ((double)n * m * p * p);
  }
}

/* ---- symmetric simplex rules ---------------------------------------------------------- */

/* Orbits of points under the vertex permutations, by their barycentric pattern. */
typedef enum {
  ORBIT_CENTROID, /* (1/(d+1), ...): 1 point */
  ORBIT_S21,      /* triangle (a, a, 1-2a): 3 points */
  ORBIT_S111,     /* triangle (a, b, 1-a-b): 6 points */
  ORBIT_S31,      /* tet (a, a, a, 1-3a): 4 points */
  ORBIT_S22,      /* tet (a, a, 1/2-a, 1/2-a): 6 points */
  ORBIT_S211      /* tet (a, a, b, 1-2a-b): 12 points */
} orbit_kind;

typedef struct {
  orbit_kind kind;
  double weight; /* of each point, as a fraction of the cell's measure */
  double a, b;   /* the pattern's parameters (b: S111 and S211 only) */
} orbit;

typedef struct {
  int degree;  /* true degree */
  int norbits;
  const orbit *orbits;
} symmetric_rule;

/* Triangle rules (orbits found by Newton on the moment equations, see the top). */
static const orbit tri_deg2[] = {{ORBIT_S21, 1.0 / 3.0, 1.0 / 6.0, 0}};
static const orbit tri_deg4[] = {
    {ORBIT_S21, 0.22338158967801147, 0.44594849091596489, 0},
    {ORBIT_S21, 0.10995174365532187, 0.091576213509770743, 0}};
static const orbit tri_deg5[] = {
    {ORBIT_CENTROID, 0.225, 0, 0},
    {ORBIT_S21, 0.13239415278850618, 0.47014206410511509, 0},
    {ORBIT_S21, 0.12593918054482715, 0.10128650732345634, 0}};
static const orbit tri_deg6[] = {
    {ORBIT_S21, 0.11678627572637937, 0.24928674517091042, 0},
    {ORBIT_S21, 0.050844906370206817, 0.063089014491502228, 0},
    {ORBIT_S111, 0.082851075618373575, 0.053145049844816947, 0.63650249912139865}};
static const orbit tri_deg7[] = {
    {ORBIT_S21, 0.022783402290201729, 0.43316641930911295, 0},
    {ORBIT_S21, 0.11961331853179054, 0.23905077262395770, 0},
    {ORBIT_S21, 0.052396107479084343, 0.064548130674940899, 0},
    {ORBIT_S111, 0.069270252516128359, 0.31097434520496592, 0.64487373266521088}};
static const orbit tri_deg8[] = {
    {ORBIT_CENTROID, 0.14431560767778717, 0, 0},
    {ORBIT_S21, 0.032458497623198080, 0.050547228317030975, 0},
    {ORBIT_S21, 0.10321737053471825, 0.17056930775176021, 0},
    {ORBIT_S21, 0.095091634267284625, 0.45929258829272316, 0},
    {ORBIT_S111, 0.027230314174434994, 0.0083947774099576053, 0.26311282963463811}};
#define RULE(orbits, degree) {degree, (int)(sizeof orbits / sizeof orbits[0]), orbits}
static const symmetric_rule tri_rules[] = {RULE(tri_deg2, 2), RULE(tri_deg4, 4),
                                           RULE(tri_deg5, 5), RULE(tri_deg6, 6),
                                           RULE(tri_deg7, 7), RULE(tri_deg8, 8)};

/* Tetrahedron rules. The 8-point rule of degree 3 is one of a family; the one chosen also
 * integrates l_i^4 exactly, which fixes it. */
static const orbit tet_deg2[] = {{ORBIT_S31, 0.25, 0.13819660112501052, 0}};
static const orbit tet_deg3[] = {
    {ORBIT_S31, 0.11147203348813786, 0.10695227393293068, 0},
    {ORBIT_S31, 0.13852796651186214, 0.32805469671142665, 0}};
static const orbit tet_deg5[] = {
    {ORBIT_S31, 0.11268792571801585, 0.31088591926330061, 0},
    {ORBIT_S31, 0.073493043116361950, 0.092735250310891226, 0},
    {ORBIT_S22, 0.042546020777081466, 0.045503704125649649, 0}};
static const orbit tet_deg6[] = {
    {ORBIT_S31, 0.010077211055320643, 0.040673958534611353, 0},
    {ORBIT_S31, 0.055357181543654722, 0.32233789014227551, 0},
    {ORBIT_S31, 0.039922750258167492, 0.21460287125915203, 0},
    {ORBIT_S211, 0.048214285714285714, 0.063661001875017525, 0.26967233145831581}};
static const symmetric_rule tet_rules[] = {RULE(tet_deg2, 2), RULE(tet_deg3, 3),
                                           RULE(tet_deg5, 5), RULE(tet_deg6, 6)};
#undef RULE

/* The orbit's generating point in barycentric coordinates (dim + 1 of them). */
static void orbit_base(const orbit *o, int dim, double *l)
{
  double a = o->a, b = o->b;
  switch (o->kind) {
  case ORBIT_CENTROID:
    for (int i = 0; i <= dim; i++) l[i] = 1.0 / (dim + 1);
    return;
  case ORBIT_S21: l[0] = a, l[1] = a, l[2] = 1 - 2 * a; return;
  case ORBIT_S111: l[0] = a, l[1] = b, l[2] = 1 - a - b; return;
  case ORBIT_S31: l[0] = a, l[1] = a, l[2] = a, l[3] = 1 - 3 * a; return;
  case ORBIT_S22: l[0] = a, l[1] = a, l[2] = 0.5 - a, l[3] = 0.5 - a; return;
  case ORBIT_S211: l[0] = a, l[1] = a, l[2] = b, l[3] = 1 - 2 * a - b; return;
  }
}

/* The distinct permutations of l (dim + 1 entries), appended as points x_j = l_{j+1};
 * returns how many. Repeated entries are the same double, so duplicates compare equal. */
static int orbit_expand(const double *l, int dim, double *points)
{
  const int m = dim + 1;
  int count = 0, total = 1;
  for (int i = 0; i < m; i++) total *= m;
  for (int code = 0; code < total; code++) { /* every map {0..m-1} -> {0..m-1}, keep bijections */
    int idx[4], used = 0, c = code;
    for (int i = 0; i < m; i++, c /= m) idx[i] = c % m, used |= 1 << idx[i];
    if (used != (1 << m) - 1) continue;
    double x[3];
    for (int j = 0; j < dim; j++) x[j] = l[idx[j + 1]];
    int seen = 0;
    for (int p = 0; p < count && !seen; p++)
      seen = memcmp(points + p * dim, x, sizeof(double) * dim) == 0;
    if (!seen) memcpy(points + count++ * dim, x, sizeof(double) * dim);
  }
  return count;
}

static const int orbit_size[] = {[ORBIT_CENTROID] = 1, [ORBIT_S21] = 3, [ORBIT_S111] = 6,
                                 [ORBIT_S31] = 4,      [ORBIT_S22] = 6, [ORBIT_S211] = 12};

static int symmetric_npoints(const symmetric_rule *r)
{
  int n = 0;
  for (int o = 0; o < r->norbits; o++) n += orbit_size[r->orbits[o].kind];
  return n;
}

/* The symmetric rule with the fewest points exact to `degree`, or NULL. */
static const symmetric_rule *symmetric_find(int dim, int degree)
{
  const symmetric_rule *rules = dim == 2 ? tri_rules : tet_rules, *best = NULL;
  int count = dim == 2 ? (int)(sizeof tri_rules / sizeof tri_rules[0])
                       : (int)(sizeof tet_rules / sizeof tet_rules[0]);
  for (int r = 0; r < count; r++)
    if (rules[r].degree >= degree &&
        (!best || symmetric_npoints(&rules[r]) < symmetric_npoints(best)))
      best = &rules[r];
  return best;
}

/* ---- building rules ------------------------------------------------------------------- */

/* Allocate a rule's arrays and set its header. */
static int rule_alloc(fe_quadrature *q, fe_cell_type cell, int dim, int npoints, int degree,
                      const char *name)
{
  q->cell = cell;
  q->dim = dim;
  q->npoints = npoints;
  q->degree = degree;
  q->name = name;
  FE_MALLOC(q->points, (size_t)npoints * dim, "quadrature points");
  FE_MALLOC(q->weights, npoints, "quadrature weights");
  return 0;
}

/* Points per direction for exactness to `degree`: n Gauss points reach 2n - 1, n GLL
 * points 2n - 3 (and at least 2 of them). */
static int points_for_degree(int degree, int gll, int *n)
{
  const int top = 2 * MAX_LINE_POINTS - (gll ? 3 : 1);
  FE_ASSERT(degree >= 0, FE_ERR_ARG, "quadrature: degree %d must be 0 or more", degree);
  FE_ASSERT(degree <= top, FE_ERR_ARG,
            "quadrature: degree %d is above the highest supported (%d)", degree, top);
  *n = gll ? (degree + 4) / 2 : (degree + 2) / 2;
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
  FE_CHECK(rule_alloc(q, FE_CELL_QUAD, 1, n, 2 * n - 1, "Gauss"));
  gauss_jacobi(n, 0, q->points, q->weights);
  return 0;
}

/* Gauss-Lobatto-Legendre with n >= 2 points on [-1,1]. */
int fe_quadrature_gll(int n, fe_quadrature *q)
{
  FE_ASSERT(q, FE_ERR_ARG, "quadrature: no rule to fill");
  memset(q, 0, sizeof *q);
  FE_ASSERT(n >= 2 && n <= MAX_LINE_POINTS, FE_ERR_ARG,
            "quadrature: %d GLL points: the number must lie in 2..%d", n, MAX_LINE_POINTS);
  FE_CHECK(rule_alloc(q, FE_CELL_QUAD, 1, n, 2 * n - 3, "GLL"));
  gauss_lobatto(n, q->points, q->weights);
  return 0;
}

/* The n GLL nodes, ascending and exactly symmetric. */
double fe_lagrange(const double *x, int n, int i, double t)
{
  double v = 1;
  for (int m = 0; m < n; m++)
    if (m != i) v *= (t - x[m]) / (x[i] - x[m]);
  return v;
}

double fe_lagrange_deriv(const double *x, int n, int i, double t)
{
  double s = 0;
  for (int m = 0; m < n; m++) {
    if (m == i) continue;
    double v = 1 / (x[i] - x[m]);
    for (int l = 0; l < n; l++)
      if (l != i && l != m) v *= (t - x[l]) / (x[i] - x[l]);
    s += v;
  }
  return s;
}

int fe_gll_nodes(int n, double *x)
{
  FE_ASSERT(x, FE_ERR_ARG, "quadrature: no array for the GLL nodes");
  FE_ASSERT(n >= 2 && n <= MAX_LINE_POINTS, FE_ERR_ARG,
            "quadrature: %d GLL nodes: the number must lie in 2..%d", n, MAX_LINE_POINTS);
  double w[MAX_LINE_POINTS];
  gauss_lobatto(n, x, w);
  return 0;
}

/* Tensor rule from the line rule (s, w) of n points on [-1,1]^dim, x fastest. */
static int rule_tensor(fe_quadrature *q, fe_cell_type cell, int dim, int n, const double *s,
                       const double *w, int degree, const char *name)
{
  int npoints = dim == 2 ? n * n : n * n * n;
  FE_CHECK(rule_alloc(q, cell, dim, npoints, degree, name));
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
static int rule_collapsed(fe_quadrature *q, fe_cell_type cell, int dim, int n)
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
  FE_CHECK(rule_alloc(q, cell, dim, npoints, 2 * n - 1, "collapsed Gauss-Jacobi"));
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
  FE_CHECK(rule_alloc(q, cell, dim, 1, 1, "centroid"));
  for (int d = 0; d < dim; d++) q->points[d] = 1.0 / (dim + 1);
  q->weights[0] = fe_reference_measure(cell);
  return 0;
}

/* A tabulated symmetric rule, orbit by orbit. */
static int rule_symmetric(fe_quadrature *q, fe_cell_type cell, int dim, const symmetric_rule *r)
{
  const double measure = fe_reference_measure(cell);
  FE_CHECK(rule_alloc(q, cell, dim, symmetric_npoints(r), r->degree, "symmetric"));
  int p = 0;
  for (int o = 0; o < r->norbits; o++) {
    double l[4];
    orbit_base(&r->orbits[o], dim, l);
    int added = orbit_expand(l, dim, q->points + p * dim);
    FE_ASSERT(added == orbit_size[r->orbits[o].kind], FE_ERR_INTERNAL,
              "quadrature: a %s orbit has %d points, not %d", fe_cell_name(cell), added,
              orbit_size[r->orbits[o].kind]);
    for (int i = 0; i < added; i++) q->weights[p + i] = r->orbits[o].weight * measure;
    p += added;
  }
  return 0;
}

/* The simplex rule of the family: AUTO picks the centroid, a symmetric rule that costs no
 * more than the collapsed one, or the collapsed one. */
static int rule_simplex(fe_quadrature *q, fe_cell_type cell, int degree, fe_quad_kind kind)
{
  const int dim = fe_cell_dim(cell);
  int n = 0;
  FE_CHECK(points_for_degree(degree, 0, &n));
  if (kind == FE_QUAD_AUTO) {
    if (degree <= 1) return rule_centroid(q, cell, dim);
    const symmetric_rule *r = symmetric_find(dim, degree);
    int collapsed = dim == 2 ? n * n : n * n * n;
    if (r && symmetric_npoints(r) <= collapsed) return rule_symmetric(q, cell, dim, r);
  }
  return rule_collapsed(q, cell, dim, n);
}

/* The prism's name: the triangle rule's, then the line's. */
static const char *prism_name(const char *tri, int gll)
{
  if (!strcmp(tri, "centroid")) return gll ? "centroid x GLL" : "centroid x Gauss";
  if (!strcmp(tri, "symmetric")) return gll ? "symmetric x GLL" : "symmetric x Gauss";
  return gll ? "collapsed Gauss-Jacobi x GLL" : "collapsed Gauss-Jacobi x Gauss";
}

/* Prism (triangle x [-1,1]): the triangle rule for `degree` times the line rule. */
static int rule_prism(fe_quadrature *q, int degree, fe_quad_kind kind)
{
  const int gll = kind == FE_QUAD_GLL;
  int n = 0;
  FE_CHECK(points_for_degree(degree, gll, &n));
  double s[MAX_LINE_POINTS], w[MAX_LINE_POINTS];
  if (gll)
    gauss_lobatto(n, s, w);
  else
    gauss_jacobi(n, 0, s, w);
  const int line_degree = gll ? 2 * n - 3 : 2 * n - 1;
  fe_quadrature tri;
  memset(&tri, 0, sizeof tri);
  FE_CHECK(rule_simplex(&tri, FE_CELL_TRI, degree, gll ? FE_QUAD_AUTO : kind));
  int achieved = tri.degree < line_degree ? tri.degree : line_degree;
  int rc = rule_alloc(q, FE_CELL_PRISM, 3, tri.npoints * n, achieved, prism_name(tri.name, gll));
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

/* Tensor Gauss or GLL rule on a quad or hex. */
static int rule_box(fe_quadrature *q, fe_cell_type cell, int degree, fe_quad_kind kind)
{
  const int gll = kind == FE_QUAD_GLL;
  int n = 0;
  FE_CHECK(points_for_degree(degree, gll, &n));
  double s[MAX_LINE_POINTS], w[MAX_LINE_POINTS];
  if (gll) {
    gauss_lobatto(n, s, w);
    return rule_tensor(q, cell, fe_cell_dim(cell), n, s, w, 2 * n - 3, "GLL");
  }
  gauss_jacobi(n, 0, s, w);
  return rule_tensor(q, cell, fe_cell_dim(cell), n, s, w, 2 * n - 1, "Gauss");
}

/* Dispatch on the cell type; the caller frees a half-made rule on failure. */
static int rule_create(fe_cell_type cell, int degree, fe_quad_kind kind, fe_quadrature *q)
{
  FE_ASSERT(kind == FE_QUAD_AUTO || kind == FE_QUAD_GAUSS || kind == FE_QUAD_GLL, FE_ERR_ARG,
            "quadrature: unknown rule kind %d", (int)kind);
  switch (cell) {
  case FE_CELL_QUAD:
  case FE_CELL_HEX: return rule_box(q, cell, degree, kind);
  case FE_CELL_TRI:
  case FE_CELL_TET:
    FE_ASSERT(kind != FE_QUAD_GLL, FE_ERR_ARG,
              "quadrature: no GLL rule on %s cells (GLL serves quads, hexes and the line of "
              "prisms; use \"auto\" or \"gauss\")",
              fe_cell_name(cell));
    return rule_simplex(q, cell, degree, kind);
  case FE_CELL_PRISM: return rule_prism(q, degree, kind);
  }
  FE_ERROR(FE_ERR_ARG, "quadrature: unknown cell type %d", (int)cell);
}

/* A rule of family `kind` on the reference cell exact to `degree` (q->degree: what it
 * achieves). */
int fe_quadrature_create_kind(fe_cell_type cell, int degree, fe_quad_kind kind,
                              fe_quadrature *q)
{
  FE_ASSERT(q, FE_ERR_ARG, "quadrature: no rule to fill");
  memset(q, 0, sizeof *q);
  int rc = rule_create(cell, degree, kind, q);
  if (rc) {
    fe_quadrature_free(q);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

/* The rule with the fewest points exact to `degree`. */
int fe_quadrature_create(fe_cell_type cell, int degree, fe_quadrature *q)
{
  FE_CHECK(fe_quadrature_create_kind(cell, degree, FE_QUAD_AUTO, q));
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

/* The kind's name as the Lua option spells it. */
const char *fe_quad_kind_name(fe_quad_kind kind)
{
  switch (kind) {
  case FE_QUAD_AUTO: return "auto";
  case FE_QUAD_GAUSS: return "gauss";
  case FE_QUAD_GLL: return "gll";
  }
  return "?";
}
