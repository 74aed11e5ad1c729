-- The paper scripts (issue 49): every scripts/papers/*.lua but the shared paper.lua runs quick
-- on the cpu in a child felab to its end, its checks passed (a failed check is an error, so
-- the child exits nonzero), printing the paper's figures beside felab's; a bad argument is an
-- error that names the arguments there are.
-- Run: build/felab tests/scripts/test_papers.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local root = (arg[0]:match("^(.*/)tests/scripts/") or "./")
local felab = T.exe()
if felab and not felab:find("^/") and felab:find("/", 1, true) then felab = os.getenv("PWD") .. "/" .. felab end
check(felab and not felab:find("'", 1, true), "the felab binary's name: %s", tostring(felab))
local t_start = perf.clock()

-- the scripts, and the least number of checks each makes when quick
local least = {banas = 10, kiss = 6, knepley_rupp = 16, knepley_terrel = 8, remacle = 12}
local scripts = {}
local ls = check(io.popen("ls '" .. root .. "scripts/papers'"))
for name in ls:lines() do
  local s = name:match("^(.+)%.lua$")
  if s and s ~= "paper" then scripts[#scripts + 1] = s end
end
ls:close()
table.sort(scripts)
check(#scripts >= 5, "scripts/papers has %d paper scripts, the five seed papers' at least", #scripts)
for s in pairs(least) do
  local found = false
  for _, x in ipairs(scripts) do found = found or x == s end
  check(found, "scripts/papers/%s.lua is missing", s)
end

-- run one script in a child felab: its output and whether it exited 0
local function child(script, args)
  local p = check(io.popen(("cd '%s' && '%s' scripts/papers/%s.lua %s 2>&1"):format(root, felab, script, args)))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

for _, s in ipairs(scripts) do
  local t0 = perf.clock()
  local out, ok = child(s, "quick")
  local seconds = perf.clock() - t0
  check(ok, "scripts/papers/%s.lua quick failed:\n%s", s, out)
  local n = tonumber(out:match("\n" .. s .. ": (%d+) checks passed"))
  check(n, "scripts/papers/%s.lua did not print its closing line:\n%s", s, out)
  local lines = 0
  for _ in out:gmatch("\nchecked: ") do lines = lines + 1 end
  check(lines == n and n >= (least[s] or 1), "scripts/papers/%s.lua: %d checks (%d printed), expected %d at least",
        s, n, lines, least[s] or 1)
  check(out:find("the paper's figures (quoted) beside felab's", 1, true) and out:find("felab/paper", 1, true),
        "scripts/papers/%s.lua printed no comparison:\n%s", s, out)
  check(seconds < 60, "scripts/papers/%s.lua quick took %.1f s, over a minute", s, seconds)
  print(("%-16s %5.1f s, %d checks passed"):format(s, seconds, n))
end

-- a bad argument names the ones there are
local out, ok = child("kiss", "fast")
check(not ok and out:find("unknown argument 'fast' (quick, backend=", 1, true), "kiss.lua fast:\n%s", out)

print(("test_papers: %d scripts, %.1f s"):format(#scripts, perf.clock() - t_start))
T.done()
