/* TEMPORARY weak stand-in until the curved map lands (removed before commit). */
#include "engine/mesh.h"
__attribute__((weak)) int fe_mesh_geo_map(const fe_mesh *m, int cell, const double *xi, double x[3], double *J)
{ (void)m; (void)cell; (void)xi; x[0] = x[1] = x[2] = 0; (void)J; return -1; }
#include <math.h>
__attribute__((weak)) int fe_gll_nodes(int n, double *x)
{
  int N = n - 1;
  for (int j = 0; j < n; j++) {
    double t = -cos(M_PI * j / N);
    for (int it = 0; it < 100; it++) {
      double p0 = 1, p1 = t;
      for (int k = 2; k <= N; k++) { double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k; p0 = p1; p1 = p2; }
      double dt = (t * p1 - p0) / ((N + 1) * p1);
      t -= dt;
      if (fabs(dt) < 1e-16) break;
    }
    x[j] = t;
  }
  return 0;
}
