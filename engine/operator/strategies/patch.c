/* Strategy "patch": felab's own for low orders on GPUs (engine/codegen/kernels/patch.knl, the host
 * side of the patches in engine/operator/patch.c). Cells are grouped along a Morton curve into
 * patches of `block` cells with a local node numbering; a work group copies its patch's node
 * values and coordinates to shared memory once, integrates its cells in registers, files
 * each contribution at a place fixed on the host, and adds each patch node's sum to the
 * output once. First-order straight cells recompute their map from the coordinates, so no
 * geometry is stored. Options: walk (cells per walk of one item) and lanes (interleaved
 * runs). docs/kernels.md has the shape and its profile. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/operator/patch.h"
#include "engine/operator/strategy.h"

/* Cells per patch: one work-group item each, or WALK_CELLS per item when walking.
 * (Tuned by scripts/bench/gpu.lua: docs/history.md, issue 6.) */
#define PATCH_BLOCK 512
#define PATCH_WALK_BLOCK_CELLS 128 /* walks per patch */
#define PATCH_MAX_BLOCK 4096       /* the most cells a patch may have */
/* Items per patch work group: larger patches give each item several cells. */
#define PATCH_ITEMS 256

typedef struct patch_data {
  fe_buffer pstart, pnodes, pruns, lcells; /* node list offsets, node lists, the nodes' run
                                            * words, local cell maps or events */
  fe_buffer estart;      /* with walks: event offsets */
  int walk;              /* cells per walk (0: an item per cell) */
  int reuse;             /* walks keep nodes across cells in another vertex order */
  int items;             /* walks per patch */
  int maxl, maxc, maxe;  /* nodes, places (padding included) and events of the largest */
  int lanes;             /* nodes whose runs are interleaved (fe_patch_place) */
  int asked_block;       /* the block was asked for (else halved until the patches fit) */
  fe_patches host;       /* where the backend reads host memory in place (the cpu): the
                          * patches themselves, which the buffers above wrap */
  double patch_nodes, walk_events; /* summed over patches */
  /* the bank model on the built patches (an item per cell; 0: not measured): wavefronts of
   * a warp's access, averaged over a sample of warps, to a node's coordinate (xs[l*3 + d]),
   * to a component of its state or direction (us[l*NC + k]) and of a contribution's store
   * (ce[place*NC + k]); and per patch node, the gather's stores and the scatter's loads */
  double wave_x, wave_u, wave_c, wave_node_x, wave_node_u, wave_scatter;
} patch_data;

/* The wavefronts above, from a sample of P's patches (one item per cell). */
static void measure_banks(patch_data *d, const fe_patches *P, int nb, int nc, int ncells,
                          int size)
{
  double sx = 0, su = 0, sc = 0, nw = 0, gx = 0, gu = 0, sa = 0, nn = 0;
  /* the patches of about 64k cells a piece (2048 warps at 512 cells a patch): enough pieces
   * to keep every thread busy while building them */
  int want = P->block > 0 && 65536 / P->block > 64 ? 65536 / P->block : 64;
  int step = P->npatch > want ? P->npatch / want : 1, nsample = (P->npatch + step - 1) / step;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : sx, su, sc, nw, gx, gu, sa, nn)
  for (int s = 0; s < nsample; s++) {
    const int g = s * step;
    long long idx[32];
    for (int e0 = 0; e0 < P->block; e0 += 32) { /* the cell items, a warp at a time */
      int live = 0;
      for (int b = 0; b < nb; b++) {
        unsigned lp[32];
        for (int t = 0; t < 32; t++) {
          int e = e0 + t, c = g * P->block + e;
          lp[t] = e < P->block && c < ncells ? P->lcells[((size_t)g * P->block * nb) + (size_t)b * P->block + e] : ~0u;
          live += b == 0 && lp[t] != ~0u;
        }
        for (int d3 = 0; d3 < 3; d3++) {
          for (int t = 0; t < 32; t++) idx[t] = lp[t] == ~0u ? -1 : (long long)(lp[t] & 0xffffu) * 3 + d3;
          sx += fe_bank_wavefronts(idx, 32, size);
        }
        for (int k = 0; k < nc; k++) {
          for (int t = 0; t < 32; t++) idx[t] = lp[t] == ~0u ? -1 : (long long)(lp[t] & 0xffffu) * nc + k;
          su += fe_bank_wavefronts(idx, 32, size);
          for (int t = 0; t < 32; t++) idx[t] = lp[t] == ~0u ? -1 : (long long)(lp[t] >> 16) * nc + k;
          sc += fe_bank_store_wavefronts(idx, 32, size);
        }
      }
      nw += live > 0;
    }
    int n0 = P->start[g], nl = P->start[g + 1] - n0;
    for (int i0 = 0; i0 < nl; i0 += 32) { /* the node items: gather stores, scatter loads */
      int most = 0;
      for (int t = 0; t < 32 && i0 + t < nl; t++) {
        int count = (int)((unsigned)P->runs[n0 + i0 + t] >> 16);
        if (count > most) most = count;
      }
      for (int d3 = 0; d3 < 3; d3++) {
        for (int t = 0; t < 32; t++) idx[t] = i0 + t < nl ? (long long)(i0 + t) * 3 + d3 : -1;
        gx += fe_bank_store_wavefronts(idx, 32, size);
      }
      for (int k = 0; k < nc; k++) {
        for (int t = 0; t < 32; t++) idx[t] = i0 + t < nl ? (long long)(i0 + t) * nc + k : -1;
        gu += fe_bank_store_wavefronts(idx, 32, size);
        for (int j = 0; j < most; j++) {
          for (int t = 0; t < 32; t++) {
            unsigned r = i0 + t < nl ? (unsigned)P->runs[n0 + i0 + t] : 0;
            idx[t] = i0 + t < nl && j < (int)(r >> 16) ? (long long)fe_patch_place(r, j, P->lanes) * nc + k : -1;
          }
          sa += fe_bank_wavefronts(idx, 32, size);
        }
      }
      for (int t = 0; t < 32; t++) idx[t] = i0 + t < nl ? i0 + t : -1; /* the run words */
      sa += fe_bank_wavefronts(idx, 32, 4);
      nn += nl - i0 < 32 ? nl - i0 : 32;
    }
  }
  if (nw <= 0 || nn <= 0) return;
  d->wave_x = sx / (nw * nb * 3);
  d->wave_u = su / (nw * nb * nc);
  d->wave_c = sc / (nw * nb * nc);
  d->wave_node_x = gx / nn; /* per patch node: three coordinate stores a warp of 32 */
  d->wave_node_u = gu / nn;
  d->wave_scatter = sa / nn;
}

