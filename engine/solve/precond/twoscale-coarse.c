/* The coarse scale of the two-scale preconditioner, host side: the restriction's shares, the
 * transfers' index arrays and the check that the fine space's corners are the Q1 space's
 * nodes (twoscale.c uploads them and runs the transfers). Restriction is the L2 projection
 * with the lumped (GLL) mass m, V = C m^-1: node N's residual goes to the cells at N by their
 * share m_{ijk;e} / m_N of its mass, then to the corners by the trilinear functions.
 *
 * Every loop is over cells, vertices or nodes, each writing its own entries (OpenMP); the
 * entries' offsets come from counts by ts_scan. The results do not depend on the threads. */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/dist.h"
#include "engine/solve/precond/twoscale.h"

int ts_ranks_sum(const fe_space *V, double *a)
{
  const fe_dist *d = V->dist;
  if (!d || d->size == 1) return 0;
  fe_backend *cpu;
  fe_vector *v = NULL;
  FE_CHECK(fe_backend_get("cpu", &cpu));
  int rc = fe_vector_create(cpu, FE_DOUBLE, V->nnodes, &v);
  if (!rc) rc = fe_vector_set(v, a);
  if (!rc) rc = fe_dist_sum(d, v, NULL, NULL);
  if (!rc) rc = fe_vector_get(v, a);
  fe_vector_free(v);
  FE_CHECK(rc);
  return 0;
}

/* det J of a straight cell at one point: X the cell's ng vertices (x, y, z each), dphi the
 * geometry functions' derivatives there (ng x 3). The sums and the determinant are
 * fe_space_cell_map_at's and fe_space_map_inverse's, term for term in their order. */
static inline double straight_det(const double *X, const double *dphi, int ng)
{
  double j0 = 0, j1 = 0, j2 = 0, j3 = 0, j4 = 0, j5 = 0, j6 = 0, j7 = 0, j8 = 0; /* J, rows */
  for (int b = 0; b < ng; b++) {
    const double *x = X + 3 * b, *d = dphi + 3 * b;
    j0 += x[0] * d[0], j1 += x[0] * d[1], j2 += x[0] * d[2];
    j3 += x[1] * d[0], j4 += x[1] * d[1], j5 += x[1] * d[2];
    j6 += x[2] * d[0], j7 += x[2] * d[1], j8 += x[2] * d[2];
  }
  double c0 = j4 * j8 - j5 * j7, c1 = j5 * j6 - j3 * j8, c2 = j3 * j7 - j4 * j6;
  return j0 * c0 + j1 * c1 + j2 * c2;
}

/* share[c * nb + l] = rho_i rho_j rho_k det J at cell c's lattice node l (lexicographic):
 * straight cells from the geometry's derivatives at the lattice's points (tabulated once) and
 * the cell's vertices, curved ones by fe_space_cell_map. */
static int lumped_masses(const fe_space *V, const double *rho, double *share)
{
  const fe_mesh *m = V->mesh;
  const int nc = m->ncells, p1 = V->elem.order + 1, nb = V->elem.nbasis, ng = V->lin.nbasis;
  const double *t = V->elem.line;
  double *dphi = NULL;
  if (!V->curved && ng <= TS_GEOM_MAX) { /* the derivatives at the lattice's points, once */
    double phi[TS_GEOM_MAX];
    FE_MALLOC(dphi, (size_t)3 * ng * nb, "the geometry's table");
    for (int l = 0; l < nb; l++) {
      double xi[3] = {t[l % p1], t[(l / p1) % p1], t[l / (p1 * p1)]};
      fe_element_eval(&V->lin, xi, phi, dphi + (size_t)3 * ng * l);
    }
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nc; c++) {
    double X[3 * TS_GEOM_MAX];
    for (int b = 0; dphi && b < ng; b++)
      memcpy(X + 3 * b, m->coords + 3 * (size_t)m->cells[(size_t)c * m->nvc + b], 3 * sizeof(double));
    for (int l = 0; l < nb; l++) {
      int i = l % p1, j = (l / p1) % p1, k = l / (p1 * p1);
      double det;
      if (dphi) {
        det = straight_det(X, dphi + (size_t)3 * ng * l, ng);
      } else {
        double xi[3] = {t[i], t[j], t[k]}, x[3], J[9], K[9];
        fe_space_cell_map(V, c, xi, x, J);
        det = fe_space_map_inverse(3, J, K);
      }
      share[(size_t)c * nb + l] = rho[i] * rho[j] * rho[k] * det;
    }
  }
  free(dphi);
  return 0;
}

int ts_coarse_shares(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                     double *share)
{
  int nn = V->nnodes, nb = V->elem.nbasis, nc = V->mesh->ncells;
  double d[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)], rho[TS_MAX_ORDER + 1];
  FE_CHECK(fe_schwarz_gll_stiffness(V->elem.order, d, rho));
  FE_CHECK(lumped_masses(V, rho, share));
  double *mass;
  FE_MALLOC(mass, (size_t)nn, "the lumped mass");
