/* felab shell: the Lua bindings of the engine and the help system. */
#ifndef FE_SHELL_H
#define FE_SHELL_H

#include <lua.h>

#define FELAB_VERSION "0.1.0"

/* Open every felab module as a global table: mesh, fe, physics, solve, device, perf,
 * export, plus help(). Defined in shell/lua-felab.c. */
void felab_open_all(lua_State *L);

/* one per binding file */
int felab_open_mesh(lua_State *L);    /* shell/lua-mesh.c:    mesh.box, mesh metatable */
int felab_open_fe(lua_State *L);      /* shell/lua-fe.c:      fe.space, fe.operator, spaces, vectors, operators */
int felab_open_physics(lua_State *L); /* shell/lua-physics.c: physics.poisson */
int felab_open_solve(lua_State *L);   /* shell/lua-solve.c:   solve.cg */
int felab_open_device(lua_State *L);  /* shell/lua-device.c:  device.*, perf.*, reports */
int felab_open_export(lua_State *L);  /* shell/lua-export.c:  export.vtu */
int felab_open_help(lua_State *L);    /* shell/help.c:        help() */
int felab_open_vector(lua_State *L);  /* shell/lua-vector.c:  the vector metatable */
int felab_open_operator(lua_State *L); /* shell/lua-operator.c: fe.operator and its metatable */

/* Raise the engine's current error (engine/error.h) as a Lua error and clear it. */
int felab_raise(lua_State *L);
/* Call an engine function result: on nonzero raise it. */
#define FELAB_TRY(L, call)                 \
  do {                                     \
    if ((call) != 0) return felab_raise(L); \
  } while (0)

/* Push a report as a userdata of type "felab.report" (fields flops, bytes, seconds,
 * gflops, gbytes, predicted_seconds, bound, ...; tostring prints the block). */
struct fe_report;
void felab_push_report(lua_State *L, const struct fe_report *r);

/* Help entries: key is "mesh.box", "fe.space", or a type name like "felab.mesh". */
void felab_help_add(const char *key, const char *signature, const char *text);

/* Userdata type names (metatables registered with luaL_newmetatable). */
#define FELAB_MESH "felab.mesh"
#define FELAB_SPACE "felab.space"
#define FELAB_VECTOR "felab.vector"
#define FELAB_PHYSICS "felab.physics"
#define FELAB_OPERATOR "felab.operator"
#define FELAB_REPORT "felab.report"

#endif
