/* VTU export: the file has the right counts, well-nested sections, exact coordinates, and
 * an unwritable path is an i/o error naming the path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/vtu.h"

/* Whole file as a NUL-terminated string (caller frees). */
static char *read_text(const char *path)
{
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot read back %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(n + 1);
  cr_assert_eq(fread(text, 1, n, f), (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

/* Occurrences of needle in text. */
static int count_of(const char *text, const char *needle)
{
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* A small distorted box of the given type. */
static fe_mesh *small_box(fe_cell_type type)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = 2, o.cells[1] = 3, o.cells[2] = 2;
  o.upper[0] = 0.3;
  o.distort = 0.8;
  fe_mesh *m;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

Test(vtu, written_file_has_counts_and_closed_sections)
{
  fe_mesh *m = small_box(FE_CELL_HEX);
  double *u = malloc(m->nvertices * sizeof(double)), *k = malloc(m->ncells * sizeof(double));
  for (int v = 0; v < m->nvertices; v++) u[v] = m->coords[3 * v] / 3;
  for (int e = 0; e < m->ncells; e++) k[e] = e + 0.5;
  fe_vtu_field fields[2] = {{"u", u, 0}, {"kappa", k, 1}};
  char dir[64], path[96];
  snprintf(dir, sizeof dir, "/tmp/felab-vtu-%d", (int)getpid());
  snprintf(path, sizeof path, "%s/box.vtu", dir); /* the folder does not exist yet */
  cr_assert_eq(fe_vtu_write(path, m, 2, fields), 0, "%s", fe_error_message());

  char *text = read_text(path);
  cr_assert(strstr(text, "<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" "
                         "byte_order=\"LittleEndian\">"));
  cr_assert(strstr(text, "<Piece NumberOfPoints=\"36\" NumberOfCells=\"12\">"), "%.400s", text);
  const char *closing[] = {"</DataArray>", "</Points>", "</Cells>", "</PointData>",
                           "</CellData>",  "</Piece>",  "</UnstructuredGrid>", "</VTKFile>"};
  for (int i = 0; i < 8; i++) cr_assert(strstr(text, closing[i]), "missing %s", closing[i]);
  cr_assert_eq(count_of(text, "<DataArray"), count_of(text, "</DataArray>"));
  cr_assert_eq(count_of(text, "<DataArray"), 7); /* points, 3 cell arrays, u, region, kappa */
  cr_assert(strstr(text, "Name=\"u\""));
  cr_assert(strstr(text, "Name=\"kappa\""));
  cr_assert(strstr(text, "Name=\"region\""));
  cr_assert(strstr(text, "12 12 12"), "hex cells are VTK type 12");
  cr_assert(strstr(text, "</CellData>") > strstr(text, "Name=\"kappa\""));

  /* coordinates come back bit for bit */
  const char *p = strchr(strstr(strstr(text, "<Points>"), "<DataArray"), '\n') + 1;
  for (int i = 0; i < 3 * m->nvertices; i++) {
    char *end;
    double x = strtod(p, &end);
    cr_assert(end != p, "coordinate %d missing", i);
    cr_assert_eq(x, m->coords[i], "coordinate %d: %.17g vs %.17g", i, x, m->coords[i]);
    p = end;
  }
  free(text);
  unlink(path);
  rmdir(dir);
  free(u);
  free(k);
  fe_mesh_free(m);
}

Test(vtu, tet_cells_are_type_10)
{
  fe_mesh *m = small_box(FE_CELL_TET);
  char path[64];
  snprintf(path, sizeof path, "/tmp/felab-vtu-tet-%d.vtu", (int)getpid());
  cr_assert_eq(fe_vtu_write(path, m, 0, NULL), 0, "%s", fe_error_message());
  char *text = read_text(path);
  cr_assert(strstr(text, "NumberOfCells=\"72\""));
  cr_assert(strstr(text, "10 10 10 10"));
  cr_assert_eq(count_of(text, "<DataArray"), 5);
  free(text);
  unlink(path);
  fe_mesh_free(m);
}

Test(vtu, unwritable_path_is_an_io_error)
{
  fe_mesh *m = small_box(FE_CELL_TET);
  const char *path = "/tmp/felab-no-such-dir/and-deeper/u.vtu"; /* two missing levels */
  cr_assert_eq(fe_vtu_write(path, m, 0, NULL), FE_ERR_IO);
  cr_assert(strstr(fe_error_message(), path), "%s", fe_error_message());
  cr_assert(strstr(fe_error_message(), "No such file"), "%s", fe_error_message());
  cr_assert_eq(fe_vtu_write("/tmp", m, 0, NULL), FE_ERR_IO); /* a folder */
  fe_mesh_free(m);
}

Test(vtu, field_without_values_is_an_argument_error)
{
  fe_mesh *m = small_box(FE_CELL_TET);
  fe_vtu_field f = {"u", NULL, 0};
  cr_assert_eq(fe_vtu_write("/tmp/felab-never.vtu", m, 1, &f), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "'u'"), "%s", fe_error_message());
  fe_mesh_free(m);
}
