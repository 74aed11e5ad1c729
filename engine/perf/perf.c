/* felab performance: calibration of a backend's ceilings, the model's prediction of a
 * call, the report's printed block and the session log.
 *
 * The model: a strategy counts what one call does against each ceiling (fe_work: DRAM
 * bytes, further L2 loads, shared-memory wavefront bytes, flops, divisions, atomics); each
 * ceiling is a rate measured by its own micro-benchmark (calibrate.knl), on a GPU also at
 * 2..64 warps per compute unit. The compiled kernel's registers and shared memory give its
 * occupancy, hence the fraction of each rate it can reach; the time of a ceiling alone is
 * its work over that rate, T_c = W_c / (R_c e_c(occupancy)); on a GPU the shared ceiling is
 * the longer of the L1 data pipe's wavefronts and its lookups of the lines that global loads
 * touch (each warp request the longer of a request's and its lines' calibrated time). A group
 * goes through its phases one after another (barriers between them); in a phase its warps
 * run the pipes side by side (the phase's largest pipe whole, the others one W-th, W warps a
 * group), which makes the group's serial time A (a strategy tells its phases' work; where it
 * does not, each pipe is a phase: A = sum_c T_c). The G groups resident on a compute unit at
 * once run different phases side by side, so the largest ceiling is paid whole and the rest
 * of A one G-th,
 *   t = (max_c T_c + (A - max_c T_c) / G) / fill + waits + launches * t_launch + t_sync,
 * fill being the share of the last wave of groups that keeps compute units busy. G = 1: the
 * phases add up; G large: the roofline's max. Where G is not known (the cpu, a kernel whose
 * resources the backend does not tell) the max alone. The waits: each wave's path of
 * dependent loads and barriers, less what a phase long on the L1's pipe hides by staggering
 * the groups. No kernel's own timing feeds its own prediction. */
#include "engine/perf/perf.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/core/progress.h"
#include "engine/core/strbuf.h"

const char *fe_kernel_template(const char *name);

double fe_report_gflops(const fe_report *r) { return r->seconds > 0 ? r->flops / r->seconds / 1e9 : 0; }
double fe_report_gbytes(const fe_report *r) { return r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0; }

const char *fe_ceiling_name(int c)
{
  static const char *names[FE_NCEILINGS] = {"dram",     "l2",      "shared",   "fma",
                                            "nonfma",   "atomics", "constant", "indexed",
                                            "launches", "latency"};
  return c >= 0 && c < FE_NCEILINGS ? names[c] : "?";
}

/* Where a backend's calibration is stored: one file per backend and device ("v9": the
 * ceilings per micro-benchmark and the latencies, the cpu's multiply-adds fed from L1, its
 * indexed loops at first touches and from L1 and its cycle in llvm-mca's core, a GPU's L1
 * lookups; a file of an earlier form is not read). */
static int calibration_path(const fe_backend *be, char *path, size_t n)
{
  char dir[4096];
  FE_CHECK(fe_cache_dir("calibration", dir, sizeof dir));
  unsigned long long h = fe_hash_string(be->info.name, fe_hash_string(be->name, 0));
  snprintf(path, n, "%s/%s-v10-%016llx.txt", dir, be->name, h);
  return 0;
}

/* The named numbers of a calibration line, in the order they are written. */
typedef struct calib_field {
  const char *key;
  size_t offset;
  int required; /* a rate that must be positive (launches and latencies may be 0) */
} calib_field;

static const calib_field calib_fields[] = {
    {"dram", offsetof(fe_calibration, gbytes), 1},
    {"l2", offsetof(fe_calibration, l2_gbytes), 1},
    {"shared", offsetof(fe_calibration, shared_gbytes), 1},
    {"fma", offsetof(fe_calibration, gflops), 1},
    {"scalar", offsetof(fe_calibration, scalar_gflops), 1},
    {"nonfma", offsetof(fe_calibration, nonfma_gops), 1},
    {"atomics", offsetof(fe_calibration, atomic_gops), 1},
    {"constant", offsetof(fe_calibration, constant_gops), 1},
    {"launch", offsetof(fe_calibration, launch_us), 0},
    {"sync", offsetof(fe_calibration, sync_us), 0},
    {"dram_latency", offsetof(fe_calibration, dram_latency_us), 0},
    {"l2_latency", offsetof(fe_calibration, l2_latency_us), 0},
    {"phase_latency", offsetof(fe_calibration, phase_latency_us), 0},
    {"indexed", offsetof(fe_calibration, indexed_gops), 0},
    {"indexed_l1", offsetof(fe_calibration, indexed_l1_gops), 0},
    {"rows", offsetof(fe_calibration, rows_gbytes), 0},
    {"l1_requests", offsetof(fe_calibration, l1_request_gops), 0},
    {"l1_lines", offsetof(fe_calibration, l1_line_gops), 0},
    {"cycle", offsetof(fe_calibration, cycle_ns), 0},
};
#define NCALIB_FIELDS (sizeof calib_fields / sizeof calib_fields[0])
static const char *curve_keys[4] = {"curve_dram", "curve_shared", "curve_fma", "curve_lanes"};

/* Parse one stored line "<precision> key value key value ... curve_x a,b,c,d,e,f ..." into
 * *c (valid set); else a reason in why. */
static void parse_calibration_line(char *line, fe_precision *p, fe_calibration *c, char *why,
                                   size_t nwhy)
{
  char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
  memset(c, 0, sizeof *c);
  if (!tok || fe_precision_parse(tok, p)) {
    fe_error_clear();
    snprintf(why, nwhy, "unknown precision '%s'", tok ? tok : "");
    return;
  }
  int seen = 0;
  while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
    char *val = strtok_r(NULL, " \t\r\n", &save);
    if (!val) {
      snprintf(why, nwhy, "'%s' has no value", tok);
      return;
    }
    int known = 0;
    for (size_t i = 0; i < NCALIB_FIELDS && !known; i++)
      if (!strcmp(tok, calib_fields[i].key)) {
        char *end;
        double v = strtod(val, &end);
        double *dst = (double *)((char *)c + calib_fields[i].offset);
        if (*end || !isfinite(v) || v < 0 || (calib_fields[i].required && v <= 0)) {
          snprintf(why, nwhy, "'%s %s': a rate that is not positive", tok, val);
          return;
        }
        *dst = v;
        seen |= 1 << i;
        known = 1;
      }
    for (int k = 0; k < 4 && !known; k++)
      if (!strcmp(tok, curve_keys[k])) {
        char *q = val;
        for (int j = 0; j < FE_CURVE_POINTS; j++) {
          char *end;
          double v = strtod(q, &end);
          if (end == q || !isfinite(v) || v <= 0 || (j < FE_CURVE_POINTS - 1 && *end != ',')) {
            snprintf(why, nwhy, "'%s %s' is not %d positive numbers", tok, val, FE_CURVE_POINTS);
            return;
          }
          c->curve[k][j] = v;
          q = end + 1;
        }
        known = 1;
      }
    if (!known) {
      snprintf(why, nwhy, "unknown field '%s'", tok);
      return;
    }
  }
  if (seen != (1 << NCALIB_FIELDS) - 1) {
    snprintf(why, nwhy, "a ceiling is missing");
    return;
  }
  c->valid = 1;
}