/* Bytes of shared memory a work group holds for a patch of nl nodes, `places` places in its
 * runs and ne events: the state, direction and coordinates at its nodes, the contributions,
 * the run words, the events (patch.knl). */
static double patch_shared_bytes(const fe_space *V, fe_precision prec, double nl, double places,
                                 double ne)
{
  return (nl * (3 + 2 * V->ncomp) + places * V->ncomp) * (double)fe_precision_size(prec) +
         (nl + ne) * (double)sizeof(int);
}

/* The runs' default interleaving: a GPU's items sum them a warp at a time; in double,
 * interleave as many as a row of its shared memory's banks holds (16), so that they read one
 * row per step; in single, measured slower interleaved, the runs stay one after the other
 * (docs/history.md, interleaved runs). */
static int default_lanes(const fe_backend *be, fe_precision prec)
{
  return be && be->info.is_gpu && prec == FE_DOUBLE ? 16 : 1;
}

/* Whether patches of `block` cells may fit, as far as is known before they are built: their
 * contributions' places (block x NB with one item per cell; with walks at least one flush a
 * node) within what the words name, and the shared arrays within the device's, the nodes
 * taken as the patch's share of the mesh's (a patch touches more, the nodes on its surface
 * that its neighbours share: the setup halves the block again where the built patches do not
 * fit). No backend (be NULL): the words' limits alone. */
static int block_may_fit(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         int block, int walk)
{
  const fe_space *V = A->V;
  const double ncells = V->mesh->ncells > 0 ? V->mesh->ncells : 1;
  const double cells = block < ncells ? block : ncells;
  const double nodes = cells * V->nnodes / ncells;
  const double places = walk > 0 ? nodes : cells * V->elem.nbasis;
  if (walk > 0 ? nodes > FE_WALK_MAX_NODES || places > FE_WALK_MAX_PLACES
               : (double)block * V->elem.nbasis > FE_PATCH_MAX_PLACES || nodes > FE_PATCH_MAX_NODES)
    return 0;
  return !be || patch_shared_bytes(V, prec, nodes, places, 0) <= (double)fe_shared_limit(be);
}

/* The cells per patch where none is asked: walks of walk cells, PATCH_WALK_BLOCK_CELLS of
 * them; on a GPU a higher-order space's item holds many registers (a P2 tet in double ~155),
 * and smaller patches let more groups share a multiprocessor (docs/history.md, issue 6); else
 * PATCH_BLOCK. Halved until a patch of them may fit (block_may_fit: 256 cells of Q5 hexes
 * file 55296 contributions, 512 would file more than a place's 16 bits name), at least 1.
 * be may be NULL (an estimate for no device in particular: a CPU's block). */
