/* Expression graphs (engine/physics/expr.c): every derivative rule against central finite
 * differences at random points, simplification, sharing, and flop counts against hand
 * counts; traced physics (engine/physics/physics-traced.c): blocks g0..g3 against differences of
 * f0 and f1, and the action df against g w. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/mesh/mesh.h"
#include "engine/physics/physics.h"
#include "engine/fem/quadrature.h"

static fe_xgraph *g;
static void setup(void) { cr_assert_eq(fe_xgraph_create(&g), 0); }
static void teardown(void) { fe_xgraph_free(g); }
TestSuite(expr, .init = setup, .fini = teardown);

#define V(k, i) fe_x_var(g, k, i)
#define C(v) fe_x_const(g, v)
#define B(op, a, b) fe_x_binary(g, op, a, b)
#define U1(op, a) fe_x_unary(g, op, a)

static double rnd(double lo, double hi) { return lo + (hi - lo) * (rand() / (double)RAND_MAX); }

/* d node / d u[idx] against a central difference at vals. */
static void check_derivative(int node, double *u, double *du, int var_is_du, int idx)
{
  const double *vals[FE_NVARS] = {u, du};
  double *p = var_is_du ? du : u;
  int d = fe_x_diff(g, node, var_is_du ? FE_V_DU : FE_V_U, idx);
  cr_assert_geq(d, 0);
  double exact = fe_x_eval(g, d, vals), h = 1e-6, save = p[idx];
  p[idx] = save + h;
  double fp = fe_x_eval(g, node, vals);
  p[idx] = save - h;
  double fm = fe_x_eval(g, node, vals);
  p[idx] = save;
  double fd = (fp - fm) / (2 * h);
  cr_assert(fabs(exact - fd) <= 1e-6 * (1 + fabs(fd)), "node %d: derivative %.12g, difference %.12g", node, exact, fd);
}

Test(expr, every_rule_matches_finite_differences)
{
  int u = V(FE_V_U, 0), v = V(FE_V_DU, 0), w = V(FE_V_DU, 1);
  int e[] = {
    B(FE_X_ADD, u, v), B(FE_X_SUB, u, B(FE_X_MUL, v, w)), B(FE_X_MUL, u, u), B(FE_X_DIV, v, B(FE_X_ADD, C(2), u)),
    B(FE_X_POW, u, C(3)), B(FE_X_POW, u, C(-2)), B(FE_X_POW, B(FE_X_ADD, C(2), u), C(0.5)),
    B(FE_X_POW, B(FE_X_ADD, C(2), u), v), B(FE_X_POW, B(FE_X_ADD, C(1), B(FE_X_MUL, v, v)), C(0.7)),
    U1(FE_X_SIN, B(FE_X_MUL, u, v)), U1(FE_X_COS, u), U1(FE_X_TAN, B(FE_X_MUL, C(0.3), u)),
    U1(FE_X_EXP, B(FE_X_SUB, u, v)), U1(FE_X_LOG, B(FE_X_ADD, C(3), u)), U1(FE_X_SQRT, B(FE_X_ADD, C(3), v)),
    U1(FE_X_ABS, B(FE_X_SUB, u, v)), U1(FE_X_TANH, B(FE_X_MUL, u, w)), U1(FE_X_NEG, B(FE_X_MUL, u, w)),
    B(FE_X_MIN, u, v), B(FE_X_MAX, B(FE_X_MUL, u, u), v),
    fe_x_select(g, B(FE_X_GT, u, v), B(FE_X_MUL, u, w), U1(FE_X_SIN, v)),
  };
  srand(7);
  for (int trial = 0; trial < 20; trial++) {
    double uu[1] = {rnd(-0.9, 0.9)}, dd[2] = {rnd(-0.9, 0.9), rnd(-0.9, 0.9)};
    if (fabs(uu[0] - dd[0]) < 1e-3) continue; /* away from the kinks of abs, min, max, select */
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
      check_derivative(e[i], uu, dd, 0, 0);
      check_derivative(e[i], uu, dd, 1, 0);
      check_derivative(e[i], uu, dd, 1, 1);
    }
  }
}

