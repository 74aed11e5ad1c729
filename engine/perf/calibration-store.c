/* felab performance: a backend's calibration as stored in the cache directory, one file per
 * backend and device, one line per precision: its path, its fields, reading it (a file that
 * does not parse is dropped whole) and writing it. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/perf/perf-private.h"

/* Where a backend's calibration is stored: one file per backend, device and compute units
 * (the cpu's threads: fe_device_hash), "v18": the ceilings per micro-benchmark and the
 * latencies, the cpu's multiply-adds fed from L1, its indexed loops at first touches and from
 * L1, its cycle in llvm-mca's core and the last-level cache a call keeps, a GPU's L1 lookups,
 * the host's small copies each way (v16: the cpu's FMA loop over eight of its kernels'
 * registers, each loop 40 ms at least; v17: csr's rows through their offsets, the cpu's
 * large buffers on huge pages; v18: the cached triad's rate at every size of the last-level
 * cache's sweep, curve_llc); a file of an earlier form is not read. */
static int calibration_path(const fe_backend *be, char *path, size_t n)
{
  char dir[4096];
  FE_CHECK(fe_cache_dir("calibration", dir, sizeof dir));
  unsigned long long h = fe_device_hash(be);
  snprintf(path, n, "%s/%s-v18-%016llx.txt", dir, be->name, h);
  return 0;
}

/* The named numbers of a calibration line, in the order they are written. */
typedef struct calib_field {
  const char *key;
  size_t offset;
  int required; /* a rate that must be positive (launches and latencies may be 0) */
} calib_field;

static const calib_field calib_fields[] = {
    {"dram", offsetof(fe_calibration, gbytes), 1},
    {"l2", offsetof(fe_calibration, l2_gbytes), 1},
    {"shared", offsetof(fe_calibration, shared_gbytes), 1},
    {"fma", offsetof(fe_calibration, gflops), 1},
    {"scalar", offsetof(fe_calibration, scalar_gflops), 1},
    {"nonfma", offsetof(fe_calibration, nonfma_gops), 1},
    {"atomics", offsetof(fe_calibration, atomic_gops), 1},
    {"constant", offsetof(fe_calibration, constant_gops), 1},
    {"launch", offsetof(fe_calibration, launch_us), 0},
    {"sync", offsetof(fe_calibration, sync_us), 0},
    {"dram_latency", offsetof(fe_calibration, dram_latency_us), 0},
    {"l2_latency", offsetof(fe_calibration, l2_latency_us), 0},
    {"phase_latency", offsetof(fe_calibration, phase_latency_us), 0},
    {"indexed", offsetof(fe_calibration, indexed_gops), 0},
    {"indexed_l1", offsetof(fe_calibration, indexed_l1_gops), 0},
    {"indexed_llc", offsetof(fe_calibration, indexed_llc_gops), 0},
    {"rows", offsetof(fe_calibration, rows_gbytes), 0},
    {"padded", offsetof(fe_calibration, padded_gflops), 0},
    {"l1_requests", offsetof(fe_calibration, l1_request_gops), 0},
    {"l1_lines", offsetof(fe_calibration, l1_line_gops), 0},
    {"cycle", offsetof(fe_calibration, cycle_ns), 0},
    {"read", offsetof(fe_calibration, read_us), 0},
    {"read_rate", offsetof(fe_calibration, read_gbytes), 0},
    {"write", offsetof(fe_calibration, write_us), 0},
    {"write_rate", offsetof(fe_calibration, write_gbytes), 0},
    {"llc_keep", offsetof(fe_calibration, llc_keep_bytes), 0},
    {"llc_rate", offsetof(fe_calibration, llc_gbytes), 0},
};
#define NCALIB_FIELDS (sizeof calib_fields / sizeof calib_fields[0])
static const char *curve_keys[5] = {"curve_dram", "curve_shared", "curve_fma", "curve_lanes",
                                    "curve_llc"};

/* The stored curve k (curve_keys' order: the four of curve[], then llc_curve). */
static double *curve_of(fe_calibration *c, int k)
{
  return k < 4 ? c->curve[k] : c->llc_curve;
}

/* Parse one stored line "<precision> key value key value ... curve_x a,b,c,d,e,f ..." into
 * *c (valid set); else a reason in why. */
