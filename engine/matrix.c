/* felab matrices: element matrices of the Jacobian, their assembly into CSR on the device,
 * and the CSR product (kernels: engine/kernels/elemat.knl).
 *
 * Element matrices reuse the data of strategy "transpose" (its stored cell order, geometric
 * factors per point, per-cell constants, fields) and compile one more template against the
 * same physics: the linearization fe_df applied to each trial basis function in turn. The
 * assembled matrix has its pattern from the dof map, built once on the host, and its values
 * from the element matrices, added by the device with atomics at positions found by binary
 * search in the sorted rows. */
#include "engine/matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen.h"
#include "engine/error.h"
#include "engine/strategy.h"

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
 * other kernels' callers: reg_nojac with r's block). */
static int elemat_source(const fe_realization *r, int lanes, const elemat_shape *sh, char **src)
{
  fe_kernel_spec s;
  char defines[1536];
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.template_name = "elemat";
  int len = snprintf(defines, sizeof defines,
                     "#define EM_LANES %d /* items per row of fe_spmv */\n", lanes);
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
               "#define GM_REG %d /* an item per tile, its sums in registers over the chunks */\n",
               sh->gv, sh->gg, sh->qc, sh->ti, sh->tj, sh->reg);
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
  int cpu = !strcmp(r->be->name, "cpu");
  int fit = cpu || nq < 8 ? nq : 8; /* the points a chunk must hold while the block grows */
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
  sh->reg = !cpu && tiles <= r->be->info.max_group;
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
    sh->shared = (size_t)r->block * V->elem.nbasis * (V->ncomp + 3) * w;
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
  int rc = r->be->ops->compile(r->be->impl, src, &r->emodule[v], seconds, &cached);
  free(src);
  FE_CHECK(rc);
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->emodule[v],
                              elemat_variants[v].gemm ? "fe_elemat_gemm" : "fe_elemat", &r->elemat[v]));
  r->eblock[v] = sh->block;
  return 0;
}

/* Counted flops of the element matrix of one cell, from the loops of elemat.knl. reg: per
 * (column, point) the state's value and gradient, x, the fields, the trial gradient, the
 * physics, the pull-back and the column's test; jac adds the map's factors per point (once
 * on affine cells). shm: per part and point the cell's data once (x, the state's sums, with
 * jac the Jacobian's sums), per (column, point) the state's gradient, with jac the
 * factors' inverse, the fields, trial, physics and pull-back, per (entry, point) the test. */
