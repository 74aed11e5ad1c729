/* felab shell: what a physics.new definition becomes, an engine physics, in one of two ways.
 * Traced: the Lua functions f0 and f1 are called once on symbols (shell/lua-sym.c) and the
 * expression graph they build is derived and emitted as C by the engine, with the
 * coefficients of x found in it checked on the host; raw: the C statements given as strings
 * become the bodies, and the Jacobian action is written around the blocks g0..g3. Both read
 * the definition's named things: constants, per-region values and fields.
 *
 * Named things are ordered the same way in every trace: the constant t first, then constants,
 * per-region values and fields by name. */
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/strbuf.h"
#include "engine/physics/expr.h"
#include "engine/physics/physics.h"
#include "engine/fem/space.h"
#include "engine/solve/vector.h"
#include "shell/lua-physics-private.h"
#include "shell/lua-sym.h"
#include "shell/shell.h"

#define MAX_NAMES 64

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
fe_vector *felab_physics_field_vector(lua_State *L, int i, const char *fname, const char *field,
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
    vec[i] = felab_physics_field_vector(L, -1, "physics.new", fn->name[i], &space[i]);
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
  for (int i = 0; i < nraw && !rc; i++) /* C expressions a user typed, beyond the host's reader */
    if (!fe_c_expression_safe(raw[i], 3, p->naux, p->nconst)) p->user_c = 1;
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

/* The components of the definition at spec: a number 1..FE_PHYSICS_MAX_COMP, or "dim" (dim). */
int felab_physics_components(lua_State *L, int spec, int dim)
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
fe_physics *felab_physics_trace(lua_State *L, int spec, int dim)
{
  spec = lua_absindex(L, spec);
  trace_job j = {spec, dim, felab_physics_components(L, spec, dim), NULL, NULL};
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
  int ncomp = felab_physics_components(L, spec, 3);
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

/* A raw C physics made of the definition at spec into *p (set first: the handle owns it). */
void felab_physics_raw(lua_State *L, int spec, fe_physics **p)
{
  *p = raw_physics(L, spec);
  set_constants(L, spec, *p);
  set_regions(L, spec, *p);
  bind_fields(L, spec, *p);
}
