/* felab folded per-point data: what the Jacobian action of a linear physics needs at each
 * quadrature point, made once at setup, as libCEED's qdata and deal.II's MappingInfo keep it.
 *
 * At a point the action is [df0; df1] = M [w; dw] with M = [g0 g1; g2 g3] (engine/physics/physics.h).
 * Pulled back to the reference cell and weighted, the kernel's fluxes are
 *   s0 = W |J| (g0 w + g1 Jinv^T dW),   F = W |J| Jinv (g2 w + g3 Jinv^T dW),
 * dW the reference gradient. When the physics' Jacobian reads only x, the cell's region
 * constants and the named constants (not u, grad u, nor auxiliary fields), the four products
 *   Q00 = W|J| g0,  Q01 = W|J| g1 Jinv^T,  Q10 = W|J| Jinv g2,  Q11 = W|J| Jinv g3 Jinv^T
 * are the same in every action: they are stored, and an action only contracts them with
 * [w; dW]. Blocks that are zero are not stored; a symmetric M stores Q00 and Q11 as upper
 * triangles and Q01 alone (Q10 = Q01^T). A scalar diffusion stores 6 words a point (its Q11),
 * a mass term 1, elasticity 45.
 *
 * The words are made on the realization's own device by a kernel (engine/codegen/kernels/qdata.knl)
 * that calls the physics' linearization fe_df on unit directions, from x and the factors
 * computed on the host a chunk of cells at a time; made again when a named constant changes. */
#ifndef FE_QDATA_H
#define FE_QDATA_H

#include <stddef.h>

#include "engine/physics/physics.h"

struct fe_operator;
struct fe_realization;
struct fe_action_opts;
struct fe_strbuf;

/* Which blocks of M are stored and how. */
typedef struct fe_qdata_layout {
  int nv, ng;            /* value slots (NC) and reference-gradient slots (NC x DIM) */
  int b00, b01, b10, b11; /* the block is stored */
  int sym;               /* M = M^T: Q00, Q11 upper triangles, Q10 = Q01^T (not stored) */
  int words;             /* stored words a point */
} fe_qdata_layout;

/* The layout of p's Jacobian in dimension dim; 1 with the reason in why when it cannot be
 * folded (a Jacobian that reads the state or auxiliary fields). */
int fe_qdata_layout_of(const fe_physics *p, int dim, fe_qdata_layout *L, char *why, size_t n);

/* Whether the apply of A folds its per-point data for options o (fold: FE_FOLD_AUTO, _ON,
 * _OFF): asked on, it must be possible (an error names why not); asked off, never; auto, where
 * it reads fewer words a point than the factors and coordinates it replaces, or where the
 * physics reads x (which the kernel would otherwise interpolate at every point). */
int fe_qdata_folds(const struct fe_operator *A, int fold, int *folds);

/* Bytes of folded words an apply of spec s reads on the whole mesh. */
struct fe_kernel_spec;
double fe_qdata_bytes(const struct fe_kernel_spec *s);
/* What the words hold, in a few words, for reports. */
void fe_qdata_describe(const fe_physics *p, int dim, char *buf, size_t n);

/* Flops of one fe_qd_apply (common.knl) at a point. */
double fe_qdata_apply_flops(const fe_qdata_layout *L);

/* The #defines of a folded kernel (QDATA, QD_*), appended to b: the layout of the words,
 * cells_fastest (a group's cells side by side at each point) and column (not 0: a group's
 * words in the order of a column walk of `column` points, a point's words side by side). */
void fe_qdata_defines(struct fe_strbuf *b, const fe_physics *p, int dim, int cells_fastest,
                      int column);

/* Build (or, after a named constant changed, rebuild) r's folded data for its stored order
 * r->perm: compiles the setup kernel once, then runs it chunk by chunk. */
int fe_qdata_build(struct fe_realization *r);
/* The folded data r holds is current (built, with the physics' constants of now). */
int fe_qdata_current(const struct fe_realization *r);
/* Words r's folded data take on the device (reals). */
size_t fe_qdata_plane(const struct fe_realization *r);
void fe_qdata_release(struct fe_realization *r);

#endif
