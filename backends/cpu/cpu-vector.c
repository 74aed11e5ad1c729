/* felab cpu backend: vector work on host memory, plain OpenMP loops (threads from 32768
 * values on), reductions accumulated in double; the fused CG steps, whose sums are the same
 * bits whatever the number of threads, and CG with its scalars in a state (cg_begin ...). */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu-backend.h"
#include "engine/core/error.h"

/* Vector work: plain OpenMP loops, in SIMD lanes (the vectors never overlap; felab's own
 * code is built for the baseline x86-64, two doubles a lane set, and contracts no multiply
 * and add, so the lanes give the scalar loop's bits: a CG step on Q2 12^3, 15.6k dofs, 0.174
 * -> 0.148 ms, GMRES's 0.38 -> 0.30 on a 2-core EPYC, the divisions of the Jacobi direction
 * two at a time), threads from 32768 values on; reductions in double. */
#define CPU_VECTOR_LOOP(T, body)                                                                 \
  do {                                                                                           \
    _Pragma("omp parallel for simd if (parallel : n > 32768) schedule(static)")                  \
    for (size_t i = 0; i < n; i++) body;                                                         \
  } while (0)

int cpu_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value)
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

int cpu_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
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

int cpu_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y,
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

/* The fused CG steps' and the dot's sums: deterministic whatever the number of threads: a
 * vector too short for threads (n <= 32768) is one range, a longer one CPU_SUM_BLOCKS fixed
 * ranges, each summed by one thread, the ranges' sums added in order. A range's terms go
 * into four running sums, i mod 4 (the tail's into the first; then (s0 + s1) + (s2 + s3)):
 * one chain of adds ran at its latency, a term every 4 cycles (a dot over 15.6k doubles in
 * 13.5 us on a 2-core EPYC, 4.9 us now). The fused and the unfused CG give the same bits. */
#define CPU_SUM_BLOCKS 64

/* Ranges for n values: 1 (in order) or CPU_SUM_BLOCKS. */
static int cpu_sum_blocks(size_t n)
{
  return n > 32768 ? CPU_SUM_BLOCKS : 1;
}

/* The sum of term(i) over [lo, hi) into out, in four running sums */
#define CPU_SUM4(lo, hi, term, out)                                                             \
  do {                                                                                          \
    double s0_ = 0, s1_ = 0, s2_ = 0, s3_ = 0;                                                  \
    size_t i_ = (lo);                                                                           \
    for (; i_ + 4 <= (hi); i_ += 4) {                                                           \
      s0_ += term(i_);                                                                          \
      s1_ += term(i_ + 1);                                                                      \
      s2_ += term(i_ + 2);                                                                      \
      s3_ += term(i_ + 3);                                                                      \
    }                                                                                           \
    for (; i_ < (hi); i_++) s0_ += term(i_);                                                    \
    (out) = (s0_ + s1_) + (s2_ + s3_);                                                          \
  } while (0)

/* (x, y) of n values of type T, its ranges' sums in order */
#define CPU_DOT_RANGES(T, x, y, n, result)                                                      \
  do {                                                                                          \
    const T *xv_ = (x), *yv_ = (y);                                                             \
    const int nb_ = cpu_sum_blocks(n);                                                          \
    double part_[CPU_SUM_BLOCKS];                                                               \
    _Pragma("omp parallel for if (nb_ > 1) schedule(static)")                                   \
    for (int b = 0; b < nb_; b++) {                                                             \
      const size_t lo = (n) * (size_t)b / (size_t)nb_, hi = (n) * (size_t)(b + 1) / (size_t)nb_; \
      CPU_SUM4(lo, hi, CPU_DOT_TERM, part_[b]);                                                 \
    }                                                                                           \
    double s_ = 0;                                                                              \
    for (int b = 0; b < nb_; b++) s_ += part_[b];                                               \
    (result) = s_;                                                                              \
  } while (0)
#define CPU_DOT_TERM(i) ((double)xv_[i] * yv_[i])

int cpu_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
            double *result)
{
  (void)impl;
  if (prec == FE_DOUBLE) CPU_DOT_RANGES(double, x->ptr, y->ptr, n, *result);
  else CPU_DOT_RANGES(float, x->ptr, y->ptr, n, *result);
  return 0;
}

int cpu_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
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

/* One loop of the update over [lo, hi): r <- r - a q (x <- x + a p too where X), and with
 * z = r ./ d (D) or r, rr = (r, r) and rz = (r, z) of the new r, each in four running sums
 * as CPU_SUM4 makes them (so that (r, r) is the bits cpu_dot gives) */
