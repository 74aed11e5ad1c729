/* amg's V-cycle on the solve's backend (cycle_on = "device"): hypre keeps the setup (the
 * coarsening, the interpolations P_l, the Galerkin products A_{l+1} = P_l^T A_l P_l); its
 * hierarchy moves to the device once (A_l, P_l and R_l = P_l^T, transposed here; CSR on a
 * CPU, SELL-C-sigma on a GPU: fe_csr_from_host) and each application cycles there with
 * felab's own passes (sparse.knl's fe_csr_cycle and fe_sell_cycle, one item a row):
 *   down   x_l = D_l b_l, then x_l += D_l (b_l - A_l x_l) once more   (two Jacobi sweeps)
 *          t_l = b_l - A_l x_l,  b_{l+1} = R_l t_l
 *   coarse x_L = A_L^-1 b_L                  (a dense inverse made on the host once)
 *   up     x_l += P_l x_{l+1}
 *          x_l += D_l (b_l - A_l x_l), twice (the same sweeps: the cycle is symmetric)
 * D_l: weighted Jacobi, d_i = min(0.8 / a_ii, 1.6 / sum_j |a_ij|), so that D A's spectrum
 * lies in (0, 1.6] (Gershgorin on the scaled rows): each sweep converges, and the symmetric
 * cycle is SPD (a preconditioner for CG) whatever signs the coarse levels' entries have.
 * Jacobi needs no order of the unknowns (each row alone: one item a row on a GPU); hypre's
 * own cycle smooths with l1 Gauss-Seidel, a sequential sweep. A sweep reads x and writes
 * the other of the level's two vectors (x, t): no copies. No transfer to the host. In a
 * double solve the levels' A, P and R keep their values in single precision by default
 * (cycle_values = "single"): the passes are memory-bound and read 8 bytes an entry for 12;
 * every sum, scaling and vector stays double, and R = P^T holds bit for bit (both rounded
 * alike), so the cycle stays symmetric. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix.h"
#include "engine/operator/strategy.h"
#include "engine/solve/precond/amg-cycle.h"

#define AMG_LEVELS 40   /* hypre's default most */
#define AMG_DENSE 1024  /* the coarsest's rows solved by a dense inverse, at most */
#define AMG_SWEEPS 20   /* above: l1-Jacobi sweeps there */
#define AMG_ITEMS 128   /* sparse.knl's items per group */
#define AMG_TAIL 256    /* the levels from the first of at most these rows on cycle in one group
                         * (sparse.knl's fe_cycle_tail: one launch for some thirty) */
#define AMG_TAIL_META 8 /* sparse.knl's FE_TL_META */
#define AMG_NU 2        /* Jacobi sweeps down and up on a level (measured: 1 took 1.3-1.9x the
                         * host cycle's CG iterations, 2 the same within 12%, elasticity Q2 28%);
                         * sweeps() takes any count */

typedef struct amg_level {
  int n;
  fe_csr *A, *P, *R;      /* P and R: NULL on the coarsest */
  fe_kernel *ka, *kp;     /* A's and P's cycle pass (their modules': lanes differ) */
  fe_vector *d, *b, *x, *t;
  int launches;           /* of its passes in one cycle */
} amg_level;

struct amg_cycle {
  fe_backend *be;
  fe_precision prec;
  int L;
  amg_level lv[AMG_LEVELS];
  fe_csr *inv;            /* the coarsest's dense inverse, or NULL (sweeps) */
  int format, lanes;      /* the layout asked (FELAB_CYCLE_FORMAT), or FE_FORMAT_AUTO */
  int single;             /* A, P and R's values float in a double cycle */
  double flops, bytes;
  int launches;
  double *timed;          /* NULL, or each level's seconds (amg_cycle_time: passes waited on) */
  fe_vector *res, *err;   /* cycles > 1: the finest's residual and correction */
  int tail;               /* the first level the tail cycles (one launch), or L: none */
  fe_buffer tmeta, trow, tcol, tval; /* the tail's levels: sparse.knl's fe_cycle_tail */
  fe_vector *tvec;
  fe_kernel *ktail;
  int titems;             /* its group's items */
};

/* R = P^T (n x nc -> nc x n), CSR on the host. */
static int transpose(const amg_host_level *h, int **rp, int **ci, double **va)
{
  const int n = h->n, nc = h->nc, nnz = h->prp[n];
  *rp = calloc((size_t)nc + 2, sizeof(int));
  *ci = malloc(sizeof(int) * ((size_t)nnz + 1));
  *va = malloc(sizeof(double) * ((size_t)nnz + 1));
  FE_ASSERT(*rp && *ci && *va, FE_ERR_MEM, "amg: out of host memory for a restriction");
  for (int k = 0; k < nnz; k++) (*rp)[h->pcol[k] + 2]++;
  for (int j = 0; j < nc; j++) (*rp)[j + 2] += (*rp)[j + 1];
  for (int i = 0; i < n; i++)
    for (int k = h->prp[i]; k < h->prp[i + 1]; k++) {
      int p = (*rp)[h->pcol[k] + 1]++;
      (*ci)[p] = i;
      (*va)[p] = h->pval[k];
    }
  return 0;
}

/* The inverse of the n x n matrix (CSR) by Gauss-Jordan with partial pivoting, dense, into
 * a CSR of full rows. */
static int dense_inverse(const amg_host_level *h, int **rp, int **ci, double **va)
{
  const int n = h->n;
  double *a = calloc((size_t)n * n + 1, sizeof(double)), *b = calloc((size_t)n * n + 1, sizeof(double));
  *rp = malloc(sizeof(int) * ((size_t)n + 1));
  *ci = malloc(sizeof(int) * ((size_t)n * n + 1));
  *va = b;
  if (!a || !b || !*rp || !*ci) {
    free(a);
    FE_ERROR(FE_ERR_MEM, "amg: out of host memory for the coarsest level's inverse (%d rows)", n);
  }
  for (int i = 0; i < n; i++) {
    for (int k = h->arp[i]; k < h->arp[i + 1]; k++) a[(size_t)i * n + h->acol[k]] += h->aval[k];
    b[(size_t)i * n + i] = 1;
  }
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int i = c + 1; i < n; i++)
      if (fabs(a[(size_t)i * n + c]) > fabs(a[(size_t)p * n + c])) p = i;
    if (a[(size_t)p * n + c] == 0) {
      free(a);
      FE_ERROR(FE_ERR_ARG, "amg: the coarsest level's matrix (%d rows) is singular", n);
    }
    for (int j = 0; p != c && j < n; j++) {
      double s = a[(size_t)c * n + j], t = b[(size_t)c * n + j];
      a[(size_t)c * n + j] = a[(size_t)p * n + j], b[(size_t)c * n + j] = b[(size_t)p * n + j];
      a[(size_t)p * n + j] = s, b[(size_t)p * n + j] = t;
    }
    const double inv = 1 / a[(size_t)c * n + c];
    for (int j = 0; j < n; j++) a[(size_t)c * n + j] *= inv, b[(size_t)c * n + j] *= inv;
    for (int i = 0; i < n; i++) {
      const double f = a[(size_t)i * n + c];
      if (i == c || f == 0) continue;
      for (int j = 0; j < n; j++)
        a[(size_t)i * n + j] -= f * a[(size_t)c * n + j], b[(size_t)i * n + j] -= f * b[(size_t)c * n + j];
    }
  }
  free(a);
  for (int i = 0; i <= n; i++) (*rp)[i] = i * n;
  for (size_t k = 0; k < (size_t)n * n; k++) (*ci)[k] = (int)(k % (size_t)n);
  return 0;
}

