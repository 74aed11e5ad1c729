-- The preconditioner layer from Lua (engine/solve/precond.h) and its Chebyshev-Jacobi unit: on a
-- Q2 hex Poisson problem CG with pc = "chebyshev" reaches the Jacobi-PCG solution to 1e-8 in
-- fewer iterations, its report counts the polynomial's Jacobian actions per iteration and
-- info says which preconditioner ran and its setup time; bicgstab and gmres with it reach the
-- same solution; on cpu and on opencl where it runs. On a tiny problem, checked against a
-- dense computation from columns of A:apply: the Lanczos bounds bracket the extreme
-- eigenvalues of D^-1 J (exact with enough steps), M^-1 is symmetric, and the spectrum of
-- M^-1 J lies in [1 - eps, 1 + eps], eps = 1 / T_k(sigma), the Chebyshev bound. One P made by
-- solve.precond serves two solves (set up once, applications grow); Newton takes pc =
-- "chebyshev"; misuse (unknown unit, P of another operator or backend or precision, bad
-- degree or ratio, a closed operator) is a clear error.
-- Run: build/felab tests/scripts/test_precond.lua (exits nonzero on failure).

local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error, rel_diff = T.check, T.expect_error, T.rel_diff

-- the interval [a, b] a Chebyshev preconditioner's describe states
local function bounds(P)
  local a, b = P.describe:match("on %[([^,]+), ([^%]]+)%]")
  return tonumber(a), tonumber(b)
end

-- Poisson on Q2 hexes: 9261 dofs
local m = mesh.box{cells = {10, 10, 10}, cell = "hex", distort = 0.1}
local V = fe.space(m, "Q2")
local A = fe.operator(V, physics.poisson{kappa = "1 + x[0]", source = 1}, {dirichlet = {"all"}, value = 0})
local ref
for _, be in ipairs(T.backends()) do
  local uj, ij = solve.cg(A, {pc = "jacobi", rtol = 1e-10, backend = be})
  local uc, ic = solve.cg(A, {pc = "chebyshev", rtol = 1e-10, backend = be})
  ref = ref or uj
  check(ij.converged and ic.converged, "%s: cg converged (jacobi %s, chebyshev %s)", be, ij.reason, ic.reason)
  local d = rel_diff(uc, uj)
  check(d <= 1e-8, "%s: cg chebyshev off jacobi's solution by %.3g", be, d)
  check(ic.iterations < ij.iterations, "%s: chebyshev took %d iterations, jacobi %d", be, ic.iterations, ij.iterations)
  check(ij.pc == "jacobi" and ic.pc:find("Chebyshev-Jacobi degree 3 on [", 1, true)
        and ic.pc:find("(10 Lanczos steps)", 1, true), "%s: info.pc = %q, %q", be, ij.pc, ic.pc)
  check(ij.pc_setup_seconds == 0 and ic.pc_setup_seconds > 0
        and ic.report.setup_seconds >= ic.pc_setup_seconds, "%s: setup times", be)
  -- degree 3: two more Jacobian actions per iteration than Jacobi-PCG, counted
  local fj, fc = ij.report.flops / ij.iterations, ic.report.flops / ic.iterations
  check(fc > 2.5 * fj and fc < 3.5 * fj, "%s: flops per iteration %.3g against jacobi's %.3g", be, fc, fj)
  check(ic.report.launches / ic.iterations > ij.report.launches / ij.iterations, "%s: launches", be)
  print(("%-6s cg jacobi %3d its, chebyshev %3d its (%s), |x - x_jacobi|/|x| = %.1e  ok"):format(
        be, ij.iterations, ic.iterations, ic.pc, d))
  for _, s in ipairs{"bicgstab", "gmres"} do
    local x, i = solve[s](A, {pc = "chebyshev", degree = 2, rtol = 1e-10, backend = be})
    local dx = rel_diff(x, uj)
    check(i.converged and dx <= 1e-8, "%s: %s with chebyshev: %s, off by %.3g", be, s, i.reason, dx)
    check(i.pc:find("degree 2", 1, true), "%s: %s info.pc = %q", be, s, i.pc)
    print(("%-6s %-8s chebyshev degree 2 %3d its, |x - x_jacobi|/|x| = %.1e  ok"):format(be, s, i.iterations, dx))
  end
  if be ~= "cpu" then
    local dx = rel_diff(uc:to("cpu"), ref)
    check(dx <= 1e-8, "%s: chebyshev's solution off cpu's by %.3g", be, dx)
  end
