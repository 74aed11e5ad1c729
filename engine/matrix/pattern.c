/* felab matrices, the assembly's pattern and its fill (fe_operator_assemble, assemble.c),
 * and the cells' colors.
 * The pattern: row (node a, component k) couples to every dof of the cells that hold a,
 * sorted; a constrained row holds its diagonal only and no free row holds a constrained
 * column, so the matrix acts as the matrix-free Jacobian does. It comes from the cells of
 * each node (the cell map inverted, in cell order) in two parallel passes over the nodes:
 * one counts each row's distinct neighbours, one writes them sorted, each thread a
 * contiguous range of nodes.
 * The values, where buffers are host memory (the cpu), are summed by that second pass, row
 * by row from the row's cells: no add is shared (no atomics, reproducible sums), and the
 * element matrices are never stored. Each thread computes them (variant reg_jac: no stored
 * factors; host-fill.c) in launches of `batch` consecutive cells into its window of W
 * matrices (cell c at slot c mod W), whose front moves on as its rows need: the rows go in
 * the order of their first cells (fill_order), and on a local mesh the cells of a node lie in
 * a band of the cell order (about a layer of a box), so W is that band, not the mesh. The
 * window outgrows the caches at large sizes, so while a row is summed the next row's
 * matrices are prefetched. A row whose cells do not fit the window (outliers, or a window
 * capped by FELAB_FILL_WINDOW) has them computed apart, gathered into one launch.
 * Elsewhere the device adds stored element matrices into the pattern (fe_assemble). */
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
  free(P->start);
  free(P->list);
  free(P->nfree);
}

/* P->start, list, nfree, maxdeg. Each thread counts the nodes of its range of cells in its
 * own array (over the nodes those cells touch: about nn / threads on a local mesh); the
 * counts give every (node, thread) its first slot, and each thread fills its cells in order,
 * so every node's list is in cell order. */
int node_cells(pattern *P)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nb = V->elem.nbasis, nc = V->ncomp, ncell = V->mesh->ncells;
  const int *cn = V->cell_nodes, most = omp_get_max_threads();
  const size_t nent = (size_t)ncell * nb;
  FE_ASSERT(nent <= 2147483647u, FE_ERR_ARG, "the matrix pattern: %zu (cell, node) pairs pass "
            "2^31 (int indices)", nent);
  int **cnt = calloc((size_t)most, sizeof(int *)), *lo = malloc(sizeof(int) * (size_t)most);
  int *hi = malloc(sizeof(int) * (size_t)most), failed = 0;
  P->start = calloc((size_t)nn + 1, sizeof(int));
  P->list = malloc(sizeof(int) * (nent + 1));
  P->nfree = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!cnt || !lo || !hi || !P->start || !P->list || !P->nfree) failed = 1;
  if (!failed)
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int c0 = (int)((long long)ncell * t / nt), c1 = (int)((long long)ncell * (t + 1) / nt);
    int l = nn, h = -1, *my = NULL, stop;
    for (size_t i = (size_t)c0 * nb; i < (size_t)c1 * nb; i++) {
      l = cn[i] < l ? cn[i] : l;
      h = cn[i] > h ? cn[i] : h;
    }
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
      for (int a = 0; a < nn; a++) { /* the node's cells */
        int s = 0, f = 0;
        for (int u = 0; u < nt; u++)
          if (a >= lo[u] && a <= hi[u]) s += cnt[u][a - lo[u]];
        for (int k = 0; k < nc; k++) f += !P->fixed[a * nc + k];
        P->start[a + 1] = s;
        P->nfree[a] = f;
      }
#pragma omp single
      for (int a = 0; a < nn; a++) P->start[a + 1] += P->start[a];
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
  for (int a = 0; !failed && a < nn; a++)
    if (P->start[a + 1] - P->start[a] > P->maxdeg) P->maxdeg = P->start[a + 1] - P->start[a];
  free(cnt);
  free(lo);
  free(hi);
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern's node -> cells map");
  return 0;
}

/* The distinct nodes of node a's cells into nbr (seen: a thread's marks, seen[b] == a once b
 * is in); sorted when asked (insertion: rows are short). Returns their number. */
static int node_neighbours(const pattern *P, int a, int *seen, int *nbr, int sorted)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes;
  int m = 0;
  for (int t = P->start[a]; t < P->start[a + 1]; t++) {
    const int *nodes = cn + (size_t)P->list[t] * nb;
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

/* The first pass: rowptr (ndofs + 1) from each node's free neighbour dofs (a constrained
 * row: 1). */
int count_rows(const pattern *P, int *rowptr)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nc = V->ncomp, nd = V->ndofs, nb = V->elem.nbasis;
  long long *cnt = malloc(sizeof(long long) * ((size_t)nn + 1));
  int failed = !cnt;
  if (!failed)
#pragma omp parallel reduction(| : failed)
  {
    int *seen = malloc(sizeof(int) * ((size_t)nn + 1));
    int *nbr = malloc(sizeof(int) * ((size_t)P->maxdeg * nb + 1));
    if (!seen || !nbr) failed = 1;
    for (int a = 0; !failed && a < nn; a++) seen[a] = -1;
#pragma omp for schedule(static)
    for (int a = 0; a < nn; a++) {
      if (failed) continue;
      int m = node_neighbours(P, a, seen, nbr, 0);
      long long c = 0;
      for (int i = 0; i < m; i++) c += P->nfree[nbr[i]];
      cnt[a] = c;
    }
    free(seen);
    free(nbr);
  }
  long long nz = 0;
  for (int gi = 0; !failed && gi < nd; gi++) {
    rowptr[gi] = (int)nz;
    nz += P->fixed[gi] ? 1 : cnt[gi / nc];
    if (nz > 2147483647LL) failed = 2;
  }
  free(cnt);
  FE_ASSERT(failed != 2, FE_ERR_ARG, "the matrix has more than 2^31 nonzeros (int indices)");
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern");
  rowptr[nd] = (int)nz;
  return 0;
}