static double elemat_flops_per_cell(const fe_realization *r, const fe_kernel_spec *s,
                                    const elemat_shape *sh)
{
  const fe_space *V = r->A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, dim = V->elem.dim, n = nb * nc;
  double nq = s->quad->npoints, maps = s->geo_affine ? 1 : nq; /* points where jac maps */
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
    return n * (nq * (x + fe_codegen_eval_flops(nb, dim, nc, need.need_u) + col + n * test) +
                (nojac ? 0 : maps * fe_codegen_map_flops(nb, dim)));
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
    if (!strcmp(strategy, "tensor")) { /* engine/tensor.c */
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
  if (elemat_variants[v].shm || elemat_variants[v].gemm)
    oo.block = 0; /* an asked block is the shm or gemm kernel's own */
  double t0 = fe_clock(), compile_s = 0, transfer = 0;
  fe_realization *r;
  char why[160];
  elemat_shape sh;
  FE_CHECK(fe_operator_realize(A, &oo, &r, why, sizeof why));
  /* gemm_mma's phase 3 is inline PTX (mma.m8n8k4.f64): NVRTC and a double real only */
  FE_ASSERT(!elemat_variants[v].mma || (!strcmp(r->be->name, "cuda") && r->prec == FE_DOUBLE),
            FE_ERR_ARG, "element matrices: variant gemm_mma runs on fp64 tensor cores, on "
            "cuda in double only (got %s, %s); use gemm", r->be->name,
            r->prec == FE_DOUBLE ? "double" : "single");
  /* written and compiled for sm_90 but not yet run on a GPU: refused until its check (the
   * cuda branch of tests/scripts/test_elemat_variants.lua, run by scripts/gpu-test.sh with
   * FELAB_UNVERIFIED=1) has passed on one */
  const char *unverified = getenv("FELAB_UNVERIFIED");
  FE_ASSERT(!elemat_variants[v].mma || (unverified && !strcmp(unverified, "1")),
            FE_ERR_UNAVAILABLE, "element matrices: variant gemm_mma (fp64 tensor cores) has "
            "not been checked on a GPU yet; use gemm (FELAB_UNVERIFIED=1 runs it anyway)");
  /* No variant asked: gemm on a GPU from N = 20 (H100, fp64, one call: P3 tets 0.50 against
   * reg_jac's 1.14 ms, P4 1.64 against 5.52, Q3 1.79 against 22.0; below N = 20 reg_* leads),
   * reg_nojac on a CPU (this machine, one run: 1.3-1.8x ahead of gemm at P2..P4, Q2..Q4) */
  if (!variant && r->be->info.is_gpu && V->elem.nbasis * V->ncomp >= 20)
    while (!elemat_variants[v].gemm) v++;
  FE_CHECK(elemat_shape_of(r, o, v, &sh));
  FE_CHECK(elemat_module(r, &sh, &compile_s));
  int n = V->elem.nbasis * V->ncomp, nc = V->mesh->ncells;
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
    long long geo_n = (long long)r->npad * (A->geo_affine ? 1 : A->quad[FE_ACTION_APPLY].npoints);
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
  double w = (double)fe_precision_size(r->prec), npts = A->geo_affine ? 1 : s.quad->npoints, ff, fb;
  fe_codegen_field_counts(&s, &ff, &fb);
  rep->flops = nc * elemat_flops_per_cell(r, &s, &sh);
  /* the matrices written; the factors (nojac) or the coordinates (jac, or x) read; the cell
   * map and ids, the state, the per-cell constants and the fields read */
  rep->bytes = (double)nc * n * n * w +
               (elemat_variants[v].nojac ? nc * npts * fe_geo_stride(V->elem.dim) * w : 0) +
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

/* ---- assembly ---- */

/* The CSR pattern of V's dofs: row i couples to every dof of the cells that hold i's node,
 * sorted; a fixed row holds its diagonal only and no free row holds a fixed column. Built in
 * parallel over the nodes from the node -> cells map: each thread marks the distinct
 * neighbours of its nodes in its own array, once to count the rows, once to fill them.
 * Kd or Kf (the element matrices in host memory, double or float; both NULL: values left to
 * the device): the values are summed row by row as the rows are filled, from the cells of
 * each row's node in cell order, so no add is shared and the sums are reproducible. */
static int build_pattern(const fe_space *V, const int *fixed, const double *Kd, const float *Kf,
                         int **rowptr_out, int **cols_out, double **vals_out)
{
  const int host_vals = Kd || Kf, n = V->elem.nbasis * V->ncomp;
  double *vals = NULL;
  const int nn = V->nnodes, nb = V->elem.nbasis, nc = V->ncomp, ncell = V->mesh->ncells;
  const int nd = V->ndofs, *cn = V->cell_nodes;
  const size_t nent = (size_t)ncell * nb;
  int *start = calloc((size_t)nn + 1, sizeof(int)), *list = malloc(sizeof(int) * (nent + 1));
  int *nfree = malloc(sizeof(int) * ((size_t)nn + 1)); /* free components per node */
  long long *cnt = malloc(sizeof(long long) * ((size_t)nn + 1)); /* free neighbour dofs */
  int *rowptr = malloc(sizeof(int) * ((size_t)nd + 1)), *cols = NULL, rc = 0, maxdeg = 0;
  if (!start || !list || !nfree || !cnt || !rowptr) {
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the "
                      "matrix pattern");
    goto done;
  }
  for (size_t i = 0; i < nent; i++) start[cn[i] + 1]++;
  for (int a = 0; a < nn; a++) {
    start[a + 1] += start[a];
    if (start[a + 1] - start[a] > maxdeg) maxdeg = start[a + 1] - start[a];
  }
  { /* the cells of each node, in cell order (a sequential fill keeps it deterministic) */
    int *fill = malloc(sizeof(int) * ((size_t)nn + 1));
    if (!fill) {
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
      goto done;
    }
    memcpy(fill, start, sizeof(int) * (size_t)nn);
    for (size_t i = 0; i < nent; i++) list[fill[cn[i]]++] = (int)(i / (size_t)nb);
    free(fill);
  }
#pragma omp parallel for schedule(static)
  for (int a = 0; a < nn; a++) {
    int f = 0;
    for (int k = 0; k < nc; k++) f += !fixed[a * nc + k];
    nfree[a] = f;
  }
  for (int pass = 0; pass < 2 && !rc; pass++) {
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
      int *mark = malloc(sizeof(int) * ((size_t)nn + 1));
      int *nbr = malloc(sizeof(int) * ((size_t)maxdeg * nb + 1)); /* a node's neighbours */
      /* with values: each neighbour's first free column in the row, by node */
      int *at = pass && host_vals ? malloc(sizeof(int) * ((size_t)nn + 1)) : NULL;
      if (!mark || !nbr || (pass && host_vals && !at)) failed = 1;
      else
        for (int a = 0; a < nn; a++) mark[a] = -1;
#pragma omp for schedule(dynamic, 1024)
      for (int a = 0; a < nn; a++) {
        if (failed) continue;
        int m = 0;
        long long c = 0;
        for (int t = start[a]; t < start[a + 1]; t++) {
          const int *nodes = cn + (size_t)list[t] * nb;
          for (int b = 0; b < nb; b++)
            if (mark[nodes[b]] != a) {
              mark[nodes[b]] = a;
              nbr[m++] = nodes[b];
              c += nfree[nodes[b]];
            }
        }
        if (!pass) {
          cnt[a] = c;
          continue;
        }
        for (int i = 1; i < m; i++) { /* insertion sort: rows are short */
          int v = nbr[i], j = i - 1;
          while (j >= 0 && nbr[j] > v) nbr[j + 1] = nbr[j], j--;
          nbr[j + 1] = v;
        }
        for (int k = 0; k < nc; k++) {
          int gi = a * nc + k, *row = cols + rowptr[gi];
          if (fixed[gi]) {
            row[0] = gi;
            if (host_vals) vals[rowptr[gi]] = 1; /* the identity's row */
            continue;
          }
          for (int i = 0; i < m; i++) {
            if (at) at[nbr[i]] = (int)(row - (cols + rowptr[gi]));
            for (int kk = 0; kk < nc; kk++)
              if (!fixed[nbr[i] * nc + kk]) *row++ = nbr[i] * nc + kk;
          }
          if (!at) continue;
          double *v = vals + rowptr[gi];
          for (int t = start[a]; t < start[a + 1]; t++) { /* row (b a, k) of each cell of a */
            const size_t c = (size_t)list[t];
            const int *nodes = cn + c * nb;
            int ba = 0;
            while (nodes[ba] != a) ba++;
            const size_t krow = (c * n + (size_t)ba * nc + k) * n;
            for (int b = 0; b < nb; b++) {
              int p = at[nodes[b]];
              for (int kk = 0; kk < nc; kk++) {
                if (fixed[nodes[b] * nc + kk]) continue;
                v[p++] += Kd ? Kd[krow + (size_t)b * nc + kk] : Kf[krow + (size_t)b * nc + kk];
              }
            }
          }
        }
      }
      free(mark);
      free(nbr);
      free(at);
    }
    if (failed) {
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the "
                        "matrix pattern");
      break;
    }
    if (!pass) { /* row lengths: a fixed row 1, a free row its node's free neighbour dofs */
      long long nz = 0;
      for (int gi = 0; gi < nd; gi++) {
        rowptr[gi] = (int)nz;
        nz += fixed[gi] ? 1 : cnt[gi / nc];
        if (nz > 2147483647LL) {
          rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "the matrix has more "
                            "than 2^31 nonzeros (int indices)");
          break;
        }
      }
      if (rc) break;
      rowptr[nd] = (int)nz;
      cols = malloc(sizeof(int) * ((size_t)nz + 1));
      vals = calloc((size_t)nz + 1, sizeof(double)); /* the device's start when it fills */
      if (!cols || !vals) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of "
                                            "host memory for %lld nonzeros", nz);
    }
  }
