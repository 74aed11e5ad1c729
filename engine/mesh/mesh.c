/* felab meshes: cell types, tags, quality check, and the coloring of cell groups.
 * The box generator lives in mesh-box.c. */
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

static const char *const cell_names[] = {"tri", "quad", "tet", "hex", "prism"};
static const int cell_dims[] = {2, 2, 3, 3, 3};
static const int cell_nvertices[] = {3, 4, 4, 8, 6};
#define NCELL_TYPES 5

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

/* Whether m carries curved (second-order) geometry. */
static int mesh_curved(const fe_mesh *m)
{
  return m->geo_order == 2 && m->geo_cells && m->geo_coords;
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
  double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  for (int v = 0; v < m->nvertices; v++)
    for (int d = 0; d < 3; d++) {
      double x = m->coords[3 * (size_t)v + d];
      if (v == 0 || x < lo[d]) lo[d] = x;
      if (v == 0 || x > hi[d]) hi[d] = x;
    }
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

/* ----- geometry of the cells: the straight and the curved (second-order) map ----- */

/* Reference coordinates of the geometry nodes in Gmsh's order, for the complete second-order
 * types (checked against the SDK's localNodeCoord in test_gmsh.c); the first fe_cell_nvertices
 * rows are the vertices, so they serve the straight map too. tri, tet: vertices 0 and e_i;
 * quad, hex: [-1,1]^d; prism: the triangle times [-1,1], v0..v2 at z = -1. */
static const double tri6_nodes[6][3] = {{0, 0, 0},   {1, 0, 0},     {0, 1, 0},
                                        {0.5, 0, 0}, {0.5, 0.5, 0}, {0, 0.5, 0}};
static const double quad9_nodes[9][3] = {{-1, -1, 0}, {1, -1, 0}, {1, 1, 0}, {-1, 1, 0}, {0, -1, 0},
                                         {1, 0, 0},   {0, 1, 0},  {-1, 0, 0}, {0, 0, 0}};
static const double tet10_nodes[10][3] = {{0, 0, 0},   {1, 0, 0},     {0, 1, 0},   {0, 0, 1},
                                          {0.5, 0, 0}, {0.5, 0.5, 0}, {0, 0.5, 0}, {0, 0, 0.5},
                                          {0, 0.5, 0.5}, {0.5, 0, 0.5}};
static const double hex27_nodes[27][3] = {
    {-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1}, {-1, -1, 1}, {1, -1, 1}, {1, 1, 1},
    {-1, 1, 1},   {0, -1, -1}, {-1, 0, -1}, {-1, -1, 0}, {1, 0, -1}, {1, -1, 0}, {0, 1, -1},
    {1, 1, 0},    {-1, 1, 0},  {0, -1, 1},  {-1, 0, 1},  {1, 0, 1},  {0, 1, 1},  {0, 0, -1},
    {0, -1, 0},   {-1, 0, 0},  {1, 0, 0},   {0, 1, 0},   {0, 0, 1},  {0, 0, 0}};
static const double prism18_nodes[18][3] = {
    {0, 0, -1},   {1, 0, -1},   {0, 1, -1},     {0, 0, 1},   {1, 0, 1},   {0, 1, 1},
    {0.5, 0, -1}, {0, 0.5, -1}, {0, 0, 0},      {0.5, 0.5, -1}, {1, 0, 0}, {0, 1, 0},
    {0.5, 0, 1},  {0, 0.5, 1},  {0.5, 0.5, 1},  {0.5, 0, 0}, {0, 0.5, 0}, {0.5, 0.5, 0}};
static const int geo_nnodes2[] = {6, 9, 10, 27, 18}; /* by fe_cell_type */

/* Simplex nodes as pairs of barycentric coordinates: (i, i) the vertex i, with the quadratic
 * L_i (2 L_i - 1); (i, j) the midpoint of edge ij, with 4 L_i L_j. L_0 = 1 - sum xi. */
static const int tri6_pairs[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {1, 2}, {2, 0}};
static const int tet10_pairs[10][2] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {0, 1},
                                       {1, 2}, {2, 0}, {0, 3}, {2, 3}, {1, 3}};
