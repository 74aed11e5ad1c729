/* felab cuda backend: CG with its scalars on the device (backend.h's cg_begin ... cg_end,
 * cg_parts, cg_split), through the vector module's kernels (cuda-vector.c). */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"

/* ---- CG with its scalars on the device ----
 * The state's device scalars: for the steps of each parity k = it & 1, c[4 k] = (p, q),
 * c[4 k + 1] = (r, r), c[4 k + 2] = (r, z) of the new r (the start's rz sits at k = 0, step
 * 0). Step it reads the old rz at k ^ 1 and writes the new at k, so no kernel writes what
 * another of the same step reads. The three of step it are copied to a ring of pinned host
 * slots, each with an event the host waits on: the host reads step it - 1 while the device
 * runs step it. */
#define CG_RING 4

typedef struct cuda_cg {
  CUdeviceptr c;          /* 8 doubles */
  CUdeviceptr parts;      /* 2 x FE_PQ_PARTS x FE_PQ_STRIDE doubles: an apply's (p, q) parts */
  int from_parts[2];      /* step k's (p, q) from the parts (cg_parts), not its own pass */
  int zero_parts[2];      /* step k's parts summed already (cg_split): its direction zeroes them */
  double *host;           /* CG_RING x 4 doubles, page-locked; then CG_RING x 4 more, the
                           * values cg_split puts on their way to the device */
  CUevent done[CG_RING];  /* recorded after each slot's copy */
} cuda_cg;

void cuda_cg_end(void *impl, void *state)
{
  cuda_impl *cu = impl;
  cuda_cg *g = state;
  if (!g) return;
  for (int i = 0; i < CG_RING; i++)
    if (g->done[i]) cu->api.cuEventDestroy(g->done[i]);
  if (g->host) cu->api.cuMemFreeHost(g->host);
  if (g->c) cu->api.cuMemFree(g->c);
  if (g->parts) cu->api.cuMemFree(g->parts);
  free(g);
}

int cuda_cg_begin(void *impl, double rz, void **state)
{
  cuda_impl *cu = impl;
  *state = NULL;
  FE_CHECK(cuda_usable(cu));
  FE_CHECK(cuda_vector_get(cu));
  cuda_cg *g = calloc(1, sizeof *g);
  if (!g) FE_ERROR(FE_ERR_MEM, "out of host memory for CG's scalars");
  double c[8] = {0, 0, rz, 0, 0, 0, 0, 0};
  CUresult err = cu->api.cuMemAlloc(&g->c, sizeof c);
  if (err == CUDA_SUCCESS) err = cu->api.cuMemcpyHtoD(g->c, c, sizeof c);
  size_t pbytes = 2 * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
  if (err == CUDA_SUCCESS) err = cu->api.cuMemAlloc(&g->parts, pbytes);
  if (err == CUDA_SUCCESS) /* zero once: each step's direction zeroes the parts it read */
    err = cu->api.cuMemsetD8Async(g->parts, 0, pbytes, NULL);
  if (err == CUDA_SUCCESS)
    err = cu->api.cuMemAllocHost((void **)&g->host, 2 * CG_RING * 4 * sizeof(double));
  for (int i = 0; i < CG_RING && err == CUDA_SUCCESS; i++)
    err = cu->api.cuEventCreate(&g->done[i], CU_EVENT_DISABLE_TIMING);
  if (err != CUDA_SUCCESS) {
    cuda_cg_end(cu, g);
    return cuda_fail(cu, err, "making CG's scalars on the device");
  }
  *state = g;
  return 0;
}

/* (p, q) of step it into the state */
int cuda_cg_pq(void *impl, void *state, const fe_buffer *p, const fe_buffer *q, size_t n,
               fe_precision prec, int it)
{
  cuda_impl *cu = impl;
  cuda_cg *g = state;
  FE_CHECK(fe_vectors_check("cg_pq", "pq", FE_VECTORS(p, q), n, prec));
  CUdeviceptr pp = (CUdeviceptr)(size_t)p->ptr, pq = (CUdeviceptr)(size_t)q->ptr;
  long long nn = (long long)n;
  int k = it & 1;
  g->from_parts[k] = 0; /* this pass writes the step's (p, q) */
  void *params[] = {&pp, &pq, &nn, &cu->vector.scratch, &g->c, &k};
  size_t blocks = cuda_vector_blocks(cu, n, REDUCE_BLOCKS_PER_SM, (size_t)cu->vector.max_blocks);
  return cuda_run(cu, cu->vector.cg_pq[prec], "fe_vec_cg_pq", blocks, VECTOR_BLOCK, 0, params,
                  NULL);
}

