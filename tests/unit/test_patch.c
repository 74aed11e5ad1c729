/* Patches and walks of strategy "patch" (engine/operator/patch.c): every cell is integrated once with
 * exactly its own nodes, every contribution lands in its node's run at a place of its own,
 * walks through tets keep three of four nodes from one cell to the next, and walks reuse
 * nodes only where the rule is invariant under relabelling the vertices. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/operator/patch.h"
#include "engine/fem/quadrature.h"
#include "engine/fem/space.h"

/* A box of n0 x n1 x n2 cubes of the given cell type, distorted, and its first-order space. */
static void walk_space(fe_cell_type type, int n0, int n1, int n2, fe_mesh **m, fe_space **V)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = n0;
  o.cells[1] = n1;
  o.cells[2] = n2;
  o.distort = 0.2;
  cr_assert_eq(fe_mesh_box(&o, m), 0, "%s", fe_error_message());
  cr_assert_eq(fe_space_create(*m, type == FE_CELL_HEX ? "Q1" : "P1", V), 0, "%s",
               fe_error_message());
}

/* The stored cells in mesh order, padded to whole patches with -(first + 1). */
static int *walk_perm(int ncells, int block, size_t *npad)
{
  *npad = (size_t)(ncells + block - 1) / block * block;
  int *perm = malloc(sizeof(int) * *npad);
  for (size_t i = 0; i < *npad; i++) perm[i] = i < (size_t)ncells ? (int)i : -(int)(i / block * block) - 1;
  return perm;
}

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Run every walk's events as the kernel does; check each integrated cell's slots against the
 * stored cell's nodes and each place against its node's run. Returns the loads per cell. */
static double replay_walks(const fe_space *V, const fe_patches *P, const int *perm, size_t npad)
{
  int nb = V->elem.nbasis, ncells = V->mesh->ncells;
  char *done = calloc((size_t)ncells, 1);
  double loads = 0;
  for (int g = 0; g < P->npatch; g++) {
    int n0 = P->start[g], nl = P->start[g + 1] - n0;
    int ne = (P->estart[g + 1] - P->estart[g]) / P->items;
    int places = 0, *fill = calloc((size_t)nl + 1, sizeof(int));
    for (int i = 0; i < nl; i++) {
      int count = P->runs[n0 + i] >> 16;
      int last = count ? fe_patch_place((unsigned)P->runs[n0 + i], count - 1, P->lanes) : -1;
      if (last >= places) places = last + 1;
    }
    char *used = calloc((size_t)places + 1, 1);
    for (int t = 0; t < P->items; t++) {
      int slot[FE_WALK_MAX_SLOTS], c = g * P->block + t * P->walk;
      for (int s = 0; s < nb; s++) slot[s] = -1;
      for (int k = 0; k < ne; k++) {
        unsigned ev = P->events[P->estart[g] + (size_t)k * P->items + t];
        int l = (int)(ev & 0x7ffu), place = (int)((ev >> 11) & 0x7fffu), s = (int)((ev >> 26) & 7u);
        cr_assert_lt(s, nb);
        if (ev & (1u << 29)) {
          int i = slot[s];
          cr_assert_geq(i, 0, "flush of an empty slot");
          cr_assert_lt(fill[i], P->runs[n0 + i] >> 16, "node %d: more flushes than its run", i);
          cr_assert_eq(place, fe_patch_place((unsigned)P->runs[n0 + i], fill[i]++, P->lanes),
                       "place %d is not the next of node %d's run", place, i);
          cr_assert(!used[place], "place %d filled twice", place);
          used[place] = 1;
          slot[s] = -1;
        }
        if (ev & (1u << 30)) {
          cr_assert_lt(l, nl);
          slot[s] = l;
          loads++;
        }
        if (ev & (1u << 31)) {
          cr_assert_lt((size_t)c, npad);
          int cell = perm[c++];
          cr_assert_geq(cell, 0, "a walk integrates a padding cell");
          cr_assert(!done[cell], "cell %d integrated twice", cell);
          done[cell] = 1;
          int have[FE_WALK_MAX_SLOTS], want[FE_WALK_MAX_SLOTS];
          for (int s2 = 0; s2 < nb; s2++) {
            cr_assert_geq(slot[s2], 0);
            int pn = P->nodes[n0 + slot[s2]];
            have[s2] = pn < 0 ? ~pn : pn;
            want[s2] = V->cell_nodes[(size_t)cell * nb + s2];
          }
          qsort(have, nb, sizeof(int), cmp_int);
          qsort(want, nb, sizeof(int), cmp_int);
          cr_assert(!memcmp(have, want, sizeof(int) * nb), "cell %d: the slots hold other nodes", cell);
        }
      }
      for (int s = 0; s < nb; s++) cr_assert_eq(slot[s], -1, "walk %d of patch %d ends unflushed", t, g);
    }
    for (int i = 0; i < nl; i++)
      cr_assert_eq(fill[i], P->runs[n0 + i] >> 16, "patch %d: node %d's run not filled", g, i);
    free(used), free(fill);
  }
  for (int c = 0; c < ncells; c++) cr_assert(done[c], "cell %d never integrated", c);
  free(done);
  return loads / ncells;
}

