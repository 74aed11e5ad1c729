/* felab performance: the model's prediction of a call (fe_perf_model), from a kernel's
 * occupancy and the backend's calibration.
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
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/perf/perf-private.h"

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

/* The bytes through L2: a GPU's every load and store passes its L2 (memory's bytes are filled
 * into it and served from it), so the DRAM bytes share its rate with the loads that hit there
 * (the calibrated cached triad's rate counts all it serves). On the H200 csr's rows, their x
 * gathered from L2 beside the matrix streamed from memory, ran 0.77-0.88 of a prediction
 * with the two apart. The cpu's L2 term: the further loads alone. */
static double l2_bytes_of(const fe_calibration *c, double bytes, double l2_bytes)
{
  return l2_bytes + (c->gpu ? bytes : 0);
}

/* One group's phases one after another (GPUs), for the whole call: in each phase the pipes
 * run side by side in the group's warps, so a phase takes its largest pipe's share whole and
 * the others' one W-th (W warps a group); t[] the ceilings alone, data the shared ceiling's
 * data pipe without the L1's lookups (rep->l1_tag_seconds). A pipe whose work no phase
 * describes is a phase of its own; with no phases described, every pipe (sum: their times). */
static double serial_time(const fe_calibration *c, fe_report *rep, const double *t, double data,
                          double sum)
{
  const int tables_l1 = c->tables_l1;
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
    const double a[N] = {w->bytes, l2_bytes_of(c, w->bytes, w->l2_bytes),
                         w->shared_bytes + 128 * (w->l1_wavefronts + tw),
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

/* The rates as the model uses them and the shares of them the kernel reaches at its
 * occupancy: what the model's phases share. */
typedef struct model_rates {
  fe_calibration g;  /* the calibration, with the cpu's ceilings as the model takes them */
  double vec_gflops; /* the calibrated (vectorized, on the cpu) FMA rate */
  double vec;        /* the cpu: the flops of vectorized loops (0: none, GPUs) */
  double warps;      /* warps resident of 64 per unit (0: not known) */
  double e_dram, e_shared, e_fma; /* the curves at those warps */
  double dram_gbytes; /* the DRAM rate the bytes move at */
  double llc_share;   /* the cpu: the share of the bytes from beyond the last-level cache */
} model_rates;

/* The cpu: the share of a call's `bytes` from memory where the calibration swept the
 * last-level cache (llc_gbytes at a quarter of it, llc_curve at 3/8 .. 8/8): the cached
 * triad's rate R at the call's size, between the sizes measured, as the share that makes
 * bytes / R of memory's rate and the L2 triad's (the model's two rates for a call's bytes);
 * below a quarter of the cache that share shrinks with the size to none, past the whole cache
 * it grows to all within an eighth more. On the AMD EPYC VM the rate falls along a slope
 * (97 GB/s at 8 MB to 34-46 at 32, one thread), where a size kept or not had flipped a call
 * near the threshold: Q2's folded apply at 21.7 MB predicted 1.24 or 1.91 ms (measured
 * 1.25-1.27) as the calibration kept 24 MB or 20. */
static double llc_share_measured(const fe_calibration *c, double dram_gbytes, double bytes)
{
  const double eighth = c->llc_bytes / 8, l2 = c->l2_gbytes;
  double at = bytes / eighth; /* in eighths of the cache; measured at 2 .. 8 */
  const double x = fmin(8, fmax(2, at));
  const int k = (int)fmin(7, floor(x));
  const double lo = k == 2 ? c->llc_gbytes : c->llc_curve[k - 3], hi = c->llc_curve[k - 2];
  const double R = lo + (x - k) * (hi - lo);
  double share = dram_gbytes < l2 && R > 0
                     ? fmin(1, fmax(0, (1 / R - 1 / l2) / (1 / dram_gbytes - 1 / l2))) : 0;
  if (at < 2) share *= at / 2;
  if (at > 8) share += (1 - share) * fmin(1, at - 8);
  return share;
}

/* The rates of calibration c as the model takes them for the call in rep. */
static void model_rates_for(const fe_calibration *c, const fe_report *rep, model_rates *m)
{
  m->g = *c;
  m->vec_gflops = c->gflops; /* the calibrated (vectorized, on the cpu) FMA rate */
  if (!c->gpu) {
    /* the cpu: its groups' "shared" arrays live in L1 and its groups add color by color
     * without atomics, so neither is a ceiling of their own there */
    m->g.shared_gbytes = m->g.atomic_gops = m->g.constant_gops = 0;
    /* few of its loops are vectorized */
    if (m->g.scalar_gflops > 0) m->g.gflops = m->g.scalar_gflops;
  }
  /* the cpu: the loops that are vectorized at the vectorized rate, the rest at the scalar
   * one, one after the other (a thread runs a group's phases in turn) */
  m->vec = !c->gpu && c->scalar_gflops > 0 ? fmin(rep->vec_flops, rep->flops) : 0;
  c = &m->g;
  m->warps = rep->occupancy > 0 ? rep->occupancy * 64 : 0; /* of 64 warps per unit */
  m->e_dram = curve_at(c->curve[0], m->warps);
  m->e_shared = curve_at(c->curve[1], m->warps);
  m->e_fma = curve_at(c->curve[2], m->warps);
  /* the cpu: a sparse matrix's rows at the rate of such rows (their streams beside x's loads
   * through the indices, which keep fewer lines in flight than a triad), never above the
   * triad's: a rows rate measured above it is the calibration's noise (a loaded machine), and
   * it put the DRAM ceiling under the bytes at the triad's rate */
  m->dram_gbytes = !c->gpu && rep->rows > 0 && c->rows_gbytes > 0
                       ? fmin(c->rows_gbytes, c->gbytes) : c->gbytes;
  /* the cpu: a call whose bytes fit its last-level cache finds them there again, as the call
   * before left them (a solver's repeated products, a benchmark's best of ten); one that
   * does not fetches them all from memory (a stream through an LRU cache larger than it
   * keeps nothing). What a process keeps is calibrated (llc_keep_bytes: the largest of the
   * cached triad's sizes, an eighth of the cache apart, at which it still runs from the
   * cache): all found there up to it, all from memory from the next size on, the share
   * growing linearly between. Not measured: half the cache kept, the share growing linearly
   * up to the whole (on this 2-core virtual machine a triad over growing arrays falls from
   * 73-169 GB/s to under 20 between 11 and 23 MB of the 32 MB L3 it reports, which cores
   * outside it share: docs/model.md) */
  m->llc_share = 1;
  /* the cpu: a sparse matrix's rows at their calibrated rate wherever they come from (their
   * loop, not the memory, binds: on an Intel Xeon the same rows from a quarter of the
   * last-level cache ran 19-24 GB/s against 17-18 from memory, and csr on a Gmsh torso whose
   * matrix the cache held measured 0.43 of a prediction at the cached triad's rate) */
  if (!c->gpu && c->llc_bytes > 0 && c->l2_gbytes > 0 && !(rep->rows > 0 && c->rows_gbytes > 0)) {
    if (c->llc_gbytes > 0 && c->llc_curve[FE_CURVE_POINTS - 1] > 0) {
      m->llc_share = llc_share_measured(c, m->dram_gbytes, rep->bytes);
    } else {
      double keep = c->llc_keep_bytes > 0 ? c->llc_keep_bytes : c->llc_bytes / 2;
      double over = c->llc_keep_bytes > 0 ? c->llc_bytes / 8 : c->llc_bytes / 2;
      m->llc_share = fmin(1, fmax(0, (rep->bytes - keep) / over));
    }
  }
}

/* The cpu: bytes at the rate of where they come from, memory or the last-level cache (at the
 * L2 triad's rate, the cache's calibrated one); a GPU: memory. */
static double model_stream_seconds(const model_rates *m, double bytes)
{
  if (m->llc_share >= 1) return bytes / (m->dram_gbytes * 1e9 * m->e_dram);
  return bytes * m->llc_share / (m->dram_gbytes * 1e9 * m->e_dram) +
         bytes * (1 - m->llc_share) / (m->g.l2_gbytes * 1e9);
}

/* The DRAM and L2 ceilings alone. */
static void model_memory_ceilings(const model_rates *m, fe_report *rep)
{
  const fe_calibration *c = &m->g;
  double *t = rep->ceiling_seconds;
  t[FE_CEIL_DRAM] = model_stream_seconds(m, rep->bytes);
  t[FE_CEIL_L2] = c->l2_gbytes > 0 ? l2_bytes_of(c, rep->bytes, rep->l2_bytes) /
                                         (c->l2_gbytes * 1e9 * m->e_dram) : 0;
}

/* The shared ceiling alone: the L1's data pipe or its lookups, the longer; returns the data
 * pipe's time alone. */
static double model_l1_ceiling(const model_rates *m, fe_report *rep)
{
  const fe_calibration *c = &m->g;
  double *t = rep->ceiling_seconds;
  /* shared memory's wavefronts and those of the global loads through L1 take one data pipe;
   * beside it the L1 looks up the lines of each global load (GPUs: its requests and their
   * lines two stages side by side, all the requests at the calibrated requests' rate, all the
   * lines at the lines' rate, the longer of the two), and the longer of the two binds */
  double l1 = rep->l1_wavefronts + (c->tables_l1 ? rep->table_wavefronts : 0);
  t[FE_CEIL_SHARED] = c->shared_gbytes > 0
                          ? (rep->shared_bytes + 128 * l1) / (c->shared_gbytes * 1e9 * m->e_shared)
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
     * a shared load's wavefront (Little's law, as measured with requests of many lines and of
     * one: docs/model.md): the shared curve at the warps times that ratio */
    double per = rep->l1_tag_seconds / rep->l1_requests / (128 / (c->shared_gbytes * 1e9));
    rep->l1_tag_seconds /= m->warps > 0 ? curve_at(c->curve[1], m->warps * fmax(per, 1)) : 1;
  }
  double data_pipe = t[FE_CEIL_SHARED]; /* the data pipe alone, beside the lookups */
  if (rep->l1_tag_seconds > t[FE_CEIL_SHARED]) t[FE_CEIL_SHARED] = rep->l1_tag_seconds;
  return data_pipe;
}

