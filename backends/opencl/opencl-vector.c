/* felab opencl backend: vector operations with built-in kernels, one small program per
 * precision, built on first use (through the same caches as generated kernels).
 *
 * Every kernel runs a bounded number of work groups; each work item visits a slice of the
 * vector: every (global size)-th value on a GPU, so neighbouring items read neighbouring
 * values, and one contiguous chunk on a CPU device (PoCL), where that is 25x faster.
 * dot and reduce are two-stage: every work item accumulates its slice, each group
 * combines its items by a tree in local memory and writes one partial, and the host adds
 * (or takes the min/max of) the partials in double. The fused CG update is a reduction of
 * the same shape with two sums, (r, r) and (r, M^-1 r): two partials per group, read back
 * in one copy. Accumulation on the device is in double whenever the device has fp64, for
 * float vectors too, as backend.h promises ("reductions accumulate in double"); only a
 * device without fp64 accumulates floats in float. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl-backend.h"
#include "engine/core/error.h"

#define VECTOR_GROUP 256         /* work items per group, a power of two */
#define VECTOR_GROUPS_PER_CU 64  /* groups per compute unit for element-wise work */
#define REDUCE_GROUPS_PER_CU 16  /* groups per compute unit for reductions (= partials) */

static const char vector_source[] =
    "#if FE_DOUBLE || FE_ACC_DOUBLE\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#endif\n"
    "#if FE_DOUBLE\n"
    "typedef double real;\n"
    "#else\n"
    "typedef float real;\n"
    "#endif\n"
    "#if FE_ACC_DOUBLE\n"
    "typedef double acc;\n"
    "#else\n"
    "typedef float acc;\n"
    "#endif\n"
    "\n"
    "/* The slice of [0, n) this work item visits: lo, lo + step, ... < hi. GPUs stride by the\n"
    " * grid (neighbouring items read neighbouring values); CPUs take contiguous chunks,\n"
    " * since there one item's loop runs through its values alone. */\n"
    "static inline void fe_slice(const long n, long *lo, long *hi, long *step)\n"
    "{\n"
    "  const long g = (long)get_global_size(0), id = (long)get_global_id(0);\n"
    "#if FE_CONTIGUOUS\n"
    "  const long chunk = (n + g - 1) / g;\n"
    "  *lo = id * chunk;\n"
    "  *hi = min(*lo + chunk, n);\n"
    "  *step = 1;\n"
    "#else\n"
    "  *lo = id;\n"
    "  *hi = n;\n"
    "  *step = g;\n"
    "#endif\n"
    "}\n"
    "#define FE_SLICE(i, n) long lo_, hi_, step_;\\\n"
    "  fe_slice((n), &lo_, &hi_, &step_);\\\n"
    "  for (long i = lo_; i < hi_; i += step_)\n"
    "\n"
    "/* x <- v */\n"
    "__kernel void fe_vec_fill(__global real *x, const long n, const real v)\n"
    "{\n"
    "  FE_SLICE(i, n) x[i] = v;\n"
    "}\n"
    "\n"
    "/* y <- a x + b y; y is not read when b = 0 (BLAS convention) */\n"
    "__kernel void fe_vec_axpby(__global real *y, const real a, __global const real *x,\n"
    "                           const real b, const long n)\n"
    "{\n"
    "  if (b == (real)0) {\n"
    "    FE_SLICE(i, n) y[i] = a * x[i];\n"
    "  } else {\n"
    "    FE_SLICE(i, n) y[i] = a * x[i] + b * y[i];\n"
    "  }\n"
    "}\n"
    "\n"
    "/* z <- x .* y, or x ./ y */\n"
    "__kernel void fe_vec_pointwise(__global real *z, __global const real *x,\n"
    "                               __global const real *y, const int divide, const long n)\n"
    "{\n"
    "  if (divide) {\n"
    "    FE_SLICE(i, n) z[i] = x[i] / y[i];\n"
    "  } else {\n"
    "    FE_SLICE(i, n) z[i] = x[i] * y[i];\n"
    "  }\n"
    "}\n"
    "\n"
    "/* op 0: sum, 1: min, 2: max */\n"
    "static inline acc fe_combine(acc a, acc b, int op)\n"
    "{\n"
    "  return op == 0 ? a + b : op == 1 ? fmin(a, b) : fmax(a, b);\n"
    "}\n"
    "\n"
    "/* tree over the group's items in local memory; item 0 writes the group's partial */\n"
    "static inline void fe_group_reduce(__local acc *s, acc v, int op, __global acc *partial)\n"
    "{\n"
    "  const int t = (int)get_local_id(0);\n"
    "  s[t] = v;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int h = (int)get_local_size(0) / 2; h > 0; h /= 2) {\n"
    "    if (t < h) s[t] = fe_combine(s[t], s[t + h], op);\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (t == 0) partial[get_group_id(0)] = s[0];\n"
    "}\n"
    "\n"
    "/* partial[group] <- sum of x .* y over the group's slices */\n"
    "__kernel void fe_vec_dot(__global const real *x, __global const real *y, const long n,\n"
    "                         __global acc *partial, __local acc *s)\n"
    "{\n"
    "  acc sum = 0;\n"
    "  FE_SLICE(i, n) sum += (acc)x[i] * (acc)y[i];\n"
    "  fe_group_reduce(s, sum, 0, partial);\n"
    "}\n"
    "\n"
    "/* two sums at once: partial[group] <- sum of a, partial[groups + group] <- sum of b */\n"
    "static inline void fe_group_reduce2(__local acc *s, acc a, acc b, __global acc *partial)\n"
    "{\n"
    "  const int t = (int)get_local_id(0), m = (int)get_local_size(0);\n"
    "  s[t] = a;\n"
    "  s[m + t] = b;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int h = m / 2; h > 0; h /= 2) {\n"
    "    if (t < h) {\n"
    "      s[t] += s[t + h];\n"
    "      s[m + t] += s[m + t + h];\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (t == 0) {\n"
    "    partial[get_group_id(0)] = s[0];\n"
    "    partial[get_num_groups(0) + get_group_id(0)] = s[m];\n"
    "  }\n"
    "}\n"
    "\n"
    "/* partial[group] <- sum, min or max of x over the group's slices */\n"
    "__kernel void fe_vec_reduce(__global const real *x, const long n, const int op,\n"
    "                            __global acc *partial, __local acc *s)\n"
    "{\n"
    "  acc r = op == 0 ? (acc)0 : op == 1 ? (acc)INFINITY : (acc)-INFINITY;\n"
    "  FE_SLICE(i, n) r = fe_combine(r, (acc)x[i], op);\n"
    "  fe_group_reduce(s, r, op, partial);\n"
    "}\n"
    "\n"
    "/* CG's update in one pass: x <- x + alpha p, r <- r - alpha q, and with z = r ./ d\n"
    " * (z = r without precond), never stored, partial[group] <- (r, r) and\n"
    " * partial[groups + group] <- (r, z) over the group's slices of the new r */\n"
    "__kernel void fe_vec_cg_update(__global real *x, __global real *r, __global const real *p,\n"
    "                               __global const real *q, __global const real *d,\n"
    "                               const int precond, const real alpha, const long n,\n"
    "                               __global acc *partial, __local acc *s)\n"
    "{\n"
    "  acc rr = 0, rz = 0;\n"
    "  if (precond) {\n"
    "    FE_SLICE(i, n) {\n"
    "      const real ri = r[i] - alpha * q[i], zi = ri / d[i];\n"
    "      x[i] = x[i] + alpha * p[i];\n"
    "      r[i] = ri;\n"
    "      rr += (acc)ri * (acc)ri;\n"
    "      rz += (acc)ri * (acc)zi;\n"
    "    }\n"
    "  } else {\n"
    "    FE_SLICE(i, n) {\n"
    "      const real ri = r[i] - alpha * q[i];\n"
    "      x[i] = x[i] + alpha * p[i];\n"
    "      r[i] = ri;\n"
    "      rr += (acc)ri * (acc)ri;\n"
    "    }\n"
    "    rz = rr; /* z = r */\n"
    "  }\n"
    "  fe_group_reduce2(s, rr, rz, partial);\n"
    "}\n"
    "\n"
    "/* CG's new direction: p <- r ./ d + beta p, or r + beta p without precond; p is not read\n"
    " * when beta = 0 */\n"
    "__kernel void fe_vec_cg_direction(__global real *p, __global const real *r,\n"
    "                                  __global const real *d, const int precond,\n"
    "                                  const real beta, const long n)\n"
    "{\n"
    "  if (precond && beta == (real)0) {\n"
    "    FE_SLICE(i, n) p[i] = r[i] / d[i];\n"
    "  } else if (precond) {\n"
    "    FE_SLICE(i, n) p[i] = r[i] / d[i] + beta * p[i];\n"
    "  } else if (beta == (real)0) {\n"
    "    FE_SLICE(i, n) p[i] = r[i];\n"
    "  } else {\n"
    "    FE_SLICE(i, n) p[i] = r[i] + beta * p[i];\n"
    "  }\n"
    "}\n";

