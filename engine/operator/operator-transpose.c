/* The transposed operator J^T (BiCG's shadow system), made once and kept by its operator.
 * Part of engine/operator/operator.c's operator. */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/fem/quadrature.h"
#include "engine/operator/operator.h"
#include "engine/operator/strategy.h"

/* ---- the transposed operator (BiCG's shadow system) ----
 * J^T has the same space, Dirichlet nodes and value as J; its physics is the pde's adjoint
 * (engine/physics/physics.h: M^T at every point) and its rules are A's own, so that (v, J w) and
 * (J^T v, w) are the same sums. Dirichlet rows (J w)_i = w_i with constrained entries of w
 * masked make J = P J0 P + (I - P), whose transpose is P J0^T P + (I - P): the same
 * treatment of the adjoint physics. */

/* Whether T's rules are A's (A:set_quadrature may have changed A's since T was made). */
static int same_rules(const fe_operator *A, const fe_operator *T)
{
  for (int a = 0; a < FE_NACTIONS; a++) {
    const fe_quadrature *p = &A->quad[a], *q = &T->quad[a];
    if (p->npoints != q->npoints || p->degree != q->degree || p->name != q->name) return 0;
    for (int i = 0; i < p->npoints * p->dim; i++)
      if (p->points[i] != q->points[i]) return 0;
  }
  return 1;
}

/* T's rules and boundary as A's (T made with none). */
static int transpose_copy(const fe_operator *A, fe_operator *T)
{
  for (int a = 0; a < FE_NACTIONS; a++) {
    const fe_quadrature *p = &A->quad[a];
    fe_quadrature *q = &T->quad[a];
    fe_quadrature_free(q);
    *q = *p;
    q->points = fe_alloc(sizeof(double) * (size_t)(p->npoints * p->dim + 1));
    q->weights = fe_alloc(sizeof(double) * (size_t)(p->npoints + 1));
    FE_ASSERT(q->points && q->weights, FE_ERR_MEM, "out of host memory for the transpose's rules");
    memcpy(q->points, p->points, sizeof(double) * (size_t)(p->npoints * p->dim));
    memcpy(q->weights, p->weights, sizeof(double) * (size_t)p->npoints);
  }
  free(T->dir_nodes);
  T->dir_nodes = fe_alloc(sizeof(int) * (size_t)(A->ndir + 1));
  FE_ASSERT(T->dir_nodes, FE_ERR_MEM, "out of host memory for the transpose's boundary");
  memcpy(T->dir_nodes, A->dir_nodes, sizeof(int) * (size_t)A->ndir);
  T->ndir = A->ndir;
  T->value = A->value;
  return 0;
}

int fe_operator_transpose(fe_operator *A, fe_operator **AT)
{
  *AT = NULL;
  if (A->pde->symmetric) { /* M = M^T pointwise: J^T = J */
    *AT = A->transposed = A;
    return 0;
  }
  const fe_physics *adj;
  FE_CHECK(fe_physics_adjoint(A->pde, &adj)); /* also brings its constants up to date */
  if (A->transposed && !same_rules(A, A->transposed)) {
    fe_operator_free(A->transposed);
    A->transposed = NULL;
  }
  if (!A->transposed) {
    fe_operator *T;
    FE_CHECK(fe_operator_create(A->V, adj, NULL, 0, A->value, &T));
    int rc = transpose_copy(A, T);
    if (rc) {
      fe_operator_free(T);
      return fe_error_push(rc, __FILE__, __LINE__, __func__);
    }
    A->transposed = T;
  }
  *AT = A->transposed;
  return 0;
}
