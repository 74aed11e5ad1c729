/* felab cuda backend: opening a device, its description, memory and timed launches.
 *
 * The backend works in the device's primary context (the one the CUDA runtime and every
 * library share) and on the legacy default stream, so work is ordered without explicit
 * synchronization and a copy back to the host waits for the kernels before it. Device 0 is
 * used unless FELAB_CUDA_DEVICE names another. A generated kernel's launch blocks until it
 * is done and is timed with two events; the vector kernels (cuda-vector.c) do not block.
 *
 * A kernel that faults (an illegal address, say) leaves the context unusable for the rest
 * of the process: the backend then refuses every call with that reason instead of
 * returning the driver's sticky error from some unrelated later call. Kernels of C a user
 * typed are tried in another process first (cuda-trial.c), so theirs never get here. Running out of
 * memory is not such a fault: the allocation fails with what was asked and what is free,
 * and the session goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"

/* Errors after which the driver refuses every further call in this context. */
static int cuda_error_is_sticky(CUresult err)
{
  return err == 700 || err == 702 || err == 710 || (err >= 714 && err <= 719) || err == 214;
}

int cuda_fail(cuda_impl *cu, CUresult err, const char *what)
{
  char text[256];
  cuda_error_text(&cu->api, err, text, sizeof text);
  if (cuda_error_is_sticky(err)) {
    cu->lost = 1;
    FE_ERROR(FE_ERR_BACKEND, "%s on %s failed: %s; the CUDA context is lost, restart felab to "
             "use cuda again (other backends still work)", what, cu->info.name, text);
  }
  FE_ERROR(err == CUDA_ERROR_OUT_OF_MEMORY ? FE_ERR_MEM : FE_ERR_BACKEND, "%s on %s failed: %s",
           what, cu->info.name, text);
}

int cuda_usable(const cuda_impl *cu)
{
  FE_ASSERT(!cu->lost, FE_ERR_BACKEND,
            "the CUDA context on %s was lost after a kernel fault; restart felab to use cuda "
            "again", cu->info.name);
  /* the context is current on the thread that opened it; make it so on this one too */
  cu->api.cuCtxSetCurrent(cu->context);
  return 0;
}

/* Which device to open: FELAB_CUDA_DEVICE overrides the engine's index; under mpirun each
 * rank of a node takes the next device (OpenMPI's local rank: device = local rank % count,
 * one GPU a rank on a node of several). */
static int cuda_device_index(int device, int count, int *index)
{
  const char *env = getenv("FELAB_CUDA_DEVICE"), *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  *index = device;
  if (!(env && *env) && local && *local && count > 0) *index = (device + atoi(local)) % count;
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > 1000)
      FE_ERROR(FE_ERR_UNAVAILABLE, "FELAB_CUDA_DEVICE='%s' is not a device index (0, 1, ...)",
               env);
    *index = (int)v;
  }
  if (*index < 0 || *index >= count)
    FE_ERROR(FE_ERR_UNAVAILABLE, "CUDA device %d does not exist: there %s %d (0..%d)", *index,
             count == 1 ? "is" : "are", count, count - 1);
  return 0;
}

/* Start the driver and pick the device; the reasons a machine has no usable GPU. */
static int cuda_find_device(cuda_impl *cu, int device)
{
  char text[256];
  int count = 0, index;
  CUresult err = cu->api.cuInit(0);
  if (err == CUDA_ERROR_NO_DEVICE)
    FE_ERROR(FE_ERR_UNAVAILABLE, "the NVIDIA driver is installed but sees no CUDA device");
  if (err != CUDA_SUCCESS)
    FE_ERROR(FE_ERR_UNAVAILABLE, "the NVIDIA driver does not start (cuInit: %s)",
             cuda_error_text(&cu->api, err, text, sizeof text));
  err = cu->api.cuDeviceGetCount(&count);
  if (err != CUDA_SUCCESS || count <= 0)
    FE_ERROR(FE_ERR_UNAVAILABLE, "the NVIDIA driver is installed but sees no CUDA device");
  FE_CHECK(cuda_device_index(device, count, &index));
  cu->ordinal = index;
  err = cu->api.cuDeviceGet(&cu->device, index);
  if (err == CUDA_SUCCESS) err = cu->api.cuDevicePrimaryCtxRetain(&cu->context, cu->device);
  if (err == CUDA_SUCCESS) err = cu->api.cuCtxSetCurrent(cu->context);
  if (err != CUDA_SUCCESS) {
    cu->context = NULL;
    FE_ERROR(FE_ERR_UNAVAILABLE, "CUDA device %d cannot be opened: %s", index,
             cuda_error_text(&cu->api, err, text, sizeof text));
  }
  return 0;
}

