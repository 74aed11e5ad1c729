/* felab .msh 4.1 reader, written by hand so that a felab built without the Gmsh SDK (make
 * gpu) loads Gmsh's meshes. It fills the arrays that fe_mesh_from_arrays takes, as the SDK
 * path does, so that both share every step of the conversion, and fills them in the SDK's
 * order, so that both give the same mesh.
 *
 * The format (Gmsh's manual, "MSH file format"): sections $Name ... $EndName.
 *   $MeshFormat     "4.1 0 8" (ASCII), or "4.1 1 8" and then the int 1 in binary (byte order)
 *   $PhysicalNames  dim tag "name", one a line, ASCII in binary files too
 *   $Entities       points, curves, surfaces, volumes: tag, box, physical tags, boundary
 *   $Nodes          blocks per entity: the node tags, then their coordinates
 *   $Elements       blocks per entity and type: each element's tag and node tags
 * A binary section holds the same numbers: counts and tags of nodes and elements as 8-byte
 * size_t, entity tags, dimensions and types as 4-byte int, coordinates as doubles. Other
 * sections are skipped; a partitioned file is refused. Every count is held against the bytes
 * left in the file before anything is allocated, and every error names the file, the line
 * (ASCII) or byte offset (binary), and what was expected there. The stream and its numbers
 * are in msh-stream.c. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/error.h"
#include "engine/mesh/io/msh.h"
#include "engine/core/progress.h"
#include "engine/mesh/io/msh-read-private.h"

_Static_assert(sizeof(size_t) == 8, "the reader takes .msh sizes (8 bytes) as size_t");

/* ----- what the sections give ----- */

typedef struct msh_span { /* a node block */
  int dim, tag;
  size_t start, n;
} msh_span;

typedef struct msh_block { /* an element block, with the keys of the SDK's order */
  int dim, tag;
  size_t seq;
  fe_mesh_block b; /* b.nodes: malloc'd */
} msh_block;

typedef struct msh_name {
  int dim, tag;
  char *name;
} msh_name;

typedef struct msh_member { /* entity (dim, entity) is in physical group (dim, group) */
  int dim, group, entity;
} msh_member;

typedef struct msh_data {
  size_t nnodes;
  size_t *node_tags;
  double *coords;
  msh_block *blocks;
  size_t nblocks;
  msh_name *names;
  size_t nnames;
  msh_member *members;
  size_t nmembers, cap_members;
  int seen_names, seen_entities, seen_nodes, seen_elements;
} msh_data;

static void data_free(msh_data *d)
{
  free(d->node_tags);
  free(d->coords);
  for (size_t b = 0; b < d->nblocks; b++) free((void *)d->blocks[b].b.nodes);
  free(d->blocks);
  for (size_t i = 0; i < d->nnames; i++) free(d->names[i].name);
  free(d->names);
  free(d->members);
  memset(d, 0, sizeof *d);
}

/* $MeshFormat: version 4.1, file type, data size 8, and in binary the byte order. */
static int read_format(msh_in *in)
{
  in->section = "$MeshFormat";
  char version[32];
  int c = msh_skip_blanks(in, 0);
  if (c == EOF) return msh_ended(in, "the MSH version (4.1)");
  msh_word(in, version, sizeof version);
  if (strcmp(version, "4.1")) {
    char *end;
    strtod(version, &end);
    if (end != version && !*end)
      FAIL(in, FE_ERR_UNAVAILABLE,
           "MSH %s is not read without the Gmsh SDK; save as 4.1 (gmsh FILE -save -format "
           "msh41 -o NEW.msh, or Mesh.MshFileVersion = 4.1): any other version needs the "
           "Gmsh SDK",
           version);
    FAIL(in, FE_ERR_IO, "expected the MSH version (4.1), found '%s'", version);
  }
  int type, size;
  FE_CHECK(msh_ascii_int(in, 1, &type, "the file type (0 ASCII, 1 binary)"));
  if (type != 0 && type != 1)
    FAIL(in, FE_ERR_IO, "file type %d: expected 0 (ASCII) or 1 (binary)", type);
  FE_CHECK(msh_ascii_int(in, 1, &size, "the data size (8)"));
  if (size != 8)
    FAIL(in, FE_ERR_IO, "data size %d: felab reads .msh files whose sizes are 8 bytes", size);
  FE_CHECK(msh_ascii_end_line(in, "the data size"));
  if (type == 1) {
    in->binary = 1;
    uint32_t one;
    FE_CHECK(msh_raw(in, &one, 4, "the int 1 that gives the byte order"));
    if (one != 1 && __builtin_bswap32(one) != 1)
      FAIL(in, FE_ERR_IO, "expected the int 1 that gives the byte order, found %u", one);
    in->swap = one != 1;
  }
  return msh_section_end(in, "MeshFormat");
}

