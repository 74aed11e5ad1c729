/* felab: a field from C expressions of x, computed where the vector lives. V:interpolate with a
 * string comes here: one generated kernel (a thread per node) instead of a Lua call per node,
 * and no host-to-device copy of the values. An expression's numbers are reals, as in a
 * coefficient (engine/physics/expr.h: "1/2" is 0.5); statements (a body) are C as written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/physics/expr.h"
#include "engine/perf/perf.h"
#include "engine/fem/space.h"
#include "engine/operator/strategy.h"
#include "engine/core/strbuf.h"
#include "engine/solve/vector.h"

#define INTERP_BLOCK 256 /* nodes per work group */

/* The kernel's source: the expressions (or C statements setting fe_v[0 .. NC-1]), the
 * backend's preamble, one loop over the nodes. */
static int interpolate_source(const fe_space *V, const char *const *expr, const char *body,
                              fe_backend *be, fe_precision prec, char **src)
{
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab kernel: interpolate on %s (%d components), %s backend, %s "
                       "precision */\n", V->name, V->ncomp, be->name, fe_precision_name(prec));
  int tried = body != NULL; /* C as written, or an expression beyond the host's reader */
  for (int k = 0; !body && k < V->ncomp; k++) tried |= !fe_c_expression_safe(expr[k], 3, 0, 0);
  if (tried) fe_strbuf_append(&b, "#define FE_USER_C 1 /* the expressions a user typed: tried first */\n");
  fe_strbuf_printf(&b, "#define FE_DOUBLE %d\n#define FE_COLORED 0\n#define BLOCK %d\n#define NC %d\n",
                   prec == FE_DOUBLE, INTERP_BLOCK, V->ncomp);
  fe_strbuf_append(&b, be->ops->preamble(be->impl, prec));
  fe_strbuf_append(&b, "#ifndef M_PI\n#define M_PI 3.14159265358979323846\n#endif\n");
  /* the only name an expression sees is x: the kernel's own carry an fe_ prefix */
  fe_strbuf_append(&b, "FE_KERNEL(fe_interpolate)(const int fe_ngroups, const int fe_n,\n"
                       "                          FE_GLOBAL const real *FE_RESTRICT fe_coords,\n"
                       "                          FE_GLOBAL real *fe_y)\n{\n  FE_GROUPS_BEGIN\n"
                       "  FE_OUTER(fe_g, fe_ngroups) {\n    FE_INNER(fe_t, BLOCK) {\n"
                       "      const int fe_i = fe_g * BLOCK + fe_t;\n      if (fe_i < fe_n) {\n"
                       "        FE_GLOBAL const real *fe_p = fe_coords + (size_t)fe_i * 3;\n"
                       "        const real x[3] = {fe_p[0], fe_p[1], fe_p[2]};\n        (void)x;\n");
  if (body) {
    fe_strbuf_append(&b, "        real fe_v[NC];\n");
    fe_strbuf_append(&b, body);
    fe_strbuf_append(&b, "        for (int fe_k = 0; fe_k < NC; fe_k++) fe_y[(size_t)fe_i * NC + fe_k] = fe_v[fe_k];\n");
  }
  for (int k = 0; !body && k < V->ncomp; k++) { /* numbers are reals: "1/2" is 0.5 */
    fe_strbuf_printf(&b, "        fe_y[(size_t)fe_i * NC + %d] = (real)(", k);
    fe_c_reals(expr[k], &b);
    fe_strbuf_append(&b, ");\n");
  }
  fe_strbuf_append(&b, "      }\n    }\n  }\n  FE_GROUPS_END\n}\n");
  return fe_strbuf_finish(&b, src);
}

typedef struct coords_job {
  const fe_space *V;
} coords_job;

