/* felab mesh operations: uniform refinement, reordering for locality, cell quality.
 *
 * Refinement. Every cell type has a pattern: local nodes, each the average of a set of the
 * cell's corners (one corner: the vertex itself; two: an edge midpoint; four: the center of a
 * quadrilateral face; eight: the center of a hex), and children listed as local nodes in Gmsh
 * order. A node of 2 or 4 corners is looked up in a hash map keyed by its sorted vertex ids,
 * so that neighbouring cells (and the boundary facets) share it; the children then have the
 * orientation of their parent. The tet's inner octahedron is cut along its shortest diagonal
 * (three patterns, one per diagonal, oriented once on the reference tet).
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

/* ----- refinement patterns ----- */

typedef struct refine_pattern {
  int nnodes;         /* local nodes of the refined cell */
  int ncorner[27];    /* corners averaged by each node */
  int corner[27][8];  /* those corners, as local vertex indices of the parent */
  int nchild;         /* children per cell */
  int nvc;            /* vertices per child */
  int child[8][8];    /* each child's local nodes, Gmsh order */
} refine_pattern;

/* Triangle children on the nodes 0, 1, 2 (corners) and 3 = 01, 4 = 12, 5 = 02. */
static const int tri_children[4][3] = {{0, 3, 5}, {3, 1, 4}, {5, 4, 2}, {3, 4, 5}};
static const int tri_node_corners[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {1, 2}, {0, 2}};
/* Tet nodes 4..9: the midpoints of 01, 02, 03, 12, 13, 23; the octahedron's diagonals join
 * opposite midpoints and each has a cycle of the four others around it. */