done:
  free(start);
  free(list);
  free(nfree);
  free(cnt);
  if (rc) {
    free(rowptr);
    free(cols);
    free(vals);
    return rc;
  }
  if (!host_vals)
    for (int i = 0; i < nd; i++)
      if (fixed[i]) vals[rowptr[i]] = 1; /* the identity's row; the device adds the rest */
  *rowptr_out = rowptr;
  *cols_out = cols;
  *vals_out = vals;
  return 0;
}

int fe_space_cell_colors(const fe_space *V, int **order, int **start, int *ncolors)
{
  *order = *start = NULL;
  *ncolors = 0;
  int nc = V->mesh->ncells, *color, n;
  FE_CHECK(fe_mesh_color_groups(V->mesh, V->cell_nodes, V->elem.nbasis, 1, &color, &n));
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
  int rc = M->be->ops->compile(M->be->impl, src, &M->mod, seconds, &cached);
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
  int rc = fe_upload_ints(be, cstart, (size_t)M->nchunks + 1, &M->cstart);
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
  fe_elemats *K = NULL;
  fe_report krep;
  FE_CHECK(fe_element_matrices(A, at, o, NULL, NULL, &K, &krep));
  fe_action_opts oo;
  if (o) oo = *o;
  else fe_action_opts_default(&oo);
  oo.strategy = "transpose";
  fe_realization *r;
  char why[160];
  int rc = fe_operator_realize(A, &oo, &r, why, sizeof why);
  int *fixed = calloc((size_t)nd + 1, sizeof(int)), *rowptr = NULL, *cols = NULL;
  double *vals = NULL;
  fe_csr *M = calloc(1, sizeof *M);
  fe_buffer bcells = {0}, bfixed = {0}, border = {0};
  fe_kernel *kasm = NULL;
  int *order = NULL, *cstart = NULL, ncolors = 0;
  double compile_s = krep.compile_seconds, seconds = 0;
  if (!rc && (!fixed || !M)) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (int i = 0; !rc && i < fe_operator_ndirichlet(A); i++) fixed[A->dir_nodes[i]] = 1;
  /* The fill: where the element matrices are in host memory (the cpu) each row sums its
   * own cells' entries as the pattern is built ("nodes", measured fastest there); else the
   * device adds them, atomically (the default) or color by color (measured 2.4x slower on
   * the cpu, P1 48^3: a color's cells are spread over the mesh, so each launch walks all of
   * the values). */
  void *kh = !rc && r->be->ops->host ? r->be->ops->host(r->be->impl, &K->vals) : NULL;
  if (scatter == FE_SCATTER_AUTO) scatter = kh ? FE_SCATTER_NODES : FE_SCATTER_ATOMIC;
  if (!rc && scatter == FE_SCATTER_NODES && !kh)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "assemble: scatter = \"nodes\" "
                      "(each row sums its cells) runs where the element matrices are in host "
                      "memory (the cpu); on %s use \"atomic\" or \"color\"", r->be->name);
  int by_rows = scatter == FE_SCATTER_NODES;
  double tp = fe_clock();
  if (!rc) rc = build_pattern(V, fixed, by_rows && r->prec == FE_DOUBLE ? kh : NULL,
                              by_rows && r->prec == FE_FLOAT ? kh : NULL, &rowptr, &cols, &vals);
  if (by_rows) seconds = fe_clock() - tp; /* the fill is the pattern's second pass */
  if (!rc) {
    int lanes = oo.lanes > 0 ? oo.lanes : r->be->info.is_gpu ? 4 : 1; /* measured, H100 P1 */
    /* format auto: SELL on a GPU unless CSR's lanes are asked (H100, P1 7.19M dofs: 0.491
     * against vector CSR's 0.566 ms, 97% against 83% of the copy bandwidth), CSR on a CPU
     * (this 2-core machine, P1 275k dofs: 0.97 against SELL-8's 1.12 ms) */
    if (format == FE_FORMAT_AUTO)
      format = r->be->info.is_gpu && !asked ? FE_FORMAT_SELL : FE_FORMAT_CSR;
    *M = (fe_csr){.be = r->be, .prec = r->prec, .n = nd, .nnz = rowptr[nd], .lanes = lanes,
                  .format = format,
                  .nslots = rowptr[nd]};
    if (M->format == FE_FORMAT_SELL) {
      /* C: a warp on a GPU (32; two chunks to an AMD wavefront), so a chunk's items read
       * consecutive slots in one coalesced step; 8 on the cpu (a vector of doubles). sigma:
       * 8 chunks, enough rows to group the short ones (boundary and constrained rows) while
       * keeping a chunk's rows, and so its reads of x, as near as CSR's neighbours. */
      M->chunk = chunk ? chunk : r->be->info.is_gpu ? 32 : 8;
      M->sigma = sigma ? sigma : 8 * M->chunk;
    }
  }
  if (!rc) rc = fe_upload_ints(r->be, rowptr, (size_t)nd + 1, &M->rowptr);
  if (!rc) rc = fe_upload_ints(r->be, cols, (size_t)M->nnz, &M->cols);
  if (!rc) rc = fe_upload_reals(r->be, r->prec, vals, (size_t)M->nnz, &M->vals);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, V->cell_nodes, (size_t)nc * nb, &bcells);
  if (!rc && !by_rows) rc = fe_upload_ints(r->be, fixed, (size_t)nd, &bfixed);
  if (!rc && scatter == FE_SCATTER_COLOR) rc = fe_space_cell_colors(V, &order, &cstart, &ncolors);
  if (!rc && order) rc = fe_upload_ints(r->be, order, (size_t)nc, &border);
  if (!rc) {
    double cs;
    rc = csr_module(M, r, &cs);
    compile_s += cs;
  }
  if (!rc) rc = r->be->ops->kernel(r->be->impl, M->mod, "fe_assemble", &kasm);
  double setup = fe_clock() - t0 - compile_s - seconds;
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
  free(order);
  free(cstart);
  if (border.ptr) r->be->ops->release(r->be->impl, &border);
  if (bcells.ptr) r->be->ops->release(r->be->impl, &bcells);
  if (bfixed.ptr) r->be->ops->release(r->be->impl, &bfixed);
  free(fixed);
  free(rowptr);
  free(cols);
  free(vals);
  if (rc) {
    fe_elemats_free(K);
    fe_csr_free(M);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  char how[160];
  if (by_rows) snprintf(how, sizeof how, "element matrices (reg_nojac), then the pattern built "
                        "on the host, each row summing its cells' entries (timed together)");
  else if (ncolors) snprintf(how, sizeof how, "element matrices (reg_nojac), then plain adds color "
                             "by color (%d colors) into a pattern built on the host", ncolors);
  else snprintf(how, sizeof how, "element matrices (reg_nojac), then atomic adds into a pattern "
                "built on the host");
  if (M->format == FE_FORMAT_SELL)
    snprintf(how + strlen(how), sizeof how - strlen(how), "; SELL-%d-%d, %.1f%% padding",
             M->chunk, M->sigma, 100.0 * (double)(M->nslots - M->nnz) / (double)M->nslots);
  fe_report_begin(rep, "assemble", r->be, r->prec, "quadrature", how);
  fe_report_operator(rep, A, FE_ACTION_APPLY);
  double w = (double)fe_precision_size(r->prec), nk = (double)nc * K->n * K->n;
  /* the adds, then the element matrices' own work */
  rep->flops = nk + krep.flops;
  rep->bytes = nk * w + (double)M->nnz * (w + 4) + (nd + 1) * 4.0 + nc * nb * 4.0 + krep.bytes;
  if (M->format == FE_FORMAT_SELL) /* the fill: CSR and the layout read, the slots written */
    rep->bytes += (double)M->nnz * (w + 4) + (nd + 1) * 4.0 + nd * 4.0 +
                  (M->nchunks + 1) * 4.0 + (double)M->nslots * (w + 4);
  rep->seconds = seconds + sell_s + krep.seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = krep.transfer_seconds;
  rep->setup_seconds = setup + sell_host - krep.seconds;
  rep->launches = 1 + (by_rows ? 0 : ncolors ? ncolors : 1) + (M->format == FE_FORMAT_SELL);
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
