-- Benchmark (not a test), issue 48: a Jacobi-PCG iteration on a distorted box with kappa(x),
-- run by `scripts/bench/ranks.sh` as one rank of two threads and as two ranks of one thread
-- (the space split over the ranks: engine/parallel/dist.c); prints ms an iteration.
-- usage: felab scripts/bench/ranks.lua [cells per side] [space] [cell]
local n = tonumber(arg[1]) or 20
local m = mesh.box{cells = {n, n, n}, cell = arg[3] or "hex", distort = 0.1}
local V = fe.space(m, arg[2] or "Q3")
local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
solve.cg(A, {rtol = 1e-30, maxit = 5})
local best = math.huge
for _ = 1, 3 do
  local t0 = perf.clock()
  local u, i = solve.cg(A, {rtol = 1e-30, maxit = 100})
  best = math.min(best, perf.clock() - t0)
end
print(("%s %d dofs, ranks %d: %.2f ms an iteration (best of 3 x 100)"):format(V.name, V.ndofs, mpi.size, 10 * best))
