/* felab meshes from files through the Gmsh SDK (C API, gmshc.h).
 *
 * Two steps. fe_mesh_load asks the SDK to open the file (meshing a .geo or CAD file on the
 * fly), then copies out its arrays: nodes, element blocks per model entity, physical groups.
 * fe_mesh_from_arrays turns those arrays into a felab mesh and trusts nothing in them, so it
 * can be unit-tested and fuzzed without files or the SDK:
 *   1. sort the node tags (duplicates are an error) so that any tag can be found;
 *   2. find the top dimension and its one cell type (a mix is an error naming the types);
 *   3. look up every vertex node of every cell (a missing node is an error naming it);
 *   4. keep only the nodes used as cell vertices, renumbered 0..n-1 in file order; for
 *      second-order cells (tri6 quad9 tet10 hex27 prism18) also their other nodes, numbered
 *      from n on, as the curved geometry (geo_cells, geo_coords);
 *   5. regions from the physical groups of the top dimension, boundary tags from those one
 *      lower; without any, region "domain" and the facets seen once as tag "boundary";
 *   6. cells sorted along a Morton curve (blocks of consecutive cells stay compact), the
 *      vertices (then the other geometry nodes) numbered in order of first use;
 *   7. 2D cells turned counter-clockwise (second-order nodes with them), then fe_mesh_check
 *      (degenerate, inverted cells; a curved map's Jacobian at the nodes).
 * Builds without the SDK read .msh 4.1 files by hand into the same arrays (fe_msh_read,
 * engine/mesh/io/msh-read.c), so both paths share the conversion; other files need the SDK, and
 * fe_mesh_load says so.
 * Loading (the options, the SDK's calls, the reader without it) is in gmsh-load.c. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/msh.h"
#include "engine/mesh/io/gmsh-io-private.h"

/* ----- the pure conversion ----- */

/* The Gmsh element types felab knows (struct gmsh_type_info, gmsh-io-private.h). */
static const gmsh_type_info gmsh_types[] = {
    {1, 1, 2, 2, -1, 1, 0, "line"},
    {2, 2, 3, 3, FE_CELL_TRI, 1, 0, "tri"},
    {3, 2, 4, 4, FE_CELL_QUAD, 1, 0, "quad"},
    {4, 3, 4, 4, FE_CELL_TET, 1, 0, "tet"},
    {5, 3, 8, 8, FE_CELL_HEX, 1, 0, "hex"},
    {6, 3, 6, 6, FE_CELL_PRISM, 1, 0, "prism"},
    {7, 3, 5, 5, -2, 1, 0, "pyramid"},
    {8, 1, 3, 2, -1, 2, 0, "line3"},
    {9, 2, 6, 3, FE_CELL_TRI, 2, 0, "tri6"},
    {10, 2, 9, 4, FE_CELL_QUAD, 2, 0, "quad9"},
    {11, 3, 10, 4, FE_CELL_TET, 2, 0, "tet10"},
    {12, 3, 27, 8, FE_CELL_HEX, 2, 0, "hex27"},
    {13, 3, 18, 6, FE_CELL_PRISM, 2, 0, "prism18"},
    {14, 3, 14, 5, -2, 2, 0, "pyramid14"},
    {15, 0, 1, 1, -1, 1, 0, "point"},
    {16, 2, 8, 4, FE_CELL_QUAD, 2, 1, "quad8"},
    {17, 3, 20, 8, FE_CELL_HEX, 2, 1, "hex20"},
    {18, 3, 15, 6, FE_CELL_PRISM, 2, 1, "prism15"},
    {19, 3, 13, 5, -2, 2, 1, "pyramid13"},
};


/* The type's entry, or NULL for a type felab does not know. */
const gmsh_type_info *gmsh_type_lookup(int type)
{
  for (size_t i = 0; i < sizeof gmsh_types / sizeof *gmsh_types; i++)
    if (gmsh_types[i].type == type) return &gmsh_types[i];
  return NULL;
}

