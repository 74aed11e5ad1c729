/* The performance model on the host, no backend opened: the shared-memory bank model
 * (fe_bank_wavefronts on patterns counted by hand, fe_bank_random_wavefronts against a
 * Monte Carlo reference), fe_perf_model with a hand-made calibration (each ceiling's time
 * is its work over its rate, exactly; the bound is the largest; the launch term is added;
 * the GPU curves divide the times at the curve point of the occupancy; the last wave's fill
 * stretches them; the cpu has no shared or atomics ceiling) and fe_ceiling_name. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/perf/perf.h"
#include "engine/operator/strategies/sumfact-count.h"

TestSuite(perf);

/* a and b agree to 1e-12 relative (two zeros agree) */
#define assert_close(a, b)                                                                       \
  do {                                                                                           \
    double a_ = (a), b_ = (b);                                                                   \
    cr_assert(fabs(a_ - b_) <= 1e-12 * fmax(fabs(a_), fabs(b_)), "%s = %.17g, expected %.17g", #a, \
              a_, b_);                                                                           \
  } while (0)

/* ---- bank model ---------------------------------------------------------------------- */

/* idx[t] = base + stride * t for the 32 items of a warp */
static int strided(long long base, long long stride, int size)
{
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = base + stride * t;
  return fe_bank_wavefronts(idx, 32, size);
}

Test(perf, bank_consecutive)
{
  cr_assert_eq(strided(0, 1, 4), 1, "32 consecutive floats: one wavefront");
  cr_assert_eq(strided(7, 1, 4), 1, "32 consecutive floats from an unaligned start: one");
  cr_assert_eq(strided(0, 1, 8), 2, "32 consecutive doubles (64 words): two wavefronts");
  cr_assert_eq(strided(0, 1, 16), 4, "32 consecutive 16-byte items (128 words): four");
}

Test(perf, bank_broadcast)
{
  cr_assert_eq(strided(5, 0, 4), 1, "every item reads one float: one wavefront");
  cr_assert_eq(strided(5, 0, 8), 1, "every item reads one double: one wavefront");
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = t % 16; /* pairs of items share a word */
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 4), 1);
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 8), 1, "16 distinct doubles are 32 words: one");
  long long two[2] = {0, 32}; /* two words of bank 0 */
  cr_assert_eq(fe_bank_wavefronts(two, 2, 4), 2);
}

Test(perf, bank_strides)
{
  /* floats: stride s words lands 32/gcd(32, s) distinct banks, gcd(32, s) items a bank */
  cr_assert_eq(strided(0, 32, 4), 32, "stride 32 floats: every item in bank 0");
  cr_assert_eq(strided(3, 32, 4), 32, "stride 32 floats from word 3: every item in bank 3");
  cr_assert_eq(strided(0, 2, 4), 2, "stride 2 floats: 16 banks, 2 items each");
  cr_assert_eq(strided(0, 33, 4), 1, "stride 33 floats: every bank once");
  cr_assert_eq(strided(0, 16, 4), 16, "stride 16 floats: banks 0 and 16, 16 items each");
  /* doubles: item t covers words 2 idx, 2 idx + 1. Stride 2: words 4t, 4t + 1, banks
   * 4t mod 32 (8 values, 4 items each) and one above: 4 wavefronts. */
  cr_assert_eq(strided(0, 2, 8), 4, "stride 2 doubles");
  cr_assert_eq(strided(0, 16, 8), 32, "stride 16 doubles: banks 0 and 1, 32 items each");
  cr_assert_eq(strided(0, 17, 8), 2, "stride 17 doubles: words 34t, each bank twice");
}

Test(perf, bank_idle_items)
{
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = t % 2 ? -1 : 32 * t; /* 16 items in bank 0 */
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 4), 16, "idle items (-1) are not counted");
  for (int t = 0; t < 32; t++) idx[t] = -1;
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 4), 0, "an idle warp reads nothing");
  for (int t = 0; t < 32; t++) idx[t] = t < 8 ? t : -1;
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 8), 1, "8 consecutive doubles: one wavefront");
  for (int t = 0; t < 32; t++) idx[t] = 32 * t;
  cr_assert_eq(fe_bank_wavefronts(idx, 5, 4), 5, "only the n items given count");
}

/* The expected wavefronts of 32 distinct words of `size` bytes placed at random among 4096
 * (what fe_bank_random_wavefronts samples), by a good generator (splitmix64). */
static double random_reference(int size, int samples)
{
  unsigned long long st = 42;
  long long idx[32];
  double sum = 0;
  for (int r = 0; r < samples; r++) {
    for (int t = 0; t < 32; t++) {
      int dup;
      do {
        unsigned long long z = (st += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        idx[t] = (long long)((z ^ (z >> 31)) % 4096);
        dup = 0;
        for (int u = 0; u < t; u++) dup |= idx[u] == idx[t];
      } while (dup);
    }
    sum += fe_bank_wavefronts(idx, 32, size);
  }
  return sum / samples;
}

Test(perf, bank_random)
{
  double r4 = fe_bank_random_wavefronts(4), r8 = fe_bank_random_wavefronts(8),
         r16 = fe_bank_random_wavefronts(16);
  /* 32 random floats: the most-loaded of 32 banks (at least 1; about 3.5). 32 random
   * doubles cover 64 words, so at least 2 a bank, and fall on 16 bank pairs: the
   * most-loaded pair carries more than the most-loaded single bank of the floats. */
  cr_assert(r4 >= 1 && r4 <= 32, "r4 = %g", r4);
  cr_assert(r8 >= 2 && r8 <= 32, "r8 = %g", r8);
  cr_assert(r8 > r4, "random doubles (%g) must cost more than random floats (%g)", r8, r4);
  cr_assert(r16 >= 4 && r16 > r8, "r16 = %g, r8 = %g", r16, r8);
  cr_assert_eq(fe_bank_random_wavefronts(8), r8, "a fixed-seed sample gives one answer");
  /* against the expectation (a fixed sample of 256 warps: within 10%) */
  double e4 = random_reference(4, 20000), e8 = random_reference(8, 20000);
  cr_assert(fabs(r4 - e4) < 0.1 * e4, "r4 = %g, the expectation is %g", r4, e4);
  cr_assert(fabs(r8 - e8) < 0.1 * e8, "r8 = %g, the expectation is %g", r8, e8);
}

/* ---- the model --------------------------------------------------------------------------- */

/* A cpu-like calibration (no curves): GB/s, GF/s, us, G/s */
static fe_calibration cpu_cal(void)
{
  fe_calibration c;
  memset(&c, 0, sizeof c);
  c.valid = 1;
  c.gbytes = 100;
  c.gflops = 1000;
  c.launch_us = 5;
  c.sync_us = 20;
  c.l2_gbytes = 400;
  c.shared_gbytes = 2000;
  c.nonfma_gops = 50;
  c.atomic_gops = 10;
  return c;
}

static fe_calibration gpu_cal(void);

/* 10 ms of DRAM, 2.5 ms of L2, 2 ms of FMA, 2 ms of divisions, 3 launches */
static fe_report work(void)
{
  fe_report r;
  memset(&r, 0, sizeof r);
  r.bytes = 1e9;
  r.l2_bytes = 1e9;
  r.flops = 2e9;
  r.nonfma = 1e8;
  r.shared_bytes = 1e9;
  r.atomics = 1e8;
  r.launches = 3;
  return r;
}

Test(perf, model_ceilings_exact)
{
  fe_calibration c = cpu_cal();
  fe_report r = work();
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 1e9 / 100e9);
  assert_close(r.ceiling_seconds[FE_CEIL_L2], 1e9 / 400e9);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / 1000e9);
  assert_close(r.ceiling_seconds[FE_CEIL_NONFMA], 1e8 / 50e9);
  assert_close(r.ceiling_seconds[FE_CEIL_LAUNCH], (20 + 2 * 5) * 1e-6); /* the first waited, 2 queued */
  cr_assert_str_eq(r.bound, "dram");
  assert_close(r.predicted_seconds, 0.01 + 30e-6);
  assert_close(r.efficiency, 1);
  assert_close(r.peak_gbytes, 100);
  assert_close(r.peak_gflops, 1000);
}