/* Make one built-in kernel of the vector program. */
static int opencl_vector_kernel(opencl_impl *cl, cl_program prog, const char *name, cl_kernel *k)
{
  cl_int err;
  *k = clCreateKernel(prog, name, &err);
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_INTERNAL, "built-in OpenCL kernel '%s' missing on %s: %s", name,
             cl->info.name, opencl_error_name(err));
  return 0;
}

/* Release one precision's vector program and kernels. */
static void opencl_vector_release(opencl_vector *v)
{
  cl_kernel ks[] = {v->fill,   v->axpby,     v->pointwise,   v->dot,
                    v->reduce, v->cg_update, v->cg_direction};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (v->program) clReleaseProgram(v->program);
  memset(v, 0, sizeof *v);
}

/* Release the vector programs (at close). */
void opencl_vector_free(opencl_impl *cl)
{
  for (int p = 0; p < FE_NPRECISIONS; p++) opencl_vector_release(&cl->vector[p]);
}

/* The vector program of one precision, built on first use. */
static int opencl_vector_get(opencl_impl *cl, fe_precision prec, opencl_vector **out)
{
  opencl_vector *v = &cl->vector[prec];
  *out = v;
  if (v->program) return 0; /* built, with every kernel (a failure releases it) */
  FE_ASSERT(prec == FE_FLOAT || cl->info.fp64, FE_ERR_UNAVAILABLE,
            "%s has no double precision (no cl_khr_fp64): use precision = \"single\"",
            cl->info.name);
  char head[128];
  snprintf(head, sizeof head,
           "#define FE_DOUBLE %d\n#define FE_ACC_DOUBLE %d\n#define FE_CONTIGUOUS %d\n",
           prec == FE_DOUBLE, cl->info.fp64, !cl->info.is_gpu);
  size_t n = strlen(head) + sizeof vector_source;
  char *source = malloc(n);
  if (!source) FE_ERROR(FE_ERR_MEM, "out of host memory building the OpenCL vector kernels");
  snprintf(source, n, "%s%s", head, vector_source);
  int cached, rc = opencl_program_get(cl, source, &v->program, &cached);
  free(source);
  FE_CHECK(rc);
  if (opencl_vector_kernel(cl, v->program, "fe_vec_fill", &v->fill) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_axpby", &v->axpby) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_pointwise", &v->pointwise) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_dot", &v->dot) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_reduce", &v->reduce) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_cg_update", &v->cg_update) ||
      opencl_vector_kernel(cl, v->program, "fe_vec_cg_direction", &v->cg_direction)) {
    opencl_vector_release(v);
    return fe_error_push(FE_ERR_INTERNAL, __FILE__, __LINE__, __func__);
  }
  return 0;
}

