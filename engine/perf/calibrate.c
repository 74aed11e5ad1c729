/* felab performance: calibration of a backend's ceilings. The micro-benchmarks of
 * calibrate.knl are compiled and run, each ceiling its own (the DRAM triad, the cached
 * triad, launches, FMA and division chains, shared and constant loads, atomics; on the cpu
 * its indexed loops, csr's rows and a cycle of llvm-mca's core; on a GPU the L1's lookups,
 * the waits of a group's path and each rate against the warps resident), and the result is
 * stored (calibration-store.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/core/strbuf.h"
#include "engine/perf/perf-private.h"

const char *fe_kernel_template(const char *name);

/* The host's CPU time as /proc/stat counts it (all cores: busy, busy and idle) and this
 * process's own (every thread, and its children waited for), at one moment. */
typedef struct host_load {
  double busy, total, own;
  int known;
} host_load;

static host_load host_load_now(void)
{
  host_load h = {0, 0, 0, 0};
  unsigned long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  FILE *f = fopen("/proc/stat", "r");
  if (f) {
    h.known = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]) == 8;
    fclose(f);
  }
  double hz = (double)sysconf(_SC_CLK_TCK);
  struct timespec ts;
  h.known = h.known && hz > 0 && !clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  if (!h.known) return h;
  /* user, nice, system, irq, softirq and steal (a hypervisor's other guests) are busy */
  h.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
  h.total = h.busy + (double)(v[3] + v[4]) / hz;
  h.own = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  struct rusage ru; /* and its children's, once waited for (the compiler, llvm-mca) */
  if (!getrusage(RUSAGE_CHILDREN, &ru))
    h.own += (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
  return h;
}

/* The share of the host's CPU time that other processes took between a and b (-1: not
 * known): a calibration measured beside them reads their share off every rate. */
static double others_share(host_load a, host_load b)
{
  if (!a.known || !b.known || b.total - a.total <= 0) return -1;
  double others = (b.busy - a.busy) - (b.own - a.own);
  return others > 0 ? others / (b.total - a.total) : 0;
}

/* Above this share of the cores' time taken by others, a calibration is not stored unless
 * asked for (device.calibrate): it serves the session, and a later one measures again. */
#define CALIBRATION_BUSY 0.15