/* One integer attribute of the device (0 if the driver does not know it). */
static int cuda_attribute(cuda_impl *cu, int attribute)
{
  int v = 0;
  if (cu->api.cuDeviceGetAttribute(&v, attribute, cu->device) != CUDA_SUCCESS) v = 0;
  return v;
}

/* Fill cu->info and the limits the backend needs. */
static void cuda_describe(cuda_impl *cu)
{
  fe_device_info *in = &cu->info;
  size_t mem = 0;
  if (cu->api.cuDeviceGetName(in->name, (int)sizeof in->name, cu->device) != CUDA_SUCCESS)
    snprintf(in->name, sizeof in->name, "CUDA device");
  cu->api.cuDeviceTotalMem(&mem, cu->device);
  cu->api.cuDriverGetVersion(&cu->driver_version);
  cu->api.nvrtcVersion(&cu->nvrtc_major, &cu->nvrtc_minor);
  cu->cc = 10 * cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
           cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  cu->registers = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  cu->shared_optin = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  cu->max_grid = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  if (cu->max_grid <= 0) cu->max_grid = 65535;
  snprintf(in->vendor, sizeof in->vendor, "NVIDIA, sm_%d, CUDA %d.%d, %d regs/block, device %d",
           cu->cc, cu->driver_version / 1000, cu->driver_version % 1000 / 10, cu->registers,
           cu->ordinal);
  in->is_gpu = 1;
  in->device_index = cu->ordinal;
  in->share_key = ((long long)cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) << 16 |
                   cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) << 8 |
                   cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)) + 1;
  in->node_sums = 1; /* cg_split's FE_CG_*_NODE (cuda-vector.c) */
  in->tables_l1 = 1; /* FE_CONSTANT is __device__ const here (cuda-program.c) */
  in->compute_units = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  in->global_mem = mem;
  /* static __shared__ arrays (what the templates declare) may use this much per block */
  in->local_mem = (size_t)cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  in->local_mem_optin = cu->shared_optin > 0 && (size_t)cu->shared_optin > in->local_mem
                            ? (size_t)cu->shared_optin : 0;
  in->max_group = (size_t)cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (!in->max_group) in->max_group = 1024;
  in->warp = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  in->threads_per_cu = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  in->regs_per_cu = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  in->groups_per_cu = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  in->shared_per_cu = (size_t)cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  in->l2_bytes = (size_t)cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  in->clock_mhz = cuda_attribute(cu, CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
  in->fp64 = 1;         /* every device since sm_13 */
  in->fp64_atomics = 1; /* native from sm_60, a compare-and-swap loop before (preamble) */
  /* the engine's capabilities (backend.h): a block's threads run side by side, its shared
   * arrays are __shared__ memory, dynamic past 48 KB */
  in->items_in_order = in->cells_in_lanes = in->cpu_calibration = 0;
  in->stack_shared = 0;
  in->large_local = 1;
  in->fp64_mma = cu->cc >= 80; /* mma.m8n8k4.f64: the tensor cores of sm_80 and later */
  in->measured_defaults = 1;
  in->walks_rolled = 1; /* SF_WALK: _Pragma("unroll 1") */
}