/* Work-group size for a built-in kernel: VECTOR_GROUP or the largest power of two below
 * what the kernel allows here. */
static size_t opencl_vector_group(opencl_impl *cl, cl_kernel k)
{
  size_t max = cl->info.max_group, g = 1;
  clGetKernelWorkGroupInfo(k, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof max, &max, NULL);
  if (max > cl->max_item) max = cl->max_item;
  while (g * 2 <= max && g * 2 <= VECTOR_GROUP) g *= 2;
  return g;
}

/* How many groups of `group` items cover n, at most per_cu per compute unit. */
static size_t opencl_vector_ngroups(opencl_impl *cl, size_t n, size_t group, size_t per_cu)
{
  size_t cap = (cl->info.compute_units > 0 ? (size_t)cl->info.compute_units : 1) * per_cu;
  size_t ng = (n + group - 1) / group;
  return ng < cap ? ng : cap;
}

/* Set a real argument in the precision of the vectors. */
static cl_int opencl_real_arg(cl_kernel k, cl_uint i, double v, fe_precision prec)
{
  if (prec == FE_FLOAT) {
    cl_float f = (cl_float)v;
    return clSetKernelArg(k, i, sizeof f, &f);
  }
  cl_double d = v;
  return clSetKernelArg(k, i, sizeof d, &d);
}

