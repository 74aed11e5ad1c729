/* felab shell: fe.operator and the felab.operator type. An operator borrows its space
 * (user value 1) and its physics (user value 2), which it keeps alive and counted. Every
 * action returns two values, the result and a report; results remember the space. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/operator/operator.h"
#include "engine/operator/options.h"
#include "engine/fem/quadrature.h"
#include "shell/shell.h"

static const char *const create_keys[] = {"dirichlet", "value", "quadrature", NULL};
static const char *const quad_keys[] = {"degree", "rule", NULL};
static const char *const state_keys[] = {"at", NULL};
static const char *const initial_keys[] = {"interior", NULL};

/* The open operator at i (a method's self), or an error naming the function. */
static fe_operator *check_operator(lua_State *L, int i, const char *fname)
{
  return *(fe_operator **)felab_check_self(L, i, FELAB_OPERATOR, fname, "self");
}

/* Check the options table at t (nil or absent: none) against the action's keys and extra
 * (NULL-ended, or NULL); fill o from it, its strategy's own options into given. */
static void read_action_opts(lua_State *L, int t, const char *fname, const char *const *extra,
                             fe_action_opts *o, fe_options *given)
{
  fe_action_opts_default(o);
  if (lua_isnoneornil(L, t)) return;
  if (!lua_istable(L, t))
    luaL_error(L, "%s: the options must be a table, got %s", fname, felab_kind_of(L, t));
  const char *keys[48];
  felab_action_keys(extra, keys, 48);
  felab_check_keys(L, t, fname, keys);
  felab_read_general_opts(L, t, fname, o);
  felab_read_strategy_opts(L, t, fname, given, o);
}

/* opts.at as a vector (absent: NULL, the zero state). */
static const fe_vector *read_state(lua_State *L, int t, const char *fname)
{
  if (!lua_istable(L, t)) return NULL;
  lua_getfield(L, t, "at");
  const fe_vector *at = lua_isnil(L, -1) ? NULL : felab_check_vector(L, -1, fname, "opts.at");
  lua_pop(L, 1); /* still anchored in the table */
  return at;
}

/* The dirichlet option at the top of the stack as an array of names in Lua-owned memory;
 * physical-group numbers are taken as their decimal names ("3"). */
static const char **read_dirichlet(lua_State *L, const char *fname, int *n)
{
  int t = lua_gettop(L);
  *n = 0;
  if (lua_isnil(L, t)) return NULL;
  int single = lua_type(L, t) == LUA_TSTRING || lua_isinteger(L, t);
  if (!single && !lua_istable(L, t))
    luaL_error(L, "%s: dirichlet must be a tag name or number, \"all\" or a table of them, got %s",
               fname, felab_kind_of(L, t));
  int len = single ? 1 : (int)lua_rawlen(L, t);
  const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(len + 1), 1);
  lua_createtable(L, len, 0); /* anchors the strings made from numbers */
  for (int i = 0; i < len; i++) {
    if (single) lua_pushvalue(L, t);
    else lua_rawgeti(L, t, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING && !lua_isinteger(L, -1))
      luaL_error(L, "%s: dirichlet[%d] must be a tag name or number, got %s", fname, i + 1,
                 felab_kind_of(L, -1));
    lua_pushstring(L, luaL_tolstring(L, -1, NULL));
    names[i] = lua_tostring(L, -1);
    lua_rawseti(L, -4, i + 1); /* into the anchor table */
    lua_pop(L, 2);
  }
  lua_setiuservalue(L, -2, 1);
  *n = len;
  return names;
}

/* The quadrature option at the top of the stack: nil, or {degree = k, rule = "auto" |
 * "gauss" | "gll"}; *degree -1 leaves each action its own exact degree. Pops it. */
static void read_quadrature(lua_State *L, int *degree, fe_quad_kind *kind)
{
  *degree = -1;
  *kind = FE_QUAD_AUTO;
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "fe.operator: quadrature must be a table {degree = k, rule = \"gauss\"}, got %s",
               felab_kind_of(L, -1));
  int t = lua_gettop(L);
  felab_check_keys(L, t, "fe.operator quadrature", quad_keys);
  lua_Integer d = -1;
  if (lua_getfield(L, t, "degree") != LUA_TNIL && (!felab_is_integer(L, -1, &d) || d < 0 || d > 60))
    luaL_error(L, "fe.operator: quadrature.degree must be an integer in 0..60, got %s",
               felab_number_or_kind(L, -1));
  *degree = (int)d;
  if (lua_getfield(L, t, "rule") != LUA_TNIL) {
    const char *r = lua_tostring(L, -1);
    int found = 0;
    for (int k = FE_QUAD_AUTO; k <= FE_QUAD_GLL && !found; k++)
      if (lua_type(L, -1) == LUA_TSTRING && !strcmp(r, fe_quad_kind_name((fe_quad_kind)k))) {
        *kind = (fe_quad_kind)k;
        found = 1;
      }
    if (!found)
      luaL_error(L, "fe.operator: quadrature.rule must be \"auto\", \"gauss\" or \"gll\", got %s",
                 felab_number_or_kind(L, -1));
  }
  lua_settop(L, t - 1);
}

