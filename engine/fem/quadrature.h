/* felab quadrature rules on reference cells. */
#ifndef FE_QUADRATURE_H
#define FE_QUADRATURE_H

#include "engine/mesh/mesh.h"

typedef struct fe_quadrature {
  fe_cell_type cell; /* reference cell (FE_CELL_* ; lines use dim 1 via fe_quadrature_line) */
  int dim;
  int degree;        /* the true degree: every polynomial of total degree <= degree (tensor
                        cells and the prism's line: per direction) is exact, and some
                        polynomial of degree + 1 is not */
  int npoints;
  double *points;    /* npoints x dim reference coordinates */
  double *weights;   /* npoints; sum = reference measure */
  const char *name;  /* the family, for reports: "centroid", "symmetric", "collapsed
                        Gauss-Jacobi", "Gauss", "GLL", "symmetric x Gauss", ... (static) */
} fe_quadrature;

/* Which family of rules to build. */
typedef enum {
  FE_QUAD_AUTO,  /* fewest points: symmetric rules on simplices when they exist and cost no
                    more than the collapsed rule, tensor Gauss on quads/hexes, the best
                    triangle rule x Gauss on prisms */
  FE_QUAD_GAUSS, /* collapsed Gauss-Jacobi on simplices, tensor Gauss elsewhere */
  FE_QUAD_GLL    /* tensor Gauss-Lobatto-Legendre on quads/hexes (nodes on the faces);
                    prisms: the best triangle rule x GLL; simplices: an error */
} fe_quad_kind;

/* Line rules on [-1,1] (dim 1, cell set to FE_CELL_QUAD, whose tensor factor a line is). */
/* Gauss-Legendre with n points: exact to degree 2n-1. */
int fe_quadrature_line(int n, fe_quadrature *q);
/* Gauss-Lobatto-Legendre with n >= 2 points, the endpoints included: exact to degree 2n-3. */
int fe_quadrature_gll(int n, fe_quadrature *q);
/* The n >= 2 GLL nodes in ascending order, exactly symmetric (x[n-1-i] == -x[i]). */
int fe_gll_nodes(int n, double *x);
/* The 1D Lagrange polynomial i through the nodes x[0..n-1], and its derivative, at t. */
double fe_lagrange(const double *x, int n, int i, double t);
double fe_lagrange_deriv(const double *x, int n, int i, double t);

/* Rules on reference cells: quads/hexes are [-1,1]^d, triangles/tets the simplex with
 * vertices 0, e_i, prisms triangle x [-1,1]. */
/* A rule of family `kind` exact to `degree` (q->degree: the true degree, >= degree). */
int fe_quadrature_create_kind(fe_cell_type cell, int degree, fe_quad_kind kind,
                              fe_quadrature *q);
/* The same with FE_QUAD_AUTO. */
int fe_quadrature_create(fe_cell_type cell, int degree, fe_quadrature *q);
void fe_quadrature_free(fe_quadrature *q);
double fe_reference_measure(fe_cell_type cell); /* 1/6 tet, 1/2 tri, 8 hex, 4 quad, 1 prism */
const char *fe_quad_kind_name(fe_quad_kind kind); /* "auto", "gauss", "gll" */

#endif
