/* Strategy "transpose": the quadrature kernel per cell in the thread-transposition shape of
 * Knepley, Rupp and Terrel (engine/codegen/kernels/integrate.knl, diagonal.knl). A work group holds
 * `block` cells; its threads own (cell, point) pairs in the quadrature phase and (cell, basis
 * function) pairs in the basis phase, with the pulled-back physics crossing between them in
 * shared memory. Geometric factors are stored per point (one per cell on affine cells), or on
 * first-order cells of straight geometry (P1, Q1) made again from the cell's vertices at each
 * point (geometry = "vertices": no stored factors, a few dozen flops a point; the model picks
 * when not told). The scatter adds atomically, or plainly on the cpu, where the groups run
 * color by color. Any cell and order; its cost grows as NB x NQ per cell (O(p^6) on hexes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

typedef struct transpose_data {
  fe_buffer cells; /* stored cells x NB node ids */
  int vertices;    /* the factors made from the vertices in the kernel (GEO_RECOMPUTE) */
  int pad0;        /* the first padding cell (the rest of its group is padding; npad: none) */
} transpose_data;

static void transpose_counts(const fe_kernel_spec *s, int ndir, int vertices, fe_work *wk);

static int imax(int a, int b) { return a > b ? a : b; }

static int transpose_applies(const fe_operator *A, const fe_backend *be, fe_precision prec,
                             char *why, size_t n)
{
  return fe_dense_tables_fit(A, be, prec, why, n); /* every cell, order and physics */
}

/* Shared (local) memory one cell of a work group needs: its state and direction values, its
 * node coordinates and the pulled-back physics at its points (integrate.knl). */
static size_t shared_per_cell(const fe_operator *A, fe_precision prec)
{
  const fe_space *V = A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, nq = 0;
  for (int a = 0; a < FE_NACTIONS; a++) nq = imax(nq, A->quad[a].npoints);
  return (size_t)(2 * nb * nc + 3 * nb + nc * (1 + V->elem.dim) * nq) * fe_precision_size(prec);
}

/* Cells per work group: 32 fills a GPU group with (cell, point) threads and, on a CPU,
 * measured fastest for the P1 apply (docs/history.md, issue 2); halved until the group's
 * shared arrays fit the device (high orders). The cpu backend runs a group's cells in SIMD
 * lanes and keeps its arrays in L1: where 32 cells' arrays take more than 3/4 of it (Q2 and
 * up), one vector of cells (8 in double, 16 in single) runs 1.4-1.7x faster than 32
 * (measured: docs/history.md, tenth pass); fewer leaves lanes empty. */
static int default_block(const fe_backend *be, const fe_operator *A, fe_precision prec)
{
  int block = 32;
  size_t per_cell = shared_per_cell(A, prec), limit = fe_shared_limit(be);
  if (be->info.cells_in_lanes) {
    const size_t l1 = be->info.l1_bytes ? be->info.l1_bytes : (size_t)32 << 10;
    if (32 * per_cell > l1 / 4 * 3) block = (int)(64 / fe_precision_size(prec));
  }
  while (block > 1 && block * per_cell > limit) block /= 2;
  return block;
}

/* The model's time of the apply with the factors stored or made from the vertices. */
static double predict_apply(const fe_operator *A, fe_backend *be, fe_precision prec, int block,
                            int vertices, int shared)
{
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[FE_ACTION_APPLY],
                      .action = FE_ACTION_APPLY, .prec = prec, .geo_affine = A->geo_affine,
                      .geo_shared = shared, .block = block};
  fe_work w = {0};
  transpose_counts(&s, A->ndir, vertices, &w);
  return fe_predict_seconds(be, prec, &w);
}

/* Its options, parsed (private to this file): block, geometry (stored, unshared, from the
 * vertices) and fold. */
static const char *const transpose_options[] = {"block", "geometry", "fold", NULL};
typedef struct transpose_opts {
  int block;    /* cells per work group (0: default_block) */
  int geometry; /* FE_GEOMETRY_* */
  int fold;     /* FE_FOLD_* */
} transpose_opts;

static int transpose_read_options(const fe_options *g, const char *caller, void *opts)
{
  transpose_opts *o = opts;
  FE_CHECK(fe_read_block(g, caller, &o->block));
  FE_CHECK(fe_read_geometry(g, caller, &o->geometry));
  return fe_read_fold(g, caller, &o->fold);
}

/* Whether the factors are made from the vertices: asked, or where the model says it pays. */
static int pick_vertices(const fe_operator *A, fe_backend *be, fe_precision prec, int block,
                         const transpose_opts *o)
{
  if (o->geometry != FE_GEOMETRY_AUTO) return o->geometry == FE_GEOMETRY_VERTICES;
  return A->geo_recompute &&
         predict_apply(A, be, prec, block, 1, 0) <=
             predict_apply(A, be, prec, block, 0, fe_geometry_shared(A, o->geometry));
}

