/* felab patches: node lists, runs and walks for strategy "patch" (engine/operator/patch.h).
 *
 * A patch's contributions go to runs, one per node, in a shared list; a node's run is then summed
 * and added to the output once. Every place is fixed here, so the kernel needs no atomics and the
 * sums are the same bits at every call. With one item per cell, a node's run takes its
 * contributions in cell order. On a GPU the runs of `lanes` consecutive nodes are interleaved
 * (fe_patch_place), so the items summing them read side by side. With walks a walk is a sequence
 * of events (load a node into a slot, flush a slot's sum to a place, integrate the cell the slots
 * hold), and the host knows every flush.
 *
 * The walks of a patch are cut from one tour of its cells: from the cell just visited go to the
 * unvisited neighbour across a facet that has the fewest unvisited facet neighbours left
 * (Warnsdorff's rule, which keeps the tour from stranding cells), else to the unvisited cell
 * sharing the most nodes, else to the first unvisited cell. Walk t of a patch takes the tour's
 * cells [t*walk, (t+1)*walk), so the stored cell a walk integrates is known from its position and
 * the per-cell data (constants, fields) follow the tour's order. */
#include "engine/operator/patch.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/sort.h"

/* The runs' layout: counts runs[0..nl) (contributions per node) turned into run words
 * (first place | count << 16, fe_patch_place) for nodes in groups of `lanes`; returns the
 * places in all, padding included (the callers refuse more than their words hold). A group of
 * nodes takes lanes x (its longest run) places, its k-th contributions side by side, so a
 * warp summing the runs of `lanes` consecutive nodes reads one row of places at each step;
 * lanes = 1 is runs one after the other. */
static int runs_from_counts(int *runs, int nl, int lanes)
{
  int total = 0;
  for (int i0 = 0; i0 < nl; i0 += lanes) {
    int longest = 0;
    for (int i = i0; i < i0 + lanes && i < nl; i++) {
      int count = runs[i];
      if (count > longest) longest = count;
      runs[i] = (total + i - i0) | count << 16;
    }
    total += longest * lanes;
  }
  return total;
}

/* Contributions filed in order: the next place of local node i (fill[i] of its run so far). */
static int next_place(const int *runs, int *fill, int i, int lanes)
{
  return fe_patch_place((unsigned)runs[i], fill[i]++, lanes);
}

/* The barycentric coordinates of reference point xi of a simplex of dimension dim, permuted
 * by p (lambda'_i = lambda_{p[i]}), back to reference coordinates. */
static void simplex_permute(int dim, const double *xi, const int *p, double *out)
{
  double lam[4], s = 1;
  for (int i = 0; i < dim; i++) s -= xi[i];
  lam[0] = s;
  for (int i = 0; i < dim; i++) lam[i + 1] = xi[i];
  for (int i = 0; i < dim; i++) out[i] = lam[p[i + 1]];
}

/* Whether rule Q maps onto itself (points and weights) under the vertex permutation p. */
static int rule_invariant(const fe_quadrature *Q, const int *p)
{
  int dim = Q->dim;
  for (int q = 0; q < Q->npoints; q++) {
    double m[3];
    simplex_permute(dim, Q->points + q * dim, p, m);
    int found = 0;
    for (int r = 0; r < Q->npoints && !found; r++) {
      double d = 0;
      for (int i = 0; i < dim; i++) {
        double e = m[i] - Q->points[r * dim + i];
        d += e < 0 ? -e : e;
      }
      double dw = Q->weights[r] - Q->weights[q];
      found = d < 1e-12 && (dw < 0 ? -dw : dw) <= 1e-12 * (Q->weights[q] < 0 ? -Q->weights[q]
                                                                              : Q->weights[q]);
    }
    if (!found) return 0;
  }
  return 1;
}

int fe_patch_walk_reuses(fe_cell_type cell, const fe_quadrature *rules, int nrules)
{
  if (cell != FE_CELL_TET && cell != FE_CELL_TRI) return 0;
  /* a transposition and a cycle generate every permutation of the vertices */
  static const int swap01[4] = {1, 0, 2, 3}, cyc3[4] = {1, 2, 0, 3}, cyc4[4] = {1, 2, 3, 0};
  const int *gens[2] = {swap01, cell == FE_CELL_TET ? cyc4 : cyc3};
  for (int r = 0; r < nrules; r++)
    for (int k = 0; k < 2; k++)
      if (!rule_invariant(&rules[r], gens[k])) return 0;
  return 1;
}

