-- Issue 43's cases as a user brings them, on one backend: fp64 (and two fp32) Jacobi-PCG ms
-- per iteration and the apply, the default strategy (autotuned from 200k dofs), the model's
-- prediction of the apply; the uniform box with kappa 1 beside the distorted box (distort =
-- 0.1) with kappa = 1 + 0.5 x, and Gmsh meshes (refined) with the same kappa.
--   felab scripts/bench/users.lua [backend] [meshes folder] [scale] [out.csv] [each] [rounds]
--                                 [passes]
--                                       (cuda; .peers/matrix-meshes; 1: the H200's sizes)
-- scale multiplies the cells per side (the cpu: 1/3, about 1/27 of the dofs) and takes
-- log2(1/scale) refinements off the Gmsh meshes.
-- The meshes folder holds what `felab scripts/bench/matrix.lua write-meshes DIR` wrote
-- (shell_hex.msh, torso-0.063.msh); rows whose mesh is missing are skipped, saying so.
-- kappa(u): the p-Laplacian's Jacobian action (p = 3) at a state u, apply only (no PCG:
-- "pcg 0"). A table last: case, dofs, label, rule, apply, predicted, PCG, strategy, why. out.csv, where
-- given, gets each case's best apply as counted and predicted (each ceiling alone), for the
-- model's terms to be read against the measurement. each: calibrate again before every case
-- (the 2-core machine's speed moves in phases: the prediction and the measurement then come
-- from the same stretch of it, as model.lua's each does). rounds (default 1): each case
-- measured so many times, a calibration before each with `each`; the round of the median
-- ratio of prediction to measurement is the case's (a noisy machine's slow stretches, in a
-- calibration or in the applies, outvoted). passes (default 1): the whole matrix so many
-- times, each case's rounds of every pass counted together (a slow stretch of minutes then
-- falls in one pass: on the 2-core AMD EPYC VM the same apply ran 0.555 ms for most seconds,
-- 0.68-0.81 for some, and 0.73-0.78 through the first minutes of two runs; no steal time).
local be = arg and arg[1] or "cuda"
local meshes = arg and arg[2] or ".peers/matrix-meshes"
local scale = tonumber(arg and arg[3] or "1") or 1
local csv = arg and arg[4] and io.open(arg[4], "w")
local fields = {"bytes", "flops", "l2_bytes", "indexed", "indexed_first", "factor_lanes",
                "factor_gathers", "loop_seconds", "serial_seconds", "array_bytes",
                "operand_bytes", "operand_seconds", "llc_share", "occupancy", "resident", "groups",
                "stagger_seconds", "waits_hidden", "l1_tag_seconds"}
local ceilings = {"dram", "l2", "shared", "fma", "nonfma", "atomics", "constant", "indexed",
                  "launches", "latency"}
if csv then
  csv:write("space,dofs,label,rule,precision,strategy,seconds,predicted,pcg," ..
            table.concat(fields, ",") .. "," .. "t_" .. table.concat(ceilings, ",t_") .. ",phases\n")
end
local each = arg and arg[5] == "each"
local rounds = math.max(1, math.floor(tonumber(arg and arg[6] or "1") or 1))
local M = dofile((arg and arg[0] and arg[0]:match("^(.*/)") or "scripts/bench/") .. "users_matrix.lua")
local passes = math.max(1, math.floor(tonumber(arg and arg[7] or "1") or 1))
local rows, order, cases = {}, {}, {}

