/* Box meshes: counts, volumes, orientation, conformity, boundary tags, input errors, the
 * quality check and the coloring of cell groups. */
#include <criterion/criterion.h>
#include <omp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fem/element.h"
#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/fem/quadrature.h"

/* A box mesh with the given type, cells per axis and distortion; fails the test on error. */
static fe_mesh *make_box(fe_cell_type type, int nx, int ny, int nz, double distort)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = nx, o.cells[1] = ny, o.cells[2] = nz;
  o.lower[0] = -1, o.lower[1] = 0, o.lower[2] = 2;
  o.upper[0] = 1, o.upper[1] = 0.5, o.upper[2] = 5;
  o.distort = distort;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

static const double box_volume = 2.0 * 0.5 * 3.0;

/* det [v1 - v0, v2 - v0, v3 - v0] of tet e. */
static double tet_det(const fe_mesh *m, int e)
{
  const int *c = m->cells + 4 * e;
  double a[3][3];
  for (int k = 0; k < 3; k++)
    for (int d = 0; d < 3; d++) a[k][d] = m->coords[3 * c[k + 1] + d] - m->coords[3 * c[0] + d];
  return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
         a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
         a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
}

/* Volume of hex e: integral of det J with the 2x2x2 Gauss rule (exact for trilinear maps). */
static double hex_volume(const fe_mesh *m, const fe_element *el, const fe_quadrature *q, int e)
{
  double vol = 0, phi[8], dphi[24];
  for (int p = 0; p < q->npoints; p++) {
    fe_element_eval(el, q->points + 3 * p, phi, dphi);
    double J[3][3] = {{0}};
    for (int b = 0; b < 8; b++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          J[i][j] += m->coords[3 * m->cells[8 * e + b] + i] * dphi[3 * b + j];
    double det = J[0][0] * (J[1][1] * J[2][2] - J[1][2] * J[2][1]) -
                 J[0][1] * (J[1][0] * J[2][2] - J[1][2] * J[2][0]) +
                 J[0][2] * (J[1][0] * J[2][1] - J[1][1] * J[2][0]);
    vol += q->weights[p] * det;
  }
  return vol;
}

Test(mesh, box_defaults)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  cr_assert_eq(o.type, FE_CELL_TET);
  for (int d = 0; d < 3; d++) {
    cr_assert_eq(o.cells[d], 1);
    cr_assert_eq(o.lower[d], 0.0);
    cr_assert_eq(o.upper[d], 1.0);
  }
  cr_assert_eq(o.distort, 0.0);
}

Test(mesh, cell_names_parse_and_sizes)
{
  const char *names[] = {"tri", "quad", "tet", "hex", "prism"};
  const int dims[] = {2, 2, 3, 3, 3}, nverts[] = {3, 4, 4, 8, 6};
  for (int i = 0; i < 5; i++) {
    fe_cell_type t;
    cr_assert_eq(fe_cell_parse(names[i], &t), 0);
    cr_assert_eq((int)t, i);
    cr_assert_str_eq(fe_cell_name(t), names[i]);
    cr_assert_eq(fe_cell_dim(t), dims[i]);
    cr_assert_eq(fe_cell_nvertices(t), nverts[i]);
  }
  fe_cell_type t;
  cr_assert_eq(fe_cell_parse("pyramid", &t), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "tri quad tet hex prism"), "%s", fe_error_message());
}

Test(mesh, tet_box_counts)
{
  fe_mesh *m = make_box(FE_CELL_TET, 2, 3, 4, 0);
  cr_assert_eq(m->dim, 3);
  cr_assert_eq(m->nvc, 4);
  cr_assert_eq(m->ncells, 6 * 2 * 3 * 4);
  cr_assert_eq(m->nvertices, 3 * 4 * 5);
  cr_assert_eq(m->nvf, 3);
  cr_assert_eq(m->nfacets, 2 * 2 * (2 * 3 + 3 * 4 + 4 * 2));
  cr_assert_eq(m->ntags, 7);
  for (int e = 0; e < m->ncells; e++) cr_assert_eq(m->cell_tags[e], 1);
  fe_mesh_free(m);
  m = make_box(FE_CELL_TET, 5, 5, 5, 0);
  cr_assert_eq(m->ncells, 6 * 125);
  cr_assert_eq(m->nvertices, 216);
  fe_mesh_free(m);
}

