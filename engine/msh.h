/* felab Gmsh .msh 4.1 output: the mesh with its physical groups and node-data views. */
#ifndef FE_MSH_H
#define FE_MSH_H

#include "engine/mesh.h"

typedef struct fe_msh_view {
  const char *name;
  const double *values; /* one per vertex */
} fe_msh_view;

/* Write an ASCII .msh 4.1: one entity per region and per boundary tag (physical groups with
 * their names), the cells and tagged facets, and a $NodeData view per field. */
int fe_msh_write(const char *path, const fe_mesh *m, int nviews, const fe_msh_view *views);

#endif
