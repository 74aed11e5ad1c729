-- Manufactured-solution Poisson on every order: rate p+1 in L2 and p in H1 for P1..P4 on
-- tets, Q1..Q4 on hexes (GLL nodes) and P1..P3 on prisms, on cpu and on opencl.
-- u = x(1-x) y(1-y) z(1-z) exp(x): zero on the boundary, in no finite element space.
-- Under the sanitizers (FELAB_ASAN=1) on the cpu alone: the opencl backend's host code runs
-- the same calls for every order (test_convergence solves P1 and Q1 there); its rates are the
-- plain pass's.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local exact, source = T.mms_exact, T.mms_source

-- the two mesh sizes per order: fine enough to be asymptotic, small enough to be quick
local sizes = {[1] = {4, 8}, [2] = {3, 6}, [3] = {2, 4}, [4] = {2, 4}}

local function errors(cell, space, backend, p)
  local l2, h1 = {}, {}
  for i, n in ipairs(sizes[p]) do
    local m = mesh.box{cells = {n, n, n}, cell = cell}
    local V = fe.space(m, space)
    local A = fe.operator(V, physics.poisson{kappa = 1, source = source}, {dirichlet = "all"})
    local u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-12, maxit = 3000, backend = backend})
    check(info.converged, ("%s %s n=%d: cg did not converge (%s)"):format(space, backend, n, info.reason))
    l2[i], h1[i] = u:error(exact, "L2"), u:error(exact, "H1")
  end
  return math.log(l2[1] / l2[2], 2), math.log(h1[1] / h1[2], 2), l2[2], h1[2]
end

local cases = {}
for p = 1, 4 do cases[#cases + 1] = {"tet", "P" .. p, p} end
for p = 1, 4 do cases[#cases + 1] = {"hex", "Q" .. p, p} end
for p = 1, 3 do cases[#cases + 1] = {"prism", "P" .. p, p} end

local failures = 0
for _, backend in ipairs(os.getenv("FELAB_ASAN") == "1" and {"cpu"} or {"cpu", "opencl"}) do
  for _, c in ipairs(cases) do
    local p = c[3]
    local rl2, rh1, el2, eh1 = errors(c[1], c[2], backend, p)
    local ok = rl2 > p + 1 - 0.3 and rl2 < p + 1 + 0.5 and rh1 > p - 0.3 and rh1 < p + 0.5
    print(("%-6s %-5s %-3s  L2 %.2e rate %.2f (want %d)   H1 %.2e rate %.2f (want %d)  %s"):format(
      backend, c[1], c[2], el2, rl2, p + 1, eh1, rh1, p, ok and "ok" or "FAILED"))
    if not ok then failures = failures + 1 end
  end
end
check(failures == 0, failures .. " convergence case(s) failed")
T.done()
