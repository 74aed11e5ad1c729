/* felab opencl backend, private: the state of one open device, shared by the files of
 * backends/opencl/ and by nothing else (the engine sees only the table in backend.h).
 *   opencl-device.c   open, close, query, memory, errors, the enqueue-and-wait helper
 *   opencl-program.c  the dialect preamble, compile with its caches, kernels, launch
 *   opencl-vector.c   built-in kernels: fill, axpby, pointwise, dot, reduce, the fused CG steps
 *   opencl-backend.c  the table */
#ifndef FE_OPENCL_BACKEND_H
#define FE_OPENCL_BACKEND_H

#include <CL/cl.h>

#include "backends/backend.h"

/* One entry point of a module; owned by its module. */
/* The private bytes of a work group a CPU device (PoCL: a group's items on one thread's
 * stack) is given: 4 MB overflowed PoCL's, 1 MB ran (opencl_kernel). */
#define OPENCL_CPU_STACK ((size_t)512 << 10)

struct fe_kernel {
  cl_kernel handle;      /* made once per module and name */
  char *name;            /* for error messages */
  size_t max_group;      /* CL_KERNEL_WORK_GROUP_SIZE on this device */
  cl_uint nargs;         /* CL_KERNEL_NUM_ARGS */
  struct fe_kernel *next;
};

/* A compiled program handed to the engine: its own reference to a cached cl_program. */
struct fe_module {
  cl_program program;
  struct fe_kernel *kernels;     /* made on demand by kernel() */
  struct fe_module *prev, *next; /* live modules, so close can free what the engine left */
};

/* One built program in the session's compile cache, keyed by the source. */
typedef struct opencl_cached {
  unsigned long long hash; /* fe_hash_string(source, impl->seed) */
  char *source;            /* the full text, compared on a hash hit */
  cl_program program;      /* the cache's own reference */
  struct opencl_cached *next;
} opencl_cached;

/* The built-in vector kernels of one precision, built on first use. */
typedef struct opencl_vector {
  cl_program program;
  cl_kernel fill, axpby, pointwise, dot, reduce, cg_update, cg_direction;
} opencl_vector;

typedef struct opencl_impl {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue; /* in order, with profiling */
  fe_device_info info;
  char version[160];      /* platform version + driver version, part of the cache key */
  size_t max_alloc;       /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  size_t max_item;        /* CL_DEVICE_MAX_WORK_ITEM_SIZES[0] */
  size_t max_constant;    /* CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE (0: not known) */
  size_t constant_limit;  /* the bytes a program's tables may take: a GPU's max_constant,
                           * or FELAB_OPENCL_CONSTANT_LIMIT where smaller (SIZE_MAX: none) */
  int constant_env;       /* constant_limit is FELAB_OPENCL_CONSTANT_LIMIT's */
  int int64_atomics;      /* cl_khr_int64_base_atomics */
  char options[512];      /* clBuildProgram options */
  char *preamble[FE_NPRECISIONS]; /* the dialect, made at open for this device */
  unsigned long long seed; /* hash of device, driver and options: the cache key's prefix */
  int disk_cache;         /* keep program binaries under fe_cache_dir("opencl") */
  opencl_cached *cache;
  struct fe_module *modules;
  opencl_vector vector[FE_NPRECISIONS];
  cl_mem partials;        /* one partial result per work group of a reduction */
  size_t npartials;       /* capacity of partials, in doubles */
  double *host_partials;
} opencl_impl;

/* opencl-device.c */
int opencl_open(int device, void **impl);
void opencl_close(void *impl);
int opencl_query(void *impl, fe_device_info *info);
int opencl_alloc(void *impl, size_t bytes, fe_buffer *buf);
void opencl_release(void *impl, fe_buffer *buf);
int opencl_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host);
int opencl_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host);
int opencl_copy(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes);
int opencl_finish(void *impl);
const char *opencl_error_name(cl_int err);
/* Run a kernel whose arguments are set: global = ngroups * group items, wait for it and,
 * if seconds is not NULL, give its profiled time. name is for error messages. */
int opencl_enqueue(opencl_impl *cl, cl_kernel k, const char *name, size_t ngroups, size_t group,
                   double *seconds);

/* opencl-program.c */
int opencl_preamble_make(opencl_impl *cl); /* at open; close frees impl->preamble */
const char *opencl_preamble(void *impl, fe_precision prec);
int opencl_compile(void *impl, const char *source, fe_module **mod, double *seconds, int *cached);
void opencl_module_free(void *impl, fe_module *mod);
int opencl_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k);
int opencl_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res);
int opencl_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                  const fe_arg *args, fe_precision prec, double *seconds);
/* A built program for source (memory cache, then disk cache, then clBuildProgram); the
 * caller gets its own reference. */
int opencl_program_get(opencl_impl *cl, const char *source, cl_program *prog, int *cached);
void opencl_cache_free(opencl_impl *cl);

/* opencl-vector.c */
int opencl_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value);
int opencl_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
                 fe_precision prec);
int opencl_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                     size_t n, fe_precision prec);
int opencl_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
               double *result);
int opencl_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                  double *result);
int opencl_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                     const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                     fe_precision prec, double *rr, double *rz);
int opencl_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                        double beta, size_t n, fe_precision prec);
void opencl_vector_free(opencl_impl *cl);

#endif