/* $PhysicalNames (ASCII in binary files too): the count, then dim tag "name" a line. */
static int read_names(msh_in *in, msh_data *d)
{
  in->section = "$PhysicalNames";
  size_t n;
  FE_CHECK(msh_ascii_size(in, 0, &n, "the number of physical names"));
  FE_CHECK(msh_ascii_end_line(in, "the number of physical names"));
  FE_CHECK(msh_check_count(in, n, 8, "physical names"));
  FE_CALLOC(d->names, n + 1, "physical names");
  char name[1024];
  for (size_t i = 0; i < n; i++) {
    msh_name *p = &d->names[i];
    FE_CHECK(msh_ascii_int(in, 0, &p->dim, "the dimension of a physical name"));
    FE_CHECK(msh_ascii_int(in, 1, &p->tag, "the tag of a physical name"));
    int c = msh_skip_blanks(in, 1);
    if (c != '"') return msh_unexpected(in, c, "", "a quoted name (\"inlet\")");
    msh_next(in);
    size_t k = 0;
    while ((c = msh_next(in)) != '"') {
      if (c == EOF || c == '\n') FAIL(in, FE_ERR_IO, "the name has no closing quote");
      if (k + 1 == sizeof name)
        FAIL(in, FE_ERR_IO, "a name longer than %zu characters", sizeof name - 1);
      name[k++] = (char)c;
    }
    name[k] = 0;
    FE_CHECK(msh_ascii_end_line(in, "a physical name"));
    p->name = strdup(name);
    FE_ASSERT(p->name, FE_ERR_MEM, "out of memory for the physical names");
    d->nnames = i + 1;
  }
  return msh_section_end(in, "PhysicalNames");
}

static int add_member(msh_data *d, int dim, int group, int entity)
{
  if (d->nmembers == d->cap_members) {
    size_t cap = d->cap_members ? 2 * d->cap_members : 64;
    msh_member *q = realloc(d->members, cap * sizeof *q);
    FE_ASSERT(q, FE_ERR_MEM, "out of memory for the physical groups");
    d->members = q, d->cap_members = cap;
  }
  d->members[d->nmembers++] = (msh_member){dim, group, entity};
  return 0;
}

/* $Entities: the physical groups of every point, curve, surface and volume. */
static int read_entities(msh_in *in, msh_data *d)
{
  static const char *const count_of[4] = {"the number of points", "the number of curves",
                                          "the number of surfaces", "the number of volumes"};
  in->section = "$Entities";
  size_t count[4];
  for (int dim = 0; dim < 4; dim++) FE_CHECK(msh_get_size(in, dim > 0, &count[dim], count_of[dim]));
  FE_CHECK(msh_end_line(in, "the numbers of entities"));
  for (int dim = 0; dim < 4; dim++) {
    /* tag, 3 or 6 coordinates, the physical tags' count, [the boundary's count] */
    FE_CHECK(msh_check_count(in, count[dim], in->binary ? (dim ? 68 : 36) : (dim ? 17 : 9),
                         "entities"));
    for (size_t i = 0; i < count[dim]; i++) {
      int tag;
      double x;
      size_t n;
      FE_CHECK(msh_get_int(in, 0, &tag, "an entity tag"));
      for (int k = 0; k < (dim ? 6 : 3); k++)
        FE_CHECK(msh_get_double(in, 1, &x, dim ? "a bounding box coordinate" : "a coordinate"));
      FE_CHECK(msh_get_size(in, 1, &n, "the number of physical tags"));
      FE_CHECK(msh_check_count(in, n, in->binary ? 4 : 2, "physical tags"));
      for (size_t k = 0; k < n; k++) {
        int group;
        FE_CHECK(msh_get_int(in, 1, &group, "a physical tag"));
        FE_CHECK(add_member(d, dim, group, tag));
      }
      if (dim) {
        FE_CHECK(msh_get_size(in, 1, &n, "the number of bounding entities"));
        FE_CHECK(msh_check_count(in, n, in->binary ? 4 : 2, "bounding entities"));
        for (size_t k = 0; k < n; k++) FE_CHECK(msh_get_int(in, 1, &tag, "a bounding entity tag"));
      }
      FE_CHECK(msh_end_line(in, "an entity"));
    }
  }
  return msh_section_end(in, "Entities");
}

