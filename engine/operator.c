/* felab operators. An operator is realized once per (backend, precision, block): the cell
 * map, the geometric factors, the coordinates and the work-group schedule are moved to the
 * backend, and each action's kernel is generated and compiled on first use. An action is
 * then: convert the inputs if they live elsewhere, zero the output, run the integration
 * kernel (once per color of work groups when the backend scatters without atomics), fix the
 * constrained rows, and fill a report with counted, measured and predicted figures. */
#include "engine/operator.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen.h"
#include "engine/error.h"
#include "engine/patch.h"
#include "engine/quadrature.h"

#define OP_MAX_DEVICES 8

/* Cells per patch: one work-group item each, or WALK_CELLS per item when walking.
 * (Tuned by scripts/bench/gpu.lua: docs/benchmarks.md.) */
#define PATCH_BLOCK 512
#define PATCH_WALK_BLOCK_CELLS 128 /* walks per patch */
/* Items per patch work group: larger patches give each item several cells. */
#define PATCH_ITEMS 256

/* The operator on one backend in one precision. */
typedef struct op_device {
  fe_backend *be;
  fe_precision prec;
  int block;             /* cells per work group */
  int asked;             /* the block asked for (0: the default, which may have been halved) */
  int patch;             /* strategy "patch" (else "transpose") */
  int colored;           /* groups run color by color, scatter with plain adds */
  int ngroups;
  int ncolors;
  int *color_start;      /* groups of color c: group list [color_start[c], color_start[c+1]) */
  fe_buffer groups;      /* group list, ordered by color */
  fe_buffer cells;       /* ncells x NB node ids */
  fe_buffer pstart, pnodes, pruns, lcells; /* patches: node list offsets, node lists, the
                                            * nodes' run words, local cell maps or events */
  fe_buffer estart;      /* patches with walks: event offsets */
  int walk;              /* patches: cells per walk (0: an item per cell) */
  int reuse;             /* walks keep nodes across cells in another vertex order */
  int items;             /* walks per patch */
  int maxl, maxc, maxe;  /* patches: nodes, places (padding included) and events of the largest */
  int lanes;             /* patches: nodes whose runs are interleaved (fe_patch_place) */
  double patch_nodes, walk_events; /* summed over patches */
  int patch_too_big;     /* patches: a group's shared arrays exceed the device's */
  fe_buffer geo[FE_NACTIONS]; /* geometric factors at each action's points (shared when equal) */
  fe_buffer coords;      /* nnodes x 3 */
  fe_buffer aux;         /* per-cell constants of the physics, in stored cell order */
  fe_buffer params;      /* the physics' named constants */
  unsigned params_version; /* the physics' const_version they hold */
  fe_buffer fmaps;       /* the auxiliary fields' dof maps, NBF per stored cell */
  const fe_buffer *fv[FE_PHYSICS_MAX_FIELDS]; /* the auxiliary fields' values for this call */
  fe_buffer didx;        /* constrained nodes */
  fe_buffer dval;        /* their prescribed values */
  fe_kernel *kernel[FE_NACTIONS];    /* integrate or diagonal */
  fe_kernel *dirichlet[FE_NACTIONS]; /* the dirichlet kernel of that action's module */
  fe_module *module[FE_NACTIONS];
  int warm[FE_NACTIONS];  /* the action ran once (its first run is not timed) */
  fe_vector *scratch;    /* the masked direction of a Jacobian action */
  fe_vector *zero;       /* the state of a Jacobian taken at zero */
  double setup_seconds;  /* building and moving the data above, reported once */
} op_device;

struct fe_operator {
  const fe_space *V;
  const fe_physics *pde;
  fe_quadrature quad[FE_NACTIONS]; /* each action's rule: exact for its own integrand */
  int geo_affine;
  int geo_recompute;      /* first-order space on straight cells: its basis is the map */
  double *aux;            /* ncells x naux per-cell constants from the physics' region table */
  int ndir;
  int *dir_nodes;
  double value;
  op_device dev[OP_MAX_DEVICES];
  int ndev;
};

void fe_action_opts_default(fe_action_opts *o)
{
  memset(o, 0, sizeof *o);
  o->precision = -1;
}

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
  A->aux = malloc(sizeof(double) * (size_t)m->ncells * p->naux + 1);
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
    FE_CHECK(fe_quadrature_create_kind(A->V->elem.cell, k, kind, &q));
    fe_quadrature_free(&A->quad[a]);
    A->quad[a] = q;
  }
  return 0;
}

static void op_device_free(op_device *d);

int fe_operator_set_quadrature(fe_operator *A, int degree, int kind)
{
  FE_ASSERT(kind >= FE_QUAD_AUTO && kind <= FE_QUAD_GLL, FE_ERR_ARG, "unknown quadrature rule %d", kind);
  FE_CHECK(make_rules(A, degree, (fe_quad_kind)kind));
  for (int i = 0; i < A->ndev; i++) op_device_free(&A->dev[i]);
  A->ndev = 0;
  return 0;
}

const fe_quadrature *fe_operator_quadrature(const fe_operator *A, const char *action)
{
  fe_action a;
  if (fe_action_parse(action, &a)) return NULL;
  return &A->quad[a];
}

static void op_device_free(op_device *d)
{
  fe_backend *be = d->be;
  fe_buffer *bufs[] = {&d->groups, &d->cells, &d->coords, &d->aux,   &d->didx,
                       &d->dval,   &d->params, &d->fmaps, &d->pstart, &d->pnodes, &d->pruns,
                       &d->lcells, &d->estart};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) be->ops->release(be->impl, bufs[i]);
  for (int a = FE_NACTIONS - 1; a >= 0; a--) { /* shared buffers are released once, by the first */
    int shared = 0;
    for (int b = 0; b < a; b++) shared |= d->geo[b].ptr == d->geo[a].ptr;
    if (d->geo[a].ptr && !shared) be->ops->release(be->impl, &d->geo[a]);
  }
  for (int a = 0; a < FE_NACTIONS; a++)
    if (d->module[a]) be->ops->module_free(be->impl, d->module[a]);
  fe_vector_free(d->scratch);
  fe_vector_free(d->zero);
  free(d->color_start);
  memset(d, 0, sizeof *d);
}

