/* felab meshes: cell types, tags, the summary and the quality check. The cells' geometry (the
 * straight and curved maps, congruent cells) lives in mesh-geo.c, the coloring of cell groups
 * in mesh-color.c, the box generator in mesh-box.c. */
#include "engine/mesh/mesh.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh-private.h"

static const char *const cell_names[] = {"tri", "quad", "tet", "hex", "prism"};
static const int cell_dims[] = {2, 2, 3, 3, 3};
static const int cell_nvertices[] = {3, 4, 4, 8, 6};

/* The short name of a cell type ("tet"), "unknown" for a bad value. */
const char *fe_cell_name(fe_cell_type t)
{
  return (unsigned)t < NCELL_TYPES ? cell_names[t] : "unknown";
}

/* A cell type from its name; an unknown name is an error listing the known ones. */
int fe_cell_parse(const char *s, fe_cell_type *t)
{
  for (int i = 0; s && i < NCELL_TYPES; i++)
    if (!strcmp(s, cell_names[i])) {
      *t = (fe_cell_type)i;
      return 0;
    }
  FE_ERROR(FE_ERR_ARG, "unknown cell type '%s' (tri quad tet hex prism)", s ? s : "(null)");
}

/* Dimension of a cell type (2 or 3). */
int fe_cell_dim(fe_cell_type t) { return (unsigned)t < NCELL_TYPES ? cell_dims[t] : 0; }

/* Number of vertices of a linear cell of this type. */
int fe_cell_nvertices(fe_cell_type t)
{
  return (unsigned)t < NCELL_TYPES ? cell_nvertices[t] : 0;
}

/* Free a mesh and all its arrays; NULL is fine. */
void fe_mesh_free(fe_mesh *m)
{
  if (!m) return;
  free(m->coords);
  free(m->cells);
  free(m->cell_tags);
  free(m->facets);
  free(m->facet_tags);
  free(m->tags);
  free(m->geo_cells);
  free(m->geo_coords);
  fe_mesh_forget_classes(m);
  free(m);
}