void fe_patches_free(fe_patches *P)
{
  free(P->start);
  free(P->nodes);
  free(P->runs);
  free(P->lcells);
  free(P->events);
  free(P->estart);
  memset(P, 0, sizeof *P);
}

/* Nodes shared by a cell's facet with its neighbour's: tri and quad 2, tet and prism 3, hex 4. */
static int facet_nodes(fe_cell_type t)
{
  return t == FE_CELL_HEX ? 4 : t == FE_CELL_TET || t == FE_CELL_PRISM ? 3 : 2;
}

#define MAX_FACETS 6

/* One patch's work space: its cells' local numbers and the node -> cell lists. */
typedef struct walk_ws {
  int n, nb, nl;
  const int *lc;   /* n x nb local numbers, patch order */
  int *noff, *ncell; /* node i's cells: ncell[noff[i] .. noff[i+1]) */
  int *mark, *touched;
  int *nbr;        /* n x MAX_FACETS facet neighbours, -1 padded */
  int *deg;        /* unvisited facet neighbours */
  char *visited;
} walk_ws;

/* Cells sharing nodes with cell j: touched[0..*nt) with mark[k] = shared count (caller
 * clears mark). */
static void shared_with(walk_ws *w, int j, int *nt)
{
  *nt = 0;
  for (int b = 0; b < w->nb; b++) {
    int i = w->lc[j * w->nb + b];
    for (int p = w->noff[i]; p < w->noff[i + 1]; p++) {
      int k = w->ncell[p];
      if (k == j) continue;
      if (w->mark[k]++ == 0) w->touched[(*nt)++] = k;
    }
  }
}

/* The tour of one patch's cells (tour[0..n)), see the file comment. */
static void patch_tour(walk_ws *w, int facet, int *tour)
{
  int n = w->n, nt;
  for (int j = 0; j < n; j++) { /* facet neighbours */
    shared_with(w, j, &nt);
    int f = 0;
    for (int t = 0; t < nt; t++) {
      int k = w->touched[t];
      if (w->mark[k] >= facet && f < MAX_FACETS) w->nbr[j * MAX_FACETS + f++] = k;
      w->mark[k] = 0;
    }
    for (; f < MAX_FACETS; f++) w->nbr[j * MAX_FACETS + f] = -1;
    w->deg[j] = 0;
    for (f = 0; f < MAX_FACETS; f++) w->deg[j] += w->nbr[j * MAX_FACETS + f] >= 0;
    w->visited[j] = 0;
  }
  int cur = -1, first = 0;
  for (int pos = 0; pos < n; pos++) {
    int next = -1;
    for (int f = 0; cur >= 0 && f < MAX_FACETS; f++) {
      int k = w->nbr[cur * MAX_FACETS + f];
      if (k >= 0 && !w->visited[k] && (next < 0 || w->deg[k] < w->deg[next])) next = k;
    }
    if (next < 0 && cur >= 0) { /* a dead end: the unvisited cell sharing the most nodes */
      shared_with(w, cur, &nt);
      for (int t = 0; t < nt; t++) {
        int k = w->touched[t];
        if (!w->visited[k] && (next < 0 || w->mark[k] > w->mark[next])) next = k;
      }
      for (int t = 0; t < nt; t++) w->mark[w->touched[t]] = 0;
    }
    if (next < 0) {
      while (w->visited[first]) first++;
      next = first;
    }
    w->visited[next] = 1;
    tour[pos] = next;
    for (int f = 0; f < MAX_FACETS; f++) {
      int k = w->nbr[next * MAX_FACETS + f];
      if (k >= 0) w->deg[k]--;
    }
    cur = next;
  }
}

/* One event before the places are known. */
typedef struct walk_event {
  int load;   /* local node to load, -1: none */
  int flush;  /* local node whose sum is flushed, -1: none */
  int slot;
  int compute;
} walk_event;

/* The events of one walk over cells cells[0..nc) (local numbers lc, patch order) into ev;
 * returns their count. */
