/* felab shell: devices, the session's performance log and reports. The device module
 * (list, use, current, info, calibrate), the global perf table (log, clear) and the
 * felab.report type, a copy of an engine report (engine/perf/perf.h) with its fields. */
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/perf/perf.h"
#include "shell/shell.h"

/* Whether s names a compiled-in backend. */
static int is_backend_name(const char *s)
{
  for (int i = 0; i < fe_backend_count(); i++)
    if (!strcmp(fe_backend_name(i), s)) return 1;
  return 0;
}

static void report_register(lua_State *L);

/* Push a report userdata holding a copy of r. */
void felab_push_report(lua_State *L, const struct fe_report *r)
{
  if (luaL_getmetatable(L, FELAB_REPORT) == LUA_TNIL) report_register(L); /* device not opened */
  lua_pop(L, 1);
  fe_report *copy = lua_newuserdatauv(L, sizeof *copy, 0);
  *copy = *r;
  luaL_setmetatable(L, FELAB_REPORT);
}

/* rep.ratio: predicted over measured time (nil when nothing was measured). */
static void push_ratio(lua_State *L, const fe_report *r)
{
  if (r->seconds > 0) lua_pushnumber(L, r->predicted_seconds / r->seconds);
  else lua_pushnil(L);
}

/* A report's fields that are numbers (doubles of fe_report) and strings (its char arrays),
 * by name; report_index reads them through these tables. */
static const struct {
  const char *name;
  size_t offset;
} report_numbers[] = {
    {"flops", offsetof(fe_report, flops)},
    {"bytes", offsetof(fe_report, bytes)},
    {"seconds", offsetof(fe_report, seconds)},
    {"predicted_seconds", offsetof(fe_report, predicted_seconds)},
    {"peak_gflops", offsetof(fe_report, peak_gflops)},
    {"peak_gbytes", offsetof(fe_report, peak_gbytes)},
    {"compile_seconds", offsetof(fe_report, compile_seconds)},
    {"transfer_seconds", offsetof(fe_report, transfer_seconds)},
    {"setup_seconds", offsetof(fe_report, setup_seconds)},
    {"exchange_bytes", offsetof(fe_report, exchange_bytes)},
    {"exchange_messages", offsetof(fe_report, exchange_messages)},
    {"exchange_seconds", offsetof(fe_report, exchange_seconds)},
    {"exchange_predicted", offsetof(fe_report, exchange_predicted)},
    {"exchange_link", offsetof(fe_report, exchange_link)},
    {"exchange_device", offsetof(fe_report, exchange_device)},
    {"reduce_predicted", offsetof(fe_report, reduce_predicted)},
    {"l2_bytes", offsetof(fe_report, l2_bytes)},
    {"shared_bytes", offsetof(fe_report, shared_bytes)},
    {"vec_flops", offsetof(fe_report, vec_flops)},
    {"nonfma", offsetof(fe_report, nonfma)},
    {"atomics", offsetof(fe_report, atomics)},
    {"constant_loads", offsetof(fe_report, constant)},
    {"indexed", offsetof(fe_report, indexed)},
    {"indexed_first", offsetof(fe_report, indexed_first)},
    {"factor_lanes", offsetof(fe_report, factor_lanes)},
    {"factor_gathers", offsetof(fe_report, factor_gathers)},
    {"rows", offsetof(fe_report, rows)},
    {"l1_wavefronts", offsetof(fe_report, l1_wavefronts)},
    {"table_wavefronts", offsetof(fe_report, table_wavefronts)},
    {"l1_requests", offsetof(fe_report, l1_requests)},
    {"l1_lines", offsetof(fe_report, l1_line_total)},
    {"l1_tag_seconds", offsetof(fe_report, l1_tag_seconds)},
    {"occupancy", offsetof(fe_report, occupancy)},
    {"efficiency", offsetof(fe_report, efficiency)},
    {"dram_trips", offsetof(fe_report, dram_trips)},
    {"l2_trips", offsetof(fe_report, l2_trips)},
    {"phases", offsetof(fe_report, phases)},
    {"serial_seconds", offsetof(fe_report, serial_seconds)},
    {"stagger_seconds", offsetof(fe_report, stagger_seconds)},
    {"waits_hidden", offsetof(fe_report, waits_hidden)},
    {"loop_trips", offsetof(fe_report, loop_trips)},
    {"loop_cycles", offsetof(fe_report, loop_cycles)},
    {"loop_seconds", offsetof(fe_report, loop_seconds)},
    {"inflight_flops", offsetof(fe_report, inflight_flops)},
    {"padded_flops", offsetof(fe_report, padded_flops)},
    {"array_bytes", offsetof(fe_report, array_bytes)},
    {"operand_bytes", offsetof(fe_report, operand_bytes)},
    {"operand_seconds", offsetof(fe_report, operand_seconds)},
    {"llc_share", offsetof(fe_report, llc_share)},
    {"calls", offsetof(fe_report, calls)},
    {"extra_flops", offsetof(fe_report, extra_flops)},
    {"extra_bytes", offsetof(fe_report, extra_bytes)},
};
static const struct {
  const char *name;
  size_t offset;
} report_strings[] = {
    {"action", offsetof(fe_report, action)},
    {"backend", offsetof(fe_report, backend)},
    {"device", offsetof(fe_report, device)},
    {"precision", offsetof(fe_report, precision)},
    {"strategy", offsetof(fe_report, strategy)},
    {"why", offsetof(fe_report, why)},
    {"space", offsetof(fe_report, space)},
    {"quadrature", offsetof(fe_report, quadrature)},
    {"bound", offsetof(fe_report, bound)},
    {"occupancy_limit", offsetof(fe_report, occupancy_limit)},
};

