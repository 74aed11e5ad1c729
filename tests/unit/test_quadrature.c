/* Quadrature rules: Gauss and GLL lines and the rules of every family on every reference cell
 * integrate monomials exactly up to their stated degree and no further, with positive
 * weights summing to the reference measure; symmetric simplex rules are symmetric and cheap. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/fem/quadrature.h"

/* n! as a double (exact for the small n used here). */
static double factorial(int n)
{
  double f = 1;
  for (int i = 2; i <= n; i++) f *= i;
  return f;
}

/* Integral of s^k over [-1,1]. */
static double line_monomial(int k) { return k % 2 ? 0.0 : 2.0 / (k + 1); }

/* Exact integral of x^a y^b z^c over the reference cell (c ignored in 2D). */
static double exact_monomial(fe_cell_type cell, int a, int b, int c)
{
  switch (cell) {
  case FE_CELL_TRI: return factorial(a) * factorial(b) / factorial(a + b + 2);
  case FE_CELL_TET: return factorial(a) * factorial(b) * factorial(c) / factorial(a + b + c + 3);
  case FE_CELL_QUAD: return line_monomial(a) * line_monomial(b);
  case FE_CELL_HEX: return line_monomial(a) * line_monomial(b) * line_monomial(c);
  case FE_CELL_PRISM: return factorial(a) * factorial(b) / factorial(a + b + 2) * line_monomial(c);
  }
  return NAN;
}

/* The rule applied to x^a y^b z^c. */
static double apply_rule(const fe_quadrature *q, int a, int b, int c)
{
  double sum = 0;
  for (int p = 0; p < q->npoints; p++) {
    const double *x = q->points + p * q->dim;
    double f = pow(x[0], a) * pow(x[1], b);
    if (q->dim == 3) f *= pow(x[2], c);
    sum += q->weights[p] * f;
  }
  return sum;
}

/* Check every monomial of total degree <= degree; tolerance relative to the cell measure
 * (monomials that integrate to zero on [-1,1]^d have no scale of their own). */
static void check_exact(const fe_quadrature *q, int degree)
{
  const double measure = fe_reference_measure(q->cell);
  const int cmax = q->dim == 3 ? degree : 0;
  for (int a = 0; a <= degree; a++)
    for (int b = 0; a + b <= degree; b++)
      for (int c = 0; a + b + c <= degree && c <= cmax; c++) {
        double exact = exact_monomial(q->cell, a, b, c), got = apply_rule(q, a, b, c);
        double tol = 1e-13 * (fabs(exact) > 0 ? fabs(exact) : measure);
        cr_assert(fabs(got - exact) <= tol,
                  "%s rule of degree %d: x^%d y^%d z^%d gives %.17g, exact %.17g",
                  fe_cell_name(q->cell), q->degree, a, b, c, got, exact);
      }
}

Test(quadrature, gauss_line_exact_to_degree_2n_minus_1)
{
  for (int n = 1; n <= 30; n++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_line(n, &q), 0, "%s", fe_error_message());
    cr_assert_eq(q.npoints, n);
    cr_assert_eq(q.dim, 1);
    cr_assert_eq(q.degree, 2 * n - 1);
    for (int k = 0; k <= 2 * n - 1; k++) {
      double got = 0;
      for (int p = 0; p < n; p++) got += q.weights[p] * pow(q.points[p], k);
      double exact = line_monomial(k);
      cr_assert(fabs(got - exact) <= 1e-14 * (exact > 0 ? exact : 1.0),
                "n = %d: s^%d gives %.17g, exact %.17g", n, k, got, exact);
    }
    fe_quadrature_free(&q);
  }
}

Test(quadrature, gauss_line_not_exact_to_degree_2n)
{
  /* The Gauss error on s^(2n) decays like 4^-n; up to n = 15 it is far above rounding. */
  for (int n = 1; n <= 15; n++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_line(n, &q), 0);
    double got = 0;
    for (int p = 0; p < n; p++) got += q.weights[p] * pow(q.points[p], 2 * n);
    double exact = line_monomial(2 * n);
    cr_assert(fabs(got - exact) > 1e-10 * exact, "n = %d integrates s^%d exactly", n, 2 * n);
    fe_quadrature_free(&q);
  }
}