int fe_msh_type_info(int type, fe_msh_type *t)
{
  const gmsh_type_info *ti = gmsh_type_lookup(type);
  if (!ti) return 0;
  t->nodes = ti->nnodes, t->vertices = ti->nvertices, t->dim = ti->dim, t->name = ti->name;
  t->linear = type;
  /* the first-order type of the same shape: of its dimension and vertex count */
  for (size_t i = 0; i < sizeof gmsh_types / sizeof *gmsh_types; i++)
    if (gmsh_types[i].order == 1 && gmsh_types[i].dim == ti->dim &&
        gmsh_types[i].nvertices == ti->nvertices) {
      t->linear = gmsh_types[i].type;
      break;
    }
  return 1;
}

typedef struct node_key {
  size_t tag;
  size_t index; /* position in the input arrays */
} node_key;

static int node_key_cmp(const void *a, const void *b)
{
  size_t x = ((const node_key *)a)->tag, y = ((const node_key *)b)->tag;
  return x < y ? -1 : x > y;
}

/* The input position of node tag, or -1. */
static long long find_node(const node_key *keys, size_t n, size_t tag)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (keys[mid].tag < tag) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && keys[lo].tag == tag ? (long long)keys[lo].index : -1;
}

/* Whether physical group g holds entity e. */
static int group_has(const fe_mesh_group *g, int e)
{
  for (size_t k = 0; k < g->nentities; k++)
    if (g->entities[k] == e) return 1;
  return 0;
}

/* Local facets of the cell types, Gmsh vertex ordering; a triangle among a prism's quads
 * repeats its last vertex (as mesh.box stores them). */
static const int tri_edges[3][4] = {{0, 1}, {1, 2}, {2, 0}};
static const int quad_edges[4][4] = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
static const int tet_faces[4][4] = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}};
static const int hex_faces[6][4] = {{0, 3, 2, 1}, {0, 1, 5, 4}, {0, 4, 7, 3},
                                    {1, 2, 6, 5}, {2, 3, 7, 6}, {4, 5, 6, 7}};
static const int prism_faces[5][4] = {{0, 2, 1, 1}, {3, 4, 5, 5}, {0, 1, 4, 3},
                                      {0, 3, 5, 2}, {1, 2, 5, 4}};

typedef struct facet_key {
  int key[4];  /* sorted distinct vertices, INT_MAX padded */
  int v[4];    /* the facet as the cell orders it */
} facet_key;

