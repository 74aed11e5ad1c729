-- The heat run of Remacle, Gandham and Warburton (section 6.2, Table 4): 70 backward-Euler
-- steps of a heat equation with a moving volume source, on spectral hexes, in single
-- precision, with one operator and one preconditioner for every step (solve.heat).
--
-- The paper's model problem is c u - div(kappa grad u) = r with c = 1/dt and
-- r = u_old/dt + Q/(rho c_p): that is one backward-Euler step of
--     du/dt - div(kappa grad u) = Q/(rho c_p),   kappa = 1e-2, dt = 0.04,
-- Q = 1000 (W/m^3 here: a density), rho = 7000, c_p = 0.8. The paper's rod mesh (its Figure 4,
-- 62540 hexes) is not available: this runs on a box rod [0, 1] x [0, 0.2] x [0, 0.2] of
-- 5n x n x n hexes, its ends held at u = 0 and its sides insulated. The source is a Gaussian
-- of radius 0.05 whose center moves along the rod's axis from x = 0.1 to x = 0.9 over the
-- 70 steps (t = 0 .. 2.8 s).
--
-- usage: felab scripts/remacle_heat.lua [key=value ...]
--   orders=2,3   spectral orders (one row of the table each)    cells=4  n: 5n x n x n hexes
--   backend=cpu  pc=jacobi (or chebyshev, twoscale, amg)       precision=single
--   steps=70     frames=FOLDER (FOLDER/u_qN_0000.vtu every `every` steps, FOLDER/u_qN.pvd)  every=5
local o = {orders = "2,3", cells = "4", backend = "cpu", pc = "jacobi", precision = "single",
           steps = "70", every = "5"}
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if not k or o[k] == nil and k ~= "frames" then
    error(("remacle_heat: unknown argument '%s' (orders=, cells=, backend=, pc=, precision=, "
           .. "steps=, frames=, every=)"):format(a), 0)
  end
  o[k] = v
end
local n, steps, every = tonumber(o.cells), tonumber(o.steps), tonumber(o.every)
assert(n and n >= 1 and steps and steps >= 1 and every and every >= 1,
       "remacle_heat: cells, steps and every must be integers >= 1")

local kappa, dt = 1e-2, 0.04
local q = 1000 / (7000 * 0.8) -- Q / (rho c_p)
local radius, x_start, x_end, tend = 0.05, 0.1, 0.9, 70 * 0.04

-- the source's center at time t: along the axis at constant speed
local speed = (x_end - x_start) / tend
local function source(x, t)
  local r2 = (x[1] - (x_start + speed * t)) ^ 2 + (x[2] - 0.1) ^ 2 + (x[3] - 0.1) ^ 2
  return q * math.exp(-r2 / (radius * radius))
end

print(("heat run (Remacle et al. 6.2): kappa = %g, dt = %g, Q/(rho c_p) = %.4g, %d steps, %s on %s, pc %s")
      :format(kappa, dt, q, steps, o.precision, o.backend, o.pc))
local rows = {}
for order in o.orders:gmatch("%d+") do
  order = tonumber(order)
  local m = mesh.box{cells = {5 * n, n, n}, cell = "hex", upper = {1, 0.2, 0.2}}
  local V = fe.space(m, "Q" .. order)
  local u0 = V:interpolate(0)
  -- physics.heat with a source that moves: its t is the time the step ends at (solve.heat sets it)
  local pde = physics.new{
    name = "heat", description = "du/dt - div(kappa grad u) = Q(x, t)/(rho c_p), backward Euler",
    constants = {dt = dt}, fields = {u_old = u0},
    f0 = function(u, _, x, a, t) return (u - a.u_old) / a.dt - source(x, t) end,
    f1 = function(_, du) return kappa * du end,
  }
  local A = fe.operator(V, pde, {dirichlet = {"xmin", "xmax"}, value = 0})
  local frames = o.frames
  local u, info = solve.heat(A, u0, {steps = steps, pc = o.pc, rtol = 1e-6, maxit = 5000,
                                     backend = o.backend, precision = o.precision,
                                     out = frames, every = frames and every or nil,
                                     name = frames and "u_q" .. order or nil})
  local its = {}
  for k = 1, info.steps do its[k] = info.iterations[k] end
  print(("Q%d, %d dofs: CG iterations per step: %s"):format(order, V.ndofs, table.concat(its, " ")))
  local _, rep = A:apply(u, {backend = o.backend, precision = o.precision})
  rows[#rows + 1] = {order = order, ndofs = V.ndofs, steps = info.steps, its = info.total_iterations,
                     wall = info.wall_seconds, cg = info.seconds, setup = info.setup_seconds,
                     gflops = info.gflops, apply = rep.gflops, strategy = rep.strategy,
                     umax = u:max(), x = info.t}
  if frames then print(("  frames: %s (%d)"):format(info.pvd, info.frames)) end
end

print(("\nTable 4 in form (%s, %s, pc %s; seconds of CG apart from the preconditioner's setup):")
      :format(o.backend, o.precision, o.pc))
print(("%-6s %10s %6s %10s %10s %10s %10s %10s %10s %12s")
      :format("order", "N", "steps", "CG its", "wall s", "CG s", "setup s", "CG GF/s", "apply GF/s", "max u"))
for _, r in ipairs(rows) do
  print(("Q%-5d %10d %6d %10d %10.3f %10.3f %10.3f %10.2f %10.2f %12.5g")
        :format(r.order, r.ndofs, r.steps, r.its, r.wall, r.cg, r.setup, r.gflops, r.apply, r.umax))
end
print(("(apply: one Jacobian action with strategy %s, the paper's r' kernel; the paper's GTX 980 "
       .. "took 13.4 s at n = 2 for 5.3e5 dofs)"):format(rows[#rows] and rows[#rows].strategy or "?"))
