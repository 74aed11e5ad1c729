-- Element matrices by strategy "tensor" (engine/matrix/tensor.c, engine/codegen/kernels/tensor.knl): the
-- reference-tensor contraction equals strategy "quadrature" (cpu, double) entry by entry,
-- to 1e-12 in double and 1e-5 in single, for Poisson P1..P3 on tets and triangles, a
-- per-region conductivity, elasticity P1 and P2, Q1-Q2 on affine hexes and quads (an
-- undistorted box: one Jacobian a cell), and physics with every block of the
-- linearization (reaction, convection, a raw C physics with g0..g3); on the cpu every case,
-- on opencl (and cuda, where it is) a few, since PoCL compiles slowly; with the default block
-- and block 7, which divides neither the cell counts nor the stored ones; Poisson's rows sum
-- to zero; what it cannot do is refused with the reason (distorted hexahedra, the state, x, a
-- field).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local backends = T.backends(true) -- cuda too, where it is available

-- max |Kt - Kq| / max |Kq| over every entry of every cell, and max |Kq|
local function max_rel_diff(Kq, Kt)
  local worst, scale = 0, 0
  for c = 1, Kq.ncells do
    local a, b = Kq:get(c), Kt:get(c)
    for i = 1, Kq.n do
      local ai, bi = a[i], b[i]
      for j = 1, Kq.n do
        worst = math.max(worst, math.abs(ai[j] - bi[j]))
        scale = math.max(scale, math.abs(ai[j]))
      end
    end
  end
  return worst / scale, scale
end

-- max |row sum| / max |entry| of the element matrices
local function max_row_sum(K)
  local worst, scale = 0, 0
  for c = 1, K.ncells do
    local k = K:get(c)
    for i = 1, K.n do
      local s = 0
      for j = 1, K.n do
        s = s + k[i][j]
        scale = math.max(scale, math.abs(k[i][j]))
      end
      worst = math.max(worst, math.abs(s))
    end
  end
  return worst / scale
end

local tets = mesh.box{cells = {4, 4, 4}, cell = "tet", distort = 0.2} -- 384 cells
local tris = mesh.box{cells = {10, 10}, cell = "tri", distort = 0.2}  -- 200 cells
-- four regions (319 tets); the GPU machine's build has no Gmsh to mesh it
local has_torso, torso = pcall(mesh.load, "meshes/torso.geo", {size = 0.5})
if not has_torso then T.skip("regions: " .. tostring(torso)) end
local function vector_space(m, order)
  return fe.space(m, {family = "P", order = order, components = m.dim})
end
local poisson = physics.poisson{kappa = 2, source = "sin(x[0])"} -- x in the residual only
local regions = physics.poisson{kappa = {body = 0.2, lung_left = 0.05, lung_right = 0.07,
                                         heart = 0.4}, source = 1}
local elasticity = physics.elasticity{E = 10, nu = 0.3}
-- every block of M: g0 (w -> df0), g1 (dw -> df0), g2 (w -> df1), g3 (dw -> df1), nonsymmetric
local raw = physics.new{name = "all_blocks", components = 1,
  g0 = "g0[0] = 2;",
  g1 = "for (int d = 0; d < DIM; d++) g1[d] = 0.3 * (d + 1);",
  g2 = "for (int d = 0; d < DIM; d++) g2[d] = -0.2 * (d + 1);",
  g3 = "for (int d = 0; d < DIM; d++) g3[d * DIM + d] = 1.5; g3[1] = 0.25;"}

-- opencl (and cuda): the cases marked, in double with the default block, in single with block 7
local cases = {
  {"Poisson P1 tets", fe.space(tets, "P1"), poisson, zero_rows = true},
  {"Poisson P2 tets", fe.space(tets, "P2"), poisson, zero_rows = true, opencl = true},
  {"Poisson P3 tets", fe.space(tets, "P3"), poisson, zero_rows = true},
  {"Poisson P1 tris", fe.space(tris, "P1"), poisson, zero_rows = true},
  {"Poisson P2 tris", fe.space(tris, "P2"), poisson, zero_rows = true},
  {"Poisson P3 tris", fe.space(tris, "P3"), poisson, zero_rows = true, opencl = true},
  {"elasticity P1 tets", vector_space(tets, 1), elasticity, opencl = true},
  {"elasticity P2 tets", vector_space(tets, 2), elasticity},
  {"elasticity P2 tris", vector_space(tris, 2), elasticity},
  {"reaction P2 tets", fe.space(tets, "P2"), physics.reaction_diffusion{c = 3, kappa = 0.5}},
  {"convection P1 tets", fe.space(tets, "P1"),
   physics.convection_diffusion{kappa = 1, velocity = {3, -2, 1}}},
  {"g0..g3 P2 tris", fe.space(tris, "P2"), raw, opencl = true},
  {"Poisson Q1 hexes", fe.space(mesh.box{cells = {3, 2, 2}, cell = "hex"}, "Q1"), poisson,
   zero_rows = true, opencl = true},
  {"Poisson Q2 quads", fe.space(mesh.box{cells = {4, 3}, cell = "quad"}, "Q2"), poisson,
   zero_rows = true},
  {"elasticity Q1 hexes", fe.space(mesh.box{cells = {2, 2, 3}, cell = "hex"},
                                   {family = "Q", order = 1, components = 3}), elasticity},
}
if has_torso then
  table.insert(cases, 7, {"regions P2 torso", fe.space(torso, "P2"), regions, zero_rows = true,
                          opencl = true})
