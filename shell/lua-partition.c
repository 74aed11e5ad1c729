/* felab shell: a mesh's partition (engine/parallel/partition.h). m:partition(n [, {method =
 * "auto" | "lattice" | "metis" | "rcb"}]) -> P, the parts each rank will hold under mpirun:
 * P.parts, P.method, P.cells, P.vertices, P.interface, P.neighbours (a number a part, part
 * 0 first), P.ninterface, P.cut; export.vtu(path, m, fields, {partition = P}) writes its
 * pieces and a .pvtu. */
#include <lauxlib.h>
#include <string.h>

#include "engine/fem/space.h"
#include "engine/mesh/mesh.h"
#include "engine/parallel/dist.h"
#include "engine/parallel/partition.h"
#include "shell/shell.h"

#define FELAB_PARTITION "felab.partition"

typedef struct partition_handle {
  fe_partition *p;
} partition_handle;

static const char *const partition_keys[] = {"method", NULL};

/* m:partition(n [, {method = ...}]) -> P */
int felab_mesh_partition(lua_State *L)
{
  mesh_handle *h = felab_check_self(L, 1, FELAB_MESH, "m:partition", "self (m:method())");
  lua_Integer n;
  if (!felab_is_integer(L, 2, &n) || n < 1 || n > h->m->ncells)
    return luaL_error(L, "m:partition: argument 1 must be the number of parts, 1 to the %d "
                      "cells, got %s", h->m->ncells, felab_number_or_kind(L, 2));
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    return luaL_error(L, "m:partition: argument 2 must be an options table {method = ...}, got "
                      "%s", felab_kind_of(L, 3));
  if (lua_istable(L, 3)) felab_check_keys(L, 3, "m:partition", partition_keys);
  int method = FE_PART_AUTO;
  const char *name = lua_istable(L, 3) ? felab_opt_field_name(L, 3, "m:partition", "method")
                                       : NULL;
  if (name) FELAB_TRY(L, fe_partition_method_parse(name, &method));
  partition_handle *ph = lua_newuserdatauv(L, sizeof *ph, 0);
  ph->p = NULL;
  luaL_setmetatable(L, FELAB_PARTITION);
  FELAB_TRY(L, fe_mesh_partition(h->m, (int)n, method, &ph->p));
  return 1;
}

const int *felab_check_partition(lua_State *L, int i, int ncells, int *nparts)
{
  partition_handle *ph = luaL_testudata(L, i, FELAB_PARTITION);
  if (!ph || !ph->p)
    luaL_error(L, "partition: expected a partition made by m:partition, got %s",
               felab_kind_of(L, i));
  if (ph->p->ncells != ncells)
    luaL_error(L, "partition: it splits %d cells, this mesh has %d", ph->p->ncells, ncells);
  *nparts = ph->p->nparts;
  return ph->p->part;
}

static int partition_gc(lua_State *L)
{
  partition_handle *ph = luaL_checkudata(L, 1, FELAB_PARTITION);
  fe_partition_free(ph->p);
  ph->p = NULL;
  return 0;
}

static void push_ints(lua_State *L, const int *v, int n)
{
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    lua_pushinteger(L, v[k]);
    lua_rawseti(L, -2, k + 1);
  }
}

/* The number n as field k of the table on top. */
static void set_number(lua_State *L, const char *k, double n)
{
  lua_pushnumber(L, n);
  lua_setfield(L, -2, k);
}

/* P:exchange(V [, precision]) -> {{cells =, nodes =, messages =, bytes =, entries =, word =,
 * shared =, sources =, notowned =}, ...}: each part's share of space V (of the partitioned
 * mesh) split by P, its exchange as the ranks would count it (engine/parallel/dist.c), without
 * running on that many ranks. */
static int partition_exchange(lua_State *L)
{
  partition_handle *ph = luaL_checkudata(L, 1, FELAB_PARTITION);
  if (!ph->p) return luaL_error(L, "P:exchange: the partition is closed");
  space_handle *sh = luaL_testudata(L, 2, FELAB_SPACE);
  if (!sh || !sh->V)
    return luaL_error(L, "P:exchange: argument 1 must be a space (fe.space), got %s",
                      felab_kind_of(L, 2));
  const fe_dist *d = sh->V->dist; /* a split space: its whole one, made again */
  const int ncells = d ? d->whole->ncells : sh->V->mesh->ncells;
  if (ncells != ph->p->ncells)
    return luaL_error(L, "P:exchange: the partition splits %d cells, the space's mesh has %d",
                      ph->p->ncells, ncells);
  const char *pname = felab_opt_name(L, 3, "P:exchange", "argument 2 (precision)");
  fe_precision prec = fe_precision_default();
  if (pname) FELAB_TRY(L, fe_precision_parse(pname, &prec));
  const int np = ph->p->nparts;
  fe_dist_part *parts = lua_newuserdatauv(L, sizeof *parts * (size_t)np, 0);
  fe_space *W = NULL;
  int rc = d ? fe_dist_whole(d, &W) : 0;
  if (!rc) rc = fe_dist_parts(W ? W : sh->V, ph->p->part, np, prec, parts);
  fe_space_free(W);
  FELAB_TRY(L, rc);
  lua_createtable(L, np, 0);
  for (int q = 0; q < np; q++) {
    const fe_dist_part *t = &parts[q];
    lua_createtable(L, 0, 9);
    set_number(L, "cells", (double)t->cells);
    set_number(L, "nodes", (double)t->nodes);
    set_number(L, "messages", t->x.messages);
    set_number(L, "bytes", t->x.bytes);
    set_number(L, "entries", t->x.entries);
    set_number(L, "word", t->x.word);
    set_number(L, "shared", t->x.shared);
    set_number(L, "sources", t->x.sources);
    set_number(L, "notowned", t->notowned);
    lua_rawseti(L, -2, q + 1);
  }
  return 1;
}

