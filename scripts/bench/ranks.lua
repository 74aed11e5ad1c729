-- Benchmark (not a test), issue 48: a Jacobi-PCG iteration on a distorted box with kappa(x),
-- run by `scripts/bench/ranks.sh` (cpu: one rank of two threads against two ranks of one
-- thread) and `scripts/bench/ranks_gpu.sh` (a GPU a rank); the space is split over the ranks
-- (engine/parallel/dist.c). Prints ms an iteration and each iteration's exchange, then the
-- last apply's exchange measured against the model's prediction (with FELAB_ALL_RANKS=1 each
-- rank prints its own).
-- usage: felab scripts/bench/ranks.lua [cells: N or NxMxK] [space] [cell] [backend] [strategy]
local here = arg[0] and arg[0]:match("^(.*/)") or "scripts/bench/"
local V, A = dofile(here .. "ranks_case.lua")(arg[1], arg[2], arg[3])
local opts = {rtol = 1e-30, maxit = 5, backend = arg[4], strategy = arg[5]}
local t0 = perf.clock()
solve.cg(A, opts)
local first = perf.clock() - t0
opts.maxit = 100
-- two times a solve: the whole call (its r0, its Jacobi diagonal and its vectors made, then
-- the iterations) and its iterations alone (the solve's report: the loop, as PETSc's and
-- libCEED's benchmarks time KSPSolve after the preconditioner's setup)
local best, info, iters = math.huge, nil, math.huge
for _ = 1, 3 do
  t0 = perf.clock()
  local _, i = solve.cg(A, opts)
  local t = perf.clock() - t0
  if t < best then best, info = t, i end
  iters = math.min(iters, i.report.seconds / i.iterations)
end
local rep = info.report
-- the apply alone (its exchange included), best of 3 x 20
local v = V:interpolate("1 + x[0]", {backend = arg[4]})
local ao = {backend = arg[4], strategy = arg[5]}
A:apply(v, ao)
local abest, arep = math.huge, nil
for _ = 1, 3 do
  t0 = perf.clock()
  for _ = 1, 20 do _, arep = A:apply(v, ao) end
  abest = math.min(abest, (perf.clock() - t0) / 20)
end
print(("%s %d dofs, ranks %d, %s: %.3f ms an iteration (the iterations; %.3f with the solve's"
       .. " setup, best of 3 x %d), exchange %.3f ms an"
       .. " iteration (%d bytes, %d messages), first solve %.2f s; apply %.3f ms")
      :format(V.name, V.ndofs, mpi.size, rep.strategy or "?", 1e3 * iters,
              1e3 * best / info.iterations, info.iterations, 1e3 * (rep.exchange_seconds or 0) / info.iterations,
              rep.exchange_bytes or 0, rep.exchange_messages or 0, first, 1e3 * abest))
if mpi.size > 1 then
  print(("rank %d: the apply's exchange %.1f us measured, %.1f us predicted (%s, %s), apply %.3f ms")
        :format(mpi.rank, 1e6 * (arep.exchange_seconds or 0), 1e6 * (arep.exchange_predicted or 0),
                arep.exchange_beside and "beside the interior" or "after the cells",
                arep.exchange_direct and "device to device" or "through the host",
                1e3 * arep.seconds))
end
