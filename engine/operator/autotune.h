/* felab autotuning: the default strategy by measurement where the model may not tell. Each
 * candidate (the strategies that apply, within a factor of the model's fastest) runs the
 * Jacobian action a few times; the fastest becomes the default, and the choice is kept in the
 * cache per backend, device and operator shape (autotune/<backend>-<device>.txt), so that a
 * later session on the same shape takes it at once. */
#ifndef FE_AUTOTUNE_H
#define FE_AUTOTUNE_H

#include <stddef.h>

#include "backends/backend.h"

struct fe_operator;

/* Whether to measure: asked (FE_AUTOTUNE_ON, _OFF; _AGAIN: measured now, the cached choice
 * passed over and replaced) or, by default, where the operator has
 * FE_AUTOTUNE_DOFS dofs or more (a solve's applies there repay a few trial applies of each
 * candidate, and a small operator's times are too short to tell apart); a space split over
 * the ranks by its whole dofs, so that every rank measures or none (each trial exchanges).
 * There the ranks decide together: rank 0's cached choice, else trials of every rank's
 * candidates, each timed by its slowest rank (engine/operator/operator-choose.c). */
enum { FE_AUTOTUNE_AUTO, FE_AUTOTUNE_ON, FE_AUTOTUNE_OFF, FE_AUTOTUNE_AGAIN };
#define FE_AUTOTUNE_DOFS 200000
int fe_autotune_wanted(const struct fe_operator *A, int asked);

/* The operator's shape as the cache names it: space, cell, components, size (to a power of
 * two), physics, the mesh's geometry class, precision and the apply's rule (its family and
 * points: GLL's 64 points are not Gauss's); a split space's whole size and its ranks. */
void fe_autotune_key(const struct fe_operator *A, const fe_backend *be, fe_precision prec,
                     char *key, size_t n);
/* The strategy stored for key (1, with the times it was chosen by), or 0. */
int fe_autotune_lookup(const fe_backend *be, const char *key, char *strategy, size_t ns,
                       char *times, size_t nt);
/* Store (replace) the choice for key; a cache that cannot be written only costs a later
 * session the trials again. */
int fe_autotune_store(const fe_backend *be, const char *key, const char *strategy,
                      const char *times);

#endif
