-- felab demo (make run): -div(grad u) = 1 on the unit cube, u = 0 on the boundary,
-- P1 on a tet box mesh, Jacobi-PCG on the best backend here. Prints the CG history and
-- each call's report, and writes out/demo.vtu (open it in ParaView).
local n = tonumber(arg and arg[1]) or 24
local backend = device.best()
device.use(backend)
print(("felab demo: Poisson on %d^3 cubes x 6 tets, backend %s"):format(n, backend))

local m = mesh.box{cells = {n, n, n}, cell = "tet"}
print(m)
local V = fe.space(m, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all", value = 0})

local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-8, maxit = 1000})
print("CG history (iteration, |r|):")
for i, r in ipairs(info.history) do
  if (i - 1) % 10 == 0 or i == #info.history then print(("  %4d  %.6e"):format(i - 1, r)) end
end
print(("converged: %s (%s) after %d iterations"):format(tostring(info.converged), info.reason,
                                                       info.iterations))
print(info.report)

local r, rep = A:residual(u)
print(rep)
print(("|residual(u)| = %.3e"):format(r:norm()))
local _, rep_apply = A:apply(u)
print(rep_apply)

-- the exact solution of this problem peaks at about 0.0562 in the centre of the cube
print(("max u = %.5f"):format(u:max()))
export.vtu("out/demo.vtu", m, {u = u})
print("wrote out/demo.vtu")
