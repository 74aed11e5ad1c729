/* The cuda backend through the table: why it is unavailable (every machine), NVRTC's log
 * pointing at the generated line (every machine), and on a machine with an NVIDIA GPU
 * vector reductions against the host and out-of-memory errors. The GPU tests skip, with
 * the reason, where cuda cannot be opened (CI); tests/scripts/test_cuda.lua covers the
 * kernels themselves. The disk cache's kernel locks, which the compile-ahead batch tries
 * without waiting, on every machine. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "tests/unit/fixtures.h"

static void shutdown_backends(void) { fe_backend_shutdown(); }

TestSuite(cuda, .fini = shutdown_backends);

/* The index of the cuda backend in the registry. */
static int cuda_index(void)
{
  for (int i = 0; i < fe_backend_count(); i++)
    if (!strcmp(fe_backend_name(i), "cuda")) return i;
  return -1;
}

/* The opened cuda backend, or skip the test saying why there is none. */
static fe_backend *cuda_or_skip(void) { return test_backend_or_skip("cuda"); }

Test(cuda, registered_and_says_why_when_unavailable)
{
  int i = cuda_index();
  cr_assert(i >= 0, "cuda is not in the registry");
  char why[512] = "";
  int ok = fe_backend_available(i, why, sizeof why);
  cr_assert(why[0], "no device name and no reason");
  if (!ok) {
    cr_assert(strstr(why, "libcuda") || strstr(why, "NVIDIA") || strstr(why, "NVRTC") ||
                  strstr(why, "CUDA"),
              "the reason does not name what is missing: %s", why);
    fe_backend *be;
    cr_assert_eq(fe_backend_get("cuda", &be), FE_ERR_UNAVAILABLE);
    cr_assert(strstr(fe_error_message(), why), "asking for cuda does not repeat the reason");
    fe_error_clear();
  }
}

/* A kernel's cache lock held by another process: the batch's try says so at once
 * (FE_CACHE_BUSY) rather than waiting, another lock is free meanwhile, and the same lock is
 * had once the holder has let it go. */
Test(cuda, kernel_lock_held_elsewhere_is_busy_without_waiting, .timeout = 20)
{
  char dir[] = "/tmp/felab-lock-XXXXXX";
  cr_assert(mkdtemp(dir), "no temporary folder");
  setenv("FELAB_CACHE", dir, 1);
  unsigned long long h = 12345;
  int held[2], go[2];
  cr_assert(!pipe(held) && !pipe(go));
  pid_t child = fork();
  cr_assert(child >= 0);
  if (child == 0) { /* holds h's lock until the parent writes */
    int fd = fe_cache_lock_kernel("cuda", h);
    char c = fd >= 0 ? 'y' : 'n';
    if (write(held[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(2);
    fe_cache_unlock(fd);
    _exit(0);
  }
  char c = 0;
  cr_assert_eq(read(held[0], &c, 1), 1);
  cr_assert_eq(c, 'y', "the child could not take the lock");
  int busy = fe_cache_trylock_kernel("cuda", h);
  cr_assert_eq(busy, FE_CACHE_BUSY, "a lock held by another process: %d, not busy", busy);
  int other = fe_cache_trylock_kernel("cuda", h + 1); /* another of the FE_CACHE_LOCKS files */
  cr_assert(other >= 0, "a free lock was not had: %d", other);
  fe_cache_unlock(other);
  cr_assert_eq(write(go[1], "x", 1), 1);
  int status = 0;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int mine = fe_cache_trylock_kernel("cuda", h);
  cr_assert(mine >= 0, "the lock let go is not had: %d", mine);
  fe_cache_unlock(mine);
  char rm[64];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  cr_assert_eq(system(rm), 0);
}

Test(cuda, nvrtc_log_names_generated_line)
{
  const char *src = "#define FE_DOUBLE 1\nreal a;\n  f0[0] = u[0] + q;\n";
  const char *log = "felab.cu(3): error: identifier \"q\" is undefined\n"
                    "      f0[0] = u[0] + q;\n                     ^\n\n"
                    "1 error detected in the compilation of \"felab.cu\".\n";
  cr_assert_eq(fe_backend_compile_error("cuda", src, log), FE_ERR_COMPILE);
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, "generated cuda kernel does not compile"), "%s", msg);
  cr_assert(strstr(msg, "generated line 3:"), "the line is not named: %s", msg);
  cr_assert(strstr(msg, "f0[0] = u[0] + q;"), "the line is not quoted: %s", msg);
  fe_error_clear();
}

Test(cuda, dot_and_reduce_match_host_in_double)
{
  fe_backend *be = cuda_or_skip();
  const size_t n = 1000003; /* not a whole number of blocks */
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    size_t es = fe_precision_size((fe_precision)p);
    char *raw = malloc(n * es);
    double dot = 0, sum = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
      double v = sin(0.001 * (double)i) + 0.25;
      if (p == FE_FLOAT) v = (float)v, ((float *)raw)[i] = (float)v;
      else ((double *)raw)[i] = v;
      dot += v * v, sum += v, lo = fmin(lo, v), hi = fmax(hi, v);
    }
    fe_buffer x = {0};
    double r;
    cr_assert_eq(be->ops->alloc(be->impl, n * es, &x), 0, "%s", fe_error_message());
    cr_assert_eq(be->ops->write(be->impl, &x, 0, n * es, raw), 0, "%s", fe_error_message());
    cr_assert_eq(be->ops->dot(be->impl, &x, &x, n, (fe_precision)p, &r), 0);
    cr_assert(fabs(r - dot) <= 1e-12 * dot, "dot %.17g vs %.17g", r, dot);
    cr_assert_eq(be->ops->reduce(be->impl, &x, n, (fe_precision)p, FE_REDUCE_SUM, &r), 0);
    cr_assert(fabs(r - sum) <= 1e-12 * fabs(sum), "sum %.17g vs %.17g", r, sum);
    cr_assert_eq(be->ops->reduce(be->impl, &x, n, (fe_precision)p, FE_REDUCE_MIN, &r), 0);
    cr_assert_eq(r, lo);
    cr_assert_eq(be->ops->reduce(be->impl, &x, n, (fe_precision)p, FE_REDUCE_MAX, &r), 0);
    cr_assert_eq(r, hi);
    be->ops->release(be->impl, &x);
    free(raw);
  }
}

Test(cuda, out_of_memory_says_asked_and_free_and_goes_on)
{
  fe_backend *be = cuda_or_skip();
  fe_buffer big = {0}, small = {0};
  int rc = be->ops->alloc(be->impl, be->info.global_mem * 2, &big);
  cr_assert_eq(rc, FE_ERR_MEM, "an allocation of twice the memory did not fail with FE_ERR_MEM");
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, "out of device memory") && strstr(msg, "asked for") && strstr(msg, "free"),
            "%s", msg);
  cr_assert_null(big.ptr);
  fe_error_clear();
  cr_assert_eq(be->ops->alloc(be->impl, 1 << 20, &small), 0, "%s", fe_error_message());
  be->ops->release(be->impl, &small);
}
