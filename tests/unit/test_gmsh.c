/* Meshes through the Gmsh SDK: .geo and .msh files, names, defaults without physical groups,
 * bad files, and the SDK-free conversion fe_mesh_from_arrays. Tests that need the SDK skip
 * in builds without it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/msh.h"
#include "engine/fem/quadrature.h"

#ifdef FE_HAVE_GMSH
#include <gmshc.h>
#define NEED_GMSH()
#else
#define NEED_GMSH() cr_skip_test("built without the Gmsh SDK")
#endif

/* Load path with default options; fails the test on error. */
static fe_mesh *load(const char *path)
{
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_load(path, NULL, &m), 0, "%s", fe_error_message());
  return m;
}

/* Sum of the (signed) tet volumes. */
static double tet_volume(const fe_mesh *m)
{
  double sum = 0;
  for (int e = 0; e < m->ncells; e++) {
    const double *x[4];
    for (int k = 0; k < 4; k++) x[k] = m->coords + 3 * (size_t)m->cells[4 * e + k];
    double a[3], b[3], c[3];
    for (int d = 0; d < 3; d++) a[d] = x[1][d] - x[0][d], b[d] = x[2][d] - x[0][d], c[d] = x[3][d] - x[0][d];
    double det = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
                 a[2] * (b[0] * c[1] - b[1] * c[0]);
    cr_assert_gt(det, 0, "tet %d is not positively oriented", e);
    sum += det / 6;
  }
  return sum;
}

/* Write text to a fresh temporary file with the given suffix; returns its malloc'd name. */
static char *temp_file(const char *suffix, const void *data, size_t n)
{
  char *name = malloc(256);
  snprintf(name, 256, "/tmp/felab-gmsh-%d-%d%s", (int)getpid(), rand(), suffix);
  FILE *f = fopen(name, "wb");
  cr_assert(f, "cannot write %s", name);
  if (n) fwrite(data, 1, n, f);
  fclose(f);
  return name;
}

/* Loading path fails with code and a message naming the file and containing want. */
static void load_fails(const char *path, int code, const char *want)
{
  fe_mesh *m = NULL;
  int rc = fe_mesh_load(path, NULL, &m);
  cr_assert_eq(rc, code, "%s: expected %s, got %s: %s", path, fe_error_name(code),
               fe_error_name(rc), fe_error_message());
  cr_assert_null(m);
  cr_assert(strstr(fe_error_message(), path), "message does not name the file: %s",
            fe_error_message());
  cr_assert(strstr(fe_error_message(), want), "message lacks '%s': %s", want, fe_error_message());
}

Test(gmsh, cube_geo_has_six_named_faces_and_unit_volume)
{
  NEED_GMSH();
  fe_mesh *m = load("meshes/cube.geo");
  cr_assert_eq(m->type, FE_CELL_TET);
  cr_assert_eq(m->dim, 3);
  cr_assert_float_eq(tet_volume(m), 1.0, 1e-12);
  static const char *const faces[6] = {"xmin", "xmax", "ymin", "ymax", "zmin", "zmax"};
  for (int t = 0; t < 6; t++) {
    int id, *v, n;
    cr_assert_eq(fe_mesh_tag_id(m, faces[t], 2, &id), 0, "%s", fe_error_message());
    cr_assert_eq(fe_mesh_tag_vertices(m, id, &v, &n), 0);
    cr_assert_gt(n, 3, "face %s has %d vertices", faces[t], n);
    for (int k = 0; k < n; k++) /* the face's coordinate is 0 (min) or 1 (max) */
      cr_assert_float_eq(m->coords[3 * v[k] + t / 2], (double)(t % 2), 1e-12, "%s", faces[t]);
    free(v);
  }
  int id;
  cr_assert_eq(fe_mesh_tag_id(m, "domain", 3, &id), 0);
  fe_mesh_free(m);
}

Test(gmsh, msh22_ascii_and_msh41_binary_agree)
{
  NEED_GMSH();
  fe_mesh *a = load("meshes/cube_v2.msh"), *b = load("meshes/cube_v41.msh");
  cr_assert_eq(a->ncells, b->ncells);
  cr_assert_eq(a->nvertices, b->nvertices);
  cr_assert_eq(a->nfacets, b->nfacets);
  cr_assert_eq(a->ntags, b->ntags);
  cr_assert_float_eq(tet_volume(a), 1.0, 1e-12);
  cr_assert_float_eq(tet_volume(b), 1.0, 1e-12);
  fe_mesh_free(a);
  fe_mesh_free(b);
}

