/* Newton's method on matrix-free operators: quadratic convergence on a nonlinear diffusion
 * -div((1 + |grad u|^2) grad u) = s written by hand as C bodies, the same solve on cpu and opencl,
 * second-order convergence to a manufactured solution, one step for linear physics, and
 * the ways a solve stops early (maxit, bad options, Ctrl-C). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/solve/newton.h"
#include "engine/fem/quadrature.h"
#include "tests/unit/fixtures.h"

/* The cache of compiled kernels and calibrations, unless the runner chose one. */
static void nt_suite_init(void) { setenv("FELAB_CACHE", "/tmp/felab-test-cache", 0); }

/* Close the backends and drop the session log, so that leak checking sees nothing. */
static void nt_suite_fini(void)
{
  fe_backend_shutdown();
  fe_perf_log_clear();
}

TestSuite(newton, .init = nt_suite_init, .fini = nt_suite_fini);

/* The manufactured solution u = AMP sin(pi x) sin(pi y), zero on the boundary of [0,1]^2. */
#define NT_AMP 1.0
static int nt_exact(void *ctx, const double x[3], int n, double *v)
{
  (void)ctx;
  (void)n;
  *v = NT_AMP * sin(M_PI * x[0]) * sin(M_PI * x[1]);
  return 0;
}

/* The physics: -div((1 + |grad u|^2) grad u) = s, the Euler-Lagrange equation of the convex
 * energy |grad u|^2 / 2 + |grad u|^4 / 4 - s u (a regularized 4-Laplacian), so that its
 * Jacobian (1 + |grad u|^2) grad w + 2 (grad u . grad w) grad u is symmetric positive
 * definite, as CG needs. (The quasi-linear -div((1 + u^2) grad u) has a nonsymmetric
 * Jacobian: CG is the wrong linear solver for it.)
 * s for nt_exact with a = AMP: with g = |grad u|^2 = a^2 pi^2 (cx^2 sy^2 + sx^2 cy^2),
 *   s = (1 + g) (-lap u) - grad g . grad u,   -lap u = 2 pi^2 u,
 *   grad g . grad u = 2 a^3 pi^4 sx sy (cx^2 (cy^2 - sy^2) + cy^2 (cx^2 - sx^2)).
 * The residual's f0 is -s. */
static const char *nt_f0 =
    "const real pi = 3.141592653589793, a = 1.0;\n"
    "    const real sx = sin(pi * x[0]), cx = cos(pi * x[0]);\n"
    "    const real sy = sin(pi * x[1]), cy = cos(pi * x[1]);\n"
    "    const real ue = a * sx * sy;\n"
    "    const real g = a * a * pi * pi * (cx * cx * sy * sy + sx * sx * cy * cy);\n"
    "    const real gu = 2 * a * a * a * pi * pi * pi * pi * sx * sy *\n"
    "                    (cx * cx * (cy * cy - sy * sy) + cy * cy * (cx * cx - sx * sx));\n"
    "    f0[0] = -((1 + g) * 2 * pi * pi * ue - gu);";

/* The flux (1 + |grad u|^2) grad u and its derivative in direction w. */
static const char *nt_f1 =
    "real g = 0;\n"
    "    FE_UNROLL for (int d = 0; d < DIM; d++) g += du[d] * du[d];\n"
    "    FE_UNROLL for (int d = 0; d < DIM; d++) f1[d] = (1 + g) * du[d];";
static const char *nt_df1 =
    "real g = 0, gw = 0;\n"
    "    FE_UNROLL for (int d = 0; d < DIM; d++) {\n"
    "      g += du[d] * du[d];\n"
    "      gw += du[d] * dw[d];\n"
    "    }\n"
    "    FE_UNROLL for (int d = 0; d < DIM; d++) df1[d] = (1 + g) * dw[d] + 2 * gw * du[d];";

