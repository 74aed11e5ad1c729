/* A split space's exchange on a device: fe_dist's index lists written once to each backend
 * (and precision) a vector of the space lives on, the exchange module compiled there, and the
 * two steps the host needs of a vector: its entries at a list, packed on the device and read
 * (a few thousand values where the vector has millions), and the shared entries' sums, from
 * the neighbours' shares written to the device. */
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/core/strbuf.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/exchange.h"
#include "engine/perf/perf.h"

enum { ITEMS = FE_DIST_GROUP }; /* entries a group */

enum { DOT_GROUPS = 64 }; /* the corrections' groups at most (each item 4 entries or more) */

struct fe_dist_device {
  const fe_dist *d;
  fe_backend *be;
  fe_precision prec;
  fe_module *mod;
  fe_kernel *gather, *sum, *dot;
  fe_buffer send_at, not_at, shared_at, src_start, src_slot; /* d's lists */
  fe_buffer packed;     /* the shares gathered for the host: max(nsend, 2 DOT_GROUPS) reals */
  fe_buffer sums;       /* the corrections' group sums: 2 DOT_GROUPS reals */
  int dot_groups;       /* the correction queued (fe_dist_device_dot_launch): its groups */
  fe_buffer recv;       /* the neighbours' shares: nsend reals */
  /* host memory the copies cross (page-locked where the backend has it: host_alloc): */
  double *hsend, *hrecv; /* the shares sent and received, nsend doubles each */
  void *hreal;          /* the device's reals on their way (single precision's shares, the
                         * corrections' group sums): as many as packed */
  void *pending;        /* the messages of an exchange begun (fe_comm_exchange_begin) */
  /* Neighbours on this machine, a backend with interprocess buffers (cuda): each rank's shares
   * stay on its device, in two buffers used in turn, and each neighbour copies its block
   * device to device; only a one-value message a neighbour (the shares are ready) goes
   * through MPI. ipc: 0 not tried yet, 1 on, -1 off (host-staged). */
  int ipc, turn;
  int unposted;         /* the ipc path's shares gathered, their messages not yet posted */
  int fetched;          /* the ipc path's neighbours' shares already copied (fetch) */
  double gathered_s;    /* the last exchange's wait for its gather's mark (the ipc path) */
  fe_buffer out[2];     /* this rank's shares, in the send layout: nsend reals each */
  fe_buffer *peer;      /* neighbour k's two buffers: peer[2 k], peer[2 k + 1] */
  int *at, *from, *count; /* block k: here at[k], there from[k] (entries), count[k] entries */
  double *token;        /* the one-value messages: nnb sent, nnb received */
  /* CG's sums over the ranks on the devices (backend.h's fe_node_sum), where every rank is on
   * this machine on a device of its own: node 0 not tried yet, 1 on, -1 off */
  int node;
  fe_buffer box, peers;  /* this rank's mailbox; the ranks' mailboxes' addresses */
  fe_buffer *boxes;      /* the others' mailboxes, opened here (size of them; own unused) */
  double seq;            /* the sums made so far */
};

static void *host_alloc(fe_backend *be, size_t bytes)
{
  return be->ops->host_alloc ? be->ops->host_alloc(be->impl, bytes) : malloc(bytes);
}

static void host_free(fe_backend *be, void *p)
{
  if (be->ops->host_alloc) be->ops->host_free(be->impl, p);
  else free(p);
}

void fe_dist_device_free(fe_dist_device *v)
{
  if (!v) return;
  const fe_backend_ops *ops = v->be->ops;
  fe_buffer *bufs[] = {&v->send_at, &v->not_at, &v->shared_at, &v->src_start, &v->src_slot,
                       &v->packed, &v->recv, &v->sums};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    if (bufs[i]->ptr) ops->release(v->be->impl, bufs[i]);
  if (v->mod) ops->module_free(v->be->impl, v->mod);
  if (v->pending) fe_comm_exchange_end(v->pending);
  for (int k = 0; v->peer && k < 2 * v->d->nnb; k++)
    if (v->peer[k].ptr) ops->ipc_close(v->be->impl, &v->peer[k]);
  for (int i = 0; i < 2; i++)
    if (v->out[i].ptr) ops->release(v->be->impl, &v->out[i]);
  for (int p = 0; v->boxes && p < v->d->size; p++)
    if (v->boxes[p].ptr) ops->ipc_close(v->be->impl, &v->boxes[p]);
  free(v->boxes);
  if (v->box.ptr) ops->release(v->be->impl, &v->box);
  if (v->peers.ptr) ops->release(v->be->impl, &v->peers);
  free(v->peer), free(v->at), free(v->token); /* from and count lie in at's block */
  host_free(v->be, v->hsend);
  host_free(v->be, v->hrecv);
  host_free(v->be, v->hreal);
  free(v);
}

