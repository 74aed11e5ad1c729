/* The .msh 4.1 reader (engine/mesh/io/msh-read.c), through which builds without the Gmsh SDK load
 * meshes: felab's own files read back (ASCII, binary in either byte order, curved), Gmsh's
 * own files read as the SDK reads them (the same felab mesh, where the SDK is built in), and
 * bad files refused with the file, the line or byte, and what was expected there. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/msh.h"

#ifdef FE_HAVE_GMSH
#include <gmshc.h>
#endif

/* ----- files ----- */

/* A temporary file name for this test process (malloc'd). */
static char *tmp_path(const char *what)
{
  char *p = malloc(256);
  snprintf(p, 256, "/tmp/felab-mshread-%d-%s.msh", (int)getpid(), what);
  return p;
}

static char *slurp(const char *path, size_t *n)
{
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)size + 1);
  cr_assert_eq(fread(s, 1, (size_t)size, f), (size_t)size);
  s[size] = 0;
  fclose(f);
  *n = (size_t)size;
  return s;
}

/* A fresh file path holding data (unlinked first: ext4 flushes a file cut to zero and
 * written again when it is closed, 1 ms each). */
static void spit(const char *path, const void *data, size_t n)
{
  unlink(path);
  FILE *f = fopen(path, "wb");
  cr_assert(f, "cannot write %s", path);
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  if (w != n) cr_assert_fail("cannot write %s", path);
  fclose(f);
}

/* path read by the reader and converted; fails the test on error. */
static fe_mesh *read_mesh(const char *path, int straight)
{
  fe_mesh_arrays a;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_msh_read(path, straight, &a), 0, "%s", fe_error_message());
  int rc = fe_mesh_from_arrays(&a, &m);
  fe_msh_arrays_free(&a);
  cr_assert_eq(rc, 0, "%s", fe_error_message());
  return m;
}

/* Reading path fails with code, a message naming the file and holding every one of want
 * (NULL-terminated); returns the message. */
static const char *read_fails(const char *path, int code, const char *want, ...)
{
  fe_mesh_arrays a;
  int rc = fe_msh_read(path, 0, &a);
  cr_assert_eq(rc, code, "%s: expected %s, got %s: %s", path, fe_error_name(code),
               fe_error_name(rc), fe_error_message());
  cr_assert_eq(a.nnodes, 0);
  cr_assert_null(a.blocks);
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, path), "the message does not name the file: %s", msg);
  va_list ap;
  va_start(ap, want);
  for (const char *w = want; w; w = va_arg(ap, const char *))
    cr_assert(strstr(msg, w), "the message lacks '%s': %s", w, msg);
  va_end(ap);
  return msg;
}

/* ----- comparing meshes ----- */

/* a and b the same mesh, number for number. */
static void same_mesh(const fe_mesh *a, const fe_mesh *b, const char *what)
{
  cr_assert_eq(a->dim, b->dim, "%s", what);
  cr_assert_eq(a->type, b->type, "%s", what);
  cr_assert_eq(a->nvertices, b->nvertices, "%s: %d and %d vertices", what, a->nvertices,
               b->nvertices);
  cr_assert_eq(a->ncells, b->ncells, "%s: %d and %d cells", what, a->ncells, b->ncells);
  cr_assert_eq(a->nfacets, b->nfacets, "%s", what);
  cr_assert_eq(a->nvf, b->nvf, "%s", what);
  cr_assert_eq(a->ntags, b->ntags, "%s", what);
  cr_assert_eq(a->geo_order, b->geo_order, "%s", what);
  cr_assert_eq(a->ngn, b->ngn, "%s", what);
  cr_assert_eq(a->ngeo_nodes, b->ngeo_nodes, "%s", what);
  cr_assert(!memcmp(a->coords, b->coords, 3 * sizeof(double) * (size_t)a->nvertices),
            "%s: coordinates differ", what);
  cr_assert(!memcmp(a->cells, b->cells, sizeof(int) * (size_t)a->ncells * a->nvc),
            "%s: cells differ", what);
  cr_assert(!memcmp(a->cell_tags, b->cell_tags, sizeof(int) * (size_t)a->ncells),
            "%s: regions differ", what);
  cr_assert(!memcmp(a->facets, b->facets, sizeof(int) * (size_t)a->nfacets * a->nvf),
            "%s: facets differ", what);
  cr_assert(!memcmp(a->facet_tags, b->facet_tags, sizeof(int) * (size_t)a->nfacets),
            "%s: facet tags differ", what);
  for (int t = 0; t < a->ntags; t++) {
    cr_assert_str_eq(a->tags[t].name, b->tags[t].name, "%s", what);
    cr_assert_eq(a->tags[t].id, b->tags[t].id, "%s", what);
    cr_assert_eq(a->tags[t].dim, b->tags[t].dim, "%s", what);
  }
  if (a->geo_order == 2) {
    cr_assert(!memcmp(a->geo_cells, b->geo_cells, sizeof(int) * (size_t)a->ncells * a->ngn),
              "%s: second-order cells differ", what);
    cr_assert(!memcmp(a->geo_coords, b->geo_coords, 3 * sizeof(double) * (size_t)a->ngeo_nodes),
              "%s: second-order nodes differ", what);
  }
}

