/* felab strategies: how an operator's actions are computed on a device. A strategy is one
 * unit behind one table, as a backend is: it says which operators, backends and actions it
 * applies to (and why not), builds its own device data once per realization, writes its
 * kernel's source, launches it, and counts its flops and bytes. The operator
 * (engine/operator/operator.c and the operator-*.c beside it) keeps what every strategy
 * shares: the space, the physics, the boundary conditions, the rules, the coordinates, the
 * constants, the Dirichlet kernel and the report. This header is private to the engine: it
 * shows the operator's insides to the strategies (engine/strategies/), the way PETSc's
 * private headers do. */
#ifndef FE_STRATEGY_H
#define FE_STRATEGY_H

#include <stddef.h>

#include "engine/codegen/codegen.h"
#include "engine/operator/operator.h"
#include "engine/operator/options.h"
#include "engine/fem/quadrature.h"

typedef struct fe_realization fe_realization;

/* The most bytes a strategy's parsed options take (fe_strategy.options_size). */
#define FE_STRATEGY_OPTIONS_BYTES 64
enum { FE_XWAVE_QUANTILES = 32 }; /* the first wave's work: quantiles kept (fe_realization) */

/* The table of one strategy. Every int-returning slot returns 0 or an fe_err code. */
typedef struct fe_strategy {
  const char *name;    /* "transpose", "patch", "sumfact", "csr", "ebe" */
  const char *summary; /* one line: what it does */
  /* 0 if it can run every action of A on be in prec, else 1 with the reason in why. */
  int (*applies)(const fe_operator *A, const fe_backend *be, fe_precision prec, char *why,
                 size_t nwhy);
  /* Its own options (PETSc's PCSetFromOptions_XXX), parsed into a struct private to its file
   * (options_size bytes, every field an int whose default is 0, so that a zeroed struct is
   * the defaults and two structs compare as bytes): the names it takes (NULL-ended; an option
   * of another strategy given to it is an error naming the strategies that take it), then
   * read_options reads the given values into opts (at their defaults before), checking each
   * (an error names the option, caller first), and effective_key writes what opts mean on A,
   * be and prec as a canonical key: two calls whose keys are equal share one realization
   * (walk 0 and -1, block 0 and its default block). */
  const char *const *options;
  size_t options_size;
  int (*read_options)(const struct fe_options *given, const char *caller, void *opts);
  void (*effective_key)(const fe_operator *A, fe_backend *be, fe_precision prec,
                        const void *opts, char *key, size_t n);
  /* Fill r->block (0 asked: the strategy's own) and check the options opts (r->opts);
   * called before setup, so an option that does not fit is an error naming it. r->geo_shared
   * holds the default's (fe_geometry_shared at FE_GEOMETRY_AUTO) and r->folded 0: a strategy
   * with a geometry option sets the first, one whose apply reads folded per-point data
   * (engine/operator/qdata.h) the second. */
  int (*configure)(fe_realization *r, const void *opts);
  /* Build the strategy's device data (r->data, its cell order, r->aux, r->fmaps, r->geo...). */
  int (*setup)(fe_realization *r);
  void (*release)(fe_realization *r); /* free r->data and its buffers */
  /* The whole kernel source of action a, and the name of its entry point. */
  int (*source)(const fe_realization *r, fe_action a, const char *preamble, char **src);
  const char *(*entry)(fe_action a);
  /* Launch the integration of action a: y (zeroed) += the action of u (state) and w. */
  int (*integrate)(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                   fe_vector *y, int *launches);
  /* The work of action a on the whole mesh per ceiling of the model, counted from its own
   * loops (*w zeroed by the caller): flops, minimal bytes, shared-memory wavefront bytes,
   * atomics, ..., and the main kernel's groups and items per group. */
  void (*count)(const fe_realization *r, fe_action a, fe_work *w);
  /* Optional: the kernel those groups run, where not r->kernel[a] (csr: its product's, SELL's
   * or CSR's): its registers and shared memory give the report's occupancy. */
  fe_kernel *(*counted_kernel)(const fe_realization *r, fe_action a);
  /* The same before any device data exists, to choose the default: the same formulas as
   * count where they need nothing built, an estimate otherwise. */
  void (*estimate)(const fe_operator *A, const fe_backend *be, fe_precision prec, fe_action a,
                   fe_work *w);
  /* Optional: what measurements say here, whatever the model predicts (it does not yet
   * count shared memory and atomics): 1 the default (the reason in why), -1 never the
   * default (it measured slower), 0 the model decides. */
  int (*measured)(const fe_operator *A, const fe_backend *be, fe_precision prec, char *why,
                  size_t nwhy);
  /* 1: the kernel reads constrained entries of a direction as zero itself (no masking). */
  int masks_direction;
  /* 1: its setup stores the Jacobian's entries (element matrices, an assembled matrix), a
   * hundred applies' time or more: on elements of more than 10 basis functions autotuning
   * tries it only where predicted near the fastest (engine/operator/operator-choose.c). */
  int stores_matrix;
  /* Optional: the strategy whose kernel computes action a, when another one's does (csr and
   * ebe: the residual and the diagonal by "transpose"), else NULL. A:source shows that one. */
  const struct fe_strategy *(*delegate)(fe_action a);
  /* Optional: how r computes action a, in a few words (its variant: a scatter, a format),
   * for the report's why. */
  void (*describe)(const fe_realization *r, fe_action a, char *buf, size_t n);
  /* Optional: the geometry that engine code beside the actions reads (the element matrices,
   * engine/matrix/): a stored cell order (r->perm, r->npad, groups of r->block), the factors
   * at the apply's points stored in that order in r->geo[FE_ACTION_APPLY] (shared per class
   * of congruent cells where r->geo_shared), and what every realization holds (coordinates,
   * per-cell constants, field maps, named constants: fe_realization_bind). geometry_options
   * writes into opts (its own options, at their defaults) those of a realization in groups
   * of `block` cells (0: its own) whose factors are as `geometry` asks (FE_GEOMETRY_*) and,
   * with `stored`, stored even where the model would make them from the vertices;
   * gives_geometry says whether r holds them. NULL: the strategy gives no such geometry. */
  void (*geometry_options)(void *opts, int block, int geometry, int stored);
  int (*gives_geometry)(const fe_realization *r);
} fe_strategy;

