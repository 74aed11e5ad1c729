/* felab cuda backend: registered so that device.list() can say why it cannot be used yet.
 * The NVRTC + driver-API implementation arrives with issue 6; until then opening it fails
 * with that reason, never a link error or a crash. */
#include "backends/backend.h"
#include "engine/error.h"

static int cuda_open(int device, void **impl)
{
  (void)device;
  *impl = NULL;
  FE_ERROR(FE_ERR_UNAVAILABLE, "this felab build has no cuda backend yet (NVRTC backend: issue 6)");
}

const fe_backend_ops fe_backend_cuda_ops = {.name = "cuda", .open = cuda_open};
