/* felab cpu backend: generated C compiled at run time by the system compiler into a shared
 * object, loaded with dlopen and cached on disk by a hash of the source and the flags.
 * Work groups run on OpenMP threads; a group's inner loops are plain loops.
 *
 * Kernels have many signatures, so the backend appends to every source one launcher per
 * kernel, `void fe_launch_<name>(void **a)`, that unpacks an argument array and calls the
 * kernel; launch() fills the array.
 *
 * The first launch of a kernel holding C a user typed (raw bodies, string coefficients: its
 * source defines FE_USER_C) runs first in a forked child (cpu-guard.c): code that faults (a
 * raw C physics reading a bad pointer) ends the child, and the launch is an error naming the
 * kernel, the signal and the line, which every later launch of the kernel repeats; a kernel
 * that returned there is trusted and runs here, now and after. A trial costs a fork (the
 * session's page tables copied: its time grows with the session's memory) and one more run of
 * the kernel, once a kernel a session (a first apply's time about triples: docs/kernels.md),
 * so felab's own generated code, which reads only what it was given, is not tried.
 * FELAB_CPU_TRIAL=all tries every kernel, off none. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/cpu-guard.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/strbuf.h"

#define CPU_MAX_ARGS 32

struct fe_module {
  void *handle;         /* dlopen handle */
  struct fe_module *next;
  char base[1100];      /* its source and object in the cache, less .c and .so */
  char what[160];       /* its source's first comment ("residual of raw on P1 ..."), or "" */
  int untried;          /* its kernels run without a trial (the calibration's, see cpu_kernel) */
};

struct fe_kernel {
  cpu_launcher fn;
  char name[64];
  fe_module *mod;
  int simulated;        /* llvm-mca asked (once a kernel), */
  double loop_cycles;   /* its answer for the hot loop (0: none) */
  int trust;            /* 0: not run yet, 1: its trial run returned, -1: it faulted there */
  char *fault;          /* the error of a kernel that faulted, repeated at every launch */
};

typedef struct cpu_impl {
  char cache[1024];     /* directory of compiled objects */
  char cc[256];         /* compiler command */
  char flags[256];      /* compiler flags (part of the cache key) */
  char mca[256];        /* llvm-mca's command (FELAB_MCA; "off": none) */
  int has_mca;          /* -1 not asked yet, 0 absent, 1 on the PATH */
  fe_module *modules;   /* every module loaded, closed at the end */
  int nkernels, cap;
  fe_kernel **kernels;  /* every kernel handed out (a session may make any number) */
  int trials;           /* first launches are tried in a child (FELAB_CPU_TRIAL=off: not) */
  int trial_all;        /* FELAB_CPU_TRIAL=all: every kernel's, else those of user C alone */
  pthread_mutex_t trial_lock; /* one trial run at a time (cpu_kernel_vet) */
} cpu_impl;

static const char cpu_preamble_text[] =
    "/* ---- cpu backend: the dialect as C with OpenMP ---- */\n"
    "#include <math.h>\n"
    "#include <stddef.h>\n"
    "#if FE_DOUBLE\n"
    "typedef double real;\n"
    "#else\n"
    "typedef float real;\n"
    "#endif\n"
    "#define FE_CPU 1\n"
    "#define FE_KERNEL(name) __attribute__((visibility(\"default\"))) void name\n"
    "#define FE_GLOBAL\n"
    "#define FE_CONSTANT static const\n"
    "#define FE_DEVICE static inline\n"
    "#define FE_RESTRICT restrict\n"
    "#define FE_GROUPS_BEGIN _Pragma(\"omp parallel\") {\n"
    "#define FE_GROUPS_END }\n"
    "#define FE_SHARED\n"
    "#define FE_SHARED_PTR\n"
    "#if FE_COLORED\n"
    "#define FE_OUTER(g, n) _Pragma(\"omp for schedule(runtime)\") for (int g = 0; g < (n); ++g)\n"
    "#else\n"
    "#define FE_OUTER(g, n) _Pragma(\"omp for schedule(static)\") for (int g = 0; g < (n); ++g)\n"
    "#endif\n"
    "#define FE_INNER(t, n) for (int t = 0; t < (n); ++t)\n"
    "#define FE_INNER_VEC(t, n) _Pragma(\"GCC ivdep\") for (int t = 0; t < (n); ++t)\n"
    "/* entry t = e n + b of the cell map of a group's m cells (cell e, node b): two loops, no\n"
    " * division by n */\n"
    "#define FE_CELL_NODES(t, e, b, m, n) \\\n"
    "  for (int e = 0; e < (m); ++e) for (int b = 0, t = e * (n); b < (n); ++b, ++t)\n"
    "#define FE_UNROLL _Pragma(\"GCC unroll 64\")\n"
    "#define FE_BARRIER\n"
    "#if FE_COLORED\n"
    "#define FE_ATOMIC_ADD(p, v) (*(p) += (v))\n"
    "#else\n"
    "#define FE_ATOMIC_ADD(p, v) do { _Pragma(\"omp atomic\") *(p) += (v); } while (0)\n"
    "#endif\n"
    "/* ---- end of the cpu preamble ---- */\n";

