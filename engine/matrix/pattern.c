/* felab matrices, the assembly's pattern (fe_operator_assemble, assemble.c), and the cells'
 * colors.
 * The pattern: row (node a, component k) couples to every dof of the cells that hold a,
 * sorted; a constrained row holds its diagonal only and no free row holds a constrained
 * column, so the matrix acts as the matrix-free Jacobian does. It comes from the cells of
 * each node in two parallel passes over the nodes (count_rows: each row's distinct
 * neighbours counted; fill_pattern, pattern-fill.c: written sorted, with the values on the
 * cpu), each thread a contiguous range of rows in the fill's order (by their first cells).
 * No pass holds the cells of every node at once: each node's count of cells and its first
 * and last (node_spans, 16 bytes a node) tell a thread which cells a chunk of its rows span,
 * and one scan of those cells lists the chunk's (chunk_cells; a whole mesh's lists, 4 bytes
 * a (cell, node) pair, were more than the matrix's values for P1 tets and their pages cost
 * a third of the assembly's time, docs/benchmarks.md). The rare rows whose cells lie far
 * apart (outliers: spans over 4 times the 99th percentile) have lists of their own, made in
 * one scan of the mesh. */
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/sort.h"
#include "engine/matrix/matrix-private.h"
void pattern_free(pattern *P)
{
  if (P->pre != P->start) free(P->pre);
  free(P->start);
  free(P->first);
  free(P->last);
  free(P->list);
  free(P->nfree);
  free(P->order);
  free(P->pos);
  free(P->out);
  free(P->ostart);
  free(P->olist);
  for (int t = 0; P->kept && t < P->nkept; t++) free(P->kept[t]);
  free(P->kept), free(P->kept_len), free(P->kept_cap);
  pattern_lattice_free(P);
}

/* Thread t of nt's range of cells: the lowest and highest nodes they hold into *l, *h. */
static void cells_nodes_range(const fe_space *V, int c0, int c1, int *l, int *h)
{
  const int nb = V->elem.nbasis, *cn = V->cell_nodes;
  *l = V->nnodes, *h = -1;
  for (size_t i = (size_t)c0 * nb; i < (size_t)c1 * nb; i++) {
    *l = cn[i] < *l ? cn[i] : *l;
    *h = cn[i] > *h ? cn[i] : *h;
  }
}

/* P->start (each node's cells' count, as a prefix), first, last (its first and last cell,
 * -1: none), nfree, maxdeg. Each thread counts over its range of cells into its own arrays
 * (over the nodes those cells touch: about nn / threads on a local mesh), merged a node at a
 * time in thread order. */
int node_spans(pattern *P)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nb = V->elem.nbasis, nc = V->ncomp, ncell = V->mesh->ncells;
  const int *cn = V->cell_nodes, most = omp_get_max_threads();
  FE_ASSERT((size_t)ncell * nb <= 2147483647u, FE_ERR_ARG, "the matrix pattern: %zu (cell, "
            "node) pairs pass 2^31 (int indices)", (size_t)ncell * nb);
  int **cnt = calloc((size_t)most, sizeof(int *)), *lo = malloc(sizeof(int) * (size_t)most);
  int *hi = malloc(sizeof(int) * (size_t)most), failed = 0;
  P->start = calloc((size_t)nn + 1, sizeof(int));
  P->first = malloc(sizeof(int) * ((size_t)nn + 1));
  P->last = malloc(sizeof(int) * ((size_t)nn + 1));
  P->nfree = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!cnt || !lo || !hi || !P->start || !P->first || !P->last || !P->nfree) failed = 1;
  if (!failed)
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int c0 = (int)((long long)ncell * t / nt), c1 = (int)((long long)ncell * (t + 1) / nt);
    int l, h, *my = NULL, stop;
    cells_nodes_range(V, c0, c1, &l, &h);
    const size_t n = h >= l ? (size_t)(h - l) + 1 : 0;
    if (n && !(my = calloc(3 * n, sizeof(int)))) { /* a node's count, first, last side by
                                                  * side: one line a (cell, node) pair */
#pragma omp atomic write
      failed = 1;
    }
    for (int c = c0; my && c < c1; c++)
      for (int b = 0; b < nb; b++) {
        int *v = my + 3 * (size_t)(cn[(size_t)c * nb + b] - l);
        if (!v[0]) v[1] = c;
        v[0]++;
        v[2] = c;
      }
    cnt[t] = my;
    lo[t] = l;
    hi[t] = h;