static int default_block(const fe_operator *A, const fe_backend *be, fe_precision prec, int walk)
{
  int block;
  if (walk > 0) block = PATCH_WALK_BLOCK_CELLS * walk;
  else if (be && be->info.is_gpu && A->V->elem.order > 1)
    block = PATCH_BLOCK / (prec == FE_DOUBLE ? 4 : 2);
  else block = PATCH_BLOCK;
  if (block > PATCH_MAX_BLOCK) block = PATCH_MAX_BLOCK;
  while (block > 1 && !block_may_fit(A, be, prec, block, walk)) block /= 2;
  return block;
}

/* Every space whose patch of one cell fits: its nodes, its contributions' places (each in a
 * run of its own, interleaved by the default lanes) and run words within the device's shared
 * memory and what the words name. Larger cells make smaller patches (default_block). */
static int patch_applies(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         char *why, size_t n)
{
  const fe_space *V = A->V;
  const int nb = V->elem.nbasis, lanes = default_lanes(be, prec);
  const double places = (double)((nb + lanes - 1) / lanes * lanes);
  const double need = patch_shared_bytes(V, prec, nb, places, 0);
  if (fe_dense_tables_fit(A, be, prec, why, n)) return 1;
  if (nb > FE_PATCH_MAX_NODES || places > FE_PATCH_MAX_PLACES) {
    snprintf(why, n, "a patch of one cell of %s files %d contributions, more than the %d "
             "places a patch's words name", V->name, nb, FE_PATCH_MAX_PLACES);
    return -1;
  }
  if (need > (double)fe_shared_limit(be)) {
    snprintf(why, n, "a patch of one cell of %s (%d nodes) needs %.0f bytes of shared memory "
             "per work group in %s; %s allows %zu", V->name, nb, need,
             prec == FE_DOUBLE ? "double" : "single", be->name, fe_shared_limit(be));
    return -1;
  }
  return 0;
}

/* Measured (docs/benchmarks.md): on cuda, first-order spaces on straight cells and P2
 * simplices run fastest as patches among the matrix-free strategies (csr beats them for
 * linear physics, and is the default there); on a CPU, where a group's shared sums are plain
 * loops, slower than transpose. */
static int patch_measured(const fe_operator *A, const fe_backend *be, fe_precision prec,
                          char *why, size_t n)
{
  fe_cell_type t = A->V->elem.cell;
  int p2 = A->V->elem.order == 2 && (t == FE_CELL_TET || t == FE_CELL_TRI);
  if (!be->info.is_gpu) {
    snprintf(why, n, "applies, but slower than transpose on CPUs in the runs of docs/benchmarks.md: not a default there");
    return -1;
  }
  if (!be->info.measured_defaults || !(A->geo_recompute || p2)) return 0;
  char other[8];
  if (!fe_stored_matrix_applies(A, be, prec, other, sizeof other) &&
      fe_strategy_csr.measured(A, be, prec, other, sizeof other) > 0)
    return 0; /* linear physics: csr measured faster still (csr.c) */
  snprintf(why, n, "patch measured fastest on cuda for %s on %s cells among the matrix-free "
           "strategies (docs/benchmarks.md)", A->V->name, fe_cell_name(t));
  return 1;
}

/* Cells per walk: asked (> 0, first-order straight cells whose nodes fit the slots), else
 * none: one item per cell. Walks read a quarter of the shared node data per tet, but measured
 * slower on a GPU (more registers, a select per slot and event: docs/history.md, issue 6), so
 * they are asked for, not automatic. Walks keep nodes across cells only where that changes
 * nothing but rounding. */
static int pick_walk(int asked, const fe_operator *A, int *walk, int *reuse)
{
  int nb = A->V->elem.nbasis;
  *walk = 0;
  *reuse = 0;
  if (asked <= 0) return 0;
  FE_ASSERT(A->geo_recompute, FE_ERR_ARG, "walk = %d: walks need first-order cells on "
            "straight geometry (P1, Q1, prisms P1); %s is not", asked, A->V->name);
  FE_ASSERT(nb <= FE_WALK_MAX_SLOTS, FE_ERR_ARG, "walk = %d: a walk holds at most %d nodes "
            "per cell, %s has %d", asked, FE_WALK_MAX_SLOTS, A->V->name, nb);
  FE_ASSERT(asked <= 256, FE_ERR_ARG, "walk = %d cells is too long (at most 256)", asked);
  *walk = asked;
  /* fields are evaluated in the cell's own vertex order: keep it */
  int fields = A->pde->nfields > 0 && A->pde->uses_fields;
  *reuse = !fields && fe_patch_walk_reuses(A->V->elem.cell, A->quad, FE_NACTIONS);
  return 0;
}

