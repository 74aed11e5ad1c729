/* The cpu backend's trial runs (backends/cpu/cpu-guard.c): a kernel's first launch runs in
 * a forked child first, so a kernel that faults is an error naming the kernel, the signal
 * and the line, never the end of the process; a kernel that returned runs here after.
 * Each kernel adds 1 to a counter in memory shared with any child (MAP_SHARED), so a test
 * sees how many times it ran and where. */
#include <omp.h>
#include <string.h>
#include <sys/mman.h>

#include "fixtures.h"

static const char guard_source[] =
    "/* felab kernel: the guard's test kernels */\n"
    "#define FE_DOUBLE 1\n#define FE_COLORED 0\n"
    "#define FE_USER_C 1 /* as physics a user typed: tried first */\n"
    "#include <stdlib.h>\n#include <omp.h>\n"
    "%s"
    "FE_KERNEL(add_one)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  FE_GROUPS_BEGIN\n"
    "  FE_OUTER(g, n) y[g] += 1;\n"
    "  FE_GROUPS_END\n"
    "}\n"
    "FE_KERNEL(add_two)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);\n"
    "  FE_GROUPS_BEGIN\n"
    "  FE_OUTER(g, n) y[g] = 2;\n"
    "  FE_GROUPS_END\n"
    "}\n"
    "FE_KERNEL(count_threads)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  FE_GROUPS_BEGIN\n"
    "  FE_OUTER(g, n) y[g] = omp_get_num_threads();\n"
    "  FE_GROUPS_END\n"
    "}\n"
    "FE_KERNEL(team_size)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  const int run = ++count[0]; /* 1: the trial, 2: the run here */\n"
    "  FE_GROUPS_BEGIN\n"
    "  if (omp_get_thread_num() == 0) count[1 + run] = omp_get_num_threads();\n"
    "  FE_OUTER(g, n) y[g] = g;\n"
    "  FE_GROUPS_END\n"
    "}\n"
    "FE_KERNEL(read_bad)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  FE_GROUPS_BEGIN\n"
    "  FE_OUTER(g, n) y[g] = ((volatile real *)(size_t)n)[g]; /* a pointer made of a number */\n"
    "  FE_GROUPS_END\n"
    "}\n"
    "FE_KERNEL(divide)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  volatile int zero = n - n;\n"
    "  y[0] = count[0] / zero;\n"
    "}\n"
    "FE_KERNEL(trap)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  if (n > 0) __builtin_trap();\n"
    "  y[0] = 0;\n"
    "}\n"
    "FE_KERNEL(quits)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  if (n > 0) exit(3);\n"
    "  y[0] = 0;\n"
    "}\n"
    "FE_KERNEL(spins)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
    "{\n"
    "  count[0] += 1;\n"
    "  volatile int forever = n;\n"
    "  while (forever) {\n"
    "  }\n"
    "  y[0] = 0;\n"
    "}\n";

enum { N = 1000 };

typedef struct guard_fixture {
  fe_backend *be;
  fe_module *mod;
  int *count;   /* shared with the children */
  fe_buffer c, y;
} guard_fixture;

static void guard_open(guard_fixture *f)
{
  memset(f, 0, sizeof *f);
  f->be = test_backend_or_skip("cpu");
  const char *pre = f->be->ops->preamble(f->be->impl, FE_DOUBLE);
  char src[8192];
  snprintf(src, sizeof src, guard_source, pre);
  double secs;
  int cached;
  cr_assert_eq(f->be->ops->compile(f->be->impl, src, &f->mod, &secs, &cached), 0, "%s",
               fe_error_message());
  f->count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(f->count != MAP_FAILED);
  *f->count = 0;
  f->c = (fe_buffer){.ptr = f->count, .bytes = 4096};
  cr_assert_eq(f->be->ops->alloc(f->be->impl, N * sizeof(double), &f->y), 0);
  memset(f->y.ptr, 0, N * sizeof(double));
}

static void guard_close(guard_fixture *f)
{
  f->be->ops->release(f->be->impl, &f->y);
  munmap(f->count, 4096);
}

/* Launch kernel k on n, the counter and y; its return code. */
static int guard_run(guard_fixture *f, fe_kernel *k, int n, fe_buffer *y)
{
  fe_arg args[3] = {{.kind = FE_ARG_INT, .i = n},
                    {.kind = FE_ARG_BUFFER, .buf = &f->c},
                    {.kind = FE_ARG_BUFFER, .buf = y}};
  double secs;
  return f->be->ops->launch(f->be->impl, k, 1, 1, 3, args, FE_DOUBLE, &secs);
}

