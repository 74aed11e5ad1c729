-- A:explain (shell/lib/explain.lua, issue 17): for transpose, sumfact and csr on every backend
-- here, the text has each section, names the strategy, claims the numbers the model gives
-- (A:model with the same options), predicts at least one alternative, and ends with the source
-- of A:source with its phases marked; bad input gives a clear error.
-- Run: build/felab tests/scripts/test_explain.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check

local m = mesh.box{cells = 3, cell = "hex"}
local V = fe.space(m, "Q2")
local A = fe.operator(V, physics.poisson{}, {dirichlet = "all"})

local headings = {"== Thread mapping ==", "== Phases", "== Occupancy ==", "== Which ceiling binds ==",
                  "== What a change would do", "== Source"}
local units = {s = 1, ms = 1e-3, us = 1e-6}

-- A time as explain prints it ("178 us") in seconds.
local function seconds(value, unit)
  return tonumber(value) * units[unit]
end

-- The text with the marker lines explain inserted taken out again.
local function unmarked(text)
  return (text:gsub("[ \t]*/%* ==== [^\n]* ==== %*/\n", ""))
end

local function explain_names_the_models_numbers(backend, strategy)
  local o = {backend = backend, strategy = strategy}
  local where = backend .. " " .. strategy
  local text = A:explain("apply", {backend = backend, strategy = strategy, quiet = true})
  local rep = A:model("apply", o)
  check(type(text) == "string", "%s: explain returns a string", where)
  for _, h in ipairs(headings) do check(text:find(h, 1, true), "%s: the text lacks %q", where, h) end
  check(text:find("strategy " .. strategy .. " on " .. backend, 1, true), "%s: the head names the strategy", where)

  -- the prediction and the bound, as A:model gives them (printed to three digits)
  local value, unit, bound = text:match("\npredicted ([%d%.e%+%-]+) (%a+), bound by (%a+)")
  check(value and units[unit], "%s: no predicted time in the text", where)
  check(T.close(seconds(value, unit), rep.predicted_seconds, 6e-3), "%s: predicted %s %s, the model %g s",
        where, value, unit, rep.predicted_seconds)
  check(bound == rep.bound, "%s: bound %s, the model's %s", where, tostring(bound), rep.bound)

  -- the counts per cell
  local flops = tonumber(text:match("\n  flops%s+(%S+)"))
  check(flops and T.close(flops, rep.flops / rep.ncells, 1e-3), "%s: flops per cell %s, the model %g",
        where, tostring(flops), rep.flops / rep.ncells)
  local bytes = tonumber(text:match("\n  DRAM bytes%s+(%S+)"))
  check(bytes and T.close(bytes, rep.bytes / rep.ncells, 1e-3), "%s: DRAM bytes per cell", where)

  -- the ceilings: each present one with its share of the prediction
  for name, s in pairs(rep.ceilings) do
    if s > 0 then
      local v, u, share = text:match("\n  " .. name .. "%s+([%d%.e%+%-]+) (%a+)%s+([%d%.]+)%%")
      check(v and T.close(seconds(v, u), s, 6e-3), "%s: ceiling %s", where, name)
      check(math.abs(tonumber(share) - 100 * s / rep.predicted_seconds) < 0.051, "%s: share of %s", where, name)
    end
  end

  -- the mapping's numbers: the block is the source's, the groups the model's
  local src = A:source("apply", o)
  if strategy ~= "csr" then
    local block = tonumber(text:match("A work group holds (%d+) cells"))
    check(block and block == tonumber(src:match("#define BLOCK (%d+)")), "%s: the block is the source's", where)
    local groups = tonumber(text:match("(%d+) groups? for the %d+ cells"))
    check(groups == rep.groups, "%s: %s groups, the model %d", where, tostring(groups), rep.groups)
    check(text:find("block " .. block // 2 .. " %(halved%)%s+[%d%.]+ [mu]?s") or
          text:find("block " .. block // 2 .. " %(halved%)%s+cannot run"), "%s: the halved block", where)
  else
    check(text:find("343 rows", 1, true), "%s: csr counts rows", where)
  end

  -- at least one other strategy with a predicted time
  check(text:find("\n  strategy %a+%s+[%d%.]+ [mu]?s  %(") , "%s: no alternative with a predicted time", where)
  check(text:find("\n  precision %a+%s+"), "%s: no other precision", where)

  -- the source, whole, after its heading; phases marked
  local tail = text:match("== Source[^\n]*\n(.*)$")
  check(tail and tail:find("/* ==== phase: ", 1, true), "%s: no phase marker in the source", where)
  check(unmarked(tail) == src, "%s: the source without its markers is A:source's", where)
end

for _, backend in ipairs(T.backends()) do
  for _, strategy in ipairs{"transpose", "sumfact", "csr"} do
    explain_names_the_models_numbers(backend, strategy)
  end
end

-- the sumfact phases by name, in the template's order
local text = A:explain("apply", {backend = "cpu", strategy = "sumfact", quiet = true})
local last = 0
for _, p in ipairs{"gather (+ z interpolation)", "interpolation in x", "interpolation in y",
                   "quadrature (column walk)", "transposed x/y derivatives (+ z)", "transposed y",
                   "transposed x", "scatter"} do
  local at = text:find("/* ==== phase: " .. p .. " ==== */", 1, true)
  check(at and at > last, "sumfact: the marker of phase %q is missing or out of order", p)
  last = at
end
check(text:find("counts the whole kernel, not each phase", 1, true), "the text says the counts are per kernel")
check(text:find("None: the cpu runs one work group per OpenMP thread", 1, true), "the cpu has no occupancy")

-- transpose says where its factors come from: stored, or made from the coordinates
local P1 = fe.operator(fe.space(mesh.box{cells = {2, 2, 2}, cell = "tet"}, "P1"),
                       physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
text = P1:explain("apply", {backend = "cpu", strategy = "transpose", geometry = "vertices", quiet = true})
check(text:find("makes J, J^-1 and det J from the cell's coordinates", 1, true) and
      text:find("copies the direction w and the node coordinates", 1, true),
      "transpose from the vertices: the quadrature phase does not say so")
text = P1:explain("apply", {backend = "cpu", strategy = "transpose", geometry = "stored", quiet = true})
check(text:find("reads the geometric factors (J^-1, det J, one set per cell", 1, true),
      "transpose with stored factors on affine cells: not said")

-- cuda: transpose at Q2 hexes reads its tables' rows at 27 points a warp, a line each: the
-- L1's lookups take the shared pipe's time, and the text says so with the counts
for _, backend in ipairs(T.backends(true)) do
  if backend == "cuda" then
    local Q2 = fe.operator(fe.space(mesh.box{cells = 8, cell = "hex"}, "Q2"),
                           physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
    local t2 = Q2:explain("apply", {backend = backend, strategy = "transpose", quiet = true})
    local rep = Q2:model("apply", {backend = backend, strategy = "transpose"})
    check(rep.l1_lines > 10 * rep.l1_requests and rep.l1_tag_seconds > 0, "cuda Q2 transpose: " ..
          "%g requests, %g lines, lookups %g s", rep.l1_requests, rep.l1_lines, rep.l1_tag_seconds)
    check(t2:find("the L1's lookups take the shared pipe's time", 1, true),
          "cuda Q2 transpose: the lookups are not named")
  end
end

-- csr's diagonal runs transpose's kernel, and says so
text = A:explain("diagonal", {backend = "cpu", strategy = "csr", quiet = true})
check(text:find("csr keeps no kernel of its own for the diagonal: it runs transpose's", 1, true),
      "csr's diagonal names transpose's kernel")
check(text:find("/* ==== phase: diagonal", 1, true), "csr's diagonal marks transpose's diagonal phase")

-- without quiet the text is printed, and returned
local printed
local real_print = print
print = function(s) printed = s end
local ok, returned = pcall(A.explain, A, "apply", {backend = "cpu", strategy = "csr", at = A:initial()})
print = real_print
check(ok, "explain with opts.at: %s", tostring(returned))
check(printed == returned, "explain prints the text it returns")

-- bad input
T.expect_error(function() A:explain("solve") end, "A:explain", "action name", "'solve'")
T.expect_error(function() A:explain() end, "A:explain", "action name")
T.expect_error(function() A:explain("apply", {blocks = 4}) end, "A:explain", "unknown option 'blocks'")
T.expect_error(function() A:explain("apply", "sumfact") end, "A:explain", "options must be a table")
T.expect_error(function() A:explain("apply", {strategy = "fastest"}) end, "A:explain", "unknown strategy 'fastest'")
T.expect_error(function() A:explain("apply", {backend = "cpu", strategy = "sumfact", block = -1}) end,
               "A:explain", "block must be an integer")
local P2 = fe.operator(fe.space(mesh.box{cells = 1, cell = "tet"}, "P2"), physics.poisson{}, {dirichlet = "all"})
T.expect_error(function() P2:explain("apply", {backend = "cpu", strategy = "sumfact"}) end,
               "A:explain", "does not apply", "tensor cells")

T.done()
