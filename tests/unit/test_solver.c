/* Conjugate gradients on matrix-free Poisson operators (cpu backend): convergence to the
 * requested tolerance, Jacobi preconditioning, second-order convergence of P1 and Q1 to a
 * manufactured solution, solves with a right-hand side, and the ways a solve can stop
 * early (maxit, bad options, Ctrl-C). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/solve/solver.h"

/* The cache of compiled kernels and calibrations, unless the runner chose one. */
static void sv_suite_init(void) { setenv("FELAB_CACHE", "/tmp/felab-test-cache", 0); }

/* Close the backends and drop the session log, so that leak checking sees nothing. */
static void sv_suite_fini(void)
{
  fe_backend_shutdown();
  fe_perf_log_clear();
}

TestSuite(solver, .init = sv_suite_init, .fini = sv_suite_fini);

/* A mesh, its space, Poisson physics and the operator, freed together. */
typedef struct sv_problem {
  fe_mesh *m;
  fe_space *V;
  fe_physics *pde;
  fe_operator *A;
} sv_problem;

/* Poisson on a box of n^3 cubes of [0,1]^3 with the given distortion, P1 on tets and Q1 on
 * hexes, u = 0 on the whole boundary. */
static void sv_problem_make(sv_problem *p, fe_cell_type type, int n, double distort,
                            const char *kappa, const char *source)
{
  memset(p, 0, sizeof *p);
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = o.cells[1] = o.cells[2] = n;
  o.distort = distort;
  const char *all[] = {"all"};
  cr_assert_eq(fe_mesh_box(&o, &p->m), 0, "%s", fe_error_message());
  cr_assert_eq(fe_space_create(p->m, type == FE_CELL_HEX ? "Q1" : "P1", &p->V), 0, "%s",
               fe_error_message());
  cr_assert_eq(fe_physics_poisson(kappa, source, &p->pde), 0, "%s", fe_error_message());
  cr_assert_eq(fe_operator_create(p->V, p->pde, all, 1, 0.0, &p->A), 0, "%s", fe_error_message());
}

static void sv_problem_free(sv_problem *p)
{
  fe_operator_free(p->A);
  fe_physics_free(p->pde);
  fe_space_free(p->V);
  fe_mesh_free(p->m);
  memset(p, 0, sizeof *p);
}

/* Solver options on the cpu backend in double. */
static fe_solver_opts sv_opts(const char *pc, double rtol, int maxit)
{
  fe_solver_opts o;
  fe_solver_opts_default(&o);
  o.pc = pc;
  o.rtol = rtol;
  o.maxit = maxit;
  o.act.backend = "cpu";
  o.act.precision = FE_DOUBLE;
  return o;
}

/* Solve residual(u) = 0 (b NULL) or J x = b; fails the test if the solver errs. */
static fe_vector *sv_solve(sv_problem *p, const fe_vector *b, const fe_solver_opts *o,
                           fe_solver_info *info)
{
  fe_vector *x = NULL;
  int rc = fe_solve_cg(p->A, b, NULL, o, &x, info);
  cr_assert_eq(rc, 0, "cg: %s\n%s", fe_error_message(), fe_error_trace());
  cr_assert_not_null(x);
  return x;
}

/* The 2-norm of the residual of u. */
static double sv_residual_norm(sv_problem *p, const fe_vector *u, const fe_solver_opts *o)
{
  fe_vector *r = NULL;
  fe_report rep;
  double nrm;
  cr_assert_eq(fe_operator_residual(p->A, u, &o->act, &r, &rep), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_norm(r, &nrm), 0, "%s", fe_error_message());
  fe_vector_free(r);
  return nrm;
}

