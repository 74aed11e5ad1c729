/* The two-scale preconditioner's host-side building blocks (engine/solve/precond/twoscale-fdm.c),
 * private to engine/solve/precond/twoscale.c. */
#ifndef FE_PRECOND_TWOSCALE_H
#define FE_PRECOND_TWOSCALE_H

#include "engine/fem/space.h"
#include "engine/solve/vector.h"

#define TS_MAX_ORDER 9                 /* Q1..Q9 */
#define TS_MAX_LINE (TS_MAX_ORDER + 3) /* nodes of an extended pencil */

/* How a pencil ends on each side: across a face into the neighbour (its nearest interior
 * node joins the pencil), at a free boundary face (the cell's end node is the last), or at a
 * constrained one (the end node is fixed). Pencil (left, right) is table left * 3 + right. */
enum { TS_END_NEIGHBOUR, TS_END_FREE, TS_END_FIXED };
#define TS_PENCILS 9
#define TS_ROWS 128 /* constrained rows, vertices, nodes or ghosts per work group */

/* The 1D pencil of a Qn element with its ends, over the n + 3 points of the extended line
 * (the left neighbour's last interior GLL node, the element's n + 1, the right one's first
 * interior node), unit size: the generalized eigenpairs K s = lambda M s of its stiffness
 * and mass (fe_schwarz_mass: lumped or consistent), S[a * ne + j] = entry a of eigenvector
 * j, S^T M S = I, lam[j] ascending. Points the ends leave out are decoupled (K = M = 1
 * there): their eigenvectors are unit vectors that the gather feeds zeros and the scatter
 * drops. */
int fe_schwarz_line(int n, int left, int right, int consistent, double *S, double *lam);

/* The element's 1D mass on [-1, 1], mass[i * (n + 1) + j]: the lumped GLL weights on the
 * diagonal (the operator integrates with the n + 1 GLL points: the spectral element method),
 * or consistent, exact (the operator's rule integrates degree 2n exactly, Gauss by
 * default). */
int fe_schwarz_mass(int n, int consistent, double *mass);

/* The cells at each node: cells[start[g] .. start[g + 1]), in increasing order, with the
 * node's lattice index in each, lex (i + (n + 1) (j + (n + 1) k)); maxdeg: the most lattice
 * neighbours a node can have (6 per cell at it). One O(cells x nodes) counting pass; the map,
 * the boxes' weights and the coarse scale's restriction all walk it. */
typedef struct fe_node_cells {
  int *start, *cells, *lex;
  int maxdeg;
  int *lstart, *lnbr;    /* each node's lattice neighbours where listed (fe_schwarz_map's own
                          * copy lists them once), else NULL */
} fe_node_cells;

int fe_node_cells_build(const fe_space *V, fe_node_cells *adj);
/* a[0 .. n) counts to offsets: a[g] = the sum of the counts before g, a[n] = their total (the
 * return), in parallel (OpenMP) where n is large. */
int ts_scan(int *a, int n);
void fe_node_cells_free(fe_node_cells *adj);

/* The gather map of the subdomains: map[(c * ne + b) * ne + a] (ne = n + 3, lattice
 * (a, b, c) - 1 per direction, x fastest) is the global node of the extended lattice point,
 * or -1 for points outside the domain, constrained (con[node] != 0), or in an edge or corner
 * region that has no single node (an edge shared by other than four cells). Face neighbours
 * are found from the corners' node ids, whatever their relative orientation; the edge and
 * corner regions from the face layers. pencil[c] = px + TS_PENCILS (py + TS_PENCILS pz),
 * the pencil of each direction; *nvalid gets the number of entries >= 0. Cells are done in
 * parallel (OpenMP); an error names the first failing cell. */
int fe_schwarz_map(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                   int **map, int **pencil, long long *nvalid);

/* The box h[3] that approximates cell c: the mean length of its four edges along each
 * reference direction. */
void fe_schwarz_box(const fe_space *V, int c, double h[3]);

/* The element's 1D GLL stiffness d[i * (n + 1) + j] = sum_m l_i'(t_m) l_j'(t_m) rho_m and the
 * weights rho[n + 1], on the reference line [-1, 1]. */
int fe_schwarz_gll_stiffness(int n, double *d, double *rho);

/* The coarse scale's host side (twoscale-coarse.c). */
#define TS_GEOM_MAX 27 /* geometry functions of a straight cell, at most */
/* On a split space: the host array a (one value a node of V) summed over the ranks that hold
 * each node (their cells' parts); else nothing. */
int ts_ranks_sum(const fe_space *V, double *a);
/* share[c * nb + l] (lexicographic l): cell c's lumped mass m_{ijk;e} = rho_i rho_j rho_k
 * det J at its node l over the node's mass m_N (summed over the ranks), 0 at the constrained
 * nodes (con). */
int ts_coarse_shares(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                     double *share);
/* The transfers' index arrays: the cells' nodes (lexicographic) and corners, the (cell,
 * corner) entries c * 8 + q of every free vertex, the (cell, node) entries c * nb + l of every
 * free node with their shares (nshare, in nentry's order). */
typedef struct ts_transfers {
  int *nodes;           /* ncells x nb */
  int *corners;         /* ncells x 8 (bit d of q: the far side along d) */
  int *vstart, *ventry; /* nvertices + 1 offsets; the entries */
  int *nstart, *nentry; /* nnodes + 1 offsets; the entries */
  double *nshare;
} ts_transfers;
int ts_coarse_maps(const fe_space *V, const fe_node_cells *adj, const unsigned char *con,
                   const double *share, ts_transfers *T);
void ts_transfers_free(ts_transfers *T);
/* Whether every corner of every cell is the same node of V and of the Q1 space V1 on its
 * mesh, and a vertex (vertex v is node v of both), else an error naming the first. */
int ts_corners_check(const fe_space *V, const fe_space *V1);

/* The ghost layer of twoscale on a space split over the ranks (twoscale-ghost.c). */
typedef struct ts_ghost ts_ghost;
/* V's local cells' subdomains (split V; con: its constrained nodes), the same as one rank's:
 * *map, *pen and *nvalid as fe_schwarz_map's, with the ghosts numbered after V's nodes; *G
 * their exchange on be in prec with schwarz.knl's fe_twoscale_gather and _add_at. */
int ts_ghost_make(const fe_space *V, const unsigned char *con, fe_backend *be, fe_precision prec,
                  fe_kernel *gather, fe_kernel *add_at, ts_ghost **G, int **map, int **pen,
                  long long *nvalid);
/* *rx: r with its ghosts' values from their owners, the fine kernel's input; *zx: its output,
 * zeroed (both G's). */
int ts_ghost_begin(ts_ghost *G, const fe_vector *r, fe_vector **rx, fe_vector **zx);
/* z = zx's local part, the ghosts' parts sent to their owners and added there. */
int ts_ghost_end(ts_ghost *G, fe_vector *z);
void ts_ghost_free(ts_ghost *G);

#endif
