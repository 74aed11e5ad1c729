/* The fine scale of the two-scale preconditioner, host side: the subdomains' gather map
 * (Remacle, Gandham, Warburton, section 4.2) and the cells at each node, which the map, the
 * boxes' weights and the coarse transfers walk.
 *
 * The gather map. A cell's extension across face F is the layer of its face neighbour one
 * node inside F. The neighbour is the other cell whose face has F's four corner nodes; the
 * orientation of its face against F (any of the eight symmetries of a square: Gmsh meshes
 * put neighbours in any orientation) comes from where F's corners sit on it, and every node
 * is then checked by its global id. The edge and corner regions follow from the face layers
 * by lattice steps (extend_edges), orientation-free. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "engine/core/error.h"
#include "engine/solve/precond/twoscale.h"

/* The node at lattice (i, j, k) of cell c. */
static int lattice_node(const fe_space *V, int c, int i, int j, int k)
{
  int p1 = V->elem.order + 1;
  return V->cell_nodes[(size_t)c * V->elem.nbasis + V->elem.lex[i + p1 * (j + p1 * k)]];
}

/* The node of corner q of cell c (bit d of q: the far side along direction d). */
static int corner_node(const fe_space *V, int c, int q)
{
  int n = V->elem.order;
  return lattice_node(V, c, n * (q & 1), n * ((q >> 1) & 1), n * ((q >> 2) & 1));
}

void fe_schwarz_box(const fe_space *V, int c, double h[3])
{
  for (int d = 0; d < 3; d++) {
    double s = 0;
    for (int q = 0; q < 8; q++) {
      if (q >> d & 1) continue;
      const double *x0 = V->node_coords + (size_t)corner_node(V, c, q) * 3;
      const double *x1 = V->node_coords + (size_t)corner_node(V, c, q | 1 << d) * 3;
      s += sqrt((x1[0] - x0[0]) * (x1[0] - x0[0]) + (x1[1] - x0[1]) * (x1[1] - x0[1]) +
                (x1[2] - x0[2]) * (x1[2] - x0[2]));
    }
    h[d] = s / 4;
  }
}

/* The corner of face f whose in-face position is (u, v) (u along the face's lower other
 * direction, v along the higher). */
static int face_corner(int f, int u, int v)
{
  int d = f / 2, s = f % 2, d1 = d == 0 ? 1 : 0, d2 = d == 2 ? 1 : 2;
  return s << d | u << d1 | v << d2;
}

/* The face neighbour of every face: nbr[c * 6 + f] = c' * 6 + f', or -1 on the boundary. A
 * face is named by its sorted corner nodes (key); its neighbour is the one other face of that
 * name among the faces of the cells at its least corner. Both loops are over cells, in
 * parallel; an error names the first cell with a face of more than two cells. */
static int face_neighbours(const fe_space *V, const fe_node_cells *adj, int *nbr)
{
  int nc = V->mesh->ncells;
  int *key;
  FE_MALLOC(key, (size_t)nc * 24, "the faces of the cells");
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nc; c++)
    for (int f = 0; f < 6; f++) {
      int *r = key + (size_t)(c * 6 + f) * 4;
      for (int q = 0; q < 4; q++) {
        int k = q, g = corner_node(V, c, face_corner(f, q & 1, q >> 1));
        while (k > 0 && r[k - 1] > g) { /* insertion: the sorted corners */
          r[k] = r[k - 1];
          k--;
        }
        r[k] = g;
      }
    }
  int bad = nc;
#pragma omp parallel for schedule(static) reduction(min : bad)
  for (int c = 0; c < nc; c++)
    for (int f = 0; f < 6; f++) {
      const int *r = key + (size_t)(c * 6 + f) * 4;
      int found = -1, count = 0;
      for (int t = adj->start[r[0]]; t < adj->start[r[0] + 1]; t++)
        for (int f2 = 0, c2 = adj->cells[t]; f2 < 6; f2++) {
          const int *r2 = key + (size_t)(c2 * 6 + f2) * 4;
          if ((c2 == c && f2 == f) || r2[0] != r[0] || r2[1] != r[1] || r2[2] != r[2] ||
              r2[3] != r[3])
            continue;
          found = c2 * 6 + f2;
          count++;
        }
      nbr[c * 6 + f] = count == 1 ? found : -1;
      if (count > 1 && c < bad) bad = c;
    }
  free(key);
  FE_ASSERT(bad == nc, FE_ERR_MESH, "twoscale: a face of cell %d is shared by more than two "
            "cells", bad);
  return 0;
}