/* The cpu: one SIMD register of the kernels holds a group's lanes (double's 8 cells in a
 * 512-bit register, single's in a 256-bit one), so a contraction's multiply-add is one
 * instruction and its operand one load of a whole line. There neither the padded layout's
 * arithmetic nor the column walks' second load bind (sumfact's padded_flops: each measured
 * at the FMA loop's rate, perf's samples a phase, Q5 and Q7 on the Ice Lake VM), and arrays
 * within L1 (Q5's 28 KB in double) ran at their multiply-adds' time: the terms below are
 * for lanes split over registers (double in 256-bit ones: Q5's walks at 28 GF/s, its
 * interpolations at 49, the FMA loop at 52). */
static int lanes_whole(const fe_calibration *c, const fe_report *rep)
{
  return !c->gpu && c->vector_lanes > 0 && rep->lanes > 0 && c->vector_lanes >= rep->lanes;
}

/* The cpu: a group's arrays outgrow the share of a core's L1 they keep: half where the lanes
 * span registers, two thirds where one holds them (the evidence: the operand term in
 * model_compute_ceilings). */
static int arrays_beyond_l1(const fe_calibration *c, const fe_report *rep)
{
  const double at = c->l1_bytes * (lanes_whole(c, rep) ? 2.0 / 3 : 0.5);
  return !c->gpu && c->l1_bytes > 0 && rep->array_bytes > 0 && rep->array_bytes >= at;
}

