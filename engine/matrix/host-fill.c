/* felab matrices, the cpu's fill (pattern-fill.c): the element matrices it makes as its rows
 * need them, variant reg_jac on a realization of the host's own arrays (host_fill, in
 * matrix-private.h), each thread into its window of cells (cell_window), launched a batch of
 * consecutive cells at a time or, for a row whose cells do not fit, gathered apart. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/matrix/matrix-private.h"
void host_fill_free(host_fill *F)
{
  fe_realization *h = &F->h;
  fe_realization_unbind(h, F->tf);
  fe_vector_free(F->u);
  for (int i = 0; i < 3; i++) free(F->own[i]);
  if (h->params.ptr) h->be->ops->release(h->be->impl, &h->params);
}

/* A host copy of n doubles in precision prec: src itself in double, else a float copy in
 * *own. */
static const void *host_reals(const double *src, size_t n, fe_precision prec, void **own)
{
  if (prec == FE_DOUBLE) return src;
  float *f = malloc(sizeof(float) * (n + 1));
  for (size_t i = 0; f && i < n; i++) f[i] = (float)src[i];
  *own = f;
  return f;
}

int host_fill_make(fe_operator *A, const fe_vector *at, fe_backend *be, fe_precision prec,
                   host_fill *F, double *compile_s, double *transfer)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const int nc = V->mesh->ncells, nn = V->nnodes;
  fe_realization *h = &F->h;
  /* transpose's 32 cells on a cpu, fewer where a group's gathered cells and factors would
   * not fit the static shared memory (Q7: 16) */
  *h = (fe_realization){.A = A, .be = be, .prec = prec, .block = fe_elemat_reg_block(A, be, prec)};
  h->params_version = p->const_version - 1; /* never current: bind uploads the constants */
  F->dbl = prec == FE_DOUBLE;
  F->kn = (size_t)(V->elem.nbasis * V->ncomp) * (V->elem.nbasis * V->ncomp);
  size_t w = fe_precision_size(prec);
  int v = 0;
  while (strcmp(elemat_variants[v].name, "reg_jac")) v++;
  FE_CHECK(elemat_shape_of(h, 0, v, &F->sh));
  FE_CHECK(elemat_kernel_for(h, &F->sh, &F->k, compile_s)); /* kept with A: the cache's */
  const void *xyz = fe_host_coords(V, prec, &F->own[0]); /* less the origin */
  if (p->naux) F->aux = host_reals(A->aux, (size_t)nc * p->naux, prec, &F->own[1]);
  F->aux_bytes = (size_t)p->naux * w;
  if (p->nfields) { /* the fields' maps side by side per cell, as fe_fields reads them */
    int *maps = malloc(sizeof(int) * ((size_t)nc * fe_codegen_field_map_width(p) + 1));
    F->nbf = fe_codegen_field_map_width(p);
    for (int c = 0; maps && c < nc; c++)
      for (int f = 0, off = 0; f < p->nfields; off += p->field_space[f]->elem.nbasis, f++)
        memcpy(maps + (size_t)c * F->nbf + off, p->field_space[f]->cell_nodes +
               (size_t)c * p->field_space[f]->elem.nbasis,
               sizeof(int) * (size_t)p->field_space[f]->elem.nbasis);
    F->maps = F->own[2] = maps;
  }
  FE_ASSERT(xyz && (!p->naux || F->aux) && (!p->nfields || F->maps), FE_ERR_MEM,
            "out of host memory for the assembly's coordinates, constants or field maps");
  FE_CHECK(be->ops->wrap(be->impl, (void *)xyz, 3 * (size_t)nn * w, &h->coords));
  FE_CHECK(fe_realization_bind(h, F->tf, transfer));
  fe_kernel_spec s;
  fe_realization_spec(h, FE_ACTION_APPLY, &s);
  const fe_vector *u = at;
  if (at && (at->be != be || at->prec != prec)) {
    double t0 = fe_clock();
    FE_CHECK(fe_vector_convert(at, be, prec, &F->u));
    *transfer += fe_clock() - t0;
    u = F->u;
  } else if (!at && fe_codegen_needs(&s).need_u) {
    FE_CHECK(fe_vector_create(be, prec, V->ndofs, &F->u)); /* zeroed */
    u = F->u;
  }
  /* a window: 512 MB over the threads, or FELAB_FILL_WINDOW matrices (less memory, more
   * rows apart: tests/scripts/test_assembly.lua); a launch: whole groups, about 256 KB of
   * matrices, at most half a window */
  const char *cap = getenv("FELAB_FILL_WINDOW");
  F->window = ((size_t)512 << 20) / (size_t)omp_get_max_threads() / (F->kn * w);
  if (cap && atol(cap) > 0) F->window = (size_t)atol(cap);
  size_t batch = (256 << 10) / (F->kn * w);
  batch = (batch < F->window / 2 ? batch : F->window / 2) / (size_t)F->sh.block * F->sh.block;
  F->batch = batch > (size_t)F->sh.block ? (int)batch : F->sh.block;
  if (F->window < (size_t)2 * F->batch) F->window = (size_t)2 * F->batch;
  fe_arg *a = F->args;
  a[2] = (fe_arg){.kind = FE_ARG_INT, .i = 0}; /* geo_n: jac reads no factors */
  a[4] = a[5] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &h->coords};
  a[7] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &h->params};
  for (int i = 0; i < 3; i++)
    a[9 + i] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = h->fv[i] ? h->fv[i] : &h->params};
  a[12] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = u ? &u->buf : &h->params};
  return 0;
}

