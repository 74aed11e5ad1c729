-- Benchmark (not a test): the first apply on a curved (second-order) Gmsh mesh, the users'
-- coefficient string, no strategy named (docs/benchmarks.md section 9): the build, the first
-- A:apply with its setup's parts, the next apply. The mesh: meshes/shell_hex.geo at order 2
-- through the Gmsh SDK, or a second-order .msh (a machine without the SDK, as the GPU's: write
-- one where the SDK is with `export.msh(path, mesh.load("meshes/shell_hex.geo", {order = 2}))`),
-- refined. Run it twice: the first run fills the kernel cache.
--   felab scripts/bench/first_curved.lua [backend] [refinements] [spaces] [mesh.msh]
--     (cpu; 2; Q2,Q3; meshes/shell_hex.geo)
local be = arg[1] or "cpu"
local refine = tonumber(arg[2] or "2") or 2
local spaces = arg[3] or "Q2,Q3"
local path = arg[4] or "meshes/shell_hex.geo"
local m = mesh.load(path, {order = 2})
for _ = 1, refine do m = m:refine() end
print(("%s, order 2, refined %d times: %d cells"):format(path, refine, m.ncells))
for sp in spaces:gmatch("[^,]+") do
  local t0 = perf.clock()
  local V = fe.space(m, sp)
  local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
  local v = V:interpolate(1)
  local build = perf.clock() - t0
  t0 = perf.clock()
  local _, rep = A:apply(v, {backend = be})
  local first = perf.clock() - t0
  local _, r2 = A:apply(v, {backend = be})
  local parts = {}
  for k, s in pairs(rep.setup_parts) do
    if s >= 0.001 then parts[#parts + 1] = ("%s %.0f"):format(k, 1e3 * s) end
  end
  table.sort(parts)
  print(("| %s (%d dofs), %s | %.3f | %.3f | %s | %.2f |"):format(sp, V.ndofs, rep.strategy, build,
        first, table.concat(parts, ", "), 1e3 * r2.seconds))
end
