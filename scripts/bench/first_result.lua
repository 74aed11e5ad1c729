-- Benchmark (not a test): the time to a first result (issue 19). Each case runs in two fresh
-- felab processes on one new kernel cache (the device's calibration copied in): the first finds
-- no kernel ("cold"), the second finds every kernel ("warm"). Each process builds the problem
-- (mesh.box, fe.space, fe.operator, a field from a Lua function; the same field as a C
-- expression is timed too, "bx" = the build with it), applies the Poisson operator once (the first
-- apply: its setup and its kernel) and then 5 times more (the steady apply: the best), and
-- reports the split, the ratios to the steady apply and the peak memory: resident host memory
-- (VmHWM) and the device buffers felab held, next to the sizes of the mesh, the space and the
-- operator's device data. The process's first parallel loop, which starts its thread team, runs
-- before the build (a mesh.box of 8 cells) and is timed apart: a session pays it once.
-- usage: felab scripts/bench/first_result.lua [backend] [precision] [case ...]
--        (FIRST_RESULT_WARM=n: warm processes a case, default 3; the median is shown)
--        case: cell:space:cells-per-side:strategy, e.g. tet:P1:70:patch (default: the cpu set)
--        felab scripts/bench/first_result.lua one backend precision cell space n strategy
local MB = 1048576

if arg[1] == "one" then -- one process, one case: print one line of key=value
  local backend, precision, cell, space = arg[2], arg[3], arg[4], arg[5]
  local n, strategy = tonumber(arg[6]), arg[7]
  local o = {backend = backend, strategy = strategy, precision = precision}
  -- (a felab from before perf.memory, for a baseline in the same run: memory figures 0)
  local memory = perf.memory or function() return {host_peak = 0, [backend] = {now = 0, peak = 0}} end
  memory(true)
  -- the process's thread team starts at its first parallel loop (0.2-8 ms on the 2-core
  -- machine): once per process, whatever it builds, so timed apart
  local tt = perf.clock()
  mesh.box{cells = {2, 2, 2}, cell = cell}
  local team = perf.clock() - tt
  local t0 = perf.clock()
  local m = mesh.box{cells = {n, n, n}, cell = cell}
  local t1 = perf.clock()
  local V = fe.space(m, space)
  local t2 = perf.clock()
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local t3 = perf.clock()
  local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, precision)
  local t4 = perf.clock()
  -- the same field as a C expression, computed where the vector lives (-1: a felab without it)
  local ok = pcall(V.interpolate, V, "x[0] * (1 - x[1]) + x[2]", {backend = backend, precision = precision})
  local t4e = perf.clock()
  local field_expr = ok and t4e - t4 or -1
  local before = memory()[backend].now
  local _, first = A:apply(w, o)
  local t5 = perf.clock()
  local mem = memory()
  local best = math.huge
  for _ = 1, 5 do
    local _, r = A:apply(w, o)
    best = math.min(best, r.seconds)
  end
  local parts = first.setup_parts or {}
  print(("first_result dofs=%d cells=%d mesh=%.6f space=%.6f operator=%.6f field=%.6f first=%.6f " ..
         "setup=%.6f schedule=%.6f cell_data=%.6f geometry=%.6f own=%.6f kernel=%.6f kernel_how=%s " ..
         "steady=%.6f host_peak=%d device_peak=%d mesh_bytes=%d space_bytes=%d op_bytes=%d " ..
         "field_expr=%.6f team=%.6f")
        :format(V.ndofs, m.ncells, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4e,
                first.setup_seconds, parts.schedule or 0, parts.cell_data or 0,
                parts.geometry or 0, parts.strategy or 0, first.compile_seconds,
                first.kernel or "?", best, mem.host_peak, mem[backend].peak, m.bytes or 0, V.bytes or 0,
                mem[backend].now - before, field_expr, team))
  return
end

local backend = arg[1] or "cpu"
local precision = arg[2] or "double"
local warm_runs = tonumber(os.getenv("FIRST_RESULT_WARM") or "") or 3
local cases = {}
for i = 3, #arg do cases[#cases + 1] = arg[i] end
if #cases == 0 then
  cases = {"tet:P1:70:transpose", "tet:P1:70:patch", "hex:Q1:70:sumfact", "hex:Q3:24:sumfact"}
end

local exe = arg[0] -- the felab running this script: the lowest index of arg
for i = -1, -10, -1 do if arg[i] then exe = arg[i] end end
local script = arg[0]
local function root_cache()
  local c, x, h = os.getenv("FELAB_CACHE"), os.getenv("XDG_CACHE_HOME"), os.getenv("HOME")
  return c or (x and x ~= "" and x .. "/felab") or ((h or "/tmp") .. "/.cache/felab")
