/* felab vectors: thin wrappers over a backend buffer and the backend's vector slots. */
#include "engine/solve/vector.h"

#include <math.h>
#include <stdlib.h>

#include "engine/core/error.h"
#include "engine/parallel/dist.h"

int fe_vector_create(fe_backend *be, fe_precision prec, int n, fe_vector **out)
{
  FE_ASSERT(n >= 0, FE_ERR_ARG, "a vector cannot have %d entries", n);
  if (prec == FE_DOUBLE && !be->info.fp64)
    FE_ERROR(FE_ERR_UNAVAILABLE, "%s (%s) has no double precision; use precision = \"single\"",
             be->name, be->info.name);
  fe_vector *x;
  FE_CALLOC(x, 1, "vector");
  x->be = be;
  x->prec = prec;
  x->n = n;
  int rc = be->ops->alloc(be->impl, (size_t)n * fe_precision_size(prec), &x->buf);
  if (!rc) rc = be->ops->fill(be->impl, &x->buf, (size_t)n, prec, 0.0);
  if (rc) {
    if (x->buf.ptr) be->ops->release(be->impl, &x->buf);
    free(x);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = x;
  return 0;
}

void fe_vector_free(fe_vector *x)
{
  if (!x) return;
  if (x->refs > 0) {
    x->refs--;
    return;
  }
  x->be->ops->release(x->be->impl, &x->buf);
  free(x);
}

void fe_vector_retain(const fe_vector *x)
{
  if (x) ((fe_vector *)x)->refs++;
}

int fe_vector_set(fe_vector *x, const double *values)
{
  if (x->prec == FE_DOUBLE)
    return x->be->ops->write(x->be->impl, &x->buf, 0, (size_t)x->n * sizeof(double), values);
  float *tmp;
  FE_MALLOC(tmp, x->n, "vector conversion");
  for (int i = 0; i < x->n; i++) tmp[i] = (float)values[i];
  int rc = x->be->ops->write(x->be->impl, &x->buf, 0, (size_t)x->n * sizeof(float), tmp);
  free(tmp);
  return rc;
}

int fe_vector_get(const fe_vector *x, double *values)
{
  if (x->prec == FE_DOUBLE)
    return x->be->ops->read(x->be->impl, &x->buf, 0, (size_t)x->n * sizeof(double), values);
  float *tmp;
  FE_MALLOC(tmp, x->n, "vector conversion");
  int rc = x->be->ops->read(x->be->impl, &x->buf, 0, (size_t)x->n * sizeof(float), tmp);
  for (int i = 0; !rc && i < x->n; i++) values[i] = tmp[i];
  free(tmp);
  return rc;
}

int fe_vector_convert(const fe_vector *x, fe_backend *be, fe_precision prec, fe_vector **out)
{
  fe_vector *y;
  FE_CHECK(fe_vector_create(be, prec, x->n, &y));
  y->dist = x->dist;
  if (be == x->be && prec == x->prec) {
    int rc = fe_vector_copy(y, x);
    if (rc) fe_vector_free(y);
    FE_CHECK(rc);
    *out = y;
    return 0;
  }
  double *tmp = malloc(sizeof(double) * (size_t)(x->n ? x->n : 1));
  int rc = tmp ? fe_vector_get(x, tmp) : FE_ERR_MEM;
  if (!rc) rc = fe_vector_set(y, tmp);
  free(tmp);
  if (rc) {
    fe_vector_free(y);
    if (rc == FE_ERR_MEM && !fe_error_code()) FE_ERROR(FE_ERR_MEM, "out of host memory");
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = y;
  return 0;
}

int fe_vector_duplicate(const fe_vector *x, fe_vector **out)
{
  FE_CHECK(fe_vector_create(x->be, x->prec, x->n, out));
  (*out)->dist = x->dist;
  return 0;
}

int fe_vector_check_compatible(const fe_vector *x, const fe_vector *y, const char *what)
{
  if (x->n != y->n)
    FE_ERROR(FE_ERR_ARG, "%s: vectors of different sizes (%d and %d)", what, x->n, y->n);
  if (x->be != y->be || x->prec != y->prec)
    FE_ERROR(FE_ERR_ARG, "%s: vectors on %s/%s and %s/%s (convert one with :to())", what,
             x->be->name, fe_precision_name(x->prec), y->be->name, fe_precision_name(y->prec));
  return 0;
}

int fe_vector_copy(fe_vector *dst, const fe_vector *src)
{
  FE_CHECK(fe_vector_check_compatible(dst, src, "copy"));
  return dst->be->ops->copy(dst->be->impl, &dst->buf, &src->buf,
                            (size_t)src->n * fe_precision_size(src->prec));
}

int fe_vector_fill(fe_vector *x, double value)
{
  return x->be->ops->fill(x->be->impl, &x->buf, (size_t)x->n, x->prec, value);
}

int fe_vector_axpby(fe_vector *y, double a, const fe_vector *x, double b)
{
  FE_CHECK(fe_vector_check_compatible(y, x, "axpy"));
  return y->be->ops->axpby(y->be->impl, &y->buf, a, &x->buf, b, (size_t)y->n, y->prec);
}

int fe_vector_pointwise(fe_vector *z, const fe_vector *x, const fe_vector *y, int divide)
{
  FE_CHECK(fe_vector_check_compatible(z, x, "pointwise"));
  FE_CHECK(fe_vector_check_compatible(z, y, "pointwise"));
  return z->be->ops->pointwise(z->be->impl, &z->buf, &x->buf, &y->buf, divide, (size_t)z->n,
                               z->prec);
}

/* The split space of x or y (their reductions go over the ranks), or NULL. */
static const fe_dist *dist_of(const fe_vector *x, const fe_vector *y)
{
  return x->dist ? x->dist : y ? y->dist : NULL;
}

int fe_vector_dot(const fe_vector *x, const fe_vector *y, double *result)
{
  FE_CHECK(fe_vector_check_compatible(x, y, "dot"));
  const fe_dist *d = dist_of(x, y);
  FE_CHECK(fe_dist_reduce_begin(d, x, y)); /* a split space's correction: queued first */
  int rc = x->be->ops->dot(x->be->impl, &x->buf, &y->buf, (size_t)x->n, x->prec, result);
  if (rc) fe_dist_reduce_cancel(d, x);
  FE_CHECK(rc);
  return fe_dist_reduce_dot(d, x, y, result);
}

int fe_vector_norm(const fe_vector *x, double *result)
{
  double s;
  FE_CHECK(fe_dist_reduce_begin(x->dist, x, x));
  int rc = x->be->ops->dot(x->be->impl, &x->buf, &x->buf, (size_t)x->n, x->prec, &s);
  if (rc) fe_dist_reduce_cancel(x->dist, x);
  FE_CHECK(rc);
  FE_CHECK(fe_dist_reduce_dot(x->dist, x, x, &s));
  *result = sqrt(s);
  return 0;
}

int fe_vector_min(const fe_vector *x, double *result)
{
  FE_CHECK(x->be->ops->reduce(x->be->impl, &x->buf, (size_t)x->n, x->prec, FE_REDUCE_MIN, result));
  return fe_dist_reduce_minmax(x->dist, result, 0);
}

int fe_vector_max(const fe_vector *x, double *result)
{
  FE_CHECK(x->be->ops->reduce(x->be->impl, &x->buf, (size_t)x->n, x->prec, FE_REDUCE_MAX, result));
  return fe_dist_reduce_minmax(x->dist, result, 1);
}

int fe_vector_get_entry(const fe_vector *x, int i, double *value)
{
  FE_ASSERT(i >= 0 && i < x->n, FE_ERR_ARG, "index %d is outside the vector (0..%d)", i, x->n - 1);
  size_t w = fe_precision_size(x->prec);
  if (x->prec == FE_DOUBLE) return x->be->ops->read(x->be->impl, &x->buf, i * w, w, value);
  float f;
  FE_CHECK(x->be->ops->read(x->be->impl, &x->buf, i * w, w, &f));
  *value = f;
  return 0;
}

/* work, or a new vector like x when work is NULL (*made says which, to free it). */
static int vector_work(const fe_vector *x, fe_vector *work, const char *what, fe_vector **z,
                       int *made)
{
  *made = !work;
  if (work) {
    FE_CHECK(fe_vector_check_compatible(x, work, what));
    *z = work;
    return 0;
  }
  return fe_vector_duplicate(x, z);
}

/* Without the backend's fused slot: two axpby, z = r ./ d into work, and the dots. */
static int vector_cg_update_unfused(fe_vector *x, fe_vector *r, const fe_vector *p,
                                    const fe_vector *q, const fe_vector *d, double alpha,
                                    fe_vector *work, double *rr, double *rz)
{
  FE_CHECK(fe_vector_axpby(x, alpha, p, 1.0));  /* x <- x + alpha p */
  FE_CHECK(fe_vector_axpby(r, -alpha, q, 1.0)); /* r <- r - alpha q */
  FE_CHECK(fe_vector_dot(r, r, rr));
  if (!d) {
    *rz = *rr; /* z = r */
    return 0;
  }
  fe_vector *z;
  int made;
  FE_CHECK(vector_work(x, work, "cg_update", &z, &made));
  int rc = fe_vector_pointwise(z, r, d, 1); /* z <- r ./ d */
  if (!rc) rc = fe_vector_dot(r, z, rz);
  if (made) fe_vector_free(z);
  FE_CHECK(rc);
  return 0;
}

int fe_vector_cg_update(fe_vector *x, fe_vector *r, const fe_vector *p, const fe_vector *q,
                        const fe_vector *d, double alpha, fe_vector *work, double *rr,
                        double *rz)
{
  FE_CHECK(fe_vector_check_compatible(x, r, "cg_update"));
  FE_CHECK(fe_vector_check_compatible(x, p, "cg_update"));
  FE_CHECK(fe_vector_check_compatible(x, q, "cg_update"));
  if (d) FE_CHECK(fe_vector_check_compatible(x, d, "cg_update"));
  const fe_backend_ops *ops = x->be->ops;
  if (!ops->cg_update) return vector_cg_update_unfused(x, r, p, q, d, alpha, work, rr, rz);
  FE_CHECK(ops->cg_update(x->be->impl, &x->buf, &r->buf, &p->buf, &q->buf, d ? &d->buf : NULL,
                          alpha, (size_t)x->n, x->prec, rr, rz));
  /* a split space's: both sums over the owners and the ranks at once */
  return fe_dist_reduce_cg(dist_of(x, r), r, d, rr, rz);
}

int fe_vector_cg_direction(fe_vector *p, const fe_vector *r, const fe_vector *d, double beta,
                           fe_vector *work)
{
  FE_CHECK(fe_vector_check_compatible(p, r, "cg_direction"));
  if (d) FE_CHECK(fe_vector_check_compatible(p, d, "cg_direction"));
  const fe_backend_ops *ops = p->be->ops;
  if (ops->cg_direction)
    return ops->cg_direction(p->be->impl, &p->buf, &r->buf, d ? &d->buf : NULL, beta,
                             (size_t)p->n, p->prec);
  if (!d) return fe_vector_axpby(p, 1.0, r, beta); /* p <- r + beta p */
  fe_vector *z;
  int made;
  FE_CHECK(vector_work(p, work, "cg_direction", &z, &made));
  int rc = fe_vector_pointwise(z, r, d, 1);      /* z <- r ./ d */
  if (!rc) rc = fe_vector_axpby(p, 1.0, z, beta); /* p <- z + beta p */
  if (made) fe_vector_free(z);
  FE_CHECK(rc);
  return 0;
}

struct fe_cg_device {
  fe_backend *be;
  void *state;
};

int fe_vector_cg_begin(const fe_vector *x, double rz, fe_cg_device **g)
{
  *g = NULL;
  const fe_backend_ops *ops = x->be->ops;
  if (!ops->cg_begin || !ops->cg_pq || !ops->cg_step || !ops->cg_wait || !ops->cg_end ||
      x->n == 0 || (x->dist && !ops->cg_split)) /* a split space's: its sums through the host */
    return 0;
  const char *host = getenv("FELAB_CG_HOST"); /* 1: the host's loop (to compare the two) */
  if (host && *host == '1') return 0;
  fe_cg_device *G = calloc(1, sizeof *G);
  if (!G) FE_ERROR(FE_ERR_MEM, "out of host memory for CG's scalars");
  G->be = x->be;
  int rc = ops->cg_begin(x->be->impl, rz, &G->state);
  if (rc) {
    free(G);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *g = G;
  return 0;
}

int fe_vector_cg_pq(fe_cg_device *g, const fe_vector *p, const fe_vector *q, int it)
{
  FE_CHECK(fe_vector_check_compatible(p, q, "cg_pq"));
  FE_ASSERT(p->be == g->be, FE_ERR_ARG, "cg_pq: the vectors are on %s, CG's scalars on %s",
            p->be->name, g->be->name);
  return g->be->ops->cg_pq(g->be->impl, g->state, &p->buf, &q->buf, (size_t)p->n, p->prec, it);
}

int fe_vector_cg_step(fe_cg_device *g, fe_vector *x, fe_vector *r, fe_vector *p,
                      const fe_vector *q, const fe_vector *d, int it, int half)
{
  FE_CHECK(fe_vector_check_compatible(x, r, "cg_step"));
  FE_CHECK(fe_vector_check_compatible(x, p, "cg_step"));
  FE_CHECK(fe_vector_check_compatible(x, q, "cg_step"));
  if (d) FE_CHECK(fe_vector_check_compatible(x, d, "cg_step"));
  FE_ASSERT(x->be == g->be, FE_ERR_ARG, "cg_step: the vectors are on %s, CG's scalars on %s",
            x->be->name, g->be->name);
  return g->be->ops->cg_step(g->be->impl, g->state, &x->buf, &r->buf, &p->buf, &q->buf,
                             d ? &d->buf : NULL, (size_t)x->n, x->prec, it, half);
}

int fe_vector_cg_split(fe_cg_device *g, int it, int what, double *v, const fe_node_sum *ns)
{
  FE_ASSERT(g->be->ops->cg_split, FE_ERR_INTERNAL, "%s keeps no split CG steps", g->be->name);
  return g->be->ops->cg_split(g->be->impl, g->state, it, what, v, ns);
}

int fe_vector_cg_wait(fe_cg_device *g, int it, double *pq, double *rr, double *rz)
{
  return g->be->ops->cg_wait(g->be->impl, g->state, it, pq, rr, rz);
}

int fe_vector_cg_parts(fe_cg_device *g, int it, fe_buffer *parts, int *slot)
{
  parts->ptr = NULL;
  parts->bytes = 0;
  *slot = -1;
  if (!g->be->ops->cg_parts) return 0;
  return g->be->ops->cg_parts(g->be->impl, g->state, it, parts, slot);
}

void fe_vector_cg_end(fe_cg_device *g)
{
  if (!g) return;
  g->be->ops->cg_end(g->be->impl, g->state);
  free(g);
}