Test(solver, cg_converges_to_rtol)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  const char *pcs[] = {"jacobi", "none"};
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 2; k++) {
      sv_problem p;
      sv_problem_make(&p, types[t], 6, 0.0, "1 + x[0]*x[1]", "1");
      fe_solver_opts o = sv_opts(pcs[k], 1e-8, 500);
      fe_solver_info info;
      fe_vector *u = sv_solve(&p, NULL, &o, &info);
      const char *what = fe_cell_name(types[t]);
      cr_expect_eq(info.converged, 1, "%s %s: %s", what, pcs[k], info.reason);
      cr_expect_str_eq(info.reason, "rtol");
      cr_expect_gt(info.iterations, 1);
      cr_assert_eq(info.nhistory, info.iterations + 1);
      double r0 = info.history[0], rn = info.history[info.nhistory - 1];
      cr_expect_gt(r0, 0);
      cr_expect_leq(rn / r0, o.rtol, "%s %s: %.3g / %.3g", what, pcs[k], rn, r0);
      /* the true residual, not only CG's recurrence, is small */
      double res = sv_residual_norm(&p, u, &o);
      cr_expect_leq(res, 10 * o.rtol * r0, "%s %s: |residual(u)| = %.3g, r0 = %.3g", what, pcs[k],
                    res, r0);
      cr_expect_str_eq(info.report.action, "cg");
      cr_expect_eq(info.report.iterations, info.iterations);
      cr_expect_gt(info.report.flops, 0);
      fe_solver_info_free(&info);
      fe_vector_free(u);
      sv_problem_free(&p);
    }
}

Test(solver, cg_jacobi_needs_no_more_iterations_than_plain_on_distorted_mesh)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  for (int t = 0; t < 2; t++) {
    sv_problem p;
    sv_problem_make(&p, types[t], 8, 0.3, "1 + 20*x[0]*x[0]", "1");
    int its[2];
    const char *pcs[] = {"jacobi", "none"};
    for (int k = 0; k < 2; k++) {
      fe_solver_opts o = sv_opts(pcs[k], 1e-8, 1000);
      fe_solver_info info;
      fe_vector *u = sv_solve(&p, NULL, &o, &info);
      cr_expect_eq(info.converged, 1, "%s: %s", pcs[k], info.reason);
      its[k] = info.iterations;
      fe_solver_info_free(&info);
      fe_vector_free(u);
    }
    cr_log_info("%s: jacobi %d iterations, none %d", fe_cell_name(types[t]), its[0], its[1]);
    cr_expect_leq(its[0], its[1], "%s: jacobi %d iterations, none %d", fe_cell_name(types[t]),
                  its[0], its[1]);
    sv_problem_free(&p);
  }
}

/* The manufactured solution u = x(1-x) y(1-y) z(1-z) e^x, zero on the boundary of [0,1]^3. */
static int sv_exact(void *ctx, const double x[3], int n, double *v)
{
  (void)ctx;
  (void)n;
  *v = x[0] * (1 - x[0]) * x[1] * (1 - x[1]) * x[2] * (1 - x[2]) * exp(x[0]);
  return 0;
}

/* -laplacian of sv_exact, by hand: with X = x(1-x)e^x, X'' = -x(x+3)e^x, and (y(1-y))'' = -2,
 *   -lap u = e^x [x(x+3) y(1-y) z(1-z) + 2 x(1-x) (z(1-z) + y(1-y))]. */
static const char *sv_exact_source =
    "exp(x[0])*(x[0]*(x[0]+3)*x[1]*(1-x[1])*x[2]*(1-x[2]) + "
    "2*x[0]*(1-x[0])*(x[2]*(1-x[2]) + x[1]*(1-x[1])))";

/* L2 errors of the discrete solution against sv_exact on n = 4, 8, 16, and the rates. */
static void sv_convergence(fe_cell_type type)
{
  double err[3];
  for (int k = 0; k < 3; k++) {
    int n = 4 << k;
    sv_problem p;
    sv_problem_make(&p, type, n, 0.0, "1", sv_exact_source);
    fe_solver_opts o = sv_opts("jacobi", 1e-11, 2000);
    fe_solver_info info;
    fe_vector *u = sv_solve(&p, NULL, &o, &info);
    cr_expect_eq(info.converged, 1, "n = %d: %s", n, info.reason);
    double *uh = malloc(sizeof(double) * (size_t)p.V->ndofs);
    cr_assert_eq(fe_vector_get(u, uh), 0, "%s", fe_error_message());
    cr_assert_eq(fe_space_error(p.V, uh, sv_exact, NULL, "L2", &err[k]), 0, "%s",
                 fe_error_message());
    free(uh);
    fe_solver_info_free(&info);
    fe_vector_free(u);
    sv_problem_free(&p);
  }
  cr_log_info("%s: L2 errors %.4g %.4g %.4g, rates %.3f %.3f", fe_cell_name(type), err[0], err[1],
              err[2], log2(err[0] / err[1]), log2(err[1] / err[2]));
  for (int k = 0; k < 2; k++) {
    double rate = log2(err[k] / err[k + 1]);
    cr_expect(rate >= 1.8 && rate <= 2.3, "%s: L2 errors %.4g %.4g %.4g, rate %d->%d = %.3f",
              fe_cell_name(type), err[0], err[1], err[2], 4 << k, 8 << k, rate);
  }
}

