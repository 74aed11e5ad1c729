/* felab spaces.
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
 * needs matching: the same ids come from the cells' indices and the nodes' lattice points.
 *
 * Boundary nodes of a set of tags: the vertices, edges and faces of the tagged facets go
 * into a set, and a node is on the boundary when the entity it lies on is in the set (one
 * look-up an entity of a cell); on a box numbered by its lattice, each facet is one side of
 * one cube, whose nodes are marked.
 *
 * Node coordinates are the geometry map at the node's reference point: the first-order map
 * of the vertices for straight cells, the second-order map for curved ones. */
#include "engine/fem/space.h"

#include <ctype.h>
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"
#include "engine/core/keymap.h"
#include "engine/fem/quadrature.h"

#define KEY_PAIRS 4 /* an edge or face node names at most the 4 vertices of a quad face */

int fe_space_parse_name(const char *name, char *family, int *order)
{
  char *end;
  if (!name || (name[0] != 'P' && name[0] != 'Q') || !isdigit((unsigned char)name[1]))
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\"..\"P7\" on tri/tet/prism, \"Q1\".."
             "\"Q9\" on quad/hex)", name ? name : "(null)");
  long o = strtol(name + 1, &end, 10);
  if (*end || o < 1 || o > 99)
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\"..\"P7\" on tri/tet/prism, \"Q1\".."
             "\"Q9\" on quad/hex)", name);
  *family = name[0];
  *order = (int)o;
  return 0;
}

/* What names a node, read from the element once: node b's vertices of nonzero weight (local
 * numbers) and those weights, the same in every cell; count[b] > KEY_PAIRS for the cell's
 * interior. */
typedef struct node_names {
  int nv;
  int count[FE_MAX_BASIS];
  unsigned char vert[FE_MAX_BASIS][KEY_PAIRS];
  int weight[FE_MAX_BASIS][KEY_PAIRS];
} node_names;

static node_names *node_names_make(const fe_element *el)
{
  node_names *t = fe_alloc(sizeof *t);
  if (!t) return NULL;
  t->nv = el->nvertices;
  for (int b = 0; b < el->nbasis; b++) {
    int n = 0;
    for (int v = 0; v < el->nvertices; v++) {
      int w = el->weights[b * el->nvertices + v];
      if (!w) continue;
      if (n < KEY_PAIRS) t->vert[b][n] = (unsigned char)v, t->weight[b][n] = w;
      n++;
    }
    t->count[b] = n;
  }
  return t;
}

/* The sorted (vertex, weight) name of node b of the cell of vertices verts into
 * key[2 * KEY_PAIRS] (padded with -1); returns the number of vertices of nonzero weight, or
 * nv for the cell's interior (more than a face's). */
static inline int node_key_of(const node_names *t, const int *verts, int b, int *key)
{
  const int n = t->count[b];
  if (n > KEY_PAIRS) return t->nv;
  for (int i = 0; i < n; i++) {
    int g = verts[t->vert[b][i]], w = t->weight[b][i], j = i;
    while (j > 0 && key[2 * (j - 1)] > g) { /* insertion by global vertex id */
      key[2 * j] = key[2 * (j - 1)];
      key[2 * j + 1] = key[2 * (j - 1) + 1];
      j--;
    }
    key[2 * j] = g;
    key[2 * j + 1] = w;
  }
  for (int i = n; i < KEY_PAIRS; i++) key[2 * i] = key[2 * i + 1] = -1;
  return n;
}

/* The first-order map at the element's nodes, tabulated once with its zero terms left out:
 * node b of a straight cell sits at the sum of l[b][j] X[v[b][j]] over j < n[b], the vertices
 * ascending. A node on a hex's edge has 2 terms of 8, on a face 4. A left-out term is a
 * product with a zero weight, which adds nothing to the sum (the sum starts at +0 and never is
 * -0), so the places are those of the full sums to the bit. */
typedef struct straight_map {
  int n[FE_MAX_BASIS];
  unsigned char v[FE_MAX_BASIS][FE_MAX_VERTICES];
  double l[FE_MAX_BASIS][FE_MAX_VERTICES];
} straight_map;

static straight_map *straight_map_make(const fe_space *V)
{
  const fe_element *el = &V->elem;
  const int nv = el->nvertices;
  straight_map *s = malloc(sizeof *s);
  if (!s) return NULL;
  for (int b = 0; b < el->nbasis; b++) {
    double l[FE_MAX_VERTICES];
    fe_element_eval(&V->lin, el->nodes + 3 * b, l, NULL);
    s->n[b] = 0;
    for (int v = 0; v < nv; v++)
      if (l[v] != 0) s->v[b][s->n[b]] = (unsigned char)v, s->l[b][s->n[b]++] = l[v];
  }
  return s;
}

/* Node b of a straight cell of vertices X; sums in registers (through an array on the stack
 * the loop ran 3x slower). */
static inline void straight_place(const straight_map *s, int b, const double (*X)[3], double *x)
{
  double y0 = 0, y1 = 0, y2 = 0;
  for (int j = 0; j < s->n[b]; j++) {
    const double l = s->l[b][j], *p = X[s->v[b][j]];
    y0 += l * p[0], y1 += l * p[1], y2 += l * p[2];
  }
  x[0] = y0, x[1] = y1, x[2] = y2;
}

/* Cell c's vertices into X (straight cells; the curved map reads its own nodes). */
static inline void cell_vertices(const fe_space *V, size_t c, double (*X)[3])
{
  const fe_mesh *m = V->mesh;
  const int nv = V->elem.nvertices;
  for (int v = 0; v < nv && !V->curved; v++)
    memcpy(X[v], m->coords + 3 * (size_t)m->cells[c * nv + (size_t)v], sizeof X[v]);
}

