/* felab structured box meshes: nx x ny x nz cubes, each one hexahedron, six tetrahedra or two
 * prisms; or, in 2D (cells[2] == 0), nx x ny squares, each one quadrilateral or two triangles.
 *
 * Numbering (used by tests and by anyone who wants to find a vertex or a cell by hand):
 *   vertex (i, j, k), 0 <= i <= nx, ...:   v = i + (nx + 1) * (j + (ny + 1) * k)   (x fastest)
 *   cube   (i, j, k), 0 <= i < nx, ...:    c = i + nx * (j + ny * k)
 *   hex cells:  cell c is cube c;   tet cells: cells 6c .. 6c+5 are the tets of cube c;
 *   prism cells: cells 2c, 2c+1, the triangles (0, 1, 3) and (0, 3, 2) of the bottom square
 *   extruded along z (bottom triangle first, Gmsh order).
 * In 2D the same formulas hold with nz = 0 (one layer of vertices at z = 0): quad cell c is
 * square c, tri cells 2c, 2c+1 are (0, 1, 3) and (0, 3, 2), counter-clockwise.
 * Cube corners are numbered by their bits, corner q = bx + 2 by + 4 bz, so corner 0 is the
 * lower corner and corner 7 the upper one.
 *
 * Tets: the Kuhn (Freudenthal) subdivision. Each tet is a path 0 -> e_a -> e_a + e_b -> 7
 * along a permutation (a, b, c) of the axes; all six share the diagonal 0-7, and every cube
 * face is cut along the diagonal from its lowest to its highest corner, so neighbouring cubes
 * agree and the mesh is conforming. Odd permutations give negative orientation: those have
 * their vertices 1 and 2 swapped (see kuhn_tets).
 *
 * Boundary facets come face by face (xmin, xmax, ymin, ymax, zmin, zmax), oriented with the
 * outward normal by the right-hand rule; tet meshes cut each cube face into the two triangles
 * that the tets on it have, hex meshes use the quadrilateral. Prism meshes store facets of 4
 * vertices: quadrilaterals on the sides, and on zmin/zmax the triangles of the prisms with
 * their last vertex repeated (a, b, c, c). 2D boxes have edge facets: xmin, xmax, ymin, ymax,
 * oriented so that the domain lies to the left. */
#include "engine/mesh/mesh.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"

/* The six Kuhn tets of a cube, as cube corners, each positively oriented. */
static const int kuhn_tets[6][4] = {
    {0, 1, 3, 7}, /* x, y, z  (even) */
    {0, 2, 6, 7}, /* y, z, x  (even) */
    {0, 4, 5, 7}, /* z, x, y  (even) */
    {0, 5, 1, 7}, /* x, z, y  (odd: 1 and 5 swapped) */
    {0, 3, 2, 7}, /* y, x, z  (odd: 2 and 3 swapped) */
    {0, 6, 4, 7}, /* z, y, x  (odd: 4 and 6 swapped) */
};

/* The eight cube corners in Gmsh hexahedron order. */
static const int hex_corners[8] = {0, 1, 3, 2, 4, 5, 7, 6};

static const char *const axis_names[3] = {"x", "y", "z"};

/* One tet-split unit cube: cells 1 x 1 x 1, corners 0 and 1, no distortion. */
void fe_box_opts_default(fe_box_opts *o)
{
  memset(o, 0, sizeof *o);
  for (int d = 0; d < 3; d++) {
    o->cells[d] = 1;
    o->lower[d] = 0.0;
    o->upper[d] = 1.0;
  }
  o->type = FE_CELL_TET;
  o->distort = 0.0;
}