static int record_len; /* doubles per record of sort_records */

static int record_cmp(const void *x, const void *y)
{
  const double *a = x, *b = y;
  for (int k = 0; k < record_len; k++)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

static const fe_mesh *by_coords; /* the mesh whose vertices vertex_cmp orders */

static int vertex_cmp(const void *x, const void *y)
{
  const double *a = by_coords->coords + 3 * (size_t) * (const int *)x;
  const double *b = by_coords->coords + 3 * (size_t) * (const int *)y;
  for (int d = 0; d < 3; d++)
    if (a[d] != b[d]) return a[d] < b[d] ? -1 : 1;
  return 0;
}

/* m's vertices in the order of their coordinates: rank[v] (malloc'd). */
static int *vertex_ranks(const fe_mesh *m)
{
  int *order = malloc(sizeof(int) * (size_t)m->nvertices);
  int *rank = malloc(sizeof(int) * (size_t)m->nvertices);
  for (int v = 0; v < m->nvertices; v++) order[v] = v;
  by_coords = m;
  qsort(order, (size_t)m->nvertices, sizeof *order, vertex_cmp);
  for (int v = 0; v < m->nvertices; v++) rank[order[v]] = v;
  free(order);
  return rank;
}

/* Records of m's cells (region, vertex ranks, the other geometry nodes' coordinates) or, with
 * facets, of its facets (tag, vertex ranks), sorted (malloc'd). */
static double *records(const fe_mesh *m, const int *rank, int facets, int *len)
{
  const int n = facets ? m->nfacets : m->ncells, nv = facets ? m->nvf : m->nvc;
  const int extra = facets || m->geo_order != 2 ? 0 : m->ngn - m->nvc;
  *len = 1 + nv + 3 * extra;
  double *r = malloc(sizeof(double) * (size_t)n * *len + 1);
  for (int e = 0; e < n; e++) {
    double *p = r + (size_t)e * *len;
    p[0] = facets ? m->facet_tags[e] : m->cell_tags[e];
    const int *v = (facets ? m->facets : m->cells) + (size_t)e * nv;
    for (int k = 0; k < nv; k++) p[1 + k] = rank[v[k]];
    for (int k = 0; k < extra; k++)
      memcpy(p + 1 + nv + 3 * k,
             m->geo_coords + 3 * (size_t)m->geo_cells[(size_t)e * m->ngn + m->nvc + k],
             3 * sizeof(double));
  }
  record_len = *len;
  qsort(r, (size_t)n, sizeof(double) * (size_t)*len, record_cmp);
  return r;
}

/* a and b the same mesh up to the order of their vertices, cells and facets: the same
 * coordinates, cells (each with its vertices in its order, region and second-order nodes),
 * tagged facets and named tags. */
static void same_up_to_order(const fe_mesh *a, const fe_mesh *b, const char *what)
{
  cr_assert_eq(a->dim, b->dim, "%s", what);
  cr_assert_eq(a->type, b->type, "%s", what);
  cr_assert_eq(a->nvertices, b->nvertices, "%s: %d and %d vertices", what, a->nvertices,
               b->nvertices);
  cr_assert_eq(a->ncells, b->ncells, "%s", what);
  cr_assert_eq(a->nfacets, b->nfacets, "%s: %d and %d facets", what, a->nfacets, b->nfacets);
  cr_assert_eq(a->geo_order == 2, b->geo_order == 2, "%s", what);
  int *ra = vertex_ranks(a), *rb = vertex_ranks(b);
  int *of_rank = malloc(sizeof(int) * (size_t)b->nvertices);
  for (int w = 0; w < b->nvertices; w++) of_rank[rb[w]] = w;
  for (int v = 0; v < a->nvertices; v++)
    if (memcmp(a->coords + 3 * v, b->coords + 3 * of_rank[ra[v]], 3 * sizeof(double)))
      cr_assert_fail("%s: vertex %d is not where it was", what, v);
  free(of_rank);
  for (int facets = 0; facets < 2; facets++) {
    int la, lb, n = facets ? a->nfacets : a->ncells;
    double *xa = records(a, ra, facets, &la), *xb = records(b, rb, facets, &lb);
    cr_assert_eq(la, lb);
    cr_assert(!memcmp(xa, xb, sizeof(double) * (size_t)n * la), "%s: the %s differ", what,
              facets ? "facets" : "cells");
    free(xa), free(xb);
  }
  free(ra), free(rb);
  cr_assert_eq(a->ntags, b->ntags, "%s", what);
  for (int t = 0; t < a->ntags; t++) {
    int id = -1;
    cr_assert_eq(fe_mesh_tag_id(b, a->tags[t].name, a->tags[t].dim, &id), 0, "%s: %s", what,
                 fe_error_message());
    cr_assert_eq(id, a->tags[t].id, "%s: tag %s", what, a->tags[t].name);
  }
}

static fe_mesh *box(fe_cell_type type, int nx, int ny, int nz)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = type;
  o.cells[0] = nx, o.cells[1] = ny, o.cells[2] = nz;
  fe_mesh *m = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  return m;
}