/* Read a stored calibration: one line per precision. A file that does not parse (a field
 * unknown or missing, a rate that is not positive and finite) is dropped whole, with a
 * word on stderr: the backend is measured again when a prediction needs it, and the new
 * measurement is stored. */
int fe_perf_load_calibration(fe_backend *be)
{
  char path[4200];
  FE_CHECK(calibration_path(be, path, sizeof path));
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  fe_calibration stored[FE_NPRECISIONS];
  memset(stored, 0, sizeof stored);
  char line[1024], why[320] = "", reason[256] = "";
  int n = 0;
  while (!why[0] && fgets(line, sizeof line, f)) {
    fe_calibration c;
    fe_precision p = FE_DOUBLE;
    n++;
    if (strspn(line, " \t\r\n") == strlen(line)) continue; /* blank */
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(why, sizeof why, "line %d is too long", n);
      break;
    }
    parse_calibration_line(line, &p, &c, reason, sizeof reason);
    if (!c.valid) snprintf(why, sizeof why, "line %d: %s", n, reason);
    else stored[p] = c;
  }
  if (!why[0] && ferror(f)) snprintf(why, sizeof why, "cannot be read");
  fclose(f);
  if (why[0]) {
    fe_cache_drop(path, why);
    return 0;
  }
  for (int p = 0; p < FE_NPRECISIONS; p++)
    if (stored[p].valid) {
      be->calib[p] = stored[p];
      be->calib[p].gpu = be->info.is_gpu;
      be->calib[p].tables_l1 = be->info.tables_l1;
    }
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
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    const fe_calibration *c = &be->calib[p];
    if (!c->valid) continue;
    ok = fprintf(f, "%s", fe_precision_name((fe_precision)p)) > 0 && ok;
    for (size_t i = 0; i < NCALIB_FIELDS; i++)
      ok = fprintf(f, " %s %.6g", calib_fields[i].key,
                   *(const double *)((const char *)c + calib_fields[i].offset)) > 0 && ok;
    for (int k = 0; k < 4; k++) {
      if (!(c->curve[k][0] > 0)) continue;
      ok = fprintf(f, " %s ", curve_keys[k]) > 0 && ok;
      for (int j = 0; j < FE_CURVE_POINTS; j++)
        ok = fprintf(f, "%s%.4g", j ? "," : "", c->curve[k][j]) > 0 && ok;
    }
    ok = fputc('\n', f) != EOF && ok;
  }
  ok = !fclose(f) && ok;
  if (!ok || rename(tmp, path)) remove(tmp); /* a failed write costs a recalibration only */
  return 0;
}

/* Best of `reps` runs of a kernel, wall clock; `queued` launches per run (the last waits). */
static int best_time(fe_backend *be, fe_kernel *k, size_t ngroups, size_t block, int nargs,
                     const fe_arg *args, fe_precision prec, int reps, int queued, double *best)
{
  *best = INFINITY;
  for (int r = 0; r < reps; r++) {
    double t0 = fe_clock();
    for (int q = 0; q < queued; q++)
      FE_CHECK(be->ops->launch(be->impl, k, ngroups, block, nargs, args, prec, NULL));
    FE_CHECK(be->ops->finish(be->impl));
    double t = fe_clock() - t0;
    if (t < *best) *best = t;
  }
  return 0;
}

/* The calibration kernels of one backend and precision, and their buffers. */
typedef struct calib_run {
  fe_backend *be;
  fe_precision prec;
  fe_module *mod;
  fe_kernel *triad, *stream, *cached, *fma, *scalar, *shared, *divide, *atomics, *constant;
  fe_kernel *chase_init, *chase, *phases, *indexed_init, *indexed, *table_lines;
  fe_kernel *chain; /* the cpu: one chain of dependent multiply-adds a group */
  fe_kernel *rows_init, *rows; /* the cpu: csr's rows */
  fe_kernel *lanes[FE_CURVE_POINTS]; /* the cpu: fe_fma with 2, 4, ..., 64 lanes */
  fe_buffer a, x, y, out;
  size_t n;       /* reals per array */
  int ngpu;       /* compute units (GPU) or threads (cpu) */
  int steps;      /* FMA and shared-load steps per item */
  int block;      /* items per group: two warps on a GPU, so that the number of groups sets
                   * the warps resident per compute unit (the curves); 1 on the cpu */
  int chains;     /* independent FMA chains per item (the cpu's SIMD lanes need more) */
} calib_run;

/* Seconds of a stream triad over n reals in g groups (grid-stride). */
static int time_stream(calib_run *c, long long g, double *t)
{
  fe_arg args[6] = {{.kind = FE_ARG_INT, .i = g},          {.kind = FE_ARG_INT, .i = (long long)c->n},
                    {.kind = FE_ARG_BUFFER, .buf = &c->a}, {.kind = FE_ARG_BUFFER, .buf = &c->x},
                    {.kind = FE_ARG_BUFFER, .buf = &c->y}, {.kind = FE_ARG_REAL, .r = 3.0}};
  return best_time(c->be, c->stream, (size_t)g, (size_t)c->block, 6, args, c->prec, 4, 1, t);
}

static int time_fma(calib_run *c, long long g, double *t)
{
  fe_arg args[3] = {{.kind = FE_ARG_INT, .i = g}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                    {.kind = FE_ARG_REAL, .r = 0.999999}};
  return best_time(c->be, c->fma, (size_t)g, (size_t)c->block, 3, args, c->prec, 3, 1, t);
}

static int time_shared(calib_run *c, long long g, double *t)
{
  fe_arg args[3] = {{.kind = FE_ARG_INT, .i = g}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                    {.kind = FE_ARG_INT, .i = c->steps}};
  return best_time(c->be, c->shared, (size_t)g, (size_t)c->block, 3, args, c->prec, 3, 1, t);
}

/* Microseconds a step of the pointer chase takes over the first n words of buffer a (one
 * group; the best of `runs`, each from another start unless `same`: a chain walked again
 * finds its lines in the cache). */
static int time_chase(calib_run *c, long long n, int same, int runs, double *us)
{
  const int steps = 1024, stride = 1048609 % (int)n; /* odd: the chain visits every word */
  fe_arg iargs[4] = {{.kind = FE_ARG_INT, .i = c->ngpu * 4}, {.kind = FE_ARG_INT, .i = n},
                     {.kind = FE_ARG_INT, .i = stride}, {.kind = FE_ARG_BUFFER, .buf = &c->a}};
  FE_CHECK(c->be->ops->launch(c->be->impl, c->chase_init, (size_t)c->ngpu * 4, (size_t)c->block, 4,
                              iargs, c->prec, NULL));
  *us = INFINITY;
  for (int r = 0; r <= runs; r++) { /* run 0 warms up (and fills the cache for `same`) */
    fe_arg args[5] = {{.kind = FE_ARG_INT, .i = 1},
                      {.kind = FE_ARG_INT, .i = same ? 0 : (long long)r * 131072 % (n / 2)},
                      {.kind = FE_ARG_INT, .i = steps}, {.kind = FE_ARG_BUFFER, .buf = &c->a},
                      {.kind = FE_ARG_BUFFER, .buf = &c->out}};
    double t;
    FE_CHECK(best_time(c->be, c->chase, 1, (size_t)c->block, 5, args, c->prec, 1, 1, &t));
    double step = (t - c->be->calib[c->prec].sync_us * 1e-6) / steps * 1e6; /* less the launch */
    if (r > 0 && step < *us) *us = step;
  }
  if (*us < 0) *us = 0;
  return 0;
}

