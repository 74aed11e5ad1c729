/* A mesh's cells into parts: a box by its lattice of cubes, any mesh by METIS's dual-graph
 * partitioner (where built) or by recursive coordinate bisection (RCB) of the cells' centres;
 * then what each part holds: its cells, its vertices, those it shares with other parts (the
 * interface a rank exchanges), its neighbouring parts, and the faces cut. */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/parallel/partition.h"

#ifdef FE_HAVE_METIS
#include <metis.h>
#endif

static const char *const method_names[] = {"auto", "lattice", "metis", "rcb"};

const char *fe_partition_method_name(int method)
{
  return method >= 0 && method <= FE_PART_RCB ? method_names[method] : "?";
}

int fe_partition_method_parse(const char *name, int *method)
{
  for (int k = 0; k <= FE_PART_RCB; k++)
    if (!strcmp(name, method_names[k])) {
      *method = k;
      return 0;
    }
  FE_ERROR(FE_ERR_ARG, "partition: method '%s' is not one of auto, lattice, metis, rcb", name);
}

/* ---- the lattice ---- */

/* The blocks px x py x pz = nparts of a box of n[0] x n[1] x n[2] cubes that cut the fewest
 * faces (each block at least a cube a side; even: every block the same, each side dividing
 * the box's); 0 if none fits. */
static int lattice_blocks(const int *n, int nparts, int even, int *p)
{
  double best = -1;
  for (int a = 1; a <= nparts; a++) {
    if (nparts % a || a > n[0] || (even && n[0] % a)) continue;
    for (int b = 1; b <= nparts / a; b++) {
      if ((nparts / a) % b || b > n[1] || (even && n[1] % b)) continue;
      int c = nparts / a / b;
      if (c > n[2] || (even && n[2] % c)) continue;
      double cut = (double)(a - 1) * n[1] * n[2] + (double)(b - 1) * n[0] * n[2] +
                   (double)(c - 1) * n[0] * n[1];
      if (best < 0 || cut < best) best = cut, p[0] = a, p[1] = b, p[2] = c;
    }
  }
  return best >= 0;
}

/* Cells made cube by cube, x fastest (m->cubes): cube (i, j, k) to block (i px / nx, ...). */
static int by_lattice(const fe_mesh *m, int nparts, int *part)
{
  int n[3] = {m->cubes[0], m->cubes[1], m->dim == 3 ? m->cubes[2] : 1}, p[3];
  long long cubes = (long long)n[0] * n[1] * n[2];
  FE_ASSERT(n[0] > 0 && n[1] > 0 && n[2] > 0 && m->ncells % cubes == 0, FE_ERR_ARG,
            "partition: method 'lattice' needs a box of mesh.box (this mesh has no lattice of "
            "cubes, or was edited): use 'metis' or 'rcb'");
  FE_ASSERT(lattice_blocks(n, nparts, 1, p) || lattice_blocks(n, nparts, 0, p), FE_ERR_ARG, "partition: %d parts do not split the "
            "box's %d x %d x %d cubes into blocks (a block at least a cube a side): use 'metis' "
            "or 'rcb'", nparts, n[0], n[1], n[2]);
  const int per = (int)(m->ncells / cubes);
  /* a cube's cells are consecutive (mesh.box's order): its block once, for all of them */
#pragma omp parallel for schedule(static)
  for (long long q = 0; q < cubes; q++) {
    int i = (int)(q % n[0]), j = (int)(q / n[0] % n[1]), k = (int)(q / n[0] / n[1]);
    int bi = (int)((long long)i * p[0] / n[0]), bj = (int)((long long)j * p[1] / n[1]),
        bk = (int)((long long)k * p[2] / n[2]);
    for (int t = 0; t < per; t++) part[q * per + t] = bi + p[0] * (bj + p[1] * bk);
  }
  return 0;
}

/* ---- recursive coordinate bisection ---- */

typedef struct rcb_key {
  double x;
  int cell;
} rcb_key;

static int rcb_cmp(const void *a, const void *b)
{
  const rcb_key *p = a, *q = b;
  return p->x < q->x ? -1 : p->x > q->x ? 1 : p->cell - q->cell;
}