static const int tet_edges[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
static const int tet_corner_children[4][4] = {{0, 4, 5, 6}, {4, 1, 7, 8}, {5, 7, 2, 9}, {6, 8, 9, 3}};
static const int tet_diagonals[3][2] = {{4, 9}, {5, 8}, {6, 7}};
static const int tet_cycles[3][4] = {{5, 6, 8, 7}, {4, 6, 9, 7}, {4, 5, 9, 8}};
/* Gmsh corners of quad and hex on the 3 x 3 (x 3) lattice, in units of the half cell. */
static const int tensor_corners[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                         {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};

/* Reference coordinates of the tet's local node n (for orienting the octahedron's tets). */
static void tet_node_ref(const refine_pattern *p, int n, double x[3])
{
  static const double ref[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  for (int d = 0; d < 3; d++) {
    x[d] = 0;
    for (int k = 0; k < p->ncorner[n]; k++) x[d] += ref[p->corner[n][k]][d] / p->ncorner[n];
  }
}

/* Fill the pattern of the cell type; for tets, diag picks the octahedron's diagonal. */
static void pattern_make(fe_cell_type type, int diag, refine_pattern *p)
{
  memset(p, 0, sizeof *p);
  p->nvc = fe_cell_nvertices(type);
  if (type == FE_CELL_TRI || type == FE_CELL_PRISM) {
    /* node t + 6 l: triangle node t on level l (0: bottom, 1: middle, 2: top) */
    static const int level_offsets[3][2] = {{0, 0}, {0, 3}, {3, 3}};
    const int levels = type == FE_CELL_TRI ? 1 : 3;
    p->nnodes = 6 * levels;
    for (int l = 0; l < levels; l++)
      for (int t = 0; t < 6; t++) {
        const int n = t + 6 * l, ends = t < 3 ? 1 : 2;
        for (int a = 0; a < (l == 1 ? 2 : 1); a++)
          for (int k = 0; k < ends; k++)
            p->corner[n][p->ncorner[n]++] = tri_node_corners[t][k] + level_offsets[l][a];
      }
    p->nchild = levels == 1 ? 4 : 8;
    for (int c = 0; c < p->nchild; c++)
      for (int v = 0; v < p->nvc; v++)
        p->child[c][v] = tri_children[c % 4][v % 3] + 6 * (c / 4 + v / 3);
  } else if (type == FE_CELL_TET) {
    p->nnodes = 10, p->nchild = 8;
    for (int n = 0; n < 4; n++) p->ncorner[n] = 1, p->corner[n][0] = n;
    for (int e = 0; e < 6; e++) {
      p->ncorner[4 + e] = 2;
      p->corner[4 + e][0] = tet_edges[e][0], p->corner[4 + e][1] = tet_edges[e][1];
    }
    for (int c = 0; c < 4; c++)
      for (int v = 0; v < 4; v++) p->child[c][v] = tet_corner_children[c][v];
    for (int c = 0; c < 4; c++) {
      int *t = p->child[4 + c];
      t[0] = tet_diagonals[diag][0], t[1] = tet_diagonals[diag][1];
      t[2] = tet_cycles[diag][c], t[3] = tet_cycles[diag][(c + 1) % 4];
      double x[4][3], e[3][3];
      for (int v = 0; v < 4; v++) tet_node_ref(p, t[v], x[v]);
      for (int k = 0; k < 3; k++)
        for (int d = 0; d < 3; d++) e[k][d] = x[k + 1][d] - x[0][d];
      double det = e[0][0] * (e[1][1] * e[2][2] - e[1][2] * e[2][1]) -
                   e[0][1] * (e[1][0] * e[2][2] - e[1][2] * e[2][0]) +
                   e[0][2] * (e[1][0] * e[2][1] - e[1][1] * e[2][0]);
      if (det < 0) {
        int swap = t[2];
        t[2] = t[3], t[3] = swap;
      }
    }
  } else { /* quad, hex: lattice node i + 3 j + 9 k averages the corners it lies between */
    const int dim = fe_cell_dim(type);
    p->nnodes = dim == 2 ? 9 : 27, p->nchild = 1 << dim;
    for (int n = 0; n < p->nnodes; n++) {
      const int ijk[3] = {n % 3, n / 3 % 3, n / 9};
      for (int v = 0; v < p->nvc; v++) {
        int in = 1;
        for (int d = 0; d < dim; d++) in &= ijk[d] == 1 || ijk[d] == 2 * tensor_corners[v][d];
        if (in) p->corner[n][p->ncorner[n]++] = v;
      }
    }
    for (int c = 0; c < p->nchild; c++)
      for (int v = 0; v < p->nvc; v++) {
        const int *s = tensor_corners[v];
        p->child[c][v] = ((c & 1) + s[0]) + 3 * (((c >> 1) & 1) + s[1]) + 9 * ((c >> 2) + s[2]);
      }
  }
}

/* ----- shared new vertices: a hash map from sorted vertex ids to the new vertex ----- */

typedef struct refine_ctx {
  int (*keys)[4]; /* sorted ids, padded in front with -1; keys[s][3] < 0: empty slot */
  int *values;
  size_t cap, count;
  double *coords; /* the refined mesh's vertices so far */
  size_t ncoords, coords_cap;
} refine_ctx;

/* Slot index of key (its own, or the empty one where it belongs). */
static size_t map_slot(const refine_ctx *r, const int key[4])
{
  uint64_t h = 1469598103934665603ull;
  for (int k = 0; k < 4; k++) h = (h ^ (uint32_t)key[k]) * 1099511628211ull;
  size_t s = (size_t)(h ^ (h >> 29)) & (r->cap - 1);
  while (r->keys[s][3] >= 0 && memcmp(r->keys[s], key, sizeof r->keys[s]))
    s = (s + 1) & (r->cap - 1);
  return s;
}

/* Double the map (rehash every key). */
static int map_grow(refine_ctx *r)
{
  refine_ctx old = *r;
  r->cap = old.cap ? 2 * old.cap : 1024;
  r->keys = fe_malloc(r->cap * sizeof *r->keys, "mesh refine edge map");
  r->values = fe_malloc(r->cap * sizeof *r->values, "mesh refine edge map");
  if (!r->keys || !r->values) {
    free(r->keys), free(r->values);
    r->keys = old.keys, r->values = old.values, r->cap = old.cap;
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t s = 0; s < r->cap; s++) r->keys[s][3] = -1;
  for (size_t s = 0; s < old.cap; s++)
    if (old.keys[s][3] >= 0) {
      size_t t = map_slot(r, old.keys[s]);
      memcpy(r->keys[t], old.keys[s], sizeof r->keys[t]);
      r->values[t] = old.values[s];
    }
  free(old.keys), free(old.values);
  return 0;
}

/* Append a vertex at x, or when x is NULL at the average of the n vertices ids of the parent
 * mesh m; *id gets it. */
static int add_vertex(refine_ctx *r, const fe_mesh *m, const int *ids, int n, const double *x0,
                      int *id)
{
  if (r->ncoords == r->coords_cap) {
    size_t cap = 2 * r->coords_cap;
    double *x = realloc(r->coords, 3 * cap * sizeof(double));
    if (!x) FE_ERROR(FE_ERR_MEM, "mesh refine: out of memory for %zu vertices", cap);
    r->coords = x, r->coords_cap = cap;
  }
  FE_ASSERT(r->ncoords < (size_t)INT32_MAX, FE_ERR_ARG, "mesh refine: more than %d vertices",
            INT32_MAX);
  double *x = r->coords + 3 * r->ncoords;
  x[0] = x[1] = x[2] = 0;
  if (x0) memcpy(x, x0, 3 * sizeof(double));
  else
    for (int k = 0; k < n; k++)
      for (int d = 0; d < 3; d++) x[d] += m->coords[3 * (size_t)ids[k] + d] / n;
  *id = (int)r->ncoords++;
  return 0;
}

/* The refined mesh's vertex between the parent vertices ids[0..n): the vertex itself, a new
 * one (hex centers), or the shared one from the map (edges, quadrilateral faces). A new one is
 * at x, or at the average of the ids when x is NULL. */
static int node_vertex(refine_ctx *r, const fe_mesh *m, const int *ids, int n, const double *x,
                       int *id)
{
  if (n == 1) return *id = ids[0], 0;
  if (n > 4) return add_vertex(r, m, ids, n, x, id);
  int key[4] = {-1, -1, -1, -1};
  memcpy(key + 4 - n, ids, (size_t)n * sizeof(int));
  for (int i = 5 - n; i < 4; i++) /* insertion sort of the n ids */
    for (int j = i; j > 4 - n && key[j - 1] > key[j]; j--) {
      int swap = key[j];
      key[j] = key[j - 1], key[j - 1] = swap;
    }
  if (2 * (r->count + 1) > r->cap) FE_CHECK(map_grow(r));
  size_t s = map_slot(r, key);
  if (r->keys[s][3] < 0) {
    FE_CHECK(add_vertex(r, m, ids, n, x, &r->values[s]));
    memcpy(r->keys[s], key, sizeof key);
    r->count++;
  }
  *id = r->values[s];
  return 0;
}

/* Squared distance between the midpoints of the parent edges (a, b) and (c, d). */
static double midpoint_dist2(const fe_mesh *m, int a, int b, int c, int d)
{
  double s = 0;
  for (int k = 0; k < 3; k++) {
    double t = m->coords[3 * (size_t)a + k] + m->coords[3 * (size_t)b + k] -
               m->coords[3 * (size_t)c + k] - m->coords[3 * (size_t)d + k];
    s += t * t;
  }
  return s;
}

/* Reference coordinates (parent cell) of each local node of pattern p: the average of its
 * corners. */
static void pattern_ref(fe_cell_type type, const refine_pattern *p, double ref[27][3])
{
  const double *corner = fe_mesh_geo_nodes(type, 1, NULL);
  for (int n = 0; n < p->nnodes; n++)
    for (int d = 0; d < 3; d++) {
      ref[n][d] = 0;
      for (int k = 0; k < p->ncorner[n]; k++) ref[n][d] += corner[3 * p->corner[n][k] + d];
      ref[n][d] /= p->ncorner[n];
    }
}

/* The second-order nodes of child `child` (pattern p) of curved cell e, into row g of the
 * refined geo_cells: its vertices as they are, the others placed by the parent's curved map
 * at their reference point (the child's straight map of its corners' reference points, exact
 * because every child is an affine image) and shared through the map gr, keyed by the child's
 * vertices around them; their ids count from 0 here, from the new vertex count later. */
static int refine_child_geo(const fe_mesh *m, int e, const refine_pattern *p, int child,
                            const double pref[27][3], const int *node, refine_ctx *gr, int *g)
{
  const double *ref2 = fe_mesh_geo_nodes(m->type, 2, NULL);
  const int *cv = p->child[child];
  for (int k = 0; k < m->nvc; k++) g[k] = node[cv[k]];
  for (int k = m->nvc; k < m->ngn; k++) {
    double N[8], xi[3] = {0, 0, 0}, x[3];
    int ids[8], n = 0;
    fe_mesh_geo_shape(m->type, 1, ref2 + 3 * k, N, NULL);
    for (int v = 0; v < m->nvc; v++) {
      if (fabs(N[v]) < 1e-12) continue;
      ids[n++] = node[cv[v]];
      for (int d = 0; d < 3; d++) xi[d] += N[v] * pref[cv[v]][d];
    }
    FE_CHECK(fe_mesh_geo_map(m, e, xi, x, NULL));
    FE_CHECK(node_vertex(gr, m, ids, n, x, &g[k]));
  }
  return 0;
}

/* Refine the cells of m into out (arrays allocated by the caller); gr: the map of the new
 * second-order nodes when m is curved, else NULL. */
static int refine_cells(const fe_mesh *m, refine_ctx *r, refine_ctx *gr, fe_mesh *out)
{
  refine_pattern pat[3];
  for (int d = 0; d < 3; d++) pattern_make(m->type, d, &pat[d]);
  double pref[3][27][3];
  for (int d = 0; d < 3; d++) pattern_ref(m->type, &pat[d], pref[d]);
  int node[27], ids[8];
  for (int e = 0; e < m->ncells; e++) {
    const int *c = m->cells + (size_t)e * m->nvc;
    int diag = 0;
    if (m->type == FE_CELL_TET) { /* shortest diagonal: 01-23, 02-13 or 03-12 */
      double d0 = midpoint_dist2(m, c[0], c[1], c[2], c[3]);
      double d1 = midpoint_dist2(m, c[0], c[2], c[1], c[3]);
      double d2 = midpoint_dist2(m, c[0], c[3], c[1], c[2]);
      diag = d0 <= d1 && d0 <= d2 ? 0 : d1 <= d2 ? 1 : 2;
    }
    const refine_pattern *p = &pat[diag];
    for (int n = 0; n < p->nnodes; n++) {
      double x[3];
      for (int k = 0; k < p->ncorner[n]; k++) ids[k] = c[p->corner[n][k]];
      if (gr && p->ncorner[n] > 1) FE_CHECK(fe_mesh_geo_map(m, e, pref[diag][n], x, NULL));
      FE_CHECK(node_vertex(r, m, ids, p->ncorner[n], gr ? x : NULL, &node[n]));
    }
    for (int k = 0; k < p->nchild; k++) {
      const size_t child = (size_t)e * p->nchild + k;
      for (int v = 0; v < p->nvc; v++) out->cells[child * p->nvc + v] = node[p->child[k][v]];
      out->cell_tags[child] = m->cell_tags[e];
      if (gr)
        FE_CHECK(refine_child_geo(m, e, p, k, pref[diag], node, gr,
                                  out->geo_cells + child * out->ngn));
    }
    if (e % 4096 == 0) FE_CHECK_INTERRUPT();
  }
  return 0;
}

/* Refine the boundary facets: edges into 2, triangles (also a, b, c, c) and quads into 4. */
static int refine_facets(const fe_mesh *m, refine_ctx *r, fe_mesh *out)
{
  const int nvf = m->nvf;
  for (int f = 0; f < m->nfacets; f++) {
    const int *v = m->facets + (size_t)f * nvf;
    int *dst = out->facets + (size_t)f * (nvf == 2 ? 2 : 4) * nvf;
    int *tag = out->facet_tags + (size_t)f * (nvf == 2 ? 2 : 4);
    const int nc = nvf == 4 && v[3] == v[2] ? 3 : nvf; /* corners */
    int node[9], ids[4];
    for (int k = 0; k < nc; k++) node[k] = v[k];
    for (int k = 0; k < nc && nc > 2; k++) { /* edge midpoints, then a quad's center */
      ids[0] = v[k], ids[1] = v[(k + 1) % nc];
      FE_CHECK(node_vertex(r, m, ids, 2, NULL, &node[nc + k]));
    }
    if (nc == 4) FE_CHECK(node_vertex(r, m, v, 4, NULL, &node[8]));
    if (nc == 2) {
      FE_CHECK(node_vertex(r, m, v, 2, NULL, &node[2]));
      dst[0] = v[0], dst[1] = node[2], dst[2] = node[2], dst[3] = v[1];
      tag[0] = tag[1] = m->facet_tags[f];
      continue;
    }
    /* triangle nodes: 3 = 01, 4 = 12, 5 = 20; quad nodes: 4 = 01, 5 = 12, 6 = 23, 7 = 30 */
    static const int tri[4][4] = {{0, 3, 5, 5}, {3, 1, 4, 4}, {5, 4, 2, 2}, {3, 4, 5, 5}};
    static const int quad[4][4] = {{0, 4, 8, 7}, {4, 1, 5, 8}, {8, 5, 2, 6}, {7, 8, 6, 3}};
    for (int k = 0; k < 4; k++) {
      for (int j = 0; j < nvf; j++) dst[k * nvf + j] = node[nc == 3 ? tri[k][j] : quad[k][j]];
      tag[k] = m->facet_tags[f];
    }
  }
  return 0;
}

/* The refined curved mesh's geometry nodes: its vertices, then the new second-order nodes
 * of g, whose ids in geo_cells move past the vertices. */
static int refine_geo_finish(fe_mesh *o, const refine_ctx *g)
{
  FE_ASSERT((double)o->nvertices + (double)g->ncoords <= INT32_MAX, FE_ERR_ARG,
            "mesh refine: more than %d geometry nodes", INT32_MAX);
  o->ngeo_nodes = o->nvertices + (int)g->ncoords;
  FE_MALLOC(o->geo_coords, 3 * (size_t)o->ngeo_nodes + 1, "refined geometry nodes");
  memcpy(o->geo_coords, o->coords, 3 * (size_t)o->nvertices * sizeof(double));
  memcpy(o->geo_coords + 3 * (size_t)o->nvertices, g->coords, 3 * g->ncoords * sizeof(double));
  for (int e = 0; e < o->ncells; e++)
    for (int k = o->nvc; k < o->ngn; k++) o->geo_cells[(size_t)e * o->ngn + k] += o->nvertices;
  return 0;
}

static int permute_cells(fe_mesh *m, const int *order, const int *newid, int *vertex);
static int layer_order(const fe_mesh *m, int *start, const int *within, int **order);

/* The bytes of a map of about `keys` keys at its largest: slots of a key and a value, at least
 * twice the keys, a power of two; while it doubles, the old table beside the new one. */
static double map_bytes(double keys)
{
  double cap = 1024;
  while (cap < 2 * (keys + 1)) cap *= 2;
  return 1.5 * cap * (sizeof(int[4]) + sizeof(int));
}

/* The bytes fe_mesh_refine holds at its peak, from the parent's counts, before anything is
 * allocated: the refined arrays, held throughout (cells and regions, facets and tags, vcap
 * vertices; a curved mesh's second-order cells and 2^dim times its geometry nodes), plus the
 * larger of what refining adds (the maps of the shared new vertices, 2^dim - 1 a parent
 * vertex, and second-order nodes; the latter's coordinates as they grow) and what ordering
 * adds (permute_cells' copies of the cells, regions and vertices, and in layers layer_order's
 * arrays as well: freed just before, they may stay in the heap as a hole too small for the
 * copies, and with hypre linked freed memory is not given back to the system). */
static size_t refine_bytes(const fe_mesh *m, int nchild, int nf, size_t vcap, int curved)
{
  const double nc = (double)m->ncells * nchild, nfac = (double)m->nfacets * nf, nv = (double)vcap;
  const double ng = curved ? (double)(1 << m->dim) * m->ngeo_nodes : 0;
  double kept = 4.0 * nc * (m->nvc + 1) + 4.0 * nfac * (m->nvf + 1) + 24.0 * nv;
  double refining = map_bytes(((1 << m->dim) - 1.0) * m->nvertices);
  double ordering = 4.0 * nc * (m->nvc + 2) + 28.0 * nv;
  if (m->layered) ordering += 4.0 * nc * (m->nvc + 2) + 12.0 * nv;
  if (curved) {
    kept += 4.0 * nc * m->ngn + 24.0 * ng;
    refining += map_bytes(ng - (double)(1 << m->dim) * m->nvertices) + 1.5 * 24.0 * ng;
    ordering += 4.0 * nc * m->ngn + 28.0 * ng;
  }
  return (size_t)(kept + (refining > ordering ? refining : ordering));
}

/* Uniform refinement of m into a new mesh (see the top of this file). */
int fe_mesh_refine(const fe_mesh *m, fe_mesh **out)
{
  FE_ASSERT(m && out, FE_ERR_ARG, "mesh refine: missing mesh or output");
  *out = NULL;
  FE_CHECK(fe_mesh_check(m));
  refine_pattern p;
  pattern_make(m->type, 0, &p);
  const int nf = m->nvf == 2 ? 2 : 4;
  FE_ASSERT((double)m->ncells * p.nchild <= INT32_MAX && (double)m->nfacets * nf <= INT32_MAX,
            FE_ERR_ARG, "mesh refine: %d cells would make %.0f, more than a mesh holds (%d)",
            m->ncells, (double)m->ncells * p.nchild, INT32_MAX);
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  /* the new vertices are only counted as the map finds them: about 2^dim - 1 a parent vertex
   * (a box of hexes: (2n+1)^3 from (n+1)^3; tets: one an edge, E ~ V + T ~ 7 V), so room for
   * 2^dim + 1 a parent vertex, which boxes and tet meshes do not outgrow (no realloc, and
   * the estimate holds) */
  const size_t vcap = (size_t)m->nvertices * ((1u << m->dim) + 1) + 64;
  FE_CHECK(fe_memory_check(refine_bytes(m, p.nchild, nf, vcap, curved),
                           "mesh refine: refining %d %s cells into %.0f", m->ncells,
                           fe_cell_name(m->type), (double)m->ncells * p.nchild));
  fe_mesh *o;
  FE_CALLOC(o, 1, "refined mesh");
  *o = *m;
  o->coords = NULL, o->cells = NULL, o->cell_tags = NULL, o->facets = NULL;
  o->facet_tags = NULL, o->tags = NULL, o->geo_cells = NULL, o->geo_coords = NULL;
  o->classes = NULL, o->classes_known = 0;
  memset(o->cubes, 0, sizeof o->cubes);
  o->geo_order = curved ? 2 : 1, o->ngn = curved ? m->ngn : m->nvc, o->ngeo_nodes = 0;
  o->ncells = m->ncells * p.nchild;
  o->nfacets = m->nfacets * nf;
  refine_ctx r = {0}, g = {0};
  r.coords_cap = vcap;
  int rc = 0;
  o->cells = fe_malloc((size_t)o->ncells * o->nvc * sizeof(int), "refined cells");
  o->cell_tags = fe_malloc((size_t)o->ncells * sizeof(int), "refined cell regions");
  o->facets = fe_malloc(((size_t)o->nfacets * o->nvf + 1) * sizeof(int), "refined facets");
  o->facet_tags = fe_malloc(((size_t)o->nfacets + 1) * sizeof(int), "refined facet tags");
  o->tags = fe_malloc(((size_t)m->ntags + 1) * sizeof(fe_tag), "refined mesh tags");
  r.coords = fe_malloc(3 * r.coords_cap * sizeof(double), "refined vertices");
  if (!o->cells || !o->cell_tags || !o->facets || !o->facet_tags || !o->tags || !r.coords)
    rc = fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  if (!rc && curved) { /* the new second-order nodes, numbered from 0 until the end */
    g.coords_cap = (size_t)m->ngeo_nodes * 4 + 16;
    g.coords = fe_malloc(3 * g.coords_cap * sizeof(double), "refined geometry nodes");
    o->geo_cells = fe_malloc((size_t)o->ncells * o->ngn * sizeof(int), "refined curved cells");
    if (!g.coords || !o->geo_cells) rc = fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
    if (!rc) rc = map_grow(&g);
  }
  if (!rc) {
    memcpy(r.coords, m->coords, 3 * (size_t)m->nvertices * sizeof(double));
    r.ncoords = (size_t)m->nvertices;
    memcpy(o->tags, m->tags, (size_t)m->ntags * sizeof(fe_tag));
    rc = map_grow(&r);
  }
  if (!rc) rc = refine_cells(m, &r, curved ? &g : NULL, o);
  if (!rc) rc = refine_facets(m, &r, o);
  free(r.keys), free(r.values), free(g.keys), free(g.values);
  o->coords = r.coords;
  o->nvertices = (int)r.ncoords;
  if (!rc && curved) rc = refine_geo_finish(o, &g);
  free(g.coords);
  if (rc) {
    fe_mesh_free(o);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  double *x = realloc(o->coords, 3 * r.ncoords * sizeof(double)); /* give back the slack */
  if (x) o->coords = x;
  /* the vertices in the order the cells first use them, as a loaded mesh's are (else the
   * parents' vertices keep their ids, apart from their children's new ones, and the space
   * numbering's sweeps around the vertices jump about the cells); cells in layers stay so,
   * swept from the parent's vertex (a few coarse cells' children in a row are no slab) */
  int *order = NULL, from = m->layered - 1; /* a parent's vertex keeps its id here */
  o->layered = 0;
  if (from >= 0) rc = layer_order(o, &from, NULL, &order);
  if (!rc) rc = permute_cells(o, order, NULL, from >= 0 ? &from : NULL);
  free(order);
  if (rc) {
    fe_mesh_free(o);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (from >= 0) o->layered = from + 1;
  *out = o;
  return 0;
}

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
static int permute_cells(fe_mesh *m, const int *order, const int *newid, int *vertex)
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
  FE_CHECK(permute_cells(m, order, NULL, NULL));
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
static int layer_order(const fe_mesh *m, int *start, const int *within, int **order)
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
  FE_CHECK(layer_order(m, &start, within, order));
  return 0;
}

int fe_mesh_order_layers(fe_mesh *m, const int *within)
{
  FE_ASSERT(m, FE_ERR_ARG, "mesh layers: no mesh");
  int start = -1, *order;
  FE_CHECK(layer_order(m, &start, within, &order));
  int rc = permute_cells(m, order, NULL, &start);
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
    int rc = permute_cells(m, order, NULL, NULL);
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
    for (int d = 0; d < 3; d++) {
      double hi = lo[d] = n ? m->coords[d] : 0;
      for (int v = 0; v < n; v++) {
        const double x = m->coords[3 * (size_t)v + d];
        lo[d] = x < lo[d] ? x : lo[d], hi = x > hi ? x : hi;
      }
      span[d] = hi - lo[d];
    }
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
    rc = permute_cells(m, cells, newid, NULL);
    if (cells != order) free(cells);
  }
  free(order), free(newid), free(items);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}

/* ----- quality ----- */

/* b - a into e. */
static void sub3(const double *b, const double *a, double *e)
{
  for (int d = 0; d < 3; d++) e[d] = b[d] - a[d];
}
static double dot3(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
/* a x b into c. */
static void cross3(const double *a, const double *b, double *c)
{
  c[0] = a[1] * b[2] - a[2] * b[1], c[1] = a[2] * b[0] - a[0] * b[2], c[2] = a[0] * b[1] - a[1] * b[0];
}

/* Triangle (a, b, c): area (signed by the z normal when planar: 2D) and 4 sqrt 3 A / sum l^2. */
static double tri_quality(const double *a, const double *b, const double *c, double *area)
{
  double e0[3], e1[3], e2[3], n[3];
  sub3(b, a, e0), sub3(c, a, e1), sub3(c, b, e2);
  cross3(e0, e1, n);
  *area = 0.5 * sqrt(dot3(n, n));
  const double l2 = dot3(e0, e0) + dot3(e1, e1) + dot3(e2, e2);
  return l2 > 0 ? 4 * sqrt(3.0) * *area / l2 : 0;
}

/* Jacobian matrix (columns) of the trilinear hex x at reference point (u, v, w) in [0,1]^3,
 * and the bilinear quad when dim == 2 (third column e_z); returns det. */
static double tensor_jacobian(const double *const *x, int dim, double u, double v, double w)
{
  static const int corners[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                    {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
  double J[3][3] = {{0}};
  const double t[3] = {u, v, w};
  for (int q = 0; q < (dim == 2 ? 4 : 8); q++)
    for (int a = 0; a < dim; a++) {
      double g = 1; /* d/dt_a of the product of the 1D hat functions */
      for (int b = 0; b < dim; b++) {
        const double s = corners[q][b] ? t[b] : 1 - t[b];
        g *= a == b ? (corners[q][b] ? 1 : -1) : s;
      }
      for (int d = 0; d < 3; d++) J[a][d] += g * x[q][d];
    }
  if (dim == 2) return J[0][0] * J[1][1] - J[0][1] * J[1][0];
  double c[3];
  cross3(J[1], J[2], c);
  return dot3(J[0], c);
}

/* Shape measure (1: regular) and exact measure of cell e. */
static double cell_quality(const fe_mesh *m, int e, double *volume)
{
  const double *x[8];
  const int *c = m->cells + (size_t)e * m->nvc;
  for (int v = 0; v < m->nvc; v++) x[v] = m->coords + 3 * (size_t)c[v];
  if (m->type == FE_CELL_TRI) return tri_quality(x[0], x[1], x[2], volume);
  if (m->type == FE_CELL_TET) {
    double e0[3], e1[3], e2[3], n[3], l2 = 0, d[3];
    sub3(x[1], x[0], e0), sub3(x[2], x[0], e1), sub3(x[3], x[0], e2);
    cross3(e1, e2, n);
    *volume = dot3(e0, n) / 6;
    for (int i = 0; i < 4; i++)
      for (int j = i + 1; j < 4; j++) sub3(x[j], x[i], d), l2 += dot3(d, d);
    const double lrms = sqrt(l2 / 6);
    return lrms > 0 ? 6 * sqrt(2.0) * *volume / (lrms * lrms * lrms) : 0;
  }
  /* quad, hex: 2-point Gauss in each direction is exact for det J; the shape is the worst
   * corner's scaled Jacobian det J / product of the edge lengths there */
  static const int hex_nb[8][3] = {{1, 3, 4}, {0, 2, 5}, {3, 1, 6}, {2, 0, 7},
                                   {5, 7, 0}, {4, 6, 1}, {7, 5, 2}, {6, 4, 3}};
  const double g0 = 0.5 - 0.5 / sqrt(3.0), g1 = 0.5 + 0.5 / sqrt(3.0), gp[2] = {g0, g1};
  double shape = INFINITY;
  *volume = 0;
  if (m->type == FE_CELL_QUAD || m->type == FE_CELL_HEX) {
    const int dim = m->dim, nq = dim == 2 ? 4 : 8;
    for (int q = 0; q < nq; q++)
      *volume += tensor_jacobian(x, dim, gp[q & 1], gp[(q >> 1) & 1], gp[q >> 2]) / nq;
    for (int q = 0; q < nq; q++) {
      double e[3][3], det, scale = 1;
      for (int k = 0; k < dim; k++) sub3(x[dim == 2 ? (k ? (q + 3) % 4 : (q + 1) % 4) : hex_nb[q][k]], x[q], e[k]);
      if (dim == 2) { /* next and previous corner: positive for counter-clockwise quads */
        det = e[0][0] * e[1][1] - e[0][1] * e[1][0];
      } else {
        double n[3];
        cross3(e[1], e[2], n);
        det = dot3(e[0], n) * ((q == 0 || q == 2 || q == 5 || q == 7) ? 1 : -1);
      }
      for (int k = 0; k < dim; k++) scale *= sqrt(dot3(e[k], e[k]));
      shape = fmin(shape, scale > 0 ? det / scale : 0);
    }
    return shape;
  }
  /* prism: the end triangles' measure times the worst cosine between a vertical edge and the
   * triangle normal; volume by the centroid rule on the triangle times 2-point Gauss in z */
  double area;
  shape = fmin(tri_quality(x[0], x[1], x[2], &area), tri_quality(x[3], x[4], x[5], &area));
  double cosmin = 1;
  for (int q = 0; q < 6; q++) {
    const int l = q < 3 ? 0 : 3;
    double e0[3], e1[3], up[3], n[3];
    sub3(x[l + 1], x[l], e0), sub3(x[l + 2], x[l], e1), sub3(x[q < 3 ? q + 3 : q], x[q < 3 ? q : q - 3], up);
    cross3(e0, e1, n);
    const double s = sqrt(dot3(n, n) * dot3(up, up));
    cosmin = fmin(cosmin, s > 0 ? dot3(n, up) / s : 0);
  }
  for (int g = 0; g < 2; g++) {
    double p[3][3], J[3][3];
    const double z = gp[g];
    for (int i = 0; i < 3; i++)
      for (int d = 0; d < 3; d++) p[i][d] = (1 - z) * x[i][d] + z * x[i + 3][d];
    sub3(p[1], p[0], J[0]), sub3(p[2], p[0], J[1]);
    for (int d = 0; d < 3; d++) J[2][d] = (x[3][d] + x[4][d] + x[5][d] - x[0][d] - x[1][d] - x[2][d]) / 3;
    double n[3];
    cross3(J[0], J[1], n);
    *volume += 0.5 * dot3(n, J[2]) / 2; /* reference triangle area 1/2, Gauss weights 1/2 */
  }
  return shape * cosmin;
}

/* Measure of curved cell e: det J of its second-order map integrated with 5 Gauss points per
 * direction, simplices collapsed onto the cube (Duffy), exact for every det J these maps
 * have. */
static int curved_volume(const fe_mesh *m, int e, double *volume)
{
  static const double gx[5] = {-0.9061798459386640, -0.5384693101056831, 0,
                               0.5384693101056831, 0.9061798459386640};
  static const double gw[5] = {0.2369268850561891, 0.4786286704993665, 0.5688888888888889,
                               0.4786286704993665, 0.2369268850561891};
  const int dim = m->dim, n3 = dim == 3 ? 5 : 1;
  double sum = 0;
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 5; b++)
      for (int c = 0; c < n3; c++) {
        const double t[3] = {gx[a], gx[b], dim == 3 ? gx[c] : 0};
        double w = gw[a] * gw[b] * (dim == 3 ? gw[c] : 1), xi[3], J[9];
        if (m->type == FE_CELL_QUAD || m->type == FE_CELL_HEX) {
          memcpy(xi, t, sizeof xi);
        } else { /* u in [0,1]^d onto the simplex: xi0 = u0, xi1 = u1 (1 - u0), ... */
          const double u0 = (t[0] + 1) / 2, u1 = (t[1] + 1) / 2, u2 = (t[2] + 1) / 2;
          xi[0] = u0, xi[1] = u1 * (1 - u0), xi[2] = t[2];
          w *= (1 - u0) / 4;
          if (m->type == FE_CELL_TET) xi[2] = u2 * (1 - u0) * (1 - u1), w *= (1 - u0) * (1 - u1) / 2;
        }
        FE_CHECK(fe_mesh_geo_map(m, e, xi, NULL, J));
        sum += w * (dim == 2 ? J[0] * J[3] - J[1] * J[2]
                             : J[0] * (J[4] * J[8] - J[5] * J[7]) -
                                   J[1] * (J[3] * J[8] - J[5] * J[6]) +
                                   J[2] * (J[3] * J[7] - J[4] * J[6]));
      }
  *volume = sum;
  return 0;
}

/* Shape and volume statistics over the cells of m (fe_mesh_check first). On curved meshes
 * the shape measure is the straight cell's, the volume the curved cell's. */
int fe_mesh_quality(const fe_mesh *m, fe_mesh_quality_info *q)
{
  FE_ASSERT(m && q, FE_ERR_ARG, "mesh quality: missing mesh or output");
  FE_CHECK(fe_mesh_check(m));
  memset(q, 0, sizeof *q);
  q->worst_cell = -1;
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  double sum = 0;
  for (int e = 0; e < m->ncells; e++) {
    double vol, s = cell_quality(m, e, &vol);
    if (curved) FE_CHECK(curved_volume(m, e, &vol));
    if (e == 0 || s < q->min) q->min = s, q->worst_cell = e;
    if (e == 0 || s > q->max) q->max = s;
    if (e == 0 || vol < q->min_volume) q->min_volume = vol;
    if (e == 0 || vol > q->max_volume) q->max_volume = vol;
    sum += s;
    q->volume += vol;
  }
  q->mean = m->ncells ? sum / m->ncells : 0;
  return 0;
}

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
