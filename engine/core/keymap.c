/* felab keymap: open addressing with linear probing over a power-of-two table. */
#include "engine/core/keymap.h"

#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"

/* FNV-1a over the key's ints, finished with a multiplicative mix. */
static size_t key_hash(const int *k, int klen)
{
  unsigned long long h = 1469598103934665603ull;
  for (int i = 0; i < klen; i++) {
    h ^= (unsigned)k[i];
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (size_t)(h ^ (h >> 32));
}

static int table_alloc(fe_keymap *h, size_t cap)
{
  h->cap = cap;
  h->n = 0;
  h->keys = malloc(sizeof(int) * cap * (size_t)h->klen);
  h->vals = malloc(sizeof(int) * cap);
  if (!h->keys || !h->vals) {
    free(h->keys);
    free(h->vals);
    h->keys = h->vals = NULL;
    FE_ERROR(FE_ERR_MEM, "out of host memory for a table of %zu keys", cap);
  }
  memset(h->vals, 0xff, sizeof(int) * cap);
  return 0;
}

int fe_keymap_init_local(fe_keymap *h, int klen, size_t expect, int first_max)
{
  FE_CHECK(fe_keymap_init(h, klen, expect));
  h->first_max = first_max > 0 ? first_max : 0;
  return 0;
}

int fe_keymap_init(fe_keymap *h, int klen, size_t expect)
{
  memset(h, 0, sizeof *h);
  h->klen = klen;
  size_t cap = 64;
  while (cap < 2 * expect) cap *= 2;
  return table_alloc(h, cap);
}

void fe_keymap_free(fe_keymap *h)
{
  if (!h) return;
  free(h->keys);
  free(h->vals);
  memset(h, 0, sizeof *h);
}

/* Where a key's probe starts: a hash, or for local keys the position of the first id in
 * the table plus a hash of the rest within a few slots. */
static size_t home(const fe_keymap *h, const int *key)
{
  if (h->first_max <= 0 || key[0] < 0 || key[0] >= h->first_max)
    return key_hash(key, h->klen) & (h->cap - 1);
  size_t base = (size_t)((double)key[0] / h->first_max * (double)h->cap);
  return (base + (key_hash(key + 1, h->klen - 1) & 7)) & (h->cap - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const fe_keymap *h, const int *key)
{
  size_t mask = h->cap - 1, i = home(h, key);
  for (;; i = (i + 1) & mask) {
    if (h->vals[i] < 0) return i;
    const int *k = h->keys + i * h->klen;
    int same = 1;
    for (int j = 0; j < h->klen && same; j++) same = k[j] == key[j];
    if (same) return i;
  }
}

int fe_keymap_find(const fe_keymap *h, const int *key)
{
  return h->vals[probe(h, key)];
}

/* Double the table and reinsert every key. */
static int grow(fe_keymap *h)
{
  fe_keymap old = *h;
  FE_CHECK(table_alloc(h, old.cap * 2));
  h->first_max = old.first_max;
  for (size_t i = 0; i < old.cap; i++)
    if (old.vals[i] >= 0) {
      size_t j = probe(h, old.keys + i * old.klen);
      memcpy(h->keys + j * h->klen, old.keys + i * old.klen, sizeof(int) * h->klen);
      h->vals[j] = old.vals[i];
      h->n++;
    }
  free(old.keys);
  free(old.vals);
  return 0;
}

int fe_keymap_put(fe_keymap *h, const int *key, int val, int *found, int *inserted)
{
  size_t i = probe(h, key);
  if (h->vals[i] >= 0) {
    *found = h->vals[i];
    *inserted = 0;
    return 0;
  }
  if (2 * (h->n + 1) > h->cap) {
    FE_CHECK(grow(h));
    i = probe(h, key);
  }
  memcpy(h->keys + i * h->klen, key, sizeof(int) * h->klen);
  h->vals[i] = val;
  h->n++;
  *found = val;
  *inserted = 1;
  return 0;
}