/* __index of a report: the method print, then the fields. */
static int report_index(lua_State *L)
{
  const fe_report *r = luaL_checkudata(L, 1, FELAB_REPORT);
  const char *k = felab_index_method(L);
  if (!k) return 1;
  for (size_t i = 0; i < sizeof report_numbers / sizeof report_numbers[0]; i++)
    if (!strcmp(k, report_numbers[i].name)) {
      lua_pushnumber(L, *(const double *)((const char *)r + report_numbers[i].offset));
      return 1;
    }
  for (size_t i = 0; i < sizeof report_strings / sizeof report_strings[0]; i++)
    if (!strcmp(k, report_strings[i].name)) {
      lua_pushstring(L, (const char *)r + report_strings[i].offset);
      return 1;
    }
  if (!strcmp(k, "gflops")) lua_pushnumber(L, fe_report_gflops(r));
  else if (!strcmp(k, "gbytes")) lua_pushnumber(L, fe_report_gbytes(r));
  else if (!strcmp(k, "launches")) lua_pushinteger(L, r->launches);
  else if (!strcmp(k, "iterations")) lua_pushinteger(L, r->iterations);
  else if (!strcmp(k, "ncells")) lua_pushinteger(L, (lua_Integer)r->ncells);
  else if (!strcmp(k, "ndofs")) lua_pushinteger(L, (lua_Integer)r->ndofs);
  else if (!strcmp(k, "ratio")) push_ratio(L, r);
  else if (!strcmp(k, "ceilings")) { /* {dram = s, shared = s, ...}: each ceiling alone */
    lua_createtable(L, 0, FE_NCEILINGS);
    for (int c = 0; c < FE_NCEILINGS; c++) {
      lua_pushnumber(L, r->ceiling_seconds[c]);
      lua_setfield(L, -2, fe_ceiling_name(c));
    }
  } else if (!strcmp(k, "phase_seconds")) { /* {s, ...}: each described phase's part of it */
    lua_createtable(L, r->nphase_work, 0);
    for (int p = 0; p < r->nphase_work && p < FE_PHASES_MAX; p++) {
      lua_pushnumber(L, r->phase_seconds[p]);
      lua_rawseti(L, -2, p + 1);
    }
  } else if (!strcmp(k, "groups")) lua_pushinteger(L, (lua_Integer)r->groups);
  else if (!strcmp(k, "group_items")) lua_pushinteger(L, r->group_items);
  else if (!strcmp(k, "resident")) lua_pushinteger(L, r->resident);
  else if (!strcmp(k, "kernel")) { /* an operator action's kernel: how this call got it */
    static const char *from[4] = {NULL, "compiled", "cached", "ready"};
    if (r->kernel_from > 0 && r->kernel_from < 4) lua_pushstring(L, from[r->kernel_from]);
    else lua_pushnil(L);
  } else if (!strcmp(k, "setup_parts") || !strcmp(k, "memory")) {
    /* setup_parts: {schedule =, cell_data =, geometry =, pattern =, ..., strategy =} (the
     * seconds of each part that took time); memory: the bytes each part's data holds */
    int mem = !strcmp(k, "memory");
    lua_createtable(L, 0, r->parts.n);
    for (int i = 0; i < r->parts.n; i++) {
      double v = mem ? r->parts.part[i].bytes : r->parts.part[i].seconds;
      if (!(v > 0)) continue;
      lua_pushnumber(L, v);
      lua_setfield(L, -2, r->parts.part[i].name);
    }
  } else if (!strcmp(k, "exchange_parts") || !strcmp(k, "exchange_terms")) {
    /* {gather =, messages =, copies =, sums =}: the exchange beside the interior, measured
     * (parts) and predicted (terms) */
    static const char *names[4] = {"gather", "messages", "copies", "sums"};
    const double *v = !strcmp(k, "exchange_parts") ? r->exchange_parts : r->exchange_terms;
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
      lua_pushnumber(L, v[i]);
      lua_setfield(L, -2, names[i]);
    }
  } else if (!strcmp(k, "first_run")) lua_pushboolean(L, r->first_run);
  else if (!strcmp(k, "exchange_direct")) lua_pushboolean(L, r->exchange_direct);
  else if (!strcmp(k, "exchange_beside")) lua_pushboolean(L, r->exchange_beside);
  else if (!strcmp(k, "exchange_follows")) lua_pushboolean(L, r->exchange_follows);
  else if (!strcmp(k, "exchange_wave")) lua_pushnumber(L, r->exchange_wave);
  else if (!strcmp(k, "exchange_cold")) lua_pushnumber(L, r->exchange_cold);
  else if (!strcmp(k, "exchange_host")) lua_pushboolean(L, r->exchange_host);
  else if (!strcmp(k, "device_sharers")) lua_pushinteger(L, r->device_sharers);
  else if (!strcmp(k, "device_turns")) lua_pushboolean(L, r->device_turns);
  else if (!strcmp(k, "device_threads")) lua_pushinteger(L, r->device_threads);
  else if (!strcmp(k, "device_cores")) lua_pushinteger(L, r->device_cores);
  else if (!strcmp(k, "loop_binds")) lua_pushboolean(L, r->loop_binds);
  else if (!strcmp(k, "registers")) lua_pushinteger(L, r->regs);
  else if (!strcmp(k, "shared_per_group")) lua_pushinteger(L, (lua_Integer)r->shared_per_group);
  else lua_pushnil(L);
  return 1;
}

