-- The nonsymmetric Krylov solvers from Lua: bicg, bicgstab and gmres reach CG's solution on
-- an SPD Poisson problem (1e-8), with pc = "jacobi" and "none"; on convection-diffusion
-- (nonsymmetric) they converge and agree with each other to 1e-8, on cpu and once on opencl
-- where it runs; a zero Jacobian makes each break down with reason "breakdown: ..." and
-- converged = false; the transposed Jacobian action satisfies (v, J w) = (J^T v, w) to 1e-12
-- on a nonsymmetric physics, at a nonzero state for a nonlinear one; solve.newton with
-- linear = "gmres" (and "bicgstab") converges on a nonlinear nonsymmetric physics; bad
-- options are errors naming them. Tiny meshes: the whole script stays a few seconds.
-- Run: build/felab tests/scripts/test_krylov.lua (exits nonzero on failure).

local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error, rel_diff = T.check, T.expect_error, T.rel_diff

local m = mesh.box{cells = {4, 4, 4}, cell = "tet"}
local V = fe.space(m, "P1")
local methods = {"bicg", "bicgstab", "gmres"}

-- SPD Poisson: every method reaches CG's solution
local Ap = fe.operator(V, physics.poisson{kappa = 2, source = 1}, {dirichlet = {"all"}, value = 0.5})
local ucg = solve.cg(Ap, {rtol = 1e-12})
for _, pc in ipairs{"jacobi", "none"} do
  for _, s in ipairs(methods) do
    local x, info = solve[s](Ap, {pc = pc, rtol = 1e-12})
    local d = rel_diff(x, ucg)
    check(info.converged and (info.reason == "rtol" or info.reason == "atol"),
          "%s pc = %s on Poisson: %s", s, pc, info.reason)
    check(d <= 1e-8, "%s pc = %s on Poisson: |x - x_cg| / |x_cg| = %.3g", s, pc, d)
    check(#info.history >= 2 and info.report.action == s and info.report.iterations == info.iterations
          and info.report.flops > 0, "%s: info and report", s)
    print(("poisson  %-8s pc = %-6s %3d its  |x - x_cg|/|x_cg| = %.1e  ok"):format(s, pc, info.iterations, d))
  end
end
-- with b given and an x0: the same solution of J x = b
local b = Ap:apply(ucg)
local x, info = solve.gmres(Ap, b, {x0 = V:interpolate(1), restart = 5, rtol = 1e-12})
check(info.converged and rel_diff(x, ucg) <= 1e-8, "gmres(5) with b and x0: %s", info.reason)

-- convection-diffusion: nonsymmetric; the three agree with each other
local cd = physics.convection_diffusion{kappa = 0.05, velocity = {1, 0.5, -0.25}, source = 1}
local Acd = fe.operator(V, cd, {dirichlet = {"xmin", "ymin", "zmin"}, value = 0})
local ref
for _, pc in ipairs{"jacobi", "none"} do
  for _, s in ipairs(methods) do
    local u, i = solve[s](Acd, {pc = pc, rtol = 1e-12, maxit = 500})
    check(i.converged, "%s pc = %s on convection-diffusion: %s after %d its", s, pc, i.reason, i.iterations)
    ref = ref or u
    local d = rel_diff(u, ref)
    check(d <= 1e-8, "%s pc = %s on convection-diffusion: off bicg's by %.3g", s, pc, d)
    print(("conv-diff %-8s pc = %-6s %3d its  |x - x_bicg|/|x_bicg| = %.1e  ok"):format(s, pc, i.iterations, d))
  end
end
check(solve.cg(Acd, {maxit = 3}) ~= nil, "cg still runs (unconverged) on a nonsymmetric operator")
if T.device("opencl") and T.device("opencl").available then
  local u, i = solve.bicgstab(Acd, {backend = "opencl", rtol = 1e-12, maxit = 500})
  local d = rel_diff(u:to("cpu"), ref)
  check(i.converged and d <= 1e-8, "bicgstab on opencl: %s, off cpu's by %.3g", i.reason, d)
  print(("conv-diff bicgstab on opencl %3d its  |x - x_cpu|/|x_cpu| = %.1e  ok"):format(i.iterations, d))
else
  T.skip("bicgstab on opencl: opencl not available")
end

-- the adjoint: (v, J w) = (J^T v, w), and J^T is not J
local w = V:interpolate(function(p) return math.sin(3 * p[1]) + p[2] * p[3] end)
local v = V:interpolate(function(p) return math.cos(2 * p[2]) - p[1] * p[1] end)
local function adjoint_gap(A, at)
  local Jw, JTv = A:apply(w, {at = at}), solve.transpose_apply(A, v, {at = at})
  local lhs, rhs = v:dot(Jw), JTv:dot(w)
  return math.abs(lhs - rhs) / math.max(math.abs(lhs), 1e-300), rel_diff(JTv, A:apply(v, {at = at}))
