/* felab opencl backend: the dialect preamble, run-time compilation and kernel launch.
 *
 * compile() looks a source up in two caches before calling clBuildProgram:
 *   1. the session's memory cache, keyed by the whole source text (a hit costs a hash);
 *   2. program binaries on disk under fe_cache_dir("opencl"), keyed by a hash of the source,
 *      the device name, the platform and driver versions and the build options, so a new
 *      driver never loads an old binary (FELAB_OPENCL_DISK_CACHE=0 turns it off).
 * Every fe_module holds its own reference to the cached cl_program and its own kernels, so
 * module_free never invalidates another module built from the same source.
 * Before either (after the memory cache, which holds only sources that passed), the source's
 * program-scope tables are counted against a GPU's __constant memory (or
 * FELAB_OPENCL_CONSTANT_LIMIT): a program whose tables cannot fit is refused with the sizes,
 * never handed to the driver. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/opencl/opencl-backend.h"
#include "engine/core/error.h"

/* The dialect of docs/kernels.md in OpenCL C 1.2. The engine's defines (FE_DOUBLE, sizes,
 * FE_COLORED) come before it. FE_ATOMIC_ADD is atomic whatever FE_COLORED says: a coloring
 * separates work groups, but the work items of one group may still add into one entry.
 * OpenCL's math builtins are overloaded for float and double, so pow(x, 2) or
 * fmin(x, 0.5) are ambiguous there while plain C accepts them: the common ones are wrapped
 * to take reals, which makes one physics expression compile on every backend. */
static const char preamble_body[] =
    "/* ---- felab dialect: OpenCL C 1.2 ---- */\n"
    "#if FE_DOUBLE\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "typedef double real;\n"
    "#else\n"
    "typedef float real;\n"
    "#endif\n"
    "#define FE_KERNEL(name) __kernel void name\n"
    "#define FE_GLOBAL __global\n"
    "#define FE_CONSTANT __constant\n"
    "#define FE_DEVICE static inline\n"
    "#define FE_RESTRICT restrict\n"
    "#define FE_GROUPS_BEGIN\n"
    "#define FE_GROUPS_END\n"
    "#define FE_PRIOR_WAIT /* nothing to wait for: launches run in order */\n"
    "#define FE_SHARED __local\n"
    "#define FE_SHARED_PTR __local /* a pointer to shared memory, as a function argument */\n"
    "#define FE_OUTER(g, n) for (int g = (int)get_group_id(0); g < (n); g += "
    "(int)get_num_groups(0))\n"
    "#define FE_INNER(t, n) for (int t = (int)get_local_id(0); t < (n); t += "
    "(int)get_local_size(0))\n"
    "#define FE_INNER_VEC(t, n) FE_INNER(t, n)\n"
    "#define FE_SCALAR_INDEX(x) (void)(x) /* the cpu's: keeps its loads scalar */\n"
    "/* entry t = e n + b of the cell map of a group's m cells (cell e, node b), one an item */\n"
    "#define FE_CELL_NODES(t, e, b, m, n) \\\n"
    "  FE_INNER(t, (m) * (n)) for (int e = t / (n), b = t % (n), fe_1 = 1; fe_1; fe_1 = 0)\n"
    "#define FE_BARRIER barrier(CLK_LOCAL_MEM_FENCE)\n"
    "/* a group's global writes seen by its items */\n"
    "#define FE_BARRIER_GLOBAL barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)\n"
    "#define FE_UNROLL /* the OpenCL compiler unrolls short constant loops by itself */\n"
    "/* atomic add: compare-and-swap on the bits until no other item got in between */\n"
    "#if FE_DOUBLE && FE_INT64_ATOMICS\n"
    "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"
    "static inline void fe_atomic_add(volatile __global double *p, double v)\n"
    "{\n"
    "  volatile __global long *q = (volatile __global long *)p;\n"
    "  long old = *q, seen;\n"
    "  do {\n"
    "    seen = old;\n"
    "    old = atom_cmpxchg(q, seen, as_long(as_double(seen) + v));\n"
    "  } while (old != seen);\n"
    "}\n"
    "#define FE_ATOMIC_ADD(p, v) fe_atomic_add((p), (v))\n"
    "#elif FE_DOUBLE\n"
    "/* this device has no 64-bit atomics: a kernel that adds atomically cannot build */\n"
    "#define FE_ATOMIC_ADD(p, v) fe_atomic_add_on_double_needs_cl_khr_int64_base_atomics(p, v)\n"
    "#else\n"
    "static inline void fe_atomic_add(volatile __global float *p, float v)\n"
    "{\n"
    "  volatile __global int *q = (volatile __global int *)p;\n"
    "  int old = *q, seen;\n"
    "  do {\n"
    "    seen = old;\n"
    "    old = atomic_cmpxchg(q, seen, as_int(as_float(seen) + v));\n"
    "  } while (old != seen);\n"
    "}\n"
    "#define FE_ATOMIC_ADD(p, v) fe_atomic_add((p), (v))\n"
    "#endif\n";