Test(gmsh, geo_2d_gives_triangles_and_named_curves)
{
  NEED_GMSH();
  fe_mesh *m = load("meshes/plate_hole.geo");
  cr_assert_eq(m->type, FE_CELL_TRI);
  cr_assert_eq(m->dim, 2);
  cr_assert_eq(m->nvf, 2);
  int hole, outer, plate;
  cr_assert_eq(fe_mesh_tag_id(m, "hole", 1, &hole), 0);
  cr_assert_eq(fe_mesh_tag_id(m, "outer", 1, &outer), 0);
  cr_assert_eq(fe_mesh_tag_id(m, "plate", 2, &plate), 0);
  cr_assert_neq(fe_mesh_tag_id(m, "lung", 1, &plate), 0);
  cr_assert(strstr(fe_error_message(), "hole") && strstr(fe_error_message(), "outer"));
  int *v, n;
  cr_assert_eq(fe_mesh_tag_vertices(m, hole, &v, &n), 0);
  for (int k = 0; k < n; k++) { /* on the circle of radius 0.25 about (1, 0.5) */
    double dx = m->coords[3 * v[k]] - 1, dy = m->coords[3 * v[k] + 1] - 0.5;
    cr_assert_float_eq(sqrt(dx * dx + dy * dy), 0.25, 1e-9);
  }
  free(v);
  cr_assert_eq(fe_mesh_check(m), 0);
  fe_mesh_free(m);
}

Test(gmsh, torso_has_four_regions_and_skin)
{
  NEED_GMSH();
  fe_mesh *m = load("meshes/torso.geo");
  static const char *const regions[4] = {"body", "lung_left", "lung_right", "heart"};
  int count[4] = {0};
  for (int r = 0; r < 4; r++) {
    int id;
    cr_assert_eq(fe_mesh_tag_id(m, regions[r], 3, &id), 0, "%s", fe_error_message());
    for (int e = 0; e < m->ncells; e++) count[r] += m->cell_tags[e] == id;
    cr_assert_gt(count[r], 0, "region %s has no cells", regions[r]);
  }
  cr_assert_eq(count[0] + count[1] + count[2] + count[3], m->ncells);
  int skin;
  cr_assert_eq(fe_mesh_tag_id(m, "skin", 2, &skin), 0);
  fe_mesh_free(m);
}

Test(gmsh, no_physical_groups_gives_boundary_and_domain)
{
  NEED_GMSH();
  const char geo[] = "SetFactory(\"OpenCASCADE\");\nBox(1) = {0, 0, 0, 1, 2, 3};\n"
                     "Mesh.MeshSizeMax = 0.6;\n";
  char *path = temp_file(".geo", geo, sizeof geo - 1);
  fe_mesh *m = load(path);
  cr_assert_float_eq(tet_volume(m), 6.0, 1e-12);
  int b, d, *v, n;
  cr_assert_eq(fe_mesh_tag_id(m, "boundary", 2, &b), 0, "%s", fe_error_message());
  cr_assert_eq(fe_mesh_tag_id(m, "domain", 3, &d), 0, "%s", fe_error_message());
  cr_assert_gt(m->nfacets, 0);
  cr_assert_eq(fe_mesh_tag_vertices(m, b, &v, &n), 0);
  for (int k = 0; k < n; k++) { /* every boundary vertex lies on a face of the box */
    const double *x = m->coords + 3 * v[k];
    int on = fabs(x[0]) < 1e-12 || fabs(x[0] - 1) < 1e-12 || fabs(x[1]) < 1e-12 ||
             fabs(x[1] - 2) < 1e-12 || fabs(x[2]) < 1e-12 || fabs(x[2] - 3) < 1e-12;
    cr_assert(on, "boundary vertex %d is inside the box", v[k]);
  }
  free(v);
  fe_mesh_free(m);
  unlink(path);
  free(path);
}

Test(gmsh, options_size_order_algorithm)
{
  NEED_GMSH();
  fe_load_opts o;
  fe_load_opts_default(&o);
  o.size = 0.5;
  o.order = 2;
  o.algorithm = "hxt";
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_load("meshes/cube.geo", &o, &m), 0, "%s", fe_error_message());
  cr_assert_eq(m->nvc, 4); /* order 2: cells keep their vertices, the rest is geometry */
  cr_assert_eq(m->geo_order, 2);
  cr_assert_eq(m->ngn, 10);
  cr_assert_float_eq(tet_volume(m), 1.0, 1e-12);
  fe_mesh_free(m);
  o.algorithm = "magic";
  cr_assert_eq(fe_mesh_load("meshes/cube.geo", &o, &m), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "magic"));
}