/* Check the options; on success fill the mesh sizes (cells, vertices, facets) in m. */
static int box_check(const fe_box_opts *o, fe_mesh *m)
{
  const int dim = fe_cell_dim(o->type);
  if (dim == 2 && o->cells[2] != 0)
    FE_ERROR(FE_ERR_ARG,
             "mesh.box: cell type '%s' is not supported yet (tet, hex) on a 3D box: 3D boxes "
             "take tet, hex or prism; tri and quad need a 2D box (cells[2] = 0)",
             fe_cell_name(o->type));
  if (dim != 2 && dim != 3)
    FE_ERROR(FE_ERR_ARG, "mesh.box: unknown cell type %d (tri, quad, tet, hex, prism)",
             (int)o->type);
  for (int d = 0; d < dim; d++) {
    if (o->cells[d] <= 0)
      FE_ERROR(FE_ERR_ARG,
               "mesh.box: cells[%d] = %d: the number of cells along %s must be positive", d,
               o->cells[d], axis_names[d]);
    if (!isfinite(o->lower[d]) || !isfinite(o->upper[d]) || !(o->upper[d] > o->lower[d]))
      FE_ERROR(FE_ERR_ARG,
               "mesh.box: upper[%d] = %g must be above lower[%d] = %g: the box is empty along %s",
               d, o->upper[d], d, o->lower[d], axis_names[d]);
  }
  if (!(o->distort >= 0.0 && o->distort <= 1.0))
    FE_ERROR(FE_ERR_ARG, "mesh.box: distort = %g must lie in [0, 1]", o->distort);

  /* Counts in double: exact below 2^53, and anything above INT_MAX is refused anyway. */
  double nx = o->cells[0], ny = o->cells[1], nz = o->cells[2];
  int per_cube = o->type == FE_CELL_TET ? 6 : o->type == FE_CELL_HEX || o->type == FE_CELL_QUAD ? 1 : 2;
  double ncells = per_cube * nx * ny * (dim == 3 ? nz : 1);
  double nvertices = (nx + 1) * (ny + 1) * (nz + 1);
  double nfacets = (o->type == FE_CELL_TET ? 4.0 : 2.0) * (nx * ny + ny * nz + nz * nx);
  if (o->type == FE_CELL_PRISM) nfacets = 4.0 * nx * ny + 2.0 * (ny * nz + nz * nx);
  if (dim == 2) nfacets = 2.0 * (nx + ny);
  if (ncells > INT_MAX || nvertices > INT_MAX || nfacets > INT_MAX)
    FE_ERROR(FE_ERR_ARG,
             "mesh.box: %d x %d x %d cubes make %.0f %s cells and %.0f vertices; a mesh holds at "
             "most %d of each",
             o->cells[0], o->cells[1], o->cells[2], ncells, fe_cell_name(o->type), nvertices,
             INT_MAX);
  /* its arrays (box_alloc's): coordinates, cells and regions, facets and tags */
  const int nvc = fe_cell_nvertices(o->type), nvf = dim == 2 ? 2 : o->type == FE_CELL_TET ? 3 : 4;
  const double bytes = 24.0 * nvertices + 4.0 * ncells * (nvc + 1) + 4.0 * nfacets * (nvf + 1);
  if (dim == 2)
    FE_CHECK(fe_memory_check((size_t)bytes, "mesh.box: %d x %d squares (%.0f %s cells, %.0f "
                             "vertices)", o->cells[0], o->cells[1], ncells, fe_cell_name(o->type),
                             nvertices));
  else
    FE_CHECK(fe_memory_check((size_t)bytes, "mesh.box: %d x %d x %d cubes (%.0f %s cells, %.0f "
                             "vertices)", o->cells[0], o->cells[1], o->cells[2], ncells,
                             fe_cell_name(o->type), nvertices));
  m->dim = dim;
  m->type = o->type;
  m->nvc = nvc;
  m->geo_order = 1, m->ngn = m->nvc; /* straight: no curved arrays */
  m->ncells = (int)ncells;
  m->nvertices = (int)nvertices;
  m->nvf = nvf;
  m->nfacets = (int)nfacets;
  return 0;
}

/* Smooth bump modes along one axis: table[i] = sin(pi * k * i / n) for i = 0..n, exactly 0
 * at both ends (sin(pi k) is not, in floating point) so boundary vertices never move. */
