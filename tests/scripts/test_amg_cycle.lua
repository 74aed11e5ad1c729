-- amg's V-cycle on the solve's backend (cycle_on = "device", engine/solve/precond/amg-cycle.c):
-- hypre's hierarchy moved to the backend and cycled there with felab's own passes, on every
-- backend here (cpu, opencl; cuda where there is one). Against BoomerAMG's own cycle on the
-- host (cycle_on = "host") in the same process: AMG-PCG's iterations within 15% (scalar
-- Poisson: P1, Q1, Q2 on distorted boxes with a coefficient of x) and within 30% for
-- elasticity (two Jacobi sweeps against hypre's l1 Gauss-Seidel), the
-- same solution; the cycle a symmetric operator (what CG needs); its report (the backend it
-- cycled on, launches, no host copies, the setup's part to the device, its levels); the
-- default; two cycles an application; two-scale's coarse scale cycled there too (the same
-- iterations, h-independent); bad options refused; the levels in CSR and in SELL-C-sigma
-- (a GPU's layout, asked on every backend here by FELAB_CYCLE_FORMAT) alike, with the coarse
-- levels in one launch (the tail) and without (FELAB_CYCLE_TAIL = 0; n: from n rows); SELL's
-- levels (A, P and the transposed R: rectangular) with 16-bit column deltas and with 32-bit
-- columns (FELAB_SELL_DELTA=0 FELAB_SELL_ZEROS=keep) the same iterations and bits.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
if not pcall(solve.precond, fe.operator(fe.space(mesh.box{cells = {2, 2, 2}, cell = "hex"}, "Q1"),
                                        physics.poisson{kappa = 1, source = 1}), {pc = "amg"}) then
  T.skip("amg: felab was built without hypre")
  T.done()
  return
end

-- the child of the layouts' check (the file's end)
if arg[1] == "sell" then
  local m = mesh.box{cells = {12, 12, 12}, cell = "tet", distort = 0.3}
  local B = fe.operator(fe.space(m, "P1"), physics.poisson{kappa = "1 + 10 * x[0]", source = 1},
                        {dirichlet = "all"})
  for _, be in ipairs(T.backends(true)) do
    local x, i = solve.cg(B, {pc = "amg", rtol = 1e-10, backend = be})
    print(("%s %s %d %.17g"):format(be, i.pc:match("%((%a+),"), i.iterations, x:to("cpu"):norm()))
    io.stdout:flush()
  end
  return
end
local function within(a, b, share)
  return math.abs(a - b) <= math.max(1, share * b)
end

for _, be in ipairs(T.backends(true)) do
  for _, c in ipairs({{"tet", "P1", 10}, {"hex", "Q1", 8}, {"hex", "Q2", 5}}) do
    local m = mesh.box{cells = {c[3], c[3], c[3]}, cell = c[1], distort = 0.3}
    local V = fe.space(m, c[2])
    local A = fe.operator(V, physics.poisson{kappa = "1 + 10 * x[0]", source = 1},
                          {dirichlet = "all"})
    local xh, ih = solve.cg(A, {pc = "amg", cycle_on = "host", rtol = 1e-9, backend = be})
    local xd, id = solve.cg(A, {pc = "amg", cycle_on = "device", rtol = 1e-9, backend = be})
    local d = T.max_rel_diff(xh:to("cpu"), xd:to("cpu"))
    check(ih.converged and id.converged and within(id.iterations, ih.iterations, 0.15) and
          d <= 1e-6, "%s %s: host cycle %d iterations, device %d; solutions differ by %.1e", be,
          c[2], ih.iterations, id.iterations, d)
    check(id.pc:find("V-cycle on " .. be, 1, true), "%s %s: info.pc %s", be, c[2], id.pc)
    -- elasticity: the same hierarchy (an unknown a component), two Jacobi sweeps
    local E = fe.operator(fe.space(m, {family = c[2]:sub(1, 1), order = tonumber(c[2]:sub(2)),
                                       components = 3}),
                          physics.elasticity{E = 1, nu = 0.3, force = {0, 0, -1}},
                          {dirichlet = {"xmin"}})
    local _, eh = solve.cg(E, {pc = "amg", cycle_on = "host", rtol = 1e-8, backend = be, maxit = 300})
    local _, ed = solve.cg(E, {pc = "amg", cycle_on = "device", rtol = 1e-8, backend = be, maxit = 300})
    check(eh.converged and ed.converged and within(ed.iterations, eh.iterations, 0.3),
          "%s %s elasticity: host %d iterations, device %d", be, c[2], eh.iterations,
          ed.iterations)
    print(("%-6s %s: AMG-PCG host cycle %2d iterations, device %2d (%.0e apart); elasticity "
           .. "%2d, %2d"):format(be, c[2], ih.iterations, id.iterations, d, eh.iterations,
                                 ed.iterations))
  end
  -- the cycle is symmetric: (r1, M r2) = (r2, M r1)
  local m = mesh.box{cells = {8, 8, 8}, cell = "tet", distort = 0.2}
  local V = fe.space(m, "P1")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local P = solve.precond(A, {pc = "amg", cycle_on = "device", backend = be})
  local r1 = V:interpolate(function(x) return math.sin(7 * x[1]) * x[2] end)
  local r2 = V:interpolate(function(x) return math.cos(5 * x[3]) + x[1] * x[2] end)
  local z1, z2 = P:apply(r1:to(be)):to("cpu"), P:apply(r2:to(be)):to("cpu")
  local a, b = r1:dot(z2), r2:dot(z1)
  check(math.abs(a - b) <= 1e-10 * math.abs(a), "%s: (r1, M r2) = %.15g, (r2, M r1) = %.15g", be,
        a, b)
  check(P.launches > 0 and P.setup_parts.to_device and P.setup_parts.to_device > 0,
        "%s: the device cycle's counts: %d launches, setup parts %s", be, P.launches,
        tostring(P.setup_parts.to_device))
  -- the level matrices' values single by default in a double solve (R = P^T rounded alike:
  -- the symmetry above holds in it); "double" keeps them: the same action to float's rounding,
  -- fewer bytes counted, CG's iterations alike
  local D = solve.precond(A, {pc = "amg", cycle_values = "double", backend = be})
  local zd = D:apply(r1:to(be)):to("cpu")
  local dz = T.max_rel_diff(z1, zd)
  check(P.describe:find("values single", 1, true) and not D.describe:find("values single", 1, true)
        and dz > 0 and dz <= 1e-5 and P.bytes < 0.9 * D.bytes, "%s: cycle_values single against "
        .. "double: actions %.1e apart, bytes %.4g and %.4g (%s)", be, dz, P.bytes, D.bytes,
        P.describe)
  local _, is = solve.cg(A, {pc = "amg", rtol = 1e-10, backend = be})
  local _, id = solve.cg(A, {pc = "amg", cycle_values = "double", rtol = 1e-10, backend = be})
  check(is.converged and math.abs(is.iterations - id.iterations) <= 1, "%s: values single %d "
        .. "iterations, double %d", be, is.iterations, id.iterations)
  print(("%-6s level values single against double: actions %.1e apart, %d and %d iterations, "
         .. "bytes %.3g against %.3g"):format(be, dz, is.iterations, id.iterations, P.bytes, D.bytes))
  local H = solve.precond(A, {pc = "amg", backend = be})
  check(H.describe:find("V-cycle on " .. be, 1, true), "%s: the default is the device's cycle: %s",
        be, H.describe)
  -- its levels: rows falling, the finest's entries stored, one timed cycle's seconds on each
  local lv = P.levels
  check(#lv >= 2 and lv[1].rows == A.ndofs and lv[1].nnz > lv[1].rows, "%s: %d levels, the finest "
        .. "%s rows (%d dofs)", be, #lv, tostring(lv[1] and lv[1].rows), A.ndofs)
  -- (its levels of at most 256 rows in one launch, the tail: timed at its first level)
  for l = 2, #lv do
    check(lv[l].rows < lv[l - 1].rows and (lv[l].seconds > 0) == not lv[l].merged and
          lv[l].merged == (lv[l - 1].rows <= 256), "%s: level %d: %d rows (above %d), %.3g s, "
          .. "merged %s", be, l, lv[l].rows, lv[l - 1].rows, lv[l].seconds, tostring(lv[l].merged))
  end
  check(#solve.precond(A, {pc = "amg", cycle_on = "host", backend = be}).levels == 0,
        "%s: the host's cycle lists no levels of its own", be)
  -- two cycles an application: fewer iterations, the same solution
  local x1, i1 = solve.cg(A, {pc = "amg", rtol = 1e-10, backend = be})
  local x2, i2 = solve.cg(A, {pc = "amg", cycles = 2, rtol = 1e-10, backend = be})
  check(i2.converged and i2.iterations < i1.iterations and i2.pc:find("x 2", 1, true) and
        T.max_rel_diff(x1:to("cpu"), x2:to("cpu")) <= 1e-7, "%s: two V-cycles an application: %d "
        .. "iterations against one's %d (%s)", be, i2.iterations, i1.iterations, i2.pc)
  print(("%-6s the device cycle is symmetric to %.0e; %s"):format(be, math.abs(a - b) / math.abs(a),
                                                                 P.describe))
end

-- two-scale's coarse scale with the device cycle: the same iterations as with the host's,
-- still independent of h (4^3 and 8^3 cells of Q3, strongly distorted)
for _, be in ipairs(T.backends(true)) do
  local its = {}
  for _, n in ipairs({4, 8}) do
    local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = 0.3}
    local A = fe.operator(fe.space(m, "Q3"), physics.poisson{kappa = 1, source = 1},
                          {dirichlet = "all"})
    local _, ih = solve.cg(A, {pc = "twoscale", cycle_on = "host", rtol = 1e-8, backend = be})
    local _, id = solve.cg(A, {pc = "twoscale", cycle_on = "device", rtol = 1e-8, backend = be})
    check(ih.converged and id.converged and within(id.iterations, ih.iterations, 0.15) and
          id.pc:find("V-cycle on " .. be, 1, true), "%s twoscale %d^3: host cycle %d iterations, "
          .. "device %d (%s)", be, n, ih.iterations, id.iterations, id.pc)
    its[#its + 1] = id.iterations
  end
  check(its[2] <= its[1] * 1.3 + 2, "%s twoscale with the device cycle: %d then %d iterations "
        .. "(not h-independent)", be, its[1], its[2])
  print(("%-6s two-scale, coarse cycle on the device: %d and %d iterations (4^3, 8^3 Q3)"):format(
        be, its[1], its[2]))
end

local A = fe.operator(fe.space(mesh.box{cells = {3, 3, 3}, cell = "hex"}, "Q1"),
                      physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
expect_error(function() return solve.precond(A, {pc = "amg", cycle_on = "gpu"}) end,
             "cycle_on", "host", "device")
expect_error(function() return solve.cg(A, {pc = "amg", cycle_values = "half"}) end,
             "cycle_values", "single", "double")
expect_error(function() return solve.cg(A, {pc = "amg", aggressive = -1}) end,
             "aggressive", ">= 0")
expect_error(function() return solve.precond(A, {pc = "amg", theta = 1}) end,
             "theta", "below 1")

-- the strong threshold reaches BoomerAMG: a larger one keeps fewer strong connections, so a
-- coarser hierarchy (its complexity printed); two-scale's setup overlaps hypre's with its
-- fine scale and still gives the serial one's iterations (test_twoscale's cases hold them)
do
  local A2 = fe.operator(fe.space(mesh.box{cells = {12, 12, 12}, cell = "hex", distort = 0.3},
                                  "Q1"), physics.poisson{kappa = 1, source = 1},
                         {dirichlet = "all"})
  local function complexity(theta)
    local P = solve.precond(A2, {pc = "amg", theta = theta, aggressive = 0})
    return tonumber(P.describe:match("complexity ([%d.]+)")), P.describe
  end
  local c5, d5 = complexity(0.5)
  local c8, d8 = complexity(0.8)
  check(c5 and c8 and c8 < c5, "amg theta 0.8 should coarsen more than 0.5: %s | %s", d5, d8)
  print(("amg strong threshold 0.5: complexity %.2f; 0.8: %.2f"):format(c5 or -1, c8 or -1))
end

-- the levels in SELL-C-sigma (a GPU's layout) on every backend here, in a child process
-- (FELAB_CYCLE_FORMAT = sell): the same iterations and solution as CSR's
local exe = T.exe()
local function layout(format, tail, env)
  local p = check(io.popen(("%s FELAB_CYCLE_FORMAT=%s FELAB_CYCLE_TAIL=%s '%s' '%s' sell 2>&1")
                           :format(env or "", format, tail or "", exe, arg[0])))
  local out = {}
  for line in p:lines() do
    local be, f, its, norm = line:match("^(%S+) (%a+) (%d+) (%S+)$")
    if be then out[be] = {f = f, its = tonumber(its), norm = tonumber(norm)} end
  end
  p:close()
  return out
end
local csr, csr8, sell = layout("csr"), layout("csr8"), layout("sell")
local csr_nt, sell_nt = layout("csr", "0"), layout("sell", "0")
local sell32 = layout("sell", nil, "FELAB_SELL_DELTA=0 FELAB_SELL_ZEROS=keep")
for _, be in ipairs(T.backends(true)) do
  local c, v, s, cn, sn = csr[be], csr8[be], sell[be], csr_nt[be], sell_nt[be]
  local function same(a, f)
    return a and a.f == f and a.its == c.its and math.abs(c.norm - a.norm) <= 1e-9 * c.norm
  end
  local function show(a) return a and (a.f .. " " .. a.its) or "nothing" end
  check(c and c.f == "csr" and same(v, "csr") and same(s, "sell") and same(cn, "csr") and
        same(sn, "sell"), "%s: the levels in CSR, in CSR with 8 items a row and in SELL, then "
        .. "CSR and SELL without the tail: %s, %s, %s, %s, %s", be, show(c), show(v), show(s),
        show(cn), show(sn))
  -- SELL's levels with 32-bit columns keeping every entry: the same iterations and bits
  local s32 = sell32[be]
  -- the bits on the cpu; elsewhere the operator's actions (atomic adds on a GPU backend) may
  -- differ in their last bits from run to run, and the solution with them
  check(s and s32 and s32.f == "sell" and s32.its == s.its and (s32.norm == s.norm or be ~= "cpu"
        and math.abs(s32.norm - s.norm) <= 1e-12 * s.norm), "%s: SELL "
        .. "levels with 16-bit column deltas %s |x| %.17g, with 32-bit columns %s |x| %.17g", be,
        show(s), s and s.norm or 0, show(s32), s32 and s32.norm or 0)
  if c and v and s and cn and sn then
    print(("%-6s levels in CSR, CSR 8 a row, SELL-C-sigma, no tail CSR and SELL: %d iterations, "
           .. "|x| %.15g, %.15g, %.15g, %.15g, %.15g"):format(be, c.its, c.norm, v.norm, s.norm,
                                                          cn.norm, sn.norm))
  end
end
T.done()
