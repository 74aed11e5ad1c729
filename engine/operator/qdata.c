/* felab folded per-point data (engine/operator/qdata.h): the layout, the choice, and the setup that
 * makes the words on the device. */
#include "engine/operator/qdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/fem/space.h"
#include "engine/operator/strategy.h"
#include "engine/core/strbuf.h"

int fe_qdata_layout_of(const fe_physics *p, int dim, fe_qdata_layout *L, char *why, size_t n)
{
  memset(L, 0, sizeof *L);
  if (p->nonlinear) {
    snprintf(why, n, "the Jacobian of %s reads the state u", p->name);
    return 1;
  }
  if (p->nfields > 0) {
    snprintf(why, n, "%s reads auxiliary fields, which may change between calls", p->name);
    return 1;
  }
  if (!p->df0 && !p->df1) {
    snprintf(why, n, "the Jacobian of %s is zero", p->name);
    return 1;
  }
  const int nv = p->ncomp, ng = p->ncomp * dim;
  L->nv = nv;
  L->ng = ng;
  if (p->has_adjoint) { /* traced: the blocks that are not identically zero */
    L->b00 = p->g[0] != NULL, L->b01 = p->g[1] != NULL;
    L->b10 = p->g[2] != NULL, L->b11 = p->g[3] != NULL;
  } else { /* C bodies: df0 may read w and dw, df1 too */
    L->b00 = L->b01 = p->df0 != NULL;
    L->b10 = L->b11 = p->df1 != NULL;
  }
  L->sym = p->symmetric;
  if (L->sym) L->b01 = L->b10 = L->b01 || L->b10; /* Q10 = Q01^T: one is stored */
  L->words = (L->b00 ? (L->sym ? nv * (nv + 1) / 2 : nv * nv) : 0) + (L->b01 ? nv * ng : 0) +
             (L->b10 && !L->sym ? ng * nv : 0) + (L->b11 ? (L->sym ? ng * (ng + 1) / 2 : ng * ng) : 0);
  return 0;
}

int fe_qdata_folds(const fe_operator *A, int fold, int *folds)
{
  *folds = 0;
  if (fold == FE_FOLD_OFF) return 0;
  fe_qdata_layout L;
  char why[160];
  const int dim = A->V->elem.dim;
  int no = fe_qdata_layout_of(A->pde, dim, &L, why, sizeof why);
  FE_ASSERT(!no || fold != FE_FOLD_ON, FE_ERR_ARG, "fold = true: %s; its per-point work cannot be "
            "made once", why);
  if (no) return 0;
  if (fold == FE_FOLD_ON) {
    *folds = 1;
    return 0;
  }
  /* what a point reads otherwise: its factors (per point unless affine), and where the
   * physics reads x the coordinates, which every kernel interpolates at each point */
  const int stride = fe_geo_stride(dim), uses_x = A->pde->uses_x;
  *folds = L.words <= stride + (uses_x ? 3 : 0) && (uses_x || !A->geo_affine);
  return 0;
}

double fe_qdata_bytes(const fe_kernel_spec *s)
{
  fe_qdata_layout L;
  char why[160];
  if (fe_qdata_layout_of(s->pde, s->V->elem.dim, &L, why, sizeof why)) return 0;
  return (double)s->V->mesh->ncells * s->quad->npoints * L.words * (double)fe_precision_size(s->prec);
}

void fe_qdata_describe(const fe_physics *p, int dim, char *buf, size_t n)
{
  fe_qdata_layout L;
  char why[160];
  if (fe_qdata_layout_of(p, dim, &L, why, sizeof why)) {
    snprintf(buf, n, "not folded: %s", why);
    return;
  }
  snprintf(buf, n, "folded per point: %d word%s (%s%s%s%s%s)", L.words, L.words == 1 ? "" : "s",
           L.b00 ? "g0 " : "", L.b01 ? "g1 " : "", L.b10 && !L.sym ? "g2 " : "", L.b11 ? "g3 " : "",
           L.sym ? "symmetric" : "pulled back");
}

