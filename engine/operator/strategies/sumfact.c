/* Strategy "sumfact": sum factorization on tensor cells (quads, hexes), the spectral-hex
 * kernels of Remacle, Gandham and Warburton (engine/codegen/kernels/sumfact.knl). The basis of a Qp
 * cell is a product of 1D Lagrange polynomials, so its values and gradients at a tensor rule's
 * points come from 1D contractions, one direction at a time: O(p^(d+1)) work per cell instead
 * of the O(p^(2d)) of a kernel with dense tables, and only 1D tables (B1, G1, DQ: (p+1) x q
 * each). The pointwise physics runs at the points unchanged. The geometry is stored per point
 * (Jinv and det J; one set a cell when every cell is affine) or recomputed from the cell's
 * corners (straight cells: the paper's r' kernel). The diagonal is sum-factorized too: per point the pulled-back linearization, then
 * 1D contractions with products of the 1D tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategies/sumfact-count.h"
#include "engine/operator/strategy.h"
#include "engine/core/strbuf.h"

#define SUMFACT_MAX_ORDER 8   /* Q1..Q8 */
#define SUMFACT_MAX_POINTS 16 /* points per direction (Q7 p-Laplacian: 15) */
#define SUMFACT_MAX_POINTS_SMALL_LOCAL 12 /* where large local arrays are not built (OpenCL) */

typedef struct sumfact_data {
  fe_buffer cells;  /* stored cells x NB node ids, lexicographic (x fastest) */
  int vertices;     /* geometry recomputed from the corners (else stored) */
  size_t dynamic[FE_NACTIONS]; /* an action's bytes of dynamic shared memory (above the
                                * static limit), else 0: each its own, so that the apply does
                                * not hold the residual's coordinates' arrays */
  int pad0, pad1;   /* stored cells [pad0, pad1) are padding */
  int nodesum;      /* scatter "nodes": an E-vector, then fe_nodesum (else atomic adds) */
  fe_buffer evec;   /* nodesum: stored cells x NC x NB reals */
  fe_buffer noff, nidx; /* nodesum: node n's entries idx[off[n] .. off[n + 1]) = s NC NB + l */
  fe_kernel *sum[FE_NACTIONS]; /* nodesum: fe_nodesum of each action's module */
} sumfact_data;

#define SUMFACT_SUM_ITEMS 128 /* nodes per group of fe_nodesum */

/* Points per direction of a tensor rule. */
static int points_per_direction(const fe_quadrature *Q, int dim)
{
  int n = (int)lround(pow((double)Q->npoints, 1.0 / dim));
  while (n > 1 && (int)lround(pow(n, dim)) > Q->npoints) n--;
  return n;
}

static int sumfact_applies(const fe_operator *A, const fe_backend *be, fe_precision prec,
                           char *why, size_t n)
{
  (void)prec;
  const fe_element *el = &A->V->elem;
  if (el->cell != FE_CELL_HEX && el->cell != FE_CELL_QUAD) {
    snprintf(why, n, "sum factorization needs tensor cells (quads, hexes); these are %ss",
             fe_cell_name(el->cell));
    return 1;
  }
  if (el->order > SUMFACT_MAX_ORDER) {
    snprintf(why, n, "%s is above Q%d, the highest order sumfact compiles", A->V->name,
             SUMFACT_MAX_ORDER);
    return 1;
  }
  for (int a = 0; a < FE_NACTIONS; a++) {
    const fe_quadrature *Q = &A->quad[a];
    int q1 = points_per_direction(Q, el->dim);
    if (strcmp(Q->name, "Gauss") && strcmp(Q->name, "GLL")) {
      snprintf(why, n, "the %s rule is not a tensor Gauss or GLL rule (%s)",
               fe_action_name((fe_action)a), Q->name);
      return 1;
    }
    /* OpenCL keeps 12 (large_local 0): PoCL crashed (a segmentation fault, the session lost)
     * on the Q7 p-Laplacian's 15 points, whose group holds 135 KB of local memory a cell */
    const int most = be->info.large_local ? SUMFACT_MAX_POINTS : SUMFACT_MAX_POINTS_SMALL_LOCAL;
    if (q1 > most) {
      snprintf(why, n, "the %s rule has %d points per direction, above %d (%s)",
               fe_action_name((fe_action)a), q1, most, be->name);
      return 1;
    }
    if (q1 < el->order + 1) { /* the derivatives at the points come from the values there */
      snprintf(why, n, "the %s rule has %d points per direction, fewer than %s's %d nodes: "
               "sumfact differentiates at the points through their values, which needs as many",
               fe_action_name((fe_action)a), q1, A->V->name, el->order + 1);
      return 1;
    }
  }
  return 0;
}

/* What the template's loops depend on, for action a with or without vertices (folded: the
 * apply reads folded words, engine/operator/qdata.h). */
