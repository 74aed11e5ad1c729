-- .msh 4.1 files load in every build: through the Gmsh SDK where felab has it, through
-- felab's own reader where it has not (make gpu). A box written by export.msh loads back
-- with its counts and named tags, and a solve on it gives the box's numbers; a damaged file
-- is an error naming the file.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
local function solve_on(m, space)
  local A = fe.operator(fe.space(m, space), physics.poisson{kappa = 1, source = 1},
                        {dirichlet = {"xmin", "xmax"}, value = 0})
  local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-12, maxit = 1000})
  check(info.converged, info.reason)
  -- u = x (1 - x) / 2: zero flux on the other faces
  return u:error(function(x) return x[1] * (1 - x[1]) / 2 end, "L2"), info.iterations
end
for _, case in ipairs({{"hex", "Q1"}, {"tet", "P1"}, {"prism", "P1"}}) do
  local m = mesh.box{cells = {4, 3, 2}, cell = case[1]}
  local path = export.msh(dir .. "/" .. case[1] .. ".msh", m)
  local l = mesh.load(path)
  check(l.cell == m.cell and l.ncells == m.ncells and l.nvertices == m.nvertices and
         l.nfacets == m.nfacets, ("%s: %s read back as %s"):format(path, tostring(m), tostring(l)))
  local tags = l:tags()
  check(#tags.boundary == 6 and tags.boundary[2] == "xmax" and tags.cells[1] == "domain",
         path .. ": the tags are not the box's")
  local e0 = solve_on(m, case[2])
  local e1, its = solve_on(l, case[2])
  check(math.abs(e1 - e0) <= 1e-10 * e0, ("%s: L2 error %.15g on the box, %.15g read back"):format(
         path, e0, e1))
  print(("%s: %d cells read back, the same solution (L2 error %.3e, %d iterations) ok"):format(
        case[1], l.ncells, e1, its))
end

-- errors name the file (and, without the SDK, the line)
local bad = dir .. "/bad.msh"
local f = check(io.open(bad, "w"))
f:write("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 2 1 2\n3 1 0 2\n1\n2\n0 0 0\n1 x 0\n")
f:close()
local ok, msg = pcall(mesh.load, bad)
check(not ok and msg:find(bad, 1, true), tostring(msg))
if msg:find("line 10 ($Nodes)", 1, true) then -- felab's reader (the SDK words it its way)
  check(msg:find("expected a node's y coordinate, found 'x'", 1, true), msg)
end
print("a damaged file: " .. msg:gsub("^[^:]*:%d+: ", ""))
os.execute("rm -rf " .. dir)
T.done()