end

local count = 0
for _, c in ipairs(cases) do
  local name, V, pde = c[1], c[2], c[3]
  local A = fe.operator(V, pde, {dirichlet = "all"})
  local Kq = A:element_matrices{backend = "cpu", precision = "double"}
  local runs = {{"cpu", "double", 0}, {"cpu", "double", 7}, {"cpu", "single", 0}}
  for i = 2, c.opencl and #backends or 1 do
    runs[#runs + 1] = {backends[i], "double", 0}
    runs[#runs + 1] = {backends[i], "single", 7}
  end
  for _, run in ipairs(runs) do
    local be, prec, block = run[1], run[2], run[3]
    local t0 = os.clock()
    local Kt, rep = A:element_matrices{strategy = "tensor", backend = be, precision = prec,
                                       block = block}
    local d = max_rel_diff(Kq, Kt)
    local tol = prec == "double" and 1e-12 or 1e-5
    check(Kt.ncells == V.mesh.ncells and Kt.n == Kq.n and d <= tol,
          "%s %s %s block %d: tensor vs quadrature %.1e", name, be, prec, block, d)
    check(rep.strategy == "tensor" and rep.flops > 0 and rep.bytes > 0 and rep.seconds >= 0,
          "%s: report %s %g flops", name, rep.strategy, rep.flops)
    if c.zero_rows and prec == "double" then
      local rs = max_row_sum(Kt)
      check(rs <= 1e-12, "%s %s block %d: rows sum to %.1e", name, be, block, rs)
    end
    if be == "cpu" and prec == "double" and block == 0 then
      print(("%-19s %3d cells, n %2d: tensor = quadrature to %.1e (%.0f ms; %s)"):format(
            name, Kt.ncells, Kt.n, d, (os.clock() - t0) * 1e3, rep.why))
    end
    count = count + 1
  end
end
print(("tensor = quadrature in %d runs on %s"):format(count, table.concat(backends, ", ")))

-- the state does not matter: the Jacobian of a linear physics is the same at any u
do
  local V = fe.space(tets, "P1")
  local A = fe.operator(V, poisson)
  local u = V:interpolate(function(x) return x[1] * x[2] + x[3] end)
  local d = max_rel_diff(A:element_matrices(), A:element_matrices{strategy = "tensor", at = u})
  check(d <= 1e-12, "tensor at a state vs quadrature at zero: %.1e", d)
end

-- refusals name what stops them
local P1 = fe.space(tets, "P1")
local function tensor_of(V, pde)
  return function() return fe.operator(V, pde):element_matrices{strategy = "tensor"} end
end
expect_error(tensor_of(fe.space(mesh.box{cells = {2, 2, 2}, cell = "hex", distort = 0.3}, "Q1"),
                       poisson),
             "hexahedra: the Jacobian of the map is not constant per cell")
expect_error(tensor_of(P1, physics.p_laplacian{}),
             "the Jacobian of p_laplacian depends on the state")
expect_error(tensor_of(P1, physics.poisson{kappa = "1 + x[0]*x[1]"}),
             "the Jacobian of poisson depends on x")
local kfield = P1:interpolate(function(x) return 1 + x[1] end)
expect_error(tensor_of(P1, physics.new{name = "field_kappa", fields = {k = kfield},
                                        f1 = function(u, du, x, a) return a.k * du end}),
             "the Jacobian of field_kappa depends on the auxiliary field 'k'")
local A = fe.operator(P1, poisson)
expect_error(function() return A:element_matrices{strategy = "tensor", variant = "reg_nojac"} end,
             "\"tensor\" takes no variant")
expect_error(function() return A:element_matrices{strategy = "tensor", block = 5000} end,
             "block = 5000")
expect_error(function() return A:element_matrices{strategy = "fast"} end,
             "unknown strategy 'fast' (quadrature, tensor)")
T.done()
