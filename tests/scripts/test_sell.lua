-- SELL-C-sigma as the layout of the assembled matrix's product (engine/matrix/sparse.c, fe_spmv_sell
-- in engine/codegen/kernels/sparse.knl): M:apply with format "sell" equals CSR's to 1e-14 in double
-- (P1 and P2 tets, Q1 hexes, P1 elasticity, Dirichlet by name; chunk and sigma that do not
-- divide the rows, sigma = 1, a sigma past the rows) on cpu and opencl; its padding, dropped
-- zeros, 32-bit chunks and counted bytes match a layout rebuilt here from the exported rows;
-- its copy (16-bit column deltas, exact zeros dropped) gives the same bits as the copy of 32-bit
-- columns keeping every entry and as scalar CSR where CSR's row is one sum; CG on strategy csr
-- with format "sell" reaches format "csr"'s solution, in the same iterations and bits with
-- either copy; bad options are errors naming them.
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
        check(M.sigma == (M.chunk == 32 and 128 or 8) * M.chunk, "the device's sigma: %d", M.sigma)
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

-- sell_layout_and_bytes_match_a_rebuilt_layout: the rows from the Matrix Market export, each
-- row's entries of value exactly zero left out (zeros = "keep": kept), sorted longest first in
-- windows of sigma (ties in row order), chunks of C padded to their longest row; a chunk's
-- column words: C first columns, then its slots after the first, 16-bit (two of a lane a word,
-- C (w - 1) / 2 rounded up a lane) where its rows' kept columns ascend by at most 65535, else 32-bit (deltas = false:
-- always). M.padding, M.dropped, M.wide, M.product_bytes and the report's bytes (every value
-- slot, the column words, chunk starts twice, permutation, x and y once) follow from it.
local function sell_rebuilt(path, n, C, sigma, drop, deltas)
  local rows = {}
  for i = 1, n do rows[i] = {} end
  local f, size_line = io.open(path), true
  for l in f:lines() do
    local i, j, v = l:match("^(%d+) (%d+) (%S+)$")
    if i and not size_line then
      local r = rows[tonumber(i)]
      if not drop or tonumber(v) ~= 0 then r[#r + 1] = tonumber(j) end
    end
    if i then size_line = false end
  end
  f:close()
  local len, wide, kept = {}, {}, 0
  for i = 1, n do
    local r = rows[i]
    len[i], wide[i], kept = #r, false, kept + #r
    for k = 2, #r do
      if r[k] < r[k - 1] or r[k] - r[k - 1] > 65535 then wide[i] = true end
    end
  end
  local order = {}
  for lo = 1, n, sigma do
    local win = {}
    for i = lo, math.min(lo + sigma - 1, n) do win[#win + 1] = i end
    table.sort(win, function(a, b) return len[a] > len[b] or len[a] == len[b] and a < b end)
    for _, i in ipairs(win) do order[#order + 1] = i end
  end
  local L = {slots = 0, words = 0, nchunks = 0, nwide = 0, kept = kept}
  for k = 1, n, C do
    local w, wd = 0, not deltas
    for p = k, math.min(k + C - 1, n) do
      w = math.max(w, len[order[p]])
      wd = wd or wide[order[p]]
    end
    local after = w > 0 and (w - 1) * C or 0
    L.slots, L.nchunks = L.slots + C * w, L.nchunks + 1
    L.words = L.words + C + (wd and after or C * (w // 2))
    if wd then L.nwide = L.nwide + 1 end
  end
  L.bytes = L.slots * 8 + L.words * 4 + (L.nchunks + 1) * 8 + n * 4
  return L
end

do
  local V = fe.space(tets, {family = "P", order = 1, components = 3})
  local A = fe.operator(V, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = {"xmin", "zmax"}})
  local path = os.tmpname()
  for _, o in ipairs{{}, {deltas = false, zeros = "keep"}, {zeros = "keep"}, {deltas = false}} do
    local M = A:assemble{format = "sell", chunk = 6, sigma = 20, deltas = o.deltas, zeros = o.zeros}
    export.mtx(path, M)
    local n = V.ndofs
    local L = sell_rebuilt(path, n, 6, 20, o.zeros ~= "keep", o.deltas ~= false)
    local _, rep = M:apply(V:interpolate(1))
    local bytes = L.bytes + 2 * n * 8
    check(T.close(M.padding, (L.slots - L.kept) / L.slots, 1e-12) and rep.bytes == bytes and
          M.product_bytes == L.bytes and M.dropped == M.nnz - L.kept and M.wide == L.nwide and
          M.chunks == L.nchunks and rep.flops == 2 * M.nnz,
          "layout deltas %s zeros %s: padding %.4f (rebuilt %.4f), bytes %d (rebuilt %d), "
          .. "dropped %d (rebuilt %d), 32-bit chunks %d (rebuilt %d)", tostring(o.deltas),
          tostring(o.zeros), M.padding, (L.slots - L.kept) / L.slots, rep.bytes, bytes,
          M.dropped, M.nnz - L.kept, M.wide, L.nwide)
    print(("elasticity P1, chunk 6, sigma 20, deltas %s, zeros %s: %d slots, %d column words "
           .. "for %d nonzeros (%d dropped), %d bytes counted"):format(tostring(o.deltas ~= false),
           o.zeros or "drop", L.slots, L.words, M.nnz, M.dropped, rep.bytes))
  end
  os.remove(path)
end

-- sell_product_is_bitwise_csrs: the copy with 16-bit column deltas and zeros dropped (the
-- default) against the copy of 32-bit columns keeping every entry (deltas = false, zeros =
-- "keep"), the same bits on every backend; against scalar CSR (the same adds in the same
-- order) the same bits where CSR's row is one sum (opencl here), to 1e-12 of the largest entry on
-- the cpu (its CSR row keeps four partial sums; a Laplacian of a smooth field cancels). Cases: P1 on a uniform box (exact zeros, dropped), P1 and Q1
-- distorted, P2, elasticity, a Gmsh mesh, a long box numbered along a Hilbert curve (columns
-- jumping past 65535: some chunks 32-bit), single precision.
local function bits_differ(a, b)
  local x, y, d = a:to("cpu", "double"):values(), b:to("cpu", "double"):values(), 0
  for i = 1, #x do
    if string.pack("<d", x[i]) ~= string.pack("<d", y[i]) then d = d + 1 end
  end
  return d
end
do
  local uniform = mesh.box{cells = {8, 8, 8}, cell = "tet"}
  local far = mesh.box{cells = {4, 4, 5000}, cell = "tet"}
  far:reorder("hilbert") -- a row's columns a long way apart: some chunks 32-bit
  local msh = T.gmsh_mesh("meshes/cube_v41.msh")
  local laplace = physics.poisson{kappa = 1, source = 1}
  local bitcases = {
    {"P1 uniform", uniform, "P1", laplace, zeros = true},
    {"P1 distorted", tets, "P1", poisson},
    {"Q1 distorted", hexes, "Q1", poisson},
    {"P2", tets, "P2", poisson},
    {"P1 x3", tets, {family = "P", order = 1, components = 3}, physics.elasticity{E = 10, nu = 0.3}},
    {"P1 hilbert", far, "P1", laplace, wide = true},
    {"P1 uniform single", uniform, "P1", laplace, zeros = true, precision = "single"},
  }
  if msh then bitcases[#bitcases + 1] = {"P1 cube_v41.msh", msh, "P1", poisson} end
  for _, c in ipairs(bitcases) do
    local V = fe.space(c[2], c[3])
    local A = fe.operator(V, c[4], {dirichlet = {"xmin"}})
    local w = V:interpolate(function(x)
      local s = math.sin(x[1] + 2 * x[2]) + x[3]
      if V.ncomp == 3 then return {s, -s, 2 * s} end
      return s
    end)
    for _, be in ipairs(backends) do
      local p = c.precision
      local Mc = A:assemble{backend = be, precision = p, format = "csr", lanes = 1}
      local M = A:assemble{backend = be, precision = p, format = "sell"}
      local Mo = A:assemble{backend = be, precision = p, format = "sell", deltas = false,
                            zeros = "keep"}
      local y, yo, yc = M:apply(w), Mo:apply(w), Mc:apply(w)
      local old, csr = bits_differ(y, yo), bits_differ(y, yc)
      check(old == 0 and (be ~= "opencl" or csr == 0) and rel(y, yc:to("cpu", "double")) <=
            (p and 1e-5 or 1e-12), "%s on %s: %d entries differ from the 32-bit copy's, %d from "
            .. "CSR's (%.1e)", c[1], be, old, csr, rel(y, yc:to("cpu", "double")))
      check(M.deltas and not Mo.deltas and Mo.wide == Mo.chunks and Mo.dropped == 0 and
            M.product_bytes < Mo.product_bytes, "%s on %s: deltas %s, %d of %d chunks 32-bit, "
            .. "%d bytes a product (32-bit columns, zeros kept: %d)", c[1], be, tostring(M.deltas),
            M.wide, M.chunks, M.product_bytes, Mo.product_bytes)
      if c.zeros ~= nil then
        check((M.dropped > 0) == c.zeros, "%s on %s: %d zeros dropped", c[1], be, M.dropped)
      end
      check((M.wide > 0 and M.wide < M.chunks) == (c.wide == true), "%s on %s: %d of %d chunks "
            .. "32-bit", c[1], be, M.wide, M.chunks)
      if be == "cpu" then
        print(("%-18s %7d rows: %7d nonzeros, %6d zeros dropped, %4d of %5d chunks 32-bit; "
               .. "product %d bytes (32-bit columns, zeros kept: %d)"):format(c[1], V.ndofs,
               M.nnz, M.dropped, M.wide, M.chunks, M.product_bytes, Mo.product_bytes))
      end
    end
  end
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

-- cg_iterations_are_those_of_the_32bit_copy: Jacobi-PCG on strategy csr with SELL's default
-- copy (16-bit deltas, zeros dropped: a uniform box has them) and with 32-bit columns keeping
-- every entry: the same iterations and the same bits of the solution; CSR's iterations.
-- (p, q) from a pass of its own (fuse_pq = false): from the product, each copy would add the
-- rows' (p, A p) in its own rows' order (zeros dropped change the rows' lengths, so their sort)
do
  local A = fe.operator(fe.space(mesh.box{cells = {8, 8, 8}, cell = "tet"}, "P1"),
                        physics.poisson{kappa = 1, source = 1}, {dirichlet = {"xmin", "zmax"}})
  for _, be in ipairs(backends) do
    local base = {backend = be, strategy = "csr", pc = "jacobi", rtol = 1e-10, fuse_pq = false}
    local function with(o)
      local t = {}
      for k, v in pairs(base) do t[k] = v end
      for k, v in pairs(o) do t[k] = v end
      return t
    end
    local xc, ic = solve.cg(A, with{format = "csr"})
    local xn, in_ = solve.cg(A, with{format = "sell"})
    local xo, io_ = solve.cg(A, with{format = "sell", deltas = false, zeros = "keep"})
    -- the bits on the cpu; elsewhere Jacobi's diagonal comes from transpose's atomic adds,
    -- whose order varies from run to run (PoCL and NVIDIA alike): the last bits with it
    local differ = bits_differ(xn, xo)
    local same = be == "cpu" and differ == 0 or be ~= "cpu" and rel(xn, xo:to("cpu", "double")) <= 1e-12
    check(in_.converged and in_.iterations == io_.iterations and in_.iterations == ic.iterations
          and same and rel(xn, xc:to("cpu", "double")) <= 1e-12, "cg on %s: sell %d "
          .. "iterations, 32-bit copy %d, csr %d; %d entries of x differ from the 32-bit copy's",
          be, in_.iterations, io_.iterations, ic.iterations, differ)
    check(in_.report.why:find("16-bit delta", 1, true) and io_.report.why:find("32-bit", 1, true),
          "cg on %s: the reports say the columns: %s / %s", be, in_.report.why, io_.report.why)
  end
  print("cg on strategy csr: sell's copies (16-bit deltas, zeros dropped; 32-bit, kept) the same "
        .. "iterations and bits on " .. table.concat(backends, ", "))
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
expect_error(function() return A:assemble{format = "csr", deltas = false} end, "deltas",
             "format = \"sell\"")
expect_error(function() return A:assemble{format = "sell", zeros = "maybe"} end, "zeros", "keep")
expect_error(function() return A:assemble{format = "sell", deltas = 1} end, "deltas", "boolean")
expect_error(function() return A:element_matrices{zeros = "keep"} end, "A:assemble's options")
expect_error(function() return solve.cg(A, {strategy = "csr", format = "sell", zeros = 0}) end,
             "solve.cg", "zeros")
expect_error(function() return solve.cg(A, {strategy = "csr", format = "csr", deltas = true}) end,
             "deltas")
T.done()
