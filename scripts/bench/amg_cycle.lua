-- Benchmark (not a test), issue 47: multigrid's V-cycle on the host (BoomerAMG's own) against
-- felab's on the device (cycle_on = "device"), beside Jacobi-PCG, in one process.
--   Q3 and Q7 Poisson with two-scale on a distorted hex box (the issue's 2.35M and 2.80M dofs);
--   P1 Poisson with AMG-PCG on a distorted tet box (the issue's 7.19M dofs).
-- Each to rtol 1e-8, setup apart; each solve run twice and its faster kept (the first may
-- compile), each setup's first and second time printed.
-- usage: felab scripts/bench/amg_cycle.lua [backend] [cases] [scale] [distort] [cycles]
--   cases: a comma list of "q3", "q7", "p1" (default all), and "split" (two-scale's scales
--   timed apart); scale multiplies the cells per side (1: the issue's sizes; 0.1 runs in
--   seconds on a cpu); distort (default 0.3); cycles: "host,device" (default) or one of them,
--   "device-double": the device cycle with its level values double (cycle_values)
local backend = arg[1] or "cuda"
local want = {}
for s in (arg[2] or "q3,q7,p1"):gmatch("[^,]+") do want[s] = true end
local scale = tonumber(arg[3]) or 1
local distort = tonumber(arg[4]) or 0.3
local ons = {}
for s in (arg[5] or "host,device"):gmatch("[^,]+") do ons[#ons + 1] = s end

local function operator(cell, n, space)
  local m = mesh.box{cells = {n, n, n}, cell = cell, distort = distort}
  local V = fe.space(m, space)
  return fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all", value = 0}), V
end

local function parts_string(parts)
  if not parts then return "" end
  local names = {}
  for k in pairs(parts) do names[#names + 1] = k end
  table.sort(names)
  local out = {}
  for _, k in ipairs(names) do out[#out + 1] = ("%s %.3f"):format(k, parts[k]) end
  return table.concat(out, ", ")
end

local rows = {}
local function row(case, dofs, pc, its, solve_s, setup1, setup2, what)
  rows[#rows + 1] = ("%-4s %9d %-16s %5s %9.4f %9s %9s  %s"):format(case, dofs, pc, tostring(its),
    solve_s, setup1 and ("%.3f"):format(setup1) or "-", setup2 and ("%.3f"):format(setup2) or "-",
    what or "")
  print(rows[#rows])
end

local opts = {rtol = 1e-8, maxit = 20000, backend = backend}
local function cg(A, pc)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.pc = pc
  local best, x, info = math.huge, nil, nil
  for _ = 1, 2 do
    local t0 = perf.clock()
    x, info = solve.cg(A, o)
    best = math.min(best, perf.clock() - t0)
  end
  return x, info, best
end

local function compare(case, A, V, pc)
  local xj, ij, tj = cg(A, "jacobi")
  row(case, V.ndofs, "jacobi", ij.converged and ij.iterations or "-", tj)
  local xs = {}
  for _, name in ipairs(ons) do
    local on, values = name:match("^(%a+)%-?(%a*)$")
    local P, setups = nil, {}
    for k = 1, 2 do
      P = nil
      collectgarbage()
      local t0 = perf.clock()
      P = solve.precond(A, {pc = pc, cycle_on = on, backend = backend,
                            cycle_values = values ~= "" and values or nil})
      setups[k] = perf.clock() - t0
    end
    local x, info, t = cg(A, P)
    xs[name] = x
    row(case, V.ndofs, pc .. " " .. name, info.converged and info.iterations or "-", t, setups[1],
        setups[2], P.describe)
    print(("     setup parts (s): %s; %.2f ms an application"):format(parts_string(P.setup_parts),
          1e3 * P.apply_seconds / math.max(1, P.applications)))
    if #P.levels > 0 then
      local lv, sum = {}, 0
      for l, v in ipairs(P.levels) do
        lv[#lv + 1] = ("%d: %d rows %.3f ms"):format(l, v.rows, 1e3 * v.seconds)
        sum = sum + v.seconds
      end
      print(("     one timed cycle %.3f ms: %s"):format(1e3 * sum, table.concat(lv, ", ")))
    end
  end
  if pc == "twoscale" and want.split then -- where a device application's time goes: its scales apart
    local r = V:interpolate(function(p) return math.sin(9 * p[1]) * p[2] + p[3] end):to(backend)
    local line = {}
    for _, parts in ipairs({"fine", "coarse", "both"}) do
      local P = solve.precond(A, {pc = pc, parts = parts, backend = backend})
      local z = P:apply(r)
      z:norm()
      local t0, k = perf.clock(), 20
      for _ = 1, k do z = P:apply(r) end
      z:norm() -- waits for the device
      line[#line + 1] = ("%s %.3f ms"):format(parts, 1e3 * (perf.clock() - t0) / k)
    end
    print("     an application, device cycle: " .. table.concat(line, ", "))
  end
  if xs.device and xs.host then
    print(("     |x_device - x_host| / |x_host| = %.2e, |x_device - x_jacobi| / |x_jacobi| = %.2e")
          :format(xs.device:copy():axpy(-1, xs.host):norm() / xs.host:norm(),
                  xs.device:copy():axpy(-1, xj):norm() / xj:norm()))
  end
end

print(("multigrid's cycle on the host and on %s; distort %g, rtol 1e-8, setup apart"):format(
      backend, distort))
print(("%-4s %9s %-16s %5s %9s %9s %9s  %s"):format("case", "dofs", "pc", "its", "solve s",
      "setup1 s", "setup2 s", "preconditioner"))
local function cells(n) return math.max(2, math.floor(n * scale + 0.5)) end
if want.q3 then
  local A, V = operator("hex", cells(44), "Q3") -- (3 * 44 + 1)^3 = 2.35M dofs
  compare("Q3", A, V, "twoscale")
end
if want.q7 then
  local A, V = operator("hex", cells(20), "Q7") -- (7 * 20 + 1)^3 = 2.80M dofs
  compare("Q7", A, V, "twoscale")
end
if want.p1 then
  local A, V = operator("tet", cells(192), "P1") -- 193^3 = 7.19M dofs
  compare("P1", A, V, "amg")
end
print("\nsummary")
for _, r in ipairs(rows) do print(r) end
