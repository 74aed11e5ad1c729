/* felab mesh geometry: the reference nodes and shape functions of the straight and curved
 * (second-order) maps, the map of a cell, affine meshes, classes of congruent cells, values at
 * the geometry nodes, and the check of a curved mesh's maps. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/mesh-private.h"

/* ----- geometry of the cells: the straight and the curved (second-order) map ----- */

/* Reference coordinates of the geometry nodes in Gmsh's order, for the complete second-order
 * types (checked against the SDK's localNodeCoord in test_gmsh.c); the first fe_cell_nvertices
 * rows are the vertices, so they serve the straight map too. tri, tet: vertices 0 and e_i;
 * quad, hex: [-1,1]^d; prism: the triangle times [-1,1], v0..v2 at z = -1. */
static const double tri6_nodes[6][3] = {{0, 0, 0},   {1, 0, 0},     {0, 1, 0},
                                        {0.5, 0, 0}, {0.5, 0.5, 0}, {0, 0.5, 0}};
static const double quad9_nodes[9][3] = {{-1, -1, 0}, {1, -1, 0}, {1, 1, 0}, {-1, 1, 0}, {0, -1, 0},
                                         {1, 0, 0},   {0, 1, 0},  {-1, 0, 0}, {0, 0, 0}};
static const double tet10_nodes[10][3] = {{0, 0, 0},   {1, 0, 0},     {0, 1, 0},   {0, 0, 1},
                                          {0.5, 0, 0}, {0.5, 0.5, 0}, {0, 0.5, 0}, {0, 0, 0.5},
                                          {0, 0.5, 0.5}, {0.5, 0, 0.5}};
static const double hex27_nodes[27][3] = {
    {-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1}, {-1, -1, 1}, {1, -1, 1}, {1, 1, 1},
    {-1, 1, 1},   {0, -1, -1}, {-1, 0, -1}, {-1, -1, 0}, {1, 0, -1}, {1, -1, 0}, {0, 1, -1},
    {1, 1, 0},    {-1, 1, 0},  {0, -1, 1},  {-1, 0, 1},  {1, 0, 1},  {0, 1, 1},  {0, 0, -1},
    {0, -1, 0},   {-1, 0, 0},  {1, 0, 0},   {0, 1, 0},   {0, 0, 1},  {0, 0, 0}};
static const double prism18_nodes[18][3] = {
    {0, 0, -1},   {1, 0, -1},   {0, 1, -1},     {0, 0, 1},   {1, 0, 1},   {0, 1, 1},
    {0.5, 0, -1}, {0, 0.5, -1}, {0, 0, 0},      {0.5, 0.5, -1}, {1, 0, 0}, {0, 1, 0},
    {0.5, 0, 1},  {0, 0.5, 1},  {0.5, 0.5, 1},  {0.5, 0, 0}, {0, 0.5, 0}, {0.5, 0.5, 0}};
static const int geo_nnodes2[] = {6, 9, 10, 27, 18}; /* by fe_cell_type */

/* Simplex nodes as pairs of barycentric coordinates: (i, i) the vertex i, with the quadratic
 * L_i (2 L_i - 1); (i, j) the midpoint of edge ij, with 4 L_i L_j. L_0 = 1 - sum xi. */
static const int tri6_pairs[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {1, 2}, {2, 0}};
static const int tet10_pairs[10][2] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {0, 1},
                                       {1, 2}, {2, 0}, {0, 3}, {2, 3}, {1, 3}};
/* Prism nodes: the triangle node (an index into tri6_pairs), the level z in {-1, 0, 1}. */
static const int prism18_tri[18] = {0, 1, 2, 0, 1, 2, 3, 5, 0, 4, 1, 2, 3, 5, 4, 3, 5, 4};

const double *fe_mesh_geo_nodes(fe_cell_type t, int order, int *n)
{
  static const double *const tables[] = {&tri6_nodes[0][0], &quad9_nodes[0][0],
                                         &tet10_nodes[0][0], &hex27_nodes[0][0],
                                         &prism18_nodes[0][0]};
  if ((unsigned)t >= NCELL_TYPES || (order != 1 && order != 2)) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = order == 2 ? geo_nnodes2[t] : fe_cell_nvertices(t);
  return tables[t];
}

