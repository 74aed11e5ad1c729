/* felab matrices: element matrices of the Jacobian, their assembly into CSR on the device,
 * and the CSR product (kernels: engine/codegen/kernels/elemat.knl).
 *
 * Element matrices reuse the data of strategy "transpose" (its stored cell order, geometric
 * factors per point, per-cell constants, fields) and compile one more template against the
 * same physics: the linearization fe_df applied to each trial basis function in turn. The
 * assembled matrix has its pattern from the dof map, built on the host, and its values from
 * the element matrices: on a GPU added by the device with atomics (or color by color) at
 * positions found by binary search in the sorted rows; on the cpu summed row by row as the
 * pattern is written, the matrices made as the rows need them (see "assembly" below). */
#include "engine/matrix/matrix.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/sort.h"
#include "engine/operator/strategy.h"

#define EM_ITEMS 128 /* items per group of fe_assemble and fe_spmv (elemat.knl) */

/* The variants of strategy "quadrature" (Banas et al.; elemat.knl): where the sums of the
 * matrices under construction live (registers, or shared memory with each point's data) and
 * whether the Jacobian's factors are read (stored per point) or computed in the kernel from
 * the node coordinates; gemm: K = B^T D B, the pointwise coefficient matrices D probed at
 * each point, then a register-tiled GEMM against the reference tables (fe_elemat_gemm);
 * gemm_mma: the same kernel with that GEMM in warp mma tiles on fp64 tensor cores (cuda). */
static const struct {
  const char *name;
  int shm, nojac;
  const char *summary; /* the report's line (shm, gemm: its shape is added) */
  int gemm;            /* 1: kernel fe_elemat_gemm */
  int mma;             /* 1: its phase 3 on fp64 tensor cores (GM_MMA: cuda, double only) */
} elemat_variants[FE_ELEMAT_VARIANTS] = {
    {"reg_nojac", 0, 1, "a column per item in registers, Jacobian factors stored per point", 0, 0},
    {"reg_jac", 0, 0, "a column per item in registers, Jacobian factors computed per point "
                        "from the node coordinates", 0, 0},
    {"shm_nojac", 1, 1, "in shared memory, factors stored", 0, 0},
    {"shm_jac", 1, 0, "in shared memory, factors computed from the nodes", 0, 0},
    {"gemm", 0, 1, "K = sum_q T_q^T D_q T_q, D_q probed per point, factors stored", 1, 0},
    {"gemm_mma", 0, 1, "gemm, its T^T E in 8x8x4 fp64 tensor-core steps", 1, 1},
};

/* How one variant's kernel is compiled and launched. */
typedef struct elemat_shape {
  int v;          /* the variant */
  int block;      /* cells per work group (BLOCK) */
  int pc;         /* columns per part (EM_PC; reg: all of them) */
  size_t shared;  /* bytes of shared memory per work group */
  size_t dynamic; /* the same when they are dynamic (cuda, above the static limit), else 0 */
  size_t items;   /* work-group size */
  /* gemm: the slots kept per component (the value, the DIM reference derivatives), points
   * per chunk, the register tile (rows x columns of K per item), sums kept in registers
   * over the chunks (1: an item per tile) */
  int gv, gg, qc, ti, tj, reg;
  int warps; /* gemm_mma: warps per group, each owning strips of 8x8 tiles of K */
} elemat_shape;

/* The elemat module's source; sh: the element matrices' variant and shape, or NULL (the
 * other kernels' callers: fe_spmv, fe_ebe, the assembly; no element-matrix body). */
