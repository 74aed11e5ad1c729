/* felab against the Gmsh SDK on the same reference cells and meshes (issue 4): Lagrange basis
 * values and gradients node for node, quadrature rules (monomial integrals, and the Gauss
 * point sets of tensor cells), and the Jacobians of straight and curved cells of meshes that
 * Gmsh made, wrote and felab loaded.
 *
 * Gmsh conventions these tests rely on (SDK 4.8):
 * - getElementProperties gives localNodeCoord with dim numbers per node (pairs in 2D, triplets
 *   in 3D); every other call takes and returns reference points as triplets (u, v, w).
 * - "GradLagrange" has 3 components per basis function, [u, v, w], w = 0 in 2D.
 * - getIntegrationPoints' weights sum to the reference measure (1/2, 1/6, 4, 8, 1 for tri,
 *   tet, quad, hex, prism): the same convention as felab, so no scaling.
 * - getJacobians gives each 3x3 Jacobian by column: jac[3*i + d] = dx_d/du_i, the transpose
 *   of felab's row-major J[d*dim + i] = dx_d/dxi_i.
 * - Gmsh's complete Lagrange elements on tensor cells have equispaced nodes; its node order
 *   (vertices, then edges, faces, interior) differs from felab's (vertices, then the rest of
 *   the lattice in lexicographic order), so nodes are matched by reference coordinates.
 * - getElementType("Prism", p >= 3) returns a type number, but getElementProperties and the
 *   basis functions refuse it: Gmsh's complete prism Lagrange stops at order 2. */
#if FE_HAVE_GMSH
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <gmshc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/fem/element.h"
#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/fem/quadrature.h"
#include "engine/fem/space.h"

/* A reference cell with Gmsh's family name for it. */
typedef struct cell_case {
  fe_cell_type cell;
  const char *gmsh_family; /* "Triangle", ... as getElementType takes it */
  char family;             /* felab's: 'P' or 'Q' */
  int maxorder;            /* highest Lagrange order compared */
} cell_case;

static const cell_case cells[] = {{FE_CELL_TRI, "Triangle", 'P', 5},
                                  {FE_CELL_TET, "Tetrahedron", 'P', 5},
                                  {FE_CELL_QUAD, "Quadrangle", 'Q', 4},
                                  {FE_CELL_HEX, "Hexahedron", 'Q', 4},
                                  {FE_CELL_PRISM, "Prism", 'P', 4}};
#define NCELLS (int)(sizeof cells / sizeof cells[0])

/* Gmsh 4.8 builds its prism bases with new[] and frees them with delete
 * (ClosureGen::getFaceClosurePrism), which AddressSanitizer stops as an alloc-dealloc
 * mismatch: sanitized builds leave Gmsh's prism Lagrange elements alone. */
#if defined(__SANITIZE_ADDRESS__)
#define GMSH_PRISM_BASIS_USABLE 0
#else
#define GMSH_PRISM_BASIS_USABLE 1
#endif

/* Start a quiet Gmsh session (errors come back in ierr, nothing on the terminal). */
static void gmsh_begin(void)
{
  int ierr = 0;
  gmshInitialize(0, NULL, 0, &ierr);
  cr_assert_eq(ierr, 0, "the Gmsh SDK failed to start");
  gmshOptionSetNumber("General.Terminal", 0, &ierr);
  cr_assert_eq(ierr, 0);
}

static void gmsh_end(void)
{
  int ierr = 0;
  gmshFinalize(&ierr);
}

/* Interior reference points of a cell as triplets (Gmsh's layout): the points of felab's
 * degree-4 rule, none on the boundary. Returns their number; *pts is malloc'd. */
static int interior_points(fe_cell_type cell, double **pts)
{
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create(cell, 4, &q), 0, "%s", fe_error_message());
  double *p = calloc(3 * (size_t)q.npoints, sizeof *p);
  for (int k = 0; k < q.npoints; k++)
    for (int d = 0; d < q.dim; d++) p[3 * k + d] = q.points[k * q.dim + d];
  int n = q.npoints;
  fe_quadrature_free(&q);
  *pts = p;
  return n;
}

/* ----- basis values ----- */

/* Match Gmsh's nodes (dim numbers each) to felab's: match[g] = b with equal reference
 * coordinates, asserting a bijection. */
