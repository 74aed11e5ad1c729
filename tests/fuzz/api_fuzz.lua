-- The API fuzz test (issue 44): a seeded random driver that calls every function and method
-- of felab's Lua surface with wrong types, nil, NaN, huge and negative numbers, garbage and
-- very long strings, tables with wrong and hostile contents, callbacks that fail or call back
-- into felab or close what the call was given, and wrong objects (a vector of another space,
-- a closed operator, a symbol of a finished trace); after a call now and then an object it was
-- given is closed, since the callee may have kept it. Each call runs under pcall: an error
-- must be a string message, and the session must go on working (a tiny solve is checked
-- against its first answer every few calls). Under ASan/UBSan (build-asan/felab) no call may
-- crash or trip a sanitizer.
--
-- Run: build-asan/felab tests/fuzz/api_fuzz.lua     (make fuzz runs long ones, several seeds)
-- Environment:
--   FELAB_FUZZ_SEED=1          the seed: the same seed makes the same calls
--   FELAB_FUZZ_CALLS=2000      how many calls
--   FELAB_FUZZ_SECONDS=0       stop after this many seconds (0: no limit); the calls made are
--                              then the first ones of the seed's sequence
--   FELAB_FUZZ_VERBOSE=1       each call on stderr before it runs (to find the one that crashed);
--                              2: and the message of each error
--   FELAB_FUZZ_ONLY=pattern    only the entries whose name matches (a Lua pattern)
--   FELAB_FUZZ_CUDA=0          1: backend arguments name cuda too (scripts/gpu-test.sh)
--   FELAB_FUZZ_OPENCL=10       how many calls may name opencl (PoCL compiles slowly; default
--                              10, or one in a thousand calls)
--
-- How calls are made. The surface is discovered, not listed: every function of felab's global
-- tables (mesh, fe, physics, solve, device, perf, export) and globals (help, show), and every
-- function of the metatable of each kind of object met (methods and metamethods: __index with
-- a random key, __tostring, __len, __close and __gc called by hand). A call's arguments are a
-- valid example of that entry (TEMPLATES) or a call that succeeded before, mutated in one or
-- two places (an argument replaced, an option set to a random value, an argument dropped or
-- added), or entirely random. Objects that calls return join a pool, a few per kind, from
-- which later calls draw: so vectors of other spaces, closed handles and symbols of finished
-- traces reach every function. Option names come from a list and from the "valid options"
-- that error messages print.
--
-- What it avoids: calls that are slow or big by design rather than bad input (device.calibrate,
-- perf.sweep, autotune = true, meshes over a few hundred cells, maxit, steps and the like
-- capped: SANITIZE below), files outside a temporary folder, and os/io functions.