Test(gmsh, bad_files_are_errors_naming_the_file)
{
  NEED_GMSH();
  load_fails("meshes/no-such-file.msh", FE_ERR_IO, "cannot open");
  char *empty = temp_file(".msh", "", 0);
  load_fails(empty, FE_ERR_IO, "empty file");
  unsigned char bytes[4096];
  srand(7);
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)rand();
  char *noise = temp_file(".msh", bytes, sizeof bytes);
  load_fails(noise, FE_ERR_IO, "Gmsh could not read it");
  FILE *f = fopen("meshes/cube_v2.msh", "rb");
  cr_assert(f);
  char head[20000];
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  char *cut = temp_file(".msh", head, n);
  load_fails(cut, FE_ERR_IO, "Gmsh could not read it");
  const char bad[] = "Point(1) = {0, 0, 0;\nLine(1) = {1 2};\n";
  char *syntax = temp_file(".geo", bad, sizeof bad - 1);
  load_fails(syntax, FE_ERR_IO, "syntax error");
  const char version[] = "$MeshFormat\n9.9 0 8\n$EndMeshFormat\n";
  char *future = temp_file(".msh", version, sizeof version - 1);
  load_fails(future, FE_ERR_IO, "9.9");
  /* and the SDK still reads a good file afterwards */
  fe_mesh *m = load("meshes/cube.geo");
  fe_mesh_free(m);
  char *all[] = {empty, noise, cut, syntax, future};
  for (int i = 0; i < 5; i++) unlink(all[i]), free(all[i]);
}

/* ----- fe_mesh_from_arrays, no SDK needed ----- */

/* Two tets sharing the face (20, 30, 40), with sparse tags and one unused node (99). */
static const size_t tags5[6] = {10, 20, 30, 40, 50, 99};
static const double coords5[18] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 5, 5, 5};
static const size_t two_tets[8] = {10, 20, 30, 40, 20, 50, 30, 40};

static fe_mesh_arrays arrays(const fe_mesh_block *blocks, size_t nblocks)
{
  fe_mesh_arrays a = {"test.msh", 6, tags5, coords5, nblocks, blocks, 0, NULL};
  return a;
}

Test(mesh_arrays, sparse_tags_are_renumbered_compactly)
{
  fe_mesh_block b = {4, 1, 2, two_tets};
  fe_mesh_arrays a = arrays(&b, 1);
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  cr_assert_eq(m->nvertices, 5); /* node 99 is not a vertex of any cell */
  cr_assert_eq(m->ncells, 2);
  cr_assert_eq(m->nfacets, 6); /* the shared face is interior */
  int id;
  cr_assert_eq(fe_mesh_tag_id(m, "boundary", 2, &id), 0);
  cr_assert_eq(fe_mesh_tag_id(m, "domain", 3, &id), 0);
  for (int k = 0; k < 8; k++) cr_assert(m->cells[k] >= 0 && m->cells[k] < 5);
  fe_mesh_free(m);
}

Test(mesh_arrays, named_groups_become_tags)
{
  const size_t tri[3] = {10, 20, 30};
  fe_mesh_block b[2] = {{4, 1, 2, two_tets}, {2, 7, 1, tri}};
  const int vol[1] = {1}, surf[1] = {7};
  fe_mesh_group g[2] = {{3, 5, "heart", 1, vol}, {2, 3, "", 1, surf}};
  fe_mesh_arrays a = arrays(b, 2);
  a.ngroups = 2, a.groups = g;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  int id;
  cr_assert_eq(fe_mesh_tag_id(m, "heart", 3, &id), 0);
  cr_assert_eq(id, 5);
  cr_assert_eq(m->cell_tags[0], 5);
  cr_assert_eq(fe_mesh_tag_id(m, "3", 2, &id), 0, "unnamed groups go by their number");
  cr_assert_eq(m->nfacets, 1);
  fe_mesh_free(m);
}

Test(mesh_arrays, missing_node_is_an_error)
{
  const size_t bad[4] = {10, 20, 30, 77};
  fe_mesh_block b = {4, 1, 1, bad};
  fe_mesh_arrays a = arrays(&b, 1);
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert_null(m);
  cr_assert(strstr(fe_error_message(), "node 77") && strstr(fe_error_message(), "test.msh"),
            "%s", fe_error_message());
}

Test(mesh_arrays, mixed_types_name_the_types)
{
  const size_t prism[6] = {10, 20, 30, 40, 50, 99};
  fe_mesh_block b[2] = {{4, 1, 2, two_tets}, {6, 2, 1, prism}};
  fe_mesh_arrays a = arrays(b, 2);
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "tet, prism"), "%s", fe_error_message());
}

Test(mesh_arrays, zero_volume_cell_is_named)
{
  const size_t flat[8] = {10, 20, 30, 40, 10, 20, 30, 99}; /* 99 = (5,5,5): not in z = 0 */
  static const double c[18] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0};
  fe_mesh_block b = {4, 1, 2, flat};
  fe_mesh_arrays a = arrays(&b, 1);
  a.coords = c; /* node 99 at (1, 1, 0): the second tet is flat */
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "degenerate") && strstr(fe_error_message(), "test.msh"),
            "%s", fe_error_message());
  cr_assert(strstr(fe_error_message(), "cell "), "%s", fe_error_message());
}