/* Step it's update, the copy of its scalars to the host, and its direction, all queued
 * (half 1: the update and the copy; 3: the update alone, the node's sums making the copy;
 * 2: the direction). */
int cuda_cg_step(void *impl, void *state, fe_buffer *x, fe_buffer *r, fe_buffer *p,
                 const fe_buffer *q, const fe_buffer *d, size_t n, fe_precision prec, int it,
                 int half)
{
  cuda_impl *cu = impl;
  cuda_cg *g = state;
  FE_CHECK(fe_vectors_check("cg_step", "xrpq", FE_VECTORS(x, r, p, q), n, prec));
  if (d) FE_CHECK(fe_vectors_check("cg_step", "d", FE_VECTORS(d), n, prec));
  CUdeviceptr px = (CUdeviceptr)(size_t)x->ptr, pr = (CUdeviceptr)(size_t)r->ptr;
  CUdeviceptr pp = (CUdeviceptr)(size_t)p->ptr, pq = (CUdeviceptr)(size_t)q->ptr;
  CUdeviceptr pd = d ? (CUdeviceptr)(size_t)d->ptr : 0; /* null: no preconditioner */
  long long nn = (long long)n;
  int k = it & 1, slot = it % CG_RING;
  CUdeviceptr slot_parts = g->parts + (size_t)k * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
  if (half != 2) {
    CUdeviceptr parts = g->from_parts[k] ? slot_parts : 0; /* summed here, or (p, q) given */
    g->zero_parts[k] |= g->from_parts[k];
    g->from_parts[k] = 0;
    void *update[] = {&px, &pr, &pp, &pq, &pd, &nn, &cu->vector.scratch, &g->c, &k, &parts};
    size_t blocks = cuda_vector_blocks(cu, n, REDUCE_BLOCKS_PER_SM, (size_t)cu->vector.max_blocks);
    FE_CHECK(cuda_run(cu, cu->vector.cg_update_at[prec], "fe_vec_cg_update_at", blocks,
                      VECTOR_BLOCK, 0, update, NULL));
    if (half == 3) return 0;
    CUresult err = cu->api.cuMemcpyDtoHAsync(g->host + 4 * slot, g->c + 4 * k * sizeof(double),
                                             3 * sizeof(double), NULL);
    if (err == CUDA_SUCCESS) err = cu->api.cuEventRecord(g->done[slot], NULL);
    if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "copying CG's scalars to the host");
  }
  if (half == 1) return 0;
  CUdeviceptr zero = g->zero_parts[k] ? slot_parts : 0; /* the parts the step summed */
  g->zero_parts[k] = 0;
  void *direction[] = {&pp, &pr, &pd, &px, &nn, &g->c, &k, &zero};
  return cuda_vector_run(cu, cu->vector.cg_direction_at[prec], "fe_vec_cg_direction_at", n,
                         direction);
}

/* Queue a sum over the node's ranks of n of the state's scalars from at (backend.h). */
static int cuda_node_sum(cuda_impl *cu, cuda_cg *g, int at, int n, int kind, const fe_node_sum *ns,
                         CUdeviceptr parts)
{
  CUdeviceptr c = g->c, corr = ns->corr ? (CUdeviceptr)(size_t)ns->corr->ptr : 0;
  CUdeviceptr box = (CUdeviceptr)(size_t)ns->box->ptr, peers = (CUdeviceptr)(size_t)ns->peers->ptr;
  int ncorr = ns->ncorr, cfloat = ns->corr_prec == FE_FLOAT, rank = ns->rank, size = ns->size;
  double seq = ns->seq;
  void *params[] = {&c,    &at,   &n,    &corr, &ncorr, &cfloat, &box,
                    &peers, &rank, &size, &seq, &kind,  &parts};
  return cuda_run(cu, cu->vector.cg_node_sum, "fe_vec_cg_node_sum", 1, 1, 0, params, NULL);
}