/* __tostring of a report: the engine's block. */
static int report_tostring(lua_State *L)
{
  const fe_report *r = luaL_checkudata(L, 1, FELAB_REPORT);
  char buf[2048];
  fe_report_format(r, buf, sizeof buf);
  lua_pushstring(L, buf);
  return 1;
}

/* rep:print(): write the block and a newline. */
static int report_print(lua_State *L)
{
  if (!luaL_testudata(L, 1, FELAB_REPORT))
    return luaL_error(L, "rep:print: expected a report as self, got %s", felab_kind_of(L, 1));
  report_tostring(L);
  lua_writestring(lua_tostring(L, -1), lua_rawlen(L, -1));
  lua_writeline();
  return 0;
}

/* device.list() -> {{name =, available =, device = | reason =}, ...} (prints nothing) */
static int device_list(lua_State *L)
{
  int n = fe_backend_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    char why[512];
    int ok = fe_backend_available(i, why, sizeof why);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, fe_backend_name(i));
    lua_setfield(L, -2, "name");
    lua_pushboolean(L, ok);
    lua_setfield(L, -2, "available");
    lua_pushstring(L, why);
    lua_setfield(L, -2, ok ? "device" : "reason");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* device.use(name [, precision]): the session's default backend (it must be available). */
static int device_use(lua_State *L)
{
  const char *name = felab_opt_name(L, 1, "device.use", "argument 1 (backend)");
  if (!name) return luaL_error(L, "device.use: argument 1 must be a backend name, got nothing");
  const char *pname = felab_opt_name(L, 2, "device.use", "argument 2 (precision)");
  fe_precision prec = fe_precision_default();
  if (pname) FELAB_TRY(L, fe_precision_parse(pname, &prec));
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(name, &be));
  if (prec == FE_DOUBLE && !be->info.fp64)
    return luaL_error(L, "device.use: %s (%s) has no double precision; use device.use(\"%s\", "
                         "\"single\")", name, be->info.name, name);
  FELAB_TRY(L, fe_backend_set_default(name));
  fe_precision_set_default(prec);
  return 0;
}

