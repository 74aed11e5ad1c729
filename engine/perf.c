/* felab performance: calibration of a backend's ceilings, the roofline prediction of a
 * call, the report's printed block and the session log.
 *
 * The model: a call that performs F flops and must move at least B bytes takes
 *   t = max(F / peak_flops, B / peak_bandwidth) + launches * launch_overhead,
 * with the peaks measured on this backend by calibrate() (a stream triad and independent
 * FMA chains), so a prediction says how close a kernel is to what the device can do. */
#include "engine/perf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/error.h"
#include "engine/strbuf.h"

const char *fe_kernel_template(const char *name);

double fe_report_gflops(const fe_report *r) { return r->seconds > 0 ? r->flops / r->seconds / 1e9 : 0; }
double fe_report_gbytes(const fe_report *r) { return r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0; }

/* Where a backend's calibration is stored: one file per backend and device. */
static int calibration_path(const fe_backend *be, char *path, size_t n)
{
  char dir[4096];
  FE_CHECK(fe_cache_dir("calibration", dir, sizeof dir));
  unsigned long long h = fe_hash_string(be->info.name, fe_hash_string(be->name, 0));
  snprintf(path, n, "%s/%s-%016llx.txt", dir, be->name, h);
  return 0;
}

/* Read a stored calibration: lines "<precision> <GB/s> <GFlop/s> <launch us>". A file that
 * does not parse (a line with another shape, an unknown precision, a rate that is not
 * positive and finite) is dropped whole, with a word on stderr: the backend is measured
 * again when a prediction needs it, and the new measurement is stored. */
int fe_perf_load_calibration(fe_backend *be)
{
  char path[4200];
  FE_CHECK(calibration_path(be, path, sizeof path));
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  fe_calibration stored[FE_NPRECISIONS] = {0};
  char line[256], prec[16], extra[2], why[320] = "";
  int n = 0;
  while (!why[0] && fgets(line, sizeof line, f)) {
    fe_calibration c = {0};
    fe_precision p;
    n++;
    if (strspn(line, " \t\r\n") == strlen(line)) continue; /* blank */
    if (!strchr(line, '\n') && !feof(f))
      snprintf(why, sizeof why, "line %d is too long", n);
    else if (sscanf(line, "%15s %lf %lf %lf %1s", prec, &c.gbytes, &c.gflops, &c.launch_us,
                    extra) != 4)
      snprintf(why, sizeof why, "line %d is not '<precision> <GB/s> <GFlop/s> <launch us>'", n);
    else if (fe_precision_parse(prec, &p)) {
      fe_error_clear();
      snprintf(why, sizeof why, "line %d: unknown precision '%s'", n, prec);
    } else if (!(c.gbytes > 0 && c.gflops > 0 && c.launch_us >= 0 && isfinite(c.gbytes) &&
                 isfinite(c.gflops) && isfinite(c.launch_us)))
      snprintf(why, sizeof why, "line %d: a rate that is not positive", n);
    else {
      c.valid = 1;
      stored[p] = c;
    }
  }
  if (!why[0] && ferror(f)) snprintf(why, sizeof why, "cannot be read");
  fclose(f);
  if (why[0]) {
    fe_cache_drop(path, why);
    return 0;
  }
  for (int p = 0; p < FE_NPRECISIONS; p++)
    if (stored[p].valid) be->calib[p] = stored[p];
  return 0;
}

/* Rewrite the stored calibration of a backend with what it holds now (written aside, then
 * renamed into place, so a reader never sees half a file). */
static int save_calibration(const fe_backend *be)
{
  char path[4200], tmp[4300];
  FE_CHECK(calibration_path(be, path, sizeof path));
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return 0; /* a read-only cache only costs a recalibration next session */
  int ok = 1;
  for (int p = 0; p < FE_NPRECISIONS; p++)
    if (be->calib[p].valid)
      ok = fprintf(f, "%s %.6g %.6g %.6g\n", fe_precision_name((fe_precision)p),
                   be->calib[p].gbytes, be->calib[p].gflops, be->calib[p].launch_us) > 0 && ok;
  ok = !fclose(f) && ok;
  if (!ok || rename(tmp, path)) remove(tmp); /* a failed write costs a recalibration only */
  return 0;
}

/* Sizes of the calibration kernels for a kind of device. */
typedef struct calib_sizes {
  int block, chunk, chains, steps, fma_groups;
  size_t n;
} calib_sizes;