extern const fe_strategy fe_strategy_transpose, fe_strategy_patch, fe_strategy_sumfact,
    fe_strategy_csr, fe_strategy_ebe;

/* What the strategies built on matrices (csr, ebe: engine/operator/strategies/csr.c) share: they
 * apply when the Jacobian does not depend on the state (one build serves every call), and
 * compute the residual and the diagonal matrix-free with "transpose" into y (the operator
 * sets the constrained rows after). */
int fe_stored_matrix_applies(const fe_operator *A, const fe_backend *be, fe_precision prec,
                             char *why, size_t n);
int fe_stored_matrix_other(fe_realization *r, fe_action a, const fe_vector *u, fe_vector *y,
                           int *launches);
const fe_strategy *fe_stored_matrix_delegate(fe_action a);

/* The strategies (a bit each, in the table's order) that take every option o->given names;
 * all of them when it names none. An error unless st takes every option o->given names:
 * "<caller>: option walk is not an option of strategy transpose; strategy patch takes it". */
unsigned fe_strategies_taking(const fe_action_opts *o);
int fe_strategy_check_given(const fe_strategy *st, const fe_action_opts *o);

/* Every strategy, in the order A:strategies() lists them. */
int fe_strategy_count(void);
const fe_strategy *fe_strategy_at(int i);
const fe_strategy *fe_strategy_find(const char *name);

