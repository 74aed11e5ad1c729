-- The five variants of the quadrature element matrices (Banas et al.'s four, fe_elemat, and
-- gemm, fe_elemat_gemm, in engine/codegen/kernels/elemat.knl; engine/matrix/matrix.c) compute the same
-- matrices: reg_jac, shm_nojac, shm_jac and gemm equal reg_nojac to 1e-12 relative in double (1e-5 in single) for P1..P4 tets and
-- Q1..Q3 hexes on distorted meshes, P2 elasticity, a nonlinear physics with an auxiliary
-- field at a nonzero state, blocks that do not divide the cell count, shared memory in
-- several parts, and P2 on curved (second-order) tets; on the cpu, and on opencl (and cuda
-- where there is one, with dynamic shared memory past 48 KB) for a few cases, each distinct
-- kernel compiling slowly there; gemm also in chunks of points (cpu) and with its sums in
-- registers (opencl; cuda at Q4 hexes, 1024 tiles an item each). gemm_mma (gemm on fp64 tensor cores) equals reg_nojac on cuda for P3, P4
-- tets and Q2, Q3 hexes and is refused elsewhere and in single, naming the backend and
-- precision. The jac variants refuse a map the space's nodes cannot carry (P1 on curved
-- tets), and errors name the variant or the block.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local variants = {"reg_nojac", "reg_jac", "shm_nojac", "shm_jac", "gemm"}

-- max |a - b| / max |a| over every entry of two batches of element matrices
local function rel(Ka, Kb)
  local worst, scale = 0, 0
  for c = 1, Ka.ncells do
    local a, b = Ka:get(c), Kb:get(c)
    for i = 1, Ka.n do
      for j = 1, Ka.n do
        worst = math.max(worst, math.abs(a[i][j] - b[i][j]))
        scale = math.max(scale, math.abs(a[i][j]))
      end
    end
  end
  return worst / scale
end

-- every variant of A's element matrices (options o, the state at) against reg_nojac on the cpu
-- in double; returns the largest difference
local function compare(A, o, at, label, only)
  local ref = A:element_matrices{at = at, backend = "cpu", precision = "double"}
  local tol = o.precision == "single" and 1e-5 or 1e-12
  local worst = 0
  for _, v in ipairs(only or variants) do
    local oo = {at = at, variant = v}
    for k, x in pairs(o) do oo[k] = x end
    local K, rep = A:element_matrices(oo)
    local d = rel(ref, K)
    check(d <= tol and rep.flops > 0 and rep.bytes > 0 and rep.why:find(v, 1, true),
          "%s %s: %s vs reg_nojac on the cpu %.1e (tol %.0e; %s)", label, o.backend or "cpu", v, d,
          tol, rep.why)
    worst = math.max(worst, d)
  end
  return worst
end

local tets = mesh.box{cells = {2, 2, 2}, cell = "tet", distort = 0.2} -- 48 cells
local hexes = mesh.box{cells = {2, 2, 1}, cell = "hex", distort = 0.3} -- 4 cells
local poisson = physics.poisson{kappa = "1 + x[0]*x[1]", source = 1}