#pragma omp barrier
#pragma omp atomic read
    stop = failed;
    if (!stop) {
#pragma omp for schedule(static)
      for (int a = 0; a < nn; a++) {
        int s = 0, f = -1, g = -1, fr = 0;
        for (int u = 0; u < nt; u++) {
          if (a < lo[u] || a > hi[u]) continue;
          const int *v = cnt[u] + 3 * (size_t)(a - lo[u]);
          if (!v[0]) continue;
          s += v[0];
          f = f < 0 ? v[1] : f;
          g = v[2];
        }
        for (int k = 0; k < nc; k++) fr += !P->fixed[a * nc + k];
        P->start[a + 1] = s;
        P->first[a] = f;
        P->last[a] = g;
        P->nfree[a] = fr;
      }
    }
    free(my); /* after the loop's barrier: every thread has read them */
  }
  for (int a = 0; !failed && a < nn; a++) {
    P->maxdeg = P->start[a + 1] > P->maxdeg ? P->start[a + 1] : P->maxdeg;
    P->start[a + 1] += P->start[a];
  }
  free(cnt);
  free(lo);
  free(hi);
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern's node spans");
  return 0;
}

/* P->list: every node's cells, in cell order, at P->start (node_spans made; the device's
 * rows read them). Each thread counts the nodes of its range of cells in its own array; the
 * counts give every (node, thread) its first slot, and each thread lists its cells in order. */
int node_cells(pattern *P)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nb = V->elem.nbasis, ncell = V->mesh->ncells;
  const int *cn = V->cell_nodes, most = omp_get_max_threads();
  int **cnt = calloc((size_t)most, sizeof(int *)), *lo = malloc(sizeof(int) * (size_t)most);
  int *hi = malloc(sizeof(int) * (size_t)most), failed = 0;
  P->list = malloc(sizeof(int) * ((size_t)ncell * nb + 1));
  if (!cnt || !lo || !hi || !P->list) failed = 1;
  if (!failed)
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int c0 = (int)((long long)ncell * t / nt), c1 = (int)((long long)ncell * (t + 1) / nt);
    int l, h, *my = NULL, stop;
    cells_nodes_range(V, c0, c1, &l, &h);
    if (h >= l && !(my = calloc((size_t)(h - l) + 1, sizeof(int)))) {
#pragma omp atomic write
      failed = 1;
    }
    for (size_t i = (size_t)c0 * nb; my && i < (size_t)c1 * nb; i++) my[cn[i] - l]++;
    cnt[t] = my;
    lo[t] = l;
    hi[t] = h;
#pragma omp barrier
#pragma omp atomic read
    stop = failed;
    if (!stop) {
#pragma omp for schedule(static)
      for (int a = 0; a < nn; a++) { /* each thread's first slot in the node's list */
        int s = P->start[a];
        for (int u = 0; u < nt; u++)
          if (a >= lo[u] && a <= hi[u]) {
            int v = cnt[u][a - lo[u]];
            cnt[u][a - lo[u]] = s;
            s += v;
          }
      }
      for (int c = c0; my && c < c1; c++)
        for (int b = 0; b < nb; b++) P->list[my[cn[(size_t)c * nb + b] - l]++] = c;
    }
    free(my);
  }
  free(cnt);
  free(lo);
  free(hi);
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern's node -> cells map");
  return 0;
}

