/* felab spaces: the space made on a mesh (its dof map: engine/fem/space-number.c, its
 * boundary: engine/fem/space-boundary.c, the tables that name the nodes:
 * engine/fem/space-entities.c), the cells' geometry map, interpolation and errors.
 *
 * Node coordinates are the geometry map at the node's reference point: the first-order map
 * of the vertices for straight cells, the second-order map for curved ones. */
#include "engine/fem/space.h"
#include "engine/parallel/dist.h"

#include <ctype.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/progress.h"
#include "engine/fem/space-private.h"
#include "engine/fem/quadrature.h"

int fe_space_parse_name(const char *name, char *family, int *order)
{
  char *end;
  if (!name || (name[0] != 'P' && name[0] != 'Q') || !isdigit((unsigned char)name[1]))
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\"..\"P7\" on tri/tet/prism, \"Q1\".."
             "\"Q9\" on quad/hex)", name ? name : "(null)");
  long o = strtol(name + 1, &end, 10);
  if (*end || o < 1 || o > 99)
    FE_ERROR(FE_ERR_ARG, "unknown space '%s' (use \"P1\"..\"P7\" on tri/tet/prism, \"Q1\".."
             "\"Q9\" on quad/hex)", name);
  *family = name[0];
  *order = (int)o;
  return 0;
}

/* The first-order map at the element's nodes, tabulated once (straight_map). */
straight_map *straight_map_make(const fe_space *V)
{
  const fe_element *el = &V->elem;
  const int nv = el->nvertices;
  straight_map *s = malloc(sizeof *s);
  if (!s) return NULL;
  for (int b = 0; b < el->nbasis; b++) {
    double l[FE_MAX_VERTICES];
    fe_element_eval(&V->lin, el->nodes + 3 * b, l, NULL);
    s->n[b] = 0;
    for (int v = 0; v < nv; v++)
      if (l[v] != 0) s->v[b][s->n[b]] = (unsigned char)v, s->l[b][s->n[b]++] = l[v];
  }
  return s;
}

void fe_space_cell_map(const fe_space *V, int c, const double *xi, double x[3], double *J)
{
  if (V->curved) {
    fe_mesh_geo_map(V->mesh, c, xi, x, J);
    return;
  }
  double phi[FE_MAX_VERTICES], dphi[FE_MAX_VERTICES * 3];
  fe_element_eval(&V->lin, xi, phi, dphi);
  fe_space_cell_map_at(V, c, phi, dphi, x, J);
}

void fe_space_cell_map_at(const fe_space *V, int c, const double *phi, const double *dphi,
                          double x[3], double *J)
{
  const fe_mesh *m = V->mesh;
  const fe_element *g = &V->lin;
  const int dim = g->dim, nv = g->nbasis;
  x[0] = x[1] = x[2] = 0;
  if (J)
    for (int k = 0; k < dim * dim; k++) J[k] = 0;
  for (int b = 0; b < nv; b++) {
    const double *X = m->coords + 3 * (size_t)m->cells[(size_t)c * m->nvc + b];
    for (int d = 0; d < 3; d++) x[d] += phi[b] * X[d];
    if (J)
      for (int d = 0; d < dim; d++)
        for (int i = 0; i < dim; i++) J[d * dim + i] += X[d] * dphi[b * dim + i];
  }
}

/* The bytes of V's dof map, estimated before it is made: the cell map (nb ids a cell) and the
 * node coordinates, and beside them the numbering's temporaries (the entities': the cells'
 * vertices, a count a vertex a thread, an order byte an entity of a cell; the hashed
 * numbering's map of names, past 2^31 places; a box's lattice: none). The nodes are counted
 * as they would be numbered: the vertices, and each other node of a cell shared with the
 * cells around what it lies on: about 5 tets around an edge (6 edges a tet, and a tet mesh has
 * about 6 tets and 7 edges a vertex: 36 / 7), 4 hexes or prisms, 2 cells across a face (or a
 * 2D edge), 1 inside the cell. */