double fe_qdata_apply_flops(const fe_qdata_layout *L)
{
  /* a multiply-add a stored word, and its mirror's where symmetric off the diagonal */
  double f = 0, nv = L->nv, ng = L->ng;
  if (L->b00) f += L->sym ? 2.0 * nv * nv : 2.0 * nv * nv;
  if (L->b01) f += L->sym ? 4.0 * nv * ng : 2.0 * nv * ng;
  if (L->b10 && !L->sym) f += 2.0 * ng * nv;
  if (L->b11) f += 2.0 * ng * ng;
  return f;
}

void fe_qdata_defines(fe_strbuf *b, const fe_physics *p, int dim, int cells_fastest, int column)
{
  fe_qdata_layout L;
  char why[160];
  fe_qdata_layout_of(p, dim, &L, why, sizeof why);
  fe_strbuf_printf(b, "#define QDATA 1 /* the action reads folded per-point data */\n"
                      "#define QD_WORDS %d /* words a point */\n"
                      "#define QD_B00 %d\n#define QD_B01 %d\n#define QD_B10 %d\n#define QD_B11 %d\n"
                      "#define QD_SYM %d\n#define QD_CELLS_FASTEST %d\n"
                      "#define QD_COLUMN %d /* 0: word planes; else a group's words in its column "
                      "walk's order */\n",
                   L.words, L.b00, L.b01, L.b10, L.b11, L.sym, cells_fastest,
                   cells_fastest ? column : 0);
}

size_t fe_qdata_plane(const fe_realization *r)
{
  return fe_padded_cells(r->A, r->block) * (size_t)r->A->quad[FE_ACTION_APPLY].npoints;
}

int fe_qdata_current(const fe_realization *r)
{
  return r->qdata_built && r->qdata_version == r->A->pde->const_version;
}

void fe_qdata_release(fe_realization *r)
{
  if (r->qdata.ptr) r->be->ops->release(r->be->impl, &r->qdata);
  if (r->qmodule) r->be->ops->module_free(r->be->impl, r->qmodule);
  r->qmodule = NULL;
  r->qkernel = NULL;
  r->qdata_built = 0;
}

/* What the setup kernel reads at each point of a chunk: x[3], then Jinv (row-major) and the
 * weighted measure W |J| (0 on padding cells). */
#define QD_XG(dim) (3 + (dim) * (dim) + 1)

typedef struct chunk_job {
  const fe_operator *A;
  const int *perm;
  size_t i0, n;        /* stored cells [i0, i0 + n) */
  const double *phi;   /* straight cells: the map's basis at the points, nq x nv */
  const double *dphi;  /* and its gradients, nq x nv x dim */
  double *xg;          /* n x nq x QD_XG */
  double x0[3];        /* the coordinates' origin (fe_coords_origin), less which x is staged */
  int nodes;           /* the nodes of a cell's map (qdata_nodes) */
} chunk_job;

/* x and the factors at every point of a chunk's cells, from the vertices (straight cells:
 * the first-order map tabulated at the points) or the second-order nodes (curved). */
static void chunk_fill(const chunk_job *j)
{
  const fe_space *V = j->A->V;
  const fe_mesh *m = V->mesh;
  const fe_quadrature *Q = &j->A->quad[FE_ACTION_APPLY];
  const int dim = V->elem.dim, nq = Q->npoints, nv = V->lin.nbasis, xgw = QD_XG(dim);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < j->n; i++) {
    const int c = fe_stored_cell(j->perm, j->i0 + i), pad = j->perm[j->i0 + i] < 0;
    for (int q = 0; q < nq; q++) {
      double x[3] = {0, 0, 0}, J[9] = {0}, K[10];
      if (V->curved) {
        fe_space_cell_map(V, c, Q->points + q * dim, x, J);
      } else {
        const double *ph = j->phi + (size_t)q * nv, *dp = j->dphi + (size_t)q * nv * dim;
        for (int b = 0; b < nv; b++) {
          const double *X = m->coords + 3 * (size_t)m->cells[(size_t)c * m->nvc + b];
          for (int d = 0; d < 3; d++) x[d] += ph[b] * X[d];
          for (int d = 0; d < dim; d++)
            for (int k = 0; k < dim; k++) J[d * dim + k] += X[d] * dp[b * dim + k];
        }
      }
      const double det = fe_space_map_inverse(dim, J, K);
      double *o = j->xg + (i * nq + q) * xgw;
      for (int d = 0; d < 3; d++) o[d] = x[d] - j->x0[d];
      for (int k = 0; k < dim * dim; k++) o[3 + k] = K[k];
      o[3 + dim * dim] = pad ? 0 : Q->weights[q] * fabs(det);
    }
  }
}