/* Level l's device data from the host's h (last: the coarsest). */
/* M's cycle pass: sparse.knl's fe_sell_cycle or fe_csr_cycle, from M's own module. */
static int cycle_kernel(amg_cycle *C, const fe_csr *M, fe_kernel **k)
{
  return C->be->ops->kernel(C->be->impl, M->mod, M->format == FE_FORMAT_SELL ? "fe_sell_cycle"
                            : "fe_csr_cycle", k);
}

/* Level h's Jacobi scaling: weighted, bounded by the row. */
static void scaling(const amg_host_level *h, double *d)
{
  for (int i = 0; i < h->n; i++) {
    double s = 0;
    double dg = 0;
    for (int k = h->arp[i]; k < h->arp[i + 1]; k++)
      s += fabs(h->aval[k]), dg += h->acol[k] == i ? h->aval[k] : 0;
    d[i] = s > 0 && dg > 0 ? fmin(0.8 / dg, 1.6 / s) : 0;
  }
}

/* A level's A and its Jacobi scaling on the backend from h's A (rows sorted by column). */
static int level_matrix(fe_backend *be, fe_precision prec, int format, int lanes, int single,
                        const amg_host_level *h, fe_csr **A, fe_vector **dv)
{
  FE_CHECK(fe_csr_from_host(be, prec, format, lanes, single, h->n, h->arp, h->acol, h->aval, A));
  double *d = malloc(sizeof(double) * ((size_t)h->n + 1));
  FE_ASSERT(d, FE_ERR_MEM, "amg: out of host memory for a level's scaling");
  scaling(h, d);
  int rc = fe_vector_create(be, prec, h->n, dv);
  if (!rc) rc = fe_vector_set(*dv, d);
  free(d);
  return rc;
}