/* The FMA and non-FMA ceilings alone (the cpu: its SIMD lanes, its factors into them and its
 * hot loop as llvm-mca simulates it). */
static void model_compute_ceilings(const model_rates *m, int compute_units, fe_report *rep)
{
  const fe_calibration *c = &m->g;
  const double vec_gflops = m->vec_gflops, vec = m->vec;
  double *t = rep->ceiling_seconds;
  /* the cpu: the SIMD rate with the kernel's lanes (a group's cells), as calibrated; where
   * one register holds them the curve's rows are one chain each, a latency the quadrature
   * phase's many short products do not wait on (Q3's at about the FMA loop's rate in perf's
   * samples): the vectorized rate whole */
  double e_lanes = !c->gpu && rep->lanes > 0 && !lanes_whole(c, rep)
                       ? curve_at(c->curve[FE_CURVE_LANES], rep->lanes) : 1;
  /* the cpu: loops with several outputs in flight at the vectorized rate whole; those whose
   * operands' addresses go through a padded layout's arithmetic (sumfact's arrays in double)
   * at the calibrated rate of such a loop where lower: the index arithmetic's integer
   * instructions share the issue width (and on Intel cores the FMA ports) with the
   * multiply-adds. On an Intel Xeon (Ice Lake) that loop ran 0.45-0.55 of the unpadded
   * one's rate (llvm-mca: 13.4 cycles for a Q5 contraction row's 12 multiply-adds, 6 at the
   * FMA ports' rate); a core whose integer units stand apart from its FP pipes measures it
   * near the vectorized rate, and the term then changes nothing */
  double inflight = vec > 0 ? fmin(rep->inflight_flops, vec) : 0;
  double padded = lanes_whole(c, rep) ? 0 : fmin(rep->padded_flops, inflight);
  double padded_gflops = c->padded_gflops > 0 ? fmin(c->padded_gflops, vec_gflops) : vec_gflops;
  t[FE_CEIL_FMA] = (rep->flops - vec) / (c->gflops * 1e9 * m->e_fma) +
                   (vec > 0 ? (vec - inflight) / (vec_gflops * 1e9 * e_lanes) +
                                  (inflight - padded) / (vec_gflops * 1e9) +
                                  (padded > 0 ? padded / (padded_gflops * 1e9) : 0) : 0);
  if (!c->gpu && vec_gflops > 0) /* the cpu: a group's factors into its lanes, beside the flops */
    t[FE_CEIL_FMA] += 2 * rep->factor_lanes / (vec_gflops * 1e9 * e_lanes) +
                      2 * rep->factor_gathers / (c->gflops * 1e9);
  t[FE_CEIL_NONFMA] = c->nonfma_gops > 0 ? rep->nonfma / (c->nonfma_gops * 1e9 * m->e_fma) : 0;
  /* the cpu: the hot loop as llvm-mca simulates it (patch's points), every iteration at its
   * cycles, the threads side by side. Where longer than its multiply-adds and divisions at the
   * calibrated rates (the core's scheduler full of work waiting on one chain), it binds the
   * FMA pipe */
  /* the cpu: loops whose arrays outgrow a share of a core's L1 (the rest its tables, the
   * point's data, the stack, and the lines a set's ways lose to each other) read their
   * operands from L2, a word a multiply-add, at the calibrated L2 rate beside their
   * multiply-adds: the longer binds. The share: half where a line of the lanes takes two
   * registers (Q7's two arrays in single, 33 KB of an Ice Lake core's 48, ran 1.6x the time
   * their multiply-adds alone predict; Q5's in double, 28 KB, the time predicted), two
   * thirds where one holds it (double's 512-bit loads: Q5's 28 KB ran at its multiply-adds'
   * time, single's Q7 as before) */
  rep->operand_seconds = 0;
  if (arrays_beyond_l1(c, rep) && c->l2_gbytes > 0) {
    rep->operand_seconds = rep->operand_bytes / (c->l2_gbytes * 1e9);
    if (rep->operand_seconds > t[FE_CEIL_FMA]) t[FE_CEIL_FMA] = rep->operand_seconds;
  }
  rep->loop_seconds = 0;
  rep->loop_binds = 0;
  if (!c->gpu && c->cycle_ns > 0 && rep->loop_cycles > 0 && compute_units > 0) {
    rep->loop_seconds = rep->loop_trips * rep->loop_cycles * c->cycle_ns * 1e-9 / compute_units;
    rep->loop_binds = rep->loop_seconds > t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA];
    if (rep->loop_binds) t[FE_CEIL_FMA] = rep->loop_seconds - t[FE_CEIL_NONFMA];
  }
}

