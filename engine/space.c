/* felab spaces: for P1 and Q1 the nodes are the mesh vertices, so the dof map is the cell
 * connectivity itself. Interpolation at nodes and errors by quadrature live here too. */
#include "engine/space.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/quadrature.h"

/* "P1" -> ('P', 1); anything else is an error. */
static int parse_space_name(const char *name, char *family, int *order)
{
  char *end;
  if (!name || (name[0] != 'P' && name[0] != 'Q') || !isdigit((unsigned char)name[1]))
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\" on tets, \"Q1\" on hexes)",
             name ? name : "(null)");
  long o = strtol(name + 1, &end, 10);
  if (*end || o < 1 || o > 9)
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\" on tets, \"Q1\" on hexes)", name);
  *family = name[0];
  *order = (int)o;
  return 0;
}

int fe_space_create(const fe_mesh *m, const char *name, fe_space **out)
{
  char family = 0;
  int order = 0;
  FE_CHECK(parse_space_name(name, &family, &order));
  fe_element el;
  FE_CHECK(fe_element_create(m->type, family, order, &el));
  FE_ASSERT(el.nbasis == m->nvc, FE_ERR_INTERNAL, "space %s: only vertex nodes are supported", name);
  fe_space *V;
  FE_CALLOC(V, 1, "space");
  V->mesh = m;
  V->elem = el;
  snprintf(V->name, sizeof V->name, "%s", name);
  V->ncomp = 1;
  V->nnodes = m->nvertices;
  V->ndofs = V->nnodes * V->ncomp;
  V->cell_nodes = malloc(sizeof(int) * (size_t)m->ncells * m->nvc);
  V->node_coords = malloc(sizeof(double) * 3 * (size_t)m->nvertices);
  if (!V->cell_nodes || !V->node_coords) {
    fe_space_free(V);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the dof map of %s", name);
  }
  memcpy(V->cell_nodes, m->cells, sizeof(int) * (size_t)m->ncells * m->nvc);
  memcpy(V->node_coords, m->coords, sizeof(double) * 3 * (size_t)m->nvertices);
  *out = V;
  return 0;
}

void fe_space_free(fe_space *V)
{
  if (!V) return;
  free(V->cell_nodes);
  free(V->node_coords);
  free(V);
}

/* Merge sorted unique b into sorted unique *a (both freed/replaced). */
static int merge_sorted(int **a, int *na, int *b, int nb)
{
  int *c = malloc(sizeof(int) * (size_t)(*na + nb + 1));
  if (!c) FE_ERROR(FE_ERR_MEM, "out of host memory");
  int i = 0, j = 0, k = 0;
  while (i < *na || j < nb) {
    int v = (j >= nb || (i < *na && (*a)[i] <= b[j])) ? (*a)[i++] : b[j++];
    if (k == 0 || c[k - 1] != v) c[k++] = v;
  }
  free(*a);
  *a = c;
  *na = k;
  return 0;
}

