/* felab matrices, the element matrices' own data: the kernels their methods compile (matrix.c's
 * quadrature variants, tensor.c's contraction), kept with the operator they integrate
 * (fe_operator's elemat_cache) rather than on the realization whose geometry they read, so
 * that a kernel serves every realization whose geometry has the same form and outlives the
 * one it was first made for. A kernel is found by its key (elemat_key: what its source
 * depends on beside the operator); past ELEMAT_CACHE_MAX kernels the least recently used is
 * freed. The operator releases the whole cache when its rules change (every source changes
 * with them) and when it is freed. */
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/matrix/matrix-private.h"

/* Kernels kept per operator: every variant in both precisions on one backend, and a few of
 * another block. */
#define ELEMAT_CACHE_MAX 16

typedef struct elemat_entry {
  elemat_key key;
  fe_module *mod;
  fe_kernel *kernel;
} elemat_entry;

/* An operator's kernels, the most recently used last; the last assembled matrix (named, not
 * held: its release clears the name) and the named constants it was made with. */
typedef struct elemat_cache {
  int n;
  elemat_entry e[ELEMAT_CACHE_MAX];
  fe_csr *assembled;
  double *consts;
} elemat_cache;

static void entry_free(elemat_entry *e)
{
  if (e->mod) e->key.be->ops->module_free(e->key.be->impl, e->mod);
}

static void elemat_cache_free(void *p)
{
  elemat_cache *c = p;
  for (int i = 0; i < c->n; i++) entry_free(&c->e[i]);
  if (c->assembled) c->assembled->kept = NULL;
  free(c->consts);
  free(c);
}

static int key_equal(const elemat_key *a, const elemat_key *b)
{
  return a->method == b->method && a->variant == b->variant && a->be == b->be &&
         a->prec == b->prec && a->block == b->block && a->colored == b->colored &&
         a->geo_shared == b->geo_shared && a->shape == b->shape;
}

elemat_key elemat_key_of(const fe_realization *r, const fe_elemat_method *m, int v, int block,
                         int shape)
{
  return (elemat_key){.method = m, .variant = v, .be = r->be, .prec = r->prec, .block = block,
                      .colored = r->colored, .geo_shared = r->geo_shared, .shape = shape};
}

/* A's cache, made on first use and attached to A (its release: elemat_cache_free). */
static int cache_of(fe_operator *A, elemat_cache **c)
{
  if (!A->elemat_cache) {
    FE_CALLOC(*c, 1, "element matrices' kernels");
    A->elemat_cache = *c;
    A->elemat_cache_free = elemat_cache_free;
  }
  *c = A->elemat_cache;
  return 0;
}

int elemat_kernel(fe_operator *A, const elemat_key *key, int (*write)(const void *ctx, char **src),
                  const void *ctx, const char *entry, fe_kernel **k, double *compile_s)
{
  elemat_cache *c;
  FE_CHECK(cache_of(A, &c));
  *compile_s = 0;
  for (int i = 0; i < c->n; i++)
    if (key_equal(&c->e[i].key, key)) { /* found: moved last, the most recently used */
      elemat_entry e = c->e[i];
      memmove(&c->e[i], &c->e[i + 1], sizeof c->e[0] * (size_t)(c->n - 1 - i));
      c->e[c->n - 1] = e;
      *k = e.kernel;
      return 0;
    }
  elemat_entry e = {.key = *key};
  char *src = NULL;
  int cached = 0, rc = write(ctx, &src);
  if (!rc) rc = fe_compile(key->be, src, &e.mod, compile_s, &cached);
  free(src);
  if (!rc) rc = key->be->ops->kernel(key->be->impl, e.mod, entry, &e.kernel);
  if (rc) {
    entry_free(&e);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (c->n == ELEMAT_CACHE_MAX) { /* forget the least recently used */
    entry_free(&c->e[0]);
    memmove(&c->e[0], &c->e[1], sizeof c->e[0] * (ELEMAT_CACHE_MAX - 1));
    c->n--;
  }
  c->e[c->n++] = e;
  *k = e.kernel;
  return 0;
}

/* The physics' Jacobian is the same at every state (no u in it). */
static int jacobian_linear(const fe_operator *A)
{
  fe_kernel_spec s = {.V = A->V, .pde = A->pde, .quad = &A->quad[FE_ACTION_APPLY],
                      .action = FE_ACTION_APPLY, .prec = FE_DOUBLE};
  return !fe_codegen_needs(&s).need_u;
}

void elemat_keep_assembled(fe_operator *A, fe_csr *M)
{
  elemat_cache *c;
  if (!jacobian_linear(A) || cache_of(A, &c)) return;
  int nk = A->pde->nconst;
  double *k = malloc(sizeof(double) * ((size_t)nk + 1));
  if (!k) return; /* not kept: a later csr assembles again */
  if (nk) memcpy(k, A->pde->const_values, sizeof(double) * (size_t)nk);
  if (c->assembled) c->assembled->kept = NULL;
  free(c->consts);
  c->assembled = M;
  c->consts = k;
  M->kept = &c->assembled;
}

fe_csr *fe_operator_assembled_find(fe_operator *A, const fe_backend *be, fe_precision prec,
                                   const fe_matrix_opts *mo)
{
  elemat_cache *c = A->elemat_cache;
  fe_csr *M = c ? c->assembled : NULL;
  if (!M || M->be != be || M->prec != prec || !jacobian_linear(A)) return NULL;
  fe_matrix_opts lay = *mo;
  fe_csr_layout(&be->info, &lay);
  int lanes = mo->lanes > 0 ? mo->lanes : be->info.is_gpu ? 4 : 1;
  if (M->format != lay.format || M->lanes != lanes ||
      (lay.format == FE_FORMAT_SELL &&
       (M->chunk != lay.chunk || M->sigma != lay.sigma || M->deltas != (lay.deltas == FE_SELL_ON)
        || M->drop_zeros != (lay.drop_zeros == FE_SELL_ON))))
    return NULL;
  for (int i = 0; i < A->pde->nconst; i++)
    if (A->pde->const_values[i] != c->consts[i]) return NULL;
  M->refs++;
  return M;
}
