/* felab matrices, the pattern and fill of a box's lattice (fe_operator_assemble, assemble.c):
 * a scalar space whose nodes are a mesh.box's vertices (P1 on its tets, prisms and triangles,
 * Q1 on its hexes and quadrilaterals), filled by the host in double.
 * mesh.box makes its cells cube by cube, the same cells in each cube, a vertex's id its
 * lattice point's (mesh-box.c). Then the columns of vertex a's row are a's neighbours on the
 * lattice, at most one step along each axis (27 offsets, o = (dx + 1) + 3 (dy + 1) +
 * 9 (dz + 1)), each present where a cube around a holds a cell with both, and the ids of a
 * row's neighbours rise with o (a step in y passes any step in x). A row is one 27-bit mask
 * (its columns: the offsets of its cubes' cells, less the constrained columns), and an
 * entry's place in its row the count of the mask's bits below its offset: no node's cells
 * listed, no neighbours sorted, no place looked up (the general passes, pattern.c,
 * pattern-fill.c and cell-fill.c, do each; on P1 tets of a 128^3 box they took about four
 * fifths of the first csr apply, docs/benchmarks.md).
 * The fill: each thread a range of rows (balanced by their entries), the cubes that touch
 * them in order, their cells' element matrices made a batch at a time (reg_jac, host-fill.c)
 * and each entry of a thread's row added in place. An entry's sum is its cells' in cell
 * order from zero, as in the general fill: the same matrix, bit for bit. The cells of the
 * cubes at the edge of two threads' rows are made by both (a layer of cubes per thread).
 * The lattice is checked, not assumed: the cells' nodes must be the first cube's shifted to
 * every cube (one pass over the cells), else the general passes run. FELAB_PATTERN_NODES
 * set: the general passes always (tests compare the two). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix-private.h"

enum { CORNERS = 8, MOST_NB = 8, MOST_PER = 8, FULL = 27, AHEAD = 6 };

/* What the lattice gives: its cubes and vertex strides, each cell's nodes as corners of its
 * cube, each cube position's offsets about a corner, and per row its mask (lattice_rows). */
struct pattern_lattice {
  int dim, n[3];          /* cubes per side (n[2] 1 in 2D) */
  long long sy, sz;       /* vertex id strides in y and z */
  int per, nb;            /* cells a cube, nodes a cell */
  unsigned char q[MOST_PER][MOST_NB];           /* cell s's node i: its cube's corner */
  unsigned char off[MOST_PER][MOST_NB][MOST_NB]; /* cell s's entry (i, j): j's offset from i */
  long long corner[CORNERS]; /* corner q's id less its cube's least */
  long long step[FULL];      /* offset o's step in ids */
  unsigned around[CORNERS]; /* a cube at p (bit d: one step down along d): the offsets of its
                             * cells' nodes from the corner there that is the row's node */
  unsigned full;          /* an interior row's mask */
  unsigned char at[MOST_PER][MOST_NB][MOST_NB]; /* an interior row's places of cell s's
                                                * entry (i, j) */
  unsigned *mask;         /* per row: its columns' offsets (0: a constrained row) */
};

static int bits(unsigned m)
{
  int n = 0;
  for (; m; m &= m - 1) n++;
  return n;
}

/* The lattice point of cube-0 node id, as a corner (bits x, y, z), or -1. */
static int corner_of(const struct pattern_lattice *L, long long id)
{
  const long long x = id % L->sy, y = id / L->sy % (L->n[1] + 1), z = id / L->sz;
  if (x > 1 || y > 1 || z > (L->dim == 3) || id < 0) return -1;
  return (int)(x + 2 * y + 4 * z);
}

/* The offset index of the step from corner q to corner r. */
static int step(int q, int r)
{
  int o = 0;
  for (int d = 0, s = 1; d < 3; d++, s *= 3) o += ((r >> d & 1) - (q >> d & 1) + 1) * s;
  return o;
}

