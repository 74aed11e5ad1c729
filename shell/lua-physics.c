/* felab shell: physics. physics.poisson and the felab.physics type (fields name,
 * description, flops, flops_jacobian, ncomp, nonlinear). The coefficients reach the engine
 * as C expressions of x[0..2] (engine/physics.h); numbers are printed exactly. */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/physics.h"
#include "shell/shell.h"

static const char *const poisson_keys[] = {"kappa", "source", NULL};

/* opts[key] as a C expression into buf: a string as is, a number printed to round-trip
 * (always with a '.' or an exponent, so C reads a double), absent: dflt. */
static const char *read_coefficient(lua_State *L, int t, const char *key, const char *dflt,
                                    char *buf, size_t n)
{
  int type = lua_getfield(L, t, key);
  const char *expr = dflt;
  if (type == LUA_TNUMBER) {
    double v = lua_tonumber(L, -1);
    if (!isfinite(v))
      luaL_error(L, "physics.poisson: %s = %s must be a finite number", key, lua_tostring(L, -1));
    snprintf(buf, n, "%.17g", v);
    if (!strpbrk(buf, ".e")) snprintf(buf + strlen(buf), n - strlen(buf), ".0");
    expr = buf;
  } else if (type == LUA_TSTRING) {
    snprintf(buf, n, "%s", lua_tostring(L, -1));
    if (strlen(lua_tostring(L, -1)) >= n)
      luaL_error(L, "physics.poisson: %s: the C expression is longer than %d characters", key,
                 (int)n - 1);
    if (!buf[strspn(buf, " \t\n")])
      luaL_error(L, "physics.poisson: %s is an empty C expression", key);
    expr = buf;
  } else if (type == LUA_TTABLE && !strcmp(key, "kappa")) {
    expr = NULL; /* per region: read by read_regions */
  } else if (type == LUA_TFUNCTION || type == LUA_TTABLE) {
    luaL_error(L, "physics.poisson: %s as a function%s arrives with traced physics (issue 5); "
                  "use a number or a C expression of x[0..2]", key,
               type == LUA_TTABLE ? " or per-region table" : "");
  } else if (type != LUA_TNIL) {
    luaL_error(L, "physics.poisson: %s must be a number or a C expression of x[0..2], got %s", key,
               felab_kind_of(L, -1));
  }
  lua_pop(L, 1);
  return expr;
}

#define MAX_REGIONS 64

/* opts.kappa as {region = number, ...} into names and values; returns the count. */
static int read_regions(lua_State *L, int t, const char **names, double *values)
{
  int n = 0;
  lua_getfield(L, t, "kappa");
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "physics.poisson: kappa per region must map region names to numbers, "
                    "e.g. {heart = 0.4, lung = 0.05}; got %s = %s", felab_kind_of(L, -2),
                 felab_kind_of(L, -1));
    if (n == MAX_REGIONS) luaL_error(L, "physics.poisson: more than %d regions", MAX_REGIONS);
    names[n] = lua_tostring(L, -2); /* anchored in the options table */
    values[n++] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (n == 0) luaL_error(L, "physics.poisson: the kappa table names no region");
  return n;
}

/* physics.poisson{kappa = 1, source = 0} -> physics; kappa may be {region = value, ...} */
static int physics_poisson(lua_State *L)
{
  if (!lua_isnoneornil(L, 1) && !lua_istable(L, 1))
    return luaL_error(L, "physics.poisson: expected an options table {kappa = ..., source = ...} "
                         "as argument 1, got %s", felab_kind_of(L, 1));
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  felab_check_keys(L, 1, "physics.poisson", poisson_keys);
  char kbuf[4096], sbuf[4096];
  const char *kappa = read_coefficient(L, 1, "kappa", "1.0", kbuf, sizeof kbuf);
  const char *source = read_coefficient(L, 1, "source", "0.0", sbuf, sizeof sbuf);

  physics_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->p = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_PHYSICS);
  fe_physics *p = NULL;
  if (kappa) {
    FELAB_TRY(L, fe_physics_poisson(kappa, source, &p));
  } else {
    const char *names[MAX_REGIONS];
    double values[MAX_REGIONS];
    int n = read_regions(L, 1, names, values);
    FELAB_TRY(L, fe_physics_poisson_regions(names, values, n, source, &p));
  }
  h->p = p;
  return 1;
}

/* Free the physics once (NULL-safe). */
static void physics_release(physics_handle *h)
{
  if (h && h->p) {
    fe_physics_free(h->p);
    h->p = NULL;
  }
}

/* __gc and __close: free now unless a live operator borrows the physics (operators are
 * finalized before the physics they were made from, and give their borrows back). */
static int physics_free(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (h->borrowers == 0) physics_release(h);
  return 0;
}

/* __tostring: "physics poisson: <description>" */
static int physics_tostring(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (!h->p) lua_pushliteral(L, "physics (closed)");
  else
    lua_pushfstring(L, "physics %s: %s", h->p->name,
                    h->p->description ? h->p->description : "(no description)");
  return 1;
}

/* __index: the fields name, description, flops, flops_jacobian, ncomp, nonlinear. */
static int physics_index(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *k = lua_tostring(L, 2);
  if (!h->p) return luaL_error(L, "physics.%s: this physics was closed", k);
  const fe_physics *p = h->p;
  if (!strcmp(k, "name")) lua_pushstring(L, p->name);
  else if (!strcmp(k, "description")) lua_pushstring(L, p->description ? p->description : "");
  else if (!strcmp(k, "flops")) lua_pushnumber(L, p->flops_f);
  else if (!strcmp(k, "flops_jacobian")) lua_pushnumber(L, p->flops_df);
  else if (!strcmp(k, "ncomp")) lua_pushinteger(L, p->ncomp);
  else if (!strcmp(k, "nonlinear")) lua_pushboolean(L, p->nonlinear);
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.physics metatable (idempotent); leaves the stack as it was. */
static void physics_register(lua_State *L)
{
  static const luaL_Reg meta[] = {{"__index", physics_index},
                                  {"__gc", physics_free},
                                  {"__close", physics_free},
                                  {"__tostring", physics_tostring},
                                  {NULL, NULL}};
  luaL_newmetatable(L, FELAB_PHYSICS);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}

/* Push the physics module table. */
int felab_open_physics(lua_State *L)
{
  physics_register(L);
  lua_newtable(L);
  lua_pushcfunction(L, physics_poisson);
  lua_setfield(L, -2, "poisson");
  return 1;
}
