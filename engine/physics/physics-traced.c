/* felab traced physics: from the expression graph of f0 and f1 to an fe_physics.
 *
 * The Jacobian blocks are partial derivatives of the graph:
 *   g0[i][j]       = d f0_i / d u_j          g1[i][j*DIM+e]       = d f0_i / d du_je
 *   g2[i*DIM+d][j] = d f1_id / d u_j         g3[i*DIM+d][j*DIM+e] = d f1_id / d du_je
 * and the linearization the kernels run is their action on the direction (w, dw):
 *   df0_i = g0[i][.] w + g1[i][.] dw,   df1_id = g2[id][.] w + g3[id][.] dw,
 * built in the same graph, so zero blocks vanish, unit entries cost nothing and everything
 * the action shares with itself is computed once. Flops are counted on what is emitted.
 *
 * The adjoint (for J^T, BiCG's shadow system): with M = [g0 g1; g2 g3] acting on [w; dw],
 *   (v, J w) = integral of [v; grad v] . M [w; grad w] = integral of M^T [v; grad v] . [w; grad w],
 * so J^T is the operator whose pointwise linearization is M^T = [g0^T g2^T; g1^T g3^T]. Its
 * action is built from the same nodes, transposed; when every block entry equals its
 * transposed partner (the same node: the graph is hash-consed) M is symmetric and J^T = J. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/physics/physics.h"
#include "engine/core/strbuf.h"

/* Names for printing a trace as mathematics. */
static void math_name(void *ctx, fe_var v, int i, fe_strbuf *b)
{
  const fe_trace *t = ctx;
  static const char axes[] = "xyz";
  int dim = t->dim;
  switch (v) {
  case FE_V_U: case FE_V_W:
    if (t->ncomp == 1) fe_strbuf_append(b, v == FE_V_U ? "u" : "w");
    else fe_strbuf_printf(b, "%s%d", v == FE_V_U ? "u" : "w", i + 1);
    return;
  case FE_V_DU: case FE_V_DW:
    if (t->ncomp == 1) fe_strbuf_printf(b, "%s_%c", v == FE_V_DU ? "u" : "w", axes[i % dim]);
    else fe_strbuf_printf(b, "%s%d_%c", v == FE_V_DU ? "u" : "w", i / dim + 1, axes[i % dim]);
    return;
  case FE_V_X: fe_strbuf_printf(b, "%c", axes[i]); return;
  case FE_V_A: fe_strbuf_append(b, i < t->naux ? t->aux_names[i] : "a?"); return;
  case FE_V_K: fe_strbuf_append(b, i < t->nconst ? t->const_names[i] : "k?"); return;
  case FE_V_F: fe_strbuf_append(b, i < t->nfield_values ? t->field_names[i] : "f?"); return;
  case FE_V_DF:
    fe_strbuf_printf(b, "%s_%c", i / dim < t->nfield_values ? t->field_names[i / dim] : "f?", axes[i % dim]);
    return;
  default: fe_strbuf_append(b, "?"); return;
  }
}

/* The four blocks and the action, as node ids, and the same for the adjoint (M^T). */
typedef struct derived {
  int *g[4];   /* g0 nc*nc, g1 nc*nc*dim, g2 nc*dim*nc, g3 (nc*dim)^2 */
  int *df0, *df1;
  int n[4];
  int *ag[4];  /* g0^T, g2^T, g1^T, g3^T: the blocks of M^T, shaped as g0..g3 */
  int *adf0, *adf1;
} derived;

static void derived_free(derived *d)
{
  for (int i = 0; i < 4; i++) {
    free(d->g[i]);
    free(d->ag[i]);
  }
  free(d->df0);
  free(d->df1);
  free(d->adf0);
  free(d->adf1);
}

/* d(out[r]) / d(var j) for every (r, j) into blk[r * ncols + j]. */
static int block(fe_xgraph *g, const int *out, int nrows, fe_var v, int ncols, int *blk)
{
  for (int r = 0; r < nrows; r++)
    for (int j = 0; j < ncols; j++)
      if ((blk[r * ncols + j] = fe_x_diff(g, out[r], v, j)) < 0) return -1;
  return 0;
}