static size_t dof_map_bytes(const fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const double nc = m->ncells;
  double per_cell = 0, shared = 0; /* new nodes a cell; the part of them on edges and faces */
  for (int b = nv; b < nb; b++) {
    int k = 0;
    for (int v = 0; v < nv; v++) k += el->weights[b * nv + v] != 0;
    const double share = k == 2 && el->dim == 3 ? (el->cell == FE_CELL_TET ? 0.2 : 0.25)
                         : k < nv ? 0.5 : 1.0;
    per_cell += share;
    shared += share < 1 ? share : 0;
  }
  const double nodes = m->nvertices + nc * per_cell;
  double bytes = 4.0 * nc * nb + 24.0 * nodes;
  const int lattice = (el->cell == FE_CELL_HEX || el->cell == FE_CELL_QUAD) && m->cubes[0] > 0;
  static const double entities[] = {[FE_CELL_TRI] = 3, [FE_CELL_QUAD] = 4, [FE_CELL_TET] = 10,
                                    [FE_CELL_HEX] = 18, [FE_CELL_PRISM] = 14};
  if (nb > nv && !lattice)
    bytes += 4.0 * nc * nv + 4.0 * m->nvertices * (omp_get_max_threads() + 2) +
             entities[el->cell] * nc;
  if (nb > nv && el->cell != FE_CELL_HEX && el->cell != FE_CELL_QUAD) /* the interleave's */
    bytes += 36.0 * nodes + 4.0 * m->nvertices;
  if (nb > nv && nc * nb >= 2147483648.0) /* keys of up to 8 ints and a value, in a table at
                                           * most half full, the old one beside it as it grows */
    bytes += 1.5 * 4 * (nc * shared) * 9 * sizeof(int);
  return (size_t)bytes;
}

static int build_dof_map(fe_space *V)
{
  const fe_mesh *m = V->mesh;
  const fe_element *el = &V->elem;
  const int nb = el->nbasis, nv = el->nvertices;
  const size_t nc = (size_t)m->ncells;
  FE_CHECK(fe_memory_check(dof_map_bytes(V), "fe.space: the dof map of %s on %d cells", V->name,
                           m->ncells));
  FE_MALLOC(V->cell_nodes, nc * nb + 1, "dof map");
  if (nb == nv) { /* P1, Q1: the nodes are the vertices; the map is the cells' own */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nc * nb; i++) V->cell_nodes[i] = m->cells[i];
    V->nnodes = m->nvertices;
    V->numbering = "vertices";
    FE_MALLOC(V->node_coords, 3 * (size_t)m->nvertices + 1, "node coordinates");
    memcpy(V->node_coords, m->coords, sizeof(double) * 3 * (size_t)m->nvertices);
    return 0;
  }
  /* straight cells: the first-order map at the element's nodes, tabulated once */
  straight_map *s = straight_map_make(V);
  if (!s) FE_ERROR(FE_ERR_MEM, "out of host memory for a tabulation");
  /* a box of hexes or quads by its lattice; else the entities' numbering, which packs a place
   * in 32 bits; FELAB_DOFMAP=entities or =hashed asks for those (tests compare the three) */
  const char *how = getenv("FELAB_DOFMAP");
  long long n = how && *how ? -2 : number_nodes_lattice(V, s);
  if (n != -2) {
    free(s);
    if (n < 0) return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
    V->numbering = "lattice";
    V->nnodes = (int)n;
    return 0;
  }
  int sorted = nc * nb < (size_t)1 << 31 && !(how && !strcmp(how, "hashed"));
  n = sorted ? number_nodes_entities(V, s) : -2;
  if (n == -2) { /* the element or the mesh does not fit the entities' tables */
    sorted = 0;
    n = number_nodes_hashed(V);
  }
  V->numbering = sorted ? "entities" : "hashed";
  if (n >= 0 && n <= (long long)1 << 30 && !sorted) {
    /* every cell places its nodes (shared ones more than once, with the same value) */
    V->node_coords = fe_alloc(sizeof(double) * (3 * (size_t)n + 1));
    if (V->node_coords) {
      memcpy(V->node_coords, m->coords, sizeof(double) * 3 * (size_t)m->nvertices);
#pragma omp parallel for schedule(static)
      for (size_t c = 0; c < nc; c++) {
        double X[FE_MAX_VERTICES][3];
        cell_vertices(V, c, X);
        for (int b = nv; b < nb; b++)
          node_place(V, c, b, s, (const double (*)[3])X,
                     V->node_coords + 3 * (size_t)V->cell_nodes[c * nb + b]);
      }
    }
  }
  free(s);
  if (n < 0) return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  if (n > (long long)1 << 30) FE_ERROR(FE_ERR_ARG, "space %s: more than 2^30 nodes", V->name);
  if (!V->node_coords) FE_ERROR(FE_ERR_MEM, "out of host memory for the node coordinates");
  V->nnodes = (int)n;
  /* cells of no lattice: every node in the block of its entity's least vertex (hexes and
   * quads keep the numbering their lattice gives a box, node for node, whichever way made) */
  if (el->cell != FE_CELL_HEX && el->cell != FE_CELL_QUAD && number_nodes_interleave(V))
    return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  return 0;
}