/* The in-face position (u, v) in {0, 1}^2 on face f2 of cell c2 of node g, or -1. */
static int find_corner(const fe_space *V, int c2, int f2, int g, int *u, int *v)
{
  for (int q = 0; q < 4; q++)
    if (corner_node(V, c2, face_corner(f2, q & 1, q >> 1)) == g) {
      *u = q & 1;
      *v = q >> 1;
      return 0;
    }
  return -1;
}

/* The extension of cell c across face f into map (the ne^2 points of that layer); a failure
 * sets its message only with say (the parallel pass is silent, the rerun of the first failing
 * cell speaks). */
static int extend_face(const fe_space *V, int c, int f, int c2, int f2, int *map, int say)
{
  int n = V->elem.order, ne = n + 3;
  int d = f / 2, s = f % 2, d1 = d == 0 ? 1 : 0, d2 = d == 2 ? 1 : 2;
  int e = f2 / 2, s2 = f2 % 2, e1 = e == 0 ? 1 : 0, e2 = e == 2 ? 1 : 2;
  /* where the corners (0,0), (1,0), (0,1) of F sit on the neighbour's face: its origin and
   * the images of F's two in-face axes */
  int o[2], x[2], y[2];
  int g0 = corner_node(V, c, face_corner(f, 0, 0)), gx = corner_node(V, c, face_corner(f, 1, 0)),
      gy = corner_node(V, c, face_corner(f, 0, 1));
  if (find_corner(V, c2, f2, g0, &o[0], &o[1]) || find_corner(V, c2, f2, gx, &x[0], &x[1]) ||
      find_corner(V, c2, f2, gy, &y[0], &y[1])) {
    if (!say) return FE_ERR_INTERNAL;
    FE_ERROR(FE_ERR_INTERNAL, "twoscale: cells %d and %d share a face but not its corners", c, c2);
  }
  for (int b = 0; b <= n; b++)
    for (int a = 0; a <= n; a++) {
      int u = n * o[0] + a * (x[0] - o[0]) + b * (y[0] - o[0]); /* (a, b) on the neighbour */
      int v = n * o[1] + a * (x[1] - o[1]) + b * (y[1] - o[1]);
      int l[3], l2[3];
      l[d] = s * n;
      l[d1] = a;
      l[d2] = b;
      l2[e] = s2 * n;
      l2[e1] = u;
      l2[e2] = v;
      if (lattice_node(V, c, l[0], l[1], l[2]) != lattice_node(V, c2, l2[0], l2[1], l2[2])) {
        if (!say) return FE_ERR_MESH;
        FE_ERROR(FE_ERR_MESH, "twoscale: the nodes of the face shared by cells %d and %d do not "
                 "match (a mesh with inconsistent face orientations?)", c, c2);
      }
      l2[e] = s2 ? n - 1 : 1; /* one layer inside the neighbour */
      int g = lattice_node(V, c2, l2[0], l2[1], l2[2]);
      int p[3]; /* the extended lattice point, shifted by one */
      p[d] = s ? n + 2 : 0;
      p[d1] = a + 1;
      p[d2] = b + 1;
      map[(p[2] * ne + p[1]) * ne + p[0]] = g;
    }
  return 0;
}

int ts_scan(int *a, int n)
{
  int total = 0, *part = calloc((size_t)omp_get_max_threads() + 1, sizeof(int));
  if (!part) { /* one pass alone */
    for (int g = 0; g < n; g++) {
      int k = a[g];
      a[g] = total;
      total += k;
    }
    a[n] = total;
    return total;
  }
#pragma omp parallel if (n > 65536)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int lo = (int)((long long)n * t / nt), hi = (int)((long long)n * (t + 1) / nt), s = 0;
    for (int g = lo; g < hi; g++) s += a[g];
    part[t + 1] = s;
#pragma omp barrier
#pragma omp single
    for (int q = 0; q < nt; q++) part[q + 1] += part[q];
    s = part[t];
    for (int g = lo; g < hi; g++) {
      int k = a[g];
      a[g] = s;
      s += k;
    }
#pragma omp single nowait
    total = part[nt];
  }
  free(part);
  a[n] = total;
  return total;
}

