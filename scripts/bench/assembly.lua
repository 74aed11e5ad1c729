-- Benchmark (not a test): element matrices, device assembly and the csr strategy against
-- the matrix-free default, P1 tets (and Q1 hexes when asked), double: the element-matrix
-- kernel, the assembly (its first call whole, then its fill and setup: on the cpu the fill
-- is the pattern's second pass with the element matrices and the rows' sums), the CSR and
-- SELL-C-sigma products' time and share of the calibrated copy bandwidth (by the report's
-- bytes: SELL's padding counted), and Jacobi-PCG per iteration with csr (and csr with format
-- "sell") and with the default strategy; on cuda also cuSPARSE's product on the same arrays
-- (format "cusparse", the reference) and PCG with it.
-- usage: felab scripts/bench/assembly.lua [backend] [cells per side] [cell] [space] [its]
--          [lanes list, e.g. 1,4,8,16: items per row of the product; the first is PCG's]
--          [SELL-C-sigma list of chunk:sigma, e.g. 32:256,32:1024,32:1 (0:0: the device's;
--           "none": skip); PCG with csr also runs the first with format "sell"]
local backend, n = arg[1] or "cuda", tonumber(arg[2]) or 64
local cell, space, its = arg[3] or "tet", arg[4] or "P1", tonumber(arg[5]) or 100
local lanes, sells = {}, {}
for l in (arg[6] or "0"):gmatch("%d+") do lanes[#lanes + 1] = tonumber(l) end
for c, s in (arg[7] or "0:0"):gmatch("(%d+):(%d+)") do
  sells[#sells + 1] = {chunk = tonumber(c) > 0 and tonumber(c) or nil,
                       sigma = tonumber(s) > 0 and tonumber(s) or nil}
end
local t0 = perf.clock()
local m = mesh.box{cells = {n, n, n}, cell = cell}
local V = fe.space(m, space)
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
print(("%s %s %d^3: %d cells, %d dofs (%.1f s)"):format(space, cell, n, m.ncells, V.ndofs, perf.clock() - t0))
local cal = device.calibrate(backend, "double")
local _, krep = A:element_matrices{backend = backend}
local _, krep2 = A:element_matrices{backend = backend}
print(("element matrices: kernel %.2f ms (%.0f GF/s, %.0f%% of FMA %.0f), setup %.2f s"):format(
      krep2.seconds * 1e3, krep2.gflops, 100 * krep2.gflops / cal.peak_gflops, cal.peak_gflops,
      krep.setup_seconds))
local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end):to(backend)
-- the products: CSR with each lanes, then SELL-C-sigma with each chunk:sigma
local products = {}
for _, l in ipairs(lanes) do products[#products + 1] = {backend = backend, lanes = l} end
for _, s in ipairs(sells) do
  products[#products + 1] = {backend = backend, format = "sell", chunk = s.chunk, sigma = s.sigma}
end
if backend == "cuda" then products[#products + 1] = {backend = backend, format = "cusparse"} end
for _, o in ipairs(products) do
  local t1 = perf.clock()
  local M, arep = A:assemble(o)
  local whole = perf.clock() - t1
  -- the fill: the element matrices and their adds (on the cpu, with the pattern's second
  -- pass); the setup: the rest of the pattern, uploads, the host's share
  print(("assemble: %d nonzeros, fill %.2f ms, setup %.3f s, compile %.3f s, whole call %.3f s"
         .. " (%s)"):format(M.nnz, arep.seconds * 1e3, arep.setup_seconds, arep.compile_seconds,
                            whole, arep.why))
  local best
  for _ = 1, 20 do
    local _, r = M:apply(w)
    if not best or r.seconds < best.seconds then best = r end
  end
  print(("spmv (%s): %.3f ms, %.0f GB/s (%.0f%% of %.0f)"):format(best.why, best.seconds * 1e3,
        best.gbytes, 100 * best.gbytes / cal.peak_gbytes, cal.peak_gbytes))
  M = nil
  collectgarbage()
end
do -- the fill by color instead of atomics (the adds alone: seconds less the element matrices)
  local t1 = perf.clock()
  local M, arep = A:assemble{backend = backend, scatter = "color"}
  print(("assemble, fill by color: device %.2f ms (%s), whole call %.2f s"):format(
        arep.seconds * 1e3, arep.why, perf.clock() - t1))
  M = nil
  collectgarbage()
end
local runs = #sells > 0 and {"csr", "csr-sell", "default", "patch"} or {"csr", "default", "patch"}
if backend == "cuda" then table.insert(runs, 2, "csr-cusparse") end
for _, st in ipairs(runs) do
  local sell = st == "csr-sell" and sells[1] or nil
  local o = {backend = backend, pc = "jacobi", rtol = 0, atol = 0, maxit = its,
             strategy = st == "patch" and "patch" or st ~= "default" and "csr" or nil,
             lanes = st == "csr" and lanes[1] or nil,
             format = sell and "sell" or st == "csr-cusparse" and "cusparse" or nil,
             chunk = sell and sell.chunk or nil,
             sigma = sell and sell.sigma or nil}
  solve.cg(A, o) -- setup, compile
  local _, info = solve.cg(A, o)
  print(("PCG %-12s %.3f ms/iteration (%s)"):format(st, 1e3 * info.report.seconds / info.iterations,
        info.report.strategy))
end