/* The chunk's map nodes: the first-order map's nv vertices (straight cells) or the
 * second-order nodes (curved), x, y, z each, and 1 (0: a padding cell), in double, for the
 * setup kernel to make x and the factors from (QD_CORNERS): nv * 3 + 1 words a cell where the
 * host's own take nq * QD_XG. */
static void corners_fill(const chunk_job *j)
{
  const fe_mesh *m = j->A->V->mesh;
  const int curved = j->A->V->curved, nv = j->nodes, cw = nv * 3 + 1;
  const int stride = curved ? m->ngn : m->nvc;
  const int *cells = curved ? m->geo_cells : m->cells;
  const double *coords = curved ? m->geo_coords : m->coords;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < j->n; i++) {
    const int c = fe_stored_cell(j->perm, j->i0 + i);
    double *o = j->xg + i * cw;
    for (int b = 0; b < nv; b++) {
      const double *X = coords + 3 * (size_t)cells[(size_t)c * stride + b];
      o[3 * b] = X[0], o[3 * b + 1] = X[1], o[3 * b + 2] = X[2];
    }
    o[3 * nv] = j->perm[j->i0 + i] < 0 ? 0 : 1;
  }
}

/* Whether the setup kernel makes x and the factors from the cells' map nodes (corners, or a
 * curved cell's second-order nodes): cells of 2 or 3 dimensions, where the device computes in
 * double (a single module too: its factors are the double ones rounded once, as the host's; a
 * device without doubles takes the host's). */
static int qdata_corners(const fe_realization *r)
{
  return r->A->V->elem.dim >= 2 && (r->prec == FE_DOUBLE || r->be->info.fp64);
}

/* The nodes of a cell's map: the first-order map's vertices, or the second-order nodes. */
static int qdata_nodes(const fe_realization *r)
{
  return r->A->V->curved ? r->A->V->mesh->ngn : r->A->V->lin.nbasis;
}

/* The bytes of a staged word: the corners in double, else the kernel's precision. */
static size_t qdata_word(const fe_realization *r)
{
  return qdata_corners(r) ? sizeof(double) : fe_precision_size(r->prec);
}

enum { QD_ITEMS = 128 }; /* points a group of the setup kernel */

/* The setup kernel, compiled once a realization (the apply's defines, template qdata). */
static int setup_kernel(fe_realization *r)
{
  if (r->qkernel) return 0;
  fe_kernel_spec s;
  fe_realization_spec(r, FE_ACTION_APPLY, &s);
  s.template_name = "qdata";
  s.dense = 0;
  s.folded = 1;
  s.qd_cells_fastest = r->qd_cells_fastest;
  s.qd_column = r->qd_column;
  char items[160];
  snprintf(items, sizeof items, "#define QD_ITEMS %d /* points a group */\n#define QD_CORNERS %d\n"
           "#define QD_NV %d /* the map's nodes */\n", QD_ITEMS, qdata_corners(r), qdata_nodes(r));
  s.defines = items;
  char *src;
  FE_CHECK(fe_codegen_action(&s, r->be->name, r->be->ops->preamble(r->be->impl, r->prec), &src));
  double secs;
  int cached, rc = fe_compile(r->be, src, &r->qmodule, &secs, &cached);
  free(src);
  FE_CHECK(rc);
  return r->be->ops->kernel(r->be->impl, r->qmodule, "fe_qdata", &r->qkernel);
}

#define QD_CHUNK_WORDS ((size_t)1 << 24) /* host words a chunk (128 MB of doubles) */

/* The map's table the setup kernel reads with QD_CORNERS, on r's backend: at each point nv
 * values, nv * dim derivatives, the weight. */
