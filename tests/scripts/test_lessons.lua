-- The lessons (issue 49): lesson() lists every file of scripts/lessons/; every Lua block of
-- docs/tutorial.md runs, and between them they run every lesson to its end (quick sizes, no
-- pause), each under a minute, checking the claims they make (L.check); a bad lesson number
-- or name is an error naming the lessons there are; at a prompt whose input ends the lesson
-- stops on q and runs straight through otherwise.
-- Run: build/felab tests/scripts/test_lessons.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error
local root = (arg[0]:match("^(.*/)tests/scripts/") or "./")
local t_start = perf.clock()

-- the lessons' files, by number
local files = {}
local ls = check(io.popen("ls '" .. root .. "scripts/lessons'"))
for name in ls:lines() do
  local n = name:match("^(%d+)%-.+%.lua$")
  if n then files[tonumber(n)] = name:gsub("%.lua$", "") end
end
ls:close()
check(#files >= 8, "scripts/lessons has %d numbered lessons, the issue's eight at least", #files)

-- a child felab (this very binary) with stdin from a file: what it prints
local felab = arg[-1]
check(felab and not felab:find("'", 1, true), "arg[-1] names the felab binary")
local function child(code, input)
  local script, stdin = os.tmpname(), os.tmpname()
  local f = check(io.open(script, "w"))
  f:write(code)
  f:close()
  f = check(io.open(stdin, "w"))
  f:write(input or "")
  f:close()
  local p = check(io.popen(("'%s' '%s' < '%s' 2>&1"):format(felab, script, stdin)))
  local out = p:read("a")
  local ok = p:close()
  os.remove(script)
  os.remove(stdin)
  return out, ok
end

-- lesson() lists them all: number, name, title
local out, ok = child("print('returns', select('#', lesson()))")
check(ok, "lesson() failed:\n%s", out)
check(out:find("returns\t0", 1, true), "lesson() returns something (the prompt would print it):\n%s", out)
for n, file in ipairs(files) do
  local name = file:match("^%d+%-(.+)$")
  check(out:find(("\n  %d  %s"):format(n, name), 1, true), "lesson() does not list %d %s:\n%s", n, name, out)
end

-- bad numbers and names: the error names the lessons there are
expect_error(function() lesson(99) end, "no lesson 99", "1 first-solve", "7 a100", "lesson() lists them")
expect_error(function() lesson("no-such") end, 'no lesson "no-such"', "4 sumfact")
expect_error(function() lesson(true) end, "expected a lesson's number or name, got boolean", "2 transposition")
expect_error(function() lesson(1, {speed = 2}) end, "unknown option 'speed'")
expect_error(function() lesson(1, {out = 3}) end, "out must be a folder's name")

-- the lessons' plots go to one folder, removed at the end
local dir = os.tmpname()
os.remove(dir)
check(os.execute("mkdir -p '" .. dir .. "'"))

-- pausing: a typed q stops after the first step; at the end of input it goes on unpaused
out, ok = child(("lesson(1, {quick = true, pause = true, out = %q})"):format(dir), "q\n")
check(ok and out:find("(stopped; lesson(1) starts again)", 1, true) and not out:find("step 2 of", 1, true),
      "q at the pause does not stop lesson 1 after its first step:\n%s", out)
out, ok = child(("lesson('first-solve', {quick = true, pause = true, out = %q})"):format(dir), "")
check(ok and out:find("end of lesson 1", 1, true), "lesson 1 does not run on at the end of its input:\n%s", out)
-- stdin not a terminal: no pause by default
out, ok = child(("lesson(1, {quick = true, out = %q})"):format(dir), "q\n")
check(ok and out:find("end of lesson 1", 1, true) and not out:find("[Enter", 1, true),
      "lesson 1 pauses with stdin not a terminal:\n%s", out)

-- docs/tutorial.md: its Lua blocks run in order, every lesson quick and unpaused into one
-- folder, each lesson timed and its returned variables kept
local real_lesson, ran = lesson, {}
lesson = function(which, o)
  if which == nil then return real_lesson() end
  o = o or {}
  o.quick, o.pause, o.out = true, false, dir
  local t0 = perf.clock()
  local env = real_lesson(which, o)
  local n = tonumber(which) or tonumber(env and env.L and env.L.number)
  ran[#ran + 1] = {which = which, env = env, seconds = perf.clock() - t0}
  return env, n
end
local f = check(io.open(root .. "docs/tutorial.md"))
local md = f:read("a")
f:close()
local nblocks = 0
for block in md:gmatch("```lua\n(.-)```") do
  nblocks = nblocks + 1
  local chunk = check(load(block, "=docs/tutorial.md block " .. nblocks, "t"))
  chunk()
end
lesson = real_lesson
check(nblocks >= 2, "docs/tutorial.md has %d Lua blocks", nblocks)

-- every lesson ran, to its end, under a minute, and checked what it claims
local by_number = {}
for _, r in ipairs(ran) do
  for n, file in ipairs(files) do
    if r.which == n or r.which == file:match("^%d+%-(.+)$") then by_number[n] = r end
  end
end
local claims = {2, 1, 1, 2, 1, 2, 1, 2} -- at least this many checks
for n, file in ipairs(files) do
  local r = by_number[n]
  check(r, "docs/tutorial.md runs no lesson(%d) (%s)", n, file)
  check(type(r.env) == "table" and r.env.L, "lesson(%d) returned no table of its variables", n)
  check(r.seconds < 60, "lesson %d took %.1f s (quick), over a minute", n, r.seconds)
  check(#r.env.L.checked >= (claims[n] or 0), "lesson %d checked %d claims, expected %d",
        n, #r.env.L.checked, claims[n] or 0)
  print(("lesson %d %-16s %5.1f s, %d claims checked"):format(n, file:match("^%d+%-(.+)$"), r.seconds,
                                                             #r.env.L.checked))
end
-- what the lessons computed
check(by_number[1].env.info.converged, "lesson 1's solve converged")
check(by_number[4].env.kt > by_number[4].env.ks, "lesson 4's growth exponents")
check(tostring(by_number[1].env):find("lesson 1's variables: A, V, V2,", 1, true),
      "lesson 1's table prints as its variables' names: %s", tostring(by_number[1].env))

-- their plots: the csv of each (and the png where gnuplot draws)
for _, name in ipairs{"residuals", "transposition", "matrices", "sumfact", "roofline", "twoscale",
                       "coloring"} do
  local p = io.open(dir .. "/" .. name .. ".csv")
  check(p, "no plot %s.csv in the lessons' folder", name)
  p:close()
end
os.execute("rm -rf '" .. dir .. "'")
print(("test_lessons: %d lessons, %d tutorial blocks, %.1f s"):format(#files, nblocks, perf.clock() - t_start))
T.done()