/* Run every micro-benchmark; fill be->calib[prec]. */
static int calibrate_kernels(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  int gpu = be->info.is_gpu, cu = c->ngpu;
  size_t B = (size_t)c->block;
  /* DRAM: the triad over the whole arrays, CHUNK reals per item */
  int chunk = gpu ? 16 : 1 << 14;
  long long tg = (long long)((c->n + B * chunk - 1) / (B * chunk));
  fe_arg targs[6] = {{.kind = FE_ARG_INT, .i = tg},         {.kind = FE_ARG_INT, .i = (long long)c->n},
                     {.kind = FE_ARG_BUFFER, .buf = &c->a}, {.kind = FE_ARG_BUFFER, .buf = &c->x},
                     {.kind = FE_ARG_BUFFER, .buf = &c->y}, {.kind = FE_ARG_REAL, .r = 3.0}};
  FE_CHECK(best_time(be, c->triad, (size_t)tg, B, 6, targs, c->prec, 6, 1, &t));
  cal->gbytes = 3.0 * (double)c->n * w / t / 1e9;
  /* launches: an empty triad waited for, and 32 queued */
  fe_arg largs[6];
  memcpy(largs, targs, sizeof largs);
  largs[0].i = 1;
  largs[1].i = 0;
  FE_CHECK(best_time(be, c->triad, 1, B, 6, largs, c->prec, 20, 1, &t));
  cal->sync_us = t * 1e6;
  FE_CHECK(best_time(be, c->triad, 1, B, 6, largs, c->prec, 5, 32, &t));
  cal->launch_us = (t * 1e6 - cal->sync_us) / 31 > 0 ? (t * 1e6 - cal->sync_us) / 31 : 0;
  /* the last-level cache: a triad on arrays of a third of its size, 16 passes */
  size_t cache = be->info.l2_bytes ? be->info.l2_bytes : (size_t)1 << 20;
  long long nc = (long long)(cache / 3 / 3 / (size_t)w);
  long long cg = gpu ? (long long)cu * 32 : cu;
  if (!gpu) nc = nc / cg * cg; /* the cpu: each group its own contiguous part */
  int passes = 16;
  fe_arg cargs[7] = {{.kind = FE_ARG_INT, .i = cg},          {.kind = FE_ARG_INT, .i = nc},
                     {.kind = FE_ARG_INT, .i = passes},      {.kind = FE_ARG_BUFFER, .buf = &c->a},
                     {.kind = FE_ARG_BUFFER, .buf = &c->x},  {.kind = FE_ARG_BUFFER, .buf = &c->y},
                     {.kind = FE_ARG_REAL, .r = 2.0}};
  FE_CHECK(best_time(be, c->cached, (size_t)cg, B, 7, cargs, c->prec, 3, 1, &t));
  cal->l2_gbytes = 3.0 * (double)nc * passes * w / t / 1e9;
  /* FMA and shared loads: four full waves of groups (32 groups of two warps per unit); on
   * the cpu 256 groups a thread, milliseconds, so that starting the threads (40-60 us with
   * a passive wait policy) is not what is measured */
  long long full = gpu ? (long long)cu * 32 * 4 : (long long)cu * 256;
  FE_CHECK(time_fma(c, full, &t));
  cal->gflops = 2.0 * (double)full * B * c->chains * c->steps / t / 1e9;
  cal->scalar_gflops = cal->gflops;
  if (!gpu) { /* the same loops, compiled without vectorization */
    fe_arg sargs[3] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                       {.kind = FE_ARG_REAL, .r = 0.999999}};
    FE_CHECK(best_time(be, c->scalar, (size_t)full, B, 3, sargs, c->prec, 3, 1, &t));
    cal->scalar_gflops = 2.0 * (double)full * B * c->chains * c->steps / t / 1e9;
    /* SIMD code can always run as scalar code: a SIMD rate below the scalar one was measured
     * while something else held the cores (seen under a parallel test run) */
    if (cal->gflops < cal->scalar_gflops) cal->gflops = cal->scalar_gflops;
  }
  /* the cpu backend: the same loops with as many lanes as a kernel's group has cells, 2 to 64, as
   * fractions of the rate above (each the same work: 64 / lanes times the groups) */
  memset(cal->curve[FE_CURVE_LANES], 0, sizeof cal->curve[FE_CURVE_LANES]);
  if (c->lanes[0]) {
    for (int k = 0; k < FE_CURVE_POINTS; k++) {
      int lanes = 2 << k;
      long long g = full * 64 / lanes;
      fe_arg largs2[3] = {{.kind = FE_ARG_INT, .i = g}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                          {.kind = FE_ARG_REAL, .r = 0.999999}};
      FE_CHECK(best_time(be, c->lanes[k], (size_t)g, B, 3, largs2, c->prec, 3, 1, &t));
      cal->curve[FE_CURVE_LANES][k] = 2.0 * (double)g * lanes * c->steps / t / 1e9 / cal->gflops;
    }
  }
  FE_CHECK(time_shared(c, full, &t));
  cal->shared_gbytes = 4.0 * (double)full * B * c->steps * w / t / 1e9;
  /* divisions: a quarter of the FMA steps */
  int dsteps = c->steps / 4;
  fe_arg dargs[4] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                     {.kind = FE_ARG_REAL, .r = 0.75}, {.kind = FE_ARG_INT, .i = dsteps}};
  FE_CHECK(best_time(be, c->divide, (size_t)full, B, 4, dargs, c->prec, 3, 1, &t));
  cal->nonfma_gops = (double)full * B * c->chains * dsteps / t / 1e9;
  /* atomics: scattered over 2^22 reals (a vector of a few million dofs) */
  long long na = (long long)1 << 22, ag = gpu ? (long long)cu * 64 : (long long)cu * 4096;
  int asteps = 64;
  FE_CHECK(be->ops->fill(be->impl, &c->a, (size_t)na, c->prec, 0.0));
  fe_arg aargs[5] = {{.kind = FE_ARG_INT, .i = ag}, {.kind = FE_ARG_INT, .i = na},
                     {.kind = FE_ARG_BUFFER, .buf = &c->a}, {.kind = FE_ARG_REAL, .r = 1.0},
                     {.kind = FE_ARG_INT, .i = asteps}};
  FE_CHECK(best_time(be, c->atomics, (size_t)ag, B, 5, aargs, c->prec, 3, 1, &t));
  cal->atomic_gops = (double)ag * B * asteps / t / 1e9;
  /* constant tables: every warp reads 32 distinct words at each of 2 loads a step (on the
   * cpu: one item a group reading its own word) */
  fe_arg kargs[3] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                     {.kind = FE_ARG_INT, .i = dsteps}};
  FE_CHECK(best_time(be, c->constant, (size_t)full, B, 3, kargs, c->prec, 3, 1, &t));
  cal->constant_gops = 2.0 * (double)full * B * dsteps / t / 1e9;
  /* CPU devices: values gathered and scatter-added through a cell map, one at a time (the
   * cpu backend's plain adds, OpenCL's atomic ones; GPUs: their L2 and atomics ceilings).
   * Each value its node's first touch, from vectors beyond L1 (x and y 16 MiB in double);
   * then 8 passes over an eighth of the groups: the 7 after the first find their nodes in
   * L1 (a walk's neighbours' nodes) */
  cal->indexed_gops = cal->indexed_l1_gops = 0;
  if (!gpu) {
    const int ix = 8 * 64; /* entries a group (IX_CELLS x IX_NB) */
    /* groups, each its own nodes (x, y and the map within the buffers) */
    const long long ig = full * 8 < (long long)(c->n / ix) ? full * 8 : (long long)(c->n / ix);
    fe_arg iargs[2] = {{.kind = FE_ARG_INT, .i = ig}, {.kind = FE_ARG_BUFFER, .buf = &c->a}};
    FE_CHECK(be->ops->launch(be->impl, c->indexed_init, (size_t)ig, B, 2, iargs, c->prec, NULL));
    fe_arg xargs[5] = {{.kind = FE_ARG_INT, .i = ig}, {.kind = FE_ARG_INT, .i = 1},
                       {.kind = FE_ARG_BUFFER, .buf = &c->a}, {.kind = FE_ARG_BUFFER, .buf = &c->x},
                       {.kind = FE_ARG_BUFFER, .buf = &c->y}};
    FE_CHECK(best_time(be, c->indexed, (size_t)ig, B, 5, xargs, c->prec, 5, 1, &t));
    cal->indexed_gops = 2.0 * (double)ig * ix / t / 1e9;
    double t8, v = 2.0 * (double)(ig / 8) * ix; /* values a pass over an eighth */
    xargs[0].i = ig / 8, xargs[1].i = 8;
    FE_CHECK(best_time(be, c->indexed, (size_t)(ig / 8), B, 5, xargs, c->prec, 5, 1, &t8));
    double rest = t8 - v / (cal->indexed_gops * 1e9); /* the 7 passes from L1 */
    cal->indexed_l1_gops = rest > 0 ? 7 * v / rest / 1e9 : cal->indexed_gops;
  }
  /* the cpu: csr's rows, 2^25 entries (their values and indices beyond the last-level cache,
   * 400 MB in double: this machine's 260 MB L3 held half as many), x through them */
  cal->rows_gbytes = 0;
  if (c->rows) {
    long long entries = (long long)1 << 25;
    while (entries * (long long)(w + sizeof(int)) > (long long)(be->info.global_mem / 4) &&
           entries > (1 << 20))
      entries /= 2;
    const long long nrows = entries / 27;
    fe_buffer cols = {0}, vals = {0};
    int rc = be->ops->alloc(be->impl, (size_t)entries * sizeof(int), &cols);
    if (!rc) rc = be->ops->alloc(be->impl, (size_t)entries * w, &vals);
    if (!rc) rc = be->ops->fill(be->impl, &vals, (size_t)entries, c->prec, 0.5);
    fe_arg rargs[5] = {{.kind = FE_ARG_INT, .i = nrows}, {.kind = FE_ARG_BUFFER, .buf = &cols},
                       {.kind = FE_ARG_BUFFER, .buf = &vals}, {.kind = FE_ARG_BUFFER, .buf = &c->x},
                       {.kind = FE_ARG_BUFFER, .buf = &c->y}};
    if (!rc) rc = be->ops->launch(be->impl, c->rows_init, (size_t)nrows, 1, 2, rargs, c->prec, NULL);
    if (!rc) rc = best_time(be, c->rows, (size_t)nrows, 1, 5, rargs, c->prec, 5, 1, &t);
    if (!rc) cal->rows_gbytes = ((double)entries * (w + sizeof(int)) + nrows * 2.0 * w) / t / 1e9;
    if (cols.ptr) be->ops->release(be->impl, &cols);
    if (vals.ptr) be->ops->release(be->impl, &vals);
    FE_CHECK(rc);
  }
  /* the cpu: a cycle of llvm-mca's core, where the backend simulates hot loops: a chain of
   * dependent multiply-adds on every thread, its step's time over the step's cycles */
  cal->cycle_ns = 0;
  fe_kernel_resources res;
  if (c->chain && be->ops->kernel_resources && !be->ops->kernel_resources(be->impl, c->chain, &res) &&
      res.loop_cycles > 0) {
    const int csteps = 1 << 22;
    fe_arg chargs[4] = {{.kind = FE_ARG_INT, .i = cu}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                        {.kind = FE_ARG_REAL, .r = 0.999999}, {.kind = FE_ARG_INT, .i = csteps}};
    FE_CHECK(best_time(be, c->chain, (size_t)cu, B, 4, chargs, c->prec, 3, 1, &t));
    double step = (t - cal->sync_us * 1e-6) / csteps;
    if (step > 0) cal->cycle_ns = step / res.loop_cycles * 1e9;
  }
  /* GPUs: the L1's lookups of global loads it holds (a table of 8192 reals, as the kernels'
   * tables and gathered nodes): every item of a warp reading one word (one line a request),
   * then words 81 apart (32 lines of distinct banks: a line each, no bank waits) */
  cal->l1_request_gops = cal->l1_line_gops = 0;
  if (gpu) {
    const int lsteps = 1024;
    fe_arg largs3[5] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_INT, .i = 0},
                        {.kind = FE_ARG_INT, .i = lsteps}, {.kind = FE_ARG_BUFFER, .buf = &c->a},
                        {.kind = FE_ARG_BUFFER, .buf = &c->out}};
    double requests = (double)full * (double)(B / 32 > 0 ? B / 32 : 1) * lsteps;
    FE_CHECK(best_time(be, c->table_lines, (size_t)full, B, 5, largs3, c->prec, 3, 1, &t));
    cal->l1_request_gops = requests / t / 1e9;
    largs3[1].i = 81;
    FE_CHECK(best_time(be, c->table_lines, (size_t)full, B, 5, largs3, c->prec, 3, 1, &t));
    cal->l1_line_gops = 32 * requests / t / 1e9;
  }
  /* GPUs: the waits of a group's path: device memory (a chase over words well beyond the
   * last-level cache), L2 (a chain that fits it, walked again), a phase (one group) */
  cal->dram_latency_us = cal->l2_latency_us = cal->phase_latency_us = 0;
  if (gpu) {
    long long words = (long long)(c->n * w / 4), far = (long long)1 << 25, near = (long long)1 << 21;
    while (far < 4 * (long long)(cache / 4) && 2 * far <= words) far *= 2;
    if (far > words) far = words;
    FE_CHECK(time_chase(c, far, 0, 3, &cal->dram_latency_us));
    FE_CHECK(time_chase(c, near < words ? near : words, 1, 3, &cal->l2_latency_us));
    const int psteps = 4096;
    fe_arg pargs[3] = {{.kind = FE_ARG_INT, .i = 1}, {.kind = FE_ARG_INT, .i = psteps},
                       {.kind = FE_ARG_BUFFER, .buf = &c->out}};
    FE_CHECK(best_time(be, c->phases, 1, B, 3, pargs, c->prec, 3, 1, &t));
    cal->phase_latency_us = (t - cal->sync_us * 1e-6) / psteps * 1e6;
    if (cal->phase_latency_us < 0) cal->phase_latency_us = 0;
  }
  /* GPUs: each rate with 2, 4, ..., 64 warps resident per unit (one wave of groups of two
   * warps), as a fraction of the rate above */
  memset(cal->curve, 0, sizeof cal->curve[0] * FE_CURVE_LANES);
  if (gpu) {
    for (int k = 0; k < FE_CURVE_POINTS; k++) {
      long long g = (long long)cu << k; /* 2^(k+1) warps per unit */
      FE_CHECK(time_stream(c, g, &t));
      cal->curve[0][k] = 3.0 * (double)c->n * w / t / 1e9 / cal->gbytes;
      FE_CHECK(time_shared(c, g, &t));
      cal->curve[1][k] = 4.0 * (double)g * B * c->steps * w / t / 1e9 / cal->shared_gbytes;
      FE_CHECK(time_fma(c, g, &t));
      cal->curve[2][k] = 2.0 * (double)g * B * c->chains * c->steps / t / 1e9 / cal->gflops;
    }
  }
  cal->gpu = gpu;
  cal->tables_l1 = be->info.tables_l1;
  cal->valid = 1;
  return 0;
}

