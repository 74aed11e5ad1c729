/* Mesh generators for tri, quad and prism, and the mesh operations: uniform refinement,
 * reordering (rcm, hilbert, layers, morton) and the quality measure; the cell geometry map,
 * straight and curved (second-order cells made with fe_mesh_from_arrays). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/vtu.h"

/* A box on [-1,1] x [0,0.5] (x [2,5] in 3D; nz = 0: a 2D box); fails the test on error. */
static fe_mesh *make_box(fe_cell_type type, int nx, int ny, int nz, double distort)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = nx, o.cells[1] = ny, o.cells[2] = nz;
  o.lower[0] = -1, o.lower[1] = 0, o.lower[2] = 2;
  o.upper[0] = 1, o.upper[1] = 0.5, o.upper[2] = 5;
  o.distort = distort;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

/* Total measure of the cells (volume, or area in 2D). */
static double total_volume(const fe_mesh *m)
{
  fe_mesh_quality_info q;
  cr_assert_eq(fe_mesh_quality(m, &q), 0, "%s", fe_error_message());
  return q.volume;
}

/* The faces of each cell type as local vertices (-1 ends a shorter face). */
static int cell_faces(fe_cell_type t, int faces[6][4])
{
  static const int tri[3][4] = {{0, 1, -1}, {1, 2, -1}, {2, 0, -1}};
  static const int quad[4][4] = {{0, 1, -1}, {1, 2, -1}, {2, 3, -1}, {3, 0, -1}};
  static const int tet[4][4] = {{1, 2, 3, -1}, {0, 2, 3, -1}, {0, 1, 3, -1}, {0, 1, 2, -1}};
  static const int hex[6][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 5, 4},
                                {1, 2, 6, 5}, {2, 3, 7, 6}, {3, 0, 4, 7}};
  static const int prism[5][4] = {
      {0, 1, 2, -1}, {3, 4, 5, -1}, {0, 1, 4, 3}, {1, 2, 5, 4}, {2, 0, 3, 5}};
  const int(*src)[4] = t == FE_CELL_TRI ? tri : t == FE_CELL_QUAD ? quad : t == FE_CELL_TET ? tet
                       : t == FE_CELL_HEX ? hex : prism;
  const int n = t == FE_CELL_TRI ? 3 : t == FE_CELL_QUAD || t == FE_CELL_TET ? 4 : t == FE_CELL_HEX ? 6 : 5;
  memcpy(faces, src, (size_t)n * sizeof *faces);
  return n;
}

/* A face as 4 sorted distinct ids, padded with the largest: equal faces get equal keys. */
static void face_key(const int *v, int n, int key[4])
{
  int k = 0;
  for (int i = 0; i < n; i++) {
    int dup = 0;
    for (int j = 0; j < k; j++) dup |= key[j] == v[i];
    if (!dup) key[k++] = v[i];
  }
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && key[j - 1] > key[j]; j--) {
      int t = key[j];
      key[j] = key[j - 1], key[j - 1] = t;
    }
  for (int i = k; i < 4; i++) key[i] = key[k - 1];
}

static int compare_keys(const void *a, const void *b) { return memcmp(a, b, 4 * sizeof(int)); }

/* Every cell face is shared by two cells, or by one when it is a boundary facet, and every
 * boundary facet is a cell face. */