/* The NVRTC options and the cache key of everything compiled in this session. */
static void cuda_options(cuda_impl *cu)
{
  const char *extra = getenv("FELAB_CUDA_OPTIONS");
  const char *disk = getenv("FELAB_CUDA_DISK_CACHE");
  char versions[96];
  snprintf(cu->options, sizeof cu->options, "%s", extra && *extra ? extra : "");
  cu->disk_cache = !(disk && !strcmp(disk, "0"));
  snprintf(versions, sizeof versions, "nvrtc %d.%d driver %d", cu->nvrtc_major, cu->nvrtc_minor,
           cu->driver_version);
  cu->seed = fe_hash_string(cu->arch, 0x6375646111ULL);
  cu->seed = fe_hash_string(cu->options, cu->seed);
  cu->seed = fe_hash_string(versions, cu->seed);
}

int cuda_open(int device, void **impl)
{
  cuda_impl *cu;
  *impl = NULL;
  FE_CALLOC(cu, 1, "cuda backend");
  int rc = cuda_api_load(&cu->api);
  if (!rc) rc = cuda_find_device(cu, device);
  if (!rc) {
    cuda_describe(cu);
    rc = cuda_choose_arch(cu);
  }
  if (!rc) { /* griddepcontrol in the kernels: compiled for sm_90 or later (FELAB_FOLLOW=0: off) */
    const char *env = getenv("FELAB_FOLLOW"), *at = strrchr(cu->arch, '_');
    cu->info.follows = cu->api.cuLaunchKernelEx && at && atoi(at + 1) >= 90 && !(env && *env == '0');
  }
  if (!rc) {
    CUresult err = cu->api.cuEventCreate(&cu->start, 0);
    if (err == CUDA_SUCCESS) err = cu->api.cuEventCreate(&cu->stop, 0);
    if (err != CUDA_SUCCESS) rc = cuda_fail(cu, err, "cuEventCreate");
  }
  if (!rc) {
    cuda_options(cu);
    rc = cuda_preamble_make(cu);
  }
  if (rc) {
    rc = fe_error_code();
    cuda_close(cu);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *impl = cu;
  return 0;
}

/* Release everything the device holds, modules the engine did not free included. */
void cuda_close(void *impl)
{
  cuda_impl *cu = impl;
  if (!cu) return;
  if (cu->context) {
    cu->api.cuCtxSetCurrent(cu->context);
    if (!cu->lost) cu->api.cuCtxSynchronize();
    while (cu->modules) cuda_module_free(cu, cu->modules);
    cuda_vector_free(cu);
    cuda_sparse_close(cu);
    if (cu->side) cu->api.cuStreamDestroy(cu->side);
    if (cu->forked) cu->api.cuEventDestroy(cu->forked);
    if (cu->joined) cu->api.cuEventDestroy(cu->joined);
    for (int i = 0; i < FE_MARKS; i++)
      if (cu->marks[i]) cu->api.cuEventDestroy(cu->marks[i]);
    if (cu->start) cu->api.cuEventDestroy(cu->start);
    if (cu->stop) cu->api.cuEventDestroy(cu->stop);
    for (int i = 0; i < 2; i++) {
      if (cu->staged[i]) cu->api.cuEventDestroy(cu->staged[i]);
      if (cu->stage[i]) cu->api.cuMemFreeHost(cu->stage[i]);
    }
    cu->api.cuDevicePrimaryCtxRelease(cu->device);
  }
  cuda_cache_free(cu);
  for (int p = 0; p < FE_NPRECISIONS; p++) free(cu->preamble[p]);
  cuda_api_unload(&cu->api);
  free(cu);
}

int cuda_query(void *impl, fe_device_info *info)
{
  cuda_impl *cu = impl;
  *info = cu->info;
  return 0;
}

/* A size for people: "812 B", "1.6 KiB", "17.2 MiB", "139.8 GiB". */
static const char *cuda_size(size_t bytes, char *buf, size_t n)
{
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = -1;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  if (u < 0) snprintf(buf, n, "%zu B", bytes);
  else snprintf(buf, n, "%.1f %s", v, units[u]);
  return buf;
}

/* The FE_ERR_MEM message of an allocation the device refused: asked, free and total. */
static int cuda_out_of_memory(cuda_impl *cu, size_t bytes)
{
  size_t free_bytes = 0, total = 0;
  char asked[32], avail[32], all[32];
  cu->api.cuMemGetInfo(&free_bytes, &total);
  FE_ERROR(FE_ERR_MEM,
           "out of device memory on %s: asked for %s, %s free of %s (free some vectors or "
           "operators, or use a smaller problem)",
           cu->info.name, cuda_size(bytes, asked, sizeof asked),
           cuda_size(free_bytes, avail, sizeof avail), cuda_size(total, all, sizeof all));
}

int cuda_alloc(void *impl, size_t bytes, fe_buffer *buf)
{
  cuda_impl *cu = impl;
  CUdeviceptr p = 0;
  buf->ptr = NULL;
  buf->bytes = 0;
  FE_CHECK(cuda_usable(cu));
  /* a large buffer is first compared with what the device has free (a failed cuMemAlloc
   * says the same, but only after the driver has tried) */
  size_t free_bytes = 0, total = 0;
  if (bytes >= ((size_t)1 << 20) && cu->api.cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS &&
      bytes > free_bytes)
    return cuda_out_of_memory(cu, bytes);
  /* an empty vector still gets a handle, so kernels can take it as an argument */
  CUresult err = cu->api.cuMemAlloc(&p, bytes ? bytes : 256);
  if (err == CUDA_ERROR_OUT_OF_MEMORY) return cuda_out_of_memory(cu, bytes);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "cuMemAlloc");
  buf->ptr = (void *)(size_t)p;
  buf->bytes = bytes;
  return 0;
}