#define CPU_CG_UPDATE_ONE(T, X, D, i, k)                                                        \
  do {                                                                                          \
    const T ri = r[i] - a * q[i];                                                               \
    if (X) x[i] = x[i] + a * p[i];                                                              \
    r[i] = ri;                                                                                  \
    rs[k] += (double)ri * ri;                                                                   \
    if (D) zs[k] += (double)ri * (ri / d[i]);                                                   \
  } while (0)
#define CPU_CG_UPDATE_LOOP(T, X, D)                                                             \
  do {                                                                                          \
    double rs[4] = {0, 0, 0, 0}, zs[4] = {0, 0, 0, 0};                                          \
    size_t i = lo;                                                                              \
    for (; i + 4 <= hi; i += 4)                                                                 \
      for (int k = 0; k < 4; k++) CPU_CG_UPDATE_ONE(T, X, D, i + (size_t)k, k);                 \
    for (; i < hi; i++) CPU_CG_UPDATE_ONE(T, X, D, i, 0);                                       \
    rr = (rs[0] + rs[1]) + (rs[2] + rs[3]);                                                     \
    rz = (zs[0] + zs[1]) + (zs[2] + zs[3]);                                                     \
  } while (0);

/* cpu_cg_update_<S>, cpu_cg_direction_<S> and cpu_cg_pq_<S> for the real type T: see
 * backend.h. The update cuts the vector into nb ranges; part[b] gets range b's (r, r) and
 * part[nb + b] its (r, r ./ d). Without x it leaves x and p alone (CG with its scalars in a
 * state moves x in the direction's pass, which reads p anyway); the direction with x first
 * moves x <- x + alpha p with the old p. The pq's part[b] is range b's (p, q). */
#define CPU_CG_FUNCTIONS(T, S)                                                                  \
  static void cpu_cg_update_##S(T *x, T *r, const T *p, const T *q, const T *d, double alpha,   \
                                size_t n, int nb, double *part)                                 \
  {                                                                                             \
    const T a = (T)alpha;                                                                       \
    _Pragma("omp parallel for if (nb > 1) schedule(static)")                                    \
    for (int b = 0; b < nb; b++) {                                                              \
      const size_t lo = n * (size_t)b / (size_t)nb, hi = n * (size_t)(b + 1) / (size_t)nb;      \
      double rr, rz;                                                                            \
      if (x && d) CPU_CG_UPDATE_LOOP(T, 1, 1)                                                   \
      else if (x) CPU_CG_UPDATE_LOOP(T, 1, 0)                                                   \
      else if (d) CPU_CG_UPDATE_LOOP(T, 0, 1)                                                   \
      else CPU_CG_UPDATE_LOOP(T, 0, 0)                                                          \
      part[b] = rr;                                                                             \
      part[nb + b] = d ? rz : rr; /* z = r */                                                   \
    }                                                                                           \
  }                                                                                             \
  static void cpu_cg_direction_##S(T *p, const T *r, const T *d, double beta, T *x,             \
                                   double alpha, size_t n)                                      \
  {                                                                                             \
    const T bt = (T)beta, a = (T)alpha;                                                         \
    if (x && d) CPU_VECTOR_LOOP(T, { x[i] = x[i] + a * p[i]; p[i] = r[i] / d[i] + bt * p[i]; }); \
    else if (x) CPU_VECTOR_LOOP(T, { x[i] = x[i] + a * p[i]; p[i] = r[i] + bt * p[i]; });       \
    else if (d && beta == 0.0) CPU_VECTOR_LOOP(T, p[i] = r[i] / d[i]);                          \
    else if (d) CPU_VECTOR_LOOP(T, p[i] = r[i] / d[i] + bt * p[i]);                             \
    else if (beta == 0.0) CPU_VECTOR_LOOP(T, p[i] = r[i]);                                      \
    else CPU_VECTOR_LOOP(T, p[i] = r[i] + bt * p[i]);                                           \
  }                                                                                             \
  static void cpu_cg_pq_##S(const T *p, const T *q, size_t n, int nb, double *part)             \
  {                                                                                             \
    _Pragma("omp parallel for if (nb > 1) schedule(static)")                                    \
    for (int b = 0; b < nb; b++) {                                                              \
      const size_t lo = n * (size_t)b / (size_t)nb, hi = n * (size_t)(b + 1) / (size_t)nb;      \
      CPU_SUM4(lo, hi, CPU_PQ_TERM, part[b]);                                                   \
    }                                                                                           \
  }

#define CPU_PQ_TERM(i) ((double)p[i] * q[i])
CPU_CG_FUNCTIONS(double, d)
CPU_CG_FUNCTIONS(float, f)

