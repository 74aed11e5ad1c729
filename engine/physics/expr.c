/* felab expression graphs (design in expr.h).
 *
 * Nodes live in one array; a hash table from a node's contents to its id makes every
 * constructor "find or add", so equal subexpressions are one node (common-subexpression
 * elimination by construction). The simplifying constructors are the only way in. */
#include "engine/physics/expr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/physics.h"

struct fe_xgraph {
  fe_xnode *nodes;
  unsigned short *deps; /* bit v: the node reads variable kind v */
  int n, cap;
  int *hash; /* open addressing: node id or -1; hcap a power of two */
  int hcap;
  char **raw; /* texts of raw C leaves */
  int nraw, rawcap;
};

static const char *const op_names[FE_X_NOPS] = {
  "const", "var", "raw", "+", "-", "*", "/", "^", "min", "max", "<", "<=", ">", ">=", "==", "!=",
  "neg", "sin", "cos", "tan", "exp", "log", "sqrt", "abs", "tanh", "select"};

const char *fe_xop_name(fe_xop op) { return op < FE_X_NOPS ? op_names[op] : "?"; }

int fe_xgraph_create(fe_xgraph **out)
{
  fe_xgraph *g;
  FE_CALLOC(g, 1, "expression graph");
  g->hcap = 1024;
  g->hash = malloc(sizeof(int) * (size_t)g->hcap);
  if (!g->hash) {
    free(g);
    FE_ERROR(FE_ERR_MEM, "out of host memory for an expression graph");
  }
  memset(g->hash, 0xff, sizeof(int) * (size_t)g->hcap);
  *out = g;
  return 0;
}

void fe_xgraph_free(fe_xgraph *g)
{
  if (!g) return;
  for (int i = 0; i < g->nraw; i++) free(g->raw[i]);
  free(g->raw);
  free(g->nodes);
  free(g->deps);
  free(g->hash);
  free(g);
}

int fe_xgraph_size(const fe_xgraph *g) { return g->n; }
const fe_xnode *fe_xgraph_node(const fe_xgraph *g, int id) { return &g->nodes[id]; }

/* ---- interning ---- */

static uint64_t node_hash(const fe_xnode *x)
{
  uint64_t bits;
  memcpy(&bits, &x->value, sizeof bits);
  uint64_t h = 1469598103934665603ull;
  uint64_t parts[6] = {x->op, x->var, (uint64_t)(uint32_t)x->index, (uint64_t)(uint32_t)x->a,
                       (uint64_t)(uint32_t)x->b, (uint64_t)(uint32_t)x->c};
  for (int i = 0; i < 6; i++) h = (h ^ parts[i]) * 1099511628211ull;
  h = (h ^ bits) * 1099511628211ull;
  return h ^ (h >> 29);
}

static int node_equal(const fe_xnode *x, const fe_xnode *y)
{
  return x->op == y->op && x->var == y->var && x->index == y->index && x->a == y->a &&
         x->b == y->b && x->c == y->c && memcmp(&x->value, &y->value, sizeof x->value) == 0;
}

static int grow_hash(fe_xgraph *g)
{
  int cap = g->hcap * 2;
  int *h = malloc(sizeof(int) * (size_t)cap);
  if (!h) FE_ERROR(FE_ERR_MEM, "out of host memory for an expression graph");
  memset(h, 0xff, sizeof(int) * (size_t)cap);
  for (int id = 0; id < g->n; id++) {
    size_t s = node_hash(&g->nodes[id]) & (size_t)(cap - 1);
    while (h[s] >= 0) s = (s + 1) & (size_t)(cap - 1);
    h[s] = id;
  }
  free(g->hash);
  g->hash = h;
  g->hcap = cap;
  return 0;
}

static unsigned short raw_deps(const char *text);

/* The id of a node with these contents, added if new; -1 when out of memory. */
static int intern(fe_xgraph *g, fe_xnode x)
{
  size_t mask = (size_t)g->hcap - 1, s = node_hash(&x) & mask;
  for (; g->hash[s] >= 0; s = (s + 1) & mask)
    if (node_equal(&g->nodes[g->hash[s]], &x)) return g->hash[s];
  if (2 * (g->n + 1) > g->hcap) {
    if (grow_hash(g)) return -1;
    return intern(g, x);
  }
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 256;
    fe_xnode *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
    if (nn) g->nodes = nn;
    unsigned short *dd = nn ? realloc(g->deps, sizeof *dd * (size_t)cap) : NULL;
    if (dd) g->deps = dd;
    if (!nn || !dd) {
      fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for an expression graph");
      return -1;
    }
    g->cap = cap;
  }
  int id = g->n++;
  g->nodes[id] = x;
  unsigned short d = 0;
  if (x.op == FE_X_VAR) d = (unsigned short)(1u << x.var);
  if (x.op == FE_X_RAW) d = raw_deps(g->raw[x.index]);
  if (x.a >= 0) d |= g->deps[x.a];
  if (x.b >= 0) d |= g->deps[x.b];
  if (x.c >= 0) d |= g->deps[x.c];
  g->deps[id] = d;
  g->hash[s] = id;
  return id;
}

static fe_xnode blank(fe_xop op)
{
  fe_xnode x;
  memset(&x, 0, sizeof x); /* padding too: nodes are hashed whole field by field */
  x.op = (unsigned char)op;
  x.a = x.b = x.c = -1;
  return x;
}

/* ---- leaves ---- */

int fe_x_const(fe_xgraph *g, double v)
{
  fe_xnode x = blank(FE_X_CONST);
  x.value = v == 0 ? 0.0 : v; /* one zero */
  return intern(g, x);
}

int fe_x_var(fe_xgraph *g, fe_var v, int index)
{
  fe_xnode x = blank(FE_X_VAR);
  x.var = (unsigned char)v;
  x.index = index;
  return intern(g, x);
}

