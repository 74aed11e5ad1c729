-- CG's (p, J p) from the apply's own quadrature (solve.cg with jacobi or none on a GPU whose
-- backend has cg_parts: sumfact adds the direction's element quadratic forms into partial
-- sums, so no pass of its own reads p and q). On cuda, against fuse_pq = false in the same
-- process: the same iterations, the same solution to 1e-9 relative, one launch fewer a step,
-- info.pq_from_apply true; for the folded Poisson apply with kappa(x) on distorted Q3 hexes,
-- csr's SELL product on P2 tets (its CSR product keeps the pass),
-- the apply reading the geometry (fold = false), reaction-diffusion (a mass term) on Q2,
-- elasticity (three components) on Q2, and the linear solves of a Newton solve of the
-- p-Laplacian (the Jacobian at u). A right-hand side that is not zero on the constrained
-- rows keeps the pass (p is not zero there) and the same answer. On the cpu (no cg_parts):
-- pq_from_apply false. fuse_pq is solve.cg's alone.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local function rel_diff(a, b)
  local d = a:copy():axpy(-1, b)
  return math.max(math.abs(d:max()), math.abs(d:min())) /
         math.max(math.abs(a:max()), math.abs(a:min()))
end

-- the cpu: no parts, the pass as before; the option checked
do
  local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local _, info = solve.cg(A, {backend = "cpu", rtol = 1e-10})
  check(info.converged and info.pq_from_apply == false,
        "cpu: converged %s, pq_from_apply %s", tostring(info.converged), tostring(info.pq_from_apply))
  expect_error(function() return solve.bicgstab(A, {fuse_pq = true}) end, "fuse_pq", "solve.cg")
  expect_error(function() return solve.cg(A, {fuse_pq = 1}) end, "fuse_pq", "true or false")
end

local cuda
for _, d in ipairs(device.list()) do
  if d.name == "cuda" then cuda = d end
end
if not (cuda and cuda.available) then
  T.skip("cuda is not available here: " .. (cuda and cuda.reason or "not compiled in"))
  T.done()
  return
end

-- one solve both ways: returns the fused solve's info
local function both(what, A, opts, b)
  local o1, o2 = {}, {fuse_pq = false}
  for k, v in pairs(opts) do o1[k], o2[k] = v, v end
  local x1, i1, x2, i2
  if b then
    x1, i1 = solve.cg(A, b, o1)
    x2, i2 = solve.cg(A, b, o2)
  else
    x1, i1 = solve.cg(A, o1)
    x2, i2 = solve.cg(A, o2)
  end
  local d = rel_diff(x2, x1)
  print(("%-40s its %d / %d  from apply %s  launches %d / %d  diff %.1e"):format(what,
        i1.iterations, i2.iterations, tostring(i1.pq_from_apply), i1.report.launches,
        i2.report.launches, d))
  check(i1.converged and i2.converged, "%s: converged %s and %s", what, tostring(i1.converged),
        tostring(i2.converged))
  check(math.abs(i1.iterations - i2.iterations) <= 1, "%s: %d iterations, %d with the pass", what,
        i1.iterations, i2.iterations)
  check(d <= 1e-9, "%s: solutions differ by %.2e", what, d)
  check(i2.pq_from_apply == false, "%s: fuse_pq = false still fused", what)
  return i1, i2
end

local function fused(what, A, opts, b)
  local i1, i2 = both(what, A, opts, b)
  check(i1.pq_from_apply == true, "%s: (p, q) not from the apply", what)
  check(i1.iterations ~= i2.iterations or i2.report.launches - i1.report.launches >= i1.iterations,
        "%s: launches %d fused, %d with the pass, over %d iterations", what, i1.report.launches,
        i2.report.launches, i1.iterations)
end

local cu = {backend = "cuda", rtol = 1e-10, maxit = 500, strategy = "sumfact"}
do
  local m = mesh.box{cells = {6, 6, 6}, cell = "hex", distort = 0.1}
  local V = fe.space(m, "Q3")
  local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
  fused("Q3 distorted kappa(x), folded", A, cu)
  local nf = {fold = false}
  for k, v in pairs(cu) do nf[k] = v end
  fused("Q3 distorted kappa(x), fold = false", A, nf)
  local single = {precision = "single", rtol = 1e-5}
  for k, v in pairs(cu) do single[k] = single[k] or v end
  local _, i1 = solve.cg(A, single)
  check(i1.pq_from_apply == true and i1.converged, "Q3 single: from apply %s, converged %s",
        tostring(i1.pq_from_apply), tostring(i1.converged))
  -- a right-hand side with values on the constrained rows: r is not zero there, so the pass
  local b = V:interpolate(function(x) return 1 + x[1] end):to("cuda")
  local i = both("Q3, b nonzero on the boundary", A, cu, b)
  check(i.pq_from_apply == false, "b nonzero on the constrained rows, yet (p, q) from the apply")
end
do
  local m = mesh.box{cells = {5, 5, 5}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.reaction_diffusion{c = 3, kappa = 1, source = 1}, {dirichlet = "all"})
  local nf = {fold = false}
  for k, v in pairs(cu) do nf[k] = v end
  fused("Q2 reaction-diffusion, fold = false", A, nf)
  fused("Q2 reaction-diffusion", A, cu)
  local E = fe.operator(fe.space(m, {family = "Q", order = 2, components = 3}),
                        physics.elasticity{E = 1, nu = 0.3, force = {0, 0, -1}}, {dirichlet = "all"})
  fused("Q2 elasticity", E, cu)
end
do -- csr: SELL's product adds (p, J p) (its default format on a GPU); CSR's keeps the pass
  local m = mesh.box{cells = {8, 8, 8}, cell = "tet", distort = 0.1}
  local V = fe.space(m, "P2")
  local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
  local o = {backend = "cuda", rtol = 1e-10, maxit = 500, strategy = "csr"}
  fused("P2 tets, csr (SELL)", A, o)
  local oc = {format = "csr"}
  for k, v in pairs(o) do oc[k] = v end
  local i = both("P2 tets, csr (format csr)", A, oc)
  check(i.pq_from_apply == false, "csr's CSR product: (p, q) from the apply")
end
do
  local m = mesh.box{cells = {4, 4, 4}, cell = "hex"}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.p_laplacian{p = 3, source = 1}, {dirichlet = "all"})
  local u1, n1 = solve.newton(A, {backend = "cuda", strategy = "sumfact", rtol = 1e-9})
  check(n1.converged, "p-Laplacian Newton on cuda: %s", n1.reason)
  local u0 = solve.newton(A, {backend = "cpu", strategy = "sumfact", rtol = 1e-9})
  local d = rel_diff(u0, u1:to("cpu"))
  print(("p-Laplacian Newton: cuda %d steps, against the cpu %.1e"):format(n1.iterations, d))
  check(d <= 1e-8, "p-Laplacian: cuda and cpu differ by %.2e", d)
end
T.done()