/* device.current() -> backend name, precision */
static int device_current(lua_State *L)
{
  lua_pushstring(L, fe_backend_default());
  lua_pushstring(L, fe_precision_name(fe_precision_default()));
  return 2;
}

/* The FE_CURVE_POINTS numbers v as field `name` of the table on top, where measured. */
static void push_points(lua_State *L, const double *v, const char *name)
{
  if (!(v[FE_CURVE_POINTS - 1] > 0)) return;
  lua_createtable(L, FE_CURVE_POINTS, 0);
  for (int j = 0; j < FE_CURVE_POINTS; j++) {
    lua_pushnumber(L, v[j]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, name);
}

/* Field `name` of the table at index t as FE_CURVE_POINTS numbers into v (0 where missing). */
static void read_points(lua_State *L, int t, const char *name, double *v)
{
  if (lua_getfield(L, t, name) == LUA_TTABLE)
    for (int j = 0; j < FE_CURVE_POINTS; j++) {
      lua_rawgeti(L, -1, j + 1);
      v[j] = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
}

/* A calibration as a table: gbytes, gflops, launch_us, sync_us, l2_gbytes, shared_gbytes,
 * nonfma_gops, atomic_gops, constant_gops, scalar_gflops, indexed_gops, indexed_l1_gops
 * rows_gbytes, llc_bytes, llc_keep_bytes, l1_bytes and vector_lanes (the cpu: the reals
 * one SIMD register of its kernels holds), l1_request_gops and
 * l1_line_gops (GPUs: the L1's lookups), dram_latency_us,
 * read_us, read_gbytes, write_us, write_gbytes (the host's small copies each way),
 * l2_latency_us, phase_latency_us, cycle_ns (the cpu: a cycle of llvm-mca's core), gpu
 * (measured on a GPU), tables_l1 (the kernels' tables
 * read through L1: fe_device_info), (GPUs) curves = {dram = {...}, shared = {...},
 * fma = {...}} and (the cpu) lanes = {...}: the SIMD rate with 2, 4, ..., 64 lanes as
 * fractions of gflops, and llc_curve = {...}: the cached triad's GB/s over 3/8, ..., 8/8 of
 * the last-level cache (llc_gbytes: a quarter). */
void felab_push_calibration(lua_State *L, const fe_calibration *c)
{
  const struct {
    const char *name;
    double v;
  } f[] = {{"gbytes", c->gbytes},           {"gflops", c->gflops},
           {"launch_us", c->launch_us},     {"sync_us", c->sync_us},
           {"l2_gbytes", c->l2_gbytes},     {"shared_gbytes", c->shared_gbytes},
           {"nonfma_gops", c->nonfma_gops}, {"atomic_gops", c->atomic_gops},
           {"constant_gops", c->constant_gops}, {"scalar_gflops", c->scalar_gflops},
           {"dram_latency_us", c->dram_latency_us}, {"l2_latency_us", c->l2_latency_us},
           {"phase_latency_us", c->phase_latency_us}, {"indexed_gops", c->indexed_gops},
           {"indexed_l1_gops", c->indexed_l1_gops},
           {"indexed_llc_gops", c->indexed_llc_gops}, {"l1_request_gops", c->l1_request_gops},
           {"l1_line_gops", c->l1_line_gops}, {"cycle_ns", c->cycle_ns},
           {"padded_gflops", c->padded_gflops},
           {"rows_gbytes", c->rows_gbytes}, {"llc_bytes", c->llc_bytes},
           {"l1_bytes", c->l1_bytes}, {"read_us", c->read_us}, {"read_gbytes", c->read_gbytes},
           {"write_us", c->write_us}, {"write_gbytes", c->write_gbytes},
           {"llc_keep_bytes", c->llc_keep_bytes}, {"llc_gbytes", c->llc_gbytes},
           {"vector_lanes", c->vector_lanes}};
  lua_createtable(L, 0, 30);
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    lua_pushnumber(L, f[i].v);
    lua_setfield(L, -2, f[i].name);
  }
  lua_pushboolean(L, c->gpu);
  lua_setfield(L, -2, "gpu");
  lua_pushboolean(L, c->tables_l1);
  lua_setfield(L, -2, "tables_l1");
  if (c->curve[0][FE_CURVE_POINTS - 1] > 0) {
    static const char *names[3] = {"dram", "shared", "fma"};
    lua_createtable(L, 0, 3);
    for (int k = 0; k < 3; k++) push_points(L, c->curve[k], names[k]);
    lua_setfield(L, -2, "curves");
  }
  push_points(L, c->curve[FE_CURVE_LANES], "lanes"); /* the cpu */
  push_points(L, c->llc_curve, "llc_curve");
}

/* device.info([name]) -> {backend, name, vendor, is_gpu, compute_units, global_mem,
 * local_mem, max_group, fp64, fp64_atomics, follows, calibration = {double = {...},
 * single = {...}}} */
static int device_info(lua_State *L)
{
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(felab_opt_name(L, 1, "device.info", "argument 1 (backend)"), &be));
  if (!be->calib[FE_DOUBLE].valid && !be->calib[FE_FLOAT].valid && fe_perf_load_calibration(be))
    fe_error_clear(); /* an unreadable stored calibration only means none is shown */
  const fe_device_info *d = &be->info;
  lua_createtable(L, 0, 11);
  lua_pushstring(L, be->name);
  lua_setfield(L, -2, "backend");
  lua_pushstring(L, d->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, d->vendor);
  lua_setfield(L, -2, "vendor");
  lua_pushboolean(L, d->is_gpu);
  lua_setfield(L, -2, "is_gpu");
  lua_pushinteger(L, d->compute_units);
  lua_setfield(L, -2, "compute_units");
  lua_pushinteger(L, (lua_Integer)d->global_mem);
  lua_setfield(L, -2, "global_mem");
  lua_pushinteger(L, (lua_Integer)d->local_mem);
  lua_setfield(L, -2, "local_mem");
  lua_pushinteger(L, (lua_Integer)d->max_group);
  lua_setfield(L, -2, "max_group");
  lua_pushboolean(L, d->fp64);
  lua_setfield(L, -2, "fp64");
  lua_pushboolean(L, d->fp64_atomics);
  lua_setfield(L, -2, "fp64_atomics");
  lua_pushboolean(L, d->follows);
  lua_setfield(L, -2, "follows");
  lua_pushinteger(L, (lua_Integer)d->share_key);
  lua_setfield(L, -2, "share_key");
  int any = 0;
  for (int p = 0; p < FE_NPRECISIONS; p++) {
    const fe_calibration *c = &be->calib[p];
    if (!c->valid) continue;
    if (!any++) lua_newtable(L);
    felab_push_calibration(L, c);
    lua_setfield(L, -2, fe_precision_name((fe_precision)p));
  }
  if (any) lua_setfield(L, -2, "calibration");
  return 1;
}