int fe_space_boundary_nodes(const fe_space *V, const char *const *tags, int ntags, int **nodes,
                            int *n)
{
  const fe_mesh *m = V->mesh;
  *nodes = NULL;
  *n = 0;
  if (!tags || ntags == 0) {
    FE_CALLOC(*nodes, 1, "boundary nodes");
    return 0;
  }
  if (ntags == 1 && !strcmp(tags[0], "all")) return fe_mesh_tag_vertices(m, -1, nodes, n);
  int *acc = NULL, nacc = 0;
  for (int t = 0; t < ntags; t++) {
    int id, *v, nv;
    int rc = fe_mesh_tag_id(m, tags[t], m->dim - 1, &id);
    if (!rc) rc = fe_mesh_tag_vertices(m, id, &v, &nv);
    if (!rc) {
      rc = merge_sorted(&acc, &nacc, v, nv);
      free(v);
    }
    if (rc) {
      free(acc);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
  }
  *nodes = acc ? acc : calloc(1, sizeof(int));
  *n = nacc;
  return 0;
}

int fe_space_interpolate(const fe_space *V, fe_point_fn f, void *ctx, double *values)
{
  for (int i = 0; i < V->nnodes; i++) {
    if ((i & 4095) == 0) FE_CHECK_INTERRUPT();
    FE_CHECK(f(ctx, V->node_coords + 3 * (size_t)i, &values[i]));
  }
  return 0;
}

/* Physical point and Jacobian (J[d][i] = dx_d/dxi_i) at xi for cell c. */
static void cell_map(const fe_space *V, int c, const double *phi, const double *dphi, double *x,
                     double *J)
{
  const fe_element *el = &V->elem;
  int dim = el->dim;
  for (int d = 0; d < 3; d++) x[d] = 0;
  for (int k = 0; k < dim * dim; k++) J[k] = 0;
  for (int b = 0; b < el->nbasis; b++) {
    const double *X = V->mesh->coords + 3 * (size_t)V->mesh->cells[(size_t)c * V->mesh->nvc + b];
    for (int d = 0; d < 3; d++) x[d] += phi[b] * X[d];
    for (int d = 0; d < dim; d++)
      for (int i = 0; i < dim; i++) J[d * dim + i] += X[d] * dphi[b * dim + i];
  }
}

/* Determinant and inverse of a 3x3 (or 2x2) matrix. */
static double invert(int dim, const double *J, double *K)
{
  if (dim == 2) {
    double det = J[0] * J[3] - J[1] * J[2];
    K[0] = J[3] / det, K[1] = -J[1] / det, K[2] = -J[2] / det, K[3] = J[0] / det;
    return det;
  }
  double det = J[0] * (J[4] * J[8] - J[5] * J[7]) - J[1] * (J[3] * J[8] - J[5] * J[6]) +
               J[2] * (J[3] * J[7] - J[4] * J[6]);
  K[0] = (J[4] * J[8] - J[5] * J[7]) / det;
  K[1] = (J[2] * J[7] - J[1] * J[8]) / det;
  K[2] = (J[1] * J[5] - J[2] * J[4]) / det;
  K[3] = (J[5] * J[6] - J[3] * J[8]) / det;
  K[4] = (J[0] * J[8] - J[2] * J[6]) / det;
  K[5] = (J[2] * J[3] - J[0] * J[5]) / det;
  K[6] = (J[3] * J[7] - J[4] * J[6]) / det;
  K[7] = (J[1] * J[6] - J[0] * J[7]) / det;
  K[8] = (J[0] * J[4] - J[1] * J[3]) / det;
  return det;
}

double fe_space_map_inverse(int dim, const double *J, double *K) { return invert(dim, J, K); }

int fe_space_error(const fe_space *V, const double *u, fe_point_fn f, void *ctx, const char *norm,
                   double *err)
{
  int h1 = 0;
  if (!strcmp(norm, "H1")) h1 = 1;
  else if (strcmp(norm, "L2"))
    FE_ERROR(FE_ERR_ARG, "unknown norm '%s' (\"L2\" or \"H1\")", norm);
  const fe_element *el = &V->elem;
  fe_quadrature Q;
  FE_CHECK(fe_quadrature_create(el->cell, 2 * el->order + 2, &Q));
  int dim = el->dim, nb = el->nbasis;
  double sum = 0;
  int rc = 0;
  for (int c = 0; c < V->mesh->ncells && !rc; c++) {
    if ((c & 1023) == 0 && (rc = fe_interrupt_check())) break;
    const int *dof = V->cell_nodes + (size_t)c * nb;
    for (int q = 0; q < Q.npoints && !rc; q++) {
      double phi[FE_MAX_BASIS], dphi[FE_MAX_BASIS * 3], x[3], J[9], K[9];
      fe_element_eval(el, Q.points + q * dim, phi, dphi);
      cell_map(V, c, phi, dphi, x, J);
      double det = invert(dim, J, K), wq = Q.weights[q] * fabs(det);
      if (!h1) {
        double uh = 0, ue;
        for (int b = 0; b < nb; b++) uh += u[dof[b]] * phi[b];
        rc = f(ctx, x, &ue);
        sum += wq * (uh - ue) * (uh - ue);
        continue;
      }
      /* H1 seminorm: the exact gradient by central differences of f */
      double h = 1e-6 * cbrt(fabs(det)) + 1e-12;
      for (int d = 0; d < dim && !rc; d++) {
        double gh = 0, xp[3] = {x[0], x[1], x[2]}, xm[3] = {x[0], x[1], x[2]}, fp = 0, fm = 0;
        for (int b = 0; b < nb; b++)
          for (int i = 0; i < dim; i++) gh += u[dof[b]] * dphi[b * dim + i] * K[i * dim + d];
        xp[d] += h;
        xm[d] -= h;
        rc = f(ctx, xp, &fp);
        if (!rc) rc = f(ctx, xm, &fm);
        double ge = (fp - fm) / (2 * h);
        sum += wq * (gh - ge) * (gh - ge);
      }
    }
  }
  fe_quadrature_free(&Q);
  FE_CHECK(rc);
  *err = sqrt(sum);
  return 0;
}
