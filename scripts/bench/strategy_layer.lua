-- Benchmark (not a test): the apply of P1 and P2 tets and Q1 hexes with strategies transpose
-- and patch named explicitly, best of 20, so that two builds (before and after a change of
-- the strategy layer) can be compared in one device call.
-- usage: felab scripts/bench/strategy_layer.lua [backend] [label]
local backend, label = arg[1] or "cuda", arg[2] or "this build"
local cases = {{"tet", "P1", 128}, {"hex", "Q1", 128}, {"tet", "P2", 64}}
for _, c in ipairs(cases) do
  local m = mesh.box{cells = {c[3], c[3], c[3]}, cell = c[1]}
  local V = fe.space(m, c[2])
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend)
  for _, s in ipairs({"patch", "transpose"}) do
    local best
    for _ = 0, 20 do
      local _, rep = A:apply(w, {backend = backend, strategy = s})
      if not best or rep.seconds < best then best = rep.seconds end
    end
    print(("%-10s %-3s %-9s %8d dofs apply %.3f ms"):format(label, c[2], s, V.ndofs, best * 1e3))
  end
end