static void check_conforming(const fe_mesh *m)
{
  int local[6][4];
  const int nfc = cell_faces(m->type, local);
  const int nf = m->ncells * nfc;
  int(*faces)[4] = malloc((size_t)nf * sizeof *faces);
  int(*bnd)[4] = malloc(((size_t)m->nfacets + 1) * sizeof *bnd);
  for (int e = 0; e < m->ncells; e++)
    for (int f = 0; f < nfc; f++) {
      int v[4], n = 0;
      for (; n < 4 && local[f][n] >= 0; n++) v[n] = m->cells[e * m->nvc + local[f][n]];
      face_key(v, n, faces[e * nfc + f]);
    }
  for (int f = 0; f < m->nfacets; f++) face_key(m->facets + f * m->nvf, m->nvf, bnd[f]);
  qsort(faces, nf, sizeof *faces, compare_keys);
  qsort(bnd, m->nfacets, sizeof *bnd, compare_keys);
  int single = 0;
  for (int i = 0; i < nf;) {
    int j = i + 1;
    while (j < nf && !compare_keys(faces[i], faces[j])) j++;
    cr_assert(j - i == 1 || j - i == 2, "%s: a face is shared by %d cells", fe_cell_name(m->type),
              j - i);
    if (j - i == 1) {
      cr_assert_lt(single, m->nfacets, "%s: more single faces than facets", fe_cell_name(m->type));
      cr_assert_eq(compare_keys(faces[i], bnd[single]), 0,
                   "%s: a face with one cell is not a boundary facet", fe_cell_name(m->type));
      single++;
    }
    i = j;
  }
  cr_assert_eq(single, m->nfacets, "%s", fe_cell_name(m->type));
  free(faces);
  free(bnd);
}

/* How many facets carry tag id. */
static int count_tag(const fe_mesh *m, int id)
{
  int n = 0;
  for (int f = 0; f < m->nfacets; f++) n += m->facet_tags[f] == id;
  return n;
}

static const fe_cell_type all_types[5] = {FE_CELL_TRI, FE_CELL_QUAD, FE_CELL_TET, FE_CELL_HEX,
                                          FE_CELL_PRISM};

/* A box of each type: 2D ones with nz = 0. */
static fe_mesh *type_box(fe_cell_type t, double distort)
{
  return make_box(t, 3, 4, fe_cell_dim(t) == 2 ? 0 : 2, distort);
}

Test(mesh_ops, box_makes_tri_quad_and_prism_meshes)
{
  for (int i = 0; i < 5; i++)
    for (int d = 0; d < 2; d++) {
      fe_mesh *m = type_box(all_types[i], d ? 0.8 : 0.0);
      const int dim = fe_cell_dim(m->type);
      cr_assert_eq(m->dim, dim);
      cr_assert_eq(fe_mesh_check(m), 0, "%s: %s", fe_cell_name(m->type), fe_error_message());
      cr_assert_float_eq(total_volume(m), dim == 2 ? 1.0 : 3.0, 1e-12, "%s", fe_cell_name(m->type));
      check_conforming(m);
      int id;
      cr_assert_eq(fe_mesh_tag_id(m, "domain", dim, &id), 0, "%s", fe_error_message());
      cr_assert_eq(fe_mesh_tag_id(m, dim == 2 ? "ymax" : "zmax", dim - 1, &id), 0);
      if (dim == 2) {
        cr_assert_eq(m->nvf, 2);
        cr_assert_eq(count_tag(m, 1), 4); /* xmin: ny edges */
        cr_assert_eq(count_tag(m, 3), 3); /* ymin: nx edges */
        for (int v = 0; v < m->nvertices; v++) cr_assert_eq(m->coords[3 * v + 2], 0.0);
      }
      if (m->type == FE_CELL_PRISM) {
        cr_assert_eq(m->ncells, 2 * 3 * 4 * 2);
        cr_assert_eq(count_tag(m, 5), 2 * 3 * 4); /* zmin: triangles (a, b, c, c) */
        cr_assert_eq(m->facets[4 * m->nfacets - 1], m->facets[4 * m->nfacets - 2]);
        cr_assert_eq(count_tag(m, 1), 4 * 2); /* xmin: quadrilaterals */
      }
      fe_mesh_free(m);
    }
}