/* A colored kernel's groups go to the threads in runs of `run` (schedule(runtime)): the runs
 * of a color share no node, a run's groups do and stay on one thread. 0: one even part a
 * thread, as schedule(static) (the other kernels compiled colored: element matrices read from
 * a colored realization, which add atomically). */
static void cpu_group_runs(void *impl, int run)
{
  (void)impl;
  omp_set_schedule(omp_sched_static, run > 0 ? run : 0);
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
  snprintf(c->flags, sizeof c->flags, "-std=gnu11 -O3 -march=native -ffp-contract=fast -fopenmp -fPIC -shared");
  const char *mca = getenv("FELAB_MCA");
  snprintf(c->mca, sizeof c->mca, "%s", mca && *mca ? mca : "llvm-mca");
  c->has_mca = strcmp(c->mca, "off") ? -1 : 0;
  const char *trial = getenv("FELAB_CPU_TRIAL");
  c->trials = !(trial && !strcmp(trial, "off"));
  c->trial_all = trial && !strcmp(trial, "all");
  pthread_mutex_init(&c->trial_lock, NULL);
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
    free(m);
  }
  for (int i = 0; i < c->nkernels; i++) {
    free(c->kernels[i]->fault);
    free(c->kernels[i]);
  }
  free(c->kernels);
  pthread_mutex_destroy(&c->trial_lock);
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
  (void)impl;
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
  info->items_in_order = 1;   /* FE_INNER is a plain loop on the group's thread */
  info->cells_in_lanes = 1;   /* gcc vectorizes the strategies' loops over a group's cells */
  info->stack_shared = (size_t)512 << 10; /* FE_SHARED arrays are the thread's locals */
  info->large_local = 1;
  info->cpu_calibration = 1;
  return 0;
}

static int cpu_alloc(void *impl, size_t bytes, fe_buffer *buf)
{
  (void)impl;
  FE_CHECK(fe_memory_check(bytes, "a buffer of the cpu backend")); /* before its pages are touched */
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64))
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

static const char *cpu_preamble(void *impl, fe_precision prec)
{
  (void)impl;
  (void)prec;
  return cpu_preamble_text;
}

/* One argument of a launcher: pointers pass as they are, ints and reals by address. */
static void cpu_unpack_param(fe_strbuf *out, const char *param, size_t len, int k)
{
  char p[256];
  snprintf(p, sizeof p, "%.*s", (int)len, param);
  if (k) fe_strbuf_append(out, ",\n    ");
  if (strchr(p, '*')) fe_strbuf_printf(out, "(void *)a[%d]", k);
  else if (strstr(p, "int")) fe_strbuf_printf(out, "*(const int *)a[%d]", k);
  else fe_strbuf_printf(out, "*(const real *)a[%d]", k);
}

/* Append a launcher for every `FE_KERNEL(name)(params)` in src (skipping the #define). */
static void cpu_add_launchers(const char *src, fe_strbuf *out)
{
  const char *p = src;
  while ((p = strstr(p, "FE_KERNEL(")) != NULL) {
    const char *bol = p;
    while (bol > src && bol[-1] != '\n') bol--;
    p += strlen("FE_KERNEL(");
    const char *e = strchr(p, ')');
    if (*bol == '#' || !e || e[1] != '(') continue; /* the macro's own definition */
    fe_strbuf_printf(out, "\n__attribute__((visibility(\"default\"))) void fe_launch_%.*s(void **a)\n{\n  %.*s(",
                     (int)(e - p), p, (int)(e - p), p);
    /* parameters: split on commas outside parentheses */
    const char *q = e + 2, *start = q;
    int depth = 0, k = 0;
    for (; *q; q++) {
      if (*q == '(') depth++;
      else if (*q == ')' && depth-- == 0) break;
      else if (*q == ',' && depth == 0) {
        cpu_unpack_param(out, start, (size_t)(q - start), k++);
        start = q + 1;
      }
    }
    if (q > start) cpu_unpack_param(out, start, (size_t)(q - start), k);
    fe_strbuf_append(out, ");\n}\n");
    p = q;
  }
}