/* The physical place of node b of cell c (its vertices X, from cell_vertices): the first-order
 * map at the node (straight cells) or the curved map. */
static inline void node_place(const fe_space *V, size_t c, int b, const straight_map *s,
                              const double (*X)[3], double *x)
{
  if (V->curved) fe_space_cell_map(V, (int)c, V->elem.nodes + 3 * b, x, NULL);
  else straight_place(s, b, X, x);
}

void fe_space_cell_map(const fe_space *V, int c, const double *xi, double x[3], double *J)
{
  const fe_mesh *m = V->mesh;
  if (V->curved) {
    fe_mesh_geo_map(m, c, xi, x, J);
    return;
  }
  const fe_element *g = &V->lin;
  const int dim = g->dim, nv = g->nbasis;
  double phi[FE_MAX_VERTICES], dphi[FE_MAX_VERTICES * 3];
  fe_element_eval(g, xi, phi, dphi);
  x[0] = x[1] = x[2] = 0;
  if (J)
    for (int k = 0; k < dim * dim; k++) J[k] = 0;
  for (int b = 0; b < nv; b++) {
    const double *X = m->coords + 3 * (size_t)m->cells[(size_t)c * m->nvc + b];
    for (int d = 0; d < 3; d++) x[d] += phi[b] * X[d];
    if (J)
      for (int d = 0; d < dim; d++)
        for (int i = 0; i < dim; i++) J[d * dim + i] += X[d] * dphi[b * dim + i];
  }
}

/* The shared nodes by the entity they lie on, read from the element once. An entity is a set
 * of the cell's vertices (an edge's 2, a face's 3 or 4) that some shared node has as its
 * vertices of nonzero weight; its nodes are named, in a cell whose global vertex ids order
 * the entity's vertices by `p` (one of m! orders), by their weights in that order: two cells
 * that share the entity see the same global order and so the same names. rank and at say
 * where each name falls among the entity's, so that a node's copy in another cell is found
 * without comparing names. */
enum { MAX_ENTITIES = 32, MAX_ORDERS = 24, ORDER_BITS = KEY_PAIRS * (KEY_PAIRS - 1) / 2 };

typedef struct entity_nodes {
  int n;                                        /* entities */
  int m[MAX_ENTITIES], k[MAX_ENTITIES];         /* vertices, nodes */
  unsigned char vert[MAX_ENTITIES][KEY_PAIRS];  /* local vertices, ascending */
  int first[MAX_ENTITIES + 1];                  /* entity e's nodes: node[first[e] .. first[e + 1]) */
  int table[MAX_ENTITIES + 1];                  /* its tables: from table[e], k per order */
  int entity[FE_MAX_BASIS];                     /* node b's entity; -1 interior, -2 a vertex */
  int node[FE_MAX_BASIS];                       /* element node numbers, entity by entity */
  /* the entities through local vertex v none of whose vertices is in the set `less` (a mask
   * of local vertices): here[v][less], a mask of entities */
  uint32_t here[FE_MAX_VERTICES][1 << FE_MAX_VERTICES];
  /* an entity's order from the comparisons of its vertex ids (entity_key's pattern): the
   * order's index among those of m vertices */
  unsigned char order_of[KEY_PAIRS + 1][1 << ORDER_BITS];
  int *rank, *at;     /* rank[table[e] + p * k + i]: node i's place in the order p; at: inverse */
  uint64_t *name;     /* node i's weights in the order p, packed 16 bits each */
} entity_nodes;

/* The index of the order ord (a permutation of 0..m-1: its Lehmer code). */
static int order_index(const int *ord, int m)
{
  int idx = 0;
  for (int j = 0; j < m; j++) {
    int c = 0;
    for (int l = j + 1; l < m; l++) c += ord[l] < ord[j];
    idx = idx * (m - j) + c;
  }
  return idx;
}

_Static_assert(KEY_PAIRS == 4, "order_pattern and entity_key's sorting network take 4 ids");

/* The comparisons g[j] > g[l] of KEY_PAIRS values, one bit a pair j < l. */
static inline unsigned order_pattern(const int *g)
{
  return (unsigned)(g[0] > g[1]) | (unsigned)(g[0] > g[2]) << 1 | (unsigned)(g[0] > g[3]) << 2 |
         (unsigned)(g[1] > g[2]) << 3 | (unsigned)(g[1] > g[3]) << 4 | (unsigned)(g[2] > g[3]) << 5;
}

static void entity_nodes_free(entity_nodes *t)
{
  if (!t) return;
  free(t->rank), free(t->at), free(t->name), free(t);
}

/* The entities of el's shared nodes and their tables; NULL where there is no memory or the
 * element's names do not fit them (more entities than the tables hold, weights past 16 bits,
 * two nodes of one name): the callers then name node by node. */