static int elemat_source(const fe_realization *r, int lanes, const elemat_shape *sh, char **src)
{
  fe_kernel_spec s;
  char defines[1536];
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.template_name = "elemat";
  int len = snprintf(defines, sizeof defines,
                     "#define EM_LANES %d /* items per row of fe_spmv */\n"
                     "#define EM_ELEMAT %d /* the element matrices' kernel compiled */\n",
                     lanes, sh != NULL);
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

int fe_elemat_source(const fe_realization *r, int lanes, char **src)
{
  return elemat_source(r, lanes, NULL, src);
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
static int gemm_shape(const fe_realization *r, const fe_action_opts *o, elemat_shape *sh)
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
  int asked = o && o->block > 0 ? o->block : 0, block = asked;
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

/* The shape of variant v on r: reg takes r's block and a column per item; shm takes the
 * asked block (o->block) or the smallest that gives a group 256 entries (up to 32 cells),
 * then as many columns per part as fit the backend's shared memory, in parts of equal size
 * (above the static limit: dynamic shared memory where the backend offers more: cuda). The
 * group has an item per entry of a part, up to the device's largest group. */
static int elemat_shape_of(const fe_realization *r, const fe_action_opts *o, int v,
                           elemat_shape *sh)
{
  const fe_space *V = r->A->V;
  const fe_device_info *info = &r->be->info;
  int n = V->elem.nbasis * V->ncomp, nojac = elemat_variants[v].nojac;
  size_t w = fe_precision_size(r->prec), limit = fe_shared_limit(r->be), most = limit;
  *sh = (elemat_shape){.v = v, .block = r->block, .pc = n};
  if (elemat_variants[v].gemm) return gemm_shape(r, o, sh);
  if (!elemat_variants[v].shm) {
    /* the gathered cells; reg_jac: each cell's factors on affine cells, else on the cpu one
     * cell's at every point (elemat.knl) */
    size_t stride = (size_t)fe_geo_stride(V->elem.dim), gs = 0;
    if (!nojac && r->A->geo_affine) gs = stride * r->block;
    else if (!nojac && r->be->info.items_in_order) gs = stride * r->A->quad[FE_ACTION_APPLY].npoints;
    sh->shared = ((size_t)r->block * V->elem.nbasis * (V->ncomp + 3) + gs) * w;
    sh->items = ((size_t)r->block * n + 31) / 32 * 32;
  } else {
    if (r->be->ops->kernel_shared && info->local_mem_optin > limit) most = info->local_mem_optin;
    int asked = o && o->block > 0 ? o->block : 0, block = asked;
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

/* Compile variant sh->v's module for its block on first use; *seconds the compile time. */
static int elemat_module(fe_realization *r, const elemat_shape *sh, double *seconds)
{
  *seconds = 0;
  int v = sh->v;
  if (r->elemat[v] && r->eblock[v] == sh->block) return 0;
  if (r->emodule[v]) r->be->ops->module_free(r->be->impl, r->emodule[v]);
  r->emodule[v] = NULL;
  r->elemat[v] = NULL;
  char *src;
  FE_CHECK(elemat_source(r, 1, sh, &src));
  int cached = 0;
  int rc = fe_compile(r->be, src, &r->emodule[v], seconds, &cached);
  free(src);
  FE_CHECK(rc);
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->emodule[v],
                              elemat_variants[v].gemm ? "fe_elemat_gemm" : "fe_elemat", &r->elemat[v]));
  r->eblock[v] = sh->block;
  return 0;
}

/* Counted flops of the element matrix of one cell, from the loops of elemat.knl. reg: per
 * (column, point) the state's value and gradient, x, the fields, the trial gradient, the
 * physics, the pull-back and the column's test; jac adds the map's factors per (column,
 * point), on affine cells once per cell, on the cpu once per (cell, point). shm: per part
 * and point the cell's data once (x, the state's sums, with jac the Jacobian's sums), per
 * (column, point) the state's gradient, with jac the factors' inverse, the fields, trial,
 * physics and pull-back, per (entry, point) the test. */
static double elemat_flops_per_cell(const fe_realization *r, const fe_kernel_spec *s,
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

/* Upload ints computed from r's stored order: the cell map (NB nodes per stored cell) and
 * ids (the mesh cell of each stored cell, -1 for padding). */
static int upload_stored(fe_realization *r, fe_buffer *cells, fe_buffer *ids)
{
  const fe_space *V = r->A->V;
  size_t nb = (size_t)V->elem.nbasis, npad = r->npad;
  FE_CHECK(fe_memory_check_on(r->be, sizeof(int) * npad * (nb + 1), "element matrices of %s on "
                              "%s: the cell map in stored order (%zu cells of %zu nodes)",
                              r->A->pde->name, V->name, npad, nb));
  FE_CHECK(fe_memory_check(sizeof(int) * npad * (nb + 1), "element matrices of %s on %s: the cell "
                           "map in stored order (%zu cells of %zu nodes), staged",
                           r->A->pde->name, V->name, npad, nb));
  int *c = malloc(sizeof(int) * (npad * nb + 1)), *id = malloc(sizeof(int) * (npad + 1));
  int rc = 0;
  if (!c || !id) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (size_t s = 0; !rc && s < npad; s++) {
    memcpy(c + s * nb, V->cell_nodes + (size_t)fe_stored_cell(r->perm, s) * nb, sizeof(int) * nb);
    id[s] = r->perm[s] >= 0 ? r->perm[s] : -1;
  }
  if (!rc) rc = fe_upload_ints(r->be, c, npad * nb, cells);
  if (!rc) rc = fe_upload_ints(r->be, id, npad, ids);
  free(c);
  free(id);
  return rc;
}

int fe_element_matrices(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                        const char *strategy, const char *variant, fe_elemats **K,
                        fe_report *rep)
{
  fe_elemats *reuse = *K;
  *K = NULL;
  if (strategy && strcmp(strategy, "quadrature")) {
    if (!strcmp(strategy, "tensor")) { /* engine/matrix/tensor.c */
      FE_ASSERT(!variant, FE_ERR_ARG, "element matrices: strategy \"tensor\" takes no variant "
                "(got '%s'; variants are strategy \"quadrature\"'s)", variant);
      *K = reuse; /* NULL, or the matrices to overwrite */
      FE_CHECK(fe_element_matrices_tensor(A, at, o, K, rep));
      return 0;
    }
    FE_ERROR(FE_ERR_ARG, "element matrices: unknown strategy '%s' (quadrature, tensor)", strategy);
  }
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
  fe_action_opts oo;
  if (o) oo = *o;
  else fe_action_opts_default(&oo);
  oo.strategy = "transpose"; /* its data: stored order, factors per point, dense tables */
  oo.given = NULL; /* the options the call gave its own strategy */
  if (elemat_variants[v].shm || elemat_variants[v].gemm)
    oo.block = 0; /* an asked block is the shm or gemm kernel's own */
  double t0 = fe_clock(), compile_s = 0, transfer = 0;
  fe_realization *r;
  char why[160];
  elemat_shape sh;
  FE_CHECK(fe_operator_realize_stored(A, &oo, &r, why, sizeof why));
  /* gemm_mma's phase 3 is inline PTX (mma.m8n8k4.f64): NVRTC and a double real only */
  FE_ASSERT(!elemat_variants[v].mma || (r->be->info.fp64_mma && r->prec == FE_DOUBLE),
            FE_ERR_ARG, "element matrices: variant gemm_mma runs on fp64 tensor cores, on "
            "cuda (sm_80 and later) in double only (got %s, %s); use gemm", r->be->name,
            r->prec == FE_DOUBLE ? "double" : "single");
  /* No variant asked: gemm on a GPU from N = 20 (H100, fp64, one call: P3 tets 0.50 against
   * reg_jac's 1.14 ms, P4 1.64 against 5.52, Q3 1.79 against 22.0; below N = 20 reg_* leads),
   * reg_nojac on a CPU (this machine, one run: 1.3-1.8x ahead of gemm at P2..P4, Q2..Q4) */
  if (!variant && r->be->info.is_gpu && V->elem.nbasis * V->ncomp >= 20)
    while (!elemat_variants[v].gemm) v++;
  FE_CHECK(elemat_shape_of(r, o, v, &sh));
  FE_CHECK(elemat_module(r, &sh, &compile_s));
  int n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
  if (!reuse) /* host memory where the backend's buffers are (the cpu), else the device's */
    FE_CHECK(fe_memory_check_on(r->be, (size_t)nc * n * n * fe_precision_size(r->prec),
                                "element matrices: %d cells' %d x %d matrices", nc, n, n));
  fe_elemats *k = reuse;
  if (k) FE_ASSERT(k->V == V && k->be == r->be && k->prec == r->prec, FE_ERR_ARG, "element "
                   "matrices to overwrite must be of this operator's space, backend and precision");
  else FE_CALLOC(k, 1, "element matrices");
  fe_vector *u = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  const fe_vector *uu = at;
  int rc = r->ecells.ptr ? 0 : upload_stored(r, &r->ecells, &r->eids);
  if (!rc && !reuse) {
    *k = (fe_elemats){.V = V, .be = r->be, .prec = r->prec, .ncells = nc, .n = n};
    rc = r->be->ops->alloc(r->be->impl, (size_t)nc * n * n * fe_precision_size(r->prec), &k->vals);
  }
  if (!rc) {
    double t1 = fe_clock();
    if (!at) rc = fe_vector_create(r->be, r->prec, V->ndofs, &u); /* zeroed */
    else if (at->be != r->be || at->prec != r->prec) rc = fe_vector_convert(at, r->be, r->prec, &u);
    if (u) uu = u;
    transfer += fe_clock() - t1;
  }
  if (!rc) rc = fe_realization_bind(r, tf, &transfer);
  double setup = fe_clock() - t0 - compile_s - transfer, seconds = 0;
  if (!rc && sh.dynamic) rc = r->be->ops->kernel_shared(r->be->impl, r->elemat[v], sh.dynamic);
  if (!rc) {
    long long geo_n =
        (long long)fe_geometry_plane(A, &A->quad[FE_ACTION_APPLY], r->npad, r->geo_shared);
    long long ngroups = ((long long)r->npad + sh.block - 1) / sh.block;
    /* jac is given the coordinates where nojac reads the stored factors: it never needs them */
    const fe_buffer *geo = elemat_variants[v].nojac ? &r->geo[FE_ACTION_APPLY] : &r->coords;
    fe_arg args[15] = {
        {.kind = FE_ARG_INT, .i = ngroups},
        {.kind = FE_ARG_INT, .i = (long long)r->npad},
        {.kind = FE_ARG_INT, .i = geo_n},
        {.kind = FE_ARG_BUFFER, .buf = &r->ecells},
        {.kind = FE_ARG_BUFFER, .buf = geo},
    };
    fe_physics_args(r, uu, uu, (fe_vector *)uu, args + 5); /* coordinates .. fields, u */
    args[13] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &r->eids};
    args[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &k->vals};
    rc = r->be->ops->launch(r->be->impl, r->elemat[v], (size_t)ngroups, sh.items, 15, args,
                            r->prec, &seconds);
  }
  fe_realization_unbind(r, tf);
  fe_vector_free(u);
  if (rc) {
    if (!reuse) fe_elemats_free(k);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char line[200]; /* the report's why */
  int gf = V->ncomp * (sh.gv + V->elem.dim * sh.gg); /* gemm: D's rows and columns */
  if (elemat_variants[v].gemm)
    snprintf(line, sizeof line, "variant %s: K = T^T D T, D %dx%d (%s%s); %d cell%s per group, "
             "%d of %d points per chunk, %dx%d tiles%s, %.1f KB", elemat_variants[v].name, gf, gf,
             sh.gv ? "value" : "",
             sh.gv && sh.gg ? "+grad" : sh.gg ? "grad" : "", sh.block, sh.block > 1 ? "s" : "",
             sh.qc, A->quad[FE_ACTION_APPLY].npoints, sh.ti, sh.tj,
             sh.warps ? " on tensor cores" : sh.reg ? " in registers" : "",
             sh.shared / 1024.0);
  else if (elemat_variants[v].shm)
    snprintf(line, sizeof line, "variant %s: %d cell%s x %d of %d columns %s, point data "
             "shared (%.1f KB%s)", elemat_variants[v].name, sh.block, sh.block > 1 ? "s" : "",
             sh.pc, n, elemat_variants[v].summary, sh.shared / 1024.0,
             sh.dynamic ? " dynamic" : "");
  else
    snprintf(line, sizeof line, "variant %s: %s", elemat_variants[v].name,
             elemat_variants[v].summary);
  fe_report_begin(rep, "element_matrices", r->be, r->prec, "quadrature", line);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  fe_action_needs need = fe_codegen_needs(&s);
  double w = (double)fe_precision_size(r->prec), ff, fb;
  fe_codegen_field_counts(&s, &ff, &fb);
  rep->flops = nc * elemat_flops_per_cell(r, &s, &sh);
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
  *K = k;
  return 0;
}

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

/* ---- assembly ----
 * The pattern: row (node a, component k) couples to every dof of the cells that hold a,
 * sorted; a constrained row holds its diagonal only and no free row holds a constrained
 * column, so the matrix acts as the matrix-free Jacobian does. It comes from the cells of
 * each node (the cell map inverted, in cell order) in two parallel passes over the nodes:
 * one counts each row's distinct neighbours, one writes them sorted, each thread a
 * contiguous range of nodes.
 * The values, where buffers are host memory (the cpu), are summed by that second pass, row
 * by row from the row's cells: no add is shared (no atomics, reproducible sums), and the
 * element matrices are never stored. Each thread computes them (variant reg_jac: no stored
 * factors) in launches of `batch` consecutive cells into its window of W matrices (cell c
 * at slot c mod W), whose front moves on as its rows need: the rows go in the order of their
 * first cells (fill_order), and on a local mesh the cells of a node lie in a band of the cell
 * order (about a layer of a box), so W is that band, not the mesh. The window outgrows the
 * caches at large sizes, so while a row is summed the next row's matrices are prefetched. A row whose cells do not fit the window (outliers, or a
 * window capped by FELAB_FILL_WINDOW) has them computed apart, gathered into one launch.
 * Elsewhere the device adds stored element matrices into the pattern (fe_assemble). */

/* What the pattern is built from: V, its constrained dofs and the cells of each node. */
typedef struct pattern {
  const fe_space *V;
  const int *fixed; /* per dof: 1 constrained */
  int *start;       /* the cells of node a: list[start[a] .. start[a + 1]), in cell order */
  int *list;
  int *nfree;       /* free components per node */
  int maxdeg;       /* the most cells of one node */
} pattern;

static void pattern_free(pattern *P)
{
  free(P->start);
  free(P->list);
  free(P->nfree);
}

/* P->start, list, nfree, maxdeg. Each thread counts the nodes of its range of cells in its
 * own array (over the nodes those cells touch: about nn / threads on a local mesh); the
 * counts give every (node, thread) its first slot, and each thread fills its cells in order,
 * so every node's list is in cell order. */
static int node_cells(pattern *P)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nb = V->elem.nbasis, nc = V->ncomp, ncell = V->mesh->ncells;
  const int *cn = V->cell_nodes, most = omp_get_max_threads();
  const size_t nent = (size_t)ncell * nb;
  FE_ASSERT(nent <= 2147483647u, FE_ERR_ARG, "the matrix pattern: %zu (cell, node) pairs pass "
            "2^31 (int indices)", nent);
  int **cnt = calloc((size_t)most, sizeof(int *)), *lo = malloc(sizeof(int) * (size_t)most);
  int *hi = malloc(sizeof(int) * (size_t)most), failed = 0;
  P->start = calloc((size_t)nn + 1, sizeof(int));
  P->list = malloc(sizeof(int) * (nent + 1));
  P->nfree = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!cnt || !lo || !hi || !P->start || !P->list || !P->nfree) failed = 1;
  if (!failed)
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int c0 = (int)((long long)ncell * t / nt), c1 = (int)((long long)ncell * (t + 1) / nt);
    int l = nn, h = -1, *my = NULL, stop;
    for (size_t i = (size_t)c0 * nb; i < (size_t)c1 * nb; i++) {
      l = cn[i] < l ? cn[i] : l;
      h = cn[i] > h ? cn[i] : h;
    }
    if (h >= l && !(my = calloc((size_t)(h - l) + 1, sizeof(int)))) {
#pragma omp atomic write
      failed = 1;
    }
    for (size_t i = (size_t)c0 * nb; my && i < (size_t)c1 * nb; i++) my[cn[i] - l]++;
    cnt[t] = my;
    lo[t] = l;
    hi[t] = h;
#pragma omp barrier
#pragma omp atomic read
    stop = failed;
    if (!stop) {
#pragma omp for schedule(static)
      for (int a = 0; a < nn; a++) { /* the node's cells */
        int s = 0, f = 0;
        for (int u = 0; u < nt; u++)
          if (a >= lo[u] && a <= hi[u]) s += cnt[u][a - lo[u]];
        for (int k = 0; k < nc; k++) f += !P->fixed[a * nc + k];
        P->start[a + 1] = s;
        P->nfree[a] = f;
      }
#pragma omp single
      for (int a = 0; a < nn; a++) P->start[a + 1] += P->start[a];
#pragma omp for schedule(static)
      for (int a = 0; a < nn; a++) { /* each thread's first slot in the node's list */
        int s = P->start[a];
        for (int u = 0; u < nt; u++)
          if (a >= lo[u] && a <= hi[u]) {
            int v = cnt[u][a - lo[u]];
            cnt[u][a - lo[u]] = s;
            s += v;
          }
      }
      for (int c = c0; my && c < c1; c++)
        for (int b = 0; b < nb; b++) P->list[my[cn[(size_t)c * nb + b] - l]++] = c;
    }
    free(my);
  }
  for (int a = 0; !failed && a < nn; a++)
    if (P->start[a + 1] - P->start[a] > P->maxdeg) P->maxdeg = P->start[a + 1] - P->start[a];
  free(cnt);
  free(lo);
  free(hi);
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern's node -> cells map");
  return 0;
}

