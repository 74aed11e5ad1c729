/* felab's ranks: MPI started when mpirun launched this process, else one rank alone. The
 * collectives felab needs, over MPI_COMM_WORLD (every rank runs the same script, so every
 * rank makes the same calls in the same order). */
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"

#ifdef FE_HAVE_MPI
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

static int started; /* MPI_Init called here (finalized here at exit) */

/* Launched by mpirun: OpenMPI sets OMPI_COMM_WORLD_SIZE in each rank's environment, PMIx
 * launchers PMIX_RANK. */
static int launched(void)
{
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
}

/* OpenMPI's mpirun binds each rank to one core where it starts two ranks or fewer, and the
 * threads a rank's OpenMP starts share its mask: asked for more threads than the rank's
 * cores (OMP_NUM_THREADS), they took turns on one core (mesh.box of 42M tets on the GPU
 * machine's host, two ranks of 8 threads: 0.53-0.63 s, one rank alone 0.05-0.10), and
 * every cpu prediction, which counts a thread a core, said otherwise; without OMP_NUM_THREADS
 * OpenMP took one thread, the mask's, where one rank alone takes every core. So, before any
 * thread starts: a rank's threads are OMP_NUM_THREADS where set, else the machine's cores
 * shared among its ranks (at least one); where they are more than the rank's cores, they may
 * run on every core (the kernel keeps a cpuset's limits), and rank 0 says so once where
 * OMP_NUM_THREADS asked for them. mpirun --bind-to none, or --map-by slot:PE=<threads>,
 * gives the threads their cores itself, and then nothing changes here. */
static void threads_placed(void)
{
  cpu_set_t now, all;
  if (sched_getaffinity(0, sizeof now, &now)) return;
  int local = 1, rank = 0, threads = omp_get_max_threads();
  MPI_Comm node;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
  }
  const int asked = getenv("OMP_NUM_THREADS") && *getenv("OMP_NUM_THREADS");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!asked && cores > 0) {
    threads = (int)(cores / (local > 0 ? local : 1));
    if (threads < 1) threads = 1;
    omp_set_num_threads(threads);
  }
  const int bound = CPU_COUNT(&now);
  if (threads <= bound) return;
  memset(&all, 0xff, sizeof all); /* every CPU: those the cpuset allows are taken */
  if (sched_setaffinity(0, sizeof all, &all) || sched_getaffinity(0, sizeof now, &now)) return;
  if (rank == 0 && asked)
    fprintf(stderr, "felab: mpirun bound each rank to %d core%s, fewer than its %d OpenMP "
            "threads: they run on the machine's %d cores instead (mpirun --bind-to none, or "
            "--map-by slot:PE=%d, asks for that)\n", bound, bound == 1 ? "" : "s", threads,
            CPU_COUNT(&now), threads);
}

int fe_comm_start(void)
{
  int init = 0;
  MPI_Initialized(&init);
  if (init || !launched()) return 0;
#ifdef __SANITIZE_ADDRESS__
  __lsan_disable(); /* OpenMPI's init keeps state its finalize drops unfreed (as amg.c's) */
#endif
  /* OpenMPI's shared memory sends a message past its eager limit (4 KiB) only once the
   * receiver is in MPI too, and a rank's exchange posts its messages before its interior cells
   * and waits after them: on the cpu a 13 KB exchange took 9-94 us (least, median) against 3-8
   * eager (docs/benchmarks.md section 8). Up to its largest fragment, 32 KiB, unless set. */
  setenv("OMPI_MCA_btl_vader_eager_limit", "32768", 0);
  int rc = MPI_Init(NULL, NULL);
#ifdef __SANITIZE_ADDRESS__
  __lsan_enable();
#endif
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_UNAVAILABLE, "MPI_Init failed under mpirun");
  threads_placed();
  started = 1;
  atexit(fe_comm_stop);
  return 0;
}

