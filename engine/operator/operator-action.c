/* The actions of an operator (residual, apply, diagonal) on one of its realizations: the
 * kernel compiled on first use, the inputs converted, the physics' constants and fields bound,
 * the direction masked, the integration, the constrained rows fixed, and the report with
 * counted, measured and predicted figures; also the initial vector, prepare, the model's
 * report and the kernel's source. Part of engine/operator/operator.c's operator
 * (operator-private.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/link.h"
#include "engine/core/progress.h"
#include "engine/operator/operator.h"
#include "engine/operator/operator-private.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

/* Generate and compile an action's kernel on first use. */
static int realization_kernel(fe_realization *r, fe_action a, double *compile_seconds)
{
  *compile_seconds = 0;
  if (r->kernel[a]) return 0;
  char *src;
  FE_CHECK(r->st->source(r, a, r->be->ops->preamble(r->be->impl, r->prec), &src));
  int cached = 0;
  int rc = fe_compile(r->be, src, &r->module[a], compile_seconds, &cached);
  free(src);
  FE_CHECK(rc);
  r->kernel_from[a] = cached ? 2 : 1;
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->module[a], r->st->entry(a), &r->kernel[a]));
  FE_CHECK(r->be->ops->kernel(r->be->impl, r->module[a], "fe_dirichlet", &r->dirichlet[a]));
  return 0;
}

/* The kernel whose groups action a's report counts. */
static fe_kernel *counted_kernel(const fe_realization *r, fe_action a)
{
  fe_kernel *k = r->st->counted_kernel ? r->st->counted_kernel(r, a) : NULL;
  return k ? k : r->kernel[a];
}

