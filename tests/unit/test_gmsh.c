/* Meshes through the Gmsh SDK: .geo and .msh files, names, defaults without physical groups,
 * bad files, and the SDK-free conversion fe_mesh_from_arrays. Tests that need the SDK skip
 * in builds without it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/error.h"
#include "engine/mesh.h"

#ifdef FE_HAVE_GMSH
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
  cr_assert_eq(m->nvc, 4); /* order 2: the vertex nodes only */
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
