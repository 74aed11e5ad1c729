/* felab shell: matrices. A:element_matrices{...} returns a batch of element matrices
 * (felab.elemats), A:assemble{...} the assembled Jacobian (felab.matrix), both on a backend
 * (engine/matrix/matrix.h). Each handle holds its engine pointer first and keeps its operator alive
 * in user value 1. */
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/matrix/matrix.h"
#include "shell/shell.h"

static const char *const matrix_keys[] = {"at", "strategy", "variant", "backend", "precision",
                                          "block", "lanes", "scatter", "format", "chunk",
                                          "sigma", "geometry", "pattern", "deltas", "zeros",
                                          NULL};

/* The index of the string opts[key] in names[n] into *v (absent: kept), or an error saying
 * what it must be. */
static void opt_choice(lua_State *L, int t, const char *fname, const char *key,
                       const char *const *names, int n, const char *must, int *v)
{
  const char *s = felab_opt_field_name(L, t, fname, key);
  if (!s) return;
  for (int i = 0; i < n; i++)
    if (names[i] && !strcmp(s, names[i])) {
      *v = i;
      return;
    }
  luaL_error(L, "%s: %s must be %s, got '%s'", fname, key, must, s);
}

/* The geometry of the element matrices' stored factors, the assembly's fill (scatter) and
 * its product's layout (format, chunk, sigma) at t into o (engine/matrix/matrix.h). */
static void read_layout_opts(lua_State *L, int t, const char *fname, fe_matrix_opts *o)
{
  static const char *const geometries[] = {"auto", "stored", "vertices", "unshared"};
  static const char *const scatters[] = {"auto", "atomic", "nodes", "color", "rows"};
  static const char *const formats[] = {NULL, "csr", "sell", "cusparse"};
  static const char *const patterns[] = {"auto", "host", "device"}; /* FE_PATTERN_* */
  opt_choice(L, t, fname, "geometry", geometries, 4, "\"stored\" (factors stored: a set a class "
             "of congruent cells where the mesh has them, else a set a cell or point), "
             "\"unshared\" (a set a cell or point always), \"vertices\" (from the cell's "
             "corners) or \"auto\"", &o->geometry);
  opt_choice(L, t, fname, "scatter", scatters, 5, "\"atomic\" (an atomic add per cell and "
             "node), \"nodes\" (a sum per node), \"rows\" (a sum per row of stored element "
             "matrices), \"color\" (plain adds, color by color) or \"auto\"", &o->scatter);
  opt_choice(L, t, fname, "pattern", patterns, 3, "\"host\", \"device\" (where the "
             "assembly's pattern is built) or \"auto\" (the device where buffers are not host "
             "memory)", &o->pattern);
  opt_choice(L, t, fname, "format", formats, 4, "\"csr\", \"sell\" (SELL-C-sigma) or "
             "\"cusparse\" (cuSPARSE's product, cuda)", &o->format);
  static const char *const zeros[] = {NULL, "drop", "keep"}; /* FE_SELL_ON, _OFF */
  opt_choice(L, t, fname, "zeros", zeros, 3, "\"drop\" or \"keep\" (format \"sell\": the "
             "values of exactly zero left out of its copy or kept)", &o->drop_zeros);
  if (lua_getfield(L, t, "deltas") != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      luaL_error(L, "%s: deltas must be a boolean (format \"sell\": the columns as 16-bit "
                 "differences where they fit), got %s", fname, felab_kind_of(L, -1));
    o->deltas = lua_toboolean(L, -1) ? FE_SELL_ON : FE_SELL_OFF;
  }
  lua_pop(L, 1);
  const char *what[2] = {"chunk", "sigma"};
  int *dst[2] = {&o->chunk, &o->sigma}, hi[2] = {1024, INT_MAX};
  for (int i = 0; i < 2; i++) {
    if (lua_getfield(L, t, what[i]) != LUA_TNIL) {
      lua_Integer v;
      if (!felab_is_integer(L, -1, &v) || v < 1 || v > hi[i])
        luaL_error(L, "%s: %s must be an integer in 1..%d (format \"sell\": rows per %s), got %s",
                   fname, what[i], hi[i], i ? "sorting window" : "chunk",
                   felab_number_or_kind(L, -1));
      *dst[i] = (int)v;
    }
    lua_pop(L, 1);
  }
}

