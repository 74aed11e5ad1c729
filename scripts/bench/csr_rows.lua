-- Benchmark (not a test): the csr strategy's apply on the cpu for P2, Q1 and P1 boxes (Poisson,
-- kappa 1, Dirichlet on the boundary), best of 20 applies in each of three rounds, beside the
-- model's prediction: how the rows' product shares its threads (section 5 of
-- docs/benchmarks.md). Run two builds one after the other to compare them.
--   felab scripts/bench/csr_rows.lua [n] [backend]   (n: P1 and Q1 cubes a side, P2 n / 2; 64)
local n = tonumber(arg and arg[1] or "64") or 64
local be = arg and arg[2] or "cpu"
local ops = {}
for _, c in ipairs{{"P2", n // 2, "tet"}, {"Q1", n, "hex"}, {"P1", n, "tet"}} do
  local m = mesh.box{cells = {c[2], c[2], c[2]}, cell = c[3]}
  local V = fe.space(m, c[1])
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  ops[#ops + 1] = {c[1], A, V:interpolate(function(x) return x[1] - x[2] * x[3] end):to(be)}
end
for _ = 1, 3 do
  local line = {}
  for _, o in ipairs(ops) do
    local best, pred = math.huge, 0
    for _ = 1, 20 do
      local _, s = o[2]:apply(o[3], {backend = be, strategy = "csr"})
      if s.seconds < best then best, pred = s.seconds, s.predicted_seconds end
    end
    line[#line + 1] = ("%s %.3f ms (predicted %.3f)"):format(o[1], best * 1e3, pred * 1e3)
  end
  print(table.concat(line, "   "))
end