Test(perf, model_cpu_has_no_shared_or_atomics)
{
  fe_calibration c = cpu_cal();
  fe_report r = work();
  r.shared_bytes = 1e15; /* would bind by far if they counted */
  r.atomics = 1e15;
  fe_perf_model(&c, 16, &r);
  cr_assert_eq(r.ceiling_seconds[FE_CEIL_SHARED], 0);
  cr_assert_eq(r.ceiling_seconds[FE_CEIL_ATOMIC], 0);
  cr_assert_str_eq(r.bound, "dram");
  assert_close(r.predicted_seconds, 0.01 + 30e-6);
}

/* The cpu's flops at the scalar rate, but those of vectorized loops at the vectorized one */
Test(perf, model_cpu_vectorized_flops)
{
  fe_calibration c = cpu_cal();
  c.scalar_gflops = 250;
  fe_report r = work();
  r.vec_flops = 1.5e9;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.5e9 / 250e9 + 1.5e9 / 1000e9);
  r = work(); /* none vectorized: all at the scalar rate */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / 250e9);
  r = work(); /* no scalar rate measured: the one rate */
  r.vec_flops = 1.5e9;
  c.scalar_gflops = 0;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / 1000e9);
  fe_calibration gc = gpu_cal(); /* a GPU: every item is a lane, one rate */
  gc.scalar_gflops = 250;
  r = work();
  r.vec_flops = 1.5e9;
  fe_perf_model(&gc, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / 1000e9);
}

/* The cpu's issue-bound parts (multiply-adds, divisions, indexed loops) run one after another
 * on a thread: they add, and bind when their sum passes memory's time; a GPU has no such rate */
Test(perf, model_cpu_issue_adds)
{
  fe_calibration c = cpu_cal();
  c.indexed_gops = 2;
  fe_report r = work(); /* 10 ms of DRAM, 2 + 2 ms of FMA and divisions */
  r.indexed = 1e7;      /* 5 ms */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 1e7 / 2e9);
  cr_assert_str_eq(r.bound, "dram"); /* 9 ms of issue under 10 of DRAM */
  assert_close(r.predicted_seconds, 0.01 + 30e-6);
  r = work();
  r.indexed = 2e7; /* 10 ms: 14 ms of issue */
  fe_perf_model(&c, 16, &r);
  cr_assert_str_eq(r.bound, "indexed");
  assert_close(r.predicted_seconds, 0.014 + 30e-6);
  c.indexed_gops = 0; /* not calibrated (GPUs): no ceiling */
  fe_perf_model(&c, 16, &r);
  cr_assert_eq(r.ceiling_seconds[FE_CEIL_INDEXED], 0);
  fe_calibration gc = gpu_cal();
  gc.indexed_gops = 2;
  r = work();
  fe_perf_model(&gc, 0, &r);
  double alone = r.predicted_seconds;
  r = work();
  r.indexed = 1e7; /* 5 ms beside 10 of DRAM: on a GPU the pipes overlap */
  fe_perf_model(&gc, 0, &r);
  assert_close(r.predicted_seconds, alone);
}

/* The cpu's hot loop as llvm-mca simulates it: its iterations at their cycles over the
 * threads bind the FMA pipe where longer than its multiply-adds and divisions at the
 * calibrated rates; not where shorter, not without a calibrated cycle, not on a GPU */
Test(perf, model_cpu_hot_loop)
{
  fe_calibration c = cpu_cal();
  c.cycle_ns = 0.5;
  fe_report r = work(); /* 10 ms of DRAM, 2 + 2 ms of FMA and divisions */
  r.loop_trips = 1e7;
  r.loop_cycles = 100; /* 1e7 x 100 x 0.5 ns over 16 threads: 31.25 ms */
  fe_perf_model(&c, 16, &r);
  assert_close(r.loop_seconds, 0.03125);
  cr_assert(r.loop_binds);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.03125 - 0.002);
  cr_assert_str_eq(r.bound, "fma");
  assert_close(r.predicted_seconds, 0.03125 + 30e-6); /* the issue: FMA, divisions */
  r = work();
  r.loop_trips = 1e7;
  r.loop_cycles = 4; /* 1.25 ms, under the rates' 4: the rates' time */
  fe_perf_model(&c, 16, &r);
  assert_close(r.loop_seconds, 0.00125);
  cr_assert(!r.loop_binds);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.002);
  c.cycle_ns = 0; /* no cycle calibrated (llvm-mca absent): none */
  r = work();
  r.loop_trips = 1e7;
  r.loop_cycles = 100;
  fe_perf_model(&c, 16, &r);
  cr_assert_eq(r.loop_seconds, 0);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.002);
  fe_calibration gc = gpu_cal(); /* a GPU: no hot loop */
  gc.cycle_ns = 0.5;
  r = work();
  r.loop_trips = 1e7;
  r.loop_cycles = 100;
  fe_perf_model(&gc, 0, &r);
  cr_assert_eq(r.loop_seconds, 0);
}

/* The cpu's indexed loops: each node's first touch at the rate of values from beyond L1, the
 * others at L1's; without an L1 rate, all at the first; with the group's arrays beyond L1,
 * all at the first touches' rate from memory */
Test(perf, model_cpu_indexed_first_touches)
{
  fe_calibration c = cpu_cal();
  c.indexed_gops = 1;
  c.indexed_l1_gops = 4;
  fe_report r = work();
  r.indexed = 1e7;
  r.indexed_first = 2e6; /* 2 ms, then 8e6 from L1: 2 ms */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 2e-3 + 2e-3);
  r = work();
  r.indexed = 1e7;
  r.indexed_first = 2e7; /* never more first touches than values */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 1e7 / 1e9);
  /* a group's arrays beyond the L1 share they keep (half of 48 KB here): every value at
   * the first touches' rate from memory, not the last-level cache's */
  c.l1_bytes = 48 << 10;
  c.indexed_llc_gops = 3;
  r = work();
  r.indexed = 1e7;
  r.indexed_first = 2e6;
  r.array_bytes = 20 << 10;
  fe_perf_model(&c, 16, &r); /* within: first touches (from memory: work()'s GB) and L1's */
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 2e6 / 1e9 + 8e6 / 4e9);
  r.array_bytes = 30 << 10;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 1e7 / 1e9);
  c.indexed_l1_gops = 0;
  c.indexed_llc_gops = 0;
  r = work();
  r.indexed = 1e7;
  r.indexed_first = 2e6;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_INDEXED], 1e7 / 1e9);
}

/* The cpu: a sparse matrix's rows (csr) at the calibrated rate of such rows; without it, and
 * on a GPU, at the DRAM rate */
Test(perf, model_cpu_rows)
{
  fe_calibration c = cpu_cal();
  c.rows_gbytes = 50; /* the DRAM rate's half */
  fe_report r = work();
  fe_perf_model(&c, 16, &r);
  const double dram = r.ceiling_seconds[FE_CEIL_DRAM];
  r.rows = 1;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], dram * c.gbytes / 50);
  c.rows_gbytes = 0; /* not measured */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], dram);
  fe_calibration gc = gpu_cal();
  gc.rows_gbytes = 50;
  r = work();
  fe_perf_model(&gc, 0, &r);
  const double gdram = r.ceiling_seconds[FE_CEIL_DRAM];
  r.rows = 1;
  fe_perf_model(&gc, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], gdram);
}

