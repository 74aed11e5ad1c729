/* A split space's exchange on a device (engine/parallel/exchange.c; issue 48): the lists of
 * fe_dist (the shared entries in the send layout, their sources in the ranks' order, the
 * entries another rank owns) held on one backend in one precision, with the exchange
 * module's two kernels (engine/codegen/kernels/exchange.knl). A vector of the space is never
 * read whole: the device packs the entries a list names into a small buffer, the host reads
 * that, and writes back only what the neighbours sent. One code for every backend. */
#ifndef FE_EXCHANGE_H
#define FE_EXCHANGE_H

#include "engine/parallel/dist.h"

typedef struct fe_dist_device fe_dist_device;

typedef enum { FE_DIST_SEND, FE_DIST_NOTOWNED } fe_dist_list;

/* d's lists on be in prec: made (compiled, written) on first use, then kept with d. */
int fe_dist_device_get(const fe_dist *d, fe_backend *be, fe_precision prec, fe_dist_device **dev);
void fe_dist_device_free(fe_dist_device *dev);
/* The entries of list of x (and, where y is not NULL, of y after them), gathered on the
 * device and read into out (the list's length, twice with y), as doubles. */
int fe_dist_device_gather(fe_dist_device *dev, fe_dist_list list, const fe_vector *x,
                          const fe_vector *y, double *out);
/* y's shared entries made their sums in the ranks' order: recv (d->nsend doubles, the
 * neighbours' shares in the send layout) written to the device, the sums there. */
int fe_dist_device_sum(fe_dist_device *dev, const double *recv, fe_vector *y);

#endif
