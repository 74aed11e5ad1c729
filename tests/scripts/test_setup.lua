-- Setup shown apart and built once (issue 19), counted, not timed: an operator's first call
-- builds its device data and gets its kernel (compiled or from the cache), and its report
-- says so part by part; a second identical call builds and compiles nothing; a fresh process
-- on a filled cache compiles nothing. Every backend here, three strategies. A field from C
-- expressions of x (a kernel where the vector lives) equals the one from a Lua function, in
-- double and single, scalar and vector; bad expressions are named.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

local function problem()
  local m = mesh.box{cells = 3, cell = "hex"}
  local V = fe.space(m, "Q2")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  return A, V:interpolate(function(x) return x[1] * x[2] + x[3] end)
end

if arg[1] == "child" then -- one apply on the cpu, then what the process built
  local A, w = problem()
  A:apply(w, {backend = "cpu", strategy = "sumfact"})
  local c = perf.counts()
  print(("counts %d %d %d"):format(c.compiled, c.cached, c.setups))
  return
end

local A, w = problem()
for _, be in ipairs(T.backends()) do
  for _, s in ipairs({"transpose", "sumfact", "csr"}) do
    local o = {backend = be, strategy = s}
    local what = be .. "/" .. s
    local c0 = perf.counts()
    local _, r1 = A:apply(w, o)
    local c1 = perf.counts()
    check(c1.setups == c0.setups + 1, "%s: the first call set up %d device data", what,
          c1.setups - c0.setups)
    check(c1.compiled + c1.cached > c0.compiled + c0.cached, "%s: the first call got no kernel", what)
    check(r1.kernel == "compiled" or r1.kernel == "cached", "%s: first kernel %s", what,
          tostring(r1.kernel))
    local parts, sum = r1.setup_parts, 0
    for k, v in pairs(parts) do
      check(v > 0, "%s: setup part %s = %g", what, k, v)
      sum = sum + v
    end
    check(r1.setup_seconds > 0 and math.abs(sum - r1.setup_seconds) <= 1e-9 + 1e-6 * r1.setup_seconds,
          "%s: the parts %g do not add up to the setup %g", what, sum, r1.setup_seconds)
    -- the first call answers with the kernel's first run (OpenCL: its second; PoCL compiles
    -- at the first launch), and says so
    local lazy = be == "opencl"
    check(r1.first_run == not lazy and
          (tostring(r1):find("the kernel's first run", 1, true) ~= nil) == not lazy,
          "%s: the first call's run: first_run %s\n%s", what, tostring(r1.first_run), tostring(r1))
    check(tostring(r1):find("built      device data", 1, true) and
          tostring(r1):find(r1.kernel == "compiled" and "kernel compiled" or "kernel loaded from the cache",
                            1, true), "%s: the first report does not say what it built:\n%s", what, tostring(r1))

    local _, r2 = A:apply(w, o)
    local c2 = perf.counts()
    check(c2.compiled == c1.compiled and c2.cached == c1.cached and c2.setups == c1.setups,
          "%s: the second call built %d device data, compiled %d, loaded %d", what,
          c2.setups - c1.setups, c2.compiled - c1.compiled, c2.cached - c1.cached)
    check(r2.kernel == "ready" and r2.setup_seconds == 0 and not r2.first_run and
          tostring(r2):find("built      no device data (ready); kernel ready", 1, true),
          "%s: the second report:\n%s", what, tostring(r2))
  end
end

-- Memory: the mesh's and the space's arrays, and the device buffers felab holds (counted)
do
  local m = mesh.box{cells = {4, 4, 4}, cell = "hex"}
  local V = fe.space(m, "Q2")
  check(m.bytes == m.nvertices * 24 + m.ncells * 9 * 4 + m.nfacets * 5 * 4,
        "m.bytes %d: the coordinates, cells with regions, facets with tags", m.bytes)
  check(V.bytes == m.ncells * V.nbasis * 4 + V.nnodes * 24, "V.bytes %d", V.bytes)
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] end):to("cpu")
  local m0 = perf.memory(true)
  check(m0.host > 0 and m0.host_peak >= m0.host, "host memory %d, peak %d", m0.host, m0.host_peak)
  check(m0.cpu and m0.cpu.peak == m0.cpu.now and m0.cpu.now >= V.ndofs * 8,
        "after a reset the cpu's peak is what it holds (%d, %d), at least the field",
        m0.cpu and m0.cpu.peak or -1, m0.cpu and m0.cpu.now or -1)
  local y = A:apply(w, {backend = "cpu", strategy = "sumfact"})
  local m1 = perf.memory()
  check(m1.cpu.now > m0.cpu.now + V.ndofs * 8 and m1.cpu.peak >= m1.cpu.now,
        "the apply's device data and output are counted: %d -> %d (peak %d)", m0.cpu.now,
        m1.cpu.now, m1.cpu.peak)
  y = nil
  A = nil
  collectgarbage()
  collectgarbage()
  local m2 = perf.memory()
  check(m2.cpu.now < m1.cpu.now and m2.cpu.peak == m1.cpu.peak,
        "released buffers leave the count, not the peak: %d -> %d (peak %d)", m1.cpu.now,
        m2.cpu.now, m2.cpu.peak)