end
device.calibrate(backend, precision) -- once, into the user's cache; each case copies it
local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function run(cache, c)
  local cell, space, n, strategy = c:match("^(%w+):(%w+):(%d+):(%w+)$")
  assert(cell, "a case is cell:space:cells-per-side:strategy, e.g. tet:P1:70:patch; got " .. c)
  local cmd = ("FELAB_CACHE=%s %s %s one %s %s %s %s %s %s 2>&1"):format(sh(cache), sh(exe),
              sh(script), backend, precision, cell, space, n, strategy)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local line = out:match("first_result ([^\n]*)")
  if not line then error("case " .. c .. " failed:\n" .. out) end
  local r = {}
  for k, v in line:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) or v end
  return r
end

print(("time to a first result on %s (%s), %s"):format(backend,
      device.info(backend).name, precision))
local rows = {}
for _, c in ipairs(cases) do
  local cache = os.tmpname()
  os.remove(cache)
  os.execute(("mkdir -p %s && cp -r %s/calibration %s/ 2>/dev/null"):format(sh(cache),
             sh(root_cache()), sh(cache)))
  local cold = run(cache, c)
  -- the machine's speed may change within a minute (this 2-core one by up to 2x): the warm
  -- process runs `warm_runs` times, each ratio taken within its own process, and the run of
  -- the median first / steady is shown
  local warm = {}
  for i = 1, warm_runs do warm[i] = run(cache, c) end
  os.execute("rm -rf " .. sh(cache))
  table.sort(warm, function(a, b) return a.first / a.steady < b.first / b.steady end)
  local r = warm[(#warm + 1) // 2]
  rows[#rows + 1] = {c, cold, r}
  local build = r.mesh + r.space + r.operator + r.field
  print(("\n%s: %d dofs, %d cells"):format(c, r.dofs, r.cells))
  print(("  build %.3f s = mesh %.3f + space %.3f + operator %.3f + field %.3f (as a C " ..
         "expression: %.3f); before it the process's thread team started in %.3f s"):format(build,
        r.mesh, r.space, r.operator, r.field, r.field_expr or -1, r.team or 0))
  print(("  first apply %.3f s: setup %.3f (schedule %.3f, cell data %.3f, geometry %.3f, " ..
         "the strategy's own %.3f), kernel %s %.3f, the rest %.3f (its run)"):format(r.first, r.setup,
        r.schedule, r.cell_data, r.geometry, r.own, r.kernel_how, r.kernel,
        r.first - r.setup - r.kernel))
  local bx = build - r.field + (r.field_expr or -1)
  print(("  steady apply %.4f s; build / steady %.1f (with the field as an expression %.1f), " ..
         "first / steady %.1f"):format(r.steady, build / r.steady, bx / r.steady, r.first / r.steady))
  if #warm > 1 then
    local function range(f)
      local lo, hi = math.huge, -math.huge
      for _, w in ipairs(warm) do lo, hi = math.min(lo, f(w)), math.max(hi, f(w)) end
      return ("%.1f-%.1f"):format(lo, hi)
    end
    print(("  over %d warm processes: first / steady %s, build / steady %s (as an expression %s)")
          :format(#warm, range(function(w) return w.first / w.steady end),
                  range(function(w) return (w.mesh + w.space + w.operator + w.field) / w.steady end),
                  range(function(w) return (w.mesh + w.space + w.operator + w.field_expr) / w.steady end)))
  end
  print(("  cold cache: first apply %.3f s (kernel %s %.3f)"):format(cold.first, cold.kernel_how,
        cold.kernel))
  print(("  memory: host peak %.0f MiB, %s peak %.0f MiB; mesh %.0f MiB, space %.0f MiB, " ..
         "operator's device data %.0f MiB"):format(r.host_peak / MB, backend, r.device_peak / MB,
        r.mesh_bytes / MB, r.space_bytes / MB, r.op_bytes / MB))
end

print(("\n%-22s %8s %8s %8s %8s %8s %8s %7s %8s %8s %8s"):format("case", "build s", "first s",
      "steady s", "build/st", "bx/st", "first/st", "cold s", "host MiB", "dev MiB", "data MiB"))
for _, row in ipairs(rows) do
  local c, cold, r = row[1], row[2], row[3]
  local build = r.mesh + r.space + r.operator + r.field
  local bx = build - r.field + (r.field_expr or -1)
  print(("%-22s %8.3f %8.3f %8.4f %8.1f %8.1f %8.1f %7.2f %8.0f %8.0f %8.0f"):format(c, build, r.first,
        r.steady, build / r.steady, bx / r.steady, r.first / r.steady, cold.first, r.host_peak / MB,
        r.device_peak / MB, (r.mesh_bytes + r.space_bytes + r.op_bytes) / MB))
end
