/* Preconditioner "twoscale": the two-scale additive Schwarz preconditioner of Remacle,
 * Gandham and Warburton (section 4) for Qn spaces (n = 1..9, GLL nodes) on hexahedra,
 *   M^-1 = P^c + P^f.
 *
 * Fine scale P^f (section 4.2): one subdomain per cell, the cell plus one layer of nodes
 * around it, the (n+3)^3 points with the edge and corner regions. On each the local problem
 * is solved on the cell's box h_x x h_y x h_z by fast diagonalization (twoscale-fdm.c), with
 * the operator's own 1D mass (lumped under GLL quadrature, consistent under an exact rule),
 * so that on a uniform mesh A_s = R_s A R_s^T exactly, and the results are added,
 * unweighted as in the paper, which keeps the
 * sum symmetric: P^f = sum_s R_s^T A_s^-1 R_s. One kernel on the solve's backend
 * (engine/kernels/schwarz.knl). The box's coefficient is measured rather than read from the
 * physics: kappa_s is the mean over the cell's free nodes of diag(J) / diag(A_box) with
 * A_box the boxes' operator at kappa = 1 summed at each node, so per-region coefficients (and
 * a reaction term, folded into kappa) reach the local problems whatever the physics.
 *
 * Coarse scale P^c (section 4.1): the problem on the vertices, a Q1 space on the same mesh
 * and an operator with the same physics, constrained at the vertices that are constrained
 * in the fine space, assembled and solved approximately by BoomerAMG (one V-cycle, the amg
 * unit, on the host). Restriction is the L2 projection with the lumped (GLL) mass m:
 *   V = C m^-1,  C_{IJK,N} = sum_e Phi_I(t_i) Phi_J(t_j) Phi_K(t_k) m_{ijk;e},
 * so V r distributes r_N among the cells at N by their share m_{ijk;e} / m_N of its mass,
 * and the prolongation is V^T (the same shares): P^c = V^T P_0 V, symmetric.
 * Restriction and prolongation run on the host (r is copied down, the correction up). On a
 * backend whose launches return at once (cuda) the fine kernel is launched first and the
 * coarse work runs on the host meanwhile, as in the paper's section 5.3.
 *
 * Constrained rows are the identity's (as the operator's): z_i = r_i there, and neither
 * scale reads or writes them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/precond/twoscale.h"
#include "engine/precond/units.h"
#include "engine/quadrature.h"
#include "engine/strategy.h"
#include "engine/strbuf.h"

#define TS_ROWS 128 /* constrained rows per work group */

typedef struct twoscale {
  int fine, coarse;      /* the parts applied */
  fe_backend *be;        /* the solve's backend and precision */
  fe_precision prec;
  int ne;                /* n + 3: points per direction of a subdomain */
  int consistent;        /* the boxes' mass: consistent (1) or lumped (0), as the operator's */
  unsigned char *con;    /* constrained fine nodes */
  /* fine scale, on the backend */
  fe_module *mod;
  fe_kernel *schwarz, *rows;
  fe_buffer map;         /* ncells x ne^3 nodes, -1: none */
  fe_buffer pen;         /* ncells: the pencils of the three directions */
  fe_buffer wts;         /* ncells x 3: kappa_s (h_y h_z / 2 h_x, ...) */
  fe_buffer didx;        /* the constrained dofs */
  size_t group;          /* items per work group */
  /* coarse scale, on the host */
  fe_space *V1;          /* Q1 on the same mesh */
  fe_operator *A1;       /* its operator, the fine physics */
  fe_precond *P0;        /* BoomerAMG on A1 */
  int *corners;          /* ncells x 8 coarse nodes (bit d: the far side along d) */
  double *share;         /* ncells x nb (lexicographic): m_{ijk;e} / m_N, 0 if constrained */
  double *phi;           /* phi[(q * nb + l)]: Phi of corner q at lattice node l */
  double *rh, *zh, *R;   /* host: r, the coarse correction, the coarse vector */
  fe_vector *Rv, *Zv;    /* the coarse vectors on the cpu */
  fe_vector *zc;         /* the coarse correction on the backend */
} twoscale;

