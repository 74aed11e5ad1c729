/* Benchmark model (not a test): the shared-memory wavefronts of the patch kernel's
 * one-item-per-cell form (engine/codegen/kernels/patch.knl), counted on the host from the real
 * patches (fe_patches_build) of a P1 tet box in Morton order, for a GPU whose shared memory
 * serves 32 banks of 4 bytes per wavefront (NVIDIA since Volta). A warp's access takes as
 * many wavefronts as the most distinct words any one bank must serve; threads reading one
 * word share it. Counted per tet: the node loads of the integration (coordinates and
 * direction of 4 nodes), the stores of its 4 contributions, and the run sums' loads.
 * A warp holds 32 consecutive cells of a patch, as the kernel's items take them. The "least"
 * figures are the bytes over 128 per wavefront when no two threads share a real.
 *   make bank-model; build/bank-model [cells per side] [block] [lanes] [bytes per real] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/operator/patch.h"
#include "engine/fem/space.h"

/* Wavefronts of one warp access to the reals at idx[t] (-1: inactive) of size rs bytes. */
static int wavefronts(const int *idx, int rs)
{
  int seen[32], ns = 0, per_bank[32] = {0}, most = 0;
  for (int t = 0; t < 32; t++) {
    int dup = idx[t] < 0;
    for (int s = 0; s < ns && !dup; s++) dup = seen[s] == idx[t];
    if (dup) continue;
    seen[ns++] = idx[t];
    for (int w = 0; w < rs / 4; w++) { /* the 4-byte words this real spans */
      int bank = (idx[t] * (rs / 4) + w) % 32;
      if (++per_bank[bank] > most) most = per_bank[bank];
    }
  }
  return most;
}

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 48, block = argc > 2 ? atoi(argv[2]) : 512;
  int lanes = argc > 3 ? atoi(argv[3]) : 16, rs = argc > 4 ? atoi(argv[4]) : 8;
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.cells[0] = o.cells[1] = o.cells[2] = n;
  o.type = FE_CELL_TET;
  fe_mesh *m;
  fe_space *V;
  int *order;
  if (n < 1 || block < 1 || (rs != 4 && rs != 8) || fe_mesh_box(&o, &m) ||
      fe_space_create(m, "P1", &V) || fe_mesh_morton_order(m, &order)) {
    fprintf(stderr, "bank-model: %s\n", n < 1 || block < 1 || (rs != 4 && rs != 8)
                                            ? "usage: bank-model [n] [block] [lanes] [4|8]"
                                            : fe_error_message());
    return 1;
  }
  int nc = m->ncells, nb = 4;
  size_t npad = (size_t)(nc + block - 1) / block * block;
  int *perm = malloc(sizeof(int) * npad);
  for (size_t i = 0; i < npad; i++)
    perm[i] = i < (size_t)nc ? order[i] : -order[i / block * block] - 1;
  fe_patches P;
  if (fe_patches_build(V, NULL, perm, npad, block, 0, 0, lanes, &P)) {
    fprintf(stderr, "bank-model: %s\n", fe_error_message());
    return 1;
  }
  double loads = 0, stores = 0, sums = 0;
  int idx[32];
  for (int g = 0; g < P.npatch; g++) {
    int n0 = P.start[g], nl = P.start[g + 1] - n0, cells = 0;
    while (cells < block && perm[(size_t)g * block + cells] >= 0) cells++;
    const unsigned *lc = P.lcells + (size_t)g * block * nb;
    for (int w0 = 0; w0 < cells; w0 += 32)
      for (int b = 0; b < nb; b++) {
        for (int d = 0; d < 4; d++) { /* xs[l*3 + d] for d < 3, then ws[l] */
          for (int t = 0; t < 32; t++) {
            int e = w0 + t, l = e < cells ? (int)(lc[b * block + e] & 0xffffu) : -1;
            idx[t] = l < 0 ? -1 : d < 3 ? l * 3 + d : l;
          }
          loads += wavefronts(idx, rs);
        }
        for (int t = 0; t < 32; t++)
          idx[t] = w0 + t < cells ? (int)(lc[b * block + w0 + t] >> 16) : -1;
        stores += wavefronts(idx, rs);
      }
    for (int i0 = 0; i0 < nl; i0 += 32) { /* one item per node sums its run */
      int longest = 0;
      for (int i = i0; i < i0 + 32 && i < nl; i++)
        if (P.runs[n0 + i] >> 16 > longest) longest = P.runs[n0 + i] >> 16;
      for (int k = 0; k < longest; k++) {
        for (int t = 0; t < 32; t++) {
          int i = i0 + t;
          idx[t] = i < nl && k < P.runs[n0 + i] >> 16
                       ? fe_patch_place((unsigned)P.runs[n0 + i], k, lanes) : -1;
        }
        sums += wavefronts(idx, rs);
      }
    }
  }
  printf("P1 tets %d^3 (%d cells), patches of %d, lanes %d, %d-byte reals: %d places in the "
         "largest patch (%d contributions)\n", n, nc, block, lanes, rs, P.maxc, block * nb);
  printf("wavefronts per tet: node loads %.2f (least %.2f)  stores %.2f (least %.2f)  run "
         "sums %.2f (least %.2f)  all %.2f\n", loads / nc, 16.0 * rs / 128, stores / nc,
         4.0 * rs / 128, sums / nc, 4.0 * rs / 128, (loads + stores + sums) / nc);
  fe_patches_free(&P);
  free(perm), free(order);
  fe_space_free(V);
  fe_mesh_free(m);
  return 0;
}
