/* felab operators: a space, a physics and boundary conditions, with matrix-free actions.
 * Every action runs on a backend in a precision with a strategy, and fills a report.
 * Strong Dirichlet conditions: rows of constrained nodes are replaced by the identity:
 *   residual_i = u_i - g_i,   (J w)_i = w_i,   diag_i = 1,
 * and the Jacobian action sees w with its constrained entries set to zero (so J stays
 * symmetric when the physics is). */
#ifndef FE_OPERATOR_H
#define FE_OPERATOR_H

#include "engine/perf/perf.h"
#include "engine/physics/physics.h"
#include "engine/fem/space.h"
#include "engine/solve/vector.h"

typedef struct fe_operator fe_operator;

/* Where and how to run an action. NULL strings mean the session default. These are the
 * general options, read by the operator; a strategy's own options (block, walk, lanes, ...)
 * reach it only through `given`: each strategy names the options it takes and parses them into
 * a struct private to its file (engine/operator/options.h, engine/operator/strategy.h), as
 * PETSc's PCSetFromOptions_XXX does. Engine code beside the actions has options of its own:
 * the element matrices and the assembly take fe_matrix_opts (engine/matrix/matrix.h). */
typedef struct fe_action_opts {
  const char *backend;   /* "cpu", "opencl", "cuda" */
  int precision;         /* -1: default, else fe_precision */
  const char *strategy;  /* "transpose", "patch", "sumfact" (NULL: the default, A:strategies()) */
  const struct fe_options *given; /* the strategy's options as the caller wrote them (NULL:
                          * none; read by the strategy into its own): an option the strategy
                          * does not take is an error */
  const char *caller;    /* who asks ("A:apply"), the prefix of an error about an option */
  int autotune;          /* the default strategy: FE_AUTOTUNE_AUTO, _ON (measured) or _OFF (the
                          * model's), engine/operator/autotune.h */
  int nolog;             /* 1: keep this call out of the session log (solvers' inner calls) */
  int nowait;            /* 1: return once the work is queued, without waiting for the device
                          * (a solver's inner calls, timed as a whole: the report's seconds
                          * are then the time to queue) */
  /* CG on the device (backend.h's cg_parts): the apply may also add the direction's element
   * quadratic forms, sum over cells of w_e^T J_e w_e (w masked at constrained nodes), into
   * these partial sums at slot pq_slot; the report's pq_added says whether it did (NULL:
   * not asked) */
  const fe_buffer *pq;
  int pq_slot;
} fe_action_opts;

/* Whether the Jacobian action reads per-point data made once at setup (the geometry and
 * every coefficient of x, regions and constants folded together: engine/operator/qdata.h): where the
 * model says it pays, always (an error where it cannot), or never. */
enum { FE_FOLD_AUTO, FE_FOLD_ON, FE_FOLD_OFF };

/* Where the geometric factors come from: the model's choice, stored (a set a class of
 * congruent cells where the mesh has them, else a set a cell or point), recomputed from the
 * cell's corners (straight cells only), or stored a set a cell or point even where cells are
 * congruent. */
enum { FE_GEOMETRY_AUTO, FE_GEOMETRY_STORED, FE_GEOMETRY_VERTICES, FE_GEOMETRY_UNSHARED };

/* How sumfact adds the cells' results into y: the default, an atomic add per (cell, node),
 * or per node: the cells write an E-vector (cells x nodes, plain stores) and a second
 * kernel sums each node's entries through the node -> (cell, node) map. ebe's action and
 * the assembly's fill: atomic adds, or by color (cells of one color share no node: plain
 * adds, a launch per color), or per row (nodes: on the cpu while the host writes the
 * pattern, the element matrices made as the rows need them, else as rows; rows: each row
 * summing its cells' stored element matrices on the device, in cell order). */
enum { FE_SCATTER_AUTO, FE_SCATTER_ATOMIC, FE_SCATTER_NODES, FE_SCATTER_COLOR, FE_SCATTER_ROWS };

/* The layout of an assembled matrix's product: CSR, or SELL-C-sigma (Kreutzer et al. 2014:
 * rows sorted by length within windows of sigma rows, chunks of C rows padded to their
 * longest row and stored column-major, so the C items of a chunk read consecutive slots).
 * FE_FORMAT_CUSPARSE: the CSR arrays multiplied by cuSPARSE (cuda only), the reference. */
enum { FE_FORMAT_AUTO, FE_FORMAT_CSR, FE_FORMAT_SELL, FE_FORMAT_CUSPARSE };

void fe_action_opts_default(fe_action_opts *o);