struct amg_first {
  int n;
  fe_csr *A;
  fe_vector *d;
};

/* The layout the cycle's matrices take: the device's (FE_FORMAT_AUTO), or FELAB_CYCLE_FORMAT's
 * (csr, csr8: 8 items a row, or sell) for every matrix (the tests: each on a CPU). */
static void cycle_layout(int *format, int *lanes)
{
  const char *f = getenv("FELAB_CYCLE_FORMAT");
  *format = FE_FORMAT_AUTO, *lanes = 0;
  if (f && !strcmp(f, "sell")) *format = FE_FORMAT_SELL;
  if (f && !strncmp(f, "csr", 3)) *format = FE_FORMAT_CSR, *lanes = atoi(f + 3);
}

int amg_cycle_first(fe_backend *be, fe_precision prec, int single, int n, const int *rp,
                    const int *ci, const double *va, amg_first **F)
{
  int format, lanes;
  cycle_layout(&format, &lanes);
  FE_CALLOC(*F, 1, "amg's finest level");
  amg_host_level h = {.n = n, .arp = rp, .acol = ci, .aval = va};
  (*F)->n = n;
  int rc = level_matrix(be, prec, format, lanes, single && prec == FE_DOUBLE, &h, &(*F)->A,
                        &(*F)->d);
  if (rc) {
    amg_first_free(*F);
    *F = NULL;
  }
  return rc;
}

void amg_first_free(amg_first *F)
{
  if (!F) return;
  fe_csr_free(F->A);
  fe_vector_free(F->d);
  free(F);
}

