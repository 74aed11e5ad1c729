/* Reference elements of every order: bases are nodal, sum to one, reproduce polynomials of
 * their degree, their derivatives match finite differences; node counts and the vertex order
 * are right; spaces that do not fit are clear errors. And spaces: shared edge and face nodes
 * agree from both sides of every interior face, boundary nodes are the nodes on the boundary,
 * and the dof map of a P2 mesh counts vertices + edges. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fem/element.h"
#include "engine/core/error.h"
#include "engine/fem/space.h"

typedef struct elem_case {
  fe_cell_type cell;
  char family;
  int maxorder;
} elem_case;

static const elem_case cases[] = {{FE_CELL_TRI, 'P', 7},  {FE_CELL_TET, 'P', 7},
                                  {FE_CELL_QUAD, 'Q', 9}, {FE_CELL_HEX, 'Q', 9},
                                  {FE_CELL_PRISM, 'P', 7}};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* Deterministic pseudo-random numbers in [0,1). */
static double next_random(unsigned *state)
{
  *state = *state * 1664525u + 1013904223u;
  return (*state >> 8) / 16777216.0;
}

/* A random point inside the reference cell of e. */
static void random_point(const fe_element *e, unsigned *state, double *xi)
{
  if (e->cell == FE_CELL_QUAD || e->cell == FE_CELL_HEX) {
    for (int d = 0; d < e->dim; d++) xi[d] = 2 * next_random(state) - 1;
    return;
  }
  int ns = e->cell == FE_CELL_PRISM ? 2 : e->dim;
  double left = 1;
  for (int d = 0; d < ns; d++) {
    xi[d] = left * next_random(state) / 2;
    left -= xi[d];
  }
  if (e->cell == FE_CELL_PRISM) xi[2] = 2 * next_random(state) - 1;
}

static void make(const elem_case *c, int p, fe_node_kind kind, fe_element *e)
{
  cr_assert_eq(fe_element_create(c->cell, c->family, p, kind, e), 0, "%s %c%d: %s",
               fe_cell_name(c->cell), c->family, p, fe_error_message());
}

static int expected_nbasis(fe_cell_type cell, int p)
{
  switch (cell) {
  case FE_CELL_TRI: return (p + 1) * (p + 2) / 2;
  case FE_CELL_TET: return (p + 1) * (p + 2) * (p + 3) / 6;
  case FE_CELL_QUAD: return (p + 1) * (p + 1);
  case FE_CELL_HEX: return (p + 1) * (p + 1) * (p + 1);
  case FE_CELL_PRISM: return (p + 1) * (p + 2) / 2 * (p + 1);
  }
  return -1;
}

Test(element, node_counts_and_vertices_first)
{
  for (int i = 0; i < NCASES; i++)
    for (int p = 1; p <= cases[i].maxorder; p++) {
      fe_element e;
      make(&cases[i], p, FE_NODES_GLL, &e);
      cr_expect_eq(e.nbasis, expected_nbasis(e.cell, p), "%s P%d", fe_cell_name(e.cell), p);
      cr_expect_eq(e.nvertices, fe_cell_nvertices(e.cell));
      /* the vertices, in Gmsh's order, are the first nodes: their weights are p^k on themselves */
      for (int v = 0; v < e.nvertices; v++)
        for (int w = 0; w < e.nvertices; w++)
          cr_expect_eq(e.weights[v * e.nvertices + w] != 0, v == w, "%s order %d vertex %d",
                       fe_cell_name(e.cell), p, v);
      fe_element_free(&e);
    }
}

Test(element, bases_are_nodal)
{
  for (int i = 0; i < NCASES; i++)
    for (int p = 1; p <= cases[i].maxorder; p++)
      for (int kind = 0; kind < 2; kind++) {
        fe_element e;
        make(&cases[i], p, (fe_node_kind)kind, &e);
        double *phi = malloc(sizeof(double) * e.nbasis);
        double worst = 0;
        for (int node = 0; node < e.nbasis; node++) {
          fe_element_eval(&e, e.nodes + 3 * node, phi, NULL);
          for (int b = 0; b < e.nbasis; b++) worst = fmax(worst, fabs(phi[b] - (b == node)));
        }
        cr_expect_lt(worst, 1e-9, "%s order %d: off by %g", fe_cell_name(e.cell), p, worst);
        free(phi);
        fe_element_free(&e);
      }
}

