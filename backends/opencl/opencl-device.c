/* felab opencl backend: choosing and opening a device, its description, and memory.
 * Devices are numbered over every platform the ICD loader knows, GPUs first, so device 0
 * is the best guess; FELAB_OPENCL_DEVICE=<index> picks another. Every memory call blocks
 * until its transfer is done, so the engine's wall-clock stage times mean what they say. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl-backend.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* The name of an OpenCL error code, for messages. */
const char *opencl_error_name(cl_int err)
{
  switch (err) {
#define NAME(c) \
  case c:       \
    return #c;
    NAME(CL_SUCCESS)
    NAME(CL_DEVICE_NOT_FOUND)
    NAME(CL_DEVICE_NOT_AVAILABLE)
    NAME(CL_COMPILER_NOT_AVAILABLE)
    NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    NAME(CL_OUT_OF_RESOURCES)
    NAME(CL_OUT_OF_HOST_MEMORY)
    NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
    NAME(CL_MEM_COPY_OVERLAP)
    NAME(CL_BUILD_PROGRAM_FAILURE)
    NAME(CL_MAP_FAILURE)
    NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    NAME(CL_COMPILE_PROGRAM_FAILURE)
    NAME(CL_LINK_PROGRAM_FAILURE)
    NAME(CL_INVALID_VALUE)
    NAME(CL_INVALID_DEVICE_TYPE)
    NAME(CL_INVALID_PLATFORM)
    NAME(CL_INVALID_DEVICE)
    NAME(CL_INVALID_CONTEXT)
    NAME(CL_INVALID_QUEUE_PROPERTIES)
    NAME(CL_INVALID_COMMAND_QUEUE)
    NAME(CL_INVALID_HOST_PTR)
    NAME(CL_INVALID_MEM_OBJECT)
    NAME(CL_INVALID_BINARY)
    NAME(CL_INVALID_BUILD_OPTIONS)
    NAME(CL_INVALID_PROGRAM)
    NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    NAME(CL_INVALID_KERNEL_NAME)
    NAME(CL_INVALID_KERNEL_DEFINITION)
    NAME(CL_INVALID_KERNEL)
    NAME(CL_INVALID_ARG_INDEX)
    NAME(CL_INVALID_ARG_VALUE)
    NAME(CL_INVALID_ARG_SIZE)
    NAME(CL_INVALID_KERNEL_ARGS)
    NAME(CL_INVALID_WORK_DIMENSION)
    NAME(CL_INVALID_WORK_GROUP_SIZE)
    NAME(CL_INVALID_WORK_ITEM_SIZE)
    NAME(CL_INVALID_GLOBAL_OFFSET)
    NAME(CL_INVALID_EVENT_WAIT_LIST)
    NAME(CL_INVALID_EVENT)
    NAME(CL_INVALID_OPERATION)
    NAME(CL_INVALID_BUFFER_SIZE)
    NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    NAME(CL_INVALID_PROPERTY)
    NAME(CL_PLATFORM_NOT_FOUND_KHR)
#undef NAME
  default:
    return "unknown OpenCL error";
  }
}

/* Whether a space-separated extension list holds the extension `name` exactly. */
static int opencl_has_extension(const char *list, const char *name)
{
  size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) return 1;
  return 0;
}