/* The 1D quadratic Lagrange function on the nodes -1, 0, 1 of node `level` at s, and its
 * derivative; order 1: the hat (1 + level s) / 2 on -1, 1. */
static void lagrange_1d(int order, int level, double s, double *v, double *dv)
{
  if (order == 1) {
    *v = 0.5 * (1 + level * s), *dv = 0.5 * level;
  } else if (level == 0) {
    *v = 1 - s * s, *dv = -2 * s;
  } else {
    *v = 0.5 * s * (s + level), *dv = s + 0.5 * level;
  }
}

/* Value and gradient of the simplex function of pair (i, j) from barycentrics L, dL. */
static void simplex_fn(int order, int i, int j, const double *L, const double (*dL)[3], int dim,
                       double *v, double *dv)
{
  if (order == 1) {
    *v = L[i];
    for (int d = 0; d < dim; d++) dv[d] = dL[i][d];
  } else if (i == j) {
    *v = L[i] * (2 * L[i] - 1);
    for (int d = 0; d < dim; d++) dv[d] = (4 * L[i] - 1) * dL[i][d];
  } else {
    *v = 4 * L[i] * L[j];
    for (int d = 0; d < dim; d++) dv[d] = 4 * (L[j] * dL[i][d] + L[i] * dL[j][d]);
  }
}

int fe_mesh_geo_shape(fe_cell_type t, int order, const double *xi, double *N, double *dN)
{
  int n;
  const double *ref = fe_mesh_geo_nodes(t, order, &n);
  if (!ref || !xi) return 0;
  const int dim = fe_cell_dim(t);
  double L[4], dL[4][3] = {{0}};
  if (t == FE_CELL_TRI || t == FE_CELL_TET || t == FE_CELL_PRISM) {
    const int nb = t == FE_CELL_TET ? 3 : 2; /* barycentric axes (the prism's triangle) */
    L[0] = 1;
    for (int d = 0; d < nb; d++) {
      L[0] -= xi[d], L[d + 1] = xi[d];
      dL[0][d] = -1, dL[d + 1][d] = 1;
    }
  }
  double v, dv[3], g[3][2];
  for (int k = 0; k < n; k++) {
    double *dk = dN ? dN + (size_t)k * dim : dv;
    switch (t) {
    case FE_CELL_TRI:
      simplex_fn(order, tri6_pairs[k][0], tri6_pairs[k][1], L, dL, 2, &v, dk);
      break;
    case FE_CELL_TET:
      simplex_fn(order, tet10_pairs[k][0], tet10_pairs[k][1], L, dL, 3, &v, dk);
      break;
    case FE_CELL_PRISM: {
      const int *p = tri6_pairs[prism18_tri[k]];
      double tv, tdv[2], zv, zdv;
      simplex_fn(order, p[0], p[1], L, dL, 2, &tv, tdv);
      lagrange_1d(order, (int)ref[3 * k + 2], xi[2], &zv, &zdv);
      v = tv * zv;
      dk[0] = tdv[0] * zv, dk[1] = tdv[1] * zv, dk[2] = tv * zdv;
      break;
    }
    default: /* quad, hex: products of 1D functions */
      for (int d = 0; d < dim; d++) lagrange_1d(order, (int)ref[3 * k + d], xi[d], &g[d][0], &g[d][1]);
      v = 1;
      for (int d = 0; d < dim; d++) v *= g[d][0];
      for (int d = 0; d < dim; d++) {
        dk[d] = g[d][1];
        for (int e = 0; e < dim; e++)
          if (e != d) dk[d] *= g[e][0];
      }
    }
    if (N) N[k] = v;
  }
  return n;
}

int fe_mesh_map_nodes(const fe_mesh *m) { return mesh_curved(m) ? m->ngn : m->nvc; }