Test(expr, simplification_and_sharing)
{
  int u = V(FE_V_U, 0), x = V(FE_V_X, 0);
  cr_expect_eq(B(FE_X_ADD, u, C(0)), u);
  cr_expect_eq(B(FE_X_MUL, C(1), u), u);
  cr_expect(fe_x_is_const(g, B(FE_X_MUL, C(0), u), 0));
  cr_expect(fe_x_is_const(g, B(FE_X_SUB, u, u), 0));
  cr_expect_eq(U1(FE_X_NEG, U1(FE_X_NEG, u)), u);
  cr_expect_eq(B(FE_X_ADD, u, x), B(FE_X_ADD, x, u)); /* canonical order: one node */
  cr_expect(fe_x_is_const(g, B(FE_X_ADD, C(2), C(3)), 5));
  /* the derivative of a linear law is free of the state */
  int f = B(FE_X_MUL, B(FE_X_ADD, C(1), x), V(FE_V_DU, 0));
  cr_expect(!fe_x_depends(g, fe_x_diff(g, f, FE_V_DU, 0), FE_V_DU));
  cr_expect(fe_x_is_const(g, fe_x_diff(g, f, FE_V_U, 0), 0));
}

Test(expr, flops_are_the_hand_count)
{
  int u = V(FE_V_U, 0), x = V(FE_V_X, 0), du0 = V(FE_V_DU, 0);
  /* u^3 - sin(x): two products, a call, a subtraction */
  int a = B(FE_X_SUB, B(FE_X_POW, u, C(3)), U1(FE_X_SIN, x));
  cr_expect_eq(fe_x_flops(g, &a, 1), 4);
  /* (1 + u*u) * du_k, k = 0..2: the shared factor costs 2 once, then 3 products */
  int t = B(FE_X_ADD, C(1), B(FE_X_MUL, u, u));
  int f[3] = {B(FE_X_MUL, t, du0), B(FE_X_MUL, t, V(FE_V_DU, 1)), B(FE_X_MUL, t, V(FE_V_DU, 2))};
  cr_expect_eq(fe_x_flops(g, f, 3), 5);
  /* u^4 by squaring: 2; u^-1: 1 division; u^0.5: one sqrt; u^0.7: one pow */
  int p4 = B(FE_X_POW, u, C(4)), pm = B(FE_X_POW, u, C(-1)), ph = B(FE_X_POW, u, C(0.5)), pg = B(FE_X_POW, u, C(0.7));
  cr_expect_eq(fe_x_flops(g, &p4, 1), 2);
  cr_expect_eq(fe_x_flops(g, &pm, 1), 1);
  cr_expect_eq(fe_x_flops(g, &ph, 1), 1);
  cr_expect_eq(fe_x_flops(g, &pg, 1), 1);
  /* a raw C leaf counts its own text: 1 + x[0]*x[1] is 2 */
  int r = fe_x_raw(g, "1 + x[0]*x[1]");
  cr_expect_eq(fe_x_flops(g, &r, 1), 2);
  /* of those, the non-FMA ones: the call, the division, the sqrt, the pow; not u^4 */
  cr_expect_eq(fe_x_nonfma(g, &a, 1), 1);
  cr_expect_eq(fe_x_nonfma(g, f, 3), 0);
  cr_expect_eq(fe_x_nonfma(g, &p4, 1), 0);
  cr_expect_eq(fe_x_nonfma(g, &pm, 1), 1);
  cr_expect_eq(fe_x_nonfma(g, &ph, 1), 1);
  cr_expect_eq(fe_x_nonfma(g, &pg, 1), 1);
  int rd = fe_x_raw(g, "1 / (1 + x[0]*x[1])");
  cr_expect_eq(fe_x_nonfma(g, &rd, 1), 1);
}

Test(expr, emitted_c_uses_temporaries_for_shared_nodes)
{
  int u = V(FE_V_U, 0);
  int t = U1(FE_X_EXP, u);
  int f[2] = {B(FE_X_MUL, t, V(FE_V_DU, 0)), B(FE_X_MUL, t, V(FE_V_DU, 1))};
  const char *lhs[2] = {"f1[0]", "f1[1]"};
  fe_strbuf b = {0};
  fe_x_emit_c(g, f, lhs, 2, 1, 0, &b);
  cr_assert_not_null(b.s);
  cr_expect(strstr(b.s, "const real t0 = exp(u[0]);") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "f1[1] = t0 * du[1];") != NULL, "%s", b.s);
  fe_strbuf_free(&b);
}

