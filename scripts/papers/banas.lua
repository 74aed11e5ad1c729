-- Banas et al., numerical integration of higher-order finite element stiffness matrices on
-- GPUs (ModFEM, OpenCL; shared/papers/banas-higher-order-integration-gpu: the stored text
-- begins at the abstract, so the title and authors are not quoted here).
--
-- The paper's central experiment (section 5, Tables 1, 5, 6): element stiffness matrices of
-- 3D linear elasticity on prisms of order p = 2..7 by Gaussian quadrature, in four kernel
-- variants (REG/SHM: the matrix under construction in registers or shared memory; JAC/NOJAC:
-- the Jacobian terms computed on the GPU or sent per point), with the time of each stage
-- (input preparation, memory, transfers, kernel), the flops performed per element, and the
-- rates: 200-370 GF/s on a GTX 580, 17-47 GF/s on an 8-core Xeon E5-2670 in double (Table 5).
--
-- felab reruns it with A:element_matrices{strategy = "quadrature", variant = ...} for P1..P7
-- prisms (vector, 3 components, E = 1, nu = 0.3) on small boxes. What compares: the number
-- of shape functions (Table 1), the flops per element and how they grow with p (Table 6,
-- counted here), the cpu rate against the paper's Xeon (Table 5), which variant is fastest
-- (Observations 6-7), and the stages. Where a GPU backend is present reg_nojac runs there too.
--
-- usage: felab scripts/papers/banas.lua [quick] [backend=cpu]
local P = dofile((arg[0]:match("^(.*/)") or "") .. "paper.lua")("banas",
  "Banas et al., higher-order element stiffness matrices (Tables 1, 5, 6)")

local orders = P.size({1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4})
local variants = {"reg_jac", "reg_nojac", "shm_jac", "shm_nojac"}
local reps = P.size(3, 1)
-- Table 1: Nsh for p = 1..7; Table 6, REG NOJAC (GTX 580): flops per element x 1e-6 for p = 2..7;
-- Table 5 (Xeon E5-2670, 8 cores, double): GF/s for p = 2..7
local nsh = {6, 18, 40, 75, 126, 196, 288}
local paper_flops = {[2] = 0.44e6, [3] = 6.30e6, [4] = 29.37e6, [5] = 163.9e6, [6] = 617.9e6, [7] = 1990e6}
local xeon_gflops = {[2] = 41.06, [3] = 46.87, [4] = 42.37, [5] = 45.79, [6] = 34.61, [7] = 17.35}
-- cells a mesh of the prism box: fewer at high order (the paper too: 29056 elements at p = 2, 112 at
-- p = 7), 64 times more on a GPU
local function box(p, gpu)
  local n = P.quick and 1 or (p <= 3 and 4 or p <= 5 and 2 or 1)
  if gpu then n = 4 * n end
  return mesh.box{cells = {n, n, math.max(n, 2)}, cell = "prism", distort = 0.2}
end

