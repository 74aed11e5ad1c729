/* felab VTU (VTK XML unstructured grid) output, readable by ParaView. */
#ifndef FE_VTU_H
#define FE_VTU_H

#include "engine/mesh/mesh.h"

typedef struct fe_vtu_field {
  const char *name;
  const double *values; /* one per vertex (point data) or per cell (cell data) */
  int per_cell;         /* 0: point data, 1: cell data */
} fe_vtu_field;

/* Write the mesh with fields; cell regions are always written as cell data "region". */
int fe_vtu_write(const char *path, const fe_mesh *m, int nfields, const fe_vtu_field *fields);

#endif
