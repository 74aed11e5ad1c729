-- felab's time stepping, written on solve.cg and embedded in the binary (scripts/embed.sh),
-- with the two helpers it needs: export.pvd (a ParaView series index) and fe.integral.
--
-- Backward Euler for c du/dt - div(kappa grad u) = s turns every step into one linear
-- problem in u: c (u - u_old)/dt - div(kappa grad u) = s, whose operator J = c M/dt + K
-- does not change from step to step; only the right-hand side (u_old, and s(t)) does.
-- So solve.heat takes ONE operator A (made by the user from physics.heat) and ONE
-- preconditioner P for J, set up once, and runs per step
--     t_k = t0 + k dt,  pde:set{t = t_k, u_old = u_{k-1}},  u_k = CG(A, x0 = u_{k-1}, pc = P)
-- (solve.cg without b solves residual(u) = 0, the whole step). Starting CG from the last
-- step makes each solve cheap: u changes by O(dt) per step.
local solve, export, fe, physics, perf, util = ...
local kind, check_keys = util.kind, util.options

-- opts[key] as an integer >= lo (default when absent).
local function opt_integer(o, key, lo, default, where)
  local v = o[key]
  if v == nil then return default end
  local i = math.type(v) and math.tointeger(v)
  if not i or i < lo then
    error(("%s: %s must be an integer >= %d, got %s"):format(where, key, lo, tostring(v)), 3)
  end
  return i
end

-- opts[key] as a finite number > 0 (nil when absent).
local function opt_positive(o, key, where)
  local v = o[key]
  if v == nil then return nil end
  if type(v) ~= "number" or not (v > 0) or v == math.huge then
    error(("%s: %s must be a finite number > 0, got %s"):format(where, key, tostring(v)), 3)
  end
  return v
end

---------------------------------------------------------------------------------------------
-- export.pvd(path, frames): the ParaView collection that opens the frames as one series.