/* Traced physics: g blocks against differences of f, in 2D with two components. */
Test(expr, traced_blocks_match_differences_of_f)
{
  int dim = 2, nc = 2, u0 = V(FE_V_U, 0), u1 = V(FE_V_U, 1);
  int d[4] = {V(FE_V_DU, 0), V(FE_V_DU, 1), V(FE_V_DU, 2), V(FE_V_DU, 3)};
  int s = B(FE_X_ADD, C(1), B(FE_X_MUL, u0, u1));
  int f0[2] = {B(FE_X_POW, u0, C(3)), U1(FE_X_SIN, B(FE_X_MUL, u1, d[0]))};
  int f1[4] = {B(FE_X_MUL, s, d[0]), B(FE_X_MUL, s, d[1]), B(FE_X_MUL, U1(FE_X_EXP, u0), d[2]),
               B(FE_X_ADD, d[3], B(FE_X_MUL, d[1], d[2]))};
  fe_trace t = {g, dim, nc, f0, f1, "t", "test", 0, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL};
  fe_physics *p;
  cr_assert_eq(fe_physics_from_trace(&t, &p), 0);
  cr_expect(p->nonlinear);
  cr_expect_not_null(p->g[0]);
  cr_expect_not_null(p->g[3]);
  /* the block entries as nodes again, checked against differences */
  srand(3);
  double uu[2] = {rnd(-1, 1), rnd(-1, 1)}, dd[4] = {rnd(-1, 1), rnd(-1, 1), rnd(-1, 1), rnd(-1, 1)};
  for (int i = 0; i < nc; i++)
    for (int j = 0; j < nc; j++) check_derivative(f0[i], uu, dd, 0, j);
  for (int i = 0; i < nc * dim; i++)
    for (int j = 0; j < nc * dim; j++) check_derivative(f1[i], uu, dd, 1, j);
  fe_physics_free(p);
}

Test(expr, degree_in_x_counts_auxiliary_fields_at_their_order)
{
  /* (1 + f0^2) x0 df1: without field degrees only x counts; with a P2 field (values of
   * degree 2, gradients 1) it is 2*2 + 1 + 1 */
  int f = V(FE_V_F, 0), df = V(FE_V_DF, 1), x = V(FE_V_X, 0);
  int e = B(FE_X_MUL, B(FE_X_MUL, B(FE_X_ADD, C(1), B(FE_X_MUL, f, f)), x), df);
  cr_expect_eq(fe_x_degree_x(g, e, NULL), 1);
  const int fdeg[1] = {2}, gdeg[3] = {1, 1, 1};
  const int *vd[FE_NVARS] = {0};
  vd[FE_V_F] = fdeg;
  vd[FE_V_DF] = gdeg;
  cr_expect_eq(fe_x_degree_x(g, e, vd), 6);
  cr_expect_eq(fe_x_degree_x(g, U1(FE_X_SIN, f), vd), 4, "a function of a field: its degree + 2");
  cr_expect_eq(fe_x_degree_x(g, B(FE_X_ADD, C(1), V(FE_V_U, 0)), vd), 0, "u is not a function of x here");
}

Test(expr, raw_polynomials_count_their_own_degree)
{
  /* a C expression that is a polynomial of x counts its degree (the rule a kappa string
   * asks for is the traced function's); anything else where it reads x is a guess of 2 */
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "1 + 0.5 * x[0]"), NULL), 1);
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "2.5"), NULL), 0);
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "(1 - x[1]) * x[2] * -x[0] / 4"), NULL), 3);
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "1 / (1 + x[0])"), NULL), 2, "a division by x");
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "sin(x[0])"), NULL), 2, "a call");
  cr_expect_eq(fe_x_degree_x(g, fe_x_raw(g, "1 + x[0]*x[1] +"), NULL), 2, "not an expression");
}

/* ---- coefficients typed as C expressions (issue 44): numbers are reals ---- */

/* fe_c_reals of e, compared with want. */
static void expect_reals(const char *e, const char *want)
{
  fe_strbuf b = {0};
  fe_c_reals(e, &b);
  cr_assert_not_null(b.s);
  cr_expect_str_eq(b.s, want, "%s", e);
  fe_strbuf_free(&b);
}