/* The options of element_matrices and assemble at t: where they run into o, their own into
 * mo; *at, *strategy, *variant. */
static void read_matrix_opts(lua_State *L, int t, const char *fname, fe_action_opts *o,
                             fe_matrix_opts *mo, const fe_vector **at, const char **strategy,
                             const char **variant)
{
  fe_action_opts_default(o);
  memset(mo, 0, sizeof *mo);
  *at = NULL;
  *strategy = *variant = NULL;
  if (lua_isnoneornil(L, t)) return;
  if (!lua_istable(L, t))
    luaL_error(L, "%s: the options must be a table, got %s", fname, felab_kind_of(L, t));
  felab_check_keys(L, t, fname, matrix_keys);
  o->backend = felab_opt_field_name(L, t, fname, "backend");
  *strategy = felab_opt_field_name(L, t, fname, "strategy");
  *variant = felab_opt_field_name(L, t, fname, "variant");
  const char *prec = felab_opt_field_name(L, t, fname, "precision");
  if (prec) {
    fe_precision p;
    if (fe_precision_parse(prec, &p)) felab_raise(L);
    o->precision = (int)p;
  }
  if (lua_getfield(L, t, "block") != LUA_TNIL) {
    lua_Integer b;
    if (!felab_is_integer(L, -1, &b) || b < 0 || b > INT_MAX)
      luaL_error(L, "%s: block must be an integer >= 0, got %s", fname, felab_number_or_kind(L, -1));
    mo->block = (int)b;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, t, "lanes") != LUA_TNIL) {
    lua_Integer b;
    if (!felab_is_integer(L, -1, &b) || b < 0 || b > 64)
      luaL_error(L, "%s: lanes must be an integer in 0..64 (items per row of the CSR product, "
                 "0: the backend's), got %s", fname, felab_number_or_kind(L, -1));
    mo->lanes = (int)b;
  }
  lua_pop(L, 1);
  read_layout_opts(L, t, fname, mo);
  lua_getfield(L, t, "at");
  if (!lua_isnil(L, -1)) *at = felab_check_vector(L, -1, fname, "opts.at");
  lua_pop(L, 1); /* anchored in the table */
}

/* A:element_matrices{at =, strategy = "quadrature", variant = "reg_nojac", backend =,
 * precision =} -> K, report */
int felab_op_element_matrices(lua_State *L)
{
  const char *fname = "A:element_matrices";
  fe_operator *A = *(fe_operator **)felab_check_self(L, 1, FELAB_OPERATOR, fname, "self");
  fe_action_opts o;
  fe_matrix_opts mo;
  const fe_vector *at;
  const char *strategy, *variant;
  read_matrix_opts(L, 2, fname, &o, &mo, &at, &strategy, &variant);
  if (mo.format || mo.chunk || mo.sigma || mo.pattern || mo.deltas || mo.drop_zeros)
    return luaL_error(L, "%s: format, chunk, sigma, deltas, zeros and pattern are A:assemble's "
                      "options (the assembled matrix's pattern and its product's layout)", fname);
  fe_elemats **out = (fe_elemats **)felab_push_handle(L, FELAB_ELEMATS, 1);
  fe_report rep;
  fe_elemats *K = NULL;
  FELAB_TRY(L, fe_element_matrices(A, at, &o, &mo, strategy, variant, &K, &rep));
  *out = K;
  felab_push_report(L, &rep);
  return 2;
}

/* A:assemble{at =, backend =, precision =, lanes =, scatter =, format =, chunk =, sigma =,
 * deltas =, zeros =} -> M, report */
