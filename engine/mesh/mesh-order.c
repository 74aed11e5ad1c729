/* felab mesh reordering, for locality (refinement is in mesh-ops.c).
 *
 * Reordering. "rcm": reverse Cuthill-McKee on the graph of vertices that share a cell, each
 * component started from a pseudo-peripheral vertex; cells then follow their lowest new
 * vertex. "hilbert": vertices and cell centroids sorted by their index along a Hilbert curve
 * (Skilling's transpose algorithm, 21 bits per axis) through the bounding box. "layers": the
 * cells by their level in a breadth-first sweep from a far vertex (the order mesh.load gives,
 * each layer along a Morton curve), "morton": the cells along fe_mesh_morton_order's curve;
 * both number the vertices as the cells first use them. Refinement numbers them so too. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/sort.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/mesh-ops-private.h"

/* ----- reordering ----- */

typedef struct sort_item {
  uint64_t key;
  int id;
} sort_item;

/* qsort order of sort items: by key, then by id (a stable sort). */
static int sort_item_compare(const void *a, const void *b)
{
  const sort_item *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Vertex graph of m (vertices sharing a cell) as sorted, unique CSR rows. */
static int vertex_graph(const fe_mesh *m, int **ptr_out, int **adj_out)
{
  const int n = m->nvertices, nvc = m->nvc;
  int *ptr, *adj;
  FE_CALLOC(ptr, (size_t)n + 1, "vertex graph rows");
  for (size_t k = 0; k < (size_t)m->ncells * nvc; k++) ptr[m->cells[k] + 1] += nvc - 1;
  for (int v = 0; v < n; v++) ptr[v + 1] += ptr[v];
  adj = fe_malloc(((size_t)ptr[n] + 1) * sizeof(int), "vertex graph");
  int *fill = fe_malloc(((size_t)n + 1) * sizeof(int), "vertex graph fill");
  if (!adj || !fill) {
    free(ptr), free(adj), free(fill);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  memcpy(fill, ptr, (size_t)n * sizeof(int));
  for (int e = 0; e < m->ncells; e++) {
    const int *c = m->cells + (size_t)e * nvc;
    for (int i = 0; i < nvc; i++)
      for (int j = 0; j < nvc; j++)
        if (i != j) adj[fill[c[i]]++] = c[j];
  }
  int out = 0; /* sort each row, drop repeats, compact in place */
  for (int v = 0, start = 0; v < n; v++) {
    const int end = ptr[v + 1];
    int *row = adj + start;
    const int len = end - start;
    for (int i = 1; i < len; i++)
      for (int j = i; j > 0 && row[j - 1] > row[j]; j--) {
        int swap = row[j];
        row[j] = row[j - 1], row[j - 1] = swap;
      }
    ptr[v] = out;
    for (int i = 0; i < len; i++)
      if (row[i] != v && (i == 0 || row[i] != row[i - 1])) adj[out++] = row[i];
    start = end;
  }
  ptr[n] = out;
  free(fill);
  *ptr_out = ptr, *adj_out = adj;
  return 0;
}

/* Breadth-first search from start over unvisited vertices; returns the vertex of least degree
 * on the last level and its depth in *depth. queue and level are scratch (level reset after). */
static int bfs_far(const int *ptr, const int *adj, const unsigned char *visited, int start,
                   int *queue, int *level, int *depth)
{
  int head = 0, tail = 0, far = -1;
  queue[tail++] = start;
  level[start] = 0;
  while (head < tail) {
    const int v = queue[head++];
    for (int k = ptr[v]; k < ptr[v + 1]; k++) {
      const int w = adj[k];
      if (visited[w] || level[w] >= 0) continue;
      level[w] = level[v] + 1;
      queue[tail++] = w;
    }
  }
  *depth = level[queue[tail - 1]];
  for (int i = 0; i < tail; i++) {
    const int v = queue[i];
    if (level[v] == *depth && (far < 0 || ptr[v + 1] - ptr[v] < ptr[far + 1] - ptr[far]))
      far = v;
  }
  for (int i = 0; i < tail; i++) level[queue[i]] = -1;
  return far;
}

/* Reverse Cuthill-McKee: order[i] = the old vertex that becomes vertex i. */
static int rcm_order(const fe_mesh *m, int *order)
{
  const int n = m->nvertices;
  int *ptr = NULL, *adj = NULL;
  FE_CHECK(vertex_graph(m, &ptr, &adj));
  sort_item *by_degree = fe_malloc(((size_t)n + 1) * sizeof *by_degree, "rcm degrees");
  int *level = fe_malloc(((size_t)n + 1) * sizeof(int), "rcm levels");
  int *queue = fe_malloc(((size_t)n + 1) * sizeof(int), "rcm queue");
  unsigned char *visited = fe_calloc((size_t)n + 1, 1, "rcm marks");
  if (!by_degree || !level || !queue || !visited) {
    free(ptr), free(adj), free(by_degree), free(level), free(queue), free(visited);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int v = 0; v < n; v++) {
    by_degree[v].key = (uint64_t)(ptr[v + 1] - ptr[v]), by_degree[v].id = v;
    level[v] = -1;
  }
  qsort(by_degree, (size_t)n, sizeof *by_degree, sort_item_compare);
  int count = 0;
  for (int s = 0; s < n; s++) {
    int start = by_degree[s].id;
    if (visited[start]) continue;
    /* pseudo-peripheral start: go to the far end while the depth grows */
    int depth = -1;
    for (int iter = 0; iter < 8; iter++) {
      int d, far = bfs_far(ptr, adj, visited, start, queue, level, &d);
      if (d <= depth) break;
      depth = d;
      start = far;
    }
    /* Cuthill-McKee from start: neighbours in increasing degree */
    int head = count;
    order[count++] = start;
    visited[start] = 1;
    while (head < count) {
      const int v = order[head++], first = count;
      for (int k = ptr[v]; k < ptr[v + 1]; k++) {
        const int w = adj[k];
        if (visited[w]) continue;
        visited[w] = 1;
        int j = count++;
        for (; j > first && ptr[order[j - 1] + 1] - ptr[order[j - 1]] > ptr[w + 1] - ptr[w]; j--)
          order[j] = order[j - 1];
        order[j] = w;
      }
    }
  }
  for (int i = 0; i < n / 2; i++) { /* reverse */
    int swap = order[i];
    order[i] = order[n - 1 - i], order[n - 1 - i] = swap;
  }
  free(ptr), free(adj), free(by_degree), free(level), free(queue), free(visited);
  return 0;
}

/* Index along the Hilbert curve of the point with 21-bit integer coordinates X[0..n) (John
 * Skilling, "Programming the Hilbert curve", 2004: axes to transpose, then interleave). */
static uint64_t hilbert_index(uint32_t *X, int n)
{
  const int bits = 21;
  const uint32_t M = 1u << (bits - 1);
  for (uint32_t Q = M; Q > 1; Q >>= 1) { /* inverse undo */
    const uint32_t P = Q - 1;
    for (int i = 0; i < n; i++)
      if (X[i] & Q) X[0] ^= P;
      else {
        uint32_t t = (X[0] ^ X[i]) & P;
        X[0] ^= t, X[i] ^= t;
      }
  }
  for (int i = 1; i < n; i++) X[i] ^= X[i - 1]; /* Gray encode */
  uint32_t t = 0;
  for (uint32_t Q = M; Q > 1; Q >>= 1)
    if (X[n - 1] & Q) t ^= Q - 1;
  for (int i = 0; i < n; i++) X[i] ^= t;
  uint64_t h = 0;
  for (int b = bits - 1; b >= 0; b--)
    for (int i = 0; i < n; i++) h = (h << 1) | ((X[i] >> b) & 1u);
  return h;
}

/* Hilbert key of point x in the box [lo, lo + span] of dimension dim. */
static uint64_t hilbert_key(const double *x, const double *lo, const double *span, int dim)
{
  uint32_t X[3];
  for (int d = 0; d < dim; d++) {
    double s = span[d] > 0 ? (x[d] - lo[d]) / span[d] : 0;
    s = s < 0 ? 0 : s > 1 ? 1 : s;
    X[d] = (uint32_t)(s * ((1u << 21) - 1));
  }
  return hilbert_index(X, dim);
}

/* The curved geometry follows a reordering: row e of geo_cells is old row order[e] (NULL:
 * row e), its vertices renumbered by newid, its other nodes numbered nvertices.. in order of
 * first use; geo_coords moves with them (x: the reordered vertices). */
static int apply_order_geo(fe_mesh *m, const int *newid, const int *order, const double *x)
{
  const int nv = m->nvertices, ngn = m->ngn, nhigh = m->ngeo_nodes - nv;
  int *g = fe_malloc(((size_t)m->ncells * ngn + 1) * sizeof(int), "reordered curved cells");
  int *hnew = fe_malloc(((size_t)nhigh + 1) * sizeof(int), "geometry node order");
  double *y = fe_malloc(((size_t)m->ngeo_nodes * 3 + 1) * sizeof(double), "reordered geometry");
  if (!g || !hnew || !y) {
    free(g), free(hnew), free(y);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int k = 0; k < nhigh; k++) hnew[k] = -1;
  int next = nv;
  for (int e = 0; e < m->ncells; e++) {
    const int *old = m->geo_cells + (size_t)(order ? order[e] : e) * ngn;
    int *dst = g + (size_t)e * ngn;
    for (int k = 0; k < ngn; k++) {
      if (k < m->nvc) {
        dst[k] = newid[old[k]];
        continue;
      }
      if (hnew[old[k] - nv] < 0) hnew[old[k] - nv] = next++;
      dst[k] = hnew[old[k] - nv];
    }
  }
  memcpy(y, x, 3 * (size_t)nv * sizeof(double));
  for (int k = 0; k < nhigh; k++)
    if (hnew[k] >= 0)
      memcpy(y + 3 * (size_t)hnew[k], m->geo_coords + 3 * ((size_t)nv + k), 3 * sizeof(double));
  m->ngeo_nodes = next; /* a node of no cell is dropped */
  free(hnew), free(m->geo_cells), free(m->geo_coords);
  m->geo_cells = g, m->geo_coords = y;
  return 0;
}

/* Renumber m in place: the k-th cell becomes old cell order[k] (order NULL: the cells keep
 * their places), vertex v becomes newid[v], or with newid NULL the vertices are numbered in
 * the order the cells (in their new order) first use them, those of no cell last; the
 * regions, the facets and a curved mesh's nodes follow, and *vertex (may be NULL) gets its new
 * id. The cells are no longer known to lie in layers (m->layered 0). */
int mesh_permute_cells(fe_mesh *m, const int *order, const int *newid, int *vertex)
{
  const int nv = m->nvertices, nvc = m->nvc;
  int *touch = newid ? NULL : fe_malloc(((size_t)nv + 1) * sizeof(int), "vertex order");
  double *x = fe_malloc(3 * ((size_t)nv + 1) * sizeof(double), "reordered vertices");
  int *c = fe_malloc(((size_t)m->ncells * nvc + 1) * sizeof(int), "reordered cells");
  int *t = fe_malloc(((size_t)m->ncells + 1) * sizeof(int), "reordered cell regions");
  if ((!newid && !touch) || !x || !c || !t) {
    free(touch), free(x), free(c), free(t);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  if (!newid) { /* first use */
    for (int v = 0; v < nv; v++) touch[v] = -1;
    int next = 0;
    for (int e = 0; e < m->ncells; e++)
      for (int k = 0; k < nvc; k++) {
        const int v = m->cells[(size_t)(order ? order[e] : e) * nvc + k];
        if (touch[v] < 0) touch[v] = next++;
      }
    for (int v = 0; v < nv; v++)
      if (touch[v] < 0) touch[v] = next++;
    newid = touch;
  }
  for (int v = 0; v < nv; v++)
    memcpy(x + 3 * (size_t)newid[v], m->coords + 3 * (size_t)v, 3 * sizeof(double));
  for (int e = 0; e < m->ncells; e++) {
    const int old = order ? order[e] : e;
    for (int k = 0; k < nvc; k++) c[(size_t)e * nvc + k] = newid[m->cells[(size_t)old * nvc + k]];
    t[e] = m->cell_tags[old];
  }
  if (m->geo_order == 2 && m->geo_cells && m->geo_coords) {
    int rc = apply_order_geo(m, newid, order, x);
    if (rc) {
      free(touch), free(x), free(c), free(t);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
  }
  for (size_t k = 0; k < (size_t)m->nfacets * m->nvf; k++) m->facets[k] = newid[m->facets[k]];
  if (vertex) *vertex = newid[*vertex];
  free(touch), free(m->coords), free(m->cells), free(m->cell_tags);
  m->coords = x, m->cells = c, m->cell_tags = t;
  m->layered = 0;
  fe_mesh_forget_classes(m); /* each cell's class moved with it */
  return 0;
}

int fe_mesh_permute_cells(fe_mesh *m, const int *order)
{
  FE_ASSERT(m && order, FE_ERR_ARG, "mesh permute: missing mesh or order");
  FE_CHECK(mesh_permute_cells(m, order, NULL, NULL));
  return 0;
}

/* The cells around each vertex: around[first[v] .. first[v + 1]) ascending (a counting sort of
 * the cells' vertices). */
static int cells_around(const fe_mesh *m, int **first_out, int **around_out)
{
  const int nv = m->nvertices, nvc = m->nvc;
  const size_t ncv = (size_t)m->ncells * nvc;
  int *start = fe_calloc((size_t)nv + 2, sizeof(int), "cells around vertices");
  int *around = fe_malloc((ncv + 1) * sizeof(int), "cells around vertices");
  if (!start || !around) {
    free(start), free(around);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t k = 0; k < ncv; k++) start[m->cells[k] + 2]++;
  for (int v = 0; v < nv; v++) start[v + 2] += start[v + 1];
  for (int e = 0; e < m->ncells; e++) /* start[v + 1]: where v's next cell goes */
    for (int k = 0; k < nvc; k++) around[start[m->cells[(size_t)e * nvc + k] + 1]++] = e;
  *first_out = start, *around_out = around;
  return 0;
}

/* A breadth-first sweep from vertex s over the vertices that share a cell: vertex levels
 * from base up, each cell's level the least of its vertices' (the level of the vertex that
 * reaches it first). The reached vertices into queue (*n of them); returns the last, one of
 * the farthest. */
static int sweep_from(const fe_mesh *m, const int *first, const int *around, int s, int base,
                      int *vlevel, int *clevel, int *queue, int *n)
{
  const int nvc = m->nvc;
  int head = 0, tail = 0;
  queue[tail++] = s;
  vlevel[s] = base;
  while (head < tail) {
    const int v = queue[head++];
    for (int i = first[v]; i < first[v + 1]; i++) {
      const int e = around[i];
      if (clevel[e] >= 0) continue;
      clevel[e] = vlevel[v];
      for (int k = 0; k < nvc; k++) {
        const int u = m->cells[(size_t)e * nvc + k];
        if (vlevel[u] < 0) vlevel[u] = vlevel[v] + 1, queue[tail++] = u;
      }
    }
  }
  *n = tail;
  return queue[tail - 1];
}

/* The layers of fe_mesh_layer_order; *start >= 0: the first part swept from that vertex
 * (the others from a far vertex of their own), else from a far vertex, whose id *start gets. */
int mesh_layer_order(const fe_mesh *m, int *start, const int *within, int **order)
{
  *order = NULL;
  const int nv = m->nvertices, n = m->ncells;
  int *first = NULL, *around = NULL;
  FE_CHECK(cells_around(m, &first, &around));
  int *vlevel = fe_malloc(((size_t)nv + 1) * sizeof(int), "vertex levels");
  int *clevel = fe_malloc(((size_t)n + 1) * sizeof(int), "cell levels");
  int *queue = fe_malloc(((size_t)nv + 1) * sizeof(int), "sweep queue");
  int *out = fe_malloc(((size_t)n + 1) * sizeof(int), "cell order");
  if (!vlevel || !clevel || !queue || !out) {
    free(first), free(around), free(vlevel), free(clevel), free(queue), free(out);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int v = 0; v < nv; v++) vlevel[v] = -1;
  for (int e = 0; e < n; e++) clevel[e] = -1;
  /* the given vertex's part first, then each other part from a far vertex of its own */
  int base = 0;
  int pending = *start >= 0 && *start < nv && first[*start] < first[*start + 1] ? *start : -1;
  for (int e = 0; e < n; e++)
    while (clevel[e] < 0) {
      int reached, far = pending;
      if (far < 0) { /* the last vertex a sweep from e's first vertex reaches */
        far = sweep_from(m, first, around, m->cells[(size_t)e * m->nvc], base, vlevel, clevel,
                         queue, &reached);
        for (int i = 0; i < reached; i++) {
          const int v = queue[i];
          vlevel[v] = -1;
          for (int j = first[v]; j < first[v + 1]; j++) clevel[around[j]] = -1;
        }
      }
      if (base == 0) *start = far;
      pending = -1;
      sweep_from(m, first, around, far, base, vlevel, clevel, queue, &reached);
      base = vlevel[queue[reached - 1]] + 1; /* each part's levels after the last part's */
    }
  /* a counting sort by level: within a layer, the cells in the order `within` (or their own) */
  int *count = fe_calloc((size_t)base + 2, sizeof(int), "layer sizes");
  if (!count) {
    free(first), free(around), free(vlevel), free(clevel), free(queue), free(out);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int e = 0; e < n; e++) count[clevel[e] + 1]++;
  for (int l = 0; l < base; l++) count[l + 1] += count[l];
  for (int k = 0; k < n; k++) {
    const int e = within ? within[k] : k;
    out[count[clevel[e]]++] = e;
  }
  free(count), free(first), free(around), free(vlevel), free(clevel), free(queue);
  *order = out;
  return 0;
}

int fe_mesh_layer_order(const fe_mesh *m, const int *within, int **order)
{
  FE_ASSERT(m && order, FE_ERR_ARG, "mesh layers: missing mesh or output");
  int start = -1;
  FE_CHECK(mesh_layer_order(m, &start, within, order));
  return 0;
}

int fe_mesh_order_layers(fe_mesh *m, const int *within)
{
  FE_ASSERT(m, FE_ERR_ARG, "mesh layers: no mesh");
  int start = -1, *order;
  FE_CHECK(mesh_layer_order(m, &start, within, &order));
  int rc = mesh_permute_cells(m, order, NULL, &start);
  free(order);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  m->layered = start + 1;
  return 0;
}

/* Reorder m in place along "layers", "morton", "rcm" or "hilbert" (see the top of this file). */
int fe_mesh_reorder(fe_mesh *m, const char *how)
{
  FE_ASSERT(m, FE_ERR_ARG, "mesh reorder: no mesh");
  const int rcm = how && !strcmp(how, "rcm"), hilbert = how && !strcmp(how, "hilbert");
  const int layers = how && !strcmp(how, "layers"), morton = how && !strcmp(how, "morton");
  FE_ASSERT(rcm || hilbert || layers || morton, FE_ERR_ARG,
            "mesh reorder: unknown ordering '%s' (rcm, hilbert, layers, morton)",
            how ? how : "(null)");
  FE_CHECK(fe_mesh_check(m));
  if (layers) {
    FE_CHECK(fe_mesh_order_layers(m, NULL));
    return 0;
  }
  if (morton) {
    int *order;
    FE_CHECK(fe_mesh_morton_order(m, &order));
    int rc = mesh_permute_cells(m, order, NULL, NULL);
    free(order);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    return 0;
  }
  const int n = m->nvertices;
  int *order = fe_malloc(((size_t)n + 1) * sizeof(int), "vertex order");
  int *newid = fe_malloc(((size_t)n + 1) * sizeof(int), "vertex numbers");
  sort_item *items = fe_malloc(((size_t)(n > m->ncells ? n : m->ncells) + 1) * sizeof *items,
                               "reorder keys");
  if (!order || !newid || !items) {
    free(order), free(newid), free(items);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  int rc = 0;
  double lo[3] = {0, 0, 0}, span[3] = {0, 0, 0};
  if (rcm) {
    rc = rcm_order(m, order);
  } else {
    double hi[3];
    fe_mesh_extent(m, lo, hi);
    for (int d = 0; d < 3; d++) span[d] = hi[d] - lo[d];
    for (int v = 0; v < n; v++)
      items[v].key = hilbert_key(m->coords + 3 * (size_t)v, lo, span, m->dim), items[v].id = v;
    qsort(items, (size_t)n, sizeof *items, sort_item_compare);
    for (int v = 0; v < n; v++) order[v] = items[v].id;
  }
  if (!rc) {
    for (int i = 0; i < n; i++) newid[order[i]] = i;
    for (int e = 0; e < m->ncells; e++) { /* cell keys: lowest new vertex, or centroid */
      const int *c = m->cells + (size_t)e * m->nvc;
      double centroid[3] = {0, 0, 0};
      int low = newid[c[0]];
      for (int k = 0; k < m->nvc; k++) {
        low = newid[c[k]] < low ? newid[c[k]] : low;
        for (int d = 0; d < 3; d++) centroid[d] += m->coords[3 * (size_t)c[k] + d] / m->nvc;
      }
      items[e].key = rcm ? (uint64_t)low : hilbert_key(centroid, lo, span, m->dim);
      items[e].id = e;
    }
    qsort(items, (size_t)m->ncells, sizeof *items, sort_item_compare);
    int *cells = order; /* the vertex order is spent: its room holds the cell order */
    if (m->ncells > n) cells = fe_malloc(((size_t)m->ncells + 1) * sizeof(int), "cell order");
    if (!cells) {
      free(order), free(newid), free(items);
      return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
    }
    for (int e = 0; e < m->ncells; e++) cells[e] = items[e].id;
    rc = mesh_permute_cells(m, cells, newid, NULL);
    if (cells != order) free(cells);
  }
  free(order), free(newid), free(items);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}

/* ----- Morton curves ----- */

/* Spread the low 21 bits of x to every third bit (for a 3D Morton key). */
static uint64_t morton_spread3(uint64_t x)
{
  x &= 0x1fffff;
  x = (x | x << 32) & 0x1f00000000ffffULL;
  x = (x | x << 16) & 0x1f0000ff0000ffULL;
  x = (x | x << 8) & 0x100f00f00f00f00fULL;
  x = (x | x << 4) & 0x10c30c30c30c30c3ULL;
  x = (x | x << 2) & 0x1249249249249249ULL;
  return x;
}

/* A box's cells along the Morton curve of its cubes: one key a cube (x, y, z packed above the
 * cube's id), a sixth of a tet box's, then each cube's cells in turn. */
static int box_morton_order(const fe_mesh *m, int **order)
{
  const int nx = m->cubes[0], ny = m->cubes[1], nz = m->cubes[2] > 0 ? m->cubes[2] : 1;
  const size_t ncubes = (size_t)nx * ny * nz, per = (size_t)m->ncells / ncubes;
  uint64_t *keys = fe_alloc(sizeof *keys * 2 * (ncubes + 1));
  *order = fe_alloc(sizeof(int) * ((size_t)m->ncells + 1));
  if (!keys || !*order) {
    free(keys), free(*order);
    *order = NULL;
    FE_ERROR(FE_ERR_MEM, "out of host memory for a cell order");
  }
#pragma omp parallel for schedule(static)
  for (size_t q = 0; q < ncubes; q++) {
    const uint64_t i = q % nx, j = q / nx % ny, k = q / nx / ny;
    const uint64_t key = morton_spread3(i) | morton_spread3(j) << 1 | morton_spread3(k) << 2;
    keys[q] = key << 32 | q;
  }
  fe_sort_u64(keys, NULL, ncubes, keys + ncubes + 1, NULL, 32);
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < ncubes; r++) {
    const size_t q = (uint32_t)keys[r];
    for (size_t t = 0; t < per; t++) (*order)[r * per + t] = (int)(q * per + t);
  }
  free(keys);
  return 0;
}

int fe_mesh_morton_order(const fe_mesh *m, int **order)
{
  const int n = m->ncells, nvc = m->nvc;
  const double cubes = (double)m->cubes[0] * m->cubes[1] * (m->cubes[2] > 0 ? m->cubes[2] : 1);
  if (cubes > 0 && n % (long long)cubes == 0 && m->cubes[0] <= 1024 && m->cubes[1] <= 1024 &&
      m->cubes[2] <= 1024) /* the key in 30 bits */
    return box_morton_order(m, order);
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
#pragma omp parallel
  {
    double l[3] = {INFINITY, INFINITY, INFINITY}, h[3] = {-INFINITY, -INFINITY, -INFINITY};
#pragma omp for schedule(static)
    for (size_t v = 0; v < (size_t)m->nvertices; v++)
      for (int d = 0; d < 3; d++) {
        double x = m->coords[3 * v + d];
        l[d] = x < l[d] ? x : l[d];
        h[d] = x > h[d] ? x : h[d];
      }
#pragma omp critical
    for (int d = 0; d < 3; d++) {
      lo[d] = l[d] < lo[d] ? l[d] : lo[d];
      hi[d] = h[d] > hi[d] ? h[d] : hi[d];
    }
  }
  /* a grid twice as fine as the cells per side (at most 2^10 a side: the key fits 30 bits),
   * packed above the cell's id: one 64-bit word a cell, sorted by its upper half (stable:
   * cells of one grid point stay in cell order) */
  int bits = 1;
  while (bits < 10 && (double)((uint64_t)1 << 3 * (bits - 1)) < (double)n) bits++;
  const double scale = (double)(((uint64_t)1 << bits) - 1);
  uint64_t *keys = fe_alloc(sizeof *keys * 2 * ((size_t)n + 1));
  *order = fe_alloc(sizeof(int) * ((size_t)n + 1));
  if (!keys || !*order) {
    free(keys), free(*order);
    *order = NULL;
    FE_ERROR(FE_ERR_MEM, "out of host memory for a cell order");
  }
  double to_grid[3]; /* centroid sums to grid points */
  for (int d = 0; d < 3; d++) to_grid[d] = hi[d] > lo[d] ? scale / (nvc * (hi[d] - lo[d])) : 0;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) {
    double c[3] = {0, 0, 0};
    for (int k = 0; k < nvc; k++) {
      const double *x = m->coords + 3 * (size_t)m->cells[(size_t)e * nvc + k];
      c[0] += x[0], c[1] += x[1], c[2] += x[2];
    }
    uint64_t key = 0;
    for (int d = 0; d < 3; d++)
      key |= morton_spread3((uint64_t)((c[d] - nvc * lo[d]) * to_grid[d])) << d;
    keys[e] = key << 32 | (uint32_t)e;
  }
  fe_sort_u64(keys, NULL, (size_t)n, keys + n + 1, NULL, 32);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) (*order)[e] = (int)(uint32_t)keys[e];
  free(keys);
  return 0;
}
