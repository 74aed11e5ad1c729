/* twoscale's ghost layer on a space split over mpirun's ranks (twoscale.c's top): each rank's
 * subdomains are one rank's, made on the whole space (every rank builds it) and renumbered:
 * local nodes first, then the nodes no local cell holds (beyond a face between two ranks'
 * cells), the ghosts, in the order of the neighbours that own them (the lowest rank whose
 * cells hold a node) and by whole number within each. Before the fine kernel each neighbour
 * sends r at the ghosts it owns; after it the ghosts' parts of z go back to their owners,
 * which add them. Both sides list a pair's nodes by whole number from the same whole map and
 * partition, so no list travels. */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/operator/strategy.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/partition.h"
#include "engine/solve/precond/twoscale.h"

struct ts_ghost {
  const fe_dist *d;
  fe_backend *be;
  fe_precision prec;
  int nn;                /* local nodes: the ghosts follow them in rx and zx */
  int nghost, nserve, nunique;
  int *ghost_from, *serve_to;  /* per neighbour: ghost values it sends, values served it */
  int *serve_unique;     /* [nserve]: a served entry's place among the distinct served nodes */
  fe_buffer serve_at, unique_at, vals; /* the served nodes (the neighbours' order), distinct */
  fe_vector *rx, *zx;    /* r and z with the ghost layer */
  double *hs, *hr;       /* host: served values (nserve), ghost values (nghost) */
  float *hf;             /* single precision's staging */
  fe_kernel *gather, *add_at;
};

void ts_ghost_free(ts_ghost *G)
{
  if (!G) return;
  fe_buffer *bufs[] = {&G->serve_at, &G->unique_at, &G->vals};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) G->be->ops->release(G->be->impl, bufs[i]);
  fe_vector_free(G->rx), fe_vector_free(G->zx);
  free(G->ghost_from), free(G->serve_to), free(G->serve_unique);
  free(G->hs), free(G->hr), free(G->hf);
  free(G);
}