/* Whether V is a scalar Qn space with GLL nodes on hexahedra, else why not. */
static int twoscale_serves(const fe_space *V)
{
  const fe_element *el = &V->elem;
  FE_ASSERT(el->cell == FE_CELL_HEX && el->family == 'Q', FE_ERR_ARG,
            "twoscale: needs a Q1..Q%d space on hexahedra; %s on %ss is not (use jacobi, "
            "chebyshev or amg)", TS_MAX_ORDER, V->name, fe_cell_name(el->cell));
  FE_ASSERT(el->order <= TS_MAX_ORDER, FE_ERR_ARG, "twoscale: %s is above Q%d", V->name,
            TS_MAX_ORDER);
  FE_ASSERT(el->kind == FE_NODES_GLL, FE_ERR_ARG,
            "twoscale: needs GLL nodes; this %s space has equispaced nodes", V->name);
  FE_ASSERT(V->ncomp == 1, FE_ERR_ARG, "twoscale: needs a scalar space; %s has %d components",
            V->name, V->ncomp);
  return 0;
}

/* ---- the fine scale ---- */

/* The box weights of every cell, kappa_s (h_y h_z / (2 h_x), h_x h_z / (2 h_y),
 * h_x h_y / (2 h_z)), with kappa_s measured against diag(J) (the top of the file). */
static int fine_weights(fe_precond *P, double **out)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  int nc = V->mesh->ncells, n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis;
  double d[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)], rho[TS_MAX_ORDER + 1],
      me[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)];
  FE_CHECK(fe_schwarz_gll_stiffness(n, d, rho));
  FE_CHECK(fe_schwarz_mass(n, ts->consistent, me));
  for (int i = 0; i < p1; i++) rho[i] = me[i * p1 + i]; /* the mass's diagonal */
  double *w = malloc(sizeof(double) * nc * 3), *model = calloc((size_t)V->nnodes, sizeof(double)),
         *diag = malloc(sizeof(double) * V->nnodes);
  fe_vector *dv = NULL;
  fe_report rep;
  int rc = w && model && diag ? 0 : fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                                                 "out of host memory for the boxes' weights");
  if (!rc) rc = fe_operator_diagonal(P->A, P->at, &P->act, &dv, &rep);
  if (!rc) rc = fe_vector_get(dv, diag);
  fe_vector_free(dv);
  for (int c = 0; c < nc && !rc; c++) { /* the boxes at kappa = 1, diagonal summed per node */
    double h[3];
    fe_schwarz_box(V, c, h);
    w[c * 3] = h[1] * h[2] / (2 * h[0]);
    w[c * 3 + 1] = h[0] * h[2] / (2 * h[1]);
    w[c * 3 + 2] = h[0] * h[1] / (2 * h[2]);
    for (int l = 0; l < nb; l++) {
      int i = l % p1, j = (l / p1) % p1, k = l / (p1 * p1);
      int g = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
      model[g] += w[c * 3] * d[i * p1 + i] * rho[j] * rho[k] +
                  w[c * 3 + 1] * rho[i] * d[j * p1 + j] * rho[k] +
                  w[c * 3 + 2] * rho[i] * rho[j] * d[k * p1 + k];
    }
  }
  for (int c = 0; c < nc && !rc; c++) { /* kappa_s: the mean ratio over the free nodes */
    double s = 0;
    int m = 0;
    for (int l = 0; l < nb; l++) {
      int g = V->cell_nodes[(size_t)c * nb + l];
      if (ts->con[g]) continue;
      s += diag[g] / model[g];
      m++;
    }
    double kappa = m ? s / m : 1;
    if (!(kappa > 0)) {
      rc = fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "twoscale: the Jacobian's "
                        "diagonal is not positive in cell %d (mean ratio %g to the box): the "
                        "operator is not SPD", c, kappa);
      break;
    }
    for (int k = 0; k < 3; k++) w[c * 3 + k] *= kappa;
  }
  free(model);
  free(diag);
  if (rc) {
    free(w);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  *out = w;
  return 0;
}

/* The kernel source: sizes, the backend's dialect, the pencil's tables, the template. */
static int fine_source(const twoscale *ts, int n, const double *S, const double *lam, char **src)
{
  int ne2 = ts->ne * ts->ne;
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "/* felab twoscale: the fine scale of Q%d (schwarz.knl) */\n"
                       "#define FE_DOUBLE %d\n#define FE_COLORED 0\n"
                       "#define NE %d /* points per direction of a subdomain: n + 3 */\n"
                       "#define NPENCIL %d /* pencils: (left, right) end kinds */\n"
                       "#define SZ_ROWS %d /* constrained rows per work group */\n",
                   n, ts->prec == FE_DOUBLE, ts->ne, TS_PENCILS, TS_ROWS);
  fe_strbuf_append(&b, ts->be->ops->preamble(ts->be->impl, ts->prec));
  fe_strbuf_append(&b, "\n/* the pencils' eigenvectors SM[(p * NE + a) * NE + j] (S^T M S = I) "
                       "and eigenvalues LAM[p * NE + j], pencil p = left * 3 + right, an end "
                       "0: a neighbour, 1: free, 2: fixed */\n");
  fe_codegen_table(&b, "SM", S, TS_PENCILS * ne2);
  fe_codegen_table(&b, "LAM", lam, TS_PENCILS * ts->ne);
  fe_strbuf_append(&b, fe_kernel_template("schwarz"));
  return fe_strbuf_finish(&b, src);
}

