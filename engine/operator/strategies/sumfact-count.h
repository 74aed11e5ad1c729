/* felab strategy "sumfact": what its kernel template (engine/codegen/kernels/sumfact.knl) does per
 * cell and per work group, counted from its loops: floating-point operations, shared memory
 * and the work items it is shaped for. Pure C: no backend, no Lua. Keep in step with the
 * template, phase by phase. */
#ifndef FE_SUMFACT_COUNT_H
#define FE_SUMFACT_COUNT_H

#include <stddef.h>

typedef struct fe_sumfact_shape {
  int dim, nc;            /* space dimension (2, 3), components */
  int p1, q1;             /* nodes and points per direction */
  int collocated;         /* 1: the points are the nodes (B1 = identity, interpolation skipped) */
  int vertices;           /* 1: geometry recomputed from the corners (GEO_VERTICES), 0: stored */
  int affine;             /* affine cells: with vertices the map is inverted once a column */
  int jacobian, diagonal; /* the action: residual (0,0), apply (1,0), diagonal (1,1) */
  int need_u, need_x, has_f0, need_f;
  int x_corners;          /* 1: x from the cell's corners (straight cells), not as DIM fields */
  double phys_flops;      /* flops of one fe_f (residual) or fe_df (apply, diagonal) call */
  double phys_nonfma;     /* of those, divisions, square roots and other calls */
  double field_flops;     /* flops of one fe_fields call (0 when need_f is 0) */
  int folded;             /* the apply reads folded words a point (engine/operator/qdata.h): no
                           * geometry, no physics, fe_qd_apply's qd_flops at each point */
  double qd_flops;
} fe_sumfact_shape;

/* Floating-point operations of one cell (an FMA counts 2), from the template's loops. */
double fe_sumfact_flops_per_cell(const fe_sumfact_shape *s);

/* Of those, the flops of the phases the cpu's compiler vectorizes over the cells of a group
 * (gcc 12 -fopt-info-vec: the interpolations in x and y, the transposed passes; not the
 * gather, its z contraction, the quadrature phase nor the scatter). */
double fe_sumfact_vec_flops_per_cell(const fe_sumfact_shape *s);

/* Of the flops, those that do not issue as FMAs: the physics' at each point (the diagonal's
 * 1 + DIM linearizations per component), and with vertices the map's reciprocal determinant
 * at each point (each column on affine cells). */
double fe_sumfact_nonfma_per_cell(const fe_sumfact_shape *s);
/* Of the flops, the contractions' (the interpolations, the derivatives at the points and
 * their transposes): each multiply-add reads one word of its operand array (0: the
 * diagonal, not counted apart). */
double fe_sumfact_contraction_flops_per_cell(const fe_sumfact_shape *s);
/* Of those, the derivatives along x and y at the points and their transposes (sf_point_values,
 * the transposed derivatives): each item walks its column of points, and each multiply-add
 * reads its table entry (a row or column of DQ that moves with the item: not hoisted) beside
 * its operand's word, two loads a multiply-add (0: the diagonal, not counted apart). */
double fe_sumfact_walk_flops_per_cell(const fe_sumfact_shape *s);
/* The words of a cell's largest contraction arrays, input and output together (fields x
 * the nodes or the points, the more of the two): what one contraction sweeps. */
double fe_sumfact_contraction_words(const fe_sumfact_shape *s);

/* Bytes of FE_SHARED arrays of one work group of `block` cells with reals of real_size bytes. */
size_t fe_sumfact_shared_bytes(const fe_sumfact_shape *s, int block, int real_size);

/* Shared-memory wavefront bytes of one cell, phase by phase from the template's loops, for
 * groups of `block` cells: a phase of N items a cell runs block N items in warps of 32, each
 * warp's access to a cell array (SoA, the cell index fastest) costing the 128-byte wavefronts
 * of its items' words, a read of the 1D tables (few distinct words a warp) one; a warp with
 * few items pays a whole wavefront. block <= 0: every warp full (an item's word, or 4 bytes
 * a table read). */
double fe_sumfact_shared_per_cell(const fe_sumfact_shape *s, int real_size, int block);
/* The same, and its parts (part: NULL or 3): the gather's stores (with the edges), the
 * interpolations' and the quadrature phase's, the scatter's loads. */
double fe_sumfact_shared_phases(const fe_sumfact_shape *s, int real_size, int block,
                                double part[3]);

/* Work items per group the template is shaped for (a multiple of 32, before any device cap). */
int fe_sumfact_group_items(const fe_sumfact_shape *s, int block);

#endif