/* Every node's entries start[g] .. start[g + 1) of cells and lex put in increasing cell order
 * (the parallel fill's atomic slots leave them in any order; a node has a few). */
static void sort_node_cells(int nn, const int *start, int *cells, int *lex)
{
#pragma omp parallel for schedule(static)
  for (int g = 0; g < nn; g++)
    for (int t = start[g] + 1; t < start[g + 1]; t++) {
      int c = cells[t], l = lex[t], k = t;
      for (; k > start[g] && cells[k - 1] > c; k--) {
        cells[k] = cells[k - 1];
        lex[k] = lex[k - 1];
      }
      cells[k] = c;
      lex[k] = l;
    }
}

/* The counts start[g] of cells at every node and the (cell, lattice node) entries from at[g]
 * on: in parallel (atomic counts and slots, then each node's entries sorted by cell) from four
 * threads on, where that beats the serial passes (an atomic add costs some three plain ones),
 * else in cell order. */
static void node_cells_fill(const fe_space *V, int *start, int *at, int *cells, int *lex)
{
  const int nc = V->mesh->ncells, nb = V->elem.nbasis, nn = V->nnodes, *lx = V->elem.lex,
            *cn = V->cell_nodes;
  const size_t ne = (size_t)nc * nb;
  if (omp_get_max_threads() < 4) {
    for (size_t t = 0; t < ne; t++) start[cn[t]]++;
    ts_scan(start, nn);
    memcpy(at, start, sizeof(int) * (size_t)nn);
    for (int c = 0; c < nc; c++)
      for (int l = 0; l < nb; l++) {
        int t = at[cn[(size_t)c * nb + lx[l]]]++;
        cells[t] = c;
        lex[t] = l;
      }
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t t = 0; t < ne; t++) {
#pragma omp atomic
    start[cn[t]]++;
  }
  ts_scan(start, nn);
  memcpy(at, start, sizeof(int) * (size_t)nn);
#pragma omp parallel for schedule(static)
  for (int c = 0; c < nc; c++)
    for (int l = 0; l < nb; l++) {
      int t, g = cn[(size_t)c * nb + lx[l]];
#pragma omp atomic capture
      t = at[g]++;
      cells[t] = c;
      lex[t] = l;
    }
  sort_node_cells(nn, start, cells, lex);
}

int fe_node_cells_build(const fe_space *V, fe_node_cells *out)
{
  int nc = V->mesh->ncells, nb = V->elem.nbasis, nn = V->nnodes;
  int *start, *cells, *lex, *at;
  FE_CALLOC(start, (size_t)nn + 1, "the cells at each node");
  cells = malloc(sizeof(int) * nc * nb);
  lex = malloc(sizeof(int) * nc * nb);
  at = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!cells || !lex || !at) {
    free(start), free(cells), free(lex), free(at);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the cells at each node");
  }
  node_cells_fill(V, start, at, cells, lex);
  free(at);
  int most = 0;
#pragma omp parallel for schedule(static) reduction(max : most)
  for (int g = 0; g < nn; g++) most = start[g + 1] - start[g] > most ? start[g + 1] - start[g] : most;
  out->start = start;
  out->cells = cells;
  out->lex = lex;
  out->maxdeg = 6 * most;
  out->lstart = out->lnbr = NULL;
  return 0;
}

void fe_node_cells_free(fe_node_cells *adj)
{
  free(adj->start);
  free(adj->cells);
  free(adj->lex);
  adj->start = adj->cells = adj->lex = NULL;
}

/* The nodes of one cell's extended lattice, a set (open addressing, the cell's number as
 * the stamp of a slot: no clearing between cells), and the walks' scratch; one per thread. */
typedef struct lattice_set {
  int *key, *stamp; /* TS_SET slots */
  int mask;
  int *buf;         /* 2 maxdeg: the lattice neighbours of two nodes */
} lattice_set;

static int set_slot(const lattice_set *S, int g)
{
  return (int)(((unsigned)g * 2654435761u) & (unsigned)S->mask);
}

/* Whether node g is in cell c's set; with add, put it there. */
static int set_has(lattice_set *S, int c, int g, int add)
{
  for (int h = set_slot(S, g);; h = (h + 1) & S->mask) {
    if (S->stamp[h] != c + 1) {
      if (add) {
        S->stamp[h] = c + 1;
        S->key[h] = g;
      }
      return 0;
    }
    if (S->key[h] == g) return 1;
  }
}