void cuda_release(void *impl, fe_buffer *buf)
{
  cuda_impl *cu = impl;
  if (!buf) return;
  if (buf->ptr) {
    cu->api.cuCtxSetCurrent(cu->context);
    cu->api.cuMemFree((CUdeviceptr)(size_t)buf->ptr); /* fails only on a lost context */
  }
  buf->ptr = NULL;
  buf->bytes = 0;
}

/* Check that [offset, offset + bytes) lies inside buf. */
static int cuda_check_range(const fe_buffer *buf, size_t offset, size_t bytes, const char *what)
{
  FE_ASSERT(buf && buf->ptr, FE_ERR_ARG, "%s: the device buffer is not allocated", what);
  FE_ASSERT(offset <= buf->bytes && bytes <= buf->bytes - offset, FE_ERR_ARG,
            "%s of %zu bytes at offset %zu overruns a device buffer of %zu bytes", what, bytes,
            offset, buf->bytes);
  return 0;
}

#define CUDA_STAGE ((size_t)32 << 20) /* bytes of each staging buffer */

/* The staging buffers and their events, made once (0: ready; else no staging). */
static int cuda_stage_ready(cuda_impl *cu)
{
  for (int i = 0; i < 2; i++) {
    if (!cu->stage[i] && cu->api.cuMemAllocHost(&cu->stage[i], CUDA_STAGE) != CUDA_SUCCESS) {
      cu->stage[i] = NULL;
      return 1;
    }
    if (!cu->staged[i] && cu->api.cuEventCreate(&cu->staged[i], 0) != CUDA_SUCCESS) {
      cu->staged[i] = NULL;
      return 1;
    }
  }
  return 0;
}

/* A large copy to the device through the staging buffers: chunk k is filled (by the
 * host's threads) into buffer k % 2 once that buffer's last copy is done, then copied
 * asynchronously; returns after the last. Pageable copies run at about 7 GB/s on the H200's
 * host, this at several times that. */