static void transpose_effective_key(const fe_operator *A, fe_backend *be, fe_precision prec,
                                    const void *opts, char *key, size_t n)
{
  const transpose_opts *o = opts;
  int block = o->block > 0 ? o->block : default_block(be, A, prec);
  snprintf(key, n, "block=%d geometry=%s fold=%s", block,
           fe_geometry_key(A, o->geometry, pick_vertices(A, be, prec, block, o)),
           fe_fold_key(A, o->fold));
}

static int transpose_configure(fe_realization *r, const void *opts)
{
  const fe_operator *A = r->A;
  const transpose_opts *o = opts;
  FE_CHECK(fe_qdata_folds(A, o->fold, &r->folded));
  r->geo_shared = fe_geometry_shared(A, o->geometry);
  transpose_data *d;
  FE_CALLOC(d, 1, "transpose data");
  r->data = d;
  int block = o->block > 0 ? o->block : default_block(r->be, r->A, r->prec);
  FE_ASSERT(block <= 4096, FE_ERR_ARG, "block = %d cells per work group is too large", block);
  size_t need = block * shared_per_cell(r->A, r->prec), limit = fe_shared_limit(r->be);
  FE_ASSERT(need <= limit || block == 1, FE_ERR_ARG,
            "block = %d cells of %s need %zu bytes of shared memory per work group; %s allows "
            "%zu (use a smaller block)", block, r->A->V->name, need, r->be->name, limit);
  r->block = block;
  FE_ASSERT(o->geometry != FE_GEOMETRY_VERTICES || A->geo_recompute, FE_ERR_ARG,
            "geometry = \"vertices\" needs first-order cells on straight geometry (P1, Q1); "
            "%s%s is not: use \"stored\"", A->V->name, A->V->curved ? " on curved cells" : "");
  d->vertices = pick_vertices(A, r->be, r->prec, block, o);
  /* only where a group's items run one after another (the cpu) may groups of one color
   * scatter with plain adds; GPUs and OpenCL devices use atomics */
  r->colored = r->be->info.items_in_order;
  r->phases = 1;
  /* folded words as the quadrature phase's items read them: the cpu's points outermost and
   * the group's cells in SIMD lanes; a GPU's items a cell's points side by side */
  r->qd_cells_fastest = r->be->info.cells_in_lanes;
  return 0;
}

/* The element matrices' geometry (fe_strategy's geometry_options): the block asked, the
 * factors as asked, or stored where the model would make them from the vertices (unshared
 * stays unshared). */
static void transpose_geometry_options(void *opts, int block, int geometry, int stored)
{
  transpose_opts *o = opts;
  o->block = block;
  o->geometry = stored && geometry != FE_GEOMETRY_UNSHARED ? FE_GEOMETRY_STORED : geometry;
}

/* r holds the apply's factors: stored, not made from the vertices. */
static int transpose_gives_geometry(const fe_realization *r)
{
  return r->geo[FE_ACTION_APPLY].ptr != NULL;
}

/* The factors made from the vertices in action a (not where the apply reads folded words). */
static int action_vertices(const fe_realization *r, fe_action a)
{
  return ((const transpose_data *)r->data)->vertices && !(r->folded && a == FE_ACTION_APPLY);
}

/* The cell map in the order of perm, padding cells copying their group's first cell. */
typedef struct cells_job {
  const fe_space *V;
  const int *perm;
  size_t npad;
  int block;
} cells_job;

/* A group's cells are mostly the mesh's consecutive ones (fe_realization_schedule keeps the
 * mesh's order within a group): those are one copy a group, the rest one a cell. */
static int cells_fill(void *ctx, void *out)
{
  const cells_job *j = ctx;
  const size_t nb = (size_t)j->V->elem.nbasis, bs = (size_t)j->block;
  const int *perm = j->perm;
  int *cells = out;
#pragma omp parallel for schedule(static)
  for (size_t g = 0; g < j->npad / bs; g++) {
    const size_t i = g * bs;
    size_t run = 1;
    while (run < bs && perm[i + run] == perm[i] + (int)run) run++;
    if (perm[i] >= 0 && run == bs) {
      memcpy(cells + i * nb, j->V->cell_nodes + (size_t)perm[i] * nb, sizeof(int) * nb * bs);
      continue;
    }
    for (size_t k = i; k < i + bs; k++)
      memcpy(cells + k * nb, j->V->cell_nodes + (size_t)fe_stored_cell(perm, k) * nb,
             sizeof(int) * nb);
  }
  return 0;
}

