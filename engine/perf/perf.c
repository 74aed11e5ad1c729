/* felab performance: the reports (a call's counts, the model's inputs, the printed block),
 * the kernels compiled and loaded this session, and the session log. The model is model.c,
 * the calibration calibrate.c and calibration-store.c, the bank counting banks.c. */
#include "engine/perf/perf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/progress.h"

double fe_report_gflops(const fe_report *r) { return r->seconds > 0 ? r->flops / r->seconds / 1e9 : 0; }
double fe_report_gbytes(const fe_report *r) { return r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0; }

const char *fe_ceiling_name(int c)
{
  static const char *names[FE_NCEILINGS] = {"dram",     "l2",      "shared",   "fma",
                                            "nonfma",   "atomics", "constant", "indexed",
                                            "launches", "latency"};
  return c >= 0 && c < FE_NCEILINGS ? names[c] : "?";
}

static fe_build_counts build_counts;

fe_build_counts fe_perf_build_counts(void) { return build_counts; }
void fe_perf_count_setup(void) { build_counts.setups++; }
void fe_perf_count_cached(void) { build_counts.cached++; }

int fe_compile(fe_backend *be, const char *source, fe_module **mod, double *seconds, int *cached)
{
  int c = 0;
  fe_progress_begin("getting the kernel", 0);
  fe_progress_watch(1);
  int rc = be->ops->compile(be->impl, source, mod, seconds, &c);
  fe_progress_watch(0);
  fe_progress_end();
  FE_CHECK(rc);
  if (c) build_counts.cached++;
  else build_counts.compiled++;
  if (cached) *cached = c;
  return 0;
}

double fe_precompile(fe_backend *be, const char *const *sources, int n)
{
  double s = 0;
  if (be->ops->precompile) build_counts.compiled += be->ops->precompile(be->impl, sources, n, &s);
  return s;
}

void fe_report_work(fe_report *rep, const fe_work *w)
{
  rep->flops = w->flops;
  rep->bytes = w->bytes;
  rep->l2_bytes = w->l2_bytes;
  rep->shared_bytes = w->shared_bytes;
  rep->nonfma = w->nonfma;
  rep->vec_flops = w->vec_flops;
  rep->atomics = w->atomics;
  rep->constant = w->constant;
  rep->indexed = w->indexed;
  rep->indexed_first = w->indexed_first;
  rep->factor_lanes = w->factor_lanes;
  rep->factor_gathers = w->factor_gathers;
  rep->rows = w->rows;
  rep->phase_bytes = w->phase_bytes;
  rep->phase_l2_bytes = w->phase_l2_bytes;
  rep->array_bytes = w->array_bytes;
  rep->operand_bytes = w->operand_bytes;
  rep->l1_wavefronts = w->l1_wavefronts;
  rep->table_wavefronts = w->table_wavefronts;
  memcpy(rep->l1_lines, w->l1_lines, sizeof rep->l1_lines);
  memcpy(rep->table_lines, w->table_lines, sizeof rep->table_lines);
  rep->groups = w->groups;
  rep->group_items = w->group_items;
  rep->lanes = w->lanes;
  rep->inflight_flops = w->inflight_flops;
  rep->padded_flops = w->padded_flops;
  rep->dram_trips = w->dram_trips;
  rep->l2_trips = w->l2_trips;
  rep->phases = w->phases;
  rep->nphase_work = w->nphase_work;
  memcpy(rep->phase_work, w->phase_work, sizeof rep->phase_work);
  rep->loop_trips = w->loop_trips;
}

void fe_report_scale(fe_report *r, double f)
{
  double *v[] = {&r->flops, &r->bytes, &r->l2_bytes, &r->shared_bytes, &r->nonfma, &r->atomics,
                 &r->constant, &r->vec_flops, &r->indexed, &r->indexed_first, &r->factor_lanes,
                 &r->factor_gathers, &r->phase_bytes, &r->phase_l2_bytes, &r->operand_bytes,
                 &r->l1_wavefronts,
                 &r->table_wavefronts, &r->inflight_flops, &r->padded_flops, &r->loop_trips,
                 &r->extra_flops, &r->extra_bytes};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) *v[i] *= f;
  for (int k = 0; k <= FE_L1_LINES; k++) r->l1_lines[k] *= f, r->table_lines[k] *= f;
  for (int p = 0; p < r->nphase_work && p < FE_PHASES_MAX; p++) {
    fe_phase_work *w = &r->phase_work[p];
    double *pv[] = {&w->bytes, &w->l2_bytes, &w->shared_bytes, &w->l1_wavefronts,
                    &w->table_wavefronts, &w->lines, &w->table_lines, &w->flops, &w->nonfma,
                    &w->constant};
    for (size_t i = 0; i < sizeof pv / sizeof *pv; i++) *pv[i] *= f;
  }
  if (r->groups > 0) r->groups = (long long)ceil((double)r->groups * f);
  r->ncells = (long long)ceil((double)r->ncells * f);
  r->ndofs = (long long)ceil((double)r->ndofs * f);
}

