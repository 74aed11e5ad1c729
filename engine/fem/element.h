/* felab reference elements: nodal Lagrange bases of any order on reference cells.
 *
 * Reference cells (the same as Gmsh's): triangle and tetrahedron with vertices 0 and the unit
 * vectors; quadrilateral and hexahedron [-1,1]^d; prism = triangle x [-1,1], vertices 0..2
 * at z = -1 and 3..5 above them.
 *
 * Nodes sit on a lattice of order p. Each node has a lattice index (simplex: i, j, k with
 * xi = (i, j, k) / p; tensor cell: i, j, k in 0..p along x, y, z; prism: i, j on the
 * triangle, k along the line) and integer weights on the cell's vertices that say where it
 * lies: barycentric indices on simplices, products of (i or p - i) per direction on tensor
 * cells. A node lies on the sub-entity (vertex, edge, face, interior) spanned by the
 * vertices of nonzero weight, and the pairs (global vertex, weight) name it whatever the
 * cell's local orientation: that is how spaces share edge and face nodes (engine/fem/space.c).
 *
 * Node order: the vertices first, in Gmsh's vertex order, then every other lattice node
 * in lexicographic order (x fastest). lex[] maps a tensor lattice index to its node. */
#ifndef FE_ELEMENT_H
#define FE_ELEMENT_H

#include "engine/mesh/mesh.h"

#define FE_MAX_ORDER_P 7    /* P1..P7 on simplices and prisms */
#define FE_MAX_ORDER_Q 9    /* Q1..Q9 on quadrilaterals and hexahedra */
#define FE_MAX_BASIS 1000   /* Q9 on a hexahedron */
#define FE_MAX_VERTICES 8

/* Where the nodes of tensor cells lie along each direction. */
typedef enum { FE_NODES_GLL, FE_NODES_EQUISPACED } fe_node_kind;

typedef struct fe_element {
  fe_cell_type cell;
  char family;        /* 'P' (simplices, prisms) or 'Q' (tensor cells) */
  int order;
  int dim;
  int nbasis;
  int nvertices;      /* vertices of the cell: the first nvertices nodes */
  fe_node_kind kind;  /* GLL (default on tensor cells) or equispaced; simplices are equispaced */
  double line[FE_MAX_ORDER_Q + 1]; /* 1D node positions on [-1,1] (tensor cells, prism line) */
  double *nodes;      /* nbasis x 3 reference coordinates */
  int *lattice;       /* nbasis x 3 lattice indices */
  int *weights;       /* nbasis x nvertices lattice weights on the vertices */
  int *lex;           /* tensor cells: node at lattice index i + (p+1) (j + (p+1) k); else NULL */
} fe_element;

/* "P<k>" on tri/tet/prism (k = 1..7), "Q<k>" on quad/hex (k = 1..9) with nodes of `kind`
 * (simplices and prisms ignore it: equispaced). A family or order that does not fit the cell
 * is an FE_ERR_ARG error saying what does. Free with fe_element_free. */
int fe_element_create(fe_cell_type cell, char family, int order, fe_node_kind kind, fe_element *e);
void fe_element_free(fe_element *e);
/* Basis values phi[nbasis] and reference derivatives dphi[nbasis x dim] at xi (either
 * output may be NULL). */
void fe_element_eval(const fe_element *e, const double *xi, double *phi, double *dphi);
/* Tabulate at n points (n x dim): B[q*nbasis + b] and D[(q*nbasis + b)*dim + i] (either may
 * be NULL), the layout every kernel reads (docs/elements.md). */
void fe_element_tabulate(const fe_element *e, int n, const double *points, double *B, double *D);
/* The first-order element of a cell type (the straight geometry map). */
int fe_element_linear(fe_cell_type cell, fe_element *e);

#endif