/* ----- a binary writer (felab writes ASCII), in either byte order ----- */

static void put(FILE *f, const void *p, size_t n, int swap)
{
  unsigned char b[8];
  memcpy(b, p, n);
  for (size_t i = 0; swap && i < n / 2; i++) {
    unsigned char t = b[i];
    b[i] = b[n - 1 - i], b[n - 1 - i] = t;
  }
  fwrite(b, 1, n, f);
}
static void put_int(FILE *f, int v, int swap) { put(f, &v, 4, swap); }
static void put_size(FILE *f, size_t v, int swap) { put(f, &v, 8, swap); }
static void put_double(FILE *f, double v, int swap) { put(f, &v, 8, swap); }

/* m (straight, one facet type) as a binary .msh 4.1, laid out as fe_msh_write lays it out. */
static void write_binary(const char *path, const fe_mesh *m, int swap)
{
  static const int cell_type[] = {2, 3, 4, 5, 6}, facet_type[] = {1, 1, 2, 3, 3};
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fprintf(f, "$MeshFormat\n4.1 1 8\n");
  put_int(f, 1, swap);
  fprintf(f, "\n$EndMeshFormat\n$PhysicalNames\n%d\n", m->ntags);
  for (int t = 0; t < m->ntags; t++)
    fprintf(f, "%d %d \"%s\"\n", m->tags[t].dim, m->tags[t].id, m->tags[t].name);
  fprintf(f, "$EndPhysicalNames\n$Entities\n");
  size_t counts[4] = {0, 0, 0, 0};
  for (int t = 0; t < m->ntags; t++) counts[m->tags[t].dim]++;
  for (int d = 0; d < 4; d++) put_size(f, counts[d], swap);
  for (int dim = m->dim - 1; dim <= m->dim; dim++)
    for (int t = 0; t < m->ntags; t++) {
      if (m->tags[t].dim != dim) continue;
      put_int(f, m->tags[t].id, swap);
      for (int k = 0; k < 6; k++) put_double(f, k < 3 ? 0 : 1, swap);
      put_size(f, 1, swap);
      put_int(f, m->tags[t].id, swap);
      put_size(f, 0, swap);
    }
  fprintf(f, "\n$EndEntities\n$Nodes\n");
  size_t nv = (size_t)m->nvertices;
  put_size(f, 1, swap), put_size(f, nv, swap), put_size(f, 1, swap), put_size(f, nv, swap);
  put_int(f, m->dim, swap), put_int(f, 1, swap), put_int(f, 0, swap), put_size(f, nv, swap);
  for (size_t v = 0; v < nv; v++) put_size(f, v + 1, swap);
  for (size_t k = 0; k < 3 * nv; k++) put_double(f, m->coords[k], swap);
  fprintf(f, "\n$EndNodes\n$Elements\n");
  size_t nel = (size_t)m->ncells + (size_t)m->nfacets, tag = 1;
  put_size(f, (size_t)counts[m->dim - 1] + 1, swap), put_size(f, nel, swap);
  put_size(f, 1, swap), put_size(f, nel, swap);
  put_int(f, m->dim, swap), put_int(f, 1, swap), put_int(f, cell_type[m->type], swap);
  put_size(f, (size_t)m->ncells, swap);
  for (int c = 0; c < m->ncells; c++) {
    put_size(f, tag++, swap);
    for (int k = 0; k < m->nvc; k++) put_size(f, (size_t)m->cells[c * m->nvc + k] + 1, swap);
  }
  for (int t = 0; t < m->ntags; t++) {
    if (m->tags[t].dim != m->dim - 1) continue;
    size_t count = 0;
    for (int e = 0; e < m->nfacets; e++) count += m->facet_tags[e] == m->tags[t].id;
    put_int(f, m->dim - 1, swap), put_int(f, m->tags[t].id, swap);
    put_int(f, facet_type[m->type], swap), put_size(f, count, swap);
    for (int e = 0; e < m->nfacets; e++) {
      if (m->facet_tags[e] != m->tags[t].id) continue;
      put_size(f, tag++, swap);
      for (int k = 0; k < m->nvf; k++) put_size(f, (size_t)m->facets[e * m->nvf + k] + 1, swap);
    }
  }
  fprintf(f, "\n$EndElements\n");
  fclose(f);
}

/* ----- a curved mesh without the SDK ----- */

