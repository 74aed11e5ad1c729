/* felab autotuning's cache (engine/operator/autotune.h); the trials themselves run in
 * engine/operator/operator-choose.c, beside the choice of a strategy. */
#include "engine/operator/autotune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/operator/strategy.h"
#include "engine/parallel/dist.h"

/* The dofs that decide: a split space's whole ones (the same on every rank, which must
 * all autotune or none: each trial's apply exchanges with the neighbours). */
static long long decisive_dofs(const fe_operator *A)
{
  const fe_dist *d = A->V->dist;
  return d && d->size > 1 ? d->ndofs : A->V->ndofs;
}

int fe_autotune_wanted(const fe_operator *A, int asked)
{
  if (asked == FE_AUTOTUNE_ON || asked == FE_AUTOTUNE_AGAIN) return 1;
  if (asked == FE_AUTOTUNE_OFF) return 0;
  return decisive_dofs(A) >= FE_AUTOTUNE_DOFS;
}

void fe_autotune_key(const fe_operator *A, const fe_backend *be, fe_precision prec, char *key,
                     size_t n)
{
  const fe_space *V = A->V;
  const fe_physics *p = A->pde;
  const char *geo = V->curved ? "curved"
                    : fe_geometry_shared(A, FE_GEOMETRY_AUTO) ? "congruent"
                    : A->geo_affine ? "affine" : "general";
  /* the physics by name, what its Jacobian reads and costs (a user's physics.new has a name
   * of its own only by its flops) */
  const fe_quadrature *Q = &A->quad[FE_ACTION_APPLY];
  const fe_dist *d = V->dist; /* split: the whole space's dofs over the ranks */
  int len = snprintf(key, n, "%s-%s-c%d-2^%d-%s-x%d-nl%d-df%.0f-%s-%s-%s%d-%s", V->name,
                     fe_cell_name(V->elem.cell), V->ncomp,
                     (int)lround(log2((double)decisive_dofs(A))), p->name, p->uses_x,
                     p->nonlinear, p->flops_df, geo, fe_precision_name(prec), Q->name,
                     Q->npoints, be->name);
  if (d && d->size > 1 && len > 0 && (size_t)len < n)
    snprintf(key + len, n - (size_t)len, "-ranks%d", d->size);
  for (char *c = key; *c; c++)
    if (*c == ' ') *c = '_';
}

static int autotune_path(const fe_backend *be, char *path, size_t n)
{
  char dir[4096];
  FE_CHECK(fe_cache_dir("autotune", dir, sizeof dir));
  unsigned long long h = fe_device_hash(be);
  snprintf(path, n, "%s/%s-v1-%016llx.txt", dir, be->name, h); /* v1: candidates within 10x */
  return 0;
}

int fe_autotune_lookup(const fe_backend *be, const char *key, char *strategy, size_t ns,
                       char *times, size_t nt)
{
  char path[4200], line[1024];
  if (autotune_path(be, path, sizeof path)) {
    fe_error_clear();
    return 0;
  }
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int found = 0;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f)) { /* "key strategy times...": the last line wins */
    if (strncmp(line, key, kl) || line[kl] != ' ') continue;
    char st[64];
    int used = 0;
    if (sscanf(line + kl + 1, "%63s %n", st, &used) != 1) continue;
    snprintf(strategy, ns, "%s", st);
    snprintf(times, nt, "%.*s", (int)strcspn(line + kl + 1 + used, "\n"), line + kl + 1 + used);
    found = 1;
  }
  fclose(f);
  return found;
}

int fe_autotune_store(const fe_backend *be, const char *key, const char *strategy,
                      const char *times)
{
  char path[4200];
  if (autotune_path(be, path, sizeof path)) {
    fe_error_clear();
    return 0;
  }
  FILE *f = fopen(path, "a"); /* one line appended: later lines win (fe_autotune_lookup) */
  if (!f) return 0;
  fprintf(f, "%s %s %s\n", key, strategy, times);
  fclose(f);
  return 0;
}
