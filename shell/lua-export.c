/* felab shell: output. export.vtu(path, m, {name = vector, ...}) writes the mesh and its
 * fields for ParaView (engine/mesh/io/vtu.h); vectors are brought to host doubles first. A field
 * with one value per vertex is point data, one per cell is cell data; a vector of a scalar
 * space of higher order on the mesh is written at the vertices. The series index that
 * ParaView opens over many frames (export.pvd) is written in Lua (shell/lib/timestep.lua). */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mesh/mesh.h"
#include "engine/solve/vector.h"
#include "engine/mesh/io/msh.h"
#include "engine/fem/space.h"
#include "engine/mesh/io/vtu.h"
#include "engine/parallel/dist.h"
#include "shell/shell.h"

/* Order fields by name, so that a file does not depend on table traversal. */
static int field_cmp(const void *a, const void *b)
{
  return strcmp(((const fe_vtu_field *)a)->name, ((const fe_vtu_field *)b)->name);
}

/* The space of the vector at i where export writes it at the vertices: a scalar space of
 * higher order on m (its nodes beside the vertices: a cell's first nodes are its vertices'),
 * else NULL (the vector written as it is). */
static const fe_space *higher_order_space(lua_State *L, int i, const fe_mesh *m, int n)
{
  const space_handle *sh = NULL;
  if (lua_getiuservalue(L, i, 1) == LUA_TUSERDATA) sh = luaL_testudata(L, -1, FELAB_SPACE);
  lua_pop(L, 1);
  if (sh && sh->V && sh->V->mesh == m && sh->V->ncomp == 1 && n == sh->V->ndofs &&
      n > m->nvertices)
    return sh->V;
  return NULL;
}

/* The values of V's nodes at the vertices, each vertex's from a cell's node at it (every cell
 * around it holds the same node), into a new Lua-owned buffer (pushed). */
static double *push_vertex_values(lua_State *L, const fe_space *V, const double *values)
{
  const fe_mesh *m = V->mesh;
  const int nv = V->elem.nvertices, nb = V->elem.nbasis;
  double *at = lua_newuserdatauv(L, (size_t)m->nvertices * sizeof(double) + 1, 0);
  for (size_t c = 0; c < (size_t)m->ncells; c++)
    for (int b = 0; b < nv; b++)
      at[m->cells[c * nv + b]] = values[V->cell_nodes[c * nb + b]];
  return at;
}

/* Check export.X(path, m [, {name = vector, ...}]) and gather the fields as host doubles
 * (Lua-owned buffers, so an error anywhere leaks nothing); cell data only if cells_ok. */
static fe_vtu_field *export_fields(lua_State *L, const char *fname, int cells_ok,
                                   const fe_mesh **mesh, int *count, const fe_dist **split)
{
  if (lua_type(L, 1) != LUA_TSTRING)
    luaL_error(L, "%s: expected a file path as argument 1, got %s", fname, felab_kind_of(L, 1));
  const fe_mesh *m = ((mesh_handle *)felab_check_handle(L, 2, FELAB_MESH, fname, "argument 2"))->m;
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    luaL_error(L, "%s: argument 3 must be a table {name = vector, ...}, got %s", fname,
               felab_kind_of(L, 3));
  lua_settop(L, 3);
  int nfields = 0;
  *split = NULL;
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      fe_vector **vp = luaL_testudata(L, -1, FELAB_VECTOR);
      if (vp && *vp && (*vp)->dist) *split = (*vp)->dist; /* a split space's: this rank's cells */
      lua_pop(L, 1);
      nfields++;
    }
  }
  if (*split) m = (*split)->mesh;
  fe_vtu_field *fields = lua_newuserdatauv(L, sizeof *fields * (size_t)(nfields + 1), 0);
  lua_createtable(L, nfields, 0); /* index 5: anchors the value buffers */
  int k = 0;
  if (nfields) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        luaL_error(L, "%s: field names must be strings, got a %s key", fname, luaL_typename(L, -2));
      const char *name = lua_tostring(L, -2);
      fe_vector **vp = luaL_testudata(L, -1, FELAB_VECTOR);
      if (!vp) luaL_error(L, "%s: field '%s' must be a vector, got %s", fname, name, felab_kind_of(L, -1));
      if (!*vp) luaL_error(L, "%s: the vector of field '%s' was closed", fname, name);
      const fe_vector *x = *vp;
      const fe_space *V = higher_order_space(L, -1, m, x->n);
      int n = V ? m->nvertices : x->n;
      if (n != m->nvertices && (!cells_ok || n != m->ncells)) {
        if (cells_ok)
          luaL_error(L, "%s: field '%s' has %d values but the mesh has %d vertices "
                        "(point data) and %d cells (cell data)", fname, name, x->n, m->nvertices, m->ncells);
        luaL_error(L, "%s: field '%s' has %d values but the mesh has %d vertices (node data)",
                   fname, name, x->n, m->nvertices);
      }
      double *values = felab_push_host_values(L, x);
      if (V) {
        values = push_vertex_values(L, V, values);
        lua_rawseti(L, 5, nfields + k + 1); /* the nodes' values anchored beside */
      }
      lua_rawseti(L, 5, k + 1);
      fields[k].name = name; /* anchored as a key of the table */
      fields[k].values = values;
      fields[k].per_cell = n != m->nvertices;
      k++;
      lua_pop(L, 1);
    }
  }
  qsort(fields, (size_t)k, sizeof *fields, field_cmp);
  *mesh = m;
  *count = k;
  return fields;
}

