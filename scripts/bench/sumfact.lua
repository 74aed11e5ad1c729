-- Benchmark (not a test): strategy "sumfact" on hexes, Q1..Q8 at about 3M dofs (and Q3, Q7 at
-- the largest sizes asked), fp64 and fp32: the Poisson Jacobian action (best of 10), its
-- GDOF/s, % of the calibrated copy bandwidth and FMA rate by its own counts, the model's
-- predicted/measured, Jacobi-PCG per iteration; transpose beside it where it is affordable;
-- the remacle paper's rows (uniform 32^3 hexes, stored factors "r" and recomputed "r'");
-- and the CuPy peer's ms/iteration from its JSON log when given (same meshes, dofs).
-- usage: felab scripts/bench/sumfact.lua [backend] [peer.log] [sections] [scale]
--   sections: a comma list of "orders", "large", "remacle", "transpose" (default: all)
--   scale multiplies the cells per side (1: ~3M dofs per order)
local backend = arg[1] or "cuda"
local peer_log = arg[2]
local want = {}
for s in (arg[3] or "orders,large,remacle,transpose"):gmatch("[^,]+") do want[s] = true end
local scale = tonumber(arg[4]) or 1
local cg_iterations = 100

local peer = {} -- ["Q3 hex float64"] = ms per iteration
if peer_log and peer_log ~= "" then
  local f = io.open(peer_log)
  if f then
    for line in f:lines() do
      local case, dtype = line:match('"case": "([^"]+)"'), line:match('"dtype": "([^"]+)"')
      local ms = tonumber(line:match('"ms_per_iter": ([%d.e+-]+)') or "")
      if case and dtype and ms then peer[case .. " " .. dtype] = ms end
    end
    f:close()
  end
end

local cal = {}
for _, prec in ipairs({"double", "single"}) do
  cal[prec] = device.calibrate(backend, prec)
  print(("%s %s: calibrated copy %.0f GB/s, FMA %.0f GF/s (%s)"):format(backend, prec,
        cal[prec].peak_gbytes, cal[prec].peak_gflops, cal[prec].device))
end

local function best_apply(A, w, opts, reps)
  local y, best = A:apply(w, opts) -- builds and compiles
  local first = best
  for _ = 1, reps do
    local rep
    y, rep = A:apply(w, opts)
    if rep.seconds < best.seconds then best = rep end
  end
  return best, first
end