static int walk_events(const int *lc, int nb, const int *cells, int nc, int reuse,
                       walk_event *ev)
{
  int slot[FE_WALK_MAX_SLOTS], ne = 0;
  for (int b = 0; b < nb; b++) slot[b] = -1;
  for (int j = 0; j < nc; j++) {
    const int *cn = lc + (size_t)cells[j] * nb;
    int want[FE_WALK_MAX_SLOTS]; /* the node each slot holds for this cell */
    if (reuse) {                 /* keep the slots whose node the cell has, fill the others */
      int used[FE_WALK_MAX_SLOTS] = {0}, keep[FE_WALK_MAX_SLOTS] = {0};
      for (int s = 0; s < nb; s++)
        for (int b = 0; b < nb && slot[s] >= 0; b++)
          if (cn[b] == slot[s] && !used[b]) {
            used[b] = keep[s] = 1;
            break;
          }
      int b = 0;
      for (int s = 0; s < nb; s++) {
        if (keep[s]) {
          want[s] = slot[s];
          continue;
        }
        while (used[b]) b++;
        used[b] = 1;
        want[s] = cn[b];
      }
    } else { /* the cell's own order; a node already in its slot stays */
      for (int s = 0; s < nb; s++) want[s] = cn[s];
    }
    int first = ne;
    for (int s = 0; s < nb; s++) {
      if (want[s] == slot[s]) continue;
      ev[ne++] = (walk_event){.load = want[s], .flush = slot[s], .slot = s, .compute = 0};
      slot[s] = want[s];
    }
    if (ne == first) ev[ne++] = (walk_event){.load = -1, .flush = -1, .slot = 0, .compute = 0};
    ev[ne - 1].compute = 1;
  }
  for (int s = 0; s < nb; s++)
    if (slot[s] >= 0) ev[ne++] = (walk_event){.load = -1, .flush = slot[s], .slot = s, .compute = 0};
  return ne;
}

/* Patch g's tour, walks and events: rewrites perm (the patch's stored cells) into tour order,
 * fills runs[0..nl) (run words) and returns the packed events (items x *ne, walk-interleaved). */
static int patch_walks(walk_ws *w, int facet, int walk, int items, int reuse, int lanes,
                       int *perm, int *runs, unsigned **out, int *ne_out, int *maxc)
{
  int n = w->n, nb = w->nb, nl = w->nl;
  int per = walk * nb + nb + walk; /* the most events one walk can have */
  int *tour = malloc(sizeof(int) * (size_t)(n + 1)), *cnt = calloc((size_t)items + 1, sizeof(int));
  int *tmp = malloc(sizeof(int) * (size_t)(n + 1));
  walk_event *ev = malloc(sizeof(walk_event) * (size_t)items * per);
  if (!tour || !cnt || !tmp || !ev) {
    free(tour), free(cnt), free(tmp), free(ev);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the walks");
  }
  patch_tour(w, facet, tour);
  for (int j = 0; j < n; j++) tmp[j] = perm[tour[j]];
  memcpy(perm, tmp, sizeof(int) * (size_t)n);
  int ne = 0;
  for (int t = 0; t < items; t++) {
    int c0 = t * walk, nc = c0 >= n ? 0 : (n - c0 < walk ? n - c0 : walk);
    cnt[t] = nc ? walk_events(w->lc, nb, tour + c0, nc, reuse, ev + (size_t)t * per) : 0;
    if (cnt[t] > ne) ne = cnt[t];
  }
  /* the runs: flushes per node, then each flush's place in event order */
  memset(runs, 0, sizeof(int) * (size_t)nl);
  for (int t = 0; t < items; t++)
    for (int k = 0; k < cnt[t]; k++)
      if (ev[(size_t)t * per + k].flush >= 0) runs[ev[(size_t)t * per + k].flush]++;
  int total = runs_from_counts(runs, nl, lanes);
  *maxc = total;
  unsigned *packed = calloc((size_t)items * ne + 1, sizeof(unsigned));
  int *fill = calloc((size_t)nl + 1, sizeof(int));
  if (!packed || !fill || total > FE_WALK_MAX_PLACES) {
    free(tour), free(cnt), free(tmp), free(ev), free(fill);
    if (packed && fill) {
      free(packed);
      FE_ERROR(FE_ERR_ARG, "a patch needs %d places for its contributions, more than a walk's "
               "events can name (%d): use a smaller block", total, FE_WALK_MAX_PLACES);
    }
    free(packed);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the walk events");
  }
  for (int t = 0; t < items; t++)
    for (int k = 0; k < cnt[t]; k++) {
      const walk_event *e = &ev[(size_t)t * per + k];
      unsigned v = (unsigned)e->slot << 26;
      if (e->flush >= 0) v |= (unsigned)next_place(runs, fill, e->flush, lanes) << 11 | 1u << 29;
      if (e->load >= 0) v |= (unsigned)e->load | 1u << 30;
      if (e->compute) v |= 1u << 31;
      packed[(size_t)k * items + t] = v;
    }
  free(tour), free(cnt), free(tmp), free(ev), free(fill);
  *out = packed;
  *ne_out = ne;
  return 0;
}

