-- Every strategy A:strategies() lists runs with its defaults and computes what "transpose"
-- computes (issue 43, "Every listed strategy runs"): on small boxes, uniform and distorted,
-- on the cpu and opencl, in double (to 1e-11 of transpose's Jacobian action, relative) and
-- single (to 1e-4); a strategy that does not apply says why instead of being listed. Q5 hexes
-- listed patch while its default patches of 512 cells filed more contributions than a
-- patch's 16-bit places name (110592): its default block now fits. The reference is transpose
-- on the cpu in double; the default (no strategy named) is one of the listed and runs too. By
-- default a few cases of each cell type, Q5 and a distorted Q7 hexes among them (on the cpu in
-- double only: their kernels are the slow ones to load); FELAB_TEST_FULL=1 runs every order felab has, P1..P4
-- tets and triangles, Q1..Q7 hexes and quads, each on both backends in both precisions
-- (minutes on two cores). Under the sanitizers (FELAB_ASAN=1) not the Q7 case: its time there
-- is its kernels' (compiled without the sanitizers, the element matrices of Q7 run twice with
-- the trial: 19 of the test's 26 s), on host paths the lower orders take; the plain pass runs it.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff = T.check, T.max_rel_diff
local backends = T.backends(false)
local full = os.getenv("FELAB_TEST_FULL") == "1"

-- distorted cells with the coefficient of x, as a user brings them; the others uniform with
-- kappa = 1
local kx = "1 + 0.5 * x[0]"
local cases = full and {} or {
  {cell = "tet", space = "P1", cells = {2, 2, 1}},
  {cell = "tet", space = "P2", cells = {2, 2, 1}, distort = 0.1, kappa = kx},
  {cell = "hex", space = "Q1", cells = {3, 3, 3}, distort = 0.1},
  {cell = "hex", space = "Q2", cells = {2, 2, 1}},
  {cell = "hex", space = "Q5", cells = {2, 2, 1}, distort = 0.1, cpu_double = true},
  -- Q7 distorted: csr's element matrices on the cpu keep a cell's factors at its 512 points
  -- beside 32 cells, past the static shared memory (their block is 16 now)
  {cell = "hex", space = "Q7", cells = {2, 1, 1}, distort = 0.1, kappa = kx, cpu_double = true,
   only = {csr = true}, plain_only = true},
  {cell = "quad", space = "Q2", cells = {3, 2}, distort = 0.1, kappa = kx},
  {cell = "tri", space = "P2", cells = {3, 2}},
}
if full then
  local function add(cell, fam, pmax, cells)
    for p = 1, pmax do
      local user = p % 2 == 0
      cases[#cases + 1] = {cell = cell, space = fam .. p, cells = cells,
                           distort = user and 0.1 or nil, kappa = user and kx or nil}
    end
  end
  add("tet", "P", 4, {2, 2, 1})
  add("hex", "Q", 7, {2, 2, 1})
  add("quad", "Q", 7, {3, 2})
  add("tri", "P", 4, {3, 2})
end

if os.getenv("FELAB_ASAN") == "1" then -- the cases the plain pass runs alone
  local kept = {}
  for _, c in ipairs(cases) do if not c.plain_only then kept[#kept + 1] = c end end
  cases = kept
end

local notes, runs = {}, 0
for _, c in ipairs(cases) do
  local m = mesh.box{cells = c.cells, cell = c.cell, distort = c.distort}
  local V = fe.space(m, c.space)
  local A = fe.operator(V, physics.poisson{kappa = c.kappa or 1, source = 1}, {dirichlet = "xmin"})
  local w = V:interpolate(function(x) return x[1] * x[2] + 0.3 + (x[3] or 0) end)
  local ref = A:apply(w, {backend = "cpu", precision = "double", strategy = "transpose"})
  local ran = {}
  for _, be in ipairs(c.cpu_double and {"cpu"} or backends) do
    local wb = w:to(be)
    for _, prec in ipairs(c.cpu_double and {"double"} or {"double", "single"}) do
      local what = ("%s %s%s %s %s"):format(c.cell, c.space, c.distort and " distorted" or "", be,
                                            prec)
      local names, info = A:strategies{backend = be, precision = prec}
      check(#names > 0, "%s: no strategy listed", what)
      local listed, default = {}, nil
      for _, s in ipairs(names) do listed[s] = true end
      for name, f in pairs(info) do -- listed exactly when it applies; one that does not says why
        check((listed[name] or false) == f.applies and (f.applies or #f.why > 0),
              "%s: %s applies = %s, listed = %s, why = %q", what, name, tostring(f.applies),
              tostring(listed[name]), f.why)
        if f.default then default = name end
      end
      check(default and listed[default], "%s: the default %s is not listed", what,
            tostring(default))
      local _, rep = A:apply(wb, {backend = be, precision = prec})
      check(rep.strategy == default, "%s: the default ran %s, A:strategies() says %s", what,
            tostring(rep.strategy), default)
      local tol = prec == "double" and 1e-11 or 1e-4
      for _, s in ipairs(names) do
        if not c.only or c.only[s] then -- (a case may run some of the listed alone)
          local ok, y = pcall(A.apply, A, wb, {backend = be, precision = prec, strategy = s})
          check(ok, "%s: listed strategy %s fails with its defaults: %s", what, s, tostring(y))
          local d = rel_diff(ref, y:to("cpu", "double"))
          check(d <= tol, "%s: %s differs from transpose by %.2e (tolerance %g)", what, s, d, tol)
          ran[s] = true
          if s == "patch" and c.cell == "hex" and c.space == "Q5" then -- the issue's case
            local src = A:source("apply", {backend = be, precision = prec, strategy = s})
            local block = tonumber(src:match("#define BLOCK (%d+)"))
            check(block and block * 216 <= 65536, "%s: default patch block %s files more than "
                  .. "65536 contributions", what, tostring(block))
            notes[#notes + 1] = ("%s: patches of %d cells by default"):format(what, block)
          end
          runs = runs + 1
        end
      end
    end
  end
  local names = {}
  for s in pairs(ran) do names[#names + 1] = s end
  table.sort(names)
  print(("%-4s %s%s%s: %s = transpose (%s)"):format(c.cell, c.space,
        c.distort and ", distorted" or "", c.kappa and ", kappa(x)" or "",
        table.concat(names, ", "), c.cpu_double and "cpu, double" or table.concat(backends, ", ") .. "; double, single"))
end

for _, s in ipairs(notes) do print("  " .. s) end
print(("%d runs of listed strategies with their defaults"):format(runs))
T.done()