/* A device string property into out (truncated, spaces trimmed); "" if it cannot be read. */
static void opencl_device_string(cl_device_id dev, cl_device_info what, char *out, size_t n)
{
  size_t len = 0;
  out[0] = '\0';
  if (clGetDeviceInfo(dev, what, 0, NULL, &len) != CL_SUCCESS || !len) return;
  char *s = malloc(len + 1);
  if (!s) return;
  if (clGetDeviceInfo(dev, what, len, s, NULL) == CL_SUCCESS) {
    s[len] = '\0';
    char *b = s, *e = s + strlen(s);
    while (isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    snprintf(out, n, "%.*s", (int)(e - b), b);
  }
  free(s);
}

/* A platform string property into out; "" if it cannot be read. */
static void opencl_platform_string(cl_platform_id p, cl_platform_info what, char *out, size_t n)
{
  size_t len = 0;
  out[0] = '\0';
  if (clGetPlatformInfo(p, what, 0, NULL, &len) != CL_SUCCESS || !len) return;
  char *s = malloc(len + 1);
  if (!s) return;
  if (clGetPlatformInfo(p, what, len, s, NULL) == CL_SUCCESS) {
    s[len] = '\0';
    snprintf(out, n, "%s", s);
  }
  free(s);
}

/* Every device of every platform, GPUs first; *n gets the count (0: none). */
static int opencl_list_devices(cl_device_id **devs, cl_platform_id **plats, cl_uint *n)
{
  cl_uint np = 0;
  *devs = NULL;
  *plats = NULL;
  *n = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && np == 0))
    FE_ERROR(FE_ERR_UNAVAILABLE, "no OpenCL platform found (install pocl-opencl-icd, or register a "
                                 "vendor ICD in /etc/OpenCL/vendors)");
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_UNAVAILABLE, "the OpenCL ICD loader failed to list platforms: %s",
             opencl_error_name(err));
  cl_platform_id *pl = malloc(np * sizeof *pl);
  if (!pl) FE_ERROR(FE_ERR_MEM, "out of host memory listing OpenCL platforms");
  clGetPlatformIDs(np, pl, NULL);
  cl_uint total = 0;
  for (cl_uint i = 0; i < np; i++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS) total += nd;
  }
  cl_device_id *d = malloc((total ? total : 1) * sizeof *d);
  cl_platform_id *p = malloc((total ? total : 1) * sizeof *p);
  if (!d || !p) {
    free(pl), free(d), free(p);
    FE_ERROR(FE_ERR_MEM, "out of host memory listing OpenCL devices");
  }
  /* two passes over the platforms: GPUs, then everything else */
  for (int pass = 0; pass < 2; pass++) {
    for (cl_uint i = 0; i < np; i++) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd) continue;
      cl_device_id *all = malloc(nd * sizeof *all);
      if (!all) continue;
      clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, nd, all, NULL);
      for (cl_uint j = 0; j < nd && *n < total; j++) {
        cl_device_type type = 0;
        clGetDeviceInfo(all[j], CL_DEVICE_TYPE, sizeof type, &type, NULL);
        if (!!(type & CL_DEVICE_TYPE_GPU) != (pass == 0)) continue;
        d[*n] = all[j];
        p[*n] = pl[i];
        (*n)++;
      }
      free(all);
    }
  }
  free(pl);
  *devs = d;
  *plats = p;
  return 0;
}

/* Which device to open: FELAB_OPENCL_DEVICE overrides the engine's index. */
static int opencl_device_index(int device, int *index)
{
  const char *env = getenv("FELAB_OPENCL_DEVICE");
  *index = device;
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > 1000)
      FE_ERROR(FE_ERR_UNAVAILABLE, "FELAB_OPENCL_DEVICE='%s' is not a device index (0, 1, ...)",
               env);
    *index = (int)v;
  }
  return 0;
}

/* FELAB_OPENCL_CONSTANT_LIMIT: bytes of __constant tables to allow at most, on any device
 * (64K makes a CPU device refuse what NVIDIA's OpenCL would); SIZE_MAX if unset. */
static int opencl_constant_env(size_t *limit)
{
  const char *env = getenv("FELAB_OPENCL_CONSTANT_LIMIT");
  *limit = SIZE_MAX;
  if (env && *env && fe_memory_parse_size(env, limit))
    FE_ERROR(FE_ERR_UNAVAILABLE, "FELAB_OPENCL_CONSTANT_LIMIT='%s' is not a size: use bytes, or a "
             "number with K or M (65536, 64K)", env);
  return 0;
}

