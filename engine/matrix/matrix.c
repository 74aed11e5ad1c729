/* felab matrices: element matrices of the Jacobian (this file: the variants of strategy
 * "quadrature", their kernels' shapes and counts, fe_element_matrices and the batches'
 * access), their assembly into CSR on the device (assemble.c; the pattern and the cpu's fill:
 * pattern.c, pattern-fill.c, host-fill.c), and the CSR and SELL products (sparse.c). Kernels:
 * engine/codegen/kernels/elemat.knl.
 *
 * Element matrices read the geometry of a realization that gives it (its stored cell order,
 * geometric factors per point, per-cell constants, fields: fe_operator_realize_geometry; today
 * strategy "transpose"'s) and compile one more template against the same physics: the
 * linearization fe_df applied to each trial basis function in turn, a kernel kept with the
 * operator (elemat-cache.c). The
 * assembled matrix has its pattern from the dof map, built on the host, and its values from
 * the element matrices: on a GPU added by the device with atomics (or color by color) at
 * positions found by binary search in the sorted rows; on the cpu summed row by row as the
 * pattern is written, the matrices made as the rows need them (see pattern-fill.c). */
#include "engine/matrix/matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/matrix/matrix-private.h"
#include "engine/operator/strategy.h"

/* The variants of strategy "quadrature" (Banas et al.; elemat.knl): where the sums of the
 * matrices under construction live (registers, or shared memory with each point's data) and
 * whether the Jacobian's factors are read (stored per point) or computed in the kernel from
 * the node coordinates; gemm: K = B^T D B, the pointwise coefficient matrices D probed at
 * each point, then a register-tiled GEMM against the reference tables (fe_elemat_gemm);
 * gemm_mma: the same kernel with that GEMM in warp mma tiles on fp64 tensor cores (cuda). */
const elemat_variant elemat_variants[FE_ELEMAT_VARIANTS] = {
    {"reg_nojac", 0, 1, "a column per item in registers, Jacobian factors stored per point", 0, 0},
    {"reg_jac", 0, 0, "a column per item in registers, Jacobian factors computed per point "
                        "from the node coordinates", 0, 0},
    {"shm_nojac", 1, 1, "in shared memory, factors stored", 0, 0},
    {"shm_jac", 1, 0, "in shared memory, factors computed from the nodes", 0, 0},
    {"gemm", 0, 1, "K = sum_q T_q^T D_q T_q, D_q probed per point, factors stored", 1, 0},
    {"gemm_mma", 0, 1, "gemm, its T^T E in 8x8x4 fp64 tensor-core steps", 1, 1},
};

/* The elemat module's source; sh: the element matrices' variant and shape, or NULL (the
 * other kernels' callers: fe_ebe, the assembly's adds; no element-matrix body). */
static int elemat_source(const fe_realization *r, const elemat_shape *sh, char **src)
{
  fe_kernel_spec s;
  char defines[1536];
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.template_name = "elemat";
  int len = snprintf(defines, sizeof defines,
                     "#define EM_ELEMAT %d /* the element matrices' kernel compiled */\n",
                     sh != NULL);
  if (sh) {
    s.block = sh->block;
    snprintf(defines + len, sizeof defines - len,
             "#define EM_SHM %d /* the matrices under construction in shared memory */\n"
             "#define EM_NOJAC %d /* the Jacobian's factors read (1) or computed (0) */\n"
             "#define EM_PC %d /* columns per part (shm) */\n"
             "#define EM_DYNAMIC %d /* dynamic shared memory (cuda) */\n",
             elemat_variants[sh->v].shm, elemat_variants[sh->v].nojac, sh->pc, sh->dynamic > 0);
    if (elemat_variants[sh->v].gemm) {
      len = (int)strlen(defines);
      snprintf(defines + len, sizeof defines - len,
               "#define EM_GEMM 1 /* variant gemm: fe_elemat_gemm */\n"
               "#define GM_V %d /* the value slot kept */\n"
               "#define GM_G %d /* the reference-derivative slots kept */\n"
               "#define GM_QC %d /* points per chunk */\n"
               "#define GM_TI %d /* rows of K per item */\n"
               "#define GM_TJ %d /* columns of K per item */\n"
               "#define GM_REG %d /* an item per tile, its sums in registers over the chunks */\n"
               "#define GM_ITEMS %zu /* items per group, all of them launched */\n",
               sh->gv, sh->gg, sh->qc, sh->ti, sh->tj, sh->reg, sh->items);
    }
    if (elemat_variants[sh->v].mma) {
      len = (int)strlen(defines);
      snprintf(defines + len, sizeof defines - len,
               "#define GM_MMA 1 /* variant gemm_mma: phase 3 on fp64 tensor cores */\n"
               "#define MM_WARPS %d /* warps per group (the group's items / 32) */\n",
               sh->warps);
    }
  }
  s.defines = defines;
  return fe_codegen_action(&s, r->be->name, r->be->ops->preamble(r->be->impl, r->prec), src);
}