void fe_call_tally_add(fe_call_tally *t, const fe_report *rep)
{
  const int solve = rep->calls > 0;
  t->calls += solve ? rep->calls : 1;
  t->flops += rep->flops - (solve ? rep->extra_flops : 0);
  t->bytes += rep->bytes - (solve ? rep->extra_bytes : 0);
  t->launches += rep->launches - (solve ? rep->extra_launches : 0);
}

void fe_report_calls(fe_report *r, const fe_call_tally *t)
{
  r->calls = t->calls;
  r->extra_flops = r->flops - t->flops;
  r->extra_bytes = r->bytes - t->bytes;
  r->extra_launches = r->launches - t->launches;
}

/* A time with a unit that keeps three significant digits readable. */
static void format_time(double s, char *buf, size_t n)
{
  if (s >= 1) snprintf(buf, n, "%.3g s", s);
  else if (s >= 1e-3) snprintf(buf, n, "%.3g ms", s * 1e3);
  else snprintf(buf, n, "%.3g us", s * 1e6);
}

void fe_setup_part_add(fe_setup_parts *p, const char *name, double seconds, double bytes)
{
  int i = 0;
  while (i < p->n && strcmp(p->part[i].name, name)) i++;
  if (i == p->n && p->n == FE_SETUP_PARTS) i = FE_SETUP_PARTS - 1; /* full: to the last */
  else if (i == p->n) {
    snprintf(p->part[i].name, sizeof p->part[i].name, "%s", name);
    p->part[i].seconds = p->part[i].bytes = 0;
    p->n++;
  }
  p->part[i].seconds += seconds;
  p->part[i].bytes += bytes;
}

double fe_setup_parts_seconds(const fe_setup_parts *p)
{
  double s = 0;
  for (int i = 0; i < p->n; i++) s += p->part[i].seconds;
  return s;
}

void fe_setup_parts_merge(fe_setup_parts *p, const fe_setup_parts *q)
{
  for (int i = 0; i < q->n; i++)
    fe_setup_part_add(p, q->part[i].name, q->part[i].seconds, q->part[i].bytes);
}

/* The parts of p that took time, "name time, ..." (a name's '_' as a space; "strategy": the
 * strategy's own rest), at buf + len; returns the new length. */
static int format_parts(const fe_setup_parts *p, char *buf, size_t n, int len)
{
  for (int i = 0, k = 0; i < p->n && len >= 0 && (size_t)len < n; i++) {
    if (!(p->part[i].seconds > 0)) continue;
    char tp[32], name[32];
    format_time(p->part[i].seconds, tp, sizeof tp);
    if (!strcmp(p->part[i].name, "strategy")) snprintf(name, sizeof name, "the strategy's own");
    else snprintf(name, sizeof name, "%s", p->part[i].name);
    for (char *c = name; *c; c++) *c = *c == '_' ? ' ' : *c;
    len += snprintf(buf + len, n - (size_t)len, "%s%s %s", k++ ? ", " : "", name, tp);
  }
  return len;
}

/* A split space's exchange, measured and predicted, and a CG's reductions predicted, at
 * buf + len; returns the new length. */