local function case(sp, n, distort, kappa, label, quad, prec)
  local key = table.concat({sp, label, quad and "gll" or "gauss"}, " ")
  local c = cases[key]
  if not c then
    c = {got = {}}
    cases[key], order[#order + 1] = c, key
  end
  local o = {precision = prec, strategy = c.strategy}
  local m, why = M.mesh(sp, n, distort, scale)
  if not m then c.skipped = ("%-3s %-15s skipped: %s"):format(sp, label, why); return end
  local V = fe.space(m, sp)
  local nonlinear = kappa == "u"
  local pde = nonlinear and physics.p_laplacian{p = 3, source = 1}
              or physics.poisson{kappa = kappa, source = 1}
  local A = fe.operator(V, pde, {dirichlet = "all", quadrature = quad})
  local v = V:interpolate(1)
  o.backend = be
  if nonlinear then
    o.at = V:interpolate(function(x) return x[1] * x[2] + 0.3 * x[3] end):to(be, o.precision)
  end
  if each then device.calibrate(be, o.precision or "double") end
  local ok, y, rep = pcall(A.apply, A, v, o)
  if not ok then c.skipped = ("%s %s failed: %s"):format(sp, label, y); return end
  if not c.first then -- the default's choice and why, from the first pass
    c.first, c.ndofs, c.sp, c.label, c.quad, c.prec = rep, V.ndofs, sp, label, quad, prec
  end
  -- each round the best of 10 applies (after a calibration, with each); later rounds and
  -- passes run the strategy the first chose, so that a new calibration's choice does not
  -- change what is measured
  for r = 1, rounds do
    if r > 1 then
      o.strategy = o.strategy or c.first.strategy
      if each then device.calibrate(be, o.precision or "double") end
    end
    local b, br = 1e9, rep
    for _ = 1, 10 do
      y, rep = A:apply(v, o)
      if rep.seconds < b then b, br = rep.seconds, rep end
    end
    c.got[#c.got + 1] = {b, br}
  end
  c.strategy = c.strategy or c.first.strategy
  local so = {pc = "jacobi", rtol = 1e-30, maxit = 50, backend = be, strategy = c.strategy,
              fold = o.fold, precision = o.precision}
  c.cg = c.cg or (nonlinear and 0 or 1e9)
  for _ = 1, nonlinear and 0 or 2 do
    local _, info = solve.cg(A, so)
    c.cg = math.min(c.cg, info.report.seconds / info.iterations)
  end
  io.write("."); io.stdout:flush()
  collectgarbage()
end

-- A case's row: the round (of every pass) of the median ratio of prediction to measurement,
-- each round's prediction from the calibration just before its applies (the machine's speed
-- moves in stretches: its memory's, in the calibration's triad, 31-54 GB/s within a minute on
-- the 2-core AMD EPYC VM); its counts and ceilings go to the csv.
local function row(c)
  table.sort(c.got, function(a, b) return a[2].predicted_seconds / a[1] < b[2].predicted_seconds / b[1] end)
  local best, brep = c.got[(#c.got + 1) // 2][1], c.got[(#c.got + 1) // 2][2]
  local line = ("%-3s %8d %-15s %-5s apply %6.3f pred %6.3f pcg %6.3f ms/it %-9s %s"):format(
    c.sp, c.ndofs, c.label, c.quad and "gll" or "gauss", best * 1e3, brep.predicted_seconds * 1e3,
    c.cg * 1e3, c.first.strategy, c.first.why)
  print(line)
  if csv then
    local vals = {c.sp, c.ndofs, c.label, c.quad and "gll" or "gauss", c.prec or "double",
                  brep.strategy, best, brep.predicted_seconds, c.cg}
    for _, f in ipairs(fields) do vals[#vals + 1] = brep[f] or 0 end
    local ce = brep.ceilings
    for _, f in ipairs(ceilings) do vals[#vals + 1] = ce[f] or 0 end
    vals[#vals + 1] = table.concat(brep.phase_seconds or {}, ";") -- each described phase's part
    for i, x in ipairs(vals) do vals[i] = tostring(x) end
    csv:write(table.concat(vals, ",") .. "\n")
    csv:flush()
  end
  rows[#rows + 1] = line
end

for _ = 1, passes do M.each(case, meshes) end
print()
for _, key in ipairs(order) do
  local c = cases[key]
  if c.first then row(c) else print(c.skipped) end
end
print("== table")
for _, l in ipairs(rows) do print(l) end