/* The subdomains' map and weights on the backend, the kernel; the counts of one application. */
static int fine_setup(fe_precond *P)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  int nc = V->mesh->ncells;
  int *map, *pen;
  long long nvalid;
  FE_CHECK(fe_schwarz_map(V, ts->con, &map, &pen, &nvalid));
  size_t ne3 = (size_t)ts->ne * ts->ne * ts->ne;
  int rc = fe_upload_ints(ts->be, map, nc * ne3, &ts->map);
  if (!rc) rc = fe_upload_ints(ts->be, pen, (size_t)nc, &ts->pen);
  free(map);
  free(pen);
  FE_CHECK(rc);
  double *w = NULL;
  FE_CHECK(fine_weights(P, &w));
  rc = fe_upload_reals(ts->be, ts->prec, w, (size_t)nc * 3, &ts->wts);
  free(w);
  FE_CHECK(rc);
  FE_CHECK(ts->be->ops->kernel(ts->be->impl, ts->mod, "fe_schwarz", &ts->schwarz));
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

/* ---- the coarse scale ---- */

/* The Q1 space and operator, BoomerAMG on it, and the restriction's shares and factors. */
static int coarse_setup(fe_precond *P)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  const fe_mesh *m = V->mesh;
  int nc = m->ncells, n = V->elem.order, p1 = n + 1, nb = V->elem.nbasis;
  FE_CHECK(fe_space_create(m, "Q1", &ts->V1));
  FE_CHECK(fe_operator_create(ts->V1, P->A->pde, NULL, 0, 0.0, &ts->A1));
  /* constrained: the vertices constrained in the fine space (vertex v is node v of both
   * spaces); written before any realization of A1 exists, as fe_operator_transpose does */
  fe_operator *A1 = ts->A1;
  free(A1->dir_nodes); /* the empty list of no tags */
  A1->ndir = 0;
  FE_MALLOC(A1->dir_nodes, m->nvertices + 1, "the coarse constrained nodes");
  for (int v = 0; v < m->nvertices; v++)
    if (ts->con[v]) A1->dir_nodes[A1->ndir++] = v;
  /* the cells' corners, checked against the Q1 space's own map */
  FE_MALLOC(ts->corners, (size_t)nc * 8, "the cells' corners");
  for (int c = 0; c < nc; c++)
    for (int q = 0; q < 8; q++) {
      int l = n * (q & 1) + p1 * (n * ((q >> 1) & 1) + p1 * n * ((q >> 2) & 1));
      int g = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
      int g1 = ts->V1->cell_nodes[(size_t)c * 8 + ts->V1->elem.lex[(q & 1) + 2 * ((q >> 1) & 1) +
                                                                   4 * ((q >> 2) & 1)]];
      FE_ASSERT(g == g1 && g < m->nvertices, FE_ERR_INTERNAL, "twoscale: corner %d of cell %d is "
                "node %d of %s but node %d of Q1", q, c, g, V->name, g1);
      ts->corners[c * 8 + q] = g;
    }
  /* Phi_q at lattice node l: the trilinear corner functions at the GLL nodes */
  FE_MALLOC(ts->phi, (size_t)8 * nb, "the coarse basis at the nodes");
  for (int q = 0; q < 8; q++)
    for (int l = 0; l < nb; l++) {
      int ijk[3] = {l % p1, (l / p1) % p1, l / (p1 * p1)};
      double v = 1;
      for (int d = 0; d < 3; d++) {
        double t = V->elem.line[ijk[d]];
        v *= (q >> d & 1) ? (1 + t) / 2 : (1 - t) / 2;
      }
      ts->phi[q * nb + l] = v;
    }
  /* the lumped mass m_{ijk;e} = rho_i rho_j rho_k det J at the node, and each cell's share */
  double d[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)], rho[TS_MAX_ORDER + 1];
  FE_CHECK(fe_schwarz_gll_stiffness(n, d, rho));
  double *mass;
  FE_CALLOC(mass, (size_t)V->nnodes, "the lumped mass");
  ts->share = malloc(sizeof(double) * nc * nb);
  if (!ts->share) {
    free(mass);
    FE_ERROR(FE_ERR_MEM, "out of host memory for the coarse restriction");
  }
  for (int c = 0; c < nc; c++)
    for (int l = 0; l < nb; l++) {
      int i = l % p1, j = (l / p1) % p1, k = l / (p1 * p1);
      double xi[3] = {V->elem.line[i], V->elem.line[j], V->elem.line[k]}, x[3], J[9];
      fe_space_cell_map(V, c, xi, x, J);
      double K[9], det = fe_space_map_inverse(3, J, K);
      ts->share[(size_t)c * nb + l] = rho[i] * rho[j] * rho[k] * det;
      mass[V->cell_nodes[(size_t)c * nb + V->elem.lex[l]]] += ts->share[(size_t)c * nb + l];
    }
  for (int c = 0; c < nc; c++)
    for (int l = 0; l < nb; l++) {
      int g = V->cell_nodes[(size_t)c * nb + V->elem.lex[l]];
      ts->share[(size_t)c * nb + l] = ts->con[g] ? 0 : ts->share[(size_t)c * nb + l] / mass[g];
    }
  free(mass);
  /* BoomerAMG on the assembled Q1 matrix, on the host */
  fe_action_opts host;
  fe_action_opts_default(&host);
  host.backend = "cpu";
  host.precision = FE_DOUBLE;
  host.nolog = 1;
  fe_precond_opts amg;
  fe_precond_opts_default(&amg);
  amg.name = "amg";
  amg.cycles = P->o.cycles;
  amg.verbose = P->o.verbose;
  FE_CHECK(fe_precond_create(ts->A1, NULL, &host, &amg, &ts->P0));
  fe_backend *cpu;
  FE_CHECK(fe_backend_get("cpu", &cpu));
  FE_CHECK(fe_vector_create(cpu, FE_DOUBLE, m->nvertices, &ts->Rv));
  FE_CHECK(fe_vector_create(cpu, FE_DOUBLE, m->nvertices, &ts->Zv));
  FE_CHECK(fe_vector_create(ts->be, ts->prec, V->ndofs, &ts->zc));
  FE_MALLOC(ts->rh, V->ndofs, "the residual on the host");
  FE_MALLOC(ts->zh, V->ndofs, "the coarse correction on the host");
  FE_MALLOC(ts->R, m->nvertices, "the coarse residual");
  /* counted: restriction and prolongation, 17 flops per (cell, node) each; the amg's own;
   * host work is counted in flops, the copies in host_bytes */
  P->flops += 34.0 * nc * nb + ts->P0->flops;
  P->host_bytes += 2.0 * V->ndofs * fe_precision_size(ts->prec) + ts->P0->host_bytes;
  P->bytes += 3.0 * V->ndofs * fe_precision_size(ts->prec); /* the correction's add */
  P->launches += 1;
  return 0;
}