end
local gap, apart = adjoint_gap(Acd)
check(gap <= 1e-12 and apart > 1e-3, "convection-diffusion: adjoint gap %.3g, |J^T v - J v| %.3g", gap, apart)
print(("adjoint  convection-diffusion  |(v, Jw) - (J^T v, w)| / |(v, Jw)| = %.1e  ok"):format(gap))
-- nonlinear and nonsymmetric: Burgers-like convection with a u-dependent diffusivity
local burgers = physics.new{
  name = "burgers_like",
  f0 = function(u, du) return u * du[1] + 0.5 * du[2] - 1 end,
  f1 = function(u, du) return (0.2 + u * u) * du end,
}
local Ab = fe.operator(V, burgers, {dirichlet = {"xmin", "xmax"}, value = 0.2})
local state = V:interpolate(function(p) return 0.3 + p[1] * p[2] - p[3] end)
gap = adjoint_gap(Ab, state)
check(gap <= 1e-12, "burgers-like at a state: adjoint gap %.3g", gap)
print(("adjoint  burgers-like at u      |(v, Jw) - (J^T v, w)| / |(v, Jw)| = %.1e  ok"):format(gap))
gap, apart = adjoint_gap(Ap)
check(gap <= 1e-12 and apart == 0, "poisson is its own transpose: gap %.3g, |J^T v - J v| %.3g", gap, apart)

-- newton with a nonsymmetric linear solver on the nonlinear physics
local un
for _, s in ipairs{"gmres", "bicgstab"} do
  local u, i = solve.newton(Ab, {linear = s, rtol = 1e-10})
  check(i.converged and i.iterations <= 8 and i.linear_iterations > 0,
        "newton with linear = %s: %s after %d steps", s, i.reason, i.iterations)
  un = un or u
  check(rel_diff(u, un) <= 1e-8, "newton with linear = %s: a different solution", s)
  print(("newton   linear = %-8s %d steps, %3d linear its, |r| %.2e -> %.2e  ok"):format(
        s, i.iterations, i.linear_iterations, i.history[1], i.history[#i.history]))
end

-- a constructed breakdown: a zero Jacobian (f0 is a constant source), no Dirichlet nodes.
-- r0 = -residual(0) != 0 but J p = 0: bicgstab's (r~, J p), bicg's (p~, J p) and gmres's
-- Hessenberg pivot are exactly zero at the first iteration.
local Az = fe.operator(V, physics.new{name = "zero_jacobian", f0 = function() return -1 end})
for _, s in ipairs(methods) do
  local u, i = solve[s](Az, {pc = "none"})
  check(not i.converged and i.reason:sub(1, 9) == "breakdown", "%s on J = 0: %s", s, i.reason)
  check(u ~= nil and i.iterations <= 1, "%s on J = 0: x and iterations", s)
  print(("breakdown %-8s %s  ok"):format(s, i.reason))
end
expect_error(function() return solve.newton(Az, {linear = "bicgstab"}) end, "newton step 1",
             "breakdown")

-- raw C physics has no traced Jacobian to transpose: bicg says so, naming it
local raw = physics.new{name = "hand_written", components = 1, f0 = "f0[0] = du[0] - 1.0;",
                        f1 = "for (int d = 0; d < DIM; d++) f1[d] = du[d];",
                        g1 = "g1[0] = 1.0;",
                        g3 = "for (int d = 0; d < DIM; d++) g3[d * DIM + d] = 1.0;"}
local Ar = fe.operator(V, raw, {dirichlet = "all"})
expect_error(function() return solve.bicg(Ar) end, "hand_written", "not traced", "physics.new")
check(solve.bicgstab(Ar, {rtol = 1e-10}) ~= nil, "bicgstab needs no transpose on raw C physics")

-- bad options name themselves
expect_error(function() return solve.gmres(Acd, {restart = 0}) end, "solve.gmres", "restart", ">= 1")
expect_error(function() return solve.bicgstab(Acd, {restart = 5}) end, "solve.bicgstab", "restart")
expect_error(function() return solve.bicg(Acd, {pc = "ilu"}) end, "solve.bicg", "ilu", "jacobi")
-- A:initial: made on the host for an operator's first call on a backend, set on the device
-- once a realization there has its constrained rows' kernel (a solve's later calls): the
-- same vector either way
for _, be in ipairs(T.backends(true)) do
  local Ai = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = {"xmin", "zmax"},
                                                                      value = 0.25})
  local host = Ai:initial{backend = be, interior = -2}
  Ai:residual(host, {backend = be})
  local device = Ai:initial{backend = be, interior = -2}
  local d = T.max_abs_diff(host:to("cpu"), device:to("cpu"))
  check(d == 0 and device:to("cpu"):norm() > 0, "%s: A:initial host-made and device-set differ "
        .. "by %g", be, d)
end
expect_error(function() return solve.newton(Ab, {linear = "minres"}) end, "minres", "gmres")
expect_error(function() return solve.newton(Ab, {linear = "gmres", restart = 0}) end, "restart")
expect_error(function() return solve.gmres(Acd, {maxit = -1}) end, "maxit")
expect_error(function() return solve.bicgstab(Acd, 5) end, "solve.bicgstab", "argument 2")
T.done()
