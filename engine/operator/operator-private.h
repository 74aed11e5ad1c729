/* Private to engine/operator/operator.c and the operator-*.c files beside it (choose, data,
 * geometry, action, transpose): what one of them defines and another calls. The strategies
 * see engine/operator/strategy.h; callers outside see engine/operator/operator.h. */
#ifndef FELAB_OPERATOR_PRIVATE_H
#define FELAB_OPERATOR_PRIVATE_H

#include "engine/operator/strategy.h"

/* operator.c: the backend and precision of an action (o NULL: the defaults). */
int fe_operator_resolve(const fe_action_opts *o, fe_backend **be, fe_precision *prec);

/* operator.c: the realization for the options o, made on first use; why says which strategy
 * and why. */
int fe_realization_get(fe_operator *A, const fe_action_opts *o, fe_realization **out, char *why,
                       size_t nwhy);

/* operator.c: forget r (one of A's realizations) and free it. */
void fe_realization_drop(fe_operator *A, fe_realization *r);

/* operator-choose.c: the strategy an action runs with on be in prec; why says which and why. */
int fe_operator_pick_strategy(fe_operator *A, const fe_action_opts *o, fe_backend *be,
                              fe_precision prec, const fe_strategy **out, char *why, size_t nwhy);

/* operator-data.c: the physics' named constants as they are now, on r's device. */
int fe_upload_params(const fe_operator *A, fe_realization *d);

#endif