Test(quadrature, gauss_line_points_sorted_symmetric_inside)
{
  for (int n = 1; n <= 30; n++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_line(n, &q), 0);
    for (int p = 0; p < n; p++) {
      cr_assert(q.points[p] > -1 && q.points[p] < 1);
      if (p) cr_assert(q.points[p] > q.points[p - 1], "n = %d: points not ascending", n);
      cr_assert(fabs(q.points[p] + q.points[n - 1 - p]) < 1e-15, "n = %d: not symmetric", n);
      cr_assert(fabs(q.weights[p] - q.weights[n - 1 - p]) < 1e-14, "n = %d: weights", n);
    }
    fe_quadrature_free(&q);
  }
}

Test(quadrature, cell_rules_exact_to_degree)
{
  const fe_cell_type cells[] = {FE_CELL_TRI, FE_CELL_QUAD, FE_CELL_TET, FE_CELL_HEX,
                                FE_CELL_PRISM};
  for (int i = 0; i < 5; i++)
    for (int degree = 0; degree <= 10; degree++) {
      fe_quadrature q;
      cr_assert_eq(fe_quadrature_create(cells[i], degree, &q), 0, "%s", fe_error_message());
      cr_assert_eq(q.cell, cells[i]);
      cr_assert_eq(q.dim, fe_cell_dim(cells[i]));
      cr_assert_geq(q.degree, degree, "%s: asked %d, got %d", fe_cell_name(cells[i]), degree,
                    q.degree);
      check_exact(&q, q.degree); /* exact to what it claims, which covers what was asked */
      fe_quadrature_free(&q);
    }
}

Test(quadrature, weights_positive_and_sum_to_measure)
{
  const fe_cell_type cells[] = {FE_CELL_TRI, FE_CELL_QUAD, FE_CELL_TET, FE_CELL_HEX,
                                FE_CELL_PRISM};
  for (int i = 0; i < 5; i++)
    for (int degree = 0; degree <= 14; degree++) {
      fe_quadrature q;
      cr_assert_eq(fe_quadrature_create(cells[i], degree, &q), 0);
      double sum = 0;
      for (int p = 0; p < q.npoints; p++) {
        cr_assert_gt(q.weights[p], 0, "%s degree %d: weight %d = %g", fe_cell_name(cells[i]),
                     degree, p, q.weights[p]);
        sum += q.weights[p];
      }
      double measure = fe_reference_measure(cells[i]);
      cr_assert(fabs(sum - measure) < 1e-14 * measure, "%s degree %d: sum %.17g",
                fe_cell_name(cells[i]), degree, sum);
      fe_quadrature_free(&q);
    }
}

Test(quadrature, simplex_points_inside_reference_cell)
{
  for (int degree = 0; degree <= 12; degree++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_create(FE_CELL_TET, degree, &q), 0);
    for (int p = 0; p < q.npoints; p++) {
      const double *x = q.points + 3 * p;
      cr_assert(x[0] > 0 && x[1] > 0 && x[2] > 0 && x[0] + x[1] + x[2] < 1);
    }
    fe_quadrature_free(&q);
  }
}

Test(quadrature, low_degree_simplex_is_centroid_rule)
{
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create(FE_CELL_TET, 1, &q), 0);
  cr_assert_eq(q.npoints, 1);
  cr_assert_float_eq(q.points[0], 0.25, 1e-16);
  cr_assert_float_eq(q.weights[0], 1.0 / 6.0, 1e-16);
  fe_quadrature_free(&q);
  cr_assert_eq(fe_quadrature_create(FE_CELL_TRI, 0, &q), 0);
  cr_assert_eq(q.npoints, 1);
  cr_assert_float_eq(q.points[1], 1.0 / 3.0, 1e-16);
  fe_quadrature_free(&q);
}