/* fe.operator(V, pde [, {dirichlet = {...} | "all" | "xmin", value = 0,
 *                        quadrature = {degree =, rule =}}]) -> operator */
static int op_new(lua_State *L)
{
  space_handle *sh = felab_expect(L, 1, FELAB_SPACE, "fe.operator", "argument 1");
  physics_handle *ph = felab_expect(L, 2, FELAB_PHYSICS, "fe.operator", "argument 2");
  if (!sh->V || !ph->p) return luaL_error(L, "fe.operator: the space or the physics was closed");
  double value = 0.0;
  int ndir = 0, qdegree = -1;
  fe_quad_kind qkind = FE_QUAD_AUTO;
  const char **dir = NULL;
  lua_settop(L, 3);
  if (!lua_isnil(L, 3)) {
    if (!lua_istable(L, 3))
      return luaL_error(L, "fe.operator: argument 3 must be an options table {dirichlet = ..., "
                           "value = ...}, got %s", felab_kind_of(L, 3));
    felab_check_keys(L, 3, "fe.operator", create_keys);
    int type = lua_getfield(L, 3, "value");
    if (type == LUA_TNUMBER) value = lua_tonumber(L, -1);
    else if (type != LUA_TNIL)
      return luaL_error(L, "fe.operator: value must be a number, got %s", felab_kind_of(L, -1));
    lua_getfield(L, 3, "quadrature");
    read_quadrature(L, &qdegree, &qkind);
    lua_getfield(L, 3, "dirichlet");
    dir = read_dirichlet(L, "fe.operator", &ndir);
  }
  fe_operator **h = lua_newuserdatauv(L, sizeof *h, 2);
  *h = NULL;
  luaL_setmetatable(L, FELAB_OPERATOR);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, -2, 2);
  fe_operator *A = NULL;
  struct fe_physics *pde = felab_physics_for(L, 2, sh->V->elem.dim, "fe.operator");
  /* the trace ran Lua functions, which may have closed either */
  if (!sh->V || !ph->p)
    return luaL_error(L, "fe.operator: the space or the physics was closed while the physics was "
                         "traced");
  FELAB_TRY(L, fe_operator_create(sh->V, pde, dir, ndir, value, &A));
  *h = A; /* from here an error frees it through __gc, which gives the borrowings back */
  sh->borrowers++;
  ph->borrowers++;
  if (qdegree >= 0 || qkind != FE_QUAD_AUTO) FELAB_TRY(L, fe_operator_set_quadrature(A, qdegree, qkind));
  /* a coefficient of x that is not finite where the kernels will evaluate it: at every point
   * of the residual's rule and of the Jacobian's where it differs (the quadrature asked for) */
  const fe_quadrature *res = fe_operator_quadrature(A, "residual");
  const fe_quadrature *jac = fe_operator_quadrature(A, "apply");
  FELAB_TRY(L, fe_physics_check_coefficients(pde, sh->V->mesh, res));
  if (jac->npoints != res->npoints || jac->degree != res->degree || jac->name != res->name)
    FELAB_TRY(L, fe_physics_check_coefficients(pde, sh->V->mesh, jac));
  return 1;
}

/* A:residual(u [, opts]) -> r, report */
static int op_residual(lua_State *L)
{
  fe_operator *A = check_operator(L, 1, "A:residual");
  const fe_vector *u = felab_check_vector(L, 2, "A:residual", "argument 1 (u)");
  fe_action_opts o;
  fe_options given;
  read_action_opts(L, 3, "A:residual", NULL, &o, &given);
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *r = NULL;
  fe_report rep;
  FELAB_TRY(L, fe_operator_residual(A, u, &o, &r, &rep));
  *out = r;
  felab_push_report(L, &rep);
  return 2;
}

