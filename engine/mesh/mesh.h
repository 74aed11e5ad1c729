/* felab meshes: vertices, cells of one type, tagged boundary facets, cell regions. */
#ifndef FE_MESH_H
#define FE_MESH_H

#include <stddef.h> /* size_t in fe_mesh_summary */

typedef enum { FE_CELL_TRI, FE_CELL_QUAD, FE_CELL_TET, FE_CELL_HEX, FE_CELL_PRISM } fe_cell_type;

/* Vertex orderings follow Gmsh. tet: v0..v3 with reference (0,0,0),(1,0,0),(0,1,0),(0,0,1).
 * hex: reference [-1,1]^3, v0..v3 the bottom face z=-1 counter-clockwise from (-1,-1,-1),
 * v4..v7 the top face in the same order. */
const char *fe_cell_name(fe_cell_type t);          /* "tet", ... */
int fe_cell_parse(const char *s, fe_cell_type *t); /* error lists the names */
int fe_cell_dim(fe_cell_type t);
int fe_cell_nvertices(fe_cell_type t);

#define FE_NAME_MAX 64

/* A named tag: a boundary tag (dim = mesh dim - 1) or a cell region (dim = mesh dim). */
typedef struct fe_tag {
  char name[FE_NAME_MAX];
  int id;  /* the number used in facet_tags / cell_tags */
  int dim;
} fe_tag;

typedef struct fe_mesh {
  int dim;            /* topological = spatial dimension of the cells */
  fe_cell_type type;  /* every cell has this type */
  int nvc;            /* vertices per cell */
  int nvertices;
  int ncells;
  double *coords;     /* nvertices x 3 (z = 0 in 2D) */
  int *cells;         /* ncells x nvc vertex ids, Gmsh ordering */
  int *cell_tags;     /* ncells region ids */
  int nfacets;        /* tagged boundary facets */
  int nvf;            /* vertices per facet */
  int *facets;        /* nfacets x nvf vertex ids */
  int *facet_tags;    /* nfacets boundary tag ids */
  int ntags;
  fe_tag *tags;       /* boundary tags and regions */
  /* Curved cells (mesh.load with order = 2). Straight meshes: geo_order 1, the arrays NULL.
   * geo_cells lists each cell's second-order nodes in Gmsh's order for the complete types
   * tri6, quad9, tet10, hex27, prism18 (vertices first, the same ids as in cells); ids index
   * geo_coords, whose first nvertices rows are the vertices themselves. */
  int geo_order;      /* 0 or 1: straight (the vertices are the geometry), 2: curved */
  int ngn;            /* geometry nodes per cell: nvc when straight */
  int ngeo_nodes;     /* rows of geo_coords: nvertices + edge/face/cell nodes */
  int *geo_cells;     /* ncells x ngn, or NULL */
  double *geo_coords; /* ngeo_nodes x 3, or NULL */
  /* Every cell's map has det J > 0 throughout: known by construction (mesh.box without
   * distortion: its cells are images of the reference cell under positive affine maps) or
   * from an operator's check of straight simplices (det J is one number a cell); operators
   * then skip their own check. Code that edits cells or coords in place clears it. */
  int positive;
  /* Every cell is the image of the reference cell under an affine map, so the map's Jacobian
   * is one matrix a cell: 1 yes, -1 no, 0 not known yet (fe_mesh_affine finds out and keeps
   * the answer). Straight simplices always are; mesh.box's undistorted cells are by
   * construction. Code that edits cells or coords in place sets it back to 0. */
  int affine;
  /* Its classes of congruent cells (fe_mesh_congruent), found on first use: known 0 not yet,
   * 1 found (classes NULL: none worth sharing). Code that edits cells or coords in place
   * calls fe_mesh_forget_classes. */
  int classes_known;
  struct fe_mesh_classes *classes;
  /* mesh.box's cubes (squares) per side, its cells made cube by cube, x fastest, the same
   * number in each: known by construction, so orders along the cubes need no search (0: not a
   * box, or edited since). Cleared with the classes. */
  int cubes[3];
  /* The cells lie in layers swept from vertex layered - 1 (fe_mesh_layer_order: mesh.load and
   * reorder "layers" put them so, and refinement keeps them so, sweeping the children from the
   * same vertex); 0: not in layers. */
  int layered;
} fe_mesh;

