/* felab reports and the performance model: what a call counted, measured and predicted. */
#ifndef FE_PERF_H
#define FE_PERF_H

#include "backends/backend.h"

typedef struct fe_report {
  char action[32];      /* "residual", "apply", "diagonal", "cg", "calibrate", ... */
  char backend[16];
  char device[128];
  char precision[8];
  char strategy[16];
  char why[160];        /* why that strategy ran: asked, or the model's pick and its figures */
  char space[24];       /* "P2 on tet", "Q4^3 on hex": what was integrated ("" if none) */
  char quadrature[64];  /* the rule: "symmetric, 24 points, degree 6" ("" if none) */
  long long ncells, ndofs;
  double flops;             /* counted floating-point operations */
  double bytes;             /* minimal bytes the algorithm must move */
  double seconds;           /* measured kernel time */
  double compile_seconds;   /* JIT time (0 when cached) */
  double transfer_seconds;  /* host<->device copies this call made */
  double setup_seconds;     /* building device data (geometry, maps) */
  double predicted_seconds; /* roofline model */
  double peak_gbytes, peak_gflops; /* the ceilings the prediction used */
  char bound[16];           /* "memory" or "compute" */
  int launches;
  int iterations;           /* solvers */
} fe_report;

/* Zero rep, then its head: the action, the backend's name and device, the precision, the
 * strategy and why it ran. */
void fe_report_begin(fe_report *rep, const char *action, const fe_backend *be, fe_precision prec,
                     const char *strategy, const char *why);
/* Roofline prediction for one call into rep (uses rep->flops, bytes, launches and the
 * backend's calibration, calibrating it first if needed). */
int fe_perf_predict(fe_backend *be, fe_precision prec, fe_report *rep);
/* Measure the ceilings of a backend in one precision (stream triad + FMA kernels). */
int fe_perf_calibrate(fe_backend *be, fe_precision prec, fe_report *rep);
/* Load stored calibrations for this device from the cache dir (0 if none). */
int fe_perf_load_calibration(fe_backend *be);

double fe_report_gflops(const fe_report *r);
double fe_report_gbytes(const fe_report *r);
/* A readable block of a few lines. */
void fe_report_format(const fe_report *r, char *buf, size_t n);

/* session log (perf.log) */
void fe_perf_log_add(const fe_report *r);
int fe_perf_log_count(void);
const fe_report *fe_perf_log_get(int i);
void fe_perf_log_clear(void);

#endif
