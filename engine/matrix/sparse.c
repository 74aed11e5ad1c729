/* felab matrices, the CSR matrix's products: the fe_spmv kernel (CSR and SELL-C-sigma, from
 * the sparse module), cuSPARSE's product, the SELL copy's layout (rows counted on the device,
 * sorted on the host, chunks of 16-bit or 32-bit columns) and fill, and the matrix's launch,
 * apply, counts, host copy, export and release. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/strbuf.h"
#include "engine/matrix/matrix-private.h"
/* The sparse module's source; single_vals: the matrix's values float in a double module
 * (EM_VAL). */
static int sparse_source(const fe_backend *be, fe_precision prec, int lanes, int single_vals,
                         char **src)
{
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab's sparse products, %s backend, %s precision%s */\n"
                   "#define FE_DOUBLE %d\n#define FE_COLORED 0\n#define EM_LANES %d\n",
                   be->name, fe_precision_name(prec), single_vals ? ", single values" : "",
                   prec == FE_DOUBLE, lanes);
  if (single_vals) fe_strbuf_printf(&b, "#define EM_VAL float\n");
  fe_strbuf_append(&b, be->ops->preamble(be->impl, prec));
  fe_strbuf_append(&b, fe_kernel_template("sparse"));
  fe_strbuf_append(&b, fe_kernel_template("dirichlet"));
  return fe_strbuf_finish(&b, src);
}

int fe_sparse_source(const fe_backend *be, fe_precision prec, int lanes, char **src)
{
  return sparse_source(be, prec, lanes, 0, src);
}

/* The bytes of one of M's values. */
static size_t value_size(const fe_csr *M)
{
  return M->single_vals ? sizeof(float) : fe_precision_size(M->prec);
}

