/* The link between mpirun's ranks, measured and stored (issue 48): ranks 0 and 1 exchanging a
 * message each way at once, as a split space's exchange does (MPI_Isend and MPI_Irecv, then
 * MPI_Waitall), at ten sizes from 8 bytes to 256 KiB, kept as measured (a message's time is
 * read off them: fe_link_message_seconds) and summed up as a latency (8 bytes) and a rate
 * (between the two largest), an MPI_Allreduce of two doubles over every rank, and a cpu's
 * whole exchange through the host at four sizes, warm and cold, what a line and a page past
 * contiguous entries' add and what the cache keeps of its data (measure_host: where a cpu's
 * split action first asks for it, or device.calibrate("link"); a GPU's ranks, device to
 * device, never read it). Stored per machine (its host name) in the cache's calibration
 * folder, one line a rank count, beside the backends' calibrations: `link-v3-<hash>.txt`,
 * lines "ranks N latency us rate GB/s allreduce us points bytes:us,... host entries:warm
 * us:cold us,... lines warm ns:cold ns pages warm ns:cold ns keep bytes". The model of a
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
#include "engine/parallel/dist.h"
#include "engine/parallel/link.h"

static fe_link session; /* this session's (measured or read), valid once known */

/* The store's path: one file per host. */
static int link_path(char *path, size_t n)
{
  char dir[4096], host[256] = "";
  FE_CHECK(fe_cache_dir("calibration", dir, sizeof dir));
  if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
  snprintf(path, n, "%s/link-v3-%016llx.txt", dir, fe_hash_string(host, 0));
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
  if (k.npoints < 2) return;
  /* " host entries:warm:cold,..." (the cpu's whole exchange; optional) */
  const char *h = strstr(p, " host ");
  for (h = h ? h + 6 : NULL; h && k.nhost < FE_LINK_HOST;) {
    double n, w, c;
    int used = 0;
    if (sscanf(h, "%lf:%lf:%lf%n", &n, &w, &c, &used) != 3 || !(n > 0) || !(w > 0) ||
        !(c > 0) || !isfinite(w) || !isfinite(c) ||
        (k.nhost && n <= k.host_entries[k.nhost - 1])) {
      k.nhost = 0; /* not used: the terms alone */
      break;
    }
    k.host_entries[k.nhost] = n, k.host_warm_us[k.nhost] = w, k.host_cold_us[k.nhost++] = c;
    h += used;
    if (*h != ',') break;
    h++;
  }
  if (k.nhost < 2) k.nhost = 0;
  const char *ln = strstr(p, " lines ");
  double lw, lc;
  if (k.nhost && ln && sscanf(ln, " lines %lf:%lf", &lw, &lc) == 2 && isfinite(lw) && lw >= 0 &&
      isfinite(lc) && lc >= 0)
    k.line_warm_ns = lw, k.line_cold_ns = lc;
  const char *pg = strstr(p, " pages ");
  if (k.nhost && pg && sscanf(pg, " pages %lf:%lf", &lw, &lc) == 2 && isfinite(lw) && lw >= 0 &&
      isfinite(lc) && lc >= 0)
    k.page_warm_ns = lw, k.page_cold_ns = lc;
  const char *kp = strstr(p, " keep ");
  if (k.nhost && kp && sscanf(kp, " keep %lf", &lw) == 1 && isfinite(lw) && lw >= 0)
    k.keep_bytes = lw;
  *l = k;
}

int fe_link_stored(int ranks, fe_link *l)
{
  memset(l, 0, sizeof *l);
  char path[4200], line[1024];
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
  char path[4200], tmp[4300], line[1024];
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
  for (int i = 0; i < l->nhost; i++)
    ok = fprintf(out, "%s%.0f:%.6g:%.6g", i ? "," : " host ", l->host_entries[i],
                 l->host_warm_us[i], l->host_cold_us[i]) > 0 && ok;
  if (l->nhost)
    ok = fprintf(out, " lines %.6g:%.6g pages %.6g:%.6g keep %.6g", l->line_warm_ns,
                 l->line_cold_ns, l->page_warm_ns, l->page_cold_ns, l->keep_bytes) > 0 && ok;
  ok = fputc('\n', out) != EOF && ok;
  ok = !fclose(out) && ok;
  if (!ok || rename(tmp, path)) remove(tmp);
}

