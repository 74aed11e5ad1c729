-- Benchmark (not a test): CG with the amg preconditioner (hypre BoomerAMG, set up on the host
-- from the assembled Jacobian) beside Jacobi-PCG, P1 on a Gmsh mesh, to rtol 1e-8. The issue's
-- target: fewer than 30 AMG-PCG iterations at 1M dofs. Prints the mesh, the setup (assembly
-- + hierarchy) and solve seconds and iterations of each, and how far apart the solutions are.
-- usage: felab scripts/bench/amg.lua [mesh] [size] [backend] [precision] [cycles]
--   mesh: a .geo or .msh file (default meshes/torso.geo: four regions of conductivity 1, 0.2,
--         0.2, 5, u = 0 on the skin; other files: kappa 1, u = 0 on the whole boundary), or
--         "box" for mesh.box's tets (needs no Gmsh)
--   size: the Gmsh mesh size (default 0.0135: about 1.05M dofs on torso.geo), or cells per side
--   backend (default cpu), precision (default double), cycles: V-cycles an application (1)
local file, size = arg[1] or "meshes/torso.geo", tonumber(arg[2])
local backend, precision, cycles = arg[3] or "cpu", arg[4] or "double", tonumber(arg[5]) or 1
local t0 = perf.clock()
local m, pde, dirichlet
if file == "box" then
  local n = size or 100
  m = mesh.box{cells = {n, n, n}, cell = "tet"}
  pde, dirichlet = physics.poisson{kappa = 1, source = 1}, "all"
else
  m = mesh.load(file, {size = size or 0.0135})
  if file:match("torso%.geo$") then
    pde = physics.poisson{kappa = {body = 1, lung_left = 0.2, lung_right = 0.2, heart = 5},
                          source = 1}
    dirichlet = "skin"
  else
    pde, dirichlet = physics.poisson{kappa = 1, source = 1}, "all"
  end
end
local V = fe.space(m, "P1")
local A = fe.operator(V, pde, {dirichlet = dirichlet})
print(("%s: %d tets, %d dofs (mesh %.1f s); %s, %s"):format(file, m.ncells, V.ndofs,
      perf.clock() - t0, backend, precision))

local opts = {backend = backend, precision = precision, rtol = 1e-8, maxit = 20000}
local function with(t)
  for k, v in pairs(opts) do t[k] = v end
  return t
end

local t1 = perf.clock()
local uj, ij = solve.cg(A, with{pc = "jacobi"})
local tj = perf.clock() - t1
print(("jacobi-PCG  %5d its  %s  solve %7.2f s  (%.2f ms an iteration)"):format(
      ij.iterations, ij.converged and "converged" or ij.reason, tj, 1e3 * tj / ij.iterations))

local t2 = perf.clock()
local P = solve.precond(A, {pc = "amg", cycles = cycles, backend = backend,
                                precision = precision})
local ts = perf.clock() - t2
local t3 = perf.clock()
local ua, ia = solve.cg(A, with{pc = P})
local ta = perf.clock() - t3
print(("amg-PCG     %5d its  %s  solve %7.2f s  (%.2f ms an iteration, %.2f ms of it in the "
      .. "V-cycle)  setup %.2f s"):format(ia.iterations, ia.converged and "converged" or ia.reason,
      ta, 1e3 * ta / ia.iterations, 1e3 * P.apply_seconds / P.applications, ts))
print(("            %s; %.3g Gflop an application"):format(P.describe, P.flops / 1e9))
print(("|u_amg - u_jacobi| / |u_jacobi| = %.2e; amg total %.2f s against jacobi's %.2f s; "
      .. "amg below 30 iterations: %s"):format(ua:copy():axpy(-1, uj):norm() / uj:norm(), ts + ta,
      tj, ia.iterations < 30 and "yes" or "NO"))