static int cmp_int(const void *a, const void *b)
{
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Whether any of whole node g's cells is part q's. */
static int part_holds(const fe_node_cells *wadj, const int *part, int g, int q)
{
  for (int t = wadj->start[g]; t < wadj->start[g + 1]; t++)
    if (part[wadj->cells[t]] == q) return 1;
  return 0;
}

/* The whole space's constrained nodes (wcon, nnw): every rank's con, summed; its cells' parts
 * (*part: fe_mesh_partition's, checked against this rank's cells). */
static int whole_constrained(const fe_dist *d, const fe_space *W, const unsigned char *con, int nn,
                             unsigned char *wcon, fe_partition **part)
{
  const int nnw = W->nnodes;
  double *wc = calloc((size_t)nnw + 1, sizeof(double));
  FE_ASSERT(wc, FE_ERR_MEM, "twoscale: out of host memory for the ghost layer");
  for (int l = 0; l < nn; l++) wc[d->l2g[l]] = con[l];
  int rc = fe_comm_sum(wc, nnw);
  for (int g = 0; !rc && g < nnw; g++) wcon[g] = wc[g] > 0;
  free(wc);
  if (!rc) rc = fe_mesh_partition_cells(W->mesh, d->size, FE_PART_AUTO, part);
  for (int c = 0; !rc && c < d->mesh->ncells; c++)
    if ((*part)->part[d->cells[c]] != d->rank)
      rc = fe_error_set(FE_ERR_INTERNAL, __FILE__, __LINE__, __func__, "twoscale: rank %d's "
                        "cell %d is part %d's", d->rank, d->cells[c], (*part)->part[d->cells[c]]);
  FE_CHECK(rc);
  return 0;
}

/* The served lists into serve (malloc'd, *ns entries, whole numbers): each neighbour's ghosts
 * this rank owns (the nodes of its cells' subdomains no cell of it holds, by whole number:
 * what it lists for itself), their counts in G->serve_to. */
static int served(ts_ghost *G, const fe_space *W, const fe_node_cells *wadj, const int *part,
                  const int *owner, const int *wmap, size_t ne3, int **serve_out, size_t *ns_out)
{
  const fe_dist *d = G->d;
  size_t cap = 1024, ns = 0;
  int *serve = malloc(sizeof(int) * cap), rc = serve ? 0 : FE_ERR_MEM;
  for (int k = 0; !rc && k < d->nnb; k++) {
    const int q = d->nb[k].rank;
    size_t first = ns;
    for (int c = 0; !rc && c < W->mesh->ncells; c++) {
      if (part[c] != q) continue;
      for (size_t t = 0; t < ne3; t++) {
        int g = wmap[(size_t)c * ne3 + t];
        if (g < 0 || owner[g] != d->rank || part_holds(wadj, part, g, q)) continue;
        if (ns == cap) {
          int *more = realloc(serve, sizeof(int) * (cap *= 2));
          if (!more) {
            rc = FE_ERR_MEM;
            break;
          }
          serve = more;
        }
        serve[ns++] = g;
      }
    }
    if (rc) break;
    qsort(serve + first, ns - first, sizeof(int), cmp_int);
    size_t u = first;
    for (size_t i = first; i < ns; i++)
      if (i == first || serve[i] != serve[i - 1]) serve[u++] = serve[i];
    ns = u;
    G->serve_to[k] = (int)(ns - first);
  }
  if (rc) {
    free(serve);
    FE_ERROR(FE_ERR_MEM, "twoscale: out of host memory for the served nodes");
  }
  *serve_out = serve;
  *ns_out = ns;
  return 0;
}

/* The distinct served nodes (local numbers), each served entry's place among them, and the
 * device's buffers and host staging. */
static int ghost_buffers(ts_ghost *G, const int *serve, size_t ns)
{
  int *uniq = malloc(sizeof(int) * (ns + 1));
  G->serve_unique = malloc(sizeof(int) * (ns + 1));
  if (!uniq || !G->serve_unique) {
    free(uniq);
    FE_ERROR(FE_ERR_MEM, "twoscale: out of host memory for the ghost layer");
  }
  memcpy(uniq, serve, sizeof(int) * ns);
  qsort(uniq, ns, sizeof(int), cmp_int);
  int nu = 0;
  for (size_t i = 0; i < ns; i++)
    if (!i || uniq[i] != uniq[i - 1]) uniq[nu++] = uniq[i];
  G->nunique = nu;
  for (size_t i = 0; i < ns; i++) {
    const int *at = bsearch(&serve[i], uniq, (size_t)nu, sizeof(int), cmp_int);
    G->serve_unique[i] = (int)(at - uniq);
  }
  fe_backend *be = G->be;
  const size_t most = (size_t)(G->nserve > G->nghost ? G->nserve : G->nghost) + 1;
  int rc = fe_upload_ints(be, serve, ns + 1, &G->serve_at);
  if (!rc) rc = fe_upload_ints(be, uniq, (size_t)nu + 1, &G->unique_at);
  free(uniq);
  if (!rc) rc = be->ops->alloc(be->impl, most * fe_precision_size(G->prec), &G->vals);
  if (!rc) rc = fe_vector_create(be, G->prec, G->nn + G->nghost, &G->rx);
  if (!rc) rc = fe_vector_create(be, G->prec, G->nn + G->nghost, &G->zx);
  FE_CHECK(rc);
  G->hs = malloc(sizeof(double) * most);
  G->hr = malloc(sizeof(double) * most);
  G->hf = malloc(sizeof(float) * most);
  FE_ASSERT(G->hs && G->hr && G->hf, FE_ERR_MEM, "twoscale: out of host memory");
  return 0;
}

/* The local cells' subdomains from the whole space's map (the same as one rank's): local
 * nodes, ghosts after them, the served lists. *map, *pen as fe_schwarz_map's. */
static int ghost_map(ts_ghost *G, const fe_space *V, const fe_space *W, const unsigned char *con,
                     int **map_out, int **pen_out, long long *nvalid)
{
  const fe_dist *d = G->d;
  const int nn = V->nnodes, nc = V->mesh->ncells, nnw = W->nnodes, ncw = W->mesh->ncells,
            nb = W->elem.nbasis, nq = d->nnb, ne = V->elem.order + 3;
  const size_t ne3 = (size_t)ne * ne * ne, whole = sizeof(int) * ((size_t)nnw + 1);
  fe_partition *Pt = NULL;
  fe_node_cells wadj = {0};
  int *wmap = NULL, *wpen = NULL, *map = NULL, *pen = NULL, *serve = NULL;
  long long wvalid;
  size_t ns = 0;
  int *owner = malloc(whole), *g2l = malloc(whole), *slot = malloc(whole);
  unsigned char *wcon = calloc((size_t)nnw + 1, 1);
  G->ghost_from = calloc((size_t)nq + 1, sizeof(int));
  G->serve_to = calloc((size_t)nq + 1, sizeof(int));
  int rc = owner && g2l && slot && wcon && G->ghost_from && G->serve_to ? 0 :
           fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "twoscale: out of host "
                        "memory for the ghost layer");
  if (!rc) rc = whole_constrained(d, W, con, nn, wcon, &Pt);
  if (!rc) rc = fe_node_cells_build(W, &wadj);
  if (!rc) rc = fe_schwarz_map(W, &wadj, wcon, &wmap, &wpen, &wvalid);
  if (rc) goto done;
  const int *part = Pt->part;
  for (int g = 0; g < nnw; g++) owner[g] = d->size, g2l[g] = -1, slot[g] = -1;
  for (int c = 0; c < ncw; c++) /* a node's owner: the lowest part of its cells */
    for (int b = 0; b < nb; b++) {
      int g = W->cell_nodes[(size_t)c * nb + b];
      if (part[c] < owner[g]) owner[g] = part[c];
    }
  for (int l = 0; l < nn; l++) g2l[d->l2g[l]] = l;
  /* the ghosts: whole nodes of the local subdomains no local cell holds, by owner then number */
  for (int c = 0; c < nc; c++)
    for (size_t t = 0; t < ne3; t++) {
      int g = wmap[(size_t)d->cells[c] * ne3 + t];
      if (g >= 0 && g2l[g] < 0) slot[g] = -2;
    }
  for (int k = 0; k < nq; k++)
    for (int g = 0; g < nnw; g++)
      if (slot[g] == -2 && owner[g] == d->nb[k].rank) slot[g] = G->nghost++, G->ghost_from[k]++;
  for (int g = 0; !rc && g < nnw; g++)
    if (slot[g] == -2)
      rc = fe_error_set(FE_ERR_INTERNAL, __FILE__, __LINE__, __func__, "twoscale: ghost node %d "
                        "of rank %d is owned by rank %d, not a neighbour", g, d->rank, owner[g]);
  if (!rc) rc = served(G, W, &wadj, part, owner, wmap, ne3, &serve, &ns);
  if (rc) goto done;
  G->nserve = (int)ns;
  for (size_t i = 0; i < ns; i++) serve[i] = g2l[serve[i]]; /* owned here: local */
  map = malloc(sizeof(int) * ((size_t)nc * ne3 + 1));
  pen = malloc(sizeof(int) * ((size_t)nc + 1));
  if (!map || !pen) {
    rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "twoscale: out of host memory "
                      "for the subdomains' map");
    goto done;
  }
  long long valid = 0; /* the local map: whole numbers renumbered, ghosts after the local nodes */
  for (int c = 0; c < nc; c++) {
    const int cw = d->cells[c];
    pen[c] = wpen[cw];
    for (size_t t = 0; t < ne3; t++) {
      int g = wmap[(size_t)cw * ne3 + t];
      map[(size_t)c * ne3 + t] = g < 0 ? -1 : g2l[g] >= 0 ? g2l[g] : nn + slot[g];
      valid += g >= 0;
    }
  }
  *nvalid = valid;
  rc = ghost_buffers(G, serve, ns);
