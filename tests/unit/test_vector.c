/* Engine vectors on every backend: the fused CG steps (fe_vector_cg_update and
 * fe_vector_cg_direction) against the unfused sequence of axpby, pointwise and dot they
 * replace, with and without a Jacobi diagonal, in double and single, through the backend's
 * fused slot and through the engine's fallback for a backend without it. Tests on opencl
 * and cuda skip, with the reason, where that backend cannot be opened. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/solve/vector.h"
#include "tests/unit/fixtures.h"

#define N_ODD 100003 /* not a multiple of any block or group size */

static void vec_suite_init(void) { setenv("FELAB_CACHE", "/tmp/felab-test-cache", 0); }
static void vec_suite_fini(void) { fe_backend_shutdown(); }

TestSuite(vector, .init = vec_suite_init, .fini = vec_suite_fini);

/* The opened backend `name`, or skip the test saying why there is none (or why it cannot
 * run precision p). */
static fe_backend *backend_or_skip(const char *name, fe_precision p)
{
  fe_backend *be = test_backend_or_skip(name);
  test_need_precision(be, p);
  return be;
}

/* A vector of n values from det_value on be in precision p. */
static fe_vector *make_vector(fe_backend *be, fe_precision p, int n, unsigned seed, double lo,
                              double hi)
{
  fe_vector *v;
  double *h = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) h[i] = test_value((size_t)i, seed, lo, hi);
  cr_assert_eq(fe_vector_create(be, p, n, &v), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_set(v, h), 0, "%s", fe_error_message());
  free(h);
  return v;
}

/* A copy of v (same backend and precision). */
static fe_vector *copy_of(const fe_vector *v)
{
  fe_vector *c;
  cr_assert_eq(fe_vector_duplicate(v, &c), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_copy(c, v), 0, "%s", fe_error_message());
  return c;
}

/* v's values as host doubles (caller frees). */
static double *values_of(const fe_vector *v)
{
  double *h = malloc(sizeof(double) * (size_t)(v->n ? v->n : 1));
  cr_assert_eq(fe_vector_get(v, h), 0, "%s", fe_error_message());
  return h;
}

/* Every entry of got within tol of want, relative to scale[i] (the size of the terms that
 * made want[i]). */
static void assert_vectors_close(const fe_vector *got, const fe_vector *want, const double *scale,
                                 double tol, const char *what)
{
  double *g = values_of(got), *w = values_of(want);
  for (int i = 0; i < got->n; i++)
    cr_assert(fabs(g[i] - w[i]) <= tol * (scale[i] > 0 ? scale[i] : 1e-300),
              "%s[%d]: got %.17g, want %.17g (tolerance %g of %g)", what, i, g[i], w[i], tol,
              scale[i]);
  free(g), free(w);
}

/* |got - want| <= tol |want| for a sum of positive terms. */
static void assert_sum_close(double got, double want, double tol, const char *what)
{
  cr_assert(fabs(got - want) <= tol * fabs(want), "%s: got %.17g, want %.17g (tolerance %g)",
            what, got, want, tol);
}

/* The backend's table without the fused slots, installed on be for the engine's fallback;
 * vec_fused_restore puts the original back. */
static fe_backend_ops vec_unfused_ops;
static const fe_backend_ops *vec_saved_ops;
static void vec_unfused_install(fe_backend *be)
{
  vec_saved_ops = be->ops;
  vec_unfused_ops = *be->ops;
  vec_unfused_ops.cg_update = NULL;
  vec_unfused_ops.cg_direction = NULL;
  be->ops = &vec_unfused_ops;
}
static void vec_fused_restore(fe_backend *be) { be->ops = vec_saved_ops; }

/* How a fused step is reached: the backend's slot, or the engine's fallback with a work
 * vector or with none (it makes one). */
typedef enum { VIA_SLOT, VIA_FALLBACK_WORK, VIA_FALLBACK_NO_WORK } vec_via;
static const char *const via_name[] = {"slot", "fallback with work", "fallback without work"};