/* cells[0 .. n) (their centres at ctr) into parts first .. first + k - 1: cut across the
 * longest extent, k / 2 parts' share of the cells to one side. */
static void rcb(const double *ctr, rcb_key *key, int *cells, int n, int first, int k, int *part)
{
  if (k == 1) {
    for (int i = 0; i < n; i++) part[cells[i]] = first;
    return;
  }
  double lo[3], hi[3];
  for (int d = 0; d < 3; d++) lo[d] = hi[d] = ctr[3 * (size_t)cells[0] + d];
  for (int i = 1; i < n; i++)
    for (int d = 0; d < 3; d++) {
      double x = ctr[3 * (size_t)cells[i] + d];
      lo[d] = x < lo[d] ? x : lo[d];
      hi[d] = x > hi[d] ? x : hi[d];
    }
  int axis = 0;
  for (int d = 1; d < 3; d++)
    if (hi[d] - lo[d] > hi[axis] - lo[axis]) axis = d;
  for (int i = 0; i < n; i++) key[i] = (rcb_key){ctr[3 * (size_t)cells[i] + axis], cells[i]};
  qsort(key, (size_t)n, sizeof *key, rcb_cmp);
  for (int i = 0; i < n; i++) cells[i] = key[i].cell;
  const int k1 = k / 2, n1 = (int)((long long)n * k1 / k);
  rcb(ctr, key, cells, n1, first, k1, part);
  rcb(ctr, key, cells + n1, n - n1, first + k1, k - k1, part);
}

static int by_rcb(const fe_mesh *m, int nparts, int *part)
{
  double *ctr;
  rcb_key *key;
  int *cells;
  FE_MALLOC(ctr, 3 * (size_t)m->ncells, "partition: the cells' centres");
  key = malloc(sizeof *key * (size_t)m->ncells);
  cells = malloc(sizeof *cells * (size_t)m->ncells);
  if (!key || !cells) {
    free(ctr), free(key), free(cells);
    FE_ERROR(FE_ERR_MEM, "partition: out of memory for %d cells' keys", m->ncells);
  }
  for (int c = 0; c < m->ncells; c++) {
    double s[3] = {0, 0, 0};
    for (int v = 0; v < m->nvc; v++)
      for (int d = 0; d < 3; d++) s[d] += m->coords[3 * (size_t)m->cells[(size_t)c * m->nvc + v] + d];
    for (int d = 0; d < 3; d++) ctr[3 * (size_t)c + d] = s[d] / m->nvc;
    cells[c] = c;
  }
  rcb(ctr, key, cells, m->ncells, 0, nparts, part);
  free(ctr), free(key), free(cells);
  return 0;
}

/* ---- METIS ---- */

static int by_metis(const fe_mesh *m, int nparts, int *part)
{
#ifdef FE_HAVE_METIS
  idx_t ne = m->ncells, nn = m->nvertices, np = nparts, objval = 0;
  /* cells joined when they share a face: its vertices (an edge in 2D) */
  static const idx_t common[] = {2, 2, 3, 4, 3}; /* tri quad tet hex prism */
  idx_t nc = common[m->type], options[METIS_NOPTIONS];
  idx_t *eptr = malloc(sizeof(idx_t) * ((size_t)ne + 1)), *npart = malloc(sizeof(idx_t) * (size_t)nn);
  idx_t *epart = malloc(sizeof(idx_t) * (size_t)ne);
  if (!eptr || !npart || !epart) {
    free(eptr), free(npart), free(epart);
    FE_ERROR(FE_ERR_MEM, "partition: out of memory for METIS's arrays");
  }
  for (idx_t c = 0; c <= ne; c++) eptr[c] = c * m->nvc;
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = 1; /* the same parts every run */
  int rc = METIS_PartMeshDual(&ne, &nn, eptr, (idx_t *)m->cells, NULL, NULL, &nc, &np, NULL,
                              options, &objval, epart, npart);
  for (int c = 0; rc == METIS_OK && c < m->ncells; c++) part[c] = (int)epart[c];
  free(eptr), free(npart), free(epart);
  FE_ASSERT(rc == METIS_OK, FE_ERR_ARG, "partition: METIS failed (status %d) on %d cells into "
            "%d parts", rc, m->ncells, nparts);
  return 0;
#else
  (void)m, (void)nparts, (void)part;
  FE_ERROR(FE_ERR_UNAVAILABLE, "partition: felab was built without METIS (Debian's "
           "libmetis-dev): use 'rcb' or, for a box, 'lattice'");
#endif
}

