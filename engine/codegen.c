/* felab code generation. A kernel's source is, in order:
 *   1. engine defines: precision, sizes, switches;
 *   2. the backend's preamble, which maps the portable dialect (docs/kernels.md);
 *   3. tables: basis values B[q][b], reference derivatives D[q][b][i], weights W[q];
 *   4. the physics as two device functions, fe_f (residual) and fe_df (linearization);
 *   5. the templates: common, then the action's own, then dirichlet.
 * fe_codegen_model counts what that source does; keep both in step with the templates. */
#include "engine/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/element.h"
#include "engine/error.h"
#include "engine/strbuf.h"

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

/* What the physics of this action reads and writes. */
typedef struct action_needs {
  int jacobian; /* the linearization fe_df rather than fe_f */
  int need_u;   /* gather the state u */
  int need_x;   /* gather the coordinates */
  int has_f0;   /* the term against basis values is present */
  int need_f;   /* evaluate the auxiliary fields */
  double phys_flops;
} action_needs;

static action_needs needs_of(const fe_kernel_spec *s)
{
  const fe_physics *p = s->pde;
  action_needs n;
  n.jacobian = s->action != FE_ACTION_RESIDUAL;
  n.need_u = n.jacobian ? p->nonlinear : 1;
  n.need_x = p->uses_x;
  n.has_f0 = n.jacobian ? p->df0 != NULL : p->f0 != NULL;
  n.need_f = p->nfields > 0 && p->uses_fields;
  n.phys_flops = n.jacobian ? p->flops_df : p->flops_f;
  return n;
}

/* A table as a constant array, full precision. */
static void emit_table(fe_strbuf *b, const char *name, const double *v, int n)
{
  fe_strbuf_printf(b, "FE_CONSTANT real %s[%d] = {", name, n);
  for (int i = 0; i < n; i++)
    fe_strbuf_printf(b, "%s%.17g", i % 4 ? ", " : (i ? ",\n  " : "\n  "), v[i]);
  fe_strbuf_append(b, "};\n");
}

