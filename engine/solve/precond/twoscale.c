/* Preconditioner "twoscale": the two-scale additive Schwarz preconditioner of Remacle,
 * Gandham and Warburton (section 4) for Qn spaces (n = 1..9, GLL nodes) on hexahedra,
 *   M^-1 = P^c + P^f.
 *
 * Fine scale P^f (section 4.2): one subdomain per cell, the cell plus one layer of nodes
 * around it, the (n+3)^3 points with the edge and corner regions. On each the local problem
 * is solved on the cell's box h_x x h_y x h_z by fast diagonalization (twoscale-fdm.c), with
 * the operator's own 1D mass (lumped under GLL quadrature, consistent under an exact rule),
 * so that on a uniform mesh A_s = R_s A R_s^T exactly, and the results are added, unweighted
 * as in the paper, which keeps the sum symmetric: P^f = sum_s R_s^T A_s^-1 R_s (one kernel,
 * kernels/schwarz.knl). The box's coefficient is measured, not read from the physics:
 * kappa_s is the mean over the cell's free nodes of diag(J) / diag(A_box) with
 * A_box the boxes' operator at kappa = 1 summed at each node, so per-region coefficients (and
 * a reaction term, folded into kappa) reach the local problems whatever the physics.
 *
 * Coarse scale P^c (section 4.1): the problem on the vertices, a Q1 space on the same mesh
 * and an operator with the same physics, constrained at the vertices that are constrained
 * in the fine space, assembled and solved approximately by BoomerAMG (one V-cycle, the amg
 * unit). Restriction is the L2 projection with the lumped (GLL) mass m:
 *   V = C m^-1,  C_{IJK,N} = sum_e Phi_I(t_i) Phi_J(t_j) Phi_K(t_k) m_{ijk;e},
 * so V r distributes r_N among the cells at N by their share m_{ijk;e} / m_N of its mass,
 * and the prolongation is V^T (the same shares): P^c = V^T P_0 V, symmetric.
 * Restriction and prolongation run on the backend (schwarz.knl: per cell to its corners, then
 * a gather per vertex; a gather per node back). The V-cycle runs beside the fine kernel, as in
 * the paper's section 5.3: on the host (cycle_on = "host") while cuda's launches return, or
 * on the device on cuda's side queue (cycle_on = "device", the default).
 *
 * Constrained rows are the identity's (as the operator's): z_i = r_i there, and neither
 * scale reads or writes them.
 *
 * On a space split over mpirun's ranks (engine/parallel/dist.c) each rank holds its cells'
 * subdomains, the same as one rank's: their maps are made on the whole space (every rank has
 * it) and renumbered, the nodes beyond a face between two ranks' cells (another rank's) kept
 * as a ghost layer after the local nodes: before the kernel r's values there come from the
 * rank that owns each (the lowest whose cells hold it), after it their parts of z go back
 * there and are added. The boxes' weights and the nodes' masses are summed over the ranks
 * that hold a node; the coarse space is Q1 split the same way (its amg hypre's parallel
 * BoomerAMG), the restricted residual summed over the ranks at the shared vertices, and z
 * (both scales, each rank's cells) at the shared nodes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/solve/precond/twoscale.h"
#include "engine/solve/precond/units.h"
#include "engine/fem/quadrature.h"
#include "engine/operator/strategy.h"
#include "engine/core/strbuf.h"
#include "engine/parallel/dist.h"


typedef struct twoscale {
  int fine, coarse;      /* the parts applied */
  fe_backend *be;        /* the solve's backend and precision */
  fe_precision prec;
  int ne;                /* n + 3: points per direction of a subdomain */
  int consistent;        /* the boxes' mass: consistent (1) or lumped (0), as the operator's */
  unsigned char *con;    /* constrained fine nodes */
  fe_node_cells adj;     /* the cells at each node (setup only) */
  int fine_done;         /* the fine scale's setup has run (during the coarse scale's) */
  int maps_done, beside; /* the coarse maps made; the cycle beside the fine kernel (setup's) */
  fe_module *mod;        /* both scales' kernels and the constrained rows' */
  fe_kernel *rows;
  /* fine scale */
  fe_kernel *schwarz;
  fe_buffer map;         /* ncells x ne^3 nodes, -1: none */
  fe_buffer pen;         /* ncells: the pencils of the three directions */
  fe_buffer wts;         /* ncells x 3: kappa_s (h_y h_z / 2 h_x, ...) */
  fe_buffer didx;        /* the constrained dofs */
  size_t group;          /* items per work group */
  /* coarse scale: restriction and prolongation on the backend, the V-cycle on the host */
  fe_kernel *restrict_cells, *restrict_vertices, *prolong;
  size_t rgroup;         /* items per work group of restrict_cells */
  fe_buffer cnodes;      /* ncells x nb (lexicographic): the cells' nodes */
  fe_buffer share;       /* ncells x nb: m_{ijk;e} / m_N, 0 if constrained */
  fe_buffer corners;     /* ncells x 8 coarse nodes (bit d: the far side along d) */
  fe_buffer vstart, ventry; /* per free vertex its (cell, corner) entries c * 8 + q */
  fe_buffer nstart, nentry; /* per free node its (cell, lattice node) entries c * nb + l */
  fe_buffer nshare;      /* the shares in the order of nentry */
  fe_buffer rc;          /* ncells x 8: the cells' parts of the coarse residual */
  fe_vector *Rd, *Zd;    /* the coarse residual and correction on the backend */
  fe_space *V1;          /* Q1 on the same mesh */
  fe_operator *A1;       /* its operator, the fine physics */
  fe_precond *P0;        /* BoomerAMG on A1 */
  fe_vector *Rv, *Zv;    /* the coarse vectors on the cpu, for P0 */
  int on_device;         /* cycle_on = "device": P0 cycles on be, on Rd and Zd */
  fe_vector *mask;       /* then: 0 on the coarse constrained vertices, else 1 */
  double *R, *Z;         /* their host memory */
  ts_ghost *ghost;       /* a split space: the subdomains' nodes on other ranks */
  fe_kernel *gather, *add_at; /* its passes */
} twoscale;