/* A polynomial of degree p (total on simplices and in the triangle of a prism; per direction
 * on tensor cells and the line of a prism) is reproduced exactly by interpolation. */
static double poly(const fe_element *e, const double *x)
{
  int p = e->order;
  double s = 0.3;
  if (e->cell == FE_CELL_QUAD || e->cell == FE_CELL_HEX) {
    double v = 1;
    for (int d = 0; d < e->dim; d++) v *= pow(x[d] + 0.4 * d - 0.2, p) + 0.5;
    return s + v;
  }
  double t = x[0] + 0.7 * x[1] - 0.1;
  double v = pow(t, p) + pow(x[1] - 0.3, p - 1);
  if (e->cell == FE_CELL_TET) v += pow(x[2] + 0.25 * x[0], p);
  if (e->cell == FE_CELL_PRISM) v *= pow(x[2] - 0.1, p) + 1;
  return s + v;
}

Test(element, bases_sum_to_one_and_reproduce_their_polynomials)
{
  unsigned seed = 7;
  for (int i = 0; i < NCASES; i++)
    for (int p = 1; p <= cases[i].maxorder; p++) {
      fe_element e;
      make(&cases[i], p, FE_NODES_GLL, &e);
      double *phi = malloc(sizeof(double) * e.nbasis);
      for (int k = 0; k < 5; k++) {
        double xi[3] = {0, 0, 0}, sum = 0, interp = 0;
        random_point(&e, &seed, xi);
        fe_element_eval(&e, xi, phi, NULL);
        for (int b = 0; b < e.nbasis; b++) {
          sum += phi[b];
          interp += phi[b] * poly(&e, e.nodes + 3 * b);
        }
        cr_expect(fabs(sum - 1) < 1e-10, "%s order %d: sum %.17g", fe_cell_name(e.cell), p, sum);
        cr_expect(fabs(interp - poly(&e, xi)) < 1e-8 * (1 + fabs(poly(&e, xi))),
                  "%s order %d: interpolant %.15g vs %.15g", fe_cell_name(e.cell), p, interp,
                  poly(&e, xi));
      }
      free(phi);
      fe_element_free(&e);
    }
}

Test(element, derivatives_match_finite_differences)
{
  unsigned seed = 11;
  for (int i = 0; i < NCASES; i++)
    for (int p = 1; p <= cases[i].maxorder; p += 2) {
      fe_element e;
      make(&cases[i], p, FE_NODES_GLL, &e);
      int nb = e.nbasis, dim = e.dim;
      double *phi_p = malloc(sizeof(double) * nb), *phi_m = malloc(sizeof(double) * nb);
      double *dphi = malloc(sizeof(double) * nb * dim);
      double xi[3] = {0, 0, 0}, h = 1e-6, worst = 0;
      random_point(&e, &seed, xi);
      fe_element_eval(&e, xi, NULL, dphi);
      for (int d = 0; d < dim; d++) {
        double xp[3] = {xi[0], xi[1], xi[2]}, xm[3] = {xi[0], xi[1], xi[2]};
        xp[d] += h;
        xm[d] -= h;
        fe_element_eval(&e, xp, phi_p, NULL);
        fe_element_eval(&e, xm, phi_m, NULL);
        for (int b = 0; b < nb; b++)
          worst = fmax(worst, fabs((phi_p[b] - phi_m[b]) / (2 * h) - dphi[b * dim + d]));
      }
      cr_expect_lt(worst, 1e-5 * p * p, "%s order %d: derivative off by %g", fe_cell_name(e.cell),
                   p, worst);
      free(phi_p);
      free(phi_m);
      free(dphi);
      fe_element_free(&e);
    }
}

