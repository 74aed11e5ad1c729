-- Benchmark (not a test): Jacobi-PCG ms per iteration with CG's (p, J p) from the apply's own
-- quadrature (solve.cg's default where the apply can) against a pass of its own
-- (fuse_pq = false), alternated in one process, best of `rounds` solves of 50 iterations
-- each; the issue-43 cases (distorted 0.1 with kappa(x), and the uniform box with kappa 1).
--   felab scripts/bench/cg_fused.lua [backend] [scale] [rounds]   (cuda, 1, 3)
local be = arg and arg[1] or "cuda"
local scale = tonumber(arg and arg[2] or "1") or 1
local rounds = tonumber(arg and arg[3] or "3") or 3
local rows = {}
local function case(sp, n, distort, kappa, quad, label)
  n = math.max(2, math.floor(n * scale + 0.5))
  local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = distort}
  local V = fe.space(m, sp)
  local A = fe.operator(V, physics.poisson{kappa = kappa, source = 1},
                        {dirichlet = "all", quadrature = quad})
  local best = {[true] = 1e9, [false] = 1e9}
  local from, strategy
  for _ = 1, rounds do
    for _, f in ipairs{true, false} do
      local _, info = solve.cg(A, {pc = "jacobi", rtol = 1e-30, maxit = 50, backend = be,
                                   fuse_pq = f})
      best[f] = math.min(best[f], info.report.seconds / info.iterations)
      if f then from, strategy = info.pq_from_apply, info.report.strategy end
    end
  end
  local line = ("%-3s %8d %-16s %-5s fused %6.3f  pass %6.3f ms/it  ratio %.3f  from apply %s  %s"):format(
    sp, V.ndofs, label, quad and "gll" or "gauss", best[true] * 1e3, best[false] * 1e3,
    best[true] / best[false], tostring(from), strategy)
  print(line)
  io.stdout:flush()
  rows[#rows + 1] = line
  collectgarbage()
end
local kx = "1 + 0.5 * x[0]"
for _, c in ipairs{{"Q3", 48}, {"Q7", 28}, {"Q5", 24}, {"Q2", 72}} do
  case(c[1], c[2], 0.1, kx, nil, "dist kx")
  case(c[1], c[2], 0, 1, nil, "uniform k1")
end
case("Q7", 28, 0.1, kx, {rule = "gll"}, "dist kx")
case("Q3", 48, 0.1, kx, {rule = "gll"}, "dist kx")
print("== table")
for _, l in ipairs(rows) do print(l) end
