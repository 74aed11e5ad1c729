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
 * fe_mesh_load says so. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/msh.h"
#include "engine/core/progress.h"

#ifdef FE_HAVE_GMSH
#include <dlfcn.h>
#include <gmshc.h>
#include <omp.h>
#endif

void fe_load_opts_default(fe_load_opts *o)
{
  o->size = 0;
  o->order = 1;
  o->algorithm = NULL;
}

/* ----- the pure conversion ----- */

/* What felab knows of a Gmsh element type: its dimension, node count, vertex count, the
 * felab cell type (-1: a facet or lower-dimensional element, -2: a cell felab lacks), its
 * order, and whether it is an incomplete (serendipity) second-order type. */
typedef struct gmsh_type_info {
  int type, dim, nnodes, nvertices, cell, order, incomplete;
  const char *name;
} gmsh_type_info;

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
static const gmsh_type_info *type_info(int type)
{
  for (size_t i = 0; i < sizeof gmsh_types / sizeof *gmsh_types; i++)
    if (gmsh_types[i].type == type) return &gmsh_types[i];
  return NULL;
}

int fe_msh_type_info(int type, fe_msh_type *t)
{
  const gmsh_type_info *ti = type_info(type);
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

/* Everything of fe_mesh_from_arrays after the argument checks; m is freed by the caller on
 * error. keys: the sorted node tags. */
static int convert(const fe_mesh_arrays *a, const node_key *keys, fe_mesh *m)
{
  const char *src = a->source ? a->source : "mesh";
  /* 2. the top dimension and its cell type */
  int dim = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const fe_mesh_block *bl = &a->blocks[b];
    const gmsh_type_info *ti = type_info(bl->gmsh_type);
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
  int types_seen = 0; /* bit per Gmsh type among the top dimension */
  char found[256] = "";
  size_t ncells = 0, flen = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = type_info(a->blocks[b].gmsh_type);
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

  /* 3. cells as input node positions, and their regions */
  int nregion_groups = 0, nfacet_groups = 0;
  for (size_t g = 0; g < a->ngroups; g++) {
    const fe_mesh_group *gr = &a->groups[g];
    FE_ASSERT(!gr->nentities || gr->entities, FE_ERR_MESH,
              "%s: physical group %d (dim %d) lists %zu entities but gives none", src, gr->tag,
              gr->dim, gr->nentities);
    nregion_groups += gr->dim == dim;
    nfacet_groups += gr->dim == dim - 1;
  }
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
    const gmsh_type_info *ti = type_info(bl->gmsh_type);
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
        long long at = find_node(keys, a->nnodes, nodes[v]);
        if (at < 0)
          FE_ERROR(FE_ERR_MESH, "%s: %s element %zu of entity %d names node %zu, which does not exist",
                   src, ti->name, k, bl->entity, nodes[v]);
        if (v < ti->nvertices) m->cells[e * m->nvc + v] = (int)at;
        if (curved) m->geo_cells[e * m->ngn + v] = (int)at;
      }
      m->cell_tags[e] = region;
    }
  }

  /* 4. keep the cells' vertices, renumbered in input order */
  int *newid;
  FE_MALLOC(newid, a->nnodes, "node renumbering");
  for (size_t i = 0; i < a->nnodes; i++) newid[i] = -1;
  for (size_t k = 0; k < ncells * m->nvc; k++) newid[m->cells[k]] = 0;
  int nv = 0;
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] == 0) newid[i] = nv++;
  for (size_t k = 0; k < ncells * m->nvc; k++) m->cells[k] = newid[m->cells[k]];
  m->nvertices = nv;
  m->coords = fe_malloc((size_t)nv * 3 * sizeof(double) + 1, "mesh vertex coordinates");
  if (!m->coords) {
    free(newid);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t i = 0; i < a->nnodes; i++)
    if (newid[i] >= 0) memcpy(m->coords + 3 * (size_t)newid[i], a->coords + 3 * i, 3 * sizeof(double));
  if (curved) {
    int rc = number_geo_nodes(a, m, newid);
    if (rc) {
      free(newid);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
  }

  /* 5. tags: the named groups, or the defaults; boundary facets from groups or the cells */
  m->tags = fe_calloc(a->ngroups + 3, sizeof(fe_tag), "mesh tags");
  if (!m->tags) {
    free(newid);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t g = 0; g < a->ngroups; g++)
    if (a->groups[g].dim == dim || a->groups[g].dim == dim - 1)
      add_tag(m, a->groups[g].name, a->groups[g].tag, a->groups[g].dim);
  if (!nregion_groups) add_tag(m, "domain", 1, dim);
  if (any_unassigned) add_tag(m, "unassigned", unassigned_id, dim);
  if (!nfacet_groups) {
    free(newid);
    add_tag(m, "boundary", 1, dim - 1);
    return boundary_from_cells(m);
  }
  size_t nfacets = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = type_info(a->blocks[b].gmsh_type);
    if (ti->dim != dim - 1) continue;
    for (size_t g = 0; g < a->ngroups; g++)
      if (a->groups[g].dim == dim - 1 && group_has(&a->groups[g], a->blocks[b].entity))
        nfacets += a->blocks[b].nelements;
  }
  if (nfacets > INT_MAX) {
    free(newid);
    FE_ERROR(FE_ERR_MESH, "%s: too many boundary facets (%zu)", src, nfacets);
  }
  m->facets = fe_malloc((nfacets * m->nvf + 1) * sizeof(int), "boundary facets");
  m->facet_tags = fe_malloc((nfacets + 1) * sizeof(int), "boundary facet tags");
  if (!m->facets || !m->facet_tags) {
    free(newid);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  size_t f = 0;
  for (size_t b = 0; b < a->nblocks; b++) {
    const fe_mesh_block *bl = &a->blocks[b];
    const gmsh_type_info *ti = type_info(bl->gmsh_type);
    if (ti->dim != dim - 1) continue;
    if (ti->nvertices > m->nvf) {
      free(newid);
      FE_ERROR(FE_ERR_MESH, "%s: %s facets (entity %d) cannot bound %s cells", src, ti->name,
               bl->entity, fe_cell_name(m->type));
    }
    for (size_t g = 0; g < a->ngroups; g++) {
      if (a->groups[g].dim != dim - 1 || !group_has(&a->groups[g], bl->entity)) continue;
      for (size_t k = 0; k < bl->nelements; k++, f++) {
        const size_t *nodes = bl->nodes + k * ti->nnodes;
        int *fv = m->facets + f * m->nvf;
        for (int v = 0; v < m->nvf; v++) {
          size_t tag = nodes[v < ti->nvertices ? v : ti->nvertices - 1];
          long long at = find_node(keys, a->nnodes, tag);
          int id = at < 0 ? -1 : newid[at];
          if (id < 0 || id >= m->nvertices) {
            free(newid);
            FE_ERROR(FE_ERR_MESH, "%s: %s facet %zu of entity %d names node %zu, which %s", src,
                     ti->name, k, bl->entity, tag,
                     at < 0 ? "does not exist" : "is not a vertex of any cell");
          }
          fv[v] = id;
        }
        m->facet_tags[f] = a->groups[g].tag;
      }
    }
  }
  m->nfacets = (int)f;
  free(newid);
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

/* Gmsh 3D algorithm numbers by name. */
static int gmsh_algorithm(const char *src, const char *name, int *number)
{
  static const struct { const char *name; int number; } algos[] = {
      {"delaunay", 1}, {"initial", 3}, {"frontal", 4}, {"mmg3d", 7}, {"rtree", 9}, {"hxt", 10}};
  for (size_t i = 0; i < sizeof algos / sizeof *algos; i++)
    if (!strcmp(name, algos[i].name)) {
      *number = algos[i].number;
      return 0;
    }
  FE_ERROR(FE_ERR_ARG,
           "%s: unknown mesh algorithm '%s' (delaunay frontal hxt mmg3d rtree initial)", src,
           name);
}

/* The options (defaults when o is NULL) into *out, checked, and path a non-empty regular file
 * that can be opened: what both ways of loading check first. */
static int load_check(const char *path, const fe_load_opts *opts, fe_load_opts *out)
{
  fe_load_opts o;
  fe_load_opts_default(&o);
  if (opts) o = *opts;
  FE_ASSERT(o.order == 1 || o.order == 2, FE_ERR_ARG, "%s: order = %d: felab loads order 1 or 2",
            path, o.order);
  FE_ASSERT(isfinite(o.size) && o.size >= 0, FE_ERR_ARG,
            "%s: size = %g: the mesh size must be a positive number (0: the file's own)", path,
            o.size);
  if (o.algorithm) {
    int number;
    FE_CHECK(gmsh_algorithm(path, o.algorithm, &number));
  }
  struct stat st;
  if (stat(path, &st) != 0)
    FE_ERROR(FE_ERR_IO, "%s: cannot open mesh file: %s", path, strerror(errno));
  FE_ASSERT(S_ISREG(st.st_mode), FE_ERR_IO, "%s: not a regular file", path);
  FE_ASSERT(st.st_size > 0, FE_ERR_IO, "%s: empty file", path);
  FILE *f = fopen(path, "rb");
  if (!f) FE_ERROR(FE_ERR_IO, "%s: cannot open mesh file: %s", path, strerror(errno));
  fclose(f);
  *out = o;
  return 0;
}

#ifdef FE_HAVE_GMSH
/* ----- the SDK calls ----- */

/* The SDK is loaded at the first file it reads, not when felab starts: its library pulls in
 * about 80 others (OpenCASCADE, image and GL libraries) whose symbols the dynamic loader
 * would resolve at every start, 90 of felab's 100 ms (FE_GMSH_LIB: its soname, from the
 * build). */
#ifndef FE_GMSH_LIB
#define FE_GMSH_LIB "libgmsh.so"
#endif
static struct {
  __typeof__(gmshInitialize) *Initialize;
  __typeof__(gmshFinalize) *Finalize;
  __typeof__(gmshFree) *Free;
  __typeof__(gmshLoggerGet) *LoggerGet;
  __typeof__(gmshLoggerGetLastError) *LoggerGetLastError;
  __typeof__(gmshLoggerStart) *LoggerStart;
  __typeof__(gmshLoggerStop) *LoggerStop;
  __typeof__(gmshModelGetDimension) *ModelGetDimension;
  __typeof__(gmshModelGetEntities) *ModelGetEntities;
  __typeof__(gmshModelGetEntitiesForPhysicalGroup) *ModelGetEntitiesForPhysicalGroup;
  __typeof__(gmshModelGetPhysicalGroups) *ModelGetPhysicalGroups;
  __typeof__(gmshModelGetPhysicalName) *ModelGetPhysicalName;
  __typeof__(gmshModelMeshGenerate) *ModelMeshGenerate;
  __typeof__(gmshModelMeshGetElements) *ModelMeshGetElements;
  __typeof__(gmshModelMeshGetNodes) *ModelMeshGetNodes;
  __typeof__(gmshModelMeshSetOrder) *ModelMeshSetOrder;
  __typeof__(gmshOpen) *Open;
  __typeof__(gmshOptionSetNumber) *OptionSetNumber;
  void (*lexer_flush)(void); /* an internal C++ symbol (see gmsh_stop); may be absent */
} gmsh;

static int gmsh_load(const char *src)
{
  static void *lib;
  if (lib) return 0;
  void *h = dlopen(FE_GMSH_LIB, RTLD_NOW | RTLD_LOCAL);
  FE_ASSERT(h, FE_ERR_IO, "%s: cannot load the Gmsh SDK (%s): %s", src, FE_GMSH_LIB, dlerror());
  const struct {
    const char *name;
    void **fn;
  } fns[] = {
      {"gmshInitialize", (void **)&gmsh.Initialize},
      {"gmshFinalize", (void **)&gmsh.Finalize},
      {"gmshFree", (void **)&gmsh.Free},
      {"gmshLoggerGet", (void **)&gmsh.LoggerGet},
      {"gmshLoggerGetLastError", (void **)&gmsh.LoggerGetLastError},
      {"gmshLoggerStart", (void **)&gmsh.LoggerStart},
      {"gmshLoggerStop", (void **)&gmsh.LoggerStop},
      {"gmshModelGetDimension", (void **)&gmsh.ModelGetDimension},
      {"gmshModelGetEntities", (void **)&gmsh.ModelGetEntities},
      {"gmshModelGetEntitiesForPhysicalGroup", (void **)&gmsh.ModelGetEntitiesForPhysicalGroup},
      {"gmshModelGetPhysicalGroups", (void **)&gmsh.ModelGetPhysicalGroups},
      {"gmshModelGetPhysicalName", (void **)&gmsh.ModelGetPhysicalName},
      {"gmshModelMeshGenerate", (void **)&gmsh.ModelMeshGenerate},
      {"gmshModelMeshGetElements", (void **)&gmsh.ModelMeshGetElements},
      {"gmshModelMeshGetNodes", (void **)&gmsh.ModelMeshGetNodes},
      {"gmshModelMeshSetOrder", (void **)&gmsh.ModelMeshSetOrder},
      {"gmshOpen", (void **)&gmsh.Open},
      {"gmshOptionSetNumber", (void **)&gmsh.OptionSetNumber}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    *fns[i].fn = dlsym(h, fns[i].name);
    if (!*fns[i].fn) {
      dlclose(h);
      FE_ERROR(FE_ERR_IO, "%s: the Gmsh SDK (%s) has no %s", src, FE_GMSH_LIB, fns[i].name);
    }
  }
  *(void **)&gmsh.lexer_flush = dlsym(h, "_Z12gmsh_yyflushv");
  lib = h;
  return 0;
}

/* Gmsh is one global, non-reentrant session, started for each file and finalized after it:
 * after a syntax error its parser reads nothing more until it is restarted. */
static int gmsh_busy;
/* Starting, Gmsh sets OpenMP's thread count to its General.NumThreads (1): felab's loops and
 * kernels ran on one thread after every load. The count is put back when it stops. */
static int gmsh_threads;

/* Start the session quietly (no config files, nothing on the terminal, errors as codes). */
static int gmsh_start(const char *src)
{
  int ierr = 0;
  FE_ASSERT(!gmsh_busy, FE_ERR_ARG, "%s: the Gmsh SDK is already reading a file", src);
  FE_CHECK(gmsh_load(src));
  gmsh_threads = omp_get_max_threads();
  gmsh.Initialize(0, NULL, 0, &ierr);
  if (ierr) omp_set_num_threads(gmsh_threads);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK failed to start", src);
  gmsh.OptionSetNumber("General.Terminal", 0, &ierr);
  gmsh.OptionSetNumber("General.Verbosity", 2, &ierr); /* errors and warnings */
  gmsh.LoggerStart(&ierr);
  gmsh_busy = 1;
  return 0;
}

/* Gmsh 4.8 leaves the rest of a file its .geo parser gave up on in the lexer's buffer, where
 * the next file's parse starts (and fails): flush it (gmsh.lexer_flush, when the SDK has it). */
static void gmsh_stop(void)
{
  int ierr = 0;
  if (gmsh.lexer_flush) gmsh.lexer_flush();
  gmsh.LoggerStop(&ierr);
  gmsh.Finalize(&ierr);
  omp_set_num_threads(gmsh_threads);
  gmsh_busy = 0;
}

/* The first error the SDK logged (or its last error), else what. Frees the log. */
static void gmsh_error_text(char *buf, size_t n, const char *what)
{
  char **log = NULL;
  size_t nlog = 0;
  int ierr = 0;
  snprintf(buf, n, "%s", what);
  gmsh.LoggerGet(&log, &nlog, &ierr);
  int found = 0;
  for (size_t i = 0; i < nlog; i++) {
    if (!found && log[i] && !strncmp(log[i], "Error", 5)) {
      const char *t = log[i] + 5;
      while (*t == ' ' || *t == ':') t++;
      snprintf(buf, n, "%s", t);
      found = 1;
    }
    gmsh.Free(log[i]);
  }
  gmsh.Free(log);
  if (!found) {
    char *last = NULL;
    gmsh.LoggerGetLastError(&last, &ierr);
    if (!ierr && last && *last) snprintf(buf, n, "%s", last);
    gmsh.Free(last);
  }
}

/* Whether the SDK logged an error since the logger started. */
static int gmsh_logged_error(void)
{
  char **log = NULL;
  size_t nlog = 0;
  int ierr = 0, found = 0;
  gmsh.LoggerGet(&log, &nlog, &ierr);
  for (size_t i = 0; i < nlog; i++) {
    found |= log[i] && !strncmp(log[i], "Error", 5);
    gmsh.Free(log[i]);
  }
  gmsh.Free(log);
  return found;
}

/* Everything the SDK hands out, freed in one place. */
typedef struct sdk_arrays {
  size_t *node_tags;
  double *coords, *param;
  size_t nnodes;
  int *dim_tags; /* entities */
  size_t ndim_tags;
  fe_mesh_block *blocks;
  size_t nblocks, cap_blocks;
  void **owned; /* per-entity arrays of the SDK to free */
  size_t nowned, cap_owned;
  int *groups_dt; /* physical groups (dim, tag) */
  size_t ngroups_dt;
  fe_mesh_group *groups;
  char **names;
  int **entities;
} sdk_arrays;

static void sdk_arrays_free(sdk_arrays *s)
{
  gmsh.Free(s->node_tags);
  gmsh.Free(s->coords);
  gmsh.Free(s->param);
  gmsh.Free(s->dim_tags);
  for (size_t i = 0; i < s->nowned; i++) gmsh.Free(s->owned[i]);
  free(s->owned);
  free(s->blocks);
  size_t ng = s->ngroups_dt / 2;
  for (size_t g = 0; s->names && g < ng; g++) gmsh.Free(s->names[g]);
  for (size_t g = 0; s->entities && g < ng; g++) gmsh.Free(s->entities[g]);
  free(s->names);
  free(s->entities);
  free(s->groups);
  gmsh.Free(s->groups_dt);
}

/* Remember an SDK array for sdk_arrays_free (frees it now when out of memory). */
static int own(sdk_arrays *s, void *p)
{
  if (s->nowned == s->cap_owned) {
    size_t cap = s->cap_owned ? 2 * s->cap_owned : 64;
    void **q = realloc(s->owned, cap * sizeof *q);
    if (!q) {
      gmsh.Free(p);
      FE_ERROR(FE_ERR_MEM, "out of memory for the SDK's arrays");
    }
    s->owned = q, s->cap_owned = cap;
  }
  s->owned[s->nowned++] = p;
  return 0;
}

/* Copy the model's nodes, element blocks per entity and physical groups out of the SDK. */
static int sdk_read(const char *src, sdk_arrays *s)
{
  int ierr = 0;
  size_t ncoords = 0, nparam = 0;
  gmsh.ModelMeshGetNodes(&s->node_tags, &s->nnodes, &s->coords, &ncoords, &s->param, &nparam, -1,
                        -1, 0, 0, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not give the nodes", src);
  FE_ASSERT(ncoords == 3 * s->nnodes, FE_ERR_IO, "%s: %zu coordinates for %zu nodes", src,
            ncoords, s->nnodes);
  gmsh.ModelGetEntities(&s->dim_tags, &s->ndim_tags, -1, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not list the entities", src);
  for (size_t i = 0; i + 1 < s->ndim_tags; i += 2) {
    int dim = s->dim_tags[i], tag = s->dim_tags[i + 1];
    if (dim < 1) continue;
    int *types = NULL;
    size_t ntypes = 0, **etags = NULL, *etags_n = NULL, etags_nn = 0, **ntags = NULL,
           *ntags_n = NULL, ntags_nn = 0;
    gmsh.ModelMeshGetElements(&types, &ntypes, &etags, &etags_n, &etags_nn, &ntags, &ntags_n,
                             &ntags_nn, dim, tag, &ierr);
    /* own everything first so that any error below frees it */
    int rc = own(s, types);
    if (!rc) rc = own(s, etags);
    if (!rc) rc = own(s, etags_n);
    if (!rc) rc = own(s, ntags);
    if (!rc) rc = own(s, ntags_n);
    for (size_t k = 0; k < etags_nn; k++)
      if (!rc) rc = own(s, etags[k]);
      else gmsh.Free(etags[k]);
    for (size_t k = 0; k < ntags_nn; k++)
      if (!rc) rc = own(s, ntags[k]);
      else gmsh.Free(ntags[k]);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    FE_ASSERT(!ierr && ntags_nn == ntypes && etags_nn == ntypes, FE_ERR_IO,
              "%s: the Gmsh SDK could not give the elements of entity (%d, %d)", src, dim, tag);
    for (size_t k = 0; k < ntypes; k++) {
      if (s->nblocks == s->cap_blocks) {
        size_t cap = s->cap_blocks ? 2 * s->cap_blocks : 16;
        fe_mesh_block *q = realloc(s->blocks, cap * sizeof *q);
        FE_ASSERT(q, FE_ERR_MEM, "out of memory for the element blocks");
        s->blocks = q, s->cap_blocks = cap;
      }
      fe_mesh_block *b = &s->blocks[s->nblocks++];
      b->gmsh_type = types[k];
      b->entity = tag;
      b->nelements = etags_n[k];
      b->nodes = ntags[k];
      const gmsh_type_info *ti = type_info(types[k]);
      FE_ASSERT(!ti || ntags_n[k] == etags_n[k] * (size_t)ti->nnodes, FE_ERR_IO,
                "%s: entity (%d, %d): %zu node tags for %zu %s elements", src, dim, tag,
                ntags_n[k], etags_n[k], ti ? ti->name : "?");
    }
  }
  gmsh.ModelGetPhysicalGroups(&s->groups_dt, &s->ngroups_dt, -1, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not list the physical groups", src);
  size_t ng = s->ngroups_dt / 2;
  s->groups = calloc(ng + 1, sizeof *s->groups);
  s->names = calloc(ng + 1, sizeof *s->names);
  s->entities = calloc(ng + 1, sizeof *s->entities);
  FE_ASSERT(s->groups && s->names && s->entities, FE_ERR_MEM,
            "out of memory for the physical groups");
  for (size_t g = 0; g < ng; g++) {
    fe_mesh_group *gr = &s->groups[g];
    gr->dim = s->groups_dt[2 * g];
    gr->tag = s->groups_dt[2 * g + 1];
    gmsh.ModelGetPhysicalName(gr->dim, gr->tag, &s->names[g], &ierr);
    gr->name = s->names[g];
    gmsh.ModelGetEntitiesForPhysicalGroup(gr->dim, gr->tag, &s->entities[g], &gr->nentities, &ierr);
    gr->entities = s->entities[g];
    FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not give physical group %d", src, gr->tag);
  }
  return 0;
}

/* Open (and mesh, when it holds no mesh) the file in the cleared session. */
static int sdk_open(const char *path, const fe_load_opts *o)
{
  int ierr = 0;
  char why[512];
  gmsh.Open(path, &ierr);
  if (ierr || gmsh_logged_error()) {
    gmsh_error_text(why, sizeof why, "unreadable or unknown format");
    FE_ERROR(FE_ERR_IO, "%s: Gmsh could not read it: %s", path, why);
  }
  int *types = NULL;
  size_t ntypes = 0, **etags = NULL, *etags_n = NULL, etags_nn = 0, **ntags = NULL,
         *ntags_n = NULL, ntags_nn = 0;
  gmsh.ModelMeshGetElements(&types, &ntypes, &etags, &etags_n, &etags_nn, &ntags, &ntags_n,
                           &ntags_nn, -1, -1, &ierr);
  int has_mesh = 0, file_order = 1;
  for (size_t k = 0; k < ntypes; k++) {
    const gmsh_type_info *ti = type_info(types[k]);
    has_mesh |= ti && ti->dim >= 2 && etags_n[k] > 0;
    if (ti && ti->dim >= 2 && etags_n[k] > 0 && ti->order > file_order) file_order = ti->order;
  }
  for (size_t k = 0; k < etags_nn; k++) gmsh.Free(etags[k]);
  for (size_t k = 0; k < ntags_nn; k++) gmsh.Free(ntags[k]);
  gmsh.Free(types), gmsh.Free(etags), gmsh.Free(etags_n), gmsh.Free(ntags), gmsh.Free(ntags_n);
  if (!has_mesh) {
    int dim = gmsh.ModelGetDimension(&ierr);
    FE_ASSERT(!ierr && dim >= 2, FE_ERR_MESH,
              "%s: neither a 2D/3D mesh nor a geometry to mesh (model dimension %d)", path, dim);
    if (o->size > 0) { /* uniform: the sizes at the file's points would win otherwise */
      gmsh.OptionSetNumber("Mesh.MeshSizeFromPoints", 0, &ierr);
      gmsh.OptionSetNumber("Mesh.MeshSizeMax", o->size, &ierr);
    }
    if (o->algorithm) {
      int number;
      FE_CHECK(gmsh_algorithm(path, o->algorithm, &number));
      gmsh.OptionSetNumber("Mesh.Algorithm3D", number, &ierr);
    }
    char phase[32];
    snprintf(phase, sizeof phase, "meshing %dD", dim);
    fe_progress_phase(phase);
    gmsh.ModelMeshGenerate(dim, &ierr); /* Ctrl-C waits for it: Gmsh cannot be stopped */
    FE_CHECK_INTERRUPT();
    if (ierr || gmsh_logged_error()) {
      gmsh_error_text(why, sizeof why, "meshing failed");
      FE_ERROR(FE_ERR_MESH, "%s: Gmsh could not mesh it: %s", path, why);
    }
  }
  /* The order asked for is the order felab gets: order 2 elevates a first-order mesh (new
   * nodes on the CAD surfaces when the model has them, else at the straight midpoints), and
   * order 1 makes a second-order file's mesh straight. */
  if (o->order != file_order) {
    fe_progress_phase(o->order == 2 ? "making order-2 elements" : "making order-1 elements");
    gmsh.ModelMeshSetOrder(o->order, &ierr);
    if (ierr || gmsh_logged_error()) {
      gmsh_error_text(why, sizeof why, "could not change the element order");
      FE_ERROR(FE_ERR_MESH, "%s: Gmsh could not make order-%d elements: %s", path, o->order,
               why);
    }
  }
  return 0;
}

int fe_mesh_load(const char *path, const fe_load_opts *opts, fe_mesh **out)
{
  FE_ASSERT(path && out, FE_ERR_ARG, "mesh load: missing path or output");
  *out = NULL;
  fe_load_opts o;
  fe_load_opts_default(&o);
  FE_CHECK(load_check(path, opts, &o));
  FE_CHECK(gmsh_start(path));
  fe_progress_begin("gmsh", 0);
  fe_progress_phase("reading the file");
  fe_progress_watch(1); /* Gmsh reports nothing while it works: the time keeps moving */
  int rc = sdk_open(path, &o);
  sdk_arrays s;
  memset(&s, 0, sizeof s);
  if (!rc) fe_progress_phase("converting to felab's mesh");
  if (!rc) rc = sdk_read(path, &s);
  if (!rc) {
    fe_mesh_arrays a = {path, s.nnodes, s.node_tags, s.coords, s.nblocks, s.blocks,
                        s.ngroups_dt / 2, s.groups};
    rc = fe_mesh_from_arrays(&a, out);
  }
  fe_progress_watch(0);
  fe_progress_end();
  sdk_arrays_free(&s);
  gmsh_stop();
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}
#else
/* Whether path ends in suffix, in any case. */
static int has_suffix(const char *path, const char *suffix)
{
  size_t n = strlen(path), k = strlen(suffix);
  return n >= k && !strcasecmp(path + n - k, suffix);
}

/* The highest order of the 2D and 3D elements. */
static int arrays_order(const fe_mesh_arrays *a)
{
  int order = 1;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = type_info(a->blocks[b].gmsh_type);
    if (ti && ti->dim >= 2 && a->blocks[b].nelements && ti->order > order) order = ti->order;
  }
  return order;
}

/* Without the SDK: .msh 4.1 files through felab's own reader; nothing else. */
int fe_mesh_load(const char *path, const fe_load_opts *opts, fe_mesh **out)
{
  FE_ASSERT(path && out, FE_ERR_ARG, "mesh load: missing path or output");
  *out = NULL;
  if (!has_suffix(path, ".msh"))
    FE_ERROR(FE_ERR_UNAVAILABLE,
             "%s: reading or meshing this file needs the Gmsh SDK: this felab was built without "
             "it (install libgmsh-dev and rebuild); it reads .msh 4.1 files by itself",
             path);
  fe_load_opts o;
  fe_load_opts_default(&o);
  FE_CHECK(load_check(path, opts, &o));
  fe_progress_begin("msh", 0);
  fe_progress_phase("reading the file");
  fe_mesh_arrays a;
  int rc = fe_msh_read(path, o.order == 1, &a);
  if (!rc && o.order == 2 && arrays_order(&a) == 1)
    rc = fe_error_set(FE_ERR_UNAVAILABLE, __FILE__, __LINE__, __func__,
                      "%s: order = 2 of a first-order mesh needs the Gmsh SDK, which places the "
                      "new nodes: this felab was built without it (a second-order .msh loads as "
                      "it is)",
                      path);
  if (!rc) {
    fe_progress_phase("converting to felab's mesh");
    rc = fe_mesh_from_arrays(&a, out);
  }
  fe_msh_arrays_free(&a);
  fe_progress_end();
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}
#endif
