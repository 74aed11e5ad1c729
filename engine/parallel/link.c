/* The link between mpirun's ranks, measured and stored (issue 48): ranks 0 and 1 exchanging a
 * message each way at once, as a split space's exchange does (MPI_Isend and MPI_Irecv, then
 * MPI_Waitall), at ten sizes from 8 bytes to 256 KiB, kept as measured (a message's time is
 * read off them: fe_link_message_seconds) and summed up as a latency (8 bytes) and a rate
 * (between the two largest), and an MPI_Allreduce of two doubles over every rank. Stored per
 * machine (its host name) in the cache's calibration folder, one line a rank count, beside
 * the backends' calibrations: `link-v2-<hash>.txt`, lines "ranks N latency us rate GB/s
 * allreduce us points bytes:us,...". The model of a
 * split space's exchange reads it (fe_perf_exchange); a session of one rank reads it too, for
 * what-ifs on N ranks (perf.compare). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/link.h"

static fe_link session; /* this session's (measured or read), valid once known */

/* The store's path: one file per host. */
static int link_path(char *path, size_t n)
{
  char dir[4096], host[256] = "";
  FE_CHECK(fe_cache_dir("calibration", dir, sizeof dir));
  if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
  snprintf(path, n, "%s/link-v1-%016llx.txt", dir, fe_hash_string(host, 0));
  return 0;
}

/* One stored line into *l (valid set where it parses): "ranks N latency us rate GB/s
 * allreduce us points bytes:us,bytes:us,...". */
static void parse_line(const char *line, fe_link *l)
{
  memset(l, 0, sizeof *l);
  int ranks, at = 0;
  double lat, rate, ar;
  if (sscanf(line, "ranks %d latency %lf rate %lf allreduce %lf points %n", &ranks, &lat, &rate,
             &ar, &at) != 4 || !at || ranks < 2 || !isfinite(lat) || !(lat > 0) ||
      !isfinite(rate) || rate < 0 || !isfinite(ar) || ar < 0)
    return;
  fe_link k = {.valid = 1, .ranks = ranks, .latency_us = lat, .gbytes = rate, .allreduce_us = ar};
  const char *p = line + at;
  while (k.npoints < FE_LINK_POINTS) {
    double b, t;
    int used = 0;
    if (sscanf(p, "%lf:%lf%n", &b, &t, &used) != 2 || !(b > 0) || !(t > 0) || !isfinite(t) ||
        (k.npoints && b <= k.point_bytes[k.npoints - 1]))
      return; /* a line that does not parse is not used */
    k.point_bytes[k.npoints] = b, k.point_us[k.npoints++] = t;
    p += used;
    if (*p != ',') break;
    p++;
  }
  if (k.npoints >= 2) *l = k;
}

int fe_link_stored(int ranks, fe_link *l)
{
  memset(l, 0, sizeof *l);
  char path[4200], line[256];
  FE_CHECK(link_path(path, sizeof path));
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    fe_link k;
    parse_line(line, &k);
    /* the line of `ranks` ranks, else the one of most ranks */
    if (k.valid && (!l->valid || k.ranks == ranks || (l->ranks != ranks && k.ranks > l->ranks)))
      *l = k;
  }
  fclose(f);
  return 0;
}

/* Rewrite the store with l's line in place of any of its rank count (aside, then renamed:
 * a reader never sees half a file; a cache that cannot be written costs a measurement). */
static void link_save(const fe_link *l)
{
  char path[4200], tmp[4300], line[256];
  if (link_path(path, sizeof path)) {
    fe_error_clear();
    return;
  }
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *out = fopen(tmp, "w");
  if (!out) return;
  FILE *in = fopen(path, "r");
  int ok = 1;
  while (in && fgets(line, sizeof line, in)) {
    fe_link k;
    parse_line(line, &k);
    if (k.valid && k.ranks != l->ranks) ok = fputs(line, out) >= 0 && ok;
  }
  if (in) fclose(in);
  ok = fprintf(out, "ranks %d latency %.6g rate %.6g allreduce %.6g points", l->ranks,
               l->latency_us, l->gbytes, l->allreduce_us) > 0 && ok;
  for (int i = 0; i < l->npoints; i++)
    ok = fprintf(out, "%s%.0f:%.6g", i ? "," : " ", l->point_bytes[i], l->point_us[i]) > 0 && ok;
  ok = fputc('\n', out) != EOF && ok;
  ok = !fclose(out) && ok;
  if (!ok || rename(tmp, path)) remove(tmp);
}

int fe_link_measure(fe_link *l)
{
  memset(l, 0, sizeof *l);
  if (!fe_comm_parallel()) return 0;
  static const int sizes[FE_LINK_POINTS] = {8,    64,    512,   2048,  4096,
                                            8192, 16384, 32768, 65536, 262144};
  for (int k = 0; k < FE_LINK_POINTS; k++) {
    double t;
    FE_CHECK(fe_comm_pair_exchange((size_t)sizes[k], sizes[k] <= 8192 ? 50 : 20, 5, &t));
    l->point_bytes[k] = sizes[k];
    l->point_us[k] = t * 1e6 > 1e-3 ? t * 1e6 : 1e-3;
  }
  l->npoints = FE_LINK_POINTS;
  double ar;
  FE_CHECK(fe_comm_allreduce_time(50, 5, &ar));
  const int n = FE_LINK_POINTS;
  l->valid = 1;
  l->ranks = fe_comm_size();
  l->latency_us = l->point_us[0];
  /* the rate of large messages: between the two largest */
  double dt = l->point_us[n - 1] - l->point_us[n - 2];
  l->gbytes = dt > 0 ? (l->point_bytes[n - 1] - l->point_bytes[n - 2]) / dt / 1e3 : 0;
  l->allreduce_us = ar * 1e6;
  if (fe_comm_rank() == 0) link_save(l);
  session = *l;
  return 0;
}

int fe_link_get(const fe_link **l)
{
  *l = &session;
  if (session.valid || !fe_comm_parallel()) return 0;
  /* rank 0's stored line for these ranks, or a measurement by every rank together */
  fe_link k = {0};
  if (fe_comm_rank() == 0) FE_CHECK(fe_link_stored(fe_comm_size(), &k));
  if (k.valid && k.ranks != fe_comm_size()) k.valid = 0; /* measured with other ranks */
  FE_CHECK(fe_comm_bcast(&k, sizeof k, 0));
  if (k.valid) {
    session = k;
    return 0;
  }
  return fe_link_measure(&k);
}
