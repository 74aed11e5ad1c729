-- SELL-C-sigma as the layout of the assembled matrix's product (engine/matrix/sparse.c, fe_spmv_sell
-- in engine/codegen/kernels/elemat.knl): M:apply with format "sell" equals CSR's to 1e-14 in double
-- (P1 and P2 tets, Q1 hexes, P1 elasticity, Dirichlet by name; chunk and sigma that do not
-- divide the rows, sigma = 1, a sigma past the rows) on cpu and opencl; its padding and
-- counted bytes match a layout rebuilt here from the exported rows; CG on strategy csr with
-- format "sell" reaches format "csr"'s solution; bad options are errors naming them.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local backends = T.backends(true)

local poisson = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}
local tets = mesh.box{cells = {4, 4, 4}, cell = "tet", distort = 0.2}
local hexes = mesh.box{cells = {3, 3, 2}, cell = "hex", distort = 0.2}

-- max |a - b| / max |b| (b on the cpu)
local function rel(a, b)
  return T.max_abs_diff(a:to("cpu", "double"), b) / math.max(math.abs(b:max()), math.abs(b:min()))
end

-- the layouts asked for: the device's, chunk and sigma dividing no row count here (prime
-- chunk), no sorting, and a window past the rows (one sort of the whole matrix)
local layouts = {{}, {chunk = 7, sigma = 45}, {chunk = 5, sigma = 1}, {chunk = 3, sigma = 10^6}}

