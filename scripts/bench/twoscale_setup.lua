-- Benchmark (not a test): the two-scale preconditioner's setup, part by part (issue 47):
-- Qn on the distorted box (distort 0.3), k setups in one process, each line the setup's
-- wall time and every part of P.setup_parts above half a millisecond (hypre's part is its
-- own time, on a thread of its own beside the fine scale's and the transfers' maps); then
-- CG to 1e-8 with the last one: its iterations and the faster of two solves.
-- usage: felab scripts/bench/twoscale_setup.lua [space] [cells a side] [backend] [k]
--   defaults: Q3 44 cuda 3 (2.35M dofs; the coarse problem Q1 on 91,125 vertices)
--   TAG=... prefixes every line (alternating builds)
local order, n, be, k = arg[1] or "Q3", tonumber(arg[2]) or 44, arg[3] or "cuda", tonumber(arg[4]) or 3
local tag = os.getenv("TAG") or ""
local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = 0.3}
local V = fe.space(m, order)
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all", value = 0})
local P
for _ = 1, k do
  P = nil
  collectgarbage()
  local t0 = perf.clock()
  P = solve.precond(A, {pc = "twoscale", backend = be})
  local t = perf.clock() - t0
  local parts = {}
  for key, v in pairs(P.setup_parts) do
    if v > 0.0005 then parts[#parts + 1] = ("%s %.3f"):format(key, v) end
  end
  table.sort(parts)
  print(("%s%s %d^3 setup %.3f s | %s"):format(tag, order, n, t, table.concat(parts, ", ")))
end
local best, its = math.huge
for _ = 1, 2 do
  local t0 = perf.clock()
  local x, info = solve.cg(A, {pc = P, backend = be, rtol = 1e-8})
  x:norm()
  best, its = math.min(best, perf.clock() - t0), info.iterations
end
print(("%s%s %d^3 CG %d iterations, solve %.4f s | %s"):format(tag, order, n, its, best,
      P.describe:match("BoomerAMG[^)]*%)") or P.describe))