/* Best of `reps` runs of a kernel, wall clock; `queued` launches per run (the last waits). */
static int best_time(fe_backend *be, fe_kernel *k, size_t ngroups, size_t block, int nargs,
                     const fe_arg *args, fe_precision prec, int reps, int queued, double *best)
{
  *best = INFINITY;
  /* the cpu: at least 40 ms of runs (at most 64): a loop of a few milliseconds caught a slow
   * stretch of a shared machine in all of 3-5 runs (the Ice Lake VM's FMA rate 36-69 GF/s
   * one process to the next, its kernels' times within 2%; 53-69 with this) */
  double spent = 0;
  for (int r = 0; r < reps || (!be->info.is_gpu && spent < 0.04 && r < 64); r++) {
    double t0 = fe_clock();
    for (int q = 0; q < queued; q++)
      FE_CHECK(be->ops->launch(be->impl, k, ngroups, block, nargs, args, prec, NULL));
    FE_CHECK(be->ops->finish(be->impl));
    double t = fe_clock() - t0;
    spent += t;
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
  fe_kernel *padded; /* the cpu: sumfact's contractions over padded arrays */
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

/* DRAM: the triad over the whole arrays, CHUNK reals per item; then the launches: an empty
 * triad waited for, and 32 queued. */
static int calibrate_dram_and_launches(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  size_t B = (size_t)c->block;
  /* DRAM: the triad over the whole arrays, CHUNK reals per item */
  int chunk = be->info.is_gpu ? 16 : 1 << 14;
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
  return 0;
}

/* The last-level cache: a triad on arrays of a third of its size, 16 passes. */
static int calibrate_cache(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  int gpu = be->info.is_gpu, cu = c->ngpu;
  size_t B = (size_t)c->block;
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
  return 0;
}

/* The cpu: how much of the last-level cache a call keeps from one run to the next. The
 * cached triad again, its three arrays a quarter, three eighths, ..., the whole of the cache,
 * 4 passes each, every size's rate kept (llc_gbytes at a quarter, the cache's own: lines
 * from beyond L2; llc_curve the rest): the model takes a call's bytes at the rate of its
 * size. The largest size up to which every one runs above the geometric mean of the L2
 * triad's rate and memory's is what the cache keeps (llc_keep_bytes: a cyclic sweep through
 * an LRU cache larger than it finds nothing again; on the 2-core AMD EPYC VM the rate falls
 * along a slope instead, 97 GB/s at 8 MB to 34-46 at 32, one thread, and the mean, 54-56,
 * crosses it at 24 MB). 0: not measured. */
static int calibrate_llc_keep(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  const double llc = (double)be->info.llc_bytes;
  cal->llc_keep_bytes = cal->llc_gbytes = 0;
  memset(cal->llc_curve, 0, sizeof cal->llc_curve);
  if (be->info.is_gpu || !(llc > 0) || !(cal->l2_gbytes > cal->gbytes) || !(cal->gbytes > 0)) return 0;
  const long long cg = c->ngpu;
  const double mid = sqrt(cal->l2_gbytes * cal->gbytes);
  int kept = 1; /* every size so far above the mean */
  for (int k = 2; k <= 8; k++) {
    long long nc = (long long)(llc * k / 8 / 3 / w) / cg * cg;
    if (nc > (long long)c->n) break;
    const int passes = 4;
    fe_arg cargs[7] = {{.kind = FE_ARG_INT, .i = cg},          {.kind = FE_ARG_INT, .i = nc},
                       {.kind = FE_ARG_INT, .i = passes},      {.kind = FE_ARG_BUFFER, .buf = &c->a},
                       {.kind = FE_ARG_BUFFER, .buf = &c->x},  {.kind = FE_ARG_BUFFER, .buf = &c->y},
                       {.kind = FE_ARG_REAL, .r = 2.0}};
    FE_CHECK(best_time(be, c->cached, (size_t)cg, (size_t)c->block, 7, cargs, c->prec, 3, 1, &t));
    const double rate = 3.0 * (double)nc * passes * w / t / 1e9;
    if (k == 2) cal->llc_gbytes = rate;
    else cal->llc_curve[k - 3] = rate;
    kept = kept && rate >= mid;
    if (kept) cal->llc_keep_bytes = llc * k / 8;
  }
  return 0;
}

/* FMA chains over `full` groups; on the cpu also the same loops compiled without
 * vectorization (the scalar rate). */
static int calibrate_fma(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
  FE_CHECK(time_fma(c, full, &t));
  cal->gflops = 2.0 * (double)full * B * c->chains * c->steps / t / 1e9;
  cal->scalar_gflops = cal->gflops;
  if (!be->info.is_gpu) { /* the same loops, compiled without vectorization */
    fe_arg sargs[3] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                       {.kind = FE_ARG_REAL, .r = 0.999999}};
    FE_CHECK(best_time(be, c->scalar, (size_t)full, B, 3, sargs, c->prec, 3, 1, &t));
    cal->scalar_gflops = 2.0 * (double)full * B * c->chains * c->steps / t / 1e9;
    /* SIMD code can always run as scalar code: a SIMD rate below the scalar one was measured
     * while something else held the cores (seen under a parallel test run) */
    if (cal->gflops < cal->scalar_gflops) cal->gflops = cal->scalar_gflops;
  }
  return 0;
}

/* The cpu backend: the same loops with as many lanes as a kernel's group has cells, 2 to 64, as
 * fractions of the rate above (each the same work: 64 / lanes times the groups). */
static int calibrate_lanes(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
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
  /* sumfact's contractions over its padded arrays: 8 lanes, 36 rows of 6 entries, the table's
   * 6 rows, 8 passes a group (fe_fma_padded, as Q5's) */
  cal->padded_gflops = 0;
  if (c->padded) {
    long long g = full * 2;
    fe_arg pargs[3] = {{.kind = FE_ARG_INT, .i = g}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                       {.kind = FE_ARG_REAL, .r = 0.999999}};
    FE_CHECK(best_time(be, c->padded, (size_t)g, B, 3, pargs, c->prec, 3, 1, &t));
    cal->padded_gflops = 2.0 * (double)g * 8 * 6 * 6 * 36 * 8 / t / 1e9;
  }
  return 0;
}

/* Shared-memory loads over `full` groups. */
static int calibrate_shared(calib_run *c, long long full)
{
  fe_calibration *cal = &c->be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  size_t B = (size_t)c->block;
  FE_CHECK(time_shared(c, full, &t));
  cal->shared_gbytes = 4.0 * (double)full * B * c->steps * w / t / 1e9;
  return 0;
}

/* Divisions: a quarter of the FMA steps. */
static int calibrate_divisions(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
  int dsteps = c->steps / 4;
  fe_arg dargs[4] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                     {.kind = FE_ARG_REAL, .r = 0.75}, {.kind = FE_ARG_INT, .i = dsteps}};
  FE_CHECK(best_time(be, c->divide, (size_t)full, B, 4, dargs, c->prec, 3, 1, &t));
  cal->nonfma_gops = (double)full * B * c->chains * dsteps / t / 1e9;
  return 0;
}

