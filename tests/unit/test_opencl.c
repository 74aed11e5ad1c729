/* The opencl backend through the table: memory, vector operations against the host in
 * double, kernels written in the dialect, compile errors and caches. Every test skips
 * (with the reason) where no OpenCL platform or device is present. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "tests/unit/fixtures.h"

#define N_ODD 100003 /* not a multiple of any group size */

/* The opened opencl backend, or skip the test saying why there is none. */
static fe_backend *opencl_or_skip(void) { return test_backend_or_skip("opencl"); }


static void shutdown_backends(void) { fe_backend_shutdown(); }

TestSuite(opencl, .fini = shutdown_backends);

/* A device vector of n reals from det_value, and its host copy in double (rounded through
 * the precision, so the host computes on exactly what the device holds). */
static void make_vector(fe_backend *be, fe_precision p, size_t n, unsigned seed, double lo,
                        double hi, fe_buffer *buf, double **host)
{
  size_t es = fe_precision_size(p);
  void *raw = malloc(n * es + 1);
  *host = malloc(n * sizeof(double) + 1);
  for (size_t i = 0; i < n; i++) {
    double v = test_value(i, seed, lo, hi);
    if (p == FE_FLOAT) {
      ((float *)raw)[i] = (float)v;
      (*host)[i] = (float)v;
    } else {
      ((double *)raw)[i] = v;
      (*host)[i] = v;
    }
  }
  cr_assert_eq(be->ops->alloc(be->impl, n * es, buf), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->write(be->impl, buf, 0, n * es, raw), 0, "%s", fe_error_message());
  free(raw);
}

/* A device vector read back into doubles (caller frees). */
static double *read_vector(fe_backend *be, fe_precision p, const fe_buffer *buf, size_t n)
{
  size_t es = fe_precision_size(p);
  void *raw = malloc(n * es + 1);
  double *out = malloc(n * sizeof(double) + 1);
  cr_assert_eq(be->ops->read(be->impl, buf, 0, n * es, raw), 0, "%s", fe_error_message());
  for (size_t i = 0; i < n; i++) out[i] = p == FE_FLOAT ? ((float *)raw)[i] : ((double *)raw)[i];
  free(raw);
  return out;
}

/* |got - want| within tol relative to scale (the size of the terms that made want). */
static void assert_close(double got, double want, double scale, double tol, const char *what,
                         size_t i)
{
  cr_assert(fabs(got - want) <= tol * (scale > 0 ? scale : 1e-300),
            "%s[%zu]: got %.17g, want %.17g (tolerance %g of %g)", what, i, got, want, tol,
            scale);
}

Test(opencl, device_is_described)
{
  fe_backend *be = opencl_or_skip();
  cr_assert(be->info.name[0], "no device name");
  cr_assert(be->info.vendor[0], "no vendor");
  cr_assert_gt(be->info.compute_units, 0);
  cr_assert_gt(be->info.global_mem, 0);
  cr_assert_gt(be->info.max_group, 0);
  cr_assert(!be->info.fp64_atomics || be->info.fp64, "fp64 atomics without fp64");
}

Test(opencl, device_index_out_of_range_is_unavailable_and_says_why)
{
  opencl_or_skip(); /* there is a device 0 */
  fe_backend_shutdown();
  setenv("FELAB_OPENCL_DEVICE", "999", 1);
  fe_backend *be;
  int rc = fe_backend_get("opencl", &be);
  cr_assert_eq(rc, FE_ERR_UNAVAILABLE, "rc %d", rc);
  cr_assert(strstr(fe_error_message(), "OpenCL device 999 does not exist"), "%s",
            fe_error_message());
  fe_error_clear();
  unsetenv("FELAB_OPENCL_DEVICE");
}