Test(element, gll_nodes_are_the_lobatto_points)
{
  fe_element e;
  cr_assert_eq(fe_element_create(FE_CELL_HEX, 'Q', 4, FE_NODES_GLL, &e), 0);
  /* Q4: the GLL points of 5 nodes are 0, +-sqrt(3/7), +-1 */
  double want[5] = {-1, -sqrt(3.0 / 7), 0, sqrt(3.0 / 7), 1};
  for (int i = 0; i < 5; i++) cr_expect(fabs(e.line[i] - want[i]) < 1e-14, "node %d: %.17g", i, e.line[i]);
  fe_element_free(&e);
  cr_assert_eq(fe_element_create(FE_CELL_HEX, 'Q', 4, FE_NODES_EQUISPACED, &e), 0);
  for (int i = 0; i < 5; i++) cr_expect(fabs(e.line[i] - (-1 + 0.5 * i)) < 1e-15);
  fe_element_free(&e);
}

Test(element, space_that_does_not_fit_is_an_error)
{
  fe_element e;
  cr_expect_neq(fe_element_create(FE_CELL_TET, 'Q', 1, FE_NODES_GLL, &e), 0);
  cr_expect(strstr(fe_error_message(), "does not fit") != NULL, "%s", fe_error_message());
  cr_expect_neq(fe_element_create(FE_CELL_HEX, 'P', 2, FE_NODES_GLL, &e), 0);
  cr_expect(strstr(fe_error_message(), "Q1..Q9") != NULL, "%s", fe_error_message());
  cr_expect_neq(fe_element_create(FE_CELL_TET, 'P', 8, FE_NODES_GLL, &e), 0);
  cr_expect(strstr(fe_error_message(), "1..7") != NULL, "%s", fe_error_message());
  cr_expect_neq(fe_element_create(FE_CELL_QUAD, 'Q', 10, FE_NODES_GLL, &e), 0);
  cr_expect(strstr(fe_error_message(), "1..9") != NULL, "%s", fe_error_message());
  fe_error_clear();
}

/* ---- spaces ---- */

static fe_mesh *box(fe_cell_type t, int n, double distort)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = t;
  o.cells[0] = o.cells[1] = n;
  o.cells[2] = fe_cell_dim(t) == 3 ? n : 0;
  o.distort = distort;
  fe_mesh *m;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

/* A smooth function of x and its interpolant in V evaluated at a physical point of cell c. */
static double smooth(const double *x) { return sin(1.3 * x[0] + 0.4) * cos(0.7 * x[1]) + x[2] * x[2] * x[0]; }

static int smooth_fn(void *ctx, const double x[3], int n, double *v)
{
  (void)ctx;
  for (int k = 0; k < n; k++) v[k] = smooth(x) + k;
  return 0;
}

/* Every node's coordinates are where each of its cells maps the node's reference point, and
 * a field interpolated on V takes the same value at points of a shared face seen from both
 * cells: the shared nodes are numbered consistently whatever the cells' orientation. */
static void check_conforming(fe_cell_type t, const char *name, double distort)
{
  fe_mesh *m = box(t, 3, distort);
  fe_space *V;
  cr_assert_eq(fe_space_create(m, name, &V), 0, "%s", fe_error_message());
  const fe_element *e = &V->elem;
  double worst = 0;
  for (int c = 0; c < m->ncells; c++)
    for (int b = 0; b < e->nbasis; b++) {
      double x[3];
      fe_space_cell_map(V, c, e->nodes + 3 * b, x, NULL);
      const double *y = V->node_coords + 3 * (size_t)V->cell_nodes[(size_t)c * e->nbasis + b];
      for (int d = 0; d < 3; d++) worst = fmax(worst, fabs(x[d] - y[d]));
    }
  cr_expect_lt(worst, 1e-12, "%s on %s: a node is shared by cells that place it %g apart", name,
               fe_cell_name(t), worst);
  fe_space_free(V);
  fe_mesh_free(m);
}

Test(space, shared_nodes_agree_from_every_cell)
{
  const char *tet[] = {"P1", "P2", "P3", "P4", "P5"}, *hex[] = {"Q1", "Q2", "Q3", "Q4", "Q6"};
  for (int k = 0; k < 5; k++) {
    check_conforming(FE_CELL_TET, tet[k], 0.3);
    check_conforming(FE_CELL_TRI, tet[k], 0.3);
    check_conforming(FE_CELL_PRISM, tet[k], 0.3);
    check_conforming(FE_CELL_HEX, hex[k], 0.3);
    check_conforming(FE_CELL_QUAD, hex[k], 0.3);
  }
}

