-- solve.newton from Lua: on linear physics (Poisson) Newton takes one step and finds CG's
-- solution, from the boundary values or from an initial guess x0, on cpu and on opencl where
-- it runs; info carries iterations, converged, reason, history, linear_iterations, report;
-- on the p-Laplacian it converges quadratically (observed order >= 1.8) on every backend;
-- bad options are clear errors naming the option, and the session goes on after each.
-- Run: build/felab tests/scripts/test_newton.lua (exits nonzero on failure).

local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error, max_abs_diff = T.check, T.expect_error, T.max_abs_diff

local m = mesh.box{cells = {6, 6, 6}, cell = "tet", distort = 0.2}
local V = fe.space(m, "P1")
local pde = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}
local A = fe.operator(V, pde, {dirichlet = {"xmin", "xmax"}, value = 0.5})
local ucg = solve.cg(A, {rtol = 1e-12})
local scale = math.max(math.abs(ucg:max()), math.abs(ucg:min()))

-- one step on linear physics, with the info of a solve
local function check_one_step(u, info, what)
  check(info.converged, what .. ": not converged (" .. info.reason .. ")")
  check(info.iterations == 1, what .. ": linear physics took " .. info.iterations .. " steps")
  check(info.reason == "rtol" or info.reason == "atol", what .. ": reason " .. info.reason)
  check(#info.history == 2, what .. ": history has " .. #info.history .. " entries")
  check(info.history[2] <= 1e-10 * info.history[1], what .. ": |r1| / |r0| too large")
  check(math.type(info.linear_iterations) == "integer" and info.linear_iterations > 1,
         what .. ": linear_iterations " .. tostring(info.linear_iterations))
  check(info.report.iterations == 1 and info.report.flops > 0, what .. ": report")
  local d = max_abs_diff(u, ucg)
  check(d <= 1e-9 * scale, ("%s: |u_newton - u_cg| = %.3g"):format(what, d))
  print(("%-22s 1 step, %3d CG iterations, |r| %.3e -> %.3e, |u - u_cg| = %.1e  ok"):format(
        what, info.linear_iterations, info.history[1], info.history[2], d))
end

local u, info = solve.newton(A)
check_one_step(u, info, "defaults")
u, info = solve.newton(A, {linear = "cg", pc = "none", rtol = 1e-10, monitor = true})
check_one_step(u, info, "pc = none, monitor")
u, info = solve.newton(A, {x0 = V:interpolate(function(x) return x[2] end), maxit = 5})
check_one_step(u, info, "x0 off the boundary")
u, info = solve.newton(A, {linesearch = "none", linear_rtol = 1e-12, linear_maxit = 500,
                           backend = "cpu", precision = "double"})
check_one_step(u, info, "linesearch = none")
check(#u == V.ndofs and u:get(1) == u:get(1), "the solution is a vector of the space")

-- opencl where it runs
local ocl = T.device("opencl")
if ocl and ocl.available then
  u, info = solve.newton(A, {backend = "opencl", precision = "double"})
  check_one_step(u:to("cpu"), info, "opencl")
  check(info.report.backend == "opencl", "the report names the backend")
else
  T.skip("opencl: " .. (ocl and ocl.reason or "not compiled in"))
end

-- a solve that stops early is a result, not an error
u, info = solve.newton(A, {maxit = 0})
check(not info.converged and info.reason == "maxit" and info.iterations == 0, info.reason)
check(#info.history == 1 and info.linear_iterations == 0, "maxit = 0: history and linear_iterations")

-- quadratic convergence on nonlinear physics: the regularized p-Laplacian (p = 3, a square
-- root of |grad u|^2 in the law) on P2 tets. The observed order of step k is
-- log(r[k+1] / r[k]) / log(r[k] / r[k-1]) for successive residual norms; it is measured on
-- the last step whose residual is still well above the rounding floor the solve ends on.
local function observed_order(h)
  local floor, order = h[#h], nil
  for k = 2, #h - 1 do
    if h[k + 1] > 100 * floor then order = math.log(h[k + 1] / h[k]) / math.log(h[k] / h[k - 1]) end
  end
  return order
end
local mp = mesh.box{cells = {4, 4, 4}, cell = "tet", distort = 0.2}
local VP = fe.space(mp, "P2")
local plap = physics.p_laplacian{p = 3, eps = 0.1, source = 10}
check(plap.nonlinear, "the p-Laplacian is nonlinear")
local AP = fe.operator(VP, plap, {dirichlet = "all", value = 0})
local uplap = {}
for _, be in ipairs(T.backends()) do
  local up, pinfo = solve.newton(AP, {rtol = 1e-13, maxit = 30, backend = be, precision = "double"})
  local h = pinfo.history
  check(pinfo.converged, "%s: p-Laplacian Newton did not converge (%s after %d steps)", be, pinfo.reason,
        pinfo.iterations)
  check(pinfo.iterations >= 3 and #h == pinfo.iterations + 1,
        "%s: %d steps, %d history entries: too few to see an order", be, pinfo.iterations, #h)
  local order = observed_order(h)
  check(order and order >= 1.8, "%s: observed order of Newton %s < 1.8", be, tostring(order))
  local hs = {}
  for i = 1, #h do hs[i] = ("%.1e"):format(h[i]) end
  print(("%-22s %d steps, |r|: %s; observed order %.2f  ok"):format("p-Laplacian " .. be, pinfo.iterations,
        table.concat(hs, " "), order))
  uplap[#uplap + 1] = up:to("cpu")
end
if #uplap > 1 then
  local d = max_abs_diff(uplap[1], uplap[2])
  check(d <= 1e-10 * uplap[1]:max(), "p-Laplacian: cpu and opencl solutions differ by %.3g", d)
end

-- bad options: the message names the function and the option
local function still_works()
  local w, i = solve.newton(A, {maxit = 3})
  check(i.converged and i.iterations == 1 and max_abs_diff(w, ucg) <= 1e-9 * scale,
         "solve.newton broken after an error")
end
expect_error(function() return solve.newton(A, {rtoll = 1e-8}) end, "solve.newton", "rtoll",
             "rtol")
expect_error(function() return solve.newton(A, {linear = "lu"}) end, "solve.newton",
             "lu", "bicgstab")
expect_error(function() return solve.newton(A, {linear = 3}) end, "solve.newton", "linear")
expect_error(function() return solve.newton(A, {pc = "ilu"}) end, "ilu", "jacobi")
expect_error(function() return solve.newton(A, {linesearch = "cubic"}) end, "cubic",
             "backtrack")
still_works()
expect_error(function() return solve.newton(A, {rtol = -1}) end, "solve.newton", "rtol")
expect_error(function() return solve.newton(A, {atol = "small"}) end, "solve.newton", "atol",
             "string")
expect_error(function() return solve.newton(A, {linear_rtol = 2}) end, "linear_rtol")
expect_error(function() return solve.newton(A, {maxit = 1.5}) end, "solve.newton", "maxit",
             "1.5")
expect_error(function() return solve.newton(A, {linear_maxit = -1}) end, "solve.newton",
             "linear_maxit")
expect_error(function() return solve.newton(A, {monitor = "yes"}) end, "solve.newton", "monitor")
expect_error(function() return solve.newton(A, {x0 = 3}) end, "solve.newton", "x0", "vector")
expect_error(function() return solve.newton(A, {backend = "nope"}) end, "nope", "cpu")
expect_error(function() return solve.newton(A, {precision = "half"}) end, "half", "single")
still_works()
expect_error(function() return solve.newton(V) end, "solve.newton", "operator", "space")
expect_error(function() return solve.newton() end, "solve.newton", "operator")
expect_error(function() return solve.newton(A, ucg) end, "solve.newton", "argument 2",
             "options table", "x0")
expect_error(function() return solve.newton(A, "cg") end, "solve.newton", "argument 2", "string")
local small = fe.space(mesh.box{cells = {2, 2, 2}}, "P1"):interpolate(0)
expect_error(function() return solve.newton(A, {x0 = small}) end, tostring(#small),
             tostring(V.ndofs))
still_works()

T.done()
