-- Benchmark (not a test): strategy "ebe" (Kiss et al.) on tets against csr and transpose:
-- the Jacobian action of convection-diffusion (best of reps) in ms, GB/s and GF/s by the
-- report's own counts (recompute counts the element-matrix kernel too, so its GB/s is the
-- traffic of both kernels), the share of the calibrated copy bandwidth, launches per action
-- (a color is one), and BiCG with Jacobi per iteration (one action and one transposed action
-- each). Each row has its own operator, freed after, so only one row's matrices are held.
-- usage: felab scripts/bench/ebe.lua [cells per side] [order] [backend] [precision] [its] [reps]
--   e.g. felab scripts/bench/ebe.lua 48 2 cuda double 100 20
local n, order = tonumber(arg[1]) or 32, tonumber(arg[2]) or 1
local backend, prec = arg[3] or "cuda", arg[4] or "double"
local its, reps = tonumber(arg[5]) or 100, tonumber(arg[6]) or 20

local t0 = perf.clock()
local m = mesh.box{cells = {n, n, n}, cell = "tet"}
local V = fe.space(m, "P" .. order)
local pde = physics.convection_diffusion{kappa = 1, velocity = {3, -2, 1}, source = 1}
print(("P%d tets %d^3: %d cells, %d dofs, %s %s (%.1f s to build)"):format(order, n, m.ncells,
      V.ndofs, backend, prec, perf.clock() - t0))
local cal = device.calibrate(backend, prec)
print(("calibrated copy %.0f GB/s, FMA %.0f GF/s (%s)"):format(cal.peak_gbytes, cal.peak_gflops,
      cal.device))

local rows = {
  {"ebe atomic", {strategy = "ebe", scatter = "atomic"}},
  {"ebe color", {strategy = "ebe", scatter = "color"}},
  {"ebe recompute", {strategy = "ebe", recompute = true}},
  {"ebe color recompute", {strategy = "ebe", scatter = "color", recompute = true}},
  {"csr", {strategy = "csr"}},
  {"transpose", {strategy = "transpose"}},
}

print(("%-20s %9s %8s %8s %6s %9s %9s %6s"):format("variant", "ms/apply", "GB/s", "GF/s",
      "%copy", "launches", "ms/BiCG", "its"))
for _, row in ipairs(rows) do
  local name, o = row[1], row[2]
  o.backend, o.precision = backend, prec
  local A = fe.operator(V, pde, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end):to(backend, prec)
  local _, best = A:apply(w, o) -- builds and compiles
  for _ = 1, reps do
    local _, rep = A:apply(w, o)
    if rep.seconds < best.seconds then best = rep end
  end
  local so = {pc = "jacobi", rtol = 0, atol = 0, maxit = its}
  for k, v in pairs(o) do so[k] = v end
  solve.bicg(A, so) -- the transposed operator's build and compile
  local _, info = solve.bicg(A, so)
  print(("%-20s %9.3f %8.1f %8.1f %6.1f %9d %9.3f %6d"):format(name, best.seconds * 1e3,
        best.gbytes, best.gflops, 100 * best.gbytes / cal.peak_gbytes, best.launches,
        1e3 * info.report.seconds / math.max(info.iterations, 1), info.iterations))
  A, w = nil, nil
  collectgarbage()
end
