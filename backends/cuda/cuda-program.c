/* felab cuda backend: the dialect preamble, run-time compilation with NVRTC and launch.
 *
 * NVRTC compiles the generated source (engine defines + this preamble + tables, physics and
 * templates) as CUDA C++ for the card's own architecture: -arch=sm_XY gives a cubin the
 * driver loads as it is. When this NVRTC cannot target the card (a card newer than the
 * toolkit), it compiles for the newest virtual architecture it has below the card's,
 * compute_XY, and the driver JIT-compiles that PTX at load time.
 *
 * compile() looks a source up in two caches before calling NVRTC:
 *   1. the session's memory cache, keyed by the whole source text;
 *   2. images on disk under fe_cache_dir("cuda") (the cpu backend's cache root), named by
 *      a hash of the source, the architecture, the options and the NVRTC and driver
 *      versions, with the source beside them (k<hash>.cu) for reading;
 *      FELAB_CUDA_DISK_CACHE=0 turns it off.
 * Kernels are called with the driver's parameter array. The driver does not tell how many
 * parameters a kernel has, so compile() reads every FE_KERNEL signature from the source
 * and launch() checks the engine's arguments against it before anything reaches the GPU. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"


/* The dialect of docs/kernels.md in CUDA C++. The engine's defines (FE_DOUBLE, sizes)
 * come before it. Tables are __device__ const rather than __constant__: the threads of a
 * warp read different entries (one quadrature point or basis function each), which the
 * constant cache serializes, and high-order tables exceed its 64 KiB. */
static const char preamble_body[] =
    "/* ---- felab dialect: CUDA C++ (NVRTC) ---- */\n"
    "#define FE_CUDA 1\n"
    "#if FE_DOUBLE\n"
    "typedef double real;\n"
    "#else\n"
    "typedef float real;\n"
    "#endif\n"
    "/* FE_CUDA_BOUNDS: empty, or a template's __launch_bounds__ */\n"
    "#define FE_CUDA_BOUNDS\n"
    "#define FE_KERNEL(name) extern \"C\" __global__ void FE_CUDA_BOUNDS name\n"
    "#define FE_GLOBAL\n"
    "#define FE_CONSTANT static __device__ const\n"
    "#define FE_DEVICE static __device__ __forceinline__\n"
    "#define FE_RESTRICT __restrict__\n"
    "/* every kernel lets a launch that follows it (backend.h's follow) take places once all its\n"
    " * blocks have begun; that launch waits at FE_PRIOR_WAIT for its end and its writes */\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
    "#define FE_GROUPS_BEGIN asm volatile(\"griddepcontrol.launch_dependents;\");\n"
    "#define FE_PRIOR_WAIT asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "#else\n"
    "#define FE_GROUPS_BEGIN\n"
    "#define FE_PRIOR_WAIT\n"
    "#endif\n"
    "#define FE_GROUPS_END\n"
    "#define FE_SHARED __shared__\n"
    "#define FE_SHARED_PTR /* a pointer to shared memory, as a function argument */\n"
    "#define FE_OUTER(g, n) for (int g = (int)blockIdx.x; g < (n); g += (int)gridDim.x)\n"
    "#define FE_INNER(t, n) for (int t = (int)threadIdx.x; t < (n); t += (int)blockDim.x)\n"
    "#define FE_INNER_VEC(t, n) FE_INNER(t, n)\n"
    "#define FE_SCALAR_INDEX(x) (void)(x) /* the cpu's: keeps its loads scalar */\n"
    "/* entry t = e n + b of the cell map of a group's m cells (cell e, node b), one an item */\n"
    "#define FE_CELL_NODES(t, e, b, m, n) \\\n"
    "  FE_INNER(t, (m) * (n)) for (int e = t / (n), b = t % (n), fe_1 = 1; fe_1; fe_1 = 0)\n"
    "#define FE_BARRIER __syncthreads()\n"
    "#define FE_BARRIER_GLOBAL __syncthreads() /* a group's global writes seen by its items */\n"
    "/* loops of up to FE_CUDA_UNROLL trips become straight code (small arrays stay in\n"
    " * registers); longer ones (high orders) are unrolled by that much, which bounds the\n"
    " * compile time (FELAB_CUDA_OPTIONS=-DFE_CUDA_UNROLL=32 trades time for Q2 speed) */\n"
    "#ifndef FE_CUDA_UNROLL\n"
    "#define FE_CUDA_UNROLL 16\n"
    "#endif\n"
    "#define FE_PRAGMA_(x) _Pragma(#x)\n"
    "#define FE_UNROLL_BY_(n) FE_PRAGMA_(unroll n)\n"
    "#define FE_UNROLL FE_UNROLL_BY_(FE_CUDA_UNROLL)\n"
    "/* atomic add: native on doubles from sm_60, compare-and-swap on the bits before */\n"
    "#if FE_DOUBLE && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600\n"
    "static __device__ __forceinline__ void fe_atomic_add(double *p, double v)\n"
    "{\n"
    "  unsigned long long *q = (unsigned long long *)p, old = *q, seen;\n"
    "  do {\n"
    "    seen = old;\n"
    "    old = atomicCAS(q, seen, __double_as_longlong(__longlong_as_double(seen) + v));\n"
    "  } while (old != seen);\n"
    "}\n"
    "#define FE_ATOMIC_ADD(p, v) fe_atomic_add((p), (v))\n"
    "#else\n"
    "#define FE_ATOMIC_ADD(p, v) atomicAdd((p), (v))\n"
    "#endif\n"
    "/* a group's sum of v (every item's), added into one of CG's (p, q) parts (backend.h's\n"
    " * cg_parts): a warp's by shuffles, the group's by its first item, one atomic add a group\n"
    " * (groups are whole warps) */\n"
    "#define FE_PQ_PARTS " FE_XSTR(FE_PQ_PARTS) "\n"
    "#define FE_PQ_STRIDE " FE_XSTR(FE_PQ_STRIDE) "\n"
    "static __device__ __forceinline__ void fe_pq_sum(double v, double *parts)\n"
    "{\n"
    "  __shared__ double fe_pq_warps[32];\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
    "  if ((threadIdx.x & 31) == 0) fe_pq_warps[threadIdx.x >> 5] = v;\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    double s = 0;\n"
    "    for (int i = 0; i < (int)(blockDim.x + 31) / 32; i++) s += fe_pq_warps[i];\n"
    "    double *p = parts + (blockIdx.x % FE_PQ_PARTS) * FE_PQ_STRIDE;\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600\n"
    "    unsigned long long *q = (unsigned long long *)p, old = *q, seen;\n"
    "    do {\n"
    "      seen = old;\n"
    "      old = atomicCAS(q, seen, __double_as_longlong(__longlong_as_double(seen) + s));\n"
    "    } while (old != seen);\n"
    "#else\n"
    "    atomicAdd(p, s);\n"
    "#endif\n"
    "  }\n"
    "}\n"
    "#define FE_PQ_SUM(v, parts) fe_pq_sum((v), (parts))\n";

