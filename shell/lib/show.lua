-- felab's printer of values, embedded in the binary (scripts/embed.sh). The prompt prints an
-- expression's values with it, and scripts call it as show(...): like print, but a table
-- (one without __tostring) is written out as Lua: keys sorted (numbers, then strings, then
-- the rest), the array part 1..n on one line, nested tables indented over several lines when
-- one line would pass WIDTH characters, DEPTH levels deep ({...} below), a table inside
-- itself as <cycle>, and the first MAX_ITEMS array entries and MAX_KEYS other keys only.
-- The chunk returns show.
local WIDTH, DEPTH, MAX_ITEMS, MAX_KEYS = 100, 3, 20, 40

local print, tostring, type, next, rawget, select = print, tostring, type, next, rawget, select
local concat, sort, format = table.concat, table.sort, string.format
local getmetatable, mathtype = debug.getmetatable, math.type

local keywords = {}
for w in ("and break do else elseif end false for function goto if in local nil not or " ..
          "repeat return then true until while"):gmatch("%a+") do
  keywords[w] = true
end

-- Whether a table prints itself (has a __tostring).
local function prints_itself(t)
  local mt = getmetatable(t)
  return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

-- A string as a Lua literal on one line.
local escapes = {["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}
local function quote(s)
  return '"' .. s:gsub('[%c\\"]', function(c) return escapes[c] or format("\\%03d", c:byte()) end) .. '"'
end

-- A value that is not expanded: strings quoted, the rest as tostring writes them, cut to
-- the first line (a mesh's summary line) with " ..." when there are more.
local function atom(v)
  if type(v) == "string" then return quote(v) end
  local s = tostring(v):gsub("%s+$", "")
  local eol = s:find("\n", 1, true)
  return eol and s:sub(1, eol - 1) .. " ..." or s
end

-- The order of keys: numbers, then strings, then the rest (by their text).
local rank = {number = 1, string = 2}
local function key_less(a, b)
  local ra, rb = rank[type(a)] or 3, rank[type(b)] or 3
  if ra ~= rb then return ra < rb end
  if ra < 3 then return a < b end
  return tostring(a) < tostring(b)
end

-- A key as written before " = ": a name, or [literal].
local function key_text(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") and not keywords[k] then return k end
  return "[" .. atom(k) .. "]"
end

-- v written out, starting at column col of a line indented by indent; open holds the
-- tables being written (for cycles).
local function render(v, indent, col, depth, open)
  if type(v) ~= "table" or prints_itself(v) then return atom(v) end
  if open[v] then return "<cycle>" end
  if next(v) == nil then return "{}" end
  if depth > DEPTH then return "{...}" end
  open[v] = true
  local n = 0
  while rawget(v, n + 1) ~= nil do n = n + 1 end
  local keys = {}
  for k in next, v do
    if not (mathtype(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  sort(keys, key_less)
  local inner = indent .. "  "
  local items, narray = {}, 0 -- the entries' texts; the first narray are the array's
  for i = 1, n <= MAX_ITEMS and n or MAX_ITEMS do
    items[#items + 1] = render(rawget(v, i), inner, #inner, depth + 1, open)
  end
  if n > MAX_ITEMS then items[#items + 1] = format("... (%d items)", n) end
  narray = #items
  for i = 1, #keys <= MAX_KEYS and #keys or MAX_KEYS do
    local k = key_text(keys[i])
    items[#items + 1] = k .. " = " .. render(rawget(v, keys[i]), inner, #inner + #k + 3, depth + 1, open)
  end
  if #keys > MAX_KEYS then items[#items + 1] = format("... (%d keys)", #keys) end
  open[v] = nil

  local line = "{" .. concat(items, ", ") .. "}"
  if col + #line <= WIDTH and not line:find("\n", 1, true) then return line end
  -- several lines: the array's one-line entries packed together, the rest one a line
  local lines, i = {}, 1
  while i <= #items do
    local text = items[i]
    if i <= narray and not text:find("\n", 1, true) then
      while i < narray and not items[i + 1]:find("\n", 1, true) and
            #inner + #text + #items[i + 1] + 3 <= WIDTH do
        i = i + 1
        text = text .. ", " .. items[i]
      end
    end
    lines[#lines + 1] = inner .. text
    i = i + 1
  end
  return "{\n" .. concat(lines, ",\n") .. "\n" .. indent .. "}"
end

-- show(...): print the values, separated by tabs, tables written out (see above).
local function show(...)
  local parts = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    -- a table that prints itself is printed whole (A:strategies' table: several lines)
    parts[i] = type(v) == "table" and not prints_itself(v) and render(v, "", 0, 1, {}) or tostring(v)
  end
  print(concat(parts, "\t"))
end

return show
