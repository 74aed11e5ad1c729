/* felab code generation. A kernel's source is, in order:
 *   1. engine defines: precision, sizes, switches;
 *   2. the backend's preamble, which maps the portable dialect (docs/kernels.md);
 *   3. tables: basis values B[q][b], reference derivatives D[q][b][i], weights W[q];
 *   4. the physics as two device functions, fe_f (residual) and fe_df (linearization);
 *   5. the templates: common, then the action's own, then dirichlet.
 * fe_codegen_model counts what that source does; keep both in step with the templates. */
#include "engine/codegen/codegen.h"
#include "engine/perf/perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fem/element.h"
#include "engine/core/error.h"
#include "engine/operator/qdata.h"
#include "engine/core/strbuf.h"

static const char *const action_names[FE_NACTIONS] = {"residual", "apply", "diagonal"};

const char *fe_action_name(fe_action a) { return a < FE_NACTIONS ? action_names[a] : "?"; }

int fe_action_parse(const char *s, fe_action *a)
{
  for (int i = 0; i < FE_NACTIONS; i++)
    if (!strcmp(s, action_names[i])) {
      *a = (fe_action)i;
      return 0;
    }
  FE_ERROR(FE_ERR_ARG, "unknown action '%s' (residual, apply, diagonal)", s);
}

int fe_geo_stride(int dim) { return dim * dim + 1; }

fe_action_needs fe_codegen_needs(const fe_kernel_spec *s)
{
  const fe_physics *p = s->pde;
  fe_action_needs n;
  n.jacobian = s->action != FE_ACTION_RESIDUAL;
  n.need_u = n.jacobian ? p->nonlinear : 1;
  n.need_x = p->uses_x && !s->folded; /* folded: x's part is in the stored words */
  n.has_f0 = n.jacobian ? p->df0 != NULL : p->f0 != NULL;
  n.need_f = p->nfields > 0 && p->uses_fields;
  n.phys_flops = n.jacobian ? p->flops_df : p->flops_f;
  n.phys_nonfma = n.jacobian ? p->nonfma_df : p->nonfma_f;
  return n;
}

/* A table as a constant array, full precision. */
void fe_codegen_table(fe_strbuf *b, const char *name, const double *v, int n)
{
  fe_strbuf_printf(b, "FE_CONSTANT real %s[%d] = {", name, n);
  for (int i = 0; i < n; i++)
    fe_strbuf_printf(b, "%s%.17g", i % 4 ? ", " : (i ? ",\n  " : "\n  "), v[i]);
  fe_strbuf_append(b, "};\n");
}

/* One physics function: zero the outputs, then the two statement bodies. shift: x arrives
 * less the origin FE_X0 (fe_kernel_spec's shift_x), which the function adds back for the
 * bodies (the parameter renamed, x its sum). */
static void emit_physics_fn(fe_strbuf *b, const char *sig, const char *o0, const char *body0,
                            const char *o1, const char *body1, int shift)
{
  const char *at = shift ? strstr(sig, "const real *x,") : NULL;
  if (at)
    fe_strbuf_printf(b, "FE_DEVICE void %.*sconst real *fe_xl,%s\n{\n"
                        "  const real x[3] = {fe_xl[0] + (real)FE_X0_0, fe_xl[1] + (real)FE_X0_1, "
                        "fe_xl[2] + (real)FE_X0_2};\n",
                     (int)(at - sig), sig, at + strlen("const real *x,"));
  else fe_strbuf_printf(b, "FE_DEVICE void %s\n{\n", sig);
  fe_strbuf_append(b, "  (void)u; (void)du; (void)x; (void)a; (void)k; (void)f; (void)df;\n");
  fe_strbuf_printf(b, "  FE_UNROLL for (int k = 0; k < NC; k++) %s[k] = 0;\n", o0);
  fe_strbuf_printf(b, "  FE_UNROLL for (int k = 0; k < NC * DIM; k++) %s[k] = 0;\n", o1);
  if (body0) fe_strbuf_printf(b, "  {\n    %s\n  }\n", body0);
  if (body1) fe_strbuf_printf(b, "  {\n    %s\n  }\n", body1);
  fe_strbuf_append(b, "}\n");
}

int fe_codegen_field_map_width(const fe_physics *p)
{
  int n = 0;
  for (int i = 0; i < p->nfields; i++) n += p->field_space[i]->elem.nbasis;
  return n;
}

/* fe_fields: the auxiliary fields' values and gradients at point q of cell c, each from its
 * own space's tables (at the action's points) and dof map (fmaps: NBF entries per cell). */