/* Build walks of `walk` cells in patches of `block`, runs interleaved by `lanes`, and replay
 * them. */
static double check_walks(fe_cell_type type, int block, int walk, int reuse, int lanes)
{
  fe_mesh *m;
  fe_space *V;
  walk_space(type, 7, 5, 4, &m, &V);
  size_t npad;
  int *perm = walk_perm(m->ncells, block, &npad);
  unsigned char *con = calloc((size_t)V->nnodes, 1);
  for (int i = 0; i < V->nnodes; i += 3) con[i] = 1;
  fe_patches P;
  cr_assert_eq(fe_patches_build(V, con, perm, npad, block, walk, reuse, lanes, 1, &P), 0, "%s",
               fe_error_message());
  cr_assert_eq(P.items, (block + walk - 1) / walk);
  for (int i = 0; i < P.start[P.npatch]; i++) { /* constrained nodes are stored as ~node */
    int pn = P.nodes[i], node = pn < 0 ? ~pn : pn;
    cr_assert_eq(pn < 0, con[node] != 0, "node %d: constrained flag lost", node);
  }
  double per_cell = replay_walks(V, &P, perm, npad);
  fe_patches_free(&P);
  free(con);
  free(perm);
  fe_space_free(V);
  fe_mesh_free(m);
  return per_cell;
}

Test(patch, tet_walks_replay_exactly_and_keep_three_nodes)
{
  double loads = check_walks(FE_CELL_TET, 200, 8, 1, 1);
  /* four loads to start each walk of eight, about one per cell after it */
  cr_assert_lt(loads, 1.8, "tet walks load %.2f nodes per cell", loads);
}

Test(patch, walks_of_odd_length_and_small_patches)
{
  check_walks(FE_CELL_TET, 37, 3, 1, 1);
  check_walks(FE_CELL_TET, 64, 64, 1, 1);
  check_walks(FE_CELL_TET, 37, 3, 1, 16); /* runs interleaved as on a GPU */
  check_walks(FE_CELL_TET, 128, 8, 1, 32);
}

Test(patch, hex_walks_keep_each_cells_own_order)
{
  double loads = check_walks(FE_CELL_HEX, 64, 8, 0, 16);
  cr_assert_leq(loads, 8.0);
}

/* One item per cell: the local numbers name each cell's own nodes, and the contributions of
 * the patch's cells fill their node's run once each, in cell order. With lanes > 1 the k-th
 * contributions of a group of `lanes` consecutive nodes share one row of `lanes` places. A
 * patch lists each of its nodes once, ascending when sorted, else in the order its cells meet
 * them. */