/* Whether a C expression mentions the name `name` followed by '[' (x[..], a[..]). */
static int mentions_array(const char *e, char name)
{
  for (const char *p = strchr(e, name); p; p = strchr(p + 1, name)) {
    int alone = p == e || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                            (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9'));
    const char *q = p + 1;
    while (*q == ' ') q++;
    if (alone && *q == '[') return 1;
  }
  return 0;
}

static unsigned short raw_deps(const char *text)
{
  return (unsigned short)((mentions_array(text, 'x') ? 1u << FE_V_X : 0) |
                          (mentions_array(text, 'a') ? 1u << FE_V_A : 0));
}

int fe_x_raw(fe_xgraph *g, const char *c_expr)
{
  int i = 0;
  while (i < g->nraw && strcmp(g->raw[i], c_expr)) i++;
  if (i == g->nraw) {
    if (g->nraw == g->rawcap) {
      int cap = g->rawcap ? 2 * g->rawcap : 8;
      char **r = realloc(g->raw, sizeof *r * (size_t)cap);
      if (!r) goto oom;
      g->raw = r;
      g->rawcap = cap;
    }
    if (!(g->raw[i] = strdup(c_expr))) goto oom;
    g->nraw++;
  }
  fe_xnode x = blank(FE_X_RAW);
  x.index = i;
  return intern(g, x);
oom:
  fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for an expression graph");
  return -1;
}

/* ---- simplifying constructors ---- */

static int is_const(const fe_xgraph *g, int n, double *v)
{
  if (n < 0 || g->nodes[n].op != FE_X_CONST) return 0;
  if (v) *v = g->nodes[n].value;
  return 1;
}

int fe_x_is_const(const fe_xgraph *g, int n, double v)
{
  double c;
  return is_const(g, n, &c) && c == v;
}

static int op_of(const fe_xgraph *g, int n) { return n >= 0 ? g->nodes[n].op : -1; }

static int fold_unary(fe_xop op, double a, double *r)
{
  switch (op) {
  case FE_X_NEG: *r = -a; break;
  case FE_X_SIN: *r = sin(a); break;
  case FE_X_COS: *r = cos(a); break;
  case FE_X_TAN: *r = tan(a); break;
  case FE_X_EXP: *r = exp(a); break;
  case FE_X_LOG: *r = log(a); break;
  case FE_X_SQRT: *r = sqrt(a); break;
  case FE_X_ABS: *r = fabs(a); break;
  case FE_X_TANH: *r = tanh(a); break;
  default: return 0;
  }
  return isfinite(*r);
}

static int fold_binary(fe_xop op, double a, double b, double *r)
{
  switch (op) {
  case FE_X_ADD: *r = a + b; break;
  case FE_X_SUB: *r = a - b; break;
  case FE_X_MUL: *r = a * b; break;
  case FE_X_DIV: *r = a / b; break;
  case FE_X_POW: *r = pow(a, b); break;
  case FE_X_MIN: *r = fmin(a, b); break;
  case FE_X_MAX: *r = fmax(a, b); break;
  case FE_X_LT: *r = a < b; break;
  case FE_X_LE: *r = a <= b; break;
  case FE_X_GT: *r = a > b; break;
  case FE_X_GE: *r = a >= b; break;
  case FE_X_EQ: *r = a == b; break;
  case FE_X_NE: *r = a != b; break;
  default: return 0;
  }
  return isfinite(*r);
}

static int make(fe_xgraph *g, fe_xop op, int a, int b, int c)
{
  fe_xnode x = blank(op);
  x.a = a;
  x.b = b;
  x.c = c;
  return intern(g, x);
}

int fe_x_unary(fe_xgraph *g, fe_xop op, int a)
{
  if (a < 0) return -1;
  double v, r;
  if (is_const(g, a, &v) && fold_unary(op, v, &r)) return fe_x_const(g, r);
  const fe_xnode *x = &g->nodes[a];
  if (op == FE_X_NEG && x->op == FE_X_NEG) return x->a;
  if (op == FE_X_NEG && x->op == FE_X_SUB) return make(g, FE_X_SUB, x->b, x->a, -1);
  if (op == FE_X_ABS && (x->op == FE_X_ABS || x->op == FE_X_NEG)) return fe_x_unary(g, FE_X_ABS, x->a);
  return make(g, op, a, -1, -1);
}

static int commutative(fe_xop op)
{
  return op == FE_X_ADD || op == FE_X_MUL || op == FE_X_MIN || op == FE_X_MAX || op == FE_X_EQ ||
         op == FE_X_NE;
}

static int simplify_add(fe_xgraph *g, int a, int b)
{
  if (fe_x_is_const(g, a, 0)) return b;
  if (fe_x_is_const(g, b, 0)) return a;
  if (op_of(g, b) == FE_X_NEG) return fe_x_binary(g, FE_X_SUB, a, g->nodes[b].a);
  if (op_of(g, a) == FE_X_NEG) return fe_x_binary(g, FE_X_SUB, b, g->nodes[a].a);
  if (a == b) return fe_x_binary(g, FE_X_MUL, fe_x_const(g, 2), a);
  return -2; /* no rule */
}

static int simplify_sub(fe_xgraph *g, int a, int b)
{
  if (fe_x_is_const(g, b, 0)) return a;
  if (fe_x_is_const(g, a, 0)) return fe_x_unary(g, FE_X_NEG, b);
  if (a == b) return fe_x_const(g, 0);
  if (op_of(g, b) == FE_X_NEG) return fe_x_binary(g, FE_X_ADD, a, g->nodes[b].a);
  if (op_of(g, a) == FE_X_NEG) /* -x - b = -(x + b) */
    return fe_x_unary(g, FE_X_NEG, fe_x_binary(g, FE_X_ADD, g->nodes[a].a, b));
  return -2;
}

static int simplify_mul(fe_xgraph *g, int a, int b)
{
  double ca, cb;
  if (fe_x_is_const(g, a, 0) || fe_x_is_const(g, b, 0)) return fe_x_const(g, 0);
  if (fe_x_is_const(g, a, 1)) return b;
  if (fe_x_is_const(g, b, 1)) return a;
  if (fe_x_is_const(g, a, -1)) return fe_x_unary(g, FE_X_NEG, b);
  if (fe_x_is_const(g, b, -1)) return fe_x_unary(g, FE_X_NEG, a);
  int na = op_of(g, a) == FE_X_NEG, nb = op_of(g, b) == FE_X_NEG;
  if (na || nb) { /* pull signs out, where they can cancel or become a subtraction */
    int m = fe_x_binary(g, FE_X_MUL, na ? g->nodes[a].a : a, nb ? g->nodes[b].a : b);
    return na && nb ? m : fe_x_unary(g, FE_X_NEG, m);
  }
  if (is_const(g, b, &cb)) return fe_x_binary(g, FE_X_MUL, b, a); /* constants first */
  if (is_const(g, a, &ca) && op_of(g, b) == FE_X_MUL && is_const(g, g->nodes[b].a, &cb))
    return fe_x_binary(g, FE_X_MUL, fe_x_const(g, ca * cb), g->nodes[b].b);
  if (is_const(g, a, &ca) && ca < 0) /* -2 * b = -(2 * b) */
    return fe_x_unary(g, FE_X_NEG, fe_x_binary(g, FE_X_MUL, fe_x_const(g, -ca), b));
  return -2;
}

static int simplify_div(fe_xgraph *g, int a, int b)
{
  if (fe_x_is_const(g, b, 1)) return a;
  if (fe_x_is_const(g, b, -1)) return fe_x_unary(g, FE_X_NEG, a);
  if (fe_x_is_const(g, a, 0)) return a;
  if (a == b) return fe_x_const(g, 1);
  int na = op_of(g, a) == FE_X_NEG, nb = op_of(g, b) == FE_X_NEG;
  if (na || nb) {
    int q = fe_x_binary(g, FE_X_DIV, na ? g->nodes[a].a : a, nb ? g->nodes[b].a : b);
    return na && nb ? q : fe_x_unary(g, FE_X_NEG, q);
  }
  return -2;
}

static int simplify_pow(fe_xgraph *g, int a, int b)
{
  double cb;
  if (fe_x_is_const(g, b, 0) || fe_x_is_const(g, a, 1)) return fe_x_const(g, 1);
  if (fe_x_is_const(g, b, 1)) return a;
  if (op_of(g, a) == FE_X_POW && is_const(g, b, &cb) && cb == floor(cb)) {
    double ce;
    if (is_const(g, g->nodes[a].b, &ce) && ce == floor(ce)) /* (x^m)^n = x^(mn), integers */
      return fe_x_binary(g, FE_X_POW, g->nodes[a].a, fe_x_const(g, ce * cb));
  }
  return -2;
}

/* Comparisons of a node with itself. */
static int simplify_compare(fe_xgraph *g, fe_xop op, int a, int b)
{
  if (a != b) return -2;
  return fe_x_const(g, op == FE_X_LE || op == FE_X_GE || op == FE_X_EQ);
}

int fe_x_binary(fe_xgraph *g, fe_xop op, int a, int b)
{
  if (a < 0 || b < 0) return -1;
  double va, vb, r;
  if (is_const(g, a, &va) && is_const(g, b, &vb) && fold_binary(op, va, vb, &r)) return fe_x_const(g, r);
  int s = -2;
  switch (op) {
  case FE_X_ADD: s = simplify_add(g, a, b); break;
  case FE_X_SUB: s = simplify_sub(g, a, b); break;
  case FE_X_MUL: s = simplify_mul(g, a, b); break;
  case FE_X_DIV: s = simplify_div(g, a, b); break;
  case FE_X_POW: s = simplify_pow(g, a, b); break;
  case FE_X_MIN:
  case FE_X_MAX: s = a == b ? a : -2; break;
  default: s = simplify_compare(g, op, a, b); break;
  }
  if (s != -2) return s;
  if (commutative(op) && a > b && !is_const(g, a, NULL)) { /* canonical order: constants, then ids */
    int t = a;
    a = b;
    b = t;
  }
  return make(g, op, a, b, -1);
}

int fe_x_select(fe_xgraph *g, int cond, int a, int b)
{
  if (cond < 0 || a < 0 || b < 0) return -1;
  double c;
  if (is_const(g, cond, &c)) return c != 0 ? a : b;
  if (a == b) return a;
  return make(g, FE_X_SELECT, cond, a, b);
}

int fe_x_depends(fe_xgraph *g, int n, fe_var v)
{
  return n >= 0 && (unsigned)v < FE_NVARS && (g->deps[n] & (1u << v)) != 0;
}

/* ---- differentiation ---- */

typedef struct diff_ctx {
  fe_xgraph *g;
  fe_var v;
  int index;
  int *memo; /* derivative of node i, or -1 when not yet known; sized for the original nodes */
  int zero, one;
} diff_ctx;

static int d_of(diff_ctx *c, int n);

#define D_ADD(a, b) fe_x_binary(g, FE_X_ADD, a, b)
#define D_SUB(a, b) fe_x_binary(g, FE_X_SUB, a, b)
#define D_MUL(a, b) fe_x_binary(g, FE_X_MUL, a, b)
#define D_DIV(a, b) fe_x_binary(g, FE_X_DIV, a, b)

/* The derivative of a function node y = f(a) given da. */
static int d_function(fe_xgraph *g, int y, int da)
{
  const fe_xnode x = g->nodes[y];
  int a = x.a;
  switch (x.op) {
  case FE_X_NEG: return fe_x_unary(g, FE_X_NEG, da);
  case FE_X_SIN: return D_MUL(fe_x_unary(g, FE_X_COS, a), da);
  case FE_X_COS: return fe_x_unary(g, FE_X_NEG, D_MUL(fe_x_unary(g, FE_X_SIN, a), da));
  case FE_X_TAN: return D_MUL(D_ADD(fe_x_const(g, 1), D_MUL(y, y)), da);
  case FE_X_EXP: return D_MUL(y, da);
  case FE_X_LOG: return D_DIV(da, a);
  case FE_X_SQRT: return D_DIV(da, D_MUL(fe_x_const(g, 2), y));
  case FE_X_ABS: /* sign(a) da, with the subgradient +1 at 0 */
    return fe_x_select(g, fe_x_binary(g, FE_X_LT, a, fe_x_const(g, 0)), fe_x_unary(g, FE_X_NEG, da), da);
  case FE_X_TANH: return D_MUL(D_SUB(fe_x_const(g, 1), D_MUL(y, y)), da);
  default: return -1;
  }
}

static int d_pow(diff_ctx *c, int y)
{
  fe_xgraph *g = c->g;
  const fe_xnode x = g->nodes[y];
  int da = d_of(c, x.a), db = d_of(c, x.b);
  double e;
  if (is_const(g, x.b, &e)) /* e a^(e-1) da */
    return D_MUL(D_MUL(x.b, fe_x_binary(g, FE_X_POW, x.a, fe_x_const(g, e - 1))), da);
  /* a^b (b' log a + b a'/a) */
  return D_MUL(y, D_ADD(D_MUL(db, fe_x_unary(g, FE_X_LOG, x.a)), D_DIV(D_MUL(x.b, da), x.a)));
}

static int d_compute(diff_ctx *c, int n)
{
  fe_xgraph *g = c->g;
  const fe_xnode x = g->nodes[n];
  switch (x.op) {
  case FE_X_CONST: return c->zero;
  case FE_X_VAR: return x.var == c->v && x.index == c->index ? c->one : c->zero;
  case FE_X_RAW:
    fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                 "a raw C expression can't be differentiated (it may read only x and a)");
    return -1;
  case FE_X_ADD: return D_ADD(d_of(c, x.a), d_of(c, x.b));
  case FE_X_SUB: return D_SUB(d_of(c, x.a), d_of(c, x.b));
  case FE_X_MUL: return D_ADD(D_MUL(d_of(c, x.a), x.b), D_MUL(x.a, d_of(c, x.b)));
  case FE_X_DIV: /* (a' - (a/b) b') / b */
    return D_DIV(D_SUB(d_of(c, x.a), D_MUL(n, d_of(c, x.b))), x.b);
  case FE_X_POW: return d_pow(c, n);
  case FE_X_MIN:
  case FE_X_MAX:
    return fe_x_select(g, fe_x_binary(g, x.op == FE_X_MIN ? FE_X_LE : FE_X_GE, x.a, x.b),
                       d_of(c, x.a), d_of(c, x.b));
  case FE_X_LT: case FE_X_LE: case FE_X_GT: case FE_X_GE: case FE_X_EQ: case FE_X_NE:
    return c->zero; /* piecewise constant */
  case FE_X_SELECT: return fe_x_select(g, x.a, d_of(c, x.b), d_of(c, x.c));
  default: return d_function(g, n, d_of(c, x.a));
  }
}

