/* felab shell: solvers. solve.cg, solve.bicg, solve.bicgstab, solve.gmres (A [, b] [, opts])
 * -> x, info; solve.newton(A [, opts]) -> u, info; solve.precond(A, opts) -> P, a
 * preconditioner (felab.precond) made once and passed to solves as pc = P. The options pc,
 * degree, lanczos, ratio, parts and cycles choose a unit of engine/solve/precond.h and set its
 * options. A solve that stops without converging is
 * a result (info.converged = false), not an error. CG's breakdown (J not positive definite)
 * or divergence is raised; the nonsymmetric solvers return theirs as a result (reason
 * "breakdown: ..." or "diverged: ..."), so that x and the history can be looked at. An
 * interrupt is always raised. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/solve/newton.h"
#include "engine/operator/options.h"
#include "engine/solve/precond.h"
#include "engine/solve/solver.h"
#include "shell/shell.h"

#define FELAB_PRECOND "felab.precond"

/* A preconditioner handle: the engine object first (NULL once freed), then copies of the
 * strings it keeps pointers to (the options table they came from may be collected).
 * User value 1: the operator it was made for. */
typedef struct precond_handle {
  fe_precond *P;
  char strategy[64], parts[32];
  fe_options given; /* the strategy's own options (P's actions point to them) */
} precond_handle;

/* The keys of each call beside the actions' own (felab_action_keys adds those). */
static const char *const cg_keys[] = {"pc", "rtol", "atol", "maxit", "monitor", "x0", "degree",
                                      "lanczos", "ratio", "parts", "cycles", "cycle_on",
                                      "cycle_values", "aggressive", "theta", "fuse_pq", NULL};
static const char *const gmres_keys[] = {"pc", "rtol", "atol", "maxit", "monitor", "x0",
                                         "restart", "degree", "lanczos", "ratio", "parts",
                                         "cycles", "cycle_on", "cycle_values", "aggressive", "theta",
                                         NULL};
static const char *const newton_keys[] = {"linear", "pc", "rtol", "atol", "maxit", "linear_rtol",
                                          "linear_maxit", "linesearch", "monitor", "x0",
                                          "restart", "degree", "lanczos", "ratio", "parts",
                                          "cycles", "cycle_on", "cycle_values", "aggressive",
                                          "theta", NULL};

/* Check the options table at t against the actions' keys and extra. */
static void check_solve_keys(lua_State *L, int t, const char *fname, const char *const *extra)
{
  const char *keys[64];
  felab_action_keys(extra, keys, 64);
  felab_check_keys(L, t, fname, keys);
}

/* opts[key] as a finite number >= 0 into *v (kept when absent); fname names the caller. */
static void opt_tolerance(lua_State *L, int t, const char *fname, const char *key, double *v)
{
  int type = lua_getfield(L, t, key);
  if (type == LUA_TNUMBER) {
    double x = lua_tonumber(L, -1);
    if (!(x >= 0) || !isfinite(x))
      luaL_error(L, "%s: %s = %s must be a finite number >= 0", fname, key, lua_tostring(L, -1));
    *v = x;
  } else if (type != LUA_TNIL) {
    luaL_error(L, "%s: %s must be a number, got %s", fname, key, felab_kind_of(L, -1));
  }
  lua_pop(L, 1);
}

/* opts[key] as an integer in [lo, INT_MAX] into *v (kept when absent). */
static void opt_integer(lua_State *L, int t, const char *fname, const char *key, int lo, int *v)
{
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    lua_Integer x;
    if (!felab_is_integer(L, -1, &x) || x < lo || x > INT_MAX)
      luaL_error(L, "%s: %s must be an integer >= %d, got %s", fname, key, lo,
                 felab_number_or_kind(L, -1));
    *v = (int)x;
  }
  lua_pop(L, 1);
}

/* Where and how the actions run: the general options, and the strategy's own into given
 * (its strategy reads them, engine/operator/strategy.h). */
static void read_action_opts(lua_State *L, int t, const char *fname, fe_action_opts *act,
                             fe_options *given)
{
  felab_read_general_opts(L, t, fname, act);
  felab_read_strategy_opts(L, t, fname, given, act);
}