int fe_elemat_source(const fe_realization *r, char **src)
{
  return elemat_source(r, NULL, src);
}

/* Words of shared memory per cell of the shm kernel with pc columns per part: the state
 * and coordinates, the data at a point, the part's fluxes and its entries (elemat.knl). */
static size_t shm_words_per_cell(const fe_realization *r, int nojac, int pc)
{
  const fe_space *V = r->A->V;
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  fe_action_needs need = fe_codegen_needs(&s);
  size_t nb = V->elem.nbasis, nc = V->ncomp, dim = V->elem.dim, n = nb * nc;
  size_t qw = (nojac ? (size_t)fe_geo_stride((int)dim) : dim * dim) + (need.need_x ? 3 : 0) +
              (need.need_u ? nc * (1 + dim) : 0);
  return nb * (nc + 3) + qw + (size_t)pc * (nc * (1 + dim) + n);
}

/* The most columns per part that fit `bytes` with `block` cells (0: not one). */
static int shm_columns(const fe_realization *r, int nojac, int block, size_t bytes)
{
  const fe_space *V = r->A->V;
  size_t w = fe_precision_size(r->prec), n = (size_t)V->elem.nbasis * V->ncomp;
  size_t base = shm_words_per_cell(r, nojac, 0), col = shm_words_per_cell(r, nojac, 1) - base;
  size_t words = bytes / w / (size_t)block;
  if (words < base + col) return 0;
  size_t pc = (words - base) / col;
  return (int)(pc < n ? pc : n);
}

/* gemm's bytes of shared memory per group of `block` cells with qc points per chunk
 * (elemat.knl's fe_elemat_gemm): the state and coordinates, D and E of the chunk, the ids. */
static size_t gemm_shared(const fe_realization *r, const elemat_shape *sh, int block, int qc)
{
  const fe_space *V = r->A->V;
  size_t nb = V->elem.nbasis, nc = V->ncomp, n = nb * nc;
  size_t f = nc * (size_t)(sh->gv + V->elem.dim * sh->gg);
  size_t words = nb * (nc + 3) + (size_t)qc * f * (f + n);
  return (size_t)block * (words * fe_precision_size(r->prec) + sizeof(int));
}

/* gemm_mma's warps for sh->block cells: 4 to 8, the one that leaves the fewest of its strips
 * (rows of 8x8 tiles of K per cell and component) idle, the most on a tie; fewer when the
 * group has fewer than 4 strips. Each lane keeps 2 sums per tile of its warp's strips. */
static int mma_warps(const fe_realization *r, elemat_shape *sh, int asked)
{
  const fe_space *V = r->A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, nt = (nb * nc + 7) / 8;
  int strips = sh->block * nc * ((nb + 7) / 8), best = strips < 4 ? strips : 8;
  for (int w = best; w >= 4; w--)
    if ((strips + w - 1) / w * w - strips < (strips + best - 1) / best * best - strips) best = w;
  int spw = (strips + best - 1) / best;
  FE_ASSERT(spw * nt <= 64, FE_ERR_ARG, "variant gemm_mma: %s%d cell%s of %s give each of %d "
            "warps %d tiles of 8x8 (%d sums per lane in registers, at most 128)%s",
            asked ? "block = " : "", sh->block, sh->block > 1 ? "s" : "", V->name, best,
            spw * nt, 2 * spw * nt, asked ? "; use a smaller block" : "; use gemm");
  sh->warps = best;
  sh->reg = 1;
  sh->items = (size_t)best * 32;
  return 0;
}

/* gemm's shape: the slots the physics needs (its Jacobian blocks g0..g3 when it has them:
 * the value slot for g0, g1 or g2, the derivatives for g1, g2 or g3; all without them), a
 * tile of up to 4 x 4 entries, the asked block or the cells (up to 32) that give a group 128
 * tiles while all the points fit (on a device: chunks of 8 points, since its sums stay in
 * registers over the chunks), then as many points per chunk as shared memory holds, in
 * chunks of equal size. On a device each item holds at most one tile (its sums stay in
 * registers) when the tiles fit one group; the cpu's items run in turn and add into K. */
