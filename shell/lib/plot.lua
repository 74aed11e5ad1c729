-- felab's plots, written in Lua on perf and embedded in the binary (scripts/embed.sh):
--   perf.roofline{out = "roof"}   the session's calls on the calibrated roofline
--   perf.sweep{spaces =, sizes =}  one action over meshes, spaces, strategies, backends
--   perf.plot(info), info:plot{}  the residual history of one or more solves
--
-- Every plot is three files beside each other: NAME.csv (the numbers), NAME.gp (a gnuplot
-- script that reads NAME.csv by its bare name) and NAME.png, which gnuplot draws when it is
-- on the PATH. Without gnuplot (or with FELAB_GNUPLOT=0, or the option gnuplot = false) the
-- .csv and .gp are written anyway and one line says how to draw them later. The script picks
-- the pngcairo terminal when that gnuplot has it, else png, so it runs on any gnuplot 5.
local perf, mesh, fe, physics, device, solve, info_meta, util = ...
local kind, check_keys = util.kind, util.options

-- o[key] as a list of strings (a single string is a list of one); default when absent.
local function opt_strings(o, key, default, where)
  local v = o[key]
  if v == nil then return default end
  if type(v) == "string" then return {v} end
  if type(v) ~= "table" or #v == 0 then
    error(("%s: %s must be a name or a list of names, got %s"):format(where, key, kind(v)), 3)
  end
  for i, s in ipairs(v) do
    if type(s) ~= "string" then
      error(("%s: %s[%d] must be a name, got %s"):format(where, key, i, kind(s)), 3)
    end
  end
  return v
end

-- o[key] as a string (default when absent).
local function opt_string(o, key, default, where)
  local v = o[key]
  if v == nil then return default end
  if type(v) ~= "string" or v == "" then
    error(("%s: %s must be a non-empty string, got %s"):format(where, key, kind(v)), 3)
  end
  return v
end

---------------------------------------------------------------------------------------------
-- Files and gnuplot

