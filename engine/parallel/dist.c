/* A space split over the ranks: every rank builds the whole space (the same on all: the
 * whole mesh is on every rank for now; first order's map is the mesh's cells) and the partition (one part a rank), keeps its part's
 * cells as a mesh of their own and a local space on it whose dof map is the whole space's,
 * renumbered (nodes in the whole space's order), the interface (the local nodes it shares
 * with each neighbouring rank and those it does not own, as lists of entries) and its nodes
 * on each tag's boundary facets (found in the local space); then lets the whole space go.
 * Each step's passes over the whole mesh and space run on the rank's threads. The exchange
 * and the reductions' corrections read only those entries of a vector, packed on its device
 * (engine/parallel/exchange.c); the host sends and receives them (fe_comm_exchange). */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/exchange.h"
#include "engine/parallel/partition.h"

void fe_dist_free(fe_dist *d)
{
  if (!d) return;
  fe_mesh_free(d->mesh);
  for (int k = 0; k < d->nbound; k++) free(d->bound[k].nodes);
  free(d->bound);
  for (int i = 0; d->dev && i < FE_DIST_DEVICES; i++) fe_dist_device_free(d->dev[i]);
  free(d->dev);
  free(d->cells), free(d->l2g), free(d->notowned);
  free(d->send_at), free(d->shared_at), free(d->src_start), free(d->src_slot), free(d->not_at);
  for (int k = 0; k < d->nnb; k++) free(d->nb[k].nodes);
  free(d->nb);
  free(d);
}

/* The cells c < n with part[c] == rank, ascending, into cells (n + 1 ints; *nc of them):
 * chunk by chunk, counted then filled, on the threads. */
static void part_cells(const int *part, int n, int rank, int *cells, int *nc)
{
  enum { CHUNKS = 256 };
  int at[CHUNKS + 1] = {0};
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++)
    for (int c = (int)((long long)n * q / CHUNKS); c < (int)((long long)n * (q + 1) / CHUNKS); c++)
      at[q + 1] += part[c] == rank;
  for (int q = 0; q < CHUNKS; q++) at[q + 1] += at[q];
#pragma omp parallel for schedule(static)
  for (int q = 0; q < CHUNKS; q++) {
    int e = at[q];
    for (int c = (int)((long long)n * q / CHUNKS); c < (int)((long long)n * (q + 1) / CHUNKS); c++)
      if (part[c] == rank) cells[e++] = c;
  }
  *nc = at[CHUNKS];
}

/* The part's cells as a mesh: vertices in the whole mesh's order, regions and tag names
 * kept, no boundary facets (the boundary's nodes are listed once: boundary_lists); *vlocal
 * (malloc'd): each of m's vertices' id in the rank's mesh, or -1. */
static int local_mesh(const fe_mesh *m, const int *part, int rank, fe_dist *d, int **vlocal)
{
  FE_ASSERT(!(m->geo_order == 2 && m->geo_cells), FE_ERR_ARG, "a curved mesh (order = 2) is "
            "not split over ranks yet");
  fe_mesh *l;
  FE_CALLOC(l, 1, "a rank's mesh");
  d->mesh = l;
  const int nvc = m->nvc;
  int nc = 0, nv = 0;
  int *vl = malloc(sizeof(int) * ((size_t)m->nvertices + 1));
  d->cells = malloc(sizeof(int) * ((size_t)m->ncells + 1));
  if (!vl || !d->cells) free(vl);
  FE_ASSERT(vl && d->cells, FE_ERR_MEM, "out of memory for rank %d's cells", rank);
  part_cells(part, m->ncells, rank, d->cells, &nc);
  int *shrunk = realloc(d->cells, sizeof(int) * ((size_t)nc + 1));
  if (shrunk) d->cells = shrunk;
#pragma omp parallel for schedule(static)
  for (int v = 0; v < m->nvertices; v++) vl[v] = 0;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < nc; e++)
    for (int i = 0; i < nvc; i++)
      __atomic_store_n(&vl[m->cells[(size_t)d->cells[e] * nvc + i]], 1, __ATOMIC_RELAXED);
  for (int v = 0; v < m->nvertices; v++) vl[v] = vl[v] ? nv++ : -1;
  *l = (fe_mesh){.dim = m->dim, .type = m->type, .nvc = nvc, .nvertices = nv, .ncells = nc,
                 .ntags = m->ntags, .geo_order = m->geo_order, .ngn = nvc,
                 .positive = m->positive};
  l->coords = malloc(sizeof(double) * 3 * ((size_t)nv + 1));
  l->cells = malloc(sizeof(int) * (size_t)nvc * ((size_t)nc + 1));
  l->cell_tags = malloc(sizeof(int) * ((size_t)nc + 1));
  l->tags = malloc(sizeof(fe_tag) * ((size_t)m->ntags + 1));
  if (!l->coords || !l->cells || !l->cell_tags || !l->tags) {
    free(vl);
    FE_ERROR(FE_ERR_MEM, "out of memory for rank %d's mesh (%d cells)", rank, nc);
  }
