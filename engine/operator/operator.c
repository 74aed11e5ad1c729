/* felab operators. An operator is realized once per (backend, precision, strategy, options):
 * the strategy (engine/strategies/, one table each, engine/operator/strategy.h) moves its data to the
 * backend and each action's kernel is generated and compiled on first use. An action is then:
 * convert the inputs if they live elsewhere, zero the output, mask the direction's
 * constrained entries, run the strategy's integration, fix the constrained rows, and fill a
 * report with counted, measured and predicted figures. What every strategy shares lives
 * here: the rules, the per-cell constants, the coordinates, the constants, the Dirichlet
 * rows, the choice of the default strategy and the helpers for cell orders and geometry. */
#include "engine/operator/operator.h"

#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/operator/autotune.h"
#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"
#include "engine/fem/quadrature.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

#define OP_MAX_REALIZATIONS 8

static const fe_strategy *const strategy_list[] = {&fe_strategy_transpose, &fe_strategy_patch,
                                                   &fe_strategy_sumfact, &fe_strategy_csr,
                                                   &fe_strategy_ebe};
#define NSTRATEGIES ((int)(sizeof strategy_list / sizeof strategy_list[0]))

int fe_strategy_count(void) { return NSTRATEGIES; }
const fe_strategy *fe_strategy_at(int i) { return i >= 0 && i < NSTRATEGIES ? strategy_list[i] : NULL; }

const fe_strategy *fe_strategy_find(const char *name)
{
  for (int i = 0; i < NSTRATEGIES; i++)
    if (!strcmp(strategy_list[i]->name, name)) return strategy_list[i];
  return NULL;
}

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
 * Jacobian are both exact, so they agree whatever their rules. */
static int quadrature_degree(const fe_space *V, const fe_physics *p, fe_action a)
{
  int k = V->elem.order;
  int grad = V->elem.cell == FE_CELL_TET || V->elem.cell == FE_CELL_TRI ? k - 1 : k;
  int u_dep = p->nonlinear ? 2 * k : 0; /* a term that also depends on u or du: u^3 v is 4k */
  int curved = V->curved ? 2 : 0;       /* the map's polynomial part, for curved cells */
  /* a linear f0 that depends on u (c u - s) is a product of u and the test function */
  int u_lin = !p->nonlinear && p->df0 ? k : 0;
  int res = curved + imax(p->f1 ? 2 * grad + p->degree_f1 + u_dep : 0,
                          p->f0 ? k + p->degree_f0 + u_lin + u_dep : 0);
  int jac = curved + imax(p->df1 ? 2 * grad + p->degree_df1 + u_dep : 0,
                          p->df0 ? 2 * k + p->degree_df0 + u_dep : 0);
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

int fe_operator_set_quadrature(fe_operator *A, int degree, int kind)
{
  FE_ASSERT(kind >= FE_QUAD_AUTO && kind <= FE_QUAD_GLL, FE_ERR_ARG, "unknown quadrature rule %d", kind);
  FE_CHECK(make_rules(A, degree, (fe_quad_kind)kind));
  for (int i = 0; i < A->nreal; i++) realization_free(A->real[i]);
  A->nreal = 0;
  A->npick = 0; /* the rules changed the counts */
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
  fe_buffer *bufs[] = {&r->groups, &r->coords, &r->aux,   &r->didx,  &r->dval,
                       &r->params, &r->fmaps,  &r->ecells, &r->eids};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) be->ops->release(be->impl, bufs[i]);
  for (int a = FE_NACTIONS - 1; a >= 0; a--) { /* shared buffers are released once, by the first */
    int shared = 0;
    for (int b = 0; b < a; b++) shared |= r->geo[b].ptr == r->geo[a].ptr;
    if (r->geo[a].ptr && !shared) be->ops->release(be->impl, &r->geo[a]);
  }
  for (int a = 0; a < FE_NACTIONS; a++)
    if (r->module[a]) be->ops->module_free(be->impl, r->module[a]);
  for (int v = 0; v < FE_ELEMAT_VARIANTS; v++) if (r->emodule[v]) be->ops->module_free(be->impl, r->emodule[v]);
  free(r->perm);
  fe_vector_free(r->scratch);
  fe_vector_free(r->zero);
  free(r->built_constants);
  free(r->color_start);
  free(r);
}

void fe_operator_free(fe_operator *A)
{
  if (!A) return;
  if (A->transposed != A) fe_operator_free(A->transposed); /* its physics is the pde's */
  for (int i = 0; i < A->nreal; i++) realization_free(A->real[i]);
  for (int a = 0; a < FE_NACTIONS; a++) fe_quadrature_free(&A->quad[a]);
  free(A->aux);
  free(A->dir_nodes);
  free(A);
}

const fe_space *fe_operator_space(const fe_operator *A) { return A->V; }
int fe_operator_ndirichlet(const fe_operator *A) { return A->ndir; }

/* Resolve backend and precision of an action. */
static int resolve(const fe_action_opts *o, fe_backend **be, fe_precision *prec)
{
  FE_CHECK(fe_backend_get(o ? o->backend : NULL, be));
  *prec = o && o->precision >= 0 ? (fe_precision)o->precision : fe_precision_default();
  if (*prec == FE_DOUBLE && !(*be)->info.fp64)
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s (%s) has no double precision; use precision = \"single\"",
             (*be)->name, (*be)->info.name);
  return 0;
}

/* ---- helpers the strategies share ---- */

size_t fe_shared_limit(const fe_backend *be)
{
  return be->info.stack_shared ? be->info.stack_shared : be->info.local_mem;
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
}

void fe_realization_action_spec(const fe_realization *r, fe_action a, fe_kernel_spec *s)
{
  fe_realization_spec(r, a, s);
  s->folded = r->folded && a == FE_ACTION_APPLY;
  s->qd_cells_fastest = r->qd_cells_fastest;
}

/* Geometric factors at the points of rule Q, structure-of-arrays: factor j of every (cell,
 * point) then factor j + 1; the factors are Jinv (row-major, dxi_i/dx_d) then det J. Affine
 * cells store one point per cell. Written as reals of precision prec into out (n words, from
 * fe_geometry_words); with out NULL the cells are only checked (a kernel that recomputes the
 * factors still needs every det J > 0). Straight cells use the first-order map's gradients
 * tabulated once at the rule's points: per cell, its vertices once and a small product per
 * point. */
size_t fe_geometry_plane(const fe_operator *A, const fe_quadrature *Q, size_t npad, int shared)
{
  if (shared) return (size_t)fe_mesh_congruent(A->V->mesh)->n + 1; /* and the padding's zeros */
  return npad * (size_t)(A->geo_affine ? 1 : Q->npoints);
}

size_t fe_geometry_words(const fe_operator *A, const fe_quadrature *Q, size_t npad, int shared,
                         fe_precision prec)
{
  size_t w = fe_precision_size(prec), ids = shared ? (npad * sizeof(int) + w - 1) / w : 0;
  return fe_geometry_plane(A, Q, npad, shared) * (size_t)fe_geo_stride(A->V->elem.dim) + ids;
}

int fe_geometry_shared(const fe_operator *A, const fe_action_opts *o)
{
  if (o && (o->geometry == FE_GEOMETRY_UNSHARED || o->geometry == FE_GEOMETRY_VERTICES)) return 0;
  return A->geo_affine && !A->V->curved && fe_mesh_congruent(A->V->mesh) != NULL;
}

void fe_group_factor_work(const fe_kernel_spec *s, fe_work *wk)
{
  const double lanes = (double)s->V->mesh->ncells * fe_geo_stride(s->V->elem.dim);
  const int sets = s->geo_shared ? fe_mesh_congruent(s->V->mesh)->n + 1 : 0; /* and the padding's */
  wk->factor_lanes = wk->factor_gathers = 0;
  if (!s->geo_shared) wk->factor_lanes = lanes; /* a set a cell: consecutive, copied */
  else if (sets <= fe_codegen_select_sets(s->prec)) wk->factor_lanes = lanes * sets; /* blends */
  else wk->factor_gathers = lanes;
}

