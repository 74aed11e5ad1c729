/* felab function spaces: a reference element on a mesh, its local-to-global dof map and the
 * geometry of its cells. Nodes 0..nvertices-1 are the mesh vertices; edge, face and
 * interior nodes follow, numbered as the cells first reach them. Dof of component k at
 * node n is n * ncomp + k (components interleaved). */
#ifndef FE_SPACE_H
#define FE_SPACE_H

#include "engine/fem/element.h"
#include "engine/mesh/mesh.h"

typedef struct fe_space {
  const fe_mesh *mesh;  /* borrowed: whoever made the space keeps the mesh alive */
  fe_element elem;      /* the element of the space */
  fe_element lin;       /* the first-order element: the map of straight cells */
  char name[16];        /* "P1", "Q4", ... (the scalar element) */
  int ncomp;            /* components (1 for scalar) */
  int ndofs;            /* global dofs (nodes x components) */
  int nnodes;           /* global nodes */
  int curved;           /* the mesh has second-order geometry */
  int affine;           /* affine cells (fe_mesh_affine): one Jacobian per cell */
  int *cell_nodes;      /* ncells x elem.nbasis global node ids */
  double *node_coords;  /* nnodes x 3 physical coordinates */
  /* how the dof map was made: "vertices" (P1, Q1), "lattice" (a box of hexes or quads as
   * mesh.box makes it: from the cells' indices), "entities" (on every thread), "hashed" (one
   * cell after another: past 2^31 places, or where the entities do not fit); all but
   * "vertices" give the same ids */
  const char *numbering;
  /* split over mpirun's ranks (engine/parallel/dist.h: this rank's part, the interface), or
   * NULL; owned by the space */
  struct fe_dist *dist;
} fe_space;

typedef struct fe_space_opts {
  char family;          /* 'P' or 'Q' */
  int order;            /* 1.. */
  int ncomp;            /* components, 1..3 (0: 1) */
  fe_node_kind kind;    /* nodes of Q spaces: GLL (default) or equispaced */
} fe_space_opts;

/* "P2" on tets, "Q3" on hexes, ...: a scalar space with GLL nodes on tensor cells; a name
 * that does not fit the mesh is an error saying which do. */
int fe_space_create(const fe_mesh *m, const char *name, fe_space **out);
int fe_space_create_opts(const fe_mesh *m, const fe_space_opts *o, fe_space **out);
void fe_space_free(fe_space *V);
/* "P2" -> ('P', 2); an error names what exists. */
int fe_space_parse_name(const char *name, char *family, int *order);

/* Sorted unique nodes on the boundary facets with the given tag names; tags == NULL or
 * the single name "all": every boundary node. Unknown names are errors listing the known. */
int fe_space_boundary_nodes(const fe_space *V, const char *const *tags, int ntags, int **nodes,
                            int *n);
/* The same by the tags' ids (fe_mesh_tag_id); ids NULL: every facet. */
int fe_space_boundary_nodes_ids(const fe_space *V, const int *ids, int nids, int **nodes, int *n);
/* The same as dofs: every component of every such node. */
int fe_space_boundary_dofs(const fe_space *V, const char *const *tags, int ntags, int **dofs,
                           int *n);

/* The physical point x and Jacobian J[d*dim + i] = dx_d/dxi_i of cell c at reference point
 * xi: from the vertices (straight cells) or the second-order nodes (curved). */
void fe_space_cell_map(const fe_space *V, int c, const double *xi, double x[3], double *J);
/* The same for a straight V (not curved) from V->lin's values phi and derivatives dphi at the
 * point, evaluated once for every cell (the same sums in the same order). */
void fe_space_cell_map_at(const fe_space *V, int c, const double *phi, const double *dphi,
                          double x[3], double *J);

/* A function of a point, supplied by the caller (the shell wraps Lua functions): sets
 * values[0..ncomp-1]; returns 0 or an error code (after fe_error_set). */
typedef int (*fe_point_fn)(void *ctx, const double x[3], int ncomp, double *values);

/* values[ndofs]: the function at every node. */
int fe_space_interpolate(const fe_space *V, fe_point_fn f, void *ctx, double *values);
/* || u_h - f || in "L2" or the "H1" seminorm, by quadrature of degree 2p + 2 (the exact
 * gradient in H1 is taken by central differences of f with a step of 1e-6 of the cell size),
 * summed over components. */
int fe_space_error(const fe_space *V, const double *u, fe_point_fn f, void *ctx, const char *norm,
                   double *err);

/* Determinant of J (dim x dim, row-major J[d][i] = dx_d/dxi_i) and its inverse K[i][d]. */
double fe_space_map_det(int dim, const double *J); /* det J alone */
double fe_space_map_inverse(int dim, const double *J, double *K);

#endif
