/* felab reference elements: nodal Lagrange bases on reference cells. */
#ifndef FE_ELEMENT_H
#define FE_ELEMENT_H

#include "engine/mesh.h"

#define FE_MAX_BASIS 27

typedef struct fe_element {
  fe_cell_type cell;
  char family;       /* 'P' (simplices) or 'Q' (tensor cells) */
  int order;
  int dim;
  int nbasis;
  double nodes[FE_MAX_BASIS][3]; /* reference coordinates of the nodes */
} fe_element;

/* "P1" on tri/tet, "Q1" on quad/hex (higher orders come with issue 4); a family that does
 * not fit the cell is an FE_ERR_ARG error saying which spaces fit. */
int fe_element_create(fe_cell_type cell, char family, int order, fe_element *e);
/* Basis values phi[nbasis] and reference derivatives dphi[nbasis x dim] at xi. */
void fe_element_eval(const fe_element *e, const double *xi, double *phi, double *dphi);

#endif
