/* Operators on the cpu backend: the Jacobian action is the derivative of the residual, is
 * symmetric, has the diagonal the diagonal action reports and kills constants; single and
 * double precision and every block size agree; reports are consistent; bad input (physics
 * that does not compile, unknown names, an inverted cell, Ctrl-C) gives clear errors; the
 * printed source holds every phase; and opencl, where present, matches cpu. */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/codegen/codegen.h"
#include "engine/matrix/matrix.h"
#include "engine/operator/operator.h"
#include "engine/operator/strategy.h"
#include "tests/unit/fixtures.h"

/* The cache of compiled kernels and calibrations, unless the runner chose one. */
static void op_suite_init(void) { setenv("FELAB_CACHE", "/tmp/felab-test-cache", 0); }

/* Close the backends and drop the session log, so that leak checking sees nothing. */
static void op_suite_fini(void)
{
  fe_backend_shutdown();
  fe_perf_log_clear();
}

TestSuite(operator, .init = op_suite_init, .fini = op_suite_fini);

/* A mesh, its space, Poisson physics and the operator, freed together. */
typedef struct op_problem {
  fe_mesh *m;
  fe_space *V;
  fe_physics *pde;
  fe_operator *A;
} op_problem;

/* A box of n^3 cubes of type (tet or hex) on [0,1]^3. */
static fe_mesh *op_box(fe_cell_type type, int n)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = o.cells[1] = o.cells[2] = n;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

/* Space (P1 or Q1 by cell type), physics and operator on mesh m (taken over). */
static void op_problem_on(op_problem *p, fe_mesh *m, const char *kappa, const char *source,
                          const char *const *dir, int ndir)
{
  memset(p, 0, sizeof *p);
  p->m = m;
  const char *name = m->type == FE_CELL_HEX ? "Q1" : "P1";
  cr_assert_eq(fe_space_create(m, name, &p->V), 0, "%s", fe_error_message());
  cr_assert_eq(fe_physics_poisson(kappa, source, &p->pde), 0, "%s", fe_error_message());
  cr_assert_eq(fe_operator_create(p->V, p->pde, dir, ndir, 0.25, &p->A), 0, "%s",
               fe_error_message());
}

/* The standard test problem: variable kappa, unit source, on a box of n^3 cubes. */
static void op_problem_make(op_problem *p, fe_cell_type type, int n, const char *const *dir,
                            int ndir)
{
  op_problem_on(p, op_box(type, n), "1 + x[0]*x[1]", "1", dir, ndir);
}

static void op_problem_free(op_problem *p)
{
  fe_operator_free(p->A);
  fe_physics_free(p->pde);
  fe_space_free(p->V);
  fe_mesh_free(p->m);
  memset(p, 0, sizeof *p);
}

/* Space `space`, Poisson with kappa and a unit source, and its operator (no constraints) on a
 * box of n^3 cubes of type. */
static void op_problem_space(op_problem *p, fe_cell_type type, int n, const char *space,
                             const char *kappa)
{
  memset(p, 0, sizeof *p);
  p->m = op_box(type, n);
  cr_assert_eq(fe_space_create(p->m, space, &p->V), 0, "%s", fe_error_message());
  cr_assert_eq(fe_physics_poisson(kappa, "1", &p->pde), 0, "%s", fe_error_message());
  cr_assert_eq(fe_operator_create(p->V, p->pde, NULL, 0, 0.0, &p->A), 0, "%s", fe_error_message());
}

/* Options for backend be in precision prec with block cells per group (0: automatic: none
 * given). A block is given as a caller writes it (o.given), in one of a few lists kept here:
 * enough for the options a test holds at once. */
static fe_action_opts op_opts(const char *be, fe_precision prec, int block)
{
  static fe_options lists[8];
  static int next;
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = be;
  o.precision = (int)prec;
  if (block > 0) {
    fe_options *g = &lists[next++ % 8];
    g->n = 0;
    cr_assert_eq(fe_options_number(g, "block", block), 0, "%s", fe_error_message());
    o.given = g;
  }
  return o;
}

/* Deterministic pseudo-random value in [-1, 1) for index i and a seed. */
static double op_rand(size_t i, unsigned seed)
{
  unsigned long long h = (i + 1) * 6364136223846793005ULL + (seed + 1) * 1442695040888963407ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return -1.0 + 2.0 * (double)(h >> 11) / 9007199254740992.0;
}

/* A double cpu vector holding the host values v[n]. */
static fe_vector *op_vector(const double *v, int n)
{
  fe_backend *be;
  fe_vector *x = NULL;
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_create(be, FE_DOUBLE, n, &x), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_set(x, v), 0, "%s", fe_error_message());
  return x;
}

/* n random host values (caller frees). */
static double *op_random(int n, unsigned seed)
{
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) v[i] = op_rand((size_t)i, seed);
  return v;
}

/* Run an action ("residual": on u; "apply": on u as direction; "diagonal": u ignored) and
 * return its result as host doubles (caller frees); *rep gets the report if rep != NULL. */
static double *op_run(op_problem *p, const char *action, const fe_vector *u,
                      const fe_action_opts *o, fe_report *rep)
{
  fe_vector *y = NULL;
  fe_report r;
  int rc = !strcmp(action, "residual") ? fe_operator_residual(p->A, u, o, &y, &r)
           : !strcmp(action, "apply")  ? fe_operator_apply(p->A, u, NULL, o, &y, &r)
                                       : fe_operator_diagonal(p->A, NULL, o, &y, &r);
  cr_assert_eq(rc, 0, "%s: %s\n%s", action, fe_error_message(), fe_error_trace());
  cr_assert_eq(y->n, p->V->ndofs);
  double *h = malloc(sizeof(double) * (size_t)y->n);
  cr_assert_eq(fe_vector_get(y, h), 0, "%s", fe_error_message());
  fe_vector_free(y);
  if (rep) *rep = r;
  return h;
}

/* Largest |a_i - b_i| divided by the largest |a_i| (absolute when a is zero). */
static double op_reldiff(const double *a, const double *b, int n)
{
  double d = 0, s = 0;
  for (int i = 0; i < n; i++) {
    d = fmax(d, fabs(a[i] - b[i]));
    s = fmax(s, fabs(a[i]));
  }
  return s > 0 ? d / s : d;
}

/* Largest |a_i|. */
static double op_infnorm(const double *a, int n)
{
  double s = 0;
  for (int i = 0; i < n; i++) s = fmax(s, fabs(a[i]));
  return s;
}

static const fe_cell_type op_types[2] = {FE_CELL_TET, FE_CELL_HEX};
static const int op_sizes[2] = {4, 3}; /* tet 4x4x4, hex 3x3x3 */

Test(operator, apply_equals_residual_difference)
{
  const char *tags[] = {"xmin", "ymax", "zmin"};
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  for (int t = 0; t < 2; t++)
    for (int bc = 0; bc < 2; bc++) {
      op_problem p;
      op_problem_make(&p, op_types[t], op_sizes[t], bc ? tags : NULL, bc ? 3 : 0);
      int n = p.V->ndofs;
      double *u = op_random(n, 1), *w = op_random(n, 2), *uw = malloc(sizeof(double) * n);
      int *nodes = NULL, nn = 0;
      if (bc) cr_assert_eq(fe_space_boundary_nodes(p.V, tags, 3, &nodes, &nn), 0);
      /* J sees w with its constrained entries zeroed (operator.h), which is the derivative
       * of the residual only along directions that keep the boundary values: so w = 0 on
       * constrained nodes, while u stays arbitrary there */
      for (int k = 0; k < nn; k++) w[nodes[k]] = 0;
      for (int i = 0; i < n; i++) uw[i] = u[i] + w[i];
      fe_vector *vu = op_vector(u, n), *vw = op_vector(w, n), *vuw = op_vector(uw, n);
      double *ru = op_run(&p, "residual", vu, &o, NULL);
      double *ruw = op_run(&p, "residual", vuw, &o, NULL);
      double *aw = op_run(&p, "apply", vw, &o, NULL);
      /* on constrained rows: (u + w - g) - (u - g) = w = (J w)_i, so all rows compare */
      double scale = fmax(op_infnorm(ru, n), op_infnorm(ruw, n)), err = 0;
      for (int i = 0; i < n; i++) err = fmax(err, fabs(ruw[i] - ru[i] - aw[i]));
      cr_expect_leq(err, 1e-12 * scale, "%s, %s: |r(u+w) - r(u) - J w| = %.3g, scale %.3g",
                    fe_cell_name(op_types[t]), bc ? "dirichlet" : "no bc", err, scale);
      cr_expect_eq(fe_operator_ndirichlet(p.A), nn);
      if (bc) { /* a direction moving only constrained nodes: J w is w there, 0 elsewhere */
        for (int i = 0; i < n; i++) w[i] = 0;
        for (int k = 0; k < nn; k++) w[nodes[k]] = 1.0 + k;
        fe_vector *vb = op_vector(w, n);
        double *ab = op_run(&p, "apply", vb, &o, NULL);
        for (int k = 0; k < nn; k++) cr_expect_eq(ab[nodes[k]], 1.0 + k, "row %d", nodes[k]);
        for (int i = 0, k = 0; i < n; i++) {
          if (k < nn && nodes[k] == i) {
            k++;
            continue;
          }
          cr_expect_eq(ab[i], 0.0, "interior row %d does not see constrained columns", i);
        }
        free(ab);
        fe_vector_free(vb);
      }
      free(nodes);
      free(ru), free(ruw), free(aw), free(u), free(w), free(uw);
      fe_vector_free(vu), fe_vector_free(vw), fe_vector_free(vuw);
      op_problem_free(&p);
    }
}