/* Straight mesh m (tets or hexes) made second order through fe_mesh_from_arrays: each
 * cell's complete second-order nodes where its straight map puts them, shared between cells,
 * then every node moved by one smooth bend so that the cells are curved; m's tagged facets
 * stay first order, in m's groups. */
static fe_mesh *curved(const fe_mesh *m)
{
  int nn;
  const double *ref = fe_mesh_geo_nodes(m->type, 2, &nn);
  const size_t cap = (size_t)m->ncells * nn;
  double *xyz = malloc(3 * sizeof(double) * cap);
  size_t *tags = malloc(sizeof(size_t) * cap), *cells = malloc(sizeof(size_t) * cap);
  size_t *vtag = calloc((size_t)m->nvertices, sizeof(size_t)), n = 0;
  for (int c = 0; c < m->ncells; c++)
    for (int k = 0; k < nn; k++) {
      double x[3];
      if (k < m->nvc) memcpy(x, m->coords + 3 * m->cells[c * m->nvc + k], sizeof x);
      else cr_assert_eq(fe_mesh_geo_map(m, c, ref + 3 * k, x, NULL), 0);
      size_t i = 0;
      while (i < n && fabs(xyz[3 * i] - x[0]) + fabs(xyz[3 * i + 1] - x[1]) +
                              fabs(xyz[3 * i + 2] - x[2]) > 1e-12)
        i++;
      if (i == n) memcpy(xyz + 3 * n, x, sizeof x), tags[n] = 100 + 7 * n, n++;
      cells[(size_t)c * nn + k] = tags[i];
      if (k < m->nvc) vtag[m->cells[c * m->nvc + k]] = tags[i];
    }
  for (size_t i = 0; i < n; i++) { /* the bend */
    double *x = xyz + 3 * i;
    x[0] += 0.1 * x[1] * x[1];
    x[2] += 0.05 * x[0] * x[1];
  }
  fe_mesh_block blocks[8];
  fe_mesh_group groups[8];
  int ids[8];
  size_t *facets = malloc(sizeof(size_t) * (size_t)m->nfacets * m->nvf + 1), nf = 0;
  int nb = 0, ng = 0;
  blocks[nb++] = (fe_mesh_block){m->type == FE_CELL_TET ? 11 : 12, 1, (size_t)m->ncells, cells};
  for (int t = 0; t < m->ntags; t++) {
    ids[ng] = m->tags[t].id;
    groups[ng] = (fe_mesh_group){m->tags[t].dim, m->tags[t].id, m->tags[t].name, 1, &ids[ng]};
    ng++;
    if (m->tags[t].dim != m->dim - 1) continue;
    size_t *start = facets + nf * m->nvf, count = 0;
    for (int e = 0; e < m->nfacets; e++)
      if (m->facet_tags[e] == m->tags[t].id) {
        for (int k = 0; k < m->nvf; k++) facets[nf * m->nvf + k] = vtag[m->facets[e * m->nvf + k]];
        nf++, count++;
      }
    blocks[nb++] = (fe_mesh_block){m->type == FE_CELL_TET ? 2 : 3, m->tags[t].id, count, start};
  }
  fe_mesh_arrays a = {"curved", n, tags, xyz, (size_t)nb, blocks, (size_t)ng, groups};
  fe_mesh *c = NULL;
  cr_assert_eq(fe_mesh_from_arrays(&a, &c), 0, "%s", fe_error_message());
  cr_assert_eq(c->geo_order, 2);
  free(xyz), free(tags), free(cells), free(vtag), free(facets);
  return c;
}

/* ----- felab's own files ----- */

Test(msh_read, boxes_of_every_cell_type_read_back)
{
  static const struct { fe_cell_type type; int n[3]; } cases[] = {
      {FE_CELL_HEX, {3, 2, 2}}, {FE_CELL_TET, {2, 2, 3}}, {FE_CELL_PRISM, {2, 2, 2}},
      {FE_CELL_QUAD, {3, 2, 0}}, {FE_CELL_TRI, {2, 3, 0}}};
  char *path = tmp_path("box");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fe_mesh *m = box(cases[i].type, cases[i].n[0], cases[i].n[1], cases[i].n[2]);
    /* a view ($NodeData) and a $Periodic section are skipped */
    double *u = calloc((size_t)m->nvertices, sizeof *u);
    fe_msh_view view = {"u", u};
    cr_assert_eq(fe_msh_write(path, m, 1, &view), 0, "%s", fe_error_message());
    free(u);
    FILE *f = fopen(path, "a");
    fprintf(f, "$Periodic\n1\n2 1 2\n$EndPeriodic\n");
    fclose(f);
    fe_mesh *r = read_mesh(path, 0);
    same_up_to_order(m, r, fe_cell_name(cases[i].type));
    int id;
    cr_assert_eq(fe_mesh_tag_id(r, "xmax", r->dim - 1, &id), 0);
    cr_assert_eq(id, 2);
    cr_assert_eq(fe_mesh_tag_id(r, "domain", r->dim, &id), 0);
#ifdef FE_HAVE_GMSH
    fe_mesh *s = NULL;
    cr_assert_eq(fe_mesh_load(path, NULL, &s), 0, "%s", fe_error_message());
    same_mesh(s, r, fe_cell_name(cases[i].type));
    fe_mesh_free(s);
#endif
    fe_mesh_free(m), fe_mesh_free(r);
  }
  unlink(path);
  free(path);
}

