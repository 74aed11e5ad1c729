/* felab physics: the built-in library as C statement bodies (docs in physics.h). Traced Lua
 * physics (issue 5) will produce the same structure from an expression graph. */
#include "engine/physics.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/strbuf.h"

/* Whether the n characters at s are a C keyword that takes a parenthesis (not a call). */
static int is_keyword(const char *s, size_t n)
{
  static const char *const kw[] = {"for", "if", "while", "switch", "return", "sizeof"};
  for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
    if (strlen(kw[i]) == n && !strncmp(s, kw[i], n)) return 1;
  return 0;
}

/* The calls that cost no more than an FMA: compares, signs, rounding. */
static int cheap_call(const char *s, size_t n)
{
  static const char *const cheap[] = {"fabs", "fabsf", "fmin", "fminf", "fmax", "fmaxf", "abs",
                                      "floor", "floorf", "ceil", "ceilf", "copysign", "min",
                                      "max"};
  for (size_t i = 0; i < sizeof cheap / sizeof cheap[0]; i++)
    if (strlen(cheap[i]) == n && !strncmp(s, cheap[i], n)) return 1;
  return 0;
}

/* fe_count_flops, or (nonfma) of those only the divisions and the costly calls. */
static double count_ops(const char *c, int nonfma)
{
  double n = 0;
  for (const char *p = c; *p; p++) {
    if (*p == '[') { /* indexing is addressing, not arithmetic */
      int depth = 1;
      while (p[1] && depth) {
        p++;
        depth += (*p == '[') - (*p == ']');
      }
      continue;
    }
    if (isdigit((unsigned char)*p) || *p == '.') { /* a literal, exponent signs included */
      while (isalnum((unsigned char)p[1]) || p[1] == '.' ||
             ((p[1] == '+' || p[1] == '-') && (*p == 'e' || *p == 'E')))
        p++;
      continue;
    }
    if (isalpha((unsigned char)*p) || *p == '_') { /* a name; followed by '(' it is a call */
      const char *name = p;
      while (isalnum((unsigned char)p[1]) || p[1] == '_') p++;
      size_t len = (size_t)(p + 1 - name);
      const char *q = p + 1;
      while (*q == ' ') q++;
      if (*q == '(' && !is_keyword(name, len) && !(nonfma && cheap_call(name, len))) n += 1;
      continue;
    }
    if ((*p == '+' && p[1] == '+') || (*p == '-' && (p[1] == '-' || p[1] == '>'))) {
      p++; /* ++ and -- step loop counters (integers), -> is a member */
      continue;
    }
    if (*p == '/' || (!nonfma && (*p == '+' || *p == '-' || *p == '*'))) n += 1;
  }
  return n;
}

double fe_count_flops(const char *c) { return count_ops(c, 0); }

double fe_count_nonfma(const char *c) { return count_ops(c, 1); }

/* Whether a C expression reads the coordinates x[..]. */
static int reads_x(const char *e)
{
  for (const char *p = strchr(e, 'x'); p; p = strchr(p + 1, 'x')) {
    int before_ok = p == e || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    const char *q = p + 1;
    while (*q == ' ') q++;
    if (before_ok && *q == '[') return 1;
  }
  return 0;
}

/* Whether an expression is the literal zero. */
static int is_zero(const char *e)
{
  char *end;
  double v = strtod(e, &end);
  while (*end == ' ') end++;
  return *end == '\0' && v == 0.0;
}

static char *dup_printf(const char *fmt, const char *a)
{
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, fmt, a, a);
  char *s = NULL;
  if (fe_strbuf_finish(&b, &s)) return NULL;
  return s;
}