/* Whether V is a scalar Qn space with GLL nodes on hexahedra, else why not. */
static int twoscale_serves(const fe_space *V)
{
  const fe_element *el = &V->elem;
  FE_ASSERT(el->cell == FE_CELL_HEX && el->family == 'Q', FE_ERR_ARG,
            "twoscale: needs a Q1..Q%d space on hexahedra; %s on %ss is not (use jacobi, "
            "chebyshev or amg)", TS_MAX_ORDER, V->name, fe_cell_name(el->cell));
  FE_ASSERT(el->order <= TS_MAX_ORDER, FE_ERR_ARG, "twoscale: %s above Q%d", V->name, TS_MAX_ORDER);
  FE_ASSERT(el->kind == FE_NODES_GLL, FE_ERR_ARG,
            "twoscale: needs GLL nodes; this %s space has equispaced nodes", V->name);
  FE_ASSERT(V->ncomp == 1, FE_ERR_ARG, "twoscale: needs a scalar space; %s has %d components",
            V->name, V->ncomp);
  return 0;
}

/* ---- the fine scale ---- */

/* The box weights of every cell, kappa_s (h_y h_z / (2 h_x), h_x h_z / (2 h_y),
 * h_x h_y / (2 h_z)), with kappa_s measured against diag(J) (the top of the file). Each loop
 * is over cells or over nodes (gathering from the cells at them), in parallel. */
static int fine_weights(fe_precond *P, double **out)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  const fe_node_cells *adj = &ts->adj;
  int nc = V->mesh->ncells, n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis, nn = V->nnodes;
  double d[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)], rho[TS_MAX_ORDER + 1],
      me[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)];
  FE_CHECK(fe_schwarz_gll_stiffness(n, d, rho));
  FE_CHECK(fe_schwarz_mass(n, ts->consistent, me));
  for (int i = 0; i < p1; i++) rho[i] = me[i * p1 + i]; /* the mass's diagonal */
  double *w = malloc(sizeof(double) * nc * 3), *model = malloc(sizeof(double) * nn),
         *diag = malloc(sizeof(double) * nn);
  fe_vector *dv = NULL;
  fe_report rep;
  int rc = w && model && diag ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                                 "out of host memory for the boxes' weights");
  if (!rc) rc = fe_operator_diagonal(P->A, P->at, &P->act, &dv, &rep);
  if (!rc) rc = fe_vector_get(dv, diag);
  fe_vector_free(dv);
  if (!rc) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < nc; c++) { /* the boxes at kappa = 1 */
      double h[3];
      fe_schwarz_box(V, c, h);
      w[c * 3] = h[1] * h[2] / (2 * h[0]);
      w[c * 3 + 1] = h[0] * h[2] / (2 * h[1]);
      w[c * 3 + 2] = h[0] * h[1] / (2 * h[2]);
    }
#pragma omp parallel for schedule(static)
    for (int g = 0; g < nn; g++) { /* their diagonal summed at each node */
      double s = 0;
      for (int t = adj->start[g]; t < adj->start[g + 1]; t++) {
        int c = adj->cells[t], l = adj->lex[t], i = l % p1, j = (l / p1) % p1, k = l / (p1 * p1);
        s += w[c * 3] * d[i * p1 + i] * rho[j] * rho[k] +
             w[c * 3 + 1] * rho[i] * d[j * p1 + j] * rho[k] +
             w[c * 3 + 2] * rho[i] * rho[j] * d[k * p1 + k];
      }
      model[g] = s;
    }
    rc = ts_ranks_sum(V, model); /* a shared node's cells on every rank */
  }
  int bad = nc; /* the first cell whose kappa is not positive */
  if (!rc) {
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (int c = 0; c < nc; c++) { /* kappa_s: the mean ratio over the free nodes */
      double s = 0;
      int m = 0;
      for (int l = 0; l < nb; l++) {
        int g = V->cell_nodes[(size_t)c * nb + l];
        if (ts->con[g]) continue;
        s += diag[g] / model[g];
        m++;
      }
      double kappa = m ? s / m : 1;
      if (!(kappa > 0)) bad = c < bad ? c : bad;
      for (int k = 0; k < 3; k++) w[c * 3 + k] *= kappa;
    }
  }
  if (!rc && bad < nc)
    rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "twoscale: the Jacobian's "
                      "diagonal is not positive in cell %d (mean ratio to the box not "
                      "positive): the operator is not SPD", bad);
  free(model);
  free(diag);
  if (rc) {
    free(w);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = w;
  return 0;
}