Test(solver, p1_tet_manufactured_solution_converges_at_rate_2)
{
  sv_convergence(FE_CELL_TET);
}

Test(solver, q1_hex_manufactured_solution_converges_at_rate_2)
{
  sv_convergence(FE_CELL_HEX);
}

Test(solver, cg_with_b_solves_J_x_equals_b)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  for (int t = 0; t < 2; t++) {
    sv_problem p;
    sv_problem_make(&p, types[t], 5, 0.2, "1 + x[0]*x[1]", "0");
    int n = p.V->ndofs;
    double *xt = malloc(sizeof(double) * n), *xs = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) xt[i] = sin(1.0 + 0.37 * i) + 0.1 * cos(3.1 * i);
    fe_backend *be;
    fe_vector *vxt = NULL, *b = NULL;
    fe_report rep;
    cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
    cr_assert_eq(fe_vector_create(be, FE_DOUBLE, n, &vxt), 0, "%s", fe_error_message());
    cr_assert_eq(fe_vector_set(vxt, xt), 0, "%s", fe_error_message());
    fe_solver_opts o = sv_opts("jacobi", 1e-13, 2000);
    cr_assert_eq(fe_operator_apply(p.A, vxt, NULL, &o.act, &b, &rep), 0, "%s", fe_error_message());
    fe_solver_info info;
    fe_vector *x = sv_solve(&p, b, &o, &info);
    cr_expect_eq(info.converged, 1, "%s", info.reason);
    cr_assert_eq(fe_vector_get(x, xs), 0, "%s", fe_error_message());
    double d = 0, s = 0;
    for (int i = 0; i < n; i++) {
      d = fmax(d, fabs(xs[i] - xt[i]));
      s = fmax(s, fabs(xt[i]));
    }
    cr_expect_leq(d, 1e-9 * s, "%s: |x - x_true| = %.3g (|x_true| = %.3g, %d iterations)",
                  fe_cell_name(types[t]), d, s, info.iterations);
    free(xt), free(xs);
    fe_solver_info_free(&info);
    fe_vector_free(x), fe_vector_free(b), fe_vector_free(vxt);
    sv_problem_free(&p);
  }
}

Test(solver, maxit_reached_is_not_converged)
{
  sv_problem p;
  sv_problem_make(&p, FE_CELL_TET, 4, 0.0, "1", "1");
  fe_solver_opts o = sv_opts("jacobi", 1e-12, 2);
  fe_solver_info info;
  fe_vector *u = sv_solve(&p, NULL, &o, &info);
  cr_expect_eq(info.converged, 0);
  cr_expect_str_eq(info.reason, "maxit");
  cr_expect_eq(info.iterations, 2);
  cr_expect_eq(info.nhistory, 3, "r0 and one norm per iteration");
  cr_expect_gt(info.history[0], info.history[2] * (1 + 1e-12), "two steps reduce the residual");
  fe_solver_info_free(&info);
  cr_expect_null(info.history);
  fe_vector_free(u);
  sv_problem_free(&p);
}

Test(solver, negative_maxit_is_an_error)
{
  sv_problem p;
  sv_problem_make(&p, FE_CELL_TET, 2, 0.0, "1", "1");
  fe_solver_opts o = sv_opts("jacobi", 1e-8, -1);
  fe_solver_info info;
  fe_vector *x = NULL;
  int rc = fe_solve_cg(p.A, NULL, NULL, &o, &x, &info);
  cr_expect_eq(rc, FE_ERR_ARG, "got %d (%s)", rc, fe_error_message());
  cr_expect(strstr(fe_error_message(), "maxit") != NULL, "message: %s", fe_error_message());
  cr_expect_null(x);
  cr_expect_null(info.history);
  /* and an unknown preconditioner too, naming the known ones */
  o = sv_opts("ilu", 1e-8, 10);
  rc = fe_solve_cg(p.A, NULL, NULL, &o, &x, &info);
  cr_expect_eq(rc, FE_ERR_ARG, "got %d (%s)", rc, fe_error_message());
  cr_expect(strstr(fe_error_message(), "ilu") && strstr(fe_error_message(), "jacobi"),
            "message: %s", fe_error_message());
  cr_expect_null(x);
  sv_problem_free(&p);
}

