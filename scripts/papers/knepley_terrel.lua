-- Knepley and Terrel, "Finite Element Integration on GPUs" (TR-11-01)
-- (shared/papers/knepley-terrel-tensor-contraction-element-matrices).
--
-- The paper's central experiment (sections 3-5, Figures 1-3): element matrices of the P1
-- Laplacian and of P1 linear elasticity computed as the contraction of a reference tensor K
-- (the form's, computed once by FFC) with a geometric tensor G per cell (eqs. 6-8, 14-15),
-- several elements per thread block, one kernel template for CPU and GPU. On a GTX 285:
-- "nearly 100GF for the Laplacian, and even a little more for the elasticity operator"
-- (section 5), against "the 12 GFlop range" of highly optimized CPU codes (section 1); the
-- rate is "not very sensitive" to the batch size (Figure 2).
--
-- felab reruns it with A:element_matrices{strategy = "tensor"} on distorted boxes of
-- triangles and tets, for block = 1..128 cells a work group, against the quadrature
-- strategy's matrices. What compares: the counted cost's structure (elasticity's element
-- matrix has dim^2 times the entries, each contracting the same dim^2 terms), felab's cpu
-- rate against the paper's CPU yardstick, the ratio of the two operators' rates, and the
-- spread over the blocking. Where a GPU backend is present the rates are measured there too.
--
-- usage: felab scripts/papers/knepley_terrel.lua [quick] [backend=cpu]
local P = dofile((arg[0]:match("^(.*/)") or "") .. "paper.lua")("knepley_terrel",
  "Knepley and Terrel, element matrices by tensor contraction (sections 3-5, Figures 1-2)")

local cells = {tri = P.size({256, 256}, {24, 24}), tet = P.size({24, 24, 24}, {5, 5, 5})}
local blocks = P.size({1, 2, 4, 8, 16, 32, 64, 128}, {2, 32})
local reps = P.size(4, 2)

-- max over sampled cells of max |K_tensor - K_quadrature| / max |K_quadrature|
local function matrix_diff(Kt, Kq)
  local worst, step = 0, math.max(1, Kt.ncells // 40)
  for c = 1, Kt.ncells, step do
    local a, b, d, s = Kt:get(c), Kq:get(c), 0, 0
    for i = 1, Kt.n do
      for j = 1, Kt.n do
        d, s = math.max(d, math.abs(a[i][j] - b[i][j])), math.max(s, math.abs(b[i][j]))
      end
    end
    worst = math.max(worst, d / s)
  end
  return worst
end

local function run(backend)
  local results, rows = {}, {}
  for _, cell in ipairs{"tri", "tet"} do
    local m = mesh.box{cells = cells[cell], cell = cell, distort = 0.3}
    for _, op in ipairs{"laplacian", "elasticity"} do
      local V = op == "laplacian" and fe.space(m, "P1") or fe.space(m, {family = "P", order = 1, components = m.dim})
      local A = fe.operator(V, op == "laplacian" and physics.poisson{kappa = 1, source = 1}
                                or physics.elasticity{E = 1, nu = 0.3})
      local r = {dim = m.dim, op = op, ncells = m.ncells, by_block = {}}
      local q, Kq = P.best(reps, function() return A:element_matrices{strategy = "quadrature", backend = backend} end)
      for _, b in ipairs(blocks) do
        -- a block whose cells do not fit the device's shared memory is refused, naming the
        -- limit (cuda at 128 cells of P1 elasticity): left out of the table, said
        local ok, rep, Kt = pcall(P.best, reps, function()
          return A:element_matrices{strategy = "tensor", block = b, backend = backend}
        end)
        if not ok and not tostring(rep):find("shared memory", 1, true) then error(rep, 0) end
        if ok then
          r.by_block[#r.by_block + 1] = {block = b, rep = rep}
          if not r.best or rep.gflops > r.best.gflops then r.best, r.K = rep, Kt end
          rows[#rows + 1] = {m.dim .. "D", op, "tensor", b, Kt.n, rep.flops / m.ncells, rep.gflops, rep.seconds * 1e3}
        else
          print(("%dD %s, block %d on %s: left out (%s)"):format(m.dim, op, b, backend, tostring(rep)))
        end
      end
      rows[#rows + 1] = {m.dim .. "D", op, "quadrature", "-", Kq.n, q.flops / m.ncells, q.gflops, q.seconds * 1e3}
      r.quadrature, r.diff = q, matrix_diff(r.K:to("cpu"), Kq:to("cpu"))
      results[#results + 1] = r
    end
  end
  print(("\nelement matrices on %s, double (best of %d calls each):"):format(backend, reps))
  P.table({"dim", "operator", "strategy", "block", "K.n", "flop/cell", "GF/s", "ms"},
          {"%s", "%s", "%s", "%d", "%d", "%.0f", "%.3g", "%.3g"}, rows)
  return results
end

local results = run(P.backend)
local function find(dim, op)
  for _, r in ipairs(results) do if r.dim == dim and r.op == op then return r end end
end

for _, r in ipairs(results) do
  P.check(r.diff < 1e-12, "%dD %s: the contracted matrices equal the quadrature's (%.1e < 1e-12)", r.dim, r.op, r.diff)
  local same = true
  for _, b in ipairs(r.by_block) do same = same and b.rep.flops == r.by_block[1].rep.flops end
  P.check(same, "%dD %s: every block counts the same flops (%.0f a cell)", r.dim, r.op,
          r.by_block[1].rep.flops / r.ncells)
end
-- eqs. 6-8 and 14-15: G is the same dim x dim tensor for both operators, and elasticity's
-- element matrix has (dim nb)^2 entries for the Laplacian's nb^2: dim^2 times the contractions
for _, dim in ipairs{2, 3} do
  local l, e = find(dim, "laplacian"), find(dim, "elasticity")
  local ratio = (e.best.flops / e.ncells) / (l.best.flops / l.ncells)
  P.check(math.abs(ratio / dim ^ 2 - 1) < 0.25, "%dD: elasticity counts %.2f times the Laplacian's flops a cell, "
          .. "within 25%% of dim^2 = %d (the same G, dim^2 times the entries)", dim, ratio, dim ^ 2)
  P.compare(("%dD: flop/cell elasticity/Laplacian"):format(dim), dim ^ 2, "eqs. 6-8, 14-15: (dim nb)^2 / nb^2",
            ratio, dim == 2 and "felab's count includes making G per cell from probes of the physics" or nil)
end
for _, dim in ipairs{2, 3} do
  local l, e = find(dim, "laplacian"), find(dim, "elasticity")
  P.compare(("%dD: GF/s elasticity/Laplacian"):format(dim), 1, "section 5: elasticity \"a little more\"",
            e.best.gflops / l.best.gflops, dim == 2 and "measured, best block of each; timing on a shared "
              .. "machine, not checked" or nil)
end
local l3 = find(3, "laplacian")
local lo, hi = math.huge, 0
for _, b in ipairs(l3.by_block) do lo, hi = math.min(lo, b.rep.gflops), math.max(hi, b.rep.gflops) end
P.compare("3D Laplacian: best/worst GF/s over blocks", "small", "Figure 2: \"not very sensitive\"", hi / lo,
          ("felab's block (cells a work group) %s, the paper's batch sizes; not checked"):format(table.concat(blocks, ", ")))
P.compare("3D Laplacian: tensor GF/s on " .. P.backend, 12, "section 1: CPU codes \"in the 12 GFlop range\"",
          l3.best.gflops, "the paper's yardstick for optimized CPU element integration, against two shared cores here")
P.compare("3D Laplacian: tensor time / quadrature time", "-", "(felab's own comparison)",
          l3.best.seconds / l3.quadrature.seconds, "felab's quadrature variant reg_nojac; the paper has no quadrature kernel")
if P.gpu and not P.quick then
  local g = run(P.gpu)
  for _, r in ipairs(g) do
    if r.dim == 3 then
      P.compare(("3D %s: tensor GF/s on %s"):format(r.op, P.gpu), 100,
                "section 5, Figure 1 (GTX 285): nearly 100 GF", r.best.gflops, nil)
    end
  end
end

P.print_comparison("Knepley and Terrel")
P.done()