Test(msh_read, binary_in_either_byte_order_reads_as_ascii)
{
  char *ascii = tmp_path("ascii"), *bin = tmp_path("bin"), *swapped = tmp_path("swapped");
  for (int type = FE_CELL_TET; type <= FE_CELL_HEX; type++) {
    fe_mesh *m = box((fe_cell_type)type, 2, 3, 2);
    cr_assert_eq(fe_msh_write(ascii, m, 0, NULL), 0);
    write_binary(bin, m, 0);
    write_binary(swapped, m, 1);
    fe_mesh *a = read_mesh(ascii, 0), *b = read_mesh(bin, 0), *s = read_mesh(swapped, 0);
    same_mesh(a, b, "binary");
    same_mesh(a, s, "binary in the other byte order");
    fe_mesh_free(m), fe_mesh_free(a), fe_mesh_free(b), fe_mesh_free(s);
  }
  unlink(ascii), unlink(bin), unlink(swapped);
  free(ascii), free(bin), free(swapped);
}

Test(msh_read, curved_meshes_read_back_curved_or_straight)
{
  char *path = tmp_path("curved");
  for (int type = FE_CELL_TET; type <= FE_CELL_HEX; type++) {
    fe_mesh *m = box((fe_cell_type)type, 2, 2, 1), *c = curved(m);
    cr_assert_eq(fe_msh_write(path, c, 0, NULL), 0, "%s", fe_error_message());
    fe_mesh *r = read_mesh(path, 0), *flat = read_mesh(path, 1);
    cr_assert_eq(r->ngn, type == FE_CELL_TET ? 10 : 27);
    same_up_to_order(c, r, "curved");
    cr_assert_eq(flat->geo_order, 1);
    cr_assert_null(flat->geo_cells);
    cr_assert_eq(flat->nvertices, c->nvertices);
    cr_assert_eq(flat->nfacets, c->nfacets);
#ifdef FE_HAVE_GMSH
    fe_load_opts o;
    fe_load_opts_default(&o);
    fe_mesh *s = NULL;
    o.order = 2;
    cr_assert_eq(fe_mesh_load(path, &o, &s), 0, "%s", fe_error_message());
    same_mesh(s, r, "curved, the SDK and the reader");
    fe_mesh_free(s);
    o.order = 1;
    cr_assert_eq(fe_mesh_load(path, &o, &s), 0, "%s", fe_error_message());
    same_mesh(s, flat, "curved read straight, the SDK and the reader");
    fe_mesh_free(s);
#endif
    fe_mesh_free(m), fe_mesh_free(c), fe_mesh_free(r), fe_mesh_free(flat);
  }
  unlink(path);
  free(path);
}

/* ----- Gmsh's own files, against the SDK ----- */

#ifdef FE_HAVE_GMSH
/* Mesh geo with Gmsh (mesh size size, order), write it as .msh 4.1 to path. */
static void gmsh_write(const char *geo, double size, int order, int binary, const char *path)
{
  int ierr = 0;
  gmshInitialize(0, NULL, 0, &ierr);
  gmshOptionSetNumber("General.Terminal", 0, &ierr);
  gmshOpen(geo, &ierr);
  cr_assert_eq(ierr, 0, "gmsh could not open %s", geo);
  if (size > 0) {
    gmshOptionSetNumber("Mesh.MeshSizeFromPoints", 0, &ierr);
    gmshOptionSetNumber("Mesh.MeshSizeMax", size, &ierr);
  }
  gmshModelMeshGenerate(gmshModelGetDimension(&ierr), &ierr);
  cr_assert_eq(ierr, 0, "gmsh could not mesh %s", geo);
  if (order == 2) gmshModelMeshSetOrder(2, &ierr);
  gmshOptionSetNumber("Mesh.MshFileVersion", 4.1, &ierr);
  gmshOptionSetNumber("Mesh.Binary", binary, &ierr);
  gmshWrite(path, &ierr);
  cr_assert_eq(ierr, 0, "gmsh could not write %s", path);
  gmshFinalize(&ierr);
}

/* path loaded through the SDK and through the reader: the same mesh, at either order. */
static void sdk_and_reader_agree(const char *path, int order)
{
  fe_load_opts o;
  fe_load_opts_default(&o);
  o.order = order;
  fe_mesh *s = NULL;
  cr_assert_eq(fe_mesh_load(path, &o, &s), 0, "%s", fe_error_message());
  fe_mesh *r = read_mesh(path, order == 1);
  char what[300];
  snprintf(what, sizeof what, "%s at order %d", path, order);
  same_mesh(s, r, what);
  fe_mesh_free(s), fe_mesh_free(r);
}
#endif

