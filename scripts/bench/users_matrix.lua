-- Issue 43's matrix of the users' cases, shared by scripts/bench/users.lua and defaults.lua:
-- local M = dofile("scripts/bench/users_matrix.lua")
-- M.mesh(space, n, distort, scale): a box of n * scale cells a side (tets for P spaces), or
--   {file, refinements} read and refined (log2(1/scale) refinements fewer); nil, why if absent
-- M.each(case, meshes): case(space, n, distort, kappa, label, quadrature, precision) for each
--   case: Q3, Q7, Q5 (Gauss and GLL) and Q2, Q1, P2, P1 on the uniform box with kappa 1 and the
--   distorted box (0.1) with kappa = 1 + 0.5 x, kappa(u) (the p-Laplacian), the Gmsh shell and
--   torso with kappa(x), and two fp32 rows
-- M.run(case, meshes, rows): M.each, then "== table" and the lines the cases put in rows
local M = {kx = "1 + 0.5 * x[0]"}

function M.mesh(sp, n, distort, scale)
  if type(n) == "table" then -- {file, refinements}
    local f = io.open(n[1], "r")
    if not f then return nil, n[1] .. " not found" end
    f:close()
    local m = mesh.load(n[1])
    local fewer = math.floor(math.log(1 / scale, 2) + 0.5)
    for _ = 1, math.max(0, n[2] - fewer) do m = m:refine() end
    return m
  end
  n = math.max(2, math.floor(n * scale + 0.5))
  return mesh.box{cells = {n, n, n}, cell = sp:sub(1, 1) == "P" and "tet" or "hex", distort = distort}
end

function M.each(case, meshes)
  local kx, gll = M.kx, {rule = "gll"}
  for _, c in ipairs{{"Q3", 48}, {"Q7", 28}, {"Q5", 24}} do
    case(c[1], c[2], 0, 1, "uniform k1")
    case(c[1], c[2], 0.1, kx, "dist kx")
    case(c[1], c[2], 0, 1, "uniform k1", gll)
    case(c[1], c[2], 0.1, kx, "dist kx", gll)
  end
  for _, c in ipairs{{"Q2", 72}, {"Q1", 192}, {"P2", 96}, {"P1", 192}} do
    case(c[1], c[2], 0, 1, "uniform k1")
    case(c[1], c[2], 0.1, kx, "dist kx")
  end
  for _, c in ipairs{{"Q3", 48}, {"Q5", 24}, {"Q2", 72}, {"P2", 96}} do
    case(c[1], c[2], 0.1, "u", "dist ku")
  end
  local shell, torso = meshes .. "/shell_hex.msh", meshes .. "/torso-0.063.msh"
  case("Q3", {shell, 4}, 0, kx, "gmsh shell kx")
  case("Q2", {shell, 4}, 0, kx, "gmsh shell kx")
  case("P2", {torso, 2}, 0, kx, "gmsh torso kx")
  case("P1", {torso, 2}, 0, kx, "gmsh torso kx")
  case("Q3", 48, 0.1, kx, "dist kx fp32", nil, "single")
  case("Q7", 28, 0.1, kx, "dist kx fp32", nil, "single")
end

function M.run(case, meshes, rows)
  M.each(case, meshes)
  print("== table")
  for _, l in ipairs(rows) do print(l) end
end

return M