static void match_nodes(const fe_element *e, const double *gnodes, int nn, int *match)
{
  cr_assert_eq(nn, e->nbasis, "%s order %d: Gmsh has %d nodes, felab %d",
               fe_cell_name(e->cell), e->order, nn, e->nbasis);
  int *used = calloc((size_t)e->nbasis, sizeof *used);
  for (int g = 0; g < nn; g++) {
    match[g] = -1;
    for (int b = 0; b < e->nbasis && match[g] < 0; b++) {
      double dist = 0;
      for (int d = 0; d < e->dim; d++)
        dist = fmax(dist, fabs(gnodes[g * e->dim + d] - e->nodes[b * 3 + d]));
      if (dist < 1e-12) match[g] = b;
    }
    cr_assert_geq(match[g], 0, "%s order %d: Gmsh node %d at (%g, %g, %g) is no felab node",
                  fe_cell_name(e->cell), e->order, g, gnodes[g * e->dim],
                  gnodes[g * e->dim + 1], e->dim > 2 ? gnodes[g * e->dim + 2] : 0.0);
    cr_assert_eq(used[match[g]], 0, "%s order %d: felab node %d matches two Gmsh nodes",
                 fe_cell_name(e->cell), e->order, match[g]);
    used[match[g]] = 1;
  }
  free(used);
}

