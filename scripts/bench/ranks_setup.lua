-- Benchmark (not a test), issue 48: what a split space's setup costs a rank: the box, the
-- space (under mpirun: the whole one, the partition, the rank's part and its interface,
-- engine/parallel/dist.c), the operator and its first apply, and the process's peak memory.
-- usage: [mpirun -np N] felab scripts/bench/ranks_setup.lua [cells per side] [space] [cell]
--        [backend] ("-": the mesh and the space alone)
--   e.g. mpirun -np 2 felab scripts/bench/ranks_setup.lua 96 P1 tet
local function peak_mb()
  local f = io.open("/proc/self/status")
  local s = f and f:read("a") or ""
  if f then f:close() end
  return (tonumber(s:match("VmHWM:%s*(%d+)")) or 0) / 1024
end
local n = tonumber(arg[1] or 40)
local t0 = perf.clock()
local m = mesh.box{cells = {n, n, n}, cell = arg[3] or "hex", distort = 0.1}
local t1 = perf.clock()
local V = fe.space(m, arg[2] or "Q3")
local t2 = perf.clock()
if arg[4] == "-" then -- the mesh and the space alone
  print(("rank %d of %d: %s on %d³ %s cells, %d dofs (this rank's %d): mesh %.2f s, space %.2f s; "
         .. "peak %.0f MB"):format(mpi.rank, mpi.size, V.name, n, arg[3] or "hex", V.ndofs,
                                   V.local_ndofs or V.ndofs, t1 - t0, t2 - t1, peak_mb()))
  return
end
local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
local _, rep = A:apply(V:interpolate("1 + x[0]", {backend = arg[4]}), {backend = arg[4]})
local t3 = perf.clock()
print(("rank %d of %d: %s on %d³ %s cells, %d dofs (this rank's %d), %s: mesh %.2f s, space %.2f s, "
       .. "operator and first apply %.2f s (the apply %.3f s); peak %.0f MB")
      :format(mpi.rank, mpi.size, V.name, n, arg[3] or "hex", V.ndofs, V.local_ndofs or V.ndofs, rep.backend,
              t1 - t0, t2 - t1, t3 - t2, rep.seconds, peak_mb()))