/* The stored cells' nodes, written straight into the buffer. */
static int upload_cells(fe_realization *r, const int *perm, size_t npad, fe_buffer *buf)
{
  cells_job job = {r->A->V, perm, npad, r->block};
  FE_CHECK(fe_memory_check_on(r->be, sizeof(int) * npad * r->A->V->elem.nbasis, "operator %s on "
                              "%s: the cell map (%zu cells of %d nodes)", r->A->pde->name,
                              r->A->V->name, npad, r->A->V->elem.nbasis));
  return fe_fill_buffer(r->be, sizeof(int) * npad * r->A->V->elem.nbasis, buf, cells_fill, &job);
}

static int transpose_setup(fe_realization *r)
{
  transpose_data *d = r->data;
  int *perm = NULL;
  size_t npad = 0;
  int rc = fe_realization_schedule(r, 0, &perm, &npad);
  if (!rc) { /* the padding: the tail of one group (checked: the kernel relies on it) */
    const size_t bs = (size_t)r->block, ng = npad / bs;
    size_t g = 0, i, end;
    while (g < ng && perm[g * bs + bs - 1] >= 0) g++; /* the group whose tail is padding */
    for (i = g * bs; i < npad && perm[i] >= 0; i++) {}
    end = g < ng ? g * bs + bs : npad;
    d->pad0 = (int)i;
    size_t j = i;
    while (j < end && perm[j] < 0) j++;
    if (j < end || end - i != npad - (size_t)r->A->V->mesh->ncells)
      rc = fe_error_set(FE_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                        "transpose: stored cell %zu of %zu: the padding is not one group's tail",
                        j, npad);
  }
  if (!rc) rc = upload_cells(r, perm, npad, &d->cells);
  if (!rc) rc = fe_realization_geometry(r, d->vertices, perm, npad);
  if (!rc) rc = fe_realization_cell_data(r, perm, npad);
  return rc;
}

static void transpose_release(fe_realization *r)
{
  transpose_data *d = r->data;
  if (!d) return;
  if (d->cells.ptr) r->be->ops->release(r->be->impl, &d->cells);
  free(d);
  r->data = NULL;
}

static const char *transpose_entry(fe_action a)
{
  return a == FE_ACTION_DIAGONAL ? "fe_diagonal" : "fe_integrate";
}

static int transpose_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  fe_kernel_spec s;
  fe_realization_action_spec(r, a, &s);
  s.template_name = a == FE_ACTION_DIAGONAL ? "diagonal" : "integrate";
  s.defines = action_vertices(r, a) ? "#define GEO_RECOMPUTE 1\n" : NULL;
  return fe_codegen_action(&s, r->be->name, preamble, src);
}

/* Threads per group on a GPU-like device: one per (cell, point) or (cell, basis function). */
static size_t group_size(const fe_realization *r, fe_action a)
{
  size_t n = (size_t)r->block * (size_t)imax(r->A->quad[a].npoints, r->A->V->elem.nbasis);
  n = (n + 31) / 32 * 32;
  return n > r->be->info.max_group ? r->be->info.max_group : n;
}

/* One launch per color of the integration (or diagonal) kernel. */
static int transpose_integrate(fe_realization *r, fe_action a, const fe_vector *u,
                               const fe_vector *w, fe_vector *y, int *launches)
{
  const fe_operator *A = r->A;
  transpose_data *d = r->data;
  long long geo_n = d->vertices ? d->pad0
                                : (long long)fe_geometry_plane(A, &A->quad[a],
                                                               fe_padded_cells(A, r->block),
                                                               r->geo_shared);
  const fe_buffer *geo = d->vertices ? &r->params : &r->geo[a]; /* unread with vertices */
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
    fe_arg args[16] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = first},
        {.kind = FE_ARG_INT, .i = geo_n},
        {.kind = FE_ARG_BUFFER, .buf = &r->groups},
        {.kind = FE_ARG_BUFFER, .buf = &d->cells},
        {.kind = FE_ARG_BUFFER, .buf = geo},
    };
    fe_physics_args(r, u, w, y, args + 6);
    int nargs = 16;
    if (a == FE_ACTION_DIAGONAL) { /* no direction argument */
      args[14] = args[15];
      nargs = 15;
    }
    FE_CHECK(r->be->ops->launch(r->be->impl, r->kernel[a], (size_t)ng, group_size(r, a), nargs,
                                args, r->prec, NULL));
    (*launches)++;
  }
  fe_realization_runs(r, 0);
  return 0;
}

/* What one group's accesses cost, item t of `items` (items in warps of 32) touching word
 * at(t, j) for j < n, warp by warp: shared memory's wavefronts (fe_bank_wavefronts), the L1's
 * for global loads (fe_l1_wavefronts) or a constant cache's distinct words; with `lines`,
 * each warp's load also counted by the lines it touches (lines[k] += 1, fe_l1_lines). */
typedef long long (*word_of)(int t, int j, const int *shape);
typedef int (*warp_cost)(const long long *idx, int n, int size);

static int distinct_words(const long long *idx, int n, int size)
{
  (void)size;
  return fe_distinct_words(idx, n);
}