static fe_sumfact_shape shape_folded(const fe_operator *A, fe_precision prec, fe_action a,
                                     int vertices, int folded)
{
  const fe_element *el = &A->V->elem;
  folded = folded && a == FE_ACTION_APPLY;
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[a], .action = a, .prec = prec,
                      .folded = folded};
  fe_action_needs n = fe_codegen_needs(&s);
  double ff, fb;
  fe_codegen_field_counts(&s, &ff, &fb);
  int q1 = points_per_direction(&A->quad[a], el->dim);
  int coll = q1 == el->order + 1 && !strcmp(A->quad[a].name, "GLL") && el->kind == FE_NODES_GLL;
  fe_sumfact_shape sh = {.dim = el->dim, .nc = A->V->ncomp, .p1 = el->order + 1, .q1 = q1,
                         .collocated = coll, .vertices = vertices,
                         .affine = A->geo_affine, .jacobian = n.jacobian,
                         .diagonal = a == FE_ACTION_DIAGONAL, .need_u = n.need_u,
                         .need_x = n.need_x, .x_corners = n.need_x && !A->V->curved,
                         .has_f0 = n.has_f0, .need_f = n.need_f,
                         .phys_flops = n.phys_flops, .phys_nonfma = n.phys_nonfma,
                         .field_flops = ff};
  if (folded) {
    fe_qdata_layout L;
    char why[160];
    fe_qdata_layout_of(A->pde, el->dim, &L, why, sizeof why);
    sh.folded = 1;
    sh.vertices = 0;
    sh.qd_flops = fe_qdata_apply_flops(&L);
    sh.phys_flops = sh.phys_nonfma = 0;
  }
  return sh;
}

static fe_sumfact_shape shape_of(const fe_operator *A, fe_precision prec, fe_action a, int vertices)
{
  return shape_folded(A, prec, a, vertices, 0);
}

/* Cells per work group: on the cpu 8 (SIMD lanes are cells); on a GPU as many as make about
 * 128 items a cell's plane of whole warps apart, then as many more as the same warps hold (a
 * plane of 9 items, Q2's: 7 cells in 2 warps, not 4, whose 36 items left 28 of 64 lanes idle;
 * on the H200 Q2's applies ran 1.26-1.48x faster, docs/benchmarks.md); halved until the
 * group's shared arrays fit. */
static int default_block(const fe_operator *A, const fe_backend *be, fe_precision prec)
{
  int block;
  if (!be->info.is_gpu) {
    block = 8;
  } else {
    fe_sumfact_shape sh = shape_of(A, prec, FE_ACTION_APPLY, 0);
    const int plane = fe_sumfact_group_items(&sh, 1), per = sh.p1 > sh.q1 ? sh.p1 : sh.q1;
    block = plane >= 128 ? 1 : 128 / plane;
    const int fill = fe_sumfact_group_items(&sh, block) / (per * per);
    if (fill > block) block = fill;
  }
  return block;
}

/* The cpu: whether the template pads the group's arrays (SF_PADDED, sumfact.knl's SF_PAD: an
 * entry every 4 KB), block cells of w bytes an entry: where an entry is a whole 64-byte line
 * and a layer of entries (P1 x P1, Q1 x Q1 or P1 x Q1) is a multiple of 2 KB, whose layers
 * would otherwise fall in the same L1 sets (8 a side: Q7). */
static int sumfact_padded(const fe_sumfact_shape *sh, int block, double w)
{
  if (block * w < 64) return 0;
  const int half = (int)(2048 / (block * w)), p1 = sh->p1, q1 = sh->q1;
  return (p1 * p1) % half == 0 || (q1 * q1) % half == 0 || (p1 * q1) % half == 0;
}

/* The cpu: of a group's contractions (inflight, over ncells), the flops at the rate of the
 * loop the calibration times (fe_fma_padded: a load and the padding's integer arithmetic a
 * multiply-add), where an entry is a whole line (8 cells in double; w: a real's bytes). There
 * the template pads the group's arrays an entry every 4 KB where a layer of them is a multiple
 * of 2 KB (SF_PADDED: 8 nodes or points a side, as Q7; its layers 4 KB apart fell in the same
 * L1 sets), and a contraction array longer than 4 KB keeps the padding's arithmetic in every
 * operand's address: all of them. Elsewhere the column walks' derivatives along x and y
 * (two loads a multiply-add: its table entry moves with the item) are that loop's kind, and
 * the interpolations (the table's row hoisted, one load a multiply-add) go at the vectorized
 * rate: on the Ice Lake VM perf's samples a phase put Q5's walks at 28 GF/s, its
 * interpolations at 49, the FMA loop at 52 and fe_fma_padded at 24 (docs/model.md). */
static double padded_loop_flops(const fe_sumfact_shape *sh, int block, double w, double ncells,
                               double inflight)
{
  if (block * w < 64) return 0;
  if (sumfact_padded(sh, block, w) && fe_sumfact_contraction_words(sh) / 2 > 4096 / (block * w))
    return inflight;
  return fmin(inflight, ncells * fe_sumfact_walk_flops_per_cell(sh));
}

/* The counts of action a on the whole mesh; ahead: the folded words are asked for a group
 * ahead through its phases (the cpu's column layout, r->qd_column). */