Test(operator, apply_is_symmetric)
{
  const char *all[] = {"all"};
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], all, 1);
    int n = p.V->ndofs;
    double *v = op_random(n, 3), *w = op_random(n, 4);
    fe_vector *vv = op_vector(v, n), *vw = op_vector(w, n);
    double *av = op_run(&p, "apply", vv, &o, NULL), *aw = op_run(&p, "apply", vw, &o, NULL);
    double vaw = 0, wav = 0, mag = 0;
    for (int i = 0; i < n; i++) {
      vaw += v[i] * aw[i];
      wav += w[i] * av[i];
      mag += fabs(v[i] * aw[i]) + fabs(w[i] * av[i]);
    }
    cr_expect_leq(fabs(vaw - wav), 1e-12 * mag, "%s: v.Aw = %.17g, w.Av = %.17g",
                  fe_cell_name(op_types[t]), vaw, wav);
    free(v), free(w), free(av), free(aw);
    fe_vector_free(vv), fe_vector_free(vw);
    op_problem_free(&p);
  }
}

Test(operator, diagonal_matches_apply_on_unit_vectors)
{
  const char *tags[] = {"xmin"};
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], 2, tags, 1); /* 27 nodes */
    int n = p.V->ndofs;
    double *d = op_run(&p, "diagonal", NULL, &o, NULL), *e = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
      e[i] = 1;
      fe_vector *ve = op_vector(e, n);
      double *ae = op_run(&p, "apply", ve, &o, NULL);
      cr_expect_leq(fabs(ae[i] - d[i]), 1e-12 * fabs(d[i]),
                    "%s: diag[%d] = %.17g, (A e_i)_i = %.17g",
                    fe_cell_name(op_types[t]), i, d[i], ae[i]);
      cr_expect_gt(d[i], 0, "the diagonal of a Laplacian is positive");
      free(ae);
      fe_vector_free(ve);
      e[i] = 0;
    }
    free(d), free(e);
    op_problem_free(&p);
  }
}

Test(operator, apply_of_constant_is_zero_without_bc)
{
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], NULL, 0);
    int n = p.V->ndofs;
    double *c = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) c[i] = 3.0;
    fe_vector *vc = op_vector(c, n);
    double *ac = op_run(&p, "apply", vc, &o, NULL), *d = op_run(&p, "diagonal", NULL, &o, NULL);
    double scale = 3.0 * op_infnorm(d, n), err = op_infnorm(ac, n);
    cr_expect_leq(err, 1e-12 * scale, "%s: |A 3| = %.3g, 3 max diag = %.3g",
                  fe_cell_name(op_types[t]), err, scale);
    free(c), free(ac), free(d);
    fe_vector_free(vc);
    op_problem_free(&p);
  }
}

Test(operator, float_precision_close_to_double)
{
  const char *tags[] = {"xmax"};
  fe_action_opts od = op_opts("cpu", FE_DOUBLE, 0), of = op_opts("cpu", FE_FLOAT, 0);
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], tags, 1);
    int n = p.V->ndofs;
    double *w = op_random(n, 5);
    fe_vector *vw = op_vector(w, n);
    const char *actions[] = {"residual", "apply", "diagonal"};
    for (int a = 0; a < 3; a++) {
      double *yd = op_run(&p, actions[a], vw, &od, NULL);
      double *yf = op_run(&p, actions[a], vw, &of, NULL);
      double rel = op_reldiff(yd, yf, n);
      cr_expect_leq(rel, 1e-5, "%s %s: single vs double %.3g", fe_cell_name(op_types[t]),
                    actions[a], rel);
      cr_expect_gt(rel, 0, "single precision gave bit-identical results: was it really single?");
      free(yd), free(yf);
    }
    free(w);
    fe_vector_free(vw);
    op_problem_free(&p);
  }
}

Test(operator, block_size_does_not_change_result)
{
  const char *tags[] = {"ymin"};
  const int blocks[] = {64, 1, 7};
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], tags, 1);
    int n = p.V->ndofs;
    double *w = op_random(n, 6);
    fe_vector *vw = op_vector(w, n);
    const char *actions[] = {"residual", "apply", "diagonal"};
    for (int a = 0; a < 3; a++) {
      fe_action_opts o0 = op_opts("cpu", FE_DOUBLE, blocks[0]);
      double *y0 = op_run(&p, actions[a], vw, &o0, NULL);
      for (int b = 1; b < 3; b++) {
        fe_action_opts ob = op_opts("cpu", FE_DOUBLE, blocks[b]);
        double *yb = op_run(&p, actions[a], vw, &ob, NULL), rel = op_reldiff(y0, yb, n);
        cr_expect_leq(rel, 1e-13, "%s %s: block %d vs %d differ by %.3g",
                      fe_cell_name(op_types[t]), actions[a], blocks[b], blocks[0], rel);
        free(yb);
      }
      free(y0);
    }
    free(w);
    fe_vector_free(vw);
    op_problem_free(&p);
  }
}

Test(operator, report_counts_are_positive_and_consistent)
{
  const char *all[] = {"all"};
  const char *actions[] = {"residual", "apply", "diagonal"};
  const int vectors[] = {2, 2, 1}; /* vectors each action must at least read or write */
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], all, 1);
    int n = p.V->ndofs;
    double *w = op_random(n, 7);
    fe_vector *vw = op_vector(w, n);
    for (int a = 0; a < 3; a++) {
      fe_report r[2];
      for (int prec = 0; prec < 2; prec++) {
        fe_action_opts o = op_opts("cpu", (fe_precision)prec, 0);
        int logged = fe_perf_log_count();
        free(op_run(&p, actions[a], vw, &o, &r[prec]));
        cr_expect_eq(fe_perf_log_count(), logged + 1, "every action is logged once");
        o.nolog = 1;
        free(op_run(&p, actions[a], vw, &o, NULL));
        cr_expect_eq(fe_perf_log_count(), logged + 1, "nolog keeps the call out of the log");
        const fe_report *q = &r[prec];
        double wbytes = (double)fe_precision_size((fe_precision)prec);
        cr_expect_str_eq(q->action, actions[a]);
        cr_expect_str_eq(q->backend, "cpu");
        cr_expect_str_eq(q->precision, fe_precision_name((fe_precision)prec));
        /* the default: for this linear first-order problem csr (measured fastest: csr.c),
         * its residual and diagonal matrix-free; and why */
        cr_expect(!strcmp(q->strategy, "csr"), "strategy '%s'", q->strategy);
        cr_expect(strstr(q->why, "default") != NULL, "the report says why: '%s'", q->why);
        cr_expect_eq(q->ncells, p.m->ncells);
        cr_expect_eq(q->ndofs, n);
        cr_expect_gt(q->flops, 0);
        cr_expect_geq(q->bytes, vectors[a] * n * wbytes, "%s: bytes %.0f < %d vectors of %d",
                      actions[a], q->bytes, vectors[a], n);
        if (a != 1) /* csr's product reads the matrix instead (its counts: test_matrix.lua) */
          cr_expect_geq(q->bytes, p.m->ncells * p.V->elem.nbasis * 4.0, "the cell map is read");
        cr_expect_gt(q->predicted_seconds, 0);
        cr_expect_geq(q->seconds, 0);
        cr_expect_geq(q->launches, 2, "integration plus the constrained rows");
        cr_expect_gt(q->peak_gbytes, 0);
        cr_expect_gt(q->peak_gflops, 0);
        /* the bound names the ceiling whose time alone is the largest; the prediction is at
         * least the DRAM and FMA times (the DRAM time at the DRAM rate where the call's bytes
         * do not fit the last-level cache, llc_share 1), and the largest ceiling plus the
         * launches */
        int bound = -1;
        double most = 0;
        for (int c = 0; c < FE_NCEILINGS; c++)
          if (q->ceiling_seconds[c] > most) most = q->ceiling_seconds[c], bound = c;
        cr_expect(bound >= 0, "some ceiling has a time");
        cr_expect_str_eq(q->bound, fe_ceiling_name(bound));
        double tm = q->llc_share >= 1 ? q->bytes / (q->peak_gbytes * 1e9) : 0;
        double tc = q->flops / (q->peak_gflops * 1e9);
        cr_expect_geq(q->ceiling_seconds[FE_CEIL_DRAM], tm * (1 - 1e-12));
        cr_expect_geq(q->ceiling_seconds[FE_CEIL_FMA], tc * (1 - 1e-12));
        cr_expect_geq(q->predicted_seconds, fmax(tm, tc) * (1 - 1e-12));
      }
      /* one strategy and one geometry in both precisions (the defaults may differ: on Q1
       * hexes the model's near ties, transpose or sumfact and sumfact's stored or vertices
       * geometry, fall either way with the calibration) */
      fe_report s[2];
      for (int prec = 0; prec < 2; prec++) {
        fe_action_opts o = op_opts("cpu", (fe_precision)prec, 0);
        o.strategy = r[0].strategy;
        fe_options stored = {0};
        if (!strcmp(o.strategy, "sumfact")) { /* given as a caller writes it */
          cr_assert_eq(fe_options_string(&stored, "geometry", "stored"), 0);
          o.given = &stored;
        }
        o.nolog = 1;
        free(op_run(&p, actions[a], vw, &o, &s[prec]));
      }
      cr_expect_str_eq(s[1].strategy, r[0].strategy);
      cr_expect_eq(s[0].flops, s[1].flops, "%s: flops do not depend on precision", actions[a]);
      cr_expect_lt(s[1].bytes, s[0].bytes, "%s: single moves fewer bytes", actions[a]);
    }
    free(w);
    fe_vector_free(vw);
    op_problem_free(&p);
  }
}

