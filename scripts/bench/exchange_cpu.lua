-- Benchmark (not a test), issue 48: the cpu's exchange through the host, predicted against
-- measured over a matrix of cases, the link (its messages and its whole host exchange, warm
-- and cold: engine/parallel/link.c) measured first in the same run, so that both see the
-- machine alike. Each case: k applies of Poisson with kappa(x) on a distorted box (or the
-- torso's Gmsh mesh, "torso"), each apply's exchange (rep.exchange_seconds) against
-- rep.exchange_predicted; rank 0 prints a line a case (the least, the median, the action's
-- bytes and what the model took of the caches), the ratios last.
--   mpirun -np 2 felab scripts/bench/exchange_cpu.lua [k] [case;case;...]
-- a case: "cells space cell [strategy]" (as exchange_parts.lua's first words), or "torso space
-- size [strategy]" (meshes/torso.geo at Gmsh's mesh size, its four regions, METIS's parts)
local here = arg[0] and arg[0]:match("^(.*/)") or "scripts/bench/"
local case_of = dofile(here .. "ranks_case.lua")
local k = tonumber(arg[1]) or 200
local list = arg[2] or ("40 P1 tet csr;64 P1 tet csr;96 P1 tet csr;12 Q3 hex csr;20 Q3 hex csr;" ..
                        "20 Q3 hex sumfact;40 Q3 hex sumfact;24 P2 tet csr;40 Q1 hex csr;torso P2 0.03 csr")
local link = device.calibrate("link")
local rows = {}
for c in list:gmatch("[^;]+") do
  local w = {}
  for x in c:gmatch("%S+") do w[#w + 1] = x end
  local V, A
  if w[1] == "torso" then
    local m = mesh.load(here .. "../../meshes/torso.geo", {size = tonumber(w[3])})
    V = fe.space(m, w[2])
    A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
  else
    V, A = case_of(w[1], w[2], w[3])
  end
  local o = {backend = "cpu", strategy = w[4] ~= "-" and w[4] or nil}
  local v = V:interpolate("1 + x[0]")
  for _ = 1, 5 do A:apply(v, o) end
  local t, rep = {}, nil
  for i = 1, k do
    _, rep = A:apply(v, o)
    t[i] = rep.exchange_seconds
  end
  table.sort(t)
  -- the tenth percentile beside the least: the link's points are each a least of 24 exchanges,
  -- the least of k applies (k = 200) the fastest of many more
  local least, p10, med, pred = t[1], t[math.max(1, #t // 10)], t[(#t + 1) // 2], rep.exchange_predicted
  rows[#rows + 1] = ("%-24s %-8s %8d dofs %7.1f MB %3.0f%% cold: least %7.1f p10 %7.1f median %7.1f "
                     .. "predicted %7.1f us; predicted/least %.2f, /p10 %.2f, /median %.2f"):format(c,
    rep.strategy, V.ndofs, rep.bytes / 1e6, 100 * rep.exchange_cold, 1e6 * least, 1e6 * p10,
    1e6 * med, 1e6 * pred, pred / least, pred / p10, pred / med)
  print(rows[#rows])
end
print(("-- %d ranks, cpu, %d applies a case"):format(mpi.size, k))
if link and link.host then -- the link's host exchange as measured first
  local h = {}
  for _, p in ipairs(link.host) do h[#h + 1] = ("%d: %.1f/%.1f"):format(p[1], p[2], p[3]) end
  print(("-- link: host exchange entries: warm/cold us %s; a line more %.1f/%.1f ns, a page "
         .. "more %.1f/%.1f ns"):format(table.concat(h, ", "), link.lines[1], link.lines[2],
                                        link.pages[1], link.pages[2]))
end
for _, r in ipairs(rows) do print(r) end