-- A CSV field: numbers with 10 significant digits, strings quoted when they need it.
local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    if v ~= v or math.abs(v) == math.huge then return "" end
    return ("%.10g"):format(v)
  end
  local s = tostring(v)
  if s:find('[,"\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- A gnuplot string literal (double quotes: backslash and quote escaped).
local function gp_string(s)
  return '"' .. tostring(s):gsub('[\\"]', "\\%0"):gsub("\n", " ") .. '"'
end

-- A shell word in single quotes.
local function sh_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Write text to path whole or not at all (a temporary file renamed).
local function write_file(path, text, where)
  local tmp = path .. ".tmp"
  local f, msg = io.open(tmp, "w")
  if not f then error(("%s: cannot write '%s': %s"):format(where, path, msg), 4) end
  f:write(text)
  f:close()
  local ok, err = os.rename(tmp, path)
  if not ok then error(("%s: cannot write '%s': %s"):format(where, path, err), 4) end
end

-- The CSV text of rows (tables keyed by the header's names).
local function csv_text(header, rows)
  local lines = {table.concat(header, ",")}
  for _, r in ipairs(rows) do
    local f = {}
    for i, k in ipairs(header) do f[i] = csv_field(r[k]) end
    lines[#lines + 1] = table.concat(f, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

-- out ("roof", "plots/roof") split into its folder ("" or "plots/") and its base name.
local function split_out(out, where)
  if type(out) ~= "string" or out == "" or out:sub(-1) == "/" then
    error(("%s: out must be a file name without extension (\"roof\" writes roof.csv, roof.gp, "
           .. "roof.png), got %s"):format(where, type(out) == "string" and ("%q"):format(out) or kind(out)), 3)
  end
  local dir, base = out:match("^(.*/)([^/]+)$")
  if not dir then dir, base = "", out end
  if base:find("[\"'\\]") then
    error(("%s: out's file name must not contain quotes or backslashes, got %q"):format(where, base), 3)
  end
  return dir, base
end

-- The gnuplot program to run, or nil with the reason: option gnuplot = false, then
-- FELAB_GNUPLOT (0 turns it off, a path names the program), then `gnuplot` on the PATH.
local function gnuplot_program(o)
  if o.gnuplot == false then return nil, "gnuplot = false" end
  local env = os.getenv("FELAB_GNUPLOT")
  if env == "0" then return nil, "FELAB_GNUPLOT=0" end
  local prog = (env and env ~= "" and env ~= "1") and env or "gnuplot"
  local p = io.popen("command -v " .. sh_quote(prog) .. " 2>/dev/null")
  local found = p and p:read("l")
  if p then p:close() end
  if not found or found == "" then return nil, ("%s is not on the PATH; Debian: apt-get install gnuplot-nox"):format(prog) end
  return prog
end

-- Eight colours that read on white (gnuplot's fifth default is a pale yellow).
local palette = {}
for i, c in ipairs{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"} do
  palette[i] = ("set linetype %d lc rgb %q"):format(i, c)
end

-- The head of every script: the PNG terminal, its size, the output, comma-separated data.
local function gp_head(base, width, height)
  return table.concat({
    "# written by felab; draw with: gnuplot " .. base .. ".gp (in this folder)",
    "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {",
    ("  set terminal pngcairo size %d,%d noenhanced font \"sans,11\""):format(width, height),
    "} else {",
    ("  set terminal png size %d,%d noenhanced"):format(width, height),
    "}",
    "set termoption noenhanced",
    ("set output %s"):format(gp_string(base .. ".png")),
    "set datafile separator \",\"",
    "set grid xtics ytics mxtics mytics lc rgb \"#dddddd\"",
  }, "\n") .. "\n" .. table.concat(palette, "\n") .. "\nset linetype cycle 8\n"
end

-- Write NAME.csv and NAME.gp, and draw NAME.png with gnuplot when there is one. Returns
-- {csv =, gp =, png = (nil without gnuplot)}. A gnuplot failure is an error naming the script.
local function finish(where, out, o, csv, gp)
  local dir, base = split_out(out, where)
  local files = {csv = dir .. base .. ".csv", gp = dir .. base .. ".gp"}
  write_file(files.csv, csv, where)
  write_file(files.gp, gp, where)
  local png = dir .. base .. ".png"
  local prog, why = gnuplot_program(o)
  local draw = (dir ~= "" and ("cd %s && "):format(sh_quote(dir)) or "") .. "gnuplot " .. base .. ".gp"
  if not prog then
    print(("%s: wrote %s and %s; no PNG (%s): draw it with `%s`"):format(where, files.csv, files.gp, why, draw))
    return files
  end
  os.remove(png)
  local log = os.tmpname()
  local cmd = ("%s%s %s >%s 2>&1"):format(dir ~= "" and ("cd %s && "):format(sh_quote(dir)) or "",
                                          sh_quote(prog), sh_quote(base .. ".gp"), sh_quote(log))
  local ok, how, code = os.execute(cmd)
  local f = io.open(log)
  local msg = f and f:read("a") or ""
  if f then f:close() end
  os.remove(log)
  local made = io.open(png, "rb")
  if made then made:close() end
  if not ok or not made then
    msg = msg:gsub("%s+$", "")
    error(("%s: gnuplot failed on %s (%s %s)%s"):format(where, files.gp, tostring(how), tostring(code),
          msg ~= "" and ":\n" .. msg:sub(-1500) or (made and "" or ", and wrote no " .. png)), 3)
  end
  files.png = png
  return files
end

---------------------------------------------------------------------------------------------
-- perf.roofline{out =, calls =, title =, gnuplot =}

local roof_header = {"call", "action", "strategy", "backend", "precision", "space", "ndofs", "flops",
                     "bytes", "seconds", "intensity", "gflops", "gbytes", "peak_gflops",
                     "peak_gbytes", "predicted_seconds", "ratio", "group", "label", "mark", "bound"}

-- The ceilings of backend/precision: the reports' peaks, else the calibration's.
local function ceilings(rep)
  local bw, fl = rep.peak_gbytes, rep.peak_gflops
  if not (bw and bw > 0 and fl and fl > 0) then
    local ok, inf = pcall(device.info, rep.backend)
    local cal = ok and type(inf) == "table" and inf.calibration and inf.calibration[rep.precision]
    if cal then bw, fl = cal.gbytes, cal.gflops end
  end
  if bw and bw > 0 and fl and fl > 0 then return bw, fl end
end

-- "Q3 on hex" -> "Q3"; "Q4^3 on hex" -> "Q4^3".
local function space_short(space)
  return (space or ""):match("^(.-) on ") or space or ""
end

-- A point's default label: the action, the space and order, the strategy ("apply Q3 transpose").
local function roof_label(rep)
  local parts = {rep.action or "?"}
  if (rep.space or "") ~= "" then parts[#parts + 1] = space_short(rep.space) end
  if (rep.strategy or "") ~= "" then parts[#parts + 1] = rep.strategy end
  return table.concat(parts, " ")
end

-- The calls to draw: every one with all = true; else first runs (a compile or a cold run: no
-- steady figure) left out and, of the repeats of one call (the same action, strategy, space,
-- size, backend and precision), the fastest only. Returns the kept reports with their index.
local function roof_calls(calls, all)
  local kept, at = {}, {}
  for i, rep in ipairs(calls) do
    if all then kept[#kept + 1] = {i, rep}
    elseif not rep.first_run then
      local key = table.concat({rep.action, rep.strategy, rep.space, rep.ndofs, rep.backend,
                                rep.precision}, "|")
      local k = at[key]
      if not k then
        kept[#kept + 1] = {i, rep}
        at[key] = #kept
      elseif rep.seconds > 0 and rep.seconds < kept[k][2].seconds then
        kept[k] = {i, rep}
      end
    end
  end
  return kept
end

-- The ceilings besides the memory line and the flat FMA rate that could bind a call (the
-- model's time for them at least half its largest): each drawn at the call as a short dashed
-- bar at the rate it alone would allow (flops / its time), named ("indexed" binds the cpu's P1).
local function roof_bars(rows, reps)
  local bars = {}
  for i, r in ipairs(rows) do
    local rep = reps[i]
    if r.intensity and r.mark then
      local most = 0
      for _, t in pairs(rep.ceilings) do most = math.max(most, t) end
      for name, t in pairs(rep.ceilings) do
        if name ~= "dram" and name ~= "fma" and t > 0 and t >= 0.5 * most then
          bars[#bars + 1] = ("%.6g,%.6g,%.6g,%s"):format(r.intensity / 1.5, rep.flops / t * 1e-9,
                                                        r.intensity * (1.5 * 1.5 - 1) / 1.5, name)
        end
      end
    end
  end
  return bars
end

-- The label of call (rep, its index i in calls) from the option label: a list (by index), a
-- function of the report, or nil (the default).
local function label_of(label, rep, i, where)
  if label == nil then return roof_label(rep) end
  local v = type(label) == "function" and label(rep) or label[i]
  if v == nil then return roof_label(rep) end
  if type(v) ~= "string" and type(v) ~= "number" then
    error(("%s: label of call %d must be a string, got %s"):format(where, i, kind(v)), 3)
  end
  return tostring(v)
end

function perf.roofline(opts)
  local where = "perf.roofline"
  local o = opts or {}
  if type(o) ~= "table" then error(("%s: expected an options table, got %s"):format(where, kind(o)), 2) end
  check_keys(o, {"out", "calls", "title", "gnuplot", "label", "all"}, where)
  if o.label ~= nil and type(o.label) ~= "table" and type(o.label) ~= "function" then
    error(("%s: label must be a list of strings (one per call) or a function(rep) -> string, got %s")
          :format(where, kind(o.label)), 2)
  end
  local out = o.out or "roof"
  local _, base = split_out(out, where)
  local csv = gp_string(base .. ".csv")
  local calls = o.calls or perf.history()
  if type(calls) ~= "table" then
    error(("%s: calls must be a list of reports, got %s"):format(where, kind(calls)), 2)
  end
  for i, rep in ipairs(calls) do
    if kind(rep) ~= "felab.report" then
      error(("%s: calls[%d] must be a report (the second result of an action), got %s"):format(where, i, kind(rep)), 2)
    end
  end
  local rows, groups, byname, reps = {}, {}, {}, {}
  -- a point's label is drawn unless one with the same text sits within 20% in x and y
  local function marked(r)
    for _, q in ipairs(rows) do
      if q.mark == 1 and q.label == r.label and math.abs(math.log(q.intensity / r.intensity)) < 0.18
         and math.abs(math.log(q.gflops / r.gflops)) < 0.18 then
        return false
      end
    end
    return true
  end
  local xlo, xhi, ylo, yhi = math.huge, 0, math.huge, 0
  local kept = roof_calls(calls, o.all)
  for _, ki in ipairs(kept) do
    local i, rep = ki[1], ki[2]
    local flops, bytes, gf = rep.flops, rep.bytes, rep.gflops
    local r = {call = i, action = rep.action, strategy = rep.strategy, backend = rep.backend,
               precision = rep.precision, space = rep.space, ndofs = rep.ndofs, flops = flops,
               bytes = bytes, seconds = rep.seconds, gflops = gf, gbytes = rep.gbytes,
               predicted_seconds = rep.predicted_seconds, ratio = rep.ratio, bound = rep.bound,
               group = rep.backend .. "/" .. rep.precision, label = label_of(o.label, rep, i, where)}
    r.intensity = bytes > 0 and flops / bytes or nil
    r.peak_gbytes, r.peak_gflops = ceilings(rep)
    rows[#rows + 1] = r
    reps[#rows] = rep
    local g = byname[r.group]
    if not g then
      g = {name = r.group, points = 0}
      byname[r.group] = g
      groups[#groups + 1] = g
    end
    if not g.bw and r.peak_gbytes then g.bw, g.fl = r.peak_gbytes, r.peak_gflops end
    if r.intensity and r.intensity > 0 and gf > 0 then
      g.points = g.points + 1
      r.mark = marked(r) and 1 or 0
      xlo, xhi = math.min(xlo, r.intensity), math.max(xhi, r.intensity)
      ylo, yhi = math.min(ylo, gf), math.max(yhi, gf)
    end
  end
  if xhi == 0 then
    error(("%s: none of the %d calls (%d kept: first runs and repeats are left out unless all = " ..
           "true) has flops, bytes and a steady measured time to place: run an action a few " ..
           "times first (r, rep = A:residual(u))"):format(where, #calls, #kept), 2)
  end
  local bars = roof_bars(rows, reps)
  for _, b in ipairs(bars) do
    local y = tonumber(b:match("^[^,]+,([^,]+)"))
    ylo, yhi = math.min(ylo, y), math.max(yhi, y)
  end
  for _, g in ipairs(groups) do
    if g.bw then
      local ridge = g.fl / g.bw -- where the memory line meets the flat ceiling
      xlo, xhi = math.min(xlo, ridge), math.max(xhi, ridge)
      yhi = math.max(yhi, g.fl)
    end
  end
  xlo, xhi, ylo, yhi = xlo / 4, xhi * 4, ylo / 4, yhi * 3

  local title = o.title or ("the session's calls on the roofline (%d of %d calls%s)"):format(#rows, #calls,
                            o.all and "" or ": first runs and repeats left out")
  local gp = {gp_head(base, 1100, 750),
              ("set title %s"):format(gp_string(title)),
              "set xlabel \"arithmetic intensity (flop/byte)\"",
              "set ylabel \"measured performance (GF/s)\"",
              "set logscale xy",
              "set format x \"%g\"", "set format y \"%g\"",
              ("set xrange [%.6g:%.6g]"):format(xlo, xhi),
              ("set yrange [%.6g:%.6g]"):format(ylo, yhi),
              "set key top left box opaque Left reverse",
              "set samples 2000"}
  local plots = {}
  for gi, g in ipairs(groups) do
    if g.bw then
      gp[#gp + 1] = ("B%d = %.6g; F%d = %.6g"):format(gi, g.bw, gi, g.fl)
      gp[#gp + 1] = ("roof%d(x) = x * B%d < F%d ? x * B%d : F%d"):format(gi, gi, gi, gi, gi)
      plots[#plots + 1] = ("roof%d(x) with lines lt %d lw 2 title %s"):format(gi, gi,
        gp_string(("%s ceilings: %.3g GB/s, %.3g GF/s"):format(g.name, g.bw, g.fl)))
    end
    if g.points > 0 then
      plots[#plots + 1] = ("%s skip 1 using (strcol(18) eq %s ? $11 : 1/0):12 with points lt %d pt 7 ps 1.6 title %s")
        :format(csv, gp_string(g.name), gi,
                gp_string(("%s calls"):format(g.name)))
    end
  end
  if #bars > 0 then
    gp[#gp + 1] = "$bars << EOD\n" .. table.concat(bars, "\n") .. "\nEOD"
    plots[#plots + 1] = "$bars using 1:2:3:(0) with vectors nohead lc rgb \"#555555\" dt 2 lw 2 " ..
                        "title \"a ceiling that binds a call (the rate it alone allows)\""
    plots[#plots + 1] = "$bars using 1:2:4 with labels right offset -0.3,0 font \",8\" tc rgb \"#555555\" notitle"
  end
  plots[#plots + 1] = ("%s skip 1 using 11:12:(column(20) > 0 ? strcol(19) : \"\") with labels left offset 0.8,0.5 font \",9\" notitle")
    :format(csv)
  gp[#gp + 1] = "plot " .. table.concat(plots, ", \\\n     ")
  return finish(where, out, o, csv_text(roof_header, rows), table.concat(gp, "\n") .. "\n")
end

---------------------------------------------------------------------------------------------
-- perf.sweep{spaces =, sizes =, strategies =, backends =, precisions =, actions =, physics =,
--            cell =, repeat =, out =, title =, gnuplot =}

local sweep_header = {"backend", "precision", "space", "cells", "dofs", "strategy", "action", "seconds",
                      "predicted_seconds", "ratio", "gflops", "gbytes", "gdofs", "order"}
local sweep_keys = {"spaces", "sizes", "cells", "strategies", "backends", "precisions", "actions",
                    "physics", "cell", "repeat", "out", "title", "gnuplot", "x"}
-- the x axis of a sweep's plot: its column, its label, whether logarithmic
local sweep_x = {dofs = {"dofs", "degrees of freedom", true}, order = {"order", "order p of the space", false},
                 cells = {"cells", "cells per side", true}}
local actions = {apply = true, residual = true, diagonal = true}
local cell_dim = {tet = 3, hex = 3, prism = 3, tri = 2, quad = 2}

-- The cell type of a space name: Q on hexes (quads in 2D), P on tets (triangles in 2D).
local function cell_of(space, cell, where)
  if cell then
    if not cell_dim[cell] then
      error(("%s: cell must be one of tet, hex, prism, tri, quad, got %q"):format(where, cell), 3)
    end
    return cell
  end
  local fam = space:match("^(%a)%d+$")
  if fam == "Q" then return "hex" end
  if fam == "P" then return "tet" end
  error(("%s: space %q is not \"P<order>\" or \"Q<order>\"; name the cell (cell = \"hex\")"):format(where, space), 3)
end

-- The physics of the sweep and its number of components.
local function sweep_physics(p, where)
  if p == nil or p == "poisson" then return physics.poisson{kappa = 1, source = 1}, 1 end
  if p == "elasticity" then return physics.elasticity{E = 1, nu = 0.3}, 3 end
  if kind(p) == "felab.physics" then return p, p.ncomp end
  error(("%s: physics must be \"poisson\", \"elasticity\" or a physics object, got %s"):format(where, kind(p)), 3)
end

-- The available backends (device.list), by name, with the reason of the absent ones.
local function backend_table()
  local t = {}
  for _, b in ipairs(device.list()) do t[b.name] = b.available and true or (b.reason or "not available") end
  return t
end

-- Run one action rep times after two warm-up calls (the kernel's compile, transfers, and
-- whatever a strategy builds on its second use); the fastest report.
local function time_action(A, action, u, w, ao, nrep)
  local function once()
    local _, rep
    if action == "apply" then _, rep = A:apply(w, ao)
    elseif action == "residual" then _, rep = A:residual(u, ao)
    else _, rep = A:diagonal(ao) end
    return rep
  end
  once()
  once()
  local best
  for _ = 1, nrep do
    local rep = once()
    if not best or rep.seconds < best.seconds then best = rep end
  end
  return best
end

-- A series: every field of a row but the x axis's (and what follows from it: dofs go with
-- the space and the size).
local function sweep_series(r, x)
  local parts = {}
  if x ~= "order" then parts[#parts + 1] = r.space end
  if x == "order" then parts[#parts + 1] = ("%d/side"):format(r.cells) end
  parts[#parts + 1] = r.action
  parts[#parts + 1] = r.series_strategy
  parts[#parts + 1] = r.backend .. "/" .. r.precision
  return table.concat(parts, " ")
end

-- The column (1-based) of name in the sweep's CSV.
local function sweep_col(name)
  for i, k in ipairs(sweep_header) do
    if k == name then return i end
  end
end

-- The style of series i: eight colours, then the point type and the dash change with each
-- round of them, so that 12 or 48 series are told apart (colour x marker x dash).
local point_types = {7, 5, 9, 11, 13, 15}
local function sweep_style(i)
  local round = (i - 1) // 8
  return ("lc rgb %q pt %d dt %d"):format(({"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf"})[(i - 1) % 8 + 1], point_types[round % #point_types + 1],
    round % 4 + 1)
end

-- The gnuplot script of a sweep: time against x on the left (measured, and the model's
-- prediction as open points on a thin line), GDOF/s on the right; one style per series
-- (rows first..last), the legend below the plots, outside the data.
local function sweep_gp(base, series, title, x)
  local csv = gp_string(base .. ".csv")
  local xc, xlabel, xlog = table.unpack(sweep_x[x])
  local xi = sweep_col(xc)
  local rows_of_key = math.ceil(#series / 3)
  local gp = {gp_head(base, 1500, 600 + 18 * rows_of_key),
              ("set multiplot layout 1,2 title %s"):format(gp_string(title)),
              xlog and "set logscale x" or "unset logscale x", "set format x \"%g\"",
              ("set xlabel %s"):format(gp_string(xlabel)),
              x == "order" and "set xtics 1" or "",
              "set key below left Left reverse box font \",9\" maxcols 3",
              "set logscale y", "set format y \"%g\"",
              "set ylabel \"time per call (s)\"",
              "set title \"time (points and lines: measured; thin, open points: predicted)\""}
  local t, p, g = {}, {}, {}
  for i, s in ipairs(series) do
    local every, style = ("every ::%d::%d"):format(s.first, s.last), sweep_style(i)
    t[#t + 1] = ("%s skip 1 %s using %d:8 with linespoints %s lw 2 ps 1.2 title %s"):format(csv, every, xi, style, gp_string(s.name))
    p[#p + 1] = ("%s skip 1 %s using %d:9 with linespoints %s lw 0.8 pt %d ps 0.8 notitle"):format(csv, every, xi,
      style:gsub(" pt %d+", ""), 6)
    g[#g + 1] = ("%s skip 1 %s using %d:13 with linespoints %s lw 2 ps 1.2 title %s"):format(csv, every, xi, style, gp_string(s.name))
  end
  gp[#gp + 1] = "plot " .. table.concat(t, ", \\\n     ") .. ", \\\n     " .. table.concat(p, ", \\\n     ")
  gp[#gp + 1] = "unset logscale y"
  gp[#gp + 1] = "set yrange [0:*]"
  gp[#gp + 1] = "set ylabel \"throughput (GDOF/s: dofs / time / 1e9)\""
  gp[#gp + 1] = "set title \"throughput\""
  gp[#gp + 1] = "plot " .. table.concat(g, ", \\\n     ")
  gp[#gp + 1] = "unset multiplot"
  return table.concat(gp, "\n") .. "\n"
end

function perf.sweep(opts)
  local where = "perf.sweep"
  local o = opts or {}
  if type(o) ~= "table" then error(("%s: expected an options table, got %s"):format(where, kind(o)), 2) end
  check_keys(o, sweep_keys, where)
  if o.sizes ~= nil and o.cells ~= nil then error(("%s: give sizes or cells (the same thing), not both"):format(where), 2) end
  local cur_backend, cur_precision = device.current()
  local spaces = opt_strings(o, "spaces", {"P1", "P2"}, where)
  local sizes = o.sizes or o.cells or {4, 8, 16}
  if type(sizes) == "number" then sizes = {sizes} end
  if type(sizes) ~= "table" or #sizes == 0 then
    error(("%s: sizes must be a list of cells per side ({4, 8, 16}), got %s"):format(where, kind(sizes)), 2)
  end
  for i, n in ipairs(sizes) do
    if math.tointeger(n) == nil or n < 1 then
      error(("%s: sizes[%d] must be an integer >= 1 (cells per side), got %s"):format(where, i, tostring(n)), 2)
    end
  end
  local strategies = opt_strings(o, "strategies", {false}, where) -- false: the default pick
  local backends = opt_strings(o, "backends", {cur_backend}, where)
  local precisions = opt_strings(o, "precisions", {cur_precision or "double"}, where)
  local acts = opt_strings(o, "actions", {"apply"}, where)
  for _, a in ipairs(acts) do
    if not actions[a] then
      error(("%s: action %q is not one of apply, residual, diagonal"):format(where, a), 2)
    end
  end
  local nrep = o["repeat"] or 3
  if math.tointeger(nrep) == nil or nrep < 1 then
    error(("%s: repeat must be an integer >= 1, got %s"):format(where, tostring(nrep)), 2)
  end
  local x = opt_string(o, "x", "dofs", where)
  if not sweep_x[x] then
    error(("%s: x must be \"dofs\", \"order\" or \"cells\" (the plot's x axis), got %q"):format(where, x), 2)
  end
  local cell_opt = opt_string(o, "cell", nil, where)
  local pde, ncomp = sweep_physics(o.physics, where)
  local out = o.out or "sweep"
  split_out(out, where) -- checked before the work, not after
  local have = backend_table()

  local total = #spaces * #sizes * #strategies * #backends * #precisions * #acts
  local rows, case, skipped = {}, 0, {}
  local function skip(msg, n)
    case = case + n
    if not skipped[msg] then print(("sweep  skip: %s"):format(msg)) end
    skipped[msg] = true
  end
  for _, sname in ipairs(spaces) do
    local cell = cell_of(sname, cell_opt, where)
    local fam, order = sname:match("^(%a)(%d+)$")
    for _, n in ipairs(sizes) do
      local cells = cell_dim[cell] == 3 and {n, n, n} or {n, n}
      local m = mesh.box{cells = cells, cell = cell}
      local V = fe.space(m, ncomp > 1 and fam and {family = fam, order = tonumber(order), components = ncomp} or sname)
      local A = fe.operator(V, pde, {dirichlet = "all", value = 0})
      local u = V:interpolate(function(x) return x[1] * (1 - x[1]) + 0.5 * x[2] end)
      local w = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] * x[#x] end)
      local per_case = #acts
      for _, be in ipairs(backends) do
        if have[be] ~= true then
          skip(("backend %s: %s"):format(be, have[be] or "unknown backend (device.list() names them)"),
               per_case * #precisions * #strategies)
          goto next_backend
        end
        for _, prec in ipairs(precisions) do
          local _, sinfo = A:strategies{backend = be, precision = prec}
          for _, st in ipairs(strategies) do
            if st and not sinfo[st] then
              local known = {}
              for k in pairs(sinfo) do known[#known + 1] = k end
              table.sort(known)
              error(("%s: unknown strategy %q (known: %s)"):format(where, st, table.concat(known, ", ")), 2)
            end
            if st and not sinfo[st].applies then
              skip(("strategy %s on %s (%s) %s/%s: %s"):format(st, sname, cell, be, prec, sinfo[st].why), per_case)
              goto next_strategy
            end
            for _, act in ipairs(acts) do
              local ao = {backend = be, precision = prec, strategy = st or nil}
              local rep = time_action(A, act, u, w, ao, nrep)
              case = case + 1
              local r = {backend = be, precision = prec, space = sname, cells = n, dofs = V.ndofs,
                         strategy = rep.strategy, action = act, seconds = rep.seconds,
                         predicted_seconds = rep.predicted_seconds, ratio = rep.ratio,
                         gflops = rep.gflops, gbytes = rep.gbytes,
                         gdofs = rep.seconds > 0 and V.ndofs / rep.seconds * 1e-9 or nil,
                         order = tonumber(order), series_strategy = st or "default"}
              rows[#rows + 1] = r
              print(("sweep %3d/%d  %-3s %s %2d cells/side %8d dofs  %s/%s %-8s %-10s %10.4g ms  (predicted %.4g ms)  %.3g GDOF/s")
                    :format(case, total, sname, cell, n, V.ndofs, be, prec, act, rep.strategy,
                            rep.seconds * 1e3, rep.predicted_seconds * 1e3, r.gdofs or 0))
            end
            ::next_strategy::
          end
        end
        ::next_backend::
      end
    end
  end
  if #rows == 0 then
    error(("%s: every case was skipped (see the lines above): nothing to write"):format(where), 2)
  end

  -- rows by series (in the order first met), then by dofs: each series is a run of rows
  local order, rank = {}, {}
  local xk = sweep_x[x][1]
  for i, r in ipairs(rows) do
    local s = sweep_series(r, x)
    if not rank[s] then rank[s] = #order + 1; order[#order + 1] = s end
    r.index = i
  end
  table.sort(rows, function(a, b)
    local ra, rb = rank[sweep_series(a, x)], rank[sweep_series(b, x)]
    if ra ~= rb then return ra < rb end
    if (a[xk] or 0) ~= (b[xk] or 0) then return (a[xk] or 0) < (b[xk] or 0) end
    return a.index < b.index
  end)
  local series = {}
  for i, r in ipairs(rows) do
    local s = sweep_series(r, x)
    local last = series[#series]
    if last and last.name == s then last.last = i - 1
    else series[#series + 1] = {name = s, first = i - 1, last = i - 1} end
    r.index, r.series_strategy = nil, nil
  end
  local _, base = split_out(out, where)
  local title = o.title or ("%s over mesh sizes (%s physics)"):format(table.concat(acts, ", "),
                                                                   type(o.physics) == "string" and o.physics or pde.name)
  local files = finish(where, out, o, csv_text(sweep_header, rows), sweep_gp(base, series, title, x))
  return rows, files
end

---------------------------------------------------------------------------------------------
-- perf.plot(info or {info, ...}, {out =, label =, title =, gnuplot =}) and info:plot{...}

local function is_info(t)
  return type(t) == "table" and type(rawget(t, "history")) == "table"
end

function perf.plot(infos, opts)
  local where = "perf.plot"
  local o = opts or {}
  if type(o) ~= "table" then error(("%s: argument 2 must be an options table, got %s"):format(where, kind(o)), 2) end
  check_keys(o, {"out", "label", "title", "gnuplot"}, where)
  if is_info(infos) then infos = {infos} end
  if type(infos) ~= "table" or #infos == 0 then
    error(("%s: argument 1 must be a solver's info (u, info = solve.cg(A)) or a list of them, got %s")
          :format(where, kind(infos)), 2)
  end
  local labels = o.label
  if type(labels) == "string" then labels = {labels} end
  if labels ~= nil and type(labels) ~= "table" then
    error(("%s: label must be a string or a list of strings, got %s"):format(where, kind(labels)), 2)
  end
  local rows, series, lo = {}, {}, math.huge
  for i, info in ipairs(infos) do
    if not is_info(info) then
      error(("%s: run %d is not a solver's info with a history (solve.cg, solve.gmres, solve.newton ...), got %s")
            :format(where, i, kind(info)), 2)
    end
    local label = labels and labels[i]
    if label == nil then
      label = ("%s%s: %d iterations%s"):format(#infos > 1 and ("run %d, "):format(i) or "",
                                             info.pc and "pc " .. info.pc or "no pc",
                                             math.tointeger(info.iterations) or #info.history - 1,
                                             info.converged == false and " (not converged)" or "")
    end
    local first = #rows
    for k, r in ipairs(info.history) do
      rows[#rows + 1] = {run = i, label = label, iteration = k - 1, residual = r}
      if r > 0 then lo = math.min(lo, r) end
    end
    if #rows > first then series[#series + 1] = {first = first, last = #rows - 1, label = tostring(label)} end
  end
  if #series == 0 then error(("%s: the history is empty: nothing to draw"):format(where), 2) end
  local out = o.out or "residuals"
  local _, base = split_out(out, where)
  local csv = gp_string(base .. ".csv")
  local gp = {gp_head(base, 1000, 650),
              ("set title %s"):format(gp_string(o.title or "residual history")),
              "set xlabel \"iteration\"", "set ylabel \"residual norm\"",
              "set logscale y", "set format y \"%.0e\"", "set key top right box opaque Left reverse"}
  local p = {}
  for i, s in ipairs(series) do
    p[i] = ("%s skip 1 every ::%d::%d using 3:4 with linespoints lt %d pt 7 ps 0.8 lw 2 title %s")
      :format(csv, s.first, s.last, i, gp_string(s.label))
  end
  gp[#gp + 1] = "plot " .. table.concat(p, ", \\\n     ")
  return finish(where, out, o, csv_text({"run", "label", "iteration", "residual"}, rows),
                table.concat(gp, "\n") .. "\n")
end

-- info:plot{...}: the methods of a solver's info table (made in shell/lua-solve.c).
if type(info_meta) == "table" then
  info_meta.plot = perf.plot -- info:plot(opts) is perf.plot(info, opts): one function, one entry
  info_meta.__index = info_meta -- the methods live in the metatable, as for felab's userdata
end

---------------------------------------------------------------------------------------------
-- Help entries: {key, signature, text}, registered by felab_open_all.

local plot_entry = {
  "perf.plot(info | {info, ...}, {out = \"residuals\", label =, title =, gnuplot = true}); info:plot{...}",
  "Draw the residual history of one solve, or of several overlaid (labels from label = a\n"
  .. "string or a list, else each info's pc), against the iteration on a log scale. Writes\n"
  .. "out.csv, out.gp and out.png (with gnuplot). Returns {csv =, gp =, png =}. info:plot{...}\n"
  .. "is the same function: perf.plot(info, {...}).\n"
  .. "example: _, a = solve.cg(A, {pc = \"jacobi\"}); _, b = solve.cg(A, {pc = \"none\"}); perf.plot{a, b}"}

return {
  {"perf.roofline", "perf.roofline{out = \"roof\", calls = perf.history(), title =, gnuplot = true}",
   "Draw calls on the calibrated roofline: one labelled point per call (action/strategy) at its\n"
   .. "arithmetic intensity (flops/bytes) and measured GF/s, log-log, with the ceilings of each\n"
   .. "backend/precision present (memory line peak GB/s x intensity, flat peak GF/s). Writes\n"
   .. "out.csv, out.gp and, when gnuplot is on the PATH (FELAB_GNUPLOT=0 or gnuplot = false turn\n"
   .. "it off), out.png. Returns {csv =, gp =, png =}.\n"
   .. "example: A:apply(u); A:residual(u); perf.roofline{out = \"roof\"}"},
  {"perf.sweep",
   "rows, files = perf.sweep{spaces = {\"P1\", \"P2\"}, sizes = {4, 8, 16}, strategies =, backends =, "
   .. "precisions =, actions = {\"apply\"}, physics = \"poisson\", cell =, repeat = 3, out = \"sweep\"}",
   "Time an action on box meshes of sizes^3 cells (hexes for Q spaces, tets for P; cell = to\n"
   .. "choose) for every space, strategy, backend and precision, one printed line per case, the\n"
   .. "fastest of repeat runs after two warm-up runs (sizes is also spelled cells). Strategies\n"
   .. "that do not apply are skipped with the reason. Writes out.csv (backend, precision, space,\n"
   .. "cells per side, dofs, strategy, action,\n"
   .. "seconds, predicted_seconds, ratio, gflops, gbytes, gdofs) and out.png (time and GDOF/s\n"
   .. "against dofs, one line per space/strategy/backend/precision); returns the rows.\n"
   .. "example: rows = perf.sweep{spaces = {\"Q2\"}, sizes = {4, 8}, strategies = {\"transpose\", \"sumfact\"}}"},
  {"perf.plot", plot_entry[1], plot_entry[2]},
  {"felab.info", "info.iterations, info.converged, info.reason, info.history, info.pc, info.report; info:plot{}",
   "What a solve did: iterations, whether it converged and why it stopped, the residual norm\n"
   .. "of every iteration (history), the preconditioner and the report of the whole solve.\n"
   .. "example: u, info = solve.cg(A, {pc = \"jacobi\"}); print(info.iterations, info.reason)"},
  {"felab.info:plot", plot_entry[1], plot_entry[2]},
}