/* Math functions wrapped to take and return reals, so that pow(x, 2) or fmin(x, 0.5) mean
 * the same in float kernels as in C: unary, then binary (the float names end in f). */
static const char *const math_unary[] = {"sqrt", "cbrt", "exp",  "log",   "log10", "sin",
                                         "cos",  "tan",  "asin", "acos",  "atan",  "sinh",
                                         "cosh", "tanh", "fabs", "floor", "ceil"};
static const char *const math_binary[] = {"pow", "atan2", "fmin", "fmax", "fmod", "hypot",
                                          "copysign"};

/* Append the wrappers of one precision to out (n bytes; returns the length needed). */
static size_t cuda_math_wrappers(char *out, size_t n, const char *suffix)
{
  size_t len = snprintf(out, n, "/* math on reals, whatever the types of the arguments */\n");
  for (size_t i = 0; i < sizeof math_unary / sizeof math_unary[0]; i++) {
    const char *f = math_unary[i];
    len += snprintf(out ? out + len : NULL, n > len ? n - len : 0,
                    "static __device__ __forceinline__ real fe_real_%s(real a) { return %s%s(a); }"
                    "\n#define %s(a) fe_real_%s(a)\n",
                    f, f, suffix, f, f);
  }
  for (size_t i = 0; i < sizeof math_binary / sizeof math_binary[0]; i++) {
    const char *f = math_binary[i];
    len += snprintf(out ? out + len : NULL, n > len ? n - len : 0,
                    "static __device__ __forceinline__ real fe_real_%s(real a, real b) "
                    "{ return %s%s(a, b); }\n#define %s(a, b) fe_real_%s(a, b)\n",
                    f, f, suffix, f, f);
  }
  return len;
}

int cuda_preamble_make(cuda_impl *cu)
{
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    const char *suffix = p == FE_FLOAT ? "f" : "";
    size_t math = cuda_math_wrappers(NULL, 0, suffix);
    size_t n = sizeof preamble_body + math + 128, len;
    char *s = cu->preamble[p] = malloc(n);
    if (!s) FE_ERROR(FE_ERR_MEM, "out of host memory making the CUDA preamble");
    len = snprintf(s, n, "#ifndef FE_DOUBLE\n#define FE_DOUBLE %d\n#endif\n%s", p == FE_DOUBLE,
                   preamble_body);
    len += cuda_math_wrappers(s + len, n - len, suffix);
    snprintf(s + len, n - len, "/* ---- end of the dialect ---- */\n");
  }
  return 0;
}