static int gemm_shape(const fe_realization *r, int asked, elemat_shape *sh)
{
  const fe_space *V = r->A->V;
  const fe_physics *p = r->A->pde;
  int nb = V->elem.nbasis, nc = V->ncomp, n = nb * nc, nq = r->A->quad[FE_ACTION_APPLY].npoints;
  if (p->g[0] || p->g[1] || p->g[2] || p->g[3]) {
    sh->gv = p->g[0] || p->g[1] || p->g[2];
    sh->gg = p->g[1] || p->g[2] || p->g[3];
  } else {
    sh->gv = sh->gg = 1;
  }
  if (!sh->gv && !sh->gg) sh->gv = 1; /* a zero Jacobian: one slot of zeros */
  sh->ti = nb >= 16 ? 4 : nb >= 6 ? 2 : 1;
  sh->tj = n >= 16 ? 4 : n >= 6 ? 2 : 1;
  size_t limit = fe_shared_limit(r->be);
  size_t tiles = (size_t)nc * ((nb + sh->ti - 1) / sh->ti) * ((n + sh->tj - 1) / sh->tj);
  if (elemat_variants[sh->v].mma) { /* a strip (a row of 8x8 tiles) counts 8: 16 strips */
    sh->ti = sh->tj = 8;
    tiles = (size_t)nc * ((nb + 7) / 8) * 8;
  }
  int block = asked;
  int in_order = r->be->info.items_in_order; /* a group's items in turn, adding into K */
  int fit = in_order || nq < 8 ? nq : 8; /* the points a chunk must hold while the block grows */
  FE_ASSERT(block <= 4096, FE_ERR_ARG, "block = %d cells per work group is too large", block);
  if (!block)
    for (block = 1; block < 32 && block * tiles < 128;) {
      if (gemm_shared(r, sh, 2 * block, fit) > limit) break;
      block *= 2;
    }
  int qc = nq;
  while (qc > 0 && gemm_shared(r, sh, block, qc) > limit) qc--;
  FE_ASSERT(qc > 0, FE_ERR_ARG, "variant gemm: %s%d cell%s of %s need%s %zu bytes of shared "
            "memory per work group for one point at a time; %s allows %zu (use %s)",
            asked ? "block = " : "", block, block > 1 ? "s" : "", V->name, block > 1 ? "" : "s",
            gemm_shared(r, sh, block, 1), r->be->name, limit,
            asked ? "a smaller block" : "reg_nojac");
  int chunks = (nq + qc - 1) / qc;
  sh->block = block;
  sh->qc = (nq + chunks - 1) / chunks;
  sh->shared = gemm_shared(r, sh, block, sh->qc);
  if (elemat_variants[sh->v].mma) return mma_warps(r, sh, asked);
  tiles *= (size_t)block;
  sh->reg = !in_order && tiles <= r->be->info.max_group;
  sh->items = ((tiles > 128 ? tiles : 128) + 31) / 32 * 32;
  if (sh->items > r->be->info.max_group) sh->items = r->be->info.max_group;
  return 0;
}

/* The register variants' shared bytes for `block` cells: the cells' state and coordinates,
 * each cell's map factors (affine cells; counted always). */
/* The register variants' shared bytes of a group of `block` cells (elemat_shape_of's count,
 * reg_jac's: its geometric factors as well). */
static size_t reg_shared(const fe_operator *A, const fe_backend *be, int block, size_t w)
{
  const fe_space *V = A->V;
  size_t stride = (size_t)fe_geo_stride(V->elem.dim), gs = 0;
  if (A->geo_affine) gs = stride * block;
  else if (be->info.items_in_order) gs = stride * A->quad[FE_ACTION_APPLY].npoints;
  return ((size_t)block * V->elem.nbasis * (V->ncomp + 3) + gs) * w;
}

int fe_elemat_reg_block(const fe_operator *A, const fe_backend *be, fe_precision prec)
{
  int block = 32;
  while (block > 1 && reg_shared(A, be, block, fe_precision_size(prec)) > fe_shared_limit(be))
    block /= 2;
  return block;
}

/* The shape of variant v on r: reg takes r's block and a column per item; shm takes the
 * asked block or the smallest that gives a group 256 entries (up to 32 cells),
 * then as many columns per part as fit the backend's shared memory, in parts of equal size
 * (above the static limit: dynamic shared memory where the backend offers more: cuda). The
 * group has an item per entry of a part, up to the device's largest group. */