static int lin_upload(fe_realization *r, const double *phi, const double *dphi, fe_buffer *lin)
{
  const fe_quadrature *Q = &r->A->quad[FE_ACTION_APPLY];
  const int nq = Q->npoints, nv = qdata_nodes(r), dim = r->A->V->elem.dim;
  const size_t lw = (size_t)nv * (1 + dim) + 1;
  double *t = fe_alloc(sizeof(double) * lw * nq);
  FE_ASSERT(t, FE_ERR_MEM, "out of host memory for the map's table (%d points)", nq);
  for (int q = 0; q < nq; q++) {
    double *o = t + (size_t)q * lw;
    memcpy(o, phi + (size_t)q * nv, sizeof(double) * nv);
    memcpy(o + nv, dphi + (size_t)q * nv * dim, sizeof(double) * nv * dim);
    o[lw - 1] = Q->weights[q];
  }
  int rc = r->be->ops->alloc(r->be->impl, sizeof(double) * lw * nq, lin);
  if (!rc) rc = r->be->ops->write(r->be->impl, lin, 0, sizeof(double) * lw * nq, t);
  free(t);
  return rc;
}

/* The setup kernel over the stored cells, per of them a chunk: each chunk's staging (cw words
 * a cell: the corners, or x and the factors made here) filled on the host, written to dev,
 * and read there (lin: the map's table with the corners). */
static int qdata_chunks(fe_realization *r, chunk_job job, size_t per, size_t cw, fe_buffer *dev,
                        const fe_buffer *lin, float *stage)
{
  const int nq = r->A->quad[FE_ACTION_APPLY].npoints, corners = qdata_corners(r);
  const size_t npad = fe_padded_cells(r->A, r->block), w = qdata_word(r);
  int rc = 0;
  for (size_t i0 = 0; !rc && i0 < npad; i0 += per) {
    job.i0 = i0, job.n = npad - i0 < per ? npad - i0 : per;
    if (corners) corners_fill(&job);
    else chunk_fill(&job);
    size_t nw = job.n * cw;
    const void *host = job.xg;
    if (w != sizeof(double)) { /* the host's factors, rounded to the kernel's precision */
      for (size_t k = 0; k < nw; k++) stage[k] = (float)job.xg[k];
      host = stage;
    }
    rc = r->be->ops->write(r->be->impl, dev, 0, nw * w, host);
    long long npts = (long long)(job.n * nq), ng = (npts + QD_ITEMS - 1) / QD_ITEMS;
    fe_arg args[9] = {
        {.kind = FE_ARG_INT, .i = ng},
        {.kind = FE_ARG_INT, .i = (long long)i0},
        {.kind = FE_ARG_INT, .i = npts},
        {.kind = FE_ARG_INT, .i = (long long)fe_qdata_plane(r)},
        {.kind = FE_ARG_BUFFER, .buf = dev},
        {.kind = FE_ARG_BUFFER, .buf = corners ? lin : dev},
        {.kind = FE_ARG_BUFFER, .buf = &r->aux},
        {.kind = FE_ARG_BUFFER, .buf = &r->params},
        {.kind = FE_ARG_BUFFER, .buf = &r->qdata},
    };
    if (!rc) rc = r->be->ops->launch(r->be->impl, r->qkernel, (size_t)ng,
                                     QD_ITEMS > r->be->info.max_group ? r->be->info.max_group : QD_ITEMS,
                                     9, args, r->prec, NULL);
    if (!rc) rc = r->be->ops->finish(r->be->impl); /* the staging is written again next */
  }
  return rc;
}