Test(mesh_ops, refine_keeps_volume_tags_and_conformity)
{
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = type_box(all_types[i], 0.6);
    const int dim = m->dim, per = dim == 2 ? 4 : 8, fper = dim == 2 ? 2 : 4;
    const double vol = total_volume(m);
    for (int level = 0; level < 2; level++) {
      fe_mesh *r = NULL;
      cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s: %s", fe_cell_name(m->type), fe_error_message());
      cr_assert_eq(r->ncells, per * m->ncells);
      cr_assert_eq(r->nfacets, fper * m->nfacets);
      cr_assert_eq(r->type, m->type);
      cr_assert_eq(fe_mesh_check(r), 0, "%s: %s", fe_cell_name(m->type), fe_error_message());
      cr_assert_float_eq(total_volume(r), vol, 1e-11, "%s level %d", fe_cell_name(m->type), level);
      for (int t = 1; t <= 2 * dim; t++) cr_assert_eq(count_tag(r, t), fper * count_tag(m, t));
      for (int e = 0; e < r->ncells; e++) cr_assert_eq(r->cell_tags[e], 1);
      cr_assert_eq(r->ntags, m->ntags);
      check_conforming(r);
      fe_mesh_free(m);
      m = r;
    }
    fe_mesh_free(m);
  }
}

Test(mesh_ops, refine_counts_shared_vertices)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 2, 2, 2, 0), *r = NULL;
  cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r->nvertices, 5 * 5 * 5); /* the 4 x 4 x 4 box: shared, never duplicated */
  fe_mesh_free(r);
  fe_mesh_free(m);
  m = make_box(FE_CELL_TET, 2, 2, 2, 0);
  cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r->nvertices, 5 * 5 * 5);
  fe_mesh_free(r);
  fe_mesh_free(m);
}

/* max |i - j| over vertex pairs sharing a cell. */
static int bandwidth(const fe_mesh *m)
{
  int b = 0;
  for (int e = 0; e < m->ncells; e++)
    for (int i = 0; i < m->nvc; i++)
      for (int j = 0; j < m->nvc; j++) {
        int d = abs(m->cells[e * m->nvc + i] - m->cells[e * m->nvc + j]);
        b = d > b ? d : b;
      }
  return b;
}

/* Renumber the vertices of m by a fixed pseudo-random permutation. */
static void shuffle_vertices(fe_mesh *m)
{
  int *perm = malloc(m->nvertices * sizeof(int));
  for (int v = 0; v < m->nvertices; v++) perm[v] = v;
  unsigned s = 12345;
  for (int v = m->nvertices - 1; v > 0; v--) {
    s = s * 1103515245u + 12345u;
    int w = (int)((s >> 8) % (unsigned)(v + 1)), t = perm[v];
    perm[v] = perm[w], perm[w] = t;
  }
  double *x = malloc(3 * m->nvertices * sizeof(double));
  for (int v = 0; v < m->nvertices; v++) memcpy(x + 3 * perm[v], m->coords + 3 * v, 3 * sizeof(double));
  free(m->coords);
  m->coords = x;
  for (int k = 0; k < m->ncells * m->nvc; k++) m->cells[k] = perm[m->cells[k]];
  for (int k = 0; k < m->nfacets * m->nvf; k++) m->facets[k] = perm[m->facets[k]];
  free(perm);
}

static const char *const orders[4] = {"rcm", "hilbert", "layers", "morton"};

