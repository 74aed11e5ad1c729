-- Element matrices and assembly (engine/matrix/): the element matrices of Poisson are
-- symmetric with rows summing to zero; they agree across backends and precisions; the sum
-- of the element matrices equals the assembled matrix; M:apply equals the matrix-free
-- action (P1..P4 tets, Q1..Q4 hexes, prisms, elasticity, Dirichlet by name, a nonlinear
-- physics at a state); the Matrix Market export reads back with scipy; strategies csr and
-- ebe equal the matrix-free actions, and BiCG on ebe solves a nonsymmetric problem.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff, expect_error = T.check, T.max_rel_diff, T.expect_error
local backends, nvidia_opencl = T.backends(true), T.nvidia_opencl()

local poisson = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}

-- Poisson element matrices: symmetric, rows sum to zero (no Dirichlet in them)
local tets = mesh.box{cells = {2, 2, 2}, cell = "tet", distort = 0.2}
do
  local V = fe.space(tets, "P2")
  local A = fe.operator(V, poisson, {dirichlet = "all"})
  local K, rep = A:element_matrices()
  check(K.ncells == tets.ncells and K.n == 10, "P2 elemats: %d cells of %d", K.ncells, K.n)
  check(rep.seconds >= 0 and rep.flops > 0 and rep.strategy == "quadrature",
        "report: %s %g flops", rep.strategy, rep.flops)
  -- semidefinite: the matrix less its last row and column has a Cholesky factor with
  -- positive pivots, so (interlacing, with K 1 = 0) K's eigenvalues are 0 and positive ones
  local function leading_spd(k, n)
    local l = {}
    for i = 1, n do
      l[i] = {}
      for j = 1, i do
        local s = k[i][j]
        for m = 1, j - 1 do s = s - l[i][m] * l[j][m] end
        if i == j then
          if s <= 0 then return false end
          l[i][i] = math.sqrt(s)
        else
          l[i][j] = s / l[j][j]
        end
      end
    end
    return true
  end
  local asym, rowsum, scale, diag_pos, psd = 0, 0, 0, true, true
  for c = 1, K.ncells do
    local k = K:get(c)
    psd = psd and leading_spd(k, K.n - 1)
    for i = 1, K.n do
      local s = 0
      for j = 1, K.n do
        asym = math.max(asym, math.abs(k[i][j] - k[j][i]))
        s = s + k[i][j]
        scale = math.max(scale, math.abs(k[i][j]))
      end
      rowsum = math.max(rowsum, math.abs(s))
      diag_pos = diag_pos and k[i][i] > 0
    end
  end
  check(asym <= 1e-13 * scale and rowsum <= 1e-12 * scale and diag_pos and psd,
        "P2 Poisson elemats symmetric (%.1e) with zero row sums (%.1e), positive diagonal, "
        .. "semidefinite (%s)", asym / scale, rowsum / scale, tostring(psd))
  print(("P2 Poisson element matrices: asymmetry %.1e, row sums %.1e"):format(asym / scale,
        rowsum / scale))
  -- backends and precisions agree
  for _, be in ipairs(backends) do
    for _, prec in ipairs({"double", "single"}) do
      local Kb = A:element_matrices{backend = be, precision = prec}
      local worst = 0
      for c = 1, K.ncells, 7 do
        local a, b = K:get(c), Kb:get(c)
        for i = 1, K.n do
          for j = 1, K.n do worst = math.max(worst, math.abs(a[i][j] - b[i][j]) / scale) end
        end
      end
      local tol = prec == "double" and 1e-12 or 1e-5
      check(worst <= tol, "elemats %s %s vs cpu double: %.1e", be, prec, worst)
    end
  end
  local Kc = A:element_matrices{backend = backends[#backends]}:to("cpu")
  check(Kc.backend == "cpu" and math.abs(Kc:get(3)[2][2] - K:get(3)[2][2]) <= 1e-12 * scale,
        "K:to(\"cpu\")")
end

-- M:apply equals A:apply; the sum of the element matrices is the matrix (no Dirichlet)
local hexes = mesh.box{cells = {2, 2, 1}, cell = "hex", distort = 0.2}
local prisms = mesh.box{cells = {2, 1, 1}, cell = "prism"}
local cases = {
  {tets, "P1"}, {tets, "P3"}, {hexes, "Q1"}, {hexes, "Q2"}, {prisms, "P2"},
  {tets, "P2", components = 3}, {hexes, "Q2", nonlinear = true},
  -- the other orders on the cpu alone (each is one more compile per backend)
  {tets, "P2", cpu = true}, {tets, "P4", cpu = true}, {hexes, "Q3", cpu = true},
  {hexes, "Q4", cpu = true},
}
local M_count = 0
for _, c in ipairs(cases) do
  local m, sp = c[1], c[2]
  local V = c.components and fe.space(m, {family = sp:sub(1, 1), order = tonumber(sp:sub(2)), components = 3})
            or fe.space(m, sp)
  local pde = c.components and physics.elasticity{E = 10, nu = 0.3}
              or c.nonlinear and T.nonlinear(V) or poisson
  local A = fe.operator(V, pde, {dirichlet = {"xmin", "ymax"}})
  local w = V:interpolate(function(x)
    local s = math.sin(x[1] + 2 * x[2]) + x[3]
    if c.components then return {s, -s, 2 * s} end
    return s
  end)
  local u = c.nonlinear and V:interpolate(function(x) return x[1] * x[2] end) or nil
  for _, be in ipairs(backends) do
    -- NVIDIA's OpenCL holds 64 KB of __constant tables: the auxiliary field's dense tables
    -- of the nonlinear case (Q2 at its rule, 366 KB) do not fit, and the error says so
    if c.cpu and be ~= "cpu" then goto next_backend end
    if be == "opencl" and nvidia_opencl and c.nonlinear then
      expect_error(function() return A:assemble{backend = be, at = u} end,
                   "exceed the device's constant memory")
      goto next_backend
    end
    local lanes = ({1, 4, 8})[(#sp + M_count) % 3 + 1] -- scalar and vector CSR in turn
    M_count = M_count + 1
    local M, rep = A:assemble{backend = be, at = u, lanes = lanes}
    local y = M:apply(w)
    local ref = A:apply(w, {backend = "cpu", at = u})
    local d = rel_diff(y:to("cpu", "double"), ref)
    check(d <= 1e-12 and M.nnz > 0, "%s%s %s lanes %d: M:apply vs A:apply %.1e (nnz %d)", sp,
          c.components and " x3" or "", be, lanes, d, M.nnz)
    if c.cpu then -- and strategy ebe's action
      local e = rel_diff(A:apply(w, {backend = be, strategy = "ebe"}), ref)
      check(e <= 1e-12, "%s ebe on %s: %.1e", sp, be, e)
    end
    if be == "cpu" then
      print(("%-4s%-4s %-9s assembled: %6d nonzeros, M w = A w to %.1e (%.3f ms)"):format(sp,
            c.components and "x3" or "", c.nonlinear and "nonlin." or "", M.nnz, d, rep.seconds * 1e3))
    end
    ::next_backend::
  end
end

-- the sum of the element matrices is the assembled matrix (no Dirichlet), read back from
-- its Matrix Market export; V:cell_dofs names the rows of K:get(c)
do
  local V = fe.space(tets, "P2")
  local A = fe.operator(V, poisson)
  local K = A:element_matrices()
  local M = A:assemble()
  local sum = {} -- sum[i][j]
  for c = 1, K.ncells do
    local k, dofs = K:get(c), V:cell_dofs(c)
    for i = 1, K.n do
      local row = sum[dofs[i]] or {}
      sum[dofs[i]] = row
      for j = 1, K.n do row[dofs[j]] = (row[dofs[j]] or 0) + k[i][j] end
    end
  end
  local path = os.tmpname()
  export.mtx(path, M)
  local f = io.open(path)
  check(f:read("l"):find("^%%%%MatrixMarket matrix coordinate real general"), "mtx header")
  local line = f:read("l")
  while line:sub(1, 1) == "%" do line = f:read("l") end
  local n, _, nnz = line:match("(%d+) (%d+) (%d+)")
  local worst, count, scale = 0, 0, 0
  for l in f:lines() do
    local i, j, v = l:match("(%d+) (%d+) (%S+)")
    i, j, v = tonumber(i), tonumber(j), tonumber(v)
    local s = sum[i] and sum[i][j] or 0
    worst = math.max(worst, math.abs(v - s))
    scale = math.max(scale, math.abs(s))
    count = count + 1
  end
  f:close()
  local expected = 0
  for _, row in pairs(sum) do for _ in pairs(row) do expected = expected + 1 end end
  check(tonumber(n) == V.ndofs and tonumber(nnz) == M.nnz and count == M.nnz and count == expected,
        "mtx: %s rows, %s nonzeros (%d read, %d coupled pairs)", n, nnz, count, expected)
  check(worst <= 1e-13 * scale, "sum of element matrices vs assembled: %.1e", worst / scale)
  print(("P2 Poisson: %d nonzeros, sum of element matrices = exported matrix to %.1e"):format(
        count, worst / scale))
  -- scipy reads it back and multiplies as felab does (where python3-scipy is installed)
  local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end)
  local wpath, ypath = path .. ".w", path .. ".y"
  local fw = io.open(wpath, "w")
  for _, v in ipairs(w:values()) do fw:write(("%.17g\n"):format(v)) end
  fw:close()
  -- Debian's python (install-deps.sh installs python3-scipy), not a virtual environment's
  local py = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"
  local debian_scipy = os.execute("dpkg-query -W python3-scipy > /dev/null 2>&1")
  local ok = os.execute((py .. " -c 'import numpy, scipy.io; M = scipy.io.mmread(\"%s\").tocsr(); "
    .. "numpy.savetxt(\"%s\", M @ numpy.loadtxt(\"%s\"), fmt=\"%%.17g\")' 2>/dev/null"):format(path, ypath, wpath))
  if ok then
    local y, i, worst2 = M:apply(w):values(), 0, 0
    for l in io.lines(ypath) do
      i = i + 1
      worst2 = math.max(worst2, math.abs(tonumber(l) - y[i]))
    end
    check(i == V.ndofs and worst2 <= 1e-12 * w:norm() * scale, "scipy M w vs felab: %.1e", worst2)
    print(("scipy.io.mmread: M w equals felab's to %.1e"):format(worst2))
  else
    check(not debian_scipy, "python3-scipy is installed but could not read the export")
    T.skip("scipy.io.mmread: python3-scipy not installed here")
  end
  os.remove(path); os.remove(wpath); os.remove(ypath)
end

-- strategy "csr": assembled once, then a CSR product per Jacobian action; the residual and
-- the diagonal matrix-free; CG on it reaches transpose's solution; nonlinear physics refused
do
  local V = fe.space(tets, {family = "P", order = 2, components = 3})
  local A = fe.operator(V, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = {"xmin"}})
  local w = V:interpolate(function(x) return {x[1] * x[2], x[3], -x[1]} end)
  for _, st in ipairs({"csr", "ebe"}) do
    for _, be in ipairs(backends) do
      local o = {backend = be, strategy = st}
      local ref, y, rep = A:apply(w, {backend = "cpu"}), A:apply(w, o)
      local d1 = rel_diff(y:to("cpu", "double"), ref)
      local d2 = rel_diff(A:diagonal(o):to("cpu", "double"), A:diagonal{backend = "cpu"})
      local d3 = rel_diff(A:residual(w, o):to("cpu", "double"), A:residual(w, {backend = "cpu"}))
      check(rep.strategy == st and d1 <= 1e-12 and d2 <= 1e-12 and d3 <= 1e-12,
            "%s on %s: apply %.1e, diagonal %.1e, residual %.1e (%s)", st, be, d1, d2, d3, rep.strategy)
    end
  end
  local Ap = fe.operator(fe.space(tets, "P1"), poisson, {dirichlet = "all"})
  local x2 = solve.cg(Ap, {strategy = "transpose", rtol = 1e-10})
  for _, st in ipairs({"csr", "ebe"}) do
    local x1 = solve.cg(Ap, {strategy = st, rtol = 1e-10})
    check(rel_diff(x1, x2) <= 1e-8, "cg with %s = cg with transpose: %.1e", st, rel_diff(x1, x2))
  end
  local An = fe.operator(fe.space(hexes, "Q1"), T.nonlinear(fe.space(hexes, "Q1")))
  local _, info = An:strategies()
  check(not info.csr.applies and info.csr.why:find("depends on the state") and not info.ebe.applies,
        "csr, ebe on nonlinear: %s", tostring(info.csr.why))
  print("strategies csr and ebe = transpose (apply, diagonal, residual) on " .. table.concat(backends, ", "))
end

-- the kiss setting in small: a nonsymmetric problem (convection-diffusion) solved by BiCG on
-- ebe (its transposed action from the transposed physics' element matrices) and by BiCG
-- matrix-free, agreeing to 1e-8
do
  local V = fe.space(mesh.box{cells = {4, 4, 4}, cell = "tet"}, "P1")
  local A = fe.operator(V, physics.convection_diffusion{kappa = 1, velocity = {3, -2, 1}, source = 1},
                        {dirichlet = "all"})
  local x1, i1 = solve.bicg(A, {strategy = "ebe", rtol = 1e-11})
  local x2, i2 = solve.bicg(A, {strategy = "transpose", rtol = 1e-11})
  check(i1.converged and i2.converged and rel_diff(x1, x2) <= 1e-8,
        "bicg on ebe (%d its) = bicg matrix-free (%d its): %.1e", i1.iterations, i2.iterations,
        rel_diff(x1, x2))
  print(("convection-diffusion: BiCG on ebe = BiCG matrix-free to %.1e (%d iterations)"):format(
        rel_diff(x1, x2), i1.iterations))
end

-- the element matrices' kernels are the operator's own (engine/matrix/elemat-cache.c), not the
-- realization's whose geometry they read: once that realization is forgotten (8 are kept, the
-- least recently used dropped), the next call reads a new one and gives the same matrices
do
  local V = fe.space(tets, "P2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(1)
  local cpu = {backend = "cpu", precision = "double"}
  local K0 = A:element_matrices(cpu)
  local T0 = A:element_matrices{backend = "cpu", precision = "double", strategy = "tensor"}
  for b = 9, 16 do -- blocks no other call asks: 8 realizations of their own
    A:apply(w, {backend = "cpu", precision = "double", strategy = "transpose", block = b})
  end
  check(A.realizations == 8, "the applies of 8 blocks hold %d realizations", A.realizations)
  local K1 = A:element_matrices(cpu)
  local T1 = A:element_matrices{backend = "cpu", precision = "double", strategy = "tensor"}
  local function differ(Ka, Kb) -- entries that are not the same number
    local n = 0
    for c = 1, Ka.ncells do
      local a, b = Ka:get(c), Kb:get(c)
      for i = 1, Ka.n do for j = 1, Ka.n do n = n + (a[i][j] == b[i][j] and 0 or 1) end end
    end
    return n
  end
  check(differ(K0, K1) == 0 and differ(T0, T1) == 0, "element matrices after their "
        .. "realization was forgotten differ in %d entries (tensor: %d)", differ(K0, K1),
        differ(T0, T1))
  print("the element matrices' kernels outlive the realization whose geometry they read")
end

-- errors name the thing
local A = fe.operator(fe.space(tets, "P1"), poisson)
expect_error(function() return A:element_matrices{strategy = "tensor"} end, "depends on x")
expect_error(function() return A:element_matrices{variant = "fast"} end, "unknown variant")
expect_error(function() return A:element_matrices{colour = 1} end, "colour")
expect_error(function() return A:element_matrices():get(10^6) end, "out of range")
expect_error(function() return A:assemble{lanes = 3} end, "power of two")
T.done()