static void check_places(fe_cell_type type, int block, int lanes, int sorted)
{
  fe_mesh *m;
  fe_space *V;
  walk_space(type, 7, 5, 4, &m, &V);
  int nb = V->elem.nbasis;
  size_t npad;
  int *perm = walk_perm(m->ncells, block, &npad);
  fe_patches P;
  cr_assert_eq(fe_patches_build(V, NULL, perm, npad, block, 0, 0, lanes, sorted, &P), 0, "%s",
               fe_error_message());
  cr_assert_eq(P.walk, 0);
  cr_assert_eq(P.lanes, lanes);
  int *owner = malloc(sizeof(int) * (size_t)P.maxc); /* cell j that took each place */
  int *node = malloc(sizeof(int) * (size_t)P.maxc);  /* and for which local node */
  for (int g = 0; g < P.npatch; g++) {
    size_t first = (size_t)g * block * nb;
    int n0 = P.start[g], nl = P.start[g + 1] - n0, cells = 0, filed = 0;
    for (int p = 0; p < P.maxc; p++) owner[p] = node[p] = -1;
    for (int j = 0; j < block && perm[(size_t)g * block + j] >= 0; j++, cells++)
      for (int b = 0; b < nb; b++) {
        size_t i = first + (size_t)b * block + (size_t)j;
        int l = (int)(P.lcells[i] & 0xffffu), p = (int)(P.lcells[i] >> 16);
        int c = perm[(size_t)g * block + j];
        cr_assert(l >= 0 && l < nl, "patch %d, cell %d: local number %d of %d", g, j, l, nl);
        cr_assert_eq(P.nodes[n0 + l], V->cell_nodes[(size_t)c * nb + b], "patch %d, cell %d: wrong node", g, c);
        cr_assert_lt(p, P.maxc, "patch %d: place %d beyond the %d places", g, p, P.maxc);
        cr_assert_eq(owner[p], -1, "patch %d: place %d filed twice", g, p);
        owner[p] = j;
        node[p] = l;
        filed++;
      }
    cr_assert_eq(filed, cells * nb);
    for (int i = 1; i < nl; i++) {
      if (sorted) cr_assert_lt(P.nodes[n0 + i - 1], P.nodes[n0 + i], "patch %d: not ascending", g);
      for (int k = 0; k < i; k++)
        cr_assert_neq(P.nodes[n0 + k], P.nodes[n0 + i], "patch %d lists node %d twice", g, P.nodes[n0 + i]);
    }
    for (int j = 0, seen = 0; !sorted && j < cells; j++) /* first met, first listed */
      for (int b = 0; b < nb; b++) {
        int l = (int)(P.lcells[first + (size_t)b * block + (size_t)j] & 0xffffu);
        cr_assert_leq(l, seen, "patch %d: node %d listed before the cells meet it", g, l);
        seen += l == seen;
      }
    for (int i = 0; i < nl; i++) { /* each run: its count of places, in cell order, in its row */
      unsigned run = (unsigned)P.runs[n0 + i];
      int count = (int)(run >> 16), row0 = (int)(run & 0xffffu) / lanes * lanes;
      for (int k = 0; k < count; k++) {
        int p = fe_patch_place(run, k, lanes);
        cr_assert_eq(node[p], i, "patch %d: place %d of node %d's run filed for node %d", g, p, i, node[p]);
        cr_assert(k == 0 || owner[fe_patch_place(run, k - 1, lanes)] < owner[p],
                  "patch %d, node %d: run not in cell order", g, i);
        cr_assert_eq(p / lanes, row0 / lanes + k, "patch %d, node %d: contribution %d off its row", g, i, k);
        cr_assert_eq(row0 / lanes, (int)(P.runs[n0 + i / lanes * lanes] & 0xffffu) / lanes,
                     "patch %d: node %d is not in its group's rows", g, i);
      }
    }
  }
  free(owner), free(node);
  fe_patches_free(&P);
  free(perm);
  fe_space_free(V);
  fe_mesh_free(m);
}

