-- Strategy "sumfact" (engine/codegen/kernels/sumfact.knl) computes what "transpose" computes: the
-- residual, the Jacobian action at a state and the diagonal agree to 1e-12 relative in double (1e-5
-- in single) for Q1..Q6 hexes (and Q7's action on the cpu, its padded layout; opencl up to Q3, one
-- geometry a case, alternating; the corners' geometry up to Q3 and at Q6; collocated GLL at Q2
-- hexes and Q3 quads (opencl: the hexes), and in the Q3 GLL solve below) on a distorted mesh whose
-- cell count (12) is not a multiple of the block (8 on the cpu), with the geometry stored and
-- recomputed from the corners, Gauss and collocated GLL rules; elasticity; a nonlinear traced
-- physics with an auxiliary field (in 3D on Q1, whose tables are small: Q3's made each of its
-- sumfact kernels a 4.5 s compile); quads in 2D; curved (order-2) hexes from Gmsh. Then sumfact
-- solves a manufactured problem at rate p + 1, and is the cpu's default for Q3. scatter = "nodes"
-- (an E-vector summed per node) gives the same results as the atomics. A rule with fewer points
-- than nodes per direction is declined, saying why.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff, expect_error = T.check, T.max_rel_diff, T.expect_error
local backends, nvidia_opencl = T.backends(true), T.nvidia_opencl()

local nonlinear = T.nonlinear
-- T.nonlinear's law with its field k on aux, a space of V's mesh other than V's
local function nonlinear_on(aux)
  local k = aux:interpolate(function(x) return 1 + x[1] * x[2] end)
  return physics.new{f1 = function(u, du, x, a) return (a.k + u * u) * du end,
                     f0 = function(u, du, x) return u * u * u - math.sin(3 * x[1]) end,
                     fields = {k = k}}
end
local scalar = physics.poisson{kappa = "1 + x[0]*x[1]", source = "sin(3*x[0]) + x[1]"}

-- every action with strategy s (and opts o) against transpose on the cpu in double
local function compare(A, V, u, w, o, tol, label)
  local worst = 0
  for _, act in ipairs({"residual", "apply", "diagonal"}) do
    local function run(oo)
      if act == "residual" then return A:residual(u, oo) end
      if act == "apply" then oo.at = u; return A:apply(w, oo) end
      return A:diagonal(oo)
    end
    local ref = run({backend = "cpu", precision = "double", strategy = "transpose"})
    local oo = {strategy = "sumfact"}
    for k, v in pairs(o) do oo[k] = v end
    local y, rep = run(oo)
    local d = rel_diff(y:to("cpu", "double"), ref)
    check(d <= tol and rep.strategy == "sumfact", "%s %s: sumfact vs transpose %.2e (tol %.0e)",
          label, act, d, tol)
    worst = math.max(worst, d)
  end
  return worst
end

local function fields(V, ncomp, dim)
  local function field(f)
    return V:interpolate(function(x)
      local s = f(x)
      if ncomp == 3 then return {s, 2 * s, -s} end
      return s
    end)
  end
  local u = field(function(x) return 0.3 * math.cos(x[1]) * x[2] + (dim == 3 and x[3] or 0) end)
  local w = field(function(x) return x[1] - 2 * x[2] * (dim == 3 and x[3] or 0.5) end)
  return u, w
end