int elemat_shape_of(const fe_realization *r, int asked, int v, elemat_shape *sh)
{
  const fe_space *V = r->A->V;
  const fe_device_info *info = &r->be->info;
  int n = V->elem.nbasis * V->ncomp, nojac = elemat_variants[v].nojac;
  size_t w = fe_precision_size(r->prec), limit = fe_shared_limit(r->be), most = limit;
  *sh = (elemat_shape){.v = v, .block = r->block, .pc = n};
  if (elemat_variants[v].gemm) return gemm_shape(r, asked, sh);
  if (!elemat_variants[v].shm) {
    /* the gathered cells; reg_jac: each cell's factors on affine cells, else on the cpu one
     * cell's at every point (elemat.knl) */
    size_t stride = (size_t)fe_geo_stride(V->elem.dim), gs = 0;
    if (!nojac && r->A->geo_affine) gs = stride * r->block;
    else if (!nojac && r->be->info.items_in_order) gs = stride * r->A->quad[FE_ACTION_APPLY].npoints;
    sh->shared = ((size_t)r->block * V->elem.nbasis * (V->ncomp + 3) + gs) * w;
    sh->items = ((size_t)r->block * n + 31) / 32 * 32;
    FE_ASSERT(sh->shared <= limit, FE_ERR_ARG, "variant %s: block = %d cells of %s need %zu "
              "bytes of shared memory per work group; %s allows %zu (use block = %d or less)",
              elemat_variants[v].name, r->block, V->name, sh->shared, r->be->name, limit,
              fe_elemat_reg_block(r->A, r->be, r->prec));
  } else {
    if (r->be->ops->kernel_shared && info->local_mem_optin > limit) most = info->local_mem_optin;
    int block = asked;
    FE_ASSERT(block <= 4096, FE_ERR_ARG, "block = %d cells per work group is too large", block);
    if (!block) {
      for (block = 1; block < 32 && (size_t)block * n * n < 256;) block *= 2;
      while (block > 1 && shm_columns(r, nojac, block, limit) < n) block /= 2;
    }
    int pc = shm_columns(r, nojac, block, limit);
    if (!pc) pc = shm_columns(r, nojac, block, most);
    size_t one = shm_words_per_cell(r, nojac, 1) * w * block;
    if (!pc && asked)
      FE_ERROR(FE_ERR_ARG, "variant %s: block = %d cells of %s need %zu bytes of shared memory "
               "per work group for one column at a time; %s allows %zu (use a smaller block)",
               elemat_variants[v].name, block, V->name, one, r->be->name, most);
    FE_ASSERT(pc > 0, FE_ERR_ARG, "variant %s: one cell of %s needs %zu bytes of shared memory "
              "for one column at a time; %s allows %zu (use reg_nojac or reg_jac)",
              elemat_variants[v].name, V->name, one, r->be->name, most);
    int parts = (n + pc - 1) / pc;
    sh->block = block;
    sh->pc = (n + parts - 1) / parts;
    sh->shared = shm_words_per_cell(r, nojac, sh->pc) * w * block;
    sh->dynamic = sh->shared > limit ? sh->shared : 0;
    sh->items = ((size_t)block * n * sh->pc + 31) / 32 * 32;
  }
  if (sh->items > info->max_group) sh->items = info->max_group;
  return 0;
}

/* What elemat_kernel_for compiles: the source of variant sh->v on r. */
typedef struct elemat_job {
  const fe_realization *r;
  const elemat_shape *sh;
} elemat_job;

static int elemat_write(const void *ctx, char **src)
{
  const elemat_job *j = ctx;
  return elemat_source(j->r, j->sh, src);
}

int elemat_source_for(const fe_realization *r, const elemat_shape *sh, char **src)
{
  return elemat_source(r, sh, src);
}

int elemat_kernel_for(const fe_realization *r, const elemat_shape *sh, fe_kernel **k,
                      double *seconds)
{
  /* the source is a function of the variant and its block on r: the rest of the shape
   * (columns per part, gemm's tiles, dynamic memory) follows from them */
  elemat_key key = elemat_key_of(r, &fe_elemat_quadrature, sh->v, sh->block, 0);
  elemat_job job = {r, sh};
  return elemat_kernel(r->A, &key, elemat_write, &job,
                       elemat_variants[sh->v].gemm ? "fe_elemat_gemm" : "fe_elemat", k, seconds);
}

/* Counted flops of the element matrix of one cell, from the loops of elemat.knl. reg: per
 * (column, point) the state's value and gradient, x, the fields, the trial gradient, the
 * physics, the pull-back and the column's test; jac adds the map's factors per (column,
 * point), on affine cells once per cell, on the cpu once per (cell, point). shm: per part
 * and point the cell's data once (x, the state's sums, with jac the Jacobian's sums), per
 * (column, point) the state's gradient, with jac the factors' inverse, the fields, trial,
 * physics and pull-back, per (entry, point) the test. */
