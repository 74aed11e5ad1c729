/* felab matrices, the cpu's fill of scalar double rows by cells (fill_pattern, pattern-fill.c).
 * The rows' fill (pattern-fill.c) sums each row from its cells' element matrices, which it
 * must keep in a window of cells until the last of their rows is summed: about a layer of a
 * box, 128 bytes a P1 cell, more than the last-level cache holds for two threads, and their
 * reads missed it. Here each cell's matrix is added as soon as it is made, into the rows'
 * values in place; what a thread keeps for the rows in flight is, per cell, where each of its
 * entries goes in a ring of cells (for each of its rows the row's first place, and each entry's
 * column in the row as a byte: 32 bytes a P1 cell, a quarter of its matrix).
 * Two fronts move through a thread's rows in the fill's order and its band of cells:
 * - the rows' front writes a row's columns (its sorted neighbours: the first pass's, kept for
 *   P1 simplices, else made again), zeroes its values and writes, for each of its cells, the
 *   row's entries' places; it runs ahead of
 * - the cells' front, which makes the element matrices of `batch` consecutive cells at a time
 *   and adds each entry to its place (an entry whose row is not this thread's, or a
 *   constrained column: no place), then clears the cell's places.
 * A row's front reaches every row with a cell in the next batch before that batch is added
 * (sufmin: the least first cell of the rows from a position on), so each entry's sum is its
 * cells' in cell order from zero: the same adds in the same order as the rows' fill, the
 * same matrix bit for bit. Rows whose cells the ring cannot hold while both fronts move on
 * (outliers, a ring capped by FELAB_FILL_WINDOW) are summed apart as rows (fill_row). */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix-private.h"

enum { BY_CELLS = 0, APART = 1, NO_ADDS = 2 }; /* a row's way (cell_plan.way) */
enum { NO_COLUMN = 255 }; /* an entry's column in its row, as a byte: a constrained column */

/* sufmin over rows [q0, q1): from each position on, the least first cell of the rows added
 * by cells (INT_MAX: none); returns the band's end (past the last cell of those rows). */
static int plan_suffix(const pattern *P, int q0, int q1, cell_plan *c)
{
  int low = INT_MAX, end = 0;
  c->sufmin[q1 - q0] = INT_MAX;
  for (int p = q1 - 1; p >= q0; p--) {
    const int a = P->order ? P->order[p] : p;
    if (c->way[p - q0] == BY_CELLS) {
      low = P->first[a] < low ? P->first[a] : low;
      end = P->last[a] + 1 > end ? P->last[a] + 1 : end;
    }
    c->sufmin[p - q0] = low;
  }
  return end;
}

int cell_plan_make(const host_fill *F, const pattern *P, int q0, int q1, cell_plan *c)
{
  const int n = q1 - q0;
  *c = (cell_plan){.B = F->batch};
  c->sufmin = malloc(sizeof(int) * ((size_t)n + 1));
  c->way = malloc((size_t)n + 1);
  if (!c->sufmin || !c->way) return FE_ERR_MEM;
  const long long fit = 4LL << span_exponent(P, q0, q1); /* as window_make's */
  for (int p = q0; p < q1; p++) {
    const int a = P->order ? P->order[p] : p;
    c->way[p - q0] = P->fixed[a] || P->first[a] < 0 ? NO_ADDS
                     : P->last[a] - P->first[a] + 1 > fit ? APART : BY_CELLS;
  }
  plan_suffix(P, q0, q1, c);
  /* the ring: a row's cells, from the cells' front when its front reaches it (past its
   * sufmin less a batch) to its last cell, as a power of two up to about F->window */
  long long need = 0;
  for (int p = q0; p < q1; p++) {
    const int a = P->order ? P->order[p] : p;
    if (c->way[p - q0] == BY_CELLS && P->last[a] + 1LL - c->sufmin[p - q0] > need)
      need = P->last[a] + 1LL - c->sufmin[p - q0];
  }
  need += c->B;
  size_t W = 1;
  while (W < (size_t)need && W < F->window) W *= 2;
  c->W = (int)W;
  for (int p = q0; p < q1; p++) { /* too wide for the ring: apart (sufmin only grows, so the
                                   * rows left fit it still) */
    const int a = P->order ? P->order[p] : p;
    if (c->way[p - q0] == BY_CELLS && P->last[a] + 1LL - c->sufmin[p - q0] + c->B > c->W)
      c->way[p - q0] = APART;
  }
  c->end = plan_suffix(P, q0, q1, c);
  c->front = c->sufmin[0] < c->end ? c->sufmin[0] : c->end;
  return 0;
}

