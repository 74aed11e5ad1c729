/* felab shell: the fe module. fe.space and the felab.space type (fields ndofs, name, mesh;
 * method interpolate), and fe.operator (shell/lua-operator.c). Vectors are in
 * shell/lua-vector.c. A Lua function of a point reaches the engine through a fe_point_fn
 * trampoline (shell/lua-util.c) that calls it under lua_pcall, so a Lua error never unwinds
 * engine frames. The handles and their borrow counts are described in shell/shell.h. */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/mesh/mesh.h"
#include "engine/fem/space.h"
#include "engine/core/strbuf.h"
#include "engine/solve/vector.h"
#include "shell/lua-sym.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "shell/shell.h"

static const char *const space_keys[] = {"family", "order", "components", "nodes", NULL};

/* The space of argument 2 into o: "P2", or {family = "P", order = 2, components = 3,
 * nodes = "gll" | "equispaced"}; the family defaults to P on simplices and prisms and to Q on
 * tensor cells of m. */
static void space_opts(lua_State *L, const fe_mesh *m, fe_space_opts *o)
{
  o->ncomp = 1;
  o->kind = FE_NODES_GLL;
  if (lua_type(L, 2) == LUA_TSTRING) {
    if (fe_space_parse_name(lua_tostring(L, 2), &o->family, &o->order)) felab_raise(L);
    return;
  }
  if (!lua_istable(L, 2))
    luaL_error(L, "fe.space: expected a space name (\"P2\", \"Q3\") or {family = \"P\", order = 2, "
                  "components = 3} as argument 2, got %s", felab_kind_of(L, 2));
  felab_check_keys(L, 2, "fe.space", space_keys);
  int tensor = m->type == FE_CELL_QUAD || m->type == FE_CELL_HEX;
  int type = lua_getfield(L, 2, "family");
  if ((type != LUA_TSTRING && type != LUA_TNIL) ||
      (type == LUA_TSTRING && strcmp(lua_tostring(L, -1), "P") && strcmp(lua_tostring(L, -1), "Q")))
    luaL_error(L, "fe.space: family must be \"P\" or \"Q\", got %s", felab_number_or_kind(L, -1));
  o->family = type == LUA_TNIL ? (tensor ? 'Q' : 'P') : lua_tostring(L, -1)[0];
  lua_getfield(L, 2, "order");
  lua_Integer order = 1;
  if (!lua_isnil(L, -1) && (!felab_is_integer(L, -1, &order) || order < 1 || order > 99))
    luaL_error(L, "fe.space: order must be a positive integer, got %s",
               felab_number_or_kind(L, -1));
  o->order = (int)order;
  lua_getfield(L, 2, "components");
  lua_Integer ncomp = 1;
  if (!lua_isnil(L, -1) && (!felab_is_integer(L, -1, &ncomp) || ncomp < 1 || ncomp > 3))
    luaL_error(L, "fe.space: components must be 1, 2 or 3, got %s", felab_number_or_kind(L, -1));
  o->ncomp = (int)ncomp;
  type = lua_getfield(L, 2, "nodes");
  if (type != LUA_TNIL) {
    const char *k = lua_tostring(L, -1);
    if (type == LUA_TSTRING && !strcmp(k, "gll")) o->kind = FE_NODES_GLL;
    else if (type == LUA_TSTRING && !strcmp(k, "equispaced")) o->kind = FE_NODES_EQUISPACED;
    else
      luaL_error(L, "fe.space: nodes must be \"gll\" or \"equispaced\", got %s",
                 felab_number_or_kind(L, -1));
  }
  lua_pop(L, 4);
}

/* fe.space(m, "P1" | {family =, order =, components =, nodes =}) -> space (keeps m alive) */
static int fe_space_new(lua_State *L)
{
  mesh_handle *mh = felab_check_handle(L, 1, FELAB_MESH, "fe.space", "argument 1");
  fe_space_opts o;
  space_opts(L, mh->m, &o);
  lua_settop(L, 2);
  space_handle *h = lua_newuserdatauv(L, sizeof *h, 1);
  h->V = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_SPACE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  fe_space *V = NULL;
  /* under mpirun (more than one rank): this rank's part of the space (engine/parallel/dist.h) */
  if (fe_comm_parallel()) FELAB_TRY(L, fe_space_create_dist(mh->m, &o, &V));
  else FELAB_TRY(L, fe_space_create_opts(mh->m, &o, &V));
  h->V = V;
  mh->borrowers++;
  return 1;
}