/* Its options, parsed (private to this file): block, walk, lanes and geometry (stored
 * factors shared or not). */
static const char *const patch_options[] = {"block", "walk", "lanes", "geometry", NULL};
typedef struct patch_opts {
  int block;    /* cells per patch (0: default_block) */
  int walk;     /* cells per walk of one item (0 or -1: one item per cell) */
  int lanes;    /* nodes whose runs are interleaved, a power of two up to 64 (0: the
                 * backend's, default_lanes) */
  int geometry; /* FE_GEOMETRY_* */
} patch_opts;

static int patch_read_options(const fe_options *g, const char *caller, void *opts)
{
  patch_opts *o = opts;
  FE_CHECK(fe_read_block(g, caller, &o->block));
  FE_CHECK(fe_option_integer(g, caller, "walk", -1, 1 << 30, 0, "an integer >= -1 (strategy "
                             "\"patch\": cells per walk, 0 or -1: one item per cell)", &o->walk));
  FE_CHECK(fe_option_integer(g, caller, "lanes", 0, 64, 1, "0 or a power of two up to 64 "
                             "(strategy \"patch\": nodes whose runs are interleaved, 0: the "
                             "backend's)", &o->lanes));
  return fe_read_geometry(g, caller, &o->geometry);
}

/* walk 0 and -1 are one item per cell; block and lanes 0 the defaults they stand for. */
static void patch_effective_key(const fe_operator *A, fe_backend *be, fe_precision prec,
                                const void *opts, char *key, size_t n)
{
  const patch_opts *o = opts;
  int walk = o->walk > 0 ? o->walk : 0;
  snprintf(key, n, "block=%d walk=%d lanes=%d geometry=%s",
           o->block > 0 ? o->block : default_block(A, be, prec, walk), walk,
           o->lanes > 0 ? o->lanes : default_lanes(be, prec),
           fe_geometry_key(A, o->geometry, 0));
}

static int patch_configure(fe_realization *r, const void *opts)
{
  const patch_opts *o = opts;
  r->geo_shared = fe_geometry_shared(r->A, o->geometry);
  patch_data *d;
  FE_CALLOC(d, 1, "patch data");
  r->data = d;
  FE_CHECK(pick_walk(o->walk, r->A, &d->walk, &d->reuse));
  d->lanes = o->lanes > 0 ? o->lanes : default_lanes(r->be, r->prec);
  FE_ASSERT(d->lanes <= 64 && !(d->lanes & (d->lanes - 1)), FE_ERR_ARG,
            "lanes = %d: the runs of a power of two of nodes, at most 64, are interleaved",
            d->lanes);
  d->asked_block = o->block > 0;
  int block = o->block > 0 ? o->block : default_block(r->A, r->be, r->prec, d->walk);
  FE_ASSERT(block <= PATCH_MAX_BLOCK, FE_ERR_ARG, "block = %d cells per work group is too large "
            "(at most %d)", block, PATCH_MAX_BLOCK);
  r->block = block;
  r->colored = 0;
  return 0;
}

/* The patches over the stored cells perm: work group g owns stored cells [g*BLOCK,
 * (g+1)*BLOCK) and the sorted list of their nodes (constrained ones as ~node, so the kernel
 * masks the direction itself). With walks the cells of each patch are reordered along its
 * tour (perm is rewritten: every per-cell array uploaded after this follows it). *too_big
 * says the largest patch's shared arrays exceed the device's. */