/* Run the compiler on path.c -> path.so; on failure read its log into an error. */
static int cpu_run_compiler(cpu_impl *c, const char *csrc, const char *source_shown,
                            const char *base)
{
  char cpath[1200], tmp[1200], log[1200], cmd[4400];
  snprintf(cpath, sizeof cpath, "%s.%d.c", base, (int)getpid()); /* per process: two may compile at once */
  snprintf(tmp, sizeof tmp, "%s.%d.so", base, (int)getpid());
  snprintf(log, sizeof log, "%s.%d.log", base, (int)getpid());
  FILE *f = fopen(cpath, "w");
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write %s: %s", cpath, strerror(errno));
  fputs(csrc, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%.255s %.255s -o '%s' '%s' > '%s' 2>&1", c->cc, c->flags, tmp, cpath, log);
  int rc = system(cmd);
  if (rc != 0) {
    char *text = NULL;
    FILE *lf = fopen(log, "r");
    if (lf) {
      text = calloc(1, 65536);
      if (text) {
        size_t got = fread(text, 1, 65535, lf);
        text[got] = '\0';
      }
      fclose(lf);
    }
    remove(log);
    remove(tmp);
    remove(cpath);
    if (rc == -1 || (WIFEXITED(rc) && WEXITSTATUS(rc) == 127)) {
      free(text);
      FE_ERROR(FE_ERR_UNAVAILABLE,
               "the cpu backend needs a C compiler: '%s' was not found (set FELAB_CC)", c->cc);
    }
    int err = fe_backend_compile_error("cpu", source_shown, text ? text : "");
    free(text);
    return err;
  }
  remove(log);
  char so[1200], kept[1200];
  snprintf(kept, sizeof kept, "%s.c", base); /* the source beside its object, for reading */
  rename(cpath, kept);
  snprintf(so, sizeof so, "%s.so", base);
  if (rename(tmp, so)) FE_ERROR(FE_ERR_IO, "cannot move %s to %s: %s", tmp, so, strerror(errno));
  return 0;
}

/* Why a cached object cannot be what the compiler wrote, or NULL if it looks whole:
 * its ELF section headers (the end of a linked file) must lie inside it, so a truncated file
 * is never mapped (touching a page past its end would be a SIGBUS). */
static const char *cpu_object_damage(const char *so, char *why, size_t n)
{
  FILE *f = fopen(so, "rb");
  if (!f) return NULL; /* gone: dlopen says so */
  Elf64_Ehdr h;
  size_t got = fread(&h, 1, sizeof h, f);
  int end = fseek(f, 0, SEEK_END);
  long size = end ? -1 : ftell(f);
  fclose(f);
  if (got < EI_NIDENT) return "file too short";
  if (memcmp(h.e_ident, ELFMAG, SELFMAG)) return "not an ELF object";
  if (h.e_ident[EI_CLASS] != ELFCLASS64) return NULL; /* not this layout: leave it to dlopen */
  if (got < sizeof h) return "file too short";
  unsigned long long need = h.e_shoff + (unsigned long long)h.e_shnum * h.e_shentsize;
  if (size < 0 || need > (unsigned long long)size) {
    snprintf(why, n, "truncated: %ld of %llu bytes", size, need);
    return why;
  }
  return NULL;
}

/* Whether a loaded object holds the launcher of every kernel in csrc (a whole object may
 * still be another source's). */
static int cpu_object_has_launchers(void *handle, const char *csrc)
{
  const char *p = csrc, *tag = "void fe_launch_";
  while ((p = strstr(p, tag)) != NULL) {
    char sym[128];
    p += strlen("void ");
    size_t len = strcspn(p, "(");
    if (len >= sizeof sym) return 0;
    memcpy(sym, p, len);
    sym[len] = '\0';
    if (!dlsym(handle, sym)) return 0;
    p += len;
  }
  return 1;
}

/* What a source says it is: its first comment, less "felab kernel: " (codegen's first line
 * reads "felab kernel: residual of <physics> on <space> ..."); "" without one. */
static void cpu_source_what(const char *source, char *what, size_t n)
{
  what[0] = '\0';
  if (strncmp(source, "/* ", 3)) return;
  const char *p = source + 3, *end = strstr(p, " */"), *nl = strchr(p, '\n');
  if (!strncmp(p, "felab kernel: ", 14)) p += 14;
  if (!end || (nl && nl < end)) return;
  snprintf(what, n, "%.*s", (int)(end - p), p);
}

/* Compile (or find in the cache) and dlopen. The compiler's line numbers refer to the
 * source as given, because the launchers go at the end. A cached object that does not load
 * (truncated, corrupt, another compiler's) is dropped and compiled again, once. */
static int cpu_compile(void *impl, const char *source, fe_module **mod, double *seconds,
                       int *cached)
{
  cpu_impl *c = impl;
  double t0 = fe_clock();
  fe_strbuf full = {0};
  fe_strbuf_append(&full, source);
  cpu_add_launchers(source, &full);
  char *csrc;
  FE_CHECK(fe_strbuf_finish(&full, &csrc));
  unsigned long long h = fe_hash_string(csrc, fe_hash_string(c->flags, fe_hash_string(c->cc, 0)));
  char base[1100], so[1200];
  snprintf(base, sizeof base, "%s/k%016llx", c->cache, h);
  snprintf(so, sizeof so, "%s.so", base);
  struct stat st;
  *cached = stat(so, &st) == 0;
  void *handle = NULL;
  for (;;) {
    if (!*cached) {
      int rc = cpu_run_compiler(c, csrc, source, base);
      if (rc) {
        free(csrc);
        return fe_error_push(rc, __FILE__, __LINE__, __func__);
      }
    }
    char why[256];
    const char *damage = cpu_object_damage(so, why, sizeof why);
    if (!damage && (handle = dlopen(so, RTLD_NOW | RTLD_LOCAL)) == NULL) {
      snprintf(why, sizeof why, "%s", dlerror());
      damage = why;
    }
    if (!damage && !cpu_object_has_launchers(handle, csrc)) {
      dlclose(handle);
      handle = NULL;
      damage = "it lacks this source's kernels";
    }
    if (!damage) break;
    if (!*cached) { /* just compiled: not the cache's fault */
      free(csrc);
      FE_ERROR(FE_ERR_BACKEND, "cannot load the compiled kernel %s: %s", so, damage);
    }
    fe_cache_drop(so, damage);
    *cached = 0;
  }
  free(csrc);
  fe_module *m = calloc(1, sizeof *m);
  if (!m) {
    dlclose(handle);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  m->handle = handle;
  snprintf(m->base, sizeof m->base, "%s", base);
  cpu_source_what(source, m->what, sizeof m->what);
  m->untried = !strncmp(m->what, "felab calibration kernels", 25) ||
               (!c->trial_all && !strstr(source, "#define FE_USER_C 1"));
  m->next = c->modules;
  c->modules = m;
  *mod = m;
  *seconds = fe_clock() - t0;
  return 0;
}

/* Modules stay loaded until the backend closes: kernels may still point into them. */
static void cpu_module_free(void *impl, fe_module *mod)
{
  (void)impl;
  (void)mod;
}

static int cpu_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k)
{
  cpu_impl *c = impl;
  char sym[128];
  snprintf(sym, sizeof sym, "fe_launch_%s", name);
  void *fn = dlsym(mod->handle, sym);
  if (!fn) FE_ERROR(FE_ERR_BACKEND, "kernel '%s' is not in the compiled module", name);
  for (int i = 0; i < c->nkernels; i++)
    if (*(void **)&c->kernels[i]->fn == fn) {
      *k = c->kernels[i];
      return 0;
    }
  if (c->nkernels == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    fe_kernel **more = realloc(c->kernels, sizeof *more * (size_t)cap);
    if (!more) FE_ERROR(FE_ERR_MEM, "out of host memory for cpu kernels");
    c->kernels = more;
    c->cap = cap;
  }
  fe_kernel *kn;
  FE_CALLOC(kn, 1, "cpu kernel");
  *(void **)&kn->fn = fn;
  snprintf(kn->name, sizeof kn->name, "%s", name);
  kn->mod = mod;
  /* The calibration's micro-benchmarks are felab's own fixed code with nothing of a user's, and
   * a fork between their runs would be timed: after one, the session's pages stay
   * write-protected until each is written again (the triad's rate came out low). */
  kn->trust = mod->untried;
  c->kernels[c->nkernels++] = kn;
  *k = kn;
  return 0;
}

/* A floating-point instruction of x86 assembly (AT&T): a multiply-add, a multiply, an add, a
 * subtraction, a division or a square root, scalar or packed. */
static int cpu_fp_instruction(const char *line)
{
  const char *p = line + strspn(line, " \t");
  static const char *ops[] = {"vfmadd", "vfmsub", "vfnmadd", "vfnmsub", "vmul", "vadd",
                              "vsub",   "vdiv",   "vsqrt",   "mul",     "add",  "sub", "div"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    size_t n = strlen(ops[i]);
    if (strncmp(p, ops[i], n)) continue;
    const char *q = p + n; /* the precision's suffix: ss, sd, ps, pd (after an FMA's 132/213/231) */
    q += strspn(q, "0123456789");
    if ((q[0] == 's' || q[0] == 'p') && (q[1] == 's' || q[1] == 'd')) return 1;
  }
  return 0;
}

/* The hot loop of kernel `name` in the assembly text asm (its functions: name's own and the
 * OpenMP regions outlined from it, name._omp_fn.N): of the innermost loops (a backward jump to
 * a label with no other backward jump inside to it or past it: a loop whose head a shorter
 * path also returns to is taken by that path), the one with the most floating-point
 * instructions; its instructions (no labels, no directives) into out. 0 if there is none. */
static int cpu_hot_loop(const char *name, char *asm_text, fe_strbuf *out)
{
  enum { MAXL = 1 << 16 };
  char **line = malloc(sizeof *line * MAXL);
  if (!line) return 0;
  int n = 0, mine = 0;
  size_t len = strlen(name);
  for (char *save = NULL, *t = strtok_r(asm_text, "\n", &save); t && n < MAXL; t = strtok_r(NULL, "\n", &save)) {
    if (t[0] != '.' && t[0] != ' ' && t[0] != '\t' && strchr(t, ':')) /* a function's label */
      mine = !strncmp(t, name, len) && (t[len] == ':' || t[len] == '.');
    if (mine) line[n++] = t;
  }
  int best_a = -1, best_b = -1, best_fp = 0;
  for (int b = 0; b < n; b++) {
    const char *p = line[b] + strspn(line[b], " \t");
    if (p[0] != 'j') continue;
    const char *target = strstr(p, ".L");
    if (!target) continue;
    int a = -1;
    for (int i = b - 1; i >= 0 && a < 0; i--)
      if (!strncmp(line[i], target, strlen(target)) && line[i][strlen(target)] == ':') a = i;
    if (a < 0) continue; /* a forward jump */
    int inner = 0, fp = 0;
    for (int i = a + 1; i < b && !inner; i++) {
      const char *q = line[i] + strspn(line[i], " \t"), *tq = strstr(q, ".L");
      if (q[0] == 'j' && tq) /* a backward jump inside to a label inside, or to this loop's
                              * own head: a loop within, or a shorter way round this one */
        for (int j = a; j < i && !inner; j++)
          inner = !strncmp(line[j], tq, strlen(tq)) && line[j][strlen(tq)] == ':';
      fp += cpu_fp_instruction(line[i]);
    }
    if (!inner && fp > best_fp) best_a = a, best_b = b, best_fp = fp;
  }
  for (int i = best_a + 1; best_fp > 0 && i <= best_b; i++) {
    const char *q = line[i] + strspn(line[i], " \t");
    if (line[i][0] == '.' || q[0] == '.' || q[0] == '#') continue; /* labels, directives */
    fe_strbuf_printf(out, "%s\n", line[i]);
  }
  free(line);
  return best_fp > 0;
}

/* Kernel k's hot loop as llvm-mca simulates it: the module's source compiled once more, to
 * assembly (the same compiler and flags: the code that runs), its hot loop cut out and run
 * 100 times in llvm-mca's model of this processor (-mcpu=native); cycles an iteration, kept
 * beside the object as base.name.mca. None where llvm-mca is absent or fails. */
static void cpu_simulate(cpu_impl *c, fe_kernel *k)
{
  k->simulated = 1;
  fe_module *m = k->mod;
  char path[1200], tmp[1120], cmd[4000];
  snprintf(path, sizeof path, "%.1099s.%.63s.mca", m->base, k->name);
  FILE *f = fopen(path, "r");
  if (f) {
    int ok = fscanf(f, "%lf", &k->loop_cycles) == 1 && k->loop_cycles > 0;
    fclose(f);
    if (ok) return;
    k->loop_cycles = 0;
    fe_cache_drop(path, "not a number of cycles"); /* simulated again below */
  }
  if (c->has_mca < 0) {
    snprintf(cmd, sizeof cmd, "command -v '%.255s' > /dev/null 2>&1", c->mca);
    c->has_mca = system(cmd) == 0;
  }
  if (!c->has_mca) return;
  snprintf(tmp, sizeof tmp, "%.1099s.%d", m->base, (int)getpid()); /* per process */
  char s[1200], loop[1200];
  snprintf(s, sizeof s, "%.1119s.s", tmp);
  snprintf(loop, sizeof loop, "%.1119s.loop.s", tmp);
  snprintf(cmd, sizeof cmd, "%.255s %.255s -S -o '%s' '%.1099s.c' > /dev/null 2>&1", c->cc, c->flags, s,
           m->base);
  char *text = NULL;
  if (system(cmd) == 0 && (f = fopen(s, "r"))) {
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    text = size > 0 ? malloc((size_t)size + 1) : NULL;
    if (text) text[fread(text, 1, (size_t)size, f)] = '\0';
    fclose(f);
  }
  remove(s);
  fe_strbuf body = {0};
  char *src = NULL;
  int found = text && cpu_hot_loop(k->name, text, &body);
  free(text);
  if (fe_strbuf_finish(&body, &src) || !found || !(f = fopen(loop, "w"))) {
    free(src);
    return;
  }
  fputs(src, f);
  fclose(f);
  free(src);
  snprintf(cmd, sizeof cmd, "'%.255s' -mcpu=native -iterations=100 -all-views=false -summary-view '%s' 2> /dev/null",
           c->mca, loop);
  FILE *pipe = popen(cmd, "r");
  double iterations = 0, cycles = 0;
  char line[256];
  while (pipe && fgets(line, sizeof line, pipe)) {
    if (!strncmp(line, "Iterations:", 11)) iterations = atof(line + 11);
    if (!strncmp(line, "Total Cycles:", 13)) cycles = atof(line + 13);
  }
  if (pipe) pclose(pipe);
  remove(loop);
  if (!(iterations > 0 && cycles > 0)) return;
  k->loop_cycles = cycles / iterations;
  snprintf(s, sizeof s, "%.1119s.mca", tmp); /* written whole, then in place */
  if ((f = fopen(s, "w"))) {
    fprintf(f, "%.6g\n", k->loop_cycles);
    fclose(f);
    rename(s, path);
  }
}

/* The cpu knows no registers or occupancy; a kernel's hot loop's cycles where llvm-mca is. */
static int cpu_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res)
{
  memset(res, 0, sizeof *res);
  if (!k->mod) return 0;
  if (!k->simulated) cpu_simulate(impl, k);
  res->loop_cycles = k->loop_cycles;
  return 0;
}