/* The update on the buffers (x NULL: x and p left alone); *rr, *rz the ranges' sums in order */
static void cpu_cg_update_any(fe_buffer *x, fe_buffer *r, const fe_buffer *p, const fe_buffer *q,
                              const fe_buffer *d, double alpha, size_t n, fe_precision prec,
                              double *rr, double *rz)
{
  double part[2 * CPU_SUM_BLOCKS];
  const int nb = cpu_sum_blocks(n);
  void *xv = x ? x->ptr : NULL;
  const void *dv = d ? d->ptr : NULL;
  if (prec == FE_DOUBLE) cpu_cg_update_d(xv, r->ptr, p->ptr, q->ptr, dv, alpha, n, nb, part);
  else cpu_cg_update_f(xv, r->ptr, p->ptr, q->ptr, dv, alpha, n, nb, part);
  double srr = 0, srz = 0;
  for (int b = 0; b < nb; b++) {
    srr += part[b];
    srz += part[nb + b];
  }
  *rr = srr;
  *rz = srz;
}

/* The direction on the buffers (x NULL: x not moved) */
static void cpu_cg_direction_any(fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                                 double beta, fe_buffer *x, double alpha, size_t n,
                                 fe_precision prec)
{
  const void *dv = d ? d->ptr : NULL;
  void *xv = x ? x->ptr : NULL;
  if (prec == FE_DOUBLE) cpu_cg_direction_d(p->ptr, r->ptr, dv, beta, xv, alpha, n);
  else cpu_cg_direction_f(p->ptr, r->ptr, dv, beta, xv, alpha, n);
}

/* x <- x + alpha p, r <- r - alpha q; (r, r) and (r, r ./ d) in double, in one pass */
int cpu_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                  const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                  fe_precision prec, double *rr, double *rz)
{
  (void)impl;
  cpu_cg_update_any(x, r, p, q, d, alpha, n, prec, rr, rz);
  return 0;
}

/* p <- r ./ d + beta p, or r + beta p without d (p is not read when beta = 0) */
int cpu_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                     double beta, size_t n, fe_precision prec)
{
  (void)impl;
  cpu_cg_direction_any(p, r, d, beta, NULL, 0.0, n, prec);
  return 0;
}

/* ---- CG with its scalars in a state (backend.h's cg_begin ... cg_end, cg_parts) ----
 * The cpu does each call's work before it returns, so the state holds plain doubles: the
 * last step's (r, z), and for the steps of each parity k = it & 1 their (p, q) from cg_pq,
 * whether the apply added it into the parts instead, and the three cg_wait returns. A step's
 * two passes: the update (r, q, d read, r written, its sums) and the direction, which moves x
 * with the old p it reads anyway: 10 words a dof with Jacobi, against 11 with x in the update.
 * The apply's (p, q) parts: slot k of FE_PQ_PARTS x FE_PQ_STRIDE doubles, where kernel thread
 * t adds its groups' sum into its own 64-byte line, CPU_PQ_LINE t (the dialect's FE_PQ_SUM,
 * cpu-program.c): one writer a line and the lines added in order, so (p, q) is the same bits
 * at every run with the same threads. */
typedef struct cpu_cg {
  double rz;             /* (r, z) of the last step (of the start before step 1) */
  double pq[2];          /* step k's (p, q) from cg_pq */
  int from_parts[2];     /* step k's (p, q) is in its parts (cg_parts), not from cg_pq */
  double out[2][3];      /* step k's (p, q), (r, r), (r, z), for cg_wait */
  int done[2];           /* the step whose scalars out[k] holds (0: none) */
  double *parts;         /* 2 slots of FE_PQ_PARTS x FE_PQ_STRIDE doubles, zero but while an
                          * apply's sums wait for their step */
} cpu_cg;

void cpu_cg_end(void *impl, void *state)
{
  (void)impl;
  cpu_cg *g = state;
  if (!g) return;
  free(g->parts);
  free(g);
}

int cpu_cg_begin(void *impl, double rz, void **state)
{
  (void)impl;
  *state = NULL;
  cpu_cg *g = calloc(1, sizeof *g);
  const size_t bytes = 2 * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
  if (g && posix_memalign((void **)&g->parts, 64, bytes)) g->parts = NULL;
  if (!g || !g->parts) {
    cpu_cg_end(impl, g);
    FE_ERROR(FE_ERR_MEM, "out of host memory for CG's scalars");
  }
  memset(g->parts, 0, bytes);
  g->rz = rz;
  *state = g;
  return 0;
}