/* OpenCL math builtins wrapped to take reals: unary, then binary. */
static const char *const math_unary[] = {"sqrt", "cbrt", "exp",  "log",   "log10", "sin",
                                         "cos",  "tan",  "asin", "acos",  "atan",  "sinh",
                                         "cosh", "tanh", "fabs", "floor", "ceil"};
static const char *const math_binary[] = {"pow", "atan2", "fmin", "fmax", "fmod", "hypot",
                                          "copysign"};

/* Append the math wrappers: a function taking reals, then the name redefined to call it.
 * The function is written before the #undef, so it still reaches the builtin, whether the
 * builtin is an overloaded function (NVIDIA) or a macro over one (PoCL's _cl_sqrt). */
static size_t opencl_math_wrappers(char *out, size_t n)
{
  size_t len = snprintf(out, n, "/* math on reals, whatever the types of the arguments */\n");
  for (size_t i = 0; i < sizeof math_unary / sizeof math_unary[0]; i++) {
    const char *f = math_unary[i];
    len += snprintf(out + len, n > len ? n - len : 0,
                    "static inline real fe_real_%s(real a) { return %s(a); }\n"
                    "#undef %s\n#define %s(a) fe_real_%s(a)\n",
                    f, f, f, f, f);
  }
  for (size_t i = 0; i < sizeof math_binary / sizeof math_binary[0]; i++) {
    const char *f = math_binary[i];
    len += snprintf(out + len, n > len ? n - len : 0,
                    "static inline real fe_real_%s(real a, real b) { return %s(a, b); }\n"
                    "#undef %s\n#define %s(a, b) fe_real_%s(a, b)\n",
                    f, f, f, f, f);
  }
  return len;
}

/* Make the two preambles of this device (called by open). */
int opencl_preamble_make(opencl_impl *cl)
{
  size_t math = opencl_math_wrappers(NULL, 0);
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    size_t n = sizeof preamble_body + math + 256, len;
    char *s = cl->preamble[p] = malloc(n);
    if (!s) FE_ERROR(FE_ERR_MEM, "out of host memory making the OpenCL preamble");
    len = snprintf(s, n, "#ifndef FE_DOUBLE\n#define FE_DOUBLE %d\n#endif\n"
                   "#define FE_INT64_ATOMICS %d\n%s",
                   p == FE_DOUBLE, cl->int64_atomics, preamble_body);
    len += opencl_math_wrappers(s + len, n - len);
    snprintf(s + len, n - len, "/* ---- end of the dialect ---- */\n");
  }
  return 0;
}

/* The dialect for one precision (FE_DOUBLE defined by the engine wins). */
const char *opencl_preamble(void *impl, fe_precision prec)
{
  opencl_impl *cl = impl;
  return cl->preamble[prec == FE_FLOAT ? FE_FLOAT : FE_DOUBLE];
}