/* The atomics, constant-table and indexed-loop ceilings alone. */
static void model_access_ceilings(const model_rates *m, fe_report *rep)
{
  const fe_calibration *c = &m->g;
  double *t = rep->ceiling_seconds;
  t[FE_CEIL_ATOMIC] = c->atomic_gops > 0 ? rep->atomics / (c->atomic_gops * 1e9) : 0;
  t[FE_CEIL_CONSTANT] = c->constant_gops > 0 && !(c->tables_l1 && rep->table_wavefronts > 0)
                            ? rep->constant / (c->constant_gops * 1e9 * m->e_shared)
                            : 0;
  /* the cpu's indexed loops: each node's first touch from beyond L1 (from the last-level
   * cache where the call's data fit it, else from memory), the rest from L1. Where the
   * group's arrays outgrow L1, the other side of each (the gather's store into them, the
   * scatter's load) misses it too: every value at the rate of first touches from memory
   * (perf's samples a phase: Q7's gather and scatter, 64 KB arrays in double, ran 1.0-1.1 G
   * values/s on two threads, the calibration's from memory 1.3-1.8 and from the last-level
   * cache about 3; Q3's and Q5's, 8 and 28 KB, 1.2-1.4 as modelled) */
  const int beyond = arrays_beyond_l1(c, rep);
  double first = c->indexed_l1_gops > 0 && !beyond ? fmin(rep->indexed_first, rep->indexed)
                                                   : rep->indexed;
  double again = rep->indexed - first;
  double first_gops = m->llc_share < 1 && c->indexed_llc_gops > 0 && !beyond
                          ? c->indexed_llc_gops : c->indexed_gops;
  t[FE_CEIL_INDEXED] = c->indexed_gops > 0 ? first / (first_gops * 1e9) +
                                                 (again > 0 ? again / (c->indexed_l1_gops * 1e9) : 0)
                                           : 0;
}

/* The last wave: groups beyond whole waves leave units idle. The share of the last wave that
 * keeps the units busy (1: not known), and the waves (0: not known) in *waves. */
static double model_last_wave_fill(const fe_report *rep, int compute_units, double *waves)
{
  double fill = 1;
  *waves = 0;
  if (rep->groups > 0 && compute_units > 0) {
    *waves = rep->groups / ((double)compute_units * (rep->resident > 0 ? rep->resident : 1));
    fill = *waves / ceil(*waves);
  }
  return fill;
}

