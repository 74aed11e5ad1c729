/* Strategy "ebe" (element by element, Kiss et al.): the element matrices of the Jacobian
 * computed once (engine/matrix.c) and kept on the device; every Jacobian action multiplies
 * each cell's matrix by the cell's entries of the direction and adds the rows into y
 * atomically (fe_ebe in engine/kernels/elemat.knl). No global matrix and no pattern: the
 * setup is one kernel. Like csr it applies when the Jacobian does not depend on the state,
 * and its residual and diagonal are matrix-free (fe_stored_matrix_other). The transposed
 * action BiCG needs comes from the transposed physics' own element matrices, which are the
 * transposes of these (fe_operator_transpose). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/error.h"
#include "engine/matrix.h"
#include "engine/strategy.h"

#define EBE_ITEMS 128 /* EM_ITEMS of elemat.knl */

typedef struct ebe_data {
  fe_elemats *K;
  fe_buffer cells; /* the mesh's cell map, in the order of K */
} ebe_data;

static int ebe_configure(fe_realization *r, const fe_action_opts *o)
{
  ebe_data *d;
  FE_CALLOC(d, 1, "ebe data");
  r->data = d;
  r->block = o->block > 0 ? o->block : 32; /* the block of the elemat module's spec */
  r->colored = 0;
  return 0;
}

static int ebe_setup(fe_realization *r)
{
  ebe_data *d = r->data;
  const fe_space *V = r->A->V;
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = r->be->name;
  o.precision = (int)r->prec;
  o.nolog = 1;
  fe_report rep;
  FE_CHECK(fe_element_matrices(r->A, NULL, &o, NULL, NULL, &d->K, &rep));
  return fe_upload_ints(r->be, V->cell_nodes, (size_t)V->mesh->ncells * V->elem.nbasis, &d->cells);
}

static void ebe_release(fe_realization *r)
{
  ebe_data *d = r->data;
  if (!d) return;
  fe_elemats_free(d->K);
  if (d->cells.ptr) r->be->ops->release(r->be->impl, &d->cells);
  free(d);
  r->data = NULL;
}

static const char *ebe_entry(fe_action a)
{
  (void)a;
  return "fe_ebe"; /* the residual and the diagonal go through "transpose" */
}

static int ebe_source(const fe_realization *r, fe_action a, const char *preamble, char **src)
{
  (void)a, (void)preamble; /* one module for every action: fe_ebe and fe_dirichlet */
  return fe_elemat_source(r, 1, src);
}

static int ebe_integrate(fe_realization *r, fe_action a, const fe_vector *u, const fe_vector *w,
                         fe_vector *y, int *launches)
{
  if (a != FE_ACTION_APPLY) return fe_stored_matrix_other(r, a, u, y, launches);
  ebe_data *d = r->data;
  long long rows = (long long)d->K->ncells * d->K->n;
  fe_arg args[6] = {
      {.kind = FE_ARG_INT, .i = (rows + EBE_ITEMS - 1) / EBE_ITEMS},
      {.kind = FE_ARG_INT, .i = d->K->ncells},
      {.kind = FE_ARG_BUFFER, .buf = &d->cells},
      {.kind = FE_ARG_BUFFER, .buf = &d->K->vals},
      {.kind = FE_ARG_BUFFER, .buf = &w->buf},
      {.kind = FE_ARG_BUFFER, .buf = &y->buf},
  };
  FE_CHECK(r->be->ops->launch(r->be->impl, r->kernel[a], (size_t)args[0].i, EBE_ITEMS, 6, args,
                              r->prec, NULL));
  (*launches)++;
  return 0;
}

/* 2 flops per matrix entry; the matrices and the cell map read once, w gathered and y added
 * (at least once each). */
static void ebe_estimate(const fe_operator *A, const fe_backend *be, fe_precision prec,
                         fe_action a, double *flops, double *bytes)
{
  if (a != FE_ACTION_APPLY) {
    fe_strategy_transpose.estimate(A, be, prec, a, flops, bytes);
    return;
  }
  const fe_space *V = A->V;
  double w = (double)fe_precision_size(prec), nc = V->mesh->ncells;
  double n = (double)V->elem.nbasis * V->ncomp;
  *flops = 2 * nc * n * n;
  *bytes = nc * n * n * w + nc * V->elem.nbasis * 4.0 + 3.0 * V->ndofs * w;
}

static void ebe_count(const fe_realization *r, fe_action a, double *flops, double *bytes)
{
  ebe_estimate(r->A, r->be, r->prec, a, flops, bytes);
}

const fe_strategy fe_strategy_ebe = {
    .name = "ebe",
    .summary = "element by element: the element matrices stored on the device, each action "
               "multiplies them cell by cell and adds atomically (Kiss et al.)",
    .applies = fe_stored_matrix_applies,
    .configure = ebe_configure,
    .setup = ebe_setup,
    .release = ebe_release,
    .source = ebe_source,
    .entry = ebe_entry,
    .integrate = ebe_integrate,
    .count = ebe_count,
    .estimate = ebe_estimate,
    .measured = fe_stored_matrix_measured,
};
