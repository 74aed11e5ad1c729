/* felab code generation: kernel source for one action of one operator, and the flop and
 * byte counts of that kernel (the model mirrors the templates line by line). */
#ifndef FE_CODEGEN_H
#define FE_CODEGEN_H

#include "backends/backend.h"
#include "engine/physics.h"
#include "engine/quadrature.h"
#include "engine/space.h"

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
  /* strategy "patch" (patch.knl; all 0 for "transpose") */
  int patch;          /* 1: the patch template */
  int maxl;           /* nodes of the largest patch */
  int geo_recompute;  /* 1: the map's factors from the node coordinates at each point */
  double patch_nodes; /* nodes summed over patches (a node shared by k patches counts k) */
  int maxc;           /* places in the runs of the largest patch (padding included) */
  int lanes;          /* nodes whose runs are interleaved (fe_patch_place) */
  int walk;           /* cells per walk (0: one item per cell) */
  int items;          /* walks per patch */
  int group_items;    /* work items per group of the launch */
  int maxe;           /* walks: events of the largest patch */
  double walk_events; /* walks: event words read, padding included */
} fe_kernel_spec;

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
/* Counted flops and minimal bytes of one action on the whole mesh. */
void fe_codegen_model(const fe_kernel_spec *s, int ndirichlet, double *flops, double *bytes);

/* The kernel templates (build/gen/kernels.c, made from the .knl files in engine/kernels). */
const char *fe_kernel_template(const char *name);

#endif