done:
  fe_partition_free(Pt);
  fe_node_cells_free(&wadj);
  free(wmap), free(wpen), free(owner), free(g2l), free(slot), free(wcon), free(serve);
  if (rc) {
    free(map), free(pen);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *map_out = map;
  *pen_out = pen;
  return 0;
}

int ts_ghost_make(const fe_space *V, const unsigned char *con, fe_backend *be, fe_precision prec,
                  fe_kernel *gather, fe_kernel *add_at, ts_ghost **out, int **map_out,
                  int **pen_out, long long *nvalid)
{
  const fe_dist *d = V->dist;
  *out = NULL;
  ts_ghost *G;
  FE_CALLOC(G, 1, "twoscale's ghost layer");
  *G = (ts_ghost){.d = d, .be = be, .prec = prec, .nn = V->nnodes, .gather = gather,
                  .add_at = add_at};
  fe_space *W = NULL; /* the whole space, made again for the map */
  int rc = fe_dist_whole(d, &W);
  if (!rc) rc = ghost_map(G, V, W, con, map_out, pen_out, nvalid);
  fe_space_free(W);
  if (rc) {
    ts_ghost_free(G);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = G;
  return 0;
}


/* n reals of buf from entry `at` to the host's out (double), or from in to buf. */
static int ghost_read(ts_ghost *G, const fe_buffer *buf, size_t at, int n, double *out)
{
  const size_t w = fe_precision_size(G->prec);
  if (G->prec == FE_DOUBLE) return G->be->ops->read(G->be->impl, buf, at * w, w * (size_t)n, out);
  FE_CHECK(G->be->ops->read(G->be->impl, buf, at * w, w * (size_t)n, G->hf));
  for (int i = 0; i < n; i++) out[i] = G->hf[i];
  return 0;
}

static int ghost_write(ts_ghost *G, fe_buffer *buf, size_t at, int n, const double *in)
{
  const size_t w = fe_precision_size(G->prec);
  if (G->prec == FE_DOUBLE) return G->be->ops->write(G->be->impl, buf, at * w, w * (size_t)n, in);
  for (int i = 0; i < n; i++) G->hf[i] = (float)in[i];
  return G->be->ops->write(G->be->impl, buf, at * w, w * (size_t)n, G->hf);
}

/* One of the ghost layer's passes over n listed entries (kernel k: gather or add_at). */
static int ghost_pass(ts_ghost *G, fe_kernel *k, int n, const fe_buffer *idx, const fe_buffer *x,
                      fe_buffer *y)
{
  if (!n) return 0;
  int ng = (n + TS_ROWS - 1) / TS_ROWS;
  fe_arg a[5] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = n},
                 {.kind = FE_ARG_BUFFER, .buf = idx}, {.kind = FE_ARG_BUFFER, .buf = x},
                 {.kind = FE_ARG_BUFFER, .buf = y}};
  return G->be->ops->launch(G->be->impl, k, (size_t)ng, TS_ROWS, 5, a, G->prec, NULL);
}