/* The pipes side by side: each ceiling stretched by the fill, one group's serial time, and the
 * time of the pipes with the groups resident overlapping (the cpu: the issue of its loops where
 * longer); the pipe that binds in *pipe. */
static double model_overlap(const model_rates *m, fe_report *rep, double fill, double data_pipe,
                            int *pipe)
{
  const fe_calibration *c = &m->g;
  double *t = rep->ceiling_seconds;
  /* the pipes a group waits for (all but the atomic adds) overlap by the groups resident at
   * once: the largest whole, the rest of one group's serial time one G-th of it; the atomic
   * adds are sent and not waited for, served in L2 beside everything else */
  *pipe = FE_CEIL_DRAM;
  double sum = 0;
  for (int i = 0; i < FE_CEIL_LAUNCH; i++) {
    t[i] /= fill;
    if (i == FE_CEIL_ATOMIC) continue;
    sum += t[i];
    if (t[i] > t[*pipe]) *pipe = i;
  }
  rep->serial_seconds = fmax(serial_time(c, rep, t, data_pipe, sum), t[*pipe]);
  double on = t[*pipe] + (rep->resident > 0 ? (rep->serial_seconds - t[*pipe]) / rep->resident : 0);
  if (!c->gpu) {
    /* the cpu: a thread runs a group's phases one after another, each bound by issuing its
     * instructions, so the multiply-adds, the divisions and the indexed loops add up;
     * memory streams beside them (its prefetchers run ahead of the loops), but for the bytes
     * a phase of their own reads: from memory; or, asked for ahead into L2, brought there
     * from beyond it at the last-level cache's rate, which the thread waits for; the share the
     * cache does not keep (the call's bytes beyond what it keeps: llc_share) comes from memory,
     * no faster than memory gives it. On an Intel Xeon (2 threads) the requests alone, the
     * quadrature phase's reads kept in L1, took 60 GB/s of words, the cached triad over a
     * quarter of the cache 49-64; from L2, the rate the model had, 140-155 (docs/model.md). On
     * the 2-core AMD EPYC (its cache's rate 92 GB/s on one thread, memory's 27) Q7's folded
     * apply on distorted boxes of 10^3 and 11^3 cells, 33 and 44 MB a call, all beyond what
     * its cache keeps, ran 0.71-0.79 (GLL) and 0.85-0.93 (Gauss) of a prediction with them at
     * the cache's rate, 0.83-0.95 and 0.99-1.07 with them at memory's */
    const double ahead_gbytes = c->llc_gbytes > 0 ? c->llc_gbytes : c->l2_gbytes;
    const double from_memory = fmin(m->dram_gbytes * m->e_dram, ahead_gbytes);
    const double beyond = c->llc_bytes > 0 ? m->llc_share : 0; /* the cache not known: kept */
    double issue = t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA] + t[FE_CEIL_INDEXED] +
                   model_stream_seconds(m, rep->phase_bytes) +
                   (ahead_gbytes > 0 ? rep->phase_l2_bytes * (1 - beyond) / (ahead_gbytes * 1e9) +
                                       rep->phase_l2_bytes * beyond / (from_memory * 1e9)
                                     : 0);
    if (issue > on) {
      on = issue;
      *pipe = FE_CEIL_FMA;
      if (t[FE_CEIL_NONFMA] > t[*pipe]) *pipe = FE_CEIL_NONFMA;
      if (t[FE_CEIL_INDEXED] > t[*pipe]) *pipe = FE_CEIL_INDEXED;
    }
  }
  return on;
}

/* The waits (GPUs): each group's path, its dependent loads and its phases. The G groups of a
 * wave run the same code from the same start, so they wait at the same time and nothing
 * else runs then: each wave pays the path on top of its pipes' time. */
static void model_waits(const fe_calibration *c, double waves, fe_report *rep)
{
  double *t = rep->ceiling_seconds;
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
}

/* The prediction: the pipes' time with the waits (or the atomics, where longer) and the
 * launches, the efficiency of the pipe that binds, and the ceiling that binds. */