const char *cuda_preamble(void *impl, fe_precision prec)
{
  cuda_impl *cu = impl;
  return cu->preamble[prec == FE_FLOAT ? FE_FLOAT : FE_DOUBLE];
}

/* The card's own architecture if this NVRTC has it, else the newest virtual one below it. */
int cuda_choose_arch(cuda_impl *cu)
{
  int n = 0, best = 0, exact = 0;
  if (cu->api.nvrtcGetNumSupportedArchs && cu->api.nvrtcGetSupportedArchs &&
      cu->api.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n < 256) {
    int archs[256];
    if (cu->api.nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) n = 0;
    for (int i = 0; i < n; i++) {
      if (archs[i] == cu->cc) exact = 1;
      if (archs[i] <= cu->cc && archs[i] > best) best = archs[i];
    }
    if (n > 0 && !best)
      FE_ERROR(FE_ERR_UNAVAILABLE, "NVRTC %d.%d cannot compile for %s (sm_%d): its oldest "
               "target is sm_%d; use an older CUDA toolkit (FELAB_NVRTC)", cu->nvrtc_major,
               cu->nvrtc_minor, cu->info.name, cu->cc, archs[0]);
  } else {
    exact = 1; /* no list (NVRTC < 11.2): try the card's own, fall back when refused */
    best = cu->cc;
  }
  cu->ptx = !exact;
  snprintf(cu->arch, sizeof cu->arch, "-arch=%s_%d", exact ? "sm" : "compute",
           exact ? cu->cc : best);
  return 0;
}

/* Split the extra options at spaces into opts[from..]; returns the new count. */
static int cuda_split_options(char *buf, const char **opts, int from, int max)
{
  int n = from;
  for (char *p = strtok(buf, " \t"); p && n < max; p = strtok(NULL, " \t")) opts[n++] = p;
  return n;
}

/* The NVRTC log of a program (malloc'ed, maybe empty). */
static char *cuda_program_log(cuda_impl *cu, nvrtcProgram prog)
{
  size_t size = 0;
  char *log = NULL;
  if (cu->api.nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && (log = calloc(size + 1, 1)))
    cu->api.nvrtcGetProgramLog(prog, log);
  return log;
}

/* Copy the compiled image out of an NVRTC program: a cubin, or the PTX with its NUL. */
static int cuda_program_image(cuda_impl *cu, nvrtcProgram prog, void **image, size_t *size)
{
  nvrtcResult r = cu->ptx ? cu->api.nvrtcGetPTXSize(prog, size)
                          : cu->api.nvrtcGetCUBINSize(prog, size);
  FE_ASSERT(r == NVRTC_SUCCESS && *size > 0, FE_ERR_BACKEND, "NVRTC produced no %s: %s",
            cu->ptx ? "PTX" : "cubin", cu->api.nvrtcGetErrorString(r));
  FE_MALLOC(*(char **)image, *size, "compiled CUDA module");
  r = cu->ptx ? cu->api.nvrtcGetPTX(prog, *image) : cu->api.nvrtcGetCUBIN(prog, *image);
  if (r != NVRTC_SUCCESS) {
    free(*image);
    *image = NULL;
    FE_ERROR(FE_ERR_BACKEND, "reading NVRTC's output failed: %s", cu->api.nvrtcGetErrorString(r));
  }
  return 0;
}

