/* felab shell: symbols for traced physics.
 *
 * physics.new calls the user's f0 and f1 once with symbols for u, du, x and the auxiliary
 * values. A symbol is a userdata holding a shape (scalar, vector, matrix) and the graph
 * nodes of its entries; its metamethods and the helpers below build new nodes in the graph
 * of the trace in progress (engine/physics/expr.c), which simplifies and shares as it goes.
 * Shapes are checked as in mathematics: vector + scalar is an error, matrix * vector is a
 * product, vector * vector is ambiguous (dot or outer: say which). A comparison used as a
 * Lua boolean (if u > 0) cannot be traced: the error says to write physics.select. Errors
 * name the line of the user's function (luaL_where: the caller). */
#include "shell/lua-sym.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"
#include "shell/shell.h"

#define MAX_ENTRIES 81 /* a 9 x 9 matrix */

typedef struct sym {
  int serial;     /* the trace it belongs to */
  int rows, cols; /* scalar: 0, 0; vector: n, 0; matrix: rows, cols */
  int id[MAX_ENTRIES];
} sym;

static struct {
  fe_xgraph *g;
  int dim;
  int serial; /* of the trace in progress; 0 when none */
  int next;
} trace;

void felab_trace_begin(fe_xgraph *g, int dim)
{
  trace.g = g;
  trace.dim = dim;
  trace.serial = ++trace.next;
}

void felab_trace_end(void)
{
  trace.g = NULL;
  trace.serial = 0;
}

/* An error at the line of the Lua code that called the C function now running. */
static int sym_error(lua_State *L, const char *fmt, ...)
{
  luaL_where(L, 1);
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

static int entries(const sym *s) { return s->rows == 0 ? 1 : s->cols == 0 ? s->rows : s->rows * s->cols; }

static const char *shape(const sym *s, char *buf, size_t n)
{
  if (s->rows == 0) snprintf(buf, n, "scalar");
  else if (s->cols == 0) snprintf(buf, n, "vector(%d)", s->rows);
  else snprintf(buf, n, "matrix(%dx%d)", s->rows, s->cols);
  return buf;
}

static sym *push_sym(lua_State *L, int rows, int cols)
{
  if (!trace.g) sym_error(L, "symbols exist only while physics.new traces f0 and f1");
  if ((rows ? rows : 1) * (cols ? cols : 1) > MAX_ENTRIES)
    sym_error(L, "a %dx%d symbol is larger than felab's limit of %d entries", rows, cols, MAX_ENTRIES);
  sym *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->serial = trace.serial;
  s->rows = rows;
  s->cols = cols;
  luaL_setmetatable(L, FELAB_SYM);
  return s;
}

/* A node id, or an out-of-memory error. */
static int ok(lua_State *L, int id)
{
  if (id < 0) sym_error(L, "%s", fe_error_message());
  return id;
}

void felab_sym_push_node(lua_State *L, int node)
{
  sym *s = push_sym(L, 0, 0);
  s->id[0] = ok(L, node);
}

void felab_sym_push_var(lua_State *L, fe_var v, int base, int rows, int cols)
{
  sym *s = push_sym(L, rows, cols);
  for (int i = 0; i < entries(s); i++) s->id[i] = ok(L, fe_x_var(trace.g, v, base + i));
}

static sym *from_table(lua_State *L, int i, int top);

/* The value at i as a symbol (converted in place: numbers and tables become symbols). */
static sym *to_sym(lua_State *L, int i, const char *what)
{
  i = lua_absindex(L, i);
  sym *s = luaL_testudata(L, i, FELAB_SYM);
  if (s) {
    if (s->serial != trace.serial || !trace.g)
      sym_error(L, "%s is a symbol of a trace that has ended: symbols live only inside the "
                   "physics functions that received them", what);
    return s;
  }
  if (!trace.g)
    sym_error(L, "%s is not a symbol (got %s) and no trace is in progress: the physics helpers "
                 "and math on symbols work inside the functions physics.new traces (f0, f1, ...)",
              what, felab_kind_of(L, i));
  if (lua_type(L, i) == LUA_TNUMBER) {
    felab_sym_push_node(L, fe_x_const(trace.g, lua_tonumber(L, i)));
  } else if (lua_istable(L, i)) {
    from_table(L, i, 1);
  } else {
    sym_error(L, "%s must be a symbol, a number or a table of them, got %s", what, felab_kind_of(L, i));
  }
  lua_replace(L, i);
  return lua_touserdata(L, i);
}

/* The entry at i of a table being converted (converted in place): a row of a matrix may be a
 * table, an entry of a vector may not, so tables nest at most two deep (a table that holds
 * itself ends there too). */
static sym *table_entry(lua_State *L, int i, int is_matrix)
{
  i = lua_absindex(L, i);
  if (!lua_istable(L, i)) return to_sym(L, i, is_matrix ? "a matrix row" : "a vector entry");
  if (!is_matrix) sym_error(L, "a vector entry is a table: a vector holds scalars, a matrix rows");
  from_table(L, i, 0);
  lua_replace(L, i);
  return lua_touserdata(L, i);
}

/* {a, b, c} -> vector, {{..}, {..}} -> matrix (rows of equal length); top: not a row. */
static sym *from_table(lua_State *L, int i, int top)
{
  int n = (int)lua_rawlen(L, i);
  if (n < 1) sym_error(L, "an empty table is not a vector");
  lua_rawgeti(L, i, 1);
  int is_matrix = lua_istable(L, -1) || (luaL_testudata(L, -1, FELAB_SYM) &&
                                         ((sym *)lua_touserdata(L, -1))->rows > 0);
  lua_pop(L, 1);
  if (is_matrix && !top) sym_error(L, "a matrix row holds a table: a row holds scalars");
  int cols = 0;
  if (is_matrix) {
    lua_rawgeti(L, i, 1);
    sym *r = table_entry(L, -1, 1);
    cols = r->rows;
    lua_pop(L, 1);
  }
  sym *s = push_sym(L, n, cols);
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, i, k + 1);
    sym *e = table_entry(L, -1, is_matrix);
    if (!is_matrix && e->rows != 0) sym_error(L, "entry %d of the vector is not a scalar", k + 1);
    if (is_matrix && (e->rows != cols || e->cols != 0))
      sym_error(L, "row %d of the matrix does not have %d entries", k + 1, cols);
    for (int j = 0; j < (is_matrix ? cols : 1); j++) s->id[k * (is_matrix ? cols : 1) + j] = e->id[j];
    lua_pop(L, 1);
  }
  return s;
}