static calib_sizes calib_sizes_for(const fe_backend *be, fe_precision prec)
{
  calib_sizes s;
  size_t w = fe_precision_size(prec);
  if (be->info.is_gpu) {
    s = (calib_sizes){.block = 256, .chunk = 8, .chains = 8, .steps = 4096,
                      .fma_groups = 8 * (be->info.compute_units > 0 ? be->info.compute_units : 16)};
    s.n = (size_t)1 << 27;
  } else {
    s = (calib_sizes){.block = 1, .chunk = 1 << 14, .chains = 32, .steps = 1 << 15,
                      .fma_groups = 4 * (be->info.compute_units > 0 ? be->info.compute_units : 1)};
    s.n = (size_t)1 << 24;
  }
  while (s.n * w * 3 > be->info.global_mem / 4 && s.n > ((size_t)1 << 20)) s.n /= 2;
  return s;
}

/* Best of `reps` launches of a kernel, wall clock. */
static int best_time(fe_backend *be, fe_kernel *k, size_t ngroups, size_t gs, int nargs,
                     const fe_arg *args, fe_precision prec, int reps, double *best)
{
  *best = INFINITY;
  for (int r = 0; r < reps; r++) {
    double s, t0 = fe_clock();
    FE_CHECK(be->ops->launch(be->impl, k, ngroups, gs, nargs, args, prec, &s));
    FE_CHECK(be->ops->finish(be->impl));
    double t = fe_clock() - t0;
    if (t < *best) *best = t;
  }
  return 0;
}

/* Run the triad and FMA kernels; fill be->calib[prec]. */
static int run_calibration(fe_backend *be, fe_precision prec, fe_report *rep)
{
  calib_sizes s = calib_sizes_for(be, prec);
  size_t w = fe_precision_size(prec);
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab calibration kernels, %s backend, %s precision */\n", be->name,
                   fe_precision_name(prec));
  fe_strbuf_printf(&b, "#define FE_DOUBLE %d\n#define FE_COLORED 0\n#define BLOCK %d\n#define CHUNK %d\n"
                       "#define FMA_CHAINS %d\n#define FMA_STEPS %d\n",
                   prec == FE_DOUBLE, s.block, s.chunk, s.chains, s.steps);
  fe_strbuf_append(&b, be->ops->preamble(be->impl, prec));
  fe_strbuf_append(&b, fe_kernel_template("calibrate"));
  char *src;
  FE_CHECK(fe_strbuf_finish(&b, &src));
  fe_module *mod = NULL;
  double compile_s;
  int cached;
  int rc = be->ops->compile(be->impl, src, &mod, &compile_s, &cached);
  free(src);
  FE_CHECK(rc);
  fe_kernel *triad, *fma;
  fe_buffer a = {0}, x = {0}, y = {0}, out = {0};
  rc = be->ops->kernel(be->impl, mod, "fe_triad", &triad);
  if (!rc) rc = be->ops->kernel(be->impl, mod, "fe_fma", &fma);
  if (!rc) rc = be->ops->alloc(be->impl, s.n * w, &a);
  if (!rc) rc = be->ops->alloc(be->impl, s.n * w, &x);
  if (!rc) rc = be->ops->alloc(be->impl, s.n * w, &y);
  if (!rc) rc = be->ops->alloc(be->impl, (size_t)s.fma_groups * w, &out);
  if (!rc) rc = be->ops->fill(be->impl, &x, s.n, prec, 1.0);
  if (!rc) rc = be->ops->fill(be->impl, &y, s.n, prec, 2.0);
  double t_triad = 0, t_fma = 0, t_launch = 0;
  size_t per_group = (size_t)s.block * s.chunk, tg = (s.n + per_group - 1) / per_group;
  fe_arg targs[6] = {{.kind = FE_ARG_INT, .i = (long long)tg}, {.kind = FE_ARG_INT, .i = (long long)s.n},
                     {.kind = FE_ARG_BUFFER, .buf = &a},     {.kind = FE_ARG_BUFFER, .buf = &x},
                     {.kind = FE_ARG_BUFFER, .buf = &y},     {.kind = FE_ARG_REAL, .r = 3.0}};
  if (!rc) rc = best_time(be, triad, tg, (size_t)s.block, 6, targs, prec, 6, &t_triad);
  fe_arg fargs[3] = {{.kind = FE_ARG_INT, .i = s.fma_groups}, {.kind = FE_ARG_BUFFER, .buf = &out},
                     {.kind = FE_ARG_REAL, .r = 0.999999}};
  if (!rc) rc = best_time(be, fma, (size_t)s.fma_groups, (size_t)s.block, 3, fargs, prec, 3, &t_fma);
  fe_arg largs[6];
  memcpy(largs, targs, sizeof largs);
  largs[0].i = 1;
  largs[1].i = 0; /* an empty triad: the cost of a launch */
  if (!rc) rc = best_time(be, triad, 1, (size_t)s.block, 6, largs, prec, 20, &t_launch);
  fe_buffer *bufs[] = {&a, &x, &y, &out};
  for (int i = 0; i < 4; i++)
    if (bufs[i]->ptr) be->ops->release(be->impl, bufs[i]);
  be->ops->module_free(be->impl, mod);
  FE_CHECK(rc);
  double bytes = 3.0 * s.n * w;
  double flops = 2.0 * s.fma_groups * s.block * (double)s.chains * s.steps;
  fe_calibration *c = &be->calib[prec];
  c->gbytes = bytes / t_triad / 1e9;
  c->gflops = flops / t_fma / 1e9;
  c->launch_us = t_launch * 1e6;
  c->valid = 1;
  if (rep) {
    memset(rep, 0, sizeof *rep);
    snprintf(rep->action, sizeof rep->action, "calibrate");
    snprintf(rep->backend, sizeof rep->backend, "%s", be->name);
    snprintf(rep->device, sizeof rep->device, "%s", be->info.name);
    snprintf(rep->precision, sizeof rep->precision, "%s", fe_precision_name(prec));
    snprintf(rep->strategy, sizeof rep->strategy, "triad+fma");
    rep->flops = flops;
    rep->bytes = bytes;
    rep->seconds = t_triad + t_fma;
    rep->compile_seconds = cached ? 0 : compile_s;
    rep->peak_gbytes = c->gbytes;
    rep->peak_gflops = c->gflops;
    rep->predicted_seconds = bytes / (c->gbytes * 1e9) + flops / (c->gflops * 1e9);
    snprintf(rep->bound, sizeof rep->bound, "both");
    rep->launches = 2;
  }
  return save_calibration(be);
}