/* Prism nodes: the triangle node (an index into tri6_pairs), the level z in {-1, 0, 1}. */
static const int prism18_tri[18] = {0, 1, 2, 0, 1, 2, 3, 5, 0, 4, 1, 2, 3, 5, 4, 3, 5, 4};

const double *fe_mesh_geo_nodes(fe_cell_type t, int order, int *n)
{
  static const double *const tables[] = {&tri6_nodes[0][0], &quad9_nodes[0][0],
                                         &tet10_nodes[0][0], &hex27_nodes[0][0],
                                         &prism18_nodes[0][0]};
  if ((unsigned)t >= NCELL_TYPES || (order != 1 && order != 2)) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = order == 2 ? geo_nnodes2[t] : cell_nvertices[t];
  return tables[t];
}

/* The 1D quadratic Lagrange function on the nodes -1, 0, 1 of node `level` at s, and its
 * derivative; order 1: the hat (1 + level s) / 2 on -1, 1. */
static void lagrange_1d(int order, int level, double s, double *v, double *dv)
{
  if (order == 1) {
    *v = 0.5 * (1 + level * s), *dv = 0.5 * level;
  } else if (level == 0) {
    *v = 1 - s * s, *dv = -2 * s;
  } else {
    *v = 0.5 * s * (s + level), *dv = s + 0.5 * level;
  }
}

/* Value and gradient of the simplex function of pair (i, j) from barycentrics L, dL. */
static void simplex_fn(int order, int i, int j, const double *L, const double (*dL)[3], int dim,
                       double *v, double *dv)
{
  if (order == 1) {
    *v = L[i];
    for (int d = 0; d < dim; d++) dv[d] = dL[i][d];
  } else if (i == j) {
    *v = L[i] * (2 * L[i] - 1);
    for (int d = 0; d < dim; d++) dv[d] = (4 * L[i] - 1) * dL[i][d];
  } else {
    *v = 4 * L[i] * L[j];
    for (int d = 0; d < dim; d++) dv[d] = 4 * (L[j] * dL[i][d] + L[i] * dL[j][d]);
  }
}

int fe_mesh_geo_shape(fe_cell_type t, int order, const double *xi, double *N, double *dN)
{
  int n;
  const double *ref = fe_mesh_geo_nodes(t, order, &n);
  if (!ref || !xi) return 0;
  const int dim = cell_dims[t];
  double L[4], dL[4][3] = {{0}};
  if (t == FE_CELL_TRI || t == FE_CELL_TET || t == FE_CELL_PRISM) {
    const int nb = t == FE_CELL_TET ? 3 : 2; /* barycentric axes (the prism's triangle) */
    L[0] = 1;
    for (int d = 0; d < nb; d++) {
      L[0] -= xi[d], L[d + 1] = xi[d];
      dL[0][d] = -1, dL[d + 1][d] = 1;
    }
  }
  double v, dv[3], g[3][2];
  for (int k = 0; k < n; k++) {
    double *dk = dN ? dN + (size_t)k * dim : dv;
    switch (t) {
    case FE_CELL_TRI:
      simplex_fn(order, tri6_pairs[k][0], tri6_pairs[k][1], L, dL, 2, &v, dk);
      break;
    case FE_CELL_TET:
      simplex_fn(order, tet10_pairs[k][0], tet10_pairs[k][1], L, dL, 3, &v, dk);
      break;
    case FE_CELL_PRISM: {
      const int *p = tri6_pairs[prism18_tri[k]];
      double tv, tdv[2], zv, zdv;
      simplex_fn(order, p[0], p[1], L, dL, 2, &tv, tdv);
      lagrange_1d(order, (int)ref[3 * k + 2], xi[2], &zv, &zdv);
      v = tv * zv;
      dk[0] = tdv[0] * zv, dk[1] = tdv[1] * zv, dk[2] = tv * zdv;
      break;
    }
    default: /* quad, hex: products of 1D functions */
      for (int d = 0; d < dim; d++) lagrange_1d(order, (int)ref[3 * k + d], xi[d], &g[d][0], &g[d][1]);
      v = 1;
      for (int d = 0; d < dim; d++) v *= g[d][0];
      for (int d = 0; d < dim; d++) {
        dk[d] = g[d][1];
        for (int e = 0; e < dim; e++)
          if (e != d) dk[d] *= g[e][0];
      }
    }
    if (N) N[k] = v;
  }
  return n;
}