/* Level h on the backend; F: its A and scaling made ahead (taken), or NULL. */
static int level_make(amg_cycle *C, const amg_host_level *h, int last, amg_first *F)
{
  amg_level *v = &C->lv[C->L++]; /* counted first: amg_cycle_free frees what was made */
  v->n = h->n;
  int rc = 0;
  if (F) {
    v->A = F->A, v->d = F->d;
    free(F);
  } else {
    rc = level_matrix(C->be, C->prec, C->format, C->lanes, C->single, h, &v->A, &v->d);
  }
  if (!rc) rc = cycle_kernel(C, v->A, &v->ka);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->b);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->x);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->t);
  FE_CHECK(rc);
  const double w = (double)fe_precision_size(C->prec), a = h->arp[h->n], n = h->n;
  if (!last) {
    int *rp, *ci;
    double *va;
    FE_CHECK(fe_csr_from_host(C->be, C->prec, C->format, C->lanes, C->single, h->n, h->prp,
                              h->pcol, h->pval, &v->P));
    FE_CHECK(cycle_kernel(C, v->P, &v->kp));
    rc = transpose(h, &rp, &ci, &va);
    if (!rc)
      rc = fe_csr_from_host(C->be, C->prec, C->format, C->lanes, C->single, h->nc, rp, ci, va,
                            &v->R);
    free(rp), free(ci), free(va);
    FE_CHECK(rc);
    const double p = h->prp[h->n], nc = h->nc, sweeps = 2 * AMG_NU - 1;
    /* down: the first sweep (d, b read, x written), AMG_NU - 1 sweeps, the residual; restrict;
     * up: correct, AMG_NU sweeps. A sweep after the first: a pass of A, d, b, x read, the
     * other written; the residual: a pass, b, x read, t written; R: a pass, t read, the
     * coarser b written; P: a pass, the coarser x read, x read and written */
    C->flops += 2 * a * (sweeps + 1) + 4 * p + 3 * n * (sweeps + 1);
    C->bytes += 3 * w * n + (sweeps + 1) * fe_csr_matrix_bytes(v->A) + sweeps * 4 * w * n +
                3 * w * n + fe_csr_matrix_bytes(v->R) + w * (n + nc) + fe_csr_matrix_bytes(v->P) +
                w * (nc + 2 * n);
    v->launches = (int)(1 + sweeps + 3);
  } else if (h->n <= AMG_DENSE) {
    int *rp, *ci;
    double *va;
    rc = dense_inverse(h, &rp, &ci, &va);
    if (!rc)
      rc = fe_csr_from_host(C->be, C->prec, C->format, C->lanes, 0, h->n, rp, ci, va, &C->inv);
    free(rp), free(ci), free(va);
    FE_CHECK(rc);
    C->flops += 2.0 * h->n * h->n;
    C->bytes += fe_csr_matrix_bytes(C->inv) + 2 * w * h->n;
    v->launches = 1;
  } else {
    C->flops += AMG_SWEEPS * 2 * a;
    C->bytes += 3 * w * n + (AMG_SWEEPS - 1) * (fe_csr_matrix_bytes(v->A) + 4 * w * n);
    v->launches = AMG_SWEEPS + (AMG_SWEEPS % 2 == 0 ? 0 : 1);
  }
  C->launches += v->launches;
  return 0;
}

/* ---- the tail: the coarse levels in one group ---- */

/* Append the n rows of CSR (rp, ci, va) to the tail's arrays at *nr, *nz: row pointers into
 * the entries. Returns its first row pointer's place. */
static int tail_append(int n, const int *rp, const int *ci, const double *va, int *row, int *col,
                       double *val, int *nr, int *nz)
{
  const int first = *nr, base = *nz;
  for (int i = 0; i <= n; i++) row[(*nr)++] = base + rp[i] - rp[0];
  for (int k = rp[0]; k < rp[n]; k++) col[*nz] = ci[k], val[(*nz)++] = va[k];
  return first;
}

/* The tail from level l0 of lv[0 .. L) on: its levels' matrices (A, P, R; the coarsest's
 * inverse where it has one), scalings and vectors in four arrays on the device. */