/* One j's warps counted word by word (the general path). */
static double group_cost_j(int items, int j, int size, word_of at, const int *shape,
                           warp_cost cost, double *lines)
{
  double total = 0;
  long long idx[32];
  for (int t0 = 0; t0 < items; t0 += 32) {
    int m = items - t0 < 32 ? items - t0 : 32;
    for (int t = 0; t < m; t++) idx[t] = at(t0 + t, j, shape);
    total += cost(idx, m, size);
    if (lines) lines[fe_l1_lines(idx, m, size)] += 1;
  }
  return total;
}

/* Every word_of here is an item's part plus j's: at(t, j) = at(t, 0) + at(0, j) - at(0, 0).
 * A warp's words for j are then its words for 0 shifted alike, and every cost here is the
 * same under such a shift (shared memory's banks rotate, distinct words stay distinct): each
 * warp's cost is counted once, and its lines, which depend on where its first word falls in
 * a 128-byte line, once per such place. Each j is checked on two items and counted word by
 * word where they differ. (The counts of every case compared equal the word-by-word ones;
 * a Q7 apply's first call on the cpu spent 4.6 s in them, 0.9 s with a cost a warp and j.) */
static double group_cost(int items, int n, int size, word_of at, const int *shape,
                         warp_cost cost, double *lines)
{
  if (items <= 0 || n <= 0) return 0;
  const int warps = (items + 31) / 32;
  const int per_line = size > 0 && 128 % size == 0 && 128 / size <= 32 ? 128 / size : 0;
  long long *base = malloc(sizeof(long long) * (size_t)items);
  signed char(*seen)[32] = malloc(sizeof *seen * (size_t)warps);
  double total = 0, per_j = 0;
  if (!base || !seen || per_line == 0) { /* (no memory, or lines of other sizes) */
    for (int j = 0; j < n; j++) total += group_cost_j(items, j, size, at, shape, cost, lines);
    free(base), free(seen);
    return total;
  }
  for (int t = 0; t < items; t++) base[t] = at(t, 0, shape);
  memset(seen, -1, sizeof *seen * (size_t)warps);
  for (int t0 = 0; t0 < items; t0 += 32)
    per_j += cost(base + t0, items - t0 < 32 ? items - t0 : 32, size);
  for (int j = 0; j < n; j++) {
    const long long s = at(0, j, shape) - base[0];
    if (items > 1 && (at(items - 1, j, shape) != base[items - 1] + s ||
                      at(items / 2, j, shape) != base[items / 2] + s)) {
      total += group_cost_j(items, j, size, at, shape, cost, lines);
      continue;
    }
    total += per_j;
    for (int t0 = 0; lines && t0 < items; t0 += 32) {
      const int m = items - t0 < 32 ? items - t0 : 32;
      const int place = (int)(((base[t0] + s) % per_line + per_line) % per_line);
      signed char *k = &seen[t0 / 32][place];
      if (*k < 0) {
        long long idx[32];
        for (int t = 0; t < m; t++) idx[t] = base[t0 + t] + s;
        *k = (signed char)fe_l1_lines(idx, m, size);
      }
      lines[(int)*k] += 1;
    }
  }
  free(base), free(seen);
  return total;
}

static double group_wavefronts(int items, int n, int size, word_of at, const int *shape)
{
  return group_cost(items, n, size, at, shape, fe_bank_wavefronts, NULL);
}
static double group_store_wavefronts(int items, int n, int size, word_of at, const int *shape)
{
  return group_cost(items, n, size, at, shape, fe_bank_store_wavefronts, NULL);
}

/* The templates' shared arrays (shape: BLOCK, NB, NQ, NC): the gather's stores to
 * ue[(b NC + k) BLOCK + e] (item e NB + b, j = k); the quadrature phase's loads of
 * ue[j BLOCK + e] (item e NQ + q) and its stores of fq[j BLOCK NQ + t]; the basis phase's
 * loads of fq[j BLOCK NQ + e NQ + q] (item e NB + b, j over the fluxes and points). */
static long long gather_word(int t, int j, const int *sh)
{
  return (long long)((t % sh[1]) * sh[3] + j) * sh[0] + t / sh[1];
}
static long long point_load_word(int t, int j, const int *sh) { return (long long)j * sh[0] + t / sh[2]; }
static long long point_store_word(int t, int j, const int *sh)
{
  return (long long)j * sh[0] * sh[2] + t;
}
static long long basis_load_word(int t, int j, const int *sh)
{
  int q = j % sh[2], f = j / sh[2];
  return (long long)f * sh[0] * sh[2] + (t / sh[1]) * sh[2] + q;
}

/* The tables as the kernels lay them out (docs/elements.md; shape: BLOCK, NB, NQ, NC, DIM):
 * the quadrature phase's item e NQ + q reads row q of B (B[q NB + j]) and of D
 * (D[q NB DIM + j]); the basis phase's item e NB + b reads column b: B[q NB + b] (j = q) and
 * D[(q NB + b) DIM + i] (j = q DIM + i). */
