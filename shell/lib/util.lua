-- Helpers the libraries written in Lua share (shell/lib/*.lua); felab passes this table to
-- each of them as its last argument.
local util = {}

-- The felab type name of v ("felab.vector", ...), or Lua's type.
function util.kind(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  return type(mt) == "table" and mt.__name or type(v)
end

-- The options table o of the function `where` checked against the names it takes: nil is
-- an empty table; another type or an unknown name is an error at the caller's caller.
function util.options(o, valid, where)
  if o == nil then return {} end
  if type(o) ~= "table" then
    error(("%s: expected an options table, got %s"):format(where, type(o)), 3)
  end
  local ok = {}
  for _, k in ipairs(valid) do ok[k] = true end
  for k in pairs(o) do
    if not ok[k] then
      error(("%s: unknown option '%s' (valid: %s)"):format(where, tostring(k),
                                                           table.concat(valid, ", ")), 3)
    end
  end
  return o
end

return util