/* The names of the strategies' own options (block, walk, lanes, ...), each once, in the
 * order of the strategies' table: what a shell may pass in fe_action_opts.given. NULL past
 * the last. */
const char *fe_action_option_name(int i);
/* The strategies that take option name, "patch" or "transpose, sumfact", into buf (empty:
 * none); returns how many. */
int fe_action_option_takers(const char *name, char *buf, size_t n);
/* The names of the options strategy st takes, ", "-separated, into buf (an unknown strategy:
 * an error). */
int fe_strategy_option_names(const char *strategy, char *buf, size_t n);

/* Borrowed: V and pde outlive the operator. dirichlet: tag names (NULL, 0 = none; the
 * single name "all" = whole boundary), value: the prescribed value g. */
int fe_operator_create(const fe_space *V, const fe_physics *pde, const char *const *dirichlet,
                       int ndirichlet, double value, fe_operator **out);
void fe_operator_free(fe_operator *A);
/* Replace every action's quadrature: degree k (-1: each action's own exact degree) of family
 * kind (engine/fem/quadrature.h). Realizations made so far are dropped. */
int fe_operator_set_quadrature(fe_operator *A, int degree, int kind);
/* The rule of an action ("residual", "apply", "diagonal"), for reports and tests. */
const struct fe_quadrature *fe_operator_quadrature(const fe_operator *A, const char *action);
const fe_space *fe_operator_space(const fe_operator *A);
/* How many realizations (a strategy's set-up data on a backend in a precision for its
 * effective options) A holds now: at most 8, the least recently used dropped first. */
int fe_operator_realizations(const fe_operator *A);
int fe_operator_ndirichlet(const fe_operator *A);

/* The outputs: if *out is a vector of the right size on the action's backend and precision
 * it is overwritten, otherwise a new one is made (the caller frees it). Inputs on another
 * backend or precision are converted (the copy is timed in rep->transfer_seconds). */
int fe_operator_residual(fe_operator *A, const fe_vector *u, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep);
/* Jacobian action on w at state `at` (NULL: at zero). */
/* The 2-norm of v's constrained entries (0 without constraints), on the backend of the
 * realization o chooses; *norm < 0 where v is not on it (not known). */
int fe_operator_constrained_norm(fe_operator *A, const fe_vector *v, const fe_action_opts *o,
                                 double *norm);
int fe_operator_apply(fe_operator *A, const fe_vector *w, const fe_vector *at,
                      const fe_action_opts *o, fe_vector **out, fe_report *rep);
int fe_operator_diagonal(fe_operator *A, const fe_vector *at, const fe_action_opts *o,
                         fe_vector **out, fe_report *rep);
/* Make the action ready on the backend of o (device data, compiled kernel, an apply's
 * folded per-point data) without running it; *compile_seconds gets the JIT time (0 when
 * already compiled or cached), the rest of the setup is reported by the action's next call. */
int fe_operator_prepare(fe_operator *A, const char *action, const fe_action_opts *o,
                        double *compile_seconds);
/* A vector of the operator's size on the action's backend holding the boundary values on
 * constrained nodes and `interior` elsewhere. */
int fe_operator_initial(fe_operator *A, const fe_action_opts *o, double interior, fe_vector **out);

/* The model's view of an action without running it: the work its strategy counts per
 * ceiling, the compiled kernel's occupancy and the prediction on o's backend, in rep
 * (seconds 0: nothing measured). Builds and compiles what the action needs. */
int fe_operator_model(fe_operator *A, const char *action, const fe_action_opts *o,
                      fe_report *rep);
/* The complete source an action compiles to on a backend (backend preamble included);
 * action "residual", "apply" or "diagonal". *src is malloc'd. */
int fe_operator_source(fe_operator *A, const char *action, const fe_action_opts *o, char **src);
/* What A:strategies() shows: every strategy, whether it applies on the backend and
 * precision of o (and why not), its predicted apply time, and which the default is. */
typedef struct fe_strategy_info {
  const char *name, *summary;
  int applies, is_default;
  double predicted_seconds; /* the model's apply time (applies only) */
  char why[256];            /* why not, or why it is the default */
} fe_strategy_info;
int fe_operator_strategy_info(fe_operator *A, const fe_action_opts *o, fe_strategy_info *info,
                              int max, int *n);

/* J^T as an operator on A's space (its apply is the transposed Jacobian action at the same
 * state; BiCG's shadow system): A itself when the physics is symmetric pointwise, else a
 * companion made once, owned by A and freed with it. A physics written in C (not traced)
 * has no known transpose: an error naming it. */
int fe_operator_transpose(fe_operator *A, fe_operator **AT);

#endif