static int upload_patches(fe_realization *r, int *perm, size_t npad, int *too_big)
{
  const fe_operator *A = r->A;
  const fe_space *V = A->V;
  patch_data *d = r->data;
  unsigned char *con = fe_zalloc((size_t)V->nnodes + 1, 1);
  if (!con) FE_ERROR(FE_ERR_MEM, "out of host memory for the patches");
  for (int i = 0; i < A->ndir; i++) con[A->dir_nodes[i] / V->ncomp] = 1;
  fe_patches P;
  const int sorted = r->be->info.is_gpu; /* a warp's gathers in order */
  int rc = fe_patches_build(V, con, perm, npad, r->block, d->walk, d->reuse, d->lanes, sorted, &P);
  free(con);
  *too_big = rc && P.too_large; /* more nodes or places than the words name */
  FE_CHECK(rc);
  d->maxl = P.maxl;
  d->maxc = P.maxc;
  d->maxe = P.maxe;
  d->items = P.items;
  d->patch_nodes = P.nodes_total;
  d->walk_events = (double)P.nevents;
  d->wave_x = d->wave_u = d->wave_c = d->wave_node_x = d->wave_node_u = d->wave_scatter = 0;
  if (d->walk <= 0 && r->be->info.is_gpu) /* a CPU's shared arrays are in L1: no banks */
    measure_banks(d, &P, V->elem.nbasis, V->ncomp, V->mesh->ncells, (int)fe_precision_size(r->prec));
  size_t need = (size_t)patch_shared_bytes(V, r->prec, d->maxl, d->maxc, d->maxe);
  *too_big = need > fe_shared_limit(r->be);
  if (*too_big) {
    fe_patches_free(&P);
    FE_ERROR(FE_ERR_ARG, "block = %d cells of %s touch up to %d nodes, %zu bytes of shared "
             "memory per work group; %s allows %zu (use a smaller block)", r->block, V->name,
             d->maxl, need, r->be->name, fe_shared_limit(r->be));
  }
  int ng = P.npatch;
  size_t total = (size_t)P.start[ng];
  size_t lbytes = d->walk > 0 ? sizeof(unsigned) * (P.nevents + 1)
                              : npad * V->elem.nbasis * sizeof(unsigned);
  if (r->be->ops->wrap) { /* the buffers are the patches' own arrays: kept in d, no copies */
    const fe_backend_ops *o = r->be->ops;
    rc = o->wrap(r->be->impl, P.start, sizeof(int) * ((size_t)ng + 1), &d->pstart);
    if (!rc) rc = o->wrap(r->be->impl, P.nodes, sizeof(int) * (total + 1), &d->pnodes);
    if (!rc) rc = o->wrap(r->be->impl, P.runs, sizeof(int) * (total + 1), &d->pruns);
    if (!rc) rc = o->wrap(r->be->impl, d->walk > 0 ? (void *)P.events : P.lcells, lbytes, &d->lcells);
    if (!rc && d->walk > 0)
      rc = o->wrap(r->be->impl, P.estart, sizeof(int) * ((size_t)ng + 1), &d->estart);
    d->host = P;
    return rc;
  }
  rc = fe_memory_check_on(r->be, sizeof(int) * 2 * (total + 1) + lbytes, "operator %s on %s: "
                          "the patches' node lists (%zu entries for %zu cells)", A->pde->name,
                          V->name, total, npad);
  if (!rc) rc = fe_upload_ints(r->be, P.start, (size_t)ng + 1, &d->pstart);
  if (!rc) rc = fe_upload_ints(r->be, P.nodes, total + 1, &d->pnodes);
  if (!rc) rc = fe_upload_ints(r->be, P.runs, total + 1, &d->pruns);
  const void *lsrc = d->walk > 0 ? (const void *)P.events : P.lcells;
  if (!rc) rc = r->be->ops->alloc(r->be->impl, lbytes, &d->lcells);
  if (!rc) rc = r->be->ops->write(r->be->impl, &d->lcells, 0, lbytes, lsrc);
  if (!rc && d->walk > 0) rc = fe_upload_ints(r->be, P.estart, (size_t)ng + 1, &d->estart);
  fe_patches_free(&P);
  return rc;
}

static void release_buffers(fe_realization *r)
{
  patch_data *d = r->data;
  fe_buffer *bufs[] = {&d->pstart, &d->pnodes, &d->pruns, &d->lcells, &d->estart, &r->groups};
  int wrapped = d->host.start != NULL; /* the first five wrap d->host: never released */
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
    if (wrapped && i < 5) memset(bufs[i], 0, sizeof *bufs[i]);
    else if (bufs[i]->ptr) r->be->ops->release(r->be->impl, bufs[i]);
  }
  fe_patches_free(&d->host);
  free(r->color_start);
  r->color_start = NULL;
}

/* Patches along a Morton curve (a box's own order makes strips one cell thick, whose nodes
 * are shared by four patches); default patches that turn out too large (for shared memory, or
 * more nodes or places than their words name) are halved until they fit. */
static int patch_setup(fe_realization *r)
{
  patch_data *d = r->data;
  int *perm = NULL, too_big = 0, rc;
  size_t npad = 0;
  for (;;) {
    rc = fe_realization_schedule(r, 1, &perm, &npad);
    if (!rc) rc = upload_patches(r, perm, npad, &too_big);
    if (!rc || !too_big || d->asked_block || r->block == 1) break;
    fe_error_clear();
    perm = NULL; /* r's, made again */
    release_buffers(r);
    r->block /= 2;
  }
  /* first-order straight cells: the kernel makes the factors from the coordinates */
  if (!rc) rc = fe_realization_geometry(r, r->A->geo_recompute, perm, npad);
  if (!rc) rc = fe_realization_cell_data(r, perm, npad);
  return rc;
}