static CUresult cuda_write_staged(cuda_impl *cu, CUdeviceptr dst, const char *host, size_t bytes)
{
  CUresult err = CUDA_SUCCESS;
  int used[2] = {0, 0};
  for (size_t off = 0, k = 0; off < bytes && err == CUDA_SUCCESS; off += CUDA_STAGE, k++) {
    const int i = (int)(k & 1);
    const size_t len = bytes - off < CUDA_STAGE ? bytes - off : CUDA_STAGE;
    if (used[i]) err = cu->api.cuEventSynchronize(cu->staged[i]);
    if (err != CUDA_SUCCESS) break;
    char *to = cu->stage[i];
    const long pieces = (long)((len + ((size_t)1 << 20) - 1) >> 20);
#pragma omp parallel for schedule(static)
    for (long p = 0; p < pieces; p++) {
      size_t a = (size_t)p << 20, e = a + ((size_t)1 << 20) < len ? a + ((size_t)1 << 20) : len;
      memcpy(to + a, host + off + a, e - a);
    }
    err = cu->api.cuMemcpyHtoDAsync(dst + off, to, len, NULL);
    if (err == CUDA_SUCCESS) err = cu->api.cuEventRecord(cu->staged[i], NULL);
    used[i] = 1;
  }
  for (int i = 0; i < 2 && err == CUDA_SUCCESS; i++)
    if (used[i]) err = cu->api.cuEventSynchronize(cu->staged[i]);
  return err;
}

/* Host -> device; the host memory may be reused when this returns. */
int cuda_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_check_range(dst, offset, bytes, "copy to the device"));
  if (!bytes) return 0;
  FE_CHECK(cuda_usable(cu));
  CUresult err;
  if (bytes >= 2 * CUDA_STAGE && !cuda_stage_ready(cu))
    err = cuda_write_staged(cu, (CUdeviceptr)(size_t)dst->ptr + offset, host, bytes);
  else err = cu->api.cuMemcpyHtoD((CUdeviceptr)(size_t)dst->ptr + offset, host, bytes);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "copy to the device");
  return 0;
}

/* Device -> host, after every kernel queued before it. */
int cuda_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_check_range(src, offset, bytes, "copy from the device"));
  if (!bytes) return 0;
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuMemcpyDtoH(host, (CUdeviceptr)(size_t)src->ptr + offset, bytes);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "copy from the device");
  return 0;
}

/* Page-locked host memory (cuMemAllocHost): the copies to and from it run at the link's rate,
 * where pageable memory goes through the driver's own staging. */
void *cuda_host_alloc(void *impl, size_t bytes)
{
  cuda_impl *cu = impl;
  void *p = NULL;
  if (cuda_usable(cu)) {
    fe_error_clear();
    return NULL;
  }
  if (cu->api.cuMemAllocHost(&p, bytes ? bytes : 1) != CUDA_SUCCESS) return NULL;
  return p;
}

void cuda_host_free(void *impl, void *host)
{
  cuda_impl *cu = impl;
  if (host) cu->api.cuMemFreeHost(host);
}

/* Device -> device in the current queue's order (the side queue's inside a side section), a
 * range of each (a peer's buffer opened by cuda_ipc_import too: the driver copies across
 * the link). */
int cuda_copy_async(void *impl, fe_buffer *dst, size_t dst_offset, const fe_buffer *src,
                    size_t src_offset, size_t bytes)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_check_range(src, src_offset, bytes, "device copy (source)"));
  FE_CHECK(cuda_check_range(dst, dst_offset, bytes, "device copy (destination)"));
  if (!bytes) return 0;
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuMemcpyDtoDAsync((CUdeviceptr)(size_t)dst->ptr + dst_offset,
                                           (CUdeviceptr)(size_t)src->ptr + src_offset, bytes, cu->cur);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "device copy");
  return 0;
}