int felab_op_assemble(lua_State *L)
{
  const char *fname = "A:assemble";
  fe_operator *A = *(fe_operator **)felab_check_self(L, 1, FELAB_OPERATOR, fname, "self");
  fe_action_opts o;
  fe_matrix_opts mo;
  const fe_vector *at;
  const char *strategy, *variant;
  read_matrix_opts(L, 2, fname, &o, &mo, &at, &strategy, &variant);
  if (strategy || variant)
    return luaL_error(L, "%s: the element matrices of an assembly are \"quadrature\" "
                      "\"reg_nojac\" (strategy and variant are element_matrices' options)", fname);
  fe_csr **out = (fe_csr **)felab_push_handle(L, FELAB_MATRIX, 1);
  fe_report rep;
  fe_csr *M = NULL;
  FELAB_TRY(L, fe_operator_assemble(A, at, &o, &mo, &M, &rep));
  *out = M;
  felab_push_report(L, &rep);
  return 2;
}

/* ---- felab.elemats ---- */

static fe_elemats *check_elemats(lua_State *L, int i, const char *fname)
{
  return *(fe_elemats **)felab_check_self(L, i, FELAB_ELEMATS, fname, "self");
}

static int em_free(lua_State *L)
{
  fe_elemats **p = luaL_checkudata(L, 1, FELAB_ELEMATS);
  fe_elemats_free(*p);
  *p = NULL;
  return 0;
}

/* K:get(cell) -> {{K11, K12, ...}, ...}: the matrix of cell `cell` (1-based) */
static int em_get(lua_State *L)
{
  fe_elemats *K = check_elemats(L, 1, "K:get");
  lua_Integer c;
  if (!felab_is_integer(L, 2, &c))
    return luaL_error(L, "K:get: the cell must be an integer, got %s", felab_number_or_kind(L, 2));
  if (c < 1 || c > K->ncells)
    return luaL_error(L, "K:get: cell %I is out of range (1..%d)", c, K->ncells);
  int n = K->n;
  double *v = lua_newuserdatauv(L, sizeof(double) * (size_t)n * n, 0); /* collected */
  FELAB_TRY(L, fe_elemats_get(K, (int)(c - 1), v));
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_createtable(L, n, 0);
    for (int j = 0; j < n; j++) {
      lua_pushnumber(L, v[i * n + j]);
      lua_rawseti(L, -2, j + 1);
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* K:to(backend [, precision]) -> a copy there */
static int em_to(lua_State *L)
{
  fe_elemats *K = check_elemats(L, 1, "K:to");
  if (lua_type(L, 2) != LUA_TSTRING)
    return luaL_error(L, "K:to: argument 1 must be a backend name, got %s", felab_kind_of(L, 2));
  fe_precision prec = K->prec;
  if (lua_type(L, 3) == LUA_TSTRING) FELAB_TRY(L, fe_precision_parse(lua_tostring(L, 3), &prec));
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(lua_tostring(L, 2), &be));
  lua_getiuservalue(L, 1, 1);
  fe_elemats **out = (fe_elemats **)felab_push_handle(L, FELAB_ELEMATS, -1);
  fe_elemats *k = NULL;
  FELAB_TRY(L, fe_elemats_convert(K, be, prec, &k));
  *out = k;
  return 1;
}

static int em_index(lua_State *L)
{
  fe_elemats **p = luaL_checkudata(L, 1, FELAB_ELEMATS);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!*p) return luaL_error(L, "elemats.%s: these element matrices were closed", k);
  if (!strcmp(k, "ncells")) lua_pushinteger(L, (*p)->ncells);
  else if (!strcmp(k, "n")) lua_pushinteger(L, (*p)->n);
  else if (!strcmp(k, "backend")) lua_pushstring(L, (*p)->be->name);
  else if (!strcmp(k, "precision")) lua_pushstring(L, fe_precision_name((*p)->prec));
  else lua_pushnil(L);
  return 1;
}