void fe_operator_free(fe_operator *A)
{
  if (!A) return;
  for (int i = 0; i < A->ndev; i++) op_device_free(&A->dev[i]);
  for (int a = 0; a < FE_NACTIONS; a++) fe_quadrature_free(&A->quad[a]);
  free(A->aux);
  free(A->dir_nodes);
  free(A);
}

const fe_space *fe_operator_space(const fe_operator *A) { return A->V; }
int fe_operator_ndirichlet(const fe_operator *A) { return A->ndir; }

const char *fe_operator_strategies(const fe_operator *A)
{
  (void)A;
  return "transpose, patch";
}

/* The strategy an action runs with: the one asked for, else "patch" on cuda for first-order
 * spaces on straight cells and P2 simplices (it recomputes the geometry and scatters once per patch node,
 * docs/kernels.md), else "transpose". */
static int pick_strategy(const fe_action_opts *o, const fe_backend *be, const fe_operator *A,
                         int *patch)
{
  const char *s = o ? o->strategy : NULL;
  if (!s) { /* P2 simplices too: 0.83 against 1.49 ms on the H100 (docs/benchmarks.md) */
    fe_cell_type t = A->V->elem.cell;
    int p2 = A->V->elem.order == 2 && (t == FE_CELL_TET || t == FE_CELL_TRI);
    *patch = !strcmp(be->name, "cuda") && (A->geo_recompute || p2);
    return 0;
  }
  FE_ASSERT(!strcmp(s, "transpose") || !strcmp(s, "patch"), FE_ERR_ARG,
            "unknown strategy '%s' for this operator (available: transpose, patch)", s);
  *patch = !strcmp(s, "patch");
  return 0;
}

/* Resolve backend and precision of an action. */
static int resolve(const fe_action_opts *o, fe_backend **be, fe_precision *prec)
{
  FE_CHECK(fe_backend_get(o ? o->backend : NULL, be));
  *prec = o && o->precision >= 0 ? (fe_precision)o->precision : fe_precision_default();
  if (o && o->strategy && strcmp(o->strategy, "transpose") && strcmp(o->strategy, "patch"))
    FE_ERROR(FE_ERR_ARG, "unknown strategy '%s' for this operator (available: transpose, patch)",
             o->strategy);
  if (*prec == FE_DOUBLE && !(*be)->info.fp64)
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s (%s) has no double precision; use precision = \"single\"",
             (*be)->name, (*be)->info.name);
  return 0;
}

/* Shared (local) memory one cell of a work group needs in the integration kernel: its
 * state and direction values, its node coordinates and the pulled-back physics at its
 * points (integrate.knl). */
static size_t shared_per_cell(const fe_operator *A, fe_precision prec)
{
  const fe_space *V = A->V;
  int nb = V->elem.nbasis, nc = V->ncomp, nq = 0;
  for (int a = 0; a < FE_NACTIONS; a++) nq = imax(nq, A->quad[a].npoints);
  return (size_t)(2 * nb * nc + 3 * nb + nc * (1 + V->elem.dim) * nq) * fe_precision_size(prec);
}

/* The most shared memory a work group may use: the device's local memory, or on the cpu
 * (where "shared" arrays live on each thread's stack) 512 KiB. */
static size_t shared_limit(const fe_backend *be)
{
  return !strcmp(be->name, "cpu") ? (size_t)512 << 10 : be->info.local_mem;
}

/* Cells per work group: 32 fills a GPU group with (cell, point) threads and, on a CPU,
 * measured fastest for the P1 apply (docs/benchmarks.md); halved until the group's shared
 * arrays fit the device (high orders). */
static int default_block(const fe_backend *be, const fe_operator *A, fe_precision prec, int patch,
                         int walk)
{
  if (patch && walk > 0) return PATCH_WALK_BLOCK_CELLS * walk;
  /* On a GPU an item of a higher-order space holds many registers (a P2 tet in double ~155):
   * smaller patches let more groups share a multiprocessor. P2 tets on the H100: 0.80 ms with
   * 128 cells against 1.08 with 256 in double; 0.39 with 256 against 0.46 with 128 in single
   * (docs/benchmarks.md). */
  if (patch && be->info.is_gpu && A->V->elem.order > 1)
    return PATCH_BLOCK / (prec == FE_DOUBLE ? 4 : 2);
  if (patch) return PATCH_BLOCK;
  int block = 32;
  size_t per_cell = shared_per_cell(A, prec), limit = shared_limit(be);
  while (block > 1 && block * per_cell > limit) block /= 2;
  return block;
}

/* Only the cpu backend runs a group's threads one after another, so only there may groups
 * of one color scatter with plain adds; GPUs and OpenCL devices use atomics. */
static int scatter_colored(const fe_backend *be) { return !strcmp(be->name, "cpu"); }

static size_t group_size(const op_device *d, const fe_operator *A, fe_action a);

static void fill_spec(const fe_operator *A, const op_device *d, fe_action a, fe_kernel_spec *s)
{
  s->V = A->V;
  s->pde = A->pde;
  s->quad = &A->quad[a];
  s->action = a;
  s->prec = d->prec;
  s->block = d->block;
  s->colored = d->colored;
  s->geo_affine = A->geo_affine;
  s->patch = d->patch;
  s->maxl = d->maxl;
  s->maxc = d->maxc;
  s->lanes = d->lanes;
  s->maxe = d->maxe;
  s->geo_recompute = d->patch && A->geo_recompute;
  s->patch_nodes = d->patch_nodes;
  s->walk = d->walk;
  s->items = d->items;
  s->group_items = (int)group_size(d, A, a);
  s->walk_events = d->walk_events;
}