/* A cpu calibration with a scalar rate and a lanes curve (8 lanes: 0.6 of the SIMD rate) */
static fe_calibration cpu_cal_lanes(void)
{
  fe_calibration c = cpu_cal();
  c.scalar_gflops = 250;
  static const double lanes[FE_CURVE_POINTS] = {0.1, 0.3, 0.6, 0.8, 1.0, 1.0};
  memcpy(c.curve[FE_CURVE_LANES], lanes, sizeof lanes);
  return c;
}

/* The cpu's SIMD flops at the rate calibrated with the kernel's lanes (its group's cells) */
Test(perf, model_cpu_lanes)
{
  fe_calibration c = cpu_cal_lanes();
  fe_report r = work();
  r.vec_flops = 1.5e9;
  r.lanes = 8; /* the curve's third point */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.5e9 / 250e9 + 1.5e9 / (1000e9 * 0.6));
  r.lanes = 32;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.5e9 / 250e9 + 1.5e9 / 1000e9);
  r.lanes = 0; /* not known: the rate as calibrated */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.5e9 / 250e9 + 1.5e9 / 1000e9);
}

/* The cpu's contractions in flight at the vectorized rate whole, those over padded arrays
 * (sumfact's, double) at the calibrated rate of such a loop where lower; not measured, or
 * measured above the vectorized rate: the vectorized rate */
Test(perf, model_cpu_padded)
{
  fe_calibration c = cpu_cal_lanes();
  fe_report r = work();
  r.vec_flops = 1.5e9;
  r.lanes = 8;
  r.inflight_flops = 1e9;
  fe_perf_model(&c, 16, &r);
  const double plain = 0.5e9 / 250e9 + 0.5e9 / (1000e9 * 0.6) + 1e9 / 1000e9;
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], plain);
  r.padded_flops = 0.8e9;
  fe_perf_model(&c, 16, &r); /* not measured */
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], plain);
  c.padded_gflops = 400;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA],
               0.5e9 / 250e9 + 0.5e9 / (1000e9 * 0.6) + 0.2e9 / 1000e9 + 0.8e9 / 400e9);
  c.padded_gflops = 2000;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], plain);
}

/* The cpu, where one of the kernels' registers holds a group's lanes (vector_lanes >= lanes:
 * double's 8 cells in 512 bits): the vectorized rate whole (no lanes curve), no padded-loop
 * term, and the operands from L2 only where the arrays outgrow two thirds of L1 (half where
 * the lanes take several registers) */
Test(perf, model_cpu_lanes_whole)
{
  fe_calibration c = cpu_cal_lanes();
  c.padded_gflops = 400;
  c.l1_bytes = 48 << 10;
  fe_report r = work();
  r.vec_flops = 1.5e9;
  r.lanes = 8;
  r.inflight_flops = 1e9;
  r.padded_flops = 0.8e9;
  r.array_bytes = 28 << 10; /* over half of L1, under two thirds */
  r.operand_bytes = 8e9;    /* 20 ms from L2 at 400 GB/s: binds where counted */
  const double split = 0.5e9 / 250e9 + 0.5e9 / (1000e9 * 0.6) + 0.2e9 / 1000e9 + 0.8e9 / 400e9;
  c.vector_lanes = 4; /* the lanes over two registers: each term as before */
  fe_perf_model(&c, 16, &r);
  assert_close(r.operand_seconds, 8e9 / 400e9);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 8e9 / 400e9);
  r.operand_bytes = 0;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], split);
  c.vector_lanes = 8;
  r.operand_bytes = 8e9;
  fe_perf_model(&c, 16, &r);
  assert_close(r.operand_seconds, 0);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 0.5e9 / 250e9 + 1.5e9 / 1000e9);
  r.array_bytes = 40 << 10; /* beyond two thirds */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 8e9 / 400e9);
  c.vector_lanes = 0; /* not known (a stored calibration without it): as split */
  r.array_bytes = 0;
  r.operand_bytes = 0;
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], split);
}

/* The cpu: words asked for ahead into L2 and read by a phase of their own come there at the
 * last-level cache's calibrated rate, added to the loops' issue time; not measured: at L2's;
 * those of a call beyond what the cache keeps, from memory, at memory's rate where lower */
Test(perf, model_cpu_words_ahead)
{
  fe_calibration c = cpu_cal();
  fe_report r = work();
  r.bytes = 1e6;
  r.l2_bytes = 0;
  fe_perf_model(&c, 16, &r);
  const double none = r.predicted_seconds;
  r.phase_l2_bytes = 1e9;
  fe_perf_model(&c, 16, &r); /* not measured: L2's rate, 400 GB/s */
  assert_close(r.predicted_seconds, none + 1e9 / 400e9);
  c.llc_gbytes = 200;
  fe_perf_model(&c, 16, &r);
  assert_close(r.predicted_seconds, none + 1e9 / 200e9);
  /* a call beyond what the cache keeps (1 MB kept of a 4 MB cache, an eighth of it over: the
   * call's 2 MB all from memory): its words ahead no faster than memory's 100 GB/s */
  c.llc_bytes = 4e6, c.llc_keep_bytes = 1e6;
  r.bytes = 2e6;
  fe_perf_model(&c, 16, &r);
  const double beyond = r.predicted_seconds;
  r.phase_l2_bytes = 0;
  fe_perf_model(&c, 16, &r);
  assert_close(beyond, r.predicted_seconds + 1e9 / 100e9);
}

/* The cpu's group factors: lanes a SIMD select or copy fills as a multiply-add a lane at the
 * vectorized rate (with the kernel's lanes), gathered values as one at the scalar rate; a GPU
 * has no such loop */
Test(perf, model_cpu_group_factors)
{
  fe_calibration c = cpu_cal_lanes();
  fe_report r = work();
  r.vec_flops = 1.5e9;
  r.lanes = 8;
  fe_perf_model(&c, 16, &r);
  const double flops = r.ceiling_seconds[FE_CEIL_FMA];
  r.factor_lanes = 3e8; /* 6e8 flops at 1000 x 0.6 GF/s: 1 ms */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], flops + 1e-3);
  r.factor_lanes = 0;
  r.factor_gathers = 2.5e8; /* 5e8 flops at 250 GF/s: 2 ms */
  fe_perf_model(&c, 16, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], flops + 2e-3);
  fe_calibration gc = gpu_cal();
  r = work();
  fe_perf_model(&gc, 0, &r);
  const double gpu = r.ceiling_seconds[FE_CEIL_FMA];
  r.factor_lanes = 3e8;
  r.factor_gathers = 2.5e8;
  fe_perf_model(&gc, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], gpu);
}

Test(perf, model_bound_is_largest)
{
  fe_calibration c = cpu_cal();
  fe_report r;
  const struct {
    double *field;
    double value, seconds, issue; /* issue: the cpu's other issue-bound parts, which add */
    const char *bound;
  } cases[4] = {{&r.flops, 5e10, 5e10 / 1000e9, 2e-3, "fma"},
                {&r.nonfma, 1e10, 1e10 / 50e9, 2e-3, "nonfma"},
                {&r.l2_bytes, 1e11, 1e11 / 400e9, 0, "l2"},
                {&r.bytes, 3e9, 3e9 / 100e9, 0, "dram"}};
  for (int i = 0; i < 4; i++) {
    r = work();
    *cases[i].field = cases[i].value;
    fe_perf_model(&c, 16, &r);
    cr_assert_str_eq(r.bound, cases[i].bound, "case %d", i);
    assert_close(r.predicted_seconds, cases[i].seconds + cases[i].issue + 30e-6);
    for (int k = 0; k < FE_CEIL_LAUNCH; k++)
      cr_assert(r.ceiling_seconds[k] <= cases[i].seconds, "case %d: %s larger than the bound", i,
                fe_ceiling_name(k));
  }
  /* launches bind when they take longest: 20 us + 9999 x 5 us = 50.015 ms */
  r = work();
  r.launches = 10000;
  fe_perf_model(&c, 16, &r);
  cr_assert_str_eq(r.bound, "launches");
  assert_close(r.ceiling_seconds[FE_CEIL_LAUNCH], 9999 * 5e-6 + 20e-6);
  assert_close(r.predicted_seconds, 0.01 + 9999 * 5e-6 + 20e-6);
}