Test(mesh_arrays, malformed_input_is_refused)
{
  fe_mesh *m = NULL;
  fe_mesh_block b = {4, 1, 2, two_tets};
  fe_mesh_arrays a = arrays(&b, 1);
  a.nnodes = 0;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  const size_t dup[6] = {10, 20, 30, 40, 50, 10};
  a = arrays(&b, 1);
  a.node_tags = dup;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "twice"), "%s", fe_error_message());
  fe_mesh_block unknown = {99, 1, 1, two_tets};
  a = arrays(&unknown, 1);
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "unknown element type 99"), "%s", fe_error_message());
  fe_mesh_block nonodes = {4, 1, 2, NULL};
  a = arrays(&nonodes, 1);
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  fe_mesh_block pyramid = {7, 1, 1, two_tets};
  a = arrays(&pyramid, 1);
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "pyramid"), "%s", fe_error_message());
  cr_assert_null(m);
}

Test(mesh_arrays, load_without_sdk_says_why)
{
#ifdef FE_HAVE_GMSH
  cr_skip_test("built with the Gmsh SDK");
#else
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_load("meshes/cube.geo", NULL, &m), FE_ERR_UNAVAILABLE);
  cr_assert(strstr(fe_error_message(), "libgmsh-dev"));
#endif
}

/* ----- curved (second-order) geometry ----- */

/* Load path with order and size (0: the file's own). */
static fe_mesh *load_order(const char *path, int order, double size)
{
  fe_load_opts o;
  fe_load_opts_default(&o);
  o.order = order;
  o.size = size;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_load(path, &o, &m), 0, "%s: %s", path, fe_error_message());
  return m;
}

/* Determinant of the dim x dim row-major J. */
static double det_of(const double *J, int dim)
{
  if (dim == 2) return J[0] * J[3] - J[1] * J[2];
  return J[0] * (J[4] * J[8] - J[5] * J[7]) - J[1] * (J[3] * J[8] - J[5] * J[6]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* Measure of m by fe_mesh_geo_map and a quadrature rule of degree 6 (tet10's det J). */
static double map_volume(const fe_mesh *m)
{
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create(m->type, 6, &q), 0, "%s", fe_error_message());
  double sum = 0;
  for (int e = 0; e < m->ncells; e++)
    for (int k = 0; k < q.npoints; k++) {
      double J[9];
      cr_assert_eq(fe_mesh_geo_map(m, e, q.points + (size_t)q.dim * k, NULL, J), 0);
      sum += q.weights[k] * det_of(J, m->dim);
    }
  fe_quadrature_free(&q);
  return sum;
}

Test(gmsh, sphere_order_2_is_curved_and_far_closer_in_volume)
{
  NEED_GMSH();
  const double exact = 4.0 / 3.0 * M_PI;
  fe_mesh *straight = load_order("meshes/sphere.geo", 1, 0);
  fe_mesh *curved = load_order("meshes/sphere.geo", 2, 0);
  cr_assert_eq(straight->geo_order, 1);
  cr_assert_null(straight->geo_cells);
  cr_assert_eq(curved->geo_order, 2);
  cr_assert_eq(curved->ngn, 10);
  cr_assert_eq(curved->ncells, straight->ncells);
  cr_assert_gt(curved->ngeo_nodes, curved->nvertices);
  const double e1 = fabs(map_volume(straight) - exact), e2 = fabs(map_volume(curved) - exact);
  cr_assert_gt(e1, 1e-2, "the straight ball should miss the volume: %g", e1);
  cr_assert_lt(e2 * 10, e1, "curved error %g is not 10x below the straight %g", e2, e1);
  for (int n = 0; n < curved->ngeo_nodes; n++) { /* every node on or in the unit ball */
    const double *x = curved->geo_coords + 3 * n;
    cr_assert_leq(sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]), 1 + 1e-12);
  }
  int id;
  cr_assert_eq(fe_mesh_tag_id(curved, "sphere", 2, &id), 0, "%s", fe_error_message());
  cr_assert_eq(fe_mesh_tag_id(curved, "ball", 3, &id), 0, "%s", fe_error_message());
  char buf[1024];
  fe_mesh_summary(curved, buf, sizeof buf);
  cr_assert(strstr(buf, "curved (order 2)"), "%s", buf);
  fe_mesh_summary(straight, buf, sizeof buf);
  cr_assert_null(strstr(buf, "curved"), "%s", buf);
  /* reordering moves the nodes with the cells: the same geometry */
  const double v2 = map_volume(curved);
  cr_assert_eq(fe_mesh_reorder(curved, "rcm"), 0, "%s", fe_error_message());
  cr_assert_float_eq(map_volume(curved), v2, 1e-12);
  cr_assert_eq(fe_mesh_reorder(curved, "hilbert"), 0, "%s", fe_error_message());
  cr_assert_float_eq(map_volume(curved), v2, 1e-12);
  fe_mesh_quality_info q;
  cr_assert_eq(fe_mesh_quality(curved, &q), 0, "%s", fe_error_message());
  cr_assert_float_eq(q.volume, v2, 1e-12);
  fe_mesh_free(straight);
  fe_mesh_free(curved);
}

/* Gmsh 4.8 frees the prism face closures it makes with new[] by a plain delete
 * (ClosureGen::getFaceClosurePrism): AddressSanitizer stops there, so sanitized builds leave
 * the SDK's prism bases alone. */