/* sum_j blk[r][j] * var_j */
static int contract(fe_xgraph *g, const int *blk, int r, int ncols, fe_var v)
{
  int s = fe_x_const(g, 0);
  for (int j = 0; j < ncols; j++)
    s = fe_x_binary(g, FE_X_ADD, s, fe_x_binary(g, FE_X_MUL, blk[r * ncols + j], fe_x_var(g, v, j)));
  return s;
}

/* The action of blocks b (shaped as g0..g3) on (w, dw): df0[nc], df1[nd]; nonzero on error. */
static int action(fe_xgraph *g, int *const *b, int nc, int nd, int *df0, int *df1)
{
  int rc = 0;
  for (int i = 0; !rc && i < nc; i++)
    rc = (df0[i] = fe_x_binary(g, FE_X_ADD, contract(g, b[0], i, nc, FE_V_W),
                               contract(g, b[1], i, nd, FE_V_DW))) < 0;
  for (int i = 0; !rc && i < nd; i++)
    rc = (df1[i] = fe_x_binary(g, FE_X_ADD, contract(g, b[2], i, nc, FE_V_W),
                               contract(g, b[3], i, nd, FE_V_DW))) < 0;
  return rc;
}

/* M^T's blocks from M's: ag0 = g0^T, ag1 = g2^T, ag2 = g1^T, ag3 = g3^T. */
static void transpose_blocks(derived *d, int nc, int nd)
{
  for (int i = 0; i < nc; i++)
    for (int j = 0; j < nc; j++) d->ag[0][j * nc + i] = d->g[0][i * nc + j];
  for (int r = 0; r < nd; r++)
    for (int j = 0; j < nc; j++) {
      d->ag[1][j * nd + r] = d->g[2][r * nc + j];
      d->ag[2][r * nc + j] = d->g[1][j * nd + r];
    }
  for (int r = 0; r < nd; r++)
    for (int c = 0; c < nd; c++) d->ag[3][c * nd + r] = d->g[3][r * nd + c];
}

static int derive(const fe_trace *t, derived *d)
{
  fe_xgraph *g = t->g;
  int nc = t->ncomp, nd = nc * t->dim;
  memset(d, 0, sizeof *d);
  d->n[0] = nc * nc;
  d->n[1] = d->n[2] = nc * nd;
  d->n[3] = nd * nd;
  int ok = 1;
  for (int i = 0; i < 4; i++) {
    d->g[i] = malloc(sizeof(int) * (size_t)d->n[i]);
    d->ag[i] = malloc(sizeof(int) * (size_t)d->n[i]);
    ok = ok && d->g[i] && d->ag[i];
  }
  d->df0 = malloc(sizeof(int) * (size_t)nc);
  d->df1 = malloc(sizeof(int) * (size_t)nd);
  d->adf0 = malloc(sizeof(int) * (size_t)nc);
  d->adf1 = malloc(sizeof(int) * (size_t)nd);
  if (!ok || !d->df0 || !d->df1 || !d->adf0 || !d->adf1) {
    derived_free(d);
    FE_ERROR(FE_ERR_MEM, "out of host memory deriving the Jacobian");
  }
  int rc = block(g, t->f0, nc, FE_V_U, nc, d->g[0]) || block(g, t->f0, nc, FE_V_DU, nd, d->g[1]) ||
           block(g, t->f1, nd, FE_V_U, nc, d->g[2]) || block(g, t->f1, nd, FE_V_DU, nd, d->g[3]);
  if (!rc) rc = action(g, d->g, nc, nd, d->df0, d->df1);
  if (!rc) {
    transpose_blocks(d, nc, nd);
    rc = action(g, d->ag, nc, nd, d->adf0, d->adf1);
  }
  if (rc) {
    derived_free(d);
    return fe_error_push(FE_ERR_ARG, __FILE__, __LINE__, __func__);
  }
  return 0;
}

static int all_zero(const fe_xgraph *g, const int *r, int n)
{
  for (int i = 0; i < n; i++)
    if (!fe_x_is_const(g, r[i], 0)) return 0;
  return 1;
}