Test(quadrature, negative_degree_is_an_error)
{
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create(FE_CELL_HEX, -1, &q), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "degree -1"), "%s", fe_error_message());
  cr_assert_null(q.points);
  fe_quadrature_free(&q); /* still safe */
  cr_assert_eq(fe_quadrature_line(0, &q), FE_ERR_ARG);
}

Test(quadrature, reference_measures)
{
  cr_assert_float_eq(fe_reference_measure(FE_CELL_TET), 1.0 / 6.0, 1e-16);
  cr_assert_float_eq(fe_reference_measure(FE_CELL_TRI), 0.5, 1e-16);
  cr_assert_float_eq(fe_reference_measure(FE_CELL_HEX), 8.0, 1e-16);
  cr_assert_float_eq(fe_reference_measure(FE_CELL_QUAD), 4.0, 1e-16);
  cr_assert_float_eq(fe_reference_measure(FE_CELL_PRISM), 1.0, 1e-16);
}

/* ---- every family, true degrees ------------------------------------------------------- */

static const fe_cell_type all_cells[] = {FE_CELL_TRI, FE_CELL_QUAD, FE_CELL_TET, FE_CELL_HEX,
                                         FE_CELL_PRISM};
static const fe_quad_kind all_kinds[] = {FE_QUAD_AUTO, FE_QUAD_GAUSS, FE_QUAD_GLL};

static int is_simplex(fe_cell_type cell) { return cell == FE_CELL_TRI || cell == FE_CELL_TET; }

/* n! in long double (exact for the n used here). */
static long double factorial_l(int n)
{
  long double f = 1;
  for (int i = 2; i <= n; i++) f *= i;
  return f;
}

/* Integral of |s|^k over [-1,1]. */
static long double line_abs(int k) { return 2.0L / (k + 1); }

/* Exact integrals of x^a y^b z^c and of its absolute value over the reference cell. The
 * simplex integral is a! b! c! / (a + b + c + d)! on the d-simplex. */
static void exact_and_abs(fe_cell_type cell, int a, int b, int c, long double *exact,
                          long double *absolute)
{
  switch (cell) {
  case FE_CELL_TRI:
    *exact = *absolute = factorial_l(a) * factorial_l(b) / factorial_l(a + b + 2);
    return;
  case FE_CELL_TET:
    *exact = *absolute =
        factorial_l(a) * factorial_l(b) * factorial_l(c) / factorial_l(a + b + c + 3);
    return;
  case FE_CELL_QUAD:
    *absolute = line_abs(a) * line_abs(b);
    *exact = a % 2 || b % 2 ? 0 : *absolute;
    return;
  case FE_CELL_HEX:
    *absolute = line_abs(a) * line_abs(b) * line_abs(c);
    *exact = a % 2 || b % 2 || c % 2 ? 0 : *absolute;
    return;
  case FE_CELL_PRISM:
    *absolute = factorial_l(a) * factorial_l(b) / factorial_l(a + b + 2) * line_abs(c);
    *exact = c % 2 ? 0 : *absolute;
    return;
  }
}

/* Whether x^a y^b z^c lies in the space a rule of degree d must integrate: total degree on
 * simplices, degree per direction on quads/hexes, (x, y) total and z apart on prisms. */
static int in_space(fe_cell_type cell, int d, int a, int b, int c)
{
  switch (cell) {
  case FE_CELL_TRI:
  case FE_CELL_TET: return a + b + c <= d;
  case FE_CELL_QUAD:
  case FE_CELL_HEX: return a <= d && b <= d && c <= d;
  case FE_CELL_PRISM: return a + b <= d && c <= d;
  }
  return 0;
}

/* The rule's error on x^a y^b z^c relative to the integral of |x^a y^b z^c|, in long double. */
/* The powers x_j^e of every point's coordinates, e = 0..emax, in long double:
 * pw[(p * dim + j) * (emax + 1) + e] (the monomials' sums multiply them, no powl per term). */
static long double *point_powers(const fe_quadrature *q, int emax)
{
  long double *pw = malloc(sizeof(long double) * (size_t)q->npoints * q->dim * (emax + 1));
  cr_assert_not_null(pw);
  for (int p = 0; p < q->npoints; p++)
    for (int j = 0; j < q->dim; j++) {
      long double *row = pw + ((size_t)p * q->dim + j) * (emax + 1), x = q->points[p * q->dim + j];
      row[0] = 1;
      for (int e = 1; e <= emax; e++) row[e] = row[e - 1] * x;
    }
  return pw;
}