/* The options every solve shares: where it runs (read_action_opts), monitor and x0 (*x0 NULL
 * when absent). */
static void read_common_opts(lua_State *L, int t, const char *fname, fe_action_opts *act,
                             fe_options *given, int *monitor, const fe_vector **x0)
{
  read_action_opts(L, t, fname, act, given);
  int type = lua_getfield(L, t, "monitor");
  if (type == LUA_TBOOLEAN) *monitor = lua_toboolean(L, -1);
  else if (type != LUA_TNIL)
    luaL_error(L, "%s: monitor must be true or false, got %s", fname, felab_kind_of(L, -1));
  lua_pop(L, 1);
  lua_getfield(L, t, "x0");
  if (!lua_isnil(L, -1)) *x0 = felab_check_vector(L, -1, fname, "opts.x0");
  lua_pop(L, 1); /* still anchored in the table */
}


/* The open preconditioner at i whose operator is still open, or an error naming fname. */
static fe_precond *check_precond(lua_State *L, int i, const char *fname, const char *what)
{
  fe_precond *P = *(fe_precond **)felab_check_handle(L, i, FELAB_PRECOND, fname, what);
  lua_getiuservalue(L, i, 1);
  int closed = *(fe_operator **)lua_touserdata(L, -1) == NULL;
  lua_pop(L, 1);
  if (closed)
    luaL_error(L, "%s: the operator the preconditioner (%s) was made for was closed", fname,
               what);
  return P;
}

/* opts.pc: a unit's name (checked against the table; the error lists them), or, where given
 * is not NULL, a preconditioner made by solve.precond (into *given, *pc its unit's name). */
static void opt_pc(lua_State *L, int t, const char *fname, const char **pc, fe_precond **given)
{
  if (lua_getfield(L, t, "pc") == LUA_TUSERDATA && given) {
    *given = check_precond(L, -1, fname, "opts.pc");
    *pc = (*given)->kind->name;
    lua_pop(L, 1); /* still anchored in the table */
    return;
  }
  if (luaL_testudata(L, -1, FELAB_PRECOND))
    luaL_error(L, "%s: pc must be a unit's name here, not a preconditioner made by "
               "solve.precond (solve.newton makes one anew for J at every step)", fname);
  lua_pop(L, 1);
  const char *v = felab_opt_field_name(L, t, fname, "pc");
  if (!v) return;
  if (!fe_precond_find(v)) {
    char names[200];
    fe_precond_names(names, sizeof names);
    luaL_error(L, "%s: unknown preconditioner pc = \"%s\" (%s)", fname, v, names);
  }
  *pc = v;
}

/* The units' options degree, lanczos, ratio, parts, cycles of the table at t into po. */
static void read_pc_opts(lua_State *L, int t, const char *fname, fe_precond_opts *po)
{
  opt_integer(L, t, fname, "degree", 1, &po->degree);
  opt_integer(L, t, fname, "lanczos", 1, &po->lanczos);
  opt_integer(L, t, fname, "cycles", 1, &po->cycles);
  opt_integer(L, t, fname, "aggressive", 0, &po->aggressive);
  opt_tolerance(L, t, fname, "ratio", &po->ratio);
  opt_tolerance(L, t, fname, "theta", &po->theta);
  if (!(po->theta < 1)) {
    char v[32];
    snprintf(v, sizeof v, "%g", po->theta);
    luaL_error(L, "%s: theta = %s must be below 1 (BoomerAMG's strong threshold)", fname, v);
  }
  if (!(po->ratio < 1)) {
    char v[32];
    snprintf(v, sizeof v, "%g", po->ratio);
    luaL_error(L, "%s: ratio = %s must be below 1 (the lower bound is ratio * the upper)", fname,
               v);
  }
  const char *parts = felab_opt_field_name(L, t, fname, "parts");
  if (parts) po->parts = parts;
  const char *on = felab_opt_field_name(L, t, fname, "cycle_on");
  if (on && strcmp(on, "host") && strcmp(on, "device"))
    luaL_error(L, "%s: cycle_on must be \"host\" (BoomerAMG's cycle on the host) or \"device\" "
               "(amg's hierarchy cycled on the solve's backend), got '%s'", fname, on);
  if (on) po->cycle_on = strcmp(on, "device") ? FE_CYCLE_HOST : FE_CYCLE_DEVICE;
  const char *vals = felab_opt_field_name(L, t, fname, "cycle_values");
  if (vals && strcmp(vals, "single") && strcmp(vals, "double"))
    luaL_error(L, "%s: cycle_values must be \"single\" (the device cycle's level matrices "
               "stored float in a double solve) or \"double\", got '%s'", fname, vals);
  if (vals) po->cycle_values = strcmp(vals, "double") ? FE_VALUES_SINGLE : FE_VALUES_DOUBLE;
}

