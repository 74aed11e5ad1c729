/* Private to engine/mesh/mesh.c and engine/mesh/mesh-geo.c: the number of cell types, whether
 * a mesh is curved, and the check of its curved geometry. Not part of felab's API. */
#ifndef FE_MESH_PRIVATE_H
#define FE_MESH_PRIVATE_H

#include "engine/mesh/mesh.h"

#define NCELL_TYPES 5

/* Whether m carries curved (second-order) geometry. */
static inline int mesh_curved(const fe_mesh *m)
{
  return m->geo_order == 2 && m->geo_cells && m->geo_coords;
}

/* The curved arrays agree with the vertices and every cell's second-order map has a positive
 * Jacobian determinant at its nodes; else an FE_ERR_MESH error naming the cell (mesh-geo.c). */
int mesh_check_curved(const fe_mesh *m);

#endif