int fe_csr_from_host(fe_backend *be, fe_precision prec, int format, int lanes, int single_vals,
                     int n, const int *rowptr, const int *cols, const double *vals, fe_csr **out)
{
  *out = NULL;
  fe_csr *M;
  FE_CALLOC(M, 1, "a sparse matrix");
  long long nnz = rowptr[n];
  /* the device's layout for long rows on a GPU (a coarse level's: tens to hundreds of
   * entries, which one item would walk alone): CSR with 8 items a row from 24 entries on
   * average, 32 (a warp) from 64; shorter rows go to fe_csr_layout's (SELL on a GPU) */
  const double avg = n ? (double)nnz / n : 0;
  if (format == FE_FORMAT_AUTO && be->info.is_gpu && avg >= 24)
    format = FE_FORMAT_CSR, lanes = avg >= 64 ? 32 : 8;
  *M = (fe_csr){.be = be, .prec = prec, .n = n, .nnz = nnz, .nslots = nnz,
                .lanes = format == FE_FORMAT_CSR && lanes > 0 ? lanes : 1, .format = FE_FORMAT_CSR,
                .single_vals = single_vals && prec == FE_DOUBLE};
  size_t w = value_size(M);
  int rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)n + 1), &M->rowptr);
  if (!rc) rc = be->ops->write(be->impl, &M->rowptr, 0, sizeof(int) * ((size_t)n + 1), rowptr);
  if (!rc) rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)nnz + 1), &M->cols);
  if (!rc && nnz) rc = be->ops->write(be->impl, &M->cols, 0, sizeof(int) * (size_t)nnz, cols);
  if (!rc) rc = be->ops->alloc(be->impl, w * ((size_t)nnz + 1), &M->vals);
  float *f = NULL;
  if (!rc && nnz && w == sizeof(float) && !(f = malloc(sizeof(float) * (size_t)nnz)))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (long long i = 0; f && i < nnz; i++) f[i] = (float)vals[i];
  if (!rc && nnz) rc = be->ops->write(be->impl, &M->vals, 0, w * (size_t)nnz, f ? (void *)f
                                      : (const void *)vals);
  free(f);
  /* the layout asked, or the device's (fe_csr_layout: SELL-C-sigma on a GPU, CSR on a CPU) */
  fe_matrix_opts lay = {.format = format == FE_FORMAT_SELL ? FE_FORMAT_SELL : FE_FORMAT_AUTO};
  if (format == FE_FORMAT_CSR) lay.format = FE_FORMAT_CSR, lay.lanes = M->lanes;
  fe_csr_layout(&be->info, &lay);
  if (lay.format == FE_FORMAT_SELL)
    M->format = FE_FORMAT_SELL, M->chunk = lay.chunk, M->sigma = lay.sigma,
    M->deltas = lay.deltas == FE_SELL_ON, M->drop_zeros = lay.drop_zeros == FE_SELL_ON;
  double s, host;
  if (!rc) rc = csr_module(M, &s);
  if (!rc && M->format == FE_FORMAT_SELL) rc = csr_make_sell(M, &host, &s);
  if (rc) {
    fe_csr_free(M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = M;
  return 0;
}

/* The sparse modules loaded, one a backend and source, shared by the matrices made from it:
 * an AMG cycle's levels make 14 matrices of three sources, whose loads each of its own took
 * 3.8-5.3 ms of two-scale's Q3 44^3 setup on the H200 (0.3 ms a load). Its kernels set no
 * dynamic shared memory, so one kernel serves every matrix. */
typedef struct shared_module {
  const fe_backend *be;
  char *src;
  fe_module *mod;
  int refs;
  struct shared_module *next;
} shared_module;
static shared_module *modules;
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

/* M->mod from the loaded modules, or compiled (or loaded from the cache) and kept there. */
static int module_take(fe_csr *M, char *src, double *seconds)
{
  pthread_mutex_lock(&modules_lock);
  shared_module *e = modules;
  while (e && (e->be != M->be || strcmp(e->src, src))) e = e->next;
  int rc = 0, cached = 0;
  if (e) {
    e->refs++, M->mod = e->mod, *seconds = 0;
    fe_perf_count_cached(); /* the session's own, as fe_compile counts a memory cache's */
    free(src);
  } else if (!(rc = fe_compile(M->be, src, &M->mod, seconds, &cached))) {
    if ((e = malloc(sizeof *e))) {
      *e = (shared_module){.be = M->be, .src = src, .mod = M->mod, .refs = 1, .next = modules};
      modules = e;
    } else {
      free(src); /* not shared: freed with M alone */
    }
  } else {
    free(src);
  }
  pthread_mutex_unlock(&modules_lock);
  return rc;
}

/* Release M's hold of its module (the module with the last). */
static void module_release(fe_csr *M)
{
  pthread_mutex_lock(&modules_lock);
  shared_module **p = &modules;
  while (*p && (*p)->mod != M->mod) p = &(*p)->next;
  shared_module *e = *p;
  int last = !e || --e->refs == 0;
  if (e && last) *p = e->next, free(e->src), free(e);
  pthread_mutex_unlock(&modules_lock);
  if (last) M->be->ops->module_free(M->be->impl, M->mod);
  M->mod = NULL;
}

/* M's product kernel, from the sparse module (M's lanes). */
int csr_module(fe_csr *M, double *seconds)
{
  char *src;
  FE_CHECK(sparse_source(M->be, M->prec, M->lanes, M->single_vals, &src));
  FE_CHECK(module_take(M, src, seconds));
  return M->be->ops->kernel(M->be->impl, M->mod,
                            M->format == FE_FORMAT_SELL ? "fe_spmv_sell" : "fe_spmv", &M->spmv);
}

/* The library's product (format "cusparse"): its descriptors of M's CSR arrays. */
int csr_make_library(fe_csr *M)
{
  if (!M->be->ops->sparse_make)
    FE_ERROR(FE_ERR_UNAVAILABLE, "format = \"cusparse\" is cuSPARSE's product, on the cuda "
             "backend only (this matrix is on %s); use \"csr\" or \"sell\"", M->be->name);
  return M->be->ops->sparse_make(M->be->impl, M->n, M->nnz, &M->rowptr, &M->cols, &M->vals,
                                 M->prec, &M->sparse);
}

/* ---- SELL-C-sigma ---- */

#define SELL_WIDE 0x40000000 /* sparse.knl's FE_SELL_WIDE: a row whose columns need 32 bits */

void fe_csr_layout(const fe_device_info *info, fe_matrix_opts *mo)
{
  int gpu = info->is_gpu;
  /* format auto: SELL on a GPU unless CSR's lanes are asked (it reaches more of the copy
   * bandwidth there), CSR on a CPU (faster than SELL-8 there): docs/benchmarks.md */
  if (mo->format == FE_FORMAT_AUTO)
    mo->format = gpu && !mo->lanes ? FE_FORMAT_SELL : FE_FORMAT_CSR;
  if (mo->format == FE_FORMAT_CSR && !mo->lanes)
    mo->lanes = gpu ? 4 : 1; /* measured fastest (P1) */
  if (mo->format != FE_FORMAT_SELL) return;
  /* C: a warp on a GPU (32; two chunks to an AMD wavefront), so a chunk's items read
   * consecutive slots in one coalesced step; 8 on the cpu (a vector of doubles). sigma: on a
   * GPU 128 chunks, enough rows to sort a space whose nodes of several kinds (a P2 vertex's
   * row of 65 entries, an edge's of 13-27) take turns in blocks of 32 vertices (the dof map:
   * engine/fem/space-number.c) into chunks of one kind: on the H200, fp64, a P2 box's
   * Jacobi-PCG 1.086 ms an iteration with 8 chunks, 0.943 with 128, the torso's 0.962 and
   * 0.793; P1 and Q1 the same either way (their rows one kind: the sort moves none); on the
   * cpu 8 chunks (its rows read x in their own order, CSR's). */
  if (!mo->chunk) mo->chunk = gpu ? 32 : 8;
  if (!mo->sigma) mo->sigma = (gpu ? 128 : 8) * mo->chunk;
  /* the copy's columns as 16-bit differences and its zeros dropped, unless the environment
   * says otherwise (FELAB_SELL_DELTA=0, FELAB_SELL_ZEROS=keep: the measurements' way back) */
  const char *d = getenv("FELAB_SELL_DELTA"), *z = getenv("FELAB_SELL_ZEROS");
  if (!mo->deltas) mo->deltas = d && !strcmp(d, "0") ? FE_SELL_OFF : FE_SELL_ON;
  if (!mo->drop_zeros) mo->drop_zeros = z && !strcmp(z, "keep") ? FE_SELL_OFF : FE_SELL_ON;
}

/* Check the asked layout of the product (mo's format, chunk, sigma, deltas, drop_zeros; lanes:
 * CSR's items per row). */
int check_format(const fe_matrix_opts *mo, int lanes)
{
  const int format = mo->format, chunk = mo->chunk, sigma = mo->sigma;
  FE_ASSERT(mo->deltas >= FE_SELL_AUTO && mo->deltas <= FE_SELL_OFF && mo->drop_zeros >=
            FE_SELL_AUTO && mo->drop_zeros <= FE_SELL_OFF, FE_ERR_ARG, "deltas = %d, drop_zeros "
            "= %d: each is FE_SELL_AUTO, _ON or _OFF", mo->deltas, mo->drop_zeros);
  FE_ASSERT(format == FE_FORMAT_SELL || (!mo->deltas && !mo->drop_zeros), FE_ERR_ARG, "%s is "
            "an option of format = \"sell\" (its copy's %s), not of CSR",
            mo->deltas ? "deltas" : "zeros", mo->deltas ? "columns" : "values");
  FE_ASSERT(format >= FE_FORMAT_AUTO && format <= FE_FORMAT_CUSPARSE, FE_ERR_ARG, "format = %d: "
            "the product's layout is FE_FORMAT_AUTO, _CSR, _SELL or _CUSPARSE", format);
  FE_ASSERT(chunk >= 0 && chunk <= 1024, FE_ERR_ARG, "chunk = %d: the rows per SELL chunk must "
            "be in 1..1024 (a chunk is read by one group of items; 0: the device's)", chunk);
  FE_ASSERT(sigma >= 0, FE_ERR_ARG, "sigma = %d: the rows per SELL sorting window must be >= 1 "
            "(1: no sorting; 0: the device's)", sigma);
  FE_ASSERT(format == FE_FORMAT_SELL || (!chunk && !sigma), FE_ERR_ARG, "%s = %d is an option "
            "of format = \"sell\" (SELL-C-sigma), not of CSR", chunk ? "chunk" : "sigma",
            chunk ? chunk : sigma);
  FE_ASSERT(format != FE_FORMAT_SELL || !lanes, FE_ERR_ARG, "lanes = %d is CSR's (items per "
            "row); format = \"sell\" runs one item per row", lanes);
  FE_ASSERT(format != FE_FORMAT_CUSPARSE || !lanes, FE_ERR_ARG, "lanes = %d is felab's CSR "
            "product's; format = \"cusparse\" runs cuSPARSE's", lanes);
  return 0;
}

/* Sort keys: shorter rows sort later, ties in row order (reproducible). */
static int cmp_key(const void *a, const void *b)
{
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* The SELL copy's shape (csr_make_sell): perm[p], the row at position p; the chunks' value
 * slots (cstart) and column words (ccol: ~ of a 32-bit chunk's), nchunks + 1 each, the last
 * their totals; all malloc'd. */
typedef struct sell_shape {
  int *perm, *cstart, *ccol;
  long long nslots, ncolw, nkept;
  int nwide;
} sell_shape;

/* perm: the n rows sorted by their kept entries (len, less FE_SELL_WIDE), longest first,
 * within windows of sigma rows. Returns 1 when out of memory. */
static int sell_sort(const int *len, int n, int sigma, int *perm)
{
  int nwin = (int)(((long long)n + sigma - 1) / sigma), failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    const int m = sigma < n ? sigma : n;
    long long *key = m > 1 ? malloc(sizeof(long long) * (size_t)m) : NULL;
    if (m > 1 && !key) failed = 1;
#pragma omp for schedule(dynamic, 16)
    for (int b = 0; b < nwin; b++) {
      const int lo = (int)((long long)b * sigma), hi = n - lo < sigma ? n : lo + sigma;
      if (failed || !key) {
        for (int i = lo; i < hi; i++) perm[i] = i;
        continue;
      }
      /* key: (INT_MAX - length) above the row, so ascending keys put long rows first */
      for (int i = lo; i < hi; i++)
        key[i - lo] = (long long)(2147483647 - (len[i] & ~SELL_WIDE)) << 32 | i;
      qsort(key, (size_t)(hi - lo), sizeof *key, cmp_key);
      for (int i = lo; i < hi; i++) perm[i] = (int)(key[i - lo] & 0xffffffffLL);
    }
    free(key);
  }
  return failed;
}

/* The SELL-C-sigma shape of n rows of len[i] kept entries (fe_sell_count's, FE_SELL_WIDE
 * marking a row whose columns need 32 bits): rows sorted (sell_sort), each chunk of C
 * positions C times its longest row of value slots, and of column words C (the lanes' first
 * columns) and its slots after the first, 16-bit (two of a lane a word, its last alone where
 * they are odd) unless deltas is off or a row of it is wide. */
static int sell_layout(const int *len, int n, int C, int sigma, int deltas, sell_shape *L)
{
  int nchunks = (int)(((long long)n + C - 1) / C);
  FE_ASSERT((long long)nchunks * C <= 2147483647LL, FE_ERR_ARG, "%d rows in chunks of %d pass "
            "2^31 positions (int indices)", n, C);
  *L = (sell_shape){.perm = malloc(sizeof(int) * ((size_t)n + 1)),
                    .cstart = malloc(sizeof(int) * ((size_t)nchunks + 1)),
                    .ccol = malloc(sizeof(int) * ((size_t)nchunks + 1))};
  int failed = !L->perm || !L->cstart || !L->ccol;
  if (!failed) failed = sell_sort(len, n, sigma, L->perm);
  long long s = 0, cw = 0;
  for (int k = 0; k < nchunks && !failed; k++) {
    int w = 0, wide = !deltas, end = n - k * C < C ? n : (k + 1) * C;
    for (int p = k * C; p < end; p++) {
      const int e = len[L->perm[p]];
      if ((e & ~SELL_WIDE) > w) w = e & ~SELL_WIDE;
      wide |= (e & SELL_WIDE) != 0;
      L->nkept += e & ~SELL_WIDE;
    }
    const long long after = w ? (long long)(w - 1) * C : 0; /* the slots after the first */
    L->cstart[k] = (int)s;
    L->ccol[k] = wide ? ~(int)cw : (int)cw;
    s += (long long)C * w;
    cw += C + (wide ? after : (long long)C * (w / 2)); /* 16-bit: a lane's slots in pairs */
    L->nwide += wide;
    if (s > 2147483647LL || cw > 2147483647LL) failed = 2;
  }
  if (failed) {
    free(L->perm), free(L->cstart), free(L->ccol);
    *L = (sell_shape){0};
    FE_ASSERT(failed != 2, FE_ERR_ARG, "the SELL layout (chunk = %d, sigma = %d) passes 2^31 "
              "slots or column words (int indices)", C, sigma);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the SELL layout of %d rows", n);
  }
  L->cstart[nchunks] = (int)s;
  L->ccol[nchunks] = (int)cw;
  L->nslots = s;
  L->ncolw = cw;
  return 0;
}

/* len[n]: each of M's rows' entries the SELL copy keeps, by fe_sell_count on the device (the
 * values never leave it), read back; *seconds: the kernel's. */
static int sell_count(fe_csr *M, fe_kernel *count, int *len, double *seconds)
{
  fe_backend *be = M->be;
  fe_buffer out = {0};
  int ng = (int)(((long long)M->n + EM_ITEMS - 1) / EM_ITEMS);
  int rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)M->n + 1), &out);
  fe_arg args[7] = {
      {.kind = FE_ARG_INT, .i = ng},
      {.kind = FE_ARG_INT, .i = M->n},
      {.kind = FE_ARG_INT, .i = M->drop_zeros},
      {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
      {.kind = FE_ARG_BUFFER, .buf = &M->cols},
      {.kind = FE_ARG_BUFFER, .buf = &M->vals},
      {.kind = FE_ARG_BUFFER, .buf = &out},
  };
  if (!rc && ng) rc = be->ops->launch(be->impl, count, (size_t)ng, EM_ITEMS, 7, args, M->prec,
                                      seconds);
  if (!rc && M->n) rc = be->ops->read(be->impl, &out, 0, sizeof(int) * (size_t)M->n, len);
  if (out.ptr) be->ops->release(be->impl, &out);
  return rc;
}

