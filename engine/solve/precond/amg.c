/* amg: algebraic multigrid (hypre's BoomerAMG) on the assembled Jacobian, on the host.
 *
 * Algebraic multigrid builds its coarse levels from the matrix alone. On level l the
 * unknowns are split into coarse (C) and fine (F) points by the strong couplings
 * -a_ij >= theta max_k(-a_ik); an interpolation P_l from the C points to all points follows
 * from those couplings, and the next operator is the Galerkin product A_{l+1} = P_l^T A_l P_l.
 * One V-cycle (z = M^-1 r, starting from z = 0) on level l:
 *   pre-smooth   z_l <- z_l + S_l (r_l - A_l z_l)        (l1 Gauss-Seidel, forward)
 *   restrict     r_{l+1} = P_l^T (r_l - A_l z_l)
 *   coarse       z_{l+1} = V-cycle on level l+1 (the coarsest: a direct solve)
 *   correct      z_l <- z_l + P_l z_{l+1}
 *   post-smooth  z_l <- z_l + S_l^T (r_l - A_l z_l)      (l1 Gauss-Seidel, backward)
 * The backward sweep up is the transpose of the forward one down, so the cycle is a
 * symmetric positive definite operator: a valid preconditioner for CG.
 *
 * Settings for Poisson-like problems in 3D (hypre's recommendations): HMIS coarsening,
 * extended+i interpolation truncated to 4 entries a row, theta = 0.5 in 3D (0.25 in 2D),
 * Gaussian elimination on the coarsest level, the restriction kept as a matrix (R = P^T); systems (elasticity) by the unknown approach
 * (one function per component; felab interleaves components, as hypre expects).
 *
 * The matrix is assembled on the solve's backend in double (fe_operator_assemble: constrained
 * rows are the identity's, so M x equals the matrix-free action; on the cpu where the
 * backend cannot compile the element matrices) and handed to hypre in
 * double whatever the solve's precision; each application copies r to the host and z back.
 * hypre's IJ interface wants MPI: the first setup starts MPI as a singleton (one process,
 * no mpirun) and felab finalizes it at exit. */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/matrix/matrix.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"
#include "engine/solve/precond/amg-cycle.h"
#include "engine/solve/precond/units.h"

#if FE_HAVE_HYPRE
#include <dlfcn.h>
#include <libgen.h>
#include <mpi.h>
#include <omp.h>
#include <unistd.h>

#include <HYPRE.h>
#include <HYPRE_parcsr_ls.h>
#include <_hypre_parcsr_ls.h> /* the hierarchy (levels, nonzeros) and the vectors' data */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

_Static_assert(sizeof(HYPRE_BigInt) == sizeof(int) && sizeof(HYPRE_Int) == sizeof(int),
               "felab passes its int CSR arrays to hypre: hypre must use 32-bit indices");
_Static_assert(sizeof(HYPRE_Complex) == sizeof(double),
               "felab passes doubles to hypre: hypre must be built in double precision");

typedef struct amg {
  HYPRE_IJMatrix ij;       /* a split space's Jacobian, assembled over the ranks; NULL
                            * otherwise (A made in place, on MPI_COMM_SELF) */
  HYPRE_IJVector ijb, ijx; /* the right-hand side r and the result z */
  HYPRE_ParCSRMatrix A;    /* the Jacobian: ij's, or made in place (matrix_make) */
  HYPRE_ParVector b, x;
  HYPRE_Solver solver;
  double setup_s;          /* BoomerAMGSetup's own seconds */
  double *bdata, *xdata;   /* b's and x's entries, in hypre's memory */
  int n;
  int assembled_on_cpu;    /* the backend could not compile the element matrices */
  amg_cycle *cycle;        /* cycle_on = "device": the hierarchy on the backend, or NULL */
  amg_first *first;        /* its finest level, made beside hypre's setup (then taken), or NULL */
  fe_backend *be;          /* the backend of the action (the cycle's) */
  /* a space split over mpirun's ranks (engine/parallel/dist.h): hypre's rows are the owned
   * dofs, numbered rank after rank (this rank's from lo, nown of them) */
  const fe_dist *dist;
  int lo, nown;
  int *gid;                /* local dof -> hypre's row */
  int *own;                /* the owned local dofs, in order */
  double *host;            /* a local vector's entries (apply) */
  fe_vector *zh;           /* z's consistent copy on the cpu, summed over the ranks */
} amg;