void fe_action_geometry_describe(const fe_realization *r, fe_action a, int vertices, char *buf,
                                 size_t n)
{
  if (r->folded && a == FE_ACTION_APPLY) fe_qdata_describe(r->A->pde, r->A->V->elem.dim, buf, n);
  else fe_geometry_describe(r, vertices, buf, n);
}

void fe_geometry_describe(const fe_realization *r, int vertices, char *buf, size_t n)
{
  if (vertices) snprintf(buf, n, "geometry from the vertices");
  else if (r->geo_shared && fe_mesh_congruent(r->A->V->mesh)->n == 1)
    snprintf(buf, n, "geometry shared: one set, every cell congruent");
  else if (r->geo_shared)
    snprintf(buf, n, "geometry shared: a set for each of %d classes of congruent cells",
             fe_mesh_congruent(r->A->V->mesh)->n);
  else snprintf(buf, n, "geometry stored per %s", r->A->geo_affine ? "cell" : "point");
}

double fe_geometry_bytes(const fe_kernel_spec *s)
{
  const double w = (double)fe_precision_size(s->prec), ncells = s->V->mesh->ncells;
  const int stride = fe_geo_stride(s->V->elem.dim);
  if (s->geo_shared) /* a class a cell, and the classes' sets once */
    return ncells * sizeof(int) + (fe_mesh_congruent(s->V->mesh)->n + 1.0) * stride * w;
  return ncells * (s->geo_affine ? 1 : s->quad->npoints) * stride * w;
}

/* Straight cells are done LANES at a time, each step a loop over the lanes that the compiler
 * vectorizes (gcc 12 at -O2 with OpenMP's simd; on the 2-core machine P1 70^3's factors
 * 80-113 -> 57 ms with the pages populated by the backend, Q1 70^3 23 -> 10 ms). */
enum { LANES = 8 };

typedef struct geometry_batch {
  const fe_mesh *m;
  const int *perm;
  const double *dphi; /* the first-order map's gradients at the rule's points */
  int dim, nv, ngq;
  /* affine cells: J's column k is (X[axis[k]] - X[0]) * scale[k], axis[k] the vertex one
   * reference edge from vertex 0 along xi_k (9 subtractions, not nv x 9 products) */
  int affine, axis[3];
  double scale[3];
  size_t plane;
  void *out; /* NULL: only check det J */
  fe_precision prec;
} geometry_batch;

/* Cells i0 .. i0 + n - 1 (n <= LANES) of the stored order; the first cell that is not
 * positive goes to *bad (the smallest mesh cell number), its det J to *bad_det. */
static void straight_cells(const geometry_batch *g, size_t i0, int n, long long *bad,
                           double *bad_det)
{
  const int dim = g->dim, nv = g->nv, nvc = g->m->nvc, affine = g->affine;
  const int ngather = affine ? dim + 1 : nv;
  double X[FE_MAX_VERTICES][3][LANES], live[LANES];
  int cell[LANES], from[FE_MAX_VERTICES];
  for (int b = 0; b < ngather; b++) from[b] = !affine ? b : b ? g->axis[b - 1] : 0;
  for (int l = 0; l < LANES; l++) { /* lanes past n repeat the last cell and are not stored */
    size_t i = i0 + (size_t)(l < n ? l : n - 1);
    cell[l] = fe_stored_cell(g->perm, i);
    live[l] = g->perm[i] < 0 ? 0 : 1; /* a padding cell adds exact zeros */
    for (int b = 0; b < ngather; b++) {
      const double *x = g->m->coords + 3 * (size_t)g->m->cells[(size_t)cell[l] * nvc + from[b]];
      X[b][0][l] = x[0], X[b][1][l] = x[1], X[b][2][l] = x[2];
    }
  }
  for (int q = 0; q < g->ngq; q++) {
    const double *dp = g->dphi + (size_t)q * nv * dim;
    double J[9][LANES], K[10][LANES], det[LANES];
    if (affine) {
      for (int d = 0; d < dim; d++)
        for (int k = 0; k < dim; k++) {
          const double h = g->scale[k];
#pragma omp simd
          for (int l = 0; l < LANES; l++) J[d * dim + k][l] = (X[k + 1][d][l] - X[0][d][l]) * h;
        }
    } else {
      for (int j = 0; j < dim * dim; j++)
#pragma omp simd
        for (int l = 0; l < LANES; l++) J[j][l] = 0;
      for (int b = 0; b < nv; b++)
        for (int d = 0; d < dim; d++)
          for (int k = 0; k < dim; k++) {
            const double w = dp[b * dim + k];
#pragma omp simd
            for (int l = 0; l < LANES; l++) J[d * dim + k][l] += X[b][d][l] * w;
          }
    }
    if (dim == 3) {
#pragma omp simd
      for (int l = 0; l < LANES; l++) {
        double c0 = J[4][l] * J[8][l] - J[5][l] * J[7][l];
        double c1 = J[5][l] * J[6][l] - J[3][l] * J[8][l];
        double c2 = J[3][l] * J[7][l] - J[4][l] * J[6][l];
        double dt = J[0][l] * c0 + J[1][l] * c1 + J[2][l] * c2, r = 1 / dt;
        K[0][l] = c0 * r;
        K[1][l] = (J[2][l] * J[7][l] - J[1][l] * J[8][l]) * r;
        K[2][l] = (J[1][l] * J[5][l] - J[2][l] * J[4][l]) * r;
        K[3][l] = c1 * r;
        K[4][l] = (J[0][l] * J[8][l] - J[2][l] * J[6][l]) * r;
        K[5][l] = (J[2][l] * J[3][l] - J[0][l] * J[5][l]) * r;
        K[6][l] = c2 * r;
        K[7][l] = (J[1][l] * J[6][l] - J[0][l] * J[7][l]) * r;
        K[8][l] = (J[0][l] * J[4][l] - J[1][l] * J[3][l]) * r;
        K[9][l] = dt * live[l];
        det[l] = dt;
      }
    } else {
#pragma omp simd
      for (int l = 0; l < LANES; l++) {
        double dt = J[0][l] * J[3][l] - J[1][l] * J[2][l], r = 1 / dt;
        K[0][l] = J[3][l] * r, K[1][l] = -J[1][l] * r;
        K[2][l] = -J[2][l] * r, K[3][l] = J[0][l] * r;
        K[4][l] = dt * live[l];
        det[l] = dt;
      }
    }
    for (int l = 0; l < n; l++)
      if (!(det[l] > 0) && (*bad < 0 || (long long)cell[l] < *bad))
        *bad = cell[l], *bad_det = det[l];
    if (!g->out) continue;
    const int stride = dim * dim + 1;
    const size_t at = i0 * (size_t)g->ngq + (size_t)q, step = (size_t)g->ngq;
    if (g->prec == FE_DOUBLE)
      for (int j = 0; j < stride; j++) {
        double *o = (double *)g->out + (size_t)j * g->plane + at;
        for (int l = 0; l < n; l++) o[l * step] = K[j][l];
      }
    else
      for (int j = 0; j < stride; j++) {
        float *o = (float *)g->out + (size_t)j * g->plane + at;
        for (int l = 0; l < n; l++) o[l * step] = (float)K[j][l];
      }
  }
}

/* Shared factors: each class's set made from its first cell (the positive check with it),
 * the padding's set of zeros after them, then each stored cell's class. */
static int shared_geometry(const fe_operator *A, const fe_quadrature *Q, const int *perm,
                           size_t npad, void *out, fe_precision prec)
{
  const fe_mesh_classes *k = fe_mesh_congruent(A->V->mesh);
  const size_t plane = (size_t)k->n + 1, stride = (size_t)fe_geo_stride(A->V->elem.dim);
  const size_t w = fe_precision_size(prec);
  FE_CHECK(fe_build_geometry(A, Q, k->rep, (size_t)k->n, 0, out, prec, plane));
  for (size_t j = 0; j < stride; j++) { /* the padding: no measure */
    if (prec == FE_DOUBLE) ((double *)out)[j * plane + (size_t)k->n] = 0;
    else ((float *)out)[j * plane + (size_t)k->n] = 0;
  }
  int *id = (int *)((char *)out + stride * plane * w);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < npad; i++) id[i] = perm[i] < 0 ? k->n : fe_mesh_class_of(k, perm[i]);
  return 0;
}