/* Kernel k's trial run on the arguments a (cpu-guard.c), with the trial lock held: k trusted
 * when it returned there, or when there was no verdict (no child could be made, a signal from
 * outside); a fault is k's error, kept for every later launch. */
static int cpu_kernel_trial(cpu_impl *c, fe_kernel *k, void **a, int threads)
{
  cpu_trial t;
  cpu_guard_trial(k->fn, a, threads, &t);
  if (t.outcome == CPU_TRIAL_INTERRUPTED) {
    FE_CHECK(fe_interrupt_check());
    FE_ERROR(FE_ERR_INTERRUPTED, "interrupted");
  }
  if (t.outcome != CPU_TRIAL_FAULT && t.outcome != CPU_TRIAL_EXIT) {
    __atomic_store_n(&k->trust, 1, __ATOMIC_RELEASE);
    return 0;
  }
  char what[320], where[1600];
  cpu_guard_describe(&t, what, sizeof what);
  cpu_guard_locate(c->cc, c->flags, k->mod->base, t.pc, where, sizeof where);
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "kernel %s", k->name);
  if (k->mod->what[0]) fe_strbuf_printf(&b, " (%s)", k->mod->what);
  fe_strbuf_printf(&b, " died of %s on its first run, tried in a child process", what);
  if (where[0]) fe_strbuf_printf(&b, "; %s", where);
  else fe_strbuf_printf(&b, "; its source: %s.c", k->mod->base);
  fe_strbuf_append(&b, ". The session goes on; this kernel will not run in it again");
  FE_CHECK(fe_strbuf_finish(&b, &k->fault));
  __atomic_store_n(&k->trust, -1, __ATOMIC_RELEASE);
  FE_ERROR(FE_ERR_BACKEND, "%s", k->fault);
}

