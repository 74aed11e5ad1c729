-- Each strategy takes its own options (engine/operator/strategy.h: options, read_options, effective_key):
-- an option of another strategy is an error naming the option and the strategies that take it;
-- without a strategy named, the options given choose among the strategies that take them all;
-- two calls with the same effective options (in another order, defaults spelled out) share one
-- realization, counted by A.realizations.
-- Run: build/felab tests/scripts/test_strategy_options.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local m = mesh.box{cells = {3, 3, 2}, cell = "tet"}
local V = fe.space(m, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local w = V:interpolate(function(x) return x[1] * x[2] + x[3] end)
local cpu = {backend = "cpu", precision = "double"}
local function with(t)
  local o = {}
  for k, v in pairs(cpu) do o[k] = v end
  for k, v in pairs(t) do o[k] = v end
  return o
end

-- another strategy's option: an error naming the option, the strategy and those that take it
check(A.realizations == 0, "a new operator holds %d realizations", A.realizations)
expect_error(function() return A:apply(w, with{strategy = "transpose", walk = 9}) end,
             "A:apply: option walk is not an option of strategy transpose; strategy patch takes it")
expect_error(function() return A:residual(w, with{strategy = "patch", fold = false}) end,
             "A:residual: option fold is not an option of strategy patch",
             "strategies transpose, sumfact take it", "patch takes block, walk, lanes, geometry")
expect_error(function() return A:diagonal(with{strategy = "csr", recompute = true}) end,
             "option recompute is not an option of strategy csr; strategy ebe takes it")
expect_error(function() return A:apply(w, with{strategy = "ebe", format = "sell"}) end,
             "option format is not an option of strategy ebe; strategy csr takes it")
expect_error(function() return solve.cg(A, with{strategy = "transpose", lanes = 4}) end,
             "solve.cg: option lanes is not an option of strategy transpose",
             "strategies patch, csr take it")
check(A.realizations == 0, "refused calls made %d realizations", A.realizations)
print("another strategy's option is an error naming the option and the strategies that take it")

-- a value a strategy does not take: an error naming the option as it was written
expect_error(function() return A:apply(w, with{strategy = "patch", walk = 2.5}) end,
             "A:apply: walk = 2.5: walk must be an integer >= -1")
expect_error(function() return A:apply(w, with{strategy = "ebe", scatter = "nodes"}) end,
             "scatter = \"nodes\"", "for strategy ebe")
expect_error(function() return A:apply(w, with{strategy = "transpose", fold = "yes"}) end,
             "fold = \"yes\": fold must be true")

-- no strategy named: the options choose among the strategies that take them all
local _, rep = A:apply(w, with{walk = 4})
check(rep.strategy == "patch", "walk = 4 without a strategy ran %s (%s)", rep.strategy, rep.why)
_, rep = A:apply(w, with{recompute = true})
check(rep.strategy == "ebe", "recompute = true without a strategy ran %s (%s)", rep.strategy, rep.why)
local _, plain = A:apply(w, cpu)
_, rep = A:apply(w, with{block = 8})
check(rep.strategy == plain.strategy, "block (every strategy's) changed the default: %s", rep.strategy)
expect_error(function() return A:apply(w, with{walk = 4, recompute = true}) end,
             "A:apply: no one strategy takes every option given", "walk: patch", "recompute: ebe")
local N = fe.operator(V, T.nonlinear(V)) -- ebe's matrices would be stale: it does not apply
expect_error(function() return N:apply(w, with{recompute = true}) end,
             "A:apply: no strategy that takes recompute applies", "ebe: ", "depends on the state")
print("without a strategy, the options given choose among the strategies that take them all")

-- the same effective options share one realization
local B = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local function count(o)
  B:apply(w, with(o))
  return B.realizations
end
local n = count{strategy = "transpose"}
check(n == 1, "one apply made %d realizations", n)
check(count{strategy = "transpose"} == n, "the same call again made a realization")
check(count{strategy = "transpose", geometry = "auto", fold = "auto", block = 0} == n,
      "transpose's defaults spelled out made a realization")
n = count{strategy = "patch"}
check(count{strategy = "patch", walk = 0} == n and count{strategy = "patch", walk = -1} == n,
      "walk 0 and -1 (one item per cell) made realizations")
check(count{strategy = "patch", lanes = 1, walk = -1} == n, "the cpu's lanes spelled out made one")
n = count{strategy = "patch", walk = 4, lanes = 2}
check(count{lanes = 2, strategy = "patch", walk = 4} == n, "another order made a realization")
check(count{walk = 4, lanes = 2} == n, "walk and lanes without the strategy (patch) made one")
n = count{strategy = "ebe"}
check(count{strategy = "ebe", scatter = "atomic", recompute = false} == n,
      "ebe's defaults spelled out made a realization")
check(count{strategy = "ebe", scatter = "auto", block = 0} == n, "ebe's auto scatter made one")
check(count{strategy = "ebe", recompute = true} == n + 1, "recompute made no realization of its own")
pcall(B.apply, B, w, with{strategy = "transpose", walk = 9})
check(B.realizations == n + 1, "a refused option made a realization")
local y0 = B:apply(w, with{strategy = "transpose"})
local y1 = B:apply(w, with{strategy = "patch", walk = 4, lanes = 2})
check(T.rel_diff(y1, y0) <= 1e-12, "patch walk 4 differs from transpose by %.2e", T.rel_diff(y1, y0))
print(("same effective options share one realization (%d held)"):format(B.realizations))

-- sumfact's default block is a number in its key: asking for it shares the realization
do
  local Vh = fe.space(mesh.box{cells = 2, cell = "hex"}, "Q2")
  local H = fe.operator(Vh, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local wh = Vh:interpolate(function(x) return x[1] end)
  local function hcount(o) H:apply(wh, with(o)) return H.realizations end
  local m = hcount{strategy = "sumfact"}
  check(hcount{strategy = "sumfact", block = 8} == m,
        "sumfact's default block on the cpu (8) spelled out made a realization")
  check(hcount{strategy = "sumfact", block = 4} == m + 1, "block 4 made no realization of its own")
end

-- csr's key resolves its defaults as the assembly does (fe_csr_layout): asking for the default
-- layout explicitly and asking nothing share one realization
do
  local C = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local function ccount(o) C:apply(w, with(o)) return C.realizations end
  local c = ccount{strategy = "csr"}
  check(ccount{strategy = "csr", format = "csr"} == c,
        "csr's default format on the cpu (csr) spelled out made a realization")
  check(ccount{strategy = "csr", format = "csr", lanes = 1, block = 32} == c,
        "csr's defaults on the cpu (format csr, lanes 1, block 32) spelled out made a realization")
  check(ccount{strategy = "csr", lanes = 2} == c + 1, "lanes 2 made no realization of its own")
  c = ccount{strategy = "csr", format = "sell"}
  check(ccount{strategy = "csr", format = "sell", chunk = 8, sigma = 64} == c,
        "SELL's defaults on the cpu (chunk 8, sigma 64) spelled out made a realization")
  local y0 = C:apply(w, with{strategy = "csr"})
  local y1 = C:apply(w, with{strategy = "csr", format = "csr", lanes = 1})
  check(T.rel_diff(y1, y0) == 0, "csr's defaults spelled out differ by %.2e", T.rel_diff(y1, y0))
  expect_error(function() return C:apply(w, with{strategy = "csr", geometry = "stored"}) end,
               "A:apply: option geometry is not an option of strategy csr",
               "strategies transpose, patch, sumfact take it", "csr takes block, lanes, format")
  expect_error(function() return C:apply(w, with{strategy = "csr", walk = 4}) end,
               "option walk is not an option of strategy csr; strategy patch takes it")
  expect_error(function() return C:apply(w, with{strategy = "csr", format = "sell", lanes = 4}) end,
               "lanes = 4 is CSR's")
  check(C.realizations == c, "a refused option made a realization (%d held)", C.realizations)
end
print("csr's key resolves its defaults: the default layout asked for shares the realization")

-- A:strategies() says each one's options
local _, info = A:strategies(cpu)
check(info.patch.options == "block, walk, lanes, geometry", "patch's options: %s", info.patch.options)
check(info.csr.options:find("format", 1, true) and info.ebe.options:find("recompute", 1, true),
      "csr's and ebe's options: %s; %s", info.csr.options, info.ebe.options)
T.done("test_strategy_options.lua")
