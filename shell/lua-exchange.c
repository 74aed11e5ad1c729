/* felab shell: the link between mpirun's ranks and the model of a split space's exchange
 * (engine/parallel/link.c, engine/perf/model.c): device.link, perf.exchange, perf.reduction
 * and perf.share, the pieces perf.compare's `ranks` (shell/lib/whatif.lua) predicts N ranks
 * with. */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/link.h"
#include "engine/perf/perf.h"
#include "shell/shell.h"

/* The number field k of the table at idx (0 when absent or not a positive number). */
static double positive_field(lua_State *L, int idx, const char *k)
{
  lua_getfield(L, idx, k);
  double v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
  lua_pop(L, 1);
  return v > 0 ? v : 0;
}

void felab_calibration_transfers(lua_State *L, int idx, fe_calibration *c)
{
  c->read_us = positive_field(L, idx, "read_us");
  c->read_gbytes = positive_field(L, idx, "read_gbytes");
  c->write_us = positive_field(L, idx, "write_us");
  c->write_gbytes = positive_field(L, idx, "write_gbytes");
}

/* Set the table on the stack's top's field `name` to {warm, cold}. */
static void push_warm_cold(lua_State *L, const char *name, double warm, double cold)
{
  lua_createtable(L, 2, 0);
  lua_pushnumber(L, warm);
  lua_rawseti(L, -2, 1);
  lua_pushnumber(L, cold);
  lua_rawseti(L, -2, 2);
  lua_setfield(L, -2, name);
}

/* Push link l as {latency_us =, gbytes =, allreduce_us =, ranks =, points = {{bytes, us},
 * ...}}, or nil where not valid. */
static void push_link(lua_State *L, const fe_link *l)
{
  if (!l->valid) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, l->latency_us);
  lua_setfield(L, -2, "latency_us");
  lua_pushnumber(L, l->gbytes);
  lua_setfield(L, -2, "gbytes");
  lua_pushnumber(L, l->allreduce_us);
  lua_setfield(L, -2, "allreduce_us");
  lua_pushinteger(L, l->ranks);
  lua_setfield(L, -2, "ranks");
  lua_createtable(L, l->npoints, 0); /* {{bytes, us}, ...}: the measured messages */
  for (int i = 0; i < l->npoints; i++) {
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, l->point_bytes[i]);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, l->point_us[i]);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "points");
  if (l->nhost >= 2) { /* {{entries, warm us, cold us}, ...}: the cpu's whole host exchange */
    lua_createtable(L, l->nhost, 0);
    for (int i = 0; i < l->nhost; i++) {
      const double v[3] = {l->host_entries[i], l->host_warm_us[i], l->host_cold_us[i]};
      lua_createtable(L, 3, 0);
      for (int j = 0; j < 3; j++) {
        lua_pushnumber(L, v[j]);
        lua_rawseti(L, -2, j + 1);
      }
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "host");
    /* {warm ns, cold ns}: a line, and a page, past contiguous entries' */
    push_warm_cold(L, "lines", l->line_warm_ns, l->line_cold_ns);
    push_warm_cold(L, "pages", l->page_warm_ns, l->page_cold_ns);
    if (l->keep_bytes > 0) { /* what the cache keeps of the host exchange's data, bytes */
      lua_pushnumber(L, l->keep_bytes);
      lua_setfield(L, -2, "keep_bytes");
    }
  }
}

int felab_calibrate_link(lua_State *L)
{
  if (!fe_comm_parallel()) return 0;
  fe_link l;
  FELAB_TRY(L, fe_link_measure(&l, 1));
  push_link(L, &l);
  return 1;
}

/* The link of this session (under mpirun: every rank together on first use) or, alone, the
 * one stored on this machine by an earlier session of several ranks (not valid: none). */
static int current_link(lua_State *L, fe_link *l)
{
  memset(l, 0, sizeof *l);
  if (fe_comm_parallel()) {
    const fe_link *s;
    FELAB_TRY(L, fe_link_get(&s));
    *l = *s;
  } else
    FELAB_TRY(L, fe_link_stored(1, l));
  return 0;
}

/* device.link() -> {latency_us =, gbytes =, allreduce_us =, ranks =} or nil */
static int device_link(lua_State *L)
{
  fe_link l;
  current_link(L, &l);
  push_link(L, &l);
  return 1;
}

