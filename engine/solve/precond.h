/* felab preconditioners: z = M^-1 r for the Krylov solvers.
 *
 * Preconditioners are a layer, as strategies and backends are: each one is a unit in
 * engine/precond/ (its setup, its application, its counts) behind one table (engine/solve/precond.c).
 * A preconditioner is made for an operator at a state (J taken at `at`) on the backend and
 * precision of an action; it is set up once and applied many times, and a solve given one
 * made beforehand reuses it (time stepping: one M/dt + K, one preconditioner for every step).
 *
 * Units: none (M = I), jacobi (M = diag J), chebyshev (Jacobi-Chebyshev polynomial, bounds
 * from Lanczos), amg (hypre BoomerAMG on the assembled matrix, on the host), twoscale
 * (Remacle et al.: overlapping Schwarz by fast diagonalization + coarse Q1 problem by AMG). */
#ifndef FE_PRECOND_H
#define FE_PRECOND_H

#include "engine/operator/operator.h"
#include "engine/perf/perf.h"

enum { FE_CYCLE_DEVICE, FE_CYCLE_HOST };
enum { FE_VALUES_SINGLE, FE_VALUES_DOUBLE };

typedef struct fe_precond_opts {
  const char *name; /* the unit: "none", "jacobi", "chebyshev", "amg", "twoscale" */
  int degree;       /* chebyshev: polynomial degree (0: the unit's default) */
  int lanczos;      /* chebyshev: Lanczos (CG) steps for the eigenvalue bounds (0: default) */
  double ratio;     /* chebyshev: lower bound = ratio * upper (0: Lanczos' own lower bound) */
  const char *parts;/* twoscale: "both" (NULL), "fine", "coarse" */
  int cycles;       /* amg (and twoscale's coarse solve): V-cycles per application (0: 1) */
  int cycle_on;     /* amg: FE_CYCLE_DEVICE (the default: the hierarchy moved to the solve's
                     * backend and cycled there, amg-cycle.c) or FE_CYCLE_HOST (BoomerAMG's own
                     * cycle on the host) */
  int cycle_values; /* amg's device cycle in a double solve: FE_VALUES_SINGLE (the default:
                     * each level's matrices' values stored float, 8 bytes an entry for 12;
                     * its vectors and sums double) or FE_VALUES_DOUBLE */
  int aggressive;   /* amg: the levels BoomerAMG coarsens aggressively (its agg_num_levels;
                     * -1: 1 for a scalar problem in 3D, else 0; twoscale's coarse scale: 0) */
  int verbose;      /* print the setup's steps (Lanczos bounds, AMG levels) */
  double theta;     /* amg: BoomerAMG's strong threshold (0: 0.5 in 3D, 0.25 in 2D) */
  int interp;       /* amg: BoomerAMG's interpolation, hypre's interp_type (-1: 6, extended+i;
                     * twoscale's coarse scale: 17, extended+i in matrix-matrix form) */
  /* amg: work run on the calling thread while BoomerAMG's setup (serial) runs on another
   * (twoscale's fine scale), on a space not split over ranks; NULL: none */
  int (*meanwhile)(void *ctx);
  void *meanwhile_ctx;
} fe_precond_opts;

void fe_precond_opts_default(fe_precond_opts *o);

typedef struct fe_precond fe_precond;

/* One unit. setup fills P->impl (and may set P->diag, P->describe, the counts); apply
 * computes z = M^-1 r, r and z on P's backend and precision, z already made (its entries
 * may be garbage), r never written; destroy frees impl (not P->diag: the layer frees it). */
typedef struct fe_precond_kind {
  const char *name;
  const char *about; /* one line for help and errors */
  int (*setup)(fe_precond *P);
  int (*apply)(fe_precond *P, const fe_vector *r, fe_vector *z);
  void (*destroy)(fe_precond *P);
} fe_precond_kind;

struct fe_precond {
  const fe_precond_kind *kind;
  fe_operator *A;      /* not owned */
  fe_vector *at;       /* the state J is taken at (a copy owned by P), NULL: zero state */
  fe_action_opts act;  /* backend, precision, strategy of the operator's actions */
  fe_precond_opts o;
  fe_vector *diag;     /* diag(J) when the unit uses it (jacobi: M itself); owned by P */
  void *impl;
  /* counted per application (the unit sets them in setup): flops, bytes moved at the
   * memory it runs from, launches, and host<->device bytes (amg's copies) */
  double flops, bytes, host_bytes;
  int launches;
  double setup_seconds;  /* measured by fe_precond_create around setup */
  fe_setup_parts parts;  /* of it, part by part, where the unit says (amg: assembly, hypre;
                          * twoscale: kernels, node_cells, fine, coarse, amg) */
  double apply_seconds;  /* summed over the applications (the layer measures it) */
  long applications;
  char describe[200];    /* how it runs, for reports: "Chebyshev degree 3 on [0.09, 1.9]" */
  /* a multigrid's levels where the unit cycles on the backend (amg's device cycle, and
   * twoscale's coarse scale with it): rows, stored entries and the seconds of its passes in
   * one cycle timed at setup (each launch waited on) */
  int nlevels;
  struct fe_precond_level {
    int rows;
    long long nnz;
    double seconds;
    int merged;     /* its passes in an earlier level's launch (the cycle's tail: its
                     * seconds there) */
  } level[40];
};

/* Make and set up the preconditioner o->name for A at state at (NULL: zero) on act's
 * backend and precision. An unknown name is an error listing the units; a unit that cannot
 * serve this operator (amg without hypre, twoscale on simplices) says why. */
int fe_precond_create(fe_operator *A, const fe_vector *at, const fe_action_opts *act,
                      const fe_precond_opts *o, fe_precond **P);
/* z <- M^-1 r (z made like r when *z is NULL). */
int fe_precond_apply(fe_precond *P, const fe_vector *r, fe_vector **z);
void fe_precond_free(fe_precond *P);
/* The units, in the order help lists them; the count goes to *n. */
const fe_precond_kind *const *fe_precond_kinds(int *n);
/* The unit called name, or NULL. */
const fe_precond_kind *fe_precond_find(const char *name);
/* "none, jacobi, ...": the units' names into out (for errors that list them). */
void fe_precond_names(char *out, size_t size);
/* Whether P can serve a solve on backend be at precision prec (it was made for them). */
int fe_precond_matches(const fe_precond *P, const fe_operator *A, const fe_action_opts *act);

#endif