typedef struct fe_box_opts {
  int cells[3];       /* cells per direction (cubes, each split into 6 tets for "tet") */
  fe_cell_type type;  /* tet, hex or prism; tri or quad for 2D when cells[2] == 0 */
  double lower[3];    /* corners, default 0 and 1 */
  double upper[3];
  double distort;     /* 0..1: deterministic interior vertex perturbation, fraction of h/4 */
} fe_box_opts;

void fe_box_opts_default(fe_box_opts *o);
/* Structured box: boundary facets tagged xmin=1, xmax=2, ymin=3, ymax=4, zmin=5, zmax=6;
 * all cells in region "domain" (id 1). Sizes must be positive (error names the axis). */
int fe_mesh_box(const fe_box_opts *o, fe_mesh **out);
void fe_mesh_free(fe_mesh *m);

/* One-paragraph human summary into buf. */
void fe_mesh_summary(const fe_mesh *m, char *buf, size_t n);
/* The box of m's vertices: lo[d], hi[d] their least and largest coordinate d (0 where there are
 * none). */
void fe_mesh_extent(const fe_mesh *m, double lo[3], double hi[3]);
/* Look up a tag by name among tags of dimension dim; an unknown name is an FE_ERR_ARG
 * error that lists the names that exist. */
int fe_mesh_tag_id(const fe_mesh *m, const char *name, int dim, int *id);
/* Sorted unique vertices of the facets carrying tag id (id < 0: every boundary facet). */
int fe_mesh_tag_vertices(const fe_mesh *m, int id, int **verts, int *n);
/* Signed measure of each cell; an inverted or degenerate cell is an FE_ERR_MESH error
 * naming the cell id. Curved meshes also: geo_cells agree with cells, and each cell's
 * second-order map has a positive Jacobian determinant at every one of its nodes. */
int fe_mesh_check(const fe_mesh *m);
/* Whether every cell of a straight mesh is an affine image of the reference cell (quads and
 * hexes: parallelograms and parallelepipeds; prisms: a triangle swept along one vector): each
 * vertex lies where the map's linear part at the reference centroid puts it, to 1e-10 of the
 * cell's size. Simplices: 1; curved meshes: 0. The answer is kept in m->affine (a mesh is
 * made mutable by its owner; the check runs once). */
int fe_mesh_affine(const fe_mesh *m);

/* Classes of congruent cells: affine straight cells whose edge vectors from vertex 0 along
 * the reference axes agree to within rounding (2^-44 of the largest coordinate) are
 * translates of one another and share one map, so an operator stores one set of geometric
 * factors a class and a class number a cell (deal.II compresses affine cells likewise). A
 * mesh.box of hexes has one class, of tets six (the Kuhn tets of a cube): known by
 * construction; other meshes' are found by keying every cell's edge vectors. */
typedef struct fe_mesh_classes {
  int n;              /* classes */
  int *rep;           /* each class's smallest cell */
  unsigned short *of; /* ncells: each cell's class, or NULL: cell c's class is c % n (mesh.box:
                       * its cubes' cells, in one order in every cube, by construction) */
} fe_mesh_classes;
static inline int fe_mesh_class_of(const fe_mesh_classes *k, int c)
{
  return k->of ? k->of[c] : c % k->n;
}
#define FE_MESH_MAX_CLASSES 1024
/* m's classes, found once and kept; NULL for curved or non-affine cells, and where there are
 * more than FE_MESH_MAX_CLASSES or more than one a 16 cells (sharing would save little).
 * Out of memory: NULL as well (the operator then stores a set a cell). */
