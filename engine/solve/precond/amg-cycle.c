/* amg's V-cycle on the solve's backend (cycle_on = "device"): hypre keeps the setup (the
 * coarsening, the interpolations P_l, the Galerkin products A_{l+1} = P_l^T A_l P_l); its
 * hierarchy moves to the device once, as CSR matrices (A_l, P_l and R_l = P_l^T, transposed
 * here), and each application cycles there with felab's sparse passes (sparse.knl):
 *   down   x_l = D_l b_l, then x_l += D_l (b_l - A_l x_l) once more   (two Jacobi sweeps)
 *          t_l = b_l - A_l x_l,  b_{l+1} = R_l t_l
 *   coarse x_L = A_L^-1 b_L                  (a dense inverse made on the host once)
 *   up     x_l += P_l x_{l+1}
 *          x_l += D_l (b_l - A_l x_l), twice (the same sweeps: the cycle is symmetric)
 * D_l: weighted Jacobi, d_i = min(0.8 / a_ii, 1.6 / sum_j |a_ij|), so that D A's spectrum
 * lies in (0, 1.6] (Gershgorin on the scaled rows): each sweep converges, and the symmetric
 * cycle is SPD (a preconditioner for CG) whatever signs the coarse levels' entries have.
 * Jacobi needs no order of the unknowns (each row alone: one item a row on a GPU); hypre's
 * own cycle smooths with l1 Gauss-Seidel, a sequential sweep. No copy to the host. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix.h"
#include "engine/solve/precond/amg-cycle.h"

#define AMG_LEVELS 40   /* hypre's default most */
#define AMG_DENSE 1024  /* the coarsest's rows solved by a dense inverse, at most */
#define AMG_SWEEPS 20   /* above: l1-Jacobi sweeps there */
#define AMG_ITEMS 128   /* sparse.knl's items per group */
#define AMG_NU 2        /* Jacobi sweeps down and up on a level (measured: 1 took 1.3-1.9x the
                         * host cycle's CG iterations, 2 the same within 12%, elasticity Q2 28%) */

typedef struct amg_level {
  int n;
  fe_csr *A, *P, *R;      /* P and R: NULL on the coarsest */
  fe_vector *d, *b, *x, *t;
} amg_level;