/* The order the passes take the rows in: by each node's first cell, so that a thread's window
 * of element matrices sweeps its band of the mesh once whatever the numbering. Numberings that
 * keep the vertices' ids and number the other nodes after them (P2 and up, and a box's Q2 and
 * up) would otherwise sweep it once for the vertices' rows and again for the others', each
 * cell's matrices made about twice and its window thrashed (docs/benchmarks.md). The ids'
 * own order is kept where the window it needs (from a row's first cell to the last cell of
 * the rows so far, outliers aside) is at most twice the widest row (a box of tets: its first
 * layer of nodes and its second start in the same layer of cells, no wider than a row), or
 * where FELAB_FILL_IDS is set (tests compare the two): P->order and P->pos NULL, P->pre
 * P->start. Else P->order (position -> node), P->pos (node -> position), P->pre (the cells
 * of the rows before each position). */
static int pattern_order(pattern *P)
{
  const int nn = P->V->nnodes;
  P->pre = P->start;
  long long need = 0, span = 0;
  int top = -1;
  for (int a = 0; a < nn; a++) {
    if (P->first[a] < 0 || P->last[a] - P->first[a] >= P->fit) continue;
    top = P->last[a] > top ? P->last[a] : top;
    need = top + 1LL - P->first[a] > need ? top + 1LL - P->first[a] : need;
    span = P->last[a] - P->first[a] + 1LL > span ? P->last[a] - P->first[a] + 1LL : span;
  }
  const int sorted = need <= 2 * span;
  const char *ids = getenv("FELAB_FILL_IDS");
  if (sorted || (ids && *ids)) return 0;
  uint64_t *key = malloc(sizeof(uint64_t) * 2 * ((size_t)nn + 1));
  int *o = malloc(sizeof(int) * 2 * ((size_t)nn + 1)), *q = malloc(sizeof(int) * ((size_t)nn + 1));
  int *pos = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!key || !o || !q || !pos) {
    free(key), free(o), free(q), free(pos);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the fill's order of %d rows", nn);
  }
#pragma omp parallel for schedule(static)
  for (int a = 0; a < nn; a++) {
    key[a] = P->first[a] >= 0 ? (uint64_t)P->first[a] : 0;
    o[a] = a;
  }
  fe_sort_u64(key, o, (size_t)nn, key + nn + 1, o + nn + 1, 0);
  q[0] = 0;
  for (int p = 0; p < nn; p++) {
    q[p + 1] = q[p] + (P->start[o[p] + 1] - P->start[o[p]]);
    pos[o[p]] = p;
  }
  free(key);
  P->order = o;
  P->pos = pos;
  P->pre = q;
  return 0;
}

/* P->fit, 4 times the 99th percentile of the nodes' spans (first to last cell) up to a power
 * of two (or FELAB_PATTERN_FIT, when narrower), and the outliers, the nodes of wider spans:
 * their ids ascending (P->out, P->nout) and their cells (P->olist from P->ostart), listed in
 * one scan of the mesh. */
int span_exponent(const pattern *P, int a0, int a1)
{
  long long hist[33] = {0}, rows = 0;
  for (int p = a0; p < a1; p++) { /* the spans' powers of two */
    const int a = P->order ? P->order[p] : p;
    if (P->first[a] < 0) continue;
    const int span = P->last[a] - P->first[a] + 1;
    int e = 0;
    while ((1LL << e) < span) e++;
    hist[e]++, rows++;
  }
  int e = 0;
  for (long long sum = hist[0]; e < 31 && 100 * sum < 99 * rows; sum += hist[++e]) {}
  return e;
}