Test(msh_read, gmsh_files_read_as_the_sdk_reads_them)
{
#ifndef FE_HAVE_GMSH
  cr_skip_test("built without the Gmsh SDK");
#else
  sdk_and_reader_agree("meshes/cube_v41.msh", 1); /* binary, written by Gmsh */
  static const struct { const char *geo; double size; int order, binary; } cases[] = {
      {"meshes/shell_hex.geo", 0, 1, 0},  {"meshes/shell_hex.geo", 0, 2, 1},
      {"meshes/torso.geo", 0.35, 1, 0},   {"meshes/sphere.geo", 0.5, 2, 1},
      {"meshes/plate_hole.geo", 0.3, 2, 0}, {"meshes/lshape.geo", 0.3, 1, 1}};
  char *path = tmp_path("gmsh");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    gmsh_write(cases[i].geo, cases[i].size, cases[i].order, cases[i].binary, path);
    sdk_and_reader_agree(path, cases[i].order);
    if (cases[i].order == 2) sdk_and_reader_agree(path, 1);
  }
  unlink(path);
  free(path);
#endif
}

/* ----- bad files ----- */

Test(msh_read, msh22_is_refused_with_how_to_save_41)
{
  read_fails("meshes/cube_v2.msh", FE_ERR_UNAVAILABLE, "line 2",
             "MSH 2.2 is not read without the Gmsh SDK; save as 4.1", NULL);
}

Test(msh_read, unknown_element_type_names_the_type_and_line)
{
  fe_mesh *m = box(FE_CELL_HEX, 1, 1, 1);
  char *path = tmp_path("type");
  cr_assert_eq(fe_msh_write(path, m, 0, NULL), 0);
  size_t n;
  char *s = slurp(path, &n);
  char *block = strstr(s, "\n3 1 5 1\n"); /* the hex block's header: dim 3, entity 1, type 5 */
  cr_assert(block);
  int line = 2;
  for (char *p = s; p < block; p++) line += *p == '\n';
  memcpy(block, "\n3 1 0 1\n", 9);
  spit(path, s, n);
  char where[32];
  snprintf(where, sizeof where, "line %d", line);
  read_fails(path, FE_ERR_MESH, where, "unknown element type 0", NULL);
  free(s);
  unlink(path);
  free(path);
  fe_mesh_free(m);
}

/* Every cut of the file before the end of $EndElements is an error naming the file and the
 * line or byte; none crashes or leaks (ASan). */
static void every_cut_fails(const char *path, const char *where)
{
  size_t n;
  char *s = slurp(path, &n), *cut = tmp_path("cut");
  const char *end = NULL;
  for (size_t i = 0; i + 12 <= n; i++)
    if (!memcmp(s + i, "$EndElements", 12)) end = s + i + 12;
  cr_assert(end);
  for (size_t k = 0; k < (size_t)(end - s); k++) {
    spit(cut, s, k);
    fe_mesh_arrays a;
    if (!fe_msh_read(cut, 0, &a)) cr_assert_fail("a cut after %zu of %zu bytes was read", k, n);
    if (!strstr(fe_error_message(), cut) || !strstr(fe_error_message(), where))
      cr_assert_fail("cut at %zu: %s", k, fe_error_message()); /* (cr_assert costs 1 ms) */
  }
  spit(cut, s, (size_t)(end - s));
  fe_mesh_free(read_mesh(cut, 0));
  unlink(cut);
  free(cut);
  free(s);
}

Test(msh_read, truncated_files_name_the_line_or_byte)
{
  fe_mesh *m = box(FE_CELL_HEX, 1, 1, 1);
  char *path = tmp_path("whole");
  cr_assert_eq(fe_msh_write(path, m, 0, NULL), 0);
  every_cut_fails(path, ": line ");
  write_binary(path, m, 0);
  every_cut_fails(path, ": "); /* ASCII lines up to $Entities, then bytes */
  /* a binary cut inside the nodes' coordinates: their count (the header's 2nd number) no
   * longer fits, said at the header's last number */
  size_t n;
  char *s = slurp(path, &n);
  const char *nodes = memmem(s, n, "$Nodes\n", 7);
  size_t at = (size_t)(nodes - s) + 7 + 4 * 8 + 20 + 8 * 8 + 12;
  spit(path, s, at);
  char where[64];
  snprintf(where, sizeof where, "byte %zu ($Nodes): 8 nodes do not fit",
           (size_t)(nodes - s) + 7 + 3 * 8);
  read_fails(path, FE_ERR_IO, where, "truncated", NULL);
  free(s);
  unlink(path);
  free(path);
  fe_mesh_free(m);
}

/* The hex box's file with the first `from` replaced by `to`, read: fails with code and want
 * (at want_line when positive). */