#pragma omp parallel for schedule(static)
  for (int v = 0; v < m->nvertices; v++)
    if (vl[v] >= 0) memcpy(l->coords + 3 * (size_t)vl[v], m->coords + 3 * (size_t)v, 3 * sizeof(double));
#pragma omp parallel for schedule(static)
  for (int e = 0; e < nc; e++) {
    const int c = d->cells[e];
    for (int i = 0; i < nvc; i++) l->cells[(size_t)e * nvc + i] = vl[m->cells[(size_t)c * nvc + i]];
    l->cell_tags[e] = m->cell_tags ? m->cell_tags[c] : 0;
  }
  if (m->ntags) memcpy(l->tags, m->tags, sizeof(fe_tag) * (size_t)m->ntags);
  *vlocal = vl;
  return 0;
}

static int cmp_ll(const void *a, const void *b)
{
  const long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* The whole space's dof map as the split reads it: cell c's nodes cell_nodes[c nb ..], their
 * coordinates. */
typedef struct whole_map {
  const int *cell_nodes;
  int nb, nnodes;
  const double *coords;
} whole_map;

/* The local nodes (the whole space's nodes of the part's cells, in its order), the local dof
 * map, and for each node of the whole space the parts whose cells touch it: the owners (the
 * lowest), the nodes not owned, the neighbours' shared lists. */
static int local_nodes(const whole_map *W, const int *part, fe_dist *d, fe_space *L)
{
  const int nb = W->nb, nn = W->nnodes, np = d->size, rank = d->rank;
  const fe_mesh *m = d->whole;
  int *one; /* each node's part, or -2: several parts' (their pairs, node * np + part) */
  long long *pairs;
  size_t u;
  FE_CHECK(fe_item_parts(W->cell_nodes, nb, m->ncells, nn, part, np, &one, &pairs, &u));
  int *g2l = malloc(sizeof(int) * ((size_t)nn + 1));
  if (!g2l) free(one), free(pairs);
  FE_ASSERT(g2l, FE_ERR_MEM, "out of memory for the nodes' parts");
#pragma omp parallel for schedule(static)
  for (int g = 0; g < nn; g++) g2l[g] = one[g] == rank;
  for (size_t i = 0; i < u; i++)
    if (pairs[i] % np == rank) g2l[pairs[i] / np] = 1;
  free(one);
  int nl = 0;
  for (int g = 0; g < nn; g++) g2l[g] = g2l[g] ? nl++ : -1;
  d->l2g = malloc(sizeof(int) * ((size_t)nl + 1));
  d->notowned = malloc(sizeof(int) * ((size_t)nl + 1));
  int *count = calloc((size_t)np, sizeof(int));
  int rc = d->l2g && d->notowned && count ? 0 : FE_ERR_MEM;
  if (!rc)
#pragma omp parallel for schedule(static)
    for (int g = 0; g < nn; g++)
      if (g2l[g] >= 0) d->l2g[g2l[g]] = g;
  /* pass 0 counts each neighbour's shared nodes, pass 1 lists them (the nodes several parts
   * hold, ascending: each neighbour's list in the whole space's order) */
  for (int pass = 0; !rc && pass < 2; pass++) {
    for (int q = 0; q < np; q++) count[q] = 0;
    d->nnotowned = 0;
    for (size_t i = 0, j; i < u; i = j) { /* node pairs[i] / np: its parts pairs[i .. j) */
      const long long g = pairs[i] / np;
      for (j = i; j < u && pairs[j] / np == g; j++) continue;
      if (g2l[g] < 0) continue;
      if (pairs[i] % np != rank) d->notowned[d->nnotowned++] = g2l[g]; /* owner: the lowest */
      for (size_t k = i; k < j; k++) {
        int q = (int)(pairs[k] % np);
        if (q == rank) continue;
        if (pass) {
          int s = 0;
          while (d->nb[s].rank != q) s++;
          d->nb[s].nodes[count[q]] = g2l[g];
        }
        count[q]++;
      }
    }
    if (!pass) {
      for (int q = 0; q < np; q++) d->nnb += count[q] > 0;
      d->nb = calloc((size_t)d->nnb + 1, sizeof *d->nb);
      rc = d->nb ? 0 : FE_ERR_MEM;
      for (int q = 0, s = 0; !rc && q < np; q++) {
        if (!count[q]) continue;
        d->nb[s] = (fe_dist_neighbour){.rank = q, .n = count[q]};
        d->nb[s].nodes = malloc(sizeof(int) * (size_t)count[q]);
        if (!d->nb[s++].nodes) rc = FE_ERR_MEM;
      }
    }
  }
  free(pairs), free(count);
  if (rc) {
    free(g2l);
    FE_ERROR(FE_ERR_MEM, "out of memory for rank %d's interface", rank);
  }
  /* the local space: the whole map renumbered */
  const int nc = d->mesh->ncells;
  free(L->cell_nodes), free(L->node_coords);
  L->cell_nodes = malloc(sizeof(int) * ((size_t)nc * nb + 1));
  L->node_coords = malloc(sizeof(double) * 3 * ((size_t)nl + 1));
  if (!L->cell_nodes || !L->node_coords) rc = FE_ERR_MEM;
  if (!rc) {
#pragma omp parallel for schedule(static)
    for (int e = 0; e < nc; e++)
      for (int b = 0; b < nb; b++)
        L->cell_nodes[(size_t)e * nb + b] = g2l[W->cell_nodes[(size_t)d->cells[e] * nb + b]];
#pragma omp parallel for schedule(static)
    for (int l = 0; l < nl; l++)
      memcpy(L->node_coords + 3 * (size_t)l, W->coords + 3 * (size_t)d->l2g[l],
             3 * sizeof(double));
  }
  free(g2l);
  FE_ASSERT(!rc, FE_ERR_MEM, "out of memory for rank %d's dof map", rank);
  L->nnodes = nl;
  L->ndofs = nl * L->ncomp;
  L->numbering = "ranks";
  return 0;
}

int fe_list_steps(const int *at, int n, int per)
{
  int steps = 0;
  for (int k = 0, last = -1; k < n; last = at[k++] / per) steps += at[k] / per != last;
  return steps;
}

/* The exchange's lists (dist.h) of local entries of ncomp components: the send layout,
 * the distinct shared entries and each one's sources in the ranks' order (the neighbours
 * below this rank, this rank's own value, the neighbours above: nb is in rank order), the
 * entries not owned. */
static int exchange_lists(fe_dist *d, int ncomp, int ndofs)
{
  d->nsend = 0;
  for (int k = 0; k < d->nnb; k++) d->nsend += d->nb[k].n * ncomp;
  d->nnot = d->nnotowned * ncomp;
  int *entry = malloc(sizeof(int) * ((size_t)ndofs + 1)); /* local entry -> shared entry */
  d->send_at = malloc(sizeof(int) * ((size_t)d->nsend + 1));
  d->not_at = malloc(sizeof(int) * ((size_t)d->nnot + 1));
  d->dev = calloc(FE_DIST_DEVICES, sizeof *d->dev);
  if (!entry || !d->send_at || !d->not_at || !d->dev) {
    free(entry);
    FE_ERROR(FE_ERR_MEM, "out of memory for the exchange's lists (%d entries)", d->nsend);
  }
  for (int k = 0, off = 0; k < d->nnb; k++)
    for (int i = 0; i < d->nb[k].n; i++)
      for (int c = 0; c < ncomp; c++) d->send_at[off++] = d->nb[k].nodes[i] * ncomp + c;
  for (int i = 0; i < d->nnotowned; i++)
    for (int c = 0; c < ncomp; c++) d->not_at[i * ncomp + c] = d->notowned[i] * ncomp + c;
  /* the shared entries, ascending, and their sources' count (this rank's own one) */
  for (int i = 0; i < ndofs; i++) entry[i] = -1;
  for (int k = 0; k < d->nsend; k++) entry[d->send_at[k]] = 0;
  d->nshared = 0;
  for (int i = 0; i < ndofs; i++)
    if (!entry[i]) entry[i] = d->nshared++;
  d->shared_at = malloc(sizeof(int) * ((size_t)d->nshared + 1));
  d->src_start = calloc((size_t)d->nshared + 2, sizeof(int));
  d->src_slot = malloc(sizeof(int) * ((size_t)d->nsend + d->nshared + 1));
  if (!d->shared_at || !d->src_start || !d->src_slot) {
    free(entry);
    FE_ERROR(FE_ERR_MEM, "out of memory for the exchange's lists (%d entries)", d->nsend);
  }
  for (int i = 0; i < ndofs; i++)
    if (entry[i] >= 0) d->shared_at[entry[i]] = i;
  for (int k = 0; k < d->nsend; k++) d->src_start[entry[d->send_at[k]] + 2]++;
  for (int e = 0; e < d->nshared; e++) d->src_start[e + 2] += d->src_start[e + 1] + 1;
  /* src_start[e + 1]: the next free place of entry e's sources, while they are filled */
  int above = 0; /* the first neighbour of a higher rank */
  while (above < d->nnb && d->nb[above].rank < d->rank) above++;
  for (int k = 0, off = 0; k <= d->nnb; k++) {
    if (k == above)
      for (int e = 0; e < d->nshared; e++) d->src_slot[d->src_start[e + 1]++] = -1;
    for (int i = 0; k < d->nnb && i < d->nb[k].n * ncomp; i++, off++)
      d->src_slot[d->src_start[entry[d->send_at[off]] + 1]++] = off;
  }
  free(entry);
  for (int w = 0; w < 2; w++) {
    const int line = 8 << w, page = 512 << w; /* entries a line and a page */
    d->lines[w] = fe_list_steps(d->send_at, d->nsend, line) +
                  fe_list_steps(d->shared_at, d->nshared, line);
    d->pages[w] = fe_list_steps(d->send_at, d->nsend, page) +
                  fe_list_steps(d->shared_at, d->nshared, page);
  }
  return 0;
}

/* The facets a rank's mesh lends its space for the boundary's search (boundary_lists): of
 * the whole mesh's facet (nvf vertices; vl: their local ids or -1), all of it where its
 * vertices all lie on this rank, else each local vertex and each edge between two local
 * ones as a facet of its own (its vertices repeated, as a prism's triangle repeats one:
 * read as the vertex or the edge alone); into out (NULL: counted alone). */
static int lent_facets(const int *facet, int nvf, const int *vl, int *out)
{
  int local = 0, k = 0;
  for (int i = 0; i < nvf; i++) local += vl[facet[i]] >= 0;
  if (local == nvf) {
    for (int i = 0; out && i < nvf; i++) out[i] = vl[facet[i]];
    return 1;
  }
  for (int i = 0; local && i < nvf; i++) {
    const int a = vl[facet[i]], b = nvf > 2 ? vl[facet[(i + 1) % nvf]] : -1;
    if (a < 0) continue;
    for (int j = 0; out && j < nvf; j++) out[(size_t)k * nvf + j] = a; /* the vertex */
    k++;
    if (b < 0) continue;
    for (int j = 0; out && j < nvf; j++) out[(size_t)k * nvf + j] = j ? b : a; /* the edge */
    k++;
  }
  return k;
}

/* d's nodes on the boundary: every facet's, then each facet tag's of the whole mesh (the
 * tags a name may ask for: fe_mesh_tag_id), found in the local space L itself with the
 * whole mesh's facets lent to its mesh (lent_facets; vl: the local ids of the whole mesh's
 * vertices). What a lent facet holds that no local cell does finds no node; what a local
 * cell holds of a boundary facet (a vertex, an edge, a face, all of it) is found. */
static int boundary_lists(fe_dist *d, const fe_space *L, const int *vl)
{
  const fe_mesh *m = d->whole;
  const int nvf = m->nvf;
  d->bound = calloc((size_t)m->ntags + 1, sizeof *d->bound);
  FE_ASSERT(d->bound, FE_ERR_MEM, "out of memory for the boundary's lists");
  fe_mesh lm = *d->mesh;
  fe_space lv = *L;
  lv.mesh = &lm;
  lm.nvf = nvf;
  lm.nfacets = 0;
  size_t nf = 0;
  for (int f = 0; f < m->nfacets; f++) nf += lent_facets(m->facets + (size_t)f * nvf, nvf, vl, NULL);
  lm.facets = nf < 0x7fffffff ? malloc(sizeof(int) * (nf * nvf + 1)) : NULL;
  lm.facet_tags = malloc(sizeof(int) * (nf + 1));
  if (!lm.facets || !lm.facet_tags) {
    free(lm.facets), free(lm.facet_tags);
    FE_ERROR(FE_ERR_MEM, "out of memory for rank %d's boundary facets", d->rank);
  }
  for (int f = 0; f < m->nfacets; f++) {
    const int k = lent_facets(m->facets + (size_t)f * nvf, nvf, vl,
                              lm.facets + (size_t)lm.nfacets * nvf);
    for (int i = 0; i < k; i++) lm.facet_tags[lm.nfacets++] = m->facet_tags ? m->facet_tags[f] : 0;
  }
  int rc = fe_space_boundary_nodes_ids(&lv, NULL, 0, &d->bound[0].nodes, &d->bound[0].n);
  d->bound[0].tag = -1;
  d->nbound = !rc;
  for (int t = 0; !rc && t < m->ntags; t++) {
    if (m->tags[t].dim != m->dim - 1) continue;
    fe_dist_boundary *b = &d->bound[d->nbound];
    rc = fe_space_boundary_nodes_ids(&lv, &m->tags[t].id, 1, &b->nodes, &b->n);
    b->tag = m->tags[t].id;
    d->nbound += !rc;
  }
  free(lm.facets), free(lm.facet_tags);
  return rc;
}

int fe_dist_whole(const fe_dist *d, fe_space **W)
{
  return fe_space_create_opts(d->whole, &d->opts, W);
}

int fe_space_create_dist(const fe_mesh *m, const fe_space_opts *o, fe_space **out)
{
  return fe_space_create_part(m, o, fe_comm_rank(), fe_comm_size(), out);
}

int fe_space_create_part(const fe_mesh *m, const fe_space_opts *o, int rank, int size,
                         fe_space **out)
{
  *out = NULL;
  FE_ASSERT(size >= 1 && rank >= 0 && rank < size, FE_ERR_ARG, "rank %d of %d", rank, size);
  fe_dist *d;
  FE_CALLOC(d, 1, "a space's split over the ranks");
  d->rank = rank;
  d->size = size;
  d->whole = m;
  d->opts = *o;
  fe_partition *P = NULL;
  fe_space *L = NULL, *W = NULL;
  /* the whole space's map: first order's nodes are the vertices (fe_space's "vertices"
   * numbering), its map the mesh's cells, read where they are; else the whole space made */
  int rc = o->order == 1 ? 0 : fe_space_create_opts(m, o, &W);
  const whole_map w = W ? (whole_map){W->cell_nodes, W->elem.nbasis, W->nnodes, W->node_coords}
                        : (whole_map){m->cells, m->nvc, m->nvertices, m->coords};
  if (!rc) rc = fe_mesh_partition_cells(m, d->size, FE_PART_AUTO, &P);
  int *vl = NULL;
  if (!rc) rc = local_mesh(m, P->part, d->rank, d, &vl);
  if (!rc) rc = fe_space_create_opts(d->mesh, o, &L);
  if (!rc && L->elem.nbasis != w.nb)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "space %s: %d nodes a cell, "
                      "the whole map's %d", L->name, L->elem.nbasis, w.nb);
  if (!rc) rc = local_nodes(&w, P->part, d, L);
  if (!rc) rc = exchange_lists(d, L->ncomp, L->ndofs);
  if (!rc) rc = boundary_lists(d, L, vl);
  if (!rc) d->ndofs = (long long)w.nnodes * L->ncomp, d->ncomp = L->ncomp;
  free(vl);
  fe_space_free(W);
  fe_partition_free(P);
  if (rc) {
    fe_space_free(L);
    fe_dist_free(d);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  L->dist = d;
  *out = L;
  return 0;
}

/* The neighbours' ranks and message sizes (doubles) of d, for entries of y. */
static int neighbours(const fe_dist *d, int *ranks, int *counts)
{
  FE_ASSERT(d->nnb <= 256, FE_ERR_ARG, "rank %d has %d neighbours (256 at most)", d->rank, d->nnb);
  for (int k = 0; k < d->nnb; k++) {
    counts[k] = d->nb[k].n * d->ncomp;
    ranks[k] = d->nb[k].rank;
  }
  return 0;
}

int fe_dist_sum_begin(const fe_dist *d, const fe_vector *y)
{
  if (!d || d->size == 1) return 0;
  fe_dist_device *v;
  int counts[256], ranks[256];
  FE_CHECK(fe_dist_device_get(d, y->be, y->prec, &v));
  FE_CHECK(neighbours(d, ranks, counts));
  return fe_dist_device_begin(v, y, d->nnb, ranks, counts);
}

int fe_dist_sum_end(const fe_dist *d, fe_vector *y, double *bytes, double *messages)
{
  if (bytes) *bytes = 0;
  if (messages) *messages = 0;
  if (!d || d->size == 1) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, y->be, y->prec, &v));
  if (bytes) *bytes = (double)d->nsend * sizeof(double);
  if (messages) *messages = d->nnb;
  /* the sums, each shared entry's in the ranks' order (part 0's share first, this rank's at
   * its place): every copy of a node gets the same bits, so the copies stay equal (a sum in
   * each rank's own order differs in the last bits, and CG to 1e-12 then drifts) */
  return fe_dist_device_end(v, y);
}

