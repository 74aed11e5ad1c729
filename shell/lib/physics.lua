-- felab's physics library, written on physics.new and embedded in the binary
-- (scripts/embed.sh). Each law is a pair of pointwise functions f0(u, du, x, a, t) and
-- f1(...) that the tracer differentiates: nothing here writes a Jacobian by hand.
local physics, util = ...
local check_keys = util.options

-- A coefficient as the traced functions see it, c(x, a, t): a number stays a number, a string
-- is a C expression of x[0..2], a function is called with the point x (1-based x[1..dim]) and
-- the time t (the named constant pde:set{t = ...} changes), and a table {region = value}
-- becomes a per-cell constant a[name].
local function coefficient(v, name, regions, where)
  local t = type(v)
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      error(("%s: %s = %s must be a finite number"):format(where, name, tostring(v)), 3)
    end
    return function() return v end
  elseif t == "string" then
    if not v:find("%S") then error(("%s: %s is an empty C expression"):format(where, name), 3) end
    return function() return physics.cexpr(v) end
  elseif t == "function" then
    return function(x, _, time) return v(x, time) end
  elseif t == "table" then
    local n = 0
    for r, val in pairs(v) do
      if type(r) ~= "string" or type(val) ~= "number" then
        error(("%s: %s per region must map region names to numbers, e.g. {heart = 0.4, lung = 0.05}; got %s = %s")
              :format(where, name, type(r), type(val)), 3)
      end
      n = n + 1
    end
    if n == 0 then error(("%s: the %s table names no region"):format(where, name), 3) end
    regions[name] = v
    return function(_, a) return a[name] end
  end
  error(("%s: %s must be a number, a C expression of x[0..2], a function of x or {region = value}, got %s")
        :format(where, name, t), 3)
end