static int span_cmp(const void *a, const void *b)
{
  const msh_span *x = a, *y = b;
  if (x->dim != y->dim) return x->dim < y->dim ? -1 : 1;
  if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* The nodes in the order of their entities (dimension, then tag), as the SDK gives them. */
static int sort_nodes(msh_data *d, msh_span *spans, size_t nspans)
{
  int sorted = 1;
  for (size_t s = 1; s < nspans; s++) sorted &= span_cmp(&spans[s - 1], &spans[s]) <= 0;
  if (sorted) return 0;
  qsort(spans, nspans, sizeof *spans, span_cmp);
  size_t *tags;
  double *xyz;
  FE_MALLOC(tags, d->nnodes + 1, "node tags");
  xyz = fe_malloc((3 * d->nnodes + 1) * sizeof *xyz, "node coordinates");
  if (!xyz) {
    free(tags);
    return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);
  }
  for (size_t s = 0, at = 0; s < nspans; at += spans[s].n, s++) {
    memcpy(tags + at, d->node_tags + spans[s].start, spans[s].n * sizeof *tags);
    memcpy(xyz + 3 * at, d->coords + 3 * spans[s].start, 3 * spans[s].n * sizeof *xyz);
  }
  free(d->node_tags), free(d->coords);
  d->node_tags = tags, d->coords = xyz;
  return 0;
}

/* The blocks of $Nodes into d, spans[b] for block b. */
static int read_node_blocks(msh_in *in, msh_data *d, msh_span *spans, size_t nblocks,
                            long long line, long long byte)
{
  size_t at = 0;
  for (size_t b = 0; b < nblocks; b++) {
    int dim, tag, param;
    size_t n;
    FE_CHECK(msh_get_int(in, 0, &dim, "the entity dimension of a node block"));
    if (dim < 0 || dim > 3) FAIL(in, FE_ERR_IO, "entity dimension %d: expected 0 to 3", dim);
    FE_CHECK(msh_get_int(in, 1, &tag, "the entity tag of a node block"));
    FE_CHECK(msh_get_int(in, 1, &param, "whether the nodes are parametric (0 or 1)"));
    if (param != 0 && param != 1) FAIL(in, FE_ERR_IO, "parametric %d: expected 0 or 1", param);
    FE_CHECK(msh_get_size(in, 1, &n, "the number of nodes in the block"));
      if (n > d->nnodes - at)
      FAIL(in, FE_ERR_IO, "the blocks hold more nodes than the %zu the section announces",
           d->nnodes);
    FE_CHECK(msh_end_line(in, "a node block's header"));
    for (size_t i = 0; i < n; i++) {
      FE_CHECK(msh_get_size(in, 0, &d->node_tags[at + i], "a node tag"));
      FE_CHECK(msh_tick(in));
    }
    for (size_t i = 0; i < n; i++) {
      double *x = d->coords + 3 * (at + i), u;
      FE_CHECK(msh_get_double(in, 0, &x[0], "a node's x coordinate"));
      FE_CHECK(msh_get_double(in, 1, &x[1], "a node's y coordinate"));
      FE_CHECK(msh_get_double(in, 1, &x[2], "a node's z coordinate"));
      for (int k = 0; k < param * dim; k++)
        FE_CHECK(msh_get_double(in, 1, &u, "a node's parametric coordinate"));
      FE_CHECK(msh_end_line(in, "a node's coordinates"));
    }
    spans[b] = (msh_span){dim, tag, at, n};
    at += n;
  }
  msh_mark_at(in, line, byte);
  if (at != d->nnodes)
    FAIL(in, FE_ERR_IO, "the blocks hold %zu nodes, the section announces %zu", at, d->nnodes);
  return 0;
}