static void edit_fails(const char *from, const char *to, int code, const char *want,
                       int want_line)
{
  fe_mesh *m = box(FE_CELL_HEX, 1, 1, 1);
  char *path = tmp_path("edit");
  cr_assert_eq(fe_msh_write(path, m, 0, NULL), 0);
  size_t n;
  char *s = slurp(path, &n), *at = strstr(s, from);
  cr_assert(at, "no '%s' in the file", from);
  size_t nf = strlen(from), nt = strlen(to);
  char *t = malloc(n - nf + nt + 1);
  memcpy(t, s, (size_t)(at - s));
  memcpy(t + (at - s), to, nt);
  memcpy(t + (at - s) + nt, at + nf, n - (size_t)(at - s) - nf);
  spit(path, t, n - nf + nt);
  char where[32] = "";
  if (want_line > 0) snprintf(where, sizeof where, "line %d", want_line);
  read_fails(path, code, want, where, NULL);
  free(s), free(t);
  unlink(path);
  free(path);
  fe_mesh_free(m);
}

Test(msh_read, malformed_files_say_what_was_expected)
{
  /* lines of the hex box's file: 1-3 $MeshFormat, 4-13 $PhysicalNames (7 names), 14-23
   * $Entities, 24 $Nodes, 25 its header, 26 the block's, 27-34 tags, 35-42 coordinates, 43
   * $EndNodes, 44 $Elements, 45 its header, 46 the hex block's header, 47 the hex */
  edit_fails("$MeshFormat", "$Mesh", FE_ERR_IO, "expected $MeshFormat, found '$Mesh'", 1);
  edit_fails("4.1 0 8", "4.1 0 4", FE_ERR_IO, "data size 4", 2);
  edit_fails("4.1 0 8", "4.1 2 8", FE_ERR_IO, "file type 2", 2);
  edit_fails("4.1 0 8", "4.0 0 8", FE_ERR_UNAVAILABLE, "MSH 4.0 is not read", 2);
  edit_fails("4.1 0 8", "four 0 8", FE_ERR_IO, "expected the MSH version (4.1), found 'four'", 2);
  edit_fails("\"xmin\"", "\"xmin", FE_ERR_IO, "no closing quote", 6);
  edit_fails("0 0 6 1\n", "0 0 6\n", FE_ERR_IO,
             "the line ends where the number of volumes was expected", 15);
  edit_fails("$Nodes\n1 8 1 8", "$Nodes\n1 9 1 8", FE_ERR_IO,
             "the blocks hold 8 nodes, the section announces 9", 25);
  edit_fails("$Nodes\n1 8 1 8", "$Nodes\n1 x 1 8", FE_ERR_IO,
             "expected the number of nodes, found 'x'", 25);
  edit_fails("$Nodes\n1 8 1 8", "$Nodes\n1 -8 1 8", FE_ERR_IO,
             "expected the number of nodes, found '-8'", 25);
  edit_fails("$Nodes\n1 8 1 8", "$Nodes\n1 80000 1 8", FE_ERR_IO, "80000 nodes do not fit", 25);
  edit_fails("\n1 0 0\n", "\n1 0\n", FE_ERR_IO,
             "the line ends where a node's z coordinate was expected", 36);
  edit_fails("\n1 0 0\n", "\n1 0 0 7\n", FE_ERR_IO,
             "expected the end of the line after a node's coordinates, found '7'", 36);
  edit_fails("\n1 0 0\n", "\n1 0 0.5.5\n", FE_ERR_IO,
             "expected a node's z coordinate, found '0.5.5'", 36);
  edit_fails("$EndNodes", "$EndNode", FE_ERR_IO, "expected $EndNodes, found '$EndNode'", 43);
  edit_fails("$Elements\n7 7", "$Elements\n7 8", FE_ERR_IO,
             "the blocks hold 7 elements, the section announces 8", 45);
  edit_fails("\n1 1 2 4 3 5 6 8 7\n", "\n1 1 2 4 3 5 6 8\n", FE_ERR_IO,
             "the line ends where a node tag (a hex has 8) was expected", 47);
  edit_fails("\n1 1 2 4 3 5 6 8 7\n", "\n1 1 2 4 3 5 6 8 7 9\n", FE_ERR_IO,
             "expected the end of the line after the 8 node tags of a hex, found '9'", 47);
  edit_fails("\n3 1 5 1\n", "\n2 1 5 1\n", FE_ERR_IO,
             "hex elements on an entity of dimension 2", 46);
  edit_fails("\n3 1 5 1\n", "\n3 1 5 8\n", FE_ERR_IO,
             "the blocks hold more elements than the section announces", 46);
  edit_fails("$Elements\n7 7", "$Elements\n7 99999999999", FE_ERR_IO,
             "99999999999 elements do not fit", 45);
  edit_fails("$Entities", "$PartitionedEntities\n$EndPartitionedEntities\n$Entities",
             FE_ERR_UNAVAILABLE, "a partitioned mesh", 14);
  edit_fails("$Nodes", "$Nodes\n1 8 1 8\n3 1 0 8\n$EndNodes\n$Nodes", FE_ERR_IO,
             "expected a node tag, found '$EndNodes'", 27);
  edit_fails("$Elements", "$Foo\n", FE_ERR_IO, "the file ends where $EndFoo was expected", 0);
  edit_fails("$Elements", "junk\n$Elements", FE_ERR_IO,
             "expected a section ($Nodes, $Elements, ...), found 'junk'", 44);
  edit_fails("$Elements", "$EndEntities\n$Elements", FE_ERR_IO, "$EndEntities out of place", 44);
}