int fe_build_geometry(const fe_operator *A, const fe_quadrature *Q, const int *perm, size_t npad,
                      int shared, void *out, fe_precision prec, size_t plane_of)
{
  if (shared && out) return shared_geometry(A, Q, perm, npad, out, prec);
  const fe_space *V = A->V;
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem, *g = &V->lin;
  const int dim = el->dim, stride = fe_geo_stride(dim), nv = g->nbasis;
  const int ngq = A->geo_affine ? 1 : Q->npoints, curved = V->curved;
  const size_t plane = plane_of ? plane_of : npad * (size_t)ngq;
  if (!out && m->positive) return 0; /* checked before, or positive by construction */
  double *dphi = NULL;
  if (!curved) {
    FE_MALLOC(dphi, (size_t)ngq * nv * dim + 1, "the map's gradients at the points");
    for (int q = 0; q < ngq; q++) {
      double phi[FE_MAX_VERTICES];
      fe_element_eval(g, Q->points + q * dim, phi, dphi + (size_t)q * nv * dim);
    }
  }
  geometry_batch batch = {m, perm, dphi, dim, nv, ngq, 0, {0}, {0}, plane, out, prec};
  /* an affine map is fixed by vertex 0 and one neighbour along each reference axis */
  batch.affine = A->geo_affine && !curved;
  for (int k = 0; batch.affine && k < dim; k++) {
    const double *x0 = g->nodes;
    int found = -1;
    for (int b = 1; b < nv && found < 0; b++) {
      const double *xb = g->nodes + 3 * b;
      int along = xb[k] != x0[k];
      for (int e = 0; e < dim; e++) along = along && (e == k || xb[e] == x0[e]);
      if (along) found = b;
    }
    if (found < 0) batch.affine = 0;
    else batch.axis[k] = found, batch.scale[k] = 1 / (g->nodes[3 * found + k] - x0[k]);
  }
  const size_t nbatch = (npad + LANES - 1) / LANES;
  long long bad = -1;
  double bad_det = 0;
#pragma omp parallel
  {
    long long my_bad = -1;
    double my_det = 0;
    if (!curved) {
#pragma omp for schedule(static)
      for (size_t t = 0; t < nbatch; t++) {
        size_t i0 = t * LANES;
        straight_cells(&batch, i0, (int)(npad - i0 < LANES ? npad - i0 : LANES), &my_bad, &my_det);
      }
    } else {
#pragma omp for schedule(static)
      for (size_t i = 0; i < npad; i++) {
        int pad = perm[i] < 0, c = fe_stored_cell(perm, i);
        for (int q = 0; q < ngq; q++) {
          double J[9] = {0}, K[10], x[3], det;
          fe_mesh_geo_map(m, c, Q->points + q * dim, x, J);
          if (!out) {
            det = fe_space_map_det(dim, J);
          } else {
            det = fe_space_map_inverse(dim, J, K);
            K[dim * dim] = pad ? 0 : det;
            size_t at = i * (size_t)ngq + (size_t)q;
            if (prec == FE_DOUBLE)
              for (int j = 0; j < stride; j++) ((double *)out)[(size_t)j * plane + at] = K[j];
            else
              for (int j = 0; j < stride; j++) ((float *)out)[(size_t)j * plane + at] = (float)K[j];
          }
          if (!(det > 0) && (my_bad < 0 || (long long)c < my_bad)) my_bad = c, my_det = det;
        }
      }
    }
    if (my_bad >= 0)
#pragma omp critical
      if (bad < 0 || my_bad < bad) bad = my_bad, bad_det = my_det;
  }
  free(dphi);
  if (bad >= 0)
    FE_ERROR(FE_ERR_MESH, "cell %lld (%s) is %s: det J = %.3g", bad, fe_cell_name(el->cell),
             bad_det < 0 ? "inverted" : "degenerate", bad_det);
  /* straight simplices have one det J a cell, whatever the rule: every cell is now known
   * positive (the mesh is the space's, shared and not const where it was made) */
  if (A->geo_affine && !curved) ((fe_mesh *)m)->positive = 1;
  return 0;
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
  void *stage = at ? NULL : malloc(bytes + 1); /* written once, copied: populating it first was
                                                 * slower on the H100's host (2026-11-26) */
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

/* The first cell of A at whose points of rule Q coefficient c exceeds FLT_MAX in magnitude
 * (-1: none), that point's x and the value there. */
static int single_overflow_cell(const fe_operator *A, const fe_cexpr *c, const fe_quadrature *Q,
                                double x_bad[3], double *v_bad)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const int np = Q->npoints, nc = V->mesh->ncells, dim = V->elem.dim;
  const int reads_x = fe_cexpr_reads(c, FE_V_X) > 0, reads_a = fe_cexpr_reads(c, FE_V_A) > 0;
  const int ncell = reads_x || reads_a ? nc : 1, npt = reads_x ? np : 1;
  int bad = INT_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad) if (ncell > 64)
  for (int cell = 0; cell < ncell; cell++) {
    if (cell > bad) continue; /* past one found */
    double x[3 * 64], value[64], J[9];
    const double *a = reads_a ? A->aux + (size_t)cell * p->naux : NULL;
    for (int j0 = 0; j0 < npt; j0 += 64) { /* the points of a cell, 64 at a time */
      const int n = npt - j0 < 64 ? npt - j0 : 64;
      for (int j = 0; j < n; j++) {
        x[3 * j] = x[3 * j + 1] = x[3 * j + 2] = 0;
        if (reads_x) fe_space_cell_map(V, cell, Q->points + (size_t)(j0 + j) * dim, x + 3 * j, J);
      }
      fe_cexpr_eval_points(c, n, x, a, p->const_values, value);
      for (int j = 0; j < n; j++)
        if (fabs(value[j]) > FLT_MAX && bad > cell) bad = cell;
    }
  }
  if (bad == INT_MAX) return -1;
  const double *a = reads_a ? A->aux + (size_t)bad * p->naux : NULL;
  for (int j = 0; j < npt; j++) { /* the cell's first such point, again */
    double J[9];
    x_bad[0] = x_bad[1] = x_bad[2] = 0;
    if (reads_x) fe_space_cell_map(V, bad, Q->points + (size_t)j * dim, x_bad, J);
    *v_bad = fe_cexpr_eval(c, x_bad, a, p->const_values);
    if (fabs(*v_bad) > FLT_MAX) break;
  }
  return bad;
}

/* In single precision the kernels compute the coefficients in float: one that is finite in
 * double (fe_physics_check_coefficients let it pass) but beyond FLT_MAX in magnitude at a
 * point of the residual's or the Jacobian's rule would be inf there. A named error for the
 * first such value, as the non-finite case's: the coefficients that read the named
 * constants only (changed = 1: the constants changed since the last check), else all. */
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
    for (int q = 0; q < 2 && known && (!changed || nk) && cell < 0; q++)
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
static int upload_params(const fe_operator *A, fe_realization *d)
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
  if (!rc) rc = upload_params(A, d);
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
   * the same colors from nv ids a cell instead of nb (a Q3 hex: 8, not 64; Q3 24^3 on the
   * cpu: 10-13 ms -> 0.15 ms). */
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
   * (colored group by group, a color's groups lie apart and each fetches its nodes again:
   * Q3 48^3 sumfact 39 -> 22 ms). A run's groups share nodes, so one thread takes it whole. */
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

static double part_begin(fe_realization *r, int k)
{
  fe_progress_phase(part_names[k]);
  r->building = part_names[k];
  return fe_clock();
}

static int part_end(fe_realization *r, int k, double t0, int rc)
{
  if (!rc) r->building = NULL;
  r->setup_part[k] += fe_clock() - t0;
  return rc;
}

static int realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad);

int fe_realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad)
{
  double t0 = part_begin(r, 0);
  return part_end(r, 0, t0, realization_schedule(r, morton, perm, npad));
}