/* C statements for roots r[0..n-1] assigned to name[i]; NULL when all are zero. */
static char *body(const fe_xgraph *g, const int *r, int n, const char *name)
{
  if (all_zero(g, r, n)) return NULL;
  char (*lhs)[32] = malloc(sizeof *lhs * (size_t)n);
  const char **l = malloc(sizeof(char *) * (size_t)n);
  char *s = NULL;
  if (lhs && l) {
    for (int i = 0; i < n; i++) {
      snprintf(lhs[i], sizeof lhs[i], "%s[%d]", name, i);
      l[i] = lhs[i];
    }
    fe_strbuf b = {0};
    fe_x_emit_c(g, r, l, n, 1, 4, &b);
    if (fe_strbuf_finish(&b, &s)) s = NULL;
  }
  free(lhs);
  free(l);
  return s;
}

static int depends_any(fe_xgraph *g, const int *r, int n, fe_var v)
{
  for (int i = 0; i < n; i++)
    if (fe_x_depends(g, r[i], v)) return 1;
  return 0;
}

/* The largest degree in x of n roots, auxiliary fields counting their own degrees. */
static int degree_of(const fe_trace *t, const int *r, int n)
{
  const int *vd[FE_NVARS] = {0};
  vd[FE_V_F] = t->field_degree;
  vd[FE_V_DF] = t->field_grad_degree;
  int d = 0;
  for (int i = 0; i < n; i++) {
    int k = fe_x_degree_x(t->g, r[i], vd);
    if (k > d) d = k;
  }
  return d;
}

/* Flops (all, or the non-FMA ones) of two sets of roots together. */
static double count2(const fe_xgraph *g, const int *a, int na, const int *b, int nb,
                     double (*count)(const fe_xgraph *, const int *, int))
{
  int *r = malloc(sizeof(int) * (size_t)(na + nb));
  if (!r) return 0;
  memcpy(r, a, sizeof(int) * (size_t)na);
  memcpy(r + na, b, sizeof(int) * (size_t)nb);
  double f = count(g, r, na + nb);
  free(r);
  return f;
}

static double flops2(const fe_xgraph *g, const int *a, int na, const int *b, int nb)
{
  return count2(g, a, na, b, nb, fe_x_flops);
}

/* One term for show: its entries as mathematics, then as C with its flops. */
static void show_term(fe_strbuf *s, const fe_trace *t, const char *name, const int *r, int n)
{
  fe_strbuf_printf(s, "%s:", name);
  if (all_zero(t->g, r, n)) {
    fe_strbuf_append(s, " 0\n");
    return;
  }
  fe_strbuf_append(s, "\n");
  for (int i = 0; i < n; i++) {
    if (fe_x_is_const(t->g, r[i], 0)) continue;
    fe_strbuf_printf(s, "  %s[%d] = ", name, i);
    fe_strbuf b = {0};
    fe_x_print(t->g, r[i], math_name, (void *)t, &b);
    if (b.s && b.len > 300) fe_strbuf_printf(s, "%.300s ... (%zu characters)\n", b.s, b.len);
    else fe_strbuf_printf(s, "%s\n", b.s ? b.s : "");
    fe_strbuf_free(&b);
  }
  char *c = body(t->g, r, n, name);
  fe_strbuf_printf(s, "  C (%g flops):\n%s", fe_x_flops(t->g, r, n), c ? c : "");
  free(c);
}

static void show_text(fe_strbuf *s, const fe_trace *t, const derived *d, const fe_physics *p)
{
  int nc = t->ncomp, nd = nc * t->dim;
  fe_strbuf_printf(s, "physics %s: %d component%s, dimension %d, %s\n", p->name, nc, nc > 1 ? "s" : "",
                   t->dim, p->nonlinear ? "nonlinear" : "linear");
  show_term(s, t, "f0", t->f0, nc);
  show_term(s, t, "f1", t->f1, nd);
  static const char *const gn[4] = {"g0", "g1", "g2", "g3"};
  for (int i = 0; i < 4; i++) show_term(s, t, gn[i], d->g[i], d->n[i]);
  fe_strbuf_printf(s, "residual f0, f1: %g flops per point; Jacobian action df0, df1: %g flops per point\n",
                   p->flops_f, p->flops_df);
}

