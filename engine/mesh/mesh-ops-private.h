/* Private to engine/mesh/mesh-ops.c (refinement) and engine/mesh/mesh-order.c (reordering):
 * the renumbering and the layers that refinement keeps its cells in. Not part of felab's API. */
#ifndef FE_MESH_OPS_PRIVATE_H
#define FE_MESH_OPS_PRIVATE_H

#include "engine/mesh/mesh.h"

/* Renumber m in place: the k-th cell becomes old cell order[k] (order NULL: the cells keep
 * their places), vertex v becomes newid[v] (NULL: in order of first use); *vertex (may be
 * NULL) gets its new id (mesh-order.c). */
int mesh_permute_cells(fe_mesh *m, const int *order, const int *newid, int *vertex);
/* The layers of fe_mesh_layer_order, swept first from *start when it is a vertex, else from a
 * far vertex, whose id *start gets (mesh-order.c). */
int mesh_layer_order(const fe_mesh *m, int *start, const int *within, int **order);

#endif