static int partition_index(lua_State *L)
{
  partition_handle *ph = luaL_checkudata(L, 1, FELAB_PARTITION);
  const char *k = luaL_checkstring(L, 2);
  const fe_partition *p = ph->p;
  if (!p) return luaL_error(L, "partition: closed");
  if (!strcmp(k, "exchange")) lua_pushcfunction(L, partition_exchange);
  else if (!strcmp(k, "parts")) lua_pushinteger(L, p->nparts);
  else if (!strcmp(k, "method")) lua_pushstring(L, fe_partition_method_name(p->method));
  else if (!strcmp(k, "cells")) push_ints(L, p->cells, p->nparts);
  else if (!strcmp(k, "vertices")) push_ints(L, p->vertices, p->nparts);
  else if (!strcmp(k, "interface")) push_ints(L, p->interface, p->nparts);
  else if (!strcmp(k, "neighbours")) push_ints(L, p->neighbours, p->nparts);
  else if (!strcmp(k, "ninterface")) lua_pushinteger(L, p->ninterface);
  else if (!strcmp(k, "cut")) lua_pushinteger(L, (lua_Integer)p->cut);
  else lua_pushnil(L);
  return 1;
}

/* The smallest and largest of v[0 .. n). */
static void range(const int *v, int n, int *lo, int *hi)
{
  *lo = *hi = v[0];
  for (int k = 1; k < n; k++) *lo = v[k] < *lo ? v[k] : *lo, *hi = v[k] > *hi ? v[k] : *hi;
}

static int partition_tostring(lua_State *L)
{
  partition_handle *ph = luaL_checkudata(L, 1, FELAB_PARTITION);
  const fe_partition *p = ph->p;
  if (!p) {
    lua_pushliteral(L, "partition (closed)");
    return 1;
  }
  int c0, c1, i0, i1, n0, n1;
  range(p->cells, p->nparts, &c0, &c1);
  range(p->interface, p->nparts, &i0, &i1);
  range(p->neighbours, p->nparts, &n0, &n1);
  lua_pushfstring(L, "partition of %d cells into %d parts by %s: cells %d to %d a part, %d "
                  "interface vertices (%d to %d a part), %d to %d neighbours a part, %I faces "
                  "cut", p->ncells, p->nparts, fe_partition_method_name(p->method), c0, c1,
                  p->ninterface, i0, i1, n0, n1, (lua_Integer)p->cut);
  return 1;
}

void felab_open_partition(lua_State *L)
{
  static const luaL_Reg meta[] = {{"__gc", partition_gc}, {"__close", partition_gc},
                                  {"__index", partition_index},
                                  {"__tostring", partition_tostring}, {NULL, NULL}};
  luaL_newmetatable(L, FELAB_PARTITION);
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
  felab_help_add("felab.partition", "P = m:partition(n)",
                 "A mesh's cells split into parts (one a rank under mpirun): P.parts, P.method,\n"
                 "the per-part tables P.cells, P.vertices, P.interface, P.neighbours, and\n"
                 "P.ninterface, P.cut; print(P) sums them up (help(\"felab.mesh:partition\")).\n"
                 "P:exchange(V [, precision]): each part's share of space V split so (cells,\n"
                 "nodes, and its exchange: messages, bytes, entries, shared, sources, notowned),\n"
                 "as that many ranks would count it, without running them (perf.compare's ranks).\n"
                 "example: P = m:partition(4); print(P.cells[1], P.cut)");
  felab_help_add(
      "felab.mesh:partition",
      "P = m:partition(n [, {method = \"auto\"}])",
      "The mesh's cells split into n parts: what each rank will hold under mpirun.\n"
      "method: \"lattice\" (a box of mesh.box: blocks of its cubes, shaped to cut the fewest\n"
      "faces), \"metis\" (METIS on the cells joined across faces), \"rcb\" (recursive\n"
      "coordinate bisection of the cells' centres); \"auto\": the lattice for a box whose\n"
      "cubes make equal blocks, else METIS where built, else RCB. P.parts, P.method, P.cells,\n"
      "P.vertices,\n"
      "P.interface (vertices shared with another part), P.neighbours (parts sharing one):\n"
      "a number a part; P.ninterface, P.cut (faces between parts). export.vtu(path, m,\n"
      "fields, {partition = P}) writes one piece a part and a .pvtu for ParaView.\n"
      "example: P = m:partition(4); print(P); export.vtu(\"out/u.pvtu\", m, {u = u}, "
      "{partition = P})");
}