int fe_mesh_geo_table(const fe_mesh *m, const double *xi, int npts, double *N, double *dN)
{
  const int curved = mesh_curved(m), dim = m->dim, n = fe_mesh_map_nodes(m);
  for (int q = 0; q < npts; q++)
    FE_ASSERT(fe_mesh_geo_shape(m->type, curved ? 2 : 1, xi + (size_t)q * dim, N + (size_t)q * n,
                                dN + (size_t)q * n * dim) == n,
              FE_ERR_MESH, "mesh geometry map: %d nodes per %s cell do not match its type", n,
              fe_cell_name(m->type));
  return 0;
}

void fe_mesh_geo_map_at(const fe_mesh *m, int cell, const double *N, const double *dN,
                        double x[3], double *J)
{
  const int curved = mesh_curved(m), dim = m->dim, n = fe_mesh_map_nodes(m);
  const int *c = curved ? m->geo_cells + (size_t)cell * n : m->cells + (size_t)cell * n;
  const double *X = curved ? m->geo_coords : m->coords;
  double y[3] = {0, 0, 0}, G[9] = {0};
  for (int k = 0; k < n; k++) {
    const double *p = X + 3 * (size_t)c[k], *g = dN + k * dim;
    for (int d = 0; d < 3; d++) y[d] += N[k] * p[d];
    for (int d = 0; d < dim; d++)
      for (int i = 0; i < dim; i++) G[d * dim + i] += p[d] * g[i];
  }
  if (x) memcpy(x, y, sizeof y);
  if (J) memcpy(J, G, (size_t)dim * dim * sizeof(double));
}

int fe_mesh_geo_map(const fe_mesh *m, int cell, const double *xi, double x[3], double *J)
{
  FE_ASSERT(m && xi, FE_ERR_ARG, "mesh geometry map: missing mesh or reference point");
  FE_ASSERT(cell >= 0 && cell < m->ncells, FE_ERR_ARG,
            "mesh geometry map: cell %d is outside 0..%d", cell, m->ncells - 1);
  double N[27], dN[27 * 3];
  FE_CHECK(fe_mesh_geo_table(m, xi, 1, N, dN));
  fe_mesh_geo_map_at(m, cell, N, dN, x, J);
  return 0;
}

/* Whether cell c's vertices lie where the map's linear part at the reference centroid `mid`
 * puts them: X[b] = x(mid) + J (xi_b - mid), to 1e-10 of the cell's size (and a few roundings
 * of its coordinates); ref: the vertices' reference coordinates. */
static int cell_affine(const fe_mesh *m, int c, const double *ref, const double *mid)
{
  const int nv = m->nvc, dim = m->dim;
  const int *v = m->cells + (size_t)c * nv;
  double xc[3], J[9];
  fe_mesh_geo_map(m, c, mid, xc, J); /* J[d * dim + i] = dx_d/dxi_i */
  double size = 0, scale = 0, err = 0;
  for (int b = 0; b < nv; b++) {
    const double *p = m->coords + 3 * (size_t)v[b];
    for (int d = 0; d < 3; d++) {
      double y = xc[d];
      if (d < dim) /* a 2D mesh's z is 0 */
        for (int i = 0; i < dim; i++) y += J[d * dim + i] * (ref[3 * b + i] - mid[i]);
      size = fmax(size, fabs(p[d] - xc[d]));
      scale = fmax(scale, fabs(p[d]));
      err = fmax(err, fabs(p[d] - y));
    }
  }
  return err <= 1e-10 * size + 16 * DBL_EPSILON * scale;
}

int fe_mesh_affine(const fe_mesh *m)
{
  if (!m || mesh_curved(m) || m->ncells == 0) return 0;
  if (m->affine) return m->affine > 0;
  int yes = 1;
  if (m->type != FE_CELL_TRI && m->type != FE_CELL_TET) {
    int nv;
    const double *ref = fe_mesh_geo_nodes(m->type, 1, &nv);
    double mid[3] = {0, 0, 0};
    for (int b = 0; b < nv; b++)
      for (int i = 0; i < 3; i++) mid[i] += ref[3 * b + i] / nv;
#pragma omp parallel for schedule(static) reduction(&& : yes)
    for (int c = 0; c < m->ncells; c++)
      if (yes && !cell_affine(m, c, ref, mid)) yes = 0;
  }
  ((fe_mesh *)m)->affine = yes ? 1 : -1; /* the answer kept: see fe_mesh.affine */
  return yes;
}

