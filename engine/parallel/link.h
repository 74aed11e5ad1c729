/* The link between mpirun's ranks (engine/parallel/link.c): measured by exchanges and an
 * MPI_Allreduce, stored per machine, read by the model of a split space's exchange. */
#ifndef FE_LINK_H
#define FE_LINK_H

#include "engine/perf/perf.h"

/* Collective (every rank): measure the link now and store it (rank 0 writes); alone, *l is
 * not valid. host: the cpu's whole exchange through the host too (13-15 s on the 2-core Intel VM:
 * its cold points stream twice the last-level cache, up to 512 MiB a rank). */
int fe_link_measure(fe_link *l, int host);
/* This session's link: under mpirun with more than one rank, collective on its first call
 * (rank 0's stored line for these ranks, or measured by all and stored); alone, not valid. */
int fe_link_get(const fe_link **l);
/* fe_link_get, the cpu's host exchange measured too where the link has none yet (collective
 * then: every rank's split action on a cpu asks at once) and stored with it. */
int fe_link_get_host(const fe_link **l);
/* The stored link of `ranks` ranks, else the one of most ranks (not collective; *l not valid
 * where none is stored): what a session of one rank predicts N ranks with. */
int fe_link_stored(int ranks, fe_link *l);

#endif