/* The arrays of one host exchange of n entries (host_exchange), in one block. */
typedef struct host_arrays {
  int n, *idx, *at, *start, *slot;
  double *x, *packed, *send, *recv, *in, *y;
  char *block;
} host_arrays;

/* The host exchange's layouts of the shared entries in a part's vector: */
enum {
  HOST_CONTIGUOUS, /* n contiguous entries (a box's interface, numbered as the split does) */
  HOST_LINES,      /* each in a line of its own, every other line (a mesh's interface
                    * numbered apart, whose lines the cores do not fetch in adjacent pairs:
                    * 1.7 times the cost of adjacent lines here, cold) */
  HOST_PAGES       /* a line of 8 entries a page, its place in the page moving 7 lines a
                    * page (no two pages' lines in one cache set): the prefetchers stop at
                    * each page's end and its translation is looked up (a cold page cost
                    * 14-19 ns here, 2-3 times a cold line more) */
};
static const int host_spread[3] = {1, 16, 64}; /* a layout's entries of the vector an entry */

/* Entry k's place among the layout's, from the vector's middle (len / 2). */
static int host_place(int layout, int k)
{
  if (layout == HOST_LINES) return 16 * k;
  if (layout == HOST_PAGES) return 512 * (k / 8) + 8 * (k / 8 * 7 % 64) + k % 8;
  return k;
}

/* As a part's vector of 4n entries a spread whose shared ones are n entries in `layout`,
 * the rank's own share first on rank 0 and second on rank 1 (exchange.knl's sums in
 * the ranks' order; the other ranks' arrays are not used). The arrays lie in one block,
 * each a few lines and a fraction of a page past the last: arrays an exact multiple of 4 KiB
 * apart made every copy between them 5-8 times slower here (a load after a store to the
 * same place in another page), which felab's own buffers, allocated apart, do not meet. */
static int host_make(int n, int layout, host_arrays *a)
{
  const int rank = fe_comm_rank() == 1;
  const size_t len = 4 * (size_t)n * (size_t)host_spread[layout];
  const size_t sizes[10] = {sizeof(double) * len,           sizeof(double) * len,
                            sizeof(double) * (size_t)n,     sizeof(double) * (size_t)n,
                            sizeof(double) * (size_t)n,     sizeof(double) * (size_t)n,
                            sizeof(int) * (size_t)n,        sizeof(int) * (size_t)n,
                            sizeof(int) * ((size_t)n + 1),  sizeof(int) * 2 * (size_t)n};
  size_t at[10], total = 0;
  for (int i = 0; i < 10; i++) /* each a few lines and a fraction of a page past the last */
    at[i] = total, total += sizes[i] + (size_t)(2 * i + 1) * 64 + (size_t)i * 576;
  *a = (host_arrays){.n = n, .block = aligned_alloc(4096, (total + 4095) / 4096 * 4096)};
  FE_ASSERT(a->block, FE_ERR_MEM, "out of memory for the link's exchange of %d entries", n);
  char *b = a->block;
  a->x = (double *)(b + at[0]), a->y = (double *)(b + at[1]), a->packed = (double *)(b + at[2]);
  a->send = (double *)(b + at[3]), a->recv = (double *)(b + at[4]), a->in = (double *)(b + at[5]);
  a->idx = (int *)(b + at[6]), a->at = (int *)(b + at[7]), a->start = (int *)(b + at[8]);
  a->slot = (int *)(b + at[9]);
  for (size_t i = 0; i < len; i++) a->x[i] = a->y[i] = 1.0 + (double)(i % 7);
  for (int k = 0; k < n; k++) {
    a->idx[k] = a->at[k] = (int)(len / 2) + host_place(layout, k);
    a->start[k] = 2 * k;
    a->slot[2 * k + rank] = -1, a->slot[2 * k + 1 - rank] = k;
    a->packed[k] = a->send[k] = a->recv[k] = a->in[k] = 0;
  }
  a->start[n] = 2 * n;
  return 0;
}