/* The operator on one backend in one precision with one strategy and its options. */
struct fe_realization {
  fe_operator *A;
  const fe_strategy *st;
  fe_backend *be;
  fe_precision prec;
  void *opts;            /* its strategy's options as asked, parsed (options_size bytes: a
                          * struct private to the strategy's file) */
  char key[160];         /* and in effect (its strategy's effective_key) */
  int block;             /* cells per work group */
  void *data;            /* the strategy's own (its release frees it) */
  /* a cell order shared by strategies that take one (transpose, sumfact): work groups of
   * `block` stored cells, launched color by color when `colored` (plain adds on the cpu) */
  int colored;
  int ngroups;
  int ncolors;
  int *color_start;      /* groups of color c: [color_start[c], color_start[c+1]) */
  int run;               /* a color's groups go to threads in runs of this many (the cpu) */
  /* A split space on a GPU (the strategy's integrate launches color_range's groups): the
   * cells with a node on another rank stored first, so that an action integrates them
   * (phase 1), starts the exchange, and integrates the rest (phase 2) while it travels.
   * phases: the strategy takes them (set before the schedule); color_split[c]: the end of
   * color c's boundary groups (NULL: no split); phase: 0 every group, 1 or 2. */
  int phases;
  int *color_split;
  int phase;
  int phased;            /* this realization's integrate takes phase 1 and 2 (sumfact and
                          * transpose where color_split is made; a strategy of its own kind
                          * sets it where it splits its work so: csr's apply), for the actions
                          * it integrates itself (not those its strategy delegates) */
  int phase2_apart;      /* phase 2 writes no shared entry (cells: their boundary cells all in
                          * phase 1), so the exchange's sums may run beside it; csr's phase 2
                          * writes every row again */
  /* the groups phase 2's kernel launches and those resident on a compute unit (csr's
   * product; found once, at its setup, with its first wave's work below): the exchange's model
   * reads their residence before the report's counts (operator-action.c) */
  long long xgroups;
  int xresident;
  /* and its first wave's groups' work over the average group's, sorted, at quantiles i / 32
   * (csr's product, where xwave_known; else its groups taken as alike) */
  double xwave[FE_XWAVE_QUANTILES + 1];
  int xwave_known;
  fe_buffer groups;      /* group list, ordered by color */
  fe_buffer geo[FE_NACTIONS]; /* stored geometric factors per action (shared when equal) */
  int geo_shared;        /* geo holds a set of factors per class of congruent cells
                          * (fe_geometry_shared) */
  int folded;            /* the apply reads qdata, its per-point data made once (engine/operator/qdata.h) */
  int qd_cells_fastest;  /* qdata's layout: a group's cells side by side at each point */
  int qd_column;         /* and, where not 0, a group's words in its column walk's order, a
                          * point's words side by side (the points of a column: the cpu's
                          * sumfact); else word planes fe_qdata_plane apart */
  fe_buffer qdata;       /* folded words (fe_qdata_plane a word) */
  unsigned qdata_version; /* the physics' const_version it was made with */
  int qdata_built;
  fe_module *qmodule;    /* the setup kernel fe_qdata (engine/codegen/kernels/qdata.knl) */
  fe_kernel *qkernel;
  fe_buffer coords;      /* nnodes x 3 */
  int coords_wrapped;    /* coords is the space's own array (a backend that reads host memory
                          * in place, double precision): never released */
  fe_buffer aux;         /* per-cell constants of the physics, in stored cell order */
  fe_buffer params;      /* the physics' named constants */
  unsigned params_version; /* the physics' const_version they hold */
  fe_buffer fmaps;       /* the auxiliary fields' dof maps, NBF per stored cell */
  const fe_buffer *fv[FE_PHYSICS_MAX_FIELDS]; /* the auxiliary fields' values for this call */
  fe_buffer didx;        /* constrained dofs */
  fe_buffer dval;        /* their prescribed values */
  fe_kernel *kernel[FE_NACTIONS];    /* the strategy's entry */
  fe_kernel *dirichlet[FE_NACTIONS]; /* the dirichlet kernel of that action's module */
  fe_module *module[FE_NACTIONS];
  int warm[FE_NACTIONS];  /* the action ran once (its first run is not timed) */
  int *perm;             /* the stored order (fe_realization_schedule), npad */
  size_t npad;
  /* the stored order as code beside the actions reads it (the element matrices), made on
   * first use by fe_realization_stored_maps: */
  fe_buffer stored_cells; /* the cell map (NB nodes per stored cell), and */
  fe_buffer stored_ids;   /* the mesh cell of each stored cell (-1: padding) */
  fe_vector *scratch;    /* the masked direction of a Jacobian action */
  fe_vector *zero;       /* the state of a Jacobian taken at zero */
  double *built_constants; /* csr, ebe: the named constants their stored Jacobian was built
                            * with (a change of one the Jacobian reads rebuilds it) */
  double setup_seconds;  /* building and moving the data above, reported once */
  fe_setup_parts parts;  /* of which, part by part: the schedule, the per-cell data
                          * ("cell_data"), the geometry, and the strategy's own (csr: the
                          * assembly's pattern, matrices, fill, format, compile) */
  const char *building;  /* the part being set up now (an out-of-memory error names it) */
  int kernel_from[FE_NACTIONS]; /* an action's kernel: 1 compiled, 2 from a cache (reported once) */
  fe_work work[FE_NACTIONS];   /* the strategy's counts of each action, made once (the bank
                                * model walks a group's accesses: not work for every call) */
  int counted[FE_NACTIONS];
  /* this call's (w, J w) parts (fe_action_opts.pq; NULL: not asked) and their slot; the
   * strategy's integrate sets pq_added where its kernel added them (sumfact on a backend with
   * cg_parts) */
  const fe_buffer *pq;
  int pq_slot, pq_added;
  /* the strategy's integrate returned another realization's whole action (csr's and ebe's
   * residual and diagonal: fe_stored_matrix_other): a split space's ranks already summed */
  int delegated;
  double xbytes, xmessages, xseconds; /* the last run's exchange (fe_dist_sum), for the report */
  double xparts[4];      /* and its parts (two phases; fe_report's exchange_parts) */
  int xdirect;           /* and whether it went device to device (fe_dist_direct) */
  int xbeside;           /* and whether it ran beside the integration (two phases) */
};

