/* A space split over the ranks (engine/parallel/dist.c; issue 48): each rank holds the cells
 * of its part of the mesh (fe_mesh_partition, one part a rank) and every node of them, as a
 * space of its own whose nodes keep the whole space's order; a node on the interface lives
 * on every rank whose cells touch it, owned by the lowest. A vector of such a space is
 * "consistent": every copy of a shared node holds the same value. An action sums each rank's
 * cells into its nodes, then adds the neighbours' sums at the shared ones (fe_dist_sum);
 * reductions count each node once, at its owner, and add over the ranks. */
#ifndef FE_DIST_H
#define FE_DIST_H

#include "engine/fem/space.h"
#include "engine/perf/perf.h"
#include "engine/solve/vector.h"

typedef struct fe_dist_neighbour {
  int rank;
  int n;       /* the nodes shared with it */
  int *nodes;  /* their local ids, in the whole space's order (both sides alike) */
} fe_dist_neighbour;

typedef struct fe_dist_boundary {
  int tag;              /* a facet tag's id (fe_mesh_tag_id), or -1: every facet ("all") */
  int n;
  int *nodes;           /* the local nodes on its facets, ascending */
} fe_dist_boundary;

typedef struct fe_dist {
  int rank, size;
  const fe_mesh *whole; /* the whole mesh (borrowed): the whole space is made from it and
                         * opts where needed (fe_dist_whole), not kept */
  fe_space_opts opts;
  fe_mesh *mesh;        /* this rank's cells (the local space's mesh, owned here) */
  int nbound;           /* lists of the local nodes on the boundary (fe_dist_boundary_nodes): */
  fe_dist_boundary *bound; /* every facet's, then each tag's that the whole mesh's facets hold */
  int *cells;           /* local cell -> the whole mesh's cell */
  int *l2g;             /* local node -> the whole space's node */
  int nnotowned;        /* local nodes another rank owns */
  int *notowned;
  int nnb;
  fe_dist_neighbour *nb;
  long long ndofs;      /* the whole space's dofs */
  int ncomp;            /* its components (a node's entries) */
  /* The exchange's lists of local entries (node ncomp + component), made once: */
  int nsend;            /* the shared entries of every neighbour, one list after another */
  int *send_at;         /* (the send layout: slot k of the buffers is entry send_at[k]) */
  int nshared;          /* the distinct shared entries, ascending */
  int *shared_at;
  int *src_start;       /* entry e's sources: src_slot[src_start[e] .. src_start[e + 1]), */
  int *src_slot;        /* in the ranks' order: a slot of recv, or -1 for this rank's own */
  int lines[2], pages[2]; /* the vector's 64-byte lines and 4 KiB pages the gather and the
                         * sums go through, of 8-byte entries [0] and 4-byte [1]: a new one at
                         * each step of send_at and of shared_at that leaves one */
  int nnot;             /* the entries another rank owns (the notowned nodes'), ascending */
  int *not_at;
  /* the lists on each backend and precision used (engine/parallel/exchange.h), made on
   * first use: FE_DIST_DEVICES slots, NULL past the last */
  struct fe_dist_device **dev;
} fe_dist;

#define FE_DIST_DEVICES 8

/* The space o of m split over the ranks (mpirun's, more than one): this rank's local space,
 * its dist attached (V->dist; freed with the space). */
int fe_space_create_dist(const fe_mesh *m, const fe_space_opts *o, fe_space **out);
/* The local space rank of size would hold (fe_space_create_dist's on that rank; nothing
 * exchanged in the making): what one process checks of a split (tests/unit/test_dist.c). */
int fe_space_create_part(const fe_mesh *m, const fe_space_opts *o, int rank, int size,
                         fe_space **out);
/* The whole space d splits, made again (the same on every rank; *W freed by the caller). */
int fe_dist_whole(const fe_dist *d, fe_space **W);
void fe_dist_free(fe_dist *d);
/* y's shared nodes summed over the ranks that hold them (after each rank's own cells), on
 * y's device: only the shared entries travel to the host and back (exchange.h);
 * *bytes and *messages (NULL: not wanted) get what this rank sent. */
int fe_dist_sum(const fe_dist *d, fe_vector *y, double *bytes, double *messages);
/* fe_dist_sum in two steps, so that work on the device may run between them (an action's
 * interior cells): begin gathers y's shared entries (their integration done) and posts the
 * messages; end waits for them (where fe_dist_sum_wait did not) and makes the sums. One
 * exchange of y's backend and precision at a time. */
