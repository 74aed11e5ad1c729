-- CG's (p, J p) from the apply's own quadrature (solve.cg with jacobi or none on a backend
-- with CG's scalars in a state and cg_parts: the cpu and cuda). sumfact adds the direction's
-- element quadratic forms into partial sums, so no pass of its own reads p and q. Against
-- fuse_pq = false in the same process: the same iterations, the same solution (the cpu: to
-- 1e-12 relative, every iteration count equal; cuda: 1e-9, within one), one launch fewer a
-- step, info.pq_from_apply true; for the folded Poisson apply with kappa(x) on distorted Q3
-- hexes (jacobi and none), csr's SELL product on P2 tets (its CSR product keeps the pass),
-- the apply reading the geometry (fold = false), reaction-diffusion (a mass term) on Q2,
-- elasticity (three components) on Q2, and the linear solves of a Newton solve of the
-- p-Laplacian (the Jacobian at u). A right-hand side that is not zero on the constrained
-- rows keeps the pass (p is not zero there) and the same answer. On the cpu also: the fused
-- solve gives the same bits run after run (each kernel thread's sum in a line of its own,
-- the lines added in order), and no apply runs past the last step (its calls are
-- synchronous). opencl has no CG state (pq_from_apply false there). fuse_pq is solve.cg's
-- alone.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local function rel_diff(a, b)
  local d = a:copy():axpy(-1, b)
  return math.max(math.abs(d:max()), math.abs(d:min())) /
         math.max(math.abs(a:max()), math.abs(a:min()))
end

local function with(opts, more)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for k, v in pairs(more or {}) do o[k] = v end
  return o
end

-- tolerances a backend's fused and unfused solves agree to: the solutions' relative
-- difference, the iterations' (the cpu: its sums are in a fixed order, the runs alike)
local agree = {cpu = {diff = 1e-12, its = 0}, cuda = {diff = 1e-9, its = 1}}

-- one solve both ways: returns the fused solve's info and the unfused one's
local function both(what, A, opts, b)
  local tol = agree[opts.backend]
  local o1, o2 = with(opts), with(opts, {fuse_pq = false})
  local x1, i1, x2, i2
  if b then
    x1, i1 = solve.cg(A, b, o1)
    x2, i2 = solve.cg(A, b, o2)
  else
    x1, i1 = solve.cg(A, o1)
    x2, i2 = solve.cg(A, o2)
  end
  local d = rel_diff(x2, x1)
  print(("%-5s %-40s its %d / %d  from apply %s  launches %d / %d  diff %.1e"):format(opts.backend,
        what, i1.iterations, i2.iterations, tostring(i1.pq_from_apply), i1.report.launches,
        i2.report.launches, d))
  check(i1.converged and i2.converged, "%s: converged %s and %s", what, tostring(i1.converged),
        tostring(i2.converged))
  check(math.abs(i1.iterations - i2.iterations) <= tol.its, "%s: %d iterations, %d with the pass",
        what, i1.iterations, i2.iterations)
  check(d <= tol.diff, "%s: solutions differ by %.2e", what, d)
  check(i2.pq_from_apply == false, "%s: fuse_pq = false still fused", what)
  return i1, i2, x1
end

local function fused(what, A, opts, b)
  local i1, i2, x1 = both(what, A, opts, b)
  check(i1.pq_from_apply == true, "%s: (p, q) not from the apply", what)
  check(i1.iterations ~= i2.iterations or i2.report.launches - i1.report.launches >= i1.iterations,
        "%s: launches %d fused, %d with the pass, over %d iterations", what, i1.report.launches,
        i2.report.launches, i1.iterations)
  return i1, x1
end

-- every case on one backend (o: its solve options, strategy sumfact)
local function cases(o, newton_check)
  local be = o.backend
  do
    local m = mesh.box{cells = {6, 6, 6}, cell = "hex", distort = 0.1}
    local V = fe.space(m, "Q3")
    local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
    local i1, x1 = fused("Q3 distorted kappa(x), folded, jacobi", A, o)
    fused("Q3 distorted kappa(x), folded, none", A, with(o, {pc = "none"}))
    fused("Q3 distorted kappa(x), fold = false", A, with(o, {fold = false}))
    if be == "cpu" then
      -- the same bits at every run; one apply a step and two vector passes, none past the last
      local x2, i2 = solve.cg(A, o)
      check(rel_diff(x2, x1) == 0 and i2.iterations == i1.iterations and
            i2.history[#i2.history] == i1.history[#i1.history],
            "cpu: a second fused solve differs by %.2e (%d and %d iterations)", rel_diff(x2, x1),
            i1.iterations, i2.iterations)
      local _, rep = A:apply(V:interpolate(1):to("cpu"), {backend = "cpu", strategy = "sumfact"})
      check(i1.report.launches == i1.iterations * (rep.launches + 2),
            "cpu: %d launches over %d iterations of %d-launch applies and 2 vector passes",
            i1.report.launches, i1.iterations, rep.launches)
    end
    local _, s1 = solve.cg(A, with(o, {precision = "single", rtol = 1e-5}))
    check(s1.pq_from_apply == true and s1.converged, "%s Q3 single: from apply %s, converged %s",
          be, tostring(s1.pq_from_apply), tostring(s1.converged))
    -- a right-hand side with values on the constrained rows: r is not zero there, so the pass
    local b = V:interpolate(function(x) return 1 + x[1] end):to(be)
    local i = both("Q3, b nonzero on the boundary, jacobi", A, o, b)
    check(i.pq_from_apply == false, "b nonzero on the constrained rows, yet (p, q) from the apply")
    i = both("Q3, b nonzero on the boundary, none", A, with(o, {pc = "none"}), b)
    check(i.pq_from_apply == false, "b nonzero on the constrained rows, yet (p, q) from the apply")
  end
  do
    local m = mesh.box{cells = {4, 4, 4}, cell = "hex"}
    local V = fe.space(m, "Q2")
    local A = fe.operator(V, physics.reaction_diffusion{c = 3, kappa = 1, source = 1}, {dirichlet = "all"})
    fused("Q2 reaction-diffusion, fold = false", A, with(o, {fold = false}))
    fused("Q2 reaction-diffusion", A, o)
    local E = fe.operator(fe.space(m, {family = "Q", order = 2, components = 3}),
                          physics.elasticity{E = 1, nu = 0.3, force = {0, 0, -1}}, {dirichlet = "all"})
    fused("Q2 elasticity", E, o)
  end
  do -- csr: SELL's product adds (p, J p); CSR's keeps the pass
    local m = mesh.box{cells = {6, 6, 6}, cell = "tet", distort = 0.1}
    local V = fe.space(m, "P2")
    local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
    local oc = with(o, {strategy = "csr"})
    fused("P2 tets, csr (SELL)", A, with(oc, {format = "sell"}))
    local i = both("P2 tets, csr (format csr)", A, with(oc, {format = "csr"}))
    check(i.pq_from_apply == false, "csr's CSR product: (p, q) from the apply")
  end
  newton_check()
end

-- the options checked
do
  local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
  local A = fe.operator(fe.space(m, "Q2"), physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  expect_error(function() return solve.bicgstab(A, {fuse_pq = true}) end, "fuse_pq", "solve.cg")
  expect_error(function() return solve.cg(A, {fuse_pq = 1}) end, "fuse_pq", "true or false")
  local ocl = T.device("opencl")
  if ocl and ocl.available then -- no CG state there: the pass, the same answer as the cpu's
    local x1, i1 = solve.cg(A, {backend = "opencl", rtol = 1e-10})
    local x0 = solve.cg(A, {backend = "cpu", rtol = 1e-10})
    check(i1.converged and i1.pq_from_apply == false and rel_diff(x1:to("cpu"), x0) <= 1e-8,
          "opencl: converged %s, pq_from_apply %s, against the cpu %.2e", tostring(i1.converged),
          tostring(i1.pq_from_apply), rel_diff(x1:to("cpu"), x0))
  end
end

-- the p-Laplacian's Newton solve, its linear CG's (p, q) from the apply or from the pass
local function newton_both(be)
  local m = mesh.box{cells = {4, 4, 4}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.p_laplacian{p = 3, source = 1}, {dirichlet = "all"})
  local u1, n1 = solve.newton(A, {backend = be, strategy = "sumfact", rtol = 1e-9})
  check(n1.converged, "p-Laplacian Newton on %s: %s", be, n1.reason)
  return u1, n1
end

cases({backend = "cpu", rtol = 1e-10, maxit = 500, strategy = "sumfact"}, function()
  local u1, n1 = newton_both("cpu")
  print(("cpu   p-Laplacian Newton: %d steps"):format(n1.iterations))
  check(u1:norm() > 0, "p-Laplacian on the cpu: a zero solution")
end)

local cuda = T.device("cuda")
if not (cuda and cuda.available) then
  T.skip("the cuda part: cuda is not available here: " .. (cuda and cuda.reason or "not compiled in"))
  T.done()
  return
end
cases({backend = "cuda", rtol = 1e-10, maxit = 500, strategy = "sumfact"}, function()
  local u1, n1 = newton_both("cuda")
  local u0 = solve.newton(fe.operator(fe.space(mesh.box{cells = {4, 4, 4}, cell = "hex"}, "Q2"),
                                      physics.p_laplacian{p = 3, source = 1}, {dirichlet = "all"}),
                          {backend = "cpu", strategy = "sumfact", rtol = 1e-9})
  local d = rel_diff(u0, u1:to("cpu"))
  print(("p-Laplacian Newton: cuda %d steps, against the cpu %.1e"):format(n1.iterations, d))
  check(d <= 1e-8, "p-Laplacian: cuda and cpu differ by %.2e", d)
end)
T.done()