static int pattern_outliers(pattern *P)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nb = V->elem.nbasis, ncell = V->mesh->ncells, *cn = V->cell_nodes;
  const int e = span_exponent(P, 0, nn); /* every node, in any order */
  P->fit = e < 29 ? 4 << e : INT_MAX;
  const char *cap = getenv("FELAB_PATTERN_FIT"); /* a narrower fit: tests reach the outliers */
  if (cap && atoi(cap) > 0 && atoi(cap) < P->fit) P->fit = atoi(cap);
  P->nout = 0;
  for (int a = 0; a < nn; a++) P->nout += P->first[a] >= 0 && P->last[a] - P->first[a] >= P->fit;
  if (!P->nout) return 0;
  P->out = malloc(sizeof(int) * (size_t)P->nout);
  P->ostart = malloc(sizeof(int) * ((size_t)P->nout + 1));
  int *cur = malloc(sizeof(int) * ((size_t)P->nout + 1));
  if (P->out && P->ostart && cur) {
    P->ostart[0] = 0;
    for (int a = 0, i = 0; a < nn; a++)
      if (P->first[a] >= 0 && P->last[a] - P->first[a] >= P->fit) {
        P->out[i] = a;
        cur[i] = P->ostart[i];
        P->ostart[i + 1] = P->ostart[i] + (P->start[a + 1] - P->start[a]);
        i++;
      }
    P->olist = malloc(sizeof(int) * ((size_t)P->ostart[P->nout] + 1));
  }
  for (int c = 0; P->olist && c < ncell; c++)
    for (int b = 0; b < nb; b++) {
      const int v = cn[(size_t)c * nb + b];
      if (P->last[v] - P->first[v] < P->fit) continue;
      int l = 0, h = P->nout - 1; /* its place among the outliers */
      while (l < h) {
        const int m = l + (h - l) / 2;
        if (P->out[m] < v) l = m + 1;
        else h = m;
      }
      P->olist[cur[l]++] = c;
    }
  free(cur);
  FE_ASSERT(P->olist, FE_ERR_MEM, "out of host memory for the cells of %d outlier nodes", P->nout);
  return 0;
}

/* What the passes read beside V: node_spans, the fill's order, the outliers. */
int pattern_make(pattern *P)
{
  FE_CHECK(node_spans(P));
  FE_CHECK(pattern_outliers(P));
  return pattern_order(P);
}

void prefix_share(const int *pre, int n, int t, int nt, int *a0, int *a1)
{
  const long long total = pre[n];
  int lo = 0, hi = n;
  for (int e = 0; e < 2; e++) { /* the first position whose prefix is at or past the share */
    const long long x = total * (t + e) / nt;
    int l = 0, h = n;
    while (l < h) {
      const int m = l + (h - l) / 2;
      if (pre[m] < x) l = m + 1;
      else h = m;
    }
    if (e) hi = t == nt - 1 ? n : l;
    else lo = t == 0 ? 0 : l;
  }
  *a0 = lo;
  *a1 = hi;
}

void node_range(const pattern *P, int t, int nt, int *a0, int *a1)
{
  prefix_share(P->pre, P->V->nnodes, t, nt, a0, a1);
}

int chunk_cells(const pattern *P, int q0, int qend, int cap, int *cstart, int *list)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes, *pre = P->pre, *pos = P->pos;
  int q = q0, lo = INT_MAX, hi = -1;
  for (; q < qend && q - q0 < cap / 4 + 1 && pre[q + 1] - pre[q0] <= cap; q++) {
    const int a = P->order ? P->order[q] : q;
    cstart[q - q0] = pre[q] - pre[q0]; /* a cursor, then the row's start again */
    if (P->first[a] < 0 || P->last[a] - P->first[a] >= P->fit) continue; /* none; an outlier */
    lo = P->first[a] < lo ? P->first[a] : lo;
    hi = P->last[a] > hi ? P->last[a] : hi;
  }
  const unsigned n = (unsigned)(q - q0);
  for (int c = lo; c <= hi; c++) /* the band: each of its (cell, node) pairs of the chunk */
    for (int b = 0; b < nb; b++) {
      const int v = cn[(size_t)c * nb + b];
      const unsigned r = (unsigned)((pos ? pos[v] : v) - q0);
      if (r < n) list[cstart[r]++] = c; /* an outlier's few: overwritten below */
    }
  for (int p = q0; p <= q; p++) cstart[p - q0] = pre[p] - pre[q0];
  for (int p = q0; P->nout && p < q; p++) { /* outliers: their own lists */
    const int a = P->order ? P->order[p] : p;
    if (P->first[a] < 0 || P->last[a] - P->first[a] < P->fit) continue;
    int l = 0, h = P->nout - 1;
    while (l < h) {
      const int m = l + (h - l) / 2;
      if (P->out[m] < a) l = m + 1;
      else h = m;
    }
    memcpy(list + cstart[p - q0], P->olist + P->ostart[l],
           sizeof(int) * (size_t)(P->ostart[l + 1] - P->ostart[l]));
  }
  return q;
}