/* $Nodes: the header (blocks, nodes, smallest and largest tag), then the blocks. */
static int read_nodes(msh_in *in, msh_data *d)
{
  in->section = "$Nodes";
  size_t nblocks, nnodes, lo, hi;
  FE_CHECK(msh_get_size(in, 0, &nblocks, "the number of node blocks"));
  const long long line = in->at_line, byte = in->at_byte;
  FE_CHECK(msh_get_size(in, 1, &nnodes, "the number of nodes"));
  FE_CHECK(msh_get_size(in, 1, &lo, "the smallest node tag"));
  FE_CHECK(msh_get_size(in, 1, &hi, "the largest node tag"));
  FE_CHECK(msh_end_line(in, "the numbers of nodes"));
  /* a node takes at least "1\n0 0 0\n" in ASCII, 4 numbers of 8 bytes in binary */
  FE_CHECK(msh_check_count(in, nnodes, in->binary ? 32 : 8, "nodes"));
  FE_CHECK(msh_check_count(in, nblocks, in->binary ? 20 : 8, "node blocks"));
  FE_MALLOC(d->node_tags, nnodes + 1, "node tags");
  FE_MALLOC(d->coords, 3 * nnodes + 1, "node coordinates");
  d->nnodes = nnodes;
  msh_span *spans;
  FE_MALLOC(spans, nblocks + 1, "node blocks");
  int rc = read_node_blocks(in, d, spans, nblocks, line, byte);
  if (!rc) rc = sort_nodes(d, spans, nblocks);
  free(spans);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return msh_section_end(in, "Nodes");
}

/* One element block of $Elements into bl (left out, bl->b.nodes NULL, for points'
 * entities); straight: second-order elements keep their vertices. *left: elements the
 * section still announces. */
static int read_element_block(msh_in *in, msh_block *bl, int straight, size_t *left)
{
  int dim, tag, type;
  size_t n;
  fe_msh_type ti;
  FE_CHECK(msh_get_int(in, 0, &dim, "the entity dimension of an element block"));
  if (dim < 0 || dim > 3) FAIL(in, FE_ERR_IO, "entity dimension %d: expected 0 to 3", dim);
  FE_CHECK(msh_get_int(in, 1, &tag, "the entity tag of an element block"));
  FE_CHECK(msh_get_int(in, 1, &type, "the element type"));
  if (!fe_msh_type_info(type, &ti))
    FAIL(in, FE_ERR_MESH,
         "unknown element type %d: felab knows Gmsh types 1-19 (points, lines, triangles, "
         "quadrangles, tetrahedra, hexahedra, prisms, pyramids, to the second order)",
         type);
  if (ti.dim != dim)
    FAIL(in, FE_ERR_IO, "%s elements on an entity of dimension %d (expected %d)", ti.name, dim,
         ti.dim);
  FE_CHECK(msh_get_size(in, 1, &n, "the number of elements in the block"));
  if (n > *left)
    FAIL(in, FE_ERR_IO, "the blocks hold more elements than the section announces");
  *left -= n;
  FE_CHECK(msh_end_line(in, "an element block's header"));
  const size_t nn = (size_t)ti.nodes;
  FE_CHECK(msh_check_count(in, n, in->binary ? 8 * (nn + 1) : 2 * (nn + 1), "elements"));
  const int keep = straight ? ti.vertices : ti.nodes;
  size_t *nodes = NULL;
  if (dim >= 1) FE_MALLOC(nodes, n * keep + 1, "element node tags");
  *bl = (msh_block){dim, tag, 0, {straight ? ti.linear : type, tag, dim >= 1 ? n : 0, nodes}};
  char node_of[64], after[64];
  snprintf(node_of, sizeof node_of, "a node tag (a %s has %d)", ti.name, ti.nodes);
  snprintf(after, sizeof after, "the %d node tags of a %s", ti.nodes, ti.name);
  for (size_t e = 0; e < n; e++) {
    size_t t;
    FE_CHECK(msh_get_size(in, 0, &t, "an element tag"));
    for (int k = 0; k < ti.nodes; k++) {
      FE_CHECK(msh_get_size(in, 1, &t, node_of));
      if (nodes && k < keep) nodes[e * keep + k] = t;
    }
    FE_CHECK(msh_end_line(in, after));
    FE_CHECK(msh_tick(in));
  }
  return 0;
}

