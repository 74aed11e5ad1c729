-- A mesh's partition (issue 48; engine/parallel/partition.c, m:partition): a box by its
-- lattice (the interface and the cut faces known exactly), any mesh by METIS and by RCB
-- (every part nonempty and balanced, the counts consistent), a Gmsh mesh, 2D; VTU pieces and
-- a .pvtu whose pieces hold every cell once and the field's values at their points; bad
-- input refused with the reason.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local function sum(t)
  local s = 0
  for _, v in ipairs(t) do s = s + v end
  return s
end

-- the counts every partition keeps: each cell in one part, each vertex in its cells' parts,
-- the shared ones on the interface
local function consistent(label, m, P, n, balance)
  check(P.parts == n and #P.cells == n and sum(P.cells) == m.ncells, "%s: %d parts, cells %d of %d",
        label, P.parts, sum(P.cells), m.ncells)
  local lo, hi = math.huge, 0
  for k = 1, n do lo, hi = math.min(lo, P.cells[k]), math.max(hi, P.cells[k]) end
  check(lo > 0 and hi <= balance * m.ncells / n, "%s: parts of %d to %d cells (%d cells, %d parts)",
        label, lo, hi, m.ncells, n)
  check(sum(P.vertices) - sum(P.interface) == m.nvertices - P.ninterface, "%s: vertices %d, "
        .. "interface %d, of %d and %d", label, sum(P.vertices), sum(P.interface), m.nvertices,
        P.ninterface)
  for k = 1, n do
    check(P.neighbours[k] >= (n > 1 and 1 or 0) and P.neighbours[k] < n, "%s: part %d has %d "
          .. "neighbours", label, k - 1, P.neighbours[k])
  end
  check(tostring(P):find(P.method, 1, true), "%s: tostring %s", label, tostring(P))
end

-- a box by its lattice: 2 x 2 x 1 blocks of 4 x 4 x 8 cubes
local m = mesh.box{cells = {8, 8, 8}, cell = "tet"}
local L = m:partition(4)
consistent("lattice", m, L, 4, 1)
check(L.method == "lattice" and L.ninterface == 2 * 81 - 9 and L.cut == 2 * 64 * 2,
      "lattice: %s, %d interface vertices (153), %d faces cut (256)", L.method, L.ninterface, L.cut)
for k = 1, 4 do check(L.neighbours[k] == 3, "lattice: part %d: %d neighbours", k - 1, L.neighbours[k]) end
check(m:partition(1).ninterface == 0 and m:partition(1).cut == 0, "one part: no interface")
check(m:partition(3).method ~= "lattice", "auto: 3 parts of 8 cubes a side are not a lattice's")
check(m:partition(3, {method = "lattice"}).method == "lattice", "lattice asked: uneven blocks")

-- METIS and RCB on the box and on hexes, and in 2D
for _, meth in ipairs({"metis", "rcb"}) do
  local ok, P = pcall(m.partition, m, 5, {method = meth})
  if not ok and tostring(P):find("without METIS", 1, true) then
    T.skip("metis: felab was built without it")
  else
    check(ok, P)
    consistent(meth .. " tets", m, P, 5, 1.1)
    local h = mesh.box{cells = {6, 5, 4}, cell = "hex", distort = 0.2}
    consistent(meth .. " hexes", h, h:partition(3, {method = meth}), 3, 1.1)
    local q = mesh.box{cells = {12, 10}, cell = "tri"}
    consistent(meth .. " triangles", q, q:partition(4, {method = meth}), 4, 1.1)
  end
end

-- a Gmsh mesh with regions: auto is not the lattice
local torso = T.gmsh_mesh("meshes/torso.geo", {size = 0.1})
if torso then
  local P = torso:partition(4)
  check(P.method ~= "lattice", "torso: auto took the lattice")
  consistent("torso " .. P.method, torso, P, 4, 1.1)
  expect_error(function() return torso:partition(2, {method = "lattice"}) end, "lattice",
               "metis", "rcb")
end

-- VTU pieces: every cell in one piece, u = x + 2 y at every piece's points, the .pvtu
local dir = os.tmpname()
os.remove(dir)
local V = fe.space(m, "P1")
local u = V:interpolate(function(x) return x[1] + 2 * x[2] end)
local P = m:partition(4, {method = "rcb"})
export.vtu(dir .. "/u.pvtu", m, {u = u}, {partition = P})
local pv = io.open(dir .. "/u.pvtu"):read("a")
local cells = 0
for k = 0, 3 do
  check(pv:find('Source="u_' .. k .. '.vtu"', 1, true), "the .pvtu names piece %d", k)
  local s = io.open(("%s/u_%d.vtu"):format(dir, k)):read("a")
  local np, nc = s:match('NumberOfPoints="(%d+)" NumberOfCells="(%d+)"')
  cells = cells + tonumber(nc)
  check(tonumber(nc) == P.cells[k + 1] and tonumber(np) == P.vertices[k + 1], "piece %d: %s "
        .. "points, %s cells (part: %d, %d)", k, np, nc, P.vertices[k + 1], P.cells[k + 1])
  local xyz = s:match('Name="coordinates"[^>]*>(.-)</DataArray>')
  local uu = s:match('Name="u"[^>]*>(.-)</DataArray>')
  local pts, vals = {}, {}
  for x in xyz:gmatch("%S+") do pts[#pts + 1] = tonumber(x) end
  for x in uu:gmatch("%S+") do vals[#vals + 1] = tonumber(x) end
  local worst = 0
  for i = 1, #vals do
    worst = math.max(worst, math.abs(vals[i] - (pts[3 * i - 2] + 2 * pts[3 * i - 1])))
  end
  check(#vals == tonumber(np) and worst < 1e-12, "piece %d: u off x + 2 y by %.1e", k, worst)
  check(s:find('Name="part"', 1, true), "piece %d: cell data part", k)
end
check(cells == m.ncells, "the pieces hold %d cells of %d", cells, m.ncells)
os.execute("rm -rf '" .. dir .. "'")

-- bad input
expect_error(function() return m:partition(0) end, "number of parts")
expect_error(function() return m:partition(m.ncells + 1) end, "number of parts")
expect_error(function() return m:partition(2, {method = "spectral"}) end, "spectral", "rcb")
expect_error(function() return m:partition(2, {methd = "rcb"}) end, "methd")
local other = mesh.box{cells = {2, 2, 2}, cell = "tet"}
expect_error(function() return export.vtu(dir .. "/x.pvtu", other, {}, {partition = P}) end,
             "splits", "cells")
expect_error(function() return export.vtu(dir .. "/x.pvtu", m, {}, {partition = 3}) end,
             "partition")
T.done()
