/* felab reference elements: P1 on triangles and tetrahedra, Q1 on quadrilaterals and
 * hexahedra. Nodes are the reference vertices in Gmsh order (see mesh.h):
 *   P1: phi_0 = 1 - sum xi_d, phi_b = xi_(b-1) on the simplex with vertices 0, e_d;
 *   Q1: phi_b = prod_d (1 + n_bd xi_d) / 2 on [-1,1]^d, n_b the node's corner. */
#include "engine/element.h"

#include <string.h>

#include "engine/error.h"

/* Reference vertices of each supported cell, Gmsh order. */
static const double tri_nodes[3][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
static const double tet_nodes[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
static const double quad_nodes[4][3] = {{-1, -1, 0}, {1, -1, 0}, {1, 1, 0}, {-1, 1, 0}};
static const double hex_nodes[8][3] = {{-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1},
                                       {-1, -1, 1},  {1, -1, 1},  {1, 1, 1},  {-1, 1, 1}};

/* The P1 or Q1 element of a cell type; spaces that do not fit are errors saying what does. */
int fe_element_create(fe_cell_type cell, char family, int order, fe_element *e)
{
  FE_ASSERT(e, FE_ERR_ARG, "element: no element to fill");
  memset(e, 0, sizeof *e);
  const int simplex = cell == FE_CELL_TRI || cell == FE_CELL_TET;
  const int tensor = cell == FE_CELL_QUAD || cell == FE_CELL_HEX;
  if (family != 'P' && family != 'Q')
    FE_ERROR(FE_ERR_ARG, "unknown element family '%c' (P on tri/tet cells, Q on quad/hex cells)",
             family);
  if (cell == FE_CELL_PRISM)
    FE_ERROR(FE_ERR_ARG, "space '%c%d' on prism cells is not available yet (P on tri/tet, Q on "
             "quad/hex)", family, order);
  if (!simplex && !tensor) FE_ERROR(FE_ERR_ARG, "element: unknown cell type %d", (int)cell);
  if ((family == 'Q' && simplex) || (family == 'P' && tensor))
    FE_ERROR(FE_ERR_ARG, "space '%c%d' does not fit %s cells (use %c1..)", family, order,
             fe_cell_name(cell), simplex ? 'P' : 'Q');
  if (order < 1) FE_ERROR(FE_ERR_ARG, "order %d: the order must be 1 or more", order);
  if (order != 1)
    FE_ERROR(FE_ERR_ARG, "order %d is not available yet (P1/Q1 only; higher orders: issue 4)",
             order);

  e->cell = cell;
  e->family = family;
  e->order = 1;
  e->dim = fe_cell_dim(cell);
  e->nbasis = fe_cell_nvertices(cell);
  const double(*nodes)[3] = cell == FE_CELL_TRI    ? tri_nodes
                            : cell == FE_CELL_TET  ? tet_nodes
                            : cell == FE_CELL_QUAD ? quad_nodes
                                                   : hex_nodes;
  memcpy(e->nodes, nodes, (size_t)e->nbasis * sizeof nodes[0]);
  return 0;
}

/* Basis values and reference gradients at xi (either output may be NULL). */
void fe_element_eval(const fe_element *e, const double *xi, double *phi, double *dphi)
{
  const int dim = e->dim, nb = e->nbasis;
  if (e->family == 'P') { /* barycentric coordinates */
    double first = 1;
    for (int d = 0; d < dim; d++) first -= xi[d];
    if (phi) {
      phi[0] = first;
      for (int d = 0; d < dim; d++) phi[d + 1] = xi[d];
    }
    if (dphi)
      for (int b = 0; b < nb; b++)
        for (int d = 0; d < dim; d++) dphi[b * dim + d] = b == 0 ? -1.0 : (b == d + 1);
    return;
  }
  for (int b = 0; b < nb; b++) { /* tensor products of 1D hat functions (1 + n xi) / 2 */
    double factor[3], slope[3];
    for (int d = 0; d < dim; d++) {
      factor[d] = 0.5 * (1 + e->nodes[b][d] * xi[d]);
      slope[d] = 0.5 * e->nodes[b][d];
    }
    if (phi) {
      phi[b] = 1;
      for (int d = 0; d < dim; d++) phi[b] *= factor[d];
    }
    if (dphi)
      for (int d = 0; d < dim; d++) {
        double g = slope[d];
        for (int o = 0; o < dim; o++)
          if (o != d) g *= factor[o];
        dphi[b * dim + d] = g;
      }
  }
}
