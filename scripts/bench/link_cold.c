/* Benchmark (not a test), issue 48: a split space's messages after its cells, outside felab.
 * Two ranks exchange n doubles each way at once (MPI_Irecv, MPI_Isend, MPI_Waitall, as
 * engine/parallel/comm.c does) right after touching MB megabytes of memory (the cells' work,
 * which leaves the message buffers and MPI's shared-memory queues out of the caches), the least
 * of 100; and back to back, ten exchanges a run, as felab's link calibration measures them
 * (engine/parallel/link.c). docs/benchmarks.md section 8.
 *   mpicc -O2 -o link_cold scripts/bench/link_cold.c
 *   mpirun -np 2 ./link_cold N MB      (e.g. 9409 40: a P1 96³ box's interface) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One exchange of n doubles with the other rank (tag t), its seconds. */
static double exchange(double *send, double *recv, int n, int other, int t)
{
  MPI_Request q[2];
  const double t0 = MPI_Wtime();
  MPI_Irecv(recv, n, MPI_DOUBLE, other, t, MPI_COMM_WORLD, &q[0]);
  MPI_Isend(send, n, MPI_DOUBLE, other, t, MPI_COMM_WORLD, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = argc > 1 ? atoi(argv[1]) : 9409;
  const size_t touch = (size_t)(argc > 2 ? atof(argv[2]) : 40) * 1e6 / sizeof(double);
  double *send = malloc(sizeof(double) * (size_t)n), *recv = malloc(sizeof(double) * (size_t)n);
  double *cells = calloc(touch + 1, sizeof(double));
  if (size != 2 || n < 1 || !send || !recv || !cells) {
    if (!rank) fprintf(stderr, "link_cold: two ranks, a message of 1 or more doubles\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, sizeof(double) * (size_t)n);
  double cold = 1e9, hot = 1e9;
  for (int it = 0; it < 100; it++) {
    for (size_t i = 0; i < touch; i++) cells[i] += 1.0;
    MPI_Barrier(MPI_COMM_WORLD);
    const double c = exchange(send, recv, n, 1 - rank, 0);
    double h = 0;
    for (int k = 0; k < 10; k++) h += exchange(send, recv, n, 1 - rank, 1);
    cold = c < cold ? c : cold;
    hot = h / 10 < hot ? h / 10 : hot;
  }
  if (!rank)
    printf("%d doubles each way: after %.0f MB touched %.1f us, back to back %.1f us (%.0f)\n", n,
           touch * sizeof(double) / 1e6, 1e6 * cold, 1e6 * hot, cells[0]);
  free(send), free(recv), free(cells);
  MPI_Finalize();
  return 0;
}