/* ---- what each part holds ---- */

/* Each cell type's faces (an edge in 2D): local vertices, -1 past a triangle's three. */
static const int faces_tri[3][4] = {{0, 1, -1, -1}, {1, 2, -1, -1}, {2, 0, -1, -1}};
static const int faces_quad[4][4] = {{0, 1, -1, -1}, {1, 2, -1, -1}, {2, 3, -1, -1}, {3, 0, -1, -1}};
static const int faces_tet[4][4] = {{0, 1, 2, -1}, {0, 1, 3, -1}, {0, 2, 3, -1}, {1, 2, 3, -1}};
static const int faces_hex[6][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 5, 4},
                                    {1, 2, 6, 5}, {2, 3, 7, 6}, {3, 0, 4, 7}};
static const int faces_prism[5][4] = {{0, 1, 2, -1}, {3, 4, 5, -1}, {0, 1, 4, 3},
                                      {1, 2, 5, 4}, {2, 0, 3, 5}};

typedef struct face_key {
  int v[4]; /* sorted, -1 last */
  int part;
} face_key;

static int face_cmp(const void *a, const void *b)
{
  const face_key *p = a, *q = b;
  for (int i = 0; i < 4; i++)
    if (p->v[i] != q->v[i]) return (p->v[i] > q->v[i]) - (p->v[i] < q->v[i]);
  return 0;
}

/* Faces whose two cells lie in different parts: among the faces all of whose vertices are on
 * the interface (only those can be cut), sorted by their vertices. */
static int count_cut(const fe_mesh *m, const int *part, const unsigned char *shared,
                     long long *cut)
{
  static const int nf[] = {3, 4, 4, 6, 5};
  const int(*faces)[4] = m->type == FE_CELL_TRI ? faces_tri : m->type == FE_CELL_QUAD ? faces_quad
                         : m->type == FE_CELL_TET ? faces_tet : m->type == FE_CELL_HEX ? faces_hex
                                                                                       : faces_prism;
  size_t n = 0, cap = 1024;
  face_key *k = malloc(sizeof *k * cap);
  FE_ASSERT(k, FE_ERR_MEM, "partition: out of memory for the faces");
  for (int c = 0; c < m->ncells; c++)
    for (int f = 0; f < nf[m->type]; f++) {
      face_key e = {{-1, -1, -1, -1}, part[c]};
      int ok = 1, len = 0;
      for (int i = 0; ok && i < 4 && faces[f][i] >= 0; i++) {
        int v = m->cells[(size_t)c * m->nvc + faces[f][i]];
        ok = shared[v];
        int j = len++; /* insertion: the vertices sorted */
        while (j > 0 && e.v[j - 1] > v) e.v[j] = e.v[j - 1], j--;
        e.v[j] = v;
      }
      if (!ok) continue;
      if (n == cap) {
        face_key *g = realloc(k, sizeof *k * (cap *= 2));
        if (!g) free(k);
        FE_ASSERT(g, FE_ERR_MEM, "partition: out of memory for the faces");
        k = g;
      }
      k[n++] = e;
    }
  qsort(k, n, sizeof *k, face_cmp);
  *cut = 0;
  for (size_t i = 0; i + 1 < n; i++)
    if (!face_cmp(&k[i], &k[i + 1])) *cut += k[i].part != k[i + 1].part, i++;
  free(k);
  return 0;
}