/* Compile the calibration kernels, run them, fill be->calib[prec] and store it. */
static int run_calibration(fe_backend *be, fe_precision prec, fe_report *rep)
{
  calib_run c = {.be = be, .prec = prec};
  size_t w = fe_precision_size(prec);
  c.ngpu = be->info.compute_units > 0 ? be->info.compute_units : 1;
  c.steps = be->info.is_gpu ? 1024 : 4096;
  c.block = be->info.is_gpu ? 64 : 1;
  /* the cpu: the lanes of four 64-byte SIMD registers */
  c.chains = be->info.is_gpu ? 8 : (int)(256 / w);
  c.n = be->info.is_gpu ? (size_t)1 << 27 : (size_t)1 << 24;
  while (c.n * w * 3 > be->info.global_mem / 4 && c.n > ((size_t)1 << 20)) c.n /= 2;
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab calibration kernels, %s backend, %s precision */\n", be->name,
                   fe_precision_name(prec));
  fe_strbuf_printf(&b, "#define FE_DOUBLE %d\n#define FE_COLORED 0\n#define BLOCK %d\n#define CHUNK %d\n"
                       "#define FMA_CHAINS %d\n#define FMA_STEPS %d\n",
                   prec == FE_DOUBLE, c.block, be->info.is_gpu ? 16 : 1 << 14, c.chains, c.steps);
  fe_strbuf_append(&b, be->ops->preamble(be->impl, prec));
  fe_strbuf_append(&b, fe_kernel_template("calibrate"));
  char *src;
  FE_CHECK(fe_strbuf_finish(&b, &src));
  double compile_s, t0 = fe_clock();
  int cached;
  int rc = fe_compile(be, src, &c.mod, &compile_s, &cached);
  free(src);
  FE_CHECK(rc);
  struct { const char *name; fe_kernel **k; } ks[] = {
      {"fe_triad", &c.triad},         {"fe_stream", &c.stream},   {"fe_cached", &c.cached},
      {"fe_fma", &c.fma},             {"fe_fma_scalar", &c.scalar},             {"fe_shared_loads", &c.shared}, {"fe_divide", &c.divide},
      {"fe_atomics", &c.atomics},     {"fe_constant_loads", &c.constant},
      {"fe_chase_init", &c.chase_init}, {"fe_chase", &c.chase}, {"fe_phases", &c.phases},
      {"fe_indexed_init", &c.indexed_init}, {"fe_indexed", &c.indexed},
      {"fe_table_lines", &c.table_lines}};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0] && !rc; i++)
    rc = be->ops->kernel(be->impl, c.mod, ks[i].name, ks[i].k);
  const int host = be->info.cpu_calibration; /* calibrate.knl's FE_CPU kernels */
  for (int k = 0; k < FE_CURVE_POINTS && !rc && host; k++) {
    char name[32];
    snprintf(name, sizeof name, "fe_fma_lanes%d", 2 << k);
    rc = be->ops->kernel(be->impl, c.mod, name, &c.lanes[k]);
  }
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_fma_chain", &c.chain);
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_rows_init", &c.rows_init);
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_rows", &c.rows);
  size_t nout = (size_t)c.ngpu * 32 * 4 + 64;
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.a);
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.x);
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.y);
  if (!rc) rc = be->ops->alloc(be->impl, nout * w, &c.out);
  if (!rc) rc = be->ops->fill(be->impl, &c.x, c.n, prec, 1.0);
  if (!rc) rc = be->ops->fill(be->impl, &c.y, c.n, prec, 2.0);
  if (!rc) rc = calibrate_kernels(&c);
  fe_buffer *bufs[] = {&c.a, &c.x, &c.y, &c.out};
  for (int i = 0; i < 4; i++)
    if (bufs[i]->ptr) be->ops->release(be->impl, bufs[i]);
  be->ops->module_free(be->impl, c.mod);
  FE_CHECK(rc);
  const fe_calibration *cal = &be->calib[prec];
  if (rep) {
    fe_report_begin(rep, "calibrate", be, prec, "micro-benchmarks",
                    "stream triad, cached triad, shared loads, FMA and division chains, "
                    "scattered atomics, launches, pointer chases and barrier phases (GPUs)");
    rep->seconds = fe_clock() - t0 - (cached ? 0 : compile_s);
    rep->compile_seconds = cached ? 0 : compile_s;
    rep->peak_gbytes = cal->gbytes;
    rep->peak_gflops = cal->gflops;
    snprintf(rep->bound, sizeof rep->bound, "all");
  }
  return save_calibration(be);
}