/* The nodes one lattice step from node g inside a cell at g, each once, into out; their
 * count. */
static int lattice_neighbours(const fe_space *V, const fe_node_cells *adj, int g, int *out)
{
  int n = V->elem.order, p1 = n + 1, k = 0;
  for (int t = adj->start[g]; t < adj->start[g + 1]; t++) {
    int c = adj->cells[t], l = adj->lex[t];
    for (int d = 0; d < 3; d++)
      for (int s = -1; s <= 1; s += 2) {
        int ijk[3] = {l % p1, (l / p1) % p1, l / (p1 * p1)};
        ijk[d] += s;
        if (ijk[d] < 0 || ijk[d] > n) continue;
        int h = lattice_node(V, c, ijk[0], ijk[1], ijk[2]), dup = 0;
        for (int q = 0; q < k && !dup; q++) dup = out[q] == h;
        if (!dup) out[k++] = h;
      }
  }
  return k;
}

/* Node g's lattice neighbours: adj's list where it has them, else made into buf; *k their
 * count. */
static const int *lattice_list(const fe_space *V, const fe_node_cells *adj, int g, int *buf,
                               int *k)
{
  if (!adj->lstart) {
    *k = lattice_neighbours(V, adj, g, buf);
    return buf;
  }
  *k = adj->lstart[g + 1] - adj->lstart[g];
  return adj->lnbr + adj->lstart[g];
}

/* An edge (m = 2) or corner (m = 3) point of cell c's extended lattice: the one node that
 * is a lattice neighbour of each of g[0..m) (the points next to it that are one step closer
 * to the cell) and is neither one of them nor a node of c; -1 when there is none or more
 * than one (a boundary, an edge shared by other than four cells). */
static int common_neighbour(const fe_space *V, const fe_node_cells *adj, int c, const int *g, int m,
                            int *buf)
{
  for (int i = 0; i < m; i++) {
    if (g[i] < 0) return -1;
    for (int j = 0; j < i; j++)
      if (g[i] == g[j]) return -1;
  }
  int k0, ki;
  const int *nb0 = lattice_list(V, adj, g[0], buf, &k0), *nbi;
  int ok[TS_MAX_LINE * 8]; /* candidates still standing: flags over nb0 */
  int ncand = k0 < TS_MAX_LINE * 8 ? k0 : TS_MAX_LINE * 8;
  for (int q = 0; q < ncand; q++) ok[q] = 1;
  for (int i = 1; i < m; i++) {
    nbi = lattice_list(V, adj, g[i], buf + adj->maxdeg, &ki);
    for (int q = 0; q < ncand; q++) {
      int hit = 0;
      for (int t = 0; t < ki && !hit; t++) hit = nbi[t] == nb0[q];
      ok[q] &= hit;
    }
  }
  int found = -1;
  for (int q = 0; q < ncand; q++) {
    if (!ok[q]) continue;
    int h = nb0[q], own = 0;
    for (int i = 0; i < m && !own; i++) own = h == g[i];
    for (int t = adj->start[h]; t < adj->start[h + 1] && !own; t++) own = adj->cells[t] == c;
    if (own) continue;
    if (found >= 0) return -1;
    found = h;
  }
  return found;
}

/* Point p of cell c's extended lattice m, in an edge (two of its indices at an end) or corner
 * region (three): the node next to each of the points one step closer to the cell, none
 * (-1) where common_neighbour finds none or the node is in the lattice already (S). */
static void region_point(const fe_space *V, const fe_node_cells *adj, int c, int *m,
                         lattice_set *S, const int p[3])
{
  int ne = V->elem.order + 3, g[3], k = 0;
  for (int d = 0; d < 3; d++) {
    if (p[d] != 0 && p[d] != ne - 1) continue;
    int q[3] = {p[0], p[1], p[2]};
    q[d] = p[d] == 0 ? 1 : ne - 2; /* one step toward the cell */
    g[k++] = m[(q[2] * ne + q[1]) * ne + q[0]];
  }
  int h = common_neighbour(V, adj, c, g, k, S->buf);
  if (h >= 0 && set_has(S, c, h, 1)) h = -1; /* in the lattice already */
  m[(p[2] * ne + p[1]) * ne + p[0]] = h;
}