/* The nonlinear physics by hand (nt_f0, nt_f1, nt_df1 as its C bodies). */
static fe_physics *nt_nonlinear_physics(void)
{
  fe_physics *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  snprintf(p->name, sizeof p->name, "regularized-4-laplacian");
  p->ncomp = 1;
  p->nonlinear = 1;
  p->uses_x = 1;
  p->f0 = strdup(nt_f0);
  p->f1 = strdup(nt_f1);
  p->df1 = strdup(nt_df1);
  p->description = strdup("-div((1 + |grad u|^2) grad u) = s");
  p->degree_f0 = 4; /* a smooth source: integrate it well */
  p->flops_f = fe_count_flops(nt_f0) + fe_count_flops(nt_f1);
  p->flops_df = fe_count_flops(nt_df1);
  return p;
}

/* A mesh, its space, a physics and the operator, freed together. */
typedef struct nt_problem {
  fe_mesh *m;
  fe_space *V;
  fe_physics *pde;
  fe_operator *A;
} nt_problem;

/* P1 on n x n triangles of [0,1]^2 (distorted a little), u = 0 on the whole boundary. Every
 * action integrates with the same rule of degree qdeg, so that the Jacobian action is the
 * exact derivative of the discrete residual. */
static void nt_problem_make(nt_problem *p, fe_physics *pde, int n, int qdeg)
{
  memset(p, 0, sizeof *p);
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = FE_CELL_TRI;
  o.cells[0] = o.cells[1] = n;
  o.cells[2] = 0;
  o.distort = 0.2;
  const char *all[] = {"all"};
  p->pde = pde;
  cr_assert_eq(fe_mesh_box(&o, &p->m), 0, "%s", fe_error_message());
  cr_assert_eq(fe_space_create(p->m, "P1", &p->V), 0, "%s", fe_error_message());
  cr_assert_eq(fe_operator_create(p->V, p->pde, all, 1, 0.0, &p->A), 0, "%s", fe_error_message());
  cr_assert_eq(fe_operator_set_quadrature(p->A, qdeg, FE_QUAD_AUTO), 0, "%s", fe_error_message());
}

static void nt_problem_free(nt_problem *p)
{
  fe_operator_free(p->A);
  fe_physics_free(p->pde);
  fe_space_free(p->V);
  fe_mesh_free(p->m);
  memset(p, 0, sizeof *p);
}

/* Newton options on a backend in double. */
static fe_newton_opts nt_opts(const char *backend, double rtol, int maxit)
{
  fe_newton_opts o;
  fe_newton_opts_default(&o);
  o.rtol = rtol;
  o.maxit = maxit;
  o.act.backend = backend;
  o.act.precision = FE_DOUBLE;
  return o;
}

/* Solve; fails the test if Newton errs. */
static fe_vector *nt_solve(nt_problem *p, const fe_newton_opts *o, fe_newton_info *info)
{
  fe_vector *u = NULL;
  int rc = fe_solve_newton(p->A, NULL, o, &u, info);
  cr_assert_eq(rc, 0, "newton: %s\n%s", fe_error_message(), fe_error_trace());
  cr_assert_not_null(u);
  return u;
}

/* The history as one line for the log. */
static void nt_log_history(const char *what, const fe_newton_info *info)
{
  char line[1024];
  int len = snprintf(line, sizeof line, "%s: %d steps, %d CG iterations, |r| =", what,
                     info->iterations, info->linear_iterations);
  for (int k = 0; k < info->nhistory && len < (int)sizeof line - 16; k++)
    len += snprintf(line + len, sizeof line - len, " %.3e", info->history[k]);
  cr_log_info("%s", line);
}

/* Host copy of a vector (caller frees). */
static double *nt_host(const fe_vector *u)
{
  double *h = malloc(sizeof(double) * (size_t)u->n);
  cr_assert_not_null(h);
  cr_assert_eq(fe_vector_get(u, h), 0, "%s", fe_error_message());
  return h;
}