/* n ints to a new buffer on v's backend (one int at least: no allocation of 0 bytes). */
static int write_ints(fe_dist_device *v, const int *a, int n, fe_buffer *buf)
{
  FE_CHECK(v->be->ops->alloc(v->be->impl, sizeof(int) * ((size_t)n + 1), buf));
  return n ? v->be->ops->write(v->be->impl, buf, 0, sizeof(int) * (size_t)n, a) : 0;
}

/* The exchange module on v's backend and precision, and its two kernels. */
static int device_module(fe_dist_device *v)
{
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab's exchange of a split space, %s backend, %s precision */\n"
                   "#define FE_DOUBLE %d\n#define FE_COLORED 0\n#define FE_DIST_ITEMS %d\n",
                   v->be->name, fe_precision_name(v->prec), v->prec == FE_DOUBLE, (int)ITEMS);
  fe_strbuf_append(&b, v->be->ops->preamble(v->be->impl, v->prec));
  fe_strbuf_append(&b, fe_kernel_template("exchange"));
  char *src;
  FE_CHECK(fe_strbuf_finish(&b, &src));
  double s;
  int cached;
  int rc = fe_compile(v->be, src, &v->mod, &s, &cached);
  free(src);
  FE_CHECK(rc);
  FE_CHECK(v->be->ops->kernel(v->be->impl, v->mod, "fe_dist_gather", &v->gather));
  FE_CHECK(v->be->ops->kernel(v->be->impl, v->mod, "fe_dist_dot", &v->dot));
  return v->be->ops->kernel(v->be->impl, v->mod, "fe_dist_sum", &v->sum);
}

static int device_make(const fe_dist *d, fe_backend *be, fe_precision prec, fe_dist_device *v)
{
  *v = (fe_dist_device){.d = d, .be = be, .prec = prec};
  const size_t w = fe_precision_size(prec);
  const int most = d->nsend > 2 * DOT_GROUPS ? d->nsend : 2 * DOT_GROUPS;
  FE_CHECK(device_module(v));
  FE_CHECK(write_ints(v, d->send_at, d->nsend, &v->send_at));
  FE_CHECK(write_ints(v, d->not_at, d->nnot, &v->not_at));
  FE_CHECK(write_ints(v, d->shared_at, d->nshared, &v->shared_at));
  FE_CHECK(write_ints(v, d->src_start, d->nshared + 1, &v->src_start));
  FE_CHECK(write_ints(v, d->src_slot, d->src_start[d->nshared], &v->src_slot));
  FE_CHECK(be->ops->alloc(be->impl, w * ((size_t)most + 1), &v->packed));
  FE_CHECK(be->ops->alloc(be->impl, w * ((size_t)d->nsend + 1), &v->recv));
  FE_CHECK(be->ops->alloc(be->impl, w * 2 * DOT_GROUPS, &v->sums));
  v->hsend = host_alloc(be, sizeof(double) * ((size_t)d->nsend + 1));
  v->hrecv = host_alloc(be, sizeof(double) * ((size_t)d->nsend + 1));
  v->hreal = host_alloc(be, w * ((size_t)most + 1));
  FE_ASSERT(v->hsend && v->hrecv && v->hreal, FE_ERR_MEM, "out of host memory for the "
            "exchange's buffers (%d entries)", most);
  return 0;
}