static int fill(fe_physics *p, const fe_trace *t, const derived *d)
{
  fe_xgraph *g = t->g;
  int nc = t->ncomp, nd = nc * t->dim;
  p->f0 = body(g, t->f0, nc, "f0");
  p->f1 = body(g, t->f1, nd, "f1");
  p->df0 = body(g, d->df0, nc, "df0");
  p->df1 = body(g, d->df1, nd, "df1");
  static const char *const gn[4] = {"g0", "g1", "g2", "g3"};
  p->symmetric = 1;
  for (int i = 0; i < 4; i++) {
    p->g[i] = body(g, d->g[i], d->n[i], gn[i]);
    p->ag[i] = body(g, d->ag[i], d->n[i], gn[i]);
    p->symmetric = p->symmetric && !memcmp(d->g[i], d->ag[i], sizeof(int) * (size_t)d->n[i]);
  }
  p->adf0 = body(g, d->adf0, nc, "df0"); /* the adjoint's bodies write its own df0, df1 */
  p->adf1 = body(g, d->adf1, nd, "df1");
  p->has_adjoint = 1;
  int missing = (!p->f0 && !all_zero(g, t->f0, nc)) || (!p->f1 && !all_zero(g, t->f1, nd)) ||
                (!p->df0 && !all_zero(g, d->df0, nc)) || (!p->df1 && !all_zero(g, d->df1, nd)) ||
                (!p->adf0 && !all_zero(g, d->adf0, nc)) || (!p->adf1 && !all_zero(g, d->adf1, nd));
  FE_ASSERT(!missing, FE_ERR_MEM, "out of host memory emitting the physics");
  p->flops_adf = flops2(g, d->adf0, nc, d->adf1, nd);
  p->degree_adf0 = degree_of(t, d->adf0, nc);
  p->degree_adf1 = degree_of(t, d->adf1, nd);
  p->flops_f = flops2(g, t->f0, nc, t->f1, nd);
  p->flops_df = flops2(g, d->df0, nc, d->df1, nd);
  p->nonfma_f = count2(g, t->f0, nc, t->f1, nd, fe_x_nonfma);
  p->nonfma_df = count2(g, d->df0, nc, d->df1, nd, fe_x_nonfma);
  p->nonfma_adf = count2(g, d->adf0, nc, d->adf1, nd, fe_x_nonfma);
  p->uses_x = depends_any(g, t->f0, nc, FE_V_X) || depends_any(g, t->f1, nd, FE_V_X) ||
              depends_any(g, d->df0, nc, FE_V_X) || depends_any(g, d->df1, nd, FE_V_X);
  p->nonlinear = depends_any(g, d->df0, nc, FE_V_U) || depends_any(g, d->df0, nc, FE_V_DU) ||
                 depends_any(g, d->df1, nd, FE_V_U) || depends_any(g, d->df1, nd, FE_V_DU);
  p->uses_fields = depends_any(g, t->f0, nc, FE_V_F) || depends_any(g, t->f1, nd, FE_V_F) ||
                   depends_any(g, t->f0, nc, FE_V_DF) || depends_any(g, t->f1, nd, FE_V_DF);
  p->degree_f0 = degree_of(t, t->f0, nc);
  p->degree_f1 = degree_of(t, t->f1, nd);
  p->degree_df0 = degree_of(t, d->df0, nc);
  p->degree_df1 = degree_of(t, d->df1, nd);
  fe_strbuf s = {0};
  show_text(&s, t, d, p);
  return fe_strbuf_finish(&s, &p->show);
}

int fe_physics_from_trace(const fe_trace *t, fe_physics **out)
{
  FE_ASSERT(t->dim >= 1 && t->dim <= 3 && t->ncomp >= 1 && t->ncomp <= FE_PHYSICS_MAX_COMP,
            FE_ERR_ARG, "physics: dimension %d and %d components are out of range", t->dim, t->ncomp);
  derived d;
  FE_CHECK(derive(t, &d));
  fe_physics *p = calloc(1, sizeof *p);
  int rc = p ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__, "out of host memory");
  if (!rc) {
    snprintf(p->name, sizeof p->name, "%s", t->name ? t->name : "traced");
    p->ncomp = t->ncomp;
    p->dim = t->dim;
    p->description = strdup(t->description ? t->description : "traced physics");
    rc = fill(p, t, &d);
    if (!rc) rc = fe_physics_set_names(p, t->naux, t->aux_names, t->nconst, t->const_names, t->const_values);
  }
  derived_free(&d);
  if (rc) {
    fe_physics_free(p);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = p;
  return 0;
}
