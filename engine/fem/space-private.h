/* Private to engine/fem/space*.c (space.c, space-entities.c, space-number.c,
 * space-boundary.c): what the dof map's numberings, the boundary's nodes and the node places
 * share. Not part of the API (that is engine/fem/space.h). */
#ifndef FE_SPACE_PRIVATE_H
#define FE_SPACE_PRIVATE_H

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "engine/fem/space.h"

#define KEY_PAIRS 4 /* an edge or face node names at most the 4 vertices of a quad face */

/* What names a node, read from the element once: node b's vertices of nonzero weight (local
 * numbers) and those weights, the same in every cell; count[b] > KEY_PAIRS for the cell's
 * interior. */
typedef struct node_names {
  int nv;
  int count[FE_MAX_BASIS];
  unsigned char vert[FE_MAX_BASIS][KEY_PAIRS];
  int weight[FE_MAX_BASIS][KEY_PAIRS];
} node_names;

/* node_names of el; NULL where there is no memory. */
node_names *node_names_make(const fe_element *el);

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

/* straight_map of V; NULL where there is no memory. */
straight_map *straight_map_make(const fe_space *V);

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

_Static_assert(KEY_PAIRS == 4, "order_pattern and entity_key's sorting network take 4 ids");

/* The comparisons g[j] > g[l] of KEY_PAIRS values, one bit a pair j < l. */
static inline unsigned order_pattern(const int *g)
{
  return (unsigned)(g[0] > g[1]) | (unsigned)(g[0] > g[2]) << 1 | (unsigned)(g[0] > g[3]) << 2 |
         (unsigned)(g[1] > g[2]) << 3 | (unsigned)(g[1] > g[3]) << 4 | (unsigned)(g[2] > g[3]) << 5;
}

void entity_nodes_free(entity_nodes *t);

/* The entities of el's shared nodes and their tables; NULL where there is no memory or the
 * element's names do not fit them (more entities than the tables hold, weights past 16 bits,
 * two nodes of one name): the callers then name node by node. */
entity_nodes *entity_nodes_make(const fe_element *el, const node_names *names,
                                const unsigned char *shared_node);

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

/* The three numberings of the nodes (engine/fem/space-number.c): each returns the number of
 * nodes, -1 with an error set, or -2 where it does not fit the element or the mesh. */
long long number_nodes_entities(fe_space *V, const straight_map *s);
long long number_nodes_lattice(fe_space *V, const straight_map *s);
long long number_nodes_hashed(fe_space *V);
/* Every node after the least vertex of its entity (simplices, prisms: engine/fem/space-number.c). */
int number_nodes_interleave(fe_space *V);

#endif