Test(mesh, hex_box_counts)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 2, 3, 4, 0);
  cr_assert_eq(m->nvc, 8);
  cr_assert_eq(m->ncells, 24);
  cr_assert_eq(m->nvertices, 60);
  cr_assert_eq(m->nvf, 4);
  cr_assert_eq(m->nfacets, 2 * (6 + 12 + 8));
  fe_mesh_free(m);
}

Test(mesh, vertex_numbering_is_x_fastest)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 2, 3, 4, 0);
  int i = 1, j = 2, k = 3, v = i + 3 * (j + 4 * k);
  cr_assert_float_eq(m->coords[3 * v + 0], -1 + 1.0 * i, 1e-15);
  cr_assert_float_eq(m->coords[3 * v + 1], 0.5 / 3 * j, 1e-15);
  cr_assert_float_eq(m->coords[3 * v + 2], 2 + 0.75 * k, 1e-15);
  fe_mesh_free(m);
}

Test(mesh, tet_volume_sums_to_box_and_every_tet_positive)
{
  const double distorts[] = {0, 0.5, 1};
  for (int s = 0; s < 3; s++) {
    fe_mesh *m = make_box(FE_CELL_TET, 6, 5, 7, distorts[s]);
    double vol = 0;
    for (int e = 0; e < m->ncells; e++) {
      double det = tet_det(m, e);
      cr_assert_gt(det, 0, "distort %g: tet %d has det %g", distorts[s], e, det);
      vol += det / 6;
    }
    cr_assert(fabs(vol - box_volume) < 1e-12, "distort %g: volume %.17g", distorts[s], vol);
    fe_mesh_free(m);
  }
}

Test(mesh, hex_volume_sums_to_box)
{
  fe_element el;
  fe_quadrature q;
  cr_assert_eq(fe_element_linear(FE_CELL_HEX, &el), 0);
  cr_assert_eq(fe_quadrature_create(FE_CELL_HEX, 3, &q), 0);
  const double distorts[] = {0, 0.5, 1};
  for (int s = 0; s < 3; s++) {
    fe_mesh *m = make_box(FE_CELL_HEX, 6, 5, 7, distorts[s]);
    double vol = 0;
    for (int e = 0; e < m->ncells; e++) vol += hex_volume(m, &el, &q, e);
    cr_assert(fabs(vol - box_volume) < 1e-12, "distort %g: volume %.17g", distorts[s], vol);
    fe_mesh_free(m);
  }
  fe_quadrature_free(&q);
  fe_element_free(&el);
}

Test(mesh, distortion_moves_interior_vertices_only)
{
  fe_mesh *flat = make_box(FE_CELL_HEX, 8, 8, 8, 0), *bent = make_box(FE_CELL_HEX, 8, 8, 8, 1);
  int moved = 0;
  for (int v = 0; v < flat->nvertices; v++) {
    int i = v % 9, j = (v / 9) % 9, k = v / 81;
    int boundary = i == 0 || i == 8 || j == 0 || j == 8 || k == 0 || k == 8;
    double dist = 0;
    for (int d = 0; d < 3; d++) dist += fabs(flat->coords[3 * v + d] - bent->coords[3 * v + d]);
    if (boundary) cr_assert_eq(dist, 0.0, "boundary vertex %d moved", v);
    moved += dist > 1e-3;
  }
  cr_assert_gt(moved, 7 * 7 * 7 / 2, "only %d interior vertices moved", moved);
  fe_mesh_free(flat);
  fe_mesh_free(bent);
}

/* Cells that are affine images of the reference cell: mesh.box's by construction, found by
 * the check once a mesh forgets (sheared by a linear map, still affine; one vertex moved,
 * not); distorted boxes are not; simplices always are. */