/* The distinct nodes of node a's cells into nbr (seen: a thread's marks, seen[b] == a once b
 * is in); sorted when asked (insertion: rows are short). Returns their number. */
static int node_neighbours(const pattern *P, int a, int *seen, int *nbr, int sorted)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes;
  int m = 0;
  for (int t = P->start[a]; t < P->start[a + 1]; t++) {
    const int *nodes = cn + (size_t)P->list[t] * nb;
    for (int b = 0; b < nb; b++)
      if (seen[nodes[b]] != a) {
        seen[nodes[b]] = a;
        nbr[m++] = nodes[b];
      }
  }
  for (int i = 1; sorted && i < m; i++) {
    int v = nbr[i], j = i - 1;
    while (j >= 0 && nbr[j] > v) nbr[j + 1] = nbr[j], j--;
    nbr[j + 1] = v;
  }
  return m;
}

/* The first pass: rowptr (ndofs + 1) from each node's free neighbour dofs (a constrained
 * row: 1). */
static int count_rows(const pattern *P, int *rowptr)
{
  const fe_space *V = P->V;
  const int nn = V->nnodes, nc = V->ncomp, nd = V->ndofs, nb = V->elem.nbasis;
  long long *cnt = malloc(sizeof(long long) * ((size_t)nn + 1));
  int failed = !cnt;
  if (!failed)
#pragma omp parallel reduction(| : failed)
  {
    int *seen = malloc(sizeof(int) * ((size_t)nn + 1));
    int *nbr = malloc(sizeof(int) * ((size_t)P->maxdeg * nb + 1));
    if (!seen || !nbr) failed = 1;
    for (int a = 0; !failed && a < nn; a++) seen[a] = -1;
#pragma omp for schedule(static)
    for (int a = 0; a < nn; a++) {
      if (failed) continue;
      int m = node_neighbours(P, a, seen, nbr, 0);
      long long c = 0;
      for (int i = 0; i < m; i++) c += P->nfree[nbr[i]];
      cnt[a] = c;
    }
    free(seen);
    free(nbr);
  }
  long long nz = 0;
  for (int gi = 0; !failed && gi < nd; gi++) {
    rowptr[gi] = (int)nz;
    nz += P->fixed[gi] ? 1 : cnt[gi / nc];
    if (nz > 2147483647LL) failed = 2;
  }
  free(cnt);
  FE_ASSERT(failed != 2, FE_ERR_ARG, "the matrix has more than 2^31 nonzeros (int indices)");
  FE_ASSERT(!failed, FE_ERR_MEM, "out of host memory for the matrix pattern");
  rowptr[nd] = (int)nz;
  return 0;
}

/* The fused fill's element matrices (a backend whose buffers are host memory): variant
 * reg_jac (the Jacobian from the nodes: no stored factors) on a realization made here in the
 * mesh's cell order and not kept by A. Its coordinates and per-cell constants are the host's
 * own arrays, wrapped (converted once in single precision); its field maps are gathered per
 * cell; the named constants and the fields are bound as for any call. */
typedef struct host_fill {
  fe_realization h;
  elemat_shape sh;
  fe_kernel *k;
  int batch;            /* cells per launch of a window's front */
  int dbl;              /* the matrices in double (else float) */
  size_t kn;            /* entries of an element matrix */
  size_t window;        /* about the most matrices a thread's window holds */
  const char *aux;      /* per-cell constants, aux_bytes per cell (NULL: none) */
  size_t aux_bytes;
  const int *maps;      /* the fields' dof maps, nbf per cell (NULL: none) */
  int nbf;
  void *own[3];         /* what was allocated here: converted coordinates and constants, maps */
  fe_vector *u;         /* the state made here (zero, or converted), or NULL */
  fe_vector *tf[FE_PHYSICS_MAX_FIELDS];
  fe_arg args[15];      /* fe_elemat's; per launch: groups, cells, constants, maps, ids, K */
} host_fill;

static void host_fill_free(host_fill *F)
{
  fe_realization *h = &F->h;
  fe_realization_unbind(h, F->tf);
  fe_vector_free(F->u);
  for (int i = 0; i < 3; i++) free(F->own[i]);
  if (h->params.ptr) h->be->ops->release(h->be->impl, &h->params);
  for (int v = 0; v < FE_ELEMAT_VARIANTS; v++)
    if (h->emodule[v]) h->be->ops->module_free(h->be->impl, h->emodule[v]);
}

/* A host copy of n doubles in precision prec: src itself in double, else a float copy in
 * *own. */
static const void *host_reals(const double *src, size_t n, fe_precision prec, void **own)
{
  if (prec == FE_DOUBLE) return src;
  float *f = malloc(sizeof(float) * (n + 1));
  for (size_t i = 0; f && i < n; i++) f[i] = (float)src[i];
  *own = f;
  return f;
}

static int host_fill_make(fe_operator *A, const fe_vector *at, fe_backend *be, fe_precision prec,
                          host_fill *F, double *compile_s, double *transfer)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const int nc = V->mesh->ncells, nn = V->nnodes;
  fe_realization *h = &F->h;
  *h = (fe_realization){.A = A, .be = be, .prec = prec, .block = 32}; /* transpose's, on a cpu */
  h->params_version = p->const_version - 1; /* never current: bind uploads the constants */
  F->dbl = prec == FE_DOUBLE;
  F->kn = (size_t)(V->elem.nbasis * V->ncomp) * (V->elem.nbasis * V->ncomp);
  size_t w = fe_precision_size(prec);
  int v = 0;
  while (strcmp(elemat_variants[v].name, "reg_jac")) v++;
  FE_CHECK(elemat_shape_of(h, NULL, v, &F->sh));
  FE_CHECK(elemat_module(h, &F->sh, compile_s));
  F->k = h->elemat[v];
  const void *xyz = host_reals(V->node_coords, 3 * (size_t)nn, prec, &F->own[0]);
  if (p->naux) F->aux = host_reals(A->aux, (size_t)nc * p->naux, prec, &F->own[1]);
  F->aux_bytes = (size_t)p->naux * w;
  if (p->nfields) { /* the fields' maps side by side per cell, as fe_fields reads them */
    int *maps = malloc(sizeof(int) * ((size_t)nc * fe_codegen_field_map_width(p) + 1));
    F->nbf = fe_codegen_field_map_width(p);
    for (int c = 0; maps && c < nc; c++)
      for (int f = 0, off = 0; f < p->nfields; off += p->field_space[f]->elem.nbasis, f++)
        memcpy(maps + (size_t)c * F->nbf + off, p->field_space[f]->cell_nodes +
               (size_t)c * p->field_space[f]->elem.nbasis,
               sizeof(int) * (size_t)p->field_space[f]->elem.nbasis);
    F->maps = F->own[2] = maps;
  }
  FE_ASSERT(xyz && (!p->naux || F->aux) && (!p->nfields || F->maps), FE_ERR_MEM,
            "out of host memory for the assembly's coordinates, constants or field maps");
  FE_CHECK(be->ops->wrap(be->impl, (void *)xyz, 3 * (size_t)nn * w, &h->coords));
  FE_CHECK(fe_realization_bind(h, F->tf, transfer));
  fe_kernel_spec s;
  fe_realization_spec(h, FE_ACTION_APPLY, &s);
  const fe_vector *u = at;
  if (at && (at->be != be || at->prec != prec)) {
    double t0 = fe_clock();
    FE_CHECK(fe_vector_convert(at, be, prec, &F->u));
    *transfer += fe_clock() - t0;
    u = F->u;
  } else if (!at && fe_codegen_needs(&s).need_u) {
    FE_CHECK(fe_vector_create(be, prec, V->ndofs, &F->u)); /* zeroed */
    u = F->u;
  }
  /* a window: 512 MB over the threads, or FELAB_FILL_WINDOW matrices (less memory, more
   * rows apart: tests/scripts/test_assembly.lua); a launch: whole groups, about 256 KB of
   * matrices, at most half a window */
  const char *cap = getenv("FELAB_FILL_WINDOW");
  F->window = ((size_t)512 << 20) / (size_t)omp_get_max_threads() / (F->kn * w);
  if (cap && atol(cap) > 0) F->window = (size_t)atol(cap);
  size_t batch = (256 << 10) / (F->kn * w);
  batch = (batch < F->window / 2 ? batch : F->window / 2) / (size_t)F->sh.block * F->sh.block;
  F->batch = batch > (size_t)F->sh.block ? (int)batch : F->sh.block;
  if (F->window < (size_t)2 * F->batch) F->window = (size_t)2 * F->batch;
  fe_arg *a = F->args;
  a[2] = (fe_arg){.kind = FE_ARG_INT, .i = 0}; /* geo_n: jac reads no factors */
  a[4] = a[5] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &h->coords};
  a[7] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &h->params};
  for (int i = 0; i < 3; i++)
    a[9 + i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = h->fv[i] ? h->fv[i] : &h->params};
  a[12] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = u ? &u->buf : &h->params};
  return 0;
}