/* device.calibrate([name] [, precision]) -> report of the measured ceilings (prints
 * nothing), and under mpirun with more than one rank the link between them (device.link's
 * table: every rank must call it); a lone precision argument calibrates the default
 * backend; device.calibrate("link"): the link alone (nil on one rank). */
static int device_calibrate(lua_State *L)
{
  const char *name = felab_opt_name(L, 1, "device.calibrate", "argument 1 (backend)");
  const char *pname = felab_opt_name(L, 2, "device.calibrate", "argument 2 (precision)");
  fe_precision prec = fe_precision_default();
  if (name && !strcmp(name, "link")) { /* the link alone (every rank together) */
    if (!felab_calibrate_link(L)) lua_pushnil(L);
    return 1;
  }
  if (name && !pname && !is_backend_name(name) && !fe_precision_parse(name, &prec)) name = NULL;
  else if (pname) FELAB_TRY(L, fe_precision_parse(pname, &prec));
  fe_error_clear();
  fe_backend *be;
  FELAB_TRY(L, fe_backend_get(name, &be));
  fe_report rep;
  memset(&rep, 0, sizeof rep);
  FELAB_TRY(L, fe_perf_calibrate(be, prec, &rep));
  felab_push_report(L, &rep);
  return 1 + felab_calibrate_link(L); /* under mpirun: the link too (every rank together) */
}

/* device.best() -> the name of the fastest backend available here (cuda, then opencl on a
 * GPU, then cpu). */
static int device_best(lua_State *L)
{
  lua_pushstring(L, fe_backend_best());
  return 1;
}

/* perf.log() -> count; prints one line per report of the session: the action, its strategy
 * and space, where it ran, and measured against predicted (a kernel's first run marked). */