/* Build a program from source; a failed build becomes FE_ERR_COMPILE with the log. */
static int opencl_build_source(opencl_impl *cl, const char *source, cl_program *out)
{
  cl_int err;
  *out = NULL;
  cl_program prog = clCreateProgramWithSource(cl->context, 1, &source, NULL, &err);
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_BACKEND, "clCreateProgramWithSource on %s failed: %s", cl->info.name,
             opencl_error_name(err));
  err = clBuildProgram(prog, 1, &cl->device, cl->options, NULL, NULL);
  if (err == CL_SUCCESS) {
    *out = prog;
    return 0;
  }
  int rc;
  size_t len = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(prog, cl->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) ==
          CL_SUCCESS &&
      (log = calloc(len + 1, 1)))
    clGetProgramBuildInfo(prog, cl->device, CL_PROGRAM_BUILD_LOG, len, log, NULL);
  if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_COMPILE_PROGRAM_FAILURE)
    rc = fe_backend_compile_error("opencl", source, log);
  else if (err == CL_INVALID_BUILD_OPTIONS)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                      "the OpenCL compiler of %s rejects the options '%s' (FELAB_OPENCL_OPTIONS?)",
                      cl->info.name, cl->options);
  else
    rc = fe_error_set(FE_ERR_BACKEND, __FILE__, __LINE__, __func__,
                      "clBuildProgram on %s failed: %s%s%.1500s", cl->info.name,
                      opencl_error_name(err), log && *log ? "\n" : "", log ? log : "");
  free(log);
  clReleaseProgram(prog);
  return fe_error_push(rc, __FILE__, __LINE__, __func__);
}

/* The bytes of one element of an OpenCL C scalar type of len characters at t (real: real
 * bytes); 0 for a type not known here. */
static size_t opencl_type_bytes(const char *t, size_t len, size_t real)
{
  static const struct {
    const char *name;
    size_t bytes;
  } types[] = {{"double", 8}, {"long", 8}, {"ulong", 8}, {"float", 4}, {"int", 4},
               {"uint", 4},   {"short", 2}, {"ushort", 2}, {"half", 2}, {"char", 1},
               {"uchar", 1}};
  if (len == 4 && !strncmp(t, "real", 4)) return real;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strlen(types[i].name) == len && !strncmp(t, types[i].name, len)) return types[i].bytes;
  return 0;
}

/* The identifier at *p (advanced past it and the blanks after); its length, 0 if none. */
static size_t opencl_identifier(const char **p, const char **start)
{
  const char *q = *p;
  *start = q;
  while (isalnum((unsigned char)*q) || *q == '_') q++;
  size_t len = (size_t)(q - *start);
  while (isspace((unsigned char)*q)) q++;
  *p = q;
  return len;
}

/* The bytes of the program-scope tables of a source, `FE_CONSTANT <type> <name>[N]...` as
 * engine/codegen/codegen.c and calibrate.knl write them, at the precision the source's first
 * FE_DOUBLE define selects (the engine's, else the preamble's); list gets "B 32768, D 98304"
 * (cut short with "..." where it does not fit). An extent that is not a number counts 0. */
static unsigned long long opencl_constant_bytes(const char *source, char *list, size_t n)
{
  const char *d = strstr(source, "#define FE_DOUBLE ");
  size_t real = d && atoi(d + strlen("#define FE_DOUBLE ")) == 0 ? sizeof(cl_float)
                                                                  : sizeof(cl_double);
  unsigned long long total = 0;
  size_t len = 0;
  int cut = 0;
  list[0] = '\0';
  for (const char *p = source; (p = strstr(p, "FE_CONSTANT"));) {
    const char *word = p, *type, *name;
    p += strlen("FE_CONSTANT");
    if ((word > source && (isalnum((unsigned char)word[-1]) || word[-1] == '_')) ||
        !isspace((unsigned char)*p))
      continue; /* a longer name, or the preamble's own #define */
    while (isspace((unsigned char)*p)) p++;
    size_t tlen = opencl_identifier(&p, &type);
    if (tlen == 5 && !strncmp(type, "const", 5)) tlen = opencl_identifier(&p, &type);
    size_t nlen = opencl_identifier(&p, &name), bytes = opencl_type_bytes(type, tlen, real);
    unsigned long long count = *p == '[';
    while (count && *p == '[') { /* every extent: [N] or [N][M]; past 2^40 entries, 2^40 */
      char *end;
      unsigned long long e = strtoull(p + 1, &end, 10), most = 1ULL << 40;
      if (end == p + 1 || *end != ']') count = 0;
      else count = e > most / count ? most : count * e;
      p = end + (*end == ']');
    }
    if (!nlen || !bytes || !count) continue;
    total += count * bytes;
    if (len + nlen + 32 < n)
      len += (size_t)snprintf(list + len, n - len, "%s%.*s %llu", len ? ", " : "", (int)nlen,
                              name, count * bytes);
    else if (!cut && len + 6 < n)
      len += (size_t)snprintf(list + len, n - len, "%s...", len ? ", " : ""), cut = 1;
  }
  return total;
}