double elemat_flops_per_cell(const fe_realization *r, const fe_kernel_spec *s,
                             const elemat_shape *sh)
{
  const fe_space *V = r->A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, dim = V->elem.dim, n = nb * nc;
  double nq = s->quad->npoints, maps = s->geo_affine ? 1 : nq; /* points where jac maps */
  double reg_maps = s->geo_affine ? 1 : r->be->info.items_in_order ? nq : n * nq; /* reg_jac */
  int nojac = elemat_variants[sh->v].nojac;
  fe_action_needs need = fe_codegen_needs(s);
  double ff, fb;
  fe_codegen_field_counts(s, &ff, &fb);
  double x = need.need_x ? 2.0 * nb * 3 : 0;
  double col = ff + 2.0 * dim * dim + need.phys_flops + 1 + nc * (dim * (2.0 * dim + 1) + 1);
  double test = (need.has_f0 ? 2.0 : 0) + 2.0 * dim; /* per entry and point */
  if (elemat_variants[sh->v].gemm) { /* the probes per (point, kj), D_q T_q, the GEMM */
    double slots = sh->gv + dim * sh->gg, f = nc * slots;
    double probe = need.phys_flops + nc * (sh->gv + sh->gg * dim * (2.0 * dim + 1));
    double item = x + ff + fe_codegen_eval_flops(nb, dim, nc, need.need_u) + 1 + slots * probe;
    return nq * (nc * item + 2.0 * slots * f * n + 2.0 * n * n * slots);
  }
  if (!elemat_variants[sh->v].shm)
    return n * nq * (x + fe_codegen_eval_flops(nb, dim, nc, need.need_u) + col + n * test) +
           (nojac ? 0 : reg_maps * fe_codegen_map_flops(nb, dim));
  double parts = (n + sh->pc - 1) / sh->pc;
  double sums = need.need_u ? nc * nb * (2.0 + 2.0 * dim) : 0; /* fe_eval less the pull */
  double pull = fe_codegen_eval_flops(nb, dim, nc, need.need_u) - sums;
  double point = nq * (x + sums) + (nojac ? 0 : maps * 2.0 * nb * dim * dim);
  double per_col = col + pull + (nojac ? 0 : fe_codegen_map_flops(0, dim)); /* the inverse */
  return parts * point + nq * n * (per_col + n * test);
}

/* The variant asked (NULL: reg_nojac) into *vout, checked against A's space and the state. */
static int elemat_variant_of(const fe_operator *A, const fe_vector *at, const char *variant,
                             int *vout)
{
  int v = 0; /* reg_nojac unless asked */
  while (variant && v < FE_ELEMAT_VARIANTS && strcmp(variant, elemat_variants[v].name)) v++;
  FE_ASSERT(v < FE_ELEMAT_VARIANTS, FE_ERR_ARG, "element matrices: unknown variant '%s' (reg_nojac, "
            "reg_jac, shm_nojac, shm_jac, gemm, gemm_mma)", variant);
  const fe_space *V = A->V;
  /* jac maps with the space's own basis through its nodes: exact when that basis holds the
   * geometry's map (straight cells: order 1 and up; curved, second-order cells: 2 and up) */
  FE_ASSERT(elemat_variants[v].nojac || !V->curved || V->elem.order >= 2, FE_ERR_ARG,
            "element matrices: variant %s computes the Jacobian from the nodes of %s, which "
            "cannot carry this curved mesh's second-order map; use %s (stored factors) or a "
            "space of order 2 or more", elemat_variants[v].name, V->name,
            elemat_variants[v].shm ? "shm_nojac" : "reg_nojac");
  FE_ASSERT(!at || at->n == V->ndofs, FE_ERR_ARG, "the state has %d entries but the "
            "operator's space has %d", at ? at->n : 0, V->ndofs);
  *vout = v;
  return 0;
}

int elemat_geometry(fe_operator *A, const fe_action_opts *o, const fe_matrix_opts *mo, int v,
                    fe_realization **r)
{
  /* an asked block is the shm or gemm kernel's own; the register variants' groups are the
   * realization's */
  int block = mo && !elemat_variants[v].shm && !elemat_variants[v].gemm ? mo->block : 0;
  return fe_operator_realize_geometry(A, o, block, mo ? mo->geometry : FE_GEOMETRY_AUTO, r);
}

/* The realization whose geometry the element matrices read, the variant when none was asked
 * (*v), its shape and its kernel (*compile_s: the compile time). */
