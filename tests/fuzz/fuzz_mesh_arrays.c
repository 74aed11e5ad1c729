/* libFuzzer harness for the conversion from Gmsh SDK arrays to a felab mesh
 * (fe_mesh_from_arrays): the bytes choose node tags, coordinates, element blocks (types of
 * the first and second order, complete or not, entities, node tags, valid or not) and
 * physical groups. Any input must give a mesh or a
 * clean error, never a crash, a leak or undefined behaviour.
 * Build and run: make fuzz (clang, -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

/* The next byte, or 0 past the end. */
static unsigned next(reader *r)
{
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  reader r = {data, size};
  size_t nnodes = next(&r) % 40;
  size_t tags[40];
  double coords[120];
  for (size_t i = 0; i < nnodes; i++) {
    tags[i] = next(&r) % 48; /* 0 and duplicates are invalid, large tags are sparse */
    for (int d = 0; d < 3; d++) {
      unsigned b = next(&r);
      coords[3 * i + d] = b == 255 ? 1.0 / 0.0 : (double)(b % 8) * 0.25; /* inf sometimes */
    }
  }
  /* first and second order (complete: 8-13, incomplete: 16-18), and unknown types */
  static const int types[] = {1, 2, 3, 4, 5, 6, 7, 15, 8, 9, 10, 11, 12, 13, 16, 17, 18, 99};
  static const int nnodes_of[] = {2, 3, 4, 4, 8, 6, 5, 1, 3, 6, 9, 10, 27, 18, 8, 20, 15, 1};
  const size_t ntypes = sizeof types / sizeof *types;
  size_t nblocks = next(&r) % 4;
  fe_mesh_block blocks[4];
  size_t nodes[4][7 * 27];
  for (size_t b = 0; b < nblocks; b++) {
    const size_t t = next(&r) % ntypes;
    blocks[b].gmsh_type = types[t];
    blocks[b].entity = (int)(next(&r) % 4);
    blocks[b].nelements = next(&r) % 8; /* at most 7 x 27 nodes: fits nodes[b] */
    const size_t used = blocks[b].nelements * (size_t)nnodes_of[t];
    for (size_t k = 0; k < used; k++) nodes[b][k] = next(&r) % 48;
    blocks[b].nodes = nodes[b];
  }
  size_t ngroups = next(&r) % 3;
  fe_mesh_group groups[3];
  int entities[3][2];
  static const char *const names[] = {NULL, "", "skin", "domain"};
  for (size_t g = 0; g < ngroups; g++) {
    groups[g].dim = (int)(next(&r) % 4);
    groups[g].tag = (int)(next(&r) % 5);
    groups[g].name = names[next(&r) % 4];
    groups[g].nentities = next(&r) % 3;
    entities[g][0] = (int)(next(&r) % 4);
    entities[g][1] = (int)(next(&r) % 4);
    groups[g].entities = entities[g];
  }
  fe_mesh_arrays a = {.source = "fuzz", .nnodes = nnodes, .node_tags = tags, .coords = coords,
                      .nblocks = nblocks, .blocks = blocks, .ngroups = ngroups, .groups = groups};
  fe_mesh *m = NULL;
  if (fe_mesh_from_arrays(&a, &m) == 0) fe_mesh_free(m);
  fe_error_clear();
  return 0;
}
