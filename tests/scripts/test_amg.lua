-- The amg preconditioner (hypre BoomerAMG on the assembled Jacobian): the matrix it is built
-- from equals the matrix-free action, its V-cycle is symmetric positive definite, and CG with
-- it reaches the Jacobi-PCG solution to 1e-8 in fewer than 30 iterations (P1 tets, Q1 hexes,
-- a Gmsh mesh with regions, elasticity), on cpu, on opencl and cuda when present, and in
-- single precision. Skipped in builds without hypre.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

if T.amg_missing() then return end

local opencl = T.device("opencl") and T.device("opencl").available

-- The assembled Jacobian (amg's input) applied equals A:apply, Dirichlet rows and columns too.
do
  local m = mesh.box{cells = {6, 6, 6}, cell = "tet", distort = 0.2}
  local V = fe.space(m, "P1")
  local A = fe.operator(V, physics.poisson{kappa = "1 + x[0]"}, {dirichlet = {"xmin", "ymax"}})
  local v = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] * x[3] end)
  local y = A:apply(v)
  for _, be in ipairs(opencl and {"cpu", "opencl"} or {"cpu"}) do
    local d = T.rel_diff(A:assemble{backend = be}:apply(v):to("cpu"), y)
    check(d <= 1e-12, "assembled matrix on %s off A:apply by %.3g", be, d)
  end
end

-- Solve with Jacobi (the reference, to 1e-12) and with amg made once by solve.precond: one
-- solve to rtol 1e-8 counts the iterations, one to 1e-11 matches the reference to 1e-8 (in
-- single precision: to 1e-6, and 1e-4).
local function compare(label, A, opts)
  local o = opts or {}
  local function with(t)
    for k, v in pairs(o) do t[k] = v end
    return t
  end
  local ref, ij = solve.cg(A, with{pc = "jacobi", rtol = 1e-12, maxit = 5000})
  check(ij.converged, "%s: Jacobi-PCG did not converge (%s)", label, ij.reason)
  local P = solve.precond(A, with{pc = "amg"})
  check(P.describe:find("BoomerAMG:? ?%a* ?%(?%d+ levels, %a* ?complexity"), "%s: describe %q", label,
        P.describe)
  local _, ia = solve.cg(A, with{pc = P, rtol = 1e-8, maxit = 200})
  check(ia.converged and ia.iterations < 30, "%s: amg needed %d iterations to 1e-8 (%s)", label,
        ia.iterations, ia.reason)
  check(ia.iterations * 3 < ij.iterations, "%s: amg %d iterations, Jacobi %d: not far fewer",
        label, ia.iterations, ij.iterations)
  local single = o.precision == "single"
  local u, ib = solve.cg(A, with{pc = P, rtol = single and 1e-6 or 1e-11, maxit = 200})
  check(ib.converged, "%s: amg to a tight tolerance: %s", label, ib.reason)
  local d = T.rel_diff(u:to("cpu"), ref:to("cpu"))
  local tol = single and 1e-4 or 1e-8
  check(d <= tol, "%s: amg's solution off Jacobi's by %.3g", label, d)
  local its = ia.iterations + ib.iterations -- one application an iteration, maybe one more a solve
  check(P.applications >= its and P.applications <= its + 2, "%s: %d applications counted for "
        .. "%d iterations", label, P.applications, its)
  print(("%-34s %6d dofs  jacobi %4d its  amg %2d its  |u - u_jacobi|/|u_jacobi| = %.1e  %s"):format(
        label, A.ndofs, ij.iterations, ia.iterations, d, P.describe))
  return P
end

-- P1 tets: 35937 dofs, a variable coefficient on a distorted mesh.
local m = mesh.box{cells = {32, 32, 32}, cell = "tet", distort = 0.3}
local V = fe.space(m, "P1")
local A = fe.operator(V, physics.poisson{kappa = "1 + 4 * x[0] * x[1]", source = 1},
                      {dirichlet = "all"})
local P = compare("P1 tets, cpu", A)