/* The kernel source: sizes, the backend's dialect, the pencil's tables, the linear
 * functions at the GLL nodes (the coarse transfers), the template. */
static int twoscale_source(const twoscale *ts, const fe_space *V, const double *S,
                           const double *lam, char **src)
{
  int ne2 = ts->ne * ts->ne, n = V->elem.order, p1 = n + 1;
  double phi1[2 * (TS_MAX_ORDER + 1)];
  for (int i = 0; i < p1; i++) {
    phi1[i] = (1 - V->elem.line[i]) / 2;
    phi1[p1 + i] = (1 + V->elem.line[i]) / 2;
  }
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab twoscale: both scales of Q%d (schwarz.knl) */\n"
                       "#define FE_DOUBLE %d\n#define FE_COLORED 0\n"
                       "#define NE %d /* points per direction of a subdomain: n + 3 */\n"
                       "#define NPENCIL %d /* pencils: (left, right) end kinds */\n"
                       "#define SZ_ROWS %d /* constrained rows, vertices, nodes per group */\n"
                       "#define P1 %d /* nodes per direction of a cell: n + 1 */\n"
                       "#define NB %d /* nodes of a cell */\n",
                   n, ts->prec == FE_DOUBLE, ts->ne, TS_PENCILS, TS_ROWS, p1, p1 * p1 * p1);
  fe_strbuf_append(&b, ts->be->ops->preamble(ts->be->impl, ts->prec));
  fe_strbuf_append(&b, "\n/* the pencils' eigenvectors SM[(p * NE + a) * NE + j] (S^T M S = I) "
                       "and eigenvalues LAM[p * NE + j], pencil p = left * 3 + right, an end "
                       "0: a neighbour, 1: free, 2: fixed */\n");
  fe_codegen_table(&b, "SM", S, TS_PENCILS * ne2);
  fe_codegen_table(&b, "LAM", lam, TS_PENCILS * ts->ne);
  fe_strbuf_append(&b, "/* PHI1[e * P1 + i]: the linear function of end e (0: -1, 1: +1) at GLL "
                       "node i */\n");
  fe_codegen_table(&b, "PHI1", phi1, 2 * p1);
  fe_strbuf_append(&b, fe_kernel_template("schwarz"));
  return fe_strbuf_finish(&b, src);
}

/* z += P^f r (launched; returns before it is done where the backend allows). */
static int fine_apply(twoscale *ts, int ncells, const fe_vector *r, fe_vector *z)
{
  fe_arg args[6] = {
      {.kind = FE_ARG_INT, .i = ncells},
      {.kind = FE_ARG_BUFFER, .buf = &ts->map},
      {.kind = FE_ARG_BUFFER, .buf = &ts->pen},
      {.kind = FE_ARG_BUFFER, .buf = &ts->wts},
      {.kind = FE_ARG_BUFFER, .buf = &r->buf},
      {.kind = FE_ARG_BUFFER, .buf = &z->buf},
  };
  return ts->be->ops->launch(ts->be->impl, ts->schwarz, (size_t)ncells, ts->group, 6, args,
                             ts->prec, NULL);
}

/* The subdomains' map and weights on the backend, the kernel; the counts of one application. */
static int fine_setup(fe_precond *P)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  int nc = V->mesh->ncells;
  int *map, *pen;
  long long nvalid;
  double t0 = fe_clock();
  size_t ne3 = (size_t)ts->ne * ts->ne * ts->ne;
  /* the map (ne^3 nodes a cell), the pencils, the face neighbours and the weights */
  FE_CHECK(fe_memory_check(sizeof(int) * (size_t)nc * (ne3 + 7) + sizeof(double) * (3 * (size_t)nc +
                           2 * (size_t)V->nnodes), "twoscale: the subdomains' map (%d cells of "
                           "%zu nodes)", nc, ne3));
  FE_CHECK(fe_memory_check_on(ts->be, (sizeof(int) * (ne3 + 1) + 3 * fe_precision_size(ts->prec)) *
                              (size_t)nc, "twoscale: the subdomains' map (%d cells of %zu "
                              "nodes)", nc, ne3));
  if (V->dist && ((const fe_dist *)V->dist)->size > 1) /* the whole space's, renumbered */
    FE_CHECK(ts_ghost_make(V, ts->con, ts->be, ts->prec, ts->gather, ts->add_at, &ts->ghost, &map,
                           &pen, &nvalid));
  else
    FE_CHECK(fe_schwarz_map(V, &ts->adj, ts->con, &map, &pen, &nvalid));
  double t1 = fe_clock();
  int rc = fe_upload_ints(ts->be, map, nc * ne3, &ts->map);
  if (!rc) rc = fe_upload_ints(ts->be, pen, (size_t)nc, &ts->pen);
  free(map);
  free(pen);
  FE_CHECK(rc);
  double *w = NULL, t2 = fe_clock();
  FE_CHECK(fine_weights(P, &w));
  if (P->o.verbose)
    printf("twoscale setup: fine map %.3f s (upload %.3f s), boxes' weights (diag(J) included) "
           "%.3f s\n", t1 - t0, t2 - t1, fe_clock() - t2);
  fe_setup_part_add(&P->parts, "fine_map", t1 - t0, 0);
  fe_setup_part_add(&P->parts, "transfer", t2 - t1, 0);
  fe_setup_part_add(&P->parts, "fine_weights", fe_clock() - t2, 0);
  rc = fe_upload_reals(ts->be, ts->prec, w, (size_t)nc * 3, &ts->wts);
  free(w);
  FE_CHECK(rc);
  /* one item per point, whole warps, capped by the device (the loops stride) */
  size_t g = (ne3 + 31) / 32 * 32;
  ts->group = g > ts->be->info.max_group ? ts->be->info.max_group : g;
  /* counted: six contractions (2 NE flops per point each), the denominator and division
   * (6 per point), one add per entry scattered; the map and weights read, r read and z
   * read and written at every valid entry */
  double wb = (double)fe_precision_size(ts->prec), ne = ts->ne;
  P->flops += nc * (12 * ne * ne3 + 6.0 * ne3) + (double)nvalid;
  P->bytes += nc * (4.0 * ne3 + 4 + 3 * wb) + 3 * wb * (double)nvalid;
  P->launches += 1;
  return 0;
}