int fe_perf_calibrate(fe_backend *be, fe_precision prec, fe_report *rep)
{
  FE_CHECK(run_calibration(be, prec, rep));
  if (rep) fe_perf_log_add(rep);
  return 0;
}

int fe_bank_wavefronts(const long long *idx, int n, int size)
{
  /* a word read twice is sent once: repeats are looked for among the words of the same first
   * bank only (a warp's 32 against each other took 500 comparisons a call) */
  long long seen[32][32];
  int nseen[32] = {0}, per_bank[32] = {0}, most = 0, words = size / 4 > 0 ? size / 4 : 1;
  for (int t = 0; t < n && t < 32; t++) {
    if (idx[t] < 0) continue;
    const int home = (int)((idx[t] * words) & 31);
    int dup = 0;
    for (int s = 0; s < nseen[home] && !dup; s++) dup = seen[home][s] == idx[t];
    if (dup) continue;
    seen[home][nseen[home]++] = idx[t];
    for (int k = 0; k < words; k++) {
      int bank = (home + k) & 31;
      if (++per_bank[bank] > most) most = per_bank[bank];
    }
  }
  return most;
}

int fe_distinct_words(const long long *idx, int n)
{
  long long seen[32];
  int ns = 0;
  for (int t = 0; t < n && t < 32; t++) {
    int dup = idx[t] < 0;
    for (int s = 0; s < ns && !dup; s++) dup = seen[s] == idx[t];
    if (!dup) seen[ns++] = idx[t];
  }
  return ns;
}

