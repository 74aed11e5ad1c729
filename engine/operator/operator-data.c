/* A realization's data on its device, shared by every strategy: buffers filled in place or
 * through a staging copy, the cells' stored order and the work-group schedule by color, the
 * per-cell constants, the auxiliary fields' dof maps, the named constants (checked in single
 * precision), the stored geometry, the physics' kernel arguments; and the small helpers
 * the strategies share (kernel specs, padded cells). Part of engine/operator/operator.c's
 * operator (operator-private.h). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"
#include "engine/operator/operator.h"
#include "engine/operator/operator-private.h"
#include "engine/operator/strategy.h"
#include "engine/parallel/dist.h"
#include "engine/physics/expr.h"

/* ---- helpers the strategies share ---- */

size_t fe_shared_limit(const fe_backend *be)
{
  return be->info.stack_shared ? be->info.stack_shared : be->info.local_mem;
}

int fe_dense_tables_fit(const fe_operator *A, const fe_backend *be, fe_precision prec, char *why,
                        size_t n)
{
  const size_t limit = be->info.constant_tables;
  const int nb = A->V->elem.nbasis, dim = A->V->elem.dim;
  size_t most = 0;
  for (int a = 0; a < FE_NACTIONS; a++) { /* B, D and W of the action's rule */
    const size_t nq = (size_t)A->quad[a].npoints;
    const size_t bytes = (nq * (size_t)nb * (size_t)(1 + dim) + nq) * fe_precision_size(prec);
    if (bytes > most) most = bytes;
  }
  if (!limit || most <= limit) return 0;
  snprintf(why, n, "its tables of %s (B, D, W: %zu bytes) exceed %s's constant memory (%zu "
           "bytes)", A->V->name, most, be->info.name, limit);
  return 1;
}

size_t fe_padded_cells(const fe_operator *A, int block)
{
  size_t n = (size_t)A->V->mesh->ncells;
  return (n + block - 1) / block * block;
}

void fe_realization_spec(const fe_realization *r, fe_action a, fe_kernel_spec *s)
{
  memset(s, 0, sizeof *s);
  s->V = r->A->V;
  s->pde = r->A->pde;
  s->quad = &r->A->quad[a];
  s->action = a;
  s->prec = r->prec;
  s->block = r->block;
  s->colored = r->colored;
  s->geo_affine = r->A->geo_affine;
  s->geo_shared = r->geo_shared;
  s->dense = 1;
  s->shift_x = fe_coords_origin(r->A->V, r->prec, s->x0);
}

int fe_coords_origin(const fe_space *V, fe_precision prec, double o[3])
{
  o[0] = o[1] = o[2] = 0;
  if (prec == FE_DOUBLE || V->nnodes <= 0 || !V->node_coords) return 0;
  for (int d = 0; d < 3; d++) o[d] = (double)(float)V->node_coords[d];
  return 1;
}

/* V's node coordinates less the origin, as floats (the single precision's). */
static void coords_shifted(const fe_space *V, float *out)
{
  double o[3];
  fe_coords_origin(V, FE_FLOAT, o);
  const size_t n = (size_t)V->nnodes;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) out[3 * i + d] = (float)(V->node_coords[3 * i + d] - o[d]);
}

static int coords_fill(void *ctx, void *out, fe_precision prec)
{
  (void)prec; /* single: double's are V's own */
  coords_shifted(ctx, out);
  return 0;
}

int fe_upload_coords(fe_backend *be, fe_precision prec, const fe_space *V, fe_buffer *buf)
{
  const size_t n = 3 * (size_t)V->nnodes;
  if (prec == FE_DOUBLE) return fe_upload_reals(be, prec, V->node_coords, n, buf);
  return fe_fill_reals(be, prec, n, buf, coords_fill, (void *)V);
}

const void *fe_host_coords(const fe_space *V, fe_precision prec, void **own)
{
  *own = NULL;
  if (prec == FE_DOUBLE) return V->node_coords;
  float *f = malloc(sizeof(float) * (3 * (size_t)V->nnodes + 1));
  if (f) coords_shifted(V, f);
  *own = f;
  return f;
}