static void sumfact_counts(const fe_operator *A, fe_precision prec, fe_action a, int vertices,
                           int shared, int nodesum, int block, const fe_device_info *in,
                           int folded, int ahead, fe_work *wk)
{
  const int gpu = in->is_gpu;
  const fe_space *V = A->V;
  folded = folded && a == FE_ACTION_APPLY;
  vertices = vertices && !folded;
  fe_sumfact_shape sh = shape_folded(A, prec, a, vertices, folded);
  fe_kernel_spec s = {.V = V, .pde = A->pde, .quad = &A->quad[a], .action = a, .prec = prec,
                      .geo_affine = A->geo_affine, .geo_shared = shared && !vertices,
                      .folded = folded};
  double w = (double)fe_precision_size(prec), ncells = V->mesh->ncells;
  wk->flops = ncells * fe_sumfact_flops_per_cell(&sh);
  wk->vec_flops = ncells * fe_sumfact_vec_flops_per_cell(&sh);
  wk->nonfma = ncells * fe_sumfact_nonfma_per_cell(&sh);
  if (A->geo_affine && !vertices && !folded) fe_group_factor_work(&s, wk); /* SF_GROUP_GEOMETRY */
  /* the cell map, then the geometry: stored factors (per point, per cell when affine, per
   * class when shared), or the corners' coordinates, or the folded words a point */
  double geo = folded ? fe_qdata_bytes(&s)
               : vertices ? V->mesh->nvertices * 3 * w : fe_geometry_bytes(&s);
  wk->bytes = fe_codegen_common_bytes(&s, A->ndir) + ncells * V->elem.nbasis * 4.0 + geo +
              (sh.need_x ? V->nnodes * 3 * w : 0);
  /* the cpu: read in the quadrature phase alone, from memory; or asked for ahead into L2 (a
   * third in each of three phases of the group before: they stream in beside the loops) and
   * read from there */
  wk->phase_bytes = folded && !ahead ? geo : 0;
  wk->phase_l2_bytes = folded && ahead ? geo : 0;
  /* the cpu: a group's cells are the lanes of its contractions, each multiply-add reading
   * its operand's word from the group's arrays (the model: from L2 where they outgrow L1) */
  if (!gpu && block > 0) {
    wk->array_bytes = fe_sumfact_contraction_words(&sh) * block * w;
    wk->operand_bytes = ncells * fe_sumfact_contraction_flops_per_cell(&sh) / 2 * w;
  }
  /* scatter "nodes": the E-vector written and read back, its index and the node offsets */
  if (nodesum) wk->bytes += ncells * V->elem.nbasis * (2.0 * V->ncomp * w + 4) + V->nnodes * 4.0;
  /* shared memory (on GPUs by warps: one with few items pays a whole wavefront); the
   * gather's loads of the fields at the cells' nodes (each node read by every cell around it,
   * mostly from L2); one atomic add per (cell, node, component) */
  double part[3];
  wk->shared_bytes = ncells * fe_sumfact_shared_phases(&sh, (int)w, gpu ? block : 0, part);
  int fields = (sh.need_u ? V->ncomp : 0) + (sh.jacobian && !sh.diagonal ? V->ncomp : 0);
  wk->l2_bytes = ncells * V->elem.nbasis * (fields * w + 4.0);
  /* the values gathered through the cell map (fields; with vertices the corners) and added
   * back (scatter "nodes": summed through the node map), one at a time */
  wk->indexed = ncells * (V->elem.nbasis * (fields + V->ncomp) +
                          (vertices ? (1 << V->elem.dim) * 3.0 : 0));
  /* each node's first touch a call; the cpu's walk finds the rest in L1 */
  wk->indexed_first = (double)V->nnodes * (fields + V->ncomp) +
                      (vertices ? V->mesh->nvertices * 3.0 : 0);
  /* the cpu: factors stored a point (not affine, not a class's) are read across a group's
   * lanes (cells) a value at a time, from lines a cell's points apart: each a gather from
   * beyond L1, as the indexed loops' first touches */
  if (!gpu && !folded && !vertices && !A->geo_affine && !shared) {
    double n = ncells * (double)fe_geo_stride(V->elem.dim) * (double)A->quad[a].npoints;
    wk->indexed += n;
    wk->indexed_first += n;
  }
  wk->atomics = nodesum ? 0 : ncells * V->elem.nbasis * V->ncomp;
  /* a group's path: its block number and cell map, the gather (with vertices, the corners
   * beside it), the interpolations, then per round (the action: one; the diagonal: one per
   * component) the quadrature phase reading its stored factors, the transposed passes and
   * the scatter reading the cell map again. Where the factors are a point's (stored or
   * folded, not a cell's nor a class's) and the column's walk stays a loop (cuda), each of
   * its points' reads waits for the point before's work: a trip each (on the H200 the folded
   * applies on distorted boxes, Q2-Q7, ran 0.78-0.94 of their prediction with one trip a
   * round, their uniform twins 0.88-1.11) */
  double rounds = sh.diagonal ? V->ncomp : 1, interp = sh.collocated ? 0 : 2;
  const int per_point = folded || (!vertices && !A->geo_affine && !shared);
  double walk = per_point && in->walks_rolled && V->elem.dim == 3 ? sh.q1 : 1;
  wk->dram_trips = 1 + (vertices ? 0 : rounds * walk);
  wk->l2_trips = 2 + rounds;
  wk->phases = 1 + interp + rounds * (sh.diagonal ? 4 : 3 + interp);
  /* the phases' work, those of like content as one: the gather reads the cell map, the
   * fields (L2) and the corners, and stores; the interpolations and the quadrature phase read
   * the stored factors and do the flops; the scatter reads the cell map again and writes y */
  fe_phase_work *ph = wk->phase_work;
  double ybytes = (double)V->ndofs * w, stored = vertices ? 0 : geo;
  wk->nphase_work = 3;
  ph[0].bytes = wk->bytes - stored - ybytes;
  ph[1].bytes = stored;
  ph[2].bytes = ybytes;
  ph[2].l2_bytes = ncells * V->elem.nbasis * 4.0;
  ph[0].l2_bytes = wk->l2_bytes - ph[2].l2_bytes;
  for (int k = 0; k < 3; k++) ph[k].shared_bytes = ncells * part[k];
  ph[1].flops = wk->flops;
  ph[1].barriers = wk->phases - 2;
  ph[1].nonfma = wk->nonfma;
  if (block > 0) {
    wk->groups = (long long)((V->mesh->ncells + block - 1) / block);
    wk->group_items = fe_sumfact_group_items(&sh, block);
    wk->lanes = block;
    /* its contractions run the rows outermost: consecutive outputs independent */
    wk->inflight_flops = fmin(wk->vec_flops, ncells * fe_sumfact_contraction_flops_per_cell(&sh));
    if (!gpu) wk->padded_flops = padded_loop_flops(&sh, block, w, ncells, wk->inflight_flops);
  }
}

