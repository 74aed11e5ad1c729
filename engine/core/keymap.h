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
  int first_max; /* > 0: keys start with an id in 0..first_max-1 that orders them locally */
} fe_keymap;

/* An empty map for keys of klen ints, sized for about `expect` keys. */
int fe_keymap_init(fe_keymap *h, int klen, size_t expect);
/* The same, for keys whose first int is an id below first_max that is local (neighbouring
 * keys have close first ids, e.g. vertex ids of a well-ordered mesh): keys are placed in
 * order of that id, so lookups of neighbouring keys touch neighbouring memory. */
int fe_keymap_init_local(fe_keymap *h, int klen, size_t expect, int first_max);
void fe_keymap_free(fe_keymap *h);
/* The value of key, or -1. */
int fe_keymap_find(const fe_keymap *h, const int *key);
/* The value of key if present (*inserted = 0); else store val (>= 0) under it (*inserted = 1). */
int fe_keymap_put(fe_keymap *h, const int *key, int val, int *found, int *inserted);

#endif