int fe_dist_device_get(const fe_dist *d, fe_backend *be, fe_precision prec, fe_dist_device **dev)
{
  int i = 0;
  for (; i < FE_DIST_DEVICES && d->dev[i]; i++)
    if (d->dev[i]->be == be && d->dev[i]->prec == prec) {
      *dev = d->dev[i];
      return 0;
    }
  FE_ASSERT(i < FE_DIST_DEVICES, FE_ERR_INTERNAL, "a split space's vectors on more than %d "
            "backends and precisions", FE_DIST_DEVICES);
  fe_dist_device *v;
  FE_CALLOC(v, 1, "a split space's exchange on a device");
  int rc = device_make(d, be, prec, v);
  if (rc) {
    fe_dist_device_free(v);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  d->dev[i] = *dev = v;
  return 0;
}

/* Launch k over n entries (nothing where n is 0) with its arguments after (ngroups, n, items). */
static int launch(fe_dist_device *v, fe_kernel *k, int n, int nargs, const fe_arg *rest)
{
  if (!n) return 0;
  const int ng = (n + ITEMS - 1) / ITEMS;
  fe_arg args[8] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = n},
                    {.kind = FE_ARG_INT, .i = ITEMS}};
  memcpy(args + 3, rest, sizeof(fe_arg) * (size_t)nargs);
  size_t gs = ITEMS > v->be->info.max_group ? v->be->info.max_group : ITEMS;
  return v->be->ops->launch(v->be->impl, k, (size_t)ng, gs, 3 + nargs, args, v->prec, NULL);
}

/* y's shared entries in the send layout, gathered on the device (packed) and read into the
 * host's v->hsend (doubles; single precision through v->hreal). */
static int pack_to_host(fe_dist_device *v, const fe_vector *y)
{
  FE_ASSERT(y->be == v->be && y->prec == v->prec, FE_ERR_INTERNAL, "an exchange's gather of a "
            "vector on another backend or precision");
  const int n = v->d->nsend;
  if (!n) return 0;
  const fe_arg args[3] = {{.kind = FE_ARG_BUFFER, .buf = &v->send_at},
                          {.kind = FE_ARG_BUFFER, .buf = &y->buf},
                          {.kind = FE_ARG_BUFFER, .buf = &v->packed}};
  FE_CHECK(launch(v, v->gather, n, 3, args));
  /* the read waits for the gather (in the queue's order) */
  if (v->prec == FE_DOUBLE)
    return v->be->ops->read(v->be->impl, &v->packed, 0, sizeof(double) * (size_t)n, v->hsend);
  FE_CHECK(v->be->ops->read(v->be->impl, &v->packed, 0, sizeof(float) * (size_t)n, v->hreal));
  const float *h = v->hreal;
  for (int k = 0; k < n; k++) v->hsend[k] = h[k];
  return 0;
}

/* The interprocess path's setup (collective: every rank, at its first exchange): on where
 * every rank can take it (the backend has interprocess buffers, every neighbour is on this
 * machine, FELAB_EXCHANGE_IPC is not 0, and each buffer opened), else host-staged on every
 * rank alike. Each rank sends a neighbour its buffers' handles and where its block for that
 * neighbour starts. */
static int ipc_setup(fe_dist_device *v, int nnb, const int *ranks, const int *counts)
{
  const fe_backend_ops *ops = v->be->ops;
  const char *env = getenv("FELAB_EXCHANGE_IPC");
  int node, ok = ops->ipc_export && ops->copy_async && !(env && *env == '0') && v->d->nsend;
  v->ipc = -1;
  FE_CHECK(fe_comm_node(&node));
  enum { REC = 19 }; /* doubles a neighbour: two 64-byte handles, the block's start, the node,
                      * the buffers' length */
  double *send = calloc((size_t)nnb * 2 * REC + 1, sizeof(double)), *recv = send + nnb * REC;
  int *recs = malloc(sizeof(int) * ((size_t)nnb + 1));
  const size_t w = fe_precision_size(v->prec);
  v->peer = calloc(2 * (size_t)nnb + 1, sizeof(fe_buffer));
  v->at = malloc(sizeof(int) * (3 * (size_t)nnb + 1));
  v->token = calloc(2 * (size_t)nnb + 1, sizeof(double));
  if (!send || !recs || !v->peer || !v->at || !v->token) ok = 0;
  for (int i = 0; ok && i < 2; i++)
    ok = !ops->alloc(v->be->impl, w * ((size_t)v->d->nsend + 1), &v->out[i]);
  if (ok) {
    v->from = v->at + nnb, v->count = v->at + 2 * nnb;
    for (int k = 0, off = 0; k < nnb; off += counts[k++]) {
      unsigned char h[2][64];
      ok = ok && !ops->ipc_export(v->be->impl, &v->out[0], h[0]) &&
           !ops->ipc_export(v->be->impl, &v->out[1], h[1]);
      memcpy(send + k * REC, h, sizeof h);
      send[k * REC + 16] = off;  /* where this rank's block for k starts */
      send[k * REC + 17] = node; /* a neighbour on another machine turns the path off */
      send[k * REC + 18] = v->d->nsend; /* its buffers' entries (a neighbour's own count) */
      v->at[k] = off, v->count[k] = counts[k];
      recs[k] = REC;
    }
  }
  int nok = !ok, rc = 0;
  FE_CHECK(fe_comm_max_int(&nok, 1));
  if (!nok) rc = fe_comm_exchange_v(nnb, ranks, recs, send, recs, recv);
  for (int k = 0; !rc && !nok && k < nnb; k++) {
    const int theirs = (int)recv[k * REC + 17];
    v->from[k] = (int)recv[k * REC + 16];
    unsigned char h[2][64];
    memcpy(h, recv + k * REC, sizeof h);
    ok = ok && theirs == node;
    for (int i = 0; ok && i < 2; i++)
      ok = !ops->ipc_import(v->be->impl, h[i], w * ((size_t)recv[k * REC + 18] + 1),
                            &v->peer[2 * k + i]);
  }
  if (!nok) {
    nok = !ok;
    FE_CHECK(fe_comm_max_int(&nok, 1));
  }
  free(send), free(recs);
  fe_error_clear(); /* a failed export or import: host-staged, as every rank agreed */
  v->ipc = nok ? -1 : 1;
  return rc;
}

