/* felab operators. An operator is realized once per (backend, precision, strategy, options):
 * the strategy (engine/operator/strategies/, one table each, engine/operator/strategy.h) moves
 * its data to the backend and each action's kernel is generated and compiled on first use. An
 * action is then: convert the inputs if they live elsewhere, zero the output, mask the
 * direction's constrained entries, run the strategy's integration, fix the constrained rows,
 * and fill a report with counted, measured and predicted figures. What every strategy shares
 * lives in this file and the operator-*.c files beside it (operator-private.h):
 *   operator.c            the operator: its rules, per-cell constants and Dirichlet rows, and
 *                         its realizations (made, found, forgotten);
 *   operator-choose.c     the strategy table and the choice of the default strategy;
 *   operator-data.c       a realization's data on the device: buffers, the cells' order and
 *                         schedule, per-cell constants, named constants, fields;
 *   operator-geometry.c   the geometric factors at the points (stored, shared or checked);
 *   operator-action.c     the actions (residual, apply, diagonal) and their reports;
 *   operator-transpose.c  the transposed operator. */
#include "engine/operator/operator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"
#include "engine/fem/quadrature.h"
#include "engine/operator/operator-private.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

#define OP_MAX_REALIZATIONS 8

void fe_action_opts_default(fe_action_opts *o)
{
  memset(o, 0, sizeof *o);
  o->precision = -1;
}

int fe_operator_realizations(const fe_operator *A) { return A->nreal; }

static int imax(int a, int b) { return a > b ? a : b; }

/* Quadrature degree of an action: exact for the terms it integrates on this element, with
 * the coefficients' degrees in x. Gradients lose an order on simplices; on tensor cells the
 * rule must be exact per direction, so they do not. The residual of linear physics and its
 * Jacobian are both exact, so they agree whatever their rules. Nonlinear physics: the
 * linearization's degree, u's own factors left out (p + 1 Gauss points on Qp; the errors of
 * the rule exact for u^3 v to 1% in test_convergence, docs/quadrature.md). */
static int quadrature_degree(const fe_space *V, const fe_physics *p, fe_action a)
{
  int k = V->elem.order;
  int grad = V->elem.cell == FE_CELL_TET || V->elem.cell == FE_CELL_TRI ? k - 1 : k;
  int curved = V->curved ? 2 : 0; /* the map's polynomial part, for curved cells */
  /* a linear f0 that depends on u (c u - s) is a product of u and the test function */
  int u_lin = !p->nonlinear && p->df0 ? k : 0;
  int res = curved + imax(p->f1 ? 2 * grad + p->degree_f1 : 0,
                          p->f0 ? k + p->degree_f0 + u_lin : 0);
  int jac = curved + imax(p->df1 ? 2 * grad + p->degree_df1 : 0,
                          p->df0 ? 2 * k + p->degree_df0 : 0);
  /* nonlinear physics: the Jacobian must be the exact derivative of the discrete residual
   * (Newton's quadratic convergence), so every action integrates with the same rule */
  if (p->nonlinear) return imax(res, jac);
  return a == FE_ACTION_RESIDUAL ? res : jac;
}
/* The physics' per-region constants spread over the cells; a cell whose region the physics
 * does not name is an error listing what each side has. */