/* The bank model for 8-byte words by half-warps of 16 items, each half its own count (4-byte
 * words: the whole warp's). */
static int half_warp_wavefronts(const long long *idx, int n, int size)
{
  if (size <= 4) return fe_bank_wavefronts(idx, n, size);
  long long half[32];
  int total = 0;
  for (int t0 = 0; t0 < n && t0 < 32; t0 += 16) {
    int m = 0;
    for (int t = t0; t < t0 + 16 && t < n; t++) half[m++] = idx[t];
    total += fe_bank_wavefronts(half, m, size);
  }
  return total;
}

int fe_bank_store_wavefronts(const long long *idx, int n, int size)
{
  return half_warp_wavefronts(idx, n, size);
}

/* A warp's global load of 8-byte words is served in two halves of 16 items (Nsight Compute on
 * the H100: transpose's table and factor loads in double took about twice the wavefronts a
 * whole-warp count gives, in single the same). */
int fe_l1_wavefronts(const long long *idx, int n, int size)
{
  return half_warp_wavefronts(idx, n, size);
}

int fe_l1_lines(const long long *idx, int n, int size)
{
  long long line[32];
  for (int t = 0; t < n && t < 32; t++) line[t] = idx[t] < 0 ? -1 : idx[t] * size / 128;
  return fe_distinct_words(line, n);
}

double fe_bank_random_wavefronts(int size)
{
  unsigned s = 12345u;
  long long idx[32];
  double sum = 0;
  const int samples = 256;
  for (int r = 0; r < samples; r++) {
    for (int t = 0; t < 32; t++) {
      s = s * 1664525u + 1013904223u;
      idx[t] = (long long)(s >> 20); /* a random word of 4096 (the generator's high bits) */
    }
    sum += fe_bank_wavefronts(idx, 32, size);
  }
  return sum / samples;
}

static fe_build_counts build_counts;

fe_build_counts fe_perf_build_counts(void) { return build_counts; }
void fe_perf_count_setup(void) { build_counts.setups++; }

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
  rep->l1_wavefronts = w->l1_wavefronts;
  rep->table_wavefronts = w->table_wavefronts;
  memcpy(rep->l1_lines, w->l1_lines, sizeof rep->l1_lines);
  memcpy(rep->table_lines, w->table_lines, sizeof rep->table_lines);
  rep->groups = w->groups;
  rep->group_items = w->group_items;
  rep->lanes = w->lanes;
  rep->dram_trips = w->dram_trips;
  rep->l2_trips = w->l2_trips;
  rep->phases = w->phases;
  rep->nphase_work = w->nphase_work;
  memcpy(rep->phase_work, w->phase_work, sizeof rep->phase_work);
  rep->loop_trips = w->loop_trips;
}

void fe_perf_occupancy(fe_backend *be, fe_kernel *k, fe_report *rep)
{
  const fe_device_info *in = &be->info;
  fe_kernel_resources res;
  rep->occupancy = 0;
  rep->resident = 0;
  if (!k || !be->ops->kernel_resources) return;
  if (!in->is_gpu) { /* the cpu: its hot loop's cycles, where the work counts its iterations */
    if (!(rep->loop_trips > 0)) return;
    if (be->ops->kernel_resources(be->impl, k, &res)) fe_error_clear(); /* not known: none */
    else rep->loop_cycles = res.loop_cycles;
    return;
  }
  if (rep->group_items <= 0) return;
  if (be->ops->kernel_resources(be->impl, k, &res)) { /* not known: no occupancy */
    fe_error_clear();
    return;
  }
  int warp = in->warp > 0 ? in->warp : 32, tpc = in->threads_per_cu > 0 ? in->threads_per_cu : 2048;
  int wpg = (rep->group_items + warp - 1) / warp;
  int groups = tpc / (wpg * warp);
  const char *limit = "threads";
  rep->regs = res.regs;
  rep->shared_per_group = (long long)res.shared;
  if (in->groups_per_cu > 0 && in->groups_per_cu < groups) groups = in->groups_per_cu, limit = "groups";
  if (res.regs > 0 && in->regs_per_cu > 0) { /* registers go to warps in blocks of 256 */
    int per_warp = (res.regs * warp + 255) / 256 * 256;
    int g = in->regs_per_cu / (per_warp * wpg);
    if (g < groups) groups = g, limit = "registers";
  }
  if (res.shared > 0 && in->shared_per_cu > 0) { /* 1 KiB of every group is the system's */
    int g = (int)(in->shared_per_cu / (res.shared + (in->warp == 32 ? 1024 : 0)));
    if (g < groups) groups = g, limit = "shared";
  }
  if (groups < 1) groups = 1;
  rep->occupancy = (double)groups * wpg * warp / tpc;
  rep->resident = groups;
  snprintf(rep->occupancy_limit, sizeof rep->occupancy_limit, "%s", limit);
}

/* The fraction of a ceiling reached with `warps` resident per compute unit, from its
 * calibrated curve (1 when not measured). */
static double curve_at(const double *curve, double warps)
{
  if (!(curve[FE_CURVE_POINTS - 1] > 0) || !(warps > 0)) return 1;
  double x = log2(warps) - 1, f;
  if (x <= 0) f = curve[0] * warps / 2;
  else if (x >= FE_CURVE_POINTS - 1) f = curve[FE_CURVE_POINTS - 1];
  else {
    int i = (int)x;
    f = curve[i] + (x - i) * (curve[i + 1] - curve[i]);
  }
  return f > 1 ? 1 : f;
}

/* One group's phases one after another (GPUs), for the whole call: in each phase the pipes
 * run side by side in the group's warps, so a phase takes its largest pipe's share whole and
 * the others' one W-th (W warps a group); t[] the ceilings alone, data the shared ceiling's
 * data pipe without the L1's lookups (rep->l1_tag_seconds). A pipe whose work no phase
 * describes is a phase of its own; with no phases described, every pipe (sum: their times). */