/* Seconds of one exchange of a's entries between ranks 0 and 1 through the host, gathered,
 * sent and summed as fe_dist_sum does on the cpu; the best of `runs` after one to warm up,
 * each after every rank read and wrote `nflush` doubles of flush where it is not NULL and
 * then met the others (a barrier: the exchange's least, no neighbour late). Collective: the
 * other ranks flush and meet alike; rank 0's time on every rank. */
static int host_exchange(host_arrays *a, double *flush, size_t nflush, int runs, double *seconds)
{
  const int rank = fe_comm_rank(), peer = 1 - rank, n = a->n;
  double best = 1e300;
  for (int r = 0; r <= runs; r++) {
    for (size_t i = 0; flush && i < nflush; i++) flush[i] += 1.0;
    FE_CHECK(fe_comm_barrier());
    if (rank > 1) continue;
    const double t0 = fe_clock();
    for (int k = 0; k < n; k++) a->packed[k] = a->x[a->idx[k]];
    memcpy(a->send, a->packed, sizeof(double) * (size_t)n);
    void *pending;
    FE_CHECK(fe_comm_exchange_begin(1, &peer, &n, a->send, a->recv, &pending));
    FE_CHECK(fe_comm_exchange_end(pending));
    memcpy(a->in, a->recv, sizeof(double) * (size_t)n);
    for (int k = 0; k < n; k++) {
      const int i = a->at[k];
      const double own = a->y[i];
      double s = 0;
      for (int j = a->start[k]; j < a->start[k + 1]; j++)
        s += a->slot[j] < 0 ? own : a->in[a->slot[j]];
      a->y[i] = s * 0.5; /* the values stay as they were (both ranks' shares alike) */
    }
    const double t = fe_clock() - t0;
    if (r > 0 && t < best) best = t;
  }
  *seconds = rank == 0 ? best : 0;
  return fe_comm_bcast(seconds, sizeof *seconds, 0);
}

/* What the cache keeps of the host exchange's data (fe_link's keep_bytes): the exchange of
 * 8192 contiguous entries (host point 2) after every rank read and wrote S bytes of flush,
 * S = 256 KiB, 512 KiB, ... up to the last-level cache, the least of three passes; each S's
 * share of the way from the point's warm time to its cold one, f(S), fitted by
 * 1 - exp(-S / keep) (least squares over keeps an eighth of an octave apart). The model
 * takes an action's bytes for S (fe_perf_exchange_cold). Where the cold time is not above
 * the warm, nothing (0). */
static int measure_keep(fe_link *l, double *flush, size_t nflush)
{
  enum { NS = 16, POINT = 2 };
  size_t s[NS];
  double us[NS];
  int ns = 0;
  for (size_t b = (size_t)256 << 10; b <= nflush / 2 * sizeof(double) && ns < NS; b *= 2)
    us[ns] = INFINITY, s[ns++] = b;
  const double warm = l->host_warm_us[POINT], cold = l->host_cold_us[POINT];
  l->keep_bytes = 0;
  if (!(cold > warm) || ns < 2) return 0;
  host_arrays a;
  FE_CHECK(host_make((int)l->host_entries[POINT], HOST_CONTIGUOUS, &a));
  int rc = 0;
  for (int pass = 0; pass < 3 && !rc; pass++)
    for (int k = 0; k < ns && !rc; k++) {
      double t = 0;
      rc = host_exchange(&a, flush, s[k] / sizeof(double), 6, &t);
      us[k] = fmin(us[k], t * 1e6);
    }
  free(a.block);
  FE_CHECK(rc);
  /* f(S) can only grow with S: a size's share no more than any larger size's (a stall in
   * every run of a small size, seen on the GPU machine's Xeon, fitted 2 MB there where the
   * runs without one fitted 52-60) */
  double f[NS];
  for (int k = ns - 1; k >= 0; k--) {
    f[k] = fmin(1, fmax(0, (us[k] - warm) / (cold - warm)));
    if (k < ns - 1) f[k] = fmin(f[k], f[k + 1]);
  }
  double best = INFINITY;
  for (double keep = 64 << 10; keep <= 4.0 * (double)s[ns - 1]; keep *= pow(2, 0.125)) {
    double e = 0;
    for (int k = 0; k < ns; k++) {
      const double d = f[k] - (1 - exp(-(double)s[k] / keep));
      e += d * d;
    }
    if (e < best) best = e, l->keep_bytes = keep;
  }
  return 0;
}

