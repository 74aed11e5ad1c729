/* felab cell quality: shape measures (1: regular) and exact measures of straight and curved
 * cells, and their statistics over a mesh (fe_mesh_quality). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"

/* ----- quality ----- */

/* b - a into e. */
static void sub3(const double *b, const double *a, double *e)
{
  for (int d = 0; d < 3; d++) e[d] = b[d] - a[d];
}
static double dot3(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
/* a x b into c. */
static void cross3(const double *a, const double *b, double *c)
{
  c[0] = a[1] * b[2] - a[2] * b[1], c[1] = a[2] * b[0] - a[0] * b[2], c[2] = a[0] * b[1] - a[1] * b[0];
}

/* Triangle (a, b, c): area (signed by the z normal when planar: 2D) and 4 sqrt 3 A / sum l^2. */
static double tri_quality(const double *a, const double *b, const double *c, double *area)
{
  double e0[3], e1[3], e2[3], n[3];
  sub3(b, a, e0), sub3(c, a, e1), sub3(c, b, e2);
  cross3(e0, e1, n);
  *area = 0.5 * sqrt(dot3(n, n));
  const double l2 = dot3(e0, e0) + dot3(e1, e1) + dot3(e2, e2);
  return l2 > 0 ? 4 * sqrt(3.0) * *area / l2 : 0;
}

/* Jacobian matrix (columns) of the trilinear hex x at reference point (u, v, w) in [0,1]^3,
 * and the bilinear quad when dim == 2 (third column e_z); returns det. */
static double tensor_jacobian(const double *const *x, int dim, double u, double v, double w)
{
  static const int corners[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                    {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
  double J[3][3] = {{0}};
  const double t[3] = {u, v, w};
  for (int q = 0; q < (dim == 2 ? 4 : 8); q++)
    for (int a = 0; a < dim; a++) {
      double g = 1; /* d/dt_a of the product of the 1D hat functions */
      for (int b = 0; b < dim; b++) {
        const double s = corners[q][b] ? t[b] : 1 - t[b];
        g *= a == b ? (corners[q][b] ? 1 : -1) : s;
      }
      for (int d = 0; d < 3; d++) J[a][d] += g * x[q][d];
    }
  if (dim == 2) return J[0][0] * J[1][1] - J[0][1] * J[1][0];
  double c[3];
  cross3(J[1], J[2], c);
  return dot3(J[0], c);
}

/* Shape measure (1: regular) and exact measure of cell e. */
static double cell_quality(const fe_mesh *m, int e, double *volume)
{
  const double *x[8];
  const int *c = m->cells + (size_t)e * m->nvc;
  for (int v = 0; v < m->nvc; v++) x[v] = m->coords + 3 * (size_t)c[v];
  if (m->type == FE_CELL_TRI) return tri_quality(x[0], x[1], x[2], volume);
  if (m->type == FE_CELL_TET) {
    double e0[3], e1[3], e2[3], n[3], l2 = 0, d[3];
    sub3(x[1], x[0], e0), sub3(x[2], x[0], e1), sub3(x[3], x[0], e2);
    cross3(e1, e2, n);
    *volume = dot3(e0, n) / 6;
    for (int i = 0; i < 4; i++)
      for (int j = i + 1; j < 4; j++) sub3(x[j], x[i], d), l2 += dot3(d, d);
    const double lrms = sqrt(l2 / 6);
    return lrms > 0 ? 6 * sqrt(2.0) * *volume / (lrms * lrms * lrms) : 0;
  }
  /* quad, hex: 2-point Gauss in each direction is exact for det J; the shape is the worst
   * corner's scaled Jacobian det J / product of the edge lengths there */
  static const int hex_nb[8][3] = {{1, 3, 4}, {0, 2, 5}, {3, 1, 6}, {2, 0, 7},
                                   {5, 7, 0}, {4, 6, 1}, {7, 5, 2}, {6, 4, 3}};
  const double g0 = 0.5 - 0.5 / sqrt(3.0), g1 = 0.5 + 0.5 / sqrt(3.0), gp[2] = {g0, g1};
  double shape = INFINITY;
  *volume = 0;
  if (m->type == FE_CELL_QUAD || m->type == FE_CELL_HEX) {
    const int dim = m->dim, nq = dim == 2 ? 4 : 8;
    for (int q = 0; q < nq; q++)
      *volume += tensor_jacobian(x, dim, gp[q & 1], gp[(q >> 1) & 1], gp[q >> 2]) / nq;
    for (int q = 0; q < nq; q++) {
      double e[3][3], det, scale = 1;
      for (int k = 0; k < dim; k++) sub3(x[dim == 2 ? (k ? (q + 3) % 4 : (q + 1) % 4) : hex_nb[q][k]], x[q], e[k]);
      if (dim == 2) { /* next and previous corner: positive for counter-clockwise quads */
        det = e[0][0] * e[1][1] - e[0][1] * e[1][0];
      } else {
        double n[3];
        cross3(e[1], e[2], n);
        det = dot3(e[0], n) * ((q == 0 || q == 2 || q == 5 || q == 7) ? 1 : -1);
      }
      for (int k = 0; k < dim; k++) scale *= sqrt(dot3(e[k], e[k]));
      shape = fmin(shape, scale > 0 ? det / scale : 0);
    }
    return shape;
  }
  /* prism: the end triangles' measure times the worst cosine between a vertical edge and the
   * triangle normal; volume by the centroid rule on the triangle times 2-point Gauss in z */
  double area;
  shape = fmin(tri_quality(x[0], x[1], x[2], &area), tri_quality(x[3], x[4], x[5], &area));
  double cosmin = 1;
  for (int q = 0; q < 6; q++) {
    const int l = q < 3 ? 0 : 3;
    double e0[3], e1[3], up[3], n[3];
    sub3(x[l + 1], x[l], e0), sub3(x[l + 2], x[l], e1), sub3(x[q < 3 ? q + 3 : q], x[q < 3 ? q : q - 3], up);
    cross3(e0, e1, n);
    const double s = sqrt(dot3(n, n) * dot3(up, up));
    cosmin = fmin(cosmin, s > 0 ? dot3(n, up) / s : 0);
  }
  for (int g = 0; g < 2; g++) {
    double p[3][3], J[3][3];
    const double z = gp[g];
    for (int i = 0; i < 3; i++)
      for (int d = 0; d < 3; d++) p[i][d] = (1 - z) * x[i][d] + z * x[i + 3][d];
    sub3(p[1], p[0], J[0]), sub3(p[2], p[0], J[1]);
    for (int d = 0; d < 3; d++) J[2][d] = (x[3][d] + x[4][d] + x[5][d] - x[0][d] - x[1][d] - x[2][d]) / 3;
    double n[3];
    cross3(J[0], J[1], n);
    *volume += 0.5 * dot3(n, J[2]) / 2; /* reference triangle area 1/2, Gauss weights 1/2 */
  }
  return shape * cosmin;
}

/* Measure of curved cell e: det J of its second-order map integrated with 5 Gauss points per
 * direction, simplices collapsed onto the cube (Duffy), exact for every det J these maps
 * have. */
static int curved_volume(const fe_mesh *m, int e, double *volume)
{
  static const double gx[5] = {-0.9061798459386640, -0.5384693101056831, 0,
                               0.5384693101056831, 0.9061798459386640};
  static const double gw[5] = {0.2369268850561891, 0.4786286704993665, 0.5688888888888889,
                               0.4786286704993665, 0.2369268850561891};
  const int dim = m->dim, n3 = dim == 3 ? 5 : 1;
  double sum = 0;
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 5; b++)
      for (int c = 0; c < n3; c++) {
        const double t[3] = {gx[a], gx[b], dim == 3 ? gx[c] : 0};
        double w = gw[a] * gw[b] * (dim == 3 ? gw[c] : 1), xi[3], J[9];
        if (m->type == FE_CELL_QUAD || m->type == FE_CELL_HEX) {
          memcpy(xi, t, sizeof xi);
        } else { /* u in [0,1]^d onto the simplex: xi0 = u0, xi1 = u1 (1 - u0), ... */
          const double u0 = (t[0] + 1) / 2, u1 = (t[1] + 1) / 2, u2 = (t[2] + 1) / 2;
          xi[0] = u0, xi[1] = u1 * (1 - u0), xi[2] = t[2];
          w *= (1 - u0) / 4;
          if (m->type == FE_CELL_TET) xi[2] = u2 * (1 - u0) * (1 - u1), w *= (1 - u0) * (1 - u1) / 2;
        }
        FE_CHECK(fe_mesh_geo_map(m, e, xi, NULL, J));
        sum += w * (dim == 2 ? J[0] * J[3] - J[1] * J[2]
                             : J[0] * (J[4] * J[8] - J[5] * J[7]) -
                                   J[1] * (J[3] * J[8] - J[5] * J[6]) +
                                   J[2] * (J[3] * J[7] - J[4] * J[6]));
      }
  *volume = sum;
  return 0;
}

/* Shape and volume statistics over the cells of m (fe_mesh_check first). On curved meshes
 * the shape measure is the straight cell's, the volume the curved cell's. */
int fe_mesh_quality(const fe_mesh *m, fe_mesh_quality_info *q)
{
  FE_ASSERT(m && q, FE_ERR_ARG, "mesh quality: missing mesh or output");
  FE_CHECK(fe_mesh_check(m));
  memset(q, 0, sizeof *q);
  q->worst_cell = -1;
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  double sum = 0;
  for (int e = 0; e < m->ncells; e++) {
    double vol, s = cell_quality(m, e, &vol);
    if (curved) FE_CHECK(curved_volume(m, e, &vol));
    if (e == 0 || s < q->min) q->min = s, q->worst_cell = e;
    if (e == 0 || s > q->max) q->max = s;
    if (e == 0 || vol < q->min_volume) q->min_volume = vol;
    if (e == 0 || vol > q->max_volume) q->max_volume = vol;
    sum += s;
    q->volume += vol;
  }
  q->mean = m->ncells ? sum / m->ncells : 0;
  return 0;
}
