/* felab shell: physics. physics.new (traced Lua functions or raw C), the felab.physics type
 * (fields name, description, flops, flops_jacobian, ncomp, nonlinear, constants; methods
 * show, set), and the library (poisson, reaction_diffusion, elasticity, heat, p_laplacian),
 * written in Lua on physics.new (shell/lib/physics.lua, embedded at build time).
 *
 * A traced physics keeps its definition (user value 1) and is traced once per dimension,
 * when fe.operator first needs it; physics.new traces it at once in 3D (or 2D for a
 * components = 2 law) so mistakes show where they are made. What a definition becomes (the
 * trace, or raw C) is shell/lua-physics-make.c's. */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/physics/physics.h"
#include "engine/fem/space.h"
#include "engine/solve/vector.h"
#include "shell/lua-physics-private.h"
#include "shell/lua-sym.h"
#include "shell/shell.h"

static const char *const new_keys[] = {"f0", "f1", "g0", "g1", "g2", "g3", "components", "name",
                                       "description", "constants", "regions", "fields", NULL};

/* ---- physics.new and the handle ---- */

/* Raise the engine's error where the user's code called: past the library written in Lua
 * (physics.poisson and the others call physics.new from physics.lua). */
static int raise_at_caller(lua_State *L)
{
  lua_Debug ar;
  int level = 1;
  while (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && !strcmp(ar.source, "=physics.lua"))
    level++;
  luaL_where(L, level);
  lua_pushstring(L, fe_error_message());
  fe_error_clear();
  lua_concat(L, 2);
  return lua_error(L);
}

static physics_handle *check_physics(lua_State *L, int i, const char *fname)
{
  physics_handle *h = felab_expect(L, i, FELAB_PHYSICS, fname, "the physics");
  if (!h->p) luaL_error(L, "%s: this physics was closed", fname);
  return h;
}

static int is_raw(lua_State *L, int spec)
{
  int raw = 0, fn = 0;
  static const char *const terms[] = {"f0", "f1", "g0", "g1", "g2", "g3"};
  for (int i = 0; i < 6; i++) {
    int t = lua_getfield(L, spec, terms[i]);
    raw |= t == LUA_TSTRING;
    fn |= t == LUA_TFUNCTION;
    if (t != LUA_TNIL && t != LUA_TSTRING && t != LUA_TFUNCTION)
      luaL_error(L, "physics.new: %s must be a function (traced) or a string of C statements, got %s",
                 terms[i], felab_kind_of(L, -1));
    if (i >= 2 && t == LUA_TFUNCTION)
      luaL_error(L, "physics.new: %s is derived from f0 and f1 by the tracer; give it only in raw C mode", terms[i]);
    lua_pop(L, 1);
  }
  if (raw && fn) luaL_error(L, "physics.new: f0 and f1 are either both traced functions or both C strings");
  if (!raw && !fn) luaL_error(L, "physics.new: give f0 and/or f1 (functions of u, du, x, a, t)");
  return raw;
}

static physics_handle *push_handle(lua_State *L, int spec)
{
  physics_handle *h = lua_newuserdatauv(L, sizeof *h, 2);
  memset(h, 0, sizeof *h);
  luaL_setmetatable(L, FELAB_PHYSICS);
  lua_pushvalue(L, spec);
  lua_setiuservalue(L, -2, 1);
  return h;
}

/* The handle at i borrows the space of each field of the definition at spec (its user value
 * 2 lists them): the physics reads their dof maps and elements, so closing such a space
 * leaves it to the collector, as an operator's does. The vectors are held by the physics
 * itself (fe_physics_bind). */
static void borrow_field_spaces(lua_State *L, int i, int spec)
{
  i = lua_absindex(L, i);
  spec = lua_absindex(L, spec);
  lua_newtable(L);
  int n = 0, top = lua_gettop(L) - 1;
  if (lua_getfield(L, spec, "fields") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) { /* the fields were checked: vectors of spaces */
      space_handle *sh = NULL;
      if (lua_type(L, -1) == LUA_TUSERDATA && lua_getiuservalue(L, -1, 1) == LUA_TUSERDATA)
        sh = luaL_testudata(L, -1, FELAB_SPACE);
      if (sh) {
        sh->borrowers++;
        lua_rawseti(L, top + 1, ++n);
      }
      lua_settop(L, top + 3); /* the table of spaces, the fields, the key */
    }
  }
  lua_pop(L, 1);
  lua_setiuservalue(L, i, 2);
}