/* A:apply(w [, {at = u, ...}]) -> J(u) w, report */
static int op_apply(lua_State *L)
{
  fe_operator *A = check_operator(L, 1, "A:apply");
  const fe_vector *w = felab_check_vector(L, 2, "A:apply", "argument 1 (w)");
  fe_action_opts o;
  fe_options given;
  read_action_opts(L, 3, "A:apply", state_keys, &o, &given);
  const fe_vector *at = read_state(L, 3, "A:apply");
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *y = NULL;
  fe_report rep;
  FELAB_TRY(L, fe_operator_apply(A, w, at, &o, &y, &rep));
  *out = y;
  felab_push_report(L, &rep);
  return 2;
}

/* A:diagonal([{at = u, ...}]) -> diag J(u), report */
static int op_diagonal(lua_State *L)
{
  fe_operator *A = check_operator(L, 1, "A:diagonal");
  fe_action_opts o;
  fe_options given;
  read_action_opts(L, 2, "A:diagonal", state_keys, &o, &given);
  const fe_vector *at = read_state(L, 2, "A:diagonal");
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *d = NULL;
  fe_report rep;
  FELAB_TRY(L, fe_operator_diagonal(A, at, &o, &d, &rep));
  *out = d;
  felab_push_report(L, &rep);
  return 2;
}

/* A:initial([{interior = 0, ...}]) -> vector with the boundary values, interior elsewhere */
static int op_initial(lua_State *L)
{
  fe_operator *A = check_operator(L, 1, "A:initial");
  fe_action_opts o;
  fe_options given;
  read_action_opts(L, 2, "A:initial", initial_keys, &o, &given);
  double interior = 0.0;
  if (lua_istable(L, 2)) {
    int type = lua_getfield(L, 2, "interior");
    if (type == LUA_TNUMBER) interior = lua_tonumber(L, -1);
    else if (type != LUA_TNIL)
      return luaL_error(L, "A:initial: interior must be a number, got %s", felab_kind_of(L, -1));
    lua_pop(L, 1);
  }
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *x = NULL;
  FELAB_TRY(L, fe_operator_initial(A, &o, interior, &x));
  *out = x;
  return 1;
}

/* The operator, the action name and the options of A:fn(action [, opts]). */
static fe_operator *action_call(lua_State *L, const char *fn, const char **action,
                                fe_action_opts *o, fe_options *given)
{
  fe_operator *A = check_operator(L, 1, fn);
  if (lua_type(L, 2) != LUA_TSTRING)
    luaL_error(L, "%s: argument 1 must be an action name (\"residual\", \"apply\", "
                  "\"diagonal\"), got %s", fn, felab_kind_of(L, 2));
  *action = lua_tostring(L, 2);
  read_action_opts(L, 3, fn, NULL, o, given);
  return A;
}

/* A:source(action [, opts]) -> the complete kernel source of that action */
static int op_source(lua_State *L)
{
  const char *action;
  fe_action_opts o;
  fe_options given;
  fe_operator *A = action_call(L, "A:source", &action, &o, &given);
  char *src = NULL;
  FELAB_TRY(L, fe_operator_source(A, action, &o, &src));
  lua_pushstring(L, src);
  free(src);
  return 1;
}

/* A:model(action [, opts]) -> a report of the model's view without running the action: the
 * work per ceiling, the occupancy of the compiled kernel, the prediction (seconds 0). */
static int op_model(lua_State *L)
{
  const char *action;
  fe_action_opts o;
  fe_options given;
  fe_operator *A = action_call(L, "A:model", &action, &o, &given);
  fe_report rep;
  FELAB_TRY(L, fe_operator_model(A, action, &o, &rep));
  felab_push_report(L, &rep);
  return 1;
}

/* A:strategies([{backend =, precision =}]) -> {names that apply...}, {name = {applies =,
 * why =, default =, predicted_seconds =, summary =, options = "block, walk, ..."}} */
static int op_strategies(lua_State *L)
{
  fe_operator *A = check_operator(L, 1, "A:strategies");
  fe_action_opts o;
  fe_options given;
  read_action_opts(L, 2, "A:strategies", NULL, &o, &given);
  fe_strategy_info info[16];
  int n = 0;
  FELAB_TRY(L, fe_operator_strategy_info(A, &o, info, 16, &n));
  lua_newtable(L);
  lua_newtable(L);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (info[i].applies) {
      lua_pushstring(L, info[i].name);
      lua_rawseti(L, -3, ++k);
    }
    lua_createtable(L, 0, 5);
    lua_pushboolean(L, info[i].applies);
    lua_setfield(L, -2, "applies");
    lua_pushboolean(L, info[i].is_default);
    lua_setfield(L, -2, "default");
    lua_pushstring(L, info[i].why);
    lua_setfield(L, -2, "why");
    lua_pushstring(L, info[i].summary);
    lua_setfield(L, -2, "summary");
    char names[160];
    if (!fe_strategy_option_names(info[i].name, names, sizeof names)) {
      lua_pushstring(L, names);
      lua_setfield(L, -2, "options");
    }
    if (info[i].applies) {
      lua_pushnumber(L, info[i].predicted_seconds);
      lua_setfield(L, -2, "predicted_seconds");
    }
    lua_setfield(L, -2, info[i].name);
  }
  return 2;
}