int fe_dist_sum_begin(const fe_dist *d, const fe_vector *y);
int fe_dist_sum_end(const fe_dist *d, fe_vector *y, double *bytes, double *messages);
/* Between the two: the messages waited for (MPI moves a large message only while a rank
 * calls it, so the host waits here while the device works, not after). */
int fe_dist_sum_wait(const fe_dist *d, const fe_vector *y);
/* Of that wait, the seconds of the gather's (device to device: its mark; else 0). */
double fe_dist_sum_gathered(const fe_dist *d, const fe_vector *y);
/* Then (or at end) the neighbours' shares moved to y's device: device to device, their
 * copies queued in the backend's current queue (a side queue's, beside the interior). */
int fe_dist_sum_fetch(const fe_dist *d, const fe_vector *y);
/* Whether y's exchanges go device to device between ranks of one machine (exchange.c's
 * interprocess path; decided at the first exchange), else through the host. */
int fe_dist_direct(const fe_dist *d, const fe_vector *y);
/* The sorted boundary nodes of the tagged facets (fe_space_boundary_nodes) of the local
 * space V: the whole space's, those this rank holds. */
int fe_dist_boundary_nodes(const fe_space *V, const char *const *tags, int ntags, int **nodes,
                           int *n);
/* The reductions of consistent vectors: s, the sum over every local entry of x_i y_i (y NULL:
 * x_i), made the sum over the whole space (each node once, at its owner, over the ranks):
 * the entries another rank owns, summed on the device, are taken off. */
int fe_dist_reduce_dot(const fe_dist *d, const fe_vector *x, const fe_vector *y, double *s);
/* The correction of the next fe_dist_reduce_dot of x and y, queued ahead of the backend's own
 * dot (so that one wait serves both); that reduce_dot must follow, with the same vectors. */
int fe_dist_reduce_begin(const fe_dist *d, const fe_vector *x, const fe_vector *y);
/* The correction begun and not wanted (the backend's dot failed): dropped. */
void fe_dist_reduce_cancel(const fe_dist *d, const fe_vector *x);
/* CG's fused update's (r, r) and (r, z) (z = r ./ dg, or r where dg is NULL) over every
 * local entry, made the whole space's (one sum over the ranks for both). */
int fe_dist_reduce_cg(const fe_dist *d, const fe_vector *r, const fe_vector *dg, double *rr,
                      double *rz);
/* The correction of the next fe_dist_reduce_cg of r and dg, queued ahead of the backend's
 * read of its own sums (fe_dist_reduce_begin's for CG's update). */
int fe_dist_reduce_begin_cg(const fe_dist *d, const fe_vector *r, const fe_vector *dg);
/* CG's next sum over the ranks on x's devices (engine/parallel/exchange.h's
 * fe_dist_device_node), with the correction begun where corrected; *on 0: none here (one
 * rank, or no mailboxes: the host's sums). Collective on its first call; ns NULL: *on alone. */
int fe_dist_reduce_node(const fe_dist *d, const fe_vector *x, int corrected, fe_node_sum *ns,
                        int *on);
int fe_dist_reduce_sum(const fe_dist *d, double *s, int n);
/* This rank's share of a sum over every local entry (fe_dist_device_dot_launch's mode; s[1]
 * too with modes 1 and 2): the entries another rank owns taken off, no sum over the ranks. */
int fe_dist_reduce_owned(const fe_dist *d, const fe_vector *x, const fe_vector *y, int mode,
                         double *s);
enum { FE_DIST_GROUP = 256 }; /* the exchange kernels' entries a group (engine/parallel/exchange.c) */

/* What one exchange of d does on this rank with vectors in prec on be (the model's input,
 * fe_perf_exchange; be NULL: through the host); all zero on one rank. */
void fe_dist_exchange_work(const fe_dist *d, const fe_backend *be, fe_precision prec,
                           fe_exchange_work *x);

/* One part's share if the whole space were split by a partition (fe_dist_parts): its cells,
 * its nodes (shared ones included), its exchange (as fe_dist_exchange_work would count it on
 * that rank) and the entries another part owns (what its reductions gather). */
typedef struct fe_dist_part {
  long long cells, nodes;
  fe_exchange_work x;
  double notowned;
} fe_dist_part;
/* Each of nparts parts' share of space W split by part[] (a part a cell of W's mesh), without
 * running on that many ranks: what perf.compare predicts N ranks from. */
int fe_dist_parts(const fe_space *W, const int *part, int nparts, fe_precision prec,
                  fe_dist_part *out);
int fe_dist_reduce_minmax(const fe_dist *d, double *v, int max);
/* The blocks of `per` entries (a line's, a page's) that a walk through the n entries at[]
 * enters: a new one at each step that leaves the last. */
int fe_list_steps(const int *at, int n, int per);

#endif
