/* felab expression graphs: what traced Lua physics becomes.
 *
 * A graph is a DAG of scalar nodes, hash-consed: making a node that already exists returns
 * the existing one, so common subexpressions are shared by construction. Every constructor
 * simplifies locally (constant folding, x + 0, 1 * x, 0 * x, --x, x - x, canonical operand
 * order of + and *), so derivatives come out without the usual debris. Node ids grow from
 * the leaves up: a node's operands always have smaller ids, which gives the topological
 * order for emission for free.
 *
 * The graph knows the variables a pointwise physics reads (the field u and its gradient du,
 * the point x, per-cell constants a, named constants k, auxiliary fields and their
 * gradients, and the Jacobian's direction w, dw) and opaque C expressions ("raw" leaves, of x
 * and a only). From a set of roots it counts flops (each distinct node once: the count of
 * the code it emits), emits C statements with temporaries for shared nodes, and prints
 * the roots as mathematics.
 *
 * Flop convention (docs/physics.md): + - * / and negation count 1; a call of sin cos tan exp
 * log sqrt fabs tanh pow fmin fmax counts 1; a comparison counts 1, a select 0; x^n for an
 * integer n is emitted as multiplications by repeated squaring and counts those (x^2: 1,
 * x^3: 2, x^4: 2, a negative n one division more), x^0.5 is sqrt, x^-0.5 is 1/sqrt; a raw C
 * leaf counts what fe_count_flops finds in it. */
#ifndef FE_EXPR_H
#define FE_EXPR_H

#include "engine/core/strbuf.h"

typedef enum {
  FE_X_CONST, FE_X_VAR, FE_X_RAW, /* leaves */
  FE_X_ADD, FE_X_SUB, FE_X_MUL, FE_X_DIV, FE_X_POW, FE_X_MIN, FE_X_MAX,
  FE_X_LT, FE_X_LE, FE_X_GT, FE_X_GE, FE_X_EQ, FE_X_NE, /* 1 or 0 */
  FE_X_NEG, FE_X_SIN, FE_X_COS, FE_X_TAN, FE_X_EXP, FE_X_LOG, FE_X_SQRT, FE_X_ABS, FE_X_TANH,
  FE_X_SELECT, /* a ? b : c */
  FE_X_NOPS
} fe_xop;

/* What a variable leaf reads. */
typedef enum {
  FE_V_U,    /* u[i]: component i of the field */
  FE_V_DU,   /* du[i*DIM + d]: d u_i / d x_d */
  FE_V_X,    /* x[d] */
  FE_V_A,    /* a[i]: per-cell constant i (from the cell's region) */
  FE_V_K,    /* k[i]: named constant i (changes between calls without recompiling) */
  FE_V_F,    /* f[i]: value i of the auxiliary fields at the point */
  FE_V_DF,   /* df[i*DIM + d]: their gradients */
  FE_V_W,    /* w[i]: the Jacobian action's direction */
  FE_V_DW,   /* dw[i*DIM + d] */
  FE_NVARS
} fe_var;

typedef struct fe_xnode {
  unsigned char op;    /* fe_xop */
  unsigned char var;   /* fe_var of a FE_X_VAR */
  int index;           /* variable index, or the raw leaf's index into the graph's texts */
  int a, b, c;         /* operands (-1 when absent) */
  double value;        /* FE_X_CONST */
} fe_xnode;

typedef struct fe_xgraph fe_xgraph;

int fe_xgraph_create(fe_xgraph **out);
void fe_xgraph_free(fe_xgraph *g);
int fe_xgraph_size(const fe_xgraph *g);
const fe_xnode *fe_xgraph_node(const fe_xgraph *g, int id);

/* Constructors: each returns a node id, or -1 with the error set (out of memory, or an
 * operation the graph refuses, such as a raw leaf that would be differentiated). */
int fe_x_const(fe_xgraph *g, double v);
int fe_x_var(fe_xgraph *g, fe_var v, int index);
/* An opaque C expression of x[0..2] and a[..] (never of u): its text, copied; printed as
 * typed, emitted with its numbers as reals (fe_c_reals below). */
int fe_x_raw(fe_xgraph *g, const char *c_expr);
int fe_x_unary(fe_xgraph *g, fe_xop op, int a);
int fe_x_binary(fe_xgraph *g, fe_xop op, int a, int b);
int fe_x_select(fe_xgraph *g, int cond, int a, int b);

/* Whether node n is the constant v. */
int fe_x_is_const(const fe_xgraph *g, int n, double v);
/* Whether node n reads variable kind v (any index). */
int fe_x_depends(fe_xgraph *g, int n, fe_var v);

/* The derivative of node n with respect to variable (v, index), simplified. */
int fe_x_diff(fe_xgraph *g, int n, fe_var v, int index);

/* The value of node n with variables vals[v][index] (raw leaves evaluate to NaN): for tests
 * against finite differences and for printing. */
double fe_x_eval(const fe_xgraph *g, int n, const double *const *vals);

/* Flops of computing all n roots (each distinct node once). */
double fe_x_flops(const fe_xgraph *g, const int *roots, int n);
/* Of those, the ones that do not issue as an FMA: divisions (a negative integer power's
 * one), square roots, other powers, exp, log, the trigonometric functions (raw leaves:
 * fe_count_nonfma). */
double fe_x_nonfma(const fe_xgraph *g, const int *roots, int n);
/* Polynomial degree of node n in x (non-polynomial functions of x count their argument's
 * degree + 2; a raw leaf counts its degree where it is a polynomial of x written with numbers,
 * + - *, / by numbers and parentheses, else 2 where it reads x). For choosing quadrature. var_degree: NULL,
 * or for each variable kind NULL or the degree in x of each index of it (an auxiliary
 * field's values and gradients are polynomials of the field's order); a kind without one
 * counts 1 for x and 0 for every other variable. */