/* Free the operator once (NULL-safe) and give back its borrows: __gc and __close. */
static int op_free(lua_State *L)
{
  fe_operator **p = luaL_checkudata(L, 1, FELAB_OPERATOR);
  if (!*p) return 0;
  fe_operator_free(*p);
  *p = NULL;
  if (lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA) {
    space_handle *sh = lua_touserdata(L, -1);
    if (sh->borrowers > 0) sh->borrowers--;
  }
  if (lua_getiuservalue(L, 1, 2) == LUA_TUSERDATA) {
    physics_handle *ph = lua_touserdata(L, -1);
    if (ph->borrowers > 0) ph->borrowers--;
  }
  return 0;
}

/* __tostring: "operator poisson on space P1 (1331 dofs), 242 constrained dofs" */
static int op_tostring(lua_State *L)
{
  fe_operator **p = luaL_checkudata(L, 1, FELAB_OPERATOR);
  if (!*p) {
    lua_pushliteral(L, "operator (closed)");
    return 1;
  }
  const fe_space *V = fe_operator_space(*p);
  lua_getiuservalue(L, 1, 2);
  physics_handle *ph = lua_touserdata(L, -1);
  lua_pushfstring(L, "operator %s on space %s (%d dofs, %s mesh), %d constrained dofs",
                  ph && ph->p ? ph->p->name : "?", V->name, V->ndofs, fe_cell_name(V->mesh->type),
                  fe_operator_ndirichlet(*p));
  return 1;
}

/* __index: methods first, then the fields space, physics, ndofs, ndirichlet, realizations. */
static int op_index(lua_State *L)
{
  fe_operator **p = luaL_checkudata(L, 1, FELAB_OPERATOR);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!*p) return luaL_error(L, "operator.%s: this operator was closed", k);
  if (!strcmp(k, "space")) lua_getiuservalue(L, 1, 1);
  else if (!strcmp(k, "physics")) lua_getiuservalue(L, 1, 2);
  else if (!strcmp(k, "ndofs")) lua_pushinteger(L, fe_operator_space(*p)->ndofs);
  else if (!strcmp(k, "ndirichlet")) lua_pushinteger(L, fe_operator_ndirichlet(*p));
  else if (!strcmp(k, "realizations")) lua_pushinteger(L, fe_operator_realizations(*p));
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.operator metatable (idempotent) and push the fe.operator constructor. */
int felab_open_operator(lua_State *L)
{
  static const luaL_Reg methods[] = {
      {"residual", op_residual}, {"apply", op_apply},   {"diagonal", op_diagonal},
      {"initial", op_initial},   {"source", op_source}, {"strategies", op_strategies}, {"model", op_model},
      {"element_matrices", felab_op_element_matrices}, {"assemble", felab_op_assemble},
      {NULL, NULL}};
  static const luaL_Reg meta[] = {
      {"__gc", op_free}, {"__close", op_free}, {"__tostring", op_tostring}, {NULL, NULL}};
  felab_register_type(L, FELAB_OPERATOR, meta, methods, op_index);
  lua_pop(L, 1);
  felab_open_matrix(L);
  felab_help_add(FELAB_OPERATOR ":model", "A:model(action [, {backend =, precision =, strategy =, ...}])",
                 "The model's view of an action without running it: a report with the work per\n"
                 "ceiling (rep.flops, rep.bytes, rep.shared_bytes, rep.atomics, ...), the compiled\n"
                 "kernel's occupancy, the predicted time and each ceiling's time (rep.ceilings).\n"
                 "example: rep = A:model(\"apply\", {strategy = \"sumfact\"}); print(rep.bound)");
  felab_help_add(FELAB_OPERATOR ":initial", "A:initial{interior = 0 [, backend =, precision =]}",
                 "A vector holding the Dirichlet values on constrained dofs and `interior`\n"
                 "elsewhere, on the action's backend (no report).\nexample: u0 = A:initial()");
  lua_pushcfunction(L, op_new);
  return 1;
}