/* ---- the coarse scale ---- */

/* The transfers' index arrays (ts_coarse_maps) on the backend, shares (cell order) given. */
static int coarse_maps(twoscale *ts, const fe_space *V, const double *share)
{
  int nc = V->mesh->ncells, nb = V->elem.nbasis, nn = V->nnodes, nv = V->mesh->nvertices;
  size_t nt = (size_t)nc * nb;
  FE_ASSERT(nt < 0x7fffffff, FE_ERR_ARG, "twoscale: %d cells x %d nodes is past the 32-bit "
            "entries of the coarse transfers", nc, nb);
  /* two ints and a real an entry (cell, node), and the vertices' (cell, corner) entries */
  const size_t tbytes = (2 * sizeof(int) + sizeof(double)) * nt + sizeof(int) *
                        (16 * (size_t)nc + (size_t)nv + (size_t)nn + 2);
  FE_CHECK(fe_memory_check(tbytes, "twoscale: the coarse transfers (%zu entries), staged", nt));
  FE_CHECK(fe_memory_check_on(ts->be, tbytes, "twoscale: the coarse transfers (%zu entries)", nt));
  ts_transfers T;
  FE_CHECK(ts_coarse_maps(V, &ts->adj, ts->con, share, &T));
  fe_backend *be = ts->be;
  int nvent = T.vstart[nv] ? T.vstart[nv] : 1, nnent = T.nstart[nn] ? T.nstart[nn] : 1;
  int rc = fe_upload_ints(be, T.nodes, nt, &ts->cnodes);
  if (!rc) rc = fe_upload_ints(be, T.corners, (size_t)nc * 8, &ts->corners);
  if (!rc) rc = fe_upload_ints(be, T.vstart, (size_t)nv + 1, &ts->vstart);
  if (!rc) rc = fe_upload_ints(be, T.ventry, (size_t)nvent, &ts->ventry);
  if (!rc) rc = fe_upload_ints(be, T.nstart, (size_t)nn + 1, &ts->nstart);
  if (!rc) rc = fe_upload_ints(be, T.nentry, (size_t)nnent, &ts->nentry);
  if (!rc) rc = fe_upload_reals(be, ts->prec, T.nshare, (size_t)nnent, &ts->nshare);
  ts_transfers_free(&T);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

/* The Q1 space on V's mesh: split as V is where V is (the same cells on this rank, checked). */
static int coarse_space(const fe_space *V, fe_space **V1)
{
  const fe_dist *d = V->dist;
  if (!d || d->size == 1) return fe_space_create(V->mesh, "Q1", V1);
  fe_space_opts q1 = {.family = 'Q', .order = 1, .ncomp = 1, .kind = FE_NODES_GLL};
  FE_CHECK(fe_space_create_dist(d->whole, &q1, V1));
  const fe_dist *d1 = (*V1)->dist;
  const int nc = V->mesh->ncells;
  int same = d1->mesh->ncells == nc && d1->mesh->nvertices == V->mesh->nvertices;
  for (int c = 0; same && c < nc; c++) same = d1->cells[c] == d->cells[c];
  FE_ASSERT(same, FE_ERR_INTERNAL, "twoscale: rank %d's coarse cells are not its fine ones (the "
            "partition differs between the two spaces)", d->rank);
  return 0;
}

/* The cells at each node (ts->adj), once: the map, the weights and the transfers walk it. */
static int node_cells(fe_precond *P)
{
  twoscale *ts = P->impl;
  if (ts->adj.start) return 0;
  double t0 = fe_clock();
  FE_CHECK(fe_node_cells_build(P->A->V, &ts->adj));
  fe_setup_part_add(&P->parts, "node_cells", fe_clock() - t0, 0);
  return 0;
}

/* What runs while BoomerAMG sets up the coarse hierarchy on another thread (amg.c; before it
 * on a split space): the cells at the nodes, the corners checked against the Q1 space's own
 * map, the fine scale's setup, the restriction's shares, the transfers' maps. */
static int meanwhile(void *ctx)
{
  fe_precond *P = ctx;
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  int nc = V->mesh->ncells, nb = V->elem.nbasis, nv = V->mesh->nvertices;
  FE_CHECK(node_cells(P));
  FE_CHECK(ts_corners_check(V, ts->V1));
  if (ts->fine) {
    ts->fine_done = 1;
    FE_CHECK(fine_setup(P));
  }
  double t0 = fe_clock();
  double *share;
  FE_MALLOC(share, (size_t)nc * nb, "the coarse restriction's shares");
  int rc = ts_coarse_shares(V, &ts->adj, ts->con, share);
  if (!rc) rc = fe_upload_reals(ts->be, ts->prec, share, (size_t)nc * nb, &ts->share);
  if (!rc) rc = coarse_maps(ts, V, share);
  free(share);
  FE_CHECK(rc);
  FE_CHECK(ts->be->ops->alloc(ts->be->impl, (size_t)nc * 8 * fe_precision_size(ts->prec), &ts->rc));
  FE_CHECK(fe_vector_create(ts->be, ts->prec, nv, &ts->Rd));
  FE_CHECK(fe_vector_create(ts->be, ts->prec, nv, &ts->Zd));
  ts->maps_done = 1;
  fe_setup_part_add(&P->parts, "coarse_maps", fe_clock() - t0, 0);
  return 0;
}

static int coarse_setup(fe_precond *P)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  int nc = V->mesh->ncells, p1 = V->elem.order + 1, nb = V->elem.nbasis, nv = V->mesh->nvertices;
  double t0 = fe_clock();
  FE_CHECK(coarse_space(V, &ts->V1));
  FE_CHECK(fe_operator_create(ts->V1, P->A->pde, NULL, 0, 0.0, &ts->A1));
  /* constrained: the vertices constrained in the fine space (vertex v is node v of both
   * spaces); written before any realization of A1 exists, as fe_operator_transpose does */
  fe_operator *A1 = ts->A1;
  free(A1->dir_nodes); /* the empty list of no tags */
  A1->ndir = 0;
  FE_MALLOC(A1->dir_nodes, nv + 1, "the coarse constrained nodes");
  for (int v = 0; v < nv; v++)
    if (ts->con[v]) A1->dir_nodes[A1->ndir++] = v;
  double t1 = fe_clock();
  /* BoomerAMG on the assembled Q1 matrix: its cycle on the host, or (cycle_on = "device")
   * its hierarchy moved to the fine scale's backend and cycled there, with no copy of the
   * coarse vectors to the host and back */
  ts->on_device = P->o.cycle_on == FE_CYCLE_DEVICE;
  fe_action_opts host;
  fe_action_opts_default(&host);
  host.backend = ts->on_device ? P->act.backend : "cpu";
  host.precision = ts->on_device ? (int)ts->prec : FE_DOUBLE;
  host.nolog = 1;
  fe_precond_opts amg;
  fe_precond_opts_default(&amg);
  amg.name = "amg";
  amg.cycles = P->o.cycles;
  amg.cycle_on = P->o.cycle_on;
  amg.cycle_values = P->o.cycle_values;
  /* none aggressive: Q3 on a distorted box (166k dofs) took 36 iterations with the first
   * level's, 30 without, the coarse scale's cycle a small part of an application */
  amg.aggressive = P->o.aggressive >= 0 ? P->o.aggressive : 0;
  /* strong threshold 0.7 (amg's own 0.5 in 3D): Q3 2.35M dofs on a distorted box, H200, one
   * call: hypre's setup 0.57 -> 0.38 s, 37 -> 36 iterations (docs/solvers.md) */
  amg.theta = P->o.theta > 0 ? P->o.theta : 0.7;
  /* extended+i in hypre's matrix-matrix form (17; amg's own: 6): Q1 on 91,125 vertices, this
   * machine's one core, hypre's setup 10-15% shorter, CG the same (Q3 2.35M dofs 36
   * iterations, Q7 2.80M 37; docs/solvers.md) */
  amg.interp = 17;
  amg.verbose = P->o.verbose;
  amg.meanwhile = meanwhile; /* the maps (and the fine scale) made while hypre sets up */
  amg.meanwhile_ctx = P;
  FE_CHECK(fe_precond_create(ts->A1, NULL, &host, &amg, &ts->P0));
  FE_ASSERT(ts->maps_done, FE_ERR_INTERNAL, "twoscale: the coarse maps were not made");
  if (ts->on_device) { /* the coarse constrained vertices' mask, for z's coarse part */
    double *mask = malloc(sizeof(double) * ((size_t)nv + 1));
    FE_ASSERT(mask, FE_ERR_MEM, "twoscale: out of host memory");
    for (int v = 0; v < nv; v++) mask[v] = ts->con[v] ? 0 : 1;
    int rc = fe_vector_create(ts->be, ts->prec, nv, &ts->mask);
    if (!rc) rc = fe_vector_set(ts->mask, mask);
    free(mask);
    FE_CHECK(rc);
  }
  fe_backend *cpu;
  FE_CHECK(fe_backend_get("cpu", &cpu));
  if (!ts->on_device) { /* the host's cycle's vectors */
    FE_CHECK(fe_vector_create(cpu, FE_DOUBLE, nv, &ts->Rv));
    FE_CHECK(fe_vector_create(cpu, FE_DOUBLE, nv, &ts->Zv));
    ts->R = cpu->ops->host(cpu->impl, &ts->Rv->buf);
    ts->Z = cpu->ops->host(cpu->impl, &ts->Zv->buf);
    FE_ASSERT(ts->R && ts->Z, FE_ERR_INTERNAL, "twoscale: the cpu's vectors not in host memory");
  }
  if (P->o.verbose)
    printf("twoscale setup: coarse space and operator %.3f s, amg (its assembly, BoomerAMG, "
           "the maps meanwhile) %.3f s\n", t1 - t0, fe_clock() - t1);
  fe_setup_part_add(&P->parts, "coarse_space", t1 - t0, 0);
  fe_setup_parts_merge(&P->parts, &ts->P0->parts); /* amg's: its assembly, hypre's */
  P->nlevels = ts->P0->nlevels; /* its levels, when they cycle on the backend */
  memcpy(P->level, ts->P0->level, sizeof P->level);
  /* counted, per application: restriction (per cell nb products and the three contractions
   * to the corners, per vertex one add per entry), prolongation (per entry 14 flops of
   * interpolation and 2 of the add), the amg's own; bytes: the cells' nodes and shares read
   * by both, r gathered, the entries, the corners' values, z read and written; with the
   * host's cycle the coarse vectors cross to the host and back (host_bytes) */
  double wb = (double)fe_precision_size(ts->prec), ent = (double)nc * nb;
  double ventries = 8.0 * nc, flops_r = ent + 2.0 * nc * (2 * p1 * p1 * p1 + 4 * p1 * p1 + 8 * p1);
  P->flops += flops_r + ventries + 16 * ent + ts->P0->flops;
  P->bytes += ent * (4 + 2 * wb) + nc * 8 * wb + ventries * (4 + wb) + nv * (4 + wb) /* R */
              + ent * (8 + wb) + nc * 32.0 + nv * wb + 2.0 * V->ndofs * wb;       /* V^T */
  P->host_bytes += (ts->on_device ? 0 : 2.0 * nv * wb) + ts->P0->host_bytes;
  P->launches += 3;
  return 0;
}