static int emit_fields(fe_strbuf *b, const fe_kernel_spec *s)
{
  const fe_physics *p = s->pde;
  const fe_quadrature *Q = s->quad;
  int dim = s->V->elem.dim, moff = 0, voff = 0;
  for (int i = 0; i < p->nfields; i++) {
    const fe_element *el = &p->field_space[i]->elem;
    int nb = el->nbasis, nq = Q->npoints;
    double *B = malloc(sizeof(double) * nq * nb), *D = malloc(sizeof(double) * nq * nb * dim);
    if (!B || !D) {
      free(B);
      free(D);
      return -1;
    }
    for (int q = 0; q < nq; q++) fe_element_eval(el, Q->points + q * dim, B + q * nb, D + q * nb * dim);
    char name[16];
    snprintf(name, sizeof name, "BF%d", i);
    fe_codegen_table(b, name, B, nq * nb);
    snprintf(name, sizeof name, "DF%d", i);
    fe_codegen_table(b, name, D, nq * nb * dim);
    free(B);
    free(D);
  }
  fe_strbuf_append(b, "FE_DEVICE void fe_fields(FE_GLOBAL const int *FE_RESTRICT fmaps, "
                      "FE_GLOBAL const real *FE_RESTRICT fv0, FE_GLOBAL const real *FE_RESTRICT fv1, "
                      "FE_GLOBAL const real *FE_RESTRICT fv2, const int c, const int q, const real *G, "
                      "real *f, real *df)\n{\n  FE_GLOBAL const int *map = fmaps + (size_t)c * NBF;\n"
                      "  (void)fv0; (void)fv1; (void)fv2;\n");
  for (int i = 0; i < p->nfields; i++) {
    int nb = p->field_space[i]->elem.nbasis, nc = p->field_ncomp[i];
    fe_strbuf_printf(b, "  /* field %s: %s, %d values */\n", p->field_names[i], p->field_space[i]->name, nc);
    fe_strbuf_printf(b, "  FE_UNROLL for (int kk = 0; kk < %d; kk++) {\n"
                        "    real s = 0, r[DIM];\n"
                        "    FE_UNROLL for (int i = 0; i < DIM; i++) r[i] = 0;\n"
                        "    FE_UNROLL for (int b = 0; b < %d; b++) {\n"
                        "      const real v = fv%d[(size_t)map[%d + b] * %d + kk];\n"
                        "      s += BF%d[q * %d + b] * v;\n"
                        "      FE_UNROLL for (int i = 0; i < DIM; i++) r[i] += DF%d[(q * %d + b) * DIM + i] * v;\n"
                        "    }\n"
                        "    f[%d + kk] = s;\n"
                        "    FE_UNROLL for (int d = 0; d < DIM; d++) {\n"
                        "      real gd = 0;\n"
                        "      FE_UNROLL for (int i = 0; i < DIM; i++) gd += r[i] * G[i * DIM + d];\n"
                        "      df[(%d + kk) * DIM + d] = gd;\n"
                        "    }\n  }\n",
                     nc, nb, i, moff, nc, i, nb, i, nb, voff, voff);
    moff += nb;
    voff += nc;
  }
  fe_strbuf_append(b, "}\n");
  return b->failed ? -1 : 0;
}

/* The dense tables at the rule's points: B[q][b], D[q][b][i], W[q]. */
static int emit_dense_tables(fe_strbuf *b, const fe_element *el, const fe_quadrature *Q)
{
  int nb = el->nbasis, nq = Q->npoints, dim = el->dim;
  double *B = malloc(sizeof(double) * nq * nb), *D = malloc(sizeof(double) * nq * nb * dim);
  if (!B || !D) {
    free(B);
    free(D);
    return -1;
  }
  for (int q = 0; q < nq; q++) fe_element_eval(el, Q->points + q * dim, B + q * nb, D + q * nb * dim);
  fe_strbuf_printf(b, "\n/* tabulation: B[q*NB + b] = phi_b(xi_q), D[(q*NB + b)*DIM + i] = "
                      "d phi_b / d xi_i (xi_q), W[q] = weights */\n");
  fe_codegen_table(b, "B", B, nq * nb);
  fe_codegen_table(b, "D", D, nq * nb * dim);
  fe_codegen_table(b, "W", Q->weights, nq);
  free(B);
  free(D);
  return 0;
}