/* The SELL copy's shape on the device: its arrays uploaded and allocated, M's counts set. */
static int sell_upload(fe_csr *M, const sell_shape *L)
{
  fe_backend *be = M->be;
  M->nslots = L->nslots;
  M->ncolw = L->ncolw;
  M->nkept = L->nkept;
  M->nwide = L->nwide;
  size_t slots = (size_t)M->nslots + 1, words = (size_t)M->ncolw + 1;
  /* host memory where the backend's buffers are (the cpu), else the device's */
  FE_CHECK(fe_memory_check_on(be, slots * value_size(M) + words * sizeof(int), "assemble: the "
                              "SELL copy's %lld slots (chunk = %d, sigma = %d)", M->nslots,
                              M->chunk, M->sigma));
  int rc = fe_upload_ints(be, L->cstart, (size_t)M->nchunks + 1, &M->cstart);
  if (!rc) rc = fe_upload_ints(be, L->ccol, (size_t)M->nchunks + 1, &M->ccol);
  if (!rc) rc = fe_upload_ints(be, L->perm, (size_t)M->n, &M->perm);
  if (!rc) rc = be->ops->alloc(be->impl, words * sizeof(int), &M->scols);
  if (!rc) rc = be->ops->alloc(be->impl, slots * value_size(M), &M->svals);
  return rc;
}