/* Cells rounded up to whole work groups. */
static size_t padded_cells(const fe_operator *A, int block)
{
  size_t n = (size_t)A->V->mesh->ncells;
  return (n + block - 1) / block * block;
}

/* Geometric factors in double at the points of rule Q, structure-of-arrays: factor j of
 * every (cell, point) then factor j + 1; the factors are Jinv (row-major, dxi_i/dx_d) then
 * det J. Affine cells store one point per cell. With geo_out NULL the cells are only
 * checked (a kernel that recomputes the factors still needs every det J > 0). */
static int build_geometry(const fe_operator *A, const fe_quadrature *Q, const int *perm,
                          size_t npad, double **geo_out, size_t *nwords)
{
  const fe_space *V = A->V;
  const fe_element *el = &V->elem;
  int dim = el->dim, stride = fe_geo_stride(dim);
  int ngq = A->geo_affine ? 1 : Q->npoints;
  size_t n = npad * ngq * stride;
  double *geo = NULL;
  if (geo_out) FE_MALLOC(geo, n, "geometric factors");
  long long bad = -1;
  double bad_det = 0;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < npad; i++) {
    /* a padding cell: its group's first cell with zero measure, so it adds exact zeros */
    int pad = perm[i] < 0;
    int c = pad ? -perm[i] - 1 : perm[i];
    for (int q = 0; q < ngq; q++) {
      double J[9], K[10], x[3];
      fe_space_cell_map(V, c, Q->points + q * dim, x, J);
      double det = fe_space_map_inverse(dim, J, K);
      K[dim * dim] = pad ? 0 : det;
      for (int j = 0; geo && j < stride; j++) geo[(size_t)j * npad * ngq + i * ngq + q] = K[j];
      if (!(det > 0)) {
#pragma omp critical
        if (bad < 0 || (long long)c < bad) {
          bad = (long long)c;
          bad_det = det;
        }
      }
    }
  }
  if (bad >= 0) {
    free(geo);
    FE_ERROR(FE_ERR_MESH, "cell %lld (%s) is %s: det J = %.3g", bad, fe_cell_name(el->cell),
             bad_det < 0 ? "inverted" : "degenerate", bad_det);
  }
  if (geo_out) *geo_out = geo;
  *nwords = n;
  return 0;
}

/* Upload n doubles as reals of precision prec into a new buffer. */
static int upload_reals(fe_backend *be, fe_precision prec, const double *v, size_t n, fe_buffer *buf)
{
  size_t w = fe_precision_size(prec);
  FE_CHECK(be->ops->alloc(be->impl, n * w, buf));
  int rc;
  if (prec == FE_DOUBLE) {
    rc = be->ops->write(be->impl, buf, 0, n * w, v);
  } else {
    float *tmp = malloc(n * w + 1);
    if (!tmp) FE_ERROR(FE_ERR_MEM, "out of host memory for a conversion");
    for (size_t i = 0; i < n; i++) tmp[i] = (float)v[i];
    rc = be->ops->write(be->impl, buf, 0, n * w, tmp);
    free(tmp);
  }
  return rc;
}

static int upload_ints(fe_backend *be, const int *v, size_t n, fe_buffer *buf)
{
  FE_CHECK(be->ops->alloc(be->impl, n * sizeof(int), buf));
  return be->ops->write(be->impl, buf, 0, n * sizeof(int), v);
}

/* The cell map in the order of perm, padding cells copying their group's first cell. */
static int upload_cells(const fe_operator *A, op_device *d, const int *perm, size_t npad)
{
  const fe_space *V = A->V;
  int nb = V->elem.nbasis;
  int *cells;
  FE_MALLOC(cells, npad * nb, "cell map");
  for (size_t i = 0; i < npad; i++)
    memcpy(cells + i * nb, V->cell_nodes + (size_t)(perm[i] < 0 ? -perm[i] - 1 : perm[i]) * nb,
           sizeof(int) * nb);
  int rc = upload_ints(d->be, cells, npad * nb, &d->cells);
  free(cells);
  return rc;
}

/* Where each stored cell comes from: the blocks in the order of list, each padded to
 * BLOCK cells. A padding cell stores -(c + 1), c the first cell of its own group: it must
 * touch only nodes its group touches anyway, or a plain add of its zero could race with
 * another group of the same color. Storing colors contiguously lets each color's launch
 * stream through memory instead of hopping between blocks. */
static int cell_permutation(const fe_operator *A, const op_device *d, const int *list,
                            const int *order, int **perm, size_t *npad)
{
  size_t nc = (size_t)A->V->mesh->ncells, bs = (size_t)d->block;
  *npad = (size_t)d->ngroups * bs;
  FE_MALLOC(*perm, *npad, "cell order");
  for (size_t k = 0; k < (size_t)d->ngroups; k++)
    for (size_t j = 0; j < bs; j++) {
      size_t c = (size_t)list[k] * bs + j, first = (size_t)list[k] * bs;
      (*perm)[k * bs + j] = c < nc ? order[c] : -order[first] - 1;
    }
  return 0;
}

/* The patches of strategy "patch" (engine/patch.c): work group g owns stored cells
 * [g*BLOCK, (g+1)*BLOCK) and the sorted list of their nodes (constrained ones as ~node, so
 * the kernel masks the direction itself). With walks the cells of each patch are reordered
 * along its tour (perm is rewritten: every per-cell array uploaded after this follows it). */
