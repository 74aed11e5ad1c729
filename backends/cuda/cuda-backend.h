/* felab cuda backend, private: the few CUDA driver-API and NVRTC declarations felab uses,
 * and the state of one open device, shared by the files of backends/cuda/ and by nothing
 * else (the engine sees only the table in backend.h).
 *
 * felab never links against CUDA and never includes its headers: libcuda.so.1 (the driver)
 * and libnvrtc (the run-time compiler) are opened with dlopen when the backend is first
 * used, and every entry point is looked up by name into cuda_api. The types below are the
 * ABI of those C functions (handles are opaque pointers, CUdeviceptr is 64 bits); the
 * numbered constants are the ones of cuda.h and nvrtc.h, which are stable across versions.
 *
 *   cuda-loader.c    dlopen/dlsym of the libraries (cuSPARSE on first use), error names
 *   cuda-device.c    open, close, query, memory, timing events, finish
 *   cuda-program.c   the dialect preamble, NVRTC compile with its caches, kernels, launch
 *   cuda-vector.c    built-in kernels: fill, axpby, pointwise, dot, reduce, the fused CG steps
 *   cuda-sparse.c    cuSPARSE's product on felab's CSR arrays (format "cusparse")
 *   cuda-backend.c   the table */
#ifndef FE_CUDA_BACKEND_H
#define FE_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* A macro's value as text, for the kernels' sources (FE_PQ_PARTS in the dialect and the
 * vector module) */
#define FE_STR(x) #x
#define FE_XSTR(x) FE_STR(x)

/* ---- driver API (cuda.h) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef struct CUipcMemHandle {
  char reserved[64];
} CUipcMemHandle; /* a device allocation, named for another process */
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 1

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
};

enum { /* CUdevice_attribute */
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
};

enum { /* CUfunction_attribute */
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum { CU_EVENT_DISABLE_TIMING = 2 }; /* CUevent_flags */

/* cuLaunchKernelEx's launch and its attributes (CUDA 12 on), laid out as cuda.h lays them: an
 * attribute is its id, padded to 8 bytes, and a 64-byte union of values */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  union {
    char bytes[64];
    int programmatic_serialization; /* the attribute above: nonzero lets the launch follow */
  } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig {
  unsigned grid[3], block[3], shared;
  CUstream stream;
  CUlaunchAttribute *attrs;
  unsigned nattrs;
} CUlaunchConfig;

enum { /* CUjit_option, for loading PTX */
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/* ---- NVRTC (nvrtc.h) ---- */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
};

/* Every entry point felab calls, looked up by cuda_api_load. Names are CUDA's own (the
 * versioned symbol, e.g. cuMemAlloc_v2, is what the library exports for cuMemAlloc). */
typedef struct cuda_api {
  void *libcuda, *libnvrtc, *libcusparse;
  char nvrtc_path[512]; /* which NVRTC was opened, for messages */
  char cusparse_path[512]; /* which cuSPARSE (opened on first use of format "cusparse") */
  /* driver */
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
  CUresult (*cuMemAllocHost)(void **host, size_t bytes);
  CUresult (*cuMemFreeHost)(void *host);
  CUresult (*cuModuleLoadDataEx)(CUmodule *mod, const void *image, unsigned nopts, int *opts,
                                 void **values);
  CUresult (*cuModuleUnload)(CUmodule mod);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, int attribute, CUfunction fn);
  CUresult (*cuFuncSetAttribute)(CUfunction fn, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream stream,
                             void **params, void **extra);
  CUresult (*cuEventCreate)(CUevent *ev, unsigned flags);
  CUresult (*cuEventRecord)(CUevent ev, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent ev);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy)(CUevent ev);
  /* optional: the side queue (cuda_side) */
  CUresult (*cuStreamCreateWithPriority)(CUstream *stream, unsigned flags, int priority);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent ev, unsigned flags);
  CUresult (*cuCtxGetStreamPriorityRange)(int *least, int *greatest);
  /* optional: a launch that follows the one before it (cuda_follow) */
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction fn, void **params,
                               void **extra);
  /* optional: a kernel's trial run in another process (cuda-trial.c) */
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *handle, CUdeviceptr ptr);
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *ptr, CUipcMemHandle handle, unsigned flags);
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr ptr);
  CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
  CUresult (*cuGetErrorName)(CUresult err, const char **name);
  CUresult (*cuGetErrorString)(CUresult err, const char **text);
  /* NVRTC */
  const char *(*nvrtcGetErrorString)(nvrtcResult err);
  nvrtcResult (*nvrtcVersion)(int *major, int *minor);
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int *n); /* optional (NVRTC >= 11.2) */
  nvrtcResult (*nvrtcGetSupportedArchs)(int *archs); /* optional */
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name,
                                    int nheaders, const char *const *headers,
                                    const char *const *include_names);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int nopts, const char *const *opts);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t *size);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char *ptx);
  /* cuSPARSE's generic API (cusparse.h; handles and descriptors are opaque pointers) */
  int (*cusparseCreate)(void **handle);
  int (*cusparseDestroy)(void *handle);
  const char *(*cusparseGetErrorString)(int status);
  int (*cusparseCreateCsr)(void **mat, int64_t rows, int64_t cols, int64_t nnz, void *rowptr,
                           void *colind, void *vals, int rowptr_type, int colind_type, int base,
                           int value_type);
  int (*cusparseDestroySpMat)(void *mat);
  int (*cusparseCreateDnVec)(void **vec, int64_t size, void *values, int value_type);
  int (*cusparseDnVecSetValues)(void *vec, void *values);
  int (*cusparseDestroyDnVec)(void *vec);
  int (*cusparseSpMV_bufferSize)(void *handle, int op, const void *alpha, void *mat, void *x,
                                 const void *beta, void *y, int compute_type, int alg,
                                 size_t *bytes);
  int (*cusparseSpMV)(void *handle, int op, const void *alpha, void *mat, void *x,
                      const void *beta, void *y, int compute_type, int alg, void *buffer);
} cuda_api;

