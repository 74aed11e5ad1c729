/* felab shell: physics. physics.new (traced Lua functions or raw C), the felab.physics type
 * (fields name, description, flops, flops_jacobian, ncomp, nonlinear, constants; methods
 * show, set), and the library (poisson, reaction_diffusion, elasticity, heat, p_laplacian),
 * written in Lua on physics.new (shell/physics.lua, embedded at build time).
 *
 * A traced physics keeps its definition (user value 1) and is traced once per dimension,
 * when fe.operator first needs it; physics.new traces it at once in 3D (or 2D for a
 * components = 2 law) so mistakes show where they are made. Named things are ordered the same
 * way in every trace: the constant t first, then constants, per-region values and fields by
 * name. */
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/codegen/codegen.h"
#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/operator/operator.h"
#include "engine/physics/physics.h"
#include "engine/fem/space.h"
#include "engine/solve/vector.h"
#include "shell/lua-sym.h"
#include "shell/shell.h"

#define MAX_NAMES 64

/* Raise the engine's error from a function that returns no int. */
#define TRY(L, call)                 \
  do {                               \
    if ((call) != 0) felab_raise(L); \
  } while (0)

static const char *const new_keys[] = {"f0", "f1", "g0", "g1", "g2", "g3", "components", "name",
                                       "description", "constants", "regions", "fields", NULL};

/* ---- the definition's named things, sorted ---- */

typedef struct names {
  int n;
  const char *name[MAX_NAMES]; /* anchored in the definition table */
} names;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The string keys of the table at t (or none when it is nil), sorted; `what` names it. */
static void keys_of_table(lua_State *L, int t, const char *what, names *out)
{
  t = lua_absindex(L, t);
  out->n = 0;
  if (lua_isnil(L, t)) return;
  if (!lua_istable(L, t)) luaL_error(L, "physics.new: %s must be a table, got %s", what, felab_kind_of(L, t));
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "physics.new: %s must map names to values, got a %s key", what, felab_kind_of(L, -2));
    if (out->n == MAX_NAMES) luaL_error(L, "physics.new: more than %d entries in %s", MAX_NAMES, what);
    out->name[out->n++] = lua_tostring(L, -2); /* anchored in the table */
    lua_pop(L, 1);
  }
  qsort(out->name, (size_t)out->n, sizeof out->name[0], cmp_str);
}

/* The keys of spec[key]. Leaves the stack as it was. */
static void keys_of(lua_State *L, int spec, const char *key, names *out)
{
  lua_getfield(L, spec, key);
  keys_of_table(L, -1, key, out);
  lua_pop(L, 1);
}