static int facet_key_cmp(const void *a, const void *b)
{
  const int *x = ((const facet_key *)a)->key, *y = ((const facet_key *)b)->key;
  for (int k = 0; k < 4; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}

/* Facets that belong to exactly one cell: the boundary, all tagged 1 ("boundary"). */
static int boundary_from_cells(fe_mesh *m)
{
  const int(*faces)[4];
  int nf;
  switch (m->type) {
  case FE_CELL_TRI: faces = tri_edges, nf = 3; break;
  case FE_CELL_QUAD: faces = quad_edges, nf = 4; break;
  case FE_CELL_TET: faces = tet_faces, nf = 4; break;
  case FE_CELL_HEX: faces = hex_faces, nf = 6; break;
  default: faces = prism_faces, nf = 5; break;
  }
  const int nvf = m->nvf;
  size_t total = (size_t)m->ncells * nf;
  facet_key *all;
  FE_MALLOC(all, total ? total : 1, "facets of the cells");
  for (size_t e = 0, i = 0; e < (size_t)m->ncells; e++)
    for (int f = 0; f < nf; f++, i++) {
      const int *c = m->cells + e * m->nvc;
      int *key = all[i].key;
      for (int k = 0; k < 4; k++) key[k] = INT_MAX;
      for (int k = 0; k < nvf; k++) all[i].v[k] = c[faces[f][k]];
      int nk = 0;
      for (int k = 0; k < nvf; k++) { /* insertion of distinct vertices, sorted */
        int v = all[i].v[k], p = nk;
        int dup = 0;
        for (int j = 0; j < nk; j++) dup |= key[j] == v;
        if (dup) continue;
        while (p > 0 && key[p - 1] > v) key[p] = key[p - 1], p--;
        key[p] = v, nk++;
      }
    }
  qsort(all, total, sizeof *all, facet_key_cmp);
  size_t nb = 0;
  for (size_t i = 0; i < total;) {
    size_t j = i + 1;
    while (j < total && !facet_key_cmp(&all[i], &all[j])) j++;
    if (j == i + 1) all[nb++] = all[i];
    i = j;
  }
  if (nb > INT_MAX) {
    free(all);
    FE_ERROR(FE_ERR_MESH, "too many boundary facets (%zu)", nb);
  }
  m->facets = fe_malloc((nb ? nb : 1) * nvf * sizeof(int), "boundary facets");
  m->facet_tags = fe_malloc((nb ? nb : 1) * sizeof(int), "boundary facet tags");
  if (!m->facets || !m->facet_tags) {
    free(all);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t i = 0; i < nb; i++) {
    memcpy(m->facets + i * nvf, all[i].v, (size_t)nvf * sizeof(int));
    m->facet_tags[i] = 1;
  }
  m->nfacets = (int)nb;
  free(all);
  return 0;
}

/* Append a tag (name, or the number when name is empty). */
static void add_tag(fe_mesh *m, const char *name, int id, int dim)
{
  fe_tag *t = &m->tags[m->ntags++];
  if (name && *name) snprintf(t->name, sizeof t->name, "%s", name);
  else snprintf(t->name, sizeof t->name, "%d", id);
  t->id = id;
  t->dim = dim;
}

/* Second-order cells: geo_cells holds input node positions. The vertices keep their vertex
 * ids; the other nodes are numbered nvertices.. in input order, each node once, and
 * geo_coords gets them all. newid (input position -> vertex id or -1) is extended to them. A
 * node that is a vertex of one cell and an edge, face or inner node of another is an error. */
static int number_geo_nodes(const fe_mesh_arrays *a, fe_mesh *m, int *newid)
{
  const char *src = a->source ? a->source : "mesh";
  const size_t n = (size_t)m->ncells * m->ngn;
  for (size_t k = 0; k < n; k++) {
    if ((int)(k % m->ngn) < m->nvc) continue;
    int at = m->geo_cells[k];
    if (newid[at] >= 0 && newid[at] < m->nvertices)
      FE_ERROR(FE_ERR_MESH,
               "%s: node %zu is a vertex of one cell and a second-order node of cell %zu (its "
               "node %d)",
               src, a->node_tags[at], k / m->ngn, (int)(k % m->ngn));
    newid[at] = -2;
  }
  int next = m->nvertices;
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] == -2) newid[i] = next++;
  for (size_t k = 0; k < n; k++) m->geo_cells[k] = newid[m->geo_cells[k]];
  m->ngeo_nodes = next;
  FE_MALLOC(m->geo_coords, (size_t)next * 3 + 1, "mesh geometry nodes");
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] >= 0)
      memcpy(m->geo_coords + 3 * (size_t)newid[i], a->coords + 3 * i, 3 * sizeof(double));
  return 0;
}

/* What convert's phases share: the input, and what each phase finds for the next. */
typedef struct convert_ctx {
  const fe_mesh_arrays *a;
  const node_key *keys; /* the sorted node tags */
  const char *src;      /* the file, for messages */
  int dim;              /* the top dimension */
  int curved;           /* second-order cells */
  size_t ncells;
  int nregion_groups, nfacet_groups; /* physical groups of the top dimension, one lower */
  int unassigned_id, any_unassigned; /* the region of cells in no group */
  int *newid; /* input node position -> vertex id (then geometry node id), or -1 */
} convert_ctx;

/* 2. the top dimension, each block checked on the way */
static int top_dimension(convert_ctx *c)
{
  const fe_mesh_arrays *a = c->a;
  const char *src = c->src;
  int dim = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const fe_mesh_block *bl = &a->blocks[b];
    const gmsh_type_info *ti = gmsh_type_lookup(bl->gmsh_type);
    if (!ti)
      FE_ERROR(FE_ERR_MESH, "%s: unknown element type %d (entity %d): felab knows Gmsh types 1-19",
               src, bl->gmsh_type, bl->entity);
    if (bl->nelements && !bl->nodes)
      FE_ERROR(FE_ERR_MESH, "%s: element block %zu has %zu elements but no node tags", src, b,
               bl->nelements);
    if (bl->nelements > (size_t)INT_MAX / (size_t)ti->nnodes)
      FE_ERROR(FE_ERR_MESH, "%s: element block %zu has too many elements (%zu)", src, b,
               bl->nelements);
    if (bl->nelements && ti->dim > dim) dim = ti->dim;
  }
  FE_ASSERT(dim >= 2, FE_ERR_MESH, "%s: no 2D or 3D elements in this mesh (top dimension %d)",
            src, dim);
  c->dim = dim;
  return 0;
}