int fe_dist_device_begin(fe_dist_device *v, const fe_vector *y, int nnb, const int *ranks,
                         const int *counts)
{
  FE_ASSERT(!v->pending, FE_ERR_INTERNAL, "an exchange begun before the last one ended");
  if (!v->ipc) FE_CHECK(ipc_setup(v, nnb, ranks, counts));
  if (v->ipc < 0) {
    FE_CHECK(pack_to_host(v, y));
    return fe_comm_exchange_begin(nnb, ranks, counts, v->hsend, v->hrecv, &v->pending);
  }
  /* this turn's buffer: the neighbours' copies of the turn before last are done (each sent
   * its last message after its queue had run them) */
  const fe_arg args[3] = {{.kind = FE_ARG_BUFFER, .buf = &v->send_at},
                          {.kind = FE_ARG_BUFFER, .buf = &y->buf},
                          {.kind = FE_ARG_BUFFER, .buf = &v->out[v->turn]}};
  /* following the boundary cells' kernel: its groups placed while that kernel runs, before
   * the interior's kernel (queued next) fills the device; else they would wait for a place
   * until the interior's groups leave one (docs/parallel.md) */
  const fe_backend_ops *ops = v->be->ops;
  if (ops->follow) FE_CHECK(ops->follow(v->be->impl));
  FE_CHECK(launch(v, v->gather, v->d->nsend, 3, args));
  /* the messages go once the gather is done (fe_dist_device_wait), so that the host need not
   * wait for it here: the interior cells' kernel queued after it meanwhile */
  if (ops->mark) FE_CHECK(ops->mark(v->be->impl, FE_MARK_GATHERED));
  v->unposted = 1; /* to d's neighbours, as ranks says (fe_dist_sum_begin) */
  return 0;
}

/* The ipc path's messages: one value a neighbour, once this rank's shares are there for them
 * to read (the gather's mark waited for). */
static int post_tokens(fe_dist_device *v)
{
  const fe_backend_ops *ops = v->be->ops;
  v->unposted = 0;
  double t0 = fe_clock();
  FE_CHECK(ops->mark_wait ? ops->mark_wait(v->be->impl, FE_MARK_GATHERED) : ops->finish(v->be->impl));
  v->gathered_s = fe_clock() - t0;
  const fe_dist *d = v->d;
  int ones[256], ranks[256]; /* d->nnb <= 256 (dist.c) */
  for (int k = 0; k < d->nnb && k < 256; k++) ones[k] = 1, ranks[k] = d->nb[k].rank;
  return fe_comm_exchange_begin(d->nnb, ranks, ones, v->token, v->token + d->nnb, &v->pending);
}

int fe_dist_device_direct(const fe_dist *d, const fe_backend *be, fe_precision prec)
{
  for (int i = 0; i < FE_DIST_DEVICES && d->dev[i]; i++)
    if (d->dev[i]->be == be && d->dev[i]->prec == prec) return d->dev[i]->ipc > 0;
  return 0;
}

