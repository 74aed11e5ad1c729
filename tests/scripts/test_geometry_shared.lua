-- Congruent cells share their geometric factors (docs/kernels.md): every strategy that stores
-- factors gives the same results shared as with a set a cell (geometry = "unshared"), on every
-- backend and in both precisions; the report says so and counts fewer bytes; a distorted box
-- shares nothing.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff = T.check, T.max_rel_diff

local function pair(A, w, opts, action, tol, what)
  local a, b = {}, {}
  for k, v in pairs(opts) do a[k], b[k] = v, v end
  a.geometry, b.geometry = "stored", "unshared"
  local call = action == "diagonal" and function(o) return A:diagonal(o) end
                                     or function(o) return A:apply(w, o) end
  local ys, rs = call(a)
  local yu, ru = call(b)
  local d = rel_diff(yu:to("cpu"), ys:to("cpu"))
  check(d <= tol, "%s: shared and unshared differ by %.3g (tolerance %g)", what, d, tol)
  check(rs.why:find("geometry shared", 1, true), "%s: the report does not say shared: %s", what, rs.why)
  check(not ru.why:find("shared", 1, true), "%s: unshared says shared: %s", what, ru.why)
  check(rs.bytes < ru.bytes, "%s: shared bytes %g not below unshared %g", what, rs.bytes, ru.bytes)
  return rs, ru
end

local cases = {
  {cell = "tet", n = 5, space = "P1", strategy = "transpose"},
  {cell = "tet", n = 4, space = "P2", strategy = "patch"},
  {cell = "hex", n = 4, space = "Q3", strategy = "sumfact"},
  {cell = "prism", n = 4, space = "P2", strategy = "transpose"},
}
for _, be in ipairs(T.backends(true)) do
  for _, c in ipairs(cases) do
    local m = mesh.box{cells = {c.n, c.n + 1, c.n}, cell = c.cell}
    local V = fe.space(m, c.space)
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    local w = V:interpolate("x[0] * x[1] + sin(x[2])")
    for _, prec in ipairs({"double", "single"}) do
      local tol = prec == "double" and 1e-11 or 1e-4
      local what = ("%s %s %s %s %s"):format(be, prec, c.space, c.cell, c.strategy)
      local opts = {backend = be, precision = prec, strategy = c.strategy}
      local rs = pair(A, w, opts, "apply", tol, what)
      if prec == "double" and be == "cpu" then
        pair(A, w, opts, "diagonal", tol, what .. " diagonal")
        print(("%s: %s, %.3g bytes"):format(what, rs.why, rs.bytes))
      end
    end
  end
end

-- the cpu puts a group's shared factors in its lanes, selected where the sets are few (tets: 7
-- with the padding's, hexes 2), gathered where many (tets in double): at blocks of part of a
-- vector, one (in single: 16 lanes, the block gcc once unrolled into branches) and two
do
  for _, c in ipairs({{cell = "tet", space = "P1"}, {cell = "hex", space = "Q1"}}) do
    local m = mesh.box{cells = {4, 5, 4}, cell = c.cell}
    local V = fe.space(m, c.space)
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    local w = V:interpolate("x[0] * x[1] + sin(x[2])")
    for _, prec in ipairs({"double", "single"}) do
      for _, block in ipairs({4, 16, 32}) do
        pair(A, w, {backend = "cpu", precision = prec, strategy = "transpose", block = block}, "apply",
             prec == "double" and 1e-11 or 1e-4, ("cpu %s %s block %d"):format(prec, c.space, block))
      end
    end
  end
end

-- element matrices read the shared factors too
do
  local m = mesh.box{cells = {4, 4, 4}, cell = "tet"}
  local V = fe.space(m, "P2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
  local Ks = A:element_matrices{geometry = "stored"}
  local Ku = A:element_matrices{geometry = "unshared"}
  local worst = 0
  for c = 1, Ks.ncells, 7 do
    local a, b = Ks:get(c), Ku:get(c)
    for i = 1, #a do
      for j = 1, #a do worst = math.max(worst, math.abs(a[i][j] - b[i][j])) end
    end
  end
  check(worst <= 1e-12, "element matrices: shared and unshared differ by %.3g", worst)
end

-- a distorted box has no congruent cells: the factors stay a set a point
do
  local m = mesh.box{cells = {4, 4, 4}, cell = "hex", distort = 0.3}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local _, r = A:apply(V:interpolate(1), {strategy = "sumfact", geometry = "stored", fold = false})
  check(r.why:find("stored per point", 1, true), "distorted Q2: %s", r.why)
  -- by default its apply folds them into 6 words a point, fewer than the 10 factors
  _, r = A:apply(V:interpolate(1), {strategy = "sumfact"})
  check(r.why:find("folded per point: 6 words", 1, true), "distorted Q2 by default: %s", r.why)
end

T.done()