/* What a source is, for messages: its first FE_KERNEL's name, then the comment of its first
 * line where it has one ("fe_integrate (apply of poisson on Q3 ...)" from codegen.c's
 * "felab kernel: apply of poisson on Q3 ..."). */
static void opencl_source_name(const char *source, char *out, size_t n)
{
  const char *k = strstr(source, "\nFE_KERNEL(");
  int klen = 0, clen = 0;
  if (k) k += strlen("\nFE_KERNEL("), klen = (int)strcspn(k, ")\n");
  const char *c = !strncmp(source, "/* ", 3) ? source + 3 : NULL, *ce;
  if (c && !strncmp(c, "felab kernel: ", 14)) c += 14;
  if (c && (ce = strstr(c, " */")) && !memchr(c, '\n', (size_t)(ce - c))) clen = (int)(ce - c);
  snprintf(out, n, "%.*s%s%.*s%s", klen, k ? k : "", klen && clen ? " (" : "", clen,
           c ? c : "", klen && clen ? ")" : "");
}

/* 0 when the program-scope tables of source fit the device's __constant memory, else
 * FE_ERR_COMPILE (the program cannot be built here, as when the driver's compiler says so:
 * callers that fall back to the cpu on a failed build do so here too) naming the kernel, the
 * bytes, the limit, the device, and what to do. CL_DEVICE_MAX_CONSTANT_ARGS does not apply:
 * it counts __constant kernel arguments, and felab's kernels take none. */
static int opencl_check_constants(opencl_impl *cl, const char *source)
{
  char tables[256], name[256], whose[96];
  unsigned long long bytes = opencl_constant_bytes(source, tables, sizeof tables);
  if (bytes <= cl->constant_limit) return 0;
  opencl_source_name(source, name, sizeof name);
  if (cl->constant_env)
    snprintf(whose, sizeof whose, "FELAB_OPENCL_CONSTANT_LIMIT; the device reports %zu",
             cl->max_constant);
  else
    snprintf(whose, sizeof whose, "CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE");
  FE_ERROR(FE_ERR_COMPILE,
           "OpenCL kernel %s not built: its tables (__constant arrays %s bytes) need %llu bytes "
           "and exceed the device's constant memory, %zu bytes on %s (%s); use another strategy "
           "(\"sumfact\" keeps 1D tables only), a lower order, or the cpu or cuda backend",
           name[0] ? name : "(unnamed)", tables, bytes, cl->constant_limit, cl->info.name, whose);
}

/* The path of the disk-cache file for a source hash; 0 if the cache is off or unusable. */
static int opencl_disk_path(opencl_impl *cl, unsigned long long hash, char *path, size_t n)
{
  char dir[1024];
  if (!cl->disk_cache) return 0;
  if (fe_cache_dir("opencl", dir, sizeof dir)) {
    fe_error_clear(); /* no cache directory: build every time, it is not an error */
    cl->disk_cache = 0;
    return 0;
  }
  snprintf(path, n, "%s/%016llx.bin", dir, hash);
  return 1;
}

static const char disk_magic[8] = {'F', 'E', 'L', 'A', 'B', 'C', 'L', '1'};