int fe_dist_direct(const fe_dist *d, const fe_vector *y)
{
  if (!d || d->size == 1) return 0;
  return fe_dist_device_direct(d, y->be, y->prec);
}

int fe_dist_sum_wait(const fe_dist *d, const fe_vector *y)
{
  if (!d || d->size == 1) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, y->be, y->prec, &v));
  return fe_dist_device_wait(v);
}

double fe_dist_sum_gathered(const fe_dist *d, const fe_vector *y)
{
  fe_dist_device *v;
  if (!d || d->size == 1 || fe_dist_device_get(d, y->be, y->prec, &v)) return 0;
  return fe_dist_device_gathered(v);
}

int fe_dist_sum_fetch(const fe_dist *d, const fe_vector *y)
{
  if (!d || d->size == 1) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, y->be, y->prec, &v));
  return fe_dist_device_fetch(v);
}

int fe_dist_sum(const fe_dist *d, fe_vector *y, double *bytes, double *messages)
{
  FE_CHECK(fe_dist_sum_begin(d, y));
  return fe_dist_sum_end(d, y, bytes, messages);
}

/* The sums over the entries another rank owns (fe_dist_device_dot_launch's mode), on x's
 * device: those fe_dist_reduce_begin queued, else queued now. */
static int not_owned(const fe_dist *d, const fe_vector *x, const fe_vector *y, int mode,
                     double out[2])
{
  out[0] = out[1] = 0;
  if (!d->nnot) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, x->be, x->prec, &v));
  if (!fe_dist_device_dot_queued(v)) FE_CHECK(fe_dist_device_dot_launch(v, x, y, mode));
  return fe_dist_device_dot_read(v, out);
}

