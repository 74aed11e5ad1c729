/* felab preconditioners: the table of units and what they share (engine/solve/precond.h). */
#include "engine/solve/precond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/solve/precond/units.h"

static const fe_precond_kind *const kinds[] = {
  &fe_precond_none, &fe_precond_jacobi,
  &fe_precond_chebyshev,
  &fe_precond_amg,
  &fe_precond_twoscale,
};

const fe_precond_kind *const *fe_precond_kinds(int *n)
{
  *n = (int)(sizeof kinds / sizeof kinds[0]);
  return kinds;
}

void fe_precond_opts_default(fe_precond_opts *o)
{
  memset(o, 0, sizeof *o);
  o->name = "jacobi";
  o->aggressive = -1;
  o->interp = -1;
}

const fe_precond_kind *fe_precond_find(const char *name)
{
  int n;
  const fe_precond_kind *const *k = fe_precond_kinds(&n);
  for (int i = 0; i < n; i++)
    if (!strcmp(k[i]->name, name)) return k[i];
  return NULL;
}

void fe_precond_names(char *out, size_t size)
{
  int n;
  const fe_precond_kind *const *k = fe_precond_kinds(&n);
  size_t used = 0;
  out[0] = 0;
  for (int i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", k[i]->name);
}

void fe_precond_free(fe_precond *P)
{
  if (!P) return;
  if (P->kind && P->kind->destroy) P->kind->destroy(P);
  fe_vector_free(P->diag);
  fe_vector_free(P->at);
  free(P);
}

int fe_precond_create(fe_operator *A, const fe_vector *at, const fe_action_opts *act,
                      const fe_precond_opts *o, fe_precond **out)
{
  *out = NULL;
  const char *name = o && o->name ? o->name : "jacobi";
  const fe_precond_kind *kind = fe_precond_find(name);
  if (!kind) {
    char names[200];
    fe_precond_names(names, sizeof names);
    FE_ERROR(FE_ERR_ARG, "unknown preconditioner '%s' (%s)", name, names);
  }
  fe_precond *P = calloc(1, sizeof *P);
  if (!P) FE_ERROR(FE_ERR_MEM, "out of host memory for a preconditioner");
  P->kind = kind;
  P->A = A;
  P->act = *act;
  P->act.nolog = 1;
  if (o) P->o = *o;
  else fe_precond_opts_default(&P->o);
  P->o.name = kind->name;
  /* the state on P's own backend and precision: the actions would convert it at every call */
  fe_backend *be;
  int rc = fe_backend_get(act->backend, &be);
  fe_precision prec = act->precision >= 0 ? (fe_precision)act->precision : fe_precision_default();
  if (!rc && at) rc = fe_vector_convert(at, be, prec, &P->at);
  if (!rc) { /* pinned: a later device.use() must not move P's default */
    P->act.backend = be->name;
    P->act.precision = (int)prec;
  }
  double t0 = fe_clock();
  if (!rc) rc = kind->setup(P);
  P->setup_seconds = fe_clock() - t0;
  if (rc) {
    fe_precond_free(P);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  if (!P->describe[0]) snprintf(P->describe, sizeof P->describe, "%s", kind->name);
  *out = P;
  return 0;
}

int fe_precond_apply(fe_precond *P, const fe_vector *r, fe_vector **z)
{
  if (!*z) FE_CHECK(fe_vector_duplicate(r, z));
  double t0 = fe_clock();
  FE_CHECK(P->kind->apply(P, r, *z));
  P->apply_seconds += fe_clock() - t0;
  P->applications++;
  return 0;
}

int fe_precond_matches(const fe_precond *P, const fe_operator *A, const fe_action_opts *act)
{
  if (P->A != A) return 0;
  fe_backend *be;
  if (fe_backend_get(act->backend, &be)) return 0;
  int prec = act->precision >= 0 ? act->precision : (int)fe_precision_default();
  int pprec = P->act.precision >= 0 ? P->act.precision : (int)fe_precision_default();
  fe_backend *pbe;
  if (fe_backend_get(P->act.backend, &pbe)) return 0;
  return be == pbe && prec == pprec;
}
