/* felab shell: meshes. mesh.box, mesh.load and the felab.mesh type (fields dim, ncells, nvertices,
 * cell; methods tags, check, color, refine, reorder, quality). Argument checks and conversions only: the mesh is
 * made, checked and colored by the engine (engine/mesh/mesh.h). */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mesh/mesh.h"
#include "shell/shell.h"

static const char *const box_keys[] = {"cells", "cell", "lower", "upper", "distort", NULL};
static const char *const color_keys[] = {"block", NULL};
static const char *const load_keys[] = {"size", "order", "algorithm", NULL};
static const char *const axis_names[3] = {"x", "y", "z"};

/* The mesh of the handle at i (a method's self), or an error naming the function. */
static fe_mesh *check_mesh(lua_State *L, int i, const char *fname)
{
  mesh_handle *h = felab_check_self(L, i, FELAB_MESH, fname, "self (m:method())");
  return h->m;
}

/* The cell count at the top of the stack for cells[axis + 1] (whole: the single number
 * meaning n x n x n); a Lua-indexed message names the axis. */
static int read_cell_count(lua_State *L, int axis, int whole)
{
  static const char *const names[3] = {"cells[1]", "cells[2]", "cells[3]"};
  const char *what = whole ? "cells" : names[axis];
  const char *along = whole ? "each axis" : axis_names[axis];
  lua_Integer n;
  if (!felab_is_integer(L, -1, &n))
    luaL_error(L, "mesh.box: %s must be a positive integer (cells along %s), got %s", what, along,
               felab_number_or_kind(L, -1));
  if (n <= 0)
    luaL_error(L, "mesh.box: %s = %I: the number of cells along %s must be positive", what,
               n, along);
  if (n > INT_MAX)
    luaL_error(L, "mesh.box: %s = %I: too many cells along %s", what, n, along);
  return (int)n;
}

/* opts.cells: one integer n (n x n x n), a table {nx, ny, nz} (nz = 0: 2D) or {nx, ny}
 * (2D: cells[2] = 0); absent keeps cells. Returns the table's length, 0 for a number. */
static int read_cells(lua_State *L, int t, int cells[3])
{
  int explicit_z = 0;
  int type = lua_getfield(L, t, "cells");
  if (type == LUA_TNUMBER) {
    cells[0] = cells[1] = cells[2] = read_cell_count(L, 0, 1);
  } else if (type == LUA_TTABLE) {
    const int n = (int)lua_rawlen(L, -1);
    if (n != 3 && n != 2)
      luaL_error(L, "mesh.box: cells must be a table of 3 (or in 2D, 2) positive integers, got a "
                    "table of %d", n);
    cells[2] = 0;
    for (int d = 0; d < n; d++) {
      lua_rawgeti(L, -1, d + 1);
      lua_Integer z;
      if (d == 2 && felab_is_integer(L, -1, &z) && z == 0) cells[d] = 0; /* a 2D box */
      else cells[d] = read_cell_count(L, d, 0);
      lua_pop(L, 1);
    }
    explicit_z = n;
  } else if (type != LUA_TNIL) {
    luaL_error(L, "mesh.box: cells must be a table of 3 positive integers, got %s",
               felab_kind_of(L, -1));
  }
  lua_pop(L, 1);
  return explicit_z;
}

