/* felab shell: the felab.vector type. A vector lives on one backend in one precision
 * (engine/solve/vector.h); it may remember the space it belongs to (user value 1), which
 * v:error and tostring use. Vectors are made by V:interpolate, operator actions, solves,
 * v:copy and v:to; the handle holds the engine pointer (NULL once freed). */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/fem/space.h"
#include "engine/solve/vector.h"
#include "shell/shell.h"

#define VALUES_MAX 1000000 /* v:values() refuses more entries than this */

/* A number argument, or an error naming it. */
static double check_number(lua_State *L, int i, const char *fname, const char *what)
{
  if (lua_type(L, i) != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a number, got %s", fname, what, felab_kind_of(L, i));
  return lua_tonumber(L, i);
}

/* v:norm() -> the Euclidean norm */
static int vec_norm(lua_State *L)
{
  double r;
  FELAB_TRY(L, fe_vector_norm(felab_check_vector(L, 1, "v:norm", "self"), &r));
  lua_pushnumber(L, r);
  return 1;
}

/* v:dot(w) -> the dot product (same size, backend and precision) */
static int vec_dot(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:dot", "self");
  fe_vector *y = felab_check_vector(L, 2, "v:dot", "argument 1 (w)");
  double r;
  FELAB_TRY(L, fe_vector_check_compatible(x, y, "v:dot"));
  FELAB_TRY(L, fe_vector_dot(x, y, &r));
  lua_pushnumber(L, r);
  return 1;
}

/* v:axpy(a, w): v <- v + a w; returns v */
static int vec_axpy(lua_State *L)
{
  fe_vector *y = felab_check_vector(L, 1, "v:axpy", "self");
  double a = check_number(L, 2, "v:axpy", "argument 1 (a)");
  fe_vector *x = felab_check_vector(L, 3, "v:axpy", "argument 2 (w)");
  FELAB_TRY(L, fe_vector_check_compatible(y, x, "v:axpy"));
  FELAB_TRY(L, fe_vector_axpby(y, a, x, 1.0));
  lua_settop(L, 1);
  return 1;
}

/* v:fill(a): every entry <- a; returns v */
static int vec_fill(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:fill", "self");
  FELAB_TRY(L, fe_vector_fill(x, check_number(L, 2, "v:fill", "argument 1 (a)")));
  lua_settop(L, 1);
  return 1;
}

/* v:copy() -> a new vector with the same values, backend, precision and space */
static int vec_copy(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:copy", "self");
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *y = NULL;
  FELAB_TRY(L, fe_vector_convert(x, x->be, x->prec, &y));
  *out = y;
  return 1;
}

/* v:to(backend [, precision]) -> a copy on that backend (default: v's precision) */
static int vec_to(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:to", "self");
  if (lua_type(L, 2) != LUA_TSTRING)
    return luaL_error(L, "v:to: argument 1 must be a backend name (\"cpu\", \"opencl\", \"cuda\"), "
                         "got %s", felab_kind_of(L, 2));
  fe_precision prec = x->prec;
  if (lua_type(L, 3) == LUA_TSTRING) FELAB_TRY(L, fe_precision_parse(lua_tostring(L, 3), &prec));
  else if (!lua_isnoneornil(L, 3))
    return luaL_error(L, "v:to: argument 2 must be a precision (\"double\" or \"single\"), got %s",
                      felab_kind_of(L, 3));
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(lua_tostring(L, 2), &be));
  fe_vector **out = felab_push_vector_like(L, 1);
  fe_vector *y = NULL;
  FELAB_TRY(L, fe_vector_convert(x, be, prec, &y));
  *out = y;
  return 1;
}

/* v:min() -> the smallest entry */
static int vec_min(lua_State *L)
{
  double r;
  FELAB_TRY(L, fe_vector_min(felab_check_vector(L, 1, "v:min", "self"), &r));
  lua_pushnumber(L, r);
  return 1;
}

/* v:max() -> the largest entry */
static int vec_max(lua_State *L)
{
  double r;
  FELAB_TRY(L, fe_vector_max(felab_check_vector(L, 1, "v:max", "self"), &r));
  lua_pushnumber(L, r);
  return 1;
}

/* v:get(i) -> entry i, 1-based */
static int vec_get(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:get", "self");
  lua_Integer i;
  if (!felab_is_integer(L, 2, &i))
    return luaL_error(L, "v:get: the index i must be an integer, got %s",
                      felab_number_or_kind(L, 2));
  if (i < 1 || i > x->n)
    return luaL_error(L, "v:get: index i = %I is out of range: the vector has %d entries (1..%d)",
                      i, x->n, x->n);
  double v;
  FELAB_TRY(L, fe_vector_get_entry(x, (int)(i - 1), &v));
  lua_pushnumber(L, v);
  return 1;
}

/* v:size() and #v -> the number of entries */
static int vec_size(lua_State *L)
{
  lua_pushinteger(L, felab_check_vector(L, 1, "v:size", "self")->n);
  return 1;
}