Test(perf, model_rates_scale)
{
  fe_calibration c = cpu_cal();
  fe_report a = work(), b = work();
  fe_perf_model(&c, 16, &a);
  c.gbytes *= 2;
  fe_perf_model(&c, 16, &b);
  assert_close(b.ceiling_seconds[FE_CEIL_DRAM], a.ceiling_seconds[FE_CEIL_DRAM] / 2);
  for (int k = 0; k < FE_NCEILINGS; k++)
    if (k != FE_CEIL_DRAM) assert_close(b.ceiling_seconds[k], a.ceiling_seconds[k]);
  assert_close(b.predicted_seconds, 0.005 + 30e-6);
  /* a rate of 0 (not measured) is no ceiling, not an infinite one */
  c = cpu_cal();
  c.l2_gbytes = c.nonfma_gops = 0;
  a = work();
  fe_perf_model(&c, 16, &a);
  cr_assert_eq(a.ceiling_seconds[FE_CEIL_L2], 0);
  cr_assert_eq(a.ceiling_seconds[FE_CEIL_NONFMA], 0);
  cr_assert_str_eq(a.bound, "dram");
}

/* A GPU-like calibration: the curves (2, 4, 8, 16, 32, 64 warps) of each rate differ */
static fe_calibration gpu_cal(void)
{
  fe_calibration c = cpu_cal();
  static const double curves[3][FE_CURVE_POINTS] = {{0.1, 0.2, 0.35, 0.6, 0.85, 1.0},
                                                    {0.05, 0.15, 0.3, 0.5, 0.75, 0.9},
                                                    {0.125, 0.25, 0.5, 0.7, 0.9, 1.25}};
  memcpy(c.curve, curves, sizeof curves);
  c.gpu = 1;
  return c;
}

Test(perf, model_curves)
{
  fe_calibration c = gpu_cal();
  fe_report r = work();
  r.occupancy = 0.25; /* 16 of 64 warps: the curves' point 3, exactly */
  fe_perf_model(&c, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 1e9 / (100e9 * 0.6));
  /* a GPU's L2 serves memory's bytes beside its own hits (the cpu's: the further loads alone,
   * model_ceilings_exact) */
  assert_close(r.ceiling_seconds[FE_CEIL_L2], (1e9 + 1e9) / (400e9 * 0.6));
  assert_close(r.ceiling_seconds[FE_CEIL_SHARED], 1e9 / (2000e9 * 0.5));
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / (1000e9 * 0.7));
  assert_close(r.ceiling_seconds[FE_CEIL_NONFMA], 1e8 / (50e9 * 0.7));
  assert_close(r.ceiling_seconds[FE_CEIL_ATOMIC], 1e8 / 10e9); /* atomics: no curve */
  cr_assert_str_eq(r.bound, "dram");
  assert_close(r.efficiency, 0.6);
  assert_close(r.predicted_seconds, 1e9 / (100e9 * 0.6) + 30e-6);
  /* the bound's own curve gives the efficiency */
  r = work();
  r.occupancy = 0.25;
  r.shared_bytes = 1e11;
  fe_perf_model(&c, 0, &r);
  cr_assert_str_eq(r.bound, "shared");
  assert_close(r.efficiency, 0.5);
  assert_close(r.predicted_seconds, 1e11 / (2000e9 * 0.5) + 30e-6);
  /* between points: 24 warps, linear in log2(warps) between 16 and 32 */
  r = work();
  r.occupancy = 0.375;
  fe_perf_model(&c, 0, &r);
  double x = log2(24.0) - 4;
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 1e9 / (100e9 * (0.6 + x * (0.85 - 0.6))));
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / (1000e9 * (0.7 + x * (0.9 - 0.7))));
  /* full occupancy: the last points, a fraction above 1 counted as 1 */
  r = work();
  r.occupancy = 1;
  fe_perf_model(&c, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 1e9 / 100e9);
  assert_close(r.ceiling_seconds[FE_CEIL_SHARED], 1e9 / (2000e9 * 0.9));
  assert_close(r.ceiling_seconds[FE_CEIL_FMA], 2e9 / 1000e9);
  /* occupancy not known: the full rates */
  r = work();
  fe_perf_model(&c, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 1e9 / 100e9);
  assert_close(r.ceiling_seconds[FE_CEIL_SHARED], 1e9 / 2000e9);
}

/* A GPU calibration with latencies: 0.5 us from device memory, 0.2 from L2, 0.05 a phase */
static fe_calibration waits_cal(void)
{
  fe_calibration c = gpu_cal();
  c.dram_latency_us = 0.5;
  c.l2_latency_us = 0.2;
  c.phase_latency_us = 0.05;
  return c;
}

/* The waits' kernel: pipes well under its waits; 40000 groups of 128 items, 4 resident, a
 * path of 2 loads from device memory, 3 from L2 and 8 phases */
static fe_report waits_work(void)
{
  fe_report r = work();
  r.bytes = r.l2_bytes = r.shared_bytes = 1e7;
  r.flops = 2e7;
  r.nonfma = r.atomics = 1e6;
  r.occupancy = 0.25;
  r.group_items = 128;
  r.resident = 4;
  r.groups = 40000;
  r.dram_trips = 2;
  r.l2_trips = 3;
  r.phases = 8;
  return r;
}

/* The waits: a path of 2 loads from device memory (0.5 us), 3 from L2 (0.2 us) and 8 phases
 * (0.05 us) is 2 us; 40000 groups on 10 units, 4 resident, are 1000 waves: 2 ms, on top of
 * the pipes the groups wait for (the groups of a wave wait at the same time); the atomic
 * adds, sent and not waited for, bind only when they take longer than all of that. */
