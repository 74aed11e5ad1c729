/* A space split over ranks, each rank's part made in one process (fe_space_create_part):
 * the parts hold every cell once and every node, each node owned once; each rank's
 * boundary lists (found in its own space: engine/parallel/dist.c's boundary_lists) are the
 * whole space's boundary nodes that the rank holds, for every facet tag, on boxes of every
 * cell type split into more parts than a slab's two neighbours (where a rank's cell meets the
 * boundary at a vertex or an edge alone). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "engine/core/error.h"
#include "engine/fem/space.h"
#include "engine/mesh/mesh.h"
#include "engine/parallel/dist.h"

typedef struct split_case {
  fe_cell_type type;
  int cells[3];
  const char *space;
  int parts;
} split_case;

static fe_mesh *box(const split_case *c)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = c->type;
  o.cells[0] = c->cells[0], o.cells[1] = c->cells[1], o.cells[2] = c->cells[2];
  o.distort = 0.15;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

/* Part rank's boundary list k against the whole space's list of the same tag. */
static void check_list(const fe_space *W, const fe_space *V, int k, const split_case *c, int rank)
{
  const fe_dist *d = V->dist;
  const fe_dist_boundary *b = &d->bound[k];
  int *all, na;
  cr_assert_eq(fe_space_boundary_nodes_ids(W, b->tag < 0 ? NULL : &b->tag, b->tag < 0 ? 0 : 1,
                                           &all, &na), 0, "%s", fe_error_message());
  int n = 0;
  for (int i = 0, l = 0; i < na; i++) {
    while (l < V->nnodes && d->l2g[l] < all[i]) l++;
    if (l == V->nnodes || d->l2g[l] != all[i]) continue;
    cr_assert(n < b->n && b->nodes[n] == l, "%s on %d parts, part %d, tag %d: the whole "
              "space's boundary node %d (local %d) is not its list's %d-th (%d of them)",
              c->space, c->parts, rank, b->tag, all[i], l, n, b->n);
    n++;
  }
  cr_assert_eq(n, b->n, "%s on %d parts, part %d, tag %d: %d boundary nodes, the whole space's "
               "that it holds %d", c->space, c->parts, rank, b->tag, b->n, n);
  free(all);
}

Test(dist, parts_hold_every_cell_and_node_and_the_whole_spaces_boundary)
{
  const split_case cases[] = {
      {FE_CELL_TET, {4, 5, 6}, "P1", 4},  {FE_CELL_TET, {4, 3, 5}, "P2", 5},
      {FE_CELL_TET, {3, 3, 4}, "P3", 3},  {FE_CELL_HEX, {4, 4, 5}, "Q1", 4},
      {FE_CELL_HEX, {4, 5, 4}, "Q2", 6},  {FE_CELL_HEX, {3, 3, 3}, "Q3", 3},
      {FE_CELL_PRISM, {3, 4, 3}, "P2", 4}, {FE_CELL_QUAD, {6, 7, 0}, "Q2", 4},
      {FE_CELL_TRI, {6, 7, 0}, "P2", 4},  {FE_CELL_TRI, {5, 6, 0}, "P1", 7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const split_case *c = &cases[i];
    fe_mesh *m = box(c);
    fe_space_opts o = {.ncomp = 1};
    cr_assert_eq(fe_space_parse_name(c->space, &o.family, &o.order), 0, "%s", fe_error_message());
    fe_space *W = NULL;
    cr_assert_eq(fe_space_create_opts(m, &o, &W), 0, "%s", fe_error_message());
    int ntags = 0;
    for (int t = 0; t < m->ntags; t++) ntags += m->tags[t].dim == m->dim - 1;
    int *held = calloc((size_t)W->nnodes, sizeof(int)), *owned = calloc((size_t)W->nnodes, sizeof(int));
    long long cells = 0;
    for (int r = 0; r < c->parts; r++) {
      fe_space *V = NULL;
      cr_assert_eq(fe_space_create_part(m, &o, r, c->parts, &V), 0, "%s", fe_error_message());
      const fe_dist *d = V->dist;
      cells += V->mesh->ncells;
      cr_assert_eq(d->ndofs, W->ndofs);
      for (int l = 0; l < V->nnodes; l++) {
        cr_assert(l == 0 || d->l2g[l] > d->l2g[l - 1], "%s part %d: l2g not ascending", c->space, r);
        held[d->l2g[l]]++, owned[d->l2g[l]]++;
      }
      for (int k = 0; k < d->nnotowned; k++) owned[d->l2g[d->notowned[k]]]--;
      cr_assert_eq(d->nbound, 1 + ntags, "%s part %d: %d boundary lists for %d facet tags",
                   c->space, r, d->nbound, ntags);
      for (int k = 0; k < d->nbound; k++) check_list(W, V, k, c, r);
      fe_space_free(V);
    }
    cr_assert_eq(cells, m->ncells, "%s on %d parts: %lld cells in the parts of %d", c->space,
                 c->parts, cells, m->ncells);
    for (int g = 0; g < W->nnodes; g++)
      cr_assert(held[g] >= 1 && owned[g] == 1, "%s on %d parts: node %d held by %d, owned by %d",
                c->space, c->parts, g, held[g], owned[g]);
    free(held), free(owned);
    fe_space_free(W);
    fe_mesh_free(m);
  }
}