local function xml_escape(s)
  return (s:gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;"}))
end

-- frames: a list of {file = "u_0001.vtu", time = 0.04} (or {"u_0001.vtu", 0.04}), file names
-- relative to the .pvd's folder. Written to a temporary file and renamed, so that an
-- interrupted write leaves the previous index whole.
function export.pvd(path, frames)
  if type(path) ~= "string" or path == "" then
    error(("export.pvd: expected a file path as argument 1, got %s"):format(kind(path)), 2)
  end
  if type(frames) ~= "table" then
    error(("export.pvd: argument 2 must be a list of frames {file = ..., time = ...}, got %s"):format(kind(frames)), 2)
  end
  local lines = {'<?xml version="1.0"?>',
                 '<VTKFile type="Collection" version="0.1" byte_order="LittleEndian">', '  <Collection>'}
  for i, f in ipairs(frames) do
    local file = type(f) == "table" and (f.file or f[1])
    local time = type(f) == "table" and (f.time or f[2])
    if type(file) ~= "string" or file == "" then
      error(("export.pvd: frame %d needs a file name (file = \"u_0001.vtu\"), got %s"):format(i, kind(file)), 2)
    end
    if type(time) ~= "number" or time ~= time or math.abs(time) == math.huge then
      error(("export.pvd: frame %d (%s) needs a finite time, got %s"):format(i, file, tostring(time)), 2)
    end
    lines[#lines + 1] = ('    <DataSet timestep="%.12g" group="" part="0" file="%s"/>'):format(time, xml_escape(file))
  end
  lines[#lines + 1] = "  </Collection>"
  lines[#lines + 1] = "</VTKFile>"
  local tmp = path .. ".tmp"
  local f, msg = io.open(tmp, "w")
  if not f then error(("export.pvd: cannot write '%s': %s"):format(path, msg), 2) end
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local ok, err = os.rename(tmp, path)
  if not ok then error(("export.pvd: cannot write '%s': %s"):format(path, err), 2) end
  return path
end

---------------------------------------------------------------------------------------------
-- fe.integral(u): the integral over the mesh of the finite-element function u = sum_j u_j phi_j,
--   int u dx = sum_j u_j int phi_j dx = w . u,   w_i = int phi_i dx,
-- w the residual of the physics f0 = 1 (no boundary condition) on u's space, by the
-- operator's rule (exact for phi_i on straight cells). One number per component.

local weights = setmetatable({}, {__mode = "k"}) -- space -> {["backend/precision/c"] = w}

function fe.integral(u)
  if kind(u) ~= "felab.vector" then
    error(("fe.integral: argument 1 must be a vector of a space, got %s"):format(kind(u)), 2)
  end
  local V = u.space
  if kind(V) ~= "felab.space" then
    error("fe.integral: u must be a vector of a space (made by V:interpolate, an action or a solve), not a free vector", 2)
  end
  if u.n ~= V.local_ndofs then -- this rank's (V.ndofs: every rank's, under mpirun)
    error(("fe.integral: u has %d entries but its space %s has %d dofs"):format(u.n, V.name, V.local_ndofs), 2)
  end
  local nc = V.ncomp
  local cache = weights[V] or {}
  weights[V] = cache
  local out = {}
  for c = 1, nc do
    local key = ("%s/%s/%d"):format(u.backend, u.precision, c)
    local w = cache[key]
    if not w then
      local pde = physics.new{
        name = "integral", components = nc > 1 and nc or nil,
        f0 = function()
          if nc == 1 then return 1 end
          local e = {}
          for i = 1, nc do e[i] = i == c and 1 or 0 end
          return e
        end,
      }
      w = fe.operator(V, pde):residual(u, {backend = u.backend, precision = u.precision})
      cache[key] = w
    end
    out[c] = w:dot(u)
  end
  return table.unpack(out)
end

---------------------------------------------------------------------------------------------
-- solve.heat(A, u0, opts) -> u, info

local heat_keys = {"steps", "dt", "t0", "rtol", "atol", "maxit", "backend", "precision", "strategy",
                   "pc", "degree", "lanczos", "ratio", "parts", "cycles", "monitor", "every", "out",
                   "name", "on_step"}
local pc_keys = {"degree", "lanczos", "ratio", "parts", "cycles", "backend", "precision", "strategy"}

-- The physics of A with its step constants checked: a constant dt and a field u_old.
local function heat_physics(A, u0, where)
  local pde = A.physics
  local dt = pde.constants.dt
  if type(dt) ~= "number" then
    error(("%s: the physics of A (%s) has no constant dt: make it with physics.heat, or physics.new "
           .. "with constants = {dt = ...} and fields = {u_old = ...}"):format(where, pde.name), 3)
  end
  local ok, msg = pcall(pde.set, pde, {u_old = u0})
  if not ok then
    error(("%s: the physics of A (%s) cannot take u_old = u0: %s"):format(where, pde.name, tostring(msg)), 3)
  end
  return pde, dt
end

-- The preconditioner: opts.pc when it is one (made by solve.precond), else one made here
-- for A from the unit's name (default jacobi) and its options.
local function heat_precond(A, o, where)
  if kind(o.pc) == "felab.precond" then return o.pc, false end
  if o.pc ~= nil and type(o.pc) ~= "string" then
    error(("%s: pc must be a unit's name or a preconditioner made by solve.precond, got %s")
          :format(where, kind(o.pc)), 3)
  end
  local po = {pc = o.pc or "jacobi"}
  for _, k in ipairs(pc_keys) do po[k] = o[k] end
  return solve.precond(A, po), true
end

-- The frames' writer: out/name_0000.vtu every `every` steps and out/name.pvd rewritten
-- after each one (so the index is whole whenever the run stops).
local function frame_writer(o, mesh, where)
  if o.out == nil then
    if o.every ~= nil or o.name ~= nil then
      error(("%s: every and name set the frames written to opts.out, which is missing"):format(where), 3)
    end
    return nil
  end
  if type(o.out) ~= "string" or o.out == "" then
    error(("%s: out must be a folder name, got %s"):format(where, kind(o.out)), 3)
  end
  local name = o.name or "u"
  if type(name) ~= "string" or not name:match("^[%w_%-%.]+$") then
    error(("%s: name must be a plain file name (letters, digits, _ - .), got %s"):format(where, tostring(name)), 3)
  end
  local every = opt_integer(o, "every", 1, 1, where)
  local frames, dir = {}, o.out:gsub("/+$", "")
  local pvd = ("%s/%s.pvd"):format(dir, name)
  return function(k, t, u, last)
    if k % every ~= 0 and not last then return end
    local file = ("%s_%04d.vtu"):format(name, k)
    if frames[#frames] and frames[#frames].file == file then return end
    export.vtu(dir .. "/" .. file, mesh, {[name] = u})
    frames[#frames + 1] = {file = file, time = t}
    export.pvd(pvd, frames)
  end, frames, pvd
end

function solve.heat(A, u0, opts)
  local where = "solve.heat"
  if kind(A) ~= "felab.operator" then
    error(("%s: argument 1 must be an operator (fe.operator of physics.heat), got %s"):format(where, kind(A)), 2)
  end
  if kind(u0) ~= "felab.vector" then
    error(("%s: argument 2 (u0) must be a vector of A's space, got %s"):format(where, kind(u0)), 2)
  end
  if not rawequal(u0.space, A.space) then
    local V = u0.space
    error(("%s: u0 is a vector of %s, not of A's space (%s, %d dofs): make it with A.space:interpolate")
          :format(where, kind(V) == "felab.space" and ("another space (%s, %d dofs)"):format(V.name, V.ndofs)
                  or "no space", A.space.name, A.space.ndofs), 2)
  end
  if type(opts) ~= "table" then
    error(("%s: argument 3 must be an options table {steps = ..., dt = ...}, got %s"):format(where, kind(opts)), 2)
  end
  local o = opts
  check_keys(o, heat_keys, where)
  if o.steps == nil then error(("%s: steps (the number of time steps) is required"):format(where), 2) end
  local steps = opt_integer(o, "steps", 1, nil, where)
  local dt = opt_positive(o, "dt", where)
  local t0 = o.t0 or 0
  if type(t0) ~= "number" or t0 ~= t0 or math.abs(t0) == math.huge then
    error(("%s: t0 must be a finite number, got %s"):format(where, tostring(t0)), 2)
  end
  if o.on_step ~= nil and type(o.on_step) ~= "function" then
    error(("%s: on_step must be a function(k, t, u, info), got %s"):format(where, kind(o.on_step)), 2)
  end
  if o.monitor ~= nil and type(o.monitor) ~= "boolean" then
    error(("%s: monitor must be true or false, got %s"):format(where, kind(o.monitor)), 2)
  end
  local pde, pde_dt = heat_physics(A, u0, where)
  if dt and dt ~= pde_dt then
    if kind(o.pc) == "felab.precond" then
      error(("%s: dt = %g differs from the physics' dt = %g, and the preconditioner given was made for "
             .. "the physics' J: set it first (pde:set{dt = %g}), then make P"):format(where, dt, pde_dt, dt), 2)
    end
    pde:set{dt = dt} -- J = c M/dt + K: before the preconditioner is made for it
  end
  dt = dt or pde_dt
  if not (dt > 0) then error(("%s: the physics' dt = %g must be > 0"):format(where, dt), 2) end

  local P, made = heat_precond(A, o, where)
  local write, frames, pvd = frame_writer(o, A.space.mesh, where)
  local cg = {pc = P, rtol = o.rtol, atol = o.atol, maxit = o.maxit, backend = o.backend,
              precision = o.precision, strategy = o.strategy}
  local info = {steps = 0, iterations = {}, total_iterations = 0, seconds = 0, flops = 0,
                setup_seconds = made and P.setup_seconds or 0, pc = P.name, precond = P, dt = dt,
                t = t0}
  local u, wall0 = u0, perf.clock()
  if write then write(0, t0, u0) end
  for k = 1, steps do
    local t = t0 + k * dt
    pde:set{t = t, u_old = u} -- the source at t_k; the last step is the right-hand side
    cg.x0 = u
    local unew, step = solve.cg(A, cg)
    if not step.converged then
      error(("%s: step %d (t = %g) did not converge: %s after %d iterations (|r| = %g); "
             .. "raise maxit or loosen rtol"):format(where, k, t, step.reason, step.iterations,
                                                     step.history[#step.history] or 0), 2)
    end
    u = unew
    info.steps, info.t, info.report = k, t, step.report
    info.iterations[k] = step.iterations
    info.total_iterations = info.total_iterations + step.iterations
    info.seconds = info.seconds + step.report.seconds
    info.flops = info.flops + step.report.flops
    if o.monitor then
      print(("  heat step %4d  t = %-10.4g %4d iterations  %.3e s"):format(k, t, step.iterations,
                                                                         step.report.seconds))
    end
    if write then write(k, t, u, k == steps) end
    if o.on_step and o.on_step(k, t, u, step) == false then
      if write then write(k, t, u, true) end
      break
    end
  end
  info.wall_seconds = perf.clock() - wall0
  info.gflops = info.seconds > 0 and info.flops / info.seconds * 1e-9 or 0
  info.frames, info.pvd = frames and #frames or nil, pvd
  return u, info
end
