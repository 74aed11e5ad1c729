/* felab pointwise physics: what the weak form evaluates at one quadrature point.
 *   residual:  integral of  f0(u, du, x) . v  +  f1(u, du, x) : grad v
 *   Jacobian action in direction w:  df0(u, du, w, dw, x) . v  +  df1(u, du, w, dw, x) : grad v
 * Each is a C statement body spliced into every backend's kernel (docs/physics.md):
 *   inputs  u[NC], du[NC*DIM] (du[c*DIM + d] = d u_c / d x_d), x[3], a[NAUX] (per-cell
 *           constants), k[NK] (named constants), f[NFV] and df[NFV*DIM] (auxiliary fields
 *           and their gradients), and for the Jacobian w[NC], dw[NC*DIM];
 *   outputs f0[NC], f1[NC*DIM] (df0, df1 likewise).
 * The built-in C library writes bodies for any DIM; traced physics (physics-traced.c) writes
 * them for one dimension from an expression graph, with the blocks g0..g3 as well. */
#ifndef FE_PHYSICS_H
#define FE_PHYSICS_H

#define FE_PHYSICS_MAX_COMP 3   /* components of the unknown field */
#define FE_PHYSICS_MAX_FIELDS 3 /* auxiliary fields (vectors of other spaces) */

struct fe_vector;
struct fe_space;
struct fe_xgraph;
struct fe_mesh;
struct fe_quadrature;

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
  double nonfma_f, nonfma_df; /* of those, divisions, square roots and other calls */
  char *description;         /* one line: the equation in words */
  /* per-cell constants: the bodies read a[0 .. naux-1], taken from the cell's region */
  int naux;
  int nregions;              /* entries of the region table */
  char **region_names;       /* nregions names of cell regions (mesh tags) */
  double *region_values;     /* nregions x naux */
  char **aux_names;          /* naux names, or NULL */
  /* named constants k[0 .. nconst-1]: values change between calls without recompiling */
  int nconst;
  char **const_names;
  double *const_values;
  unsigned const_version;    /* bumped by fe_physics_set_constant */
  /* auxiliary fields: field i has field_ncomp[i] values f[field_off[i] ..] at each point */
  int nfields;
  char *field_names[FE_PHYSICS_MAX_FIELDS];
  int field_ncomp[FE_PHYSICS_MAX_FIELDS];
  const struct fe_vector *field_vec[FE_PHYSICS_MAX_FIELDS]; /* bound and held (fe_physics_bind) */
  const struct fe_space *field_space[FE_PHYSICS_MAX_FIELDS];
  int uses_fields;           /* some residual term reads f or df */
  int dim;                   /* 0: any dimension; else the one it was traced for */
  char *g[4];                /* Jacobian blocks g0..g3 as C statements (NULL: zero) */
  char *show;                /* f0, f1, g0..g3 as mathematics and C, with flops; or NULL */
  /* The adjoint: at a point the Jacobian action is [df0; df1] = M [w; dw] with
   * M = [g0 g1; g2 g3]; the transposed operator J^T runs M^T [w; dw] (fe_operator_transpose). */
  int symmetric;             /* 1: M = M^T at every point, J^T = J (traced, or known) */
  int has_adjoint;           /* 1: the transposed bodies below exist (traced physics) */
  char *adf0, *adf1;         /* M^T's action: adf0_j = g0_ij w_i + g2_ij dw_i, adf1_j = g1_ij
                              * w_i + g3_ij dw_i (NULL: zero) */
  char *ag[4];               /* M^T's blocks: g0^T, g2^T, g1^T, g3^T */
  double flops_adf;          /* flops per point of adf0 and adf1 */
  double nonfma_adf;
  int degree_adf0, degree_adf1;
  struct fe_physics *adjoint; /* made by fe_physics_adjoint on first use, freed with this one */
  /* Coefficients: expressions of x, a and k alone that the host evaluates before any solve
   * (fe_physics_check_coefficients), each a C expression (numbers are reals, expr.h) */
  int ncoef;
  char **coef_exprs;
  char **coef_names;         /* how an error names each: kappa = "1/0" */
  /* 1: some body or coefficient is C a user typed (raw bodies, string coefficients beyond
   * fe_c_expression_safe's reach): its kernels say so (FE_USER_C) and the backends give
   * their first launch a trial run */
  int user_c;
} fe_physics;