static void fill_sine_table(double *table, int n, int k)
{
  for (int i = 0; i <= n; i++) table[i] = i == 0 || i == n ? 0.0 : sin(M_PI * k * (double)i / n);
}

/* Vertex coordinates on the uniform grid, plus the optional distortion. The displacement of
 * coordinate c is distort * h_c / 4 times a product of sines, one per axis, that vanishes on
 * the boundary (so only interior vertices move and the box keeps its shape). Along its own
 * axis the mode is twice as fast (from 4 cells on), which makes cells non-affine. Wavelengths
 * are about 8 and 4 cells, so the map stays far from folding even at distort = 1: the
 * smallest tet keeps more than a third of its undistorted volume. In 2D (nz = 0) only x and y
 * move, and z = 0. */
static int box_coords(const fe_box_opts *o, fe_mesh *m)
{
  const int nx = o->cells[0], ny = o->cells[1], nz = o->cells[2];
  const int n[3] = {nx, ny, nz};
  double *line[3];   /* grid coordinates along each axis */
  double *wave[3][2]; /* [axis][0]: slow mode, [axis][1]: fast mode */
  double h[3];
  const int dim = m->dim;
  for (int d = 0; d < 3; d++) {
    line[d] = fe_malloc((size_t)(n[d] + 1) * 3 * sizeof(double), "mesh.box grid lines");
    if (!line[d]) {
      for (int e = 0; e < d; e++) free(line[e]);
      return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
    }
    wave[d][0] = line[d] + (n[d] + 1);
    wave[d][1] = line[d] + 2 * (n[d] + 1);
    h[d] = n[d] ? (o->upper[d] - o->lower[d]) / n[d] : 0.0;
    for (int i = 0; i <= n[d]; i++)
      line[d][i] = i == n[d] ? o->upper[d] : o->lower[d] + h[d] * i;
    int k = n[d] / 4 > 1 ? n[d] / 4 : 1;
    fill_sine_table(wave[d][0], n[d], k);
    fill_sine_table(wave[d][1], n[d], n[d] >= 4 ? 2 * k : k); /* 2 k would vanish at n = 2 */
  }
  const double s = o->distort / 4.0;
#pragma omp parallel for collapse(2) schedule(static)
  for (int k = 0; k <= nz; k++)
    for (int j = 0; j <= ny; j++) {
      double *x = m->coords + 3 * ((size_t)(nx + 1) * ((size_t)(ny + 1) * k + j));
      for (int i = 0; i <= nx; i++, x += 3) {
        x[0] = line[0][i];
        x[1] = line[1][j];
        x[2] = dim == 3 ? line[2][k] : 0.0;
        if (s == 0.0) continue;
        const int idx[3] = {i, j, k};
        for (int c = 0; c < dim; c++) {
          double bump = 1.0;
          for (int a = 0; a < dim; a++) bump *= wave[a][a == c][idx[a]];
          x[c] += s * h[c] * bump;
        }
      }
    }
  for (int d = 0; d < 3; d++) free(line[d]);
  return 0;
}

/* Cells: cube (square) by cube, x fastest; six Kuhn tets, one hexahedron, two prisms, one
 * quadrilateral or two triangles per cube (square). */
