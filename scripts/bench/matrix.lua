-- Benchmark (not a test): issue 43's matrix. {uniform, distorted 0.1, distorted 0.3, a Gmsh
-- mesh} x {kappa 1, kappa(x) = 1 + 0.5 x, kappa(u): the p-Laplacian's Jacobian at a nonzero
-- state} x {P1, P2 tets; Q1, Q2, Q3, Q5, Q7 hexes} x {fp64, fp32}, on one backend. For each
-- case: the default strategy (an apply with no strategy named: what a user gets) and every
-- strategy A:strategies() lists as applying, each timed (one warm-up apply for the setup and
-- the compile, then the median of up to `reps` applies); the fastest; the model's
-- predicted/measured (rep.predicted_seconds / rep.seconds of the median apply) of both; and
-- Jacobi-PCG ms per iteration of the default and of the fastest (fixed iterations: rtol = 0;
-- kappa(u): the linear solve of one Newton step at the state, timed with `its` iterations
-- less the same step with none). Writes a CSV as it goes (one row a case), one line a case at
-- the end. On the cpu it needs a quiet machine: with another busy process on one of the 2
-- cores, OpenMP's barriers wait out the scheduler's slices and applies read 40-130 ms in steps
-- of about 4 ms (as in the first run of this script, beside three other benchmarks).
--
-- usage: felab scripts/bench/matrix.lua <backend> [scale] [out.csv] [filter] [meshes folder]
--        felab scripts/bench/matrix.lua write-meshes <folder>
--   scale: cells per side times scale / 3 of the issue's sizes: 3 gives the issue's GPU sizes
--     (P1, Q1 192^3 and P2 96^3: 7.19M dofs; Q2 72^3, Q3 48^3: 3.05M; Q5 24^3: 1.77M; Q7
--     28^3: 7.65M); 1 (the default) a third per side, the cpu's (Q1, P1, P2, Q7 ~270k dofs,
--     Q2, Q3 118k, Q5 69k). The Gmsh meshes are refined to the most dofs up to 1.5 x that
--     (scale 3: Q3 on shell_hex.geo refined 4 times, 131k cells, 3.6M dofs, the issue's case).
--   filter: a comma list; names of one kind restrict that kind, kinds combine (and):
--     meshes uniform d0.1 d0.3 gmsh; kappas k1 kx ku; spaces P1 P2 Q1 Q2 Q3 Q5 Q7;
--     precisions fp64 fp32 (or double single). Knobs (defaults cpu / cuda):
--       reps=N    timed applies at most (10); time=S stop timing a strategy after S s (0.25 / 1);
--                 slow=S an apply of S s or more is not repeated: the warm-up's time (its
--                 seconds, the setup and the compile apart) is the measurement (1 / 1)
--       its=N     PCG iterations at most (50); pcg=S  iterations for about S s (0.5 / 10), >= 3
--       skip=F    time a listed strategy only when its prediction is within F x the best
--                 prediction (4 / 0; 0: time them all; the default is always timed)
--       cap=S     nor where its prediction, times the default's measured/predicted, is above
--                 S s (2; 0: no cap): cpu Q7 kappa(u) transpose predicted 1.5 s, measured 16 s
--       newton=S  kappa(u)'s PCG (two Newton steps: ~12 applies besides the iterations) only
--                 where that should take under S s (3 / 20)
--       setup=G   csr and ebe only where cells x (basis functions)^3 <= G billion (0.5 / 10):
--                 their setup makes element matrices (cpu, distorted, 2 cores: P1 64^3 1.5 s,
--                 Q2 24^3 4.7 s, Q3 16^3 8.9 s, Q5 8^3 31 s; 0.1, 0.27, 1.07, 5.2 G)
--       nopcg     applies only
--     e.g. "Q3,Q7,kx,fp64,d0.1" or "uniform,gmsh,P1,its=20".
--   meshes folder: where write-meshes put the Gmsh meshes (shell_hex.msh, torso-*.msh); without
--     it (or when mesh.load cannot read them), meshes/shell_hex.geo and meshes/torso.geo through
--     the Gmsh SDK; without the SDK the Gmsh cases are skipped, saying why.
--   write-meshes: meshes/shell_hex.geo (32 hexes; the matrix refines it: 4 times is 131k cells)
--     and meshes/torso.geo at sizes 0.1, 0.08, 0.063 (18k, 34k, 68k tets, 4 regions; refined
--     to the size asked) read through the Gmsh SDK and written with export.msh (.msh 4.1).
local HEX_GEO, TET_GEO = "meshes/shell_hex.geo", "meshes/torso.geo"
local TET_SIZES = {0.1, 0.08, 0.063}

