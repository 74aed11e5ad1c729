/* A mesh's cells split into parts (engine/parallel/partition.c): what each rank will hold
 * under mpirun (issue 48). Boxes by their lattice of cubes (blocks of cubes, the blocks' shape
 * chosen to cut the fewest faces), any mesh by METIS (its dual graph: cells joined across
 * faces) where felab was built with it, or by recursive coordinate bisection of the cells'
 * centres. */
#ifndef FE_PARTITION_H
#define FE_PARTITION_H

#include "engine/mesh/mesh.h"

enum { FE_PART_AUTO, FE_PART_LATTICE, FE_PART_METIS, FE_PART_RCB };

typedef struct fe_partition {
  int nparts;
  int method;        /* the one that made it: FE_PART_LATTICE, _METIS or _RCB */
  int ncells;
  int *part;         /* ncells: each cell's part */
  int *cells;        /* nparts: cells in each part */
  int *vertices;     /* nparts: vertices of each part's cells */
  int *interface;    /* nparts: of those, the vertices shared with another part */
  int *neighbours;   /* nparts: the parts each shares a vertex with */
  int ninterface;    /* vertices shared by more than one part */
  long long cut;     /* cell faces whose two cells lie in different parts */
} fe_partition;

/* Split m's cells into nparts (1 .. ncells) by method (FE_PART_AUTO: the lattice for a box,
 * else METIS where built, else RCB); the parts are nonempty. */
int fe_mesh_partition(const fe_mesh *m, int nparts, int method, fe_partition **out);
/* The same parts with only each part's cells counted (vertices, interface, neighbours and cut
 * left 0): what a split over the ranks reads, without the counts' passes over the mesh (a
 * box of 12.6M tets on one thread here: 0.35 s with them, 0.16 without). */
int fe_mesh_partition_cells(const fe_mesh *m, int nparts, int method, fe_partition **out);
void fe_partition_free(fe_partition *p);
/* The parts whose cells hold each of n items (a mesh's vertices, a space's nodes): cell c of
 * ncells holds items[c * k .. c * k + k) and lies in part[c] of np. one[i] (malloc'd): item i's
 * part where one part's cells alone hold it, -1 where no cell does, -2 where several parts'
 * do; those items' parts in *pairs (malloc'd, item * np + part, ascending and distinct,
 * *npairs of them). The cells on the threads (an item's part set by compare-and-swap), then a
 * sort of the interface's pairs alone. */
int fe_item_parts(const int *items, int k, int ncells, int n, const int *part, int np, int **one,
                  long long **pairs, size_t *npairs);
/* "lattice", "metis", "rcb" (and "auto"). */
const char *fe_partition_method_name(int method);
/* The method called name into *method (an error listing them if none). */
int fe_partition_method_parse(const char *name, int *method);

#endif