int node_neighbours(const pattern *P, int a, const int *cells, int deg, int *seen, int *nbr,
                    int sorted)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes;
  int m = 0;
  for (int t = 0; t < deg; t++) {
    const int *nodes = cn + (size_t)cells[t] * nb;
    for (int b = 0; b < nb; b++)
      if (seen[nodes[b]] != a) {
        seen[nodes[b]] = a;
        nbr[m++] = nodes[b];
      }
  }
  for (int i = 1; sorted && i < m; i++) {
    int v = nbr[i], j = i - 1;
    while (j >= 0 && nbr[j] > v) nbr[j + 1] = nbr[j], j--;
    nbr[j + 1] = v;
  }
  return m;
}

int chunk_cap(const pattern *P)
{
  return P->maxdeg > CHUNK_CELLS ? P->maxdeg : CHUNK_CELLS;
}

/* Thread t's kept neighbours, row a's appended: its count and each one less a, offset by
 * 32768 (a constrained row: none; KEPT_NONE where they do not fit: made again). 0, or 1 out of
 * memory. */
static int keep_row(pattern *P, int t, int a, const int *nbr, int m)
{
  if (P->kept_len[t] + (size_t)m + 1 > P->kept_cap[t]) return 1; /* past keep_bound's */
  unsigned short *k = P->kept[t] + P->kept_len[t];
  int fits = m < KEPT_NONE;
  for (int j = 0; j < m; j++) fits &= nbr[j] - a >= -32768 && nbr[j] - a <= 32767;
  k[0] = P->fixed[a] ? 0 : fits ? (unsigned short)m : KEPT_NONE;
  for (int j = 0; k[0] && k[0] != KEPT_NONE && j < m; j++)
    k[j + 1] = (unsigned short)(nbr[j] - a + 32768);
  P->kept_len[t] += 1 + (k[0] == KEPT_NONE ? 0 : k[0]);
  return 0;
}

/* Thread t's kept neighbours of rows [q0, q1) allocated at their bound, a row's cells' nodes
 * (only the pages written become memory; growing them as they filled held about twice as
 * much). 0, or 1 out of memory. */
static int keep_bound(pattern *P, int t, int q0, int q1)
{
  const int nb = P->V->elem.nbasis;
  size_t n = 0;
  for (int p = q0; p < q1; p++) {
    const int a = P->order ? P->order[p] : p;
    n += 2 + (size_t)(P->start[a + 1] - P->start[a]) * (size_t)nb;
  }
  P->kept[t] = malloc(sizeof(unsigned short) * n);
  P->kept_cap[t] = n;
  return !P->kept[t];
}

int pattern_keep(pattern *P)
{
  const int most = omp_get_max_threads();
  P->kept = calloc((size_t)most, sizeof *P->kept);
  P->kept_len = calloc((size_t)most, sizeof *P->kept_len);
  P->kept_cap = calloc((size_t)most, sizeof *P->kept_cap);
  P->nkept = most;
  FE_ASSERT(P->kept && P->kept_len && P->kept_cap, FE_ERR_MEM, "out of host memory");
  return 0;
}