/* Give back the borrows of borrow_field_spaces, once. */
static void return_field_spaces(lua_State *L, int i)
{
  if (lua_getiuservalue(L, i, 2) == LUA_TTABLE) {
    for (lua_Integer k = 1; lua_rawgeti(L, -1, k) == LUA_TUSERDATA; k++) {
      space_handle *sh = luaL_testudata(L, -1, FELAB_SPACE);
      if (sh && sh->borrowers > 0) sh->borrowers--;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, i, 2);
  }
  lua_pop(L, 1);
}

/* Push a copy of the table at i whose table values are copied too, down to depth levels:
 * the definition keeps its own constants, regions and fields, so pde:set never writes into
 * the caller's tables and later changes of them never reach a trace made later. */
static void copy_table(lua_State *L, int i, int depth)
{
  i = lua_absindex(L, i);
  luaL_checkstack(L, 5, "physics.new: copying the definition");
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, i)) {
    if (depth > 1 && lua_type(L, -1) == LUA_TTABLE) {
      copy_table(L, -1, depth - 1);
      lua_remove(L, -2);
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_settable(L, -4);
  }
}

/* physics.new{f0 =, f1 =, components =, constants =, regions =, fields =, name =} */
static int physics_new(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TTABLE);
  felab_check_keys(L, 1, "physics.new", new_keys);
  copy_table(L, 1, 3); /* the definition, at 2: regions = {kappa = {heart = 0.4}} is 3 deep */
  int raw = is_raw(L, 2);
  physics_handle *h = push_handle(L, 2);
  if (raw) {
    felab_physics_raw(L, 2, &h->p);
    borrow_field_spaces(L, 3, 2);
    FELAB_TRY(L, fe_codegen_physics_check(h->p, 3));
    return 1;
  }
  int dim = felab_physics_components(L, 2, 3) == 2 ? 2 : 3;
  h->traced[dim] = felab_physics_trace(L, 2, dim);
  h->p = h->traced[dim];
  borrow_field_spaces(L, 3, 2);
  /* "1/0": an error now, with the handle owning the physics */
  if (fe_physics_check_coefficients(h->p, NULL, NULL)) return raise_at_caller(L);
  return 1;
}

/* The physics of the handle at i for dimension dim, traced for it on first use. */
static fe_physics *physics_of_dim(lua_State *L, int i, int dim, const char *fname)
{
  physics_handle *h = check_physics(L, i, fname);
  if (h->p->dim == 0 || h->p->dim == dim) return h->p;
  if (dim < 1 || dim > 3) luaL_error(L, "%s: dimension %d", fname, dim);
  if (!h->traced[dim]) {
    lua_getiuservalue(L, i, 1);
    h->traced[dim] = felab_physics_trace(L, -1, dim);
    lua_pop(L, 1);
    TRY(L, fe_physics_check_coefficients(h->traced[dim], NULL, NULL));
  }
  return h->traced[dim];
}

/* The physics of argument i for a space of dimension dim (traced for it on first use; its
 * coefficients of x are checked by fe.operator at its own rules' points). */
struct fe_physics *felab_physics_for(lua_State *L, int i, int dim, const char *fname)
{
  return physics_of_dim(L, i, dim, fname);
}

/* Free the physics once (NULL-safe). */
static void physics_release(physics_handle *h)
{
  if (!h) return;
  int traced = 0;
  for (int d = 1; d <= 3; d++) {
    traced |= h->traced[d] == h->p;
    fe_physics_free(h->traced[d]);
    h->traced[d] = NULL;
  }
  if (!traced) fe_physics_free(h->p);
  h->p = NULL;
}

/* __gc and __close: free now unless a live operator borrows the physics. */
static int physics_free(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (h->borrowers == 0) {
    physics_release(h);
    return_field_spaces(L, 1);
  }
  return 0;
}

static int physics_tostring(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (!h->p) lua_pushliteral(L, "physics (closed)");
  else
    lua_pushfstring(L, "physics %s: %s", h->p->name, h->p->description ? h->p->description : "(no description)");
  return 1;
}

