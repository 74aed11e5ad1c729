-- Bad input to the Lua bindings gives a clear error naming the function, the argument and
-- what was expected, and the session goes on working after each error.
-- Run: build/felab tests/scripts/test_bindings_errors.lua (exits nonzero on failure).

local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

-- A working setup, checked again after every error.
local m = mesh.box{cells = {3, 3, 3}, cell = "tet"}
local V = fe.space(m, "P1")
local u = V:interpolate(function(x) return x[1] + 2 * x[2] end)
local pde = physics.poisson{kappa = 1, source = 1}
local A = fe.operator(V, pde, {dirichlet = {"xmin", "xmax"}, value = 0})
local r0 = A:residual(u)
local reference = r0:norm()

local function still_works()
  local r, rep = A:residual(u)
  check(math.abs(r:norm() - reference) <= 1e-12 * reference, "residual changed after an error")
  check(rep.flops > 0, "report lost its flops")
  check(#u == V.ndofs and u:get(1) == u:get(1), "vector broken after an error")
  check(mesh.box{cells = 2}.ncells == 48, "mesh.box broken after an error")
end

-- unknown backend: the message lists the known ones
expect_error(function() return A:residual(u, {backend = "nope"}) end, "nope", "cpu")
still_works()
expect_error(function() return u:to("nope") end, "nope", "cpu")
expect_error(function() device.use("nope") end, "nope", "cpu")
still_works()

-- wrong argument types
expect_error(function() return mesh.box("x") end, "mesh.box", "argument 1", "string")
expect_error(function() return fe.space(1, "P1") end, "fe.space", "mesh", "argument 1", "number")
expect_error(function() return fe.space(m, 7) end, "fe.space", "argument 2")
expect_error(function() return fe.space(m, "P9") end, "9")
expect_error(function() return fe.operator(V, 3) end, "fe.operator", "physics", "argument 2",
             "number")
expect_error(function() return fe.operator(pde, V) end, "fe.operator", "space", "argument 1")
expect_error(function() return A:residual(3) end, "A:residual", "vector", "number")
expect_error(function() return A:apply(u, {at = 1}) end, "A:apply", "at")
expect_error(function() return u:dot("w") end, "v:dot", "vector", "string")
expect_error(function() return u:axpy("a", u) end, "v:axpy", "number")
expect_error(function() return solve.cg(V) end, "solve.cg", "operator", "space")
expect_error(function() return solve.cg(A, 5) end, "solve.cg", "argument 2")
expect_error(function() return export.vtu("/tmp/x.vtu", V) end, "export.vtu", "mesh", "space")
expect_error(function() return mesh.box{cells = "x"} end, "cells", "string")
expect_error(function() return mesh.box{cells = {2, 2}} end, "cells", "3")
expect_error(function() return mesh.box{cells = {2, 2.5, 2}} end, "cells[2]", "2.5")
expect_error(function() return mesh.box{cell = "blob"} end, "blob", "tet")
expect_error(function() return V:interpolate({}) end, "V:interpolate", "function", "table")
expect_error(function() return V:interpolate("f") end, "V:interpolate", "the expression 'f'",
             "does not compile", "generated line")
still_works()

-- zero and negative sizes name cells and the axis
expect_error(function() return mesh.box{cells = {0, 2, 2}} end, "cells[1]", "x", "positive")
expect_error(function() return mesh.box{cells = {2, -3, 2}} end, "cells[2]", "y", "positive")
expect_error(function() return mesh.box{cells = 0} end, "cells", "positive")
expect_error(function() return mesh.box{cells = 2, lower = {0, 0, 1}, upper = {1, 1, 1}} end,
             "upper", "z")
still_works()

-- unknown option keys list the valid ones
expect_error(function() return solve.cg(A, {rtoll = 1e-8}) end, "solve.cg", "rtoll", "rtol")
expect_error(function() return mesh.box{cels = 2} end, "mesh.box", "cels", "cells")
expect_error(function() return physics.poisson{kapa = 2} end, "kapa", "kappa")
expect_error(function() return A:residual(u, {stratgy = "transpose"}) end, "stratgy", "strategy")
expect_error(function() return A:residual(u, {at = u}) end, "'at'")
expect_error(function() return fe.operator(V, pde, {dirichelt = "all"}) end, "dirichelt",
             "dirichlet")
expect_error(function() return fe.space(m, {family = "P", oder = 1}) end, "oder", "order")
expect_error(function() return m:color{blocks = 4} end, "blocks", "block")
expect_error(function() return A:residual(u, {precision = "half"}) end, "half", "single")
still_works()

-- a dirichlet tag that does not exist: the message lists those that do
expect_error(function() return fe.operator(V, pde, {dirichlet = {"xmin", "left"}}) end, "left",
             "xmin", "zmax")
expect_error(function() return fe.operator(V, pde, {dirichlet = {"xmin", true}}) end,
             "dirichlet[2]")
still_works()

-- a kappa C expression that does not compile: the error quotes the generated line
local bad = physics.poisson{kappa = "1 + + x[0]*"}
local Abad = fe.operator(V, bad, {dirichlet = "all"})
expect_error(function() return Abad:residual(u) end, "generated line")
-- functions of x and per-region values are traced; other kinds are named in the error
check(physics.poisson{kappa = function(x) return 1 + x[1] end}, "kappa as a function of x")
check(physics.poisson{source = {domain = 1}}, "source per region")
expect_error(function() return physics.poisson{kappa = true} end, "physics.poisson", "kappa", "boolean")
expect_error(function() return physics.poisson{source = {domain = "a"}} end, "source", "region")
still_works()

-- vectors: size mismatch, out of range, bad functions
local m2 = mesh.box{cells = {2, 2, 2}}
local w = fe.space(m2, "P1"):interpolate(1)
expect_error(function() return u:dot(w) end, "dot", tostring(#u), tostring(#w))
expect_error(function() return u:axpy(1, w) end, "axpy", tostring(#u), tostring(#w))
expect_error(function() return A:residual(w) end)
expect_error(function() return u:get(0) end, "v:get", "0", tostring(#u))
expect_error(function() return u:get(#u + 1) end, "v:get", tostring(#u + 1), tostring(#u))
expect_error(function() return u:get(1.5) end, "v:get", "integer")
expect_error(function() return V:interpolate(function(x) error("boom") end) end, "boom")
expect_error(function() return V:interpolate(function(x) return "one" end) end, "number",
             "string")
expect_error(function() return u:error(function(x) return nil end) end, "number", "nil")
expect_error(function() return export.vtu("/tmp/felab-test.vtu", m, {w = w}) end, "'w'",
             tostring(#w), tostring(m.nvertices))
still_works()

-- solver options out of range
expect_error(function() return solve.cg(A, {maxit = -1}) end, "maxit")
expect_error(function() return solve.cg(A, {rtol = -1}) end, "rtol")
expect_error(function() return solve.cg(A, {monitor = "yes"}) end, "monitor")
local x, info = solve.cg(A, {maxit = 1})
check(info.converged == false and info.reason == "maxit", "a non-converged solve is not an error")
check(#info.history >= 1 and info.report.iterations == 1, "maxit = 1: history and report")
x, info = solve.cg(A)
check(info.converged, "solve.cg with defaults did not converge")
-- -laplacian u = 1, u = 0 at x = 0 and 1, natural elsewhere: u = x (1 - x) / 2, which P1 meets
-- at the nodes (as in 1D), so the solution is its interpolant
local exact = function(p) return p[1] * (1 - p[1]) / 2 end
check(T.max_abs_diff(x, V:interpolate(exact)) < 1e-9,
      "solve.cg with defaults: %g from the exact solution at the nodes",
      T.max_abs_diff(x, V:interpolate(exact)))
still_works()

-- closing: a borrowed object stays usable; a closed one is a clear error, never a crash
do
  local m3 <close> = mesh.box{cells = 2}
  V3 = fe.space(m3, "P1")
end
check(V3:interpolate(2):max() == 2, "a closed mesh borrowed by a space must stay alive")
local m4
do
  local m5 <close> = mesh.box{cells = 2}
  m4 = m5
end
expect_error(function() return m4.ncells end, "closed")
expect_error(function() return fe.space(m4, "P1") end, "closed")
check(tostring(m4):find("closed"))
still_works()

-- a vector bound as a physics field, and its space, closed by the user (by __close or a
-- __gc called by hand): the physics keeps what it reads, the residual is the one before
do
  local Vh = fe.space(mesh.box{cells = 2, cell = "hex"}, "Q2")
  local u_old = Vh:interpolate(function(x) return 1 + x[1] * x[2] end)
  local heat = physics.heat{dt = 0.1, u_old = u_old}
  local w = Vh:interpolate(function(x) return x[3] end)
  local r0 = fe.operator(Vh, heat):residual(w):values()
  getmetatable(u_old).__close(u_old)
  getmetatable(Vh).__gc(Vh)
  check(tostring(u_old):find("closed"), "the user's handle of the field is closed")
  local r1 = fe.operator(Vh, heat):residual(w):values()
  local d = 0
  for i = 1, #r0 do d = math.max(d, math.abs(r1[i] - r0[i])) end
  check(d == 0, "the residual after closing the field moved by %g", d)
  -- rebinding to another vector gives the first back; closing the second the same way
  local u2 = Vh:interpolate(2)
  heat:set{u_old = u2}
  getmetatable(u2).__gc(u2)
  local r2 = fe.operator(Vh, heat):residual(w):values()
  check(math.abs(r2[1] - r0[1]) > 0 or math.abs(r2[#r2] - r0[#r0]) > 0, "the rebound field is read")
  heat = nil
  collectgarbage()
  collectgarbage()
  print("bound fields outlive their handles ok")
end
still_works()

-- physical-group numbers work where names do; an unknown number lists the names
check(fe.operator(V, pde, {dirichlet = {1, "xmax"}}).ndirichlet == A.ndirichlet,
      "dirichlet = {1, \"xmax\"} does not constrain what {\"xmin\", \"xmax\"} does")
expect_error(function() return fe.operator(V, pde, {dirichlet = 9}) end, "'9'", "xmin")
print("group numbers ok")

T.done()