static int build_aux(fe_operator *A)
{
  const fe_physics *p = A->pde;
  const fe_mesh *m = A->V->mesh;
  if (p->naux == 0) return 0;
  int *ids;
  FE_MALLOC(ids, p->nregions, "region ids");
  for (int r = 0; r < p->nregions; r++) {
    int rc = fe_mesh_tag_id(m, p->region_names[r], m->dim, &ids[r]);
    if (rc) {
      free(ids);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
  }
  A->aux = fe_alloc(sizeof(double) * (size_t)m->ncells * p->naux + 1);
  if (!A->aux) {
    free(ids);
    FE_ERROR(FE_ERR_MEM, "out of host memory for per-cell coefficients");
  }
  for (int c = 0; c < m->ncells; c++) {
    int r = 0;
    while (r < p->nregions && ids[r] != m->cell_tags[c]) r++;
    if (r == p->nregions) {
      const char *name = "?";
      for (int t = 0; t < m->ntags; t++)
        if (m->tags[t].dim == m->dim && m->tags[t].id == m->cell_tags[c]) name = m->tags[t].name;
      free(ids);
      FE_ERROR(FE_ERR_ARG, "the physics gives no coefficient for region '%s' (cell %d); "
               "give one value per region of the mesh (see m:tags().cells)", name, c);
    }
    for (int k = 0; k < p->naux; k++) A->aux[(size_t)c * p->naux + k] = p->region_values[r * p->naux + k];
  }
  free(ids);
  return 0;
}

static int make_rules(fe_operator *A, int degree, fe_quad_kind kind);

int fe_operator_create(const fe_space *V, const fe_physics *pde, const char *const *dirichlet,
                       int ndirichlet, double value, fe_operator **out)
{
  FE_ASSERT(pde->ncomp == V->ncomp, FE_ERR_ARG,
            "the physics has %d components but the space %s has %d", pde->ncomp, V->name, V->ncomp);
  FE_ASSERT(pde->dim == 0 || pde->dim == V->elem.dim, FE_ERR_ARG,
            "the physics was traced in dimension %d but the space %s is in dimension %d", pde->dim,
            V->name, V->elem.dim);
  for (int i = 0; i < pde->nfields; i++)
    FE_ASSERT(pde->field_space[i] && pde->field_space[i]->mesh == V->mesh, FE_ERR_ARG,
              "the physics' field '%s' lives on another mesh than the space %s", pde->field_names[i],
              V->name);
  fe_operator *A;
  FE_CALLOC(A, 1, "operator");
  A->V = V;
  A->pde = pde;
  A->value = value;
  A->geo_affine = V->affine;
  A->geo_recompute = V->elem.order == 1 && !V->curved;
  int rc = fe_space_boundary_dofs(V, dirichlet, ndirichlet, &A->dir_nodes, &A->ndir);
  if (!rc) rc = build_aux(A);
  if (!rc) rc = make_rules(A, -1, FE_QUAD_AUTO);
  if (rc) {
    fe_operator_free(A);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = A;
  return 0;
}

/* Each action's rule: exact for its integrand unless degree >= 0 overrides it. */
static int make_rules(fe_operator *A, int degree, fe_quad_kind kind)
{
  for (int a = 0; a < FE_NACTIONS; a++) {
    fe_quadrature q;
    int k = degree >= 0 ? degree : quadrature_degree(A->V, A->pde, (fe_action)a);
    /* GLL with no degree on GLL-noded tensor cells: the points are the nodes (p + 1 per
     * direction, exact to 2p - 1; the CEED bake-off's BP5 setting) */
    const fe_element *el = &A->V->elem;
    if (degree < 0 && kind == FE_QUAD_GLL && el->family == 'Q' && el->kind == FE_NODES_GLL)
      k = 2 * el->order - 1;
    FE_CHECK(fe_quadrature_create_kind(A->V->elem.cell, k, kind, &q));
    fe_quadrature_free(&A->quad[a]);
    A->quad[a] = q;
  }
  return 0;
}

static void realization_free(fe_realization *r);

/* The element matrices' own data attached to A (their kernels: engine/matrix/), released. */
static void elemat_cache_release(fe_operator *A)
{
  if (A->elemat_cache) A->elemat_cache_free(A->elemat_cache);
  A->elemat_cache = NULL;
}

int fe_operator_set_quadrature(fe_operator *A, int degree, int kind)
{
  FE_ASSERT(kind >= FE_QUAD_AUTO && kind <= FE_QUAD_GLL, FE_ERR_ARG, "unknown quadrature rule %d", kind);
  FE_CHECK(make_rules(A, degree, (fe_quad_kind)kind));
  for (int i = 0; i < A->nreal; i++) realization_free(A->real[i]);
  A->nreal = 0;
  A->npick = 0; /* the rules changed the counts */
  elemat_cache_release(A);
  return 0;
}

const fe_quadrature *fe_operator_quadrature(const fe_operator *A, const char *action)
{
  fe_action a;
  if (fe_action_parse(action, &a)) return NULL;
  return &A->quad[a];
}

static void realization_free(fe_realization *r)
{
  if (!r) return;
  fe_backend *be = r->be;
  if (r->st && r->st->release) r->st->release(r);
  fe_qdata_release(r);
  if (r->coords_wrapped) memset(&r->coords, 0, sizeof r->coords); /* the space's */
  fe_buffer *bufs[] = {&r->groups, &r->coords, &r->aux,          &r->didx,      &r->dval,
                       &r->params, &r->fmaps,  &r->stored_cells, &r->stored_ids};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) be->ops->release(be->impl, bufs[i]);
  for (int a = FE_NACTIONS - 1; a >= 0; a--) { /* shared buffers are released once, by the first */
    int shared = 0;
    for (int b = 0; b < a; b++) shared |= r->geo[b].ptr == r->geo[a].ptr;
    if (r->geo[a].ptr && !shared) be->ops->release(be->impl, &r->geo[a]);
  }
  for (int a = 0; a < FE_NACTIONS; a++)
    if (r->module[a]) be->ops->module_free(be->impl, r->module[a]);
  free(r->perm);
  free(r->opts);
  fe_vector_free(r->scratch);
  fe_vector_free(r->zero);
  free(r->built_constants);
  free(r->color_start);
  free(r->color_split);
  free(r);
}

void fe_operator_free(fe_operator *A)
{
  if (!A) return;
  if (A->transposed != A) fe_operator_free(A->transposed); /* its physics is the pde's */
  for (int i = 0; i < A->nreal; i++) realization_free(A->real[i]);
  elemat_cache_release(A);
  for (int a = 0; a < FE_NACTIONS; a++) fe_quadrature_free(&A->quad[a]);
  free(A->aux);
  free(A->dir_nodes);
  free(A);
}

const fe_space *fe_operator_space(const fe_operator *A) { return A->V; }
int fe_operator_ndirichlet(const fe_operator *A) { return A->ndir; }

/* Resolve backend and precision of an action. */
int fe_operator_resolve(const fe_action_opts *o, fe_backend **be, fe_precision *prec)
{
  FE_CHECK(fe_backend_get(o ? o->backend : NULL, be));
  *prec = o && o->precision >= 0 ? (fe_precision)o->precision : fe_precision_default();
  if (*prec == FE_DOUBLE && !(*be)->info.fp64)
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s (%s) has no double precision; use precision = \"single\"",
             (*be)->name, (*be)->info.name);
  return 0;
}