Test(patch, one_item_per_cell_fills_each_place_once_in_cell_order)
{
  check_places(FE_CELL_TET, 200, 1, 1);
  check_places(FE_CELL_TET, 37, 1, 1);
  check_places(FE_CELL_HEX, 64, 1, 1);
  check_places(FE_CELL_TET, 200, 16, 1);
  check_places(FE_CELL_TET, 37, 32, 1);
  check_places(FE_CELL_HEX, 64, 16, 1);
  check_places(FE_CELL_TET, 200, 1, 0);
  check_places(FE_CELL_HEX, 64, 1, 0);
}

Test(patch, reuse_only_with_rules_invariant_under_relabelling)
{
  fe_quadrature q;
  for (int deg = 1; deg <= 6; deg++) { /* the automatic rules on tets are symmetric */
    cr_assert_eq(fe_quadrature_create(FE_CELL_TET, deg, &q), 0);
    cr_assert(fe_patch_walk_reuses(FE_CELL_TET, &q, 1), "tet rule of degree %d", deg);
    fe_quadrature_free(&q);
  }
  cr_assert_eq(fe_quadrature_create_kind(FE_CELL_TET, 3, FE_QUAD_GAUSS, &q), 0);
  cr_assert(!fe_patch_walk_reuses(FE_CELL_TET, &q, 1), "a collapsed rule is not symmetric");
  fe_quadrature_free(&q);
  cr_assert_eq(fe_quadrature_create_kind(FE_CELL_TRI, 4, FE_QUAD_GAUSS, &q), 0);
  cr_assert(!fe_patch_walk_reuses(FE_CELL_TRI, &q, 1));
  fe_quadrature_free(&q);
  cr_assert_eq(fe_quadrature_create(FE_CELL_HEX, 2, &q), 0);
  cr_assert(!fe_patch_walk_reuses(FE_CELL_HEX, &q, 1), "hexes keep their own order");
  fe_quadrature_free(&q);
}

Test(patch, too_many_nodes_for_the_event_words_is_a_clear_error)
{
  fe_mesh *m;
  fe_space *V;
  walk_space(FE_CELL_TET, 16, 16, 16, &m, &V);
  size_t npad;
  int *perm = walk_perm(m->ncells, 16384, &npad);
  fe_patches P;
  cr_assert_neq(fe_patches_build(V, NULL, perm, npad, 16384, 8, 1, 1, 1, &P), 0);
  cr_assert(strstr(fe_error_message(), "use a smaller block"), "%s", fe_error_message());
  fe_error_clear();
  free(perm);
  fe_space_free(V);
  fe_mesh_free(m);
}

Test(patch, too_many_places_for_the_cell_words_is_a_clear_error)
{
  fe_mesh *m;
  fe_space *V;
  walk_space(FE_CELL_HEX, 16, 16, 16, &m, &V);
  fe_space_free(V);
  cr_assert_eq(fe_space_create(m, "Q2", &V), 0, "%s", fe_error_message());
  size_t npad;
  int *perm = walk_perm(m->ncells, 2048, &npad);
  fe_patches P;
  /* 2048 Q2 hexes file 55296 contributions; their runs interleaved by 64 need more places
   * than a cell's word can name */
  cr_assert_neq(fe_patches_build(V, NULL, perm, npad, 2048, 0, 0, 64, 1, &P), 0);
  cr_assert(strstr(fe_error_message(), "more than 65536 (use a smaller block)"), "%s",
            fe_error_message());
  fe_error_clear();
  cr_assert_eq(fe_patches_build(V, NULL, perm, npad, 2048, 0, 0, 1, 1, &P), 0, "%s", fe_error_message());
  cr_assert_eq(P.maxc, 2048 * 27, "one after the other, the runs take exactly the contributions");
  fe_patches_free(&P);
  free(perm);
  fe_space_free(V);
  fe_mesh_free(m);
}