double fe_dist_device_gathered(const fe_dist_device *v) { return v->gathered_s; }

int fe_dist_device_wait(fe_dist_device *v)
{
  if (v->unposted) FE_CHECK(post_tokens(v));
  void *pending = v->pending;
  v->pending = NULL;
  return fe_comm_exchange_end(pending);
}

int fe_dist_device_fetch(fe_dist_device *v)
{
  FE_CHECK(fe_dist_device_wait(v));
  const fe_dist *d = v->d;
  if (v->ipc <= 0 || !d->nsend || v->fetched) return 0;
  /* each neighbour's block, from its device, in the queue's order */
  const size_t w = fe_precision_size(v->prec);
  for (int k = 0; k < d->nnb; k++)
    FE_CHECK(v->be->ops->copy_async(v->be->impl, &v->recv, w * (size_t)v->at[k],
                                    &v->peer[2 * k + v->turn], w * (size_t)v->from[k],
                                    w * (size_t)v->count[k]));
  v->turn ^= 1;
  v->fetched = 1;
  return 0;
}

int fe_dist_device_end(fe_dist_device *v, fe_vector *y)
{
  FE_ASSERT(y->be == v->be && y->prec == v->prec, FE_ERR_INTERNAL, "an exchange's sum into a "
            "vector on another backend or precision");
  FE_CHECK(fe_dist_device_fetch(v));
  v->fetched = 0; /* the next exchange's copies are its own */
  const fe_dist *d = v->d;
  if (!d->nsend) return 0;
  /* device to device the neighbours' shares are copied already (fetch); else from the host */
  if (v->ipc <= 0 && v->prec == FE_DOUBLE) {
    FE_CHECK(v->be->ops->write(v->be->impl, &v->recv, 0, sizeof(double) * (size_t)d->nsend,
                               v->hrecv));
  } else if (v->ipc <= 0) {
    float *h = v->hreal;
    for (int k = 0; k < d->nsend; k++) h[k] = (float)v->hrecv[k]; /* floats sent: exact */
    FE_CHECK(v->be->ops->write(v->be->impl, &v->recv, 0, sizeof(float) * (size_t)d->nsend, h));
  }
  const fe_arg args[5] = {
      {.kind = FE_ARG_BUFFER, .buf = &v->shared_at}, {.kind = FE_ARG_BUFFER, .buf = &v->src_start},
      {.kind = FE_ARG_BUFFER, .buf = &v->src_slot},  {.kind = FE_ARG_BUFFER, .buf = &v->recv},
      {.kind = FE_ARG_BUFFER, .buf = &y->buf}};
  return launch(v, v->sum, d->nshared, 5, args);
}

int fe_dist_device_dot_launch(fe_dist_device *v, const fe_vector *x, const fe_vector *y,
                              int mode)
{
  FE_ASSERT(x->be == v->be && x->prec == v->prec && (!y || (y->be == v->be && y->prec == v->prec)),
            FE_ERR_INTERNAL, "a correction of a vector on another backend or precision");
  const int n = v->d->nnot;
  v->dot_groups = 0;
  if (!n) return 0;
  int ng = (n + 4 * ITEMS - 1) / (4 * ITEMS);
  if (ng > DOT_GROUPS) ng = DOT_GROUPS;
  const fe_arg args[7] = {{.kind = FE_ARG_INT, .i = ng},
                          {.kind = FE_ARG_INT, .i = n},
                          {.kind = FE_ARG_BUFFER, .buf = &v->not_at},
                          {.kind = FE_ARG_BUFFER, .buf = &x->buf},
                          {.kind = FE_ARG_BUFFER, .buf = y ? &y->buf : &x->buf},
                          {.kind = FE_ARG_INT, .i = mode},
                          {.kind = FE_ARG_BUFFER, .buf = &v->sums}};
  size_t gs = ITEMS > v->be->info.max_group ? v->be->info.max_group : ITEMS;
  FE_CHECK(v->be->ops->launch(v->be->impl, v->dot, (size_t)ng, gs, 7, args, v->prec, NULL));
  v->dot_groups = ng;
  return 0;
}

int fe_dist_device_dot_queued(const fe_dist_device *v) { return v->dot_groups > 0; }

