/* felab sorting (engine/sort.h): least-significant-digit radix sort, 11 bits a pass, each pass
 * a counting sort; passes over digits that every key shares are skipped. Small arrays go by
 * insertion; large ones count and scatter on every thread, each over its own slice, its
 * slice's keys placed after the earlier slices' keys of the same digit (so still stable). */
#include "engine/sort.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define DIGIT 11
#define BUCKETS (1 << DIGIT)
#define PARALLEL_FROM ((size_t)1 << 18)

static void insertion(uint64_t *key, int *val, size_t n)
{
  for (size_t i = 1; i < n; i++) {
    uint64_t k = key[i];
    int v = val ? val[i] : 0;
    size_t j = i;
    for (; j > 0 && key[j - 1] > k; j--) {
      key[j] = key[j - 1];
      if (val) val[j] = val[j - 1];
    }
    key[j] = k;
    if (val) val[j] = v;
  }
}

void fe_sort_u64(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val)
{
  if (n < 64) {
    insertion(key, val, n);
    return;
  }
  uint64_t all_or = 0, all_and = ~(uint64_t)0;
  for (size_t i = 0; i < n; i++) all_or |= key[i], all_and &= key[i];
  uint64_t differ = all_or ^ all_and;
  uint64_t *src = key, *dst = tmp_key;
  int *vsrc = val, *vdst = tmp_val;
  int nt = n >= PARALLEL_FROM ? omp_get_max_threads() : 1;
  size_t(*counts)[BUCKETS] = nt > 1 ? malloc(sizeof *counts * (size_t)nt) : NULL;
  size_t count[BUCKETS];
  for (int shift = 0; shift < 64; shift += DIGIT) {
    if (!((differ >> shift) & (BUCKETS - 1))) continue; /* every key has this digit */
    if (counts) {
#pragma omp parallel num_threads(nt)
      {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)team, hi = n * (size_t)(t + 1) / (size_t)team;
        size_t *c = counts[t];
        memset(c, 0, sizeof *counts);
        for (size_t i = lo; i < hi; i++) c[(src[i] >> shift) & (BUCKETS - 1)]++;
#pragma omp barrier
#pragma omp single
        {
          size_t sum = 0;
          for (int b = 0; b < BUCKETS; b++)
            for (int u = 0; u < team; u++) {
              size_t k = counts[u][b];
              counts[u][b] = sum;
              sum += k;
            }
        }
        for (size_t i = lo; i < hi; i++) {
          size_t at = c[(src[i] >> shift) & (BUCKETS - 1)]++;
          dst[at] = src[i];
          if (val) vdst[at] = vsrc[i];
        }
      }
      uint64_t *t = src;
      src = dst, dst = t;
      int *tv = vsrc;
      vsrc = vdst, vdst = tv;
      continue;
    }
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & (BUCKETS - 1)]++;
    size_t sum = 0;
    for (int b = 0; b < BUCKETS; b++) {
      size_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) {
      size_t at = count[(src[i] >> shift) & (BUCKETS - 1)]++;
      dst[at] = src[i];
      if (val) vdst[at] = vsrc[i];
    }
    uint64_t *t = src;
    src = dst, dst = t;
    int *tv = vsrc;
    vsrc = vdst, vdst = tv;
  }
  free(counts);
  if (src != key) {
    memcpy(key, src, n * sizeof *key);
    if (val) memcpy(val, vsrc, n * sizeof *val);
  }
}