Test(expr, numbers_in_a_coefficient_are_reals)
{
  expect_reals("1/2", "(real)1/(real)2");
  expect_reals("1/2 + x[0]", "(real)1/(real)2 + x[0]");
  expect_reals("1/0", "(real)1/(real)0");
  /* reals stay as written: exponents, points, suffixes, hex floats */
  expect_reals("1e3 + 1E-3 + 2e+1 + 0.5 + .5 + 2.f + 0x1p3 + 0x1P-2",
               "1e3 + 1E-3 + 2e+1 + 0.5 + .5 + 2.f + 0x1p3 + 0x1P-2");
  /* integers of every base and suffix become reals; a hex digit e is no exponent */
  expect_reals("0x10 + 010 + 7u + 3L + 0x1e3 - 12ull",
               "(real)0x10 + (real)010 + (real)7u + (real)3L + (real)0x1e3 - (real)12ull");
  /* names with digits and every index stay */
  expect_reals("k2 * log10(x[2]) + a[1 + 1] + exp2(x[0][0])", "k2 * log10(x[2]) + a[1 + 1] + exp2(x[0][0])");
  /* operands of the integer operators stay integers */
  expect_reals("(int)(4 * x[0]) % 2 + (1 << 3) + (6 & 3) + (1 | 2) + (5 ^ 1) + ~0 + (8 >> 1)",
               "(int)((real)4 * x[0]) % 2 + (1 << 3) + (6 & 3) + (1 | 2) + (5 ^ 1) + ~0 + (8 >> 1)");
  /* the logical and comparison operators take reals */
  expect_reals("x[0] > 1 && x[1] <= 2 || x[2] != 3 ? -1 : 4",
               "x[0] > (real)1 && x[1] <= (real)2 || x[2] != (real)3 ? -(real)1 : (real)4");
}

/* The value of C expression e at x, a, k on the host (NAN when it cannot be read). */
static double host(const char *e, const double *x, const double *a, const double *k)
{
  fe_cexpr *c;
  if (fe_cexpr_read(e, &c)) return NAN;
  double v = fe_cexpr_eval(c, x, a, k);
  fe_cexpr_free(c);
  return v;
}

Test(expr, the_host_reads_a_coefficient_as_its_kernel_computes_it)
{
  const double x[3] = {0.25, 0.5, 2}, a[3] = {3, 5, 7}, k[2] = {10, 0.5};
  cr_expect_eq(host("1/2", x, NULL, NULL), 0.5);
  cr_expect_eq(host("1/2 + x[0]", x, NULL, NULL), 0.75);
  cr_expect_eq(host("(real)1/(real)2 + x[0]", x, NULL, NULL), 0.75, "as fe_c_reals writes it");
  cr_expect(isinf(host("1/0", x, NULL, NULL)) && host("1/0", x, NULL, NULL) > 0);
  cr_expect(isinf(host("-1/0", x, NULL, NULL)) && host("-1/0", x, NULL, NULL) < 0);
  cr_expect(isnan(host("0/0", x, NULL, NULL)));
  cr_expect(isnan(host("log(-1)", x, NULL, NULL)));
  cr_expect(isinf(host("1e999", x, NULL, NULL)));
  cr_expect_eq(host("x[0] > 0.5 ? 1/0 : 2", x, NULL, NULL), 2, "the branch not taken is not the value");
  cr_expect_eq(host("1 + 2 * 3 - 4 / 2 * -x[1]", x, NULL, NULL), 8, "C's precedence");
  cr_expect_eq(host("!0 + (1 < 2) + (2 <= 2) + (1 == 1) + (1 != 1) + (0 && 1) + (0 || 2)", x, NULL, NULL), 5);
  cr_expect_eq(host("pow(x[1], 2) + fmin(1, x[2]) + fabs(-x[0]) + sqrt(4.0)", x, NULL, NULL), 3.5);
  cr_expect_eq(host("2 * M_PI + atan2(0, 1) + exp(0)", x, NULL, NULL), 2 * M_PI + 1);
  cr_expect_eq(host("010 + 0x10 + 3u + 0x1p3", x, NULL, NULL), 8 + 16 + 3 + 8, "octal, hex, suffix, hex float");
  cr_expect_eq(host("(float)0.1", x, NULL, NULL), (double)0.1f);
  cr_expect_eq(host("a[1] * k[1] + (double)a[2]", x, a, k), 9.5);
  /* beyond the reader: compiled as written, not evaluated here */
  const char *beyond[] = {"(int)x[0]", "x[0] % 2", "abs(x[0])", "foo", "x[3]", "x[i]", "1 +", "x[0]++", "1, 2",
                          "(1 << 2)", "~1", "u[0]", "sin(x[0], 1)", "pow(x[0])", ""};
  for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++) {
    fe_cexpr *c = (fe_cexpr *)1;
    cr_expect_eq(fe_cexpr_read(beyond[i], &c), 1, "'%s' is read", beyond[i]);
    cr_expect_null(c);
  }
  fe_cexpr *c;
  cr_assert_eq(fe_cexpr_read("a[2] + x[1] * sin(k[0])", &c), 0);
  cr_expect_eq(fe_cexpr_reads(c, FE_V_X), 2);
  cr_expect_eq(fe_cexpr_reads(c, FE_V_A), 3);
  cr_expect_eq(fe_cexpr_reads(c, FE_V_K), 1);
  cr_expect_eq(fe_cexpr_reads(c, FE_V_U), 0);
  /* many points at once, in batches, are each point alone */
  double pts[3 * 100], vals[100];
  for (int j = 0; j < 300; j++) pts[j] = 0.01 * j;
  fe_cexpr_eval_points(c, 100, pts, a, k, vals);
  for (int j = 0; j < 100; j++) cr_expect_eq(vals[j], fe_cexpr_eval(c, pts + 3 * j, a, k));
  fe_cexpr_free(c);
}