void fe_realization_action_spec(const fe_realization *r, fe_action a, fe_kernel_spec *s)
{
  fe_realization_spec(r, a, s);
  s->folded = r->folded && a == FE_ACTION_APPLY;
  s->qd_cells_fastest = r->qd_cells_fastest;
  s->qd_column = r->qd_column;
}

/* A new buffer of `bytes`, written by fill(ctx, out): in place where the backend's memory is
 * the host's (the cpu), else through one staging copy. */
int fe_fill_buffer(fe_backend *be, size_t bytes, fe_buffer *buf, int (*fill)(void *ctx, void *out),
                   void *ctx)
{
  if (!be->ops->host) /* the staging copy below (a device's buffer is checked by its caller) */
    FE_CHECK(fe_memory_check(bytes, "staging a buffer of %s for the device", be->info.name));
  FE_CHECK(be->ops->alloc(be->impl, bytes ? bytes : 1, buf));
  void *at = be->ops->host ? be->ops->host(be->impl, buf) : NULL;
  void *stage = at ? NULL : malloc(bytes + 1); /* written once, copied: populating it first
                                                 * measured slower */
  int rc = !at && !stage ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                       "out of host memory: %.1f MiB to stage a buffer",
                                       bytes / 1048576.0)
                         : fill(ctx, at ? at : stage);
  if (!rc && stage) rc = be->ops->write(be->impl, buf, 0, bytes, stage);
  free(stage);
  if (rc) {
    be->ops->release(be->impl, buf);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

typedef struct reals_job {
  int (*fill)(void *ctx, void *out, fe_precision prec);
  void *ctx;
  fe_precision prec;
} reals_job;

static int reals_fill(void *ctx, void *out)
{
  const reals_job *j = ctx;
  return j->fill(j->ctx, out, j->prec);
}

/* The same for n reals of precision prec; fill writes them in that precision. */
int fe_fill_reals(fe_backend *be, fe_precision prec, size_t n, fe_buffer *buf,
                  int (*fill)(void *ctx, void *out, fe_precision prec), void *ctx)
{
  reals_job job = {fill, ctx, prec};
  return fe_fill_buffer(be, n * fe_precision_size(prec), buf, reals_fill, &job);
}

/* Upload n doubles as reals of precision prec into a new buffer. */
int fe_upload_reals(fe_backend *be, fe_precision prec, const double *v, size_t n, fe_buffer *buf)
{
  size_t w = fe_precision_size(prec);
  FE_CHECK(be->ops->alloc(be->impl, n * w, buf));
  int rc;
  if (prec == FE_DOUBLE) {
    rc = be->ops->write(be->impl, buf, 0, n * w, v);
  } else {
    FE_CHECK(fe_memory_check(n * w, "converting %zu values to single precision", n));
    float *tmp = malloc(n * w + 1);
    if (!tmp) FE_ERROR(FE_ERR_MEM, "out of host memory for a conversion");
    for (size_t i = 0; i < n; i++) tmp[i] = (float)v[i];
    rc = be->ops->write(be->impl, buf, 0, n * w, tmp);
    free(tmp);
  }
  return rc;
}

int fe_upload_ints(fe_backend *be, const int *v, size_t n, fe_buffer *buf)
{
  FE_CHECK(be->ops->alloc(be->impl, n * sizeof(int), buf));
  return be->ops->write(be->impl, buf, 0, n * sizeof(int), v);
}

/* Where each stored cell comes from (order NULL: the mesh's): the blocks in the order of
 * list, each padded to BLOCK cells. A padding cell stores -(c + 1), c the first cell of its
 * own group: it must touch only nodes its group touches anyway, or a plain add of its zero
 * could race with another group of the same color. Storing colors contiguously lets each
 * color's launch stream through memory instead of hopping between blocks. */
static int cell_permutation(const fe_operator *A, const fe_realization *d, const int *list,
                            const int *order, int **perm, size_t *npad)
{
  size_t nc = (size_t)A->V->mesh->ncells, bs = (size_t)d->block;
  *npad = (size_t)d->ngroups * bs;
  FE_CHECK(fe_memory_check(sizeof(int) * *npad, "operator %s on %s: the cells' stored order (%zu "
                           "cells)", A->pde->name, A->V->name, *npad));
  FE_MALLOC(*perm, *npad, "cell order");
#pragma omp parallel for schedule(static)
  for (size_t k = 0; k < (size_t)d->ngroups; k++)
    for (size_t j = 0; j < bs; j++) {
      size_t c = (size_t)list[k] * bs + j, first = (size_t)list[k] * bs;
      int at = (int)(c < nc ? c : first), from = order ? order[at] : at;
      (*perm)[k * bs + j] = c < nc ? from : -from - 1;
    }
  return 0;
}

/* The per-cell constants in stored cell order (one unused word when there are none). */
static int upload_aux(const fe_operator *A, fe_realization *d, const int *perm, size_t npad)
{
  int na = A->pde->naux;
  double *v;
  FE_CHECK(fe_memory_check(sizeof(double) * npad * na, "operator %s on %s: per-cell "
                           "coefficients (%d values at %zu cells), staged", A->pde->name,
                           A->V->name, na, npad));
  FE_CHECK(fe_memory_check_on(d->be, fe_precision_size(d->prec) * npad * na, "operator %s on %s: "
                              "per-cell coefficients (%d values at %zu cells)", A->pde->name,
                              A->V->name, na, npad));
  FE_MALLOC(v, npad * na + 1, "per-cell coefficients");
  v[0] = 0;
#pragma omp parallel for schedule(static) if (na > 0)
  for (size_t i = 0; i < (na > 0 ? npad : 0); i++)
    for (int k = 0; k < na; k++)
      v[i * na + k] = A->aux[(size_t)(perm[i] < 0 ? -perm[i] - 1 : perm[i]) * na + k];
  int rc = fe_upload_reals(d->be, d->prec, v, npad * na + 1, &d->aux);
  free(v);
  return rc;
}

/* x at point j of rule Q in cell c: the map's basis there tabulated once (phi, nv values a
 * point: straight cells), else the cell's own map (curved). */
static void rule_point_x(const fe_space *V, int c, const fe_quadrature *Q, const double *phi,
                         int j, double x[3])
{
  double J[9];
  if (phi) fe_space_cell_map_at(V, c, phi + (size_t)j * V->lin.nbasis, NULL, x, NULL);
  else fe_space_cell_map(V, c, Q->points + (size_t)j * V->elem.dim, x, J);
}

/* The first cell of A at whose points of rule Q coefficient c exceeds FLT_MAX in magnitude
 * (-1: none), that point's x and the value there. */
static int single_overflow_cell(const fe_operator *A, const fe_cexpr *c, const fe_quadrature *Q,
                                double x_bad[3], double *v_bad)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const int np = Q->npoints, nc = V->mesh->ncells, dim = V->elem.dim, nv = V->lin.nbasis;
  const int reads_x = fe_cexpr_reads(c, FE_V_X) > 0, reads_a = fe_cexpr_reads(c, FE_V_A) > 0;
  const int ncell = reads_x || reads_a ? nc : 1, npt = reads_x ? np : 1;
  /* straight cells: the map's basis at the rule's points once, not at every cell's */
  double *phi = reads_x && !V->curved ? malloc(sizeof(double) * (size_t)np * nv) : NULL;
  for (int j = 0; phi && j < np; j++)
    fe_element_eval(&V->lin, Q->points + (size_t)j * dim, phi + (size_t)j * nv, NULL);
  int bad = INT_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad) if (ncell > 64)
  for (int cell = 0; cell < ncell; cell++) {
    if (cell > bad) continue; /* past one found */
    double x[3 * 64], value[64];
    const double *a = reads_a ? A->aux + (size_t)cell * p->naux : NULL;
    for (int j0 = 0; j0 < npt; j0 += 64) { /* the points of a cell, 64 at a time */
      const int n = npt - j0 < 64 ? npt - j0 : 64;
      for (int j = 0; j < n; j++) {
        x[3 * j] = x[3 * j + 1] = x[3 * j + 2] = 0;
        if (reads_x) rule_point_x(V, cell, Q, phi, j0 + j, x + 3 * j);
      }
      fe_cexpr_eval_points(c, n, x, a, p->const_values, value);
      for (int j = 0; j < n; j++)
        if (fabs(value[j]) > FLT_MAX && bad > cell) bad = cell;
    }
  }
  if (bad == INT_MAX) {
    free(phi);
    return -1;
  }
  const double *a = reads_a ? A->aux + (size_t)bad * p->naux : NULL;
  for (int j = 0; j < npt; j++) { /* the cell's first such point, again */
    x_bad[0] = x_bad[1] = x_bad[2] = 0;
    if (reads_x) rule_point_x(V, bad, Q, phi, j, x_bad);
    *v_bad = fe_cexpr_eval(c, x_bad, a, p->const_values);
    if (fabs(*v_bad) > FLT_MAX) break;
  }
  free(phi);
  return bad;
}