/* The edge and corner regions of cell c's extended lattice m (ids, -1: none), from the face
 * layers: point (-1, -1, k) is the node next to both (-1, 0, k) and (0, -1, k), and so on.
 * The edges first, then the corners (found from them), each in lattice order; a point found
 * twice in the lattice is dropped. */
static void extend_edges(const fe_space *V, const fe_node_cells *adj, int c, int *m,
                         lattice_set *S)
{
  int n = V->elem.order, ne = n + 3;
  for (int t = 0; t < ne * ne * ne; t++)
    if (m[t] >= 0) set_has(S, c, m[t], 1);
  for (int pass = 2; pass <= 3; pass++) /* the indices at an end: 2 an edge, 3 a corner */
    for (int p2 = 0; p2 < ne; p2++)
      for (int p1 = 0; p1 < ne; p1++) {
        int e = (p2 == 0 || p2 == ne - 1) + (p1 == 0 || p1 == ne - 1);
        if (e == 0 || e + 1 < pass) continue; /* with one of p1, p2 at an end, p0 must be */
        for (int p0 = 0; p0 < ne; p0 += e == 2 ? 1 : ne - 1)
          if (e + (p0 == 0 || p0 == ne - 1) == pass)
            region_point(V, adj, c, m, S, (const int[3]){p0, p1, p2});
      }
}

/* How cell c's pencil ends at face f on the boundary: fixed when every node of the face is
 * constrained, else free. */
static int boundary_end(const fe_space *V, int c, int f, const unsigned char *con)
{
  int n = V->elem.order, d = f / 2, d1 = d == 0 ? 1 : 0, d2 = d == 2 ? 1 : 2;
  for (int b = 0; b <= n; b++)
    for (int a = 0; a <= n; a++) {
      int l[3];
      l[d] = f % 2 * n;
      l[d1] = a;
      l[d2] = b;
      if (!con[lattice_node(V, c, l[0], l[1], l[2])]) return TS_END_FREE;
    }
  return TS_END_FIXED;
}

/* Cell c's extended lattice m and pencil *pen (the top of fe_schwarz_map); the count of its
 * valid entries, or minus an error code (a message only with say). */
static long long map_cell(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                          const int *nbr, int c, int *m, int *pen, lattice_set *S, int say)
{
  int n = V->elem.order, ne = n + 3, ne3 = ne * ne * ne;
  for (int t = 0; t < ne3; t++) m[t] = -1;
  for (int k = 0; k <= n; k++) /* the cell's own nodes */
    for (int j = 0; j <= n; j++)
      for (int i = 0; i <= n; i++) m[((k + 1) * ne + j + 1) * ne + i + 1] = lattice_node(V, c, i, j, k);
  int end[6];
  for (int f = 0; f < 6; f++) {
    int nb = nbr[c * 6 + f];
    end[f] = nb >= 0 ? TS_END_NEIGHBOUR : boundary_end(V, c, f, con);
    int rc = nb >= 0 ? extend_face(V, c, f, nb / 6, nb % 6, m, say) : 0;
    if (rc) return -rc;
  }
  int p = 0, floating = 1;
  for (int d = 2; d >= 0; d--) {
    p = p * TS_PENCILS + end[2 * d] * 3 + end[2 * d + 1];
    floating &= end[2 * d] == TS_END_FREE && end[2 * d + 1] == TS_END_FREE;
  }
  *pen = p;
  if (floating) {
    if (say)
      fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "twoscale: cell %d has neither a "
                   "neighbour nor a constrained face in any direction: its local problem is "
                   "singular (a one-cell mesh without Dirichlet faces?)", c);
    return -FE_ERR_ARG;
  }
  extend_edges(V, adj, c, m, S);
  long long valid = 0;
  for (int t = 0; t < ne3; t++) { /* constrained nodes are left out */
    if (m[t] >= 0 && con[m[t]]) m[t] = -1;
    valid += m[t] >= 0;
  }
  return valid;
}

/* Each node's lattice neighbours listed once into a's lstart and lnbr (the edge and corner
 * regions ask for a node's many times): each thread lists a block of nodes into its own
 * buffer (at most 6 a cell at each node), then the blocks are copied one after another; left
 * NULL where the memory is not there (then each asks lattice_neighbours anew). */