Test(perf, model_latency)
{
  fe_calibration c = waits_cal();
  fe_report r = waits_work();
  fe_report q = r;
  fe_perf_model(&c, 10, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_LATENCY], 1000 * 2e-6);
  double sum = 0, most = 0;
  for (int k = 0; k < FE_CEIL_LAUNCH; k++) {
    if (k == FE_CEIL_ATOMIC) continue;
    sum += r.ceiling_seconds[k];
    if (r.ceiling_seconds[k] > most) most = r.ceiling_seconds[k];
  }
  cr_assert_str_eq(r.bound, "latency");
  double on = most + (sum - most) / 4, launch = r.ceiling_seconds[FE_CEIL_LAUNCH];
  assert_close(r.predicted_seconds, on + 2e-3 + launch);
  /* a last wave of one group waits a whole path */
  fe_report r1 = q;
  r1.groups = 40001;
  fe_perf_model(&c, 10, &r1);
  assert_close(r1.ceiling_seconds[FE_CEIL_LATENCY], 1001 * 2e-6);
  /* much work a group: a pipe binds, the waits still add */
  fe_report big = q;
  big.shared_bytes = 1e10;
  fe_perf_model(&c, 10, &big);
  cr_assert_str_eq(big.bound, "shared");
  fe_calibration none = c;
  none.dram_latency_us = none.l2_latency_us = none.phase_latency_us = 0;
  fe_report nb = q;
  nb.shared_bytes = 1e10;
  fe_perf_model(&none, 10, &nb);
  assert_close(big.predicted_seconds, nb.predicted_seconds + 2e-3);
  /* the atomic adds longer than the pipes and the waits together: they alone */
  fe_report at = q;
  at.atomics = 1e8; /* 10 ms at 10 G/s */
  fe_perf_model(&c, 10, &at);
  cr_assert_str_eq(at.bound, "atomics");
  assert_close(at.predicted_seconds, 1e8 / 10e9 + launch);
  /* no latencies measured (an older calibration): no waits */
  fe_report z = q;
  fe_perf_model(&none, 10, &z);
  cr_assert_eq(z.ceiling_seconds[FE_CEIL_LATENCY], 0);
  cr_assert_str_neq(z.bound, "latency");
  assert_close(z.predicted_seconds, on + launch);
  /* the cpu's calibration: nothing resident, no waits whatever the latencies */
  fe_calibration cc = cpu_cal();
  cc.dram_latency_us = 0.5;
  fe_report w = q;
  fe_perf_model(&cc, 10, &w);
  cr_assert_eq(w.ceiling_seconds[FE_CEIL_LATENCY], 0);
}

/* A solve's report (calls > 0): its calls each at one call's model (the waits of every
 * call's waves counted, which the totals alone would count once) and the steps' vector
 * kernels at their own bytes and flops, the times added and the launches queued behind one
 * wait; perf.share's scale keeps it (the calls' and the vectors' work alike). */
Test(perf, model_solve_calls)
{
  fe_calibration c = waits_cal();
  fe_report one = waits_work();
  fe_report vec;
  memset(&vec, 0, sizeof vec);
  vec.flops = 50 * 3e6;
  vec.bytes = 50 * 2.4e7;
  vec.launches = 50 * 3;
  fe_report a = one, v = vec;
  fe_perf_model(&c, 10, &a);
  fe_perf_model(&c, 10, &v);
  fe_report s = one; /* 50 steps: each an apply (3 launches) and the vector kernels */
  s.calls = 50;
  s.flops = 50 * one.flops + vec.flops;
  s.bytes = 50 * one.bytes + vec.bytes;
  s.launches = 50 * one.launches + vec.launches;
  s.extra_flops = vec.flops;
  s.extra_bytes = vec.bytes;
  s.extra_launches = vec.launches;
  fe_report q = s;
  fe_perf_model(&c, 10, &s);
  const double launch = (20 + (300 - 1) * 5) * 1e-6;
  assert_close(s.ceiling_seconds[FE_CEIL_LAUNCH], launch);
  assert_close(s.predicted_seconds,
               50 * (a.predicted_seconds - a.ceiling_seconds[FE_CEIL_LAUNCH]) +
                   (v.predicted_seconds - v.ceiling_seconds[FE_CEIL_LAUNCH]) + launch);
  assert_close(s.ceiling_seconds[FE_CEIL_LATENCY], 50 * 1000 * 2e-6);
  assert_close(s.ceiling_seconds[FE_CEIL_DRAM],
               50 * a.ceiling_seconds[FE_CEIL_DRAM] + v.ceiling_seconds[FE_CEIL_DRAM]);
  assert_close(s.flops, q.flops);
  cr_assert_eq(s.launches, 300);
  cr_assert_str_eq(s.bound, a.bound);
  /* the totals read as one call: the waits once, far less */
  fe_report t = q;
  t.calls = 0;
  fe_perf_model(&c, 10, &t);
  cr_assert(t.predicted_seconds < 0.5 * s.predicted_seconds, "%g %g", t.predicted_seconds,
            s.predicted_seconds);
  /* modelled again (perf.model of the report): the same */
  fe_report again = s;
  fe_perf_model(&c, 10, &again);
  assert_close(again.predicted_seconds, s.predicted_seconds);
  /* a share of it (perf.share): each part's work scaled alike */
  fe_report h = q, ha = one, hv = vec;
  fe_report_scale(&h, 0.5);
  fe_report_scale(&ha, 0.5);
  fe_report_scale(&hv, 0.5);
  fe_perf_model(&c, 10, &h);
  fe_perf_model(&c, 10, &ha);
  fe_perf_model(&c, 10, &hv);
  assert_close(h.predicted_seconds,
               50 * (ha.predicted_seconds - ha.ceiling_seconds[FE_CEIL_LAUNCH]) +
                   (hv.predicted_seconds - hv.ceiling_seconds[FE_CEIL_LAUNCH]) + launch);
}

/* A group's phases (GPUs): in each the pipes run side by side in its warps (the largest
 * whole, the others one W-th, W warps a group), the phases one after another; the G groups
 * resident overlap the rest of that serial time G-fold. Where no phases are described each
 * pipe is a phase of its own (the sum). */
Test(perf, model_phases_overlap_in_warps)
{
  fe_calibration c = cpu_cal(); /* no curves: the times are the ceilings' */
  fe_report r = work();          /* DRAM 10 ms, L2 2.5, shared 0.5, FMA 2, divisions 2 */
  r.group_items = 64;            /* two warps */
  r.resident = 4;
  fe_report plain = r;
  fe_perf_model(&c, 16, &plain);
  double t[FE_NCEILINGS];
  memcpy(t, plain.ceiling_seconds, sizeof t);
  double sum = t[FE_CEIL_DRAM] + t[FE_CEIL_L2] + t[FE_CEIL_SHARED] + t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA];
  assert_close(plain.serial_seconds, sum);
  /* phase 1: all the DRAM bytes and a quarter of the flops; phase 2: the rest */
  r.nphase_work = 2;
  r.phase_work[0] = (fe_phase_work){.bytes = 1e9, .flops = 0.5e9};
  r.phase_work[1] = (fe_phase_work){.l2_bytes = 1e9, .shared_bytes = 1e9, .flops = 1.5e9, .nonfma = 1e8};
  fe_perf_model(&c, 16, &r);
  double p1 = t[FE_CEIL_DRAM] + 0.25 * t[FE_CEIL_FMA] / 2;
  double p2 = t[FE_CEIL_L2] + (t[FE_CEIL_SHARED] + 0.75 * t[FE_CEIL_FMA] + t[FE_CEIL_NONFMA]) / 2;
  assert_close(r.phase_seconds[0], p1);
  assert_close(r.phase_seconds[1], p2);
  assert_close(r.serial_seconds, p1 + p2);
  double most = t[FE_CEIL_DRAM];
  assert_close(r.predicted_seconds, most + (p1 + p2 - most) / 4 + t[FE_CEIL_LAUNCH]);
  cr_assert(r.predicted_seconds < plain.predicted_seconds);
  /* one warp a group: a phase's pipes add */
  fe_report one = r;
  one.group_items = 32;
  fe_perf_model(&c, 16, &one);
  assert_close(one.serial_seconds, sum);
  /* work no phase describes (the divisions here) is a phase of its own */
  fe_report part = r;
  part.phase_work[1].nonfma = 0;
  fe_perf_model(&c, 16, &part);
  assert_close(part.serial_seconds, p1 + t[FE_CEIL_L2] +
                                        (t[FE_CEIL_SHARED] + 0.75 * t[FE_CEIL_FMA]) / 2 +
                                        t[FE_CEIL_NONFMA]);
}

/* The waits hidden by a phase long on the shared ceiling: its queue leaves the groups of a
 * wave staggered over its length S; none hidden while S (G - 1) / G is at most one path, all
 * from two paths, in proportion between; a single group resident hides none. */
