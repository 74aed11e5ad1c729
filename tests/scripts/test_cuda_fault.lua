-- A kernel that faults on cuda does not take the session with it (issue 44): raw C physics
-- that reads a bad address is an error saying the CUDA context is lost; every later cuda call
-- says so (the driver keeps a faulted context's error: NVIDIA's only way back is a new
-- process); the cpu goes on and solves as before. Needs a CUDA device (scripts/gpu-test.sh).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local cuda = T.device("cuda")
if not (cuda and cuda.available) then
  print("skipped: no cuda device")
  return
end
local m = mesh.box{cells = {6, 6, 6}, cell = "hex"}
local V = fe.space(m, "Q2")
local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
local before = solve.cg(A, {pc = "jacobi", rtol = 1e-10, backend = "cuda"}):to("cpu", "double")
local u = V:interpolate(function(x) return x[1] + 2 * x[2] end)
local ud = u:to("cuda")

-- the fault: a read 4 MB past a null pointer in the residual's kernel
local grad = "for (int d = 0; d < DIM; d++) f1[d] = du[d];"
local bad = physics.new{components = 1, f0 = "int *p = 0; f0[0] = p[1000000];", f1 = grad}
local B = fe.operator(V, bad, {dirichlet = "all"})
local msg = expect_error(function()
  return B:residual(ud, {backend = "cuda"}):to("cpu", "double") -- shows at the first wait
end, "CUDA_ERROR_ILLEGAL_ADDRESS", "the CUDA context is lost")
print("the fault: " .. msg)

-- every later cuda call says why, the vectors on it included
expect_error(function() return ud:dot(ud) end, "was lost after a kernel fault")
expect_error(function() return solve.cg(A, {backend = "cuda"}) end, "was lost after a kernel fault")

-- the session goes on: the cpu solves the same problem as cuda did before the fault
local after, info = solve.cg(A, {pc = "jacobi", rtol = 1e-10, backend = "cpu"})
check(info.converged, "cg on the cpu after the fault did not converge: %s", tostring(info.reason))
local d = T.rel_diff(after:to("cpu", "double"), before)
check(d < 1e-8, "the cpu's solve after the fault differs from cuda's before by %.2e", d)
print(("ok: cuda faulted, its later calls say so, the cpu solved (%d iterations, %.1e from cuda's)")
      :format(info.iterations, d))