static long long cube_base(const struct pattern_lattice *L, long long cube)
{
  const long long i = cube % L->n[0], j = cube / L->n[0] % L->n[1], k = cube / L->n[0] / L->n[1];
  return i + L->sy * j + L->sz * k;
}

/* L from the cells: 0 where they follow the lattice, 1 where they do not. */
static int lattice_read(const fe_space *V, struct pattern_lattice *L)
{
  const fe_mesh *m = V->mesh;
  const int dim = m->dim, nb = V->elem.nbasis, *cn = V->cell_nodes;
  if (m->cubes[0] <= 0 || m->cubes[1] <= 0 || (dim == 3 && m->cubes[2] <= 0) || dim < 2 ||
      nb != m->nvc || nb > MOST_NB || V->ncomp != 1)
    return 1;
  *L = (struct pattern_lattice){.dim = dim, .n = {m->cubes[0], m->cubes[1],
                                                  dim == 3 ? m->cubes[2] : 1}, .nb = nb};
  const long long cubes = (long long)L->n[0] * L->n[1] * L->n[2];
  L->sy = L->n[0] + 1;
  L->sz = L->sy * (L->n[1] + 1);
  if ((long long)V->nnodes != L->sz * (dim == 3 ? L->n[2] + 1 : 1) ||
      m->ncells % cubes || m->ncells / cubes > MOST_PER)
    return 1;
  L->per = (int)(m->ncells / cubes);
  int q[MOST_PER][MOST_NB];
  for (int s = 0; s < L->per; s++)
    for (int v = 0; v < nb; v++)
      if ((q[s][v] = corner_of(L, cn[s * nb + v])) < 0) return 1;
  int bad = 0; /* every cell its cube's shift of the first cube's */
  const long long lines = cubes / L->n[0], w = (long long)L->per * nb;
#pragma omp parallel for schedule(static) reduction(| : bad)
  for (long long line = 0; line < lines; line++) { /* a line of cubes along x */
    const long long b = cube_base(L, line * L->n[0]);
    const int *x = cn + (size_t)(line * L->n[0] * w);
    for (int i = 0; i < L->n[0]; i++, x += w)
      for (int k = 0; k < w; k++) bad |= x[k] != b + i + cn[k];
  }
  if (bad) return 1;
  for (int p = 0; p < CORNERS; p++)
    L->corner[p] = (p & 1) + L->sy * (p >> 1 & 1) + L->sz * (p >> 2);
  for (int o = 0; o < FULL; o++)
    L->step[o] = (o % 3 - 1) + L->sy * (o / 3 % 3 - 1) + L->sz * (o / 9 - 1);
  for (int s = 0; s < L->per; s++)
    for (int i = 0; i < nb; i++)
      for (int j = 0; j < nb; j++) {
        L->q[s][i] = (unsigned char)q[s][i];
        L->off[s][i][j] = (unsigned char)step(q[s][i], q[s][j]);
        /* the cube one step down along d where i's corner has bit d: p = q[s][i] */
        L->around[q[s][i]] |= 1u << L->off[s][i][j];
      }
  const int positions = 1 << dim;
  for (int p = 0; p < positions; p++) L->full |= L->around[p];
  for (int s = 0; s < L->per; s++)
    for (int i = 0; i < nb; i++)
      for (int j = 0; j < nb; j++)
        L->at[s][i][j] = (unsigned char)bits(L->full & ((1u << L->off[s][i][j]) - 1));
  return 0;
}

void pattern_lattice_free(pattern *P)
{
  if (P->lattice) free(P->lattice->mask);
  free(P->lattice);
  P->lattice = NULL;
}