Test(mesh_ops, reorder_rcm_shrinks_bandwidth_and_keeps_the_mesh)
{
  for (int i = 0; i < 5; i++) {
    for (int h = 0; h < 4; h++) {
      fe_mesh *m = make_box(all_types[i], 6, 5, fe_cell_dim(all_types[i]) == 2 ? 0 : 4, 0.3);
      int tags[6];
      for (int t = 0; t < 2 * m->dim; t++) tags[t] = count_tag(m, t + 1);
      const double vol = total_volume(m);
      shuffle_vertices(m);
      const int before = bandwidth(m);
      cr_assert_eq(fe_mesh_reorder(m, orders[h]), 0, "%s", fe_error_message());
      cr_assert_eq(fe_mesh_check(m), 0, "%s", fe_error_message());
      cr_assert_float_eq(total_volume(m), vol, 1e-12);
      for (int t = 0; t < 2 * m->dim; t++) cr_assert_eq(count_tag(m, t + 1), tags[t]);
      check_conforming(m);
      const int after = bandwidth(m);
      cr_assert_lt(after, before, "%s %s: bandwidth %d -> %d", fe_cell_name(m->type), orders[h],
                   before, after);
      if (!h) cr_assert_lt(2 * after, before, "rcm bandwidth %d -> %d", before, after);
      fe_mesh_free(m);
    }
  }
}

/* Two rows of 8 hexes along x (cells q and 8 + q in column q): the sweep starts at the far
 * end (x = 8), where every vertex of column q < 7 lies 7 - q cells away; so from the fourth
 * place on the layers hold the columns 5 .. 0, each column's two cells in the order asked for
 * (the two columns at the far end share layers 0 and 1, as the start vertex's row falls). */
Test(mesh_ops, layer_order_sweeps_from_the_far_end)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 8, 2, 1, 0);
  int within[16], *order = NULL;
  for (int k = 0; k < 16; k++) within[k] = 15 - k;
  for (int w = 0; w < 2; w++) {
    cr_assert_eq(fe_mesh_layer_order(m, w ? within : NULL, &order), 0, "%s", fe_error_message());
    int seen[16] = {0};
    for (int k = 0; k < 16; k++)
      cr_assert(order[k] >= 0 && order[k] < 16 && !seen[order[k]]++, "not a permutation");
    for (int k = 4; k < 16; k++) {
      const int q = 5 - (k - 4) / 2, second = (k - 4) % 2 != w;
      cr_assert_eq(order[k], q + 8 * second, "place %d: cell %d", k, order[k]);
    }
    free(order);
  }
  fe_mesh_free(m);
}

/* The cpu's threads take runs of consecutive cells, colored so that runs of one color share
 * no vertex: in layers each run touches only the runs beside it (the box's own planes do
 * too), where the runs of a Hilbert (Morton) curve are blobs that touch many. */
Test(mesh_ops, layer_order_runs_need_two_colors)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 24, 6, 6, 0.2);
  cr_assert_eq(fe_mesh_reorder(m, "hilbert"), 0, "%s", fe_error_message());
  int *color = NULL, curve = 0, layered = 0;
  cr_assert_eq(fe_mesh_color_groups(m, m->cells, m->nvc, m->ncells / 8, &color, &curve), 0, "%s",
               fe_error_message());
  free(color);
  cr_assert_eq(fe_mesh_reorder(m, "layers"), 0, "%s", fe_error_message());
  cr_assert_eq(fe_mesh_color_groups(m, m->cells, m->nvc, m->ncells / 8, &color, &layered), 0,
               "%s", fe_error_message());
  free(color);
  cr_assert_leq(layered, 2, "layers: %d colors for 8 runs", layered);
  cr_assert_lt(layered, curve, "layers %d colors, the curve's %d", layered, curve);
  check_conforming(m);
  fe_mesh_free(m);
}

/* A refined mesh numbers its vertices in the order its cells first use them (a parent's
 * vertices would otherwise keep their ids, far from its children's new ones): each cell's
 * vertices are at most one past the largest id before them. */
Test(mesh_ops, refine_numbers_vertices_by_first_use)
{
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = make_box(all_types[i], 3, 2, fe_cell_dim(all_types[i]) == 2 ? 0 : 2, 0.2), *r;
    cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
    int top = -1;
    for (int k = 0; k < r->ncells * r->nvc; k++) {
      cr_assert_leq(r->cells[k], top + 1, "%s: vertex %d before %d", fe_cell_name(r->type),
                    r->cells[k], top + 1);
      top = r->cells[k] > top ? r->cells[k] : top;
    }
    cr_assert_eq(top + 1, r->nvertices);
    cr_assert_eq(r->layered, 0, "a box's children are not in layers");
    fe_mesh_free(r);
    fe_mesh_free(m);
  }
}

