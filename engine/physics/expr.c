/* felab expression graphs (design in expr.h).
 *
 * Nodes live in one array; a hash table from a node's contents to its id makes every
 * constructor "find or add", so equal subexpressions are one node (common-subexpression
 * elimination by construction). The simplifying constructors are the only way in. Here: the
 * graph, its constructors and its evaluation; its derivatives are in expr-diff.c, its costs
 * and degree in expr-count.c, its printing in expr-emit.c; C expressions a user types, read
 * and evaluated on the host, in expr-cexpr.c. */
#include "engine/physics/expr.h"
#include "engine/physics/expr-private.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/physics.h"

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