local rows = {}
local function run(section, cells, p, precs, strategies, geometries, cg, rule)
  local n = math.max(1, math.floor(cells * scale + 0.5))
  local t0 = perf.clock()
  local m = mesh.box{cells = {n, n, n}, cell = "hex"}
  local V = fe.space(m, "Q" .. p)
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1},
                        {dirichlet = "all", quadrature = rule and {rule = rule} or nil})
  print(("\n%s Q%d%s: %d^3 cells, %d dofs (mesh, space, operator %.1f s)"):format(section, p,
        rule and (" " .. rule) or "", n, V.ndofs, perf.clock() - t0))
  for _, prec in ipairs(precs) do
    local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, prec)
    for _, strategy in ipairs(strategies) do
      for _, geometry in ipairs(strategy == "sumfact" and geometries or {"-"}) do
        local opts = {backend = backend, precision = prec, strategy = strategy,
                      geometry = geometry ~= "-" and geometry or nil}
        local ok, rep, first = pcall(best_apply, A, w, opts, 10)
        if not ok then
          print(("  %-6s %-9s %-8s %s"):format(prec, strategy, geometry, rep))
        else
          local cg_ms
          if cg then
            local _, info = solve.cg(A, {backend = backend, precision = prec, strategy = strategy,
                                         geometry = opts.geometry, pc = "jacobi", rtol = 0, atol = 0,
                                         maxit = cg_iterations})
            cg_ms = 1e3 * info.report.seconds / info.iterations
          end
          local row = {section = section, p = p, n = n, prec = prec, strategy = strategy,
                       geometry = geometry, rep = rep, cg_ms = cg_ms, rule = rule or "gauss",
                       setup = first.setup_seconds, compile = first.compile_seconds,
                       peer = peer[("Q%d hex %s"):format(p, prec == "double" and "float64" or "float32")]}
          rows[#rows + 1] = row
          print(("  %-6s %-9s %-8s apply %8.3f ms %6.2f GDOF/s %7.0f GF/s %6.0f GB/s pred/meas %.2f" ..
                 "  PCG %s ms/it  (setup %.2f s, compile %.2f s)"):format(prec, strategy, geometry,
                rep.seconds * 1e3, rep.ndofs / rep.seconds / 1e9, rep.gflops, rep.gbytes,
                rep.predicted_seconds / rep.seconds, cg_ms and ("%.3f"):format(cg_ms) or "-",
                first.setup_seconds, first.compile_seconds))
        end
      end
    end
    w = nil
    collectgarbage()
  end
  A, V, m = nil, nil, nil
  collectgarbage()
end

-- cells per side for about 3M dofs at order p: (p n + 1)^3 ~ 3.05M
local function cells_3m(p) return math.floor(145 / p + 0.5) end
if want.orders then
  for p = 1, 8 do
    run("orders", cells_3m(p), p, {"double", "single"}, {"sumfact"}, {"stored", "vertices"}, true)
  end
  run("orders", 48, 3, {"double"}, {"sumfact"}, {"vertices"}, true, "gll") -- BP5
  run("orders", 14, 7, {"double"}, {"sumfact"}, {"vertices"}, true) -- the peer's Q7 case
end
if want.large then
  run("large", 96, 3, {"double"}, {"sumfact"}, {"vertices"}, true)  -- 24.9M dofs
  run("large", 28, 7, {"double"}, {"sumfact"}, {"vertices"}, true)  -- 7.6M dofs
end
if want.transpose then
  run("transpose", 48, 3, {"double"}, {"transpose"}, {"-"}, true)
end
if want.remacle then -- the paper's Tables 2 and 3: a uniform 32^3 hex mesh, r and r'
  for _, p in ipairs({1, 2, 3, 4, 5, 6, 7, 8}) do
    run("remacle", 32, p, {"double", "single"}, {"sumfact"}, {"stored", "vertices"}, false, "gll")
  end
end

print(("\n== %s, %s; calibrated copy %.0f GB/s, FMA %.0f GF/s (double)"):format(backend,
      cal.double.device, cal.double.peak_gbytes, cal.double.peak_gflops))
print("apply: best of 10; %bw and %fma by the strategy's own counts; PCG: Jacobi, " ..
      cg_iterations .. " iterations; peer: CuPy/cuSPARSE CSR PCG on the same mesh")
print(("%-9s %-3s %-5s %-6s %-9s %-8s %9s %8s %7s %7s %7s %5s %5s %9s %9s %8s"):format("section",
      "p", "rule", "prec", "strategy", "geometry", "dofs", "apply ms", "GDOF/s", "GF/s", "GB/s",
      "%bw", "%fma", "pred/meas", "PCG ms/it", "peer ms"))
for _, r in ipairs(rows) do
  local rep = r.rep
  print(("%-9s Q%-2d %-5s %-6s %-9s %-8s %9d %8.3f %7.2f %7.0f %7.0f %4.0f%% %4.0f%% %9.2f %9s %8s"):format(
    r.section, r.p, r.rule, r.prec, r.strategy, r.geometry, rep.ndofs, rep.seconds * 1e3,
    rep.ndofs / rep.seconds / 1e9, rep.gflops, rep.gbytes, 100 * rep.gbytes / cal[r.prec].peak_gbytes,
    100 * rep.gflops / cal[r.prec].peak_gflops, rep.predicted_seconds / rep.seconds,
    r.cg_ms and ("%.3f"):format(r.cg_ms) or "-", r.peer and ("%.3f"):format(r.peer) or "-"))
end