/* Atomics: scattered over 2^22 reals (a vector of a few million dofs). */
static int calibrate_atomics(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  int gpu = be->info.is_gpu, cu = c->ngpu;
  size_t B = (size_t)c->block;
  long long na = (long long)1 << 22, ag = gpu ? (long long)cu * 64 : (long long)cu * 4096;
  int asteps = 64;
  FE_CHECK(be->ops->fill(be->impl, &c->a, (size_t)na, c->prec, 0.0));
  fe_arg aargs[5] = {{.kind = FE_ARG_INT, .i = ag}, {.kind = FE_ARG_INT, .i = na},
                     {.kind = FE_ARG_BUFFER, .buf = &c->a}, {.kind = FE_ARG_REAL, .r = 1.0},
                     {.kind = FE_ARG_INT, .i = asteps}};
  FE_CHECK(best_time(be, c->atomics, (size_t)ag, B, 5, aargs, c->prec, 3, 1, &t));
  cal->atomic_gops = (double)ag * B * asteps / t / 1e9;
  return 0;
}

/* Constant tables: every warp reads 32 distinct words at each of 2 loads a step (on the
 * cpu: one item a group reading its own word). */
static int calibrate_constant_tables(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
  int dsteps = c->steps / 4;
  fe_arg kargs[3] = {{.kind = FE_ARG_INT, .i = full}, {.kind = FE_ARG_BUFFER, .buf = &c->out},
                     {.kind = FE_ARG_INT, .i = dsteps}};
  FE_CHECK(best_time(be, c->constant, (size_t)full, B, 3, kargs, c->prec, 3, 1, &t));
  cal->constant_gops = 2.0 * (double)full * B * dsteps / t / 1e9;
  return 0;
}

/* CPU devices: values gathered and scatter-added through a cell map, one at a time (the
 * cpu backend's plain adds, OpenCL's atomic ones; GPUs: their L2 and atomics ceilings).
 * Each value its node's first touch, from vectors beyond L1 (x and y 16 MiB in double);
 * then 8 passes over an eighth of the groups: the 7 after the first find their nodes in
 * L1 (a walk's neighbours' nodes); then first touches again over as many groups as make x
 * and y a quarter of the last-level cache (repeated runs: found there, as a call whose data
 * the cache keeps finds them; where no size is known, none: the rate beyond it serves). */