/* 2. the one cell type (and order) of the top dimension; a mix is an error naming the types */
static int top_cell_type(convert_ctx *c, fe_mesh *m)
{
  const fe_mesh_arrays *a = c->a;
  const char *src = c->src;
  const int dim = c->dim;
  int types_seen = 0; /* bit per Gmsh type among the top dimension */
  char found[256] = "";
  size_t ncells = 0, flen = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = gmsh_type_lookup(a->blocks[b].gmsh_type);
    if (ti->dim != dim || !a->blocks[b].nelements) continue;
    if (ti->cell == -2)
      FE_ERROR(FE_ERR_MESH, "%s: %s cells are not supported (felab has tri, quad, tet, hex, prism)",
               src, ti->name);
    if (ti->incomplete)
      FE_ERROR(FE_ERR_MESH,
               "%s: %s cells (Gmsh type %d) are incomplete second-order elements: felab takes "
               "the complete ones (tri6, quad9, tet10, hex27, prism18); mesh with "
               "Mesh.SecondOrderIncomplete = 0",
               src, ti->name, ti->type);
    if (!(types_seen & (1 << ti->type))) {
      types_seen |= 1 << ti->type;
      int w = snprintf(found + flen, sizeof found - flen, "%s%s", flen ? ", " : "", ti->name);
      if (w > 0 && flen + (size_t)w < sizeof found) flen += (size_t)w;
    }
    if (m->nvc && (int)m->type != ti->cell) m->nvc = -1; /* mixed */
    if (m->nvc >= 0) m->type = (fe_cell_type)ti->cell, m->nvc = ti->nvertices;
    m->ngn = ti->nnodes, m->geo_order = ti->order;
    ncells += a->blocks[b].nelements;
  }
  if (m->nvc < 0)
    FE_ERROR(FE_ERR_MESH,
             "%s: the %dD cells mix types (%s): felab meshes have one cell type and one order",
             src, dim, found);
  if (__builtin_popcount((unsigned)types_seen) > 1)
    FE_ERROR(FE_ERR_MESH,
             "%s: the %dD cells mix first- and second-order %s cells (%s): felab meshes have one "
             "order; mesh them all with one (Mesh.ElementOrder)",
             src, dim, fe_cell_name(m->type), found);
  const int curved = m->geo_order == 2;
  if (!curved) m->geo_order = 1, m->ngn = m->nvc;
  FE_ASSERT(ncells <= INT_MAX, FE_ERR_MESH, "%s: too many cells (%zu)", src, ncells);
  m->dim = dim;
  m->ncells = (int)ncells;
  m->nvf = dim == 2 ? 2 : m->type == FE_CELL_TET ? 3 : 4;
  c->curved = curved, c->ncells = ncells;
  return 0;
}

