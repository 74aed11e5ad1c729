/* felab spaces: the three numberings of the nodes (by the entities they lie on, by a box's
 * lattice, through a hash map of their names).
 *
 * The dof map. Every node of the element carries integer weights on the cell's vertices
 * (engine/fem/element.h); the vertices of nonzero weight span the vertex, edge or face the node
 * lies on, and the pairs (global vertex id, weight), sorted by vertex id, name the node
 * whatever the cell's local orientation: two cells that share an edge or a face give its
 * nodes the same names. Vertex nodes keep the vertex ids; interior nodes belong to one cell
 * and need no name. The cells' edges and faces are matched by their sorted vertex ids among
 * the cells around their least vertex (on every thread), and within one, a node's name fixes
 * which node it is; a hash map of the names does the same one cell after another where that
 * cannot. On a box of hexes or quads as mesh.box lays it out (checked cell by cell) nothing
 * needs matching: the same ids come from the cells' indices and the nodes' lattice points. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/keymap.h"
#include "engine/fem/space-private.h"

/* One entity's first place, as the grouping around a vertex keeps it. */
typedef struct entity_place {
  int c, e;            /* cell, entity */
  int key[KEY_PAIRS];  /* global vertex ids ascending (entity_key) */
} entity_place;

/* The state number_nodes_entities' phases share: the mesh and element's sizes, the entities'
 * tables, the counting sort of the cells' vertices (around, start, count), each place's order
 * (order), and the threads' counts (firsts, sums). */
typedef struct entity_numbering {
  fe_space *V;
  const fe_mesh *m;
  const entity_nodes *t;
  int nb, nv, ne;
  size_t nc, nvx, ncv;
  int team_max, parts; /* threads at most; the counting sort's parts */
  int degree, team;    /* the most cells around a vertex; threads */
  uint32_t *around;
  int *start, *count;
  unsigned char *order;
  size_t *firsts, *sums;
} entity_numbering;

/* The entities of el's shared nodes into *t: 0, -1 with an error set, or -2 where the element
 * does not fit the tables. */