static int d_of(diff_ctx *c, int n)
{
  if (n < 0) return -1;
  if (!(c->g->deps[n] & (1u << c->v))) return c->zero;
  if (c->memo[n] >= 0) return c->memo[n];
  int d = d_compute(c, n);
  c->memo[n] = d;
  return d;
}

int fe_x_diff(fe_xgraph *g, int n, fe_var v, int index)
{
  if (n < 0) return -1;
  diff_ctx c = {g, v, index, malloc(sizeof(int) * (size_t)(n + 1)), fe_x_const(g, 0), fe_x_const(g, 1)};
  if (!c.memo || c.zero < 0 || c.one < 0) {
    free(c.memo);
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory for an expression graph");
    return -1;
  }
  memset(c.memo, 0xff, sizeof(int) * (size_t)(n + 1));
  int d = d_of(&c, n);
  free(c.memo);
  return d;
}

/* ---- evaluation ---- */

static double eval_rec(const fe_xgraph *g, int n, const double *const *vals, double *memo, unsigned char *done)
{
  if (done[n]) return memo[n];
  const fe_xnode *x = &g->nodes[n];
  double a = x->a >= 0 ? eval_rec(g, x->a, vals, memo, done) : 0;
  double b = x->b >= 0 ? eval_rec(g, x->b, vals, memo, done) : 0, r = NAN;
  switch (x->op) {
  case FE_X_CONST: r = x->value; break;
  case FE_X_VAR: r = vals[x->var] ? vals[x->var][x->index] : NAN; break;
  case FE_X_RAW: r = NAN; break;
  case FE_X_SELECT: r = a != 0 ? b : eval_rec(g, x->c, vals, memo, done); break;
  default:
    if (!fold_binary((fe_xop)x->op, a, b, &r) && !fold_unary((fe_xop)x->op, a, &r)) {
      /* folds refuse non-finite results: compute them anyway */
      switch (x->op) {
      case FE_X_DIV: r = a / b; break;
      case FE_X_LOG: r = log(a); break;
      case FE_X_POW: r = pow(a, b); break;
      case FE_X_SQRT: r = sqrt(a); break;
      case FE_X_EXP: r = exp(a); break;
      default: r = NAN; break;
      }
    }
  }
  memo[n] = r;
  done[n] = 1;
  return r;
}

double fe_x_eval(const fe_xgraph *g, int n, const double *const *vals)
{
  if (n < 0) return NAN;
  double *memo = malloc(sizeof(double) * (size_t)(n + 1));
  unsigned char *done = calloc((size_t)n + 1, 1);
  double r = memo && done ? eval_rec(g, n, vals, memo, done) : NAN;
  free(memo);
  free(done);
  return r;
}

/* ---- counting ---- */

static int int_exponent(const fe_xgraph *g, const fe_xnode *x, int *e)
{
  double v;
  if (x->op != FE_X_POW || !is_const(g, x->b, &v) || v != floor(v) || fabs(v) > 8) return 0;
  *e = (int)v;
  return 1;
}

/* Multiplications of x^n by repeated squaring, n >= 1. */
static int pow_mults(int n)
{
  int m = 0;
  while (n > 1) {
    m += 1 + (n & 1);
    n >>= 1;
  }
  return m;
}

static double node_flops(const fe_xgraph *g, const fe_xnode *x)
{
  int e;
  double v;
  switch (x->op) {
  case FE_X_CONST: case FE_X_VAR: case FE_X_SELECT: return 0;
  case FE_X_RAW: return fe_count_flops(g->raw[x->index]);
  case FE_X_POW:
    if (int_exponent(g, x, &e)) return pow_mults(abs(e)) + (e < 0);
    if (is_const(g, x->b, &v) && v == -0.5) return 2;
    return 1;
  default: return 1;
  }
}

