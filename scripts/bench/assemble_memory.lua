-- Benchmark (not a test): the cpu's assembly alone (issue 46's cpu targets), a case per
-- process: A:assemble{backend = "cpu"} on a box, its wall and process cpu seconds (os.clock:
-- every thread's, steadier than the wall on a shared machine), its setup parts, and the peak
-- resident memory beyond what was there before it, over the matrix's bytes (perf.memory: the
-- kernel's VmHWM reset before the call; the matrix: 12 bytes an entry, 4 a row).
-- usage: felab scripts/bench/assemble_memory.lua [cell:space:n]   (default tet:P1:128)
-- Run each case in a process of its own: memory freed by an earlier case stays resident in the
-- allocator's arenas and hides the next one's growth.
local spec = arg[1] or "tet:P1:128"
local cell, space, n = spec:match("^(%a+):(%w+):(%d+)$")
n = tonumber(n)
local m = mesh.box{cells = {n, n, n}, cell = cell}
local V = fe.space(m, space)
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
collectgarbage()
local m0 = perf.memory(true)
local t0, k0 = perf.clock(), os.clock()
local M, r = A:assemble{backend = "cpu"}
local t, k = perf.clock() - t0, os.clock() - k0
local m1 = perf.memory()
local bytes = M.nnz * 12 + (V.ndofs + 1) * 4
local parts = {}
for name, s in pairs(r.setup_parts or {}) do
  if s >= 0.0005 then parts[#parts + 1] = ("%s %.3f"):format(name, s) end
end
table.sort(parts)
print(("%s %s %d^3: assemble %.3f s (cpu %.3f s) [%s]; matrix %.0f MB, peak growth %.0f MB, " ..
       "ratio %.2f"):format(space, cell, n, t, k, table.concat(parts, ", "), bytes / 1e6,
                            (m1.host_peak - m0.host) / 1e6, (m1.host_peak - m0.host) / bytes))
