-- The assembly's pattern built on the device (engine/matrix/pattern-device.c, pattern.knl,
-- pattern_rows.knl), on every backend here (cpu, opencl; cuda where there is one):
-- - its row pointers and columns equal the host's (pattern.c) entry for entry, and with the
--   same stored element matrices summed row by row (scatter "rows") its values equal the
--   host-pattern matrix's bit for bit: P1 and P2 tets, distorted Q1 hexes, elasticity with one
--   side fixed (rows and columns partly constrained), kappa per region, a Gmsh mesh;
-- - the matrix equals the atomic adds' to rounding and acts as the matrix-free Jacobian;
-- - the report splits the setup into parts and says the bytes each holds;
-- - a node whose cells hold more entries than the row kernels take (FELAB_PATTERN_CAP, in a
--   child process) has the pattern built on the host, and says so;
-- - the csr strategy's first apply after A:assemble takes that matrix (no second assembly),
--   and builds its own once a named constant the Jacobian reads changes;
-- - two fresh processes on one new kernel cache: the second compiles nothing; two at once
--   compile each kernel once between them (cpu, cuda: the cache's kernel locks).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

-- the CSR arrays of two matrices: the same pattern? and the largest difference of values
local function compare(a, b)
  local x, y = a:get(), b:get()
  if #x.rowptr ~= #y.rowptr or #x.cols ~= #y.cols then return false, math.huge end
  for i = 1, #x.rowptr do if x.rowptr[i] ~= y.rowptr[i] then return false, math.huge end end
  for i = 1, #x.cols do if x.cols[i] ~= y.cols[i] then return false, math.huge end end
  local d = 0
  for i = 1, #x.vals do d = math.max(d, math.abs(x.vals[i] - y.vals[i])) end
  return true, d
end

if arg[1] == "wide" then -- the child: every node too wide for the row kernels
  local box = mesh.box{cells = {3, 3, 2}, cell = "tet", distort = 0.2}
  local A = fe.operator(fe.space(box, "P2"), physics.poisson{kappa = 1, source = 1},
                        {dirichlet = "all"})
  for _, be in ipairs(T.backends(true)) do
    local M, rep = A:assemble{backend = be, pattern = "device", scatter = "rows"}
    local H = A:assemble{backend = be, pattern = "host", scatter = "rows"}
    local same, d = compare(M, H)
    check(rep.why:find("too wide", 1, true) and same and d == 0, "%s, too wide: %s (%s, %g)",
          be, rep.why, tostring(same), d)
  end
  print("wide ok")
  return
end
if arg[1] == "cache" then -- the child: a csr apply on the device's pattern, then its counts
  local A = fe.operator(fe.space(mesh.box{cells = {4, 4, 4}, cell = "tet"}, "P1"),
                        physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local be = arg[2]
  A:apply(A.space:interpolate(function(x) return x[1] end):to(be),
          {backend = be, strategy = "csr"})
  local c = perf.counts()
  print(("counts %d %d"):format(c.compiled, c.cached))
  return
end

local box = mesh.box{cells = {4, 3, 3}, cell = "tet", distort = 0.2}
local hex = mesh.box{cells = {3, 4, 3}, cell = "hex", distort = 0.2}
local cases = T.assembly_cases(box, hex)
if mesh.load then
  local ok, m = pcall(mesh.load, "meshes/torso.geo", {size = 0.5})
  if ok then
    cases[#cases + 1] = {"P2 on a Gmsh mesh (torso)", m, "P2",
                         physics.poisson{kappa = 1, source = 1}, "all"}
  else
    T.skip("the Gmsh mesh: " .. tostring(m))
  end
else
  T.skip("the Gmsh mesh: no mesh.load in this build")
end

for _, c in ipairs(cases) do
  local name, m, sp, pde, dir = table.unpack(c)
  local V = fe.space(m, sp)
  local A = fe.operator(V, pde, {dirichlet = dir})
  local w = V:interpolate(function(x) return 1 + x[1] - 2 * x[2] * x[3] end)
  local free = A:apply(w, {backend = "cpu", strategy = "transpose"})
  local done = {}
  for _, be in ipairs(T.backends(true)) do
    local D, rep = A:assemble{backend = be, pattern = "device", scatter = "rows"}
    local H = A:assemble{backend = be, pattern = "host", scatter = "rows"}
    local At = A:assemble{backend = be, scatter = "atomic"}
    local same, d = compare(D, H)
    check(same and d == 0, "%s on %s: the device's pattern and matrix against the host's: "
          .. "pattern %s, values off by %g", name, be, tostring(same), d)
    local same2, d2 = compare(D, At)
    local scale = math.abs(D:get().vals[1])
    check(same2 and d2 <= 1e-13 * scale, "%s on %s: against the atomic adds: %s, %.1e", name,
          be, tostring(same2), d2)
    local dw = T.max_rel_diff(free, D:apply(w:to(be)):to("cpu"))
    check(dw <= 1e-12, "%s on %s: M w against the matrix-free Jacobian: %.1e", name, be, dw)
    local parts, held = rep.setup_parts, rep.memory
    check(rep.why:find("pattern on the device", 1, true) and parts.pattern and parts.pattern > 0
          and held.pattern == 4 * (V.ndofs + 1) + 4 * D.nnz and
          held.fill == (D.precision == "double" and 8 or 4) * D.nnz,
          "%s on %s: the report: %s; pattern %s s, holds %s and %s bytes", name, be, rep.why,
          tostring(parts.pattern), tostring(held.pattern), tostring(held.fill))
    done[#done + 1] = be
  end
  print(("%-30s device pattern = host's bit for bit on %s"):format(name, table.concat(done, ", ")))
end

-- the default where buffers are not host memory is the device's pattern; the cpu's is its fill
do
  local A = fe.operator(fe.space(box, "P1"), physics.poisson{kappa = 1, source = 1})
  local _, rc = A:assemble{backend = "cpu"}
  check(rc.why:find("box's lattice", 1, true), "the cpu's default on a box: %s", rc.why)
  local _, rg = fe.operator(fe.space(box, "P2"), physics.poisson{kappa = 1, source = 1})
                  :assemble{backend = "cpu"}
  check(rg.why:find("made as the rows need them", 1, true), "the cpu's default: %s", rg.why)
  for _, be in ipairs(T.backends(true)) do
    if be ~= "cpu" then
      local _, r = A:assemble{backend = be}
      check(r.why:find("pattern on the device", 1, true), "%s's default: %s", be, r.why)
    end
  end
end

-- csr takes A:assemble's matrix; a changed constant the Jacobian reads: its own
do
  local pde = physics.new{constants = {k = 2}, f1 = function(_, du, _, a) return a.k * du end}
  local V = fe.space(box, "P1")
  local A = fe.operator(V, pde, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] * x[2] end)
  for _, be in ipairs(T.backends(true)) do
    local M = A:assemble{backend = be}
    local s0 = perf.counts().setups
    local y, r = A:apply(w:to(be), {backend = be, strategy = "csr"})
    check(r.why:find("A:assemble made", 1, true) and not r.setup_parts.pattern,
          "%s: csr after A:assemble: %s (pattern part %s)", be, r.why,
          tostring(r.setup_parts.pattern))
    check(T.max_rel_diff(M:apply(w:to(be)):to("cpu"), y:to("cpu")) == 0, "%s: csr = M", be)
    pde:set{k = 3}
    local y3, r3 = A:apply(w:to(be), {backend = be, strategy = "csr"})
    local mf = A:apply(w, {backend = "cpu", strategy = "transpose"})
    check(not r3.why:find("A:assemble made", 1, true) and r3.setup_parts.pattern and
          T.max_rel_diff(mf, y3:to("cpu")) <= 1e-12, "%s: k changed: csr's own: %s (%.1e)", be,
          r3.why, T.max_rel_diff(mf, y3:to("cpu")))
    pde:set{k = 2}
    check(perf.counts().setups > s0, "%s: setups counted", be)
  end
  print("csr's first apply after A:assemble takes its matrix; a changed constant: its own")
end

local exe = T.exe()
do -- too wide: the host's pattern, said
  local p = check(io.popen(("FELAB_PATTERN_CAP=32 '%s' '%s' wide 2>&1"):format(exe, arg[0])))
  local out = p:read("a")
  check(p:close() and out:find("wide ok", 1, true), "the child (too wide) failed:\n%s", out)
  print("a node too wide for the row kernels: the host's pattern, the same matrix")
end
for _, be in ipairs(T.backends(true)) do -- cold and warm cache
  local dir = os.tmpname()
  os.remove(dir)
  local function child()
    local p = check(io.popen(("FELAB_CACHE='%s' '%s' '%s' cache %s 2>&1"):format(dir, exe,
                                                                              arg[0], be)))
    local out = p:read("a")
    check(p:close(), "the child failed:\n%s", out)
    local k, l = out:match("counts (%d+) (%d+)")
    check(k, "the child printed no counts:\n%s", out)
    return tonumber(k), tonumber(l)
  end
  local k1 = child()
  local k2, l2 = child()
  os.execute("rm -rf '" .. dir .. "'")
  check(k1 >= 1 and k2 == 0 and l2 >= 1, "%s: a fresh cache compiled %d, the filled one %d "
        .. "(want 0), loaded %d", be, k1, k2, l2)
  print(("%s: csr's first apply: a fresh cache compiles %d kernels, the filled one "
         .. "none (%d loaded)"):format(be, k1, l2))
  -- two children at once on a fresh cache (mpirun's ranks): the kernel locks let each kernel be
  -- compiled by one of them (cuda's compile-ahead batch too); opencl keeps no locks
  if be ~= "opencl" then
    local run = ("FELAB_CACHE='%s' '%s' '%s' cache %s"):format(dir, exe, arg[0], be)
    os.execute(("(%s > '%s.a' 2>&1 & %s > '%s.b' 2>&1 & wait)"):format(run, dir, run, dir))
    local sum = 0
    for _, f in ipairs({dir .. ".a", dir .. ".b"}) do
      local h = io.open(f)
      local out = h and h:read("a") or ""
      if h then h:close() end
      os.remove(f)
      local k = out:match("counts (%d+) %d+")
      check(k, "%s: a child of two at once printed no counts:\n%s", be, out)
      sum = sum + (tonumber(k) or 0)
    end
    os.execute("rm -rf '" .. dir .. "'")
    check(sum <= k1, "%s: two processes at once on a fresh cache compiled %d kernels, one alone %d",
          be, sum, k1)
    print(("%s: two processes at once on a fresh cache: %d compiles between them"):format(be, sum))
  end
end
T.done()