int cuda_ipc_export(void *impl, const fe_buffer *buf, unsigned char handle[64])
{
  cuda_impl *cu = impl;
  char text[160];
  FE_CHECK(cuda_usable(cu));
  FE_ASSERT(cu->api.cuIpcGetMemHandle && cu->api.cuIpcOpenMemHandle && cu->api.cuIpcCloseMemHandle,
            FE_ERR_UNAVAILABLE, "this driver has no interprocess memory handles");
  CUipcMemHandle h;
  CUresult err = cu->api.cuIpcGetMemHandle(&h, (CUdeviceptr)(size_t)buf->ptr);
  FE_ASSERT(err == CUDA_SUCCESS, FE_ERR_UNAVAILABLE, "a buffer cannot be named for another "
            "process: %s", cuda_error_text(&cu->api, err, text, sizeof text));
  memcpy(handle, h.reserved, 64);
  return 0;
}

int cuda_ipc_import(void *impl, const unsigned char handle[64], size_t bytes, fe_buffer *peer)
{
  cuda_impl *cu = impl;
  char text[160];
  peer->ptr = NULL;
  peer->bytes = 0;
  FE_CHECK(cuda_usable(cu));
  FE_ASSERT(cu->api.cuIpcOpenMemHandle, FE_ERR_UNAVAILABLE, "this driver has no interprocess "
            "memory handles");
  CUipcMemHandle h;
  memcpy(h.reserved, handle, 64);
  CUdeviceptr p = 0;
  CUresult err = cu->api.cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  FE_ASSERT(err == CUDA_SUCCESS, FE_ERR_UNAVAILABLE, "another process's buffer cannot be "
            "opened: %s", cuda_error_text(&cu->api, err, text, sizeof text));
  peer->ptr = (void *)(size_t)p;
  peer->bytes = bytes;
  return 0;
}

void cuda_ipc_close(void *impl, fe_buffer *peer)
{
  cuda_impl *cu = impl;
  if (peer && peer->ptr && cu->api.cuIpcCloseMemHandle)
    cu->api.cuIpcCloseMemHandle((CUdeviceptr)(size_t)peer->ptr);
  if (peer) peer->ptr = NULL;
}

/* Device -> device, the first `bytes` of each, blocking. */
int cuda_copy(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_check_range(src, 0, bytes, "device copy (source)"));
  FE_CHECK(cuda_check_range(dst, 0, bytes, "device copy (destination)"));
  if (!bytes || src->ptr == dst->ptr) return 0;
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuMemcpyDtoD((CUdeviceptr)(size_t)dst->ptr,
                                      (CUdeviceptr)(size_t)src->ptr, bytes);
  if (err == CUDA_SUCCESS) err = cu->api.cuCtxSynchronize();
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "device copy");
  return 0;
}

/* The side queue (fe_backend_ops.side). Without the driver's streams entry points, or where
 * the stream can not be made, everything stays on the main queue, in order (correct, not
 * overlapped). */
int cuda_side(void *impl, int op)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_usable(cu));
  const cuda_api *a = &cu->api;
  if (!a->cuStreamCreateWithPriority || !a->cuStreamWaitEvent) return 0;
  CUresult err = CUDA_SUCCESS;
  if (!cu->side) {
    int least = 0, greatest = 0;
    if (a->cuCtxGetStreamPriorityRange) a->cuCtxGetStreamPriorityRange(&least, &greatest);
    err = a->cuStreamCreateWithPriority(&cu->side, 0x1 /* CU_STREAM_NON_BLOCKING */, greatest);
    if (err == CUDA_SUCCESS) err = a->cuEventCreate(&cu->forked, 0x2 /* DISABLE_TIMING */);
    if (err == CUDA_SUCCESS) err = a->cuEventCreate(&cu->joined, 0x2);
    if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "making the side stream");
  }
  if (op == FE_SIDE_BEGIN) { /* the side starts where the main queue is */
    err = a->cuEventRecord(cu->forked, NULL);
    if (err == CUDA_SUCCESS) err = a->cuStreamWaitEvent(cu->side, cu->forked, 0);
    cu->cur = cu->side;
  } else if (op == FE_SIDE_RESUME) { /* on after the side's own work, the main queue not awaited */
    cu->cur = cu->side;
  } else if (op == FE_SIDE_END) {
    err = a->cuEventRecord(cu->joined, cu->side);
    cu->cur = NULL;
  } else { /* FE_SIDE_JOIN */
    err = a->cuStreamWaitEvent(NULL, cu->joined, 0);
  }
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "the side stream");
  return 0;
}

