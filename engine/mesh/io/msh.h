/* felab Gmsh .msh 4.1 files without the SDK: output of the mesh with its physical groups and
 * node-data views (engine/mesh/io/msh.c), and input of Gmsh's meshes (engine/mesh/io/msh-read.c). */
#ifndef FE_MSH_H
#define FE_MSH_H

#include "engine/mesh/mesh.h"

typedef struct fe_msh_view {
  const char *name;
  const double *values; /* one per vertex */
} fe_msh_view;

/* Write an ASCII .msh 4.1: one entity per region and per boundary tag (physical groups with
 * their names), the cells and tagged facets, and a $NodeData view per field. */
int fe_msh_write(const char *path, const fe_mesh *m, int nviews, const fe_msh_view *views);

/* Read an ASCII or binary .msh 4.1 file into the arrays fe_mesh_from_arrays takes, as the
 * SDK hands them out: nodes and element blocks in the order of their entities (dimension,
 * then tag; element types ascending within an entity), physical groups by dimension and tag,
 * with their names; elements of points' entities left out. So a file read here and through
 * the SDK gives the same mesh. straight: second-order elements keep their vertices only and
 * become the first-order type (the SDK's order 1). Other sections are skipped; a partitioned
 * file, another MSH version or an element type felab does not know is an error. Errors name
 * the file, the line (ASCII) or byte offset (binary), and what was expected there:
 * FE_ERR_IO for a file that cannot be read or is malformed or truncated, FE_ERR_MESH for an
 * unknown element type, FE_ERR_UNAVAILABLE for what only the SDK reads. On success free a
 * with fe_msh_arrays_free; on error there is nothing to free. a->source is path. */
int fe_msh_read(const char *path, int straight, fe_mesh_arrays *a);
/* Free what fe_msh_read allocated in a, and zero it. */
void fe_msh_arrays_free(fe_mesh_arrays *a);

/* A Gmsh element type as the reader needs it, from engine/mesh/io/gmsh-io.c's table of the types
 * felab knows (1-19): node and vertex counts, dimension, the first-order type of the same
 * shape (itself when first order), and its name ("tet10"). */
typedef struct fe_msh_type {
  int nodes, vertices, dim, linear;
  const char *name;
} fe_msh_type;
/* 1 with *t filled for a type felab knows, else 0. */
int fe_msh_type_info(int type, fe_msh_type *t);

#endif