/* Fill impl->info and the limits the backend needs from the chosen device. */
static int opencl_describe(opencl_impl *cl)
{
  fe_device_info *in = &cl->info;
  char vendor[64], platform[64], driver[64], pversion[96];
  cl_device_type type = 0;
  cl_uint cu = 0;
  cl_ulong gmem = 0, lmem = 0, alloc = 0, cmem = 0;
  size_t group = 0, items[3] = {0, 0, 0};
  cl_device_fp_config dfp = 0;

  opencl_device_string(cl->device, CL_DEVICE_NAME, in->name, sizeof in->name);
  opencl_device_string(cl->device, CL_DEVICE_VENDOR, vendor, sizeof vendor);
  opencl_device_string(cl->device, CL_DRIVER_VERSION, driver, sizeof driver);
  opencl_platform_string(cl->platform, CL_PLATFORM_NAME, platform, sizeof platform);
  opencl_platform_string(cl->platform, CL_PLATFORM_VERSION, pversion, sizeof pversion);
  snprintf(in->vendor, sizeof in->vendor, "%.30s (%.30s)", vendor, platform);
  snprintf(cl->version, sizeof cl->version, "%.95s; driver %.55s", pversion, driver);
  clGetDeviceInfo(cl->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof cmem, &cmem, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
  clGetDeviceInfo(cl->device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dfp, &dfp, NULL);

  size_t len = 0;
  char *ext = NULL;
  if (clGetDeviceInfo(cl->device, CL_DEVICE_EXTENSIONS, 0, NULL, &len) == CL_SUCCESS &&
      (ext = calloc(len + 1, 1)))
    clGetDeviceInfo(cl->device, CL_DEVICE_EXTENSIONS, len, ext, NULL);
  const char *exts = ext ? ext : "";

  in->is_gpu = !!(type & CL_DEVICE_TYPE_GPU);
  in->lazy_launch = 1; /* PoCL compiles a kernel at its first launch */
  in->compute_units = (int)cu;
  in->global_mem = (size_t)gmem;
  in->local_mem = (size_t)lmem;
  in->max_group = group ? group : 1;
  /* what a compute unit holds: OpenCL says only its local memory (a group may use it all) */
  in->shared_per_cu = (size_t)lmem;
  in->warp = in->is_gpu ? 0 : 1;
  in->fp64 = opencl_has_extension(exts, "cl_khr_fp64") || dfp != 0;
  cl->int64_atomics = opencl_has_extension(exts, "cl_khr_int64_base_atomics");
  /* atomic add on doubles: a compare-and-swap loop on 64-bit integers (see the preamble) */
  in->fp64_atomics = in->fp64 && cl->int64_atomics;
  /* the engine's capabilities (backend.h), the same on a CPU device (PoCL) and a GPU: a
   * group's items may run side by side (PoCL's lanes are items), shared arrays are local
   * memory, local arrays past 100 KB a cell crashed PoCL, no PTX, the measured defaults
   * are cuda's, and the host CPU's calibration kernels are the cpu backend's */
  in->items_in_order = in->cells_in_lanes = 0;
  in->stack_shared = 0;
  in->large_local = in->fp64_mma = in->measured_defaults = in->cpu_calibration = 0;
  cl->max_alloc = alloc ? (size_t)alloc : (size_t)gmem;
  cl->max_item = items[0] ? items[0] : in->max_group;
  /* the kernels' program-scope tables share it (opencl-program.c counts them before a build) */
  cl->max_constant = (size_t)cmem;
  free(ext);
  return 0;
}

/* Open the chosen device: a context and an in-order profiling queue. */
int opencl_open(int device, void **impl)
{
  cl_device_id *devs;
  cl_platform_id *plats;
  cl_uint n;
  int index;
  size_t constant_env;
  cl_int err;
  *impl = NULL;
  FE_CHECK(opencl_device_index(device, &index));
  FE_CHECK(opencl_constant_env(&constant_env));
  FE_CHECK(opencl_list_devices(&devs, &plats, &n));
  if (!n) {
    free(devs), free(plats);
    FE_ERROR(FE_ERR_UNAVAILABLE, "the OpenCL platforms here have no devices (is the driver "
                                 "loaded? does `clinfo -l` list one?)");
  }
  if (index < 0 || (cl_uint)index >= n) {
    free(devs), free(plats);
    FE_ERROR(FE_ERR_UNAVAILABLE, "OpenCL device %d does not exist: there %s %u (0..%u)", index,
             n == 1 ? "is" : "are", n, n - 1);
  }
  opencl_impl *cl = calloc(1, sizeof *cl);
  if (!cl) {
    free(devs), free(plats);
    FE_ERROR(FE_ERR_MEM, "out of host memory opening OpenCL");
  }
  cl->device = devs[index];
  cl->platform = plats[index];
  free(devs), free(plats);
  opencl_describe(cl);
  cl->info.share_key = cl->info.is_gpu ? index + 1 : 0; /* (a CPU device: the machine's cores) */
  /* A GPU's __constant memory is a bank of its own, and NVIDIA's compiler fails past its
   * 64 KB. On a CPU device it is plain memory: PoCL reports 1 MB and runs Q6 transpose's
   * 3.7 MB of tables (test_pocl_groups.lua), so its figure bounds nothing. */
  cl->constant_limit = cl->info.is_gpu && cl->max_constant ? cl->max_constant : SIZE_MAX;
  if (constant_env != SIZE_MAX && constant_env <= cl->constant_limit)
    cl->constant_limit = constant_env, cl->constant_env = 1;
  cl->info.constant_tables = cl->constant_limit == SIZE_MAX ? 0 : cl->constant_limit;

  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cl->platform, 0};
  cl->context = clCreateContext(props, 1, &cl->device, NULL, NULL, &err);
  if (err == CL_SUCCESS)
    cl->queue = clCreateCommandQueue(cl->context, cl->device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) {
    int rc = fe_error_set(FE_ERR_UNAVAILABLE, __FILE__, __LINE__, __func__,
                          "cannot create an OpenCL %s on %s: %s",
                          cl->context ? "command queue" : "context", cl->info.name,
                          opencl_error_name(err));
    if (cl->context) clReleaseContext(cl->context);
    free(cl);
    return rc;
  }
  const char *extra = getenv("FELAB_OPENCL_OPTIONS");
  snprintf(cl->options, sizeof cl->options, "-cl-std=CL1.2%s%s", extra && *extra ? " " : "",
           extra && *extra ? extra : "");
  const char *disk = getenv("FELAB_OPENCL_DISK_CACHE");
  cl->disk_cache = !(disk && !strcmp(disk, "0"));
  cl->seed = fe_hash_string(cl->info.name, 0);
  cl->seed = fe_hash_string(cl->version, cl->seed);
  cl->seed = fe_hash_string(cl->options, cl->seed);
  if (opencl_preamble_make(cl)) {
    opencl_close(cl);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  *impl = cl;
  return 0;
}

/* Release everything the device holds, modules the engine did not free included. */
void opencl_close(void *impl)
{
  opencl_impl *cl = impl;
  if (!cl) return;
  if (cl->queue) clFinish(cl->queue);
  while (cl->modules) opencl_module_free(cl, cl->modules);
  opencl_vector_free(cl);
  opencl_cache_free(cl);
  if (cl->partials) clReleaseMemObject(cl->partials);
  free(cl->host_partials);
  for (int p = 0; p < FE_NPRECISIONS; p++) free(cl->preamble[p]);
  if (cl->queue) clReleaseCommandQueue(cl->queue);
  if (cl->context) clReleaseContext(cl->context);
  free(cl);
}

/* The device's description, gathered at open. */
int opencl_query(void *impl, fe_device_info *info)
{
  opencl_impl *cl = impl;
  *info = cl->info;
  return 0;
}

/* The FE_ERR_MEM message for an allocation of `bytes` that the device refused. */
static int opencl_out_of_memory(opencl_impl *cl, size_t bytes, cl_int err)
{
  FE_ERROR(FE_ERR_MEM,
           "out of device memory on %s: asked for %.1f MiB, %.1f MiB total (one OpenCL buffer "
           "may hold at most %.1f MiB; %s)",
           cl->info.name, bytes / 1048576.0, cl->info.global_mem / 1048576.0,
           cl->max_alloc / 1048576.0, opencl_error_name(err));
}

/* A device buffer of `bytes` (at least one byte underneath, so empty vectors work). */
int opencl_alloc(void *impl, size_t bytes, fe_buffer *buf)
{
  opencl_impl *cl = impl;
  cl_int err;
  buf->ptr = NULL;
  buf->bytes = 0;
  if (bytes > cl->max_alloc) return opencl_out_of_memory(cl, bytes, CL_INVALID_BUFFER_SIZE);
  /* an empty vector still gets a handle, so kernels can take it as an argument */
  cl_mem m = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
    return opencl_out_of_memory(cl, bytes, err);
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_BACKEND, "clCreateBuffer of %zu bytes on %s failed: %s", bytes,
             cl->info.name, opencl_error_name(err));
  /* drivers allocate lazily: touch the buffer now so running out shows here, not later */
  err = clEnqueueMigrateMemObjects(cl->queue, 1, &m, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0,
                                   NULL, NULL);
  if (err == CL_SUCCESS) err = clFinish(cl->queue);
  if (err != CL_SUCCESS) {
    clReleaseMemObject(m);
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY)
      return opencl_out_of_memory(cl, bytes, err);
    FE_ERROR(FE_ERR_BACKEND, "placing a buffer of %zu bytes on %s failed: %s", bytes,
             cl->info.name, opencl_error_name(err));
  }
  buf->ptr = m;
  buf->bytes = bytes;
  return 0;
}