/* The correction of mode (fe_dist_device_dot_launch's) queued for x and y on x's device. */
static int reduce_queue(const fe_dist *d, const fe_vector *x, const fe_vector *y, int mode)
{
  if (!d || d->size == 1 || !d->nnot) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, x->be, x->prec, &v));
  return fe_dist_device_dot_launch(v, x, y, mode);
}

int fe_dist_reduce_begin(const fe_dist *d, const fe_vector *x, const fe_vector *y)
{
  return reduce_queue(d, x, y ? y : x, 0);
}

int fe_dist_reduce_begin_cg(const fe_dist *d, const fe_vector *r, const fe_vector *dg)
{
  return reduce_queue(d, r, dg, dg ? 2 : 1);
}

int fe_dist_reduce_node(const fe_dist *d, const fe_vector *x, int corrected, fe_node_sum *ns,
                        int *on)
{
  *on = 0;
  if (!d || d->size == 1) return 0;
  fe_dist_device *v;
  FE_CHECK(fe_dist_device_get(d, x->be, x->prec, &v));
  return fe_dist_device_node(v, corrected, ns, on);
}

void fe_dist_reduce_cancel(const fe_dist *d, const fe_vector *x)
{
  fe_dist_device *v;
  /* (begin made x's device lists: the lookup finds them, pushing no error) */
  if (d && d->size > 1 && d->nnot && !fe_dist_device_get(d, x->be, x->prec, &v))
    fe_dist_device_dot_drop(v);
}