/* Whether k may run here: its first launch (from any thread: the engine launches from
 * inside parallel regions too) is tried once, the others wait for the verdict. */
static int cpu_kernel_vet(cpu_impl *c, fe_kernel *k, void **a, int threads)
{
  int trust = __atomic_load_n(&k->trust, __ATOMIC_ACQUIRE), rc = 0;
  if (trust == 0) {
    pthread_mutex_lock(&c->trial_lock);
    trust = __atomic_load_n(&k->trust, __ATOMIC_ACQUIRE);
    if (trust == 0) rc = cpu_kernel_trial(c, k, a, threads);
    pthread_mutex_unlock(&c->trial_lock);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (trust < 0) FE_ERROR(FE_ERR_BACKEND, "%s", k->fault);
  return 0;
}

/* A trial's team: the launch's own where its buffers are large (element matrices, a fine
 * mesh's quadrature data: one thread would take many times the run's time), one thread where
 * they are small (starting a team in the child costs more than it saves) or where the launch
 * comes from inside a parallel region (its team is of one here too). */
#define CPU_TRIAL_TEAM_BYTES (16u << 20)

static int cpu_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                      const fe_arg *args, fe_precision prec, double *seconds)
{
  cpu_impl *c = impl;
  (void)ngroups;
  (void)group_size;
  FE_ASSERT(nargs <= CPU_MAX_ARGS, FE_ERR_INTERNAL, "too many kernel arguments (%d)", nargs);
  void *a[CPU_MAX_ARGS];
  int ints[CPU_MAX_ARGS];
  double dbl[CPU_MAX_ARGS];
  float flt[CPU_MAX_ARGS];
  size_t bytes = 0;
  for (int i = 0; i < nargs; i++) {
    switch (args[i].kind) {
    case FE_ARG_BUFFER:
      a[i] = args[i].buf->ptr;
      bytes += args[i].buf->bytes;
      break;
    case FE_ARG_INT: ints[i] = (int)args[i].i; a[i] = &ints[i]; break;
    case FE_ARG_REAL:
      dbl[i] = args[i].r;
      flt[i] = (float)args[i].r;
      a[i] = prec == FE_FLOAT ? (void *)&flt[i] : (void *)&dbl[i];
      break;
    }
  }
  if (c->trials && __atomic_load_n(&k->trust, __ATOMIC_RELAXED) <= 0) {
    int team = omp_in_parallel() || bytes < CPU_TRIAL_TEAM_BYTES ? 1 : omp_get_max_threads();
    FE_CHECK(cpu_kernel_vet(c, k, a, team));
  }
  double t0 = fe_clock();
  k->fn(a);
  if (seconds) *seconds = fe_clock() - t0;
  return 0;
}

