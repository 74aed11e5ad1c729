/* amg's V-cycle on a backend (amg-cycle.c): the hierarchy hypre's setup made (each level's A
 * and P), moved to the device once, and cycled there with felab's own passes. Private to
 * engine/solve/precond/. */
#ifndef FE_AMG_CYCLE_H
#define FE_AMG_CYCLE_H

#include "engine/solve/vector.h"

/* One level as the host holds it: A (n x n) and, but on the coarsest, P (n x nc), CSR with
 * int row pointers and columns and double values (hypre's own arrays serve as they are). */
typedef struct amg_host_level {
  int n, nc;
  const int *arp, *acol;
  const double *aval;
  const int *prp, *pcol;
  const double *pval;
} amg_host_level;

typedef struct amg_cycle amg_cycle;

/* The levels lv[0 .. L) on be in prec: each A with its Jacobi scaling (amg-cycle.c), P and its
 * transpose R, work vectors; the coarsest's dense inverse (up to AMG_DENSE rows; above,
 * smoothing sweeps). */
int amg_cycle_make(fe_backend *be, fe_precision prec, const amg_host_level *lv, int L,
                   amg_cycle **C);
/* z = one V-cycle on r from z = 0: Jacobi sweeps down and up on every level but the
 * coarsest (the same sweeps both ways: a symmetric operator), the coarsest solved. */
int amg_cycle_apply(amg_cycle *C, const fe_vector *r, fe_vector *z);
/* One cycle's counted flops, bytes and launches; its levels' rows and nonzeros on the
 * coarsest, and whether it is solved (dense inverse) or smoothed. */
void amg_cycle_counts(const amg_cycle *C, double *flops, double *bytes, int *launches,
                      int *dense);
void amg_cycle_free(amg_cycle *C);

#endif