Test(newton, nonlinear_diffusion_converges_quadratically)
{
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 16, 4);
  fe_newton_opts o = nt_opts("cpu", 1e-12, 30);
  fe_newton_info info;
  fe_vector *u = nt_solve(&p, &o, &info);
  nt_log_history("cpu", &info);
  cr_expect_eq(info.converged, 1, "%s", info.reason);
  cr_expect_str_eq(info.reason, "rtol");
  cr_assert_eq(info.nhistory, info.iterations + 1);
  cr_expect_geq(info.iterations, 3, "a nonlinear solve from zero takes several steps");
  cr_expect_gt(info.linear_iterations, info.iterations);
  /* quadratic phase: once |r_k| / |r_0| < 5e-2, each step squares it, e_{k+1} <= C e_k^2,
   * i.e. log(e_{k+1}) / log(e_k) near 2, above the floor of the linear solves (1e-12) */
  double r0 = info.history[0];
  int pairs = 0;
  for (int k = 0; k + 1 < info.nhistory; k++) {
    double ek = info.history[k] / r0, ek1 = info.history[k + 1] / r0;
    if (ek > 5e-2 || ek1 < 1e-11) continue;
    double order = log(ek1) / log(ek);
    cr_log_info("step %d -> %d: e = %.3e -> %.3e, order %.2f, C = %.3g", k, k + 1, ek, ek1,
                order, ek1 / (ek * ek));
    cr_expect_geq(order, 1.8, "step %d: e = %.3e -> %.3e is not quadratic (order %.2f)", k + 1,
                  ek, ek1, order);
    cr_expect_leq(ek1, 10 * ek * ek, "step %d: e = %.3e -> %.3e, C = %.3g", k + 1, ek, ek1,
                  ek1 / (ek * ek));
    pairs++;
  }
  cr_expect_geq(pairs, 1, "no step in the quadratic phase");
  /* the true residual is small, and the report covers the solve */
  fe_vector *r = NULL;
  fe_report rep;
  double rn;
  cr_assert_eq(fe_operator_residual(p.A, u, &o.act, &r, &rep), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_norm(r, &rn), 0, "%s", fe_error_message());
  cr_expect_leq(rn, o.rtol * r0 * 1.0001, "|residual(u)| = %.3g, r0 = %.3g", rn, r0);
  cr_expect_str_eq(info.report.action, "newton");
  cr_expect_eq(info.report.iterations, info.iterations);
  cr_expect_gt(info.report.flops, 0);
  cr_expect_gt(info.report.bytes, 0);
  fe_vector_free(r);
  fe_newton_info_free(&info);
  cr_expect_null(info.history);
  fe_vector_free(u);
  nt_problem_free(&p);
}

/* The opened opencl backend, or skip the test saying why there is none. */
static void nt_opencl_or_skip(void)
{
  test_need_precision(test_backend_or_skip("opencl"), FE_DOUBLE);
}

Test(newton, opencl_matches_cpu_to_1e10)
{
  nt_opencl_or_skip();
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 12, 4);
  const char *backends[] = {"cpu", "opencl"};
  double *uh[2];
  int steps[2];
  for (int b = 0; b < 2; b++) {
    fe_newton_opts o = nt_opts(backends[b], 1e-12, 30);
    fe_newton_info info;
    fe_vector *u = nt_solve(&p, &o, &info);
    nt_log_history(backends[b], &info);
    cr_expect_eq(info.converged, 1, "%s: %s", backends[b], info.reason);
    cr_expect_str_eq(info.report.backend, backends[b]);
    cr_expect_str_eq(u->be->name, backends[b]);
    steps[b] = info.iterations;
    uh[b] = nt_host(u);
    fe_newton_info_free(&info);
    fe_vector_free(u);
  }
  double d = 0, s = 0;
  for (int i = 0; i < p.V->ndofs; i++) {
    d = fmax(d, fabs(uh[0][i] - uh[1][i]));
    s = fmax(s, fabs(uh[0][i]));
  }
  cr_log_info("cpu %d steps, opencl %d steps, max |u_cpu - u_opencl| = %.3g (max |u| = %.3g)",
              steps[0], steps[1], d, s);
  cr_expect_eq(steps[0], steps[1], "cpu %d steps, opencl %d", steps[0], steps[1]);
  cr_expect_leq(d, 1e-10 * s, "max |u_cpu - u_opencl| = %.3g (max |u| = %.3g)", d, s);
  free(uh[0]), free(uh[1]);
  nt_problem_free(&p);
}

