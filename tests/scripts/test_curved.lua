-- Curved second-order geometry (mesh.load with order = 2): -lap u = 1 in the unit ball with
-- u = 0 on the sphere has u = (1 - r^2)/6, a quadratic. On straight tets the P2 solution
-- carries the O(h^2) error of the polyhedral boundary; on curved tets only the map's, and it
-- converges at the isoparametric rate 3 in L2.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
if not mesh.load then
  T.skip("no mesh.load in this build")
  return
end
local function exact(x) return (1 - x[1]^2 - x[2]^2 - x[3]^2) / 6 end
local err = {}
for _, order in ipairs({1, 2}) do
  err[order] = {}
  for i, size in ipairs({0.5, 0.25}) do
    local ok, m = pcall(mesh.load, "meshes/sphere.geo", {size = size, order = order})
    if not ok and tostring(m):find("Gmsh SDK") then T.skip(m) return end
    check(ok, m)
    local V = fe.space(m, "P2")
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-12})
    check(info.converged, info.reason)
    err[order][i] = u:error(exact, "L2")
    print(("order %d size %.2f: %d cells, %d dofs, L2 error %.3e"):format(order, size, m.ncells,
          V.ndofs, err[order][i]))
  end
end
local rate_curved = math.log(err[2][1] / err[2][2], 2)
local rate_straight = math.log(err[1][1] / err[1][2], 2)
print(("rates: straight %.2f, curved %.2f"):format(rate_straight, rate_curved))
check(err[2][2] < err[1][2] / 20, "the curved mesh should be far more accurate")
check(rate_curved > 2.5, "P2 on curved tets converges at rate 3")
check(rate_straight < 2.3, "the straight boundary limits P2 to rate 2")
T.done()
