-- Traced physics (issue 5): the Jacobian action matches finite differences of the residual,
-- cpu and opencl agree, flops are the hand count, the elasticity patch test passes, named
-- constants change without recompiling and persist into later traces, fields rebind only to
-- a vector of their space (a failed set changes nothing), a field of another space than the
-- operator's is evaluated with its own basis, raw C physics works, and mistakes are clear
-- errors.
-- Run: build/felab tests/scripts/test_physics.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local backends = T.backends()

-- a nonlinear law with a source of x, on P2 tets
local m = mesh.box{cells = {3, 3, 3}, cell = "tet", distort = 0.2}
local V = fe.space(m, "P2")
local law = physics.new{
  f0 = function(u, du, x) return u^3 + math.exp(u) * du[1] - math.sin(x[1] + 2 * x[2]) end,
  f1 = function(u, du) return (1 + u * u) * du + physics.select(physics.gt(u, 0.5), u, 0.5 * u) * du end,
}
check(law.nonlinear, "the law is nonlinear")
local A = fe.operator(V, law, {dirichlet = "all", value = 0.1})
local u = V:interpolate(function(x) return 0.3 + 0.5 * x[1] * x[2] - x[3] * x[3] end)
-- a direction that vanishes on the boundary: the Jacobian action sees directions without
-- their constrained part (operator.h), the residual's difference sees all of it
local v = V:interpolate(function(x)
  return (math.cos(3 * x[1]) + x[2]) * x[1] * (1 - x[1]) * x[2] * (1 - x[2]) * x[3] * (1 - x[3])
end)
for _, be in ipairs(backends) do
  local o = {backend = be, precision = "double"}
  local Jv = A:apply(v, {at = u, backend = be, precision = "double"})
  local h = 1e-6
  local up, um = u:copy():axpy(h, v), u:copy():axpy(-h, v)
  local fd = A:residual(up, o):axpy(-1, A:residual(um, o))
  fd = fd:axpy(1 / (2 * h) - 1, fd) -- scale by 1/(2h)
  local err = fd:copy():axpy(-1, Jv):norm() / Jv:norm()
  check(err < 1e-7, "%s: apply vs differences of the residual: relative error %.3g", be, err)
  print(("  %s: J(u) v vs (r(u + hv) - r(u - hv))/2h: relative difference %.2e"):format(be, err))
end
if #backends > 1 then
  local rc = A:residual(u, {backend = "cpu"})
  local ro = A:residual(u, {backend = "opencl"})
  local d = rc:copy():axpy(-1, ro:to("cpu")):norm() / rc:norm()
  check(d < 1e-12, "cpu and opencl residuals differ by %.3g", d)
  print(("  residual cpu vs opencl: %.2e"):format(d))
end

-- flops: the hand count of small laws
local q = physics.new{f0 = function(u, du, x) return u^3 - math.sin(x[1]) end,
                      f1 = function(u, du) return (1 + u * u) * du end}
check(q.flops == 9, "u^3 - sin(x) and (1 + u^2) du: 4 + 5 flops, counted %g", q.flops)
local p0 = physics.poisson{kappa = 1, source = 1}
check(p0.flops == 0 and p0.flops_jacobian == 0, "constant Poisson costs nothing per point: %g", p0.flops)
local p2 = physics.new{f1 = function(u, du) return physics.dot(du, du) * du end}
check(p2.flops == 8, "|du|^2 du: 3 products, 2 sums, 3 products = 8, counted %g", p2.flops)

-- elasticity patch test: a linear displacement has constant stress, so every interior
-- row of the residual vanishes to rounding on a distorted mesh
local me = mesh.box{cells = {3, 3, 3}, cell = "tet", distort = 0.3}
local W = fe.space(me, {family = "P", order = 1, components = 3})
local E = fe.operator(W, physics.elasticity{E = 200, nu = 0.3})
local lin = W:interpolate(function(x)
  return {0.1 + 0.2 * x[1] - 0.3 * x[2] + 0.05 * x[3], -0.1 * x[1] + 0.4 * x[3], 0.3 * x[1] + 0.1 * x[2] - 0.2 * x[3]}
end)
local coords = W:interpolate(function(x) return {x[1], x[2], x[3]} end)
local r = E:residual(lin)
local worst, interior = 0, 0
for i = 1, #r, 3 do
  local inside = true
  for k = 0, 2 do
    local c = coords:get(i + k) -- the node's coordinates are entries i, i+1, i+2
    if c < 1e-9 or c > 1 - 1e-9 then inside = false end
  end
  if inside then
    interior = interior + 1
    for k = 0, 2 do worst = math.max(worst, math.abs(r:get(i + k))) end
  end
end
check(interior > 0 and worst < 1e-11, "patch test: largest interior residual %.3g over %d nodes", worst, interior)
print(("  elasticity patch test: %d interior nodes, largest residual %.2e"):format(interior, worst))