static int upload_patches(const fe_operator *A, op_device *d, int *perm, size_t npad)
{
  const fe_space *V = A->V;
  unsigned char *con = calloc((size_t)V->nnodes + 1, 1);
  if (!con) FE_ERROR(FE_ERR_MEM, "out of host memory for the patches");
  for (int i = 0; i < A->ndir; i++) con[A->dir_nodes[i] / V->ncomp] = 1;
  fe_patches P;
  int rc = fe_patches_build(V, con, perm, npad, d->block, d->walk, d->reuse, d->lanes, &P);
  free(con);
  FE_CHECK(rc);
  d->maxl = P.maxl;
  d->maxc = P.maxc;
  d->maxe = P.maxe;
  d->items = P.items;
  d->patch_nodes = P.nodes_total;
  d->walk_events = (double)P.nevents;
  int ng = P.npatch;
  size_t total = (size_t)P.start[ng];
  rc = upload_ints(d->be, P.start, (size_t)ng + 1, &d->pstart);
  if (!rc) rc = upload_ints(d->be, P.nodes, total + 1, &d->pnodes);
  if (!rc) rc = upload_ints(d->be, P.runs, total + 1, &d->pruns);
  size_t lbytes = d->walk > 0 ? sizeof(unsigned) * (P.nevents + 1)
                              : npad * V->elem.nbasis * sizeof(unsigned);
  const void *lsrc = d->walk > 0 ? (const void *)P.events : P.lcells;
  if (!rc) rc = d->be->ops->alloc(d->be->impl, lbytes, &d->lcells);
  if (!rc) rc = d->be->ops->write(d->be->impl, &d->lcells, 0, lbytes, lsrc);
  if (!rc && d->walk > 0) rc = upload_ints(d->be, P.estart, (size_t)ng + 1, &d->estart);
  fe_patches_free(&P);
  FE_CHECK(rc);
  /* shared memory: the patch's state, direction and coordinates, the contributions, the run
   * words, the events */
  size_t need = ((size_t)d->maxl * (3 + 2 * V->ncomp) + (size_t)d->maxc * V->ncomp) *
                    fe_precision_size(d->prec) +
                ((size_t)d->maxl + (size_t)d->maxe) * sizeof(int);
  d->patch_too_big = need > shared_limit(d->be);
  FE_ASSERT(need <= shared_limit(d->be), FE_ERR_ARG,
            "block = %d cells of %s touch up to %d nodes, %zu bytes of shared memory per work "
            "group; %s allows %zu (use a smaller block)", d->block, V->name, d->maxl, need,
            d->be->name, shared_limit(d->be));
  return 0;
}

/* The per-cell constants in stored cell order (one unused word when there are none). */
static int upload_aux(const fe_operator *A, op_device *d, const int *perm, size_t npad)
{
  int na = A->pde->naux;
  double *v;
  FE_MALLOC(v, npad * na + 1, "per-cell coefficients");
  v[0] = 0;
  for (size_t i = 0; i < npad; i++)
    for (int k = 0; k < na; k++)
      v[i * na + k] = A->aux[(size_t)(perm[i] < 0 ? -perm[i] - 1 : perm[i]) * na + k];
  int rc = upload_reals(d->be, d->prec, v, npad * na + 1, &d->aux);
  free(v);
  return rc;
}

/* The physics' named constants as they are now (one unused word when there are none). */
static int upload_params(const fe_operator *A, op_device *d)
{
  const fe_physics *p = A->pde;
  double *k;
  FE_MALLOC(k, p->nconst + 1, "named constants");
  k[p->nconst] = 0;
  for (int i = 0; i < p->nconst; i++) k[i] = p->const_values[i];
  if (d->params.ptr) d->be->ops->release(d->be->impl, &d->params);
  int rc = upload_reals(d->be, d->prec, k, (size_t)p->nconst + 1, &d->params);
  free(k);
  d->params_version = p->const_version;
  return rc;
}

/* The auxiliary fields' dof maps in stored cell order (one unused word when there are none),
 * and the named constants. */
static int upload_fields(const fe_operator *A, op_device *d, const int *perm, size_t npad)
{
  const fe_physics *p = A->pde;
  int w = fe_codegen_field_map_width(p);
  int *maps;
  FE_MALLOC(maps, npad * w + 1, "auxiliary field maps");
  maps[0] = 0;
  for (size_t i = 0; i < npad; i++) {
    size_t c = (size_t)(perm[i] < 0 ? -perm[i] - 1 : perm[i]);
    int off = 0;
    for (int f = 0; f < p->nfields; f++) {
      int nb = p->field_space[f]->elem.nbasis;
      memcpy(maps + i * w + off, p->field_space[f]->cell_nodes + c * nb, sizeof(int) * nb);
      off += nb;
    }
  }
  int rc = upload_ints(d->be, maps, npad * w + 1, &d->fmaps);
  free(maps);
  if (!rc) rc = upload_params(A, d);
  return rc;
}