static int coords_fill(void *ctx, void *out, fe_precision prec)
{
  const fe_space *V = ((const coords_job *)ctx)->V;
  size_t n = (size_t)V->nnodes * 3;
  if (prec == FE_DOUBLE) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) ((double *)out)[i] = V->node_coords[i];
  } else {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) ((float *)out)[i] = (float)V->node_coords[i];
  }
  return 0;
}

/* The field of the expressions or of the statements, on be in prec. */
static int interpolate_run(const fe_space *V, const char *const *expr, const char *body,
                           fe_backend *be, fe_precision prec, fe_vector **out)
{
  *out = NULL;
  char *src;
  FE_CHECK(interpolate_source(V, expr, body, be, prec, &src));
  fe_module *mod = NULL;
  fe_kernel *kern = NULL;
  fe_buffer coords = {0};
  fe_vector *y = NULL;
  double compile_s;
  int cached;
  int rc = fe_compile(be, src, &mod, &compile_s, &cached);
  free(src);
  if (rc) { /* name what the user wrote */
    if (body) fe_error_context("a traced function of x");
    else if (V->ncomp == 1) fe_error_context("the expression '%s'", expr[0]);
    else fe_error_context("the expressions of %d components", V->ncomp);
  }
  if (!rc) rc = be->ops->kernel(be->impl, mod, "fe_interpolate", &kern);
  coords_job job = {V};
  /* the space's own coordinates where the backend can read host memory in place (cpu, double) */
  int wrapped = !rc && prec == FE_DOUBLE && be->ops->wrap;
  if (wrapped)
    rc = be->ops->wrap(be->impl, V->node_coords, sizeof(double) * 3 * (size_t)V->nnodes, &coords);
  else if (!rc)
    rc = fe_fill_reals(be, prec, (size_t)V->nnodes * 3, &coords, coords_fill, &job);
  if (!rc) rc = fe_vector_create(be, prec, V->ndofs, &y);
  if (!rc) y->dist = V->dist; /* a split space's (engine/parallel/dist.h) */
  if (!rc) {
    int ng = (V->nnodes + INTERP_BLOCK - 1) / INTERP_BLOCK;
    size_t gs = INTERP_BLOCK > be->info.max_group ? be->info.max_group : INTERP_BLOCK;
    fe_arg args[4] = {{.kind = FE_ARG_INT, .i = ng}, {.kind = FE_ARG_INT, .i = V->nnodes},
                      {.kind = FE_ARG_BUFFER, .buf = &coords}, {.kind = FE_ARG_BUFFER, .buf = &y->buf}};
    rc = be->ops->launch(be->impl, kern, (size_t)ng, gs, 4, args, prec, NULL);
  }
  if (!rc && be->ops->finish) rc = be->ops->finish(be->impl); /* before the module goes */
  if (coords.ptr && !wrapped) be->ops->release(be->impl, &coords);
  if (mod) be->ops->module_free(be->impl, mod);
  if (rc) {
    fe_vector_free(y);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = y;
  return 0;
}

int fe_vector_interpolate(const fe_space *V, const char *const *expr, fe_backend *be,
                          fe_precision prec, fe_vector **out)
{
  *out = NULL;
  for (int k = 0; k < V->ncomp; k++) {
    FE_ASSERT(expr[k] && *expr[k], FE_ERR_ARG, "component %d has no expression", k + 1);
    const char *bad = strpbrk(expr[k], ";{}#\n");
    FE_ASSERT(!bad, FE_ERR_ARG, "the expression '%s' holds '%s': it must be one C "
              "expression of x[0], x[1], x[2]", expr[k], *bad == '\n' ? "\\n" : (char[]){*bad, 0});
  }
  return interpolate_run(V, expr, NULL, be, prec, out);
}

int fe_vector_interpolate_code(const fe_space *V, const char *body, fe_backend *be,
                               fe_precision prec, fe_vector **out)
{
  *out = NULL;
  FE_ASSERT(body, FE_ERR_ARG, "no statements to interpolate");
  return interpolate_run(V, NULL, body, be, prec, out);
}