static int calibrate_indexed(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
  cal->indexed_gops = cal->indexed_l1_gops = 0;
  if (!be->info.is_gpu) {
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
    const double word = (double)fe_precision_size(c->prec);
    long long il = be->info.llc_bytes ? (long long)(be->info.llc_bytes / 4 / (2 * word * ix)) : 0;
    cal->indexed_llc_gops = cal->indexed_gops;
    if (il > 0 && il < ig) {
      double tl;
      xargs[0].i = il, xargs[1].i = 1;
      FE_CHECK(best_time(be, c->indexed, (size_t)il, B, 5, xargs, c->prec, 5, 1, &tl));
      cal->indexed_llc_gops = 2.0 * (double)il * ix / tl / 1e9;
    }
  }
  return 0;
}

/* The cpu: csr's rows, 2^25 entries (their values and indices, 400 MB in double, beyond a
 * last-level cache), 27 a row, x through them, each row's bounds from its offsets as csr's
 * product reads them. */
static int calibrate_rows(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  cal->rows_gbytes = 0;
  if (!c->rows) return 0;
  long long entries = (long long)1 << 25;
  while (entries * (long long)(w + sizeof(int)) > (long long)(be->info.global_mem / 4) &&
         entries > (1 << 20))
    entries /= 2;
  const long long nrows = entries / 27; /* fe_rows' ROW_ENTRIES */
  fe_buffer cols = {0}, vals = {0}, ptr = {0};
  int rc = be->ops->alloc(be->impl, (size_t)entries * sizeof(int), &cols);
  if (!rc) rc = be->ops->alloc(be->impl, (size_t)entries * w, &vals);
  if (!rc) rc = be->ops->alloc(be->impl, (size_t)(nrows + 1) * sizeof(int), &ptr);
  if (!rc) rc = be->ops->fill(be->impl, &vals, (size_t)entries, c->prec, 0.5);
  fe_arg iargs[3] = {{.kind = FE_ARG_INT, .i = nrows}, {.kind = FE_ARG_BUFFER, .buf = &ptr},
                     {.kind = FE_ARG_BUFFER, .buf = &cols}};
  fe_arg rargs[6] = {{.kind = FE_ARG_INT, .i = nrows}, {.kind = FE_ARG_BUFFER, .buf = &ptr},
                     {.kind = FE_ARG_BUFFER, .buf = &cols}, {.kind = FE_ARG_BUFFER, .buf = &vals},
                     {.kind = FE_ARG_BUFFER, .buf = &c->x}, {.kind = FE_ARG_BUFFER, .buf = &c->y}};
  if (!rc) rc = be->ops->launch(be->impl, c->rows_init, (size_t)nrows, 1, 3, iargs, c->prec, NULL);
  if (!rc) rc = best_time(be, c->rows, (size_t)nrows, 1, 6, rargs, c->prec, 5, 1, &t);
  if (!rc)
    cal->rows_gbytes = ((double)(nrows * 27) * (w + sizeof(int)) +
                        nrows * (sizeof(int) + 2.0 * w)) / t / 1e9;
  if (cols.ptr) be->ops->release(be->impl, &cols);
  if (vals.ptr) be->ops->release(be->impl, &vals);
  if (ptr.ptr) be->ops->release(be->impl, &ptr);
  FE_CHECK(rc);
  return 0;
}

/* The cpu: a cycle of llvm-mca's core, where the backend simulates hot loops: a chain of
 * dependent multiply-adds on every thread, its step's time over the step's cycles. */
static int calibrate_cycle(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  int cu = c->ngpu;
  size_t B = (size_t)c->block;
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
  return 0;
}

/* GPUs: the L1's lookups of global loads it holds (a table of 8192 reals, as the kernels'
 * tables and gathered nodes): every item of a warp reading one word (one line a request),
 * then words 81 apart (32 lines of distinct banks: a line each, no bank waits). */
static int calibrate_l1_lookups(calib_run *c, long long full)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double t;
  size_t B = (size_t)c->block;
  cal->l1_request_gops = cal->l1_line_gops = 0;
  if (be->info.is_gpu) {
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
  return 0;
}