static void list_lattice_neighbours(const fe_space *V, fe_node_cells *a)
{
  const int nn = V->nnodes;
  int *start = malloc(sizeof(int) * ((size_t)nn + 1)), *list = NULL, failed = !start;
  size_t *part = calloc((size_t)omp_get_max_threads() + 1, sizeof(size_t));
  failed |= !part;
#pragma omp parallel if (!failed && nn > 4096)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int lo = (int)((long long)nn * t / nt), hi = (int)((long long)nn * (t + 1) / nt);
    int *buf = failed ? NULL : malloc(sizeof(int) * (6 * (size_t)(a->start[hi] - a->start[lo]) + 1));
    size_t k = 0;
    for (int g = lo; buf && g < hi; g++) {
      start[g] = lattice_neighbours(V, a, g, buf + k);
      k += (size_t)start[g];
    }
    if (!buf) {
#pragma omp atomic write
      failed = 1;
    }
    part[t + 1] = k;
#pragma omp barrier
#pragma omp single
    {
      for (int q = 0; q < nt; q++) part[q + 1] += part[q];
      list = failed || part[nt] > 0x7fffffff ? NULL : malloc(sizeof(int) * (part[nt] + 1));
      if (list) start[nn] = (int)part[nt];
    }
    if (list) {
      memcpy(list + part[t], buf, sizeof(int) * k);
      int s = (int)part[t];
      for (int g = lo; g < hi; g++) {
        int m = start[g];
        start[g] = s;
        s += m;
      }
    }
    free(buf);
  }
  free(part);
  if (!list) {
    free(start);
    return;
  }
  a->lstart = start;
  a->lnbr = list;
}

int fe_schwarz_map(const fe_space *V, const fe_node_cells *cells_at, const unsigned char *con,
                   int **out, int **pencil, long long *nvalid)
{
  fe_node_cells listed = *cells_at, *adj = &listed;
  listed.lstart = listed.lnbr = NULL;
  list_lattice_neighbours(V, &listed);
  int nc = V->mesh->ncells, n = V->elem.order, ne = n + 3;
  size_t ne3 = (size_t)ne * ne * ne;
  int *nbr, *map, *pen;
  FE_MALLOC(nbr, (size_t)nc * 6, "the face neighbours");
  int rc = face_neighbours(V, adj, nbr);
  map = rc ? NULL : malloc(sizeof(int) * nc * ne3);
  pen = rc ? NULL : malloc(sizeof(int) * nc);
  if (!rc && (!map || !pen))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the "
                      "subdomains' map (%zu entries)", nc * ne3);
  long long valid = 0;
  int failed = nc; /* the first failing cell */
  int slots = 1;
  while (slots < 4 * (int)ne3) slots *= 2;
#pragma omp parallel if (!rc && nc > 64) reduction(+ : valid)
  {
    lattice_set S = {malloc(sizeof(int) * slots), calloc((size_t)slots, sizeof(int)), slots - 1,
                     malloc(sizeof(int) * 2 * (adj->maxdeg + 1))};
    int ok = S.key && S.stamp && S.buf;
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < nc; c++) {
      if (rc || !ok) continue;
      long long v = map_cell(V, adj, con, nbr, c, map + c * ne3, pen + c, &S, 0);
      if (v >= 0) {
        valid += v;
        continue;
      }
#pragma omp critical(twoscale_map)
      failed = c < failed ? c : failed;
    }
    if (!ok) {
#pragma omp critical(twoscale_map)
      failed = -1;
    }
    free(S.key);
    free(S.stamp);
    free(S.buf);
  }
  if (!rc && failed < 0)
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the "
                      "lattice walks");
  else if (!rc && failed < nc) { /* again, alone, to say why */
    lattice_set S = {malloc(sizeof(int) * slots), calloc((size_t)slots, sizeof(int)), slots - 1,
                     malloc(sizeof(int) * 2 * (adj->maxdeg + 1))};
    rc = S.key && S.stamp && S.buf ? 0 : FE_ERR_MEM;
    long long v = rc ? 0 : map_cell(V, adj, con, nbr, failed, map + failed * ne3, pen + failed, &S, 1);
    if (!rc) rc = v < 0 ? (int)-v : fe_error_set(FE_ERR_INTERNAL, __FILE__, __LINE__, __func__,
                                                 "twoscale: cell %d failed once, not twice", failed);
    free(S.key);
    free(S.stamp);
    free(S.buf);
  }
  free(nbr);
  free(listed.lstart), free(listed.lnbr);
  if (rc) {
    free(map);
    free(pen);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = map;
  *pencil = pen;
  *nvalid = valid;
  return 0;
}