/* Scratch for one patch's node list on one thread: an open-addressing table of the patch's
 * nodes, each slot the node + 1 (0: empty) and its number in order of first appearance, with
 * at least twice the slots of the most nodes a patch has had (a P1 patch of 512 tets touches
 * about 160: 4 KB, in L1); and per distinct node its slot, its place in the sorted list and
 * its sort key (with the sort's scratch). A table a patch replaces a radix sort of its (node,
 * position) pairs, whose passes over 2048 buckets cost more than the patch's entries. */
typedef struct list_ws {
  unsigned cap;
  int (*table)[2];   /* cap slots: node + 1, its number */
  int *slot, *rank;  /* per distinct node */
  uint64_t *key;     /* 2 x entries */
} list_ws;

static void list_ws_free(list_ws *w)
{
  free(w->table), free(w->slot), free(w->rank), free(w->key);
  memset(w, 0, sizeof *w);
}

static int list_ws_init(list_ws *w, size_t per)
{
  memset(w, 0, sizeof *w);
  w->cap = 256;
  w->table = calloc(w->cap, sizeof *w->table);
  w->slot = malloc(sizeof(int) * (per + 1));
  w->rank = malloc(sizeof(int) * (per + 1));
  w->key = malloc(sizeof(uint64_t) * 2 * (per + 1));
  if (w->table && w->slot && w->rank && w->key) return 0;
  list_ws_free(w);
  return -1;
}

static unsigned list_slot(const list_ws *w, int node)
{
  const unsigned mask = w->cap - 1;
  unsigned h = ((unsigned)node * 2654435761u) & mask;
  while (w->table[h][0] && w->table[h][0] != node + 1) h = (h + 1) & mask;
  return h;
}

/* The table twice as large, its u nodes moved over (-1: out of memory). */
static int list_grow(list_ws *w, int u)
{
  int (*old)[2] = w->table;
  w->table = calloc(2 * (size_t)w->cap, sizeof *w->table);
  if (!w->table) {
    w->table = old;
    return -1;
  }
  w->cap *= 2;
  for (int i = 0; i < u; i++) {
    const int node = old[w->slot[i]][0] - 1;
    const unsigned h = list_slot(w, node);
    w->table[h][0] = node + 1;
    w->table[h][1] = i;
    w->slot[i] = (int)h;
  }
  free(old);
  return 0;
}

/* The nodes the patch of stored cells perm[0..block) touches, into list (returns how many; -1
 * out of memory), ascending or (sorted 0) in the order the cells meet them, and where in it
 * each (cell j, basis function b) is: loc[j*nb + b] (-1: padding). */