Test(operator, compile_error_names_generated_line)
{
  op_problem p;
  op_problem_on(&p, op_box(FE_CELL_TET, 1), "1 + + x[0]*", "1", NULL, 0);
  fe_vector *u = NULL;
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  cr_assert_eq(fe_operator_initial(p.A, &o, 1.0, &u), 0, "%s", fe_error_message());
  fe_vector *r = NULL;
  fe_report rep;
  int rc = fe_operator_residual(p.A, u, &o, &r, &rep);
  const char *msg = fe_error_message();
  cr_expect_eq(rc, FE_ERR_COMPILE, "got %d (%s)", rc, msg);
  cr_expect_null(r);
  cr_expect(strstr(msg, "generated line") != NULL, "message: %s", msg);
  cr_expect(strstr(msg, "1 + + x[0]*") != NULL, "the quoted line shows the kappa: %s", msg);
  fe_vector_free(u);
  op_problem_free(&p);
}

Test(operator, unknown_backend_and_strategy_are_errors)
{
  op_problem p;
  op_problem_make(&p, FE_CELL_TET, 1, NULL, 0);
  fe_vector *y = NULL;
  fe_report rep;
  fe_action_opts o = op_opts("nosuch", FE_DOUBLE, 0);
  int rc = fe_operator_diagonal(p.A, NULL, &o, &y, &rep);
  const char *msg = fe_error_message();
  cr_expect_eq(rc, FE_ERR_ARG, "got %d (%s)", rc, msg);
  cr_expect(strstr(msg, "nosuch") && strstr(msg, "cpu") && strstr(msg, "opencl") &&
                strstr(msg, "cuda"),
            "the message names the backend and lists the known ones: %s", msg);
  cr_expect_null(y);

  o = op_opts("cpu", FE_DOUBLE, 0);
  o.strategy = "nosuch";
  rc = fe_operator_diagonal(p.A, NULL, &o, &y, &rep);
  msg = fe_error_message();
  cr_expect_eq(rc, FE_ERR_ARG, "got %d (%s)", rc, msg);
  cr_expect(strstr(msg, "nosuch") && strstr(msg, "transpose"), "lists the strategies: %s", msg);
  cr_expect_null(y);
  char *src = NULL;
  cr_expect_neq(fe_operator_source(p.A, "residual", &o, &src), 0, "source checks the strategy");
  cr_expect_neq(fe_operator_source(p.A, "nosuch", NULL, &src), 0);
  cr_expect(strstr(fe_error_message(), "residual") != NULL, "lists actions: %s",
            fe_error_message());
  cr_expect_null(src);
  op_problem_free(&p);
}

Test(operator, unknown_dirichlet_tag_lists_known_tags)
{
  fe_mesh *m = op_box(FE_CELL_HEX, 1);
  fe_space *V = NULL;
  fe_physics *pde = NULL;
  fe_operator *A = NULL;
  cr_assert_eq(fe_space_create(m, "Q1", &V), 0, "%s", fe_error_message());
  cr_assert_eq(fe_physics_poisson("1", "1", &pde), 0, "%s", fe_error_message());
  const char *tags[] = {"xmin", "xmn"};
  int rc = fe_operator_create(V, pde, tags, 2, 0.0, &A);
  const char *msg = fe_error_message();
  cr_expect_eq(rc, FE_ERR_ARG, "got %d (%s)", rc, msg);
  cr_expect_null(A);
  const char *known[] = {"'xmn'", "xmin", "xmax", "ymin", "ymax", "zmin", "zmax"};
  for (int i = 0; i < 7; i++)
    cr_expect(strstr(msg, known[i]) != NULL, "no %s in: %s", known[i], msg);
  fe_operator_free(A);
  fe_physics_free(pde);
  fe_space_free(V);
  fe_mesh_free(m);
}

Test(operator, inverted_cell_is_reported)
{
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  for (int t = 0; t < 2; t++) {
    fe_mesh *m = op_box(op_types[t], 2);
    int *c = m->cells + 5 * m->nvc, tmp = c[0]; /* swap vertices 0 and 1 of cell 5 */
    c[0] = c[1];
    c[1] = tmp;
    m->positive = 0; /* edited in place: no longer known positive (engine/mesh/mesh.h) */
    fe_mesh_forget_classes(m);
    op_problem p;
    op_problem_on(&p, m, "1", "1", NULL, 0);
    fe_vector *d = NULL;
    fe_report rep;
    int rc = fe_operator_diagonal(p.A, NULL, &o, &d, &rep);
    const char *msg = fe_error_message();
    cr_expect_eq(rc, FE_ERR_MESH, "%s: got %d (%s)", fe_cell_name(op_types[t]), rc, msg);
    cr_expect(strstr(msg, "cell 5") != NULL, "%s: message names the cell: %s",
              fe_cell_name(op_types[t]), msg);
    cr_expect_null(d);
    op_problem_free(&p);
  }
}

Test(operator, interrupt_flag_stops_an_action)
{
  op_problem p;
  op_problem_make(&p, FE_CELL_TET, 2, NULL, 0);
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  fe_vector *u = NULL, *r = NULL;
  fe_report rep;
  cr_assert_eq(fe_operator_initial(p.A, &o, 1.0, &u), 0, "%s", fe_error_message());
  fe_interrupt_flag = 1;
  int rc = fe_operator_residual(p.A, u, &o, &r, &rep);
  cr_expect_eq(rc, FE_ERR_INTERRUPTED, "got %d (%s)", rc, fe_error_message());
  cr_expect_null(r, "an interrupted action returns no vector");
  cr_expect_eq(fe_interrupt_flag, 0, "the flag is consumed");
  rc = fe_operator_residual(p.A, u, &o, &r, &rep);
  cr_expect_eq(rc, 0, "the next action works: %s", fe_error_message());
  cr_expect_not_null(r);
  fe_vector_free(r);
  fe_vector_free(u);
  op_problem_free(&p);
}

Test(operator, source_contains_the_phases)
{
  op_problem p;
  op_problem_make(&p, FE_CELL_TET, 1, NULL, 0);
  fe_backend *be;
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  const char *actions[] = {"residual", "apply", "diagonal"};
  const char *bodies[] = {"kappa * du[d]", "kappa * dw[d]", "kappa * dw[d]"};
  const char *entries[] = {"fe_integrate", "fe_integrate", "fe_diagonal"};
  for (int prec = 0; prec < 2; prec++)
    for (int a = 0; a < 3; a++) {
      fe_action_opts o = op_opts("cpu", (fe_precision)prec, 0);
      o.strategy = "transpose"; /* its phases (the default, csr, is an SpMV) */
      char *src = NULL;
      cr_assert_eq(fe_operator_source(p.A, actions[a], &o, &src), 0, "%s", fe_error_message());
      if (a < 2) {
        cr_expect(strstr(src, "quadrature phase") != NULL, "%s: no quadrature phase", actions[a]);
        cr_expect(strstr(src, "basis phase") != NULL, "%s: no basis phase", actions[a]);
        cr_expect(strstr(src, "gather phase") != NULL, "%s: no gather phase", actions[a]);
      }
      cr_expect(strstr(src, bodies[a]) != NULL, "%s: no physics body '%s'", actions[a], bodies[a]);
      cr_expect(strstr(src, "1 + x[0]*x[1]") != NULL, "%s: no kappa", actions[a]);
      cr_expect(strstr(src, entries[a]) != NULL, "%s: no entry %s", actions[a], entries[a]);
      cr_expect(strstr(src, be->ops->preamble(be->impl, (fe_precision)prec)) != NULL,
                "%s: no backend preamble", actions[a]);
      char def[32];
      snprintf(def, sizeof def, "#define FE_DOUBLE %d", prec == 0);
      cr_expect(strstr(src, def) != NULL, "%s: no '%s'", actions[a], def);
      free(src);
    }
  op_problem_free(&p);
}


Test(operator, opencl_matches_cpu)
{
  fe_backend *cl = test_backend_or_skip("opencl");
  const char *tags[] = {"xmin", "zmax"};
  const char *actions[] = {"residual", "apply", "diagonal"};
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, op_types[t], op_sizes[t], tags, 2);
    int n = p.V->ndofs;
    double *w = op_random(n, 8);
    fe_vector *vw = op_vector(w, n);
    for (int prec = 0; prec < 2; prec++) {
      if (prec == FE_DOUBLE && !cl->info.fp64) continue;
      double tol = prec == FE_DOUBLE ? 1e-12 : 1e-5;
      fe_action_opts oc = op_opts("cpu", (fe_precision)prec, 0);
      fe_action_opts ol = op_opts("opencl", (fe_precision)prec, 0);
      for (int a = 0; a < 3; a++) {
        fe_report rep;
        double *yc = op_run(&p, actions[a], vw, &oc, NULL);
        double *yl = op_run(&p, actions[a], vw, &ol, &rep);
        double rel = op_reldiff(yc, yl, n);
        cr_log_info("%s %s %s: opencl vs cpu %.3g", fe_cell_name(op_types[t]),
                    fe_precision_name((fe_precision)prec), actions[a], rel);
        cr_expect_str_eq(rep.backend, "opencl");
        if (prec == FE_FLOAT) { /* and single really is single on opencl */
          fe_action_opts od = op_opts("cpu", FE_DOUBLE, 0);
          double *yd = op_run(&p, actions[a], vw, &od, NULL), reld = op_reldiff(yd, yl, n);
          cr_expect(reld > 0 && reld <= 1e-5, "%s %s: opencl single vs cpu double %.3g",
                    fe_cell_name(op_types[t]), actions[a], reld);
          free(yd);
        }
        cr_expect_leq(rel, tol, "%s %s %s: opencl vs cpu %.3g", fe_cell_name(op_types[t]),
                      fe_precision_name((fe_precision)prec), actions[a], rel);
        free(yc), free(yl);
      }
    }
    free(w);
    fe_vector_free(vw);
    op_problem_free(&p);
  }
}

