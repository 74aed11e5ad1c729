/* felab cuda backend: the table. NVRTC compiles the generated source at run time for the
 * card's own architecture and the driver API loads, launches and times it; both libraries
 * are opened with dlopen on first use, so felab builds and starts without CUDA and says
 * why cuda is unavailable. The work lives in the other cuda-*.c files (see cuda-backend.h
 * for which does what). */
#include "backends/cuda/cuda-backend.h"

const fe_backend_ops fe_backend_cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .query = cuda_query,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .write = cuda_write,
    .read = cuda_read,
    .copy = cuda_copy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .preamble = cuda_preamble,
    .compile = cuda_compile,
    .precompile = cuda_precompile,
    .module_free = cuda_module_free,
    .kernel = cuda_kernel,
    .launch = cuda_launch,
    .kernel_shared = cuda_kernel_shared,
    .kernel_resources = cuda_kernel_resources,
    .finish = cuda_finish,
    .side = cuda_side,
    .fill = cuda_fill,
    .axpby = cuda_axpby,
    .pointwise = cuda_pointwise,
    .dot = cuda_dot,
    .reduce = cuda_reduce,
    .cg_update = cuda_cg_update,
    .cg_direction = cuda_cg_direction,
    .cg_begin = cuda_cg_begin,
    .cg_pq = cuda_cg_pq,
    .cg_step = cuda_cg_step,
    .cg_wait = cuda_cg_wait,
    .cg_parts = cuda_cg_parts,
    .cg_end = cuda_cg_end,
    .sparse_make = cuda_sparse_make,
    .sparse_spmv = cuda_sparse_spmv,
    .sparse_free = cuda_sparse_free,
};
