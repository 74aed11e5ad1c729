-- Benchmark (not a test): the Poisson Jacobian action and Jacobi-PCG on a GPU backend, for
-- P1/P2/P3 tets and Q1/Q2/Q3 hexes at sizes that fill the GPU, fp64 and fp32, each strategy
-- that applies; against the backend's calibrated bandwidth and, when the CuPy peer's output
-- is given, against the assembled-matrix solve (../shared/peers/cupy_cg.py, same problems).
-- usage: felab scripts/bench/gpu.lua [backend] [scale] [peer.log] [cases]
--   scale multiplies the cells per side (1: ~7.2M dofs per case); cases is a comma list of
--   names below (default: all); peer.log holds the peer's JSON lines.
local backend = arg[1] or "cuda"
local scale = tonumber(arg[2]) or 1
local peer_log = arg[3]
local want = {}
for c in (arg[4] or ""):gmatch("[^,]+") do want[c] = true end
local cg_iterations = 200

-- name, cell, space, cells per side (before scale), strategies; the peer's case name
local cases = {
  {name = "P1-tet", cell = "tet", space = "P1", n = 192, strategies = {"patch", "patch w8", "transpose"}, peer = "P1 tet"},
  {name = "Q1-hex", cell = "hex", space = "Q1", n = 192, strategies = {"patch", "transpose"}, peer = "Q1 hex"},
  {name = "P2-tet", cell = "tet", space = "P2", n = 96, strategies = {"transpose", "patch"}},
  {name = "Q2-hex", cell = "hex", space = "Q2", n = 96, strategies = {"transpose", "patch"}, peer = "Q2 hex"},
  {name = "P3-tet", cell = "tet", space = "P3", n = 64, strategies = {"transpose"}},
  {name = "Q3-hex", cell = "hex", space = "Q3", n = 64, strategies = {"transpose"}},
}

-- the peer's rows: {["P1 tet float64"] = {ms_per_iter =, spmv_ms =, ...}}
local peer = {}
if peer_log then
  local f = io.open(peer_log)
  if f then
    for line in f:lines() do
      local case, dtype = line:match('"case": "([^"]+)"'), line:match('"dtype": "([^"]+)"')
      if case and dtype then
        peer[case .. " " .. dtype] = {
          ms_per_iter = tonumber(line:match('"ms_per_iter": ([%d.e+-]+)')),
          spmv_ms = tonumber(line:match('"spmv_ms": ([%d.e+-]+)')),
          n = tonumber(line:match('"n": (%d+)'))}
      end
    end
    f:close()
  else
    print("no peer log at " .. peer_log)
  end
end

local cal = {}
for _, prec in ipairs({"double", "single"}) do
  cal[prec] = device.calibrate(backend, prec)
  print(("%s %s: calibrated bandwidth %.0f GB/s, FMA %.0f GF/s (%s)"):format(backend, prec,
        cal[prec].peak_gbytes, cal[prec].peak_gflops, cal[prec].device))
end

local rows = {}
local function best_apply(A, w, opts, reps)
  local y, best = A:apply(w, opts) -- compiles and moves the operator's data
  for _ = 1, reps do
    local rep
    y, rep = A:apply(w, opts)
    if rep.seconds < best.seconds then best = rep end
  end
  return best
end

for _, c in ipairs(cases) do
  if next(want) == nil or want[c.name] then
    local n = math.max(1, math.floor(c.n * scale + 0.5))
    local t0 = perf.clock()
    local m = mesh.box{cells = {n, n, n}, cell = c.cell}
    local V = fe.space(m, c.space)
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    print(("\n%s: %d cells, %d dofs (mesh, space, operator: %.1f s)"):format(c.name, m.ncells, V.ndofs,
          perf.clock() - t0))
    for _, prec in ipairs({"double", "single"}) do
      local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, prec)
      for _, strategy in ipairs(c.strategies) do
        local walk = tonumber(strategy:match(" w(%d+)$"))
        local opts = {backend = backend, precision = prec, strategy = strategy:match("^%a+"), walk = walk}
        local ok, rep = pcall(best_apply, A, w, opts, 10)
        if not ok then
          print(("  %s %s: %s"):format(prec, strategy, rep))
        else
          local _, info = solve.cg(A, {backend = backend, precision = prec, strategy = opts.strategy,
                                       walk = walk, pc = "jacobi", rtol = 0, atol = 0, maxit = cg_iterations})
          local cg = info.report
          local row = {case = c.name, prec = prec, strategy = strategy, rep = rep, peer = c.peer,
                       cg_ms = 1e3 * cg.seconds / info.iterations, its = info.iterations,
                       setup = rep.setup_seconds, compile = rep.compile_seconds}
          rows[#rows + 1] = row
          print(("  %-6s %-9s apply %8.3f ms  %7.0f GF/s %6.0f GB/s (%3.0f%% of calibrated)  " ..
                 "predicted %.3f ms  PCG %.3f ms/iteration (%d)"):format(prec, strategy,
                rep.seconds * 1e3, rep.gflops, rep.gbytes, 100 * rep.gbytes / cal[prec].peak_gbytes,
                rep.predicted_seconds * 1e3, row.cg_ms, info.iterations))
        end
      end
      w = nil
      collectgarbage()
    end
    A, V, m = nil, nil, nil
    collectgarbage()
  end
end

print(("\n== %s, %s; calibrated bandwidth %.0f GB/s (double), %.0f GB/s (single)"):format(backend,
      cal.double.device, cal.double.peak_gbytes, cal.single.peak_gbytes))
print("apply: best of 10; GB/s counted with the model's minimal bytes; PCG: Jacobi, " ..
      cg_iterations .. " iterations; peer: CuPy/cuSPARSE CSR PCG on the same mesh")
print(("%-7s %-6s %-9s %9s %9s %7s %7s %6s %9s %9s %9s %8s"):format("case", "prec", "strategy",
      "dofs", "apply ms", "GF/s", "GB/s", "%bw", "pred/meas", "PCG ms/it", "peer ms", "peer/us"))
for _, r in ipairs(rows) do
  local rep = r.rep
  local p = r.peer and peer[r.peer .. " " .. (r.prec == "double" and "float64" or "float32")]
  print(("%-7s %-6s %-9s %9d %9.3f %7.0f %7.0f %5.0f%% %9.2f %9.3f %9s %8s"):format(r.case, r.prec,
        r.strategy, rep.ndofs, rep.seconds * 1e3, rep.gflops, rep.gbytes,
        100 * rep.gbytes / cal[r.prec].peak_gbytes, rep.predicted_seconds / rep.seconds, r.cg_ms,
        p and ("%.3f"):format(p.ms_per_iter) or "-", p and ("%.2f"):format(p.ms_per_iter / r.cg_ms) or "-"))
end