int fe_codegen_action(const fe_kernel_spec *s, const char *backend, const char *preamble,
                      char **src)
{
  const fe_element *el = &s->V->elem;
  const fe_quadrature *Q = s->quad;
  const fe_physics *p = s->pde;
  int nb = el->nbasis, nq = Q->npoints, dim = el->dim, nc = s->V->ncomp;
  fe_action_needs n = fe_codegen_needs(s);
  fe_strbuf b = {0};

  fe_strbuf_printf(&b, "/* felab kernel: %s of %s on %s (%s cells), %s backend, %s precision */\n",
                   fe_action_name(s->action), p->name, s->V->name, fe_cell_name(el->cell), backend,
                   fe_precision_name(s->prec));
  fe_strbuf_printf(&b, "#define FE_DOUBLE %d\n#define FE_COLORED %d\n", s->prec == FE_DOUBLE,
                   s->colored);
  if (p->user_c) fe_strbuf_append(&b, "#define FE_USER_C 1 /* C a user typed: tried first */\n");
  fe_strbuf_printf(&b, "#define DIM %d /* space dimension */\n#define NB %d /* basis functions */\n"
                       "#define NQ %d /* quadrature points (degree %d) */\n"
                       "#define NC %d /* components */\n#define NF (NC * (1 + DIM))\n"
                       "#define BLOCK %d /* cells per work group */\n",
                   dim, nb, nq, Q->degree, nc, s->block);
  fe_strbuf_printf(&b, "#define GEO_AFFINE %d\n#define NGQ %d\n#define GEO_STRIDE %d\n",
                   s->geo_affine, s->geo_affine ? 1 : nq, fe_geo_stride(dim));
  if (s->geo_shared) /* and the sets (the classes', then the padding's), by which the cpu's
                      * kernels choose their code */
    fe_strbuf_printf(&b, "#define GEO_SHARED 1\n#define GEO_SETS %d\n#define GEO_SELECT %d\n",
                     fe_mesh_congruent(s->V->mesh)->n + 1, fe_codegen_select_sets(s->prec));
  fe_strbuf_printf(&b, "#define FE_JACOBIAN %d\n#define NEED_U %d\n#define NEED_X %d\n#define HAS_F0 %d\n",
                   n.jacobian, n.need_u, n.need_x, n.has_f0);
  fe_strbuf_printf(&b, "#define FE_DIAGONAL %d\n#define FE_DENSE %d\n", s->action == FE_ACTION_DIAGONAL,
                   s->dense);
  if (s->shift_x) /* the coordinates' origin (fe_coords_origin) */
    fe_strbuf_printf(&b, "#define FE_X0_0 %.17g\n#define FE_X0_1 %.17g\n#define FE_X0_2 %.17g\n",
                     s->x0[0], s->x0[1], s->x0[2]);
  if (s->folded) fe_qdata_defines(&b, p, dim, s->qd_cells_fastest, s->qd_column);
  if (s->defines) fe_strbuf_append(&b, s->defines);
  fe_strbuf_printf(&b, "#define NAUX %d /* per-cell constants a[] */\n", p->naux);
  fe_strbuf_printf(&b, "#define NK %d /* named constants k[] */\n", p->nconst);
  fe_strbuf_printf(&b, "#define NFV %d /* auxiliary field values f[] */\n#define NEED_F %d\n",
                   fe_physics_field_values(p), n.need_f);
  fe_strbuf_printf(&b, "#define NBF %d /* auxiliary field map entries per cell */\n", fe_codegen_field_map_width(p));
  fe_strbuf_append(&b, preamble);
  fe_strbuf_append(&b, "#ifndef M_PI\n#define M_PI 3.14159265358979323846\n#endif\n");

  if (s->dense && emit_dense_tables(&b, el, Q)) {
    fe_strbuf_free(&b);
    FE_ERROR(FE_ERR_MEM, "out of host memory while tabulating");
  }
  if (s->tables) fe_strbuf_append(&b, s->tables);

  fe_strbuf_printf(&b, "\n/* physics: %s */\n", p->description ? p->description : p->name);
  const int shift = s->shift_x && p->uses_x; /* (a folded apply's setup reads x: qdata) */
  emit_physics_fn(&b, "fe_f(const real *u, const real *du, const real *x, const real *a, "
                      "const real *k, const real *f, const real *df, real *f0, real *f1)",
                  "f0", p->f0, "f1", p->f1, shift);
  emit_physics_fn(&b,
                  "fe_df(const real *u, const real *du, const real *w, const real *dw, "
                  "const real *x, const real *a, const real *k, const real *f, const real *df, "
                  "real *df0, real *df1)",
                  "df0", p->df0, "df1", p->df1, shift);
  if (n.need_f && emit_fields(&b, s)) {
    fe_strbuf_free(&b);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  fe_strbuf_append(&b, "\n");
  fe_strbuf_append(&b, fe_kernel_template("common"));
  fe_strbuf_append(&b, "\n");
  const char *tmpl = fe_kernel_template(s->template_name);
  if (!tmpl) {
    fe_strbuf_free(&b);
    FE_ERROR(FE_ERR_INTERNAL, "no kernel template '%s' in this build", s->template_name);
  }
  fe_strbuf_append(&b, tmpl);
  fe_strbuf_append(&b, "\n");
  fe_strbuf_append(&b, fe_kernel_template("dirichlet"));
  return fe_strbuf_finish(&b, src);
}

int fe_codegen_physics_check(const fe_physics *p, int dim)
{
  fe_backend *be;
  FE_CHECK(fe_backend_get("cpu", &be));
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab: checking physics %s */\n#define FE_DOUBLE 1\n#define FE_COLORED 0\n"
                       "#define DIM %d\n#define NC %d\n#define NAUX %d\n#define NK %d\n#define NFV %d\n",
                   p->name, dim, p->ncomp, p->naux, p->nconst, fe_physics_field_values(p));
  fe_strbuf_append(&b, be->ops->preamble(be->impl, FE_DOUBLE));
  emit_physics_fn(&b, "fe_f(const real *u, const real *du, const real *x, const real *a, "
                      "const real *k, const real *f, const real *df, real *f0, real *f1)",
                  "f0", p->f0, "f1", p->f1, 0);
  emit_physics_fn(&b, "fe_df(const real *u, const real *du, const real *w, const real *dw, "
                      "const real *x, const real *a, const real *k, const real *f, const real *df, "
                      "real *df0, real *df1)",
                  "df0", p->df0, "df1", p->df1, 0);
  fe_strbuf_append(&b, "FE_KERNEL(fe_check)(FE_GLOBAL real *y)\n{\n  FE_GROUPS_BEGIN\n"
                       "  real z[NC * DIM * 2 + NAUX + NK + NFV * (DIM + 1) + 8] = {0}, o[NC * (DIM + 1)];\n"
                       "  fe_f(z, z, z, z, z, z, z, o, o + NC);\n  fe_df(z, z, z, z, z, z, z, z, z, o, o + NC);\n"
                       "  y[0] = o[0];\n  FE_GROUPS_END\n}\n");
  char *src;
  FE_CHECK(fe_strbuf_finish(&b, &src));
  fe_module *mod = NULL;
  double secs;
  int cached;
  int rc = fe_compile(be, src, &mod, &secs, &cached);
  free(src);
  if (mod) be->ops->module_free(be->impl, mod);
  return rc;
}