/* Cells in random order (as a mesh file may give them) need too many colors for groups of
 * consecutive cells; the operator then groups them along a Morton curve, and the results
 * are the same as on the ordered mesh. */
Test(operator, shuffled_cells_give_the_same_results)
{
  op_problem a, b;
  fe_mesh *m = op_box(FE_CELL_TET, 8);
  for (int c = m->ncells - 1; c > 0; c--) { /* Fisher-Yates with a fixed sequence */
    int k = (int)((op_rand((size_t)c, 7) + 1) * 0.5 * (c + 1));
    if (k > c) k = c;
    for (int j = 0; j < m->nvc; j++) {
      int t = m->cells[(size_t)c * m->nvc + j];
      m->cells[(size_t)c * m->nvc + j] = m->cells[(size_t)k * m->nvc + j];
      m->cells[(size_t)k * m->nvc + j] = t;
    }
  }
  fe_mesh_forget_classes(m); /* edited in place (engine/mesh/mesh.h) */
  op_problem_make(&a, FE_CELL_TET, 8, NULL, 0);
  op_problem_on(&b, m, "1 + x[0]*x[1]", "1", NULL, 0);
  int n = a.V->ndofs;
  double *uh = op_random(n, 3);
  fe_vector *u = op_vector(uh, n);
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  const char *actions[] = {"residual", "apply", "diagonal"};
  for (int i = 0; i < 3; i++) {
    double *ya = op_run(&a, actions[i], u, &o, NULL), *yb = op_run(&b, actions[i], u, &o, NULL);
    double d = op_reldiff(ya, yb, n);
    cr_expect_leq(d, 1e-13, "%s: shuffled cells differ by %g", actions[i], d);
    free(ya);
    free(yb);
  }
  fe_vector_free(u);
  free(uh);
  op_problem_free(&a);
  op_problem_free(&b);
}

/* ---- higher orders and vector spaces ---- */

/* A vector Laplacian with a different coefficient per component, as raw bodies: component
 * k of f1 is (k + 1) grad u_k. Its action on a vector space is three scalar actions. */
static fe_physics *op_vector_laplacian(void)
{
  fe_physics *p = calloc(1, sizeof *p);
  snprintf(p->name, sizeof p->name, "vector-laplacian");
  p->ncomp = 3;
  p->f1 = strdup("FE_UNROLL for (int k = 0; k < NC; k++) FE_UNROLL for (int d = 0; d < DIM; d++) "
                 "f1[k * DIM + d] = (k + 1) * du[k * DIM + d];");
  p->df1 = strdup("FE_UNROLL for (int k = 0; k < NC; k++) FE_UNROLL for (int d = 0; d < DIM; d++) "
                  "df1[k * DIM + d] = (k + 1) * dw[k * DIM + d];");
  p->flops_f = p->flops_df = 9;
  p->description = strdup("-(k+1) lap u_k = 0");
  return p;
}

Test(operator, vector_space_acts_per_component)
{
  const char *tags[] = {"xmin", "zmax"};
  for (int t = 0; t < 2; t++) {
    fe_mesh *m = op_box(op_types[t], 2);
    fe_space_opts so = {.family = t ? 'Q' : 'P', .order = 2, .ncomp = 3, .kind = FE_NODES_GLL};
    op_problem s; /* the scalar problem, kappa 1, no source */
    op_problem_on(&s, m, "1", "0", tags, 2);
    fe_space_free(s.V); /* redo it as P2/Q2 */
    fe_operator_free(s.A);
    cr_assert_eq(fe_space_create(m, t ? "Q2" : "P2", &s.V), 0);
    cr_assert_eq(fe_operator_create(s.V, s.pde, tags, 2, 0.25, &s.A), 0);
    fe_space *V3;
    cr_assert_eq(fe_space_create_opts(m, &so, &V3), 0, "%s", fe_error_message());
    fe_physics *p3 = op_vector_laplacian();
    fe_operator *A3;
    cr_assert_eq(fe_operator_create(V3, p3, tags, 2, 0.25, &A3), 0, "%s", fe_error_message());
    int n = s.V->ndofs;
    double *w = op_random(3 * n, 21), *wk = malloc(sizeof(double) * n);
    fe_vector *v3 = op_vector(w, 3 * n), *y3 = NULL;
    fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
    fe_report rep;
    cr_assert_eq(fe_operator_apply(A3, v3, NULL, &o, &y3, &rep), 0, "%s", fe_error_message());
    double *h3 = malloc(sizeof(double) * 3 * n);
    cr_assert_eq(fe_vector_get(y3, h3), 0);
    for (int k = 0; k < 3; k++) {
      for (int i = 0; i < n; i++) wk[i] = w[3 * i + k];
      fe_vector *vk = op_vector(wk, n);
      double *yk = op_run(&s, "apply", vk, &o, NULL), worst = 0;
      for (int i = 0; i < n; i++) {
        /* constrained rows are the identity in both, free rows scale with k + 1 */
        double want = yk[i] == wk[i] ? yk[i] : (k + 1) * yk[i];
        worst = fmax(worst, fabs(h3[3 * i + k] - want));
      }
      cr_expect_lt(worst, 1e-12 * (1 + op_infnorm(yk, n)), "%s component %d off by %g",
                   fe_cell_name(m->type), k, worst);
      free(yk);
      fe_vector_free(vk);
    }
    free(h3);
    free(w);
    free(wk);
    fe_vector_free(v3);
    fe_vector_free(y3);
    fe_operator_free(A3);
    fe_physics_free(p3);
    fe_space_free(V3);
    op_problem_free(&s);
  }
}

/* For every order and cell type: the Jacobian action is symmetric, and matches the
 * difference of residuals (the physics is linear), on cpu; opencl agrees with cpu. */
Test(operator, high_orders_are_symmetric_and_consistent)
{
  const struct {
    fe_cell_type t;
    const char *space;
    int n;
  } cs[] = {{FE_CELL_TET, "P3", 2}, {FE_CELL_HEX, "Q4", 2}, {FE_CELL_PRISM, "P3", 2},
            {FE_CELL_TRI, "P5", 3}, {FE_CELL_QUAD, "Q6", 2}};
  const char *tags[] = {"xmin", "ymax"};
  fe_backend *cl = NULL;
  if (fe_backend_get("opencl", &cl)) {
    cl = NULL;
    fe_error_clear();
  }
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    fe_box_opts bo;
    fe_box_opts_default(&bo);
    bo.type = cs[c].t;
    bo.cells[0] = bo.cells[1] = cs[c].n;
    bo.cells[2] = fe_cell_dim(cs[c].t) == 3 ? cs[c].n : 0;
    bo.distort = 0.3;
    fe_mesh *m;
    cr_assert_eq(fe_mesh_box(&bo, &m), 0);
    op_problem p;
    memset(&p, 0, sizeof p);
    p.m = m;
    cr_assert_eq(fe_space_create(m, cs[c].space, &p.V), 0, "%s", fe_error_message());
    cr_assert_eq(fe_physics_poisson("1 + x[0]*x[1]", "1", &p.pde), 0);
    cr_assert_eq(fe_operator_create(p.V, p.pde, tags, 2, 0.25, &p.A), 0);
    int n = p.V->ndofs;
    double *a = op_random(n, 3), *b = op_random(n, 4);
    fe_vector *va = op_vector(a, n), *vb = op_vector(b, n);
    fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
    double *Aa = op_run(&p, "apply", va, &o, NULL), *Ab = op_run(&p, "apply", vb, &o, NULL);
    double ab = 0, ba = 0, scale = 0;
    for (int i = 0; i < n; i++) {
      ab += b[i] * Aa[i];
      ba += a[i] * Ab[i];
      scale += fabs(b[i] * Aa[i]);
    }
    cr_expect_lt(fabs(ab - ba), 1e-12 * scale, "%s: b.Aa %.17g vs a.Ab %.17g", cs[c].space, ab, ba);
    /* residual(a) - residual(0) = J a on the free rows, for a that keeps the boundary values */
    int *dofs, nd;
    cr_assert_eq(fe_space_boundary_dofs(p.V, tags, 2, &dofs, &nd), 0);
    for (int k = 0; k < nd; k++) a[dofs[k]] = 0;
    free(dofs);
    fe_vector_free(va);
    free(Aa);
    va = op_vector(a, n);
    Aa = op_run(&p, "apply", va, &o, NULL);
    double *zero = calloc((size_t)n, sizeof(double));
    fe_vector *vz = op_vector(zero, n);
    double *ra = op_run(&p, "residual", va, &o, NULL), *r0 = op_run(&p, "residual", vz, &o, NULL);
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(ra[i] - r0[i] - Aa[i]));
    cr_expect_lt(worst, 1e-11 * (1 + op_infnorm(Aa, n)), "%s: residual difference off by %g",
                 cs[c].space, worst);
    if (cl && cl->info.fp64) {
      fe_action_opts ocl = op_opts("opencl", FE_DOUBLE, 0);
      double *Acl = op_run(&p, "apply", va, &ocl, NULL);
      cr_expect_lt(op_reldiff(Aa, Acl, n), 1e-12, "%s: opencl vs cpu %g", cs[c].space,
                   op_reldiff(Aa, Acl, n));
      free(Acl);
    }
    free(a);
    free(b);
    free(Aa);
    free(Ab);
    free(ra);
    free(r0);
    free(zero);
    fe_vector_free(va);
    fe_vector_free(vb);
    fe_vector_free(vz);
    op_problem_free(&p);
  }
}

