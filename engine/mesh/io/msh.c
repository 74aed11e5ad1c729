/* felab .msh 4.1 writer (the format of Gmsh 4, which opens the file with its views). Written
 * by hand so that it works in builds without the Gmsh SDK. A curved mesh is written with its
 * second-order cells (tri6 quad9 tet10 hex27 prism18: felab keeps Gmsh's node order) on all
 * its geometry nodes, the views extended to them by each cell's straight interpolant; the
 * boundary facets stay first order. */
#include "engine/mesh/io/msh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"

/* Gmsh element type numbers of the cell types (curved: their complete second-order types),
 * and of their facets. */
static int gmsh_type(fe_cell_type t, int curved)
{
  static const int types[] = {2, 3, 4, 5, 6};     /* tri quad tet hex prism */
  static const int types2[] = {9, 10, 11, 12, 13}; /* tri6 quad9 tet10 hex27 prism18 */
  return curved ? types2[t] : types[t];
}

/* The Gmsh type of facet e: lines in 2D; in 3D triangles, quads, or the triangles of prism
 * meshes stored as quads with a repeated last vertex (a, b, c, c). */
static int gmsh_facet_type(const fe_mesh *m, int e)
{
  if (m->dim == 2) return 1;
  if (m->nvf == 3) return 2;
  const int *f = m->facets + (size_t)e * 4;
  return f[3] == f[2] ? 2 : 3;
}

static int gmsh_type_nodes(int type) { return type == 1 ? 2 : type == 2 ? 3 : 4; }

/* The mesh's bounding box, for the entities. */
static void bounding_box(const fe_mesh *m, double lo[3], double hi[3])
{
  for (int d = 0; d < 3; d++) lo[d] = hi[d] = m->nvertices ? m->coords[d] : 0;
  for (int v = 0; v < m->nvertices; v++)
    for (int d = 0; d < 3; d++) {
      double x = m->coords[3 * (size_t)v + d];
      if (x < lo[d]) lo[d] = x;
      if (x > hi[d]) hi[d] = x;
    }
}

/* Count of tags of one dimension. */
static int count_tags(const fe_mesh *m, int dim)
{
  int n = 0;
  for (int t = 0; t < m->ntags; t++) n += m->tags[t].dim == dim;
  return n;
}

/* $Entities: a point-free description, one entity per tag, each its own physical group. */
static void write_entities(FILE *f, const fe_mesh *m)
{
  double lo[3], hi[3];
  bounding_box(m, lo, hi);
  int nb = count_tags(m, m->dim - 1), nr = count_tags(m, m->dim);
  int counts[4] = {0, 0, 0, 0};
  counts[m->dim - 1] = nb;
  counts[m->dim] = nr;
  fprintf(f, "$Entities\n%d %d %d %d\n", counts[0], counts[1], counts[2], counts[3]);
  for (int dim = m->dim - 1; dim <= m->dim; dim++)
    for (int t = 0; t < m->ntags; t++) {
      if (m->tags[t].dim != dim) continue;
      fprintf(f, "%d %.17g %.17g %.17g %.17g %.17g %.17g 1 %d 0\n", m->tags[t].id, lo[0], lo[1],
              lo[2], hi[0], hi[1], hi[2], m->tags[t].id);
    }
  fprintf(f, "$EndEntities\n");
}

/* The first region's id: the entity that holds every node. */
static int first_region(const fe_mesh *m)
{
  for (int t = 0; t < m->ntags; t++)
    if (m->tags[t].dim == m->dim) return m->tags[t].id;
  return 1;
}

