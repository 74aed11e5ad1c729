/* felab shell: the fe module. fe.space and the felab.space type (fields ndofs, name, mesh;
 * method interpolate), and fe.operator (shell/lua-operator.c). Vectors are in
 * shell/lua-vector.c. A Lua function of a point reaches the engine through a fe_point_fn
 * trampoline that calls it under lua_pcall, so a Lua error never unwinds engine frames.
 *
 * Handles: every felab userdata holds the engine pointer first (NULL once freed). Meshes,
 * spaces and physics add a count of the live handles that borrow them, so that __close on
 * a borrowed object leaves it to the collector; the borrower keeps its owner alive in a
 * user value. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/error.h"
#include "engine/mesh.h"
#include "engine/space.h"
#include "engine/vector.h"
#include "shell/shell.h"

int felab_open_vector(lua_State *L);   /* shell/lua-vector.c: the felab.vector metatable */
int felab_open_operator(lua_State *L); /* shell/lua-operator.c: the fe.operator constructor */

/* Layouts shared with shell/lua-mesh.c (mesh_handle) and shell/lua-operator.c. */
typedef struct mesh_handle {
  fe_mesh *m;
  int borrowers;
} mesh_handle;

typedef struct space_handle {
  fe_space *V;
  int borrowers; /* live operators on this space */
} space_handle;

static const char *const space_keys[] = {"family", "order", "components", NULL};

/* A Lua function (or a constant) seen by the engine as a fe_point_fn. */
typedef struct point_fn {
  lua_State *L;
  int fn;          /* stack index of the function, 0 for a constant */
  int x;           /* stack index of the reused argument table {x, y, z} */
  double constant; /* the value when fn == 0 */
  const char *where;
} point_fn;

/* The type of the value at i as a user reads it: "mesh" for a felab.mesh, else Lua's name. */
static const char *kind_of(lua_State *L, int i)
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

/* Error unless every key of the option table at t is one of valid (a typo like `oder`). */
static void check_keys(lua_State *L, int t, const char *fname, const char *const *valid)
{
  t = lua_absindex(L, t);
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

/* The space handle at i (open), or an error naming the function and the argument. */
static space_handle *check_space(lua_State *L, int i, const char *fname, const char *what)
{
  space_handle *h = luaL_testudata(L, i, FELAB_SPACE);
  if (!h) luaL_error(L, "%s: expected a space as %s, got %s", fname, what, kind_of(L, i));
  if (!h->V) luaL_error(L, "%s: this space was closed", fname);
  return h;
}

/* fe_point_fn: call the Lua function at x under lua_pcall; a Lua error or a result that is
 * not a number becomes an engine error (the engine unwinds, the binding raises it). */
static int point_fn_call(void *ctx, const double x[3], double *value)
{
  point_fn *f = ctx;
  if (!f->fn) {
    *value = f->constant;
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
  if (lua_type(L, -1) != LUA_TNUMBER) {
    fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                 "%s: the function must return a number, got %s at x = {%g, %g, %g}", f->where,
                 luaL_typename(L, -1), x[0], x[1], x[2]);
    lua_pop(L, 1);
    return FE_ERR_ARG;
  }
  *value = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return 0;
}

/* Set up f for the number or function at i; pushes the reused argument table. */
static void point_fn_init(lua_State *L, int i, const char *where, point_fn *f)
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
               kind_of(L, i));
  lua_createtable(L, 3, 0); /* filled now so the trampoline's stores never allocate */
  for (int d = 0; d < 3; d++) {
    lua_pushnumber(L, 0.0);
    lua_rawseti(L, -2, d + 1);
  }
  f->x = lua_gettop(L);
}

/* Push a vector handle holding NULL that remembers the space at index s. */
static fe_vector **push_vector(lua_State *L, int s)
{
  s = lua_absindex(L, s);
  fe_vector **p = lua_newuserdatauv(L, sizeof *p, 1);
  *p = NULL;
  luaL_setmetatable(L, FELAB_VECTOR);
  lua_pushvalue(L, s);
  lua_setiuservalue(L, -2, 1);
  return p;
}