/* $Elements: the header (blocks, elements, smallest and largest tag), then the blocks. */
static int read_elements(msh_in *in, msh_data *d, int straight)
{
  in->section = "$Elements";
  size_t nblocks, nelements, lo, hi;
  FE_CHECK(msh_get_size(in, 0, &nblocks, "the number of element blocks"));
  const long long line = in->at_line, byte = in->at_byte;
  FE_CHECK(msh_get_size(in, 1, &nelements, "the number of elements"));
  FE_CHECK(msh_get_size(in, 1, &lo, "the smallest element tag"));
  FE_CHECK(msh_get_size(in, 1, &hi, "the largest element tag"));
  FE_CHECK(msh_end_line(in, "the numbers of elements"));
  FE_CHECK(msh_check_count(in, nelements, in->binary ? 16 : 4, "elements"));
  FE_CHECK(msh_check_count(in, nblocks, in->binary ? 20 : 8, "element blocks"));
  FE_CALLOC(d->blocks, nblocks + 1, "element blocks");
  size_t left = nelements;
  for (size_t b = 0; b < nblocks; b++) {
    msh_block *bl = &d->blocks[d->nblocks];
    bl->b.nodes = NULL;
    int rc = read_element_block(in, bl, straight, &left);
    if (bl->b.nodes) bl->seq = d->nblocks++; /* d frees its nodes, also after an error */
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  msh_mark_at(in, line, byte);
  if (left)
    FAIL(in, FE_ERR_IO, "the blocks hold %zu elements, the section announces %zu",
         nelements - left, nelements);
  return msh_section_end(in, "Elements");
}

/* The sections, in any order, after $MeshFormat. */
static int read_sections(msh_in *in, msh_data *d, int straight)
{
  char line[256];
  if (!msh_get_line(in, line, sizeof line)) return msh_ended(in, "$MeshFormat");
  if (strcmp(line, "$MeshFormat"))
    FAIL(in, FE_ERR_IO, "expected $MeshFormat, found '%.40s': this is not a .msh file", line);
  FE_CHECK(read_format(in));
  while (msh_get_line(in, line, sizeof line)) {
    const char *name = line + 1;
    int *seen = NULL;
    if (line[0] != '$')
      FAIL(in, FE_ERR_IO, "expected a section ($Nodes, $Elements, ...), found '%.40s'", line);
    if (!strcmp(name, "PhysicalNames")) seen = &d->seen_names;
    else if (!strcmp(name, "Entities")) seen = &d->seen_entities;
    else if (!strcmp(name, "Nodes")) seen = &d->seen_nodes;
    else if (!strcmp(name, "Elements")) seen = &d->seen_elements;
    else if (!strcmp(name, "PartitionedEntities"))
      FAIL(in, FE_ERR_UNAVAILABLE,
           "a partitioned mesh ($PartitionedEntities) is not read without the Gmsh SDK: save it "
           "unpartitioned");
    else if (!strcmp(name, "MeshFormat") || !strncmp(name, "End", 3))
      FAIL(in, FE_ERR_IO, "%s out of place", line);
    if (!seen) {
      FE_CHECK(msh_skip_section(in, name));
      continue;
    }
    if (*seen) FAIL(in, FE_ERR_IO, "a second %s section", line);
    *seen = 1;
    if (seen == &d->seen_names) FE_CHECK(read_names(in, d));
    else if (seen == &d->seen_entities) FE_CHECK(read_entities(in, d));
    else if (seen == &d->seen_nodes) FE_CHECK(read_nodes(in, d));
    else FE_CHECK(read_elements(in, d, straight));
  }
  msh_mark(in);
  if (!d->seen_nodes || !d->seen_elements)
    FAIL(in, FE_ERR_IO, "the file ends without a %s section: it is truncated, or holds no mesh",
         d->seen_nodes ? "$Elements" : "$Nodes");
  return 0;
}

/* ----- the arrays in the SDK's order ----- */

static int block_cmp(const void *a, const void *b)
{
  const msh_block *x = a, *y = b;
  if (x->dim != y->dim) return x->dim < y->dim ? -1 : 1;
  if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
  if (x->b.gmsh_type != y->b.gmsh_type) return x->b.gmsh_type < y->b.gmsh_type ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int member_cmp(const void *a, const void *b)
{
  const msh_member *x = a, *y = b;
  if (x->dim != y->dim) return x->dim < y->dim ? -1 : 1;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  return x->entity < y->entity ? -1 : x->entity > y->entity;
}

/* The physical groups from the entities' memberships (by dimension and tag, each entity
 * once), named by $PhysicalNames, into a (its arrays malloc'd). */
static int make_groups(msh_data *d, fe_mesh_arrays *a)
{
  qsort(d->members, d->nmembers, sizeof *d->members, member_cmp);
  size_t ng = 0;
  for (size_t i = 0; i < d->nmembers; i++)
    ng += !i || d->members[i].dim != d->members[i - 1].dim ||
          d->members[i].group != d->members[i - 1].group;
  fe_mesh_group *groups;
  FE_CALLOC(groups, ng + 1, "physical groups");
  a->groups = groups; /* freed with a from here on */
  for (size_t i = 0, g = 0; i < d->nmembers; g++) {
    size_t j = i;
    while (j < d->nmembers && d->members[j].dim == d->members[i].dim &&
           d->members[j].group == d->members[i].group)
      j++;
    fe_mesh_group *gr = &groups[g];
    int *entities;
    a->ngroups = g + 1;
    FE_MALLOC(entities, j - i, "physical group entities");
    gr->entities = entities;
    gr->dim = d->members[i].dim, gr->tag = d->members[i].group;
    for (size_t k = i; k < j; k++)
      if (k == i || d->members[k].entity != d->members[k - 1].entity)
        entities[gr->nentities++] = d->members[k].entity;
    for (size_t k = 0; k < d->nnames; k++)
      if (d->names[k].dim == gr->dim && d->names[k].tag == gr->tag) {
        gr->name = d->names[k].name;
        d->names[k].name = NULL; /* a's now */
        break;
      }
    i = j;
  }
  return 0;
}

/* Move d's arrays into a, in the SDK's order. */
static int make_arrays(msh_data *d, fe_mesh_arrays *a)
{
  a->nnodes = d->nnodes;
  a->node_tags = d->node_tags, d->node_tags = NULL;
  a->coords = d->coords, d->coords = NULL;
  qsort(d->blocks, d->nblocks, sizeof *d->blocks, block_cmp);
  fe_mesh_block *blocks;
  FE_CALLOC(blocks, d->nblocks + 1, "element blocks");
  for (size_t b = 0; b < d->nblocks; b++) blocks[b] = d->blocks[b].b;
  a->blocks = blocks, a->nblocks = d->nblocks;
  d->nblocks = 0; /* the nodes are a's now */
  return make_groups(d, a);
}

int fe_msh_read(const char *path, int straight, fe_mesh_arrays *a)
{
  FE_ASSERT(path && a, FE_ERR_ARG, "msh read: missing path or arrays");
  memset(a, 0, sizeof *a);
  FILE *f = fopen(path, "rb");
  if (!f) FE_ERROR(FE_ERR_IO, "%s: cannot open mesh file: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
    fclose(f);
    FE_ERROR(FE_ERR_IO, "%s: not a regular file", path);
  }
  msh_in *in = calloc(1, sizeof *in);
  if (!in) {
    fclose(f);
    FE_ERROR(FE_ERR_MEM, "%s: out of memory for the reader", path);
  }
  in->f = f, in->path = path, in->size = (long long)st.st_size, in->line = 1;
  msh_data d;
  memset(&d, 0, sizeof d);
  int rc = read_sections(in, &d, straight);
  if (!rc) {
    a->source = path;
    rc = make_arrays(&d, a);
  }
  data_free(&d);
  free(in);
  fclose(f);
  if (rc) {
    fe_msh_arrays_free(a);
    return fe_error_push(rc, __FILE__, __LINE__, __func__);
  }
  return 0;
}

void fe_msh_arrays_free(fe_mesh_arrays *a)
{
  if (!a) return;
  free((void *)a->node_tags);
  free((void *)a->coords);
  for (size_t b = 0; a->blocks && b < a->nblocks; b++) free((void *)a->blocks[b].nodes);
  free((void *)a->blocks);
  for (size_t g = 0; a->groups && g < a->ngroups; g++) {
    free((void *)a->groups[g].name);
    free((void *)a->groups[g].entities);
  }
  free((void *)a->groups);
  memset(a, 0, sizeof *a);
}