/* V:interpolate's options {backend =, precision =} at 3 (absent: the session's defaults). */
static void interpolate_target(lua_State *L, fe_backend **be, fe_precision *prec)
{
  static const char *const keys[] = {"backend", "precision", NULL};
  const char *bname = NULL, *pname = NULL;
  if (!lua_isnoneornil(L, 3)) {
    if (!lua_istable(L, 3))
      luaL_error(L, "V:interpolate: the options must be a table, got %s", felab_kind_of(L, 3));
    felab_check_keys(L, 3, "V:interpolate", keys);
    bname = felab_opt_field_name(L, 3, "V:interpolate", "backend");
    pname = felab_opt_field_name(L, 3, "V:interpolate", "precision");
  }
  *prec = fe_precision_default();
  if (fe_backend_get(bname, be) || (pname && fe_precision_parse(pname, prec))) felab_raise(L);
}

/* V:interpolate(f [, opts]) with f a C expression of x[0..2] (or, on a vector space, a table
 * of one per component): computed by a kernel on the vector's backend. */
static int space_interpolate_expr(lua_State *L, space_handle *h)
{
  const fe_space *V = h->V;
  const char *expr[3] = {NULL, NULL, NULL};
  if (lua_type(L, 2) == LUA_TSTRING) {
    if (V->ncomp != 1)
      return luaL_error(L, "V:interpolate: this space has %d components: give a table of %d "
                           "expressions", V->ncomp, V->ncomp);
    expr[0] = lua_tostring(L, 2);
  } else {
    if ((int)lua_rawlen(L, 2) != V->ncomp)
      return luaL_error(L, "V:interpolate: %d expressions for a space of %d components",
                        (int)lua_rawlen(L, 2), V->ncomp);
    for (int k = 0; k < V->ncomp; k++) {
      if (lua_rawgeti(L, 2, k + 1) != LUA_TSTRING)
        return luaL_error(L, "V:interpolate: expression %d must be a string, got %s", k + 1,
                          felab_kind_of(L, -1));
      expr[k] = lua_tostring(L, -1); /* anchored in the table */
      lua_pop(L, 1);
    }
  }
  fe_backend *be;
  fe_precision prec;
  interpolate_target(L, &be, &prec);
  fe_vector **out = felab_push_vector(L, 1);
  fe_vector *x = NULL;
  if (fe_vector_interpolate(V, expr, be, prec, &x)) {
    fe_error_context("V:interpolate");
    return felab_raise(L);
  }
  *out = x;
  return 1;
}

/* Whether the value at i is a table of strings (expressions for each component). */
static int is_string_table(lua_State *L, int i)
{
  if (!lua_istable(L, i) || lua_rawlen(L, i) == 0) return 0;
  int yes = lua_rawgeti(L, i, 1) == LUA_TSTRING;
  lua_pop(L, 1);
  return yes;
}

/* ---- a function of x, traced ---- */

typedef struct traced_field {
  fe_xgraph *g;
  int ncomp;
  int ids[3];
} traced_field;

static int traced_field_gc(lua_State *L)
{
  traced_field *t = lua_touserdata(L, 1);
  fe_xgraph_free(t->g);
  t->g = NULL;
  return 0;
}

static int untraceable(lua_State *L)
{
  return luaL_error(L, "math.random gives another value at every node: not traced");
}

/* The protected part: f (argument 2) called once on the symbol x, its value as
 * ncomp roots; math.random refused meanwhile (a constant of the trace would be wrong). */
static int traced_field_body(lua_State *L)
{
  traced_field *t = lua_touserdata(L, 1);
  lua_getglobal(L, "math");
  int math = lua_gettop(L);
  if (lua_istable(L, math)) {
    lua_getfield(L, math, "random");
    lua_pushcfunction(L, untraceable);
    lua_setfield(L, math, "random");
  }
  lua_pushvalue(L, 2);
  felab_sym_push_var(L, FE_V_X, 0, 3, 0);
  int rc = lua_pcall(L, 1, 1, 0);
  if (lua_istable(L, math)) { /* math.random back before anything can fail */
    lua_pushvalue(L, math + 1);
    lua_setfield(L, math, "random");
  }
  if (rc != LUA_OK) return lua_error(L);
  felab_sym_roots(L, -1, t->ncomp > 1 ? t->ncomp : 0, 0, t->ids, "V:interpolate's function");
  return 0;
}

/* V:interpolate(f) with f a function: traced once on a symbol x into a kernel computed where
 * the vector lives (in double, then converted: the values of calls at the nodes), then checked
 * against calls of f at four nodes. Pushes the vector and returns 1; returns 0 (nothing
 * pushed) when f cannot be traced (a branch on x, math.floor, tables of x, ...) or its calls
 * disagree with the trace (math.random, state kept between calls): then f is called at every
 * node. FELAB_TRACE_FIELDS=0 never traces. */
