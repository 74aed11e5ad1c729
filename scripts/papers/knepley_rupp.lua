-- Knepley, Rupp and Terrel, "Finite Element Integration with Quadrature on the GPU"
-- (shared/papers/knepley-rupp-terrel-quadrature-thread-transposition).
--
-- The paper's central experiment (section 6, Table 2, Figures 4-5): the residual of P1
-- Poisson with a variable coefficient (an auxiliary P1 field) and of P1 linear elasticity on
-- unstructured simplex meshes of the unit square and cube, integrated by thread
-- transposition (quadrature phase, then basis phase through shared memory), in single and
-- double, for several cell-block sizes. On the GTX 580: about 300 GF/s (2D) and 400 GF/s (3D)
-- for Poisson in single, 120 and 150 in double; elasticity 220 / 70 (2D single / double) and
-- 180 / 60 (3D); the rate depends only mildly on the blocking (Table 2); the kernel is bound
-- by memory bandwidth (section 3.3), and the vector basis lowers the flop-to-byte balance
-- "roughly two-fold" (section 6), which is why elasticity runs slower.
--
-- felab reruns it with strategy transpose (the same two phases) on distorted boxes (cells
-- not congruent, as on an unstructured mesh), for block = 8..64 cells a work group. What
-- compares on a cpu: the counted balance of elasticity against Poisson, the spread of the
-- rate over the blocking, the ratio of the two physics' rates, and the fraction of the
-- calibrated bandwidth reached; the GF/s themselves are a GTX 580's against two shared cpu
-- cores (printed, not compared). Where a GPU backend is present the sweep runs there too.
--
-- usage: felab scripts/papers/knepley_rupp.lua [quick] [backend=cpu]
local P = dofile((arg[0]:match("^(.*/)") or "") .. "paper.lua")("knepley_rupp",
  "Knepley, Rupp and Terrel, quadrature with thread transposition (Table 2, Figures 4-5)")

local cells = {tri = P.size({512, 512}, {48, 48}), tet = P.size({40, 40, 40}, {8, 8, 8})}
local blocks = P.size({8, 16, 32, 64}, {8, 32})
local precisions = {"double", "single"}
local reps = P.size(4, 2)
-- the paper's GF/s on the GTX 580 (abstract and section 6): [dim][physics][precision]
local paper_rate = {[2] = {poisson = {single = 300, double = 120}, elasticity = {single = 220, double = 70}},
                    [3] = {poisson = {single = 400, double = 150}, elasticity = {single = 180, double = 60}}}
local calibration = device.info(P.backend).calibration