static int patch_list(const fe_space *V, const int *perm, int block, int sorted, list_ws *w,
                      int *list, int *loc)
{
  const int nb = V->elem.nbasis;
  int u = 0;
  for (int j = 0; j < block; j++) {
    const int c = perm[j];
    if (j + 48 < block && perm[j + 48] >= 0) /* the cell six cubes on (one miss each) */
      __builtin_prefetch(V->cell_nodes + (size_t)perm[j + 48] * nb);
    for (int b = 0; b < nb; b++) {
      if (c < 0) {
        loc[j * nb + b] = -1;
        continue;
      }
      const int node = V->cell_nodes[(size_t)c * nb + b];
      unsigned h = list_slot(w, node);
      if (!w->table[h][0]) {
        if (2 * (unsigned)(u + 1) > w->cap) {
          if (list_grow(w, u)) return -1;
          h = list_slot(w, node);
        }
        w->table[h][0] = node + 1;
        w->table[h][1] = u;
        w->slot[u] = (int)h;
        w->key[u] = (uint64_t)(unsigned)node << 32 | (uint64_t)u;
        u++;
      }
      loc[j * nb + b] = w->table[h][1];
    }
  }
  if (!sorted) { /* the nodes in the order the cells meet them */
    for (int i = 0; i < u; i++) {
      list[i] = (int)(w->key[i] >> 32);
      w->table[w->slot[i]][0] = 0; /* the table empty again for the next patch */
    }
    return u;
  }
  fe_sort_u64(w->key, NULL, (size_t)u, w->key + u, NULL, 32);
  int *rank = w->rank;
  for (int i = 0; i < u; i++) {
    const int id = (int)(w->key[i] & 0xffffffffu);
    list[i] = (int)(w->key[i] >> 32);
    rank[id] = i;
    w->table[w->slot[id]][0] = 0;
  }
  for (int e = 0; e < block * nb; e++)
    if (loc[e] >= 0) loc[e] = rank[loc[e]];
  return u;
}

/* The sorted nodes each patch touches: lists[g*block*nb ..] with count[g] entries, and where
 * in its list each of the patch's (cell j, node b) is: local[g*block*nb + j*nb + b]. */
static int patch_node_lists(const fe_space *V, const int *perm, int ng, int block, int *lists,
                            int *local, int *count)
{
  int failed = 0;
  size_t per = (size_t)block * V->elem.nbasis;
#pragma omp parallel
  {
    list_ws w;
    if (list_ws_init(&w, per)) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 64)
    for (int g = 0; g < ng; g++) {
      count[g] = w.table ? patch_list(V, perm + (size_t)g * block, block, 1, &w,
                                      lists + (size_t)g * per, local + (size_t)g * per) : -1;
      if (count[g] < 0) {
#pragma omp atomic write
        failed = 1;
      }
    }
    list_ws_free(&w);
  }
  if (failed) FE_ERROR(FE_ERR_MEM, "out of host memory for the patches' node lists");
  return 0;
}

/* Patch g's walks: its cells' local numbers, the node -> cell lists, then patch_walks. */
static int build_one_walk(const fe_space *V, const int *loc, int nl, int *perm, int block,
                          int walk, int items, int reuse, int lanes, int *runs, unsigned **ev,
                          int *ne, int *maxc)
{
  int nb = V->elem.nbasis, n = 0;
  while (n < block && perm[n] >= 0) n++;
  walk_ws w = {.n = n, .nb = nb, .nl = nl};
  int *lc = malloc(sizeof(int) * ((size_t)n * nb + 1));
  w.noff = calloc((size_t)nl + 2, sizeof(int));
  w.ncell = malloc(sizeof(int) * ((size_t)n * nb + 1));
  w.mark = calloc((size_t)n + 1, sizeof(int));
  w.touched = malloc(sizeof(int) * ((size_t)n + 1));
  w.nbr = malloc(sizeof(int) * ((size_t)n * MAX_FACETS + 1));
  w.deg = malloc(sizeof(int) * ((size_t)n + 1));
  w.visited = malloc((size_t)n + 1);
  int rc = 0;
  if (!lc || !w.noff || !w.ncell || !w.mark || !w.touched || !w.nbr || !w.deg || !w.visited) {
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the walks");
  } else {
    for (int j = 0; j < n; j++)
      for (int b = 0; b < nb; b++) {
        int i = loc[j * nb + b];
        lc[j * nb + b] = i;
        w.noff[i + 2]++;
      }
    for (int i = 0; i < nl; i++) w.noff[i + 2] += w.noff[i + 1];
    for (int j = 0; j < n; j++)
      for (int b = 0; b < nb; b++) w.ncell[w.noff[lc[j * nb + b] + 1]++] = j;
    w.lc = lc;
    rc = patch_walks(&w, facet_nodes(V->elem.cell), walk, items, reuse, lanes, perm, runs, ev,
                     ne, maxc);
  }
  free(lc), free(w.noff), free(w.ncell), free(w.mark), free(w.touched), free(w.nbr), free(w.deg);
  free(w.visited);
  return rc;
}