/* y[i] <- a src[i] + b g_i + c on the constrained rows. */
static int op_dirichlet(fe_realization *r, fe_action act, const fe_vector *src, double a,
                        double b, double c, fe_vector *y, int *launches)
{
  fe_operator *A = r->A;
  if (A->ndir == 0) return 0;
  enum { ITEMS = 256 }; /* constrained rows a group */
  int ng = (A->ndir + ITEMS - 1) / ITEMS;
  fe_arg args[10] = {
      {.kind = FE_ARG_INT, .i = ng},            {.kind = FE_ARG_INT, .i = A->ndir},
      {.kind = FE_ARG_INT, .i = ITEMS},         {.kind = FE_ARG_BUFFER, .buf = &r->didx},
      {.kind = FE_ARG_BUFFER, .buf = &r->dval}, {.kind = FE_ARG_BUFFER, .buf = &src->buf},
      {.kind = FE_ARG_REAL, .r = a},            {.kind = FE_ARG_REAL, .r = b},
      {.kind = FE_ARG_REAL, .r = c},            {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  size_t gs = ITEMS > r->be->info.max_group ? r->be->info.max_group : ITEMS;
  FE_CHECK(r->be->ops->launch(r->be->impl, r->dirichlet[act], (size_t)ng, gs, 10, args, r->prec, NULL));
  (*launches)++;
  return 0;
}

/* An input on the action's backend and precision: itself, or a converted copy (*tmp). */
static int op_input(const fe_vector *x, const fe_realization *r, int n, const fe_vector **use,
                    fe_vector **tmp, double *transfer)
{
  *tmp = NULL;
  *use = x;
  if (!x) return 0;
  FE_ASSERT(x->n == n, FE_ERR_ARG, "the vector has %d entries but the operator's space has %d",
            x->n, n);
  if (x->be == r->be && x->prec == r->prec) return 0;
  double t0 = fe_clock();
  FE_CHECK(fe_vector_convert(x, r->be, r->prec, tmp));
  *transfer += fe_clock() - t0;
  *use = *tmp;
  return 0;
}

/* The physics' current constants and auxiliary fields on the action's device: constants
 * are written again when they changed, fields converted when they live elsewhere. */
static int op_bind_physics(fe_realization *r, fe_vector **tmp, double *transfer)
{
  const fe_physics *p = r->A->pde;
  if (r->params_version != p->const_version) FE_CHECK(fe_upload_params(r->A, r));
  for (int i = 0; i < p->nfields; i++) {
    const fe_vector *use;
    FE_ASSERT(p->field_vec[i], FE_ERR_ARG, "the physics' field '%s' is not bound to a vector",
              p->field_names[i]);
    int rc = op_input(p->field_vec[i], r, p->field_space[i]->ndofs, &use, &tmp[i], transfer);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    r->fv[i] = &use->buf;
  }
  return 0;
}

int fe_realization_bind(fe_realization *r, fe_vector **tmp, double *transfer)
{
  return op_bind_physics(r, tmp, transfer);
}

void fe_realization_unbind(fe_realization *r, fe_vector **tmp)
{
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) {
    fe_vector_free(tmp[i]);
    tmp[i] = NULL;
    r->fv[i] = NULL;
  }
}

/* The output: reuse *out when it fits, else make one. */
static int op_output(const fe_realization *r, int n, fe_vector **out)
{
  if (*out) {
    FE_ASSERT((*out)->be == r->be && (*out)->prec == r->prec && (*out)->n == n, FE_ERR_ARG,
              "the output vector does not match the action (%s/%s, %d entries)", r->be->name,
              fe_precision_name(r->prec), n);
    return 0;
  }
  FE_CHECK(fe_vector_create(r->be, r->prec, n, out));
  (*out)->dist = r->A->V->dist; /* a split space's: its reductions over the ranks */
  return 0;
}

void fe_report_operator(fe_report *rep, const fe_operator *A, fe_action rule)
{
  const fe_quadrature *Q = &A->quad[rule];
  snprintf(rep->space, sizeof rep->space, "%s%s%s on %s", A->V->name, A->V->ncomp > 1 ? "^" : "",
           A->V->ncomp > 1 ? (A->V->ncomp == 2 ? "2" : "3") : "", fe_cell_name(A->V->elem.cell));
  snprintf(rep->quadrature, sizeof rep->quadrature, "%s, %d points, degree %d",
           Q->name ? Q->name : "?", Q->npoints, Q->degree);
  rep->ncells = A->V->mesh->ncells;
  rep->ndofs = A->V->ndofs;
}

/* The strategy's counts of action a on r, counted on first use. */
static const fe_work *realization_work(fe_realization *r, fe_action a)
{
  if (!r->counted[a]) {
    memset(&r->work[a], 0, sizeof r->work[a]);
    r->st->count(r, a, &r->work[a]);
    r->counted[a] = 1;
  }
  return &r->work[a];
}


/* When the gather's groups find places beside a first wave of groups of unequal work (q: its
 * groups' work over the average's at quantiles i / FE_XWAVE_QUANTILES, an even wave taking R):
 * the groups done before the gather is ready (`ready` seconds in) have left places to the
 * interior's next, and of the rest the gather needs a share `need` of the wave's places: the
 * time by which that share has left, over R (1 for alike groups). A P2 space's first wave is
 * its vertices' rows (2.2: the gather waits for them); P3's mixes rows of 0.1-3.8 times the
 * average, whose shortest leave places early. */
static double first_wave_places(const double *q, double R, double ready, double need)
{
  const int nq = FE_XWAVE_QUANTILES;
  int i0 = 0;
  while (i0 < nq && q[i0] * R < ready) i0++;
  const double at = i0 + fmin(1.0, fmax(0.0, need)) * (nq - i0);
  const int i = (int)at;
  return i >= nq ? q[nq] : q[i] + (at - i) * (q[i + 1] - q[i]);
}

/* A split space: the ranks of this machine on r's device (counted on its first split action,
 * every rank together), in rep: whether they take turns on it (a GPU's several, or a CPU's
 * ranks times threads past the machine's cores), said once on rank 0's stderr. */
static int op_sharers(const fe_realization *r, fe_report *rep)
{
  fe_backend *be = r->be;
  const int first = !be->sharers;
  if (first) FE_CHECK(fe_comm_node_count(be->info.share_key, &be->sharers));
  rep->device_sharers = be->sharers;
  static int cores; /* the machine's (read once) */
  if (!cores) cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (!be->info.is_gpu) {
    rep->device_threads = be->info.compute_units > 0 ? be->info.compute_units : 1;
    rep->device_cores = cores;
  }
  rep->device_turns = be->info.is_gpu ? be->sharers > 1
                      : rep->device_cores > 0 &&
                            (long long)be->sharers * rep->device_threads > rep->device_cores;
  if (first && rep->device_turns && fe_comm_rank() == 0) {
    if (be->info.is_gpu)
      fprintf(stderr, "felab: %d ranks of this machine run on one %s device (%s): their kernels "
              "take turns on it, each action slower than alone and than the reports predict; "
              "give each rank a device of its own (mpirun -np at most the devices)\n",
              be->sharers, be->name, be->info.name);
    else
      fprintf(stderr, "felab: %d ranks of %d thread%s on this machine's %d cores take turns on "
              "them, each action slower than the reports predict; ask for fewer (mpirun -np, "
              "OMP_NUM_THREADS)\n", be->sharers, rep->device_threads,
              rep->device_threads == 1 ? "" : "s", rep->device_cores);
  }
  return 0;
}

/* A split space: the model's time of this rank's exchange (engine/parallel/dist.c's counts,
 * the link of engine/parallel/link.c: collective on its first use) into rep, added to its
 * prediction. Nothing on one rank. */
static int op_predict_exchange(const fe_operator *A, const fe_realization *r, fe_report *rep)
{
  const fe_dist *d = A->V->dist;
  if (!d || d->size == 1) return 0;
  FE_CHECK(op_sharers(r, rep));
  fe_exchange_work x;
  fe_exchange_terms t;
  fe_dist_exchange_work(d, r->be, r->prec, &x);
  const fe_link *l; /* a cpu's exchange through the host: the link's measure of it too */
  if (!r->be->info.is_gpu && !x.direct) FE_CHECK(fe_link_get_host(&l));
  else FE_CHECK(fe_link_get(&l));
  const fe_calibration *c = &r->be->calib[r->prec];
  if (!r->be->info.is_gpu) /* what this rank's action took out of the cache (its own bytes:
                             * nearer the measured than every rank's, docs/benchmarks.md) */
    x.cold = fe_perf_exchange_cold(rep->bytes, fe_perf_exchange_keep(c, l));
  fe_perf_exchange(c, l, &x, &t);
  /* beside the interior's kernel, device to device on a GPU that can not make the gather
   * follow the boundary cells (info.follows 0; where it can, the gather's groups hold their
   * places before the interior's kernel starts and run as the boundary cells end: no wait,
   * docs/parallel.md): the gather, queued behind the boundary cells at the side queue's
   * priority, runs once the interior's groups leave places. Groups of one kernel, all of one
   * size, start and leave together, a wave at a time, every R (the action's time over its
   * waves): the gather waits R / 2 (measured, docs/benchmarks.md section 8), and the messages
   * wait for the last of the n neighbours' gathers too, (n + 1) R / (n + 2) in all (the
   * largest of n + 1 waits spread evenly over R). Where the first wave's groups differ (csr's
   * rows by kind: xwave), R is when the gather's own groups find places (first_wave_places). */
  const fe_device_info *di = &r->be->info;
  long long groups = rep->groups;
  int resident = rep->resident;
  const double *q = NULL; /* the first wave's groups' work, where they differ */
  if (r->xgroups > 0 || groups <= 0 || resident <= 0) /* the strategy's own (csr's product) */
    groups = r->xgroups, resident = r->xresident, q = r->xwave_known ? r->xwave : NULL;
  double wait = 0; /* the gather's */
  if (r->xbeside && x.direct && di->is_gpu && !di->follows && groups > 0 && resident > 0 &&
      di->compute_units > 0) {
    const double S = (double)di->compute_units * resident, waves = (double)groups / S;
    double R = rep->predicted_seconds / fmax(1.0, ceil(waves)), n = x.messages;
    const double ready = r->be->calib[r->prec].sync_us * 1e-6; /* the gather's own start */
    if (q && waves > 1) R *= first_wave_places(q, R, ready, ceil(x.entries / FE_DIST_GROUP) / S);
    wait = R / 2;
    rep->exchange_wave = R / (rep->predicted_seconds / fmax(1.0, ceil(waves)));
    t.gather += wait, t.link += (n + 1) / (n + 2) * R - wait, t.total += (n + 1) / (n + 2) * R;
  }
  rep->exchange_cold = x.cold;
  rep->exchange_host = !di->is_gpu && !x.direct && l && l->valid && l->nhost >= 2;
  rep->exchange_terms[FE_XPART_GATHER] = t.gather;
  rep->exchange_terms[FE_XPART_MESSAGES] = t.link;
  rep->exchange_terms[FE_XPART_COPIES] = t.read + t.write;
  rep->exchange_terms[FE_XPART_SUMS] = t.sum;
  rep->exchange_predicted = t.total;
  rep->exchange_link = t.link;
  rep->exchange_device = t.total - t.link;
  /* beside the interior cells (two phases) the messages travel while they run, and the
   * gather's wait for a place is theirs: hidden up to the cells' own time */
  const double hidden = r->xbeside ? fmin(t.link + wait, rep->predicted_seconds) : 0;
  rep->predicted_seconds += t.total - hidden;
  return 0;
}

/* Fill the report of one action and log it. */
static int op_report(fe_realization *r, fe_action a, const fe_action_opts *o, const char *why,
                     double seconds, double compile_s, double transfer, int launches,
                     int first_run, fe_report *rep)
{
  fe_report_begin(rep, fe_action_name(a), r->be, r->prec, r->st->name, why);
  rep->first_run = first_run;
  if (r->st->describe) { /* "<why>; <how>" */
    char how[96];
    size_t len = strlen(rep->why);
    r->st->describe(r, a, how, sizeof how);
    if (len + 2 < sizeof rep->why) snprintf(rep->why + len, sizeof rep->why - len, "; %s", how);
  }
  fe_report_operator(rep, r->A, a);
  fe_report_work(rep, realization_work(r, a));
  rep->seconds = seconds;
  rep->compile_seconds = compile_s;
  rep->transfer_seconds = transfer;
  rep->setup_seconds = r->setup_seconds;
  rep->parts = r->parts;
  double parts = fe_setup_parts_seconds(&r->parts);
  if (r->setup_seconds > parts) /* the strategy's own rest */
    fe_setup_part_add(&rep->parts, "strategy", r->setup_seconds - parts, 0);
  r->parts = (fe_setup_parts){0};
  r->setup_seconds = 0; /* reported by the first call only */
  rep->kernel_from = r->kernel_from[a] ? r->kernel_from[a] : 3;
  r->kernel_from[a] = 0;
  rep->launches = launches;
  fe_perf_occupancy(r->be, counted_kernel(r, a), rep);
  rep->exchange_bytes = r->xbytes, rep->exchange_messages = r->xmessages;
  rep->exchange_seconds = r->xseconds;
  memcpy(rep->exchange_parts, r->xparts, sizeof rep->exchange_parts);
  rep->exchange_beside = r->xbeside;
  rep->exchange_direct = r->xdirect;
  rep->exchange_follows = r->xdirect && r->be->info.follows;
  FE_CHECK(fe_perf_predict(r->be, r->prec, rep));
  FE_CHECK(op_predict_exchange(r->A, r, rep));
  if (!o || !o->nolog) fe_perf_log_add(rep);
  return 0;
}

/* Back to the main queue from a side section, the main queue waiting for the side's work
 * (even after an error rc, which it keeps). */
static int side_join(const fe_backend_ops *ops, void *impl, int rc)
{
  int rc3 = ops->side(impl, FE_SIDE_END);
  if (!rc3) rc3 = ops->side(impl, FE_SIDE_JOIN);
  return rc ? rc : rc3;
}

/* A split space's integration in two phases (fe_realization's phased): the cells with a
 * shared node, the exchange begun (their sums gathered), the other cells queued, the
 * messages posted and waited for while the device works, then the sums. The exchange's time
 * is the host's in its steps, the cells' work apart: the boundary cells are waited for before
 * its clock starts (inside the exchange's time they had been 15-30 us of its 38-59 on two
 * H200s, which the model predicts without them), the interior's run beside it.
 * Where the shares go device to device (fe_dist_direct) and the backend marks its queue, the
 * host waits for no kernel before the interior's is queued, and then for the boundary cells'
 * mark (untimed) and the gather's (the exchange's) before it posts the messages; the sums
 * follow the interior's kernel in the queue. Where the backend has a side queue and the
 * groups add atomically (not colored: no two kernels' plain adds meet at a node), the
 * boundary cells and the gather go there, at its priority, beside the interior's kernel
 * rather than before it (a few hundred groups alone leave most of a GPU idle), and once the
 * messages are in, the neighbours' shares' copies, and the sums too where the interior
 * writes no shared entry (cells' phases), the main queue joining it after them. Elsewhere
 * the boundary cells are waited for whole before the exchange begins, and the interior's
 * before the sums (whose copy to the device would wait for it inside the exchange's time). */
static int op_run_phased(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                         fe_vector *out, int *launches)
{
  const fe_dist *d = r->A->V->dist;
  const fe_backend_ops *ops = r->be->ops;
  void *impl = r->be->impl;
  const int marked = ops->mark && ops->mark_wait && fe_dist_direct(d, out);
  const int beside = marked && ops->side && !r->colored;
  r->phase = 1;
  int rc = beside ? ops->side(impl, FE_SIDE_BEGIN) : 0;
  if (!rc) rc = r->st->integrate(r, a, u, w, out, launches);
  if (!rc) rc = marked ? ops->mark(impl, FE_MARK_CELLS) : ops->finish(impl);
  double t0 = fe_clock();
  if (!rc) rc = fe_dist_sum_begin(d, out);
  double begun = fe_clock() - t0;
  if (beside) { /* back to the main queue, even after an error */
    int rc3 = ops->side(impl, FE_SIDE_END);
    if (!rc) rc = rc3;
  }
  if (rc) {
    r->phase = 0;
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  r->phase = 2;
  rc = r->st->integrate(r, a, u, w, out, launches); /* queued: the device works */
  r->phase = 0;
  if (!rc && marked) rc = ops->mark_wait(impl, FE_MARK_CELLS);
  t0 = fe_clock();
  /* the messages complete while it does (and even after an error: the neighbours posted
   * theirs); the host's wait for them is the exchange's, the interior's is not */
  int rc2 = fe_dist_sum_wait(d, out);
  double waited = fe_clock() - t0;
  if (!rc && !marked) rc = ops->finish(impl); /* (a copy to the device would wait) */
  /* beside: the neighbours' shares copied on the side queue too, while the interior runs,
   * and the sums there as well where the interior writes no shared entry (phase2_apart);
   * the main queue joins after them (csr's: before its sums) */
  const int apart = beside && r->phase2_apart;
  if (!rc && beside) rc = ops->side(impl, FE_SIDE_RESUME);
  t0 = fe_clock();
  if (!rc2 && beside) rc2 = fe_dist_sum_fetch(d, out);
  if (beside && !apart) rc = side_join(ops, impl, rc);
  const double t1 = fe_clock();
  if (!rc2) rc2 = fe_dist_sum_end(d, out, &r->xbytes, &r->xmessages);
  const double gathered = fe_dist_sum_gathered(d, out), t2 = fe_clock();
  r->xseconds = begun + waited + t2 - t0;
  r->xparts[FE_XPART_GATHER] = begun + gathered;
  r->xparts[FE_XPART_MESSAGES] = waited - gathered;
  r->xparts[FE_XPART_COPIES] = t1 - t0; /* (through the host: in the sums' part) */
  r->xparts[FE_XPART_SUMS] = t2 - t1;
  if (apart) rc = side_join(ops, impl, rc);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return rc2;
}

/* The device work of one action: mask the direction, zero the output, integrate, fix the
 * constrained rows. */
static int op_run(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                  fe_vector *out, int wait, int *launches)
{
  fe_operator *A = r->A;
  int n = A->V->ndofs;
  *launches = 0;
  /* the direction without its constrained part (unless the kernel reads it as zero itself) */
  int mask = a == FE_ACTION_APPLY && A->ndir > 0 && !r->st->masks_direction;
  if (mask) {
    if (!r->scratch) FE_CHECK(fe_vector_create(r->be, r->prec, n, &r->scratch));
    FE_CHECK(fe_vector_copy(r->scratch, w));
    FE_CHECK(op_dirichlet(r, a, r->scratch, 0, 0, 0, r->scratch, launches));
  }
  const fe_vector *wm = mask ? r->scratch : w;
  if (!u && !r->zero) FE_CHECK(fe_vector_create(r->be, r->prec, n, &r->zero)); /* zeroed */
  if (!u) u = r->zero;
  FE_CHECK(fe_vector_fill(out, 0.0));
  (*launches)++; /* the fill is a launch too */
  r->delegated = 0;
  r->xbytes = r->xmessages = r->xseconds = 0;
  memset(r->xparts, 0, sizeof r->xparts);
  /* the exchange beside the interior cells' work, where the realization splits this action
   * (an action its strategy delegates runs another realization's whole, exchange and all) */
  const int phased = A->V->dist && r->phased && !(r->st->delegate && r->st->delegate(a));
  r->xbeside = phased;
  if (phased) {
    FE_CHECK(op_run_phased(r, a, u, wm ? wm : u, out, launches));
  } else {
    FE_CHECK(r->st->integrate(r, a, u, wm ? wm : u, out, launches));
  }
  /* a split space: each rank summed its own cells; the shared nodes add the neighbours' sums
   * (before the constrained rows are set, which every rank sets alike) */
  if (A->V->dist && !r->delegated && !phased) {
    FE_CHECK(r->be->ops->finish(r->be->impl)); /* the integration done: the exchange's time apart */
    double t0 = fe_clock();
    FE_CHECK(fe_dist_sum(A->V->dist, out, &r->xbytes, &r->xmessages));
    r->xseconds = fe_clock() - t0;
  }
  r->xdirect = fe_dist_direct(A->V->dist, out);
  switch (a) {
  case FE_ACTION_RESIDUAL: FE_CHECK(op_dirichlet(r, a, u, 1, -1, 0, out, launches)); break;
  case FE_ACTION_APPLY: FE_CHECK(op_dirichlet(r, a, w, 1, 0, 0, out, launches)); break;
  default: FE_CHECK(op_dirichlet(r, a, out, 0, 0, 1, out, launches)); break;
  }
  return wait ? r->be->ops->finish(r->be->impl) : 0;
}

/* Whether the C body reads named constant i (the text k[i], not part of a longer name). */
static int body_reads_constant(const char *body, int i)
{
  char key[24];
  snprintf(key, sizeof key, "k[%d]", i);
  for (const char *s = body ? strstr(body, key) : NULL; s; s = strstr(s + 1, key))
    if (s == body || !(isalnum((unsigned char)s[-1]) || s[-1] == '_')) return 1;
  return 0;
}

/* Whether a stored Jacobian built with the constants k is stale: a constant that the
 * Jacobian action or its blocks read has another value now (pde:set{dt = ...}); a change of
 * one only the residual reads (the time t of a source) keeps it. Only the Jacobian action
 * asks: csr's and ebe's residual and diagonal are matrix-free (fe_stored_matrix_other). */
static int stored_jacobian_stale(const fe_physics *p, const double *k)
{
  for (int i = 0; i < p->nconst; i++) {
    if (p->const_values[i] == k[i]) continue;
    const char *bodies[6] = {p->df0, p->df1, p->g[0], p->g[1], p->g[2], p->g[3]};
    for (int b = 0; b < 6; b++)
      if (body_reads_constant(bodies[b], i)) return 1;
  }
  return 0;
}

/* The common path of the three actions. */
static int op_action(fe_operator *A, fe_action a, const fe_vector *u_in, const fe_vector *w_in,
                     const fe_action_opts *o, fe_vector **out, fe_report *rep)
{
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  if (a == FE_ACTION_APPLY && r->built_constants &&
      stored_jacobian_stale(A->pde, r->built_constants)) { /* csr, ebe: made anew */
    fe_realization_drop(A, r);
    FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  }
  double compile_s, transfer = 0, seconds = 0;
  FE_CHECK(realization_kernel(r, a, &compile_s));
  int n = A->V->ndofs, launches = 0, made = *out == NULL;
  const fe_vector *u, *w;
  fe_vector *tu = NULL, *tw = NULL, *tf[FE_PHYSICS_MAX_FIELDS] = {NULL};
  int rc = op_input(u_in, r, n, &u, &tu, &transfer);
  if (!rc) rc = op_input(w_in, r, n, &w, &tw, &transfer);
  if (!rc) rc = op_bind_physics(r, tf, &transfer);
  if (!rc && a == FE_ACTION_APPLY && r->folded && !fe_qdata_current(r)) {
    /* the per-point data made once (again after a named constant changed): setup time */
    double t0 = fe_clock();
    rc = fe_qdata_build(r);
    r->setup_seconds += fe_clock() - t0;
  }
  if (!rc) rc = op_output(r, n, out);
  /* A kernel's first run answers the call (the answer comes one run sooner; the report says
   * it was the first), except where a first launch does lazy work worth seconds (PoCL
   * compiles there): that run counts as compile time and the second is timed. */
  int first_run = !r->warm[a];
  if (!rc && first_run && r->be->info.lazy_launch) {
    double t0 = fe_clock();
    rc = op_run(r, a, u, w, *out, 1, &launches);
    compile_s += fe_clock() - t0;
    first_run = 0;
  }
  if (!rc) {
    double t0 = fe_clock();
    r->pq = a == FE_ACTION_APPLY ? o->pq : NULL; /* the timed run alone adds (w, J w) */
    r->pq_slot = o->pq_slot;
    r->pq_added = 0;
    rc = op_run(r, a, u, w, *out, !o->nowait, &launches);
    r->pq = NULL;
    seconds = fe_clock() - t0;
    r->warm[a] = 1;
  }
  fe_vector_free(tu);
  fe_vector_free(tw);
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) {
    fe_vector_free(tf[i]);
    r->fv[i] = NULL;
  }
  if (!rc) rc = op_report(r, a, o, why, seconds, compile_s, transfer, launches, first_run, rep);
  if (!rc) rep->pq_added = r->pq_added;
  if (rc && made) {
    fe_vector_free(*out);
    *out = NULL;
  }
  FE_CHECK(rc);
  return 0;
}

int fe_operator_residual(fe_operator *A, const fe_vector *u, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep)
{
  FE_ASSERT(u, FE_ERR_ARG, "residual needs a state u");
  return op_action(A, FE_ACTION_RESIDUAL, u, NULL, o, out, rep);
}

int fe_operator_constrained_norm(fe_operator *A, const fe_vector *v, const fe_action_opts *o,
                                 double *norm)
{
  *norm = 0;
  if (A->ndir == 0) return 0;
  fe_realization *r = NULL;
  char why[160];
  double cs;
  int launches = 0;
  FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  *norm = -1;
  if (v->be != r->be || v->prec != r->prec || v->n != A->V->ndofs) return 0;
  FE_CHECK(realization_kernel(r, FE_ACTION_APPLY, &cs));
  fe_vector *t = NULL;
  FE_CHECK(fe_vector_create(r->be, r->prec, v->n, &t)); /* zeroed */
  int rc = op_dirichlet(r, FE_ACTION_APPLY, v, 1, 0, 0, t, &launches);
  if (!rc) rc = fe_vector_norm(t, norm);
  fe_vector_free(t);
  FE_CHECK(rc);
  return 0;
}

int fe_operator_apply(fe_operator *A, const fe_vector *w, const fe_vector *at,
                      const fe_action_opts *o, fe_vector **out, fe_report *rep)
{
  FE_ASSERT(w, FE_ERR_ARG, "apply needs a direction");
  return op_action(A, FE_ACTION_APPLY, at, w, o, out, rep);
}

int fe_operator_diagonal(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep)
{
  return op_action(A, FE_ACTION_DIAGONAL, at, NULL, o, out, rep);
}

/* A realization of A on be in prec with a constrained rows' kernel compiled (any strategy's:
 * the rows are the operator's), or NULL; *act: the action whose module holds it. */
static fe_realization *realization_with_rows(fe_operator *A, fe_backend *be, fe_precision prec,
                                             fe_action *act)
{
  for (int i = 0; i < A->nreal; i++) {
    fe_realization *r = A->real[i];
    for (int a = 0; r->be == be && r->prec == prec && a < FE_NACTIONS; a++)
      if (r->dirichlet[a]) {
        *act = (fe_action)a;
        return r;
      }
  }
  return NULL;
}

int fe_operator_initial(fe_operator *A, const fe_action_opts *o, double interior, fe_vector **out)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(fe_operator_resolve(o, &be, &prec));
  int n = A->V->ndofs;
  /* on the device where a realization there has the rows' kernel (a solve's second and later
   * calls): filled, then the constrained rows set; else made on the host and moved (7.19M
   * dofs: 20 ms on the H200, most of a short solve's fixed cost) */
  fe_action act;
  fe_realization *r = A->ndir ? realization_with_rows(A, be, prec, &act) : NULL;
  if (r || !A->ndir) {
    int launches = 0;
    int rc = fe_vector_create(be, prec, n, out);
    if (!rc) (*out)->dist = A->V->dist;
    if (!rc) rc = fe_vector_fill(*out, interior);
    if (!rc && r) rc = op_dirichlet(r, act, *out, 0, 0, A->value, *out, &launches);
    if (rc && *out) {
      fe_vector_free(*out);
      *out = NULL;
    }
    return rc;
  }
  double *v;
  FE_MALLOC(v, n, "initial vector");
  for (int i = 0; i < n; i++) v[i] = interior;
  for (int i = 0; i < A->ndir; i++) v[A->dir_nodes[i]] = A->value;
  int rc = fe_vector_create(be, prec, n, out);
  if (!rc) (*out)->dist = A->V->dist;
  if (!rc) rc = fe_vector_set(*out, v);
  free(v);
  if (rc && *out) {
    fe_vector_free(*out);
    *out = NULL;
  }
  return rc;
}