/* The model's time of the apply with or without vertices. */
static double predict_apply(const fe_operator *A, fe_backend *be, fe_precision prec, int vertices,
                            int shared)
{
  fe_work w = {0};
  sumfact_counts(A, prec, FE_ACTION_APPLY, vertices, shared, 0, default_block(A, be, prec),
                 &be->info, 0, 0, &w);
  return fe_predict_seconds(be, prec, &w);
}

/* Its options, parsed (private to this file): block, geometry, scatter (atomic or nodes) and
 * fold. */
static const char *const sumfact_options[] = {"block", "geometry", "scatter", "fold", NULL};
typedef struct sumfact_opts {
  int block;    /* cells per work group (0: the default, halved to fit: sumfact_block) */
  int geometry; /* FE_GEOMETRY_* */
  int scatter;  /* FE_SCATTER_AUTO, _ATOMIC or _NODES */
  int fold;     /* FE_FOLD_* */
} sumfact_opts;

static int sumfact_read_options(const fe_options *g, const char *caller, void *opts)
{
  static const char *const scatters[] = {"auto", "atomic", "nodes", NULL}; /* FE_SCATTER_* */
  sumfact_opts *o = opts;
  FE_CHECK(fe_read_block(g, caller, &o->block));
  FE_CHECK(fe_read_geometry(g, caller, &o->geometry));
  FE_CHECK(fe_option_choice(g, caller, "scatter", scatters, 3,
                            "\"atomic\" (an atomic add per cell and node), \"nodes\" (the cells "
                            "write their own entries, then a sum per node) or \"auto\" for "
                            "strategy sumfact (\"color\" is ebe's and the assembly's)",
                            &o->scatter));
  return fe_read_fold(g, caller, &o->fold);
}

/* Shared sets cost a cell 4 bytes and a gather, all that recomputing could save, while the
 * recomputation's index and address work, which the model does not count, measured slower
 * on a GPU at Q1-Q3 in both precisions and on the cpu (docs/benchmarks.md, section 2;
 * docs/history.md): shared geometry stays stored. */
static int pick_vertices(const fe_operator *A, fe_backend *be, fe_precision prec,
                         const sumfact_opts *o, int folded)
{
  if (o->geometry != FE_GEOMETRY_AUTO) return o->geometry == FE_GEOMETRY_VERTICES;
  if (A->V->curved || fe_geometry_shared(A, o->geometry)) return 0;
  /* a folded apply reads its own words: the factors stored a point would serve the other
   * actions alone (the diagonal once a solve, a residual), at 10 words a point made on the
   * host (a Q7 box of 7.65M dofs: 1.28 GB and 0.13 s of its first apply on the H200) */
  if (folded) return 1;
  return predict_apply(A, be, prec, 1, 0) <= predict_apply(A, be, prec, 0, 0);
}

/* The block stays as asked (0: the largest that fits, found by the setup). */
/* The block of a realization: asked (> 0), else the default halved until the apply (what
 * solvers repeat) fits in static shared memory; an action that needs more (the residual's
 * coordinates) takes dynamic shared memory of its own where the backend offers it (cuda).
 * each[a]: the shared bytes of action a's group at that block. */
static int sumfact_block(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         int vertices, int folded, int asked, size_t *each)
{
  size_t limit = fe_shared_limit(be);
  size_t optin = be->ops->kernel_shared ? be->info.local_mem_optin : 0;
  int block = asked > 0 ? asked : default_block(A, be, prec);
  for (;;) {
    size_t need = 0;
    for (int a = 0; a < FE_NACTIONS; a++) {
      fe_sumfact_shape sh = shape_folded(A, prec, (fe_action)a, vertices, folded);
      each[a] = fe_sumfact_shared_bytes(&sh, block, (int)fe_precision_size(prec));
      if (each[a] > need) need = each[a];
    }
    int fits = each[FE_ACTION_APPLY] <= limit && (need <= limit || need <= optin);
    if (fits || asked > 0 || block == 1) return block;
    block /= 2;
  }
}

/* The options' meaning: the block resolved (0 asks for the default, which is then a number),
 * the geometry and fold the model picks, the scatter. */