end

-- a tiny problem, dense: J from columns of A:apply, M^-1 from columns of P:apply
local mt = mesh.box{cells = {4, 4}, cell = "quad", distort = 0.2}
local Vt = fe.space(mt, "Q2")
local At = fe.operator(Vt, physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}, {dirichlet = {"all"}, value = 0})
local n = Vt.ndofs
local X = Vt:interpolate(function(x) return x[1] end):values()
local Y = Vt:interpolate(function(x) return x[2] end):values()
local function columns(f)
  local M = {}
  for i = 1, n do M[i] = {} end
  for j = 1, n do
    local e = Vt:interpolate(function(x)
      return (math.abs(x[1] - X[j]) < 1e-12 and math.abs(x[2] - Y[j]) < 1e-12) and 1 or 0
    end)
    local c = f(e):values()
    for i = 1, n do M[i][j] = c[i] end
  end
  return M
end
-- the eigenvalues of a symmetric matrix (cyclic Jacobi rotations), ascending
local function eigenvalues(S)
  local N, a = #S, {}
  for i = 1, N do a[i] = {table.unpack(S[i])} end
  for _ = 1, 60 do
    local off = 0
    for i = 1, N do for j = i + 1, N do off = off + a[i][j] ^ 2 end end
    if off < 1e-26 then break end
    for p = 1, N - 1 do
      for q = p + 1, N do
        if a[p][q] ~= 0 then
          local th = (a[q][q] - a[p][p]) / (2 * a[p][q])
          local t = (th >= 0 and 1 or -1) / (math.abs(th) + math.sqrt(th * th + 1))
          local c = 1 / math.sqrt(t * t + 1)
          local s = t * c
          for k = 1, N do
            a[k][p], a[k][q] = c * a[k][p] - s * a[k][q], s * a[k][p] + c * a[k][q]
          end
          for k = 1, N do
            a[p][k], a[q][k] = c * a[p][k] - s * a[q][k], s * a[p][k] + c * a[q][k]
          end
        end
      end
    end
  end
  local ev = {}
  for i = 1, N do ev[i] = a[i][i] end
  table.sort(ev)
  return ev