int fe_operator_prepare(fe_operator *A, const char *action, const fe_action_opts *o,
                        double *compile_seconds)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  FE_CHECK(realization_kernel(r, a, compile_seconds));
  if (a == FE_ACTION_APPLY && r->folded && !fe_qdata_current(r)) {
    double t0 = fe_clock(); /* setup, reported by the next apply */
    FE_CHECK(fe_qdata_build(r));
    r->setup_seconds += fe_clock() - t0;
  }
  return 0;
}

int fe_operator_model(fe_operator *A, const char *action, const fe_action_opts *o,
                      fe_report *rep)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  double compile_s;
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  FE_CHECK(realization_kernel(r, a, &compile_s));
  fe_report_begin(rep, fe_action_name(a), r->be, r->prec, r->st->name, why);
  fe_report_operator(rep, A, a);
  fe_report_work(rep, realization_work(r, a));
  /* the fill of the output, the integration (a launch per color), the constrained rows,
   * and for an apply the masking of the direction where the kernel does not do it itself */
  rep->launches = 1 + (r->ncolors > 0 ? r->ncolors : 1) + (A->ndir > 0 ? 1 : 0) +
                  (a == FE_ACTION_APPLY && A->ndir > 0 && !r->st->masks_direction ? 1 : 0);
  rep->compile_seconds = compile_s;
  fe_perf_occupancy(r->be, counted_kernel(r, a), rep);
  FE_CHECK(fe_perf_predict(r->be, r->prec, rep));
  return op_predict_exchange(A, r, rep);
}

int fe_operator_source(fe_operator *A, const char *action, const fe_action_opts *o, char **src)
{
  fe_action a;
  fe_realization *r = NULL;
  char why[160];
  FE_CHECK(fe_action_parse(action, &a));
  FE_CHECK(fe_realization_get(A, o, &r, why, sizeof why));
  const fe_strategy *d = r->st->delegate ? r->st->delegate(a) : NULL;
  if (d) { /* the kernel that computes this action is another strategy's */
    fe_action_opts od;
    if (o) od = *o;
    else fe_action_opts_default(&od);
    od.backend = r->be->name;
    od.precision = (int)r->prec;
    od.strategy = d->name;
    od.given = NULL; /* the options of the strategy asked, not the delegate's */
    FE_CHECK(fe_realization_get(A, &od, &r, why, sizeof why));
  }
  return r->st->source(r, a, r->be->ops->preamble(r->be->impl, r->prec), src);
}
