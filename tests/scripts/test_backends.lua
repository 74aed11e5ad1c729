-- The cpu and opencl backends agree: residual, Jacobian action and diagonal to 1e-12
-- relative in double and 1e-5 in single, on a distorted tet mesh and a distorted hex mesh,
-- with a variable coefficient and a source that read the coordinates.
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
assert(failures == 0, failures .. " comparison(s) failed")