/* opts[key]: a corner {x, y, z} (or one number for all three); absent keeps p. */
static void read_corner(lua_State *L, int t, const char *key, double p[3])
{
  int type = lua_getfield(L, t, key);
  if (type == LUA_TNUMBER) {
    p[0] = p[1] = p[2] = lua_tonumber(L, -1);
  } else if (type == LUA_TTABLE && lua_rawlen(L, -1) == 3) {
    for (int d = 0; d < 3; d++) {
      if (lua_rawgeti(L, -1, d + 1) != LUA_TNUMBER)
        luaL_error(L, "mesh.box: %s[%d] must be a number, got %s", key, d + 1,
                   felab_kind_of(L, -1));
      p[d] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else if (type != LUA_TNIL) {
    luaL_error(L, "mesh.box: %s must be a table of 3 numbers {x, y, z}, got %s", key,
               type == LUA_TTABLE ? "a table of another length" : felab_kind_of(L, -1));
  }
  lua_pop(L, 1);
}

/* mesh.box{cells =, cell =, lower =, upper =, distort =} -> mesh; tri and quad make a 2D box
 * (cells = n, {nx, ny} or {nx, ny, 0}) */
static int mesh_box(lua_State *L)
{
  if (!lua_istable(L, 1))
    return luaL_error(L, "mesh.box: expected an options table {cells = {nx, ny, nz}, "
                         "cell = \"tet\"} as argument 1, got %s", felab_kind_of(L, 1));
  felab_check_keys(L, 1, "mesh.box", box_keys);
  fe_box_opts o;
  fe_box_opts_default(&o);
  const int explicit_z = read_cells(L, 1, o.cells);
  int type = lua_getfield(L, 1, "cell");
  if (type == LUA_TSTRING) FELAB_TRY(L, fe_cell_parse(lua_tostring(L, -1), &o.type));
  else if (type != LUA_TNIL)
    return luaL_error(L, "mesh.box: cell must be a cell type name (\"tet\", \"hex\", \"prism\", "
                         "\"tri\", \"quad\"), got %s", felab_kind_of(L, -1));
  lua_pop(L, 1);
  if (fe_cell_dim(o.type) == 2 && explicit_z != 3) o.cells[2] = 0; /* tri, quad: a 2D box */
  if (fe_cell_dim(o.type) == 3 && explicit_z == 2)
    return luaL_error(L, "mesh.box: cells must be a table of 3 positive integers for %s cells "
                         "(2 entries make a 2D box of tri or quad)", fe_cell_name(o.type));
  read_corner(L, 1, "lower", o.lower);
  read_corner(L, 1, "upper", o.upper);
  type = lua_getfield(L, 1, "distort");
  if (type == LUA_TNUMBER) o.distort = lua_tonumber(L, -1);
  else if (type != LUA_TNIL)
    return luaL_error(L, "mesh.box: distort must be a number in [0, 1], got %s",
                      felab_kind_of(L, -1));
  lua_pop(L, 1);

  mesh_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->m = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_MESH);
  fe_mesh *m = NULL;
  FELAB_TRY(L, fe_mesh_box(&o, &m));
  h->m = m;
  return 1;
}

/* mesh.load(path [, {size =, order =, algorithm =}]) -> mesh, read or meshed by the Gmsh SDK
 * (without it, .msh 4.1 files are read by felab's own reader) */
static int mesh_load(lua_State *L)
{
  if (lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "mesh.load: expected a file name (\"meshes/cube.geo\") as argument 1, "
                         "got %s", felab_kind_of(L, 1));
  const char *path = lua_tostring(L, 1);
  fe_load_opts o;
  fe_load_opts_default(&o);
  if (lua_istable(L, 2)) {
    felab_check_keys(L, 2, "mesh.load", load_keys);
    int type = lua_getfield(L, 2, "size");
    if (type == LUA_TNUMBER) o.size = lua_tonumber(L, -1);
    if ((type != LUA_TNUMBER && type != LUA_TNIL) || !(o.size >= 0))
      return luaL_error(L, "mesh.load: size must be a positive number (the mesh size), got %s",
                        felab_number_or_kind(L, -1));
    lua_pop(L, 1);
    lua_Integer order = 1;
    lua_getfield(L, 2, "order");
    if (!lua_isnil(L, -1) && (!felab_is_integer(L, -1, &order) || order < 1 || order > 2))
      return luaL_error(L, "mesh.load: order must be 1 or 2, got %s", felab_number_or_kind(L, -1));
    lua_pop(L, 1);
    o.order = (int)order;
    o.algorithm = felab_opt_field_name(L, 2, "mesh.load", "algorithm");
  } else if (!lua_isnoneornil(L, 2)) {
    return luaL_error(L, "mesh.load: expected an options table {size =, order =, algorithm =} "
                         "as argument 2, got %s", felab_kind_of(L, 2));
  }
  mesh_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->m = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_MESH);
  fe_mesh *m = NULL;
  FELAB_TRY(L, fe_mesh_load(path, &o, &m));
  h->m = m;
  return 1;
}

