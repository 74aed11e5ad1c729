/* felab mesh operations: uniform refinement (reordering is in mesh-order.c, cell quality in
 * mesh-quality.c).
 *
 * Refinement. Every cell type has a pattern: local nodes, each the average of a set of the
 * cell's corners (one corner: the vertex itself; two: an edge midpoint; four: the center of a
 * quadrilateral face; eight: the center of a hex), and children listed as local nodes in Gmsh
 * order. A node of 2 or 4 corners is looked up in a hash map keyed by its sorted vertex ids,
 * so that neighbouring cells (and the boundary facets) share it; the children then have the
 * orientation of their parent. The tet's inner octahedron is cut along its shortest diagonal
 * (three patterns, one per diagonal, oriented once on the reference tet).
 *
 * The refined mesh's vertices are numbered in the order its cells first use them
 * (mesh_permute_cells, mesh-order.c), and its cells stay in layers when the parent's were. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/sort.h"
#include "engine/mesh/mesh-ops-private.h"


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
 * adds (mesh_permute_cells' copies of the cells, regions and vertices, and in layers
 * mesh_layer_order's arrays as well: freed just before, they may stay in the heap as a hole
 * too small for the copies, and with hypre linked freed memory is not given back to the
 * system). */
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
  if (from >= 0) rc = mesh_layer_order(o, &from, NULL, &order);
  if (!rc) rc = mesh_permute_cells(o, order, NULL, from >= 0 ? &from : NULL);
  free(order);
  if (rc) {
    fe_mesh_free(o);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (from >= 0) o->layered = from + 1;
  *out = o;
  return 0;
}
