/* felab: C expressions typed by a user (design in expr.h): their numbers made reals, and
 * their reading and evaluation on the host. */
#include "engine/physics/expr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


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

/* ---- bounds over a box: interval arithmetic on the same code ---- */

/* The interval of f over [l, h] for the math.h functions of one argument whose range (or
 * monotony) bounds it; 0 where this does not say (tan, tgamma, a domain not all valid). */
static int cx_bound1(double (*f)(double), double l, double h, double *lo, double *hi)
{
  double (*rising[])(double) = {exp, exp2, expm1, cbrt, sinh, asinh, atan, tanh, erf,
                                floor, ceil, round, trunc};
  for (size_t i = 0; i < sizeof rising / sizeof rising[0]; i++)
    if (f == rising[i]) return *lo = f(l), *hi = f(h), 1;
  if (f == log || f == log2 || f == log10 || f == sqrt) { /* on their domain only */
    if (!(l > 0) && !(f == sqrt && l >= 0)) return 0;
    return *lo = f(l), *hi = f(h), 1;
  }
  if (f == log1p) return l > -1 ? (*lo = f(l), *hi = f(h), 1) : 0;
  if (f == erfc) return *lo = erfc(h), *hi = erfc(l), 1;
  if (f == sin || f == cos) return *lo = -1, *hi = 1, 1;
  if (f == asin) return *lo = -M_PI_2, *hi = M_PI_2, 1; /* outside [-1, 1]: NaN, no bound to pass */
  if (f == acos) return *lo = 0, *hi = M_PI, 1;
  if (f == acosh) return l >= 1 ? (*lo = acosh(l), *hi = acosh(h), 1) : 0;
  if (f == atanh) return l > -1 && h < 1 ? (*lo = atanh(l), *hi = atanh(h), 1) : 0;
  const double m = fmax(fabs(l), fabs(h)), z = l <= 0 && h >= 0 ? 0 : fmin(fabs(l), fabs(h));
  if (f == fabs) return *lo = z, *hi = m, 1;
  if (f == cosh) return *lo = cosh(z), *hi = cosh(m), 1;
  return 0;
}

/* The same for the functions of two. */
static int cx_bound2(double (*f)(double, double), const double a[2], const double b[2],
                     double *lo, double *hi)
{
  const double ma = fmax(fabs(a[0]), fabs(a[1])), mb = fmax(fabs(b[0]), fabs(b[1]));
  if (f == fmin || f == fmax) return *lo = f(a[0], b[0]), *hi = f(a[1], b[1]), 1;
  if (f == atan2) return *lo = -M_PI, *hi = M_PI, 1;
  if (f == fmod || f == copysign) return *lo = -ma, *hi = ma, 1;
  if (f == fdim) return *lo = 0, *hi = fmax(0, a[1] - b[0]), 1;
  if (f == hypot) return *lo = 0, *hi = hypot(ma, mb), 1;
  if (f == pow && a[0] > 0) { /* monotone in each argument: its corners */
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < 4; i++) {
      const double v = pow(a[i & 1], b[i >> 1]);
      *lo = fmin(*lo, v), *hi = fmax(*hi, v);
    }
    return 1;
  }
  return 0;
}

int fe_cexpr_bound(const fe_cexpr *c, const double xlo[3], const double xhi[3], const double *alo,
                   const double *ahi, const double *k, double *lo, double *hi)
{
  double l[CX_STACK], h[CX_STACK];
  int top = 0;
  for (int i = 0; i < c->n; i++) {
    const cx_instr *in = &c->code[i];
    double *l1 = top >= 1 ? l + top - 1 : NULL, *h1 = top >= 1 ? h + top - 1 : NULL;
    double *l2 = top >= 2 ? l + top - 2 : NULL, *h2 = top >= 2 ? h + top - 2 : NULL;
    double p[4], t;
    switch ((cx_op)in->op) {
    case CX_NUM: l[top] = h[top] = in->value, top++; break;
    case CX_VAR:
      if (in->var == FE_V_X) l[top] = xlo[in->index], h[top] = xhi[in->index];
      else if (in->var == FE_V_A && alo && ahi) l[top] = alo[in->index], h[top] = ahi[in->index];
      else if (in->var == FE_V_K && k) l[top] = h[top] = k[in->index];
      else return 0;
      top++;
      break;
    case CX_NEG: t = *l1, *l1 = -*h1, *h1 = -t; break;
    case CX_NOT: case CX_LT: case CX_LE: case CX_GT: case CX_GE: case CX_EQ: case CX_NE:
    case CX_AND: case CX_OR:
      top -= in->op != CX_NOT;
      l[top - 1] = 0, h[top - 1] = 1;
      break;
    case CX_FLOAT: *l1 = (float)*l1, *h1 = (float)*h1; break;
    case CX_CALL1: if (!cx_bound1(in->f1, *l1, *h1, l1, h1)) return 0; break;
    case CX_CALL2: {
      const double a[2] = {*l2, *h2}, b[2] = {*l1, *h1};
      if (!cx_bound2(in->f2, a, b, l2, h2)) return 0;
      top--;
      break;
    }
    case CX_SELECT: /* either branch */
      l[top - 3] = fmin(*l2, *l1), h[top - 3] = fmax(*h2, *h1), top -= 2;
      break;
    case CX_ADD: *l2 += *l1, *h2 += *h1, top--; break;
    case CX_SUB: *l2 -= *h1, *h2 -= *l1, top--; break;
    case CX_DIV:
      if (!(*l1 > 0 || *h1 < 0)) return 0; /* a divisor that may be 0 */
      p[0] = *l2 / *l1, p[1] = *l2 / *h1, p[2] = *h2 / *l1, p[3] = *h2 / *h1;
      goto corners;
    case CX_MUL:
      p[0] = *l2 * *l1, p[1] = *l2 * *h1, p[2] = *h2 * *l1, p[3] = *h2 * *h1;
    corners:
      *l2 = fmin(fmin(p[0], p[1]), fmin(p[2], p[3]));
      *h2 = fmax(fmax(p[0], p[1]), fmax(p[2], p[3]));
      for (int j = 0; j < 4; j++)
        if (isnan(p[j])) return 0; /* 0 x inf */
      top--;
      break;
    }
  }
  if (top != 1 || !isfinite(l[0]) || !isfinite(h[0])) return 0;
  *lo = l[0], *hi = h[0];
  return 1;
}

int fe_cexpr_reads(const fe_cexpr *c, fe_var v) { return (unsigned)v < FE_NVARS ? c->reads[v] : 0; }

int fe_c_expression_safe(const char *e, int nx, int na, int nk)
{
  fe_cexpr *c;
  if (!e || fe_cexpr_read(e, &c)) return 0;
  int safe = c->reads[FE_V_X] <= nx && c->reads[FE_V_A] <= na && c->reads[FE_V_K] <= nk;
  fe_cexpr_free(c);
  return safe;
}

void fe_cexpr_free(fe_cexpr *c)
{
  if (!c) return;
  free(c->code);
  free(c);
}