/* Fill o from the options table at t of a linear solve fname ("solve.cg", ...); *x0 gets
 * opts.x0 (NULL when absent). Only gmres takes restart. */
static void read_linear_opts(lua_State *L, int t, const char *fname, fe_solver_opts *o,
                             fe_options *given, const fe_vector **x0)
{
  fe_solver_opts_default(o);
  *x0 = NULL;
  if (lua_isnoneornil(L, t)) return;
  int gmres = !strcmp(fname, "solve.gmres");
  check_solve_keys(L, t, fname, gmres ? gmres_keys : cg_keys);
  opt_pc(L, t, fname, &o->pc, &o->precond);
  read_pc_opts(L, t, fname, &o->pc_opts);
  opt_tolerance(L, t, fname, "rtol", &o->rtol);
  opt_tolerance(L, t, fname, "atol", &o->atol);
  opt_integer(L, t, fname, "maxit", 0, &o->maxit);
  if (gmres) opt_integer(L, t, fname, "restart", 1, &o->restart);
  if (!gmres) { /* solve.cg's alone (bicg and bicgstab share cg_keys) */
    int type = lua_getfield(L, t, "fuse_pq");
    if (type != LUA_TNIL && strcmp(fname, "solve.cg"))
      luaL_error(L, "%s: fuse_pq is an option of solve.cg", fname);
    if (type == LUA_TBOOLEAN) o->pq_pass = !lua_toboolean(L, -1);
    else if (type != LUA_TNIL)
      luaL_error(L, "%s: fuse_pq must be true or false, got %s", fname, felab_kind_of(L, -1));
    lua_pop(L, 1);
  }
  read_common_opts(L, t, fname, &o->act, given, &o->monitor, x0);
  o->pc_opts.verbose = o->monitor;
}

/* Fill o from solve.newton's options table at t; *x0 gets opts.x0 (NULL when absent). */
static void read_newton_opts(lua_State *L, int t, fe_newton_opts *o, fe_options *given,
                             const fe_vector **x0)
{
  const char *fname = "solve.newton";
  fe_newton_opts_default(o);
  *x0 = NULL;
  if (lua_isnoneornil(L, t)) return;
  check_solve_keys(L, t, fname, newton_keys);
  const char *linear = felab_opt_field_name(L, t, fname, "linear");
  if (linear && !fe_solver_known(linear))
    luaL_error(L, "%s: unknown linear solver linear = \"%s\" (cg, bicg, bicgstab, gmres)", fname,
               linear);
  if (linear) o->linear = linear;
  opt_pc(L, t, fname, &o->pc, NULL);
  read_pc_opts(L, t, fname, &o->pc_opts);
  opt_integer(L, t, fname, "restart", 1, &o->restart);
  const char *ls = felab_opt_field_name(L, t, fname, "linesearch");
  if (ls) o->linesearch = ls;
  opt_tolerance(L, t, fname, "rtol", &o->rtol);
  opt_tolerance(L, t, fname, "atol", &o->atol);
  opt_tolerance(L, t, fname, "linear_rtol", &o->linear_rtol);
  opt_integer(L, t, fname, "maxit", 0, &o->maxit);
  opt_integer(L, t, fname, "linear_maxit", 0, &o->linear_maxit);
  read_common_opts(L, t, fname, &o->act, given, &o->monitor, x0);
  o->pc_opts.verbose = o->monitor;
}