/* The space name of argument 2: "P1", or {family = "P", order = 1, components = 1} where
 * the family defaults to P on simplices and Q on tensor cells of m. */
static const char *space_name(lua_State *L, const fe_mesh *m, char *buf, size_t n)
{
  if (lua_type(L, 2) == LUA_TSTRING) return lua_tostring(L, 2);
  if (!lua_istable(L, 2))
    luaL_error(L, "fe.space: expected a space name (\"P1\", \"Q1\") or {family = \"P\", order = 1} "
                  "as argument 2, got %s", kind_of(L, 2));
  check_keys(L, 2, "fe.space", space_keys);
  int simplex = m->type == FE_CELL_TRI || m->type == FE_CELL_TET;
  int type = lua_getfield(L, 2, "family");
  if (type != LUA_TSTRING && type != LUA_TNIL)
    luaL_error(L, "fe.space: family must be a string (\"P\" or \"Q\"), got %s", kind_of(L, -1));
  const char *family = type == LUA_TNIL ? (simplex ? "P" : "Q") : lua_tostring(L, -1);
  int isint = 0;
  lua_getfield(L, 2, "order");
  lua_Integer order = lua_isnil(L, -1) ? 1 : lua_tointegerx(L, -1, &isint);
  if (!lua_isnil(L, -1) && (!isint || lua_type(L, -1) != LUA_TNUMBER || order < 1 || order > 99))
    luaL_error(L, "fe.space: order must be a positive integer, got %s",
               lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : kind_of(L, -1));
  lua_getfield(L, 2, "components");
  lua_Integer ncomp = lua_isnil(L, -1) ? 1 : lua_tointegerx(L, -1, &isint);
  if (!lua_isnil(L, -1) && (!isint || ncomp != 1))
    luaL_error(L, "fe.space: components = %s: only scalar spaces (components = 1) exist so far",
               luaL_tolstring(L, -1, NULL));
  snprintf(buf, n, "%s%lld", family, (long long)order);
  lua_pop(L, 3);
  return buf;
}

/* fe.space(m, "P1" | {family =, order =}) -> space (keeps m alive) */
static int fe_space_new(lua_State *L)
{
  mesh_handle *mh = luaL_testudata(L, 1, FELAB_MESH);
  if (!mh) return luaL_error(L, "fe.space: expected a mesh as argument 1, got %s", kind_of(L, 1));
  if (!mh->m) return luaL_error(L, "fe.space: the mesh (argument 1) was closed");
  char buf[64];
  const char *name = space_name(L, mh->m, buf, sizeof buf);
  lua_settop(L, 2);
  space_handle *h = lua_newuserdatauv(L, sizeof *h, 1);
  h->V = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_SPACE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  fe_space *V = NULL;
  FELAB_TRY(L, fe_space_create(mh->m, name, &V));
  h->V = V;
  mh->borrowers++;
  return 1;
}

/* V:interpolate(f) -> vector on the default backend and precision; f a number or a
 * function(x) of x = {x, y, z} returning a number, called at every node. */
static int space_interpolate(lua_State *L)
{
  space_handle *h = check_space(L, 1, "V:interpolate", "self");
  fe_space *V = h->V;
  lua_settop(L, 2);
  point_fn f;
  point_fn_init(L, 2, "V:interpolate", &f);
  if (V->nnodes != V->ndofs)
    return luaL_error(L, "V:interpolate: %s has %d components; interpolate a scalar space",
                      V->name, V->ncomp);
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(NULL, &be));
  double *values = lua_newuserdatauv(L, (size_t)V->nnodes * sizeof(double) + 1, 0);
  fe_vector **out = push_vector(L, 1);
  h->borrowers++; /* the Lua function cannot free V under the engine's feet */
  int rc = fe_space_interpolate(V, point_fn_call, &f, values);
  h->borrowers--;
  if (rc) return felab_raise(L);
  fe_vector *x = NULL;
  FELAB_TRY(L, fe_vector_create(be, fe_precision_default(), V->ndofs, &x));
  *out = x; /* owned by the handle from here on, even if the next call fails */
  FELAB_TRY(L, fe_vector_set(x, values));
  return 1;
}