static int tail_make(amg_cycle *C, const amg_host_level *lv, int L, int l0)
{
  const int T = L - l0;
  long long rows = 0, nnz = 0, nvec = 0;
  for (int l = l0; l < L; l++) {
    const amg_host_level *h = &lv[l];
    rows += h->n + 1, nnz += h->arp[h->n], nvec += 4LL * h->n;
    if (l < L - 1) rows += h->n + 1 + h->nc + 1, nnz += 2LL * h->prp[h->n];
    else if (h->n <= AMG_DENSE) rows += h->n + 1, nnz += (long long)h->n * h->n;
  }
  int *meta = calloc((size_t)T * AMG_TAIL_META, sizeof(int));
  int *row = malloc(sizeof(int) * (size_t)rows), *col = malloc(sizeof(int) * ((size_t)nnz + 1));
  double *val = malloc(sizeof(double) * ((size_t)nnz + 1));
  double *vec = calloc((size_t)nvec + 1, sizeof(double));
  int rc = meta && row && col && val && vec ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__,
                                                               __func__, "amg: out of host memory "
                                                               "for the cycle's tail");
  int nr = 0, nz = 0, nv = 0;
  for (int l = l0; !rc && l < L; l++) {
    const amg_host_level *h = &lv[l];
    int *m = meta + (size_t)(l - l0) * AMG_TAIL_META;
    m[0] = h->n;
    m[1] = tail_append(h->n, h->arp, h->acol, h->aval, row, col, val, &nr, &nz);
    m[2] = m[3] = -1;
    m[4] = nv;
    scaling(h, vec + nv);
    nv += 4 * h->n;
    int *rp = NULL, *ci = NULL;
    double *va = NULL;
    if (l < L - 1) {
      m[5] = h->nc;
      m[2] = tail_append(h->n, h->prp, h->pcol, h->pval, row, col, val, &nr, &nz);
      rc = transpose(h, &rp, &ci, &va);
      if (!rc) m[3] = tail_append(h->nc, rp, ci, va, row, col, val, &nr, &nz);
    } else if (h->n <= AMG_DENSE) {
      rc = dense_inverse(h, &rp, &ci, &va);
      if (!rc) m[2] = tail_append(h->n, rp, ci, va, row, col, val, &nr, &nz);
    }
    free(rp), free(ci), free(va);
  }
  fe_backend *be = C->be;
  if (!rc) rc = fe_upload_ints(be, meta, (size_t)T * AMG_TAIL_META, &C->tmeta);
  if (!rc) rc = fe_upload_ints(be, row, (size_t)nr, &C->trow);
  if (!rc) rc = fe_upload_ints(be, col, (size_t)nz + 1, &C->tcol);
  if (!rc) rc = fe_upload_reals(be, C->single ? FE_FLOAT : C->prec, val, (size_t)nz + 1, &C->tval);
  if (!rc) rc = fe_vector_create(be, C->prec, nv, &C->tvec);
  if (!rc) rc = fe_vector_set(C->tvec, vec);
  free(meta), free(row), free(col), free(val), free(vec);
  FE_CHECK(rc);
  FE_CHECK(be->ops->kernel(be->impl, C->lv[l0].A->mod, "fe_cycle_tail", &C->ktail));
  C->titems = be->info.max_group < 1024 ? (int)be->info.max_group : 1024;
  C->tail = l0;
  C->launches = 1;
  for (int l = 0; l < l0; l++) C->launches += C->lv[l].launches;
  return 0;
}

/* Rows rp of ci, va with their columns ascending, into *co, *vo (malloc'd): hypre keeps a
 * row's diagonal first, and the SELL copy codes a row's columns as 16-bit differences only
 * where they ascend (engine/matrix/matrix.h). */
static int sort_rows(int n, const int *rp, const int *ci, const double *va, const int **co,
                     const double **vo)
{
  size_t nz = (size_t)rp[n];
  int *c = malloc(sizeof(int) * (nz + 1));
  double *v = malloc(sizeof(double) * (nz + 1));
  *co = c, *vo = v;
  FE_ASSERT(c && v, FE_ERR_MEM, "amg: out of host memory for a level's rows");
#pragma omp parallel for schedule(dynamic, 256)
  for (int i = 0; i < n; i++)
    for (int k = rp[i]; k < rp[i + 1]; k++) { /* insertion: a row's entries are few */
      int j = k;
      for (; j > rp[i] && c[j - 1] > ci[k]; j--) c[j] = c[j - 1], v[j] = v[j - 1];
      c[j] = ci[k], v[j] = va[k];
    }
  return 0;
}

/* lv[0 .. L)'s rows sorted by column (sort_rows) into out: its own A's and P's columns and
 * values (but level 0's A where it was made ahead: skip0); the rest as lv's. The cycle's
 * passes sum each row in that order on every layout. */