int lattice_rows(pattern *P, int *rowptr)
{
  const char *env = getenv("FELAB_PATTERN_NODES");
  if ((env && *env) || !fill_by_cells_wanted(P, 1)) return 0;
  const fe_space *V = P->V;
  struct pattern_lattice *L = calloc(1, sizeof *L);
  FE_ASSERT(L, FE_ERR_MEM, "out of host memory");
  if (lattice_read(V, L)) {
    free(L);
    return 0;
  }
  const int nn = V->nnodes, dim = L->dim, *fixed = P->fixed;
  L->mask = malloc(sizeof(unsigned) * ((size_t)nn + 1));
  if (!L->mask) {
    free(L);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the lattice's %d rows", nn);
  }
  const long long lines = (long long)(L->n[1] + 1) * (dim == 3 ? L->n[2] + 1 : 1);
#pragma omp parallel for schedule(static)
  for (long long line = 0; line < lines; line++) { /* a line of rows along x */
    const long long at[3] = {0, line % (L->n[1] + 1), line / (L->n[1] + 1)};
    unsigned side[3] = {0, 0, 0}; /* the masks of the line's first row, its inner rows, its
                                   * last (the cubes about them that the box holds) */
    for (int p = 0; p < 1 << dim; p++) {
      int in = 1;
      for (int d = 1; d < dim; d++) in &= p >> d & 1 ? at[d] > 0 : at[d] < L->n[d];
      if (!in) continue;
      side[0] |= p & 1 ? 0 : L->around[p];
      side[1] |= L->around[p];
      side[2] |= p & 1 ? L->around[p] : 0;
    }
    const int a0 = (int)(line * L->sy);
    for (int i = 0; i <= L->n[0]; i++) {
      const int a = a0 + i;
      unsigned mk = fixed[a] ? 0 : side[i == 0 ? 0 : i == L->n[0] ? 2 : 1];
      for (unsigned r = mk; r; r &= r - 1) { /* less the constrained columns */
        const int o = __builtin_ctz(r);
        if (fixed[a + L->step[o]]) mk &= ~(1u << o);
      }
      L->mask[a] = mk;
      rowptr[a] = fixed[a] ? 1 : bits(mk);
    }
  }
  long long nz = 0;
  for (int a = 0; a < nn; a++) {
    const int len = rowptr[a];
    rowptr[a] = (int)nz;
    nz += len;
    if (nz > 2147483647LL) {
      pattern_lattice_free(&(pattern){.lattice = L});
      FE_ERROR(FE_ERR_ARG, "the matrix has more than 2^31 nonzeros (int indices)");
    }
  }
  rowptr[nn] = (int)nz;
  P->lattice = L;
  return 0;
}

/* Thread rows [a0, a1): their columns, their values zero, the identity's rows. */
static void rows_write(const pattern *P, const int *rowptr, int *cols, double *vals, int a0,
                       int a1)
{
  const struct pattern_lattice *L = P->lattice;
  memset(vals + rowptr[a0], 0, sizeof(double) * (size_t)(rowptr[a1] - rowptr[a0]));
  for (int a = a0; a < a1; a++) {
    int *c = cols + rowptr[a];
    if (P->fixed[a]) {
      c[0] = a;
      vals[rowptr[a]] = 1;
    }
    for (unsigned r = L->mask[a]; r; r &= r - 1) *c++ = (int)(a + L->step[__builtin_ctz(r)]);
  }
}

/* The first cube whose least vertex is at or past id v. */
static long long cube_from(const struct pattern_lattice *L, long long v)
{
  long long lo = 0, hi = (long long)L->n[0] * L->n[1] * L->n[2];
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (cube_base(L, mid) < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A cube's cells' entries (their matrices at K) into its corners' rows (row, mk: each corner's
 * values and mask, mask 0 where the row is not the thread's or is constrained; nb a constant
 * where inlined): an interior row's places from its cell's table, another's counted from its
 * mask. */
static inline void cube_add(const struct pattern_lattice *L, int nb, double *const *row,
                            const unsigned *mk, const double *K, size_t kn)
{
  for (int s = 0; s < L->per; s++)
    for (int i = 0; i < nb; i++) {
      const int q = L->q[s][i];
      const unsigned m = mk[q];
      const double *k = K + (size_t)s * kn + i * nb;
      double *r = row[q];
      if (m == L->full) {
        const unsigned char *at = L->at[s][i];
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) r[at[j]] += k[j];
      } else
        for (int j = 0; m && j < nb; j++) {
          const int o = L->off[s][i][j];
          if (m >> o & 1) r[bits(m & ((1u << o) - 1))] += k[j];
        }
    }
}