static double relative_error(const fe_quadrature *q, const long double *pw, int emax, int a, int b,
                             int c)
{
  long double sum = 0, exact = 0, absolute = 1;
  for (int p = 0; p < q->npoints; p++) {
    const long double *x = pw + (size_t)p * q->dim * (emax + 1);
    long double f = x[a] * x[emax + 1 + b];
    if (q->dim == 3) f *= x[2 * (emax + 1) + c];
    sum += (long double)q->weights[p] * f;
  }
  exact_and_abs(q->cell, a, b, c, &exact, &absolute);
  return (double)(fabsl(sum - exact) / absolute);
}

/* Exact for every monomial of the degree-q->degree space, and not for some monomial of the
 * next space: q->degree is the true degree. */
static void check_true_degree(const fe_quadrature *q, const char *kind)
{
  const int d = q->degree, cmax = q->dim == 3 ? d + 1 : 0;
  long double *pw = point_powers(q, d + 1);
  double worst_next = 0;
  for (int a = 0; a <= d + 1; a++)
    for (int b = 0; b <= d + 1; b++)
      for (int c = 0; c <= cmax; c++) {
        if (!in_space(q->cell, d + 1, a, b, c)) continue;
        double err = relative_error(q, pw, d + 1, a, b, c);
        if (in_space(q->cell, d, a, b, c))
          cr_assert(err <= 1e-13, "%s %s rule (%s, degree %d, %d points): x^%d y^%d z^%d has "
                    "relative error %.3g", kind, fe_cell_name(q->cell), q->name, d, q->npoints,
                    a, b, c, err);
        else if (err > worst_next)
          worst_next = err;
      }
  free(pw);
  cr_assert(worst_next > 1e-10, "%s %s rule (%s, %d points) is exact beyond its degree %d",
            kind, fe_cell_name(q->cell), q->name, q->npoints, d);
}

Test(quadrature, every_kind_on_every_cell_has_its_true_degree)
{
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 3; k++) {
      if (is_simplex(all_cells[i]) && all_kinds[k] == FE_QUAD_GLL) continue;
      int top = all_cells[i] == FE_CELL_QUAD || all_cells[i] == FE_CELL_HEX ? 19 : 12;
      for (int degree = 0; degree <= top; degree++) {
        fe_quadrature q;
        const char *kind = fe_quad_kind_name(all_kinds[k]);
        cr_assert_eq(fe_quadrature_create_kind(all_cells[i], degree, all_kinds[k], &q), 0,
                     "%s", fe_error_message());
        cr_assert_eq(q.cell, all_cells[i]);
        cr_assert_eq(q.dim, fe_cell_dim(all_cells[i]));
        cr_assert_not_null(q.name);
        cr_assert_geq(q.degree, degree, "%s %s: asked %d, got %d", kind,
                      fe_cell_name(all_cells[i]), degree, q.degree);
        check_true_degree(&q, kind);
        for (int p = 0; p < q.npoints; p++) cr_assert_gt(q.weights[p], 0);
        fe_quadrature_free(&q);
      }
    }
}

Test(quadrature, create_is_create_kind_auto)
{
  for (int i = 0; i < 5; i++)
    for (int degree = 0; degree <= 12; degree++) {
      fe_quadrature a, b;
      cr_assert_eq(fe_quadrature_create(all_cells[i], degree, &a), 0);
      cr_assert_eq(fe_quadrature_create_kind(all_cells[i], degree, FE_QUAD_AUTO, &b), 0);
      cr_assert_eq(a.npoints, b.npoints);
      cr_assert_eq(a.degree, b.degree);
      cr_assert_str_eq(a.name, b.name);
      cr_assert_arr_eq(a.points, b.points, sizeof(double) * a.npoints * a.dim);
      cr_assert_arr_eq(a.weights, b.weights, sizeof(double) * a.npoints);
      fe_quadrature_free(&a);
      fe_quadrature_free(&b);
    }
}