-- sell_matches_csr_to_1e14: every case, backend and layout
local cases = {
  {tets, "P1", dirichlet = {"xmin", "ymax"}}, {tets, "P2", dirichlet = {"zmin"}},
  {hexes, "Q1", dirichlet = {"xmax"}}, {tets, "P1", components = 3, dirichlet = {"xmin"}},
}
for _, c in ipairs(cases) do
  local m, sp = c[1], c[2]
  local V = c.components and fe.space(m, {family = "P", order = 1, components = 3})
            or fe.space(m, sp)
  local A = fe.operator(V, c.components and physics.elasticity{E = 10, nu = 0.3} or poisson,
                        {dirichlet = c.dirichlet})
  local w = V:interpolate(function(x)
    local s = math.sin(x[1] + 2 * x[2]) + x[3]
    if c.components then return {s, -s, 2 * s} end
    return s
  end)
  for _, be in ipairs(backends) do
    local M0 = A:assemble{backend = be, format = "csr"} -- a GPU's default is sell
    local y0 = M0:apply(w):to("cpu", "double")
    check(M0.format == "csr" and M0.chunk == nil and M0.padding == 0, "csr: format %s", M0.format)
    if be == "cpu" or be == "cuda" then -- the default layout: CSR on a CPU, SELL on a GPU
      local Md = A:assemble{backend = be}
      check(Md.format == (be == "cpu" and "csr" or "sell"), "%s: default format %s", be, Md.format)
    end
    local worst, pads = 0, {}
    for _, l in ipairs(layouts) do
      local M, arep = A:assemble{backend = be, format = "sell", chunk = l.chunk, sigma = l.sigma}
      local y, rep = M:apply(w)
      local d = rel(y, y0)
      worst = math.max(worst, d)
      check(M.format == "sell" and M.nnz == M0.nnz and d <= 1e-14, "%s%s %s sell chunk %s sigma "
            .. "%s: M:apply vs csr %.1e", sp, c.components and " x3" or "", be, M.chunk, M.sigma, d)
      check(rep.why:find("SELL%-" .. M.chunk .. "%-" .. M.sigma) and arep.why:find("padding"),
            "the reports name the layout: %s / %s", rep.why, arep.why)
      if l.chunk == nil then
        check(M.chunk == 8 or M.chunk == 32, "the device's chunk: %d", M.chunk)
        check(M.sigma == 8 * M.chunk, "the device's sigma: %d", M.sigma)
      end
      pads[#pads + 1] = M.padding
    end
    -- no sorting pads at least as much as sorting the whole matrix with a smaller chunk
    check(pads[3] >= 0 and pads[4] <= pads[3] + 1e-15 and pads[4] < 0.5, "padding: %s",
          table.concat(pads, ", "))
    if be == "cpu" then
      print(("%-3s%-3s %5d rows: sell = csr to %.1e; padding %s"):format(sp,
            c.components and "x3" or "", V.ndofs, worst,
            table.concat((function() local s = {} for i, p in ipairs(pads) do
              s[i] = ("%.1f%%"):format(100 * p) end return s end)(), ", ")))
    end
  end
end

-- sell_layout_and_bytes_match_a_rebuilt_layout: the row lengths from the Matrix Market export,
-- sorted longest first in windows of sigma (ties in row order), chunks of C padded to their
-- longest row; M.padding and the report's bytes (every slot's value and column, chunk starts,
-- permutation, x and y once) follow from that layout
do
  local V = fe.space(tets, {family = "P", order = 1, components = 3})
  local A = fe.operator(V, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = {"xmin", "zmax"}})
  local M = A:assemble{format = "sell", chunk = 6, sigma = 20}
  local path = os.tmpname()
  export.mtx(path, M)
  local len, n = {}, V.ndofs
  for i = 1, n do len[i] = 0 end
  local f, size_line = io.open(path), true
  for l in f:lines() do
    local i = l:match("^(%d+) %d+ %S+$")
    if i and not size_line then len[tonumber(i)] = len[tonumber(i)] + 1 end
    if i then size_line = false end
  end
  f:close()
  os.remove(path)
  local order = {}
  for lo = 1, n, 20 do
    local win = {}
    for i = lo, math.min(lo + 19, n) do win[#win + 1] = i end
    table.sort(win, function(a, b) return len[a] > len[b] or len[a] == len[b] and a < b end)
    for _, i in ipairs(win) do order[#order + 1] = i end
  end
  local slots, nchunks = 0, 0
  for k = 1, n, 6 do
    local w = 0
    for p = k, math.min(k + 5, n) do w = math.max(w, len[order[p]]) end
    slots, nchunks = slots + 6 * w, nchunks + 1
  end
  local _, rep = M:apply(V:interpolate(1))
  local bytes = slots * 12 + (nchunks + 1) * 4 + n * 4 + 2 * n * 8
  check(T.close(M.padding, (slots - M.nnz) / slots, 1e-12) and rep.bytes == bytes and
        rep.flops == 2 * M.nnz, "layout: padding %.4f (rebuilt %.4f), bytes %d (rebuilt %d)",
        M.padding, (slots - M.nnz) / slots, rep.bytes, bytes)
  print(("elasticity P1, chunk 6, sigma 20: %d slots for %d nonzeros, %d bytes counted"):format(
        slots, M.nnz, rep.bytes))
end

-- cg_on_csr_sell_equals_cg_on_csr
do
  local A = fe.operator(fe.space(mesh.box{cells = {6, 6, 6}, cell = "tet"}, "P1"), poisson,
                        {dirichlet = "all"})
  for _, be in ipairs(backends) do
    local x1, i1 = solve.cg(A, {backend = be, strategy = "csr", format = "csr", pc = "jacobi",
                                rtol = 1e-10})
    local x2, i2 = solve.cg(A, {backend = be, strategy = "csr", format = "sell", chunk = 7,
                                sigma = 30, pc = "jacobi", rtol = 1e-10})
    local d = rel(x2, x1:to("cpu", "double"))
    check(i1.converged and i2.converged and d <= 1e-12 and i2.report.strategy == "csr",
          "cg on %s: sell (%d its) = csr (%d its) to %.1e", be, i2.iterations, i1.iterations, d)
  end
  print("cg on strategy csr: format sell = format csr on " .. table.concat(backends, ", "))
end

-- cusparse_is_the_reference_on_cuda: format "cusparse" multiplies felab's CSR arrays with
-- cuSPARSE (cuda only; elsewhere an error naming the backend)
do
  local A = fe.operator(fe.space(tets, "P2"), poisson, {dirichlet = {"xmin"}})
  local w = A.space:interpolate(function(x) return math.cos(x[1] - x[3]) end)
  for _, be in ipairs(backends) do
    if be == "cuda" then
      local M0, M = A:assemble{backend = be, format = "csr"}, A:assemble{backend = be, format = "cusparse"}
      local y, rep = M:apply(w)
      local d = rel(y, M0:apply(w):to("cpu", "double"))
      check(M.format == "cusparse" and d <= 1e-14 and rep.why:find("cuSPARSE"),
            "cuda: cusparse product = csr's to %.1e (%s)", d, rep.why)
      local x1 = solve.cg(A, {backend = be, strategy = "csr", format = "csr", rtol = 1e-10})
      local x2, i2 = solve.cg(A, {backend = be, strategy = "csr", format = "cusparse", rtol = 1e-10})
      d = rel(x2, x1:to("cpu", "double"))
      check(i2.converged and d <= 1e-12, "cg on csr with cuSPARSE's product: %.1e", d)
      print(("cuda: cuSPARSE's product = felab's CSR to %.1e; cg agrees"):format(d))
    else
      expect_error(function() return A:assemble{backend = be, format = "cusparse"} end,
                   "cusparse", "cuda backend only")
    end
  end
end

-- bad_options_are_errors_naming_them
local A = fe.operator(fe.space(tets, "P1"), poisson)
local w = A:initial()
expect_error(function() return A:assemble{format = "ell"} end, "format", "ell")
expect_error(function() return A:assemble{format = "sell", chunk = 0} end, "chunk", "1..1024")
expect_error(function() return A:assemble{format = "sell", chunk = 4096} end, "chunk")
expect_error(function() return A:assemble{format = "sell", sigma = 0} end, "sigma")
expect_error(function() return A:assemble{format = "sell", sigma = 2.5} end, "sigma")
expect_error(function() return A:assemble{chunk = 8} end, "chunk = 8", "format = \"sell\"")
expect_error(function() return A:assemble{format = "csr", sigma = 64} end, "sigma = 64")
expect_error(function() return A:assemble{format = "sell", lanes = 4} end, "lanes = 4")
expect_error(function() return A:element_matrices{format = "sell"} end, "A:assemble's options")
expect_error(function() return A:apply(w, {strategy = "csr", format = 1}) end, "format")
expect_error(function() return A:apply(w, {strategy = "csr", chunk = 8}) end, "chunk = 8")
expect_error(function() return solve.cg(A, {strategy = "csr", format = "coo"}) end, "solve.cg",
             "format")
expect_error(function() return solve.cg(A, {strategy = "csr", format = "sell", sigma = -1}) end,
             "solve.cg", "sigma")
T.done()