#ifdef __SANITIZE_ADDRESS__
#define SDK_PRISMS 0
#else
#define SDK_PRISMS 1
#endif

Test(gmsh, node_order_tables_match_the_sdk)
{
  NEED_GMSH();
#ifdef FE_HAVE_GMSH
  static const struct { int type; fe_cell_type cell; int order; } kinds[] = {
      {2, FE_CELL_TRI, 1},  {3, FE_CELL_QUAD, 1},  {4, FE_CELL_TET, 1},  {5, FE_CELL_HEX, 1},
      {6, FE_CELL_PRISM, 1}, {9, FE_CELL_TRI, 2},  {10, FE_CELL_QUAD, 2}, {11, FE_CELL_TET, 2},
      {12, FE_CELL_HEX, 2}, {13, FE_CELL_PRISM, 2}};
  int ierr = 0;
  gmshInitialize(0, NULL, 0, &ierr);
  cr_assert_eq(ierr, 0);
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    if (kinds[i].cell == FE_CELL_PRISM && !SDK_PRISMS) continue;
    char *name = NULL;
    int dim, order, nn, np, n;
    double *local = NULL;
    size_t nlocal = 0;
    gmshModelMeshGetElementProperties(kinds[i].type, &name, &dim, &order, &nn, &local, &nlocal,
                                      &np, &ierr);
    cr_assert_eq(ierr, 0);
    const double *ref = fe_mesh_geo_nodes(kinds[i].cell, kinds[i].order, &n);
    cr_assert_eq(n, nn, "%s: %d nodes, Gmsh has %d", name, n, nn);
    cr_assert_eq(dim, fe_cell_dim(kinds[i].cell));
    for (int k = 0; k < nn; k++)
      for (int d = 0; d < dim; d++)
        cr_assert_float_eq(ref[3 * k + d], local[k * dim + d], 1e-14, "%s node %d", name, k);
    gmshFree(name);
    gmshFree(local);
  }
  gmshFinalize(&ierr);
#endif
}

#ifdef FE_HAVE_GMSH
/* Mesh geo (a file name) with Gmsh at order 2 and compare fe_mesh_geo_map against
 * gmshModelMeshGetJacobians for the elements of `type` at a few reference points. felab's
 * cells are reordered and renumbered: each Gmsh element is found by its vertices. */