local function tet_name(s) return ("torso-%g.msh"):format(s) end

if arg[1] == "write-meshes" then
  local dir = assert(arg[2], "usage: felab scripts/bench/matrix.lua write-meshes <folder>")
  os.execute(("mkdir -p '%s'"):format(dir))
  local h = mesh.load(HEX_GEO)
  export.msh(dir .. "/shell_hex.msh", h)
  print(("%s/shell_hex.msh: %d hexes, %d vertices (from %s)"):format(dir, h.ncells, h.nvertices, HEX_GEO))
  for _, s in ipairs(TET_SIZES) do
    local t = mesh.load(TET_GEO, {size = s})
    export.msh(dir .. "/" .. tet_name(s), t)
    print(("%s/%s: %d tets, %d vertices (from %s, size %g)"):format(dir, tet_name(s), t.ncells,
          t.nvertices, TET_GEO, s))
  end
  -- read them back: the same counts
  for _, f in ipairs({"shell_hex.msh", tet_name(TET_SIZES[1])}) do
    local ok, m = pcall(mesh.load, dir .. "/" .. f)
    print(("read back %s: %s"):format(f, ok and ("%d cells, %d vertices"):format(m.ncells, m.nvertices)
          or m))
  end
  return
end

local backend = arg[1] or "cpu"
local scale = tonumber(arg[2]) or 1
local out = arg[3] and arg[3] ~= "" and arg[3] or "matrix.csv"
local filter = arg[4] or ""
local mesh_dir = arg[5] and arg[5] ~= "" and arg[5] or os.getenv("MATRIX_MESHES")
local gpu = backend ~= "cpu"