Test(perf, model_stagger_hides_waits)
{
  fe_calibration c = gpu_cal();
  memset(c.curve, 0, sizeof c.curve); /* the rates as they are */
  c.dram_latency_us = 0.5;
  c.l2_latency_us = 0.2;
  c.phase_latency_us = 0.05;
  fe_report q = work();
  q.atomics = 0;
  q.occupancy = 0.25;
  q.group_items = 128;
  q.groups = 40000; /* 1000 waves of 4 on 10 units: the waits 2 ms */
  q.dram_trips = 2;
  q.l2_trips = 3;
  q.phases = 8;
  q.nphase_work = 2;
  q.phase_work[0] = (fe_phase_work){.bytes = 1e9, .l2_bytes = 1e9, .flops = 2e9, .nonfma = 1e8};
  const double shared[] = {1e9, 5e9, 8e9, 12e9}; /* S 0.5, 2.5, 4, 6 ms */
  const int G[] = {4, 4, 4, 4, 1};
  const double hidden[] = {0, 0, 0.5, 1, 0}; /* S 3/4 over 2 ms: 0.19, 0.94, 1.5, 2.25 */
  for (int i = 0; i < 5; i++) {
    fe_report r = q;
    r.resident = G[i];
    r.shared_bytes = r.phase_work[1].shared_bytes = shared[i < 4 ? i : 3];
    fe_perf_model(&c, 10, &r);
    assert_close(r.stagger_seconds, r.shared_bytes / 2000e9);
    assert_close(r.waits_hidden, hidden[i]);
    double waves = 40000.0 / (10 * G[i]);
    assert_close(r.ceiling_seconds[FE_CEIL_LATENCY], waves * 2e-6 * (1 - hidden[i]));
  }
  /* the stagger of a phase standing for several barrier phases is one of theirs */
  fe_report m = q;
  m.resident = 4;
  m.shared_bytes = m.phase_work[1].shared_bytes = 12e9;
  m.phase_work[1].barriers = 4;
  fe_perf_model(&c, 10, &m);
  assert_close(m.stagger_seconds, 12e9 / 2000e9 / 4);
  cr_assert_eq(m.waits_hidden, 0);
}

Test(perf, model_last_wave)
{
  /* 10 units, 4 groups resident on each: 40 groups a wave */
  fe_calibration c = gpu_cal();
  fe_report base = work();
  base.occupancy = 0.25;
  base.group_items = 128;
  base.resident = 4;
  base.groups = 40; /* one whole wave */
  fe_perf_model(&c, 10, &base);
  assert_close(base.ceiling_seconds[FE_CEIL_DRAM], 1e9 / (100e9 * 0.6));
  const long long groups[] = {80, 60, 41, 20};
  const double stretch[] = {1, 2 / 1.5, 2 / 1.025, 2}; /* whole waves over the waves */
  for (int i = 0; i < 4; i++) {
    fe_report r = base;
    r.groups = groups[i];
    fe_perf_model(&c, 10, &r);
    for (int k = 0; k < FE_CEIL_LAUNCH; k++)
      assert_close(r.ceiling_seconds[k], base.ceiling_seconds[k] * stretch[i]);
    assert_close(r.ceiling_seconds[FE_CEIL_LAUNCH], base.ceiling_seconds[FE_CEIL_LAUNCH]);
    assert_close(r.efficiency, 0.6 / stretch[i]);
    cr_assert_str_eq(r.bound, "dram");
    assert_close(r.predicted_seconds - r.ceiling_seconds[FE_CEIL_LAUNCH],
                 (base.predicted_seconds - base.ceiling_seconds[FE_CEIL_LAUNCH]) * stretch[i]);
  }
  /* the cpu (nothing resident known): one group a unit a wave; 6 groups on 4 units are
   * 1.5 waves */
  fe_calibration cc = cpu_cal();
  fe_report r = work();
  r.groups = 6;
  fe_perf_model(&cc, 4, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 0.01 * 2 / 1.5);
  assert_close(r.efficiency, 1.5 / 2);
  assert_close(r.predicted_seconds, 0.01 * 2 / 1.5 + 30e-6);
  /* no units or no groups given: no stretch */
  r = work();
  r.groups = 6;
  fe_perf_model(&cc, 0, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 0.01);
  r = work();
  fe_perf_model(&cc, 4, &r);
  assert_close(r.ceiling_seconds[FE_CEIL_DRAM], 0.01);
}

Test(perf, model_resident_overlap)
{
  /* G groups resident: the largest ceiling whole, the others one G-th of theirs */
  fe_calibration c = cpu_cal();
  fe_report r0 = work();
  fe_perf_model(&c, 16, &r0);
  double sum = 0, most = r0.ceiling_seconds[FE_CEIL_DRAM];
  for (int k = 0; k < FE_CEIL_LAUNCH; k++) sum += r0.ceiling_seconds[k];
  assert_close(sum, 0.01 + 0.0025 + 0.002 + 0.002); /* the cpu: no shared or atomics */
  const int G[] = {1, 2, 4, 1000};
  for (int i = 0; i < 4; i++) {
    fe_report r = work();
    r.resident = G[i];
    fe_perf_model(&c, 16, &r);
    for (int k = 0; k < FE_NCEILINGS; k++) assert_close(r.ceiling_seconds[k], r0.ceiling_seconds[k]);
    cr_assert_str_eq(r.bound, "dram");
    assert_close(r.predicted_seconds, most + (sum - most) / G[i] + 30e-6);
  }
  /* G = 1: the phases add up */
  fe_report r = work();
  r.resident = 1;
  fe_perf_model(&c, 16, &r);
  assert_close(r.predicted_seconds, sum + 30e-6);
  /* with curves and a partial last wave: (max + others / G) / fill, the others without the
   * atomic adds (sent, not waited for: they bind alone or not at all) */
  fe_calibration g = gpu_cal();
  r = work();
  r.occupancy = 0.25;
  r.resident = 4;
  r.groups = 60; /* 1.5 waves of 40 on 10 units */
  fe_perf_model(&g, 10, &r);
  double t[] = {1e9 / (100e9 * 0.6), 2e9 / (400e9 * 0.6), 1e9 / (2000e9 * 0.5),
                2e9 / (1000e9 * 0.7), 1e8 / (50e9 * 0.7)};
  double s = 0;
  for (int k = 0; k < 5; k++) s += t[k];
  for (int k = FE_CEIL_ATOMIC + 1; k < FE_CEIL_LAUNCH; k++) s += r.ceiling_seconds[k] * 1.5 / 2;
  assert_close(r.predicted_seconds, (t[0] + (s - t[0]) / 4) * 2 / 1.5 + 30e-6);
}