/* ---- classes of congruent cells ---- */

enum { CLASS_SLOTS = 4 * FE_MESH_MAX_CLASSES }; /* a power of two */

/* Classes found by one thread (or the merged ones): each class's key (its edge vectors
 * rounded to multiples of the tolerance) and first cell, and an open-addressing index. */
typedef struct class_table {
  int n;
  long long key[FE_MESH_MAX_CLASSES][9];
  int first[FE_MESH_MAX_CLASSES];
  int slot[CLASS_SLOTS]; /* class + 1, 0: empty */
} class_table;

typedef struct class_shape {
  int nvc, dim, axis[3]; /* the vertex one reference edge from vertex 0 along xi_k */
  double inv;            /* 1 / the tolerance */
} class_shape;

/* The edge vectors in units of the tolerance, rounded to the nearest integer without a branch
 * (adding and taking away 1.5 x 2^52 leaves an integer; |e| <= 2^44 here): the signs vary from
 * cell to cell, and a branch on them mispredicted half the time (4x slower). */
static inline void class_key(const fe_mesh *m, const class_shape *s, int c, long long *k)
{
  const volatile double magic = 6755399441055744.0; /* volatile: kept through the optimizer */
  const double round = magic;
  const int *v = m->cells + (size_t)c * s->nvc;
  const double *x0 = m->coords + 3 * (size_t)v[0];
  for (int i = 3 * s->dim; i < 9; i++) k[i] = 0;
  for (int a = 0; a < s->dim; a++) {
    const double *x = m->coords + 3 * (size_t)v[s->axis[a]];
    for (int d = 0; d < 3; d++) k[3 * a + d] = (long long)(((x[d] - x0[d]) * s->inv + round) - round);
  }
}

static inline int same_key(const long long *a, const long long *b)
{
  int same = 1;
  for (int i = 0; i < 9; i++) same &= a[i] == b[i];
  return same;
}

/* The class of key k in t, added with first cell c when new; -1 when t is full. */
static int class_find(class_table *t, const long long *k, int c)
{
  static const uint64_t mult[9] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                                   0x165667b19e3779f9ull, 0xd6e8feb86659fd93ull,
                                   0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull,
                                   0x94d049bb133111ebull, 0xbf58476d1ce4e5b9ull,
                                   0x2545f4914f6cdd1dull}; /* independent products: no chain */
  uint64_t h = 0;
  for (int i = 0; i < 9; i++) h += (uint64_t)k[i] * mult[i];
  for (size_t j = (h >> 40) & (CLASS_SLOTS - 1);; j = (j + 1) & (CLASS_SLOTS - 1)) {
    int id = t->slot[j] - 1;
    if (id < 0) break;
    if (same_key(t->key[id], k)) return id;
  }
  if (t->n == FE_MESH_MAX_CLASSES) return -1;
  const int id = t->n++;
  memcpy(t->key[id], k, sizeof t->key[id]);
  t->first[id] = c;
  for (size_t j = (h >> 40) & (CLASS_SLOTS - 1);; j = (j + 1) & (CLASS_SLOTS - 1))
    if (!t->slot[j]) {
      t->slot[j] = id + 1;
      break;
    }
  return id;
}

/* Every thread keys its static range of cells into its own table, writing its own class
 * numbers; the tables are merged in thread order (so classes are numbered by their first
 * cell, whatever the team), and each range is renumbered where its numbers differ. */