/* ---- symmetric simplex rules ---------------------------------------------------------- */

/* Barycentric coordinates (l_0 = 1 - sum x, l_j = x_{j-1}). */
static void barycentric(const double *x, int dim, double *l)
{
  l[0] = 1;
  for (int j = 0; j < dim; j++) l[0] -= x[j], l[j + 1] = x[j];
}

/* Every relabelling of the vertices maps the point set onto itself with the same weights. */
static void check_invariant(const fe_quadrature *q)
{
  const int m = q->dim + 1;
  int total = 1;
  for (int i = 0; i < m; i++) total *= m;
  for (int code = 0; code < total; code++) {
    int perm[4], used = 0, c = code;
    for (int i = 0; i < m; i++, c /= m) perm[i] = c % m, used |= 1 << perm[i];
    if (used != (1 << m) - 1) continue; /* not a permutation */
    for (int p = 0; p < q->npoints; p++) {
      double l[4], image[3];
      barycentric(q->points + p * q->dim, q->dim, l);
      for (int j = 0; j < q->dim; j++) image[j] = l[perm[j + 1]];
      int found = 0;
      for (int r = 0; r < q->npoints && !found; r++) {
        const double *y = q->points + r * q->dim;
        double dist = 0;
        for (int j = 0; j < q->dim; j++) dist = fmax(dist, fabs(y[j] - image[j]));
        found = dist < 1e-14 && fabs(q->weights[r] - q->weights[p]) < 1e-15;
      }
      cr_assert(found, "%s rule of degree %d: point %d has no image under a relabelling",
                fe_cell_name(q->cell), q->degree, p);
    }
  }
}

Test(quadrature, symmetric_rules_positive_inside_and_invariant_under_relabelling)
{
  int seen = 0;
  for (int i = 0; i < 5; i++) {
    if (!is_simplex(all_cells[i])) continue;
    for (int degree = 0; degree <= 12; degree++) {
      fe_quadrature q;
      cr_assert_eq(fe_quadrature_create(all_cells[i], degree, &q), 0);
      if (strcmp(q.name, "symmetric") && strcmp(q.name, "centroid")) {
        fe_quadrature_free(&q);
        continue;
      }
      seen++;
      for (int p = 0; p < q.npoints; p++) {
        double l[4];
        barycentric(q.points + p * q.dim, q.dim, l);
        for (int j = 0; j <= q.dim; j++)
          cr_assert_gt(l[j], 0, "%s degree %d: point %d on or outside the cell",
                       fe_cell_name(q.cell), degree, p);
        cr_assert_gt(q.weights[p], 0);
      }
      check_invariant(&q);
      fe_quadrature_free(&q);
    }
  }
  cr_assert_geq(seen, 12, "only %d symmetric rules in use", seen);
}

Test(quadrature, auto_picks_symmetric_rule_with_fewer_points_than_collapsed)
{
  /* Points of the AUTO rule for degrees 0.. (triangle degree 3: the collapsed 4-point rule
   * beats the 6-point symmetric one; tet degree 3: a tie, and the symmetric rule wins). */
  const int tri_points[] = {1, 1, 3, 4, 6, 7, 12, 15, 16};
  const int tet_points[] = {1, 1, 4, 8, 14, 14, 24};
  for (int dim = 2; dim <= 3; dim++) {
    fe_cell_type cell = dim == 2 ? FE_CELL_TRI : FE_CELL_TET;
    const int *expect = dim == 2 ? tri_points : tet_points;
    int top = dim == 2 ? 8 : 6;
    for (int degree = 0; degree <= top; degree++) {
      fe_quadrature sym, collapsed;
      cr_assert_eq(fe_quadrature_create(cell, degree, &sym), 0);
      cr_assert_eq(fe_quadrature_create_kind(cell, degree, FE_QUAD_GAUSS, &collapsed), 0);
      cr_assert_str_eq(collapsed.name, "collapsed Gauss-Jacobi");
      cr_assert_eq(sym.npoints, expect[degree], "%s degree %d: %d points (%s), expected %d",
                   fe_cell_name(cell), degree, sym.npoints, sym.name, expect[degree]);
      cr_assert_leq(sym.npoints, collapsed.npoints);
      if (degree >= 2 && !(dim == 2 && degree == 3)) {
        cr_assert_str_eq(sym.name, "symmetric", "%s degree %d", fe_cell_name(cell), degree);
        if (!(dim == 3 && degree == 3))
          cr_assert_lt(sym.npoints, collapsed.npoints, "%s degree %d", fe_cell_name(cell),
                       degree);
      }
      fe_quadrature_free(&sym);
      fe_quadrature_free(&collapsed);
    }
  }
}