static void model_predict_bound(const model_rates *m, double fill, double on, int pipe,
                                fe_report *rep)
{
  const fe_calibration *c = &m->g;
  double *t = rep->ceiling_seconds;
  double body = on + t[FE_CEIL_LATENCY];
  int bind = t[FE_CEIL_LATENCY] > t[pipe] ? FE_CEIL_LATENCY : pipe;
  if (t[FE_CEIL_ATOMIC] > body) {
    body = t[FE_CEIL_ATOMIC];
    bind = pipe = FE_CEIL_ATOMIC;
  }
  rep->efficiency = fill * (pipe == FE_CEIL_DRAM || pipe == FE_CEIL_L2            ? m->e_dram
                            : pipe == FE_CEIL_SHARED || pipe == FE_CEIL_CONSTANT ? m->e_shared
                            : pipe == FE_CEIL_ATOMIC                             ? 1
                                                                                 : m->e_fma);
  rep->peak_gbytes = c->gbytes;
  rep->peak_gflops = m->vec_gflops; /* the roof: the calibrated rate (on the cpu the SIMD one) */
  rep->predicted_seconds = body + t[FE_CEIL_LAUNCH];
  if (t[FE_CEIL_LAUNCH] > t[bind]) bind = FE_CEIL_LAUNCH;
  snprintf(rep->bound, sizeof rep->bound, "%s", fe_ceiling_name(bind));
}

/* One call's prediction (an action, a vector operation, a setup's kernels). */
static void model_call(const fe_calibration *c, int compute_units, fe_report *rep)
{
  model_rates m;
  model_rates_for(c, rep, &m);
  rep->llc_share = m.llc_share;
  c = &m.g;
  double *t = rep->ceiling_seconds;
  model_memory_ceilings(&m, rep);
  double data_pipe = model_l1_ceiling(&m, rep);
  model_compute_ceilings(&m, compute_units, rep);
  model_access_ceilings(&m, rep);
  double waves, fill = model_last_wave_fill(rep, compute_units, &waves);
  rep->l1_tag_seconds /= fill;
  data_pipe /= fill;
  int pipe;
  double on = model_overlap(&m, rep, fill, data_pipe, &pipe);
  /* as calibrated: the first launch and the host's wait for it (sync), each further one
   * queued behind it (launch) */
  t[FE_CEIL_LAUNCH] = rep->launches > 0 ? (c->sync_us + (rep->launches - 1) * c->launch_us) * 1e-6 : 0;
  model_waits(c, waves, rep);
  model_predict_bound(&m, fill, on, pipe, rep);
}

/* A solve's prediction: its calls of the operator, each one call's model (waves, waits and
 * caches as that call meets them), and the steps' vector work, its own kernels at their
 * bytes and flops; the times added, the launches queued one after another behind a single
 * wait. The ceilings are the parts' summed; the bound the larger part's. */
static void model_calls(const fe_calibration *c, int compute_units, fe_report *rep)
{
  const double calls = rep->calls;
  fe_report one = *rep, v;
  one.calls = 0;
  one.flops = (rep->flops - rep->extra_flops) / calls;
  one.bytes = (rep->bytes - rep->extra_bytes) / calls;
  one.launches = (int)lround((rep->launches - rep->extra_launches) / calls);
  model_call(c, compute_units, &one);
  memset(&v, 0, sizeof v);
  v.flops = rep->extra_flops;
  v.bytes = rep->extra_bytes;
  v.launches = rep->extra_launches;
  model_call(c, compute_units, &v);
  *rep = one;
  rep->calls = calls;
  rep->flops = one.flops * calls + v.flops;
  rep->bytes = one.bytes * calls + v.bytes;
  rep->launches = rep->extra_launches + (int)lround(one.launches * calls);
  const double *ta = one.ceiling_seconds, *tv = v.ceiling_seconds;
  double body = calls * (one.predicted_seconds - ta[FE_CEIL_LAUNCH]) +
                (v.predicted_seconds - tv[FE_CEIL_LAUNCH]);
  for (int i = 0; i < FE_NCEILINGS; i++) rep->ceiling_seconds[i] = calls * ta[i] + tv[i];
  rep->ceiling_seconds[FE_CEIL_LAUNCH] =
      rep->launches > 0 ? (c->sync_us + (rep->launches - 1) * c->launch_us) * 1e-6 : 0;
  rep->predicted_seconds = body + rep->ceiling_seconds[FE_CEIL_LAUNCH];
  rep->serial_seconds *= calls;
  rep->loop_seconds *= calls;
  rep->operand_seconds *= calls;
  rep->l1_tag_seconds *= calls;
  rep->stagger_seconds *= calls;
  for (int p = 0; p < rep->nphase_work && p < FE_PHASES_MAX; p++) rep->phase_seconds[p] *= calls;
  if (v.predicted_seconds > calls * one.predicted_seconds)
    snprintf(rep->bound, sizeof rep->bound, "%s", v.bound);
}

void fe_perf_model(const fe_calibration *c, int compute_units, fe_report *rep)
{
  if (rep->calls > 0) model_calls(c, compute_units, rep);
  else model_call(c, compute_units, rep);
}