enum { /* cuSPARSE's and CUDA's numbered constants (cusparse.h, library_types.h) */
  CUSPARSE_INDEX_32I = 2,
  CUSPARSE_INDEX_BASE_ZERO = 0,
  CUSPARSE_OPERATION_NON_TRANSPOSE = 0,
  CUSPARSE_SPMV_ALG_DEFAULT = 0,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
};

/* ---- the backend's own objects ---- */

#define CUDA_MAX_ARGS 32 /* parameters of one kernel */

/* A kernel's parameters as the source declares them: 'p' pointer, 'i' int, 'r' real. */
typedef struct cuda_signature {
  char name[64];
  int nparams;
  char kinds[CUDA_MAX_ARGS];
  struct cuda_signature *next;
} cuda_signature;

/* One entry point of a module; owned by its module. */
struct fe_kernel {
  CUfunction fn;
  char name[64];
  struct fe_module *mod;
  int trust;   /* a kernel with user C: 0 untried, 1 its trial run returned, -1 it faulted */
  char *fault; /* the trial's verdict, for every later launch (trust -1) */
  const cuda_signature *sig; /* from the module's source */
  int max_threads;           /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (registers bound it) */
  int registers;             /* per thread */
  unsigned shared;           /* bytes of dynamic shared memory per launch */
  struct fe_kernel *next;
};

/* A loaded module handed to the engine. */
struct fe_module {
  CUmodule handle;
  cuda_signature *sigs;          /* every FE_KERNEL of its source */
  struct fe_kernel *kernels;     /* made on demand by kernel() */
  void *trial_image;             /* a copy of the image when the source has user C (FE_USER_C) */
  size_t trial_size;
  struct fe_module *prev, *next; /* live modules, so close can free what the engine left */
};

/* A compiled image in the session's memory cache, keyed by the source. */
typedef struct cuda_cached {
  unsigned long long hash; /* fe_hash_string(source, impl->seed) */
  char *source;            /* the full text, compared on a hash hit */
  void *image;             /* cubin, or NUL-terminated PTX */
  size_t size;
  struct cuda_cached *next;
} cuda_cached;

/* The built-in vector kernels, one module for both precisions, loaded on first use. */
typedef struct cuda_vector {
  fe_module *module;
  CUfunction fill[FE_NPRECISIONS], axpby[FE_NPRECISIONS], pointwise[FE_NPRECISIONS];
  CUfunction dot[FE_NPRECISIONS], reduce[FE_NPRECISIONS];
  CUfunction cg_update[FE_NPRECISIONS], cg_direction[FE_NPRECISIONS];
  CUfunction cg_pq[FE_NPRECISIONS], cg_update_at[FE_NPRECISIONS];
  CUfunction cg_direction_at[FE_NPRECISIONS], cg_pq_parts[FE_NPRECISIONS];
  CUfunction cg_node_sum;
  CUdeviceptr scratch;  /* done-counter, two results, then two partials per block */
  int max_blocks;       /* partials in scratch */
} cuda_vector;