int fe_qdata_build(fe_realization *r)
{
  const fe_operator *A = r->A;
  const fe_space *V = A->V;
  const fe_quadrature *Q = &A->quad[FE_ACTION_APPLY];
  const int dim = V->elem.dim, nq = Q->npoints, nv = qdata_nodes(r), xgw = QD_XG(dim);
  const size_t npad = fe_padded_cells(A, r->block), w = fe_precision_size(r->prec);
  fe_qdata_layout L;
  char why[160];
  FE_ASSERT(!fe_qdata_layout_of(A->pde, dim, &L, why, sizeof why), FE_ERR_INTERNAL,
            "folding per-point data: %s", why);
  FE_ASSERT(r->perm, FE_ERR_INTERNAL, "folding per-point data before the cells' order exists");
  r->building = "the folded per-point data";
  FE_CHECK(setup_kernel(r));
  const size_t qbytes = fe_qdata_plane(r) * (size_t)L.words * w + w;
  /* a cell's staging: its map's nodes (where the device computes in double: the kernel makes
   * x and the factors), or x and the factors at its points made here */
  const size_t cw = qdata_corners(r) ? (size_t)nv * 3 + 1 : (size_t)nq * xgw;
  size_t per = QD_CHUNK_WORDS / cw;
  if (per < 1) per = 1;
  if (per > npad) per = npad;
  /* the stored words, then with them the staging of a chunk's cells: on the host (in double,
   * and in the kernel's precision) and on the device (the same host memory on the cpu: one
   * check of the three) */
  const size_t sw = qdata_word(r); /* a staged word */
  const size_t qb = r->qdata.ptr ? 0 : qbytes, hs = per * cw * (sizeof(double) +
                    (sw == sizeof(double) ? 0 : sizeof(float))), ds = per * cw * sw;
  const int host_memory = r->be->ops->host != NULL;
  FE_CHECK(fe_memory_check_on(r->be, qb, "operator %s on %s: stored per-point data (%d values at "
                              "%.3g points, %s)", A->pde->name, V->name, L.words,
                              (double)fe_qdata_plane(r), fe_precision_name(r->prec)));
  FE_CHECK(fe_memory_check_on(r->be, qb + ds + (host_memory ? hs : 0), "operator %s on %s: stored "
                              "per-point data (%d values at %.3g points, %s) and its setup's "
                              "staging (%zu cells of %d points)", A->pde->name, V->name, L.words,
                              (double)fe_qdata_plane(r), fe_precision_name(r->prec), per, nq));
  if (!host_memory)
    FE_CHECK(fe_memory_check(hs, "operator %s on %s: the per-point data's setup, staged (%zu "
                             "cells of %d points)", A->pde->name, V->name, per, nq));
  if (!r->qdata.ptr) FE_CHECK(r->be->ops->alloc(r->be->impl, qbytes, &r->qdata));
  double *phi = fe_alloc(sizeof(double) * (size_t)nq * nv + 1);
  double *dphi = fe_alloc(sizeof(double) * (size_t)nq * nv * dim + 1);
  double *xg = fe_alloc(sizeof(double) * per * cw);
  float *stage = sw == sizeof(double) ? NULL : fe_alloc(sizeof(float) * per * cw);
  fe_buffer dev = {0}, lin = {0};
  int rc = 0;
  if (!phi || !dphi || !xg || (sw != sizeof(double) && !stage))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                      "out of host memory for the folded data's staging (%zu cells)", per);
  if (!rc && !V->curved)
    for (int q = 0; q < nq; q++)
      fe_element_eval(&V->lin, Q->points + q * dim, phi + (size_t)q * nv, dphi + (size_t)q * nv * dim);
  if (!rc && V->curved) rc = fe_mesh_geo_table(V->mesh, Q->points, nq, phi, dphi);
  if (!rc) rc = r->be->ops->alloc(r->be->impl, per * cw * sw, &dev);
  if (!rc && qdata_corners(r)) rc = lin_upload(r, phi, dphi, &lin);
  chunk_job job = {A, r->perm, 0, 0, phi, dphi, xg, {0, 0, 0}, nv};
  fe_coords_origin(V, r->prec, job.x0);
  if (!rc) rc = qdata_chunks(r, job, per, cw, &dev, &lin, stage);
  if (dev.ptr) r->be->ops->release(r->be->impl, &dev);
  if (lin.ptr) r->be->ops->release(r->be->impl, &lin);
  free(phi);
  free(dphi);
  free(xg);
  free(stage);
  FE_CHECK(rc);
  r->qdata_built = 1;
  r->qdata_version = A->pde->const_version;
  r->building = NULL;
  return 0;
}