static int em_tostring(lua_State *L)
{
  fe_elemats **p = luaL_checkudata(L, 1, FELAB_ELEMATS);
  if (!*p) lua_pushliteral(L, "element matrices (closed)");
  else
    lua_pushfstring(L, "element matrices: %d cells of %d x %d %s on %s", (*p)->ncells, (*p)->n,
                    (*p)->n, (*p)->prec == FE_FLOAT ? "floats" : "doubles", (*p)->be->name);
  return 1;
}

/* ---- felab.matrix ---- */

static fe_csr *check_matrix(lua_State *L, int i, const char *fname)
{
  return *(fe_csr **)felab_check_self(L, i, FELAB_MATRIX, fname, "self");
}

static int mat_free(lua_State *L)
{
  fe_csr **p = luaL_checkudata(L, 1, FELAB_MATRIX);
  fe_csr_free(*p);
  *p = NULL;
  return 0;
}

/* M:apply(x) -> M x, report (on the matrix's backend) */
static int mat_apply(lua_State *L)
{
  fe_csr *M = check_matrix(L, 1, "M:apply");
  const fe_vector *x = felab_check_vector(L, 2, "M:apply", "argument 1 (x)");
  fe_vector **out = felab_push_vector_like(L, 2);
  fe_vector *y = NULL;
  fe_report rep;
  FELAB_TRY(L, fe_csr_apply(M, x, &y, &rep));
  *out = y;
  felab_push_report(L, &rep);
  return 2;
}

/* M:get() -> {rowptr = {..}, cols = {..}, vals = {..}}: the CSR arrays on the host, as
 * stored (row pointers and columns from 0; the values in double) */