static double node_nonfma(const fe_xgraph *g, const fe_xnode *x)
{
  int e;
  switch (x->op) {
  case FE_X_RAW: return fe_count_nonfma(g->raw[x->index]);
  case FE_X_POW: return int_exponent(g, x, &e) ? e < 0 : 1;
  case FE_X_DIV: case FE_X_SQRT: case FE_X_EXP: case FE_X_LOG: case FE_X_SIN: case FE_X_COS:
  case FE_X_TAN: case FE_X_TANH: return 1;
  default: return 0;
  }
}

/* Mark the nodes reachable from the roots (marks sized g->n, zeroed by the caller). */
static void mark(const fe_xgraph *g, int n, unsigned char *marks)
{
  if (n < 0 || marks[n]) return;
  marks[n] = 1;
  mark(g, g->nodes[n].a, marks);
  mark(g, g->nodes[n].b, marks);
  mark(g, g->nodes[n].c, marks);
}

/* The sum of per(node) over the nodes the n roots reach, each distinct node once. */
static double count_reached(const fe_xgraph *g, const int *roots, int n,
                            double (*per)(const fe_xgraph *, const fe_xnode *))
{
  unsigned char *marks = calloc((size_t)g->n + 1, 1);
  if (!marks) return 0;
  for (int i = 0; i < n; i++) mark(g, roots[i], marks);
  double f = 0;
  for (int id = 0; id < g->n; id++)
    if (marks[id]) f += per(g, &g->nodes[id]);
  free(marks);
  return f;
}

double fe_x_flops(const fe_xgraph *g, const int *roots, int n)
{
  return count_reached(g, roots, n, node_flops);
}

double fe_x_nonfma(const fe_xgraph *g, const int *roots, int n)
{
  return count_reached(g, roots, n, node_nonfma);
}

/* The degree in x of a raw C expression where it is a polynomial of x[0..2] written with
 * numbers, + - * / by numbers and parentheses (e.g. "1 + 0.5 * x[0]": 1); -1 for anything
 * else (a call, a division by x, a name), which the caller then guesses. A small recursive
 * descent: sum := term (('+'|'-') term)*, term := factor (('*'|'/') factor)*, factor :=
 * ('+'|'-') factor | number | x[d] | '(' sum ')'. */
typedef struct raw_reader {
  const char *p;
  int bad;
} raw_reader;

static void raw_skip(raw_reader *r)
{
  while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n') r->p++;
}

static int raw_sum(raw_reader *r);

static int raw_factor(raw_reader *r)
{
  raw_skip(r);
  const char *p = r->p;
  if (*p == '+' || *p == '-') {
    r->p++;
    return raw_factor(r);
  }
  if (*p == '(') {
    r->p++;
    int d = raw_sum(r);
    raw_skip(r);
    if (*r->p != ')') r->bad = 1;
    else r->p++;
    return d;
  }
  if (p[0] == 'x' && p[1] == '[' && p[2] >= '0' && p[2] <= '2' && p[3] == ']') {
    r->p += 4;
    return 1;
  }
  char *end;
  (void)strtod(p, &end);
  if (end == p) {
    r->bad = 1;
    return 0;
  }
  r->p = end;
  if (*r->p == 'f' || *r->p == 'F') r->p++; /* 0.5f */
  return 0;
}

static int raw_term(raw_reader *r)
{
  int d = raw_factor(r);
  for (;;) {
    raw_skip(r);
    char op = *r->p;
    if (op != '*' && op != '/') return d;
    r->p++;
    int e = raw_factor(r);
    if (op == '*') d += e;
    else if (e > 0) r->bad = 1; /* a division by x: not a polynomial */
  }
}

static int raw_sum(raw_reader *r)
{
  int d = raw_term(r);
  for (;;) {
    raw_skip(r);
    if (*r->p != '+' && *r->p != '-') return d;
    r->p++;
    int e = raw_term(r);
    if (e > d) d = e;
  }
}

static int raw_degree(const char *c_expr)
{
  raw_reader r = {c_expr, 0};
  int d = raw_sum(&r);
  raw_skip(&r);
  return r.bad || *r.p ? -1 : d;
}

static int degree_rec(const fe_xgraph *g, int n, int *memo, const int *const *var_degree)
{
  if (n < 0) return 0;
  if (memo[n] >= 0) return memo[n];
  const fe_xnode *x = &g->nodes[n];
  int da = x->a >= 0 ? degree_rec(g, x->a, memo, var_degree) : 0;
  int db = x->b >= 0 ? degree_rec(g, x->b, memo, var_degree) : 0;
  int d = da > db ? da : db, e;
  switch (x->op) {
  case FE_X_CONST: d = 0; break;
  case FE_X_VAR:
    d = var_degree && var_degree[x->var] ? var_degree[x->var][x->index] : x->var == FE_V_X;
    break;
  case FE_X_RAW: /* a polynomial's own degree, else a guess where it reads x */
    d = raw_degree(g->raw[x->index]);
    if (d < 0) d = (g->deps[n] & (1u << FE_V_X)) ? 2 : 0;
    break;
  case FE_X_MUL: d = da + db; break;
  case FE_X_DIV: d = da + (db ? db + 2 : 0); break;
  case FE_X_POW: d = int_exponent(g, x, &e) && e > 0 ? da * e : (da || db ? da + db + 2 : 0); break;
  case FE_X_SELECT: e = degree_rec(g, x->c, memo, var_degree), d = db > e ? db : e; break;
  case FE_X_ADD: case FE_X_SUB: case FE_X_MIN: case FE_X_MAX: case FE_X_NEG: break;
  default: d = d ? d + 2 : 0; break; /* functions and comparisons */
  }
  if (d > 8) d = 8;
  memo[n] = d;
  return d;
}

int fe_x_degree_x(const fe_xgraph *g, int n, const int *const *var_degree)
{
  if (n < 0) return 0;
  int *memo = malloc(sizeof(int) * (size_t)(n + 1));
  if (!memo) return 2;
  memset(memo, 0xff, sizeof(int) * (size_t)(n + 1));
  int d = degree_rec(g, n, memo, var_degree);
  free(memo);
  return d;
}

/* ---- emission ---- */

static const char *const c_var_names[FE_NVARS] = {"u", "du", "x", "a", "k", "f", "df", "w", "dw"};
static const char *const c_functions[FE_X_NOPS] = {
  [FE_X_SIN] = "sin", [FE_X_COS] = "cos", [FE_X_TAN] = "tan", [FE_X_EXP] = "exp",
  [FE_X_LOG] = "log", [FE_X_SQRT] = "sqrt", [FE_X_ABS] = "fabs", [FE_X_TANH] = "tanh",
  [FE_X_MIN] = "fmin", [FE_X_MAX] = "fmax", [FE_X_POW] = "pow"};

typedef struct emit_ctx {
  const fe_xgraph *g;
  const char *const *tmp; /* name of node i's temporary, or NULL to inline it */
  int math;               /* print mathematics rather than C */
  fe_var_namer namer;
  void *nctx;
} emit_ctx;

enum { P_SUM = 1, P_PRODUCT = 2, P_UNARY = 3, P_ATOM = 4 };

static int precedence(const emit_ctx *e, int n)
{
  const fe_xnode *x = &e->g->nodes[n];
  if (e->tmp && e->tmp[n]) return P_ATOM;
  switch (x->op) {
  case FE_X_ADD: case FE_X_SUB: return P_SUM;
  case FE_X_MUL: case FE_X_DIV: return P_PRODUCT;
  case FE_X_NEG: return P_UNARY;
  case FE_X_CONST: return x->value < 0 ? P_UNARY : P_ATOM;
  case FE_X_POW: return e->math ? P_UNARY : P_ATOM;
  default: return P_ATOM;
  }
}

static void emit_node(const emit_ctx *e, int n, fe_strbuf *b, int as_argument);

/* Operand n of a node of precedence p; `right` operands of - and / need equal precedence
 * wrapped, and a sign is wrapped unless it leads. */
static void emit_operand(const emit_ctx *e, int n, int p, int right, fe_strbuf *b)
{
  int q = precedence(e, n);
  int wrap = q < p || (right && q == p) || (right && q == P_UNARY);
  if (wrap) fe_strbuf_append(b, "(");
  emit_node(e, n, b, 0);
  if (wrap) fe_strbuf_append(b, ")");
}

