/* felab sorting (engine/sort.h): least-significant-digit radix sort, each pass a counting sort
 * of at most 11 bits; the passes cover only the bits that differ between keys, split evenly. Small arrays go by
 * insertion; large ones count and scatter on every thread, each over its own slice, its
 * slice's keys placed after the earlier slices' keys of the same digit (so still stable). */
#include "engine/sort.h"

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

void fe_sort_u64(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val, int from_bit)
{
  if (n < 64) {
    insertion(key, val, n, from_bit);
    return;
  }
  uint64_t all_or = 0, all_and = ~(uint64_t)0;
  for (size_t i = 0; i < n; i++) all_or |= key[i], all_and &= key[i];
  uint64_t differ = (all_or ^ all_and) >> from_bit << from_bit;
  if (!differ) return;
  int lo_bit = __builtin_ctzll(differ), hi_bit = 64 - __builtin_clzll(differ);
  int passes = (hi_bit - lo_bit + DIGIT - 1) / DIGIT;
  int digit = (hi_bit - lo_bit + passes - 1) / passes;
  uint64_t mask = ((uint64_t)1 << digit) - 1;
  uint64_t *src = key, *dst = tmp_key;
  int *vsrc = val, *vdst = tmp_val;
  int nt = n >= PARALLEL_FROM ? omp_get_max_threads() : 1;
  size_t(*counts)[BUCKETS] = nt > 1 ? malloc(sizeof *counts * (size_t)nt) : NULL;
  size_t count[BUCKETS];
  for (int shift = lo_bit; shift < hi_bit; shift += digit) {
    if (counts) {
#pragma omp parallel num_threads(nt)
      {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)team, hi = n * (size_t)(t + 1) / (size_t)team;
        count_digits(src, lo, hi, shift, mask, counts[t]);
#pragma omp barrier
#pragma omp single
        {
          size_t sum = 0;
          for (uint64_t b = 0; b <= mask; b++)
            for (int u = 0; u < team; u++) {
              size_t k = counts[u][b];
              counts[u][b] = sum;
              sum += k;
            }
        }
        scatter(src, vsrc, dst, vdst, lo, hi, shift, mask, counts[t]);
      }
    } else {
      count_digits(src, 0, n, shift, mask, count);
      size_t sum = 0;
      for (uint64_t b = 0; b <= mask; b++) {
        size_t k = count[b];
        count[b] = sum;
        sum += k;
      }
      scatter(src, vsrc, dst, vdst, 0, n, shift, mask, count);
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
