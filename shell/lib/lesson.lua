-- felab's lessons at the prompt: lesson() lists them, lesson(n) runs lesson n step by step.
--
-- A lesson is a file scripts/lessons/NN-name.lua, embedded in the binary (scripts/embed.sh),
-- that returns a table
--   {title = "...", summary = "one line", sizes = {n = {normal, quick}, ...},
--    steps = {{title =, say = "what it shows", look = "what to look at", code = [[...]]}, ...}}
-- Each step prints its title, what it shows and what to look at, then its code as it would
-- be typed at the prompt, then runs it; the code prints what it measured. In the code, @name
-- stands for sizes.name (its normal value, or the quick one with quick = true: a number, a
-- string or a list of them), @out for the folder the plots go to, and @out/name for a file
-- in it (quoted strings). The code of all the steps runs in one table of variables (reading
-- the globals through it), which lesson(n) returns: e = lesson(1); e.A is the lesson's
-- operator. L in that table is the lesson's helper (L.check, L.quick, L.checked).
local lessons, util = ...
local kind = util.kind

-- The catalogue: {number =, name =, file =} in the order of the files' numbers.
local catalogue = {}
for _, file in ipairs(lessons.names) do
  local n, name = file:match("^(%d+)%-(.+)$")
  if n then catalogue[#catalogue + 1] = {number = tonumber(n), name = name, file = file} end
end
table.sort(catalogue, function(a, b) return a.number < b.number end)

-- The lesson table of entry e, loaded once.
local function load_lesson(e)
  if e.lesson then return e.lesson end
  local src = lessons.sources[e.file]
  local chunk, err = load(src, "=scripts/lessons/" .. e.file .. ".lua", "t")
  if not chunk then error("lesson: " .. err, 0) end
  local t = chunk("felab.lesson")
  if type(t) ~= "table" or type(t.steps) ~= "table" then
    error(("lesson: scripts/lessons/%s.lua does not return a lesson table"):format(e.file), 0)
  end
  e.lesson = t
  return t
end

-- "1 first-solve, 2 transposition, ..." for error messages.
local function known()
  local t = {}
  for _, e in ipairs(catalogue) do t[#t + 1] = e.number .. " " .. e.name end
  return table.concat(t, ", ")
end

-- The catalogue's entry for a number or a name (the file's name without its number, or the
-- whole file name); an error naming the lessons there are otherwise.
local function find(which)
  for _, e in ipairs(catalogue) do
    if e.number == which or e.name == which or e.file == which or tostring(e.number) == which then
      return e
    end
  end
  local what = type(which) == "string" and ("%q"):format(which) or tostring(which)
  error(("lesson: no lesson %s; the lessons are %s (lesson() lists them)"):format(what, known()), 3)
end

-- Print the list of lessons: number, name, title and summary.
local function list()
  print("felab's lessons (lesson(n) or lesson(\"name\") runs one, step by step):")
  for _, e in ipairs(catalogue) do
    local t = load_lesson(e)
    print(("  %d  %-14s %s"):format(e.number, e.name, t.title))
    print(("     %-14s %s"):format("", t.summary or ""))
  end
  print("options: lesson(n, {pause = false, quick = true, out = \"folder\"})")
end

-- Print text with every line indented by two spaces.
local function indented(text)
  for line in (text:gsub("%s+$", "") .. "\n"):gmatch("(.-)\n") do print("  " .. line) end
end

-- v (a number, a string or a list of them) as Lua source.
local function literal(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) ~= "table" then return tostring(v) end
  local t = {}
  for i, x in ipairs(v) do t[i] = literal(x) end
  return "{" .. table.concat(t, ", ") .. "}"
end

-- The code of a step with @name replaced by the lesson's sizes (quick or normal) and @out by
-- the plots' folder, quoted.
local function expand(code, t, c)
  code = code:gsub("@out/([%w_%-%.]+)", function(name) return ("%q"):format(c.folder() .. "/" .. name) end)
  return (code:gsub("@([%a_][%w_]*)", function(name)
    if name == "out" then return ("%q"):format(c.folder()) end
    local s = t.sizes and t.sizes[name]
    if s == nil then error(("lesson: the code uses @%s, which the lesson's sizes lack"):format(name), 0) end
    if type(s) == "table" then s = c.quick and s[2] or s[1] end
    return literal(s)
  end))
end

-- Wait for Enter when pausing; false when the reader typed q (stop the lesson). At the end
-- of input the lesson goes on without pausing again.
local function wait(c)
  if not c.pause then return true end
  io.write("\n[Enter: the next step, q: stop here] ")
  io.flush()
  local line = lessons.read_line() -- Ctrl-C ends the wait at once (shell/lua-felab.c)
  if line == nil then
    c.pause = false
    print()
    return true
  end
  return not line:match("^%s*q")
end

-- A folder of its own for the plots, under the temporary folder.
local function temp_folder()
  local name = os.tmpname()
  os.remove(name)
  name = name .. "-lesson"
  if not os.execute("mkdir -p '" .. name .. "'") then
    error("lesson: cannot make the folder " .. name .. " for the plots", 0)
  end
  return name
end

-- Run one step: its title, what it shows, what to look at, its code, then the code.
local function run_step(e, t, k, step, c, env)
  print(("\n== lesson %d, step %d of %d: %s"):format(e.number, k, #t.steps, step.title or ""))
  if step.say then indented(step.say) end
  if step.look then
    print("look at:")
    indented(step.look)
  end
  if not step.code then return end
  local code = expand(step.code, t, c)
  print()
  for line in (code:gsub("%s+$", "") .. "\n"):gmatch("(.-)\n") do print("felab> " .. line) end
  local chunk, err = load(code, ("=lesson %d step %d"):format(e.number, k), "t", env)
  if not chunk then error("lesson: " .. err, 0) end
  chunk()
end

-- lesson([which [, opts]]): the list, or run lesson `which` (see the "lesson" help entry).
local function lesson(which, opts)
  if which == nil then return list() end
  local e
  if type(which) == "table" and type(which.steps) == "table" then
    -- a lesson's file run as a script (build/felab scripts/lessons/NN-name.lua) passes its table
    e = {number = which.number or 0, name = "script", file = "script", lesson = which}
  elseif type(which) ~= "number" and type(which) ~= "string" then
    error(("lesson: expected a lesson's number or name, got %s; the lessons are %s"):format(
      kind(which), known()), 2)
  end
  local o = util.options(opts, {"pause", "quick", "out"}, "lesson")
  e = e or find(which)
  local t = load_lesson(e)
  local c = {quick = o.quick == true}
  if o.pause == nil then c.pause = lessons.stdin_is_terminal() else c.pause = o.pause == true end
  if o.out ~= nil and type(o.out) ~= "string" then
    error(("lesson: out must be a folder's name, got %s"):format(kind(o.out)), 2)
  end
  -- the plots' folder, made when the first step that draws asks for it
  function c.folder()
    if c.out then return c.out end
    if o.out and not os.execute("mkdir -p '" .. o.out .. "'") then
      error("lesson: cannot make the folder " .. o.out, 0)
    end
    c.out = o.out or temp_folder()
    return c.out
  end
  -- L: what the lessons' code may use besides felab's modules
  local L = {number = e.number, quick = c.quick, checked = {}}
  -- L.check(cond, fmt, ...): a claim of the lesson, measured: printed when it holds, an
  -- error that names it when it does not.
  function L.check(cond, fmt, ...)
    local msg = select("#", ...) > 0 and fmt:format(...) or fmt
    if not cond then error(("lesson %d: the claim '%s' does not hold here"):format(e.number, msg), 2) end
    L.checked[#L.checked + 1] = msg
    print("checked: " .. msg)
  end
  -- the lesson's variables; at the prompt the table prints as the list of their names
  local env = setmetatable({L = L}, {__index = _G, __tostring = function(v)
    local names = {}
    for k in pairs(v) do if type(k) == "string" and k ~= "L" then names[#names + 1] = k end end
    table.sort(names)
    return ("lesson %d's variables: %s"):format(e.number, table.concat(names, ", "))
  end})
  print(("lesson %d: %s%s"):format(e.number, t.title, c.quick and " (quick: small sizes)" or ""))
  if t.summary then indented(t.summary) end
  for k, step in ipairs(t.steps) do
    if k > 1 and not wait(c) then
      print("(stopped; lesson(" .. e.number .. ") starts again)")
      return env
    end
    run_step(e, t, k, step, c, env)
  end
  print(("\n== end of lesson %d.%s Its variables are in the table it returns."):format(e.number,
    c.out and (" Its plots are in %s."):format(c.out) or ""))
  local nxt = catalogue[#catalogue] ~= e and (function()
    for i, x in ipairs(catalogue) do if x == e then return catalogue[i + 1] end end
  end)()
  if nxt then print(("Next: lesson(%d), %s."):format(nxt.number, load_lesson(nxt).title)) end
  return env
end

lessons.lesson = lesson