/* What the info table shows, from a CG or a Newton solve. */
typedef struct info_view {
  int iterations, converged, nhistory;
  const char *reason;
  const double *history;
  const fe_report *report;
  int linear_iterations; /* -1: not a Newton solve */
  const char *pc;        /* the preconditioner that ran */
  double pc_setup_seconds;
  int pq_from_apply;     /* cg: (p, q) from the applies (-1: not said) */
} info_view;

/* Protected: build the info table from the info_view at the light userdata 1, so that the
 * caller can free its history whatever happens. */
static int push_info(lua_State *L)
{
  const info_view *info = lua_touserdata(L, 1);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, info->iterations);
  lua_setfield(L, -2, "iterations");
  lua_pushboolean(L, info->converged);
  lua_setfield(L, -2, "converged");
  lua_pushstring(L, info->reason);
  lua_setfield(L, -2, "reason");
  lua_createtable(L, info->nhistory, 0);
  for (int i = 0; i < info->nhistory; i++) {
    lua_pushnumber(L, info->history[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "history");
  if (info->linear_iterations >= 0) {
    lua_pushinteger(L, info->linear_iterations);
    lua_setfield(L, -2, "linear_iterations");
  }
  lua_pushstring(L, info->pc);
  lua_setfield(L, -2, "pc");
  lua_pushnumber(L, info->pc_setup_seconds);
  lua_setfield(L, -2, "pc_setup_seconds");
  if (info->pq_from_apply >= 0) {
    lua_pushboolean(L, info->pq_from_apply);
    lua_setfield(L, -2, "pq_from_apply");
  }
  felab_push_report(L, info->report);
  lua_setfield(L, -2, "report");
  luaL_setmetatable(L, FELAB_INFO); /* info:plot (shell/lib/plot.lua) */
  return 1;
}

/* Push the info table (or leave an error message) under lua_pcall: the Lua status. */
static int push_info_protected(lua_State *L, const info_view *v)
{
  lua_pushcfunction(L, push_info);
  lua_pushlightuserdata(L, (void *)v);
  return lua_pcall(L, 1, 1, 0);
}

/* solve.<method>(A [, b] [, opts]) -> x, info {iterations, converged, reason, history,
 * report}, method "cg", "bicg", "bicgstab" or "gmres". */
static int solve_linear(lua_State *L, const char *method)
{
  char fname[32];
  snprintf(fname, sizeof fname, "solve.%s", method);
  fe_operator *A = *(fe_operator **)felab_check_handle(L, 1, FELAB_OPERATOR, fname, "argument 1");
  const fe_vector *b = NULL;
  int t = 2;
  if (luaL_testudata(L, 2, FELAB_VECTOR)) {
    b = felab_check_vector(L, 2, fname, "argument 2 (b)");
    t = 3;
  } else if (lua_isnil(L, 2) && !lua_isnone(L, 3)) {
    t = 3;
  } else if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2)) {
    return luaL_error(L, "%s: argument 2 must be a vector b or an options table, got %s", fname,
                      felab_kind_of(L, 2));
  }
  if (!lua_isnoneornil(L, t) && !lua_istable(L, t))
    return luaL_error(L, "%s: argument %d must be an options table, got %s", fname, t,
                      felab_kind_of(L, t));
  lua_settop(L, 3);
  fe_solver_opts o;
  const fe_vector *x0;
  fe_options given;
  read_linear_opts(L, t, fname, &o, &given, &x0);

  fe_vector **out = felab_push_vector_like(L, 1); /* x remembers A's space */
  int xi = lua_gettop(L);

  fe_solver_info info;
  memset(&info, 0, sizeof info);
  fe_vector *x = NULL;
  int rc = fe_solve_linear(method, A, b, x0, &o, &x, &info);
  if (rc) {
    fe_solver_info_free(&info);
    return felab_raise(L);
  }
  *out = x;
  info_view v = {info.iterations, info.converged, info.nhistory, info.reason, info.history,
                 &info.report, -1, info.pc, info.pc_setup_seconds,
                 strcmp(method, "cg") ? -1 : info.pq_from_apply};
  int status = push_info_protected(L, &v);
  fe_solver_info_free(&info);
  if (status != LUA_OK) return lua_error(L);
  lua_pushvalue(L, xi);
  lua_insert(L, -2);
  return 2;
}