/* The work-group schedule over cells taken in `order`: identity, or groups sorted by color. */
static int build_schedule(const fe_operator *A, op_device *d, const int *order, int **list)
{
  const fe_space *V = A->V;
  int ng = (V->mesh->ncells + d->block - 1) / d->block;
  d->ngroups = ng;
  FE_MALLOC(*list, ng, "work-group list");
  if (!d->colored) {
    for (int g = 0; g < ng; g++) (*list)[g] = g;
    d->ncolors = 1;
    FE_MALLOC(d->color_start, 2, "colors");
    d->color_start[0] = 0;
    d->color_start[1] = ng;
    return 0;
  }
  int *color, nb = V->elem.nbasis, *oc;
  FE_MALLOC(oc, (size_t)V->mesh->ncells * nb, "ordered cell map");
  for (int c = 0; c < V->mesh->ncells; c++)
    memcpy(oc + (size_t)c * nb, V->cell_nodes + (size_t)order[c] * nb, sizeof(int) * nb);
  int rc = fe_mesh_color_groups(V->mesh, oc, nb, d->block, &color, &d->ncolors);
  free(oc);
  if (rc) {
    free(*list);
    *list = NULL;
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  FE_CALLOC(d->color_start, d->ncolors + 1, "colors");
  for (int g = 0; g < ng; g++) d->color_start[color[g] + 1]++;
  for (int c = 0; c < d->ncolors; c++) d->color_start[c + 1] += d->color_start[c];
  int *pos = malloc(sizeof(int) * (size_t)(d->ncolors + 1));
  if (!pos) {
    free(color);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  memcpy(pos, d->color_start, sizeof(int) * (size_t)d->ncolors);
  for (int g = 0; g < ng; g++) (*list)[pos[color[g]]++] = g;
  free(pos);
  free(color);
  return 0;
}

/* Move the operator's data to a backend. */
static int op_device_setup(fe_operator *A, op_device *d)
{
  const fe_space *V = A->V;
  fe_backend *be = d->be;
  double t0 = fe_clock(), *geo = NULL, *dv = NULL;
  int *list = NULL, *perm = NULL, *order = NULL;
  size_t ngeo = 0, npad = 0;
  /* the mesh's own cell order (box and loaded meshes are local; on the box it needs fewer
   * colors than a Morton order, measured 6.3 vs 7.7 ms for the 1M-tet apply); when its
   * groups need too many colors, cells along a Morton curve through their centroids */
  int rc = 0;
  order = malloc(sizeof(int) * ((size_t)V->mesh->ncells + 1));
  if (!order) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  for (int c = 0; !rc && c < V->mesh->ncells; c++) order[c] = c;
  if (!rc && d->patch) { /* patches: compact ones along a Morton curve (a box's own order makes
                          * strips one cell thick, whose nodes are shared by four patches) */
    free(order);
    order = NULL;
    rc = fe_mesh_morton_order(A->V->mesh, &order);
  }
  if (!rc && build_schedule(A, d, order, &list)) {
    fe_error_clear();
    free(d->color_start);
    d->color_start = NULL;
    free(order);
    order = NULL;
    rc = fe_mesh_morton_order(A->V->mesh, &order);
    if (!rc) rc = build_schedule(A, d, order, &list);
  }
  if (!rc) rc = cell_permutation(A, d, list, order, &perm, &npad);
  free(order);
  for (int g = 0; !rc && g < d->ngroups; g++) list[g] = g; /* cells are stored in schedule order */
  if (!rc) rc = upload_ints(be, list, (size_t)d->ngroups, &d->groups);
  if (!rc && !d->patch) rc = upload_cells(A, d, perm, npad);
  if (!rc && d->patch) rc = upload_patches(A, d, perm, npad);
  if (!rc && d->patch && A->geo_recompute) /* factors made in the kernel: only check the cells */
    rc = build_geometry(A, &A->quad[FE_ACTION_RESIDUAL], perm, npad, NULL, &ngeo);
  for (int a = 0; a < FE_NACTIONS && !rc && !(d->patch && A->geo_recompute); a++) {
    for (int b = 0; b < a; b++) /* the same points as an earlier action: share */
      if (A->geo_affine || A->quad[b].degree == A->quad[a].degree) d->geo[a] = d->geo[b];
    if (d->geo[a].ptr) continue;
    rc = build_geometry(A, &A->quad[a], perm, npad, &geo, &ngeo);
    if (!rc) rc = upload_reals(be, d->prec, geo, ngeo, &d->geo[a]);
    free(geo);
    geo = NULL;
  }
  if (!rc) rc = upload_reals(be, d->prec, V->node_coords, 3 * (size_t)V->nnodes, &d->coords);
  if (!rc) rc = upload_aux(A, d, perm, npad);
  if (!rc) rc = upload_fields(A, d, perm, npad);
  if (!rc) rc = upload_ints(be, A->dir_nodes, (size_t)A->ndir, &d->didx);
  if (!rc && !(dv = malloc(sizeof(double) * (size_t)(A->ndir + 1)))) {
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  }
  if (!rc) {
    for (int i = 0; i < A->ndir; i++) dv[i] = A->value;
    rc = upload_reals(be, d->prec, dv, (size_t)A->ndir, &d->dval);
  }
  free(list);
  free(perm);
  free(geo);
  free(dv);
  FE_CHECK(rc);
  d->setup_seconds = fe_clock() - t0;
  return 0;
}

/* Cells per walk of a patch realization: asked (> 0, first-order straight cells whose nodes
 * fit the slots), else none: one item per cell. Walks read a quarter of the shared node data
 * per tet, but measured slower on the H100 (more registers, a select per slot and event:
 * docs/benchmarks.md), so they are asked for, not automatic. Walks keep nodes across cells
 * only where that changes nothing but rounding. */
static int pick_walk(const fe_action_opts *o, const fe_operator *A, int patch, int *walk,
                     int *reuse)
{
  int asked = o ? o->walk : 0, nb = A->V->elem.nbasis;
  *walk = 0;
  *reuse = 0;
  if (!patch || asked <= 0) return 0;
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

/* The realization for these options, made on first use. */
static int op_device_get(fe_operator *A, const fe_action_opts *o, op_device **out)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(resolve(o, &be, &prec));
  int patch, walk, reuse;
  FE_CHECK(pick_strategy(o, be, A, &patch));
  FE_CHECK(pick_walk(o, A, patch, &walk, &reuse));
  /* a GPU's items sum the runs a warp at a time: in double, interleave as many as a row of
   * its shared memory's banks holds (16), so that they read one row per step. Measured on
   * the H100 (docs/benchmarks.md): the P1 apply 0.890 ms against 0.975 with lanes = 1 in
   * double; in single 8-12% slower with 16 or 32, so single keeps its runs one after the
   * other. */
  int lanes = o && o->lanes > 0 ? o->lanes
              : patch && be->info.is_gpu && prec == FE_DOUBLE ? 16 : 1;
  FE_ASSERT(lanes <= 64 && !(lanes & (lanes - 1)), FE_ERR_ARG,
            "lanes = %d: the runs of a power of two of nodes, at most 64, are interleaved", lanes);
  int asked = o && o->block > 0 ? o->block : 0;
  int block = asked ? asked : default_block(be, A, prec, patch, walk);
  FE_ASSERT(block <= 4096, FE_ERR_ARG, "block = %d cells per work group is too large", block);
  size_t need = patch ? 0 : block * shared_per_cell(A, prec); /* patches: checked when made */
  FE_ASSERT(need <= shared_limit(be) || block == 1, FE_ERR_ARG,
            "block = %d cells of %s need %zu bytes of shared memory per work group; %s allows "
            "%zu (use a smaller block)", block, A->V->name, need, be->name, shared_limit(be));
  for (int i = 0; i < A->ndev; i++)
    if (A->dev[i].be == be && A->dev[i].prec == prec && A->dev[i].patch == patch &&
        A->dev[i].asked == asked &&
        A->dev[i].walk == walk && A->dev[i].lanes == lanes) {
      *out = &A->dev[i];
      return 0;
    }
  if (A->ndev == OP_MAX_DEVICES) { /* forget the oldest realization */
    op_device_free(&A->dev[0]);
    memmove(&A->dev[0], &A->dev[1], sizeof(op_device) * (OP_MAX_DEVICES - 1));
    A->ndev--;
  }
  op_device *d = &A->dev[A->ndev];
  const op_device init = {.be = be, .prec = prec, .block = block, .asked = asked,
                          .patch = patch, .walk = walk, .reuse = reuse, .lanes = lanes,
                          .colored = !patch && scatter_colored(be)};
  *d = init;
  int rc = op_device_setup(A, d);
  /* default patches too large for shared memory: halve them until they fit */
  while (rc && patch && !init.asked && d->patch_too_big && d->block > 1) {
    fe_error_clear();
    op_device_free(d);
    *d = init;
    d->block = block /= 2;
    rc = op_device_setup(A, d);
  }
  if (rc) {
    op_device_free(d);
    return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  }
  A->ndev++;
  *out = d;
  return 0;
}

/* Generate and compile an action's kernel on first use. */
static int op_kernel(fe_operator *A, op_device *d, fe_action a, double *compile_seconds)
{
  *compile_seconds = 0;
  if (d->kernel[a]) return 0;
  fe_kernel_spec s;
  fill_spec(A, d, a, &s);
  char *src;
  FE_CHECK(fe_codegen_action(&s, d->be->name, d->be->ops->preamble(d->be->impl, d->prec), &src));
  int cached = 0;
  int rc = d->be->ops->compile(d->be->impl, src, &d->module[a], compile_seconds, &cached);
  free(src);
  FE_CHECK(rc);
  FE_CHECK(d->be->ops->kernel(d->be->impl, d->module[a],
                              d->patch ? "fe_patch" : a == FE_ACTION_DIAGONAL ? "fe_diagonal"
                                                                              : "fe_integrate",
                              &d->kernel[a]));
  FE_CHECK(d->be->ops->kernel(d->be->impl, d->module[a], "fe_dirichlet", &d->dirichlet[a]));
  return 0;
}

/* Threads per group on a GPU-like device: one per (cell, point) or (cell, basis function). */
static size_t group_size(const op_device *d, const fe_operator *A, fe_action a)
{
  size_t n = d->patch && d->walk > 0 ? (size_t)d->items /* per walk */
            : d->patch ? (size_t)(d->block < PATCH_ITEMS ? d->block : PATCH_ITEMS) /* per cell */
                      : (size_t)d->block * (size_t)imax(A->quad[a].npoints, A->V->elem.nbasis);
  n = (n + 31) / 32 * 32;
  return n > d->be->info.max_group ? d->be->info.max_group : n;
}

/* The arguments every integration kernel ends with: coordinates, per-cell constants, named
 * constants, field maps and values, then u, w and y (10 in all). */
static void physics_args(const op_device *d, const fe_vector *u, const fe_vector *w,
                         fe_vector *y, fe_arg *a)
{
  const fe_buffer *bufs[10] = {&d->coords, &d->aux, &d->params, &d->fmaps,
                               d->fv[0] ? d->fv[0] : &d->params,
                               d->fv[1] ? d->fv[1] : &d->params,
                               d->fv[2] ? d->fv[2] : &d->params,
                               &u->buf, &w->buf, &y->buf};
  for (int i = 0; i < 10; i++) a[i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = bufs[i]};
}

/* The patch kernel: one launch over every patch. */
static int op_integrate_patches(fe_operator *A, op_device *d, fe_action a, const fe_vector *u,
                                const fe_vector *w, fe_vector *y, int *launches)
{
  FE_CHECK_INTERRUPT();
  const fe_buffer *geo = d->geo[a].ptr ? &d->geo[a] : &d->params; /* unused when recomputed */
  fe_arg args[19] = {
      {.kind = FE_ARG_INT, .i = d->ngroups},
      {.kind = FE_ARG_INT, .i = A->V->mesh->ncells},
      {.kind = FE_ARG_INT, .i = (long long)(padded_cells(A, d->block) * (A->geo_affine ? 1 : A->quad[a].npoints))},
      {.kind = FE_ARG_BUFFER, .buf = &d->pstart},
      {.kind = FE_ARG_BUFFER, .buf = &d->pnodes},
      {.kind = FE_ARG_BUFFER, .buf = &d->pruns},
      {.kind = FE_ARG_BUFFER, .buf = &d->lcells}, /* or the walks' events */
      {.kind = FE_ARG_BUFFER, .buf = d->walk > 0 ? &d->estart : &d->pstart}, /* unread: no walks */
      {.kind = FE_ARG_BUFFER, .buf = geo},
  };
  physics_args(d, u, w, y, args + 9);
  double s;
  FE_CHECK(d->be->ops->launch(d->be->impl, d->kernel[a], (size_t)d->ngroups, group_size(d, A, a),
                              19, args, d->prec, &s));
  (*launches)++;
  return 0;
}

/* One launch per color of the integration (or diagonal) kernel. */
static int op_integrate(fe_operator *A, op_device *d, fe_action a, const fe_vector *u,
                        const fe_vector *w, fe_vector *y, int *launches)
{
  if (d->patch) return op_integrate_patches(A, d, a, u, w, y, launches);
  for (int c = 0; c < d->ncolors; c++) {
    FE_CHECK_INTERRUPT();
    int ng = d->color_start[c + 1] - d->color_start[c];
    fe_arg args[16] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = d->color_start[c]},
        {.kind = FE_ARG_INT, .i = (long long)(padded_cells(A, d->block) * (A->geo_affine ? 1 : A->quad[a].npoints))},
        {.kind = FE_ARG_BUFFER, .buf = &d->groups},
        {.kind = FE_ARG_BUFFER, .buf = &d->cells},
        {.kind = FE_ARG_BUFFER, .buf = &d->geo[a]},
    };
    physics_args(d, u, w, y, args + 6);
    int nargs = 16;
    if (a == FE_ACTION_DIAGONAL) { /* no direction argument */
      args[14] = args[15];
      nargs = 15;
    }
    double s;
    FE_CHECK(d->be->ops->launch(d->be->impl, d->kernel[a], (size_t)ng, group_size(d, A, a), nargs,
                                args, d->prec, &s));
    (*launches)++;
  }
  return 0;
}