Test(solver, interrupt_stops_cg)
{
  sv_problem p;
  sv_problem_make(&p, FE_CELL_HEX, 4, 0.0, "1", "1");
  fe_solver_opts o = sv_opts("jacobi", 1e-10, 500);
  fe_solver_info info;
  fe_vector *x = NULL;
  fe_interrupt_flag = 1;
  int rc = fe_solve_cg(p.A, NULL, NULL, &o, &x, &info);
  cr_expect_eq(rc, FE_ERR_INTERRUPTED, "got %d (%s)", rc, fe_error_message());
  cr_expect_null(x, "an interrupted solve returns no solution");
  cr_expect_null(info.history);
  cr_expect_eq(fe_interrupt_flag, 0, "the flag is consumed");
  /* the session goes on: the same solve now runs to the end */
  x = sv_solve(&p, NULL, &o, &info);
  cr_expect_eq(info.converged, 1, "%s", info.reason);
  fe_solver_info_free(&info);
  fe_vector_free(x);
  sv_problem_free(&p);
}

/* How sv_solve_via runs CG's vector work on the backend: the engine's unfused fallback (the
 * vector work CG did before the fused steps), the fused steps with the scalars on the host,
 * or the backend's whole table (on the cpu: the scalars in a state, x moved in the direction's
 * pass, (p, q) from the apply where it can). */
enum { SV_UNFUSED, SV_FUSED_HOST, SV_TABLE };

/* The solve of sv_problem p with options o, on backend o->act.backend, its vector work as
 * `via` says. */
static fe_vector *sv_solve_via(sv_problem *p, const fe_solver_opts *o, int via,
                               fe_solver_info *info)
{
  fe_backend *be;
  cr_assert_eq(fe_backend_get(o->act.backend, &be), 0, "%s", fe_error_message());
  const fe_backend_ops *saved = be->ops;
  fe_backend_ops table = *saved;
  table.cg_begin = NULL, table.cg_pq = NULL, table.cg_step = NULL, table.cg_wait = NULL;
  table.cg_end = NULL, table.cg_parts = NULL;
  if (via == SV_UNFUSED) table.cg_update = NULL, table.cg_direction = NULL;
  if (via != SV_TABLE) be->ops = &table;
  fe_vector *x = NULL;
  int rc = fe_solve_cg(p->A, NULL, NULL, o, &x, info);
  be->ops = saved;
  cr_assert_eq(rc, 0, "cg: %s\n%s", fe_error_message(), fe_error_trace());
  return x;
}

/* The largest difference between two vectors of n values, and the largest value of b. */
static double sv_max_diff(const fe_vector *xa, const fe_vector *xb, int n, double *bmax)
{
  double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  cr_assert(a && b);
  cr_assert_eq(fe_vector_get(xa, a), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_get(xb, b), 0, "%s", fe_error_message());
  double dmax = 0, smax = 0;
  for (int i = 0; i < n; i++) {
    dmax = fmax(dmax, fabs(a[i] - b[i]));
    smax = fmax(smax, fabs(b[i]));
  }
  free(a), free(b);
  *bmax = smax;
  return dmax;
}

/* The fused vector work of a CG iteration (one update pass giving (r, r) and (r, z), one
 * direction pass) changes neither the iterations nor the residual history and the
 * solution: on cpu, for vectors this short (summed in order), not even by rounding. */