-- the filter: names by kind, knobs
local MESHES = {"uniform", "d0.1", "d0.3", "gmsh"}
local KAPPAS = {"k1", "kx", "ku"}
local PRECS = {{"fp64", "double"}, {"fp32", "single"}}
-- space, cell, cells per side at scale 3 (the issue's GPU sizes)
local SPACES = {
  {"P1", "tet", 192}, {"P2", "tet", 96}, {"Q1", "hex", 192}, {"Q2", "hex", 72},
  {"Q3", "hex", 48}, {"Q5", "hex", 24}, {"Q7", "hex", 28},
}
local knob = {reps = 10, time = gpu and 1 or 0.25, its = 50, pcg = gpu and 10 or 0.5,
              skip = gpu and 0 or 4, setup = gpu and 10 or 0.5, slow = 1, cap = 2,
              newton = gpu and 20 or 3, nopcg = false}
local want = {}
do
  local kind_of = {}
  for _, n in ipairs(MESHES) do kind_of[n] = "mesh" end
  for _, n in ipairs(KAPPAS) do kind_of[n] = "kappa" end
  for _, s in ipairs(SPACES) do kind_of[s[1]] = "space" end
  for _, p in ipairs(PRECS) do kind_of[p[1]], kind_of[p[2]] = "prec", "prec" end
  for tok in filter:gmatch("[^,%s]+") do
    local k, v = tok:match("^(%a+)=([%d.]+)$")
    if k and knob[k] ~= nil then
      knob[k] = tonumber(v)
    elseif tok == "nopcg" then
      knob.nopcg = true
    elseif kind_of[tok] then
      local kind = kind_of[tok]
      if tok == "double" then tok = "fp64" elseif tok == "single" then tok = "fp32" end
      want[kind] = want[kind] or {}
      want[kind][tok] = true
    else
      error(("matrix.lua: unknown filter word '%s' (meshes uniform d0.1 d0.3 gmsh, kappas k1 kx ku, " ..
             "spaces P1 P2 Q1 Q2 Q3 Q5 Q7, fp64 fp32, reps= time= its= pcg= skip= setup= nopcg)"):format(tok))
    end
  end
end
local function wanted(kind, name) return not want[kind] or want[kind][name] end

-- ----- meshes -----
-- the Gmsh bases: from the folder write-meshes made (read by mesh.load: .msh 4.1), else the
-- .geo files through the SDK; nil and why when neither can be read
local gmsh_note
local gmsh_base = {}
local function load_base(kind, size)
  local key = kind .. (size or "")
  if gmsh_base[key] ~= nil then return gmsh_base[key] end
  local file = kind == "hex" and "shell_hex.msh" or tet_name(size)
  local tried = {}
  if mesh_dir then
    local ok, m = pcall(mesh.load, mesh_dir .. "/" .. file)
    if ok then gmsh_base[key] = m return m end
    tried[#tried + 1] = ("%s/%s: %s"):format(mesh_dir, file, m)
  end
  local ok, m
  if kind == "hex" then ok, m = pcall(mesh.load, HEX_GEO) else ok, m = pcall(mesh.load, TET_GEO, {size = size}) end
  if ok then gmsh_base[key] = m return m end
  tried[#tried + 1] = ("%s: %s"):format(kind == "hex" and HEX_GEO or TET_GEO, m)
  gmsh_note = table.concat(tried, "; ")
  gmsh_base[key] = false
  return false
end

-- dofs of a space of order p on the shell (4 x 4 x 2 cells) refined L times
local function shell_dofs(p, L)
  local k = 2 ^ L
  return (4 * p * k + 1) ^ 2 * (2 * p * k + 1)
end

-- The Gmsh mesh for space (cell, p) of the most dofs up to 1.5 x `target` (else the fewest):
-- the refined mesh and a note.
local function gmsh_mesh(cell, p, target)
  if cell == "hex" then
    local base = load_base("hex")
    if not base then return nil end
    local best
    for L = 0, 8 do
      local d = shell_dofs(p, L)
      if L == 0 or d <= 1.5 * target then best = {L = L, d = d} end
    end
    local m = base
    for _ = 1, best.L do m = m:refine() end
    return m, ("shell_hex.geo refined %d times"):format(best.L)
  end
  -- tets: P1 dofs of level L are the vertices, P2's those of level L + 1; a refinement makes
  -- V' = V + E vertices, E ~ V + T edges (Euler, the boundary neglected), T' = 8 T
  local best
  for _, s in ipairs(TET_SIZES) do
    local base = load_base("tet", s)
    if not base then return nil end
    local V, T = base.nvertices, base.ncells
    for L = 0, 6 do
      local d = p == 1 and V or 2 * V + T
      if not best or (d <= 1.5 * target and (d > best.d or best.d > 1.5 * target)) or
         (best.d > 1.5 * target and d < best.d) then
        best = {s = s, L = L, d = d}
      end
      V, T = 2 * V + T, 8 * T
      if T > 4e8 then break end
    end
  end
  local m = load_base("tet", best.s)
  for _ = 1, best.L do m = m:refine() end
  return m, ("torso.geo size %g refined %d times"):format(best.s, best.L)
end

-- ----- timing -----
local function median_apply(A, w, o)
  local _, first = A:apply(w, o) -- the setup and the compile (apart from its seconds)
  if first.seconds >= knob.slow then return first, first, 1 end -- too slow to repeat
  local reps, t0 = {}, perf.clock()
  for i = 1, knob.reps do
    local _, rep = A:apply(w, o)
    reps[i] = rep
    local dt = perf.clock() - t0
    if (i >= 3 and dt >= knob.time) or dt >= 3 * knob.time then break end
  end
  table.sort(reps, function(a, b) return a.seconds < b.seconds end)
  return reps[(#reps + 1) // 2], first, #reps
end

local function pcg_iterations(apply_s)
  return math.max(3, math.min(knob.its, math.floor(knob.pcg / math.max(apply_s, 1e-9))))
end

-- ms per PCG iteration with strategy s (nil: the default): Jacobi, rtol = 0
local function pcg_ms(A, o, s, its, state)
  local opts = {backend = o.backend, precision = o.precision, strategy = s, pc = "jacobi",
                rtol = 0, atol = 0}
  if not state then
    opts.maxit = its
    local _, info = solve.cg(A, opts)
    return 1e3 * info.report.seconds / info.iterations, info.iterations
  end
  -- J(u): one Newton step at u, its CG iterations less the same step with none
  opts.x0, opts.linear, opts.maxit, opts.linesearch = state, "cg", 1, "none"
  opts.linear_rtol = 0
  local t = {}
  for i, n in ipairs({its, 0}) do
    opts.linear_maxit = n
    local _, info = solve.newton(A, opts)
    t[i] = info.report.seconds
    if i == 1 then its = info.linear_iterations end
  end
  return 1e3 * math.max(t[1] - t[2], 0) / its, its
end

-- ----- the matrix -----
local cal = {}
for _, p in ipairs(PRECS) do
  if wanted("prec", p[1]) then
    local c = device.calibrate(backend, p[2])
    cal[p[1]] = c
    print(("%s %s: calibrated bandwidth %.0f GB/s, FMA %.0f GF/s (%s)"):format(backend, p[1],
          c.peak_gbytes, c.peak_gflops, c.device))
  end
end

local cols = {"mesh", "kappa", "space", "precision", "cells", "dofs", "mesh_note",
              "default", "default_why", "default_ms", "default_pred_ms", "default_ratio",
              "default_pcg_ms", "default_pcg_its", "default_setup_s",
              "fastest", "fastest_ms", "fastest_pred_ms", "fastest_ratio", "fastest_pcg_ms",
              "fastest_pcg_its", "default_over_fastest", "listed_default", "listed_pred_ms", "strategies", "skipped", "errors", "wall_s"}
local csv = assert(io.open(out, "w"))
csv:write(table.concat(cols, ","), "\n")
csv:flush()
local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "number" then return ("%.6g"):format(v) end
  v = tostring(v)
  if v:find('[,"\n]') then v = '"' .. v:gsub('"', '""'):gsub("\n", " ") .. '"' end
  return v
end

local rows = {}
local t_start = perf.clock()
local function state_fn(x) return x[1] * (1 - x[2]) + x[3] end
local function dir_fn(x) return x[1] * x[2] + 0.5 * x[3] - x[2] end

local function run_case(mname, kname, sp, m, V, mesh_note, pname, prec, A, w, u)
  local o = {backend = backend, precision = prec, at = u}
  local t_case = perf.clock()
  local row = {mesh = mname, kappa = kname, space = sp[1], precision = pname, cells = m.ncells,
               dofs = V.ndofs, mesh_note = mesh_note}
  local errors, timed, skipped = {}, {}, {}
  local names, info = A:strategies{backend = backend, precision = prec}
  local lp = {}
  for _, n in ipairs(names) do
    if info[n].default then row.listed_default = n end
    lp[#lp + 1] = ("%s:%.4g"):format(n, (info[n].predicted_seconds or 0) * 1e3)
  end
  row.listed_pred_ms = table.concat(lp, " ")
  -- the default: no strategy named
  local ok, def, first = pcall(median_apply, A, w, o)
  if not ok then
    errors[#errors + 1] = "default: " .. tostring(def)
  else
    row.default, row.default_why = def.strategy, def.why
    row.default_ms, row.default_pred_ms = def.seconds * 1e3, def.predicted_seconds * 1e3
    row.default_ratio, row.default_setup_s = def.predicted_seconds / def.seconds, first.setup_seconds
    timed[def.strategy] = def
  end
  -- every listed strategy
  local best_pred = math.huge
  for _, n in ipairs(names) do best_pred = math.min(best_pred, info[n].predicted_seconds or math.huge) end
  for _, n in ipairs(names) do
    if not timed[n] then
      local pred = info[n].predicted_seconds or 0
      local work = 0 -- csr, ebe: cells x (basis functions)^3, in G (their setup makes element matrices)
      if n == "csr" or n == "ebe" then
        local p = tonumber(sp[1]:sub(2))
        local nbf = sp[2] == "hex" and (p + 1) ^ 3 or (p + 1) * (p + 2) * (p + 3) / 6
        work = m.ncells * nbf ^ 3 / 1e9
      end
      local est = def and pred * def.seconds / def.predicted_seconds or 0
      if knob.skip > 0 and pred > knob.skip * best_pred then
        skipped[#skipped + 1] = ("%s(pred %.3gx)"):format(n, pred / best_pred)
      elseif knob.cap > 0 and est > knob.cap then
        skipped[#skipped + 1] = ("%s(est %.3g s)"):format(n, est)
      elseif work > knob.setup then
        skipped[#skipped + 1] = ("%s(setup %.3gG)"):format(n, work)
      else
        local so = {backend = backend, precision = prec, strategy = n, at = u}
        local ok2, rep = pcall(median_apply, A, w, so)
        if ok2 then timed[n] = rep else errors[#errors + 1] = n .. ": " .. tostring(rep):sub(1, 160) end
      end
    end
  end
  local fast
  local list = {}
  for n, rep in pairs(timed) do
    if not fast or rep.seconds < fast.seconds then fast = rep end
    list[#list + 1] = ("%s:%.4g"):format(n, rep.seconds * 1e3)
  end
  table.sort(list)
  row.strategies, row.skipped = table.concat(list, " "), table.concat(skipped, " ")
  if fast then
    row.fastest, row.fastest_ms = fast.strategy, fast.seconds * 1e3
    row.fastest_pred_ms, row.fastest_ratio = fast.predicted_seconds * 1e3, fast.predicted_seconds / fast.seconds
    if row.default_ms then row.default_over_fastest = row.default_ms / row.fastest_ms end
  end
  -- PCG: the default, and the fastest where it is another strategy
  local pcg_ok = def and not knob.nopcg
  if pcg_ok and u and (pcg_iterations(def.seconds) + 12) * def.seconds > knob.newton then
    pcg_ok = false
    errors[#errors + 1] = ("pcg: not run (kappa(u): two Newton steps ~%.0f s, above newton=%g)")
                          :format((pcg_iterations(def.seconds) + 12) * def.seconds, knob.newton)
  end
  if pcg_ok then
    local its = pcg_iterations(def.seconds)
    local ok3, ms, n = pcall(pcg_ms, A, o, nil, its, u)
    if ok3 then row.default_pcg_ms, row.default_pcg_its = ms, n
    else errors[#errors + 1] = "pcg default: " .. tostring(ms):sub(1, 160) end
    if fast and fast.strategy ~= def.strategy then
      its = pcg_iterations(fast.seconds)
      ok3, ms, n = pcall(pcg_ms, A, o, fast.strategy, its, u)
      if ok3 then row.fastest_pcg_ms, row.fastest_pcg_its = ms, n
      else errors[#errors + 1] = "pcg " .. fast.strategy .. ": " .. tostring(ms):sub(1, 160) end
    else
      row.fastest_pcg_ms, row.fastest_pcg_its = row.default_pcg_ms, row.default_pcg_its
    end
  end
  row.errors = table.concat(errors, "; ")
  row.wall_s = perf.clock() - t_case
  local f = {}
  for i, c in ipairs(cols) do f[i] = csv_field(row[c]) end
  csv:write(table.concat(f, ","), "\n")
  csv:flush()
  rows[#rows + 1] = row
  print(("%-7s %-2s %-2s %s %8d  default %-9s %9.3f ms (p/m %.2f) PCG %s | fastest %-9s %9.3f ms%s  [%s]%s%s  (%.0f s)")
        :format(mname, kname, sp[1], pname, V.ndofs, row.default or "-", row.default_ms or 0 / 0,
                row.default_ratio or 0 / 0, row.default_pcg_ms and ("%.3f"):format(row.default_pcg_ms) or "-",
                row.fastest or "-", row.fastest_ms or 0 / 0,
                row.default_over_fastest and ("  x%.2f"):format(row.default_over_fastest) or "",
                row.strategies, #skipped > 0 and ("  skipped " .. row.skipped) or "",
                #errors > 0 and ("  errors: " .. row.errors) or "", perf.clock() - t_start))
end

for _, mname in ipairs(MESHES) do
  if wanted("mesh", mname) then
    for _, sp in ipairs(SPACES) do
      if wanted("space", sp[1]) then
        local n = math.max(2, math.floor(sp[3] * scale / 3 + 0.5))
        local p = tonumber(sp[1]:sub(2))
        local m, note
        if mname == "gmsh" then
          -- the box's dofs at this scale: (p n + 1)^3 on every space here
          m, note = gmsh_mesh(sp[2], p, (p * n + 1) ^ 3)
        else
          m = mesh.box{cells = {n, n, n}, cell = sp[2], distort = mname ~= "uniform" and tonumber(mname:sub(2)) or nil}
          note = ("box %d^3%s"):format(n, mname ~= "uniform" and (" distort " .. mname:sub(2)) or "")
        end
        if not m then
          print(("gmsh %s: skipped: %s"):format(sp[1], gmsh_note or "no mesh"))
        else
          local t0 = perf.clock()
          local V = fe.space(m, sp[1])
          local setup_s = perf.clock() - t0
          print(("\n== %s %s: %s, %d cells, %d dofs (space %.1f s)"):format(mname, sp[1], note, m.ncells,
                V.ndofs, setup_s))
          for _, kname in ipairs(KAPPAS) do
            if wanted("kappa", kname) then
              local pde = kname == "k1" and physics.poisson{kappa = 1, source = 1}
                       or kname == "kx" and physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}
                       or physics.p_laplacian{p = 3, eps = 0.1, source = 1}
              local A = fe.operator(V, pde, {dirichlet = "all"})
              local w_host = V:interpolate(dir_fn)
              local u_host = kname == "ku" and V:interpolate(state_fn) or nil
              for _, pp in ipairs(PRECS) do
                if wanted("prec", pp[1]) then
                  local w = w_host:to(backend, pp[2])
                  local u = u_host and u_host:to(backend, pp[2]) or nil
                  local ok, err = pcall(run_case, mname, kname, sp, m, V, note, pp[1], pp[2], A, w, u)
                  if not ok then print(("%s %s %s %s: %s"):format(mname, kname, sp[1], pp[1], err)) end
                  w, u = nil, nil
                  collectgarbage()
                end
              end
              A, w_host, u_host = nil, nil, nil
              collectgarbage()
            end
          end
          V, m = nil, nil
          collectgarbage()
        end
      end
    end
  end
end
csv:close()

-- ----- the table -----
local function f3(x) return x and ("%.3f"):format(x) or "-" end
local function f2(x) return x and ("%.2f"):format(x) or "-" end
print(("\n== matrix on %s (%s), scale %g, %.0f s; apply: median ms; PCG: Jacobi, ms per iteration; " ..
       "p/m: predicted/measured; def/fast: default over fastest apply"):format(backend,
       (cal.fp64 or cal.fp32 or {}).device or "?", scale, perf.clock() - t_start))
print(("%-7s %-2s %-2s %-4s %9s | %-9s %9s %5s %9s | %-9s %9s %5s %9s | %8s"):format("mesh", "k", "sp",
      "prec", "dofs", "default", "apply", "p/m", "PCG/it", "fastest", "apply", "p/m", "PCG/it", "def/fast"))
local n, within10, model20 = 0, 0, 0
for _, r in ipairs(rows) do
  print(("%-7s %-2s %-2s %-4s %9d | %-9s %9s %5s %9s | %-9s %9s %5s %9s | %8s"):format(r.mesh, r.kappa,
        r.space, r.precision, r.dofs, r.default or "-", f3(r.default_ms), f2(r.default_ratio),
        f3(r.default_pcg_ms), r.fastest or "-", f3(r.fastest_ms), f2(r.fastest_ratio),
        f3(r.fastest_pcg_ms), f2(r.default_over_fastest)))
  if r.default_over_fastest then
    n = n + 1
    if r.default_over_fastest <= 1.1 then within10 = within10 + 1 end
    if math.abs(r.default_ratio - 1) <= 0.2 then model20 = model20 + 1 end
  end
end
print(("%d cases: the default within 10%% of the fastest in %d, the model within 20%% (default) in %d; csv: %s")
      :format(n, within10, model20, out))
if gmsh_note then print("gmsh: " .. gmsh_note) end
