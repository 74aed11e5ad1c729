/* felab's Lua modules put together: felab_open_all opens every binding file's module as a
 * global, and felab_raise turns the engine's current error into a Lua error.
 *
 * The convention for binding files: felab_open_X(L) pushes exactly one value, its module
 * table (help pushes the help function), and returns 1; felab_open_all stores it in
 * package.loaded and as the global of the module's name, so `require "mesh"` works too.
 * felab_open_device also sets the global `perf` itself and returns the `device` table. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "engine/core/error.h"
#include "shell/shell.h"

/* The libraries written in Lua (build/gen/lualib.c). */
const char *felab_lua_library(const char *name);
/* The lessons, scripts/lessons/NN-name.lua (build/gen/lessons.c). */
const char *felab_lesson_source(const char *name);
const char *felab_lesson_source_name(int i);

/* Load the library `name` written in Lua (build/gen/lualib.c) and leave its chunk on the
 * stack. */
static void load_library(lua_State *L, const char *name)
{
  char chunk[64];
  snprintf(chunk, sizeof chunk, "=%s.lua", name);
  const char *lib = felab_lua_library(name);
  if (!lib || luaL_loadbuffer(L, lib, strlen(lib), chunk) != LUA_OK)
    luaL_error(L, "felab: the library %s.lua does not load: %s", name,
               lib ? lua_tostring(L, -1) : "missing");
}

void felab_push_util(lua_State *L)
{
  if (lua_getfield(L, LUA_REGISTRYINDEX, "felab:util") == LUA_TTABLE) return;
  lua_pop(L, 1);
  load_library(L, "util");
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "felab:util");
}

/* Run the library `name` with the globals `args`, then the value at stack index `extra` (0:
 * none), then the shared helpers (util.lua) as its arguments; what it returns may be a list
 * of help entries {key, signature, text}, which are added. The stack is left as it was. */
static void run_library(lua_State *L, const char *name, const char *const *args, int nargs,
                        int extra)
{
  if (extra) extra = lua_absindex(L, extra);
  load_library(L, name);
  for (int i = 0; i < nargs; i++) lua_getglobal(L, args[i]);
  if (extra) lua_pushvalue(L, extra);
  felab_push_util(L);
  lua_call(L, nargs + (extra ? 1 : 0) + 1, 1);
  for (lua_Integer i = 1; lua_istable(L, -1) && lua_rawgeti(L, -1, i) == LUA_TTABLE; i++) {
    for (int j = 1; j <= 3; j++) lua_rawgeti(L, -j, j); /* key, signature, text */
    felab_help_add(lua_tostring(L, -3), lua_tostring(L, -2), lua_tostring(L, -1));
    lua_pop(L, 4);
  }
  lua_pop(L, lua_istable(L, -1) ? 2 : 1);
}

/* Whether stdin is a terminal: lesson() waits for Enter between steps only there. */
static int stdin_is_terminal(lua_State *L)
{
  lua_pushboolean(L, isatty(STDIN_FILENO));
  return 1;
}

/* Read one line of stdin for lesson()'s pause and push it (without its newline), or nil at
 * the end of input. A chunk runs with SIGINT restarting reads (shell/main.c), so the wait
 * is a poll, which Ctrl-C always ends: then "interrupted" is raised at once, not after the
 * next Enter. Bytes are read one at a time, so nothing past the line is taken from stdin. */
static int read_pause_line(lua_State *L)
{
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int got = 0;
  for (;;) {
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int ready = poll(&p, 1, 200);
    if (fe_interrupt_flag) return luaL_error(L, "interrupted");
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char c;
    ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* the end of input (or an error): what was read, if anything */
    got = 1;
    if (c == '\n') break;
    luaL_addchar(&b, c);
  }
  if (!got) {
    lua_pushnil(L);
    return 1;
  }
  luaL_pushresult(&b);
  return 1;
}

/* Push the table lesson.lua starts from: {names = the lessons' file names in order,
 * sources = {name = text}, stdin_is_terminal = a function, read_line = a function}. */
