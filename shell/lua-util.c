/* felab shell: the helpers shared by the binding files. How a value is named in a message,
 * option tables checked against their valid keys, handles checked for their type and for
 * being open, optional names, vectors pushed as results, __index and metatable set-up, and
 * the trampoline that lets the engine call a Lua function of a point. Every message has the
 * shape "<fname>: <what went wrong>", fname being the Lua-side name of the caller. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/operator/autotune.h"
#include "engine/operator/operator.h"
#include "engine/operator/options.h"
#include "engine/solve/vector.h"
#include "shell/shell.h"

/* The type of the value at i as a user reads it: "mesh" for a felab.mesh, else Lua's name. */
const char *felab_kind_of(lua_State *L, int i)
{
  i = lua_absindex(L, i);
  const char *name = luaL_typename(L, i);
  int t = luaL_getmetafield(L, i, "__name");
  if (t == LUA_TSTRING) {
    name = lua_tostring(L, -1); /* still anchored in the metatable after the pop */
    if (!strncmp(name, "felab.", 6)) name += 6;
  }
  if (t != LUA_TNIL) lua_pop(L, 1);
  return name;
}

/* The value at i for a "got %s" message: a number as Lua prints it, else its kind. */
const char *felab_number_or_kind(lua_State *L, int i)
{
  return lua_type(L, i) == LUA_TNUMBER ? lua_tostring(L, i) : felab_kind_of(L, i);
}

/* Whether the value at i is a number with an integer value (into *x); "3" is not. */
int felab_is_integer(lua_State *L, int i, lua_Integer *x)
{
  int isint;
  *x = lua_tointegerx(L, i, &isint);
  return isint && lua_type(L, i) == LUA_TNUMBER;
}

/* Error unless every key of the option table at t is one of valid (a typo like `kapa`), or
 * when the table has a metatable: its fields are read after the call has its objects in hand,
 * and a metamethod (__index) could run Lua code there that closes them. */
void felab_check_keys(lua_State *L, int t, const char *fname, const char *const *valid)
{
  t = lua_absindex(L, t);
  if (lua_getmetatable(L, t))
    luaL_error(L, "%s: the options table has a metatable; give a plain table (no metamethod "
               "may run while felab reads it)", fname);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1); /* the value; the key stays for lua_next */
    int ok = 0;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (int i = 0; valid[i] && !ok; i++) ok = !strcmp(lua_tostring(L, -1), valid[i]);
    if (ok) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; valid[i]; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, valid[i]);
    }
    luaL_pushresult(&b);
    if (lua_type(L, -2) == LUA_TSTRING)
      luaL_error(L, "%s: unknown option '%s' (valid options: %s)", fname, lua_tostring(L, -2),
                 lua_tostring(L, -1));
    luaL_error(L, "%s: option names must be strings, got a %s key (valid options: %s)", fname,
               luaL_typename(L, -2), lua_tostring(L, -1));
  }
}

/* The userdata of type tname at i, or an error "expected a <type> as <what>". */
void *felab_expect(lua_State *L, int i, const char *tname, const char *fname, const char *what)
{
  void *h = luaL_testudata(L, i, tname);
  const char *type = tname + strlen("felab.");
  if (!h)
    luaL_error(L, "%s: expected %s %s as %s, got %s", fname, strchr("aeiou", type[0]) ? "an" : "a",
               type, what, felab_kind_of(L, i));
  return h;
}

/* Whether the handle h holds NULL: every felab handle holds its engine pointer first. */
static int handle_closed(const void *h)
{
  void *object;
  memcpy(&object, h, sizeof object);
  return object == NULL;
}

/* felab_expect, and an error "the <type> (<what>) was closed" when the handle is closed. */
void *felab_check_handle(lua_State *L, int i, const char *tname, const char *fname,
                         const char *what)
{
  void *h = felab_expect(L, i, tname, fname, what);
  if (handle_closed(h))
    luaL_error(L, "%s: the %s (%s) was closed", fname, tname + strlen("felab."), what);
  return h;
}

/* felab_expect for a method's self, and an error "this <type> was closed" when closed. */
void *felab_check_self(lua_State *L, int i, const char *tname, const char *fname,
                       const char *what)
{
  void *h = felab_expect(L, i, tname, fname, what);
  if (handle_closed(h)) luaL_error(L, "%s: this %s was closed", fname, tname + strlen("felab."));
  return h;
}

/* The open vector at i, or an error naming the function and the argument. */
fe_vector *felab_check_vector(lua_State *L, int i, const char *fname, const char *what)
{
  return *(fe_vector **)felab_check_handle(L, i, FELAB_VECTOR, fname, what);
}

