/* felab matrices, the pattern's second pass (fe_operator_assemble, assemble.c; the first is
 * count_rows, pattern.c): each row's columns written sorted, and on the cpu its values
 * summed, row by row from the row's cells: no add is shared (no atomics, reproducible sums),
 * and the element matrices are never all stored. Each thread takes its range of rows in the
 * fill's order chunk by chunk (chunk_cells) and computes the element matrices (variant
 * reg_jac: no stored factors; host-fill.c) in launches of `batch` consecutive cells into its
 * window of W matrices (cell c at slot c mod W), whose front moves on as its rows need: the
 * rows go in the order of their first cells, and on a local mesh the cells of a node lie in a
 * band of the cell order (about a layer of a box), so W is that band, not the mesh. The
 * window outgrows the caches at large sizes, so while a row is summed the next row's
 * matrices are prefetched. A row whose cells do not fit the window (outliers, or a window
 * capped by FELAB_FILL_WINDOW) has them computed apart, gathered into one launch.
 * Scalar rows in double go by cells instead (cell-fill.c: each cell's matrix added to its
 * rows as soon as it is made, what the rows in flight need kept in a ring a quarter of the
 * window's bytes), the same adds in the same order; this file's rows sum the rest (several
 * components, single precision, rows of 255 columns or more, and the rows apart).
 * Elsewhere the device adds stored element matrices into the pattern (fe_assemble). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/matrix/matrix-private.h"

/* Add row (b_a, k) of each of node a's deg cells, from its slot in K (kd: double, else
 * float), into acc; at[b]: node b's first column in the row (all its components free: column
 * at[b] + kk; none free: a spare slot past the row), or -(first + 1) when some are fixed. */
static void add_cells_row(const pattern *P, const int *cells, int deg, const int *slot,
                          const void *K, size_t kn, int kd, int a, int k, const int *at,
                          double *acc)
{
  const int nb = P->V->elem.nbasis, nc = P->V->ncomp, n = nb * nc, *cn = P->V->cell_nodes;
  for (int i = 0; i < deg; i++) {
    const int *nodes = cn + (size_t)cells[i] * nb;
    int ba = 0;
    for (int b = 1; b < nb; b++) ba = nodes[b] == a ? b : ba; /* no branch to mispredict */
    const size_t off = (size_t)slot[i] * kn + (size_t)(ba * nc + k) * n;
    const double *Kd = (const double *)K + off;
    const float *Kf = (const float *)K + off;
    for (int b = 0; b < nb; b++) {
      int p = at[nodes[b]];
      if (p >= 0 && kd)
        for (int kk = 0; kk < nc; kk++) acc[p + kk] += Kd[b * nc + kk];
      else if (p >= 0)
        for (int kk = 0; kk < nc; kk++) acc[p + kk] += Kf[b * nc + kk];
      else
        for (int kk = 0, q = -p - 1; kk < nc; kk++)
          if (!P->fixed[nodes[b] * nc + kk]) acc[q++] += kd ? Kd[b * nc + kk] : Kf[b * nc + kk];
    }
  }
}

/* add_cells_row for one component in double, nb nodes a cell (a constant where inlined):
 * every neighbour's place is a column or the spare slot (at[b] >= 0), so each entry is one
 * add, unrolled over the cell's nodes (measured: the generic loop's component loop and sign
 * tests cost more than the adds). The diagonal, which every cell adds to, is summed in a
 * register (through acc each of its adds waited on the last one's store) and its adds to
 * acc go to the spare slot. The sums are the same adds in the same order. */
static inline void add_cells_scalar(const int *cn, int nb, const int *cells, int deg,
                                    const int *slot, const double *K, size_t kn, int a,
                                    const int *at, int spare, double *acc)
{
  double diag = 0;
  for (int i = 0; i < deg; i++) {
    const int *nodes = cn + (size_t)cells[i] * nb;
    int ba = 0;
    for (int b = 1; b < nb; b++) ba = nodes[b] == a ? b : ba;
    const double *Kd = K + (size_t)slot[i] * kn + (size_t)ba * nb;
    diag += Kd[ba];
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) acc[b == ba ? spare : at[nodes[b]]] += Kd[b];
  }
  acc[at[a]] = diag;
}

/* Row (a, k)'s sums into acc: the scalar double forms of P1 tets and Q1 hexes inlined. */
static void add_row(const pattern *P, const host_fill *F, const cell_window *w,
                    const int *cells, int deg, const int *slot, int a, int k, const int *at,
                    int spare, double *acc)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes;
  if (P->V->ncomp == 1 && F->dbl && nb == 4)
    add_cells_scalar(cn, 4, cells, deg, slot, w->K, F->kn, a, at, spare, acc);
  else if (P->V->ncomp == 1 && F->dbl && nb == 8)
    add_cells_scalar(cn, 8, cells, deg, slot, w->K, F->kn, a, at, spare, acc);
  else if (P->V->ncomp == 1 && F->dbl)
    add_cells_scalar(cn, nb, cells, deg, slot, w->K, F->kn, a, at, spare, acc);
  else add_cells_row(P, cells, deg, slot, w->K, F->kn, F->dbl, a, k, at, acc);
}

