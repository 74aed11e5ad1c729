/* felab sorting (engine/sort.h): least-significant-digit radix sort, 11 bits a pass, each pass
 * a counting sort; passes over digits that every key shares are skipped. Small arrays go by
 * insertion. */
#include "engine/sort.h"

#include <string.h>

#define DIGIT 11
#define BUCKETS (1 << DIGIT)

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
  size_t count[BUCKETS];
  for (int shift = 0; shift < 64; shift += DIGIT) {
    if (!((differ >> shift) & (BUCKETS - 1))) continue; /* every key has this digit */
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
  if (src != key) {
    memcpy(key, src, n * sizeof *key);
    if (val) memcpy(val, vsrc, n * sizeof *val);
  }
}