/* The value at i as an optional name (NULL when nil or absent), or an error naming what. */
const char *felab_opt_name(lua_State *L, int i, const char *fname, const char *what)
{
  if (lua_isnoneornil(L, i)) return NULL;
  if (lua_type(L, i) != LUA_TSTRING)
    luaL_error(L, "%s: %s must be a name, got %s", fname, what, felab_kind_of(L, i));
  return lua_tostring(L, i);
}

/* opts[key] of the table at t as an optional name; the string stays anchored in the table. */
const char *felab_opt_field_name(lua_State *L, int t, const char *fname, const char *key)
{
  lua_getfield(L, t, key);
  const char *s = felab_opt_name(L, -1, fname, key);
  lua_pop(L, 1);
  return s;
}

int felab_action_keys(const char *const *extra, const char **keys, int max)
{
  static const char *const general[] = {"backend", "precision", "strategy", "autotune", NULL};
  int n = 0;
  for (int i = 0; general[i] && n < max - 1; i++) keys[n++] = general[i];
  for (int i = 0; fe_action_option_name(i) && n < max - 1; i++) keys[n++] = fe_action_option_name(i);
  for (int i = 0; extra && extra[i] && n < max - 1; i++) keys[n++] = extra[i];
  keys[n] = NULL;
  return n;
}

void felab_read_general_opts(lua_State *L, int t, const char *fname, fe_action_opts *o)
{
  o->backend = felab_opt_field_name(L, t, fname, "backend");
  o->strategy = felab_opt_field_name(L, t, fname, "strategy");
  const char *prec = felab_opt_field_name(L, t, fname, "precision");
  if (prec) {
    fe_precision p;
    if (fe_precision_parse(prec, &p)) felab_raise(L);
    o->precision = (int)p;
  }
  int atype = lua_getfield(L, t, "autotune");
  if (atype == LUA_TBOOLEAN) o->autotune = lua_toboolean(L, -1) ? FE_AUTOTUNE_ON : FE_AUTOTUNE_OFF;
  else if (atype == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "again"))
    o->autotune = FE_AUTOTUNE_AGAIN;
  else if (atype != LUA_TNIL)
    luaL_error(L, "%s: autotune must be a boolean or \"again\" (true: the default strategy is "
               "the one measured fastest here, kept in the cache; \"again\": measured now, the "
               "cached choice replaced; false: the model's), got %s", fname,
               felab_kind_of(L, -1));
  lua_pop(L, 1);
}

void felab_read_strategy_opts(lua_State *L, int t, const char *fname, fe_options *given,
                              fe_action_opts *o)
{
  given->n = 0;
  for (int i = 0; fe_action_option_name(i) && given->n < FE_OPTIONS_MAX; i++) {
    const char *name = fe_action_option_name(i);
    int type = lua_getfield(L, t, name);
    if (type != LUA_TNIL) {
      fe_option *opt = &given->item[given->n++];
      memset(opt, 0, sizeof *opt);
      opt->name = name;
      if (type == LUA_TNUMBER) opt->kind = FE_OPTION_NUMBER, opt->number = lua_tonumber(L, -1);
      else if (type == LUA_TBOOLEAN) opt->kind = FE_OPTION_BOOLEAN, opt->boolean = lua_toboolean(L, -1);
      else if (type == LUA_TSTRING) opt->kind = FE_OPTION_STRING;
      else opt->kind = FE_OPTION_OTHER;
      if (type == LUA_TSTRING || opt->kind == FE_OPTION_OTHER)
        snprintf(opt->text, sizeof opt->text, "%s",
                 type == LUA_TSTRING ? lua_tostring(L, -1) : felab_kind_of(L, -1));
    }
    lua_pop(L, 1);
  }
  o->given = given->n ? given : NULL;
  o->caller = fname;
}

void **felab_push_handle(lua_State *L, const char *tname, int owner)
{
  owner = lua_absindex(L, owner);
  void **p = lua_newuserdatauv(L, sizeof *p, 1);
  *p = NULL;
  luaL_setmetatable(L, tname);
  lua_pushvalue(L, owner);
  lua_setiuservalue(L, -2, 1);
  return p;
}

/* Push a vector handle holding NULL that remembers the value at index space (a space). */
fe_vector **felab_push_vector(lua_State *L, int space)
{
  return (fe_vector **)felab_push_handle(L, FELAB_VECTOR, space);
}

/* Push a vector handle holding NULL that remembers the space of the vector or operator at i
 * (its user value 1). */
