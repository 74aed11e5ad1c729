/* The preconditioner units the table in engine/solve/precond.c lists, one file each here. */
#ifndef FE_PRECOND_UNITS_H
#define FE_PRECOND_UNITS_H

#include "engine/solve/precond.h"

extern const fe_precond_kind fe_precond_none;      /* basic.c */
extern const fe_precond_kind fe_precond_jacobi;    /* basic.c */
extern const fe_precond_kind fe_precond_chebyshev; /* chebyshev.c */
extern const fe_precond_kind fe_precond_amg;       /* amg.c */
extern const fe_precond_kind fe_precond_twoscale;  /* twoscale.c */

#endif