int fe_mesh_geo_map(const fe_mesh *m, int cell, const double *xi, double x[3], double *J)
{
  FE_ASSERT(m && xi, FE_ERR_ARG, "mesh geometry map: missing mesh or reference point");
  FE_ASSERT(cell >= 0 && cell < m->ncells, FE_ERR_ARG,
            "mesh geometry map: cell %d is outside 0..%d", cell, m->ncells - 1);
  const int curved = mesh_curved(m), dim = m->dim;
  const int n = curved ? m->ngn : m->nvc;
  const int *c = curved ? m->geo_cells + (size_t)cell * n : m->cells + (size_t)cell * n;
  const double *X = curved ? m->geo_coords : m->coords;
  double N[27], dN[27 * 3];
  FE_ASSERT(fe_mesh_geo_shape(m->type, curved ? 2 : 1, xi, N, dN) == n, FE_ERR_MESH,
            "mesh geometry map: %d nodes per %s cell do not match its type", n,
            fe_cell_name(m->type));
  double y[3] = {0, 0, 0}, G[9] = {0};
  for (int k = 0; k < n; k++) {
    const double *p = X + 3 * (size_t)c[k], *g = dN + k * dim;
    for (int d = 0; d < 3; d++) y[d] += N[k] * p[d];
    for (int d = 0; d < dim; d++)
      for (int i = 0; i < dim; i++) G[d * dim + i] += p[d] * g[i];
  }
  if (x) memcpy(x, y, sizeof y);
  if (J) memcpy(J, G, (size_t)dim * dim * sizeof(double));
  return 0;
}

/* Whether cell c's vertices lie where the map's linear part at the reference centroid `mid`
 * puts them: X[b] = x(mid) + J (xi_b - mid), to 1e-10 of the cell's size (and a few roundings
 * of its coordinates); ref: the vertices' reference coordinates. */
static int cell_affine(const fe_mesh *m, int c, const double *ref, const double *mid)
{
  const int nv = m->nvc, dim = m->dim;
  const int *v = m->cells + (size_t)c * nv;
  double xc[3], J[9];
  fe_mesh_geo_map(m, c, mid, xc, J); /* J[d * dim + i] = dx_d/dxi_i */
  double size = 0, scale = 0, err = 0;
  for (int b = 0; b < nv; b++) {
    const double *p = m->coords + 3 * (size_t)v[b];
    for (int d = 0; d < 3; d++) {
      double y = xc[d];
      if (d < dim) /* a 2D mesh's z is 0 */
        for (int i = 0; i < dim; i++) y += J[d * dim + i] * (ref[3 * b + i] - mid[i]);
      size = fmax(size, fabs(p[d] - xc[d]));
      scale = fmax(scale, fabs(p[d]));
      err = fmax(err, fabs(p[d] - y));
    }
  }
  return err <= 1e-10 * size + 16 * DBL_EPSILON * scale;
}

int fe_mesh_affine(const fe_mesh *m)
{
  if (!m || mesh_curved(m) || m->ncells == 0) return 0;
  if (m->affine) return m->affine > 0;
  int yes = 1;
  if (m->type != FE_CELL_TRI && m->type != FE_CELL_TET) {
    int nv;
    const double *ref = fe_mesh_geo_nodes(m->type, 1, &nv);
    double mid[3] = {0, 0, 0};
    for (int b = 0; b < nv; b++)
      for (int i = 0; i < 3; i++) mid[i] += ref[3 * b + i] / nv;
#pragma omp parallel for schedule(static) reduction(&& : yes)
    for (int c = 0; c < m->ncells; c++)
      if (yes && !cell_affine(m, c, ref, mid)) yes = 0;
  }
  ((fe_mesh *)m)->affine = yes ? 1 : -1; /* the answer kept: see fe_mesh.affine */
  return yes;
}