local hexes = mesh.box{cells = {3, 2, 2}, cell = "hex", distort = 0.3}
local cases = {}
-- under the sanitizers (FELAB_ASAN=1, make check-asan) Q1..Q2 (Q3 runs in the cases below): the
-- suite's time budget
for p = 1, os.getenv("FELAB_ASAN") == "1" and 2 or 6 do cases[#cases + 1] = {mesh = hexes, space = "Q" .. p, dim = 3} end
cases[#cases + 1] = {mesh = hexes, space = "Q2", dim = 3, components = 3}
cases[#cases + 1] = {mesh = hexes, space = "Q3", dim = 3, physics = "nonlinear", aux = "Q1"}
cases[#cases + 1] = {mesh = mesh.box{cells = {5, 3}, cell = "quad", distort = 0.3}, space = "Q3",
                     dim = 2}
cases[#cases + 1] = {mesh = mesh.box{cells = {4, 3}, cell = "quad", distort = 0.3}, space = "Q2",
                     dim = 2, physics = "nonlinear"}
for ci, c in ipairs(cases) do
  local order = tonumber(c.space:sub(2))
  local V = c.components and fe.space(c.mesh, {family = "Q", order = order, components = 3})
            or fe.space(c.mesh, c.space)
  local pde = c.components and physics.elasticity{E = 10, nu = 0.3}
              or c.aux and nonlinear_on(fe.space(c.mesh, c.aux)) or c.physics and nonlinear(V)
              or scalar
  local u, w = fields(V, c.components or 1, c.dim)
  local label = ("%dD %s%s%s"):format(c.dim, c.space, c.components and " x3" or "",
                                      c.physics and " nonlinear" or "")
  -- the suite's compile time: opencl up to Q3; collocated GLL on the 3D scalar linear case at
  -- Q2 alone and on the 2D one (the kernel's collocated path is the same at every order: P1 > 2
  -- already at Q2; the nonlinear one's rule has 8^3 points: Gauss only); the corners'
  -- geometry at Q4 and Q5 (the same path as Q3's and Q6's, sizes between them) not at all
  local high = order >= 4
  local gll = not (high or c.physics or c.components) and (c.dim == 2 or order == 2)
  for _, rule in ipairs(gll and {"gauss", "gll"} or {"gauss"}) do
    -- the nonlinear physics asks for 8^3 points at Q3; 5^3 (degree 9) keeps transpose's
    -- dense tables, the reference, quick to compile and still tests a rule of more points
    -- than nodes
    local quadrature = rule == "gll" and {rule = "gll"} or nil
    if c.physics and order >= 3 then quadrature = {degree = 9} end
    local A = fe.operator(V, pde, {dirichlet = {"xmin", "ymax"}, value = 0.5, quadrature = quadrature})
    for _, be in ipairs(high and {"cpu"} or backends) do
      -- NVIDIA's OpenCL holds 64 KB of __constant tables: the auxiliary field's dense tables
      -- (Q3 at 5^3 points: 256 KB) do not fit, and the error says so (the field on V itself)
      local too_big = be == "opencl" and nvidia_opencl and c.physics and order >= 3
      if too_big then
        local Af = fe.operator(V, nonlinear(V), {dirichlet = {"xmin", "ymax"}, value = 0.5,
                                                 quadrature = quadrature})
        expect_error(function() return Af:residual(u, {backend = be, strategy = "sumfact"}) end,
                     "exceed the device's constant memory")
      end
      local geometries = (order == 4 or order == 5) and {"stored"} or {"stored", "vertices"}
      -- PoCL's builds are most of this test's time: opencl meets each geometry on every other
      -- case (the cases' list alternates them) and GLL points in 3D, where the cpu meets all
      local opencl_geometries = (rule == "gll" and c.dim == 2) and {}
                                or {ci % 2 == 0 and "stored" or "vertices"}
      if be == "opencl" then geometries = opencl_geometries end
      for _, geometry in ipairs(too_big and {} or geometries) do
        local worst = compare(A, V, u, w, {backend = be, geometry = geometry}, 1e-12,
                              ("%s %s %s %s"):format(label, rule, be, geometry))
        if be == "cpu" and geometry == geometries[#geometries] and rule == "gauss" then
          local others = {}
          for _, b in ipairs(high and {} or backends) do
            if b ~= "cpu" then
              local g = b == "opencl" and " " .. table.concat(opencl_geometries, " and ") or ""
              others[#others + 1] = b .. g
            end
          end
          print(("%-22s sumfact = transpose to %.1e (%s, cpu %s%s)"):format(label, worst, rule,
                table.concat(geometries, " and "), #others > 0 and ", " .. table.concat(others, ", ") or ""))
        end
      end
      if order == 2 and rule == "gauss" and not c.physics and not c.components then
        compare(A, V, u, w, {backend = be, precision = "single"}, 1e-5, label .. " single " .. be)
      end
    end
  end
end

-- Q7 on the cpu in double: the only order whose group arrays the template pads (a layer of
-- 8 x 8 entries is 4 KB: SF_PADDED), its interpolations' operands addressed from their row's
-- padding (SF_XW, SF_YW): the Jacobian action with kappa(x) (folded) on a distorted box,
-- Gauss (interpolated) and GLL (collocated), against transpose
do
  local V = fe.space(mesh.box{cells = {3, 2, 2}, cell = "hex", distort = 0.2}, "Q7")
  local u, w = fields(V, 1, 3)
  for _, rule in ipairs({"gauss", "gll"}) do
    local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1},
                          {dirichlet = "all", quadrature = {rule = rule}})
    local ref = A:apply(w, {backend = "cpu", strategy = "transpose"})
    local y, rep = A:apply(w, {backend = "cpu", strategy = "sumfact"})
    local d = rel_diff(y, ref)
    check(d <= 1e-12 and rep.strategy == "sumfact", "3D Q7 %s cpu: sumfact vs transpose %.2e", rule, d)
  end
  print(("3D Q7 sumfact = transpose (gauss and gll, folded kappa(x), cpu, the padded layout)"))
end

-- a block that is not a power of two, and one cell per group; scatter = "nodes" (the cells
-- write an E-vector and a second kernel sums it per node) with the padding cells of block 5
-- on every backend, and for elasticity's three components
local A = fe.operator(fe.space(hexes, "Q3"), scalar, {dirichlet = "all"})
local u, w = fields(fe.space(hexes, "Q3"), 1, 3)
compare(A, A.space, u, w, {block = 1}, 1e-12, "Q3 block 1")
for _, be in ipairs(backends) do
  -- NVIDIA's OpenCL keeps 48 KB of shared memory a group: 5 cells of Q3 need 51 KB there
  local block = be == "opencl" and nvidia_opencl and 4 or 5
  local worst = compare(A, A.space, u, w, {backend = be, scatter = "nodes", block = block}, 1e-12,
                        "Q3 block " .. block .. " nodes " .. be)
  print(("scatter = \"nodes\" = transpose to %.1e on %s (Q3, block %d)"):format(worst, be, block))
end
local Ve = fe.space(hexes, {family = "Q", order = 2, components = 3})
local Ae = fe.operator(Ve, physics.elasticity{E = 10, nu = 0.3}, {dirichlet = {"xmin"}})
local ue, we = fields(Ve, 3, 3)
compare(Ae, Ve, ue, we, {backend = "cpu", scatter = "nodes"}, 1e-12, "Q2 x3 nodes")

-- affine cells (an undistorted box): one set of factors a cell, the same as the map
-- recomputed at every point from the corners ("vertices"), the report says so (hexes on the
-- cpu only: PoCL compiles slowly)
for _, c in ipairs({{cells = {3, 2, 2}, cell = "hex", space = "Q3", cpu_only = true},
                    {cells = {4, 3}, cell = "quad", space = "Q2"}}) do
  local Vb = fe.space(mesh.box{cells = c.cells, cell = c.cell}, c.space)
  local Ab = fe.operator(Vb, scalar, {dirichlet = "all"})
  local ub, wb = fields(Vb, 1, #c.cells)
  for _, be in ipairs(c.cpu_only and {"cpu"} or backends) do
    local y, rep = Ab:apply(wb, {backend = be, strategy = "sumfact", geometry = "stored", at = ub,
                                 fold = false})
    local yv = Ab:apply(wb, {backend = "cpu", strategy = "sumfact", geometry = "vertices", at = ub,
                             fold = false})
    local d = rel_diff(y:to("cpu", "double"), yv)
    check(d <= 1e-12 and rep.why:find("stored per cell", 1, true),
          "affine %s %s %s: per cell vs per point %.1e (%s)", c.cell, c.space, be, d, rep.why)
  end
  compare(Ab, Vb, ub, wb, {geometry = "stored"}, 1e-12, "affine " .. c.space)
end
print("affine boxes: factors stored once a cell = the map at every point")

-- curved second-order hexes (Gmsh): stored factors; "vertices" is refused
-- (a .geo file needs the Gmsh SDK, which the GPU build lacks: said and skipped there)
local gmsh_ok, m = pcall(mesh.load, "meshes/shell_hex.geo", {order = 2})
if not gmsh_ok and tostring(m):find("without it", 1, true) then
  T.skip("curved Q2 hexes: " .. tostring(m))
else
  check(gmsh_ok, tostring(m))
  local Vc = fe.space(m, "Q2")
  local Ac = fe.operator(Vc, scalar, {dirichlet = {"inner"}})
  local uc, wc = fields(Vc, 1, 3)
  for _, be in ipairs(backends) do compare(Ac, Vc, uc, wc, {backend = be}, 1e-12, "curved Q2 " .. be) end
  expect_error(function() return Ac:apply(wc, {strategy = "sumfact", geometry = "vertices"}) end,
               "geometry = \"vertices\" needs straight cells")
  print(("curved Q2 hexes (%d cells): sumfact = transpose with stored factors"):format(m.ncells))
end

-- strategies that do not apply say why; bad options are named
local tets = fe.operator(fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P2"), scalar)
local names, info = tets:strategies()
check(not info.sumfact.applies and info.sumfact.why:find("tensor cells"),
      "sumfact on tets: %s", tostring(info.sumfact.why))
expect_error(function() return tets:apply(tets.space:interpolate(1), {strategy = "sumfact"}) end,
             "strategy 'sumfact' does not apply", "tensor cells")
-- fewer points than nodes per direction (Q3, degree 5: 3 points): the derivatives at the points
-- through their values would be wrong (they were: 0.5 relative in the action), so it declines
local under = fe.operator(fe.space(mesh.box{cells = 2, cell = "hex"}, "Q3"), scalar,
                         {quadrature = {degree = 5}})
expect_error(function() return under:apply(under.space:interpolate(1), {strategy = "sumfact"}) end,
             "strategy 'sumfact' does not apply", "3 points per direction, fewer than Q3's 4 nodes")
local _, uinfo = under:strategies()
check(not uinfo.sumfact.applies and uinfo.transpose.applies, "under-integrated Q3: transpose runs it")
expect_error(function() return A:apply(w, {strategy = "sumfact", geometry = "curved"}) end,
             "geometry must be")
expect_error(function() return A:apply(w, {strategy = "sumfact", scatter = "colors"}) end,
             "scatter must be")

-- the default for Q3 on the cpu is the model's pick, the candidate its report predicts fastest
-- (on this 2-core machine sumfact or csr, within 10% of each other on this small mesh; a
-- many-core host's launches can make it transpose), and the report says why
local _, rep = A:apply(w)
local _, picks = A:strategies()
local fastest, least = nil, math.huge
for name, ms in (rep.why:match("%(apply: ([^)]*)%)") or ""):gmatch("(%a+) ([%d.e+-]+) ms") do
  if tonumber(ms) < least then fastest, least = name, tonumber(ms) end
end
check(picks[rep.strategy] and picks[rep.strategy].default and rep.strategy == fastest and
      rep.why:find("predicted fastest"), "Q3 default: %s, predicted fastest %s (%s)", rep.strategy,
      tostring(fastest), rep.why)
local list = table.concat(names, " ")
check(list:find("transpose") and not list:find("sumfact"), "P2 tets: %s", list)

-- manufactured solution on distorted hexes: -lap u = f with u = x(1-x) y(1-y) z(1-z) exp(x),
-- zero on the boundary; sumfact with Gauss points and with GLL points at the nodes (BP5)
local exact, source = T.mms_exact, T.mms_source
for _, c in ipairs({{2, "gauss"}, {3, "gauss"}, {3, "gll"}}) do
  local p, rule, err = c[1], c[2], {}
  for i, n in ipairs({2, 4}) do
    local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = 0.2}
    local Am = fe.operator(fe.space(m, "Q" .. p), physics.poisson{kappa = 1, source = source},
                           {dirichlet = "all", quadrature = rule == "gll" and {rule = "gll"} or nil})
    local x, info = solve.cg(Am, {strategy = "sumfact", pc = "jacobi", rtol = 1e-12, maxit = 3000})
    check(info.converged, "Q%d MMS solve: %s", p, tostring(info.reason))
    err[i] = x:error(exact, "L2")
  end
  local rate = math.log(err[1] / err[2], 2)
  print(("Q%d %-5s MMS with sumfact: L2 errors %.2e, %.2e, rate %.2f"):format(p, rule, err[1], err[2], rate))
  check(rate > p + 0.6, "Q%d (%s) converges at rate %.2f, expected about %d", p, rule, rate, p + 1)
end
-- rules past 12 points a direction (the Q7 p-Laplacian's 15): sumfact runs them on the cpu
-- (and cuda), agreeing with transpose; OpenCL declines them, saying so
do
  local Vh = fe.space(mesh.box{cells = {2, 1, 1}, cell = "hex", distort = 0.1}, "Q1")
  local Ah = fe.operator(Vh, physics.p_laplacian{p = 3}, {dirichlet = {"xmin"}, quadrature = {degree = 25}})
  local uh = Vh:interpolate(function(x) return math.sin(x[1]) * x[2] + x[3] end)
  local wh = Vh:interpolate(function(x) return x[1] * x[2] + 0.1 end)
  local y0 = Ah:apply(wh, {at = uh, strategy = "transpose", backend = "cpu"})
  local y1, rep = Ah:apply(wh, {at = uh, strategy = "sumfact", backend = "cpu"})
  local d = rel_diff(y1, y0)
  check(d <= 1e-12 and rep.quadrature:find("2197 points", 1, true),
        "13 points a direction: sumfact vs transpose %.1e (%s)", d, rep.quadrature)
  local _, info = Ah:strategies({backend = "opencl"})
  check(not info.sumfact.applies and info.sumfact.why:find("above 12 (opencl)", 1, true),
        "opencl and 13 points: %s", tostring(info.sumfact.why))
  print(("13 points a direction: sumfact = transpose to %.1e on the cpu; opencl declines"):format(d))
end

T.done()
