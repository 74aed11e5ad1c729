/* The two preconditioners every solve knows: none (M = I) and Jacobi (M = diag J). CG and
 * the nonsymmetric methods fuse Jacobi into their vector updates through P->diag; apply is
 * for everyone else (Chebyshev's smoothing steps, twoscale's sums). */
#include "engine/core/error.h"
#include "engine/solve/precond/units.h"

static int none_setup(fe_precond *P)
{
  P->flops = 0;
  P->launches = 1;
  return 0;
}

static int none_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  (void)P;
  return fe_vector_copy(z, r);
}

static int jacobi_setup(fe_precond *P)
{
  fe_report rep;
  FE_CHECK(fe_operator_diagonal(P->A, P->at, &P->act, &P->diag, &rep));
  double w = (double)fe_precision_size(P->diag->prec), n = P->diag->n;
  P->flops = n;
  P->bytes = 3 * n * w;
  P->launches = 1;
  return 0;
}

static int jacobi_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  return fe_vector_pointwise(z, r, P->diag, 1);
}

const fe_precond_kind fe_precond_none = {
  "none", "no preconditioner (M = I)", none_setup, none_apply, NULL,
};

const fe_precond_kind fe_precond_jacobi = {
  "jacobi", "the diagonal of the Jacobian (M = diag J), fused into the solvers' updates",
  jacobi_setup, jacobi_apply, NULL,
};