/* The operator (private: strategies read it, only operator*.c write it). */
struct fe_operator {
  const fe_space *V;
  const fe_physics *pde;
  fe_quadrature quad[FE_NACTIONS]; /* each action's rule: exact for its own integrand */
  int geo_affine;
  int geo_recompute;      /* first-order space on straight cells: its basis is the map */
  double *aux;            /* ncells x naux per-cell constants from the physics' region table */
  int ndir;
  int *dir_nodes;
  double value;
  fe_realization *real[8]; /* made on first use; the oldest is dropped past 8 */
  int nreal;
  struct {                 /* the default strategy per backend and precision, chosen once */
    const fe_backend *be;
    fe_precision prec;
    const struct fe_strategy *st;
    char why[160];
  } pick[8];
  int npick;
  fe_operator *transposed; /* fe_operator_transpose's companion (owned), A itself, or NULL */
  /* The element matrices' own data (engine/matrix/elemat-cache.c: their compiled kernels),
   * made by their first call and released by elemat_cache_free with A, or when A's rules
   * change (their sources change with them): attached here, as PETSc composes one object
   * with another, so that the operator needs nothing of engine/matrix/. */
  void *elemat_cache;
  void (*elemat_cache_free)(void *cache);
};

/* ---- helpers the strategies share (engine/operator/operator-data.c, operator-geometry.c) ---- */
/* The groups of color c this call's phase launches: [*first, *first + *count). */
void fe_realization_color_range(const fe_realization *r, int c, int *first, int *count);
/* Whether r's actions run in two phases where its strategy can (fe_realization's phased): its
 * space split over the ranks with a neighbour, on a GPU (the cpu's host does the work itself:
 * nothing would run beside the messages); FELAB_EXCHANGE_PHASES=1 splits on any backend (the
 * tests), =0 on none. */
int fe_realization_wants_phases(const fe_realization *r);
/* FELAB_EXCHANGE_PHASES: 1 (phases wherever a strategy takes them), 0 (never), -1 (unset). */
int fe_realization_phases_forced(void);
/* The options several strategies read alike, each into the field of its own options: block
 * (cells per work group), geometry (where the factors come from: FE_GEOMETRY_*) and fold
 * (FE_FOLD_*), for read_options; and the geometry's part of an effective key: "shared",
 * "stored" (a set a cell or point) or "vertices" (vertices: whether the strategy makes them
 * from the vertices). */
int fe_read_block(const struct fe_options *g, const char *caller, int *block);
int fe_read_geometry(const struct fe_options *g, const char *caller, int *geometry);
int fe_read_fold(const struct fe_options *g, const char *caller, int *fold);
const char *fe_geometry_key(const fe_operator *A, int geometry, int vertices);
/* The fold's part of an effective key: whether the apply reads folded per-point data ("?":
 * the fold asked cannot be, an error its setup reports). */
