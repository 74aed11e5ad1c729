/* felab expression graphs: emission as C and printing as mathematics, and the coefficients
 * the host evaluates before a solve (design in expr.h). */
#include "engine/physics/expr-private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    fe_strbuf_printf(b, " %s ", fe_xop_name((fe_xop)x->op));
    emit_const(e, e->g->nodes[x->b].value, b, 1);
    fe_strbuf_append(b, ")");
    return;
  }
  emit_operand(e, x->a, p, 0, b);
  fe_strbuf_printf(b, e->math && x->op == FE_X_MUL ? "*" : " %s ", fe_xop_name((fe_xop)x->op));
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
    fe_strbuf_printf(b, " %s ", fe_xop_name((fe_xop)x->op));
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