/* Run NVRTC once with the current arch; *refused is set when it rejects the options. */
static int cuda_nvrtc_run(cuda_impl *cu, const char *source, void **image, size_t *size,
                          int *refused)
{
  nvrtcProgram prog;
  char extra[sizeof cu->options];
  /* -w: no warnings, so that a failure's log shows its errors */
  const char *opts[40] = {cu->arch, "-default-device", "-w"};
  snprintf(extra, sizeof extra, "%s", cu->options);
  int nopts = cuda_split_options(extra, opts, 3, 40);
  *refused = 0;
  nvrtcResult r = cu->api.nvrtcCreateProgram(&prog, source, "felab.cu", 0, NULL, NULL);
  FE_ASSERT(r == NVRTC_SUCCESS, FE_ERR_BACKEND, "NVRTC cannot take the source: %s",
            cu->api.nvrtcGetErrorString(r));
  r = cu->api.nvrtcCompileProgram(prog, nopts, opts);
  int rc = 0;
  if (r == NVRTC_SUCCESS) rc = cuda_program_image(cu, prog, image, size);
  else if (r == NVRTC_ERROR_INVALID_OPTION) *refused = 1;
  else {
    char *log = cuda_program_log(cu, prog);
    if (r == NVRTC_ERROR_COMPILATION) rc = fe_backend_compile_error("cuda", source, log);
    else
      rc = fe_error_set(FE_ERR_BACKEND, __FILE__, __LINE__, __func__, "NVRTC failed: %s\n%.1500s",
                        cu->api.nvrtcGetErrorString(r), log ? log : "");
    free(log);
  }
  cu->api.nvrtcDestroyProgram(&prog);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

int cuda_nvrtc_compile(cuda_impl *cu, const char *source, void **image, size_t *size)
{
  int refused;
  *image = NULL;
  *size = 0;
  FE_CHECK(cuda_nvrtc_run(cu, source, image, size, &refused));
  if (refused && !cu->ptx && !cu->options[0]) {
    /* this NVRTC does not know the card: PTX for the driver's JIT from now on (the cache
     * key stays that of the card's arch, which always leads here) */
    cu->ptx = 1;
    snprintf(cu->arch, sizeof cu->arch, "-arch=compute_%d", cu->cc);
    FE_CHECK(cuda_nvrtc_run(cu, source, image, size, &refused));
  }
  FE_ASSERT(!refused, FE_ERR_ARG, "NVRTC %d.%d rejects the options '%s %s' (FELAB_CUDA_OPTIONS?)",
            cu->nvrtc_major, cu->nvrtc_minor, cu->arch, cu->options);
  return 0;
}

/* ---- the caches ---- */

static const char disk_magic[8] = {'F', 'E', 'L', 'A', 'B', 'C', 'U', '1'};

/* The path of a cache file of a source hash with an extension; 0 if the cache is off. */
static int cuda_disk_path(cuda_impl *cu, unsigned long long hash, const char *ext, char *path,
                          size_t n)
{
  char dir[1024];
  if (!cu->disk_cache) return 0;
  if (fe_cache_dir("cuda", dir, sizeof dir)) {
    fe_error_clear(); /* no cache directory: compile every time, it is not an error */
    cu->disk_cache = 0;
    return 0;
  }
  snprintf(path, n, "%s/k%016llx.%s", dir, hash, ext);
  return 1;
}

/* An image from the disk cache, or NULL when there is none. A file that is not a whole
 * image of this source (truncated, corrupt) is dropped, with a word on stderr, and the
 * source is compiled instead (then stored again). Never an error. */
static void *cuda_disk_load(cuda_impl *cu, const char *source, unsigned long long hash,
                            size_t *size)
{
  char path[1100], magic[8];
  const char *why = NULL;
  unsigned long long check, sz = 0;
  void *image = NULL;
  *size = 0;
  if (!cuda_disk_path(cu, hash, "bin", path, sizeof path)) return NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, disk_magic, 8)) why = "not a felab CUDA image";
  else if (fread(&check, sizeof check, 1, f) != 1 || fread(&sz, sizeof sz, 1, f) != 1)
    why = "file too short";
  else if (check != fe_hash_string(source, ~cu->seed)) why = "written for another source";
  else if (sz == 0 || sz >= (1ULL << 31)) why = "an image of an impossible size";
  else if ((image = malloc(sz)) && fread(image, 1, sz, f) != sz) why = "file too short";
  fclose(f);
  if (why) {
    free(image);
    fe_cache_drop(path, why);
    return NULL;
  }
  *size = image ? (size_t)sz : 0;
  return image;
}

/* Drop the disk image of a source that the driver would not load (said once on stderr). */
static void cuda_disk_drop(cuda_impl *cu, unsigned long long hash, const char *why)
{
  char path[1100];
  if (cuda_disk_path(cu, hash, "bin", path, sizeof path)) fe_cache_drop(path, why);
}

/* Write a file aside and rename it into place, so a reader never sees half of it. */
static void cuda_disk_write(const char *path, const void *head, size_t nhead, const void *data,
                            size_t n)
{
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  int ok = fwrite(head, 1, nhead, f) == nhead && fwrite(data, 1, n, f) == n;
  ok = !fclose(f) && ok;
  if (!ok || rename(tmp, path)) remove(tmp);
}

/* Store an image and its source in the disk cache; failures are ignored (an optimization). */
static void cuda_disk_store(cuda_impl *cu, const char *source, unsigned long long hash,
                            const void *image, size_t size)
{
  char path[1100];
  unsigned char head[24];
  unsigned long long check = fe_hash_string(source, ~cu->seed), sz = size;
  if (!cuda_disk_path(cu, hash, "cu", path, sizeof path)) return;
  cuda_disk_write(path, "", 0, source, strlen(source));
  memcpy(head, disk_magic, 8);
  memcpy(head + 8, &check, 8);
  memcpy(head + 16, &sz, 8);
  if (cuda_disk_path(cu, hash, "bin", path, sizeof path))
    cuda_disk_write(path, head, sizeof head, image, size);
}

