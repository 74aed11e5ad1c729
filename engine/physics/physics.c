/* felab physics: the built-in library as C statement bodies, raw C physics, named constants,
 * regions, bound fields and the coefficient checks (docs in physics.h). Traced Lua physics
 * (physics-traced.c) fills the same structure from an expression graph. */
#include "engine/physics/physics.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/mesh/mesh.h"
#include "engine/solve/vector.h"
#include "engine/fem/quadrature.h"
#include "engine/core/strbuf.h"

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

/* C expression e with its numbers as reals (fe_c_reals), malloc'd; NULL when out of memory. */
static char *with_reals(const char *e)
{
  fe_strbuf b = {0};
  fe_c_reals(e, &b);
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
  /* kappa and source are C expressions as given: tried first unless within the host's reader
   * (x[0..2], numbers, operators, math.h: nothing that can fault) */
  p->user_c = !fe_c_expression_safe(kappa, 3, 0, 0) || !fe_c_expression_safe(source, 3, 0, 0);
  p->ncomp = 1;
  /* residual: integral of kappa grad u . grad v - source v; "1/2" is 0.5 */
  char *k = with_reals(kappa), *s = with_reals(source);
  if (k && s && !is_zero(source)) p->f0 = dup_printf("f0[0] = -(%s);", s);
  if (k)
    p->f1 = dup_printf("const real kappa = (%s);\n    FE_UNROLL for (int d = 0; d < DIM; d++) f1[d] = kappa * du[d];",
                       k);
  if (k)
    p->df1 = dup_printf("const real kappa = (%s);\n    FE_UNROLL for (int d = 0; d < DIM; d++) df1[d] = kappa * dw[d];",
                        k);
  free(k);
  free(s);
  fe_strbuf desc = {0}, kn = {0}, sn = {0};
  fe_strbuf_printf(&desc, "-div(kappa grad u) = s, kappa = %s, s = %s", kappa, source);
  fe_strbuf_printf(&kn, "kappa = \"%s\"", kappa);
  fe_strbuf_printf(&sn, "source = \"%s\"", source);
  int failed = kn.failed || sn.failed || fe_physics_add_coefficient(p, kn.s, kappa) ||
               fe_physics_add_coefficient(p, sn.s, source);
  fe_strbuf_free(&kn);
  fe_strbuf_free(&sn);
  if (failed || (!is_zero(source) && !p->f0) || !p->f1 || !p->df1 ||
      fe_strbuf_finish(&desc, &p->description)) {
    fe_strbuf_free(&desc);
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
  q->user_c = p->user_c;
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
  for (int i = 0; i < p->nfields; i++) fe_physics_bind(q, i, p->field_vec[i], p->field_space[i]);
  *out = q;
  return 0;
}

void fe_physics_bind(fe_physics *p, int f, const fe_vector *v, const struct fe_space *V)
{
  fe_vector_retain(v); /* first: v may be the vector bound now */
  fe_vector_free((fe_vector *)p->field_vec[f]);
  p->field_vec[f] = v;
  p->field_space[f] = V;
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
  for (int i = 0; i < FE_PHYSICS_MAX_FIELDS; i++) fe_vector_free((fe_vector *)p->field_vec[i]);
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
  free_names(p->coef_exprs, p->ncoef);
  free_names(p->coef_names, p->ncoef);
  free(p);
}

/* ---- coefficients checked on the host ---- */

int fe_physics_add_coefficient(fe_physics *p, const char *name, const char *c_expr)
{
  char **e = realloc(p->coef_exprs, sizeof *e * (size_t)(p->ncoef + 1));
  if (e) p->coef_exprs = e;
  char **n = e ? realloc(p->coef_names, sizeof *n * (size_t)(p->ncoef + 1)) : NULL;
  if (n) p->coef_names = n;
  char *ec = n ? strdup(c_expr) : NULL, *nc = ec ? strdup(name) : NULL;
  if (!nc) {
    free(ec);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the physics' coefficients");
  }
  p->coef_exprs[p->ncoef] = ec;
  p->coef_names[p->ncoef++] = nc;
  return 0;
}

/* "inf", "-inf" or "nan" (printf's "-nan" for 0/0 says nothing more). */
static const char *not_finite(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/* Each cell's row of p->region_values (by its region) into *out (malloc'd), or -1 where the
 * physics names no region of the cell (the operator refuses those). */
static int cell_regions(const fe_physics *p, const fe_mesh *m, int **out)
{
  *out = NULL;
  int *ids, *row;
  FE_MALLOC(ids, p->nregions + 1, "region ids");
  for (int r = 0; r < p->nregions; r++)
    if (fe_mesh_tag_id(m, p->region_names[r], m->dim, &ids[r])) {
      fe_error_clear(); /* a region the mesh lacks: fe_operator_create says so */
      ids[r] = INT_MIN;
    }
  row = fe_malloc(sizeof(int) * ((size_t)m->ncells + 1), "cell regions");
  if (!row) {
    free(ids);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (int c = 0; c < m->ncells; c++) {
    int r = 0;
    while (r < p->nregions && ids[r] != m->cell_tags[c]) r++;
    row[c] = r < p->nregions ? r : -1;
  }
  free(ids);
  *out = row;
  return 0;
}

/* The points x[3 * j ..] of q in cell `cell`, from the map's shape functions N at them. */
static void cell_points(const fe_mesh *m, int cell, int np, int nn, const double *N, double *x)
{
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  const int *v = (curved ? m->geo_cells : m->cells) + (size_t)cell * nn;
  const double *X = curved ? m->geo_coords : m->coords;
  double node[27][3];
  for (int b = 0; b < nn; b++) memcpy(node[b], X + 3 * (size_t)v[b], sizeof node[b]);
  for (int j = 0; j < np; j++) {
    double y[3] = {0, 0, 0};
    for (int b = 0; b < nn; b++)
      for (int d = 0; d < 3; d++) y[d] += N[(size_t)j * nn + b] * node[b][d];
    memcpy(x + 3 * (size_t)j, y, sizeof y);
  }
}

/* Coefficient i, which reads x, at every point of q in every cell of m. */
static int check_at_points(const fe_physics *p, int i, const fe_cexpr *c, const fe_mesh *m,
                           const fe_quadrature *q, const int *region)
{
  const int curved = m->geo_order == 2 && m->geo_cells && m->geo_coords;
  const int nn = curved ? m->ngn : m->nvc, np = q->npoints;
  double *N;
  FE_MALLOC(N, (size_t)np * nn + 1, "the map at the quadrature points");
  for (int j = 0; j < np; j++) { /* the map's shape functions at each point, once */
    double xi[3] = {0, 0, 0};
    for (int d = 0; d < q->dim; d++) xi[d] = q->points[j * q->dim + d];
    if (nn > 27 || fe_mesh_geo_shape(m->type, curved ? 2 : 1, xi, N + (size_t)j * nn, NULL) != nn) {
      free(N);
      return 0; /* a map felab does not know: nothing to say here */
    }
  }
  int bad = INT_MAX, nomem = 0; /* the first cell with a value that is not finite */
#pragma omp parallel reduction(min : bad) reduction(max : nomem)
  {
    double *x = malloc(sizeof(double) * 4 * (size_t)np), *value = x ? x + 3 * (size_t)np : NULL;
    nomem = !x;
#pragma omp for schedule(static)
    for (int cell = 0; cell < m->ncells; cell++) {
      if (!x || cell > bad || (region && region[cell] < 0)) continue; /* past one found */
      cell_points(m, cell, np, nn, N, x);
      fe_cexpr_eval_points(c, np, x, region ? p->region_values + (size_t)region[cell] * p->naux : NULL,
                           p->const_values, value);
      for (int j = 0; j < np; j++)
        if (!isfinite(value[j])) {
          bad = cell;
          break;
        }
    }
    free(x);
  }
  double *x = malloc(sizeof(double) * 4 * (size_t)np);
  if (nomem || !x) {
    free(N);
    free(x);
    FE_ERROR(FE_ERR_MEM, "out of host memory for checking the coefficients");
  }
  if (bad == INT_MAX) {
    free(N);
    free(x);
    return 0;
  }
  double *value = x + 3 * (size_t)np;
  cell_points(m, bad, np, nn, N, x);
  fe_cexpr_eval_points(c, np, x, region ? p->region_values + (size_t)region[bad] * p->naux : NULL,
                       p->const_values, value);
  int j = 0;
  while (j < np - 1 && isfinite(value[j])) j++;
  const double *y = x + 3 * (size_t)j;
  char at[96];
  if (m->dim == 3) snprintf(at, sizeof at, "(%.6g, %.6g, %.6g)", y[0], y[1], y[2]);
  else snprintf(at, sizeof at, "(%.6g, %.6g)", y[0], y[1]);
  int rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__,
                        "physics %s: %s is %s at x = %s, cell %d (a quadrature point)", p->name,
                        p->coef_names[i], not_finite(value[j]), at, bad);
  free(N);
  free(x);
  return rc;
}

/* Coefficient i, which does not read x: once, or once a region where it reads a. */
static int check_without_x(const fe_physics *p, int i, const fe_cexpr *c)
{
  int reads_a = fe_cexpr_reads(c, FE_V_A) > 0;
  for (int r = 0; r < (reads_a ? p->nregions : 1); r++) {
    double value = fe_cexpr_eval(c, NULL, reads_a ? p->region_values + (size_t)r * p->naux : NULL,
                                 p->const_values);
    if (isfinite(value)) continue;
    if (reads_a)
      FE_ERROR(FE_ERR_ARG, "physics %s: %s is %s in region %s", p->name, p->coef_names[i],
               not_finite(value), p->region_names[r]);
    FE_ERROR(FE_ERR_ARG, "physics %s: %s is %s everywhere", p->name, p->coef_names[i], not_finite(value));
  }
  return 0;
}

int fe_physics_check_coefficients(const fe_physics *p, const fe_mesh *m, const fe_quadrature *q)
{
  int *region = NULL, rc = 0;
  for (int i = 0; i < p->ncoef && !rc; i++) {
    fe_cexpr *c;
    if (fe_cexpr_read(p->coef_exprs[i], &c)) continue; /* beyond the reader: compiled as written */
    int na = fe_cexpr_reads(c, FE_V_A), nk = fe_cexpr_reads(c, FE_V_K);
    /* what the physics does not give, the kernel's compiler refuses */
    int known = (!na || (na <= p->naux && p->nregions > 0)) && nk <= p->nconst;
    if (known && !fe_cexpr_reads(c, FE_V_X)) {
      rc = check_without_x(p, i, c);
    } else if (known && m && q) {
      if (na && !region) rc = cell_regions(p, m, &region);
      if (!rc) rc = check_at_points(p, i, c, m, q, na ? region : NULL);
    }
    fe_cexpr_free(c);
  }
  free(region);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}
