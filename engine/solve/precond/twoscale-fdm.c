/* The fine scale of the two-scale preconditioner, host side: the local problems' 1D
 * factors (Remacle, Gandham, Warburton, section 4.2); the subdomains' gather map is
 * twoscale-map.c.
 *
 * Fast diagonalization. Each subdomain is a cell extended by one layer of GLL nodes all
 * around, the cell taken as a box h_x x h_y x h_z. On a box the stiffness of
 * -div(kappa grad u) is a sum of Kronecker products of 1D matrices, the pencil's stiffness
 * K and mass M (the same in every direction, in reference units; M lumped or consistent as
 * the operator's quadrature makes it):
 *   A = kappa (w_x K (x) M (x) M + w_y M (x) K (x) M + w_z M (x) M (x) K),
 *   w_x = h_y h_z / (2 h_x), ...
 * With the generalized eigenpairs K S = M S Lambda, S^T M S = I, every factor is
 * diagonalized at once, M = S^-T S^-1 and K = S^-T Lambda S^-1, so
 *   A^-1 = (S (x) S (x) S) D^-1 (S^T (x) S^T (x) S^T),  D_abc = kappa (w_x l_a + w_y l_b + w_z l_c):
 * six 1D contractions and a division per point instead of a dense solve. The pencil is the
 * cell's n + 1 GLL nodes plus the neighbours' nearest interior node on each side, the
 * neighbours taken of the cell's own size, and homogeneous Dirichlet beyond (the paper's
 * points -2 and n + 2). The eigenproblem is reduced to a standard one with the Cholesky
 * factor M = C C^T, C^-1 K C^-T = Q Lambda Q^T, solved by cyclic Jacobi rotations, and
 * S = C^-T Q. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/solve/precond/twoscale.h"
#include "engine/fem/quadrature.h"

int fe_schwarz_mass(int n, int consistent, double *mass)
{
  int p1 = n + 1;
  fe_quadrature L, G;
  FE_CHECK(fe_quadrature_gll(p1, &L));
  for (int i = 0; i < p1 * p1; i++) mass[i] = i % (p1 + 1) ? 0 : L.weights[i / p1];
  int rc = consistent ? fe_quadrature_line(p1, &G) : 0; /* n + 1 Gauss points: exact to 2n + 1 */
  if (consistent && !rc) {
    for (int i = 0; i < p1; i++)
      for (int j = 0; j < p1; j++) {
        double s = 0;
        for (int q = 0; q < G.npoints; q++)
          s += G.weights[q] * fe_lagrange(L.points, p1, i, G.points[q]) *
               fe_lagrange(L.points, p1, j, G.points[q]);
        mass[i * p1 + j] = s;
      }
    fe_quadrature_free(&G);
  }
  fe_quadrature_free(&L);
  return rc ? fe_error_push(rc, __FILE__, __LINE__, __func__) : 0;
}

int fe_schwarz_gll_stiffness(int n, double *d, double *rho)
{
  int p1 = n + 1;
  fe_quadrature L;
  FE_CHECK(fe_quadrature_gll(p1, &L));
  double D[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)];
  for (int m = 0; m < p1; m++)
    for (int i = 0; i < p1; i++) D[m * p1 + i] = fe_lagrange_deriv(L.points, p1, i, L.points[m]);
  for (int i = 0; i < p1; i++) {
    rho[i] = L.weights[i];
    for (int j = 0; j < p1; j++) {
      double s = 0;
      for (int m = 0; m < p1; m++) s += D[m * p1 + i] * D[m * p1 + j] * L.weights[m]; /* d_ij */
      d[i * p1 + j] = s;
    }
  }
  fe_quadrature_free(&L);
  return 0;
}

/* Eigenpairs of the symmetric n x n matrix A (destroyed) by cyclic Jacobi rotations:
 * A = Q diag(lam) Q^T, Q[a * n + j] = entry a of eigenvector j. */
static int jacobi_eigen(int n, double *A, double *Q, double *lam)
{
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) Q[i * n + j] = i == j;
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0, norm = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) *(i == j ? &norm : &off) += A[i * n + j] * A[i * n + j];
    if (off <= 1e-30 * norm) {
      for (int i = 0; i < n; i++) lam[i] = A[i * n + i];
      return 0;
    }
    for (int p = 0; p < n; p++)
      for (int q = p + 1; q < n; q++) {
        double apq = A[p * n + q];
        if (apq == 0) continue;
        /* the rotation that zeroes A_pq: tan(2 theta) = 2 A_pq / (A_qq - A_pp) */
        double th = (A[q * n + q] - A[p * n + p]) / (2 * apq);
        double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1)), c = 1 / sqrt(t * t + 1),
               s = t * c;
        for (int k = 0; k < n; k++) { /* A <- A G (columns p, q) */
          double akp = A[k * n + p], akq = A[k * n + q];
          A[k * n + p] = c * akp - s * akq;
          A[k * n + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; k++) { /* A <- G^T A (rows p, q) */
          double apk = A[p * n + k], aqk = A[q * n + k];
          A[p * n + k] = c * apk - s * aqk;
          A[q * n + k] = s * apk + c * aqk;
        }
        for (int k = 0; k < n; k++) { /* Q <- Q G */
          double qkp = Q[k * n + p], qkq = Q[k * n + q];
          Q[k * n + p] = c * qkp - s * qkq;
          Q[k * n + q] = s * qkp + c * qkq;
        }
      }
  }
  FE_ERROR(FE_ERR_INTERNAL, "twoscale: the Jacobi eigensolver did not converge on the %d x %d "
           "pencil", n, n);
}