/* ---- classes of congruent cells ---- */

enum { CLASS_SLOTS = 4 * FE_MESH_MAX_CLASSES }; /* a power of two */

/* Classes found by one thread (or the merged ones): each class's key (its edge vectors
 * rounded to multiples of the tolerance) and first cell, and an open-addressing index. */
typedef struct class_table {
  int n;
  long long key[FE_MESH_MAX_CLASSES][9];
  int first[FE_MESH_MAX_CLASSES];
  int slot[CLASS_SLOTS]; /* class + 1, 0: empty */
} class_table;

typedef struct class_shape {
  int nvc, dim, axis[3]; /* the vertex one reference edge from vertex 0 along xi_k */
  double inv;            /* 1 / the tolerance */
} class_shape;

/* The edge vectors in units of the tolerance, rounded to the nearest integer without a branch
 * (adding and taking away 1.5 x 2^52 leaves an integer; |e| <= 2^44 here): the signs vary from
 * cell to cell, and a branch on them mispredicted half the time (4x slower). */
static inline void class_key(const fe_mesh *m, const class_shape *s, int c, long long *k)
{
  const volatile double magic = 6755399441055744.0; /* volatile: kept through the optimizer */
  const double round = magic;
  const int *v = m->cells + (size_t)c * s->nvc;
  const double *x0 = m->coords + 3 * (size_t)v[0];
  for (int i = 3 * s->dim; i < 9; i++) k[i] = 0;
  for (int a = 0; a < s->dim; a++) {
    const double *x = m->coords + 3 * (size_t)v[s->axis[a]];
    for (int d = 0; d < 3; d++) k[3 * a + d] = (long long)(((x[d] - x0[d]) * s->inv + round) - round);
  }
}

static inline int same_key(const long long *a, const long long *b)
{
  int same = 1;
  for (int i = 0; i < 9; i++) same &= a[i] == b[i];
  return same;
}

/* The class of key k in t, added with first cell c when new; -1 when t is full. */
static int class_find(class_table *t, const long long *k, int c)
{
  static const uint64_t mult[9] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                                   0x165667b19e3779f9ull, 0xd6e8feb86659fd93ull,
                                   0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull,
                                   0x94d049bb133111ebull, 0xbf58476d1ce4e5b9ull,
                                   0x2545f4914f6cdd1dull}; /* independent products: no chain */
  uint64_t h = 0;
  for (int i = 0; i < 9; i++) h += (uint64_t)k[i] * mult[i];
  for (size_t j = (h >> 40) & (CLASS_SLOTS - 1);; j = (j + 1) & (CLASS_SLOTS - 1)) {
    int id = t->slot[j] - 1;
    if (id < 0) break;
    if (same_key(t->key[id], k)) return id;
  }
  if (t->n == FE_MESH_MAX_CLASSES) return -1;
  const int id = t->n++;
  memcpy(t->key[id], k, sizeof t->key[id]);
  t->first[id] = c;
  for (size_t j = (h >> 40) & (CLASS_SLOTS - 1);; j = (j + 1) & (CLASS_SLOTS - 1))
    if (!t->slot[j]) {
      t->slot[j] = id + 1;
      break;
    }
  return id;
}

/* Every thread keys its static range of cells into its own table, writing its own class
 * numbers; the tables are merged in thread order (so classes are numbered by their first
 * cell, whatever the team), and each range is renumbered where its numbers differ. */
