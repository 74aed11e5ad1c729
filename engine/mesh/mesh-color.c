/* felab coloring of cell groups: blocks of consecutive cells colored so that no two groups of
 * one color share a vertex (first fit on 64-bit masks, large meshes in two halves at once). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"

/* Greedy coloring of cell groups, first fit, over groups [g0, g1): each vertex keeps a 64-bit
 * set of the colors of the groups that touch it (used); a group's forbidden colors are the
 * union over its vertices, it takes the lowest free one, and the vertices then record it. Two
 * passes over the group's vertices, so the cost is linear in the connectivity. Returns the
 * first group that would need more than 64 colors, or -1. */
static int color_range(const int *cells, int nvc, int block, int ncells, int g0, int g1,
                       uint64_t *used, int *color)
{
  for (int g = g0; g < g1; g++) {
    const size_t first = (size_t)g * block * nvc;
    const size_t last = ((size_t)g + 1) * block < (size_t)ncells ? first + (size_t)block * nvc
                                                                  : (size_t)ncells * nvc;
    uint64_t forbidden = 0;
    for (size_t k = first; k < last; k++) forbidden |= used[cells[k]];
    if (forbidden == UINT64_MAX) return g;
    const int c = __builtin_ctzll(~forbidden); /* lowest free color */
    const uint64_t bit = (uint64_t)1 << c;
    for (size_t k = first; k < last; k++) used[cells[k]] |= bit;
    color[g] = c;
  }
  return -1;
}

/* Large meshes are colored in two halves at once, each first fit on masks of its own; then
 * the groups of the second half that touch a vertex of the first, in order, take the lowest
 * color free of both halves' groups at their vertices (a half's masks name each of its colors
 * at a vertex once, so a group's own bit can be taken out). Neither step depends on the
 * threads, so neither does the coloring. The ids in cells may be any non-negative numbers
 * (mesh vertices, or the nodes of a higher-order space). */
int fe_mesh_color_groups(const fe_mesh *m, const int *cells, int nvc, int block, int **color,
                         int *ncolors)
{
  FE_ASSERT(m && cells && color && ncolors, FE_ERR_ARG, "mesh coloring: missing argument");
  FE_ASSERT(nvc > 0, FE_ERR_ARG, "mesh coloring: %d vertices per cell must be positive", nvc);
  *color = NULL;
  *ncolors = 0;
  const size_t nentries = (size_t)m->ncells * nvc;
  int maxid = -1, minid = 0;
#pragma omp parallel for schedule(static) reduction(max : maxid) reduction(min : minid)
  for (size_t k = 0; k < nentries; k++) {
    maxid = cells[k] > maxid ? cells[k] : maxid;
    minid = cells[k] < minid ? cells[k] : minid;
  }
  for (size_t k = 0; minid < 0 && k < nentries; k++) /* the first negative id, named */
    if (cells[k] < 0)
      FE_ERROR(FE_ERR_ARG, "mesh coloring: cell %zu has a negative vertex id %d", k / nvc,
               cells[k]);
  return fe_mesh_color_groups_below(m, cells, nvc, maxid + 1, block, color, ncolors);
}

