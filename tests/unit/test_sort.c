/* The radix sort of the setup paths (engine/core/sort.c): ascending, stable, values moved along,
 * on the serial path, the parallel one and the small one, against qsort. */
#include <criterion/criterion.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/core/sort.h"

typedef struct pair {
  uint64_t key;
  int val;
} pair;

static int pair_cmp(const void *a, const void *b)
{
  const pair *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->val > y->val) - (x->val < y->val); /* stable: by original position */
}

static void check_sort(size_t n, uint64_t mask, int threads, int from_bit)
{
  uint64_t *key = malloc(sizeof *key * 2 * (n + 1));
  int *val = malloc(sizeof *val * 2 * (n + 1));
  pair *ref = malloc(sizeof *ref * (n + 1));
  cr_assert(key && val && ref);
  uint64_t s = 88172645463325252ULL;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift */
    key[i] = s & mask;
    val[i] = (int)i;
    ref[i] = (pair){key[i] >> from_bit, (int)i};
  }
  qsort(ref, n, sizeof *ref, pair_cmp);
  omp_set_num_threads(threads);
  fe_sort_u64(key, val, n, key + n + 1, val + n + 1, from_bit);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(key[i] >> from_bit, ref[i].key, "n %zu: key %zu is %llu, not %llu", n, i,
                 (unsigned long long)key[i], (unsigned long long)ref[i].key);
    cr_assert_eq(val[i], ref[i].val, "n %zu: value %zu is %d, not %d (stability)", n, i, val[i],
                 ref[i].val);
  }
  free(key), free(val), free(ref);
}

Test(sort, small_serial_and_parallel_against_qsort)
{
  int before = omp_get_max_threads();
  check_sort(10, ~(uint64_t)0, 1, 0);
  check_sort(5000, 0xffff, 1, 0);                /* many equal keys: stability */
  check_sort(5000, 0xffff00000000ULL, 1, 0);     /* only high digits differ */
  check_sort(5000, ~(uint64_t)0, 1, 32);         /* by the upper half: the lower rides along */
  check_sort(40, 0xff000000ffULL, 1, 32);        /* insertion, by the upper half */
  check_sort((size_t)1 << 19, 0x3ffffffffULL, 1, 0);
  check_sort((size_t)1 << 19, 0x3ffffffffULL, 3, 0); /* the threaded scatter */
  check_sort((size_t)1 << 19, 0xff, 4, 0);
  check_sort((size_t)1 << 19, 0x3fffffff00000000ULL | 0xffffffffULL, 4, 32);
  omp_set_num_threads(before);
}