/* M's SELL-C-sigma copy (M->chunk, sigma, deltas, drop_zeros set, its values filled): each
 * row's kept entries counted on the device (fe_sell_count), the layout on the host from
 * them, the slots moved on the device by fe_sell_fill (the values never leave it). *host:
 * the host's seconds; *seconds: the kernels'. */
int csr_make_sell(fe_csr *M, double *host, double *seconds)
{
  double t0 = fe_clock(), kc = 0, kf = 0;
  fe_backend *be = M->be;
  int C = M->chunk, rc = 0;
  M->nchunks = (int)(((long long)M->n + C - 1) / C);
  fe_kernel *count = NULL, *fill = NULL;
  int *len = malloc(sizeof(int) * ((size_t)M->n + 1));
  if (!len) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory "
                              "for the SELL layout of %d rows", M->n);
  if (!rc) rc = be->ops->kernel(be->impl, M->mod, "fe_sell_count", &count);
  if (!rc) rc = sell_count(M, count, len, &kc);
  sell_shape L = {0};
  if (!rc) rc = sell_layout(len, M->n, C, M->sigma, M->deltas, &L);
  free(len);
  if (!rc) rc = sell_upload(M, &L);
  free(L.perm), free(L.cstart), free(L.ccol);
  if (!rc) rc = be->ops->kernel(be->impl, M->mod, "fe_sell_fill", &fill);
  *host = fe_clock() - t0 - kc;
  int npos = M->nchunks * C;
  fe_arg args[13] = {
      {.kind = FE_ARG_INT, .i = (npos + EM_ITEMS - 1) / EM_ITEMS},
      {.kind = FE_ARG_INT, .i = M->n},
      {.kind = FE_ARG_INT, .i = C},
      {.kind = FE_ARG_INT, .i = npos},
      {.kind = FE_ARG_INT, .i = M->drop_zeros},
      {.kind = FE_ARG_BUFFER, .buf = &M->cstart},
      {.kind = FE_ARG_BUFFER, .buf = &M->ccol},
      {.kind = FE_ARG_BUFFER, .buf = &M->perm},
      {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
      {.kind = FE_ARG_BUFFER, .buf = &M->cols},
      {.kind = FE_ARG_BUFFER, .buf = &M->vals},
      {.kind = FE_ARG_BUFFER, .buf = &M->scols},
      {.kind = FE_ARG_BUFFER, .buf = &M->svals},
  };
  if (!rc && npos)
    rc = be->ops->launch(be->impl, fill, (size_t)args[0].i, EM_ITEMS, 13, args, M->prec, &kf);
  *seconds = kc + kf;
  FE_CHECK(rc);
  return 0;
}

