-- Benchmark (not a test), issue 43: is the default strategy within 10% of the fastest on the
-- users' cases? For each case of scripts/bench/users.lua's matrix (the uniform box with kappa
-- 1, the distorted box with kappa = 1 + 0.5 x, kappa(u), the Gmsh meshes; fp64 and two fp32),
-- the apply with no strategy named (the default, autotuned from 200k dofs) and with every
-- strategy A:strategies() lists, each the best of `tries` applies in each of `rounds` rounds
-- (the strategies alternated within a round; a strategy's time the best of its rounds).
--   felab scripts/bench/defaults.lua [backend] [meshes folder] [scale] [rounds] [tries]
--                                          (cpu; .peers/matrix-meshes; 1/3; 3; 5)
local be = arg and arg[1] or "cpu"
local meshes = arg and arg[2] or ".peers/matrix-meshes"
local scale = tonumber(arg and arg[3] or "") or 1 / 3
local rounds = math.max(1, math.floor(tonumber(arg and arg[4] or "") or 3))
local tries = math.max(1, math.floor(tonumber(arg and arg[5] or "") or 5))
local M = dofile((arg and arg[0] and arg[0]:match("^(.*/)") or "scripts/bench/") .. "users_matrix.lua")
local rows, within, counted = {}, 0, 0

local function best_of(A, v, o)
  local b = math.huge
  for _ = 1, tries do
    local _, rep = A:apply(v, o)
    b = math.min(b, rep.seconds)
  end
  return b
end

local function case(sp, n, distort, kappa, label, quad, prec)
  local m, why = M.mesh(sp, n, distort, scale)
  if not m then print(("%-3s %-15s skipped: %s"):format(sp, label, why)); return end
  local V = fe.space(m, sp)
  local pde = kappa == "u" and physics.p_laplacian{p = 3, source = 1}
              or physics.poisson{kappa = kappa, source = 1}
  local A = fe.operator(V, pde, {dirichlet = "all", quadrature = quad})
  local v = V:interpolate(1)
  local base = {backend = be, precision = prec}
  if kappa == "u" then
    base.at = V:interpolate(function(x) return x[1] * x[2] + 0.3 * x[3] end):to(be, prec)
  end
  local _, first = A:apply(v, base) -- the default's choice (and its autotune, where it runs)
  local names = A:strategies({backend = be, precision = prec})
  local t = {}
  for _ = 1, rounds do
    for _, s in ipairs(names) do
      local o = {strategy = s}
      for k, x in pairs(base) do o[k] = x end
      A:apply(v, o) -- its setup apart
      t[s] = math.min(t[s] or math.huge, best_of(A, v, o))
    end
  end
  local fastest, ft = nil, math.huge
  for s, x in pairs(t) do if x < ft then fastest, ft = s, x end end
  local dt = t[first.strategy] or best_of(A, v, base)
  local ok = dt <= 1.10 * ft
  counted = counted + 1
  within = within + (ok and 1 or 0)
  local all = {}
  for _, s in ipairs(names) do all[#all + 1] = ("%s %.3f"):format(s, t[s] * 1e3) end
  local line = ("%-3s %7d %-14s %-5s %-6s default %-9s %.3f ms, fastest %-9s %.3f ms: %.2fx %s | %s")
               :format(sp, V.ndofs, label, quad and "gll" or "gauss", prec or "double",
                       first.strategy, dt * 1e3, fastest, ft * 1e3, dt / ft,
                       ok and "within 10%" or "NOT within 10%", table.concat(all, ", "))
  print(line)
  io.stdout:flush()
  rows[#rows + 1] = line
  collectgarbage()
end

M.run(case, meshes, rows)
print(("the default within 10%% of the fastest in %d of %d cases"):format(within, counted))
