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

/* calibration-store.c: the processes of one machine measure one at a time (the ranks of an
 * mpirun, several sessions): an exclusive lock on the calibration folder, held while a
 * process measures, so that each measures alone and the rest read what it stored (a
 * process that finds no calibration takes the lock, then reads the store again). Returns
 * the lock's descriptor, or -1 where there is none (no cache folder): then each measures. */
int perf_calibration_lock(void);
void perf_calibration_unlock(int fd);
/* Whether be's stored calibration was written at or after `since` (the real-time clock's
 * seconds, time's or clock_gettime(CLOCK_REALTIME)'s): another process measured it while
 * this one waited for the lock. */
int perf_calibration_stored_since(const fe_backend *be, double since);

/* calibration-store.c: what calibration c of precision prec takes from the backend's device
 * info, not measured nor stored (measured or loaded alike): gpu, tables_l1, the caches' sizes
 * and the reals one SIMD register of the kernels holds. */
void perf_calibration_info(const fe_backend *be, fe_precision prec, fe_calibration *c);

#endif
