-- felab's what-if: the model's prediction of an operator's action on a device that is not
-- here (perf.predict), and one table of them across devices, strategies and precisions
-- (perf.compare).
--
-- The work per ceiling is what the strategy counts (A:model: DRAM bytes, L2 loads, shared
-- wavefront bytes, flops, divisions, atomics, launches, and the compiled kernel's occupancy).
-- The ceilings are the present device's calibration scaled by the ratio of the target's and
-- the present device's datasheet figures (shell/lib/devices.lua), so the efficiencies
-- measured here carry over:
--   DRAM by dram_gbs; FMA and divisions by fp64_gflops (fp32_gflops in single); shared
--   memory by units x clock x shared bytes per clock; L2, atomics and the constant cache by
--   units x clock (they run at the core clock: an assumption, not a datasheet figure);
--   launches and host waits unchanged.
-- When the present device is of another kind (a cpu here, a GPU asked) nothing calibrated
-- carries over: the target's datasheet peaks are used as they are, with no launch cost and
-- no occupancy curve, and the answer says so.
local perf, device, devices = ...

local help = {}

-- The entry of devices.lua called `name`, or whose match strings occur in it.
local function find(name)
  local l = name:lower()
  for _, d in ipairs(devices) do
    if d.name:lower() == l then return d end
  end
  for _, d in ipairs(devices) do
    for _, m in ipairs(d.match) do
      if l:find(m, 1, true) then return d end
    end
  end
end

local function names()
  local t = {}
  for _, d in ipairs(devices) do t[#t + 1] = d.name end
  return table.concat(t, ", ")
end

-- What one process sees of a device: an MI250X's figures are for its two dies.
local function figures(d)
  local g = d.gcds or 1
  return {
    units = d.units / g, clock = d.clock_ghz, dram = d.dram_gbs / g,
    double = (d.fp64_gflops or 0) / g, single = (d.fp32_gflops or 0) / g,
    shared = d.units / g * d.clock_ghz * d.shared_bytes_per_clock, core = d.units / g * d.clock_ghz,
  }
end

-- The ceilings of target `to` from a calibration made on `from` (same kind of device).
local function scaled(cal, from, to, precision)
  local f, t = figures(from), figures(to)
  local c = {}
  for k, v in pairs(cal) do c[k] = v end
  c.gbytes = cal.gbytes * t.dram / f.dram
  c.gflops = cal.gflops * t[precision] / f[precision]
  c.scalar_gflops = (cal.scalar_gflops or 0) * t[precision] / f[precision]
  c.nonfma_gops = cal.nonfma_gops * t[precision] / f[precision]
  c.shared_gbytes = cal.shared_gbytes * t.shared / f.shared
  c.l2_gbytes = cal.l2_gbytes * t.core / f.core
  c.atomic_gops = cal.atomic_gops * t.core / f.core
  c.constant_gops = (cal.constant_gops or 0) * t.core / f.core
  c.indexed_gops = (cal.indexed_gops or 0) * t.core / f.core
  c.indexed_l1_gops = (cal.indexed_l1_gops or 0) * t.core / f.core
  c.rows_gbytes = (cal.rows_gbytes or 0) * t.dram / f.dram
  c.l1_request_gops = (cal.l1_request_gops or 0) * t.core / f.core
  c.l1_line_gops = (cal.l1_line_gops or 0) * t.core / f.core
  -- the cpu's hot loop: its cycles as simulated for this core, a cycle at the target's clock
  -- (the same core's design assumed: llvm-mca simulated this one)
  c.cycle_ns = (cal.cycle_ns or 0) * f.clock / t.clock
  return c
end

-- The target's datasheet peaks as ceilings (nothing calibrated carries over).
local function datasheet(to, precision)
  local t = figures(to)
  return {gbytes = t.dram, gflops = t[precision], shared_gbytes = to.kind == "gpu" and t.shared or 0,
          launch_us = 0, sync_us = 0, l2_gbytes = 0, nonfma_gops = 0, atomic_gops = 0,
          constant_gops = 0, gpu = to.kind == "gpu", tables_l1 = to.kind == "gpu"}
end

-- The model's view of A's action (A:model with every option of the action that changes its
-- counts: a strategy's geometry, scatter, ...).
local function model_of(A, o)
  local mo = {}
  for _, k in ipairs({"backend", "precision", "strategy", "block", "walk", "lanes", "geometry",
                      "scatter", "recompute", "format", "chunk", "sigma"}) do mo[k] = o[k] end
  return A:model(o.action or "apply", mo)
end

-- The ceilings of o.device for report rep (its backend and precision): the present
-- calibration scaled by the datasheets, or the target's datasheet peaks; and the units and
-- how the ceilings were made.
local ceilings_for

-- perf.predict(A, {action =, device =, precision =, strategy =, backend =, from =})
function perf.predict(A, o)
  o = o or {}
  if type(o) ~= "table" then error("perf.predict: argument 2 must be an options table", 2) end
  local rep = model_of(A, o)
  if not o.device then return rep end
  local ceilings, units, target, basis = ceilings_for(rep, o, 3)
  return perf.model(rep, ceilings, units, target.name), basis
end

ceilings_for = function(rep, o, level)
  local target = find(o.device)
  if not target then
    error(("perf.predict: no device '%s' in shell/lib/devices.lua (it has: %s)"):format(
      o.device, names()), level)
  end
  local prec = rep.precision
  if not (figures(target)[prec] > 0) then
    error(("perf.predict: %s has no %s-precision rate in shell/lib/devices.lua"):format(
      target.name, prec), level)
  end
  local info = device.info(rep.backend)
  local cal = info.calibration and info.calibration[prec]
  local here = o.from and find(o.from) or find(info.name)
  if o.from and not here then
    error(("perf.predict: from = '%s' is not in shell/lib/devices.lua (it has: %s)"):format(
      o.from, names()), level)
  end
  -- the calibration carries over only between devices of one kind: the backend's (a cpu
  -- backend on a GPU entry named by `from` is still a cpu)
  local kind = info.is_gpu and "gpu" or "cpu"
  if here and here.kind ~= kind then
    error(("perf.predict: from = '%s' is a %s, but the %s backend runs on a %s"):format(
      here.name, here.kind, rep.backend, kind), level)
  end
  local ceilings, basis, units
  if cal and here and kind == target.kind then
    ceilings = scaled(cal, here, target, prec)
    basis = ("%s's calibration (%s), scaled by the datasheet ratios %s -> %s"):format(
      rep.backend, info.name, here.name, target.name)
    -- the strategy's groups fill the target's units as they fill the present ones
    units = math.max(1, math.floor(info.compute_units * figures(target).units /
                                   figures(here).units + 0.5))
  else
    ceilings = datasheet(target, prec)
    basis = ("%s's datasheet peaks (no calibration of a %s here%s; the work is counted for " ..
             "the %s backend's kernels)"):format(target.name, target.kind,
      here and "" or ("; " .. info.name .. " is not in devices.lua"), rep.backend)
    units = 0 -- another kind's group shapes: no wave to fill
  end
  return ceilings, units, target, basis
end
help[#help + 1] = {"perf.predict",
  "perf.predict(A, {action = \"apply\", device =, precision =, strategy =, backend =, from =})",
  "The model's time of an action without running it, here or (device = a name of\n" ..
  "shell/lib/devices.lua: A100, H100, H200, L40S, MI250X, MI300X, ...) on a device that is\n" ..
  "not present: this device's calibrated ceilings scaled by the datasheet ratios, so its\n" ..
  "efficiencies carry over (from = the entry this device is, when its name is not known).\n" ..
  "Returns a report (predicted_seconds, bound, ceilings) and how its ceilings were made.\n" ..
  "example: rep, basis = perf.predict(A, {device = \"H200\"}); print(rep.predicted_seconds, basis)"}

-- A time with a unit that keeps three digits readable.
local function time(s)
  if s >= 1 then return ("%.3g s"):format(s) end
  if s >= 1e-3 then return ("%.3g ms"):format(s * 1e3) end
  return ("%.3g us"):format(s * 1e6)
end

-- What perf.compare's ranks model, and what they do not (printed under its table).
local RANKS_MODELLED = "modelled: each rank's cells (the largest part's time binds: " ..
  "m:partition(N), its method as mpirun's split), its exchange (P:exchange(V): messages x " ..
  "latency + bytes / rate over the link, the device's gather, read, write and sums at its " ..
  "calibrated launches and copies, through the host; a cpu's: the link's host exchange " ..
  "at its entries, warm to cold by a step's bytes through the cache), a CG's reductions " ..
  "(two a step: the " ..
  "sums over the entries other ranks own, made on the device, and an MPI_Allreduce, " ..
  "ceil(log2 N) times the link's tree depth)\n" ..
  "not modelled: the exchange beside the interior cells (a GPU's sumfact and transpose " ..
  "run it so: the sum above is their upper bound), cuda's device-to-device path between " ..
  "ranks of one machine (each apply's own report models it), links between nodes (the " ..
  "link is this machine's, ranks on one host), ranks sharing a device or the memory bus, " ..
  "CG's host loop on split spaces (one rank's scalars stay on the device), the setup " ..
  "(every rank builds the whole mesh and space)"

-- perf.compare{A, ranks = N | {N, ...}, ...}: the call on N ranks, a device each.
local function compare_ranks(o, A, level)
  if mpi and mpi.size > 1 then
    error(("perf.compare: ranks = ... predicts from one rank's whole space; this session's " ..
           "space is split over %d ranks"):format(mpi.size), level)
  end
  local counts = type(o.ranks) == "table" and o.ranks or {o.ranks}
  for _, n in ipairs(counts) do
    if math.type(n) ~= "integer" or n < 1 then
      error(("perf.compare: ranks must be a positive integer or a list of them, got %s"):format(
        tostring(n)), level)
    end
  end
  local V = A.space
  local m = V.mesh
  local link = o.link
  if link == nil then link = device.link() end
  local mo = {action = o.action, backend = o.backend, strategy = o.strategies and o.strategies[1],
              precision = o.precisions and o.precisions[1]}
  local rep = o.report or model_of(A, mo)
  if type(rep) ~= "userdata" or not rep.action then
    error("perf.compare: report = must be a report (a CG's info.report, or an action's)", level)
  end
  local steps = rep.iterations > 0 and rep.iterations or 1
  local rows = {}
  print(("%5s %-14s %10s %10s %10s %10s %10s %8s"):format("ranks", "device", "cells/rank",
        "compute", "exchange", "reductions", "predicted", "speedup"))
  local bases = {}
  for _, dev in ipairs(o.devices or {false}) do
    local ceilings, units, name, basis
    if dev then
      local target
      ceilings, units, target, basis = ceilings_for(rep, {device = dev, from = o.from}, level + 1)
      name = target.name
      if not ((ceilings.sync_us or 0) > 0) then
        basis = basis .. "; the exchange's device side (its launches and copies) is not known " ..
                "there and left out"
      end
    else
      local info = device.info(rep.backend)
      ceilings = info.calibration and info.calibration[rep.precision]
      if not ceilings then error("perf.compare: no calibration of " .. rep.backend, level) end
      units, name = info.compute_units, rep.device
      basis = ("%s's calibration (%s)"):format(rep.backend, info.name)
    end
    local one
    for _, n in ipairs(counts) do
      local parts = n > 1 and m:partition(n, {method = o.method}):exchange(V, rep.precision)
                    or {{cells = m.ncells, notowned = 0, messages = 0, bytes = 0, word = 8}}
      local worst
      for q, part in ipairs(parts) do
        local f = part.cells / m.ncells
        local share = f < 1 and perf.share(rep, f) or rep
        local compute = perf.model(share, ceilings, units, name).predicted_seconds
        -- a cpu's exchange follows a step's bytes through the cache (this rank's: where the
        -- ranks lie, and so who shares a cache, is not known here)
        part.touched = share.bytes / steps
        local x = n > 1 and steps * perf.exchange(part, ceilings, link or false).total or 0
        local red = n > 1 and rep.iterations > 0 and
                    2 * rep.iterations * perf.reduction(2 * part.notowned, part.word, n, ceilings,
                                                        link or false) or 0
        local t = compute + x + red
        if not worst or t > worst.seconds then
          worst = {ranks = n, device = dev or name, seconds = t, compute = compute, exchange = x,
                   reductions = red, cells = part.cells, messages = part.messages,
                   bytes = part.bytes, part = q - 1}
        end
      end
      one = one or (n == 1 and worst.seconds or nil)
      worst.speedup = one and one / worst.seconds or nil
      worst.per_step = worst.seconds / steps -- a CG's: one iteration
      rows[#rows + 1] = worst
      print(("%5d %-14s %10d %10s %10s %10s %10s %8s"):format(n, tostring(worst.device):sub(1, 14),
            worst.cells, time(worst.compute), n > 1 and time(worst.exchange) or "-",
            worst.reductions > 0 and time(worst.reductions) or "-", time(worst.seconds),
            worst.speedup and ("%.2f"):format(worst.speedup) or "-"))
    end
    bases[#bases + 1] = ("  %s: %s"):format(dev or name, basis)
  end
  print(("%s: %s, %s%s"):format(rep.action, rep.strategy, rep.precision,
        rep.iterations > 0 and (", %d iterations"):format(rep.iterations) or ""))
  print("ceilings:\n" .. table.concat(bases, "\n"))
  if link then
    print(("link: %.3g us a message, %.3g GB/s, MPI_Allreduce %.3g us over %d ranks%s"):format(
      link.latency_us, link.gbytes, link.allreduce_us or 0, link.ranks or 2,
      o.link and " (given)" or " (measured on this machine under mpirun: device.link())"))
  else
    print("link: none calibrated on this machine (the messages and MPI_Allreduce are left " ..
          "out; run `mpirun -np 2 felab -e 'device.calibrate(\"link\")'` once, or give link = {...})")
  end
  print(RANKS_MODELLED)
  return rows
end

-- perf.compare{A, action =, devices =, strategies =, precisions =, from =, ranks =} -> rows
function perf.compare(o)
  if type(o) ~= "table" then error("perf.compare: expected an options table", 2) end
  local A = o.A or o[1]
  if not A then error("perf.compare: give the operator as A = ... (or first)", 2) end
  if o.ranks ~= nil then return compare_ranks(o, A, 3) end
  local devs = o.devices or {"A100", "H100", "H200", "L40S", "MI250X", "MI300X"}
  local precs = o.precisions or {"double", "single"}
  local strats = o.strategies
  if not strats then
    strats = A:strategies({backend = o.backend})
  end
  local rows = {}
  print(("%-14s %-10s %-9s %10s  %-8s %s"):format("device", "strategy", "precision",
                                                  "predicted", "bound", "GDOF/s"))
  local bases = {}
  for _, d in ipairs(devs) do
    for _, s in ipairs(strats) do
      for _, p in ipairs(precs) do
        local ok, rep, basis = pcall(perf.predict, A, {action = o.action, device = d, strategy = s,
                                                        precision = p, backend = o.backend,
                                                        from = o.from})
        if ok then
          local row = {device = d, strategy = s, precision = p, seconds = rep.predicted_seconds,
                       bound = rep.bound, gdofs = rep.ndofs / rep.predicted_seconds / 1e9}
          rows[#rows + 1] = row
          print(("%-14s %-10s %-9s %10s  %-8s %.3g"):format(d, s, p, time(row.seconds), row.bound,
                                                          row.gdofs))
          if not bases[d] then
            bases[d] = true
            bases[#bases + 1] = ("  %s: %s"):format(d, basis)
          end
        else
          print(("%-14s %-10s %-9s %10s  %s"):format(d, s, p, "-", tostring(rep):gsub("^.-: ", "")))
        end
      end
    end
  end
  if #bases > 0 then print("ceilings:\n" .. table.concat(bases, "\n")) end
  return rows
end
help[#help + 1] = {"perf.compare",
  "perf.compare{A, action = \"apply\", devices = {...}, strategies = {...}, precisions = {...}, ranks =}",
  "One table of predicted times (perf.predict) of an operator's action across devices,\n" ..
  "strategies and precisions, printed and returned as rows {device, strategy, precision,\n" ..
  "seconds, bound, gdofs}; a case the model cannot answer says why in its row.\n" ..
  "ranks = N or {1, 2, 8}: the call on N ranks, a device each (from one rank: \"how fast on\n" ..
  "8 GPUs?\"): each part of m:partition(N) its share of the cells (perf.share) and its\n" ..
  "exchange (P:exchange(V), perf.exchange over device.link()), a CG's report (report =\n" ..
  "info.report) also its reductions (perf.reduction); the slowest part binds. Rows {ranks,\n" ..
  "device, seconds, per_step, compute, exchange, reductions, cells, messages, bytes, part,\n" ..
  "speedup};\n" ..
  "devices: this one (default) or datasheet entries; link = {latency_us =, gbytes =,\n" ..
  "allreduce_us =, ranks =} instead of the measured one; method = the partition's. What is\n" ..
  "not modelled is printed under the table (overlap: none today).\n" ..
  "example: perf.compare{A, devices = {\"H100\", \"H200\"}, precisions = {\"double\"}}\n" ..
  "  _, i = solve.cg(A); perf.compare{A, ranks = {1, 2, 8}, report = i.report, devices = {\"H200\"}}"}

function perf.devices()
  return devices
end
help[#help + 1] = {"perf.devices", "perf.devices()",
  "The datasheet table what-if predictions read (shell/lib/devices.lua): name, units,\n" ..
  "clock_ghz, dram_gbs, fp64_gflops, fp32_gflops, shared_bytes_per_clock, sources, ...\n" ..
  "example: for _, d in ipairs(perf.devices()) do print(d.name, d.dram_gbs) end"}

return help