/* The matrix's own arguments of a product kernel, after its leading integers: SELL's chunk
 * starts, columns' starts, permutation, column stream and values (5), or CSR's row pointers,
 * columns and values (3); how many were written. */
static int matrix_args(const fe_csr *M, fe_arg *a)
{
  const fe_buffer *b[5] = {&M->cstart, &M->ccol, &M->perm, &M->scols, &M->svals};
  const fe_buffer *c[3] = {&M->rowptr, &M->cols, &M->vals};
  const int sell = M->format == FE_FORMAT_SELL, n = sell ? 5 : 3;
  for (int i = 0; i < n; i++) a[i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = sell ? b[i] : c[i]};
  return n;
}

void fe_csr_launch_groups(const fe_csr *M, long long *groups, int *items)
{
  const long long rows = M->format == FE_FORMAT_SELL ? EM_ITEMS : EM_ITEMS / M->lanes;
  *groups = ((long long)M->n + rows - 1) / rows;
  *items = EM_ITEMS;
}

static int cmp_double(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int fe_csr_first_groups(const fe_csr *M, long long groups, double *q, int nq)
{
  if (M->format == FE_FORMAT_CUSPARSE || groups <= 0 || nq < 1) return 1;
  const int sell = M->format == FE_FORMAT_SELL;
  const long long rows = sell ? EM_ITEMS : EM_ITEMS / M->lanes; /* a group's */
  long long all;
  int items;
  fe_csr_launch_groups(M, &all, &items);
  const double whole = sell ? (double)M->nslots : (double)M->nnz;
  if (groups > all) groups = all;
  if (groups <= 0 || !(whole > 0)) return 1;
  /* each group's first and last place: SELL's chunk starts (C rows a chunk), CSR's rows */
  const long long per = sell ? rows / M->chunk : rows, n = sell ? M->nchunks : M->n;
  const long long k = groups * per < n ? groups * per : n;
  int *at = malloc(sizeof(int) * ((size_t)k + 1));
  double *w = malloc(sizeof(double) * (size_t)groups);
  int rc = !at || !w;
  if (!rc) rc = M->be->ops->read(M->be->impl, sell ? &M->cstart : &M->rowptr, 0,
                                 sizeof(int) * ((size_t)k + 1), at);
  for (long long g = 0; !rc && g < groups; g++) {
    const long long e = (g + 1) * per < k ? (g + 1) * per : k;
    w[g] = (at[e] - at[g * per]) / (whole / all); /* over the average group's */
  }
  if (!rc) {
    qsort(w, (size_t)groups, sizeof(double), cmp_double);
    for (int i = 0; i <= nq; i++) q[i] = w[(size_t)((groups - 1) * i / nq)];
  }
  free(at);
  free(w);
  return rc;
}

int fe_csr_launch(const fe_csr *M, fe_kernel *k, const fe_buffer *x, fe_buffer *y, double *seconds)
{
  return fe_csr_launch_pq(M, k, x, y, NULL, -1, seconds);
}

int fe_csr_launch_pq(const fe_csr *M, fe_kernel *k, const fe_buffer *x, fe_buffer *y,
                     const fe_buffer *pq, int pq_slot, double *seconds)
{
  if (M->format == FE_FORMAT_CUSPARSE)
    return M->be->ops->sparse_spmv(M->be->impl, M->sparse, x, y, seconds);
  long long groups;
  int items;
  fe_csr_launch_groups(M, &groups, &items);
  if (M->format == FE_FORMAT_SELL) { /* one item per row */
    int ngs = (int)groups;
    fe_arg args[12] = {{.kind = FE_ARG_INT, .i = ngs}, {.kind = FE_ARG_INT, .i = M->n},
                       {.kind = FE_ARG_INT, .i = M->chunk}};
    int n = 3 + matrix_args(M, args + 3);
    args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = x};
    args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = y};
    args[n++] = (fe_arg){.kind = FE_ARG_INT, .i = pq ? pq_slot : -1};
    args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = pq ? pq : x};
    return M->be->ops->launch(M->be->impl, k, (size_t)ngs, items, n, args, M->prec, seconds);
  }
  int ng = (int)groups;
  fe_arg args[7] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = M->n}};
  int n = 2 + matrix_args(M, args + 2);
  args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = x};
  args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = y};
  return M->be->ops->launch(M->be->impl, k, (size_t)ng, items, n, args, M->prec, seconds);
}