static int realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad)
{
  fe_operator *A = r->A;
  int *list = NULL, *order = NULL, rc = 0;
  *perm = NULL;
  /* the mesh's own cell order (box and loaded meshes are local; on the box it needs fewer
   * colors than a Morton order, measured 6.3 vs 7.7 ms for the 1M-tet apply); when its
   * groups need too many colors, or when asked, cells along a Morton curve through their
   * centroids */
  if (morton) rc = fe_mesh_morton_order(A->V->mesh, &order); /* else NULL: the mesh's */
  if (!rc && build_schedule(A, r, order, &list)) {
    fe_error_clear();
    free(r->color_start);
    r->color_start = NULL;
    free(order);
    order = NULL;
    rc = fe_mesh_morton_order(A->V->mesh, &order);
    if (!rc) rc = build_schedule(A, r, order, &list);
  }
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

/* ---- choosing a strategy ---- */

/* Whether strategy st can run here; if not, why. */
static int strategy_applies(const fe_strategy *st, const fe_operator *A, const fe_backend *be,
                            fe_precision prec, char *why, size_t n)
{
  why[0] = '\0';
  return st->applies(A, be, prec, why, n) == 0;
}

double fe_predict_seconds(fe_backend *be, fe_precision prec, const fe_work *w)
{
  fe_report rep;
  memset(&rep, 0, sizeof rep);
  fe_report_work(&rep, w);
  rep.launches = 1;
  if (fe_perf_predict(be, prec, &rep)) {
    fe_error_clear();
    return w->bytes;
  }
  return rep.predicted_seconds;
}

/* The model's time for action a with strategy st, before anything is built. */
static double strategy_predict(const fe_strategy *st, fe_operator *A, fe_backend *be,
                               fe_precision prec, fe_action a)
{
  fe_work w = {0};
  st->estimate(A, be, prec, a, &w);
  return fe_predict_seconds(be, prec, &w);
}

static int choose_default(fe_operator *A, fe_backend *be, fe_precision prec, int autotune,
                          const fe_strategy **out, char *why, size_t nwhy);

static int pick_strategy(fe_operator *A, const fe_action_opts *o, fe_backend *be,
                         fe_precision prec, const fe_strategy **out, char *why, size_t nwhy);

/* "walk, lanes": the names of the options o gives, and "walk: patch; recompute: ebe": which
 * strategies take each. */
static void given_names(const fe_action_opts *o, int takers, char *buf, size_t n)
{
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < o->given->n && len < n; i++) {
    char who[128];
    fe_action_option_takers(o->given->item[i].name, who, sizeof who);
    len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s", i ? (takers ? "; " : ", ") : "",
                            o->given->item[i].name, takers ? ": " : "", takers ? who : "");
  }
}

/* The strategy of a call that names none but gives options that some strategies take (the
 * bits of `takers`): the default when it takes them all, else the one the model predicts
 * fastest among those that take them all and apply here; an error naming the options when
 * none does. */
static int pick_among(fe_operator *A, const fe_action_opts *o, fe_backend *be, fe_precision prec,
                      unsigned takers, const fe_strategy **out, char *why, size_t nwhy)
{
  char names[256], reason[256] = "";
  const char *caller = o->caller ? o->caller : "", *colon = o->caller ? ": " : "";
  given_names(o, !takers, names, sizeof names);
  FE_ASSERT(takers, FE_ERR_ARG, "%s%sno one strategy takes every option given (%s): name one "
            "with strategy = ...", caller, colon, names);
  fe_action_opts plain = *o;
  plain.given = NULL;
  FE_CHECK(pick_strategy(A, &plain, be, prec, out, why, nwhy));
  for (int i = 0; i < NSTRATEGIES; i++)
    if (strategy_list[i] == *out && (takers >> i & 1)) return 0; /* the default takes them */
  const fe_strategy *best = NULL, *refused = NULL;
  double tbest = 0;
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (!(takers >> i & 1)) continue;
    if (!strategy_applies(st, A, be, prec, reason, sizeof reason)) {
      refused = refused ? refused : st;
      continue;
    }
    double t = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
    if (!best || t < tbest) best = st, tbest = t;
  }
  if (!best) {
    strategy_applies(refused, A, be, prec, reason, sizeof reason);
    FE_ERROR(FE_ERR_ARG, "%s%sno strategy that takes %s applies to %s on %s (%s: %s)", caller,
             colon, names, A->V->name, be->name, refused->name, reason);
  }
  *out = best;
  snprintf(why, nwhy, "default among the strategies that take %s: predicted fastest (apply: %s "
           "%.3g ms)", names, best->name, tbest * 1e3);
  return 0;
}

/* The strategy an action runs with: the one asked for (an error with the reason when it does
 * not apply), else one that measurements made the default here, else the one the model
 * predicts fastest for the Jacobian action (what solvers repeat); a call that gives options
 * only some strategies take chooses among those (pick_among). why says which and why. */
static int pick_strategy(fe_operator *A, const fe_action_opts *o, fe_backend *be,
                         fe_precision prec, const fe_strategy **out, char *why, size_t nwhy)
{
  char reason[256];
  const char *s = o ? o->strategy : NULL;
  if (s) {
    const fe_strategy *st = fe_strategy_find(s);
    if (!st) {
      char names[128] = "";
      for (int i = 0; i < NSTRATEGIES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 strategy_list[i]->name);
      FE_ERROR(FE_ERR_ARG, "unknown strategy '%s' (felab has: %s; A:strategies() says which "
               "apply)", s, names);
    }
    FE_ASSERT(strategy_applies(st, A, be, prec, reason, sizeof reason), FE_ERR_ARG,
              "strategy '%s' does not apply to %s on %s: %s", s, A->V->name, be->name, reason);
    *out = st;
    snprintf(why, nwhy, "asked for");
    return 0;
  }
  if (o && fe_strategies_taking(o) != (1u << NSTRATEGIES) - 1)
    return pick_among(A, o, be, prec, fe_strategies_taking(o), out, why, nwhy);
  for (int i = 0; i < A->npick; i++) /* chosen before: every action of a solve asks */
    if (A->pick[i].be == be && A->pick[i].prec == prec) {
      *out = A->pick[i].st;
      snprintf(why, nwhy, "%s", A->pick[i].why);
      return 0;
    }
  FE_CHECK(choose_default(A, be, prec, o ? o->autotune : FE_AUTOTUNE_AUTO, out, why, nwhy));
  if (A->npick < (int)(sizeof A->pick / sizeof A->pick[0])) {
    A->pick[A->npick].be = be;
    A->pick[A->npick].prec = prec;
    A->pick[A->npick].st = *out;
    snprintf(A->pick[A->npick].why, sizeof A->pick[A->npick].why, "%s", why);
    A->npick++;
  }
  return 0;
}

static void realization_drop(fe_operator *A, fe_realization *r);

/* Autotuning's candidates: within this factor of the model's fastest apply. Wide, since the
 * trials are for the cases the model gets wrong (on the H200 it put Q1 sumfact on a uniform
 * box 13x under its time and left csr out at 4x); a strategy predicted slower still is not
 * worth its setup (csr's matrix at Q3 and up, 12-44x). */
#define AUTOTUNE_FACTOR 10.0

/* Time the apply of each candidate (a first run sets it up, then the best of three rounds of
 * one run each, or of up to ten while they take less than 50 ms a candidate, counts); the
 * fastest is *out, why lists the times; the others' device data are dropped. A candidate
 * that fails (out of memory, say) loses; an interrupt stops the trials. */