static void sumfact_effective_key(const fe_operator *A, fe_backend *be, fe_precision prec,
                                  const void *opts, char *key, size_t n)
{
  const sumfact_opts *o = opts;
  int folds = 0;
  if (fe_qdata_folds(A, o->fold, &folds)) fe_error_clear(); /* the setup says why */
  int vertices = pick_vertices(A, be, prec, o, folds);
  size_t each[FE_NACTIONS];
  int block = o->block > 1024 ? o->block
                              : sumfact_block(A, be, prec, vertices, folds, o->block, each);
  snprintf(key, n, "block=%d geometry=%s scatter=%s fold=%s", block,
           fe_geometry_key(A, o->geometry, vertices),
           o->scatter == FE_SCATTER_NODES ? "nodes" : "atomic", fe_fold_key(A, o->fold));
}

static int sumfact_configure(fe_realization *r, const void *opts)
{
  const fe_operator *A = r->A;
  const sumfact_opts *o = opts;
  FE_CHECK(fe_qdata_folds(A, o->fold, &r->folded));
  r->geo_shared = fe_geometry_shared(A, o->geometry);
  sumfact_data *d;
  FE_CALLOC(d, 1, "sumfact data");
  r->data = d;
  FE_ASSERT(o->geometry != FE_GEOMETRY_VERTICES || !A->V->curved, FE_ERR_ARG,
            "geometry = \"vertices\" needs straight cells; this mesh is curved (order 2): use "
            "\"stored\"");
  d->vertices = pick_vertices(A, r->be, r->prec, o, r->folded);
  FE_ASSERT(o->block <= 1024, FE_ERR_ARG, "block = %d cells per work group is too large",
            o->block);
  size_t limit = fe_shared_limit(r->be), each[FE_NACTIONS];
  size_t optin = r->be->ops->kernel_shared ? r->be->info.local_mem_optin : 0;
  int block = sumfact_block(A, r->be, r->prec, d->vertices, r->folded, o->block, each);
  for (int a = 0; a < FE_NACTIONS; a++) {
    d->dynamic[a] = each[a] > limit && each[a] <= optin ? each[a] : 0;
    FE_ASSERT(each[a] <= limit || d->dynamic[a], FE_ERR_ARG, "block = %d cells of %s need %zu "
              "bytes of shared memory per work group (%s); %s allows %zu%s", block, A->V->name,
              each[a], fe_action_name((fe_action)a), r->be->name, optin > limit ? optin : limit,
              block > 1 ? " (use a smaller block)" : "");
  }
  r->block = block;
  FE_ASSERT(o->scatter != FE_SCATTER_COLOR, FE_ERR_ARG, "sumfact: scatter = \"color\" is "
            "ebe's and the assembly's; sumfact takes \"atomic\" or \"nodes\"");
  /* atomics unless asked: measured faster than the node sums at Q3 and Q7 (docs/benchmarks.md) */
  d->nodesum = o->scatter == FE_SCATTER_NODES;
  /* as transpose, a device whose group's items run in order (the cpu) adds plainly color by
   * color; the E-vector needs no colors */
  r->colored = r->be->info.items_in_order && !d->nodesum;
  r->phases = !d->nodesum; /* the node sums need every cell's entries first */
  r->qd_cells_fastest = 1; /* folded words: a group's cells side by side, as its items read them */
  /* and where the cells are SIMD lanes (the cpu), a group's words one range in the order its
   * column walk reads them, a point's words side by side: in word planes a point's words
   * lay a plane apart and the walk's steps Q1 x Q1 points (at Q7 in double 4 KB, the same
   * sets of the L1, 48 pages a column); GPUs keep the planes, whose items read a word
   * across the group at once (docs/kernels.md) */
  const int dim = A->V->elem.dim;
  r->qd_column = r->be->info.cells_in_lanes
                     ? (dim == 3 ? points_per_direction(&A->quad[FE_ACTION_APPLY], dim) : 1)
                     : 0;
  return 0;
}

/* scatter "nodes": the node -> E-vector map (CSR over the nodes, each node's entries in
 * stored cell order; a constrained node has none) and the E-vector itself. */