/* clSetKernelArg after an earlier success; the first failure is kept. */
static cl_int opencl_arg(cl_int err, cl_kernel k, cl_uint i, size_t size, const void *value)
{
  return err != CL_SUCCESS ? err : clSetKernelArg(k, i, size, value);
}

/* Say which built-in kernel could not take its arguments. */
static int opencl_arg_error(opencl_impl *cl, const char *name, cl_int err)
{
  FE_ERROR(FE_ERR_BACKEND, "setting the arguments of built-in OpenCL kernel '%s' on %s: %s",
           name, cl->info.name, opencl_error_name(err));
}

/* x <- value */
int opencl_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  FE_CHECK(fe_vectors_check("fill", "x", FE_VECTORS(x), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mx = (cl_mem)x->ptr;
  cl_long nn = (cl_long)n;
  cl_int err = opencl_arg(CL_SUCCESS, v->fill, 0, sizeof mx, &mx);
  err = opencl_arg(err, v->fill, 1, sizeof nn, &nn);
  if (!err) err = opencl_real_arg(v->fill, 2, value, prec);
  if (err) return opencl_arg_error(cl, "fe_vec_fill", err);
  size_t group = opencl_vector_group(cl, v->fill);
  FE_CHECK(opencl_enqueue(cl, v->fill, "fe_vec_fill",
                          opencl_vector_ngroups(cl, n, group, VECTOR_GROUPS_PER_CU), group, NULL));
  return 0;
}

/* y <- a x + b y (y is not read when b = 0) */
int opencl_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
                 fe_precision prec)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  FE_CHECK(fe_vectors_check("axpby", "yx", FE_VECTORS(y, x), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem my = (cl_mem)y->ptr, mx = (cl_mem)x->ptr;
  cl_long nn = (cl_long)n;
  cl_int err = opencl_arg(CL_SUCCESS, v->axpby, 0, sizeof my, &my);
  if (!err) err = opencl_real_arg(v->axpby, 1, a, prec);
  err = opencl_arg(err, v->axpby, 2, sizeof mx, &mx);
  if (!err) err = opencl_real_arg(v->axpby, 3, b, prec);
  err = opencl_arg(err, v->axpby, 4, sizeof nn, &nn);
  if (err) return opencl_arg_error(cl, "fe_vec_axpby", err);
  size_t group = opencl_vector_group(cl, v->axpby);
  FE_CHECK(opencl_enqueue(cl, v->axpby, "fe_vec_axpby",
                          opencl_vector_ngroups(cl, n, group, VECTOR_GROUPS_PER_CU), group, NULL));
  return 0;
}

/* z <- x .* y, or x ./ y */
int opencl_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                     size_t n, fe_precision prec)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  FE_CHECK(fe_vectors_check("pointwise", "zxy", FE_VECTORS(z, x, y), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mz = (cl_mem)z->ptr, mx = (cl_mem)x->ptr, my = (cl_mem)y->ptr;
  cl_long nn = (cl_long)n;
  cl_int div = divide ? 1 : 0;
  cl_int err = opencl_arg(CL_SUCCESS, v->pointwise, 0, sizeof mz, &mz);
  err = opencl_arg(err, v->pointwise, 1, sizeof mx, &mx);
  err = opencl_arg(err, v->pointwise, 2, sizeof my, &my);
  err = opencl_arg(err, v->pointwise, 3, sizeof div, &div);
  err = opencl_arg(err, v->pointwise, 4, sizeof nn, &nn);
  if (err) return opencl_arg_error(cl, "fe_vec_pointwise", err);
  size_t group = opencl_vector_group(cl, v->pointwise);
  FE_CHECK(opencl_enqueue(cl, v->pointwise, "fe_vec_pointwise",
                          opencl_vector_ngroups(cl, n, group, VECTOR_GROUPS_PER_CU), group, NULL));
  return 0;
}

/* The scratch of one partial per group: device buffer and host copy, made on first use. */
static int opencl_partials(opencl_impl *cl)
{
  if (cl->partials) return 0;
  size_t cu = cl->info.compute_units > 0 ? (size_t)cl->info.compute_units : 1;
  size_t n = cu * REDUCE_GROUPS_PER_CU;
  cl_int err;
  cl->host_partials = malloc(n * sizeof(double));
  if (!cl->host_partials) FE_ERROR(FE_ERR_MEM, "out of host memory for reduction partials");
  cl->partials = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, n * sizeof(double), NULL, &err);
  if (err != CL_SUCCESS) {
    cl->partials = NULL;
    FE_ERROR(FE_ERR_MEM, "cannot allocate %zu reduction partials on %s: %s", n, cl->info.name,
             opencl_error_name(err));
  }
  cl->npartials = n;
  return 0;
}