static fe_kernel *guard_kernel(guard_fixture *f, const char *name)
{
  fe_kernel *k;
  cr_assert_eq(f->be->ops->kernel(f->be->impl, f->mod, name, &k), 0, "%s", fe_error_message());
  return k;
}

static int guard_launch_on(guard_fixture *f, const char *name, int n, fe_buffer *y)
{
  return guard_run(f, guard_kernel(f, name), n, y);
}

static int guard_launch(guard_fixture *f, const char *name, int n)
{
  return guard_launch_on(f, name, n, &f->y);
}

/* The error of a launch that must fail with code, its message copied into msg. */
static void guard_expect_error(guard_fixture *f, const char *name, int n, int code, char *msg,
                               size_t len)
{
  int rc = guard_launch(f, name, n);
  cr_assert_eq(rc, code, "%s: rc %d (%s)", name, rc, rc ? fe_error_message() : "no error");
  snprintf(msg, len, "%s", fe_error_message());
  fe_error_clear();
}

Test(cpu_guard, healthy_kernel_is_tried_once_and_its_trial_writes_are_lost)
{
  guard_fixture f;
  guard_open(&f);
  cr_assert_eq(guard_launch(&f, "add_one", N), 0, "%s", fe_error_message());
  cr_expect_eq(*f.count, 2, "first launch: the trial and the run here, got %d runs", *f.count);
  const double *y = f.y.ptr;
  for (int i = 0; i < N; i++)
    cr_assert_eq(y[i], 1.0, "y[%d] = %g: the child's += reached y", i, y[i]);
  cr_assert_eq(guard_launch(&f, "add_one", N), 0, "%s", fe_error_message());
  cr_expect_eq(*f.count, 3, "second launch: no trial, got %d runs", *f.count);
  for (int i = 0; i < N; i++) cr_assert_eq(y[i], 2.0);
  guard_close(&f);
}