/* Whether coefficient c stays within half of FLT_MAX in magnitude over the box of A's
 * straight mesh's vertices (which holds each cell's points) and the range of its per-cell
 * constants: an interval bound (fe_cexpr_bound), one evaluation for a whole mesh where the
 * points' would be millions (Q7 7.65M dofs: 11M points a rule). 0: it cannot say (a curved
 * mesh, whose points may leave its nodes' box; a bound past it): the points tell. */
static int single_fits_everywhere(const fe_operator *A, const fe_cexpr *c)
{
  const fe_mesh *m = A->V->mesh;
  const fe_physics *p = A->pde;
  const int na = fe_cexpr_reads(c, FE_V_A);
  if (A->V->curved || m->nvertices < 1) return 0;
  double xlo[3], xhi[3], *alo = NULL, *ahi = NULL, lo, hi;
  fe_mesh_extent(m, xlo, xhi);
  if (na > 0) {
    alo = malloc(sizeof(double) * (size_t)na), ahi = malloc(sizeof(double) * (size_t)na);
    for (int i = 0; alo && ahi && i < na; i++) {
      alo[i] = ahi[i] = A->aux[i];
      for (int cell = 1; cell < m->ncells; cell++) {
        alo[i] = fmin(alo[i], A->aux[(size_t)cell * p->naux + i]);
        ahi[i] = fmax(ahi[i], A->aux[(size_t)cell * p->naux + i]);
      }
    }
  }
  const int fits = (na == 0 || (alo && ahi)) &&
                   fe_cexpr_bound(c, xlo, xhi, alo, ahi, p->const_values, &lo, &hi) &&
                   fmax(fabs(lo), fabs(hi)) <= FLT_MAX / 2;
  free(alo), free(ahi);
  return fits;
}

