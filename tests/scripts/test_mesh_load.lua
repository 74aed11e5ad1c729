-- mesh.load through the Gmsh SDK: named boundary tags drive fe.operator, per-region kappa on
-- the torso, and bad files are errors naming the file. Skipped in builds without the SDK.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

-- The SDK's library is loaded by the first file it reads, not when felab starts (it pulls in
-- some 80 libraries whose symbols would be resolved at every start).
local function gmsh_mapped()
  local f = io.open("/proc/self/maps")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s:find("libgmsh", 1, true) ~= nil
end
local before = gmsh_mapped()
check(before ~= true, "libgmsh is loaded before any file asked for it")
local ok, m = pcall(mesh.load, "meshes/cube.geo")
if not ok and m:find("needs the Gmsh SDK", 1, true) then
  T.skip(m)
  return
end
check(ok, m)
check(before == nil or gmsh_mapped(), "the SDK read cube.geo but libgmsh is not mapped")
check(m.cell == "tet" and m.dim == 3, tostring(m))
local tags = m:tags()
check(#tags.boundary == 6 and tags.cells[1] == "domain", tostring(m))

-- u = 1 on xmin and xmax, zero flux elsewhere, no source: u = 1, which P1 holds exactly
local V = fe.space(m, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 0},
                      {dirichlet = {"xmin", "xmax"}, value = 1})
local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-12, maxit = 2000})
check(info.converged, info.reason)
local err = u:error(function() return 1 end, "L2")
check(err < 1e-8, ("cube.geo: P1 is not exact for u = 1: L2 error %g"):format(err))
print(("cube.geo: %d tets, u = 1 exact (%.1e) in %d iterations ok"):format(m.ncells, err,
      info.iterations))

-- the torso: four regions with their own conductivity, zero temperature on the skin
local t = mesh.load("meshes/torso.geo")
local kappa = {body = 0.2, lung_left = 0.05, lung_right = 0.05, heart = 0.4}
local At = fe.operator(fe.space(t, "P1"), physics.poisson{kappa = kappa, source = 1},
                       {dirichlet = "skin", value = 0})
local ut, it = solve.cg(At, {pc = "jacobi", rtol = 1e-8, maxit = 5000})
check(it.converged, it.reason)
print(("torso.geo: %d tets, 4 regions, cg converged in %d iterations ok"):format(t.ncells,
      it.iterations))

-- the other meshes and formats
for _, f in ipairs({"meshes/cube_v2.msh", "meshes/cube_v41.msh"}) do
  local c = mesh.load(f)
  check(c.ncells == m.ncells and c.nvertices == m.nvertices and c.nfacets == m.nfacets, f)
end
local p = mesh.load("meshes/plate_hole.geo", {size = 0.2})
check(p.cell == "tri" and p:tags().boundary[2] == "hole", tostring(p))
check(mesh.load("meshes/lshape.geo").cell == "tri")
print("msh 2.2, msh 4.1 binary, 2D geometries ok")

-- errors name the file, and the shell goes on
local function fails(path, opts, want)
  local okk, msg = pcall(mesh.load, path, opts)
  check(not okk and msg:find(want, 1, true), ("%s: expected an error with '%s', got %s"):format(
         path, want, tostring(msg)))
end
fails("meshes/nope.msh", nil, "meshes/nope.msh: cannot open")
fails("meshes/cube.geo", {algorithm = "magic"}, "unknown mesh algorithm 'magic'")
fails("meshes/cube.geo", {order = 3}, "order must be 1 or 2")
fails("meshes/cube.geo", {sise = 1}, "unknown option 'sise'")
local okk, msg = pcall(fe.operator, V, physics.poisson{kappa = 1}, {dirichlet = {"inlet"}})
check(not okk and msg:find("inlet", 1, true) and msg:find("xmin", 1, true), msg)
check(mesh.load("meshes/cube.geo", {size = 0.5}).ncells < m.ncells)
print("errors ok")

-- CAD through the SDK: a STEP file is meshed on load
if (select(1, pcall(mesh.load, "meshes/cube.geo"))) then
  local s = mesh.load("meshes/box.step", {size = 0.3})
  local q = s:quality()
  check(s.cell == "tet" and s.ncells > 0 and math.abs(q.volume - 1) < 1e-10,
         ("STEP box: %s %d cells, volume %g"):format(s.cell, s.ncells, q.volume))
  print(("STEP: %d tets, volume %.12f ok"):format(s.ncells, q.volume))
end

-- every cell type survives export.msh -> mesh.load: counts, volume and tags
if (select(1, pcall(mesh.load, "meshes/cube.geo"))) then
  local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
  for _, case in ipairs({{"tri", {3, 2}}, {"quad", {3, 2}}, {"tet", {2, 2, 2}}, {"hex", {2, 3, 2}},
                         {"prism", {2, 2, 3}}}) do
    local m = mesh.box{cells = case[2], cell = case[1], distort = 0.2}
    local r = mesh.load(export.msh(dir .. "/" .. case[1] .. ".msh", m))
    check(r.cell == m.cell and r.ncells == m.ncells and r.nvertices == m.nvertices,
           case[1] .. ": counts differ after a round trip")
    check(math.abs(r:quality().volume - m:quality().volume) < 1e-12, case[1] .. ": volume")
    check(#r:tags().boundary == #m:tags().boundary, case[1] .. ": boundary tags")
    print(case[1] .. ": export.msh -> mesh.load round trip ok")
  end
  os.execute("rm -rf " .. dir)
end
T.done()
