/* A space split over the ranks: every rank builds the whole space (the same on all: the
 * whole mesh is on every rank for now) and the partition (one part a rank), keeps its part's
 * cells as a mesh of their own and a local space on it whose dof map is the whole space's,
 * renumbered (nodes in the whole space's order), and the interface: the local nodes it shares
 * with each neighbouring rank and those it does not own. The exchange is staged on the host
 * (the vector read where the backend's memory is not the host's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/partition.h"

void fe_dist_free(fe_dist *d)
{
  if (!d) return;
  fe_space_free(d->whole);
  fe_mesh_free(d->mesh);
  free(d->cells), free(d->l2g), free(d->notowned), free(d->send), free(d->recv);
  free(d->acc), free(d->mine);
  for (int k = 0; k < d->nnb; k++) free(d->nb[k].nodes);
  free(d->nb);
  free(d);
}

/* The part's cells as a mesh: vertices in the whole mesh's order, regions and tag names
 * kept, no boundary facets (the boundary comes from the whole space: fe_dist_boundary_nodes). */
static int local_mesh(const fe_mesh *m, const int *part, int rank, fe_dist *d)
{
  FE_ASSERT(!(m->geo_order == 2 && m->geo_cells), FE_ERR_ARG, "a curved mesh (order = 2) is "
            "not split over ranks yet");
  fe_mesh *l;
  FE_CALLOC(l, 1, "a rank's mesh");
  d->mesh = l;
  int nc = 0, nv = 0;
  for (int c = 0; c < m->ncells; c++) nc += part[c] == rank;
  int *vl = malloc(sizeof(int) * ((size_t)m->nvertices + 1));
  FE_ASSERT(vl, FE_ERR_MEM, "out of memory for a rank's vertices");
  for (int v = 0; v < m->nvertices; v++) vl[v] = 0;
  for (int c = 0; c < m->ncells; c++)
    for (int i = 0; part[c] == rank && i < m->nvc; i++) vl[m->cells[(size_t)c * m->nvc + i]] = 1;
  for (int v = 0; v < m->nvertices; v++) vl[v] = vl[v] ? nv++ : -1;
  *l = (fe_mesh){.dim = m->dim, .type = m->type, .nvc = m->nvc, .nvertices = nv, .ncells = nc,
                 .ntags = m->ntags, .geo_order = m->geo_order, .ngn = m->nvc,
                 .positive = m->positive};
  l->coords = malloc(sizeof(double) * 3 * ((size_t)nv + 1));
  l->cells = malloc(sizeof(int) * (size_t)m->nvc * ((size_t)nc + 1));
  l->cell_tags = malloc(sizeof(int) * ((size_t)nc + 1));
  l->tags = malloc(sizeof(fe_tag) * ((size_t)m->ntags + 1));
  d->cells = malloc(sizeof(int) * ((size_t)nc + 1));
  if (!l->coords || !l->cells || !l->cell_tags || !l->tags || !d->cells) {
    free(vl);
    FE_ERROR(FE_ERR_MEM, "out of memory for rank %d's mesh (%d cells)", rank, nc);
  }
  for (int v = 0; v < m->nvertices; v++)
    if (vl[v] >= 0) memcpy(l->coords + 3 * (size_t)vl[v], m->coords + 3 * (size_t)v, 3 * sizeof(double));
  for (int c = 0, e = 0; c < m->ncells; c++) {
    if (part[c] != rank) continue;
    for (int i = 0; i < m->nvc; i++)
      l->cells[(size_t)e * m->nvc + i] = vl[m->cells[(size_t)c * m->nvc + i]];
    l->cell_tags[e] = m->cell_tags ? m->cell_tags[c] : 0;
    d->cells[e++] = c;
  }
  if (m->ntags) memcpy(l->tags, m->tags, sizeof(fe_tag) * (size_t)m->ntags);
  free(vl);
  return 0;
}