static int same_shape(const sym *a, const sym *b) { return a->rows == b->rows && a->cols == b->cols; }

/* Entrywise a op b (shapes equal, or one a scalar for * and /). */
static int entrywise(lua_State *L, fe_xop op)
{
  sym *a = to_sym(L, 1, "the left operand"), *b = to_sym(L, 2, "the right operand");
  int sa = a->rows == 0, sb = b->rows == 0;
  int scalable = op == FE_X_MUL || (op == FE_X_DIV && sb);
  if (!same_shape(a, b) && !(scalable && (sa || sb))) {
    char x[32], y[32];
    sym_error(L, "shape mismatch: %s %s %s%s", shape(a, x, sizeof x), fe_xop_name(op), shape(b, y, sizeof y),
              op == FE_X_DIV ? " (only division by a scalar)" : "");
  }
  const sym *big = sa ? b : a;
  sym *r = push_sym(L, big->rows, big->cols);
  for (int k = 0; k < entries(r); k++)
    r->id[k] = ok(L, fe_x_binary(trace.g, op, a->id[sa ? 0 : k], b->id[sb ? 0 : k]));
  return 1;
}

static int m_add(lua_State *L) { return entrywise(L, FE_X_ADD); }
static int m_sub(lua_State *L) { return entrywise(L, FE_X_SUB); }
static int m_div(lua_State *L) { return entrywise(L, FE_X_DIV); }

/* a_ik b_kj summed over k: the product of an m x n by an n x p layout. */
static void product(lua_State *L, const sym *a, const sym *b, int m, int n, int p, sym *r)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < p; j++) {
      int s = fe_x_const(trace.g, 0);
      for (int k = 0; k < n; k++)
        s = fe_x_binary(trace.g, FE_X_ADD, s, fe_x_binary(trace.g, FE_X_MUL, a->id[i * n + k], b->id[k * p + j]));
      r->id[i * p + j] = ok(L, s);
    }
}

