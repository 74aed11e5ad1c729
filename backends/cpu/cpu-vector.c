/* felab cpu backend: vector work on host memory, plain OpenMP loops (threads from 32768
 * values on), reductions accumulated in double; the fused CG steps, whose sums are the same
 * bits whatever the number of threads. */
#include <math.h>
#include <stddef.h>

#include "backends/cpu/cpu-backend.h"

/* Vector work: plain OpenMP loops, reductions in double. */
#define CPU_VECTOR_LOOP(T, body)                                           \
  do {                                                                     \
    _Pragma("omp parallel for if (n > 32768) schedule(static)") for (size_t i = 0; i < n; i++) body; \
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

int cpu_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
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
int cpu_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
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
int cpu_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                     double beta, size_t n, fe_precision prec)
{
  (void)impl;
  if (prec == FE_DOUBLE) cpu_cg_direction_d(p->ptr, r->ptr, d ? d->ptr : NULL, beta, n);
  else cpu_cg_direction_f(p->ptr, r->ptr, d ? d->ptr : NULL, beta, n);
  return 0;
}
