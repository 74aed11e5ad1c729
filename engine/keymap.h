/* felab keymap: a hash map from short fixed-length integer keys to integers (open
 * addressing, linear probing, grows at half load). Spaces use it to name edge and face nodes
 * by their vertices, boundary sets to find the sub-entities of tagged facets. */
#ifndef FE_KEYMAP_H
#define FE_KEYMAP_H

#include <stddef.h>

typedef struct fe_keymap {
  int klen;     /* ints per key */
  size_t cap;   /* slots, a power of two */
  size_t n;     /* keys stored */
  int *keys;    /* cap x klen */
  int *vals;    /* cap values; -1 marks an empty slot (values must be >= 0) */
} fe_keymap;

/* An empty map for keys of klen ints, sized for about `expect` keys. */
int fe_keymap_init(fe_keymap *h, int klen, size_t expect);
void fe_keymap_free(fe_keymap *h);
/* The value of key, or -1. */
int fe_keymap_find(const fe_keymap *h, const int *key);
/* The value of key if present (*inserted = 0); else store val (>= 0) under it (*inserted = 1). */
int fe_keymap_put(fe_keymap *h, const int *key, int val, int *found, int *inserted);

#endif