/* Element matrices of count cells into the slots ids of K: the cells' nodes, per-cell
 * constants and field maps start at cells, aux and maps (count of each). Called by threads:
 * a failure returns its code without a frame. */
static int host_fill_launch(const host_fill *F, const int *cells, const char *aux,
                            const int *maps, const int *ids, int count, void *K, size_t kslots)
{
  const fe_realization *h = &F->h;
  const fe_backend *be = h->be;
  const int nb = h->A->V->elem.nbasis;
  fe_buffer bc, ba, bm, bi, bk;
  fe_arg a[15];
  memcpy(a, F->args, sizeof a);
  a[0] = (fe_arg){.kind = FE_ARG_INT, .i = (count + F->sh.block - 1) / F->sh.block};
  a[1] = (fe_arg){.kind = FE_ARG_INT, .i = count};
  int rc = be->ops->wrap(be->impl, (void *)cells, sizeof(int) * (size_t)count * nb, &bc);
  if (!rc) rc = be->ops->wrap(be->impl, (void *)ids, sizeof(int) * (size_t)count, &bi);
  if (!rc) rc = be->ops->wrap(be->impl, K, kslots * F->kn * fe_precision_size(h->prec), &bk);
  a[3] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bc};
  a[13] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bi};
  a[14] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bk};
  a[6] = a[7]; /* no constants, no maps: a word the kernel does not read */
  a[8] = a[7];
  if (!rc && aux) {
    rc = be->ops->wrap(be->impl, (void *)aux, (size_t)count * F->aux_bytes, &ba);
    a[6] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &ba};
  }
  if (!rc && maps) {
    rc = be->ops->wrap(be->impl, (void *)maps, sizeof(int) * (size_t)count * F->nbf, &bm);
    a[8] = (fe_arg){.kind = FE_ARG_BUFFER, .buf = &bm};
  }
  if (rc) return rc;
  return be->ops->launch(be->impl, F->k, (size_t)a[0].i, F->sh.items, 15, a, h->prec, NULL);
}

int host_fill_cells(const host_fill *F, int c0, int n, fill_scratch *x, void *K, size_t kslots)
{
  const size_t c = (size_t)c0;
  const int nb = F->h.A->V->elem.nbasis;
  x->launches++;
  x->made += n;
  return host_fill_launch(F, F->h.A->V->cell_nodes + c * nb,
                          F->aux ? F->aux + c * F->aux_bytes : NULL,
                          F->maps ? F->maps + c * F->nbf : NULL, x->ids, n, K, kslots);
}

/* The window for rows [a0, a1). A row spans its cells from the first to the last; rows
 * spanning more than 4 times the spans of 99% of the rows (outliers: a few cells far from
 * the others in the mesh's order) have their cells computed apart, so that they neither
 * widen the window nor move its front. W: the widest span from a row's first cell to the
 * front when it is summed (the last cell of the rows so far, plus a launch), as a power of
 * two up to about F->window. Its matrices are allocated by the caller (window_bytes). */