const unsigned short *pattern_kept(const pattern *P, int t, int nt)
{
  return P->kept && nt == P->nkept_threads && t < P->nkept ? P->kept[t] : NULL;
}

/* The first pass: rowptr (ndofs + 1) from each node's free neighbour dofs (a constrained
 * row: 1), each thread its range of rows chunk by chunk (a node's count kept at its first
 * dof's place until the prefix). */
int count_rows(pattern *P, int *rowptr)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nc = V->ncomp, nd = V->ndofs, nb = V->elem.nbasis;
  const int cap = chunk_cap(P);
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    int *seen = malloc(sizeof(int) * ((size_t)nn + 1));
    int *nbr = malloc(sizeof(int) * ((size_t)P->maxdeg * nb + 1));
    int *cstart = malloc(sizeof(int) * ((size_t)cap / 4 + 2));
    int *list = malloc(sizeof(int) * (size_t)cap);
    int q0, q1;
    node_range(P, omp_get_thread_num(), omp_get_num_threads(), &q0, &q1);
#pragma omp single
    P->nkept_threads = omp_get_num_threads();
    if (!seen || !nbr || !cstart || !list) failed = 1;
    if (!failed && P->kept) failed = keep_bound(P, omp_get_thread_num(), q0, q1);
    for (int a = 0; !failed && a < nn; a++) seen[a] = -1;
    for (int q = q0, qn; !failed && q < q1; q = qn) {
      qn = chunk_cells(P, q, q1, cap, cstart, list);
      for (int p = q; !failed && p < qn; p++) {
        const int a = P->order ? P->order[p] : p, i = p - q;
        const int m = node_neighbours(P, a, list + cstart[i], cstart[i + 1] - cstart[i], seen,
                                      nbr, P->kept != NULL);
        int c = 0;
        for (int j = 0; j < m; j++) c += P->nfree[nbr[j]];
        rowptr[a * nc] = c;
        if (P->kept) failed = keep_row(P, omp_get_thread_num(), a, nbr, m);
      }
    }
    free(seen), free(nbr), free(cstart), free(list);
  }
  long long nz = 0;
  for (int gi = 0, cnt = 0; !failed && gi < nd; gi++) {
    if (gi % nc == 0) cnt = rowptr[gi];
    rowptr[gi] = (int)nz;
    nz += P->fixed[gi] ? 1 : cnt;
    if (nz > 2147483647LL) failed = 2;
  }
  FE_ASSERT(failed != 2, FE_ERR_ARG, "the matrix has more than 2^31 nonzeros (int indices)");
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern");
  rowptr[nd] = (int)nz;
  return 0;
}

int fe_space_cell_colors(const fe_space *V, int **order, int **start, int *ncolors)
{
  *order = *start = NULL;
  *ncolors = 0;
  int nc = V->mesh->ncells, *color, n;
  FE_CHECK(fe_mesh_color_groups_below(V->mesh, V->cell_nodes, V->elem.nbasis, V->nnodes, 1,
                                      &color, &n));
  int *o = malloc(sizeof(int) * ((size_t)nc + 1)), *st = calloc((size_t)n + 1, sizeof(int));
  int *pos = malloc(sizeof(int) * ((size_t)n + 1));
  if (!o || !st || !pos) {
    free(color), free(o), free(st), free(pos);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the cells' colors");
  }
  for (int c = 0; c < nc; c++) st[color[c] + 1]++;
  for (int k = 0; k < n; k++) st[k + 1] += st[k];
  memcpy(pos, st, sizeof(int) * (size_t)n);
  for (int c = 0; c < nc; c++) o[pos[color[c]]++] = c;
  free(color);
  free(pos);
  *order = o;
  *start = st;
  *ncolors = n;
  return 0;
}