const char *fe_fold_key(const fe_operator *A, int fold);
/* The spec of action a for codegen (the fields every strategy shares): element matrices and
 * other kernels beside the actions. */
void fe_realization_spec(const fe_realization *r, fe_action a, fe_kernel_spec *s);
/* The same for the action's own kernel (and its counts): with r's folded per-point data where
 * the apply reads them (engine/operator/qdata.h). */
void fe_realization_action_spec(const fe_realization *r, fe_action a, fe_kernel_spec *s);
/* Upload n doubles as reals of r's precision, or n ints, into a new buffer. */
int fe_upload_reals(fe_backend *be, fe_precision prec, const double *v, size_t n, fe_buffer *buf);
/* The origin the kernels of precision prec read V's node coordinates from (o, the spec's x0):
 * none in double (returns 0, o zero); in single V's first node rounded to float (returns 1),
 * so that the coordinates, each less the origin in double and then rounded, keep the digits
 * of a cell's edges on a mesh far from the origin (float's step near 1000 is 6e-5, 6% of an
 * edge of 1e-3); the physics adds it back to x (codegen's FE_X0). fe_upload_coords: V's node
 * coordinates so into a new buffer (fe_host_coords: as an array of host reals, malloc'ed
 * into *own, or V's own in double). */
int fe_coords_origin(const fe_space *V, fe_precision prec, double o[3]);
int fe_upload_coords(fe_backend *be, fe_precision prec, const fe_space *V, fe_buffer *buf);
const void *fe_host_coords(const fe_space *V, fe_precision prec, void **own);
int fe_upload_ints(fe_backend *be, const int *v, size_t n, fe_buffer *buf);
/* 0 where the dense tables a kernel of A embeds (B, D, W of each action's rule: transpose,
 * patch, the element matrices) fit be's constant memory (be->info.constant_tables), else 1
 * with why. */
int fe_dense_tables_fit(const fe_operator *A, const fe_backend *be, fe_precision prec, char *why,
                        size_t n);
/* The most shared memory a work group may use on be (the cpu: 512 KiB of stack). */
size_t fe_shared_limit(const fe_backend *be);
/* Group g's schedule over the cells (fills ngroups, ncolors, color_start, groups), then the
 * stored order perm[npad] (perm[i] < 0: padding, -(c + 1) with c its group's first cell).
 * Cells in the mesh's order, or along a Morton curve when asked or when the mesh's order
 * needs too many colors. perm is r->perm (kept by r, not freed by the caller, which may
 * reorder cells within a group: the stored order is what it says). */
int fe_realization_schedule(fe_realization *r, int morton, int **perm, size_t *npad);
/* Around the launches of a colored realization's colors: on, a thread takes runs of r->run
 * groups of each color whole (the cpu); off, even parts again. Nothing where not colored. */
void fe_realization_runs(const fe_realization *r, int on);
/* Per-cell constants and field maps in the stored order perm. */
int fe_realization_cell_data(fe_realization *r, const int *perm, size_t npad);
/* Geometric factors as reals of precision prec at the points of Q for the stored cells perm,
 * into out (fe_geometry_words of them; out NULL: only check that every det J > 0, with the
 * cell's id in the error). Shared (fe_geometry_shared): the sets of the mesh's classes of
 * congruent cells, geo_n of them with the padding's zeros last, then each stored cell's class
 * as an int (common.knl's fe_geometry_at). plane: the distance between two factors of a set
 * (0: npad sets, or npad x points). */
size_t fe_geometry_words(const fe_operator *A, const fe_quadrature *Q, size_t npad, int shared,
                         fe_precision prec);
/* The sets of factors stored for npad cells (one a cell on affine cells, else one a point;
 * shared: one a class): the kernels' geo_n, the distance between two factors of one set. */
size_t fe_geometry_plane(const fe_operator *A, const fe_quadrature *Q, size_t npad, int shared);
int fe_build_geometry(const fe_operator *A, const fe_quadrature *Q, const int *perm, size_t npad,
                      int shared, void *out, fe_precision prec, size_t plane);
/* Whether a realization of A asked geometry (FE_GEOMETRY_*) stores one set of factors per
 * class of congruent cells: affine straight cells that fe_mesh_congruent groups, unless it
 * asks "unshared" or "vertices". */