static int solve_cg(lua_State *L) { return solve_linear(L, "cg"); }
static int solve_bicg(lua_State *L) { return solve_linear(L, "bicg"); }
static int solve_bicgstab(lua_State *L) { return solve_linear(L, "bicgstab"); }
static int solve_gmres(lua_State *L) { return solve_linear(L, "gmres"); }

/* solve.newton(A [, opts]) -> u, info {iterations, converged, reason, history,
 * linear_iterations, report} */
static int solve_newton(lua_State *L)
{
  const char *fname = "solve.newton";
  fe_operator *A = *(fe_operator **)felab_check_handle(L, 1, FELAB_OPERATOR, fname, "argument 1");
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    return luaL_error(L, "%s: argument 2 must be an options table, got %s (an initial guess "
                      "goes in opts.x0)", fname, felab_kind_of(L, 2));
  lua_settop(L, 2);
  fe_newton_opts o;
  const fe_vector *x0;
  fe_options given;
  read_newton_opts(L, 2, &o, &given, &x0);

  fe_vector **out = felab_push_vector_like(L, 1); /* u remembers A's space */
  int ui = lua_gettop(L);

  fe_newton_info info;
  memset(&info, 0, sizeof info);
  fe_vector *u = NULL;
  if (fe_solve_newton(A, x0, &o, &u, &info)) {
    fe_newton_info_free(&info);
    return felab_raise(L);
  }
  *out = u;
  info_view v = {info.iterations, info.converged, info.nhistory, info.reason, info.history,
                 &info.report, info.linear_iterations, info.pc, info.pc_setup_seconds, -1};
  int status = push_info_protected(L, &v);
  fe_newton_info_free(&info);
  if (status != LUA_OK) return lua_error(L);
  lua_pushvalue(L, ui);
  lua_insert(L, -2);
  return 2;
}

/* solve.transpose_apply(A, v [, {at = u, backend, precision, strategy}]) -> J(at)^T v: the
 * transposed Jacobian action BiCG's shadow system runs (fe_operator_transpose), for checks
 * such as (v, J w) = (J^T v, w). */
static int solve_transpose_apply(lua_State *L)
{
  const char *fname = "solve.transpose_apply";
  static const char *const keys[] = {"at", "backend", "precision", "strategy", NULL};
  fe_operator *A = *(fe_operator **)felab_check_handle(L, 1, FELAB_OPERATOR, fname, "argument 1");
  const fe_vector *v = felab_check_vector(L, 2, fname, "argument 2 (v)");
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    return luaL_error(L, "%s: argument 3 must be an options table, got %s", fname,
                      felab_kind_of(L, 3));
  lua_settop(L, 3);
  fe_action_opts act;
  fe_action_opts_default(&act);
  const fe_vector *at = NULL;
  if (lua_istable(L, 3)) {
    felab_check_keys(L, 3, fname, keys);
    act.backend = felab_opt_field_name(L, 3, fname, "backend");
    act.strategy = felab_opt_field_name(L, 3, fname, "strategy");
    const char *prec = felab_opt_field_name(L, 3, fname, "precision");
    fe_precision p;
    if (prec && fe_precision_parse(prec, &p)) return felab_raise(L);
    if (prec) act.precision = (int)p;
    lua_getfield(L, 3, "at");
    if (!lua_isnil(L, -1)) at = felab_check_vector(L, -1, fname, "opts.at");
    lua_pop(L, 1); /* still anchored in the table */
  }
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_operator *AT;
  fe_report rep;
  if (fe_operator_transpose(A, &AT) || fe_operator_apply(AT, v, at, &act, out, &rep))
    return felab_raise(L);
  return 1;
}

/* ---- felab.precond ---- */

static const char *const precond_keys[] = {"pc", "degree", "lanczos", "ratio", "parts",
                                           "cycles", "cycle_on", "cycle_values", "aggressive",
                                           "theta", "verbose", "at", NULL};