fe_vector **felab_push_vector_like(lua_State *L, int i)
{
  lua_getiuservalue(L, i, 1);
  fe_vector **p = felab_push_vector(L, -1);
  lua_remove(L, -2);
  return p;
}

/* Push the host doubles of x in memory the collector owns, so no Lua error can leak them. */
double *felab_push_host_values(lua_State *L, const fe_vector *x)
{
  double *values = lua_newuserdatauv(L, (size_t)x->n * sizeof(double) + 1, 0);
  if (fe_vector_get(x, values)) felab_raise(L);
  return values;
}

/* __index's first step: push the method named by key 2 (from the methods table in upvalue
 * 1) and return NULL, push nil and return NULL for a key that is not a string, or else
 * push nothing and return the key, a field name for the caller to look up. */
const char *felab_index_method(lua_State *L)
{
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return NULL;
  if (lua_type(L, 2) != LUA_TSTRING) return NULL; /* the nil */
  lua_pop(L, 1);
  return lua_tostring(L, 2);
}

/* Register the metatable tname (idempotent) and leave it on the stack: the metamethods
 * meta, the methods (in the metatable too, for help()) and __index, index closed over a
 * table of the methods (felab_index_method reads it). */
void felab_register_type(lua_State *L, const char *tname, const luaL_Reg *meta,
                         const luaL_Reg *methods, lua_CFunction index)
{
  luaL_newmetatable(L, tname);
  luaL_setfuncs(L, meta, 0);
  luaL_setfuncs(L, methods, 0);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, -2, "__index");
}

/* fe_point_fn: call the Lua function at x under lua_pcall; a Lua error or a result that is
 * not a number (or, for n > 1 components, a number or a table of n numbers) becomes an engine
 * error (the engine unwinds, the binding raises it). */
int felab_point_fn_call(void *ctx, const double x[3], int n, double *values)
{
  felab_point_fn *f = ctx;
  if (!f->fn) {
    for (int k = 0; k < n; k++) values[k] = f->constant;
    return 0;
  }
  lua_State *L = f->L;
  for (int d = 0; d < 3; d++) {
    lua_pushnumber(L, x[d]);
    lua_rawseti(L, f->x, d + 1);
  }
  lua_pushvalue(L, f->fn);
  lua_pushvalue(L, f->x);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)";
    fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                 "%s: the function failed at x = {%g, %g, %g}: %s", f->where, x[0], x[1], x[2],
                 msg);
    lua_pop(L, 1);
    return FE_ERR_ARG;
  }
  int ok = lua_type(L, -1) == LUA_TNUMBER;
  if (ok)
    for (int k = 0; k < n; k++) values[k] = lua_tonumber(L, -1);
  else if (n > 1 && lua_istable(L, -1) && lua_rawlen(L, -1) == (lua_Unsigned)n) {
    ok = 1;
    for (int k = 0; k < n && ok; k++) {
      ok = lua_rawgeti(L, -1, k + 1) == LUA_TNUMBER;
      values[k] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  }
  if (!ok) {
    if (n > 1)
      fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                   "%s: the function must return a number or a table of %d numbers (one per "
                   "component), got %s at x = {%g, %g, %g}", f->where, n, luaL_typename(L, -1),
                   x[0], x[1], x[2]);
    else
      fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                   "%s: the function must return a number, got %s at x = {%g, %g, %g}", f->where,
                   luaL_typename(L, -1), x[0], x[1], x[2]);
    lua_pop(L, 1);
    return FE_ERR_ARG;
  }
  lua_pop(L, 1);
  return 0;
}

/* Set up f for the number or function at i (argument 1 of where); pushes the reused
 * argument table. */
void felab_point_fn_init(lua_State *L, int i, const char *where, felab_point_fn *f)
{
  i = lua_absindex(L, i);
  f->L = L;
  f->where = where;
  f->fn = 0;
  f->constant = 0.0;
  if (lua_type(L, i) == LUA_TNUMBER) f->constant = lua_tonumber(L, i);
  else if (lua_type(L, i) == LUA_TFUNCTION) f->fn = i;
  else
    luaL_error(L, "%s: expected a number or a function(x) as argument 1, got %s", where,
               felab_kind_of(L, i));
  lua_createtable(L, 3, 0); /* filled now so the trampoline's stores never allocate */
  for (int d = 0; d < 3; d++) {
    lua_pushnumber(L, 0.0);
    lua_rawseti(L, -2, d + 1);
  }
  f->x = lua_gettop(L);
}
