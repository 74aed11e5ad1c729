-- Benchmark (not a test): the Knepley-Terrel comparison. Element matrices of the Laplacian
-- and of linear elasticity on P1..P3 tets by strategy "tensor" (geometry tensor contracted
-- with a reference tensor) and by "quadrature" (variant reg_nojac), over the cells per work
-- group. Each kernel is timed at its best of a few calls; the table gives milliseconds,
-- cells per microsecond (the comparable figure: the two count different flops), and each
-- strategy's own GF/s against the calibrated FMA rate.
-- usage: felab scripts/bench/tensor.lua [backend] [cells per side] [precision] [blocks]
local backend, n, prec = arg[1] or "cuda", tonumber(arg[2]) or 48, arg[3] or "double"
local blocks = {}
for b in (arg[4] or "1,2,4,8,16,32,64,128"):gmatch("%d+") do blocks[#blocks + 1] = tonumber(b) end
local cal = device.calibrate(backend, prec)
local m = mesh.box{cells = {n, n, n}, cell = "tet"}
print(("%s %s, %d tets; calibrated FMA %.0f GF/s"):format(backend, prec, m.ncells, cal.peak_gflops))
local function best(A, o)
  local ok, err = pcall(A.element_matrices, A, o) -- compile and set up
  if not ok then return nil, err end
  local r
  for _ = 1, 3 do
    local K, rep = A:element_matrices(o)
    if not r or rep.seconds < r.seconds then r = rep end
    K = nil
    collectgarbage()
  end
  return r
end
print(("%-10s %-3s %-10s %6s %10s %10s %8s %7s"):format("physics", "p", "strategy", "block",
      "ms", "cells/us", "GF/s", "% FMA"))
for _, ph in ipairs({"laplacian", "elasticity"}) do
  for p = 1, 3 do
    local V = fe.space(m, {family = "P", order = p, components = ph == "elasticity" and 3 or 1})
    local pde = ph == "laplacian" and physics.poisson{kappa = 1, source = 0}
                or physics.elasticity{E = 10, nu = 0.3}
    local A = fe.operator(V, pde)
    for _, st in ipairs({"quadrature", "tensor"}) do
      for _, b in ipairs(blocks) do
        local r, err = best(A, {backend = backend, precision = prec, strategy = st, block = b})
        if r then
          print(("%-10s P%-2d %-10s %6d %10.3f %10.1f %8.0f %7.1f"):format(ph, p, st, b,
                r.seconds * 1e3, m.ncells / r.seconds * 1e-6, r.gflops,
                100 * r.gflops / cal.peak_gflops))
        else
          print(("%-10s P%-2d %-10s %6d refused: %s"):format(ph, p, st, b, tostring(err):sub(1, 90)))
        end
      end
    end
    A = nil
    collectgarbage()
  end
end