-- the cpu: every order, elasticity, the nonlinear law at a state
local cases = {}
for p = 1, 4 do cases[#cases + 1] = {tets, "P" .. p} end
for p = 1, 3 do cases[#cases + 1] = {hexes, "Q" .. p} end
for _, c in ipairs(cases) do
  local A = fe.operator(fe.space(c[1], c[2]), poisson)
  print(("%s: the five variants agree to %.1e"):format(c[2], compare(A, {}, nil, c[2])))
end
do
  local V = fe.space(tets, {family = "P", order = 2, components = 3})
  local A = fe.operator(V, physics.elasticity{E = 10, nu = 0.3})
  print(("P2 elasticity: %.1e"):format(compare(A, {}, nil, "P2 x3")))
  -- shared memory in parts: 200 cells (of 48: the rest copies of the last, not stored) hold
  -- 6 of 30 columns at a time in the cpu's 512 KiB
  local Kp, rep = A:element_matrices{variant = "shm_jac", block = 200}
  local d = rel(A:element_matrices(), Kp)
  check(rep.why:find("200 cells x 6 of 30 columns", 1, true) and d <= 1e-12, "parts: %.1e, %s",
        d, rep.why)
end
local Vq = fe.space(hexes, "Q2")
local nonlinear = fe.operator(Vq, T.nonlinear(Vq))
local state = Vq:interpolate(function(x) return 0.5 + x[1] * x[2] - x[3] end)
print(("Q2 nonlinear at a state: %.1e"):format(compare(nonlinear, {}, state, "Q2 nonlinear")))

-- blocks that do not divide the 48 cells: reg's group is the stored order's, shm's its own;
-- single precision
do
  local A = fe.operator(fe.space(tets, "P3"), poisson)
  compare(A, {block = 5}, nil, "P3 block 5", {"reg_jac"})
  compare(A, {block = 7}, nil, "P3 block 7", {"shm_nojac"})
  compare(A, {precision = "single"}, nil, "P3 single", {"reg_jac", "shm_jac", "gemm"})
  -- gemm: 64 cells hold 12 of the 24 points at a time in the cpu's 512 KiB (two chunks)
  local Kg, rep = A:element_matrices{variant = "gemm", block = 64}
  local d = rel(A:element_matrices(), Kg)
  check(rep.why:find("64 cells per group, 12 of 24 points per chunk", 1, true) and d <= 1e-12,
        "gemm in chunks: %.1e, %s", d, rep.why)
end

-- curved second-order tets (Gmsh): P2's nodes carry the map, P1's cannot
local ok, ball = pcall(mesh.load, "meshes/sphere.geo", {size = 0.9, order = 2})
if ok then
  local A2 = fe.operator(fe.space(ball, "P2"), poisson)
  print(("curved P2 (%d cells): %.1e"):format(ball.ncells,
        compare(A2, {}, nil, "curved P2", {"reg_jac", "shm_jac"})))
  local A1 = fe.operator(fe.space(ball, "P1"), poisson)
  for _, v in ipairs({"reg_jac", "shm_jac"}) do
    expect_error(function() return A1:element_matrices{variant = v} end, "variant " .. v,
                 "curved mesh's second-order map", v:sub(1, 3) .. "_nojac")
  end
else
  T.skip("curved tets: " .. tostring(ball))
end

-- opencl (and cuda): one kernel per variant and case compiles slowly there; Q2 on hexes
-- (factors per point)
for _, be in ipairs(T.backends(true)) do
  if be ~= "cpu" then
    local A = fe.operator(fe.space(hexes, "Q2"), poisson)
    print(("%s Q2: %.1e"):format(be, compare(A, {backend = be}, nil, "Q2")))
    compare(A, {backend = be, block = 3}, nil, "Q2 block 3", {"shm_jac", "gemm"})
    compare(A, {backend = be, precision = "single"}, nil, "Q2 single", {"shm_nojac"})
    if be ~= "cuda" then -- gemm_mma is inline PTX: cuda only
      expect_error(function() return A:element_matrices{backend = be, variant = "gemm_mma"} end,
                   "variant gemm_mma runs on fp64 tensor cores", "(got " .. be .. ", double)")
    end
    if be == "cuda" then -- gemm_mma: every order against reg_nojac on the cpu, a ragged block
      for _, c in ipairs({{tets, "P3"}, {tets, "P4"}, {hexes, "Q2"}, {hexes, "Q3"}}) do
        local Am = fe.operator(fe.space(c[1], c[2]), poisson)
        print(("cuda gemm_mma %s: %.1e"):format(c[2],
              compare(Am, {backend = be}, nil, c[2] .. " mma", {"gemm_mma"})))
      end
      compare(A, {backend = be, block = 3}, nil, "Q2 block 3 mma", {"gemm_mma"})
      -- Q4 hexes: 1024 tiles of 4x4 a cell, an item each, their sums in registers over 9
      -- chunks of points (the launch must give the group every item: wrong matrices before)
      local A4 = fe.operator(fe.space(mesh.box{cells = {1, 1, 2}, cell = "hex"}, "Q4"), poisson)
      local _, r4 = A4:element_matrices{backend = be, variant = "gemm"}
      check(r4.why:find("in registers", 1, true), "cuda Q4 gemm: %s", r4.why)
      print(("cuda Q4 gemm: %.1e"):format(compare(A4, {backend = be}, nil, "Q4",
                                                 {"gemm", "gemm_mma", "reg_nojac"})))
      expect_error(function()
        return A:element_matrices{backend = be, precision = "single", variant = "gemm_mma"}
      end, "variant gemm_mma runs on fp64 tensor cores", "(got cuda, single)")
    end
    if be == "cuda" then -- 60 cells pass the static 48 KB: dynamic shared memory
      local _, rep = A:element_matrices{backend = be, variant = "shm_nojac", block = 60}
      check(rep.why:find("KB dynamic", 1, true), "cuda block 60: %s", rep.why)
      compare(A, {backend = be, block = 60}, nil, "Q2 block 60", {"shm_nojac"})
    end
  end
end

-- errors name the variant or the block
local A = fe.operator(fe.space(tets, "P4"), poisson)
expect_error(function() return A:element_matrices{variant = "fast"} end, "unknown variant 'fast'",
             "reg_nojac, reg_jac, shm_nojac, shm_jac, gemm, gemm_mma")
expect_error(function() return A:element_matrices{variant = "gemm_mma"} end,
             "variant gemm_mma runs on fp64 tensor cores", "(got cpu, double)", "use gemm")
expect_error(function() return A:element_matrices{variant = "shm_nojac", block = 4096} end,
             "variant shm_nojac: block = 4096 cells of P4 need", "use a smaller block")
expect_error(function() return A:element_matrices{variant = "shm_jac", block = 5000} end,
             "block = 5000 cells per work group is too large")
T.done()