/* A coefficient's bound over a box (the single-precision check's shortcut) holds its value
 * at every point tried inside the box, and says nothing where the points alone can tell (a
 * divisor or a log's argument that may reach 0, tan, pow of a base that may be negative). */
Test(expr, a_coefficient_bound_over_a_box_holds_its_points)
{
  const double xlo[3] = {-1, 0.5, 2}, xhi[3] = {3, 1.5, 4}, alo[2] = {1, -2}, ahi[2] = {2, 5};
  const double k[2] = {10, 0.5};
  const char *bounded[] = {"1 + 0.5 * x[0]", "x[0] * x[1] - x[2] / x[1]", "-x[0] * a[1] + k[0]",
                           "exp(x[0]) * sin(x[1] * 7) + fabs(x[0] - 1)", "pow(x[1], x[0]) + sqrt(x[2])",
                           "x[0] > 1 ? a[0] * 1e3 : -log(x[2])", "fmin(x[0], a[1]) + fmax(x[1], k[1])",
                           "cosh(x[0]) + atan2(x[0], x[1]) + hypot(x[0], x[2]) + (float)x[1]",
                           "(x[0] < 0) + !x[1] + erfc(x[0]) + floor(x[2] * 2.5) + fdim(x[2], x[0])"};
  unsigned seed = 7;
  for (size_t i = 0; i < sizeof bounded / sizeof bounded[0]; i++) {
    fe_cexpr *c;
    double lo, hi;
    cr_assert_eq(fe_cexpr_read(bounded[i], &c), 0, "%s", bounded[i]);
    cr_assert_eq(fe_cexpr_bound(c, xlo, xhi, alo, ahi, k, &lo, &hi), 1, "'%s' is bounded", bounded[i]);
    for (int t = 0; t < 2000; t++) {
      double x[3], a[2];
      for (int d = 0; d < 3; d++) x[d] = xlo[d] + (xhi[d] - xlo[d]) * (rand_r(&seed) / (double)RAND_MAX);
      for (int d = 0; d < 2; d++) a[d] = alo[d] + (ahi[d] - alo[d]) * (rand_r(&seed) / (double)RAND_MAX);
      if (t < 8) /* the box's corners */
        for (int d = 0; d < 3; d++) x[d] = t >> d & 1 ? xhi[d] : xlo[d];
      const double v = fe_cexpr_eval(c, x, a, k);
      cr_assert(v >= lo * (1 + 1e-12 * (lo < 0)) - 1e-300 && v <= hi * (1 + 1e-12 * (hi > 0)) + 1e-300,
                "'%s' is %.17g at (%g, %g, %g), outside its bound [%g, %g]", bounded[i], v, x[0],
                x[1], x[2], lo, hi);
    }
    fe_cexpr_free(c);
  }
  const char *unknown[] = {"1 / x[0]", "log(x[0])", "tan(x[1])", "pow(x[0], 2)", "a[1] / a[0] / x[0]",
                           "INFINITY * (x[0] - x[0])", "k[2]"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    fe_cexpr *c;
    double lo = 0, hi = 0;
    if (fe_cexpr_read(unknown[i], &c)) continue;
    const int nk = fe_cexpr_reads(c, FE_V_K);
    cr_expect_eq(nk <= 2 ? fe_cexpr_bound(c, xlo, xhi, alo, ahi, k, &lo, &hi) : 0, 0,
                 "'%s' has no bound over the box: [%g, %g]", unknown[i], lo, hi);
    fe_cexpr_free(c);
  }
}

