-- Benchmark (not a test): the two-scale preconditioner of Remacle, Gandham and Warburton.
--   sweep: the paper's Table 1 in form, CG iterations to 1e-8 at Q3 on a uniform, a nearly
--          uniform and a strongly distorted box from 4^3 to 32^3 cells, for jacobi, the
--          fine scale alone and two-scale (both scales);
--   time:  time to solution to 1e-8 (setup apart) of Q3 and Q7 Poisson on the distorted box
--          at about 2.7M dofs for jacobi, chebyshev and twoscale.
-- usage: felab scripts/bench/twoscale.lua [backend] [sections] [scale]
--   sections: a comma list of "sweep", "time" (default: both)
--   scale multiplies the cells per side (1: the sizes above; 0.125 runs in seconds on a cpu)
local backend = arg[1] or "cuda"
local want = {}
for s in (arg[2] or "sweep,time"):gmatch("[^,]+") do want[s] = true end
local scale = tonumber(arg[3]) or 1

local meshes = {{"uniform", 0}, {"nearly uniform", 0.3}, {"distorted", 1}}

local function operator(n, distort, space)
  local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = distort}
  local V = fe.space(m, space)
  return fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all", value = 0}), V
end

-- one solve: iterations (or "-" when it did not converge), seconds of the iterations, of the
-- preconditioner's setup
local function solve_with(A, pc, parts)
  local o = {rtol = 1e-8, maxit = 5000, backend = backend}
  if pc then o.pc, o.parts = pc, parts end
  local t0 = os.clock()
  local ok, u, info = pcall(solve.cg, A, o)
  if not ok then return "err", 0, 0, tostring(u) end
  local setup = info.pc_setup_seconds or 0
  return info.converged and info.iterations or "-", info.report.seconds, setup, info.pc, os.clock() - t0
end

if want.sweep then
  print(string.format("Table 1 in form: CG iterations to 1e-8, Q3, backend %s", backend))
  print(string.format("%-15s %-10s %8s %8s %8s %8s", "mesh", "pc", "4^3", "8^3", "16^3", "32^3"))
  for _, mc in ipairs(meshes) do
    for _, pc in ipairs({{"jacobi"}, {"twoscale", "fine"}, {"twoscale", "both"}}) do
      local row = {}
      for _, n in ipairs({4, 8, 16, 32}) do
        local cells = math.max(1, math.floor(n * scale + 0.5))
        local A = operator(cells, mc[2], "Q3")
        row[#row + 1] = string.format("%8s", tostring((solve_with(A, pc[1], pc[2]))))
      end
      print(string.format("%-15s %-10s %s", mc[1], pc[2] or pc[1], table.concat(row, " ")))
    end
  end
end

if want.time then
  print(string.format("Time to solution to 1e-8 (setup apart), distorted box, backend %s", backend))
  print(string.format("%-5s %10s %-10s %6s %10s %10s  %s", "space", "dofs", "pc", "iters",
                      "solve s", "setup s", "preconditioner"))
  -- about 2.7M dofs: (3 n + 1)^3 at Q3 (n = 46), (7 n + 1)^3 at Q7 (n = 20)
  for _, case in ipairs({{"Q3", 46}, {"Q7", 20}}) do
    local cells = math.max(1, math.floor(case[2] * scale + 0.5))
    local A, V = operator(cells, 1, case[1])
    for _, pc in ipairs({"jacobi", "chebyshev", "twoscale"}) do
      local it, s, setup, what = solve_with(A, pc)
      print(string.format("%-5s %10d %-10s %6s %10.4f %10.4f  %s", case[1], V.ndofs, pc,
                          tostring(it), s, setup, tostring(what)))
    end
  end
end