/* The link table at idx's field `name`, {warm ns, cold ns} where given (else left as is). */
static void link_more(lua_State *L, int idx, const char *name, double *warm, double *cold)
{
  if (lua_getfield(L, idx, name) == LUA_TTABLE) {
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    *warm = lua_tonumber(L, -2), *cold = lua_tonumber(L, -1);
    lua_pop(L, 2);
    if (!(*warm >= 0 && *cold >= 0))
      luaL_error(L, "the link's %s must be {warm ns, cold ns}, numbers >= 0", name);
  }
  lua_pop(L, 1);
}

/* The link argument at idx: a table (latency_us, gbytes, allreduce_us, ranks and points, as
 * device.link() gives), false (none), or nil (the session's, or the stored one). */
static void link_arg(lua_State *L, int idx, fe_link *l)
{
  memset(l, 0, sizeof *l);
  if (lua_isnoneornil(L, idx)) {
    current_link(L, l);
    return;
  }
  if (lua_isboolean(L, idx) && !lua_toboolean(L, idx)) return;
  if (!lua_istable(L, idx))
    luaL_error(L, "the link must be a table {latency_us =, gbytes =, allreduce_us =, ranks =}, "
                  "false or nil, got %s", felab_kind_of(L, idx));
  l->latency_us = positive_field(L, idx, "latency_us");
  l->gbytes = positive_field(L, idx, "gbytes");
  l->allreduce_us = positive_field(L, idx, "allreduce_us");
  l->ranks = (int)positive_field(L, idx, "ranks");
  if (l->ranks < 2) l->ranks = 2;
  l->valid = l->latency_us > 0;
  if (lua_getfield(L, idx, "points") == LUA_TTABLE) { /* {{bytes, us}, ...}, sizes ascending */
    int n = (int)lua_rawlen(L, -1);
    for (int i = 0; i < n && i < FE_LINK_POINTS; i++) {
      lua_rawgeti(L, -1, i + 1);
      double b = 0, t = 0;
      if (lua_istable(L, -1)) {
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        b = lua_tonumber(L, -2), t = lua_tonumber(L, -1);
        lua_pop(L, 2);
      }
      lua_pop(L, 1);
      if (!(b > 0 && t > 0) || (i && b <= l->point_bytes[i - 1]))
        luaL_error(L, "the link's points must be {bytes, us} pairs of positive numbers, sizes "
                      "ascending (point %d)", i + 1);
      l->point_bytes[i] = b, l->point_us[i] = t, l->npoints = i + 1;
    }
    if (l->npoints < 2) l->npoints = 0;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "host") == LUA_TTABLE) { /* {{entries, warm us, cold us}, ...} */
    int n = (int)lua_rawlen(L, -1);
    for (int i = 0; i < n && i < FE_LINK_HOST; i++) {
      double v[3] = {0, 0, 0};
      lua_rawgeti(L, -1, i + 1);
      for (int j = 0; j < 3 && lua_istable(L, -1); j++) {
        lua_rawgeti(L, -1, j + 1);
        v[j] = lua_tonumber(L, -1);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
      if (!(v[0] > 0 && v[1] > 0 && v[2] > 0) || (i && v[0] <= l->host_entries[i - 1]))
        luaL_error(L, "the link's host points must be {entries, warm us, cold us} triples of "
                      "positive numbers, entries ascending (point %d)", i + 1);
      l->host_entries[i] = v[0], l->host_warm_us[i] = v[1], l->host_cold_us[i] = v[2];
      l->nhost = i + 1;
    }
    if (l->nhost < 2) l->nhost = 0;
  }
  lua_pop(L, 1);
  /* {warm ns, cold ns} a line more, and a page more */
  link_more(L, idx, "lines", &l->line_warm_ns, &l->line_cold_ns);
  link_more(L, idx, "pages", &l->page_warm_ns, &l->page_cold_ns);
  l->keep_bytes = positive_field(L, idx, "keep_bytes");
}

/* The calibration argument at idx: a table shaped like device.info().calibration.double (the
 * fields the exchange reads: sync_us, launch_us, gbytes, l2_gbytes, indexed_gops,
 * indexed_llc_gops, gpu, read_*, write_*), or nil:
 * the default backend's in the default precision (measured first where it has none). */