/* One item per cell: the run words of a patch's nl nodes (runs) and each (cell j, basis
 * function b)'s local node and place, into lc[b*block + j] (padding: 0), from the local numbers
 * loc[j*nb + b]; fill is scratch of nl. Returns the places in all (more than
 * FE_PATCH_MAX_PLACES: the words cannot name them, nothing filed). */
static int file_items(const int *loc, int nl, const int *perm, int block, int nb, int lanes,
                      unsigned *lc, int *runs, int *fill)
{
  memset(runs, 0, sizeof(int) * (size_t)nl);
  for (int j = 0; j < block; j++)
    for (int b = 0; perm[j] >= 0 && b < nb; b++) runs[loc[j * nb + b]]++;
  int total = runs_from_counts(runs, nl, lanes);
  if (total > FE_PATCH_MAX_PLACES) return total;
  memset(fill, 0, sizeof(int) * (size_t)nl);
  for (int j = 0; j < block; j++) /* cell order within each run */
    for (int b = 0; b < nb; b++) {
      const int k = perm[j] >= 0 ? loc[j * nb + b] : -1;
      lc[(size_t)b * block + j] =
          k < 0 ? 0 : (unsigned)k | (unsigned)next_place(runs, fill, k, lanes) << 16;
    }
  return total;
}

/* What one thread built of the item-per-cell patches: their node lists and run words, one
 * patch after another (copied into place once every patch's size is known). */
typedef struct patch_out {
  int *nodes, *runs;
  size_t n, cap;
} patch_out;

static int out_reserve(patch_out *o, size_t more)
{
  if (o->n + more <= o->cap) return 0;
  size_t cap = o->cap ? o->cap : 4096;
  while (cap < o->n + more) cap *= 2;
  int *nodes = realloc(o->nodes, sizeof(int) * cap);
  if (nodes) o->nodes = nodes;
  int *runs = nodes ? realloc(o->runs, sizeof(int) * cap) : NULL;
  if (runs) o->runs = runs;
  if (!nodes || !runs) return -1;
  o->cap = cap;
  return 0;
}

/* One item per cell: each patch's list, local numbers, runs and places in one pass over its
 * cells, the places written straight into P->lcells (its only large array). */
static int build_items(const fe_space *V, const int *perm, int ng, int block, int lanes,
                       int sorted, fe_patches *P)
{
  const int nb = V->elem.nbasis, nthreads = omp_get_max_threads();
  const size_t per = (size_t)block * nb;
  int *count = malloc(sizeof(int) * ((size_t)ng + 1));
  int *who = malloc(sizeof(int) * ((size_t)ng + 1)), *maxc = malloc(sizeof(int) * ((size_t)ng + 1));
  size_t *at = malloc(sizeof(size_t) * ((size_t)ng + 1));
  patch_out *out = calloc((size_t)nthreads, sizeof *out);
  P->start = malloc(sizeof(int) * ((size_t)ng + 1));
  P->lcells = fe_alloc(sizeof(unsigned) * ((size_t)ng * per + 1));
  int rc = 0;
  if (!count || !who || !maxc || !at || !out || !P->start || !P->lcells)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                      "out of host memory for the patches");