-- named constants change between calls without recompiling; fields rebind
local S = fe.space(m, "P1")
local uold = S:interpolate(function(x) return x[1] end)
local heat = physics.heat{dt = 0.1, u_old = uold}
local H = fe.operator(S, heat)
local un = S:interpolate(function(x) return x[1] + 0.05 end)
local r1 = H:residual(un)
heat:set{dt = 0.05}
local r2, rep2 = H:residual(un)
check(rep2.compile_seconds == 0, "changing dt recompiled (%g s)", rep2.compile_seconds)
heat:set{dt = 0.025}
local r3 = H:residual(un)
-- r(dt) = M (u - u_old) / dt + K u: r(0.025) - r(0.05) = 2 (r(0.05) - r(0.1))
local d21, d32 = r2:copy():axpy(-1, r1), r3:copy():axpy(-1, r2)
local rel = d32:copy():axpy(-2, d21):norm() / d32:norm()
check(rel < 1e-10, "the mass term does not scale with 1/dt: %.3g", rel)
-- a failed set changes nothing: a vector of another space (here P2, and another P1 space of
-- the same mesh, and a space of another mesh) is refused before it is bound, and so is a
-- set whose other entries are fine
local r_before = H:residual(un)
local dt_before = heat.constants.dt
local P2 = fe.space(m, "P2")
local S_again = fe.space(m, "P1")
local other_mesh = fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P1")
expect_error(function() return heat:set{u_old = P2:interpolate(1)} end, "test_physics.lua:",
             "pde:set", "u_old", "must stay on its space", "P1", "P2")
expect_error(function() return heat:set{u_old = S_again:interpolate(1)} end, "another P1 space")
expect_error(function() return heat:set{u_old = other_mesh:interpolate(1)} end, "another mesh")
expect_error(function() return heat:set{u_old = 2} end, "pde:set", "u_old", "number")
expect_error(function() return heat:set{dt = 1, u_old = P2:interpolate(0)} end, "must stay on its space")
expect_error(function() return heat:set{dt = "small"} end, "constant dt must be a number")
local r_after = H:residual(un)
local moved = T.max_abs_diff(r_after, r_before)
check(moved == 0, "a failed pde:set changed the residual by %.3g", moved)
check(heat.constants.dt == dt_before, "a failed pde:set changed dt to %g", heat.constants.dt)
print(("  failed pde:set left the binding: residual moved by %.1e, dt = %g"):format(moved, heat.constants.dt))
heat:set{u_old = un}
local K = fe.operator(S, physics.poisson{kappa = 1, source = 0})
local d = H:residual(un):axpy(-1, K:residual(un)):norm()
check(d < 1e-12, "with u_old = u the heat step is the Laplacian: %.3g", d)

-- constants set with pde:set persist in the definition: a trace made later (2D here) sees
-- them, also t when physics.new had no constants table; the caller's table is not written
local timed = physics.new{f0 = function(u, du, x, a, t) return u - t * (1 + x[1]) end,
                          f1 = function(u, du) return du end}
timed:set{t = 2}
check(timed.constants.t == 2, "t after set: %g", timed.constants.t)
local mt = mesh.box{cells = {4, 4}, cell = "tri", distort = 0.2}
local St = fe.space(mt, "P2")
local zt = St:interpolate(function(x) return x[1] * x[2] end)
local rt = fe.operator(St, timed):residual(zt)
local rt2 = fe.operator(St, physics.new{f0 = function(u, du, x) return u - 2 * (1 + x[1]) end,
                                        f1 = function(u, du) return du end}):residual(zt)
local dt2 = T.rel_diff(rt, rt2)
check(dt2 < 1e-14, "the 2D trace made after set{t = 2} does not use t = 2: %.3g", dt2)
local user_constants = {c = 1}
local scaled = physics.new{constants = user_constants, f0 = function(u, du, x, a) return a.c * u end}
scaled:set{c = 3}
check(user_constants.c == 1, "pde:set wrote into the caller's constants table: c = %g", user_constants.c)
local sc = fe.operator(St, scaled):residual(zt)
local sc_ref = fe.operator(St, physics.new{f0 = function(u) return 3 * u end}):residual(zt)
check(T.rel_diff(sc, sc_ref) < 1e-14, "the 2D trace of scaled does not use c = 3")
print(("  set{t = 2} before the 2D trace: residual vs t written as 2: %.1e"):format(dt2))