/* The next launch follows the kernel before it (backend.h's follow): launched with
 * programmatic stream serialization, its blocks are placed once the kernel before has
 * executed griddepcontrol.launch_dependents in all its blocks (FE_GROUPS_BEGIN) and wait in
 * griddepcontrol.wait (FE_PRIOR_WAIT) for its end. */
int cuda_follow(void *impl)
{
  cuda_impl *cu = impl;
  cu->follow_next = cu->info.follows;
  return 0;
}

/* A point of the current queue, and the wait for it alone (backend.h's mark). */
int cuda_mark(void *impl, int slot)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_usable(cu));
  FE_ASSERT(slot >= 0 && slot < FE_MARKS, FE_ERR_INTERNAL, "mark %d of %d", slot, FE_MARKS);
  CUresult err = CUDA_SUCCESS;
  if (!cu->marks[slot]) err = cu->api.cuEventCreate(&cu->marks[slot], 0x2 /* DISABLE_TIMING */);
  if (err == CUDA_SUCCESS) err = cu->api.cuEventRecord(cu->marks[slot], cu->cur);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "marking the queue");
  return 0;
}

int cuda_mark_wait(void *impl, int slot)
{
  cuda_impl *cu = impl;
  FE_ASSERT(slot >= 0 && slot < FE_MARKS && cu->marks[slot], FE_ERR_INTERNAL,
            "a wait for mark %d, never made", slot);
  CUresult err = cu->api.cuEventSynchronize(cu->marks[slot]);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "waiting for a mark of the queue");
  return 0;
}

/* Wait for everything queued. */
int cuda_finish(void *impl)
{
  cuda_impl *cu = impl;
  FE_CHECK(cuda_usable(cu));
  CUresult err = cu->api.cuCtxSynchronize();
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "waiting for the device");
  return 0;
}

/* Launch, and with seconds wait and time with the two events (kernel time alone). */
int cuda_run(cuda_impl *cu, CUfunction fn, const char *name, size_t ngroups, size_t group,
             unsigned shared, void **params, double *seconds)
{
  char what[160];
  FE_CHECK(cuda_usable(cu));
  FE_ASSERT(ngroups <= (size_t)cu->max_grid, FE_ERR_ARG,
            "kernel '%s' asks for %zu blocks; %s allows %d", name, ngroups, cu->info.name,
            cu->max_grid);
  snprintf(what, sizeof what, "kernel '%.64s' (%zu blocks of %zu threads)", name, ngroups, group);
  CUresult err = seconds ? cu->api.cuEventRecord(cu->start, cu->cur) : CUDA_SUCCESS;
  if (err == CUDA_SUCCESS && cu->follow_next) {
    CUlaunchAttribute at = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    at.value.programmatic_serialization = 1;
    const CUlaunchConfig lc = {.grid = {(unsigned)ngroups, 1, 1}, .block = {(unsigned)group, 1, 1},
                               .shared = shared, .stream = cu->cur, .attrs = &at, .nattrs = 1};
    err = cu->api.cuLaunchKernelEx(&lc, fn, params, NULL);
  } else if (err == CUDA_SUCCESS) {
    err = cu->api.cuLaunchKernel(fn, (unsigned)ngroups, 1, 1, (unsigned)group, 1, 1, shared,
                                 cu->cur, params, NULL);
  }
  cu->follow_next = 0;
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, what);
  if (!seconds) return 0;
  err = cu->api.cuEventRecord(cu->stop, cu->cur);
  if (err == CUDA_SUCCESS) err = cu->api.cuEventSynchronize(cu->stop);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, what);
  float ms = 0;
  if (cu->api.cuEventElapsedTime(&ms, cu->start, cu->stop) != CUDA_SUCCESS) ms = 0;
  *seconds = 1e-3 * ms;
  return 0;
}
