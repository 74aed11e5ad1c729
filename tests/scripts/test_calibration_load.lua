-- A calibration measured while other processes load the host (engine/perf/calibrate.c): felab
-- counts the CPU time others took meanwhile (/proc/stat less its own and its children's) and,
-- above 15% of the cores' time, says so and does not store what it measured unless asked
-- (device.calibrate): the session uses it, a later one measures again. Busy loops on half the
-- cores (rounded up) make the load (one on two cores: 68% of the cores' time counted as
-- others' here, against the 15%; a loop on every core took the cores from the suite's other
-- lane as well); children with fresh caches calibrate beside them.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local exe = T.exe()
if not io.open("/proc/stat") then
  T.skip("no /proc/stat here: the host's load is not known")
  return
end
local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end
local cores = math.tointeger(tonumber(sh("nproc"):match("%d+"))) or 2
local loops = (cores + 1) // 2
local pids = {}
for i = 1, loops do
  pids[i] = sh("sh -c 'while :; do :; done' > /dev/null 2>&1 & echo $!"):match("%d+")
end
local ok, err = pcall(function()
  local apply = [[local V = fe.space(mesh.box{cells = 2}, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
A:apply(V:interpolate(1))]]
  local calibrate = [[local r = device.calibrate("cpu", "double") print("why: " .. r.why)]]
  for _, c in ipairs{{"a model's calibration", apply, false}, {"device.calibrate", calibrate, true}} do
    local cache = os.tmpname()
    os.remove(cache)
    local out = sh(("FELAB_CACHE='%s' '%s' -e '%s' 2>&1"):format(cache, exe, c[2]))
    local stored = sh(("ls '%s/calibration' 2>/dev/null"):format(cache)):find("cpu%-") ~= nil
    sh(("rm -rf '%s'"):format(cache))
    check(out:find("ran beside other processes", 1, true),
          "%s under %d busy loops: no word of the load in\n%s", c[1], loops, out)
    check(stored == c[3], "%s under load: stored %s, expected %s", c[1], tostring(stored),
          tostring(c[3]))
    if c[3] then check(out:find("why: beside other processes", 1, true), "the report's why: %s", out) end
    print(("%s beside %d busy loops: said so, %s"):format(c[1], loops, stored and "stored (asked)" or "not stored"))
  end
end)
for _, pid in ipairs(pids) do os.execute("kill " .. pid .. " 2>/dev/null") end
if not ok then error(err, 0) end
T.done()
