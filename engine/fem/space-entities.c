/* felab spaces: the tables read from the element once that name its nodes: each node's
 * vertices of nonzero weight (node_names), and the entities (edges, faces) its shared nodes
 * lie on with their nodes' names in every order of the entity's vertices (entity_nodes). The
 * numberings (engine/fem/space-number.c) and the boundary (engine/fem/space-boundary.c) read
 * them. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/core/error.h"
#include "engine/fem/space-private.h"

node_names *node_names_make(const fe_element *el)
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

void entity_nodes_free(entity_nodes *t)
{
  if (!t) return;
  free(t->rank), free(t->at), free(t->name), free(t);
}

/* Each shared node's entity (the mask of its vertices, new masks numbered as met) and each
 * entity's vertices and node count; -1 where there are more entities than the tables hold. */
static int group_entities(entity_nodes *t, const fe_element *el, const node_names *names,
                          const unsigned char *shared_node, unsigned *mask)
{
  const int nb = el->nbasis, nv = el->nvertices;
  for (int b = 0; b < nb; b++) {
    t->entity[b] = b < nv ? -2 : -1;
    if (!shared_node[b]) continue;
    unsigned mb = 0;
    for (int j = 0; j < names->count[b]; j++) mb |= 1u << names->vert[b][j];
    int e = 0;
    while (e < t->n && mask[e] != mb) e++;
    if (e == t->n) {
      if (t->n == MAX_ENTITIES) return -1;
      mask[e] = mb;
      t->m[e] = 0;
      for (int v = 0; v < nv; v++)
        if (mb >> v & 1) t->vert[e][t->m[e]++] = (unsigned char)v;
      t->n++;
    }
    t->entity[b] = e;
    t->k[e]++;
  }
  return 0;
}

/* The nodes entity by entity, and the entities through each vertex avoiding each set of
 * vertices (here). */
static void index_entities(entity_nodes *t, const fe_element *el, const unsigned *mask)
{
  const int nb = el->nbasis, nv = el->nvertices;
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
}

/* Every order of KEY_PAIRS values (ord[i]: the i-th smallest) by its comparisons; an order
 * of m < KEY_PAIRS vertices is one that leaves the padding (the largest values) last. */
static void tabulate_orders(entity_nodes *t)
{
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
}

/* The tables' places (table[e]: k nodes for each of the m! orders) and their memory; -1
 * where there is none. */
static int alloc_entity_tables(entity_nodes *t)
{
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
  return !t->rank || !t->at || !t->name ? -1 : 0;
}

/* Each entity's nodes' names in every order of its vertices, and their ranks among the
 * entity's; -1 where a weight passes 16 bits or two nodes have one name. */
static int tabulate_entity_names(entity_nodes *t, const fe_element *el)
{
  const int nv = el->nvertices;
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
          if (w < 0 || w > 65535) return -1;
          name = name << 16 | (uint64_t)w;
        }
        t->name[base + i] = name;
      }
      for (int i = 0; i < k; i++) {
        int r = 0;
        for (int l = 0; l < k; l++) {
          if (l != i && t->name[base + l] == t->name[base + i]) return -1;
          r += t->name[base + l] < t->name[base + i];
        }
        t->rank[base + i] = r;
        t->at[base + r] = i;
      }
    }
  }
  return 0;
}

/* The entities of el's shared nodes and their tables; NULL where there is no memory or the
 * element's names do not fit them (more entities than the tables hold, weights past 16 bits,
 * two nodes of one name): the callers then name node by node. */
entity_nodes *entity_nodes_make(const fe_element *el, const node_names *names,
                                const unsigned char *shared_node)
{
  entity_nodes *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  unsigned mask[MAX_ENTITIES];
  if (group_entities(t, el, names, shared_node, mask)) {
    entity_nodes_free(t);
    return NULL;
  }
  index_entities(t, el, mask);
  tabulate_orders(t);
  if (alloc_entity_tables(t) || tabulate_entity_names(t, el)) {
    entity_nodes_free(t);
    return NULL;
  }
  return t;
}