/* Load a program binary from the disk cache; *out stays NULL when there is none. A file
 * that does not load (truncated, corrupt, rejected by the driver) is dropped, with a word
 * on stderr, and the source is built instead (then stored again). Never an error. */
static void opencl_disk_load(opencl_impl *cl, const char *source, unsigned long long hash,
                             cl_program *out)
{
  char path[1100], magic[8], why[160] = "";
  unsigned long long check, size;
  *out = NULL;
  if (!opencl_disk_path(cl, hash, path, sizeof path)) return;
  FILE *f = fopen(path, "rb");
  if (!f) return;
  unsigned char *bin = NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, disk_magic, 8))
    snprintf(why, sizeof why, "not a felab OpenCL binary");
  else if (fread(&check, sizeof check, 1, f) != 1 || fread(&size, sizeof size, 1, f) != 1)
    snprintf(why, sizeof why, "file too short");
  else if (check != fe_hash_string(source, ~cl->seed))
    snprintf(why, sizeof why, "written for another source");
  else if (size == 0 || size >= (1ULL << 31))
    snprintf(why, sizeof why, "a binary of %llu bytes", size);
  else if (!(bin = malloc(size))) {
    fclose(f);
    return; /* no memory for it: build, but keep the file */
  } else if (fread(bin, 1, size, f) != size)
    snprintf(why, sizeof why, "file too short");
  else {
    cl_int err, status, built = CL_SUCCESS;
    size_t sz = (size_t)size;
    const unsigned char *b = bin;
    cl_program prog =
        clCreateProgramWithBinary(cl->context, 1, &cl->device, &sz, &b, &status, &err);
    if (err == CL_SUCCESS && status == CL_SUCCESS &&
        (built = clBuildProgram(prog, 1, &cl->device, cl->options, NULL, NULL)) == CL_SUCCESS)
      *out = prog;
    else {
      if (err == CL_SUCCESS) clReleaseProgram(prog);
      snprintf(why, sizeof why, "the driver rejects the binary: %s",
               opencl_error_name(err != CL_SUCCESS ? err : status != CL_SUCCESS ? status : built));
    }
  }
  free(bin);
  fclose(f);
  if (why[0]) fe_cache_drop(path, why);
}

/* Store a built program's binary in the disk cache (written aside, then renamed, so a
 * reader never sees half a file). Failures are ignored: the cache is an optimization. */
static void opencl_disk_store(opencl_impl *cl, const char *source, unsigned long long hash,
                              cl_program prog)
{
  char path[1100], tmp[1200];
  cl_uint ndev = 0;
  size_t size = 0;
  if (!opencl_disk_path(cl, hash, path, sizeof path)) return;
  if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL) != CL_SUCCESS ||
      ndev != 1 ||
      clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
      !size)
    return;
  unsigned char *bin = malloc(size);
  if (!bin) return;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    unsigned long long check = fe_hash_string(source, ~cl->seed), sz = size;
    if (f) {
      int ok = fwrite(disk_magic, 1, 8, f) == 8 && fwrite(&check, sizeof check, 1, f) == 1 &&
               fwrite(&sz, sizeof sz, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
      ok = !fclose(f) && ok;
      if (!ok || rename(tmp, path)) remove(tmp);
    }
  }
  free(bin);
}

/* A built program for source, from the memory cache, the disk cache or the compiler. */
int opencl_program_get(opencl_impl *cl, const char *source, cl_program *prog, int *cached)
{
  unsigned long long hash = fe_hash_string(source, cl->seed);
  *prog = NULL;
  *cached = 0;
  for (opencl_cached *c = cl->cache; c; c = c->next) {
    if (c->hash != hash || strcmp(c->source, source)) continue;
    clRetainProgram(c->program);
    *prog = c->program;
    *cached = 1;
    return 0;
  }
  cl_program p;
  FE_CHECK(opencl_check_constants(cl, source));
  opencl_disk_load(cl, source, hash, &p);
  if (p) *cached = 1;
  else {
    FE_CHECK(opencl_build_source(cl, source, &p));
    opencl_disk_store(cl, source, hash, p);
  }
  opencl_cached *c = malloc(sizeof *c);
  char *copy = strdup(source);
  if (!c || !copy) {
    free(c), free(copy);
    clReleaseProgram(p);
    FE_ERROR(FE_ERR_MEM, "out of host memory caching an OpenCL program");
  }
  c->hash = hash;
  c->source = copy;
  c->program = p; /* the cache's reference */
  c->next = cl->cache;
  cl->cache = c;
  clRetainProgram(p); /* the caller's reference */
  *prog = p;
  return 0;
}