Test(mesh, affine_cells_are_found)
{
  const fe_cell_type types[] = {FE_CELL_QUAD, FE_CELL_HEX, FE_CELL_PRISM, FE_CELL_TET};
  for (int t = 0; t < 4; t++) {
    int nz = types[t] == FE_CELL_QUAD ? 0 : 3;
    fe_mesh *m = make_box(types[t], 4, 3, nz, 0), *bent = make_box(types[t], 4, 3, nz, 1);
    const char *name = fe_cell_name(types[t]);
    cr_assert_eq(m->affine, 1, "%s box: affine by construction", name);
    cr_assert_eq(bent->affine, 0, "%s distorted box: not known before the check", name);
    cr_assert_eq(fe_mesh_affine(bent), types[t] == FE_CELL_TET, "%s distorted box", name);
    cr_assert_eq(bent->affine, types[t] == FE_CELL_TET ? 1 : -1, "%s: the answer kept", name);
    /* a shear and a stretch: every cell a parallelepiped (prism: a slanted triangle column) */
    for (int v = 0; v < m->nvertices; v++) {
      double *x = m->coords + 3 * v, y = x[1], z = x[2];
      x[0] += 0.3 * y - 0.2 * z, x[1] = 2 * y + 0.1 * z;
      if (nz) x[2] = z - 0.4 * x[0]; /* 2D meshes keep z = 0 */
    }
    m->affine = 0;
    cr_assert(fe_mesh_affine(m), "%s box, sheared: still affine", name);
    /* one vertex of one cell moved by 1e-6 of the cell's size: not affine but for simplices */
    m->coords[3 * m->cells[m->nvc * 5 + 2] + 1] += 1e-6 * 0.5 / 3;
    m->affine = 0;
    cr_assert_eq(fe_mesh_affine(m), types[t] == FE_CELL_TET, "%s box, one vertex moved", name);
    fe_mesh_free(m);
    fe_mesh_free(bent);
  }
}

/* Congruent cells: a box's cells fall into a few classes (the Kuhn tets of a cube: 6), each
 * cell's class is that of a cell with the same edge vectors; stretched along x (x -> x^2)
 * the hexes' classes are the 8 widths; stretched along x and y (64 classes for 512 cells,
 * more than one a 16 cells) and distorted boxes have none. */
Test(mesh, congruent_cells_share_a_class)
{
  const struct { fe_cell_type type; int n; } cases[] = {
      {FE_CELL_HEX, 1}, {FE_CELL_TET, 6}, {FE_CELL_PRISM, 2}, {FE_CELL_QUAD, 1}};
  for (int t = 0; t < 4; t++) {
    int nz = cases[t].type == FE_CELL_QUAD ? 0 : 8;
    fe_mesh *m = make_box(cases[t].type, 8, 8, nz, 0), *bent = make_box(cases[t].type, 8, 8, nz, 1);
    const char *name = fe_cell_name(cases[t].type);
    const fe_mesh_classes *k = fe_mesh_congruent(m);
    cr_assert(k && k->n == cases[t].n, "%s box: %d classes, expected %d", name, k ? k->n : -1,
              cases[t].n);
    cr_assert_eq(fe_mesh_congruent(m), k, "%s: the answer kept", name);
    for (int c = 0; c < m->ncells; c++) { /* a cell's edges are its class's first cell's */
      const int rc = k->rep[fe_mesh_class_of(k, c)];
      const int *v = m->cells + (size_t)c * m->nvc, *r = m->cells + (size_t)rc * m->nvc;
      cr_assert(rc <= c, "%s cell %d: its class's first cell comes later", name, c);
      for (int b = 1; b < m->nvc; b++)
        for (int d = 0; d < 3; d++) {
          double e = m->coords[3 * v[b] + d] - m->coords[3 * v[0] + d];
          double f = m->coords[3 * r[b] + d] - m->coords[3 * r[0] + d];
          cr_assert(fabs(e - f) < 1e-12, "%s cell %d: edge %d differs from its class's", name, c, b);
        }
    }
    /* the classes known by construction are the ones found by keying every cell */
    cr_assert_null(k->of, "%s box: its classes known by construction", name);
    fe_mesh_forget_classes(m);
    const fe_mesh_classes *found = fe_mesh_congruent(m);
    cr_assert(found && found->of && found->n == cases[t].n, "%s box: classes found", name);
    for (int c = 0; c < m->ncells; c++)
      cr_assert_eq(fe_mesh_class_of(found, c), c % cases[t].n, "%s cell %d: class found %d", name,
                   c, fe_mesh_class_of(found, c));
    k = found;
    cr_assert_null(fe_mesh_congruent(bent), "%s distorted box: no classes", name);
    fe_mesh_free(bent);
    if (cases[t].type == FE_CELL_HEX) {
      for (int v = 0; v < m->nvertices; v++) m->coords[3 * v] *= m->coords[3 * v];
      fe_mesh_forget_classes(m);
      k = fe_mesh_congruent(m);
      cr_assert(k && k->n == 8, "hexes stretched along x: %d classes, expected 8", k ? k->n : -1);
      for (int v = 0; v < m->nvertices; v++) m->coords[3 * v + 1] *= m->coords[3 * v + 1];
      fe_mesh_forget_classes(m);
      cr_assert_null(fe_mesh_congruent(m), "hexes stretched along x and y: 64 classes, none kept");
    }
    fe_mesh_free(m);
  }
}