int fe_comm_active(void)
{
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int fe_comm_rank(void)
{
  int r = 0;
  if (fe_comm_active()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int fe_comm_size(void)
{
  int n = 1;
  if (fe_comm_active()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int fe_comm_bcast(void *buf, size_t bytes, int root)
{
  if (!fe_comm_parallel() || !bytes) return 0;
  FE_ASSERT(bytes <= 0x7fffffff, FE_ERR_ARG, "a broadcast of %zu bytes (2 GiB at most)", bytes);
  FE_ASSERT(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD) == MPI_SUCCESS,
            FE_ERR_INTERNAL, "MPI_Bcast of %zu bytes from rank %d failed", bytes, root);
  return 0;
}

/* v[0 .. n) reduced in place over every rank by op. */
static int allreduce(void *v, int n, MPI_Datatype type, MPI_Op op, const char *what)
{
  if (!fe_comm_parallel() || n <= 0) return 0;
  FE_ASSERT(MPI_Allreduce(MPI_IN_PLACE, v, n, type, op, MPI_COMM_WORLD) == MPI_SUCCESS,
            FE_ERR_INTERNAL, "MPI_Allreduce (%s of %d values) failed", what, n);
  return 0;
}

int fe_comm_sum(double *v, int n) { return allreduce(v, n, MPI_DOUBLE, MPI_SUM, "sum"); }
int fe_comm_max_int(int *v, int n) { return allreduce(v, n, MPI_INT, MPI_MAX, "max"); }
int fe_comm_max_double(double *v, int n) { return allreduce(v, n, MPI_DOUBLE, MPI_MAX, "max"); }

/* The messages of an exchange, posted and not yet waited for. */
typedef struct exchange_requests {
  int nnb;
  MPI_Request req[]; /* nnb receives, then nnb sends */
} exchange_requests;

static int exchange_post(int nnb, const int *ranks, const int *scounts, const double *send,
                         const int *rcounts, double *recv, void **pending)
{
  *pending = NULL;
  if (!nnb) return 0;
  exchange_requests *q = malloc(sizeof *q + sizeof(MPI_Request) * 2 * (size_t)nnb);
  FE_ASSERT(q, FE_ERR_MEM, "out of memory for %d neighbours' requests", nnb);
  q->nnb = nnb;
  size_t soff = 0, roff = 0;
  for (int k = 0; k < nnb; k++) {
    MPI_Irecv(recv + roff, rcounts[k], MPI_DOUBLE, ranks[k], 48, MPI_COMM_WORLD, &q->req[k]);
    MPI_Isend(send + soff, scounts[k], MPI_DOUBLE, ranks[k], 48, MPI_COMM_WORLD,
              &q->req[nnb + k]);
    soff += (size_t)scounts[k];
    roff += (size_t)rcounts[k];
  }
  *pending = q;
  return 0;
}

int fe_comm_exchange(int nnb, const int *ranks, const int *counts, const double *send,
                     double *recv)
{
  return fe_comm_exchange_v(nnb, ranks, counts, send, counts, recv);
}

int fe_comm_exchange_v(int nnb, const int *ranks, const int *scounts, const double *send,
                       const int *rcounts, double *recv)
{
  void *pending;
  FE_CHECK(exchange_post(nnb, ranks, scounts, send, rcounts, recv, &pending));
  return fe_comm_exchange_end(pending);
}

int fe_comm_exchange_begin(int nnb, const int *ranks, const int *counts, const double *send,
                           double *recv, void **pending)
{
  return exchange_post(nnb, ranks, counts, send, counts, recv, pending);
}

int fe_comm_exchange_end(void *pending)
{
  exchange_requests *q = pending;
  if (!q) return 0;
  int rc = MPI_Waitall(2 * q->nnb, q->req, MPI_STATUSES_IGNORE);
  const int nnb = q->nnb;
  free(q);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "the exchange with %d neighbours failed", nnb);
  return 0;
}

int fe_comm_node(int *node)
{
  *node = fe_comm_rank();
  if (!fe_comm_parallel()) return 0;
  MPI_Comm local;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "the ranks of this machine cannot be told apart");
  int me = *node;
  rc = MPI_Allreduce(&me, node, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "the ranks of this machine cannot be told apart");
  return 0;
}

int fe_comm_node_count(long long key, int *count)
{
  *count = 1;
  if (!fe_comm_parallel()) return 0;
  MPI_Comm local;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "the ranks of this machine cannot be told apart");
  int n = 1;
  MPI_Comm_size(local, &n);
  long long *keys = malloc(sizeof *keys * (size_t)n);
  rc = keys ? MPI_Allgather(&key, 1, MPI_LONG_LONG, keys, 1, MPI_LONG_LONG, local) : MPI_SUCCESS;
  MPI_Comm_free(&local);
  if (!keys) FE_ERROR(FE_ERR_MEM, "out of memory for %d ranks' keys", n);
  int same = 0;
  for (int i = 0; i < n; i++) same += keys[i] == key;
  free(keys);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "the ranks of this machine cannot be told apart");
  *count = same;
  return 0;
}