static int calibration_arg(lua_State *L, int idx, fe_calibration *c)
{
  memset(c, 0, sizeof *c);
  if (lua_isnoneornil(L, idx)) {
    fe_backend *be;
    fe_precision prec = fe_precision_default();
    FELAB_TRY(L, fe_backend_get(NULL, &be));
    fe_report none;
    memset(&none, 0, sizeof none); /* a prediction of nothing: loads or measures the rates */
    FELAB_TRY(L, fe_perf_predict(be, prec, &none));
    *c = be->calib[prec];
    return 0;
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  c->sync_us = positive_field(L, idx, "sync_us");
  c->launch_us = positive_field(L, idx, "launch_us");
  c->gbytes = positive_field(L, idx, "gbytes");
  c->l2_gbytes = positive_field(L, idx, "l2_gbytes");
  c->indexed_gops = positive_field(L, idx, "indexed_gops");
  c->indexed_llc_gops = positive_field(L, idx, "indexed_llc_gops");
  c->llc_bytes = positive_field(L, idx, "llc_bytes");
  c->llc_keep_bytes = positive_field(L, idx, "llc_keep_bytes");
  lua_getfield(L, idx, "gpu");
  c->gpu = lua_toboolean(L, -1);
  lua_pop(L, 1);
  felab_calibration_transfers(L, idx, c);
  return 0;
}

/* perf.exchange(work [, calibration [, link]]) -> {gather =, read =, link =, write =, sum =,
 * total =}: the model's seconds of one exchange (work: {messages, bytes, entries, word, shared,
 * sources [, direct] [, touched] [, lines] [, pages]}, as P:exchange(V) gives a part's;
 * direct: device to device; touched: the bytes streamed through a cpu's cache before it;
 * lines, pages: the vector's lines and pages the gather and the sums go through). */
static int perf_exchange(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TTABLE);
  fe_exchange_work x = {.messages = positive_field(L, 1, "messages"),
                        .bytes = positive_field(L, 1, "bytes"),
                        .entries = positive_field(L, 1, "entries"),
                        .word = positive_field(L, 1, "word"),
                        .shared = positive_field(L, 1, "shared"),
                        .sources = positive_field(L, 1, "sources"),
                        .lines = positive_field(L, 1, "lines"),
                        .pages = positive_field(L, 1, "pages")};
  if (!(x.word > 0)) x.word = 8;
  lua_getfield(L, 1, "direct");
  x.direct = lua_toboolean(L, -1);
  lua_pop(L, 1);
  fe_calibration c;
  fe_link l;
  calibration_arg(L, 2, &c);
  link_arg(L, 3, &l);
  /* touched: the bytes the machine's ranks streamed through the cache before it (an action's,
   * each rank's on a cpu); the share of the exchange's data they took out of it */
  x.cold = fe_perf_exchange_cold(positive_field(L, 1, "touched"), fe_perf_exchange_keep(&c, &l));
  fe_exchange_terms t;
  fe_perf_exchange(&c, &l, &x, &t);
  const struct {
    const char *k;
    double v;
  } f[] = {{"gather", t.gather}, {"read", t.read}, {"link", t.link},
           {"write", t.write},   {"sum", t.sum},   {"total", t.total}};
  lua_createtable(L, 0, 6);
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    lua_pushnumber(L, f[i].v);
    lua_setfield(L, -2, f[i].k);
  }
  return 1;
}

/* perf.reduction(entries, word, ranks [, calibration [, link]]) -> seconds: a reduction of a
 * split space's vectors (the gather and read of `entries` another rank owns, an
 * MPI_Allreduce over `ranks`). */
static int perf_reduction(lua_State *L)
{
  double entries = luaL_checknumber(L, 1), word = luaL_checknumber(L, 2);
  lua_Integer ranks = luaL_checkinteger(L, 3);
  if (entries < 0 || word <= 0 || ranks < 1 || ranks > 1 << 24)
    return luaL_error(L, "perf.reduction: entries >= 0, word > 0 and ranks 1 to 2^24, got %f, "
                         "%f, %I", entries, word, ranks);
  fe_calibration c;
  fe_link l;
  calibration_arg(L, 4, &c);
  link_arg(L, 5, &l);
  lua_pushnumber(L, fe_perf_reduction(&c, &l, entries, word, (int)ranks));
  return 1;
}

/* perf.share(rep, f) -> a copy of rep with its work counts times f (not its launches): one
 * rank's share of the call, to predict again (perf.model). */
