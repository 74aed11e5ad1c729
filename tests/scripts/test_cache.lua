-- The cache heals itself: a compiled kernel (cpu shared object, OpenCL program binary) or a
-- calibration that is truncated, corrupt or another build's is dropped, rebuilt and named
-- once on stderr, and felab goes on with the same results. Each run is a felab of its own
-- on a fresh cache folder (FELAB_CACHE), so the suite's cache is never damaged.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

-- the child: calibrate each backend named in arg[3] ("calibrate"), or ask the model for a
-- small operator's strategies on the cpu, which reads the stored calibration ("predict"), or
-- run a Q3 apply on the cpu (a kernel of a second or so to compile: "apply")
if arg[1] == "child" then
  if arg[2]:find("apply") then
    local V = fe.space(mesh.box{cells = {2, 2, 2}, cell = "hex"}, "Q3")
    local A = fe.operator(V, physics.poisson{kappa = "1 + x[0]", source = 1})
    A:apply(V:interpolate(1), {backend = "cpu", strategy = "sumfact"})
    print("applied")
  end
  if arg[2]:find("predict") then
    local V = fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P1")
    local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
    local names, info = A:strategies{backend = "cpu", precision = "double"}
    print(("predicted %.17g"):format(info[names[1]].predicted_seconds))
  end
  if arg[2]:find("calibrate") then
    for name in arg[3]:gmatch("[^,]+") do
      local rep = device.calibrate(name, "double")
      check(rep.peak_gbytes > 0 and rep.peak_gflops > 0, name .. ": no ceilings measured")
      print(("calibrated %s %s"):format(name, rep.compile_seconds > 0 and "compiled" or "cached"))
    end
  end
  return
end

local exe = T.exe()
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p '" .. dir .. "'")
local backends = table.concat(T.backends(), ",")
local warning = "felab: dropped a damaged cache entry"