/* Rd = V r on the backend (two launches), then to the host's R (waits for them). */
static int coarse_restrict(twoscale *ts, const fe_space *V, const fe_vector *r)
{
  int nc = V->mesh->ncells, nv = V->mesh->nvertices, ng = (nv + TS_ROWS - 1) / TS_ROWS;
  fe_arg a[5] = {
      {.kind = FE_ARG_INT, .i = nc},          {.kind = FE_ARG_BUFFER, .buf = &ts->cnodes},
      {.kind = FE_ARG_BUFFER, .buf = &ts->share}, {.kind = FE_ARG_BUFFER, .buf = &r->buf},
      {.kind = FE_ARG_BUFFER, .buf = &ts->rc},
  };
  FE_CHECK(ts->be->ops->launch(ts->be->impl, ts->restrict_cells, (size_t)nc, ts->rgroup, 5, a,
                               ts->prec, NULL));
  fe_arg b[6] = {
      {.kind = FE_ARG_INT, .i = ng},          {.kind = FE_ARG_INT, .i = nv},
      {.kind = FE_ARG_BUFFER, .buf = &ts->vstart}, {.kind = FE_ARG_BUFFER, .buf = &ts->ventry},
      {.kind = FE_ARG_BUFFER, .buf = &ts->rc}, {.kind = FE_ARG_BUFFER, .buf = &ts->Rd->buf},
  };
  FE_CHECK(ts->be->ops->launch(ts->be->impl, ts->restrict_vertices, (size_t)ng, TS_ROWS, 6, b,
                               ts->prec, NULL));
  /* a shared vertex's cells on every rank */
  if (ts->V1->dist) FE_CHECK(fe_dist_sum(ts->V1->dist, ts->Rd, NULL, NULL));
  return ts->on_device ? 0 : fe_vector_get(ts->Rd, ts->R);
}