static int perf_share(lua_State *L)
{
  const fe_report *r = luaL_checkudata(L, 1, FELAB_REPORT);
  double f = luaL_checknumber(L, 2);
  if (!(f > 0 && f <= 1)) return luaL_error(L, "perf.share: the share must be in (0, 1], got %f", f);
  fe_report copy = *r;
  fe_report_scale(&copy, f);
  copy.seconds = 0; /* nothing of the share was measured */
  felab_push_report(L, &copy);
  return 1;
}

void felab_open_exchange(lua_State *L)
{
  lua_pushcfunction(L, device_link);
  lua_setfield(L, -2, "link");
  lua_getglobal(L, "perf");
  static const luaL_Reg perf[] = {{"exchange", perf_exchange}, {"reduction", perf_reduction},
                                  {"share", perf_share}, {NULL, NULL}};
  luaL_setfuncs(L, perf, 0);
  lua_pop(L, 1);
  felab_help_add("device.link", "device.link()",
                 "The link between mpirun's ranks on this machine: a message's latency_us and\n"
                 "its rate gbytes (ranks 0 and 1 exchanging 8 bytes to 256 KiB each way,\n"
                 "kept as `points` {{bytes, us}, ...}: a message's time is read off them), an\n"
                 "MPI_Allreduce of two doubles (allreduce_us) over `ranks` ranks, and `host`\n"
                 "{{entries, warm us, cold us}, ...}: a cpu's whole exchange through the host\n"
                 "(gather, copies, messages, sums), back to back and after every rank streamed\n"
                 "twice the last-level cache, `lines` {warm ns, cold ns}: each line more\n"
                 "than contiguous entries take, `pages` {warm ns, cold ns}: each 4 KiB page\n"
                 "more, and keep_bytes: what the cache keeps of the exchange's data while a\n"
                 "rank streams through other bytes (fitted to the exchange after 256 KiB up to\n"
                 "the last-level cache streamed). Under mpirun it is measured on first need\n"
                 "(the host exchange where a cpu's split action first needs it;\n"
                 "device.calibrate measures it all again) and stored; alone it is the stored\n"
                 "one (nil: none stored yet: run\n"
                 "`mpirun -np 2 felab -e 'device.calibrate(\"link\")'` once).\n"
                 "example: l = device.link(); if l then print(l.latency_us, l.gbytes) end");
  felab_help_add("perf.exchange", "perf.exchange(work [, calibration [, link]])",
                 "The model's time of one exchange of a split space: work {messages, bytes,\n"
                 "entries, word, shared, sources} (a part of P:exchange(V)); the device's\n"
                 "gather (a launch waited for), read, write and sums at the calibration's rates\n"
                 "(default: the default backend's), and messages x latency + bytes / rate over\n"
                 "the link (default: device.link(); false: none). A cpu's, where the link has\n"
                 "`host` points: their time at these entries, between warm and cold by the\n"
                 "share 1 - exp(-touched / keep) of its data that work.touched bytes\n"
                 "(the rank's action before it) took out of the cache, each of work.lines past\n"
                 "entries word / 32 at the link's `lines` cost and of work.pages past\n"
                 "entries word / 2048 at its `pages` cost, the terms in proportion (keep:\n"
                 "the calibration's llc_keep_bytes, where 0 the link's keep_bytes).\n"
                 "Returns {gather, read, link, write, sum, total} in seconds.\n"
                 "example: x = m:partition(8):exchange(V); print(perf.exchange(x[1]).total)");
  felab_help_add("perf.reduction", "perf.reduction(entries, word, ranks [, calibration [, link]])",
                 "The model's time of a reduction of a split space's vectors: the gather and\n"
                 "read of `entries` entries another rank owns and an MPI_Allreduce over `ranks`\n"
                 "(the link's, times ceil(log2 ranks) over its own ranks' depth). Seconds.\n"
                 "example: print(perf.reduction(2 * x[2].notowned, 8, 8))");
  felab_help_add("perf.share", "perf.share(rep, f)",
                 "A copy of report rep with its work (flops, bytes, every ceiling's counts, its\n"
                 "groups) times f, its launches kept: one rank's share of a call, to predict\n"
                 "with perf.model.\n"
                 "example: print(perf.model(perf.share(A:model(\"apply\"), 0.25), c).predicted_seconds)");
}
