/* Private to engine/physics/expr*.c (expr.c, expr-diff.c, expr-count.c, expr-emit.c): the
 * expression graph's struct and the small readers of its nodes they share. Not part of the
 * API (that is engine/physics/expr.h). */
#ifndef FE_EXPR_PRIVATE_H
#define FE_EXPR_PRIVATE_H

#include <math.h>

#include "engine/physics/expr.h"

struct fe_xgraph {
  fe_xnode *nodes;
  unsigned short *deps; /* bit v: the node reads variable kind v */
  int n, cap;
  int *hash; /* open addressing: node id or -1; hcap a power of two */
  int hcap;
  char **raw; /* texts of raw C leaves */
  int nraw, rawcap;
};

/* Whether node n is a constant (its value into *v). */
static inline int is_const(const fe_xgraph *g, int n, double *v)
{
  if (n < 0 || g->nodes[n].op != FE_X_CONST) return 0;
  if (v) *v = g->nodes[n].value;
  return 1;
}

/* Whether x is a power by an integer constant of at most 8 (the exponent into *e). */
static inline int int_exponent(const fe_xgraph *g, const fe_xnode *x, int *e)
{
  double v;
  if (x->op != FE_X_POW || !is_const(g, x->b, &v) || v != floor(v) || fabs(v) > 8) return 0;
  *e = (int)v;
  return 1;
}

/* Mark the nodes reachable from the roots (marks sized g->n, zeroed by the caller). */
static inline void mark(const fe_xgraph *g, int n, unsigned char *marks)
{
  if (n < 0 || marks[n]) return;
  marks[n] = 1;
  mark(g, g->nodes[n].a, marks);
  mark(g, g->nodes[n].b, marks);
  mark(g, g->nodes[n].c, marks);
}

#endif