/* Element matrices of count cells into the slots ids of K: the cells' nodes, per-cell
 * constants and field maps start at cells, aux and maps (count of each). Called by threads:
 * a failure returns its code without a frame. */
static int host_fill_launch(const host_fill *F, const int *cells, const char *aux,
                            const int *maps, const int *ids, int count, void *K, size_t kslots)
{
  const fe_realization *h = &F->h;
  const fe_backend *be = h->be;
  const int nb = h->A->V->elem.nbasis;
  fe_buffer bc, ba, bm, bi, bk;
  fe_arg a[15];
  memcpy(a, F->args, sizeof a);
  a[0] = (fe_arg){.kind = FE_ARG_INT, .i = (count + F->sh.block - 1) / F->sh.block};
  a[1] = (fe_arg){.kind = FE_ARG_INT, .i = count};
  int rc = be->ops->wrap(be->impl, (void *)cells, sizeof(int) * (size_t)count * nb, &bc);
  if (!rc) rc = be->ops->wrap(be->impl, (void *)ids, sizeof(int) * (size_t)count, &bi);
  if (!rc) rc = be->ops->wrap(be->impl, K, kslots * F->kn * fe_precision_size(h->prec), &bk);
  a[3] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bc};
  a[13] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bi};
  a[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bk};
  a[6] = a[7]; /* no constants, no maps: a word the kernel does not read */
  a[8] = a[7];
  if (!rc && aux) {
    rc = be->ops->wrap(be->impl, (void *)aux, (size_t)count * F->aux_bytes, &ba);
    a[6] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &ba};
  }
  if (!rc && maps) {
    rc = be->ops->wrap(be->impl, (void *)maps, sizeof(int) * (size_t)count * F->nbf, &bm);
    a[8] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bm};
  }
  if (rc) return rc;
  return be->ops->launch(be->impl, F->k, (size_t)a[0].i, F->sh.items, 15, a, h->prec, NULL);
}

/* A thread's window of element matrices: cells [front - W, front) at slots c mod W (W a
 * power of two), then maxdeg slots for a row's cells computed apart; end: past the last
 * cell its rows need; fit: the widest span of a row it takes. */
typedef struct cell_window {
  int W, front, end, fit;
  void *K;
} cell_window;

/* A thread's scratch for the fill: a launch's slots and a gathered row's cells (nodes,
 * constants, maps), the rows' marks and places (fill_row), its launches. */
typedef struct fill_scratch {
  int *ids, *gcells, *gmaps, *seen, *at, *nbr, *slot;
  char *gaux;
  double *acc;
  int launches;
  long long made; /* cells' matrices computed (a cell in two threads' bands: twice) */
} fill_scratch;

/* Thread t of nt's rows [*a0, *a1) of the fill's order: contiguous, balanced by their cells
 * (pre[p]: the cells of the rows before position p). */
static void node_range(const pattern *P, const int *pre, int t, int nt, int *a0, int *a1)
{
  const int nn = P->V->nnodes;
  const long long nent = pre[nn];
  int lo = 0, hi = nn;
  for (int e = 0; e < 2; e++) { /* the first row whose cells start at or past the share */
    const long long x = nent * (t + e) / nt;
    int l = 0, h = nn;
    while (l < h) {
      const int m = l + (h - l) / 2;
      if (pre[m] < x) l = m + 1;
      else h = m;
    }
    if (e) hi = t == nt - 1 ? nn : l;
    else lo = t == 0 ? 0 : l;
  }
  *a0 = lo;
  *a1 = hi;
}

/* The window for rows [a0, a1). A row spans its cells from the first to the last; rows
 * spanning more than 4 times the spans of 99% of the rows (outliers: a few cells far from
 * the others in the mesh's order) have their cells computed apart, so that they neither
 * widen the window nor move its front. W: the widest span from a row's first cell to the
 * front when it is summed (the last cell of the rows so far, plus a launch), as a power of
 * two up to about F->window. Its matrices are allocated by the caller (window_bytes). */
static void window_make(const host_fill *F, const pattern *P, const int *order, int a0, int a1,
                        cell_window *w)
{
  long long hist[32] = {0}, rows = 0, need = 0;
  for (int p = a0; p < a1; p++) { /* the spans' powers of two */
    const int a = order ? order[p] : p;
    if (P->start[a] < P->start[a + 1]) {
      const int span = P->list[P->start[a + 1] - 1] - P->list[P->start[a]] + 1;
      int e = 0;
      while ((1LL << e) < span) e++;
      hist[e]++, rows++;
    }
  }
  int e = 0;
  for (long long sum = hist[0]; 100 * sum < 99 * rows; sum += hist[++e]) {}
  const long long fit = 4LL << e; /* 4 times the 99th percentile, up to a power of two */
  int first = P->V->mesh->ncells, last = -1;
  for (int p = a0; p < a1; p++) {
    const int a = order ? order[p] : p;
    if (P->start[a] == P->start[a + 1]) continue;
    const int cmin = P->list[P->start[a]], cmax = P->list[P->start[a + 1] - 1];
    if (cmax - cmin + 1 > fit) continue;
    first = cmin < first ? cmin : first;
    last = cmax > last ? cmax : last;
    need = last + 1 - cmin > need ? last + 1 - cmin : need;
  }
  need += F->batch;
  size_t W = 1;
  while (W < (size_t)need && W < F->window) W *= 2;
  *w = (cell_window){.W = (int)W, .front = last >= first ? first : 0, .end = last + 1,
                     .fit = (int)(fit < (long long)W - F->batch ? fit : (long long)W - F->batch)};
}

/* The bytes of window w's matrices: W slots, then maxdeg for a row computed apart. */
static size_t window_bytes(const host_fill *F, const pattern *P, const cell_window *w)
{
  return ((size_t)w->W + (size_t)P->maxdeg) * F->kn * fe_precision_size(F->h.prec);
}

/* Node a's cells' slots: in the window when the row fits it and its cells are all there
 * once the front has passed the last of them (moved on as far as needed, in launches of
 * F->batch cells), else computed apart (gathered into one launch). Called by threads (a
 * failure: its code). */
static int window_row(const host_fill *F, const pattern *P, cell_window *w, int a,
                      fill_scratch *x)
{
  const int nb = P->V->elem.nbasis, *cn = P->V->cell_nodes, B = F->batch;
  const int t0 = P->start[a], deg = P->start[a + 1] - t0;
  const int cmin = P->list[t0], cmax = P->list[t0 + deg - 1];
  int front = w->front;
  while (cmax - cmin < w->fit && front <= cmax) front = front + B < w->end ? front + B : w->end;
  if (cmax - cmin < w->fit && cmin >= front - w->W) {
    while (w->front < front) { /* the front's launches */
      const size_t c = (size_t)w->front;
      const int n = front - w->front < B ? front - w->front : B;
      for (int s = 0; s < n; s++) x->ids[s] = (int)((c + s) & (size_t)(w->W - 1));
      int rc = host_fill_launch(F, cn + c * nb, F->aux ? F->aux + c * F->aux_bytes : NULL,
                                F->maps ? F->maps + c * F->nbf : NULL, x->ids, n, w->K,
                                (size_t)w->W);
      if (rc) return rc;
      w->front += n;
      x->launches++;
      x->made += n;
    }
    for (int i = 0; i < deg; i++) x->slot[i] = P->list[t0 + i] & (w->W - 1);
    return 0;
  }
  for (int i = 0; i < deg; i++) { /* apart: gathered */
    const size_t c = (size_t)P->list[t0 + i];
    memcpy(x->gcells + (size_t)i * nb, cn + c * nb, sizeof(int) * nb);
    if (F->aux) memcpy(x->gaux + i * F->aux_bytes, F->aux + c * F->aux_bytes, F->aux_bytes);
    if (F->maps) memcpy(x->gmaps + (size_t)i * F->nbf, F->maps + c * F->nbf, sizeof(int) * F->nbf);
    x->ids[i] = x->slot[i] = w->W + i;
  }
  x->launches++;
  x->made += deg;
  return host_fill_launch(F, x->gcells, F->aux ? x->gaux : NULL, F->maps ? x->gmaps : NULL,
                          x->ids, deg, w->K, (size_t)w->W + P->maxdeg);
}

/* Prefetch the matrices of node a's cells that the window holds (the next row's, while
 * this one is summed: their reads miss the cache, the window being about a layer of cells). */
static void window_prefetch(const host_fill *F, const pattern *P, const cell_window *w, int a)
{
  const size_t bytes = F->kn * fe_precision_size(F->h.prec);
  for (int t = P->start[a]; t < P->start[a + 1]; t++) {
    const int c = P->list[t];
    if (c >= w->front || c < w->front - w->W) continue;
    const char *k = (const char *)w->K + (size_t)(c & (w->W - 1)) * bytes;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(k + b);
  }
}

/* Add row (b_a, k) of every cell of node a, from its slot in K (kd: double, else float),
 * into acc; at[b]: node b's first column in the row (all its components free: column
 * at[b] + kk; none free: a spare slot past the row), or -(first + 1) when some are fixed. */
static void add_cells_row(const pattern *P, const int *slot, const void *K, size_t kn, int kd,
                          int a, int k, const int *at, double *acc)
{
  const int nb = P->V->elem.nbasis, nc = P->V->ncomp, n = nb * nc, *cn = P->V->cell_nodes;
  for (int t = P->start[a], i = 0; t < P->start[a + 1]; t++, i++) {
    const int *nodes = cn + (size_t)P->list[t] * nb;
    int ba = 0;
    for (int b = 1; b < nb; b++) ba = nodes[b] == a ? b : ba; /* no branch to mispredict */
    const size_t off = (size_t)slot[i] * kn + (size_t)(ba * nc + k) * n;
    const double *Kd = (const double *)K + off;
    const float *Kf = (const float *)K + off;
    for (int b = 0; b < nb; b++) {
      int p = at[nodes[b]];
      if (p >= 0 && kd)
        for (int kk = 0; kk < nc; kk++) acc[p + kk] += Kd[b * nc + kk];
      else if (p >= 0)
        for (int kk = 0; kk < nc; kk++) acc[p + kk] += Kf[b * nc + kk];
      else
        for (int kk = 0, q = -p - 1; kk < nc; kk++)
          if (!P->fixed[nodes[b] * nc + kk]) acc[q++] += kd ? Kd[b * nc + kk] : Kf[b * nc + kk];
    }
  }
}