Test(quadrature, rule_names_say_which_family_ran)
{
  struct {
    fe_cell_type cell;
    int degree;
    fe_quad_kind kind;
    const char *name;
  } cases[] = {
      {FE_CELL_TET, 1, FE_QUAD_AUTO, "centroid"},
      {FE_CELL_TET, 4, FE_QUAD_AUTO, "symmetric"},
      {FE_CELL_TET, 9, FE_QUAD_AUTO, "collapsed Gauss-Jacobi"},
      {FE_CELL_TRI, 4, FE_QUAD_GAUSS, "collapsed Gauss-Jacobi"},
      {FE_CELL_QUAD, 3, FE_QUAD_AUTO, "Gauss"},
      {FE_CELL_HEX, 3, FE_QUAD_GAUSS, "Gauss"},
      {FE_CELL_HEX, 3, FE_QUAD_GLL, "GLL"},
      {FE_CELL_PRISM, 4, FE_QUAD_AUTO, "symmetric x Gauss"},
      {FE_CELL_PRISM, 4, FE_QUAD_GAUSS, "collapsed Gauss-Jacobi x Gauss"},
      {FE_CELL_PRISM, 4, FE_QUAD_GLL, "symmetric x GLL"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_create_kind(cases[i].cell, cases[i].degree, cases[i].kind, &q), 0);
    cr_assert_str_eq(q.name, cases[i].name, "%s degree %d %s", fe_cell_name(cases[i].cell),
                     cases[i].degree, fe_quad_kind_name(cases[i].kind));
    fe_quadrature_free(&q);
  }
  cr_assert_str_eq(fe_quad_kind_name(FE_QUAD_GLL), "gll");
}

/* ---- Gauss-Lobatto-Legendre ----------------------------------------------------------- */

Test(quadrature, gll_line_exact_to_degree_2n_minus_3_only)
{
  for (int n = 2; n <= 30; n++) {
    fe_quadrature q;
    cr_assert_eq(fe_quadrature_gll(n, &q), 0, "%s", fe_error_message());
    cr_assert_eq(q.npoints, n);
    cr_assert_eq(q.dim, 1);
    cr_assert_eq(q.degree, 2 * n - 3);
    cr_assert_str_eq(q.name, "GLL");
    for (int k = 0; k <= 2 * n - 2; k++) {
      long double got = 0;
      for (int p = 0; p < n; p++) got += (long double)q.weights[p] * powl(q.points[p], k);
      double err = (double)fabsl(got - line_abs(k) * (k % 2 == 0));
      if (k <= 2 * n - 3)
        cr_assert(err <= 1e-14, "n = %d: s^%d has error %.3g", n, k, err);
      else if (n <= 15)
        cr_assert(err > 1e-10, "n = %d integrates s^%d exactly", n, k);
    }
    fe_quadrature_free(&q);
  }
}

Test(quadrature, gll_nodes_ascending_symmetric_with_endpoints)
{
  for (int n = 2; n <= 64; n++) {
    double x[64];
    fe_quadrature q;
    cr_assert_eq(fe_gll_nodes(n, x), 0, "%s", fe_error_message());
    cr_assert_eq(fe_quadrature_gll(n, &q), 0);
    cr_assert(x[0] == -1 && x[n - 1] == 1, "n = %d: endpoints %.17g %.17g", n, x[0], x[n - 1]);
    for (int i = 0; i < n; i++) {
      cr_assert(x[n - 1 - i] == -x[i], "n = %d: x[%d] = %.17g not mirrored", n, i, x[i]);
      if (i) cr_assert(x[i] > x[i - 1], "n = %d: nodes not ascending", n);
      cr_assert(x[i] == q.points[i], "n = %d: nodes differ from the rule's points", n);
      cr_assert(q.weights[i] == q.weights[n - 1 - i], "n = %d: weights not mirrored", n);
    }
    fe_quadrature_free(&q);
  }
}

