/* felab's ranks (engine/parallel/comm.c): the processes mpirun started, each running the same
 * script, or one process alone (rank 0 of 1: today's felab). MPI where felab was built with
 * it (FE_HAVE_MPI: OpenMPI, the one hypre links); without, every call is the one rank's. */
#ifndef FE_COMM_H
#define FE_COMM_H

#include <stddef.h>

/* Start MPI when this process was launched by mpirun (its environment says so: OpenMPI's
 * OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK); alone, nothing starts (amg starts a singleton
 * when it needs one). Returns 0, or nonzero with the error set. */
int fe_comm_start(void);
/* Whether MPI is running (started here or by amg) and this process's rank and the ranks'
 * number (0 and 1 alone). */
int fe_comm_active(void);
int fe_comm_rank(void);
int fe_comm_size(void);
/* The launcher started more than one rank (MPI running with size > 1). */
int fe_comm_parallel(void);
/* Collective over every rank (no-ops alone): bytes of buf from root to all; v[i] summed,
 * maxed; barrier. */
int fe_comm_bcast(void *buf, size_t bytes, int root);
int fe_comm_sum(double *v, int n);
int fe_comm_max_int(int *v, int n);
int fe_comm_max_double(double *v, int n);
/* Each of the nnb neighbours ranks[k] gets counts[k] doubles of send (one block after
 * another, in k's order) and sends as many into recv's block k. */
int fe_comm_exchange(int nnb, const int *ranks, const int *counts, const double *send,
                     double *recv);
/* The same with counts of each way: scounts[k] doubles to ranks[k], rcounts[k] from it. */
int fe_comm_exchange_v(int nnb, const int *ranks, const int *scounts, const double *send,
                       const int *rcounts, double *recv);
/* fe_comm_exchange in two steps: the messages posted (send and recv must stay until the
 * end), then waited for; *pending (NULL where nothing travels) is freed by the end. */
int fe_comm_exchange_begin(int nnb, const int *ranks, const int *counts, const double *send,
                           double *recv, void **pending);
int fe_comm_exchange_end(void *pending);
/* Collective: the lowest rank on this rank's machine (ranks of one machine share memory). */
int fe_comm_node(int *node);
/* Collective: how many ranks of this rank's machine (itself counted) passed the same key
 * (a device's: backend.h's share_key), 1 alone. */
int fe_comm_node_count(long long key, int *count);
int fe_comm_barrier(void);
/* Collective: ranks 0 and 1 exchange `bytes` each way at once (MPI_Irecv, MPI_Isend, MPI_Waitall:
 * fe_comm_exchange's pattern), `trips` a run, the best of `runs` runs after one to warm up (the
 * other ranks wait); *seconds: one exchange, rank 0's, on every rank (0 alone). */
int fe_comm_pair_exchange(size_t bytes, int trips, int runs, double *seconds);
/* Collective: an MPI_Allreduce of two doubles over every rank, the best of `runs` runs of
 * `trips` after one to warm up; *seconds: one, rank 0's, on every rank (0 alone). */
int fe_comm_allreduce_time(int trips, int runs, double *seconds);
/* A string from root to all (*s malloc'd on the others; NULL travels as NULL). */
int fe_comm_bcast_string(char **s, int root);
/* Every rank's string to root: out[r] malloc'd there (NULL where a rank sent NULL); the
 * others get nothing. */
int fe_comm_gather_strings(const char *s, char **out, int root);
/* Stop every rank with status (after the message was printed). */
void fe_comm_abort(int status);
/* Finalize where this file started MPI (at exit). */
void fe_comm_stop(void);

#endif