/* Drop the memory cache (at close). */
void opencl_cache_free(opencl_impl *cl)
{
  while (cl->cache) {
    opencl_cached *c = cl->cache;
    cl->cache = c->next;
    clReleaseProgram(c->program);
    free(c->source);
    free(c);
  }
}

/* Compile a dialect source (engine defines + preamble + kernels) into a module. */
int opencl_compile(void *impl, const char *source, fe_module **mod, double *seconds, int *cached)
{
  opencl_impl *cl = impl;
  double t0 = fe_clock();
  cl_program prog;
  *mod = NULL;
  *seconds = 0;
  *cached = 0;
  FE_ASSERT(source, FE_ERR_ARG, "no kernel source to compile");
  FE_CHECK(opencl_program_get(cl, source, &prog, cached));
  fe_module *m = calloc(1, sizeof *m);
  if (!m) {
    clReleaseProgram(prog);
    FE_ERROR(FE_ERR_MEM, "out of host memory making an OpenCL module");
  }
  m->program = prog;
  m->next = cl->modules;
  if (cl->modules) cl->modules->prev = m;
  cl->modules = m;
  *mod = m;
  *seconds = fe_clock() - t0;
  return 0;
}

/* Free a module and its kernels (the program stays in the cache until close). */
void opencl_module_free(void *impl, fe_module *mod)
{
  opencl_impl *cl = impl;
  if (!mod) return;
  while (mod->kernels) {
    fe_kernel *k = mod->kernels;
    mod->kernels = k->next;
    clReleaseKernel(k->handle);
    free(k->name);
    free(k);
  }
  if (mod->prev) mod->prev->next = mod->next;
  else if (cl->modules == mod) cl->modules = mod->next;
  if (mod->next) mod->next->prev = mod->prev;
  clReleaseProgram(mod->program);
  free(mod);
}

/* The kernel `name` of a module (made on first request, then the same handle). */
int opencl_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res)
{
  opencl_impl *cl = impl;
  cl_ulong local = 0, priv = 0;
  memset(res, 0, sizeof *res);
  clGetKernelWorkGroupInfo(k->handle, cl->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local,
                           NULL);
  clGetKernelWorkGroupInfo(k->handle, cl->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv,
                           NULL);
  res->shared = (size_t)local;
  res->private_bytes = (size_t)priv;
  res->max_threads = (int)k->max_group;
  return 0;
}

