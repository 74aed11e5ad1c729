/* felab expression graphs: differentiation, by the chain rule through the simplifying
 * constructors (design in expr.h). */
#include "engine/physics/expr-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"

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