/* ---- the product of some rows ---- */

const char *fe_csr_rows_entry(const fe_csr *M)
{
  if (M->format == FE_FORMAT_CUSPARSE) return NULL;
  return M->format == FE_FORMAT_SELL ? "fe_spmv_sell_rows" : "fe_spmv_rows";
}

/* SELL: the positions of rows[nrows] in M's order (those p whose perm[p] is listed),
 * ascending, into pos[nrows]; perm read from the device. */
static int sell_positions(const fe_csr *M, const int *rows, int nrows, int *pos)
{
  int *perm = malloc(sizeof(int) * ((size_t)M->n + 1));
  char *on = calloc((size_t)M->n + 1, 1);
  int rc = !perm || !on ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host "
                                       "memory for the SELL order of %d rows", M->n) : 0;
  if (!rc && M->n) rc = M->be->ops->read(M->be->impl, &M->perm, 0, sizeof(int) * (size_t)M->n, perm);
  for (int i = 0; !rc && i < nrows; i++) on[rows[i]] = 1;
  for (int p = 0, k = 0; !rc && p < M->n && k < nrows; p++)
    if (on[perm[p]]) pos[k++] = p;
  free(perm), free(on);
  return rc;
}

int fe_csr_rows_list(const fe_csr *M, const int *rows, int nrows, fe_buffer *list, long long *nnz)
{
  *nnz = 0;
  FE_ASSERT(fe_csr_rows_entry(M), FE_ERR_UNAVAILABLE, "the product of some rows is felab's "
            "(format \"csr\" or \"sell\"), not cuSPARSE's");
  for (int i = 0; i < nrows; i++)
    FE_ASSERT(rows[i] >= 0 && rows[i] < M->n && (!i || rows[i] > rows[i - 1]), FE_ERR_ARG,
              "row %d of the list is %d: the rows ascend, each below %d", i, rows[i], M->n);
  int *rowptr = malloc(sizeof(int) * ((size_t)M->n + 1));
  int *pos = M->format == FE_FORMAT_SELL ? malloc(sizeof(int) * ((size_t)nrows + 1)) : NULL;
  int rc = !rowptr || (M->format == FE_FORMAT_SELL && !pos)
               ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory "
                              "for a list of %d rows", nrows) : 0;
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->rowptr, 0, sizeof(int) * ((size_t)M->n + 1),
                                 rowptr);
  for (int i = 0; !rc && i < nrows; i++) *nnz += rowptr[rows[i] + 1] - rowptr[rows[i]];
  if (!rc && pos) rc = sell_positions(M, rows, nrows, pos);
  if (!rc && nrows) rc = fe_upload_ints(M->be, pos ? pos : rows, (size_t)nrows, list);
  free(rowptr), free(pos);
  FE_CHECK(rc);
  return 0;
}

