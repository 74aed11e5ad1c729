/* felab patches: the host side of strategy "patch" (engine/codegen/kernels/patch.knl). A work group owns
 * `block` consecutive stored cells (a patch) and the sorted list of the nodes they touch; its
 * items integrate the cells, either one item per cell (the cells' local node numbers and each
 * contribution's place in its node's run are stored) or one item per walk through `walk` cells
 * that share nodes, driven by a stream of events (docs/kernels.md, "The patch template"). */
#ifndef FE_PATCH_H
#define FE_PATCH_H

#include <stddef.h>

#include "engine/fem/quadrature.h"
#include "engine/fem/space.h"

/* Limits of the item-per-cell words: a local node in 16 bits, a place in the runs in 16. */
#define FE_PATCH_MAX_NODES 65536
#define FE_PATCH_MAX_PLACES 65536
/* Limits of the event words: a local node in 11 bits, a place in the runs in 15, a slot in 3. */
#define FE_WALK_MAX_NODES 2048
#define FE_WALK_MAX_PLACES 32768
#define FE_WALK_MAX_SLOTS 8

typedef struct fe_patches {
  int npatch;          /* patches (work groups) */
  int block;           /* stored cells per patch */
  int walk;            /* cells per walk; 0: one item per cell */
  int items;           /* walks per patch (walk > 0) */
  int maxl;            /* nodes of the largest patch */
  int maxc;            /* places in the runs of the largest patch */
  int maxe;            /* walks: events of the largest patch (padding included) */
  double nodes_total;  /* nodes summed over patches (a node in k patches counts k) */
  size_t nevents;      /* walks: event words, padding included */
  int *start;          /* npatch + 1: patch g's nodes are nodes[start[g] .. start[g+1]) */
  int *nodes;          /* global node numbers, ~node for a constrained node */
  int lanes;           /* nodes whose runs are interleaved (fe_patch_place) */
  int *runs;           /* each patch node's run word: its first place | its count << 16 */
  unsigned *lcells;    /* one item per cell: patch g's cell j, basis function b at
                        * lcells[g*block*NB + b*block + j]: its local node number (bits 0-15)
                        * and the place of its contribution in that node's run (16-31) */
  unsigned *events;    /* walks: patch g's are events[estart[g] + k*items + t] */
  int *estart;         /* walks: npatch + 1 */
  int too_large;       /* after a failed build: a patch had more nodes or places than the
                        * words name (the limits above); a smaller block may fit */
} fe_patches;

/* The place of the k-th contribution (in cell order) to the node of run word `run`. The
 * nodes of a patch go in groups of `lanes` (a power of two); a group's k-th contributions
 * fill one row of `lanes` places, rotated by k so that the cells filing at once seldom hit
 * one memory bank: node l of the group at row k takes place row + (l + k) mod lanes. */
static inline int fe_patch_place(unsigned run, int k, int lanes)
{
  int first = (int)(run & 0xffffu), lane = first & (lanes - 1);
  return first - lane + k * lanes + ((lane + k) & (lanes - 1));
}

/* Whether walks may keep a node in its slot from one cell to the next: the cells are
 * simplices (any order of the vertices is the same cell) and every rule is invariant under
 * relabelling the vertices, so the integral over a relabelled cell is the same to rounding. */
int fe_patch_walk_reuses(fe_cell_type cell, const fe_quadrature *rules, int nrules);

/* Build the patches over the npad stored cells perm[] (perm[i] < 0: padding) of V, their
 * runs interleaved by `lanes` (1: one after the other; a GPU: its shared-memory banks'
 * width in reals, so that summing the runs reads whole rows).
 * constrained[n] != 0 marks constrained nodes (NULL: none). walk > 0 orders each patch's
 * cells into walks (rewriting perm within the patch) and makes the events; reuse says whether
 * a walk may keep nodes across cells in another order (fe_patch_walk_reuses). sorted: each
 * patch's nodes ascending (a GPU's gathers and adds then touch memory in order; walks always),
 * else in the order its cells meet them (a CPU: no sort a patch). On failure P holds nothing
 * but too_large. */
int fe_patches_build(const fe_space *V, const unsigned char *constrained, int *perm, size_t npad,
                     int block, int walk, int reuse, int lanes, int sorted, fe_patches *P);
void fe_patches_free(fe_patches *P);

#endif