local env = function(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then return default end
  return v
end
local SEED = math.tointeger(tonumber(env("FELAB_FUZZ_SEED", "1"))) or 1
local CALLS = math.tointeger(tonumber(env("FELAB_FUZZ_CALLS", "2000"))) or 2000
local SECONDS = tonumber(env("FELAB_FUZZ_SECONDS", "0")) or 0
local VERBOSE = tonumber(env("FELAB_FUZZ_VERBOSE", "0")) or 1 -- 2: each error's message too
if VERBOSE == 0 then VERBOSE = false end
local ONLY = env("FELAB_FUZZ_ONLY", nil)
local CUDA = env("FELAB_FUZZ_CUDA", "0") ~= "0"
local OPENCL_BUDGET = math.tointeger(tonumber(env("FELAB_FUZZ_OPENCL", "")))
                      or math.max(10, CALLS // 1000)
local SANITY_EVERY = 100 -- calls between two checks that the session still works
local POOL_SIZE = 6 -- objects kept per kind
local MAX_CELLS = 400 -- meshes above this are not kept (nor refined)

-- felab's functions the driver itself needs, taken before any fuzzed call can touch a global
local F = {box = mesh.box, space = fe.space, operator = fe.operator, poisson = physics.poisson,
           heat = physics.heat, new = physics.new, cg = solve.cg, clock = perf.clock,
           use = device.use, clear = perf.clear, progress = perf.progress}
local fmt, rep, concat = string.format, string.rep, table.concat
F.progress(false)

----------------------------------------------------------------------------------------------
-- A seeded generator of its own (xorshift64), so that nothing the fuzzed code does to
-- math.random changes the sequence.
local state = (SEED * 0x9E3779B97F4A7C15) ~ 0x2545F4914F6CDD1D
if state == 0 then state = 1 end
local function rnd()
  state = state ~ (state << 13)
  state = state ~ (state >> 7)
  state = state ~ (state << 17)
  return state
end
local function below(n) return (rnd() >> 1) % n + 1 end -- 1..n
local function chance(p) return ((rnd() >> 11) / 2.0 ^ 53) < p end
local function pick(list) return list[below(#list)] end
-- A shallow copy, read raw (a table's __index and __pairs never run here).
local function copy(t)
  local c = {}
  for k, v in next, t do c[k] = v end
  return c
end

-- The keys and values of t, read raw, in an order that is the same in every run (next's
-- order follows string hashes, which Lua seeds anew in each process): wherever the order
-- decides what the generator draws, the run depends on the seed alone.
local RANK = {number = 1, string = 2, boolean = 3}
local function before(a, b)
  local ra, rb = RANK[type(a)] or 4, RANK[type(b)] or 4
  if ra ~= rb then return ra < rb end
  if ra == 1 or ra == 2 then return a < b end
  if ra == 3 then return not a and b end
  return tostring(a) < tostring(b)
end
local function sorted(t)
  local keys = {}
  for k in next, t do keys[#keys + 1] = k end
  table.sort(keys, before)
  local i = 0
  return function()
    i = i + 1
    local k = keys[i]
    if k ~= nil then return k, rawget(t, k) end
  end
end

----------------------------------------------------------------------------------------------
-- Values

local NUMBERS = {0, 1, -1, 2, 3, 0.5, -0.5, 1.5, 7, 64, 65, 1e-300, 1e300, -1e300, 0 / 0,
                 1 / 0, -1 / 0, 2 ^ 31, 2147483648, 2147483647, -2147483648, 2 ^ 32, 2 ^ 53,
                 2 ^ 63, 1e9, math.maxinteger, math.mininteger, -0.0, 4294967297}

-- Names that mean something somewhere (so that calls get past the first check), and junk.
local NAMES = {"cpu", "opencl", "cuda", "cuda:1", "double", "single", "half", "P1", "P2", "P3",
               "Q1", "Q2", "Q3", "P0", "Q0", "P7", "P8", "Q10", "tet", "hex", "tri", "quad",
               "prism", "transpose", "patch", "sumfact", "csr", "ebe", "quadrature",
               "reg_nojac", "jacobi", "none", "chebyshev", "amg", "twoscale", "L2", "H1", "all",
               "xmin", "xmax", "ymin", "zmax", "boundary", "domain", "residual", "apply",
               "diagonal", "rcm", "hilbert", "layers", "morton", "stored", "vertices",
               "unshared", "atomic", "nodes", "color", "sell", "cusparse", "auto", "gll",
               "equispaced", "cg", "gmres", "bicgstab", "bicg", "backtrack", "H200", "A100",
               "both", "u", "du", "x", "a", "ndofs", "ncells", "dim", "nvertices", "flops",
               "name", "n", "nnz", "backend", "precision", "1 + x[0]*x[1]", "x[0]", "1/2",
               "1/0", "0/0", "sin(x[0])", "f0[0] = 1.0;",
               "f1[0] = du[0]; f1[1] = du[1]; f1[2] = du[2];", "meshes/cube_v41.msh",
               "meshes/cube_v2.msh", "meshes/nope.msh", "meshes", "/", "/dev/null",
               "mesh.box", "fe.space", "felab.vector"}
local JUNK = {"", " ", "%s%s%s%n", "%d", "\0", "a\0b", "\xff\xfe", "'\"", "[[", "]]", "\n", "..",
              "x[", "}", "{", "/*", "#include", "nan", "inf", "-1", "1e999", "0x10", "  P1  ",
              "p1", "CPU", "P-1", "P2147483648", "Q99999999999"}
local LONG = {rep("x", 100000), rep("P1", 3000), "/" .. rep("d/", 3000) .. "f", rep("%s", 500),
              rep("1+", 5000) .. "1"}

local function junk_string()
  local n, chars = below(24) - 1, {}
  for i = 1, n do chars[i] = string.char(below(256) - 1) end
  return concat(chars)
end

local function random_string()
  local r = below(10)
  if r <= 6 then return pick(NAMES) end
  if r <= 8 then return pick(JUNK) end
  if r == 9 then return junk_string() end
  return pick(LONG)
end

-- Option names: every name felab's functions take (others are learnt from the "valid
-- options" of error messages as the run goes, per entry).
local KEYS = {"backend", "precision", "strategy", "block", "walk", "lanes", "geometry", "scatter",
              "recompute", "fold", "autotune", "format", "chunk", "sigma", "at", "variant",
              "cells", "cell", "lower", "upper", "distort", "size", "order", "algorithm",
              "family", "components", "nodes", "dirichlet", "value", "quadrature", "degree",
              "rule", "pc", "rtol", "atol", "maxit", "monitor", "x0", "lanczos", "ratio",
              "parts", "cycles", "verbose", "restart", "linear", "linear_rtol", "linear_maxit",
              "linesearch", "f0", "f1", "g0", "g1", "g2", "g3", "name", "description",
              "constants", "regions", "fields", "kappa", "source", "c", "E", "nu", "lambda",
              "mu", "force", "velocity", "dt", "u_old", "t", "p", "eps", "steps", "t0",
              "every", "on_step", "out", "device", "action", "from", "devices", "strategies",
              "precisions", "calls", "title", "gnuplot", "label", "interior", "equispaced",
              "gll", "x", "y", "z", 1, 2, true}

----------------------------------------------------------------------------------------------
-- The pool: objects returned by calls, a few of each kind, and names for them in the log.

local pool = {} -- kind -> list
local kinds = {} -- the kinds seen, in order
local ids = setmetatable({}, {__mode = "k"}) -- object -> "vector#12"
local next_id = 0

local function kind_of(v)
  local t = type(v)
  if t == "userdata" or t == "table" then
    local mt = getmetatable(v)
    if type(mt) == "table" and type(rawget(mt, "__name")) == "string" then
      return rawget(mt, "__name")
    end
  end
  return t
end

local function name_of(v)
  if not ids[v] then
    next_id = next_id + 1
    ids[v] = fmt("%s#%d", kind_of(v):gsub("^felab%.", ""), next_id)
  end
  return ids[v]
end

-- A field of an object, or nil when reading it fails (a closed handle).
local function field(v, k)
  local ok, x = pcall(function() return v[k] end)
  return ok and x or nil
end

-- A number field of an object, or 0.
local function count(v, k)
  local x = field(v, k)
  return type(x) == "number" and x or 0
end

local function too_big(v)
  local k = kind_of(v)
  if k == "felab.mesh" then return count(v, "ncells") > MAX_CELLS end
  if k == "felab.space" then return count(v, "ndofs") > 20000 end
  if k == "felab.vector" then
    local ok, n = pcall(function() return #v end)
    return ok and type(n) == "number" and n > 20000
  end
  return false
end

local add_methods -- (forward) the metatable's functions of a kind, as entries

local function pool_add(v)
  local k = kind_of(v)
  if not k:find("^felab%.") or too_big(v) then return end
  if not pool[k] then
    pool[k] = {}
    kinds[#kinds + 1] = k
    add_methods(v, k)
  end
  local list = pool[k]
  name_of(v)
  if #list < POOL_SIZE then list[#list + 1] = v else list[below(#list)] = v end
end

-- Whether a handle is open (print says "(closed)" of a closed one).
local function is_open(v)
  local ok, text = pcall(tostring, v)
  return ok and type(text) == "string" and not text:find("closed", 1, true)
end

-- An object of kind k: mostly an open one, sometimes any (closed handles are wrong objects too).
local function from_pool(k)
  local list = pool[k]
  if not list or #list == 0 then return nil end
  local v = list[below(#list)]
  for _ = 1, 3 do
    if is_open(v) or chance(0.15) then break end
    v = list[below(#list)]
  end
  return v
end

local function any_object()
  if #kinds == 0 then return nil end
  return from_pool(pick(kinds))
end

----------------------------------------------------------------------------------------------
-- Random values of every kind

local random_value -- (forward)
local nested_call -- (forward) a random call from inside a callback
local ERROR_OBJECT = setmetatable({}, {__tostring = function() return "fuzz: error object" end})
local symbols = {} -- symbols met in traces, kept beyond them

local function random_number()
  if chance(0.3) then return below(12) - 4 end
  return pick(NUMBERS)
end

local stats = {calls = 0, ok = 0, errors = 0, skipped = 0, nested = 0, closed_inside = 0,
               closed_after = 0}
local current_args = {n = 0} -- the arguments of the call running now

-- The felab objects among args, and in the plain tables among them (options: at, u_old,
-- fields), with the space of each vector.
local function objects_in(args)
  local objects = {}
  local function add(v)
    if kind_of(v):find("^felab%.") then
      objects[#objects + 1] = v
      if kind_of(v) == "felab.vector" then
        local V = field(v, "space")
        if kind_of(V) == "felab.space" then objects[#objects + 1] = V end
      end
    end
  end
  for i = 1, args.n do
    local v = args[i]
    add(v)
    if type(v) == "table" and getmetatable(v) == nil then
      for _, x in sorted(v) do
        add(x)
        if type(x) == "table" and getmetatable(x) == nil then
          for _, y in sorted(x) do add(y) end
        end
      end
    end
  end
  return objects
end

-- Close (or collect by hand) one of the objects in args.
local function close_one_of(args)
  local objects = objects_in(args)
  if #objects == 0 then return end
  local v = pick(objects)
  local mt = getmetatable(v)
  local close = type(mt) == "table" and rawget(mt, chance(0.5) and "__close" or "__gc")
  if type(close) == "function" then pcall(close, v) end
end

-- From inside a call: close an object the running call was given.
local function close_an_argument() close_one_of(current_args) end

-- A callback: returns a value, fails, collects garbage, closes an object the call was given or
-- calls felab again, from inside the call that runs it; the physics ones keep the symbols
-- they are given.
local function random_function()
  local r = below(14)
  if r >= 11 then -- once: a function of x runs at every node
    local done = false
    return function()
      if not done then
        done = true
        if r <= 12 then
          stats.closed_inside = stats.closed_inside + 1
          close_an_argument()
        else
          nested_call()
        end
      end
      return 1
    end
  end
  local v = r <= 3 and random_value(1) or nil
  if r <= 3 then return function() return v end end
  if r == 4 then return function() error("fuzz: a callback fails") end end
  if r == 5 then return function() error(ERROR_OBJECT) end end
  if r == 6 then return function() collectgarbage() return 1 end end
  if r == 7 then -- once: a function of x runs at every node
    local done = false
    return function()
      if not done then done = true nested_call() end
      return 1
    end
  end
  if r == 8 then return function(x) return type(x) == "table" and x[1] or 0 end end
  if r == 9 then
    return function(u, du)
      for _, s in ipairs{u, du} do
        if kind_of(s) == "felab.symbol" then
          symbols[#symbols + 1] = s
          if #symbols > 8 then table.remove(symbols, 1) end
        end
      end
      if chance(0.5) then -- a helper inside the trace, with these symbols or anything
        local helpers = {"dot", "inner", "outer", "transpose", "sym", "tr", "det", "identity",
                         "norm", "grad", "select", "cexpr", "lt", "eq"}
        local h = physics[pick(helpers)]
        local a = {u, du, random_value(1)}
        local ok, v = pcall(h, a[below(3)], a[below(3)], a[below(3)])
        if ok then return v end
      end
      return chance(0.5) and du or u
    end
  end
  return function(...) return select(below(4), ...) end
end

-- Tables whose reads run code: every field read fails, or gives a new random value (so a
-- value read twice differs), or the table contains itself.
-- A metatable whose __index, at the first read of a field absent from the table, closes an
-- argument of the call reading it (options are read in the middle of a call).
local function closing_on_read()
  local done = false
  return {__index = function()
    if not done then
      done = true
      stats.closed_inside = stats.closed_inside + 1
      close_an_argument()
    end
    return nil
  end}
end

local function hostile_table()
  local r = below(5)
  if r == 5 then return setmetatable({}, closing_on_read()) end
  if r == 1 then
    return setmetatable({}, {__index = function() error("fuzz: __index fails") end})
  end
  if r == 2 then return setmetatable({}, {__index = function() return random_value(2) end}) end
  if r == 3 then
    return setmetatable({1, 2}, {__len = function() error("fuzz: __len fails") end,
                                 __index = function() return nil end})
  end
  local t = {cells = 2, pc = "jacobi"}
  t.self, t[1] = t, t
  return t
end

local function plausible(key, depth) -- a value that suits an option named key
  local P = {
    backend = {"cpu", "cpu", "opencl", "cuda"}, precision = {"double", "single"},
    strategy = {"transpose", "patch", "sumfact", "csr", "ebe"}, variant = {"reg_nojac"},
    pc = {"none", "jacobi", "chebyshev", "amg", "twoscale"},
    cell = {"tet", "hex", "tri", "quad", "prism"},
    family = {"P", "Q"}, geometry = {"stored", "vertices", "unshared", "auto"},
    scatter = {"atomic", "nodes", "color", "auto"}, format = {"csr", "sell", "cusparse"},
    linear = {"cg", "gmres", "bicgstab", "bicg"}, linesearch = {"none", "backtrack"},
    action = {"apply", "residual", "diagonal"}, device = {"H200", "A100", "MI300X"},
    rule = {"gauss", "gll"}, nodes = {"gll", "equispaced"}, parts = {"both", "interior"},
    dirichlet = {"all", "xmin", "nope"}, algorithm = {"delaunay", "frontal", "hxt"},
  }
  if P[key] then return pick(P[key]) end
  if key == "cells" then return pick{2, 1, {2, 2, 2}, {1, 2, 3}, {2, 2}, 0} end
  if key == "lower" or key == "upper" or key == "force" or key == "velocity" then
    return pick{{0, 0, 0}, {1, 1, 1}, {1, 0}, {0 / 0, 1, 1}}
  end
  if key == "at" or key == "x0" or key == "u_old" then return from_pool("felab.vector") end
  if key == "fields" then return {uold = from_pool("felab.vector")} end
  if key == "regions" then return {kappa = {domain = 1}} end
  if key == "constants" then return {dt = 0.1} end
  if key == "quadrature" then return {degree = below(6) - 1} end
  if key == "f0" or key == "f1" or key == "on_step" or key == "value" then
    return chance(0.7) and random_function() or pick{"f0[0] = 1.0;", "f1[0] = du[0];", 0}
  end
  if key == "out" then return pick{"fuzz", "a/b", ""} end
  return random_value(depth + 1)
end

local function options_table(keys, depth)
  local t, n = {}, below(4) - 1
  for _ = 1, n do
    local k = keys and #keys > 0 and chance(0.8) and pick(keys) or pick(KEYS)
    if chance(0.7) then t[k] = plausible(k, depth) else t[k] = random_value(depth + 1) end
  end
  if chance(0.1) then setmetatable(t, closing_on_read()) end
  return t
end

local function random_table(depth)
  local r = below(9)
  if r == 1 then return {} end
  if r == 2 then return {1, 2, 3} end
  if r == 3 then return {2, 2, 2} end
  if r == 4 then return {{}, {{}}} end
  if r == 5 then return hostile_table() end
  if r == 6 and depth < 3 then
    local t = {}
    for i = 1, below(4) do t[i] = random_value(depth + 1) end
    return t
  end
  if r == 7 then return {from_pool("felab.vector"), from_pool("felab.vector")} end
  return options_table(nil, depth)
end

function random_value(depth)
  depth = depth or 0
  local r = below(20)
  if r == 1 then return nil end
  if r == 2 then return chance(0.5) end
  if r <= 5 then return random_number() end
  if r <= 8 then return random_string() end
  if r <= 10 and depth < 3 then return random_table(depth) end
  if r == 11 and depth < 2 then return random_function() end
  if r == 12 then
    return pick{io.stdout, coroutine.create(function() end), print, copy(mesh), copy(string)}
  end
  if r == 13 and #symbols > 0 then return pick(symbols) end
  return any_object() or random_number()
end

----------------------------------------------------------------------------------------------
-- Entries: what can be called, and a valid example call of each.

local SKIP = {["device.calibrate"] = "measures for seconds", ["perf.sweep"] = "times many cases",
              ["perf.progress"] = "the driver keeps it off"}

local entries, by_name = {}, {}
local function add_entry(name, fn, self_kind)
  if by_name[name] or SKIP[name] or (ONLY and not name:find(ONLY)) then return end
  local e = {name = name, fn = fn, self_kind = self_kind, learnt = {}, keys = nil, calls = 0,
             ok = 0, seconds = 0}
  -- closing and collecting by hand: rarer, so that the pool is not all closed handles; the
  -- physics helpers outside a trace only refuse (inside one, the callbacks call them)
  e.weight = (name:find(":__gc$") or name:find(":__close$")) and 0.15 or
             (name:find("^physics%.%l+$") and #name < 18 and name ~= "physics.new"
              and name ~= "physics.heat") and 0.3 or 1
  entries[#entries + 1] = e
  by_name[name] = e
end

local MODULES = {"mesh", "fe", "physics", "solve", "device", "perf", "export"}
for _, m in ipairs(MODULES) do
  local t = _G[m]
  local names = {}
  for k, v in pairs(t) do if type(v) == "function" then names[#names + 1] = k end end
  table.sort(names)
  for _, k in ipairs(names) do add_entry(m .. "." .. k, t[k]) end
end
add_entry("help", help)
add_entry("show", show)

function add_methods(v, k)
  local mt = getmetatable(v)
  if type(mt) ~= "table" then return end
  local names = {}
  for name, f in pairs(mt) do
    if type(name) == "string" and type(f) == "function" then names[#names + 1] = name end
  end
  table.sort(names)
  for _, name in ipairs(names) do add_entry(k .. ":" .. name, mt[name], k) end
end

-- Argument placeholders of the templates, made at call time: "$mesh" an object of that kind
-- from the pool, "$opts" an options table of the entry's option names, "$fn" a callback,
-- "$path" a file in the temporary folder.
local TMP = os.tmpname()
os.remove(TMP)
os.execute("mkdir -p '" .. TMP .. "'")

local TEMPLATES = {
  ["mesh.box"] = {{{cells = 2}}, {{cells = {2, 2, 2}, cell = "$cell"}},
                  {{cells = {2, 1, 1}, cell = "$cell", lower = {0, 0, 0}, upper = {2, 1, 1},
                    distort = 0.2}}},
  ["mesh.load"] = {{"meshes/cube_v41.msh"}, {"meshes/cube_v2.msh", {order = 1}}},
  ["fe.space"] = {{"$mesh", "$space_name"}, {"$mesh", {family = "P", order = 1, components = 3}}},
  ["fe.operator"] = {{"$space", "$physics", {dirichlet = "all"}},
                     {"$space", "$physics", {dirichlet = {"xmin", "xmax"}, value = 1}},
                     {"$space", "$physics"}},
  ["fe.integral"] = {{"$vector"}},
  ["physics.poisson"] = {{{kappa = 1, source = 1}}, {{kappa = "1 + x[0]", source = "$fn"}}},
  ["physics.reaction_diffusion"] = {{{c = 1, kappa = 1, source = 1}}},
  ["physics.convection_diffusion"] = {{{velocity = {1, 0, 0}, kappa = 0.1, source = 1}}},
  ["physics.elasticity"] = {{{E = 1, nu = 0.3}}, {{lambda = 1, mu = 1, force = {0, 0, -1}}}},
  ["physics.heat"] = {{{c = 1, kappa = 1, dt = 0.1, u_old = "$vector"}}, {{dt = 0.1}}},
  ["physics.p_laplacian"] = {{{p = 3, eps = 0.1, source = 1}}},
  ["physics.new"] = {{{f0 = "$fn", f1 = "$fn"}},
                     {{f0 = "f0[0] = 1.0;", f1 = "f1[0] = du[0]; f1[1] = du[1]; f1[2] = du[2];"}},
                     {{f1 = "$fn", constants = {k = 1}, fields = {uold = "$vector"}}}},
  ["physics.cexpr"] = {{"1 + x[0]"}},
  ["solve.cg"] = {{"$operator", "$opts"}, {"$operator", "$own", "$opts"},
                  {"$operator", {backend = "$backend", precision = "single"}}},
  ["solve.bicg"] = {{"$operator", "$opts"}, {"$operator", "$own", "$opts"}},
  ["solve.bicgstab"] = {{"$operator", "$opts"}, {"$operator", "$own", "$opts"}},
  ["solve.gmres"] = {{"$operator", "$opts"}, {"$operator", "$own", "$opts"}},
  ["solve.newton"] = {{"$operator", "$opts"}, {"$operator", {x0 = "$own", linear = "gmres"}}},
  ["solve.heat"] = {{"$operator", "$own", {steps = 2, dt = 0.1}}, {"$operator", "$own", "$opts"}},
  ["solve.precond"] = {{"$operator", "$opts"}, {"$operator", {pc = "chebyshev", at = "$own"}}},
  ["solve.transpose_apply"] = {{"$operator", "$own", "$opts"}},
  ["device.use"] = {{"cpu"}}, ["device.info"] = {{"cpu"}, {}},
  ["perf.compare"] = {{{"$operator", devices = {"H200"}}}},
  ["perf.predict"] = {{"$operator", {device = "H200"}}, {"$operator"}},
  ["perf.model"] = {{"$felab.report", {gbytes = 100, gflops = 100}}},
  ["perf.plot"] = {{"$felab.info", {out = "$path"}}},
  ["perf.roofline"] = {{{out = "$path", gnuplot = false}}},
  ["perf.memory"] = {{true}, {}},
  ["export.vtu"] = {{"$path", "$mesh", {u = "$vector"}}},
  ["export.msh"] = {{"$path", "$mesh", {u = "$vector"}}},
  ["export.mtx"] = {{"$path", "$felab.matrix"}},
  ["export.pvd"] = {{"$path", {{file = "u_0000.vtu", time = 0}}}},
  ["help"] = {{"$name"}, {"$any"}},
  ["show"] = {{"$any"}},
  ["felab.mesh:color"] = {{{block = 2}}},
  ["felab.mesh:reorder"] = {{"$reorder"}},
  ["felab.space:interpolate"] = {{"$fn"}, {1, "$opts"}, {1, {backend = "$backend"}}},
  ["felab.space:cell_dofs"] = {{1}},
  ["felab.vector:dot"] = {{"$own"}, {"$vector"}},
  ["felab.vector:axpy"] = {{1, "$own"}, {1, "$vector"}},
  ["felab.vector:fill"] = {{1}}, ["felab.vector:to"] = {{"cpu", "single"}, {"$backend"}},
  ["felab.vector:get"] = {{1}}, ["felab.vector:error"] = {{"$fn", "L2"}},
  ["felab.physics:set"] = {{{dt = 0.2}}, {{u_old = "$vector"}}, {{k = 2}}, {{uold = "$vector"}}},
  ["felab.physics:show"] = {{}, {2}},
  ["felab.operator:residual"] = {{"$own", "$opts"}, {"$vector"}, {"$own", {backend = "$backend"}}},
  ["felab.operator:apply"] = {{"$own", "$opts"}, {"$own", {at = "$own"}}, {"$vector"}},
  ["felab.operator:initial"] = {{"$opts"}},
  ["felab.operator:diagonal"] = {{"$opts"}}, ["felab.operator:source"] = {{"$action"}},
  ["felab.operator:model"] = {{"$action"}}, ["felab.operator:explain"] = {{"$action"}},
  ["felab.operator:element_matrices"] = {{"$opts"}}, ["felab.operator:assemble"] = {{"$opts"}},
  ["felab.elemats:get"] = {{1}}, ["felab.elemats:to"] = {{"cpu"}},
  ["felab.matrix:apply"] = {{"$vector"}}, ["felab.precond:apply"] = {{"$vector"}},
  ["felab.vector:copy"] = {{}}, ["felab.vector:values"] = {{}},
  ["felab.info:plot"] = {{{out = "$path"}}},
}

-- A vector of the space of first (an operator, a space or a vector), so that actions get
-- past the check of sizes; nil when there is none (a closed handle).
local function own_vector(first)
  local k = kind_of(first)
  local V = k == "felab.space" and first or
            (k == "felab.operator" or k == "felab.vector") and field(first, "space")
  if kind_of(V) ~= "felab.space" then return nil end
  local ok, u = pcall(V.interpolate, V, below(3) - 1)
  return ok and u or nil
end

-- The template value v made real; first is the call's first argument (self for a method).
local function resolve(v, e, first)
  if type(v) == "table" and getmetatable(v) == nil then
    local t = {}
    for k, x in sorted(v) do t[k] = resolve(x, e, first) end
    return t
  end
  if type(v) ~= "string" or v:sub(1, 1) ~= "$" then return v end
  local what = v:sub(2)
  if what == "own" then return own_vector(first) or from_pool("felab.vector") end
  if what == "opts" then return options_table(e.keys, 0) end
  if what == "fn" then return random_function() end
  if what == "path" then return TMP .. "/f" .. below(4) end
  if what == "any" then return random_value(0) end
  if what == "backend" then
    if CUDA and chance(0.4) then return "cuda" end
    return chance(0.4) and "opencl" or "cpu"
  end
  if what == "cell" then return pick{"tet", "hex", "tri", "quad", "prism"} end
  if what == "space_name" then return pick{"P1", "P2", "Q1", "Q2", "P1", "Q1"} end
  if what == "reorder" then return pick{"rcm", "hilbert", "layers", "morton"} end
  if what == "action" then return pick{"apply", "residual", "diagonal"} end
  if what == "name" then return pick{"mesh.box", "fe", "felab.vector", "nope"} end
  return from_pool(what:find("%.") and what or "felab." .. what)
end

----------------------------------------------------------------------------------------------
-- Arguments: a template or a call that worked, mutated; or random.

local function mutate(args, e)
  local n = args.n
  local r = below(6)
  if r == 1 and n > 0 then
    args[below(n)] = random_value(0)
  elseif r == 2 and n > 0 then -- another object of the same kind: a vector of another space
    local i = below(n)
    local k = kind_of(args[i])
    args[i] = from_pool(k) or random_value(0)
  elseif r == 3 then -- an option set to something else, or a new one
    for i = 1, n do
      local t = args[i]
      if type(t) == "table" and getmetatable(t) == nil then
        t = copy(t)
        local k = e.keys and chance(0.6) and pick(e.keys) or pick(KEYS)
        t[k] = chance(0.5) and random_value(0) or plausible(k, 0)
        args[i] = t
        return
      end
    end
    args[n + 1] = options_table(e.keys, 0)
    args.n = n + 1
  elseif r == 4 and n > 0 then
    args.n = n - 1
  elseif r == 5 then
    args.n = n + 1
    args[n + 1] = random_value(0)
  elseif n > 1 then
    local i, j = below(n), below(n)
    args[i], args[j] = args[j], args[i]
  end
end

local function make_args(e)
  local args
  local r = below(20)
  -- a method's self: (nearly always) an object of its kind
  local self = e.self_kind and (chance(0.92) and from_pool(e.self_kind) or random_value(0))
  if r <= 7 and #e.learnt > 0 then
    args = copy(pick(e.learnt))
  elseif r <= 16 and TEMPLATES[e.name] then
    local t = pick(TEMPLATES[e.name])
    args = {n = #t}
    local first = self
    for i = 1, #t do
      args[i] = resolve(t[i], e, first)
      if i == 1 and not self then first = args[1] end
    end
  elseif r <= 16 then -- no example: options and objects the entry might take
    args = {n = below(3) - 1}
    for i = 1, args.n do args[i] = chance(0.5) and any_object() or options_table(e.keys, 0) end
  else
    args = {n = below(5) - 1}
    for i = 1, args.n do args[i] = random_value(0) end
  end
  if r <= 16 then
    local m = below(3) - 1 -- 0, 1 or 2 mutations: a third of the calls are valid ones
    for _ = 1, m do mutate(args, e) end
  end
  if e.self_kind then
    table.insert(args, 1, self)
    args.n = args.n + 1
    if e.name:find(":__index$") then -- a field or method name
      args[2] = chance(0.7) and pick{"ndofs", "ncells", "dim", "nvertices", "n", "nnz", "name",
                                     "backend", "precision", "flops", "seconds", "ceilings",
                                     "format", "describe", "components", "size", "norm"}
                or args[2]
      args.n = math.max(args.n, 2)
    end
  end
  return args
end

----------------------------------------------------------------------------------------------
-- SANITIZE: what is slow or big by design is replaced before the call (bad input stays bad:
-- negative, NaN, zero and sizes past 2^31 are kept, since felab must refuse them itself).

-- Options whose large (valid) values cost time: a value in (cap, keep] becomes cap.
local CAPS = {maxit = {30, math.huge}, linear_maxit = {20, math.huge}, restart = {30, math.huge},
              steps = {3, math.huge}, lanczos = {20, math.huge}, degree = {8, 2 ^ 31 - 1},
              cycles = {2, math.huge}, order = {3, 9}, block = {64, 2 ^ 31 - 1},
              ["repeat"] = {1, math.huge}, every = {2, math.huge}, size = {1, 1}}

local opencl_left = OPENCL_BUDGET

local function cap_cells(c)
  if type(c) == "number" and c > 4 and c < 2 ^ 31 then return 2 end
  return c
end

local function sanitize_table(t, name, depth)
  if type(t) ~= "table" or getmetatable(t) ~= nil or depth > 2 then return t end
  t = copy(t)
  for k, v in sorted(t) do
    local cap = CAPS[k]
    if cap and type(v) == "number" and v > cap[1] and v <= cap[2] then t[k] = cap[1] end
    if k == "size" and type(v) == "number" and v > 0 and v < 0.25 then t[k] = 0.25 end
    if k == "autotune" and v == true then t[k] = false end -- measures every strategy
    if k == "gnuplot" then t[k] = false end
    if k == "out" then t[k] = TMP .. "/o" .. below(4) end
    if k == "cells" then
      if type(v) == "table" and getmetatable(v) == nil then
        v = copy(v)
        for i, x in sorted(v) do v[i] = cap_cells(x) end
        t[k] = v
      else
        t[k] = cap_cells(v)
      end
    end
    if type(v) == "table" then t[k] = sanitize_table(t[k], name, depth + 1) end
  end
  return t
end

-- Whether a value names opencl (or is an object on it), looked for two levels deep.
local function names_opencl(v, depth)
  if v == "opencl" then return true end
  local k = kind_of(v)
  if k == "felab.vector" or k == "felab.elemats" or k == "felab.matrix" or k == "felab.precond" then
    local ok, s = pcall(tostring, v)
    return ok and type(s) == "string" and s:find("opencl") ~= nil
  end
  if type(v) == "table" and getmetatable(v) == nil and depth < 2 then
    for kk, x in next, v do
      if names_opencl(kk, depth + 1) or names_opencl(x, depth + 1) then return true end
    end
  end
  return false
end

-- Replace "opencl" by "cpu" two levels deep (when the budget is spent).
local function no_opencl(v, depth)
  if v == "opencl" then return "cpu" end
  if type(v) == "table" and getmetatable(v) == nil and depth < 2 then
    local t = copy(v)
    for k, x in next, t do t[k] = no_opencl(x, depth + 1) end
    return t
  end
  return v
end

-- Returns the arguments to call with, or nil to skip the call.
local function sanitize(e, args)
  local name = e.name
  for i = 1, args.n do args[i] = sanitize_table(args[i], name, 0) end
  if name == "felab.mesh:refine" and too_big(args[1]) then return nil end
  if name == "felab.mesh:refine" and count(args[1], "ncells") > 60 then return nil end
  if name == "mesh.load" then -- Gmsh meshes a geometry: only small meshes of known files
    local p = args[1]
    if type(p) == "string" and not p:find("%.msh$") and p ~= "" then
      args[1] = "meshes/cube_v41.msh"
    end
  end
  if name:find("^export%.") and args.n >= 1 then -- files only in the temporary folder
    local p = args[1]
    if type(p) == "number" then p = tostring(p) end -- a number is a file name too
    if type(p) == "string" and p:sub(1, #TMP + 1) ~= TMP .. "/" then
      args[1] = TMP .. "/" .. (p:gsub("[^%w%.]", "_"):sub(1, 40))
    end
  end
  if name == "perf.plot" or name == "perf.roofline" or name == "felab.info:plot" then
    for i = 1, args.n do
      if type(args[i]) == "string" then args[i] = TMP .. "/p" end
    end
  end
  local uses_opencl = false -- printing and help compute nothing there: not counted
  if not name:find(":__") and name ~= "help" and name ~= "show" then
    for i = 1, args.n do uses_opencl = uses_opencl or names_opencl(args[i], 0) end
  end
  if uses_opencl then
    if opencl_left <= 0 then
      for i = 1, args.n do args[i] = no_opencl(args[i], 0) end
    else
      opencl_left = opencl_left - 1
    end
  end
  return args
end

----------------------------------------------------------------------------------------------
-- How a call reads in the log

local function show_value(v, depth)
  depth = depth or 0
  local t = type(v)
  if t == "string" then
    if #v > 40 then return fmt("%q..(%d bytes)", v:sub(1, 20), #v) end
    return fmt("%q", v):gsub("\n", "n")
  end
  if t == "number" then
    if v ~= v then return "0/0" end
    if v == math.huge then return "1/0" end
    if v == -math.huge then return "-1/0" end
    return math.type(v) == "integer" and tostring(v) or fmt("%.17g", v)
  end
  if t == "table" and getmetatable(v) == nil then
    if depth > 1 then return "{...}" end
    local parts = {}
    for k, x in sorted(v) do
      if #parts > 6 then parts[#parts + 1] = "..." break end
      if rawequal(x, v) then x = "(itself)" end
      parts[#parts + 1] = (type(k) == "string" and k or "[" .. show_value(k, 2) .. "]") .. " = " ..
                          show_value(x, depth + 1)
    end
    return "{" .. concat(parts, ", ") .. "}"
  end
  if t == "userdata" or t == "table" then return name_of(v) end
  return tostring(t)
end

local function show_call(e, args)
  local parts = {}
  for i = 1, args.n do parts[i] = show_value(args[i]) end
  return e.name .. "(" .. concat(parts, ", ") .. ")"
end

----------------------------------------------------------------------------------------------
-- Calls and what is checked about them

local failures = {} -- what must not happen
local unclear = {} -- messages that are Lua's own ("attempt to index a nil value"): entry -> message
local slow = {} -- calls over 2 s
local depth = 0

local function check_error(e, args, err)
  if rawequal(err, ERROR_OBJECT) then return end -- our callback's own error object, passed on
  if type(err) ~= "string" then
    failures[#failures + 1] = fmt("%s: the error is a %s, not a message", show_call(e, args),
                                  type(err))
  elseif err == "" or err:find("no message was set", 1, true) then
    failures[#failures + 1] = fmt("%s: an error without a message: %q", show_call(e, args), err)
  elseif err:find("attempt to [%a ]+ a [%a ]+ value") then
    if not unclear[e.name] then unclear[e.name] = show_call(e, args) .. " -> " .. err end
  end
end

-- The plots' default names (out absent, or options that are another object): files the
-- plot writes in the working folder, removed after each plot call unless they were there
-- before the run.
local PLOTS = {["perf.plot"] = true, ["perf.roofline"] = true, ["felab.info:plot"] = true}
local DEFAULT_PLOTS = {}
for _, base in ipairs{"roof", "residuals"} do
  for _, ext in ipairs{".csv", ".gp", ".png", ".svg", ".dat"} do
    local f = io.open(base .. ext)
    if f then f:close() else DEFAULT_PLOTS[#DEFAULT_PLOTS + 1] = base .. ext end
  end
end
local function remove_default_plots()
  for _, f in ipairs(DEFAULT_PLOTS) do os.remove(f) end
end

local function call(e, prefix)
  local args = sanitize(e, make_args(e))
  if not args then
    stats.skipped = stats.skipped + 1
    return
  end
  if VERBOSE then io.stderr:write(prefix, show_call(e, args), "\n") end
  e.calls = e.calls + 1
  local t0 = F.clock()
  local outer = current_args
  current_args = args
  local res = table.pack(pcall(e.fn, table.unpack(args, 1, args.n)))
  current_args = outer
  if PLOTS[e.name] then remove_default_plots() end
  local dt = F.clock() - t0
  e.seconds = e.seconds + dt
  if dt > 2 then slow[#slow + 1] = fmt("%.1f s  %s", dt, show_call(e, args)) end
  if res[1] then
    e.ok = e.ok + 1
    stats.ok = stats.ok + 1
    -- the callee may have kept a pointer to what it was given (a field, the state of a
    -- preconditioner): now and then close it, so that later calls meet it closed
    if chance(0.05) then
      stats.closed_after = stats.closed_after + 1
      close_one_of(args)
    end
    local learnt = e.learnt
    local kept = args -- the arguments after self, for a method
    if e.self_kind then
      kept = {n = args.n - 1}
      for k = 2, args.n do kept[k - 1] = args[k] end
    end
    if #learnt < 6 then learnt[#learnt + 1] = kept else learnt[below(#learnt)] = kept end
    for i = 2, res.n do
      local v = res[i]
      pool_add(v)
      if type(v) == "table" and getmetatable(v) == nil then -- a table of objects (info)
        for _, x in sorted(v) do if type(x) == "userdata" then pool_add(x) end end
      end
    end
  else
    stats.errors = stats.errors + 1
    local err = res[2]
    if VERBOSE == 2 then io.stderr:write("    -> ", tostring(err):sub(1, 300), "\n") end
    check_error(e, args, err)
    if type(err) == "string" then -- learn the entry's option names
      local list = err:match("%(valid[%a ]*: ([^)]*)%)")
      if list and not e.keys then
        e.keys = {}
        for k in list:gmatch("[%w_]+") do e.keys[#e.keys + 1] = k end
      end
    end
  end
end

local function pick_entry()
  while true do
    local e = entries[below(#entries)]
    if chance(e.weight) then return e end
  end
end

function nested_call()
  if depth > 0 then return end
  depth = depth + 1
  stats.nested = stats.nested + 1
  call(pick_entry(), "      (inside) ")
  depth = depth - 1
end

----------------------------------------------------------------------------------------------
-- The session still works: a tiny solve gives the answer it gave before any fuzzed call.

local function tiny_solve()
  local m = F.box{cells = {2, 2, 2}, cell = "hex"}
  local V = F.space(m, "Q1")
  local A = F.operator(V, F.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local u, info = F.cg(A, {pc = "jacobi", rtol = 1e-12, maxit = 100, backend = "cpu",
                           precision = "double"})
  return u:max(), u:norm(), info.converged, m, V, A, u
end

local ref_max, ref_norm = tiny_solve()

local function seed_pool()
  for _, cell in ipairs{"tet", "hex"} do
    local m = F.box{cells = {2, 2, 2}, cell = cell}
    pool_add(m)
    for _, s in ipairs(cell == "tet" and {"P1", "P2"} or {"Q1", "Q2"}) do
      local V = F.space(m, s)
      pool_add(V)
      local pde = F.poisson{kappa = 1, source = 1}
      pool_add(pde)
      local A = F.operator(V, pde, {dirichlet = "all"})
      pool_add(A)
      pool_add(V:interpolate(1))
      local r, rep = A:residual(V:interpolate(0))
      pool_add(r)
      pool_add(rep)
    end
  end
  local V = F.space(F.box{cells = 2, cell = "hex"}, "Q1")
  local u_old = V:interpolate(0)
  local heat = F.heat{dt = 0.1, u_old = u_old}
  pool_add(heat)
  pool_add(F.operator(V, heat, {dirichlet = "all"}))
  pool_add(u_old) -- where calls close it and its space while the physics binds them
  pool_add(V)
  local pde = F.new{f0 = function(u) return u * u - 1 end, f1 = function(u, du) return du end}
  pool_add(pde)
  pool_add(F.operator(V, pde))
  local V = F.space(F.box{cells = 2}, "P1")
  pool_add(V:interpolate(function(x) return x[1] end):to("cpu", "single"))
end

local function sanity(i)
  F.use("cpu")
  F.progress(false)
  local ok, mx, nrm, conv = pcall(tiny_solve)
  if not ok then
    failures[#failures + 1] = fmt("after call %d the tiny solve fails: %s", i, tostring(mx))
  elseif not conv or math.abs(mx - ref_max) > 1e-10 * ref_max
         or math.abs(nrm - ref_norm) > 1e-10 * ref_norm then
    failures[#failures + 1] = fmt("after call %d the tiny solve gives max %.17g norm %.17g, "
                                  .. "was %.17g %.17g", i, mx, nrm, ref_max, ref_norm)
  end
  F.clear() -- the session's call log grows with every call
  collectgarbage()
  if #failures > 0 then error("api fuzz: " .. failures[1]) end
end

----------------------------------------------------------------------------------------------

seed_pool()
print(fmt("api fuzz: seed %d, up to %d calls%s, %d entries", SEED, CALLS,
          SECONDS > 0 and fmt(" or %g s", SECONDS) or "", #entries))
local start = F.clock()
local made = 0
local real_print = print
print = function() end -- what calls print (help, show, monitors) would fill the log
for i = 1, CALLS do
  if SECONDS > 0 and F.clock() - start > SECONDS then break end
  call(pick_entry(), fmt("#%d ", i))
  made = i
  stats.calls = i
  if i % 50 == 0 then collectgarbage() end
  if i % SANITY_EVERY == 0 then
    local ok, err = pcall(sanity, i)
    if not ok then print = real_print error(err, 0) end
    if VERBOSE then io.stderr:write(fmt("#%d sanity ok\n", i)) end
  end
  -- the pool is refreshed now and then so that valid objects keep coming
  if i % 250 == 0 then seed_pool() end
end
sanity(made)
print = real_print
local elapsed = F.clock() - start

-- The summary, each line starting "api fuzz" (make fuzz-api prints those of its log).
local function report(what, list)
  if #list > 0 then print("api fuzz: " .. what .. ": " .. concat(list, ", ")) end
end
print(fmt("api fuzz: %d calls in %.1f s (%.0f calls/s): %d returned, %d errors, %d skipped; "
          .. "%d from inside a callback, %d closing an argument of the call running, %d after "
          .. "it; %d entries", made, elapsed, made / elapsed, stats.ok, stats.errors,
          stats.skipped, stats.nested, stats.closed_inside, stats.closed_after, #entries))
local untried, never_ok = {}, {}
for _, e in ipairs(entries) do
  if e.calls == 0 then untried[#untried + 1] = e.name end
  -- the physics helpers refuse outside a trace: inside one the callbacks call them
  if e.calls > 0 and e.ok == 0 and e.weight == 1 then never_ok[#never_ok + 1] = e.name end
end
report("never called", untried)
report("never returned", never_ok)
for _, s in ipairs(slow) do print("api fuzz: slow: " .. s) end
local names = {}
for k in pairs(unclear) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print("api fuzz: Lua's own message: " .. unclear[k]) end
if env("FELAB_FUZZ_PROFILE", "0") ~= "0" then -- where the time went, by entry
  local sorted = {}
  for _, e in ipairs(entries) do sorted[#sorted + 1] = e end
  table.sort(sorted, function(a, b) return a.seconds > b.seconds end)
  for _, e in ipairs(sorted) do
    print(fmt("api fuzz: %7.2f s %5d calls %5d ok  %s", e.seconds, e.calls, e.ok, e.name))
  end
end
os.execute("rm -rf '" .. TMP .. "'")
if #failures > 0 then error("api fuzz: " .. concat(failures, "\n  "), 0) end