int fe_mesh_color_groups_below(const fe_mesh *m, const int *cells, int nvc, int nids, int block,
                               int **color, int *ncolors)
{
  FE_ASSERT(m && cells && color && ncolors, FE_ERR_ARG, "mesh coloring: missing argument");
  FE_ASSERT(block > 0, FE_ERR_ARG, "mesh coloring: block = %d must be positive", block);
  FE_ASSERT(nvc > 0, FE_ERR_ARG, "mesh coloring: %d vertices per cell must be positive", nvc);
  *color = NULL;
  *ncolors = 0;
  const size_t nentries = (size_t)m->ncells * nvc;
  const int maxid = nids - 1;
  const int ngroups = m->ncells / block + (m->ncells % block != 0);
  const int halves = ngroups >= 4096 ? 2 : 1, split = halves == 2 ? ngroups / 2 : ngroups;
  uint64_t *used[2] = {NULL, NULL}; /* per vertex: colors of a half's groups touching it */
  int *group_color = fe_malloc((size_t)ngroups * sizeof(int) + 1, "group colors");
  for (int h = 0; h < halves; h++)
    used[h] = fe_calloc((size_t)maxid + 1, sizeof(uint64_t), "coloring vertex masks");
  if (!group_color || !used[0] || (halves == 2 && !used[1])) {
    free(group_color), free(used[0]), free(used[1]);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  int full[2] = {-1, -1};
#pragma omp parallel for schedule(static, 1) num_threads(halves)
  for (int h = 0; h < halves; h++)
    full[h] = color_range(cells, nvc, block, m->ncells, h ? split : 0, h ? ngroups : split,
                          used[h], group_color);
  int bad = full[0] >= 0 ? full[0] : full[1];
  /* the first half's vertices, a bit each (a few cache lines a group's look-ups touch), then
   * the second half's groups touching one of them */
  const size_t nwords = ((size_t)maxid + 64) / 64;
  uint64_t *near =
      halves == 2 && bad < 0 ? fe_malloc(sizeof(uint64_t) * nwords, "coloring seam") : NULL;
  unsigned char *seam = near ? malloc((size_t)(ngroups - split) + 1) : NULL;
  if (halves == 2 && bad < 0 && !seam) {
    free(near), free(group_color), free(used[0]), free(used[1]);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the coloring");
  }
#pragma omp parallel if (seam)
  {
#pragma omp for schedule(static)
    for (size_t w = 0; w < (seam ? nwords : 0); w++) {
      uint64_t bits = 0;
      for (size_t v = w * 64; v < w * 64 + 64 && v <= (size_t)maxid; v++)
        bits |= (uint64_t)(used[0][v] != 0) << (v - w * 64);
      near[w] = bits;
    }
#pragma omp for schedule(static)
    for (int g = split; g < (seam ? ngroups : split); g++) {
      const size_t first = (size_t)g * block * nvc;
      const size_t last = g == ngroups - 1 ? nentries : first + (size_t)block * nvc;
      uint64_t at = 0;
      for (size_t k = first; k < last; k++) at |= near[cells[k] >> 6] >> (cells[k] & 63);
      seam[g - split] = (unsigned char)(at & 1);
    }
  }
  free(near);
  for (int g = split; seam && bad < 0 && g < ngroups; g++) {
    if (!seam[g - split]) continue;
    const size_t first = (size_t)g * block * nvc;
    const size_t last = g == ngroups - 1 ? nentries : first + (size_t)block * nvc;
    const uint64_t own = (uint64_t)1 << group_color[g];
    uint64_t forbidden = 0;
    for (size_t k = first; k < last; k++)
      forbidden |= used[0][cells[k]] | (used[1][cells[k]] & ~own);
    if (!(forbidden & own)) continue;
    if (forbidden == UINT64_MAX) {
      bad = g;
      break;
    }
    const uint64_t bit = (uint64_t)1 << __builtin_ctzll(~forbidden);
    for (size_t k = first; k < last; k++) used[1][cells[k]] = (used[1][cells[k]] & ~own) | bit;
    group_color[g] = __builtin_ctzll(bit);
  }
  free(seam);
  free(used[0]), free(used[1]);
  if (bad >= 0) {
    free(group_color);
    const size_t first_cell = (size_t)bad * block;
    const size_t end_cell = bad == ngroups - 1 ? (size_t)m->ncells : first_cell + block;
    FE_ERROR(FE_ERR_MESH,
             "mesh coloring: group %d (cells %zu..%zu) needs more than 64 colors; use a "
             "smaller block or atomics",
             bad, first_cell, end_cell - 1);
  }
  int maxcolor = -1;
  for (int g = 0; g < ngroups; g++)
    maxcolor = group_color[g] > maxcolor ? group_color[g] : maxcolor;
  *color = group_color;
  *ncolors = maxcolor + 1;
  return 0;
}
