-- A CPU OpenCL device (PoCL) runs a work group's items on one thread's stack: Q6 transpose's
-- groups of 4096 items of 1 KB of private data each overflowed it (SIGSEGV inside the compiled
-- kernel: the session lost). The backend now caps such a device's groups by their private
-- bytes (backends/opencl/opencl-program.c); the Q6 hex apply runs and equals the cpu's.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local ocl = T.device("opencl")
if not (ocl and ocl.available) then
  T.skip("no opencl device")
  return
end
local m = mesh.box{cells = {1, 1, 1}, cell = "hex", distort = 0.1}
local V = fe.space(m, "Q6")
local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "xmin"})
local w = V:interpolate(function(x) return x[1] * x[2] + 0.3 + x[3] end)
local ref = A:apply(w, {backend = "cpu", strategy = "transpose"})
local y = A:apply(w, {backend = "opencl", strategy = "transpose"})
T.check(T.max_rel_diff(ref:to("cpu", "double"), y:to("cpu", "double")) <= 1e-11,
        "Q6 transpose on %s differs from the cpu's", tostring(ocl.device))
print("ok: Q6 transpose on " .. tostring(ocl.device))
T.done()