/* A coefficient within the reader and the arrays given reads no other memory: its kernels
 * are not tried first (FE_USER_C); anything else is. */
Test(expr, a_coefficient_is_safe_only_within_the_reader_and_its_arrays)
{
  cr_expect(fe_c_expression_safe("1 + 0.5 * x[0]", 3, 0, 0));
  cr_expect(fe_c_expression_safe("sin(M_PI * x[1]) / (1 + x[2] * x[2]) + 1/0", 3, 0, 0));
  cr_expect(fe_c_expression_safe("a[1] * k[1]", 3, 2, 2));
  cr_expect(!fe_c_expression_safe("a[2] * k[1]", 3, 2, 2), "a[2] of 2 values");
  cr_expect(!fe_c_expression_safe("k[2]", 3, 0, 2), "k[2] of 2 constants");
  cr_expect(!fe_c_expression_safe("x[2]", 2, 0, 0), "x[2] of 2 coordinates");
  const char *beyond[] = {"(int)x[0] % 2", "x[3]", "*(&x[0] + 5)", "x[0]; x[1]", "u[0]", "", NULL};
  for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
    cr_expect(!fe_c_expression_safe(beyond[i], 3, 4, 4), "'%s' is safe", beyond[i] ? beyond[i] : "NULL");
}

Test(expr, traced_constants_never_divide_as_integers)
{
  /* 1 / (x - x): the fold of 1 / 0 is not finite, so the node stays; written as ints it
   * would be an integer division by zero, which gcc compiles into a trap (SIGILL) */
  int x = V(FE_V_X, 0), q = B(FE_X_DIV, C(1), B(FE_X_SUB, x, x));
  int f = B(FE_X_MUL, q, V(FE_V_DU, 0));
  const char *lhs[1] = {"f1[0]"};
  fe_strbuf b = {0};
  fe_x_emit_c(g, &f, lhs, 1, 1, 0, &b);
  cr_assert_not_null(b.s);
  cr_expect(strstr(b.s, "((real)1.0 / (real)0.0)") != NULL, "%s", b.s);
  fe_strbuf_free(&b);
  /* a constant that is not finite has no C literal: a quotient of reals */
  int inf = B(FE_X_MUL, C(INFINITY), V(FE_V_DU, 0));
  fe_x_emit_c(g, &inf, lhs, 1, 1, 0, &b);
  cr_expect(strstr(b.s, "((real)1 / (real)0)") != NULL, "%s", b.s);
  fe_strbuf_free(&b);
  /* a raw leaf: reals in C, as typed when printed */
  int r = B(FE_X_MUL, fe_x_raw(g, "1/2 + x[0]"), V(FE_V_DU, 0));
  fe_x_emit_c(g, &r, lhs, 1, 1, 0, &b);
  cr_expect(strstr(b.s, "((real)1/(real)2 + x[0])") != NULL, "%s", b.s);
  fe_strbuf_free(&b);
  fe_x_print(g, r, NULL, NULL, &b);
  cr_expect(strstr(b.s, "(1/2 + x[0])") != NULL, "%s", b.s);
  fe_strbuf_free(&b);
}