static int perf_log(lua_State *L)
{
  int n = fe_perf_log_count();
  char line[512];
  snprintf(line, sizeof line, "%4s  %-10s %-9s %-12s %-7s %-9s %10s %9s %9s %12s %12s %6s  %s",
           "#", "action", "strategy", "space", "backend", "precision", "cells", "GF/s", "GB/s",
           "measured ms", "predicted ms", "ratio", "bound");
  lua_writestring(line, strlen(line));
  lua_writeline();
  for (int i = 0; i < n; i++) {
    const fe_report *r = fe_perf_log_get(i);
    if (!r) continue;
    double ratio = r->seconds > 0 ? r->predicted_seconds / r->seconds : 0;
    char space[24]; /* "Q3 on hex" -> "Q3 hex": the order and the cell */
    const char *on = strstr(r->space, " on ");
    if (on) snprintf(space, sizeof space, "%.*s %s", (int)(on - r->space), r->space, on + 4);
    else snprintf(space, sizeof space, "%s", *r->space ? r->space : "-");
    snprintf(line, sizeof line,
             "%4d  %-10s %-9s %-12s %-7s %-9s %10lld %9.3g %9.3g %12.4g %12.4g %6.2f  %s%s", i + 1,
             r->action, *r->strategy ? r->strategy : "-", space, r->backend, r->precision,
             r->ncells, fe_report_gflops(r), fe_report_gbytes(r), r->seconds * 1e3,
             r->predicted_seconds * 1e3, ratio, r->bound, r->first_run ? " (first run)" : "");
    lua_writestring(line, strlen(line));
    lua_writeline();
  }
  lua_pushinteger(L, n);
  return 1;
}

/* perf.history() -> {rep, ...}: copies of every report of the session, oldest first. */
static int perf_history(lua_State *L)
{
  int n = fe_perf_log_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    felab_push_report(L, fe_perf_log_get(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* The number field k of table idx (0 when absent). */
static double field_number(lua_State *L, int idx, const char *k)
{
  lua_getfield(L, idx, k);
  double v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
  lua_pop(L, 1);
  return v;
}

/* perf.model(rep, ceilings [, units [, device name]]) -> a copy of report rep predicted with
 * the ceilings of another device (the table device.info().calibration.double has: gbytes, gflops, launch_us,
 * sync_us, l2_gbytes, shared_gbytes, nonfma_gops, atomic_gops, constant_gops, indexed_gops,
 * l1_request_gops, l1_line_gops, the latencies, curves, lanes), for units compute
 * units: the what-if behind perf.predict. */
static int perf_model(lua_State *L)
{
  const fe_report *r = luaL_checkudata(L, 1, FELAB_REPORT);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer units = luaL_optinteger(L, 3, 0);
  if (units < 0 || units > INT_MAX) /* (int) of 2^32 + 1 was 1 */
    return luaL_error(L, "perf.model: units must be an integer in 0..%d (compute units; 0 "
                         "leaves them out), got %I", INT_MAX, units);
  fe_calibration c;
  memset(&c, 0, sizeof c);
  c.gbytes = field_number(L, 2, "gbytes");
  c.gflops = field_number(L, 2, "gflops");
  c.launch_us = field_number(L, 2, "launch_us");
  c.sync_us = field_number(L, 2, "sync_us");
  c.l2_gbytes = field_number(L, 2, "l2_gbytes");
  c.shared_gbytes = field_number(L, 2, "shared_gbytes");
  c.nonfma_gops = field_number(L, 2, "nonfma_gops");
  c.atomic_gops = field_number(L, 2, "atomic_gops");
  c.constant_gops = field_number(L, 2, "constant_gops");
  c.scalar_gflops = field_number(L, 2, "scalar_gflops");
  c.padded_gflops = field_number(L, 2, "padded_gflops");
  c.indexed_gops = field_number(L, 2, "indexed_gops");
  c.indexed_l1_gops = field_number(L, 2, "indexed_l1_gops");
  c.indexed_llc_gops = field_number(L, 2, "indexed_llc_gops");
  c.l1_request_gops = field_number(L, 2, "l1_request_gops");
  c.l1_line_gops = field_number(L, 2, "l1_line_gops");
  c.dram_latency_us = field_number(L, 2, "dram_latency_us");
  c.l2_latency_us = field_number(L, 2, "l2_latency_us");
  c.phase_latency_us = field_number(L, 2, "phase_latency_us");
  c.cycle_ns = field_number(L, 2, "cycle_ns");
  c.rows_gbytes = field_number(L, 2, "rows_gbytes");
  c.llc_bytes = field_number(L, 2, "llc_bytes");
  c.l1_bytes = field_number(L, 2, "l1_bytes");
  c.vector_lanes = field_number(L, 2, "vector_lanes");
  felab_calibration_transfers(L, 2, &c);
  c.llc_keep_bytes = field_number(L, 2, "llc_keep_bytes");
  c.llc_gbytes = field_number(L, 2, "llc_gbytes");
  lua_getfield(L, 2, "gpu");
  c.gpu = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, 2, "tables_l1");
  c.tables_l1 = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!(c.gbytes > 0 && c.gflops > 0))
    return luaL_error(L, "perf.model: the ceilings need gbytes and gflops (positive numbers)");
  if (lua_getfield(L, 2, "curves") == LUA_TTABLE) {
    static const char *names[3] = {"dram", "shared", "fma"};
    for (int k = 0; k < 3; k++) read_points(L, lua_gettop(L), names[k], c.curve[k]);
  }
  lua_pop(L, 1);
  read_points(L, 2, "lanes", c.curve[FE_CURVE_LANES]);
  read_points(L, 2, "llc_curve", c.llc_curve);
  fe_report copy = *r;
  const char *name = luaL_optstring(L, 4, NULL);
  if (name) { /* another device: nothing of this report was measured there */
    snprintf(copy.device, sizeof copy.device, "%s", name);
    copy.seconds = 0;
  }
  fe_perf_model(&c, (int)units, &copy);
  felab_push_report(L, &copy);
  return 1;
}

/* perf.counts() -> {compiled =, cached =, setups =}: what the session built so far (kernels
 * compiled, kernels loaded from a cache, operators' device data set up). */
static int perf_counts(lua_State *L)
{
  fe_build_counts c = fe_perf_build_counts();
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)c.compiled);
  lua_setfield(L, -2, "compiled");
  lua_pushinteger(L, (lua_Integer)c.cached);
  lua_setfield(L, -2, "cached");
  lua_pushinteger(L, (lua_Integer)c.setups);
  lua_setfield(L, -2, "setups");
  return 1;
}