/* 3. cells as input node positions, and their regions */
static int cells_and_regions(convert_ctx *c, fe_mesh *m)
{
  const fe_mesh_arrays *a = c->a;
  const char *src = c->src;
  const int dim = c->dim, curved = c->curved;
  const size_t ncells = c->ncells;
  int nregion_groups = 0, nfacet_groups = 0;
  for (size_t g = 0; g < a->ngroups; g++) {
    const fe_mesh_group *gr = &a->groups[g];
    FE_ASSERT(!gr->nentities || gr->entities, FE_ERR_MESH,
              "%s: physical group %d (dim %d) lists %zu entities but gives none", src, gr->tag,
              gr->dim, gr->nentities);
    nregion_groups += gr->dim == dim;
    nfacet_groups += gr->dim == dim - 1;
  }
  c->nregion_groups = nregion_groups, c->nfacet_groups = nfacet_groups;
  FE_MALLOC(m->cells, ncells * m->nvc + 1, "mesh cells");
  FE_MALLOC(m->cell_tags, ncells + 1, "mesh cell regions");
  if (curved) FE_MALLOC(m->geo_cells, ncells * m->ngn + 1, "mesh second-order nodes");
  int unassigned_id = 0;
  for (size_t g = 0; g < a->ngroups; g++)
    if (a->groups[g].dim == dim && a->groups[g].tag >= unassigned_id)
      unassigned_id = a->groups[g].tag + 1;
  int any_unassigned = 0;
  size_t e = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const fe_mesh_block *bl = &a->blocks[b];
    const gmsh_type_info *ti = gmsh_type_lookup(bl->gmsh_type);
    if (ti->dim != dim) continue;
    int region = 1;
    if (nregion_groups) {
      region = unassigned_id;
      for (size_t g = 0; g < a->ngroups; g++)
        if (a->groups[g].dim == dim && group_has(&a->groups[g], bl->entity)) {
          region = a->groups[g].tag;
          break;
        }
      any_unassigned |= region == unassigned_id && bl->nelements;
    }
    for (size_t k = 0; k < bl->nelements; k++, e++) {
      const size_t *nodes = bl->nodes + k * ti->nnodes;
      for (int v = 0; v < (curved ? ti->nnodes : ti->nvertices); v++) {
        long long at = find_node(c->keys, a->nnodes, nodes[v]);
        if (at < 0)
          FE_ERROR(FE_ERR_MESH, "%s: %s element %zu of entity %d names node %zu, which does not exist",
                   src, ti->name, k, bl->entity, nodes[v]);
        if (v < ti->nvertices) m->cells[e * m->nvc + v] = (int)at;
        if (curved) m->geo_cells[e * m->ngn + v] = (int)at;
      }
      m->cell_tags[e] = region;
    }
  }
  c->unassigned_id = unassigned_id, c->any_unassigned = any_unassigned;
  return 0;
}

/* 4. keep the cells' vertices, renumbered in input order (c->newid: the renumbering, which the
 * caller frees) */
static int keep_vertices(convert_ctx *c, fe_mesh *m)
{
  const fe_mesh_arrays *a = c->a;
  const size_t ncells = c->ncells;
  int *newid;
  FE_MALLOC(newid, a->nnodes, "node renumbering");
  c->newid = newid;
  for (size_t i = 0; i < a->nnodes; i++) newid[i] = -1;
  for (size_t k = 0; k < ncells * m->nvc; k++) newid[m->cells[k]] = 0;
  int nv = 0;
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] == 0) newid[i] = nv++;
  for (size_t k = 0; k < ncells * m->nvc; k++) m->cells[k] = newid[m->cells[k]];
  m->nvertices = nv;
  m->coords = fe_malloc((size_t)nv * 3 * sizeof(double) + 1, "mesh vertex coordinates");
  if (!m->coords) return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] >= 0) memcpy(m->coords + 3 * (size_t)newid[i], a->coords + 3 * i, 3 * sizeof(double));
  if (c->curved) FE_CHECK(number_geo_nodes(a, m, newid));
  return 0;
}

/* 5. tags: the named groups, or the defaults */
static int add_tags(const convert_ctx *c, fe_mesh *m)
{
  const fe_mesh_arrays *a = c->a;
  const int dim = c->dim;
  m->tags = fe_calloc(a->ngroups + 3, sizeof(fe_tag), "mesh tags");
  if (!m->tags) return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  for (size_t g = 0; g < a->ngroups; g++)
    if (a->groups[g].dim == dim || a->groups[g].dim == dim - 1)
      add_tag(m, a->groups[g].name, a->groups[g].tag, a->groups[g].dim);
  if (!c->nregion_groups) add_tag(m, "domain", 1, dim);
  if (c->any_unassigned) add_tag(m, "unassigned", c->unassigned_id, dim);
  return 0;
}

