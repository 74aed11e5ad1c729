/* Reference elements: P1 and Q1 bases are nodal, sum to one, reproduce linear functions, and
 * their derivatives match finite differences; spaces that do not fit are clear errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine/element.h"
#include "engine/error.h"

static const struct {
  fe_cell_type cell;
  char family;
} linear_elements[] = {
    {FE_CELL_TRI, 'P'}, {FE_CELL_TET, 'P'}, {FE_CELL_QUAD, 'Q'}, {FE_CELL_HEX, 'Q'}};

/* Deterministic pseudo-random numbers in [0,1). */
static double next_random(unsigned *state)
{
  *state = *state * 1664525u + 1013904223u;
  return (*state >> 8) / 16777216.0;
}

/* A random point inside the reference cell of e. */
static void random_point(const fe_element *e, unsigned *state, double *xi)
{
  if (e->family == 'Q') {
    for (int d = 0; d < e->dim; d++) xi[d] = 2 * next_random(state) - 1;
    return;
  }
  double left = 1;
  for (int d = 0; d < e->dim; d++) {
    xi[d] = left * next_random(state) / 2;
    left -= xi[d];
  }
}

Test(element, bases_are_nodal)
{
  for (int i = 0; i < 4; i++) {
    fe_element e;
    cr_assert_eq(fe_element_create(linear_elements[i].cell, linear_elements[i].family, 1, &e), 0,
                 "%s", fe_error_message());
    cr_assert_eq(e.nbasis, fe_cell_nvertices(e.cell));
    cr_assert_eq(e.dim, fe_cell_dim(e.cell));
    double phi[FE_MAX_BASIS];
    for (int node = 0; node < e.nbasis; node++) {
      fe_element_eval(&e, e.nodes[node], phi, NULL);
      for (int b = 0; b < e.nbasis; b++)
        cr_assert(fabs(phi[b] - (b == node)) < 1e-15, "%s: phi_%d at node %d = %g",
                  fe_cell_name(e.cell), b, node, phi[b]);
    }
  }
}

Test(element, nodes_follow_gmsh_order)
{
  fe_element e;
  cr_assert_eq(fe_element_create(FE_CELL_TET, 'P', 1, &e), 0);
  cr_assert_eq(e.nodes[3][2], 1.0);
  cr_assert_eq(e.nodes[2][1], 1.0);
  cr_assert_eq(fe_element_create(FE_CELL_HEX, 'Q', 1, &e), 0);
  const double hex[8][3] = {{-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1},
                            {-1, -1, 1},  {1, -1, 1},  {1, 1, 1},  {-1, 1, 1}};
  cr_assert_eq(memcmp(e.nodes, hex, sizeof hex), 0);
}

Test(element, bases_sum_to_one_and_reproduce_linears)
{
  unsigned state = 12345;
  for (int i = 0; i < 4; i++) {
    fe_element e;
    cr_assert_eq(fe_element_create(linear_elements[i].cell, linear_elements[i].family, 1, &e), 0);
    for (int trial = 0; trial < 100; trial++) {
      double xi[3] = {0, 0, 0}, phi[FE_MAX_BASIS], dphi[FE_MAX_BASIS * 3];
      random_point(&e, &state, xi);
      fe_element_eval(&e, xi, phi, dphi);
      double sum = 0, x[3] = {0, 0, 0}, dsum[3] = {0, 0, 0};
      for (int b = 0; b < e.nbasis; b++) {
        sum += phi[b];
        for (int d = 0; d < e.dim; d++) {
          x[d] += phi[b] * e.nodes[b][d];
          dsum[d] += dphi[b * e.dim + d];
        }
      }
      cr_assert(fabs(sum - 1) < 1e-14, "%s: sum %.17g", fe_cell_name(e.cell), sum);
      for (int d = 0; d < e.dim; d++) {
        cr_assert(fabs(x[d] - xi[d]) < 1e-14, "%s: does not reproduce xi_%d",
                  fe_cell_name(e.cell), d);
        cr_assert(fabs(dsum[d]) < 1e-14, "%s: derivatives sum to %g", fe_cell_name(e.cell),
                  dsum[d]);
      }
    }
  }
}

Test(element, derivatives_match_finite_differences)
{
  unsigned state = 777;
  const double h = 1e-6;
  for (int i = 0; i < 4; i++) {
    fe_element e;
    cr_assert_eq(fe_element_create(linear_elements[i].cell, linear_elements[i].family, 1, &e), 0);
    for (int trial = 0; trial < 50; trial++) {
      double xi[3] = {0, 0, 0}, phi[FE_MAX_BASIS], dphi[FE_MAX_BASIS * 3];
      double plus[FE_MAX_BASIS], minus[FE_MAX_BASIS];
      random_point(&e, &state, xi);
      fe_element_eval(&e, xi, phi, dphi);
      for (int d = 0; d < e.dim; d++) {
        double xp[3] = {xi[0], xi[1], xi[2]}, xm[3] = {xi[0], xi[1], xi[2]};
        xp[d] += h;
        xm[d] -= h;
        fe_element_eval(&e, xp, plus, NULL);
        fe_element_eval(&e, xm, minus, NULL);
        for (int b = 0; b < e.nbasis; b++) {
          double fd = (plus[b] - minus[b]) / (2 * h);
          cr_assert(fabs(fd - dphi[b * e.dim + d]) < 1e-8, "%s: d phi_%d / d xi_%d = %g, fd %g",
                    fe_cell_name(e.cell), b, d, dphi[b * e.dim + d], fd);
        }
      }
    }
  }
}

Test(element, space_that_does_not_fit_is_an_error)
{
  fe_element e;
  cr_assert_eq(fe_element_create(FE_CELL_TET, 'Q', 1, &e), FE_ERR_ARG);
  cr_assert_str_eq(fe_error_message(), "space 'Q1' does not fit tet cells (use P1..)");
  cr_assert_eq(fe_element_create(FE_CELL_HEX, 'P', 1, &e), FE_ERR_ARG);
  cr_assert_str_eq(fe_error_message(), "space 'P1' does not fit hex cells (use Q1..)");
  cr_assert_eq(fe_element_create(FE_CELL_QUAD, 'X', 1, &e), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "family 'X'"), "%s", fe_error_message());
}

Test(element, higher_orders_not_available_yet)
{
  fe_element e;
  cr_assert_eq(fe_element_create(FE_CELL_TET, 'P', 2, &e), FE_ERR_ARG);
  cr_assert_str_eq(fe_error_message(),
                   "order 2 is not available yet (P1/Q1 only; higher orders: issue 4)");
  cr_assert_eq(fe_element_create(FE_CELL_HEX, 'Q', 0, &e), FE_ERR_ARG);
}