static fe_mesh_classes *find_classes(const fe_mesh *m, const class_shape *s)
{
  const int nt = omp_get_max_threads();
  class_table *tab = calloc((size_t)nt + 1, sizeof *tab);
  unsigned short *of = fe_malloc((size_t)m->ncells * sizeof *of + 1, "each cell's class");
  unsigned short(*renum)[FE_MESH_MAX_CLASSES] = calloc((size_t)nt, sizeof *renum);
  int *same = calloc((size_t)nt, sizeof *same);
  if (!tab || !of || !renum || !same) {
    free(tab), free(of), free(renum), free(same);
    fe_error_clear();
    return NULL;
  }
  class_table *all = &tab[nt];
  int full = 0;
#pragma omp parallel num_threads(nt)
  {
    class_table *t = &tab[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (int c = 0; c < m->ncells; c++) {
      int stop;
#pragma omp atomic read
      stop = full;
      if (stop) continue;
      long long k[9];
      class_key(m, s, c, k);
      int id = class_find(t, k, c);
      if (id >= 0) of[c] = (unsigned short)id;
      else
#pragma omp atomic write
        full = 1; /* any thread's table full stops every thread */
    }
#pragma omp single
    for (int i = 0; i < nt && !full; i++) {
      same[i] = 1;
      for (int j = 0; j < tab[i].n && !full; j++) {
        int id = class_find(all, tab[i].key[j], tab[i].first[j]);
        if (id < 0) full = 1;
        renum[i][j] = (unsigned short)id;
        same[i] = same[i] && id == j;
      }
    }
    const int me = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int c = 0; c < m->ncells; c++)
      if (!full && !same[me]) of[c] = renum[me][of[c]];
  }
  fe_mesh_classes *k = NULL;
  if (!full && (double)all->n * 16 <= m->ncells && (k = calloc(1, sizeof *k)) &&
      (k->rep = malloc(sizeof(int) * (size_t)all->n))) {
    k->n = all->n, k->of = of, of = NULL;
    memcpy(k->rep, all->first, sizeof(int) * (size_t)all->n);
  } else if (k) {
    free(k), k = NULL;
  }
  free(tab), free(of), free(renum), free(same);
  return k;
}

const fe_mesh_classes *fe_mesh_congruent(const fe_mesh *m)
{
  if (!m || m->classes_known) return m ? m->classes : NULL;
  fe_mesh *w = (fe_mesh *)m; /* the answer kept, as fe_mesh_affine keeps its own */
  w->classes_known = 1;
  if (!fe_mesh_affine(m)) return NULL;
  int nv;
  const double *ref = fe_mesh_geo_nodes(m->type, 1, &nv);
  class_shape s = {m->nvc, m->dim, {0, 0, 0}, 0};
  for (int k = 0; k < s.dim; k++) { /* the vertex along reference axis k from vertex 0 */
    int found = -1;
    for (int b = 1; b < nv && found < 0; b++) {
      int along = ref[3 * b + k] != ref[k];
      for (int e = 0; e < s.dim; e++) along = along && (e == k || ref[3 * b + e] == ref[e]);
      if (along) found = b;
    }
    if (found < 0) return NULL;
    s.axis[k] = found;
  }
  double big = 0;
#pragma omp parallel for schedule(static) reduction(max : big)
  for (size_t i = 0; i < 3 * (size_t)m->nvertices; i++)
    big = fmax(big, fabs(m->coords[i]));
  if (!(big > 0) || !isfinite(big)) return NULL;
  s.inv = 1 / ldexp(big, -44);
  w->classes = find_classes(m, &s);
  return w->classes;
}

void fe_mesh_forget_classes(fe_mesh *m)
{
  if (m->classes) free(m->classes->rep), free(m->classes->of), free(m->classes);
  m->classes = NULL, m->classes_known = 0;
  memset(m->cubes, 0, sizeof m->cubes);
}

