-- Strategy "patch" beyond patch = transpose (test_patch.lua): its model, its source, PCG with
-- it, default patches halved to fit shared memory, walks under a rule that is not symmetric
-- (each cell in its own order), and the mistakes a user can make with its options.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff = T.check, T.max_rel_diff
local backends, nvidia_opencl = T.backends(true), T.nvidia_opencl()

-- the model: patches recompute first-order geometry, so they move fewer bytes than transpose
-- with stored factors (its own choice may be the vertices too); the counted flops include the
-- map at each point
local m = mesh.box{cells = {8, 8, 8}, cell = "tet"}
local V = fe.space(m, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local w = V:interpolate(function(x) return x[1] * x[2] end)
local _, rt = A:apply(w, {strategy = "transpose", geometry = "unshared"})
local _, rp = A:apply(w, {strategy = "patch"})
check(rp.bytes < 0.6 * rt.bytes, "patch bytes %g not below transpose's %g", rp.bytes, rt.bytes)
check(rp.flops > rt.flops, "patch flops %g should include the map (transpose %g)", rp.flops, rt.flops)
print(("P1 apply model: transpose %.3g bytes %.3g flops, patch %.3g bytes %.3g flops")
      :format(rt.bytes, rt.flops, rp.bytes, rp.flops))

-- the source names its template and its sizes
local src = A:source("apply", {strategy = "patch"})
check(src:find("FE_KERNEL(fe_patch)", 1, true) and src:find("#define MAXL", 1, true) and
      src:find("#define WALK 0", 1, true), "A:source of the patch strategy lacks fe_patch, MAXL or WALK 0")
check(A:source("apply", {strategy = "patch", walk = 8}):find("#define WALK 1", 1, true),
      "walk = 8 should give walks")
local names = table.concat(A:strategies(), " ")
check(names:find("patch") and names:find("transpose"), "A:strategies() = %s", names)

-- PCG: the same iterations and solution with either strategy
for _, be in ipairs(backends) do
  local ut, it = solve.cg(A, {backend = be, strategy = "transpose", rtol = 1e-10})
  local up, ip = solve.cg(A, {backend = be, strategy = "patch", rtol = 1e-10})
  local d = rel_diff(ut:to("cpu"), up:to("cpu"))
  check(it.iterations == ip.iterations and d < 1e-9, "%s PCG: %d vs %d iterations, difference %.2e",
        be, it.iterations, ip.iterations, d)
  print(("%s PCG: %d iterations with either strategy, solutions differ by %.1e"):format(be, ip.iterations, d))
end

-- default patches too large for the group's shared memory are halved until they fit (on the
-- cpu a group may use 512 KiB: 512 Q3 hexes need more)
do
  local mq = mesh.box{cells = {8, 8, 8}, cell = "hex"}
  local Q = fe.space(mq, "Q3")
  local AQ = fe.operator(Q, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local block = tonumber(AQ:source("residual", {backend = "cpu", strategy = "patch"}):match("#define BLOCK (%d+)"))
  local uq = Q:interpolate(function(x) return x[1] * x[2] end)
  local d = rel_diff(AQ:residual(uq, {strategy = "transpose"}), AQ:residual(uq, {strategy = "patch"}))
  check(block and block < 512 and d < 1e-13, "Q3 patches: block %s, patch vs transpose %.2e", tostring(block), d)
  print(("Q3 hex: default patches halved to %s cells; patch = transpose to %.1e"):format(tostring(block), d))
end

-- a non-symmetric rule: walks keep each cell's own vertex order and still agree
do
  local Ag = fe.operator(V, physics.poisson{kappa = "1 + x[0]", source = 1}, {dirichlet = "all",
                         quadrature = {degree = 3, rule = "gauss"}})
  local d = rel_diff(Ag:apply(w, {strategy = "transpose"}), Ag:apply(w, {strategy = "patch", walk = 8}))
  check(d < 1e-13, "collapsed Gauss rule: walks vs transpose %.2e", d)
  print(("collapsed Gauss rule: walks in each cell's own order, patch = transpose to %.1e"):format(d))
end

-- interleaved runs (lanes, a GPU's default) move the places, not the order of a node's sum
-- within a patch (the patches' atomic adds into y still come in any order): the same result
-- on every backend, one item per cell and walks, scalar and vector
do
  local mv = mesh.box{cells = {5, 4, 3}, cell = "tet"}
  local Vv = fe.space(mv, {family = "P", order = 1, components = 3})
  local Av = fe.operator(Vv, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = "xmin"})
  local wv = Vv:interpolate(function(x) return {x[1] * x[2], x[3], x[1] - x[2]} end)
  for _, be in ipairs(backends) do
    for _, c in ipairs{{A, w, "P1"}, {Av, wv, "P1 x3"}} do
      for _, walk in ipairs{0, 8} do
        local o = {backend = be, strategy = "patch", walk = walk, lanes = 1}
        local y1 = c[1]:apply(c[2]:to(be), o):to("cpu")
        for _, lanes in ipairs{16, 32, 64} do
          o.lanes = lanes
          local src = c[1]:source("apply", o)
          check(src:find("#define LANES " .. lanes, 1, true), "%s lanes = %d: not in the source", be, lanes)
          local d = rel_diff(y1, c[1]:apply(c[2]:to(be), o):to("cpu"))
          check(d < 1e-14, "%s %s walk %d: lanes = %d differs from lanes = 1 by %.2e", be, c[3], walk, lanes, d)
        end
      end
    end
    print(("%s: lanes 16, 32, 64 agree with lanes 1 (P1 and P1 x3, with and without walks)"):format(be))
  end
end

-- mistakes
local e1 = select(2, pcall(function() return A:apply(w, {strategy = "patch", walk = -2}) end))
check(tostring(e1):find("walk must be an integer >= %-1"), "walk = -2: %s", tostring(e1))
local P2 = fe.operator(fe.space(m, "P2"), physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local e2 = select(2, pcall(function() return P2:residual(fe.space(m, "P2"):interpolate(1),
                                                         {strategy = "patch", walk = 4}) end))
check(tostring(e2):find("walks need first%-order cells"), "walk on P2: %s", tostring(e2))
local e3 = select(2, pcall(function() return A:apply(w, {strategy = "patch", lanes = 12}) end))
check(tostring(e3):find("lanes must be 0 or a power of two up to 64"), "lanes = 12: %s", tostring(e3))
local e4 = select(2, pcall(function() return solve.cg(A, {strategy = "patch", lanes = 3}) end))
check(tostring(e4):find("lanes = 3"), "solve.cg with lanes = 3: %s", tostring(e4))
local ok, err = pcall(function() return A:apply(w, {strategy = "patches"}) end)
check(not ok and tostring(err):find("unknown strategy 'patches'") and tostring(err):find("patch"),
      "a bad strategy name: %s", tostring(err))

T.done()
