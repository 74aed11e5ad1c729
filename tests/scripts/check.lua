-- Helpers shared by the Lua test scripts (not a test itself: scripts/run-tests.sh runs only
-- test_*.lua, and run alone this file defines the helpers and returns them, checking nothing).
-- Load it from a script with
--   local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
-- Every failure is a Lua error at the line of the test that made it, so felab exits nonzero.

local T = {count = 0} -- count: checks made so far (check and expect_error)

-- cond must hold; the message is fmt, formatted with the remaining arguments when there are any
-- (so a message with a % in it can be passed alone).
function T.check(cond, fmt, ...)
  T.count = T.count + 1
  if not cond then
    local msg = select("#", ...) > 0 and string.format(fmt, ...) or tostring(fmt or "check failed")
    error(msg, 2)
  end
  return cond
end

-- fn must raise an error whose message contains every plain-text pattern given; returns the
-- message.
function T.expect_error(fn, ...)
  T.count = T.count + 1
  local ok, msg = pcall(fn)
  if ok then error("expected an error, but the call succeeded", 2) end
  msg = tostring(msg)
  for _, pattern in ipairs({...}) do
    if not string.find(msg, pattern, 1, true) then
      error(string.format("error message lacks %q:\n  %s", pattern, msg), 2)
    end
  end
  return msg
end

-- Whether the numbers a and b agree to the relative tolerance tol (of the larger magnitude;
-- two zeros agree).
function T.close(a, b, tol)
  return math.abs(a - b) <= tol * math.max(math.abs(a), math.abs(b))
end

-- |a - b| / |b| for two vectors of one space.
function T.rel_diff(a, b)
  return a:copy():axpy(-1, b):norm() / b:norm()
end

-- max |a_i - b_i| for two vectors of one space.
function T.max_abs_diff(a, b)
  local d = a:copy():axpy(-1, b)
  return math.max(math.abs(d:max()), math.abs(d:min()))
end

-- The entry of device.list() for a backend, or nil when it is not compiled in.
function T.device(name)
  for _, d in ipairs(device.list()) do
    if d.name == name then return d end
  end
  return nil
end

-- max |a_i - b_i| / max |a_i| for two vectors of one space.
function T.max_rel_diff(a, b)
  return T.max_abs_diff(a, b) / math.max(math.abs(a:max()), math.abs(a:min()))
end

-- The backends a test runs on: cpu, and opencl where it is available here (and cuda, where
-- it is available, when with_cuda is true).
function T.backends(with_cuda)
  local list = {"cpu"}
  for _, name in ipairs(with_cuda and {"opencl", "cuda"} or {"opencl"}) do
    local d = T.device(name)
    if d and d.available then list[#list + 1] = name end
  end
  return list
end

-- Whether the opencl backend here runs on NVIDIA's driver (its known limits differ).
function T.nvidia_opencl()
  local d = T.device("opencl")
  return d ~= nil and d.available and tostring(d.device):find("NVIDIA") ~= nil
end

-- The manufactured solution of the convergence tests: u = x(1-x) y(1-y) z(1-z) exp(x), zero
-- on the unit cube's boundary and in no finite element space; T.mms_source is -laplacian u as
-- C: -(d2/dx2 of x(1-x)e^x) = (x^2 + 3x) e^x, times the other factors, and so on.
function T.mms_exact(x)
  local a, b, c = x[1], x[2], x[3]
  return a * (1 - a) * b * (1 - b) * c * (1 - c) * math.exp(a)
end
T.mms_source = "exp(x[0]) * (x[0]*(x[0] + 3) * x[1]*(1 - x[1]) * x[2]*(1 - x[2])" ..
               " + 2 * x[0]*(1 - x[0]) * (x[2]*(1 - x[2]) + x[1]*(1 - x[1])))"

-- A nonlinear law with an auxiliary field on V's mesh: exercises NEED_U, NEED_X, NEED_F.
function T.nonlinear(V)
  local k = V:interpolate(function(x) return 1 + x[1] * x[2] end)
  return physics.new{
    f1 = function(u, du, x, a) return (a.k + u * u) * du end,
    f0 = function(u, du, x) return u * u * u - math.sin(3 * x[1]) end,
    fields = {k = k}}
end

-- The assembly tests' cases on a tet box and a hex box: {name, mesh, space, physics,
-- dirichlet}: P1 with kappa(x), P2, Q1, P1^3 elasticity with one side fixed (rows and columns
-- partly constrained), P2 with kappa per region.
function T.assembly_cases(box, hex)
  return {
    {"P1 tets, Dirichlet", box, "P1", physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}, "all"},
    {"P2 tets", box, "P2", physics.poisson{kappa = 1, source = 1}, nil},
    {"Q1 hexes, Dirichlet", hex, "Q1", physics.poisson{kappa = 2, source = 1}, "all"},
    {"P1^3 elasticity, xmin fixed", box, {family = "P", order = 1, components = 3},
     physics.elasticity{E = 10, nu = 0.3}, {"xmin"}},
    {"P2 tets, kappa per region", box, "P2", physics.poisson{kappa = {domain = 2.5}, source = 1},
     "all"},
  }
end

-- The felab program running this script (for tests that start child processes).
function T.exe()
  local i = 0
  while arg[i - 1] do i = i - 1 end
  return arg[i]
end

-- The closing line of a script: its name (by default the script's file name without .lua)
-- and the number of checks made. scripts/run-one-test.sh counts a script as passed only when
-- it printed this line.
-- Why amg cannot run here (felab built without hypre: the message, printed as skipped), or
-- nil; any other failure of a tiny amg setup fails the check.
function T.amg_missing()
  local probe = fe.operator(fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P1"),
                            physics.poisson{}, {dirichlet = "all"})
  local ok, msg = pcall(solve.precond, probe, {pc = "amg"})
  if not ok and tostring(msg):find("built without hypre", 1, true) then
    T.skip(msg)
    return msg
  end
  T.check(ok, msg)
  return nil
end

-- mesh.load(path, opts) where the Gmsh SDK is, else nil with the skip printed (any other
-- failure fails the check).
function T.gmsh_mesh(path, opts)
  local ok, m = pcall(mesh.load, path, opts)
  if not ok and tostring(m):find("Gmsh SDK", 1, true) then
    T.skip(path .. ": needs the Gmsh SDK")
    return nil
  end
  T.check(ok, m)
  return m
end

-- The cpu's double-precision calibration: the stored one, else measured now.
function T.cpu_calibration()
  local info = device.info("cpu")
  local c = info.calibration and info.calibration.double
  if c then return c end
  device.calibrate("cpu", "double")
  return device.info("cpu").calibration.double
end

function T.done(name)
  name = name or (arg and arg[0] or "?"):match("([^/]*)$"):gsub("%.lua$", "")
  print(string.format("%s: %d checks passed", name, T.count))
end

-- Say that a part of a script was skipped and why, on one line "skipped: <why>". A script that
-- can check nothing here (no cuda device, no Gmsh SDK) says so once and returns before T.done:
-- scripts/run-one-test.sh counts it as skipped. A script that skips only a part says so for
-- that part and goes on to T.done: it counts as passed, the part listed in the summary.
function T.skip(why)
  print("skipped: " .. (tostring(why):gsub("%s*\n%s*", " ")))
end

return T