/* In single precision the kernels compute the coefficients in float: one that is finite in
 * double (fe_physics_check_coefficients let it pass) but beyond FLT_MAX in magnitude at a
 * point of the residual's or the Jacobian's rule would be inf there. A named error for the
 * first such value, as the non-finite case's: the coefficients that read the named
 * constants only (changed = 1: the constants changed since the last check), else all; each
 * bounded over the whole mesh first, its points evaluated only where the bound cannot say. */
static int check_single_coefficients(const fe_operator *A, int changed)
{
  const fe_physics *p = A->pde;
  const fe_quadrature *rules[2] = {&A->quad[FE_ACTION_RESIDUAL], &A->quad[FE_ACTION_APPLY]};
  for (int i = 0; i < p->ncoef; i++) {
    fe_cexpr *c;
    if (fe_cexpr_read(p->coef_exprs[i], &c)) continue; /* beyond the reader: not checked */
    const int na = fe_cexpr_reads(c, FE_V_A), nk = fe_cexpr_reads(c, FE_V_K);
    const int known = (!na || (na <= p->naux && A->aux)) && nk <= p->nconst;
    int cell = -1;
    double x[3] = {0, 0, 0}, v = 0;
    const int fits = known && (!changed || nk) && single_fits_everywhere(A, c);
    for (int q = 0; q < 2 && known && (!changed || nk) && !fits && cell < 0; q++)
      if (q == 0 || rules[1]->npoints != rules[0]->npoints || rules[1]->degree != rules[0]->degree)
        cell = single_overflow_cell(A, c, rules[q], x, &v);
    const int reads_x = fe_cexpr_reads(c, FE_V_X) > 0, reads_a = na > 0;
    fe_cexpr_free(c);
    if (cell < 0) continue;
    char at[128];
    if (reads_x && A->V->elem.dim == 3)
      snprintf(at, sizeof at, "at x = (%.6g, %.6g, %.6g), cell %d (a quadrature point)", x[0],
               x[1], x[2], cell);
    else if (reads_x)
      snprintf(at, sizeof at, "at x = (%.6g, %.6g), cell %d (a quadrature point)", x[0], x[1], cell);
    else if (reads_a)
      snprintf(at, sizeof at, "in cell %d", cell);
    else
      snprintf(at, sizeof at, "everywhere");
    FE_ERROR(FE_ERR_ARG, "physics %s: %s is %.6g %s, beyond single precision's largest value "
             "(%.6g): the operator runs in single precision; use precision = \"double\" or "
             "scale the problem", p->name, p->coef_names[i], v, at, (double)FLT_MAX);
  }
  return 0;
}

