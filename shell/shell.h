/* felab shell: the Lua bindings of the engine and the help system. */
#ifndef FE_SHELL_H
#define FE_SHELL_H

#include <lauxlib.h>
#include <lua.h>

#define FELAB_VERSION "0.1.0"

/* Open every felab module as a global table: mesh, fe, physics, solve, device, perf,
 * export, plus help(). Defined in shell/lua-felab.c. */
void felab_open_all(lua_State *L);

/* one per binding file */
int felab_open_mesh(lua_State *L);    /* shell/lua-mesh.c:    mesh.box, mesh metatable */
int felab_open_fe(lua_State *L);      /* shell/lua-fe.c:      fe.space, fe.operator, spaces, vectors, operators */
int felab_open_physics(lua_State *L); /* shell/lua-physics.c: physics.poisson */
int felab_open_solve(lua_State *L);   /* shell/lua-solve.c:   solve.cg */
int felab_open_device(lua_State *L);  /* shell/lua-device.c:  device.*, perf.*, reports */
int felab_open_export(lua_State *L);  /* shell/lua-export.c:  export.vtu */
int felab_open_help(lua_State *L);    /* shell/help.c:        help() */
int felab_open_vector(lua_State *L);  /* shell/lua-vector.c:  the vector metatable */
int felab_open_operator(lua_State *L); /* shell/lua-operator.c: fe.operator and its metatable */
/* shell/lua-progress.c: the live line of long calls, drawn when terminal (stdin and stderr
 * are terminals) unless FELAB_PROGRESS=0; adds perf.progress (after felab_open_all). */
void felab_open_progress(lua_State *L, int terminal);

/* shell/ranks.c: felab under mpirun. Start MPI when launched so, silence the standard output
 * of ranks above 0 (returns nonzero after printing why it cannot); read a line at rank 0 with
 * read and hand it to every rank (alone: read itself); report: each rank's error message
 * (NULL: none) to rank 0, which prints each with its ranks, returning whether any rank failed
 * (alone: whether msg is set, nothing printed); fail: a script's error on a rank among several,
 * printed with the rank, then every rank stopped (alone: returns); open: the table mpi. */
typedef int (*felab_line_reader)(const char *prompt, char **out);
int felab_ranks_start(void);
int felab_ranks_read_line(felab_line_reader read, const char *prompt, char **out);
int felab_ranks_report(const char *msg);
void felab_ranks_fail(const char *msg);
void felab_open_ranks(lua_State *L);
/* shell/lua-partition.c: m:partition (a method of felab.mesh), its metatable and help;
 * felab_check_partition: the partition at i (an error unless one of ncells cells): each
 * cell's part, their number into *nparts. */
int felab_mesh_partition(lua_State *L);
void felab_open_partition(lua_State *L);
const int *felab_check_partition(lua_State *L, int i, int ncells, int *nparts);

/* Raise the engine's current error (engine/core/error.h) as a Lua error and clear it. */
int felab_raise(lua_State *L);
/* Call an engine function result: on nonzero raise it. */
#define FELAB_TRY(L, call)                 \
  do {                                     \
    if ((call) != 0) return felab_raise(L); \
  } while (0)

/* Push a report as a userdata of type "felab.report" (fields flops, bytes, seconds,
 * gflops, gbytes, predicted_seconds, bound, ...; tostring prints the block). */
struct fe_report;
void felab_push_report(lua_State *L, const struct fe_report *r);
/* Push the helpers the libraries written in Lua share (shell/lib/util.lua: kind, options),
 * loaded once. */
void felab_push_util(lua_State *L);
/* Push a calibration's ceilings as a table (device.info(...).calibration.double). */
struct fe_calibration;
void felab_push_calibration(lua_State *L, const struct fe_calibration *c);
/* shell/lua-exchange.c: the link between ranks and the exchange's model. Add device.link (to
 * the device table on top), perf.exchange, perf.reduction, perf.share (to the global perf). */
