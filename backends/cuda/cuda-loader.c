/* felab cuda backend: finding the driver and the run-time compiler at run time.
 *
 * Nothing of CUDA is linked into felab, so the program builds and starts on any machine.
 * When the cuda backend is first asked for, libcuda.so.1 (installed with the NVIDIA
 * driver) and NVRTC (installed with the CUDA toolkit, or a pip wheel) are opened with
 * dlopen and their entry points looked up one by one. NVRTC is searched as FELAB_NVRTC
 * (a path), then libnvrtc.so, .so.13, .so.12 on the loader's path, then the same names in
 * $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64. Whatever is missing
 * becomes a one-sentence reason that device.list() shows. cuSPARSE, the reference product
 * for assembled matrices (format "cusparse"), is found the same way (FELAB_CUSPARSE) when
 * it is first asked for. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"

/* One entry point: its name in the library, an older name to try when the first is absent,
 * and where the pointer goes in cuda_api. */
typedef struct cuda_symbol {
  const char *name, *alt;
  size_t offset;
  int optional; /* a NULL pointer is fine (the caller checks) */
} cuda_symbol;

#define SYM(field, name, alt) {name, alt, offsetof(cuda_api, field), 0}
#define OPT(field, name) {name, NULL, offsetof(cuda_api, field), 1}