/* Row a (its deg cells) of the second pass into cols (and, with F, vals: each row the sum of
 * its cells' rows, in double, in the order of the cells); next, nnext: the next row's cells
 * (NULL: none to prefetch). Called by threads (a failure: its code). */
int fill_row(const pattern *P, const int *rowptr, int *cols, void *vals, const host_fill *F,
             cell_window *w, int a, const int *cells, int deg, const int *next, int nnext,
             fill_scratch *x)
{
  const int nc = P->V->ncomp, spare = P->maxdeg * P->V->elem.nbasis * nc + nc;
  int *seen = fill_seen(P, x);
  if (!seen || (!x->at && !(x->at = malloc(sizeof(int) * ((size_t)P->V->nnodes + 1)))))
    return FE_ERR_MEM;
  const int m = node_neighbours(P, a, cells, deg, seen, x->nbr, 1);
  for (int i = 0; w->given && i < deg; i++) x->slot[i] = w->base + i; /* made already */
  int rc = F && m && !w->given ? window_row(F, P, w, cells, deg, x) : 0, len = 0, k0 = 0;
  if (rc) return rc;
  if (F && next) window_prefetch(F, w, next, nnext);
  while (k0 < nc && P->fixed[a * nc + k0]) k0++;
  int *row0 = k0 < nc ? cols + rowptr[a * nc + k0] : NULL; /* the first free row's columns */
  for (int i = 0; i < m; i++) { /* each neighbour's place, its columns in row0 */
    const int b = x->nbr[i], f = P->nfree[b];
    x->at[b] = f == nc ? len : f ? -len - 1 : spare; /* none free: a spare slot past any row */
    if (row0 && f == nc)
      for (int kk = 0; kk < nc; kk++) row0[len + kk] = b * nc + kk;
    else if (row0)
      for (int kk = 0, q = len; kk < nc; kk++)
        if (!P->fixed[b * nc + kk]) row0[q++] = b * nc + kk;
    len += f;
  }
  for (int k = 0; k < nc; k++) {
    const int gi = a * nc + k, r0 = rowptr[gi];
    int *row = cols + r0, rl = 1;
    double *acc = x->acc;
    if (P->fixed[gi]) { /* the identity's row */
      row[0] = gi;
      acc[0] = 1;
    } else {
      rl = len;
      if (row != row0) memcpy(row, row0, sizeof(int) * (size_t)len); /* every free row alike */
      if (!F) continue;
      for (int i = 0; i < len; i++) acc[i] = 0;
      add_row(P, F, w, cells, deg, x->slot, a, k, x->at, spare, acc);
    }
    if (!F) continue;
    if (F->dbl) memcpy((double *)vals + r0, acc, sizeof(double) * (size_t)rl);
    else
      for (int i = 0; i < rl; i++) ((float *)vals)[r0 + i] = (float)acc[i];
  }
  return 0;
}

int *fill_seen(const pattern *P, fill_scratch *x)
{
  const int nn = P->V->nnodes;
  if (!x->seen && (x->seen = malloc(sizeof(int) * ((size_t)nn + 1))))
    for (int a = 0; a < nn; a++) x->seen[a] = -1;
  return x->seen;
}

static void scratch_free(fill_scratch *x)
{
  free(x->ids), free(x->gcells), free(x->gmaps), free(x->seen), free(x->at), free(x->nbr);
  free(x->pcells), free(x->prow), free(x->pstart);
  free(x->atb);
  free(x->slot), free(x->gaux), free(x->acc), free(x->cstart), free(x->list);
}

/* A thread's scratch (0, or FE_ERR_MEM). */
static int scratch_make(const pattern *P, const host_fill *F, fill_scratch *x)
{
  const int nb = P->V->elem.nbasis, nc = P->V->ncomp, d = P->maxdeg;
  const size_t most = (size_t)d * nb + 1, batch = F ? (size_t)F->batch : 0;
  const size_t cap = (size_t)chunk_cap(P);
  /* cells gathered at once: a row's, or (the fill by cells) a batch and a row's of rows apart */
  const size_t g = (size_t)d + batch;
  *x = (fill_scratch){.gcap = (int)g};
  x->nbr = malloc(sizeof(int) * most);
  x->slot = malloc(sizeof(int) * ((size_t)d + 1));
  x->ids = malloc(sizeof(int) * g);
  x->gcells = malloc(sizeof(int) * g * nb);
  x->gmaps = malloc(sizeof(int) * (g * (F ? F->nbf : 0) + 1));
  x->gaux = malloc(g * (F ? F->aux_bytes : 0) + 1);
  x->pcells = malloc(sizeof(int) * g);
  x->prow = malloc(sizeof(int) * (g + 1));
  x->pstart = malloc(sizeof(int) * (g + 1));
  x->acc = malloc(sizeof(double) * (most + 1) * nc); /* a row and the spare slots past it */
  x->cstart = malloc(sizeof(int) * (cap / 4 + 2));
  x->list = malloc(sizeof(int) * cap);
  if (!x->nbr || !x->slot || !x->ids || !x->gcells || !x->gmaps || !x->gaux || !x->pcells ||
      !x->prow || !x->pstart || !x->acc || !x->cstart || !x->list)
    return FE_ERR_MEM;
  return 0;
}