static int interpolate_traced(lua_State *L, const fe_space *V, felab_point_fn *f, fe_backend *be,
                              fe_precision prec)
{
  const char *env = getenv("FELAB_TRACE_FIELDS");
  if ((env && !strcmp(env, "0")) || V->ncomp > 3 || V->nnodes < 1) return 0;
  int top = lua_gettop(L);
  traced_field *t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t);
  t->ncomp = V->ncomp;
  lua_newtable(L);
  lua_pushcfunction(L, traced_field_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  if (fe_xgraph_create(&t->g)) {
    fe_error_clear();
    lua_settop(L, top);
    return 0;
  }
  felab_trace_begin(t->g, 3);
  lua_pushcfunction(L, traced_field_body);
  lua_pushlightuserdata(L, t);
  lua_pushvalue(L, f->fn);
  int rc = lua_pcall(L, 2, 0, 0);
  felab_trace_end();
  fe_strbuf b = {0};
  char *body = NULL;
  fe_vector *y = NULL, *z = NULL;
  if (rc == LUA_OK) {
    static const char *const lhs[3] = {"fe_v[0]", "fe_v[1]", "fe_v[2]"};
    fe_x_emit_c(t->g, t->ids, lhs, V->ncomp, 0, 8, &b);
    rc = fe_strbuf_finish(&b, &body) || fe_vector_interpolate_code(V, body, be, FE_DOUBLE, &y);
  }
  free(body);
  fe_xgraph_free(t->g); /* the userdata's __gc finds NULL */
  t->g = NULL;
  /* four nodes, the function called there: the same values or no trace */
  for (int i = 0; rc == 0 && i < 4; i++) {
    const int node = (int)((long long)(V->nnodes - 1) * i / 3);
    double want[3], got;
    if (felab_point_fn_call(f, V->node_coords + 3 * (size_t)node, V->ncomp, want)) rc = 1;
    for (int k = 0; rc == 0 && k < V->ncomp; k++) {
      rc = fe_vector_get_entry(y, node * V->ncomp + k, &got);
      if (!rc && !(fabs(got - want[k]) <= 1e-9 * fmax(1, fabs(want[k])))) rc = 1;
    }
  }
  if (rc == 0 && prec != FE_DOUBLE) {
    rc = fe_vector_convert(y, be, prec, &z);
    fe_vector_free(y);
    y = z;
  }
  lua_settop(L, top);
  if (rc) {
    fe_vector_free(y);
    fe_error_clear();
    return 0;
  }
  fe_vector **out = felab_push_vector(L, 1);
  *out = y;
  return 1;
}

/* V:interpolate(f [, opts]) -> vector on opts' backend and precision (default: the
 * session's); f a number or a function(x) of x = {x, y, z} returning a number (or, on a
 * vector space, a table of one number per component): traced once where it can be (arithmetic
 * and math.* of x: interpolate_traced), else called at every node; or a C expression of
 * x[0..2] (a table of them), computed where the vector lives. */