-- The V-cycle is symmetric positive definite: (M^-1 x, y) = (x, M^-1 y), (M^-1 x, x) > 0.
do
  local x = V:interpolate(function(p) return math.sin(5 * p[1]) * p[2] + p[3] end)
  local y = V:interpolate(function(p) return math.cos(3 * p[2]) + p[1] * p[3] end)
  local Mx, My = P:apply(x), P:apply(y)
  local a, b = Mx:dot(y), x:dot(My)
  check(T.close(a, b, 1e-10), "amg's V-cycle is not symmetric: %.15g against %.15g", a, b)
  check(Mx:dot(x) > 0, "amg's V-cycle is not positive: (M^-1 x, x) = %g", Mx:dot(x))
end

-- Two V-cycles an application: fewer iterations than one.
do
  local _, i1 = solve.cg(A, {pc = P, rtol = 1e-8})
  local _, i2 = solve.cg(A, {pc = "amg", cycles = 2, rtol = 1e-8})
  check(i2.iterations < i1.iterations, "2 V-cycles: %d iterations, 1: %d", i2.iterations,
        i1.iterations)
  check(i2.pc:find("V-cycle x 2", 1, true), "info.pc %q", i2.pc)
  local _, i3 = solve.cg(A, {pc = "amg", cycle_on = "host", cycles = 2, rtol = 1e-8})
  check(i3.pc:find("2 V-cycles", 1, true) and i3.iterations < i1.iterations + 2, "the host's "
        .. "2 V-cycles: %d iterations (%s)", i3.iterations, i3.pc)
end

-- Q1 hexes.
do
  local mh = mesh.box{cells = {20, 20, 20}, cell = "hex", distort = 0.2}
  local Ah = fe.operator(fe.space(mh, "Q1"), physics.poisson{kappa = 1, source = 1},
                         {dirichlet = {"xmin", "zmax"}})
  compare("Q1 hexes, cpu", Ah)
end

-- P1 triangles (2D: strength threshold 0.25).
do
  local m2 = mesh.box{cells = {64, 64}, cell = "tri", distort = 0.3}
  local A2 = fe.operator(fe.space(m2, "P1"), physics.poisson{kappa = "1 + x[1]", source = 1},
                         {dirichlet = "all"})
  compare("P1 triangles, cpu", A2)
end

-- Linear elasticity (three components, hypre's unknown approach), clamped at xmin.
do
  local me = mesh.box{cells = {8, 8, 8}, cell = "hex"}
  local Ve = fe.space(me, {family = "Q", order = 1, components = 3})
  local Ae = fe.operator(Ve, physics.elasticity{E = 1, nu = 0.3, force = {0, 0, -1}},
                         {dirichlet = "xmin"})
  compare("Q1 elasticity, cpu", Ae)
end

-- Single precision: the matrix is still assembled in double for hypre, cycled in single.
compare("P1 tets, cpu single", A, {precision = "single"})

-- The devices: assembled there, hypre's hierarchy moved there and cycled there.
for _, be in ipairs{"opencl", "cuda"} do
  if T.device(be) and T.device(be).available then
    local ms = mesh.box{cells = {16, 16, 16}, cell = "tet", distort = 0.3}
    local As = fe.operator(fe.space(ms, "P1"), physics.poisson{kappa = "1 + 4 * x[0] * x[1]",
                           source = 1}, {dirichlet = "all"})
    local Pd = compare("P1 tets, " .. be, As, {backend = be})
    check(Pd.backend == be, "the preconditioner was made on %s", tostring(Pd.backend))
    compare("P1 tets, " .. be .. " single", As, {backend = be, precision = "single"})
  else
    T.skip(be .. ": not available")
  end
end

-- A Gmsh mesh with four regions of different conductivity.
local torso = T.gmsh_mesh("meshes/torso.geo", {size = 0.08})
if torso then
  local At = fe.operator(fe.space(torso, "P1"),
                         physics.poisson{kappa = {body = 1, lung_left = 0.2, lung_right = 0.2,
                                                  heart = 5}, source = 1},
                         {dirichlet = "skin"})
  compare("P1 torso.geo (regions), cpu", At)
end
T.done()