static double serial_time(fe_report *rep, const double *t, double data, int tables_l1,
                          double sum)
{
  const int np = rep->nphase_work;
  memset(rep->phase_seconds, 0, sizeof rep->phase_seconds);
  rep->stagger_seconds = 0;
  if (np <= 0) return sum;
  enum { DRAM, L2, DATA, TAG, FMA, NONFMA, CONSTANT, N };
  const int ceil_of[N] = {FE_CEIL_DRAM, FE_CEIL_L2,     FE_CEIL_SHARED,  FE_CEIL_SHARED,
                          FE_CEIL_FMA,  FE_CEIL_NONFMA, FE_CEIL_CONSTANT};
  const double time[N] = {t[FE_CEIL_DRAM], t[FE_CEIL_L2],     data, rep->l1_tag_seconds,
                          t[FE_CEIL_FMA],  t[FE_CEIL_NONFMA], t[FE_CEIL_CONSTANT]};
  double amount[FE_PHASES_MAX][N], total[N] = {0};
  for (int p = 0; p < np; p++) {
    const fe_phase_work *w = &rep->phase_work[p];
    double tw = tables_l1 ? w->table_wavefronts : 0, tl = tables_l1 ? w->table_lines : 0;
    const double a[N] = {w->bytes, w->l2_bytes, w->shared_bytes + 128 * (w->l1_wavefronts + tw),
                         w->lines + tl, w->flops, w->nonfma, w->constant};
    for (int k = 0; k < N; k++) total[k] += amount[p][k] = a[k];
  }
  const int warps = rep->group_items > 32 ? (rep->group_items + 31) / 32 : 1;
  double serial = 0;
  for (int p = 0; p < np; p++) {
    double w[FE_NCEILINGS] = {0};
    for (int k = 0; k < N; k++) {
      double share = total[k] > 0 ? amount[p][k] / total[k] * time[k] : 0;
      if (share > w[ceil_of[k]]) w[ceil_of[k]] = share; /* the data pipe or the lookups */
    }
    const double nbar = rep->phase_work[p].barriers > 1 ? rep->phase_work[p].barriers : 1;
    if (w[FE_CEIL_SHARED] / nbar > rep->stagger_seconds) rep->stagger_seconds = w[FE_CEIL_SHARED] / nbar;
    double most = 0, all = 0;
    for (int i = 0; i < FE_NCEILINGS; i++) {
      all += w[i];
      if (w[i] > most) most = w[i];
    }
    rep->phase_seconds[p] = most + (all - most) / warps;
    serial += rep->phase_seconds[p];
  }
  for (int k = 0; k < N; k++) /* work no phase describes */
    if (!(total[k] > 0)) serial += time[k];
  return serial + t[FE_CEIL_INDEXED]; /* the cpu's indexed loops: their own */
}

