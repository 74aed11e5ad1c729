/* felab VTU output: a VTK XML UnstructuredGrid in ASCII, readable by ParaView and VisIt.
 * Numbers are written with 17 significant digits so a file round-trips doubles exactly.
 * Gmsh and VTK vertex orders agree for triangles, quadrilaterals, tetrahedra and hexahedra;
 * a VTK wedge wants its first triangle to face away from the second, the reverse of Gmsh,
 * so prisms are written as (0, 2, 1, 3, 5, 4).
 *
 * Curved meshes are written as VTK's quadratic cells (quadratic triangle, biquadratic quad,
 * quadratic tetra, triquadratic hexahedron, biquadratic-quadratic wedge) on every geometry
 * node; point fields, given at the vertices, are extended to the other nodes by the straight
 * interpolant of each cell, so ParaView draws the curved shape with the same field. */
#include "engine/mesh/io/vtu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/error.h"

/* VTK cell type numbers, indexed by fe_cell_type. */
static const int vtk_cell_type[] = {5, 9, 10, 12, 13}; /* tri quad tet hex wedge */
static const int vtk_cell_type2[] = {22, 28, 24, 29, 32}; /* their second-order kinds */
static const int prism_to_vtk[6] = {0, 2, 1, 3, 5, 4};

/* VTK's node order of the second-order cells, each node as the set (bit mask) of the VTK
 * vertices it is the center of: vertices, edges, then faces and the cell center, as VTK's
 * cell classes list them. The Gmsh node of each is found by its reference coordinates. */
static const unsigned vtk_tri6[6] = {0x1, 0x2, 0x4, 0x3, 0x6, 0x5};
static const unsigned vtk_quad9[9] = {0x1, 0x2, 0x4, 0x8, 0x3, 0x6, 0xc, 0x9, 0xf};
static const unsigned vtk_tet10[10] = {0x1, 0x2, 0x4, 0x8, 0x3, 0x6, 0x5, 0x9, 0xa, 0xc};
static const unsigned vtk_hex27[27] = {
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80,             /* vertices */
    0x03, 0x06, 0x0c, 0x09, 0x30, 0x60, 0xc0, 0x90,             /* bottom, top edges */
    0x11, 0x22, 0x44, 0x88,                                     /* vertical edges */
    0x99, 0x66, 0x33, 0xcc, 0x0f, 0xf0, 0xff};                  /* x-, x+, y-, y+, z-, z+ */
static const unsigned vtk_wedge18[18] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x03, 0x06, 0x05,
                                         0x18, 0x30, 0x28, 0x09, 0x12, 0x24, 0x1b, 0x36, 0x2d};

/* perm[i]: the Gmsh node written as VTK node i of a second-order cell of type t. */
static int vtk_order2(fe_cell_type t, int *perm)
{
  static const unsigned *const sets[] = {vtk_tri6, vtk_quad9, vtk_tet10, vtk_hex27, vtk_wedge18};
  int n;
  const double *ref = fe_mesh_geo_nodes(t, 2, &n);
  const int nv = fe_cell_nvertices(t);
  for (int i = 0; i < n; i++) {
    double c[3] = {0, 0, 0};
    int count = 0;
    for (int v = 0; v < nv; v++) {
      if (!(sets[t][i] >> v & 1)) continue;
      const int g = t == FE_CELL_PRISM ? prism_to_vtk[v] : v; /* VTK vertex -> Gmsh */
      for (int d = 0; d < 3; d++) c[d] += ref[3 * g + d];
      count++;
    }
    perm[i] = -1;
    for (int k = 0; k < n && perm[i] < 0; k++)
      if (fabs(ref[3 * k] - c[0] / count) + fabs(ref[3 * k + 1] - c[1] / count) +
              fabs(ref[3 * k + 2] - c[2] / count) < 1e-12)
        perm[i] = k;
    FE_ASSERT(perm[i] >= 0, FE_ERR_INTERNAL, "vtu: no %s node matches VTK node %d",
              fe_cell_name(t), i);
  }
  return 0;
}

/* Write s as an XML attribute value, escaping the characters XML reserves. */
void fe_vtu_escaped(FILE *f, const char *s)
{
  for (; *s; s++) switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
}

/* Open path for writing; if its folder is missing, create that one folder and retry. */
FILE *fe_vtu_open(const char *path)
{
  FILE *f = fopen(path, "w");
  if (f || errno != ENOENT) return f;
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return NULL;
  char dir[4096];
  size_t len = (size_t)(slash - path);
  if (len >= sizeof dir) return NULL;
  memcpy(dir, path, len);
  dir[len] = '\0';
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) return NULL;
  return fopen(path, "w");
}

/* One Float64 DataArray with values[count * ncomp], one tuple per line. */
static void write_doubles(FILE *f, const char *name, int ncomp, const double *values,
                          size_t count)
{
  fputs("        <DataArray type=\"Float64\" Name=\"", f);
  fe_vtu_escaped(f, name);
  fprintf(f, "\" NumberOfComponents=\"%d\" format=\"ascii\">\n", ncomp);
  for (size_t i = 0; i < count; i++) {
    fputs("          ", f);
    for (int c = 0; c < ncomp; c++)
      fprintf(f, c ? " %.17g" : "%.17g", values[i * ncomp + c]);
    fputc('\n', f);
  }
  fputs("        </DataArray>\n", f);
}