/* solve.precond(A, {pc = "chebyshev", degree =, lanczos =, ratio =, parts =, cycles =,
 * verbose =, at = u, backend =, precision =, strategy = ...}) -> P, set up for J(at) on that
 * backend and precision, to pass to solves as pc = P. */
static int solve_precond(lua_State *L)
{
  const char *fname = "solve.precond";
  fe_operator *A = *(fe_operator **)felab_check_handle(L, 1, FELAB_OPERATOR, fname, "argument 1");
  if (!lua_istable(L, 2))
    return luaL_error(L, "%s: argument 2 must be an options table {pc = \"chebyshev\", ...}, "
                      "got %s", fname, felab_kind_of(L, 2));
  lua_settop(L, 2);
  check_solve_keys(L, 2, fname, precond_keys);
  fe_precond_opts po;
  fe_precond_opts_default(&po);
  opt_pc(L, 2, fname, &po.name, NULL);
  read_pc_opts(L, 2, fname, &po);
  if (lua_getfield(L, 2, "verbose") == LUA_TBOOLEAN) po.verbose = lua_toboolean(L, -1);
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "%s: verbose must be true or false, got %s", fname, felab_kind_of(L, -1));
  lua_pop(L, 1);
  fe_action_opts act;
  fe_action_opts_default(&act);
  fe_options given;
  read_action_opts(L, 2, fname, &act, &given);
  const fe_vector *at = NULL;
  lua_getfield(L, 2, "at");
  if (!lua_isnil(L, -1)) at = felab_check_vector(L, -1, fname, "opts.at");
  lua_pop(L, 1); /* still anchored in the table */
  int n = fe_operator_space(A)->ndofs;
  if (at && at->n != n)
    return luaL_error(L, "%s: opts.at has %d entries but the operator's space has %d", fname,
                      at->n, n);
  precond_handle *h = lua_newuserdatauv(L, sizeof *h, 1);
  memset(h, 0, sizeof *h);
  luaL_setmetatable(L, FELAB_PRECOND);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  if (act.strategy) { /* P keeps the pointers: copies that live as long as the handle */
    snprintf(h->strategy, sizeof h->strategy, "%s", act.strategy);
    act.strategy = h->strategy;
  }
  if (act.given) {
    h->given = given;
    act.given = &h->given;
  }
  if (po.parts) {
    snprintf(h->parts, sizeof h->parts, "%s", po.parts);
    po.parts = h->parts;
  }
  fe_precond *P = NULL;
  FELAB_TRY(L, fe_precond_create(A, at, &act, &po, &P));
  h->P = P;
  return 1;
}

/* P:apply(r) -> z = M^-1 r on P's backend and precision (r is converted when elsewhere) */
static int precond_apply(lua_State *L)
{
  const char *fname = "P:apply";
  fe_precond *P = *(fe_precond **)felab_check_self(L, 1, FELAB_PRECOND, fname, "self");
  check_precond(L, 1, fname, "self");
  const fe_vector *r = felab_check_vector(L, 2, fname, "argument 1 (r)");
  int n = fe_operator_space(P->A)->ndofs;
  if (r->n != n)
    return luaL_error(L, "%s: r has %d entries but the preconditioner's space has %d", fname,
                      r->n, n);
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(P->act.backend, &be));
  fe_vector **out = felab_push_vector_like(L, 2);
  fe_vector *rc = NULL, *z = NULL;
  const fe_vector *rr = r;
  if (r->be != be || (int)r->prec != P->act.precision) {
    FELAB_TRY(L, fe_vector_convert(r, be, (fe_precision)P->act.precision, &rc));
    rr = rc;
  }
  int err = fe_precond_apply(P, rr, &z);
  fe_vector_free(rc);
  if (err) return felab_raise(L);
  *out = z;
  return 1;
}

static int precond_free(lua_State *L)
{
  precond_handle *h = luaL_checkudata(L, 1, FELAB_PRECOND);
  fe_precond_free(h->P);
  h->P = NULL;
  return 0;
}