static const char *const vtu_keys[] = {"partition", NULL};

/* export.vtu(path, m [, {name = vector, ...} [, {partition = P}]]) -> path: with a
 * partition, one piece a part and the .pvtu naming them */
static int export_vtu(lua_State *L)
{
  int ref = LUA_NOREF; /* the partition, anchored while export_fields trims the stack */
  if (!lua_isnoneornil(L, 4)) {
    if (!lua_istable(L, 4))
      return luaL_error(L, "export.vtu: argument 4 must be an options table {partition = P}, "
                        "got %s", felab_kind_of(L, 4));
    felab_check_keys(L, 4, "export.vtu", vtu_keys);
    lua_getfield(L, 4, "partition");
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  const fe_mesh *m;
  int k;
  const fe_dist *split;
  fe_vtu_field *fields = export_fields(L, "export.vtu", 1, &m, &k, &split);
  if (split) { /* under mpirun, vectors of a split space: each rank its piece */
    if (ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, ref);
    FELAB_TRY(L, fe_vtu_write_rank(lua_tostring(L, 1), m, k, fields, split->rank, split->size));
  } else if (ref == LUA_NOREF || ref == LUA_REFNIL) {
    FELAB_TRY(L, fe_vtu_write(lua_tostring(L, 1), m, k, fields));
  } else {
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    int nparts;
    const int *part = felab_check_partition(L, -1, m->ncells, &nparts);
    FELAB_TRY(L, fe_vtu_write_pieces(lua_tostring(L, 1), m, k, fields, nparts, part));
  }
  lua_pushvalue(L, 1);
  return 1;
}

/* export.msh(path, m [, {name = vector, ...}]) -> path: .msh 4.1 with node-data views */
static int export_msh(lua_State *L)
{
  const fe_mesh *m;
  int k;
  const fe_dist *split;
  fe_vtu_field *fields = export_fields(L, "export.msh", 0, &m, &k, &split);
  if (split) return luaL_error(L, "export.msh: vectors of a space split over %d ranks are not "
                               "written as .msh yet: use export.vtu (a piece a rank)", split->size);
  fe_msh_view *views = lua_newuserdatauv(L, sizeof *views * (size_t)(k + 1), 0);
  for (int i = 0; i < k; i++) {
    views[i].name = fields[i].name;
    views[i].values = fields[i].values;
  }
  FELAB_TRY(L, fe_msh_write(lua_tostring(L, 1), m, k, views));
  lua_pushvalue(L, 1);
  return 1;
}

/* Push the export module table. */
int felab_open_export(lua_State *L)
{
  lua_newtable(L);
  lua_pushcfunction(L, export_vtu);
  lua_setfield(L, -2, "vtu");
  lua_pushcfunction(L, export_msh);
  lua_setfield(L, -2, "msh");
  lua_pushcfunction(L, felab_export_mtx);
  lua_setfield(L, -2, "mtx");
  felab_help_add("export.msh", "export.msh(path, m [, {name = vector, ...}])",
                 "Write the mesh as a Gmsh .msh 4.1 file with its physical groups and one node-data\n"
                 "view per field; Gmsh opens it.\n  example: export.msh(\"out/u.msh\", m, {u = u})");
  return 1;
}
