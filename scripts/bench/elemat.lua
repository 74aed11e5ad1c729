-- Benchmark (not a test): element matrices of the Jacobian for p = 1..7 on tets and hexes,
-- strategy "quadrature" in its five variants (Banas et al.: reg_nojac, reg_jac, shm_nojac,
-- shm_jac; and gemm, K = B^T D B as a batched small GEMM) and strategy "tensor" where it applies (else its refusal). Per case: the
-- kernel's best time of `reps` calls (the first compiles and builds), GF/s by the counted
-- flops (rep.flops / rep.seconds), the share of the backend's FMA ceiling in that precision
-- (rep.peak_gflops: calibrated, or the device table's), and the shape that ran (rep.why).
-- Meshes: n^3 cubes (tets: 6 per cube), n shrunk per order so that the matrices stay within
-- the memory budget.
-- usage: felab scripts/bench/elemat.lua [backend] [precision] [n tets] [n hexes]
--          [orders, e.g. 1-7 or 2,4] [physics: poisson | elasticity] [budget MB] [reps]
--          [variants, e.g. gemm,reg_jac (default: all five, then tensor)]
local backend = arg[1] or "cuda"
local prec = arg[2] or "double"
local n_tet, n_hex = tonumber(arg[3]) or 24, tonumber(arg[4]) or 32
local orders = {}
local lo, hi = (arg[5] or "1-7"):match("^(%d+)-(%d+)$")
if lo then
  for p = tonumber(lo), tonumber(hi) do orders[#orders + 1] = p end
else
  for p in (arg[5] or ""):gmatch("%d+") do orders[#orders + 1] = tonumber(p) end
end
local which = arg[6] or "poisson"
local budget = (tonumber(arg[7]) or 2048) * 2^20
local reps = tonumber(arg[8]) or 5
local variants = {"reg_nojac", "reg_jac", "shm_nojac", "shm_jac", "gemm"}
if arg[9] then
  variants = {}
  for v in arg[9]:gmatch("[%w_]+") do variants[#variants + 1] = v end
end
local word = prec == "double" and 8 or 4

local cal = device.calibrate(backend, prec)
print(("%s %s: calibrated FMA %.0f GF/s, copy %.0f GB/s (%s)"):format(backend, prec,
      cal.peak_gflops, cal.peak_gbytes, cal.device))
print(("%-4s %-2s %5s %8s %-10s %9s %9s %7s %6s  %s"):format("cell", "p", "N", "cells",
      "variant", "ms", "GF/s", "%FMA", "p/m", "shape"))

-- best of reps calls of A:element_matrices(o) (after one that compiles); nil and the error
-- when it is refused
local function best(A, o)
  local ok, K, rep = pcall(A.element_matrices, A, o)
  if not ok then return nil, K end
  K = nil
  collectgarbage()
  local b = rep
  for _ = 1, reps do
    K, rep = A:element_matrices(o)
    K = nil
    collectgarbage()
    if rep.seconds < b.seconds then b = rep end
  end
  return b
end

for _, cell in ipairs({"tet", "hex"}) do
  for _, p in ipairs(orders) do
    local ncomp = which == "elasticity" and 3 or 1
    local nb = cell == "tet" and (p + 1) * (p + 2) * (p + 3) // 6 or (p + 1)^3
    local per_cube = cell == "tet" and 6 or 1
    local nmax = cell == "tet" and n_tet or n_hex
    local fit = math.floor((budget / (per_cube * (nb * ncomp)^2 * word))^(1 / 3))
    local n = math.max(1, math.min(nmax, fit))
    local m = mesh.box{cells = {n, n, n}, cell = cell}
    local V = fe.space(m, {family = cell == "tet" and "P" or "Q", order = p, components = ncomp})
    local pde = which == "elasticity" and physics.elasticity{E = 10, nu = 0.3}
                or physics.poisson{kappa = 1, source = 1}
    local A = fe.operator(V, pde)
    local runs = {}
    for _, v in ipairs(variants) do
      runs[#runs + 1] = {v, {backend = backend, precision = prec, variant = v}}
    end
    runs[#runs + 1] = {"tensor", {backend = backend, precision = prec, strategy = "tensor"}}
    for _, r in ipairs(runs) do
      local rep, err = best(A, r[2])
      if not rep then
        print(("%-4s %-2d %5d %8d %-10s refused: %s"):format(cell, p, nb * ncomp, m.ncells, r[1],
              tostring(err):gsub("\n.*", "")))
      else
        local gf = rep.flops / rep.seconds / 1e9
        local peak = rep.peak_gflops > 0 and rep.peak_gflops or cal.peak_gflops
        print(("%-4s %-2d %5d %8d %-10s %9.3f %9.1f %6.1f%% %6.2f  %s"):format(cell, p,
              nb * ncomp, m.ncells, r[1], rep.seconds * 1e3, gf, 100 * gf / peak,
              rep.predicted_seconds / rep.seconds, rep.why))
      end
    end
    A, V, m = nil, nil, nil
    collectgarbage()
  end
end
