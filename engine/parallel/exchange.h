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

/* d's lists on be in prec: made (compiled, written) on first use, then kept with d. */
int fe_dist_device_get(const fe_dist *d, fe_backend *be, fe_precision prec, fe_dist_device **dev);
void fe_dist_device_free(fe_dist_device *dev);
/* An exchange of y's shares: begin gathers its shared entries on the device, reads them and
 * posts the messages to the nnb neighbours ranks[k] (counts[k] doubles each, both ways);
 * end waits for them, writes the neighbours' shares to the device and makes y's shared
 * entries their sums in the ranks' order. One exchange at a time on a device. */
int fe_dist_device_begin(fe_dist_device *dev, const fe_vector *y, int nnb, const int *ranks,
                         const int *counts);
int fe_dist_device_end(fe_dist_device *dev, fe_vector *y);
/* Whether d's shares on be in prec go device to device (the interprocess path), once an
 * exchange ran there. */
int fe_dist_device_direct(const fe_dist *d, const fe_backend *be, fe_precision prec);
/* The messages of the exchange begun, waited for (end does it where this did not). */
int fe_dist_device_wait(fe_dist_device *dev);
/* Of the last exchange's wait, the seconds its gather's mark took (the ipc path; else 0). */
double fe_dist_device_gathered(const fe_dist_device *dev);
/* The messages waited for and, device to device, the neighbours' shares' copies queued (in
 * the backend's current queue; end does it where this did not). */
int fe_dist_device_fetch(fe_dist_device *dev);
/* Over the entries another rank owns, summed on the device: the launch queues the sums (mode
 * 0 sum x y (y NULL: x x); mode 1 both sum x x; mode 2 sum x x and sum x (x / y): CG's (r, r)
 * and (r, z) with z = r ./ y), the read waits for them and adds the groups' sums (a few
 * hundred bytes) into out[0] and out[1] (0 where nothing was queued). */
int fe_dist_device_dot_launch(fe_dist_device *dev, const fe_vector *x, const fe_vector *y,
                              int mode);
int fe_dist_device_dot_read(fe_dist_device *dev, double out[2]);
/* CG's next sum over the ranks on the devices (backend.h's fe_node_sum) into *ns, the
 * correction queued (fe_dist_device_dot_launch) taken off where corrected; *on 0 where the
 * ranks have no mailboxes (set up on the first call, every rank's: collective); ns NULL:
 * *on alone. */
int fe_dist_device_node(fe_dist_device *dev, int corrected, fe_node_sum *ns, int *on);
/* Whether a correction is queued and not yet read; drop: forget it (its sums never read). */
int fe_dist_device_dot_queued(const fe_dist_device *dev);
void fe_dist_device_dot_drop(fe_dist_device *dev);

#endif