/* Thread rows [q0, q1) of the fill's order, chunk by chunk (a failure: its code). */
static int fill_range(const pattern *P, const int *rowptr, int *cols, void *vals,
                      const host_fill *F, cell_window *w, int q0, int q1, fill_scratch *x)
{
  const int cap = chunk_cap(P);
  int e = 0;
  for (int q = q0, qn; !e && q < q1; q = qn) {
    qn = chunk_cells(P, q, q1, cap, x->cstart, x->list);
    for (int p = q; !e && p < qn; p++) {
      const int i = p - q, a = P->order ? P->order[p] : p, *cs = x->cstart;
      const int *next = p + 1 < qn ? x->list + cs[i + 1] : NULL;
      e = fill_row(P, rowptr, cols, vals, F, w, a, x->list + cs[i], cs[i + 1] - cs[i], next,
                   next ? cs[i + 2] - cs[i + 1] : 0, x);
    }
  }
  return e;
}

/* Thread rows [a0, a1)'s fill: its window (or with by_cells its plan) made, their bytes over
 * every thread checked at once, then the rows (a failure: its code; a failed check's: *fits). */
static int fill_thread(const pattern *P, const int *rowptr, int *cols, void *vals,
                       const host_fill *F, int by_cells, int a0, int a1, fill_scratch *x,
                       size_t *windows, int *fits)
{
  cell_window w = {0};
  cell_plan c = {0};
  int e = scratch_make(P, F, x);
  if (F) { /* the windows' matrices (or the plans' rings) made once all are known to fit */
    if (by_cells && !e) e = cell_plan_make(F, P, a0, a1, &c);
    else if (!by_cells) window_make(F, P, a0, a1, &w);
    const size_t bytes = by_cells ? cell_plan_bytes(F, P, &c) : window_bytes(F, P, &w);
#pragma omp atomic update
    *windows += bytes;
#pragma omp barrier
#pragma omp single
    *fits = fe_memory_check(*windows, "assemble: the fill's element matrices, a window of cells "
                            "on each of %d threads", omp_get_num_threads());
    if (*fits) e = e ? e : *fits;
    else if (!e && by_cells) e = cell_plan_alloc(F, P, &c);
    else if (!e && !(w.K = malloc(bytes))) e = FE_ERR_MEM;
  }
  if (!e && by_cells) e = fill_by_cells(P, rowptr, cols, vals, F, &c, a0, a1, x);
  else if (!e) e = fill_range(P, rowptr, cols, vals, F, &w, a0, a1, x);
  free(w.K);
  cell_plan_free(&c);
  return e;
}

int fill_by_cells_wanted(const pattern *P, int dbl)
{
  const char *rows = getenv("FELAB_FILL_ROWS"); /* the rows' fill (tests compare the two) */
  return dbl && P->V->ncomp == 1 && !(rows && *rows);
}

int fill_pattern(const pattern *P, const int *rowptr, int *cols, void *vals,
                 const host_fill *F, int *launches, long long *made)
{
  int rc = 0, nl = 0, fits = 0;
  long long nm = 0;
  size_t windows = 0; /* the threads' windows' bytes */
  /* scalar rows in double of at most 254 columns (a column's place in its row is a byte):
   * by cells */
  int by_cells = F && fill_by_cells_wanted(P, F->dbl);
  for (int i = 0; by_cells && i < P->V->ndofs; i++) by_cells = rowptr[i + 1] - rowptr[i] < 255;
#pragma omp parallel reduction(max : rc) reduction(+ : nl, nm)
  {
    int a0, a1;
    node_range(P, omp_get_thread_num(), omp_get_num_threads(), &a0, &a1);
    fill_scratch x;
    /* the private copy of the reduction (which starts at INT_MIN) */
    rc = fill_thread(P, rowptr, cols, vals, F, by_cells, a0, a1, &x, &windows, &fits);
    nl += x.launches;
    nm += x.made;
    scratch_free(&x);
  }
  if (fits) return fe_error_push(fits, __FILE__, __LINE__, __func__); /* the check's message */
  FE_ASSERT(rc != FE_ERR_MEM, FE_ERR_MEM, "out of host memory for the matrix pattern's fill");
  FE_CHECK(rc); /* a launch's error (set by the backend) */
  *launches = nl;
  if (made) *made = nm;
  return 0;
}