/* pde:show([dim]) prints f0, f1, g0..g3 as mathematics and as C, with flop counts. */
static int physics_show(lua_State *L)
{
  check_physics(L, 1, "pde:show");
  lua_Integer dim = 0;
  if (!lua_isnoneornil(L, 2) && (!felab_is_integer(L, 2, &dim) || dim < 1 || dim > 3))
    return luaL_error(L, "pde:show: the dimension must be 1, 2 or 3, got %s", felab_number_or_kind(L, 2));
  physics_handle *h = lua_touserdata(L, 1);
  fe_physics *p = dim ? physics_of_dim(L, 1, (int)dim, "pde:show") : h->p;
  if (p->show) {
    fputs(p->show, stdout);
  } else {
    printf("physics %s (%s): %d component%s\n", p->name, p->description ? p->description : "", p->ncomp,
           p->ncomp > 1 ? "s" : "");
    const char *b[4] = {p->f0, p->f1, p->df0, p->df1}, *n[4] = {"f0", "f1", "df0", "df1"};
    for (int i = 0; i < 4; i++) printf("%s:\n    %s\n", n[i], b[i] ? b[i] : "0");
    printf("residual: %g flops per point; Jacobian action: %g flops per point (counted in the C text)\n",
           p->flops_f, p->flops_df);
  }
  fflush(stdout);
  return 0;
}

/* The physics of a handle, each once: p and the traces of other dimensions. */
static int physics_all(physics_handle *h, fe_physics **all)
{
  int n = 0;
  all[n++] = h->p;
  for (int d = 1; d <= 3; d++)
    if (h->traced[d] && h->traced[d] != h->p) all[n++] = h->traced[d];
  return n;
}

static int const_index(const fe_physics *p, const char *name)
{
  for (int i = 0; i < p->nconst; i++)
    if (!strcmp(p->const_names[i], name)) return i;
  return -1;
}

static int field_index(const fe_physics *p, const char *name)
{
  for (int i = 0; i < p->nfields; i++)
    if (!strcmp(p->field_names[i], name)) return i;
  return -1;
}

/* "P1, 1 component, 27 dofs" into buf. */
static const char *space_words(const fe_space *V, char *buf, size_t n)
{
  snprintf(buf, n, "%s, %d component%s, %d dofs", V->name, V->ncomp, V->ncomp > 1 ? "s" : "", V->ndofs);
  return buf;
}

/* Error unless the vector at i can replace field f of p: a vector of the very space the
 * field was bound with (the kernels were generated for its element and read its dof map),
 * with one entry per dof. Nothing is bound here. */
static void check_rebind(lua_State *L, int i, const fe_physics *p, int f)
{
  const char *name = p->field_names[f];
  const fe_space *old = p->field_space[f], *V;
  const fe_vector *v = felab_physics_field_vector(L, i, "pde:set", name, &V);
  char a[96], b[96];
  if (V->mesh != old->mesh)
    luaL_error(L, "pde:set: field %s lives on the mesh of its space (%s, %d cells); the vector given is "
                  "on another mesh (%s, %d cells)", name, space_words(old, a, sizeof a), old->mesh->ncells,
               space_words(V, b, sizeof b), V->mesh->ncells);
  if (V != old && V->ncomp == old->ncomp && V->ndofs == old->ndofs && !strcmp(V->name, old->name))
    luaL_error(L, "pde:set: field %s must stay on its space (%s); the vector given is of another %s space "
                  "of the same mesh: make it with the space the field had in physics.new",
               name, space_words(old, a, sizeof a), V->name);
  if (V != old)
    luaL_error(L, "pde:set: field %s must stay on its space (%s); the vector given is of %s", name,
               space_words(old, a, sizeof a), space_words(V, b, sizeof b));
  if (v->n != old->ndofs)
    luaL_error(L, "pde:set: field %s: the vector given has %d entries but its space %s has %d dofs", name,
               v->n, old->name, old->ndofs);
}

/* Error naming what p has, for a name it does not have. */
static int unknown_name(lua_State *L, const fe_physics *p, const char *k)
{
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < p->nconst; i++) {
    luaL_addstring(&b, i ? ", " : "");
    luaL_addstring(&b, p->const_names[i]);
  }
  luaL_addstring(&b, p->nfields ? "; its fields: " : "; no fields");
  for (int i = 0; i < p->nfields; i++) {
    luaL_addstring(&b, i ? ", " : "");
    luaL_addstring(&b, p->field_names[i]);
  }
  luaL_pushresult(&b);
  return luaL_error(L, "pde:set: physics %s has no constant '%s' and no field of that name (its constants: %s)",
                    p->name, k, lua_tostring(L, -1));
}

/* Error unless the entry of pde:set's table at the top (key, value) fits p: a number for a
 * constant, a vector of the field's space for a field. */
static void check_setting(lua_State *L, const fe_physics *p)
{
  if (lua_type(L, -2) != LUA_TSTRING)
    luaL_error(L, "pde:set: keys must be names of constants or fields, got a %s key", felab_kind_of(L, -2));
  const char *k = lua_tostring(L, -2);
  int f = field_index(p, k);
  if (const_index(p, k) >= 0) {
    if (lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "pde:set: constant %s must be a number, got %s", k, felab_kind_of(L, -1));
  } else if (f >= 0) {
    check_rebind(L, -1, p, f);
  } else {
    unknown_name(L, p, k);
  }
}

