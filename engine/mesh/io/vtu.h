/* felab VTU (VTK XML unstructured grid) output, readable by ParaView. */
#ifndef FE_VTU_H
#define FE_VTU_H

#include <stdio.h>

#include "engine/mesh/mesh.h"

typedef struct fe_vtu_field {
  const char *name;
  const double *values; /* one per vertex (point data) or per cell (cell data) */
  int per_cell;         /* 0: point data, 1: cell data */
} fe_vtu_field;

/* Write the mesh with fields; cell regions are always written as cell data "region". */
int fe_vtu_write(const char *path, const fe_mesh *m, int nfields, const fe_vtu_field *fields);
/* The same split by part[c] in 0 .. nparts - 1 (vtu-pieces.c): piece k, the cells of part k
 * and their vertices with the fields there and cell data "part", to <path less .vtu>_k.vtu,
 * and path's .pvtu (ParaView opens the pieces together) naming them; path ends in .pvtu or
 * .vtu. Straight meshes only. */
int fe_vtu_write_pieces(const char *path, const fe_mesh *m, int nfields,
                        const fe_vtu_field *fields, int nparts, const int *part);
/* One rank's piece of a mesh split over nranks (its own cells, the fields there, cell data
 * "part"): <path less .vtu or .pvtu>_rank.vtu, and at rank 0 the .pvtu naming all nranks. */
int fe_vtu_write_rank(const char *path, const fe_mesh *m, int nfields, const fe_vtu_field *fields,
                      int rank, int nranks);
/* vtu.c's helpers for vtu-pieces.c: s escaped as an XML attribute value; path opened for
 * writing, its one missing folder made. */
void fe_vtu_escaped(FILE *f, const char *s);
FILE *fe_vtu_open(const char *path);

#endif