static int space_interpolate(lua_State *L)
{
  space_handle *h = felab_check_self(L, 1, FELAB_SPACE, "V:interpolate", "self");
  fe_space *V = h->V;
  lua_settop(L, 3);
  if (lua_type(L, 2) == LUA_TSTRING || is_string_table(L, 2)) return space_interpolate_expr(L, h);
  if (lua_type(L, 2) != LUA_TNUMBER && lua_type(L, 2) != LUA_TFUNCTION)
    return luaL_error(L, "V:interpolate: expected a number, a function(x) or a C expression of "
                         "x[0..2] (a string; a table of them on a vector space) as argument 1, "
                         "got %s", felab_kind_of(L, 2));
  felab_point_fn f;
  felab_point_fn_init(L, 2, "V:interpolate", &f);
  fe_backend *be;
  fe_precision prec;
  interpolate_target(L, &be, &prec);
  if (f.fn) {
    h->borrowers++;
    int traced = interpolate_traced(L, V, &f, be, prec);
    h->borrowers--;
    if (traced) return 1;
  }
  double *values = lua_newuserdatauv(L, (size_t)V->ndofs * sizeof(double) + 1, 0);
  fe_vector **out = felab_push_vector(L, 1);
  h->borrowers++; /* the Lua function cannot free V under the engine's feet */
  int rc = fe_space_interpolate(V, felab_point_fn_call, &f, values);
  h->borrowers--;
  if (rc) return felab_raise(L);
  fe_vector *x = NULL;
  FELAB_TRY(L, fe_vector_create(be, prec, V->ndofs, &x));
  x->dist = V->dist;
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

/* V:cell_dofs(c) -> {dofs of cell c}: 1-based, in the element's order, basis function b's
 * component k at position b * ncomp + k + 1 (the rows of A:element_matrices' K:get(c)) */
static int space_cell_dofs(lua_State *L)
{
  space_handle *h = felab_check_self(L, 1, FELAB_SPACE, "V:cell_dofs", "self");
  const fe_space *V = h->V;
  lua_Integer c;
  if (!felab_is_integer(L, 2, &c))
    return luaL_error(L, "V:cell_dofs: the cell must be an integer, got %s", felab_number_or_kind(L, 2));
  if (c < 1 || c > V->mesh->ncells)
    return luaL_error(L, "V:cell_dofs: cell %I is out of range (1..%d)", c, V->mesh->ncells);
  int nb = V->elem.nbasis, nc = V->ncomp;
  lua_createtable(L, nb * nc, 0);
  for (int b = 0; b < nb; b++)
    for (int k = 0; k < nc; k++) {
      lua_pushinteger(L, (lua_Integer)V->cell_nodes[(size_t)(c - 1) * nb + b] * nc + k + 1);
      lua_rawseti(L, -2, b * nc + k + 1);
    }
  return 1;
}

/* __tostring: "space P1 on 1331-vertex tet mesh: 1331 dofs" */
static int space_tostring(lua_State *L)
{
  space_handle *h = luaL_checkudata(L, 1, FELAB_SPACE);
  if (!h->V) lua_pushliteral(L, "space (closed)");
  else
    lua_pushfstring(L, "space %s%s%s on %d-cell %s mesh%s: %d nodes, %d dofs", h->V->name,
                    h->V->ncomp > 1 ? "^" : "", h->V->ncomp > 1 ? (const char[]){(char)('0' + h->V->ncomp), 0} : "",
                    h->V->mesh->ncells, fe_cell_name(h->V->mesh->type),
                    h->V->curved ? " (curved)" : "", h->V->nnodes, h->V->ndofs);
  return 1;
}

/* V.exchange: a split space's interface in entries (dofs): {neighbours, send (every
 * neighbour's shared entries, one list after another: what an action sends), shared (the
 * distinct ones), notowned (another rank owns them)}; nil on one rank. */
static void space_push_exchange(lua_State *L, const fe_dist *d)
{
  if (!d) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 4);
  const int v[4] = {d->nnb, d->nsend, d->nshared, d->nnot};
  static const char *const names[4] = {"neighbours", "send", "shared", "notowned"};
  for (int k = 0; k < 4; k++) {
    lua_pushinteger(L, v[k]);
    lua_setfield(L, -2, names[k]);
  }
}

/* __index: methods first, then the fields ndofs, local_ndofs, exchange, nnodes, name, mesh,
 * order, family, ncomp, nbasis, bytes (the dof map and the node coordinates). */
static int space_index(lua_State *L)
{
  space_handle *h = luaL_checkudata(L, 1, FELAB_SPACE);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!h->V) return luaL_error(L, "space.%s: this space was closed", k);
  const fe_space *V = h->V;
  if (!strcmp(k, "ndofs")) lua_pushinteger(L, V->dist ? V->dist->ndofs : V->ndofs); /* all ranks' */
  else if (!strcmp(k, "local_ndofs")) lua_pushinteger(L, V->ndofs); /* this rank's, shared too */
  else if (!strcmp(k, "exchange")) space_push_exchange(L, V->dist);
  else if (!strcmp(k, "nnodes")) lua_pushinteger(L, V->nnodes);
  else if (!strcmp(k, "name")) lua_pushstring(L, V->name);
  else if (!strcmp(k, "mesh")) lua_getiuservalue(L, 1, 1);
  else if (!strcmp(k, "order")) lua_pushinteger(L, V->elem.order);
  else if (!strcmp(k, "family")) lua_pushlstring(L, &V->elem.family, 1);
  else if (!strcmp(k, "ncomp")) lua_pushinteger(L, V->ncomp);
  else if (!strcmp(k, "nbasis")) lua_pushinteger(L, V->elem.nbasis);
  else if (!strcmp(k, "bytes"))
    lua_pushinteger(L, (lua_Integer)((size_t)V->mesh->ncells * V->elem.nbasis * sizeof(int) +
                                     (size_t)V->nnodes * 3 * sizeof(double)));
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.space metatable (idempotent); leaves the stack as it was. */
static void space_register(lua_State *L)
{
  static const luaL_Reg methods[] = {{"interpolate", space_interpolate},
                                     {"cell_dofs", space_cell_dofs}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", space_free},
                                  {"__close", space_free},
                                  {"__tostring", space_tostring},
                                  {NULL, NULL}};
  felab_register_type(L, FELAB_SPACE, meta, methods, space_index);
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