static entity_nodes *entity_nodes_make(const fe_element *el, const node_names *names,
                                       const unsigned char *shared_node)
{
  const int nb = el->nbasis, nv = el->nvertices;
  entity_nodes *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  unsigned mask[MAX_ENTITIES];
  for (int b = 0; b < nb; b++) {
    t->entity[b] = b < nv ? -2 : -1;
    if (!shared_node[b]) continue;
    unsigned mb = 0;
    for (int j = 0; j < names->count[b]; j++) mb |= 1u << names->vert[b][j];
    int e = 0;
    while (e < t->n && mask[e] != mb) e++;
    if (e == t->n) {
      if (t->n == MAX_ENTITIES) {
        entity_nodes_free(t);
        return NULL;
      }
      mask[e] = mb;
      t->m[e] = 0;
      for (int v = 0; v < nv; v++)
        if (mb >> v & 1) t->vert[e][t->m[e]++] = (unsigned char)v;
      t->n++;
    }
    t->entity[b] = e;
    t->k[e]++;
  }
  for (int e = 0, at = 0; e < t->n; e++) { /* nodes entity by entity, in element order */
    t->first[e] = at;
    for (int b = 0; b < nb; b++)
      if (t->entity[b] == e) t->node[at++] = b;
    t->first[e + 1] = at;
  }
  for (int v = 0; v < nv; v++)
    for (unsigned less = 0; less < 1u << nv; less++)
      for (int e = 0; e < t->n; e++)
        if ((mask[e] >> v & 1) && !(mask[e] & less)) t->here[v][less] |= 1u << e;
  /* every order of KEY_PAIRS values (ord[i]: the i-th smallest) by its comparisons; an order
   * of m < KEY_PAIRS vertices is one that leaves the padding (the largest values) last */
  for (int code = 0; code < 1 << 2 * KEY_PAIRS; code++) {
    int ord[KEY_PAIRS], rank[KEY_PAIRS];
    unsigned seen = 0;
    for (int j = 0; j < KEY_PAIRS; j++) ord[j] = code >> 2 * j & 3, seen |= 1u << ord[j];
    if (seen != (1u << KEY_PAIRS) - 1) continue;
    for (int j = 0; j < KEY_PAIRS; j++) rank[ord[j]] = j;
    const unsigned pattern = order_pattern(rank);
    int fixed = KEY_PAIRS; /* ord[j] == j from fixed on */
    while (fixed > 0 && ord[fixed - 1] == fixed - 1) fixed--;
    for (int m = fixed > 1 ? fixed : 1; m <= KEY_PAIRS; m++)
      t->order_of[m][pattern] = (unsigned char)order_index(ord, m);
  }
  int total = 0;
  for (int e = 0; e < t->n; e++) {
    int orders = 1;
    for (int j = 2; j <= t->m[e]; j++) orders *= j;
    t->table[e] = total;
    total += orders * t->k[e];
  }
  t->table[t->n] = total;
  t->rank = malloc(sizeof(int) * (size_t)(total + 1));
  t->at = malloc(sizeof(int) * (size_t)(total + 1));
  t->name = malloc(sizeof(uint64_t) * (size_t)(total + 1));
  if (!t->rank || !t->at || !t->name) {
    entity_nodes_free(t);
    return NULL;
  }
  for (int e = 0; e < t->n; e++) {
    const int m = t->m[e], k = t->k[e];
    int ord[KEY_PAIRS];
    for (int code = 0; code < (1 << 2 * m); code++) { /* every m-tuple of 0..m-1 ... */
      unsigned seen = 0;
      for (int j = 0; j < m; j++) ord[j] = code >> 2 * j & 3, seen |= 1u << ord[j];
      if (seen != (1u << m) - 1) continue; /* ... that is an order */
      const int base = t->table[e] + order_index(ord, m) * k;
      for (int i = 0; i < k; i++) {
        const int b = t->node[t->first[e] + i];
        uint64_t name = 0;
        for (int j = 0; j < m; j++) {
          const int w = el->weights[b * nv + t->vert[e][ord[j]]];
          if (w < 0 || w > 65535) {
            entity_nodes_free(t);
            return NULL;
          }
          name = name << 16 | (uint64_t)w;
        }
        t->name[base + i] = name;
      }
      for (int i = 0; i < k; i++) {
        int r = 0;
        for (int l = 0; l < k; l++) {
          if (l != i && t->name[base + l] == t->name[base + i]) {
            entity_nodes_free(t);
            return NULL;
          }
          r += t->name[base + l] < t->name[base + i];
        }
        t->rank[base + i] = r;
        t->at[base + r] = i;
      }
    }
  }
  return t;
}

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int max_int(int a, int b) { return a < b ? b : a; }

/* Entity e of the cell of vertices verts: its global vertex ids ascending into key
 * (KEY_PAIRS, padded with -1), and the index of their order. No branches on the ids (a
 * sort's branches on ids in no order mispredict): the ids padded with INT_MAX, no id, go
 * through a sorting network of minima and maxima, and their order comes from a table of their
 * comparisons, the pattern of the order followed by the padding (equal ids, a cell that
 * repeats a vertex, keep their local order). */
static inline int entity_key(const entity_nodes *t, const int *verts, int e, int *key)
{
  const int m = t->m[e];
  int g[KEY_PAIRS];
  for (int j = 0; j < KEY_PAIRS; j++) { /* vert[e][j] is 0 past m */
    const int x = verts[t->vert[e][j]];
    g[j] = j < m ? x : INT_MAX;
  }
  const int a = min_int(g[0], g[1]), b = max_int(g[0], g[1]), c = min_int(g[2], g[3]),
            d = max_int(g[2], g[3]), low = max_int(a, c), high = min_int(b, d);
  const int sorted[KEY_PAIRS] = {min_int(a, c), min_int(low, high), max_int(low, high),
                                 max_int(b, d)};
  for (int j = 0; j < KEY_PAIRS; j++) key[j] = sorted[j] == INT_MAX ? -1 : sorted[j];
  return t->order_of[m][order_pattern(g)];
}