static int sorted_levels(const amg_host_level *lv, int L, int skip0, amg_host_level *out)
{
  for (int l = 0; l < L; l++) {
    out[l] = lv[l];
    out[l].acol = out[l].pcol = NULL, out[l].aval = out[l].pval = NULL;
  }
  for (int l = 0; l < L; l++) {
    if (l > 0 || !skip0)
      FE_CHECK(sort_rows(lv[l].n, lv[l].arp, lv[l].acol, lv[l].aval, &out[l].acol, &out[l].aval));
    if (lv[l].prp)
      FE_CHECK(sort_rows(lv[l].n, lv[l].prp, lv[l].pcol, lv[l].pval, &out[l].pcol, &out[l].pval));
  }
  return 0;
}

static void sorted_levels_free(amg_host_level *s, int L)
{
  for (int l = 0; s && l < L; l++) {
    free((void *)s[l].acol), free((void *)s[l].aval);
    free((void *)s[l].pcol), free((void *)s[l].pval);
  }
  free(s);
}

int amg_cycle_make(fe_backend *be, fe_precision prec, int single, const amg_host_level *hyp,
                   int L, amg_first *F, amg_cycle **out)
{
  *out = NULL;
  if (L < 1 || L > AMG_LEVELS) amg_first_free(F);
  FE_ASSERT(L >= 1 && L <= AMG_LEVELS, FE_ERR_ARG, "amg: %d levels (1 to %d)", L, AMG_LEVELS);
  amg_cycle *C = calloc(1, sizeof *C);
  if (!C) amg_first_free(F);
  FE_ASSERT(C, FE_ERR_MEM, "amg: out of host memory for its cycle");
  *C = (amg_cycle){.be = be, .prec = prec, .single = single && prec == FE_DOUBLE};
  cycle_layout(&C->format, &C->lanes); /* the device's, or FELAB_CYCLE_FORMAT's */
  /* the tail: from the first level of at most AMG_TAIL rows (FELAB_CYCLE_TAIL=n: n rows; 0:
   * none, every pass its own launch), where two or more levels are left */
  const char *t = getenv("FELAB_CYCLE_TAIL");
  int most = t && *t ? atoi(t) : AMG_TAIL, l0 = 0;
  while (l0 < L && hyp[l0].n > most) l0++;
  if (F && (F->n != hyp[0].n || L == 1 || (l0 == 0 && most > 0))) { /* not its: or the
                                                        coarsest's, or the tail's */
    amg_first_free(F);
    F = NULL;
  }
  amg_host_level *lv = calloc((size_t)L, sizeof *lv);
  int rc = lv ? sorted_levels(hyp, L, F != NULL, lv)
              : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "amg: out of host memory");
  if (rc) amg_first_free(F);
  for (int l = 0; !rc && l < L; l++) rc = level_make(C, &lv[l], l == L - 1, l == 0 ? F : NULL);
  C->tail = L;
  if (!rc && L - l0 >= 2 && most > 0) rc = tail_make(C, lv, L, l0);
  sorted_levels_free(lv, L);
  if (rc) {
    amg_cycle_free(C);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = C;
  return 0;
}

enum { MG_SMOOTH, MG_FIRST, MG_RESID, MG_ADD }; /* sparse.knl's FE_MG_* */

/* One of sparse.knl's cycle passes (kernel k) over M's rows on level l: y from d, b and x by
 * mode. */
static int pass(amg_cycle *C, int l, const fe_csr *M, fe_kernel *kern, int mode,
                const fe_buffer *d, const fe_buffer *b, const fe_buffer *x, fe_buffer *y)
{
  const int sell = M->format == FE_FORMAT_SELL, rows = sell ? AMG_ITEMS : AMG_ITEMS / M->lanes;
  const int ng = (M->n + rows - 1) / rows;
  if (!ng) return 0;
  fe_arg a[13] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = M->n},
                  {.kind = FE_ARG_INT, .i = mode}};
  int k = 3;
  if (sell) {
    a[k++] = (fe_arg){.kind = FE_ARG_INT, .i = M->chunk};
    a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &M->cstart};
    a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &M->ccol};
    a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &M->perm};
  }
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = sell ? &M->scols : &M->rowptr};
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = sell ? &M->svals : &M->cols};
  if (!sell) a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &M->vals};
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = d};
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = b};
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = x};
  a[k++] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = y};
  double s = 0;
  FE_CHECK(C->be->ops->launch(C->be->impl, kern, (size_t)ng, AMG_ITEMS, k, a, C->prec,
                              C->timed ? &s : NULL));
  if (C->timed) C->timed[l] += s;
  return 0;
}