/* The interpolant of a smooth field, evaluated from the two cells of every interior face at
 * points of that face, agrees: the field is continuous. Faces are found through the cells'
 * vertex sets; points on the face are mapped into each cell's reference coordinates by the
 * vertex weights of the face's lattice. */
Test(space, interpolant_is_continuous_across_faces)
{
  const struct {
    fe_cell_type t;
    const char *name;
  } cs[] = {{FE_CELL_TET, "P3"}, {FE_CELL_TET, "P4"}, {FE_CELL_HEX, "Q3"},
            {FE_CELL_PRISM, "P3"}, {FE_CELL_TRI, "P4"}, {FE_CELL_QUAD, "Q4"}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    fe_mesh *m = box(cs[k].t, 2, 0.3);
    fe_space *V;
    cr_assert_eq(fe_space_create(m, cs[k].name, &V), 0, "%s", fe_error_message());
    double *u = malloc(sizeof(double) * V->ndofs);
    cr_assert_eq(fe_space_interpolate(V, smooth_fn, NULL, u), 0);
    const fe_element *e = &V->elem;
    const int nb = e->nbasis, nv = e->nvertices;
    double *phi = malloc(sizeof(double) * nb), worst = 0;
    long checked = 0;
    /* a point on a shared entity: the barycentre of some shared nodes, in each cell's
     * reference coordinates (each cell's nodes with that global id) */
    for (int c1 = 0; c1 < m->ncells; c1++)
      for (int c2 = c1 + 1; c2 < m->ncells; c2++) {
        double xi1[3] = {0}, xi2[3] = {0};
        int shared = 0;
        for (int a = nv; a < nb; a++)
          for (int b = nv; b < nb; b++)
            if (V->cell_nodes[(size_t)c1 * nb + a] == V->cell_nodes[(size_t)c2 * nb + b]) {
              for (int d = 0; d < 3; d++) {
                xi1[d] += e->nodes[3 * a + d];
                xi2[d] += e->nodes[3 * b + d];
              }
              shared++;
            }
        if (shared < 2) continue;
        for (int d = 0; d < 3; d++) xi1[d] /= shared, xi2[d] /= shared;
        double v1 = 0, v2 = 0, x1[3], x2[3];
        fe_space_cell_map(V, c1, xi1, x1, NULL);
        fe_space_cell_map(V, c2, xi2, x2, NULL);
        /* the barycentre of shared nodes of a face lies on it in both cells (affine faces) */
        if (fabs(x1[0] - x2[0]) + fabs(x1[1] - x2[1]) + fabs(x1[2] - x2[2]) > 1e-12) continue;
        fe_element_eval(e, xi1, phi, NULL);
        for (int b = 0; b < nb; b++) v1 += phi[b] * u[V->cell_nodes[(size_t)c1 * nb + b]];
        fe_element_eval(e, xi2, phi, NULL);
        for (int b = 0; b < nb; b++) v2 += phi[b] * u[V->cell_nodes[(size_t)c2 * nb + b]];
        worst = fmax(worst, fabs(v1 - v2));
        checked++;
      }
    cr_expect_gt(checked, m->ncells / 2, "%s: too few shared faces found (%ld)", cs[k].name, checked);
    cr_expect_lt(worst, 1e-11, "%s on %s: the interpolant jumps by %g across a face", cs[k].name,
                 fe_cell_name(cs[k].t), worst);
    free(phi);
    free(u);
    fe_space_free(V);
    fe_mesh_free(m);
  }
}