/* m:tags() -> {boundary = {names...}, cells = {names...}} */
static int mesh_tags(lua_State *L)
{
  fe_mesh *m = check_mesh(L, 1, "m:tags");
  static const char *const groups[2] = {"boundary", "cells"};
  lua_createtable(L, 0, 2);
  for (int g = 0; g < 2; g++) {
    lua_newtable(L);
    int n = 0;
    for (int i = 0; i < m->ntags; i++)
      if (m->tags[i].dim == m->dim - 1 + g) {
        lua_pushstring(L, m->tags[i].name);
        lua_rawseti(L, -2, ++n);
      }
    lua_setfield(L, -2, groups[g]);
  }
  return 1;
}

/* m:check() -> true, or the engine's error naming the inverted cell */
static int mesh_check(lua_State *L)
{
  fe_mesh *m = check_mesh(L, 1, "m:check");
  FELAB_TRY(L, fe_mesh_check(m));
  lua_pushboolean(L, 1);
  return 1;
}

/* m:color{block = b} (or m:color(b); default 1: every cell alone) -> ncolors, {groups per color} */
static int mesh_color(lua_State *L)
{
  fe_mesh *m = check_mesh(L, 1, "m:color");
  lua_Integer block = 1;
  if (lua_istable(L, 2)) {
    felab_check_keys(L, 2, "m:color", color_keys);
    lua_getfield(L, 2, "block");
  } else {
    lua_pushvalue(L, 2);
  }
  if (!lua_isnil(L, -1) && (!felab_is_integer(L, -1, &block) || block < 1 || block > INT_MAX))
    return luaL_error(L, "m:color: block must be a positive integer (cells per group), got %s",
                      felab_number_or_kind(L, -1));
  lua_pop(L, 1);
  /* counts live in memory the collector owns, made before the engine's array, so that no
   * Lua error can leak it; a group count bounds the number of colors */
  int ngroups = (int)((m->ncells + block - 1) / block);
  int *sizes = lua_newuserdatauv(L, (size_t)(ngroups + 1) * sizeof(int), 0);
  memset(sizes, 0, (size_t)(ngroups + 1) * sizeof(int));
  int *color = NULL, ncolors = 0;
  FELAB_TRY(L, fe_mesh_color_groups(m, m->cells, m->nvc, (int)block, &color, &ncolors));
  for (int g = 0; g < ngroups; g++)
    if (color[g] >= 0 && color[g] <= ngroups) sizes[color[g]]++;
  free(color);
  lua_pushinteger(L, ncolors);
  lua_createtable(L, ncolors, 0);
  for (int c = 0; c < ncolors && c <= ngroups; c++) {
    lua_pushinteger(L, sizes[c]);
    lua_rawseti(L, -2, c + 1);
  }
  return 2;
}

/* m:refine() -> a new mesh, each cell cut into 8 (4 in 2D) */
static int mesh_refine(lua_State *L)
{
  fe_mesh *m = check_mesh(L, 1, "m:refine");
  mesh_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->m = NULL;
  h->borrowers = 0;
  luaL_setmetatable(L, FELAB_MESH);
  fe_mesh *r = NULL;
  FELAB_TRY(L, fe_mesh_refine(m, &r));
  h->m = r;
  return 1;
}

/* m:reorder("rcm" | "hilbert" | "layers" | "morton") -> m, renumbered in place (refused while
 * spaces use it) */