/* Cells in layers stay in layers through refinement, swept from the same point: a refined
 * strip of hexes (16 columns of 2 x 2) lists its two far columns first (they share the first
 * layers), then the others column by column towards x = -1. */
Test(mesh_ops, refine_keeps_layers)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 8, 1, 1, 0), *r;
  cr_assert_eq(fe_mesh_order_layers(m, NULL), 0, "%s", fe_error_message());
  cr_assert_gt(m->layered, 0);
  const double *from = m->coords + 3 * (m->layered - 1);
  cr_assert_float_eq(from[0], 1.0, 1e-15, "the sweep starts at the far end (x = %g)", from[0]);
  cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
  cr_assert_gt(r->layered, 0);
  cr_assert(!memcmp(r->coords + 3 * (r->layered - 1), from, 3 * sizeof(double)),
            "the children are swept from another vertex");
  double last = 0.75; /* each cell's least x */
  for (int e = 0; e < r->ncells; e++) {
    double x = INFINITY;
    for (int k = 0; k < r->nvc; k++) x = fmin(x, r->coords[3 * r->cells[e * r->nvc + k]]);
    if (e < 8) {
      cr_assert_geq(x, 0.75 - 1e-15, "cell %d at x = %g among the far columns", e, x);
      continue;
    }
    cr_assert_leq(x, last + 1e-15, "cell %d at x = %g after x = %g", e, x, last);
    last = x;
  }
  fe_mesh_free(r);
  fe_mesh_free(m);
}

Test(mesh_ops, reorder_unknown_name_lists_the_names)
{
  fe_mesh *m = make_box(FE_CELL_TET, 1, 1, 1, 0);
  cr_assert_eq(fe_mesh_reorder(m, "metis"), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "'metis' (rcm, hilbert, layers, morton)"), "%s",
            fe_error_message());
  fe_mesh_free(m);
}

Test(mesh_ops, quality_is_one_for_regular_cells)
{
  static const fe_cell_type tensor[2] = {FE_CELL_QUAD, FE_CELL_HEX};
  for (int i = 0; i < 2; i++) {
    fe_mesh *m = make_box(tensor[i], 2, 2, i ? 2 : 0, 0);
    fe_mesh_quality_info q;
    cr_assert_eq(fe_mesh_quality(m, &q), 0, "%s", fe_error_message());
    cr_assert_float_eq(q.min, 1.0, 1e-12);
    cr_assert_float_eq(q.max, 1.0, 1e-12);
    fe_mesh_free(m);
  }
  /* a regular tet: the box's first tet made regular */
  fe_mesh *m = make_box(FE_CELL_TET, 1, 1, 1, 0);
  const double reg[4][3] = {{1, 1, 1}, {1, -1, -1}, {-1, 1, -1}, {-1, -1, 1}};
  m->ncells = 1;
  memcpy(m->cells, (int[]){0, 1, 2, 3}, 4 * sizeof(int));
  memcpy(m->coords, reg, sizeof reg);
  fe_mesh_quality_info q;
  if (fe_mesh_check(m)) { /* the other orientation */
    int t = m->cells[1];
    m->cells[1] = m->cells[2], m->cells[2] = t;
  }
  cr_assert_eq(fe_mesh_check(m), 0, "%s", fe_error_message());
  cr_assert_eq(fe_mesh_quality(m, &q), 0, "%s", fe_error_message());
  cr_assert_float_eq(q.min, 1.0, 1e-12);
  cr_assert_float_eq(q.volume, 8.0 / 3.0, 1e-12);
  fe_mesh_free(m);
}