Test(opencl, alloc_write_read_copy_round_trip)
{
  fe_backend *be = opencl_or_skip();
  const size_t n = 1000;
  double host[1000], back[1000];
  fe_buffer a, b, empty;
  for (size_t i = 0; i < n; i++) host[i] = 0.5 * i - 3.25;
  cr_assert_eq(be->ops->alloc(be->impl, n * sizeof(double), &a), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->alloc(be->impl, n * sizeof(double), &b), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->alloc(be->impl, 0, &empty), 0, "%s", fe_error_message());
  cr_assert_eq(empty.bytes, 0);
  cr_assert_eq(be->ops->write(be->impl, &a, 0, sizeof host, host), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->copy(be->impl, &b, &a, sizeof host), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->read(be->impl, &b, 0, sizeof back, back), 0, "%s", fe_error_message());
  cr_assert_eq(memcmp(host, back, sizeof host), 0, "round trip changed the data");
  /* a write and a read at an offset touch only their range */
  double three[3] = {7, 8, 9}, got[5];
  cr_assert_eq(be->ops->write(be->impl, &b, 10 * sizeof(double), sizeof three, three), 0);
  cr_assert_eq(be->ops->read(be->impl, &b, 9 * sizeof(double), sizeof got, got), 0);
  cr_assert(got[0] == host[9] && got[1] == 7 && got[2] == 8 && got[3] == 9 && got[4] == host[13]);
  /* overruns are argument errors, not crashes */
  cr_assert_eq(be->ops->read(be->impl, &b, (n - 1) * sizeof(double), 2 * sizeof(double), got),
               FE_ERR_ARG);
  fe_error_clear();
  cr_assert_eq(be->ops->write(be->impl, &empty, 0, 0, host), 0, "%s", fe_error_message());
  be->ops->release(be->impl, &a);
  be->ops->release(be->impl, &b);
  be->ops->release(be->impl, &empty);
  cr_assert_null(a.ptr);
}

Test(opencl, huge_alloc_is_out_of_memory_with_sizes)
{
  fe_backend *be = opencl_or_skip();
  fe_buffer huge;
  int rc = be->ops->alloc(be->impl, (size_t)1 << 50, &huge);
  cr_assert_eq(rc, FE_ERR_MEM, "rc %d: %s", rc, fe_error_message());
  cr_assert(strstr(fe_error_message(), "out of device memory on"), "%s", fe_error_message());
  cr_assert(strstr(fe_error_message(), "MiB total"), "%s", fe_error_message());
  fe_error_clear();
}