static int cpu_finish(void *impl)
{
  (void)impl;
  return 0;
}

/* Vector work: plain OpenMP loops, reductions in double. */
#define CPU_VECTOR_LOOP(T, body)                                           \
  do {                                                                     \
    _Pragma("omp parallel for if (n > 32768) schedule(static)") for (size_t i = 0; i < n; i++) body; \
  } while (0)

static int cpu_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value)
{
  (void)impl;
  if (prec == FE_DOUBLE) {
    double *v = x->ptr;
    CPU_VECTOR_LOOP(double, v[i] = value);
  } else {
    float *v = x->ptr;
    float fv = (float)value;
    CPU_VECTOR_LOOP(float, v[i] = fv);
  }
  return 0;
}

static int cpu_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
                     fe_precision prec)
{
  (void)impl;
  if (prec == FE_DOUBLE) {
    double *yv = y->ptr;
    const double *xv = x->ptr;
    if (b == 0.0) CPU_VECTOR_LOOP(double, yv[i] = a * xv[i]);
    else CPU_VECTOR_LOOP(double, yv[i] = a * xv[i] + b * yv[i]);
  } else {
    float *yv = y->ptr;
    const float *xv = x->ptr;
    float fa = (float)a, fb = (float)b;
    if (b == 0.0) CPU_VECTOR_LOOP(float, yv[i] = fa * xv[i]);
    else CPU_VECTOR_LOOP(float, yv[i] = fa * xv[i] + fb * yv[i]);
  }
  return 0;
}

