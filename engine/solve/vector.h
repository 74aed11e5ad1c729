/* felab vectors: n reals of one precision on one backend. */
#ifndef FE_VECTOR_H
#define FE_VECTOR_H

#include "backends/backend.h"

typedef struct fe_vector {
  fe_backend *be;
  fe_precision prec;
  int n;
  fe_buffer buf;
  int refs; /* holders beside its owner (fe_vector_retain): a physics that binds it as a field */
  /* the split space's it belongs to (engine/parallel/dist.h: its reductions count each node
   * once, over the ranks), or NULL; borrowed from the space, inherited by its copies */
  const struct fe_dist *dist;
} fe_vector;

int fe_vector_create(fe_backend *be, fe_precision prec, int n, fe_vector **out);
/* Drop one hold of x: the memory goes with the last (the owner's free when nobody retained x). */
void fe_vector_free(fe_vector *x);
/* Hold x past its owner's free (one more fe_vector_free to come). The count is not x's value,
 * so a const vector may be held. */
void fe_vector_retain(const fe_vector *x);
int fe_vector_set(fe_vector *x, const double *values); /* from host doubles */
int fe_vector_get(const fe_vector *x, double *values); /* to host doubles */
/* A copy on backend be in precision prec (the same backend and precision: a plain copy). */
int fe_vector_convert(const fe_vector *x, fe_backend *be, fe_precision prec, fe_vector **out);
int fe_vector_duplicate(const fe_vector *x, fe_vector **out); /* same layout, zeroed */
int fe_vector_copy(fe_vector *dst, const fe_vector *src);
int fe_vector_fill(fe_vector *x, double value);
int fe_vector_axpby(fe_vector *y, double a, const fe_vector *x, double b); /* y <- a x + b y */
int fe_vector_pointwise(fe_vector *z, const fe_vector *x, const fe_vector *y, int divide);
int fe_vector_dot(const fe_vector *x, const fe_vector *y, double *result);
int fe_vector_norm(const fe_vector *x, double *result);
int fe_vector_min(const fe_vector *x, double *result);
int fe_vector_max(const fe_vector *x, double *result);
int fe_vector_get_entry(const fe_vector *x, int i, double *value);
/* The update of one preconditioned CG step, fused where the backend can: x <- x + alpha p,
 * r <- r - alpha q, then rr = (r, r) and rz = (r, z) of the new r with z = r ./ d (z = r
 * when d is NULL), in double. work (may be NULL) serves only backends without the fused
 * slot, which need z stored (one is made and freed when work is NULL). */
int fe_vector_cg_update(fe_vector *x, fe_vector *r, const fe_vector *p, const fe_vector *q,
                        const fe_vector *d, double alpha, fe_vector *work, double *rr,
                        double *rz);
/* CG's new direction, fused where the backend can: p <- r ./ d + beta p (p <- r + beta p
 * when d is NULL); work as in fe_vector_cg_update. */
int fe_vector_cg_direction(fe_vector *p, const fe_vector *r, const fe_vector *d, double beta,
                           fe_vector *work);
/* CG with its scalars on the device, where x's backend can (backend.h's cg_begin ...
 * cg_end): no step of the iteration waits for the host, which reads step it's (p, q),
 * (r, r) and (r, z) while the device runs step it + 1 (on a synchronous backend, the cpu,
 * right after step it). fe_vector_cg_begin sets *g to NULL where the backend cannot (the
 * solver then goes through the host: fe_vector_cg_update). A split space's steps (x->dist)
 * have their scalars added over the ranks between their halves: fe_vector_cg_step's half (0
 * the whole step, 1 the update, 2 the direction, 3 the update whose sums a node's sum copies)
 * and fe_vector_cg_split (backend.h's cg_split: what FE_CG_PQ_READ, FE_CG_PQ_PUT,
 * FE_CG_SUMS_PUT). */
typedef struct fe_cg_device fe_cg_device;
int fe_vector_cg_begin(const fe_vector *x, double rz, fe_cg_device **g);
int fe_vector_cg_pq(fe_cg_device *g, const fe_vector *p, const fe_vector *q, int it);
int fe_vector_cg_step(fe_cg_device *g, fe_vector *x, fe_vector *r, fe_vector *p,
                      const fe_vector *q, const fe_vector *d, int it, int half);
int fe_vector_cg_split(fe_cg_device *g, int it, int what, double *v, const fe_node_sum *ns);
int fe_vector_cg_wait(fe_cg_device *g, int it, double *pq, double *rr, double *rz);
void fe_vector_cg_end(fe_cg_device *g);
/* Step it's (p, q) partial sums, zeroed, for the apply to add into (fe_action_opts.pq):
 * parts->ptr NULL where the backend has none (cg_pq then makes (p, q) as before). */
int fe_vector_cg_parts(fe_cg_device *g, int it, fe_buffer *parts, int *slot);
/* Check two vectors can be combined (same length; converts nothing): error names both. */
int fe_vector_check_compatible(const fe_vector *x, const fe_vector *y, const char *what);

/* A new vector on be in precision prec holding, at every node of V, the C expressions
 * expr[0 .. V->ncomp-1] of the node's coordinates x[0], x[1], x[2] (x[2] = 0 in 2D; the
 * kernels' math: sin, exp, pow, M_PI, ...), computed by a kernel generated for them on be
 * (compiled once, then from the kernel cache). An expression with ; { } or # is refused; one
 * that does not compile is an FE_ERR_COMPILE error naming the generated line. */
struct fe_space;
int fe_vector_interpolate(const struct fe_space *V, const char *const *expr, fe_backend *be,
                          fe_precision prec, fe_vector **out);
/* The same from C statements that set `fe_v[0 .. V->ncomp-1]` from x[0..2] (`real`
 * temporaries allowed): a traced function of x (shell/lua-fe.c), emitted by fe_x_emit_c. */
int fe_vector_interpolate_code(const struct fe_space *V, const char *body, fe_backend *be,
                               fe_precision prec, fe_vector **out);

#endif
