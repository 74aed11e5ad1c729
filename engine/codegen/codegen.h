/* felab code generation: kernel source for one action of one operator, and the flop and
 * byte counts of that kernel (the model mirrors the templates line by line). */
#ifndef FE_CODEGEN_H
#define FE_CODEGEN_H

#include "backends/backend.h"
#include "engine/physics/physics.h"
#include "engine/fem/quadrature.h"
#include "engine/fem/space.h"

typedef enum { FE_ACTION_RESIDUAL, FE_ACTION_APPLY, FE_ACTION_DIAGONAL, FE_NACTIONS } fe_action;

const char *fe_action_name(fe_action a);
int fe_action_parse(const char *s, fe_action *a);

typedef struct fe_kernel_spec {
  const fe_space *V;
  const fe_physics *pde;
  const fe_quadrature *quad;
  fe_action action;
  fe_precision prec;
  int block;       /* cells per work group */
  int colored;     /* 1: groups launched by color, plain stores are safe between groups */
  int geo_affine;  /* 1: one set of geometric factors per cell, else one per point */
  int geo_shared;  /* 1: one set per class of congruent cells (fe_geometry_shared) */
  int dense;       /* 1: the dense tables B, D, W at the rule's points */
  int folded;      /* 1: the Jacobian action reads folded per-point data (engine/operator/qdata.h) */
  int qd_cells_fastest; /* folded: a group's cells side by side at each point (else a cell's
                         * points side by side) */
  int qd_column;        /* folded, where not 0: a group's words in the order of its column
                         * walk (columns of qd_column points), a point's words side by side */
  int shift_x;     /* 1: the coordinates are read less the origin x0, which the physics adds
                    * back (single precision: fe_coords_origin) */
  double x0[3];
  const char *template_name; /* engine/kernels/<name>.knl, after common.knl */
  const char *defines;       /* the strategy's own #defines (NULL: none) */
  const char *tables;        /* the strategy's own tables, after the preamble (NULL: none) */
} fe_kernel_spec;

/* What the physics of an action reads and writes. */
typedef struct fe_action_needs {
  int jacobian; /* the linearization fe_df rather than fe_f */
  int need_u;   /* gather the state u */
  int need_x;   /* gather the coordinates */
  int has_f0;   /* the term against basis values is present */
  int need_f;   /* evaluate the auxiliary fields */
  double phys_flops;
  double phys_nonfma; /* of those, divisions, square roots and other calls */
} fe_action_needs;

fe_action_needs fe_codegen_needs(const fe_kernel_spec *s);
/* Flops of fe_eval (common.knl) for one field of nb basis functions and nc components at a
 * point (0 when need is 0); of the map's factors from nb node coordinates at a point. */
double fe_codegen_eval_flops(int nb, int dim, int nc, int need);
double fe_codegen_map_flops(int nb, int dim);
/* The cpu: up to how many shared sets of factors a group's lanes select their own (a compare
 * and a blend a set), beyond which they gather them (FE_GROUP_FACTORS, common.knl: the
 * kernel's GEO_SELECT) */
int fe_codegen_select_sets(fe_precision prec);
/* Flops of the auxiliary fields at one point, and their bytes on the whole mesh. */
void fe_codegen_field_counts(const fe_kernel_spec *s, double *flops_per_point, double *bytes);
/* Bytes every strategy moves at least: the state and direction read, the output written,
 * the constrained rows, the per-cell constants, the fields and the named constants. */
double fe_codegen_common_bytes(const fe_kernel_spec *s, int ndirichlet);

/* A table as an FE_CONSTANT real array at full precision, appended to b. */
struct fe_strbuf;
void fe_codegen_table(struct fe_strbuf *b, const char *name, const double *v, int n);

/* Entries of the auxiliary fields' dof maps per cell (the sum of their basis sizes). */
int fe_codegen_field_map_width(const fe_physics *p);

/* Compile the physics' bodies alone on the cpu backend (dimension dim), so a raw C physics
 * that does not compile is an error when it is defined, quoting the offending line. */
int fe_codegen_physics_check(const fe_physics *p, int dim);

/* Words of geometric data per stored point: Jinv (DIM x DIM) then det J. */
int fe_geo_stride(int dim);

/* The whole source: engine defines, the backend preamble, tables, physics, templates. */
int fe_codegen_action(const fe_kernel_spec *s, const char *backend, const char *preamble,
                      char **src);

/* The kernel templates (build/gen/kernels.c, made from the .knl files in engine/kernels). */
const char *fe_kernel_template(const char *name);

#endif