int fe_comm_barrier(void)
{
  if (fe_comm_parallel()) MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

int fe_comm_pair_exchange(size_t bytes, int trips, int runs, double *seconds)
{
  *seconds = 0;
  if (!fe_comm_parallel()) return 0;
  const int rank = fe_comm_rank();
  FE_ASSERT(bytes <= 0x7fffffff && trips > 0 && runs > 0, FE_ERR_ARG, "an exchange of %zu bytes",
            bytes);
  char *buf = calloc(2 * bytes + 2, 1);
  FE_ASSERT(buf, FE_ERR_MEM, "out of memory for an exchange of %zu bytes", bytes);
  double best = 1e300;
  int rc = MPI_SUCCESS;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r <= runs && rank < 2; r++) { /* run 0 warms the path up */
    double t0 = MPI_Wtime();
    for (int k = 0; k < trips && rc == MPI_SUCCESS; k++) { /* as fe_comm_exchange does */
      MPI_Request req[2];
      MPI_Irecv(buf + bytes + 1, (int)bytes, MPI_BYTE, 1 - rank, 49, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(buf, (int)bytes, MPI_BYTE, 1 - rank, 49, MPI_COMM_WORLD, &req[1]);
      rc = MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    double t = (MPI_Wtime() - t0) / trips;
    if (r > 0 && t < best) best = t;
  }
  free(buf);
  FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_INTERNAL, "an exchange of %zu bytes failed", bytes);
  *seconds = rank == 0 ? best : 0;
  return fe_comm_bcast(seconds, sizeof *seconds, 0);
}

int fe_comm_allreduce_time(int trips, int runs, double *seconds)
{
  *seconds = 0;
  if (!fe_comm_parallel()) return 0;
  double v[2] = {1, 2}, best = 1e300;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r <= runs; r++) {
    double t0 = MPI_Wtime();
    for (int k = 0; k < trips; k++)
      FE_ASSERT(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) ==
                MPI_SUCCESS, FE_ERR_INTERNAL, "MPI_Allreduce failed");
    double t = (MPI_Wtime() - t0) / trips;
    if (r > 0 && t < best) best = t;
  }
  *seconds = best;
  return fe_comm_bcast(seconds, sizeof *seconds, 0);
}

int fe_comm_gather_strings(const char *s, char **out, int root)
{
  const int size = fe_comm_size(), rank = fe_comm_rank();
  if (size == 1) {
    out[0] = s ? strdup(s) : NULL;
    return 0;
  }
  int len = s ? (int)strlen(s) + 1 : 0, *lens = NULL, *offs = NULL;
  char *all = NULL;
  if (rank == root) {
    lens = calloc((size_t)size, sizeof(int));
    offs = calloc((size_t)size, sizeof(int));
    FE_ASSERT(lens && offs, FE_ERR_MEM, "out of memory gathering the ranks' messages");
  }
  MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, root, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; rank == root && r < size; r++) offs[r] = total, total += lens[r];
  if (rank == root) all = malloc((size_t)total + 1);
  MPI_Gatherv(s, len, MPI_CHAR, all, lens, offs, MPI_CHAR, root, MPI_COMM_WORLD);
  for (int r = 0; rank == root && r < size; r++) out[r] = lens[r] ? strdup(all + offs[r]) : NULL;
  free(lens), free(offs), free(all);
  return 0;
}