/* What a trace gives: roots in the graph g for f0[ncomp] and f1[ncomp*dim]. */
typedef struct fe_trace {
  struct fe_xgraph *g;
  int dim, ncomp;
  const int *f0, *f1;
  const char *name, *description;
  int naux;                    /* per-cell constants a[i] */
  const char *const *aux_names;
  int nconst;                  /* named constants k[i] */
  const char *const *const_names;
  const double *const_values;
  int nfield_values;           /* auxiliary field values f[i], for printing */
  const char *const *field_names;
  const int *field_degree;      /* degree in x of f[i] (the field's order), or NULL: 0 */
  const int *field_grad_degree; /* degree in x of df[i*dim + d], or NULL: 0 */
} fe_trace;

/* Differentiate, emit and count a traced physics (engine/physics/physics-traced.c). Per-region
 * values and auxiliary fields are added by the caller afterwards. */
int fe_physics_from_trace(const fe_trace *t, fe_physics **out);
/* Copy the names of per-cell constants and the names and values of named constants. */
int fe_physics_set_names(fe_physics *p, int naux, const char *const *aux_names, int nconst,
                         const char *const *const_names, const double *const_values);
/* Change named constant `name`; an unknown name is an error listing the known ones. */
int fe_physics_set_constant(fe_physics *p, const char *name, double value);
/* The physics whose Jacobian action is p's transposed pointwise (M^T above), at the same
 * state, with p's regions, constants and bound fields (brought up to date at every call);
 * owned by p. A physics written in C (no trace) has none: an error naming it. */
int fe_physics_adjoint(const fe_physics *p, const fe_physics **out);
/* Bind field f of p to vector v of space V: p holds v (fe_vector_retain) until it binds
 * another or is freed, so closing the vector's handle leaves p reading valid memory. The
 * space is the caller's to keep alive. */
void fe_physics_bind(fe_physics *p, int f, const struct fe_vector *v, const struct fe_space *V);
/* Number of auxiliary field values (the sum of field_ncomp). */
int fe_physics_field_values(const fe_physics *p);

/* -div(kappa grad u) = source, kappa and source C expressions of x[0..2] (or numbers), whose
 * numbers are reals ("1/2" is 0.5: fe_c_reals in expr.h); both become coefficients to check. */
int fe_physics_poisson(const char *kappa, const char *source, fe_physics **out);
/* The same with kappa constant per cell region: kappa[i] in the region named names[i]. */
int fe_physics_poisson_regions(const char *const *names, const double *kappa, int n,
                               const char *source, fe_physics **out);
void fe_physics_free(fe_physics *p);
/* Add a coefficient to check: a C expression of x[0..2], a[..] and k[..] and its name for
 * errors. */
int fe_physics_add_coefficient(fe_physics *p, const char *name, const char *c_expr);
/* A named error (FE_ERR_ARG) for the first coefficient that is not finite where it is
 * evaluated: "physics poisson: kappa = "1/0" is inf everywhere", "... is nan at
 * x = (0.5, 0.5, 0.5), cell 123". Those that do not read x are evaluated once (once a region
 * where they read a); with a mesh m and a rule q, those that read x at every point of q in
 * every cell of m, x from the cell's map (straight or curved), in double. A coefficient
 * beyond fe_cexpr_read's reach is not checked (it is compiled as written). Run once an
 * operator: a hex of 64 points costs about 64 evaluations of the expression and 64 maps. */
int fe_physics_check_coefficients(const fe_physics *p, const struct fe_mesh *m,
                                  const struct fe_quadrature *q);
/* Arithmetic operations in a C expression or statement list, each as written once (a loop
 * body is not multiplied by its trip count): + - * / (unary minus and compound assignments
 * included) and each function call count 1; literals, names, indexing (anything inside [ ]),
 * comparisons, keywords such as for and if, and the loop steps ++ and -- count 0. */
double fe_count_flops(const char *c_code);
/* Of those, the ones that do not issue as an FMA: each division and each call of a function
 * that is more than a compare or a sign (sqrt, exp, log, pow, sin, ...; not fabs, fmin, fmax,
 * floor, ceil, copysign). */
double fe_count_nonfma(const char *c_code);

#endif