static int mat_get(lua_State *L)
{
  fe_csr *M = check_matrix(L, 1, "M:get");
  int *rowptr, *cols;
  double *vals;
  FELAB_TRY(L, fe_csr_get(M, &rowptr, &cols, &vals));
  lua_createtable(L, 0, 3);
  lua_createtable(L, M->n + 1, 0);
  for (int i = 0; i <= M->n; i++) {
    lua_pushinteger(L, rowptr[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "rowptr");
  lua_createtable(L, (int)M->nnz, 0);
  for (long long i = 0; i < M->nnz; i++) {
    lua_pushinteger(L, cols[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "cols");
  lua_createtable(L, (int)M->nnz, 0);
  for (long long i = 0; i < M->nnz; i++) {
    lua_pushnumber(L, vals[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "vals");
  free(rowptr);
  free(cols);
  free(vals);
  return 1;
}

/* The entries M's product reads: SELL's kept ones, else the nonzeros. */
static long long sell_kept(const fe_csr *M)
{
  return M->format == FE_FORMAT_SELL ? M->nkept : M->nnz;
}

static int mat_index(lua_State *L)
{
  fe_csr **p = luaL_checkudata(L, 1, FELAB_MATRIX);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  if (!*p) return luaL_error(L, "matrix.%s: this matrix was closed", k);
  if (!strcmp(k, "nnz")) lua_pushinteger(L, (*p)->nnz);
  else if (!strcmp(k, "n")) lua_pushinteger(L, (*p)->n);
  else if (!strcmp(k, "backend")) lua_pushstring(L, (*p)->be->name);
  else if (!strcmp(k, "precision")) lua_pushstring(L, fe_precision_name((*p)->prec));
  else if (!strcmp(k, "format")) lua_pushstring(L, fe_csr_format_name(*p));
  else if (!strcmp(k, "chunk") && (*p)->format == FE_FORMAT_SELL) lua_pushinteger(L, (*p)->chunk);
  else if (!strcmp(k, "sigma") && (*p)->format == FE_FORMAT_SELL) lua_pushinteger(L, (*p)->sigma);
  else if (!strcmp(k, "padding")) /* the share of the product's slots that are padding */
    lua_pushnumber(L, (double)((*p)->nslots - sell_kept(*p)) / (double)((*p)->nslots + !(*p)->nslots));
  else if (!strcmp(k, "bytes")) /* what it holds on its backend: CSR, and SELL's copy */
    lua_pushinteger(L, (lua_Integer)fe_csr_bytes(*p));
  else if (!strcmp(k, "product_bytes")) /* its arrays one product reads */
    lua_pushinteger(L, (lua_Integer)fe_csr_matrix_bytes(*p));
  else if (!strcmp(k, "dropped") && (*p)->format == FE_FORMAT_SELL) /* zeros left out */
    lua_pushinteger(L, (*p)->nnz - (*p)->nkept);
  else if (!strcmp(k, "wide") && (*p)->format == FE_FORMAT_SELL) /* 32-bit chunks */
    lua_pushinteger(L, (*p)->nwide);
  else if (!strcmp(k, "chunks") && (*p)->format == FE_FORMAT_SELL)
    lua_pushinteger(L, (*p)->nchunks);
  else if (!strcmp(k, "deltas") && (*p)->format == FE_FORMAT_SELL)
    lua_pushboolean(L, (*p)->deltas);
  else lua_pushnil(L);
  return 1;
}

static int mat_tostring(lua_State *L)
{
  fe_csr **p = luaL_checkudata(L, 1, FELAB_MATRIX);
  if (!*p) lua_pushliteral(L, "matrix (closed)");
  else
    lua_pushfstring(L, "%s matrix %d x %d, %I nonzeros, %s on %s",
                    (*p)->format == FE_FORMAT_SELL ? "SELL-C-sigma" : "CSR", (*p)->n, (*p)->n,
                    (lua_Integer)(*p)->nnz, fe_precision_name((*p)->prec), (*p)->be->name);
  return 1;
}

/* export.mtx(path, M) -> path */
int felab_export_mtx(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  fe_csr *M = *(fe_csr **)felab_check_handle(L, 2, FELAB_MATRIX, "export.mtx", "argument 2 (M)");
  FELAB_TRY(L, fe_csr_export_mtx(M, path));
  lua_pushvalue(L, 1);
  return 1;
}

/* Register felab.elemats and felab.matrix (idempotent) and their help; pushes nothing. */
void felab_open_matrix(lua_State *L)
{
  static const luaL_Reg em_methods[] = {{"get", em_get}, {"to", em_to}, {NULL, NULL}};
  static const luaL_Reg em_meta[] = {
      {"__gc", em_free}, {"__close", em_free}, {"__tostring", em_tostring}, {NULL, NULL}};
  static const luaL_Reg mat_methods[] = {{"apply", mat_apply}, {"get", mat_get}, {NULL, NULL}};
  static const luaL_Reg mat_meta[] = {
      {"__gc", mat_free}, {"__close", mat_free}, {"__tostring", mat_tostring}, {NULL, NULL}};
  felab_register_type(L, FELAB_ELEMATS, em_meta, em_methods, em_index);
  lua_pop(L, 1);
  felab_register_type(L, FELAB_MATRIX, mat_meta, mat_methods, mat_index);
  lua_pop(L, 1);
  felab_help_add(FELAB_OPERATOR ":element_matrices",
                 "K, rep = A:element_matrices{at = u, strategy = \"quadrature\", variant = "
                 "\"reg_nojac\", block =, backend =, precision =}",
                 "The element matrices of the Jacobian at u (zero when absent), one per cell, on\n"
                 "the backend: K.ncells matrices of K.n x K.n, row-major in cell order, a cell's\n"
                 "dof b*ncomp + k (basis function b, component k). K:get(cell) is a Lua table\n"
                 "of rows (cell 1-based); K:to(\"cpu\") copies. The report has the stages:\n"
                 "setup (prepare), transfer (in), seconds (the kernel). Strategy \"quadrature\"\n"
                 "(Banas et al.), variants that give the same matrices: reg_* keep a column\n"
                 "per item in registers, shm_* the matrices under construction in shared memory\n"
                 "(block = cells per work group; parts of columns where they do not fit);\n"
                 "*_nojac read the Jacobian's factors stored per point, *_jac compute them from\n"
                 "the node coordinates (refused where the space's nodes cannot carry the map:\n"
                 "first-order spaces on curved meshes); gemm: K = sum_q T^T D_q T, a small GEMM\n"
                 "per cell in register tiles (D_q probed from the physics per point); gemm_mma:\n"
                 "its GEMM on fp64 tensor cores (cuda, double; up to 1.3x gemm's rate at P5 and\n"
                 "Q4, slower at P4 and Q3). rep.why says the shape that ran. Default:\n"
                 "gemm on a GPU from 20 dofs per cell, else reg_nojac (measured fastest).\n"
                 "Strategy \"tensor\" (Knepley-Terrel; no variant): reference tensors\n"
                 "computed once contracted with a geometric tensor per cell, block cells per work\n"
                 "group (default 32); affine simplices and a Jacobian constant per cell only (not\n"
                 "reading u, x or fields; the error says which).\n"
                 "example: K = A:element_matrices{strategy = \"tensor\"}; print(K:get(1)[1][1])");
  felab_help_add(FELAB_OPERATOR ":assemble",
                 "M, rep = A:assemble{at = u, backend =, precision =, scatter =, pattern =, "
                 "lanes =, format =, chunk =, sigma =}",
                 "The Jacobian at u assembled in CSR on the backend: the pattern from the dof map,\n"
                 "built on the device (pattern = \"device\", a GPU's default: nothing of the\n"
                 "matrix's size on the host) or on the host (\"host\", the cpu's), the values\n"
                 "from the element matrices: scatter = \"nodes\" (the default: each row sums its\n"
                 "cells' entries in cell order, the same bits every run; on the cpu while the\n"
                 "host builds the pattern, the matrices made as the rows need them, and on a\n"
                 "box's vertices (P1, Q1) the pattern from its lattice), \"rows\"\n"
                 "(the same sums from stored element matrices, on the device, into either\n"
                 "pattern: the two patterns' matrices are equal bit for bit), \"atomic\"\n"
                 "(an atomic add per entry) or \"color\" (plain adds, a launch per color; these\n"
                 "two into the host's pattern). rep.setup_parts: the seconds of each part\n"
                 "(pattern, geometry, cell_map, matrices, fill, format, compile, transfer);\n"
                 "rep.memory: the bytes the matrix holds by the part that built them.\n"
                 "Constrained rows are the identity's and free rows have no constrained columns,\n"
                 "so M:apply(w) equals A:apply(w). lanes = items per row of M:apply (1: scalar\n"
                 "CSR; default 4 on a GPU, 1 on the cpu). format = \"sell\" (a GPU's default) makes\n"
                 "M:apply read a SELL-C-sigma copy (rows sorted by length in windows of sigma\n"
                 "rows, chunks of C = chunk rows padded to their longest and stored column-major;\n"
                 "default C = 32 on a GPU, 8 on the cpu, sigma = 128 C on a GPU, 8 C on the cpu;\n"
                 "sigma = 1: no sorting).\n"
                 "format = \"cusparse\" (cuda) multiplies the same CSR arrays with cuSPARSE, the\n"
                 "reference felab's products are held against (FELAB_CUSPARSE: its path).\n"
                 "M.format, M.chunk, M.sigma, M.padding (the share of padded slots); M.n, M.nnz;\n"
                 "M:get() -> {rowptr =, cols =, vals =}: the CSR arrays (indices from 0);\n"
                 "export.mtx(path, M) writes it as Matrix Market (scipy.io.mmread, PETSc, MATLAB).\n"
                 "example: M = A:assemble(); y = M:apply(w)");
  felab_help_add("export.mtx", "export.mtx(path, M)",
                 "Write an assembled matrix (A:assemble) as Matrix Market coordinate real\n"
                 "general, 1-based, full precision.\nexample: export.mtx(\"out/K.mtx\", M)");
}