static void patch_release(fe_realization *r)
{
  if (!r->data) return;
  release_buffers(r);
  free(r->data);
  r->data = NULL;
}

static const char *patch_entry(fe_action a)
{
  (void)a;
  return "fe_patch";
}

/* Items per group of patches of block cells, one item per cell: at most PATCH_ITEMS (which
 * then take several cells), whole warps of 32. */
static int cell_items(int block)
{
  return ((block < PATCH_ITEMS ? block : PATCH_ITEMS) + 31) / 32 * 32;
}

/* Items per group: one per cell (cell_items) or per walk, whole warps. */
static size_t group_size(const fe_realization *r)
{
  const patch_data *d = r->data;
  size_t n = d->walk > 0 ? ((size_t)d->items + 31) / 32 * 32 : (size_t)cell_items(r->block);
  return n > r->be->info.max_group ? r->be->info.max_group : n;
}

static int patch_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  const patch_data *d = r->data;
  fe_kernel_spec s;
  fe_realization_spec(r, a, &s);
  s.template_name = "patch";
  char defines[1024];
  snprintf(defines, sizeof defines,
           "#define MAXL %d /* nodes of the largest patch */\n#define GEO_RECOMPUTE %d\n"
           "#define MAXC %d /* places in the runs of the largest patch */\n"
           "#define LANES %d /* nodes whose runs are interleaved */\n"
           "#define WALK %d\n#define WALK_CELLS %d /* cells per walk */\n"
           "#define ITEMS %d /* walks per patch */\n"
           "#define MAXE %d /* events of the largest patch */\n"
           "#define GROUP_ITEMS %d /* work items per group */\n",
           d->maxl, r->A->geo_recompute, d->maxc, d->lanes, d->walk > 0,
           d->walk > 0 ? d->walk : 1, d->walk > 0 ? d->items : 1, d->walk > 0 ? d->maxe : 1,
           (int)group_size(r));
  s.defines = defines;
  return fe_codegen_action(&s, r->be->name, preamble, src);
}

/* One launch over every patch. */
static int patch_integrate(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                           fe_vector *y, int *launches)
{
  FE_CHECK_INTERRUPT();
  const fe_operator *A = r->A;
  patch_data *d = r->data;
  const fe_buffer *geo = r->geo[a].ptr ? &r->geo[a] : &r->params; /* unused when recomputed */
  fe_arg args[19] = {
      {.kind = FE_ARG_INT, .i = r->ngroups},
      {.kind = FE_ARG_INT, .i = A->V->mesh->ncells},
      {.kind = FE_ARG_INT, .i = (long long)fe_geometry_plane(A, &A->quad[a],
                                                             fe_padded_cells(A, r->block),
                                                             r->geo_shared)},
      {.kind = FE_ARG_BUFFER, .buf = &d->pstart},
      {.kind = FE_ARG_BUFFER, .buf = &d->pnodes},
      {.kind = FE_ARG_BUFFER, .buf = &d->pruns},
      {.kind = FE_ARG_BUFFER, .buf = &d->lcells}, /* or the walks' events */
      {.kind = FE_ARG_BUFFER, .buf = d->walk > 0 ? &d->estart : &d->pstart}, /* unread: no walks */
      {.kind = FE_ARG_BUFFER, .buf = geo},
  };
  fe_physics_args(r, u, w, y, args + 9);
  FE_CHECK(r->be->ops->launch(r->be->impl, r->kernel[a], (size_t)r->ngroups, group_size(r), 19,
                              args, r->prec, NULL));
  (*launches)++;
  return 0;
}

/* Shared wavefront bytes, L2 loads and atomics of patch.knl: the patch's nodes gathered into
 * shared memory, an item per cell loads its nodes' state, direction and coordinates from
 * there and stores its contributions in their runs, then one item per patch node reads its
 * run and adds it into y (one atomic per patch node and component). On built patches (m) the
 * bank model on their own local numbers and places; before (or with walks, which read a
 * quarter of the node data, docs/kernels.md, counted as the item-per-cell form) words at
 * random places. */