/* The resident size now and at its peak ("VmRSS", "VmHWM" of /proc/self/status), in bytes
 * (0: not there, not Linux). */
static void proc_resident(double *now, double *peak)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  *now = *peak = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmRSS:", 6)) *now = atof(line + 6) * 1024;
    if (!strncmp(line, "VmHWM:", 6)) *peak = atof(line + 6) * 1024;
  }
  if (f) fclose(f);
}

/* perf.memory([reset]) -> {host, host_peak, <backend> = {now, peak}}: resident host memory
 * now and at its peak (the kernel's VmRSS and VmHWM), and per open backend the bytes of
 * buffers felab holds there now and at most. reset = true starts new peaks at what is held
 * now (host: /proc/self/clear_refs). */
static int perf_memory(lua_State *L)
{
  int reset = lua_toboolean(L, 1);
  if (reset) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
      fputs("5", f); /* 5: reset the peak resident size */
      fclose(f);
    }
  }
  double now, peak;
  proc_resident(&now, &peak);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)now);
  lua_setfield(L, -2, "host");
  lua_pushinteger(L, (lua_Integer)peak);
  lua_setfield(L, -2, "host_peak");
  for (int i = 0; i < fe_backend_count(); i++) {
    fe_backend *be = fe_backend_opened(i);
    if (!be) continue;
    size_t now, peak;
    fe_backend_memory(be, &now, &peak, reset);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)now);
    lua_setfield(L, -2, "now");
    lua_pushinteger(L, (lua_Integer)peak);
    lua_setfield(L, -2, "peak");
    lua_setfield(L, -2, be->name);
  }
  return 1;
}

/* perf.transfers() -> {<backend> = {read, written, reads, writes}}: per open backend, the
 * bytes felab copied from its memory to the host and back, and the copies, since it opened. */
static int perf_transfers(lua_State *L)
{
  lua_newtable(L);
  for (int i = 0; i < fe_backend_count(); i++) {
    fe_backend *be = fe_backend_opened(i);
    if (!be) continue;
    size_t v[4];
    fe_backend_transfers(be, &v[0], &v[1], &v[2], &v[3]);
    static const char *const names[4] = {"read", "written", "reads", "writes"};
    lua_createtable(L, 0, 4);
    for (int k = 0; k < 4; k++) {
      lua_pushinteger(L, (lua_Integer)v[k]);
      lua_setfield(L, -2, names[k]);
    }
    lua_setfield(L, -2, be->name);
  }
  return 1;
}