struct amg_cycle {
  fe_backend *be;
  fe_precision prec;
  int L;
  amg_level lv[AMG_LEVELS];
  fe_csr *inv;            /* the coarsest's dense inverse, or NULL (sweeps) */
  fe_kernel *smooth, *residual, *add;
  int sweeps; /* Jacobi sweeps down and up on each level (AMG_NU) */
  double flops, bytes;
  int launches;
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
static int level_make(amg_cycle *C, const amg_host_level *h, int last)
{
  amg_level *v = &C->lv[C->L++]; /* counted first: amg_cycle_free frees what was made */
  v->n = h->n;
  FE_CHECK(fe_csr_from_host(C->be, C->prec, h->n, h->arp, h->acol, h->aval, &v->A));
  double *d = malloc(sizeof(double) * ((size_t)h->n + 1));
  FE_ASSERT(d, FE_ERR_MEM, "amg: out of host memory for a level's scaling");
  for (int i = 0; i < h->n; i++) { /* the scaling: weighted Jacobi, bounded by the row */
    double s = 0;
    double dg = 0;
    for (int k = h->arp[i]; k < h->arp[i + 1]; k++)
      s += fabs(h->aval[k]), dg += h->acol[k] == i ? h->aval[k] : 0;
    d[i] = s > 0 && dg > 0 ? fmin(0.8 / dg, 1.6 / s) : 0;
  }
  int rc = fe_vector_create(C->be, C->prec, h->n, &v->d);
  if (!rc) rc = fe_vector_set(v->d, d);
  free(d);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->b);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->x);
  if (!rc) rc = fe_vector_create(C->be, C->prec, h->n, &v->t);
  FE_CHECK(rc);
  const double w = (double)fe_precision_size(C->prec), a = h->arp[h->n];
  if (!last) {
    int *rp, *ci;
    double *va;
    FE_CHECK(fe_csr_from_host(C->be, C->prec, h->n, h->prp, h->pcol, h->pval, &v->P));
    rc = transpose(h, &rp, &ci, &va);
    if (!rc) rc = fe_csr_from_host(C->be, C->prec, h->nc, rp, ci, va, &v->R);
    free(rp), free(ci), free(va);
    FE_CHECK(rc);
    const double p = h->prp[h->n], n = h->n, nc = h->nc, sweeps = 2 * AMG_NU - 1;
    /* down: a sweep from zero (d and b read, x written), AMG_NU - 1 sweeps, the residual;
     * restrict; up: correct, AMG_NU sweeps. A sweep after the first: a pass of A (values,
     * columns, row pointers; d, b, x read, the result written) and its copy back (2 reals a
     * row); the residual: a pass (b, x read, r written); R and P: passes over P's entries */
    C->flops += 2 * a * (sweeps + 1) + 4 * p + 3 * n * (sweeps + 1);
    C->bytes += 3 * w * n + sweeps * (12 * a + 4 * n + 6 * w * n) + (12 * a + 4 * n + 3 * w * n) +
                (12 * p + 4 * nc + w * (n + nc)) + (12 * p + 4 * n + w * (nc + 2 * n));
    C->launches += (int)(1 + 2 * sweeps + 3);
  } else if (h->n <= AMG_DENSE) {
    int *rp, *ci;
    double *va;
    rc = dense_inverse(h, &rp, &ci, &va);
    if (!rc) rc = fe_csr_from_host(C->be, C->prec, h->n, rp, ci, va, &C->inv);
    free(rp), free(ci), free(va);
    FE_CHECK(rc);
    C->flops += 2.0 * h->n * h->n;
    C->bytes += 12.0 * h->n * h->n + 2 * w * h->n;
    C->launches += 1;
  } else {
    C->flops += AMG_SWEEPS * 2 * a;
    C->bytes += AMG_SWEEPS * (12 * a + 4 * w * h->n);
    C->launches += 2 * AMG_SWEEPS;
  }
  return 0;
}