int fe_dist_reduce_dot(const fe_dist *d, const fe_vector *x, const fe_vector *y, double *s)
{
  if (!d || d->size == 1) return 0;
  double c[2];
  FE_CHECK(not_owned(d, x, y ? y : x, 0, c));
  *s -= c[0];
  return fe_comm_sum(s, 1);
}

int fe_dist_reduce_cg(const fe_dist *d, const fe_vector *r, const fe_vector *dg, double *rr,
                      double *rz)
{
  if (!d || d->size == 1) return 0;
  double c[2];
  FE_CHECK(not_owned(d, r, dg, dg ? 2 : 1, c));
  double both[2] = {*rr - c[0], *rz - c[1]};
  FE_CHECK(fe_comm_sum(both, 2));
  *rr = both[0], *rz = both[1];
  return 0;
}

int fe_dist_reduce_owned(const fe_dist *d, const fe_vector *x, const fe_vector *y, int mode,
                         double *s)
{
  if (!d || d->size == 1) return 0;
  double c[2];
  FE_CHECK(not_owned(d, x, y ? y : x, mode, c));
  s[0] -= c[0];
  if (mode) s[1] -= c[1];
  return 0;
}

int fe_dist_reduce_sum(const fe_dist *d, double *s, int n)
{
  if (!d || d->size == 1) return 0;
  return fe_comm_sum(s, n);
}