/* perf.clear(): forget every report of the session. */
static int perf_clear(lua_State *L)
{
  (void)L;
  fe_perf_log_clear();
  return 0;
}

/* perf.clock() -> seconds of a monotonic wall clock (for timing a block of a script). */
static int perf_clock(lua_State *L)
{
  lua_pushnumber(L, (lua_Number)fe_clock());
  return 1;
}

/* Register the felab.report metatable (idempotent); leaves the stack as it was. */
static void report_register(lua_State *L)
{
  static const luaL_Reg methods[] = {{"print", report_print}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__tostring", report_tostring}, {NULL, NULL}};
  felab_register_type(L, FELAB_REPORT, meta, methods, report_index);
  lua_pop(L, 1);
}

/* Set the global perf table and push the device module table. */
int felab_open_device(lua_State *L)
{
  static const luaL_Reg perf[] = {
      {"log", perf_log}, {"history", perf_history}, {"clear", perf_clear}, {"model", perf_model},
      {"counts", perf_counts}, {"clock", perf_clock}, {"memory", perf_memory},
      {"transfers", perf_transfers}, {NULL, NULL}};
  static const luaL_Reg device[] = {{"list", device_list},
                                    {"use", device_use},
                                    {"current", device_current},
                                    {"info", device_info},
                                    {"calibrate", device_calibrate},
                                    {"best", device_best},
                                    {NULL, NULL}};
  report_register(L);
  felab_help_add("device.best", "device.best()",
                 "The fastest backend available here: cuda, then opencl on a GPU, then cpu.\n"
                 "  device.use(device.best())");
  felab_help_add(FELAB_REPORT ":print", "rep:print()",
                 "Print the report's block (the same text as print(rep)).\n"
                 "example: r, rep = A:residual(u); rep:print()");
  felab_help_add("perf.model", "perf.model(rep, ceilings [, units])",
                 "The report rep predicted again with other ceilings (a table shaped like\n"
                 "device.info().calibration.double) on `units` compute units: the what-if under\n"
                 "perf.predict.\nexample: c = device.info().calibration.double; c.gbytes = 2 * c.gbytes;\n"
                 "  print(perf.model(A:model(\"apply\"), c).predicted_seconds)");
  felab_help_add("perf.counts", "perf.counts()",
                 "What the session has built so far, counted: kernels compiled, kernels loaded\n"
                 "from a cache, operators' device data set up ({compiled =, cached =, setups =}).\n"
                 "example: c = perf.counts(); A:apply(w); print(perf.counts().compiled - c.compiled)");
  felab_help_add("perf.history", "perf.history()",
                 "Every report of the session, oldest first (copies: rep.action, rep.seconds, ...).\n"
                 "example: for i, rep in ipairs(perf.history()) do print(i, rep.action, rep.ratio) end");
  felab_help_add("perf.memory", "perf.memory([reset])",
                 "Memory now and at its peak: host (resident bytes, from /proc) and, for each\n"
                 "open backend, the bytes of the buffers felab holds there. reset = true starts\n"
                 "the peaks again from now, to measure one step.\n"
                 "example: perf.memory(true); A:apply(w); m = perf.memory(); print(m.host_peak, m.cuda.peak)");
  felab_help_add("perf.transfers", "perf.transfers()",
                 "For each open backend, what felab copied between its memory and the host since\n"
                 "it opened: bytes read (to the host), written (from it), and the copies.\n"
                 "example: t = perf.transfers().cuda.read; A:apply(w); print(perf.transfers().cuda.read - t)");
  felab_help_add("perf.clock", "perf.clock()",
                 "Seconds of a monotonic wall clock, to time a block of a script.\n"
                 "example: t = perf.clock(); V = fe.space(m, \"P2\"); print(perf.clock() - t)");
  felab_help_add("device.current", "device.current()",
                 "The session's default backend and precision.\n"
                 "example: print(device.current())");
  luaL_newlib(L, perf);
  lua_setglobal(L, "perf");
  luaL_newlib(L, device);
  felab_open_exchange(L); /* device.link, perf.exchange, perf.reduction, perf.share */
  return 1;
}
