/* felab pointwise physics: what the weak form evaluates at one quadrature point.
 *   residual:  integral of  f0(u, du, x) . v  +  f1(u, du, x) : grad v
 *   Jacobian action in direction w:  df0(u, du, w, dw, x) . v  +  df1(u, du, w, dw, x) : grad v
 * Each is a C statement body spliced into every backend's kernel (docs/kernels.md):
 *   inputs  u[NC], du[NC*DIM] (du[c*DIM + d] = d u_c / d x_d), x[3], and for the
 *           Jacobian w[NC], dw[NC*DIM]; outputs f0[NC], f1[NC*DIM] (df0, df1 likewise).
 * Traced Lua physics (issue 5) will emit exactly these bodies. */
#ifndef FE_PHYSICS_H
#define FE_PHYSICS_H

typedef struct fe_physics {
  char name[32];
  int ncomp;
  char *f0, *f1, *df0, *df1; /* statement bodies; NULL when the term is identically zero */
  int uses_x;                /* some body reads x */
  int nonlinear;             /* df depends on u or du */
  int degree_f0, degree_f1;  /* polynomial degree in x of each term's coefficient (quadrature) */
  int degree_df0, degree_df1;
  double flops_f;            /* flops per point of f0 and f1 together (counted) */
  double flops_df;           /* flops per point of df0 and df1 together (counted) */
  char *description;         /* one line: the equation in words */
  /* per-cell constants: the bodies read a[0 .. naux-1], taken from the cell's region */
  int naux;
  int nregions;              /* entries of the region table */
  char **region_names;       /* nregions names of cell regions (mesh tags) */
  double *region_values;     /* nregions x naux */
} fe_physics;

/* -div(kappa grad u) = source, kappa and source C expressions of x[0..2] (or numbers). */
int fe_physics_poisson(const char *kappa, const char *source, fe_physics **out);
/* The same with kappa constant per cell region: kappa[i] in the region named names[i]. */
int fe_physics_poisson_regions(const char *const *names, const double *kappa, int n,
                               const char *source, fe_physics **out);
void fe_physics_free(fe_physics *p);
/* Arithmetic operations in a C expression or statement list: + - * / and each call of a
 * math function count 1; literals, names and indexing count 0. */
double fe_count_flops(const char *c_code);

#endif