int fe_physics_poisson(const char *kappa, const char *source, fe_physics **out)
{
  if (!kappa || !*kappa) kappa = "1";
  if (!source || !*source) source = "0";
  fe_physics *p;
  FE_CALLOC(p, 1, "physics");
  snprintf(p->name, sizeof p->name, "poisson");
  p->ncomp = 1;
  /* residual: integral of kappa grad u . grad v - source v */
  if (!is_zero(source)) p->f0 = dup_printf("f0[0] = -(%s);", source);
  p->f1 = dup_printf("const real kappa = (%s);\n    FE_UNROLL for (int d = 0; d < DIM; d++) f1[d] = kappa * du[d];",
                     kappa);
  p->df1 = dup_printf("const real kappa = (%s);\n    FE_UNROLL for (int d = 0; d < DIM; d++) df1[d] = kappa * dw[d];",
                      kappa);
  fe_strbuf desc = {0};
  fe_strbuf_printf(&desc, "-div(kappa grad u) = s, kappa = %s, s = %s", kappa, source);
  if ((!is_zero(source) && !p->f0) || !p->f1 || !p->df1 || fe_strbuf_finish(&desc, &p->description)) {
    fe_physics_free(p);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  p->uses_x = reads_x(kappa) || reads_x(source);
  p->nonlinear = 0;
  p->symmetric = 1; /* df1 = kappa dw: M = diag(0, kappa I) */
  /* an expression of x counts as a quadratic for the choice of quadrature */
  p->degree_f0 = reads_x(source) ? 2 : 0;
  p->degree_f1 = p->degree_df1 = reads_x(kappa) ? 2 : 0;
  /* the negation of a constant source is folded by the compiler; of a field it is a flop */
  double fs = p->f0 ? fe_count_flops(source) + (reads_x(source) ? 1 : 0) : 0;
  double fk = fe_count_flops(kappa);
  p->flops_f = fs + fk + 3;  /* kappa, three products */
  p->flops_df = fk + 3;
  p->nonfma_f = (p->f0 ? fe_count_nonfma(source) : 0) + fe_count_nonfma(kappa);
  p->nonfma_df = fe_count_nonfma(kappa);
  *out = p;
  return 0;
}

int fe_physics_poisson_regions(const char *const *names, const double *kappa, int n,
                               const char *source, fe_physics **out)
{
  FE_ASSERT(n > 0, FE_ERR_ARG, "physics.poisson: the kappa table names no region");
  fe_physics *p;
  FE_CHECK(fe_physics_poisson("a[0]", source, &p));
  p->naux = 1;
  p->nregions = n;
  p->region_names = calloc((size_t)n, sizeof(char *));
  p->region_values = malloc(sizeof(double) * (size_t)n);
  int ok = p->region_names && p->region_values;
  for (int i = 0; ok && i < n; i++) {
    p->region_names[i] = strdup(names[i]);
    p->region_values[i] = kappa[i];
    ok = p->region_names[i] != NULL;
  }
  free(p->description);
  fe_strbuf desc = {0};
  fe_strbuf_printf(&desc, "-div(kappa grad u) = s, kappa per region (");
  for (int i = 0; i < n; i++) fe_strbuf_printf(&desc, "%s%s = %g", i ? ", " : "", names[i], kappa[i]);
  fe_strbuf_printf(&desc, "), s = %s", source && *source ? source : "0");
  p->description = NULL;
  if (!ok || fe_strbuf_finish(&desc, &p->description)) {
    fe_physics_free(p);
    FE_ERROR(FE_ERR_MEM, "out of host memory");
  }
  *out = p;
  return 0;
}

static char **copy_names(int n, const char *const *names)
{
  char **c = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; c && i < n; i++)
    if (!(c[i] = strdup(names[i]))) {
      while (i--) free(c[i]);
      free(c);
      return NULL;
    }
  return c;
}