/* One physics function: zero the outputs, then the two statement bodies. */
static void emit_physics_fn(fe_strbuf *b, const char *sig, const char *o0, const char *body0,
                            const char *o1, const char *body1)
{
  fe_strbuf_printf(b, "FE_DEVICE void %s\n{\n", sig);
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
    emit_table(b, name, B, nq * nb);
    snprintf(name, sizeof name, "DF%d", i);
    emit_table(b, name, D, nq * nb * dim);
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

int fe_codegen_action(const fe_kernel_spec *s, const char *backend, const char *preamble,
                      char **src)
{
  const fe_element *el = &s->V->elem;
  const fe_quadrature *Q = s->quad;
  const fe_physics *p = s->pde;
  int nb = el->nbasis, nq = Q->npoints, dim = el->dim, nc = s->V->ncomp;
  action_needs n = needs_of(s);
  fe_strbuf b = {0};

  fe_strbuf_printf(&b, "/* felab kernel: %s of %s on %s (%s cells), %s backend, %s precision */\n",
                   fe_action_name(s->action), p->name, s->V->name, fe_cell_name(el->cell), backend,
                   fe_precision_name(s->prec));
  fe_strbuf_printf(&b, "#define FE_DOUBLE %d\n#define FE_COLORED %d\n", s->prec == FE_DOUBLE,
                   s->colored);
  fe_strbuf_printf(&b, "#define DIM %d /* space dimension */\n#define NB %d /* basis functions */\n"
                       "#define NQ %d /* quadrature points (degree %d) */\n"
                       "#define NC %d /* components */\n#define NF (NC * (1 + DIM))\n"
                       "#define BLOCK %d /* cells per work group */\n",
                   dim, nb, nq, Q->degree, nc, s->block);
  fe_strbuf_printf(&b, "#define GEO_AFFINE %d\n#define NGQ %d\n#define GEO_STRIDE %d\n",
                   s->geo_affine, s->geo_affine ? 1 : nq, fe_geo_stride(dim));
  fe_strbuf_printf(&b, "#define FE_JACOBIAN %d\n#define NEED_U %d\n#define NEED_X %d\n#define HAS_F0 %d\n",
                   n.jacobian, n.need_u, n.need_x, n.has_f0);
  fe_strbuf_printf(&b, "#define FE_DIAGONAL %d\n", s->action == FE_ACTION_DIAGONAL);
  if (s->patch) {
    fe_strbuf_printf(&b, "#define MAXL %d /* nodes of the largest patch */\n"
                         "#define GEO_RECOMPUTE %d\n#define MAXC %d /* places in the runs of "
                         "the largest patch */\n#define LANES %d /* nodes whose runs are "
                         "interleaved */\n",
                     s->maxl, s->geo_recompute, s->maxc, s->lanes);
    fe_strbuf_printf(&b, "#define WALK %d\n#define WALK_CELLS %d /* cells per walk */\n"
                         "#define ITEMS %d /* walks per patch */\n"
                         "#define MAXE %d /* events of the largest patch */\n"
                         "#define GROUP_ITEMS %d /* work items per group */\n",
                     s->walk > 0, s->walk > 0 ? s->walk : 1, s->walk > 0 ? s->items : 1,
                     s->walk > 0 ? s->maxe : 1, s->group_items);
  }
  fe_strbuf_printf(&b, "#define NAUX %d /* per-cell constants a[] */\n", p->naux);
  fe_strbuf_printf(&b, "#define NK %d /* named constants k[] */\n", p->nconst);
  fe_strbuf_printf(&b, "#define NFV %d /* auxiliary field values f[] */\n#define NEED_F %d\n",
                   fe_physics_field_values(p), n.need_f);
  fe_strbuf_printf(&b, "#define NBF %d /* auxiliary field map entries per cell */\n", fe_codegen_field_map_width(p));
  fe_strbuf_append(&b, preamble);
  fe_strbuf_append(&b, "#ifndef M_PI\n#define M_PI 3.14159265358979323846\n#endif\n");

  /* tabulation at the quadrature points */
  double *B = malloc(sizeof(double) * nq * nb), *D = malloc(sizeof(double) * nq * nb * dim);
  if (!B || !D) {
    free(B);
    free(D);
    fe_strbuf_free(&b);
    FE_ERROR(FE_ERR_MEM, "out of host memory while tabulating");
  }
  for (int q = 0; q < nq; q++) fe_element_eval(el, Q->points + q * dim, B + q * nb, D + q * nb * dim);
  fe_strbuf_printf(&b, "\n/* tabulation: B[q*NB + b] = phi_b(xi_q), D[(q*NB + b)*DIM + i] = "
                       "d phi_b / d xi_i (xi_q), W[q] = weights */\n");
  emit_table(&b, "B", B, nq * nb);
  emit_table(&b, "D", D, nq * nb * dim);
  emit_table(&b, "W", Q->weights, nq);
  free(B);
  free(D);

  fe_strbuf_printf(&b, "\n/* physics: %s */\n", p->description ? p->description : p->name);
  emit_physics_fn(&b, "fe_f(const real *u, const real *du, const real *x, const real *a, "
                      "const real *k, const real *f, const real *df, real *f0, real *f1)",
                  "f0", p->f0, "f1", p->f1);
  emit_physics_fn(&b,
                  "fe_df(const real *u, const real *du, const real *w, const real *dw, "
                  "const real *x, const real *a, const real *k, const real *f, const real *df, "
                  "real *df0, real *df1)",
                  "df0", p->df0, "df1", p->df1);
  if (n.need_f && emit_fields(&b, s)) {
    fe_strbuf_free(&b);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  fe_strbuf_append(&b, "\n");
  fe_strbuf_append(&b, fe_kernel_template("common"));
  fe_strbuf_append(&b, "\n");
  fe_strbuf_append(&b, fe_kernel_template(s->patch ? "patch"
                                          : s->action == FE_ACTION_DIAGONAL ? "diagonal"
                                                                            : "integrate"));
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
                  "f0", p->f0, "f1", p->f1);
  emit_physics_fn(&b, "fe_df(const real *u, const real *du, const real *w, const real *dw, "
                      "const real *x, const real *a, const real *k, const real *f, const real *df, "
                      "real *df0, real *df1)",
                  "df0", p->df0, "df1", p->df1);
  fe_strbuf_append(&b, "FE_KERNEL(fe_check)(FE_GLOBAL real *y)\n{\n  FE_GROUPS_BEGIN\n"
                       "  real z[NC * DIM * 2 + NAUX + NK + NFV * (DIM + 1) + 8] = {0}, o[NC * (DIM + 1)];\n"
                       "  fe_f(z, z, z, z, z, z, z, o, o + NC);\n  fe_df(z, z, z, z, z, z, z, z, z, o, o + NC);\n"
                       "  y[0] = o[0];\n  FE_GROUPS_END\n}\n");
  char *src;
  FE_CHECK(fe_strbuf_finish(&b, &src));
  fe_module *mod = NULL;
  double secs;
  int cached;
  int rc = be->ops->compile(be->impl, src, &mod, &secs, &cached);
  free(src);
  if (mod) be->ops->module_free(be->impl, mod);
  return rc;
}

/* Flops of fe_eval for one field at one point (common.knl). */
static double eval_flops(int nb, int dim, int nc, int need)
{
  return need ? nc * (nb * (2.0 + 2.0 * dim) + 2.0 * dim * dim) : 0;
}

/* Flops of fe_map_factors at one point: the Jacobian from the node coordinates, then its
 * inverse by cofactors and its determinant (patch.knl). */
static double map_flops(int nb, int dim)
{
  static const double inverse[4] = {0, 1, 8, 42};
  return 2.0 * nb * dim * dim + inverse[dim];
}

void fe_codegen_model(const fe_kernel_spec *s, int ndirichlet, double *flops, double *bytes)
{
  const fe_space *V = s->V;
  int nb = V->elem.nbasis, nq = s->quad->npoints, dim = V->elem.dim, nc = V->ncomp;
  double ncells = V->mesh->ncells, nnodes = V->nnodes, ndofs = V->ndofs;
  double w = (double)fe_precision_size(s->prec);
  double ngroups = (ncells + s->block - 1) / s->block;
  action_needs n = needs_of(s);
  double xf = n.need_x ? 2.0 * nb * dim : 0; /* coordinates at a point */
  double ff = 0, fbytes = 0; /* auxiliary fields at a point; their values and maps */
  for (int i = 0; n.need_f && i < s->pde->nfields; i++) {
    const fe_space *F = s->pde->field_space[i];
    ff += eval_flops(F->elem.nbasis, dim, s->pde->field_ncomp[i], 1);
    fbytes += F->ndofs * w + ncells * F->elem.nbasis * 4.0;
  }
  xf += ff;
  int recompute = s->patch && s->geo_recompute;
  double geof = recompute ? (s->geo_affine ? 1 : nq) * map_flops(nb, dim) : 0;
  double per_cell;
  if (s->action == FE_ACTION_DIAGONAL && s->patch) {
    /* per point: x, u; per (q, b): the basis gradient; per (q, b, k): physics, contraction */
    per_cell = geof + nq * (xf + eval_flops(nb, dim, nc, n.need_u) + 1 + nb * 2.0 * dim * dim +
                            nb * nc * (n.phys_flops + (n.has_f0 ? 1 : 0) + 2.0 * dim + 2)) +
               nb * nc;
  } else if (s->action == FE_ACTION_DIAGONAL) {
    /* per (b, k, q): x, u, the direction's gradient, physics, contraction, accumulate */
    double per_q = xf + eval_flops(nb, dim, nc, n.need_u) + 2.0 * dim * dim + n.phys_flops +
                   (n.has_f0 ? 1 : 0) + 2.0 * dim + 3;
    per_cell = nb * nc * (nq * per_q + 1);
  } else {
    /* quadrature phase per point, then basis phase per (b, k) */
    double per_q = xf + eval_flops(nb, dim, nc, n.need_u) +
                   (n.jacobian ? eval_flops(nb, dim, nc, 1) : 0) + n.phys_flops + 1 +
                   nc * ((n.has_f0 ? 1 : 0) + dim * (2.0 * dim + 1));
    double per_b = nq * ((n.has_f0 ? 2.0 : 0) + 2.0 * dim) + 1;
    per_cell = geof + nq * per_q + nb * nc * per_b;
  }
  *flops = ncells * per_cell;
  /* minimal traffic: each array once */
  double in = (n.need_u ? ndofs : 0) + (s->action == FE_ACTION_APPLY ? ndofs : 0);
  double common = ncells * s->pde->naux * w + in * w + ndofs * w + ndirichlet * (4.0 + 3 * w) +
                  fbytes + s->pde->nconst * w;
  if (s->patch) {
    /* the patches' node lists, their run words and offsets, the cells' local numbers, and
     * the patch sums added into y once per patch node */
    *flops += s->patch_nodes * nc;
    double geo = recompute ? 0 : ncells * (s->geo_affine ? 1 : nq) * fe_geo_stride(dim) * w;
    /* walks read their events (4 bytes each), one item per cell a word per (cell, function) */
    double cellmap = s->walk > 0 ? s->walk_events * 4.0 + (ngroups + 1) * 4.0
                                 : ncells * nb * 4.0;
    *bytes = common + s->patch_nodes * 8.0 + (ngroups + 1) * 4.0 + cellmap + geo +
             (n.need_x || recompute ? nnodes * 3 * w : 0);
    return;
  }
  double geo = ncells * (s->geo_affine ? 1 : nq) * fe_geo_stride(dim) * w;
  *bytes = common + ncells * nb * 4.0 + geo + (n.need_x ? nnodes * 3 * w : 0) + ngroups * 4.0;
}
