-- Folded per-point data (engine/operator/qdata.h): the Jacobian action that reads the words made once
-- at setup equals the one that evaluates geometry and physics at every point, on every
-- backend here, in double and single, for sumfact and transpose: kappa(x), a mass term, a
-- region table, elasticity (45 words), a nonsymmetric convection term; a Jacobian that reads
-- u is never folded; changing a named constant the words read makes them again; in single, a
-- mesh far from the origin keeps single's rounding, folded or not (the coordinates read less
-- an origin, the factors made in double).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

local hex = mesh.box{cells = {3, 3, 2}, cell = "hex", distort = 0.2}
local tet = mesh.box{cells = {3, 2, 2}, cell = "tet", distort = 0.2}
local kx = "1 + 0.5 * x[0]"
local cases = {
  {"Q3 poisson kappa(x)", hex, "Q3", physics.poisson{kappa = kx, source = 1}, "sumfact"},
  {"Q2 reaction-diffusion", hex, "Q2", physics.reaction_diffusion{c = "2 + x[1]", kappa = kx}, "sumfact"},
  {"Q2 region table", hex, "Q2", physics.poisson{kappa = {domain = 2.5}}, "sumfact"},
  {"Q2 elasticity E(x)", hex, {family = "Q", order = 2, components = 3},
   physics.elasticity{E = "1 + x[2]", nu = 0.3}, "sumfact"},
  {"Q2 convection", hex, "Q2", physics.convection_diffusion{kappa = kx, velocity = {1, 0.5, 0}}, "sumfact"},
  {"Q2 poisson kappa(x), transpose", hex, "Q2", physics.poisson{kappa = kx}, "transpose"},
  {"P1 poisson kappa(x)", tet, "P1", physics.poisson{kappa = kx}, "transpose"},
  {"P2 reaction-diffusion", tet, "P2", physics.reaction_diffusion{c = 3, kappa = kx}, "transpose"},
  {"P2 elasticity", tet, {family = "P", order = 2, components = 3}, physics.elasticity{E = 2, nu = 0.25}, "transpose"},
  {"P2 convection", tet, "P2", physics.convection_diffusion{kappa = kx, velocity = {0.3, -1, 2}}, "transpose"},
}
-- every case on the cpu in double; opencl and single precision on every other one (each
-- strategy meets both), to keep the compiles few
local combos = {{{"cpu", "double"}, {"opencl", "double"}}, {{"cpu", "double"}, {"cpu", "single"}, {"opencl", "single"}}}
for i, c in ipairs(cases) do
  local name, m, space, pde, strategy = table.unpack(c)
  local V = fe.space(m, space)
  local A = fe.operator(V, pde, {dirichlet = {"xmin"}})
  local v = V:interpolate(function(x) return math.sin(2 * x[1]) + x[2] * x[3] + 0.3 end)
  for _, bp in ipairs(combos[i % 2 + 1]) do
    local backend, prec = bp[1], bp[2]
    do
      local o = {backend = backend, precision = prec, strategy = strategy}
      o.fold = true
      local y1, rep = A:apply(v, o)
      o.fold = false
      local y0 = A:apply(v, o)
      local rel = y1:copy():axpy(-1, y0):norm() / y0:norm()
      local tol = prec == "double" and 1e-12 or 2e-5
      check(rel <= tol, "%s, %s %s: folded and evaluated differ by %.3g", name, backend, prec, rel)
      check(rep.why:find("folded per point", 1, true), "%s: the report does not say it folded: %s",
            name, rep.why)
    end
  end
  print(("%-32s folded = evaluated"):format(name))
end

