/* felab quadrature rules on reference cells. */
#ifndef FE_QUADRATURE_H
#define FE_QUADRATURE_H

#include "engine/mesh.h"

typedef struct fe_quadrature {
  fe_cell_type cell; /* reference cell (FE_CELL_* ; lines use dim 1 via fe_quadrature_line) */
  int dim;
  int degree;        /* polynomials up to this total degree (tensor cells: per direction) are exact */
  int npoints;
  double *points;    /* npoints x dim reference coordinates */
  double *weights;   /* npoints; sum = reference measure */
} fe_quadrature;

/* Gauss-Legendre with n points on [-1,1]: exact to degree 2n-1. */
int fe_quadrature_line(int n, fe_quadrature *q);
/* A rule on the reference cell exact to `degree`: tensor Gauss on quads/hexes ([-1,1]^d),
 * collapsed Gauss-Jacobi on triangles/tets (reference simplex with vertices 0, e_i). */
int fe_quadrature_create(fe_cell_type cell, int degree, fe_quadrature *q);
void fe_quadrature_free(fe_quadrature *q);
double fe_reference_measure(fe_cell_type cell); /* 1/6 tet, 1/2 tri, 8 hex, 4 quad */

#endif