/* The physics' named constants as they are now (one unused word when there are none); in
 * single precision, the coefficients checked first (all at the first upload, after that those
 * that read the constants). */
int fe_upload_params(const fe_operator *A, fe_realization *d)
{
  const fe_physics *p = A->pde;
  if (d->prec == FE_FLOAT) FE_CHECK(check_single_coefficients(A, d->params.ptr != NULL));
  double *k;
  FE_MALLOC(k, p->nconst + 1, "named constants");
  k[p->nconst] = 0;
  for (int i = 0; i < p->nconst; i++) k[i] = p->const_values[i];
  if (d->params.ptr) d->be->ops->release(d->be->impl, &d->params);
  int rc = fe_upload_reals(d->be, d->prec, k, (size_t)p->nconst + 1, &d->params);
  free(k);
  d->params_version = p->const_version;
  return rc;
}

/* The auxiliary fields' dof maps in stored cell order (one unused word when there are none),
 * and the named constants. */
static int upload_fields(const fe_operator *A, fe_realization *d, const int *perm, size_t npad)
{
  const fe_physics *p = A->pde;
  int w = fe_codegen_field_map_width(p);
  int *maps;
  FE_CHECK(fe_memory_check_on(d->be, sizeof(int) * npad * w, "operator %s on %s: the auxiliary "
                              "fields' dof maps (%d a cell at %zu cells)", p->name, A->V->name, w,
                              npad));
  FE_CHECK(fe_memory_check(sizeof(int) * npad * w, "operator %s on %s: the auxiliary fields' dof "
                           "maps (%d a cell at %zu cells), staged", p->name, A->V->name, w, npad));
  FE_MALLOC(maps, npad * w + 1, "auxiliary field maps");
  maps[0] = 0;
#pragma omp parallel for schedule(static) if (w > 0)
  for (size_t i = 0; i < (w > 0 ? npad : 0); i++) {
    size_t c = (size_t)(perm[i] < 0 ? -perm[i] - 1 : perm[i]);
    int off = 0;
    for (int f = 0; f < p->nfields; f++) {
      int nb = p->field_space[f]->elem.nbasis;
      memcpy(maps + i * w + off, p->field_space[f]->cell_nodes + c * nb, sizeof(int) * nb);
      off += nb;
    }
  }
  int rc = fe_upload_ints(d->be, maps, npad * w + 1, &d->fmaps);
  free(maps);
  if (!rc) rc = fe_upload_params(A, d);
  return rc;
}

/* The work-group schedule over cells taken in `order` (NULL: the mesh's): identity, or groups
 * sorted by color. */