/* (p, q) of step it, its ranges added in order */
int cpu_cg_pq(void *impl, void *state, const fe_buffer *p, const fe_buffer *q, size_t n,
              fe_precision prec, int it)
{
  (void)impl;
  cpu_cg *g = state;
  double part[CPU_SUM_BLOCKS], s = 0;
  const int nb = cpu_sum_blocks(n), k = it & 1;
  if (prec == FE_DOUBLE) cpu_cg_pq_d(p->ptr, q->ptr, n, nb, part);
  else cpu_cg_pq_f(p->ptr, q->ptr, n, nb, part);
  for (int b = 0; b < nb; b++) s += part[b];
  g->pq[k] = s;
  g->from_parts[k] = 0; /* this pass gives the step's (p, q) */
  return 0;
}

/* Step it's (p, q) from its parts, the threads' lines added in order and zeroed again */
static double cpu_cg_parts_sum(cpu_cg *g, int k)
{
  double *s = g->parts + (size_t)k * FE_PQ_PARTS * FE_PQ_STRIDE, pq = 0;
  for (int t = 0; t < CPU_PQ_THREADS; t++) {
    pq += s[t * CPU_PQ_LINE];
    s[t * CPU_PQ_LINE] = 0;
  }
  return pq;
}

/* Step it: alpha = rz / (p, q), the update, beta = new rz / old rz, the direction moving x;
 * half 1 (or 3) the update alone, half 2 the direction alone (its sums as cg_split put them) */
int cpu_cg_step(void *impl, void *state, fe_buffer *x, fe_buffer *r, fe_buffer *p,
                const fe_buffer *q, const fe_buffer *d, size_t n, fe_precision prec, int it,
                int half)
{
  (void)impl;
  cpu_cg *g = state;
  const int k = it & 1;
  if (half != 2) {
    const double pq = g->from_parts[k] ? cpu_cg_parts_sum(g, k) : g->pq[k];
    g->from_parts[k] = 0;
    double rr, rz;
    cpu_cg_update_any(NULL, r, p, q, d, g->rz / pq, n, prec, &rr, &rz); /* r <- r - alpha q */
    g->out[k][0] = pq;
    g->out[k][1] = rr;
    g->out[k][2] = rz;
    g->done[k] = it;
  }
  if (half == 1 || half == 3) return 0;
  const double alpha = g->rz / g->out[k][0], rz = g->out[k][2];
  cpu_cg_direction_any(p, r, d, rz / g->rz, x, alpha, n, prec); /* x += alpha p, p = z + beta p */
  g->rz = rz;
  return 0;
}

/* A split space's step it: its (p, q) read or set, its (r, r) and (r, z) set (backend.h) */
int cpu_cg_split(void *impl, void *state, int it, int what, double *v, const fe_node_sum *ns)
{
  (void)impl, (void)ns;
  cpu_cg *g = state;
  const int k = it & 1;
  FE_ASSERT(what <= FE_CG_SUMS_PUT, FE_ERR_INTERNAL, "the cpu makes no sums over a node (%d)", what);
  if (what == FE_CG_PQ_READ) {
    if (g->from_parts[k]) g->pq[k] = cpu_cg_parts_sum(g, k);
    g->from_parts[k] = 0;
    v[0] = g->pq[k];
  } else if (what == FE_CG_PQ_PUT) {
    g->pq[k] = v[0];
    g->from_parts[k] = 0;
  } else {
    FE_ASSERT(g->done[k] == it, FE_ERR_INTERNAL, "cg_split: step %d was not updated", it);
    g->out[k][1] = v[0];
    g->out[k][2] = v[1];
  }
  return 0;
}

/* Step it's parts for the apply: zero (at the start, and after the step that summed them) */
int cpu_cg_parts(void *impl, void *state, int it, fe_buffer *parts, int *slot)
{
  (void)impl;
  cpu_cg *g = state;
  if (omp_get_max_threads() > CPU_PQ_THREADS) return 0; /* more threads than lines: the pass */
  const int k = it & 1;
  parts->ptr = g->parts;
  parts->bytes = 2 * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
  *slot = k;
  g->from_parts[k] = 1;
  return 0;
}

/* Step it's scalars: done when cg_step returned */
int cpu_cg_wait(void *impl, void *state, int it, double *pq, double *rr, double *rz)
{
  (void)impl;
  cpu_cg *g = state;
  const int k = it & 1;
  FE_ASSERT(g->done[k] == it, FE_ERR_INTERNAL, "cg_wait: step %d was not run (%d was)", it,
            g->done[k]);
  *pq = g->out[k][0];
  *rr = g->out[k][1];
  *rz = g->out[k][2];
  return 0;
}
