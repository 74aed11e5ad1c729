/* felab cpu backend: the dialect as C with OpenMP (the preamble), a source compiled by the
 * system compiler into a shared object cached on disk by a hash of the source and the flags
 * and loaded with dlopen, its kernels, and their launch.
 *
 * Kernels have many signatures, so the backend appends to every source one launcher per
 * kernel, `void fe_launch_<name>(void **a)`, that unpacks an argument array and calls the
 * kernel; launch() fills the array.
 *
 * The first launch of a kernel holding C a user typed (raw bodies, string coefficients beyond
 * the host's reader, fe_c_expression_safe: its source defines FE_USER_C) runs first in a
 * forked child (cpu-guard.c): code that faults (a raw C physics reading a bad pointer) ends
 * the child, and the launch is an error naming the kernel, the signal and the line, which
 * every later launch of the kernel repeats; a kernel that returned there is trusted and runs
 * here, now and after. A trial costs a fork (the session's page tables copied: its time grows
 * with the session's memory) and one more run of the kernel, once a kernel a session (a first
 * apply's time about triples: docs/kernels.md), so felab's own generated code, which reads
 * only what it was given, is not tried.
 * FELAB_CPU_TRIAL=all tries every kernel, off none. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/cpu-backend.h"
#include "engine/core/error.h"
#include "engine/core/strbuf.h"

#define CPU_MAX_ARGS 32
#define CPU_STR(x) #x
#define CPU_XSTR(x) CPU_STR(x) /* a macro's value as text, for the preamble */

static const char cpu_preamble_text[] =
    "/* ---- cpu backend: the dialect as C with OpenMP ---- */\n"
    "#include <math.h>\n"
    "#include <stddef.h>\n"
    "#if FE_DOUBLE\n"
    "typedef double real;\n"
    "#else\n"
    "typedef float real;\n"
    "#endif\n"
    /* double's kernels in whole 512-bit vectors where the backend says (cpu_wide_double): on
     * the Ice Lake VM, alternated, sumfact's applies 12-21% faster (Q2 to Q7), transpose's Q3
     * 29%, csr's the same; single precision (lines of 8 floats, 256 bits) kept as it was
     * (docs/kernels.md) */
    "#if FE_DOUBLE && FE_CPU_WIDE\n"
    "#pragma GCC target(\"prefer-vector-width=512\")\n"
    "#endif\n"
    "#define FE_CPU 1\n"
    "#define FE_KERNEL(name) __attribute__((visibility(\"default\"))) void name\n"
    "#define FE_GLOBAL\n"
    "#define FE_CONSTANT static const\n"
    "#define FE_DEVICE static inline\n"
    "#define FE_RESTRICT restrict\n"
    "#define FE_GROUPS_BEGIN _Pragma(\"omp parallel\") {\n"
    "#define FE_GROUPS_END }\n"
    "#define FE_PRIOR_WAIT /* nothing to wait for: launches run in order */\n"
    "#define FE_SHARED\n"
    "#define FE_SHARED_PTR\n"
    "#if FE_COLORED\n"
    "#define FE_OUTER(g, n) _Pragma(\"omp for schedule(runtime)\") for (int g = 0; g < (n); ++g)\n"
    "#else\n"
    "#define FE_OUTER(g, n) _Pragma(\"omp for schedule(static)\") for (int g = 0; g < (n); ++g)\n"
    "#endif\n"
    "#define FE_INNER(t, n) for (int t = 0; t < (n); ++t)\n"
    "#define FE_INNER_VEC(t, n) _Pragma(\"GCC ivdep\") for (int t = 0; t < (n); ++t)\n"
    "/* an index the vectorizer must not see through, so that the loads it indexes stay scalar\n"
    " * (on an Intel Xeon gcc made the kernels' loops through the cell map AVX-512 gathers and\n"
    " * scatters, slower than a load and a store a value: docs/kernels.md) */\n"
    "#define FE_SCALAR_INDEX(x) __asm__(\"\" : \"+r\"(x))\n"
    "/* entry t = e n + b of the cell map of a group's m cells (cell e, node b): two loops, no\n"
    " * division by n */\n"
    "#define FE_CELL_NODES(t, e, b, m, n) \\\n"
    "  for (int e = 0; e < (m); ++e) for (int b = 0, t = e * (n); b < (n); ++b, ++t)\n"
    "#define FE_UNROLL _Pragma(\"GCC unroll 64\")\n"
    "#define FE_BARRIER\n"
    "#define FE_BARRIER_GLOBAL /* a group's global writes seen by its items */\n"
    "#if FE_COLORED\n"
    "#define FE_ATOMIC_ADD(p, v) (*(p) += (v))\n"
    "#else\n"
    "#define FE_ATOMIC_ADD(p, v) do { _Pragma(\"omp atomic\") *(p) += (v); } while (0)\n"
    "#endif\n"
    "/* CG's (p, q) parts (backend.h's cg_parts): a thread adds its sum of v over its groups into\n"
    " * its own 64-byte line, so that no two threads add into one and (p, q) is the same bits at\n"
    " * every run; cg_parts gives none where there are more threads than lines (a team nested\n"
    " * in another adds atomically, into lines it may share) */\n"
    "#include <omp.h>\n"
    "#define FE_PQ_PARTS " CPU_XSTR(FE_PQ_PARTS) "\n"
    "#define FE_PQ_STRIDE " CPU_XSTR(FE_PQ_STRIDE) "\n"
    "static inline void fe_pq_sum(double v, double *parts)\n"
    "{\n"
    "  const int t = omp_get_thread_num(), lines = " CPU_XSTR(CPU_PQ_THREADS) ";\n"
    "  if (t < lines && omp_get_level() == 1) parts[t * " CPU_XSTR(CPU_PQ_LINE) "] += v;\n"
    "  else {\n"
    "    _Pragma(\"omp atomic\") parts[t % lines * " CPU_XSTR(CPU_PQ_LINE) "] += v;\n"
    "  }\n"
    "}\n"
    "#define FE_PQ_SUM(v, parts) fe_pq_sum((v), (parts))\n"
    "/* ---- end of the cpu preamble ---- */\n";

