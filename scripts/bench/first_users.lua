-- Benchmark (not a test): the users' case met for the first time (docs/benchmarks.md section
-- 9): a box distorted by 0.1 with kappa = "1 + 0.5 * x[0]" (a coefficient string), Dirichlet on
-- the whole boundary, no strategy named (the default), fp64. For each case: the build (mesh,
-- space, operator), the first A:apply with its setup's parts, the next apply, the first
-- Jacobi-PCG solve of 50 iterations and the next. The backend's start (a CUDA context) is
-- timed apart, before the first case. Run it twice: the first run fills the kernel cache and
-- the default's autotuned choices, the second shows what a user meets once they are there.
--   felab scripts/bench/first_users.lua [backend] [cases] [precision]
--     (cuda; Q3:48,Q7:28,P2:96; double)
--   a case: space:n, a box of n^3 cells (tets for P spaces)
local be = arg[1] or "cuda"
local list = arg[2] or "Q3:48,Q7:28,P2:96"
local prec = arg[3] or "double"
local t0 = perf.clock()
device.info(be)
print(("%s: the backend's start %.3f s"):format(be, perf.clock() - t0))
local rows = {}
for spec in list:gmatch("[^,]+") do
  local sp, n = spec:match("^(%w+):(%d+)$")
  n = tonumber(n)
  collectgarbage()
  t0 = perf.clock()
  local m = mesh.box{cells = {n, n, n}, cell = sp:sub(1, 1) == "P" and "tet" or "hex", distort = 0.1}
  local V = fe.space(m, sp)
  local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
  local v = V:interpolate(1)
  local build = perf.clock() - t0
  t0 = perf.clock()
  local _, rep = A:apply(v, {backend = be, precision = prec})
  local first = perf.clock() - t0
  local parts = {}
  for k, s in pairs(rep.setup_parts) do
    if s >= 0.001 then parts[#parts + 1] = ("%s %.0f"):format(k, 1e3 * s) end
  end
  table.sort(parts)
  local _, rep2 = A:apply(v, {backend = be, precision = prec})
  local so = {pc = "jacobi", rtol = 1e-30, maxit = 50, backend = be, precision = prec}
  local solves = {}
  for i = 1, 2 do
    t0 = perf.clock()
    solve.cg(A, so)
    solves[i] = perf.clock() - t0
  end
  rows[#rows + 1] = ("| %s %d^3 (%d dofs), %s, %s | %.3f | %.3f | %s | %.4f | %.3f | %.3f |"):format(
    sp, n, V.ndofs, rep.strategy, prec, build, first, table.concat(parts, ", "), 1e3 * rep2.seconds,
    solves[1], solves[2])
  print(rows[#rows])
end
print("\n| case | build (s) | first apply (s) | its setup's parts (ms) | next apply (ms) | "
      .. "first PCG, 50 its (s) | next (s) |")
print("|---|---|---|---|---|---|---|")
for _, r in ipairs(rows) do print(r) end