/* 5. boundary facets from the physical groups one dimension lower */
static int facets_from_groups(const convert_ctx *c, fe_mesh *m)
{
  const fe_mesh_arrays *a = c->a;
  const char *src = c->src;
  const int dim = c->dim, *newid = c->newid;
  size_t nfacets = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = gmsh_type_lookup(a->blocks[b].gmsh_type);
    if (ti->dim != dim - 1) continue;
    for (size_t g = 0; g < a->ngroups; g++)
      if (a->groups[g].dim == dim - 1 && group_has(&a->groups[g], a->blocks[b].entity))
        nfacets += a->blocks[b].nelements;
  }
  if (nfacets > INT_MAX) FE_ERROR(FE_ERR_MESH, "%s: too many boundary facets (%zu)", src, nfacets);
  m->facets = fe_malloc((nfacets * m->nvf + 1) * sizeof(int), "boundary facets");
  m->facet_tags = fe_malloc((nfacets + 1) * sizeof(int), "boundary facet tags");
  if (!m->facets || !m->facet_tags) return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  size_t f = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const fe_mesh_block *bl = &a->blocks[b];
    const gmsh_type_info *ti = gmsh_type_lookup(bl->gmsh_type);
    if (ti->dim != dim - 1) continue;
    if (ti->nvertices > m->nvf)
      FE_ERROR(FE_ERR_MESH, "%s: %s facets (entity %d) cannot bound %s cells", src, ti->name,
               bl->entity, fe_cell_name(m->type));
    for (size_t g = 0; g < a->ngroups; g++) {
      if (a->groups[g].dim != dim - 1 || !group_has(&a->groups[g], bl->entity)) continue;
      for (size_t k = 0; k < bl->nelements; k++, f++) {
        const size_t *nodes = bl->nodes + k * ti->nnodes;
        int *fv = m->facets + f * m->nvf;
        for (int v = 0; v < m->nvf; v++) {
          size_t tag = nodes[v < ti->nvertices ? v : ti->nvertices - 1];
          long long at = find_node(c->keys, a->nnodes, tag);
          int id = at < 0 ? -1 : newid[at];
          if (id < 0 || id >= m->nvertices)
            FE_ERROR(FE_ERR_MESH, "%s: %s facet %zu of entity %d names node %zu, which %s", src,
                     ti->name, k, bl->entity, tag,
                     at < 0 ? "does not exist" : "is not a vertex of any cell");
          fv[v] = id;
        }
        m->facet_tags[f] = a->groups[g].tag;
      }
    }
  }
  m->nfacets = (int)f;
  return 0;
}

/* Everything of fe_mesh_from_arrays after the argument checks (steps 2-5 at the top of this
 * file); m is freed by the caller on error. keys: the sorted node tags. */
static int convert(const fe_mesh_arrays *a, const node_key *keys, fe_mesh *m)
{
  convert_ctx c = {a, keys, a->source ? a->source : "mesh", 0, 0, 0, 0, 0, 0, 0, NULL};
  FE_CHECK(top_dimension(&c));
  FE_CHECK(top_cell_type(&c, m));
  FE_CHECK(cells_and_regions(&c, m));
  int rc = keep_vertices(&c, m);
  if (!rc) rc = add_tags(&c, m);
  if (!rc && c.nfacet_groups) rc = facets_from_groups(&c, m);
  free(c.newid);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  if (!c.nfacet_groups) { /* without any: the facets seen once, tagged "boundary" */
    add_tag(m, "boundary", 1, c.dim - 1);
    return boundary_from_cells(m);
  }
  return 0;
}

/* Turn 2D cells with a negative area counter-clockwise (the orientation of a plane
 * surface's mesh follows its normal, which may point down). Reversing the cycle after vertex
 * 0 reverses the edges too: the node on edge (a, b) becomes the one on (b, a), so tri6 takes
 * its nodes in the order 0 2 1 5 4 3 and quad9 in 0 3 2 1 7 6 5 4 8. */