static void compare_jacobians(const char *geo, int type, const double *points, int npoints)
{
  int ierr = 0;
  gmshInitialize(0, NULL, 0, &ierr);
  gmshOptionSetNumber("General.Terminal", 0, &ierr);
  gmshOpen(geo, &ierr);
  cr_assert_eq(ierr, 0, "%s", geo);
  int dim = gmshModelGetDimension(&ierr);
  gmshModelMeshGenerate(dim, &ierr);
  gmshModelMeshSetOrder(2, &ierr);
  cr_assert_eq(ierr, 0);
  size_t *ntags = NULL, nn = 0, ncoord = 0, nparam = 0, *etags = NULL, ne = 0, *enodes = NULL,
         nen = 0;
  double *xyz = NULL, *param = NULL;
  gmshModelMeshGetNodes(&ntags, &nn, &xyz, &ncoord, &param, &nparam, -1, -1, 0, 0, &ierr);
  gmshModelMeshGetElementsByType(type, &etags, &ne, &enodes, &nen, -1, 0, 1, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_gt(ne, 0, "%s: no elements of type %d", geo, type);
  double *jac = NULL, *det = NULL, *coord = NULL;
  size_t njac = 0, ndet = 0, ncoords = 0;
  gmshModelMeshGetJacobians(type, (double *)points, 3 * (size_t)npoints, &jac, &njac, &det, &ndet,
                            &coord, &ncoords, -1, 0, 1, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_eq(njac, 9 * ne * npoints);
  /* felab's mesh of the same nodes and elements */
  fe_mesh_block b = {type, 1, ne, enodes};
  fe_mesh_arrays a = {geo, nn, ntags, xyz, 1, &b, 0, NULL};
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  cr_assert_eq(m->geo_order, 2);
  size_t maxtag = 0;
  for (size_t i = 0; i < nn; i++) maxtag = ntags[i] > maxtag ? ntags[i] : maxtag;
  long *at = malloc((maxtag + 1) * sizeof *at);
  for (size_t i = 0; i < nn; i++) at[ntags[i]] = (long)i;
  const int npe = (int)(nen / ne), nvc = m->nvc;
  int compared = 0;
  for (size_t e = 0; e < ne && compared < 40; e += 1 + ne / 40) {
    int cell = -1;
    for (int c = 0; c < m->ncells && cell < 0; c++) {
      int same = 1;
      for (int v = 0; v < nvc && same; v++)
        same = !memcmp(m->coords + 3 * m->cells[c * nvc + v],
                       xyz + 3 * at[enodes[e * npe + v]], 3 * sizeof(double));
      if (same) cell = c;
    }
    if (cell < 0) continue; /* a 2D cell felab turned counter-clockwise */
    for (int g = 0; g < npoints; g++) {
      double x[3], J[9];
      cr_assert_eq(fe_mesh_geo_map(m, cell, points + 3 * g, x, J), 0);
      const double *gj = jac + 9 * (e * npoints + g), *gx = coord + 3 * (e * npoints + g);
      for (int d = 0; d < 3; d++) cr_assert_float_eq(x[d], gx[d], 1e-10, "%s x", geo);
      for (int d = 0; d < m->dim; d++)
        for (int i = 0; i < m->dim; i++)
          cr_assert_float_eq(J[d * m->dim + i], gj[3 * i + d], 1e-10,
                             "%s element %zu point %d: dx%d/dxi%d", geo, e, g, d, i);
    }
    compared++;
  }
  cr_assert_gt(compared, 5, "%s: only %d elements compared", geo, compared);
  free(at);
  fe_mesh_free(m);
  gmshFree(ntags), gmshFree(xyz), gmshFree(param), gmshFree(etags), gmshFree(enodes);
  gmshFree(jac), gmshFree(det), gmshFree(coord);
  gmshFinalize(&ierr);
}
#endif

Test(gmsh, curved_map_matches_gmsh_jacobians)
{
  NEED_GMSH();
#ifdef FE_HAVE_GMSH
  static const double simplex[9] = {0.1, 0.2, 0.3, 0.25, 0.25, 0.25, 0.6, 0.1, 0.05};
  static const double tensor[9] = {-0.5, 0.3, 0.7, 0.9, -0.8, -0.1, 0, 0, 0};
  static const double prism[9] = {0.2, 0.3, -0.4, 0.6, 0.1, 0.9, 0.1, 0.7, 0};
  static const double tri[9] = {0.2, 0.3, 0, 0.7, 0.1, 0, 0.1, 0.8, 0};
  static const double quad[9] = {-0.5, 0.3, 0, 0.9, -0.8, 0, 0, 0, 0};
  const char ball[] = "SetFactory(\"OpenCASCADE\");\nSphere(1) = {0, 0, 0, 1};\n"
                      "Mesh.MeshSizeMax = 0.5;\n";
  const char hex[] = "SetFactory(\"OpenCASCADE\");\nDisk(1) = {0, 0, 0, 1};\n"
                     "Mesh.MeshSizeMax = 0.4;\nRecombine Surface{1};\n"
                     "Extrude {0, 0, 1} { Surface{1}; Layers{2}; Recombine; }\n"
                     "Mesh.SecondOrderIncomplete = 0;\n";
  const char wedge[] = "SetFactory(\"OpenCASCADE\");\nDisk(1) = {0, 0, 0, 1};\n"
                       "Mesh.MeshSizeMax = 0.4;\n"
                       "Extrude {0, 0, 1} { Surface{1}; Layers{2}; Recombine; }\n";
  const char disk[] = "SetFactory(\"OpenCASCADE\");\nDisk(1) = {0, 0, 0, 1};\n"
                      "Mesh.MeshSizeMax = 0.3;\n";
  const char qdisk[] = "SetFactory(\"OpenCASCADE\");\nDisk(1) = {0, 0, 0, 1};\n"
                       "Mesh.MeshSizeMax = 0.3;\nRecombine Surface{1};\n";
  struct { const char *text; size_t n; int type; const double *points; } cases[] = {
      {ball, sizeof ball - 1, 11, simplex},  {hex, sizeof hex - 1, 12, tensor},
      {wedge, sizeof wedge - 1, 13, prism}, {disk, sizeof disk - 1, 9, tri},
      {qdisk, sizeof qdisk - 1, 10, quad}};
  for (int i = 0; i < 5; i++) {
    if (cases[i].type == 13 && !SDK_PRISMS) continue;
    char *path = temp_file(".geo", cases[i].text, cases[i].n);
    compare_jacobians(path, cases[i].type, cases[i].points, 3);
    unlink(path);
    free(path);
  }
#endif
}

Test(gmsh, curved_geometries_of_every_cell_type_load)
{
  NEED_GMSH();
  const char hex[] = "SetFactory(\"OpenCASCADE\");\nDisk(1) = {0, 0, 0, 1};\n"
                     "Mesh.MeshSizeMax = 0.4;\nRecombine Surface{1};\n"
                     "Extrude {0, 0, 1} { Surface{1}; Layers{2}; Recombine; }\n";
  char *path = temp_file(".geo", hex, sizeof hex - 1);
  fe_mesh *s = load_order(path, 1, 0), *c = load_order(path, 2, 0);
  cr_assert_eq(c->type, FE_CELL_HEX);
  cr_assert_eq(c->ngn, 27);
  /* a cylinder of radius 1, height 1: the curved sides gain most of the missing volume */
  const double e1 = fabs(map_volume(s) - M_PI), e2 = fabs(map_volume(c) - M_PI);
  cr_assert_lt(e2 * 10, e1, "hex27: %g vs %g", e2, e1);
  fe_mesh_free(s), fe_mesh_free(c);
  unlink(path), free(path);
  fe_mesh *p = load_order("meshes/plate_hole.geo", 2, 0);
  const double area = 2 - M_PI * 0.25 * 0.25;
  cr_assert_eq(p->ngn, 6);
  cr_assert_float_eq(map_volume(p), area, 1e-5);
  fe_mesh_free(p);
}

Test(gmsh, msh_order_follows_the_options_and_round_trips)
{
  NEED_GMSH();
  /* a first-order .msh elevated: straight midpoints, the same volume */
  fe_mesh *m = load_order("meshes/cube_v41.msh", 2, 0);
  cr_assert_eq(m->geo_order, 2);
  cr_assert_float_eq(map_volume(m), 1.0, 1e-12);
  fe_mesh_free(m);
  /* a curved mesh written as .msh reads back curved (order 2) or straight (order 1) */
  fe_mesh *c = load_order("meshes/sphere.geo", 2, 0);
  char path[256];
  snprintf(path, sizeof path, "/tmp/felab-gmsh-%d-curved.msh", (int)getpid());
  cr_assert_eq(fe_msh_write(path, c, 0, NULL), 0, "%s", fe_error_message());
  fe_mesh *back = load_order(path, 2, 0), *flat = load_order(path, 1, 0);
  cr_assert_eq(back->geo_order, 2);
  cr_assert_eq(back->ngeo_nodes, c->ngeo_nodes);
  cr_assert_float_eq(map_volume(back), map_volume(c), 1e-12);
  cr_assert_eq(flat->geo_order, 1);
  cr_assert_null(flat->geo_cells);
  cr_assert_eq(flat->nvertices, c->nvertices);
  unlink(path);
  fe_mesh_free(c), fe_mesh_free(back), fe_mesh_free(flat);
}

/* ----- curved cells through fe_mesh_from_arrays, no SDK needed ----- */

/* One tet10 on the unit tet: vertices 1..4, edge nodes 5..10 at the midpoints, except that
 * node `moved` (when >= 5) goes to x. */
static fe_mesh_arrays tet10_arrays(size_t tags[10], double c[30], size_t cell[10], int moved,
                                   const double *x, fe_mesh_block *b)
{
  static const double ref[10][3] = {{0, 0, 0},     {1, 0, 0},   {0, 1, 0},     {0, 0, 1},
                                    {0.5, 0, 0},   {0.5, 0.5, 0}, {0, 0.5, 0}, {0, 0, 0.5},
                                    {0, 0.5, 0.5}, {0.5, 0, 0.5}};
  for (int k = 0; k < 10; k++) {
    tags[k] = (size_t)k + 1, cell[k] = (size_t)k + 1;
    memcpy(c + 3 * k, k + 1 == moved ? x : ref[k], 3 * sizeof(double));
  }
  *b = (fe_mesh_block){11, 1, 1, cell};
  fe_mesh_arrays a = {"curved.msh", 10, tags, c, 1, b, 0, NULL};
  return a;
}

Test(mesh_arrays, tet10_gives_a_curved_mesh)
{
  size_t tags[10], cell[10];
  double c[30];
  fe_mesh_block b;
  const double bulge[3] = {0.55, 0.55, -0.05}; /* edge 12 bent outwards a little */
  fe_mesh_arrays a = tet10_arrays(tags, c, cell, 6, bulge, &b);
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  cr_assert_eq(m->geo_order, 2);
  cr_assert_eq(m->ngn, 10);
  cr_assert_eq(m->nvertices, 4);
  cr_assert_eq(m->ngeo_nodes, 10);
  for (int k = 0; k < 4; k++) cr_assert_eq(m->geo_cells[k], m->cells[k]);
  const double *ref = fe_mesh_geo_nodes(FE_CELL_TET, 2, NULL);
  for (int k = 0; k < 10; k++) { /* the map interpolates its nodes */
    double x[3];
    cr_assert_eq(fe_mesh_geo_map(m, 0, ref + 3 * k, x, NULL), 0);
    for (int d = 0; d < 3; d++)
      cr_assert_float_eq(x[d], c[3 * k + d], 1e-14, "node %d", k);
  }
  fe_mesh_free(m);
}

Test(mesh_arrays, curved_cell_with_an_inverted_node_is_named)
{
  size_t tags[10], cell[10];
  double c[30];
  fe_mesh_block b;
  const double far[3] = {0.9, 0, 0}; /* node of edge 01 past 3/4: det J < 0 at vertex 1 */
  fe_mesh_arrays a = tet10_arrays(tags, c, cell, 5, far, &b);
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert_null(m);
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, "cell 0 (tet10) is inverted") && strstr(msg, "curved.msh") &&
                strstr(msg, "node 1"),
            "%s", msg);
  const double mild[3] = {0.7, 0, 0}; /* before 3/4: still valid */
  a = tet10_arrays(tags, c, cell, 5, mild, &b);
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  fe_mesh_free(m);
}

