/* Private to the .c files of engine/perf/ (calibrate.c, calibration-store.c, model.c): what
 * the pieces of the performance model share, the calibration run and its store. Nothing
 * outside engine/perf/ includes it; the API is perf.h. */
#ifndef FE_PERF_PRIVATE_H
#define FE_PERF_PRIVATE_H

#include "engine/perf/perf.h"

/* calibrate.c: compile the calibration kernels, run them, fill be->calib[prec] and store it
 * (rep: the calibration's report, or NULL). */
/* Calibrate be in prec; stored unless other processes took more than 15% of the host's CPU
 * time meanwhile and the calibration was not asked for (asked: device.calibrate). */
int perf_run_calibration(fe_backend *be, fe_precision prec, fe_report *rep, int asked);

/* calibration-store.c: rewrite the stored calibration of a backend with what it holds now. */
int perf_save_calibration(const fe_backend *be);

/* calibration-store.c: what calibration c of precision prec takes from the backend's device
 * info, not measured nor stored (measured or loaded alike): gpu, tables_l1, the caches' sizes
 * and the reals one SIMD register of the kernels holds. */
void perf_calibration_info(const fe_backend *be, fe_precision prec, fe_calibration *c);

#endif
