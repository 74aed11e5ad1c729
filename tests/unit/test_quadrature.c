/* Quadrature rules: Gauss lines and the rules on every reference cell integrate monomials
 * exactly up to their degree, with positive weights summing to the reference measure. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine/error.h"
#include "engine/quadrature.h"

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