/* Give a buffer back; releasing an empty handle does nothing. */
void opencl_release(void *impl, fe_buffer *buf)
{
  (void)impl;
  if (buf && buf->ptr) clReleaseMemObject((cl_mem)buf->ptr);
  if (buf) {
    buf->ptr = NULL;
    buf->bytes = 0;
  }
}

/* Check that [offset, offset + bytes) lies inside buf. */
static int opencl_check_range(const fe_buffer *buf, size_t offset, size_t bytes, const char *what)
{
  FE_ASSERT(buf && buf->ptr, FE_ERR_ARG, "%s: the device buffer is not allocated", what);
  FE_ASSERT(offset <= buf->bytes && bytes <= buf->bytes - offset, FE_ERR_ARG,
            "%s of %zu bytes at offset %zu overruns a device buffer of %zu bytes", what, bytes,
            offset, buf->bytes);
  return 0;
}

/* The error of a failed transfer: FE_ERR_MEM when the device ran out, else FE_ERR_BACKEND. */
static int opencl_transfer_error(opencl_impl *cl, const char *what, size_t bytes, cl_int err)
{
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES)
    return opencl_out_of_memory(cl, bytes, err);
  FE_ERROR(FE_ERR_BACKEND, "%s of %zu bytes on %s failed: %s", what, bytes, cl->info.name,
           opencl_error_name(err));
}