void fe_dist_device_dot_drop(fe_dist_device *v) { v->dot_groups = 0; }

int fe_dist_device_dot_read(fe_dist_device *v, double out[2])
{
  out[0] = out[1] = 0;
  const int ng = v->dot_groups;
  v->dot_groups = 0;
  if (!ng) return 0;
  const size_t w = fe_precision_size(v->prec);
  FE_CHECK(v->be->ops->read(v->be->impl, &v->sums, 0, w * 2 * (size_t)ng, v->hreal));
  for (int k = 0; k < 2 * ng; k++) /* in order: the same bits at every run */
    out[k / ng] += v->prec == FE_DOUBLE ? ((const double *)v->hreal)[k]
                                        : ((const float *)v->hreal)[k];
  return 0;
}

/* The node's mailboxes (fe_node_sum): made where every rank is on this machine, each on a
 * device of its own (a device shared by two ranks would run one rank's waiting kernel in
 * its time slices: the other's sums then wait a slice), the backend has them and the
 * neighbours' shares go device to device; every rank agrees, else none (the host's sums). */
static int node_setup(fe_dist_device *v)
{
  const fe_dist *d = v->d;
  const fe_backend_ops *ops = v->be->ops;
  const char *env = getenv("FELAB_NODE_SUMS");
  int size = d->size, ok = v->ipc > 0 && v->be->info.node_sums && ops->cg_split &&
                          size <= FE_NODE_RANKS && !(env && *env == '0');
  int nok = !ok;
  v->node = -1;
  FE_CHECK(fe_comm_max_int(&nok, 1));
  if (nok) return 0;
  enum { REC = 10 }; /* a rank's record: its node, its device, its mailbox's handle (64 bytes) */
  double send[REC] = {0}, recv[FE_NODE_RANKS * REC];
  int ranks[FE_NODE_RANKS], counts[FE_NODE_RANKS], node, n = 0;
  const size_t bytes = 2 * (size_t)size * 4 * sizeof(double);
  double zero[2 * FE_NODE_RANKS * 4] = {0};
  FE_CHECK(fe_comm_node(&node));
  ok = !ops->alloc(v->be->impl, bytes, &v->box) && !ops->write(v->be->impl, &v->box, 0, bytes, zero);
  unsigned char h[64] = {0};
  ok = ok && !ops->ipc_export(v->be->impl, &v->box, h);
  send[0] = node, send[1] = v->be->info.device_index;
  memcpy(send + 2, h, sizeof h);
  for (int p = 0; p < size; p++)
    if (p != d->rank) ranks[n] = p, counts[n++] = REC;
  FE_CHECK(fe_comm_exchange_v(n, ranks, counts, send, counts, recv));
  v->boxes = calloc((size_t)size, sizeof(fe_buffer));
  unsigned long long at[FE_NODE_RANKS] = {0};
  ok = ok && v->boxes;
  for (int k = 0; ok && k < n; k++) {
    const double *r = recv + k * REC;
    ok = r[0] == node && r[1] != v->be->info.device_index;
    memcpy(h, r + 2, sizeof h);
    ok = ok && !ops->ipc_import(v->be->impl, h, bytes, &v->boxes[ranks[k]]);
    if (ok) at[ranks[k]] = (unsigned long long)(size_t)v->boxes[ranks[k]].ptr;
  }
  ok = ok && !ops->alloc(v->be->impl, sizeof at, &v->peers) &&
       !ops->write(v->be->impl, &v->peers, 0, sizeof at, at);
  fe_error_clear(); /* a failed step: the host's sums, as every rank agrees */
  nok = !ok;
  FE_CHECK(fe_comm_max_int(&nok, 1));
  v->node = nok ? -1 : 1;
  return 0;
}

int fe_dist_device_node(fe_dist_device *v, int corrected, fe_node_sum *ns, int *on)
{
  if (!v->node) FE_CHECK(node_setup(v));
  *on = v->node > 0;
  if (!*on || !ns) return 0;
  *ns = (fe_node_sum){.box = &v->box, .peers = &v->peers, .rank = v->d->rank,
                      .size = v->d->size, .seq = ++v->seq, .corr_prec = v->prec};
  if (corrected && v->dot_groups) ns->corr = &v->sums, ns->ncorr = v->dot_groups;
  v->dot_groups = 0; /* the correction queued is this sum's */
  return 0;
}