-- One child run on the test's cache: its output (stdout and stderr), and how many warnings.
local function run(mode)
  local cmd = ("FELAB_CACHE='%s' '%s' '%s' child %s %s 2>&1"):format(dir, exe, arg[0], mode, backends)
  local p = check(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  check(ok, "the run '%s' failed:\n%s", mode, out)
  local _, nwarn = out:gsub(warning, "")
  return out, nwarn
end

local function read(path)
  local f = check(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
local function write(path, s)
  local f = check(io.open(path, "wb"))
  f:write(s)
  f:close()
end
-- The files of a cache subfolder whose names end in ext.
local function entries(sub, ext)
  local list = {}
  local p = check(io.popen(("ls '%s/%s' 2>/dev/null"):format(dir, sub)))
  for name in p:lines() do
    if name:sub(-#ext) == ext then list[#list + 1] = dir .. "/" .. sub .. "/" .. name end
  end
  p:close()
  return list
end

-- a clean cache: everything compiled, nothing said
local out, nwarn = run("calibrate")
check(nwarn == 0, "a fresh cache warned:\n%s", out)
local sos, bins = entries("cpu", ".so"), entries("opencl", ".bin")
check(#sos == 1, "expected one cpu object in the cache, found %d", #sos)
check(#bins >= (backends:find("opencl") and 1 or 0), "no OpenCL binary in the cache")
local cpu_cal
for _, path in ipairs(entries("calibration", ".txt")) do
  if path:match("/cpu%-v18%-%x+%.txt$") then cpu_cal = path end
end
-- one line per precision: the precision, then "ceiling value" pairs
local stored_form = "^double dram %S+ l2 %S+ shared %S+ fma %S+ scalar %S+ nonfma %S+ atomics %S+ " ..
                    "constant %S+ launch %S+ sync %S+ dram_latency %S+ l2_latency %S+ phase_latency %S+ indexed %S+ indexed_l1 %S+ indexed_llc %S+ rows %S+ padded %S+ l1_requests 0 l1_lines 0 cycle %S+ read %S+ read_rate %S+ write %S+ write_rate %S+ llc_keep %S+ llc_rate %S+ curve_lanes [%d.,e+-]+ curve_llc [%d.,e+-]+\n$"
check(cpu_cal and read(cpu_cal):match(stored_form), "no cpu calibration stored")
local good = {}
for _, path in ipairs(sos) do good[path] = read(path) end
for _, path in ipairs(bins) do good[path] = read(path) end
local function escaped(s) return (s:gsub("%p", "%%%0")) end
-- Every kernel entry whole again: its magic, its header and more, and the cpu launchers.
local function rebuilt(how)
  for path, s in pairs(good) do
    local now = read(path)
    check(now:sub(1, 16) == s:sub(1, 16) and #now > 24, "%s: %s was not rebuilt", how, path)
  end
  check(read(sos[1]):find("fe_launch_fe_triad", 1, true), "%s: the cpu object lacks its kernels", how)
end

-- Damaged entries (truncated, too short, garbage) and a calibration that does not parse: the
-- calibration is read first, so the one warning names it; all are dropped and built again,
-- the prediction is made with ceilings measured again, and these are stored.
local kinds = {
  function(s) return s:sub(1, 10) end,               -- too short
  function(s) return ("garbage\n"):rep(#s // 8) end, -- garbage
}
local k = 0
for path, s in pairs(good) do
  k = k % #kinds + 1
  write(path, path == sos[1] and s:sub(1, #s // 2) or kinds[k](s)) -- the object: truncated
end
write(cpu_cal, "double fast\n")
out, nwarn = run("predict,calibrate")
check(nwarn == 1, "damaged entries: expected one warning, got %d:\n%s", nwarn, out)
check(out:find(warning .. " %(" .. escaped(cpu_cal) .. ": line 1: 'fast' has no value"),
      "the warning does not name the calibration:\n%s", out)
check(tonumber(out:match("predicted (%S+)")), "no prediction:\n%s", out)
check(read(cpu_cal):match(stored_form), "the calibration is not measured again")
rebuilt("damaged entries")

-- Another build's entries: a whole shared object without these kernels (the C math library
-- this process has loaded), a binary whose header names another source. Dropped, the first
-- named, and compiled again.
local libm
for line in io.lines("/proc/self/maps") do libm = libm or line:match("(/%S*/libm%.so[.%d]*)$") end
check(libm, "no libm in /proc/self/maps")
for path, s in pairs(good) do
  write(path, path == sos[1] and read(libm) or s:sub(1, 8) .. ("x"):rep(8) .. s:sub(17))
end
out, nwarn = run("calibrate")
check(nwarn == 1, "another build's: expected one warning, got %d:\n%s", nwarn, out)
check(out:find(warning .. " %(" .. escaped(sos[1]) .. ": it lacks this source's kernels"),
      "the warning does not name the cpu object:\n%s", out)
for name in backends:gmatch("[^,]+") do
  check(out:find("calibrated " .. name .. " compiled", 1, true), "%s was not rebuilt:\n%s", name, out)
end
rebuilt("another build's")

-- A calibration with a rate that is not positive: dropped, named, measured again.
local good_cal = read(cpu_cal)
write(cpu_cal, (good_cal:gsub(" shared %S+", " shared 0")))
out, nwarn = run("predict")
check(nwarn == 1 and out:find("'shared 0': a rate that is not positive", 1, true),
      "a rate of 0 is not named:\n%s", out)
-- measured again: stored, or (beside other processes, as in make test's two lanes) used for
-- the run and said not stored (engine/perf/calibrate.c)
local again = io.open(cpu_cal)
if again then again:close() end
check(again and read(cpu_cal):match(stored_form) or out:find("not stored", 1, true),
      "the calibration is not measured again after a 0 rate:\n%s", out)

-- Healed: nothing compiled and nothing said, and a calibration that parses is read as it is
-- (a launch waited for in 1 ms predicts at least 1 ms).
write(cpu_cal, "double dram 1 l2 1 shared 1 fma 1 scalar 1 nonfma 1 atomics 1 constant 1 launch 0 " ..
               "sync 1000 dram_latency 0 l2_latency 0 phase_latency 0 indexed 1 indexed_l1 1 indexed_llc 1 " ..
               "rows 1 padded 0 " ..
               "l1_requests 0 l1_lines 0 cycle 0 read 0 read_rate 0 write 0 write_rate 0 llc_keep 0 llc_rate 0\n")
out, nwarn = run("predict,calibrate")
check(nwarn == 0 and not out:find("compiled", 1, true), "the healed cache is not used:\n%s", out)
local t = tonumber(out:match("predicted (%S+)"))
check(t and t >= 1e-3, "a stored launch and wait of 1 ms predicts %s s", tostring(t))

-- another thread count is another device: its own calibration, measured and stored apart
-- (a session with OMP_NUM_THREADS=1 had read the two-thread rates: predictions 3x fast)
local threads = tonumber(os.getenv("OMP_NUM_THREADS") or "") or 0
local other = threads == 1 and 2 or 1
local p = check(io.popen(("OMP_NUM_THREADS=%d FELAB_CACHE='%s' '%s' '%s' child calibrate cpu 2>&1")
                         :format(other, dir, exe, arg[0])))
out = p:read("a")
check(p:close(), "the run with %d threads failed:\n%s", other, out)
local cpus = {}
for _, path in ipairs(entries("calibration", ".txt")) do
  if path:match("/cpu%-v18%-%x+%.txt$") then cpus[#cpus + 1] = path end
end
check(#cpus == 2 and out:find("calibrated cpu", 1, true),
      "%d threads: %d cpu calibrations stored (expected 2, one a thread count):\n%s", other,
      #cpus, out)

-- two processes of one cache (mpirun's ranks, the suite's lanes) compile a kernel once: one
-- compiles while the other waits on its lock (backends/cpu/cpu-program.c), then loads it.
-- FELAB_CC, a script that counts the compiles that write an object, then runs cc (another
-- compiler's name: kernels of their own in the cache, compiled now)
do
  local cc = dir .. "/cc.sh"
  local f = check(io.open(cc, "w"))
  f:write(("#!/bin/sh\ncase \"$*\" in *.so*) echo so >> '%s/cc.log' ;; esac\nexec cc \"$@\"\n")
          :format(dir))
  f:close()
  os.execute("chmod +x '" .. cc .. "'")
  local before = #entries("cpu", ".so")
  local one = ("FELAB_CC='%s' FELAB_CACHE='%s' '%s' '%s' child apply cpu"):format(cc, dir, exe, arg[0])
  os.execute(("(%s > '%s/a.out' 2>&1) & (%s > '%s/b.out' 2>&1) & wait"):format(one, dir, one, dir))
  local made = #entries("cpu", ".so") - before
  local compiles = 0
  local log = io.open(dir .. "/cc.log")
  for _ in (log and log:lines() or function() end) do compiles = compiles + 1 end
  if log then log:close() end
  local outs = ""
  for _, n in ipairs({"a", "b"}) do
    local o = io.open(("%s/%s.out"):format(dir, n))
    outs = outs .. (o and o:read("a") or "")
    if o then o:close() end
  end
  local _, applied = outs:gsub("applied", "")
  check(applied == 2 and made > 0 and compiles == made,
        "two processes at once: %d objects made, %d compiles (one each expected):\n%s", made,
        compiles, outs)
  print(("two processes at once: %d kernels compiled once each"):format(made))
end

os.execute("rm -rf '" .. dir .. "'")
T.done()