/* Row a of the second pass into cols (and, with F, vals: each row the sum of its cells'
 * rows, in double, in the order of the cells). Called by threads (a failure: its code). */
static int fill_row(const pattern *P, const int *rowptr, int *cols, void *vals,
                    const host_fill *F, cell_window *w, int a, int next, fill_scratch *x)
{
  const int nc = P->V->ncomp;
  const int m = node_neighbours(P, a, x->seen, x->nbr, 1);
  int rc = F && m ? window_row(F, P, w, a, x) : 0, len = 0, *row0 = NULL;
  if (rc) return rc;
  if (F && next >= 0) window_prefetch(F, P, w, next);
  for (int i = 0; i < m; i++) len += P->nfree[x->nbr[i]]; /* a free row's columns */
  for (int i = 0, p = 0; i < m; i++) { /* none free: the spare slots past the row */
    const int b = x->nbr[i], f = P->nfree[b];
    x->at[b] = f == nc ? p : f ? -p - 1 : len;
    p += f;
  }
  for (int k = 0; k < nc; k++) {
    const int gi = a * nc + k, r0 = rowptr[gi];
    int *row = cols + r0, rl = 1;
    double *acc = x->acc;
    if (P->fixed[gi]) { /* the identity's row */
      row[0] = gi;
      acc[0] = 1;
    } else {
      rl = len;
      if (row0) memcpy(row, row0, sizeof(int) * (size_t)len); /* every free row alike */
      else
        for (int i = 0, p = 0; i < m; i++)
          for (int kk = 0; kk < nc; kk++)
            if (!P->fixed[x->nbr[i] * nc + kk]) row[p++] = x->nbr[i] * nc + kk;
      row0 = row;
      if (!F) continue;
      for (int i = 0; i < len + nc; i++) acc[i] = 0;
      add_cells_row(P, x->slot, w->K, F->kn, F->dbl, a, k, x->at, acc);
    }
    if (!F) continue;
    if (F->dbl) memcpy((double *)vals + r0, acc, sizeof(double) * (size_t)rl);
    else
      for (int i = 0; i < rl; i++) ((float *)vals)[r0 + i] = (float)acc[i];
  }
  return 0;
}

static void scratch_free(fill_scratch *x)
{
  free(x->ids), free(x->gcells), free(x->gmaps), free(x->seen), free(x->at), free(x->nbr);
  free(x->slot), free(x->gaux), free(x->acc);
}

/* A thread's scratch (0, or FE_ERR_MEM). */
static int scratch_make(const pattern *P, const host_fill *F, fill_scratch *x)
{
  const int nn = P->V->nnodes, nb = P->V->elem.nbasis, nc = P->V->ncomp, d = P->maxdeg;
  const size_t most = (size_t)d * nb + 1, batch = F ? (size_t)F->batch : 0;
  *x = (fill_scratch){0};
  x->seen = malloc(sizeof(int) * ((size_t)nn + 1));
  x->at = malloc(sizeof(int) * ((size_t)nn + 1));
  x->nbr = malloc(sizeof(int) * most);
  x->slot = malloc(sizeof(int) * ((size_t)d + 1));
  x->ids = malloc(sizeof(int) * (batch > (size_t)d ? batch : (size_t)d));
  x->gcells = malloc(sizeof(int) * most);
  x->gmaps = malloc(sizeof(int) * ((size_t)d * (F ? F->nbf : 0) + 1));
  x->gaux = malloc((size_t)d * (F ? F->aux_bytes : 0) + 1);
  x->acc = malloc(sizeof(double) * (most + 1) * nc); /* a row and its spare slots */
  if (!x->seen || !x->at || !x->nbr || !x->slot || !x->ids || !x->gcells || !x->gmaps ||
      !x->gaux || !x->acc)
    return FE_ERR_MEM;
  for (int a = 0; a < nn; a++) x->seen[a] = -1;
  return 0;
}

/* The order the fill sums its rows in: by each node's first cell (ties by id), so that a
 * thread's window sweeps its band of the mesh once whatever the numbering. Numberings that
 * keep the vertices' ids and number the other nodes after them (P2 and up, and a box's Q2 and
 * up) would otherwise sweep it once for the vertices' rows and again for the others', each
 * cell's matrices made about twice (P2 16^3: 1.85 a cell, 1.07 in this order) and its window
 * thrashed: P2 tets 48^3 in double, the first csr apply 3.0-3.2 -> 0.6-0.7 s
 * (docs/benchmarks.md). *order: NULL where the ids are already in that order (or
 * FELAB_FILL_IDS is set: tests compare the two); *pre: the cells of the rows before each
 * position (P->start itself then). */
static int fill_order(const pattern *P, int **order, int **pre)
{
  const int nn = P->V->nnodes;
  *order = *pre = NULL;
  int sorted = 1;
  for (int a = 1; a < nn && sorted; a++)
    sorted = P->start[a] == P->start[a + 1] || P->start[a - 1] == P->start[a] ||
             P->list[P->start[a - 1]] <= P->list[P->start[a]];
  const char *ids = getenv("FELAB_FILL_IDS");
  if (sorted || (ids && *ids)) return 0;
  uint64_t *key = malloc(sizeof(uint64_t) * 2 * ((size_t)nn + 1));
  int *o = malloc(sizeof(int) * 2 * ((size_t)nn + 1)), *q = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!key || !o || !q) {
    free(key), free(o), free(q);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the fill's order of %d rows", nn);
  }
#pragma omp parallel for schedule(static)
  for (int a = 0; a < nn; a++) {
    key[a] = P->start[a] < P->start[a + 1] ? (uint64_t)P->list[P->start[a]] : 0;
    o[a] = a;
  }
  fe_sort_u64(key, o, (size_t)nn, key + nn + 1, o + nn + 1, 0);
  q[0] = 0;
  for (int p = 0; p < nn; p++) q[p + 1] = q[p] + (P->start[o[p] + 1] - P->start[o[p]]);
  free(key);
  *order = o;
  *pre = q;
  return 0;
}

/* The pattern's second pass, writing cols (and with F vals) in place: each thread its
 * contiguous range of rows in the fill's order, with F its own window; *made: the element
 * matrices it computed. */
static int fill_pattern(const pattern *P, const int *rowptr, int *cols, void *vals,
                        const host_fill *F, int *launches, long long *made)
{
  int rc = 0, nl = 0, *order = NULL, *pre = NULL, fits = 0;
  long long nm = 0;
  size_t windows = 0; /* the threads' windows' bytes */
  if (F) FE_CHECK(fill_order(P, &order, &pre));
  const int nn = P->V->nnodes;
#pragma omp parallel reduction(max : rc) reduction(+ : nl, nm)
  {
    int a0, a1;
    node_range(P, pre ? pre : P->start, omp_get_thread_num(), omp_get_num_threads(), &a0, &a1);
    fill_scratch x;
    cell_window w = {0};
    int e = scratch_make(P, F, &x);
    if (F) { /* the windows' matrices made once all of them are known to fit */
      window_make(F, P, order, a0, a1, &w);
#pragma omp atomic update
      windows += window_bytes(F, P, &w);
#pragma omp barrier
#pragma omp single
      fits = fe_memory_check(windows, "assemble: the fill's element matrices, a window of cells "
                             "on each of %d threads", omp_get_num_threads());
      if (fits) e = e ? e : fits;
      else if (!e && !(w.K = malloc(window_bytes(F, P, &w)))) e = FE_ERR_MEM;
    }
    for (int p = a0; !e && p < a1; p++) {
      const int next = p + 1 < nn ? (order ? order[p + 1] : p + 1) : -1;
      e = fill_row(P, rowptr, cols, vals, F, &w, order ? order[p] : p, next, &x);
    }
    rc = e; /* the private copy of the reduction (which starts at INT_MIN) */
    nl += x.launches;
    nm += x.made;
    free(w.K);
    scratch_free(&x);
  }
  free(order);
  free(pre);
  if (fits) return fe_error_push(fits, __FILE__, __LINE__, __func__); /* the check's message */
  FE_ASSERT(rc != FE_ERR_MEM, FE_ERR_MEM, "out of host memory for the matrix pattern's fill");
  FE_CHECK(rc); /* a launch's error (set by the backend) */
  *launches = nl;
  if (made) *made = nm;
  return 0;
}

int fe_space_cell_colors(const fe_space *V, int **order, int **start, int *ncolors)
{
  *order = *start = NULL;
  *ncolors = 0;
  int nc = V->mesh->ncells, *color, n;
  FE_CHECK(fe_mesh_color_groups_below(V->mesh, V->cell_nodes, V->elem.nbasis, V->nnodes, 1,
                                      &color, &n));
  int *o = malloc(sizeof(int) * ((size_t)nc + 1)), *st = calloc((size_t)n + 1, sizeof(int));
  int *pos = malloc(sizeof(int) * ((size_t)n + 1));
  if (!o || !st || !pos) {
    free(color), free(o), free(st), free(pos);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the cells' colors");
  }
  for (int c = 0; c < nc; c++) st[color[c] + 1]++;
  for (int k = 0; k < n; k++) st[k + 1] += st[k];
  memcpy(pos, st, sizeof(int) * (size_t)n);
  for (int c = 0; c < nc; c++) o[pos[color[c]]++] = c;
  free(color);
  free(pos);
  *order = o;
  *start = st;
  *ncolors = n;
  return 0;
}