static int elemat_realize(fe_operator *A, const fe_action_opts *o, const fe_matrix_opts *mo,
                          const char *variant, int *v, fe_realization **rout, elemat_shape *sh,
                          fe_kernel **k, double *compile_s)
{
  const fe_space *V = A->V;
  fe_realization *r;
  FE_CHECK(elemat_geometry(A, o, mo, *v, &r));
  /* gemm_mma's phase 3 is inline PTX (mma.m8n8k4.f64): NVRTC and a double real only */
  FE_ASSERT(!elemat_variants[*v].mma || (r->be->info.fp64_mma && r->prec == FE_DOUBLE),
            FE_ERR_ARG, "element matrices: variant gemm_mma runs on fp64 tensor cores, on "
            "cuda (sm_80 and later) in double only (got %s, %s); use gemm", r->be->name,
            r->prec == FE_DOUBLE ? "double" : "single");
  /* No variant asked: gemm on a GPU from N = 20 (measured fastest there; below, reg_* leads),
   * reg_nojac on a CPU (measured ahead of gemm at P2..P4, Q2..Q4): docs/benchmarks.md */
  if (!variant && r->be->info.is_gpu && V->elem.nbasis * V->ncomp >= 20)
    while (!elemat_variants[*v].gemm) (*v)++;
  FE_CHECK(elemat_shape_of(r, mo && mo->block > 0 ? mo->block : 0, *v, sh));
  FE_CHECK(elemat_kernel_for(r, sh, k, compile_s));
  *rout = r;
  return 0;
}

/* The matrices to write: reuse (checked against r), or made here (its buffer is allocated
 * with the kernel's data, elemat_launch). */
static int elemat_target(const fe_operator *A, const fe_realization *r, fe_elemats *reuse,
                         fe_elemats **kout)
{
  const fe_space *V = A->V;
  int n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  if (!reuse) /* host memory where the backend's buffers are (the cpu), else the device's */
    FE_CHECK(fe_memory_check_on(r->be, (size_t)nc * n * n * fe_precision_size(r->prec),
                                "element matrices: %d cells' %d x %d matrices", nc, n, n));
  fe_elemats *k = reuse;
  if (k) FE_ASSERT(k->V == V && k->be == r->be && k->prec == r->prec, FE_ERR_ARG, "element "
                   "matrices to overwrite must be of this operator's space, backend and precision");
  else FE_CALLOC(k, 1, "element matrices");
  *kout = k;
  return 0;
}

/* Variant v's kernel into k at the state at (NULL: zero): the stored cell map and ids, k's
 * buffer (when it is not reused), the state on r's backend and precision, the named constants
 * and fields bound, then one launch. *transfer, *setup (since t0, less compile_s and the
 * transfers) and *seconds: the stage times. Returns the first failure's code. */
static int elemat_launch(const fe_operator *A, const fe_vector *at, fe_realization *r,
                         const elemat_shape *sh, fe_kernel *kern, fe_elemats *k, int reuse,
                         double t0, double compile_s, double *transfer, double *setup,
                         double *seconds)
{
  const fe_space *V = A->V;
  int v = sh->v, n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  fe_vector *u = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  const fe_vector *uu = at;
  int rc = fe_realization_stored_maps(r);
  if (!rc && !reuse) {
    *k = (fe_elemats){.V = V, .be = r->be, .prec = r->prec, .ncells = nc, .n = n};
    rc = r->be->ops->alloc(r->be->impl, (size_t)nc * n * n * fe_precision_size(r->prec), &k->vals);
  }
  if (!rc) {
    double t1 = fe_clock();
    if (!at) rc = fe_vector_create(r->be, r->prec, V->ndofs, &u); /* zeroed */
    else if (at->be != r->be || at->prec != r->prec) rc = fe_vector_convert(at, r->be, r->prec, &u);
    if (u) uu = u;
    *transfer += fe_clock() - t1;
  }
  if (!rc) rc = fe_realization_bind(r, tf, transfer);
  *setup = fe_clock() - t0 - compile_s - *transfer;
  if (!rc && sh->dynamic) rc = r->be->ops->kernel_shared(r->be->impl, kern, sh->dynamic);
  if (!rc) {
    long long geo_n =
        (long long)fe_geometry_plane(A, &A->quad[FE_ACTION_APPLY], r->npad, r->geo_shared);
    long long ngroups = ((long long)r->npad + sh->block - 1) / sh->block;
    /* jac is given the coordinates where nojac reads the stored factors: it never needs them */
    const fe_buffer *geo = elemat_variants[v].nojac ? &r->geo[FE_ACTION_APPLY] : &r->coords;
    fe_arg args[15] = {
        {.kind = FE_ARG_INT, .i = ngroups},
        {.kind = FE_ARG_INT, .i = (long long)r->npad},
        {.kind = FE_ARG_INT, .i = geo_n},
        {.kind = FE_ARG_BUFFER, .buf = &r->stored_cells},
        {.kind = FE_ARG_BUFFER, .buf = geo},
    };
    fe_physics_args(r, uu, uu, (fe_vector *)uu, args + 5); /* coordinates .. fields, u */
    args[13] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &r->stored_ids};
    args[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &k->vals};
    rc = r->be->ops->launch(r->be->impl, kern, (size_t)ngroups, sh->items, 15, args,
                            r->prec, seconds);
  }
  fe_realization_unbind(r, tf);
  fe_vector_free(u);
  return rc;
}

