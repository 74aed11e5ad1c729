/* felab cuda backend: vector operations with built-in kernels. One small CUDA C++ source
 * holds every kernel for both precisions (templates, instantiated as fe_vec_<op>_d and
 * fe_vec_<op>_f); it is compiled on first use through the same caches as generated
 * kernels, so after the first session it costs a file read.
 *
 * Element-wise kernels use grid-stride loops over a bounded grid (neighbouring threads
 * touch neighbouring values) and do not wait: the stream orders them, and the next read
 * back waits for them. dot and reduce accumulate in double for float vectors too, as
 * backend.h promises, and finish on the device in one launch: each thread accumulates its
 * slice, each block combines its threads (warp shuffles, then the warps' results through
 * shared memory) into one partial in global scratch, and the last block to finish (the one
 * that draws the last ticket of an atomic counter) combines the partials in a fixed order
 * and resets the counter. The result is therefore the same bits at every call, whatever
 * order the blocks ran in. The host reads the one double back. The fused CG update
 * (x += alpha p, r -= alpha q, then (r, r) and (r, M^-1 r)) is one such launch with two
 * sums, read back in one copy of two doubles; CG's new direction is element-wise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"



static const char vector_source[] =
    "/* felab cuda backend: built-in vector kernels (cuda-vector.c) */\n"
    "typedef long long idx;\n"
    "__device__ __forceinline__ idx fe_first()\n"
    "{\n"
    "  return (idx)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "}\n"
    "__device__ __forceinline__ idx fe_stride() { return (idx)gridDim.x * blockDim.x; }\n"
    "\n"
    "/* 16 bytes of a vector (2 doubles, 4 floats), loaded and stored in one access. Streams of\n"
    " * CG's length run faster so (measured: docs/benchmarks.md), so the kernels CG runs at every\n"
    " * step go a pack at a time where every operand is 16-byte aligned (the allocator's are),\n"
    " * and the last n % W values (or\n"
    " * every value, where an operand is not aligned) a value at a time. */\n"
    "template <typename T> struct __align__(16) fe_pack {\n"
    "  T v[16 / sizeof(T)];\n"
    "};\n"
    "#define FE_W(T) ((idx)(16 / sizeof(T)))\n"
    "__device__ __forceinline__ bool fe_aligned(size_t bits) { return (bits & 15) == 0; }\n"
    "\n"
    "/* x <- v */\n"
    "template <typename T> __device__ void fe_fill(T *x, idx n, T v)\n"
    "{\n"
    "  idx done = 0;\n"
    "  if (fe_aligned((size_t)x)) {\n"
    "    fe_pack<T> w, *X = (fe_pack<T> *)x;\n"
    "    for (int k = 0; k < FE_W(T); k++) w.v[k] = v;\n"
    "    done = n / FE_W(T) * FE_W(T);\n"
    "    for (idx i = fe_first(); i < n / FE_W(T); i += fe_stride()) X[i] = w;\n"
    "  }\n"
    "  for (idx i = done + fe_first(); i < n; i += fe_stride()) x[i] = v;\n"
    "}\n"
    "\n"
    "/* y <- a x + b y; y is not read when b = 0 (BLAS convention) */\n"
    "template <typename T> __device__ void fe_axpby(T *y, T a, const T *x, T b, idx n)\n"
    "{\n"
    "  if (b == (T)0)\n"
    "    for (idx i = fe_first(); i < n; i += fe_stride()) y[i] = a * x[i];\n"
    "  else\n"
    "    for (idx i = fe_first(); i < n; i += fe_stride()) y[i] = a * x[i] + b * y[i];\n"
    "}\n"
    "\n"
    "/* z <- x .* y, or x ./ y */\n"
    "template <typename T>\n"
    "__device__ void fe_pointwise(T *z, const T *x, const T *y, int divide, idx n)\n"
    "{\n"
    "  if (divide)\n"
    "    for (idx i = fe_first(); i < n; i += fe_stride()) z[i] = x[i] / y[i];\n"
    "  else\n"
    "    for (idx i = fe_first(); i < n; i += fe_stride()) z[i] = x[i] * y[i];\n"
    "}\n"
    "\n"
    "/* op 0: sum, 1: min, 2: max, always in double */\n"
    "__device__ __forceinline__ double fe_combine(double a, double b, int op)\n"
    "{\n"
    "  return op == 0 ? a + b : op == 1 ? fmin(a, b) : fmax(a, b);\n"
    "}\n"
    "__device__ __forceinline__ double fe_identity(int op)\n"
    "{\n"
    "  const long long inf = 0x7ff0000000000000LL, minus_inf = (long long)0xfff0000000000000ULL;\n"
    "  return op == 0 ? 0.0 : __longlong_as_double(op == 1 ? inf : minus_inf);\n"
    "}\n"
    "\n"
    "/* The block's values combined (the result is in thread 0): shuffles within each warp,\n"
    " * then warp 0 combines the warps' results through s[32]. */\n"
    "__device__ double fe_block_combine(double v, int op, double *s)\n"
    "{\n"
    "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "  const int nwarps = (blockDim.x + 31) >> 5;\n"
    "  for (int o = 16; o > 0; o >>= 1)\n"
    "    v = fe_combine(v, __shfl_down_sync(0xffffffffu, v, o), op);\n"
    "  if (lane == 0) s[warp] = v;\n"
    "  __syncthreads();\n"
    "  v = threadIdx.x < nwarps ? s[threadIdx.x] : fe_identity(op);\n"
    "  if (warp == 0)\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "      v = fe_combine(v, __shfl_down_sync(0xffffffffu, v, o), op);\n"
    "  return v;\n"
    "}\n"
    "\n"
    "/* The scratch of a reduction: scratch[0] holds the ticket counter, scratch[1] and\n"
    " * scratch[2] the results, scratch[3 ...] the partials, K per block (sum k of block b at\n"
    " * 3 + k * blocks + b). */\n"
    "#define FE_SCRATCH_PARTIALS 3\n"
    "\n"
    "/* out[k] <- v[k] combined over the grid (op 0 sum, 1 min, 2 max), for K <= 2 values per\n"
    " * thread; s holds 32 K doubles. See the top of cuda-vector.c. */\n"
    "template <int K>\n"
    "__device__ void fe_grid_combine(double (&v)[K], int op, double *scratch, double *s,\n"
    "                                int *last, double *out)\n"
    "{\n"
    "  unsigned int *done = (unsigned int *)scratch;\n"
    "  double *partial = scratch + FE_SCRATCH_PARTIALS;\n"
    "  for (int k = 0; k < K; k++) v[k] = fe_block_combine(v[k], op, s + 32 * k);\n"
    "  if (threadIdx.x == 0) {\n"
    "    for (int k = 0; k < K; k++) partial[k * gridDim.x + blockIdx.x] = v[k];\n"
    "    __threadfence(); /* the partials are visible before the ticket is drawn */\n"
    "    *last = atomicAdd(done, 1u) == gridDim.x - 1;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  if (!*last) return;\n"
    "  __threadfence();\n"
    "  for (int k = 0; k < K; k++) {\n"
    "    double w = fe_identity(op);\n"
    "    for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x)\n"
    "      w = fe_combine(w, ((volatile double *)partial)[k * gridDim.x + i], op);\n"
    "    w = fe_block_combine(w, op, s + 32 * k);\n"
    "    if (threadIdx.x == 0) out[k] = w;\n"
    "  }\n"
    "  if (threadIdx.x == 0) *done = 0; /* ready for the next reduction */\n"
    "}\n"
    "\n"
    "/* This thread's part of (x, y), in double */\n"
    "template <typename T> __device__ double fe_dot_slice(const T *x, const T *y, idx n)\n"
    "{\n"
    "  double v = 0.0;\n"
    "  idx done = 0;\n"
    "  if (fe_aligned((size_t)x | (size_t)y)) {\n"
    "    const fe_pack<T> *X = (const fe_pack<T> *)x, *Y = (const fe_pack<T> *)y;\n"
    "    done = n / FE_W(T) * FE_W(T);\n"
    "    for (idx i = fe_first(); i < n / FE_W(T); i += fe_stride()) {\n"
    "      const fe_pack<T> a = X[i], b = Y[i];\n"
    "#pragma unroll\n"
    "      for (int k = 0; k < FE_W(T); k++) v += (double)a.v[k] * (double)b.v[k];\n"
    "    }\n"
    "  }\n"
    "  for (idx i = done + fe_first(); i < n; i += fe_stride()) v += (double)x[i] * (double)y[i];\n"
    "  return v;\n"
    "}\n"
    "\n"
    "/* scratch[1] <- the sum (op 0), min or max of x (or of x .* y when dot) */\n"
    "template <typename T> __device__ void fe_reduce(const T *x, const T *y, int dot, idx n,\n"
    "                                                int op, double *scratch, double *s, int *last)\n"
    "{\n"
    "  double v[1] = {fe_identity(op)};\n"
    "  if (dot)\n"
    "    v[0] = fe_dot_slice(x, y, n);\n"
    "  else\n"
    "    for (idx i = fe_first(); i < n; i += fe_stride())\n"
    "      v[0] = fe_combine(v[0], (double)x[i], op);\n"
    "  fe_grid_combine<1>(v, op, scratch, s, last, scratch + 1);\n"
    "}\n"
    "\n"
    "/* One value of CG's update: x <- x + alpha p, r <- r - alpha q; v[0] += (r, r) and\n"
    " * v[1] += (r, z) with z = r ./ d (D) or r */\n"
    "template <typename T, bool D>\n"
    "__device__ __forceinline__ void fe_cg_update_at(T &x, T &r, T p, T q, T d, T alpha, double *v)\n"
    "{\n"
    "  const T rn = r - alpha * q, zn = D ? rn / d : rn;\n"
    "  x = x + alpha * p;\n"
    "  r = rn;\n"
    "  v[0] += (double)rn * (double)rn;\n"
    "  v[1] += (double)rn * (double)zn;\n"
    "}\n"
    "\n"
    "/* X: x <- x + alpha p here too (else x and p are not touched: CG with its scalars on the\n"
    " * device moves x in the direction's pass, which reads p anyway) */\n"
    "template <typename T, bool D, bool X>\n"
    "__device__ void fe_cg_update_slice(T *x, T *r, const T *p, const T *q, const T *d, T alpha,\n"
    "                                   idx n, double *v)\n"
    "{\n"
    "  idx done = 0;\n"
    "  if (fe_aligned((size_t)x | (size_t)r | (size_t)p | (size_t)q | (size_t)d)) {\n"
    "    fe_pack<T> *Xp = (fe_pack<T> *)x, *R = (fe_pack<T> *)r;\n"
    "    const fe_pack<T> *P = (const fe_pack<T> *)p, *Q = (const fe_pack<T> *)q;\n"
    "    const fe_pack<T> *Dp = (const fe_pack<T> *)d;\n"
    "    done = n / FE_W(T) * FE_W(T);\n"
    "    for (idx i = fe_first(); i < n / FE_W(T); i += fe_stride()) {\n"
    "      fe_pack<T> xi = X ? Xp[i] : fe_pack<T>(), ri = R[i];\n"
    "      const fe_pack<T> pi = X ? P[i] : fe_pack<T>(), qi = Q[i], di = D ? Dp[i] : fe_pack<T>();\n"
    "#pragma unroll\n"
    "      for (int k = 0; k < FE_W(T); k++)\n"
    "        fe_cg_update_at<T, D>(xi.v[k], ri.v[k], pi.v[k], qi.v[k], di.v[k], alpha, v);\n"
    "      if (X) Xp[i] = xi;\n"
    "      R[i] = ri;\n"
    "    }\n"
    "  }\n"
    "  for (idx i = done + fe_first(); i < n; i += fe_stride()) {\n"
    "    T xi = X ? x[i] : (T)0;\n"
    "    fe_cg_update_at<T, D>(xi, r[i], X ? p[i] : (T)0, q[i], D ? d[i] : (T)1, alpha, v);\n"
    "    if (X) x[i] = xi;\n"
    "  }\n"
    "}\n"
    "\n"
    "/* CG's update in one pass: x <- x + alpha p, r <- r - alpha q, and with z = r ./ d\n"
    " * (z = r when d is null), never stored, out[0] <- (r, r) and out[1] <- (r, z) of the new\n"
    " * r */\n"
    "template <typename T>\n"
    "__device__ void fe_cg_update(T *x, T *r, const T *p, const T *q, const T *d, T alpha, idx n,\n"
    "                             double *scratch, double *s, int *last, double *out)\n"
    "{\n"
    "  double v[2] = {0.0, 0.0}; /* (r, r), (r, z) */\n"
    "  if (d)\n"
    "    fe_cg_update_slice<T, true, true>(x, r, p, q, d, alpha, n, v);\n"
    "  else\n"
    "    fe_cg_update_slice<T, false, true>(x, r, p, q, d, alpha, n, v);\n"
    "  fe_grid_combine<2>(v, 0, scratch, s, last, out);\n"
    "}\n"
    "\n"
    "/* One value of CG's direction: r / d (D) or r, plus beta p (B; else p is not read) */\n"
    "template <typename T, bool D, bool B>\n"
    "__device__ __forceinline__ T fe_cg_direction_at(T p, T r, T d, T beta)\n"
    "{\n"
    "  return (D ? r / d : r) + (B ? beta * p : (T)0);\n"
    "}\n"
    "\n"
    "/* X: also x <- x + alpha p with the old p */\n"
    "template <typename T, bool D, bool B, bool X>\n"
    "__device__ void fe_cg_direction_slice(T *p, const T *r, const T *d, T beta, T *x, T alpha,\n"
    "                                      idx n)\n"
    "{\n"
    "  idx done = 0;\n"
    "  if (fe_aligned((size_t)p | (size_t)r | (size_t)d | (size_t)x)) {\n"
    "    fe_pack<T> *P = (fe_pack<T> *)p, *Xp = (fe_pack<T> *)x;\n"
    "    const fe_pack<T> *R = (const fe_pack<T> *)r, *Dp = (const fe_pack<T> *)d;\n"
    "    done = n / FE_W(T) * FE_W(T);\n"
    "    for (idx i = fe_first(); i < n / FE_W(T); i += fe_stride()) {\n"
    "      fe_pack<T> pi = B || X ? P[i] : fe_pack<T>(), xi = X ? Xp[i] : fe_pack<T>();\n"
    "      const fe_pack<T> ri = R[i], di = D ? Dp[i] : fe_pack<T>();\n"
    "#pragma unroll\n"
    "      for (int k = 0; k < FE_W(T); k++) {\n"
    "        if (X) xi.v[k] = xi.v[k] + alpha * pi.v[k];\n"
    "        pi.v[k] = fe_cg_direction_at<T, D, B>(pi.v[k], ri.v[k], di.v[k], beta);\n"
    "      }\n"
    "      if (X) Xp[i] = xi;\n"
    "      P[i] = pi;\n"
    "    }\n"
    "  }\n"
    "  for (idx i = done + fe_first(); i < n; i += fe_stride()) {\n"
    "    const T pi = B || X ? p[i] : (T)0;\n"
    "    if (X) x[i] = x[i] + alpha * pi;\n"
    "    p[i] = fe_cg_direction_at<T, D, B>(pi, r[i], D ? d[i] : (T)1, beta);\n"
    "  }\n"
    "}\n"
    "\n"
    "/* CG's new direction: p <- r ./ d + beta p (r + beta p when d is null); p is not read\n"
    " * when beta = 0. With x: first x <- x + alpha p (the update that cg_update_slice<.., false>\n"
    " * left out), p is then always read. */\n"
    "template <typename T>\n"
    "__device__ void fe_cg_direction(T *p, const T *r, const T *d, T beta, T *x, T alpha, idx n)\n"
    "{\n"
    "  if (x && d)\n"
    "    fe_cg_direction_slice<T, true, true, true>(p, r, d, beta, x, alpha, n);\n"
    "  else if (x)\n"
    "    fe_cg_direction_slice<T, false, true, true>(p, r, d, beta, x, alpha, n);\n"
    "  else if (d && beta == (T)0)\n"
    "    fe_cg_direction_slice<T, true, false, false>(p, r, d, beta, x, alpha, n);\n"
    "  else if (d)\n"
    "    fe_cg_direction_slice<T, true, true, false>(p, r, d, beta, x, alpha, n);\n"
    "  else if (beta == (T)0)\n"
    "    fe_cg_direction_slice<T, false, false, false>(p, r, d, beta, x, alpha, n);\n"
    "  else\n"
    "    fe_cg_direction_slice<T, false, true, false>(p, r, d, beta, x, alpha, n);\n"
    "}\n"
    "\n"
    "#define FE_VECTOR_KERNELS(T, S) \\\n"
    "  extern \"C\" __global__ void fe_vec_fill_##S(T *x, idx n, T v) { fe_fill(x, n, v); } \\\n"
    "  extern \"C\" __global__ void fe_vec_axpby_##S(T *y, T a, const T *x, T b, idx n) \\\n"
    "  { \\\n"
    "    fe_axpby(y, a, x, b, n); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_pointwise_##S(T *z, const T *x, const T *y, \\\n"
    "                                                  int divide, idx n) \\\n"
    "  { \\\n"
    "    fe_pointwise(z, x, y, divide, n); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_dot_##S(const T *x, const T *y, idx n, double *scratch) \\\n"
    "  { \\\n"
    "    __shared__ double s[32]; \\\n"
    "    __shared__ int last; \\\n"
    "    fe_reduce(x, y, 1, n, 0, scratch, s, &last); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_reduce_##S(const T *x, idx n, int op, double *scratch) \\\n"
    "  { \\\n"
    "    __shared__ double s[32]; \\\n"
    "    __shared__ int last; \\\n"
    "    fe_reduce(x, x, 0, n, op, scratch, s, &last); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_update_##S(T *x, T *r, const T *p, const T *q, \\\n"
    "                                                  const T *d, T alpha, idx n, \\\n"
    "                                                  double *scratch) \\\n"
    "  { \\\n"
    "    __shared__ double s[64]; \\\n"
    "    __shared__ int last; \\\n"
    "    fe_cg_update(x, r, p, q, d, alpha, n, scratch, s, &last, scratch + 1); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_direction_##S(T *p, const T *r, const T *d, \\\n"
    "                                                     T beta, idx n) \\\n"
    "  { \\\n"
    "    fe_cg_direction(p, r, d, beta, (T *)0, (T)0, n); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_pq_##S(const T *p, const T *q, idx n, \\\n"
    "                                             double *scratch, double *c, int k) \\\n"
    "  { \\\n"
    "    __shared__ double s[32]; \\\n"
    "    __shared__ int last; \\\n"
    "    double v[1] = {fe_dot_slice(p, q, n)}; \\\n"
    "    fe_grid_combine<1>(v, 0, scratch, s, &last, c + 4 * k); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_update_at_##S(T *x, T *r, const T *p, const T *q, \\\n"
    "                                                     const T *d, idx n, double *scratch, \\\n"
    "                                                     double *c, int k, \\\n"
    "                                                     const double *parts) \\\n"
    "  { \\\n"
    "    __shared__ double s[64]; \\\n"
    "    __shared__ int last; \\\n"
    "    double pq = 0; /* (p, q): the apply's parts, or from its pass */ \\\n"
    "    if (!parts) { \\\n"
    "      pq = c[4 * k]; \\\n"
    "    } else { \\\n"
    "      for (int i = 0; i < " FE_XSTR(FE_PQ_PARTS) "; i++) pq += parts[i * " FE_XSTR(FE_PQ_STRIDE) "]; \\\n"
    "      if (blockIdx.x == 0 && threadIdx.x == 0) c[4 * k] = pq; /* for the direction, the host */ \\\n"
    "    } \\\n"
    "    const T alpha = (T)(c[4 * (k ^ 1) + 2] / pq); /* (r, z) / (p, q) */ \\\n"
    "    double v[2] = {0.0, 0.0}; /* (r, r), (r, z); x moves in the direction's pass */ \\\n"
    "    if (d) \\\n"
    "      fe_cg_update_slice<T, true, false>(x, r, p, q, d, alpha, n, v); \\\n"
    "    else \\\n"
    "      fe_cg_update_slice<T, false, false>(x, r, p, q, d, alpha, n, v); \\\n"
    "    fe_grid_combine<2>(v, 0, scratch, s, &last, c + 4 * k + 1); \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_pq_parts_##S(double *c, int k, const double *parts) \\\n"
    "  { /* a split space's step: its (p, q) parts summed as the update sums them, for the host */ \\\n"
    "    double pq = 0; \\\n"
    "    for (int i = 0; i < " FE_XSTR(FE_PQ_PARTS) "; i++) pq += parts[i * " FE_XSTR(FE_PQ_STRIDE) "]; \\\n"
    "    c[4 * k] = pq; \\\n"
    "  } \\\n"
    "  extern \"C\" __global__ void fe_vec_cg_direction_at_##S(T *p, const T *r, const T *d, \\\n"
    "                                                        T *x, idx n, const double *c, \\\n"
    "                                                        int k, double *parts) \\\n"
    "  { \\\n"
    "    /* the step's (p, q) parts, summed by its update: zeroed for the step after next */ \\\n"
    "    if (parts && blockIdx.x == 0 && threadIdx.x < " FE_XSTR(FE_PQ_PARTS) ") \\\n"
    "      parts[threadIdx.x * " FE_XSTR(FE_PQ_STRIDE) "] = 0; \\\n"
    "    const T alpha = (T)(c[4 * (k ^ 1) + 2] / c[4 * k]); \\\n"
    "    fe_cg_direction(p, r, d, (T)(c[4 * k + 2] / c[4 * (k ^ 1) + 2]), x, alpha, n); \\\n"
    "  }\n"
    "/* A sum over a machine's ranks, each on its device (backend.h's fe_node_sum): n values of c\n"
    " * from at, less the group sums corr (value i's ncorr of them), written into every other\n"
    " * rank's mailbox (slot kind, this rank's place) with the sum's number seq after them, then\n"
    " * the others' read from this rank's mailbox once their numbers are there and added in the\n"
    " * ranks' order, so that every rank gets the same bits; one thread. parts: the value is\n"
    " * the sum of CG's (p, q) parts instead (as fe_vec_cg_pq_parts adds them). */\n"
    "extern \"C\" __global__ void fe_vec_cg_node_sum(double *c, int at, int n, const void *corr,\n"
    "                                              int ncorr, int corr_float, double *box,\n"
    "                                              const unsigned long long *peers, int rank,\n"
    "                                              int size, double seq, int kind,\n"
    "                                              const double *parts)\n"
    "{\n"
    "  if (threadIdx.x || blockIdx.x) return;\n"
    "  double v[3] = {0, 0, 0}, t[3] = {0, 0, 0};\n"
    "  for (int i = 0; i < n; i++) {\n"
    "    double s = 0;\n"
    "    for (int g = 0; corr && g < ncorr; g++)\n"
    "      s += corr_float ? (double)((const float *)corr)[i * ncorr + g]\n"
    "                      : ((const double *)corr)[i * ncorr + g];\n"
    "    v[i] = c[at + i] - s;\n"
    "  }\n"
    "  if (parts) {\n"
    "    double pq = 0;\n"
    "    for (int i = 0; i < " FE_XSTR(FE_PQ_PARTS) "; i++) pq += parts[i * " FE_XSTR(FE_PQ_STRIDE) "];\n"
    "    v[0] = pq;\n"
    "  }\n"
    "  for (int p = 0; p < size; p++) {\n"
    "    if (p == rank) continue;\n"
    "    volatile double *to = (volatile double *)peers[p] + (kind * size + rank) * 4;\n"
    "    for (int i = 0; i < n; i++) to[i] = v[i];\n"
    "    __threadfence_system();\n"
    "    to[3] = seq;\n"
    "  }\n"
    "  for (int p = 0; p < size; p++) {\n"
    "    if (p == rank) {\n"
    "      for (int i = 0; i < n; i++) t[i] += v[i];\n"
    "      continue;\n"
    "    }\n"
    "    volatile double *from = (volatile double *)box + (kind * size + p) * 4;\n"
    "    while (from[3] != seq) {\n"
    "    }\n"
    "    __threadfence_system();\n"
    "    for (int i = 0; i < n; i++) t[i] += from[i];\n"
    "  }\n"
    "  for (int i = 0; i < n; i++) c[at + i] = t[i];\n"
    "}\n"
    "FE_VECTOR_KERNELS(double, d)\n"
    "FE_VECTOR_KERNELS(float, f)\n";