static int mesh_reorder(lua_State *L)
{
  mesh_handle *h = felab_check_self(L, 1, FELAB_MESH, "m:reorder", "self (m:method())");
  const char *how = felab_opt_name(L, 2, "m:reorder",
                                   "argument 1 (\"rcm\", \"hilbert\", \"layers\" or \"morton\")");
  if (!how) return luaL_error(L, "m:reorder: expected an ordering name (rcm, hilbert, layers, morton)");
  if (h->borrowers > 0)
    return luaL_error(L, "m:reorder: %d space(s) use this mesh; reorder before making spaces",
                      h->borrowers);
  FELAB_TRY(L, fe_mesh_reorder(h->m, how));
  lua_settop(L, 1);
  return 1;
}

/* m:quality() -> {min, max, mean, worst_cell, min_volume, max_volume, volume} */
static int mesh_quality(lua_State *L)
{
  fe_mesh *m = check_mesh(L, 1, "m:quality");
  fe_mesh_quality_info q;
  FELAB_TRY(L, fe_mesh_quality(m, &q));
  lua_createtable(L, 0, 7);
  const struct {
    const char *key;
    double value;
  } fields[] = {{"min", q.min}, {"max", q.max}, {"mean", q.mean}, {"min_volume", q.min_volume},
                {"max_volume", q.max_volume}, {"volume", q.volume}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    lua_pushnumber(L, fields[i].value);
    lua_setfield(L, -2, fields[i].key);
  }
  lua_pushinteger(L, q.worst_cell);
  lua_setfield(L, -2, "worst_cell");
  return 1;
}

/* Free the mesh once (NULL-safe). */
static void mesh_release(mesh_handle *h)
{
  if (h && h->m) {
    fe_mesh_free(h->m);
    h->m = NULL;
  }
}

/* __gc and __close: free now unless a live space borrows the mesh. Lua finalizes objects in
 * the reverse order of their creation, so the collector reaches a mesh after its spaces
 * have given their borrows back; a count above 0 means a __close (or a direct call) while
 * borrowed, which leaves the mesh to the collector. */
static int mesh_free(lua_State *L)
{
  mesh_handle *h = luaL_checkudata(L, 1, FELAB_MESH);
  if (h->borrowers == 0) mesh_release(h);
  return 0;
}

/* __tostring: the engine's summary. */
static int mesh_tostring(lua_State *L)
{
  mesh_handle *h = luaL_checkudata(L, 1, FELAB_MESH);
  if (!h->m) {
    lua_pushliteral(L, "mesh (closed)");
    return 1;
  }
  char buf[2048];
  fe_mesh_summary(h->m, buf, sizeof buf);
  lua_pushstring(L, buf);
  return 1;
}

/* __index: methods first, then the fields dim, ncells, nvertices, nfacets, cell, bytes (its
 * arrays: coordinates, cells, regions, facets and their tags, curved geometry). */
static int mesh_index(lua_State *L)
{
  mesh_handle *h = luaL_checkudata(L, 1, FELAB_MESH);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!h->m) return luaL_error(L, "mesh.%s: this mesh was closed", k);
  const fe_mesh *m = h->m;
  if (!strcmp(k, "dim")) lua_pushinteger(L, m->dim);
  else if (!strcmp(k, "ncells")) lua_pushinteger(L, m->ncells);
  else if (!strcmp(k, "nvertices")) lua_pushinteger(L, m->nvertices);
  else if (!strcmp(k, "nfacets")) lua_pushinteger(L, m->nfacets);
  else if (!strcmp(k, "cell")) lua_pushstring(L, fe_cell_name(m->type));
  else if (!strcmp(k, "bytes"))
    lua_pushinteger(L, (lua_Integer)((size_t)m->nvertices * 3 * sizeof(double) +
                                     (size_t)m->ncells * (m->nvc + 1) * sizeof(int) +
                                     (size_t)m->nfacets * (m->nvf + 1) * sizeof(int) +
                                     (m->geo_order >= 2 ? (size_t)m->ncells * m->ngn * sizeof(int) +
                                      (size_t)m->ngeo_nodes * 3 * sizeof(double) : 0)));
  else lua_pushnil(L);
  return 1;
}

