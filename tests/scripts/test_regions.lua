-- kappa per cell region: the same as a constant when the mesh has one region, on cpu and
-- opencl; a region the mesh lacks, or a mesh region the physics lacks, is a clear error.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local m = mesh.box{cells = {6, 6, 6}, cell = "tet"}
local V = fe.space(m, "P1")
local A1 = fe.operator(V, physics.poisson{kappa = 2.5, source = 1}, {dirichlet = "all"})
local A2 = fe.operator(V, physics.poisson{kappa = {domain = 2.5}, source = 1}, {dirichlet = "all"})
local u = V:interpolate(function(x) return x[1] * x[2] + x[3] end)
for _, backend in ipairs({"cpu", "opencl"}) do
  for _, prec in ipairs({"double", "single"}) do
    local o = {backend = backend, precision = prec}
    local r1, r2 = A1:residual(u, o), A2:residual(u, o)
    local d = r1:copy():axpy(-1, r2):norm() / r1:norm()
    local y1, y2 = A1:apply(u, o), A2:apply(u, o)
    local e = y1:copy():axpy(-1, y2):norm() / y1:norm()
    local tol = prec == "double" and 1e-14 or 1e-6
    check(d <= tol and e <= tol, ("%s %s: per-region kappa differs from constant: %g %g"):format(
           backend, prec, d, e))
    print(("%s %s: per-region = constant kappa (%.1e, %.1e) ok"):format(backend, prec, d, e))
  end
end
local ok, msg = pcall(fe.operator, V, physics.poisson{kappa = {lung = 1}})
check(not ok and msg:find("lung", 1, true) and msg:find("domain", 1, true), msg)
ok, msg = pcall(physics.poisson, {kappa = {domain = "x"}})
check(not ok and msg:find("region names to numbers", 1, true), msg)
print("errors name the regions ok")
T.done()