int fe_dist_reduce_minmax(const fe_dist *d, double *v, int max)
{
  if (!d || d->size == 1) return 0;
  double t = max ? *v : -*v;
  FE_CHECK(fe_comm_max_double(&t, 1));
  *v = max ? t : -t;
  return 0;
}

int fe_dist_boundary_nodes(const fe_space *V, const char *const *tags, int ntags, int **nodes,
                           int *n)
{
  const fe_dist *d = V->dist;
  *nodes = NULL, *n = 0;
  const int all = ntags == 1 && !strcmp(tags[0], "all");
  int *ids = malloc(sizeof(int) * ((size_t)ntags + 1));
  unsigned char *mark = calloc((size_t)V->nnodes + 1, 1);
  int rc = ids && mark ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                          "out of memory for the boundary nodes");
  for (int t = 0; !rc && t < (all ? 0 : ntags); t++)
    rc = fe_mesh_tag_id(d->whole, tags[t], d->whole->dim - 1, &ids[t]);
  /* the union of the tags' lists (made at the split: boundary_lists) */
  for (int k = 0; !rc && k < d->nbound; k++) {
    int take = all && d->bound[k].tag == -1;
    for (int t = 0; !all && t < ntags; t++) take |= d->bound[k].tag == ids[t];
    for (int i = 0; take && i < d->bound[k].n; i++) mark[d->bound[k].nodes[i]] = 1;
  }
  int count = 0;
  for (int l = 0; !rc && l < V->nnodes; l++) count += mark[l];
  if (!rc && !(*nodes = malloc(sizeof(int) * ((size_t)count + 1))))
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory for %d boundary "
                      "nodes", count);
  for (int l = 0; !rc && l < V->nnodes; l++)
    if (mark[l]) (*nodes)[(*n)++] = l;
  free(ids), free(mark);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