/* Host -> device, blocking. */
int opencl_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host)
{
  opencl_impl *cl = impl;
  FE_CHECK(opencl_check_range(dst, offset, bytes, "copy to the device"));
  if (!bytes) return 0;
  cl_int err = clEnqueueWriteBuffer(cl->queue, (cl_mem)dst->ptr, CL_TRUE, offset, bytes, host, 0,
                                    NULL, NULL);
  if (err != CL_SUCCESS) return opencl_transfer_error(cl, "copy to the device", bytes, err);
  return 0;
}

/* Device -> host, blocking. */
int opencl_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host)
{
  opencl_impl *cl = impl;
  FE_CHECK(opencl_check_range(src, offset, bytes, "copy from the device"));
  if (!bytes) return 0;
  cl_int err = clEnqueueReadBuffer(cl->queue, (cl_mem)src->ptr, CL_TRUE, offset, bytes, host, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) return opencl_transfer_error(cl, "copy from the device", bytes, err);
  return 0;
}

/* Device -> device, the first `bytes` of each, blocking. */
int opencl_copy(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes)
{
  opencl_impl *cl = impl;
  FE_CHECK(opencl_check_range(src, 0, bytes, "device copy (source)"));
  FE_CHECK(opencl_check_range(dst, 0, bytes, "device copy (destination)"));
  if (!bytes || src->ptr == dst->ptr) return 0;
  cl_int err = clEnqueueCopyBuffer(cl->queue, (cl_mem)src->ptr, (cl_mem)dst->ptr, 0, 0, bytes, 0,
                                   NULL, NULL);
  if (err == CL_SUCCESS) err = clFinish(cl->queue);
  if (err != CL_SUCCESS) return opencl_transfer_error(cl, "device copy", bytes, err);
  return 0;
}

/* Wait for everything queued. */
int opencl_finish(void *impl)
{
  opencl_impl *cl = impl;
  cl_int err = clFinish(cl->queue);
  if (err != CL_SUCCESS)
    FE_ERROR(FE_ERR_BACKEND, "clFinish on %s failed: %s", cl->info.name, opencl_error_name(err));
  return 0;
}

/* Run a kernel (arguments set) and wait; with seconds, read its profiled time. */
int opencl_enqueue(opencl_impl *cl, cl_kernel k, const char *name, size_t ngroups, size_t group,
                   double *seconds)
{
  size_t global = ngroups * group;
  cl_event ev;
  cl_int err = clEnqueueNDRangeKernel(cl->queue, k, 1, NULL, &global, &group, 0, NULL, &ev);
  if (err != CL_SUCCESS)
    FE_ERROR(err == CL_MEM_OBJECT_ALLOCATION_FAILURE ? FE_ERR_MEM : FE_ERR_BACKEND,
             "launching OpenCL kernel '%s' (%zu groups of %zu) on %s failed: %s", name, ngroups,
             group, cl->info.name, opencl_error_name(err));
  err = clWaitForEvents(1, &ev); /* always: PoCL's threads idle at exit (LSan's tracer) */
  cl_int status = CL_COMPLETE;
  clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  if (err != CL_SUCCESS || status < 0) {
    clReleaseEvent(ev);
    FE_ERROR(FE_ERR_BACKEND, "OpenCL kernel '%s' (%zu groups of %zu) failed on %s: %s", name,
             ngroups, group, cl->info.name, opencl_error_name(status < 0 ? status : err));
  }
  if (seconds) {
    cl_ulong t0 = 0, t1 = 0;
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    *seconds = t1 > t0 ? 1e-9 * (double)(t1 - t0) : 0.0;
  }
  clReleaseEvent(ev);
  return 0;
}
