/* felab VTU output: a VTK XML UnstructuredGrid in ASCII, readable by ParaView and VisIt.
 * Numbers are written with 17 significant digits so a file round-trips doubles exactly.
 * Gmsh and VTK vertex orders agree for triangles, quadrilaterals, tetrahedra and hexahedra;
 * a VTK wedge wants its first triangle to face away from the second, the reverse of Gmsh,
 * so prisms are written as (0, 2, 1, 3, 5, 4). */
#include "engine/vtu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/error.h"

/* VTK cell type numbers, indexed by fe_cell_type. */
static const int vtk_cell_type[] = {5, 9, 10, 12, 13}; /* tri quad tet hex wedge */
static const int prism_to_vtk[6] = {0, 2, 1, 3, 5, 4};

/* Write s as an XML attribute value, escaping the characters XML reserves. */
static void write_escaped(FILE *f, const char *s)
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
static FILE *open_for_writing(const char *path)
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
  write_escaped(f, name);
  fprintf(f, "\" NumberOfComponents=\"%d\" format=\"ascii\">\n", ncomp);
  for (size_t i = 0; i < count; i++) {
    fputs("          ", f);
    for (int c = 0; c < ncomp; c++)
      fprintf(f, c ? " %.17g" : "%.17g", values[i * ncomp + c]);
    fputc('\n', f);
  }
  fputs("        </DataArray>\n", f);
}

/* The Cells section: connectivity (VTK vertex order), offsets and VTK type numbers. */
static void write_cells(FILE *f, const fe_mesh *m)
{
  fputs("      <Cells>\n"
        "        <DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++) {
    const int *c = m->cells + (size_t)e * m->nvc;
    fputs("          ", f);
    for (int v = 0; v < m->nvc; v++)
      fprintf(f, v ? " %d" : "%d", c[m->type == FE_CELL_PRISM ? prism_to_vtk[v] : v]);
    fputc('\n', f);
  }
  fputs("        </DataArray>\n"
        "        <DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++)
    fprintf(f, "%s%lld%s", e % 8 ? " " : "          ", (long long)(e + 1) * m->nvc,
            e % 8 == 7 || e == m->ncells - 1 ? "\n" : "");
  fputs("        </DataArray>\n"
        "        <DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">\n",
        f);
  for (int e = 0; e < m->ncells; e++)
    fprintf(f, "%s%d%s", e % 16 ? " " : "          ", vtk_cell_type[m->type],
            e % 16 == 15 || e == m->ncells - 1 ? "\n" : "");
  fputs("        </DataArray>\n      </Cells>\n", f);
}

/* Point data (per-vertex fields) and cell data (region, then per-cell fields). */
static void write_fields(FILE *f, const fe_mesh *m, int nfields, const fe_vtu_field *fields)
{
  fputs("      <PointData>\n", f);
  for (int i = 0; i < nfields; i++)
    if (!fields[i].per_cell)
      write_doubles(f, fields[i].name, 1, fields[i].values, (size_t)m->nvertices);
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
  FILE *f = open_for_writing(path);
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write '%s': %s", path, strerror(errno));

  fputs("<?xml version=\"1.0\"?>\n"
        "<VTKFile type=\"UnstructuredGrid\" version=\"0.1\" byte_order=\"LittleEndian\">\n"
        "  <UnstructuredGrid>\n",
        f);
  fprintf(f, "    <Piece NumberOfPoints=\"%d\" NumberOfCells=\"%d\">\n", m->nvertices,
          m->ncells);
  fputs("      <Points>\n", f);
  write_doubles(f, "coordinates", 3, m->coords, (size_t)m->nvertices);
  fputs("      </Points>\n", f);
  write_cells(f, m);
  write_fields(f, m, nfields, fields);
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