int fe_mesh_geo_values(const fe_mesh *m, const double *vertex_values, double **out)
{
  FE_ASSERT(m && vertex_values && out, FE_ERR_ARG, "mesh geometry values: missing argument");
  *out = NULL;
  const int curved = mesh_curved(m);
  const size_t n = (size_t)(curved ? m->ngeo_nodes : m->nvertices);
  double *v;
  FE_MALLOC(v, n + 1, "values at the geometry nodes");
  memcpy(v, vertex_values, (size_t)m->nvertices * sizeof(double));
  if (curved) {
    const double *ref = fe_mesh_geo_nodes(m->type, 2, NULL);
    double N[8];
    for (int e = 0; e < m->ncells; e++) {
      const int *g = m->geo_cells + (size_t)e * m->ngn, *c = m->cells + (size_t)e * m->nvc;
      for (int k = m->nvc; k < m->ngn; k++) { /* the straight interpolant at the node */
        fe_mesh_geo_shape(m->type, 1, ref + 3 * k, N, NULL);
        double s = 0;
        for (int j = 0; j < m->nvc; j++) s += N[j] * vertex_values[c[j]];
        v[g[k]] = s;
      }
    }
  }
  *out = v;
  return 0;
}

/* Determinant of the dim x dim matrix J (row-major). */
static double det_dim(const double *J, int dim)
{
  if (dim == 2) return J[0] * J[3] - J[1] * J[2];
  return J[0] * (J[4] * J[8] - J[5] * J[7]) - J[1] * (J[3] * J[8] - J[5] * J[6]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* The curved arrays agree with the vertices, and every cell's second-order map has a
 * positive Jacobian determinant at each of its nodes (necessary, not sufficient, for an
 * invertible map; the same test Gmsh's own validity check starts from). */
int mesh_check_curved(const fe_mesh *m)
{
  static const char *const names2[] = {"tri6", "quad9", "tet10", "hex27", "prism18"};
  const char *name = names2[m->type];
  FE_ASSERT(m->ngn == geo_nnodes2[m->type], FE_ERR_MESH,
            "curved mesh has %d nodes per cell, but %s cells have %d", m->ngn, name,
            geo_nnodes2[m->type]);
  FE_ASSERT(m->ngeo_nodes >= m->nvertices, FE_ERR_MESH,
            "curved mesh has %d geometry nodes, fewer than its %d vertices", m->ngeo_nodes,
            m->nvertices);
  for (size_t k = 0; k < 3 * (size_t)m->nvertices; k++)
    if (m->geo_coords[k] != m->coords[k])
      FE_ERROR(FE_ERR_MESH, "curved mesh: geometry node %zu is not at its vertex", k / 3);
  const double *ref = fe_mesh_geo_nodes(m->type, 2, NULL);
  const int dim = m->dim;
  for (int e = 0; e < m->ncells; e++) {
    const int *g = m->geo_cells + (size_t)e * m->ngn, *c = m->cells + (size_t)e * m->nvc;
    for (int k = 0; k < m->ngn; k++) {
      const int ok = k < m->nvc ? g[k] == c[k] : g[k] >= m->nvertices && g[k] < m->ngeo_nodes;
      if (!ok)
        FE_ERROR(FE_ERR_MESH, "cell %d (%s) has geometry node %d at its node %d, %s", e, name,
                 g[k], k,
                 k < m->nvc ? "not its vertex" : "outside the second-order nodes of the mesh");
    }
    double h = 0; /* the cell's size, for a scale-free test */
    for (int k = 1; k < m->nvc; k++) {
      double s = 0;
      for (int d = 0; d < 3; d++) {
        double t = m->coords[3 * (size_t)c[k] + d] - m->coords[3 * (size_t)c[0] + d];
        s += t * t;
      }
      h = s > h ? s : h;
    }
    const double scale = dim == 2 ? h : h * sqrt(h);
    for (int k = 0; k < m->ngn; k++) {
      double J[9];
      FE_CHECK(fe_mesh_geo_map(m, e, ref + 3 * k, NULL, J));
      const double det = det_dim(J, dim);
      if (det > 1e-12 * scale) continue;
      FE_ERROR(FE_ERR_MESH,
               "cell %d (%s) is %s: the Jacobian determinant of its curved map is %.3g at its "
               "node %d",
               e, name, det < -1e-12 * scale ? "inverted" : "degenerate", det, k);
    }
  }
  return 0;
}
