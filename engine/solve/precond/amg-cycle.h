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
typedef struct amg_first amg_first;

/* The finest level's A and Jacobi scaling on be, made ahead (beside hypre's setup, amg.c) from
 * felab's own matrix, n rows of CSR sorted by column: what amg_cycle_make makes of hypre's
 * first level (the same rows, sorted so), bit for bit. */
int amg_cycle_first(fe_backend *be, fe_precision prec, int single, int n, const int *rp,
                    const int *ci, const double *va, amg_first **F);
void amg_first_free(amg_first *F);

/* The levels lv[0 .. L) on be in prec: each A with its Jacobi scaling (amg-cycle.c), P and its
 * transpose R, work vectors; the coarsest's dense inverse (up to AMG_DENSE rows; above,
 * smoothing sweeps). single (prec double): A, P and R's values stored in single precision
 * (the scalings, vectors, sums and the dense inverse double). F: the finest level made
 * ahead (amg_cycle_first; taken and freed; NULL: none), used where it is lv[0]'s and the
 * finest level is neither the coarsest nor in the tail. */
int amg_cycle_make(fe_backend *be, fe_precision prec, int single, const amg_host_level *lv,
                   int L, amg_first *F, amg_cycle **C);
/* z = V-cycles on r from z = 0: Jacobi sweeps down and up on every level but the coarsest
 * (the same sweeps both ways: a symmetric operator), the coarsest solved; each cycle after
 * the first on the finest's residual r - A z, its correction added. */
int amg_cycle_apply(amg_cycle *C, int cycles, const fe_vector *r, fe_vector *z);
/* One cycle's counted flops, bytes and launches (and those of the finest's residual, taken
 * before each cycle after the first), and whether the coarsest is solved (dense inverse) or
 * smoothed. */
void amg_cycle_counts(const amg_cycle *C, double *flops, double *bytes, int *launches,
                      int *dense, double *res_flops, double *res_bytes);
/* One cycle on r = 1 with each pass waited on and timed: seconds[l], level l's passes (its
 * sweeps, residual, restriction and correction; the coarsest's solve). */
int amg_cycle_time(amg_cycle *C, double *seconds);
/* The levels' layout: "csr" or "sell". */
const char *amg_cycle_format(const amg_cycle *C);
/* The first level the tail cycles in one launch (its levels' passes timed with it), or the
 * number of levels: none. */
int amg_cycle_tail(const amg_cycle *C);
/* Level l's rows and its matrix's stored entries. */
void amg_cycle_level(const amg_cycle *C, int l, int *rows, long long *nnz);
void amg_cycle_free(amg_cycle *C);

#endif