#pragma omp parallel if (!rc)
  {
    patch_out *o = out ? &out[omp_get_thread_num()] : NULL;
    list_ws w;
    int *list = malloc(sizeof(int) * (per + 1)), *loc = malloc(sizeof(int) * (per + 1));
    int *fill = malloc(sizeof(int) * (per + 1));
    int ready = !rc && list && loc && fill && !list_ws_init(&w, per);
#pragma omp for schedule(dynamic, 16)
    for (int g = 0; g < (rc ? 0 : ng); g++) {
      const int *pg = perm + (size_t)g * block;
      int u = ready ? patch_list(V, pg, block, sorted, &w, list, loc) : -1, bad = u < 0 ? 1 : 0;
      if (!bad && u > FE_PATCH_MAX_NODES) bad = 2;
      else if (!bad && out_reserve(o, (size_t)u)) bad = 1;
      if (!bad) {
        maxc[g] = file_items(loc, u, pg, block, nb, lanes, P->lcells + (size_t)g * per,
                             o->runs + o->n, fill);
        bad = maxc[g] > FE_PATCH_MAX_PLACES ? 3 : 0;
      }
      if (bad) {
#pragma omp critical
        if (!rc) { /* the first failure's message is kept */
          P->too_large = bad > 1;
          rc = bad == 1 ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                       "out of host memory for the patches")
             : bad == 2 ? fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                                       "a patch of %d cells touches %d nodes, more than %d "
                                       "(use a smaller block)", block, u, FE_PATCH_MAX_NODES)
                        : fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                                       "a patch of %d cells needs %d places for its "
                                       "contributions, more than %d (use a smaller block)",
                                       block, maxc[g], FE_PATCH_MAX_PLACES);
        }
        continue;
      }
      memcpy(o->nodes + o->n, list, sizeof(int) * (size_t)u);
      who[g] = omp_get_thread_num();
      at[g] = o->n;
      o->n += (size_t)u;
      count[g] = u;
    }
    if (ready) list_ws_free(&w);
    free(list), free(loc), free(fill);
  }
  long long total = 0;
  for (int g = 0; !rc && g < ng; g++) {
    P->start[g] = (int)total;
    total += count[g];
    if (count[g] > P->maxl) P->maxl = count[g];
    if (maxc[g] > P->maxc) P->maxc = maxc[g];
  }
  if (!rc && total >= 2147483647LL)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                      "the patches hold %lld nodes, more than an int counts (use a larger block)",
                      total);
  if (!rc) {
    P->start[ng] = (int)total;
    P->nodes_total = (double)total;
    P->nodes = malloc(sizeof(int) * ((size_t)total + 1));
    P->runs = malloc(sizeof(int) * ((size_t)total + 1));
    if (!P->nodes || !P->runs)
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                        "out of host memory for the patches");
  }
#pragma omp parallel for schedule(static) if (!rc)
  for (int g = 0; g < (rc ? 0 : ng); g++) {
    memcpy(P->nodes + P->start[g], out[who[g]].nodes + at[g], sizeof(int) * (size_t)count[g]);
    memcpy(P->runs + P->start[g], out[who[g]].runs + at[g], sizeof(int) * (size_t)count[g]);
  }
  for (int t = 0; out && t < nthreads; t++) free(out[t].nodes), free(out[t].runs);
  free(out), free(count), free(who), free(maxc), free(at);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

/* Walks: every patch's list and local numbers first (the walks' tours need them), then each
 * patch's walks and events. */