local function describe(v)
  if type(v) == "table" then
    local parts = {}
    for r, val in pairs(v) do parts[#parts + 1] = ("%s = %g"):format(r, val) end
    table.sort(parts)
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

local function regions_or_nil(r) return next(r) and r or nil end

-- -div(kappa grad u) = source
function physics.poisson(o)
  o = check_keys(o, {"kappa", "source"}, "physics.poisson")
  local r = {}
  local kappa = coefficient(o.kappa or 1, "kappa", r, "physics.poisson")
  local source = coefficient(o.source or 0, "source", r, "physics.poisson")
  return physics.new{
    name = "poisson", regions = regions_or_nil(r),
    description = ("-div(kappa grad u) = s, kappa = %s, s = %s"):format(describe(o.kappa or 1), describe(o.source or 0)),
    f0 = function(_, _, x, a, t) return -source(x, a, t) end,
    f1 = function(_, du, x, a) return kappa(x, a) * du end,
  }
end

-- c u - div(kappa grad u) = source
function physics.reaction_diffusion(o)
  o = check_keys(o, {"c", "kappa", "source"}, "physics.reaction_diffusion")
  local r = {}
  local c = coefficient(o.c or 1, "c", r, "physics.reaction_diffusion")
  local kappa = coefficient(o.kappa or 1, "kappa", r, "physics.reaction_diffusion")
  local source = coefficient(o.source or 0, "source", r, "physics.reaction_diffusion")
  return physics.new{
    name = "reaction_diffusion", regions = regions_or_nil(r),
    description = ("c u - div(kappa grad u) = s, c = %s, kappa = %s, s = %s")
                  :format(describe(o.c or 1), describe(o.kappa or 1), describe(o.source or 0)),
    f0 = function(u, _, x, a, t) return c(x, a) * u - source(x, a, t) end,
    f1 = function(_, du, x, a) return kappa(x, a) * du end,
  }
end

-- Steady convection-diffusion: b . grad u - div(kappa grad u) = source, with a constant
-- velocity b = {bx, by, bz} (the first dim entries are used; missing ones are 0). The
-- convection term makes the Jacobian nonsymmetric: solve it with bicg, bicgstab or gmres.
function physics.convection_diffusion(o)
  local where = "physics.convection_diffusion"
  o = check_keys(o, {"kappa", "velocity", "source"}, where)
  local r = {}
  local kappa = coefficient(o.kappa or 1, "kappa", r, where)
  local source = coefficient(o.source or 0, "source", r, where)
  local b = o.velocity or {}
  if type(b) ~= "table" then
    error(("%s: velocity must be a table {bx, by, bz} of numbers, got %s"):format(where, type(b)), 2)
  end
  for i = 1, 3 do
    local bi = b[i]
    if bi ~= nil and (type(bi) ~= "number" or bi ~= bi or bi == math.huge or bi == -math.huge) then
      error(("%s: velocity[%d] must be a finite number, got %s"):format(where, i, tostring(bi)), 2)
    end
  end
  for k in pairs(b) do
    if math.type(k) ~= "integer" or k < 1 or k > 3 then
      error(("%s: velocity must be a list {bx, by, bz}, got the key %s"):format(where, tostring(k)), 2)
    end
  end
  return physics.new{
    name = "convection_diffusion", regions = regions_or_nil(r),
    description = ("b . grad u - div(kappa grad u) = s, b = (%g, %g, %g), kappa = %s, s = %s")
                  :format(b[1] or 0, b[2] or 0, b[3] or 0, describe(o.kappa or 1), describe(o.source or 0)),
    f0 = function(_, du, x, a, t)
      local conv = 0
      for i = 1, #x do
        if (b[i] or 0) ~= 0 then conv = conv + b[i] * du[i] end
      end
      return conv - source(x, a, t)
    end,
    f1 = function(_, du, x, a) return kappa(x, a) * du end,
  }
end

-- Linear elasticity: -div sigma(u) = force, sigma = lambda tr(eps) I + 2 mu eps, eps = sym(grad u).
-- Lamé (lambda, mu) or Young's modulus and Poisson's ratio (E, nu); each may be per region.
function physics.elasticity(o)
  o = check_keys(o, {"E", "nu", "lambda", "mu", "force"}, "physics.elasticity")
  local where, r = "physics.elasticity", {}
  if (o.E or o.nu) and (o.lambda or o.mu) then
    error("physics.elasticity: give either E and nu or lambda and mu, not both", 2)
  end
  local lam, mu
  if o.lambda or o.mu then
    lam = coefficient(o.lambda or 1, "lambda", r, where)
    mu = coefficient(o.mu or 1, "mu", r, where)
  else
    local E, nu = coefficient(o.E or 1, "E", r, where), coefficient(o.nu or 0.3, "nu", r, where)
    lam = function(x, a) local e, n = E(x, a), nu(x, a); return e * n / ((1 + n) * (1 - 2 * n)) end
    mu = function(x, a) return E(x, a) / (2 * (1 + nu(x, a))) end
  end
  local force = o.force
  if force ~= nil and type(force) ~= "table" and type(force) ~= "function" then
    error("physics.elasticity: force must be a table of components or a function of x", 2)
  end
  return physics.new{
    name = "elasticity", components = "dim", regions = regions_or_nil(r),
    description = o.lambda and ("linear elasticity, lambda = %s, mu = %s"):format(describe(o.lambda), describe(o.mu or 1))
                  or ("linear elasticity, E = %s, nu = %s"):format(describe(o.E or 1), describe(o.nu or 0.3)),
    f0 = force and function(_, _, x)
      local f = type(force) == "function" and force(x) or force
      local v = {}
      for i = 1, #x do v[i] = -(f[i] or 0) end
      return v
    end,
    f1 = function(_, du, x, a)
      local eps = physics.sym(du)
      return lam(x, a) * physics.tr(eps) * physics.identity(#x) + 2 * mu(x, a) * eps
    end,
  }
end

-- One backward-Euler step of c du/dt - div(kappa grad u) = source:
--   c (u - u_old) / dt - div(kappa grad u) = source.
-- dt is a named constant and u_old a field: pde:set{u_old = u, dt = 0.01} between steps.
function physics.heat(o)
  o = check_keys(o, {"c", "kappa", "source", "dt", "u_old"}, "physics.heat")
  local where, r = "physics.heat", {}
  if o.u_old == nil then error("physics.heat: u_old (the previous step, a vector of the space) is required", 2) end
  local c = coefficient(o.c or 1, "c", r, where)
  local kappa = coefficient(o.kappa or 1, "kappa", r, where)
  local source = coefficient(o.source or 0, "source", r, where)
  return physics.new{
    name = "heat", regions = regions_or_nil(r),
    description = ("backward Euler: c (u - u_old)/dt - div(kappa grad u) = s, c = %s, kappa = %s, s = %s")
                  :format(describe(o.c or 1), describe(o.kappa or 1), describe(o.source or 0)),
    constants = {dt = o.dt or 0.1}, fields = {u_old = o.u_old},
    f0 = function(u, _, x, a, t) return c(x, a) * (u - a.u_old) / a.dt - source(x, a, t) end,
    f1 = function(_, du, x, a) return kappa(x, a) * du end,
  }
end

-- The regularized p-Laplacian: -div((eps^2 + |grad u|^2)^((p-2)/2) grad u) = source.
function physics.p_laplacian(o)
  o = check_keys(o, {"p", "eps", "source"}, "physics.p_laplacian")
  local p, eps = o.p or 3, o.eps or 0.1
  if type(p) ~= "number" or p < 1 then error("physics.p_laplacian: p must be a number >= 1", 2) end
  if type(eps) ~= "number" then error("physics.p_laplacian: eps must be a number", 2) end
  local r = {}
  local source = coefficient(o.source or 1, "source", r, "physics.p_laplacian")
  return physics.new{
    name = "p_laplacian", regions = regions_or_nil(r),
    description = ("-div((eps^2 + |grad u|^2)^((p-2)/2) grad u) = s, p = %g, eps = %g, s = %s")
                  :format(p, eps, describe(o.source or 1)),
    f0 = function(_, _, x, a, t) return -source(x, a, t) end,
    f1 = function(_, du) return (eps * eps + physics.dot(du, du)) ^ ((p - 2) / 2) * du end,
  }
end