end
local J = columns(function(e) return At:apply(e) end)
local S, free = {}, {} -- S = D^-1/2 J D^-1/2 on the free rows (J is the identity elsewhere)
for i = 1, n do
  local coupled = false
  for j = 1, n do coupled = coupled or (j ~= i and J[i][j] ~= 0) end
  if coupled then free[#free + 1] = i end
end
for a, i in ipairs(free) do
  S[a] = {}
  for b, j in ipairs(free) do S[a][b] = J[i][j] / math.sqrt(J[i][i] * J[j][j]) end
end
local ev = eigenvalues(S)
local lmin, lmax = ev[1], ev[#ev]
check(#free > 10 and #free < n and lmin > 0 and lmax < 4, "dense D^-1 J: %d free rows, [%g, %g]", #free, lmin, lmax)
-- default 10 Lanczos steps: Ritz values inside the spectrum, [lower, upper] reaches past lmax
local P10 = solve.precond(At, {pc = "chebyshev"})
local a10, b10 = bounds(P10)
check(a10 >= lmin * (1 - 1e-3) and b10 / 1.1 <= lmax * (1 + 1e-3) and b10 >= lmax,
      "10 Lanczos steps: [%g, %g] against the spectrum [%g, %g]", a10, b10, lmin, lmax)
-- as many steps as free rows: the Ritz values are the extreme eigenvalues
local Pex = solve.precond(At, {pc = "chebyshev", lanczos = #free + 5, degree = 3})
local a, b = bounds(Pex)
check(T.close(a, lmin, 1e-3) and T.close(b, 1.1 * lmax, 1e-3),
      "exact Lanczos: [%g, %g], expected [%g, %g]", a, b, lmin, 1.1 * lmax)
print(("dense    D^-1 J in [%.4g, %.4g]; 10 Lanczos steps give [%.4g, %.4g]; exact [%.4g, %.4g]  ok"):format(
      lmin, lmax, a10, b10, a, b))
-- M^-1 = p(D^-1 J) D^-1: symmetric; D^1/2 M^-1 D^1/2 = p(S) commutes with S, and the
-- eigenvalues of p(S) S lie in [1 - eps, 1 + eps] on [a, b]
local Mi = columns(function(e) return Pex:apply(e) end)
local asym, C = 0, {}
for i = 1, n do for j = 1, n do asym = math.max(asym, math.abs(Mi[i][j] - Mi[j][i])) end end
check(asym <= 1e-12, "M^-1 is not symmetric: %.3g", asym)
for x, i in ipairs(free) do
  C[x] = {}
  for y, j in ipairs(free) do
    local s = 0
    for z, k in ipairs(free) do s = s + Mi[i][k] * math.sqrt(J[i][i] * J[k][k]) * S[z][y] end
    C[x][y] = s
  end
end
for x = 1, #free do for y = x + 1, #free do C[x][y] = 0.5 * (C[x][y] + C[y][x]); C[y][x] = C[x][y] end end
local ec = eigenvalues(C)
local sigma = (b + a) / (b - a)
local t3 = 4 * sigma ^ 3 - 3 * sigma -- T_3(sigma)
local eps = 1 / t3
check(ec[1] >= (1 - eps) * (1 - 1e-3) and ec[#ec] <= (1 + eps) * (1 + 1e-3),
      "M^-1 J in [%g, %g], Chebyshev bound [%g, %g]", ec[1], ec[#ec], 1 - eps, 1 + eps)
print(("dense    M^-1 J in [%.4f, %.4f] within [1 - eps, 1 + eps], eps = %.4f (cond %.2f, jacobi %.2f)  ok"):format(
      ec[1], ec[#ec], eps, ec[#ec] / ec[1], lmax / lmin))

-- made once, two solves: set up once, applications grow, the same solution
local P = solve.precond(A, {pc = "chebyshev", degree = 4})
check(P.name == "chebyshev" and P.describe:find("degree 4", 1, true) and P.applications == 0
      and P.setup_seconds > 0, "P fields: %s", tostring(P))
check(tostring(P):find("chebyshev", 1, true) and tostring(P):find(P.describe, 1, true), "tostring(P)")
local setup = P.setup_seconds
local x1, i1 = solve.cg(A, {pc = P, rtol = 1e-10})
local n1 = P.applications
local x2, i2 = solve.bicgstab(A, {pc = P, rtol = 1e-10})
-- cg: z0 and one per iteration but the last; bicgstab: two per iteration (one in a last
-- iteration that stops halfway)
local n2 = P.applications - n1
check(n1 == i1.iterations and (n2 == 2 * i2.iterations or n2 == 2 * i2.iterations - 1),
      "applications %d after cg (%d its), %d more after bicgstab (%d its)", n1, i1.iterations, n2,
      i2.iterations)
check(P.setup_seconds == setup and i1.pc_setup_seconds == 0 and i2.pc_setup_seconds == 0, "set up once")
check(rel_diff(x1, ref) <= 1e-8 and rel_diff(x2, ref) <= 1e-8, "solves with P reach the solution")
local z = P:apply(V:interpolate(1))
check(P.applications == n1 + n2 + 1 and z:norm() > 0, "P:apply")
print(("reuse    %s: cg %d its, bicgstab %d its, %d applications, setup %.3f s once  ok"):format(
      P.describe, i1.iterations, i2.iterations, P.applications, P.setup_seconds))

-- Newton with pc = "chebyshev" on a p-Laplacian-like law (J symmetric positive definite)
local law = physics.new{
  f1 = function(u, du) return (1 + 0.5 * physics.dot(du, du)) * du end,
  f0 = function(u, du) return -1 end}
local An = fe.operator(fe.space(mesh.box{cells = {4, 4, 4}, cell = "hex"}, "Q2"), law, {dirichlet = {"all"}, value = 0})
local un, inj = solve.newton(An, {pc = "jacobi", rtol = 1e-10})
local uc, inc = solve.newton(An, {pc = "chebyshev", degree = 3, lanczos = 8, rtol = 1e-10})
check(inj.converged and inc.converged and rel_diff(uc, un) <= 1e-8, "newton with chebyshev: %s", inc.reason)
check(inc.pc:find("Chebyshev-Jacobi degree 3", 1, true) and inc.pc:find("(8 Lanczos steps)", 1, true)
      and inc.pc_setup_seconds > 0 and inc.linear_iterations < inj.linear_iterations,
      "newton info: %q, %d linear its against jacobi's %d", inc.pc, inc.linear_iterations, inj.linear_iterations)
print(("newton   chebyshev %d steps, %d linear its (jacobi %d)  ok"):format(
      inc.iterations, inc.linear_iterations, inj.linear_iterations))

-- misuse
local msg = expect_error(function() solve.cg(A, {pc = "ilu"}) end, "solve.cg", "unknown preconditioner", "ilu",
                         "none", "jacobi", "chebyshev")
expect_error(function() solve.precond(A, {pc = "ilu"}) end, "solve.precond", "unknown preconditioner", "chebyshev")
expect_error(function() solve.newton(An, {pc = "ilu"}) end, "solve.newton", "unknown preconditioner", "chebyshev")
expect_error(function() solve.cg(At, {pc = P}) end, "cg", "was made for another operator", "degree 4")
expect_error(function() solve.gmres(A, {pc = Pex}) end, "gmres", "was made for another operator")
expect_error(function() solve.cg(A, {pc = P, precision = "float"}) end, "made for cpu in double",
             "the solve runs on cpu in single")
expect_error(function() solve.newton(An, {pc = P}) end, "solve.newton", "pc must be a unit's name")
expect_error(function() solve.precond(A, {pc = "chebyshev", at = Vt:interpolate(1)}) end, "opts.at", "entries")
expect_error(function() solve.cg(A, {pc = "chebyshev", degree = 0}) end, "degree", ">= 1")
expect_error(function() solve.precond(A, {pc = "chebyshev", ratio = 1}) end, "ratio", "below 1")
expect_error(function() solve.precond(A, {pc = "chebyshev", lanczoz = 3}) end, "lanczoz")
expect_error(function() P:apply(Vt:interpolate(1)) end, "P:apply", "entries")
if T.device("opencl") and T.device("opencl").available then
  expect_error(function() solve.cg(A, {pc = P, backend = "opencl"}) end, "made for cpu in double",
               "the solve runs on opencl in double")
  local Po = solve.precond(A, {pc = "chebyshev", backend = "opencl"})
  local xo = solve.cg(A, {pc = Po, backend = "opencl", rtol = 1e-10})
  check(rel_diff(xo:to("cpu"), ref) <= 1e-8 and Po.backend == "opencl", "P on opencl")
else
  T.skip("preconditioners on opencl: opencl not available")
end
local Pc
do
  local Ac <close> = fe.operator(Vt, physics.poisson{}, {dirichlet = {"all"}})
  Pc = solve.precond(Ac, {pc = "jacobi"})
end
expect_error(function() Pc:apply(Vt:interpolate(1)) end, "P:apply", "was closed")
print(("misuse   %s  ok"):format(msg:gsub("\n", " ")))

T.done()