static int pair_cmp(const void *a, const void *b)
{
  const long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* Item i's part where the cells seen so far hold it: part p's cell seen, after one[i] (-1: no
 * cell yet; -2: several parts). Threads meet at an item: a compare-and-swap. */
static void item_seen(int *one, int i, int p)
{
  int cur = __atomic_load_n(&one[i], __ATOMIC_RELAXED);
  while (cur != p && cur != -2) {
    const int next = cur == -1 ? p : -2;
    if (__atomic_compare_exchange_n(&one[i], &cur, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      break;
  }
}

int fe_item_parts(const int *items, int k, int ncells, int n, const int *part, int np, int **one,
                  long long **pairs, size_t *npairs)
{
  *one = NULL, *pairs = NULL, *npairs = 0;
  enum { CHUNKS = 1024 }; /* the cells in chunks, counted then filled (the pairs in cell order;
                          * a chunk without any, most of a mesh, not read again) */
  int *o = malloc(sizeof(int) * ((size_t)n + 1));
  size_t *at = calloc(CHUNKS + 1, sizeof(size_t));
  if (!o || !at) free(o), free(at);
  FE_ASSERT(o && at, FE_ERR_MEM, "out of memory for %d items' parts", n);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; i++) o[i] = -1;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < ncells; c++)
    for (int j = 0; j < k; j++) item_seen(o, items[(size_t)c * k + j], part[c]);
  /* the (item, part) pairs of the items several parts hold, with repeats */
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++) {
    const int c1 = (int)((long long)ncells * (q + 1) / CHUNKS);
    for (int c = (int)((long long)ncells * q / CHUNKS); c < c1; c++)
      for (int j = 0; j < k; j++) at[q + 1] += o[items[(size_t)c * k + j]] == -2;
  }
  for (int q = 0; q < CHUNKS; q++) at[q + 1] += at[q];
  const size_t u = at[CHUNKS];
  long long *p = malloc(sizeof(long long) * (u + 1));
  if (!p) free(o), free(at);
  FE_ASSERT(p, FE_ERR_MEM, "out of memory for the interface's %zu (item, part) pairs", u);
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++) {
    const int c1 = (int)((long long)ncells * (q + 1) / CHUNKS);
    size_t w = at[q];
    for (int c = (int)((long long)ncells * q / CHUNKS); w < at[q + 1] && c < c1; c++)
      for (int j = 0; j < k; j++) {
        const int i = items[(size_t)c * k + j];
        if (o[i] == -2) p[w++] = (long long)i * np + part[c];
      }
  }
  free(at);
  qsort(p, u, sizeof *p, pair_cmp);
  size_t w = 0;
  for (size_t i = 0; i < u; i++)
    if (!i || p[i] != p[i - 1]) p[w++] = p[i];
  *one = o, *pairs = p, *npairs = w;
  return 0;
}

/* Each part's cells, vertices, interface vertices and neighbours; the shared vertices and
 * the cut faces. */
static int tally(const fe_mesh *m, fe_partition *p)
{
  const int nv = m->nvertices, np = p->nparts;
  for (int c = 0; c < m->ncells; c++) p->cells[p->part[c]]++;
  int *one;
  long long *vp;
  size_t u;
  FE_CHECK(fe_item_parts(m->cells, m->nvc, m->ncells, nv, p->part, np, &one, &vp, &u));
  unsigned char *shared = calloc((size_t)nv + 1, 1);
  size_t nbcap = 1; /* the (part, part) pairs: k (k - 1) at a vertex of k parts */
  for (size_t i = 0, j; i < u; i = j) {
    for (j = i; j < u && vp[j] / np == vp[i] / np; j++) continue;
    nbcap += (j - i) * (j - i - 1);
  }
  long long *nb = malloc(sizeof(long long) * nbcap);
  if (!nb || !shared) free(vp), free(one), free(nb), free(shared);
  FE_ASSERT(nb && shared, FE_ERR_MEM, "partition: out of memory for the neighbours");
  for (int v = 0; v < nv; v++) {
    if (one[v] >= 0) p->vertices[one[v]]++;
    shared[v] = one[v] == -2;
  }
  size_t nnb = 0;
  for (size_t i = 0, j; i < u; i = j) { /* vertex vp[i] / np: its parts vp[i .. j) */
    for (j = i; j < u && vp[j] / np == vp[i] / np; j++) continue;
    for (size_t a = i; a < j; a++) {
      int pa = (int)(vp[a] % np);
      p->vertices[pa]++;
      p->interface[pa]++;
      for (size_t b = i; b < j; b++)
        if (b != a) nb[nnb++] = (long long)pa * np + vp[b] % np;
    }
    p->ninterface++;
  }
  qsort(nb, nnb, sizeof *nb, pair_cmp);
  for (size_t i = 0; i < nnb; i++)
    if (!i || nb[i] != nb[i - 1]) p->neighbours[nb[i] / np]++;
  free(vp), free(nb), free(one);
  int rc = count_cut(m, p->part, shared, &p->cut);
  free(shared);
  return rc;
}