/* The host exchange's points (fe_link's host_*): 512 to 32768 entries, warm (back to back)
 * and cold (after twice the last-level cache). A warm end after a quarter of the cache
 * streamed (the arrays in the shared cache, out of the cores' own) measured 1.3-2.2 times
 * back to back's at 512-2048 entries here, above the least of the exchanges after small
 * actions (P1 40^3, Q1 40^3: a third to a half of the cache): they were nearer back to back. */
static int measure_host(fe_link *l)
{
  static const int sizes[FE_LINK_HOST] = {512, 2048, 8192, 32768};
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (llc <= 0) llc = 32L << 20;
  if (llc > (256L << 20)) llc = 256L << 20;
  const size_t nflush = 2 * (size_t)llc / sizeof(double);
  double *flush = calloc(nflush, sizeof(double));
  FE_ASSERT(flush, FE_ERR_MEM, "out of memory for the link's flush of %zu bytes",
            nflush * sizeof(double));
  /* the least of three passes over the sizes, apart in time: one pass's best of 50 back to
   * back took 7-16 us at 2048 entries from one run to the next here (the VM's slow stretches) */
  int rc = 0;
  enum { M = FE_LINK_HOST + 2 };
  double us[M][2];             /* the sizes' and, last, 2048 entries HOST_LINES and HOST_PAGES */
  int lines[M], pages[M];      /* the lines and pages their gather and sums go through */
  for (int k = 0; k < M; k++) us[k][0] = us[k][1] = INFINITY;
  for (int pass = 0; pass < 3 && !rc; pass++)
    for (int k = 0; k < M && !rc; k++) {
      const int layout = k < FE_LINK_HOST ? HOST_CONTIGUOUS : k - FE_LINK_HOST + HOST_LINES;
      host_arrays a;
      double warm = 0, cold = 0;
      rc = host_make(k < FE_LINK_HOST ? sizes[k] : sizes[1], layout, &a);
      if (rc) break;
      lines[k] = 2 * fe_list_steps(a.idx, a.n, 8), pages[k] = 2 * fe_list_steps(a.idx, a.n, 512);
      rc = host_exchange(&a, NULL, 0, 30, &warm);
      if (!rc) rc = host_exchange(&a, flush, nflush, 8, &cold);
      free(a.block);
      us[k][0] = fmin(us[k][0], fmax(warm * 1e6, 1e-3));
      us[k][1] = fmin(us[k][1], fmax(cold * 1e6, 1e-3));
    }
  for (int k = 0; k < FE_LINK_HOST; k++) {
    l->host_entries[k] = sizes[k];
    l->host_warm_us[k] = us[k][0], l->host_cold_us[k] = us[k][1];
  }
  if (!rc) rc = measure_keep(l, flush, nflush);
  free(flush);
  FE_CHECK(rc);
  l->nhost = FE_LINK_HOST;
  /* a page more: the pages layout's time over the contiguous one's, over the pages it adds
   * (its lines as many as contiguous entries'); a line more: the lines layout's, less its
   * pages more at that cost, over the lines it adds */
  const int c = 1, ln = FE_LINK_HOST, pg = FE_LINK_HOST + 1;
  for (int w = 0; w < 2; w++) {
    const double page = fmax(0.0, (us[pg][w] - us[c][w]) * 1e3 / (pages[pg] - pages[c]));
    const double line = fmax(0.0, (us[ln][w] - us[c][w]) * 1e3 - (pages[ln] - pages[c]) * page) /
                        (lines[ln] - lines[c]);
    *(w ? &l->page_cold_ns : &l->page_warm_ns) = page;
    *(w ? &l->line_cold_ns : &l->line_warm_ns) = line;
  }
  return 0;
}

int fe_link_measure(fe_link *l, int host)
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
  if (host) FE_CHECK(measure_host(l));
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
  return fe_link_measure(&k, 0);
}

int fe_link_get_host(const fe_link **l)
{
  FE_CHECK(fe_link_get(l));
  if (!session.valid || session.nhost >= 2) return 0;
  FE_CHECK(measure_host(&session));
  if (fe_comm_rank() == 0) link_save(&session);
  return 0;
}