typedef struct cuda_impl {
  cuda_api api;
  CUdevice device;
  CUcontext context;     /* the device's primary context */
  CUevent start, stop;   /* kernel timing */
  CUstream cur;          /* where launches go: NULL (the legacy default stream) or side */
  CUstream side;         /* the side queue (cuda_side: made on first use, non-blocking, the
                          * highest priority, so its small launches pass the main queue's) */
  CUevent forked, joined; /* the main queue's point the side waits for, and the side's end */
  CUevent marks[FE_MARKS]; /* cuda_mark's points (made on first use) */
  int follow_next;       /* the next launch follows the one before it (cuda_follow) */
  fe_device_info info;
  int ordinal;           /* the device's index among the driver's (cuda_device_index) */
  int cc;                /* compute capability, major * 10 + minor */
  int driver_version;    /* e.g. 13000 */
  int nvrtc_major, nvrtc_minor;
  int registers;         /* 32-bit registers per block */
  int shared_optin;      /* opt-in shared memory per block, bytes */
  int max_grid;          /* blocks in x */
  char arch[32];         /* "-arch=sm_90" or "-arch=compute_90" */
  int ptx;               /* 1: arch is a virtual one, NVRTC makes PTX that the driver JITs */
  char options[512];     /* further NVRTC options (FELAB_CUDA_OPTIONS) */
  unsigned long long seed; /* hash of arch, options, NVRTC and driver versions: the cache key */
  int disk_cache;        /* keep images under fe_cache_dir("cuda") */
  int lost;              /* a kernel faulted: the context is unusable */
  char *preamble[FE_NPRECISIONS];
  cuda_cached *cache;
  struct fe_module *modules;
  cuda_vector vector;
  void *sparse;          /* the cuSPARSE handle, made on first use */
  /* large copies to the device go through two pinned buffers (made on first use): the host
   * fills one, several threads at a time, while the other's copy runs */
  void *stage[2];
  CUevent staged[2];
} cuda_impl;

/* cuda-loader.c */
/* Open libcuda.so.1 and NVRTC and look up every entry point; on failure an
 * FE_ERR_UNAVAILABLE error says which library or symbol is missing and why. */
int cuda_api_load(cuda_api *api);
void cuda_api_unload(cuda_api *api);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for messages. */
const char *cuda_error_text(const cuda_api *api, CUresult err, char *buf, size_t n);

/* Open cuSPARSE (FELAB_CUSPARSE, then libcusparse.so, .so.13, .so.12 on the loader's path
 * and in the toolkit folders) and look up its entry points; FE_ERR_UNAVAILABLE says why not. */
int cuda_api_load_cusparse(cuda_api *api);

/* cuda-sparse.c: a product by cuSPARSE on felab's CSR arrays, the reference for its own */
int cuda_sparse_make(void *impl, int n, long long nnz, const fe_buffer *rowptr,
                     const fe_buffer *cols, const fe_buffer *vals, fe_precision prec,
                     void **state);
int cuda_sparse_spmv(void *impl, void *state, const fe_buffer *x, fe_buffer *y,
                     double *seconds);
void cuda_sparse_free(void *impl, void *state);
void cuda_sparse_close(cuda_impl *cu);

/* cuda-device.c */
int cuda_open(int device, void **impl);
void cuda_close(void *impl);
int cuda_query(void *impl, fe_device_info *info);
int cuda_alloc(void *impl, size_t bytes, fe_buffer *buf);
void cuda_release(void *impl, fe_buffer *buf);
int cuda_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host);
int cuda_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host);
void *cuda_host_alloc(void *impl, size_t bytes);
void cuda_host_free(void *impl, void *host);
int cuda_copy_async(void *impl, fe_buffer *dst, size_t dst_offset, const fe_buffer *src,
                    size_t src_offset, size_t bytes);