Test(mesh, check_passes_on_boxes)
{
  const fe_cell_type types[] = {FE_CELL_TET, FE_CELL_HEX};
  for (int t = 0; t < 2; t++)
    for (int n = 1; n <= 12; n++) {
      fe_mesh *m = make_box(types[t], n, n + 1, 2 * n, n % 3 ? 1.0 : 0.5);
      cr_assert_eq(fe_mesh_check(m), 0, "%s", fe_error_message());
      fe_mesh_free(m);
    }
}

Test(mesh, boundary_facet_counts_per_tag)
{
  const int n[3] = {3, 4, 5};
  for (int hex = 0; hex < 2; hex++) {
    fe_mesh *m = make_box(hex ? FE_CELL_HEX : FE_CELL_TET, n[0], n[1], n[2], 0);
    int count[7] = {0};
    for (int f = 0; f < m->nfacets; f++) {
      cr_assert(m->facet_tags[f] >= 1 && m->facet_tags[f] <= 6);
      count[m->facet_tags[f]]++;
    }
    for (int axis = 0; axis < 3; axis++) {
      int face = n[(axis + 1) % 3] * n[(axis + 2) % 3] * (hex ? 1 : 2);
      cr_assert_eq(count[2 * axis + 1], face);
      cr_assert_eq(count[2 * axis + 2], face);
    }
    fe_mesh_free(m);
  }
}

Test(mesh, boundary_facets_point_outward)
{
  for (int hex = 0; hex < 2; hex++) {
    fe_mesh *m = make_box(hex ? FE_CELL_HEX : FE_CELL_TET, 3, 4, 5, 0.7);
    for (int f = 0; f < m->nfacets; f++) {
      const int *v = m->facets + f * m->nvf;
      const double *x0 = m->coords + 3 * v[0], *x1 = m->coords + 3 * v[1],
                   *x2 = m->coords + 3 * v[2];
      double a[3], b[3];
      for (int d = 0; d < 3; d++) a[d] = x1[d] - x0[d], b[d] = x2[d] - x0[d];
      double normal[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                          a[0] * b[1] - a[1] * b[0]};
      int tag = m->facet_tags[f], axis = (tag - 1) / 2;
      double outward = tag % 2 ? -1 : 1;
      cr_assert_gt(outward * normal[axis], 0, "facet %d (tag %d) points inward", f, tag);
    }
    fe_mesh_free(m);
  }
}