static void emit_const(const emit_ctx *e, double v, fe_strbuf *b, int as_argument)
{
  char s[40];
  snprintf(s, sizeof s, "%.17g", v);
  if (e->math) {
    snprintf(s, sizeof s, "%.6g", v);
    fe_strbuf_append(b, s);
  } else if (!isfinite(v)) { /* C has no literal for these; every dialect folds the quotient */
    fe_strbuf_append(b, isnan(v) ? "((real)0 / (real)0)"
                                 : v > 0 ? "((real)1 / (real)0)" : "(-(real)1 / (real)0)");
  } else if (v == floor(v) && fabs(v) < 1e9 && !as_argument) {
    fe_strbuf_append(b, s); /* an int: converted exactly wherever it meets a real */
  } else {
    if (!strpbrk(s, ".en")) strcat(s, ".0");
    fe_strbuf_printf(b, "(real)%s", s);
  }
}

/* x^n, |n| <= 8, as products by repeated squaring of the (atomic) base. */
static void emit_int_pow(const emit_ctx *e, int base, int n, fe_strbuf *b)
{
  if (n == 1) {
    emit_node(e, base, b, 0);
    return;
  }
  fe_strbuf_append(b, "(");
  if (n % 2) {
    emit_int_pow(e, base, n - 1, b);
    fe_strbuf_append(b, " * ");
    emit_node(e, base, b, 0);
  } else {
    emit_int_pow(e, base, n / 2, b);
    fe_strbuf_append(b, " * ");
    emit_int_pow(e, base, n / 2, b);
  }
  fe_strbuf_append(b, ")");
}

static void emit_pow(const emit_ctx *e, int n, fe_strbuf *b)
{
  const fe_xnode *x = &e->g->nodes[n];
  int k;
  double v = 0;
  if (e->math) {
    emit_operand(e, x->a, P_ATOM, 0, b);
    fe_strbuf_append(b, "^");
    emit_operand(e, x->b, P_ATOM, 0, b);
  } else if (int_exponent(e->g, x, &k)) {
    if (k < 0) fe_strbuf_append(b, "((real)1 / ");
    emit_int_pow(e, x->a, abs(k), b);
    if (k < 0) fe_strbuf_append(b, ")");
  } else if (is_const(e->g, x->b, &v) && (v == 0.5 || v == -0.5)) {
    fe_strbuf_append(b, v < 0 ? "((real)1 / sqrt(" : "sqrt(");
    emit_node(e, x->a, b, 1);
    fe_strbuf_append(b, v < 0 ? "))" : ")");
  } else {
    fe_strbuf_append(b, "pow(");
    emit_node(e, x->a, b, 1);
    fe_strbuf_append(b, ", ");
    emit_node(e, x->b, b, 1);
    fe_strbuf_append(b, ")");
  }
}

static void emit_binary(const emit_ctx *e, const fe_xnode *x, fe_strbuf *b)
{
  int p = x->op == FE_X_ADD || x->op == FE_X_SUB ? P_SUM : P_PRODUCT;
  /* two constants meet only where their fold was not finite (1 / 0): written as ints they
   * would divide as integers, and gcc traps a constant integer division by zero */
  if (!e->math && is_const(e->g, x->a, NULL) && is_const(e->g, x->b, NULL)) {
    fe_strbuf_append(b, "(");
    emit_const(e, e->g->nodes[x->a].value, b, 1);
    fe_strbuf_printf(b, " %s ", op_names[x->op]);
    emit_const(e, e->g->nodes[x->b].value, b, 1);
    fe_strbuf_append(b, ")");
    return;
  }
  emit_operand(e, x->a, p, 0, b);
  fe_strbuf_printf(b, e->math && x->op == FE_X_MUL ? "*" : " %s ", op_names[x->op]);
  emit_operand(e, x->b, p, 1, b); /* wrapped at equal precedence: the graph's order is kept */
}

static void emit_node(const emit_ctx *e, int n, fe_strbuf *b, int as_argument)
{
  const fe_xgraph *g = e->g;
  const fe_xnode *x = &g->nodes[n];
  if (e->tmp && e->tmp[n]) {
    fe_strbuf_append(b, e->tmp[n]);
    return;
  }
  switch (x->op) {
  case FE_X_CONST: emit_const(e, x->value, b, as_argument); return;
  case FE_X_VAR:
    if (e->namer) e->namer(e->nctx, (fe_var)x->var, x->index, b);
    else fe_strbuf_printf(b, "%s[%d]", c_var_names[x->var], x->index);
    return;
  case FE_X_RAW: /* as typed when printed, with real numbers in C */
    fe_strbuf_append(b, "(");
    if (e->math) fe_strbuf_append(b, g->raw[x->index]);
    else fe_c_reals(g->raw[x->index], b);
    fe_strbuf_append(b, ")");
    return;
  case FE_X_ADD: case FE_X_SUB: case FE_X_MUL: case FE_X_DIV: emit_binary(e, x, b); return;
  case FE_X_POW: emit_pow(e, n, b); return;
  case FE_X_NEG:
    fe_strbuf_append(b, "-");
    emit_operand(e, x->a, P_UNARY, 1, b);
    return;
  case FE_X_LT: case FE_X_LE: case FE_X_GT: case FE_X_GE: case FE_X_EQ: case FE_X_NE:
    fe_strbuf_append(b, "(");
    emit_node(e, x->a, b, 0);
    fe_strbuf_printf(b, " %s ", op_names[x->op]);
    emit_node(e, x->b, b, 0);
    fe_strbuf_append(b, ")");
    return;
  case FE_X_SELECT:
    fe_strbuf_append(b, "(");
    emit_node(e, x->a, b, 0);
    fe_strbuf_append(b, " ? ");
    emit_node(e, x->b, b, 0);
    fe_strbuf_append(b, " : ");
    emit_node(e, x->c, b, 0);
    fe_strbuf_append(b, ")");
    return;
  default: /* functions */
    fe_strbuf_printf(b, "%s(", e->math && x->op == FE_X_ABS ? "abs" : e->math && x->op == FE_X_MIN ? "min"
                               : e->math && x->op == FE_X_MAX ? "max" : c_functions[x->op]);
    emit_node(e, x->a, b, 1);
    if (x->b >= 0) {
      fe_strbuf_append(b, ", ");
      emit_node(e, x->b, b, 1);
    }
    fe_strbuf_append(b, ")");
    return;
  }
}

/* Whether node x needs its operand `base` as a temporary (integer powers repeat it). */
static int repeats_operand(const fe_xgraph *g, const fe_xnode *x)
{
  int k;
  return int_exponent(g, x, &k) && abs(k) > 1;
}

void fe_x_emit_c(const fe_xgraph *g, const int *roots, const char *const *lhs, int n,
                 int skip_zero, int indent, fe_strbuf *b)
{
  int *uses = calloc((size_t)g->n + 1, sizeof(int));
  unsigned char *marks = calloc((size_t)g->n + 1, 1);
  char **tmp = calloc((size_t)g->n + 1, sizeof(char *));
  if (!uses || !marks || !tmp) {
    b->failed = 1;
    goto done;
  }
  for (int i = 0; i < n; i++)
    if (roots[i] >= 0 && !(skip_zero && fe_x_is_const(g, roots[i], 0))) {
      mark(g, roots[i], marks);
      uses[roots[i]]++;
    }
  for (int id = 0; id < g->n; id++) {
    if (!marks[id]) continue;
    const fe_xnode *x = &g->nodes[id];
    int ops[3] = {x->a, x->b, x->c};
    for (int j = 0; j < 3; j++)
      if (ops[j] >= 0) uses[ops[j]] += 1 + (j == 0 && repeats_operand(g, x));
  }
  int ntmp = 0;
  emit_ctx e = {g, (const char *const *)tmp, 0, NULL, NULL};
  for (int id = 0; id < g->n; id++) {
    const fe_xnode *x = &g->nodes[id];
    if (!marks[id] || uses[id] < 2 || x->op == FE_X_CONST || x->op == FE_X_VAR) continue;
    int is_int = x->op >= FE_X_LT && x->op <= FE_X_NE;
    fe_strbuf_printf(b, "%*sconst %s t%d = ", indent, "", is_int ? "int" : "real", ntmp);
    emit_node(&e, id, b, 0);
    fe_strbuf_append(b, ";\n");
    char name[16];
    snprintf(name, sizeof name, "t%d", ntmp++);
    tmp[id] = strdup(name);
    if (!tmp[id]) b->failed = 1;
  }
  for (int i = 0; i < n; i++) {
    if (roots[i] < 0 || (skip_zero && fe_x_is_const(g, roots[i], 0))) continue;
    fe_strbuf_printf(b, "%*s%s = ", indent, "", lhs[i]);
    emit_node(&e, roots[i], b, 0);
    fe_strbuf_append(b, ";\n");
  }
done:
  for (int id = 0; tmp && id < g->n; id++) free(tmp[id]);
  free(tmp);
  free(uses);
  free(marks);
}