Test(newton, manufactured_solution_converges_at_rate_2)
{
  double err[3];
  for (int k = 0; k < 3; k++) {
    int n = 8 << k;
    nt_problem p;
    nt_problem_make(&p, nt_nonlinear_physics(), n, 6);
    fe_newton_opts o = nt_opts("cpu", 1e-10, 30);
    fe_newton_info info;
    fe_vector *u = nt_solve(&p, &o, &info);
    char what[32];
    snprintf(what, sizeof what, "n = %d", n);
    nt_log_history(what, &info);
    cr_expect_eq(info.converged, 1, "n = %d: %s", n, info.reason);
    double *uh = nt_host(u);
    cr_assert_eq(fe_space_error(p.V, uh, nt_exact, NULL, "L2", &err[k]), 0, "%s",
                 fe_error_message());
    free(uh);
    fe_newton_info_free(&info);
    fe_vector_free(u);
    nt_problem_free(&p);
  }
  cr_log_info("L2 errors %.4g %.4g %.4g, rates %.3f %.3f", err[0], err[1], err[2],
              log2(err[0] / err[1]), log2(err[1] / err[2]));
  for (int k = 0; k < 2; k++) {
    double rate = log2(err[k] / err[k + 1]);
    cr_expect(rate >= 1.8 && rate <= 2.3, "L2 errors %.4g %.4g %.4g, rate %d->%d = %.3f", err[0],
              err[1], err[2], 8 << k, 16 << k, rate);
  }
}

Test(newton, linear_poisson_converges_in_one_step)
{
  fe_physics *pde;
  cr_assert_eq(fe_physics_poisson("1 + x[0]*x[1]", "1", &pde), 0, "%s", fe_error_message());
  nt_problem p;
  nt_problem_make(&p, pde, 12, 2);
  fe_newton_opts o = nt_opts("cpu", 1e-10, 10); /* the default tolerances */
  fe_newton_info info;
  fe_vector *u = nt_solve(&p, &o, &info);
  nt_log_history("poisson", &info);
  cr_expect_eq(info.converged, 1, "%s", info.reason);
  cr_expect_eq(info.iterations, 1, "linear physics: %d Newton steps", info.iterations);
  /* the same solution as CG on residual(u) = 0 */
  fe_solver_opts co;
  fe_solver_opts_default(&co);
  co.rtol = 1e-12;
  co.act = o.act;
  fe_solver_info ci;
  fe_vector *uc = NULL;
  cr_assert_eq(fe_solve_cg(p.A, NULL, NULL, &co, &uc, &ci), 0, "%s", fe_error_message());
  double *a = nt_host(u), *b = nt_host(uc), d = 0, s = 0;
  for (int i = 0; i < p.V->ndofs; i++) {
    d = fmax(d, fabs(a[i] - b[i]));
    s = fmax(s, fabs(b[i]));
  }
  cr_expect_leq(d, 1e-9 * s, "max |u_newton - u_cg| = %.3g (max |u| = %.3g)", d, s);
  free(a), free(b);
  fe_solver_info_free(&ci);
  fe_vector_free(uc);
  fe_newton_info_free(&info);
  fe_vector_free(u);
  nt_problem_free(&p);
}