static fe_mesh_classes *find_classes(const fe_mesh *m, const class_shape *s)
{
  const int nt = omp_get_max_threads();
  class_table *tab = calloc((size_t)nt + 1, sizeof *tab);
  unsigned short *of = fe_malloc((size_t)m->ncells * sizeof *of + 1, "each cell's class");
  unsigned short(*renum)[FE_MESH_MAX_CLASSES] = calloc((size_t)nt, sizeof *renum);
  int *same = calloc((size_t)nt, sizeof *same);
  if (!tab || !of || !renum || !same) {
    free(tab), free(of), free(renum), free(same);
    fe_error_clear();
    return NULL;
  }
  class_table *all = &tab[nt];
  int full = 0;
#pragma omp parallel num_threads(nt)
  {
    class_table *t = &tab[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (int c = 0; c < m->ncells; c++) {
      int stop;
#pragma omp atomic read
      stop = full;
      if (stop) continue;
      long long k[9];
      class_key(m, s, c, k);
      int id = class_find(t, k, c);
      if (id >= 0) of[c] = (unsigned short)id;
      else
#pragma omp atomic write
        full = 1; /* any thread's table full stops every thread */
    }
#pragma omp single
    for (int i = 0; i < nt && !full; i++) {
      same[i] = 1;
      for (int j = 0; j < tab[i].n && !full; j++) {
        int id = class_find(all, tab[i].key[j], tab[i].first[j]);
        if (id < 0) full = 1;
        renum[i][j] = (unsigned short)id;
        same[i] = same[i] && id == j;
      }
    }
    const int me = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int c = 0; c < m->ncells; c++)
      if (!full && !same[me]) of[c] = renum[me][of[c]];
  }
  fe_mesh_classes *k = NULL;
  if (!full && (double)all->n * 16 <= m->ncells && (k = calloc(1, sizeof *k)) &&
      (k->rep = malloc(sizeof(int) * (size_t)all->n))) {
    k->n = all->n, k->of = of, of = NULL;
    memcpy(k->rep, all->first, sizeof(int) * (size_t)all->n);
  } else if (k) {
    free(k), k = NULL;
  }
  free(tab), free(of), free(renum), free(same);
  return k;
}

const fe_mesh_classes *fe_mesh_congruent(const fe_mesh *m)
{
  if (!m || m->classes_known) return m ? m->classes : NULL;
  fe_mesh *w = (fe_mesh *)m; /* the answer kept, as fe_mesh_affine keeps its own */
  w->classes_known = 1;
  if (!fe_mesh_affine(m)) return NULL;
  int nv;
  const double *ref = fe_mesh_geo_nodes(m->type, 1, &nv);
  class_shape s = {m->nvc, m->dim, {0, 0, 0}, 0};
  for (int k = 0; k < s.dim; k++) { /* the vertex along reference axis k from vertex 0 */
    int found = -1;
    for (int b = 1; b < nv && found < 0; b++) {
      int along = ref[3 * b + k] != ref[k];
      for (int e = 0; e < s.dim; e++) along = along && (e == k || ref[3 * b + e] == ref[e]);
      if (along) found = b;
    }
    if (found < 0) return NULL;
    s.axis[k] = found;
  }
  double big = 0;
#pragma omp parallel for schedule(static) reduction(max : big)
  for (size_t i = 0; i < 3 * (size_t)m->nvertices; i++)
    big = fmax(big, fabs(m->coords[i]));
  if (!(big > 0) || !isfinite(big)) return NULL;
  s.inv = 1 / ldexp(big, -44);
  w->classes = find_classes(m, &s);
  return w->classes;
}

void fe_mesh_forget_classes(fe_mesh *m)
{
  if (m->classes) free(m->classes->rep), free(m->classes->of), free(m->classes);
  m->classes = NULL, m->classes_known = 0;
  memset(m->cubes, 0, sizeof m->cubes);
}

