/* felab cpu backend: generated C compiled at run time by the system compiler into a shared
 * object, loaded with dlopen and cached on disk by a hash of the source and the flags.
 * Work groups run on OpenMP threads; a group's inner loops are plain loops.
 *
 * This file holds the device (open, close, query; host memory is the cpu's buffers) and the
 * table; the work lives in the other cpu-*.c files (see cpu-backend.h for which does what). */
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu-backend.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"

/* A colored kernel's groups go to the threads in runs of `run` (schedule(runtime)): the runs
 * of a color share no node, a run's groups do and stay on one thread. 0: one even part a
 * thread, as schedule(static) (the other kernels compiled colored: element matrices read from
 * a colored realization, which add atomically). */
static void cpu_group_runs(void *impl, int run)
{
  (void)impl;
  omp_set_schedule(omp_sched_static, run > 0 ? run : 0);
}

/* Double's kernels in whole 512-bit vectors (FE_CPU_WIDE, which the preamble turns into gcc's
 * prefer-vector-width): where this core has AVX-512 and the compiler is gcc (clang's tuning
 * takes no such pragma). A group's lanes are 8 cells, one 64-byte line, which gcc's Ice Lake
 * tuning splits into two 256-bit halves: twice the instructions, half the registers' worth of
 * values (docs/kernels.md). */
static int cpu_wide_double(const char *cc)
{
  return __builtin_cpu_supports("avx512f") && !strstr(cc, "clang");
}

/* The backend: a cache directory and a compiler; no device to open. */
static int cpu_open(int device, void **impl)
{
  if (device != 0) FE_ERROR(FE_ERR_ARG, "the cpu backend has one device (0), not %d", device);
  cpu_impl *c;
  FE_CALLOC(c, 1, "cpu backend");
  if (fe_cache_dir("cpu", c->cache, sizeof c->cache)) {
    free(c);
    return fe_error_push(FE_ERR_IO, __FILE__, __LINE__, __func__);
  }
  const char *cc = getenv("FELAB_CC");
  snprintf(c->cc, sizeof c->cc, "%s", cc && *cc ? cc : "cc");
  /* -fno-math-errno: the kernels never read errno, and with it set gcc keeps sqrt a scalar
   * call with a branch, so a loop holding one (a physics with |grad u|, a square root) is
   * not vectorized at all; sqrt's results are the same correctly rounded values either way */
  snprintf(c->flags, sizeof c->flags,
           "-std=gnu11 -O3 -march=native -ffp-contract=fast -fno-math-errno -fopenmp -fPIC -shared%s",
           cpu_wide_double(c->cc) ? " -DFE_CPU_WIDE=1" : "");
  const char *mca = getenv("FELAB_MCA");
  snprintf(c->mca, sizeof c->mca, "%s", mca && *mca ? mca : "llvm-mca");
  c->has_mca = strcmp(c->mca, "off") ? -1 : 0;
  const char *trial = getenv("FELAB_CPU_TRIAL");
  c->trials = !(trial && !strcmp(trial, "off"));
  c->trial_all = trial && !strcmp(trial, "all");
  pthread_mutex_init(&c->trial_lock, NULL);
  pthread_mutex_init(&c->asm_lock, NULL);
  cpu_group_runs(c, 0); /* OMP_SCHEDULE and the runtime's default aside */
  *impl = c;
  return 0;
}

static void cpu_close(void *impl)
{
  cpu_impl *c = impl;
  if (!c) return;
  for (fe_module *m = c->modules, *next; m; m = next) {
    next = m->next;
    dlclose(m->handle);
    free(m->asm_text);
    free(m);
  }
  for (int i = 0; i < c->nkernels; i++) {
    free(c->kernels[i]->fault);
    free(c->kernels[i]);
  }
  free(c->kernels);
  pthread_mutex_destroy(&c->trial_lock);
  pthread_mutex_destroy(&c->asm_lock);
  free(c);
}

/* The last-level cache of the first core, as the kernel's sysfs describes it (the highest
 * level's size): glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) reads cpuid, which on a virtual
 * machine may describe the host's (320 MB where lscpu and sysfs say 32); 0: not known. */
static size_t cpu_llc_bytes(void)
{
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; i++) {
    char path[96], text[32];
    int level = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    if (fscanf(f, "%d", &level) != 1) level = 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!(f = fopen(path, "r"))) continue;
    char *ok = fgets(text, sizeof text, f);
    fclose(f);
    char *end;
    unsigned long long v = ok ? strtoull(text, &end, 10) : 0;
    if (!ok || end == text) continue;
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    if (level > best_level) best_level = level, best = (size_t)v;
  }
  if (!best) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    best = l2 > 0 ? (size_t)l2 : 0;
  }
  return best;
}

/* The processor's model name from /proc/cpuinfo. */
static void cpu_model_name(char *name, size_t n)
{
  snprintf(name, n, "host CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *p = strchr(line, ':');
    if (p) {
      p += strspn(p + 1, " \t") + 1;
      p[strcspn(p, "\n")] = '\0';
      snprintf(name, n, "%s", p);
    }
    break;
  }
  fclose(f);
}