/* ---- realizations ---- */

/* Forget r (one of A's realizations) and free it. */
void fe_realization_drop(fe_operator *A, fe_realization *r)
{
  for (int i = 0; i < A->nreal; i++)
    if (A->real[i] == r) {
      memmove(&A->real[i], &A->real[i + 1], sizeof(A->real[0]) * (size_t)(A->nreal - 1 - i));
      A->nreal--;
      break;
    }
  realization_free(r);
}

/* A's realization of st on be in prec made for the options opts as they were asked or, when
 * eff is given, whose options mean eff; moved last (the most recently used), or NULL. */
static fe_realization *realization_find(fe_operator *A, const fe_strategy *st, fe_backend *be,
                                        fe_precision prec, const void *opts, const char *eff)
{
  for (int i = 0; i < A->nreal; i++) {
    fe_realization *r = A->real[i];
    if (r->be != be || r->prec != prec || r->st != st) continue;
    if (eff ? strcmp(r->key, eff) : memcmp(r->opts, opts, st->options_size)) continue;
    /* the most recently used goes last, so that a full list forgets the least recently
     * used: never a realization whose action is running (ebe's and csr's inner calls) */
    memmove(&A->real[i], &A->real[i + 1], sizeof(A->real[0]) * (size_t)(A->nreal - 1 - i));
    A->real[A->nreal - 1] = r;
    return r;
  }
  return NULL;
}