/* GPUs: the waits of a group's path: device memory (a chase over words well beyond the
 * last-level cache), L2 (a chain that fits it, walked again), a phase (one group). */
static int calibrate_latencies(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  size_t B = (size_t)c->block;
  size_t cache = be->info.l2_bytes ? be->info.l2_bytes : (size_t)1 << 20;
  cal->dram_latency_us = cal->l2_latency_us = cal->phase_latency_us = 0;
  if (be->info.is_gpu) {
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
  return 0;
}

/* The host's copies of small buffers from and to the device (a split space's exchange reads
 * its packed entries and writes its neighbours' shares: a few bytes to a few hundred KiB),
 * 8 bytes to 256 KiB, each size the best of 20: a latency and a rate fitted to each way. */
static int calibrate_transfers(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  enum { SIZES = 6, REPS = 20 };
  const size_t most = (size_t)8 << (3 * (SIZES - 1));
  double bytes[SIZES], tr[SIZES], tw[SIZES];
  char *host = malloc(most);
  FE_ASSERT(host, FE_ERR_MEM, "out of memory for the transfers' calibration");
  memset(host, 0, most);
  int rc = 0;
  for (int k = 0; k < SIZES && !rc; k++) {
    const size_t n = (size_t)8 << (3 * k);
    bytes[k] = (double)n;
    tr[k] = tw[k] = INFINITY;
    for (int r = 0; r < REPS && !rc; r++) {
      double t0 = fe_clock();
      rc = be->ops->read(be->impl, &c->a, 0, n, host);
      double t1 = fe_clock();
      if (!rc) rc = be->ops->write(be->impl, &c->a, 0, n, host);
      if (!rc) rc = be->ops->finish(be->impl);
      double t2 = fe_clock();
      if (t1 - t0 < tr[k]) tr[k] = t1 - t0;
      if (t2 - t1 < tw[k]) tw[k] = t2 - t1;
    }
  }
  free(host);
  FE_CHECK(rc);
  fe_perf_fit_link(bytes, tr, SIZES, &cal->read_us, &cal->read_gbytes);
  fe_perf_fit_link(bytes, tw, SIZES, &cal->write_us, &cal->write_gbytes);
  return 0;
}

/* GPUs: each rate with 2, 4, ..., 64 warps resident per unit (one wave of groups of two
 * warps), as a fraction of the rate above. */
static int calibrate_curves(calib_run *c)
{
  fe_calibration *cal = &c->be->calib[c->prec];
  double w = (double)fe_precision_size(c->prec), t;
  int cu = c->ngpu;
  size_t B = (size_t)c->block;
  memset(cal->curve, 0, sizeof cal->curve[0] * FE_CURVE_LANES);
  if (c->be->info.is_gpu) {
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
  return 0;
}

/* Run every micro-benchmark; fill be->calib[prec]. */
static int calibrate_kernels(calib_run *c)
{
  fe_backend *be = c->be;
  fe_calibration *cal = &be->calib[c->prec];
  int gpu = be->info.is_gpu, cu = c->ngpu;
  FE_CHECK(calibrate_dram_and_launches(c));
  FE_CHECK(calibrate_cache(c));
  FE_CHECK(calibrate_llc_keep(c));
  /* FMA and shared loads: four full waves of groups (32 groups of two warps per unit); on
   * the cpu 256 groups a thread, milliseconds, so that starting the threads is not what is
   * measured */
  long long full = gpu ? (long long)cu * 32 * 4 : (long long)cu * 256;
  FE_CHECK(calibrate_fma(c, full));
  FE_CHECK(calibrate_lanes(c, full));
  FE_CHECK(calibrate_shared(c, full));
  FE_CHECK(calibrate_divisions(c, full));
  FE_CHECK(calibrate_atomics(c));
  FE_CHECK(calibrate_constant_tables(c, full));
  FE_CHECK(calibrate_indexed(c, full));
  FE_CHECK(calibrate_rows(c));
  FE_CHECK(calibrate_cycle(c));
  FE_CHECK(calibrate_l1_lookups(c, full));
  FE_CHECK(calibrate_latencies(c));
  FE_CHECK(calibrate_curves(c));
  FE_CHECK(calibrate_transfers(c));
  perf_calibration_info(be, c->prec, cal);
  cal->valid = 1;
  return 0;
}

/* Compile the calibration kernels, run them, fill be->calib[prec] and store it. */
int perf_run_calibration(fe_backend *be, fe_precision prec, fe_report *rep, int asked)
{
  calib_run c = {.be = be, .prec = prec};
  size_t w = fe_precision_size(prec);
  c.ngpu = be->info.compute_units > 0 ? be->info.compute_units : 1;
  c.steps = be->info.is_gpu ? 1024 : 4096;
  c.block = be->info.is_gpu ? 64 : 1;
  /* the cpu: the lanes of eight of the kernels' SIMD registers (four 64-byte ones where
   * unknown): eight chains of multiply-adds in flight for two FMA pipes of four cycles'
   * latency (on the Ice Lake VM four 512-bit chains measured 52-69 GF/s, eight 71-73) */
  const int vb = be->info.vector_bytes[prec];
  c.chains = be->info.is_gpu ? 8 : vb > 0 ? (int)(8 * (size_t)vb / w) : (int)(256 / w);
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
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_fma_padded", &c.padded);
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_rows_init", &c.rows_init);
  if (!rc && host) rc = be->ops->kernel(be->impl, c.mod, "fe_rows", &c.rows);
  size_t nout = (size_t)c.ngpu * 32 * 4 + 64;
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.a);
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.x);
  if (!rc) rc = be->ops->alloc(be->impl, c.n * w, &c.y);
  if (!rc) rc = be->ops->alloc(be->impl, nout * w, &c.out);
  if (!rc) rc = be->ops->fill(be->impl, &c.x, c.n, prec, 1.0);
  if (!rc) rc = be->ops->fill(be->impl, &c.y, c.n, prec, 2.0);
  host_load h0 = host_load_now();
  if (!rc) rc = calibrate_kernels(&c);
  double busy = others_share(h0, host_load_now());
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
  if (busy > CALIBRATION_BUSY) {
    char why[240];
    snprintf(why, sizeof why, "the %s calibration (%s) ran beside other processes, which took "
             "%.0f%% of the cores' time: its rates are used in this session%s", be->name,
             fe_precision_name(prec), 100 * busy, asked ? " and stored, as asked"
             : ", not stored (a later session measures again)");
    fprintf(stderr, "felab: %s\n", why);
    if (rep)
      snprintf(rep->why, sizeof rep->why, "beside other processes (%.0f%% of the cores' time)%s",
               100 * busy, asked ? ": stored, as asked" : ": not stored");
    if (!asked) return 0;
  }
  return perf_save_calibration(be);
}

int fe_perf_calibrate(fe_backend *be, fe_precision prec, fe_report *rep)
{
  /* one process of the machine at a time, each alone (mpirun's ranks ask together): a rank
   * that waited while another measured this device reads what that one stored */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const double asked = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec, t0 = fe_clock();
  const int lock = perf_calibration_lock();
  int rc = 0, read = perf_calibration_stored_since(be, asked);
  if (read) {
    be->calib[prec].valid = 0;
    rc = fe_perf_load_calibration(be);
    read = !rc && be->calib[prec].valid;
  }
  if (!rc && !read) rc = perf_run_calibration(be, prec, rep, 1);
  perf_calibration_unlock(lock);
  FE_CHECK(rc);
  if (read && rep) {
    fe_report_begin(rep, "calibrate", be, prec, "micro-benchmarks",
                    "read: another process of this machine measured it while this one waited");
    rep->seconds = fe_clock() - t0;
    rep->peak_gbytes = be->calib[prec].gbytes;
    rep->peak_gflops = be->calib[prec].gflops;
    snprintf(rep->bound, sizeof rep->bound, "all");
  }
  if (rep) fe_perf_log_add(rep);
  return 0;
}
