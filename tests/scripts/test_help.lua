-- Every function help() can reach has an entry with a sentence (issue 17): the functions of
-- the module tables, the methods and types of felab's objects, the globals help, show and lesson.
-- help() prints, so the keys are collected here, then one felab child process (this very
-- binary, arg[-1]) prints help(key) for each, between markers, and its output is read back.
-- Run: build/felab tests/scripts/test_help.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

local keys, want_name = {}, {} -- want_name[key]: a word the signature must contain
local by_value = {} -- {key, expression}: help(expression), a function value, prints key's entry
local function add(key, name)
  keys[#keys + 1] = key
  want_name[key] = name
end

-- the functions of every module table
local modules = {"mesh", "fe", "physics", "solve", "device", "perf", "export"}
for _, m in ipairs(modules) do
  check(type(_G[m]) == "table", "module %s is missing", m)
  local names = {}
  for k, v in pairs(_G[m]) do
    if type(k) == "string" and type(v) == "function" then names[#names + 1] = k end
  end
  table.sort(names)
  check(#names > 0, "module %s has no functions", m)
  for _, k in ipairs(names) do add(m .. "." .. k, k) end
end
check(want_name["physics.dot"] and want_name["physics.det"], "physics.dot and physics.det are walked")

-- felab's object types (their metatables are in the registry) and their methods
local reg = debug.getregistry()
local ntypes = 0
for tname, mt in pairs(reg) do
  if type(tname) == "string" and tname:match("^felab%.") and type(mt) == "table" then
    ntypes = ntypes + 1
    add(tname, nil)
    local methods = type(rawget(mt, "__index")) == "table" and mt.__index or mt
    for k, v in pairs(methods) do
      if type(k) == "string" and type(v) == "function" and k:sub(1, 2) ~= "__" then
        add(tname .. ":" .. k, k)
        by_value[#by_value + 1] = {tname .. ":" .. k, ("debug.getregistry()[%q][%q]"):format(tname, k)}
      end
    end
  end
end
check(ntypes >= 6, "only %d felab types found in the registry", ntypes)
-- methods handed out by an __index function: help(pde.show) finds them by their value too
local pde = physics.poisson{}
for _, k in ipairs{"show", "set"} do
  check(type(pde[k]) == "function", "pde.%s is not a function", k)
  add("felab.physics:" .. k, k)
  by_value[#by_value + 1] = {"felab.physics:" .. k, "physics.poisson{}." .. k}
end
add("help", "help")
add("show", "show")
check(type(show) == "function", "the global show is missing")
add("lesson", "lesson")
by_value[#by_value + 1] = {"lesson", "lesson"}
check(type(lesson) == "function", "the global lesson is missing")

-- one child prints every entry
local script = os.tmpname()
local f = check(io.open(script, "w"))
for _, k in ipairs(keys) do f:write(("print(%q); help(%q)\n"):format("@@" .. k, k)) end
for _, v in ipairs(by_value) do f:write(("print(%q); help(%s)\n"):format("@@=" .. v[2], v[2])) end
f:close()
local felab = arg[-1]
check(felab and not felab:find("'", 1, true), "arg[-1] names the felab binary")
local pipe = check(io.popen("'" .. felab .. "' '" .. script .. "' 2>&1"))
local out = pipe:read("a")
local ok = pipe:close()
os.remove(script)
check(ok, "the help child failed:\n%s", out:sub(-500))

local sections, current = {}, nil
for line in out:gmatch("([^\n]*)\n") do
  local k = line:match("^@@(.*)$")
  if k then
    current = {}
    sections[k] = current
  elseif current then
    current[#current + 1] = line
  end
end

-- every key: a signature line naming it, then an indented sentence of a few words
local missing = {}
for _, k in ipairs(keys) do
  local lines = sections[k]
  check(lines and #lines > 0, "help(%q) printed nothing", k)
  local text = table.concat(lines, "\n")
  if text:find("no help", 1, true) then
    missing[#missing + 1] = k
  else
    if want_name[k] then
      check(lines[1]:find(want_name[k], 1, true), "help(%q): the signature '%s' does not name it", k, lines[1])
    end
    local sentence = lines[2] and lines[2]:match("^  (%S.*)$")
    check(sentence and not sentence:match("^example:"), "help(%q) has no sentence:\n%s", k, text)
    local words = select(2, sentence:gsub("%a+", ""))
    check(words >= 3, "help(%q): '%s' is not a sentence", k, sentence)
  end
end
check(#missing == 0, "no help entry for: %s", table.concat(missing, ", "))

-- help(value) of a method prints the same entry as help("type:method")
for _, v in ipairs(by_value) do
  local got, want = sections["=" .. v[2]], sections[v[1]]
  check(got and want and table.concat(got, "\n") == table.concat(want, "\n"),
        "help(%s) does not print the entry of %s:\n%s", v[2], v[1], table.concat(got or {}, "\n"))
end
check(#by_value >= 10, "only %d methods were looked up by value", #by_value)

print(("test_help: %d entries"):format(#keys))
T.done()
