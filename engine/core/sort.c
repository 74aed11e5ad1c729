/* felab sorting (engine/core/sort.h): least-significant-digit radix sort, each pass a counting sort
 * of at most 11 bits; the passes cover only the bits that differ between keys, split evenly.
 * Small arrays go by insertion; large ones are split by their top digit on every thread, then
 * each part (a cache's worth) is sorted on one thread. */
#include "engine/core/sort.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define DIGIT 11 /* the widest digit */
#define BUCKETS (1 << DIGIT)
#define PARALLEL_FROM ((size_t)1 << 18)

static void insertion(uint64_t *key, int *val, size_t n, int from_bit)
{
  for (size_t i = 1; i < n; i++) {
    uint64_t k = key[i];
    int v = val ? val[i] : 0;
    size_t j = i;
    for (; j > 0 && key[j - 1] >> from_bit > k >> from_bit; j--) {
      key[j] = key[j - 1];
      if (val) val[j] = val[j - 1];
    }
    key[j] = k;
    if (val) val[j] = v;
  }
}

static void count_digits(const uint64_t *key, size_t lo, size_t hi, int shift, uint64_t mask,
                         size_t *count)
{
  memset(count, 0, sizeof(size_t) * (mask + 1));
  for (size_t i = lo; i < hi; i++) count[(key[i] >> shift) & mask]++;
}

/* Entries [lo, hi) to their places: count[d] holds where the next entry of digit d goes. */
static void scatter(const uint64_t *key, const int *val, uint64_t *to_key, int *to_val, size_t lo,
                    size_t hi, int shift, uint64_t mask, size_t *count)
{
  for (size_t i = lo; i < hi; i++) {
    size_t at = count[(key[i] >> shift) & mask]++;
    to_key[at] = key[i];
    if (val) to_val[at] = val[i];
  }
}

/* Sort key[0..n) by bits [lo_bit, hi_bit) on this thread, the passes going back and forth
 * between key and tmp; returns 1 when the result lies in tmp, 0 when in key. */
static int sort_passes(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val,
                       int lo_bit, int hi_bit)
{
  uint64_t all_or = 0, all_and = ~(uint64_t)0;
  for (size_t i = 0; i < n; i++) all_or |= key[i], all_and &= key[i];
  uint64_t differ = (all_or ^ all_and) >> lo_bit << lo_bit;
  if (hi_bit < 64) differ &= ((uint64_t)1 << hi_bit) - 1;
  if (!differ) return 0;
  lo_bit = __builtin_ctzll(differ), hi_bit = 64 - __builtin_clzll(differ);
  int passes = (hi_bit - lo_bit + DIGIT - 1) / DIGIT;
  int digit = (hi_bit - lo_bit + passes - 1) / passes;
  uint64_t mask = ((uint64_t)1 << digit) - 1;
  uint64_t *src = key, *dst = tmp_key;
  int *vsrc = val, *vdst = tmp_val;
  size_t count[BUCKETS];
  for (int shift = lo_bit; shift < hi_bit; shift += digit) {
    count_digits(src, 0, n, shift, mask, count);
    size_t sum = 0;
    for (uint64_t b = 0; b <= mask; b++) {
      size_t k = count[b];
      count[b] = sum;
      sum += k;
    }
    scatter(src, vsrc, dst, vdst, 0, n, shift, mask, count);
    uint64_t *t = src;
    src = dst, dst = t;
    int *tv = vsrc;
    vsrc = vdst, vdst = tv;
  }
  return src != key;
}

/* The same, the result in key. */
static void sort_serial(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val,
                        int lo_bit, int hi_bit)
{
  if (!sort_passes(key, val, n, tmp_key, tmp_val, lo_bit, hi_bit)) return;
  memcpy(key, tmp_key, n * sizeof *key);
  if (val) memcpy(val, tmp_val, n * sizeof *val);
}

void fe_sort_u64(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val, int from_bit)
{
  if (n < 64) {
    insertion(key, val, n, from_bit);
    return;
  }
  int nt = n >= PARALLEL_FROM ? omp_get_max_threads() : 1;
  uint64_t all_or = 0, all_and = ~(uint64_t)0;
#pragma omp parallel for schedule(static) reduction(| : all_or) reduction(& : all_and) if (nt > 1)
  for (size_t i = 0; i < n; i++) all_or |= key[i], all_and &= key[i];
  uint64_t differ = (all_or ^ all_and) >> from_bit << from_bit;
  if (!differ) return;
  int lo_bit = __builtin_ctzll(differ), hi_bit = 64 - __builtin_clzll(differ);
  size_t(*counts)[BUCKETS] = nt > 1 && hi_bit - lo_bit > DIGIT
                                 ? malloc(sizeof *counts * (size_t)nt + sizeof(size_t) * (BUCKETS + 1))
                                 : NULL;
  if (!counts) { /* small, one digit, or no memory for the counts: on this thread */
    sort_serial(key, val, n, tmp_key, tmp_val, lo_bit, hi_bit);
    return;
  }
  /* The top digit on every thread into tmp, each thread's slice after the earlier slices'
   * keys of the same digit (stable); then each bucket, small enough for the cache, sorted by
   * the bits below on one thread, ending in key. */
  int shift = hi_bit - DIGIT;
  const uint64_t mask = BUCKETS - 1;
  size_t *start = (size_t *)(counts + nt);
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), team = omp_get_num_threads();
    size_t lo = n * (size_t)t / (size_t)team, hi = n * (size_t)(t + 1) / (size_t)team;
    count_digits(key, lo, hi, shift, mask, counts[t]);
#pragma omp barrier
#pragma omp single
    {
      size_t sum = 0;
      for (uint64_t b = 0; b <= mask; b++) {
        start[b] = sum;
        for (int u = 0; u < team; u++) {
          size_t k = counts[u][b];
          counts[u][b] = sum;
          sum += k;
        }
      }
      start[BUCKETS] = sum;
    }
    scatter(key, val, tmp_key, tmp_val, lo, hi, shift, mask, counts[t]);
#pragma omp barrier
#pragma omp for schedule(dynamic, 8)
    for (int b = 0; b < BUCKETS; b++) {
      size_t at = start[b], m = start[b + 1] - at;
      int *tv = tmp_val ? tmp_val + at : NULL, *v = val ? val + at : NULL;
      if (!sort_passes(tmp_key + at, tv, m, key + at, v, lo_bit, shift)) {
        memcpy(key + at, tmp_key + at, m * sizeof *key); /* in the cache still */
        if (val) memcpy(v, tv, m * sizeof *val);
      }
    }
  }
  free(counts);
}