/* cg_update and cg_direction on n random values of backend `name` in precision p, with a
 * diagonal d or without (jacobi = 0), against axpby, pointwise and dot; tol relative. */
static void check_cg_steps(const char *name, fe_precision p, int n, int jacobi, vec_via via,
                           double tol)
{
  fe_backend *be = backend_or_skip(name, p);
  cr_assert(via != VIA_SLOT || (be->ops->cg_update && be->ops->cg_direction),
            "%s has no fused CG slots", name);
  const double alpha = 0.7303, beta = 0.4189;
  fe_vector *x = make_vector(be, p, n, 1, -1.0, 1.0), *r = make_vector(be, p, n, 2, -1.0, 1.0);
  fe_vector *pp = make_vector(be, p, n, 3, -1.0, 1.0), *q = make_vector(be, p, n, 4, -2.0, 2.0);
  fe_vector *d = jacobi ? make_vector(be, p, n, 5, 0.5, 1.5) : NULL;
  fe_vector *work = via == VIA_FALLBACK_WORK ? make_vector(be, p, n, 6, -1.0, 1.0) : NULL;
  double *hx = values_of(x), *hr = values_of(r), *hp = values_of(pp), *hq = values_of(q);
  double *hd = d ? values_of(d) : NULL;

  /* the unfused sequence: x += alpha p, r -= alpha q, z = r ./ d, (r, r), (r, z),
   * p = z + beta p */
  fe_vector *xw = copy_of(x), *rw = copy_of(r), *pw = copy_of(pp), *z = copy_of(r);
  double rr_want, rz_want;
  cr_assert_eq(fe_vector_axpby(xw, alpha, pp, 1.0), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_axpby(rw, -alpha, q, 1.0), 0, "%s", fe_error_message());
  if (d) cr_assert_eq(fe_vector_pointwise(z, rw, d, 1), 0, "%s", fe_error_message());
  else cr_assert_eq(fe_vector_copy(z, rw), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_dot(rw, rw, &rr_want), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_dot(rw, z, &rz_want), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_axpby(pw, 1.0, z, beta), 0, "%s", fe_error_message());

  /* the fused steps */
  double rr = -1, rz = -1;
  if (via != VIA_SLOT) vec_unfused_install(be);
  int rc = fe_vector_cg_update(x, r, pp, q, d, alpha, work, &rr, &rz);
  if (!rc) rc = fe_vector_cg_direction(pp, r, d, beta, work);
  if (via != VIA_SLOT) vec_fused_restore(be);
  cr_assert_eq(rc, 0, "%s: %s", via_name[via], fe_error_message());

  char what[160];
  snprintf(what, sizeof what, "%s %s %s, %s", name, fe_precision_name(p),
           jacobi ? "jacobi" : "no pc", via_name[via]);
  double *scale = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) scale[i] = fabs(hx[i]) + fabs(alpha * hp[i]);
  assert_vectors_close(x, xw, scale, tol, what);
  for (int i = 0; i < n; i++) scale[i] = fabs(hr[i]) + fabs(alpha * hq[i]);
  assert_vectors_close(r, rw, scale, tol, what);
  double *nr = values_of(rw);
  for (int i = 0; i < n; i++) scale[i] = fabs(nr[i] / (hd ? hd[i] : 1.0)) + fabs(beta * hp[i]);
  assert_vectors_close(pp, pw, scale, tol, what);
  assert_sum_close(rr, rr_want, tol, what);
  assert_sum_close(rz, rz_want, tol, what);
  if (!d) cr_assert_eq(rz, rr, "%s: without d, (r, z) is (r, r)", what);

  free(scale), free(nr), free(hx), free(hr), free(hp), free(hq), free(hd);
  fe_vector_free(x), fe_vector_free(r), fe_vector_free(pp), fe_vector_free(q);
  fe_vector_free(d), fe_vector_free(work);
  fe_vector_free(xw), fe_vector_free(rw), fe_vector_free(pw), fe_vector_free(z);
}

