-- Physics that reads x with strategy sumfact on a distorted box (issue 43): the residual of
-- poisson with kappa(x) and source(x), and the residual and Jacobian action of a nonlinear
-- law of u and x; ms, best of 7. felab scripts/bench/physics_x.lua [backend] [scale]
-- (scale 1: Q3 20^3 and Q2 30^3, 227k dofs; 2.2 on the GPU: 2.35M).
local BE = arg[1] or "cpu"
local S = tonumber(arg[2] or "1")
for _, c in ipairs{{"Q3", math.floor(20 * S)}, {"Q2", math.floor(30 * S)}} do
  local m = mesh.box{cells = c[2], cell = "hex", distort = 0.1}
  local V = fe.space(m, c[1])
  local pde = physics.poisson{kappa = "1 + 0.5 * x[0]", source = "x[1]"}
  local A = fe.operator(V, pde, {dirichlet = "all"})
  local nl = fe.operator(V, physics.new{f0 = function(u, du, x) return x[2] * u end,
                                        f1 = function(u, du, x) return du * (1 + u * u + x[1]) end})
  local u = V:interpolate(function(x) return x[1] * x[2] end)
  local function best(f)
    local b = 1e9
    for i = 1, 7 do local _, rep = f(); b = math.min(b, rep.seconds) end
    return b * 1e3
  end
  print(("%s %d dofs  residual poisson kx %.2f ms  nonlinear residual %.2f ms  apply %.2f ms"):format(
    c[1], V.ndofs, best(function() return A:residual(u, {strategy = "sumfact", backend = BE}) end),
    best(function() return nl:residual(u, {strategy = "sumfact", backend = BE}) end),
    best(function() return nl:apply(u, {strategy = "sumfact", at = u, backend = BE}) end)))
end