int opencl_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k)
{
  opencl_impl *cl = impl;
  cl_int err;
  *k = NULL;
  FE_ASSERT(mod && name, FE_ERR_ARG, "kernel lookup needs a module and a name");
  for (fe_kernel *e = mod->kernels; e; e = e->next)
    if (!strcmp(e->name, name)) {
      *k = e;
      return 0;
    }
  cl_kernel h = clCreateKernel(mod->program, name, &err);
  if (err != CL_SUCCESS) {
    char names[512] = "";
    size_t len = 0;
    if (clGetProgramInfo(mod->program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &len) == CL_SUCCESS &&
        len < sizeof names)
      clGetProgramInfo(mod->program, CL_PROGRAM_KERNEL_NAMES, len, names, NULL);
    else if (len)
      snprintf(names, sizeof names, "more than fit here");
    FE_ERROR(FE_ERR_BACKEND, "no OpenCL kernel '%s' in the compiled program (%s; it has: %s)",
             name, opencl_error_name(err), names[0] ? names : "none");
  }
  fe_kernel *e = calloc(1, sizeof *e);
  char *copy = strdup(name);
  if (!e || !copy) {
    free(e), free(copy);
    clReleaseKernel(h);
    FE_ERROR(FE_ERR_MEM, "out of host memory making an OpenCL kernel");
  }
  e->handle = h;
  e->name = copy;
  e->max_group = cl->info.max_group;
  clGetKernelWorkGroupInfo(h, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof e->max_group,
                           &e->max_group, NULL);
  if (!e->max_group) e->max_group = 1;
  if (!cl->info.is_gpu) {
    /* A CPU device (PoCL) runs a group's items in one thread, with their private data and
     * what stays live across a barrier on that thread's stack: Q6 transpose's groups of 4096
     * items of 1 KB each overflowed it (SIGSEGV in the compiled kernel, the session lost),
     * 1024 ran. Groups stay within OPENCL_CPU_STACK bytes of private data (a power of two of
     * items; the kernels loop their items over whatever group they get). */
    cl_ulong priv = 0;
    clGetKernelWorkGroupInfo(h, cl->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL);
    size_t most = 1;
    while (most * 2 * (priv > 0 ? priv : 1) <= OPENCL_CPU_STACK) most *= 2;
    if (e->max_group > most) e->max_group = most;
  }
  clGetKernelInfo(h, CL_KERNEL_NUM_ARGS, sizeof e->nargs, &e->nargs, NULL);
  e->next = mod->kernels;
  mod->kernels = e;
  *k = e;
  return 0;
}

/* Set argument i of a kernel from an fe_arg. */
static int opencl_set_arg(fe_kernel *k, cl_uint i, const fe_arg *a, fe_precision prec)
{
  cl_int err;
  const char *what;
  if (a->kind == FE_ARG_BUFFER) {
    FE_ASSERT(a->buf && a->buf->ptr, FE_ERR_ARG,
              "argument %u of OpenCL kernel '%s' is a buffer that is not allocated", i, k->name);
    cl_mem m = (cl_mem)a->buf->ptr;
    err = clSetKernelArg(k->handle, i, sizeof m, &m);
    what = "a buffer";
  } else if (a->kind == FE_ARG_INT) {
    FE_ASSERT(a->i >= -2147483647LL - 1 && a->i <= 2147483647LL, FE_ERR_ARG,
              "argument %u of OpenCL kernel '%s' (%lld) does not fit in an int", i, k->name, a->i);
    cl_int v = (cl_int)a->i;
    err = clSetKernelArg(k->handle, i, sizeof v, &v);
    what = "an int";
  } else if (prec == FE_FLOAT) {
    cl_float v = (cl_float)a->r;
    err = clSetKernelArg(k->handle, i, sizeof v, &v);
    what = "a float";
  } else {
    cl_double v = a->r;
    err = clSetKernelArg(k->handle, i, sizeof v, &v);
    what = "a double";
  }
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_ARG, "argument %u of OpenCL kernel '%s' cannot be %s: %s", i, k->name, what,
             opencl_error_name(err));
  return 0;
}

/* Launch ngroups groups; a group larger than the kernel allows is shrunk, which is safe
 * because the dialect's inner loops stride over the items of the group. */
int opencl_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                  const fe_arg *args, fe_precision prec, double *seconds)
{
  opencl_impl *cl = impl;
  if (seconds) *seconds = 0;
  FE_ASSERT(k, FE_ERR_ARG, "launch of a NULL OpenCL kernel");
  FE_ASSERT(nargs >= 0 && (cl_uint)nargs == k->nargs, FE_ERR_ARG,
            "OpenCL kernel '%s' takes %u arguments, the launch passes %d", k->name, k->nargs,
            nargs);
  if (!ngroups) return 0;
  for (int i = 0; i < nargs; i++) FE_CHECK(opencl_set_arg(k, (cl_uint)i, &args[i], prec));
  size_t group = group_size ? group_size : 1;
  if (group > k->max_group) group = k->max_group;
  if (group > cl->max_item) group = cl->max_item;
  FE_CHECK(opencl_enqueue(cl, k->handle, k->name, ngroups, group, seconds));
  return 0;
}