/* Thread t of nt's rows [*a0, *a1) of the fill's order: contiguous, balanced by their cells
 * (pre[p]: the cells of the rows before position p). */
static void node_range(const pattern *P, const int *pre, int t, int nt, int *a0, int *a1)
{
  const int nn = P->V->nnodes;
  const long long nent = pre[nn];
  int lo = 0, hi = nn;
  for (int e = 0; e < 2; e++) { /* the first row whose cells start at or past the share */
    const long long x = nent * (t + e) / nt;
    int l = 0, h = nn;
    while (l < h) {
      const int m = l + (h - l) / 2;
      if (pre[m] < x) l = m + 1;
      else h = m;
    }
    if (e) hi = t == nt - 1 ? nn : l;
    else lo = t == 0 ? 0 : l;
  }
  *a0 = lo;
  *a1 = hi;
}

/* Add row (b_a, k) of every cell of node a, from its slot in K (kd: double, else float),
 * into acc; at[b]: node b's first column in the row (all its components free: column
 * at[b] + kk; none free: a spare slot past the row), or -(first + 1) when some are fixed. */
static void add_cells_row(const pattern *P, const int *slot, const void *K, size_t kn, int kd,
                          int a, int k, const int *at, double *acc)
{
  const int nb = P->V->elem.nbasis, nc = P->V->ncomp, n = nb * nc, *cn = P->V->cell_nodes;
  for (int t = P->start[a], i = 0; t < P->start[a + 1]; t++, i++) {
    const int *nodes = cn + (size_t)P->list[t] * nb;
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

/* Row a of the second pass into cols (and, with F, vals: each row the sum of its cells'
 * rows, in double, in the order of the cells). Called by threads (a failure: its code). */
static int fill_row(const pattern *P, const int *rowptr, int *cols, void *vals,
                    const host_fill *F, cell_window *w, int a, int next, fill_scratch *x)
{
  const int nc = P->V->ncomp;
  const int m = node_neighbours(P, a, x->seen, x->nbr, 1);
  int rc = F && m ? window_row(F, P, w, a, x) : 0, len = 0, *row0 = NULL;
  if (rc) return rc;
  if (F && next >= 0) window_prefetch(F, P, w, next);
  for (int i = 0; i < m; i++) len += P->nfree[x->nbr[i]]; /* a free row's columns */
  for (int i = 0, p = 0; i < m; i++) { /* none free: the spare slots past the row */
    const int b = x->nbr[i], f = P->nfree[b];
    x->at[b] = f == nc ? p : f ? -p - 1 : len;
    p += f;
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
      if (row0) memcpy(row, row0, sizeof(int) * (size_t)len); /* every free row alike */
      else
        for (int i = 0, p = 0; i < m; i++)
          for (int kk = 0; kk < nc; kk++)
            if (!P->fixed[x->nbr[i] * nc + kk]) row[p++] = x->nbr[i] * nc + kk;
      row0 = row;
      if (!F) continue;
      for (int i = 0; i < len + nc; i++) acc[i] = 0;
      add_cells_row(P, x->slot, w->K, F->kn, F->dbl, a, k, x->at, acc);
    }
    if (!F) continue;
    if (F->dbl) memcpy((double *)vals + r0, acc, sizeof(double) * (size_t)rl);
    else
      for (int i = 0; i < rl; i++) ((float *)vals)[r0 + i] = (float)acc[i];
  }
  return 0;
}

static void scratch_free(fill_scratch *x)
{
  free(x->ids), free(x->gcells), free(x->gmaps), free(x->seen), free(x->at), free(x->nbr);
  free(x->slot), free(x->gaux), free(x->acc);
}

/* A thread's scratch (0, or FE_ERR_MEM). */
static int scratch_make(const pattern *P, const host_fill *F, fill_scratch *x)
{
  const int nn = P->V->nnodes, nb = P->V->elem.nbasis, nc = P->V->ncomp, d = P->maxdeg;
  const size_t most = (size_t)d * nb + 1, batch = F ? (size_t)F->batch : 0;
  *x = (fill_scratch){0};
  x->seen = malloc(sizeof(int) * ((size_t)nn + 1));
  x->at = malloc(sizeof(int) * ((size_t)nn + 1));
  x->nbr = malloc(sizeof(int) * most);
  x->slot = malloc(sizeof(int) * ((size_t)d + 1));
  x->ids = malloc(sizeof(int) * (batch > (size_t)d ? batch : (size_t)d));
  x->gcells = malloc(sizeof(int) * most);
  x->gmaps = malloc(sizeof(int) * ((size_t)d * (F ? F->nbf : 0) + 1));
  x->gaux = malloc((size_t)d * (F ? F->aux_bytes : 0) + 1);
  x->acc = malloc(sizeof(double) * (most + 1) * nc); /* a row and its spare slots */
  if (!x->seen || !x->at || !x->nbr || !x->slot || !x->ids || !x->gcells || !x->gmaps ||
      !x->gaux || !x->acc)
    return FE_ERR_MEM;
  for (int a = 0; a < nn; a++) x->seen[a] = -1;
  return 0;
}

/* The order the fill sums its rows in: by each node's first cell (ties by id), so that a
 * thread's window sweeps its band of the mesh once whatever the numbering. Numberings that
 * keep the vertices' ids and number the other nodes after them (P2 and up, and a box's Q2 and
 * up) would otherwise sweep it once for the vertices' rows and again for the others', each
 * cell's matrices made about twice and its window thrashed (docs/benchmarks.md). *order: NULL where the ids are already in that order (or
 * FELAB_FILL_IDS is set: tests compare the two); *pre: the cells of the rows before each
 * position (P->start itself then). */
static int fill_order(const pattern *P, int **order, int **pre)
{
  const int nn = P->V->nnodes;
  *order = *pre = NULL;
  int sorted = 1;
  for (int a = 1; a < nn && sorted; a++)
    sorted = P->start[a] == P->start[a + 1] || P->start[a - 1] == P->start[a] ||
             P->list[P->start[a - 1]] <= P->list[P->start[a]];
  const char *ids = getenv("FELAB_FILL_IDS");
  if (sorted || (ids && *ids)) return 0;
  uint64_t *key = malloc(sizeof(uint64_t) * 2 * ((size_t)nn + 1));
  int *o = malloc(sizeof(int) * 2 * ((size_t)nn + 1)), *q = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!key || !o || !q) {
    free(key), free(o), free(q);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the fill's order of %d rows", nn);
  }
#pragma omp parallel for schedule(static)
  for (int a = 0; a < nn; a++) {
    key[a] = P->start[a] < P->start[a + 1] ? (uint64_t)P->list[P->start[a]] : 0;
    o[a] = a;
  }
  fe_sort_u64(key, o, (size_t)nn, key + nn + 1, o + nn + 1, 0);
  q[0] = 0;
  for (int p = 0; p < nn; p++) q[p + 1] = q[p] + (P->start[o[p] + 1] - P->start[o[p]]);
  free(key);
  *order = o;
  *pre = q;
  return 0;
}