/* Compare felab's element e with Gmsh's element type at the points (triplets). */
static void compare_basis(const fe_element *e, int type, int npts, double *pts)
{
  int ierr = 0, gdim = 0, gorder = 0, nn = 0, nprimary = 0;
  char *name = NULL;
  double *gnodes = NULL;
  size_t ngnodes = 0;
  gmshModelMeshGetElementProperties(type, &name, &gdim, &gorder, &nn, &gnodes, &ngnodes,
                                    &nprimary, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_eq(gdim, e->dim);
  cr_assert_eq(gorder, e->order);
  cr_assert_eq(nprimary, e->nvertices);
  cr_assert_eq(ngnodes, (size_t)nn * gdim, "localNodeCoord has dim numbers per node");
  int *match = malloc((size_t)nn * sizeof *match);
  match_nodes(e, gnodes, nn, match);
  for (int v = 0; v < e->nvertices; v++) /* the vertices agree in order too */
    cr_assert_eq(match[v], v, "%s: Gmsh vertex %d is felab node %d", name, v, match[v]);

  int ncomp = 0, norient = 0;
  double *gphi = NULL, *gdphi = NULL;
  size_t nphi = 0, ndphi = 0;
  gmshModelMeshGetBasisFunctions(type, pts, 3 * (size_t)npts, "Lagrange", &ncomp, &gphi, &nphi,
                                 &norient, NULL, 0, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_eq(ncomp, 1);
  cr_assert_eq(nphi, (size_t)npts * nn);
  gmshModelMeshGetBasisFunctions(type, pts, 3 * (size_t)npts, "GradLagrange", &ncomp, &gdphi,
                                 &ndphi, &norient, NULL, 0, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_eq(ncomp, 3, "GradLagrange gives (u, v, w) whatever the dimension");
  cr_assert_eq(ndphi, (size_t)npts * nn * 3);

  const int nb = e->nbasis, dim = e->dim;
  double *xi = malloc((size_t)npts * dim * sizeof *xi);
  for (int q = 0; q < npts; q++)
    for (int d = 0; d < dim; d++) xi[q * dim + d] = pts[3 * q + d];
  double *B = malloc((size_t)npts * nb * sizeof *B);
  double *D = malloc((size_t)npts * nb * dim * sizeof *D);
  fe_element_tabulate(e, npts, xi, B, D);
  for (int q = 0; q < npts; q++)
    for (int g = 0; g < nn; g++) {
      const int b = match[g];
      const double want = gphi[(size_t)q * nn + g], got = B[(size_t)q * nb + b];
      cr_assert(fabs(got - want) <= 1e-10 * fmax(1, fabs(want)),
                "%s: node %d (Gmsh %d) at (%g, %g, %g): phi felab %.17g, Gmsh %.17g", name, b,
                g, pts[3 * q], pts[3 * q + 1], pts[3 * q + 2], got, want);
      for (int i = 0; i < 3; i++) {
        const double gw = gdphi[((size_t)q * nn + g) * 3 + i];
        const double fw = i < dim ? D[((size_t)q * nb + b) * dim + i] : 0.0;
        cr_assert(fabs(fw - gw) <= 1e-10 * fmax(1, fabs(gw)),
                  "%s: node %d (Gmsh %d) at (%g, %g, %g): dphi/dxi_%d felab %.17g, Gmsh %.17g",
                  name, b, g, pts[3 * q], pts[3 * q + 1], pts[3 * q + 2], i, fw, gw);
      }
    }
  free(B), free(D), free(xi), free(match);
  gmshFree(name), gmshFree(gnodes), gmshFree(gphi), gmshFree(gdphi);
}

Test(gmsh_fe, basis_values_match_gmsh_lagrange)
{
  gmsh_begin();
  for (int c = 0; c < NCELLS; c++) {
    if (cells[c].cell == FE_CELL_PRISM && !GMSH_PRISM_BASIS_USABLE) {
      cr_log_info("gmsh_fe: sanitized build: Gmsh's prism bases not compared (its "
                  "new[]/delete mismatch)");
      continue;
    }
    double *pts;
    int npts = interior_points(cells[c].cell, &pts);
    for (int p = 1; p <= cells[c].maxorder; p++) {
      int ierr = 0;
      int type = gmshModelMeshGetElementType(cells[c].gmsh_family, p, 0, &ierr);
      int nn = 0, dim, order, nprimary;
      char *name = NULL;
      double *nodes = NULL;
      size_t nnodes = 0;
      if (!ierr)
        gmshModelMeshGetElementProperties(type, &name, &dim, &order, &nn, &nodes, &nnodes,
                                          &nprimary, &ierr);
      gmshFree(name), gmshFree(nodes);
      if (ierr) { /* only the prism's higher orders are missing from Gmsh */
        cr_assert_eq(cells[c].cell, FE_CELL_PRISM, "Gmsh has no order-%d %s", p,
                     cells[c].gmsh_family);
        cr_log_info("gmsh_fe: Gmsh has no complete order-%d %s Lagrange element: skipped", p,
                    cells[c].gmsh_family);
        continue;
      }
      fe_element e;
      cr_assert_eq(fe_element_create(cells[c].cell, cells[c].family, p, FE_NODES_EQUISPACED, &e),
                   0, "%s", fe_error_message());
      compare_basis(&e, type, npts, pts);
      fe_element_free(&e);
    }
    free(pts);
  }
  gmsh_end();
}

/* ----- quadrature ----- */

static double factorial(int n)
{
  double f = 1;
  for (int k = 2; k <= n; k++) f *= k;
  return f;
}

/* The exact integral of x^a y^b z^c over the reference cell. */
static double monomial_integral(fe_cell_type cell, const int *a)
{
  switch (cell) {
  case FE_CELL_TRI:
    return factorial(a[0]) * factorial(a[1]) / factorial(a[0] + a[1] + 2);
  case FE_CELL_TET:
    return factorial(a[0]) * factorial(a[1]) * factorial(a[2]) /
           factorial(a[0] + a[1] + a[2] + 3);
  case FE_CELL_PRISM:
    return factorial(a[0]) * factorial(a[1]) / factorial(a[0] + a[1] + 2) *
           (a[2] % 2 ? 0.0 : 2.0 / (a[2] + 1));
  default: {
    double v = 1;
    for (int d = 0; d < fe_cell_dim(cell); d++) v *= a[d] % 2 ? 0.0 : 2.0 / (a[d] + 1);
    return v;
  }
  }
}

/* sum_q w_q x_q^a (points with `stride` numbers each); *abs_sum gets sum |w_q x_q^a|. */
static double rule_integral(int n, const double *pts, int stride, const double *w, int dim,
                            const int *a, double *abs_sum)
{
  double s = 0, t = 0;
  for (int q = 0; q < n; q++) {
    double f = w[q];
    for (int d = 0; d < dim; d++) f *= pow(pts[q * stride + d], a[d]);
    s += f, t += fabs(f);
  }
  *abs_sum = t;
  return s;
}

/* How closely Gmsh's (4.8) rule "Gauss<deg>" on a cell integrates what it should, measured
 * against exact integrals (relative to the integral of |f|): its triangle, prism and tensor
 * Gauss rules to 2e-14; its tetrahedron tables are printed to about 13 digits (errors up to
 * 5e-12; Gauss4's weights sum to 1/6 (1 - 3.4e-12)); its non-tensor rules Gauss1 on quads
 * (3 points) and Gauss1, Gauss2 on hexes (6 and 34 points) to 8-10 digits (up to 9e-11).
 * felab is held to 1e-12 against the exact value everywhere; felab and Gmsh agree to the
 * larger of 1e-12 and Gmsh's precision. */
static double gmsh_rule_tolerance(fe_cell_type cell, int deg)
{
  if (cell == FE_CELL_TET) return 1e-11;
  if ((cell == FE_CELL_QUAD && deg == 1) || (cell == FE_CELL_HEX && deg <= 2)) return 2e-10;
  return 1e-12;
}

/* Gmsh 4.8's "Gauss2" on quads is wrong: its 7-point rule puts 4 points at (+-sqrt(3/5),
 * +-sqrt(3/5)) where Radon's degree-5 rule, whose other points and weights it has, puts them
 * at (+-sqrt(3/5), +-sqrt(1/3)); it integrates y^2 to 1.926 instead of 4/3. Not compared. */
static int gmsh_rule_is_wrong(fe_cell_type cell, int deg)
{
  return cell == FE_CELL_QUAD && deg == 2;
}

/* Every monomial of total degree <= deg: felab's rule gives the exact value, and Gmsh's
 * (where its rule is right) the same one. */
static void compare_monomials(fe_cell_type cell, int deg, const fe_quadrature *q, int gn,
                              const double *gpts, const double *gw)
{
  const int dim = q->dim, gmsh_wrong = gmsh_rule_is_wrong(cell, deg);
  const double gtol = gmsh_rule_tolerance(cell, deg);
  double gmsh_worst = 0;
  int a[3] = {0, 0, 0};
  for (a[0] = 0; a[0] <= deg; a[0]++)
    for (a[1] = 0; a[0] + a[1] <= deg; a[1]++)
      for (a[2] = 0; a[2] <= (dim == 3 ? deg - a[0] - a[1] : 0); a[2]++) {
        double fabs_sum, gabs_sum;
        const double f = rule_integral(q->npoints, q->points, dim, q->weights, dim, a, &fabs_sum);
        const double g = rule_integral(gn, gpts, 3, gw, dim, a, &gabs_sum);
        const double exact = monomial_integral(cell, a), scale = fmax(fabs_sum, gabs_sum);
        cr_assert(fabs(f - exact) <= 1e-12 * fabs_sum,
                  "%s degree %d: x^%d y^%d z^%d: felab (%d points, %s) %.17g, exact %.17g",
                  fe_cell_name(cell), deg, a[0], a[1], a[2], q->npoints, q->name, f, exact);
        if (gmsh_wrong) {
          gmsh_worst = fmax(gmsh_worst, fabs(g - exact) / scale);
          continue;
        }
        cr_assert(fabs(f - g) <= gtol * scale && fabs(g - exact) <= gtol * scale,
                  "%s Gauss%d: x^%d y^%d z^%d: felab (%d points) %.17g, Gmsh (%d points) %.17g, "
                  "exact %.17g",
                  fe_cell_name(cell), deg, a[0], a[1], a[2], q->npoints, f, gn, g, exact);
      }
  if (gmsh_wrong)
    cr_log_info("gmsh_fe: Gmsh's Gauss%d on a %s (%d points) misses exact monomial integrals "
                "by up to %.2g (relative): not compared with felab",
                deg, fe_cell_name(cell), gn, gmsh_worst);
}

/* Tensor cells: a Gmsh rule of n^dim points is felab's Gauss rule of n points per direction,
 * point for point with equal weights (compared as sets). */
static void compare_tensor_gauss(fe_cell_type cell, int deg, int gn, const double *gpts,
                                 const double *gw)
{
  const int dim = fe_cell_dim(cell);
  int n = (int)lround(pow(gn, 1.0 / dim));
  if ((int)lround(pow(n, dim)) != gn) {
    cr_log_info("gmsh_fe: Gmsh's Gauss%d on a %s has %d points, not a tensor rule", deg,
                fe_cell_name(cell), gn);
    return;
  }
  fe_quadrature q;
  cr_assert_eq(fe_quadrature_create_kind(cell, 2 * n - 1, FE_QUAD_GAUSS, &q), 0, "%s",
               fe_error_message());
  cr_assert_eq(q.npoints, gn, "%s: felab's Gauss rule of degree %d has %d points, not %d^%d",
               fe_cell_name(cell), 2 * n - 1, q.npoints, n, dim);
  int *used = calloc((size_t)gn, sizeof *used);
  for (int g = 0; g < gn; g++) {
    int found = -1;
    for (int k = 0; k < q.npoints && found < 0; k++) {
      double dist = 0;
      for (int d = 0; d < dim; d++)
        dist = fmax(dist, fabs(gpts[3 * g + d] - q.points[k * dim + d]));
      if (dist < 1e-12 && !used[k]) found = k;
    }
    cr_assert_geq(found, 0, "%s Gauss%d (%d per direction): Gmsh point (%.17g, %.17g, %.17g) "
                  "is not a felab point", fe_cell_name(cell), deg, n, gpts[3 * g],
                  gpts[3 * g + 1], gpts[3 * g + 2]);
    used[found] = 1;
    cr_assert(fabs(gw[g] - q.weights[found]) <= 1e-12 * fabs(gw[g]),
              "%s Gauss%d: weight at (%g, %g, %g): felab %.17g, Gmsh %.17g", fe_cell_name(cell),
              deg, gpts[3 * g], gpts[3 * g + 1], gpts[3 * g + 2], q.weights[found], gw[g]);
  }
  free(used);
  fe_quadrature_free(&q);
}

Test(gmsh_fe, quadrature_agrees_with_gmsh)
{
  gmsh_begin();
  for (int c = 0; c < NCELLS; c++) {
    const fe_cell_type cell = cells[c].cell;
    int ierr = 0;
    const int type = gmshModelMeshGetElementType(cells[c].gmsh_family, 1, 0, &ierr);
    cr_assert_eq(ierr, 0);
    for (int deg = 1; deg <= 8; deg++) {
      char rule[16];
      snprintf(rule, sizeof rule, "Gauss%d", deg);
      double *gpts = NULL, *gw = NULL;
      size_t npts3 = 0, gn = 0;
      gmshModelMeshGetIntegrationPoints(type, rule, &gpts, &npts3, &gw, &gn, &ierr);
      cr_assert_eq(ierr, 0, "%s: Gmsh has no %s", cells[c].gmsh_family, rule);
      cr_assert_eq(npts3, 3 * gn);
      /* Gmsh's weights sum to the reference measure, as felab's do: no scaling */
      double sum = 0;
      for (size_t k = 0; k < gn; k++) sum += gw[k];
      const double measure = fe_reference_measure(cell);
      cr_assert(fabs(sum - measure) <= gmsh_rule_tolerance(cell, deg) * measure,
                "%s %s: Gmsh's weights sum to %.17g, not %.17g", cells[c].gmsh_family, rule, sum,
                measure);
      fe_quadrature q;
      cr_assert_eq(fe_quadrature_create(cell, deg, &q), 0, "%s", fe_error_message());
      compare_monomials(cell, deg, &q, (int)gn, gpts, gw);
      fe_quadrature_free(&q);
      if (cell == FE_CELL_QUAD || cell == FE_CELL_HEX)
        compare_tensor_gauss(cell, deg, (int)gn, gpts, gw);
      gmshFree(gpts), gmshFree(gw);
    }
  }
  gmsh_end();
}

/* ----- Jacobians of meshes ----- */

/* A smooth, mildly nonlinear map of the unit cube into itself (near enough): the cells of a
 * box mesh moved by it are no longer parallelepipeds, so their Jacobians vary. */
static void warp(double *x)
{
  const double X = x[0], Y = x[1], Z = x[2];
  x[0] = X + 0.05 * sin(3 * Y + 1) * Z;
  x[1] = Y + 0.05 * sin(2 * Z + 0.5) * X;
  x[2] = Z + 0.05 * sin(2.5 * X) * (1 + Y);
}

/* Move every node of the model's mesh by warp. */
static void warp_mesh(void)
{
  int ierr = 0;
  size_t *tags = NULL, ntags = 0, ncoords = 0, npar = 0;
  double *x = NULL, *par = NULL;
  gmshModelMeshGetNodes(&tags, &ntags, &x, &ncoords, &par, &npar, -1, -1, 0, 0, &ierr);
  cr_assert_eq(ierr, 0);
  for (size_t k = 0; k < ntags; k++) {
    warp(x + 3 * k);
    gmshModelMeshSetNode(tags[k], x + 3 * k, 3, NULL, 0, &ierr);
    cr_assert_eq(ierr, 0);
  }
  gmshFree(tags), gmshFree(x), gmshFree(par);
}

/* Mesh generation for the cases; each leaves a 3D mesh of one cell type in the model. */
static void mesh_tets(void)
{
  int ierr = 0;
  gmshModelOccAddBox(0, 0, 0, 1, 1, 1, -1, &ierr);
  gmshModelOccSynchronize(&ierr);
  gmshOptionSetNumber("Mesh.MeshSizeMax", 0.4, &ierr);
  gmshModelMeshGenerate(3, &ierr);
  cr_assert_eq(ierr, 0);
  warp_mesh();
}

static void mesh_hexes(void)
{
  int ierr = 0;
  gmshModelOccAddBox(0, 0, 0, 1, 1, 1, -1, &ierr);
  gmshModelOccSynchronize(&ierr);
  gmshOptionSetNumber("Mesh.MeshSizeMax", 0.34, &ierr);
  gmshModelMeshSetTransfiniteAutomatic(NULL, 0, 2.35, 1, &ierr); /* recombined: hexes */
  gmshModelMeshGenerate(3, &ierr);
  cr_assert_eq(ierr, 0);
  warp_mesh();
}

static void mesh_prisms(void)
{
  int ierr = 0;
  int s = gmshModelOccAddRectangle(0, 0, 0, 1, 1, -1, 0, &ierr);
  int base[2] = {2, s}, layers[1] = {3}, *out = NULL;
  size_t nout = 0;
  gmshModelOccExtrude(base, 2, 0, 0, 1, &out, &nout, layers, 1, NULL, 0, 1, &ierr);
  gmshFree(out);
  gmshModelOccSynchronize(&ierr);
  gmshOptionSetNumber("Mesh.MeshSizeMax", 0.4, &ierr);
  gmshModelMeshGenerate(3, &ierr);
  cr_assert_eq(ierr, 0);
  warp_mesh();
}

/* Second-order tets of the unit ball: Gmsh puts the new boundary nodes on the sphere. */
static void mesh_ball_p2(void)
{
  int ierr = 0;
  gmshModelOccAddSphere(0, 0, 0, 1, -1, -M_PI / 2, M_PI / 2, 2 * M_PI, &ierr);
  gmshModelOccSynchronize(&ierr);
  gmshOptionSetNumber("Mesh.MeshSizeMax", 0.5, &ierr);
  gmshModelMeshGenerate(3, &ierr);
  cr_assert_eq(ierr, 0);
  gmshModelMeshSetOrder(2, &ierr);
  cr_assert_eq(ierr, 0);
}

/* A cell's vertex centroid rounded to 1e-9, for matching cells across the two codes. */
typedef struct cell_key {
  long long k[3];
  int id;
} cell_key;

static int cell_key_cmp(const void *pa, const void *pb)
{
  const cell_key *a = pa, *b = pb;
  for (int d = 0; d < 3; d++)
    if (a->k[d] != b->k[d]) return a->k[d] < b->k[d] ? -1 : 1;
  return 0;
}

static void make_key(const double *verts, int nv, int id, cell_key *key)
{
  for (int d = 0; d < 3; d++) {
    double s = 0;
    for (int v = 0; v < nv; v++) s += verts[3 * v + d];
    key->k[d] = llround(s / nv * 1e9);
  }
  key->id = id;
}

/* What Gmsh says about its elements of one type, gathered before the session ends. */
typedef struct gmsh_jacobians {
  size_t n;       /* elements */
  int nv;         /* vertices (primary nodes) per element */
  double *verts;  /* n x nv x 3 vertex coordinates */
  double *jac;    /* n x npts x 9, by column */
  double *det;    /* n x npts */
  double *x;      /* n x npts x 3 physical points */
} gmsh_jacobians;

/* Gmsh's element type `type` in the model: vertices and Jacobians at the points. */
static void gmsh_collect(int type, int nv, int npts, double *pts, gmsh_jacobians *G)
{
  int ierr = 0;
  size_t *etags = NULL, netags = 0, *enodes = NULL, nenodes = 0;
  gmshModelMeshGetElementsByType(type, &etags, &netags, &enodes, &nenodes, -1, 0, 1, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_gt(netags, 0, "Gmsh made no elements of type %d", type);
  const size_t nper = nenodes / netags;
  size_t *tags = NULL, ntags = 0, ncoords = 0, npar = 0;
  double *coords = NULL, *par = NULL;
  gmshModelMeshGetNodes(&tags, &ntags, &coords, &ncoords, &par, &npar, -1, -1, 0, 0, &ierr);
  cr_assert_eq(ierr, 0);
  size_t maxtag = 0;
  for (size_t k = 0; k < ntags; k++) maxtag = tags[k] > maxtag ? tags[k] : maxtag;
  long *row = malloc((maxtag + 1) * sizeof *row); /* node tag -> row of coords */
  for (size_t k = 0; k < ntags; k++) row[tags[k]] = (long)k;
  G->n = netags, G->nv = nv;
  G->verts = malloc(netags * nv * 3 * sizeof *G->verts);
  for (size_t e = 0; e < netags; e++)
    for (int v = 0; v < nv; v++)
      memcpy(G->verts + (e * nv + v) * 3, coords + 3 * row[enodes[e * nper + v]],
             3 * sizeof(double));
  free(row);
  gmshFree(tags), gmshFree(coords), gmshFree(par), gmshFree(etags), gmshFree(enodes);
  size_t njac = 0, ndet = 0, nx = 0;
  G->jac = G->det = G->x = NULL;
  gmshModelMeshGetJacobians(type, pts, 3 * (size_t)npts, &G->jac, &njac, &G->det, &ndet, &G->x,
                            &nx, -1, 0, 1, &ierr);
  cr_assert_eq(ierr, 0);
  cr_assert_eq(njac, netags * npts * 9);
  cr_assert_eq(ndet, netags * npts);
  cr_assert_eq(nx, netags * npts * 3);
}

static double det3(const double *J)
{
  return J[0] * (J[4] * J[8] - J[5] * J[7]) - J[1] * (J[3] * J[8] - J[5] * J[6]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* Mesh with build(), take Gmsh's Jacobians of its `order` elements of family gmsh_family,
 * write the mesh, load it into felab and compare cell by cell. */
static void compare_jacobians(const char *what, void (*build)(void), fe_cell_type cell,
                              const char *gmsh_family, int order)
{
  double *pts;
  const int npts = interior_points(cell, &pts);
  const int nv = fe_cell_nvertices(cell);
  char path[256];
  snprintf(path, sizeof path, "/tmp/felab-gmsh-fe-%d-%s.msh", (int)getpid(), what);

  gmsh_begin();
  build();
  int ierr = 0;
  const int type = gmshModelMeshGetElementType(gmsh_family, order, 0, &ierr);
  cr_assert_eq(ierr, 0);
  gmsh_jacobians G;
  gmsh_collect(type, nv, npts, pts, &G);
  gmshOptionSetNumber("Mesh.Binary", 1, &ierr); /* coordinates written exactly */
  gmshWrite(path, &ierr);
  cr_assert_eq(ierr, 0, "Gmsh could not write %s", path);
  gmsh_end();

  fe_load_opts o;
  fe_load_opts_default(&o);
  o.order = order;
  fe_mesh *m = NULL;
  int rc = fe_mesh_load(path, &o, &m);
  unlink(path);
  cr_assert_eq(rc, 0, "%s", fe_error_message());
  if (order == 2 && m->geo_order != 2) {
    cr_log_info("gmsh_fe: %s: felab loaded the second-order mesh straight (geo_order %d): "
                "curved Jacobians not compared",
                what, m->geo_order);
    gmshFree(G.jac), gmshFree(G.det), gmshFree(G.x);
    free(G.verts), free(pts);
    fe_mesh_free(m);
    return;
  }
  cr_assert_eq(m->type, cell, "%s: felab loaded %s cells", what, fe_cell_name(m->type));
  cr_assert_eq((size_t)m->ncells, G.n, "%s: felab has %d cells, Gmsh %zu", what, m->ncells,
               G.n);
  fe_space *V = NULL;
  cr_assert_eq(fe_space_create(m, cell == FE_CELL_HEX ? "Q1" : "P1", &V), 0, "%s",
               fe_error_message());

  /* felab sorts its cells along a Morton curve: pair the cells by their centroids */
  const size_t n = G.n;
  cell_key *gk = malloc(n * sizeof *gk), *fk = malloc(n * sizeof *fk);
  double *fv = malloc((size_t)nv * 3 * sizeof *fv);
  for (size_t e = 0; e < n; e++) {
    make_key(G.verts + e * nv * 3, nv, (int)e, gk + e);
    for (int v = 0; v < nv; v++)
      memcpy(fv + 3 * v, m->coords + 3 * (size_t)m->cells[e * nv + v], 3 * sizeof(double));
    make_key(fv, nv, (int)e, fk + e);
  }
  qsort(gk, n, sizeof *gk, cell_key_cmp);
  qsort(fk, n, sizeof *fk, cell_key_cmp);

  double worst = 0;
  size_t moved = 0; /* cells that felab's order moved from their place in the file */
  for (size_t k = 0; k < n; k++) {
    cr_assert_eq(cell_key_cmp(gk + k, fk + k), 0, "%s: no felab cell has the centroid of Gmsh "
                 "element %d", what, gk[k].id);
    const int e = gk[k].id, c = fk[k].id;
    moved += e != c;
    for (int v = 0; v < nv; v++) { /* felab keeps Gmsh's local vertex order of 3D cells */
      const double *a = G.verts + ((size_t)e * nv + v) * 3;
      const double *b = m->coords + 3 * (size_t)m->cells[(size_t)c * nv + v];
      cr_assert(a[0] == b[0] && a[1] == b[1] && a[2] == b[2],
                "%s: vertex %d of felab cell %d is not vertex %d of Gmsh element %d", what, v, c,
                v, e);
    }
    for (int q = 0; q < npts; q++) {
      const double *gj = G.jac + ((size_t)e * npts + q) * 9, *gx = G.x + ((size_t)e * npts + q) * 3;
      const double gdet = G.det[(size_t)e * npts + q];
      double x[3], J[9];
      fe_space_cell_map(V, c, pts + 3 * q, x, J);
      double scale = 0;
      for (int k2 = 0; k2 < 9; k2++) scale = fmax(scale, fabs(gj[k2]));
      for (int d = 0; d < 3; d++) {
        cr_assert(fabs(x[d] - gx[d]) <= 1e-10 * fmax(1, fabs(gx[d])),
                  "%s: cell %d at (%g, %g, %g): x_%d felab %.17g, Gmsh %.17g", what, c,
                  pts[3 * q], pts[3 * q + 1], pts[3 * q + 2], d, x[d], gx[d]);
        for (int i = 0; i < 3; i++) { /* Gmsh by column: gj[3 i + d] = dx_d/du_i */
          const double diff = fabs(J[d * 3 + i] - gj[3 * i + d]);
          worst = fmax(worst, diff / scale);
          cr_assert(diff <= 1e-10 * scale,
                    "%s: cell %d at (%g, %g, %g): dx_%d/dxi_%d felab %.17g, Gmsh %.17g", what, c,
                    pts[3 * q], pts[3 * q + 1], pts[3 * q + 2], d, i, J[d * 3 + i],
                    gj[3 * i + d]);
        }
      }
      const double fdet = det3(J);
      cr_assert(fabs(fdet - gdet) <= 1e-10 * fabs(gdet) && gdet > 0,
                "%s: cell %d at (%g, %g, %g): det J felab %.17g, Gmsh %.17g", what, c, pts[3 * q],
                pts[3 * q + 1], pts[3 * q + 2], fdet, gdet);
    }
  }
  cr_log_info("gmsh_fe: %s: %zu cells (%zu moved from their place in the file) x %d points, "
              "worst relative Jacobian difference %.2g",
              what, n, moved, npts, worst);
  free(gk), free(fk), free(fv), free(pts);
  gmshFree(G.jac), gmshFree(G.det), gmshFree(G.x);
  free(G.verts);
  fe_space_free(V);
  fe_mesh_free(m);
}

Test(gmsh_fe, jacobians_match_gmsh)
{
  compare_jacobians("tets", mesh_tets, FE_CELL_TET, "Tetrahedron", 1);
  compare_jacobians("hexes", mesh_hexes, FE_CELL_HEX, "Hexahedron", 1);
  compare_jacobians("prisms", mesh_prisms, FE_CELL_PRISM, "Prism", 1);
  compare_jacobians("ball-p2", mesh_ball_p2, FE_CELL_TET, "Tetrahedron", 2);
}

#else
typedef int test_gmsh_fe_needs_the_gmsh_sdk; /* an empty file is not C */
#endif