void fe_x_print(const fe_xgraph *g, int n, fe_var_namer namer, void *ctx, fe_strbuf *b)
{
  if (n < 0) {
    fe_strbuf_append(b, "?");
    return;
  }
  emit_ctx e = {g, NULL, 1, namer, ctx};
  emit_node(&e, n, b, 0);
}

/* ---- coefficients: what the host evaluates before a solve ---- */

int fe_x_raw_reached(const fe_xgraph *g, const int *roots, int n, const char **texts, int max)
{
  unsigned char *marks = calloc((size_t)g->n + 1, 1);
  if (!marks) return 0;
  for (int i = 0; i < n; i++) mark(g, roots[i], marks);
  int count = 0;
  for (int id = 0; id < g->n; id++)
    if (marks[id] && g->nodes[id].op == FE_X_RAW) {
      if (count < max) texts[count] = g->raw[g->nodes[id].index];
      count++;
    }
  free(marks);
  return count;
}

/* Whether node n depends on x, a and k alone (or on nothing). */
static int of_x_alone(const fe_xgraph *g, int n)
{
  unsigned allowed = 1u << FE_V_X | 1u << FE_V_A | 1u << FE_V_K;
  return (g->deps[n] & ~allowed) == 0;
}

int fe_x_coefficients(const fe_xgraph *g, const int *roots, int n, int *ids, int max)
{
  unsigned char *marks = calloc((size_t)g->n + 1, 1), *coef = calloc((size_t)g->n + 1, 1);
  int count = 0;
  if (!marks || !coef) goto done;
  for (int i = 0; i < n; i++) {
    mark(g, roots[i], marks);
    if (roots[i] >= 0 && of_x_alone(g, roots[i])) coef[roots[i]] = 1;
  }
  for (int id = 0; id < g->n; id++) {
    const fe_xnode *x = &g->nodes[id];
    if (!marks[id] || of_x_alone(g, id)) continue;
    int ops[3] = {x->a, x->b, x->c};
    for (int j = 0; j < 3; j++)
      if (ops[j] >= 0 && of_x_alone(g, ops[j])) coef[ops[j]] = 1;
  }
  for (int id = 0; id < g->n; id++) {
    const fe_xnode *x = &g->nodes[id];
    if (!coef[id] || x->op == FE_X_VAR || (x->op == FE_X_CONST && isfinite(x->value))) continue;
    if (count < max) ids[count] = id;
    count++;
  }
done:
  free(marks);
  free(coef);
  return count;
}

/* The nodes of n written out as a tree (shared nodes each time), at most cap. */
static long tree_size(const fe_xgraph *g, int n, long *memo, long cap)
{
  if (n < 0) return 0;
  if (memo[n] >= 0) return memo[n];
  const fe_xnode *x = &g->nodes[n];
  long s = 1 + tree_size(g, x->a, memo, cap) + tree_size(g, x->b, memo, cap) + tree_size(g, x->c, memo, cap);
  if (s > cap) s = cap + 1;
  memo[n] = s;
  return s;
}

int fe_x_print_c(const fe_xgraph *g, int n, int max_nodes, fe_strbuf *b)
{
  if (n < 0) return -1;
  long *memo = malloc(sizeof(long) * (size_t)(n + 1));
  if (!memo) return -1;
  memset(memo, 0xff, sizeof(long) * (size_t)(n + 1));
  long size = tree_size(g, n, memo, max_nodes);
  free(memo);
  if (size > max_nodes) return -1;
  emit_ctx e = {g, NULL, 0, NULL, NULL};
  emit_node(&e, n, b, 0);
  return 0;
}

/* ---- C expressions typed by a user: numbers as reals ---- */

static int is_name_char(char c)
{
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The end of the preprocessing number at p (digits, letters, '.', and a sign after an
 * exponent letter), and whether it is an integer literal (no '.', no exponent). */
static const char *number_end(const char *p, int *integer)
{
  int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
  int real = 0;
  const char *q = p;
  for (;;) {
    char c = *q;
    if (c == '.') real = 1;
    else if ((c == 'e' || c == 'E') && !hex) real = 1;
    else if ((c == 'p' || c == 'P') && hex) real = 1;
    else if (!is_name_char(c)) break;
    q++;
    if ((q[-1] == 'e' || q[-1] == 'E' || q[-1] == 'p' || q[-1] == 'P') && (*q == '+' || *q == '-') &&
        (!hex || q[-1] == 'p' || q[-1] == 'P'))
      q++;
  }
  *integer = !real;
  return q;
}

/* Whether the operator just before p (blanks skipped; s the start) takes integers only:
 * % ~ ^, a single & or |, << or >>. */
static int integer_operator_before(const char *s, const char *p)
{
  while (p > s && is_blank(p[-1])) p--;
  if (p == s) return 0;
  char c = p[-1], d = p - 1 > s ? p[-2] : 0;
  if (c == '%' || c == '~' || c == '^') return 1;
  if (c == '&' || c == '|') return d != c;
  if (c == '<' || c == '>') return d == c;
  return 0;
}

/* The same for the operator just after p. */
static int integer_operator_after(const char *p)
{
  while (is_blank(*p)) p++;
  if (*p == '%' || *p == '^') return 1;
  if (*p == '&' || *p == '|') return p[1] != *p;
  if (*p == '<' || *p == '>') return p[1] == *p;
  return 0;
}

void fe_c_reals(const char *e, fe_strbuf *b)
{
  const char *p = e, *copied = e; /* e[copied - e ..] not yet appended */
  int depth = 0;                 /* of [ ] */
  while (*p) {
    if (*p == '[' || *p == ']') {
      depth += *p == '[' ? 1 : depth > 0 ? -1 : 0;
      p++;
    } else if (is_name_char(*p) && !is_digit(*p)) {
      while (is_name_char(*p)) p++; /* a name, digits and all: k2, log10 */
    } else if (*p == '"' || *p == '\'') { /* not C of a coefficient, but skipped whole */
      char quote = *p++;
      while (*p && *p != quote) p += p[0] == '\\' && p[1] ? 2 : 1;
      if (*p) p++;
    } else if (is_digit(*p) || (*p == '.' && is_digit(p[1]))) {
      int integer;
      const char *end = number_end(p, &integer);
      if (integer && depth == 0 && !integer_operator_before(e, p) && !integer_operator_after(end)) {
        fe_strbuf_printf(b, "%.*s(real)", (int)(p - copied), copied);
        copied = p;
      }
      p = end;
    } else {
      p++;
    }
  }
  fe_strbuf_append(b, copied);
}

/* ---- C expressions typed by a user: read and evaluated on the host ----
 * A recursive descent in C's precedence writes a program for a stack machine; evaluation
 * runs it once a point. */

typedef enum {
  CX_NUM, CX_VAR, CX_NEG, CX_NOT, CX_FLOAT, CX_CALL1, CX_CALL2, CX_SELECT,
  CX_ADD, CX_SUB, CX_MUL, CX_DIV, CX_LT, CX_LE, CX_GT, CX_GE, CX_EQ, CX_NE, CX_AND, CX_OR
} cx_op;

typedef struct cx_instr {
  unsigned char op, var; /* cx_op; fe_var of a CX_VAR */
  int index;             /* the variable's index */
  double value;          /* CX_NUM */
  double (*f1)(double);
  double (*f2)(double, double);
} cx_instr;

enum { CX_STACK = 32, CX_NESTING = 200 }; /* the stack's depth, nesting of the reader */

struct fe_cexpr {
  cx_instr *code;
  int n, cap;
  int reads[FE_NVARS]; /* 1 + the largest index read, 0: none */
};

typedef struct cx_reader {
  const char *p;
  fe_cexpr *c;
  int depth, max_depth; /* of the stack while it runs */
  int nesting;
  int bad;
} cx_reader;

static void cx_skip(cx_reader *r)
{
  while (is_blank(*r->p)) r->p++;
}

/* Past character ch (blanks first), or bad where it is not there (the end of the text stays). */
static void cx_expect(cx_reader *r, char ch)
{
  cx_skip(r);
  if (*r->p == ch) r->p++;
  else r->bad = 1;
}

/* Append an instruction that takes `pops` values and pushes one. */
static void cx_emit(cx_reader *r, cx_instr in, int pops)
{
  fe_cexpr *c = r->c;
  if (r->bad) return;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    cx_instr *code = realloc(c->code, sizeof *code * (size_t)cap);
    if (!code) {
      r->bad = 1;
      return;
    }
    c->code = code;
    c->cap = cap;
  }
  c->code[c->n++] = in;
  r->depth += 1 - pops;
  if (r->depth > r->max_depth) r->max_depth = r->depth;
}