static int upload_node_map(fe_realization *r, const int *cells, size_t npad)
{
  const fe_space *V = r->A->V;
  sumfact_data *d = r->data;
  size_t nb = (size_t)V->elem.nbasis, nn = (size_t)V->nnodes, nc = (size_t)V->ncomp;
  FE_ASSERT(npad * nb * nc < (size_t)1 << 31, FE_ERR_ARG, "scatter = \"nodes\": %zu cells x %zu "
            "entries do not fit int indices", npad, nb * nc);
  FE_CHECK(fe_memory_check(sizeof(int) * (nn + npad * nb), "operator %s on %s: the node -> "
                           "E-vector map (%zu entries), staged", r->A->pde->name, V->name,
                           npad * nb));
  FE_CHECK(fe_memory_check_on(r->be, sizeof(int) * (nn + npad * nb) + npad * nb * nc *
                              fe_precision_size(r->prec), "operator %s on %s: the E-vector and "
                              "its node map (%zu cells of %zu values)", r->A->pde->name, V->name,
                              npad, nb * nc));
  int *off = fe_zalloc(nn + 1, sizeof(int)), *idx = fe_alloc(sizeof(int) * (npad * nb + 1));
  if (!off || !idx) {
    free(off);
    free(idx);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the node map");
  }
  for (size_t i = 0; i < npad * nb; i++) {
    int s = (int)(i / nb);
    if (cells[i] >= 0 && (s < d->pad0 || s >= d->pad1)) off[cells[i] + 1]++;
  }
  for (size_t n = 0; n < nn; n++) off[n + 1] += off[n];
  for (size_t i = 0; i < npad * nb; i++) { /* off[n] walks to off[n + 1], then shifts back */
    int s = (int)(i / nb);
    if (cells[i] >= 0 && (s < d->pad0 || s >= d->pad1))
      idx[off[cells[i]]++] = (int)((size_t)s * nc * nb + i % nb);
  }
  for (size_t n = nn; n > 0; n--) off[n] = off[n - 1];
  off[0] = 0;
  int rc = fe_upload_ints(r->be, off, nn + 1, &d->noff);
  if (!rc) rc = fe_upload_ints(r->be, idx, (size_t)off[nn] + 1, &d->nidx);
  free(off);
  free(idx);
  if (!rc) rc = r->be->ops->alloc(r->be->impl, npad * nb * nc * fe_precision_size(r->prec), &d->evec);
  return rc;
}

/* The cell map in lexicographic node order, in the stored order perm, a constrained node as
 * ~node (the kernel masks the direction there and adds nothing to its rows, which the
 * Dirichlet step sets after: every component of a boundary node is constrained). */
typedef struct cells_job {
  const fe_space *V;
  const unsigned char *con;
  const int *perm;
  size_t npad;
} cells_job;

static int cells_fill(void *ctx, void *out)
{
  const cells_job *j = ctx;
  const fe_space *V = j->V;
  const int nb = V->elem.nbasis, *lex = V->elem.lex;
  int *cells = out;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < j->npad; i++) {
    const int *src = V->cell_nodes + (size_t)fe_stored_cell(j->perm, i) * nb;
    for (int l = 0; l < nb; l++) {
      int node = src[lex[l]];
      cells[i * nb + l] = j->con[node] ? ~node : node;
    }
  }
  return 0;
}

/* The cell map (written straight into its buffer), the padding range, and for scatter
 * "nodes" the node map (from a host copy of the cell map). */
static int upload_cells(fe_realization *r, const int *perm, size_t npad)
{
  const fe_operator *A = r->A;
  const fe_space *V = A->V;
  sumfact_data *d = r->data;
  int nb = V->elem.nbasis;
  d->pad0 = d->pad1 = 0;
  for (size_t i = 0; i < npad; i++)
    if (perm[i] < 0) { /* padding cells are one run, in one group */
      if (d->pad1 == d->pad0) d->pad0 = (int)i;
      d->pad1 = (int)i + 1;
    }
  unsigned char *con = fe_zalloc((size_t)V->nnodes + 1, 1);
  if (!con) FE_ERROR(FE_ERR_MEM, "out of host memory for the constrained nodes");
  for (int i = 0; i < A->ndir; i++) con[A->dir_nodes[i] / V->ncomp] = 1;
  cells_job job = {V, con, perm, npad};
  int rc = fe_memory_check_on(r->be, sizeof(int) * npad * nb, "operator %s on %s: the cell map "
                              "(%zu cells of %d nodes)", A->pde->name, V->name, npad, nb);
  if (!rc) rc = fe_fill_buffer(r->be, sizeof(int) * npad * nb, &d->cells, cells_fill, &job);
  if (!rc && d->nodesum)
    rc = fe_memory_check(sizeof(int) * npad * nb, "operator %s on %s: the cell map (%zu cells "
                         "of %d nodes), staged", A->pde->name, V->name, npad, nb);
  if (!rc && d->nodesum) {
    int *cells = fe_alloc(sizeof(int) * npad * nb + 1);
    if (!cells) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the cell map");
    if (!rc) rc = cells_fill(&job, cells);
    if (!rc) rc = upload_node_map(r, cells, npad);
    free(cells);
  }
  free(con);
  return rc;
}

static int sumfact_setup(fe_realization *r)
{
  sumfact_data *d = r->data;
  int *perm = NULL;
  size_t npad = 0;
  int rc = fe_realization_schedule(r, 0, &perm, &npad);
  if (!rc) rc = upload_cells(r, perm, npad);
  if (!rc) rc = fe_realization_geometry(r, d->vertices, perm, npad);
  if (!rc) rc = fe_realization_cell_data(r, perm, npad);
  return rc;
}

static void sumfact_release(fe_realization *r)
{
  sumfact_data *d = r->data;
  if (!d) return;
  fe_buffer *bufs[] = {&d->cells, &d->evec, &d->noff, &d->nidx};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) r->be->ops->release(r->be->impl, bufs[i]);
  free(d);
  r->data = NULL;
}

static const char *sumfact_entry(fe_action a)
{
  (void)a;
  return "fe_sumfact";
}


/* The 1D tables of action a: B1, G1 (the basis and its derivative at the points), W1, DQ (the
 * derivative through the points). The tensor rule's points must be the 1D points' products. */