static int autotune_trials(fe_operator *A, fe_backend *be, fe_precision prec,
                           const fe_strategy *const *cand, int nc, const fe_strategy **out,
                           char *times, size_t nt)
{
  fe_vector *w = NULL, *y = NULL;
  FE_CHECK(fe_vector_create(be, prec, A->V->ndofs, &w));
  int rc = fe_vector_fill(w, 1.0);
  double best = INFINITY, t[NSTRATEGIES], spent = 0;
  int ok[NSTRATEGIES];
  fe_action_opts o[NSTRATEGIES];
  *out = NULL;
  for (int i = 0; !rc && i < nc; i++) { /* each set up and compiled by a first run */
    fe_action_opts_default(&o[i]);
    o[i].backend = be->name;
    o[i].precision = (int)prec;
    o[i].strategy = cand[i]->name;
    o[i].nolog = 1;
    fe_report rep;
    t[i] = INFINITY;
    int trc = fe_operator_apply(A, w, NULL, &o[i], &y, &rep);
    ok[i] = !trc;
    if (trc == FE_ERR_INTERRUPTED) rc = trc;
    else if (trc) fe_error_clear(); /* it loses */
  }
  /* then rounds of one run each, in turn, so that a passing load weighs on all alike: three,
   * and more while they are short (up to ten in 50 ms a candidate) */
  for (int k = 0; !rc && (k < 3 || (k < 10 && spent < 0.05 * nc)); k++)
    for (int i = 0; !rc && i < nc; i++) {
      if (!ok[i]) continue;
      fe_report rep;
      int trc = fe_operator_apply(A, w, NULL, &o[i], &y, &rep);
      if (trc == FE_ERR_INTERRUPTED) rc = trc;
      else if (trc) fe_error_clear(), ok[i] = 0, t[i] = INFINITY;
      else {
        if (rep.seconds < t[i]) t[i] = rep.seconds;
        spent += rep.seconds;
      }
    }
  for (int i = 0; i < nc; i++)
    if (ok[i] && t[i] < best) best = t[i], *out = cand[i];
  fe_vector_free(w);
  fe_vector_free(y);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  FE_ASSERT(*out, FE_ERR_ARG, "autotune: no strategy ran the apply of %s on %s", A->V->name,
            be->name);
  int len = 0;
  times[0] = 0;
  for (int i = 0; i < nc; i++) {
    if (len >= 0 && (size_t)len < nt)
      len += snprintf(times + len, nt - (size_t)len, "%s%s %.3g ms", i ? ", " : "", cand[i]->name,
                      t[i] * 1e3);
    if (cand[i] == *out) continue;
    for (int k = A->nreal - 1; k >= 0; k--) /* the trials' own realizations of the losers */
      if (k < A->nreal && A->real[k]->st == cand[i] && A->real[k]->be == be &&
          A->real[k]->prec == prec && A->real[k]->asked.block == 0)
        realization_drop(A, A->real[k]);
  }
  return 0;
}

/* The default: a strategy that measurements made the default here, else the one the model
 * predicts fastest for the Jacobian action, leaving out those measured slower here; with
 * autotuning (engine/operator/autotune.h), the one measured fastest here, now or in an earlier session. */
static int choose_default(fe_operator *A, fe_backend *be, fe_precision prec, int autotune,
                          const fe_strategy **out, char *why, size_t nwhy)
{
  char reason[256];
  if (fe_autotune_wanted(A, autotune)) {
    char key[256], name[64], times[256];
    fe_autotune_key(A, be, prec, key, sizeof key);
    const fe_strategy *st = NULL;
    if (fe_autotune_lookup(be, key, name, sizeof name, times, sizeof times))
      st = fe_strategy_find(name);
    if (st && strategy_applies(st, A, be, prec, reason, sizeof reason)) {
      *out = st;
      snprintf(why, nwhy, "default: measured fastest (autotune, cached: %s)", times);
      return 0;
    }
    const fe_strategy *cand[NSTRATEGIES];
    double pred[NSTRATEGIES], fastest = INFINITY;
    int nc = 0;
    for (int i = 0; i < NSTRATEGIES; i++) {
      const fe_strategy *s = strategy_list[i];
      if (!strategy_applies(s, A, be, prec, reason, sizeof reason)) continue;
      pred[nc] = strategy_predict(s, A, be, prec, FE_ACTION_APPLY);
      if (pred[nc] < fastest) fastest = pred[nc];
      cand[nc++] = s;
    }
    int kept = 0;
    for (int i = 0; i < nc; i++)
      if (pred[i] <= AUTOTUNE_FACTOR * fastest ||
          (cand[i]->measured && cand[i]->measured(A, be, prec, reason, sizeof reason) > 0))
        cand[kept++] = cand[i];
    FE_CHECK(autotune_trials(A, be, prec, cand, kept, out, times, sizeof times));
    fe_autotune_store(be, key, (*out)->name, times);
    snprintf(why, nwhy, "default: measured fastest (autotune: %s)", times);
    return 0;
  }
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (st->measured && strategy_applies(st, A, be, prec, reason, sizeof reason) &&
        st->measured(A, be, prec, reason, sizeof reason) > 0) {
      *out = st;
      snprintf(why, nwhy, "default: %s", reason);
      return 0;
    }
  }
  const fe_strategy *best = NULL;
  double tbest = 0;
  int len = snprintf(why, nwhy, "default: predicted fastest (apply:");
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (!strategy_applies(st, A, be, prec, reason, sizeof reason)) continue;
    if (st->measured && st->measured(A, be, prec, reason, sizeof reason) < 0) continue;
    double t = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
    if (len > 0 && (size_t)len < nwhy)
      len += snprintf(why + len, nwhy - (size_t)len, " %s %.3g ms", st->name, t * 1e3);
    if (!best || t < tbest) {
      best = st;
      tbest = t;
    }
  }
  if (len > 0 && (size_t)len < nwhy) snprintf(why + len, nwhy - (size_t)len, ")");
  FE_ASSERT(best, FE_ERR_ARG, "no strategy applies to %s on %s (A:strategies() says why)",
            A->V->name, be->name);
  *out = best;
  return 0;
}

int fe_operator_strategy_info(fe_operator *A, const fe_action_opts *o, fe_strategy_info *info,
                              int max, int *n)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(resolve(o, &be, &prec));
  const fe_strategy *pick;
  char why[160];
  fe_action_opts plain;
  fe_action_opts_default(&plain);
  plain.backend = o ? o->backend : NULL;
  plain.precision = (int)prec;
  FE_CHECK(pick_strategy(A, &plain, be, prec, &pick, why, sizeof why));
  *n = 0;
  for (int i = 0; i < NSTRATEGIES && *n < max; i++) {
    const fe_strategy *st = strategy_list[i];
    fe_strategy_info *f = &info[(*n)++];
    memset(f, 0, sizeof *f);
    f->name = st->name;
    f->summary = st->summary;
    f->applies = strategy_applies(st, A, be, prec, f->why, sizeof f->why);
    f->is_default = st == pick;
    if (f->applies) {
      f->predicted_seconds = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
      char note[256] = "applies";
      if (st->measured && st->measured(A, be, prec, note, sizeof note) == 0)
        snprintf(note, sizeof note, "applies");
      snprintf(f->why, sizeof f->why, "%s", f->is_default ? why : note);
    }
  }
  return 0;
}

/* ---- realizations ---- */

/* Whether the C body reads named constant i (the text k[i], not part of a longer name). */
static int body_reads_constant(const char *body, int i)
{
  char key[24];
  snprintf(key, sizeof key, "k[%d]", i);
  for (const char *s = body ? strstr(body, key) : NULL; s; s = strstr(s + 1, key))
    if (s == body || !(isalnum((unsigned char)s[-1]) || s[-1] == '_')) return 1;
  return 0;
}

/* Whether a stored Jacobian built with the constants k is stale: a constant that the
 * Jacobian action or its blocks read has another value now (pde:set{dt = ...}); a change of
 * one only the residual reads (the time t of a source) keeps it. Only the Jacobian action
 * asks: csr's and ebe's residual and diagonal are matrix-free (fe_stored_matrix_other). */
static int stored_jacobian_stale(const fe_physics *p, const double *k)
{
  for (int i = 0; i < p->nconst; i++) {
    if (p->const_values[i] == k[i]) continue;
    const char *bodies[6] = {p->df0, p->df1, p->g[0], p->g[1], p->g[2], p->g[3]};
    for (int b = 0; b < 6; b++)
      if (body_reads_constant(bodies[b], i)) return 1;
  }
  return 0;
}

/* Forget r (one of A's realizations) and free it. */
static void realization_drop(fe_operator *A, fe_realization *r)
{
  for (int i = 0; i < A->nreal; i++)
    if (A->real[i] == r) {
      memmove(&A->real[i], &A->real[i + 1], sizeof(A->real[0]) * (size_t)(A->nreal - 1 - i));
      A->nreal--;
      break;
    }
  realization_free(r);
}