Test(expr, coefficients_are_the_parts_of_x_alone)
{
  /* f0 = c u - s and f1 = (1 + x0) du + u du: c and s raw, 1 + x0 traced */
  int u = V(FE_V_U, 0), du = V(FE_V_DU, 0), x = V(FE_V_X, 0);
  int c = fe_x_raw(g, "1/2"), s = fe_x_raw(g, "sin(x[1])"), k = B(FE_X_ADD, C(1), x);
  int roots[2] = {B(FE_X_SUB, B(FE_X_MUL, c, u), s), B(FE_X_ADD, B(FE_X_MUL, k, du), B(FE_X_MUL, u, du))};
  const char *texts[4];
  cr_expect_eq(fe_x_raw_reached(g, roots, 2, texts, 4), 2);
  cr_expect_str_eq(texts[0], "1/2");
  cr_expect_str_eq(texts[1], "sin(x[1])");
  int ids[8], n = fe_x_coefficients(g, roots, 2, ids, 8);
  cr_expect_eq(n, 3, "c, s and 1 + x0 (not x0 alone, not u)");
  for (int i = 0; i < n; i++) cr_expect(ids[i] == c || ids[i] == s || ids[i] == k);
  fe_strbuf b = {0};
  cr_expect_eq(fe_x_print_c(g, k, 100, &b), 0);
  cr_expect_str_eq(b.s, "1 + x[0]");
  fe_strbuf_free(&b);
  /* a tree too long to write out is refused, not written */
  int t = x;
  for (int i = 0; i < 30; i++) t = B(FE_X_MUL, t, B(FE_X_ADD, t, C(i + 2)));
  cr_expect_eq(fe_x_print_c(g, t, 2000, &b), -1);
  cr_expect_null(b.s);
}

/* Physics checks: a coefficient that is not finite where it is evaluated is a named error. */
Test(expr, a_coefficient_that_is_not_finite_is_a_named_error)
{
  fe_physics *p;
  cr_assert_eq(fe_physics_poisson("1/0", "1", &p), 0);
  cr_expect_neq(fe_physics_check_coefficients(p, NULL, NULL), 0);
  cr_expect(strstr(fe_error_message(), "kappa = \"1/0\" is inf everywhere") != NULL, "%s", fe_error_message());
  cr_expect(strstr(p->f1, "(real)1/(real)0") != NULL, "%s", p->f1);
  fe_physics_free(p);
  /* of x: at the points of a rule, naming the point and the cell */
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.cells[0] = o.cells[1] = o.cells[2] = 3;
  o.type = FE_CELL_HEX;
  fe_mesh *m;
  cr_assert_eq(fe_mesh_box(&o, &m), 0);
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create(FE_CELL_HEX, 4, &q), 0); /* 3 Gauss points: the middle one */
  cr_assert_eq(fe_physics_poisson("1/(x[0] - 0.5)", "0", &p), 0);
  cr_expect_eq(fe_physics_check_coefficients(p, NULL, NULL), 0, "not evaluated without a mesh");
  cr_expect_neq(fe_physics_check_coefficients(p, m, &q), 0);
  cr_expect(strstr(fe_error_message(), "kappa = \"1/(x[0] - 0.5)\" is inf at x = (0.5, ") != NULL, "%s",
            fe_error_message());
  cr_expect(strstr(fe_error_message(), "cell 1 ") != NULL, "the first such cell: %s", fe_error_message());
  fe_physics_free(p);
  cr_assert_eq(fe_physics_poisson("1 + x[0] * x[1]", "sqrt(x[2])", &p), 0);
  cr_expect_eq(fe_physics_check_coefficients(p, m, &q), 0, "%s", fe_error_message());
  fe_physics_free(p);
  /* per region: a[0] is finite where the regions give numbers */
  const char *names[1] = {"domain"};
  const double kappa[1] = {2};
  cr_assert_eq(fe_physics_poisson_regions(names, kappa, 1, "log(-1)", &p), 0);
  cr_expect_neq(fe_physics_check_coefficients(p, m, &q), 0);
  cr_expect(strstr(fe_error_message(), "source = \"log(-1)\" is nan everywhere") != NULL, "%s", fe_error_message());
  fe_physics_free(p);
  fe_quadrature_free(&q);
  fe_mesh_free(m);
}