int fe_perf_predict(fe_backend *be, fe_precision prec, fe_report *rep)
{
  if (!be->calib[prec].valid) FE_CHECK(fe_perf_load_calibration(be));
  if (!be->calib[prec].valid) { /* measured here, one process of the machine at a time */
    const int lock = perf_calibration_lock();
    int rc = fe_perf_load_calibration(be); /* another's, stored while this one waited */
    if (!rc && !be->calib[prec].valid) rc = perf_run_calibration(be, prec, NULL, 0);
    perf_calibration_unlock(lock);
    FE_CHECK(rc);
  }
  fe_perf_model(&be->calib[prec], be->info.compute_units, rep);
  return 0;
}

void fe_perf_fit_link(const double *bytes, const double *seconds, int n, double *us,
                      double *gbytes)
{
  /* least squares of (a + b n_i - t_i) / t_i: weights 1 / t_i^2, two normal equations */
  double s0 = 0, s1 = 0, s2 = 0, t0 = 0, t1 = 0;
  for (int i = 0; i < n; i++) {
    if (!(seconds[i] > 0) || !isfinite(seconds[i])) continue;
    const double w = 1 / (seconds[i] * seconds[i]);
    s0 += w, s1 += w * bytes[i], s2 += w * bytes[i] * bytes[i];
    t0 += w * seconds[i], t1 += w * bytes[i] * seconds[i];
  }
  double det = s0 * s2 - s1 * s1, a = 0, b = 0;
  if (det > 0) {
    a = (t0 * s2 - t1 * s1) / det;
    b = (s0 * t1 - s1 * t0) / det;
  }
  if (a < 0 && s2 > 0) a = 0, b = t1 / s2;    /* the rate alone */
  if (!(b > 0) && s0 > 0) b = 0, a = t0 / s0; /* the latency alone */
  *us = a > 0 ? a * 1e6 : 0;
  *gbytes = b > 0 ? 1 / b / 1e9 : 0;
}

/* Seconds of `bytes` at `gbytes` GB/s (0: not limiting). */
static double at_rate(double bytes, double gbytes)
{
  return gbytes > 0 ? bytes / (gbytes * 1e9) : 0;
}

double fe_link_message_seconds(const fe_link *l, double bytes)
{
  const int n = l->npoints;
  if (n < 2) return l->latency_us * 1e-6 + at_rate(bytes, l->gbytes);
  int k = 1; /* the segment [k - 1, k] that holds bytes (the first or last beyond them) */
  while (k < n - 1 && l->point_bytes[k] < bytes) k++;
  const double b0 = l->point_bytes[k - 1], b1 = l->point_bytes[k];
  const double t0 = l->point_us[k - 1], t1 = l->point_us[k];
  double t = bytes <= b0 ? t0 : t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
  if (bytes > b1) t = t1 + (l->gbytes > 0 ? (bytes - b1) / (l->gbytes * 1e3) : 0); /* us */
  return t * 1e-6;
}

/* Seconds of an exchange kernel's indexed work: `values` read or written through an index
 * list, one at a time (the cpu: at its indexed loops' rate, the vector's entries found in the
 * last-level cache where the integration just left them), else its `bytes` at the cached
 * (or DRAM) rate. */
static double indexed_seconds(const fe_calibration *c, double values, double bytes)
{
  const double gops = c->indexed_llc_gops > 0 ? c->indexed_llc_gops : c->indexed_gops;
  if (!c->gpu && gops > 0) return values / (gops * 1e9);
  return at_rate(bytes, c->l2_gbytes > 0 ? c->l2_gbytes : c->gbytes);
}

/* Seconds of the host exchange of `entries` entries off the link's points us[] (host_*). */
static double host_seconds(const fe_link *l, double entries, const double *us)
{
  const double *n = l->host_entries;
  int k = 1;
  while (k < l->nhost - 1 && n[k] < entries) k++;
  double t;
  if (entries <= n[0]) t = fmax(us[0] * entries / n[0], us[0] / 4); /* a quarter at least */
  else if (entries >= n[l->nhost - 1]) t = us[l->nhost - 1] * entries / n[l->nhost - 1];
  else t = us[k - 1] + (us[k] - us[k - 1]) * (entries - n[k - 1]) / (n[k] - n[k - 1]);
  return t * 1e-6;
}