Test(mesh, tag_vertices_lie_on_their_face)
{
  fe_mesh *m = make_box(FE_CELL_TET, 3, 4, 5, 0.5);
  int id, *verts, n;
  cr_assert_eq(fe_mesh_tag_id(m, "xmin", 2, &id), 0);
  cr_assert_eq(id, 1);
  cr_assert_eq(fe_mesh_tag_vertices(m, id, &verts, &n), 0);
  cr_assert_eq(n, 5 * 6);
  for (int k = 0; k < n; k++) {
    cr_assert_eq(m->coords[3 * verts[k]], -1.0);
    if (k) cr_assert_gt(verts[k], verts[k - 1], "not sorted and unique");
  }
  free(verts);
  cr_assert_eq(fe_mesh_tag_id(m, "zmax", 2, &id), 0);
  cr_assert_eq(id, 6);
  cr_assert_eq(fe_mesh_tag_vertices(m, id, &verts, &n), 0);
  for (int k = 0; k < n; k++) cr_assert_eq(m->coords[3 * verts[k] + 2], 5.0);
  free(verts);
  cr_assert_eq(fe_mesh_tag_vertices(m, -1, &verts, &n), 0);
  cr_assert_eq(n, 4 * 5 * 6 - 2 * 3 * 4);
  free(verts);
  cr_assert_eq(fe_mesh_tag_id(m, "domain", 3, &id), 0);
  cr_assert_eq(id, 1);
  fe_mesh_free(m);
}

Test(mesh, unknown_tag_lists_known_names)
{
  fe_mesh *m = make_box(FE_CELL_TET, 1, 1, 1, 0);
  int id;
  cr_assert_eq(fe_mesh_tag_id(m, "foo", 2, &id), FE_ERR_ARG);
  cr_assert_str_eq(fe_error_message(),
                   "no boundary tag 'foo' in this mesh (tags: xmin, xmax, ymin, ymax, zmin, zmax)");
  cr_assert_eq(fe_mesh_tag_id(m, "xmin", 3, &id), FE_ERR_ARG); /* not a region */
  cr_assert(strstr(fe_error_message(), "regions: domain"), "%s", fe_error_message());
  int *verts, n;
  cr_assert_eq(fe_mesh_tag_vertices(m, 42, &verts, &n), FE_ERR_ARG);
  fe_mesh_free(m);
}

