-- Strategy "patch" (engine/codegen/kernels/patch.knl) computes what "transpose" computes: residual,
-- Jacobian action and diagonal agree to rounding on cpu and opencl, for first-order spaces
-- (geometry recomputed from the coordinates) and higher orders (stored geometry), scalar and
-- vector, linear and nonlinear physics with an auxiliary field, 2D and 3D, double (and single
-- on the first two), with a patch size that leaves a padded last patch (7 cells, on the first
-- two, in double), without walks (one item per cell, the default) and with them (first-order
-- cells: 8 and 3 cells per walk). The reference is transpose on the cpu. PCG takes the same
-- iterations with either.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, rel_diff = T.check, T.max_rel_diff
local backends, nvidia_opencl = T.backends(true), T.nvidia_opencl()

local nonlinear = T.nonlinear -- exercises NEED_U, NEED_X, NEED_F

local scalar = physics.poisson{kappa = "1 + x[0]*x[1]", source = "sin(3*x[0]) + x[1]"}
local cases = {
  {cell = "tet", space = "P1", cells = {6, 5, 4}},
  {cell = "hex", space = "Q1", cells = {6, 5, 4}},
  {cell = "prism", space = "P1", cells = {5, 4, 3}},
  {cell = "tet", space = "P2", cells = {3, 3, 2}},
  {cell = "tri", space = "P1", cells = {9, 7}},
  {cell = "tet", space = "P1", cells = {4, 4, 3}, components = 3},
  {cell = "tet", space = "P1", cells = {5, 4, 4}, physics = "nonlinear"},
  -- its tables pass the 64 KiB of constant memory NVIDIA's OpenCL allows (a known limit)
  {cell = "hex", space = "Q2", cells = {3, 2, 2}, physics = "nonlinear", big_tables = true},
}
for _, c in ipairs(cases) do
  local m = mesh.box{cells = c.cells, cell = c.cell, distort = 0.25}
  local V = c.components and fe.space(m, {family = "P", order = 1, components = c.components})
            or fe.space(m, c.space)
  local pde = c.components and physics.elasticity{E = 10, nu = 0.3}
              or c.physics and nonlinear(V) or scalar
  local A = fe.operator(V, pde, {dirichlet = {"xmin", "ymax"}, value = 0.5})
  local dim = #c.cells
  local function field(f)
    return V:interpolate(function(x)
      local s = f(x)
      if c.components then return {s, 2 * s, -s} end
      return s
    end)
  end
  local u = field(function(x) return 0.3 * math.cos(x[1]) * x[2] + (dim == 3 and x[3] or 0) end)
  local w = field(function(x) return x[1] - 2 * x[2] * (dim == 3 and x[3] or 0.5) end)
  local first = _ <= 2
  local single = first -- single on the first two cases
  local refs = {}
  for _, prec in ipairs(single and {"double", "single"} or {"double"}) do
    local tol = prec == "double" and 1e-13 or 2e-5
    for _, act in ipairs({"residual", "apply", "diagonal"}) do
      local function run(be, strategy, block, walk, precision)
        local o = {backend = be, precision = precision or prec, strategy = strategy, block = block,
                   walk = walk}
        if act == "residual" then return A:residual(u, o) end
        if act == "apply" then o.at = u; return A:apply(w, o) end
        return A:diagonal(o)
      end
      -- transpose in double: the reference for both precisions (its single kernels would
      -- only compile again; single is held to 2e-5 of the double result)
      refs[act] = refs[act] or run("cpu", "transpose", nil, nil, "double"):to("cpu", "double")
      local ref = refs[act]
      local runs = {}
      for _, be in ipairs(backends) do
        if not (c.big_tables and be == "opencl" and nvidia_opencl) then
          runs[#runs + 1] = {be}
          if c.space == "P1" or c.space == "Q1" then runs[#runs + 1] = {be, nil, 8} end
        end
      end
      if first and prec == "double" then -- (the padding is the same code in single)
        runs[#runs + 1] = {"cpu", 7}
        runs[#runs + 1] = {"cpu", 37, 3}
      end
      for _, r in ipairs(runs) do
        local y, rep = run(r[1], "patch", r[2], r[3])
        local d = rel_diff(ref, y:to("cpu", "double"))
        check(d <= tol and rep.strategy == "patch", "%s %s%s %s %s %s %s block %s walk %s: patch vs transpose %.2e",
              c.cell, c.space, c.components and "^3" or "", c.physics or "", r[1], prec, act,
              r[2] or "default", r[3] or "default", d)
      end
    end
  end
  print(("%-5s %s%s %-9s patch = transpose (residual, apply, diagonal) on %s%s")
        :format(c.cell, c.space, c.components and "^3" or "  ", c.physics or "", table.concat(backends, ", "),
                (single and "; single too" or "") .. (first and "; 7-cell patches; walks of 3" or "") ..
                (c.big_tables and nvidia_opencl and " (not NVIDIA's opencl: constant memory)" or "")))
end

print("patch strategy: patch = transpose everywhere")
T.done()