/* The bytes of a cell's places: its rows' first places (ints), its entries' columns (bytes). */
static size_t slot_bytes(int nb)
{
  return ((size_t)nb * sizeof(int) + (size_t)nb * nb + 3) / 4 * 4;
}

size_t cell_plan_bytes(const host_fill *F, const pattern *P, const cell_plan *c)
{
  return (size_t)c->W * slot_bytes(P->V->elem.nbasis) +
         ((size_t)c->B + (size_t)P->maxdeg) * F->kn * sizeof(double);
}

int cell_plan_alloc(const host_fill *F, const pattern *P, cell_plan *c)
{
  const size_t bytes = (size_t)c->W * slot_bytes(P->V->elem.nbasis);
  c->ring = malloc(bytes);
  c->K = malloc(((size_t)c->B + (size_t)P->maxdeg) * F->kn * sizeof(double));
  if (!c->ring || !c->K) return FE_ERR_MEM;
  memset(c->ring, 0xff, bytes); /* every row's first place -1: none */
  return 0;
}

void cell_plan_free(cell_plan *c)
{
  free(c->sufmin), free(c->way), free(c->ring), free(c->K);
  *c = (cell_plan){0};
}

/* Row a's columns (its deg cells' nodes, sorted, the constrained left out), its values zero,
 * and in each of its cells' places the row's first place and its entries' columns in it
 * (NO_COLUMN: a constrained column). */
static int row_by_cells(const pattern *P, const int *rowptr, int *cols, double *vals,
                        cell_plan *c, int a, const int *cells, int deg, const unsigned short *kept,
                        fill_scratch *x)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes, r0 = rowptr[a];
  const size_t sb = slot_bytes(nb);
  int m = kept ? kept[0] : 0, len = 0, *seen = kept ? NULL : fill_seen(P, x);
  if ((!kept && !seen) || (!x->atb && !(x->atb = malloc((size_t)P->V->nnodes + 1))))
    return FE_ERR_MEM;
  if (kept) /* the first pass's */
    for (int i = 0; i < m; i++) x->nbr[i] = a + (int)kept[i + 1] - 32768;
  else m = node_neighbours(P, a, cells, deg, seen, x->nbr, 1);
  for (int i = 0; i < m; i++) {
    const int b = x->nbr[i], f = !P->fixed[b];
    x->atb[b] = (unsigned char)(f ? len : NO_COLUMN);
    if (f) cols[r0 + len++] = b;
  }
  memset(vals + r0, 0, sizeof(double) * (size_t)len);
  for (int t = 0; t < deg; t++) {
    const int *nodes = cn + (size_t)cells[t] * nb;
    int ba = 0;
    for (int b = 1; b < nb; b++) ba = nodes[b] == a ? b : ba;
    char *slot = c->ring + (size_t)(cells[t] & (c->W - 1)) * sb;
    unsigned char *col = (unsigned char *)slot + (size_t)nb * sizeof(int) + (size_t)ba * nb;
    memcpy(slot + (size_t)ba * sizeof(int), &r0, sizeof(int));
    for (int b = 0; b < nb; b++) col[b] = x->atb[nodes[b]];
  }
  return 0;
}

/* The rows apart waiting: their cells' matrices made in one launch (into K's slots, the
 * batch's being free while the rows' front runs), then each summed as a row (fill_row). */
static int apart_rows(const pattern *P, const int *rowptr, int *cols, double *vals,
                      const host_fill *F, cell_plan *c, fill_scratch *x)
{
  int rc = x->np ? host_fill_gathered(F, x->pcells, x->npc, 0, x, c->K,
                                      (size_t)c->B + (size_t)P->maxdeg) : 0;
  x->pstart[x->np] = x->npc;
  for (int r = 0; !rc && r < x->np; r++) {
    cell_window made = {.K = c->K, .given = 1, .base = x->pstart[r]};
    rc = fill_row(P, rowptr, cols, vals, F, &made, x->prow[r], x->pcells + x->pstart[r],
                  x->pstart[r + 1] - x->pstart[r], NULL, 0, x);
  }
  x->np = x->npc = 0;
  return rc;
}

/* The rows' front: its rows up to (not with) position qend, chunk by chunk; the rows apart
 * are summed as rows (fill_row), their cells made together (apart_rows: one launch for as
 * many rows as a batch of cells holds, where a launch a row took most of a Hilbert-ordered
 * mesh's fill). */