int amg_cycle_make(fe_backend *be, fe_precision prec, const amg_host_level *lv, int L,
                   amg_cycle **out)
{
  *out = NULL;
  FE_ASSERT(L >= 1 && L <= AMG_LEVELS, FE_ERR_ARG, "amg: %d levels (1 to %d)", L, AMG_LEVELS);
  amg_cycle *C;
  FE_CALLOC(C, 1, "amg's cycle");
  *C = (amg_cycle){.be = be, .prec = prec, .sweeps = AMG_NU};
  int rc = 0;
  for (int l = 0; !rc && l < L; l++) rc = level_make(C, &lv[l], l == L - 1);
  fe_module *mod = rc ? NULL : C->lv[0].A->mod;
  if (!rc) rc = be->ops->kernel(be->impl, mod, "fe_csr_smooth", &C->smooth);
  if (!rc) rc = be->ops->kernel(be->impl, mod, "fe_csr_residual", &C->residual);
  if (!rc) rc = be->ops->kernel(be->impl, mod, "fe_csr_add", &C->add);
  if (rc) {
    amg_cycle_free(C);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = C;
  return 0;
}

/* One of sparse.knl's passes over M's rows: args after the group count and the rows. */
static int pass(amg_cycle *C, fe_kernel *k, const fe_csr *M, int nargs, const fe_arg *rest)
{
  fe_arg a[12];
  int ng = (M->n + AMG_ITEMS - 1) / AMG_ITEMS;
  a[0] = (fe_arg){.kind = FE_ARG_INT, .i = ng};
  a[1] = (fe_arg){.kind = FE_ARG_INT, .i = M->n};
  memcpy(a + 2, rest, sizeof(fe_arg) * (size_t)nargs);
  if (!ng) return 0;
  return C->be->ops->launch(C->be->impl, k, (size_t)ng, AMG_ITEMS, nargs + 2, a, C->prec, NULL);
}

#define BUF(x) {.kind = FE_ARG_BUFFER, .buf = (x)}

/* xo = x + d (b - A x), or with zero xo = d b. */
static int smooth(amg_cycle *C, const amg_level *v, int zero, const fe_buffer *b,
                  const fe_buffer *x, fe_buffer *xo)
{
  fe_arg a[8] = {{.kind = FE_ARG_INT, .i = zero}, BUF(&v->A->rowptr), BUF(&v->A->cols),
                 BUF(&v->A->vals), BUF(&v->d->buf), BUF(b), BUF(zero ? b : x), BUF(xo)};
  return pass(C, C->smooth, v->A, 8, a);
}

/* x = the cycle's approximation of A_l^-1 b on level l (b: level l's right-hand side). */
static int cycle(amg_cycle *C, int l, const fe_buffer *b, fe_buffer *x)
{
  amg_level *v = &C->lv[l];
  if (l == C->L - 1) {
    if (C->inv) return fe_csr_launch(C->inv, C->inv->spmv, b, x, NULL);
    FE_CHECK(smooth(C, v, 1, b, b, x));
    for (int s = 1; s < AMG_SWEEPS; s++) {
      FE_CHECK(smooth(C, v, 0, b, x, &v->t->buf));
      FE_CHECK(C->be->ops->copy(C->be->impl, x, &v->t->buf,
                                (size_t)v->n * fe_precision_size(C->prec)));
    }
    return 0;
  }
  amg_level *c = &C->lv[l + 1];
  FE_CHECK(smooth(C, v, 1, b, b, x)); /* down */
  for (int s = 1; s < C->sweeps; s++) {
    FE_CHECK(smooth(C, v, 0, b, x, &v->t->buf));
    FE_CHECK(C->be->ops->copy(C->be->impl, x, &v->t->buf, (size_t)v->n * fe_precision_size(C->prec)));
  }
  fe_arg r[6] = {BUF(&v->A->rowptr), BUF(&v->A->cols), BUF(&v->A->vals), BUF(b), BUF(x),
                 BUF(&v->t->buf)};
  FE_CHECK(pass(C, C->residual, v->A, 6, r));
  FE_CHECK(fe_csr_launch(v->R, v->R->spmv, &v->t->buf, &c->b->buf, NULL));
  FE_CHECK(cycle(C, l + 1, &c->b->buf, &c->x->buf));
  fe_arg p[5] = {BUF(&v->P->rowptr), BUF(&v->P->cols), BUF(&v->P->vals), BUF(&c->x->buf),
                 BUF(x)};
  FE_CHECK(pass(C, C->add, v->P, 5, p)); /* up */
  for (int s = 0; s < C->sweeps; s++) {
    FE_CHECK(smooth(C, v, 0, b, x, &v->t->buf));
    FE_CHECK(C->be->ops->copy(C->be->impl, x, &v->t->buf, (size_t)v->n * fe_precision_size(C->prec)));
  }
  return 0;
}

int amg_cycle_apply(amg_cycle *C, const fe_vector *r, fe_vector *z)
{
  FE_ASSERT(r->n == C->lv[0].n && z->n == r->n, FE_ERR_ARG, "amg: r has %d entries, the cycle's "
            "finest level %d rows", r->n, C->lv[0].n);
  return cycle(C, 0, &r->buf, &z->buf);
}

void amg_cycle_counts(const amg_cycle *C, double *flops, double *bytes, int *launches,
                      int *dense)
{
  *flops = C->flops;
  *bytes = C->bytes;
  *launches = C->launches;
  *dense = C->inv != NULL;
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
  free(C);
}