static int cpu_query(void *impl, fe_device_info *info)
{
  const cpu_impl *c = impl;
  memset(info, 0, sizeof *info);
  cpu_model_name(info->name, sizeof info->name);
  snprintf(info->vendor, sizeof info->vendor, "OpenMP, %d threads", omp_get_max_threads());
  info->is_gpu = 0;
  info->compute_units = omp_get_max_threads();
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  info->global_mem = pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : 0;
  info->local_mem = 1 << 20; /* a group's "shared" arrays live on the thread's stack */
  info->max_group = 1 << 16;
  info->fp64 = 1;
  info->fp64_atomics = 1;
  info->warp = info->threads_per_cu = info->groups_per_cu = 1; /* a group per thread */
  long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  info->l1_bytes = l1 > 0 ? (size_t)l1 : 0;
  info->llc_bytes = cpu_llc_bytes();
  /* the kernels' registers (-march=native on this core): double's whole 512-bit ones where
   * cpu_wide_double says, else 256-bit ones with AVX (the compilers' choice on AVX-512 cores
   * too) */
  const int avx = __builtin_cpu_supports("avx");
  info->vector_bytes[FE_FLOAT] = avx ? 32 : 16;
  info->vector_bytes[FE_DOUBLE] = cpu_wide_double(c ? c->cc : "cc") ? 64 : avx ? 32 : 16;
  info->items_in_order = 1;   /* FE_INNER is a plain loop on the group's thread */
  info->cells_in_lanes = 1;   /* gcc vectorizes the strategies' loops over a group's cells */
  info->stack_shared = (size_t)512 << 10; /* FE_SHARED arrays are the thread's locals */
  info->large_local = 1;
  info->cpu_calibration = 1;
  info->synchronous = 1;      /* every call returns with its work done */
  return 0;
}

static int cpu_alloc(void *impl, size_t bytes, fe_buffer *buf)
{
  (void)impl;
  FE_CHECK(fe_memory_check(bytes, "a buffer of the cpu backend")); /* before its pages are touched */
  void *p = NULL;
  /* a buffer of a few huge pages or more starts on one (fe_populate: huge pages) */
  const size_t align = bytes >= ((size_t)4 << 20) ? (size_t)2 << 20 : 64;
  if (posix_memalign(&p, align, bytes ? bytes : 64))
    FE_ERROR(FE_ERR_MEM, "out of host memory: a buffer of %.1f MiB", bytes / 1048576.0);
  buf->ptr = p;
  buf->bytes = bytes;
  fe_populate(p, bytes); /* a large buffer's pages present now */
  return 0;
}

static void *cpu_host(void *impl, const fe_buffer *buf)
{
  (void)impl;
  return buf->ptr; /* the cpu's buffers are host memory */
}

/* Host memory is the cpu's memory: the buffer is the array itself. */
static int cpu_wrap(void *impl, void *host, size_t bytes, fe_buffer *buf)
{
  (void)impl;
  FE_ASSERT(host || !bytes, FE_ERR_INTERNAL, "cpu wrap of no memory");
  buf->ptr = host;
  buf->bytes = bytes;
  return 0;
}

static void cpu_release(void *impl, fe_buffer *buf)
{
  (void)impl;
  free(buf->ptr);
  buf->ptr = NULL;
  buf->bytes = 0;
}

static int cpu_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host)
{
  (void)impl;
  FE_ASSERT(offset + bytes <= dst->bytes, FE_ERR_INTERNAL, "cpu write past the end of a buffer");
  if (bytes) memcpy((char *)dst->ptr + offset, host, bytes);
  return 0;
}

static int cpu_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host)
{
  (void)impl;
  FE_ASSERT(offset + bytes <= src->bytes, FE_ERR_INTERNAL, "cpu read past the end of a buffer");
  if (bytes) memcpy(host, (const char *)src->ptr + offset, bytes);
  return 0;
}

static int cpu_copy(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes)
{
  (void)impl;
  FE_ASSERT(bytes <= dst->bytes && bytes <= src->bytes, FE_ERR_INTERNAL, "cpu copy too long");
  if (bytes) memcpy(dst->ptr, src->ptr, bytes);
  return 0;
}

static int cpu_finish(void *impl)
{
  (void)impl;
  return 0;
}

const fe_backend_ops fe_backend_cpu_ops = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .query = cpu_query,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .write = cpu_write,
    .read = cpu_read,
    .host = cpu_host,
    .wrap = cpu_wrap,
    .copy = cpu_copy,
    .preamble = cpu_preamble,
    .compile = cpu_compile,
    .module_free = cpu_module_free,
    .kernel = cpu_kernel,
    .kernel_resources = cpu_kernel_resources,
    .launch = cpu_launch,
    .group_runs = cpu_group_runs,
    .finish = cpu_finish,
    .fill = cpu_fill,
    .axpby = cpu_axpby,
    .pointwise = cpu_pointwise,
    .dot = cpu_dot,
    .reduce = cpu_reduce,
    .cg_update = cpu_cg_update,
    .cg_direction = cpu_cg_direction,
    .cg_begin = cpu_cg_begin,
    .cg_pq = cpu_cg_pq,
    .cg_step = cpu_cg_step,
    .cg_wait = cpu_cg_wait,
    .cg_end = cpu_cg_end,
    .cg_parts = cpu_cg_parts,
    .cg_split = cpu_cg_split,
};