/* Sort the nv ints of a face in place (insertion sort). */
static void sort_face(int *v, int nv)
{
  for (int i = 1; i < nv; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      int t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

static int face_width; /* for compare_faces */
static int compare_faces(const void *a, const void *b)
{
  const int *x = a, *y = b;
  for (int i = 0; i < face_width; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* Every cell face is shared by two cells, except the boundary facets, which have one. */
static void check_conforming(const fe_mesh *m, int nfaces_per_cell, int nv,
                             const int (*local)[4])
{
  const int nf = m->ncells * nfaces_per_cell;
  int *faces = malloc((size_t)nf * nv * sizeof(int));
  int *bnd = malloc((size_t)m->nfacets * nv * sizeof(int));
  for (int e = 0; e < m->ncells; e++)
    for (int f = 0; f < nfaces_per_cell; f++) {
      int *dst = faces + (e * nfaces_per_cell + f) * nv;
      for (int k = 0; k < nv; k++) dst[k] = m->cells[e * m->nvc + local[f][k]];
      sort_face(dst, nv);
    }
  for (int f = 0; f < m->nfacets; f++) {
    memcpy(bnd + f * nv, m->facets + f * nv, nv * sizeof(int));
    sort_face(bnd + f * nv, nv);
  }
  face_width = nv;
  qsort(faces, nf, nv * sizeof(int), compare_faces);
  qsort(bnd, m->nfacets, nv * sizeof(int), compare_faces);
  int single = 0;
  for (int i = 0; i < nf;) {
    int j = i + 1;
    while (j < nf && !compare_faces(faces + i * nv, faces + j * nv)) j++;
    cr_assert(j - i == 1 || j - i == 2, "a face is shared by %d cells", j - i);
    if (j - i == 1) {
      cr_assert_lt(single, m->nfacets, "more single faces than boundary facets");
      cr_assert_eq(compare_faces(faces + i * nv, bnd + single * nv), 0,
                   "a face with one cell is not a boundary facet");
      single++;
    }
    i = j;
  }
  cr_assert_eq(single, m->nfacets);
  free(faces);
  free(bnd);
}

Test(mesh, tet_mesh_is_conforming)
{
  static const int tet_faces[4][4] = {{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}};
  fe_mesh *m = make_box(FE_CELL_TET, 4, 3, 5, 0);
  check_conforming(m, 4, 3, tet_faces);
  fe_mesh_free(m);
}

Test(mesh, hex_mesh_is_conforming)
{
  static const int hex_faces[6][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 5, 4},
                                      {1, 2, 6, 5}, {2, 3, 7, 6}, {3, 0, 4, 7}};
  fe_mesh *m = make_box(FE_CELL_HEX, 4, 3, 5, 0);
  check_conforming(m, 6, 4, hex_faces);
  fe_mesh_free(m);
}

/* Expect fe_mesh_box to fail with FE_ERR_ARG and a message containing `needle`. */
static void expect_box_error(const fe_box_opts *o, const char *needle)
{
  fe_mesh *m = (fe_mesh *)1;
  cr_assert_eq(fe_mesh_box(o, &m), FE_ERR_ARG, "no error for '%s'", needle);
  cr_assert_null(m);
  cr_assert(strstr(fe_error_message(), needle), "message '%s' lacks '%s'", fe_error_message(),
            needle);
}

Test(mesh, bad_box_input_names_the_problem)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.cells[1] = 0;
  expect_box_error(&o, "cells[1] = 0: the number of cells along y must be positive");
  o.cells[1] = 1, o.cells[2] = -3;
  expect_box_error(&o, "cells[2] = -3: the number of cells along z must be positive");
  fe_box_opts_default(&o);
  o.upper[0] = 0;
  expect_box_error(&o, "along x");
  fe_box_opts_default(&o);
  o.distort = 1.5;
  expect_box_error(&o, "distort = 1.5");
  o.distort = NAN;
  expect_box_error(&o, "distort");
  fe_box_opts_default(&o);
  o.type = FE_CELL_TRI;
  expect_box_error(&o, "mesh.box: cell type 'tri' is not supported yet (tet, hex)");
  fe_box_opts_default(&o);
  o.cells[0] = o.cells[1] = o.cells[2] = 2000; /* 4.8e10 tets: more than an int counts */
  expect_box_error(&o, "at most");
  o.cells[0] = o.cells[1] = o.cells[2] = 2000000000;
  expect_box_error(&o, "at most");
}

Test(mesh, summary_names_counts_and_tags)
{
  fe_mesh *m = make_box(FE_CELL_TET, 10, 10, 10, 0);
  char buf[512];
  fe_mesh_summary(m, buf, sizeof buf);
  cr_assert(strstr(buf, "mesh: 6000 tet cells, 1331 vertices, dim 3"), "%s", buf);
  cr_assert(strstr(buf, "[-1,1] x [0,0.5] x [2,5]"), "%s", buf);
  cr_assert(strstr(buf, "xmin(1) xmax(2) ymin(3) ymax(4) zmin(5) zmax(6)"), "%s", buf);
  cr_assert(strstr(buf, "regions: domain(1)"), "%s", buf);
  char tiny[16];
  fe_mesh_summary(m, tiny, sizeof tiny); /* truncates, stays terminated */
  cr_assert_eq(strlen(tiny), sizeof tiny - 1);
  fe_mesh_free(m);
  fe_mesh_free(NULL);
}

Test(mesh, inverted_tet_reported_with_its_id)
{
  fe_mesh *m = make_box(FE_CELL_TET, 3, 3, 3, 0);
  int *c = m->cells + 4 * 17, t = c[1];
  c[1] = c[2];
  c[2] = t;
  cr_assert_eq(fe_mesh_check(m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "cell 17 (tet) is inverted: signed volume -"), "%s",
            fe_error_message());
  c[2] = c[1]; /* two equal vertices: flat */
  cr_assert_eq(fe_mesh_check(m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "cell 17 (tet) is degenerate"), "%s", fe_error_message());
  fe_mesh_free(m);
}

Test(mesh, inverted_hex_reported_with_its_id)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 3, 3, 3, 0);
  int *c = m->cells + 8 * 13; /* mirror cell 13: swap its bottom and top faces */
  for (int k = 0; k < 4; k++) {
    int t = c[k];
    c[k] = c[k + 4];
    c[k + 4] = t;
  }
  cr_assert_eq(fe_mesh_check(m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "cell 13 (hex) is inverted"), "%s", fe_error_message());
  fe_mesh_free(m);
}