Test(mesh_arrays, incomplete_second_order_is_refused)
{
  static const size_t nodes[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                   11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  size_t tags[20];
  double c[60] = {0};
  for (int k = 0; k < 20; k++) tags[k] = (size_t)k + 1, c[3 * k] = k;
  static const int types[3] = {16, 17, 18};
  static const char *const names[3] = {"quad8", "hex20", "prism15"};
  for (int i = 0; i < 3; i++) {
    fe_mesh_block b = {types[i], 1, 1, nodes};
    fe_mesh_arrays a = {"serendip.msh", 20, tags, c, 1, &b, 0, NULL};
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
    cr_assert_null(m);
    const char *msg = fe_error_message();
    cr_assert(strstr(msg, names[i]) && strstr(msg, "Mesh.SecondOrderIncomplete = 0"), "%s", msg);
  }
}

Test(mesh_arrays, mixed_orders_name_both)
{
  size_t tags[10], cell[10];
  double c[30];
  fe_mesh_block b[2];
  fe_mesh_arrays a = tet10_arrays(tags, c, cell, 0, NULL, &b[0]);
  static const size_t tet[4] = {1, 2, 3, 4};
  b[1] = (fe_mesh_block){4, 2, 1, tet};
  a.nblocks = 2, a.blocks = b;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, "tet10, tet") && strstr(msg, "first- and second-order"), "%s", msg);
}