static void push_lessons(lua_State *L)
{
  lua_createtable(L, 0, 3);
  lua_newtable(L); /* names */
  lua_newtable(L); /* sources */
  for (int i = 0; felab_lesson_source_name(i); i++) {
    const char *name = felab_lesson_source_name(i);
    lua_pushstring(L, name);
    lua_rawseti(L, -3, i + 1);
    lua_pushstring(L, felab_lesson_source(name));
    lua_setfield(L, -2, name);
  }
  lua_setfield(L, -3, "sources");
  lua_setfield(L, -2, "names");
  lua_pushcfunction(L, stdin_is_terminal);
  lua_setfield(L, -2, "stdin_is_terminal");
  lua_pushcfunction(L, read_pause_line);
  lua_setfield(L, -2, "read_line");
}

/* Open each module and make it a global (and a loaded package), then the libraries written
 * in Lua on them (and the global show); the stack is unchanged. */
void felab_open_all(lua_State *L)
{
  static const luaL_Reg modules[] = {
      {"mesh", felab_open_mesh},     {"fe", felab_open_fe},         {"physics", felab_open_physics},
      {"solve", felab_open_solve},   {"device", felab_open_device}, {"export", felab_open_export},
      {"help", felab_open_help},     {NULL, NULL},
  };
  for (const luaL_Reg *m = modules; m->name; m++) {
    luaL_requiref(L, m->name, m->func, 1);
    lua_pop(L, 1);
  }
  felab_open_partition(L);
  /* solve.heat, export.pvd, fe.integral */
  const char *timestep_args[] = {"solve", "export", "fe", "physics", "perf"};
  run_library(L, "timestep", timestep_args, 5, 0);
  /* perf.roofline, perf.sweep, perf.plot, and info:plot through the metatable of the
   * solvers' info tables */
  const char *plot_args[] = {"perf", "mesh", "fe", "physics", "device", "solve"};
  luaL_newmetatable(L, FELAB_INFO);
  run_library(L, "plot", plot_args, 6, -1);
  lua_pop(L, 1);
  /* what-if (perf.predict, perf.compare) on the datasheet table devices.lua */
  load_library(L, "devices");
  lua_call(L, 0, 1);
  const char *whatif_args[] = {"perf", "device"};
  run_library(L, "whatif", whatif_args, 2, -1);
  lua_pop(L, 1);
  /* A:explain, given {methods = the table the operator's __index reads (its upvalue 1),
   * meta = the metatable (for help())} */
  luaL_getmetatable(L, FELAB_OPERATOR);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "meta");
  lua_getfield(L, -2, "__index");
  lua_getupvalue(L, -1, 1);
  lua_setfield(L, -3, "methods");
  lua_pop(L, 1); /* __index */
  run_library(L, "explain", NULL, 0, -1);
  lua_pop(L, 2); /* the table, the metatable */
  /* lesson(...), the lessons (lesson.lua sets the field lesson of the table it is given) */
  push_lessons(L);
  run_library(L, "lesson", NULL, 0, -1);
  lua_getfield(L, -1, "lesson");
  lua_setglobal(L, "lesson");
  lua_pop(L, 1);
  /* show(...), the printer of values that the prompt uses too (registry "felab.show") */
  load_library(L, "show");
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "felab.show");
  lua_setglobal(L, "show");
}

/* Whether FELAB_TRACEBACK asks for engine tracebacks. */
static int traceback_wanted(void)
{
  const char *tb = getenv("FELAB_TRACEBACK");
  return tb && *tb && strcmp(tb, "0") != 0;
}

/* Raise the engine's current error as a Lua error "file:line: message" (the position of
 * the Lua code that called the binding), with the engine's frames appended when
 * FELAB_TRACEBACK=1, and clear the engine error. Never returns. */
int felab_raise(lua_State *L)
{
  const char *msg = fe_error_message();
  luaL_where(L, 1);
  lua_pushstring(L, *msg ? msg : "engine error (no message was set)");
  int n = 2;
  if (traceback_wanted() && *fe_error_trace()) {
    const char *trace = fe_error_trace();
    size_t len = strlen(trace);
    while (len > 0 && trace[len - 1] == '\n') len--; /* the message ends without a newline */
    lua_pushliteral(L, "\nengine traceback:\n");
    lua_pushlstring(L, trace, len);
    n += 2;
  }
  lua_concat(L, n);
  fe_error_clear();
  return lua_error(L);
}