/* The fe_spmv kernel of M, from the elemat module's source of realization r. */
static int csr_module(fe_csr *M, const fe_realization *r, double *seconds)
{
  char *src;
  int cached = 0;
  FE_CHECK(fe_elemat_source(r, M->lanes, &src));
  int rc = fe_compile(M->be, src, &M->mod, seconds, &cached);
  free(src);
  FE_CHECK(rc);
  return M->be->ops->kernel(M->be->impl, M->mod,
                            M->format == FE_FORMAT_SELL ? "fe_spmv_sell" : "fe_spmv", &M->spmv);
}

/* The library's product (format "cusparse"): its descriptors of M's CSR arrays. */
static int csr_make_library(fe_csr *M)
{
  if (!M->be->ops->sparse_make)
    FE_ERROR(FE_ERR_UNAVAILABLE, "format = \"cusparse\" is cuSPARSE's product, on the cuda "
             "backend only (this matrix is on %s); use \"csr\" or \"sell\"", M->be->name);
  return M->be->ops->sparse_make(M->be->impl, M->n, M->nnz, &M->rowptr, &M->cols, &M->vals,
                                 M->prec, &M->sparse);
}

/* ---- SELL-C-sigma ---- */

/* Check the asked layout of the product (lanes: CSR's items per row). */
static int check_format(int format, int chunk, int sigma, int lanes)
{
  FE_ASSERT(format >= FE_FORMAT_AUTO && format <= FE_FORMAT_CUSPARSE, FE_ERR_ARG, "format = %d: "
            "the product's layout is FE_FORMAT_AUTO, _CSR, _SELL or _CUSPARSE", format);
  FE_ASSERT(chunk >= 0 && chunk <= 1024, FE_ERR_ARG, "chunk = %d: the rows per SELL chunk must "
            "be in 1..1024 (a chunk is read by one group of items; 0: the device's)", chunk);
  FE_ASSERT(sigma >= 0, FE_ERR_ARG, "sigma = %d: the rows per SELL sorting window must be >= 1 "
            "(1: no sorting; 0: the device's)", sigma);
  FE_ASSERT(format == FE_FORMAT_SELL || (!chunk && !sigma), FE_ERR_ARG, "%s = %d is an option "
            "of format = \"sell\" (SELL-C-sigma), not of CSR", chunk ? "chunk" : "sigma",
            chunk ? chunk : sigma);
  FE_ASSERT(format != FE_FORMAT_SELL || !lanes, FE_ERR_ARG, "lanes = %d is CSR's (items per "
            "row); format = \"sell\" runs one item per row", lanes);
  FE_ASSERT(format != FE_FORMAT_CUSPARSE || !lanes, FE_ERR_ARG, "lanes = %d is felab's CSR "
            "product's; format = \"cusparse\" runs cuSPARSE's", lanes);
  return 0;
}