/* No two groups of one color share a vertex. */
static void check_coloring(const fe_mesh *m, const int *cells, int block, const int *color,
                           int ncolors)
{
  int ngroups = (m->ncells + block - 1) / block;
  int *owner = malloc(m->nvertices * sizeof(int));
  for (int c = 0; c < ncolors; c++) {
    for (int v = 0; v < m->nvertices; v++) owner[v] = -1;
    for (int g = 0; g < ngroups; g++) {
      if (color[g] != c) continue;
      int end = (g + 1) * block < m->ncells ? (g + 1) * block : m->ncells;
      for (int k = g * block * m->nvc; k < end * m->nvc; k++) {
        int v = cells[k];
        cr_assert(owner[v] < 0 || owner[v] == g, "groups %d and %d (color %d) share vertex %d",
                  owner[v], g, c, v);
        owner[v] = g;
      }
    }
  }
  for (int g = 0; g < ngroups; g++) cr_assert(color[g] >= 0 && color[g] < ncolors);
  free(owner);
}

Test(mesh, coloring_separates_groups_that_share_vertices)
{
  fe_mesh *m = make_box(FE_CELL_TET, 8, 8, 8, 0);
  const int blocks[] = {1, 4, 64, 100000};
  for (int b = 0; b < 4; b++) {
    int *color, ncolors;
    cr_assert_eq(fe_mesh_color_groups(m, m->cells, 4, blocks[b], &color, &ncolors), 0, "%s",
                 fe_error_message());
    check_coloring(m, m->cells, blocks[b], color, ncolors);
    /* a vertex touches 24 tets, so one-cell groups need >= 24 colors; greedy stays modest */
    if (blocks[b] == 1) cr_assert(ncolors >= 24 && ncolors <= 40, "%d colors", ncolors);
    if (blocks[b] == 64) cr_assert(ncolors >= 2 && ncolors <= 16, "%d colors", ncolors);
    if (blocks[b] == 100000) cr_assert_eq(ncolors, 1);
    free(color);
  }
  fe_mesh_free(m);
}

/* 4096 groups and more are colored in two halves at once, the second half's groups at the
 * seam recolored in order: still no shared vertex within a color, the same colors on one
 * thread as on several, and a scrambled order (halves that share most vertices) too. */
Test(mesh, coloring_in_halves_is_valid_on_any_thread_count)
{
  fe_mesh *m = make_box(FE_CELL_TET, 16, 16, 16, 0); /* 24576 cells */
  const int blocks[] = {1, 4};
  for (int b = 0; b < 2; b++) {
    int *c1, *c2, n1, n2, rc1 = -1;
#pragma omp parallel num_threads(2) /* inside it, one thread a region: the halves in turn */
#pragma omp single
    rc1 = fe_mesh_color_groups(m, m->cells, 4, blocks[b], &c1, &n1);
    cr_assert_eq(rc1, 0, "%s", fe_error_message());
    cr_assert_eq(fe_mesh_color_groups_below(m, m->cells, 4, m->nvertices, blocks[b], &c2, &n2),
                 0, "%s", fe_error_message());
    check_coloring(m, m->cells, blocks[b], c2, n2);
    cr_assert_eq(n1, n2);
    cr_assert_arr_eq(c1, c2, sizeof(int) * (size_t)(m->ncells / blocks[b]));
    if (blocks[b] == 1) cr_assert(n2 >= 24 && n2 <= 48, "%d colors", n2);
    free(c1), free(c2);
  }
  int *cells = malloc((size_t)m->ncells * 4 * sizeof(int)), *color, ncolors;
  for (int e = 0; e < m->ncells; e++) /* e -> 7e mod ncells: every group far from its neighbours */
    memcpy(cells + 4 * e, m->cells + 4 * ((7 * e) % m->ncells), 4 * sizeof(int));
  cr_assert_eq(fe_mesh_color_groups(m, cells, 4, 2, &color, &ncolors), 0, "%s",
               fe_error_message());
  check_coloring(m, cells, 2, color, ncolors);
  free(color), free(cells);
  fe_mesh_free(m);
}