Test(mesh_ops, quality_reports_worst_and_inverted_cells)
{
  fe_mesh *m = make_box(FE_CELL_HEX, 4, 4, 4, 1.0);
  fe_mesh_quality_info q;
  cr_assert_eq(fe_mesh_quality(m, &q), 0, "%s", fe_error_message());
  cr_assert(q.min > 0 && q.min < q.mean && q.mean < q.max && q.max <= 1.0 + 1e-12);
  cr_assert(q.worst_cell >= 0 && q.worst_cell < m->ncells);
  cr_assert(q.min_volume > 0 && q.min_volume < q.max_volume);
  cr_assert_float_eq(q.volume, 3.0, 1e-12);
  int *c = m->cells + 8 * 5; /* mirror cell 5 */
  int t = c[1];
  c[1] = c[3], c[3] = t, t = c[5], c[5] = c[7], c[7] = t;
  cr_assert_eq(fe_mesh_quality(m, &q), FE_ERR_MESH);
  cr_assert(strstr(fe_error_message(), "cell 5"), "%s", fe_error_message());
  cr_assert_eq(fe_mesh_refine(m, &(fe_mesh *){NULL}), FE_ERR_MESH);
  fe_mesh_free(m);
}

/* ----- cell geometry: the straight and the curved map ----- */

/* phi(x, y, z) = (x (1 + 0.2 y), y, z): quadratic, so second-order cells hold it exactly; det
 * D phi = 1 + 0.2 y, and make_box's boxes map to measure 3.15 (3D) and 1.05 (2D). */
static void phi(const double *x, double *y)
{
  y[0] = x[0] * (1 + 0.2 * x[1]), y[1] = x[1], y[2] = x[2];
}

/* type_box(t) mapped by phi as a curved mesh through fe_mesh_from_arrays: the vertices shared,
 * each cell's other nodes its own (at phi of the straight map at their reference points). */
static fe_mesh *curved_box(fe_cell_type t)
{
  static const int gmsh_types[5] = {9, 10, 11, 12, 13};
  fe_mesh *b = type_box(t, 0.3);
  int ngn;
  const double *ref = fe_mesh_geo_nodes(t, 2, &ngn);
  const size_t n = (size_t)b->nvertices + (size_t)b->ncells * (ngn - b->nvc);
  size_t *tags = malloc(n * sizeof *tags), *nodes = malloc((size_t)b->ncells * ngn * sizeof *nodes);
  double *x = malloc(3 * n * sizeof *x);
  size_t next = (size_t)b->nvertices;
  for (int v = 0; v < b->nvertices; v++) tags[v] = (size_t)v + 1, phi(b->coords + 3 * v, x + 3 * v);
  for (int e = 0; e < b->ncells; e++)
    for (int k = 0; k < ngn; k++) {
      if (k < b->nvc) {
        nodes[(size_t)e * ngn + k] = (size_t)b->cells[e * b->nvc + k] + 1;
        continue;
      }
      double p[3];
      cr_assert_eq(fe_mesh_geo_map(b, e, ref + 3 * k, p, NULL), 0, "%s", fe_error_message());
      phi(p, x + 3 * next);
      tags[next] = next + 1;
      nodes[(size_t)e * ngn + k] = ++next;
    }
  fe_mesh_block blk = {gmsh_types[t], 1, (size_t)b->ncells, nodes};
  fe_mesh_arrays a = {"curved box", n, tags, x, 1, &blk, 0, NULL};
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &m), 0, "%s: %s", fe_cell_name(t), fe_error_message());
  free(tags), free(nodes), free(x);
  fe_mesh_free(b);
  return m;
}