Test(solver, fused_cg_steps_keep_iterations_history_and_solution)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  const char *pcs[] = {"jacobi", "none"};
  for (int t = 0; t < 2; t++) {
    sv_problem p;
    sv_problem_make(&p, types[t], 8, 0.3, "1 + 20*x[0]*x[0]", "1");
    for (int k = 0; k < 2; k++) {
      fe_solver_opts o = sv_opts(pcs[k], 1e-8, 1000);
      fe_solver_info fi, ui;
      fe_vector *xf = sv_solve_via(&p, &o, SV_FUSED_HOST, &fi);
      fe_vector *xu = sv_solve_via(&p, &o, SV_UNFUSED, &ui);
      const char *what = fe_cell_name(types[t]);
      cr_log_info("%s %s: %d iterations fused, %d unfused", what, pcs[k], fi.iterations,
                  ui.iterations);
      cr_expect_eq(fi.converged, 1, "%s %s: %s", what, pcs[k], fi.reason);
      cr_expect_eq(fi.iterations, ui.iterations, "%s %s: %d iterations fused, %d unfused", what,
                   pcs[k], fi.iterations, ui.iterations);
      int nh = fi.nhistory < ui.nhistory ? fi.nhistory : ui.nhistory;
      for (int i = 0; i < nh; i++)
        cr_expect(fi.history[i] == ui.history[i], "%s %s: |r_%d| = %.17g fused, %.17g unfused",
                  what, pcs[k], i, fi.history[i], ui.history[i]);
      double smax, dmax = sv_max_diff(xf, xu, p.V->ndofs, &smax);
      cr_expect_eq(dmax, 0.0, "%s %s: solutions differ by %.3g (max %.3g)", what, pcs[k], dmax,
                   smax);
      fe_solver_info_free(&fi), fe_solver_info_free(&ui);
      fe_vector_free(xf), fe_vector_free(xu);
    }
    sv_problem_free(&p);
  }
}

/* CG with its scalars in the cpu's state (cg_begin ... cg_end: alpha and beta made there, x
 * moved in the direction's pass, (p, q) from the apply where sumfact adds it) against the
 * fused steps with the scalars on the host: the same iterations, a history and a solution
 * equal to rounding; and no apply past the last step (the cpu's calls are synchronous): the
 * report counts a (p, q) pass fewer a step, or two launches where the apply added (p, q). */
Test(solver, cpu_cg_state_matches_host_scalars)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  const char *pcs[] = {"jacobi", "none"};
  for (int t = 0; t < 2; t++) {
    sv_problem p;
    sv_problem_make(&p, types[t], 8, 0.3, "1 + 20*x[0]*x[0]", "1");
    for (int k = 0; k < 2; k++) {
      fe_solver_opts o = sv_opts(pcs[k], 1e-8, 1000);
      if (types[t] == FE_CELL_HEX) o.act.strategy = "sumfact"; /* which adds (p, q) */
      fe_solver_info si, hi;
      fe_vector *xs = sv_solve_via(&p, &o, SV_TABLE, &si);
      fe_vector *xh = sv_solve_via(&p, &o, SV_FUSED_HOST, &hi);
      const char *what = fe_cell_name(types[t]);
      cr_log_info("%s %s: %d iterations in the state ((p, q) from the apply: %d), %d on the host",
                  what, pcs[k], si.iterations, si.pq_from_apply, hi.iterations);
      cr_expect_eq(si.converged, 1, "%s %s: %s", what, pcs[k], si.reason);
      cr_expect_eq(si.pq_from_apply, types[t] == FE_CELL_HEX, "%s %s: (p, q) from the apply %d",
                   what, pcs[k], si.pq_from_apply);
      cr_expect_eq(si.iterations, hi.iterations, "%s %s: %d iterations in the state, %d on the host",
                   what, pcs[k], si.iterations, hi.iterations);
      for (int i = 0; i < si.nhistory && i < hi.nhistory; i++)
        cr_expect(fabs(si.history[i] - hi.history[i]) <= 1e-10 * hi.history[0],
                  "%s %s: |r_%d| = %.17g in the state, %.17g on the host", what, pcs[k], i,
                  si.history[i], hi.history[i]);
      double smax, dmax = sv_max_diff(xs, xh, p.V->ndofs, &smax);
      cr_expect_leq(dmax, 1e-12 * smax, "%s %s: solutions differ by %.3g (max %.3g)", what,
                    pcs[k], dmax, smax);
      cr_expect_eq(hi.report.launches - si.report.launches,
                   si.iterations * (si.pq_from_apply ? 1 : 0),
                   "%s %s: %d launches in the state, %d on the host over %d iterations", what,
                   pcs[k], si.report.launches, hi.report.launches, si.iterations);
      fe_solver_info_free(&si), fe_solver_info_free(&hi);
      fe_vector_free(xs), fe_vector_free(xh);
    }
    sv_problem_free(&p);
  }
}
