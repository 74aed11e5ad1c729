-- Strategy ebe's variants (Kiss et al.): the scatter by atomics or by color and the element
-- matrices stored or recomputed in every action all give transpose's Jacobian action to
-- 1e-12 in double on cpu and opencl (P1 and P2 tets, Q1 and Q2 hexes, elasticity P1,
-- Dirichlet by name); their reports count what they do (a launch per color; recompute adds
-- the element-matrix kernel's flops and bytes); CG and BiCG (convection-diffusion, Jacobi)
-- on ebe color reach the matrix-free solutions; recompute survives its own realization
-- being the oldest of a full list; options that do not fit are refused by name.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff, expect_error = T.check, T.max_rel_diff, T.expect_error
local backends = T.backends()

local poisson = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}
local variants = {
  {scatter = "atomic", recompute = false}, {scatter = "atomic", recompute = true},
  {scatter = "color", recompute = false}, {scatter = "color", recompute = true},
}

-- Every variant's action equals transpose's on cpu in double; ncolors: the mesh's colors of
-- single cells, which the color variant launches one by one.
local function ebe_equals_transpose(name, A, w, ncolors)
  local ref = A:apply(w, {backend = "cpu", strategy = "transpose"})
  for _, be in ipairs(backends) do
    local _, erep = A:element_matrices{backend = be}
    local base
    for _, v in ipairs(variants) do
      local y, rep = A:apply(w, {backend = be, strategy = "ebe", scatter = v.scatter,
                                 recompute = v.recompute})
      local d = rel_diff(y:to("cpu", "double"), ref)
      local tag = ("%s on %s, scatter %s, recompute %s"):format(name, be, v.scatter,
                                                               tostring(v.recompute))
      check(rep.strategy == "ebe" and d <= 1e-12, "%s: off transpose by %.1e", tag, d)
      base = base or rep -- atomic, stored
      if v.scatter == "color" then
        local extra = rep.launches - base.launches - (v.recompute and 1 or 0)
        check(extra == ncolors - 1, "%s: %d launches for %d colors", tag, rep.launches, ncolors)
      end
      if v.recompute then
        local color_bytes = v.scatter == "color" and 4 * A.space.mesh.ncells or 0
        check(rep.flops == base.flops + erep.flops and
              rep.bytes == base.bytes + erep.bytes + color_bytes,
              "%s: counts %g flops %g bytes = product + element matrices (%g, %g)", tag,
              rep.flops, rep.bytes, base.flops + erep.flops, base.bytes + erep.bytes)
      end
    end
  end
  print(("%-22s ebe atomic/color x stored/recomputed = transpose on %s (%d colors)"):format(
        name, table.concat(backends, ", "), ncolors))
end

local tets = mesh.box{cells = {3, 3, 3}, cell = "tet", distort = 0.2}
local hexes = mesh.box{cells = {3, 3, 3}, cell = "hex", distort = 0.2}
local function smooth(x) return x[1] * x[2] - x[3] * x[3] + 0.5 end
for _, case in ipairs({{"P1", tets}, {"P2", tets}, {"Q1", hexes}, {"Q2", hexes}}) do
  local V = fe.space(case[2], case[1])
  local A = fe.operator(V, poisson, {dirichlet = {"xmin", "ymax"}})
  ebe_equals_transpose(case[1] .. " Poisson", A, V:interpolate(smooth), (case[2]:color(1)))
end
do
  local V = fe.space(tets, {family = "P", order = 1, components = 3})
  local A = fe.operator(V, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = {"zmin"}})
  local w = V:interpolate(function(x) return {x[1] * x[2], x[3], -x[1]} end)
  ebe_equals_transpose("P1^3 elasticity", A, w, (tets:color(1)))
end

-- CG on ebe color (stored and recomputed) reaches transpose's solution
do
  local A = fe.operator(fe.space(tets, "P2"), poisson, {dirichlet = "all"})
  local x0, i0 = solve.cg(A, {strategy = "transpose", rtol = 1e-10})
  for _, rc in ipairs({false, true}) do
    local x1, i1 = solve.cg(A, {strategy = "ebe", scatter = "color", recompute = rc, rtol = 1e-10})
    check(i1.converged and rel_diff(x1, x0) <= 1e-8, "cg on ebe color (recompute %s, %d its) = "
          .. "cg on transpose (%d its): %.1e", tostring(rc), i1.iterations, i0.iterations,
          rel_diff(x1, x0))
  end
  print(("P2 Poisson: CG on ebe color (stored, recomputed) = CG on transpose (%d iterations)")
        :format(i0.iterations))
end

