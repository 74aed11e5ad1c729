/* Pointwise physics: the flop counter on C expressions and statements, and the bodies, flags
 * and degrees of the built-in Poisson physics. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/physics.h"

/* Poisson physics from kappa and source; fails the test with the engine's message on error. */
static fe_physics *phys_poisson(const char *kappa, const char *source)
{
  fe_physics *p = NULL;
  cr_assert_eq(fe_physics_poisson(kappa, source, &p), 0, "poisson(%s, %s): %s", kappa, source,
               fe_error_message());
  cr_assert_not_null(p);
  return p;
}

/* Whether text contains needle (NULL text never does). */
static int phys_contains(const char *text, const char *needle)
{
  return text && strstr(text, needle) != NULL;
}

Test(physics, count_flops_matches_hand_count)
{
  /* Each case counted by hand: + - * / and calls count 1; literals, names, indexing 0. */
  static const struct {
    const char *code;
    double flops;
  } cases[] = {
      {"1", 0},
      {"2.5e-3", 0},             /* the exponent's sign is part of the literal */
      {"1e+5 * a", 1},
      {"kappa", 0},
      {"x[0]*x[1]", 1},
      {"1 + x[0]*x[1]", 2},
      {"sin(x[0])*2.5e-3", 2},   /* the call and the product */
      {"exp(x[0]) + pow(x[1], 2)", 3},
      {"sin (x[0])", 1},         /* a call with a space before its parenthesis */
      /* unary minus counts as one flop (a negation), like a binary minus: the counter does
       * not tell them apart, so "-(a+b)/c" is negate, add, divide */
      {"-(a+b)/c", 3},
      {"a - -b", 2},
      {"f1[d] = kappa * du[d];", 1},  /* indexing is free */
      {"y[i + 1] = x[2*j - 1];", 0},  /* arithmetic inside an index is addressing, not flops */
      {"f0[0] = -(1);", 1},
      /* a loop body counts once; for, if and the integer step d++ are not flops */
      {"for (int d = 0; d < DIM; d++) f1[d] = 2 * du[d];", 1},
      {"if (u[0] > 0) f0[0] = u[0] * u[0]; else f0[0] = 0;", 1},
      {"s += g[i] * w[i]; i--;", 2},
      {"", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double got = fe_count_flops(cases[i].code);
    cr_expect_eq(got, cases[i].flops, "fe_count_flops(\"%s\") = %g, expected %g", cases[i].code,
                 got, cases[i].flops);
  }
}

/* Of those, the ones that do not issue as an FMA: divisions and the calls that cost more */
Test(physics, count_nonfma)
{
  static const struct {
    const char *code;
    double nonfma;
  } cases[] = {
      {"1 + x[0]*x[1]", 0},
      {"-(a+b)/c", 1},
      {"sqrt(u[0]) + exp(x[0]) / 2", 3},
      {"fabs(u[0]) * fmax(x[0], 0.5)", 0}, /* compares and signs are cheap */
      {"y[i / 2] = x[0];", 0},              /* a division inside an index is addressing */
      {"pow (x[1], 2.5)", 1},
      {"", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double got = fe_count_nonfma(cases[i].code);
    cr_expect_eq(got, cases[i].nonfma, "fe_count_nonfma(\"%s\") = %g, expected %g",
                 cases[i].code, got, cases[i].nonfma);
  }
}

Test(physics, poisson_bodies_and_flags)
{
  /* variable kappa, constant source */
  fe_physics *p = phys_poisson("1 + x[0]*x[1]", "1");
  cr_expect_str_eq(p->name, "poisson");
  cr_expect_eq(p->ncomp, 1);
  cr_expect_eq(p->uses_x, 1, "kappa reads x");
  cr_expect_eq(p->nonlinear, 0);
  cr_expect(phys_contains(p->f0, "-((real)1)"), "f0 = %s (numbers are reals)", p->f0 ? p->f0 : "(null)");
  cr_expect(phys_contains(p->f1, "1 + x[0]*x[1]"), "f1 = %s", p->f1 ? p->f1 : "(null)");
  cr_expect(phys_contains(p->f1, "kappa * du[d]"), "f1 = %s", p->f1 ? p->f1 : "(null)");
  cr_expect(phys_contains(p->df1, "kappa * dw[d]"), "df1 = %s", p->df1 ? p->df1 : "(null)");
  cr_expect_null(p->df0, "linear Poisson has no df0");
  cr_expect_eq(p->degree_f0, 0, "a constant source has degree 0");
  cr_expect_eq(p->degree_f1, 2, "an expression of x counts as quadratic");
  cr_expect_eq(p->degree_df1, 2);
  /* kappa: 2 flops; f1: 3 products; the negated constant source folds to nothing */
  cr_expect_eq(p->flops_f, 5.0, "flops_f = %g", p->flops_f);
  cr_expect_eq(p->flops_df, 5.0, "flops_df = %g", p->flops_df);
  cr_expect(phys_contains(p->description, "1 + x[0]*x[1]"));
  fe_physics_free(p);

  /* a zero source: no f0 at all; constant kappa: x is never read */
  const char *zeros[] = {"0", "0.0", "0 ", NULL};
  for (int i = 0; i < 4; i++) {
    p = phys_poisson("1", zeros[i]);
    cr_expect_null(p->f0, "source '%s' is zero: f0 must be NULL", zeros[i] ? zeros[i] : "NULL");
    cr_expect_eq(p->uses_x, 0);
    cr_expect_eq(p->degree_f0, 0);
    cr_expect_eq(p->degree_f1, 0);
    cr_expect_eq(p->degree_df1, 0);
    cr_expect_eq(p->flops_f, 3.0);
    fe_physics_free(p);
  }

  /* a source that reads x: uses_x, degree_f0, and the negation counted */
  p = phys_poisson("2", "sin(x[0])");
  cr_expect_eq(p->uses_x, 1, "the source reads x");
  cr_expect_eq(p->degree_f0, 2);
  cr_expect_eq(p->degree_f1, 0);
  cr_expect(phys_contains(p->f0, "sin(x[0])"));
  cr_expect_eq(p->flops_f, 5.0, "sin, negation, three products: %g", p->flops_f);
  cr_expect_eq(p->flops_df, 3.0);
  fe_physics_free(p);

  /* names that contain an x but are not x[..]: exp(), max[..], xx[..] */
  const char *not_x[] = {"exp(2.0)", "max[0] + 1", "xx[0]", "1 + ax[1]"};
  for (int i = 0; i < 4; i++) {
    p = phys_poisson(not_x[i], "1");
    cr_expect_eq(p->uses_x, 0, "kappa '%s' does not read x", not_x[i]);
    cr_expect_eq(p->degree_f1, 0);
    fe_physics_free(p);
  }
  /* x with a space before its index still reads x */
  p = phys_poisson("1 + x [2]", "0");
  cr_expect_eq(p->uses_x, 1);
  fe_physics_free(p);

  /* defaults: kappa 1, source 0 */
  p = phys_poisson(NULL, NULL);
  cr_expect_null(p->f0);
  cr_expect_not_null(p->f1);
  cr_expect_not_null(p->df1);
  cr_expect_eq(p->uses_x, 0);
  fe_physics_free(p);
}