static const cuda_symbol driver_symbols[] = {
    SYM(cuInit, "cuInit", NULL),
    SYM(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    SYM(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    SYM(cuDeviceGet, "cuDeviceGet", NULL),
    SYM(cuDeviceGetName, "cuDeviceGetName", NULL),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem"),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent", NULL),
    SYM(cuCtxSynchronize, "cuCtxSynchronize", NULL),
    SYM(cuMemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo"),
    SYM(cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc"),
    SYM(cuMemFree, "cuMemFree_v2", "cuMemFree"),
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD"),
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH"),
    SYM(cuMemcpyDtoD, "cuMemcpyDtoD_v2", "cuMemcpyDtoD"),
    SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync"),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync"),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync"),
    SYM(cuMemsetD8Async, "cuMemsetD8Async", NULL),
    SYM(cuMemAllocHost, "cuMemAllocHost_v2", "cuMemAllocHost"),
    SYM(cuMemFreeHost, "cuMemFreeHost", NULL),
    SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx", NULL),
    SYM(cuModuleUnload, "cuModuleUnload", NULL),
    SYM(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    SYM(cuFuncGetAttribute, "cuFuncGetAttribute", NULL),
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    SYM(cuLaunchKernel, "cuLaunchKernel", NULL),
    SYM(cuEventCreate, "cuEventCreate", NULL),
    SYM(cuEventRecord, "cuEventRecord", NULL),
    SYM(cuEventSynchronize, "cuEventSynchronize", NULL),
    SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYM(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
    OPT(cuStreamCreateWithPriority, "cuStreamCreateWithPriority"),
    OPT(cuStreamDestroy, "cuStreamDestroy_v2"),
    OPT(cuStreamWaitEvent, "cuStreamWaitEvent"),
    OPT(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange"),
    OPT(cuLaunchKernelEx, "cuLaunchKernelEx"),
    OPT(cuIpcGetMemHandle, "cuIpcGetMemHandle"),
    OPT(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2"),
    OPT(cuIpcCloseMemHandle, "cuIpcCloseMemHandle"),
    OPT(cuMemGetAddressRange, "cuMemGetAddressRange_v2"),
    SYM(cuGetErrorName, "cuGetErrorName", NULL),
    SYM(cuGetErrorString, "cuGetErrorString", NULL),
};

static const cuda_symbol nvrtc_symbols[] = {
    SYM(nvrtcGetErrorString, "nvrtcGetErrorString", NULL),
    SYM(nvrtcVersion, "nvrtcVersion", NULL),
    OPT(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs"),
    OPT(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs"),
    SYM(nvrtcCreateProgram, "nvrtcCreateProgram", NULL),
    SYM(nvrtcDestroyProgram, "nvrtcDestroyProgram", NULL),
    SYM(nvrtcCompileProgram, "nvrtcCompileProgram", NULL),
    SYM(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", NULL),
    SYM(nvrtcGetProgramLog, "nvrtcGetProgramLog", NULL),
    SYM(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", NULL),
    SYM(nvrtcGetCUBIN, "nvrtcGetCUBIN", NULL),
    SYM(nvrtcGetPTXSize, "nvrtcGetPTXSize", NULL),
    SYM(nvrtcGetPTX, "nvrtcGetPTX", NULL),
};

static const cuda_symbol cusparse_symbols[] = {
    SYM(cusparseCreate, "cusparseCreate", NULL),
    SYM(cusparseDestroy, "cusparseDestroy", NULL),
    SYM(cusparseGetErrorString, "cusparseGetErrorString", NULL),
    SYM(cusparseCreateCsr, "cusparseCreateCsr", NULL),
    SYM(cusparseDestroySpMat, "cusparseDestroySpMat", NULL),
    SYM(cusparseCreateDnVec, "cusparseCreateDnVec", NULL),
    SYM(cusparseDnVecSetValues, "cusparseDnVecSetValues", NULL),
    SYM(cusparseDestroyDnVec, "cusparseDestroyDnVec", NULL),
    SYM(cusparseSpMV_bufferSize, "cusparseSpMV_bufferSize", NULL),
    SYM(cusparseSpMV, "cusparseSpMV", NULL),
};

/* Look every symbol of a list up in lib; the first missing one is an error. */
static int cuda_bind(cuda_api *api, void *lib, const char *libname, const cuda_symbol *syms,
                     size_t n)
{
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(lib, syms[i].name);
    if (!p && syms[i].alt) p = dlsym(lib, syms[i].alt);
    if (!p && !syms[i].optional)
      FE_ERROR(FE_ERR_UNAVAILABLE, "%s has no %s: the library is too old for felab", libname,
               syms[i].name);
    /* POSIX guarantees that a function's address survives the trip through void * */
    memcpy((char *)api + syms[i].offset, &p, sizeof p);
  }
  return 0;
}

/* The driver library, or why it cannot be used. */
static int cuda_open_driver(cuda_api *api)
{
  api->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->libcuda) {
    const char *why = dlerror();
    if (!why || strstr(why, "No such file"))
      FE_ERROR(FE_ERR_UNAVAILABLE, "libcuda.so.1 not found: no NVIDIA driver on this machine");
    FE_ERROR(FE_ERR_UNAVAILABLE, "libcuda.so.1 cannot be loaded: %s", why);
  }
  return cuda_bind(api, api->libcuda, "libcuda.so.1", driver_symbols,
                   sizeof driver_symbols / sizeof driver_symbols[0]);
}

/* Try one file name; keep the handle and its name on success. */
static int cuda_try(void **lib, char *path, size_t npath, const char *name)
{
  *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (*lib) snprintf(path, npath, "%s", name);
  return *lib != NULL;
}

/* A toolkit library: the path in environment variable env, else names on the loader's path,
 * else the same names in $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64.
 * *lib stays NULL when none was found; env naming a file that cannot be loaded is an error. */
static int cuda_find(const char *env, const char *const *names, size_t nnames, void **lib,
                     char *path, size_t npath)
{
  const char *dirs[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  const char *given = getenv(env);
  *lib = NULL;
  if (given && *given && !cuda_try(lib, path, npath, given))
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s=%s cannot be loaded: %s", env, given, dlerror());
  for (size_t i = 0; !*lib && i < nnames; i++) cuda_try(lib, path, npath, names[i]);
  for (size_t d = 0; !*lib && d < sizeof dirs / sizeof dirs[0]; d++) {
    if (!dirs[d] || !*dirs[d]) continue;
    for (size_t i = 0; !*lib && i < nnames; i++) {
      char full[512];
      snprintf(full, sizeof full, "%s/lib64/%s", dirs[d], names[i]);
      cuda_try(lib, path, npath, full);
    }
  }
  return 0;
}

/* NVRTC from FELAB_NVRTC, the loader's path or the usual toolkit folders. */
static int cuda_open_nvrtc(cuda_api *api)
{
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  FE_CHECK(cuda_find("FELAB_NVRTC", names, sizeof names / sizeof names[0], &api->libnvrtc,
                     api->nvrtc_path, sizeof api->nvrtc_path));
  if (!api->libnvrtc)
    FE_ERROR(FE_ERR_UNAVAILABLE, "the NVIDIA driver is here but NVRTC is not (libnvrtc.so, "
                                 ".so.13, .so.12 not found; install the CUDA toolkit's NVRTC "
                                 "or set FELAB_NVRTC to its path)");
  return cuda_bind(api, api->libnvrtc, api->nvrtc_path, nvrtc_symbols,
                   sizeof nvrtc_symbols / sizeof nvrtc_symbols[0]);
}

int cuda_api_load_cusparse(cuda_api *api)
{
  if (api->libcusparse) return 0;
  static const char *const names[] = {"libcusparse.so", "libcusparse.so.13", "libcusparse.so.12"};
  FE_CHECK(cuda_find("FELAB_CUSPARSE", names, sizeof names / sizeof names[0],
                     &api->libcusparse, api->cusparse_path, sizeof api->cusparse_path));
  if (!api->libcusparse)
    FE_ERROR(FE_ERR_UNAVAILABLE, "format \"cusparse\" needs cuSPARSE (libcusparse.so, .so.13, "
                                 ".so.12 not found; install the CUDA toolkit's cuSPARSE or set "
                                 "FELAB_CUSPARSE to its path)");
  int rc = cuda_bind(api, api->libcusparse, api->cusparse_path, cusparse_symbols,
                     sizeof cusparse_symbols / sizeof cusparse_symbols[0]);
  if (rc) api->libcusparse = NULL;
  return rc;
}

int cuda_api_load(cuda_api *api)
{
  memset(api, 0, sizeof *api);
  if (cuda_open_driver(api) || cuda_open_nvrtc(api)) {
    int rc = fe_error_code();
    cuda_api_unload(api);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

/* The libraries stay mapped: the driver may still run threads of its own, and unloading
 * it under them is a known way to crash at exit. Only the table is cleared. */
void cuda_api_unload(cuda_api *api)
{
  memset(api, 0, sizeof *api);
}

const char *cuda_error_text(const cuda_api *api, CUresult err, char *buf, size_t n)
{
  const char *name = NULL, *text = NULL;
  if (api->cuGetErrorName) api->cuGetErrorName(err, &name);
  if (api->cuGetErrorString) api->cuGetErrorString(err, &text);
  if (name && text) snprintf(buf, n, "%s (%s)", name, text);
  else snprintf(buf, n, "CUDA error %d", (int)err);
  return buf;
}
