-- felab on the GPU machine, beyond the consistency test (tests/scripts/test_cuda.lua):
-- the device, the JIT cost of one kernel (run this twice with one FELAB_CACHE: cold, then
-- from the disk cache; the second operator in a run hits the memory cache), the calibrated
-- ceilings, the apply on a P1 tet problem of 1.6M cells on every backend present and its
-- Jacobi-PCG on the GPU backends, and running out of device memory (a clear error, and the session goes on).
-- Usage: felab scripts/gpu-checks.lua [oom]   (oom: also fill the device until it refuses)
local args = {...}
local want_oom = args[1] == "oom"

local function available(name)
  for _, d in ipairs(device.list()) do
    if d.name == name then
      if not d.available then print(name .. ": not available: " .. d.reason) end
      return d.available
    end
  end
end
assert(available("cuda"), "cuda is not available")
local backends = {"cuda"}
if available("opencl") then backends[#backends + 1] = "opencl" end
backends[#backends + 1] = "cpu"
for _, b in ipairs(backends) do
  local i = device.info(b)
  print(("%-6s %s | %s | %d units, %.1f GiB, %d KiB shared, %d threads"):format(b, i.name,
        i.vendor, i.compute_units, i.global_mem / 2^30, i.local_mem // 1024, i.max_group))
end

-- JIT: the first residual of an operator compiles; a second operator with the same
-- source finds it in the session's cache
local pde = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}
local m = mesh.box{cells = {8, 8, 8}, cell = "tet"}
local V = fe.space(m, "P1")
local u0 = V:interpolate(function(x) return x[1] end)
local t0 = os.clock()
u0:to("cuda")
print(("jit: the first cuda vector (built-in vector module): %.1f ms of CPU"):format(
      1e3 * (os.clock() - t0)))
for k = 1, 2 do
  local A = fe.operator(V, pde, {dirichlet = "all"})
  for _, prec in ipairs({"double", "single"}) do
    local _, rep = A:residual(u0, {backend = "cuda", precision = prec})
    print(("jit: P1 residual %-6s operator %d: %.1f ms to get the kernel"):format(prec, k,
          1e3 * rep.compile_seconds))
  end
end

-- ceilings
for _, prec in ipairs({"double", "single"}) do
  local rep = device.calibrate("cuda", prec)
  print(("calibrate cuda %-6s: %.0f GB/s triad, %.0f GF/s FMA"):format(prec, rep.peak_gbytes,
        rep.peak_gflops))
end

-- a larger problem on every backend
local mb = mesh.box{cells = {64, 64, 64}, cell = "tet"}
local Vb = fe.space(mb, "P1")
local Ab = fe.operator(Vb, pde, {dirichlet = "all"})
local ub = Vb:interpolate(function(x) return math.sin(x[1]) * x[2] end)
print(("P1 tets: %d cells, %d dofs"):format(mb.ncells, Vb.ndofs))
for _, b in ipairs(backends) do
  for _, prec in ipairs({"double", "single"}) do
    local best
    for _ = 1, 5 do
      local _, rep = Ab:apply(ub, {backend = b, precision = prec, at = ub})
      if not best or rep.seconds < best.seconds then best = rep end
    end
    print(("apply %-6s %-6s %8.3f ms %7.1f GB/s %7.1f GF/s predicted/measured %.2f"):format(b,
          prec, 1e3 * best.seconds, best.gbytes, best.gflops, best.ratio or 0))
    if b == "cuda" or (b == "opencl" and prec == "double") then
      local _, info = solve.cg(Ab, {pc = "jacobi", rtol = 1e-8, backend = b, precision = prec,
                                    maxit = prec == "double" and 1000 or 300})
      print(("pcg   %-6s %-6s %4d iterations, %.3f ms per iteration (%s)"):format(b, prec,
            info.iterations, 1e3 * info.report.seconds / math.max(info.iterations, 1),
            tostring(info.reason)))
    end
  end
end

if not want_oom then return end
-- out of device memory: copies of a 17 MB vector until the device refuses one
local Vo = fe.space(mesh.box{cells = {128, 128, 128}, cell = "hex"}, "Q1")
local x = Vo:interpolate(1):to("cuda")
local keep, ok, err = {}, true, nil
while ok do
  ok, err = pcall(function() keep[#keep + 1] = x:copy() end)
end
print(("oom: after %d copies of %.1f MiB: %s"):format(#keep, Vo.ndofs * 8 / 2^20, err))
assert(tostring(err):find("out of device memory") and tostring(err):find("free"),
       "the out-of-memory error does not say what was asked and what is free")
keep = nil
collectgarbage()
collectgarbage()
local r, rep = Ab:residual(ub, {backend = "cuda"})
print(("oom: the session goes on: residual norm %.6e in %.3f ms"):format(r:norm(),
      1e3 * rep.seconds))