static void orient_2d(fe_mesh *m)
{
  static const int tri6_flip[6] = {0, 2, 1, 5, 4, 3};
  static const int quad9_flip[9] = {0, 3, 2, 1, 7, 6, 5, 4, 8};
  if (m->dim != 2) return;
  const int curved = m->geo_order == 2 && m->geo_cells;
  const int *flip = m->type == FE_CELL_TRI ? tri6_flip : quad9_flip;
  for (int e = 0; e < m->ncells; e++) {
    int *c = m->cells + (size_t)e * m->nvc;
    const double *x0 = m->coords + 3 * (size_t)c[0], *x1 = m->coords + 3 * (size_t)c[1];
    const double *x2 = m->coords + 3 * (size_t)c[m->nvc - 1];
    double area = (x1[0] - x0[0]) * (x2[1] - x0[1]) - (x1[1] - x0[1]) * (x2[0] - x0[0]);
    if (area < 0) { /* reverse the cycle after vertex 0 */
      int t = c[1];
      c[1] = c[m->nvc - 1];
      c[m->nvc - 1] = t;
      if (curved) {
        int *g = m->geo_cells + (size_t)e * m->ngn, old[9];
        memcpy(old, g, (size_t)m->ngn * sizeof(int));
        for (int k = 0; k < m->ngn; k++) g[k] = old[flip[k]];
      }
    }
  }
}

/* Put the cells in layers (fe_mesh_layer_order), each layer along a Morton curve of the
 * centroids, and number the vertices in order of first use. Mesh generators hand out cells
 * in no spatial order. felab colors blocks of consecutive cells, which must be compact to
 * need few colors, and the cpu's threads take runs of them, which must touch few other runs
 * (a thread waits while a color has fewer runs than threads): a Morton curve's runs are blobs
 * that each touch many, a slab's only the slabs beside it (cube.geo's 111k tets in 16 runs:
 * 9 colors along the curve, 4 in layers). */
static int order_for_locality(fe_mesh *m)
{
  int *curve;
  FE_CHECK(fe_mesh_morton_order(m, &curve));
  int rc = fe_mesh_order_layers(m, curve);
  free(curve);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}

int fe_mesh_from_arrays(const fe_mesh_arrays *a, fe_mesh **out)
{
  FE_ASSERT(a && out, FE_ERR_ARG, "mesh from arrays: missing arrays or output");
  *out = NULL;
  const char *src = a->source ? a->source : "mesh";
  FE_ASSERT(a->nnodes > 0, FE_ERR_MESH, "%s: the mesh has no nodes", src);
  FE_ASSERT(a->node_tags && a->coords, FE_ERR_MESH, "%s: %zu nodes but no tags or coordinates",
            src, a->nnodes);
  FE_ASSERT(a->nnodes <= INT_MAX, FE_ERR_MESH, "%s: too many nodes (%zu)", src, a->nnodes);
  FE_ASSERT(!a->nblocks || a->blocks, FE_ERR_MESH, "%s: %zu element blocks but none given", src,
            a->nblocks);
  FE_ASSERT(!a->ngroups || a->groups, FE_ERR_MESH, "%s: %zu physical groups but none given", src,
            a->ngroups);
  for (size_t i = 0; i < 3 * a->nnodes; i++)
    if (!isfinite(a->coords[i]))
      FE_ERROR(FE_ERR_MESH, "%s: node %zu has a coordinate that is not a finite number", src,
               a->node_tags[i / 3]);
  node_key *keys;
  FE_MALLOC(keys, a->nnodes, "node tag index");
  for (size_t i = 0; i < a->nnodes; i++) keys[i].tag = a->node_tags[i], keys[i].index = i;
  qsort(keys, a->nnodes, sizeof *keys, node_key_cmp);
  for (size_t i = 1; i < a->nnodes; i++)
    if (keys[i].tag == keys[i - 1].tag) {
      size_t tag = keys[i].tag;
      free(keys);
      FE_ERROR(FE_ERR_MESH, "%s: node tag %zu appears twice", src, tag);
    }
  fe_mesh *m = fe_calloc(1, sizeof *m, "mesh");
  if (!m) {
    free(keys);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  int rc = convert(a, keys, m);
  free(keys);
  if (!rc) rc = order_for_locality(m);
  if (!rc) {
    orient_2d(m);
    rc = fe_mesh_check(m);
    if (rc) { /* name the file in the check's message */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", fe_error_message());
      rc = fe_error_set(rc, __FILE__, __LINE__, __func__, "%s: %s", src, msg);
    }
  }
  if (rc) {
    fe_mesh_free(m);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = m;
  return 0;
}