static void parse_calibration_line(char *line, fe_precision *p, fe_calibration *c, char *why,
                                   size_t nwhy)
{
  char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
  memset(c, 0, sizeof *c);
  if (!tok || fe_precision_parse(tok, p)) {
    fe_error_clear();
    snprintf(why, nwhy, "unknown precision '%s'", tok ? tok : "");
    return;
  }
  int seen = 0;
  while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
    char *val = strtok_r(NULL, " \t\r\n", &save);
    if (!val) {
      snprintf(why, nwhy, "'%s' has no value", tok);
      return;
    }
    int known = 0;
    for (size_t i = 0; i < NCALIB_FIELDS && !known; i++)
      if (!strcmp(tok, calib_fields[i].key)) {
        char *end;
        double v = strtod(val, &end);
        double *dst = (double *)((char *)c + calib_fields[i].offset);
        if (*end || !isfinite(v) || v < 0 || (calib_fields[i].required && v <= 0)) {
          snprintf(why, nwhy, "'%s %s': a rate that is not positive", tok, val);
          return;
        }
        *dst = v;
        seen |= 1 << i;
        known = 1;
      }
    for (int k = 0; k < 5 && !known; k++)
      if (!strcmp(tok, curve_keys[k])) {
        char *q = val;
        for (int j = 0; j < FE_CURVE_POINTS; j++) {
          char *end;
          double v = strtod(q, &end);
          /* 0: a size not measured (curve_llc's sweep stops where the calibration's arrays
           * end: an Intel VM that reports 480 MiB of L3 measured four of its six sizes) */
          if (end == q || !isfinite(v) || v < 0 || (j == 0 && v == 0) ||
              (j < FE_CURVE_POINTS - 1 && *end != ',')) {
            snprintf(why, nwhy, "'%s %s' is not %d numbers >= 0, the first positive", tok, val,
                     FE_CURVE_POINTS);
            return;
          }
          curve_of(c, k)[j] = v;
          q = end + 1;
        }
        known = 1;
      }
    if (!known) {
      snprintf(why, nwhy, "unknown field '%s'", tok);
      return;
    }
  }
  if (seen != (1 << NCALIB_FIELDS) - 1) {
    snprintf(why, nwhy, "a ceiling is missing");
    return;
  }
  c->valid = 1;
}

/* Read a stored calibration: one line per precision. A file that does not parse (a field
 * unknown or missing, a rate that is not positive and finite) is dropped whole, with a
 * word on stderr: the backend is measured again when a prediction needs it, and the new
 * measurement is stored. */
int fe_perf_load_calibration(fe_backend *be)
{
  char path[4200];
  FE_CHECK(calibration_path(be, path, sizeof path));
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  fe_calibration stored[FE_NPRECISIONS];
  memset(stored, 0, sizeof stored);
  char line[1024], why[320] = "", reason[256] = "";
  int n = 0;
  while (!why[0] && fgets(line, sizeof line, f)) {
    fe_calibration c;
    fe_precision p = FE_DOUBLE;
    n++;
    if (strspn(line, " \t\r\n") == strlen(line)) continue; /* blank */
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(why, sizeof why, "line %d is too long", n);
      break;
    }
    parse_calibration_line(line, &p, &c, reason, sizeof reason);
    if (!c.valid) snprintf(why, sizeof why, "line %d: %s", n, reason);
    else stored[p] = c;
  }
  if (!why[0] && ferror(f)) snprintf(why, sizeof why, "cannot be read");
  fclose(f);
  if (why[0]) {
    fe_cache_drop(path, why);
    return 0;
  }
  for (int p = 0; p < FE_NPRECISIONS; p++)
    if (stored[p].valid) {
      be->calib[p] = stored[p];
      perf_calibration_info(be, (fe_precision)p, &be->calib[p]);
    }
  return 0;
}

void perf_calibration_info(const fe_backend *be, fe_precision prec, fe_calibration *c)
{
  c->gpu = be->info.is_gpu;
  c->tables_l1 = be->info.tables_l1;
  c->llc_bytes = (double)be->info.llc_bytes;
  c->l1_bytes = (double)be->info.l1_bytes;
  c->vector_lanes = (double)be->info.vector_bytes[prec] / (double)fe_precision_size(prec);
}

int perf_calibration_lock(void)
{
  char dir[4096], path[4200];
  if (fe_cache_dir("calibration", dir, sizeof dir)) {
    fe_error_clear(); /* no cache: nothing stored to share, each process measures its own */
    return -1;
  }
  snprintf(path, sizeof path, "%s/lock", dir);
  return fe_cache_lock(path);
}

void perf_calibration_unlock(int fd)
{
  fe_cache_unlock(fd);
}

int perf_calibration_stored_since(const fe_backend *be, double since)
{
  char path[4200];
  struct stat st;
  if (calibration_path(be, path, sizeof path)) {
    fe_error_clear();
    return 0;
  }
  if (stat(path, &st)) return 0;
  return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec >= since;
}

/* Rewrite the stored calibration of a backend with what it holds now (written aside, then
 * renamed into place, so a reader never sees half a file). */
int perf_save_calibration(const fe_backend *be)
{
  char path[4200], tmp[4300];
  FE_CHECK(calibration_path(be, path, sizeof path));
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return 0; /* a read-only cache only costs a recalibration next session */
  int ok = 1;
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    const fe_calibration *c = &be->calib[p];
    if (!c->valid) continue;
    ok = fprintf(f, "%s", fe_precision_name((fe_precision)p)) > 0 && ok;
    for (size_t i = 0; i < NCALIB_FIELDS; i++)
      ok = fprintf(f, " %s %.6g", calib_fields[i].key,
                   *(const double *)((const char *)c + calib_fields[i].offset)) > 0 && ok;
    for (int k = 0; k < 5; k++) {
      const double *v = curve_of((fe_calibration *)c, k);
      if (!(v[0] > 0)) continue;
      ok = fprintf(f, " %s ", curve_keys[k]) > 0 && ok;
      for (int j = 0; j < FE_CURVE_POINTS; j++)
        ok = fprintf(f, "%s%.4g", j ? "," : "", v[j]) > 0 && ok;
    }
    ok = fputc('\n', f) != EOF && ok;
  }
  ok = !fclose(f) && ok;
  if (!ok || rename(tmp, path)) remove(tmp); /* a failed write costs a recalibration only */
  return 0;
}