/* v:values() -> a Lua table of every entry (small vectors only) */
static int vec_values(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:values", "self");
  if (x->n > VALUES_MAX)
    return luaL_error(L, "v:values: the vector has %d entries, more than the %d a table is made "
                         "for; use v:get(i), v:min(), v:max() or export.vtu",
                      x->n, VALUES_MAX);
  const double *values = felab_push_host_values(L, x);
  lua_createtable(L, x->n, 0);
  for (int i = 0; i < x->n; i++) {
    lua_pushnumber(L, values[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* v:error(f [, "L2" | "H1"]) -> || v - f || on v's space (f a number or function(x)) */
static int vec_error(lua_State *L)
{
  fe_vector *x = felab_check_vector(L, 1, "v:error", "self");
  lua_settop(L, 3);
  felab_point_fn f;
  felab_point_fn_init(L, 2, "v:error", &f);
  const char *norm = "L2";
  if (lua_type(L, 3) == LUA_TSTRING) norm = lua_tostring(L, 3);
  else if (!lua_isnoneornil(L, 3))
    return luaL_error(L, "v:error: argument 2 must be a norm name (\"L2\" or \"H1\"), got %s",
                      felab_kind_of(L, 3));
  space_handle *sh = NULL;
  if (lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA) sh = luaL_testudata(L, -1, FELAB_SPACE);
  if (!sh) return luaL_error(L, "v:error: error() needs a vector of a space");
  if (!sh->V) return luaL_error(L, "v:error: the space of this vector was closed");
  if (x->n != sh->V->ndofs)
    return luaL_error(L, "v:error: the vector has %d entries but its space %s has %d dofs", x->n,
                      sh->V->name, sh->V->ndofs);
  const double *values = felab_push_host_values(L, x);
  double err;
  sh->borrowers++; /* the Lua function cannot free the space under the engine's feet */
  int rc = fe_space_error(sh->V, values, felab_point_fn_call, &f, norm, &err);
  sh->borrowers--;
  if (rc) return felab_raise(L);
  lua_pushnumber(L, err);
  return 1;
}

/* Free the vector once (NULL-safe): __gc and __close. */
static int vec_free(lua_State *L)
{
  fe_vector **p = luaL_checkudata(L, 1, FELAB_VECTOR);
  if (*p) {
    fe_vector_free(*p);
    *p = NULL;
  }
  return 0;
}

/* __len: #v */
static int vec_len(lua_State *L)
{
  lua_pushinteger(L, felab_check_vector(L, 1, "#v", "operand")->n);
  return 1;
}

/* __tostring: "vector of 1331 doubles on cpu (P1)" */
static int vec_tostring(lua_State *L)
{
  fe_vector **p = luaL_checkudata(L, 1, FELAB_VECTOR);
  if (!*p) {
    lua_pushliteral(L, "vector (closed)");
    return 1;
  }
  const fe_vector *x = *p;
  const char *space = NULL;
  if (lua_getiuservalue(L, 1, 1) == LUA_TUSERDATA) {
    space_handle *sh = luaL_testudata(L, -1, FELAB_SPACE);
    if (sh && sh->V) space = sh->V->name;
  }
  lua_pushfstring(L, "vector of %d %s on %s%s%s%s", x->n,
                  x->prec == FE_FLOAT ? "floats" : "doubles", x->be->name, space ? " (" : "",
                  space ? space : "", space ? ")" : "");
  return 1;
}

/* __index: methods first, then the fields n, backend, precision, space. */
static int vec_index(lua_State *L)
{
  fe_vector **p = luaL_checkudata(L, 1, FELAB_VECTOR);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!*p) return luaL_error(L, "vector.%s: this vector was closed", k);
  const fe_vector *x = *p;
  if (!strcmp(k, "n")) lua_pushinteger(L, x->n);
  else if (!strcmp(k, "backend")) lua_pushstring(L, x->be->name);
  else if (!strcmp(k, "precision")) lua_pushstring(L, fe_precision_name(x->prec));
  else if (!strcmp(k, "space")) lua_getiuservalue(L, 1, 1);
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.vector metatable (idempotent) and push it. Called by felab_open_fe and
 * felab_open_solve, whichever comes first. */
int felab_open_vector(lua_State *L)
{
  static const luaL_Reg methods[] = {
      {"norm", vec_norm}, {"dot", vec_dot},     {"axpy", vec_axpy},     {"fill", vec_fill},
      {"copy", vec_copy}, {"to", vec_to},       {"min", vec_min},       {"max", vec_max},
      {"get", vec_get},   {"size", vec_size},   {"values", vec_values}, {"error", vec_error},
      {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", vec_free},
                                  {"__close", vec_free},
                                  {"__len", vec_len},
                                  {"__tostring", vec_tostring},
                                  {NULL, NULL}};
  felab_help_add(FELAB_VECTOR ":fill", "u:fill(a)",
                 "Every entry <- a, in place; returns u.\nexample: u:fill(0)");
  felab_help_add(FELAB_VECTOR ":values", "u:values()",
                 "A Lua table of every entry (1-based), for small vectors (at most 1e6).\n"
                 "example: for i, v in ipairs(u:values()) do print(i, v) end");
  felab_register_type(L, FELAB_VECTOR, meta, methods, vec_index);
  return 1;
}
