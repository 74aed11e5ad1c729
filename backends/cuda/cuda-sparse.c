/* felab cuda backend: cuSPARSE's product on felab's own CSR arrays (format "cusparse").
 *
 * It is the reference felab's CSR and SELL products are held against: the same matrix, the
 * same vectors, the vendor's kernel. cuSPARSE is opened on first use (cuda-loader.c) and
 * shares the driver's primary context (the runtime it carries binds to the current one).
 * A matrix's state holds the library's descriptor of the CSR arrays (no copy), one dense
 * vector descriptor each for x and y, re-pointed at every call, and the work buffer
 * cusparseSpMV asks for. The product runs on the default stream, as felab's kernels do,
 * and is timed with the backend's events. */
#include <stdlib.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"

typedef struct sparse_state {
  void *mat, *x, *y;      /* cusparseSpMatDescr_t, cusparseDnVecDescr_t */
  int value_type;         /* CUDA_R_64F or CUDA_R_32F */
  CUdeviceptr work;       /* cusparseSpMV's buffer */
  size_t work_bytes;
  int sized;              /* the buffer was asked for */
} sparse_state;

/* An FE_ERR_BACKEND error for a failed cuSPARSE call. */
static int sparse_fail(const cuda_impl *cu, int status, const char *what)
{
  const char *text = cu->api.cusparseGetErrorString ? cu->api.cusparseGetErrorString(status) : NULL;
  FE_ERROR(FE_ERR_BACKEND, "cuSPARSE %s failed: %s (status %d)", what, text ? text : "?", status);
}

int cuda_sparse_make(void *impl, int n, long long nnz, const fe_buffer *rowptr,
                     const fe_buffer *cols, const fe_buffer *vals, fe_precision prec,
                     void **out)
{
  cuda_impl *cu = impl;
  *out = NULL;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_api_load_cusparse(&cu->api));
  int st;
  if (!cu->sparse && (st = cu->api.cusparseCreate(&cu->sparse)) != 0)
    return sparse_fail(cu, st, "cusparseCreate");
  sparse_state *s = calloc(1, sizeof *s);
  if (!s) FE_ERROR(FE_ERR_MEM, "out of host memory");
  s->value_type = prec == FE_DOUBLE ? CUDA_R_64F : CUDA_R_32F;
  st = cu->api.cusparseCreateCsr(&s->mat, n, n, nnz, rowptr->ptr,
                                 cols->ptr, vals->ptr,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                 s->value_type);
  /* the vectors' values are set at each call; the matrix's values serve until then */
  if (!st) st = cu->api.cusparseCreateDnVec(&s->x, n, vals->ptr, s->value_type);
  if (!st) st = cu->api.cusparseCreateDnVec(&s->y, n, vals->ptr, s->value_type);
  if (st) {
    cuda_sparse_free(cu, s);
    return sparse_fail(cu, st, "descriptor creation");
  }
  *out = s;
  return 0;
}

int cuda_sparse_spmv(void *impl, void *state, const fe_buffer *x, fe_buffer *y, double *seconds)
{
  cuda_impl *cu = impl;
  sparse_state *s = state;
  FE_CHECK(cuda_usable(cu));
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void *alpha = s->value_type == CUDA_R_64F ? (const void *)&one : (const void *)&onef;
  const void *beta = s->value_type == CUDA_R_64F ? (const void *)&zero : (const void *)&zerof;
  int st = cu->api.cusparseDnVecSetValues(s->x, x->ptr);
  if (!st) st = cu->api.cusparseDnVecSetValues(s->y, y->ptr);
  if (st) return sparse_fail(cu, st, "cusparseDnVecSetValues");
  if (!s->sized) { /* y = 1 A x + 0 y */
    st = cu->api.cusparseSpMV_bufferSize(cu->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha,
                                         s->mat, s->x, beta, s->y, s->value_type,
                                         CUSPARSE_SPMV_ALG_DEFAULT, &s->work_bytes);
    if (st) return sparse_fail(cu, st, "cusparseSpMV_bufferSize");
    if (s->work_bytes) {
      CUresult err = cu->api.cuMemAlloc(&s->work, s->work_bytes);
      if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "the cuSPARSE product's buffer");
    }
    s->sized = 1;
  }
  CUresult err = seconds ? cu->api.cuEventRecord(cu->start, NULL) : CUDA_SUCCESS;
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "cuSPARSE product");
  st = cu->api.cusparseSpMV(cu->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, s->mat, s->x,
                            beta, s->y, s->value_type, CUSPARSE_SPMV_ALG_DEFAULT,
                            (void *)(uintptr_t)s->work);
  if (st) return sparse_fail(cu, st, "cusparseSpMV");
  if (!seconds) return 0;
  err = cu->api.cuEventRecord(cu->stop, NULL);
  if (err == CUDA_SUCCESS) err = cu->api.cuEventSynchronize(cu->stop);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "cuSPARSE product");
  float ms = 0;
  if (cu->api.cuEventElapsedTime(&ms, cu->start, cu->stop) != CUDA_SUCCESS) ms = 0;
  *seconds = 1e-3 * ms;
  return 0;
}

void cuda_sparse_free(void *impl, void *state)
{
  cuda_impl *cu = impl;
  sparse_state *s = state;
  if (!s) return;
  if (s->mat) cu->api.cusparseDestroySpMat(s->mat);
  if (s->x) cu->api.cusparseDestroyDnVec(s->x);
  if (s->y) cu->api.cusparseDestroyDnVec(s->y);
  if (s->work) cu->api.cuMemFree(s->work);
  free(s);
}

void cuda_sparse_close(cuda_impl *cu)
{
  if (cu->sparse) cu->api.cusparseDestroy(cu->sparse);
  cu->sparse = NULL;
}
