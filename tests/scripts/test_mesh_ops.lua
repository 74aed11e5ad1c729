-- Mesh operations through the shell: refinement keeps the volume and improves the solution
-- at the expected rate, reordering keeps the solution, quality and coloring report sensibly.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local function exact(x) return x[1] * (1 - x[1]) * x[2] * (1 - x[2]) * x[3] * (1 - x[3]) end
local source = "2*(x[1]*(1-x[1])*x[2]*(1-x[2]) + x[0]*(1-x[0])*x[2]*(1-x[2]) + x[0]*(1-x[0])*x[1]*(1-x[1]))"
local function solve_error(m, space)
  local A = fe.operator(fe.space(m, space), physics.poisson{kappa = 1, source = source},
                        {dirichlet = "all"})
  local u, info = solve.cg(A, {rtol = 1e-12})
  check(info.converged)
  return u:error(exact, "L2")
end

for _, case in ipairs({{"tet", "P1"}, {"hex", "Q1"}}) do
  local m = mesh.box{cells = {6, 6, 6}, cell = case[1], distort = 0.3}
  local e0 = solve_error(m, case[2])
  -- reorder: the same discrete problem, numbered differently
  local m2 = mesh.box{cells = {6, 6, 6}, cell = case[1], distort = 0.3}
  m2:reorder("rcm")
  local e1 = solve_error(m2, case[2])
  check(math.abs(e1 - e0) <= 1e-9 * e0, ("%s: rcm changed the error %g -> %g"):format(case[1], e0, e1))
  local m3 = mesh.box{cells = {6, 6, 6}, cell = case[1], distort = 0.3}
  m3:reorder("hilbert")
  local e2 = solve_error(m3, case[2])
  check(math.abs(e2 - e0) <= 1e-9 * e0, ("%s: hilbert changed the error"):format(case[1]))
  -- refine: 8x the cells, the error drops by about 4 (rate 2)
  local r = m:refine()
  check(r.ncells == 8 * m.ncells, "refine: cell count")
  local q = r:quality()
  check(math.abs(q.volume - 1) < 1e-12, "refine: volume " .. q.volume)
  local rate = math.log(e0 / solve_error(r, case[2]), 2)
  check(rate > 1.7 and rate < 2.4, ("%s: rate after refinement %.2f"):format(case[1], rate))
  local ncolors, sizes = r:color{block = 32}
  local total = 0
  for _, s in ipairs(sizes) do total = total + s end
  check(ncolors == #sizes and ncolors <= 64 and total > 0, "color")
  print(("%s: reorder keeps the solution, refine rate %.2f, quality %.2f..%.2f, %d colors ok"):format(
        case[1], rate, q.min, q.max, ncolors))
end
local ok, msg = pcall(function() mesh.box{cells = 2}:reorder("random") end)
check(not ok and msg:find("rcm", 1, true), msg)
T.done()