/* The neighbours' ranks (d->nb's order) into ranks. */
static int ghost_ranks(const ts_ghost *G, int *ranks)
{
  const fe_dist *d = G->d;
  FE_ASSERT(d->nnb <= 256, FE_ERR_ARG, "rank %d has %d neighbours (256 at most)", d->rank, d->nnb);
  for (int k = 0; k < d->nnb; k++) ranks[k] = d->nb[k].rank;
  return 0;
}

int ts_ghost_begin(ts_ghost *G, const fe_vector *r, fe_vector **rx, fe_vector **zx)
{
  int ranks[256];
  FE_CHECK(ghost_ranks(G, ranks));
  const size_t w = fe_precision_size(G->prec);
  FE_CHECK(ghost_pass(G, G->gather, G->nserve, &G->serve_at, &r->buf, &G->vals));
  if (G->nserve) FE_CHECK(ghost_read(G, &G->vals, 0, G->nserve, G->hs));
  FE_CHECK(fe_comm_exchange_v(G->d->nnb, ranks, G->serve_to, G->hs, G->ghost_from, G->hr));
  FE_CHECK(G->be->ops->copy(G->be->impl, &G->rx->buf, &r->buf, w * (size_t)G->nn));
  if (G->nghost) FE_CHECK(ghost_write(G, &G->rx->buf, (size_t)G->nn, G->nghost, G->hr));
  FE_CHECK(fe_vector_fill(G->zx, 0));
  *rx = G->rx;
  *zx = G->zx;
  return 0;
}

int ts_ghost_end(ts_ghost *G, fe_vector *z)
{
  int ranks[256];
  FE_CHECK(ghost_ranks(G, ranks));
  const size_t w = fe_precision_size(G->prec);
  FE_CHECK(G->be->ops->copy(G->be->impl, &z->buf, &G->zx->buf, w * (size_t)G->nn));
  if (G->nghost) FE_CHECK(ghost_read(G, &G->zx->buf, (size_t)G->nn, G->nghost, G->hr));
  FE_CHECK(fe_comm_exchange_v(G->d->nnb, ranks, G->ghost_from, G->hr, G->serve_to, G->hs));
  if (!G->nunique) return 0;
  double *u = G->hr; /* nunique <= nserve <= its size */
  for (int i = 0; i < G->nunique; i++) u[i] = 0;
  for (int i = 0; i < G->nserve; i++) u[G->serve_unique[i]] += G->hs[i];
  FE_CHECK(ghost_write(G, &G->vals, 0, G->nunique, u));
  return ghost_pass(G, G->add_at, G->nunique, &G->unique_at, &G->vals, &z->buf);
}
