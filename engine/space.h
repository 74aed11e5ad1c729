/* felab function spaces: a reference element on a mesh and its local-to-global dof map. */
#ifndef FE_SPACE_H
#define FE_SPACE_H

#include "engine/element.h"
#include "engine/mesh.h"

typedef struct fe_space {
  const fe_mesh *mesh;  /* borrowed: whoever made the space keeps the mesh alive */
  fe_element elem;
  char name[16];        /* "P1", "Q1", ... */
  int ncomp;            /* components (1 for scalar) */
  int ndofs;            /* global dofs (nodes x components) */
  int nnodes;           /* global nodes */
  int *cell_nodes;      /* ncells x elem.nbasis global node ids */
  double *node_coords;  /* nnodes x 3 physical coordinates */
} fe_space;

/* "P1" on tets, "Q1" on hexes; a name that does not fit the mesh is an error saying which do. */
int fe_space_create(const fe_mesh *m, const char *name, fe_space **out);
void fe_space_free(fe_space *V);
/* Sorted unique nodes on the boundary facets with the given tag names; tags == NULL or
 * the single name "all": every boundary node. Unknown names are errors listing the known. */
int fe_space_boundary_nodes(const fe_space *V, const char *const *tags, int ntags, int **nodes,
                            int *n);


/* A scalar function of a point, supplied by the caller (the shell wraps Lua functions):
 * sets *value; returns 0 or an error code (after fe_error_set). */
typedef int (*fe_point_fn)(void *ctx, const double x[3], double *value);

/* values[nnodes]: the function at every node. */
int fe_space_interpolate(const fe_space *V, fe_point_fn f, void *ctx, double *values);
/* || u_h - f || in "L2" or the "H1" seminorm, by quadrature of degree 2p + 2 (the exact
 * gradient in H1 is taken by central differences of f with a step of 1e-6 of the cell size). */
int fe_space_error(const fe_space *V, const double *u, fe_point_fn f, void *ctx, const char *norm,
                   double *err);

/* Determinant of J (dim x dim, row-major J[d][i] = dx_d/dxi_i) and its inverse K[i][d]. */
double fe_space_map_inverse(int dim, const double *J, double *K);

#endif