/* Free the space once (NULL-safe) and give back its borrow of the mesh. */
static void space_release(lua_State *L, int i)
{
  space_handle *h = lua_touserdata(L, i);
  if (!h || !h->V) return;
  fe_space_free(h->V);
  h->V = NULL;
  if (lua_getiuservalue(L, i, 1) == LUA_TUSERDATA) {
    mesh_handle *mh = lua_touserdata(L, -1);
    if (mh->borrowers > 0) mh->borrowers--;
  }
  lua_pop(L, 1);
}

/* __gc and __close: free now unless a live operator (or a running interpolation) borrows
 * the space; operators are finalized before their space and give their borrows back. */
static int space_free(lua_State *L)
{
  space_handle *h = luaL_checkudata(L, 1, FELAB_SPACE);
  if (h->borrowers == 0) space_release(L, 1);
  return 0;
}

/* __tostring: "space P1 on 1331-vertex tet mesh: 1331 dofs" */
static int space_tostring(lua_State *L)
{
  space_handle *h = luaL_checkudata(L, 1, FELAB_SPACE);
  if (!h->V) lua_pushliteral(L, "space (closed)");
  else
    lua_pushfstring(L, "space %s on %d-vertex %s mesh: %d dofs", h->V->name, h->V->mesh->nvertices,
                    fe_cell_name(h->V->mesh->type), h->V->ndofs);
  return 1;
}

/* __index: methods first, then the fields ndofs, nnodes, name, mesh, order, family, ncomp,
 * nbasis. */
static int space_index(lua_State *L)
{
  space_handle *h = luaL_checkudata(L, 1, FELAB_SPACE);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  if (lua_type(L, 2) != LUA_TSTRING) return 1; /* the nil */
  const char *k = lua_tostring(L, 2);
  if (!h->V) return luaL_error(L, "space.%s: this space was closed", k);
  const fe_space *V = h->V;
  if (!strcmp(k, "ndofs")) lua_pushinteger(L, V->ndofs);
  else if (!strcmp(k, "nnodes")) lua_pushinteger(L, V->nnodes);
  else if (!strcmp(k, "name")) lua_pushstring(L, V->name);
  else if (!strcmp(k, "mesh")) lua_getiuservalue(L, 1, 1);
  else if (!strcmp(k, "order")) lua_pushinteger(L, V->elem.order);
  else if (!strcmp(k, "family")) lua_pushlstring(L, &V->elem.family, 1);
  else if (!strcmp(k, "ncomp")) lua_pushinteger(L, V->ncomp);
  else if (!strcmp(k, "nbasis")) lua_pushinteger(L, V->elem.nbasis);
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.space metatable (idempotent); leaves the stack as it was. */
static void space_register(lua_State *L)
{
  static const luaL_Reg methods[] = {{"interpolate", space_interpolate}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", space_free},
                                  {"__close", space_free},
                                  {"__tostring", space_tostring},
                                  {NULL, NULL}};
  luaL_newmetatable(L, FELAB_SPACE);
  luaL_setfuncs(L, meta, 0);
  luaL_setfuncs(L, methods, 0); /* the methods in the metatable too, for help() */
  luaL_newlib(L, methods);
  lua_pushcclosure(L, space_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* Push the fe module table: fe.space, fe.operator. */
int felab_open_fe(lua_State *L)
{
  space_register(L);
  felab_open_vector(L);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, fe_space_new);
  lua_setfield(L, -2, "space");
  felab_open_operator(L);
  lua_setfield(L, -2, "operator");
  return 1;
}