/* The report's why: variant sh->v and its shape. */
static void elemat_report_line(const fe_operator *A, const elemat_shape *sh, char *line,
                               size_t size)
{
  const fe_space *V = A->V;
  int v = sh->v, n = V->elem.nbasis * V->ncomp;
  int gf = V->ncomp * (sh->gv + V->elem.dim * sh->gg); /* gemm: D's rows and columns */
  if (elemat_variants[v].gemm)
    snprintf(line, size, "variant %s: K = T^T D T, D %dx%d (%s%s); %d cell%s per group, "
             "%d of %d points per chunk, %dx%d tiles%s, %.1f KB", elemat_variants[v].name, gf, gf,
             sh->gv ? "value" : "",
             sh->gv && sh->gg ? "+grad" : sh->gg ? "grad" : "", sh->block, sh->block > 1 ? "s" : "",
             sh->qc, A->quad[FE_ACTION_APPLY].npoints, sh->ti, sh->tj,
             sh->warps ? " on tensor cores" : sh->reg ? " in registers" : "",
             sh->shared / 1024.0);
  else if (elemat_variants[v].shm)
    snprintf(line, size, "variant %s: %d cell%s x %d of %d columns %s, point data "
             "shared (%.1f KB%s)", elemat_variants[v].name, sh->block, sh->block > 1 ? "s" : "",
             sh->pc, n, elemat_variants[v].summary, sh->shared / 1024.0,
             sh->dynamic ? " dynamic" : "");
  else
    snprintf(line, size, "variant %s: %s", elemat_variants[v].name,
             elemat_variants[v].summary);
}

/* The report of one call: its line, the counted flops and bytes, the stage times, the
 * model's prediction. */
static int elemat_report(fe_operator *A, const fe_realization *r, const elemat_shape *sh,
                         double compile_s, double transfer, double setup, double seconds,
                         fe_report *rep)
{
  const fe_space *V = A->V;
  int v = sh->v, n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  char line[200]; /* the report's why */
  elemat_report_line(A, sh, line, sizeof line);
  fe_report_begin(rep, "element_matrices", r->be, r->prec, "quadrature", line);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  fe_action_needs need = fe_codegen_needs(&s);
  double w = (double)fe_precision_size(r->prec), ff, fb;
  fe_codegen_field_counts(&s, &ff, &fb);
  rep->flops = nc * elemat_flops_per_cell(r, &s, sh);
  /* the matrices written; the factors (nojac) or the coordinates (jac, or x) read; the cell
   * map and ids, the state, the per-cell constants and the fields read */
  rep->bytes = (double)nc * n * n * w +
               (elemat_variants[v].nojac ? fe_geometry_bytes(&s) * nc / V->mesh->ncells : 0) +
               (!elemat_variants[v].nojac || need.need_x ? V->nnodes * 3.0 * w : 0) +
               nc * (V->elem.nbasis + 1) * 4.0 + (need.need_u ? V->ndofs * w : 0) +
               (double)nc * A->pde->naux * w + fb;
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = setup;
  rep->launches = 1;
  FE_CHECK(fe_perf_predict(r->be, r->prec, rep));
  return 0;
}

static const fe_elemat_method *const elemat_methods[] = {&fe_elemat_quadrature, &fe_elemat_tensor};

const fe_elemat_method *fe_elemat_method_find(const char *name)
{
  for (size_t i = 0; i < sizeof elemat_methods / sizeof elemat_methods[0]; i++)
    if (!name || !strcmp(name, elemat_methods[i]->name)) return elemat_methods[i];
  return NULL;
}

int fe_element_matrices(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                        const fe_matrix_opts *mo, const char *strategy, const char *variant,
                        fe_elemats **K, fe_report *rep)
{
  const fe_elemat_method *m = fe_elemat_method_find(strategy);
  if (!m) {
    *K = NULL;
    FE_ERROR(FE_ERR_ARG, "element matrices: unknown strategy '%s' (quadrature, tensor)", strategy);
  }
  if (variant && !m->variants) {
    *K = NULL;
    FE_ERROR(FE_ERR_ARG, "element matrices: strategy \"%s\" takes no variant (got '%s'; variants "
             "are strategy \"quadrature\"'s)", m->name, variant);
  }
  return m->make(A, at, o, mo, variant, K, rep);
}