void window_make(const host_fill *F, const pattern *P, int a0, int a1, cell_window *w)
{
  long long need = 0;
  const long long fit = 4LL << span_exponent(P, a0, a1); /* 4 times the 99th percentile */
  int first = P->V->mesh->ncells, last = -1;
  for (int p = a0; p < a1; p++) {
    const int a = P->order ? P->order[p] : p;
    if (P->first[a] < 0) continue;
    const int cmin = P->first[a], cmax = P->last[a];
    if (cmax - cmin + 1 > fit) continue;
    first = cmin < first ? cmin : first;
    last = cmax > last ? cmax : last;
    need = last + 1 - cmin > need ? last + 1 - cmin : need;
  }
  need += F->batch;
  size_t W = 1;
  while (W < (size_t)need && W < F->window) W *= 2;
  *w = (cell_window){.W = (int)W, .front = last >= first ? first : 0, .end = last + 1,
                     .fit = (int)(fit < (long long)W - F->batch ? fit : (long long)W - F->batch)};
}

/* The bytes of window w's matrices: W slots, then maxdeg for a row computed apart. */
size_t window_bytes(const host_fill *F, const pattern *P, const cell_window *w)
{
  return ((size_t)w->W + (size_t)P->maxdeg) * F->kn * fe_precision_size(F->h.prec);
}

/* A row's deg cells' slots: in the window when the row fits it and its cells are all there
 * once the front has passed the last of them (moved on as far as needed, in launches of
 * F->batch cells), else computed apart (gathered into one launch). Called by threads (a
 * failure: its code). */
int window_row(const host_fill *F, const pattern *P, cell_window *w, const int *cells, int deg,
               fill_scratch *x)
{
  const int B = F->batch, cmin = cells[0], cmax = cells[deg - 1];
  int front = w->front;
  while (cmax - cmin < w->fit && front <= cmax) front = front + B < w->end ? front + B : w->end;
  if (cmax - cmin < w->fit && cmin >= front - w->W) {
    while (w->front < front) { /* the front's launches */
      const size_t c = (size_t)w->front;
      const int n = front - w->front < B ? front - w->front : B;
      for (int s = 0; s < n; s++) x->ids[s] = (int)((c + s) & (size_t)(w->W - 1));
      int rc = host_fill_cells(F, w->front, n, x, w->K, (size_t)w->W);
      if (rc) return rc;
      w->front += n;
    }
    for (int i = 0; i < deg; i++) x->slot[i] = cells[i] & (w->W - 1);
    return 0;
  }
  for (int i = 0; i < deg; i++) x->slot[i] = w->W + i; /* apart: gathered */
  return host_fill_gathered(F, cells, deg, w->W, x, w->K, (size_t)w->W + P->maxdeg);
}

int host_fill_gathered(const host_fill *F, const int *cells, int n, int slot0, fill_scratch *x,
                       void *K, size_t kslots)
{
  const int nb = F->h.A->V->elem.nbasis, *cn = F->h.A->V->cell_nodes;
  if (n > x->gcap) return FE_ERR_INTERNAL; /* more than the scratch holds: a caller's error */
  for (int i = 0; i < n; i++) {
    const size_t c = (size_t)cells[i];
    memcpy(x->gcells + (size_t)i * nb, cn + c * nb, sizeof(int) * nb);
    if (F->aux) memcpy(x->gaux + i * F->aux_bytes, F->aux + c * F->aux_bytes, F->aux_bytes);
    if (F->maps) memcpy(x->gmaps + (size_t)i * F->nbf, F->maps + c * F->nbf, sizeof(int) * F->nbf);
    x->ids[i] = slot0 + i;
  }
  x->launches++;
  x->made += n;
  return host_fill_launch(F, x->gcells, F->aux ? x->gaux : NULL, F->maps ? x->gmaps : NULL,
                          x->ids, n, K, kslots);
}

/* Prefetch the matrices of a row's deg cells that the window holds (the next row's, while
 * this one is summed: their reads miss the cache, the window being about a layer of cells). */
void window_prefetch(const host_fill *F, const cell_window *w, const int *cells, int deg)
{
  const size_t bytes = F->kn * fe_precision_size(F->h.prec);
  for (int t = 0; t < deg; t++) {
    const int c = cells[t];
    if (c >= w->front || c < w->front - w->W) continue;
    const char *k = (const char *)w->K + (size_t)(c & (w->W - 1)) * bytes;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(k + b);
  }
}