int fe_perf_calibrate(fe_backend *be, fe_precision prec, fe_report *rep)
{
  FE_CHECK(run_calibration(be, prec, rep));
  if (rep) fe_perf_log_add(rep);
  return 0;
}

int fe_perf_predict(fe_backend *be, fe_precision prec, fe_report *rep)
{
  if (!be->calib[prec].valid) FE_CHECK(fe_perf_load_calibration(be));
  if (!be->calib[prec].valid) FE_CHECK(run_calibration(be, prec, NULL));
  const fe_calibration *c = &be->calib[prec];
  double tm = rep->bytes / (c->gbytes * 1e9), tc = rep->flops / (c->gflops * 1e9);
  rep->peak_gbytes = c->gbytes;
  rep->peak_gflops = c->gflops;
  rep->predicted_seconds = (tm > tc ? tm : tc) + rep->launches * c->launch_us * 1e-6;
  snprintf(rep->bound, sizeof rep->bound, "%s", tm >= tc ? "memory" : "compute");
  return 0;
}

/* A time with a unit that keeps three significant digits readable. */
static void format_time(double s, char *buf, size_t n)
{
  if (s >= 1) snprintf(buf, n, "%.3g s", s);
  else if (s >= 1e-3) snprintf(buf, n, "%.3g ms", s * 1e3);
  else snprintf(buf, n, "%.3g us", s * 1e6);
}

void fe_report_format(const fe_report *r, char *buf, size_t n)
{
  char tm[32], tp[32];
  format_time(r->seconds, tm, sizeof tm);
  format_time(r->predicted_seconds, tp, sizeof tp);
  double ratio = r->seconds > 0 ? r->predicted_seconds / r->seconds : 0;
  int len = snprintf(buf, n,
                     "%s on %s (%s), %s, strategy %s: %lld cells, %lld dofs\n"
                     "  counted    %.4g flop, %.4g bytes (minimal)\n"
                     "  measured   %s  %.3g GF/s  %.3g GB/s  (%d launches)\n"
                     "  predicted  %s  %s bound, ceilings %.3g GB/s %.3g GF/s  predicted/measured %.2f",
                     r->action, r->backend, r->device, r->precision, r->strategy, r->ncells, r->ndofs,
                     r->flops, r->bytes, tm, fe_report_gflops(r),
                     fe_report_gbytes(r), r->launches, tp, r->bound, r->peak_gbytes, r->peak_gflops,
                     ratio);
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
  if (r->compile_seconds > 0 || r->setup_seconds > 0 || r->transfer_seconds > 0)
    snprintf(buf + len, n - (size_t)len, "\n  other      compile %.3g s, setup %.3g s, transfer %.3g s",
             r->compile_seconds, r->setup_seconds, r->transfer_seconds);
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
