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
} fe_mesh;

typedef struct fe_box_opts {
  int cells[3];       /* cells per direction (cubes, each split into 6 tets for "tet") */
  fe_cell_type type;  /* FE_CELL_TET or FE_CELL_HEX (tri/quad for 2D when cells[2] == 0) */
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
/* Look up a tag by name among tags of dimension dim; an unknown name is an FE_ERR_ARG
 * error that lists the names that exist. */
int fe_mesh_tag_id(const fe_mesh *m, const char *name, int dim, int *id);
/* Sorted unique vertices of the facets carrying tag id (id < 0: every boundary facet). */
int fe_mesh_tag_vertices(const fe_mesh *m, int id, int **verts, int *n);
/* Signed measure of each cell; an inverted or degenerate cell is an FE_ERR_MESH error
 * naming the cell id. */
int fe_mesh_check(const fe_mesh *m);
/* Greedy coloring of groups of `block` consecutive cells so that no two groups of one
 * color share a vertex. color[g] for each of ceil(ncells/block) groups; *ncolors set.
 * cells (ncells x nvc) may be reordered, or hold the nodes of a space instead of vertices:
 * any non-negative ids. At most 64 colors (FE_ERR_MESH beyond). Free color with free(). */
int fe_mesh_color_groups(const fe_mesh *m, const int *cells, int nvc, int block, int **color,
                         int *ncolors);

#endif