Test(space, p2_nodes_are_vertices_plus_edges)
{
  fe_mesh *m = box(FE_CELL_TET, 4, 0);
  fe_space *V;
  cr_assert_eq(fe_space_create(m, "P2", &V), 0);
  /* the structured tet box has (2n+1)^3 P2 nodes: the vertices and edge midpoints of the
   * 6-tet split are the points of the twice-finer lattice */
  cr_expect_eq(V->nnodes, 9 * 9 * 9);
  fe_space_free(V);
  cr_assert_eq(fe_space_create(m, "P3", &V), 0);
  fe_space_free(V);
  fe_mesh_free(m);
  m = box(FE_CELL_HEX, 3, 0.2);
  cr_assert_eq(fe_space_create(m, "Q5", &V), 0);
  cr_expect_eq(V->nnodes, 16 * 16 * 16);
  fe_space_free(V);
  fe_mesh_free(m);
}

/* Boundary nodes are exactly the nodes on the boundary of the unit cube, per tag. */
Test(space, boundary_nodes_are_on_their_faces)
{
  const struct {
    fe_cell_type t;
    const char *name;
  } cs[] = {{FE_CELL_TET, "P3"}, {FE_CELL_HEX, "Q4"}, {FE_CELL_PRISM, "P2"}, {FE_CELL_TRI, "P3"}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    fe_mesh *m = box(cs[k].t, 3, 0);
    fe_space *V;
    cr_assert_eq(fe_space_create(m, cs[k].name, &V), 0);
    int *nodes, n;
    const char *xmin[] = {"xmin"};
    cr_assert_eq(fe_space_boundary_nodes(V, xmin, 1, &nodes, &n), 0, "%s", fe_error_message());
    int want = 0;
    for (int i = 0; i < V->nnodes; i++) want += fabs(V->node_coords[3 * i]) < 1e-12;
    cr_expect_eq(n, want, "%s: %d nodes on xmin, expected %d", cs[k].name, n, want);
    for (int i = 0; i < n; i++) cr_expect(fabs(V->node_coords[3 * nodes[i]]) < 1e-12);
    free(nodes);
    cr_assert_eq(fe_space_boundary_nodes(V, NULL, 0, &nodes, &n), 0);
    cr_expect_eq(n, 0);
    free(nodes);
    const char *all[] = {"all"};
    cr_assert_eq(fe_space_boundary_nodes(V, all, 1, &nodes, &n), 0);
    want = 0;
    for (int i = 0; i < V->nnodes; i++) {
      const double *x = V->node_coords + 3 * i;
      int on = 0;
      for (int d = 0; d < m->dim; d++) on |= fabs(x[d]) < 1e-12 || fabs(x[d] - 1) < 1e-12;
      want += on;
    }
    cr_expect_eq(n, want, "%s: %d boundary nodes, expected %d", cs[k].name, n, want);
    free(nodes);
    fe_space_free(V);
    fe_mesh_free(m);
  }
}

Test(space, vector_space_interleaves_components)
{
  fe_mesh *m = box(FE_CELL_TET, 2, 0);
  fe_space_opts o = {.family = 'P', .order = 2, .ncomp = 3, .kind = FE_NODES_GLL};
  fe_space *V;
  cr_assert_eq(fe_space_create_opts(m, &o, &V), 0, "%s", fe_error_message());
  cr_expect_eq(V->ndofs, 3 * V->nnodes);
  double *u = malloc(sizeof(double) * V->ndofs);
  cr_assert_eq(fe_space_interpolate(V, smooth_fn, NULL, u), 0);
  for (int i = 0; i < V->nnodes; i++) {
    cr_expect(fabs(u[3 * i + 1] - u[3 * i] - 1) < 1e-14);
    cr_expect(fabs(u[3 * i + 2] - u[3 * i] - 2) < 1e-14);
  }
  int *dofs, n, *nodes, nn;
  const char *tags[] = {"zmax"};
  cr_assert_eq(fe_space_boundary_dofs(V, tags, 1, &dofs, &n), 0);
  cr_assert_eq(fe_space_boundary_nodes(V, tags, 1, &nodes, &nn), 0);
  cr_expect_eq(n, 3 * nn);
  cr_expect_eq(dofs[4], 3 * nodes[1] + 1);
  free(dofs);
  free(nodes);
  free(u);
  fe_space_free(V);
  o.ncomp = 4;
  cr_expect_neq(fe_space_create_opts(m, &o, &V), 0);
  fe_error_clear();
  fe_mesh_free(m);
}