static void box_cells(const fe_box_opts *o, fe_mesh *m)
{
  static const int split[2][3] = {{0, 1, 3}, {0, 3, 2}}; /* square corners, counter-clockwise */
  const int nx = o->cells[0], ny = o->cells[1], nz = m->dim == 3 ? o->cells[2] : 1;
  const int sx = 1, sy = nx + 1, sz = (nx + 1) * (ny + 1);
  int corner[8]; /* vertex offset of each cube corner from corner 0 */
  for (int q = 0; q < 8; q++) corner[q] = (q & 1) * sx + ((q >> 1) & 1) * sy + ((q >> 2) & 1) * sz;
  const int per = m->ncells / (nx * ny * nz) * m->nvc; /* vertex ids a cube fills */
#pragma omp parallel for collapse(2) schedule(static)
  for (int k = 0; k < nz; k++)
    for (int j = 0; j < ny; j++) {
      int base = sy * j + sz * k;
      int *c = m->cells + (size_t)per * ((size_t)nx * ((size_t)ny * k + j));
      for (int i = 0; i < nx; i++, base++) {
        if (o->type == FE_CELL_TET) {
          for (int t = 0; t < 6; t++, c += 4)
            for (int v = 0; v < 4; v++) c[v] = base + corner[kuhn_tets[t][v]];
        } else if (o->type == FE_CELL_PRISM || o->type == FE_CELL_TRI) {
          const int levels = o->type == FE_CELL_PRISM ? 2 : 1;
          for (int t = 0; t < 2; t++)
            for (int l = 0; l < levels; l++)
              for (int v = 0; v < 3; v++) *c++ = base + corner[split[t][v] + 4 * l];
        } else if (o->type == FE_CELL_QUAD) {
          for (int v = 0; v < 4; v++) c[v] = base + corner[hex_corners[v]];
          c += 4;
        } else {
          for (int v = 0; v < 8; v++) c[v] = base + corner[hex_corners[v]];
          c += 8;
        }
      }
    }
#pragma omp parallel for schedule(static)
  for (int e = 0; e < m->ncells; e++) m->cell_tags[e] = 1;
}

/* Undistorted, every cube is a translate of the first, its cells made in one order: the
 * cells of a cube are the classes of congruent cells (fe_mesh_congruent), cell c of class
 * c % (cells a cube). Out of memory: left to be found when asked. */
static void box_classes(const fe_box_opts *o, fe_mesh *m)
{
  const int per = m->ncells / (o->cells[0] * o->cells[1] * (m->dim == 3 ? o->cells[2] : 1));
  fe_mesh_classes *k = calloc(1, sizeof *k);
  if (k && (double)per * 16 <= m->ncells && (k->rep = malloc(sizeof(int) * (size_t)per))) {
    k->n = per;
    for (int c = 0; c < per; c++) k->rep[c] = c;
    m->classes = k, m->classes_known = 1;
  } else if ((double)per * 16 > m->ncells) {
    free(k);
    m->classes_known = 1; /* too few cells to share: none */
  } else {
    free(k);
  }
}

/* Boundary edges of a 2D box, the domain on their left, tagged 1..4 (xmin .. ymax). */
static void box_edges(const fe_box_opts *o, fe_mesh *m)
{
  const int nx = o->cells[0], ny = o->cells[1], sy = nx + 1;
  int *f = m->facets, *tag = m->facet_tags;
  for (int j = 0; j < ny; j++, f += 2) *tag++ = 1, f[0] = sy * (j + 1), f[1] = sy * j;
  for (int j = 0; j < ny; j++, f += 2) *tag++ = 2, f[0] = sy * j + nx, f[1] = sy * (j + 1) + nx;
  for (int i = 0; i < nx; i++, f += 2) *tag++ = 3, f[0] = i, f[1] = i + 1;
  for (int i = 0; i < nx; i++, f += 2) *tag++ = 4, f[0] = sy * ny + i + 1, f[1] = sy * ny + i;
}