int cuda_ipc_export(void *impl, const fe_buffer *buf, unsigned char handle[64]);
int cuda_ipc_import(void *impl, const unsigned char handle[64], size_t bytes, fe_buffer *peer);
void cuda_ipc_close(void *impl, fe_buffer *peer);
int cuda_copy(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes);
int cuda_finish(void *impl);
int cuda_mark(void *impl, int slot);
int cuda_mark_wait(void *impl, int slot);
int cuda_side(void *impl, int op);
int cuda_follow(void *impl);
/* An FE_ERR_BACKEND error for a failed driver call `what` (FE_ERR_MEM when out of memory);
 * an error from a kernel that faulted marks the context lost. */
int cuda_fail(cuda_impl *cu, CUresult err, const char *what);
/* Fails with a clear message once the context is lost. */
int cuda_usable(const cuda_impl *cu);
/* Launch fn on ngroups x group threads with kernel parameters params and wait for it;
 * if seconds is not NULL, time it with events. name is for messages. */
int cuda_run(cuda_impl *cu, CUfunction fn, const char *name, size_t ngroups, size_t group,
             unsigned shared, void **params, double *seconds);

/* cuda-program.c */
int cuda_preamble_make(cuda_impl *cu); /* at open; close frees cu->preamble */
const char *cuda_preamble(void *impl, fe_precision prec);
int cuda_compile(void *impl, const char *source, fe_module **mod, double *seconds, int *cached);
int cuda_precompile(void *impl, const char *const *sources, int n, double *seconds);
void cuda_module_free(void *impl, fe_module *mod);
int cuda_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k);
int cuda_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                const fe_arg *args, fe_precision prec, double *seconds);
int cuda_kernel_shared(void *impl, fe_kernel *k, size_t bytes);
int cuda_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res);
/* Choose the NVRTC target for the device (sets cu->arch, cu->ptx). */
int cuda_choose_arch(cuda_impl *cu);
void cuda_cache_free(cuda_impl *cu);
/* Compile source with NVRTC for cu->arch into an image (malloc'ed; PTX is NUL-terminated).
 * A failed compile is FE_ERR_COMPILE naming the generated line. Exposed for the tests. */
int cuda_nvrtc_compile(cuda_impl *cu, const char *source, void **image, size_t *size);

/* cuda-trial.c: whether kernel k may run here. The first launch of a kernel whose module
 * keeps a trial image (C typed by a user) runs first in `felab --cuda-trial`, on copies of
 * its buffers; a fault there is k's error, now and at every later launch. params as for
 * cuLaunchKernel, reals stored in precision prec. */
int cuda_kernel_vet(cuda_impl *cu, fe_kernel *k, unsigned grid, unsigned block, int nargs,
                    void *const *params, fe_precision prec);

/* cuda-vector.c */
int cuda_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value);
int cuda_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
               fe_precision prec);
int cuda_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                   size_t n, fe_precision prec);
int cuda_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
             double *result);
int cuda_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                double *result);
int cuda_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                   const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                   fe_precision prec, double *rr, double *rz);
int cuda_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                      double beta, size_t n, fe_precision prec);
int cuda_cg_begin(void *impl, double rz, void **state);
int cuda_cg_pq(void *impl, void *state, const fe_buffer *p, const fe_buffer *q, size_t n,
               fe_precision prec, int it);
int cuda_cg_split(void *impl, void *state, int it, int what, double *v, const fe_node_sum *ns);
int cuda_cg_step(void *impl, void *state, fe_buffer *x, fe_buffer *r, fe_buffer *p,
                 const fe_buffer *q, const fe_buffer *d, size_t n, fe_precision prec, int it,
                 int half);
int cuda_cg_wait(void *impl, void *state, int it, double *pq, double *rr, double *rz);
int cuda_cg_parts(void *impl, void *state, int it, fe_buffer *parts, int *slot);
void cuda_cg_end(void *impl, void *state);
void cuda_vector_free(cuda_impl *cu);
/* The vector module's launch helpers (cuda-vector.c), for CG's state (cuda-cg.c) */
#define VECTOR_BLOCK 256          /* threads per block, whole warps */
#define VECTOR_BLOCKS_PER_SM 32   /* grid bound of element-wise kernels */
#define REDUCE_BLOCKS_PER_SM 8    /* grid bound of reductions (= partials) */
int cuda_vector_get(cuda_impl *cu);
size_t cuda_vector_blocks(const cuda_impl *cu, size_t n, size_t per_sm, size_t cap);
int cuda_vector_run(cuda_impl *cu, CUfunction fn, const char *name, size_t n, void **params);

#endif