Test(mesh, coloring_works_on_reordered_cells)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 10, 10, 10, 0);
  int *cells = malloc((size_t)m->ncells * 8 * sizeof(int));
  for (int e = 0; e < m->ncells; e++) /* a scrambled order: e -> 7e mod ncells (1000) */
    memcpy(cells + 8 * e, m->cells + 8 * ((7 * e) % m->ncells), 8 * sizeof(int));
  int *color, ncolors;
  cr_assert_eq(fe_mesh_color_groups(m, cells, 8, 8, &color, &ncolors), 0);
  check_coloring(m, cells, 8, color, ncolors);
  cr_assert_leq(ncolors, 64);
  free(color);
  /* ids need not be mesh vertices (the nodes of a higher-order space are not) */
  for (size_t k = 0; k < (size_t)m->ncells * 8; k++) cells[k] = 3 * cells[k] + 5000;
  cr_assert_eq(fe_mesh_color_groups(m, cells, 8, 8, &color, &ncolors), 0, "%s",
               fe_error_message());
  free(color);
  cells[17] = -2;
  cr_assert_eq(fe_mesh_color_groups(m, cells, 8, 8, &color, &ncolors), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "cell 2 has a negative vertex id -2"), "%s",
            fe_error_message());
  free(cells);
  cr_assert_eq(fe_mesh_color_groups(m, m->cells, 8, 0, &color, &ncolors), FE_ERR_ARG);
  fe_mesh_free(m);
}

Test(mesh, coloring_refuses_more_than_64_colors)
{
  /* 65 single-cell groups all around one vertex need 65 colors */
  fe_mesh *m = make_box(FE_CELL_TET, 5, 5, 5, 0);
  for (int e = 0; e < 65; e++) m->cells[4 * e] = 0;
  int *color = NULL, ncolors;
  cr_assert_eq(fe_mesh_color_groups(m, m->cells, 4, 1, &color, &ncolors), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "64 colors"), "%s", fe_error_message());
  cr_assert_null(color);
  fe_mesh_free(m);
}

/* A one-cell mesh of the given type on its reference vertices (heap arrays, like the box). */
static fe_mesh *one_cell(fe_cell_type type, const double (*x)[3], int nv)
{
  fe_mesh *m = calloc(1, sizeof *m);
  m->type = type;
  m->dim = fe_cell_dim(type);
  m->nvc = nv;
  m->nvertices = nv;
  m->ncells = 1;
  m->coords = malloc(3 * nv * sizeof(double));
  m->cells = malloc(nv * sizeof(int));
  m->cell_tags = calloc(1, sizeof(int));
  memcpy(m->coords, x, 3 * nv * sizeof(double));
  for (int v = 0; v < nv; v++) m->cells[v] = v;
  return m;
}

Test(mesh, check_handles_tri_quad_and_prism_cells)
{
  const double tri[3][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  const double quad[4][3] = {{0, 0, 0}, {2, 0, 0}, {2, 1, 0}, {0, 1, 0}};
  const double prism[6][3] = {{0, 0, -1}, {1, 0, -1}, {0, 1, -1},
                              {0, 0, 1},  {1, 0, 1},  {0, 1, 1}};
  struct {
    fe_cell_type type;
    const double (*x)[3];
    int nv;
  } cases[] = {
      {FE_CELL_TRI, tri, 3}, {FE_CELL_QUAD, quad, 4}, {FE_CELL_PRISM, prism, 6}};
  for (int i = 0; i < 3; i++) {
    fe_mesh *m = one_cell(cases[i].type, cases[i].x, cases[i].nv);
    cr_assert_eq(fe_mesh_check(m), 0, "%s: %s", fe_cell_name(m->type), fe_error_message());
    /* swap vertices 1 and 2 (and 4, 5): a mirror image, or a bow-tie for the quad */
    int t = m->cells[1];
    m->cells[1] = m->cells[2], m->cells[2] = t;
    if (m->type == FE_CELL_PRISM) m->cells[4] = 5, m->cells[5] = 4;
    cr_assert_eq(fe_mesh_check(m), FE_ERR_MESH, "%s mirrored passes", fe_cell_name(m->type));
    cr_assert(strstr(fe_error_message(), "cell 0"), "%s", fe_error_message());
    cr_assert(strstr(fe_error_message(), "inverted"), "%s", fe_error_message());
    fe_mesh_free(m);
  }
}