/* The vertices of m renumbered by a shuffle (coordinates, cells and facets alike): the same
 * mesh, whose cells see their edges' and faces' vertices in every order. */
static void shuffle_vertices(fe_mesh *m, unsigned seed)
{
  int *to = malloc(sizeof(int) * (size_t)m->nvertices);
  double *x = malloc(sizeof(double) * 3 * (size_t)m->nvertices);
  cr_assert(to && x);
  for (int v = 0; v < m->nvertices; v++) to[v] = v;
  for (int v = m->nvertices - 1; v > 0; v--) {
    seed = seed * 1103515245u + 12345u;
    int u = (int)((seed >> 8) % (unsigned)(v + 1)), s = to[v];
    to[v] = to[u], to[u] = s;
  }
  for (int v = 0; v < m->nvertices; v++) memcpy(x + 3 * to[v], m->coords + 3 * v, sizeof(double) * 3);
  memcpy(m->coords, x, sizeof(double) * 3 * (size_t)m->nvertices);
  for (size_t i = 0; i < (size_t)m->ncells * m->nvc; i++) m->cells[i] = to[m->cells[i]];
  for (size_t i = 0; i < (size_t)m->nfacets * m->nvf; i++) m->facets[i] = to[m->facets[i]];
  free(to), free(x);
}

/* The three numberings of a dof map (a box of hexes or quads by its lattice; by entities on
 * every thread; the serial hash map of the nodes' names that spaces past 2^31 places use; the
 * last two asked for through FELAB_DOFMAP) give the same nodes and places, node for node, at
 * the same coordinates (lattice and entities to the bit; hashed to rounding: a shared node is
 * placed from its first cell in one, from its last in the other); on the box's own numbering
 * and on its vertices shuffled (no lattice then). */
static fe_space *space_numbered(const fe_mesh *m, const char *name, const char *how)
{
  fe_space *V = NULL;
  if (how) setenv("FELAB_DOFMAP", how, 1);
  int rc = fe_space_create(m, name, &V);
  unsetenv("FELAB_DOFMAP");
  cr_assert_eq(rc, 0, "%s", fe_error_message());
  return V;
}

Test(space, lattice_entities_and_hashed_numberings_agree)
{
  static const struct { fe_cell_type type; const char *space; int n; } cases[] = {
      {FE_CELL_TET, "P2", 3}, {FE_CELL_TET, "P3", 2}, {FE_CELL_HEX, "Q2", 3},
      {FE_CELL_HEX, "Q4", 2}, {FE_CELL_PRISM, "P2", 2}, {FE_CELL_TRI, "P3", 4},
      {FE_CELL_QUAD, "Q3", 3}, {FE_CELL_TET, "P4", 2}, {FE_CELL_HEX, "Q3", 3},
      {FE_CELL_PRISM, "P3", 2}, {FE_CELL_HEX, "Q2", 1}, {FE_CELL_QUAD, "Q2", 1}};
  const size_t ncases = sizeof cases / sizeof cases[0];
  for (size_t r = 0; r < 2 * ncases; r++) {
    const size_t k = r % ncases, shuffled = r >= ncases;
    const int tensor = cases[k].type == FE_CELL_HEX || cases[k].type == FE_CELL_QUAD;
    fe_box_opts o;
    fe_box_opts_default(&o);
    o.type = cases[k].type;
    o.cells[0] = cases[k].n;
    o.cells[1] = cases[k].n + 1; /* not a cube: the axes' counts differ */
    o.cells[2] = cases[k].type == FE_CELL_TRI || cases[k].type == FE_CELL_QUAD ? 0 : cases[k].n + 2;
    o.distort = 0.2;
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
    if (shuffled) shuffle_vertices(m, 7u + (unsigned)k);
    fe_space *a = space_numbered(m, cases[k].space, NULL);
    fe_space *e = space_numbered(m, cases[k].space, "entities");
    fe_space *b = space_numbered(m, cases[k].space, "hashed");
    const char *want = tensor && !shuffled ? "lattice" : "entities";
    cr_assert_str_eq(a->numbering, want, "%s: made %s", cases[k].space, a->numbering);
    cr_assert_str_eq(e->numbering, "entities");
    cr_assert_str_eq(b->numbering, "hashed");
    size_t places = (size_t)m->ncells * a->elem.nbasis;
    cr_assert(a->nnodes == e->nnodes && e->nnodes == b->nnodes, "%s: %d / %d / %d nodes",
              cases[k].space, a->nnodes, e->nnodes, b->nnodes);
    cr_assert(!memcmp(a->cell_nodes, e->cell_nodes, sizeof(int) * places) &&
                  !memcmp(e->cell_nodes, b->cell_nodes, sizeof(int) * places),
              "%s on %s: the dof maps differ", cases[k].space, fe_cell_name(cases[k].type));
    cr_assert(!memcmp(a->node_coords, e->node_coords, sizeof(double) * 3 * (size_t)a->nnodes),
              "%s on %s: lattice and entities place the nodes differently", cases[k].space,
              fe_cell_name(cases[k].type));
    double worst = 0;
    for (size_t i = 0; i < 3 * (size_t)a->nnodes; i++)
      worst = fmax(worst, fabs(a->node_coords[i] - b->node_coords[i]));
    cr_assert(worst <= 1e-14, "%s on %s: the node coordinates differ by %g", cases[k].space,
              fe_cell_name(cases[k].type), worst);
    fe_space_free(a);
    fe_space_free(e);
    fe_space_free(b);
    fe_mesh_free(m);
  }
}

/* Simplices' and prisms' nodes take turns in blocks of 32 vertices (engine/fem/space-number.c):
 * by id, each node's (block of its entity's least vertex, vertex or not, that vertex) never
 * goes down, and a cell's first nodes (its vertices) are vertex nodes; on the box's own
 * numbering and on its vertices shuffled, tets P2 and P3, a prism P2 and triangles P3. */
Test(space, simplex_nodes_take_turns_in_vertex_blocks)
{
  static const struct { fe_cell_type type; const char *space; int n; } cases[] = {
      {FE_CELL_TET, "P2", 5}, {FE_CELL_TET, "P3", 3}, {FE_CELL_PRISM, "P2", 3},
      {FE_CELL_TRI, "P3", 6}};
  const size_t ncases = sizeof cases / sizeof cases[0];
  for (size_t r = 0; r < 2 * ncases; r++) {
    const size_t k = r % ncases;
    fe_box_opts o;
    fe_box_opts_default(&o);
    o.type = cases[k].type;
    o.cells[0] = o.cells[1] = cases[k].n;
    o.cells[2] = cases[k].type == FE_CELL_TRI ? 0 : cases[k].n;
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
    if (r >= ncases) shuffle_vertices(m, 11u + (unsigned)k);
    fe_space *V = space_numbered(m, cases[k].space, NULL);
    const int nb = V->elem.nbasis, nv = V->elem.nvertices, nn = V->nnodes;
    long long *key = malloc(sizeof(long long) * (size_t)nn);
    for (int i = 0; i < nn; i++) key[i] = -1;
    for (int c = 0; c < m->ncells; c++)
      for (int b = 0; b < nb; b++) {
        int a = INT_MAX;
        for (int v = 0; v < nv; v++)
          if (V->elem.weights[b * nv + v] != 0 && m->cells[c * nv + v] < a) a = m->cells[c * nv + v];
        const long long want = ((long long)(a / 32) * 2 + (b >= nv)) * (1LL << 32) + a;
        const int node = V->cell_nodes[(size_t)c * nb + b];
        cr_assert(key[node] < 0 || key[node] == want, "%s: node %d named two ways", cases[k].space,
                  node);
        key[node] = want;
      }
    for (int i = 1; i < nn; i++)
      cr_assert(key[i - 1] <= key[i], "%s%s: node %d (block %lld) after node %d (block %lld)",
                cases[k].space, r >= ncases ? " shuffled" : "", i, key[i] >> 33, i - 1,
                key[i - 1] >> 33);
    free(key);
    fe_space_free(V);
    fe_mesh_free(m);
  }
}

/* The cpu's host fill sums its rows in the order of their first cells, so each cell's element
 * matrix is made about once whatever the numbering (a box's Q2 numbers the vertices first: in
 * id order the window sweeps the mesh twice; P2 and P3 number every node in the block of
 * its least vertex, where id order does as well), and the order does not change a value: each row sums
 * its cells in cell order either way (FELAB_FILL_IDS: the rows in id order). */
static fe_csr *assembled(fe_operator *A, const char *ids, fe_report *rep)
{
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = "cpu";
  o.precision = FE_DOUBLE;
  if (ids) setenv("FELAB_FILL_IDS", ids, 1);
  fe_csr *M = NULL;
  int rc = fe_operator_assemble(A, NULL, &o, NULL, &M, rep);
  unsetenv("FELAB_FILL_IDS");
  cr_assert_eq(rc, 0, "%s", fe_error_message());
  return M;
}