/* Register the felab.mesh metatable (idempotent); leaves the stack as it was. */
static void mesh_register(lua_State *L)
{
  static const luaL_Reg methods[] = {
      {"tags", mesh_tags},       {"check", mesh_check},     {"color", mesh_color},
      {"refine", mesh_refine},   {"reorder", mesh_reorder}, {"quality", mesh_quality},
      {"partition", felab_mesh_partition}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__gc", mesh_free},
                                  {"__close", mesh_free},
                                  {"__tostring", mesh_tostring},
                                  {NULL, NULL}};
  felab_register_type(L, FELAB_MESH, meta, methods, mesh_index);
  lua_pop(L, 1);
}

/* Push the mesh module table. */
int felab_open_mesh(lua_State *L)
{
  mesh_register(L);
  felab_help_add(FELAB_MESH ":check", "m:check()",
                 "true if every cell has a positive measure; an inverted or degenerate cell is\n"
                 "an error naming its id.\nexample: assert(m:check())");
  felab_help_add("mesh.load", "mesh.load(path, {size =, order = 1, algorithm =})",
                 "Read a mesh (.msh 2.2/4.1) or mesh a geometry (.geo, STEP, BREP) with the Gmsh\n"
                 "SDK. Physical groups become boundary tags and cell regions by name; without\n"
                 "any, the boundary is \"boundary\" and the cells \"domain\". size: mesh size for\n"
                 "geometries; order = 2 gives curved cells (second-order nodes on the CAD surface,\n"
                 "used by every space's geometry map; a second-order .msh keeps its nodes with\n"
                 "order = 2, and order = 1, the default, makes its cells straight);\n"
                 "algorithm: delaunay, frontal, hxt.\n"
                 "example: m = mesh.load(\"meshes/sphere.geo\", {size = 0.25, order = 2}); print(m)");
  felab_help_add(FELAB_MESH ":color", "m:color{block = 1}",
                 "Greedy coloring of groups of `block` consecutive cells (default 1: each cell)\n"
                 "so that no two groups of one color share a vertex (for continuous Lagrange\n"
                 "spaces of any order, the same as sharing no dof). Returns the number of\n"
                 "colors and the number of groups of each color.\n"
                 "example: n, sizes = m:color{block = 64}; print(n, sizes[1])");
  felab_help_add(FELAB_MESH ":refine", "m:refine()",
                 "A new mesh, uniformly refined: tri and quad into 4, tet, hex and prism into 8.\n"
                 "Midpoints are shared between neighbours; boundary tags and regions are kept.\n"
                 "example: m2 = m:refine(); print(m2.ncells == 8 * m.ncells)");
  felab_help_add(FELAB_MESH ":reorder", "m:reorder(\"rcm\" | \"hilbert\" | \"layers\" | \"morton\")",
                 "Renumber vertices and cells in place for locality and return the mesh: rcm\n"
                 "(reverse Cuthill-McKee, small bandwidth), hilbert (along a Hilbert curve),\n"
                 "layers (a sweep from a far vertex, as mesh.load does) or morton (a Morton curve).\n"
                 "Do it before making spaces on the mesh. The cpu's assembly (csr's setup) wants a\n"
                 "node's cells near each other in the order: rcm or layers (a Hilbert order spreads\n"
                 "them, its assembly 2-3x slower).\nexample: m:reorder(\"rcm\")");
  felab_help_add(FELAB_MESH ":quality", "m:quality()",
                 "Cell shape statistics {min, max, mean} (1 for regular cells, towards 0 as they\n"
                 "degenerate), worst_cell (cell id from 0, as in error messages), min_volume,\n"
                 "max_volume and the total volume (areas in 2D). An inverted or degenerate\n"
                 "cell is an error naming it.\nexample: q = m:quality(); print(q.min, q.worst_cell)");
  lua_newtable(L);
  lua_pushcfunction(L, mesh_box);
  lua_setfield(L, -2, "box");
  lua_pushcfunction(L, mesh_load);
  lua_setfield(L, -2, "load");
  return 1;
}