const fe_mesh_classes *fe_mesh_congruent(const fe_mesh *m);
/* Drop m's classes (found again on use): for code that edits its cells or coordinates in
 * place. */
void fe_mesh_forget_classes(fe_mesh *m);
/* ----- cell geometry: the straight map from the vertices, the curved one from the
 * second-order nodes (engine/mesh/mesh-geo.c; colors: mesh-color.c) ----- */

/* Physical point x and J[d*dim+i] = dx_d/dxi_i of cell `cell` at reference point xi, from the
 * vertices (straight: P1 tri/tet, Q1 quad/hex, P1 x linear prism) or the second-order nodes
 * (curved: tri6, quad9, tet10, hex27, prism18). Reference cells: tri, tet with vertices 0 and
 * e_i; quad, hex [-1,1]^d; prism the triangle x [-1,1] with v0..v2 at z = -1. x or J may be
 * NULL; x[2] = 0 in 2D. An out-of-range cell is FE_ERR_ARG. */
int fe_mesh_geo_map(const fe_mesh *m, int cell, const double *xi, double x[3], double *J);
/* The geometry nodes' reference coordinates (rows of 3, z = 0 in 2D) in Gmsh's order for
 * order 1 (the vertices) or 2 (the complete types); *n (may be NULL) gets their count. NULL
 * for a bad type or order. */
const double *fe_mesh_geo_nodes(fe_cell_type t, int order, int *n);
/* Values N[k] and gradients dN[k*dim+i] = dN_k/dxi_i (either may be NULL) of the Lagrange
 * basis of those nodes at xi; returns the node count (0 for a bad type or order). */
int fe_mesh_geo_shape(fe_cell_type t, int order, const double *xi, double *N, double *dN);
/* Per-vertex values extended to every geometry node (ngeo_nodes of them when curved, else
 * nvertices) by the straight interpolant of the cell, for writers of curved cells. *out is
 * malloc'd. */
int fe_mesh_geo_values(const fe_mesh *m, const double *vertex_values, double **out);

/* Greedy coloring of groups of `block` consecutive cells so that no two groups of one
 * color share a vertex. color[g] for each of ceil(ncells/block) groups; *ncolors set.
 * cells (ncells x nvc) may be reordered, or hold the nodes of a space instead of vertices:
 * any non-negative ids. At most 64 colors (FE_ERR_MESH beyond). Free color with free(). */
int fe_mesh_color_groups(const fe_mesh *m, const int *cells, int nvc, int block, int **color,
                         int *ncolors);
/* The same for ids known to lie in [0, nids) (a mesh's vertices, a space's nodes): not
 * checked, so not read twice. */
int fe_mesh_color_groups_below(const fe_mesh *m, const int *cells, int nvc, int nids, int block,
                               int **color, int *ncolors);

/* ----- mesh operations (engine/mesh/mesh-ops.c: refinement; mesh-order.c: reordering;
 * mesh-quality.c: quality) ----- */

/* Facets of prism meshes: nvf = 4, quadrilaterals as they are and triangles with their last
 * vertex repeated (a, b, c, c), so that one array holds both kinds. 2D meshes have edge
 * facets (nvf = 2). */

/* Uniform refinement into a new mesh: tri -> 4, quad -> 4, tet -> 8 (the corner tets and the
 * inner octahedron cut along its shortest diagonal), hex -> 8, prism -> 8. New vertices at
 * edge midpoints, face centers of quadrilaterals and hex centers, shared between neighbours;
 * boundary facets are refined keeping their tags, cells keep their regions. A curved mesh
 * stays curved: the new vertices and second-order nodes are placed by the parent cell's
 * second-order map (so the refined mesh has exactly the parent's geometry). Each parent's
 * children follow one another, in the parent's order, and the vertices are numbered in the
 * order the cells first use them; a mesh in layers (m->layered) gives one in layers, swept
 * from the same vertex, each layer's cells in that order. */