static void cx_op1(cx_reader *r, cx_op op, int pops)
{
  cx_instr in = {.op = (unsigned char)op};
  cx_emit(r, in, pops);
}

static const struct {
  const char *name;
  double (*f)(double);
} cx_functions1[] = {
  {"sin", sin}, {"cos", cos}, {"tan", tan}, {"asin", asin}, {"acos", acos}, {"atan", atan},
  {"sinh", sinh}, {"cosh", cosh}, {"tanh", tanh}, {"asinh", asinh}, {"acosh", acosh},
  {"atanh", atanh}, {"exp", exp}, {"exp2", exp2}, {"expm1", expm1}, {"log", log}, {"log2", log2},
  {"log10", log10}, {"log1p", log1p}, {"sqrt", sqrt}, {"cbrt", cbrt}, {"fabs", fabs},
  {"floor", floor}, {"ceil", ceil}, {"round", round}, {"trunc", trunc}, {"erf", erf},
  {"erfc", erfc}, {"tgamma", tgamma}}; /* not lgamma: it writes the global signgam */

static const struct {
  const char *name;
  double (*f)(double, double);
} cx_functions2[] = {{"pow", pow}, {"atan2", atan2}, {"fmin", fmin}, {"fmax", fmax}, {"hypot", hypot},
                     {"fmod", fmod}, {"copysign", copysign}, {"fdim", fdim}};

static const struct {
  const char *name;
  double value;
} cx_constants[] = {
  {"M_PI", M_PI}, {"M_PI_2", M_PI_2}, {"M_PI_4", M_PI_4}, {"M_1_PI", M_1_PI}, {"M_2_PI", M_2_PI},
  {"M_2_SQRTPI", M_2_SQRTPI}, {"M_E", M_E}, {"M_LOG2E", M_LOG2E}, {"M_LOG10E", M_LOG10E},
  {"M_LN2", M_LN2}, {"M_LN10", M_LN10}, {"M_SQRT2", M_SQRT2}, {"M_SQRT1_2", M_SQRT1_2},
  {"INFINITY", INFINITY}, {"HUGE_VAL", HUGE_VAL}, {"NAN", NAN}};

#define CX_COUNT(t) ((int)(sizeof t / sizeof t[0]))

static void cx_cond(cx_reader *r);

/* Whether the name of length n at s is w. */
static int name_is(const char *s, size_t n, const char *w) { return strlen(w) == n && !strncmp(s, w, n); }

/* A number, as a real (an octal integer as C reads it). */
static void cx_number(cx_reader *r)
{
  int integer;
  const char *end = number_end(r->p, &integer);
  char *stop;
  double v;
  if (integer && r->p[0] == '0' && is_digit(r->p[1])) v = (double)strtoull(r->p, &stop, 8);
  else v = strtod(r->p, &stop);
  while (stop < end && strchr("uUlLfF", *stop)) stop++; /* suffixes */
  if (stop != end) r->bad = 1;
  r->p = end;
  cx_instr in = {.op = CX_NUM, .value = v};
  cx_emit(r, in, 0);
}

/* x[d], a[i], k[i] with a literal index. */
static void cx_variable(cx_reader *r, char name)
{
  r->p++; /* '[' */
  cx_skip(r);
  char *stop;
  long i = is_digit(*r->p) ? strtol(r->p, &stop, 10) : -1;
  if (i < 0 || i > 4096) {
    r->bad = 1;
    return;
  }
  r->p = stop;
  cx_skip(r);
  if (*r->p != ']' || (name == 'x' && i > 2)) {
    r->bad = 1;
    return;
  }
  r->p++;
  fe_var v = name == 'x' ? FE_V_X : name == 'a' ? FE_V_A : FE_V_K;
  if (r->c->reads[v] < i + 1) r->c->reads[v] = (int)i + 1;
  cx_instr in = {.op = CX_VAR, .var = (unsigned char)v, .index = (int)i};
  cx_emit(r, in, 0);
}

/* name(args) for a known function of one or two doubles. */
static void cx_call(cx_reader *r, const char *name, size_t n)
{
  int nargs = 0;
  double (*f1)(double) = NULL;
  double (*f2)(double, double) = NULL;
  for (int i = 0; i < CX_COUNT(cx_functions1); i++)
    if (name_is(name, n, cx_functions1[i].name)) f1 = cx_functions1[i].f, nargs = 1;
  for (int i = 0; i < CX_COUNT(cx_functions2); i++)
    if (name_is(name, n, cx_functions2[i].name)) f2 = cx_functions2[i].f, nargs = 2;
  if (!nargs) {
    r->bad = 1;
    return;
  }
  r->p++; /* '(' */
  for (int k = 0; k < nargs && !r->bad; k++) {
    if (k) cx_expect(r, ',');
    if (!r->bad) cx_cond(r);
  }
  cx_expect(r, ')');
  cx_instr in = {.op = (unsigned char)(nargs == 1 ? CX_CALL1 : CX_CALL2), .f1 = f1, .f2 = f2};
  cx_emit(r, in, nargs);
}

static void cx_primary(cx_reader *r)
{
  cx_skip(r);
  const char *p = r->p;
  if (*p == '(') {
    r->p++;
    cx_cond(r);
    cx_expect(r, ')');
    return;
  }
  if (is_digit(*p) || (*p == '.' && is_digit(p[1]))) {
    cx_number(r);
    return;
  }
  if (!is_name_char(*p)) {
    r->bad = 1;
    return;
  }
  const char *name = p;
  while (is_name_char(*r->p)) r->p++;
  size_t n = (size_t)(r->p - name);
  cx_skip(r);
  if (*r->p == '[' && n == 1 && (*name == 'x' || *name == 'a' || *name == 'k')) {
    cx_variable(r, *name);
    return;
  }
  if (*r->p == '(') {
    cx_call(r, name, n);
    return;
  }
  for (int i = 0; i < CX_COUNT(cx_constants); i++)
    if (name_is(name, n, cx_constants[i].name)) {
      cx_instr in = {.op = CX_NUM, .value = cx_constants[i].value};
      cx_emit(r, in, 0);
      return;
    }
  r->bad = 1;
}

/* A cast at r->p: "(real)", "(double)" or "(float)" consumed with *kind 1, or 2 for float;
 * an integer type's cast is not read (bad); 0 when no cast is there. */