static int emit_tables(const fe_operator *A, fe_action a, int q1, fe_strbuf *b)
{
  const fe_element *el = &A->V->elem;
  const fe_quadrature *Q = &A->quad[a];
  int p1 = el->order + 1, gll = !strcmp(Q->name, "GLL");
  fe_quadrature L;
  FE_CHECK(gll ? fe_quadrature_gll(q1, &L) : fe_quadrature_line(q1, &L));
  int ok = 1;
  for (int q = 0; q < q1; q++) ok &= fabs(L.points[q] - Q->points[q * el->dim]) < 1e-14;
  if (!ok) {
    fe_quadrature_free(&L);
    FE_ERROR(FE_ERR_INTERNAL, "sumfact: the %s rule's points are not a tensor product of %d "
             "1D %s points", fe_action_name(a), q1, Q->name);
  }
  double B1[SUMFACT_MAX_POINTS * (SUMFACT_MAX_ORDER + 1)], G1[sizeof B1 / sizeof B1[0]];
  double DQ[SUMFACT_MAX_POINTS * SUMFACT_MAX_POINTS];
  for (int q = 0; q < q1; q++) {
    for (int i = 0; i < p1; i++) {
      B1[q * p1 + i] = fe_lagrange(el->line, p1, i, L.points[q]);
      G1[q * p1 + i] = fe_lagrange_deriv(el->line, p1, i, L.points[q]);
    }
    for (int j = 0; j < q1; j++) DQ[q * q1 + j] = fe_lagrange_deriv(L.points, q1, j, L.points[q]);
  }
  fe_strbuf_printf(b, "\n/* 1D tables: B1[q*P1 + i] = l_i(xi_q), G1[q*P1 + i] = l_i'(xi_q) (the "
                      "basis through the nodes), W1[q] = the 1D weights, DQ[q*Q1 + r] = the "
                      "derivative at xi_q of the polynomial through the points that is 1 at "
                      "xi_r (%d %s points) */\n", q1, Q->name);
  fe_codegen_table(b, "B1", B1, q1 * p1);
  fe_codegen_table(b, "G1", G1, q1 * p1);
  fe_codegen_table(b, "W1", L.weights, q1);
  fe_codegen_table(b, "DQ", DQ, q1 * q1);
  fe_quadrature_free(&L);
  return b->failed ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory") : 0;
}

/* Items per group of the launch, capped by the device. */
static size_t group_size(const fe_realization *r, fe_action a)
{
  const sumfact_data *d = r->data;
  fe_sumfact_shape sh = shape_of(r->A, r->prec, a, d->vertices);
  size_t n = (size_t)fe_sumfact_group_items(&sh, r->block);
  return n > r->be->info.max_group ? r->be->info.max_group : n;
}

/* The geometry from the corners in action a (not where the apply reads folded words). */
static int action_vertices(const fe_realization *r, fe_action a)
{
  const sumfact_data *d = r->data;
  return d->vertices && !(r->folded && a == FE_ACTION_APPLY);
}

static int sumfact_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  const sumfact_data *d = r->data;
  const int vertices = action_vertices(r, a);
  fe_sumfact_shape sh = shape_of(r->A, r->prec, a, vertices);
  fe_kernel_spec s;
  fe_realization_action_spec(r, a, &s);
  sh.need_x = fe_codegen_needs(&s).need_x;
  s.template_name = "sumfact";
  s.dense = 0;
  char defines[640];
  snprintf(defines, sizeof defines,
           "#define P1 %d /* nodes per direction */\n#define Q1 %d /* points per direction */\n"
           "#define COLLOCATED %d /* the points are the nodes */\n"
           "#define GEO_VERTICES %d /* the map from the corners (else stored factors) */\n"
           "#define GEO_LINEAR %d /* straight cells: x from the corners */\n"
           "#define SF_DYNAMIC %d /* the shared arrays are dynamic (cuda, above 48 KB) */\n"
           "#define SF_NODESUM %d /* the cells write an E-vector, fe_nodesum adds it up */\n"
           "#define SF_SUM_ITEMS %d /* nodes per group of fe_nodesum */\n"
           "#define SF_PADDED %d /* the cpu: the group's arrays padded (SF_PAD) */\n",
           sh.p1, sh.q1, sh.collocated, vertices, !r->A->V->curved, d->dynamic[a] > 0, d->nodesum,
           SUMFACT_SUM_ITEMS,
           !r->be->info.is_gpu && sumfact_padded(&sh, r->block, (double)fe_precision_size(r->prec)));
  s.defines = defines;
  fe_strbuf t = {0};
  int rc = emit_tables(r->A, a, sh.q1, &t);
  char *tables = NULL;
  if (!rc) rc = fe_strbuf_finish(&t, &tables);
  else fe_strbuf_free(&t);
  FE_CHECK(rc);
  s.tables = tables;
  rc = fe_codegen_action(&s, r->be->name, preamble, src);
  free(tables);
  return rc;
}

