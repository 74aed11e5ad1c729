-- Issue 43's cases as a user brings them, on one backend: fp64 (and two fp32) Jacobi-PCG ms
-- per iteration and the apply, the default strategy (autotuned from 200k dofs), the model's
-- prediction of the apply; the uniform box with kappa 1 beside the distorted box (distort =
-- 0.1) with kappa = 1 + 0.5 x, and Gmsh meshes (refined) with the same kappa.
--   felab scripts/bench/users.lua [backend] [meshes folder] [scale] [out.csv] [each] [rounds]
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
-- calibration or in the applies, outvoted).
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
local rows = {}

local function case(sp, n, distort, kappa, label, quad, prec)
  local o = {precision = prec}
  local m, why = M.mesh(sp, n, distort, scale)
  if not m then print(("%-3s %-15s skipped: %s"):format(sp, label, why)); return end
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
  if not ok then print(sp, label, "failed", y); return end
  local first = rep -- the default's choice and why
  -- each round the best of 10 applies (after a calibration, with each); the round of the
  -- median ratio of prediction to measurement is the case's (later rounds run the strategy
  -- the first chose, so that a new calibration's choice does not change what is measured)
  local got = {}
  for r = 1, rounds do
    if r > 1 then
      o.strategy = o.strategy or first.strategy
      if each then device.calibrate(be, o.precision or "double") end
    end
    local b, br = 1e9, rep
    for _ = 1, 10 do
      y, rep = A:apply(v, o)
      if rep.seconds < b then b, br = rep.seconds, rep end
    end
    got[#got + 1] = {b, br}
  end
  table.sort(got, function(a, b) return a[2].predicted_seconds / a[1] < b[2].predicted_seconds / b[1] end)
  local best, brep = got[(#got + 1) // 2][1], got[(#got + 1) // 2][2]
  rep = brep
  local so = {pc = "jacobi", rtol = 1e-30, maxit = 50, backend = be, strategy = o.strategy,
              fold = o.fold, precision = o.precision}
  local cg = nonlinear and 0 or 1e9
  for _ = 1, nonlinear and 0 or 2 do
    local _, info = solve.cg(A, so)
    cg = math.min(cg, info.report.seconds / info.iterations)
  end
  local line = ("%-3s %8d %-15s %-5s apply %6.3f pred %6.3f pcg %6.3f ms/it %-9s %s"):format(
    sp, V.ndofs, label, quad and "gll" or "gauss", best * 1e3, rep.predicted_seconds * 1e3,
    cg * 1e3, first.strategy, first.why)
  print(line)
  io.stdout:flush()
  if csv then
    local vals = {sp, V.ndofs, label, quad and "gll" or "gauss", o.precision or "double",
                  brep.strategy, brep.seconds, brep.predicted_seconds, cg}
    for _, f in ipairs(fields) do vals[#vals + 1] = brep[f] or 0 end
    local ce = brep.ceilings
    for _, f in ipairs(ceilings) do vals[#vals + 1] = ce[f] or 0 end
    vals[#vals + 1] = table.concat(brep.phase_seconds or {}, ";") -- each described phase's part
    for i, x in ipairs(vals) do vals[i] = tostring(x) end
    csv:write(table.concat(vals, ",") .. "\n")
    csv:flush()
  end
  rows[#rows + 1] = line
  collectgarbage()
end

M.run(case, meshes, rows)