/* Append printf-style text at *len in buf (size n), never overflowing; keeps *len <= n. */
static void buf_add(char *buf, size_t n, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void buf_add(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
  if (*len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (w > 0) *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

void fe_mesh_extent(const fe_mesh *m, double lo[3], double hi[3])
{
  for (int d = 0; d < 3; d++) lo[d] = hi[d] = 0;
  for (int v = 0; v < m->nvertices; v++)
    for (int d = 0; d < 3; d++) {
      const double x = m->coords[3 * (size_t)v + d];
      if (v == 0 || x < lo[d]) lo[d] = x;
      if (v == 0 || x > hi[d]) hi[d] = x;
    }
}

/* Counts, bounding box, boundary tags and regions, a few lines into buf. */
void fe_mesh_summary(const fe_mesh *m, char *buf, size_t n)
{
  size_t len = 0;
  if (!buf || n == 0) return;
  buf[0] = '\0';
  if (!m) {
    buf_add(buf, n, &len, "mesh: (none)\n");
    return;
  }
  buf_add(buf, n, &len, "mesh: %d %s cells, %d vertices, dim %d", m->ncells,
          fe_cell_name(m->type), m->nvertices, m->dim);
  if (mesh_curved(m))
    buf_add(buf, n, &len, ", curved (order 2), %d geometry nodes", m->ngeo_nodes);
  buf_add(buf, n, &len, "\n");
  double lo[3], hi[3];
  fe_mesh_extent(m, lo, hi);
  buf_add(buf, n, &len, "  bounding box [%g,%g] x [%g,%g]", lo[0], hi[0], lo[1], hi[1]);
  if (m->dim == 3) buf_add(buf, n, &len, " x [%g,%g]", lo[2], hi[2]);
  buf_add(buf, n, &len, "\n  boundary tags (%d facets):", m->nfacets);
  for (int t = 0; t < m->ntags; t++)
    if (m->tags[t].dim == m->dim - 1)
      buf_add(buf, n, &len, " %s(%d)", m->tags[t].name, m->tags[t].id);
  buf_add(buf, n, &len, "\n  regions:");
  for (int t = 0; t < m->ntags; t++)
    if (m->tags[t].dim == m->dim) buf_add(buf, n, &len, " %s(%d)", m->tags[t].name, m->tags[t].id);
  buf_add(buf, n, &len, "\n");
}

/* The id of a named tag of dimension dim (dim < 0: any); the error lists what exists. */
int fe_mesh_tag_id(const fe_mesh *m, const char *name, int dim, int *id)
{
  FE_ASSERT(m && name && id, FE_ERR_ARG, "mesh tag lookup: missing mesh, name or output");
  for (int t = 0; t < m->ntags; t++)
    if ((dim < 0 || m->tags[t].dim == dim) && !strcmp(m->tags[t].name, name)) {
      *id = m->tags[t].id;
      return 0;
    }
  /* a physical group's number, written as a name ("3") */
  char *end;
  long num = strtol(name, &end, 10);
  if (*name && !*end)
    for (int t = 0; t < m->ntags; t++)
      if ((dim < 0 || m->tags[t].dim == dim) && m->tags[t].id == num) {
        *id = m->tags[t].id;
        return 0;
      }
  char known[1024];
  size_t len = 0;
  known[0] = '\0';
  for (int t = 0; t < m->ntags; t++)
    if (dim < 0 || m->tags[t].dim == dim)
      buf_add(known, sizeof known, &len, "%s%s", len ? ", " : "", m->tags[t].name);
  const char *what = dim == m->dim ? "region" : dim == m->dim - 1 ? "boundary tag" : "tag";
  const char *list = dim == m->dim ? "regions" : "tags";
  FE_ERROR(FE_ERR_ARG, "no %s '%s' in this mesh (%s: %s)", what, name, list,
           len ? known : "none");
}

/* Sorted unique vertices of the facets tagged id (id < 0: all boundary facets). */
int fe_mesh_tag_vertices(const fe_mesh *m, int id, int **verts, int *n)
{
  FE_ASSERT(m && verts && n, FE_ERR_ARG, "mesh tag vertices: missing mesh or output");
  *verts = NULL;
  *n = 0;
  if (id >= 0) {
    int known = 0;
    for (int t = 0; t < m->ntags; t++) known |= m->tags[t].dim == m->dim - 1 && m->tags[t].id == id;
    FE_ASSERT(known, FE_ERR_ARG, "no boundary tag with id %d in this mesh", id);
  }
  /* Mark the vertices, then collect them in increasing order: sorted and unique. */
  unsigned char *mark;
  FE_CALLOC(mark, m->nvertices, "boundary vertex marks");
  int count = 0;
  for (int f = 0; f < m->nfacets; f++) {
    if (id >= 0 && m->facet_tags[f] != id) continue;
    for (int k = 0; k < m->nvf; k++) {
      int v = m->facets[(size_t)f * m->nvf + k];
      if (v < 0 || v >= m->nvertices) {
        free(mark);
        FE_ERROR(FE_ERR_MESH, "facet %d has vertex %d, outside 0..%d", f, v, m->nvertices - 1);
      }
      count += !mark[v];
      mark[v] = 1;
    }
  }
  int *list = fe_malloc((size_t)count * sizeof(int), "boundary vertex list");
  if (!list) {
    free(mark);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int v = 0, k = 0; v < m->nvertices; v++)
    if (mark[v]) list[k++] = v;
  free(mark);
  *verts = list;
  *n = count;
  return 0;
}

/* Determinant of the 3x3 matrix with columns a, b, c. */
static double det3(const double *a, const double *b, const double *c)
{
  return a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
         a[2] * (b[0] * c[1] - b[1] * c[0]);
}

/* Euclidean length of a 3-vector. */
static double norm3(const double *a) { return sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]); }

/* Corners of tensor cells: each row is a corner, then its neighbours along xi, eta, zeta.
 * An edge from a corner points to -s_d along axis d (s = the corner's reference signs), so
 * det(edges) = sign * 2^dim * det J with sign = -sx sy sz (hex) or sx sy (quad). */
static const int hex_corner_edges[8][4] = {
    {0, 1, 3, 4}, {1, 0, 2, 5}, {2, 3, 1, 6}, {3, 2, 0, 7},
    {4, 5, 7, 0}, {5, 4, 6, 1}, {6, 7, 5, 2}, {7, 6, 4, 3},
};
static const int hex_corner_sign[8] = {1, -1, 1, -1, -1, 1, -1, 1};
static const int quad_corner_edges[4][3] = {{0, 1, 3}, {1, 0, 2}, {2, 3, 1}, {3, 2, 0}};
static const int quad_corner_sign[4] = {1, -1, 1, -1};

/* Edge determinant at corner q of a tensor or prism cell, oriented so that it has the sign of
 * the Jacobian there; *scale gets the product of the edge lengths. */
static double corner_det(fe_cell_type type, const double *const *x, int q, double *scale)
{
  double e[3][3];
  if (type == FE_CELL_QUAD) {
    for (int k = 0; k < 2; k++)
      for (int d = 0; d < 3; d++) e[k][d] = x[quad_corner_edges[q][k + 1]][d] - x[q][d];
    *scale = norm3(e[0]) * norm3(e[1]);
    return quad_corner_sign[q] * (e[0][0] * e[1][1] - e[0][1] * e[1][0]);
  }
  if (type == FE_CELL_HEX) {
    for (int k = 0; k < 3; k++)
      for (int d = 0; d < 3; d++) e[k][d] = x[hex_corner_edges[q][k + 1]][d] - x[q][d];
    *scale = norm3(e[0]) * norm3(e[1]) * norm3(e[2]);
    return hex_corner_sign[q] * det3(e[0], e[1], e[2]);
  }
  /* prism: the triangle's edges on the corner's level, and the vertical edge upwards */
  int level = q < 3 ? 0 : 3, other = q < 3 ? q + 3 : q - 3;
  for (int d = 0; d < 3; d++) {
    e[0][d] = x[level + 1][d] - x[level][d];
    e[1][d] = x[level + 2][d] - x[level][d];
    e[2][d] = (q < 3 ? 1 : -1) * (x[other][d] - x[q][d]);
  }
  *scale = norm3(e[0]) * norm3(e[1]) * norm3(e[2]);
  return det3(e[0], e[1], e[2]);
}

/* Signed measure test of one cell. Returns 0 when valid, 1 when inverted, 2 when degenerate
 * (|det| below 1e-12 of the product of the edge lengths). *value: the signed volume (area)
 * of a simplex, or for other cells the worst corner's Jacobian determinant, at *corner. */
static int cell_measure(const fe_mesh *m, const int *c, double *value, int *corner)
{
  const double *x[8];
  for (int v = 0; v < m->nvc; v++) x[v] = m->coords + 3 * (size_t)c[v];
  double det = 0, scale = 0;
  *corner = -1;
  if (m->type == FE_CELL_TRI || m->type == FE_CELL_TET) {
    double e[3][3];
    int nd = m->dim;
    for (int k = 0; k < nd; k++)
      for (int d = 0; d < 3; d++) e[k][d] = x[k + 1][d] - x[0][d];
    if (nd == 2) {
      det = e[0][0] * e[1][1] - e[0][1] * e[1][0];
      scale = norm3(e[0]) * norm3(e[1]);
      *value = det / 2;
    } else {
      det = det3(e[0], e[1], e[2]);
      scale = norm3(e[0]) * norm3(e[1]) * norm3(e[2]);
      *value = det / 6;
    }
  } else { /* the Jacobian must be positive at every corner; keep the worst one */
    double worst_rel = INFINITY;
    for (int q = 0; q < m->nvc; q++) {
      double sq, dq = corner_det(m->type, x, q, &sq);
      double rel = sq > 0 ? dq / sq : 0; /* coincident vertices: degenerate */
      if (rel < worst_rel) worst_rel = rel, det = dq, scale = sq, *corner = q;
    }
    /* edges span 2 reference units along [-1,1] axes: det = 2^k det J */
    *value = det / (m->type == FE_CELL_HEX ? 8 : m->type == FE_CELL_QUAD ? 4 : 2);
  }
  if (det > 1e-12 * scale) return 0;
  return det < -1e-12 * scale ? 1 : 2;
}

/* Every cell refers to real vertices and has a positive measure; else the first bad cell
 * is an FE_ERR_MESH error with its id. */
int fe_mesh_check(const fe_mesh *m)
{
  FE_ASSERT(m, FE_ERR_ARG, "mesh check: no mesh");
  FE_ASSERT(m->nvc == fe_cell_nvertices(m->type), FE_ERR_MESH,
            "mesh has %d vertices per cell, but %s cells have %d", m->nvc,
            fe_cell_name(m->type), fe_cell_nvertices(m->type));
  for (int e = 0; e < m->ncells; e++) {
    const int *c = m->cells + (size_t)e * m->nvc;
    for (int v = 0; v < m->nvc; v++)
      if (c[v] < 0 || c[v] >= m->nvertices)
        FE_ERROR(FE_ERR_MESH, "cell %d (%s) has vertex %d, outside 0..%d", e,
                 fe_cell_name(m->type), c[v], m->nvertices - 1);
    double value;
    int corner;
    int bad = cell_measure(m, c, &value, &corner);
    if (!bad) continue;
    const char *how = bad == 1 ? "inverted" : "degenerate";
    if (corner < 0)
      FE_ERROR(FE_ERR_MESH, "cell %d (%s) is %s: signed %s %.3g", e, fe_cell_name(m->type), how,
               m->dim == 3 ? "volume" : "area", value);
    FE_ERROR(FE_ERR_MESH, "cell %d (%s) is %s: Jacobian determinant %.3g at its vertex %d", e,
             fe_cell_name(m->type), how, value, corner);
  }
  if (mesh_curved(m)) FE_CHECK(mesh_check_curved(m));
  return 0;
}