/* One entity's first place, as the grouping around a vertex keeps it. */
typedef struct entity_place {
  int c, e;            /* cell, entity */
  int key[KEY_PAIRS];  /* global vertex ids ascending (entity_key) */
} entity_place;

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
static long long number_nodes_entities(fe_space *V, const straight_map *s)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const size_t nc = (size_t)m->ncells, nvx = (size_t)m->nvertices, ncv = nc * (size_t)nv;
  node_names *names = node_names_make(el);
  if (!names) {
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
  unsigned char shared_node[FE_MAX_BASIS];
  for (int b = 0; b < nb; b++)
    shared_node[b] = b >= nv && names->count[b] < nv && names->count[b] <= KEY_PAIRS;
  entity_nodes *t = entity_nodes_make(el, names, shared_node);
  free(names);
  if (!t) return -2;
  const int ne = t->n;
  int *dof = V->cell_nodes;
  /* the counting sort's parts, each with a count a vertex: no more counts than cell vertices
   * (a Q3 hex has 8 a vertex), however many threads */
  const int team_max = omp_get_max_threads();
  const size_t fit = ncv / (nvx ? nvx : 1);
  const int parts = fit < 1 ? 1 : fit < (size_t)team_max ? (int)fit : team_max;
  /* the cells' vertices c << 3 | v (local v; c < 2^29: nc * nb < 2^31 and nb > 4), by vertex */
  uint32_t *around = fe_alloc(sizeof(uint32_t) * (ncv + 1));
  int *start = malloc(sizeof(int) * (nvx + 1)); /* vertex v's: around[start[v] .. start[v + 1]) */
  int *count = malloc(sizeof(int) * ((size_t)parts * nvx + 1));
  unsigned char *order = fe_alloc(nc * (size_t)ne + 1); /* the order of a place's vertex ids */
  size_t *firsts = calloc((size_t)team_max + 1, sizeof(size_t));
  size_t *sums = calloc((size_t)team_max + 1, sizeof(size_t));
  int degree = 0, team = 1; /* the most cells around a vertex; threads */
  if (!around || !start || !count || !order || !firsts || !sums) {
    free(around), free(start), free(count), free(order), free(firsts), free(sums);
    entity_nodes_free(t);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
#pragma omp parallel for schedule(static, 1)
  for (int p = 0; p < parts; p++) {
    int *n = count + (size_t)p * nvx;
    memset(n, 0, sizeof(int) * nvx);
    for (size_t i = nc * (size_t)p / (size_t)parts * nv; i < nc * (size_t)(p + 1) / (size_t)parts * nv; i++)
      n[m->cells[i]]++;
  }
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
#pragma omp parallel for schedule(static, 1)
  for (int p = 0; p < parts; p++) {
    int *at = count + (size_t)p * nvx;
    for (size_t c = nc * (size_t)p / (size_t)parts; c < nc * (size_t)(p + 1) / (size_t)parts; c++)
      for (int v = 0; v < nv; v++) around[at[m->cells[c * nv + (size_t)v]]++] = (uint32_t)(c << 3 | (size_t)v);
  }
  free(count), free(sums);
  /* the entities whose least vertex is v, at most ne in each of its cells, on each thread */
  const size_t cap = (size_t)degree * (size_t)ne + 1;
  entity_place *first = malloc(sizeof *first * cap * (size_t)team_max);
  if (!first) {
    free(around), free(start), free(order), free(firsts), entity_nodes_free(t);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for a dof map");
    return -1;
  }
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
  free(first), free(around), free(start);
  /* ids: the first places in place order, after the vertices; each node placed once, at its
   * first place */
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
  size_t nfirst = firsts[team];
  /* allocated here, on this thread: inside the team glibc may open an arena for another */
  V->node_coords = fe_alloc(sizeof(double) * (3 * (nvx + nfirst) + 1));
  int failed = !V->node_coords, differ = 0;
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
  free(firsts), free(order), entity_nodes_free(t);
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

static long long number_nodes_lattice(fe_space *V, const straight_map *s)
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
static long long number_nodes_hashed(fe_space *V)
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

/* The bytes of V's dof map, estimated before it is made: the cell map (nb ids a cell) and the
 * node coordinates, and beside them the numbering's temporaries (the entities': the cells'
 * vertices, a count a vertex a thread, an order byte an entity of a cell; the hashed
 * numbering's map of names, past 2^31 places; a box's lattice: none). The nodes are counted
 * as they would be numbered: the vertices, and each other node of a cell shared with the
 * cells around what it lies on: about 5 tets around an edge (6 edges a tet, and a tet mesh has
 * about 6 tets and 7 edges a vertex: 36 / 7), 4 hexes or prisms, 2 cells across a face (or a
 * 2D edge), 1 inside the cell. */
static size_t dof_map_bytes(const fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const double nc = m->ncells;
  double per_cell = 0, shared = 0; /* new nodes a cell; the part of them on edges and faces */
  for (int b = nv; b < nb; b++) {
    int k = 0;
    for (int v = 0; v < nv; v++) k += el->weights[b * nv + v] != 0;
    const double share = k == 2 && el->dim == 3 ? (el->cell == FE_CELL_TET ? 0.2 : 0.25)
                         : k < nv ? 0.5 : 1.0;
    per_cell += share;
    shared += share < 1 ? share : 0;
  }
  const double nodes = m->nvertices + nc * per_cell;
  double bytes = 4.0 * nc * nb + 24.0 * nodes;
  const int lattice = (el->cell == FE_CELL_HEX || el->cell == FE_CELL_QUAD) && m->cubes[0] > 0;
  static const double entities[] = {[FE_CELL_TRI] = 3, [FE_CELL_QUAD] = 4, [FE_CELL_TET] = 10,
                                    [FE_CELL_HEX] = 18, [FE_CELL_PRISM] = 14};
  if (nb > nv && !lattice)
    bytes += 4.0 * nc * nv + 4.0 * m->nvertices * (omp_get_max_threads() + 2) +
             entities[el->cell] * nc;
  if (nb > nv && nc * nb >= 2147483648.0) /* keys of up to 8 ints and a value, in a table at
                                           * most half full, the old one beside it as it grows */
    bytes += 1.5 * 4 * (nc * shared) * 9 * sizeof(int);
  return (size_t)bytes;
}

static int build_dof_map(fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const size_t nc = (size_t)m->ncells;
  FE_CHECK(fe_memory_check(dof_map_bytes(V), "fe.space: the dof map of %s on %d cells", V->name,
                           m->ncells));
  FE_MALLOC(V->cell_nodes, nc * nb + 1, "dof map");
  if (nb == nv) { /* P1, Q1: the nodes are the vertices; the map is the cells' own */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nc * nb; i++) V->cell_nodes[i] = m->cells[i];
    V->nnodes = m->nvertices;
    V->numbering = "vertices";
    FE_MALLOC(V->node_coords, 3 * (size_t)m->nvertices + 1, "node coordinates");
    memcpy(V->node_coords, m->coords, sizeof(double) * 3 * (size_t)m->nvertices);
    return 0;
  }
  /* straight cells: the first-order map at the element's nodes, tabulated once */
  straight_map *s = straight_map_make(V);
  if (!s) FE_ERROR(FE_ERR_MEM, "out of host memory for a tabulation");
  /* a box of hexes or quads by its lattice; else the entities' numbering, which packs a place
   * in 32 bits; FELAB_DOFMAP=entities or =hashed asks for those (tests compare the three) */
  const char *how = getenv("FELAB_DOFMAP");
  long long n = how && *how ? -2 : number_nodes_lattice(V, s);
  if (n != -2) {
    free(s);
    if (n < 0) return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
    V->numbering = "lattice";
    V->nnodes = (int)n;
    return 0;
  }
  int sorted = nc * nb < (size_t)1 << 31 && !(how && !strcmp(how, "hashed"));
  n = sorted ? number_nodes_entities(V, s) : -2;
  if (n == -2) { /* the element or the mesh does not fit the entities' tables */
    sorted = 0;
    n = number_nodes_hashed(V);
  }
  V->numbering = sorted ? "entities" : "hashed";
  if (n >= 0 && n <= (long long)1 << 30 && !sorted) {
    /* every cell places its nodes (shared ones more than once, with the same value) */
    V->node_coords = fe_alloc(sizeof(double) * (3 * (size_t)n + 1));
    if (V->node_coords) {
      memcpy(V->node_coords, m->coords, sizeof(double) * 3 * (size_t)m->nvertices);
#pragma omp parallel for schedule(static)
      for (size_t c = 0; c < nc; c++) {
        double X[FE_MAX_VERTICES][3];
        cell_vertices(V, c, X);
        for (int b = nv; b < nb; b++)
          node_place(V, c, b, s, (const double (*)[3])X,
                     V->node_coords + 3 * (size_t)V->cell_nodes[c * nb + b]);
      }
    }
  }
  free(s);
  if (n < 0) return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  if (n > (long long)1 << 30) FE_ERROR(FE_ERR_ARG, "space %s: more than 2^30 nodes", V->name);
  if (!V->node_coords) FE_ERROR(FE_ERR_MEM, "out of host memory for the node coordinates");
  V->nnodes = (int)n;
  return 0;
}

int fe_space_create_opts(const fe_mesh *m, const fe_space_opts *o, fe_space **out)
{
  int ncomp = o->ncomp ? o->ncomp : 1;
  FE_ASSERT(ncomp >= 1 && ncomp <= 3, FE_ERR_ARG,
            "space: %d components (1, 2 or 3 are supported)", ncomp);
  fe_space *V;
  FE_CALLOC(V, 1, "space");
  V->mesh = m;
  V->ncomp = ncomp;
  snprintf(V->name, sizeof V->name, "%c%d", o->family, o->order);
  int rc = fe_element_create(m->type, o->family, o->order, o->kind, &V->elem);
  if (!rc) rc = fe_element_linear(m->type, &V->lin);
  if (rc) {
    fe_space_free(V);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  V->curved = m->geo_order >= 2;
  V->affine = !V->curved && fe_mesh_affine(m);
  fe_progress_begin("fe.space", 0);
  fe_progress_watch(1);
  fe_progress_phase("the dof map");
  rc = build_dof_map(V);
  fe_progress_watch(0);
  fe_progress_end();
  if (rc) {
    fe_space_free(V);
    return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  }
  V->ndofs = V->nnodes * ncomp;
  *out = V;
  return 0;
}

int fe_space_create(const fe_mesh *m, const char *name, fe_space **out)
{
  fe_space_opts o = {.ncomp = 1, .kind = FE_NODES_GLL};
  FE_CHECK(fe_space_parse_name(name, &o.family, &o.order));
  return fe_space_create_opts(m, &o, out);
}

void fe_space_free(fe_space *V)
{
  if (!V) return;
  fe_element_free(&V->elem);
  fe_element_free(&V->lin);
  free(V->cell_nodes);
  free(V->node_coords);
  free(V);
}

/* The set of vertices, edges and faces (sorted vertex ids padded with -1) of the facets
 * carrying one of the tag ids (ids == NULL: every facet). */
static int facet_entities(const fe_mesh *m, const int *ids, int nids, fe_keymap *set,
                          unsigned char *vmark)
{
  if (set) FE_CHECK(fe_keymap_init(set, KEY_PAIRS, (size_t)m->nfacets * 8));
  int rc = 0;
  for (int f = 0; f < m->nfacets && !rc; f++) {
    int take = !ids;
    for (int t = 0; t < nids && !take; t++) take = m->facet_tags[f] == ids[t];
    if (!take) continue;
    int v[4], k = 0;
    for (int i = 0; i < m->nvf; i++) /* distinct vertices (prism triangles repeat one) */
      if (k == 0 || (m->facets[f * m->nvf + i] != v[k - 1] && m->facets[f * m->nvf + i] != v[0]))
        v[k++] = m->facets[f * m->nvf + i];
    for (int i = 0; i < k; i++) vmark[v[i]] = 1;
    if (!set) continue; /* the vertices are all a space of vertex nodes needs */
    int subsets[16][4], ns = 0; /* vertices, cyclic edges, the facet */
    for (int i = 0; i < k; i++) {
      subsets[ns][0] = v[i], subsets[ns++][1] = -1;
      if (k > 2 || i == 0) /* an edge facet has one edge */
        subsets[ns][0] = v[i], subsets[ns][1] = v[(i + 1) % k], subsets[ns++][2] = -1;
    }
    if (k >= 3) {
      for (int i = 0; i < k; i++) subsets[ns][i] = v[i];
      if (k < 4) subsets[ns][k] = -1;
      ns++;
    }
    for (int s = 0; s < ns && !rc; s++) {
      int key[KEY_PAIRS], n = 0, found, ins;
      while (n < KEY_PAIRS && subsets[s][n] >= 0) key[n] = subsets[s][n], n++;
      for (int i = 1; i < n; i++) /* sort */
        for (int j = i; j > 0 && key[j - 1] > key[j]; j--) {
          int t = key[j];
          key[j] = key[j - 1];
          key[j - 1] = t;
        }
      for (int i = n; i < KEY_PAIRS; i++) key[i] = -1;
      rc = fe_keymap_put(set, key, 0, &found, &ins);
    }
  }
  if (rc && set) fe_keymap_free(set);
  return rc;
}

/* The marked ones of nnodes nodes, ascending, into a new array. */
static int marked_nodes(const unsigned char *mark, int nnodes, int **nodes, int *n)
{
  int count = 0;
  for (int i = 0; i < nnodes; i++) count += mark[i];
  *nodes = fe_alloc(sizeof(int) * (size_t)count + 1);
  if (!*nodes) FE_ERROR(FE_ERR_MEM, "out of host memory for boundary nodes");
  *n = 0;
  for (int i = 0; i < nnodes; i++)
    if (mark[i]) (*nodes)[(*n)++] = i;
  return 0;
}

/* Nodes of V whose entity lies in the set, sorted and unique. */
static int nodes_in_set(const fe_space *V, const fe_keymap *set, const unsigned char *vmark,
                        int **nodes, int *n)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  unsigned char *mark = fe_zalloc((size_t)V->nnodes + 1, 1);
  node_names *names = node_names_make(el);
  if (!mark || !names) {
    free(mark), free(names);
    FE_ERROR(FE_ERR_MEM, "out of host memory for boundary marks");
  }
  unsigned char shared_node[FE_MAX_BASIS];
  for (int b = 0; b < nb; b++)
    shared_node[b] = b >= nv && names->count[b] < nv && names->count[b] <= KEY_PAIRS;
  entity_nodes *t = entity_nodes_make(el, names, shared_node);
  /* the cells on every thread: a node's mark is only ever set to 1. By entities where the
   * element has them (one look-up an edge or face, not one a node: Q3 24^3's operator
   * with every boundary node constrained 4.1 -> 1.5-1.9 ms), else node by node. */
#pragma omp parallel for schedule(dynamic, 256) if (t)
  for (size_t c = 0; c < (t ? (size_t)m->ncells : 0); c++) {
    const int *verts = m->cells + c * nv;
    int touches = 0;
    for (int v = 0; v < nv; v++) touches += vmark[verts[v]] != 0;
    if (!touches) continue;
    int *nodes = V->cell_nodes + c * nb;
    for (int v = 0; v < nv; v++)
      if (vmark[verts[v]]) {
#pragma omp atomic write
        mark[nodes[v]] = 1; /* a vertex node */
      }
    for (int e = 0; e < t->n; e++) {
      int all = 1, key[KEY_PAIRS];
      for (int j = 0; j < t->m[e] && all; j++) all = vmark[verts[t->vert[e][j]]];
      if (!all) continue;
      entity_key(t, verts, e, key);
      if (fe_keymap_find(set, key) < 0) continue;
      for (int i = t->first[e]; i < t->first[e + 1]; i++) {
#pragma omp atomic write
        mark[nodes[t->node[i]]] = 1;
      }
    }
  }
#pragma omp parallel for schedule(dynamic, 256) if (!t)
  for (size_t c = 0; c < (t ? 0 : (size_t)m->ncells); c++) {
    int touches = 0; /* cells without a vertex in the set have no node in it */
    for (int v = 0; v < nv && !touches; v++) touches = vmark[m->cells[c * nv + v]];
    for (int b = 0; b < nb && touches; b++) {
      int key[2 * KEY_PAIRS], ent[KEY_PAIRS];
      int node = V->cell_nodes[c * nb + b];
      unsigned char seen;
#pragma omp atomic read
      seen = mark[node];
      if (seen) continue;
      int k = node_key_of(names, m->cells + c * nv, b, key);
      if (k > KEY_PAIRS || k == nv) continue;
      for (int i = 0; i < KEY_PAIRS; i++) ent[i] = key[2 * i];
      if (fe_keymap_find(set, ent) >= 0) {
#pragma omp atomic write
        mark[node] = 1;
      }
    }
  }
  free(names);
  entity_nodes_free(t);
  int rc = marked_nodes(mark, V->nnodes, nodes, n);
  free(mark);
  return rc;
}

/* The boundary nodes of a space numbered by its lattice (a box of hexes or quads): each
 * tagged facet's cube and side from its vertices' lattice points, and the nodes of that side
 * of the cube's cell marked (no set, no look-up). -2 where a facet is not one side of one
 * cube (the caller then goes by entities). */
static int lattice_boundary_nodes(const fe_space *V, const int *ids, int nids, int **nodes, int *n)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, p = el->order, q = p + 1, dim = el->dim, nvf = m->nvf;
  const long long cubes[3] = {m->cubes[0], m->cubes[1], dim == 3 ? m->cubes[2] : 1};
  const long long vx = cubes[0] + 1, vy = cubes[1] + 1;
  if (nvf != (dim == 3 ? 4 : 2)) return -2;
  unsigned char *mark = fe_zalloc((size_t)V->nnodes + 1, 1);
  if (!mark) FE_ERROR(FE_ERR_MEM, "out of host memory for boundary marks");
  int misfit = 0;
#pragma omp parallel for schedule(static) reduction(| : misfit)
  for (int f = 0; f < m->nfacets; f++) {
    int take = !ids;
    for (int t = 0; t < nids && !take; t++) take = m->facet_tags[f] == ids[t];
    if (!take) continue;
    long long lo[3] = {LLONG_MAX, LLONG_MAX, LLONG_MAX}, hi[3] = {-1, -1, -1};
    for (int i = 0; i < nvf; i++) {
      const long long v = m->facets[(size_t)f * nvf + i];
      const long long at[3] = {v % vx, v / vx % vy, v / vx / vy};
      for (int d = 0; d < 3; d++) lo[d] = at[d] < lo[d] ? at[d] : lo[d], hi[d] = at[d] > hi[d] ? at[d] : hi[d];
    }
    int normal = -1, spans = 0; /* one axis fixed, the others one step */
    for (int d = 0; d < dim; d++) {
      if (hi[d] == lo[d] && normal < 0) normal = d;
      else spans += hi[d] == lo[d] + 1;
    }
    if (normal < 0 || spans != dim - 1 || (dim == 2 && lo[2] != 0)) {
      misfit = 1;
      continue;
    }
    long long cube[3] = {lo[0], lo[1], lo[2]};
    const int high = lo[normal] == cubes[normal]; /* the box's upper side: the cube below */
    cube[normal] -= high;
    const size_t c = (size_t)(cube[0] + cubes[0] * (cube[1] + cubes[1] * cube[2]));
    const int *d = V->cell_nodes + c * nb;
    const int side = high ? p : 0, other[2] = {normal == 0 ? 1 : 0, normal == 2 ? 1 : dim == 3 ? 2 : -1};
    for (int u = 0; u < q; u++)
      for (int w = 0; w < (other[1] >= 0 ? q : 1); w++) {
        int l[3] = {0, 0, 0};
        l[normal] = side, l[other[0]] = u;
        if (other[1] >= 0) l[other[1]] = w;
        const int node = d[el->lex[l[0] + q * (l[1] + q * l[2])]];
#pragma omp atomic write
        mark[node] = 1;
      }
  }
  int rc = misfit ? -2 : marked_nodes(mark, V->nnodes, nodes, n);
  free(mark);
  return rc;
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
  int all = ntags == 1 && !strcmp(tags[0], "all");
  int *ids = NULL;
  if (!all) {
    FE_MALLOC(ids, ntags, "tag ids");
    for (int t = 0; t < ntags; t++) {
      int rc = fe_mesh_tag_id(m, tags[t], m->dim - 1, &ids[t]);
      if (rc) {
        free(ids);
        return fe_error_push(rc, __FILE__, __LINE__, __func__);
      }
    }
  }
  if (!strcmp(V->numbering, "lattice")) {
    int rc = lattice_boundary_nodes(V, ids, all ? 0 : ntags, nodes, n);
    if (rc != -2) {
      free(ids);
      return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
    }
  }
  fe_keymap set;
  /* P1, Q1: every node is a vertex (and keeps its id), so the tagged facets' vertices are
   * the boundary nodes; no entity set */
  int vertex_nodes = !V->curved && V->elem.nbasis == V->elem.nvertices;
  unsigned char *vmark = fe_zalloc((size_t)m->nvertices + 1, 1);
  int rc = vmark ? facet_entities(m, ids, all ? 0 : ntags, vertex_nodes ? NULL : &set, vmark)
                 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  free(ids);
  if (!rc && vertex_nodes) {
    int count = 0;
    for (int v = 0; v < m->nvertices; v++) count += vmark[v];
    *nodes = fe_alloc(sizeof(int) * (size_t)count + 1);
    if (!*nodes)
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                        "out of host memory for boundary nodes");
    for (int v = 0; !rc && v < m->nvertices; v++)
      if (vmark[v]) (*nodes)[(*n)++] = v;
  } else if (!rc) {
    rc = nodes_in_set(V, &set, vmark, nodes, n);
    fe_keymap_free(&set);
  }
  free(vmark);
  return rc;
}