/* The constants: t first (0 unless given), then the others by name. */
static void constants_of(lua_State *L, int spec, names *nm, double *values)
{
  names user;
  keys_of(L, spec, "constants", &user);
  nm->n = 1;
  nm->name[0] = "t";
  values[0] = 0;
  lua_getfield(L, spec, "constants");
  for (int i = 0; i < user.n; i++) {
    lua_getfield(L, -1, user.name[i]);
    if (lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "physics.new: constant %s must be a number, got %s", user.name[i], felab_kind_of(L, -1));
    if (!strcmp(user.name[i], "t")) {
      values[0] = lua_tonumber(L, -1);
    } else {
      if (nm->n == MAX_NAMES) luaL_error(L, "physics.new: too many constants");
      values[nm->n] = lua_tonumber(L, -1);
      nm->name[nm->n++] = user.name[i];
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* ---- tracing ---- */

/* What a trace is made of; the graph is owned by a userdata so a Lua error frees it. */
typedef struct trace_job {
  int spec;        /* stack index of the definition */
  int dim, ncomp;
  fe_xgraph *g;
  fe_physics *out;
} trace_job;

static int graph_gc(lua_State *L)
{
  fe_xgraph **g = lua_touserdata(L, 1);
  fe_xgraph_free(*g);
  *g = NULL;
  return 0;
}

/* The table `a` handed to f0 and f1: constants, per-region values and fields by name. */
static void push_aux_table(lua_State *L, const names *kn, const names *rn, const names *fn,
                           const int *fncomp)
{
  lua_newtable(L);
  for (int i = 0; i < kn->n; i++) {
    felab_sym_push_var(L, FE_V_K, i, 0, 0);
    lua_setfield(L, -2, kn->name[i]);
  }
  for (int i = 0; i < rn->n; i++) {
    felab_sym_push_var(L, FE_V_A, i, 0, 0);
    lua_setfield(L, -2, rn->name[i]);
  }
  for (int i = 0, off = 0; i < fn->n; off += fncomp[i], i++) {
    felab_sym_push_var(L, FE_V_F, off, fncomp[i] > 1 ? fncomp[i] : 0, 0);
    lua_setfield(L, -2, fn->name[i]);
  }
}

/* The vector at i as the value of field `field`, with its space into *space: a field is a
 * vector of a space (made by V:interpolate or an action), never a free vector. */
static fe_vector *field_vector(lua_State *L, int i, const char *fname, const char *field,
                               const fe_space **space)
{
  i = lua_absindex(L, i);
  char what[96];
  snprintf(what, sizeof what, "field %s", field);
  fe_vector *v = felab_check_vector(L, i, fname, what);
  space_handle *sh = NULL;
  if (lua_getiuservalue(L, i, 1) == LUA_TUSERDATA) sh = luaL_testudata(L, -1, FELAB_SPACE);
  if (!sh || !sh->V)
    luaL_error(L, "%s: field %s must be a vector of a space (made by V:interpolate or an action), not a "
                  "free vector", fname, field);
  lua_pop(L, 1);
  *space = sh->V;
  return v;
}

/* The spaces and vectors of the fields, with their component counts. */
static void fields_of(lua_State *L, int spec, const names *fn, int *ncomp, fe_vector **vec,
                      const fe_space **space)
{
  if (fn->n > FE_PHYSICS_MAX_FIELDS)
    luaL_error(L, "physics.new: at most %d fields, got %d", FE_PHYSICS_MAX_FIELDS, fn->n);
  lua_getfield(L, spec, "fields");
  for (int i = 0; i < fn->n; i++) {
    lua_getfield(L, -1, fn->name[i]);
    vec[i] = field_vector(L, -1, "physics.new", fn->name[i], &space[i]);
    ncomp[i] = space[i]->ncomp;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Call spec[key](u, du, x, a, t) and take its result as n roots of the given shape. */
static void trace_term(lua_State *L, const trace_job *j, const char *key, int rows, int cols, int *ids)
{
  int top = lua_gettop(L); /* the table a */
  lua_getfield(L, j->spec, key);
  felab_sym_push_var(L, FE_V_U, 0, j->ncomp > 1 ? j->ncomp : 0, 0);
  felab_sym_push_var(L, FE_V_DU, 0, j->ncomp > 1 ? j->ncomp : j->dim, j->ncomp > 1 ? j->dim : 0);
  felab_sym_push_var(L, FE_V_X, 0, j->dim, 0);
  lua_pushvalue(L, top); /* a, pushed by the caller just below top */
  felab_sym_push_var(L, FE_V_K, 0, 0, 0);
  lua_call(L, 5, 1);
  char what[32];
  snprintf(what, sizeof what, "physics %s", key);
  felab_sym_roots(L, -1, rows, cols, ids, what);
  lua_settop(L, top);
}

/* ---- coefficients, checked on the host before any solve ---- */

/* How an error names the C expression e of physics p: kappa = "1/0" where p's description
 * says "kappa = 1/0" (the library writes its coefficients so), else the C expression "1/0". */
static void name_expression(const fe_physics *p, const char *e, fe_strbuf *b)
{
  const char *d = p->description ? p->description : "";
  size_t n = strlen(e);
  for (const char *s = strstr(d, e); s && n; s = strstr(s + 1, e)) {
    char after = s[n];
    if ((after && after != ',' && after != ')') || s - d < 4 || strncmp(s - 3, " = ", 3)) continue;
    const char *end = s - 3, *start = end;
    while (start > d && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) start--;
    if (start == end) continue;
    fe_strbuf_printf(b, "%.*s = \"%s\"", (int)(end - start), start, e);
    return;
  }
  fe_strbuf_printf(b, "the C expression \"%s\"", e);
}

/* Whether node n is a raw leaf or its negation (checked as the leaf itself). */
static int is_raw_leaf(const fe_xgraph *g, int n)
{
  const fe_xnode *x = fe_xgraph_node(g, n);
  if (x->op == FE_X_NEG) x = fe_xgraph_node(g, x->a);
  return x->op == FE_X_RAW;
}

/* The coefficients of a trace into p: its C expressions (the strings a user typed, named as
 * they were given), then the other subexpressions of x, a and k alone (kappa(x) written in
 * Lua, or 1 / (x - x)), each as one C expression. */
static int add_coefficients(fe_xgraph *g, const int *roots, int n, fe_physics *p)
{
  int nraw = fe_x_raw_reached(g, roots, n, NULL, 0), ncoef = fe_x_coefficients(g, roots, n, NULL, 0);
  const char **raw = calloc((size_t)nraw + 1, sizeof *raw);
  int *coef = calloc((size_t)ncoef + 1, sizeof *coef), rc = 0;
  if (!raw || !coef) rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    fe_x_raw_reached(g, roots, n, raw, nraw);
    fe_x_coefficients(g, roots, n, coef, ncoef);
  }
  if (nraw > 0) p->user_c = 1; /* C expressions a user typed */
  for (int i = 0; i < nraw && !rc; i++) {
    fe_strbuf name = {0};
    name_expression(p, raw[i], &name);
    rc = name.failed ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory")
                     : fe_physics_add_coefficient(p, name.s, raw[i]);
    fe_strbuf_free(&name);
  }
  for (int i = 0; i < ncoef && !rc; i++) {
    fe_strbuf c = {0}, name = {0};
    if (!is_raw_leaf(g, coef[i]) && !fe_x_print_c(g, coef[i], 2000, &c)) {
      if (fe_xgraph_node(g, coef[i])->op == FE_X_CONST) { /* a Lua number: 1/0 made it */
        fe_strbuf_append(&name, "a number in it");
      } else {
        fe_strbuf_append(&name, "the coefficient ");
        fe_x_print(g, coef[i], NULL, NULL, &name);
      }
      if (name.len > 160) strcpy(name.s + 150, " ...");
      rc = c.failed || name.failed
               ? fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory")
               : fe_physics_add_coefficient(p, name.s, c.s);
    }
    fe_strbuf_free(&c);
    fe_strbuf_free(&name);
  }
  free(raw);
  free(coef);
  return rc;
}

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

/* The protected part of a trace: arguments, calls, derivation. */
static int trace_body(lua_State *L)
{
  trace_job *j = lua_touserdata(L, 1);
  j->spec = 2; /* the definition, passed as argument 2: indices are per call frame */
  names kn, rn, fn;
  double kv[MAX_NAMES];
  int fnc[FE_PHYSICS_MAX_FIELDS] = {0};
  fe_vector *fvec[FE_PHYSICS_MAX_FIELDS];
  const fe_space *fsp[FE_PHYSICS_MAX_FIELDS];
  constants_of(L, j->spec, &kn, kv);
  keys_of(L, j->spec, "regions", &rn);
  keys_of(L, j->spec, "fields", &fn);
  fields_of(L, j->spec, &fn, fnc, fvec, fsp);
  push_aux_table(L, &kn, &rn, &fn, fnc); /* stays at the top for trace_term */
  int nc = j->ncomp, nd = nc * j->dim;
  int f0[FE_PHYSICS_MAX_COMP], f1[FE_PHYSICS_MAX_COMP * 3];
  int has0 = lua_getfield(L, j->spec, "f0") == LUA_TFUNCTION, has1;
  lua_pop(L, 1);
  has1 = lua_getfield(L, j->spec, "f1") == LUA_TFUNCTION;
  lua_pop(L, 1);
  for (int i = 0; i < nc; i++) f0[i] = fe_x_const(j->g, 0);
  for (int i = 0; i < nd; i++) f1[i] = fe_x_const(j->g, 0);
  if (has0) trace_term(L, j, "f0", nc > 1 ? nc : 0, 0, f0);
  if (has1) trace_term(L, j, "f1", nc > 1 ? nc : j->dim, nc > 1 ? j->dim : 0, f1);
  /* names of the field values for printing, and their degrees in x for the quadrature: a
   * field of order k is a polynomial of degree k, its gradient k - 1 on simplices (k per
   * direction on tensor cells and prisms, as the operator counts them) */
  const char *fvn[FE_PHYSICS_MAX_FIELDS * FE_PHYSICS_MAX_COMP];
  int fdeg[FE_PHYSICS_MAX_FIELDS * FE_PHYSICS_MAX_COMP];
  int gdeg[FE_PHYSICS_MAX_FIELDS * FE_PHYSICS_MAX_COMP * 3];
  int nfv = 0;
  for (int i = 0; i < fn.n; i++) {
    const fe_element *el = &fsp[i]->elem;
    int simplex = el->cell == FE_CELL_TRI || el->cell == FE_CELL_TET;
    for (int c = 0; c < fnc[i]; c++) {
      for (int d = 0; d < j->dim; d++) gdeg[nfv * j->dim + d] = simplex ? el->order - 1 : el->order;
      fdeg[nfv] = el->order;
      fvn[nfv++] = fn.name[i];
    }
  }
  lua_getfield(L, j->spec, "name");
  lua_getfield(L, j->spec, "description");
  fe_trace t = {j->g, j->dim, nc, f0, f1, lua_tostring(L, -2), lua_tostring(L, -1),
                rn.n, rn.name, kn.n, kn.name, kv, nfv, fvn, fdeg, gdeg};
  FELAB_TRY(L, fe_physics_from_trace(&t, &j->out));
  int roots[FE_PHYSICS_MAX_COMP * 4];
  for (int i = 0; i < nc; i++) roots[i] = f0[i];
  for (int i = 0; i < nd; i++) roots[nc + i] = f1[i];
  if (add_coefficients(j->g, roots, nc + nd, j->out)) {
    fe_physics_free(j->out);
    j->out = NULL;
    felab_raise(L);
  }
  return 0;
}

/* Per-region values: union of the regions named, a value for each (name, region) pair. */
static void set_regions(lua_State *L, int spec, fe_physics *p)
{
  names rn, regions = {0};
  keys_of(L, spec, "regions", &rn);
  if (rn.n == 0) return;
  lua_getfield(L, spec, "regions");
  int rt = lua_gettop(L);
  for (int i = 0; i < rn.n; i++) {
    names r;
    lua_getfield(L, rt, rn.name[i]);
    if (!lua_istable(L, -1))
      luaL_error(L, "physics.new: regions.%s must map region names to numbers, got %s", rn.name[i],
                 felab_kind_of(L, -1));
    keys_of_table(L, -1, rn.name[i], &r);
    lua_pop(L, 1);
    for (int k = 0; k < r.n; k++) {
      int known = 0;
      for (int m = 0; m < regions.n; m++) known |= !strcmp(regions.name[m], r.name[k]);
      if (!known && regions.n < MAX_NAMES) regions.name[regions.n++] = r.name[k];
    }
  }
  p->nregions = regions.n;
  p->region_names = calloc((size_t)regions.n, sizeof(char *));
  p->region_values = malloc(sizeof(double) * (size_t)(regions.n * rn.n));
  if (!p->region_names || !p->region_values) luaL_error(L, "physics.new: out of memory");
  for (int r = 0; r < regions.n; r++) {
    p->region_names[r] = strdup(regions.name[r]);
    for (int i = 0; i < rn.n; i++) {
      lua_getfield(L, rt, rn.name[i]);
      lua_getfield(L, -1, regions.name[r]);
      if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "physics.new: regions.%s has no number for region '%s' (got %s); every value "
                      "needs one per region", rn.name[i], regions.name[r], felab_kind_of(L, -1));
      p->region_values[r * rn.n + i] = lua_tonumber(L, -1);
      lua_pop(L, 2);
    }
  }
  lua_pop(L, 1);
}

/* The fields of the definition bound into p. */
static void bind_fields(lua_State *L, int spec, fe_physics *p)
{
  names fn;
  int fnc[FE_PHYSICS_MAX_FIELDS];
  fe_vector *fvec[FE_PHYSICS_MAX_FIELDS];
  const fe_space *fsp[FE_PHYSICS_MAX_FIELDS];
  keys_of(L, spec, "fields", &fn);
  fields_of(L, spec, &fn, fnc, fvec, fsp);
  for (int i = 0; i < p->nfields; i++) free(p->field_names[i]);
  p->nfields = fn.n;
  for (int i = 0; i < fn.n; i++) {
    p->field_names[i] = strdup(fn.name[i]);
    p->field_ncomp[i] = fnc[i];
    fe_physics_bind(p, i, fvec[i], fsp[i]);
  }
}

static int components_of(lua_State *L, int spec, int dim)
{
  lua_getfield(L, spec, "components");
  int nc = 1;
  if (lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "dim")) nc = dim;
  else if (lua_isinteger(L, -1)) nc = (int)lua_tointeger(L, -1);
  else if (!lua_isnil(L, -1))
    luaL_error(L, "physics.new: components must be 1..%d or \"dim\", got %s", FE_PHYSICS_MAX_COMP,
               felab_number_or_kind(L, -1));
  lua_pop(L, 1);
  if (nc < 1 || nc > FE_PHYSICS_MAX_COMP)
    luaL_error(L, "physics.new: components must be 1..%d, got %d", FE_PHYSICS_MAX_COMP, nc);
  return nc;
}

/* Trace the definition at spec for dimension dim. */
static fe_physics *trace_for(lua_State *L, int spec, int dim)
{
  spec = lua_absindex(L, spec);
  trace_job j = {spec, dim, components_of(L, spec, dim), NULL, NULL};
  fe_xgraph **gh = lua_newuserdatauv(L, sizeof *gh, 0);
  *gh = NULL;
  lua_newtable(L);
  lua_pushcfunction(L, graph_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  TRY(L, fe_xgraph_create(gh));
  j.g = *gh;
  felab_trace_begin(j.g, dim);
  lua_pushcfunction(L, trace_body);
  lua_pushlightuserdata(L, &j);
  lua_pushvalue(L, spec);
  int rc = lua_pcall(L, 2, 0, 0);
  felab_trace_end();
  /* the physics holds only the code emitted from the graph, and a later trace (another
   * dimension) makes a graph of its own: free this one now rather than at collection */
  fe_xgraph_free(*gh);
  *gh = NULL;
  if (rc != LUA_OK) lua_error(L);
  lua_pop(L, 1); /* the emptied graph handle */
  if (j.out) {
    set_regions(L, spec, j.out);
    bind_fields(L, spec, j.out);
  }
  return j.out;
}

/* ---- raw C ---- */

static char *dup_field(lua_State *L, int spec, const char *key)
{
  int t = lua_getfield(L, spec, key);
  char *s = NULL;
  if (t == LUA_TSTRING) s = strdup(lua_tostring(L, -1));
  else if (t != LUA_TNIL)
    luaL_error(L, "physics.new: in raw C mode %s must be a string of C statements, got %s", key,
               felab_kind_of(L, -1));
  lua_pop(L, 1);
  return s;
}

/* The Jacobian action from given blocks: df = g w + g dw for the blocks present. */
static char *raw_action(const char *ga, const char *gb, const char *na, const char *nb, int first)
{
  if (!ga && !gb) return NULL;
  fe_strbuf b = {0};
  const char *rows = first ? "NC" : "NC * DIM";
  if (ga) fe_strbuf_printf(&b, "real %s[%s * NC] = {0};\n    {\n    %s\n    }\n", na, rows, ga);
  if (gb) fe_strbuf_printf(&b, "    real %s[%s * NC * DIM] = {0};\n    {\n    %s\n    }\n", nb, rows, gb);
  fe_strbuf_printf(&b, "    FE_UNROLL for (int i = 0; i < %s; i++) {\n      real s = 0;\n", rows);
  if (ga) fe_strbuf_printf(&b, "      FE_UNROLL for (int j = 0; j < NC; j++) s += %s[i * NC + j] * w[j];\n", na);
  if (gb)
    fe_strbuf_printf(&b, "      FE_UNROLL for (int j = 0; j < NC * DIM; j++) s += %s[i * NC * DIM + j] * dw[j];\n", nb);
  fe_strbuf_printf(&b, "      %s[i] = s;\n    }", first ? "df0" : "df1");
  char *s = NULL;
  if (fe_strbuf_finish(&b, &s)) return NULL;
  return s;
}

/* Whether C text reads u[..] or du[..]. */
static int reads_state(const char *s)
{
  for (const char *p = s ? strstr(s, "u[") : NULL; p; p = strstr(p + 1, "u[")) {
    char c = p == s ? ' ' : p[-1];
    if (c == 'd' || !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return 1;
  }
  return 0;
}

static fe_physics *raw_physics(lua_State *L, int spec)
{
  /* every check that can raise comes before the allocation (is_raw checked the terms) */
  lua_getfield(L, spec, "components");
  if (lua_type(L, -1) == LUA_TSTRING)
    luaL_error(L, "physics.new: raw C physics needs a number of components (its bodies see NC and DIM)");
  lua_pop(L, 1);
  int ncomp = components_of(L, spec, 3);
  fe_physics *p = calloc(1, sizeof *p);
  if (!p) luaL_error(L, "physics.new: out of memory");
  p->ncomp = ncomp;
  lua_getfield(L, spec, "name");
  snprintf(p->name, sizeof p->name, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "raw");
  lua_pop(L, 1);
  p->f0 = dup_field(L, spec, "f0");
  p->f1 = dup_field(L, spec, "f1");
  char *g[4];
  static const char *const gn[4] = {"g0", "g1", "g2", "g3"};
  for (int i = 0; i < 4; i++) g[i] = dup_field(L, spec, gn[i]);
  p->df0 = raw_action(g[0], g[1], "g0", "g1", 1);
  p->df1 = raw_action(g[2], g[3], "g2", "g3", 0);
  double gf = 0;
  for (int i = 0; i < 4; i++) {
    gf += g[i] ? fe_count_flops(g[i]) : 0;
    p->nonlinear |= reads_state(g[i]);
    p->g[i] = g[i];
  }
  /* the contraction df = g0 w + g1 dw, df1 = g2 w + g3 dw written around the blocks: a product
   * and a sum per block entry, counted for DIM = 3 whatever the mesh */
  int nc = p->ncomp, nd = 3 * nc;
  p->flops_f = (p->f0 ? fe_count_flops(p->f0) : 0) + (p->f1 ? fe_count_flops(p->f1) : 0);
  p->nonfma_f = (p->f0 ? fe_count_nonfma(p->f0) : 0) + (p->f1 ? fe_count_nonfma(p->f1) : 0);
  p->nonfma_df = 0;
  for (int i = 0; i < 4; i++) p->nonfma_df += g[i] ? fe_count_nonfma(g[i]) : 0;
  p->flops_df = gf + (g[0] ? 2.0 * nc * nc : 0) + (g[1] ? 2.0 * nc * nd : 0) + (g[2] ? 2.0 * nd * nc : 0) +
                (g[3] ? 2.0 * nd * nd : 0);
  p->uses_x = 1;
  p->uses_fields = 1;
  p->degree_f0 = p->degree_f1 = p->degree_df0 = p->degree_df1 = 2;
  p->description = strdup("raw C physics");
  p->user_c = 1;
  return p;
}

/* ---- physics.new and the handle ---- */

static physics_handle *check_physics(lua_State *L, int i, const char *fname)
{
  physics_handle *h = felab_expect(L, i, FELAB_PHYSICS, fname, "the physics");
  if (!h->p) luaL_error(L, "%s: this physics was closed", fname);
  return h;
}

/* The names of per-region values and the names and values of constants from the definition
 * into a raw C physics (a traced one gets them from its trace). */
static void set_constants(lua_State *L, int spec, fe_physics *p)
{
  names kn, rn;
  double kv[MAX_NAMES];
  constants_of(L, spec, &kn, kv);
  keys_of(L, spec, "regions", &rn);
  TRY(L, fe_physics_set_names(p, rn.n, rn.name, kn.n, kn.name, kv));
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
    h->p = raw_physics(L, 2);
    set_constants(L, 2, h->p);
    set_regions(L, 2, h->p);
    bind_fields(L, 2, h->p);
    borrow_field_spaces(L, 3, 2);
    FELAB_TRY(L, fe_codegen_physics_check(h->p, 3));
    return 1;
  }
  int dim = components_of(L, 2, 3) == 2 ? 2 : 3;
  h->traced[dim] = trace_for(L, 2, dim);
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
    h->traced[dim] = trace_for(L, -1, dim);
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
  const fe_vector *v = field_vector(L, i, "pde:set", name, &V);
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