/* Cubes [u0, u0 + n)'s matrices (at K, their cells in order) added into the thread's rows
 * [a0, a1), a cube at a time; the rows of a cube a few ahead prefetched (their values were
 * last touched a layer of cubes back: missed). */
static void cubes_add(const pattern *P, const int *rowptr, double *vals, const double *K,
                      size_t kn, long long u0, int n, int a0, int a1)
{
  const struct pattern_lattice *L = P->lattice;
  const int corners = 1 << L->dim;
  long long at[3] = {u0 % L->n[0], u0 / L->n[0] % L->n[1], u0 / L->n[0] / L->n[1]};
  for (int u = 0; u < n; u++) {
    const long long base = at[0] + L->sy * at[1] + L->sz * at[2];
    double *row[CORNERS];
    unsigned mk[CORNERS];
    for (int q = 0; q < corners; q++) {
      const long long a = base + L->corner[q], ahead = a + AHEAD;
      const int in = a >= a0 && a < a1;
      mk[q] = in ? L->mask[a] : 0;
      row[q] = vals + (in ? rowptr[a] : 0);
      if (ahead < a1) __builtin_prefetch(vals + rowptr[ahead], 1);
    }
    const double *Kc = K + (size_t)u * L->per * kn;
    if (L->nb == 4) cube_add(L, 4, row, mk, Kc, kn);
    else if (L->nb == 8) cube_add(L, 8, row, mk, Kc, kn);
    else cube_add(L, L->nb, row, mk, Kc, kn);
    if (++at[0] == L->n[0]) { /* the next cube: along x, then y, then z */
      at[0] = 0;
      if (++at[1] == L->n[1]) at[1] = 0, at[2]++;
    }
  }
}

int lattice_fill(const pattern *P, const int *rowptr, int *cols, double *vals,
                 const host_fill *F, int *launches, long long *made)
{
  const struct pattern_lattice *L = P->lattice;
  const int nn = P->V->nnodes;
  int rc = 0, nl = 0;
  long long nm = 0;
#pragma omp parallel reduction(max : rc) reduction(+ : nl, nm)
  {
    int a0 = 0, a1 = 0;
    prefix_share(rowptr, nn, omp_get_thread_num(), omp_get_num_threads(), &a0, &a1);
    fill_scratch x = {0};
    const int nu = F->batch / L->per > 1 ? F->batch / L->per : 1; /* whole cubes a launch */
    const int B = nu * L->per;
    double *K = malloc(sizeof(double) * (size_t)B * F->kn);
    rc = (x.ids = malloc(sizeof(int) * (size_t)B)) && K ? 0 : FE_ERR_MEM;
    for (int s = 0; !rc && s < B; s++) x.ids[s] = s;
    if (!rc && a1 > a0) {
      rows_write(P, rowptr, cols, vals, a0, a1);
      /* the cubes with a corner in [a0, a1): their least vertex within a cube's span below */
      const long long span = 1 + L->sy + (L->dim == 3 ? L->sz : 0);
      const long long first = cube_from(L, a0 - span), end = cube_from(L, a1);
      for (long long u0 = first; !rc && u0 < end; u0 += nu) {
        const int n = (int)(end - u0 < nu ? end - u0 : nu);
        rc = host_fill_cells(F, (int)(u0 * L->per), n * L->per, &x, K, (size_t)B);
        if (!rc) cubes_add(P, rowptr, vals, K, F->kn, u0, n, a0, a1);
      }
    }
    nl += x.launches;
    nm += x.made;
    free(x.ids);
    free(K);
  }
  FE_ASSERT(rc != FE_ERR_MEM, FE_ERR_MEM, "out of host memory for the lattice's fill");
  FE_CHECK(rc); /* a launch's error (set by the backend) */
  *launches = nl;
  if (made) *made = nm;
  return 0;
}
