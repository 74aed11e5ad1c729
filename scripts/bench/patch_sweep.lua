-- Benchmark (not a test): strategy "patch" on a GPU backend, swept over its parameters (block =
-- cells per patch, walk = cells per walk, -1: one item per cell) against "transpose", for the
-- Poisson Jacobian action on P1 tets and Q1 hexes; best of 10 applies, then Jacobi-PCG with the
-- default of each strategy.
-- usage: felab scripts/bench/patch_sweep.lua [backend] [cells per side] [cases] [precisions]
local backend = arg[1] or "cuda"
local n = tonumber(arg[2]) or 192
local want = {}
for c in (arg[3] or "P1-tet,Q1-hex"):gmatch("[^,]+") do want[c] = true end
local precs = {}
for p in (arg[4] or "double,single"):gmatch("[^,]+") do precs[#precs + 1] = p end

local cal = {}
for _, prec in ipairs(precs) do cal[prec] = device.calibrate(backend, prec) end

local variants = {
  {strategy = "transpose"},
  {strategy = "patch", walk = -1},
  {strategy = "patch"},
  {strategy = "patch", block = 512},
  {strategy = "patch", block = 2048},
  {strategy = "patch", walk = 4},
  {strategy = "patch", walk = 16},
  {strategy = "patch", walk = 12, block = 768},
}
local rows = {}
for _, c in ipairs({{name = "P1-tet", cell = "tet", space = "P1"}, {name = "Q1-hex", cell = "hex", space = "Q1"}}) do
  if want[c.name] then
    local t0 = perf.clock()
    local m = mesh.box{cells = {n, n, n}, cell = c.cell}
    local V = fe.space(m, c.space)
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    print(("%s: %d cells, %d dofs (%.1f s)"):format(c.name, m.ncells, V.ndofs, perf.clock() - t0))
    for _, prec in ipairs(precs) do
      local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, prec)
      for _, v in ipairs(variants) do
        local o = {backend = backend, precision = prec, strategy = v.strategy, block = v.block, walk = v.walk}
        local t1 = perf.clock()
        local ok, y, best = pcall(A.apply, A, w, o)
        local setup = perf.clock() - t1
        if ok then
          for _ = 1, 10 do
            local _, rep = A:apply(w, o)
            if rep.seconds < best.seconds then best = rep end
          end
          local label = v.strategy .. (v.block and (" b" .. v.block) or "") .. (v.walk and (" w" .. v.walk) or "")
          rows[#rows + 1] = {c.name, prec, label, best.seconds * 1e3, best.gbytes,
                             100 * best.gbytes / cal[prec].peak_gbytes, best.predicted_seconds / best.seconds, setup}
          print(("  %-6s %-18s %8.3f ms %7.0f GB/s %4.0f%%  pred/meas %.2f  (setup %.1f s)"):format(prec, label,
                best.seconds * 1e3, best.gbytes, rows[#rows][6], rows[#rows][7], setup))
        else
          print(("  %-6s %s: %s"):format(prec, v.strategy, tostring(y)))
        end
        collectgarbage()
      end
      for _, s in ipairs({"transpose", "patch"}) do
        local ok, _, info = pcall(solve.cg, A, {backend = backend, precision = prec, strategy = s, pc = "jacobi",
                                  rtol = 0, atol = 0, maxit = 200})
        if ok then
          print(("  %-6s PCG %-9s %.3f ms/iteration"):format(prec, s, 1e3 * info.report.seconds / info.iterations))
          rows[#rows + 1] = {c.name, prec, "PCG " .. s, 1e3 * info.report.seconds / info.iterations, 0, 0, 0, 0}
        else
          print(("  %-6s PCG %s: %s"):format(prec, s, tostring(_)))
        end
      end
      w = nil
      collectgarbage()
    end
  end
end
print(("\n== %s (%s), calibrated %.0f GB/s double"):format(backend, cal[precs[1]].device, cal[precs[1]].peak_gbytes))
print(("%-7s %-6s %-20s %9s %7s %5s %9s"):format("case", "prec", "variant", "ms", "GB/s", "%bw", "pred/meas"))
for _, r in ipairs(rows) do
  print(("%-7s %-6s %-20s %9.3f %7.0f %4.0f%% %9.2f"):format(r[1], r[2], r[3], r[4], r[5], r[6], r[7]))
end