/* y = M x by M's own product (R and the dense inverse), timed on level l when asked. */
static int product(amg_cycle *C, int l, const fe_csr *M, const fe_buffer *x, fe_buffer *y)
{
  double s = 0;
  FE_CHECK(fe_csr_launch(M, M->spmv, x, y, C->timed ? &s : NULL));
  if (C->timed) C->timed[l] += s;
  return 0;
}

/* count Jacobi sweeps on level l's A from x (zero: from x = 0, the first sweep D b), the
 * result in x: each sweep writes the other of x and t, the first chosen so that the last
 * writes x (a copy where the count cannot: an odd number from a given x). The first sweep
 * from zero reads neither A nor x. */
static int sweeps(amg_cycle *C, int l, int count, int zero, const fe_buffer *b, fe_buffer *x)
{
  amg_level *v = &C->lv[l];
  fe_buffer *in = x, *out = zero && count % 2 ? x : &v->t->buf;
  for (int s = 0; s < count; s++) {
    FE_CHECK(pass(C, l, v->A, v->ka, s == 0 && zero ? MG_FIRST : MG_SMOOTH, &v->d->buf, b, in,
                  out));
    in = out;
    out = out == x ? &v->t->buf : x;
  }
  if (in != x)
    FE_CHECK(C->be->ops->copy(C->be->impl, x, in, (size_t)v->n * fe_precision_size(C->prec)));
  return 0;
}

/* x = the cycle's approximation of A_l^-1 b on level l (b: level l's right-hand side). */
static int cycle(amg_cycle *C, int l, const fe_buffer *b, fe_buffer *x)
{
  amg_level *v = &C->lv[l];
  if (l == C->tail) { /* the levels from here on in one group */
    fe_arg a[10] = {{.kind = FE_ARG_INT, .i = 1},
                    {.kind = FE_ARG_INT, .i = C->L - l},
                    {.kind = FE_ARG_INT, .i = AMG_SWEEPS},
                    {.kind = FE_ARG_BUFFER, .buf = &C->tmeta},
                    {.kind = FE_ARG_BUFFER, .buf = &C->trow},
                    {.kind = FE_ARG_BUFFER, .buf = &C->tcol},
                    {.kind = FE_ARG_BUFFER, .buf = &C->tval},
                    {.kind = FE_ARG_BUFFER, .buf = &C->tvec->buf},
                    {.kind = FE_ARG_BUFFER, .buf = b},
                    {.kind = FE_ARG_BUFFER, .buf = x}};
    double s = 0;
    FE_CHECK(C->be->ops->launch(C->be->impl, C->ktail, 1, (size_t)C->titems, 10, a, C->prec,
                                C->timed ? &s : NULL));
    if (C->timed) C->timed[l] += s;
    return 0;
  }
  if (l == C->L - 1)
    return C->inv ? product(C, l, C->inv, b, x) : sweeps(C, l, AMG_SWEEPS, 1, b, x);
  amg_level *c = &C->lv[l + 1];
  FE_CHECK(sweeps(C, l, AMG_NU, 1, b, x)); /* down */
  FE_CHECK(pass(C, l, v->A, v->ka, MG_RESID, &v->d->buf, b, x, &v->t->buf));
  FE_CHECK(product(C, l, v->R, &v->t->buf, &c->b->buf));
  FE_CHECK(cycle(C, l + 1, &c->b->buf, &c->x->buf));
  FE_CHECK(pass(C, l, v->P, v->kp, MG_ADD, &v->d->buf, b, &c->x->buf, x)); /* up */
  return sweeps(C, l, AMG_NU, 0, b, x);
}

