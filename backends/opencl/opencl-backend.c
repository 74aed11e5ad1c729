/* felab opencl backend: the table. clBuildProgram at run time on any OpenCL 1.2 device
 * (PoCL on a CPU, a vendor driver on a GPU); the work lives in the other opencl-*.c files
 * (see opencl-backend.h for which does what). */
#include "backends/opencl/opencl-backend.h"

const fe_backend_ops fe_backend_opencl_ops = {
    .name = "opencl",
    .open = opencl_open,
    .close = opencl_close,
    .query = opencl_query,
    .alloc = opencl_alloc,
    .release = opencl_release,
    .write = opencl_write,
    .read = opencl_read,
    .copy = opencl_copy,
    .preamble = opencl_preamble,
    .compile = opencl_compile,
    .module_free = opencl_module_free,
    .kernel = opencl_kernel,
    .kernel_resources = opencl_kernel_resources,
    .launch = opencl_launch,
    .finish = opencl_finish,
    .fill = opencl_fill,
    .axpby = opencl_axpby,
    .pointwise = opencl_pointwise,
    .dot = opencl_dot,
    .reduce = opencl_reduce,
    .cg_update = opencl_cg_update,
    .cg_direction = opencl_cg_direction,
};