/* zh = V^T P_0 V rh on the host. */
static int coarse_apply(twoscale *ts, const fe_space *V)
{
  int nc = V->mesh->ncells, nb = V->elem.nbasis, nv = V->mesh->nvertices;
  for (int v = 0; v < nv; v++) ts->R[v] = 0;
  for (int c = 0; c < nc; c++) { /* R = C m^-1 r: each node's share, onto the corners */
    double acc[8] = {0};
    for (int l = 0; l < nb; l++) {
      double y = ts->share[(size_t)c * nb + l] * ts->rh[V->cell_nodes[(size_t)c * nb + V->elem.lex[l]]];
      for (int q = 0; q < 8; q++) acc[q] += ts->phi[q * nb + l] * y;
    }
    for (int q = 0; q < 8; q++) ts->R[ts->corners[c * 8 + q]] += acc[q];
  }
  for (int i = 0; i < ts->A1->ndir; i++) ts->R[ts->A1->dir_nodes[i]] = 0;
  FE_CHECK(fe_vector_set(ts->Rv, ts->R));
  FE_CHECK(fe_precond_apply(ts->P0, ts->Rv, &ts->Zv)); /* Z = P_0 R */
  FE_CHECK(fe_vector_get(ts->Zv, ts->R));
  for (int i = 0; i < ts->A1->ndir; i++) ts->R[ts->A1->dir_nodes[i]] = 0;
  for (int i = 0; i < V->ndofs; i++) ts->zh[i] = 0;
  for (int c = 0; c < nc; c++) { /* z = m^-1 C^T Z: the corners' values, by the same shares */
    double Zc[8];
    for (int q = 0; q < 8; q++) Zc[q] = ts->R[ts->corners[c * 8 + q]];
    for (int l = 0; l < nb; l++) {
      double s = 0;
      for (int q = 0; q < 8; q++) s += ts->phi[q * nb + l] * Zc[q];
      ts->zh[V->cell_nodes[(size_t)c * nb + V->elem.lex[l]]] += ts->share[(size_t)c * nb + l] * s;
    }
  }
  return 0;
}