static int rows_front(const pattern *P, const int *rowptr, int *cols, double *vals,
                      const host_fill *F, cell_plan *c, int q0, int qend, fill_scratch *x)
{
  const int cap = chunk_cap(P), most = c->B + P->maxdeg;
  const size_t sb = slot_bytes(P->V->elem.nbasis);
  while (c->q < qend) {
    if (c->q == c->qn) { /* the next chunk's cells */
      c->qc = c->q;
      c->qn = chunk_cells(P, c->q, c->q1, cap, x->cstart, x->list);
    }
    const int p = c->q++, i = p - c->qc, a = P->order ? P->order[p] : p;
    const int *cells = x->list + x->cstart[i], deg = x->cstart[i + 1] - x->cstart[i];
    const unsigned short *kept = c->kept ? c->kept + c->kp : NULL;
    if (kept) c->kp += 1 + (kept[0] == KEPT_NONE ? 0 : kept[0]);
    int rc = 0;
    switch (c->way[p - q0]) {
    case BY_CELLS:
      if (p + 1 < c->qn) /* the next row's places: a layer of cells ahead, missed */
        for (int t = x->cstart[i + 1]; t < x->cstart[i + 2]; t++)
          __builtin_prefetch(c->ring + (size_t)(x->list[t] & (c->W - 1)) * sb, 1);
      rc = row_by_cells(P, rowptr, cols, vals, c, a, cells, deg,
                        kept && kept[0] != KEPT_NONE ? kept : NULL, x);
      break;
    case APART: /* waits with the others until a launch's cells are gathered */
      if (x->npc + deg > most) rc = apart_rows(P, rowptr, cols, vals, F, c, x);
      memcpy(x->pcells + x->npc, cells, sizeof(int) * (size_t)deg);
      x->prow[x->np] = a;
      x->pstart[x->np++] = x->npc;
      x->npc += deg;
      break;
    default: /* a constrained row: the identity's; a free row of no cells: empty */
      if (P->fixed[a]) cols[rowptr[a]] = a, vals[rowptr[a]] = 1;
    }
    if (rc) return rc;
  }
  return apart_rows(P, rowptr, cols, vals, F, c, x);
}

/* The cells' front: cells [c0, c0 + n)'s matrices (made at c->K) added to their places, the
 * places cleared. */
static void cells_add(const pattern *P, const host_fill *F, cell_plan *c, int c0, int n,
                      double *vals)
{
  const int nb = P->V->elem.nbasis;
  const size_t sb = slot_bytes(nb);
  double spare[1] = {0}; /* the adds of entries of no column */
  for (int s = 0; s < n; s++) {
    char *slot = c->ring + (size_t)((c0 + s) & (c->W - 1)) * sb;
    int *first = (int *)slot;
    const unsigned char *col = (const unsigned char *)slot + (size_t)nb * sizeof(int);
    const double *K = (const double *)c->K + (size_t)s * F->kn;
    if (s + 4 < n) { /* a later cell's rows' values: begun a layer of cells back, missed */
      const int *ahead = (const int *)(c->ring + (size_t)((c0 + s + 4) & (c->W - 1)) * sb);
      for (int i = 0; i < nb; i++)
        if (ahead[i] >= 0) __builtin_prefetch(vals + ahead[i], 1);
    }
    for (int i = 0; i < nb; i++) {
      if (first[i] < 0) continue; /* not this thread's row, or a row apart */
      double *row = vals + first[i];
      for (int j = 0; j < nb; j++) {
        const int k = col[i * nb + j];
        double *v = k != NO_COLUMN ? row + k : spare;
        *v += K[i * nb + j];
      }
      first[i] = -1;
    }
  }
}

int fill_by_cells(const pattern *P, const int *rowptr, int *cols, double *vals,
                  const host_fill *F, cell_plan *c, int q0, int q1, fill_scratch *x)
{
  c->q = c->qc = c->qn = q0;
  c->q1 = q1;
  c->kept = pattern_kept(P, omp_get_thread_num(), omp_get_num_threads());
  c->kp = 0;
  for (int c0 = c->front; c0 < c->end; c0 += c->B) {
    const int n = c->end - c0 < c->B ? c->end - c0 : c->B;
    int q = c->q; /* every row with a cell in the batch */
    while (q < q1 && c->sufmin[q - q0] < c0 + n) q++;
    int rc = rows_front(P, rowptr, cols, vals, F, c, q0, q, x);
    for (int s = 0; !rc && s < n; s++) x->ids[s] = s;
    if (!rc) rc = host_fill_cells(F, c0, n, x, c->K, (size_t)c->B);
    if (rc) return rc;
    cells_add(P, F, c, c0, n, vals);
  }
  return rows_front(P, rowptr, cols, vals, F, c, q0, q1, x);
}