/* The options of strategy st that the call o asks, into key: its own fields as o sets them,
 * then as o->given writes them (the strategy reads them: an option it does not take is an
 * error), the others at their defaults; no strings. */
static int realization_options(const fe_strategy *st, fe_precision prec, const fe_action_opts *o,
                               fe_action_opts *key)
{
  fe_action_opts_default(key);
  if (o) {
    *key = *o;
    key->backend = key->strategy = NULL;
    key->given = NULL;
    fe_action_opts_keep(key, st->options);
  }
  if (o && o->given) {
    FE_CHECK(fe_strategy_check_given(st, o));
    key->caller = o->caller;
    FE_CHECK(st->read_options(o->given, key));
  }
  key->caller = NULL;
  key->precision = (int)prec;
  key->autotune = key->nolog = key->nowait = 0;
  return 0;
}

/* A's realization of st on be in prec whose options were asked as `asked` or, when eff is
 * given, mean eff; moved last (the most recently used), or NULL. */
static fe_realization *realization_find(fe_operator *A, const fe_strategy *st, fe_backend *be,
                                        fe_precision prec, const char *asked, const char *eff)
{
  for (int i = 0; i < A->nreal; i++) {
    fe_realization *r = A->real[i];
    if (r->be != be || r->prec != prec || r->st != st) continue;
    if (eff ? strcmp(r->key, eff) : strcmp(r->asked_key, asked)) continue;
    /* the most recently used goes last, so that a full list forgets the least recently
     * used: never a realization whose action is running (ebe's and csr's inner calls) */
    memmove(&A->real[i], &A->real[i + 1], sizeof(A->real[0]) * (size_t)(A->nreal - 1 - i));
    A->real[A->nreal - 1] = r;
    return r;
  }
  return NULL;
}

/* The realization for these options, made on first use: one per strategy, backend,
 * precision and effective options (the strategy's key: options asked in another order, or
 * defaults spelled out, share one). */
static int realization_get(fe_operator *A, const fe_action_opts *o, fe_realization **out,
                           char *why, size_t nwhy)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(resolve(o, &be, &prec));
  const fe_strategy *st;
  FE_CHECK(pick_strategy(A, o, be, prec, &st, why, nwhy));
  fe_action_opts key;
  FE_CHECK(realization_options(st, prec, o, &key));
  char asked[sizeof A->real[0]->asked_key], eff[sizeof A->real[0]->key];
  fe_action_opts_asked_key(&key, st->options, asked, sizeof asked);
  if ((*out = realization_find(A, st, be, prec, asked, NULL))) return 0;
  st->effective_key(A, be, prec, &key, eff, sizeof eff);
  if ((*out = realization_find(A, st, be, prec, NULL, eff))) return 0;
  fe_realization *r;
  FE_CALLOC(r, 1, "realization");
  *r = (fe_realization){.A = A, .st = st, .be = be, .prec = prec, .asked = key,
                        .geo_shared = fe_geometry_shared(A, &key)};
  snprintf(r->asked_key, sizeof r->asked_key, "%s", asked);
  snprintf(r->key, sizeof r->key, "%s", eff);
  int frc = st->folds ? fe_qdata_folds(A, key.fold, &r->folded)
            : key.fold != FE_FOLD_ON ? 0
            : fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "fold = true: strategy %s "
                           "reads no folded per-point data (transpose and sumfact do)", st->name);
  if (frc) {
    free(r);
    return fe_error_push(frc, __FILE__, __LINE__, __func__);
  }
  double t0 = fe_clock(), *dv = NULL;
  char what[48];
  snprintf(what, sizeof what, "setting up %s", st->name);
  fe_progress_begin(what, 0);
  fe_progress_watch(1); /* the elapsed time moves through steps that report nothing */
  int rc = st->configure(r, &key);
  if (!rc) rc = st->setup(r);
  fe_progress_watch(0);
  fe_progress_end();
  if (rc == FE_ERR_MEM) /* which operator, where, and the part that did not fit */
    fe_error_context("setting up %s on %s (%s) for %d cells: building %s", st->name, be->name,
                     fe_precision_name(prec), A->V->mesh->ncells,
                     r->building ? r->building : "the strategy's own data");
  if (!rc && st->delegate) { /* csr, ebe: remember the constants the matrices were made with */
    size_t nk = (size_t)A->pde->nconst;
    if ((r->built_constants = fe_alloc(sizeof(double) * (nk + 1)))) {
      if (nk) memcpy(r->built_constants, A->pde->const_values, sizeof(double) * nk);
    } else rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  }
  /* the space's coordinates, in place where the backend reads host memory (cpu, double) */
  r->coords_wrapped = !rc && prec == FE_DOUBLE && be->ops->wrap;
  size_t ncoord = 3 * (size_t)A->V->nnodes;
  if (!rc && !r->coords_wrapped)
    rc = fe_memory_check_on(be, ncoord * fe_precision_size(prec), "operator %s on %s: the nodes' "
                            "coordinates (%d nodes)", A->pde->name, A->V->name, A->V->nnodes);
  if (r->coords_wrapped)
    rc = be->ops->wrap(be->impl, A->V->node_coords, sizeof(double) * ncoord, &r->coords);
  else if (!rc) rc = fe_upload_reals(be, prec, A->V->node_coords, ncoord, &r->coords);
  if (!rc) rc = fe_upload_ints(be, A->dir_nodes, (size_t)A->ndir, &r->didx);
  if (!rc && !(dv = fe_alloc(sizeof(double) * (size_t)(A->ndir + 1))))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    for (int i = 0; i < A->ndir; i++) dv[i] = A->value;
    rc = fe_upload_reals(be, prec, dv, (size_t)A->ndir, &r->dval);
  }
  free(dv);
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

/* Generate and compile an action's kernel on first use. */
static int realization_kernel(fe_realization *r, fe_action a, double *compile_seconds)
{
  *compile_seconds = 0;
  if (r->kernel[a]) return 0;
  char *src;
  FE_CHECK(r->st->source(r, a, r->be->ops->preamble(r->be->impl, r->prec), &src));
  int cached = 0;
  int rc = fe_compile(r->be, src, &r->module[a], compile_seconds, &cached);
  free(src);
  FE_CHECK(rc);
  r->kernel_from[a] = cached ? 2 : 1;
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->module[a], r->st->entry(a), &r->kernel[a]));
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->module[a], "fe_dirichlet", &r->dirichlet[a]));
  return 0;
}