end

local exe_for_oom = T.exe()

-- Out of memory while setting up: a named error (the operator, the part, the size), and the
-- session goes on. A child process under `ulimit -v`: its own size after building the mesh,
-- a P1 space (which needs no temporaries: its nodes are the vertices) and a field, plus 60
-- MiB, less than the stored geometry needs (99 MiB). Not under ASan, whose shadow memory
-- needs more address space than any such limit.
if os.getenv("FELAB_ASAN") ~= "1" then
  local build = "local m = mesh.box{cells = {60, 60, 60}, cell = 'tet'}; local V = fe.space(m, 'P1'); " ..
                "local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = 'all'}); " ..
                "local w = V:interpolate(1):to('cpu'); "
  local function run(limit, code)
    -- one thread and one malloc arena: the address space a run takes is the same each time
    -- (threads that allocate open arenas of 64 MiB each, as many as they run)
    local cmd = ("%sOMP_NUM_THREADS=1 MALLOC_ARENA_MAX=1 '%s' -e \"%s\" 2>&1"):format(
                limit and ("ulimit -v %d && "):format(limit) or "", exe_for_oom, build .. code)
    local p = check(io.popen(cmd))
    local out = p:read("a")
    p:close()
    return out
  end
  local vm = tonumber(run(nil, "print('vm', io.open('/proc/self/status'):read('a'):match('VmSize:%s*(%d+)'))")
                      :match("vm%s+(%d+)"))
  check(vm and vm > 0, "the child's size was not printed")
  local out = run(vm + 60 * 1024, "local ok, e = pcall(A.apply, A, w, {backend = 'cpu', strategy = 'transpose', geometry = 'unshared'}); " ..
                  "print('failed', not ok, e); print('after', mesh.box{cells = {2, 2, 2}}.ncells)")
  check(out:find("failed\ttrue\tsetting up transpose on cpu %(double%) for 1296000 cells: building [%w' ]+: " ..
                 "out of host memory"), "the error names the operator, the part and the memory:\n%s", out)
  check(out:find("after\t48"), "the session goes on after running out of memory:\n%s", out)
end

-- V:interpolate("C expression of x"): the same values as the Lua function, on every backend
do
  local m = mesh.box{cells = {4, 3, 2}, cell = "hex", distort = 0.2}
  local V = fe.space(m, "Q3")
  local a = V:interpolate(function(x) return x[1] * (1 - x[2]) + math.sin(x[3]) + math.pi end)
  for _, be in ipairs(T.backends()) do
    for _, prec in ipairs({"double", "single"}) do
      local b = V:interpolate("x[0] * (1 - x[1]) + sin(x[2]) + M_PI", {backend = be, precision = prec})
      local d = b:to("cpu", "double"):axpy(-1, a):norm() / a:norm()
      check(b.backend == be and d <= (prec == "double" and 1e-15 or 1e-6),
            "interpolate an expression on %s %s: %.1e from the Lua function", be, prec, d)
    end
  end
  local W = fe.space(mesh.box{cells = {3, 2}, cell = "tri"}, {family = "P", order = 2, components = 2})
  local u = W:interpolate(function(x) return {x[1] * x[2], 2 - x[1]} end)
  local d = W:interpolate({"x[0] * x[1]", "2 - x[0]"}):axpy(-1, u):norm()
  check(d <= 1e-15 * u:norm(), "a vector field from two expressions: %.1e", d)
  T.expect_error(function() return V:interpolate("x[0]; x[1]") end, "holds ';'")
  T.expect_error(function() return V:interpolate("x[0] +* 2") end, "does not compile",
                 "generated line", "x[0] +* 2")
  T.expect_error(function() return V:interpolate("n") end, "does not compile") -- no kernel names
  T.expect_error(function() return W:interpolate("x[0]") end, "2 components")
  T.expect_error(function() return V:interpolate("x[0]", {device = 1}) end, "device")
  print("interpolate: C expressions of x = the Lua function on " .. table.concat(T.backends(), ", "))