Test(newton, initial_guess_off_the_boundary_values_is_corrected)
{
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 8, 4);
  fe_newton_opts o = nt_opts("cpu", 1e-11, 30);
  fe_backend *be;
  fe_vector *u0 = NULL, *u = NULL;
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_create(be, FE_DOUBLE, p.V->ndofs, &u0), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_fill(u0, 0.5), 0, "%s", fe_error_message()); /* 0.5 on the boundary too */
  fe_newton_info info;
  cr_assert_eq(fe_solve_newton(p.A, u0, &o, &u, &info), 0, "%s", fe_error_message());
  nt_log_history("x0 = 0.5", &info);
  cr_expect_eq(info.converged, 1, "%s", info.reason);
  double lo, hi;
  cr_assert_eq(fe_vector_min(u, &lo), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_max(u, &hi), 0, "%s", fe_error_message());
  cr_expect(fabs(lo) <= 1e-12, "the boundary value 0 is the minimum, got %.3g", lo);
  cr_expect(hi > 0.8 * NT_AMP && hi <= 1.05 * NT_AMP, "max u = %.4g, exact %.4g", hi, NT_AMP);
  fe_newton_info_free(&info);
  fe_vector_free(u);
  fe_vector_free(u0);
  nt_problem_free(&p);
}

/* Solves of residual(u) = 0 impose the boundary values on the initial guess (the Jacobian
 * ignores constrained entries, so it cannot move them consistently): CG from an initial
 * guess off the boundary values gives the solution it gives from none. */
Test(newton, cg_initial_guess_off_the_boundary_values_gives_the_same_solution)
{
  fe_physics *pde;
  cr_assert_eq(fe_physics_poisson("1", "1", &pde), 0, "%s", fe_error_message());
  nt_problem p;
  nt_problem_make(&p, pde, 8, 2);
  fe_solver_opts co;
  fe_solver_opts_default(&co);
  co.rtol = 1e-12;
  co.act.backend = "cpu";
  co.act.precision = FE_DOUBLE;
  fe_backend *be;
  fe_vector *x0 = NULL, *x[2] = {NULL, NULL};
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_create(be, FE_DOUBLE, p.V->ndofs, &x0), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_fill(x0, 0.5), 0, "%s", fe_error_message());
  for (int k = 0; k < 2; k++) {
    fe_solver_info ci;
    cr_assert_eq(fe_solve_cg(p.A, NULL, k ? x0 : NULL, &co, &x[k], &ci), 0, "%s",
                 fe_error_message());
    cr_expect_eq(ci.converged, 1, "%s", ci.reason);
    fe_solver_info_free(&ci);
  }
  double *a = nt_host(x[0]), *b = nt_host(x[1]), d = 0, s = 0;
  for (int i = 0; i < p.V->ndofs; i++) {
    d = fmax(d, fabs(a[i] - b[i]));
    s = fmax(s, fabs(a[i]));
  }
  cr_expect_leq(d, 1e-9 * s, "max |u(x0 = NULL) - u(x0 = 0.5)| = %.3g (max |u| = %.3g)", d, s);
  free(a), free(b);
  fe_vector_free(x[0]), fe_vector_free(x[1]), fe_vector_free(x0);
  nt_problem_free(&p);
}

Test(newton, maxit_reached_is_not_converged)
{
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 8, 4);
  fe_newton_opts o = nt_opts("cpu", 1e-12, 1);
  fe_newton_info info;
  fe_vector *u = nt_solve(&p, &o, &info);
  cr_expect_eq(info.converged, 0);
  cr_expect_str_eq(info.reason, "maxit");
  cr_expect_eq(info.iterations, 1);
  cr_expect_eq(info.nhistory, 2, "r0 and one norm per step");
  cr_expect_lt(info.history[1], info.history[0], "a step decreases the residual");
  fe_newton_info_free(&info);
  fe_vector_free(u);
  nt_problem_free(&p);
}

