/* A partitioned mesh as VTU pieces and the .pvtu that names them (ParaView's parallel
 * unstructured grid): piece k holds part k's cells, their vertices renumbered in the order
 * they first appear, the fields restricted to them, and cell data "part". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/io/vtu.h"

/* A piece: part k of m as a mesh of its own (coords, cells, regions; no facets) and its
 * fields (point data restricted, cell data picked, "part" added); freed by piece_free. */
typedef struct piece {
  fe_mesh m;
  fe_vtu_field *fields;
  double *values; /* every field's values, one block */
} piece;

static void piece_free(piece *p)
{
  free(p->m.coords), free(p->m.cells), free(p->m.cell_tags), free(p->fields), free(p->values);
}

static int piece_make(const fe_mesh *m, int nfields, const fe_vtu_field *fields, const int *part,
                      int k, int *local, piece *p)
{
  memset(p, 0, sizeof *p);
  int nc = 0, nv = 0;
  for (int c = 0; c < m->ncells; c++) nc += part[c] == k;
  for (int v = 0; v < m->nvertices; v++) local[v] = -1;
  for (int c = 0; c < m->ncells; c++)
    for (int i = 0; part[c] == k && i < m->nvc; i++) {
      int v = m->cells[(size_t)c * m->nvc + i];
      if (local[v] < 0) local[v] = nv++;
    }
  p->m = (fe_mesh){.dim = m->dim, .type = m->type, .nvc = m->nvc, .nvertices = nv, .ncells = nc,
                   .geo_order = 1, .ngn = m->nvc};
  p->m.coords = malloc(sizeof(double) * 3 * ((size_t)nv + 1));
  p->m.cells = malloc(sizeof(int) * (size_t)m->nvc * ((size_t)nc + 1));
  p->m.cell_tags = malloc(sizeof(int) * ((size_t)nc + 1));
  p->fields = malloc(sizeof(fe_vtu_field) * ((size_t)nfields + 1));
  p->values = malloc(sizeof(double) * ((size_t)(nfields + 1) * (size_t)(nv > nc ? nv : nc) + 1));
  FE_ASSERT(p->m.coords && p->m.cells && p->m.cell_tags && p->fields && p->values, FE_ERR_MEM,
            "vtu: out of memory for piece %d (%d cells)", k, nc);
  for (int v = 0; v < m->nvertices; v++)
    if (local[v] >= 0) memcpy(p->m.coords + 3 * (size_t)local[v], m->coords + 3 * (size_t)v,
                              3 * sizeof(double));
  int e = 0;
  for (int c = 0; c < m->ncells; c++) {
    if (part[c] != k) continue;
    for (int i = 0; i < m->nvc; i++)
      p->m.cells[(size_t)e * m->nvc + i] = local[m->cells[(size_t)c * m->nvc + i]];
    p->m.cell_tags[e++] = m->cell_tags ? m->cell_tags[c] : 0;
  }
  const size_t stride = (size_t)(nv > nc ? nv : nc);
  for (int f = 0; f <= nfields; f++) { /* the fields, then "part" */
    double *out = p->values + (size_t)f * stride;
    if (f == nfields) {
      for (int i = 0; i < nc; i++) out[i] = k;
      p->fields[f] = (fe_vtu_field){"part", out, 1};
      continue;
    }
    p->fields[f] = (fe_vtu_field){fields[f].name, out, fields[f].per_cell};
    if (fields[f].per_cell) {
      for (int c = 0, i = 0; c < m->ncells; c++)
        if (part[c] == k) out[i++] = fields[f].values[c];
    } else {
      for (int v = 0; v < m->nvertices; v++)
        if (local[v] >= 0) out[local[v]] = fields[f].values[v];
    }
  }
  return 0;
}

/* path without its .pvtu or .vtu ending, into base. */
static int base_of(const char *path, char *base, size_t size)
{
  size_t n = strlen(path);
  if (n > 5 && !strcmp(path + n - 5, ".pvtu")) n -= 5;
  else if (n > 4 && !strcmp(path + n - 4, ".vtu")) n -= 4;
  FE_ASSERT(n + 1 < size - 32, FE_ERR_ARG, "vtu: the path '%s' is too long", path);
  memcpy(base, path, n);
  base[n] = '\0';
  return 0;
}