Test(assembly, host_fill_makes_each_matrix_about_once)
{
  static const struct { fe_cell_type type; const char *space; int n; } cases[] = {
      {FE_CELL_TET, "P2", 10}, {FE_CELL_TET, "P3", 6}, {FE_CELL_HEX, "Q2", 8}};
  omp_set_num_threads(2); /* two bands, as on this machine (each test is its own process) */
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    op_problem p;
    op_problem_space(&p, cases[k].type, cases[k].n, cases[k].space, "1 + x[0]*x[1]");
    const fe_mesh *m = p.m;
    fe_report ra, rb;
    fe_csr *a = assembled(p.A, NULL, &ra), *b = assembled(p.A, "1", &rb);
    long long made_a = 0, made_b = 0;
    const char *pa = strstr(ra.why, "need them ("), *pb = strstr(rb.why, "need them (");
    cr_assert(pa && pb, "%s: the report does not say how many matrices: %s", cases[k].space, ra.why);
    made_a = atoll(pa + 11), made_b = atoll(pb + 11);
    cr_assert(made_a >= m->ncells && made_a <= 1.3 * m->ncells && made_a <= made_b &&
                  (made_a < made_b || cases[k].type != FE_CELL_HEX),
              "%s: %lld element matrices made for %d cells (%lld in id order)", cases[k].space,
              made_a, m->ncells, made_b);
    cr_log_info("%s: %lld matrices for %d cells (%lld in id order)\n", cases[k].space, made_a,
                m->ncells, made_b);
    int *ra_p, *ca, *rb_p, *cb;
    double *va, *vb;
    cr_assert_eq(fe_csr_get(a, &ra_p, &ca, &va), 0, "%s", fe_error_message());
    cr_assert_eq(fe_csr_get(b, &rb_p, &cb, &vb), 0, "%s", fe_error_message());
    cr_assert(a->nnz == b->nnz && !memcmp(ra_p, rb_p, sizeof(int) * ((size_t)a->n + 1)) &&
                  !memcmp(ca, cb, sizeof(int) * (size_t)a->nnz) &&
                  !memcmp(va, vb, sizeof(double) * (size_t)a->nnz),
              "%s: the matrix depends on the fill's order", cases[k].space);
    free(ra_p), free(ca), free(va), free(rb_p), free(cb), free(vb);
    fe_csr_free(a);
    fe_csr_free(b);
    op_problem_free(&p);
  }
}

/* The work of a product's first groups (the exchange's model: the first wave the gather
 * waits beside): each group's CSR entries or SELL slots over the average group's, sorted, at
 * quantiles, counted here again from the host's arrays. A Q2 box numbers its vertices first
 * (its lattice's), whose rows hold more entries than the rest's: its first groups hold more
 * than the average (a P2 box's nodes take turns by their least vertex, in blocks of 32
 * vertices: about the average). */
static int cmp_doubles(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

Test(assembly, product_work_of_the_first_groups)
{
  op_problem p;
  op_problem_space(&p, FE_CELL_HEX, 6, "Q2", "1");
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = "cpu";
  o.precision = FE_DOUBLE;
  for (int sell = 0; sell < 2; sell++) {
    fe_matrix_opts mo = {.format = sell ? FE_FORMAT_SELL : FE_FORMAT_CSR, .chunk = sell ? 8 : 0,
                         .sigma = sell ? 64 : 0};
    fe_csr *M = NULL;
    fe_report rep;
    cr_assert_eq(fe_operator_assemble(p.A, NULL, &o, &mo, &M, &rep), 0, "%s", fe_error_message());
    long long groups;
    int items, *rp, *cols, *cs = NULL;
    double *vals, q[9];
    fe_csr_launch_groups(M, &groups, &items);
    const long long rows = sell ? 128 : 128 / M->lanes, per = sell ? rows / M->chunk : rows;
    cr_assert_eq(fe_csr_get(M, &rp, &cols, &vals), 0, "%s", fe_error_message());
    if (sell) {
      cs = malloc(sizeof(int) * ((size_t)M->nchunks + 1));
      cr_assert_eq(M->be->ops->read(M->be->impl, &M->cstart, 0,
                                    sizeof(int) * ((size_t)M->nchunks + 1), cs), 0);
    }
    const int *at = sell ? cs : rp;
    const long long n = sell ? M->nchunks : M->n, first = 3;
    const double avg = (sell ? (double)M->nslots : (double)M->nnz) / groups;
    cr_assert(groups > 2 * first, "%lld groups", groups);
    double w[3];
    for (long long g = 0; g < first; g++) {
      const long long e = (g + 1) * per < n ? (g + 1) * per : n;
      w[g] = (at[e] - at[g * per]) / avg;
    }
    qsort(w, 3, sizeof(double), cmp_doubles);
    cr_assert_eq(fe_csr_first_groups(M, first, q, 8), 0);
    for (int i = 0; i <= 8; i++)
      cr_assert(fabs(q[i] - w[2 * i / 8]) < 1e-12, "%s: quantile %d/8 of the first %lld groups' "
                "work %g (want %g)", sell ? "SELL" : "CSR", i, first, q[i], w[2 * i / 8]);
    cr_assert(q[0] > 1.2, "%s: the first groups (the vertices' rows) %g of the average group's",
              sell ? "SELL" : "CSR", q[0]);
    cr_assert_eq(fe_csr_first_groups(M, groups + 5, q, 8), 0);
    cr_assert(q[0] <= 1 && q[8] >= 1, "all the groups: the average within [%g, %g]", q[0], q[8]);
    free(rp), free(cols), free(vals), free(cs);
    fe_csr_free(M);
  }
  op_problem_free(&p);
}

/* patch's gather and scatter loop over a patch's nodes, an item a node: a patch of more
 * nodes than items goes round again, each round a wait on its node numbers and one on their
 * values (the scatter's on its numbers), which the path counts (P1 tets: 1.25 x 729 nodes
 * over 6 patches of 512 cells, 152 a patch, one round of 256 items; P2: 1024 a patch, 4). */
Test(space, patch_path_counts_its_gather_rounds)
{
  static const struct { const char *space; double dram, l2; } cases[] = {{"P1", 2, 3}, {"P2", 5, 9}};
  for (size_t k = 0; k < 2; k++) {
    op_problem p;
    op_problem_space(&p, FE_CELL_TET, 8, cases[k].space, "1");
    fe_work w;
    memset(&w, 0, sizeof w);
    fe_strategy_patch.estimate(p.A, NULL, FE_DOUBLE, FE_ACTION_APPLY, &w);
    cr_assert(w.dram_trips == cases[k].dram && w.l2_trips == cases[k].l2,
              "%s: %g trips to memory and %g to L2 (want %g and %g)", cases[k].space, w.dram_trips,
              w.l2_trips, cases[k].dram, cases[k].l2);
    op_problem_free(&p);
  }
}

/* sumfact's quadrature phase walks a column of points: where a point's words are stored (kappa
 * of x folded a point) and the walk stays a loop (cuda's), each point's read waits for the
 * point before's work, a trip to memory each (the cell map's, then one a point of the column);
 * where the kernels unroll it, or the geometry is a class's (the uniform box, kappa 1), one
 * trip for the phase (-1 below: the column's points). */
Test(space, sumfact_path_counts_the_walks_trips)
{
  static const struct { const char *kappa; int rolled; double dram; } cases[] = {
      {"1 + 0.5 * x[0]", 1, -1}, {"1 + 0.5 * x[0]", 0, 2}, {"1", 1, 2}};
  for (size_t k = 0; k < 3; k++) {
    op_problem p;
    op_problem_space(&p, FE_CELL_HEX, 4, "Q3", cases[k].kappa);
    fe_backend be;
    memset(&be, 0, sizeof be);
    be.info.is_gpu = 1, be.info.warp = 32, be.info.walks_rolled = cases[k].rolled;
    fe_work w;
    memset(&w, 0, sizeof w);
    fe_strategy_sumfact.estimate(p.A, &be, FE_DOUBLE, FE_ACTION_APPLY, &w);
    const double q1 = round(cbrt(p.A->quad[FE_ACTION_APPLY].npoints));
    const double want = cases[k].dram > 0 ? cases[k].dram : 1 + q1;
    cr_assert(q1 >= 4, "%g points a direction", q1);
    cr_assert(w.dram_trips == want, "kappa %s, walks %s: %g trips to memory (want %g)",
              cases[k].kappa, cases[k].rolled ? "rolled" : "unrolled", w.dram_trips, want);
    op_problem_free(&p);
  }
}

/* Boundary nodes of a space numbered by its lattice (each facet's cube side marked) are those
 * the entities' set finds, for every boundary and for single tags, hexes and quads. */
Test(space, lattice_boundary_nodes_agree)
{
  static const struct { fe_cell_type type; const char *space; } cases[] = {
      {FE_CELL_HEX, "Q2"}, {FE_CELL_HEX, "Q3"}, {FE_CELL_QUAD, "Q3"}, {FE_CELL_QUAD, "Q4"}};
  static const char *const tags[][2] = {{"all", NULL}, {"xmin", NULL}, {"ymax", "xmax"}, {"ymin", "xmin"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fe_box_opts o;
    fe_box_opts_default(&o);
    o.type = cases[k].type;
    o.cells[0] = 2, o.cells[1] = 3, o.cells[2] = cases[k].type == FE_CELL_HEX ? 4 : 0;
    o.distort = 0.2;
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
    fe_space *a = space_numbered(m, cases[k].space, NULL);
    fe_space *e = space_numbered(m, cases[k].space, "entities");
    cr_assert_str_eq(a->numbering, "lattice");
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
      int nt = tags[t][1] ? 2 : 1, *na = NULL, *ne = NULL, ca = 0, ce = 0;
      cr_assert_eq(fe_space_boundary_nodes(a, tags[t], nt, &na, &ca), 0, "%s", fe_error_message());
      cr_assert_eq(fe_space_boundary_nodes(e, tags[t], nt, &ne, &ce), 0, "%s", fe_error_message());
      cr_assert(ca > 0 && ca == ce && !memcmp(na, ne, sizeof(int) * (size_t)ca),
                "%s, tag %s: %d nodes by the lattice, %d by entities", cases[k].space, tags[t][0], ca, ce);
      free(na), free(ne);
    }
    fe_space_free(a);
    fe_space_free(e);
    fe_mesh_free(m);
  }
}

/* A box whose cells no longer follow its cubes (reordered; its cubes forgotten) or whose
 * cubes were kept while its cells moved: the entities number it, the same as a fresh box. */
Test(space, lattice_needs_the_box_layout)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = FE_CELL_HEX;
  o.cells[0] = o.cells[1] = o.cells[2] = 3;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  /* swap two cells but keep the cube counts: the check of every cell's corners sees it */
  for (int v = 0; v < 8; v++) {
    int t = m->cells[v];
    m->cells[v] = m->cells[8 + v];
    m->cells[8 + v] = t;
  }
  fe_space *a = space_numbered(m, "Q2", NULL);
  fe_space *e = space_numbered(m, "Q2", "entities");
  cr_assert_str_eq(a->numbering, "entities", "made %s", a->numbering);
  cr_assert(!memcmp(a->cell_nodes, e->cell_nodes, sizeof(int) * (size_t)m->ncells * 27));
  fe_space_free(a);
  fe_space_free(e);
  cr_assert_eq(fe_mesh_reorder(m, "rcm"), 0, "%s", fe_error_message());
  a = space_numbered(m, "Q2", NULL);
  cr_assert_str_eq(a->numbering, "entities", "after a reorder: made %s", a->numbering);
  fe_space_free(a);
  fe_mesh_free(m);
}

