-- Coefficients typed as C expressions mean what they say (issue 44): their numbers are reals
-- ("1/2" is 0.5, not C's 0), a coefficient that is not finite where it is evaluated is a named
-- error before any solve (and the next statement runs), and raw C bodies keep C's integers.
-- Run: build/felab tests/scripts/test_expr_reals.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
local V = fe.space(m, "Q1")

-- the solution with physics pde (Dirichlet 0, CG to rounding)
local function solve_with(pde)
  local u, info = solve.cg(fe.operator(V, pde, {dirichlet = "all"}), {rtol = 1e-13, maxit = 500})
  check(info.converged, "%s: cg did not converge (%s)", tostring(pde), tostring(info.reason))
  return u
end

-- "1/2" is 0.5, and "1/2 + x[3 - 3]" is 0.5 + x[0]: C's integer division made them 0 and x[0];
-- an index stays an integer
local uh = solve_with(physics.poisson{kappa = "1/2", source = "1/2"})
local un = solve_with(physics.poisson{kappa = 0.5, source = 0.5})
local d = T.rel_diff(uh, un)
check(d < 1e-12, "kappa = \"1/2\" vs 0.5: solutions differ by %.3g", d)
print(("  kappa = \"1/2\" gives kappa = 0.5's solution: %.1e"):format(d))
local ux = solve_with(physics.poisson{kappa = "1/2 + x[3 - 3]", source = 1})
local uf = solve_with(physics.poisson{kappa = function(x) return 0.5 + x[1] end, source = 1})
d = T.rel_diff(ux, uf)
check(d < 1e-12, "kappa = \"1/2 + x[3 - 3]\" vs 0.5 + x[0]: solutions differ by %.3g", d)
print(("  kappa = \"1/2 + x[3 - 3]\" gives 0.5 + x[0]'s: %.1e"):format(d))

-- not finite: a named error, before any solve, and the script goes on
local errors = {
  {"1/0", "kappa = \"1/0\" is inf everywhere"},
  {"0/0", "kappa = \"0/0\" is nan everywhere"},
  {"log(-1)", "kappa = \"log(-1)\" is nan everywhere"},
  {"-1/0", "is -inf everywhere"},
  {"1e400", "is inf everywhere"},
}
for _, e in ipairs(errors) do
  -- not a tail call, which would leave no line of this file on the stack
  expect_error(function() local p = physics.poisson{kappa = e[1], source = 1}; return p end,
               "test_expr_reals.lua:", e[2])
end
expect_error(function() local p = physics.reaction_diffusion{c = "1/0"}; return p end,
             "test_expr_reals.lua:", "c = \"1/0\" is inf everywhere")
-- of x: at the quadrature points of the operator, with the point and the cell
expect_error(function() return fe.operator(V, physics.poisson{kappa = "sqrt(x[0] - 2)"}) end,
             "test_expr_reals.lua:", "kappa = \"sqrt(x[0] - 2)\" is nan at x = (", "cell 0")
expect_error(function() return fe.operator(V, physics.poisson{kappa = "1/(x[0] - 0.5)"}) end,
             "is inf at x = (0.5, ", "cell 1 ")
expect_error(function()
  return fe.operator(V, physics.poisson{source = "x[1] > 0.9 ? log(x[1] - 1) : 0"})
end, "s = \"x[1] > 0.9 ? log(x[1] - 1) : 0\" is nan at x = (", "cell 6 ")
-- a function of x written in Lua is a coefficient too, and so is a number Lua made infinite
expect_error(function()
  return fe.operator(V, physics.poisson{kappa = function(x) return math.log(x[1] - 0.5) end})
end, "the coefficient log(x[0] - 0.5) is nan at x = (")
expect_error(function() return physics.poisson{kappa = function() return 1 / 0 end} end,
             "physics poisson: a number in it is inf everywhere")
-- 1 / (x - x) folds to the constant quotient 1 / 0, which C divided as integers (SIGILL)
expect_error(function() return physics.new{f1 = function(u, du, x) return 1 / (x[1] - x[1]) * du end} end,
             "the coefficient 1 / 0 is inf everywhere")
-- finite but singular on the boundary: the quadrature points are inside, so it is no error
check(fe.operator(V, physics.poisson{kappa = "1/sqrt(x[0])"}), "kappa singular on a face is no error")
-- but with the rule asked for, GLL, whose points lie on the faces, it is
expect_error(function()
  return fe.operator(V, physics.poisson{kappa = "1/sqrt(x[0])"}, {quadrature = {rule = "gll"}})
end, "kappa = \"1/sqrt(x[0])\" is inf at x = (0")
-- beyond the host's reader (an integer cast and %): no check, no error
check(fe.operator(V, physics.poisson{kappa = "1 + (int)(2 * x[0]) % 2"}), "an integer operator")
print("  1/0, 0/0, log(-1), nan at a point of x: named errors; the script went on")

-- finite in double but past single precision's largest value (3.4e38): an operator that runs
-- in single precision refuses it by name (value, point and cell), whatever its strategy, where
-- its kernels would compute inf; the same operator in double runs
do
  local u1 = V:interpolate(function(x) return x[1] end)
  local big = fe.operator(V, physics.poisson{kappa = "1e39 + x[0]", source = 1}, {dirichlet = "all"})
  for _, st in ipairs({"transpose", "csr"}) do
    expect_error(function() return big:apply(u1, {precision = "single", strategy = st}) end,
                 "physics poisson: kappa = \"1e39 + x[0]\" is 1e+39 at x = (", "), cell 0 (a " ..
                 "quadrature point), beyond single precision's largest value (3.40282e+38): the " ..
                 "operator runs in single precision")
  end
  expect_error(function() return big:residual(u1, {precision = "single"}) end,
               "beyond single precision's largest value")
  local y = big:apply(u1, {precision = "double"})
  check(#y == V.ndofs and y:norm() > 1e38 and y:norm() < math.huge,
        "kappa = 1e39 + x[0] in double: |A u| = %s", tostring(y:norm()))
  -- a constant coefficient: "everywhere"; one that fits single precision is no error
  local flat = fe.operator(V, physics.poisson{kappa = "-2e39", source = 1}, {dirichlet = "all"})
  expect_error(function() return flat:assemble{precision = "single"} end,
               "physics poisson: kappa = \"-2e39\" is -2e+39 everywhere, beyond single precision")
  local fits = fe.operator(V, physics.poisson{kappa = "3e38", source = 1}, {dirichlet = "all"})
  check(fits:apply(u1, {precision = "single"}), "kappa = 3e38 fits single precision")
  print("  kappa = 1e39 + x[0] in single precision: a named error; in double it runs")
end

-- V:interpolate's expressions too: "1/2 + x[0]" is 0.5 + x[0]
do
  local f = V:interpolate("1/2 + x[0]")
  local g = V:interpolate(function(x) return 0.5 + x[1] end)
  local e = T.rel_diff(f, g)
  check(e < 1e-14, "V:interpolate(\"1/2 + x[0]\") differs from 0.5 + x[0] by %.3g", e)
end

-- raw C bodies are C as written: 5 / 2 is 2 there, so with source 1 this is kappa = 2, whose
-- solution is kappa = 0.5, source 0.5's halved
local raw = physics.new{components = 1, f0 = "f0[0] = -1.0;",
                        f1 = "const int k = 5 / 2; for (int d = 0; d < DIM; d++) f1[d] = k * du[d];",
                        g3 = "const int k = 5 / 2; for (int d = 0; d < DIM; d++) g3[d * DIM + d] = k;"}
local ur = solve_with(raw)
d = T.rel_diff(ur, un:copy():axpy(-0.5, un))
check(d < 1e-12, "raw C's 5 / 2 is the integer 2: solutions differ by %.3g from kappa = 2's", d)
print(("  raw C keeps C's integers (5 / 2 = 2): %.1e"):format(d))
T.done()
