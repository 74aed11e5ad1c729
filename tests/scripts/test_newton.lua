-- solve.newton from Lua: on linear physics (Poisson) Newton takes one step and finds CG's
-- solution, from the boundary values or from an initial guess x0, on cpu and on opencl where
-- it runs; info carries iterations, converged, reason, history, linear_iterations, report;
-- bad options are clear errors naming the option, and the session goes on after each.
-- Run: build/felab tests/scripts/test_newton.lua (exits nonzero on failure).

local nchecks = 0

-- fn must raise an error whose message contains every plain-text pattern given.
local function expect_error(fn, ...)
  local ok, msg = pcall(fn)
  assert(not ok, "expected an error, but the call succeeded")
  msg = tostring(msg)
  for _, pattern in ipairs({...}) do
    if not string.find(msg, pattern, 1, true) then
      error(string.format("error message lacks %q:\n  %s", pattern, msg), 2)
    end
  end
  nchecks = nchecks + 1
  return msg
end

local function max_abs_diff(a, b)
  local d = a:copy():axpy(-1, b)
  return math.max(math.abs(d:max()), math.abs(d:min()))
end

local m = mesh.box{cells = {6, 6, 6}, cell = "tet", distort = 0.2}
local V = fe.space(m, "P1")
local pde = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}
local A = fe.operator(V, pde, {dirichlet = {"xmin", "xmax"}, value = 0.5})
local ucg = solve.cg(A, {rtol = 1e-12})
local scale = math.max(math.abs(ucg:max()), math.abs(ucg:min()))

-- one step on linear physics, with the info of a solve
local function check_one_step(u, info, what)
  assert(info.converged, what .. ": not converged (" .. info.reason .. ")")
  assert(info.iterations == 1, what .. ": linear physics took " .. info.iterations .. " steps")
  assert(info.reason == "rtol" or info.reason == "atol", what .. ": reason " .. info.reason)
  assert(#info.history == 2, what .. ": history has " .. #info.history .. " entries")
  assert(info.history[2] <= 1e-10 * info.history[1], what .. ": |r1| / |r0| too large")
  assert(math.type(info.linear_iterations) == "integer" and info.linear_iterations > 1,
         what .. ": linear_iterations " .. tostring(info.linear_iterations))
  assert(info.report.iterations == 1 and info.report.flops > 0, what .. ": report")
  local d = max_abs_diff(u, ucg)
  assert(d <= 1e-9 * scale, ("%s: |u_newton - u_cg| = %.3g"):format(what, d))
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
assert(#u == V.ndofs and u:get(1) == u:get(1), "the solution is a vector of the space")

-- opencl where it runs
local ocl
for _, d in ipairs(device.list()) do
  if d.name == "opencl" then ocl = d end
end
if ocl and ocl.available then
  u, info = solve.newton(A, {backend = "opencl", precision = "double"})
  check_one_step(u:to("cpu"), info, "opencl")
  assert(info.report.backend == "opencl", "the report names the backend")
else
  print("skip opencl: " .. (ocl and ocl.reason or "not compiled in"))
end

-- a solve that stops early is a result, not an error
u, info = solve.newton(A, {maxit = 0})
assert(not info.converged and info.reason == "maxit" and info.iterations == 0, info.reason)
assert(#info.history == 1 and info.linear_iterations == 0)

-- bad options: the message names the function and the option
local function still_works()
  local w, i = solve.newton(A, {maxit = 3})
  assert(i.converged and i.iterations == 1 and max_abs_diff(w, ucg) <= 1e-9 * scale,
         "solve.newton broken after an error")
end
expect_error(function() return solve.newton(A, {rtoll = 1e-8}) end, "solve.newton", "rtoll",
             "rtol")
expect_error(function() return solve.newton(A, {linear = "gmres"}) end, "solve.newton",
             "gmres", "only \"cg\"")
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

print(string.format("test_newton: %d error checks passed", nchecks))
