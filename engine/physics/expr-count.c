/* felab expression graphs: what a graph costs (flops, non-FMA operations) and its degree in
 * x (design in expr.h). */
#include "engine/physics/expr-private.h"

#include <stdlib.h>
#include <string.h>

#include "engine/physics/physics.h"

/* ---- counting ---- */

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