Test(newton, bad_options_are_errors_naming_the_option)
{
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 2, 2);
  struct {
    const char *field, *value, *expect;
  } cases[] = {
      {"linear", "lu", "bicgstab"},
      {"pc", "ilu", "jacobi"},
      {"linesearch", "cubic", "backtrack"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fe_newton_opts o = nt_opts("cpu", 1e-8, 10);
    if (!strcmp(cases[i].field, "linear")) o.linear = cases[i].value;
    if (!strcmp(cases[i].field, "pc")) o.pc = cases[i].value;
    if (!strcmp(cases[i].field, "linesearch")) o.linesearch = cases[i].value;
    fe_newton_info info;
    fe_vector *u = NULL;
    int rc = fe_solve_newton(p.A, NULL, &o, &u, &info);
    cr_expect_eq(rc, FE_ERR_ARG, "%s: got %d (%s)", cases[i].field, rc, fe_error_message());
    cr_expect(strstr(fe_error_message(), cases[i].value) &&
                  strstr(fe_error_message(), cases[i].expect),
              "message: %s", fe_error_message());
    cr_expect_null(u);
    cr_expect_null(info.history);
  }
  fe_newton_opts o = nt_opts("cpu", 1e-8, -1);
  fe_newton_info info;
  fe_vector *u = NULL;
  cr_expect_eq(fe_solve_newton(p.A, NULL, &o, &u, &info), FE_ERR_ARG);
  cr_expect(strstr(fe_error_message(), "maxit") != NULL, "message: %s", fe_error_message());
  o = nt_opts("cpu", 1e-8, 10);
  o.linear_rtol = 1.5;
  cr_expect_eq(fe_solve_newton(p.A, NULL, &o, &u, &info), FE_ERR_ARG);
  cr_expect(strstr(fe_error_message(), "linear_rtol") != NULL, "message: %s", fe_error_message());
  nt_problem_free(&p);
}

Test(newton, nan_residual_is_an_error_naming_the_step)
{
  fe_physics *pde = nt_nonlinear_physics();
  free(pde->f1); /* a flux that is NaN once u leaves 0 */
  pde->f1 = strdup("const real c = u[0] != 0 ? sqrt(-1.0 - u[0] * u[0]) : 1;\n"
                   "    FE_UNROLL for (int d = 0; d < DIM; d++) f1[d] = c * du[d];");
  nt_problem p;
  nt_problem_make(&p, pde, 4, 2);
  const char *searches[] = {"none", "backtrack"};
  for (int s = 0; s < 2; s++) {
    fe_newton_opts o = nt_opts("cpu", 1e-10, 10);
    o.linesearch = searches[s];
    fe_newton_info info;
    fe_vector *u = NULL;
    int rc = fe_solve_newton(p.A, NULL, &o, &u, &info);
    cr_expect_eq(rc, FE_ERR_SOLVER, "%s: got %d (%s)", searches[s], rc, fe_error_message());
    cr_expect(strstr(fe_error_message(), "newton step 1") && strstr(fe_error_message(), "nan"),
              "%s: message: %s", searches[s], fe_error_message());
    cr_expect_null(u);
    cr_expect_null(info.history);
  }
  nt_problem_free(&p);
}

Test(newton, interrupt_stops_newton)
{
  nt_problem p;
  nt_problem_make(&p, nt_nonlinear_physics(), 6, 4);
  fe_newton_opts o = nt_opts("cpu", 1e-10, 30);
  fe_newton_info info;
  fe_vector *u = NULL;
  fe_interrupt_flag = 1;
  int rc = fe_solve_newton(p.A, NULL, &o, &u, &info);
  cr_expect_eq(rc, FE_ERR_INTERRUPTED, "got %d (%s)", rc, fe_error_message());
  cr_expect_null(u, "an interrupted solve returns no solution");
  cr_expect_null(info.history);
  cr_expect_eq(fe_interrupt_flag, 0, "the flag is consumed");
  u = nt_solve(&p, &o, &info); /* the session goes on */
  cr_expect_eq(info.converged, 1, "%s", info.reason);
  fe_newton_info_free(&info);
  fe_vector_free(u);
  nt_problem_free(&p);
}