int fe_mesh_geo_values(const fe_mesh *m, const double *vertex_values, double **out)
{
  FE_ASSERT(m && vertex_values && out, FE_ERR_ARG, "mesh geometry values: missing argument");
  *out = NULL;
  const int curved = mesh_curved(m);
  const size_t n = (size_t)(curved ? m->ngeo_nodes : m->nvertices);
  double *v;
  FE_MALLOC(v, n + 1, "values at the geometry nodes");
  memcpy(v, vertex_values, (size_t)m->nvertices * sizeof(double));
  if (curved) {
    const double *ref = fe_mesh_geo_nodes(m->type, 2, NULL);
    double N[8];
    for (int e = 0; e < m->ncells; e++) {
      const int *g = m->geo_cells + (size_t)e * m->ngn, *c = m->cells + (size_t)e * m->nvc;
      for (int k = m->nvc; k < m->ngn; k++) { /* the straight interpolant at the node */
        fe_mesh_geo_shape(m->type, 1, ref + 3 * k, N, NULL);
        double s = 0;
        for (int j = 0; j < m->nvc; j++) s += N[j] * vertex_values[c[j]];
        v[g[k]] = s;
      }
    }
  }
  *out = v;
  return 0;
}

/* Determinant of the dim x dim matrix J (row-major). */
static double det_dim(const double *J, int dim)
{
  if (dim == 2) return J[0] * J[3] - J[1] * J[2];
  return J[0] * (J[4] * J[8] - J[5] * J[7]) - J[1] * (J[3] * J[8] - J[5] * J[6]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* The curved arrays agree with the vertices, and every cell's second-order map has a
 * positive Jacobian determinant at each of its nodes (necessary, not sufficient, for an
 * invertible map; the same test Gmsh's own validity check starts from). */
static int check_curved(const fe_mesh *m)
{
  static const char *const names2[] = {"tri6", "quad9", "tet10", "hex27", "prism18"};
  const char *name = names2[m->type];
  FE_ASSERT(m->ngn == geo_nnodes2[m->type], FE_ERR_MESH,
            "curved mesh has %d nodes per cell, but %s cells have %d", m->ngn, name,
            geo_nnodes2[m->type]);
  FE_ASSERT(m->ngeo_nodes >= m->nvertices, FE_ERR_MESH,
            "curved mesh has %d geometry nodes, fewer than its %d vertices", m->ngeo_nodes,
            m->nvertices);
  for (size_t k = 0; k < 3 * (size_t)m->nvertices; k++)
    if (m->geo_coords[k] != m->coords[k])
      FE_ERROR(FE_ERR_MESH, "curved mesh: geometry node %zu is not at its vertex", k / 3);
  const double *ref = fe_mesh_geo_nodes(m->type, 2, NULL);
  const int dim = m->dim;
  for (int e = 0; e < m->ncells; e++) {
    const int *g = m->geo_cells + (size_t)e * m->ngn, *c = m->cells + (size_t)e * m->nvc;
    for (int k = 0; k < m->ngn; k++) {
      const int ok = k < m->nvc ? g[k] == c[k] : g[k] >= m->nvertices && g[k] < m->ngeo_nodes;
      if (!ok)
        FE_ERROR(FE_ERR_MESH, "cell %d (%s) has geometry node %d at its node %d, %s", e, name,
                 g[k], k,
                 k < m->nvc ? "not its vertex" : "outside the second-order nodes of the mesh");
    }
    double h = 0; /* the cell's size, for a scale-free test */
    for (int k = 1; k < m->nvc; k++) {
      double s = 0;
      for (int d = 0; d < 3; d++) {
        double t = m->coords[3 * (size_t)c[k] + d] - m->coords[3 * (size_t)c[0] + d];
        s += t * t;
      }
      h = s > h ? s : h;
    }
    const double scale = dim == 2 ? h : h * sqrt(h);
    for (int k = 0; k < m->ngn; k++) {
      double J[9];
      FE_CHECK(fe_mesh_geo_map(m, e, ref + 3 * k, NULL, J));
      const double det = det_dim(J, dim);
      if (det > 1e-12 * scale) continue;
      FE_ERROR(FE_ERR_MESH,
               "cell %d (%s) is %s: the Jacobian determinant of its curved map is %.3g at its "
               "node %d",
               e, name, det < -1e-12 * scale ? "inverted" : "degenerate", det, k);
    }
  }
  return 0;
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
  if (mesh_curved(m)) FE_CHECK(check_curved(m));
  return 0;
}

/* Greedy coloring of cell groups, first fit, over groups [g0, g1): each vertex keeps a 64-bit
 * set of the colors of the groups that touch it (used); a group's forbidden colors are the
 * union over its vertices, it takes the lowest free one, and the vertices then record it. Two
 * passes over the group's vertices, so the cost is linear in the connectivity. Returns the
 * first group that would need more than 64 colors, or -1. */
static int color_range(const int *cells, int nvc, int block, int ncells, int g0, int g1,
                       uint64_t *used, int *color)
{
  for (int g = g0; g < g1; g++) {
    const size_t first = (size_t)g * block * nvc;
    const size_t last = ((size_t)g + 1) * block < (size_t)ncells ? first + (size_t)block * nvc
                                                                  : (size_t)ncells * nvc;
    uint64_t forbidden = 0;
    for (size_t k = first; k < last; k++) forbidden |= used[cells[k]];
    if (forbidden == UINT64_MAX) return g;
    const int c = __builtin_ctzll(~forbidden); /* lowest free color */
    const uint64_t bit = (uint64_t)1 << c;
    for (size_t k = first; k < last; k++) used[cells[k]] |= bit;
    color[g] = c;
  }
  return -1;
}

/* Large meshes are colored in two halves at once, each first fit on masks of its own; then
 * the groups of the second half that touch a vertex of the first, in order, take the lowest
 * color free of both halves' groups at their vertices (a half's masks name each of its colors
 * at a vertex once, so a group's own bit can be taken out). Neither step depends on the
 * threads, so neither does the coloring. The ids in cells may be any non-negative numbers
 * (mesh vertices, or the nodes of a higher-order space). */
int fe_mesh_color_groups(const fe_mesh *m, const int *cells, int nvc, int block, int **color,
                         int *ncolors)
{
  FE_ASSERT(m && cells && color && ncolors, FE_ERR_ARG, "mesh coloring: missing argument");
  FE_ASSERT(nvc > 0, FE_ERR_ARG, "mesh coloring: %d vertices per cell must be positive", nvc);
  *color = NULL;
  *ncolors = 0;
  const size_t nentries = (size_t)m->ncells * nvc;
  int maxid = -1, minid = 0;
#pragma omp parallel for schedule(static) reduction(max : maxid) reduction(min : minid)
  for (size_t k = 0; k < nentries; k++) {
    maxid = cells[k] > maxid ? cells[k] : maxid;
    minid = cells[k] < minid ? cells[k] : minid;
  }
  for (size_t k = 0; minid < 0 && k < nentries; k++) /* the first negative id, named */
    if (cells[k] < 0)
      FE_ERROR(FE_ERR_ARG, "mesh coloring: cell %zu has a negative vertex id %d", k / nvc,
               cells[k]);
  return fe_mesh_color_groups_below(m, cells, nvc, maxid + 1, block, color, ncolors);
}

int fe_mesh_color_groups_below(const fe_mesh *m, const int *cells, int nvc, int nids, int block,
                               int **color, int *ncolors)
{
  FE_ASSERT(m && cells && color && ncolors, FE_ERR_ARG, "mesh coloring: missing argument");
  FE_ASSERT(block > 0, FE_ERR_ARG, "mesh coloring: block = %d must be positive", block);
  FE_ASSERT(nvc > 0, FE_ERR_ARG, "mesh coloring: %d vertices per cell must be positive", nvc);
  *color = NULL;
  *ncolors = 0;
  const size_t nentries = (size_t)m->ncells * nvc;
  const int maxid = nids - 1;
  const int ngroups = m->ncells / block + (m->ncells % block != 0);
  const int halves = ngroups >= 4096 ? 2 : 1, split = halves == 2 ? ngroups / 2 : ngroups;
  uint64_t *used[2] = {NULL, NULL}; /* per vertex: colors of a half's groups touching it */
  int *group_color = fe_malloc((size_t)ngroups * sizeof(int) + 1, "group colors");
  for (int h = 0; h < halves; h++)
    used[h] = fe_calloc((size_t)maxid + 1, sizeof(uint64_t), "coloring vertex masks");
  if (!group_color || !used[0] || (halves == 2 && !used[1])) {
    free(group_color), free(used[0]), free(used[1]);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  int full[2] = {-1, -1};
#pragma omp parallel for schedule(static, 1) num_threads(halves)
  for (int h = 0; h < halves; h++)
    full[h] = color_range(cells, nvc, block, m->ncells, h ? split : 0, h ? ngroups : split,
                          used[h], group_color);
  int bad = full[0] >= 0 ? full[0] : full[1];
  /* the first half's vertices, a bit each (a few cache lines a group's look-ups touch), then
   * the second half's groups touching one of them */
  const size_t nwords = ((size_t)maxid + 64) / 64;
  uint64_t *near =
      halves == 2 && bad < 0 ? fe_malloc(sizeof(uint64_t) * nwords, "coloring seam") : NULL;
  unsigned char *seam = near ? malloc((size_t)(ngroups - split) + 1) : NULL;
  if (halves == 2 && bad < 0 && !seam) {
    free(near), free(group_color), free(used[0]), free(used[1]);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the coloring");
  }
#pragma omp parallel if (seam)
  {
#pragma omp for schedule(static)
    for (size_t w = 0; w < (seam ? nwords : 0); w++) {
      uint64_t bits = 0;
      for (size_t v = w * 64; v < w * 64 + 64 && v <= (size_t)maxid; v++)
        bits |= (uint64_t)(used[0][v] != 0) << (v - w * 64);
      near[w] = bits;
    }
#pragma omp for schedule(static)
    for (int g = split; g < (seam ? ngroups : split); g++) {
      const size_t first = (size_t)g * block * nvc;
      const size_t last = g == ngroups - 1 ? nentries : first + (size_t)block * nvc;
      uint64_t at = 0;
      for (size_t k = first; k < last; k++) at |= near[cells[k] >> 6] >> (cells[k] & 63);
      seam[g - split] = (unsigned char)(at & 1);
    }
  }
  free(near);
  for (int g = split; seam && bad < 0 && g < ngroups; g++) {
    if (!seam[g - split]) continue;
    const size_t first = (size_t)g * block * nvc;
    const size_t last = g == ngroups - 1 ? nentries : first + (size_t)block * nvc;
    const uint64_t own = (uint64_t)1 << group_color[g];
    uint64_t forbidden = 0;
    for (size_t k = first; k < last; k++)
      forbidden |= used[0][cells[k]] | (used[1][cells[k]] & ~own);
    if (!(forbidden & own)) continue;
    if (forbidden == UINT64_MAX) {
      bad = g;
      break;
    }
    const uint64_t bit = (uint64_t)1 << __builtin_ctzll(~forbidden);
    for (size_t k = first; k < last; k++) used[1][cells[k]] = (used[1][cells[k]] & ~own) | bit;
    group_color[g] = __builtin_ctzll(bit);
  }
  free(seam);
  free(used[0]), free(used[1]);
  if (bad >= 0) {
    free(group_color);
    const size_t first_cell = (size_t)bad * block;
    const size_t end_cell = bad == ngroups - 1 ? (size_t)m->ncells : first_cell + block;
    FE_ERROR(FE_ERR_MESH,
             "mesh coloring: group %d (cells %zu..%zu) needs more than 64 colors; use a "
             "smaller block or atomics",
             bad, first_cell, end_cell - 1);
  }
  int maxcolor = -1;
  for (int g = 0; g < ngroups; g++)
    maxcolor = group_color[g] > maxcolor ? group_color[g] : maxcolor;
  *color = group_color;
  *ncolors = maxcolor + 1;
  return 0;
}
