-- A kernel that faults does not take the session with it (cpu backend): raw C physics that
-- reads a bad pointer or divides by zero is an error naming the signal, the kernel and the
-- line of the physics body; the same call again gives the same error; the session goes on
-- and a healthy physics gives the answer it gave before.
-- Run: build/felab tests/scripts/test_fault_guard.lua (exits nonzero on failure).

local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local m = mesh.box{cells = {3, 3, 3}, cell = "tet"}
local V = fe.space(m, "P1")
local u = V:interpolate(function(x) return x[1] + 2 * x[2] end)
local grad = "for (int d = 0; d < DIM; d++) f1[d] = du[d];"
local o, cpu = {dirichlet = "all"}, {backend = "cpu"}

-- a null pointer read in f0: the residual's kernel dies in its trial run, not the session
local bad = physics.new{components = 1, f0 = "int *p = 0; f0[0] = p[1000000];", f1 = grad}
local B = fe.operator(V, bad, o)
local first = expect_error(function() return B:residual(u, cpu) end, "SIGSEGV", "kernel fe_",
                           "residual of raw", "in fe_f", "f0[0] = p[1000000];")
check(first:find("%.c:%d+"), "no line of the generated source in: %s", first)
-- the same call again: the same error (the kernel is known to fault and is not run again)
local again = expect_error(function() return B:residual(u, cpu) end, "SIGSEGV")
local function text(msg) return (msg:gsub("^[^:]*:%d+: ", "")) end -- less the Lua position
check(text(again) == text(first), "the second error differs:\n  %s\n  %s", first, again)

-- a runtime integer division by zero in a Jacobian block: SIGFPE, named in the Jacobian
local div = physics.new{components = 1, f1 = grad,
                        g3 = "volatile int z = 0; g3[0] = (int)(7 + x[0]) / z;"}
expect_error(function() return fe.operator(V, div, o):apply(u, cpu) end, "SIGFPE",
             "integer division by zero", "in fe_df", "(int)(7 + x[0]) / z;")

-- the session goes on: raw C Poisson gives the library's residual and solution
local raw = physics.new{components = 1, f0 = "f0[0] = -1;", f1 = grad,
                        g3 = "for (int d = 0; d < DIM; d++) g3[d * DIM + d] = 1;"}
local lib = physics.poisson{kappa = 1, source = 1}
local A, L = fe.operator(V, raw, o), fe.operator(V, lib, o)
check(T.rel_diff(A:residual(u, cpu), L:residual(u, cpu)) < 1e-13,
      "raw C residual differs from poisson's")
local x = solve.cg(A, {rtol = 1e-10, backend = "cpu"})
local y = solve.cg(L, {rtol = 1e-10, backend = "cpu"})
check(T.rel_diff(x, y) < 1e-9, "raw C solution differs from poisson's")
check(T.rel_diff(A:residual(u, cpu), L:residual(u, cpu)) < 1e-13, "a second residual differs")

-- a coefficient string within the host's reader (x[0..2], numbers, operators, math.h) cannot
-- fault: its kernels are not tried first (on cuda a trial is another process, about 0.4 s a
-- kernel); one beyond it (an integer cast, x[5], a pointer) still is
local function tried(kappa, source)
  local P = fe.operator(V, physics.poisson{kappa = kappa, source = source or 1}, o)
  return P:source("apply", {backend = "cpu", strategy = "transpose"}):find("#define FE_USER_C 1", 1, true) ~= nil
end
check(not tried("1 + 0.5 * x[0]"), "kappa = \"1 + 0.5 * x[0]\" is tried first")
check(not tried("1 + x[0] * x[0]", "sin(M_PI * x[1]) + pow(x[2], 2)"), "a math.h source is tried first")
check(tried("1 + (int)(x[0] * 3) % 2"), "an integer cast and %% are not tried first")
check(tried("1 + *(&x[0] + 5)"), "a pointer's read is not tried first")
check(tried("1 + x[5]"), "x[5] is not tried first")

T.done()