static int format_exchange(const fe_report *r, char *buf, size_t n, int len)
{
  if (!(r->exchange_messages > 0) || len < 0 || (size_t)len >= n) return len;
  char tx[32];
  format_time(r->exchange_seconds, tx, sizeof tx);
  len += snprintf(buf + len, n - (size_t)len, "\n  exchange   %.0f bytes in %.0f messages to the "
                  "neighbouring ranks, %s (%s, %s)", r->exchange_bytes, r->exchange_messages, tx,
                  r->exchange_direct ? r->exchange_follows ? "device to device, the gather following"
                                                           : "device to device"
                                     : "host-staged",
                  r->exchange_beside ? "beside the interior cells" : "after the integration");
  if (len > 0 && (size_t)len < n && r->exchange_predicted > 0) {
    char tp[32], tl[32], td[32];
    format_time(r->exchange_predicted, tp, sizeof tp);
    format_time(r->exchange_link, tl, sizeof tl);
    format_time(r->exchange_device, td, sizeof td);
    len += snprintf(buf + len, n - (size_t)len, "; predicted %s (link %s, device %s)%s", tp, tl,
                    td, r->exchange_link > 0 ? "" : ": no link calibrated");
    if (len > 0 && (size_t)len < n && r->exchange_host && r->exchange_cold < 0.005)
      len += snprintf(buf + len, n - (size_t)len, ", the link's host exchange warm (its data "
                      "in the cache after this action)");
    else if (len > 0 && (size_t)len < n && r->exchange_host)
      len += snprintf(buf + len, n - (size_t)len, ", the link's host exchange %.0f%% cold (its "
                      "data out of the cache after this action)", 100 * r->exchange_cold);
    else if (len > 0 && (size_t)len < n && r->exchange_cold > 1 - exp(-1.0))
      len += snprintf(buf + len, n - (size_t)len, "; for warm data: after this action's, which "
                      "passed the last-level cache, it runs slower");
  }
  if (len > 0 && (size_t)len < n && r->device_turns) {
    if (r->device_cores > 0)
      len += snprintf(buf + len, n - (size_t)len, "\n  sharing    %d ranks of %d thread%s on this "
                      "machine's %d cores take turns on them (the prediction is for cores of "
                      "their own)", r->device_sharers, r->device_threads,
                      r->device_threads == 1 ? "" : "s", r->device_cores);
    else
      len += snprintf(buf + len, n - (size_t)len, "\n  sharing    %d ranks of this machine on "
                      "this device take turns on it (the prediction is for it alone)",
                      r->device_sharers);
  }
  if (len > 0 && (size_t)len < n && r->reduce_predicted > 0) {
    char tr[32];
    format_time(r->reduce_predicted, tr, sizeof tr);
    len += snprintf(buf + len, n - (size_t)len, "\n  reductions predicted %s (the sums of the "
                    "entries other ranks own, and over the ranks)", tr);
  }
  return len;
}