static int build_schedule(const fe_operator *A, fe_realization *d, const int *order, int **list)
{
  const fe_space *V = A->V;
  int ng = (V->mesh->ncells + d->block - 1) / d->block;
  d->ngroups = ng;
  FE_MALLOC(*list, ng, "work-group list");
  if (!d->colored) {
    for (int g = 0; g < ng; g++) (*list)[g] = g;
    d->ncolors = 1;
    d->run = 1;
    FE_MALLOC(d->color_start, 2, "colors");
    d->color_start[0] = 0;
    d->color_start[1] = ng;
    return 0;
  }
  /* Two cells of a conforming space share a node only where they share the vertex, edge or
   * face it lies on, and then that entity's vertices: colored by their vertices, groups get
   * the same colors from nv ids a cell instead of nb (a Q3 hex: 8, not 64). */
  const fe_mesh *m = V->mesh;
  const int nv = V->elem.nvertices, by_vertex = V->elem.nbasis > nv;
  const int *ids = by_vertex ? m->cells : V->cell_nodes;
  const int stride = by_vertex ? m->nvc : V->elem.nbasis, nb = by_vertex ? nv : stride;
  int *color, *oc = NULL, identity = stride == nb;
  for (int c = 0; order && c < m->ncells && identity; c++) identity = order[c] == c;
  if (!identity) { /* the cells' ids in this order (the mesh's own order needs no copy) */
    FE_MALLOC(oc, (size_t)m->ncells * nb, "ordered cell map");
#pragma omp parallel for schedule(static)
    for (int c = 0; c < m->ncells; c++)
      memcpy(oc + (size_t)c * nb, ids + (size_t)(order ? order[c] : c) * stride,
             sizeof(int) * nb);
  }
  /* The cpu's threads walk runs of consecutive groups (8 runs a thread), colored run by run:
   * a thread's next group is the mesh's next, whose nodes the last one left in its caches
   * (colored group by group, a color's groups lie apart and each fetches its nodes again).
   * A run's groups share nodes, so one thread takes it whole. */
  int run = 1;
  if (!d->be->info.is_gpu) {
    const char *e = getenv("FELAB_RUNS"); /* runs a thread; 0: group by group */
    const int per = e && *e ? atoi(e) : 8, units = d->be->info.compute_units;
    if (per > 0) run = ng / (per * (units > 0 ? units : 1));
    if (run < 1) run = 1;
  }
  d->run = run;
  int rc = fe_mesh_color_groups_below(m, identity ? ids : oc, nb,
                                      by_vertex ? m->nvertices : V->nnodes, d->block * run,
                                      &color, &d->ncolors);
  free(oc);
  if (rc) {
    free(*list);
    *list = NULL;
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  FE_CALLOC(d->color_start, d->ncolors + 1, "colors");
  for (int g = 0; g < ng; g++) d->color_start[color[g / run] + 1]++;
  for (int c = 0; c < d->ncolors; c++) d->color_start[c + 1] += d->color_start[c];
  int *pos = fe_alloc(sizeof(int) * (size_t)(d->ncolors + 1));
  if (!pos) {
    free(color);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  memcpy(pos, d->color_start, sizeof(int) * (size_t)d->ncolors);
  for (int g = 0; g < ng; g++) (*list)[pos[color[g / run]]++] = g;
  free(pos);
  free(color);
  return 0;
}

void fe_realization_runs(const fe_realization *r, int on)
{
  if (r->colored && r->be->ops->group_runs) r->be->ops->group_runs(r->be->impl, on ? r->run : 0);
}

/* Setup part k of a realization (the report's setup_parts): shown on the progress line, named
 * by an out-of-memory error while it runs, and timed. */
static const char *const part_names[3] = {"the schedule", "the cell data", "the geometry"};
static const char *const part_keys[3] = {"schedule", "cell_data", "geometry"};

static double part_begin(fe_realization *r, int k)
{
  fe_progress_phase(part_names[k]);
  r->building = part_names[k];
  return fe_clock();
}

static int part_end(fe_realization *r, int k, double t0, int rc)
{
  if (!rc) r->building = NULL;
  fe_setup_part_add(&r->parts, part_keys[k], fe_clock() - t0, 0);
  return rc;
}

static int realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad);

int fe_realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad)
{
  double t0 = part_begin(r, 0);
  return part_end(r, 0, t0, realization_schedule(r, morton, perm, npad));
}

