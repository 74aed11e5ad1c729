/* felab shell: solvers. solve.cg(A [, b] [, opts]) -> x, info. A solve that stops without
 * converging is a result (info.converged = false), not an error; a breakdown, a divergence
 * or an interrupt is an engine error and raised. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <math.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/solver.h"
#include "shell/shell.h"

static const char *const cg_keys[] = {"pc",       "rtol",      "atol",    "maxit",
                                      "backend",  "precision", "strategy", "block",
                                      "monitor",  "x0",        NULL};

/* opts[key] as a finite number >= 0 into *v (kept when absent). */
static void opt_tolerance(lua_State *L, int t, const char *key, double *v)
{
  int type = lua_getfield(L, t, key);
  if (type == LUA_TNUMBER) {
    double x = lua_tonumber(L, -1);
    if (!(x >= 0) || !isfinite(x))
      luaL_error(L, "solve.cg: %s = %s must be a finite number >= 0", key, lua_tostring(L, -1));
    *v = x;
  } else if (type != LUA_TNIL) {
    luaL_error(L, "solve.cg: %s must be a number, got %s", key, felab_kind_of(L, -1));
  }
  lua_pop(L, 1);
}

/* opts[key] as an integer in [lo, INT_MAX] into *v (kept when absent). */
static void opt_integer(lua_State *L, int t, const char *key, int lo, int *v)
{
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    lua_Integer x;
    if (!felab_is_integer(L, -1, &x) || x < lo || x > INT_MAX)
      luaL_error(L, "solve.cg: %s must be an integer >= %d, got %s", key, lo,
                 felab_number_or_kind(L, -1));
    *v = (int)x;
  }
  lua_pop(L, 1);
}

/* Fill o from the options table at t; *x0 gets opts.x0 (NULL when absent). */
static void read_cg_opts(lua_State *L, int t, fe_solver_opts *o, const fe_vector **x0)
{
  fe_solver_opts_default(o);
  *x0 = NULL;
  if (lua_isnoneornil(L, t)) return;
  felab_check_keys(L, t, "solve.cg", cg_keys);
  const char *pc = felab_opt_field_name(L, t, "solve.cg", "pc");
  if (pc) o->pc = pc;
  opt_tolerance(L, t, "rtol", &o->rtol);
  opt_tolerance(L, t, "atol", &o->atol);
  opt_integer(L, t, "maxit", 0, &o->maxit);
  opt_integer(L, t, "block", 0, &o->act.block);
  o->act.backend = felab_opt_field_name(L, t, "solve.cg", "backend");
  o->act.strategy = felab_opt_field_name(L, t, "solve.cg", "strategy");
  const char *prec = felab_opt_field_name(L, t, "solve.cg", "precision");
  if (prec) {
    fe_precision p;
    if (fe_precision_parse(prec, &p)) felab_raise(L);
    o->act.precision = (int)p;
  }
  int type = lua_getfield(L, t, "monitor");
  if (type == LUA_TBOOLEAN) o->monitor = lua_toboolean(L, -1);
  else if (type != LUA_TNIL)
    luaL_error(L, "solve.cg: monitor must be true or false, got %s", felab_kind_of(L, -1));
  lua_pop(L, 1);
  lua_getfield(L, t, "x0");
  if (!lua_isnil(L, -1)) *x0 = felab_check_vector(L, -1, "solve.cg", "opts.x0");
  lua_pop(L, 1); /* still anchored in the table */
}

/* Protected: build the info table from the fe_solver_info at the light userdata 1, so that
 * the caller can free its history whatever happens. */
static int push_info(lua_State *L)
{
  const fe_solver_info *info = lua_touserdata(L, 1);
  lua_createtable(L, 0, 5);
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
  felab_push_report(L, &info->report);
  lua_setfield(L, -2, "report");
  return 1;
}

/* solve.cg(A [, b] [, opts]) -> x, info {iterations, converged, reason, history, report} */
static int solve_cg(lua_State *L)
{
  fe_operator *A = *(fe_operator **)felab_check_handle(L, 1, FELAB_OPERATOR, "solve.cg",
                                                        "argument 1");
  const fe_vector *b = NULL;
  int t = 2;
  if (luaL_testudata(L, 2, FELAB_VECTOR)) {
    b = felab_check_vector(L, 2, "solve.cg", "argument 2 (b)");
    t = 3;
  } else if (lua_isnil(L, 2) && !lua_isnone(L, 3)) {
    t = 3;
  } else if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2)) {
    return luaL_error(L, "solve.cg: argument 2 must be a vector b or an options table, got %s",
                      felab_kind_of(L, 2));
  }
  if (!lua_isnoneornil(L, t) && !lua_istable(L, t))
    return luaL_error(L, "solve.cg: argument %d must be an options table, got %s", t,
                      felab_kind_of(L, t));
  lua_settop(L, 3);
  fe_solver_opts o;
  const fe_vector *x0;
  read_cg_opts(L, t, &o, &x0);

  fe_vector **out = felab_push_vector_like(L, 1); /* x remembers A's space */
  int xi = lua_gettop(L);

  fe_solver_info info;
  memset(&info, 0, sizeof info);
  fe_vector *x = NULL;
  int rc = fe_solve_cg(A, b, x0, &o, &x, &info);
  if (rc) {
    fe_solver_info_free(&info);
    return felab_raise(L);
  }
  *out = x;
  lua_pushcfunction(L, push_info);
  lua_pushlightuserdata(L, &info);
  int status = lua_pcall(L, 1, 1, 0);
  fe_solver_info_free(&info);
  if (status != LUA_OK) return lua_error(L);
  lua_pushvalue(L, xi);
  lua_insert(L, -2);
  return 2;
}

/* Push the solve module table (making sure vectors have their metatable). */
int felab_open_solve(lua_State *L)
{
  felab_open_vector(L);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, solve_cg);
  lua_setfield(L, -2, "cg");
  return 1;
}
