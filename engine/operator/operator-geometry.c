/* The geometric factors at an operator's quadrature points (Jinv and det J), for the
 * strategies that store them: per point, per cell, or one set for each class of congruent
 * cells (fe_geometry_shared); with no output, the cells are only checked positive. Also what
 * each form costs and how a report names it. Part of engine/operator/operator.c's operator
 * (operator-private.h). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/operator/operator.h"
#include "engine/operator/operator-private.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

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

int fe_geometry_shared(const fe_operator *A, int geometry)
{
  if (geometry == FE_GEOMETRY_UNSHARED || geometry == FE_GEOMETRY_VERTICES) return 0;
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
 * vectorizes (gcc 12 at -O2 with OpenMP's simd: measured faster than a cell at a time, for
 * P1 and Q1 alike). */
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

/* The map's Jacobians J[d * dim + k][l] = dx_d / dxi_k of a batch's LANES cells at one point
 * (dp: the first-order map's gradients there) from their corners X[b][d][l]. */
static void batch_jacobians(const geometry_batch *g, double X[][3][LANES], const double *dp,
                            double J[9][LANES])
{
  const int dim = g->dim, nv = g->nv;
  if (g->affine) {
    for (int d = 0; d < dim; d++)
      for (int k = 0; k < dim; k++) {
        const double h = g->scale[k];
#pragma omp simd
        for (int l = 0; l < LANES; l++) J[d * dim + k][l] = (X[k + 1][d][l] - X[0][d][l]) * h;
      }
  } else if (dim == 3) {
    /* a lane at a time, its nine sums in registers (over the lanes, each sum's 8 lanes went
     * to memory and back at every vertex: a Q7 box's check 3-4x slower); the same sums in
     * the same order */
    for (int l = 0; l < LANES; l++) {
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0, a8 = 0;
      for (int b = 0; b < nv; b++) {
        const double x0 = X[b][0][l], x1 = X[b][1][l], x2 = X[b][2][l], *w = dp + b * 3;
        a0 += x0 * w[0], a1 += x0 * w[1], a2 += x0 * w[2];
        a3 += x1 * w[0], a4 += x1 * w[1], a5 += x1 * w[2];
        a6 += x2 * w[0], a7 += x2 * w[1], a8 += x2 * w[2];
      }
      J[0][l] = a0, J[1][l] = a1, J[2][l] = a2, J[3][l] = a3, J[4][l] = a4;
      J[5][l] = a5, J[6][l] = a6, J[7][l] = a7, J[8][l] = a8;
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
}

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
    batch_jacobians(g, X, dp, J);
    if (dim == 3 && !g->out) { /* the check alone: det J, no inverse (no division) */
#pragma omp simd
      for (int l = 0; l < LANES; l++)
        det[l] = J[0][l] * (J[4][l] * J[8][l] - J[5][l] * J[7][l]) +
                 J[1][l] * (J[5][l] * J[6][l] - J[3][l] * J[8][l]) +
                 J[2][l] * (J[3][l] * J[7][l] - J[4][l] * J[6][l]);
    } else if (dim == 3) {
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
  double *dphi = NULL, *cN = NULL, *cdN = NULL;
  const int ng = fe_mesh_map_nodes(m); /* the nodes a cell's map reads */
  if (!curved) {
    FE_MALLOC(dphi, (size_t)ngq * nv * dim + 1, "the map's gradients at the points");
    for (int q = 0; q < ngq; q++) {
      double phi[FE_MAX_VERTICES];
      fe_element_eval(g, Q->points + q * dim, phi, dphi + (size_t)q * nv * dim);
    }
  } else { /* curved: the second-order map's shapes at the points once, not a point at a time */
    cN = malloc(sizeof(double) * ((size_t)ngq * ng + 1));
    cdN = malloc(sizeof(double) * ((size_t)ngq * ng * dim + 1));
    int rc = cN && cdN ? fe_mesh_geo_table(m, Q->points, ngq, cN, cdN)
                       : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                      "out of host memory for the map's shapes (%d points)", ngq);
    if (rc) {
      free(cN), free(cdN);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
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
          fe_mesh_geo_map_at(m, c, cN + (size_t)q * ng, cdN + (size_t)q * ng * dim, x, J);
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
  free(cN);
  free(cdN);
  if (bad >= 0)
    FE_ERROR(FE_ERR_MESH, "cell %lld (%s) is %s: det J = %.3g", bad, fe_cell_name(el->cell),
             bad_det < 0 ? "inverted" : "degenerate", bad_det);
  /* straight simplices have one det J a cell, whatever the rule: every cell is now known
   * positive (the mesh is the space's, shared and not const where it was made) */
  if (A->geo_affine && !curved) ((fe_mesh *)m)->positive = 1;
  return 0;
}