/* Sort keys: shorter rows sort later, ties in row order (reproducible). */
static int cmp_key(const void *a, const void *b)
{
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* The SELL-C-sigma layout of the n rows of rowptr: perm[p], the row at position p (rows
 * sorted longest first within windows of sigma rows), and cstart[nchunks + 1], the first
 * slot of each chunk of C positions (C times its longest row); both malloc'd. */
static int sell_layout(const int *rowptr, int n, int C, int sigma, int **perm_out,
                       int **cstart_out, long long *nslots)
{
  int nchunks = (int)(((long long)n + C - 1) / C), nwin = (int)(((long long)n + sigma - 1) / sigma);
  FE_ASSERT((long long)nchunks * C <= 2147483647LL, FE_ERR_ARG, "%d rows in chunks of %d pass "
            "2^31 positions (int indices)", n, C);
  int *perm = malloc(sizeof(int) * ((size_t)n + 1));
  int *cstart = malloc(sizeof(int) * ((size_t)nchunks + 1)), failed = 0;
  if (!perm || !cstart) {
    free(perm), free(cstart);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the SELL layout of %d rows", n);
  }
#pragma omp parallel reduction(| : failed)
  {
    const int m = sigma < n ? sigma : n;
    long long *key = m > 1 ? malloc(sizeof(long long) * (size_t)m) : NULL;
    if (m > 1 && !key) failed = 1;
#pragma omp for schedule(dynamic, 16)
    for (int b = 0; b < nwin; b++) {
      const int lo = (int)((long long)b * sigma), hi = n - lo < sigma ? n : lo + sigma;
      if (failed || !key) {
        for (int i = lo; i < hi; i++) perm[i] = i;
        continue;
      }
      /* key: (INT_MAX - length) above the row, so ascending keys put long rows first */
      for (int i = lo; i < hi; i++)
        key[i - lo] = (long long)(2147483647 - (rowptr[i + 1] - rowptr[i])) << 32 | i;
      qsort(key, (size_t)(hi - lo), sizeof *key, cmp_key);
      for (int i = lo; i < hi; i++) perm[i] = (int)(key[i - lo] & 0xffffffffLL);
    }
    free(key);
  }
  long long s = 0;
  for (int k = 0; k < nchunks && !failed; k++) {
    int w = 0, end = n - k * C < C ? n : (k + 1) * C;
    for (int p = k * C; p < end; p++)
      if (rowptr[perm[p] + 1] - rowptr[perm[p]] > w) w = rowptr[perm[p] + 1] - rowptr[perm[p]];
    cstart[k] = (int)s;
    s += (long long)C * w;
    if (s > 2147483647LL) failed = 2;
  }
  if (failed) {
    free(perm), free(cstart);
    FE_ASSERT(failed != 2, FE_ERR_ARG, "the SELL layout (chunk = %d, sigma = %d) passes 2^31 "
              "slots (int indices)", C, sigma);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the SELL layout of %d rows", n);
  }
  cstart[nchunks] = (int)s;
  *perm_out = perm;
  *cstart_out = cstart;
  *nslots = s;
  return 0;
}

/* M's SELL-C-sigma copy (M->chunk, M->sigma set, its values filled): the layout on the host
 * from rowptr (M's, kept by the host that built it), the slots moved on the device by
 * fe_sell_fill (the values never leave it). *host: the host's seconds; *seconds: the
 * kernel's. */
static int csr_make_sell(fe_csr *M, const int *rowptr, double *host, double *seconds)
{
  double t0 = fe_clock();
  int *perm = NULL, *cstart = NULL, C = M->chunk;
  FE_CHECK(sell_layout(rowptr, M->n, C, M->sigma, &perm, &cstart, &M->nslots));
  fe_backend *be = M->be;
  M->nchunks = (int)(((long long)M->n + C - 1) / C);
  size_t slots = (size_t)M->nslots + 1;
  /* host memory where the backend's buffers are (the cpu), else the device's */
  int rc = fe_memory_check_on(be, slots * (sizeof(int) + fe_precision_size(M->prec)), "assemble: "
                              "the SELL copy's %lld slots (chunk = %d, sigma = %d)", M->nslots, C,
                              M->sigma);
  if (rc) {
    free(perm), free(cstart);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  rc = fe_upload_ints(be, cstart, (size_t)M->nchunks + 1, &M->cstart);
  if (!rc) rc = fe_upload_ints(be, perm, (size_t)M->n, &M->perm);
  free(perm);
  free(cstart);
  if (!rc) rc = be->ops->alloc(be->impl, slots * sizeof(int), &M->scols);
  if (!rc) rc = be->ops->alloc(be->impl, slots * fe_precision_size(M->prec), &M->svals);
  fe_kernel *fill = NULL;
  if (!rc) rc = be->ops->kernel(be->impl, M->mod, "fe_sell_fill", &fill);
  *host = fe_clock() - t0;
  int npos = M->nchunks * C;
  fe_arg args[11] = {
      {.kind = FE_ARG_INT, .i = (npos + EM_ITEMS - 1) / EM_ITEMS},
      {.kind = FE_ARG_INT, .i = M->n},
      {.kind = FE_ARG_INT, .i = C},
      {.kind = FE_ARG_INT, .i = npos},
      {.kind = FE_ARG_BUFFER, .buf = &M->cstart},
      {.kind = FE_ARG_BUFFER, .buf = &M->perm},
      {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
      {.kind = FE_ARG_BUFFER, .buf = &M->cols},
      {.kind = FE_ARG_BUFFER, .buf = &M->vals},
      {.kind = FE_ARG_BUFFER, .buf = &M->scols},
      {.kind = FE_ARG_BUFFER, .buf = &M->svals},
  };
  if (!rc && npos)
    rc = be->ops->launch(be->impl, fill, (size_t)args[0].i, EM_ITEMS, 11, args, M->prec, seconds);
  FE_CHECK(rc);
  return 0;
}

int fe_operator_assemble(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_csr **Mout, fe_report *rep)
{
  *Mout = NULL;
  int asked = o ? o->lanes : 0, scatter = o ? o->scatter : FE_SCATTER_AUTO;
  FE_ASSERT(asked >= 0 && asked <= 64 && !(asked & (asked - 1)), FE_ERR_ARG, "lanes = %d: the "
            "items per row of the CSR product must be a power of two up to 64", asked);
  int format = o ? o->format : FE_FORMAT_AUTO, chunk = o ? o->chunk : 0, sigma = o ? o->sigma : 0;
  FE_CHECK(check_format(format, chunk, sigma, asked));
  const fe_space *V = A->V;
  int nd = V->ndofs, nc = V->mesh->ncells, nb = V->elem.nbasis;
  double t0 = fe_clock();
  fe_backend *be;
  FE_CHECK(fe_backend_get(o ? o->backend : NULL, &be));
  /* The fill: where buffers are host memory (the cpu) each row sums its cells' entries as
   * the pattern is written, the element matrices made as the rows need them ("nodes",
   * measured fastest there; it computes the Jacobian from the nodes, which an order-1 space
   * on curved cells cannot); else the device adds stored element matrices, atomically (the
   * default) or color by color (measured 2.4x slower on the cpu, P1 48^3: a color's cells
   * are spread over the mesh, so each launch walks all of the values). */
  int host = be->ops->wrap && be->ops->host, jac = !V->curved || V->elem.order >= 2;
  if (scatter == FE_SCATTER_AUTO) scatter = host && jac ? FE_SCATTER_NODES : FE_SCATTER_ATOMIC;
  FE_ASSERT(scatter != FE_SCATTER_NODES || (host && jac), FE_ERR_ARG, "assemble: scatter = "
            "\"nodes\" (each row sums its cells' element matrices, made as the rows need them) "
            "%s; use \"atomic\" or \"color\"", !host ? "runs where buffers are host memory (the "
            "cpu)" : "computes the Jacobian from the nodes, which this order-1 space cannot on "
            "curved cells");
  const int by_rows = scatter == FE_SCATTER_NODES;
  fe_precision prec = fe_precision_default();
  if (o && o->precision >= 0) prec = (fe_precision)o->precision;
  size_t w = fe_precision_size(prec);
  /* The pattern first, on the host: its nonzeros are counted before anything is computed, so
   * that a matrix that cannot fit is refused before its element matrices are made. Its arrays
   * before the count: the constrained marks and row pointers, each node's cells (a cell's
   * nodes once), counts a node, a thread's marks a node (count_rows, and the fill's two), the
   * fill's order (key, row, prefix: 28 bytes a node). */
  const int nn = V->nnodes, threads = omp_get_max_threads();
  FE_CHECK(fe_memory_check(8 * ((size_t)nd + 1) + 4 * (size_t)nc * nb +
                           (size_t)nn * (20 + 8 * (size_t)threads + (by_rows ? 28 : 0)),
                           "assemble: the pattern of %d rows (%d cells of %d nodes)", nd, nc, nb));
  int *fixed = calloc((size_t)nd + 1, sizeof(int));
  int *rowptr = malloc(sizeof(int) * ((size_t)nd + 1)); /* M's, on the host */
  pattern P = {.V = V, .fixed = fixed};
  long long nnz = 0;
  int rc = 0;
  if (!fixed || !rowptr)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (int i = 0; !rc && i < fe_operator_ndirichlet(A); i++) fixed[A->dir_nodes[i]] = 1;
  if (!rc) rc = node_cells(&P);
  if (!rc) rc = count_rows(&P, rowptr);
  if (!rc) { /* its columns and values: in M's buffers (the host's fill), or on the host first
              * (in double) and then in M's buffers, with the stored element matrices, which are
              * host memory too on the cpu */
    nnz = rowptr[nd];
    const size_t nz = (size_t)nnz, dev = (sizeof(int) + w) * nz, n = (size_t)nb * V->ncomp;
    const size_t stored = dev + w * n * n * nc + 4 * ((size_t)nc * nb + (size_t)nd);
    rc = fe_memory_check(by_rows ? dev : (sizeof(int) + sizeof(double)) * nz +
                                             (be->ops->host ? stored : 0),
                         "assemble: the matrix of %d rows and %lld nonzeros", nd, nnz);
    if (!rc && !be->ops->host) /* and on the device: the matrix, its cell map and marks */
      rc = fe_memory_check_on(be, stored, "assemble: the matrix of %d rows and %lld nonzeros",
                              nd, nnz);
  }
  fe_elemats *K = NULL;
  fe_report krep = {0};
  host_fill F = {0};
  fe_realization *r = NULL;
  double compile_s = 0, transfer = 0, seconds = 0;
  if (!rc && by_rows) {
    rc = host_fill_make(A, at, be, prec, &F, &compile_s, &transfer);
    r = &F.h;
  } else if (!rc) {
    rc = fe_element_matrices(A, at, o, NULL, NULL, &K, &krep);
    fe_action_opts oo;
    if (o) oo = *o;
    else fe_action_opts_default(&oo);
    oo.strategy = "transpose"; /* the realization the element matrices were made on */
    oo.given = NULL; /* the options the call gave its own strategy */
    char why[160];
    if (!rc) rc = fe_operator_realize_stored(A, &oo, &r, why, sizeof why);
    compile_s = krep.compile_seconds;
    transfer = krep.transfer_seconds;
  }
  int *cols = NULL, nfill = 0;
  long long made = 0; /* the host fill's element matrices computed */
  double *vals = NULL; /* the device path's start: zeros and the identity's rows */
  fe_csr *M = calloc(1, sizeof *M);
  fe_buffer bcells = {0}, bfixed = {0}, border = {0};
  fe_kernel *kasm = NULL;
  int *order = NULL, *cstart = NULL, ncolors = 0;
  if (!rc && !M) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    int lanes = asked > 0 ? asked : r->be->info.is_gpu ? 4 : 1; /* measured, H100 P1 */
    /* format auto: SELL on a GPU unless CSR's lanes are asked (H100, P1 7.19M dofs: 0.491
     * against vector CSR's 0.566 ms, 97% against 83% of the copy bandwidth), CSR on a CPU
     * (this 2-core machine, P1 275k dofs: 0.97 against SELL-8's 1.12 ms) */
    if (format == FE_FORMAT_AUTO)
      format = r->be->info.is_gpu && !asked ? FE_FORMAT_SELL : FE_FORMAT_CSR;
    *M = (fe_csr){.be = r->be, .prec = r->prec, .n = nd, .lanes = lanes, .format = format,
                  .nnz = nnz, .nslots = nnz};
    if (M->format == FE_FORMAT_SELL) {
      /* C: a warp on a GPU (32; two chunks to an AMD wavefront), so a chunk's items read
       * consecutive slots in one coalesced step; 8 on the cpu (a vector of doubles). sigma:
       * 8 chunks, enough rows to group the short ones (boundary and constrained rows) while
       * keeping a chunk's rows, and so its reads of x, as near as CSR's neighbours. */
      M->chunk = chunk ? chunk : r->be->info.is_gpu ? 32 : 8;
      M->sigma = sigma ? sigma : 8 * M->chunk;
    }
    w = fe_precision_size(r->prec);
  }
  /* the arrays: with the host's fill, M's own buffers written in place */
  if (!rc && by_rows &&
      !(rc = be->ops->alloc(be->impl, sizeof(int) * ((size_t)nd + 1), &M->rowptr)))
    memcpy(be->ops->host(be->impl, &M->rowptr), rowptr, sizeof(int) * ((size_t)nd + 1));
  if (!rc && by_rows && !(rc = be->ops->alloc(be->impl, sizeof(int) * (size_t)M->nnz, &M->cols)))
    rc = be->ops->alloc(be->impl, w * (size_t)M->nnz, &M->vals);
  if (!rc && by_rows) cols = be->ops->host(be->impl, &M->cols);
  else if (!rc && (!(cols = malloc(sizeof(int) * ((size_t)M->nnz + 1))) ||
                   !(vals = calloc((size_t)M->nnz + 1, sizeof(double)))))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for %lld "
                      "nonzeros", M->nnz);
  double tf = fe_clock();
  if (!rc) rc = fill_pattern(&P, rowptr, cols, by_rows ? be->ops->host(be->impl, &M->vals) : NULL,
                             by_rows ? &F : NULL, &nfill, &made);
  if (by_rows) seconds = fe_clock() - tf; /* the fill is the pattern's second pass */
  for (int i = 0; !rc && !by_rows && i < nd; i++)
    if (fixed[i]) vals[rowptr[i]] = 1; /* the identity's row; the device adds the rest */
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, rowptr, (size_t)nd + 1, &M->rowptr);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, cols, (size_t)M->nnz, &M->cols);
  if (!rc && !by_rows) rc = fe_upload_reals(r->be, r->prec, vals, (size_t)M->nnz, &M->vals);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, V->cell_nodes, (size_t)nc * nb, &bcells);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, fixed, (size_t)nd, &bfixed);
  if (!rc && scatter == FE_SCATTER_COLOR) rc = fe_space_cell_colors(V, &order, &cstart, &ncolors);
  if (!rc && order) rc = fe_upload_ints(r->be, order, (size_t)nc, &border);
  if (!rc) {
    double cs;
    rc = csr_module(M, r, &cs);
    compile_s += cs;
  }
  if (!rc && !by_rows) rc = r->be->ops->kernel(r->be->impl, M->mod, "fe_assemble", &kasm);
  double setup = fe_clock() - t0 - compile_s - transfer - seconds;
  for (int c = 0; !rc && c < (by_rows ? 0 : order ? ncolors : 1); c++) { /* per color, or one */
    int first = order ? cstart[c] : 0, count = order ? cstart[c + 1] - first : nc;
    long long rows = (long long)count * K->n, ng = (rows + EM_ITEMS - 1) / EM_ITEMS;
    double sec = 0;
    fe_arg args[11] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = count},
        {.kind = FE_ARG_INT, .i = first},
        {.kind = FE_ARG_INT, .i = order != NULL},
        {.kind = FE_ARG_BUFFER, .buf = order ? &border : &bcells},
        {.kind = FE_ARG_BUFFER, .buf = &bcells},
        {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
        {.kind = FE_ARG_BUFFER, .buf = &M->cols},
        {.kind = FE_ARG_BUFFER, .buf = &bfixed},
        {.kind = FE_ARG_BUFFER, .buf = &K->vals},
        {.kind = FE_ARG_BUFFER, .buf = &M->vals},
    };
    if (ng) rc = r->be->ops->launch(r->be->impl, kasm, (size_t)ng, EM_ITEMS, 11, args, r->prec, &sec);
    seconds += sec;
  }
  double sell_host = 0, sell_s = 0; /* the SELL copy, from the filled values */
  if (!rc && M->format == FE_FORMAT_SELL) rc = csr_make_sell(M, rowptr, &sell_host, &sell_s);
  if (!rc && M->format == FE_FORMAT_CUSPARSE) rc = csr_make_library(M);
  /* what the report counts of the element matrices: their kernel's flops, and its bytes less
   * the matrices (the fused fill never stores them) */
  fe_kernel_spec s;
  if (!rc && by_rows) {
    fe_realization_spec(r, FE_ACTION_APPLY, &s);
    double ff, fb;
    fe_codegen_field_counts(&s, &ff, &fb);
    krep.flops = (double)made * elemat_flops_per_cell(r, &s, &F.sh); /* as many as it made */
    krep.bytes = V->nnodes * 3.0 * w + nc * (nb * 4.0 + A->pde->naux * w) + fb +
                 (fe_codegen_needs(&s).need_u ? nd * w : 0);
  }
  free(order);
  free(cstart);
  if (border.ptr) r->be->ops->release(r->be->impl, &border);
  if (bcells.ptr) r->be->ops->release(r->be->impl, &bcells);
  if (bfixed.ptr) r->be->ops->release(r->be->impl, &bfixed);
  pattern_free(&P);
  free(fixed);
  free(rowptr);
  if (!by_rows) {
    free(cols);
    free(vals);
  }
  if (by_rows) host_fill_free(&F);
  if (rc) {
    fe_elemats_free(K);
    fe_csr_free(M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char how[160];
  if (by_rows) snprintf(how, sizeof how, "element matrices (reg_jac) made as the rows need them "
                        "(%lld for %d cells), each row summing its cells' entries", made, nc);
  else if (ncolors) snprintf(how, sizeof how, "element matrices (reg_nojac), then plain adds color "
                             "by color (%d colors) into a pattern built on the host", ncolors);
  else snprintf(how, sizeof how, "element matrices (reg_nojac), then atomic adds into a pattern "
                "built on the host");
  if (M->format == FE_FORMAT_SELL)
    snprintf(how + strlen(how), sizeof how - strlen(how), "; SELL-%d-%d, %.1f%% padding",
             M->chunk, M->sigma, 100.0 * (double)(M->nslots - M->nnz) / (double)M->nslots);
  fe_report_begin(rep, "assemble", M->be, M->prec, "quadrature", how);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  double nk = (double)nc * V->elem.nbasis * V->ncomp * V->elem.nbasis * V->ncomp;
  /* the adds, then the element matrices' own work; the device path stores the matrices and
   * reads them back */
  rep->flops = nk + krep.flops;
  rep->bytes = (by_rows ? 0 : nk * w + nc * nb * 4.0) + (double)M->nnz * (w + 4) +
               (nd + 1) * 4.0 + krep.bytes;
  if (M->format == FE_FORMAT_SELL) /* the fill: CSR and the layout read, the slots written */
    rep->bytes += (double)M->nnz * (w + 4) + (nd + 1) * 4.0 + nd * 4.0 +
                  (M->nchunks + 1) * 4.0 + (double)M->nslots * (w + 4);
  rep->seconds = seconds + sell_s + krep.seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = setup + sell_host - krep.seconds;
  rep->launches = (by_rows ? nfill : 1 + (ncolors ? ncolors : 1)) + (M->format == FE_FORMAT_SELL);
  fe_elemats_free(K);
  FE_CHECK(fe_perf_predict(M->be, M->prec, rep));
  *Mout = M;
  return 0;
}

int fe_csr_launch(const fe_csr *M, fe_kernel *k, const fe_buffer *x, fe_buffer *y, double *seconds)
{
  if (M->format == FE_FORMAT_CUSPARSE)
    return M->be->ops->sparse_spmv(M->be->impl, M->sparse, x, y, seconds);
  if (M->format == FE_FORMAT_SELL) { /* one item per row */
    int ngs = (int)(((long long)M->n + EM_ITEMS - 1) / EM_ITEMS);
    fe_arg args[9] = {
        {.kind = FE_ARG_INT, .i = ngs},
        {.kind = FE_ARG_INT, .i = M->n},
        {.kind = FE_ARG_INT, .i = M->chunk},
        {.kind = FE_ARG_BUFFER, .buf = &M->cstart},
        {.kind = FE_ARG_BUFFER, .buf = &M->perm},
        {.kind = FE_ARG_BUFFER, .buf = &M->scols},
        {.kind = FE_ARG_BUFFER, .buf = &M->svals},
        {.kind = FE_ARG_BUFFER, .buf = x},
        {.kind = FE_ARG_BUFFER, .buf = y},
    };
    return M->be->ops->launch(M->be->impl, k, (size_t)ngs, EM_ITEMS, 9, args, M->prec, seconds);
  }
  int rows = EM_ITEMS / M->lanes, ng = (M->n + rows - 1) / rows;
  fe_arg args[7] = {
      {.kind = FE_ARG_INT, .i = ng},
      {.kind = FE_ARG_INT, .i = M->n},
      {.kind = FE_ARG_BUFFER, .buf = &M->rowptr},
      {.kind = FE_ARG_BUFFER, .buf = &M->cols},
      {.kind = FE_ARG_BUFFER, .buf = &M->vals},
      {.kind = FE_ARG_BUFFER, .buf = x},
      {.kind = FE_ARG_BUFFER, .buf = y},
  };
  return M->be->ops->launch(M->be->impl, k, (size_t)ng, EM_ITEMS, 7, args, M->prec, seconds);
}

int fe_csr_apply(fe_csr *M, const fe_vector *x, fe_vector **y, fe_report *rep)
{
  FE_ASSERT(x->n == M->n, FE_ERR_ARG, "the vector has %d entries but the matrix has %d rows",
            x->n, M->n);
  fe_vector *xc = NULL;
  double t0 = fe_clock(), transfer = 0, seconds = 0;
  if (x->be != M->be || x->prec != M->prec) {
    FE_CHECK(fe_vector_convert(x, M->be, M->prec, &xc));
    x = xc;
  }
  transfer = fe_clock() - t0;
  int made = *y == NULL, rc = 0;
  if (made) rc = fe_vector_create(M->be, M->prec, M->n, y);
  else FE_ASSERT((*y)->be == M->be && (*y)->prec == M->prec && (*y)->n == M->n, FE_ERR_ARG,
                 "the output vector does not match the matrix");
  if (!rc) rc = fe_csr_launch(M, M->spmv, &x->buf, &(*y)->buf, &seconds);
  fe_vector_free(xc);
  if (rc) {
    if (made) {
      fe_vector_free(*y);
      *y = NULL;
    }
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char why[96];
  if (M->format == FE_FORMAT_SELL)
    snprintf(why, sizeof why, "SELL-%d-%d, one item per row, %.1f%% of the slots padding",
             M->chunk, M->sigma, 100.0 * (double)(M->nslots - M->nnz) / (double)M->nslots);
  else if (M->format == FE_FORMAT_CUSPARSE)
    snprintf(why, sizeof why, "cuSPARSE's product (cusparseSpMV) on the CSR arrays");
  else
    snprintf(why, sizeof why, "%s CSR, %d item%s per row", M->lanes > 1 ? "vector" : "scalar",
             M->lanes, M->lanes > 1 ? "s" : "");
  fe_report_begin(rep, "spmv", M->be, M->prec, "csr", why);
  rep->ndofs = M->n;
  fe_csr_counts(M, &rep->flops, &rep->bytes);
  rep->seconds = seconds;
  rep->transfer_seconds = transfer;
  rep->launches = 1;
  return fe_perf_predict(M->be, M->prec, rep);
}

void fe_csr_counts(const fe_csr *M, double *flops, double *bytes)
{
  double w = (double)fe_precision_size(M->prec), n = M->n;
  *flops = 2.0 * (double)M->nnz;
  if (M->format == FE_FORMAT_SELL) /* every slot, the chunk starts, the permutation */
    *bytes = (double)M->nslots * (w + 4) + (M->nchunks + 1) * 4.0 + n * 4 + 2 * n * w;
  else
    *bytes = (double)M->nnz * (w + 4) + (n + 1) * 4 + 2 * n * w;
}

const char *fe_csr_format_name(const fe_csr *M)
{
  return M->format == FE_FORMAT_SELL ? "sell" : M->format == FE_FORMAT_CUSPARSE ? "cusparse" : "csr";
}

int fe_csr_get(const fe_csr *M, int **rowptr, int **cols, double **vals)
{
  size_t nz = (size_t)M->nnz, w = fe_precision_size(M->prec);
  *rowptr = *cols = NULL, *vals = NULL;
  FE_CHECK(fe_memory_check(sizeof(int) * ((size_t)M->n + 1) + (sizeof(int) + sizeof(double) + w) *
                           nz, "the matrix of %d rows and %lld nonzeros on the host", M->n, M->nnz));
  *rowptr = malloc(sizeof(int) * ((size_t)M->n + 1));
  *cols = malloc(sizeof(int) * (nz + 1));
  *vals = malloc(sizeof(double) * (nz + 1));
  void *raw = malloc(w * (nz + 1));
  int rc = 0;
  if (!*rowptr || !*cols || !*vals || !raw)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the matrix");
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->rowptr, 0, sizeof(int) * ((size_t)M->n + 1), *rowptr);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->cols, 0, sizeof(int) * nz, *cols);
  if (!rc) rc = M->be->ops->read(M->be->impl, &M->vals, 0, w * nz, raw);
  for (size_t i = 0; !rc && i < nz; i++)
    (*vals)[i] = M->prec == FE_DOUBLE ? ((double *)raw)[i] : ((float *)raw)[i];
  free(raw);
  if (rc) {
    free(*rowptr);
    free(*cols);
    free(*vals);
    *rowptr = *cols = NULL;
    *vals = NULL;
  }
  return rc;
}