static int cpu_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y,
                         int divide, size_t n, fe_precision prec)
{
  (void)impl;
  if (prec == FE_DOUBLE) {
    double *zv = z->ptr;
    const double *xv = x->ptr, *yv = y->ptr;
    if (divide) CPU_VECTOR_LOOP(double, zv[i] = xv[i] / yv[i]);
    else CPU_VECTOR_LOOP(double, zv[i] = xv[i] * yv[i]);
  } else {
    float *zv = z->ptr;
    const float *xv = x->ptr, *yv = y->ptr;
    if (divide) CPU_VECTOR_LOOP(float, zv[i] = xv[i] / yv[i]);
    else CPU_VECTOR_LOOP(float, zv[i] = xv[i] * yv[i]);
  }
  return 0;
}

static int cpu_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
                   double *result)
{
  (void)impl;
  double s = 0;
  if (prec == FE_DOUBLE) {
    const double *xv = x->ptr, *yv = y->ptr;
#pragma omp parallel for reduction(+ : s) if (n > 32768) schedule(static)
    for (size_t i = 0; i < n; i++) s += xv[i] * yv[i];
  } else {
    const float *xv = x->ptr, *yv = y->ptr;
#pragma omp parallel for reduction(+ : s) if (n > 32768) schedule(static)
    for (size_t i = 0; i < n; i++) s += (double)xv[i] * yv[i];
  }
  *result = s;
  return 0;
}

static int cpu_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                      double *result)
{
  (void)impl;
  double s = op == FE_REDUCE_SUM ? 0.0 : op == FE_REDUCE_MIN ? INFINITY : -INFINITY;
  const double *xd = x->ptr;
  const float *xf = x->ptr;
#define CPU_VALUE(i) (prec == FE_DOUBLE ? xd[i] : (double)xf[i])
  if (op == FE_REDUCE_SUM) {
#pragma omp parallel for reduction(+ : s) if (n > 32768) schedule(static)
    for (size_t i = 0; i < n; i++) s += CPU_VALUE(i);
  } else if (op == FE_REDUCE_MIN) {
#pragma omp parallel for reduction(min : s) if (n > 32768) schedule(static)
    for (size_t i = 0; i < n; i++) s = fmin(s, CPU_VALUE(i));
  } else {
#pragma omp parallel for reduction(max : s) if (n > 32768) schedule(static)
    for (size_t i = 0; i < n; i++) s = fmax(s, CPU_VALUE(i));
  }
#undef CPU_VALUE
  *result = s;
  return 0;
}