void fe_dist_exchange_work(const fe_dist *d, const fe_backend *be, fe_precision prec,
                           fe_exchange_work *x)
{
  memset(x, 0, sizeof *x);
  if (!d || d->size == 1 || !d->nnb) return;
  x->direct = be ? fe_dist_device_direct(d, be, prec) : 0;
  x->messages = d->nnb;
  x->bytes = (double)d->nsend * sizeof(double);
  x->entries = d->nsend;
  x->word = (double)fe_precision_size(prec);
  x->shared = d->nshared;
  x->sources = d->src_start[d->nshared];
  x->lines = d->lines[x->word < 8];
  x->pages = d->pages[x->word < 8];
}

int fe_dist_parts(const fe_space *W, const int *part, int nparts, fe_precision prec,
                  fe_dist_part *out)
{
  const fe_mesh *m = W->mesh;
  const int nb = W->elem.nbasis, nc = W->ncomp, np = nparts;
  memset(out, 0, sizeof *out * (size_t)np);
  for (int c = 0; c < m->ncells; c++) out[part[c]].cells++;
  /* each node's part, or its parts where several hold it (in order) */
  int *one;
  long long *pairs;
  size_t u, nlinks = 0;
  FE_CHECK(fe_item_parts(W->cell_nodes, nb, m->ncells, W->nnodes, part, np, &one, &pairs, &u));
  for (int g = 0; g < W->nnodes; g++)
    if (one[g] >= 0) out[one[g]].nodes++;
  free(one);
  for (size_t i = 0, j; i < u; i = j) {
    for (j = i; j < u && pairs[j] / np == pairs[i] / np; j++) continue;
    nlinks += (j - i) * (j - i - 1);
  }
  /* every ordered pair of parts that share a node: each part's neighbours, once sorted */
  long long *links = malloc(sizeof(long long) * (nlinks + 1));
  if (!links) free(pairs);
  FE_ASSERT(links, FE_ERR_MEM, "out of memory for the parts' neighbours");
  size_t nl = 0;
  for (size_t i = 0, j; i < u; i = j) {
    for (j = i; j < u && pairs[j] / np == pairs[i] / np; j++) continue;
    const double k = (double)(j - i);
    for (size_t a = i; a < j; a++) {
      fe_dist_part *p = &out[pairs[a] % np];
      p->nodes++;
      if (k < 2) continue;
      p->x.entries += (k - 1) * nc; /* sent to each other part holding the node */
      p->x.shared += nc;
      p->x.sources += k * nc;
      if (a > i) p->notowned += nc; /* owned by the lowest */
      for (size_t b = i; b < j; b++)
        if (b != a) links[nl++] = (pairs[a] % np) * np + pairs[b] % np;
    }
  }
  free(pairs);
  qsort(links, nl, sizeof *links, cmp_ll);
  for (size_t i = 0; i < nl; i++)
    if (!i || links[i] != links[i - 1]) out[links[i] / np].x.messages++;
  free(links);
  for (int q = 0; q < np; q++) {
    out[q].x.bytes = out[q].x.entries * sizeof(double);
    out[q].x.word = (double)fe_precision_size(prec);
  }
  return 0;
}