static long long point_b_word(int t, int j, const int *sh)
{
  return (long long)(t % sh[2]) * sh[1] + j;
}
static long long point_d_word(int t, int j, const int *sh)
{
  return (long long)(t % sh[2]) * sh[1] * sh[4] + j;
}
static long long basis_b_word(int t, int j, const int *sh)
{
  return (long long)j * sh[1] + t % sh[1];
}
static long long basis_d_word(int t, int j, const int *sh)
{
  return ((long long)(j / sh[4]) * sh[1] + t % sh[1]) * sh[4] + j % sh[4];
}
/* The tables' loads of one group: per field the row of B and DIM of D at the item's point;
 * with the basis phase, per flux the column of the item's basis function at every point
 * (with `lines`, their requests by the lines they touch, as group_cost). */
static double table_cost(const int *sh, int fields, int basis, int f0, int size, warp_cost cost,
                         double *lines)
{
  const int block = sh[0], nb = sh[1], nq = sh[2], nc = sh[3], dim = sh[4];
  double t = 0;
  for (int f = 0; f < fields; f++)
    t += group_cost(block * nq, nb, size, point_b_word, sh, cost, lines) +
         group_cost(block * nq, nb * dim, size, point_d_word, sh, cost, lines);
  for (int k = 0; basis && k < nc; k++)
    t += (f0 ? group_cost(block * nb, nq, size, basis_b_word, sh, cost, lines) : 0) +
         group_cost(block * nb, nq * dim, size, basis_d_word, sh, cost, lines);
  return t;
}

/* One factor of the quadrature phase's item e NQ + q: per point (cell-major) or per cell. */
static long long point_factor_word(int t, int j, const int *sh) { (void)j, (void)sh; return t; }
static long long cell_factor_word(int t, int j, const int *sh) { (void)j; return t / sh[2]; }
/* item t = (cell e, point q) of folded words laid out with the cells fastest */
static long long cell_lane_word(int t, int j, const int *sh)
{
  (void)j;
  return (long long)(t % sh[2]) * sh[0] + t / sh[2];
}

/* The gathers' L1 wavefronts per group, from the space's own cell map (a sample of up to 64
 * groups of cells in the mesh's order): each field's NC values and, with xs, the three
 * coordinates of each (cell, node) item, and the cell map's two reads; their requests by the
 * lines they touch added to lines[] (per group). */
static double gather_wavefronts(const fe_space *V, int block, int fields, int xs, int size,
                                double *lines)
{
  const int nb = V->elem.nbasis, nc = V->ncomp, items = block * nb;
  const long long ncells = V->mesh->ncells;
  long long ngroups = (ncells + block - 1) / block, step = ngroups > 64 ? ngroups / 64 : 1;
  double total = 0, sampled = 0, seen[FE_L1_LINES + 1] = {0};
  long long idx[32];
  for (long long g = 0; g < ngroups; g += step, sampled++)
    for (int t0 = 0; t0 < items; t0 += 32) {
      int m = items - t0 < 32 ? items - t0 : 32;
      int node[32];
      for (int t = 0; t < m; t++) {
        long long c = g * block + (t0 + t) / nb;
        node[t] = c < ncells ? V->cell_nodes[c * nb + (t0 + t) % nb] : -1;
        idx[t] = c < ncells ? c * nb + (t0 + t) % nb : -1; /* the node number's word */
      }
      seen[fe_l1_lines(idx, m, 4)] += 2; /* in the gather and again before the adds */
      for (int k = 0; k < nc; k++) {
        for (int t = 0; t < m; t++) idx[t] = node[t] < 0 ? -1 : (long long)node[t] * nc + k;
        total += fields * fe_l1_wavefronts(idx, m, size);
        seen[fe_l1_lines(idx, m, size)] += fields;
      }
      for (int d = 0; xs && d < 3; d++) {
        for (int t = 0; t < m; t++) idx[t] = node[t] < 0 ? -1 : (long long)node[t] * 3 + d;
        total += fe_l1_wavefronts(idx, m, size);
        seen[fe_l1_lines(idx, m, size)] += 1;
      }
      total += 2; /* the node numbers: one wavefront, in the gather and again before the adds */
    }
  for (int k = 0; k <= FE_L1_LINES && sampled > 0; k++) lines[k] += seen[k] / sampled;
  return sampled > 0 ? total / sampled : 0;
}

