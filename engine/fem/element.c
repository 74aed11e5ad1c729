/* felab reference elements: Lagrange bases on lattices of any order.
 *
 * Simplices (equispaced lattice, order p): with barycentric coordinates l_0 = 1 - sum xi,
 * l_j = xi_(j-1), the node of barycentric index a = (a_0, .., a_d), sum a = p, has the basis
 * function
 *     phi_a = prod_j L_(a_j)(l_j),   L_n(l) = prod_(m<n) (p l - m) / (m + 1),
 * which is 1 at its node and 0 at every other lattice point (some factor p l_j - m vanishes
 * there). Its derivative follows by the product rule, d/dxi_i = d/dl_(i+1) - d/dl_0.
 * Tensor cells: products of 1D Lagrange polynomials through the line nodes (GLL for spectral
 * elements, or equispaced). Prisms: the triangle's basis times the 1D basis on an
 * equispaced line, so the quadrilateral faces carry the same lattice in both directions. */
#include "engine/fem/element.h"

#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/fem/quadrature.h"

/* Lattice corners of the vertices, Gmsh order, in units of p (0 or 1 per direction). */
static const int tri_corners[3][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
static const int tet_corners[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
static const int quad_corners[4][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}};
static const int hex_corners[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                      {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
static const int prism_corners[6][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0},
                                        {0, 0, 1}, {1, 0, 1}, {0, 1, 1}};

static const int (*corners_of(fe_cell_type cell))[3]
{
  switch (cell) {
  case FE_CELL_TRI: return tri_corners;
  case FE_CELL_TET: return tet_corners;
  case FE_CELL_QUAD: return quad_corners;
  case FE_CELL_HEX: return hex_corners;
  case FE_CELL_PRISM: return prism_corners;
  }
  return NULL;
}

static int is_simplex(fe_cell_type c) { return c == FE_CELL_TRI || c == FE_CELL_TET; }
static int is_tensor(fe_cell_type c) { return c == FE_CELL_QUAD || c == FE_CELL_HEX; }

/* Whether lattice index (i, j, k) belongs to the element's lattice of order p. */
static int in_lattice(const fe_element *e, const int *l)
{
  int p = e->order;
  if (is_simplex(e->cell)) return l[0] + l[1] + l[2] <= p;
  if (e->cell == FE_CELL_PRISM) return l[0] + l[1] <= p;
  return 1;
}

/* Weight of lattice node l on vertex v (see element.h). */
static int lattice_weight(const fe_element *e, const int *l, int v)
{
  const int *c = corners_of(e->cell)[v], p = e->order;
  if (is_simplex(e->cell)) {
    if (v == 0) return p - l[0] - l[1] - l[2];
    return l[v - 1];
  }
  if (e->cell == FE_CELL_PRISM) {
    int t = v % 3, tri = t == 0 ? p - l[0] - l[1] : l[t - 1];
    return tri * (c[2] ? l[2] : p - l[2]);
  }
  int w = 1;
  for (int d = 0; d < e->dim; d++) w *= c[d] ? l[d] : p - l[d];
  return w;
}

/* Reference coordinates of lattice node l. */
static void lattice_point(const fe_element *e, const int *l, double *x)
{
  int p = e->order;
  x[0] = x[1] = x[2] = 0;
  for (int d = 0; d < e->dim; d++) {
    if (is_simplex(e->cell) || (e->cell == FE_CELL_PRISM && d < 2))
      x[d] = (double)l[d] / p;
    else
      x[d] = e->line[l[d]];
  }
}

/* The 1D node positions on [-1,1]: GLL or equispaced. */
static int line_nodes(int p, fe_node_kind kind, double *s)
{
  if (kind == FE_NODES_GLL && p >= 2) return fe_gll_nodes(p + 1, s);
  for (int i = 0; i <= p; i++) s[i] = -1.0 + 2.0 * i / p;
  return 0;
}

/* Check that a family and order fit the cell; the message says what does. */
static int check_fit(fe_cell_type cell, char family, int order)
{
  if (family != 'P' && family != 'Q')
    FE_ERROR(FE_ERR_ARG, "unknown element family '%c' (P on tri/tet/prism cells, Q on quad/hex "
             "cells)", family);
  if ((family == 'Q' && !is_tensor(cell)) || (family == 'P' && is_tensor(cell)))
    FE_ERROR(FE_ERR_ARG, "space '%c%d' does not fit %s cells (use %c1..%c%d)", family, order,
             fe_cell_name(cell), is_tensor(cell) ? 'Q' : 'P', is_tensor(cell) ? 'Q' : 'P',
             is_tensor(cell) ? FE_MAX_ORDER_Q : FE_MAX_ORDER_P);
  int maxp = family == 'Q' ? FE_MAX_ORDER_Q : FE_MAX_ORDER_P;
  if (order < 1 || order > maxp)
    FE_ERROR(FE_ERR_ARG, "space '%c%d': the order must lie in 1..%d on %s cells", family, order,
             maxp, fe_cell_name(cell));
  return 0;
}

int fe_element_create(fe_cell_type cell, char family, int order, fe_node_kind kind, fe_element *e)
{
  FE_ASSERT(e, FE_ERR_ARG, "element: no element to fill");
  memset(e, 0, sizeof *e);
  FE_ASSERT(corners_of(cell), FE_ERR_ARG, "element: unknown cell type %d", (int)cell);
  FE_CHECK(check_fit(cell, family, order));
  const int p = order, dim = fe_cell_dim(cell), nv = fe_cell_nvertices(cell);
  e->cell = cell;
  e->family = family;
  e->order = p;
  e->dim = dim;
  e->nvertices = nv;
  e->kind = is_tensor(cell) ? kind : FE_NODES_EQUISPACED;
  FE_CHECK(line_nodes(p, e->kind, e->line));
  /* count the lattice */
  int n = 0, l[3];
  const int nk = dim == 3 ? p + 1 : 1;
  for (l[2] = 0; l[2] < nk; l[2]++)
    for (l[1] = 0; l[1] <= p; l[1]++)
      for (l[0] = 0; l[0] <= p; l[0]++) n += in_lattice(e, l);
  e->nbasis = n;
  e->nodes = malloc(sizeof(double) * 3 * n);
  e->lattice = malloc(sizeof(int) * 3 * n);
  e->weights = malloc(sizeof(int) * (size_t)nv * n);
  if (is_tensor(cell)) e->lex = malloc(sizeof(int) * n);
  if (!e->nodes || !e->lattice || !e->weights || (is_tensor(cell) && !e->lex)) {
    fe_element_free(e);
    FE_ERROR(FE_ERR_MEM, "out of host memory for a %c%d element", family, order);
  }
  /* vertices first, then the rest of the lattice in lexicographic order */
  const int(*corner)[3] = corners_of(cell);
  for (int v = 0; v < nv; v++)
    for (int d = 0; d < 3; d++) e->lattice[3 * v + d] = d < dim ? corner[v][d] * p : 0;
  int next = nv, lexpos = 0;
  for (l[2] = 0; l[2] < nk; l[2]++)
    for (l[1] = 0; l[1] <= p; l[1]++)
      for (l[0] = 0; l[0] <= p; l[0]++) {
        if (!in_lattice(e, l)) continue;
        int node = -1;
        for (int v = 0; v < nv && node < 0; v++)
          if (!memcmp(e->lattice + 3 * v, l, sizeof l)) node = v;
        if (node < 0) {
          node = next++;
          memcpy(e->lattice + 3 * node, l, sizeof l);
        }
        if (e->lex) e->lex[lexpos++] = node;
      }
  for (int b = 0; b < n; b++) {
    lattice_point(e, e->lattice + 3 * b, e->nodes + 3 * b);
    for (int v = 0; v < nv; v++) e->weights[b * nv + v] = lattice_weight(e, e->lattice + 3 * b, v);
  }
  return 0;
}

void fe_element_free(fe_element *e)
{
  if (!e) return;
  free(e->nodes);
  free(e->lattice);
  free(e->weights);
  free(e->lex);
  e->nodes = NULL;
  e->lattice = e->weights = e->lex = NULL;
}

int fe_element_linear(fe_cell_type cell, fe_element *e)
{
  return fe_element_create(cell, is_tensor(cell) ? 'Q' : 'P', 1, FE_NODES_EQUISPACED, e);
}

/* L_n(l) = prod_(m<n) (p l - m)/(m + 1) for n = 0..p, and its derivatives, at one l. */
static void simplex_factors(int p, double lam, double *L, double *dL)
{
  L[0] = 1;
  dL[0] = 0;
  for (int n = 1; n <= p; n++) {
    double f = (p * lam - (n - 1)) / n;
    L[n] = L[n - 1] * f;
    dL[n] = dL[n - 1] * f + L[n - 1] * p / n;
  }
}

/* The 1D Lagrange polynomials through s[0..p] and their derivatives at t. */
static void line_factors(int p, const double *s, double t, double *L, double *dL)
{
  for (int i = 0; i <= p; i++) {
    double v = 1, dv = 0;
    for (int m = 0; m <= p; m++) {
      if (m == i) continue;
      double f = (t - s[m]) / (s[i] - s[m]), df = 1.0 / (s[i] - s[m]);
      dv = dv * f + v * df;
      v *= f;
    }
    L[i] = v;
    dL[i] = dv;
  }
}

/* Barycentric part of a simplex or prism node: value and derivatives d/dxi_i for i < ns
 * (ns = 2 on prisms, dim on simplices) of prod_j L_(a_j)(l_j). */
static void simplex_node(int p, int ns, const int *a, const double (*L)[FE_MAX_ORDER_P + 1],
                         const double (*dL)[FE_MAX_ORDER_P + 1], double *val, double *grad)
{
  double v = 1, dlam[4];
  for (int j = 0; j <= ns; j++) v *= L[j][a[j]];
  for (int j = 0; j <= ns; j++) { /* d/dl_j of the product */
    double g = dL[j][a[j]];
    for (int o = 0; o <= ns; o++)
      if (o != j) g *= L[o][a[o]];
    dlam[j] = g;
  }
  *val = v;
  for (int i = 0; i < ns; i++) grad[i] = dlam[i + 1] - dlam[0];
  (void)p;
}

void fe_element_eval(const fe_element *e, const double *xi, double *phi, double *dphi)
{
  const int p = e->order, dim = e->dim, nb = e->nbasis;
  if (is_tensor(e->cell)) {
    double L[3][FE_MAX_ORDER_Q + 1], dL[3][FE_MAX_ORDER_Q + 1];
    for (int d = 0; d < dim; d++) line_factors(p, e->line, xi[d], L[d], dL[d]);
    for (int b = 0; b < nb; b++) {
      const int *l = e->lattice + 3 * b;
      if (phi) {
        double v = 1;
        for (int d = 0; d < dim; d++) v *= L[d][l[d]];
        phi[b] = v;
      }
      if (dphi)
        for (int i = 0; i < dim; i++) {
          double g = 1;
          for (int d = 0; d < dim; d++) g *= d == i ? dL[d][l[d]] : L[d][l[d]];
          dphi[b * dim + i] = g;
        }
    }
    return;
  }
  /* simplices and prisms: barycentric factors of the triangle or tetrahedron part */
  const int ns = e->cell == FE_CELL_PRISM ? 2 : dim;
  double L[4][FE_MAX_ORDER_P + 1], dL[4][FE_MAX_ORDER_P + 1], lam[4];
  lam[0] = 1;
  for (int i = 0; i < ns; i++) {
    lam[i + 1] = xi[i];
    lam[0] -= xi[i];
  }
  for (int j = 0; j <= ns; j++) simplex_factors(p, lam[j], L[j], dL[j]);
  double Lz[FE_MAX_ORDER_P + 1], dLz[FE_MAX_ORDER_P + 1];
  if (e->cell == FE_CELL_PRISM) line_factors(p, e->line, xi[2], Lz, dLz);
  for (int b = 0; b < nb; b++) {
    const int *l = e->lattice + 3 * b;
    int a[4] = {p - l[0] - l[1] - (ns == 3 ? l[2] : 0), l[0], l[1], l[2]};
    double v, g[3];
    simplex_node(p, ns, a, (const double(*)[FE_MAX_ORDER_P + 1])L,
                 (const double(*)[FE_MAX_ORDER_P + 1])dL, &v, g);
    if (e->cell == FE_CELL_PRISM) { /* times the line factor in z */
      double z = Lz[l[2]], dz = dLz[l[2]];
      g[0] *= z;
      g[1] *= z;
      g[2] = v * dz;
      v *= z;
    }
    if (phi) phi[b] = v;
    if (dphi)
      for (int i = 0; i < dim; i++) dphi[b * dim + i] = g[i];
  }
}

void fe_element_tabulate(const fe_element *e, int n, const double *points, double *B, double *D)
{
  const int nb = e->nbasis, dim = e->dim;
  for (int q = 0; q < n; q++)
    fe_element_eval(e, points + (size_t)q * dim, B ? B + (size_t)q * nb : NULL,
                    D ? D + (size_t)q * nb * dim : NULL);
}