int fe_geometry_shared(const fe_operator *A, int geometry);
/* The bytes of stored factors an action of spec s reads on the whole mesh: a set a cell (or
 * point), or shared a class a cell and the classes' sets once. */
double fe_geometry_bytes(const fe_kernel_spec *s);
/* The cpu's work of putting a group's affine stored factors in its cells' lanes
 * (FE_GROUP_FACTORS of engine/codegen/kernels/common.knl, which transpose and sumfact run before their
 * phases): into wk's factor_lanes (SIMD copies and selects, a lane each) or factor_gathers. */
void fe_group_factor_work(const fe_kernel_spec *s, fe_work *wk);
/* "geometry from the vertices", "geometry shared: ...", "geometry stored per cell" (point),
 * or for a folded apply what its words hold. */
void fe_geometry_describe(const fe_realization *r, int vertices, char *buf, size_t n);
void fe_action_geometry_describe(const fe_realization *r, fe_action a, int vertices, char *buf,
                                 size_t n);
/* A new buffer of `bytes` written by fill(ctx, out): in place on the cpu, through one staging
 * copy elsewhere. fe_fill_reals: the same for n reals of precision prec. */
int fe_fill_buffer(fe_backend *be, size_t bytes, fe_buffer *buf, int (*fill)(void *ctx, void *out),
                   void *ctx);
int fe_fill_reals(fe_backend *be, fe_precision prec, size_t n, fe_buffer *buf,
                  int (*fill)(void *ctx, void *out, fe_precision prec), void *ctx);
/* Stored factors of every action at its own points in r->geo (shared between equal rules);
 * with recompute (the kernel makes the factors itself) only the check that every det J > 0. */
int fe_realization_geometry(fe_realization *r, int recompute, const int *perm, size_t npad);
/* The model's seconds for the work w in one launch on be (the bytes when the backend has
 * no calibration: still an order). */
double fe_predict_seconds(fe_backend *be, fe_precision prec, const fe_work *w);
/* Cells rounded up to whole groups of `block`. */
size_t fe_padded_cells(const fe_operator *A, int block);
/* The ten arguments every integration kernel ends with: coordinates, per-cell constants,
 * named constants, field maps and values, then u, w and y. */
void fe_physics_args(const fe_realization *r, const fe_vector *u, const fe_vector *w,
                     fe_vector *y, fe_arg *a);
/* For engine code beside the three actions (element matrices, engine/matrix/matrix.c): the
 * realization of A for the options o (made on first use, kept by A), why its strategy; then
 * the physics' constants and fields bound on it for one call (fe_realization_unbind frees
 * the converted copies in tmp[FE_PHYSICS_MAX_FIELDS]). */
int fe_operator_realize(fe_operator *A, const fe_action_opts *o, fe_realization **r, char *why,
                        size_t nwhy);
/* A realization that gives the geometry the element matrices read (fe_strategy's
 * geometry_options and gives_geometry) on the backend and precision of o: of o's strategy
 * when it gives one, else of the first in the table that does; its cells in groups of
 * `block` (0: the strategy's own), its factors as `geometry` asks (FE_GEOMETRY_*). The
 * realization of those options when it holds the factors (the actions' own: shared with
 * them), else one asked to store them (where the model would make them from the vertices).
 * The options o gives its own strategy are not read: the element matrices have theirs. */
int fe_operator_realize_geometry(fe_operator *A, const fe_action_opts *o, int block, int geometry,
                                 fe_realization **r);
/* r's stored order as code beside the actions reads it: r->stored_cells and r->stored_ids,
 * uploaded on the first call. */
int fe_realization_stored_maps(fe_realization *r);
int fe_realization_bind(fe_realization *r, fe_vector **tmp, double *transfer);
void fe_realization_unbind(fe_realization *r, fe_vector **tmp);

/* What a report says of the operator: its space, the rule of action `rule`, its sizes
 * (after fe_report_begin). */
void fe_report_operator(fe_report *rep, const fe_operator *A, fe_action rule);

/* The cell of stored index i of perm (padding copies its group's first cell). */
static inline int fe_stored_cell(const int *perm, size_t i)
{
  return perm[i] < 0 ? -perm[i] - 1 : perm[i];
}

#endif