/* y[i] <- a src[i] + b g_i + c on the constrained rows. */
static int op_dirichlet(fe_realization *r, fe_action act, const fe_vector *src, double a,
                        double b, double c, fe_vector *y, int *launches)
{
  fe_operator *A = r->A;
  if (A->ndir == 0) return 0;
  enum { ITEMS = 256 }; /* constrained rows a group */
  int ng = (A->ndir + ITEMS - 1) / ITEMS;
  fe_arg args[10] = {
      {.kind = FE_ARG_INT, .i = ng},            {.kind = FE_ARG_INT, .i = A->ndir},
      {.kind = FE_ARG_INT, .i = ITEMS},         {.kind = FE_ARG_BUFFER, .buf = &r->didx},
      {.kind = FE_ARG_BUFFER, .buf = &r->dval}, {.kind = FE_ARG_BUFFER, .buf = &src->buf},
      {.kind = FE_ARG_REAL, .r = a},            {.kind = FE_ARG_REAL, .r = b},
      {.kind = FE_ARG_REAL, .r = c},            {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  size_t gs = ITEMS > r->be->info.max_group ? r->be->info.max_group : ITEMS;
  FE_CHECK(r->be->ops->launch(r->be->impl, r->dirichlet[act], (size_t)ng, gs, 10, args, r->prec, NULL));
  (*launches)++;
  return 0;
}

/* An input on the action's backend and precision: itself, or a converted copy (*tmp). */
static int op_input(const fe_vector *x, const fe_realization *r, int n, const fe_vector **use,
                    fe_vector **tmp, double *transfer)
{
  *tmp = NULL;
  *use = x;
  if (!x) return 0;
  FE_ASSERT(x->n == n, FE_ERR_ARG, "the vector has %d entries but the operator's space has %d",
            x->n, n);
  if (x->be == r->be && x->prec == r->prec) return 0;
  double t0 = fe_clock();
  FE_CHECK(fe_vector_convert(x, r->be, r->prec, tmp));
  *transfer += fe_clock() - t0;
  *use = *tmp;
  return 0;
}

/* The physics' current constants and auxiliary fields on the action's device: constants
 * are written again when they changed, fields converted when they live elsewhere. */
static int op_bind_physics(fe_realization *r, fe_vector **tmp, double *transfer)
{
  const fe_physics *p = r->A->pde;
  if (r->params_version != p->const_version) FE_CHECK(upload_params(r->A, r));
  for (int i = 0; i < p->nfields; i++) {
    const fe_vector *use;
    FE_ASSERT(p->field_vec[i], FE_ERR_ARG, "the physics' field '%s' is not bound to a vector",
              p->field_names[i]);
    int rc = op_input(p->field_vec[i], r, p->field_space[i]->ndofs, &use, &tmp[i], transfer);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    r->fv[i] = &use->buf;
  }
  return 0;
}

int fe_operator_realize(fe_operator *A, const fe_action_opts *o, fe_realization **r, char *why,
                        size_t nwhy)
{
  return realization_get(A, o, r, why, nwhy);
}

int fe_operator_realize_stored(fe_operator *A, const fe_action_opts *o, fe_realization **r,
                               char *why, size_t nwhy)
{
  FE_CHECK(realization_get(A, o, r, why, nwhy));
  if ((*r)->geo[FE_ACTION_APPLY].ptr) return 0;
  fe_action_opts stored = (*r)->asked; /* the options o's realization read */
  stored.backend = (*r)->be->name;
  stored.strategy = (*r)->st->name;
  if (stored.geometry != FE_GEOMETRY_UNSHARED) stored.geometry = FE_GEOMETRY_STORED;
  return realization_get(A, &stored, r, why, nwhy);
}

int fe_realization_bind(fe_realization *r, fe_vector **tmp, double *transfer)
{
  return op_bind_physics(r, tmp, transfer);
}

void fe_realization_unbind(fe_realization *r, fe_vector **tmp)
{
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) {
    fe_vector_free(tmp[i]);
    tmp[i] = NULL;
    r->fv[i] = NULL;
  }
}

/* The output: reuse *out when it fits, else make one. */
static int op_output(const fe_realization *r, int n, fe_vector **out)
{
  if (*out) {
    FE_ASSERT((*out)->be == r->be && (*out)->prec == r->prec && (*out)->n == n, FE_ERR_ARG,
              "the output vector does not match the action (%s/%s, %d entries)", r->be->name,
              fe_precision_name(r->prec), n);
    return 0;
  }
  return fe_vector_create(r->be, r->prec, n, out);
}

void fe_report_operator(fe_report *rep, const fe_operator *A, fe_action rule)
{
  const fe_quadrature *Q = &A->quad[rule];
  snprintf(rep->space, sizeof rep->space, "%s%s%s on %s", A->V->name, A->V->ncomp > 1 ? "^" : "",
           A->V->ncomp > 1 ? (A->V->ncomp == 2 ? "2" : "3") : "", fe_cell_name(A->V->elem.cell));
  snprintf(rep->quadrature, sizeof rep->quadrature, "%s, %d points, degree %d",
           Q->name ? Q->name : "?", Q->npoints, Q->degree);
  rep->ncells = A->V->mesh->ncells;
  rep->ndofs = A->V->ndofs;
}

/* The strategy's counts of action a on r, counted on first use. */
static const fe_work *realization_work(fe_realization *r, fe_action a)
{
  if (!r->counted[a]) {
    memset(&r->work[a], 0, sizeof r->work[a]);
    r->st->count(r, a, &r->work[a]);
    r->counted[a] = 1;
  }
  return &r->work[a];
}

/* Fill the report of one action and log it. */
static int op_report(fe_realization *r, fe_action a, const fe_action_opts *o, const char *why,
                     double seconds, double compile_s, double transfer, int launches,
                     int first_run, fe_report *rep)
{
  fe_report_begin(rep, fe_action_name(a), r->be, r->prec, r->st->name, why);
  rep->first_run = first_run;
  if (r->st->describe) { /* "<why>; <how>" */
    char how[96];
    size_t len = strlen(rep->why);
    r->st->describe(r, a, how, sizeof how);
    if (len + 2 < sizeof rep->why) snprintf(rep->why + len, sizeof rep->why - len, "; %s", how);
  }
  fe_report_operator(rep, r->A, a);
  fe_report_work(rep, realization_work(r, a));
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = r->setup_seconds;
  double parts = 0;
  for (int i = 0; i < 3; i++) {
    rep->setup_part[i] = r->setup_part[i];
    parts += r->setup_part[i];
    r->setup_part[i] = 0;
  }
  rep->setup_part[3] = r->setup_seconds > parts ? r->setup_seconds - parts : 0;
  r->setup_seconds = 0; /* reported by the first call only */
  rep->kernel_from = r->kernel_from[a] ? r->kernel_from[a] : 3;
  r->kernel_from[a] = 0;
  rep->launches = launches;
  fe_perf_occupancy(r->be, r->kernel[a], rep);
  FE_CHECK(fe_perf_predict(r->be, r->prec, rep));
  if (!o || !o->nolog) fe_perf_log_add(rep);
  return 0;
}

/* The device work of one action: mask the direction, zero the output, integrate, fix the
 * constrained rows. */
static int op_run(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                  fe_vector *out, int wait, int *launches)
{
  fe_operator *A = r->A;
  int n = A->V->ndofs;
  *launches = 0;
  /* the direction without its constrained part (unless the kernel reads it as zero itself) */
  int mask = a == FE_ACTION_APPLY && A->ndir > 0 && !r->st->masks_direction;
  if (mask) {
    if (!r->scratch) FE_CHECK(fe_vector_create(r->be, r->prec, n, &r->scratch));
    FE_CHECK(fe_vector_copy(r->scratch, w));
    FE_CHECK(op_dirichlet(r, a, r->scratch, 0, 0, 0, r->scratch, launches));
  }
  const fe_vector *wm = mask ? r->scratch : w;
  if (!u && !r->zero) FE_CHECK(fe_vector_create(r->be, r->prec, n, &r->zero)); /* zeroed */
  if (!u) u = r->zero;
  FE_CHECK(fe_vector_fill(out, 0.0));
  (*launches)++; /* the fill is a launch too */
  FE_CHECK(r->st->integrate(r, a, u, wm ? wm : u, out, launches));
  switch (a) {
  case FE_ACTION_RESIDUAL: FE_CHECK(op_dirichlet(r, a, u, 1, -1, 0, out, launches)); break;
  case FE_ACTION_APPLY: FE_CHECK(op_dirichlet(r, a, w, 1, 0, 0, out, launches)); break;
  default: FE_CHECK(op_dirichlet(r, a, out, 0, 0, 1, out, launches)); break;
  }
  return wait ? r->be->ops->finish(r->be->impl) : 0;
}

/* The common path of the three actions. */
static int op_action(fe_operator *A, fe_action a, const fe_vector *u_in, const fe_vector *w_in,
                     const fe_action_opts *o, fe_vector **out, fe_report *rep)
{
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(realization_get(A, o, &r, why, sizeof why));
  if (a == FE_ACTION_APPLY && r->built_constants &&
      stored_jacobian_stale(A->pde, r->built_constants)) { /* csr, ebe: made anew */
    realization_drop(A, r);
    FE_CHECK(realization_get(A, o, &r, why, sizeof why));
  }
  double compile_s, transfer = 0, seconds = 0;
  FE_CHECK(realization_kernel(r, a, &compile_s));
  int n = A->V->ndofs, launches = 0, made = *out == NULL;
  const fe_vector *u, *w;
  fe_vector *tu = NULL, *tw = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  int rc = op_input(u_in, r, n, &u, &tu, &transfer);
  if (!rc) rc = op_input(w_in, r, n, &w, &tw, &transfer);
  if (!rc) rc = op_bind_physics(r, tf, &transfer);
  if (!rc && a == FE_ACTION_APPLY && r->folded && !fe_qdata_current(r)) {
    /* the per-point data made once (again after a named constant changed): setup time */
    double t0 = fe_clock();
    rc = fe_qdata_build(r);
    r->setup_seconds += fe_clock() - t0;
  }
  if (!rc) rc = op_output(r, n, out);
  /* A kernel's first run answers the call (the answer comes one run sooner; the report says
   * it was the first), except where a first launch does lazy work worth seconds (PoCL
   * compiles there): that run counts as compile time and the second is timed. */
  int first_run = !r->warm[a];
  if (!rc && first_run && r->be->info.lazy_launch) {
    double t0 = fe_clock();
    rc = op_run(r, a, u, w, *out, 1, &launches);
    compile_s += fe_clock() - t0;
    first_run = 0;
  }
  if (!rc) {
    double t0 = fe_clock();
    rc = op_run(r, a, u, w, *out, !o->nowait, &launches);
    seconds = fe_clock() - t0;
    r->warm[a] = 1;
  }
  fe_vector_free(tu);
  fe_vector_free(tw);
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) {
    fe_vector_free(tf[i]);
    r->fv[i] = NULL;
  }
  if (!rc) rc = op_report(r, a, o, why, seconds, compile_s, transfer, launches, first_run, rep);
  if (rc && made) {
    fe_vector_free(*out);
    *out = NULL;
  }
  FE_CHECK(rc);
  return 0;
}