int fe_space_boundary_dofs(const fe_space *V, const char *const *tags, int ntags, int **dofs,
                           int *n)
{
  int *nodes, nn;
  FE_CHECK(fe_space_boundary_nodes(V, tags, ntags, &nodes, &nn));
  if (V->ncomp == 1) {
    *dofs = nodes;
    *n = nn;
    return 0;
  }
  *dofs = fe_alloc(sizeof(int) * (size_t)nn * V->ncomp + 1);
  if (!*dofs) {
    free(nodes);
    FE_ERROR(FE_ERR_MEM, "out of host memory for boundary dofs");
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < V->ncomp; k++) (*dofs)[i * V->ncomp + k] = nodes[i] * V->ncomp + k;
  *n = nn * V->ncomp;
  free(nodes);
  return 0;
}

int fe_space_interpolate(const fe_space *V, fe_point_fn f, void *ctx, double *values)
{
  for (int i = 0; i < V->nnodes; i++) {
    if ((i & 4095) == 0) FE_CHECK_INTERRUPT();
    FE_CHECK(f(ctx, V->node_coords + 3 * (size_t)i, V->ncomp, values + (size_t)i * V->ncomp));
  }
  return 0;
}

/* Determinant of a 3x3 (or 2x2) matrix. */
double fe_space_map_det(int dim, const double *J)
{
  if (dim == 2) return J[0] * J[3] - J[1] * J[2];
  return J[0] * (J[4] * J[8] - J[5] * J[7]) + J[1] * (J[5] * J[6] - J[3] * J[8]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* Determinant and inverse of a 3x3 (or 2x2) matrix. */
double fe_space_map_inverse(int dim, const double *J, double *K)
{
  if (dim == 2) {
    double det = J[0] * J[3] - J[1] * J[2];
    K[0] = J[3] / det, K[1] = -J[1] / det, K[2] = -J[2] / det, K[3] = J[0] / det;
    return det;
  }
  double c0 = J[4] * J[8] - J[5] * J[7], c1 = J[5] * J[6] - J[3] * J[8],
         c2 = J[3] * J[7] - J[4] * J[6];
  double det = J[0] * c0 + J[1] * c1 + J[2] * c2, r = 1 / det;
  K[0] = c0 * r;
  K[1] = (J[2] * J[7] - J[1] * J[8]) * r;
  K[2] = (J[1] * J[5] - J[2] * J[4]) * r;
  K[3] = c1 * r;
  K[4] = (J[0] * J[8] - J[2] * J[6]) * r;
  K[5] = (J[2] * J[3] - J[0] * J[5]) * r;
  K[6] = c2 * r;
  K[7] = (J[1] * J[6] - J[0] * J[7]) * r;
  K[8] = (J[0] * J[4] - J[1] * J[3]) * r;
  return det;
}

/* The error's contribution at one point: |u_h - f|^2 (L2) or |grad u_h - grad f|^2 (H1). */
static int point_error(const fe_space *V, const double *u, const int *dof, const double *phi,
                       const double *dphi, const double *x, const double *K, double h, int h1,
                       fe_point_fn f, void *ctx, double *sum)
{
  const int dim = V->elem.dim, nb = V->elem.nbasis, nc = V->ncomp;
  double fe[3], fp[3], fm[3];
  *sum = 0;
  if (!h1) {
    FE_CHECK(f(ctx, x, nc, fe));
    for (int k = 0; k < nc; k++) {
      double uh = 0;
      for (int b = 0; b < nb; b++) uh += u[(size_t)dof[b] * nc + k] * phi[b];
      *sum += (uh - fe[k]) * (uh - fe[k]);
    }
    return 0;
  }
  for (int d = 0; d < dim; d++) { /* the exact gradient by central differences of f */
    double xp[3] = {x[0], x[1], x[2]}, xm[3] = {x[0], x[1], x[2]};
    xp[d] += h;
    xm[d] -= h;
    FE_CHECK(f(ctx, xp, nc, fp));
    FE_CHECK(f(ctx, xm, nc, fm));
    for (int k = 0; k < nc; k++) {
      double gh = 0;
      for (int b = 0; b < nb; b++)
        for (int i = 0; i < dim; i++)
          gh += u[(size_t)dof[b] * nc + k] * dphi[b * dim + i] * K[i * dim + d];
      double ge = (fp[k] - fm[k]) / (2 * h);
      *sum += (gh - ge) * (gh - ge);
    }
  }
  return 0;
}

int fe_space_error(const fe_space *V, const double *u, fe_point_fn f, void *ctx, const char *norm,
                   double *err)
{
  int h1 = 0;
  if (!strcmp(norm, "H1")) h1 = 1;
  else if (strcmp(norm, "L2"))
    FE_ERROR(FE_ERR_ARG, "unknown norm '%s' (\"L2\" or \"H1\")", norm);
  const fe_element *el = &V->elem;
  fe_quadrature Q;
  FE_CHECK(fe_quadrature_create(el->cell, 2 * el->order + 2 + (V->curved ? 2 : 0), &Q));
  const int dim = el->dim, nb = el->nbasis;
  double *phi = fe_alloc(sizeof(double) * (size_t)Q.npoints * nb);
  double *dphi = fe_alloc(sizeof(double) * (size_t)Q.npoints * nb * dim);
  if (!phi || !dphi) {
    free(phi);
    free(dphi);
    fe_quadrature_free(&Q);
    FE_ERROR(FE_ERR_MEM, "out of host memory for a tabulation");
  }
  fe_element_tabulate(el, Q.npoints, Q.points, phi, dphi);
  double sum = 0;
  int rc = 0;
  for (int c = 0; c < V->mesh->ncells && !rc; c++) {
    if ((c & 1023) == 0 && (rc = fe_interrupt_check())) break;
    const int *dof = V->cell_nodes + (size_t)c * nb;
    for (int q = 0; q < Q.npoints && !rc; q++) {
      double x[3], J[9], K[9], s;
      fe_space_cell_map(V, c, Q.points + q * dim, x, J);
      double det = fe_space_map_inverse(dim, J, K);
      double h = 1e-6 * cbrt(fabs(det)) + 1e-12;
      rc = point_error(V, u, dof, phi + (size_t)q * nb, dphi + (size_t)q * nb * dim, x, K, h, h1,
                       f, ctx, &s);
      sum += Q.weights[q] * fabs(det) * s;
    }
  }
  free(phi);
  free(dphi);
  fe_quadrature_free(&Q);
  FE_CHECK(rc);
  *err = sqrt(sum);
  return 0;
}