void felab_open_exchange(lua_State *L);
/* Under mpirun with more than one rank, measure and store the link (collective) and push it
 * as a table: returns 1; else pushes nothing, returns 0. */
int felab_calibrate_link(lua_State *L);
/* The host's copies of a calibration table at idx (read_us, read_gbytes, write_us,
 * write_gbytes; absent or not a positive number: 0) into c. */
void felab_calibration_transfers(lua_State *L, int idx, struct fe_calibration *c);

/* Help entries: key is "mesh.box", "fe.space", or a type name like "felab.mesh". */
void felab_help_add(const char *key, const char *signature, const char *text);

/* Userdata type names (metatables registered with luaL_newmetatable). */
#define FELAB_MESH "felab.mesh"
#define FELAB_SPACE "felab.space"
#define FELAB_VECTOR "felab.vector"
#define FELAB_PHYSICS "felab.physics"
#define FELAB_OPERATOR "felab.operator"
#define FELAB_REPORT "felab.report"
#define FELAB_ELEMATS "felab.elemats"
#define FELAB_MATRIX "felab.matrix"
/* The metatable of a solver's info table (a plain table): info:plot (shell/lib/plot.lua). */
#define FELAB_INFO "felab.info"

/* shell/lua-matrix.c: the types of element matrices and assembled matrices (registered by
 * felab_open_matrix, which pushes nothing), A:element_matrices, A:assemble, export.mtx. */
void felab_open_matrix(lua_State *L);
int felab_op_element_matrices(lua_State *L);
int felab_op_assemble(lua_State *L);
int felab_export_mtx(lua_State *L);

/* Handles: every felab userdata holds its engine pointer first (NULL once freed); vectors
 * and operators are that pointer alone. Meshes, spaces and physics add how many live
 * handles borrow them (spaces borrow their mesh, operators their space and physics), so
 * that __close on a borrowed object leaves it to the collector; the borrower keeps its
 * owner alive in a user value. */
struct fe_mesh;
struct fe_space;
struct fe_physics;
struct fe_vector;
typedef struct mesh_handle {
  struct fe_mesh *m;
  int borrowers; /* live spaces on this mesh */
} mesh_handle;
typedef struct space_handle {
  struct fe_space *V;
  int borrowers; /* live operators on this space, or a running interpolation or error */
} space_handle;
typedef struct physics_handle {
  struct fe_physics *p;          /* raw or built-in physics (any dimension), or the last trace */
  struct fe_physics *traced[4];  /* traced physics per dimension 1..3 (p is one of them) */
  int borrowers; /* live operators made from this physics */
} physics_handle;

/* The physics at i for a space of dimension dim: traced for it on first use (the Lua
 * functions are kept by the handle), or an error naming the Lua line of a failing trace. */
struct fe_physics *felab_physics_for(lua_State *L, int i, int dim, const char *fname);

/* shell/complete.c (with readline): the prompt's tab completion over the globals of state
 * L (felab_complete_state first), as readline's attempted-completion function; free its
 * candidates at the end. */
#ifdef FE_HAVE_READLINE
void felab_complete_state(lua_State *L);
char **felab_complete(const char *text, int start, int end);
void felab_complete_free(void);
#endif

/* ----- helpers shared by the binding files (shell/lua-util.c) ----- */

/* How a value reads in a message: "mesh" for a felab.mesh, else Lua's type name; and the
 * same but a number as Lua prints it. */
const char *felab_kind_of(lua_State *L, int i);
const char *felab_number_or_kind(lua_State *L, int i);
/* Whether the value at i is a number with an integer value (into *x); "3" is not. */
int felab_is_integer(lua_State *L, int i, lua_Integer *x);
/* Error unless every key of the option table at t is one of the NULL-ended list valid, and
 * the table has no metatable (an __index read later could close what the call holds). */