/* spec[group][key] = value for the key and value at the top, making spec[group] if absent:
 * a trace made later (another dimension) reads them from there. */
static void remember(lua_State *L, int spec, const char *group)
{
  int key = lua_gettop(L) - 1;
  if (lua_getfield(L, spec, group) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, spec, group);
  }
  lua_pushvalue(L, key);
  lua_pushvalue(L, key + 1);
  lua_settable(L, -3);
  lua_pop(L, 1);
}

/* pde:set{name = value, field = vector}: change constants (no recompiling) or rebind fields
 * (a vector of the same space). Every entry is checked before any is applied, so a set that
 * fails changes nothing. */
static int physics_set(lua_State *L)
{
  physics_handle *h = check_physics(L, 1, "pde:set");
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    check_setting(L, h->p);
    lua_pop(L, 1);
  }
  fe_physics *all[4];
  int n = physics_all(h, all);
  lua_getiuservalue(L, 1, 1);
  int spec = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    const char *k = lua_tostring(L, -2);
    int constant = const_index(h->p, k) >= 0;
    fe_vector *v = constant ? NULL : felab_check_vector(L, -1, "pde:set", k);
    for (int d = 0; d < n; d++) {
      int f = field_index(all[d], k);
      if (constant) FELAB_TRY(L, fe_physics_set_constant(all[d], k, lua_tonumber(L, -1)));
      else if (f >= 0) fe_physics_bind(all[d], f, v, all[d]->field_space[f]); /* held */
    }
    remember(L, spec, constant ? "constants" : "fields");
    lua_pop(L, 1);
  }
  return 0;
}

static int physics_index(lua_State *L)
{
  physics_handle *h = luaL_checkudata(L, 1, FELAB_PHYSICS);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *k = lua_tostring(L, 2);
  if (!strcmp(k, "show")) lua_pushcfunction(L, physics_show);
  else if (!strcmp(k, "set")) lua_pushcfunction(L, physics_set);
  else if (!h->p) return luaL_error(L, "physics.%s: this physics was closed", k);
  else if (!strcmp(k, "name")) lua_pushstring(L, h->p->name);
  else if (!strcmp(k, "description")) lua_pushstring(L, h->p->description ? h->p->description : "");
  else if (!strcmp(k, "flops")) lua_pushnumber(L, h->p->flops_f);
  else if (!strcmp(k, "flops_jacobian")) lua_pushnumber(L, h->p->flops_df);
  else if (!strcmp(k, "ncomp")) lua_pushinteger(L, h->p->ncomp);
  else if (!strcmp(k, "nonlinear")) lua_pushboolean(L, h->p->nonlinear);
  else if (!strcmp(k, "constants")) {
    lua_newtable(L);
    for (int i = 0; i < h->p->nconst; i++) {
      lua_pushnumber(L, h->p->const_values[i]);
      lua_setfield(L, -2, h->p->const_names[i]);
    }
  } else lua_pushnil(L);
  return 1;
}

static void physics_register(lua_State *L)
{
  static const luaL_Reg meta[] = {{"__index", physics_index},
                                  {"__gc", physics_free},
                                  {"__close", physics_free},
                                  {"__tostring", physics_tostring},
                                  {NULL, NULL}};
  /* the methods physics_index hands out, kept in the metatable too: help(pde.show) and
   * completion find them there (the same C functions, so equal values) */
  static const luaL_Reg methods[] = {{"show", physics_show}, {"set", physics_set}, {NULL, NULL}};
  luaL_newmetatable(L, FELAB_PHYSICS);
  luaL_setfuncs(L, meta, 0);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
}

/* The library in Lua (build/gen/lualib.c). */
const char *felab_lua_library(const char *name);

int felab_open_physics(lua_State *L)
{
  physics_register(L);
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_pushcfunction(L, physics_new);
  lua_setfield(L, t, "new");
  felab_sym_open(L, t);
  const char *lib = felab_lua_library("physics");
  if (!lib || luaL_loadbuffer(L, lib, strlen(lib), "=physics.lua") != LUA_OK)
    return luaL_error(L, "felab: the physics library does not load: %s", lib ? lua_tostring(L, -1) : "missing");
  lua_pushvalue(L, t);
  felab_push_util(L);
  lua_call(L, 2, 0);
  return 1;
}