int fe_space_create_opts(const fe_mesh *m, const fe_space_opts *o, fe_space **out)
{
  int ncomp = o->ncomp ? o->ncomp : 1;
  FE_ASSERT(ncomp >= 1 && ncomp <= 3, FE_ERR_ARG,
            "space: %d components (1, 2 or 3 are supported)", ncomp);
  fe_space *V;
  FE_CALLOC(V, 1, "space");
  V->mesh = m;
  V->ncomp = ncomp;
  snprintf(V->name, sizeof V->name, "%c%d", o->family, o->order);
  int rc = fe_element_create(m->type, o->family, o->order, o->kind, &V->elem);
  if (!rc) rc = fe_element_linear(m->type, &V->lin);
  if (rc) {
    fe_space_free(V);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  V->curved = m->geo_order >= 2;
  V->affine = !V->curved && fe_mesh_affine(m);
  fe_progress_begin("fe.space", 0);
  fe_progress_watch(1);
  fe_progress_phase("the dof map");
  rc = build_dof_map(V);
  fe_progress_watch(0);
  fe_progress_end();
  if (rc) {
    fe_space_free(V);
    return fe_error_push(fe_error_code(), __FILE__, __LINE__, __func__);
  }
  V->ndofs = V->nnodes * ncomp;
  *out = V;
  return 0;
}

int fe_space_create(const fe_mesh *m, const char *name, fe_space **out)
{
  fe_space_opts o = {.ncomp = 1, .kind = FE_NODES_GLL};
  FE_CHECK(fe_space_parse_name(name, &o.family, &o.order));
  return fe_space_create_opts(m, &o, out);
}

void fe_space_free(fe_space *V)
{
  if (!V) return;
  fe_dist_free(V->dist);
  fe_element_free(&V->elem);
  fe_element_free(&V->lin);
  free(V->cell_nodes);
  free(V->node_coords);
  free(V);
}

int fe_space_interpolate(const fe_space *V, fe_point_fn f, void *ctx, double *values)
{
  for (int i = 0; i < V->nnodes; i++) {
    if ((i & 4095) == 0) FE_CHECK_INTERRUPT();
    FE_CHECK(f(ctx, V->node_coords + 3 * (size_t)i, V->ncomp, values + (size_t)i * V->ncomp));
  }
  return 0;
}

/* Determinant of a 3x3 (or 2x2) matrix. */
double fe_space_map_det(int dim, const double *J)
{
  if (dim == 2) return J[0] * J[3] - J[1] * J[2];
  return J[0] * (J[4] * J[8] - J[5] * J[7]) + J[1] * (J[5] * J[6] - J[3] * J[8]) +
         J[2] * (J[3] * J[7] - J[4] * J[6]);
}

/* Determinant and inverse of a 3x3 (or 2x2) matrix. */
double fe_space_map_inverse(int dim, const double *J, double *K)
{
  if (dim == 2) {
    double det = J[0] * J[3] - J[1] * J[2];
    K[0] = J[3] / det, K[1] = -J[1] / det, K[2] = -J[2] / det, K[3] = J[0] / det;
    return det;
  }
  double c0 = J[4] * J[8] - J[5] * J[7], c1 = J[5] * J[6] - J[3] * J[8],
         c2 = J[3] * J[7] - J[4] * J[6];
  double det = J[0] * c0 + J[1] * c1 + J[2] * c2, r = 1 / det;
  K[0] = c0 * r;
  K[1] = (J[2] * J[7] - J[1] * J[8]) * r;
  K[2] = (J[1] * J[5] - J[2] * J[4]) * r;
  K[3] = c1 * r;
  K[4] = (J[0] * J[8] - J[2] * J[6]) * r;
  K[5] = (J[2] * J[3] - J[0] * J[5]) * r;
  K[6] = c2 * r;
  K[7] = (J[1] * J[6] - J[0] * J[7]) * r;
  K[8] = (J[0] * J[4] - J[1] * J[3]) * r;
  return det;
}

/* The error's contribution at one point: |u_h - f|^2 (L2) or |grad u_h - grad f|^2 (H1). */
static int point_error(const fe_space *V, const double *u, const int *dof, const double *phi,
                       const double *dphi, const double *x, const double *K, double h, int h1,
                       fe_point_fn f, void *ctx, double *sum)
{
  const int dim = V->elem.dim, nb = V->elem.nbasis, nc = V->ncomp;
  double fe[3], fp[3], fm[3];
  *sum = 0;
  if (!h1) {
    FE_CHECK(f(ctx, x, nc, fe));
    for (int k = 0; k < nc; k++) {
      double uh = 0;
      for (int b = 0; b < nb; b++) uh += u[(size_t)dof[b] * nc + k] * phi[b];
      *sum += (uh - fe[k]) * (uh - fe[k]);
    }
    return 0;
  }
  for (int d = 0; d < dim; d++) { /* the exact gradient by central differences of f */
    double xp[3] = {x[0], x[1], x[2]}, xm[3] = {x[0], x[1], x[2]};
    xp[d] += h;
    xm[d] -= h;
    FE_CHECK(f(ctx, xp, nc, fp));
    FE_CHECK(f(ctx, xm, nc, fm));
    for (int k = 0; k < nc; k++) {
      double gh = 0;
      for (int b = 0; b < nb; b++)
        for (int i = 0; i < dim; i++)
          gh += u[(size_t)dof[b] * nc + k] * dphi[b * dim + i] * K[i * dim + d];
      double ge = (fp[k] - fm[k]) / (2 * h);
      *sum += (gh - ge) * (gh - ge);
    }
  }
  return 0;
}

int fe_space_error(const fe_space *V, const double *u, fe_point_fn f, void *ctx, const char *norm,
                   double *err)
{
  int h1 = 0;
  if (!strcmp(norm, "H1")) h1 = 1;
  else if (strcmp(norm, "L2"))
    FE_ERROR(FE_ERR_ARG, "unknown norm '%s' (\"L2\" or \"H1\")", norm);
  const fe_element *el = &V->elem;
  fe_quadrature Q;
  FE_CHECK(fe_quadrature_create(el->cell, 2 * el->order + 2 + (V->curved ? 2 : 0), &Q));
  const int dim = el->dim, nb = el->nbasis;
  double *phi = fe_alloc(sizeof(double) * (size_t)Q.npoints * nb);
  double *dphi = fe_alloc(sizeof(double) * (size_t)Q.npoints * nb * dim);
  if (!phi || !dphi) {
    free(phi);
    free(dphi);
    fe_quadrature_free(&Q);
    FE_ERROR(FE_ERR_MEM, "out of host memory for a tabulation");
  }
  fe_element_tabulate(el, Q.npoints, Q.points, phi, dphi);
  double sum = 0;
  int rc = 0;
  for (int c = 0; c < V->mesh->ncells && !rc; c++) {
    if ((c & 1023) == 0 && (rc = fe_interrupt_check())) break;
    const int *dof = V->cell_nodes + (size_t)c * nb;
    for (int q = 0; q < Q.npoints && !rc; q++) {
      double x[3], J[9], K[9], s;
      fe_space_cell_map(V, c, Q.points + q * dim, x, J);
      double det = fe_space_map_inverse(dim, J, K);
      double h = 1e-6 * cbrt(fabs(det)) + 1e-12;
      rc = point_error(V, u, dof, phi + (size_t)q * nb, dphi + (size_t)q * nb * dim, x, K, h, h1,
                       f, ctx, &s);
      sum += Q.weights[q] * fabs(det) * s;
    }
  }
  free(phi);
  free(dphi);
  fe_quadrature_free(&Q);
  FE_CHECK(rc);
  /* a split space: each rank integrated its own cells */
  if (V->dist) FE_CHECK(fe_dist_reduce_sum(V->dist, &sum, 1));
  *err = sqrt(sum);
  return 0;
}