int fe_mesh_refine(const fe_mesh *m, fe_mesh **out);
/* Renumber vertices, cells and facets in place for locality: how = "rcm" (reverse
 * Cuthill-McKee on the vertex graph; cells by their lowest new vertex), "hilbert" (vertices
 * and cell centroids along a Hilbert curve), "layers" (the cells in the layers of
 * fe_mesh_layer_order, each layer in the cells' present order) or "morton" (the cells along
 * fe_mesh_morton_order's curve); the last two number the vertices in the order the cells first
 * use them. Unknown how: FE_ERR_ARG listing the names. Curved meshes: geo_cells follow the
 * cells, the second-order nodes numbered from nvertices in order of first use. */
int fe_mesh_reorder(fe_mesh *m, const char *how);
/* The cells in layers: a breadth-first sweep over the vertices that share a cell, from a far
 * vertex (the last one reached by a sweep from the first cell's first vertex), puts each cell
 * in the layer of its nearest vertex; the layers one after another, each connected part after
 * the last, the cells of a layer in the order `within` (within[k]: the k-th cell; NULL: their
 * own). Consecutive cells then lie in a slab of the mesh, as a box's rows and planes do, and
 * a run of them thicker than a layer touches only the runs before and after it: two colors
 * where the cpu colors runs of cells (a Morton curve's runs are blobs with many neighbours).
 * order[k] is the k-th cell (malloc'd). */
int fe_mesh_layer_order(const fe_mesh *m, const int *within, int **order);
/* Put m's cells in the order `order` (order[k]: the old id of the k-th cell) and number its
 * vertices in the order those cells first use them (vertices of no cell last): regions,
 * facets and curved nodes follow, the congruence classes are dropped, and m->layered is 0. */
int fe_mesh_permute_cells(fe_mesh *m, const int *order);
/* Put m's cells in layers (fe_mesh_layer_order), each layer in the order `within` (NULL: the
 * cells' own), as fe_mesh_permute_cells does, and set m->layered. */
int fe_mesh_order_layers(fe_mesh *m, const int *within);

/* Cell quality: the shape measure is 1 for the regular shape (equilateral tri and tet,
 * square and cube, right prism on an equilateral triangle) and tends to 0 as a cell
 * degenerates; tri, tet: 4 sqrt(3) A / sum l^2 and 6 sqrt(2) V / l_rms^3; quad, hex: the
 * worst corner's scaled Jacobian; prism: the worse end triangle's measure times the worst
 * corner's cosine between the vertical edge and the triangle normal. */
typedef struct fe_mesh_quality_info {
  double min, max, mean; /* shape measure over the cells */
  double min_volume;     /* cell measure (area in 2D) */
  double max_volume;
  double volume;         /* the sum over the cells (curved cells: of their curved map) */
  int worst_cell;        /* cell id (from 0, as in error messages) of the smallest measure */
} fe_mesh_quality_info;
/* Fill q; an inverted or degenerate cell is fe_mesh_check's error naming the cell. */
int fe_mesh_quality(const fe_mesh *m, fe_mesh_quality_info *q);

/* ----- meshes from files, through the Gmsh SDK (engine/mesh/io/gmsh-load.c; the conversion
 * to a mesh: gmsh-io.c) ----- */

typedef struct fe_load_opts {
  double size;           /* uniform mesh size when the file is meshed here (0: the file's own) */
  int order;             /* 1: straight cells; 2: curved (see fe_mesh_load) */
  const char *algorithm; /* NULL or a Gmsh 3D algorithm: "delaunay", "frontal", "hxt", ... */
} fe_load_opts;