static int shared_entities(const fe_element *el, entity_nodes **t)
{
  const int nb = el->nbasis, nv = el->nvertices;
  node_names *names = node_names_make(el);
  if (!names) {
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
  unsigned char shared_node[FE_MAX_BASIS];
  for (int b = 0; b < nb; b++)
    shared_node[b] = b >= nv && names->count[b] < nv && names->count[b] <= KEY_PAIRS;
  *t = entity_nodes_make(el, names, shared_node);
  free(names);
  return *t ? 0 : -2;
}

/* The counting sort's memory; -1 where there is none (all freed). */
static int alloc_around(entity_numbering *N)
{
  const size_t nc = N->nc, nvx = N->nvx, ncv = N->ncv;
  const int ne = N->ne;
  /* the counting sort's parts, each with a count a vertex: no more counts than cell vertices
   * (a Q3 hex has 8 a vertex), however many threads */
  const int team_max = N->team_max = omp_get_max_threads();
  const size_t fit = ncv / (nvx ? nvx : 1);
  N->parts = fit < 1 ? 1 : fit < (size_t)team_max ? (int)fit : team_max;
  /* the cells' vertices c << 3 | v (local v; c < 2^29: nc * nb < 2^31 and nb > 4), by vertex */
  N->around = fe_alloc(sizeof(uint32_t) * (ncv + 1));
  N->start = malloc(sizeof(int) * (nvx + 1)); /* vertex v's: around[start[v] .. start[v + 1]) */
  N->count = malloc(sizeof(int) * ((size_t)N->parts * nvx + 1));
  N->order = fe_alloc(nc * (size_t)ne + 1); /* the order of a place's vertex ids */
  N->firsts = calloc((size_t)team_max + 1, sizeof(size_t));
  N->sums = calloc((size_t)team_max + 1, sizeof(size_t));
  if (!N->around || !N->start || !N->count || !N->order || !N->firsts || !N->sums) {
    free(N->around), free(N->start), free(N->count), free(N->order), free(N->firsts), free(N->sums);
    return -1;
  }
  return 0;
}

/* The counting sort's counts: each part's cells' vertices, a count a vertex. */
static void count_around(entity_numbering *N)
{
  const fe_mesh *m = N->m;
  const size_t nc = N->nc, nvx = N->nvx;
  const int nv = N->nv, parts = N->parts;
  int *count = N->count;
#pragma omp parallel for schedule(static, 1)
  for (int p = 0; p < parts; p++) {
    int *n = count + (size_t)p * nvx;
    memset(n, 0, sizeof(int) * nvx);
    for (size_t i = nc * (size_t)p / (size_t)parts * nv; i < nc * (size_t)(p + 1) / (size_t)parts * nv; i++)
      n[m->cells[i]]++;
  }
}

/* The counts into offsets (start: each vertex's; count: each part's at each vertex), the most
 * cells around a vertex (degree) and the threads (team). */
static void offsets_around(entity_numbering *N)
{
  const size_t nvx = N->nvx, ncv = N->ncv;
  const int parts = N->parts;
  int *count = N->count, *start = N->start;
  size_t *sums = N->sums;
  int degree = 0, team = 1;
#pragma omp parallel reduction(max : degree)
  {
    const int th = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    const size_t v0 = nvx * (size_t)th / (size_t)team, v1 = nvx * (size_t)(th + 1) / (size_t)team;
    size_t sum = 0;
    for (size_t v = v0; v < v1; v++) {
      int d = 0;
      for (int p = 0; p < parts; p++) d += count[(size_t)p * nvx + v];
      sum += (size_t)d;
      degree = d > degree ? d : degree;
    }
    sums[th + 1] = sum;
#pragma omp barrier
#pragma omp single
    for (int u = 0; u < team; u++) sums[u + 1] += sums[u];
    /* each part's cells after the earlier parts' at every vertex: the cells stay ascending */
    sum = sums[th];
    for (size_t v = v0; v < v1; v++) {
      start[v] = (int)sum;
      for (int p = 0; p < parts; p++) {
        const int k = count[(size_t)p * nvx + v];
        count[(size_t)p * nvx + v] = (int)sum;
        sum += (size_t)k;
      }
    }
  }
  start[nvx] = (int)ncv;
  N->degree = degree, N->team = team;
}

/* The cells' vertices c << 3 | v into around, vertex by vertex. */
static void fill_around(entity_numbering *N)
{
  const fe_mesh *m = N->m;
  const size_t nc = N->nc, nvx = N->nvx;
  const int nv = N->nv, parts = N->parts;
  int *count = N->count;
  uint32_t *around = N->around;
#pragma omp parallel for schedule(static, 1)
  for (int p = 0; p < parts; p++) {
    int *at = count + (size_t)p * nvx;
    for (size_t c = nc * (size_t)p / (size_t)parts; c < nc * (size_t)(p + 1) / (size_t)parts; c++)
      for (int v = 0; v < nv; v++) around[at[m->cells[c * nv + (size_t)v]]++] = (uint32_t)(c << 3 | (size_t)v);
  }
}

/* Every place of an entity grouped around its least vertex: a first place's first node 0 in
 * cell_nodes, a later one's -1 - its first place; each place's order. -1 where there is no
 * memory. */
static int group_places(entity_numbering *N)
{
  const fe_mesh *m = N->m;
  const entity_nodes *t = N->t;
  const size_t nvx = N->nvx;
  const int nb = N->nb, nv = N->nv, ne = N->ne, degree = N->degree, team_max = N->team_max;
  const uint32_t *around = N->around;
  const int *start = N->start;
  unsigned char *order = N->order;
  int *dof = N->V->cell_nodes;
  /* the entities whose least vertex is v, at most ne in each of its cells, on each thread */
  const size_t cap = (size_t)degree * (size_t)ne + 1;
  entity_place *first = malloc(sizeof *first * cap * (size_t)team_max);
  if (!first) return -1;
#pragma omp parallel
  {
    entity_place *met = first + cap * (size_t)omp_get_thread_num();
#pragma omp for schedule(dynamic, 256)
    for (size_t v = 0; v < nvx; v++) {
      int groups = 0;
      for (int i = start[v]; i < start[v + 1]; i++) {
        const int c = (int)(around[i] >> 3), lv = (int)(around[i] & 7);
        const int *verts = m->cells + (size_t)c * nv;
        /* the places of an entity are met around its least vertex, at the first of its local
         * vertices of that id (a cell that repeats a vertex lists it twice there): the
         * entities through lv with none of the cell's vertices before v */
        unsigned less = 0;
        for (int u = 0; u < nv; u++)
          less |= (unsigned)((verts[u] < (int)v) | ((verts[u] == (int)v) & (u < lv))) << u;
        for (uint32_t here = t->here[lv][less]; here; here &= here - 1) {
          const int e = __builtin_ctz(here);
          entity_place *p = met + groups, *g = met;
          p->c = c, p->e = e;
          order[(size_t)c * ne + (size_t)e] = (unsigned char)entity_key(t, verts, e, p->key);
          while (g < p && (g->key[0] != p->key[0] || g->key[1] != p->key[1] ||
                           g->key[2] != p->key[2] || g->key[3] != p->key[3] ||
                           t->k[g->e] != t->k[e]))
            g++;
          int *slot = dof + (size_t)c * nb + (size_t)t->node[t->first[e]];
          if (g == p) { /* a first place */
            *slot = 0;
            groups++;
          } else {
            *slot = -1 - (g->c * ne + g->e);
          }
        }
      }
    }
  }
  free(first);
  return 0;
}

/* Ids: the first places in place order, after the vertices; each node placed once, at its
 * first place. The new nodes of each thread's cells (firsts, summed: each thread's first
 * id) and the threads (team); returns the number of first places' nodes. */
static size_t count_first_places(entity_numbering *N)
{
  const entity_nodes *t = N->t;
  const size_t nc = N->nc;
  const int nb = N->nb, ne = N->ne;
  const int *dof = N->V->cell_nodes;
  size_t *firsts = N->firsts;
  int team = N->team;
  int nint = 0; /* interior nodes a cell */
  for (int b = 0; b < nb; b++) nint += t->entity[b] == -1;
#pragma omp parallel
  {
    int th = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    size_t lo = nc * (size_t)th / (size_t)team, hi = nc * (size_t)(th + 1) / (size_t)team, k = 0;
    for (size_t c = lo; c < hi; c++) {
      k += (size_t)nint;
      for (int e = 0; e < ne; e++)
        if (dof[c * nb + (size_t)t->node[t->first[e]]] >= 0) k += (size_t)t->k[e];
    }
    firsts[th + 1] = k;
  }
  for (int u = 0; u < team; u++) firsts[u + 1] += firsts[u];
  N->team = team;
  return firsts[team];
}

/* The first places numbered and placed, each thread's cells from its first id, and the
 * vertices' places copied. */
static void number_first_places(entity_numbering *N, const straight_map *s, int failed)
{
  fe_space *V = N->V;
  const fe_mesh *m = N->m;
  const entity_nodes *t = N->t;
  const size_t nc = N->nc, nvx = N->nvx;
  const int nb = N->nb, nv = N->nv, ne = N->ne, team = N->team;
  const size_t *firsts = N->firsts;
  int *dof = V->cell_nodes;
  /* the same `team` parts (whatever threads run them): first places numbered and placed */
#pragma omp parallel for schedule(static, 1) if (!failed)
  for (int th = 0; th < (failed ? 0 : team); th++) {
    size_t lo = nc * (size_t)th / (size_t)team, hi = nc * (size_t)(th + 1) / (size_t)team;
    double *xn = V->node_coords;
    size_t id = nvx + firsts[th];
    for (size_t c = lo; c < hi; c++) {
      unsigned char later[MAX_ENTITIES]; /* read before the ids write over them */
      for (int e = 0; e < ne; e++) later[e] = dof[c * nb + (size_t)t->node[t->first[e]]] < 0;
      double X[FE_MAX_VERTICES][3]; /* read once for the cell's new nodes */
      cell_vertices(V, c, X);
      for (int b = 0; b < nb; b++) {
        const size_t p = c * nb + (size_t)b;
        const int e = t->entity[b];
        if (e == -2) {
          dof[p] = m->cells[c * nv + (size_t)b];
          continue;
        }
        if (e >= 0 && later[e]) continue;
        node_place(V, c, b, s, (const double (*)[3])X, xn + 3 * id);
        dof[p] = (int)id++;
      }
    }
    size_t v0 = nvx * (size_t)th / (size_t)team, v1 = nvx * (size_t)(th + 1) / (size_t)team;
    memcpy(xn + 3 * v0, m->coords + 3 * v0, sizeof(double) * 3 * (v1 - v0));
  }
}

/* Every later place's nodes from those of the same name at the entity's first place; returns
 * whether two names differ (the entities do not fit the mesh). */
static int copy_later_places(entity_numbering *N, int failed)
{
  const entity_nodes *t = N->t;
  const size_t nc = N->nc;
  const int nb = N->nb, ne = N->ne;
  const unsigned char *order = N->order;
  int *dof = N->V->cell_nodes;
  int differ = 0;
  /* every later place: the node of the same name at the entity's first place (numbered) */
#pragma omp parallel for schedule(static) reduction(| : differ) if (!failed)
  for (size_t c = 0; c < (failed ? 0 : nc); c++)
    for (int e = 0; e < ne; e++) {
      const int mark = dof[c * nb + (size_t)t->node[t->first[e]]];
      if (mark >= 0) continue;
      const size_t q = c * ne + (size_t)e, r = (size_t)(-1 - mark);
      const int f = (int)(r % ne), k = t->k[e];
      const size_t a = r / ne;
      const int *rank = t->rank + t->table[e] + order[q] * k;
      const int *at = t->at + t->table[f] + order[r] * k;
      const uint64_t *name = t->name + t->table[e] + order[q] * k;
      const uint64_t *name_at = t->name + t->table[f] + order[r] * k;
      for (int i = 0; i < k; i++) {
        const int j = at[rank[i]];
        differ |= name[i] != name_at[j];
        dof[c * nb + (size_t)t->node[t->first[e] + i]] = dof[a * nb + (size_t)t->node[t->first[f] + j]];
      }
    }
  return differ;
}

/* The numbering build_dof_map's hash map gives (vertices keep their ids; every other node,
 * in the order of its first (cell, node) place, the next id), made on every thread from the
 * entities the shared nodes lie on (a Q3 hex: 18 a cell, not its 48 shared nodes). The places
 * of an entity are found around its least vertex: a counting sort of the cells' vertices
 * lists the cells around each vertex in ascending order, and so the places of the entities
 * whose least vertex it is in place order; comparing their vertex ids with those of the
 * entities met so far there (a hex vertex is the least of at most 6) groups them, the first
 * of each group its first place. No hash, no sort of the places, and one vertex's places are
 * read together while its cells are in the cache. A later place keeps its first place, as
 * -1 - place, in the entity's first node of cell_nodes until the numbering writes over it:
 * a prefix sum over the cells' new nodes numbers the first places, and a node at a later place
 * copies the id of the node of the same name at the first place (rank and at, no search).
 * Fills cell_nodes, and node_coords at each node's first place (s: build_dof_map's
 * tabulation). Returns the number of nodes, -1 with an error set, or -2 where the element or
 * the mesh does not fit (entities of the same vertices whose nodes' names differ: the hashed
 * numbering then, which names each node). */
long long number_nodes_entities(fe_space *V, const straight_map *s)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nv = el->nvertices;
  const size_t nc = (size_t)m->ncells, nvx = (size_t)m->nvertices, ncv = nc * (size_t)nv;
  entity_nodes *t;
  const int rc = shared_entities(el, &t);
  if (rc) return rc;
  entity_numbering N = {.V = V, .m = m, .t = t, .nb = el->nbasis, .nv = nv, .ne = t->n,
                        .nc = nc, .nvx = nvx, .ncv = ncv, .degree = 0, .team = 1};
  if (alloc_around(&N)) {
    entity_nodes_free(t);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
  count_around(&N);
  offsets_around(&N);
  fill_around(&N);
  free(N.count), free(N.sums);
  if (group_places(&N)) {
    free(N.around), free(N.start), free(N.order), free(N.firsts), entity_nodes_free(t);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
  free(N.around), free(N.start);
  const size_t nfirst = count_first_places(&N);
  /* allocated here, on this thread: inside the team glibc may open an arena for another */
  V->node_coords = fe_alloc(sizeof(double) * (3 * (nvx + nfirst) + 1));
  const int failed = !V->node_coords;
  number_first_places(&N, s, failed);
  const int differ = copy_later_places(&N, failed);
  free(N.firsts), free(N.order), entity_nodes_free(t);
  if (failed) {
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for the node coordinates");
    return -1;
  }
  if (differ) {
    free(V->node_coords);
    V->node_coords = NULL;
    return -2;
  }
  return (long long)nvx + (long long)nfirst;
}

/* The same numbering on a box of hexes (quads) as mesh.box makes it, where nothing needs to
 * be matched: cube (i, j, k) is cell i + nx (j + ny k) and its corner (bx, by, bz) is vertex
 * (i + bx) + (nx + 1) ((j + by) + (ny + 1) (k + bz)), checked cell by cell (any other layout:
 * -2, and the entities number it). A node at lattice point (a, b, c) of {0..p}^3 is shared
 * with the cells below it along each axis where its coordinate is 0 (and above where it is p);
 * the cell index grows along every axis, so its first place is the cell one step lower along
 * each axis where it is 0 and the cell is not the first, at the lattice point shifted by p
 * there. A cell's new nodes, in element order, are those shifted nowhere: their count and
 * ranks depend only on which of i, j, k are 0 (8 types), and the cells before a cell hold a
 * closed-form count of them. No search, no temporaries: each node's id from tables, each new
 * node placed once (entities' figures: the same ids and places, to the bit). */
/* The new nodes of a box's cells by type t = (i > 0) | (j > 0) << 1 | (k > 0) << 2 (count),
 * of a row of cells by the types of j and k (row), of a layer by that of k (layer). */
typedef struct lattice_counts {
  long long count[8], row[4], layer[2];
} lattice_counts;

/* The new nodes of the cells before cell (i, j, k). */
static inline long long lattice_before(const lattice_counts *n, long long i, long long j, long long k)
{
  const int tk = (k > 0) << 1, t = (j > 0) << 1 | (k > 0) << 2;
  return (k > 0) * (n->layer[0] + (k - 1) * n->layer[1]) +
         (j > 0) * (n->row[tk] + (j - 1) * n->row[tk | 1]) +
         (i > 0) * (n->count[t] + (i - 1) * n->count[t | 1]);
}

long long number_nodes_lattice(fe_space *V, const straight_map *s)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices, p = el->order, dim = el->dim;
  if ((el->cell != FE_CELL_HEX && el->cell != FE_CELL_QUAD) || !el->lex || !el->lattice ||
      m->dim != dim || m->cubes[0] <= 0 || m->cubes[1] <= 0 || (dim == 3 && m->cubes[2] <= 0))
    return -2;
  const long long nx = m->cubes[0], ny = m->cubes[1], nz = dim == 3 ? m->cubes[2] : 1;
  const long long vx = nx + 1, vy = ny + 1;
  if ((long long)m->ncells != nx * ny * nz || (long long)m->nvertices != vx * vy * (dim == 3 ? nz + 1 : 1))
    return -2;
  /* a node's lattice point, the axes where it is 0 (low), each vertex's corner */
  unsigned char low[FE_MAX_BASIS];
  int corner[FE_MAX_VERTICES];
  for (int b = 0; b < nb; b++) {
    const int *l = el->lattice + 3 * b;
    low[b] = 0;
    for (int d = 0; d < dim; d++) low[b] |= (unsigned char)((l[d] == 0) << d);
    if (b >= nv) continue;
    corner[b] = 0;
    for (int d = 0; d < dim; d++) {
      if (l[d] != 0 && l[d] != p) return -2;
      corner[b] += (l[d] == p) * (int)(d == 0 ? 1 : d == 1 ? vx : vx * vy);
    }
  }
  int mismatch = 0;
#pragma omp parallel for schedule(static) reduction(| : mismatch)
  for (long long c = 0; c < nx * ny * nz; c++) {
    const long long i = c % nx, j = c / nx % ny, k = c / nx / ny;
    const long long base = i + vx * (j + vy * k);
    for (int v = 0; v < nv; v++) mismatch |= m->cells[c * nv + v] != base + corner[v];
  }
  if (mismatch) return -2;
  /* type t = (i > 0) | (j > 0) << 1 | (k > 0) << 2: node b (not a vertex) is new in such a
   * cell when (low[b] & t) == 0; rank[t][b] its place among the cell's new nodes */
  int (*rank)[FE_MAX_BASIS] = malloc(sizeof *rank * 8);
  if (!rank) FE_ERROR(FE_ERR_MEM, "out of host memory for a dof map");
  lattice_counts n;
  for (int t = 0; t < 8; t++) {
    n.count[t] = 0;
    for (int b = nv; b < nb; b++) rank[t][b] = (low[b] & t) ? -1 : (int)n.count[t]++;
  }
  for (int jk = 0; jk < 4; jk++) n.row[jk] = n.count[jk << 1] + (nx - 1) * n.count[jk << 1 | 1];
  for (int kk = 0; kk < 2; kk++) n.layer[kk] = n.row[kk << 1] + (ny - 1) * n.row[kk << 1 | 1];
  const long long total = n.layer[0] + (nz - 1) * n.layer[1];
  const size_t nvx = (size_t)m->nvertices;
  if ((long long)nvx + total > (long long)1 << 30) {
    free(rank);
    FE_ERROR(FE_ERR_ARG, "space %s: more than 2^30 nodes", V->name);
  }
  V->node_coords = fe_alloc(sizeof(double) * (3 * (nvx + (size_t)total) + 1));
  if (!V->node_coords) {
    free(rank);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the node coordinates");
  }
  const int q = p + 1;
  int *dof = V->cell_nodes;
  double *xn = V->node_coords;
#pragma omp parallel for schedule(static)
  for (long long c = 0; c < nx * ny * nz; c++) {
    const long long i = c % nx, j = c / nx % ny, k = c / nx / ny;
    const int t = (i > 0) | (j > 0) << 1 | (k > 0) << 2;
    const long long before = lattice_before(&n, i, j, k);
    double X[FE_MAX_VERTICES][3];
    cell_vertices(V, (size_t)c, X);
    int *d = dof + (size_t)c * nb;
    for (int b = 0; b < nv; b++) d[b] = m->cells[c * nv + b];
    for (int b = nv; b < nb; b++) {
      const int shift = low[b] & t;
      if (!shift) { /* new here */
        const size_t id = nvx + (size_t)(before + rank[t][b]);
        node_place(V, (size_t)c, b, s, (const double (*)[3])X, xn + 3 * id);
        d[b] = (int)id;
        continue;
      }
      /* its first place: one cell lower along each shifted axis, the point p higher there */
      const int *l = el->lattice + 3 * b;
      const long long i2 = i - (shift & 1), j2 = j - (shift >> 1 & 1), k2 = k - (shift >> 2 & 1);
      const int a = l[0] + p * (shift & 1), e = l[1] + p * (shift >> 1 & 1),
                f = dim == 3 ? l[2] + p * (shift >> 2 & 1) : 0;
      const int b2 = el->lex[a + q * (e + q * f)];
      const int t2 = (i2 > 0) | (j2 > 0) << 1 | (k2 > 0) << 2;
      d[b] = (int)(nvx + (size_t)(lattice_before(&n, i2, j2, k2) + rank[t2][b2]));
    }
  }
  memcpy(xn, m->coords, sizeof(double) * 3 * nvx);
  free(rank);
  return (long long)nvx + total;
}

/* Number every node: vertices keep their ids, shared edge and face nodes are named by their
 * keys, interior nodes are new. Fills cell_nodes, nnodes and node_coords. */
/* The same numbering, one cell after another through a hash map of the names: for spaces of
 * more places than a 32-bit position names (number_nodes_entities packs them). Returns the
 * number of nodes, or -1 with an error set. */
long long number_nodes_hashed(fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const size_t nc = (size_t)m->ncells;
  /* keys as long as the largest entity that shares nodes needs (2 pairs for edges) */
  int shared = 0, pairs = 1, key[2 * KEY_PAIRS];
  const int local[FE_MAX_VERTICES] = {0, 1, 2, 3, 4, 5, 6, 7};
  node_names *table = node_names_make(el);
  if (!table) {
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
  for (int b = nv; b < nb; b++) {
    int k = node_key_of(table, local, b, key);
    if (k < nv && k > pairs) pairs = k;
    shared += k < nv;
  }
  fe_keymap names;
  if (fe_keymap_init_local(&names, 2 * pairs, nc * shared / 4 + 16, m->nvertices)) {
    free(table);
    return -1;
  }
  size_t nnodes = (size_t)m->nvertices;
  int rc = 0;
  for (size_t c = 0; c < nc && !rc; c++) {
    if ((c & 65535) == 0 && (rc = fe_interrupt_check())) break;
    const int *verts = m->cells + c * nv;
    int *dof = V->cell_nodes + c * nb;
    for (int b = 0; b < nv; b++) dof[b] = verts[b];
    for (int b = nv; b < nb && !rc; b++) {
      if (nnodes >= (size_t)1 << 30) {
        rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                          "space %s: more than 2^30 nodes", V->name);
        break;
      }
      if (node_key_of(table, verts, b, key) == nv) { /* interior: this cell's own */
        dof[b] = (int)nnodes++;
        continue;
      }
      int inserted;
      rc = fe_keymap_put(&names, key, (int)nnodes, &dof[b], &inserted);
      nnodes += inserted;
    }
  }
  fe_keymap_free(&names);
  free(table);
  return rc ? -1 : (long long)nnodes;
}

/* The nodes of a numbering whose vertices keep their ids renumbered in blocks of
 * INTERLEAVE_BLOCK vertices: a block's vertices, then the nodes whose edge, face or cell has
 * its least vertex among them (by that vertex, then as numbered). A row of an assembled matrix
 * then reads x in one window about its node, not in two (the vertices', the rest's), while a
 * GPU's warp of rows still holds rows of one kind (a P2 vertex's 65 entries, an edge's 13-27).
 * csr's rows of a P2 box of tets (the AMD EPYC VM, one thread): vertices first 15.5-17.9 ns a
 * row, every node after its own vertex 12.6-13.0, blocks of 32 13.1-13.4; on the H200 every
 * node after its vertex had made the product 5% slower and Jacobi-PCG 17% (its rows' kinds
 * mixed in every warp). Returns 0, or -1 with an error set. */
enum { INTERLEAVE_BLOCK = 32 };

/* Node i's bucket: its vertex's block, then the vertices before the rest. */
static size_t interleave_bucket(const int *anchor, size_t i, size_t nvx)
{
  return 2 * ((size_t)anchor[i] / INTERLEAVE_BLOCK) + (i >= nvx);
}

int number_nodes_interleave(fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const size_t nc = (size_t)m->ncells, nvx = (size_t)m->nvertices, nn = (size_t)V->nnodes;
  const size_t nbuckets = 2 * ((nvx + INTERLEAVE_BLOCK - 1) / INTERLEAVE_BLOCK);
  int *anchor = malloc(sizeof(int) * (nn + 1)), *order = malloc(sizeof(int) * (nn + 1));
  int *to = malloc(sizeof(int) * (nn + 1));
  int *start = calloc((nvx > nbuckets ? nvx : nbuckets) + 2, sizeof(int));
  double *xn = fe_alloc(sizeof(double) * (3 * nn + 1));
  if (!anchor || !order || !to || !start || !xn) {
    free(anchor), free(order), free(to), free(start), free(xn);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                 "out of host memory for the dof map's order (%zu nodes)", nn);
    return -1;
  }
  for (size_t i = 0; i < nn; i++) anchor[i] = i < nvx ? (int)i : -1;
  /* each place of a node names the same vertices (the entity's), so any one sets it */
  for (size_t c = 0; c < nc; c++) {
    const int *verts = m->cells + c * nv, *dof = V->cell_nodes + c * nb;
    for (int b = nv; b < nb; b++) {
      int a = INT_MAX;
      for (int v = 0; v < nv; v++)
        if (el->weights[b * nv + v] != 0 && verts[v] < a) a = verts[v];
      anchor[dof[b]] = a;
    }
  }
  /* the nodes by their vertex, then id (counting sorts, each keeping the order before it) */
  for (size_t i = 0; i < nn; i++) start[anchor[i] + 1]++;
  for (size_t v = 0; v < nvx; v++) start[v + 1] += start[v];
  for (size_t i = 0; i < nn; i++) order[start[anchor[i]]++] = (int)i;
  /* then into the buckets, in that order */
  memset(start, 0, sizeof(int) * (nbuckets + 2));
  for (size_t i = 0; i < nn; i++) start[interleave_bucket(anchor, i, nvx) + 1]++;
  for (size_t k = 0; k < nbuckets; k++) start[k + 1] += start[k];
  for (size_t j = 0; j < nn; j++) to[order[j]] = start[interleave_bucket(anchor, (size_t)order[j], nvx)]++;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < nn; i++)
    memcpy(xn + 3 * (size_t)to[i], V->node_coords + 3 * i, sizeof(double) * 3);
#pragma omp parallel for schedule(static)
  for (size_t p = 0; p < nc * nb; p++) V->cell_nodes[p] = to[V->cell_nodes[p]];
  free(V->node_coords);
  V->node_coords = xn;
  free(anchor), free(order), free(to), free(start);
  return 0;
}