Test(mesh_arrays, second_order_facets_tag_the_boundary)
{
  size_t tags[10], cell[10];
  double c[30];
  fe_mesh_block b[2];
  fe_mesh_arrays a = tet10_arrays(tags, c, cell, 0, NULL, &b[0]);
  static const size_t face[6] = {1, 2, 3, 5, 6, 7}; /* tri6 on z = 0 */
  b[1] = (fe_mesh_block){9, 7, 1, face};
  const int vol[1] = {1}, surf[1] = {7};
  fe_mesh_group g[2] = {{3, 1, "body", 1, vol}, {2, 2, "bottom", 1, surf}};
  a.nblocks = 2, a.blocks = b, a.ngroups = 2, a.groups = g;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
  cr_assert_eq(m->nfacets, 1);
  for (int k = 0; k < 3; k++) cr_assert_lt(m->facets[k], m->nvertices);
  fe_mesh_free(m);
  /* a facet naming an edge node as its vertex is refused */
  static const size_t bad[6] = {1, 2, 5, 3, 6, 7};
  b[1].nodes = bad;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "not a vertex"), "%s", fe_error_message());
}

Test(mesh_arrays, clockwise_curved_2d_cells_turn_with_their_nodes)
{
  /* tri6 and quad9 given clockwise, edges bent outwards: after the turn each edge node still
   * lies between the two vertices of its edge in Gmsh's order */
  static const size_t tri[6] = {1, 3, 2, 6, 5, 4};
  static const double tc[18] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0.5, -0.05, 0, 0.55, 0.55, 0,
                                -0.05, 0.5, 0};
  static const size_t tri_tags[6] = {1, 2, 3, 4, 5, 6};
  static const size_t quad[9] = {1, 4, 3, 2, 8, 7, 6, 5, 9};
  static const double qc[27] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0.5, -0.05, 0, 1.05, 0.5, 0,
                                0.5, 1.05, 0, -0.05, 0.5, 0, 0.5, 0.5, 0};
  static const size_t quad_tags[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int i = 0; i < 2; i++) {
    fe_mesh_block b = {i ? 10 : 9, 1, 1, i ? quad : tri};
    fe_mesh_arrays a = {"flip.msh", i ? 9 : 6, i ? quad_tags : tri_tags, i ? qc : tc, 1, &b, 0,
                        NULL};
    fe_mesh *m = NULL;
    cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s", fe_error_message());
    const int nv = m->nvc;
    const double *x0 = m->coords + 3 * m->cells[0], *x1 = m->coords + 3 * m->cells[1];
    const double *xl = m->coords + 3 * m->cells[nv - 1];
    const double area = (x1[0] - x0[0]) * (xl[1] - x0[1]) - (x1[1] - x0[1]) * (xl[0] - x0[0]);
    cr_assert_gt(area, 0);
    for (int k = 0; k < nv; k++) { /* edge node nv + k sits near the middle of edge k */
      const double *p = m->geo_coords + 3 * m->geo_cells[nv + k];
      const double *u = m->geo_coords + 3 * m->geo_cells[k];
      const double *w = m->geo_coords + 3 * m->geo_cells[(k + 1) % nv];
      const double dx = p[0] - (u[0] + w[0]) / 2, dy = p[1] - (u[1] + w[1]) / 2;
      cr_assert_lt(sqrt(dx * dx + dy * dy), 0.08, "%s edge %d", i ? "quad9" : "tri6", k);
    }
    fe_mesh_free(m);
  }
}