void fe_perf_exchange(const fe_calibration *c, const fe_link *l, const fe_exchange_work *x,
                      fe_exchange_terms *t)
{
  memset(t, 0, sizeof *t);
  if (!(x->messages > 0)) return;
  /* the gather: a launch the read (or, direct, the host's wait) waits for; an index and a
   * value read, a value written */
  t->gather = c->sync_us * 1e-6 + indexed_seconds(c, x->entries, x->entries * (4 + 2 * x->word));
  if (x->direct) { /* one value a message; the blocks copied device to device */
    if (l && l->valid) t->link = x->messages * fe_link_message_seconds(l, sizeof(double));
    t->write = x->messages * c->launch_us * 1e-6 + at_rate(2 * x->entries * x->word, c->gbytes);
  } else {
    t->read = c->read_us * 1e-6 + at_rate(x->entries * x->word, c->read_gbytes);
    if (l && l->valid) t->link = x->messages * fe_link_message_seconds(l, x->bytes / x->messages);
    t->write = c->write_us * 1e-6 + at_rate(x->entries * x->word, c->write_gbytes);
  }
  /* the sums: a launch queued; each entry's place and its sources' range read, its sum
   * written; each source's slot and value read */
  t->sum = c->launch_us * 1e-6 +
           indexed_seconds(c, x->shared + x->sources,
                           x->shared * (3 * 4 + 2 * x->word) + x->sources * (4 + x->word));
  t->total = t->gather + t->read + t->link + t->write + t->sum;
  /* the cpu through the host, where the link measured its whole exchange: that, at these
   * entries (linear between two sizes, proportional beyond), between warm and cold by the
   * share the action took out of the cache, its lines and pages past contiguous entries' at
   * the link's cost of a line and of a page, a message more for each further neighbour, the
   * two kernels' launches; the terms in their proportions (each term alone is a warm rate:
   * after an action that streams through the caches each took 2-8 times its term,
   * docs/benchmarks.md section 8) */
  if (!c->gpu && !x->direct && l && l->valid && l->nhost >= 2 && t->total > 0) {
    const double w = host_seconds(l, x->entries, l->host_warm_us),
                 k = host_seconds(l, x->entries, l->host_cold_us);
    const double f = fmin(1.0, fmax(0.0, x->cold));
    double whole = (1 - f) * w + f * k + (c->sync_us + c->launch_us) * 1e-6;
    /* the lines and pages past those of contiguous entries (a mesh's interface numbered
     * apart): the gather's and the sums' lists, entries of x->word bytes, a line 64 bytes and a
     * page 4096 */
    const double word = x->word > 0 ? x->word : 8;
    const double lines = x->lines > 0 ? fmax(0.0, x->lines - x->entries * word / 32) : 0,
                 pages = x->pages > 0 ? fmax(0.0, x->pages - x->entries * word / 2048) : 0;
    whole += lines * ((1 - f) * l->line_warm_ns + f * l->line_cold_ns) * 1e-9 +
             pages * ((1 - f) * l->page_warm_ns + f * l->page_cold_ns) * 1e-9;
    if (x->messages > 1)
      whole += (x->messages - 1) * fe_link_message_seconds(l, x->bytes / x->messages);
    const double s = whole / t->total;
    t->gather *= s, t->read *= s, t->link *= s, t->write *= s, t->sum *= s;
    t->total = whole;
  }
}

double fe_perf_exchange_cold(double touched, double keep)
{
  /* a line the exchange left survives `touched` bytes through a cache that keeps `keep`
   * with the odds of a random replacement's, exp(-touched / keep) */
  return keep > 0 && touched > 0 ? 1 - exp(-touched / keep) : 0;
}

double fe_perf_exchange_keep(const fe_calibration *c, const fe_link *l)
{
  /* the calibration's where it found the cache keeping its first size, a quarter of the
   * cache (the AMD EPYC VM's 24 MB, on which the form was chosen), else the link's (an
   * Intel Xeon VM that reports 480 MiB, fitted 11-47 MB; the GPU machine's Xeon, 300 MiB,
   * 33-70 MB), else half the cache */
  if (c->llc_keep_bytes > 0) return c->llc_keep_bytes;
  if (l && l->valid && l->keep_bytes > 0) return l->keep_bytes;
  return c->llc_bytes / 2;
}

double fe_perf_reduction(const fe_calibration *c, const fe_link *l, double entries, double word,
                         int ranks)
{
  /* the device's sums: up to 64 groups of 1024 entries or more, two sums a group read */
  const double groups = fmin(64.0, ceil(entries / 1024.0));
  double s = entries > 0 ? c->sync_us * 1e-6 + indexed_seconds(c, entries, entries * (4 + 2 * word)) +
                               c->read_us * 1e-6 + at_rate(2 * groups * word, c->read_gbytes)
                         : 0;
  if (l && l->valid && ranks > 1) {
    const double depth = ceil(log2((double)ranks)), at = ceil(log2(l->ranks > 1 ? l->ranks : 2));
    s += l->allreduce_us * 1e-6 * depth / at;
  }
  return s;
}

double fe_perf_reduction_node(const fe_calibration *c, double entries, double word)
{
  return c->launch_us * 1e-6 +
         (entries > 0 ? c->launch_us * 1e-6 + indexed_seconds(c, entries, entries * (4 + 2 * word)) : 0);
}