/* The fused CG steps. Their sums are deterministic whatever the number of threads: a
 * vector too short for threads (n <= 32768) is summed in order, as cpu_dot sums it, so the
 * fused and unfused CG give the same bits there; a longer one is cut into CPU_SUM_BLOCKS
 * fixed ranges, each summed by one thread, and the ranges' sums are added in order. */
#define CPU_SUM_BLOCKS 64

/* cpu_cg_update_<S> and cpu_cg_direction_<S> for the real type T: see backend.h. The update
 * cuts the vector into nb ranges; part[b] gets range b's (r, r) and part[nb + b] its
 * (r, r ./ d). */
#define CPU_CG_FUNCTIONS(T, S)                                                                  \
  static void cpu_cg_update_##S(T *x, T *r, const T *p, const T *q, const T *d, double alpha,   \
                                size_t n, int nb, double *part)                                 \
  {                                                                                             \
    const T a = (T)alpha;                                                                       \
    _Pragma("omp parallel for if (nb > 1) schedule(static)")                                    \
    for (int b = 0; b < nb; b++) {                                                              \
      const size_t lo = n * (size_t)b / (size_t)nb, hi = n * (size_t)(b + 1) / (size_t)nb;      \
      double rr = 0, rz = 0;                                                                    \
      if (d) {                                                                                  \
        for (size_t i = lo; i < hi; i++) {                                                      \
          const T ri = r[i] - a * q[i], zi = ri / d[i];                                         \
          x[i] = x[i] + a * p[i];                                                               \
          r[i] = ri;                                                                            \
          rr += (double)ri * ri;                                                                \
          rz += (double)ri * zi;                                                                \
        }                                                                                       \
      } else {                                                                                  \
        for (size_t i = lo; i < hi; i++) {                                                      \
          const T ri = r[i] - a * q[i];                                                         \
          x[i] = x[i] + a * p[i];                                                               \
          r[i] = ri;                                                                            \
          rr += (double)ri * ri;                                                                \
        }                                                                                       \
        rz = rr; /* z = r */                                                                    \
      }                                                                                         \
      part[b] = rr;                                                                             \
      part[nb + b] = rz;                                                                        \
    }                                                                                           \
  }                                                                                             \
  static void cpu_cg_direction_##S(T *p, const T *r, const T *d, double beta, size_t n)         \
  {                                                                                             \
    const T bt = (T)beta;                                                                       \
    if (d && beta == 0.0) CPU_VECTOR_LOOP(T, p[i] = r[i] / d[i]);                               \
    else if (d) CPU_VECTOR_LOOP(T, p[i] = r[i] / d[i] + bt * p[i]);                             \
    else if (beta == 0.0) CPU_VECTOR_LOOP(T, p[i] = r[i]);                                      \
    else CPU_VECTOR_LOOP(T, p[i] = r[i] + bt * p[i]);                                           \
  }

CPU_CG_FUNCTIONS(double, d)
CPU_CG_FUNCTIONS(float, f)

/* x <- x + alpha p, r <- r - alpha q; (r, r) and (r, r ./ d) in double, in one pass */
static int cpu_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                         const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                         fe_precision prec, double *rr, double *rz)
{
  (void)impl;
  double part[2 * CPU_SUM_BLOCKS];
  const int nb = n > 32768 ? CPU_SUM_BLOCKS : 1;
  if (prec == FE_DOUBLE)
    cpu_cg_update_d(x->ptr, r->ptr, p->ptr, q->ptr, d ? d->ptr : NULL, alpha, n, nb, part);
  else
    cpu_cg_update_f(x->ptr, r->ptr, p->ptr, q->ptr, d ? d->ptr : NULL, alpha, n, nb, part);
  double srr = 0, srz = 0;
  for (int b = 0; b < nb; b++) {
    srr += part[b];
    srz += part[nb + b];
  }
  *rr = srr;
  *rz = srz;
  return 0;
}

/* p <- r ./ d + beta p, or r + beta p without d (p is not read when beta = 0) */
static int cpu_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                            double beta, size_t n, fe_precision prec)
{
  (void)impl;
  if (prec == FE_DOUBLE) cpu_cg_direction_d(p->ptr, r->ptr, d ? d->ptr : NULL, beta, n);
  else cpu_cg_direction_f(p->ptr, r->ptr, d ? d->ptr : NULL, beta, n);
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
};
