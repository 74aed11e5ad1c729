-- export.msh writes a .msh 4.1 that Gmsh reads back with its physical names and one
-- node-data view per field; export.vtu writes tet and hex meshes with point data.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local function read(path)
  local f = check(io.open(path)); local s = f:read("a"); f:close(); return s
end
-- Gmsh itself reads the files back where its command-line program is installed
local have_gmsh = os.execute("command -v gmsh >/dev/null 2>&1")
if not have_gmsh then T.skip("gmsh reading the .msh files back: no gmsh program") end
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
for _, cell in ipairs({"tet", "hex"}) do
  local m = mesh.box{cells = {3, 2, 2}, cell = cell}
  local V = fe.space(m, cell == "tet" and "P1" or "Q1")
  local u = V:interpolate(function(x) return x[1] + x[2] end)
  local w = V:interpolate(2)
  local msh = export.msh(dir .. "/" .. cell .. ".msh", m, {u = u, w = w})
  local s = read(msh)
  check(s:find("$MeshFormat\n4.1 0 8", 1, true), "no 4.1 header")
  check(s:find('"xmin"', 1, true) and s:find('"domain"', 1, true), "physical names missing")
  local _, nviews = s:gsub("%$NodeData", "")
  check(nviews == 2, "expected 2 views, got " .. nviews)
  if have_gmsh then
    local geo = dir .. "/check.geo"
    local f = check(io.open(geo, "w"))
    f:write(('Merge "%s";\nPrintf("felab-views %%g", PostProcessing.NbViews);\n'):format(msh))
    f:close()
    local p = check(io.popen(("gmsh %s -0 -o %s/out.msh 2>&1"):format(geo, dir)))
    local out = p:read("a"); p:close()
    check(out:find("felab-views 2", 1, true), "gmsh did not read 2 views:\n" .. out)
    check(not out:find("Error", 1, true), "gmsh reported an error:\n" .. out)
    print(cell .. ": gmsh reads the .msh with 2 views ok")
  end
  local vtu = read(export.vtu(dir .. "/" .. cell .. ".vtu", m, {u = u}))
  check(vtu:find(('NumberOfCells="%d"'):format(m.ncells), 1, true), "vtu cell count")
  check(vtu:find('Name="u"', 1, true), "vtu field")
  print(cell .. ": export.msh and export.vtu ok")
end
-- every cell type Gmsh reads back without an error (prism side facets are quads, its
-- end facets triangles; 2D facets are lines)
for _, case in ipairs({{"tri", {3, 2}}, {"quad", {3, 2}}, {"prism", {2, 2, 2}}}) do
  local m = mesh.box{cells = case[2], cell = case[1]}
  local msh = export.msh(dir .. "/" .. case[1] .. ".msh", m)
  if have_gmsh then
    local p = check(io.popen(("gmsh %s -0 -o %s/out.msh 2>&1"):format(msh, dir)))
    local out = p:read("a"); p:close()
    check(not out:find("Error", 1, true) and not out:find("Warning", 1, true), out)
  end
  local vtu = read(export.vtu(dir .. "/" .. case[1] .. ".vtu", m))
  check(vtu:find(('NumberOfCells="%d"'):format(m.ncells), 1, true), "vtu cell count")
  print(case[1] .. ": export.msh and export.vtu ok")
end

-- a vector of a P2 space is written at the vertices: each vertex's value from its own node
-- (a cell's node at the vertex: the nodes are numbered beside their vertices, not after
-- them), so a field linear in x exported from P2 is that function at every written point
local function data_array(s, name)
  local body = s:match('Name="' .. name .. '"[^>]*>(.-)</DataArray>')
  local t = {}
  for v in body:gmatch("%S+") do t[#t + 1] = tonumber(v) end
  return t
end
for _, case in ipairs({{"tet", {3, 2, 2}}, {"tri", {4, 3}}}) do
  local m = mesh.box{cells = case[2], cell = case[1]}
  local V2 = fe.space(m, "P2")
  local u = V2:interpolate(function(x) return x[1] + 2 * x[2] + 3 * x[3] end)
  local vtu = read(export.vtu(dir .. "/p2.vtu", m, {u = u}))
  local X, U = data_array(vtu, "coordinates"), data_array(vtu, "u")
  check(#U == m.nvertices and #X == 3 * m.nvertices, ("P2 export: %d values, %d vertices"):format(#U, m.nvertices))
  for v = 1, m.nvertices do
    local want = X[3 * v - 2] + 2 * X[3 * v - 1] + 3 * X[3 * v]
    check(math.abs(U[v] - want) < 1e-12, ("P2 export on %s: vertex %d has %g, want %g"):format(case[1], v, U[v], want))
  end
  print(case[1] .. ": a P2 vector exported at the vertices ok")
end

local ok, msg = pcall(export.msh, "/nonexistent-dir/x.msh", mesh.box{cells = 1})
check(not ok and msg:find("/nonexistent-dir/x.msh", 1, true), msg)
os.execute("rm -rf " .. dir)
T.done()