void fe_realization_color_range(const fe_realization *r, int c, int *first, int *count)
{
  int a = r->color_start[c], b = r->color_start[c + 1];
  if (r->color_split && r->phase == 1) b = r->color_split[c];
  if (r->color_split && r->phase == 2) a = r->color_split[c];
  *first = a;
  *count = b - a;
}

int fe_realization_phases_forced(void)
{
  const char *env = getenv("FELAB_EXCHANGE_PHASES"); /* 0: never; 1: on the cpu too (tests) */
  return env && *env ? (*env == '1' ? 1 : 0) : -1;
}

int fe_realization_wants_phases(const fe_realization *r)
{
  const fe_dist *d = r->A->V->dist;
  const int forced = fe_realization_phases_forced();
  const int want = forced >= 0 ? forced : r->be->info.is_gpu;
  return d && d->size > 1 && d->nnb > 0 && want;
}

/* A split space on a GPU: *order (the mesh's order where NULL) made boundary first, the cells
 * with a node shared with another rank before the others, each part in its order; *nbnd: how
 * many. Nothing (nbnd 0) where the strategy takes no phases or the action is not split
 * (fe_realization_wants_phases). */
static int boundary_first(const fe_realization *r, int **order, int *nbnd)
{
  const fe_space *V = r->A->V;
  const fe_dist *d = V->dist;
  *nbnd = 0;
  if (!r->phases || !fe_realization_wants_phases(r)) return 0;
  const int nc = V->mesh->ncells, nb = V->elem.nbasis;
  char *shared = calloc((size_t)V->nnodes + 1, 1);
  int *out = malloc(sizeof(int) * ((size_t)nc + 1));
  if (!shared || !out) {
    free(shared), free(out);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the boundary cells' order (%d cells)", nc);
  }
  for (int k = 0; k < d->nnb; k++)
    for (int i = 0; i < d->nb[k].n; i++) shared[d->nb[k].nodes[i]] = 1;
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < nc; i++) {
      const int c = *order ? (*order)[i] : i;
      int on = 0;
      for (int j = 0; j < nb && !on; j++) on = shared[V->cell_nodes[(size_t)c * nb + j]];
      if (on == !pass) out[n++] = c;
      if (!pass && on) (*nbnd)++;
    }
  free(shared);
  free(*order);
  *order = out;
  return 0;
}

/* Where the boundary cells (the first nbnd of the order) end in each color's groups. */
static int color_splits(fe_realization *r, const int *list, int nbnd)
{
  free(r->color_split);
  r->color_split = NULL;
  if (!nbnd) return 0;
  int bg = (nbnd + r->block - 1) / r->block; /* groups [0, bg) hold them */
  bg = (bg + r->run - 1) / r->run * r->run;   /* whole runs (a run's groups go to one thread) */
  FE_MALLOC(r->color_split, r->ncolors, "the colors' boundary groups");
  for (int c = 0; c < r->ncolors; c++) {
    int k = r->color_start[c];
    while (k < r->color_start[c + 1] && list[k] < bg) k++; /* a color's groups ascend */
    r->color_split[c] = k;
  }
  return 0;
}

static int realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad)
{
  fe_operator *A = r->A;
  int *list = NULL, *order = NULL, rc = 0, nbnd = 0;
  *perm = NULL;
  /* the mesh's own cell order (box and loaded meshes are local; on the box it needs fewer
   * colors than a Morton order, and measured faster); when its
   * groups need too many colors, or when asked, cells along a Morton curve through their
   * centroids */
  if (morton) rc = fe_mesh_morton_order(A->V->mesh, &order); /* else NULL: the mesh's */
  if (!rc) rc = boundary_first(r, &order, &nbnd);
  if (!rc && build_schedule(A, r, order, &list)) {
    fe_error_clear();
    free(r->color_start);
    r->color_start = NULL;
    free(order);
    order = NULL;
    rc = fe_mesh_morton_order(A->V->mesh, &order);
    if (!rc) rc = boundary_first(r, &order, &nbnd);
    if (!rc) rc = build_schedule(A, r, order, &list);
  }
  if (!rc) rc = color_splits(r, list, nbnd);
  r->phased = r->color_split != NULL;
  r->phase2_apart = r->phased; /* the cells with a shared node all in phase 1 */
  if (!rc) rc = cell_permutation(A, r, list, order, perm, npad);
  if (!rc) { /* the realization's (element matrices return their cells in the mesh's order) */
    free(r->perm);
    r->perm = *perm;
    r->npad = *npad;
  }
  free(order);
  for (int g = 0; !rc && g < r->ngroups; g++) list[g] = g; /* cells are stored in schedule order */
  if (!rc) rc = fe_upload_ints(r->be, list, (size_t)r->ngroups, &r->groups);
  free(list);
  return rc;
}