/* Where the model makes transpose's factors from the vertices (a GPU's pick at P1; here a
 * calibration whose device memory is slow makes it), the element matrices and the assembly
 * still get stored factors: they ask for them (on the H100 they read a buffer that was not
 * there). */
Test(operator, element_matrices_ask_for_stored_factors)
{
  fe_backend *be;
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  fe_calibration saved = be->calib[FE_DOUBLE];
  op_problem p;
  op_problem_make(&p, FE_CELL_TET, 3, NULL, 0);
  fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
  fe_elemats *K0 = NULL, *K1 = NULL;
  fe_report rep;
  cr_assert_eq(fe_element_matrices(p.A, NULL, &o, NULL, NULL, NULL, &K0, &rep), 0, "%s",
               fe_error_message());
  fe_operator_free(p.A); /* the same operator again, under a calibration that wants vertices */
  cr_assert_eq(fe_operator_create(p.V, p.pde, NULL, 0, 0.25, &p.A), 0, "%s", fe_error_message());
  fe_calibration slow = {.valid = 1, .gbytes = 1e-3, .gflops = 1e6, .scalar_gflops = 1e6,
                         .launch_us = 1, .sync_us = 1};
  be->calib[FE_DOUBLE] = slow;
  fe_action_opts ot = o;
  ot.strategy = "transpose";
  fe_options nofold = {0}; /* the apply's own factors, from the vertices (kappa(x) would fold) */
  cr_assert_eq(fe_options_boolean(&nofold, "fold", 0), 0);
  ot.given = &nofold;
  fe_vector *x = NULL, *y = NULL;
  int rc = fe_vector_create(be, FE_DOUBLE, p.V->ndofs, &x);
  if (!rc) rc = fe_operator_apply(p.A, x, NULL, &ot, &y, &rep);
  char why[256];
  snprintf(why, sizeof why, "%s", rc ? fe_error_message() : "");
  int vertices = !rc && strstr(rep.why, "vertices") != NULL;
  if (!rc) rc = fe_element_matrices(p.A, NULL, &o, NULL, NULL, NULL, &K1, &rep);
  if (rc) snprintf(why, sizeof why, "%s", fe_error_message());
  be->calib[FE_DOUBLE] = saved;
  cr_assert_eq(rc, 0, "%s", why);
  cr_expect(vertices, "the slow calibration did not make transpose take the vertices (%s)", rep.why);
  double a[64], b[64];
  for (int c = 0; c < p.m->ncells; c++) {
    cr_assert_eq(fe_elemats_get(K0, c, a), 0);
    cr_assert_eq(fe_elemats_get(K1, c, b), 0);
    for (int i = 0; i < K0->n * K0->n; i++)
      cr_assert(fabs(a[i] - b[i]) <= 1e-12 * (1 + fabs(a[i])), "cell %d entry %d: %g, %g", c, i,
                a[i], b[i]);
  }
  fe_elemats_free(K0);
  fe_elemats_free(K1);
  fe_vector_free(x);
  fe_vector_free(y);
  op_problem_free(&p);
}

/* Affine cells take J's columns from vertex 0 and one neighbour per reference axis, LANES
 * cells at a time: the factors must be those of the first-order map's gradient, cell by cell,
 * on sheared boxes of every straight cell type, with a partial last batch and padding cells
 * (zero measure). */
Test(operator, affine_geometry_matches_the_map_gradient)
{
  const fe_cell_type types[5] = {FE_CELL_TET, FE_CELL_HEX, FE_CELL_PRISM, FE_CELL_TRI,
                                 FE_CELL_QUAD};
  const double M[3][3] = {{1.3, 0.2, -0.1}, {0.1, 0.9, 0.3}, {-0.2, 0.15, 1.1}};
  for (int t = 0; t < 5; t++) {
    fe_box_opts bo;
    fe_box_opts_default(&bo);
    bo.type = types[t];
    int dim = t < 3 ? 3 : 2;
    bo.cells[0] = dim == 3 ? 3 : 6, bo.cells[1] = dim == 3 ? 2 : 4, bo.cells[2] = dim == 3 ? 3 : 0;
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_box(&bo, &m), 0, "%s", fe_error_message());
    for (int v = 0; v < m->nvertices; v++) { /* x <- M x + (0.5, -1, 2), det M > 0 */
      double *x = m->coords + 3 * (size_t)v, y[3];
      for (int d = 0; d < 3; d++)
        y[d] = (d < dim ? M[d][0] * x[0] + M[d][1] * x[1] + (dim == 3 ? M[d][2] * x[2] : 0)
                        : 0) + (d == 0 ? 0.5 : d == 1 ? -1 : dim == 3 ? 2 : 0);
      for (int d = 0; d < 3; d++) x[d] = y[d];
    }
    m->positive = 0, m->affine = 0; /* edited in place */
    fe_mesh_forget_classes(m);
    op_problem p;
    memset(&p, 0, sizeof p);
    p.m = m;
    const char *space = types[t] == FE_CELL_HEX || types[t] == FE_CELL_QUAD ? "Q1" : "P1";
    cr_assert_eq(fe_space_create(m, space, &p.V), 0, "%s", fe_error_message());
    cr_assert_eq(fe_physics_poisson("1", "1", &p.pde), 0, "%s", fe_error_message());
    cr_assert_eq(fe_operator_create(p.V, p.pde, NULL, 0, 0.25, &p.A), 0, "%s",
                 fe_error_message());
    cr_assert(p.A->geo_affine, "%s: a sheared box is affine", fe_cell_name(types[t]));
    size_t nc = (size_t)m->ncells, npad = nc + 3; /* 3 padding cells copying cell 1 */
    int *perm = malloc(sizeof(int) * npad);
    for (size_t i = 0; i < nc; i++) perm[i] = (int)(nc - 1 - i); /* reversed */
    for (size_t i = nc; i < npad; i++) perm[i] = -2;
    const int stride = fe_geo_stride(dim);
    double *geo = calloc(npad * stride, sizeof(double));
    const fe_quadrature *Q = &p.A->quad[FE_ACTION_APPLY];
    cr_assert_eq(fe_build_geometry(p.A, Q, perm, npad, 0, geo, FE_DOUBLE, 0), 0, "%s",
                 fe_error_message());
    /* shared: the classes' sets, then each stored cell's class (the padding's: zeros) */
    const fe_mesh_classes *k = fe_mesh_congruent(m);
    const int nclass[5] = {6, 1, 2, 2, 1}; /* Kuhn tets, hexes, prisms, triangles, quads */
    cr_assert(k && k->n == nclass[t], "%s: %d classes, expected %d", fe_cell_name(types[t]),
              k ? k->n : -1, nclass[t]);
    cr_assert(fe_geometry_shared(p.A, FE_GEOMETRY_AUTO));
    size_t nw = fe_geometry_words(p.A, Q, npad, 1, FE_DOUBLE), plane = (size_t)k->n + 1;
    cr_assert_eq(fe_geometry_plane(p.A, Q, npad, 1), plane);
    double *sg = calloc(nw, sizeof(double));
    cr_assert_eq(fe_build_geometry(p.A, Q, perm, npad, 1, sg, FE_DOUBLE, 0), 0, "%s",
                 fe_error_message());
    const int *cls = (const int *)(sg + (size_t)stride * plane);
    double worst_shared = 0;
    for (size_t i = 0; i < npad; i++) {
      cr_assert(cls[i] >= 0 && cls[i] <= k->n, "stored cell %zu: class %d", i, cls[i]);
      cr_assert_eq(cls[i] == k->n, perm[i] < 0, "stored cell %zu: the padding's class", i);
      for (int j = perm[i] < 0 ? stride - 1 : 0; j < stride; j++) /* padding: its det J */
        worst_shared = fmax(worst_shared, fabs(sg[(size_t)j * plane + (size_t)cls[i]] -
                                               geo[(size_t)j * npad + i]) /
                                              (1 + fabs(geo[(size_t)j * npad + i])));
    }
    cr_expect_lt(worst_shared, 1e-13, "%s shared: largest difference %.3g",
                 fe_cell_name(types[t]), worst_shared);
    free(sg);
    const fe_element *g = &p.V->lin;
    double phi[FE_MAX_VERTICES], dphi[FE_MAX_VERTICES * 3];
    fe_element_eval(g, Q->points, phi, dphi);
    double worst = 0;
    for (size_t i = 0; i < npad; i++) {
      int c = perm[i] < 0 ? -perm[i] - 1 : perm[i];
      double J[9] = {0}, K[9];
      for (int b = 0; b < g->nbasis; b++)
        for (int d = 0; d < dim; d++)
          for (int k = 0; k < dim; k++)
            J[d * dim + k] += m->coords[3 * (size_t)m->cells[(size_t)c * m->nvc + b] + d] *
                              dphi[b * dim + k];
      double det = fe_space_map_inverse(dim, J, K);
      for (int j = 0; j < dim * dim; j++)
        worst = fmax(worst, fabs(geo[(size_t)j * npad + i] - K[j]) / (1 + fabs(K[j])));
      double want = perm[i] < 0 ? 0 : det;
      worst = fmax(worst, fabs(geo[(size_t)dim * dim * npad + i] - want) / (1 + fabs(det)));
    }
    cr_expect_lt(worst, 1e-13, "%s: largest difference %.3g", fe_cell_name(types[t]), worst);
    free(geo);
    free(perm);
    op_problem_free(&p);
  }
}