void fe_load_opts_default(fe_load_opts *o);
/* Read a mesh (.msh 2.2/4.1 ASCII or binary) or mesh a geometry (.geo, STEP, BREP) with the
 * Gmsh SDK. The mesh has the order asked for: order 2 gives curved cells (a geometry is meshed
 * and elevated with Gmsh's SetOrder(2), which puts the new nodes on the CAD; a first-order
 * .msh is elevated too, its new nodes at straight midpoints; a second-order .msh is read as it
 * is), order 1 straight ones (a second-order .msh keeps its vertices). Physical groups of the
 * top dimension become cell regions, those one dimension lower boundary tags (unnamed groups
 * are named by their number); with none, every cell is in region "domain" and the whole
 * boundary is tag "boundary". Errors (FE_ERR_IO,
 * FE_ERR_MESH, FE_ERR_ARG) name the file. Builds without the SDK read .msh 4.1 by hand
 * (engine/mesh/io/msh-read.c: the same mesh); the rest (.geo, STEP, MSH 2.2, elevating a first-order
 * file) is FE_ERR_UNAVAILABLE there. */
int fe_mesh_load(const char *path, const fe_load_opts *o, fe_mesh **out);

/* The SDK's arrays, as fe_mesh_from_arrays takes them (no SDK needed). */
typedef struct fe_mesh_block {
  int gmsh_type;          /* MSH element type: 2 tri, 3 quad, 4 tet, 5 hex, 6 prism, 1 line, ... */
  int entity;             /* the tag of the model entity the elements are classified on */
  size_t nelements;
  const size_t *nodes;    /* nelements x (nodes of the type) node tags */
} fe_mesh_block;

typedef struct fe_mesh_group {
  int dim;                /* physical group of this dimension and tag */
  int tag;
  const char *name;       /* NULL or "": named by its number */
  size_t nentities;
  const int *entities;    /* entity tags (of dimension dim) in the group */
} fe_mesh_group;

typedef struct fe_mesh_arrays {
  const char *source;     /* the file name, for messages */
  size_t nnodes;
  const size_t *node_tags; /* nnodes unique positive tags */
  const double *coords;    /* nnodes x 3 */
  size_t nblocks;
  const fe_mesh_block *blocks;
  size_t ngroups;
  const fe_mesh_group *groups;
} fe_mesh_arrays;

/* The pure conversion: validates every count, type and node tag, keeps the vertex nodes of
 * the cells of the top dimension (one cell type and one order, else an error naming the types
 * found), renumbers them 0..n-1, orients 2D cells counter-clockwise, runs fe_mesh_check and
 * puts the cells in layers, each along a Morton curve (fe_mesh_order_layers; the vertices
 * numbered as the cells first use them). Second-order cells of the complete types (tri6 9,
 * quad9 10, tet10 11, hex27 12, prism18 13) make a curved mesh: geo_order 2, geo_cells with
 * every node in Gmsh's order (the other nodes numbered from nvertices on), geo_coords; the
 * incomplete types (quad8, hex20, prism15) are refused. Facets may be first or second order
 * (line3, tri6, quad9): their vertices count. */
int fe_mesh_from_arrays(const fe_mesh_arrays *a, fe_mesh **out);

/* The physical point x and J[d*dim + i] = dx_d/dxi_i of cell `cell` at reference point xi,
 * from the vertices (straight) or the second-order nodes (curved). J may be NULL. */
int fe_mesh_geo_map(const fe_mesh *m, int cell, const double *xi, double x[3], double *J);

/* The same map at many points: its shape functions at npts reference points xi (dim each)
 * tabulated once, N (npts x fe_mesh_map_nodes) and dN (npts x nodes x dim), then a cell's
 * x and J at a point from the point's rows (the same sums as fe_mesh_geo_map: the same
 * bits). */
int fe_mesh_geo_table(const fe_mesh *m, const double *xi, int npts, double *N, double *dN);
void fe_mesh_geo_map_at(const fe_mesh *m, int cell, const double *N, const double *dN,
                        double x[3], double *J);
/* The nodes a cell's map reads: the second-order nodes (curved), else the vertices. */
int fe_mesh_map_nodes(const fe_mesh *m);

/* The cells in the order of a Morton (Z) curve through their centroids: consecutive cells
 * are neighbours. order[k] is the k-th cell (malloc'd). A box's cells go cube by cube, each
 * cube's in the box's own order, the cubes along the curve through their corners. */
int fe_mesh_morton_order(const fe_mesh *m, int **order);

#endif
