-- The API fuzz test (issue 44): first the calls that crashed felab when the fuzzer found them
-- (each must now be an error with a message, and the session goes on), then, in the sanitized
-- pass of make test (FELAB_ASAN=1), a bounded run of tests/fuzz/api_fuzz.lua: a few thousand
-- random calls of the whole Lua surface, at most FELAB_FUZZ_SECONDS (20) seconds. make fuzz
-- runs long ones with several seeds.
-- Run: build/felab tests/scripts/test_api_fuzz.lua (exits nonzero on failure).

local here = arg[0]:match("^(.*/)") or ""
local T = dofile(here .. "check.lua")
local check, expect_error = T.check, T.expect_error

-- A symbol of a trace, kept past its end; and errors raised inside a physics function.
local kept, inside = nil, {}
local function physics_with(f)
  return physics.new{f0 = function(u, du) kept = u; f(u, du) return u end,
                     f1 = function(u, du) return du end}
end
local V = fe.space(mesh.box{cells = 1}, "P1")

-- physics helpers outside a trace: the graph they built in was NULL (SIGSEGV in fe_x_const)
expect_error(function() return physics.dot(1, 2) end, "not a symbol", "no trace")
expect_error(function() return physics.tr({{1}}) end, "not a symbol", "no trace")
expect_error(function() return physics.cexpr("x[0]") end, "physics.cexpr", "inside")
fe.operator(V, physics_with(function() end))
expect_error(function() return 1 + kept end, "not a symbol", "no trace")
expect_error(function() return math.sin(kept) end, "trace that has ended")
-- a symbol's __tostring called by hand on another value read it as a symbol (NULL: UBSan)
expect_error(function() return getmetatable(kept).__tostring("tet") end, "felab.symbol expected")

-- a table that holds itself, or tables nested deeper than a matrix's rows, given to a helper
-- in a trace: the conversion recursed until the stack overflowed
local loop = {}
loop[1] = loop
fe.operator(V, physics_with(function(u, du)
  for _, t in ipairs{loop, {{{{1}}}}, {1, {2}}, {{1}, {{2}}}} do
    inside[#inside + 1] = select(2, pcall(physics.tr, t))
  end
end))
check(#inside == 4, "the physics function ran")
for _, msg in ipairs(inside) do
  check(type(msg) == "string" and msg:find("holds", 1, true), "unexpected message: %s",
        tostring(msg))
end

-- fe.operator traces the physics for the space's dimension, running its Lua functions, which
-- closed the space (or the physics itself): the operator was made on the freed space
local function close(v) getmetatable(v).__close(v) end
local Vq = fe.space(mesh.box{cells = 1, cell = "quad"}, "Q1")
local armed = false
local closing = physics.new{f0 = function(u) if armed then close(Vq) end return u end,
                            f1 = function(u, du) return du end}
armed = true
expect_error(function() return fe.operator(Vq, closing) end, "fe.operator", "closed", "traced")
local self_closing
self_closing = physics.new{
  f0 = function(u) if self_closing then close(self_closing) end return u end,
  f1 = function(u, du) return du end}
expect_error(function() return fe.operator(fe.space(mesh.box{cells = 1, cell = "quad"}, "Q1"),
                                           self_closing) end, "fe.operator", "closed", "traced")

-- an options table whose __index closes the operator (or the vector) being used: options are
-- read once the call holds its objects (heap-use-after-free in fe_operator_initial,
-- fe_operator_assemble, op_input); a table with a metatable is refused
local P = fe.operator(V, physics.poisson{source = 1}, {dirichlet = "all"})
local w = V:interpolate(1)
local function closing(v) return setmetatable({}, {__index = function() close(v) end}) end
expect_error(function() return P:residual(w, closing(P)) end, "A:residual", "metatable")
expect_error(function() return P:assemble(closing(P)) end, "metatable")
expect_error(function() return solve.newton(P, closing(P)) end, "solve.newton", "metatable")
expect_error(function() return solve.cg(P, closing(w)) end, "solve.cg", "metatable")
check(tostring(P):find("operator poisson", 1, true) and #w == V.ndofs, "P and w are open")

-- a count past int: (int) of 2^32 + 1 was 1, a prediction for 1 unit given silently
local _, rep = P:residual(w)
expect_error(function() return perf.model(rep, {gbytes = 1, gflops = 1}, 2 ^ 32 + 1) end,
             "perf.model", "units", "4294967297")

-- the session still solves
local m = mesh.box{cells = {2, 2, 2}, cell = "hex"}
local A = fe.operator(fe.space(m, "Q1"), physics.poisson{kappa = 1, source = 1},
                     {dirichlet = "all"})
local u, info = solve.cg(A, {rtol = 1e-10})
check(info.converged and math.abs(u:max() - 0.09375) < 1e-12, "the solve after the errors")

if os.getenv("FELAB_ASAN") ~= "1" and not os.getenv("FELAB_FUZZ_CALLS") then
  T.skip("api fuzz: the random calls run in the sanitized pass (FELAB_ASAN=1) or with "
         .. "FELAB_FUZZ_CALLS")
  T.done()
  return
end
-- defaults for make test; the environment overrides them
local defaults = {FELAB_FUZZ_CALLS = "4000", FELAB_FUZZ_SECONDS = "20", FELAB_FUZZ_SEED = "1"}
local getenv = os.getenv
os.getenv = function(name) return getenv(name) or defaults[name] end
local ok, err = pcall(dofile, here .. "../fuzz/api_fuzz.lua")
os.getenv = getenv
if not ok then error(err, 0) end
T.done()