end

-- V:interpolate(function): traced once into a kernel where it can be (a call on symbols, four
-- calls to check), called at every node where it cannot; the same values either way
do
  local m = mesh.box{cells = {4, 3, 2}, cell = "hex", distort = 0.2}
  local V = fe.space(m, "Q3")
  local calls = 0
  local function f(x)
    calls = calls + 1
    return x[1] * (1 - x[2]) + math.sin(x[3]) / (2 + x[1] ^ 2) + math.pi
  end
  -- the same function made untraceable: a symbol is not a number
  local function direct(x)
    if type(x[1]) ~= "number" then error("not on symbols") end
    return x[1] * (1 - x[2]) + math.sin(x[3]) / (2 + x[1] ^ 2) + math.pi
  end
  local ref = V:interpolate(direct)
  for _, be in ipairs(T.backends(true)) do
    for _, prec in ipairs({"double", "single"}) do
      calls = 0
      local a = V:interpolate(f, {backend = be, precision = prec})
      local d = a:to("cpu", "double"):axpy(-1, ref):norm() / ref:norm()
      check(a.backend == be and a.precision == prec, "traced on %s %s: made on %s %s", be, prec,
            a.backend, a.precision)
      check(calls == 5, "traced on %s %s: the function was called %d times for %d nodes", be, prec,
            calls, V.ndofs)
      check(d <= (prec == "double" and 1e-15 or 1e-7), "traced on %s %s: %.1e from calls at every node",
            be, prec, d)
    end
  end
  local W = fe.space(mesh.box{cells = {3, 2}, cell = "tri"}, {family = "P", order = 2, components = 2})
  calls = 0
  local u = W:interpolate(function(x) calls = calls + 1; return {x[1] * x[2], 2 - x[1]} end)
  local d = W:interpolate({"x[0] * x[1]", "2 - x[0]"}):axpy(-1, u):norm()
  check(calls == 5 and d <= 1e-15 * u:norm(), "a vector field traced: %d calls, %.1e", calls, d)
  -- not traced: a branch on x, math.random (as math.random or kept aside), state between calls
  local b = V:interpolate(function(x) if x[1] > 0.5 then return 1 else return 0 end end)
  local bx = V:interpolate("x[0] > 0.5 ? 1 : 0")
  check(b:copy():axpy(-1, bx):norm() == 0 and b:max() == 1 and b:min() == 0,
        "a branch on x: called at every node")
  local rand = math.random
  for _, g in ipairs({function() return math.random() end, function(x) return x[1] + rand() - x[1] end}) do
    local r = V:interpolate(g)
    check(r:max() - r:min() > 0.5, "math.random: %g .. %g, not one value", r:min(), r:max())
  end
  check(math.random == rand and type(math.random()) == "number", "math.random is back after a trace")
  local n = 0
  local c = V:interpolate(function() n = n + 1; return n end)
  check(c:max() == n and c:min() < c:max() - V.ndofs + 2, "a counter: %g .. %g after %d calls",
        c:min(), c:max(), n)
  T.expect_error(function()
    return V:interpolate(function(x) if x[1] > 0.9 then error("too far") end return x[1] end)
  end, "V:interpolate", "the function failed at x =", "too far")
  print("interpolate: a function of x traced on " .. table.concat(T.backends(true), ", ") ..
        "; branches, math.random and state called at every node")
end

-- Two fresh processes on one new cache: the first compiles, the second compiles nothing
local exe = T.exe()
local dir = os.tmpname()
os.remove(dir)
local function child()
  local p = check(io.popen(("FELAB_CACHE='%s' '%s' '%s' child 2>&1"):format(dir, exe, arg[0])))
  local out = p:read("a")
  check(p:close(), "the child failed:\n%s", out)
  local compiled, cached, setups = out:match("counts (%d+) (%d+) (%d+)")
  check(compiled, "the child printed no counts:\n%s", out)
  return tonumber(compiled), tonumber(cached), tonumber(setups)
end
local k1, l1, s1 = child()
local k2, l2, s2 = child()
os.execute("rm -rf '" .. dir .. "'")
check(k1 >= 1 and s1 == 1, "a fresh cache: compiled %d, set up %d", k1, s1)
check(k2 == 0 and l2 >= 1 and s2 == 1, "a filled cache: compiled %d (want 0), loaded %d, set up %d",
      k2, l2, s2)
print(("fresh cache: %d kernels compiled; filled cache: %d compiled, %d loaded"):format(k1, k2, l2))
T.done()