void fe_partition_free(fe_partition *p)
{
  if (!p) return;
  free(p->part), free(p->cells), free(p->vertices), free(p->interface), free(p->neighbours);
  free(p);
}

/* fe_mesh_partition, with the parts' vertices, interface, neighbours and cut faces counted
 * (tally) or not (only the cells a part: what a split needs) */
static int partition(const fe_mesh *m, int nparts, int method, int counts, fe_partition **out)
{
  *out = NULL;
  FE_ASSERT(m && m->ncells > 0, FE_ERR_ARG, "partition: an empty mesh");
  FE_ASSERT(nparts >= 1 && nparts <= m->ncells, FE_ERR_ARG, "partition: %d parts of %d cells "
            "(1 to the cells' number)", nparts, m->ncells);
  FE_ASSERT(method >= FE_PART_AUTO && method <= FE_PART_RCB, FE_ERR_ARG, "partition: method %d",
            method);
  if (method == FE_PART_AUTO) {
    int n[3] = {m->cubes[0], m->cubes[1], m->dim == 3 ? m->cubes[2] : 1}, b[3];
    long long cubes = (long long)n[0] * n[1] * n[2];
    if (cubes > 0 && m->ncells % cubes == 0 && lattice_blocks(n, nparts, 1, b))
      method = FE_PART_LATTICE; /* equal blocks; else a partitioner balances better */
    else {
#ifdef FE_HAVE_METIS
      method = FE_PART_METIS;
#else
      method = FE_PART_RCB;
#endif
    }
  }
  fe_partition *p;
  FE_CALLOC(p, 1, "a partition");
  *p = (fe_partition){.nparts = nparts, .method = method, .ncells = m->ncells};
  p->part = malloc(sizeof(int) * ((size_t)m->ncells + 1));
  p->cells = calloc((size_t)nparts, sizeof(int));
  p->vertices = calloc((size_t)nparts, sizeof(int));
  p->interface = calloc((size_t)nparts, sizeof(int));
  p->neighbours = calloc((size_t)nparts, sizeof(int));
  int rc = p->part && p->cells && p->vertices && p->interface && p->neighbours ? 0 :
           fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "partition: out of memory");
  if (!rc && (nparts == 1 || method != FE_PART_LATTICE)) /* the lattice sets every cell's */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < m->ncells; c++) p->part[c] = 0;
  if (!rc && nparts > 1)
    rc = method == FE_PART_LATTICE ? by_lattice(m, nparts, p->part)
         : method == FE_PART_METIS ? by_metis(m, nparts, p->part) : by_rcb(m, nparts, p->part);
  if (!rc && counts) rc = tally(m, p);
  if (!rc && !counts && nparts <= 4096) { /* each thread's tally of the parts, then their sum */
    int *cells = p->cells;
#pragma omp parallel for schedule(static) reduction(+ : cells[:nparts])
    for (int c = 0; c < m->ncells; c++) cells[p->part[c]]++;
  } else
    for (int c = 0; !rc && !counts && c < m->ncells; c++) p->cells[p->part[c]]++;
  for (int k = 0; !rc && k < nparts; k++)
    if (!p->cells[k])
      rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "partition: %s left part %d "
                        "of %d empty (%d cells)", fe_partition_method_name(method), k, nparts,
                        m->ncells);
  if (rc) {
    fe_partition_free(p);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = p;
  return 0;
}

int fe_mesh_partition(const fe_mesh *m, int nparts, int method, fe_partition **out)
{
  return partition(m, nparts, method, 1, out);
}

int fe_mesh_partition_cells(const fe_mesh *m, int nparts, int method, fe_partition **out)
{
  return partition(m, nparts, method, 0, out);
}