Test(cpu_guard, bad_read_names_kernel_signal_and_line_and_later_launches_refuse_without_a_child)
{
  guard_fixture f;
  guard_open(&f);
  char first[4096], second[4096];
  guard_expect_error(&f, "read_bad", 64, FE_ERR_BACKEND, first, sizeof first);
  const char *want[] = {"kernel read_bad", "the guard's test kernels", "SIGSEGV", "0x40",
                        ".c:", "in read_bad", "((volatile real *)(size_t)n)[g]"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_expect(strstr(first, want[i]), "no '%s' in: %s", want[i], first);
  cr_expect_eq(*f.count, 1, "the trial alone ran, got %d runs", *f.count);
  guard_expect_error(&f, "read_bad", 64, FE_ERR_BACKEND, second, sizeof second);
  cr_expect_str_eq(second, first);
  cr_expect_eq(*f.count, 1, "the second launch made a child or ran here: %d runs", *f.count);
  cr_assert_eq(guard_launch(&f, "add_one", N), 0, "%s", fe_error_message()); /* the rest runs */
  guard_close(&f);
}

Test(cpu_guard, integer_division_by_zero_is_sigfpe)
{
  guard_fixture f;
  guard_open(&f);
  char msg[4096];
  guard_expect_error(&f, "divide", 1, FE_ERR_BACKEND, msg, sizeof msg);
  cr_expect(strstr(msg, "SIGFPE") && strstr(msg, "integer division by zero"), "%s", msg);
  cr_expect(strstr(msg, "count[0] / zero"), "no line quoted: %s", msg);
  guard_close(&f);
}

Test(cpu_guard, trap_is_sigill)
{
  guard_fixture f;
  guard_open(&f);
  char msg[4096];
  guard_expect_error(&f, "trap", 1, FE_ERR_BACKEND, msg, sizeof msg);
  cr_expect(strstr(msg, "SIGILL") && strstr(msg, "__builtin_trap()"), "%s", msg);
  guard_close(&f);
}

Test(cpu_guard, exit_in_a_kernel_ends_only_its_trial)
{
  guard_fixture f;
  guard_open(&f);
  char msg[4096];
  guard_expect_error(&f, "quits", 1, FE_ERR_BACKEND, msg, sizeof msg);
  cr_expect(strstr(msg, "kernel quits") && strstr(msg, "exit") && strstr(msg, "status 3"), "%s",
            msg);
  guard_close(&f);
}

Test(cpu_guard, ctrl_c_ends_an_endless_trial_and_leaves_the_kernel_untried)
{
  guard_fixture f;
  guard_open(&f);
  char msg[4096];
  for (int round = 0; round < 2; round++) { /* untried: the second launch is a trial again */
    fe_interrupt_flag = 1;
    double t0 = fe_clock();
    guard_expect_error(&f, "spins", 1, FE_ERR_INTERRUPTED, msg, sizeof msg);
    cr_expect(fe_clock() - t0 < 5, "the child was not killed at once");
    cr_expect_eq(fe_interrupt_flag, 0, "the flag was not taken");
  }
  cr_expect_eq(*f.count, 2, "two trials, nothing run here: %d runs", *f.count);
  guard_close(&f);
}

Test(cpu_guard, parent_runs_on_every_thread_after_a_trial)
{
  guard_fixture f;
  guard_open(&f);
  int threads = omp_get_max_threads();
  cr_assert_eq(guard_launch(&f, "count_threads", 4 * threads), 0, "%s", fe_error_message());
  cr_expect_eq(omp_get_max_threads(), threads);
  const double *y = f.y.ptr;
  cr_expect_eq((int)y[0], threads, "the run here had %g threads of %d", y[0], threads);
  guard_close(&f);
}

/* A small launch is tried on one thread, a large one (its buffers 16 MiB or more: element
 * matrices) on the launch's team, a pool of the child's own; neither hangs. */
Test(cpu_guard, trial_team_is_one_thread_for_small_launches_and_the_launchs_for_large)
{
  guard_fixture f;
  guard_open(&f);
  int threads = omp_get_max_threads();
  cr_assert_eq(guard_launch(&f, "team_size", N), 0, "%s", fe_error_message());
  cr_expect_eq(f.count[2], 1, "small launch: a trial of %d threads", f.count[2]);
  cr_expect_eq(f.count[3], threads, "small launch: a run of %d threads here", f.count[3]);
  fe_buffer big;
  const int nbig = (16 << 20) / (int)sizeof(double) + 1;
  cr_assert_eq(f.be->ops->alloc(f.be->impl, nbig * sizeof(double), &big), 0);
  memset(f.count, 0, 64);
  char src[8192]; /* the same kernels in another module: team_size not tried yet */
  snprintf(src, sizeof src, guard_source, f.be->ops->preamble(f.be->impl, FE_DOUBLE));
  strcat(src, "/* the same kernels, another module */\n");
  double secs;
  int cached;
  cr_assert_eq(f.be->ops->compile(f.be->impl, src, &f.mod, &secs, &cached), 0, "%s",
               fe_error_message());
  cr_assert_eq(guard_launch_on(&f, "team_size", nbig, &big), 0, "%s", fe_error_message());
  cr_expect_eq(f.count[2], threads, "large launch: a trial of %d threads of %d", f.count[2],
               threads);
  cr_expect_eq(f.count[3], threads);
  f.be->ops->release(f.be->impl, &big);
  guard_close(&f);
}

Test(cpu_guard, first_launches_from_many_threads_make_one_trial)
{
  guard_fixture f;
  guard_open(&f);
  int failed = 0, nt = 1;
  fe_kernel *k = guard_kernel(&f, "add_two"); /* the engine looks up, then launches from threads */
#pragma omp parallel reduction(+ : failed)
  {
#pragma omp single
    nt = omp_get_num_threads();
    failed += guard_run(&f, k, N, &f.y) != 0;
  }
  cr_expect_eq(failed, 0, "%s", fe_error_message());
  cr_expect_eq(*f.count, nt + 1, "%d threads, %d runs: not one trial", nt, *f.count);
  guard_close(&f);
}

/* felab's own kernels (no user C: no FE_USER_C in the source) are not tried: one run. */
Test(cpu_guard, kernels_without_user_c_run_once_untried)
{
  guard_fixture f;
  guard_open(&f);
  const char *pre = f.be->ops->preamble(f.be->impl, FE_DOUBLE);
  char src[8192];
  snprintf(src, sizeof src,
           "/* felab kernel: no user C */\n#define FE_DOUBLE 1\n#define FE_COLORED 0\n%s"
           "FE_KERNEL(once)(const int n, FE_GLOBAL int *count, FE_GLOBAL real *y)\n"
           "{\n  count[0] += 1;\n  y[0] = n;\n}\n", pre);
  fe_module *mod;
  fe_kernel *k;
  double secs;
  int cached;
  cr_assert_eq(f.be->ops->compile(f.be->impl, src, &mod, &secs, &cached), 0, "%s",
               fe_error_message());
  cr_assert_eq(f.be->ops->kernel(f.be->impl, mod, "once", &k), 0, "%s", fe_error_message());
  cr_assert_eq(guard_run(&f, k, 7, &f.y), 0, "%s", fe_error_message());
  cr_expect_eq(*f.count, 1, "a kernel without user C ran %d times on its first launch", *f.count);
  f.be->ops->module_free(f.be->impl, mod);
  guard_close(&f);
}