-- max over cells of max |K - R| / max |R|
local function matrix_diff(K, R)
  local worst = 0
  for c = 1, K.ncells, math.max(1, K.ncells // 8) do
    local a, b, d, s = K:get(c), R:get(c), 0, 0
    for i = 1, K.n do
      for j = 1, K.n do d, s = math.max(d, math.abs(a[i][j] - b[i][j])), math.max(s, math.abs(b[i][j])) end
    end
    worst = math.max(worst, d / s)
  end
  return worst
end

local function run(backend, which)
  local results, rows = {}, {}
  for _, p in ipairs(orders) do
    local m = box(p, backend ~= P.backend)
    local A = fe.operator(fe.space(m, {family = "P", order = p, components = 3}), physics.elasticity{E = 1, nu = 0.3})
    local r = {p = p, ncells = m.ncells, by_variant = {}}
    for _, v in ipairs(which) do
      local rep, K = P.best(reps, function()
        return A:element_matrices{strategy = "quadrature", variant = v, backend = backend}
      end)
      r.by_variant[v] = {rep = rep, K = #which > 1 and K:to("cpu") or nil} -- kept to compare the variants
      r.n = K.n
      if not r.fastest or rep.seconds < r.by_variant[r.fastest].rep.seconds then r.fastest = v end
      rows[#rows + 1] = {p, v, K.n, m.ncells, rep.flops / m.ncells, rep.gflops, (rep.setup_seconds or 0) * 1e6
                         / m.ncells, (rep.transfer_seconds or 0) * 1e6 / m.ncells, rep.seconds * 1e6 / m.ncells}
    end
    results[#results + 1] = r
  end
  print(("\nelement stiffness matrices of P1..P%d prisms, elasticity, on %s, double (best of %d calls; "
         .. "times per element):"):format(orders[#orders], backend, reps))
  P.table({"p", "variant", "K.n", "cells", "flop/element", "GF/s", "prepare us", "transfer us", "kernel us"},
          {"%d", "%s", "%d", "%d", "%.4g", "%.3g", "%.3g", "%.3g", "%.4g"}, rows)
  return results
end

local results = run(P.backend, variants)
local xs, yf, yp = {}, {}, {}
for _, r in ipairs(results) do
  local ref = r.by_variant.reg_nojac
  P.check(r.n == 3 * nsh[r.p], "P%d: %d shape functions a component (Table 1: %d)", r.p, r.n // 3, nsh[r.p])
  local worst = 0
  for _, v in ipairs(variants) do worst = math.max(worst, matrix_diff(r.by_variant[v].K, ref.K)) end
  P.check(worst < 1e-11, "P%d: the four variants give the same matrices (%.1e < 1e-11)", r.p, worst)
  local f = ref.rep.flops / r.ncells
  if paper_flops[r.p] then
    P.check(f / paper_flops[r.p] > 0.5 and f / paper_flops[r.p] < 2, "P%d: %.4g flops an element, within a factor "
            .. "2 of the paper's %.4g (Table 6, REG NOJAC)", r.p, f, paper_flops[r.p])
    xs[#xs + 1], yf[#yf + 1], yp[#yp + 1] = r.p, f, paper_flops[r.p]
  end
end
local kf, kp = P.slope(xs, yf), P.slope(xs, yp)
P.check(math.abs(kf / kp - 1) < 0.15, "flops an element grow like p^%.2f, within 15%% of the paper's p^%.2f "
        .. "(p = %d..%d)", kf, kp, xs[1], xs[#xs])

P.compare(("flops/element ~ p^k, p = %d..%d: k"):format(xs[1], xs[#xs]), kp, "Table 6, REG NOJAC, fitted here", kf,
          "felab's counted flops of reg_nojac; the paper's flops performed by its GPU kernel")
for _, r in ipairs(results) do
  local ref = r.by_variant.reg_nojac
  if paper_flops[r.p] then
    P.compare(("P%d: flops/element"):format(r.p), paper_flops[r.p], "Table 6, REG NOJAC", ref.rep.flops / r.ncells,
              r.p == 2 and ("felab's quadrature: its own rule per order (the paper's Gauss rules: Table 1 NQ)") or nil)
  end
end
for _, r in ipairs(results) do
  if xeon_gflops[r.p] then
    P.compare(("P%d: GF/s, reg_nojac on %s"):format(r.p, P.backend), xeon_gflops[r.p], "Table 5, Xeon E5-2670",
              r.by_variant.reg_nojac.rep.gflops, r.p == 2 and ("an 8-core 2012 Xeon (332.8 GF/s peak) against two "
                .. "shared cores here: printed, not checked") or nil)
  end
end
local fastest = {}
for _, r in ipairs(results) do fastest[#fastest + 1] = ("P%d %s"):format(r.p, r.fastest) end
print("\nfastest variant here (measured; the paper: REG NOJAC \"in most cases\", Observation 6): "
      .. table.concat(fastest, ", "))

if P.gpu and not P.quick then
  local g = run(P.gpu, {"reg_nojac"})
  local gtx = {[2] = 366, [3] = 354, [4] = 366, [5] = 372, [6] = 291, [7] = 276}
  for _, r in ipairs(g) do
    if gtx[r.p] then
      P.compare(("P%d: GF/s, reg_nojac on %s"):format(r.p, P.gpu), gtx[r.p], "Table 6, REG NOJAC, GTX 580",
                r.by_variant.reg_nojac.rep.gflops, nil)
    end
  end
end

P.print_comparison("Banas et al.")
P.done()