void fe_report_format(const fe_report *r, char *buf, size_t n)
{
  char tm[32], tp[32];
  format_time(r->seconds, tm, sizeof tm);
  format_time(r->predicted_seconds, tp, sizeof tp);
  double ratio = r->seconds > 0 ? r->predicted_seconds / r->seconds : 0;
  int len = snprintf(buf, n,
                     "%s on %s (%s), %s, strategy %s: %lld cells, %lld dofs\n"
                     "  counted    %.4g flop, %.4g bytes (minimal)\n",
                     r->action, r->backend, r->device, r->precision, r->strategy, r->ncells, r->ndofs,
                     r->flops, r->bytes);
  if (len < 0 || (size_t)len >= n) return;
  if (r->seconds > 0)
    len += snprintf(buf + len, n - (size_t)len,
                    "  measured   %s  %.3g GF/s  %.3g GB/s  (%d launches%s)\n"
                    "  predicted  %s  %s bound  predicted/measured %.2f",
                    tm, fe_report_gflops(r), fe_report_gbytes(r), r->launches,
                    r->first_run ? "; the kernel's first run: one-time work included" : "", tp,
                    r->bound, ratio);
  else /* the model's view alone (A:model, perf.predict) */
    len += snprintf(buf + len, n - (size_t)len,
                    "  measured   nothing (the model's view; %d launches)\n"
                    "  predicted  %s  %s bound",
                    r->launches, tp, r->bound);
  if (len < 0 || (size_t)len >= n) return;
  /* each ceiling alone, the ones that count */
  double most = 0;
  for (int c = 0; c < FE_NCEILINGS; c++)
    if (r->ceiling_seconds[c] > most) most = r->ceiling_seconds[c];
  if (most > 0) {
    len += snprintf(buf + len, n - (size_t)len, "\n  ceilings  ");
    for (int c = 0; c < FE_NCEILINGS && len > 0 && (size_t)len < n; c++) {
      if (!(r->ceiling_seconds[c] > 0.01 * most)) continue;
      char t[32];
      format_time(r->ceiling_seconds[c], t, sizeof t);
      len += snprintf(buf + len, n - (size_t)len, " %s %s", fe_ceiling_name(c), t);
      if (c == FE_CEIL_SHARED && r->l1_tag_seconds > 0 && r->l1_tag_seconds >= r->ceiling_seconds[c])
        len += snprintf(buf + len, n - (size_t)len, " (L1 lookups)");
    }
    if (len < 0 || (size_t)len >= n) return;
  }
  if (r->occupancy > 0)
    len += snprintf(buf + len, n - (size_t)len,
                    "\n  occupancy  %.0f%%: %d groups a unit of %d items (%d registers, %lld B "
                    "shared; bound by %s), efficiency %.2f",
                    100 * r->occupancy, r->resident, r->group_items, r->regs, r->shared_per_group,
                    r->occupancy_limit, r->efficiency);
  if (len < 0 || (size_t)len >= n) return;
  if (r->why[0]) len += snprintf(buf + len, n - (size_t)len, "\n  strategy   %s", r->why);
  if (len < 0 || (size_t)len >= n) return;
  if (r->space[0] || r->quadrature[0])
    len += snprintf(buf + len, n - (size_t)len, "\n  element    %s, quadrature %s", r->space,
                    r->quadrature[0] ? r->quadrature : "none");
  if (len < 0 || (size_t)len >= n) return;
  if (r->iterations)
    len += snprintf(buf + len, n - (size_t)len, "\n  iterations %d", r->iterations);
  if (len < 0 || (size_t)len >= n) return;
  len = format_exchange(r, buf, n, len);
  if (len < 0 || (size_t)len >= n) return;
  if (r->kernel_from) { /* an operator's action: what this call built, part by part */
    char ts[32], tk[32];
    format_time(r->setup_seconds, ts, sizeof ts);
    format_time(r->compile_seconds, tk, sizeof tk);
    if (r->setup_seconds > 0) {
      len += snprintf(buf + len, n - (size_t)len, "\n  built      device data %s (", ts);
      len = format_parts(&r->parts, buf, n, len);
      if (len < 0 || (size_t)len >= n) return;
      len += snprintf(buf + len, n - (size_t)len, "); ");
    } else
      len += snprintf(buf + len, n - (size_t)len, "\n  built      no device data (ready); ");
    if (len < 0 || (size_t)len >= n) return;
    /* compile_seconds holds an untimed first run where there was one (first_run 0) */
    const char *with = r->first_run ? "" : " with its first run";
    if (r->kernel_from == 1)
      len += snprintf(buf + len, n - (size_t)len, "kernel compiled, %s%s", tk, with);
    else if (r->kernel_from == 2)
      len += snprintf(buf + len, n - (size_t)len, "kernel loaded from the cache, %s%s", tk, with);
    else len += snprintf(buf + len, n - (size_t)len, "kernel ready");
    if (len < 0 || (size_t)len >= n) return;
    if (r->transfer_seconds > 0)
      snprintf(buf + len, n - (size_t)len, "; transfer %.3g s", r->transfer_seconds);
  } else if (r->compile_seconds > 0 || r->setup_seconds > 0 || r->transfer_seconds > 0) {
    len += snprintf(buf + len, n - (size_t)len, "\n  other      compile %.3g s, setup %.3g s, "
                    "transfer %.3g s", r->compile_seconds, r->setup_seconds, r->transfer_seconds);
    if (r->parts.n && len > 0 && (size_t)len < n) {
      len += snprintf(buf + len, n - (size_t)len, " (setup: ");
      len = format_parts(&r->parts, buf, n, len);
      if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, ")");
    }
  }
}

/* The session log: every report, in order. */
static fe_report *log_entries;
static int log_count, log_cap;

void fe_perf_log_add(const fe_report *r)
{
  if (log_count == log_cap) {
    int cap = log_cap ? 2 * log_cap : 64;
    fe_report *e = realloc(log_entries, sizeof *e * (size_t)cap);
    if (!e) return; /* the log is a convenience: losing an entry must not fail the call */
    log_entries = e;
    log_cap = cap;
  }
  log_entries[log_count++] = *r;
}

int fe_perf_log_count(void) { return log_count; }
const fe_report *fe_perf_log_get(int i) { return i >= 0 && i < log_count ? &log_entries[i] : NULL; }

void fe_perf_log_clear(void)
{
  free(log_entries);
  log_entries = NULL;
  log_count = log_cap = 0;
}

void fe_report_begin(fe_report *rep, const char *action, const fe_backend *be, fe_precision prec,
                     const char *strategy, const char *why)
{
  memset(rep, 0, sizeof *rep);
  snprintf(rep->action, sizeof rep->action, "%s", action);
  snprintf(rep->backend, sizeof rep->backend, "%s", be->name);
  snprintf(rep->device, sizeof rep->device, "%s", be->info.name);
  snprintf(rep->precision, sizeof rep->precision, "%s", fe_precision_name(prec));
  snprintf(rep->strategy, sizeof rep->strategy, "%s", strategy);
  snprintf(rep->why, sizeof rep->why, "%s", why);
}