void fe_comm_abort(int status)
{
  if (fe_comm_parallel()) MPI_Abort(MPI_COMM_WORLD, status);
  exit(status);
}

void fe_comm_stop(void)
{
  if (started && fe_comm_active()) MPI_Finalize();
  started = 0;
}

#else /* one rank alone */

int fe_comm_start(void) { return 0; }
int fe_comm_active(void) { return 0; }
int fe_comm_rank(void) { return 0; }
int fe_comm_size(void) { return 1; }
int fe_comm_bcast(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; return 0; }
int fe_comm_sum(double *v, int n) { (void)v, (void)n; return 0; }
int fe_comm_max_int(int *v, int n) { (void)v, (void)n; return 0; }
int fe_comm_max_double(double *v, int n) { (void)v, (void)n; return 0; }
int fe_comm_exchange(int nnb, const int *ranks, const int *counts, const double *send,
                     double *recv)
{
  return fe_comm_exchange_v(nnb, ranks, counts, send, counts, recv);
}
int fe_comm_exchange_v(int nnb, const int *ranks, const int *scounts, const double *send,
                       const int *rcounts, double *recv)
{
  (void)ranks, (void)scounts, (void)send, (void)rcounts, (void)recv;
  FE_ASSERT(nnb == 0, FE_ERR_UNAVAILABLE, "an exchange with %d ranks, but felab was built "
            "without MPI", nnb);
  return 0;
}
int fe_comm_exchange_begin(int nnb, const int *ranks, const int *counts, const double *send,
                           double *recv, void **pending)
{
  (void)ranks, (void)counts, (void)send, (void)recv;
  *pending = NULL;
  FE_ASSERT(!nnb, FE_ERR_INTERNAL, "an exchange with %d neighbours without MPI", nnb);
  return 0;
}
int fe_comm_exchange_end(void *pending) { (void)pending; return 0; }
int fe_comm_node(int *node)
{
  *node = 0;
  return 0;
}
int fe_comm_node_count(long long key, int *count)
{
  (void)key;
  *count = 1;
  return 0;
}
int fe_comm_barrier(void) { return 0; }
int fe_comm_pair_exchange(size_t bytes, int trips, int runs, double *seconds)
{
  (void)bytes, (void)trips, (void)runs;
  *seconds = 0;
  return 0;
}
int fe_comm_allreduce_time(int trips, int runs, double *seconds)
{
  (void)trips, (void)runs;
  *seconds = 0;
  return 0;
}
int fe_comm_gather_strings(const char *s, char **out, int root)
{
  (void)root;
  out[0] = s ? strdup(s) : NULL;
  return 0;
}
void fe_comm_abort(int status) { exit(status); }
void fe_comm_stop(void) {}

#endif

int fe_comm_parallel(void)
{
  return fe_comm_size() > 1;
}

int fe_comm_bcast_string(char **s, int root)
{
  if (!fe_comm_parallel()) return 0;
  long long len = fe_comm_rank() == root ? (*s ? (long long)strlen(*s) + 1 : 0) : 0;
  FE_CHECK(fe_comm_bcast(&len, sizeof len, root));
  if (fe_comm_rank() != root) {
    *s = NULL;
    if (!len) return 0;
    *s = malloc((size_t)len);
    FE_ASSERT(*s, FE_ERR_MEM, "out of memory for a broadcast string (%lld bytes)", len);
  }
  return fe_comm_bcast(*s, (size_t)len, root);
}