/* Every combination of diagonal and path on one backend and precision. */
static void check_cg_steps_all(const char *name, fe_precision p, double tol)
{
  for (int jacobi = 1; jacobi >= 0; jacobi--)
    for (int via = VIA_SLOT; via <= VIA_FALLBACK_NO_WORK; via++)
      check_cg_steps(name, p, N_ODD, jacobi, (vec_via)via, tol);
}

Test(vector, cg_steps_match_unfused_on_cpu_in_double)
{
  check_cg_steps_all("cpu", FE_DOUBLE, 1e-14);
}
Test(vector, cg_steps_match_unfused_on_cpu_in_single) { check_cg_steps_all("cpu", FE_FLOAT, 1e-6); }
Test(vector, cg_steps_match_unfused_on_opencl_in_double)
{
  check_cg_steps_all("opencl", FE_DOUBLE, 1e-14);
}
Test(vector, cg_steps_match_unfused_on_opencl_in_single)
{
  check_cg_steps_all("opencl", FE_FLOAT, 1e-6);
}
Test(vector, cg_steps_match_unfused_on_cuda_in_double)
{
  check_cg_steps_all("cuda", FE_DOUBLE, 1e-14);
}
Test(vector, cg_steps_match_unfused_on_cuda_in_single)
{
  check_cg_steps_all("cuda", FE_FLOAT, 1e-6);
}

/* Tiny vectors (fewer values than one group has items) and empty ones: the sums of nothing
 * are 0. */
Test(vector, cg_steps_accept_tiny_and_empty_vectors)
{
  const char *names[] = {"cpu", "opencl"};
  for (int b = 0; b < 2; b++) {
    fe_backend *be;
    if (fe_backend_get(names[b], &be)) {
      fe_error_clear();
      continue;
    }
    check_cg_steps(names[b], FE_FLOAT, 3, 1, VIA_SLOT, 1e-6);
    if (be->info.fp64) check_cg_steps(names[b], FE_DOUBLE, 1, 0, VIA_SLOT, 1e-14);
    fe_vector *e;
    double rr = 42, rz = 42;
    cr_assert_eq(fe_vector_create(be, FE_FLOAT, 0, &e), 0, "%s", fe_error_message());
    cr_assert_eq(fe_vector_cg_update(e, e, e, e, e, 1.0, NULL, &rr, &rz), 0, "%s",
                 fe_error_message());
    cr_expect(rr == 0 && rz == 0, "%s: sums of nothing: %g %g", names[b], rr, rz);
    cr_assert_eq(fe_vector_cg_direction(e, e, NULL, 1.0, NULL), 0, "%s", fe_error_message());
    fe_vector_free(e);
  }
}

/* The cpu sums are the same bits whatever the number of OpenMP threads. */
Test(vector, cpu_cg_update_sums_do_not_depend_on_thread_count)
{
  fe_backend *be = backend_or_skip("cpu", FE_DOUBLE);
  int saved = omp_get_max_threads();
  double rr[2], rz[2];
  for (int k = 0; k < 2; k++) {
    omp_set_num_threads(k == 0 ? 1 : 3);
    fe_vector *x = make_vector(be, FE_DOUBLE, N_ODD, 1, -1.0, 1.0);
    fe_vector *r = make_vector(be, FE_DOUBLE, N_ODD, 2, -1.0, 1.0);
    fe_vector *p = make_vector(be, FE_DOUBLE, N_ODD, 3, -1.0, 1.0);
    fe_vector *q = make_vector(be, FE_DOUBLE, N_ODD, 4, -1.0, 1.0);
    fe_vector *d = make_vector(be, FE_DOUBLE, N_ODD, 5, 0.5, 1.5);
    cr_assert_eq(fe_vector_cg_update(x, r, p, q, d, 0.25, NULL, &rr[k], &rz[k]), 0, "%s",
                 fe_error_message());
    fe_vector_free(x), fe_vector_free(r), fe_vector_free(p), fe_vector_free(q), fe_vector_free(d);
  }
  omp_set_num_threads(saved);
  cr_expect(rr[0] == rr[1] && rz[0] == rz[1], "1 thread: %.17g %.17g, 3 threads: %.17g %.17g",
            rr[0], rz[0], rr[1], rz[1]);
}

