-- The cpu and opencl backends agree: residual, Jacobian action and diagonal to 1e-12
-- relative in double and 1e-5 in single, on a distorted tet mesh and a distorted hex mesh,
-- with a variable coefficient and a source that read the coordinates. Strategy "transpose"
-- gives the same with the geometry stored or made from the vertices in the kernel (P1, Q1;
-- the padded group included), and refuses "vertices" on P2.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local function rel_diff(a, b)
  local d = a:copy():axpy(-1, b)
  return math.max(math.abs(d:max()), math.abs(d:min())) /
         math.max(math.abs(a:max()), math.abs(a:min()))
end

local pde = physics.poisson{kappa = "1 + x[0]*x[1]", source = "sin(3*x[0]) + x[2]"}
local failures = 0
for _, cell in ipairs({"tet", "hex"}) do
  local m = mesh.box{cells = {6, 5, 4}, cell = cell, distort = 0.3}
  local V = fe.space(m, cell == "tet" and "P1" or "Q1")
  local A = fe.operator(V, pde, {dirichlet = {"xmin", "ymax"}, value = 0.5})
  local u = V:interpolate(function(x) return math.cos(x[1]) * x[2] + x[3] end)
  local w = V:interpolate(function(x) return x[1] - 2 * x[2] * x[3] end)
  for _, prec in ipairs({"double", "single"}) do
    local tol = prec == "double" and 1e-12 or 1e-5
    local function both(f)
      local a = f({backend = "cpu", precision = prec})
      local b = f({backend = "opencl", precision = prec})
      return rel_diff(a:to("cpu", "double"), b:to("cpu", "double"))
    end
    local checks = {
      residual = both(function(o) return (A:residual(u, o)) end),
      apply = both(function(o) o.at = u; return (A:apply(w, o)) end),
      diagonal = both(function(o) return (A:diagonal(o)) end),
    }
    for name, d in pairs(checks) do
      local ok = d <= tol
      print(("%s %-6s %-8s cpu vs opencl: %.2e (tolerance %.0e) %s"):format(cell, prec, name, d,
            tol, ok and "ok" or "FAILED"))
      if not ok then failures = failures + 1 end
    end
  end
end
check(failures == 0, failures .. " comparison(s) failed")

-- transpose: the factors stored (per cell or per point) = made from the vertices, every action
for _, c in ipairs({{"tet", "P1", {3, 2, 2}}, {"hex", "Q1", {3, 3, 2}}, {"tri", "P1", {4, 3}},
                    {"quad", "Q1", {5, 2}}}) do
  for _, distort in ipairs({0, 0.3}) do
    local V = fe.space(mesh.box{cells = c[3], cell = c[1], distort = distort}, c[2])
    local A = fe.operator(V, pde, {dirichlet = {"xmin"}})
    local u = V:interpolate(function(x) return x[1] * (1 - x[2]) + 0.3 * x[1] * x[1] end)
    for _, backend in ipairs({"cpu", "opencl"}) do
      local function both(f)
        local o = {backend = backend, strategy = "transpose", fold = false} -- the factors themselves
        o.geometry = "stored"
        local a = f(o)
        o.geometry = "vertices"
        local b, rep = f(o)
        check(rep.why:find("geometry from the vertices", 1, true), rep.why)
        return rel_diff(a:to("cpu", "double"), b:to("cpu", "double"))
      end
      local d = math.max(both(function(o) return A:residual(u, o) end),
                         both(function(o) o.at = u; return A:apply(u, o) end),
                         both(function(o) return A:diagonal(o) end))
      check(d <= 1e-12, ("transpose %s %s distort %g %s: stored vs vertices %.1e"):format(
             c[1], c[2], distort, backend, d))
    end
  end
end
local ok, err = pcall(function()
  local V = fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P2")
  return fe.operator(V, pde):apply(V:interpolate(1), {strategy = "transpose", geometry = "vertices"})
end)
check(not ok and tostring(err):find("needs first-order cells on straight geometry", 1, true), tostring(err))
print("transpose: geometry stored = from the vertices (P1, Q1; cpu, opencl) ok")

-- Repeated calls agree: bit for bit on cpu (colored groups, fixed order), to rounding on
-- opencl (atomic adds land in any order). A race between work groups would lose whole
-- contributions; the padded last group is included (162 cells, 32-cell blocks).
local m = mesh.box{cells = {3, 3, 3}, cell = "tet"}
local V = fe.space(m, "P1")
local u = V:interpolate(function(x) return x[1] + 2 * x[2] end)
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = {"xmin", "xmax"}})
for _, backend in ipairs({"cpu", "opencl"}) do
  local ref = A:residual(u, {backend = backend}):to("cpu")
  for i = 1, 20 do
    local r = A:residual(u, {backend = backend}):to("cpu")
    local d = r:copy():axpy(-1, ref)
    local tol = backend == "cpu" and 0 or 1e-14 * ref:norm()
    check(d:norm() <= tol,
           ("%s: residual call %d differs from the first by %g"):format(backend, i, d:norm()))
  end
  print(backend .. ": 20 repeated residuals agree ok")
end
T.done()