static void patch_traffic(const fe_kernel_spec *s, const fe_action_needs *n, int recompute,
                          double patch_nodes, int walk, const patch_data *m, fe_work *wk)
{
  const fe_space *V = s->V;
  int nb = V->elem.nbasis, nc = V->ncomp, size = (int)fe_precision_size(s->prec);
  double ncells = V->mesh->ncells;
  int fields = (n->need_u ? 1 : 0) + (n->jacobian ? 1 : 0), xs = n->need_x || recompute;
  if (m && walk <= 0 && m->wave_u > 0) {
    double cell = nb * ((xs ? 3 * m->wave_x : 0) + nc * (fields * m->wave_u + m->wave_c));
    double node = (xs ? m->wave_node_x : 0) + fields * m->wave_node_u + m->wave_scatter;
    wk->shared_bytes = (ncells / 32 * cell + patch_nodes * node) * 128;
    /* the phases': the gather's stores, the cells' loads and stores, the sums' reads */
    wk->phase_work[0].shared_bytes = patch_nodes * (node - m->wave_scatter) * 128;
    wk->phase_work[1].shared_bytes = ncells / 32 * cell * 128;
    wk->phase_work[2].shared_bytes = patch_nodes * m->wave_scatter * 128;
  } else {
    double loads = nb * (fields * nc + (xs ? 3 : 0));
    double stores = nb * nc, sums = nb * nc + nb; /* the runs' contributions and run words */
    double random = fe_bank_random_wavefronts(size);
    wk->shared_bytes = ncells / 32 * (loads + stores + sums) * random * 128;
    wk->phase_work[1].shared_bytes = ncells / 32 * (loads + stores) * random * 128;
    wk->phase_work[2].shared_bytes = ncells / 32 * sums * random * 128;
  }
  /* the patch's node lists: each patch node's values read once per patch (beyond the
   * minimal once per node) */
  wk->l2_bytes = patch_nodes * ((n->need_u ? nc : 0) + (n->jacobian ? nc : 0) + 3) * size;
  wk->atomics = patch_nodes * nc;
  /* the patch nodes' values gathered and added through the node lists, one at a time */
  wk->indexed = patch_nodes * ((n->need_u ? nc : 0) + (n->jacobian ? nc : 0) + (xs ? 3 : 0) + nc);
  /* each node's first touch a call; patches in order find the rest in L1 */
  wk->indexed_first = (double)V->nnodes * ((n->need_u ? nc : 0) + (n->jacobian ? nc : 0) + nc) +
                      (xs ? V->mesh->nvertices * 3.0 : 0);
  /* a group's path: its node range, the node list, the gather; after a barrier the cells'
   * local maps (walks: their events came with the gather) with the stored factors beside
   * them; after another the node list again before the adds. The gather and the scatter
   * loop over the patch's nodes, an item a node: a patch of more nodes than items goes round
   * again, each round waiting on its node numbers (from memory) and then their values (L2),
   * the scatter's on its node numbers (Nsight Compute, P2 tets 48^3 in double, 128 items and
   * about 220 nodes a patch: 64% of the long-scoreboard stalls on the gather loop's loads) */
  const double groups = (ncells + s->block - 1) / s->block;
  const int items = m && walk > 0 ? m->items : cell_items(s->block);
  const double rounds = items > 0 ? ceil(patch_nodes / groups / items) : 1;
  wk->dram_trips = 1 + (walk > 0 ? (recompute ? 0 : 1) : 1) + (rounds - 1);
  wk->l2_trips = 3 + 2 * (rounds - 1);
  wk->phases = 3;
  wk->groups = (long long)groups;
  wk->group_items = s->block;
}