/* The pattern's second pass, writing cols (and with F vals) in place: each thread its
 * contiguous range of rows in the fill's order, with F its own window; *made: the element
 * matrices it computed. */
int fill_pattern(const pattern *P, const int *rowptr, int *cols, void *vals,
                 const host_fill *F, int *launches, long long *made)
{
  int rc = 0, nl = 0, *order = NULL, *pre = NULL, fits = 0;
  long long nm = 0;
  size_t windows = 0; /* the threads' windows' bytes */
  if (F) FE_CHECK(fill_order(P, &order, &pre));
  const int nn = P->V->nnodes;
#pragma omp parallel reduction(max : rc) reduction(+ : nl, nm)
  {
    int a0, a1;
    node_range(P, pre ? pre : P->start, omp_get_thread_num(), omp_get_num_threads(), &a0, &a1);
    fill_scratch x;
    cell_window w = {0};
    int e = scratch_make(P, F, &x);
    if (F) { /* the windows' matrices made once all of them are known to fit */
      window_make(F, P, order, a0, a1, &w);
#pragma omp atomic update
      windows += window_bytes(F, P, &w);
#pragma omp barrier
#pragma omp single
      fits = fe_memory_check(windows, "assemble: the fill's element matrices, a window of cells "
                             "on each of %d threads", omp_get_num_threads());
      if (fits) e = e ? e : fits;
      else if (!e && !(w.K = malloc(window_bytes(F, P, &w)))) e = FE_ERR_MEM;
    }
    for (int p = a0; !e && p < a1; p++) {
      const int next = p + 1 < nn ? (order ? order[p + 1] : p + 1) : -1;
      e = fill_row(P, rowptr, cols, vals, F, &w, order ? order[p] : p, next, &x);
    }
    rc = e; /* the private copy of the reduction (which starts at INT_MIN) */
    nl += x.launches;
    nm += x.made;
    free(w.K);
    scratch_free(&x);
  }
  free(order);
  free(pre);
  if (fits) return fe_error_push(fits, __FILE__, __LINE__, __func__); /* the check's message */
  FE_ASSERT(rc != FE_ERR_MEM, FE_ERR_MEM, "out of host memory for the matrix pattern's fill");
  FE_CHECK(rc); /* a launch's error (set by the backend) */
  *launches = nl;
  if (made) *made = nm;
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
