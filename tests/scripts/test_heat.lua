-- solve.heat: backward Euler with one operator and one preconditioner over many steps.
-- Checks: the integral of u is conserved with Neumann boundaries and no source; the error
-- against an exact solution falls at order 1 in dt; the preconditioner is set up once; the
-- VTU frames and the .pvd index; a change of dt reaches the stored matrices (csr, ebe);
-- bad options are errors that name them. On cpu, and on opencl where it runs (not NVIDIA's:
-- the Q2 operator with u_old as a field needs 111 KB of constant tables, above its 64 KB;
-- the backend refuses it before the build, with the sizes: test_opencl_constants.lua).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local pi = math.pi

local backends = {"cpu"}
if T.device("opencl") and T.device("opencl").available and not T.nvidia_opencl() then
  backends[#backends + 1] = "opencl"
end

-- (a) conservation: zero source, natural (zero-flux) boundaries, 70 steps: sum_i r_i(u) =
-- c/dt (int u - int u_old) because the basis sums to 1, so int u stays put to the solver's
-- tolerance.
for _, be in ipairs(backends) do
  local m = mesh.box{cells = {3, 3, 3}, cell = "hex", distort = 0.2}
  local V = fe.space(m, "Q2")
  local u0 = V:interpolate(function(x) return 1 + math.cos(pi * x[1]) * x[2] + x[3] ^ 2 end)
  local pde = physics.heat{c = 2, kappa = 0.5, dt = 0.02, u_old = u0}
  local A = fe.operator(V, pde)
  local I0 = fe.integral(u0)
  local u, info = solve.heat(A, u0, {steps = 70, rtol = 1e-13, backend = be})
  check(info.steps == 70 and #info.iterations == 70, "%s: %d steps ran", be, info.steps)
  local I = fe.integral(u)
  check(math.abs(I - I0) <= 1e-10 * math.abs(I0), "%s: int u moved from %.15g to %.15g", be, I0, I)
  -- and it did diffuse: the solution is far from the start and near its mean
  check(u.backend == be, "%s: the solution lives on %s", be, u.backend)
  local d = T.rel_diff(u:to("cpu"), u0)
  check(d > 0.05, "%s: u barely changed (%g)", be, d)
  check(math.abs(info.t - 70 * 0.02) < 1e-12, "%s: final time %g", be, info.t)
  print(("%s: conservation over 70 steps: int u %.15g -> %.15g, %d CG iterations")
        :format(be, I0, I, info.total_iterations))
end

-- fe.integral is exact for the FE function: Q2 holds x y + 1 exactly
do
  local m = mesh.box{cells = {2, 3, 2}, cell = "hex", upper = {2, 1, 1}}
  local V = fe.space(m, "Q2")
  local I = fe.integral(V:interpolate(function(x) return 1 + x[1] * x[2] end))
  check(T.close(I, 2 + 1, 1e-13), "int (1 + x y) over [0,2]x[0,1]^2 = %.15g, expected 3", I)
  local W = fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, {family = "P", order = 2, components = 3})
  local a, b, c = fe.integral(W:interpolate(function(x) return {1, x[1], x[2] * x[3]} end))
  check(T.close(a, 1, 1e-13) and T.close(b, 0.5, 1e-13) and T.close(c, 0.25, 1e-13),
        "components: %g %g %g, expected 1 0.5 0.25", a, b, c)
  expect_error(function() fe.integral(3) end, "fe.integral", "argument 1")
end

-- (b) order 1 in time: u = exp(-3 pi^2 kappa t) sin(pi x) sin(pi y) sin(pi z), u = 0 on the
-- boundary; Q4 keeps the space error well below the time error.
do
  local kappa, tend = 0.1, 0.5
  local lam = 3 * pi * pi * kappa
  local function exact(t)
    return function(x) return math.exp(-lam * t) * math.sin(pi * x[1]) * math.sin(pi * x[2]) * math.sin(pi * x[3]) end
  end
  local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
  local V = fe.space(m, "Q4")
  local u0 = V:interpolate(exact(0))
  local pde = physics.heat{kappa = kappa, dt = 1, u_old = u0}
  local A = fe.operator(V, pde, {dirichlet = "all", value = 0})
  local errs = {}
  for i, n in ipairs{8, 16, 32} do
    local u = solve.heat(A, u0, {steps = n, dt = tend / n, rtol = 1e-12})
    errs[i] = u:error(exact(tend), "L2")
    check(pde.constants.dt == tend / n, "dt %g was not set on the physics", pde.constants.dt)
  end
  for i = 2, #errs do
    local order = math.log(errs[i - 1] / errs[i], 2)
    check(order > 0.8 and order < 1.2, "observed order %.3f (errors %g, %g)", order, errs[i - 1], errs[i])
    print(("time convergence: dt = %g: error %.4e, order %.3f"):format(tend / 2 ^ (i + 2), errs[i], order))
  end
end

-- (c) one preconditioner for every step: made once by solve.precond, applied once per CG
-- iteration plus once per solve; a pc by name is made once inside (info.precond).
do
  local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local u0 = V:interpolate(function(x) return x[1] * (1 - x[1]) end)
  local pde = physics.heat{kappa = 1, dt = 0.01, u_old = u0}
  local A = fe.operator(V, pde, {dirichlet = {"xmin", "xmax"}, value = 0})
  local P = solve.precond(A, {pc = "chebyshev", degree = 2})
  local setup = P.setup_seconds
  local n0 = P.applications
  local _, info = solve.heat(A, u0, {steps = 6, pc = P, rtol = 1e-10})
  check(rawequal(info.precond, P), "info.precond is not the P given")
  check(info.setup_seconds == 0, "P was given: no setup in solve.heat, got %g s", info.setup_seconds)
  check(P.setup_seconds == setup, "P was set up again (%g s, before %g s)", P.setup_seconds, setup)
  local applied = P.applications - n0
  check(applied >= info.total_iterations and applied <= info.total_iterations + 2 * info.steps,
        "P applied %d times for %d iterations in %d steps", applied, info.total_iterations, info.steps)
  local _, info2 = solve.heat(A, u0, {steps = 4, pc = "jacobi", rtol = 1e-10})
  check(info2.precond.name == "jacobi" and info2.setup_seconds == info2.precond.setup_seconds,
        "the jacobi P made inside: %s, setup %g s, reported %g s", info2.precond.name,
        info2.precond.setup_seconds, info2.setup_seconds)
  print(("one preconditioner: %d applications over %d steps (%d iterations)")
        :format(applied, info.steps, info.total_iterations))
  -- a P given with another dt than the physics' is refused: it was made for the old J
  expect_error(function() solve.heat(A, u0, {steps = 2, dt = 0.5, pc = P}) end, "solve.heat", "dt = 0.5",
               "pde:set{dt = 0.5}")
end

-- (d) frames: out/name_0000.vtu every `every` steps and the last, and the .pvd listing them
-- with increasing times; on_step returning false stops early.
do
  local dir = os.tmpname(); os.remove(dir)
  local m = mesh.box{cells = {2, 2, 2}, cell = "tet"}
  local V = fe.space(m, "P2")
  local u0 = V:interpolate(function(x) return x[1] end)
  local A = fe.operator(V, physics.heat{dt = 0.1, u_old = u0}, {dirichlet = "xmin", value = 0})
  local seen = {}
  local _, info = solve.heat(A, u0, {steps = 7, every = 3, out = dir, name = "temp",
                                     on_step = function(k, t, u, step)
                                       seen[#seen + 1] = {k, t, u.n, step.iterations}
                                     end})
  check(#seen == 7 and seen[7][1] == 7 and math.abs(seen[7][2] - 0.7) < 1e-12, "on_step ran %d times", #seen)
  local want = {"temp_0000.vtu", "temp_0003.vtu", "temp_0006.vtu", "temp_0007.vtu"}
  check(info.frames == #want, "%s frames written, expected %d", tostring(info.frames), #want)
  local f = check(io.open(dir .. "/temp.pvd")); local pvd = f:read("a"); f:close()
  check(pvd:find('<VTKFile type="Collection"', 1, true), "not a collection:\n%s", pvd)
  local files, times = {}, {}
  for t, file in pvd:gmatch('<DataSet timestep="([^"]+)"[^>]-file="([^"]+)"') do
    times[#times + 1] = tonumber(t); files[#files + 1] = file
  end
  check(#files == #want, "the .pvd lists %d frames, expected %d", #files, #want)
  for i, w in ipairs(want) do
    check(files[i] == w, "frame %d is %s, expected %s", i, tostring(files[i]), w)
    local v = io.open(dir .. "/" .. w); check(v, "%s missing", w)
    local s = v:read("a"); v:close()
    check(s:find('Name="temp"', 1, true) and s:find(('NumberOfPoints="%d"'):format(m.nvertices), 1, true),
          "%s lacks the field at the vertices", w)
    if i > 1 then check(times[i] > times[i - 1], "times not increasing: %g after %g", times[i], times[i - 1]) end
  end
  -- on_step returning false stops; the last frame is the step it stopped at
  local _, stop = solve.heat(A, u0, {steps = 10, out = dir, name = "stop", every = 4,
                                     on_step = function(k) return k < 2 end})
  check(stop.steps == 2 and stop.frames == 2, "stopped after %d steps with %d frames", stop.steps, stop.frames)
  expect_error(function() export.pvd(dir .. "/x.pvd", {{file = "a.vtu"}}) end, "export.pvd", "frame 1",
               "finite time")
  os.execute("rm -rf " .. dir)
  print("frames and .pvd ok")
end

-- a change of dt reaches every strategy, the stored ones (csr, ebe) included: the same
-- Jacobian action as transpose's after pde:set{dt = ...}
do
  local m = mesh.box{cells = {2, 2, 2}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local w = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] end)
  local pde = physics.heat{dt = 0.1, u_old = w}
  local A = fe.operator(V, pde, {dirichlet = "all", value = 0})
  for _, st in ipairs{"csr", "ebe"} do
    pde:set{dt = 0.1}
    local before = A:apply(w, {strategy = st})
    pde:set{dt = 0.01, t = 3}
    local after = A:apply(w, {strategy = st})
    local ref = A:apply(w, {strategy = "transpose"})
    check(T.rel_diff(after, ref) < 1e-12, "%s: stale after dt changed (%g from transpose's)", st,
          T.rel_diff(after, ref))
    check(T.rel_diff(after, before) > 0.1, "%s: dt made no difference", st)
  end
end

-- (e) bad input names the option
do
  local m = mesh.box{cells = {2, 2, 2}, cell = "hex"}
  local V, W = fe.space(m, "Q1"), fe.space(m, "Q2")
  local u0 = V:interpolate(0)
  local A = fe.operator(V, physics.heat{dt = 0.1, u_old = u0})
  expect_error(function() solve.heat(A, u0, {steps = 0}) end, "solve.heat", "steps must be an integer >= 1")
  expect_error(function() solve.heat(A, u0, {steps = 1.5}) end, "steps must be an integer")
  expect_error(function() solve.heat(A, u0, {}) end, "steps", "required")
  expect_error(function() solve.heat(A, u0, {steps = 1, dt = -1}) end, "dt must be a finite number > 0")
  expect_error(function() solve.heat(A, W:interpolate(0), {steps = 1}) end, "u0 is a vector of another space",
               "Q2", "Q1")
  expect_error(function() solve.heat(A, u0, {steps = 1, step = 2}) end, "unknown option 'step'")
  expect_error(function() solve.heat(A, u0, {steps = 1, pc = "nope"}) end, "unknown preconditioner", "nope")
  expect_error(function() solve.heat(A, u0, {steps = 1, every = 2}) end, "opts.out")
  expect_error(function() solve.heat(A, u0, {steps = 1, on_step = 3}) end, "on_step must be a function")
  expect_error(function() solve.heat(u0, u0, {steps = 1}) end, "argument 1 must be an operator")
  local B = fe.operator(V, physics.poisson{source = 1})
  expect_error(function() solve.heat(B, u0, {steps = 1}) end, "physics of A (poisson) has no constant dt")
  print("bad options ok")
end
-- a source function of x and t: physics.heat passes the time pde:set{t = ...} gives it
do
  local V = fe.space(mesh.box{cells = {2, 2, 2}, cell = "hex"}, "Q1")
  local u0 = V:interpolate(0)
  local pde = physics.heat{source = function(x, t) return t * (1 + x[1]) end, dt = 0.1, u_old = u0}
  local A = fe.operator(V, pde)
  pde:set{t = 1}
  local r1 = A:residual(u0):norm()
  pde:set{t = 2}
  local r2 = A:residual(u0):norm()
  check(r1 > 0 and math.abs(r2 / r1 - 2) < 1e-12, "source(x, t) sees t: |r| %g at t = 1, %g at t = 2", r1, r2)
  print("a source of x and t follows pde:set{t = ...}")
end
T.done()
