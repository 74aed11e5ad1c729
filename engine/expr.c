/* felab expression graphs (design in expr.h).
 *
 * Nodes live in one array; a hash table from a node's contents to its id makes every
 * constructor "find or add", so equal subexpressions are one node (common-subexpression
 * elimination by construction). The simplifying constructors are the only way in. */
#include "engine/expr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/physics.h"

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
  case FE_X_RAW: fe_strbuf_printf(b, "(%s)", g->raw[x->index]); return;
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