/* ---- the unit ---- */

static void twoscale_destroy(fe_precond *P)
{
  twoscale *ts = P->impl;
  if (!ts) return;
  fe_buffer *bufs[] = {&ts->map, &ts->pen, &ts->wts, &ts->didx};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]->ptr) ts->be->ops->release(ts->be->impl, bufs[i]);
  if (ts->mod) ts->be->ops->module_free(ts->be->impl, ts->mod);
  fe_precond_free(ts->P0);
  fe_operator_free(ts->A1);
  fe_space_free(ts->V1);
  fe_vector_free(ts->Rv);
  fe_vector_free(ts->Zv);
  fe_vector_free(ts->zc);
  free(ts->con);
  free(ts->corners);
  free(ts->share);
  free(ts->phi);
  free(ts->rh);
  free(ts->zh);
  free(ts->R);
  free(ts);
  P->impl = NULL;
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
  /* one module: the fine scale's kernel and the constrained rows' */
  double S[TS_PENCILS * TS_MAX_LINE * TS_MAX_LINE], lam[TS_PENCILS * TS_MAX_LINE];
  int ne2 = ts->ne * ts->ne;
  for (int p = 0; p < TS_PENCILS; p++)
    FE_CHECK(fe_schwarz_line(V->elem.order, p / 3, p % 3, ts->consistent, S + p * ne2,
                             lam + p * ts->ne));
  char *src;
  FE_CHECK(fine_source(ts, V->elem.order, S, lam, &src));
  double seconds;
  int cached, rc = ts->be->ops->compile(ts->be->impl, src, &ts->mod, &seconds, &cached);
  free(src);
  FE_CHECK(rc);
  FE_CHECK(ts->be->ops->kernel(ts->be->impl, ts->mod, "fe_schwarz_rows", &ts->rows));
  int ndir = P->A->ndir;
  FE_CHECK(fe_upload_ints(ts->be, P->A->dir_nodes, (size_t)ndir, &ts->didx));
  /* counted per application: z zeroed, the constrained rows copied, then each scale's own */
  double wb = (double)fe_precision_size(ts->prec);
  P->flops = 0;
  P->bytes = V->ndofs * wb + ndir * (4 + 2 * wb);
  P->launches = 1 + (ndir > 0);
  if (ts->fine) FE_CHECK(fine_setup(P));
  if (ts->coarse) FE_CHECK(coarse_setup(P));
  size_t k = (size_t)snprintf(P->describe, sizeof P->describe, "two-scale:");
  if (ts->fine)
    k += (size_t)snprintf(P->describe + k, sizeof P->describe - k, " Schwarz %d^3 by fast "
                          "diagonalization%s", ts->ne, ts->coarse ? " +" : "");
  if (ts->coarse && k < sizeof P->describe)
    snprintf(P->describe + k, sizeof P->describe - k, " Q1 coarse (%d vertices) by %.80s",
             V->mesh->nvertices, ts->P0->describe);
  return 0;
}

/* z = P^f r + P^c r on the free rows, z = r on the constrained ones. */
static int twoscale_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  twoscale *ts = P->impl;
  const fe_space *V = P->A->V;
  if (ts->coarse) FE_CHECK(fe_vector_get(r, ts->rh)); /* before the launch: no wait on it */
  FE_CHECK(fe_vector_fill(z, 0));
  if (ts->fine) FE_CHECK(fine_apply(ts, V->mesh->ncells, r, z));
  if (ts->coarse) { /* on the host, while the device works (when its launches return at once) */
    FE_CHECK(coarse_apply(ts, V));
    FE_CHECK(fe_vector_set(ts->zc, ts->zh));
    FE_CHECK(fe_vector_axpby(z, 1, ts->zc, 1));
  }
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