Test(mesh_ops, geo_shape_is_a_nodal_partition_of_unity)
{
  for (int i = 0; i < 5; i++)
    for (int order = 1; order <= 2; order++) {
      const fe_cell_type t = all_types[i];
      const int dim = fe_cell_dim(t);
      int n;
      const double *ref = fe_mesh_geo_nodes(t, order, &n);
      double N[27], dN[81], Np[27], Nm[27];
      for (int k = 0; k < n; k++) { /* N_j(node k) = delta_jk */
        cr_assert_eq(fe_mesh_geo_shape(t, order, ref + 3 * k, N, NULL), n);
        for (int j = 0; j < n; j++)
          cr_assert_float_eq(N[j], j == k, 1e-14, "%s order %d: N%d at node %d", fe_cell_name(t),
                             order, j, k);
      }
      const double xi[3] = {0.21, 0.17, t == FE_CELL_TET ? 0.3 : -0.4};
      fe_mesh_geo_shape(t, order, xi, N, dN);
      double sum = 0, dsum[3] = {0, 0, 0};
      for (int j = 0; j < n; j++) {
        sum += N[j];
        for (int d = 0; d < dim; d++) dsum[d] += dN[j * dim + d];
      }
      cr_assert_float_eq(sum, 1, 1e-14);
      for (int d = 0; d < dim; d++) {
        cr_assert_float_eq(dsum[d], 0, 1e-13);
        double xp[3] = {xi[0], xi[1], xi[2]}, xm[3] = {xi[0], xi[1], xi[2]};
        xp[d] += 1e-6, xm[d] -= 1e-6;
        fe_mesh_geo_shape(t, order, xp, Np, NULL);
        fe_mesh_geo_shape(t, order, xm, Nm, NULL);
        for (int j = 0; j < n; j++) /* the gradient is the derivative of the values */
          cr_assert_float_eq(dN[j * dim + d], (Np[j] - Nm[j]) / 2e-6, 1e-8, "%s order %d",
                             fe_cell_name(t), order);
      }
    }
  cr_assert_null(fe_mesh_geo_nodes(FE_CELL_TET, 3, NULL));
}

Test(mesh_ops, geo_map_of_straight_cells_hits_the_vertices)
{
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = type_box(all_types[i], 0.5);
    cr_assert_eq(m->geo_order, 1);
    cr_assert_eq(m->ngn, m->nvc);
    cr_assert_null(m->geo_cells);
    const double *ref = fe_mesh_geo_nodes(m->type, 1, NULL);
    for (int e = 0; e < m->ncells; e += 7)
      for (int k = 0; k < m->nvc; k++) {
        double x[3], J[9];
        cr_assert_eq(fe_mesh_geo_map(m, e, ref + 3 * k, x, J), 0);
        for (int d = 0; d < 3; d++)
          cr_assert_float_eq(x[d], m->coords[3 * m->cells[e * m->nvc + k] + d], 1e-14);
        const double det = m->dim == 2 ? J[0] * J[3] - J[1] * J[2]
                                       : J[0] * (J[4] * J[8] - J[5] * J[7]) -
                                             J[1] * (J[3] * J[8] - J[5] * J[6]) +
                                             J[2] * (J[3] * J[7] - J[4] * J[6]);
        cr_assert_gt(det, 0, "%s cell %d", fe_cell_name(m->type), e);
      }
    double x[3];
    cr_assert_eq(fe_mesh_geo_map(m, m->ncells, ref, x, NULL), FE_ERR_ARG);
    fe_mesh *r = NULL; /* refined straight meshes stay straight */
    cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
    cr_assert_eq(r->geo_order, 1);
    cr_assert_eq(r->ngn, r->nvc);
    cr_assert_null(r->geo_cells);
    fe_mesh_free(r);
    fe_mesh_free(m);
  }
}

Test(mesh_ops, curved_cells_hold_a_quadratic_map_exactly)
{
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = curved_box(all_types[i]);
    const double exact = m->dim == 2 ? 1.05 : 3.15;
    cr_assert_eq(m->geo_order, 2);
    cr_assert_float_eq(total_volume(m), exact, 1e-12, "%s", fe_cell_name(m->type));
    char buf[512];
    fe_mesh_summary(m, buf, sizeof buf);
    cr_assert(strstr(buf, "curved (order 2)"), "%s", buf);
    fe_mesh_free(m);
  }
}