/* The memory-cache entry of a source, or NULL. */
static cuda_cached *cuda_cache_find(cuda_impl *cu, const char *source, unsigned long long hash)
{
  for (cuda_cached *c = cu->cache; c; c = c->next)
    if (c->hash == hash && !strcmp(c->source, source)) return c;
  return NULL;
}

/* Keep an image in the memory cache (which then owns it). */
static int cuda_cache_add(cuda_impl *cu, const char *source, unsigned long long hash,
                          void *image, size_t size, cuda_cached **out)
{
  cuda_cached *c = malloc(sizeof *c);
  char *copy = strdup(source);
  if (!c || !copy) {
    free(c), free(copy), free(image);
    FE_ERROR(FE_ERR_MEM, "out of host memory caching a CUDA module");
  }
  *c = (cuda_cached){.hash = hash, .source = copy, .image = image, .size = size, .next = cu->cache};
  cu->cache = c;
  *out = c;
  return 0;
}

void cuda_cache_free(cuda_impl *cu)
{
  while (cu->cache) {
    cuda_cached *c = cu->cache;
    cu->cache = c->next;
    free(c->source);
    free(c->image);
    free(c);
  }
}

/* The compiled image of a source: memory cache, disk cache, then NVRTC. */
static int cuda_image_get(cuda_impl *cu, const char *source, int fresh, cuda_cached **out,
                          int *cached)
{
  unsigned long long hash = fe_hash_string(source, cu->seed);
  void *image = NULL;
  size_t size = 0;
  *cached = 0;
  if (!fresh && (*out = cuda_cache_find(cu, source, hash))) {
    *cached = 1;
    return 0;
  }
  if (!fresh && (image = cuda_disk_load(cu, source, hash, &size))) *cached = 1;
  if (!image) { /* compiled by one process of those sharing the disk cache, the others wait */
    int lock = cu->disk_cache ? fe_cache_lock_kernel("cuda", hash) : -1, rc = 0;
    if (lock >= 0 && !fresh && (image = cuda_disk_load(cu, source, hash, &size))) *cached = 1;
    else if (!(rc = cuda_nvrtc_compile(cu, source, &image, &size)))
      cuda_disk_store(cu, source, hash, image, size);
    fe_cache_unlock(lock);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return cuda_cache_add(cu, source, hash, image, size, out);
}

/* NVRTC on one source with the current options, touching nothing shared (no error state,
 * no cache): the image, or NULL. */
static void *cuda_nvrtc_quiet(cuda_impl *cu, const char *source, size_t *size)
{
  nvrtcProgram prog;
  char extra[sizeof cu->options];
  const char *opts[40] = {cu->arch, "-default-device", "-w"};
  snprintf(extra, sizeof extra, "%s", cu->options);
  int nopts = cuda_split_options(extra, opts, 3, 40);
  void *image = NULL;
  if (cu->api.nvrtcCreateProgram(&prog, source, "felab.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
    return NULL;
  if (cu->api.nvrtcCompileProgram(prog, nopts, opts) == NVRTC_SUCCESS &&
      (cu->ptx ? cu->api.nvrtcGetPTXSize(prog, size) : cu->api.nvrtcGetCUBINSize(prog, size)) ==
          NVRTC_SUCCESS &&
      *size > 0 && (image = malloc(*size)) &&
      (cu->ptx ? cu->api.nvrtcGetPTX(prog, image) : cu->api.nvrtcGetCUBIN(prog, image)) !=
          NVRTC_SUCCESS) {
    free(image);
    image = NULL;
  }
  cu->api.nvrtcDestroyProgram(&prog);
  return image;
}

int cuda_precompile(void *impl, const char *const *sources, int n, double *seconds)
{
  cuda_impl *cu = impl;
  double t0 = fe_clock();
  void **image = calloc((size_t)n + 1, sizeof *image);
  size_t *size = calloc((size_t)n + 1, sizeof *size);
  int *todo = calloc((size_t)n + 1, sizeof *todo), k = 0;
  /* the disk cache's locks of the sources compiled here (as cuda_image_get takes them, but
   * without waiting): a source whose lock another process holds (mpirun's ranks sharing the
   * cache) is left to it, and cuda_image_get waits for it and loads it when it is used */
  int lock[FE_CACHE_LOCKS];
  for (int l = 0; l < FE_CACHE_LOCKS; l++) lock[l] = -1;
  for (int i = 0; image && size && todo && i < n && !cu->lost; i++) { /* what no cache has */
    unsigned long long h = fe_hash_string(sources[i], cu->seed);
    int l = (int)(h % FE_CACHE_LOCKS);
    cuda_cached *c;
    if (cuda_cache_find(cu, sources[i], h)) continue;
    void *img = cuda_disk_load(cu, sources[i], h, &size[i]);
    if (!img && cu->disk_cache && lock[l] == -1) {
      lock[l] = fe_cache_trylock_kernel("cuda", h);
      if (lock[l] >= 0) img = cuda_disk_load(cu, sources[i], h, &size[i]); /* stored meanwhile? */
    }
    if (img) cuda_cache_add(cu, sources[i], h, img, size[i], &c);
    else if (lock[l] != FE_CACHE_BUSY) todo[k++] = i;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(k > 0 ? k : 1)
  for (int j = 0; j < k; j++) image[todo[j]] = cuda_nvrtc_quiet(cu, sources[todo[j]], &size[todo[j]]);
  int made = 0;
  for (int j = 0; j < k; j++) { /* into the caches, in turn */
    int i = todo[j];
    if (!image[i]) continue;
    made++;
    unsigned long long h = fe_hash_string(sources[i], cu->seed);
    cuda_cached *c;
    cuda_disk_store(cu, sources[i], h, image[i], size[i]);
    if (cuda_cache_add(cu, sources[i], h, image[i], size[i], &c)) fe_error_clear();
  }
  for (int l = 0; l < FE_CACHE_LOCKS; l++) fe_cache_unlock(lock[l]);
  free(image);
  free(size);
  free(todo);
  *seconds = fe_clock() - t0;
  return made;
}

/* ---- modules and kernels ---- */

/* The kind of one declared parameter: 'p' pointer, 'i' int, 'r' real, '?' other. */
static char cuda_param_kind(const char *p, size_t len)
{
  char tok[64];
  if (memchr(p, '*', len)) return 'p';
  for (size_t i = 0; i < len;) {
    size_t n = 0;
    while (i < len && (isalnum((unsigned char)p[i]) || p[i] == '_')) {
      if (n + 1 < sizeof tok) tok[n++] = p[i];
      i++;
    }
    tok[n] = '\0';
    if (!strcmp(tok, "int")) return 'i';
    if (!strcmp(tok, "real") || !strcmp(tok, "double") || !strcmp(tok, "float")) return 'r';
    if (!n) i++;
  }
  return '?';
}

/* Read one `FE_KERNEL(name)(params)` at p (just after "FE_KERNEL("); NULL if it is not one. */
static cuda_signature *cuda_parse_signature(const char *p)
{
  const char *e = strchr(p, ')');
  if (!e || e[1] != '(' || e - p <= 0 || e - p >= 64) return NULL;
  cuda_signature *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  memcpy(s->name, p, (size_t)(e - p));
  /* split the list between e + 2 and its closing parenthesis on top-level commas */
  const char *q, *start = e + 2;
  int depth = 0;
  for (q = e + 2; *q; q++) {
    int end = (*q == ')' && depth == 0), comma = (*q == ',' && depth == 0);
    if (*q == '(') depth++;
    else if (*q == ')' && !end) depth--;
    if (!end && !comma) continue;
    const char *b = start;
    while (b < q && isspace((unsigned char)*b)) b++;
    int empty = q == b || (q - b == 4 && !strncmp(b, "void", 4));
    if (!empty && s->nparams < CUDA_MAX_ARGS)
      s->kinds[s->nparams++] = cuda_param_kind(b, (size_t)(q - b));
    else if (!empty) s->nparams = CUDA_MAX_ARGS + 1; /* too many: launch refuses */
    start = q + 1;
    if (end) break;
  }
  return s;
}

/* Every kernel signature of a source (skipping the macro's own #define). */
static cuda_signature *cuda_signatures(const char *src)
{
  cuda_signature *list = NULL;
  for (const char *p = src; (p = strstr(p, "FE_KERNEL(")) != NULL;) {
    const char *bol = p;
    while (bol > src && bol[-1] != '\n') bol--;
    while (*bol == ' ' || *bol == '\t') bol++;
    p += strlen("FE_KERNEL(");
    if (*bol == '#') continue;
    cuda_signature *s = cuda_parse_signature(p);
    if (!s) continue;
    s->next = list;
    list = s;
  }
  return list;
}

static void cuda_signatures_free(cuda_signature *s)
{
  while (s) {
    cuda_signature *next = s->next;
    free(s);
    s = next;
  }
}

/* Load an image into a CUmodule; a failure says why (PTX too new for the driver, ...). */
static int cuda_module_load(cuda_impl *cu, const void *image, CUmodule *mod)
{
  char log[4096] = "", text[256];
  int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(size_t)sizeof log};
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuModuleLoadDataEx(mod, image, 2, opts, values);
  if (err == CUDA_SUCCESS) return 0;
  if (err == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || err == CUDA_ERROR_INVALID_PTX)
    FE_ERROR(FE_ERR_BACKEND, "the driver (CUDA %d.%d) cannot load what NVRTC %d.%d made for %s: "
             "%s%s%s (use an NVRTC no newer than the driver: FELAB_NVRTC)",
             cu->driver_version / 1000, cu->driver_version % 1000 / 10, cu->nvrtc_major,
             cu->nvrtc_minor, cu->arch + 6, cuda_error_text(&cu->api, err, text, sizeof text),
             log[0] ? "\n" : "", log);
  return cuda_fail(cu, err, "loading a compiled module");
}

/* Compile a dialect source (engine defines + preamble + kernels) into a module. */
int cuda_compile(void *impl, const char *source, fe_module **mod, double *seconds, int *cached)
{
  cuda_impl *cu = impl;
  double t0 = fe_clock();
  cuda_cached *c;
  CUmodule handle = NULL;
  *mod = NULL;
  *seconds = 0;
  *cached = 0;
  FE_ASSERT(source, FE_ERR_ARG, "no kernel source to compile");
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_image_get(cu, source, 0, &c, cached));
  if (cuda_module_load(cu, c->image, &handle)) {
    if (!*cached || cu->lost) return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
    /* a stale or damaged cached image: drop it and compile again, once */
    cuda_disk_drop(cu, fe_hash_string(source, cu->seed), fe_error_message());
    fe_error_clear();
    FE_CHECK(cuda_image_get(cu, source, 1, &c, cached));
    FE_CHECK(cuda_module_load(cu, c->image, &handle));
  }
  fe_module *m = calloc(1, sizeof *m);
  if (!m) {
    cu->api.cuModuleUnload(handle);
    FE_ERROR(FE_ERR_MEM, "out of host memory making a CUDA module");
  }
  m->handle = handle;
  m->sigs = cuda_signatures(source);
  /* FELAB_CUDA_TRIAL: "off" tries nothing, "all" every module; else C typed by a user */
  const char *trial = getenv("FELAB_CUDA_TRIAL");
  int try = trial && !strcmp(trial, "all") ? 1 : trial && !strcmp(trial, "off") ? 0
          : strstr(source, "#define FE_USER_C 1") != NULL;
  if (try && (m->trial_image = malloc(c->size))) {
    memcpy(m->trial_image, c->image, c->size);
    m->trial_size = c->size;
  }
  m->next = cu->modules;
  if (cu->modules) cu->modules->prev = m;
  cu->modules = m;
  *mod = m;
  *seconds = fe_clock() - t0;
  return 0;
}

void cuda_module_free(void *impl, fe_module *mod)
{
  cuda_impl *cu = impl;
  if (!mod) return;
  while (mod->kernels) {
    fe_kernel *k = mod->kernels;
    mod->kernels = k->next;
    free(k->fault);
    free(k);
  }
  free(mod->trial_image);
  cuda_signatures_free(mod->sigs);
  if (mod->prev) mod->prev->next = mod->next;
  else if (cu->modules == mod) cu->modules = mod->next;
  if (mod->next) mod->next->prev = mod->prev;
  cu->api.cuCtxSetCurrent(cu->context);
  cu->api.cuModuleUnload(mod->handle);
  free(mod);
}

/* The kernel `name` of a module (made on first request, then the same handle). */
int cuda_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k)
{
  cuda_impl *cu = impl;
  CUfunction fn;
  *k = NULL;
  FE_ASSERT(mod && name, FE_ERR_ARG, "kernel lookup needs a module and a name");
  for (fe_kernel *e = mod->kernels; e; e = e->next)
    if (!strcmp(e->name, name)) {
      *k = e;
      return 0;
    }
  const cuda_signature *sig = mod->sigs;
  while (sig && strcmp(sig->name, name)) sig = sig->next;
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuModuleGetFunction(&fn, mod->handle, name);
  FE_ASSERT(err == CUDA_SUCCESS && sig, FE_ERR_BACKEND,
            "no CUDA kernel '%s' in the compiled module (kernels are declared with FE_KERNEL)",
            name);
  fe_kernel *e;
  FE_CALLOC(e, 1, "CUDA kernel");
  e->fn = fn;
  e->mod = mod;
  snprintf(e->name, sizeof e->name, "%s", name);
  e->sig = sig;
  if (cu->api.cuFuncGetAttribute(&e->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn))
    e->max_threads = (int)cu->info.max_group;
  if (cu->api.cuFuncGetAttribute(&e->registers, CU_FUNC_ATTRIBUTE_NUM_REGS, fn)) e->registers = 0;
  e->next = mod->kernels;
  mod->kernels = e;
  *k = e;
  return 0;
}

/* Argument storage of one launch: the driver takes a pointer to each value. */
typedef struct cuda_args {
  CUdeviceptr ptr[CUDA_MAX_ARGS];
  int ints[CUDA_MAX_ARGS];
  double dbl[CUDA_MAX_ARGS];
  float flt[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS];
} cuda_args;

/* Check argument i against the declared parameter and store it. */
static int cuda_arg(const fe_kernel *k, int i, const fe_arg *a, fe_precision prec, cuda_args *s)
{
  static const char *const names[] = {"a buffer", "an int", "a real"};
  char want = k->sig->kinds[i];
  char have = a->kind == FE_ARG_BUFFER ? 'p' : a->kind == FE_ARG_INT ? 'i' : 'r';
  FE_ASSERT(want == have, FE_ERR_ARG, "argument %d of CUDA kernel '%s' is %s, the kernel "
            "declares %s", i, k->name, names[a->kind], want == 'p' ? "a pointer" :
            want == 'i' ? "an int" : want == 'r' ? "a real" : "a type felab cannot pass");
  if (have == 'p') {
    FE_ASSERT(a->buf && a->buf->ptr, FE_ERR_ARG,
              "argument %d of CUDA kernel '%s' is a buffer that is not allocated", i, k->name);
    s->ptr[i] = (CUdeviceptr)(size_t)a->buf->ptr;
    s->params[i] = &s->ptr[i];
  } else if (have == 'i') {
    FE_ASSERT(a->i >= -2147483647LL - 1 && a->i <= 2147483647LL, FE_ERR_ARG,
              "argument %d of CUDA kernel '%s' (%lld) does not fit in an int", i, k->name, a->i);
    s->ints[i] = (int)a->i;
    s->params[i] = &s->ints[i];
  } else if (prec == FE_FLOAT) {
    s->flt[i] = (float)a->r;
    s->params[i] = &s->flt[i];
  } else {
    s->dbl[i] = a->r;
    s->params[i] = &s->dbl[i];
  }
  return 0;
}

/* Launch ngroups blocks; a block larger than the kernel allows (its registers bound it) is
 * shrunk to whole warps, which is safe because the dialect's inner loops stride. */
int cuda_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                const fe_arg *args, fe_precision prec, double *seconds)
{
  cuda_impl *cu = impl;
  cuda_args s;
  if (seconds) *seconds = 0;
  FE_ASSERT(k, FE_ERR_ARG, "launch of a NULL CUDA kernel");
  FE_ASSERT(nargs == k->sig->nparams && nargs <= CUDA_MAX_ARGS, FE_ERR_ARG,
            "CUDA kernel '%s' takes %d arguments, the launch passes %d", k->name,
            k->sig->nparams, nargs);
  for (int i = 0; i < nargs; i++) FE_CHECK(cuda_arg(k, i, &args[i], prec, &s));
  if (!ngroups) return 0;
  size_t group = group_size ? group_size : 1;
  if (group > (size_t)k->max_threads) group = (size_t)k->max_threads / 32 * 32;
  if (!group) group = 1;
  FE_CHECK(cuda_kernel_vet(cu, k, (unsigned)ngroups, (unsigned)group, nargs, s.params, prec));
  return cuda_run(cu, k->fn, k->name, ngroups, group, k->shared, s.params, seconds);
}