/* Z = P_0 R on the host, to the backend, and z += V^T Z there. */
static int coarse_cycle(twoscale *ts)
{
  if (ts->on_device) { /* Z = P_0 R on the backend, zero on the constrained vertices */
    FE_CHECK(fe_precond_apply(ts->P0, ts->Rd, &ts->Zd));
    return fe_vector_pointwise(ts->Zd, ts->Zd, ts->mask, 0);
  }
  FE_CHECK(fe_precond_apply(ts->P0, ts->Rv, &ts->Zv)); /* Z = P_0 R */
  for (int i = 0; i < ts->A1->ndir; i++) ts->Z[ts->A1->dir_nodes[i]] = 0;
  return fe_vector_set(ts->Zd, ts->Z); /* after the fine kernel, in the stream's order */
}

/* z += V^T Z on the backend (one launch). */
static int coarse_prolong(twoscale *ts, const fe_space *V, fe_vector *z)
{
  int nn = V->nnodes, ng = (nn + TS_ROWS - 1) / TS_ROWS;
  fe_arg a[8] = {
      {.kind = FE_ARG_INT, .i = ng},          {.kind = FE_ARG_INT, .i = nn},
      {.kind = FE_ARG_BUFFER, .buf = &ts->nstart}, {.kind = FE_ARG_BUFFER, .buf = &ts->nentry},
      {.kind = FE_ARG_BUFFER, .buf = &ts->nshare}, {.kind = FE_ARG_BUFFER, .buf = &ts->corners},
      {.kind = FE_ARG_BUFFER, .buf = &ts->Zd->buf}, {.kind = FE_ARG_BUFFER, .buf = &z->buf},
  };
  return ts->be->ops->launch(ts->be->impl, ts->prolong, (size_t)ng, TS_ROWS, 8, a, ts->prec, NULL);
}

