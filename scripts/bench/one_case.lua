-- Benchmark (not a test): one case, for a profiler or a build-option experiment
-- (e.g. FELAB_CUDA_OPTIONS=-DFE_PATCH_GROUPS_PER_SM=6): the Poisson Jacobian action, best
-- of `reps` applies (reps = 1: a single launch for `ncu`), then Jacobi-PCG for `its`
-- iterations (0: none).
-- usage: felab scripts/bench/one_case.lua [backend] [cell] [space] [cells per side]
--          [strategy] [precision] [reps] [its] [block] [lanes] [geometry] [rule] [scatter]
local backend, cell, space = arg[1] or "cuda", arg[2] or "tet", arg[3] or "P1"
local n = tonumber(arg[4]) or 192
local o = {backend = backend, strategy = arg[5] or "patch", precision = arg[6] or "double"}
local reps, its = tonumber(arg[7]) or 10, tonumber(arg[8]) or 200
o.block = tonumber(arg[9]) -- nil or 0: the default
o.lanes = tonumber(arg[10]) -- patches: nodes whose runs are interleaved (nil or 0: the default)
o.geometry = arg[11] -- sumfact: "stored", "vertices" or nil (the model's choice)
local rule = arg[12] ~= "" and arg[12] or nil -- "gll": the collocated rule on GLL nodes; nil: the default (Gauss)
o.scatter = arg[13] -- sumfact: "atomic", "nodes" or nil (the default)

local t0 = perf.clock()
local m = mesh.box{cells = {n, n, n}, cell = cell}
local V = fe.space(m, space)
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1},
                      {dirichlet = "all", quadrature = rule and {rule = rule} or nil})
local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, o.precision)
print(("%s %s, %d cells, %d dofs, %s %s (%.1f s)"):format(space, cell, m.ncells, V.ndofs, o.strategy,
      o.precision, perf.clock() - t0))
local t1 = perf.clock()
local _, best = A:apply(w, o)
print(("first apply (setup, compile) %.1f s"):format(perf.clock() - t1))
for _ = 2, reps do
  local _, rep = A:apply(w, o)
  if rep.seconds < best.seconds then best = rep end
end
local cal = device.calibrate(backend, o.precision)
print(("apply %.3f ms  %.0f GB/s (%.0f%% of %.0f)  %.0f GF/s  predicted/measured %.2f"):format(
      best.seconds * 1e3, best.gbytes, 100 * best.gbytes / cal.peak_gbytes, cal.peak_gbytes,
      best.gflops, best.predicted_seconds / best.seconds))
if its > 0 then
  local _, info = solve.cg(A, {backend = backend, precision = o.precision, strategy = o.strategy,
                              block = o.block, lanes = o.lanes, geometry = o.geometry, scatter = o.scatter,
                              pc = "jacobi", rtol = 0, atol = 0, maxit = its})
  print(("PCG %.3f ms/iteration (%d iterations)"):format(1e3 * info.report.seconds / info.iterations,
        info.iterations))
end