local function run(backend)
  local results, rows = {}, {}
  for _, cell in ipairs{"tri", "tet"} do
    local m = mesh.box{cells = cells[cell], cell = cell, distort = 0.3}
    local k = fe.space(m, "P1"):interpolate(function(x) return 1 + x[1] * x[2] end)
    for _, phys in ipairs{"poisson", "elasticity"} do
      local V, pde
      if phys == "poisson" then
        -- the paper's f1 = kappa grad u with kappa an auxiliary P1 field; f0 = 0
        V = fe.space(m, "P1")
        pde = physics.new{f1 = function(_, du, _, a) return a.k * du end, fields = {k = k}}
      else
        V = fe.space(m, {family = "P", order = 1, components = m.dim})
        pde = physics.elasticity{E = 1, nu = 0.3}
      end
      local A = fe.operator(V, pde)
      -- values that look random from node to node, so that K u is not a small difference
      -- of large terms (as for a smooth u on a fine mesh) and the comparison below is sharp
      local u = V:interpolate(function(x) return math.sin(12345.678 * (x[1] + 2.1 * x[2] + 3.3 * (x[3] or 0))) end)
      for _, prec in ipairs(precisions) do
        local up = u:to(backend, prec)
        local r = {dim = m.dim, phys = phys, prec = prec, ncells = m.ncells, by_block = {}}
        -- the residual of f1 alone is the Jacobian's action: the assembled matrix's product
        local ycsr = A:apply(up, {backend = backend, precision = prec, strategy = "csr"})
        for _, b in ipairs(blocks) do
          local rep, res = P.best(reps, function()
            return A:residual(up, {backend = backend, precision = prec, strategy = "transpose", block = b})
          end)
          local diff = res:copy():axpy(-1, ycsr):norm() / ycsr:norm()
          r.by_block[#r.by_block + 1] = {block = b, rep = rep, diff = diff}
          if not r.best or rep.gflops > r.best.gflops then r.best = rep end
          rows[#rows + 1] = {m.dim .. "D", phys, prec, b, rep.flops / m.ncells, rep.bytes / m.ncells,
                             rep.flops / rep.bytes, rep.gflops, rep.gbytes, rep.predicted_seconds / rep.seconds, diff}
        end
        results[#results + 1] = r
      end
    end
  end
  print(("\nthe residual by thread transposition on %s (best of %d calls each):"):format(backend, reps))
  P.table({"dim", "physics", "precision", "block", "flop/cell", "byte/cell", "flop/byte", "GF/s", "GB/s",
           "pred/meas", "|r - K u|/|K u|"},
          {"%s", "%s", "%s", "%d", "%.1f", "%.2f", "%.2f", "%.3g", "%.3g", "%.2f", "%.1e"}, rows)
  return results
end

local results = run(P.backend)
local function find(dim, phys, prec)
  for _, r in ipairs(results) do
    if r.dim == dim and r.phys == phys and r.prec == prec then return r end
  end
end

-- checks: the same residual as the assembled matrix's product; the blocking moves work
-- between threads but not the amount of it, and loads the tables once per block
for _, r in ipairs(results) do
  local tol = r.prec == "double" and 1e-12 or 1e-5
  local worst, f0, same, fewer = 0, r.by_block[1].rep.flops, true, true
  for i, b in ipairs(r.by_block) do
    worst = math.max(worst, b.diff)
    same = same and b.rep.flops == f0
    fewer = fewer and (i == 1 or b.rep.bytes <= r.by_block[i - 1].rep.bytes)
  end
  P.check(worst < tol, "%dD %s %s: the transposed residual equals the assembled K u (%.1e < %g)",
          r.dim, r.phys, r.prec, worst, tol)
  P.check(same and fewer, "%dD %s %s: every block counts the same flops (%.0f a cell), and bytes do not grow with it",
          r.dim, r.phys, r.prec, f0 / r.ncells)
end

-- the bound (section 3.3): the counted flop/byte of each residual in single against the
-- GTX 580's ridge, 1581 GF/s over 192 GB/s (Table 1): below it, the kernel waits on memory there
local ridge = 1581 / 192
for _, r in ipairs(results) do
  if r.prec == "single" then
    local bal = r.best.flops / r.best.bytes
    P.check(bal < ridge, "%dD %s single: %.2f flop/byte, below the GTX 580's ridge %.2f: memory-bound there, "
            .. "as the paper finds", r.dim, r.phys, bal, ridge)
  end
end
-- the balance: elasticity's flop/byte against Poisson's, counted (section 6: "roughly two-fold" lower)
for _, dim in ipairs{2, 3} do
  for _, prec in ipairs(precisions) do
    local p, e = find(dim, "poisson", prec).best, find(dim, "elasticity", prec).best
    local bal = (e.flops / e.bytes) / (p.flops / p.bytes)
    P.compare(("%dD %s: balance elasticity/Poisson"):format(dim, prec), 0.5, "section 6 (\"roughly two-fold\")",
              bal, dim == 2 and prec == "double" and ("counted flops over counted minimal bytes; felab reads a "
                .. "vertex's values once and folds the geometry, the paper moves each cell's coefficients and "
                .. "Jacobian: the balances differ, not checked") or nil)
  end
end
-- the rates: elasticity over Poisson, and the spread over the blocking (measured)
for _, dim in ipairs{2, 3} do
  for _, prec in ipairs(precisions) do
    local p, e = find(dim, "poisson", prec).best, find(dim, "elasticity", prec).best
    local pr = paper_rate[dim]
    P.compare(("%dD %s: GF/s elasticity/Poisson"):format(dim, prec), pr.elasticity[prec] / pr.poisson[prec],
              ("abstract: %d / %d GF/s"):format(pr.elasticity[prec], pr.poisson[prec]), e.gflops / p.gflops,
              dim == 2 and prec == "double" and ("measured, best block of each; timing on a shared machine, "
                .. "not checked") or nil)
  end
end
for _, prec in ipairs(precisions) do
  local r = find(2, "poisson", prec)
  local lo, hi = math.huge, 0
  for _, b in ipairs(r.by_block) do lo, hi = math.min(lo, b.rep.gflops), math.max(hi, b.rep.gflops) end
  P.compare(("2D Poisson %s: best/worst GF/s over blocks"):format(prec), prec == "single" and 209 / 154 or 102 / 70,
            prec == "single" and "Table 2, single: 209 / 154" or "Table 2, double: 102 / 70", hi / lo,
            prec == "single" and ("felab's block (cells a work group) %s against the paper's blocks per batch "
              .. "16-36 and batches 4-16"):format(table.concat(blocks, ", ")) or nil)
end
local best = find(2, "poisson", "single").best
local bw = calibration and calibration.single and calibration.single.gbytes
if bw then
  P.compare("2D Poisson single: GB/s / device bandwidth", 0.9, "abstract, section 6: 90% of STREAM",
            best.gbytes / bw, ("counted minimal bytes over the time, against this %s's calibrated %.1f GB/s"):format(
              P.backend, bw))
end
P.compare("2D Poisson single: GF/s", 300, "abstract (GTX 580)", best.gflops,
          "a GTX 580 (1581 GF/s, 192 GB/s peak) against " .. P.backend .. ": not comparable, printed for scale")
P.compare("predicted / measured time", 1, "section 1: \"within 10%\"", best.predicted_seconds / best.seconds,
          "felab's model for this call; on a loaded 2-core cpu the measurement wanders: not checked")

if P.gpu and not P.quick then
  local g = run(P.gpu)
  for _, r in ipairs(g) do
    if r.dim == 2 and r.phys == "poisson" then
      P.compare(("2D Poisson %s on %s: GF/s"):format(r.prec, P.gpu), paper_rate[2].poisson[r.prec],
                "abstract (GTX 580)", r.best.gflops, nil)
    end
  end
end

P.print_comparison("Knepley, Rupp and Terrel")
P.done()