static int m_mul(lua_State *L)
{
  sym *a = to_sym(L, 1, "the left operand"), *b = to_sym(L, 2, "the right operand");
  if (a->rows == 0 || b->rows == 0) return entrywise(L, FE_X_MUL);
  char x[32], y[32];
  if (a->cols == 0)
    sym_error(L, "%s * %s is ambiguous: write physics.dot(a, b), physics.outer(a, b), or "
                 "physics.transpose(M) * v", shape(a, x, sizeof x), shape(b, y, sizeof y));
  if (a->cols != b->rows)
    sym_error(L, "shape mismatch: %s * %s", shape(a, x, sizeof x), shape(b, y, sizeof y));
  sym *r = push_sym(L, a->rows, b->cols);
  product(L, a, b, a->rows, a->cols, b->cols ? b->cols : 1, r);
  return 1;
}

static int m_pow(lua_State *L)
{
  sym *a = to_sym(L, 1, "the base"), *b = to_sym(L, 2, "the exponent");
  if (a->rows || b->rows) {
    char x[32], y[32];
    sym_error(L, "^ needs scalars, got %s ^ %s (for a matrix power write the products)",
              shape(a, x, sizeof x), shape(b, y, sizeof y));
  }
  felab_sym_push_node(L, fe_x_binary(trace.g, FE_X_POW, a->id[0], b->id[0]));
  return 1;
}

static int m_unm(lua_State *L)
{
  sym *a = to_sym(L, 1, "the operand");
  sym *r = push_sym(L, a->rows, a->cols);
  for (int k = 0; k < entries(a); k++) r->id[k] = ok(L, fe_x_unary(trace.g, FE_X_NEG, a->id[k]));
  return 1;
}

/* v[i] (a scalar) or M[i] (row i, a vector); 1-based. */
static int m_index(lua_State *L)
{
  sym *a = to_sym(L, 1, "the indexed value");
  lua_Integer i;
  if (!felab_is_integer(L, 2, &i))
    return sym_error(L, "a symbol is indexed by an integer 1..n, got %s", felab_number_or_kind(L, 2));
  char x[32];
  int n = a->rows;
  if (n == 0) return sym_error(L, "a scalar symbol has no entries to index (got [%I])", i);
  if (i < 1 || i > n) return sym_error(L, "index %I is out of range for a %s", i, shape(a, x, sizeof x));
  if (a->cols == 0) {
    felab_sym_push_node(L, a->id[i - 1]);
    return 1;
  }
  sym *r = push_sym(L, a->cols, 0);
  for (int j = 0; j < a->cols; j++) r->id[j] = a->id[(i - 1) * a->cols + j];
  return 1;
}

static int m_len(lua_State *L)
{
  sym *a = to_sym(L, 1, "the value");
  lua_pushinteger(L, a->rows);
  return 1;
}

static int m_compare(lua_State *L)
{
  return sym_error(L, "a comparison of symbols has no true or false value while tracing: "
                      "write physics.select(physics.gt(a, b), then_value, else_value) instead of if/and/or");
}

static int m_newindex(lua_State *L)
{
  return sym_error(L, "symbols can't be changed in place; build a new value (e.g. a table {..})");
}

static void name_var(void *ctx, fe_var v, int i, fe_strbuf *b)
{
  (void)ctx;
  static const char *const names[FE_NVARS] = {"u", "du", "x", "a", "k", "f", "df", "w", "dw"};
  fe_strbuf_printf(b, "%s[%d]", names[v], i + 1);
}

static int m_tostring(lua_State *L)
{
  sym *a = luaL_checkudata(L, 1, FELAB_SYM); /* called by hand, it may be given anything */
  if (a->serial != trace.serial || !trace.g) {
    lua_pushliteral(L, "symbol (of a finished trace)");
    return 1;
  }
  fe_strbuf b = {0};
  char x[32];
  fe_strbuf_printf(&b, "symbol %s: ", shape(a, x, sizeof x));
  for (int k = 0; k < entries(a); k++) {
    fe_strbuf_append(&b, k ? ", " : "");
    fe_x_print(trace.g, a->id[k], name_var, NULL, &b);
  }
  lua_pushstring(L, b.s ? b.s : "symbol");
  fe_strbuf_free(&b);
  return 1;
}