/* Shared wavefront bytes and atomics of integrate.knl and diagonal.knl on the whole mesh. */
static void transpose_traffic(const fe_kernel_spec *s, const fe_action_needs *n, int vertices,
                              fe_work *wk)
{
  const fe_space *V = s->V;
  int nb = V->elem.nbasis, nq = s->quad->npoints, nc = V->ncomp, dim = V->elem.dim;
  int size = (int)fe_precision_size(s->prec), block = s->block > 0 ? s->block : 1;
  const int shape[5] = {block, nb, nq, nc, dim}, diag = s->action == FE_ACTION_DIAGONAL;
  int fields = (n->need_u ? 1 : 0) + (n->jacobian ? 1 : 0);
  int nf = nc * (1 + dim); /* fluxes per point */
  double w = 0, wg, wq = 0; /* of them the gather's (phase 0) and the quadrature phase's */
  w += fields * group_store_wavefronts(block * nb, nc, size, gather_word, shape);
  int xs = diag ? n->need_x : n->need_x || vertices; /* xe loads */
  if (xs) w += group_store_wavefronts(block * nb, 3, size, gather_word, shape);
  wg = w;
  w += fields * group_wavefronts(block * nq, nb * nc, size, point_load_word, shape);
  if (xs) w += group_wavefronts(block * nq, nb * 3, size, point_load_word, shape);
  if (!diag) {
    w += group_store_wavefronts(block * nq, nf, size, point_store_word, shape);
    wq = w - wg;
    /* the basis phase reads each flux at consecutive points, which nvcc loads 16 (8) bytes
     * at a time where the rows stay aligned: NQ doubles even, NQ floats a multiple of 4 (2)
     * (cuobjdump: LDS.128 at Q1 and P2, single LDS.64 at Q2's 27 points) */
    int v = (nq * size) % 16 == 0 ? 16 / size : size < 8 && (nq * size) % 8 == 0 ? 8 / size : 1;
    int vshape[5] = {block, nb, nq / v, nc, dim}, fluxes = nc * ((n->has_f0 ? 1 : 0) + dim);
    w += group_wavefronts(block * nb, fluxes * (nq / v), size * v, basis_load_word, vshape);
  }
  double ngroups = (double)((V->mesh->ncells + block - 1) / block); /* whole groups */
  wk->shared_bytes = ngroups * w * 128;
  /* the tables: distinct words for a constant cache; on GPUs where they are global memory,
   * the L1's wavefronts, as are the stored factors and the gathers always (the apply and the
   * residual; the diagonal's tables stay counted as `constant`) */
  /* (the quadrature phase's point tables, then the basis phase's) */
  double point_words = table_cost(shape, fields, 0, n->has_f0, size, distinct_words, NULL);
  wk->constant = ngroups * (point_words + (diag ? 0 : table_cost(shape, 0, 1, n->has_f0, size,
                                                                 distinct_words, NULL)));
  fe_phase_work *ph = wk->phase_work; /* the gather, the quadrature phase, the basis phase */
  if (!diag) {
    double tq[FE_L1_LINES + 1] = {0}, tb[FE_L1_LINES + 1] = {0}; /* a group's table requests */
    double ll[FE_L1_LINES + 1] = {0}, lq[FE_L1_LINES + 1] = {0}; /* its other loads', the factors' */
    double point_tables = table_cost(shape, fields, 0, n->has_f0, size, fe_l1_wavefronts, tq);
    double basis_tables = table_cost(shape, 0, 1, n->has_f0, size, fe_l1_wavefronts, tb);
    wk->table_wavefronts = ngroups * (point_tables + basis_tables);
    /* shared: each item's class (an int a cell), then its factors from a few sets (a
     * warp's classes in one line: a wavefront a factor) */
    double fl = 0;
    if (s->folded) { /* the folded words: a point's, planes apart */
      fl = group_cost(block * nq, 1, size, s->qd_cells_fastest ? cell_lane_word : point_factor_word,
                      shape, fe_l1_wavefronts, ll);
      fe_qdata_layout L;
      char why[160];
      fe_qdata_layout_of(s->pde, dim, &L, why, sizeof why);
      const int words = L.words;
      for (int k = 0; k <= FE_L1_LINES; k++) ll[k] *= words;
      fl *= words;
    } else if (!vertices && s->geo_shared) {
      fl = group_cost(block * nq, 1, 4, cell_factor_word, shape, fe_l1_wavefronts, ll) +
           fe_geo_stride(dim) * ceil(block * nq / 32.0);
      ll[1] += fe_geo_stride(dim) * ceil(block * nq / 32.0);
    } else if (!vertices) {
      word_of at = s->geo_affine ? cell_factor_word : point_factor_word;
      fl = group_cost(block * nq, 1, size, at, shape, fe_l1_wavefronts, ll);
      for (int k = 0; k <= FE_L1_LINES; k++) ll[k] *= fe_geo_stride(dim);
      fl *= fe_geo_stride(dim);
    }
    memcpy(lq, ll, sizeof lq); /* the factors' */
    double gathers = gather_wavefronts(V, block, fields, xs, size, ll);
    wk->l1_wavefronts = ngroups * (fl + gathers);
    for (int k = 0; k <= FE_L1_LINES; k++) {
      wk->table_lines[k] = ngroups * (tq[k] + tb[k]);
      wk->l1_lines[k] = ngroups * ll[k];
      ph[0].lines += ngroups * k * (ll[k] - lq[k]);
      ph[1].lines += ngroups * k * lq[k];
      ph[1].table_lines += ngroups * k * tq[k];
      ph[2].table_lines += ngroups * k * tb[k];
    }
    ph[0].l1_wavefronts = ngroups * gathers;
    ph[1].l1_wavefronts = ngroups * fl;
    ph[1].table_wavefronts = ngroups * point_tables;
    ph[2].table_wavefronts = ngroups * basis_tables;
    ph[1].constant = ngroups * point_words;
    ph[2].constant = wk->constant - ph[1].constant;
    ph[0].shared_bytes = ngroups * wg * 128;
    ph[1].shared_bytes = ngroups * wq * 128;
    ph[2].shared_bytes = wk->shared_bytes - ph[0].shared_bytes - ph[1].shared_bytes;
  }
  wk->atomics = (double)V->mesh->ncells * nb * nc;
  /* the gathers: fields, the cell map, and with vertices the coordinates (the diagonal's
   * items read them at every point) */
  double xg = vertices ? (s->action == FE_ACTION_DIAGONAL ? nb * nq * 3.0 : 3.0) * size : 0;
  wk->l2_bytes = (double)V->mesh->ncells * nb * (fields * nc * size + 4.0 + xg);
  /* the values gathered through the cell map (fields, the vertices' coordinates: the
   * diagonal's items at every point) and added back, one at a time */
  double xi = vertices && s->action == FE_ACTION_DIAGONAL ? nq * 3.0 : xs ? 3 : 0;
  wk->indexed = (double)V->mesh->ncells * nb * (fields * nc + xi + nc);
  /* each node's first touch a call; the cpu's walk finds the rest in L1 */
  wk->indexed_first = (double)V->nnodes * (fields * nc + nc) + (xi > 0 ? V->mesh->nvertices * 3.0 : 0);
}