/* One launch per color. */
static int sumfact_integrate(fe_realization *r, fe_action a, const fe_vector *u,
                             const fe_vector *w, fe_vector *y, int *launches)
{
  const fe_operator *A = r->A;
  sumfact_data *d = r->data;
  long long geo_n = (long long)fe_geometry_plane(A, &A->quad[a], fe_padded_cells(A, r->block),
                                                 r->geo_shared);
  const fe_buffer *geo = r->geo[a].ptr ? &r->geo[a] : &r->params; /* unread: vertices */
  if (r->folded && a == FE_ACTION_APPLY) { /* the folded words in the factors' place */
    geo = &r->qdata;
    geo_n = (long long)fe_qdata_plane(r);
  }
  fe_realization_runs(r, 1);
  for (int c = 0; c < r->ncolors; c++) {
    FE_CHECK_INTERRUPT();
    int first, ng;
    fe_realization_color_range(r, c, &first, &ng);
    if (!ng) continue;
    fe_arg args[20] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = first},
        {.kind = FE_ARG_INT, .i = geo_n},
        {.kind = FE_ARG_INT, .i = d->pad0},
        {.kind = FE_ARG_INT, .i = d->pad1},
        {.kind = FE_ARG_BUFFER, .buf = &r->groups},
        {.kind = FE_ARG_BUFFER, .buf = &d->cells},
        {.kind = FE_ARG_BUFFER, .buf = geo},
    };
    fe_physics_args(r, u, w, y, args + 8);
    if (d->nodesum) args[17].buf = &d->evec; /* the cells' own entries */
    /* (w, J w) into CG's parts where asked: the kernel adds them where the backend has
     * cg_parts (its dialect's FE_PQ_SUM) */
    int pq = a == FE_ACTION_APPLY && r->pq && r->be->ops->cg_parts;
    args[18] = (fe_arg){.kind = FE_ARG_INT, .i = pq ? r->pq_slot : -1};
    args[19] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = pq ? r->pq : &r->params};
    r->pq_added |= pq;
    if (d->dynamic[a]) /* kept by the kernel: a call that changes nothing returns at once */
      FE_CHECK(r->be->ops->kernel_shared(r->be->impl, r->kernel[a], d->dynamic[a]));
    FE_CHECK(r->be->ops->launch(r->be->impl, r->kernel[a], (size_t)ng, group_size(r, a), 20,
                                args, r->prec, NULL));
    (*launches)++;
  }
  fe_realization_runs(r, 0);
  if (!d->nodesum) return 0;
  if (!d->sum[a])
    FE_CHECK(r->be->ops->kernel(r->be->impl, r->module[a], "fe_nodesum", &d->sum[a]));
  int nn = A->V->nnodes, ng = (nn + SUMFACT_SUM_ITEMS - 1) / SUMFACT_SUM_ITEMS;
  fe_arg args[6] = {
      {.kind = FE_ARG_INT, .i = ng},
      {.kind = FE_ARG_INT, .i = nn},
      {.kind = FE_ARG_BUFFER, .buf = &d->noff},
      {.kind = FE_ARG_BUFFER, .buf = &d->nidx},
      {.kind = FE_ARG_BUFFER, .buf = &d->evec},
      {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  FE_CHECK(r->be->ops->launch(r->be->impl, d->sum[a], (size_t)ng, SUMFACT_SUM_ITEMS, 6, args,
                              r->prec, NULL));
  (*launches)++;
  return 0;
}

static void sumfact_count(const fe_realization *r, fe_action a, fe_work *w)
{
  const sumfact_data *d = r->data;
  sumfact_counts(r->A, r->prec, a, d->vertices, r->geo_shared, d->nodesum, r->block,
                 &r->be->info, r->folded, r->qd_column > 0, w);
  w->group_items = (int)group_size(r, a);
}

static void sumfact_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                             fe_action a, fe_work *w)
{
  fe_work w2 = {0};
  int block = default_block(A, be, prec), folded = 0;
  int shared = fe_geometry_shared(A, FE_GEOMETRY_AUTO);
  if (fe_qdata_folds(A, FE_FOLD_AUTO, &folded)) fe_error_clear();
  sumfact_counts(A, prec, a, 0, shared, 0, block, &be->info, folded,
                 be->info.cells_in_lanes, w);
  if (A->V->curved || shared || (folded && a == FE_ACTION_APPLY)) return; /* stored sets stay */
  sumfact_counts(A, prec, a, 1, 0, 0, block, &be->info, 0, 0, &w2);
  if (w2.bytes < w->bytes) *w = w2; /* the cheaper geometry by the bytes that bind them */
}

static void sumfact_describe(const fe_realization *r, fe_action a, char *buf, size_t n)
{
  const sumfact_data *d = r->data;
  char geo[96];
  fe_action_geometry_describe(r, a, action_vertices(r, a), geo, sizeof geo);
  snprintf(buf, n, "%s, %s", geo, d->nodesum ? "a sum per node" : "atomic adds");
}

const fe_strategy fe_strategy_sumfact = {
    .name = "sumfact",
    .summary = "sum factorization on quads and hexes: 1D contractions per direction, geometry "
               "stored or from the corners (Remacle-Gandham-Warburton)",
    .applies = sumfact_applies,
    .options = sumfact_options,
    .options_size = sizeof(sumfact_opts),
    .read_options = sumfact_read_options,
    .effective_key = sumfact_effective_key,
    .configure = sumfact_configure,
    .setup = sumfact_setup,
    .release = sumfact_release,
    .source = sumfact_source,
    .entry = sumfact_entry,
    .integrate = sumfact_integrate,
    .count = sumfact_count,
    .estimate = sumfact_estimate,
    .masks_direction = 1,
    .describe = sumfact_describe,
};
