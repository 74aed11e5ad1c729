-- The cpu's hot loop as llvm-mca simulates it (issue 17). Where llvm-mca is on the PATH:
-- device.calibrate measures a cycle of llvm-mca's core (cycle_ns, from a chain of dependent
-- multiply-adds: 0.1-2 ns), and a patch apply's report counts its hot loop's iterations (its
-- cells times its points), has the loop's cycles (a point's work: 20-1000) and their time over
-- the threads, which the FMA ceiling is at least (less the divisions'). A child run with
-- FELAB_MCA=off (its own cache) has none of the three, and its prediction is the calibrated
-- rates' alone. Stored cycles that do not parse are dropped, said, and simulated again.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

-- one report of a P1 and a Q1 patch apply on the cpu, and the calibration's cycle
local function measure()
  device.use("cpu")
  local cal = device.calibrate("cpu", "double")
  check(cal, "no calibration report")
  local cycle = device.info("cpu").calibration.double.cycle_ns
  local reps = {}
  for _, c in ipairs({{"tet", "P1", 6}, {"hex", "Q1", 5}}) do
    local V = fe.space(mesh.box{cells = c[3], cell = c[1]}, c[2])
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    local w = V:interpolate(function(x) return x[1] + 2 * x[2] end):to("cpu", "double")
    local _, rep = A:apply(w, {backend = "cpu", precision = "double", strategy = "patch"})
    reps[#reps + 1] = {rep = rep, ncells = V.mesh.ncells, space = c[2]}
  end
  return cycle, reps
end

if arg[1] == "child" then -- FELAB_MCA=off: print what the model had
  local cycle, reps = measure()
  for _, r in ipairs(reps) do
    print(("child %s %g %g %g"):format(r.space, cycle, r.rep.loop_cycles, r.rep.loop_seconds))
  end
  return
end

local have_mca = os.execute("command -v llvm-mca > /dev/null 2>&1")
local cycle, reps = measure()
if have_mca then
  check(cycle > 0.1 and cycle < 2, "a cycle of llvm-mca's core %g ns, not 0.1-2", cycle)
else
  check(cycle == 0, "no llvm-mca, yet a cycle of %g ns", cycle)
end
for _, r in ipairs(reps) do
  local rep, what = r.rep, r.space .. " patch on cpu"
  local nq = rep.quadrature:match("(%d+) points")
  check(nq, "%s: no quadrature points in '%s'", what, rep.quadrature)
  check(rep.loop_trips == r.ncells * tonumber(nq), "%s: the hot loop runs %g times, not %d cells x %s points",
        what, rep.loop_trips, r.ncells, nq)
  if have_mca then
    check(rep.loop_cycles >= 20 and rep.loop_cycles <= 1000, "%s: the hot loop's %g cycles, not 20-1000",
          what, rep.loop_cycles)
    local threads = device.info("cpu").compute_units
    local expect = rep.loop_trips * rep.loop_cycles * cycle * 1e-9 / threads
    check(math.abs(rep.loop_seconds - expect) <= 1e-9 * expect, "%s: the loop's %g s, expected %g s",
          what, rep.loop_seconds, expect)
    check(rep.ceilings.fma + rep.ceilings.nonfma >= rep.loop_seconds * (1 - 1e-9),
          "%s: the FMA ceiling %g s and divisions %g s under the loop's %g s", what, rep.ceilings.fma,
          rep.ceilings.nonfma, rep.loop_seconds)
  else
    check(rep.loop_cycles == 0 and rep.loop_seconds == 0, "%s: no llvm-mca, yet %g cycles", what,
          rep.loop_cycles)
  end
  print(("%s: %d x %.1f cycles, %.3g ms at %.3f ns a cycle; FMA ceiling %.3g ms"):format(what,
        rep.loop_trips, rep.loop_cycles, rep.loop_seconds * 1e3, cycle, rep.ceilings.fma * 1e3))
end

-- a child run on a cache of its own: its reports {space = {cycle, cycles, seconds}}, its output
local dir = os.tmpname()
os.remove(dir)
local function child(env)
  local cmd = ("%s FELAB_CACHE='%s' '%s' '%s' child 2>&1"):format(env, dir, T.exe(), arg[0])
  local p = check(io.popen(cmd))
  local out = p:read("a")
  check(p:close(), "the child run (%s) failed:\n%s", env, out)
  local got, n = {}, 0
  for space, c, cycles, seconds in out:gmatch("child (%S+) (%S+) (%S+) (%S+)") do
    got[space], n = {tonumber(c), tonumber(cycles), tonumber(seconds)}, n + 1
  end
  check(n == 2, "the child run (%s) printed %d reports:\n%s", env, n, out)
  return got, out
end

-- without llvm-mca (FELAB_MCA=off): no cycle, no loop, the rates alone
for space, g in pairs(child("FELAB_MCA=off")) do
  check(g[1] == 0 and g[2] == 0 and g[3] == 0, "FELAB_MCA=off, %s: cycle %g, loop %g cycles, %g s",
        space, g[1], g[2], g[3])
end
os.execute("rm -rf '" .. dir .. "'")

-- a hot loop's stored cycles that do not parse: dropped, said once, simulated again
if have_mca then
  local first = child("")
  local p = check(io.popen(("ls '%s/cpu/'*.fe_patch.mca"):format(dir)))
  local n = 0
  for path in p:lines() do
    local f = check(io.open(path, "w"))
    f:write("garbage\n")
    f:close()
    n = n + 1
  end
  p:close()
  check(n == 2, "expected the two patch kernels' stored cycles, found %d", n)
  local again, out = child("")
  local _, warned = out:gsub("felab: dropped a damaged cache entry", "")
  check(warned == 1, "two damaged entries: one warning expected, %d:\n%s", warned, out)
  for space, g in pairs(first) do
    check(again[space][2] == g[2], "%s: %g cycles simulated again, %g before", space, again[space][2], g[2])
  end
  os.execute("rm -rf '" .. dir .. "'")
end
T.done()