int fe_csr_export_mtx(const fe_csr *M, const char *path)
{
  int *rowptr, *cols;
  double *vals;
  FE_CHECK(fe_csr_get(M, &rowptr, &cols, &vals));
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f) {
    rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  } else {
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% written by felab\n");
    fprintf(f, "%d %d %lld\n", M->n, M->n, M->nnz);
    for (int i = 0; i < M->n; i++)
      for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
        fprintf(f, "%d %d %.17g\n", i + 1, cols[k] + 1, vals[k]);
    if (fclose(f)) rc = fe_error_set(FE_ERR_IO, __FILE__, __LINE__, __func__, "cannot write '%s'", path);
  }
  free(rowptr);
  free(cols);
  free(vals);
  return rc;
}

void fe_csr_free(fe_csr *M)
{
  if (!M) return;
  fe_buffer *bufs[] = {&M->rowptr, &M->cols, &M->vals, &M->cstart, &M->perm, &M->scols, &M->svals};
  for (int i = 0; i < 7; i++)
    if (bufs[i]->ptr) M->be->ops->release(M->be->impl, bufs[i]);
  if (M->sparse) M->be->ops->sparse_free(M->be->impl, M->sparse);
  if (M->mod) M->be->ops->module_free(M->be->impl, M->mod);
  free(M);
}