/* The coarse cycle on the backend's side queue (fe_backend_ops.side), beside the fine kernel:
 * a cycle is some 30 small launches that leave most of a GPU idle one after another. */
static int coarse_cycle_beside(twoscale *ts)
{
  const fe_backend_ops *ops = ts->be->ops;
  FE_CHECK(ops->side(ts->be->impl, FE_SIDE_BEGIN));
  int rc = coarse_cycle(ts);
  int rc2 = ops->side(ts->be->impl, FE_SIDE_END);
  FE_CHECK(rc);
  return rc2;
}

/* ---- the unit ---- */

static void twoscale_destroy(fe_precond *P)
{
  twoscale *ts = P->impl;
  if (!ts) return;
  fe_buffer *bufs[] = {&ts->map,    &ts->pen,    &ts->wts,     &ts->didx,
                       &ts->cnodes, &ts->share,  &ts->corners, &ts->vstart,
                       &ts->ventry, &ts->nstart, &ts->nentry,  &ts->nshare, &ts->rc};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) ts->be->ops->release(ts->be->impl, bufs[i]);
  if (ts->mod) ts->be->ops->module_free(ts->be->impl, ts->mod);
  fe_precond_free(ts->P0);
  fe_operator_free(ts->A1);
  fe_space_free(ts->V1);
  fe_vector_free(ts->Rv);
  fe_vector_free(ts->Zv);
  fe_vector_free(ts->Rd);
  fe_vector_free(ts->Zd);
  fe_vector_free(ts->mask);
  fe_node_cells_free(&ts->adj);
  ts_ghost_free(ts->ghost);
  free(ts->con);
  free(ts);
  P->impl = NULL;
}

/* The pencils' eigenpairs, the module of both scales, its kernels. */
static int twoscale_module(fe_precond *P)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  double S[TS_PENCILS * TS_MAX_LINE * TS_MAX_LINE], lam[TS_PENCILS * TS_MAX_LINE];
  int ne2 = ts->ne * ts->ne;
  for (int p = 0; p < TS_PENCILS; p++)
    FE_CHECK(fe_schwarz_line(V->elem.order, p / 3, p % 3, ts->consistent, S + p * ne2,
                             lam + p * ts->ne));
  char *src;
  FE_CHECK(twoscale_source(ts, V, S, lam, &src));
  double seconds;
  int cached, rc = fe_compile(ts->be, src, &ts->mod, &seconds, &cached);
  free(src);
  FE_CHECK(rc);
  if (P->o.verbose)
    printf("twoscale setup: kernels compiled in %.3f s%s\n", seconds, cached ? " (cached)" : "");
  const struct {
    const char *name;
    fe_kernel **k;
  } entry[] = {{"fe_schwarz_rows", &ts->rows},
               {"fe_twoscale_gather", &ts->gather},
               {"fe_twoscale_add_at", &ts->add_at},
               {"fe_schwarz", &ts->schwarz},
               {"fe_twoscale_restrict_cells", &ts->restrict_cells},
               {"fe_twoscale_restrict_vertices", &ts->restrict_vertices},
               {"fe_twoscale_prolong", &ts->prolong}};
  for (size_t i = 0; i < sizeof entry / sizeof entry[0]; i++)
    FE_CHECK(ts->be->ops->kernel(ts->be->impl, ts->mod, entry[i].name, entry[i].k));
  size_t nb = (size_t)V->elem.nbasis, g = (nb + 31) / 32 * 32; /* one item per node */
  ts->rgroup = g > ts->be->info.max_group ? ts->be->info.max_group : g;
  return 0;
}