int fe_csr_launch_rows(const fe_csr *M, fe_kernel *k, const fe_buffer *list, int nrows,
                       const fe_buffer *x, fe_buffer *y)
{
  if (!nrows) return 0;
  if (M->format == FE_FORMAT_SELL) { /* one item per row */
    int ng = (nrows + EM_ITEMS - 1) / EM_ITEMS;
    fe_arg args[11] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = nrows},
                       {.kind = FE_ARG_INT, .i = M->chunk}, {.kind = FE_ARG_BUFFER, .buf = list}};
    int n = 4 + matrix_args(M, args + 4);
    args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = x};
    args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = y};
    return M->be->ops->launch(M->be->impl, k, (size_t)ng, EM_ITEMS, n, args, M->prec, NULL);
  }
  int per = EM_ITEMS / M->lanes, ng = (nrows + per - 1) / per;
  fe_arg args[8] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = nrows},
                    {.kind = FE_ARG_BUFFER, .buf = list}};
  int n = 3 + matrix_args(M, args + 3);
  args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = x};
  args[n++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = y};
  return M->be->ops->launch(M->be->impl, k, (size_t)ng, EM_ITEMS, n, args, M->prec, NULL);
}

int fe_csr_apply(fe_csr *M, const fe_vector *x, fe_vector **y, fe_report *rep)
{
  FE_ASSERT(x->n == M->n, FE_ERR_ARG, "the vector has %d entries but the matrix has %d rows",
            x->n, M->n);
  fe_vector *xc = NULL;
  double t0 = fe_clock(), transfer = 0, seconds = 0;
  if (x->be != M->be || x->prec != M->prec) {
    FE_CHECK(fe_vector_convert(x, M->be, M->prec, &xc));
    x = xc;
  }
  transfer = fe_clock() - t0;
  int made = *y == NULL, rc = 0;
  if (made) rc = fe_vector_create(M->be, M->prec, M->n, y);
  else FE_ASSERT((*y)->be == M->be && (*y)->prec == M->prec && (*y)->n == M->n, FE_ERR_ARG,
                 "the output vector does not match the matrix");
  if (!rc) rc = fe_csr_launch(M, M->spmv, &x->buf, &(*y)->buf, &seconds);
  fe_vector_free(xc);
  if (rc) {
    if (made) {
      fe_vector_free(*y);
      *y = NULL;
    }
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char why[160];
  if (M->format == FE_FORMAT_SELL)
    fe_csr_sell_describe(M, "one item per row, ", why, sizeof why);
  else if (M->format == FE_FORMAT_CUSPARSE)
    snprintf(why, sizeof why, "cuSPARSE's product (cusparseSpMV) on the CSR arrays");
  else
    snprintf(why, sizeof why, "%s CSR, %d item%s per row", M->lanes > 1 ? "vector" : "scalar",
             M->lanes, M->lanes > 1 ? "s" : "");
  fe_report_begin(rep, "spmv", M->be, M->prec, "csr", why);
  rep->ndofs = M->n;
  fe_csr_counts(M, &rep->flops, &rep->bytes);
  rep->seconds = seconds;
  rep->transfer_seconds = transfer;
  rep->launches = 1;
  return fe_perf_predict(M->be, M->prec, rep);
}

void fe_csr_counts(const fe_csr *M, double *flops, double *bytes)
{
  double w = (double)fe_precision_size(M->prec);
  *flops = 2.0 * (double)M->nnz;
  *bytes = fe_csr_matrix_bytes(M) + 2.0 * M->n * w;
}

/* SELL's copy: every value slot, the column stream, the chunks' starts (values, columns), the
 * permutation. */
static double sell_bytes(const fe_csr *M)
{
  return (double)M->nslots * (double)value_size(M) + 4.0 * (double)M->ncolw +
         8.0 * (M->nchunks + 1) + 4.0 * M->n;
}

double fe_csr_matrix_bytes(const fe_csr *M)
{
  if (M->format == FE_FORMAT_SELL) return sell_bytes(M);
  return (double)M->nnz * ((double)value_size(M) + 4) + (M->n + 1) * 4.0;
}

double fe_csr_bytes(const fe_csr *M)
{
  double csr = (double)M->nnz * ((double)value_size(M) + 4) + (M->n + 1) * 4.0;
  return csr + (M->format == FE_FORMAT_SELL ? sell_bytes(M) : 0);
}

void fe_csr_sell_describe(const fe_csr *M, const char *how, char *buf, size_t n)
{
  int at = snprintf(buf, n, "SELL-%d-%d, %s%.1f%% of the slots padding, %lld zeros dropped, ",
                    M->chunk, M->sigma, how, 100.0 * (double)(M->nslots - M->nkept) /
                    (double)(M->nslots + !M->nslots), M->nnz - M->nkept);
  if (at < 0 || (size_t)at >= n) return;
  if (!M->deltas) snprintf(buf + at, n - (size_t)at, "32-bit columns");
  else if (M->nwide) snprintf(buf + at, n - (size_t)at, "16-bit column deltas (32-bit in %d of %d "
                              "chunks)", M->nwide, M->nchunks);
  else snprintf(buf + at, n - (size_t)at, "16-bit column deltas");
}

const char *fe_csr_format_name(const fe_csr *M)
{
  return M->format == FE_FORMAT_SELL ? "sell" : M->format == FE_FORMAT_CUSPARSE ? "cusparse" : "csr";
}

int fe_csr_get(const fe_csr *M, int **rowptr, int **cols, double **vals)
{
  size_t nz = (size_t)M->nnz, w = value_size(M);
  *rowptr = *cols = NULL, *vals = NULL;
  FE_CHECK(fe_memory_check(sizeof(int) * ((size_t)M->n + 1) + (sizeof(int) + sizeof(double) + w) *
                           nz, "the matrix of %d rows and %lld nonzeros on the host", M->n, M->nnz));
  *rowptr = malloc(sizeof(int) * ((size_t)M->n + 1));
  *cols = malloc(sizeof(int) * (nz + 1));
  *vals = malloc(sizeof(double) * (nz + 1));
  /* single values through a copy of their own; doubles straight into vals */
  float *raw = w == sizeof(double) ? NULL : malloc(w * (nz + 1));
  int rc = 0;
  if (!*rowptr || !*cols || !*vals || (w != sizeof(double) && !raw))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the matrix");
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->rowptr, 0, sizeof(int) * ((size_t)M->n + 1), *rowptr);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->cols, 0, sizeof(int) * nz, *cols);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->vals, 0, w * nz, raw ? (void *)raw : *vals);
  for (size_t i = 0; !rc && raw && i < nz; i++) (*vals)[i] = raw[i];
  free(raw);
  if (rc) {
    free(*rowptr);
    free(*cols);
    free(*vals);
    *rowptr = *cols = NULL;
    *vals = NULL;
  }
  return rc;
}