static int cx_cast(cx_reader *r)
{
  const char *p = r->p + 1;
  while (is_blank(*p)) p++;
  const char *name = p;
  while (is_name_char(*p)) p++;
  size_t n = (size_t)(p - name);
  while (is_blank(*p)) p++;
  if (*p != ')' || !n) return 0;
  static const char *const integer_types[] = {"int", "long", "short", "char", "unsigned", "signed",
                                              "size_t", "bool", "_Bool"};
  for (size_t i = 0; i < sizeof integer_types / sizeof integer_types[0]; i++)
    if (name_is(name, n, integer_types[i])) {
      r->bad = 1;
      return 0;
    }
  int kind = name_is(name, n, "real") || name_is(name, n, "double") ? 1 : name_is(name, n, "float") ? 2 : 0;
  if (kind) r->p = p + 1;
  return kind;
}

static void cx_unary(cx_reader *r)
{
  if (++r->nesting > CX_NESTING) r->bad = 1;
  cx_skip(r);
  char c = *r->p;
  int cast = 0;
  if (r->bad) {
    /* nothing more */
  } else if ((c == '-' || c == '+') && r->p[1] == c) {
    r->bad = 1; /* ++, -- */
  } else if (c == '-' || c == '+' || c == '!') {
    r->p++;
    cx_unary(r);
    if (c != '+') cx_op1(r, c == '-' ? CX_NEG : CX_NOT, 1);
  } else if (c == '(' && (cast = cx_cast(r)) != 0) {
    cx_unary(r);
    if (cast == 2) cx_op1(r, CX_FLOAT, 1);
  } else if (c == '~') {
    r->bad = 1;
  } else {
    cx_primary(r);
  }
  r->nesting--;
}

/* The binary operator at p: its length, C precedence (higher binds tighter) and instruction,
 * or -1 for one of integers only; 0 when none is there. */
static int cx_binary_at(const char *p, int *len, cx_op *op)
{
  static const struct {
    const char *s;
    int prec;
    int op; /* -1: integers only */
  } ops[] = {{"||", 1, CX_OR}, {"&&", 2, CX_AND}, {"==", 6, CX_EQ}, {"!=", 6, CX_NE},
             {"<=", 7, CX_LE}, {">=", 7, CX_GE}, {"<<", 8, -1},     {">>", 8, -1},
             {"|", 3, -1},     {"^", 4, -1},     {"&", 5, -1},      {"<", 7, CX_LT},
             {">", 7, CX_GT},  {"+", 9, CX_ADD}, {"-", 9, CX_SUB},  {"*", 10, CX_MUL},
             {"/", 10, CX_DIV}, {"%", 10, -1}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    size_t n = strlen(ops[i].s);
    if (!strncmp(p, ops[i].s, n)) {
      *len = (int)n;
      *op = (cx_op)ops[i].op;
      return ops[i].op < 0 ? -1 : ops[i].prec;
    }
  }
  return 0;
}

/* Operands and operators of precedence min and above, left to right. */
static void cx_binary(cx_reader *r, int min)
{
  cx_unary(r);
  while (!r->bad) {
    cx_skip(r);
    int len;
    cx_op op;
    int prec = cx_binary_at(r->p, &len, &op);
    if (prec < 0) r->bad = 1;
    if (prec <= 0 || prec < min) return;
    r->p += len;
    cx_binary(r, prec + 1);
    cx_op1(r, op, 2);
  }
}

/* c ? a : b, right to left. */
static void cx_cond(cx_reader *r)
{
  if (++r->nesting > CX_NESTING) r->bad = 1;
  cx_binary(r, 1);
  cx_skip(r);
  if (!r->bad && *r->p == '?') {
    r->p++;
    cx_cond(r);
    cx_expect(r, ':');
    if (!r->bad) cx_cond(r);
    cx_op1(r, CX_SELECT, 3);
  }
  r->nesting--;
}

int fe_cexpr_read(const char *e, fe_cexpr **out)
{
  *out = NULL;
  fe_cexpr *c = calloc(1, sizeof *c);
  if (!c) return 1;
  cx_reader r = {e, c, 0, 0, 0, 0};
  cx_cond(&r);
  cx_skip(&r);
  if (r.bad || *r.p || r.depth != 1 || r.max_depth > CX_STACK) {
    fe_cexpr_free(c);
    return 1;
  }
  *out = c;
  return 0;
}

/* Points a batch: every instruction runs over a batch, so dispatch is paid once a batch. */
enum { CX_BATCH = 32 };

/* The values at n <= CX_BATCH points. */
static void cx_run(const fe_cexpr *c, int n, const double *x, const double *a, const double *k, double *out)
{
  double s[CX_STACK][CX_BATCH];
  int top = 0; /* rows s[0 .. top - 1] */
  for (int i = 0; i < c->n; i++) {
    const cx_instr *in = &c->code[i];
    double *t1 = top >= 1 ? s[top - 1] : NULL, *t2 = top >= 2 ? s[top - 2] : NULL;
    double *t3 = top >= 3 ? s[top - 3] : NULL;
    switch ((cx_op)in->op) {
    case CX_NUM:
      for (int j = 0; j < n; j++) s[top][j] = in->value;
      top++;
      break;
    case CX_VAR:
      if (in->var == FE_V_X) {
        for (int j = 0; j < n; j++) s[top][j] = x[3 * j + in->index];
      } else {
        const double *v = in->var == FE_V_A ? a : k;
        for (int j = 0; j < n; j++) s[top][j] = v ? v[in->index] : NAN;
      }
      top++;
      break;
    case CX_NEG: for (int j = 0; j < n; j++) t1[j] = -t1[j]; break;
    case CX_NOT: for (int j = 0; j < n; j++) t1[j] = !t1[j]; break;
    case CX_FLOAT: for (int j = 0; j < n; j++) t1[j] = (float)t1[j]; break;
    case CX_CALL1: for (int j = 0; j < n; j++) t1[j] = in->f1(t1[j]); break;
    case CX_CALL2: for (int j = 0; j < n; j++) t2[j] = in->f2(t2[j], t1[j]); top--; break;
    case CX_SELECT: for (int j = 0; j < n; j++) t3[j] = t3[j] != 0 ? t2[j] : t1[j]; top -= 2; break;
    case CX_ADD: for (int j = 0; j < n; j++) t2[j] += t1[j]; top--; break;
    case CX_SUB: for (int j = 0; j < n; j++) t2[j] -= t1[j]; top--; break;
    case CX_MUL: for (int j = 0; j < n; j++) t2[j] *= t1[j]; top--; break;
    case CX_DIV: for (int j = 0; j < n; j++) t2[j] /= t1[j]; top--; break;
    case CX_LT: for (int j = 0; j < n; j++) t2[j] = t2[j] < t1[j]; top--; break;
    case CX_LE: for (int j = 0; j < n; j++) t2[j] = t2[j] <= t1[j]; top--; break;
    case CX_GT: for (int j = 0; j < n; j++) t2[j] = t2[j] > t1[j]; top--; break;
    case CX_GE: for (int j = 0; j < n; j++) t2[j] = t2[j] >= t1[j]; top--; break;
    case CX_EQ: for (int j = 0; j < n; j++) t2[j] = t2[j] == t1[j]; top--; break;
    case CX_NE: for (int j = 0; j < n; j++) t2[j] = t2[j] != t1[j]; top--; break;
    case CX_AND: for (int j = 0; j < n; j++) t2[j] = t2[j] != 0 && t1[j] != 0; top--; break;
    case CX_OR: for (int j = 0; j < n; j++) t2[j] = t2[j] != 0 || t1[j] != 0; top--; break;
    }
  }
  for (int j = 0; j < n; j++) out[j] = top == 1 ? s[0][j] : NAN;
}

void fe_cexpr_eval_points(const fe_cexpr *c, int n, const double *x, const double *a, const double *k,
                          double *out)
{
  for (int j = 0; j < n; j += CX_BATCH)
    cx_run(c, n - j < CX_BATCH ? n - j : CX_BATCH, x ? x + 3 * (size_t)j : NULL, a, k, out + j);
}

double fe_cexpr_eval(const fe_cexpr *c, const double *x, const double *a, const double *k)
{
  double v;
  cx_run(c, 1, x, a, k, &v);
  return v;
}

int fe_cexpr_reads(const fe_cexpr *c, fe_var v) { return (unsigned)v < FE_NVARS ? c->reads[v] : 0; }

void fe_cexpr_free(fe_cexpr *c)
{
  if (!c) return;
  free(c->code);
  free(c);
}