/* Counts of the templates' loops on the whole mesh, for cells of `block` per group, with the
 * factors stored or made from the vertices at every (cell, point) item. */
static void transpose_counts(const fe_kernel_spec *s, int ndir, int vertices, fe_work *wk)
{
  const fe_space *V = s->V;
  int nb = V->elem.nbasis, nq = s->quad->npoints, dim = V->elem.dim, nc = V->ncomp;
  double ncells = V->mesh->ncells, nnodes = V->nnodes;
  double w = (double)fe_precision_size(s->prec);
  double ngroups = (double)((V->mesh->ncells + s->block - 1) / s->block); /* whole groups */
  fe_action_needs n = fe_codegen_needs(s);
  double ff, fbytes;
  fe_codegen_field_counts(s, &ff, &fbytes);
  double xf = (n.need_x ? 2.0 * nb * dim : 0) + ff; /* coordinates and fields at a point */
  if (vertices) xf += fe_codegen_map_flops(nb, dim); /* each (cell, point) makes the map */
  double per_cell;
  if (s->action == FE_ACTION_DIAGONAL) {
    /* per (b, k, q): x, u, the direction's gradient, physics, contraction, accumulate */
    double per_q = xf + fe_codegen_eval_flops(nb, dim, nc, n.need_u) + 2.0 * dim * dim +
                   n.phys_flops + (n.has_f0 ? 1 : 0) + 2.0 * dim + 3;
    per_cell = nb * nc * (nq * per_q + 1);
  } else {
    /* quadrature phase per point, then basis phase per (b, k); folded: the direction's value
     * and reference gradient, then its stored words contracted */
    double per_q = xf + fe_codegen_eval_flops(nb, dim, nc, n.need_u) +
                   (n.jacobian ? fe_codegen_eval_flops(nb, dim, nc, 1) : 0) + n.phys_flops + 1 +
                   nc * ((n.has_f0 ? 1 : 0) + dim * (2.0 * dim + 1));
    if (s->folded) {
      fe_qdata_layout L;
      char why[160];
      fe_qdata_layout_of(s->pde, dim, &L, why, sizeof why);
      per_q = nc * nb * (2.0 + 2.0 * dim) + fe_qdata_apply_flops(&L);
    }
    double per_b = nq * ((n.has_f0 ? 2.0 : 0) + 2.0 * dim) + 1;
    per_cell = nq * per_q + nb * nc * per_b;
    /* on the cpu both phases are SIMD over the group's cells, all but the adds into y */
    wk->vec_flops = ncells * (per_cell - nb * nc);
    wk->lanes = s->block;
    /* the cpu's group geometry (TR_GROUP_GEOMETRY: shared affine sets) */
    if (!vertices && s->geo_affine && s->geo_shared) fe_group_factor_work(s, wk);
  }
  wk->flops = ncells * per_cell;
  /* of those, the non-FMA ones: the physics' at each point (the diagonal's at each (b, k,
   * point)), with vertices the map's reciprocal determinant wherever the map is made */
  double evals = s->action == FE_ACTION_DIAGONAL ? nb * nc * nq : nq;
  wk->nonfma = s->folded ? 0 : ncells * evals * (n.phys_nonfma + (vertices ? 1 : 0));
  /* minimal traffic: each array once */
  double geo = s->folded ? fe_qdata_bytes(s) : vertices ? 0 : fe_geometry_bytes(s);
  wk->bytes = fe_codegen_common_bytes(s, ndir) + ncells * nb * 4.0 + geo +
              (n.need_x || vertices ? nnodes * 3 * w : 0) + ngroups * 4.0;
  wk->phase_bytes = s->folded ? geo : 0; /* read in the quadrature phase alone (the cpu) */
  transpose_traffic(s, &n, vertices, wk);
  /* a group's path: its block number, the cell map, the gather; the quadrature phase reads
   * the stored factors after a barrier, the basis phase the cell map again before its adds.
   * The diagonal has no barrier: its factors come beside the cell map. */
  int diag = s->action == FE_ACTION_DIAGONAL;
  wk->dram_trips = 1 + (!vertices && !diag ? 1 : 0);
  wk->l2_trips = diag ? 2 : 3;
  wk->phases = diag ? 0 : 3;
  /* the phases' work: the gather reads the cell map, the fields and coordinates (the rest of
   * the bytes); the quadrature phase the stored factors and its tables, with its flops; the
   * basis phase its tables, the cell map again (L2) and writes y. The diagonal, without
   * barriers, is one phase. */
  fe_phase_work *ph = wk->phase_work;
  if (diag) {
    wk->nphase_work = 1;
    ph[0] = (fe_phase_work){.bytes = wk->bytes, .l2_bytes = wk->l2_bytes,
                            .shared_bytes = wk->shared_bytes, .flops = wk->flops,
                            .nonfma = wk->nonfma, .constant = wk->constant};
    return;
  }
  wk->nphase_work = 3;
  double ybytes = (double)V->ndofs * w;
  ph[1].bytes = geo;
  ph[2].bytes = ybytes;
  ph[0].bytes = wk->bytes - geo - ybytes;
  ph[2].l2_bytes = ncells * nb * 4.0;
  ph[0].l2_bytes = wk->l2_bytes - ph[2].l2_bytes;
  ph[2].flops = ncells * nb * nc * (nq * ((n.has_f0 ? 2.0 : 0) + 2.0 * dim) + 1);
  ph[1].flops = wk->flops - ph[2].flops;
  ph[1].nonfma = wk->nonfma;
}