Test(quadrature, gll_nodes_match_closed_forms)
{
  /* Interior nodes: roots of P'_{n-1}; closed forms for n <= 6 points. */
  double x[6];
  cr_assert_eq(fe_gll_nodes(3, x), 0);
  cr_assert(x[1] == 0);
  cr_assert_eq(fe_gll_nodes(4, x), 0);
  cr_assert_float_eq(x[2], sqrt(1.0 / 5.0), 2e-16);
  cr_assert_eq(fe_gll_nodes(5, x), 0);
  cr_assert_float_eq(x[3], sqrt(3.0 / 7.0), 2e-16);
  cr_assert(x[2] == 0);
  cr_assert_eq(fe_gll_nodes(6, x), 0);
  cr_assert_float_eq(x[3], sqrt(1.0 / 3.0 - 2.0 * sqrt(7.0) / 21.0), 2e-16);
  cr_assert_float_eq(x[4], sqrt(1.0 / 3.0 + 2.0 * sqrt(7.0) / 21.0), 2e-16);
}

Test(quadrature, gll_nodes_are_roots_of_legendre_derivative)
{
  /* P'_m by the recurrence in long double: its roots are the interior nodes to ~1e-15. */
  for (int n = 3; n <= 12; n++) {
    double x[12];
    cr_assert_eq(fe_gll_nodes(n, x), 0);
    const int m = n - 1;
    for (int i = 1; i < n - 1; i++) {
      long double s = x[i], p0 = 1, p1 = s, d0 = 0, d1 = 1;
      for (int k = 2; k <= m; k++) { /* k P_k = (2k-1) s P_{k-1} - (k-1) P_{k-2} */
        long double p2 = ((2 * k - 1) * s * p1 - (k - 1) * p0) / k;
        long double d2 = d0 + (2 * k - 1) * p1; /* P_k' = P_{k-2}' + (2k-1) P_{k-1} */
        p0 = p1, p1 = p2, d0 = d1, d1 = d2;
      }
      /* |P_m''| is O(m^2), so a residual below 1e-15 m^2 pins the root to ~1e-15 */
      long double second = (2 * s * d1 - (long double)m * (m + 1) * p1) / (1 - s * s);
      double dist = (double)fabsl(d1 / second);
      cr_assert(dist < 1e-15, "n = %d: node %d is %.3g from a root of P'_%d", n, i, dist, m);
    }
  }
}

Test(quadrature, gll_point_counts_errors_and_simplex_refusal)
{
  fe_quadrature q;
  double x[2];
  cr_assert_eq(fe_quadrature_gll(1, &q), FE_ERR_ARG);
  cr_assert_eq(fe_gll_nodes(1, x), FE_ERR_ARG);
  cr_assert_eq(fe_quadrature_create_kind(FE_CELL_TET, 3, FE_QUAD_GLL, &q), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "tet"), "%s", fe_error_message());
  cr_assert_null(q.points);
  cr_assert_eq(fe_quadrature_create_kind(FE_CELL_TRI, 3, FE_QUAD_GLL, &q), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "tri"), "%s", fe_error_message());
  /* fewest GLL points per direction: n with 2n - 3 >= degree, at least 2 */
  const int expect[] = {2, 2, 3, 3, 4, 4, 5};
  for (int degree = 0; degree <= 6; degree++) {
    cr_assert_eq(fe_quadrature_create_kind(FE_CELL_HEX, degree, FE_QUAD_GLL, &q), 0);
    cr_assert_eq(q.npoints, expect[degree] * expect[degree] * expect[degree]);
    fe_quadrature_free(&q);
  }
}