Test(perf, ceiling_names)
{
  static const struct {
    int c;
    const char *name;
  } names[] = {{FE_CEIL_DRAM, "dram"},     {FE_CEIL_L2, "l2"},          {FE_CEIL_SHARED, "shared"},
               {FE_CEIL_FMA, "fma"},       {FE_CEIL_NONFMA, "nonfma"},  {FE_CEIL_ATOMIC, "atomics"},
               {FE_CEIL_CONSTANT, "constant"}, {FE_CEIL_LAUNCH, "launches"},
               {FE_CEIL_LATENCY, "latency"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    cr_assert_str_eq(fe_ceiling_name(names[i].c), names[i].name);
  /* the pipes come first (the model sums them below FE_CEIL_LAUNCH), the waits last */
  cr_assert_eq(FE_CEIL_LATENCY, FE_NCEILINGS - 1, "latency is the last ceiling");
  cr_assert_eq(FE_CEIL_LAUNCH, FE_NCEILINGS - 2, "launches come before the waits");
  for (int i = 0; i < FE_NCEILINGS; i++) { /* every ceiling named, and no two alike */
    cr_assert_str_neq(fe_ceiling_name(i), "?");
    for (int j = 0; j < i; j++) cr_assert_str_neq(fe_ceiling_name(i), fe_ceiling_name(j));
  }
  cr_assert_str_eq(fe_ceiling_name(FE_NCEILINGS), "?");
  cr_assert_str_eq(fe_ceiling_name(-1), "?");
  cr_assert_str_eq(fe_ceiling_name(1000), "?");
}

/* A global load of 8-byte words is served by half-warps: each half its own bank count. */
Test(perf, l1_wavefronts_by_half_warps)
{
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = t;
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 8), 2, "32 consecutive doubles: one a half");
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 4), 1, "32 consecutive floats: one (a whole warp)");
  for (int t = 0; t < 32; t++) idx[t] = t % 16; /* the halves read the same 16 doubles */
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 8), 1, "shared memory: the warp shares them");
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 8), 2, "through L1: each half reads them");
  for (int t = 0; t < 32; t++) idx[t] = (long long)t * 16; /* every double in banks 0-1 */
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 8), 32, "stride 16 doubles: 16 a half");
  for (int t = 0; t < 32; t++) idx[t] = t < 16 ? t : -1;
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 8), 1, "an idle half costs nothing");
}

/* A warp's shared store of 8-byte words goes by half-warps (Nsight Compute's per-instruction
 * wavefronts on the H100, transpose's gather at P1: 8 cells x 4 nodes a warp, ue[b BLOCK +
 * e] with BLOCK 32, all of a cell's nodes in one bank pair: 8 an STS.64), its loads by the
 * whole warp; 4-byte words the same either way. */
Test(perf, shared_stores_by_half_warps)
{
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = (long long)(t % 4) * 32 + t / 4; /* b BLOCK + e */
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 8), 4, "the whole warp: 4 words a bank pair");
  cr_assert_eq(fe_bank_store_wavefronts(idx, 32, 8), 8, "by halves: 4 each");
  cr_assert_eq(fe_bank_store_wavefronts(idx, 32, 4), fe_bank_wavefronts(idx, 32, 4));
  for (int t = 0; t < 32; t++) idx[t] = t;
  cr_assert_eq(fe_bank_store_wavefronts(idx, 32, 8), 2, "32 consecutive doubles: one a half");
  cr_assert_eq(fe_bank_wavefronts(idx, 32, 8), 2);
}

/* sumfact's shared count pays a whole wavefront for a warp with few items: at Q2 (3 x 3
 * items a cell a phase) a group of 4 cells runs 36 items, a full warp and one of 4, two
 * wavefronts an access in single where the bytes say 1.125. Nsight Compute measured 92.4 a
 * cell at Q2 64^3 in single (87.5 without its bank conflicts; docs/history.md, eleventh
 * session); full warps (Q3: 16 items a cell, 64 a group) count as before. */
Test(perf, sumfact_shared_pays_partial_warps)
{
  fe_sumfact_shape q2 = {.dim = 3, .nc = 1, .p1 = 3, .q1 = 3, .jacobian = 1, .phys_flops = 6};
  fe_sumfact_shape q3 = q2;
  q3.p1 = q3.q1 = 4;
  double full = fe_sumfact_shared_per_cell(&q2, 4, 0) / 128;
  double four = fe_sumfact_shared_per_cell(&q2, 4, 4) / 128;
  cr_assert(four > 1.4 * full && four > 80 && four < 106, "Q2 single: %.1f wavefronts a cell "
            "(%.1f with full warps; measured 87.5-92.4)", four, full);
  cr_assert_float_eq(fe_sumfact_shared_per_cell(&q3, 8, 4), fe_sumfact_shared_per_cell(&q3, 8, 0),
                     1e-9, "Q3: every warp full");
}

/* sumfact's quadrature phase reads the table rows that do not change along its column of
 * points once (nvcc keeps them in registers) and the rows every item reads alike 16 bytes at
 * a time where they stay so aligned (8 where only that): Nsight Compute on the H100 measured
 * 2038 shared wavefronts a cell at Q7 hexes in single (geometry from the vertices, groups of
 * two cells) and 787 at Q5 (its rows 24 bytes apart: 8-byte loads); read word by word at
 * every point the count was 2901 and 1182 (docs/history.md, twelfth session). */
Test(perf, sumfact_table_rows_read_once_a_column)
{
  fe_sumfact_shape q7 = {.dim = 3, .nc = 1, .p1 = 8, .q1 = 8, .vertices = 1, .affine = 1,
                         .jacobian = 1, .phys_flops = 6};
  fe_sumfact_shape q5 = q7;
  q5.p1 = q5.q1 = 6;
  double w7 = fe_sumfact_shared_per_cell(&q7, 4, 2) / 128, w5 = fe_sumfact_shared_per_cell(&q5, 4, 2) / 128;
  cr_assert(w7 > 0.9 * 2038 && w7 < 1.1 * 2038, "Q7 single: %.1f wavefronts a cell (measured 2038)", w7);
  cr_assert(w5 > 0.85 * 787 && w5 < 1.15 * 787, "Q5 single: %.1f wavefronts a cell (measured 787)", w5);
  /* the parts add up to the whole */
  double part[3];
  double all = fe_sumfact_shared_phases(&q7, 4, 2, part);
  cr_assert_float_eq(part[0] + part[1] + part[2], all, 1e-9 * all);
}

/* Tables read through L1 (CUDA) are wavefronts on the shared-memory pipe and leave the
 * constant ceiling; a constant cache (OpenCL's __constant) serves the distinct words. The
 * factors' and gathers' wavefronts go on that pipe on every GPU. */
Test(perf, model_tables_through_l1)
{
  fe_calibration c = gpu_cal();
  c.constant_gops = 5;
  fe_report r;
  memset(&r, 0, sizeof r);
  r.bytes = 1e6;
  r.flops = 1e6;
  r.shared_bytes = 128e6;
  r.table_wavefronts = 3e6;
  r.l1_wavefronts = 1e6;
  r.constant = 4e7;
  r.launches = 1;
  fe_report l1 = r, cc = r;
  c.tables_l1 = 1;
  fe_perf_model(&c, 10, &l1);
  assert_close(l1.ceiling_seconds[FE_CEIL_SHARED],
               (1e6 + 3e6 + 1e6) * 128 / (c.shared_gbytes * 1e9));
  assert_close(l1.ceiling_seconds[FE_CEIL_CONSTANT], 0);
  cr_assert_str_eq(l1.bound, "shared");
  c.tables_l1 = 0;
  fe_perf_model(&c, 10, &cc);
  assert_close(cc.ceiling_seconds[FE_CEIL_SHARED], (1e6 + 1e6) * 128 / (c.shared_gbytes * 1e9));
  assert_close(cc.ceiling_seconds[FE_CEIL_CONSTANT], 4e7 / 5e9);
  cr_assert_str_eq(cc.bound, "constant");
}

/* The lines a warp's global load touches: what the L1 looks up. */
Test(perf, l1_lines_of_a_request)
{
  long long idx[32];
  for (int t = 0; t < 32; t++) idx[t] = t;
  cr_assert_eq(fe_l1_lines(idx, 32, 8), 2, "32 consecutive doubles: two lines");
  cr_assert_eq(fe_l1_lines(idx, 32, 4), 1, "32 consecutive floats: one line");
  for (int t = 0; t < 32; t++) idx[t] = (long long)(t % 27) * 81; /* a table's rows at 27 points */
  cr_assert_eq(fe_l1_lines(idx, 32, 8), 27, "rows 648 bytes apart: a line each");
  for (int t = 0; t < 32; t++) idx[t] = (long long)t * 81;
  cr_assert_eq(fe_l1_lines(idx, 32, 8), 32, "32 rows: 32 lines");
  cr_assert_eq(fe_l1_wavefronts(idx, 32, 8), 2, "but no two in one bank: a wavefront a half");
  for (int t = 0; t < 32; t++) idx[t] = t < 4 ? 3 : -1;
  cr_assert_eq(fe_l1_lines(idx, 32, 8), 1, "one word, idle items: one line");
}