/* The Cells section: connectivity (VTK vertex order), offsets and VTK type numbers; perm:
 * NULL for straight cells, else the VTK order of the second-order nodes (geo_cells). */
static void write_cells(FILE *f, const fe_mesh *m, const int *perm)
{
  const int n = perm ? m->ngn : m->nvc;
  const int type = perm ? vtk_cell_type2[m->type] : vtk_cell_type[m->type];
  fputs("      <Cells>\n"
        "        <DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++) {
    const int *c = (perm ? m->geo_cells : m->cells) + (size_t)e * n;
    fputs("          ", f);
    for (int v = 0; v < n; v++)
      fprintf(f, v ? " %d" : "%d",
              c[perm ? perm[v] : m->type == FE_CELL_PRISM ? prism_to_vtk[v] : v]);
    fputc('\n', f);
  }
  fputs("        </DataArray>\n"
        "        <DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++)
    fprintf(f, "%s%lld%s", e % 8 ? " " : "          ", (long long)(e + 1) * n,
            e % 8 == 7 || e == m->ncells - 1 ? "\n" : "");
  fputs("        </DataArray>\n"
        "        <DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++)
    fprintf(f, "%s%d%s", e % 16 ? " " : "          ", type,
            e % 16 == 15 || e == m->ncells - 1 ? "\n" : "");
  fputs("        </DataArray>\n      </Cells>\n", f);
}

/* Point data (per-vertex fields, extended to every geometry node when curved) and cell data
 * (region, then per-cell fields). */
static int write_fields(FILE *f, const fe_mesh *m, int curved, int nfields,
                        const fe_vtu_field *fields)
{
  fputs("      <PointData>\n", f);
  for (int i = 0; i < nfields; i++) {
    if (fields[i].per_cell) continue;
    if (!curved) {
      write_doubles(f, fields[i].name, 1, fields[i].values, (size_t)m->nvertices);
      continue;
    }
    double *all;
    FE_CHECK(fe_mesh_geo_values(m, fields[i].values, &all));
    write_doubles(f, fields[i].name, 1, all, (size_t)m->ngeo_nodes);
    free(all);
  }
  fputs("      </PointData>\n      <CellData>\n", f);
  fputs("        <DataArray type=\"Int32\" Name=\"region\" format=\"ascii\">\n", f);
  for (int e = 0; e < m->ncells; e++)
    fprintf(f, "%s%d%s", e % 16 ? " " : "          ", m->cell_tags ? m->cell_tags[e] : 0,
            e % 16 == 15 || e == m->ncells - 1 ? "\n" : "");
  fputs("        </DataArray>\n", f);
  for (int i = 0; i < nfields; i++)
    if (fields[i].per_cell)
      write_doubles(f, fields[i].name, 1, fields[i].values, (size_t)m->ncells);
  fputs("      </CellData>\n", f);
  return 0;
}

/* Write mesh and fields to path as ASCII VTU; the folder is created if it is missing. */
int fe_vtu_write(const char *path, const fe_mesh *m, int nfields, const fe_vtu_field *fields)
{
  FE_ASSERT(path && *path, FE_ERR_ARG, "vtu: no file name");
  FE_ASSERT(m, FE_ERR_ARG, "vtu '%s': no mesh", path);
  FE_ASSERT((unsigned)m->type < sizeof vtk_cell_type / sizeof vtk_cell_type[0], FE_ERR_ARG,
            "vtu '%s': unknown cell type %d", path, (int)m->type);
  FE_ASSERT(nfields >= 0 && (nfields == 0 || fields), FE_ERR_ARG, "vtu '%s': bad field list",
            path);
  for (int i = 0; i < nfields; i++) {
    FE_ASSERT(fields[i].name && *fields[i].name, FE_ERR_ARG, "vtu '%s': field %d has no name",
              path, i + 1);
    FE_ASSERT(fields[i].values, FE_ERR_ARG, "vtu '%s': field '%s' has no values", path,
              fields[i].name);
  }
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  int perm[27];
  if (curved) FE_CHECK(vtk_order2(m->type, perm));
  const int npoints = curved ? m->ngeo_nodes : m->nvertices;
  FILE *f = fe_vtu_open(path);
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write '%s': %s", path, strerror(errno));

  fputs("<?xml version=\"1.0\"?>\n"
        "<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" byte_order=\"LittleEndian\">\n"
        "  <UnstructuredGrid>\n",
        f);
  fprintf(f, "    <Piece NumberOfPoints=\"%d\" NumberOfCells=\"%d\">\n", npoints, m->ncells);
  fputs("      <Points>\n", f);
  write_doubles(f, "coordinates", 3, curved ? m->geo_coords : m->coords, (size_t)npoints);
  fputs("      </Points>\n", f);
  write_cells(f, m, curved ? perm : NULL);
  int rc = write_fields(f, m, curved, nfields, fields);
  if (rc) {
    fclose(f);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  fputs("    </Piece>\n  </UnstructuredGrid>\n</VTKFile>\n", f);

  int failed = ferror(f);
  int saved = errno;
  if (fclose(f) != 0 && !failed) {
    failed = 1;
    saved = errno;
  }
  if (failed) FE_ERROR(FE_ERR_IO, "cannot write '%s': %s", path, strerror(saved ? saved : EIO));
  return 0;
}