static int precond_index(lua_State *L)
{
  precond_handle *h = luaL_checkudata(L, 1, FELAB_PRECOND);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!h->P) return luaL_error(L, "precond.%s: this preconditioner was closed", k);
  const fe_precond *P = h->P;
  if (!strcmp(k, "name")) lua_pushstring(L, P->kind->name);
  else if (!strcmp(k, "describe")) lua_pushstring(L, P->describe);
  else if (!strcmp(k, "setup_seconds")) lua_pushnumber(L, P->setup_seconds);
  else if (!strcmp(k, "setup_parts")) { /* {part = seconds}: where the unit says */
    lua_createtable(L, 0, P->parts.n);
    for (int i = 0; i < P->parts.n; i++) {
      lua_pushnumber(L, P->parts.part[i].seconds);
      lua_setfield(L, -2, P->parts.part[i].name);
    }
  }
  else if (!strcmp(k, "levels")) { /* {{rows =, nnz =, seconds =, merged =}, ...}: the device
                                     * cycle's */
    lua_createtable(L, P->nlevels, 0);
    for (int l = 0; l < P->nlevels; l++) {
      lua_createtable(L, 0, 4);
      lua_pushinteger(L, P->level[l].rows);
      lua_setfield(L, -2, "rows");
      lua_pushinteger(L, (lua_Integer)P->level[l].nnz);
      lua_setfield(L, -2, "nnz");
      lua_pushnumber(L, P->level[l].seconds);
      lua_setfield(L, -2, "seconds");
      lua_pushboolean(L, P->level[l].merged);
      lua_setfield(L, -2, "merged");
      lua_rawseti(L, -2, l + 1);
    }
  }
  else if (!strcmp(k, "apply_seconds")) lua_pushnumber(L, P->apply_seconds);
  else if (!strcmp(k, "applications")) lua_pushinteger(L, P->applications);
  else if (!strcmp(k, "flops")) lua_pushnumber(L, P->flops);
  else if (!strcmp(k, "bytes")) lua_pushnumber(L, P->bytes);
  else if (!strcmp(k, "launches")) lua_pushinteger(L, P->launches);
  else if (!strcmp(k, "backend")) lua_pushstring(L, P->act.backend);
  else if (!strcmp(k, "precision"))
    lua_pushstring(L, fe_precision_name((fe_precision)P->act.precision));
  else lua_pushnil(L);
  return 1;
}

static int precond_tostring(lua_State *L)
{
  precond_handle *h = luaL_checkudata(L, 1, FELAB_PRECOND);
  if (!h->P) lua_pushliteral(L, "preconditioner (closed)");
  else
    lua_pushfstring(L, "preconditioner %s: %s, on %s in %s, %I applications", h->P->kind->name,
                    h->P->describe, h->P->act.backend,
                    fe_precision_name((fe_precision)h->P->act.precision),
                    (lua_Integer)h->P->applications);
  return 1;
}

/* Push the solve module table (making sure vectors have their metatable). */
int felab_open_solve(lua_State *L)
{
  felab_open_vector(L);
  lua_pop(L, 1);
  static const luaL_Reg precond_methods[] = {{"apply", precond_apply}, {NULL, NULL}};
  static const luaL_Reg precond_meta[] = {{"__gc", precond_free}, {"__close", precond_free},
                                          {"__tostring", precond_tostring}, {NULL, NULL}};
  felab_register_type(L, FELAB_PRECOND, precond_meta, precond_methods, precond_index);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, solve_cg);
  lua_setfield(L, -2, "cg");
  lua_pushcfunction(L, solve_bicg);
  lua_setfield(L, -2, "bicg");
  lua_pushcfunction(L, solve_bicgstab);
  lua_setfield(L, -2, "bicgstab");
  lua_pushcfunction(L, solve_gmres);
  lua_setfield(L, -2, "gmres");
  lua_pushcfunction(L, solve_transpose_apply);
  lua_setfield(L, -2, "transpose_apply");
  lua_pushcfunction(L, solve_newton);
  lua_setfield(L, -2, "newton");
  lua_pushcfunction(L, solve_precond);
  lua_setfield(L, -2, "precond");
  return 1;
}