/* Run a reduction kernel whose first arguments are set (partials and scratch are set
 * here, at ipartial and ipartial + 1), then combine the partials on the host in double.
 * The kernel makes nsums results (1, or 2 sums), writing result k of group g at partial
 * k * groups + g; result[k] gets it. */
static int opencl_reduce_run(opencl_impl *cl, cl_kernel k, const char *name, cl_uint ipartial,
                             size_t n, int op, int nsums, double *result)
{
  FE_CHECK(opencl_partials(cl));
  size_t group = opencl_vector_group(cl, k);
  size_t ngroups = opencl_vector_ngroups(cl, n, group, REDUCE_GROUPS_PER_CU);
  if (ngroups * (size_t)nsums > cl->npartials) ngroups = cl->npartials / (size_t)nsums;
  size_t accsize = cl->info.fp64 ? sizeof(cl_double) : sizeof(cl_float);
  cl_int err = opencl_arg(CL_SUCCESS, k, ipartial, sizeof cl->partials, &cl->partials);
  err = opencl_arg(err, k, ipartial + 1, (size_t)nsums * group * accsize, NULL);
  if (err) return opencl_arg_error(cl, name, err);
  FE_CHECK(opencl_enqueue(cl, k, name, ngroups, group, NULL));
  err = clEnqueueReadBuffer(cl->queue, cl->partials, CL_TRUE, 0, (size_t)nsums * ngroups * accsize,
                            cl->host_partials, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_BACKEND, "reading the partials of '%s' from %s failed: %s", name,
             cl->info.name, opencl_error_name(err));
  const float *pf = (const float *)cl->host_partials;
  for (int s = 0; s < nsums; s++) {
    double r = op == FE_REDUCE_SUM ? 0.0 : op == FE_REDUCE_MIN ? INFINITY : -INFINITY;
    for (size_t i = (size_t)s * ngroups; i < (size_t)(s + 1) * ngroups; i++) {
      double p = cl->info.fp64 ? cl->host_partials[i] : (double)pf[i];
      r = op == FE_REDUCE_SUM ? r + p : op == FE_REDUCE_MIN ? fmin(r, p) : fmax(r, p);
    }
    result[s] = r;
  }
  return 0;
}