-- an auxiliary field on another space than the operator's: a P1 coefficient in a P2
-- operator, its value and its gradient. P1 holds a linear function exactly, so the physics
-- must equal the same law with the coefficient written as that function of x (quadrature
-- included: the field's degree counts in the rule)
local function lin(x) return 0.5 + x[1] - 2 * x[2] + 0.3 * x[3] end
local kfield = S:interpolate(lin)
local with_field = physics.new{fields = {k = kfield},
                               f0 = function(u, du, x, a) return a.k * u + physics.dot(physics.grad(a.k), du) end,
                               f1 = function(u, du, x, a) return (1 + a.k^2) * du end}
local with_x = physics.new{f0 = function(u, du, x) return lin(x) * u + (du[1] - 2 * du[2] + 0.3 * du[3]) end,
                           f1 = function(u, du, x) return (1 + lin(x)^2) * du end}
local u2 = P2:interpolate(function(x) return math.sin(x[1]) * x[2] + x[3]^2 end)
for _, be in ipairs(backends) do
  local o = {backend = be, precision = "double"}
  local rf = fe.operator(P2, with_field, {dirichlet = "all"}):residual(u2, o)
  local rx = fe.operator(P2, with_x, {dirichlet = "all"}):residual(u2, o)
  local dd = T.rel_diff(rf, rx)
  check(dd < 1e-12, "%s: P1 field k in a P2 operator vs k written in x: relative difference %.3g", be, dd)
  print(("  %s: P1 field in a P2 operator vs the same coefficient in x: %.1e"):format(be, dd))
end

-- one definition in every dimension: the 2D trace happens when the operator needs it
local m2 = mesh.box{cells = {6, 6}, cell = "tri"}
local A2 = fe.operator(fe.space(m2, "P1"), p0, {dirichlet = "all"})
local u2, info2 = solve.cg(A2, {rtol = 1e-10})
check(info2.converged and u2:max() > 0.07 and u2:max() < 0.08, "2D Poisson max %g", u2:max())

-- raw C mode: the Laplacian by hand gives the traced Poisson's solution
local raw = physics.new{components = 1, f0 = "f0[0] = -1.0;",
                        f1 = "for (int d = 0; d < DIM; d++) f1[d] = du[d];",
                        g3 = "for (int d = 0; d < DIM; d++) g3[d * DIM + d] = 1.0;"}
local Ar = fe.operator(S, raw, {dirichlet = "all"})
local At = fe.operator(S, p0, {dirichlet = "all"})
local ur = solve.cg(Ar, {rtol = 1e-12})
local ut = solve.cg(At, {rtol = 1e-12})
check(ur:copy():axpy(-1, ut):norm() < 1e-9 * ut:norm(), "raw C and traced Poisson disagree")

-- mistakes
expect_error(function() return physics.new{f1 = function(u, du) return du + u end} end,
             "test_physics.lua:", "shape mismatch", "vector(3) + scalar")
expect_error(function() return physics.new{f0 = function(u) if u > 0 then return u end return 0 end} end,
             "test_physics.lua:", "physics.select")
expect_error(function() return physics.new{f0 = function(u) return math.floor(u) end} end,
             "math.floor is not differentiable")
expect_error(function() return physics.new{f1 = function(u, du) return du * du end} end, "physics.dot")
expect_error(function() return physics.new{f0 = function(u, du, x, a) return a.kappa * u end} end,
             "symbol, a number", "nil")
expect_error(function() return physics.new{f0 = function(u, du) return du end} end,
             "physics f0 returned a vector(3) where a scalar is expected")
expect_error(function() return heat:set{tau = 1} end, "test_physics.lua:", "no constant 'tau'", "dt", "u_old")
-- a string coefficient is a C expression of x (and a, k): the field's names there are the
-- kernels' pointers, refused by name before any kernel is made (u * u had reached the compiler)
for _, e in ipairs{"1 + u * u", "1 + u[0]", "du[1] + x[0]", "exp(-w)", "1 + df[2]"} do
  expect_error(function() return physics.poisson{kappa = e, source = 1} end,
               "x[0..2] only", "'" .. e:match("[%a_]+[%w_]*", e:find("[udwf]")) .. "'")
end
check(pcall(physics.poisson, {kappa = "1 + 1e3 * x[0] + fabs(0x1p3) + sqrt(x[1])"}),
      "a coefficient of x with numbers and functions is accepted")
expect_error(function() return physics.new{components = 1, f0 = "f0[0] = u[0] +* 1;"} end,
             "does not compile", "generated line")
expect_error(function() return physics.new{f0 = "f0[0] = 1;", f1 = function() return 0 end} end,
             "both traced functions or both C strings")
expect_error(function() return physics.new{g3 = function() return 1 end} end, "derived from f0 and f1")
-- linear physics: the residual's rule counts u's degree in f0, so residual(u) = J u exactly
-- (a reaction term c u was integrated one degree too low: 5% apart on P1)
for _, sp in ipairs({"P1", "P2"}) do
  local ml = mesh.box{cells = {3, 3, 3}, cell = "tet", distort = 0.2}
  local VL = fe.space(ml, sp)
  local AL = fe.operator(VL, physics.new{f0 = function(u) return 2 * u end})
  local ul = VL:interpolate(function(x) return x[1] * x[2] + x[3] end)
  local rl = AL:residual(ul)
  check(rl:copy():axpy(-1, AL:apply(ul)):norm() <= 1e-13 * rl:norm(),
        "%s: f0 = 2u: residual(u) and J u differ", sp)
end
T.done()