#pragma omp parallel for schedule(static)
  for (int g = 0; g < nn; g++) { /* m_N: the cells' masses at N, in cell order */
    double s = 0;
    for (int t = adj->start[g]; t < adj->start[g + 1]; t++)
      s += share[(size_t)adj->cells[t] * nb + adj->lex[t]];
    mass[g] = s;
  }
  int rc = ts_ranks_sum(V, mass); /* a shared node's cells on every rank */
  if (rc) {
    free(mass);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nc; c++)
    for (int l = 0; l < nb; l++) {
      int g = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
      share[(size_t)c * nb + l] = con[g] ? 0 : share[(size_t)c * nb + l] / mass[g];
    }
  free(mass);
  return 0;
}

void ts_transfers_free(ts_transfers *T)
{
  free(T->nodes);
  free(T->corners);
  free(T->vstart);
  free(T->ventry);
  free(T->nstart);
  free(T->nentry);
  free(T->nshare);
  memset(T, 0, sizeof *T);
}

/* The (cell, corner) entries of every free vertex (vertex v is node v: its entries are the
 * corners among the node's (cell, lattice node) entries) and the (cell, node) entries of
 * every free node with their shares; counts, offsets, then each its own entries. */
static void transfer_entries(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                             const double *share, ts_transfers *T)
{
  const int n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis, nn = V->nnodes,
            nv = V->mesh->nvertices;
#pragma omp parallel for schedule(static)
  for (int v = 0; v < nv; v++) T->vstart[v] = con[v] ? 0 : adj->start[v + 1] - adj->start[v];
  ts_scan(T->vstart, nv);
#pragma omp parallel for schedule(static)
  for (int v = 0; v < nv; v++) {
    if (con[v]) continue;
    for (int t = adj->start[v], k = T->vstart[v]; t < adj->start[v + 1]; t++) {
      int l = adj->lex[t], i = l % p1, j = (l / p1) % p1, kk = l / (p1 * p1);
      T->ventry[k++] = adj->cells[t] * 8 + (i == n) + 2 * (j == n) + 4 * (kk == n);
    }
  }
#pragma omp parallel for schedule(static)
  for (int g = 0; g < nn; g++) T->nstart[g] = con[g] ? 0 : adj->start[g + 1] - adj->start[g];
  ts_scan(T->nstart, nn);
#pragma omp parallel for schedule(static)
  for (int g = 0; g < nn; g++) {
    if (con[g]) continue;
    for (int t = adj->start[g], k = T->nstart[g]; t < adj->start[g + 1]; t++, k++) {
      T->nentry[k] = adj->cells[t] * nb + adj->lex[t];
      T->nshare[k] = share[T->nentry[k]];
    }
  }
}

int ts_coarse_maps(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                   const double *share, ts_transfers *T)
{
  const int nc = V->mesh->ncells, n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis,
            nn = V->nnodes, nv = V->mesh->nvertices;
  const size_t nt = (size_t)nc * nb;
  memset(T, 0, sizeof *T);
  T->nodes = malloc(sizeof(int) * nt);
  T->corners = malloc(sizeof(int) * (size_t)nc * 8);
  T->vstart = malloc(sizeof(int) * ((size_t)nv + 1));
  T->ventry = malloc(sizeof(int) * ((size_t)nc * 8 + 1));
  T->nstart = malloc(sizeof(int) * ((size_t)nn + 1));
  T->nentry = malloc(sizeof(int) * (nt + 1));
  T->nshare = malloc(sizeof(double) * (nt + 1));
  if (!T->nodes || !T->corners || !T->vstart || !T->ventry || !T->nstart || !T->nentry ||
      !T->nshare) {
    ts_transfers_free(T);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the coarse transfers' maps");
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nc; c++) {
    for (int l = 0; l < nb; l++)
      T->nodes[(size_t)c * nb + l] = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
    for (int q = 0; q < 8; q++)
      T->corners[c * 8 + q] = T->nodes[(size_t)c * nb + n * (q & 1) + p1 * n * ((q >> 1) & 1) +
                                       p1 * p1 * n * ((q >> 2) & 1)];
  }
  transfer_entries(V, adj, con, share, T);
  return 0;
}

/* The node of V at corner q of cell c (bit d: the far side along d), and Q1's there. */
static void corner_pair(const fe_space *V, const fe_space *V1, int c, int q, int *g, int *g1)
{
  int n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis;
  int l = n * (q & 1) + p1 * (n * ((q >> 1) & 1) + p1 * n * ((q >> 2) & 1));
  *g = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
  *g1 = V1->cell_nodes[(size_t)c * 8 + V1->elem.lex[(q & 1) + 2 * ((q >> 1) & 1) +
                                                     4 * ((q >> 2) & 1)]];
}

int ts_corners_check(const fe_space *V, const fe_space *V1)
{
  const int nc = V->mesh->ncells, nv = V->mesh->nvertices;
  int bad = nc;
#pragma omp parallel for schedule(static) reduction(min : bad)
  for (int c = 0; c < nc; c++)
    for (int q = 0; q < 8; q++) {
      int g, g1;
      corner_pair(V, V1, c, q, &g, &g1);
      if ((g != g1 || g >= nv) && c < bad) bad = c;
    }
  for (int q = 0; bad < nc && q < 8; q++) { /* the first failing corner, to say so */
    int g, g1;
    corner_pair(V, V1, bad, q, &g, &g1);
    FE_ASSERT(g == g1 && g < nv, FE_ERR_INTERNAL, "twoscale: corner %d of cell %d is node %d of "
              "%s but node %d of Q1", q, bad, g, V->name, g1);
  }
  return 0;
}