/* y[i] <- a src[i] + b g_i + c on the constrained rows. */
static int op_dirichlet(fe_operator *A, op_device *d, fe_action act, const fe_vector *src,
                        double a, double b, double c, fe_vector *y, int *launches)
{
  if (A->ndir == 0) return 0;
  int ng = (A->ndir + d->block - 1) / d->block;
  fe_arg args[9] = {
      {.kind = FE_ARG_INT, .i = ng},         {.kind = FE_ARG_INT, .i = A->ndir},
      {.kind = FE_ARG_BUFFER, .buf = &d->didx}, {.kind = FE_ARG_BUFFER, .buf = &d->dval},
      {.kind = FE_ARG_BUFFER, .buf = &src->buf}, {.kind = FE_ARG_REAL, .r = a},
      {.kind = FE_ARG_REAL, .r = b},          {.kind = FE_ARG_REAL, .r = c},
      {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  double s;
  FE_CHECK(d->be->ops->launch(d->be->impl, d->dirichlet[act], (size_t)ng, (size_t)d->block, 9,
                              args, d->prec, &s));
  (*launches)++;
  return 0;
}

/* An input on the action's backend and precision: itself, or a converted copy (*tmp). */
static int op_input(const fe_vector *x, const op_device *d, int n, const fe_vector **use,
                    fe_vector **tmp, double *transfer)
{
  *tmp = NULL;
  *use = x;
  if (!x) return 0;
  FE_ASSERT(x->n == n, FE_ERR_ARG, "the vector has %d entries but the operator's space has %d",
            x->n, n);
  if (x->be == d->be && x->prec == d->prec) return 0;
  double t0 = fe_clock();
  FE_CHECK(fe_vector_convert(x, d->be, d->prec, tmp));
  *transfer += fe_clock() - t0;
  *use = *tmp;
  return 0;
}

/* The physics' current constants and auxiliary fields on the action's device: constants
 * are written again when they changed, fields converted when they live elsewhere. */
static int op_bind_physics(fe_operator *A, op_device *d, fe_vector **tmp, double *transfer)
{
  const fe_physics *p = A->pde;
  if (d->params_version != p->const_version) FE_CHECK(upload_params(A, d));
  for (int i = 0; i < p->nfields; i++) {
    const fe_vector *use;
    FE_ASSERT(p->field_vec[i], FE_ERR_ARG, "the physics' field '%s' is not bound to a vector",
              p->field_names[i]);
    int rc = op_input(p->field_vec[i], d, p->field_space[i]->ndofs, &use, &tmp[i], transfer);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    d->fv[i] = &use->buf;
  }
  return 0;
}

/* The output: reuse *out when it fits, else make one. */
static int op_output(const op_device *d, int n, fe_vector **out)
{
  if (*out) {
    FE_ASSERT((*out)->be == d->be && (*out)->prec == d->prec && (*out)->n == n, FE_ERR_ARG,
              "the output vector does not match the action (%s/%s, %d entries)", d->be->name,
              fe_precision_name(d->prec), n);
    return 0;
  }
  return fe_vector_create(d->be, d->prec, n, out);
}

/* Fill the report of one action and log it. */
static int op_report(fe_operator *A, op_device *d, fe_action a, const fe_action_opts *o,
                     double seconds, double compile_s, double transfer, int launches, fe_report *rep)
{
  fe_kernel_spec s;
  fill_spec(A, d, a, &s);
  memset(rep, 0, sizeof *rep);
  snprintf(rep->action, sizeof rep->action, "%s", fe_action_name(a));
  snprintf(rep->backend, sizeof rep->backend, "%s", d->be->name);
  snprintf(rep->device, sizeof rep->device, "%s", d->be->info.name);
  snprintf(rep->precision, sizeof rep->precision, "%s", fe_precision_name(d->prec));
  snprintf(rep->strategy, sizeof rep->strategy, "%s", d->patch ? "patch" : "transpose");
  const fe_quadrature *Q = &A->quad[a];
  snprintf(rep->space, sizeof rep->space, "%s%s%s on %s", A->V->name, A->V->ncomp > 1 ? "^" : "",
           A->V->ncomp > 1 ? (A->V->ncomp == 2 ? "2" : "3") : "", fe_cell_name(A->V->elem.cell));
  snprintf(rep->quadrature, sizeof rep->quadrature, "%s, %d points, degree %d",
           Q->name ? Q->name : "?", Q->npoints, Q->degree);
  rep->ncells = A->V->mesh->ncells;
  rep->ndofs = A->V->ndofs;
  fe_codegen_model(&s, A->ndir, &rep->flops, &rep->bytes);
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = d->setup_seconds;
  d->setup_seconds = 0; /* reported by the first call only */
  rep->launches = launches;
  FE_CHECK(fe_perf_predict(d->be, d->prec, rep));
  if (!o || !o->nolog) fe_perf_log_add(rep);
  return 0;
}

/* The common path of the three actions. */
/* The device work of one action: mask the direction, zero the output, integrate, fix the
 * constrained rows. */
static int op_run(fe_operator *A, op_device *d, fe_action a, const fe_vector *u,
                  const fe_vector *w, fe_vector *out, int *launches)
{
  int n = A->V->ndofs;
  *launches = 0;
  /* the direction without its constrained part (patch kernels read it as zero themselves) */
  int mask = a == FE_ACTION_APPLY && A->ndir > 0 && !d->patch;
  if (mask) {
    if (!d->scratch) FE_CHECK(fe_vector_create(d->be, d->prec, n, &d->scratch));
    FE_CHECK(fe_vector_copy(d->scratch, w));
    FE_CHECK(op_dirichlet(A, d, a, d->scratch, 0, 0, 0, d->scratch, launches));
  }
  const fe_vector *wm = mask ? d->scratch : w;
  if (!u && !d->zero) FE_CHECK(fe_vector_create(d->be, d->prec, n, &d->zero)); /* zeroed */
  if (!u) u = d->zero;
  FE_CHECK(fe_vector_fill(out, 0.0));
  FE_CHECK(op_integrate(A, d, a, u, wm ? wm : u, out, launches));
  switch (a) {
  case FE_ACTION_RESIDUAL: FE_CHECK(op_dirichlet(A, d, a, u, 1, -1, 0, out, launches)); break;
  case FE_ACTION_APPLY: FE_CHECK(op_dirichlet(A, d, a, w, 1, 0, 0, out, launches)); break;
  default: FE_CHECK(op_dirichlet(A, d, a, out, 0, 0, 1, out, launches)); break;
  }
  return d->be->ops->finish(d->be->impl);
}

static int op_action(fe_operator *A, fe_action a, const fe_vector *u_in, const fe_vector *w_in,
                     const fe_action_opts *o, fe_vector **out, fe_report *rep)
{
  op_device *d = NULL;
  FE_CHECK(op_device_get(A, o, &d));
  double compile_s, transfer = 0, seconds = 0;
  FE_CHECK(op_kernel(A, d, a, &compile_s));
  int n = A->V->ndofs, launches = 0, made = *out == NULL;
  const fe_vector *u, *w;
  fe_vector *tu = NULL, *tw = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  int rc = op_input(u_in, d, n, &u, &tu, &transfer);
  if (!rc) rc = op_input(w_in, d, n, &w, &tw, &transfer);
  if (!rc) rc = op_bind_physics(A, d, tf, &transfer);
  if (!rc) rc = op_output(d, n, out);
  if (!rc && !d->warm[a]) { /* the first run pays for lazy driver work (PoCL compiles at its
                              * first launch): count it as compile time, time the second */
    double t0 = fe_clock();
    rc = op_run(A, d, a, u, w, *out, &launches);
    compile_s += fe_clock() - t0;
    d->warm[a] = 1;
  }
  if (!rc) {
    double t0 = fe_clock();
    rc = op_run(A, d, a, u, w, *out, &launches);
    seconds = fe_clock() - t0;
  }
  fe_vector_free(tu);
  fe_vector_free(tw);
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) {
    fe_vector_free(tf[i]);
    d->fv[i] = NULL;
  }
  if (!rc) rc = op_report(A, d, a, o, seconds, compile_s, transfer, launches, rep);
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
  op_device *d = NULL;
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(op_device_get(A, o, &d));
  return op_kernel(A, d, a, compile_seconds);
}

int fe_operator_source(fe_operator *A, const char *action, const fe_action_opts *o, char **src)
{
  fe_action a;
  FE_CHECK(fe_action_parse(action, &a));
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(resolve(o, &be, &prec));
  int patch;
  FE_CHECK(pick_strategy(o, be, A, &patch));
  fe_kernel_spec s;
  if (patch) { /* the source depends on the patches (MAXL): make them */
    op_device *dp;
    FE_CHECK(op_device_get(A, o, &dp));
    fill_spec(A, dp, a, &s);
    return fe_codegen_action(&s, be->name, be->ops->preamble(be->impl, prec), src);
  }
  op_device d = {.be = be, .prec = prec};
  d.block = o && o->block > 0 ? o->block : default_block(be, A, prec, 0, 0);
  d.colored = scatter_colored(be);
  fill_spec(A, &d, a, &s);
  return fe_codegen_action(&s, be->name, be->ops->preamble(be->impl, prec), src);
}
