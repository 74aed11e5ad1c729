/* Private to engine/mesh/io/gmsh-io.c and engine/mesh/io/gmsh-load.c: felab's table of Gmsh
 * element types, which the conversion and the loaders both read. Not part of felab's API. */
#ifndef FE_GMSH_IO_PRIVATE_H
#define FE_GMSH_IO_PRIVATE_H

/* What felab knows of a Gmsh element type: its dimension, node count, vertex count, the
 * felab cell type (-1: a facet or lower-dimensional element, -2: a cell felab lacks), its
 * order, and whether it is an incomplete (serendipity) second-order type. */
typedef struct gmsh_type_info {
  int type, dim, nnodes, nvertices, cell, order, incomplete;
  const char *name;
} gmsh_type_info;

/* The type's entry, or NULL for a type felab does not know (gmsh-io.c). */
const gmsh_type_info *gmsh_type_lookup(int type);

#endif