/* Method "quadrature" (Banas et al.): a kernel per variant over the cells' points. */
static int elemat_quadrature_make(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                                  const fe_matrix_opts *mo, const char *variant, fe_elemats **K,
                                  fe_report *rep)
{
  fe_elemats *reuse = *K;
  *K = NULL;
  int v = 0;
  FE_CHECK(elemat_variant_of(A, at, variant, &v));
  double t0 = fe_clock(), compile_s = 0, transfer = 0, setup = 0, seconds = 0;
  fe_realization *r = NULL;
  elemat_shape sh;
  fe_kernel *kern = NULL;
  FE_CHECK(elemat_realize(A, o, mo, variant, &v, &r, &sh, &kern, &compile_s));
  double t1 = fe_clock(); /* the realization whose geometry they read: made, or found */
  FE_CHECK(fe_realization_stored_maps(r)); /* its cell map in its order (made once) */
  double t2 = fe_clock();
  fe_elemats *k = NULL;
  FE_CHECK(elemat_target(A, r, reuse, &k));
  int rc = elemat_launch(A, at, r, &sh, kern, k, reuse != NULL, t0, compile_s, &transfer, &setup,
                         &seconds);
  if (rc) {
    if (!reuse) fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  FE_CHECK(elemat_report(A, r, &sh, compile_s, transfer, setup, seconds, rep));
  /* the parts: the geometry's realization, its cell map, the matrices (buffer, binding, the
   * kernel), compile and transfer apart */
  rep->parts = (fe_setup_parts){0};
  double g = t1 - t0 - compile_s, rest = fe_clock() - t2 - transfer;
  fe_setup_part_add(&rep->parts, "geometry", g > 0 ? g : 0, 0);
  fe_setup_part_add(&rep->parts, "cell_map", t2 - t1, 0);
  fe_setup_part_add(&rep->parts, "matrices", rest > 0 ? rest : 0, 0);
  *K = k;
  return 0;
}

const fe_elemat_method fe_elemat_quadrature = {
    "quadrature", "the element matrices by quadrature, a kernel per variant (Banas et al.)", 1,
    elemat_quadrature_make};

int fe_elemats_get(const fe_elemats *K, int cell, double *out)
{
  FE_ASSERT(cell >= 0 && cell < K->ncells, FE_ERR_ARG, "cell %d is not in 0..%d", cell,
            K->ncells - 1);
  size_t nn = (size_t)K->n * K->n, w = fe_precision_size(K->prec);
  if (K->prec == FE_DOUBLE)
    return K->be->ops->read(K->be->impl, &K->vals, (size_t)cell * nn * w, nn * w, out);
  float *f;
  FE_MALLOC(f, nn, "element matrix");
  int rc = K->be->ops->read(K->be->impl, &K->vals, (size_t)cell * nn * w, nn * w, f);
  for (size_t i = 0; !rc && i < nn; i++) out[i] = f[i];
  free(f);
  return rc;
}

int fe_elemats_convert(const fe_elemats *K, fe_backend *be, fe_precision prec, fe_elemats **out)
{
  size_t nn = (size_t)K->n * K->n, total = nn * K->ncells;
  FE_CHECK(fe_memory_check(total * (sizeof(double) + (be->ops->host ? fe_precision_size(prec) : 0)),
                           "a copy of %d element matrices of %d x %d", K->ncells, K->n, K->n));
  if (!be->ops->host)
    FE_CHECK(fe_memory_check_on(be, total * fe_precision_size(prec), "a copy of %d element "
                                "matrices of %d x %d", K->ncells, K->n, K->n));
  double *v;
  FE_MALLOC(v, total + 1, "element matrices");
  int rc = 0;
  for (int c = 0; !rc && c < K->ncells; c++) rc = fe_elemats_get(K, c, v + (size_t)c * nn);
  fe_elemats *k = NULL;
  if (!rc && !(k = calloc(1, sizeof *k)))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    *k = *K;
    k->be = be;
    k->prec = prec;
    k->vals = (fe_buffer){0};
    rc = fe_upload_reals(be, prec, v, total, &k->vals);
  }
  free(v);
  if (rc) {
    fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = k;
  return 0;
}

void fe_elemats_free(fe_elemats *K)
{
  if (!K) return;
  if (K->vals.ptr) K->be->ops->release(K->be->impl, &K->vals);
  free(K);
}