/* Counts of patch.knl on the whole mesh; patch_nodes and walk_events as built (or estimated). */
static void patch_counts(const fe_kernel_spec *s, int ndir, int recompute, double patch_nodes,
                         int walk, double walk_events, const patch_data *m, fe_work *wk)
{
  const fe_space *V = s->V;
  int nb = V->elem.nbasis, nq = s->quad->npoints, dim = V->elem.dim, nc = V->ncomp;
  double ncells = V->mesh->ncells, nnodes = V->nnodes;
  double w = (double)fe_precision_size(s->prec);
  double ngroups = (ncells + s->block - 1) / s->block;
  fe_action_needs n = fe_codegen_needs(s);
  double ff, fbytes;
  fe_codegen_field_counts(s, &ff, &fbytes);
  double xf = (n.need_x ? 2.0 * nb * dim : 0) + ff;
  double geof = recompute ? (s->geo_affine ? 1 : nq) * fe_codegen_map_flops(nb, dim) : 0;
  double per_cell;
  if (s->action == FE_ACTION_DIAGONAL) {
    /* per point: x, u; per (q, b): the basis gradient; per (q, b, k): physics, contraction */
    per_cell = geof + nq * (xf + fe_codegen_eval_flops(nb, dim, nc, n.need_u) + 1 +
                            nb * 2.0 * dim * dim +
                            nb * nc * (n.phys_flops + (n.has_f0 ? 1 : 0) + 2.0 * dim + 2)) +
               nb * nc;
  } else {
    double per_q = xf + fe_codegen_eval_flops(nb, dim, nc, n.need_u) +
                   (n.jacobian ? fe_codegen_eval_flops(nb, dim, nc, 1) : 0) + n.phys_flops + 1 +
                   nc * ((n.has_f0 ? 1 : 0) + dim * (2.0 * dim + 1));
    double per_b = nq * ((n.has_f0 ? 2.0 : 0) + 2.0 * dim) + 1;
    per_cell = geof + nq * per_q + nb * nc * per_b;
  }
  /* the patch sums added into y once per patch node */
  wk->flops = ncells * per_cell + patch_nodes * nc;
  /* of those, the non-FMA ones: the physics' (the diagonal's per (point, b, k)) and the
   * recomputed map's reciprocal determinant (per cell where affine) */
  wk->nonfma = ncells * (nq * (s->action == FE_ACTION_DIAGONAL ? nb * nc : 1) * n.phys_nonfma +
                         (recompute ? (s->geo_affine ? 1 : nq) : 0));
  /* the patches' node lists, their run words and offsets, the cells' local numbers (walks:
   * their events), the patch sums added into y once per patch node */
  double geo = recompute ? 0 : fe_geometry_bytes(s);
  double cellmap = walk > 0 ? walk_events * 4.0 + (ngroups + 1) * 4.0 : ncells * nb * 4.0;
  wk->bytes = fe_codegen_common_bytes(s, ndir) + patch_nodes * 8.0 + (ngroups + 1) * 4.0 +
              cellmap + geo + (n.need_x || recompute ? nnodes * 3 * w : 0);
  patch_traffic(s, &n, recompute, patch_nodes, walk, m, wk);
  /* the phases' work: the gather reads the node lists, the values and coordinates (the rest
   * of the bytes, through L2); the cells their local maps and stored factors, with their
   * flops; the sums write y */
  fe_phase_work *ph = wk->phase_work;
  wk->nphase_work = 3;
  double ybytes = (double)V->ndofs * w;
  ph[1].bytes = cellmap + geo;
  ph[2].bytes = ybytes;
  ph[0].bytes = wk->bytes - ph[1].bytes - ybytes;
  ph[0].l2_bytes = wk->l2_bytes;
  ph[2].flops = patch_nodes * nc;
  ph[1].flops = wk->flops - ph[2].flops;
  ph[1].nonfma = wk->nonfma;
  /* the cpu's hot loop: the points (a cell's, where it has one point: its loop over cells) */
  wk->loop_trips = ncells * nq;
}

static void patch_count(const fe_realization *r, fe_action a, fe_work *w)
{
  const patch_data *d = r->data;
  fe_kernel_spec s;
  fe_realization_spec(r, a, &s);
  patch_counts(&s, r->A->ndir, r->A->geo_recompute, d->patch_nodes, d->walk, d->walk_events, d, w);
  w->groups = r->ngroups;
  w->group_items = (int)group_size(r);
}

/* Before the patches exist, patches of the default block: a patch touches its share of the
 * nodes plus the nodes it shares with its neighbours; taken as 1.25 x the nodes (an estimate;
 * the report counts them). */
static void patch_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                           fe_action a, fe_work *w)
{
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[a], .action = a, .prec = prec,
                      .geo_affine = A->geo_affine,
                      .geo_shared = fe_geometry_shared(A, FE_GEOMETRY_AUTO),
                      .block = default_block(A, be, prec, 0)};
  patch_counts(&s, A->ndir, A->geo_recompute, 1.25 * A->V->nnodes, 0, 0, NULL, w);
}

static void patch_describe(const fe_realization *r, fe_action a, char *buf, size_t n)
{
  (void)a;
  fe_geometry_describe(r, r->A->geo_recompute, buf, n);
}

const fe_strategy fe_strategy_patch = {
    .name = "patch",
    .summary = "patches of cells with local node lists in shared memory, one add per patch "
               "node (felab's own, low orders on GPUs)",
    .applies = patch_applies,
    .options = patch_options,
    .options_size = sizeof(patch_opts),
    .read_options = patch_read_options,
    .effective_key = patch_effective_key,
    .configure = patch_configure,
    .setup = patch_setup,
    .release = patch_release,
    .source = patch_source,
    .entry = patch_entry,
    .integrate = patch_integrate,
    .count = patch_count,
    .estimate = patch_estimate,
    .measured = patch_measured,
    .masks_direction = 1,
    .describe = patch_describe,
};