static int twoscale_setup(fe_precond *P)
{
  const fe_space *V = P->A->V;
  FE_CHECK(twoscale_serves(V));
  const char *parts = P->o.parts ? P->o.parts : "both";
  int fine = !strcmp(parts, "both") || !strcmp(parts, "fine");
  int coarse = !strcmp(parts, "both") || !strcmp(parts, "coarse");
  FE_ASSERT(fine || coarse, FE_ERR_ARG, "twoscale: unknown parts = \"%s\" (both, fine, coarse)",
            parts);
  twoscale *ts;
  FE_CALLOC(ts, 1, "the twoscale preconditioner");
  P->impl = ts;
  ts->fine = fine;
  ts->coarse = coarse;
  ts->ne = V->elem.order + 3;
  /* the operator's mass in 1D: exact when its rule integrates degree 2n (Gauss, the
   * default), else taken as the lumped GLL mass (the n + 1 GLL points: the paper's) */
  ts->consistent = fe_operator_quadrature(P->A, "apply")->degree >= 2 * V->elem.order;
  ts->prec = P->act.precision >= 0 ? (fe_precision)P->act.precision : fe_precision_default();
  FE_CHECK(fe_backend_get(P->act.backend, &ts->be));
  FE_CALLOC(ts->con, (size_t)V->nnodes + 1, "the constrained nodes");
  for (int i = 0; i < P->A->ndir; i++) ts->con[P->A->dir_nodes[i]] = 1;
  double t0 = fe_clock();
  FE_CHECK(twoscale_module(P));
  double t1 = fe_clock();
  int ndir = P->A->ndir;
  FE_CHECK(fe_upload_ints(ts->be, P->A->dir_nodes, (size_t)ndir, &ts->didx));
  /* counted per application: z zeroed, the constrained rows copied, then each scale's own */
  double wb = (double)fe_precision_size(ts->prec);
  P->flops = 0;
  P->bytes = V->ndofs * wb + ndir * (4 + 2 * wb);
  P->launches = 1 + (ndir > 0);
  double t2 = fe_clock();
  /* the coarse scale first: its amg runs the fine scale's setup while hypre's runs */
  if (ts->coarse) FE_CHECK(coarse_setup(P));
  double t3 = fe_clock();
  if (ts->fine && !ts->fine_done) {
    FE_CHECK(node_cells(P));
    FE_CHECK(fine_setup(P));
  }
  fe_node_cells_free(&ts->adj); /* setup only */
  const char *e = getenv("FELAB_TWOSCALE_SIDE"); /* the coarse cycle on a side queue (cuda) */
  ts->beside = ts->coarse && ts->fine && ts->on_device && ts->be->ops->side && !ts->ghost &&
               !ts->V1->dist && !(e && !strcmp(e, "0"));
  if (P->o.verbose)
    printf("twoscale setup: pencils and kernels %.3f s, coarse scale (the cells at the nodes "
           "and the fine scale's setup made during hypre's) %.3f s, then %.3f s\n", t1 - t0,
           t3 - t2, fe_clock() - t3);
  fe_setup_part_add(&P->parts, "kernels", t1 - t0, 0);
  size_t k = (size_t)snprintf(P->describe, sizeof P->describe, "two-scale:");
  if (ts->fine)
    k += (size_t)snprintf(P->describe + k, sizeof P->describe - k, " Schwarz %d^3 by fast "
                          "diagonalization%s", ts->ne, ts->coarse ? " +" : "");
  if (ts->coarse && k < sizeof P->describe)
    snprintf(P->describe + k, sizeof P->describe - k, " Q1 coarse (%d vertices) by %.80s",
             V->mesh->nvertices, ts->P0->describe);
  return 0;
}

/* z = P^f r + P^c r on the free rows, z = r on the constrained ones. The coarse residual
 * first (small: one value per vertex to the host), then the fine kernel, and the host's
 * V-cycle while the device runs it where launches return at once (cuda; the cpu and opencl
 * wait for each launch, so there the two run one after the other); the correction goes back
 * after the fine kernel, in the stream's order, and is added by the prolongation. */
static int twoscale_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  const int beside = ts->beside;
  if (ts->coarse) FE_CHECK(coarse_restrict(ts, V, r));
  if (beside) FE_CHECK(coarse_cycle_beside(ts));
  if (ts->fine && ts->ghost) {
    fe_vector *rx, *zx;
    FE_CHECK(ts_ghost_begin(ts->ghost, r, &rx, &zx));
    FE_CHECK(fine_apply(ts, V->mesh->ncells, rx, zx));
    FE_CHECK(ts_ghost_end(ts->ghost, z));
  } else {
    FE_CHECK(fe_vector_fill(z, 0));
    if (ts->fine) FE_CHECK(fine_apply(ts, V->mesh->ncells, r, z));
  }
  if (ts->coarse && beside) FE_CHECK(ts->be->ops->side(ts->be->impl, FE_SIDE_JOIN));
  else if (ts->coarse) FE_CHECK(coarse_cycle(ts));
  if (ts->coarse) FE_CHECK(coarse_prolong(ts, V, z));
  if (V->dist) FE_CHECK(fe_dist_sum(V->dist, z, NULL, NULL)); /* every rank's cells at a node */
  int ndir = P->A->ndir;
  if (ndir == 0) return 0;
  int ng = (ndir + TS_ROWS - 1) / TS_ROWS;
  fe_arg args[5] = {
      {.kind = FE_ARG_INT, .i = ng},
      {.kind = FE_ARG_INT, .i = ndir},
      {.kind = FE_ARG_BUFFER, .buf = &ts->didx},
      {.kind = FE_ARG_BUFFER, .buf = &r->buf},
      {.kind = FE_ARG_BUFFER, .buf = &z->buf},
  };
  return ts->be->ops->launch(ts->be->impl, ts->rows, (size_t)ng, TS_ROWS, 5, args, ts->prec, NULL);
}

const fe_precond_kind fe_precond_twoscale = {
    "twoscale",
    "two-scale additive Schwarz (Remacle et al.): overlapping cell subdomains by fast "
    "diagonalization + a Q1 coarse problem by BoomerAMG (parts = both, fine, coarse)",
    twoscale_setup, twoscale_apply, twoscale_destroy,
};