int cuda_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res)
{
  cuda_impl *cu = impl;
  int shared = 0, local = 0;
  memset(res, 0, sizeof *res);
  if (cu->api.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn)) shared = 0;
  if (cu->api.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->fn)) local = 0;
  res->regs = k->registers;
  res->shared = (size_t)shared + k->shared;
  res->private_bytes = (size_t)local;
  res->max_threads = k->max_threads;
  return 0;
}

int cuda_kernel_shared(void *impl, fe_kernel *k, size_t bytes)
{
  cuda_impl *cu = impl;
  FE_ASSERT(k, FE_ERR_ARG, "dynamic shared memory for a NULL CUDA kernel");
  size_t most = cu->info.local_mem_optin > cu->info.local_mem ? cu->info.local_mem_optin
                                                               : cu->info.local_mem;
  FE_ASSERT(bytes <= most, FE_ERR_ARG, "kernel '%s' asks for %zu bytes of shared memory; %s "
            "allows %zu", k->name, bytes, cu->info.name, most);
  if (k->shared == bytes) return 0;
  CUresult err = cu->api.cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            (int)bytes);
  if (err != CUDA_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "allowing kernel '%.64s' %zu bytes of shared memory", k->name, bytes);
    return cuda_fail(cu, err, what);
  }
  k->shared = (unsigned)bytes;
  return 0;
}