/* ---- math.* on symbols ---- */

static const struct { const char *name; fe_xop op; } unary_fns[] = {
  {"sin", FE_X_SIN}, {"cos", FE_X_COS}, {"tan", FE_X_TAN}, {"exp", FE_X_EXP}, {"log", FE_X_LOG},
  {"sqrt", FE_X_SQRT}, {"abs", FE_X_ABS}, {"tanh", FE_X_TANH}};

/* upvalue 1: the op; upvalue 2: Lua's own function (nil for tanh). */
static int math_unary(lua_State *L)
{
  fe_xop op = (fe_xop)lua_tointeger(L, lua_upvalueindex(1));
  if (!luaL_testudata(L, 1, FELAB_SYM)) {
    if (op == FE_X_TANH) {
      lua_pushnumber(L, tanh(luaL_checknumber(L, 1)));
      return 1;
    }
    if (op == FE_X_LOG && !lua_isnoneornil(L, 2)) { /* math.log(x, base) */
      lua_pushnumber(L, log(luaL_checknumber(L, 1)) / log(luaL_checknumber(L, 2)));
      return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  sym *a = to_sym(L, 1, "the argument");
  if (op == FE_X_LOG && !lua_isnoneornil(L, 2)) { /* log(x) / log(base) */
    sym *b = to_sym(L, 2, "the base");
    if (a->rows || b->rows) sym_error(L, "math.log needs scalars");
    felab_sym_push_node(L, fe_x_binary(trace.g, FE_X_DIV, fe_x_unary(trace.g, FE_X_LOG, a->id[0]),
                                       fe_x_unary(trace.g, FE_X_LOG, b->id[0])));
    return 1;
  }
  sym *r = push_sym(L, a->rows, a->cols); /* entrywise */
  for (int k = 0; k < entries(a); k++) r->id[k] = ok(L, fe_x_unary(trace.g, op, a->id[k]));
  return 1;
}

static int any_sym(lua_State *L)
{
  for (int i = 1; i <= lua_gettop(L); i++)
    if (luaL_testudata(L, i, FELAB_SYM)) return 1;
  return 0;
}

/* math.min / math.max: upvalue 1 the op, 2 Lua's function. */
static int math_minmax(lua_State *L)
{
  fe_xop op = (fe_xop)lua_tointeger(L, lua_upvalueindex(1));
  if (!any_sym(L)) {
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  int n = lua_gettop(L);
  if (n < 1) return sym_error(L, "math.%s needs at least one value", op == FE_X_MIN ? "min" : "max");
  sym *a = to_sym(L, 1, "argument 1");
  if (a->rows) return sym_error(L, "math.min and math.max need scalars");
  int r = a->id[0];
  for (int i = 2; i <= n; i++) {
    sym *b = to_sym(L, i, "an argument");
    if (b->rows) return sym_error(L, "math.min and math.max need scalars");
    r = fe_x_binary(trace.g, op, r, b->id[0]);
  }
  felab_sym_push_node(L, r);
  return 1;
}

static int math_pow(lua_State *L)
{
  if (!any_sym(L)) {
    lua_pushnumber(L, pow(luaL_checknumber(L, 1), luaL_checknumber(L, 2)));
    return 1;
  }
  return m_pow(L);
}

/* math.floor etc. on a symbol: not differentiable, say what to write. */
static int math_refuse(lua_State *L)
{
  if (any_sym(L))
    return sym_error(L, "math.%s is not differentiable and can't be traced; use physics.select with "
                        "a comparison for piecewise laws, or compute it outside the physics",
                     lua_tostring(L, lua_upvalueindex(2)));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

static void wrap_math(lua_State *L)
{
  if (lua_getglobal(L, "math") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  for (size_t i = 0; i < sizeof unary_fns / sizeof unary_fns[0]; i++) {
    lua_pushinteger(L, unary_fns[i].op);
    lua_getfield(L, -2, unary_fns[i].name);
    lua_pushcclosure(L, math_unary, 2);
    lua_setfield(L, -2, unary_fns[i].name);
  }
  const char *mm[2] = {"min", "max"};
  for (int i = 0; i < 2; i++) {
    lua_pushinteger(L, i ? FE_X_MAX : FE_X_MIN);
    lua_getfield(L, -2, mm[i]);
    lua_pushcclosure(L, math_minmax, 2);
    lua_setfield(L, -2, mm[i]);
  }
  lua_pushcfunction(L, math_pow);
  lua_setfield(L, -2, "pow");
  const char *refuse[] = {"floor", "ceil", "fmod", "modf", "tointeger", "random", "ult"};
  for (size_t i = 0; i < sizeof refuse / sizeof refuse[0]; i++) {
    lua_getfield(L, -1, refuse[i]);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushstring(L, refuse[i]);
    lua_pushcclosure(L, math_refuse, 2);
    lua_setfield(L, -2, refuse[i]);
  }
  lua_pop(L, 1);
}

/* ---- physics helpers ---- */

static sym *arg_vector(lua_State *L, int i, const char *fname)
{
  sym *a = to_sym(L, i, "an argument");
  char x[32];
  if (a->rows == 0 || a->cols != 0)
    sym_error(L, "physics.%s needs vectors, got %s", fname, shape(a, x, sizeof x));
  return a;
}

static sym *arg_square(lua_State *L, int i, const char *fname)
{
  sym *a = to_sym(L, i, "an argument");
  char x[32];
  if (a->rows == 0 || a->cols != a->rows)
    sym_error(L, "physics.%s needs a square matrix, got %s", fname, shape(a, x, sizeof x));
  return a;
}

/* sum_k a_k b_k over all entries (shapes equal). */
static int contraction(lua_State *L, const char *fname)
{
  sym *a = to_sym(L, 1, "argument 1"), *b = to_sym(L, 2, "argument 2");
  char x[32], y[32];
  if (!same_shape(a, b))
    sym_error(L, "physics.%s: shape mismatch %s and %s", fname, shape(a, x, sizeof x), shape(b, y, sizeof y));
  int s = fe_x_const(trace.g, 0);
  for (int k = 0; k < entries(a); k++)
    s = fe_x_binary(trace.g, FE_X_ADD, s, fe_x_binary(trace.g, FE_X_MUL, a->id[k], b->id[k]));
  felab_sym_push_node(L, s);
  return 1;
}

static int h_dot(lua_State *L)
{
  arg_vector(L, 1, "dot");
  arg_vector(L, 2, "dot");
  return contraction(L, "dot");
}

static int h_inner(lua_State *L) { return contraction(L, "inner"); }

static int h_outer(lua_State *L)
{
  sym *a = arg_vector(L, 1, "outer"), *b = arg_vector(L, 2, "outer");
  sym *r = push_sym(L, a->rows, b->rows);
  for (int i = 0; i < a->rows; i++)
    for (int j = 0; j < b->rows; j++) r->id[i * b->rows + j] = ok(L, fe_x_binary(trace.g, FE_X_MUL, a->id[i], b->id[j]));
  return 1;
}

static int h_transpose(lua_State *L)
{
  sym *a = to_sym(L, 1, "argument 1");
  char x[32];
  if (a->cols == 0) return sym_error(L, "physics.transpose needs a matrix, got %s", shape(a, x, sizeof x));
  sym *r = push_sym(L, a->cols, a->rows);
  for (int i = 0; i < a->rows; i++)
    for (int j = 0; j < a->cols; j++) r->id[j * a->rows + i] = a->id[i * a->cols + j];
  return 1;
}

static int h_sym(lua_State *L)
{
  sym *a = arg_square(L, 1, "sym");
  int n = a->rows;
  sym *r = push_sym(L, n, n);
  int half = fe_x_const(trace.g, 0.5);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      r->id[i * n + j] = i == j ? a->id[i * n + i]
                                : ok(L, fe_x_binary(trace.g, FE_X_MUL, half,
                                                    fe_x_binary(trace.g, FE_X_ADD, a->id[i * n + j], a->id[j * n + i])));
  return 1;
}

static int h_tr(lua_State *L)
{
  sym *a = arg_square(L, 1, "tr");
  int s = fe_x_const(trace.g, 0);
  for (int i = 0; i < a->rows; i++) s = fe_x_binary(trace.g, FE_X_ADD, s, a->id[i * a->rows + i]);
  felab_sym_push_node(L, s);
  return 1;
}

static int h_det(lua_State *L)
{
  sym *a = arg_square(L, 1, "det");
  fe_xgraph *g = trace.g;
  const int *m = a->id;
#define MUL(p, q) fe_x_binary(g, FE_X_MUL, p, q)
#define SUB(p, q) fe_x_binary(g, FE_X_SUB, p, q)
#define ADD(p, q) fe_x_binary(g, FE_X_ADD, p, q)
  int d;
  switch (a->rows) {
  case 1: d = m[0]; break;
  case 2: d = SUB(MUL(m[0], m[3]), MUL(m[1], m[2])); break;
  case 3:
    d = ADD(SUB(MUL(m[0], SUB(MUL(m[4], m[8]), MUL(m[5], m[7]))), MUL(m[1], SUB(MUL(m[3], m[8]), MUL(m[5], m[6])))),
            MUL(m[2], SUB(MUL(m[3], m[7]), MUL(m[4], m[6]))));
    break;
  default: return sym_error(L, "physics.det works on 1x1, 2x2 and 3x3 matrices, got %dx%d", a->rows, a->rows);
  }
#undef MUL
#undef SUB
#undef ADD
  felab_sym_push_node(L, d);
  return 1;
}

static int h_identity(lua_State *L)
{
  lua_Integer n = trace.dim;
  if (!lua_isnoneornil(L, 1) && (!felab_is_integer(L, 1, &n) || n < 1 || n > 9))
    return sym_error(L, "physics.identity(n) needs n in 1..9, got %s", felab_number_or_kind(L, 1));
  sym *r = push_sym(L, (int)n, (int)n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) r->id[i * n + j] = ok(L, fe_x_const(trace.g, i == j));
  return 1;
}

static int h_norm(lua_State *L)
{
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  contraction(L, "norm");
  sym *s = lua_touserdata(L, -1);
  felab_sym_push_node(L, fe_x_unary(trace.g, FE_X_SQRT, s->id[0]));
  return 1;
}

/* grad(a.field): the gradient of an auxiliary field (a scalar gives a vector, a vector of
 * values a matrix, one row per component). */
static int h_grad(lua_State *L)
{
  sym *a = to_sym(L, 1, "argument 1");
  int n = a->rows ? a->rows : 1;
  if (a->cols) return sym_error(L, "physics.grad takes an auxiliary field (a.name), not a matrix");
  int first = -1;
  for (int k = 0; k < n; k++) {
    const fe_xnode *x = fe_xgraph_node(trace.g, a->id[k]);
    if (x->op != FE_X_VAR || x->var != FE_V_F || (k && x->index != first + k))
      return sym_error(L, "physics.grad takes an auxiliary field as given (a.name); the gradient of u "
                          "is the argument du");
    if (k == 0) first = x->index;
  }
  felab_sym_push_var(L, FE_V_DF, first * trace.dim, a->rows ? n : trace.dim, a->rows ? trace.dim : 0);
  return 1;
}

/* The first name in C expression e that is one of the point functions' field arguments (u,
 * du, w, dw, f, df: pointers there, not numbers), or NULL; its length into *len. A name is a
 * run of letters, digits and '_' not inside a number (1e3, 0x1p3). */
static const char *field_name_in(const char *e, size_t *len)
{
  static const char *const fields[] = {"u", "du", "w", "dw", "f", "df"};
  for (const char *p = e; *p;) {
    const int word = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
    const int num = (*p >= '0' && *p <= '9') || *p == '.';
    if (!word && !num) {
      p++;
      continue;
    }
    const char *q = p;
    while (*q == '_' || *q == '.' || (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') ||
           (*q >= 'A' && *q <= 'Z'))
      q++;
    for (size_t i = 0; word && i < sizeof fields / sizeof fields[0]; i++)
      if ((size_t)(q - p) == strlen(fields[i]) && !strncmp(p, fields[i], (size_t)(q - p))) {
        *len = (size_t)(q - p);
        return p;
      }
    p = q;
  }
  return NULL;
}

/* physics.cexpr("1 + x[0]*x[1]"): an opaque C expression of x[0..2] and a[..] (never of u). */
static int h_cexpr(lua_State *L)
{
  const char *e = luaL_checkstring(L, 1);
  if (!e[strspn(e, " \t\n")]) return sym_error(L, "physics.cexpr: empty C expression");
  size_t n = 0;
  const char *field = field_name_in(e, &n);
  char named[32] = "";
  if (field) snprintf(named, sizeof named, ", not '%.*s'", (int)(n < 16 ? n : 16), field);
  if (field || strchr(e, ';'))
    return sym_error(L, "physics.cexpr takes an expression of x[0..2] only (use the symbols u and du "
                        "for the field)%s: '%s'", named, e);
  if (!trace.g)
    return sym_error(L, "physics.cexpr works inside the functions physics.new traces (f0, f1, ...); "
                        "outside them a coefficient is a string: kappa = '%s'", e);
  felab_sym_push_node(L, fe_x_raw(trace.g, e));
  return 1;
}

static int scalar_arg(lua_State *L, int i, const char *fname)
{
  sym *a = to_sym(L, i, "an argument");
  if (a->rows) sym_error(L, "physics.%s needs scalars", fname);
  return a->id[0];
}

static int h_select(lua_State *L)
{
  int c = scalar_arg(L, 1, "select"), a = scalar_arg(L, 2, "select"), b = scalar_arg(L, 3, "select");
  felab_sym_push_node(L, fe_x_select(trace.g, c, a, b));
  return 1;
}

/* physics.lt(a, b) etc.: upvalue 1 the op. */
static int h_compare(lua_State *L)
{
  fe_xop op = (fe_xop)lua_tointeger(L, lua_upvalueindex(1));
  int a = scalar_arg(L, 1, fe_xop_name(op)), b = scalar_arg(L, 2, fe_xop_name(op));
  felab_sym_push_node(L, fe_x_binary(trace.g, op, a, b));
  return 1;
}

void felab_sym_roots(lua_State *L, int i, int rows, int cols, int *ids, const char *what)
{
  i = lua_absindex(L, i);
  int n = rows == 0 ? 1 : cols == 0 ? rows : rows * cols;
  if (lua_isnil(L, i)) {
    for (int k = 0; k < n; k++) ids[k] = fe_x_const(trace.g, 0);
    return;
  }
  sym *a = to_sym(L, i, what);
  /* a vector of one entry and a scalar are the same thing for a one-component field */
  int fits = (a->rows == rows && a->cols == cols) || (entries(a) == 1 && n == 1) ||
             (cols == 0 && rows == 1 && a->rows == 0);
  if (!fits) {
    char x[32];
    sym want = {0, rows, cols, {0}};
    char y[32];
    luaL_error(L, "%s returned a %s where a %s is expected", what, shape(a, x, sizeof x), shape(&want, y, sizeof y));
  }
  for (int k = 0; k < n; k++) ids[k] = a->id[k];
}

void felab_sym_open(lua_State *L, int t)
{
  t = lua_absindex(L, t);
  static const luaL_Reg meta[] = {{"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul},
                                  {"__div", m_div}, {"__pow", m_pow}, {"__unm", m_unm},
                                  {"__index", m_index}, {"__len", m_len}, {"__lt", m_compare},
                                  {"__le", m_compare}, {"__eq", m_compare}, {"__newindex", m_newindex},
                                  {"__tostring", m_tostring}, {NULL, NULL}};
  luaL_newmetatable(L, FELAB_SYM);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
  static const luaL_Reg helpers[] = {{"dot", h_dot}, {"inner", h_inner}, {"outer", h_outer},
                                     {"transpose", h_transpose}, {"sym", h_sym}, {"tr", h_tr},
                                     {"det", h_det}, {"identity", h_identity}, {"norm", h_norm},
                                     {"grad", h_grad}, {"select", h_select}, {"cexpr", h_cexpr},
                                     {NULL, NULL}};
  lua_pushvalue(L, t);
  luaL_setfuncs(L, helpers, 0);
  static const struct { const char *name; fe_xop op; } cmp[] = {
    {"lt", FE_X_LT}, {"le", FE_X_LE}, {"gt", FE_X_GT}, {"ge", FE_X_GE}, {"eq", FE_X_EQ}, {"ne", FE_X_NE}};
  for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
    lua_pushinteger(L, cmp[i].op);
    lua_pushcclosure(L, h_compare, 1);
    lua_setfield(L, -2, cmp[i].name);
  }
  lua_pop(L, 1);
  wrap_math(L);
}