int fe_schwarz_line(int n, int left, int right, int consistent, double *S, double *lam)
{
  int p1 = n + 1, ne = n + 3;
  double d[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)], rho[TS_MAX_ORDER + 1],
      me[(TS_MAX_ORDER + 1) * (TS_MAX_ORDER + 1)];
  FE_CHECK(fe_schwarz_gll_stiffness(n, d, rho));
  FE_CHECK(fe_schwarz_mass(n, consistent, me));
  /* assembly on the pencil, index a + 1 for point a = -1..n+1: the cell, then the left
   * neighbour's nodes n-1, n (at -1, 0) and the right one's 0, 1 (at n, n+1); on Q1 the
   * points -1 and n+1 are vertices, and the cells beyond add their ends too (fixed at -2 and
   * n+2, as the paper's pencil) */
  double K[TS_MAX_LINE * TS_MAX_LINE] = {0}, M[TS_MAX_LINE * TS_MAX_LINE] = {0};
  for (int i = 0; i < p1; i++)
    for (int j = 0; j < p1; j++) {
      K[(i + 1) * ne + j + 1] += d[i * p1 + j];
      M[(i + 1) * ne + j + 1] += me[i * p1 + j];
    }
  for (int side = 0; side < 2; side++) {
    if ((side ? right : left) != TS_END_NEIGHBOUR) continue;
    int at = side ? n + 1 : 0, first = side ? 0 : n - 1; /* pencil index, neighbour node */
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        K[(at + i) * ne + at + j] += d[(first + i) * p1 + first + j];
        M[(at + i) * ne + at + j] += me[(first + i) * p1 + first + j];
      }
    if (n == 1) {
      int far = side ? n + 2 : 0;
      M[far * ne + far] += me[0];
      K[far * ne + far] += d[0];
    }
  }
  /* the points an end leaves out: the neighbour's (free, fixed) and the end node (fixed) */
  for (int side = 0; side < 2; side++) {
    int end = side ? right : left;
    for (int k = 0; k < (end == TS_END_FIXED ? 2 : end == TS_END_FREE ? 1 : 0); k++) {
      int a = side ? ne - 1 - k : k;
      for (int b = 0; b < ne; b++)
        K[a * ne + b] = K[b * ne + a] = M[a * ne + b] = M[b * ne + a] = 0;
      K[a * ne + a] = M[a * ne + a] = 1;
    }
  }
  /* M = C C^T (Cholesky), C^-1 K C^-T = Q Lambda Q^T, S = C^-T Q: then K S = M S Lambda and
   * S^T M S = I (C = M^1/2 when M is the lumped, diagonal mass) */
  double C[TS_MAX_LINE * TS_MAX_LINE] = {0}, W[TS_MAX_LINE * TS_MAX_LINE];
  for (int j = 0; j < ne; j++)
    for (int i = j; i < ne; i++) {
      double v = M[i * ne + j];
      for (int k = 0; k < j; k++) v -= C[i * ne + k] * C[j * ne + k];
      if (i == j) {
        FE_ASSERT(v > 0, FE_ERR_INTERNAL, "twoscale: the Q%d pencil's mass is not positive "
                  "definite", n);
        C[j * ne + j] = sqrt(v);
      } else
        C[i * ne + j] = v / C[j * ne + j];
    }
  for (int b = 0; b < ne; b++) /* W = C^-1 K (forward substitution, column b) */
    for (int a = 0; a < ne; a++) {
      double v = K[a * ne + b];
      for (int k = 0; k < a; k++) v -= C[a * ne + k] * W[k * ne + b];
      W[a * ne + b] = v / C[a * ne + a];
    }
  double B[TS_MAX_LINE * TS_MAX_LINE], Q[TS_MAX_LINE * TS_MAX_LINE], l[TS_MAX_LINE];
  for (int a = 0; a < ne; a++) /* B = W C^-T, row by row */
    for (int b = 0; b < ne; b++) {
      double v = W[a * ne + b];
      for (int k = 0; k < b; k++) v -= C[b * ne + k] * B[a * ne + k];
      B[a * ne + b] = v / C[b * ne + b];
    }
  for (int a = 0; a < ne; a++) /* symmetric up to rounding */
    for (int b = 0; b < a; b++)
      B[a * ne + b] = B[b * ne + a] = 0.5 * (B[a * ne + b] + B[b * ne + a]);
  FE_CHECK(jacobi_eigen(ne, B, Q, l));
  int order[TS_MAX_LINE]; /* ascending eigenvalues */
  for (int j = 0; j < ne; j++) {
    int k = j;
    while (k > 0 && l[order[k - 1]] > l[j]) {
      order[k] = order[k - 1];
      k--;
    }
    order[k] = j;
  }
  /* free at both ends the pencil has the constants as its kernel (lambda_0 = 0 up to
   * rounding): a cell may use it in one or two directions, never in all three (the caller
   * checks) */
  int kernel = left == TS_END_FREE && right == TS_END_FREE;
  for (int j = 0; j < ne; j++) {
    lam[j] = kernel && j == 0 ? 0 : l[order[j]];
    FE_ASSERT(lam[j] > 0 || (kernel && j == 0), FE_ERR_INTERNAL, "twoscale: the Q%d pencil "
              "(%d, %d)'s eigenvalue %d is %g, not positive", n, left, right, j, lam[j]);
    for (int a = ne - 1; a >= 0; a--) { /* S = C^-T Q: back substitution */
      double v = Q[a * ne + order[j]];
      for (int k = a + 1; k < ne; k++) v -= C[k * ne + a] * S[k * ne + j];
      S[a * ne + j] = v / C[a * ne + a];
    }
  }
  return 0;
}
