-- Memory is checked before it is touched (issue 44): under FELAB_MEMORY_LIMIT (felab runs as if
-- the host had that much memory), a refinement, a space, a matrix or a box that cannot fit is
-- an error that names the sizes, nothing is allocated for it, and the session goes on. The
-- limit is read from the environment, so the checks run in child processes: this script
-- again (argument "limited", every call under pcall), and a session piped to the prompt as a
-- user would type it.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local LIMIT = "192M"

if arg[1] == "limited" then
  -- m:refine() until the next one cannot fit: 4^3 hexes, 8 times more cells a step
  local m = mesh.box{cells = 4, cell = "hex"}
  local steps, err = 0, nil
  for _ = 1, 10 do
    local ok, r = pcall(m.refine, m)
    if not ok then
      err = r
      break
    end
    m, steps = r, steps + 1
  end
  check(err, "ten refinements of a 4^3 box fit in %s", LIMIT)
  check(steps >= 2, "only %d refinements of a 4^3 box fit in %s: %s", steps, LIMIT, err)
  for _, part in ipairs({("out of host memory: mesh refine: refining %d hex cells into %d needs ")
                           :format(m.ncells, 8 * m.ncells), " MiB available (FELAB_MEMORY_LIMIT)"}) do
    check(err:find(part, 1, true), "the refusal lacks %q:\n  %s", part, err)
  end
  check(m.ncells == 64 * 8 ^ steps, "the last mesh that fit is kept: %d cells", m.ncells)
  -- a space whose dof map cannot fit (Q9 on 24^3 hexes: about 300 MiB)
  local box = mesh.box{cells = 24, cell = "hex"}
  expect_error(function() return fe.space(box, "Q9") end,
               "out of host memory: fe.space: the dof map of Q9 on 13824 cells needs ", " MiB; ",
               " available (FELAB_MEMORY_LIMIT)")
  -- a matrix whose nonzeros cannot fit (Q4 on 12^3 hexes: 117649 rows of up to 729), refused
  -- after its pattern is counted and before any element matrix is made
  local V = fe.space(mesh.box{cells = 12, cell = "hex"}, "Q4")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  expect_error(function() return A:assemble{backend = "cpu"} end,
               "out of host memory: assemble: the matrix of 117649 rows and ", " nonzeros needs ")
  expect_error(function() return A:assemble{backend = "cpu", scatter = "atomic"} end,
               "out of host memory: assemble: the matrix of 117649 rows and ")
  -- an operator's realization: csr's stored matrix (the setup names the strategy and the part),
  -- and the per-point data an apply folds once (Q1 on 12^3 hexes with a rule of degree 27: 14^3
  -- points a cell, 4.7 million points of 6 values, about 217 MiB), refused before anything of
  -- them is made
  expect_error(function() return A:apply(V:interpolate(function(x) return x[1] end),
                                         {backend = "cpu", strategy = "csr"}) end,
               "setting up csr on cpu (double) for 1728 cells: building the strategy's own data: " ..
               "out of host memory: assemble: the matrix of 117649 rows and ", " MiB available")
  local V1 = fe.space(mesh.box{cells = 12, cell = "hex"}, "Q1")
  local A1 = fe.operator(V1, physics.poisson{kappa = function(x) return 1 + x[1] end, source = 1},
                         {dirichlet = "all", quadrature = {degree = 27}})
  for _, st in ipairs({"transpose", "sumfact"}) do
    expect_error(function() return A1:apply(V1:interpolate(function(x) return x[1] end),
                                            {backend = "cpu", strategy = st, fold = true}) end,
                 "out of host memory: operator poisson on Q1: stored per-point data (6 values at " ..
                 "4.74e+06 points, double", " MiB available (FELAB_MEMORY_LIMIT)")
  end
  -- and the same on a small mesh runs (its model's calibration was cached by the parent)
  do
    local Vs1 = fe.space(mesh.box{cells = 2, cell = "hex"}, "Q1")
    local As1 = fe.operator(Vs1, physics.poisson{kappa = function(x) return 1 + x[1] end, source = 1},
                            {dirichlet = "all", quadrature = {degree = 27}})
    local y = As1:apply(Vs1:interpolate(function(x) return x[1] end),
                        {backend = "cpu", strategy = "transpose", fold = true})
    check(#y == 27, "the small operator's apply after the refusals: %d values", #y)
  end
  -- a box (6 tets a cube)
  expect_error(function() return mesh.box{cells = {400, 400, 400}, cell = "tet"} end,
               "out of host memory: mesh.box: 400 x 400 x 400 cubes (384000000 tet cells, " ..
               "64481201 vertices) needs 8.6 GiB; ")
  -- and the session goes on with what fits (no solve: a first one on a fresh cache calibrates
  -- the cpu's model with buffers of 128 MiB, which this limit refuses too)
  local small = mesh.box{cells = 4, cell = "hex"}:refine()
  local Vs = fe.space(small, "Q2")
  local u = Vs:interpolate(function(x) return x[1] + 2 * x[2] end)
  local top = math.max(table.unpack(u:values()))
  check(small.ncells == 512 and #u == 17 ^ 3 and math.abs(top - 3) < 1e-14,
        "after the refusals: %d cells, %d values, the largest %.17g", small.ncells, #u, top)
  print(("%d refinements fit in %s, then: %s"):format(steps, LIMIT, err))
  T.done("limited")
  return
end

local exe = T.exe()
check(exe and not exe:find("'", 1, true), "arg[-1] names the felab binary")

-- this script under the limit, the cpu's model calibrated first (in the cache the child reads:
-- a calibration's buffers of 128 MiB would not fit under the limit); asked for, so that it is
-- stored even beside other processes (a model's own calibration then is not)
device.calibrate("cpu", "double")
do
  local p = check(io.popen(("FELAB_MEMORY_LIMIT=%s '%s' '%s' limited 2>&1"):format(LIMIT, exe, arg[0])))
  local out = p:read("a")
  local ok = p:close()
  check(ok and out:find("limited: %d+ checks passed"), "the run under FELAB_MEMORY_LIMIT=%s failed:\n%s",
        LIMIT, out)
  io.write(out)
end

-- a session at the prompt (stdin a pipe): the refusal is printed with its line, and the
-- statements after it run with the last mesh that fit
do
  local session = os.tmpname()
  local f = check(io.open(session, "w"))
  f:write('m = mesh.box{cells = 4, cell = "hex"}\n',
          'for i = 1, 10 do m = m:refine() end\n',
          'print("after", m.ncells)\n',
          'x = 6 * 7\n',
          'print("still here", x)\n')
  f:close()
  local p = check(io.popen(("FELAB_MEMORY_LIMIT=%s '%s' < '%s' 2>&1; echo status $?"):format(LIMIT, exe,
                                                                                          session)))
  local out = p:read("a")
  p:close()
  os.remove(session)
  check(out:find("stdin:%d+: out of host memory: mesh refine: refining %d+ hex cells into %d+ needs " ..
                 "[%d.]+ [KMG]iB; [%d.]+ [KMG]iB available %(FELAB_MEMORY_LIMIT%)"),
        "the prompt shows the refusal with its sizes:\n%s", out)
  check(out:find("after\t%d+\n") and out:find("still here\t42\n"), "the session goes on:\n%s", out)
  check(out:find("status 1\n"), "an error at the prompt makes the exit status 1:\n%s", out)
  print("at the prompt: " .. out:match("(out of host memory[^\n]*)"))
end

T.done()