/* The cpu's dot: the same bits whatever the number of threads, and the bits of the fused
 * update's (r, r) of the same r (a CG with the fused steps and one with dot agree), short (one
 * range) and long (the blocks); and the sum is the four running sums' of docs' order. */
Test(vector, cpu_dot_is_the_fused_sum_at_any_thread_count)
{
  fe_backend *be = backend_or_skip("cpu", FE_DOUBLE);
  int saved = omp_get_max_threads();
  const int sizes[2] = {1003, N_ODD};
  for (int s = 0; s < 2; s++) {
    double dots[2], rrs[2];
    for (int k = 0; k < 2; k++) {
      omp_set_num_threads(k == 0 ? 1 : 3);
      fe_vector *r = make_vector(be, FE_DOUBLE, sizes[s], 2, -1.0, 1.0);
      fe_vector *p = make_vector(be, FE_DOUBLE, sizes[s], 3, -1.0, 1.0);
      fe_vector *q = make_vector(be, FE_DOUBLE, sizes[s], 4, 0.0, 0.0); /* r unchanged */
      fe_vector *x = make_vector(be, FE_DOUBLE, sizes[s], 1, -1.0, 1.0);
      double rz;
      cr_assert_eq(fe_vector_cg_update(x, r, p, q, NULL, 0.25, NULL, &rrs[k], &rz), 0, "%s",
                   fe_error_message());
      cr_assert_eq(fe_vector_dot(r, r, &dots[k]), 0, "%s", fe_error_message());
      fe_vector_free(x), fe_vector_free(r), fe_vector_free(p), fe_vector_free(q);
    }
    cr_expect(dots[0] == dots[1], "n %d: 1 thread %.17g, 3 threads %.17g", sizes[s], dots[0],
              dots[1]);
    cr_expect(dots[0] == rrs[0] && dots[1] == rrs[1], "n %d: dot %.17g, the update's %.17g",
              sizes[s], dots[0], rrs[0]);
    if (s == 0) { /* one range: four running sums, i mod 4, then (s0 + s1) + (s2 + s3) */
      double a[4] = {0, 0, 0, 0};
      for (int i = 0; i < sizes[s]; i++) {
        double v = test_value((size_t)i, 2, -1.0, 1.0);
        a[i < sizes[s] / 4 * 4 ? i % 4 : 0] += v * v;
      }
      cr_expect(dots[0] == (a[0] + a[1]) + (a[2] + a[3]), "n %d: %.17g, in order %.17g",
                sizes[s], dots[0], (a[0] + a[1]) + (a[2] + a[3]));
    }
  }
  omp_set_num_threads(saved);
}

/* Vectors of different sizes or places are an argument error naming the operation. */
Test(vector, cg_steps_reject_mismatched_vectors)
{
  fe_backend *be = backend_or_skip("cpu", FE_DOUBLE);
  fe_vector *a, *b, *f;
  double rr, rz;
  cr_assert_eq(fe_vector_create(be, FE_DOUBLE, 10, &a), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_create(be, FE_DOUBLE, 11, &b), 0, "%s", fe_error_message());
  cr_assert_eq(fe_vector_create(be, FE_FLOAT, 10, &f), 0, "%s", fe_error_message());
  int rc = fe_vector_cg_update(a, a, a, a, b, 1.0, NULL, &rr, &rz);
  cr_expect_eq(rc, FE_ERR_ARG, "rc %d", rc);
  cr_expect(strstr(fe_error_message(), "cg_update"), "%s", fe_error_message());
  fe_error_clear();
  rc = fe_vector_cg_direction(a, f, NULL, 1.0, NULL);
  cr_expect_eq(rc, FE_ERR_ARG, "rc %d", rc);
  cr_expect(strstr(fe_error_message(), "cg_direction"), "%s", fe_error_message());
  fe_error_clear();
  fe_vector_free(a), fe_vector_free(b), fe_vector_free(f);
}