/* What every realization holds beside its strategy's data: the named constants its stored
 * Jacobian was built with (csr, ebe), the coordinates (in place where the backend reads host
 * memory: the cpu, double), the constrained dofs and their values. */
static int realization_common(fe_realization *r)
{
  fe_operator *A = r->A;
  fe_backend *be = r->be;
  fe_precision prec = r->prec;
  double *dv = NULL;
  int rc = 0;
  if (r->st->delegate) { /* csr, ebe: remember the constants the matrices were made with */
    size_t nk = (size_t)A->pde->nconst;
    if ((r->built_constants = fe_alloc(sizeof(double) * (nk + 1)))) {
      if (nk) memcpy(r->built_constants, A->pde->const_values, sizeof(double) * nk);
    } else rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  }
  r->coords_wrapped = !rc && prec == FE_DOUBLE && be->ops->wrap;
  size_t ncoord = 3 * (size_t)A->V->nnodes;
  if (!rc && !r->coords_wrapped)
    rc = fe_memory_check_on(be, ncoord * fe_precision_size(prec), "operator %s on %s: the nodes' "
                            "coordinates (%d nodes)", A->pde->name, A->V->name, A->V->nnodes);
  if (r->coords_wrapped)
    rc = be->ops->wrap(be->impl, A->V->node_coords, sizeof(double) * ncoord, &r->coords);
  else if (!rc) rc = fe_upload_coords(be, prec, A->V, &r->coords); /* less the origin */
  if (!rc) rc = fe_upload_ints(be, A->dir_nodes, (size_t)A->ndir, &r->didx);
  if (!rc && !(dv = fe_alloc(sizeof(double) * (size_t)(A->ndir + 1))))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    for (int i = 0; i < A->ndir; i++) dv[i] = A->value;
    rc = fe_upload_reals(be, prec, dv, (size_t)A->ndir, &r->dval);
  }
  free(dv);
  return rc;
}

/* A new realization of st on be in prec for the options opts (a copy is kept), whose
 * effective key is eff: configured, set up and kept by A (past OP_MAX_REALIZATIONS the least
 * recently used is forgotten). */
