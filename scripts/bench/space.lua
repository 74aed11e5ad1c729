-- Benchmark (not a test): building a space on a large mesh: the dof map with its shared
-- edge/face nodes, the node coordinates, and the tabulation of the basis at the quadrature
-- points an operator uses (fe.operator builds its rules and tables when made).
-- usage: felab scripts/bench/space.lua [space] [cell] [n] [reps]   (tets: 6 n^3 cells)
local space, cell = arg[1] or "P2", arg[2] or "tet"
local n, reps = tonumber(arg[3]) or 56, tonumber(arg[4]) or 3
local t0 = perf.clock()
local m = mesh.box{cells = {n, n, n}, cell = cell}
print(("mesh.box: %d %s cells, %d vertices, %.3f s"):format(m.ncells, cell, m.nvertices, perf.clock() - t0))
local best = math.huge
for _ = 1, reps do
  collectgarbage()
  local t = perf.clock()
  local V = fe.space(m, space)
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local s = perf.clock() - t
  if s < best then best = s end
  print(("%s: %d nodes, %d dofs; space + operator (dof map, boundary nodes, tabulation) %.3f s")
        :format(space, V.nnodes, V.ndofs, s))
  A, V = nil, nil
end
print(("best of %d: %.3f s (target: under 2 s for 1M P2 tets)"):format(reps, best))