int fe_realization_cell_data(fe_realization *r, const int *perm, size_t npad)
{
  double t0 = part_begin(r, 1);
  int rc = upload_aux(r->A, r, perm, npad);
  if (!rc) rc = upload_fields(r->A, r, perm, npad);
  return part_end(r, 1, t0, rc);
}

static int realization_geometry(fe_realization *r, int recompute, const int *perm, size_t npad);

typedef struct geometry_job {
  const fe_operator *A;
  const fe_quadrature *Q;
  const int *perm;
  size_t npad;
  int shared;
} geometry_job;

static int geometry_fill(void *ctx, void *out, fe_precision prec)
{
  const geometry_job *j = ctx;
  return fe_build_geometry(j->A, j->Q, j->perm, j->npad, j->shared, out, prec, 0);
}

int fe_realization_geometry(fe_realization *r, int recompute, const int *perm, size_t npad)
{
  double t0 = part_begin(r, 2);
  return part_end(r, 2, t0, realization_geometry(r, recompute, perm, npad));
}

static int realization_geometry(fe_realization *r, int recompute, const int *perm, size_t npad)
{
  fe_operator *A = r->A;
  if (recompute) {
    r->geo_shared = 0; /* nothing stored */
    return fe_build_geometry(A, &A->quad[FE_ACTION_RESIDUAL], perm, npad, 0, NULL, FE_DOUBLE, 0);
  }
  for (int a = 0; a < FE_NACTIONS; a++) {
    for (int b = 0; b < a; b++) /* the same points as an earlier action: share */
      if (A->geo_affine || (A->quad[b].degree == A->quad[a].degree &&
                            A->quad[b].npoints == A->quad[a].npoints))
        r->geo[a] = r->geo[b];
    if (r->geo[a].ptr) continue;
    geometry_job job = {A, &A->quad[a], perm, npad, r->geo_shared};
    const size_t words = fe_geometry_words(A, job.Q, npad, r->geo_shared, r->prec);
    FE_CHECK(fe_memory_check_on(r->be, words * fe_precision_size(r->prec), "operator %s on %s: "
                                "stored geometric factors (%zu values for %zu cells of %d "
                                "points)", A->pde->name, A->V->name, words, npad, job.Q->npoints));
    FE_CHECK(fe_fill_reals(r->be, r->prec, words, &r->geo[a], geometry_fill, &job));
  }
  return 0;
}

void fe_physics_args(const fe_realization *r, const fe_vector *u, const fe_vector *w,
                     fe_vector *y, fe_arg *a)
{
  const fe_buffer *bufs[10] = {&r->coords, &r->aux, &r->params, &r->fmaps,
                               r->fv[0] ? r->fv[0] : &r->params,
                               r->fv[1] ? r->fv[1] : &r->params,
                               r->fv[2] ? r->fv[2] : &r->params,
                               &u->buf, &w->buf, &y->buf};
  for (int i = 0; i < 10; i++) a[i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = bufs[i]};
}

int fe_realization_stored_maps(fe_realization *r)
{
  if (r->stored_cells.ptr) return 0;
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
  if (!rc) rc = fe_upload_ints(r->be, c, npad * nb, &r->stored_cells);
  if (!rc) rc = fe_upload_ints(r->be, id, npad, &r->stored_ids);
  free(c);
  free(id);
  if (rc && r->stored_cells.ptr) { /* both or neither: the next call makes them again */
    r->be->ops->release(r->be->impl, &r->stored_cells);
    memset(&r->stored_cells, 0, sizeof r->stored_cells);
  }
  return rc;
}