/* hypre's message for err (its error flags), as a felab error naming the call. */
static int hypre_failed(HYPRE_Int err, const char *call)
{
  char what[256] = "";
  HYPRE_DescribeError(err, what);
  HYPRE_ClearAllErrors();
  FE_ERROR(FE_ERR_BACKEND, "amg: hypre's %s failed (error %d: %s)", call, (int)err, what);
}
#define HYPRE_CHECK(call)                                     \
  do {                                                        \
    HYPRE_Int hypre_err_ = (call);                            \
    if (hypre_err_) return hypre_failed(hypre_err_, #call);   \
  } while (0)

static void mpi_finalize(void)
{
  HYPRE_Finalize();
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

/* Where OpenMPI looks for its plugins and help texts: where it was installed, unless
 * libmpi was carried to another machine with them beside it (scripts/gpu-hypre.sh:
 * lib/openmpi3/ and share/openmpi/): then there. */
static void mpi_carried_paths(void)
{
  Dl_info info;
  if (!dladdr((void *)MPI_Init, &info) || !info.dli_fname) return;
  char lib[4096], path[4200];
  snprintf(lib, sizeof lib, "%s", info.dli_fname);
  char *dir = dirname(lib);
  snprintf(path, sizeof path, "%s/openmpi3", dir);
  if (access(path, R_OK)) return;
  setenv("OMPI_MCA_mca_base_component_path", path, 0);
  snprintf(path, sizeof path, "%s/../share/openmpi", dir);
  if (!access(path, R_OK)) setenv("OPAL_PKGDATADIR", path, 0);
}

/* MPI and hypre, once per process. OpenMPI's defaults are for jobs started by mpirun; for
 * one process started alone (a singleton) these settings, unless the user set them, keep it
 * quiet and quick: ess_singleton_isolated (no orted daemon forked: it costs 0.2 s and is
 * absent where libmpi is carried), btl self and pml ob1 (one process talks only to itself:
 * no network, shared-memory or UCX transports probed, so no warnings about them). */
static int mpi_start(void)
{
  static int started;
  if (started) return 0;
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    setenv("OMPI_MCA_btl", "self", 0);
    setenv("OMPI_MCA_pml", "ob1", 0);
    mpi_carried_paths();
#ifdef __SANITIZE_ADDRESS__
    /* OpenMPI's init keeps state that its finalize drops without freeing, some of it in
     * plugins unloaded by then, whose stacks no suppression (tests/lsan.supp) can name */
    __lsan_disable();
#endif
    int rc = MPI_Init(NULL, NULL);
#ifdef __SANITIZE_ADDRESS__
    __lsan_enable();
#endif
    FE_ASSERT(rc == MPI_SUCCESS, FE_ERR_UNAVAILABLE,
              "amg: MPI_Init failed (hypre needs MPI, started here as one process)");
    atexit(mpi_finalize);
  }
  HYPRE_CHECK(HYPRE_Init());
  started = 1;
  return 0;
}

/* A hypre vector of rows [lo, lo + n) of comm (zeroed) and its data: hypre's calls alone,
 * no felab error set (it may run on the setup's thread). */
static HYPRE_Int vector_make(MPI_Comm comm, int lo, int n, HYPRE_IJVector *ij, HYPRE_ParVector *v,
                             double **data)
{
  HYPRE_Int err = HYPRE_IJVectorCreate(comm, lo, lo + n - 1, ij);
  if (!err) err = HYPRE_IJVectorSetObjectType(*ij, HYPRE_PARCSR);
  if (!err) err = HYPRE_IJVectorInitialize(*ij);
  if (!err) err = HYPRE_IJVectorAssemble(*ij);
  if (!err) err = HYPRE_IJVectorGetObject(*ij, (void **)v);
  if (err) return err;
  *data = hypre_VectorData(hypre_ParVectorLocalVector((hypre_ParVector *)*v));
  memset(*data, 0, sizeof(double) * (size_t)n);
  return 0;
}

/* M's vectors b and x, rows [lo, lo + n) of comm, as vector_make's. */
static HYPRE_Int vectors_make(amg *M, MPI_Comm comm, int lo, int n)
{
  HYPRE_Int err = vector_make(comm, lo, n, &M->ijb, &M->b, &M->bdata);
  return err ? err : vector_make(comm, lo, n, &M->ijx, &M->x, &M->xdata);
}

/* The ParCSR matrix of felab's CSR arrays (one process owns every row), made in place rather
 * than through hypre's IJ interface (a tenth of hypre's setup on two-scale's coarse problem):
 * the diagonal block's rows with their diagonal entry first and the others in their order, as
 * the IJ assembly leaves them (the same arrays, so the same hierarchy), no off-diagonal
 * block; then the vectors b and x. hypre's calls alone, no felab error set (it may run on the
 * setup's thread); -1 where the host's memory is short. */
static HYPRE_Int matrix_make(amg *M, const int *rowptr, const int *cols, const double *vals)
{
  const int n = M->n, nnz = rowptr[n];
  HYPRE_BigInt starts[2] = {0, n};
  hypre_ParCSRMatrix *A = hypre_ParCSRMatrixCreate(MPI_COMM_SELF, n, n, starts, starts, 0, nnz, 0);
  if (!A) return -1;
  M->A = (HYPRE_ParCSRMatrix)A; /* amg_destroy frees it: no IJ matrix owns it */
  HYPRE_Int err = hypre_ParCSRMatrixInitialize(A);
  if (err) return err;
  hypre_CSRMatrix *d = hypre_ParCSRMatrixDiag(A);
  int *I = hypre_CSRMatrixI(d), *J = hypre_CSRMatrixJ(d);
  double *D = hypre_CSRMatrixData(d);
  for (int i = 0; i < n; i++) {
    int k = rowptr[i], e = rowptr[i + 1], q = k + 1, diag = -1;
    I[i] = k;
    for (int t = k; t < e && diag < 0; t++) diag = cols[t] == i ? t : -1;
    if (diag < 0) { /* no diagonal entry: the row as it is */
      memcpy(J + k, cols + k, sizeof(int) * (size_t)(e - k));
      memcpy(D + k, vals + k, sizeof(double) * (size_t)(e - k));
      continue;
    }
    J[k] = i, D[k] = vals[diag];
    for (int t = k; t < e; t++)
      if (t != diag) J[q] = cols[t], D[q++] = vals[t];
  }
  I[n] = nnz;
  err = hypre_CSRMatrixSetRownnz(d);
  return err ? err : vectors_make(M, MPI_COMM_SELF, 0, n);
}

/* A space split over the ranks: hypre's rows the owned dofs, rank after rank; each local
 * dof's row (a shared one's from its owner: the owner's number, the others' zero, summed over
 * the ranks); the rank's assembled rows added into hypre's (a shared row's share from every
 * rank that holds it; a constrained row, the identity, from its owner alone). */
static int split_matrix(fe_precond *P, amg *M, const int *rowptr, const int *cols,
                        const double *vals)
{
  const fe_dist *d = M->dist;
  const int n = M->n, ncomp = fe_operator_space(P->A)->ncomp;
  fe_backend *cpu;
  FE_CHECK(fe_backend_get("cpu", &cpu));
  fe_action_opts o;
  fe_action_opts_default(&o);
  o.backend = "cpu";
  o.precision = FE_DOUBLE;
  fe_vector *g = NULL, *f0 = NULL, *f1 = NULL;
  double *ids = malloc(sizeof(double) * ((size_t)n + 1)), *fr = malloc(sizeof(double) * ((size_t)n + 1));
  unsigned char *mine = malloc((size_t)n + 1);
  M->gid = malloc(sizeof(int) * ((size_t)n + 1));
  M->own = malloc(sizeof(int) * ((size_t)n + 1));
  M->host = malloc(sizeof(double) * ((size_t)n + 1));
  int rc = ids && fr && mine && M->gid && M->own && M->host ? 0 : FE_ERR_MEM;
  for (int i = 0; !rc && i < n; i++) mine[i] = 1;
  for (int i = 0; !rc && i < d->nnotowned; i++)
    for (int c = 0; c < ncomp; c++) mine[(size_t)d->notowned[i] * ncomp + c] = 0;
  M->nown = 0;
  for (int i = 0; !rc && i < n; i++)
    if (mine[i]) M->own[M->nown++] = i;
  double *counts = rc ? NULL : calloc((size_t)d->size, sizeof(double));
  if (!rc && !counts) rc = FE_ERR_MEM;
  if (!rc) {
    counts[d->rank] = M->nown;
    rc = fe_comm_sum(counts, d->size);
  }
  M->lo = 0;
  for (int q = 0; !rc && q < d->rank; q++) M->lo += (int)counts[q];
  free(counts);
  for (int i = 0, k = 0; !rc && i < n; i++) ids[i] = mine[i] ? M->lo + k++ + 1 : 0;
  if (!rc) rc = fe_vector_create(cpu, FE_DOUBLE, n, &g);
  if (!rc) g->dist = d, rc = fe_vector_set(g, ids);
  if (!rc) rc = fe_dist_sum(d, g, NULL, NULL);
  if (!rc) rc = fe_vector_get(g, ids);
  for (int i = 0; !rc && i < n; i++) M->gid[i] = (int)ids[i] - 1;
  /* the constrained rows: initial(interior 1) - initial(interior 0) is 0 there */
  if (!rc) rc = fe_operator_initial(P->A, &o, 0.0, &f0);
  if (!rc) rc = fe_operator_initial(P->A, &o, 1.0, &f1);
  if (!rc) rc = fe_vector_axpby(f1, -1.0, f0, 1.0);
  if (!rc) rc = fe_vector_get(f1, fr);
  HYPRE_Int err = rc ? 0 : HYPRE_IJMatrixCreate(MPI_COMM_WORLD, M->lo, M->lo + M->nown - 1,
                                                 M->lo, M->lo + M->nown - 1, &M->ij);
  if (!rc && !err) err = HYPRE_IJMatrixSetObjectType(M->ij, HYPRE_PARCSR);
  if (!rc && !err) err = HYPRE_IJMatrixInitialize(M->ij);
  int *gc = rc ? NULL : malloc(sizeof(int) * ((size_t)(rowptr[n] > 0 ? rowptr[n] : 1)));
  if (!rc && !gc) rc = FE_ERR_MEM;
  for (int i = 0; !rc && !err && i < n; i++) {
    if (!mine[i] && fr[i] == 0) continue; /* a constrained row: its owner's alone */
    int nc = rowptr[i + 1] - rowptr[i], row = M->gid[i];
    for (int k = rowptr[i]; k < rowptr[i + 1]; k++) gc[k] = M->gid[cols[k]];
    err = HYPRE_IJMatrixAddToValues(M->ij, 1, &nc, &row, gc + rowptr[i], vals + rowptr[i]);
  }
  if (!rc && !err) err = HYPRE_IJMatrixAssemble(M->ij);
  if (!rc && !err) err = HYPRE_IJMatrixGetObject(M->ij, (void **)&M->A);
  free(gc), free(ids), free(fr), free(mine);
  fe_vector_free(g), fe_vector_free(f0), fe_vector_free(f1);
  if (!rc) rc = fe_vector_create(cpu, FE_DOUBLE, n, &M->zh);
  if (!rc) M->zh->dist = d;
  if (rc == FE_ERR_MEM && !fe_error_code())
    FE_ERROR(FE_ERR_MEM, "amg: out of host memory for a split space's rows (%d)", n);
  FE_CHECK(rc);
  return err ? hypre_failed(err, "IJ matrix assembly over the ranks") : 0;
}

/* A sparse pass over a rows x cols matrix of nnz entries (y <- y + M x, a residual or a
 * Gauss-Seidel sweep): 2 flops and 12 bytes (value, column) a nonzero, a row pointer, x read,
 * y read and written. */
static void count_pass(double nnz, double rows, double cols, double *flops, double *bytes)
{
  *flops += 2 * nnz;
  *bytes += 12 * nnz + 4 * rows + 8 * cols + 16 * rows;
}

static double nonzeros(hypre_ParCSRMatrix *A)
{
  return (double)hypre_CSRMatrixNumNonzeros(hypre_ParCSRMatrixDiag(A)) +
         (double)hypre_CSRMatrixNumNonzeros(hypre_ParCSRMatrixOffd(A));
}

/* The counts of one application from the hierarchy, and the describe line. Per V-cycle on
 * every level but the coarsest: three passes of A_l (pre-smooth, residual, post-smooth) and
 * two of P_l (restrict, correct); the coarsest: a dense triangular solve (2 n_c^2 flops). */
static void count(fe_precond *P, amg *M, int cycles, int on_host)
{
  hypre_ParAMGData *d = (hypre_ParAMGData *)M->solver;
  int L = hypre_ParAMGDataNumLevels(d);
  hypre_ParCSRMatrix **Al = hypre_ParAMGDataAArray(d), **Pl = hypre_ParAMGDataPArray(d);
  double flops = 0, bytes = 0, nnz = 0, nnz0 = nonzeros(Al[0]);
  for (int l = 0; l < L; l++) {
    double a = nonzeros(Al[l]), n = (double)hypre_ParCSRMatrixGlobalNumRows(Al[l]);
    nnz += a;
    if (l == L - 1) {
      flops += 2 * n * n;
      bytes += 8 * n * n + 16 * n;
      continue;
    }
    for (int k = 0; k < 3; k++) count_pass(a, n, n, &flops, &bytes);
    double p = nonzeros(Pl[l]), nc = (double)hypre_ParCSRMatrixGlobalNumCols(Pl[l]);
    count_pass(p, nc, n, &flops, &bytes); /* r_{l+1} = P^T r_l */
    count_pass(p, n, nc, &flops, &bytes); /* z_l += P z_{l+1} */
  }
  fe_precision prec = P->act.precision >= 0 ? (fe_precision)P->act.precision
                                            : fe_precision_default();
  double w = (double)fe_precision_size(prec), n = M->n;
  P->flops = cycles * flops;
  /* r to hypre's b and its x to z: the solve's precision on one side, doubles on the other;
   * on a device each is also a copy over the bus */
  P->bytes = cycles * bytes + 2 * n * (w + 8);
  P->host_bytes = on_host ? 0 : 2 * n * w;
  P->launches = 0; /* it runs on the host: no kernel of the backend */
  snprintf(P->describe, sizeof P->describe,
           "BoomerAMG: %d levels, operator complexity %.2f, HMIS, %s, l1-GS, %d V-cycle%s%s",
           L, nnz / nnz0, P->o.interp < 0 || P->o.interp == 6 ? "ext+i" : P->o.interp == 17 ?
           "ext+i (matrix-matrix)" : "interpolation type set", cycles, cycles == 1 ? "" : "s",
           M->assembled_on_cpu ? " (matrix assembled on the cpu)" : "");
}

static void amg_destroy(fe_precond *P)
{
  amg *M = P->impl;
  if (!M) return;
  amg_cycle_free(M->cycle);
  amg_first_free(M->first);
  free(M->gid), free(M->own), free(M->host);
  fe_vector_free(M->zh);
  if (M->solver) HYPRE_BoomerAMGDestroy(M->solver);
  if (M->ijb) HYPRE_IJVectorDestroy(M->ijb);
  if (M->ijx) HYPRE_IJVectorDestroy(M->ijx);
  if (M->ij) HYPRE_IJMatrixDestroy(M->ij);
  else if (M->A) hypre_ParCSRMatrixDestroy((hypre_ParCSRMatrix *)M->A); /* made in place */
  free(M);
  P->impl = NULL;
}

/* BoomerAMG's setup on another thread, while P->o.meanwhile runs on this one: the IJ matrix
 * and vectors first where the CSR arrays are given (an unsplit space's), then the hierarchy.
 * The thread sets no felab error: its hypre error (or -1, host memory short) and the call
 * that failed are read after the join. */
typedef struct setup_job {
  amg *M;
  const int *rowptr, *cols; /* the CSR arrays to build M's matrix from, or NULL: built */
  const double *vals;
  HYPRE_Int err;
  const char *call;         /* the call err came from */
  double seconds;           /* the matrix's and the setup's own time */
} setup_job;

static void *setup_thread(void *arg)
{
  setup_job *j = arg;
  double t0 = fe_clock();
  j->call = "the ParCSR matrix";
  if (j->rowptr) j->err = matrix_make(j->M, j->rowptr, j->cols, j->vals);
  if (!j->err) {
    j->call = "HYPRE_BoomerAMGSetup";
    j->err = HYPRE_BoomerAMGSetup(j->M->solver, j->M->A, j->M->b, j->M->x);
  }
  j->seconds = fe_clock() - t0;
  return NULL;
}

/* The device cycle's precision (the action's) and whether its matrices' values are single. */
static fe_precision cycle_precision(const fe_precond *P)
{
  return P->act.precision >= 0 ? (fe_precision)P->act.precision : fe_precision_default();
}

static int cycle_single(const fe_precond *P, fe_precision prec)
{
  return prec == FE_DOUBLE && P->o.cycle_values == FE_VALUES_SINGLE;
}

/* P->o.meanwhile on this thread while hypre's runs on its own: from four OpenMP threads on,
 * where they would take every core, one fewer (hypre's thread gets a core of its own; one of
 * four or more is little to lose once it is done). */
static int meanwhile_beside(fe_precond *P)
{
  int nt = omp_get_max_threads(), fewer = nt >= 4 && nt >= omp_get_num_procs();
  if (fewer) omp_set_num_threads(nt - 1);
  int rc = P->o.meanwhile(P->o.meanwhile_ctx);
  if (fewer) omp_set_num_threads(nt);
  return rc;
}

/* BoomerAMG's setup on M's matrix (from the CSR arrays where given), serial (hypre is built
 * without threads), overlapped with P->o.meanwhile where there is one and the space is not
 * split (the thread calls MPI on MPI_COMM_SELF only while this one calls none): twoscale's
 * maps, Q3 2.35M dofs on the H200's host. M->setup_s: the matrix's and the setup's own time. */
static int setup_overlapped(fe_precond *P, amg *M, const int *rowptr, const int *cols,
                            const double *vals)
{
  setup_job j = {.M = M, .rowptr = rowptr, .cols = cols, .vals = vals};
  pthread_t th;
  /* the device's cycle: its finest level made from felab's matrix (rows sorted by column, as
   * the cycle sorts hypre's) while hypre sets up */
  int first = P->o.cycle_on == FE_CYCLE_DEVICE && rowptr && !M->dist;
  int rc = 0, threaded = (P->o.meanwhile || first) && !M->dist &&
                         !pthread_create(&th, NULL, setup_thread, &j);
  if (threaded) {
    if (P->o.meanwhile) rc = meanwhile_beside(P);
    if (!rc && first) {
      fe_precision prec = cycle_precision(P);
      double t0 = fe_clock();
      rc = amg_cycle_first(M->be, prec, cycle_single(P, prec), M->n, rowptr, cols, vals,
                           &M->first);
      fe_setup_part_add(&P->parts, "first_level", fe_clock() - t0, 0); /* beside hypre */
    }
    pthread_join(th, NULL);
  } else {
    if (P->o.meanwhile) rc = P->o.meanwhile(P->o.meanwhile_ctx);
    if (!rc) setup_thread(&j);
  }
  P->o.meanwhile = NULL; /* run once */
  M->setup_s = j.seconds;
  FE_CHECK(rc);
  if (j.err == -1)
    FE_ERROR(FE_ERR_MEM, "amg: out of host memory for hypre's matrix (%d rows)", M->n);
  if (j.err) return hypre_failed(j.err, j.call);
  return 0;
}

/* BoomerAMG's settings (the file's top) and its setup on M's matrix (setup_overlapped). */
static int solver_setup(fe_precond *P, amg *M, int cycles, const int *rowptr, const int *cols,
                        const double *vals)
{
  const fe_space *V = fe_operator_space(P->A);
  HYPRE_CHECK(HYPRE_BoomerAMGCreate(&M->solver));
  HYPRE_Solver s = M->solver;
  HYPRE_CHECK(HYPRE_BoomerAMGSetPrintLevel(s, P->o.verbose ? 1 : 0)); /* 1: setup statistics */
  HYPRE_CHECK(HYPRE_BoomerAMGSetCoarsenType(s, 10));                  /* HMIS */
  HYPRE_CHECK(HYPRE_BoomerAMGSetInterpType(s, P->o.interp >= 0 ? P->o.interp : 6)); /* ext+i */
  HYPRE_CHECK(HYPRE_BoomerAMGSetPMaxElmts(s, 4));
  /* R = P^T kept as a matrix of its own: the Galerkin products then multiply by it rather
   * than by P's transpose on the fly (two-scale's Q3 30^3 coarse problem on a 2-core cpu:
   * hypre's setup median 0.10 -> 0.094 s, the same iterations; docs/benchmarks.md section 7) */
  HYPRE_CHECK(HYPRE_BoomerAMGSetKeepTranspose(s, 1));
  double theta = P->o.theta > 0 ? P->o.theta : V->mesh->dim == 3 ? 0.5 : 0.25;
  HYPRE_CHECK(HYPRE_BoomerAMGSetStrongThreshold(s, theta));
  /* aggressive coarsening of the first level (multipass interpolation there): P1 tets on a
   * distorted box (205k dofs, this machine) operator complexity 3.13 -> 1.42, hypre's setup
   * 2.8x faster, CG's iterations 10 -> 14, the solve faster with either cycle */
  int agg = P->o.aggressive >= 0 ? P->o.aggressive : V->mesh->dim == 3 && V->ncomp == 1;
  HYPRE_CHECK(HYPRE_BoomerAMGSetAggNumLevels(s, agg));
  HYPRE_CHECK(HYPRE_BoomerAMGSetRelaxOrder(s, 0));                    /* lexicographic */
  HYPRE_CHECK(HYPRE_BoomerAMGSetCycleRelaxType(s, 13, 1));            /* l1-GS forward down */
  HYPRE_CHECK(HYPRE_BoomerAMGSetCycleRelaxType(s, 14, 2));            /* l1-GS backward up */
  HYPRE_CHECK(HYPRE_BoomerAMGSetCycleRelaxType(s, 9, 3));             /* coarsest: elimination */
  HYPRE_CHECK(HYPRE_BoomerAMGSetCycleNumSweeps(s, 1, 1));
  HYPRE_CHECK(HYPRE_BoomerAMGSetCycleNumSweeps(s, 1, 2));
  if (V->ncomp > 1) HYPRE_CHECK(HYPRE_BoomerAMGSetNumFunctions(s, V->ncomp));
  HYPRE_CHECK(HYPRE_BoomerAMGSetTol(s, 0.0)); /* a fixed number of cycles: no residual norms */
  HYPRE_CHECK(HYPRE_BoomerAMGSetMaxIter(s, cycles));
  FE_CHECK(setup_overlapped(P, M, rowptr, cols, vals));
  if (P->o.verbose) HYPRE_CHECK(HYPRE_BoomerAMGSetPrintLevel(s, 0)); /* quiet applications */
  return 0;
}

/* The Jacobian at P->at in double on P's backend (be), to the host, into hypre. */
static int amg_build(fe_precond *P, amg *M, fe_backend *be, int cycles)
{
  fe_action_opts o = P->act;
  o.precision = FE_DOUBLE;
  fe_vector *at = NULL;
  double t0 = fe_clock();
  if (P->at) FE_CHECK(fe_vector_convert(P->at, be, FE_DOUBLE, &at));
  fe_csr *K = NULL;
  fe_report rep;
  int rc = fe_operator_assemble(P->A, at, &o, NULL, &K, &rep);
  if (rc == FE_ERR_COMPILE && !be->ops->host) { /* not already the host's own memory (cpu) */
    /* the element matrices do not compile there (NVIDIA's OpenCL: dense tables past its
     * 64 KB of constant memory at Q3): hypre wants the matrix on the host anyway */
    fe_backend *cpu;
    fe_vector_free(at);
    at = NULL;
    o.backend = "cpu";
    fe_error_clear();
    rc = fe_backend_get("cpu", &cpu);
    if (!rc && P->at) rc = fe_vector_convert(P->at, cpu, FE_DOUBLE, &at);
    if (!rc) rc = fe_operator_assemble(P->A, at, &o, NULL, &K, &rep);
    if (!rc) M->assembled_on_cpu = 1;
  }
  fe_vector_free(at);
  double t1 = fe_clock();
  fe_setup_part_add(&P->parts, "assembly", t1 - t0, 0);
  int *rowptr = NULL, *cols = NULL;
  double *vals = NULL;
  if (!rc) rc = fe_csr_get(K, &rowptr, &cols, &vals);
  if (!rc) M->n = K->n;
  fe_csr_free(K);
  double t2 = fe_clock();
  fe_setup_part_add(&P->parts, "transfer", t2 - t1, 0);
  M->dist = fe_operator_space(P->A)->dist;
  M->be = be;
  if (!rc && M->dist) { /* split: the matrix over the ranks here, the setup on its own */
    rc = split_matrix(P, M, rowptr, cols, vals);
    HYPRE_Int err = rc ? 0 : vectors_make(M, MPI_COMM_WORLD, M->lo, M->nown);
    if (err) rc = hypre_failed(err, "IJ vectors over the ranks");
    free(rowptr), free(cols), free(vals);
    rowptr = cols = NULL, vals = NULL;
  }
  double t3 = fe_clock();
  /* an unsplit space's matrix made on hypre's thread, from the arrays */
  if (!rc) rc = solver_setup(P, M, cycles, rowptr, cols, vals);
  free(rowptr);
  free(cols);
  free(vals);
  /* its matrix and hierarchy, their own time (the setup may overlap P->o.meanwhile's) */
  fe_setup_part_add(&P->parts, "hypre", t3 - t2 + M->setup_s, 0);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

/* cycle_on = "device": hypre's hierarchy (each level's A and P, its own arrays on one
 * process) to the backend (amg-cycle.c), and the counts and the describe line of its cycle. */
static int device_cycle(fe_precond *P, amg *M, fe_backend *be, int cycles)
{
  hypre_ParAMGData *d = (hypre_ParAMGData *)M->solver;
  int L = hypre_ParAMGDataNumLevels(d);
  hypre_ParCSRMatrix **Al = hypre_ParAMGDataAArray(d), **Pl = hypre_ParAMGDataPArray(d);
  amg_host_level lv[40];
  FE_ASSERT(L <= 40, FE_ERR_ARG, "amg: %d levels, more than the cycle takes (40)", L);
  for (int l = 0; l < L; l++) {
    hypre_CSRMatrix *a = hypre_ParCSRMatrixDiag(Al[l]);
    FE_ASSERT(hypre_CSRMatrixNumNonzeros(hypre_ParCSRMatrixOffd(Al[l])) == 0, FE_ERR_INTERNAL,
              "amg: level %d's matrix couples other processes' rows", l);
    lv[l] = (amg_host_level){.n = hypre_CSRMatrixNumRows(a), .arp = hypre_CSRMatrixI(a),
                             .acol = hypre_CSRMatrixJ(a), .aval = hypre_CSRMatrixData(a)};
    if (l == L - 1) continue;
    hypre_CSRMatrix *p = hypre_ParCSRMatrixDiag(Pl[l]);
    lv[l].nc = hypre_CSRMatrixNumCols(p);
    lv[l].prp = hypre_CSRMatrixI(p);
    lv[l].pcol = hypre_CSRMatrixJ(p);
    lv[l].pval = hypre_CSRMatrixData(p);
  }
  fe_precision prec = cycle_precision(P);
  const int single = cycle_single(P, prec);
  amg_first *F = M->first;
  M->first = NULL;
  FE_CHECK(amg_cycle_make(be, prec, single, lv, L, F, &M->cycle));
  P->nlevels = L;
  double flops, bytes, rflops, rbytes;
  int launches, dense;
  amg_cycle_counts(M->cycle, &flops, &bytes, &launches, &dense, &rflops, &rbytes);
  P->flops = cycles * flops + (cycles - 1) * rflops;
  P->bytes = cycles * bytes + (cycles - 1) * rbytes;
  P->host_bytes = 0;
  P->launches = cycles * launches + (cycles - 1) * 2;
  double nnz = 0;
  for (int l = 0; l < L; l++) nnz += nonzeros(Al[l]);
  char times[24] = "";
  if (cycles > 1) snprintf(times, sizeof times, " x %d", cycles);
  snprintf(P->describe, sizeof P->describe, "BoomerAMG setup (%d levels, complexity %.2f), "
           "V-cycle%s on %s (%s%s, Jacobi 2+2, coarsest %s)", L, nnz / nonzeros(Al[0]), times,
           be->name, amg_cycle_format(M->cycle), single ? ", values single" : "",
           dense ? "inverted" : "smoothed");
  return 0;
}

static int amg_setup(fe_precond *P)
{
  int cycles = P->o.cycles > 0 ? P->o.cycles : 1;
  fe_backend *be;
  FE_CHECK(fe_backend_get(P->act.backend, &be));
  FE_CHECK(mpi_start());
  amg *M;
  FE_CALLOC(M, 1, "amg");
  P->impl = M;
  FE_CHECK(amg_build(P, M, be, cycles));
  count(P, M, cycles, be->ops->host != NULL);
  if (P->o.cycle_on == FE_CYCLE_DEVICE && !M->dist) { /* split: hypre's parallel cycle */
    double t0 = fe_clock();
    FE_CHECK(device_cycle(P, M, be, cycles));
    double t1 = fe_clock(), sec[40];
    fe_setup_part_add(&P->parts, "to_device", t1 - t0, 0);
    FE_CHECK(amg_cycle_time(M->cycle, sec));
    fe_setup_part_add(&P->parts, "timed_cycle", fe_clock() - t1, 0);
    for (int l = 0; l < P->nlevels; l++) {
      P->level[l].seconds = sec[l];
      amg_cycle_level(M->cycle, l, &P->level[l].rows, &P->level[l].nnz);
      P->level[l].merged = l > amg_cycle_tail(M->cycle);
    }
  }
  return 0;
}

/* z = V-cycle(s) on r from z = 0. */
static int amg_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  amg *M = P->impl;
  FE_ASSERT(r->n == M->n, FE_ERR_ARG, "amg: r has %d entries, the preconditioner's matrix %d "
            "rows", r->n, M->n);
  if (M->cycle) return amg_cycle_apply(M->cycle, P->o.cycles > 0 ? P->o.cycles : 1, r, z);
  if (M->dist) { /* the owned entries to hypre, its answer to every copy (the others' 0, summed) */
    FE_CHECK(fe_vector_get(r, M->host));
    for (int k = 0; k < M->nown; k++) M->bdata[k] = M->host[M->own[k]];
    memset(M->xdata, 0, sizeof(double) * (size_t)M->nown);
    HYPRE_CHECK(HYPRE_BoomerAMGSolve(M->solver, M->A, M->b, M->x));
    memset(M->host, 0, sizeof(double) * (size_t)M->n);
    for (int k = 0; k < M->nown; k++) M->host[M->own[k]] = M->xdata[k];
    FE_CHECK(fe_vector_set(M->zh, M->host));
    FE_CHECK(fe_dist_sum(M->dist, M->zh, NULL, NULL));
    FE_CHECK(fe_vector_get(M->zh, M->host));
    return fe_vector_set(z, M->host);
  }
  FE_CHECK(fe_vector_get(r, M->bdata));
  memset(M->xdata, 0, sizeof(double) * (size_t)M->n); /* z_0 = 0 */
  HYPRE_CHECK(HYPRE_BoomerAMGSolve(M->solver, M->A, M->b, M->x));
  return fe_vector_set(z, M->xdata);
}

#else

static int amg_setup(fe_precond *P)
{
  (void)P;
  FE_ERROR(FE_ERR_UNAVAILABLE, "amg: felab was built without hypre: install libhypre-dev "
           "(Debian) and rebuild");
}

static int amg_apply(fe_precond *P, const fe_vector *r, fe_vector *z)
{
  (void)P, (void)r, (void)z;
  FE_ERROR(FE_ERR_INTERNAL, "amg: applied, but felab was built without hypre");
}

static void amg_destroy(fe_precond *P)
{
  (void)P;
}

#endif

const fe_precond_kind fe_precond_amg = {
  "amg", "algebraic multigrid: hypre BoomerAMG's hierarchy of the assembled matrix, V-cycles "
  "on the solve's backend (cycle_on = \"host\": hypre's own)",
  amg_setup, amg_apply, amg_destroy,
};