double fe_codegen_eval_flops(int nb, int dim, int nc, int need)
{
  return need ? nc * (nb * (2.0 + 2.0 * dim) + 2.0 * dim * dim) : 0;
}

/* The Jacobian from the node coordinates, then its inverse by cofactors and its determinant
 * (patch.knl's fe_map_factors). */
int fe_codegen_select_sets(fe_precision prec)
{
  /* a stand-alone loop of a group of 32 cells, 10 factors (docs/history.md, fifteenth
   * session): the selects beat gcc's emulated gather up to 8 sets in single, 2 in double */
  return prec == FE_DOUBLE ? 2 : 8;
}

double fe_codegen_map_flops(int nb, int dim)
{
  static const double inverse[4] = {0, 1, 8, 42};
  return 2.0 * nb * dim * dim + inverse[dim];
}

void fe_codegen_field_counts(const fe_kernel_spec *s, double *flops_per_point, double *bytes)
{
  fe_action_needs n = fe_codegen_needs(s);
  double w = (double)fe_precision_size(s->prec), ncells = s->V->mesh->ncells;
  *flops_per_point = 0;
  *bytes = 0;
  for (int i = 0; n.need_f && i < s->pde->nfields; i++) {
    const fe_space *F = s->pde->field_space[i];
    *flops_per_point += fe_codegen_eval_flops(F->elem.nbasis, s->V->elem.dim, s->pde->field_ncomp[i], 1);
    *bytes += F->ndofs * w + ncells * F->elem.nbasis * 4.0;
  }
}

double fe_codegen_common_bytes(const fe_kernel_spec *s, int ndirichlet)
{
  fe_action_needs n = fe_codegen_needs(s);
  double w = (double)fe_precision_size(s->prec), ndofs = s->V->ndofs, ff, fbytes;
  fe_codegen_field_counts(s, &ff, &fbytes);
  double in = (n.need_u ? ndofs : 0) + (s->action == FE_ACTION_APPLY ? ndofs : 0);
  return s->V->mesh->ncells * s->pde->naux * w + in * w + ndofs * w +
         ndirichlet * (4.0 + 3 * w) + fbytes + s->pde->nconst * w;
}
