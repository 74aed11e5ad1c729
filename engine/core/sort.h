/* felab sorting: stable radix sorts of integer keys for the setup paths (cell orders, patch
 * node lists), where qsort's comparison calls cost more than the work they order. */
#ifndef FE_SORT_H
#define FE_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sort key[0..n) ascending by their bits from from_bit up, moving val[] along (val may be
 * NULL); stable, so keys equal in those bits keep their order (a payload packed into the low
 * bits rides along unsorted). tmp_key/tmp_val: scratch of n entries each (tmp_val NULL when
 * val is). Only the bits that differ between keys cost passes. */
void fe_sort_u64(uint64_t *key, int *val, size_t n, uint64_t *tmp_key, int *tmp_val,
                 int from_bit);

#endif