/* The .pvtu naming the pieces (their file names beside it) and the fields' kinds. */
static int write_pvtu(const char *base, int nfields, const fe_vtu_field *fields, int nparts)
{
  char path[4200];
  snprintf(path, sizeof path, "%s.pvtu", base);
  FILE *f = fe_vtu_open(path);
  if (!f) FE_ERROR(FE_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  const char *slash = strrchr(base, '/'), *name = slash ? slash + 1 : base;
  fputs("<?xml version=\"1.0\"?>\n<VTKFile type=\"PUnstructuredGrid\" version=\"0.1\" "
        "byte_order=\"LittleEndian\">\n  <PUnstructuredGrid GhostLevel=\"0\">\n    <PPoints>\n"
        "      <PDataArray type=\"Float64\" NumberOfComponents=\"3\"/>\n    </PPoints>\n"
        "    <PPointData>\n", f);
  for (int pass = 0; pass < 2; pass++) { /* point data, then cell data */
    if (pass) fputs("    <PCellData>\n      <PDataArray type=\"Int32\" Name=\"region\"/>\n", f);
    for (int i = 0; i < nfields; i++) {
      if (fields[i].per_cell != pass) continue;
      fputs("      <PDataArray type=\"Float64\" Name=\"", f);
      fe_vtu_escaped(f, fields[i].name);
      fputs("\" NumberOfComponents=\"1\"/>\n", f);
    }
    if (pass) fputs("      <PDataArray type=\"Float64\" Name=\"part\" NumberOfComponents=\"1\"/>\n", f);
    fputs(pass ? "    </PCellData>\n" : "    </PPointData>\n", f);
  }
  for (int k = 0; k < nparts; k++) {
    fputs("    <Piece Source=\"", f);
    fe_vtu_escaped(f, name);
    fprintf(f, "_%d.vtu\"/>\n", k);
  }
  fputs("  </PUnstructuredGrid>\n</VTKFile>\n", f);
  int failed = ferror(f);
  if (fclose(f) != 0) failed = 1;
  if (failed) FE_ERROR(FE_ERR_IO, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
  return 0;
}

int fe_vtu_write_pieces(const char *path, const fe_mesh *m, int nfields,
                        const fe_vtu_field *fields, int nparts, const int *part)
{
  FE_ASSERT(path && *path && m && part && nparts >= 1, FE_ERR_ARG, "vtu pieces: bad arguments");
  FE_ASSERT(!(m->geo_order == 2 && m->geo_cells), FE_ERR_ARG, "vtu '%s': pieces of a curved "
            "mesh are not written yet (write it whole)", path);
  for (int c = 0; c < m->ncells; c++)
    FE_ASSERT(part[c] >= 0 && part[c] < nparts, FE_ERR_ARG, "vtu '%s': cell %d is in part %d, "
              "not in 0 .. %d", path, c, part[c], nparts - 1);
  char base[4096], name[4200];
  FE_CHECK(base_of(path, base, sizeof base));
  int *local = malloc(sizeof(int) * ((size_t)m->nvertices + 1));
  FE_ASSERT(local, FE_ERR_MEM, "vtu: out of memory for the pieces' vertices");
  int rc = 0;
  for (int k = 0; !rc && k < nparts; k++) {
    piece p;
    rc = piece_make(m, nfields, fields, part, k, local, &p);
    snprintf(name, sizeof name, "%s_%d.vtu", base, k);
    if (!rc) rc = fe_vtu_write(name, &p.m, nfields + 1, p.fields);
    piece_free(&p);
  }
  free(local);
  if (!rc) rc = write_pvtu(base, nfields, fields, nparts);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

int fe_vtu_write_rank(const char *path, const fe_mesh *m, int nfields, const fe_vtu_field *fields,
                      int rank, int nranks)
{
  FE_ASSERT(path && *path && m && rank >= 0 && rank < nranks, FE_ERR_ARG, "vtu pieces: bad "
            "arguments");
  char base[4096], name[4200];
  FE_CHECK(base_of(path, base, sizeof base));
  fe_vtu_field *all = malloc(sizeof *all * ((size_t)nfields + 1));
  double *part = malloc(sizeof(double) * ((size_t)m->ncells + 1));
  if (!all || !part) free(all), free(part);
  FE_ASSERT(all && part, FE_ERR_MEM, "vtu: out of memory for a rank's piece");
  if (nfields) memcpy(all, fields, sizeof *all * (size_t)nfields);
  for (int c = 0; c < m->ncells; c++) part[c] = rank;
  all[nfields] = (fe_vtu_field){"part", part, 1};
  snprintf(name, sizeof name, "%s_%d.vtu", base, rank);
  int rc = fe_vtu_write(name, m, nfields + 1, all);
  free(all), free(part);
  if (!rc && rank == 0) rc = write_pvtu(base, nfields, fields, nranks);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}
