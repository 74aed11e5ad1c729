/* felab shell: the live progress line of long calls (engine/core/progress.h) and its switch,
 * perf.progress.
 *
 * The line is drawn on stderr, in place ('\r', then the text, then "erase to the end of
 * the line"), only when standard input and standard error are both terminals, so a
 * script's output or a piped session never holds it. FELAB_PROGRESS=0 turns it off,
 * FELAB_PROGRESS_AFTER=seconds sets how long a call runs before it shows (2 s). The
 * prompt erases it when a call ends, fails or is interrupted (shell/main.c). */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "engine/core/progress.h"
#include "shell/shell.h"

static int at_terminal; /* stdin and stderr are terminals: the line may be drawn */
static int enabled;     /* the line is drawn (at_terminal, and not turned off) */

/* The sink: draw line in place on stderr, cut to the terminal's width so it never wraps;
 * "" erases it. Called by the engine with its lock held, maybe from its watcher thread,
 * so only write(2) is used. */
static void draw_on_terminal(const char *line, void *ctx)
{
  (void)ctx;
  struct winsize ws;
  size_t width = 80;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) width = ws.ws_col;
  char buf[600];
  size_t n = 0, len = strlen(line);
  if (len > width - 1) len = width - 1;
  if (len > sizeof buf - 8) len = sizeof buf - 8;
  buf[n++] = '\r';
  memcpy(buf + n, line, len);
  n += len;
  memcpy(buf + n, "\033[K", 3); /* erase the rest of the line */
  n += 3;
  for (size_t at = 0; at < n;) {
    ssize_t w = write(STDERR_FILENO, buf + at, n - at);
    if (w <= 0) return;
    at += (size_t)w;
  }
}

/* Turn the line on or off (on only takes effect at a terminal). */
static void progress_enable(int on)
{
  enabled = on && at_terminal;
  fe_progress_set_sink(enabled ? draw_on_terminal : NULL, NULL);
}

/* perf.progress([on]): turn the live line on or off; returns whether it is on now. */
static int perf_progress(lua_State *L)
{
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    progress_enable(lua_toboolean(L, 1));
  }
  lua_pushboolean(L, enabled);
  return 1;
}

void felab_open_progress(lua_State *L, int terminal)
{
  const char *env = getenv("FELAB_PROGRESS"), *after = getenv("FELAB_PROGRESS_AFTER");
  at_terminal = terminal;
  progress_enable(!(env && !strcmp(env, "0")));
  if (after && *after) {
    char *end;
    double s = strtod(after, &end);
    if (*end == '\0' && s >= 0) fe_progress_set_after(s);
  }
  if (lua_getglobal(L, "perf") == LUA_TTABLE) {
    lua_pushcfunction(L, perf_progress);
    lua_setfield(L, -2, "progress");
  }
  lua_pop(L, 1);
  felab_help_add("perf.progress", "perf.progress([on])",
                 "Turns the live line of long calls on or off and returns whether it is on. A\n"
                 "solve, a Newton iteration or Gmsh meshing that runs over 2 s shows one line on\n"
                 "the terminal (iteration, residual, elapsed time, an estimate of the rest),\n"
                 "erased when it ends; never in a script's output. FELAB_PROGRESS=0 starts it\n"
                 "off, FELAB_PROGRESS_AFTER=seconds changes the 2 s.\n"
                 "example: perf.progress(false); x = solve.cg(A); perf.progress(true)");
}
