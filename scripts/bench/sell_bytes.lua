-- Benchmark (not a test): SELL-C-sigma's copy with and without its two byte savings (issue 46,
-- docs/kernels.md): the columns as 16-bit differences (`deltas`) and exact zeros left out
-- (`zeros = "drop"`), each on and off, in one process on the same operator, alternated round by
-- round: the bytes the matrix holds and a product reads, the csr strategy's apply (best of
-- `applies`) and Jacobi-PCG per iteration (50 iterations, best of two), then the same with CSR
-- (the backend's lanes) for reference. P1 tets on a box of n^3 cubes, uniform and distorted.
-- usage: felab scripts/bench/sell_bytes.lua [backend] [n] [rounds] [distortions] [applies]
--   distortions: comma-separated, 0 the uniform box (its Laplacian has exact zeros where h is
--   a power of two, and on the H200's 192^3 box); default "0,0.1"
local backend = arg[1] or "cuda"
local n = tonumber(arg[2]) or 192
local rounds = tonumber(arg[3]) or 2
local dlist = arg[4] or "0,0.1"
local applies = tonumber(arg[5]) or 10
local variants = {
  {"sell deltas+drop", {format = "sell", deltas = true, zeros = "drop"}},
  {"sell 32-bit, keep", {format = "sell", deltas = false, zeros = "keep"}},
  {"sell deltas, keep", {format = "sell", deltas = true, zeros = "keep"}},
  {"sell 32-bit, drop", {format = "sell", deltas = false, zeros = "drop"}},
  {"csr", {format = "csr"}},
}

-- t with o's fields added
local function with(t, o)
  local r = {}
  for k, v in pairs(t) do r[k] = v end
  for k, v in pairs(o) do r[k] = v end
  return r
end

local rows = {}
for d in dlist:gmatch("[^,]+") do
  local dist = tonumber(d)
  local m = mesh.box{cells = {n, n, n}, cell = "tet", distort = dist}
  local V = fe.space(m, "P1")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end):to(backend)
  local case = ("P1 %d^3%s"):format(n, dist > 0 and (" distort " .. d) or "")
  print(("== %s: %d cells, %d dofs, %s"):format(case, m.ncells, V.ndofs, backend))
  local res, held = {}, {}
  for i, v in ipairs(variants) do -- each copy made once (the csr strategy takes A:assemble's)
    local M = A:assemble(with({backend = backend}, v[2]))
    local _, r = A:apply(w, with({backend = backend, strategy = "csr"}, v[2]))
    res[i] = {apply = math.huge, pcg = math.huge, bytes = r.bytes}
    held[i] = M -- held, so that the realization's matrix is this one
    local sell = M.format == "sell"
    print(("  %-18s holds %8.1f MB, a product reads %8.1f MB (x, y: %.1f MB)%s"):format(v[1],
          M.bytes / 1e6, M.product_bytes / 1e6, (r.bytes - M.product_bytes) / 1e6, sell and
          (("; %d of %d entries dropped, %d of %d chunks 32-bit, %.1f%% padding"):format(
           M.dropped, M.nnz, M.wide, M.chunks, 100 * M.padding)) or ""))
  end
  for round = 1, rounds do -- alternated: every variant once a round
    for i, v in ipairs(variants) do
      local o = with({backend = backend, strategy = "csr"}, v[2])
      for _ = 1, applies do
        local _, s = A:apply(w, o)
        res[i].apply = math.min(res[i].apply, s.seconds)
      end
      for _ = 1, 2 do
        local _, info = solve.cg(A, with(o, {pc = "jacobi", rtol = 1e-30, maxit = 50}))
        res[i].pcg = math.min(res[i].pcg, info.report.seconds / info.iterations * 1e3)
        res[i].its = info.iterations
      end
      print(("  round %d %-18s apply %.3f ms, PCG %.3f ms/it"):format(round, v[1],
            res[i].apply * 1e3, res[i].pcg))
    end
  end
  for i, v in ipairs(variants) do
    local M = held[i]
    rows[#rows + 1] = {case, v[1], M.bytes / 1e6, M.product_bytes / 1e6, res[i].apply * 1e3,
                       res[i].bytes / res[i].apply / 1e9, res[i].pcg, res[i].its}
  end
  held, A, V, m, w = nil, nil, nil, nil, nil
  collectgarbage()
end
print(("\n%s, best of %d applies and of 2 PCG runs (50 iterations) in each of %d rounds"):format(
      backend, applies, rounds))
print("| case | copy | holds MB | product reads MB | apply ms | GB/s (counted) | PCG ms/it | its |")
print("|---|---|---|---|---|---|---|---|")
for _, x in ipairs(rows) do
  print(("| %s | %s | %.1f | %.1f | %.3f | %.0f | %.3f | %d |"):format(table.unpack(x)))
end