Test(mesh_ops, refine_and_reorder_keep_curved_geometry)
{
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = curved_box(all_types[i]);
    const double exact = m->dim == 2 ? 1.05 : 3.15;
    const char *name = fe_cell_name(m->type);
    fe_mesh *r = NULL;
    cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s: %s", name, fe_error_message());
    cr_assert_eq(r->geo_order, 2);
    cr_assert_eq(r->ngn, m->ngn);
    cr_assert_eq(fe_mesh_check(r), 0, "%s: %s", name, fe_error_message());
    cr_assert_float_eq(total_volume(r), exact, 1e-12, "%s refined", name);
    check_conforming(r);
    /* every new vertex lies on phi's image: its preimage (x / (1 + 0.2 y), y, z) is in the box */
    for (int v = 0; v < r->nvertices; v++) {
      const double *x = r->coords + 3 * v;
      const double u = x[0] / (1 + 0.2 * x[1]);
      cr_assert(u > -1 - 1e-12 && u < 1 + 1e-12, "%s: vertex %d off the mapped box", name, v);
    }
    for (int k = 0; k < 4; k++) {
      cr_assert_eq(fe_mesh_reorder(r, orders[k]), 0, "%s", fe_error_message());
      cr_assert_eq(fe_mesh_check(r), 0, "%s: %s", name, fe_error_message());
      cr_assert_float_eq(total_volume(r), exact, 1e-12, "%s reordered", name);
    }
    fe_mesh_free(r);
    fe_mesh_free(m);
  }
}

Test(mesh_ops, curved_mesh_exports_second_order_cells)
{
  static const char *const vtk_types[5] = {"22", "28", "24", "29", "32"};
  for (int i = 0; i < 5; i++) {
    fe_mesh *m = curved_box(all_types[i]);
    double *u = malloc((size_t)m->nvertices * sizeof *u);
    for (int v = 0; v < m->nvertices; v++) { /* linear in the box, before phi */
      const double *x = m->coords + 3 * v;
      u[v] = x[0] / (1 + 0.2 * x[1]) + 2 * x[1];
    }
    double *all = NULL; /* the straight interpolant of a linear field is the field */
    cr_assert_eq(fe_mesh_geo_values(m, u, &all), 0);
    if (m->type == FE_CELL_TRI || m->type == FE_CELL_TET)
      for (int n = 0; n < m->ngeo_nodes; n++) {
        const double *x = m->geo_coords + 3 * n; /* phi moved x: undo it */
        cr_assert_float_eq(all[n], x[0] / (1 + 0.2 * x[1]) + 2 * x[1], 1e-12);
      }
    free(all);
    char path[128];
    snprintf(path, sizeof path, "/tmp/felab-curved-%d.vtu", i);
    fe_vtu_field f = {"u", u, 0};
    cr_assert_eq(fe_vtu_write(path, m, 1, &f), 0, "%s", fe_error_message());
    FILE *in = fopen(path, "r");
    char *text = calloc(1 << 22, 1);
    size_t len = fread(text, 1, (1 << 22) - 1, in);
    fclose(in);
    cr_assert_gt(len, 0);
    char want[64];
    snprintf(want, sizeof want, "NumberOfPoints=\"%d\"", m->ngeo_nodes);
    cr_assert(strstr(text, want), "%s: %s missing", fe_cell_name(m->type), want);
    snprintf(want, sizeof want, "\n          %s %s", vtk_types[i], vtk_types[i]);
    cr_assert(strstr(text, want), "%s: VTK type %s missing", fe_cell_name(m->type), vtk_types[i]);
    free(text);
    unlink(path);
    free(u);
    fe_mesh_free(m);
  }
}
