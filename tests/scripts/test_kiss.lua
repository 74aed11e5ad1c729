-- The setting of Kiss et al. (shared/papers): heat conduction with a conductivity per named
-- region on a Gmsh tet mesh, solved by BiCG on stored element matrices (strategy ebe) and by
-- CG on the assembled matrix (strategy csr): the two solutions agree to 1e-8, on cpu and
-- opencl. Skipped in builds without the Gmsh SDK.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local loaded, m = pcall(mesh.load, "meshes/torso.geo", {size = 0.16})
if not loaded and tostring(m):find("needs the Gmsh SDK", 1, true) then
  T.skip(m)
  return
end
check(loaded, m)
local kappa = {body = 0.2, lung_left = 0.05, lung_right = 0.05, heart = 0.4}
local A = fe.operator(fe.space(m, "P1"), physics.poisson{kappa = kappa, source = 1},
                      {dirichlet = "skin", value = 0})
for _, backend in ipairs({"cpu", "opencl"}) do
  local o = {backend = backend, pc = "jacobi", rtol = 1e-12, maxit = 2000}
  o.strategy = "ebe"
  local xe, ie = solve.bicg(A, o)
  o.strategy = "csr"
  local xc, ic = solve.cg(A, o)
  check(ie.converged and ic.converged, ie.reason .. " / " .. ic.reason)
  check(ie.report.strategy == "ebe" and ic.report.strategy == "csr",
         ie.report.strategy .. " " .. ic.report.strategy)
  local d = xe:copy():axpy(-1, xc):norm() / xc:norm()
  check(d < 1e-8, ("%s: ebe BiCG and csr CG differ by %g"):format(backend, d))
  print(("%s: torso (%d tets, 4 regions): ebe BiCG (%d its) = csr CG (%d its) to %.1e ok"):format(
        backend, m.ncells, ie.iterations, ic.iterations, d))
end
T.done()