/* One function of the vector module. */
static int cuda_vector_function(cuda_impl *cu, const char *op, int prec, CUfunction *fn)
{
  char name[64];
  snprintf(name, sizeof name, "fe_vec_%s_%c", op, prec == FE_FLOAT ? 'f' : 'd');
  CUresult err = cu->api.cuModuleGetFunction(fn, cu->vector.module->handle, name);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, name);
  return 0;
}

/* The scratch of a reduction: counter, two results, two partials per block (the layout
 * the kernels' FE_SCRATCH_PARTIALS describes); zeroed once. */
static int cuda_vector_scratch(cuda_impl *cu)
{
  cuda_vector *v = &cu->vector;
  int sms = cu->info.compute_units > 0 ? cu->info.compute_units : 1;
  size_t n = 3 + 2 * (size_t)sms * REDUCE_BLOCKS_PER_SM;
  double *zeros = calloc(n, sizeof *zeros);
  if (!zeros) FE_ERROR(FE_ERR_MEM, "out of host memory for reduction scratch");
  fe_buffer b;
  int rc = cuda_alloc(cu, n * sizeof(double), &b);
  if (!rc) rc = cuda_write(cu, &b, 0, n * sizeof(double), zeros);
  free(zeros);
  if (rc) {
    if (b.ptr) cuda_release(cu, &b);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  v->scratch = (CUdeviceptr)(size_t)b.ptr;
  v->max_blocks = sms * REDUCE_BLOCKS_PER_SM;
  return 0;
}

/* The vector module and its functions, made on first use. */
int cuda_vector_get(cuda_impl *cu)
{
  cuda_vector *v = &cu->vector;
  double seconds;
  int cached;
  if (v->scratch) return 0;
  if (!v->module) {
    FE_CHECK(cuda_compile(cu, vector_source, &v->module, &seconds, &cached));
    /* the module is the backend's own: off the list that close frees for the engine */
    cu->modules = v->module->next;
    if (cu->modules) cu->modules->prev = NULL;
    v->module->next = NULL;
  }
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    FE_CHECK(cuda_vector_function(cu, "fill", p, &v->fill[p]));
    FE_CHECK(cuda_vector_function(cu, "axpby", p, &v->axpby[p]));
    FE_CHECK(cuda_vector_function(cu, "pointwise", p, &v->pointwise[p]));
    FE_CHECK(cuda_vector_function(cu, "dot", p, &v->dot[p]));
    FE_CHECK(cuda_vector_function(cu, "reduce", p, &v->reduce[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_update", p, &v->cg_update[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_direction", p, &v->cg_direction[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_pq", p, &v->cg_pq[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_update_at", p, &v->cg_update_at[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_direction_at", p, &v->cg_direction_at[p]));
    FE_CHECK(cuda_vector_function(cu, "cg_pq_parts", p, &v->cg_pq_parts[p]));
  }
  CUresult err = cu->api.cuModuleGetFunction(&v->cg_node_sum, v->module->handle, "fe_vec_cg_node_sum");
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "fe_vec_cg_node_sum");
  return cuda_vector_scratch(cu);
}

void cuda_vector_free(cuda_impl *cu)
{
  cuda_vector *v = &cu->vector;
  if (v->scratch) cu->api.cuMemFree(v->scratch);
  if (v->module) cuda_module_free(cu, v->module);
  memset(v, 0, sizeof *v);
}

/* Blocks for n values, at most per_sm per multiprocessor (and cap). */
size_t cuda_vector_blocks(const cuda_impl *cu, size_t n, size_t per_sm, size_t cap)
{
  size_t sms = cu->info.compute_units > 0 ? (size_t)cu->info.compute_units : 1;
  size_t nb = (n + VECTOR_BLOCK - 1) / VECTOR_BLOCK, most = sms * per_sm;
  if (cap && most > cap) most = cap;
  return nb < most ? nb : most;
}

/* A real kernel argument in the precision of the vectors. */
typedef struct cuda_real {
  double d;
  float f;
} cuda_real;

static void *cuda_real_arg(cuda_real *r, double v, fe_precision prec)
{
  r->d = v;
  r->f = (float)v;
  return prec == FE_FLOAT ? (void *)&r->f : (void *)&r->d;
}

/* Launch an element-wise kernel without waiting. */
int cuda_vector_run(cuda_impl *cu, CUfunction fn, const char *name, size_t n, void **params)
{
  return cuda_run(cu, fn, name, cuda_vector_blocks(cu, n, VECTOR_BLOCKS_PER_SM, 0), VECTOR_BLOCK,
                  0, params, NULL);
}

/* x <- value */
int cuda_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value)
{
  cuda_impl *cu = impl;
  FE_CHECK(fe_vectors_check("fill", "x", FE_VECTORS(x), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr px = (CUdeviceptr)(size_t)x->ptr;
  long long nn = (long long)n;
  cuda_real v;
  void *params[] = {&px, &nn, cuda_real_arg(&v, value, prec)};
  return cuda_vector_run(cu, cu->vector.fill[prec], "fe_vec_fill", n, params);
}

/* y <- a x + b y (y is not read when b = 0) */
int cuda_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
               fe_precision prec)
{
  cuda_impl *cu = impl;
  FE_CHECK(fe_vectors_check("axpby", "yx", FE_VECTORS(y, x), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr py = (CUdeviceptr)(size_t)y->ptr, px = (CUdeviceptr)(size_t)x->ptr;
  long long nn = (long long)n;
  cuda_real ra, rb;
  void *params[] = {&py, cuda_real_arg(&ra, a, prec), &px, cuda_real_arg(&rb, b, prec), &nn};
  return cuda_vector_run(cu, cu->vector.axpby[prec], "fe_vec_axpby", n, params);
}

/* z <- x .* y, or x ./ y */
int cuda_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                   size_t n, fe_precision prec)
{
  cuda_impl *cu = impl;
  FE_CHECK(fe_vectors_check("pointwise", "zxy", FE_VECTORS(z, x, y), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr pz = (CUdeviceptr)(size_t)z->ptr, px = (CUdeviceptr)(size_t)x->ptr;
  CUdeviceptr py = (CUdeviceptr)(size_t)y->ptr;
  long long nn = (long long)n;
  int div = divide ? 1 : 0;
  void *params[] = {&pz, &px, &py, &div, &nn};
  return cuda_vector_run(cu, cu->vector.pointwise[prec], "fe_vec_pointwise", n, params);
}

/* Run a reduction kernel and read its nresults doubles (1 or 2) back in one copy. */
static int cuda_reduce_run(cuda_impl *cu, CUfunction fn, const char *name, size_t n,
                           void **params, int nresults, double *result)
{
  size_t blocks = cuda_vector_blocks(cu, n, REDUCE_BLOCKS_PER_SM, (size_t)cu->vector.max_blocks);
  FE_CHECK(cuda_run(cu, fn, name, blocks, VECTOR_BLOCK, 0, params, NULL));
  CUresult err = cu->api.cuMemcpyDtoH(result, cu->vector.scratch + sizeof(double),
                                      (size_t)nresults * sizeof *result);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, name);
  return 0;
}

/* x . y, accumulated in double; 0 for n = 0 */
int cuda_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
             double *result)
{
  cuda_impl *cu = impl;
  *result = 0.0;
  FE_CHECK(fe_vectors_check("dot", "xy", FE_VECTORS(x, y), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr px = (CUdeviceptr)(size_t)x->ptr, py = (CUdeviceptr)(size_t)y->ptr;
  long long nn = (long long)n;
  void *params[] = {&px, &py, &nn, &cu->vector.scratch};
  return cuda_reduce_run(cu, cu->vector.dot[prec], "fe_vec_dot", n, params, 1, result);
}

/* sum, min or max of x in double; for n = 0: 0, +inf, -inf */
int cuda_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                double *result)
{
  cuda_impl *cu = impl;
  FE_ASSERT(op == FE_REDUCE_SUM || op == FE_REDUCE_MIN || op == FE_REDUCE_MAX, FE_ERR_ARG,
            "unknown reduction %d", (int)op);
  *result = op == FE_REDUCE_SUM ? 0.0 : op == FE_REDUCE_MIN ? INFINITY : -INFINITY;
  FE_CHECK(fe_vectors_check("reduce", "x", FE_VECTORS(x), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr px = (CUdeviceptr)(size_t)x->ptr;
  long long nn = (long long)n;
  int kop = op == FE_REDUCE_SUM ? 0 : op == FE_REDUCE_MIN ? 1 : 2;
  void *params[] = {&px, &nn, &kop, &cu->vector.scratch};
  return cuda_reduce_run(cu, cu->vector.reduce[prec], "fe_vec_reduce", n, params, 1, result);
}

/* x <- x + alpha p, r <- r - alpha q; (r, r) and (r, r ./ d) of the new r (d NULL: both
 * (r, r)) in double, finished on the device in the same launch; 0 for n = 0 */
int cuda_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                   const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                   fe_precision prec, double *rr, double *rz)
{
  cuda_impl *cu = impl;
  *rr = *rz = 0.0;
  FE_CHECK(fe_vectors_check("cg_update", "xrpq", FE_VECTORS(x, r, p, q), n, prec));
  if (d) FE_CHECK(fe_vectors_check("cg_update", "d", FE_VECTORS(d), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr px = (CUdeviceptr)(size_t)x->ptr, pr = (CUdeviceptr)(size_t)r->ptr;
  CUdeviceptr pp = (CUdeviceptr)(size_t)p->ptr, pq = (CUdeviceptr)(size_t)q->ptr;
  CUdeviceptr pd = d ? (CUdeviceptr)(size_t)d->ptr : 0; /* null: no preconditioner */
  long long nn = (long long)n;
  cuda_real ra;
  void *params[] = {&px, &pr, &pp, &pq, &pd, cuda_real_arg(&ra, alpha, prec), &nn,
                    &cu->vector.scratch};
  double sums[2];
  FE_CHECK(cuda_reduce_run(cu, cu->vector.cg_update[prec], "fe_vec_cg_update", n, params, 2,
                           sums));
  *rr = sums[0];
  *rz = sums[1];
  return 0;
}

/* p <- r ./ d + beta p, or r + beta p when d is NULL (p is not read when beta = 0) */
int cuda_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                      double beta, size_t n, fe_precision prec)
{
  cuda_impl *cu = impl;
  FE_CHECK(fe_vectors_check("cg_direction", "pr", FE_VECTORS(p, r), n, prec));
  if (d) FE_CHECK(fe_vectors_check("cg_direction", "d", FE_VECTORS(d), n, prec));
  if (!n) return 0;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  CUdeviceptr pp = (CUdeviceptr)(size_t)p->ptr, pr = (CUdeviceptr)(size_t)r->ptr;
  CUdeviceptr pd = d ? (CUdeviceptr)(size_t)d->ptr : 0; /* null: no preconditioner */
  long long nn = (long long)n;
  cuda_real rb;
  void *params[] = {&pp, &pr, &pd, cuda_real_arg(&rb, beta, prec), &nn};
  return cuda_vector_run(cu, cu->vector.cg_direction[prec], "fe_vec_cg_direction", n, params);
}