static int realization_make(fe_operator *A, const fe_strategy *st, fe_backend *be,
                            fe_precision prec, const void *opts, const char *eff,
                            fe_realization **out)
{
  fe_realization *r;
  FE_CALLOC(r, 1, "realization");
  *r = (fe_realization){.A = A, .st = st, .be = be, .prec = prec,
                        .geo_shared = fe_geometry_shared(A, FE_GEOMETRY_AUTO)};
  snprintf(r->key, sizeof r->key, "%s", eff);
  if (!(r->opts = fe_alloc(st->options_size + 1))) {
    free(r);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  memcpy(r->opts, opts, st->options_size);
  double t0 = fe_clock();
  char what[48];
  snprintf(what, sizeof what, "setting up %s", st->name);
  fe_progress_begin(what, 0);
  fe_progress_watch(1); /* the elapsed time moves through steps that report nothing */
  int rc = st->configure(r, r->opts);
  if (!rc) rc = st->setup(r);
  fe_progress_watch(0);
  fe_progress_end();
  if (rc == FE_ERR_MEM) /* which operator, where, and the part that did not fit */
    fe_error_context("setting up %s on %s (%s) for %d cells: building %s", st->name, be->name,
                     fe_precision_name(prec), A->V->mesh->ncells,
                     r->building ? r->building : "the strategy's own data");
  if (!rc) rc = realization_common(r);
  if (rc) {
    realization_free(r);
    return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  }
  r->setup_seconds = fe_clock() - t0;
  fe_perf_count_setup();
  if (A->nreal == OP_MAX_REALIZATIONS) { /* forget the least recently used */
    realization_free(A->real[0]);
    memmove(&A->real[0], &A->real[1], sizeof(A->real[0]) * (OP_MAX_REALIZATIONS - 1));
    A->nreal--;
  }
  A->real[A->nreal++] = r;
  *out = r;
  return 0;
}

/* The realization of st on be in prec for its parsed options opts, made on first use: one
 * per strategy, backend, precision and effective options (the strategy's key: options asked
 * in another order, or defaults spelled out, share one). */
static int realization_of(fe_operator *A, const fe_strategy *st, fe_backend *be,
                          fe_precision prec, const void *opts, fe_realization **out)
{
  FE_ASSERT(st->options_size <= FE_STRATEGY_OPTIONS_BYTES, FE_ERR_INTERNAL, "strategy %s: its "
            "options take %zu bytes, more than FE_STRATEGY_OPTIONS_BYTES", st->name,
            st->options_size);
  if ((*out = realization_find(A, st, be, prec, opts, NULL))) return 0;
  char eff[sizeof A->real[0]->key];
  st->effective_key(A, be, prec, opts, eff, sizeof eff);
  if ((*out = realization_find(A, st, be, prec, NULL, eff))) return 0;
  return realization_make(A, st, be, prec, opts, eff, out);
}

/* The options of strategy st that the call o gives (o->given), read by the strategy into its
 * own opts (an option it does not take is an error); the defaults where o gives none. */
static int realization_options(const fe_strategy *st, const fe_action_opts *o, void *opts)
{
  memset(opts, 0, FE_STRATEGY_OPTIONS_BYTES);
  if (!o || !o->given) return 0;
  FE_CHECK(fe_strategy_check_given(st, o));
  return st->read_options(o->given, o->caller, opts);
}

int fe_realization_get(fe_operator *A, const fe_action_opts *o, fe_realization **out, char *why,
                       size_t nwhy)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(fe_operator_resolve(o, &be, &prec));
  const fe_strategy *st;
  FE_CHECK(fe_operator_pick_strategy(A, o, be, prec, &st, why, nwhy));
  int opts[FE_STRATEGY_OPTIONS_BYTES / sizeof(int)];
  FE_CHECK(realization_options(st, o, opts));
  return realization_of(A, st, be, prec, opts, out);
}

int fe_operator_realize(fe_operator *A, const fe_action_opts *o, fe_realization **r, char *why,
                        size_t nwhy)
{
  return fe_realization_get(A, o, r, why, nwhy);
}

int fe_operator_realize_geometry(fe_operator *A, const fe_action_opts *o, int block, int geometry,
                                 fe_realization **r)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(fe_operator_resolve(o, &be, &prec));
  const fe_strategy *st = o && o->strategy ? fe_strategy_find(o->strategy) : NULL;
  for (int i = 0; (!st || !st->gives_geometry) && i < fe_strategy_count(); i++)
    st = fe_strategy_at(i);
  FE_ASSERT(st && st->gives_geometry, FE_ERR_INTERNAL, "no strategy gives the element matrices' "
            "geometry");
  char why[256] = "";
  FE_ASSERT(!st->applies(A, be, prec, why, sizeof why), FE_ERR_ARG, "element matrices: strategy "
            "%s, whose geometry they read, does not apply to %s on %s: %s", st->name, A->V->name,
            be->name, why);
  int opts[FE_STRATEGY_OPTIONS_BYTES / sizeof(int)];
  for (int stored = 0; stored < 2; stored++) { /* the options as asked, then stored factors */
    memset(opts, 0, sizeof opts);
    st->geometry_options(opts, block, geometry, stored);
    FE_CHECK(realization_of(A, st, be, prec, opts, r));
    if (st->gives_geometry(*r)) return 0;
  }
  FE_ERROR(FE_ERR_INTERNAL, "strategy %s stored no factors for the element matrices", st->name);
}