int fe_operator_residual(fe_operator *A, const fe_vector *u, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep)
{
  FE_ASSERT(u, FE_ERR_ARG, "residual needs a state u");
  return op_action(A, FE_ACTION_RESIDUAL, u, NULL, o, out, rep);
}

int fe_operator_apply(fe_operator *A, const fe_vector *w, const fe_vector *at,
                      const fe_action_opts *o, fe_vector **out, fe_report *rep)
{
  FE_ASSERT(w, FE_ERR_ARG, "apply needs a direction");
  return op_action(A, FE_ACTION_APPLY, at, w, o, out, rep);
}

int fe_operator_diagonal(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep)
{
  return op_action(A, FE_ACTION_DIAGONAL, at, NULL, o, out, rep);
}

int fe_operator_initial(fe_operator *A, const fe_action_opts *o, double interior, fe_vector **out)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(resolve(o, &be, &prec));
  int n = A->V->ndofs;
  double *v;
  FE_MALLOC(v, n, "initial vector");
  for (int i = 0; i < n; i++) v[i] = interior;
  for (int i = 0; i < A->ndir; i++) v[A->dir_nodes[i]] = A->value;
  int rc = fe_vector_create(be, prec, n, out);
  if (!rc) rc = fe_vector_set(*out, v);
  free(v);
  if (rc && *out) {
    fe_vector_free(*out);
    *out = NULL;
  }
  return rc;
}

int fe_operator_prepare(fe_operator *A, const char *action, const fe_action_opts *o,
                        double *compile_seconds)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(realization_get(A, o, &r, why, sizeof why));
  FE_CHECK(realization_kernel(r, a, compile_seconds));
  if (a == FE_ACTION_APPLY && r->folded && !fe_qdata_current(r)) {
    double t0 = fe_clock(); /* setup, reported by the next apply */
    FE_CHECK(fe_qdata_build(r));
    r->setup_seconds += fe_clock() - t0;
  }
  return 0;
}

int fe_operator_model(fe_operator *A, const char *action, const fe_action_opts *o,
                      fe_report *rep)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  double compile_s;
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(realization_get(A, o, &r, why, sizeof why));
  FE_CHECK(realization_kernel(r, a, &compile_s));
  fe_report_begin(rep, fe_action_name(a), r->be, r->prec, r->st->name, why);
  fe_report_operator(rep, A, a);
  fe_report_work(rep, realization_work(r, a));
  /* the fill of the output, the integration (a launch per color), the constrained rows,
   * and for an apply the masking of the direction where the kernel does not do it itself */
  rep->launches = 1 + (r->ncolors > 0 ? r->ncolors : 1) + (A->ndir > 0 ? 1 : 0) +
                  (a == FE_ACTION_APPLY && A->ndir > 0 && !r->st->masks_direction ? 1 : 0);
  rep->compile_seconds = compile_s;
  fe_perf_occupancy(r->be, r->kernel[a], rep);
  return fe_perf_predict(r->be, r->prec, rep);
}

int fe_operator_source(fe_operator *A, const char *action, const fe_action_opts *o, char **src)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(realization_get(A, o, &r, why, sizeof why));
  const fe_strategy *d = r->st->delegate ? r->st->delegate(a) : NULL;
  if (d) { /* the kernel that computes this action is another strategy's */
    fe_action_opts od;
    if (o) od = *o;
    else fe_action_opts_default(&od);
    od.backend = r->be->name;
    od.precision = (int)r->prec;
    od.strategy = d->name;
    od.given = NULL; /* the options of the strategy asked, not the delegate's */
    FE_CHECK(realization_get(A, &od, &r, why, sizeof why));
  }
  return r->st->source(r, a, r->be->ops->preamble(r->be->impl, r->prec), src);
}

/* ---- the transposed operator (BiCG's shadow system) ----
 * J^T has the same space, Dirichlet nodes and value as J; its physics is the pde's adjoint
 * (engine/physics/physics.h: M^T at every point) and its rules are A's own, so that (v, J w) and
 * (J^T v, w) are the same sums. Dirichlet rows (J w)_i = w_i with constrained entries of w
 * masked make J = P J0 P + (I - P), whose transpose is P J0^T P + (I - P): the same
 * treatment of the adjoint physics. */

/* Whether T's rules are A's (A:set_quadrature may have changed A's since T was made). */
static int same_rules(const fe_operator *A, const fe_operator *T)
{
  for (int a = 0; a < FE_NACTIONS; a++) {
    const fe_quadrature *p = &A->quad[a], *q = &T->quad[a];
    if (p->npoints != q->npoints || p->degree != q->degree || p->name != q->name) return 0;
    for (int i = 0; i < p->npoints * p->dim; i++)
      if (p->points[i] != q->points[i]) return 0;
  }
  return 1;
}

/* T's rules and boundary as A's (T made with none). */
static int transpose_copy(const fe_operator *A, fe_operator *T)
{
  for (int a = 0; a < FE_NACTIONS; a++) {
    const fe_quadrature *p = &A->quad[a];
    fe_quadrature *q = &T->quad[a];
    fe_quadrature_free(q);
    *q = *p;
    q->points = fe_alloc(sizeof(double) * (size_t)(p->npoints * p->dim + 1));
    q->weights = fe_alloc(sizeof(double) * (size_t)(p->npoints + 1));
    FE_ASSERT(q->points && q->weights, FE_ERR_MEM, "out of host memory for the transpose's rules");
    memcpy(q->points, p->points, sizeof(double) * (size_t)(p->npoints * p->dim));
    memcpy(q->weights, p->weights, sizeof(double) * (size_t)p->npoints);
  }
  free(T->dir_nodes);
  T->dir_nodes = fe_alloc(sizeof(int) * (size_t)(A->ndir + 1));
  FE_ASSERT(T->dir_nodes, FE_ERR_MEM, "out of host memory for the transpose's boundary");
  memcpy(T->dir_nodes, A->dir_nodes, sizeof(int) * (size_t)A->ndir);
  T->ndir = A->ndir;
  T->value = A->value;
  return 0;
}

int fe_operator_transpose(fe_operator *A, fe_operator **AT)
{
  *AT = NULL;
  if (A->pde->symmetric) { /* M = M^T pointwise: J^T = J */
    *AT = A->transposed = A;
    return 0;
  }
  const fe_physics *adj;
  FE_CHECK(fe_physics_adjoint(A->pde, &adj)); /* also brings its constants up to date */
  if (A->transposed && !same_rules(A, A->transposed)) {
    fe_operator_free(A->transposed);
    A->transposed = NULL;
  }
  if (!A->transposed) {
    fe_operator *T;
    FE_CHECK(fe_operator_create(A->V, adj, NULL, 0, A->value, &T));
    int rc = transpose_copy(A, T);
    if (rc) {
      fe_operator_free(T);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
    A->transposed = T;
  }
  *AT = A->transposed;
  return 0;
}
