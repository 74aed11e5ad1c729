-- OpenCL keeps a kernel's tables (program-scope FE_CONSTANT arrays) in __constant memory, of
-- which a GPU holds CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE bytes (64 KB on NVIDIA's OpenCL).
-- The strategies whose kernels embed dense tables (transpose, patch, the element matrices of
-- csr and ebe) do not apply where those tables cannot fit (device info constant_tables), so
-- the default and A:strategies() pass them by; and the backend counts a program's tables
-- before a build, or before a cached binary is loaded, refusing one that cannot fit with the
-- sizes (backends/opencl/opencl-program.c). PoCL has no such bound, so children run with
-- FELAB_OPENCL_CONSTANT_LIMIT: at 64K (as on NVIDIA) Q3 transpose's dense tables in double
-- (128 KB) are refused by the strategy naming the bytes, the limit and the device, the default
-- runs (sumfact) and equals the cpu's, transpose is not listed; at 64 bytes even sumfact's 1D
-- tables are refused by the backend, and the session goes on (a cpu apply after it runs).
-- Without the variable transpose runs and equals the cpu's to 1e-12. A limit that is not a
-- size makes opencl unavailable, saying why.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local function problem()
  local V = fe.space(mesh.box{cells = {2, 2, 2}, cell = "hex"}, "Q3")
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "xmin"})
  return A, V:interpolate(function(x) return x[1] * x[2] + 0.3 + x[3] end)
end

-- the children, under FELAB_OPENCL_CONSTANT_LIMIT: the refusals, then the session goes on
if arg[1] == "limited" then -- 64K
  local A, w = problem()
  local msg = expect_error(function() return A:apply(w, {backend = "opencl", strategy = "transpose"}) end,
                           "strategy 'transpose' does not apply", "exceed", arg[2],
                           "constant memory (65536 bytes)")
  local need = tonumber(msg:match("W: (%d+) bytes"))
  check(need and need > 65536, "the refusal names the tables' bytes:\n%s", msg)
  print("refused: " .. msg)
  local ref = A:apply(w, {backend = "cpu"})
  local y, rep = A:apply(w, {backend = "opencl"})
  local d = T.max_rel_diff(ref, y:to("cpu", "double"))
  check(rep.strategy ~= "transpose" and d <= 1e-12, "the default under 64K: %s, %.1e from the cpu",
        rep.strategy, d)
  for _, name in ipairs(A:strategies({backend = "opencl"})) do
    check(name ~= "transpose" and name ~= "patch", "A:strategies() on opencl lists %s", name)
  end
  T.done("limited")
  return
end
if arg[1] == "tiny" then -- 64 bytes: sumfact's 1D tables too
  local A, w = problem()
  local msg = expect_error(function() return A:apply(w, {backend = "opencl"}) end,
                           "OpenCL kernel", "exceed the device's constant memory",
                           "64 bytes on " .. arg[2], "FELAB_OPENCL_CONSTANT_LIMIT",
                           "use another strategy")
  local need = tonumber(msg:match("need (%d+) bytes"))
  check(need and need > 64, "the refusal names the tables' bytes:\n%s", msg)
  print("refused: " .. msg)
  local y = A:apply(w, {backend = "cpu"})
  check(y:norm() > 0, "a cpu apply after the refusal runs")
  T.done("tiny")
  return
end

local ocl = T.device("opencl")
if not (ocl and ocl.available) then
  T.skip("no opencl device")
  return
end
local device_name = tostring(ocl.device)

-- opencl_without_a_lowered_limit_matches_cpu_to_1e12 (not on NVIDIA: its 64 KB refuse it)
if not T.nvidia_opencl() then
  local A, w = problem()
  local ref = A:apply(w, {backend = "cpu"})
  local y = A:apply(w, {backend = "opencl", strategy = "transpose"})
  local d = T.max_rel_diff(ref, y:to("cpu", "double"))
  check(d <= 1e-12, "Q3 transpose on %s differs from the cpu's by %.1e", device_name, d)
  print(("ok: Q3 transpose on %s with its 128 KB of tables, %.1e from the cpu"):format(device_name, d))
end

-- tables_past_the_limit_are_refused_with_their_sizes_and_the_session_goes_on
local exe = T.exe()
check(exe and not exe:find("'", 1, true) and not device_name:find("'", 1, true),
      "arg[-1] names the felab binary")
for _, child in ipairs({{"64K", "limited"}, {"64", "tiny"}}) do
  local p = check(io.popen(("FELAB_OPENCL_CONSTANT_LIMIT=%s '%s' '%s' %s '%s' 2>&1"):format(
                            child[1], exe, arg[0], child[2], device_name)))
  local out = p:read("a")
  local ok = p:close()
  check(ok and out:find(child[2] .. ": %d+ checks passed"), "the run under "
        .. "FELAB_OPENCL_CONSTANT_LIMIT=%s failed:\n%s", child[1], out)
  io.write(out:match("refused: [^\n]*\n") or "")
end

-- a limit that is not a size: opencl is unavailable, and says why
local code = 'for _, d in ipairs(device.list()) do if d.name == "opencl" then print(d.reason) end end'
local p = check(io.popen(("FELAB_OPENCL_CONSTANT_LIMIT=lots '%s' -e '%s' 2>&1"):format(exe, code)))
local out = p:read("a")
p:close()
check(out:find("FELAB_OPENCL_CONSTANT_LIMIT='lots' is not a size", 1, true),
      "a bad limit is named:\n%s", out)
T.done()