/* The schedule colors groups of cells by their vertices, not by the space's nodes: for a
 * conforming space the two give the same conflicts, so the same colors group by group (P3
 * tets, Q3 hexes, P2 prisms, Q2 on a distorted box, in the mesh's order and reversed). */
Test(operator, coloring_by_vertices_equals_coloring_by_nodes)
{
  const struct { fe_cell_type type; const char *space; double distort; } cases[4] = {
      {FE_CELL_TET, "P3", 0}, {FE_CELL_HEX, "Q3", 0}, {FE_CELL_PRISM, "P2", 0},
      {FE_CELL_HEX, "Q2", 0.5}};
  for (int k = 0; k < 4; k++) {
    fe_box_opts bo;
    fe_box_opts_default(&bo);
    bo.type = cases[k].type;
    bo.cells[0] = 4, bo.cells[1] = 3, bo.cells[2] = 3;
    bo.distort = cases[k].distort;
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_box(&bo, &m), 0, "%s", fe_error_message());
    fe_space *V = NULL;
    cr_assert_eq(fe_space_create(m, cases[k].space, &V), 0, "%s", fe_error_message());
    const int nc = m->ncells, nb = V->elem.nbasis, nv = V->elem.nvertices;
    int *by_node = malloc(sizeof(int) * (size_t)nc * nb);
    int *by_vertex = malloc(sizeof(int) * (size_t)nc * nv);
    for (int rev = 0; rev < 2; rev++) {
      for (int c = 0; c < nc; c++) {
        int from = rev ? nc - 1 - c : c;
        memcpy(by_node + (size_t)c * nb, V->cell_nodes + (size_t)from * nb, sizeof(int) * nb);
        memcpy(by_vertex + (size_t)c * nv, m->cells + (size_t)from * m->nvc, sizeof(int) * nv);
      }
      for (int block = 1; block <= 5; block += 4) {
        int *c1 = NULL, *c2 = NULL, n1 = 0, n2 = 0;
        cr_assert_eq(fe_mesh_color_groups(m, by_node, nb, block, &c1, &n1), 0, "%s",
                     fe_error_message());
        cr_assert_eq(fe_mesh_color_groups(m, by_vertex, nv, block, &c2, &n2), 0, "%s",
                     fe_error_message());
        cr_expect_eq(n1, n2, "%s: %d colors by nodes, %d by vertices", cases[k].space, n1, n2);
        int same = 1;
        for (int g = 0; g < (nc + block - 1) / block; g++) same = same && c1[g] == c2[g];
        cr_expect(same, "%s, block %d%s: the groups' colors differ", cases[k].space, block,
                  rev ? ", reversed" : "");
        free(c1);
        free(c2);
      }
    }
    free(by_node);
    free(by_vertex);
    fe_space_free(V);
    fe_mesh_free(m);
  }
}

/* The cpu's colored schedule: a color's groups go to the threads in runs of consecutive ones
 * (8 runs a thread); no two runs of a color share a node, and a thread's next group is the
 * mesh's next (colored group by group, a color's groups would lie apart). */
Test(operator, cpu_colors_in_runs)
{
  static const struct { fe_cell_type type; int n; const char *strategy; } cases[] = {
      {FE_CELL_HEX, 16, "sumfact"}, {FE_CELL_HEX, 16, "transpose"}, {FE_CELL_TET, 10, "transpose"},
      {FE_CELL_HEX, 3, "sumfact"}};
  fe_backend *be;
  cr_assert_eq(fe_backend_get("cpu", &be), 0, "%s", fe_error_message());
  const int units = be->info.compute_units > 0 ? be->info.compute_units : 1;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    op_problem p;
    op_problem_make(&p, cases[k].type, cases[k].n, NULL, 0);
    fe_action_opts o = op_opts("cpu", FE_DOUBLE, 0);
    o.strategy = cases[k].strategy;
    fe_realization *r = NULL;
    char why[256];
    cr_assert_eq(fe_operator_realize(p.A, &o, &r, why, sizeof why), 0, "%s", fe_error_message());
    cr_assert(r->colored && r->ncolors >= 1 && r->perm && r->run >= 1);
    const int nb = p.V->elem.nbasis, ng = r->ngroups;
    int *owner = malloc(sizeof(int) * (size_t)p.V->nnodes), jumps = 0, last = -2;
    for (int c = 0; c < r->ncolors; c++) {
      for (int i = 0; i < p.V->nnodes; i++) owner[i] = -1;
      for (int g = r->color_start[c]; g < r->color_start[c + 1]; g++) {
        const int run = (g - r->color_start[c]) / r->run;
        for (int e = 0; e < r->block; e++) {
          int s = r->perm[(size_t)g * r->block + e];
          if (s < 0) continue; /* padding */
          jumps += s != last + 1;
          last = s;
          for (int b = 0; b < nb; b++) {
            int node = p.V->cell_nodes[(size_t)s * nb + b];
            cr_assert(owner[node] < 0 || owner[node] == run,
                      "%s: color %d, runs %d and %d share node %d", cases[k].strategy, c,
                      owner[node], run, node);
            owner[node] = run;
          }
        }
      }
    }
    /* a jump where a run starts at most; group by group it would jump at every group */
    cr_assert(jumps <= 8 * units + r->ncolors + 1, "%s on %d^3: %d jumps for %d groups, %d colors",
              cases[k].strategy, cases[k].n, jumps, ng, r->ncolors);
    if (ng >= 64 * units) cr_assert(r->run > 1 && r->ncolors <= 8, "%d colors", r->ncolors);
    free(owner);
    op_problem_free(&p);
  }
}

/* The cpu's group factors as the kernel chooses them: shared sets (the classes' and the
 * padding's, GEO_SETS in the source) selected into the lanes where few (up to GEO_SELECT: 8 in
 * single, 2 in double), else gathered; a set a cell copied */
Test(operator, group_factors_counted_as_the_kernel_chooses)
{
  const fe_cell_type types[2] = {FE_CELL_TET, FE_CELL_HEX};
  const int sets[2] = {7, 2}; /* Kuhn tets' 6 classes, a box's hexes 1; and the padding's */
  for (int t = 0; t < 2; t++) {
    op_problem p;
    op_problem_make(&p, types[t], 3, NULL, 0); /* classes shared by 16 cells each at least */
    cr_assert(fe_geometry_shared(p.A, FE_GEOMETRY_AUTO), "%s", fe_cell_name(types[t]));
    const double lanes = (double)p.m->ncells * fe_geo_stride(3);
    for (int prec = 0; prec < 2; prec++) {
      fe_kernel_spec s = {.V = p.V, .pde = p.pde, .quad = &p.A->quad[FE_ACTION_APPLY],
                          .action = FE_ACTION_APPLY, .prec = (fe_precision)prec,
                          .geo_affine = 1, .geo_shared = 1};
      fe_work w;
      memset(&w, 0, sizeof w);
      fe_group_factor_work(&s, &w);
      const int select = sets[t] <= (prec == FE_DOUBLE ? 2 : 8);
      cr_expect_eq(w.factor_lanes, select ? lanes * sets[t] : 0, "%s %d: %g lanes",
                   fe_cell_name(types[t]), prec, w.factor_lanes);
      cr_expect_eq(w.factor_gathers, select ? 0 : lanes, "%s %d: %g gathers",
                   fe_cell_name(types[t]), prec, w.factor_gathers);
      s.geo_shared = 0; /* a set a cell: copied */
      fe_group_factor_work(&s, &w);
      cr_expect_eq(w.factor_lanes, lanes);
      cr_expect_eq(w.factor_gathers, 0);
      fe_action_opts o = op_opts("cpu", (fe_precision)prec, 0);
      o.strategy = "transpose";
      char *src = NULL, def[32];
      cr_assert_eq(fe_operator_source(p.A, "apply", &o, &src), 0, "%s", fe_error_message());
      snprintf(def, sizeof def, "#define GEO_SETS %d\n", sets[t]);
      cr_expect(strstr(src, def) != NULL, "%s: no '%s'", fe_cell_name(types[t]), def);
      snprintf(def, sizeof def, "#define GEO_SELECT %d\n", prec == FE_DOUBLE ? 2 : 8);
      cr_expect(strstr(src, def) != NULL, "%s: no '%s'", fe_cell_name(types[t]), def);
      free(src);
    }
    op_problem_free(&p);
  }
}