/* fill, axpby, pointwise, dot, reduce on n values against the host, relative tolerance tol. */
static void check_vector_ops(fe_precision p, size_t n, double tol)
{
  fe_backend *be = opencl_or_skip();
  test_need_precision(be, p);
  void *impl = be->impl;
  const fe_backend_ops *ops = be->ops;
  fe_buffer x, y, z;
  double *hx, *hy, *hz, *got, r;
  make_vector(be, p, n, 1, -1.0, 1.0, &x, &hx);
  make_vector(be, p, n, 2, 0.5, 1.5, &y, &hy);
  make_vector(be, p, n, 3, -2.0, 2.0, &z, &hz);

  /* fill */
  cr_assert_eq(ops->fill(impl, &z, n, p, 0.1), 0, "%s", fe_error_message());
  got = read_vector(be, p, &z, n);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(got[i], p == FE_FLOAT ? (double)0.1f : 0.1, "fill[%zu] = %g", i, got[i]);
  free(got);

  /* z <- x .* y, then z <- x ./ y */
  cr_assert_eq(ops->pointwise(impl, &z, &x, &y, 0, n, p), 0, "%s", fe_error_message());
  got = read_vector(be, p, &z, n);
  for (size_t i = 0; i < n; i++)
    assert_close(got[i], hx[i] * hy[i], fabs(hx[i] * hy[i]), tol, "x.*y", i);
  free(got);
  cr_assert_eq(ops->pointwise(impl, &z, &x, &y, 1, n, p), 0, "%s", fe_error_message());
  got = read_vector(be, p, &z, n);
  for (size_t i = 0; i < n; i++)
    assert_close(got[i], hx[i] / hy[i], fabs(hx[i] / hy[i]), tol, "x./y", i);
  free(got);

  /* y <- 2 x - 0.5 y; then z <- 3 x + 0 z, with z full of NaN (not read when b = 0) */
  cr_assert_eq(ops->axpby(impl, &y, 2.0, &x, -0.5, n, p), 0, "%s", fe_error_message());
  got = read_vector(be, p, &y, n);
  for (size_t i = 0; i < n; i++)
    assert_close(got[i], 2 * hx[i] - 0.5 * hy[i], fabs(2 * hx[i]) + fabs(0.5 * hy[i]), tol,
                 "axpby", i);
  for (size_t i = 0; i < n; i++) hy[i] = got[i];
  free(got);
  cr_assert_eq(ops->fill(impl, &z, n, p, NAN), 0, "%s", fe_error_message());
  cr_assert_eq(ops->axpby(impl, &z, 3.0, &x, 0.0, n, p), 0, "%s", fe_error_message());
  got = read_vector(be, p, &z, n);
  for (size_t i = 0; i < n; i++) assert_close(got[i], 3 * hx[i], fabs(3 * hx[i]), tol, "3x", i);
  free(got);

  /* dot and the three reductions */
  double dot = 0, dscale = 0, sum = 0, sscale = 0, mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    dot += hx[i] * hy[i];
    dscale += fabs(hx[i] * hy[i]);
    sum += hx[i];
    sscale += fabs(hx[i]);
    mn = fmin(mn, hx[i]);
    mx = fmax(mx, hx[i]);
  }
  cr_assert_eq(ops->dot(impl, &x, &y, n, p, &r), 0, "%s", fe_error_message());
  assert_close(r, dot, dscale, tol, "dot", 0);
  cr_assert_eq(ops->reduce(impl, &x, n, p, FE_REDUCE_SUM, &r), 0, "%s", fe_error_message());
  assert_close(r, sum, sscale, tol, "sum", 0);
  cr_assert_eq(ops->reduce(impl, &x, n, p, FE_REDUCE_MIN, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r, mn, "min: got %.17g, want %.17g", r, mn);
  cr_assert_eq(ops->reduce(impl, &x, n, p, FE_REDUCE_MAX, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r, mx, "max: got %.17g, want %.17g", r, mx);

  ops->release(impl, &x);
  ops->release(impl, &y);
  ops->release(impl, &z);
  free(hx), free(hy), free(hz);
}

Test(opencl, vector_ops_match_host_in_double) { check_vector_ops(FE_DOUBLE, N_ODD, 1e-12); }
Test(opencl, vector_ops_match_host_in_single) { check_vector_ops(FE_FLOAT, N_ODD, 1e-5); }
Test(opencl, vector_ops_match_host_on_tiny_vectors)
{
  check_vector_ops(FE_DOUBLE, 1, 1e-12);
  check_vector_ops(FE_FLOAT, 3, 1e-5);
}

/* n = 0: nothing to do, reductions give their identities. */
static void check_empty(fe_precision p)
{
  fe_backend *be = opencl_or_skip();
  test_need_precision(be, p);
  fe_buffer x;
  double r = 42;
  cr_assert_eq(be->ops->alloc(be->impl, 0, &x), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->fill(be->impl, &x, 0, p, 1.0), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->axpby(be->impl, &x, 1.0, &x, 1.0, 0, p), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->pointwise(be->impl, &x, &x, &x, 1, 0, p), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->dot(be->impl, &x, &x, 0, p, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r, 0.0);
  cr_assert_eq(be->ops->reduce(be->impl, &x, 0, p, FE_REDUCE_SUM, &r), 0);
  cr_assert_eq(r, 0.0);
  cr_assert_eq(be->ops->reduce(be->impl, &x, 0, p, FE_REDUCE_MIN, &r), 0);
  cr_assert(isinf(r) && r > 0, "min of nothing = %g", r);
  cr_assert_eq(be->ops->reduce(be->impl, &x, 0, p, FE_REDUCE_MAX, &r), 0);
  cr_assert(isinf(r) && r < 0, "max of nothing = %g", r);
  be->ops->release(be->impl, &x);
}

Test(opencl, vector_ops_accept_empty_vectors_in_double) { check_empty(FE_DOUBLE); }
Test(opencl, vector_ops_accept_empty_vectors_in_single) { check_empty(FE_FLOAT); }

Test(opencl, vector_ops_reject_short_buffers)
{
  fe_backend *be = opencl_or_skip();
  fe_buffer x;
  double r;
  cr_assert_eq(be->ops->alloc(be->impl, 10 * sizeof(float), &x), 0);
  cr_assert_eq(be->ops->dot(be->impl, &x, &x, 10, FE_DOUBLE, &r), FE_ERR_ARG);
  fe_error_clear();
  be->ops->release(be->impl, &x);
}

/* engine defines + "#define FE_DOUBLE d" + preamble + body, as the engine assembles it. */
static char *dialect_source(fe_backend *be, fe_precision p, const char *defines, const char *body)
{
  const char *pre = be->ops->preamble(be->impl, p);
  size_t n = strlen(defines) + strlen(pre) + strlen(body) + 64;
  char *s = malloc(n);
  snprintf(s, n, "#define FE_DOUBLE %d\n%s%s%s", p == FE_DOUBLE, defines, pre, body);
  return s;
}

/* Per-group sums through shared memory, and one grand total by atomic adds from every work
 * item of every group: the whole dialect in one kernel. */
static const char group_sum_body[] =
    "FE_CONSTANT real scale[2] = {1, 2};\n"
    "FE_DEVICE real halve(real a) { return a / scale[1]; }\n"
    "FE_KERNEL(group_sums)(const int n, const int ngroups, FE_GLOBAL const real *FE_RESTRICT x,\n"
    "                      FE_GLOBAL real *FE_RESTRICT sums, FE_GLOBAL real *total)\n"
    "{\n"
    "  FE_GROUPS_BEGIN\n"
    "  FE_SHARED real part[TPB];\n"
    "  FE_OUTER(g, ngroups) {\n"
    "    FE_INNER(t, TPB) { /* each thread sums a strided slice of the group's chunk */\n"
    "      real s = 0;\n"
    "      for (int i = g * CHUNK + t; i < (g + 1) * CHUNK && i < n; i += TPB) s += x[i];\n"
    "      part[t] = s;\n"
    "    }\n"
    "    FE_BARRIER;\n"
    "    FE_INNER(t, 1) {\n"
    "      real s = 0;\n"
    "      for (int k = 0; k < TPB; k++) s += part[k];\n"
    "      sums[g] = halve(2 * s) * scale[0] + pow(s, 0) - 1;\n"
    "    }\n"
    "    FE_INNER(t, TPB) FE_ATOMIC_ADD(&total[0], part[t]);\n"
    "    FE_BARRIER;\n"
    "  }\n"
    "  FE_GROUPS_END\n"
    "}\n";

/* Compile group_sums, run it with several launch shapes, check sums and total exactly
 * (the data are small integers, so every order of addition gives the same float). */
static void check_group_sums(fe_precision p, const char *defines)
{
  fe_backend *be = opencl_or_skip();
  test_need_precision(be, p);
  if (p == FE_DOUBLE && !be->info.fp64_atomics)
    cr_skip_test("%s has no 64-bit atomics", be->info.name);
  const int n = N_ODD, chunk = 1000, ngroups = (n + chunk - 1) / chunk;
  char *src = dialect_source(be, p, defines, group_sum_body);
  fe_module *mod;
  fe_kernel *k, *k2;
  double secs;
  int cached;
  cr_assert_eq(be->ops->compile(be->impl, src, &mod, &secs, &cached), 0, "%s\n%s",
               fe_error_message(), src);
  cr_assert_eq(be->ops->kernel(be->impl, mod, "group_sums", &k), 0, "%s", fe_error_message());
  cr_assert_eq(be->ops->kernel(be->impl, mod, "group_sums", &k2), 0, "%s", fe_error_message());
  cr_assert_eq(k, k2, "a second lookup made another handle");

  size_t es = fe_precision_size(p);
  char *raw = malloc(n * es);
  double want_total = 0, *want = calloc(ngroups, sizeof *want);
  for (int i = 0; i < n; i++) {
    double v = (i * 7) % 13;
    want[i / chunk] += v;
    want_total += v;
    if (p == FE_FLOAT) ((float *)raw)[i] = (float)v;
    else ((double *)raw)[i] = v;
  }
  fe_buffer x, sums, total;
  cr_assert_eq(be->ops->alloc(be->impl, n * es, &x), 0);
  cr_assert_eq(be->ops->alloc(be->impl, ngroups * es, &sums), 0);
  cr_assert_eq(be->ops->alloc(be->impl, es, &total), 0);
  cr_assert_eq(be->ops->write(be->impl, &x, 0, n * es, raw), 0);

  /* group sizes: one thread striding, the template's own, more than any device allows;
   * group counts: every group, fewer (FE_OUTER strides) */
  size_t shapes[][2] = {{(size_t)ngroups, 64}, {7, 1}, {(size_t)ngroups, 1u << 20}, {3, 100}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    cr_assert_eq(be->ops->fill(be->impl, &total, 1, p, 0.0), 0);
    cr_assert_eq(be->ops->fill(be->impl, &sums, ngroups, p, -1.0), 0);
    fe_arg args[5] = {{.kind = FE_ARG_INT, .i = n},
                      {.kind = FE_ARG_INT, .i = ngroups},
                      {.kind = FE_ARG_BUFFER, .buf = &x},
                      {.kind = FE_ARG_BUFFER, .buf = &sums},
                      {.kind = FE_ARG_BUFFER, .buf = &total}};
    cr_assert_eq(be->ops->launch(be->impl, k, shapes[s][0], shapes[s][1], 5, args, p, &secs), 0,
                 "%s", fe_error_message());
    cr_assert_geq(secs, 0.0);
    double *got = read_vector(be, p, &sums, ngroups), t;
    for (int g = 0; g < ngroups; g++)
      cr_assert_eq(got[g], want[g], "shape %zu: group %d sum %g, want %g", s, g, got[g], want[g]);
    free(got);
    cr_assert_eq(be->ops->reduce(be->impl, &total, 1, p, FE_REDUCE_SUM, &t), 0);
    cr_assert_eq(t, want_total, "shape %zu: total %.17g, want %.17g", s, t, want_total);
  }

  /* no groups: nothing runs, no time */
  cr_assert_eq(be->ops->launch(be->impl, k, 0, 64, 5, (fe_arg[5]){0}, p, &secs), 0);
  cr_assert_eq(secs, 0.0);
  /* the wrong number of arguments is named */
  cr_assert_eq(be->ops->launch(be->impl, k, 1, 64, 2, (fe_arg[2]){0}, p, &secs), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "group_sums"), "%s", fe_error_message());
  fe_error_clear();

  be->ops->release(be->impl, &x);
  be->ops->release(be->impl, &sums);
  be->ops->release(be->impl, &total);
  be->ops->module_free(be->impl, mod);
  free(raw), free(want), free(src);
}

Test(opencl, dialect_kernel_sums_with_atomics_in_double)
{
  check_group_sums(FE_DOUBLE, "#define TPB 64\n#define CHUNK 1000\n");
}
Test(opencl, dialect_kernel_sums_with_atomics_in_single)
{
  check_group_sums(FE_FLOAT, "#define TPB 64\n#define CHUNK 1000\n");
}
Test(opencl, atomic_add_stays_atomic_when_colored)
{
  check_group_sums(FE_DOUBLE, "#define TPB 64\n#define CHUNK 1000\n#define FE_COLORED 1\n");
}

Test(opencl, syntax_error_quotes_the_generated_line)
{
  fe_backend *be = opencl_or_skip();
  char *src = dialect_source(be, FE_FLOAT, "",
                             "FE_KERNEL(bad)(FE_GLOBAL real *x)\n{\n  x[0] = 1 +;\n}\n");
  fe_module *mod = NULL;
  double secs;
  int cached;
  int rc = be->ops->compile(be->impl, src, &mod, &secs, &cached);
  cr_assert_eq(rc, FE_ERR_COMPILE, "rc %d: %s", rc, fe_error_message());
  cr_assert_null(mod);
  cr_assert(strstr(fe_error_message(), "generated line"), "%s", fe_error_message());
  cr_assert(strstr(fe_error_message(), "x[0] = 1 +;"), "%s", fe_error_message());
  fe_error_clear();
  free(src);
}

Test(opencl, unknown_kernel_name_is_an_error_naming_it)
{
  fe_backend *be = opencl_or_skip();
  char *src =
      dialect_source(be, FE_FLOAT, "", "FE_KERNEL(present)(FE_GLOBAL real *x) { x[0] = 1; }\n");
  fe_module *mod;
  fe_kernel *k;
  double secs;
  int cached;
  cr_assert_eq(be->ops->compile(be->impl, src, &mod, &secs, &cached), 0, "%s", fe_error_message());
  int rc = be->ops->kernel(be->impl, mod, "absent", &k);
  cr_assert_eq(rc, FE_ERR_BACKEND, "rc %d", rc);
  cr_assert(strstr(fe_error_message(), "'absent'"), "%s", fe_error_message());
  cr_assert(strstr(fe_error_message(), "present"), "%s", fe_error_message());
  fe_error_clear();
  be->ops->module_free(be->impl, mod);
  free(src);
}

Test(opencl, same_source_compiles_once_per_session_then_from_disk)
{
  char dir[] = "/tmp/felab-opencl-test-XXXXXX", stamp[128];
  cr_assert_not_null(mkdtemp(dir));
  setenv("FELAB_CACHE", dir, 1);
  setenv("FELAB_OPENCL_DISK_CACHE", "1", 1);
  fe_backend *be = opencl_or_skip();
  snprintf(stamp, sizeof stamp, "/* %s */\nFE_KERNEL(once)(FE_GLOBAL real *x) { x[0] = 2; }\n",
           dir);
  char *src = dialect_source(be, FE_FLOAT, "", stamp);
  fe_module *m1, *m2, *m3;
  double s1, s2, s3;
  int c1, c2, c3;
  cr_assert_eq(be->ops->compile(be->impl, src, &m1, &s1, &c1), 0, "%s", fe_error_message());
  cr_assert_eq(c1, 0, "a new source came from a cache");
  cr_assert_eq(be->ops->compile(be->impl, src, &m2, &s2, &c2), 0, "%s", fe_error_message());
  cr_assert_eq(c2, 1, "the same source was built twice");
  /* modules from one source are independent: freeing one keeps the other usable */
  be->ops->module_free(be->impl, m1);
  fe_kernel *k;
  cr_assert_eq(be->ops->kernel(be->impl, m2, "once", &k), 0, "%s", fe_error_message());
  /* a new session finds the binary on disk */
  fe_backend_shutdown();
  be = opencl_or_skip();
  cr_assert_eq(be->ops->compile(be->impl, src, &m3, &s3, &c3), 0, "%s", fe_error_message());
  cr_assert_eq(c3, 1, "the program binary was not found in %s", dir);
  fe_buffer x;
  double secs, r;
  cr_assert_eq(be->ops->alloc(be->impl, sizeof(float), &x), 0);
  cr_assert_eq(be->ops->kernel(be->impl, m3, "once", &k), 0, "%s", fe_error_message());
  fe_arg a = {.kind = FE_ARG_BUFFER, .buf = &x};
  cr_assert_eq(be->ops->launch(be->impl, k, 1, 1, 1, &a, FE_FLOAT, &secs), 0, "%s",
               fe_error_message());
  cr_assert_eq(be->ops->reduce(be->impl, &x, 1, FE_FLOAT, FE_REDUCE_MAX, &r), 0);
  cr_assert_eq(r, 2.0, "the kernel from the disk cache wrote %g", r);
  be->ops->release(be->impl, &x);
  /* m2 is left for close to free: close releases what the engine forgot */
  fe_backend_shutdown();
  free(src);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(opencl, math_takes_mixed_argument_types)
{
  fe_backend *be = opencl_or_skip();
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    if (p == FE_DOUBLE && !be->info.fp64) continue;
    char *src = dialect_source(be, (fe_precision)p, "",
                               "FE_KERNEL(m)(FE_GLOBAL real *x)\n{\n"
                               "  x[0] = pow(x[0], 2) + sqrt(4) + fmin(x[0], 0.5) + exp(0) +\n"
                               "         atan2(1, x[0]) + fabs(-1);\n}\n");
    fe_module *mod;
    double secs;
    int cached;
    cr_assert_eq(be->ops->compile(be->impl, src, &mod, &secs, &cached), 0, "%s",
                 fe_error_message());
    be->ops->module_free(be->impl, mod);
    free(src);
  }
}