/* A split space's step it: its (p, q) read (its parts summed on the device first) or set, its
 * (r, r) and (r, z) set, from page-locked slots of the ring; or both made the node's sums on
 * the device (backend.h's cg_split). */
int cuda_cg_split(void *impl, void *state, int it, int what, double *v, const fe_node_sum *ns)
{
  cuda_impl *cu = impl;
  cuda_cg *g = state;
  int k = it & 1, slot = it % CG_RING;
  double *put = g->host + 4 * CG_RING + 4 * slot;
  CUdeviceptr at = g->c + 4 * k * sizeof(double);
  CUresult err = CUDA_SUCCESS;
  CUdeviceptr parts = 0; /* the step's (p, q) parts, summed here (a node's sum adds them) */
  if ((what == FE_CG_PQ_READ || what == FE_CG_PQ_NODE) && g->from_parts[k]) {
    parts = g->parts + (size_t)k * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
    void *params[] = {&g->c, &k, &parts};
    if (what == FE_CG_PQ_READ)
      FE_CHECK(cuda_run(cu, cu->vector.cg_pq_parts[FE_DOUBLE], "fe_vec_cg_pq_parts", 1, 1, 0,
                        params, NULL));
    g->zero_parts[k] = 1;
    g->from_parts[k] = 0;
  }
  if (what == FE_CG_PQ_READ) {
    err = cu->api.cuMemcpyDtoH(put, at, sizeof(double)); /* after the step's work so far */
    v[0] = put[0];
  } else if (what == FE_CG_PQ_PUT) {
    put[0] = v[0];
    g->from_parts[k] = 0;
    err = cu->api.cuMemcpyHtoDAsync(at, put, sizeof(double), NULL);
  } else if (what == FE_CG_SUMS_PUT) {
    put[1] = v[0];
    put[2] = v[1];
    err = cu->api.cuMemcpyHtoDAsync(at + sizeof(double), put + 1, 2 * sizeof(double), NULL);
  } else if (what == FE_CG_PQ_NODE) {
    FE_CHECK(cuda_node_sum(cu, g, 4 * k, 1, 0, ns, parts));
  } else { /* FE_CG_SUMS_NODE: the sums, then the step's copy for cg_wait made again */
    FE_CHECK(cuda_node_sum(cu, g, 4 * k + 1, 2, 1, ns, 0));
    err = cu->api.cuMemcpyDtoHAsync(g->host + 4 * slot, at, 3 * sizeof(double), NULL);
    if (err == CUDA_SUCCESS) err = cu->api.cuEventRecord(g->done[slot], NULL);
  }
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "moving a split CG step's scalars");
  return 0;
}

/* Step it's (p, q) parts for an apply to add its element quadratic forms into: zero (at the
 * start, and after step it - 2's direction, which zeroes those it summed) */
int cuda_cg_parts(void *impl, void *state, int it, fe_buffer *parts, int *slot)
{
  (void)impl;
  cuda_cg *g = state;
  int k = it & 1;
  parts->ptr = (void *)(size_t)g->parts;
  parts->bytes = 2 * FE_PQ_PARTS * FE_PQ_STRIDE * sizeof(double);
  *slot = k;
  g->from_parts[k] = 1;
  return 0;
}

/* Wait for step it's scalars (the step must have been queued, and no later step of its
 * slot in the ring). */
int cuda_cg_wait(void *impl, void *state, int it, double *pq, double *rr, double *rz)
{
  cuda_impl *cu = impl;
  cuda_cg *g = state;
  int slot = it % CG_RING;
  CUresult err = cu->api.cuEventSynchronize(g->done[slot]);
  if (err != CUDA_SUCCESS) return cuda_fail(cu, err, "waiting for CG's scalars");
  *pq = g->host[4 * slot];
  *rr = g->host[4 * slot + 1];
  *rz = g->host[4 * slot + 2];
  return 0;
}