Test(msh_read, missing_sections_and_files_are_errors)
{
  char *path = tmp_path("missing");
  static const char only_format[] = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n";
  spit(path, only_format, sizeof only_format - 1);
  read_fails(path, FE_ERR_IO, "line 4", "the file ends without a $Nodes section", NULL);
  spit(path, "", 0);
  read_fails(path, FE_ERR_IO, "line 1", "the file ends where $MeshFormat was expected", NULL);
  spit(path, "\x7f" "ELF\x02\x01", 6);
  read_fails(path, FE_ERR_IO, "this is not a .msh file", NULL);
  static const char swapped_one[] = "$MeshFormat\n4.1 1 8\n\x02\0\0\0\n$EndMeshFormat\n";
  spit(path, swapped_one, sizeof swapped_one - 1);
  read_fails(path, FE_ERR_IO, "byte 20", "expected the int 1 that gives the byte order, found 2",
             NULL);
  unlink(path);
  read_fails(path, FE_ERR_IO, "cannot open mesh file", NULL);
  read_fails("meshes", FE_ERR_IO, "not a regular file", NULL);
  free(path);
}

/* Bytes of a good file changed at random (a fixed sequence): each read is a mesh or an
 * error naming the file, never a crash or a leak (ASan). */
Test(msh_read, damaged_files_are_a_mesh_or_an_error)
{
  static const char bytes[] = "0123456789 \n-.e$\"x\xff\0";
  fe_mesh *m = box(FE_CELL_TET, 2, 1, 1);
  char *path = tmp_path("good"), *bad = tmp_path("damaged");
  for (int binary = 0; binary < 2; binary++) {
    if (binary) write_binary(path, m, 0);
    else cr_assert_eq(fe_msh_write(path, m, 0, NULL), 0);
    size_t n;
    char *s = slurp(path, &n);
    unsigned long long h = 88172645463325252ULL;
    for (int trial = 0; trial < 400; trial++) {
      char *t = malloc(n);
      memcpy(t, s, n);
      for (int k = 0; k < 1 + trial % 3; k++) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        t[h % n] = bytes[(h >> 32) % (sizeof bytes - 1)];
      }
      spit(bad, t, n);
      fe_mesh_arrays a;
      if (!fe_msh_read(bad, 0, &a)) {
        fe_mesh *r = NULL;
        if (!fe_mesh_from_arrays(&a, &r)) fe_mesh_free(r);
        fe_msh_arrays_free(&a);
      } else if (!strstr(fe_error_message(), bad)) { /* (a passing cr_assert costs 1 ms) */
        cr_assert_fail("%s", fe_error_message());
      }
      free(t);
    }
    free(s);
  }
  unlink(path), unlink(bad);
  free(path), free(bad);
  fe_mesh_free(m);
}

/* ----- mesh.load without the SDK ----- */

Test(msh_read, load_without_the_sdk_reads_msh_files)
{
#ifdef FE_HAVE_GMSH
  cr_skip_test("built with the Gmsh SDK: mesh.load reads through it");
#else
  fe_mesh *m = box(FE_CELL_HEX, 2, 2, 2), *l = NULL;
  char *path = tmp_path("load");
  cr_assert_eq(fe_msh_write(path, m, 0, NULL), 0);
  cr_assert_eq(fe_mesh_load(path, NULL, &l), 0, "%s", fe_error_message());
  same_up_to_order(m, l, "mesh.load");
  fe_mesh_free(l);
  fe_load_opts o;
  fe_load_opts_default(&o);
  o.order = 2;
  cr_assert_eq(fe_mesh_load(path, &o, &l), FE_ERR_UNAVAILABLE);
  cr_assert(strstr(fe_error_message(), "order = 2 of a first-order mesh needs the Gmsh SDK"),
            "%s", fe_error_message());
  cr_assert_eq(fe_mesh_load("meshes/cube.geo", NULL, &l), FE_ERR_UNAVAILABLE);
  cr_assert(strstr(fe_error_message(), "needs the Gmsh SDK"), "%s", fe_error_message());
  cr_assert_eq(fe_mesh_load("meshes/cube_v41.msh", NULL, &l), 0, "%s", fe_error_message());
  cr_assert_eq(l->ncells, 1125);
  fe_mesh_free(l);
  unlink(path);
  free(path);
  fe_mesh_free(m);
#endif
}