int fe_msh_write(const char *path, const fe_mesh *m, int nviews, const fe_msh_view *views)
{
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  const int nnodes = curved ? m->ngeo_nodes : m->nvertices, npc = curved ? m->ngn : m->nvc;
  const double *xyz = curved ? m->geo_coords : m->coords;
  const int *cells = curved ? m->geo_cells : m->cells;
  FILE *f = fopen(path, "w");
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  fprintf(f, "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n");
  fprintf(f, "$PhysicalNames\n%d\n", count_tags(m, m->dim - 1) + count_tags(m, m->dim));
  for (int t = 0; t < m->ntags; t++)
    if (m->tags[t].dim >= m->dim - 1)
      fprintf(f, "%d %d \"%s\"\n", m->tags[t].dim, m->tags[t].id, m->tags[t].name);
  fprintf(f, "$EndPhysicalNames\n");
  write_entities(f, m);
  /* nodes: one block on the first region; tags are 1-based */
  fprintf(f, "$Nodes\n1 %d 1 %d\n%d %d 0 %d\n", nnodes, nnodes, m->dim, first_region(m),
          nnodes);
  for (int v = 0; v < nnodes; v++) fprintf(f, "%d\n", v + 1);
  for (int v = 0; v < nnodes; v++)
    fprintf(f, "%.17g %.17g %.17g\n", xyz[3 * (size_t)v], xyz[3 * (size_t)v + 1],
            xyz[3 * (size_t)v + 2]);
  fprintf(f, "$EndNodes\n");
  /* elements: one block per region of cells, one per (boundary tag, facet type) */
  int nblocks = count_tags(m, m->dim);
  for (int t = 0; t < m->ntags; t++)
    if (m->tags[t].dim == m->dim - 1)
      for (int type = 1; type <= 3; type++) {
        int any = 0;
        for (int e = 0; e < m->nfacets && !any; e++)
          any = m->facet_tags[e] == m->tags[t].id && gmsh_facet_type(m, e) == type;
        nblocks += any;
      }
  long long nel = (long long)m->ncells + m->nfacets, tag = 1;
  fprintf(f, "$Elements\n%d %lld 1 %lld\n", nblocks, nel, nel);
  for (int t = 0; t < m->ntags; t++) {
    if (m->tags[t].dim != m->dim) continue;
    int count = 0;
    for (int c = 0; c < m->ncells; c++) count += m->cell_tags[c] == m->tags[t].id;
    fprintf(f, "%d %d %d %d\n", m->dim, m->tags[t].id, gmsh_type(m->type, curved), count);
    for (int c = 0; c < m->ncells; c++) {
      if (m->cell_tags[c] != m->tags[t].id) continue;
      fprintf(f, "%lld", tag++);
      for (int k = 0; k < npc; k++) fprintf(f, " %d", cells[(size_t)c * npc + k] + 1);
      fputc('\n', f);
    }
  }
  for (int t = 0; t < m->ntags; t++) {
    if (m->tags[t].dim != m->dim - 1) continue;
    for (int type = 1; type <= 3; type++) {
      int count = 0;
      for (int e = 0; e < m->nfacets; e++)
        count += m->facet_tags[e] == m->tags[t].id && gmsh_facet_type(m, e) == type;
      if (!count) continue;
      fprintf(f, "%d %d %d %d\n", m->dim - 1, m->tags[t].id, type, count);
      for (int e = 0; e < m->nfacets; e++) {
        if (m->facet_tags[e] != m->tags[t].id || gmsh_facet_type(m, e) != type) continue;
        fprintf(f, "%lld", tag++);
        for (int k = 0; k < gmsh_type_nodes(type); k++)
          fprintf(f, " %d", m->facets[(size_t)e * m->nvf + k] + 1);
        fputc('\n', f);
      }
    }
  }
  fprintf(f, "$EndElements\n");
  for (int i = 0; i < nviews; i++) {
    double *all = NULL;
    if (curved && fe_mesh_geo_values(m, views[i].values, &all)) {
      fclose(f);
      return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
    }
    const double *val = curved ? all : views[i].values;
    fprintf(f, "$NodeData\n1\n\"%s\"\n1\n0\n3\n0\n1\n%d\n", views[i].name, nnodes);
    for (int v = 0; v < nnodes; v++) fprintf(f, "%d %.17g\n", v + 1, val[v]);
    fprintf(f, "$EndNodeData\n");
    free(all);
  }
  int bad = ferror(f);
  if (fclose(f) || bad) FE_ERROR(FE_ERR_IO, "writing %s failed: %s", path, strerror(errno));
  return 0;
}