/* x . y, accumulated in double where the device has it, 0 for n = 0 */
int opencl_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
               double *result)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  *result = 0.0;
  FE_CHECK(fe_vectors_check("dot", "xy", FE_VECTORS(x, y), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mx = (cl_mem)x->ptr, my = (cl_mem)y->ptr;
  cl_long nn = (cl_long)n;
  cl_int err = opencl_arg(CL_SUCCESS, v->dot, 0, sizeof mx, &mx);
  err = opencl_arg(err, v->dot, 1, sizeof my, &my);
  err = opencl_arg(err, v->dot, 2, sizeof nn, &nn);
  if (err) return opencl_arg_error(cl, "fe_vec_dot", err);
  FE_CHECK(opencl_reduce_run(cl, v->dot, "fe_vec_dot", 3, n, FE_REDUCE_SUM, 1, result));
  return 0;
}

/* sum, min or max of x; for n = 0: 0, +inf, -inf */
int opencl_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                  double *result)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  FE_ASSERT(op == FE_REDUCE_SUM || op == FE_REDUCE_MIN || op == FE_REDUCE_MAX, FE_ERR_ARG,
            "unknown reduction %d", (int)op);
  *result = op == FE_REDUCE_SUM ? 0.0 : op == FE_REDUCE_MIN ? INFINITY : -INFINITY;
  FE_CHECK(fe_vectors_check("reduce", "x", FE_VECTORS(x), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mx = (cl_mem)x->ptr;
  cl_long nn = (cl_long)n;
  cl_int kop = op == FE_REDUCE_SUM ? 0 : op == FE_REDUCE_MIN ? 1 : 2;
  cl_int err = opencl_arg(CL_SUCCESS, v->reduce, 0, sizeof mx, &mx);
  err = opencl_arg(err, v->reduce, 1, sizeof nn, &nn);
  err = opencl_arg(err, v->reduce, 2, sizeof kop, &kop);
  if (err) return opencl_arg_error(cl, "fe_vec_reduce", err);
  FE_CHECK(opencl_reduce_run(cl, v->reduce, "fe_vec_reduce", 3, n, op, 1, result));
  return 0;
}

/* x <- x + alpha p, r <- r - alpha q; (r, r) and (r, r ./ d) of the new r (d NULL: both
 * (r, r)), accumulated in double where the device has it, in one pass; 0 for n = 0 */
int opencl_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                     const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                     fe_precision prec, double *rr, double *rz)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  *rr = *rz = 0.0;
  FE_CHECK(fe_vectors_check("cg_update", "xrpq", FE_VECTORS(x, r, p, q), n, prec));
  if (d) FE_CHECK(fe_vectors_check("cg_update", "d", FE_VECTORS(d), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mx = (cl_mem)x->ptr, mr = (cl_mem)r->ptr, mp = (cl_mem)p->ptr, mq = (cl_mem)q->ptr;
  cl_mem md = d ? (cl_mem)d->ptr : mr; /* not read without precond */
  cl_int precond = d != NULL;
  cl_long nn = (cl_long)n;
  cl_int err = opencl_arg(CL_SUCCESS, v->cg_update, 0, sizeof mx, &mx);
  err = opencl_arg(err, v->cg_update, 1, sizeof mr, &mr);
  err = opencl_arg(err, v->cg_update, 2, sizeof mp, &mp);
  err = opencl_arg(err, v->cg_update, 3, sizeof mq, &mq);
  err = opencl_arg(err, v->cg_update, 4, sizeof md, &md);
  err = opencl_arg(err, v->cg_update, 5, sizeof precond, &precond);
  if (!err) err = opencl_real_arg(v->cg_update, 6, alpha, prec);
  err = opencl_arg(err, v->cg_update, 7, sizeof nn, &nn);
  if (err) return opencl_arg_error(cl, "fe_vec_cg_update", err);
  double sums[2];
  FE_CHECK(opencl_reduce_run(cl, v->cg_update, "fe_vec_cg_update", 8, n, FE_REDUCE_SUM, 2, sums));
  *rr = sums[0];
  *rz = sums[1];
  return 0;
}

/* p <- r ./ d + beta p, or r + beta p when d is NULL (p is not read when beta = 0) */
int opencl_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                        double beta, size_t n, fe_precision prec)
{
  opencl_impl *cl = impl;
  opencl_vector *v;
  FE_CHECK(fe_vectors_check("cg_direction", "pr", FE_VECTORS(p, r), n, prec));
  if (d) FE_CHECK(fe_vectors_check("cg_direction", "d", FE_VECTORS(d), n, prec));
  if (!n) return 0;
  FE_CHECK(opencl_vector_get(cl, prec, &v));
  cl_mem mp = (cl_mem)p->ptr, mr = (cl_mem)r->ptr;
  cl_mem md = d ? (cl_mem)d->ptr : mr; /* not read without precond */
  cl_int precond = d != NULL;
  cl_long nn = (cl_long)n;
  cl_int err = opencl_arg(CL_SUCCESS, v->cg_direction, 0, sizeof mp, &mp);
  err = opencl_arg(err, v->cg_direction, 1, sizeof mr, &mr);
  err = opencl_arg(err, v->cg_direction, 2, sizeof md, &md);
  err = opencl_arg(err, v->cg_direction, 3, sizeof precond, &precond);
  if (!err) err = opencl_real_arg(v->cg_direction, 4, beta, prec);
  err = opencl_arg(err, v->cg_direction, 5, sizeof nn, &nn);
  if (err) return opencl_arg_error(cl, "fe_vec_cg_direction", err);
  size_t group = opencl_vector_group(cl, v->cg_direction);
  FE_CHECK(opencl_enqueue(cl, v->cg_direction, "fe_vec_cg_direction",
                          opencl_vector_ngroups(cl, n, group, VECTOR_GROUPS_PER_CU), group, NULL));
  return 0;
}
