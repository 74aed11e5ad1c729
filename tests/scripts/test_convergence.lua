-- P1 (tets) and Q1 (hexes) manufactured-solution Poisson converges at rate 2 in L2 over
-- three refinements, on cpu and on opencl.
-- u = x(1-x) y(1-y) z(1-z) exp(x): zero on the boundary, not a discrete eigenvector.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local exact, source = T.mms_exact, T.mms_source

local function errors(cell, space, backend)
  local errs = {}
  for i, n in ipairs({4, 8, 16}) do
    local m = mesh.box{cells = {n, n, n}, cell = cell}
    local A = fe.operator(fe.space(m, space), physics.poisson{kappa = 1, source = source},
                          {dirichlet = "all", value = 0})
    local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-11, maxit = 2000, backend = backend})
    check(info.converged, ("%s %s n=%d: cg did not converge (%s)"):format(space, backend, n, info.reason))
    errs[i] = u:error(exact, "L2")
  end
  return errs
end

local failures = 0
for _, backend in ipairs({"cpu", "opencl"}) do
  for _, case in ipairs({{"tet", "P1"}, {"hex", "Q1"}}) do
    local e = errors(case[1], case[2], backend)
    local r1, r2 = math.log(e[1] / e[2], 2), math.log(e[2] / e[3], 2)
    local ok = r1 > 1.8 and r1 < 2.3 and r2 > 1.8 and r2 < 2.3
    print(("%-6s %s  L2 errors %.3e %.3e %.3e  rates %.3f %.3f  %s"):format(backend, case[2], e[1],
          e[2], e[3], r1, r2, ok and "ok" or "FAILED"))
    if not ok then failures = failures + 1 end
  end
end
check(failures == 0, failures .. " convergence case(s) failed")

-- 2D: P1 on triangles and Q1 on quads, u = sin(pi x) y (1 - y)
local function exact2(x) return math.sin(math.pi * x[1]) * x[2] * (1 - x[2]) end
local source2 = "M_PI*M_PI*sin(M_PI*x[0])*x[1]*(1 - x[1]) + 2*sin(M_PI*x[0])"
for _, backend in ipairs({"cpu", "opencl"}) do
  for _, case in ipairs({{"tri", "P1"}, {"quad", "Q1"}}) do
    local e = {}
    for i, n in ipairs({8, 16, 32}) do
      local m = mesh.box{cells = {n, n}, cell = case[1]}
      local A = fe.operator(fe.space(m, case[2]), physics.poisson{kappa = 1, source = source2},
                            {dirichlet = "all"})
      local u, info = solve.cg(A, {rtol = 1e-12, backend = backend})
      check(info.converged)
      e[i] = u:error(exact2, "L2")
    end
    local r1, r2 = math.log(e[1] / e[2], 2), math.log(e[2] / e[3], 2)
    print(("%-6s %s (2D)  rates %.3f %.3f"):format(backend, case[2], r1, r2))
    check(r1 > 1.8 and r1 < 2.3 and r2 > 1.8 and r2 < 2.3, "2D convergence rate off")
  end
end
-- Nonlinear physics at its default rule (the linearization's: k + 1 Gauss points a direction
-- on Q2): -lap u + u^3 = f with u = sin(pi x) sin(pi y), Newton to 1e-11, converges at rate 3
-- in L2 on quads, and the rule exact for u^3 v gives the same errors to 1% (the quadrature's
-- error far below the discretization's)
local function sxy(x) return math.sin(math.pi * x[1]) * math.sin(math.pi * x[2]) end
local cubic = physics.new{f1 = function(u, du) return du end,
                          f0 = function(u, du, x)
                            local s = math.sin(math.pi * x[1]) * math.sin(math.pi * x[2])
                            return u^3 - (2 * math.pi^2 * s + s^3)
                          end}
local en, ex = {}, {}
for i, n in ipairs({4, 8, 16}) do
  local V = fe.space(mesh.box{cells = {n, n}, cell = "quad"}, "Q2")
  for _, q in ipairs({false, true}) do
    local A = fe.operator(V, cubic, {dirichlet = "all", quadrature = q and {degree = 8} or nil})
    local u, info = solve.newton(A, {backend = "cpu", rtol = 1e-11})
    check(info.converged, "u^3 Q2 n=%d: newton %s", n, info.reason)
    local e = u:error(sxy, "L2")
    if q then ex[i] = e else en[i] = e end
  end
end
local r1, r2 = math.log(en[1] / en[2], 2), math.log(en[2] / en[3], 2)
print(("cpu    Q2 u^3 (2D)  L2 errors %.3e %.3e %.3e  rates %.3f %.3f; exact rule %.3e %.3e %.3e"):format(
      en[1], en[2], en[3], r1, r2, ex[1], ex[2], ex[3]))
check(r1 > 2.7 and r1 < 3.4 and r2 > 2.7 and r2 < 3.4, "u^3 Q2: rates %.3f %.3f", r1, r2)
for i = 1, 3 do
  check(math.abs(en[i] - ex[i]) < 0.01 * ex[i], "u^3 Q2 n=%d: default rule %.4e, exact %.4e",
        4 * 2^(i - 1), en[i], ex[i])
end
T.done()
