-- The cell order of meshes read from .geo files: mesh.load puts the cells in layers (a sweep
-- from a far vertex, each layer along a Morton curve) and refine numbers the vertices as the
-- cells first use them. An order changes the numbering, never the problem: under every order
-- (the loaded one, rcm, hilbert, layers, morton) a hex and a tet mesh keep their tags, regions,
-- volume, and solve to the same solution; loading is deterministic; and the runs of cells the
-- cpu's threads take need fewer colors in the loaded (and refined) order than along a Morton
-- curve.
-- Skipped in builds without the Gmsh SDK.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local ok, shell = pcall(mesh.load, "meshes/shell_hex.geo")
if not ok and shell:find("needs the Gmsh SDK", 1, true) then
  T.skip(shell)
  return
end
check(ok, shell)
local orders = {"rcm", "hilbert", "layers", "morton"}

local function same(a, b, what)
  check(math.abs(a - b) <= 1e-10 * math.abs(a), ("%s: %.15g, was %.15g"):format(what, b, a))
end

local function tag_list(m)
  local t = m:tags()
  return table.concat(t.boundary, ",") .. " | " .. table.concat(t.cells, ",")
end

-- u: the solution of -div(kappa grad u) = 1 with u = 0 on the named tags; its norm and its
-- value functional (a permutation of the dofs keeps both)
local function solve_norms(m, space, kappa, dirichlet)
  local A = fe.operator(fe.space(m, space), physics.poisson{kappa = kappa, source = 1},
                        {dirichlet = dirichlet, value = 0})
  local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-12, maxit = 5000})
  check(info.converged, info.reason)
  return u:norm(), u:max(), info.iterations
end

local function check_orders(name, make, space, kappa, dirichlet)
  local m = make()
  local tags, q = tag_list(m), m:quality()
  local n0, max0, it0 = solve_norms(m, space, kappa, dirichlet)
  for _, how in ipairs(orders) do
    local r = make()
    r:reorder(how)
    check(r.ncells == m.ncells and r.nvertices == m.nvertices, name .. " " .. how .. ": counts")
    check(tag_list(r) == tags, ("%s %s: tags %s, were %s"):format(name, how, tag_list(r), tags))
    same(q.volume, r:quality().volume, name .. " " .. how .. " volume")
    local n, max, it = solve_norms(r, space, kappa, dirichlet)
    same(n0, n, name .. " " .. how .. " |u|")
    same(max0, max, name .. " " .. how .. " max u")
    check(math.abs(it - it0) <= 2, ("%s %s: %d iterations, were %d"):format(name, how, it, it0))
  end
  print(("%s: %d cells, %s |u| %.6e under every order ok"):format(name, m.ncells, space, n0))
end

-- hexes: the shell refined twice, zero on two of its six boundaries (a tag that lost its
-- facets, or gained others, would change u)
check_orders("shell_hex.geo", function() return shell:refine():refine() end, "Q2", 1,
             {"inner", "outer"})
-- tets in four regions of their own conductivity, zero on the skin
check_orders("torso.geo", function() return mesh.load("meshes/torso.geo") end, "P2",
             {body = 0.2, lung_left = 0.05, lung_right = 0.05, heart = 0.4}, {"skin"})

-- deterministic: two loads, the same mesh in the same order (an apply equal to the bit)
local function apply_of(m)
  local V = fe.space(m, "P2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  return (A:apply(V:interpolate(function(x) return x[1] + 2 * x[2] * x[3] end)))
end
local a = apply_of(mesh.load("meshes/cube.geo", {size = 0.1}))
local b = apply_of(mesh.load("meshes/cube.geo", {size = 0.1}))
b:axpy(-1, a)
check(b:norm() == 0, "two loads of cube.geo differ: " .. b:norm())
print("cube.geo: two loads, one order ok")

-- the runs the cpu's threads take (16 of them here): a slab touches the slabs beside it, a
-- Morton curve's blob many others; refined, the cells stay in layers
local function run_colors(name, m)
  local block = math.ceil(m.ncells / 16)
  local layered = m:color{block = block}
  m:reorder("morton")
  local curve = m:color{block = block}
  check(layered < curve, ("%s: the runs need %d colors in layers, %d along a Morton curve")
         :format(name, layered, curve))
  print(("%s: %d cells in 16 runs: %d colors in layers, %d along a Morton curve ok")
        :format(name, m.ncells, layered, curve))
end
run_colors("cube.geo", mesh.load("meshes/cube.geo", {size = 0.07}))
run_colors("shell_hex.geo refined 3 times", shell:refine():refine():refine())
T.done()
