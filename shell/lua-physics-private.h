/* Private to shell/lua-physics.c (physics.new and the felab.physics handle) and
 * shell/lua-physics-make.c (what a definition becomes: a traced or a raw C engine physics).
 * Nothing else includes it; the rest of the shell asks for a physics by felab_physics_for
 * (shell.h). */
#ifndef FE_SHELL_LUA_PHYSICS_PRIVATE_H
#define FE_SHELL_LUA_PHYSICS_PRIVATE_H

#include <lua.h>

struct fe_physics;
struct fe_space;
struct fe_vector;

/* Raise the engine's error from a function that returns no int. */
#define TRY(L, call)                 \
  do {                               \
    if ((call) != 0) felab_raise(L); \
  } while (0)

/* shell/lua-physics-make.c, on the definition table at spec (physics.new's copy): */
/* Its components (1..FE_PHYSICS_MAX_COMP; "dim" is dim), or an error. */
int felab_physics_components(lua_State *L, int spec, int dim);
/* Trace it for dimension dim: the engine physics with its per-region values and fields. */
struct fe_physics *felab_physics_trace(lua_State *L, int spec, int dim);
/* A raw C physics made of it into *p, set before anything that can raise (the handle that
 * holds *p owns it): its bodies, then its constants, per-region values and fields. */
void felab_physics_raw(lua_State *L, int spec, struct fe_physics **p);
/* The vector at i as the value of field `field`, with its space into *space (errors name
 * fname): a vector of a space, never a free vector. */
struct fe_vector *felab_physics_field_vector(lua_State *L, int i, const char *fname,
                                            const char *field, const struct fe_space **space);

#endif
