-- The cpu's assembly (engine/matrix/assemble.c, pattern.c, host-fill.c): each row sums its cells' element matrices as the
-- pattern is written, the matrices made in windows of cells as the rows need them (scatter
-- "nodes", the cpu's default). It equals the device's fill (scatter "atomic" and "color":
-- stored element matrices added into the pattern) for P1 and P2 tets, Q1 hexes, elasticity
-- with Dirichlet on one side, per-region constants, a nonlinear physics with a field at a
-- state, and in single precision; it is reproducible to the bit; rows whose cells do not fit
-- the window (FELAB_FILL_WINDOW) have their cells computed apart and still sum right, and so
-- do rows listed apart from their chunk's cells (outliers: FELAB_PATTERN_FIT=16, a third run
-- of the whole script, makes most rows so);
-- where the host's fill cannot run, "nodes" sums the rows on the device from stored matrices.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
if arg[1] == "small-window" then print("-- again with FELAB_FILL_WINDOW=64") end

-- the child of the fills' comparison: each case's matrix (its row pointers, columns and
-- values' bits) as one number, a line a case
if arg[1] == "bits" then
  local function hash(M)
    local x, h = M:get(), 0
    local parts = {}
    for _, k in ipairs({"rowptr", "cols"}) do
      for i = 1, #x[k] do parts[#parts + 1] = string.pack("<i4", x[k][i]) end
    end
    for i = 1, #x.vals do parts[#parts + 1] = string.pack("<d", x.vals[i]) end
    local s = table.concat(parts)
    for i = 1, #s do h = ((h ~ s:byte(i)) * 1099511628211) & 0xffffffffffffff end
    return h
  end
  local tets = mesh.box{cells = {9, 8, 7}, cell = "tet", distort = 0.2}
  local moved = mesh.box{cells = {8, 9, 7}, cell = "tet", distort = 0.1}
  moved:reorder("hilbert")
  local hexes = mesh.box{cells = {6, 7, 5}, cell = "hex", distort = 0.2}
  local far = mesh.box{cells = {40, 36, 34}, cell = "tet", distort = 0.1} -- 53k nodes: some
  far:reorder("hilbert") -- rows' neighbours 2^15 ids apart or more (not kept: made again)
  local prisms = mesh.box{cells = {5, 4, 6}, cell = "prism", distort = 0.2}
  local tris = mesh.box{cells = {9, 7}, cell = "tri", distort = 0.2}
  local quads = mesh.box{cells = {7, 9}, cell = "quad", distort = 0.2}
  -- each case's matrix, and whether its rows came from the box's lattice (pattern-lattice.c:
  -- a scalar space on a box's vertices, in double)
  for _, c in ipairs({{"P1", tets, "P1", "all"}, {"P2", tets, "P2", nil},
                      {"P1 far", far, "P1", {"xmin", "zmax"}},
                      {"P1 hilbert", moved, "P1", {"xmin"}}, {"P2 hilbert", moved, "P2", "all"},
                      {"Q1", hexes, "Q1", "all"}, {"Q2", hexes, "Q2", {"ymax"}},
                      {"P1 prisms", prisms, "P1", {"zmin", "xmax"}}, {"P1 tris", tris, "P1", nil},
                      {"Q1 quads", quads, "Q1", {"ymin"}}, {"P1 tets, no Dirichlet", tets, "P1"}}) do
    local A = fe.operator(fe.space(c[2], c[3]), physics.poisson{kappa = "1 + x[0]", source = 1},
                          {dirichlet = c[4]})
    local M, rep = A:assemble{backend = "cpu"}
    print(("%s %d%s"):format(c[1], hash(M), rep.why:find("lattice") and " lattice" or ""))
  end
  local V = fe.space(tets, "P1") -- a physics with a field, at a state
  local A = fe.operator(V, T.nonlinear(V), {dirichlet = {"ymin"}})
  local M, rep = A:assemble{backend = "cpu",
                            at = V:interpolate(function(x) return x[1] * x[2] - x[3] end)}
  print(("P1 at a state %d%s"):format(hash(M), rep.why:find("lattice") and " lattice" or ""))
  return
end
if arg[1] == "outliers" then print("-- again with FELAB_PATTERN_FIT=16") end

-- M w for a fixed w, for each fill
local function products(A, w, o)
  local out, reps = {}, {}
  for _, sc in ipairs({"nodes", "atomic", "color"}) do
    local opts = {backend = "cpu", scatter = sc}
    for k, v in pairs(o or {}) do opts[k] = v end
    local M, rep = A:assemble(opts)
    out[sc], reps[sc] = M:apply(w), rep
    out[sc .. "_nnz"] = M.nnz
  end
  return out, reps
end

local box = mesh.box{cells = {4, 4, 3}, cell = "tet", distort = 0.2}
local hex = mesh.box{cells = {3, 4, 3}, cell = "hex", distort = 0.2}
local cases = T.assembly_cases(box, hex)
for _, c in ipairs(cases) do
  local name, m, sp, pde, dir = table.unpack(c)
  local V = fe.space(m, sp)
  local A = fe.operator(V, pde, {dirichlet = dir})
  local w = V:interpolate(function(x) return 1 + x[1] - 2 * x[2] * x[3] end)
  local y, reps = products(A, w)
  check(y.nodes_nnz == y.atomic_nnz and y.nodes_nnz == y.color_nnz, "%s: nonzeros %d %d %d",
        name, y.nodes_nnz, y.atomic_nnz, y.color_nnz)
  local da, dc = T.max_rel_diff(y.nodes, y.atomic), T.max_rel_diff(y.nodes, y.color)
  check(da <= 1e-13 and dc <= 1e-13, "%s: rows' sums off the device's fill by %.1e (atomic), "
        .. "%.1e (color)", name, da, dc)
  local r = reps.nodes
  check(r.why:find("reg_jac", 1, true) and r.launches >= 1 and r.seconds > 0 and
        r.setup_seconds >= 0 and r.flops > 0 and r.bytes > 0, "%s: report %s, %d launches",
        name, r.why, r.launches)
  check(reps.atomic.why:find("atomic", 1, true) and reps.color.why:find("color", 1, true),
        "%s: the device fills say so: %s / %s", name, reps.atomic.why, reps.color.why)
  print(("%-30s %6d nonzeros: nodes = atomic to %.1e, = color to %.1e (%d launches)"):format(
        name, y.nodes_nnz, da, dc, r.launches))
end

-- a nonlinear physics with a field, at a state; single precision
do
  local V = fe.space(box, "P1")
  local A = fe.operator(V, T.nonlinear(V), {dirichlet = "all"})
  local u = V:interpolate(function(x) return x[1] * x[2] - x[3] end)
  local w = V:interpolate(function(x) return x[1] + x[3] end)
  local y = products(A, w, {at = u})
  local d = T.max_rel_diff(y.nodes, y.atomic)
  check(d <= 1e-13, "nonlinear at a state: %.1e", d)
  local ys = products(A, w, {at = u, precision = "single"})
  local ds = T.max_rel_diff(ys.nodes, ys.atomic)
  local dd = math.abs(ys.nodes:norm() - y.nodes:norm()) / y.nodes:norm()
  check(ds <= 1e-6 and dd <= 1e-6, "single: nodes = atomic to %.1e, its norm the double's to "
        .. "%.1e", ds, dd)
  print(("nonlinear with a field at a state: %.1e; single: %.1e, against double %.1e"):format(
        d, ds, dd))
end

-- reproducible: two assemblies give the same bits
do
  local V = fe.space(box, "P2")
  local A = fe.operator(V, physics.poisson{kappa = "1 + x[2]", source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] end)
  local a, b = A:assemble{backend = "cpu"}:apply(w), A:assemble{backend = "cpu"}:apply(w)
  check(T.max_abs_diff(a, b) == 0, "two assemblies differ by %.1e", T.max_abs_diff(a, b))
end

-- rows whose cells do not fit the window: computed apart (each row's cells made for it, the
-- rows apart of a batch's stretch in one launch). A window of 64 matrices (FELAB_FILL_WINDOW,
-- in a second run of this script) holds no P1 row of a box whose layers are 384 cells, so
-- almost every row goes apart (its cells' matrices made about as often as a cell has nodes),
-- and the matrix is the same (the general passes asked for: FELAB_PATTERN_NODES, else a
-- box's rows come from its lattice).
if arg[1] == "small-window" then
  local m = mesh.box{cells = {8, 8, 8}, cell = "tet"}
  local V = fe.space(m, "P1")
  local A = fe.operator(V, physics.poisson{kappa = "1 + x[0]", source = 1}, {dirichlet = {"xmin"}})
  local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end)
  local y, reps = products(A, w)
  local d = T.max_rel_diff(y.nodes, y.atomic)
  local made = tonumber(reps.nodes.why:match("%((%d+) for"))
  check(d <= 1e-13 and made and made >= 3 * m.ncells and reps.nodes.launches < V.ndofs / 2,
        "rows apart: nodes = atomic to %.1e, %s matrices for %d cells in %d launches (%d rows)",
        d, tostring(made), m.ncells, reps.nodes.launches, V.ndofs)
  print(("a window of 64 matrices: nodes = atomic to %.1e, %d matrices for %d cells in %d "
         .. "launches"):format(d, made, m.ncells, reps.nodes.launches))
  return
end
if arg[1] ~= "outliers" then
  local i = 0
  while arg[i - 1] do i = i - 1 end
  for _, run in ipairs({"FELAB_PATTERN_NODES=1 FELAB_FILL_WINDOW=64 '%s' '%s' small-window",
                        "FELAB_PATTERN_NODES=1 FELAB_PATTERN_FIT=16 '%s' '%s' outliers"}) do
    local cmd = run:format(arg[i], arg[0])
    check(os.execute(cmd), "the run failed: %s", cmd)
  end
end

-- scalar rows in double are filled by cells (cell-fill.c), the rest by rows: the two give the
-- same matrices bit for bit (FELAB_FILL_ROWS=1: by rows; both in children, 1 and 3 threads)
if arg[1] == nil then
  local i = 0
  while arg[i - 1] do i = i - 1 end
  local function child(env)
    local p = check(io.popen(("%s '%s' '%s' bits 2>&1"):format(env, arg[i], arg[0])))
    local out = p:read("a")
    check(p:close() and out:find("Q2 %d"), "the child (%s) failed:\n%s", env, out)
    -- felab's own notes on stderr (a calibration measured beside other processes says how
    -- busy the cores were, which differs from child to child) are not the matrices'
    return (out:gsub("felab: [^\n]*\n", ""))
  end
  local lattice, cells = child("OMP_NUM_THREADS=3"), child("FELAB_PATTERN_NODES=1 OMP_NUM_THREADS=2")
  local rows = child("FELAB_FILL_ROWS=1 OMP_NUM_THREADS=1")
  -- the boxes' scalar vertex spaces from their lattice (not the reordered meshes, not P2, Q2),
  -- nothing else, and the three fills' matrices the same bits
  local want = {["P1"] = 1, ["Q1"] = 1, ["P1 prisms"] = 1, ["P1 tris"] = 1,
                ["Q1 quads"] = 1, ["P1 tets, no Dirichlet"] = 1, ["P1 at a state"] = 1}
  local n = 0
  for line in lattice:gmatch("[^\n]+") do
    local name, tail = line:match("^(.-) %-?%d+(.*)$")
    check(name and (tail == " lattice") == (want[name] == 1), "the lattice's rows: %s", line)
    n = n + 1
  end
  check(n == 12 and not cells:find("lattice") and not rows:find("lattice"),
        "the lattice where asked for only: %d cases\n%s\n%s", n, cells, rows)
  local function bits(out) return (out:gsub(" lattice", "")) end
  check(bits(lattice) == cells and cells == rows, "the fills differ (the lattice's, by cells, "
        .. "by rows):\n%s\n%s\n%s", lattice, cells, rows)
  print("the lattice's fill = the fill by cells = the fill by rows, bit for bit (P1 tets, "
        .. "prisms, tris; Q1 hexes, quads; P2, Q2, reordered meshes)")
end

-- where the host's fill cannot run, the rows are summed on the device from stored element
-- matrices (scatter "nodes" there): on opencl, and for P1 on curved cells (whose Jacobian the
-- nodes do not carry)
do
  local V = fe.space(box, "P1")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
  local w = V:interpolate(function(x) return 1 + x[1] - 2 * x[2] * x[3] end)
  local dev = T.device("opencl")
  if dev and dev.available then
    local M, rep = A:assemble{backend = "opencl", scatter = "nodes"}
    local Ma = A:assemble{backend = "opencl", scatter = "atomic"}
    local d = T.max_rel_diff(M:apply(w:to("opencl")):to("cpu"), Ma:apply(w:to("opencl")):to("cpu"))
    check(rep.why:find("cell order", 1, true) and d <= 1e-13, "opencl rows: %s, %.1e", rep.why, d)
  else
    T.skip("assemble on opencl: opencl not available")
  end
end
if mesh.load then
  local ok, m = pcall(mesh.load, "meshes/sphere.geo", {size = 0.6, order = 2})
  if ok then
    local V = fe.space(m, "P1")
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
    local w = V:interpolate(function(x) return 1 + x[1] - 2 * x[2] * x[3] end)
    local Mn, rn = A:assemble{scatter = "nodes"} -- stored matrices, the device's rows
    local M, rep = A:assemble{backend = "cpu"} -- the default there: the device's adds
    check(rep.why:find("atomic", 1, true) and M.nnz > 0 and rn.why:find("cell order", 1, true),
          "curved P1 on the cpu: %s / %s", rep.why, rn.why)
    local d = T.max_rel_diff(Mn:apply(w), M:apply(w))
    check(d <= 1e-13, "curved P1: rows = atomic to %.1e", d)
  else
    T.skip("curved P1: " .. tostring(m))
  end
else
  T.skip("curved P1: no mesh.load in this build")
end
T.done()