static void transpose_count(const fe_realization *r, fe_action a, fe_work *w)
{
  fe_kernel_spec s;
  fe_realization_action_spec(r, a, &s);
  transpose_counts(&s, r->A->ndir, action_vertices(r, a), w);
  w->groups = r->ngroups;
  w->group_items = (int)group_size(r, a);
}

static void transpose_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                               fe_action a, fe_work *w)
{
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[a], .action = a, .prec = prec,
                      .geo_affine = A->geo_affine,
                      .geo_shared = fe_geometry_shared(A, FE_GEOMETRY_AUTO),
                      .block = default_block(be, A, prec)};
  if (a == FE_ACTION_APPLY && fe_qdata_folds(A, FE_FOLD_AUTO, &s.folded)) fe_error_clear();
  s.qd_cells_fastest = be->info.cells_in_lanes;
  transpose_counts(&s, A->ndir, 0, w);
  if (!A->geo_recompute || s.folded) return;
  fe_work w2 = {0};
  transpose_counts(&s, A->ndir, 1, &w2);
  if (w2.bytes < w->bytes) *w = w2; /* the cheaper geometry by the bytes that bind them */
}

static void transpose_describe(const fe_realization *r, fe_action a, char *buf, size_t n)
{
  fe_action_geometry_describe(r, a, action_vertices(r, a), buf, n);
}

const fe_strategy fe_strategy_transpose = {
    .name = "transpose",
    .summary = "a quadrature kernel per cell: (cell, point) then (cell, basis function) threads, "
               "geometry stored or from the vertices (Knepley-Rupp-Terrel)",
    .applies = transpose_applies,
    .options = transpose_options,
    .options_size = sizeof(transpose_opts),
    .read_options = transpose_read_options,
    .effective_key = transpose_effective_key,
    .configure = transpose_configure,
    .setup = transpose_setup,
    .release = transpose_release,
    .source = transpose_source,
    .entry = transpose_entry,
    .integrate = transpose_integrate,
    .count = transpose_count,
    .describe = transpose_describe,
    .estimate = transpose_estimate,
    .geometry_options = transpose_geometry_options,
    .gives_geometry = transpose_gives_geometry,
};