int fe_x_degree_x(const fe_xgraph *g, int n, const int *const *var_degree);

/* C statements computing the roots: `lhs[i] = ...;` for each root, with `const real tN`
 * temporaries for nodes used more than once. Roots that are the constant zero are skipped
 * when skip_zero is set. indent: spaces before each line. */
void fe_x_emit_c(const fe_xgraph *g, const int *roots, const char *const *lhs, int n,
                 int skip_zero, int indent, fe_strbuf *b);
/* Node n as mathematics, e.g. "kappa*u_x + sin(x)^2". names[v] gives each variable kind's
 * printing function; NULL uses the C names. */
typedef void (*fe_var_namer)(void *ctx, fe_var v, int index, fe_strbuf *b);
void fe_x_print(const fe_xgraph *g, int n, fe_var_namer namer, void *ctx, fe_strbuf *b);

const char *fe_xop_name(fe_xop op);

/* The raw leaves the n roots reach, in the order of their ids: their texts (the graph's own)
 * into texts[0 .. max-1]; returns how many there are (more than max: only max written). */
int fe_x_raw_reached(const fe_xgraph *g, const int *roots, int n, const char **texts, int max);
/* The coefficients of the n roots: the largest subexpressions that depend on x, a and k alone
 * (not on u, du, fields or w), reached as an operand of a node that does depend on them or as
 * a root; a plain variable and a finite constant are left out (nothing to evaluate). Their ids
 * into ids[0 .. max-1]; returns how many there are. */
int fe_x_coefficients(const fe_xgraph *g, const int *roots, int n, int *ids, int max);
/* Node n as one C expression without temporaries (raw leaves as fe_c_reals writes them), or -1
 * when it would be longer than max_nodes nodes written out (a shared node counts each time). */
int fe_x_print_c(const fe_xgraph *g, int n, int max_nodes, fe_strbuf *b);

/* ---- C expressions typed by a user (coefficients: physics.cexpr, physics.poisson's kappa)
 * A coefficient is one C expression of x[0..2], a[..] and k[..], and its numbers are reals:
 * "1/2" is 0.5, "1/0" is inf (no integer division, no trap). An integer stays an integer only
 * where C needs one: inside [ ] (an index: x[0], a[i + 1]) and as an operand of % << >> & | ^ ~.
 * Raw C bodies (statements, physics.new{f0 = "..."}) are C as written and are not rewritten. */

/* Append C expression e to b with each integer literal outside those places written as a real:
 * "1/2 + x[0]" becomes "(real)1/(real)2 + x[0]" (the cast keeps a float kernel in float);
 * decimal, octal and hex integers with any suffix; 1e3, 0.5, .5, 0x1p3 and names (k2, log10)
 * are left as they are. */
void fe_c_reals(const char *e, fe_strbuf *b);

/* A coefficient read for evaluation on the host, as its kernel computes it (in double). */
typedef struct fe_cexpr fe_cexpr;
/* Read C expression e: numbers (reals, as above), x[d], a[i] and k[i] with literal indices,
 * + - * / ! < <= > >= == != && || ?: and parentheses, the casts (real) (double) (float),
 * M_PI and the other M_ constants, INFINITY, NAN, and the math.h functions of one or two
 * doubles (sin ... atan2, pow, fmin, fmax, fabs, floor, erf, ...). Returns 0 and *out, or
 * 1 and *out NULL when e uses anything else (an integer cast or operator, another name, a
 * call of another function): such an expression is compiled as written but not evaluated here.
 * No error is set; out of memory is 1 too. */
int fe_cexpr_read(const char *e, fe_cexpr **out);
/* Its value at the point x[3] with per-cell constants a and named constants k (either may be
 * NULL when it does not read them). Thread-safe. */
double fe_cexpr_eval(const fe_cexpr *c, const double *x, const double *a, const double *k);
/* The same at n points x[3 * j ..] into out[j] (32 points an instruction: much faster). */
void fe_cexpr_eval_points(const fe_cexpr *c, int n, const double *x, const double *a, const double *k,
                          double *out);
/* Whether it reads variable kind v (FE_V_X, FE_V_A or FE_V_K), and 1 + the largest index it
 * reads of it (0: none). */
int fe_cexpr_reads(const fe_cexpr *c, fe_var v);
void fe_cexpr_free(fe_cexpr *c);
/* An interval [*lo, *hi] holding its value at every x in the box [xlo, xhi] with every a[i]
 * in [alo[i], ahi[i]] (NULL: it reads none) and the named constants k: interval arithmetic on
 * its code (each branch of ?: taken; a comparison 0 or 1; the math.h functions by their range
 * or monotony). Returns 1, or 0 where it cannot say (a divisor or a log's argument that may
 * reach 0, tan, pow of a base that may be 0 or less, an infinite or NaN bound): then only the
 * points can tell.
 * Bounds are rounded to nearest, not outward: a caller that compares them with a threshold
 * leaves a margin of more than a few units in the last place. */
int fe_cexpr_bound(const fe_cexpr *c, const double xlo[3], const double xhi[3], const double *alo,
                   const double *ahi, const double *k, double *lo, double *hi);
/* Whether C expression e is within fe_cexpr_read's reach and reads no more than x[0 .. nx-1],
 * a[0 .. na-1] and k[0 .. nk-1]: then it touches no memory but those and calls only math.h's
 * functions, and its kernel cannot fault (no trial run: FE_USER_C is for the rest). */
int fe_c_expression_safe(const char *e, int nx, int na, int nk);

#endif