static void free_names(char **names, int n)
{
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

int fe_physics_set_names(fe_physics *p, int naux, const char *const *aux_names, int nconst,
                         const char *const *const_names, const double *const_values)
{
  free_names(p->aux_names, p->naux);
  free_names(p->const_names, p->nconst);
  free(p->const_values);
  p->aux_names = p->const_names = NULL;
  p->const_values = NULL;
  p->naux = naux;
  p->nconst = nconst;
  p->aux_names = naux ? copy_names(naux, aux_names) : NULL;
  p->const_names = nconst ? copy_names(nconst, const_names) : NULL;
  p->const_values = malloc(sizeof(double) * (size_t)(nconst + 1));
  FE_ASSERT((!naux || p->aux_names) && (!nconst || p->const_names) && p->const_values, FE_ERR_MEM,
            "out of host memory for the physics' names");
  for (int i = 0; i < nconst; i++) p->const_values[i] = const_values[i];
  p->const_version++;
  return 0;
}

int fe_physics_set_constant(fe_physics *p, const char *name, double value)
{
  for (int i = 0; i < p->nconst; i++)
    if (!strcmp(p->const_names[i], name)) {
      p->const_values[i] = value;
      p->const_version++;
      return 0;
    }
  fe_strbuf known = {0};
  for (int i = 0; i < p->nconst; i++) fe_strbuf_printf(&known, "%s%s", i ? ", " : "", p->const_names[i]);
  int rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                        "physics %s has no constant '%s' (its constants: %s)", p->name, name,
                        known.s ? known.s : "none");
  fe_strbuf_free(&known);
  return rc;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A new physics with p's terms, tables and fields whose Jacobian action is p's adjoint. */
static int adjoint_make(const fe_physics *p, fe_physics **out)
{
  fe_physics *q;
  FE_CALLOC(q, 1, "adjoint physics");
  snprintf(q->name, sizeof q->name, "%.29s^T", p->name);
  q->ncomp = p->ncomp;
  q->dim = p->dim;
  q->f0 = dup_or_null(p->f0);
  q->f1 = dup_or_null(p->f1);
  q->df0 = dup_or_null(p->adf0);
  q->df1 = dup_or_null(p->adf1);
  int ok = (!p->f0 || q->f0) && (!p->f1 || q->f1) && (!p->adf0 || q->df0) && (!p->adf1 || q->df1);
  for (int i = 0; i < 4; i++) ok = ok && (!p->ag[i] || (q->g[i] = strdup(p->ag[i])));
  q->uses_x = p->uses_x;
  q->nonlinear = p->nonlinear; /* the same blocks, transposed: the same dependence on u */
  q->degree_f0 = p->degree_f0;
  q->degree_f1 = p->degree_f1;
  q->degree_df0 = p->degree_adf0;
  q->degree_df1 = p->degree_adf1;
  q->flops_f = p->flops_f;
  q->flops_df = p->flops_adf;
  q->nonfma_f = p->nonfma_f;
  q->nonfma_df = p->nonfma_adf;
  fe_strbuf desc = {0};
  fe_strbuf_printf(&desc, "the transposed Jacobian of %s: %s", p->name,
                   p->description ? p->description : "");
  ok = !fe_strbuf_finish(&desc, &q->description) && ok;
  q->nregions = p->nregions;
  if (p->nregions) q->region_names = copy_names(p->nregions, (const char *const *)p->region_names);
  q->region_values = malloc(sizeof(double) * (size_t)(p->nregions * p->naux + 1));
  ok = ok && (!p->nregions || q->region_names) && q->region_values;
  for (int i = 0; ok && i < p->nregions * p->naux; i++) q->region_values[i] = p->region_values[i];
  q->nfields = p->nfields;
  for (int i = 0; i < p->nfields; i++) {
    ok = ok && (q->field_names[i] = strdup(p->field_names[i]));
    q->field_ncomp[i] = p->field_ncomp[i];
  }
  q->uses_fields = p->uses_fields;
  int rc = ok ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                 "out of host memory for the adjoint of physics %s", p->name);
  if (!rc)
    rc = fe_physics_set_names(q, p->naux, (const char *const *)p->aux_names, p->nconst,
                              (const char *const *)p->const_names, p->const_values);
  if (rc) {
    fe_physics_free(q);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = q;
  return 0;
}

int fe_physics_adjoint(const fe_physics *p, const fe_physics **out)
{
  *out = NULL;
  FE_ASSERT(p->has_adjoint, FE_ERR_UNAVAILABLE,
            "physics '%s' is written in C (not traced): its transposed Jacobian is unknown; "
            "write it with physics.new{f0 = function ..., f1 = function ...} so that felab can "
            "derive and transpose it", p->name);
  fe_physics *q = p->adjoint;
  if (!q) {
    FE_CHECK(adjoint_make(p, &q));
    ((fe_physics *)p)->adjoint = q; /* a cache: p itself does not change */
  }
  /* what may change after a physics is made: its named constants and bound fields */
  for (int i = 0; i < p->nconst; i++) q->const_values[i] = p->const_values[i];
  q->const_version = p->const_version;
  for (int i = 0; i < p->nfields; i++) {
    q->field_vec[i] = p->field_vec[i];
    q->field_space[i] = p->field_space[i];
  }
  *out = q;
  return 0;
}

int fe_physics_field_values(const fe_physics *p)
{
  int n = 0;
  for (int i = 0; i < p->nfields; i++) n += p->field_ncomp[i];
  return n;
}

void fe_physics_free(fe_physics *p)
{
  if (!p) return;
  free_names(p->aux_names, p->naux);
  free_names(p->const_names, p->nconst);
  free(p->const_values);
  for (int i = 0; i < p->nfields; i++) free(p->field_names[i]);
  for (int i = 0; i < 4; i++) {
    free(p->g[i]);
    free(p->ag[i]);
  }
  free(p->adf0);
  free(p->adf1);
  fe_physics_free(p->adjoint);
  free(p->show);
  for (int i = 0; p->region_names && i < p->nregions; i++) free(p->region_names[i]);
  free(p->region_names);
  free(p->region_values);
  free(p->f0);
  free(p->f1);
  free(p->df0);
  free(p->df1);
  free(p->description);
  free(p);
}