static int cmp_ll(const void *a, const void *b)
{
  const long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* The local nodes (the whole space's nodes of the part's cells, in its order), the local dof
 * map, and for each node of the whole space the parts whose cells touch it: the owners (the
 * lowest), the nodes not owned, the neighbours' shared lists. */
static int local_nodes(const fe_space *W, const int *part, fe_dist *d, fe_space *L)
{
  const int nb = W->elem.nbasis, nn = W->nnodes, np = d->size, rank = d->rank;
  const fe_mesh *m = W->mesh;
  int *g2l = malloc(sizeof(int) * ((size_t)nn + 1));
  size_t npairs = (size_t)m->ncells * nb;
  long long *pairs = malloc(sizeof(long long) * (npairs + 1)); /* node * np + part */
  if (!g2l || !pairs) free(g2l), free(pairs);
  FE_ASSERT(g2l && pairs, FE_ERR_MEM, "out of memory for the nodes' parts");
  for (int g = 0; g < nn; g++) g2l[g] = 0;
  for (int c = 0; c < m->ncells; c++)
    for (int b = 0; b < nb; b++) {
      int g = W->cell_nodes[(size_t)c * nb + b];
      pairs[(size_t)c * nb + b] = (long long)g * np + part[c];
      if (part[c] == rank) g2l[g] = 1;
    }
  int nl = 0;
  for (int g = 0; g < nn; g++) g2l[g] = g2l[g] ? nl++ : -1;
  qsort(pairs, npairs, sizeof *pairs, cmp_ll);
  size_t u = 0;
  for (size_t i = 0; i < npairs; i++)
    if (!i || pairs[i] != pairs[i - 1]) pairs[u++] = pairs[i];
  d->l2g = malloc(sizeof(int) * ((size_t)nl + 1));
  d->notowned = malloc(sizeof(int) * ((size_t)nl + 1));
  int *count = calloc((size_t)np, sizeof(int));
  int rc = d->l2g && d->notowned && count ? 0 : FE_ERR_MEM;
  for (int g = 0; !rc && g < nn; g++)
    if (g2l[g] >= 0) d->l2g[g2l[g]] = g;
  /* pass 0 counts each neighbour's shared nodes, pass 1 lists them */
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
  for (int e = 0; !rc && e < nc; e++)
    for (int b = 0; b < nb; b++)
      L->cell_nodes[(size_t)e * nb + b] = g2l[W->cell_nodes[(size_t)d->cells[e] * nb + b]];
  for (int l = 0; !rc && l < nl; l++)
    memcpy(L->node_coords + 3 * (size_t)l, W->node_coords + 3 * (size_t)d->l2g[l], 3 * sizeof(double));
  free(g2l);
  FE_ASSERT(!rc, FE_ERR_MEM, "out of memory for rank %d's dof map", rank);
  L->nnodes = nl;
  L->ndofs = nl * L->ncomp;
  L->numbering = "ranks";
  return 0;
}

int fe_space_create_dist(const fe_mesh *m, const fe_space_opts *o, fe_space **out)
{
  *out = NULL;
  fe_dist *d;
  FE_CALLOC(d, 1, "a space's split over the ranks");
  d->rank = fe_comm_rank();
  d->size = fe_comm_size();
  fe_partition *P = NULL;
  fe_space *L = NULL;
  int rc = fe_space_create_opts(m, o, &d->whole);
  if (!rc) rc = fe_mesh_partition(m, d->size, FE_PART_AUTO, &P);
  if (!rc) rc = local_mesh(m, P->part, d->rank, d);
  if (!rc) rc = fe_space_create_opts(d->mesh, o, &L);
  if (!rc) rc = local_nodes(d->whole, P->part, d, L);
  size_t shared = 0;
  for (int k = 0; !rc && k < d->nnb; k++) shared += (size_t)d->nb[k].n;
  if (!rc) {
    d->ndofs = (long long)d->whole->ndofs;
    d->send = malloc(sizeof(double) * (shared * L->ncomp + 1));
    d->recv = malloc(sizeof(double) * (shared * L->ncomp + 1));
    d->acc = malloc(sizeof(double) * ((size_t)L->ndofs + 1));
    d->mine = malloc((size_t)L->ndofs + 1);
    if (!d->send || !d->recv || !d->acc || !d->mine)
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of memory for the "
                        "exchange's buffers");
  }
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

/* x's entries on the host: the backend's own memory, or a copy (*copy, freed by the caller). */
static int host_values(const fe_vector *x, double **copy, const double **v, const float **f)
{
  *copy = NULL;
  *v = NULL;
  *f = NULL;
  void *p = x->be->ops->host ? x->be->ops->host(x->be->impl, &x->buf) : NULL;
  if (p) {
    if (x->prec == FE_DOUBLE) *v = p;
    else *f = p;
    return 0;
  }
  FE_MALLOC(*copy, (size_t)x->n + 1, "a vector's host copy");
  int rc = fe_vector_get(x, *copy);
  if (rc) free(*copy), *copy = NULL;
  FE_CHECK(rc);
  *v = *copy;
  return 0;
}

#define AT(v, f, i) ((v) ? (v)[i] : (double)(f)[i])

/* This rank's own values added into acc at every shared entry, once (a node shared with
 * several neighbours is in several lists). */
static void own_share(const fe_dist *d, int ncomp, const double *wv, const float *wf, double *acc,
                      unsigned char *mine)
{
  for (int j = 0; j < d->nnb; j++)
    for (int i = 0; i < d->nb[j].n; i++)
      for (int c = 0; c < ncomp; c++) {
        size_t at = (size_t)d->nb[j].nodes[i] * ncomp + c;
        if (!mine[at]) acc[at] += wv ? wv[at] : (double)wf[at], mine[at] = 1;
      }
}

int fe_dist_sum(const fe_dist *d, fe_vector *y, double *bytes, double *messages)
{
  if (bytes) *bytes = 0;
  if (messages) *messages = 0;
  if (!d || d->size == 1) return 0;
  double *copy;
  const double *cv;
  const float *cf;
  FE_CHECK(host_values(y, &copy, &cv, &cf));
  const int ncomp = d->whole->ncomp;
  size_t off = 0;
  int counts[256], ranks[256];
  FE_ASSERT(d->nnb <= 256, FE_ERR_ARG, "rank %d has %d neighbours (256 at most)", d->rank, d->nnb);
  for (int k = 0; k < d->nnb; k++) {
    for (int i = 0; i < d->nb[k].n; i++)
      for (int c = 0; c < ncomp; c++)
        d->send[off++] = AT(cv, cf, (size_t)d->nb[k].nodes[i] * ncomp + c);
    counts[k] = d->nb[k].n * ncomp;
    ranks[k] = d->nb[k].rank;
  }
  int rc = fe_comm_exchange(d->nnb, ranks, counts, d->send, d->recv);
  if (bytes) *bytes = (double)off * sizeof(double);
  if (messages) *messages = d->nnb;
  /* the sums, each shared node's in the ranks' order (part 0's share first, this rank's at
   * its place): every copy of a node gets the same bits, so the copies stay equal (a sum in
   * each rank's own order differs in the last bits, and CG to 1e-12 then drifts) */
  double *wv = copy ? copy : (double *)(uintptr_t)cv;
  float *wf = (float *)(uintptr_t)cf;
  double *acc = d->acc;
  unsigned char *mine = d->mine;
  for (int k = 0; !rc && k < d->nnb; k++) /* zero, then the neighbours below, this rank's own */
    for (int i = 0; i < d->nb[k].n; i++)
      for (int c = 0; c < ncomp; c++) {
        size_t at = (size_t)d->nb[k].nodes[i] * ncomp + c;
        acc[at] = 0, mine[at] = 0;
      }
  int above = 0; /* the first neighbour of a higher rank (nb is in rank order) */
  while (above < d->nnb && d->nb[above].rank < d->rank) above++;
  off = 0;
  for (int k = 0; !rc && k < d->nnb; k++) {
    if (k == above) own_share(d, ncomp, wv, wf, acc, mine);
    for (int i = 0; i < d->nb[k].n; i++)
      for (int c = 0; c < ncomp; c++) acc[(size_t)d->nb[k].nodes[i] * ncomp + c] += d->recv[off++];
  }
  if (!rc && above == d->nnb) own_share(d, ncomp, wv, wf, acc, mine);
  for (int k = 0; !rc && k < d->nnb; k++)
    for (int i = 0; i < d->nb[k].n; i++)
      for (int c = 0; c < ncomp; c++) {
        size_t at = (size_t)d->nb[k].nodes[i] * ncomp + c;
        if (wv) wv[at] = acc[at];
        else wf[at] = (float)acc[at];
      }
  if (!rc && copy) rc = fe_vector_set(y, copy);
  free(copy);
  FE_CHECK(rc);
  return 0;
}

int fe_dist_reduce_dot(const fe_dist *d, const fe_vector *x, const fe_vector *y, double *s)
{
  if (!d || d->size == 1) return 0;
  double *cx, *cy = NULL;
  const double *vx, *vy = NULL;
  const float *fx, *fy = NULL;
  FE_CHECK(host_values(x, &cx, &vx, &fx));
  int rc = y && y != x ? host_values(y, &cy, &vy, &fy) : 0;
  if (!y || y == x) vy = vx, fy = fx;
  const int ncomp = d->whole->ncomp;
  for (int i = 0; !rc && i < d->nnotowned; i++)
    for (int c = 0; c < ncomp; c++) {
      size_t at = (size_t)d->notowned[i] * ncomp + c;
      *s -= y ? AT(vx, fx, at) * AT(vy, fy, at) : AT(vx, fx, at);
    }
  free(cx), free(cy);
  FE_CHECK(rc);
  return fe_comm_sum(s, 1);
}

int fe_dist_reduce_cg(const fe_dist *d, const fe_vector *r, const fe_vector *dg, double *rr,
                      double *rz)
{
  if (!d || d->size == 1) return 0;
  double *cr, *cd = NULL;
  const double *vr, *vd = NULL;
  const float *fr, *fd = NULL;
  FE_CHECK(host_values(r, &cr, &vr, &fr));
  int rc = dg ? host_values(dg, &cd, &vd, &fd) : 0;
  const int ncomp = d->whole->ncomp;
  for (int i = 0; !rc && i < d->nnotowned; i++)
    for (int c = 0; c < ncomp; c++) {
      size_t at = (size_t)d->notowned[i] * ncomp + c;
      const double x = AT(vr, fr, at);
      rr[0] -= x * x;
      rz[0] -= dg ? x * (x / AT(vd, fd, at)) : x * x;
    }
  free(cr), free(cd);
  FE_CHECK(rc);
  double both[2] = {*rr, *rz};
  FE_CHECK(fe_comm_sum(both, 2));
  *rr = both[0], *rz = both[1];
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
  int *all, na;
  FE_CHECK(fe_space_boundary_nodes(d->whole, tags, ntags, &all, &na));
  /* the whole's sorted nodes, mapped: l2g is increasing, so a merge */
  int *out = malloc(sizeof(int) * ((size_t)na + 1)), k = 0;
  if (!out) free(all);
  FE_ASSERT(out, FE_ERR_MEM, "out of memory for the boundary nodes");
  for (int i = 0, l = 0; i < na; i++) {
    while (l < V->nnodes && d->l2g[l] < all[i]) l++;
    if (l < V->nnodes && d->l2g[l] == all[i]) out[k++] = l;
  }
  free(all);
  *nodes = out;
  *n = k;
  return 0;
}