const char *cpu_preamble(void *impl, fe_precision prec)
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

/* The text of file path (NULL if it cannot be read or is over max bytes), and the file
 * removed. */
char *cpu_take_file(const char *path, long max)
{
  char *text = NULL;
  FILE *f = fopen(path, "r");
  if (f) {
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    text = size > 0 && size <= max ? malloc((size_t)size + 1) : NULL;
    if (text) text[fread(text, 1, (size_t)size, f)] = '\0';
    fclose(f);
  }
  remove(path);
  return text;
}

/* Run the compiler on path.c -> path.so; on failure read its log into an error. Where llvm-mca
 * will simulate kernels of it, through assembly (-S, then assembled and linked: the object
 * gcc -c makes the same way) kept in *asm_text, so that the simulation needs no second
 * compile; else NULL there. */
static int cpu_run_compiler(cpu_impl *c, const char *csrc, const char *source_shown,
                            const char *base, char **asm_text)
{
  char cpath[1200], tmp[1200], log[1200], spath[1200], cmd[8400];
  *asm_text = NULL;
  snprintf(cpath, sizeof cpath, "%s.%d.c", base, (int)getpid()); /* per process: two may compile at once */
  snprintf(tmp, sizeof tmp, "%s.%d.so", base, (int)getpid());
  snprintf(log, sizeof log, "%s.%d.log", base, (int)getpid());
  snprintf(spath, sizeof spath, "%s.%d.s", base, (int)getpid());
  FILE *f = fopen(cpath, "w");
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write %s: %s", cpath, strerror(errno));
  fputs(csrc, f);
  fclose(f);
  int via_asm = cpu_mca_available(c);
  if (via_asm)
    snprintf(cmd, sizeof cmd, "%.255s %.255s -S -o '%s' '%s' > '%s' 2>&1 && %.255s %.255s -o '%s' '%s' >> '%s' 2>&1",
             c->cc, c->flags, spath, cpath, log, c->cc, c->flags, tmp, spath, log);
  else
    snprintf(cmd, sizeof cmd, "%.255s %.255s -o '%s' '%s' > '%s' 2>&1", c->cc, c->flags, tmp, cpath, log);
  int rc = system(cmd);
  if (via_asm) *asm_text = cpu_take_file(spath, CPU_ASM_MAX);
  if (rc != 0) {
    free(*asm_text);
    *asm_text = NULL;
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

/* Compile csrc to base's object unless another process of this machine compiled it while
 * this one waited (*cached set then): the processes sharing a cache (mpirun's ranks, two test
 * lanes) take the source hash's lock (fe_cache_lock_kernel), so that one compiles a kernel
 * and the others load it (three ranks of two cores compiled each kernel three times). No
 * lock (no file there): compiled here regardless. */
static int cpu_compile_locked(cpu_impl *c, unsigned long long h, const char *csrc,
                              const char *source, const char *base, const char *so, int *cached,
                              char **asm_text)
{
  int fd = fe_cache_lock_kernel("cpu", h);
  struct stat st;
  int rc = 0;
  *asm_text = NULL;
  if (fd >= 0 && stat(so, &st) == 0) *cached = 1;
  else rc = cpu_run_compiler(c, csrc, source, base, asm_text);
  fe_cache_unlock(fd);
  return rc;
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
int cpu_compile(void *impl, const char *source, fe_module **mod, double *seconds,
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
  char *asm_text = NULL; /* the assembly of the object compiled here, for llvm-mca */
  for (;;) {
    if (!*cached) {
      free(asm_text);
      int rc = cpu_compile_locked(c, h, csrc, source, base, so, cached, &asm_text);
      if (rc) {
        free(asm_text);
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
      free(asm_text);
      FE_ERROR(FE_ERR_BACKEND, "cannot load the compiled kernel %s: %s", so, damage);
    }
    fe_cache_drop(so, damage);
    *cached = 0;
  }
  free(csrc);
  fe_module *m = calloc(1, sizeof *m);
  if (!m) {
    free(asm_text);
    dlclose(handle);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  m->handle = handle;
  snprintf(m->base, sizeof m->base, "%s", base);
  cpu_source_what(source, m->what, sizeof m->what);
  m->untried = !strncmp(m->what, "felab calibration kernels", 25) ||
               (!c->trial_all && !strstr(source, "#define FE_USER_C 1"));
  cpu_asm_keep(c, m, asm_text);
  m->next = c->modules;
  c->modules = m;
  *mod = m;
  *seconds = fe_clock() - t0;
  return 0;
}

/* Modules stay loaded until the backend closes: kernels may still point into them. */
void cpu_module_free(void *impl, fe_module *mod)
{
  (void)impl;
  (void)mod;
}

int cpu_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k)
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

int cpu_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
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