void fe_perf_model(const fe_calibration *c, int compute_units, fe_report *rep)
{
  fe_calibration g = *c;
  const double vec_gflops = c->gflops; /* the calibrated (vectorized, on the cpu) FMA rate */
  if (!c->gpu) {
    /* the cpu: its groups' "shared" arrays live in L1 and its groups add color by color
     * without atomics, so neither is a ceiling of their own there */
    g.shared_gbytes = g.atomic_gops = g.constant_gops = 0;
    if (g.scalar_gflops > 0) g.gflops = g.scalar_gflops; /* few of its loops are vectorized */
  }
  /* the cpu: the loops that are vectorized at the vectorized rate, the rest at the scalar
   * one, one after the other (a thread runs a group's phases in turn) */
  double vec = !c->gpu && c->scalar_gflops > 0 ? fmin(rep->vec_flops, rep->flops) : 0;
  c = &g;
  double warps = rep->occupancy > 0 ? rep->occupancy * 64 : 0; /* of 64 warps per unit */
  double e_dram = curve_at(c->curve[0], warps), e_shared = curve_at(c->curve[1], warps),
         e_fma = curve_at(c->curve[2], warps);
  double *t = rep->ceiling_seconds;
  /* the cpu: a sparse matrix's rows at the rate of such rows (their streams beside x's loads
   * through the indices, which keep fewer lines in flight than a triad), never above the
   * triad's: a rows rate measured above it is the calibration's noise (a loaded machine), and
   * it put the DRAM ceiling under the bytes at the triad's rate */
  double dram_gbytes = !c->gpu && rep->rows > 0 && c->rows_gbytes > 0
                           ? fmin(c->rows_gbytes, c->gbytes) : c->gbytes;
  t[FE_CEIL_DRAM] = rep->bytes / (dram_gbytes * 1e9 * e_dram);
  t[FE_CEIL_L2] = c->l2_gbytes > 0 ? rep->l2_bytes / (c->l2_gbytes * 1e9 * e_dram) : 0;
  /* shared memory's wavefronts and those of the global loads through L1 take one data pipe;
   * beside it the L1 looks up the lines of each global load (GPUs: its requests and their
   * lines two stages side by side, all the requests at the calibrated requests' rate, all the
   * lines at the lines' rate, the longer of the two), and the longer of the two binds */
  double l1 = rep->l1_wavefronts + (c->tables_l1 ? rep->table_wavefronts : 0);
  t[FE_CEIL_SHARED] = c->shared_gbytes > 0
                          ? (rep->shared_bytes + 128 * l1) / (c->shared_gbytes * 1e9 * e_shared)
                          : 0;
  rep->l1_requests = rep->l1_line_total = rep->l1_tag_seconds = 0;
  for (int k = 1; k <= FE_L1_LINES; k++) {
    double n = rep->l1_lines[k] + (c->tables_l1 ? rep->table_lines[k] : 0);
    rep->l1_requests += n;
    rep->l1_line_total += n * k;
  }
  if (c->l1_request_gops > 0 && c->l1_line_gops > 0)
    rep->l1_tag_seconds = fmax(rep->l1_requests / c->l1_request_gops,
                               rep->l1_line_total / c->l1_line_gops) * 1e-9;
  if (rep->l1_tag_seconds > 0 && c->shared_gbytes > 0) {
    /* few warps keep the lookups as busy as many where each request holds them longer than
     * a shared load's wavefront (Little's law; measured on the H100: requests of 27 lines at
     * the full rate from 4 warps a unit, of one line from 16): the shared curve at the warps
     * times that ratio */
    double per = rep->l1_tag_seconds / rep->l1_requests / (128 / (c->shared_gbytes * 1e9));
    rep->l1_tag_seconds /= warps > 0 ? curve_at(c->curve[1], warps * fmax(per, 1)) : 1;
  }
  double data_pipe = t[FE_CEIL_SHARED]; /* the data pipe alone, beside the lookups */
  if (rep->l1_tag_seconds > t[FE_CEIL_SHARED]) t[FE_CEIL_SHARED] = rep->l1_tag_seconds;
  /* the cpu: the SIMD rate with the kernel's lanes (a group's cells), as calibrated */
  double e_lanes = !c->gpu && rep->lanes > 0 ? curve_at(c->curve[FE_CURVE_LANES], rep->lanes) : 1;
  t[FE_CEIL_FMA] = (rep->flops - vec) / (c->gflops * 1e9 * e_fma) +
                   (vec > 0 ? vec / (vec_gflops * 1e9 * e_lanes) : 0);
  if (!c->gpu && vec_gflops > 0) /* the cpu: a group's factors into its lanes, beside the flops */
    t[FE_CEIL_FMA] += 2 * rep->factor_lanes / (vec_gflops * 1e9 * e_lanes) +
                      2 * rep->factor_gathers / (c->gflops * 1e9);
  t[FE_CEIL_NONFMA] = c->nonfma_gops > 0 ? rep->nonfma / (c->nonfma_gops * 1e9 * e_fma) : 0;
  /* the cpu: the hot loop as llvm-mca simulates it (patch's points), every iteration at its
   * cycles, the threads side by side. Where longer than its multiply-adds and divisions at the
   * calibrated rates (the core's scheduler full of work waiting on one chain), it binds the
   * FMA pipe */
  rep->loop_seconds = 0;
  rep->loop_binds = 0;
  if (!c->gpu && c->cycle_ns > 0 && rep->loop_cycles > 0 && compute_units > 0) {
    rep->loop_seconds = rep->loop_trips * rep->loop_cycles * c->cycle_ns * 1e-9 / compute_units;
    rep->loop_binds = rep->loop_seconds > t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA];
    if (rep->loop_binds) t[FE_CEIL_FMA] = rep->loop_seconds - t[FE_CEIL_NONFMA];
  }
  t[FE_CEIL_ATOMIC] = c->atomic_gops > 0 ? rep->atomics / (c->atomic_gops * 1e9) : 0;
  t[FE_CEIL_CONSTANT] = c->constant_gops > 0 && !(c->tables_l1 && rep->table_wavefronts > 0)
                            ? rep->constant / (c->constant_gops * 1e9 * e_shared)
                            : 0;
  /* the cpu's indexed loops: each node's first touch from beyond L1, the rest from L1 */
  double first = c->indexed_l1_gops > 0 ? fmin(rep->indexed_first, rep->indexed) : rep->indexed;
  double again = rep->indexed - first;
  t[FE_CEIL_INDEXED] = c->indexed_gops > 0 ? first / (c->indexed_gops * 1e9) +
                                                 (again > 0 ? again / (c->indexed_l1_gops * 1e9) : 0)
                                           : 0;
  /* the last wave: groups beyond whole waves leave units idle */
  double fill = 1, waves = 0;
  if (rep->groups > 0 && compute_units > 0) {
    waves = rep->groups / ((double)compute_units * (rep->resident > 0 ? rep->resident : 1));
    fill = waves / ceil(waves);
  }
  rep->l1_tag_seconds /= fill;
  data_pipe /= fill;
  /* the pipes a group waits for (all but the atomic adds) overlap by the groups resident at
   * once: the largest whole, the rest of one group's serial time one G-th of it; the atomic
   * adds are sent and not waited for, served in L2 beside everything else */
  int pipe = FE_CEIL_DRAM;
  double sum = 0;
  for (int i = 0; i < FE_CEIL_LAUNCH; i++) {
    t[i] /= fill;
    if (i == FE_CEIL_ATOMIC) continue;
    sum += t[i];
    if (t[i] > t[pipe]) pipe = i;
  }
  rep->serial_seconds = fmax(serial_time(rep, t, data_pipe, c->tables_l1, sum), t[pipe]);
  double on = t[pipe] + (rep->resident > 0 ? (rep->serial_seconds - t[pipe]) / rep->resident : 0);
  if (!c->gpu) {
    /* the cpu: a thread runs a group's phases one after another, each bound by issuing its
     * instructions, so the multiply-adds, the divisions and the indexed loops add up;
     * memory streams beside them (its prefetchers run ahead of the loops) */
    double issue = t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA] + t[FE_CEIL_INDEXED] +
                   rep->phase_bytes / (dram_gbytes * 1e9 * e_dram);
    if (issue > on) {
      on = issue;
      pipe = FE_CEIL_FMA;
      if (t[FE_CEIL_NONFMA] > t[pipe]) pipe = FE_CEIL_NONFMA;
      if (t[FE_CEIL_INDEXED] > t[pipe]) pipe = FE_CEIL_INDEXED;
    }
  }
  /* as calibrated: the first launch and the host's wait for it (sync), each further one
   * queued behind it (launch) */
  t[FE_CEIL_LAUNCH] = rep->launches > 0 ? (c->sync_us + (rep->launches - 1) * c->launch_us) * 1e-6 : 0;
  /* the waits (GPUs): each group's path, its dependent loads and its phases. The G groups of a
   * wave run the same code from the same start, so they wait at the same time and nothing
   * else runs then: each wave pays the path on top of its pipes' time. */
  t[FE_CEIL_LATENCY] = 0;
  rep->waits_hidden = 0;
  if (c->gpu && rep->resident > 0 && waves > 0) {
    double path = rep->dram_trips * c->dram_latency_us + rep->l2_trips * c->l2_latency_us +
                  rep->phases * c->phase_latency_us;
    t[FE_CEIL_LATENCY] = ceil(waves) * path * 1e-6;
    /* unless a phase long on the L1's pipe staggers them: its queue serves the wave's warps
     * out of step, so the groups leave it spread over its length S. Once the other groups'
     * part of it, S (G - 1) / G, is longer than a group's path, a group's waits fall in their
     * pipe work: hidden in proportion, none at one path, all from two */
    const int G = rep->resident;
    if (G > 1 && t[FE_CEIL_LATENCY] > 0) {
      double x = rep->stagger_seconds * (G - 1) / G / t[FE_CEIL_LATENCY];
      rep->waits_hidden = fmin(1, fmax(0, x - 1));
      t[FE_CEIL_LATENCY] *= 1 - rep->waits_hidden;
    }
  }
  double body = on + t[FE_CEIL_LATENCY];
  int bind = t[FE_CEIL_LATENCY] > t[pipe] ? FE_CEIL_LATENCY : pipe;
  if (t[FE_CEIL_ATOMIC] > body) {
    body = t[FE_CEIL_ATOMIC];
    bind = pipe = FE_CEIL_ATOMIC;
  }
  rep->efficiency = fill * (pipe == FE_CEIL_DRAM || pipe == FE_CEIL_L2            ? e_dram
                            : pipe == FE_CEIL_SHARED || pipe == FE_CEIL_CONSTANT ? e_shared
                            : pipe == FE_CEIL_ATOMIC                             ? 1
                                                                                 : e_fma);
  rep->peak_gbytes = c->gbytes;
  rep->peak_gflops = vec_gflops; /* the roof: the calibrated rate (on the cpu the SIMD one) */
  rep->predicted_seconds = body + t[FE_CEIL_LAUNCH];
  if (t[FE_CEIL_LAUNCH] > t[bind]) bind = FE_CEIL_LAUNCH;
  snprintf(rep->bound, sizeof rep->bound, "%s", fe_ceiling_name(bind));
}

int fe_perf_predict(fe_backend *be, fe_precision prec, fe_report *rep)
{
  if (!be->calib[prec].valid) FE_CHECK(fe_perf_load_calibration(be));
  if (!be->calib[prec].valid) FE_CHECK(run_calibration(be, prec, NULL));
  fe_perf_model(&be->calib[prec], be->info.compute_units, rep);
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
  if (r->kernel_from) { /* an operator's action: what this call built, part by part */
    char ts[32], tk[32];
    format_time(r->setup_seconds, ts, sizeof ts);
    format_time(r->compile_seconds, tk, sizeof tk);
    if (r->setup_seconds > 0) {
      static const char *names[4] = {"schedule", "cell data", "geometry", "the strategy's own"};
      len += snprintf(buf + len, n - (size_t)len, "\n  built      device data %s (", ts);
      for (int i = 0, k = 0; i < 4 && len > 0 && (size_t)len < n; i++) {
        if (!(r->setup_part[i] > 0)) continue;
        char tp[32];
        format_time(r->setup_part[i], tp, sizeof tp);
        len += snprintf(buf + len, n - (size_t)len, "%s%s %s", k++ ? ", " : "", names[i], tp);
      }
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
  } else if (r->compile_seconds > 0 || r->setup_seconds > 0 || r->transfer_seconds > 0)
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