int amg_cycle_apply(amg_cycle *C, int cycles, const fe_vector *r, fe_vector *z)
{
  amg_level *f = &C->lv[0];
  FE_ASSERT(r->n == f->n && z->n == r->n, FE_ERR_ARG, "amg: r has %d entries, the cycle's "
            "finest level %d rows", r->n, f->n);
  FE_CHECK(cycle(C, 0, &r->buf, &z->buf));
  for (int k = 1; k < cycles; k++) { /* z += cycle(r - A z) */
    if (!C->res) FE_CHECK(fe_vector_create(C->be, C->prec, f->n, &C->res));
    if (!C->err) FE_CHECK(fe_vector_create(C->be, C->prec, f->n, &C->err));
    FE_CHECK(pass(C, 0, f->A, f->ka, MG_RESID, &f->d->buf, &r->buf, &z->buf, &C->res->buf));
    FE_CHECK(cycle(C, 0, &C->res->buf, &C->err->buf));
    FE_CHECK(fe_vector_axpby(z, 1, C->err, 1));
  }
  return 0;
}

int amg_cycle_time(amg_cycle *C, double *seconds)
{
  fe_vector *r = NULL, *z = NULL;
  int rc = fe_vector_create(C->be, C->prec, C->lv[0].n, &r);
  if (!rc) rc = fe_vector_fill(r, 1);
  if (!rc) rc = fe_vector_create(C->be, C->prec, C->lv[0].n, &z);
  for (int l = 0; l < C->L; l++) seconds[l] = 0;
  C->timed = seconds;
  if (!rc) rc = amg_cycle_apply(C, 1, r, z);
  C->timed = NULL;
  fe_vector_free(r), fe_vector_free(z);
  FE_CHECK(rc);
  return 0;
}

const char *amg_cycle_format(const amg_cycle *C)
{
  const fe_csr *A = C->lv[0].A, *c = C->lv[C->L - 1].A;
  static const char *const names[2][2] = {{"csr", "csr, coarse levels sell"},
                                          {"sell, coarse levels csr", "sell"}};
  return names[A->format == FE_FORMAT_SELL][c->format == FE_FORMAT_SELL];
}

int amg_cycle_tail(const amg_cycle *C)
{
  return C->tail;
}

void amg_cycle_level(const amg_cycle *C, int l, int *rows, long long *nnz)
{
  *rows = C->lv[l].n;
  *nnz = C->lv[l].A->nnz;
}

void amg_cycle_counts(const amg_cycle *C, double *flops, double *bytes, int *launches,
                      int *dense, double *res_flops, double *res_bytes)
{
  const fe_csr *A = C->lv[0].A;
  const double w = (double)fe_precision_size(C->prec), n = A->n;
  *flops = C->flops;
  *bytes = C->bytes;
  *launches = C->launches;
  *dense = C->inv != NULL;
  /* the residual pass (r, z read, res written) and the correction's add (z, err read, z
   * written) */
  *res_flops = 2.0 * (double)A->nnz + 2 * n;
  *res_bytes = fe_csr_matrix_bytes(A) + 3 * w * n + 3 * w * n;
}

void amg_cycle_free(amg_cycle *C)
{
  if (!C) return;
  for (int l = 0; l < C->L; l++) {
    amg_level *v = &C->lv[l];
    fe_csr_free(v->A), fe_csr_free(v->P), fe_csr_free(v->R);
    fe_vector_free(v->d), fe_vector_free(v->b), fe_vector_free(v->x), fe_vector_free(v->t);
  }
  fe_csr_free(C->inv);
  fe_buffer *bufs[] = {&C->tmeta, &C->trow, &C->tcol, &C->tval};
  for (int i = 0; i < 4; i++)
    if (bufs[i]->ptr) C->be->ops->release(C->be->impl, bufs[i]);
  fe_vector_free(C->tvec);
  fe_vector_free(C->res), fe_vector_free(C->err);
  free(C);
}