/* The L1's lookups beside its data pipe: the requests at the requests' rate and their lines
 * at the lines' rate, the longer of the two; the shared ceiling is the longer of the lookups
 * and the wavefronts. Few warps keep long requests at the full rate (Little's law), and tables a
 * constant cache serves (tables_l1 = 0) are not looked up. */
Test(perf, model_l1_lookups)
{
  fe_calibration c = gpu_cal();
  c.tables_l1 = 1;
  c.l1_request_gops = 100; /* 10 ps a request */
  c.l1_line_gops = 500;    /* 2 ps a line: 5 lines cost a request's time */
  fe_report r;
  memset(&r, 0, sizeof r);
  r.bytes = 1e6;
  r.flops = 1e6;
  r.launches = 1;
  r.l1_wavefronts = 1e6; /* 128 MB of wavefronts */
  r.table_lines[27] = 1e7;
  r.l1_lines[1] = 1e7;
  fe_report t = r;
  fe_perf_model(&c, 10, &t); /* no occupancy: the rates as calibrated */
  /* requests and lines are two stages side by side: the mix takes the longer of all the
   * requests' time (2e7 at 100 G/s: 200 us) and all the lines' (28e7 at 500 G/s: 560 us), not
   * each request's longer one added up (640 us) */
  double tags = fmax(2e7 / 100e9, 28e7 / 500e9);
  assert_close(t.l1_tag_seconds, tags);
  assert_close(t.ceiling_seconds[FE_CEIL_SHARED], tags);
  cr_assert_eq(t.l1_requests, 2e7);
  cr_assert_eq(t.l1_line_total, 28e7);
  cr_assert_str_eq(t.bound, "shared");
  char text[4096];
  fe_report_format(&t, text, sizeof text);
  cr_assert(strstr(text, "shared 560 us (L1 lookups)"), "the report names the lookups:\n%s", text);
  /* the wavefronts longer: they bind */
  t = r;
  t.l1_wavefronts = 1e8;
  fe_perf_model(&c, 10, &t);
  assert_close(t.ceiling_seconds[FE_CEIL_SHARED], 1e8 * 128 / (c.shared_gbytes * 1e9));
  fe_report_format(&t, text, sizeof text);
  cr_assert(!strstr(text, "L1 lookups"), "the wavefronts bind, not the lookups:\n%s", text);
  /* tables in a constant cache: only the gathers' lookups */
  c.tables_l1 = 0;
  t = r;
  fe_perf_model(&c, 10, &t);
  assert_close(t.l1_tag_seconds, 1e7 / 100e9);
  c.tables_l1 = 1;
  /* with a shared curve and 4 warps: requests of 27 lines (several wavefronts' time each)
   * are at the rate the curve reaches with that many times the warps; one-line requests
   * alone are not */
  c.shared_gbytes = 12800; /* a wavefront in 10 ps: a one-line request's time */
  fe_report few = r, one = r;
  few.l1_lines[1] = 0;
  few.occupancy = 4.0 / 64;
  fe_perf_model(&c, 10, &few);
  one.table_lines[27] = 0;
  one.occupancy = 4.0 / 64;
  fe_perf_model(&c, 10, &one);
  assert_close(one.l1_tag_seconds, 1e7 / 100e9 / 0.15); /* the shared curve at 4 warps */
  double full = 1e7 * 27 / 500e9; /* 5.4 wavefronts' time a request: as 21.6 warps */
  cr_assert(few.l1_tag_seconds > full / 0.75 && few.l1_tag_seconds < full / 0.5,
            "27-line requests with 4 warps: %g s, the full rate's %g", few.l1_tag_seconds, full);
}

/* CG's sums on the devices of one machine (fe_perf_reduction_node): a launch queued for the
 * node's sum, and where entries are owned elsewhere their correction's launch and entries (at
 * the cached rate on a GPU: here l2_gbytes 400, an index and two words an entry) */
Test(perf, reduction_node)
{
  fe_calibration c = cpu_cal();
  c.gpu = 1;
  cr_assert_float_eq(fe_perf_reduction_node(&c, 0, 8), 5e-6, 1e-12);
  const double want = 10e-6 + 1000 * (4 + 16) / 400e9;
  cr_assert_float_eq(fe_perf_reduction_node(&c, 1000, 8), want, 1e-12, "%g against %g",
                     fe_perf_reduction_node(&c, 1000, 8), want);
  fe_link l = {0};
  cr_assert(fe_perf_reduction_node(&c, 1000, 8) < fe_perf_reduction(&c, &l, 1000, 8, 2),
            "no wait for the device, no read: less than the host's reduction");
}

/* A split space's report says what the model leaves out: an exchange on cold data (the cpu's
 * action past its last-level cache), ranks taking turns on a shared device, each where it
 * holds and not elsewhere. */
Test(perf, report_says_cold_and_sharing)
{
  fe_report r;
  memset(&r, 0, sizeof r);
  snprintf(r.action, sizeof r.action, "apply");
  r.seconds = 1e-3, r.predicted_seconds = 1e-3;
  r.exchange_messages = 1, r.exchange_bytes = 75272, r.exchange_seconds = 1e-4;
  r.exchange_predicted = 3e-5, r.exchange_link = 9e-6, r.exchange_device = 2.1e-5;
  char text[4096];
  fe_report_format(&r, text, sizeof text);
  cr_assert(!strstr(text, "warm data") && !strstr(text, "sharing"), "nothing to say:\n%s", text);
  r.exchange_cold = 1;
  r.device_sharers = 3, r.device_turns = 1, r.device_threads = 1, r.device_cores = 2;
  fe_report_format(&r, text, sizeof text);
  cr_assert(strstr(text, "predicted 30 us (link 9 us, device 21 us); for warm data"), "cold:\n%s",
            text);
  cr_assert(strstr(text, "sharing    3 ranks of 1 thread on this machine's 2 cores take turns"),
            "a CPU's ranks past its cores:\n%s", text);
  r.exchange_host = 1, r.exchange_cold = 0.42; /* the link's host exchange, its share cold */
  fe_report_format(&r, text, sizeof text);
  cr_assert(strstr(text, "device 21 us), the link's host exchange 42% cold") &&
                !strstr(text, "warm data"), "the host exchange:\n%s", text);
  r.exchange_cold = 0.001; /* a small action's: warm, not "0% cold" */
  fe_report_format(&r, text, sizeof text);
  cr_assert(strstr(text, "the link's host exchange warm (its data in the cache") &&
                !strstr(text, "% cold"), "the host exchange, warm:\n%s", text);
  r.exchange_host = 0, r.exchange_cold = 0.5; /* the terms, the data mostly kept */
  fe_report_format(&r, text, sizeof text);
  cr_assert(!strstr(text, "warm data") && !strstr(text, "% cold"), "half cold, no host "
            "exchange: nothing said:\n%s", text);
  r.exchange_cold = 1;
  r.device_cores = 0, r.device_sharers = 2;
  fe_report_format(&r, text, sizeof text);
  cr_assert(strstr(text, "sharing    2 ranks of this machine on this device take turns on it"),
            "a GPU's ranks:\n%s", text);
}