-- the Kiss setting in small: convection-diffusion by BiCG with Jacobi on ebe color (its
-- transposed action from the transposed physics' element matrices, colored too) equals BiCG
-- matrix-free
do
  local V = fe.space(mesh.box{cells = {4, 4, 4}, cell = "tet"}, "P1")
  local cd = physics.convection_diffusion{kappa = 1, velocity = {3, -2, 1}, source = 1}
  local A = fe.operator(V, cd, {dirichlet = "all"})
  local x0, i0 = solve.bicg(A, {strategy = "transpose", pc = "jacobi", rtol = 1e-11})
  for _, rc in ipairs({false, true}) do
    local x1, i1 = solve.bicg(A, {strategy = "ebe", scatter = "color", recompute = rc,
                                  pc = "jacobi", rtol = 1e-11})
    check(i0.converged and i1.converged and rel_diff(x1, x0) <= 1e-8, "bicg on ebe color "
          .. "(recompute %s, %d its) = bicg matrix-free (%d its): %.1e", tostring(rc),
          i1.iterations, i0.iterations, rel_diff(x1, x0))
  end
  print(("convection-diffusion: BiCG + Jacobi on ebe color = BiCG matrix-free (%d iterations)")
        :format(i0.iterations))
end

-- recompute realizes "transpose" inside ebe's own action: with ebe's realization the oldest
-- of a full list (8) and transpose's dropped, the action still runs, and by color its sums
-- are the same bits
do
  local V = fe.space(tets, "P1")
  local A = fe.operator(V, poisson, {dirichlet = "all"})
  local w = V:interpolate(smooth)
  local o = {backend = "cpu", strategy = "ebe", scatter = "color", recompute = true}
  local y0 = A:apply(w, o) -- realizations: transpose (ebe's setup), then ebe
  for b = 1, 7 do A:source("apply", {backend = "cpu", strategy = "transpose", block = b}) end
  local y1 = A:apply(w, o)
  check(rel_diff(y1, y0) == 0, "recompute with a full list of realizations: %.1e", rel_diff(y1, y0))
end

-- the other strategies refuse ebe's options, naming the strategies that take them
-- (tests/scripts/test_strategy_options.lua checks the rule for every strategy)
do
  local V = fe.space(hexes, "Q1")
  local A = fe.operator(V, poisson, {dirichlet = "all"})
  local w = V:interpolate(smooth)
  for _, st in ipairs({"transpose", "patch", "csr"}) do
    expect_error(function() return A:apply(w, {backend = "cpu", strategy = st, recompute = true}) end,
                 "option recompute is not an option of strategy " .. st, "strategy ebe takes it")
  end
  expect_error(function() return A:apply(w, {strategy = "sumfact", recompute = true}) end,
               "sumfact", "recompute", "ebe")
  expect_error(function() return A:apply(w, {strategy = "sumfact", scatter = "color"}) end,
               "sumfact", "color")
end

-- refusals name the option
do
  local A = fe.operator(fe.space(tets, "P1"), poisson)
  local w = A.space:interpolate(smooth)
  expect_error(function() return A:apply(w, {strategy = "ebe", scatter = "nodes"}) end,
               "ebe", "nodes", "atomic", "color")
  expect_error(function() return A:apply(w, {strategy = "ebe", scatter = "colour"}) end,
               "scatter", "colour")
  expect_error(function() return A:apply(w, {strategy = "ebe", recompute = 1}) end,
               "recompute", "boolean")
  local Vn = fe.space(hexes, "Q1")
  local An = fe.operator(Vn, T.nonlinear(Vn))
  local wn = Vn:interpolate(smooth)
  expect_error(function() return An:apply(wn, {strategy = "ebe", recompute = true}) end, "ebe",
               "depends on the state")
end

-- a mesh whose cells cannot be colored in 64 colors: 70 triangles around one vertex
do
  local path, n = os.tmpname() .. ".msh", 70
  local f = check(io.open(path, "w"))
  f:write("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n", n + 1, "\n1 0 0 0\n")
  for i = 0, n - 1 do
    local t = 2 * math.pi * i / n
    f:write(("%d %.17g %.17g 0\n"):format(i + 2, math.cos(t), math.sin(t)))
  end
  f:write("$EndNodes\n$Elements\n", n, "\n")
  for i = 0, n - 1 do f:write(("%d 2 2 1 1 1 %d %d\n"):format(i + 1, i + 2, (i + 1) % n + 2)) end
  f:write("$EndElements\n")
  f:close()
  local loaded, fan = pcall(mesh.load, path)
  os.remove(path)
  if not loaded and tostring(fan):find("needs the Gmsh SDK", 1, true) then
    T.skip("the fan of 70 triangles: " .. fan)
  else
    check(loaded, fan)
    local A = fe.operator(fe.space(fan, "P1"), poisson)
    local w = A.space:interpolate(smooth)
    expect_error(function() return A:apply(w, {strategy = "ebe", scatter = "color"}) end,
                 "ebe", "color", "more than 64 colors", "atomic")
    local y = A:apply(w, {strategy = "ebe"})
    check(rel_diff(y, A:apply(w, {strategy = "transpose"})) <= 1e-12, "the fan by atomics")
  end
end
T.done()
