-- The cpu's model and its caches (docs/model.md, "The prediction"): device.info gives the
-- last-level cache and a core's L1 with the calibration; sumfact's Q7 apply counts its
-- contractions' arrays (two of a cell's 512 points a field, eight cells in the lanes) and
-- their operand words (one a multiply-add) in closed form; perf.model reads them from L2
-- where the arrays fill L1, not where L1 holds them; a call's bytes go at the cached triad's
-- rate at its size as calibrated over the last-level cache (without those rates: within what
-- it keeps at the L2 triad's rate, beyond at the DRAM rate); a GPU's calibration uses neither. The cpu's default for a nonlinear physics on distorted
-- hexes takes the geometry from the vertices (its factors stored a point are gathered
-- across the lanes a value at a time, counted as first touches: 4-5x slower), the same
-- Jacobian action as stored factors.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, close = T.check, T.close
local TOL = 1e-12

local info = device.info("cpu")
local cal = T.cpu_calibration()
check(cal.l1_bytes > 0, "the calibration has no L1 size (%s)", tostring(cal.l1_bytes))
if not (cal.llc_bytes > 0) then
  T.skip("this machine's sysfs and sysconf give no last-level cache")
  return
end
check(cal.llc_bytes >= cal.l1_bytes, "last-level cache %g under L1 %g", cal.llc_bytes, cal.l1_bytes)

-- Q7 hexes, Gauss 8 points a direction, the Poisson apply: a field interpolated (nv = 1)
local m = mesh.box{cells = {2, 2, 2}, cell = "hex"}
local V = fe.space(m, "Q7")
local A = fe.operator(V, physics.poisson{kappa = 1}, {dirichlet = "all"})
local v = V:interpolate(function(x) return x[1] + x[2] * x[3] end)
local _, rep = A:apply(v, {backend = "cpu", strategy = "sumfact", precision = "double"})
local p, q, ncells, w, lanes = 8, 8, 8, 8, 8
check(rep.array_bytes == 2 * q ^ 3 * lanes * w, "Q7 arrays %g bytes, expected %g", rep.array_bytes,
      2 * q ^ 3 * lanes * w)
-- the contractions' multiply-adds a cell: the interpolations (z in the gather, x, y), the
-- derivatives at the points, their transposes (z in registers), the transposed y and x
local flops = 2 * p * p * q * p + 2 * q * q * p * p + 2 * q * q * q * p -- interpolation
flops = flops + q ^ 3 * 2 * 3 * q                                        -- derivatives
flops = flops + q ^ 3 * (2 * 3 * q + 2 * p)                              -- transposed
flops = flops + 2 * p * p * q * (q + p)                                  -- transposed y, x
check(close(rep.operand_bytes, ncells * flops / 2 * w, TOL), "Q7 operands %g bytes, expected %g",
      rep.operand_bytes, ncells * flops / 2 * w)

local function with(over)
  local c = {}
  for k, x in pairs(cal) do c[k] = x end
  for k, x in pairs(over) do c[k] = x end
  return c
end
local units = info.compute_units

-- L1 holding the arrays: no operands from L2; filled by them: at the L2 rate, the FMA
-- ceiling at least that long
local held = perf.model(rep, with{l1_bytes = 4 * rep.array_bytes}, units)
check(held.operand_seconds == 0, "arrays in L1: operands from L2 took %g s", held.operand_seconds)
local filled = perf.model(rep, with{l1_bytes = rep.array_bytes}, units)
local want = rep.operand_bytes / (cal.l2_gbytes * 1e9)
check(close(filled.operand_seconds, want, TOL), "arrays filling L1: operands %g s, expected %g",
      filled.operand_seconds, want)
check(filled.ceilings.fma >= want * (1 - TOL), "the FMA ceiling %g under the operands' %g",
      filled.ceilings.fma, want)
check(filled.predicted_seconds >= held.predicted_seconds,
      "operands from L2 made the prediction faster (%g < %g)", filled.predicted_seconds,
      held.predicted_seconds)

-- the last-level cache: bytes within what it keeps at the L2 rate, beyond at the DRAM rate
-- (the two ceilings' ratio: the last wave's fill stretches both alike). Where the sweep's
-- rates are not given (llc_curve {}), what it keeps decides; not measured either
-- (llc_keep_bytes 0): half the cache kept, the share growing linearly up to the whole
local fits = perf.model(rep, with{llc_bytes = 4 * rep.bytes, llc_keep_bytes = 0, llc_curve = {}}, units)
check(fits.llc_share == 0, "bytes in half the cache: share from memory %g", fits.llc_share)
local beyond = perf.model(rep, with{llc_bytes = rep.bytes, llc_keep_bytes = 0, llc_curve = {}}, units)
check(beyond.llc_share == 1, "bytes past half the cache: share from memory %g", beyond.llc_share)
local half = perf.model(rep, with{llc_bytes = rep.bytes / 0.75, llc_keep_bytes = 0, llc_curve = {}}, units)
check(close(half.llc_share, 0.5, 1e-9), "bytes at 3/4 of the cache, none kept measured: share %g, " ..
      "expected 0.5", half.llc_share)
-- measured (the cached triad's sizes an eighth of the cache apart): all found up to what
-- it keeps, all from memory an eighth of the cache past it, linear between
local kept = perf.model(rep, with{llc_bytes = 8 * rep.bytes, llc_keep_bytes = rep.bytes, llc_curve = {}}, units)
check(kept.llc_share == 0, "bytes the cache keeps: share from memory %g", kept.llc_share)
local past = perf.model(rep, with{llc_bytes = 4 * rep.bytes, llc_keep_bytes = rep.bytes / 2, llc_curve = {}}, units)
check(past.llc_share == 1, "bytes an eighth of the cache past what it keeps: share %g", past.llc_share)
local mid = perf.model(rep, with{llc_bytes = 8 * rep.bytes, llc_keep_bytes = 0.75 * rep.bytes, llc_curve = {}}, units)
check(close(mid.llc_share, 0.25, 1e-9), "bytes a 32nd of the cache past what it keeps: share %g, " ..
      "expected 0.25", mid.llc_share)
check(close(past.ceilings.dram / kept.ceilings.dram, cal.l2_gbytes / cal.gbytes, 1e-9),
      "dram ceiling past what the cache keeps %g, within it %g: not the rates' ratio %g",
      past.ceilings.dram, kept.ceilings.dram, cal.l2_gbytes / cal.gbytes)
check(cal.llc_keep_bytes >= 0 and cal.llc_keep_bytes <= cal.llc_bytes,
      "the calibration keeps %g bytes of a %g-byte cache", cal.llc_keep_bytes, cal.llc_bytes)
check(close(beyond.ceilings.dram / fits.ceilings.dram, cal.l2_gbytes / cal.gbytes, 1e-9),
      "dram ceiling past the cache %g, in it %g: not the rates' ratio %g", beyond.ceilings.dram,
      fits.ceilings.dram, cal.l2_gbytes / cal.gbytes)
-- the sweep's rates given (llc_gbytes at a quarter of the cache, llc_curve at 3/8 .. 8/8): a
-- call's bytes at the rate of its size, as the share of memory's and L2's rates that gives
-- it; here L2's rate to 4/8, the two rates' harmonic mean at 5/8 (a share of one half),
-- memory's from 6/8; under a quarter the share shrinks with the size, past the whole cache it
-- grows to all within an eighth more
local l2, dram = cal.l2_gbytes, cal.gbytes
local hm = 2 / (1 / l2 + 1 / dram)
local sweep = {llc_keep_bytes = 0, llc_gbytes = l2, llc_curve = {l2, l2, hm, dram, dram, dram}}
local function at(eighths)
  local o = {llc_bytes = 8 * rep.bytes / eighths}
  for k, x in pairs(sweep) do o[k] = x end
  return perf.model(rep, with(o), units)
end
check(at(1).llc_share == 0 and at(3).llc_share == 0, "within L2's rate: shares %g and %g",
      at(1).llc_share, at(3).llc_share)
check(close(at(5).llc_share, 0.5, 1e-9), "at 5/8 of the cache, the rates' harmonic mean: share %g",
      at(5).llc_share)
check(close(at(4.5).llc_share, (1 / ((l2 + hm) / 2) - 1 / l2) / (1 / dram - 1 / l2), 1e-9),
      "at 4.5/8, the rate between the sizes measured: share %g", at(4.5).llc_share)
check(at(7).llc_share == 1 and at(9).llc_share == 1, "at memory's rate: shares %g and %g",
      at(7).llc_share, at(9).llc_share)
check(close(at(5).ceilings.dram / kept.ceilings.dram, (l2 / hm), 1e-9),
      "dram ceiling at the harmonic mean's size %g, within the cache %g: not the rates' ratio %g",
      at(5).ceilings.dram, kept.ceilings.dram, l2 / hm)
-- this machine's calibration: the engine's report and perf.model agree
local here = perf.model(rep, cal, units)
local measured = cal.llc_curve and cal.llc_gbytes > 0
local keep = cal.llc_keep_bytes > 0 and cal.llc_keep_bytes or cal.llc_bytes / 2
local over = cal.llc_keep_bytes > 0 and cal.llc_bytes / 8 or cal.llc_bytes / 2
check((measured or close(rep.llc_share, math.min(1, math.max(0, (rep.bytes - keep) / over)), 1e-12)) and
      rep.llc_share == here.llc_share and close(here.ceilings.dram, rep.ceilings.dram, TOL),
      "the call's %g bytes against this machine's cache (%g, %g kept): share %g, dram ceiling " ..
      "%g, the report's %g and %g", rep.bytes, cal.llc_bytes, cal.llc_keep_bytes, here.llc_share,
      here.ceilings.dram, rep.llc_share, rep.ceilings.dram)

-- a GPU's calibration: neither cache term
local gpu = perf.model(rep, with{gpu = true, llc_bytes = 4 * rep.bytes, l1_bytes = 1}, units)
check(gpu.llc_share == 1 and gpu.operand_seconds == 0,
      "a GPU took the cpu's caches: share %g, operands %g s", gpu.llc_share, gpu.operand_seconds)

-- the p-Laplacian's Jacobian on a distorted Q3 box: the default's geometry, and its action
do
  local md = mesh.box{cells = {3, 3, 3}, cell = "hex", distort = 0.1}
  local Vd = fe.space(md, "Q3")
  local P = fe.operator(Vd, physics.p_laplacian{p = 3, source = 1}, {dirichlet = "all"})
  local u = Vd:interpolate(function(x) return x[1] * x[2] + 0.3 * x[3] end)
  local w = Vd:interpolate(function(x) return x[1] - x[3] * x[3] end)
  local y1, r1 = P:apply(w, {backend = "cpu", strategy = "sumfact", at = u})
  local y2 = P:apply(w, {backend = "cpu", strategy = "sumfact", geometry = "stored", at = u})
  check(r1.why:find("geometry from the vertices", 1, true) ~= nil,
        "p-Laplacian on distorted hexes, cpu default: %s", r1.why)
  local d = y1:copy():axpy(-1, y2)
  local rel = math.max(math.abs(d:max()), math.abs(d:min())) / math.max(math.abs(y2:max()), math.abs(y2:min()))
  check(rel <= 1e-12, "from the vertices and stored: the actions differ by %.2e", rel)
end
T.done()