-- Gmsh meshes (where the SDK is here): straight and curved hexes of a shell, tets of a torso
-- with four regions; every strategy that applies agrees with transpose evaluating per point
-- (the curved shell's folded data on opencl too: made from its second-order nodes there)
local gmsh_cases = {
  {"meshes/shell_hex.geo", {order = 1}, "Q2", physics.poisson{kappa = kx}},
  {"meshes/shell_hex.geo", {order = 2}, "Q2", physics.reaction_diffusion{c = 2, kappa = kx}},
  {"meshes/torso.geo", {size = 0.15}, "P2",
   physics.poisson{kappa = {body = 1, lung_left = 0.2, lung_right = 0.2, heart = 5}}},
}
for _, c in ipairs(gmsh_cases) do
  local m = T.gmsh_mesh(c[1], c[2])
  if m then
    local V = fe.space(m, c[3])
    local A = fe.operator(V, c[4], {dirichlet = {m:tags().boundary[1]}})
    local v = V:interpolate(function(x) return math.sin(2 * x[1]) + x[2] * x[3] + 0.3 end)
    local y0 = A:apply(v, {strategy = "transpose", fold = false})
    local names = A:strategies() -- those that apply
    check(#names >= 3, "%s: only %d strategies apply", c[1], #names)
    for _, name in ipairs(names) do
      local y, rep = A:apply(v, {strategy = name})
      local rel = y:copy():axpy(-1, y0):norm() / y0:norm()
      check(rel <= 1e-11, "%s %s %s: %s differs from transpose by %.3g (%s)", c[1], c[3],
            c[2].order or "", name, rel, rep.why)
    end
    if c[2].order == 2 then -- curved: the setup kernel's second-order map on another backend
      local y, rep = A:apply(v, {backend = "opencl", strategy = "sumfact"})
      local rel = y:to("cpu", "double"):axpy(-1, y0):norm() / y0:norm()
      check(rel <= 1e-11 and rep.why:find("folded per point", 1, true),
            "curved shell on opencl: folded sumfact differs from transpose by %.3g (%s)", rel, rep.why)
    end
    print(("%s %s (%d cells): every strategy = transpose evaluated per point"):format(c[1], c[3], m.ncells))
  end
end

-- the default: folded where the physics reads x on distorted cells, not on a uniform box with
-- a constant coefficient; the solve is the same
local Vq = fe.space(hex, "Q2")
local Ax = fe.operator(Vq, physics.poisson{kappa = kx, source = 1}, {dirichlet = "all"})
local w = Vq:interpolate(function(x) return x[1] * x[2] + x[3] end)
local _, rep = Ax:apply(w, {strategy = "sumfact"})
check(rep.why:find("folded per point: 6 words", 1, true), "kappa(x) on distorted cells: %s", rep.why)
local u1, i1 = solve.cg(Ax, {pc = "jacobi", rtol = 1e-10})
local u0, i0 = solve.cg(Ax, {pc = "jacobi", rtol = 1e-10, fold = false})
check(i1.converged and math.abs(i1.iterations - i0.iterations) <= 1,
      "folded solve %d iterations, evaluated %d", i1.iterations, i0.iterations)
check(u1:copy():axpy(-1, u0):norm() <= 1e-8 * u0:norm(), "the folded solve's answer differs")
local Vu = fe.space(mesh.box{cells = {3, 3, 3}, cell = "hex"}, "Q2")
local A1 = fe.operator(Vu, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
_, rep = A1:apply(Vu:interpolate(1), {strategy = "sumfact"})
check(not rep.why:find("folded", 1, true), "a uniform box with kappa 1 folded: %s", rep.why)
print("the default folds kappa(x) on distorted cells, not kappa 1 on a uniform box; the solve agrees")

-- a Jacobian that reads u: evaluated at every point, and fold = true says why not
local Ap = fe.operator(Vq, physics.p_laplacian{p = 3}, {dirichlet = "all"})
_, rep = Ap:apply(w, {at = w, strategy = "sumfact"})
check(not rep.why:find("folded", 1, true), "the p-Laplacian folded: %s", rep.why)
T.expect_error(function() Ap:apply(w, {at = w, fold = true}) end, "fold = true", "reads the state u")
T.expect_error(function() Ax:apply(w, {strategy = "csr", fold = true}) end, "strategy csr")
print("kappa(u) is evaluated per point; fold = true on it, or on csr, is an error")

-- a named constant the words read: set, and the words are made again
local pk = physics.new{constants = {k = 2},
                       f1 = function(_, du, x, a) return a.k * (1 + x[1] * x[1]) * du end}
local Ak = fe.operator(Vq, pk, {dirichlet = "all"})
for _, backend in ipairs({"cpu", "opencl"}) do
  local o = {backend = backend, strategy = "sumfact", fold = true}
  local ya = Ak:apply(w, o)
  pk:set{k = 5}
  local yb = Ak:apply(w, o)
  o.fold = false
  local ye = Ak:apply(w, o)
  local rel = yb:copy():axpy(-1, ye):norm() / ye:norm()
  check(rel <= 1e-12, "%s: after pde:set the folded action differs by %.3g", backend, rel)
  check(yb:copy():axpy(-1, ya):norm() > 0.1 * ya:norm(), "%s: k 2 -> 5 changed nothing", backend)
  pk:set{k = 2}
end
print("pde:set makes the folded words again")

-- single precision on a mesh far from the origin (cells 1e-5 of their distance from it): the
-- kernels read the coordinates less an origin (a node's) and the physics adds it back to x,
-- and the folded words come from factors made in double and rounded once, so every action
-- stays within single's rounding of double's (2e-6); with the coordinates rounded to float
-- as they were, a cell's edges lost digits: csr 3e-4, sumfact from the vertices 7e-5
local far = mesh.box{cells = {3, 3, 2}, cell = "hex", lower = {1000, 2000, -3000},
                     upper = {1000.01, 2000.01, -2999.99}, distort = 0.2}
local Vf = fe.space(far, "Q2")
local Af = fe.operator(Vf, physics.poisson{kappa = "1 + 50 * (x[0] - 1000)"}, {dirichlet = {"xmin"}})
local vf = Vf:interpolate(function(x) return math.sin(200 * x[1]) + 1e4 * (x[3] + 3000) + 0.3 end)
local yd = Af:apply(vf, {backend = "cpu", strategy = "transpose", fold = false})
local far_cases = {{"cpu", "sumfact", true}, {"opencl", "sumfact", true}, {"cpu", "sumfact", false},
                   {"cpu", "csr"}, {"cpu", "patch"}}
for _, c in ipairs(far_cases) do
  local ys, rs = Af:apply(vf, {backend = c[1], precision = "single", strategy = c[2], fold = c[3]})
  local rel = ys:to("cpu", "double"):axpy(-1, yd):norm() / yd:norm()
  check(rel <= 1e-5 and (c[3] == nil or (rs.why:find("folded per point", 1, true) ~= nil) == c[3]),
        "%s %s single (fold %s), a mesh far from the origin: differs from double by %.3g (%s)",
        c[1], c[2], tostring(c[3]), rel, rs.why)
end
print("single precision on a mesh far from the origin: folded, from the vertices, csr, patch to single's rounding")
T.done()
