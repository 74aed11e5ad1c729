-- Benchmark (not a test): P1 Poisson Jacobian action on tet box meshes of growing size on
-- one backend, against the bandwidth device.calibrate() measures on that backend.
-- usage: felab scripts/bench/skeleton.lua [backend] [precision] [reps] [n1,n2,...]
-- (n: cubes per side; cells = 6 n^3)
local backend = arg[1] or "cpu"
local precision = arg[2] or "double"
local reps = tonumber(arg[3]) or 10
local sizes = {}
for n in (arg[4] or "24,40,56,64"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(n) end

local cal = device.calibrate(backend, precision)
print(("%s, %s: calibrated triad %.2f GB/s, FMA %.1f GF/s, launch %.1f us"):format(
  backend, cal.device, cal.peak_gbytes, cal.peak_gflops, device.info(backend).calibration[precision].launch_us))

local rows = {}
for _, n in ipairs(sizes) do
  local m = mesh.box{cells = {n, n, n}, cell = "tet"}
  local V = fe.space(m, "P1")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] * (1 - x[2]) end):to(backend, precision)
  local opts = {backend = backend, precision = precision}
  local y, best = A:apply(w, opts) -- compiles, moves the operator's data
  for _ = 1, reps do
    local rep
    y, rep = A:apply(w, opts)
    if rep.seconds < best.seconds then best = rep end
  end
  rows[#rows + 1] = {n = n, rep = best}
end

print()
print(("%-10s %9s %9s %10s %9s %9s %11s %10s %8s"):format("cells", "dofs", "MB moved", "best ms",
      "GF/s", "GB/s", "% of triad", "pred. ms", "pred/meas"))
for _, r in ipairs(rows) do
  local rep = r.rep
  print(("%-10d %9d %9.1f %10.3f %9.2f %9.2f %10.0f%% %10.3f %8.2f"):format(rep.ncells, rep.ndofs,
        rep.bytes / 1e6, rep.seconds * 1e3, rep.gflops, rep.gbytes, 100 * rep.gbytes / cal.peak_gbytes,
        rep.predicted_seconds * 1e3, rep.predicted_seconds / rep.seconds))
end