void felab_check_keys(lua_State *L, int t, const char *fname, const char *const *valid);

/* The userdata of type tname at i, or an error "<fname>: expected a <type> as <what>, got
 * <kind>"; felab_check_handle adds "<fname>: the <type> (<what>) was closed", and
 * felab_check_self (for a method's self) "<fname>: this <type> was closed". */
void *felab_expect(lua_State *L, int i, const char *tname, const char *fname, const char *what);
void *felab_check_handle(lua_State *L, int i, const char *tname, const char *fname,
                         const char *what);
void *felab_check_self(lua_State *L, int i, const char *tname, const char *fname,
                       const char *what);
/* The open vector at i (felab_check_handle). */
struct fe_vector *felab_check_vector(lua_State *L, int i, const char *fname, const char *what);

/* An optional name: the value at i, or opts[key] of the table at t (NULL when nil or
 * absent), or an error "<fname>: <what> must be a name, got <kind>". */
const char *felab_opt_name(lua_State *L, int i, const char *fname, const char *what);
const char *felab_opt_field_name(lua_State *L, int t, const char *fname, const char *key);
/* The keys of an action's options table: the general ones (backend, precision, strategy,
 * autotune), every strategy's own (block, walk, ..., from the engine's strategy table) and
 * extra (NULL-ended, or NULL), into keys[max] NULL-ended; returns how many. */
int felab_action_keys(const char *const *extra, const char **keys, int max);
/* The general options of the table at t into o: backend, strategy, precision, autotune. */
struct fe_action_opts;
struct fe_options;
void felab_read_general_opts(lua_State *L, int t, const char *fname, struct fe_action_opts *o);
/* The strategies' own options of the table at t as the engine's neutral list (names, values:
 * number, string, boolean) into given, which o then points to, with fname as the caller of
 * o's errors: the strategy the engine picks reads and checks them (engine/operator/strategy.h). */
void felab_read_strategy_opts(lua_State *L, int t, const char *fname, struct fe_options *given,
                              struct fe_action_opts *o);

/* Push a handle of type tname holding NULL (the caller stores the engine pointer), its user
 * value 1 the value at index owner (kept alive while the handle lives). */
void **felab_push_handle(lua_State *L, const char *tname, int owner);
/* Push a vector handle holding NULL (the caller stores the engine vector) that remembers the
 * value at index space, or the space of the vector or operator at i. */
struct fe_vector **felab_push_vector(lua_State *L, int space);
struct fe_vector **felab_push_vector_like(lua_State *L, int i);
/* Push the host doubles of x as a userdata (n + 1 doubles) and return them. */
double *felab_push_host_values(lua_State *L, const struct fe_vector *x);

/* __index's first step: NULL with the method of key 2 (or nil) pushed, or the field name. */
const char *felab_index_method(lua_State *L);
/* Register the metatable tname (meta, methods, __index = index over the methods) and leave
 * it on the stack. */
void felab_register_type(lua_State *L, const char *tname, const luaL_Reg *meta,
                         const luaL_Reg *methods, lua_CFunction index);

/* A Lua function (or a constant) seen by the engine as a fe_point_fn (engine/fem/space.h):
 * felab_point_fn_init checks argument i of where and pushes a reused argument table;
 * felab_point_fn_call, the fe_point_fn, calls the function under lua_pcall and turns a Lua
 * error into an engine error. */
typedef struct felab_point_fn {
  lua_State *L;
  int fn;            /* stack index of the function, 0 for a constant */
  int x;             /* stack index of the reused argument table {x, y, z} */
  double constant;   /* the value when fn == 0 */
  const char *where; /* the Lua-side name of the caller, for messages */
} felab_point_fn;
void felab_point_fn_init(lua_State *L, int i, const char *where, felab_point_fn *f);
int felab_point_fn_call(void *ctx, const double x[3], int n, double *values);

#endif