/* Boundary facets of the six faces, outward oriented, tagged 1..6 (xmin .. zmax). */
static void box_facets(const fe_box_opts *o, fe_mesh *m)
{
  const int n[3] = {o->cells[0], o->cells[1], o->cells[2]};
  const int stride[3] = {1, n[0] + 1, (n[0] + 1) * (n[1] + 1)};
  int *f = m->facets, *tag = m->facet_tags;
  for (int axis = 0; axis < 3; axis++)
    for (int side = 0; side < 2; side++) {
      /* In-plane axes a, b with e_a x e_b = e_axis: counter-clockwise in (a, b) is outward
       * on the upper side, so the lower side reverses the order. */
      const int a = (axis + 1) % 3, b = (axis + 2) % 3;
      const int plane = side ? n[axis] * stride[axis] : 0;
      for (int ib = 0; ib < n[b]; ib++)
        for (int ia = 0; ia < n[a]; ia++) {
          const int v00 = plane + ia * stride[a] + ib * stride[b];
          const int v10 = v00 + stride[a], v01 = v00 + stride[b], v11 = v10 + stride[b];
          const int t = 2 * axis + side + 1;
          if (m->type == FE_CELL_TET || (m->type == FE_CELL_PRISM && axis == 2)) {
            /* cut along v00-v11, as the Kuhn tets and the prisms do */
            const int tri[2][3] = {{v00, v10, v11}, {v00, v11, v01}};
            for (int r = 0; r < 2; r++, f += m->nvf) {
              f[0] = tri[r][0];
              f[1] = side ? tri[r][1] : tri[r][2];
              f[2] = side ? tri[r][2] : tri[r][1];
              if (m->nvf == 4) f[3] = f[2]; /* a triangle among prism quads */
              *tag++ = t;
            }
          } else {
            f[0] = v00;
            f[1] = side ? v10 : v01;
            f[2] = v11;
            f[3] = side ? v01 : v10;
            f += 4;
            *tag++ = t;
          }
        }
    }
}

/* Tags: the six boundary faces (four edges in 2D) and the one region. */
static void box_tags(fe_mesh *m)
{
  static const char *const face_names[6] = {"xmin", "xmax", "ymin", "ymax", "zmin", "zmax"};
  const int nfaces = 2 * m->dim;
  for (int t = 0; t < nfaces; t++) {
    snprintf(m->tags[t].name, FE_NAME_MAX, "%s", face_names[t]);
    m->tags[t].id = t + 1;
    m->tags[t].dim = m->dim - 1;
  }
  snprintf(m->tags[nfaces].name, FE_NAME_MAX, "%s", "domain");
  m->tags[nfaces].id = 1;
  m->tags[nfaces].dim = m->dim;
}

/* Allocate every array of a box mesh; on failure the caller frees what was made. */
static int box_alloc(fe_mesh *m)
{
  FE_MALLOC(m->coords, (size_t)m->nvertices * 3, "mesh.box vertex coordinates");
  FE_MALLOC(m->cells, (size_t)m->ncells * m->nvc, "mesh.box cells");
  FE_MALLOC(m->cell_tags, m->ncells, "mesh.box cell regions");
  FE_MALLOC(m->facets, (size_t)m->nfacets * m->nvf, "mesh.box boundary facets");
  FE_MALLOC(m->facet_tags, m->nfacets, "mesh.box boundary tags");
  m->ntags = 2 * m->dim + 1;
  FE_CALLOC(m->tags, m->ntags, "mesh.box tags");
  return 0;
}

/* Build the box mesh described by o (see the top of this file for the numbering). */
int fe_mesh_box(const fe_box_opts *o, fe_mesh **out)
{
  FE_ASSERT(o && out, FE_ERR_ARG, "mesh.box: missing options or output");
  *out = NULL;
  fe_mesh *m;
  FE_CALLOC(m, 1, "mesh");
  fe_progress_begin("mesh.box", 0);
  fe_progress_watch(1);
  fe_progress_phase("the vertices");
  int rc = box_check(o, m);
  if (!rc) rc = box_alloc(m);
  if (!rc) rc = box_coords(o, m);
  if (!rc) {
    fe_progress_phase("the cells");
    box_cells(o, m);
    fe_progress_phase("the boundary");
    if (m->dim == 2) box_edges(o, m);
    else box_facets(o, m);
    box_tags(m);
  }
  fe_progress_watch(0);
  fe_progress_end();
  if (rc) {
    fe_mesh_free(m);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  m->positive = o->distort == 0; /* upper > lower (box_check): positive affine maps */
  m->affine = o->distort == 0 ? 1 : 0; /* distorted: found out when asked */
  if (o->distort == 0) box_classes(o, m);
  for (int d = 0; d < m->dim; d++) m->cubes[d] = o->cells[d];
  *out = m;
  return 0;
}