static int build_walks(const fe_space *V, int *perm, int ng, int block, int walk, int reuse,
                       int lanes, fe_patches *P)
{
  const size_t per = (size_t)block * V->elem.nbasis;
  int *lists = malloc(sizeof(int) * ((size_t)ng * per + 1));
  int *local = malloc(sizeof(int) * ((size_t)ng * per + 1));
  int *count = malloc(sizeof(int) * ((size_t)ng + 1));
  P->start = malloc(sizeof(int) * ((size_t)ng + 1));
  if (!lists || !count || !local || !P->start ||
      patch_node_lists(V, perm, ng, block, lists, local, count)) {
    free(lists), free(count), free(local);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the patches");
  }
  long long total = 0;
  for (int g = 0; g < ng; g++) {
    P->start[g] = (int)total;
    total += count[g];
    if (count[g] > P->maxl) P->maxl = count[g];
  }
  P->start[ng] = (int)total;
  P->nodes_total = (double)total;
  /* the node lists packed in place (patch g's destination ends where g + 1's list begins at
   * the latest: start[g + 1] <= (g + 1) per), no second array */
  for (int g = 0; total < 2147483647LL && g < ng; g++)
    memmove(lists + P->start[g], lists + (size_t)g * per, sizeof(int) * (size_t)count[g]);
  int rc = 0;
  if (total >= 2147483647LL)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                      "the patches hold %lld nodes, more than an int counts (use a larger block)", total);
  else if (P->maxl > FE_WALK_MAX_NODES) {
    P->too_large = 1;
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                      "a patch of %d cells touches %d nodes, more than %d (use a smaller block)",
                      block, P->maxl, FE_WALK_MAX_NODES);
  }
  unsigned **ev = NULL;
  int *ne = NULL, *maxc = NULL;
  if (!rc) {
    P->nodes = lists; /* packed above */
    lists = NULL;
    P->runs = calloc((size_t)total + 1, sizeof(int));
    maxc = calloc((size_t)ng + 1, sizeof(int));
    ev = calloc((size_t)ng + 1, sizeof(unsigned *));
    ne = calloc((size_t)ng + 1, sizeof(int));
    if (!P->runs || !maxc || !ev || !ne)
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the patches");
  }
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 16)
  for (int g = 0; g < (rc ? 0 : ng); g++) {
    int bad = build_one_walk(V, local + (size_t)g * per, count[g], perm + (size_t)g * block,
                             block, walk, P->items, reuse, lanes, P->runs + P->start[g], &ev[g],
                             &ne[g], &maxc[g]);
    if (bad) {
#pragma omp critical
      failed = bad; /* the message of one failure is kept */
    }
  }
  if (!rc && failed) rc = failed;
  for (int g = 0; maxc && g < ng; g++) { /* the most places (a patch over the limit failed) */
    if (maxc[g] > P->maxc) P->maxc = maxc[g];
    if (maxc[g] > FE_WALK_MAX_PLACES) P->too_large = 1;
  }
  if (!rc) { /* the events, patch after patch */
    P->estart = malloc(sizeof(int) * ((size_t)ng + 1));
    size_t n = 0;
    for (int g = 0; P->estart && g < ng; g++) {
      P->estart[g] = (int)n;
      n += (size_t)ne[g] * P->items;
      if (ne[g] * P->items > P->maxe) P->maxe = ne[g] * P->items;
    }
    if (P->estart) P->estart[ng] = (int)n;
    P->nevents = n;
    P->events = malloc(sizeof(unsigned) * (n + 1));
    if (!P->estart || !P->events || n >= 2147483647u)
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "too many walk events (%zu)", n);
    for (int g = 0; !rc && g < ng; g++)
      memcpy(P->events + P->estart[g], ev[g], sizeof(unsigned) * (size_t)ne[g] * P->items);
  }
  for (int g = 0; ev && g < ng; g++) free(ev[g]);
  free(ev), free(ne), free(maxc), free(lists), free(count), free(local);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

int fe_patches_build(const fe_space *V, const unsigned char *constrained, int *perm, size_t npad,
                     int block, int walk, int reuse, int lanes, int sorted, fe_patches *P)
{
  int nb = V->elem.nbasis, ng = (int)(npad / (size_t)block);
  memset(P, 0, sizeof *P);
  P->npatch = ng;
  P->block = block;
  P->walk = walk;
  P->lanes = lanes;
  P->items = walk > 0 ? (block + walk - 1) / walk : 0;
  FE_ASSERT(lanes >= 1 && lanes <= 64 && !(lanes & (lanes - 1)), FE_ERR_ARG,
            "lanes = %d: the runs interleave a power of two of nodes, at most 64", lanes);
  FE_ASSERT(walk <= 0 || nb <= FE_WALK_MAX_SLOTS, FE_ERR_ARG,
            "walks hold at most %d nodes per cell; %s has %d", FE_WALK_MAX_SLOTS, V->name, nb);
  if (walk <= 0 && (size_t)block * nb > FE_PATCH_MAX_PLACES) {
    P->too_large = 1;
    FE_ERROR(FE_ERR_ARG, "a patch of %d cells of %d basis functions files %zu contributions, "
             "more than %d (use a smaller block)", block, nb, (size_t)block * nb,
             FE_PATCH_MAX_PLACES);
  }
  /* the host's arrays, about five ints a cell's node at once (lists, local numbers, nodes,
   * runs, places), and walks' neighbours and events besides */
  FE_CHECK(fe_memory_check(sizeof(int) * npad * nb * (walk > 0 ? 8 : 5), "strategy patch on %s: "
                           "the patches' node lists (%zu cells of %d nodes)", V->name, npad, nb));
  int rc = walk > 0 ? build_walks(V, perm, ng, block, walk, reuse, lanes, P)
                    : build_items(V, perm, ng, block, lanes, sorted, P);
  if (rc) {
    const int too_large = P->too_large;
    fe_patches_free(P);
    P->too_large = too_large;
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (constrained)
    for (long long i = 0; i < (long long)P->start[ng]; i++)
      if (constrained[P->nodes[i]]) P->nodes[i] = ~P->nodes[i];
  return 0;
}
