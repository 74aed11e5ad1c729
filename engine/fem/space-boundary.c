/* felab spaces: the boundary's nodes and dofs.
 *
 * Boundary nodes of a set of tags: the vertices, edges and faces of the tagged facets go
 * into a set, and a node is on the boundary when the entity it lies on is in the set (one
 * look-up an entity of a cell); on a box numbered by its lattice, each facet is one side of
 * one cube, whose nodes are marked. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/keymap.h"
#include "engine/fem/space-private.h"
#include "engine/parallel/dist.h"

/* The set of vertices, edges and faces (sorted vertex ids padded with -1) of the facets
 * carrying one of the tag ids (ids == NULL: every facet), their vertices marked in vmark
 * (set NULL: those alone). */
static int facet_entities(const fe_mesh *m, const int *ids, int nids, fe_keymap *set,
                          unsigned char *vmark)
{
  if (!set) { /* the vertices alone (a space of vertex nodes): the facets on the threads */
#pragma omp parallel for schedule(static)
    for (int f = 0; f < m->nfacets; f++) {
      int take = !ids;
      for (int t = 0; t < nids && !take; t++) take = m->facet_tags[f] == ids[t];
      for (int i = 0; take && i < m->nvf; i++)
        __atomic_store_n(&vmark[m->facets[(size_t)f * m->nvf + i]], 1, __ATOMIC_RELAXED);
    }
    return 0;
  }
  FE_CHECK(fe_keymap_init(set, KEY_PAIRS, (size_t)m->nfacets * 8));
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
  enum { CHUNKS = 256 }; /* the nodes in chunks on the threads: counted, then listed */
  int at[CHUNKS + 1] = {0};
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++) {
    const int i1 = (int)((long long)nnodes * (q + 1) / CHUNKS);
    for (int i = (int)((long long)nnodes * q / CHUNKS); i < i1; i++) at[q + 1] += mark[i] != 0;
  }
  for (int q = 0; q < CHUNKS; q++) at[q + 1] += at[q];
  *nodes = fe_alloc(sizeof(int) * (size_t)at[CHUNKS] + 1);
  if (!*nodes) FE_ERROR(FE_ERR_MEM, "out of host memory for boundary nodes");
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++) {
    const int i1 = (int)((long long)nnodes * (q + 1) / CHUNKS);
    int k = at[q];
    for (int i = (int)((long long)nnodes * q / CHUNKS); k < at[q + 1] && i < i1; i++)
      if (mark[i]) (*nodes)[k++] = i;
  }
  *n = at[CHUNKS];
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
   * element has them (one look-up an edge or face, not one a node), else node by node. */
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

int fe_space_boundary_nodes_ids(const fe_space *V, const int *ids, int nids, int **nodes, int *n)
{
  const fe_mesh *m = V->mesh;
  *nodes = NULL;
  *n = 0;
  if (!strcmp(V->numbering, "lattice")) {
    int rc = lattice_boundary_nodes(V, ids, ids ? nids : 0, nodes, n);
    if (rc != -2) return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
  }
  fe_keymap set;
  /* P1, Q1: every node is a vertex (and keeps its id), so the tagged facets' vertices are
   * the boundary nodes; no entity set */
  int vertex_nodes = !V->curved && V->elem.nbasis == V->elem.nvertices;
  unsigned char *vmark = fe_zalloc((size_t)m->nvertices + 1, 1);
  int rc = vmark ? facet_entities(m, ids, ids ? nids : 0, vertex_nodes ? NULL : &set, vmark)
                 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc && vertex_nodes) {
    rc = marked_nodes(vmark, m->nvertices, nodes, n);
  } else if (!rc) {
    rc = nodes_in_set(V, &set, vmark, nodes, n);
    fe_keymap_free(&set);
  }
  free(vmark);
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
  if (V->dist) return fe_dist_boundary_nodes(V, tags, ntags, nodes, n); /* the whole space's */
  if (ntags == 1 && !strcmp(tags[0], "all"))
    return fe_space_boundary_nodes_ids(V, NULL, 0, nodes, n);
  int *ids = NULL;
  FE_MALLOC(ids, ntags, "tag ids");
  for (int t = 0; t < ntags; t++) {
    int rc = fe_mesh_tag_id(m, tags[t], m->dim - 1, &ids[t]);
    if (rc) {
      free(ids);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
  }
  int rc = fe_space_boundary_nodes_ids(V, ids, ntags, nodes, n);
  free(ids);
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