int fe_csr_export_mtx(const fe_csr *M, const char *path)
{
  int *rowptr, *cols;
  double *vals;
  FE_CHECK(fe_csr_get(M, &rowptr, &cols, &vals));
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f) {
    rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  } else {
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% written by felab\n");
    fprintf(f, "%d %d %lld\n", M->n, M->n, M->nnz);
    for (int i = 0; i < M->n; i++)
      for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
        fprintf(f, "%d %d %.17g\n", i + 1, cols[k] + 1, vals[k]);
    if (fclose(f)) rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  }
  free(rowptr);
  free(cols);
  free(vals);
  return rc;
}

void fe_csr_free(fe_csr *M)
{
  if (!M) return;
  if (M->refs > 0) {
    M->refs--;
    return;
  }
  if (M->kept && *M->kept == M) *M->kept = NULL;
  fe_buffer *bufs[] = {&M->rowptr, &M->cols, &M->vals, &M->cstart, &M->ccol, &M->perm, &M->scols,
                       &M->svals};
  for (int i = 0; i < 8; i++)
    if (bufs[i]->ptr) M->be->ops->release(M->be->impl, bufs[i]);
  if (M->sparse) M->be->ops->sparse_free(M->be->impl, M->sparse);
  if (M->mod) module_release(M);
  free(M);
}
