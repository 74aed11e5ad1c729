-- Plots (issues 17 and 49): perf.sweep writes one CSV row per case with the dofs of its space
-- and the order, one style per series, the legend outside, x by dofs or order; perf.roofline
-- one row per call (all = true) or per steady call, labelled with the space and order, the
-- ceilings that bind a call drawn; perf.plot and info:plot the residual history; with gnuplot
-- each writes a PNG, and with gnuplot = false the .csv and .gp but no PNG. Tiny meshes.
-- Run: build/felab tests/scripts/test_plot.lua (exits nonzero on failure).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, expect_error = T.check, T.expect_error

local dir = os.tmpname()
os.remove(dir)
check(os.execute("mkdir -p '" .. dir .. "'"))
local function path(name) return dir .. "/" .. name end

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The CSV at p: its header (a list of names) and rows (tables keyed by those names; numbers
-- where a field reads as one). felab's CSV quotes no field of these files.
local function read_csv(p)
  local f = check(io.open(p))
  local header, rows = nil, {}
  for line in f:lines() do
    local fields = {}
    for v in (line .. ","):gmatch("([^,]*),") do fields[#fields + 1] = tonumber(v) or v end
    if not header then
      header = fields
    else
      local r = {}
      for i, k in ipairs(header) do r[k] = fields[i] end
      rows[#rows + 1] = r
    end
  end
  f:close()
  return header, rows
end

-- Whether a gnuplot will draw (on the PATH and not turned off by FELAB_GNUPLOT=0).
local has_gnuplot = os.getenv("FELAB_GNUPLOT") ~= "0" and os.execute("command -v gnuplot >/dev/null 2>&1")
if not has_gnuplot then T.skip("the PNG files: no gnuplot (or FELAB_GNUPLOT=0)") end

local function check_png(p)
  if not has_gnuplot then return end
  check(exists(p), "%s was not written", p)
  local f = check(io.open(p, "rb"))
  local sig = f:read(4)
  f:close()
  check(sig == "\137PNG", "%s does not begin with the PNG signature", p)
end

-- sweep_csv_has_one_row_per_case_with_the_dofs_of_its_space
local spaces, sizes = {"P1", "Q2"}, {1, 2}
local strategies = {"transpose", "sumfact"} -- sumfact does not apply to P1 on tets: skipped
local rows, files = perf.sweep{spaces = spaces, sizes = sizes, strategies = strategies,
                               actions = {"apply", "residual"}, ["repeat"] = 1, out = path("sweep")}
local header, csv = read_csv(path("sweep.csv"))
check(table.concat(header, ",") == "backend,precision,space,cells,dofs,strategy,action,seconds,"
      .. "predicted_seconds,ratio,gflops,gbytes,gdofs,order", "sweep.csv header: %s", table.concat(header, ","))
local want = 2 * 2 * 1 + 2 * 2 * 2 -- P1: transpose only; Q2: both; two sizes, two actions
check(#csv == want and #rows == want, "sweep: %d CSV rows and %d returned, want %d", #csv, #rows, want)
local ndofs = {}
for _, s in ipairs(spaces) do
  for _, n in ipairs(sizes) do
    local m = mesh.box{cells = {n, n, n}, cell = s:sub(1, 1) == "Q" and "hex" or "tet"}
    ndofs[s .. "/" .. n] = fe.space(m, s).ndofs
  end
end
for i, r in ipairs(csv) do
  check(r.seconds > 0 and r.predicted_seconds > 0 and r.gdofs > 0, "sweep row %d: times %s %s", i,
        tostring(r.seconds), tostring(r.predicted_seconds))
  check(r.dofs == ndofs[r.space .. "/" .. r.cells], "sweep row %d: %s with %d cells per side has %s dofs, want %d",
        i, r.space, r.cells, tostring(r.dofs), ndofs[r.space .. "/" .. r.cells])
  check(r.space ~= "P1" or r.strategy ~= "sumfact", "sweep row %d: sumfact ran on P1 tets", i)
  check(T.close(r.gdofs, r.dofs / r.seconds * 1e-9, 1e-6), "sweep row %d: gdofs", i)
  check(rows[i].space == r.space and rows[i].dofs == r.dofs and rows[i].action == r.action,
        "sweep row %d: the returned table and the CSV differ", i)
end
check(exists(files.gp) and files.csv == path("sweep.csv"), "sweep: the .gp is written")
-- sweep_series_have_distinct_styles_and_the_legend_outside: one style (colour, marker, dash)
-- per series, twelve and more told apart; the legend below the plots
local gpf = check(io.open(files.gp))
local gptext = gpf:read("a")
gpf:close()
local styles, nseries = {}, 0
for style in gptext:gmatch("with linespoints (lc rgb \"#%x+\" pt %d+ dt %d+) lw 2 ps 1.2 title") do
  if not styles[style] then nseries = nseries + 1 end
  styles[style] = true
end
check(nseries == 6 * 1, "sweep: %d distinct styles for 6 series", nseries)
check(gptext:find("set key below", 1, true), "sweep: the legend is not outside the data")
check_png(path("sweep.png"))
print(("sweep: %d rows, header and dofs ok"):format(#csv))

-- sweep_x_by_order: one series per size, the order on x
local orows = perf.sweep{spaces = {"Q1", "Q2"}, sizes = {1}, strategies = {"transpose"}, ["repeat"] = 1,
                         x = "order", out = path("sweepo"), gnuplot = false}
local of = check(io.open(path("sweepo.gp")))
local otext = of:read("a")
of:close()
check(#orows == 2 and orows[1].order == 1 and orows[2].order == 2, "sweep x = order: rows and orders")
check(otext:find("using 14:8 with linespoints", 1, true) and otext:find("order p of the space", 1, true),
      "sweep x = order: the plot's x is not the order column")
expect_error(function() perf.sweep{x = "time"} end, "x must be \"dofs\", \"order\" or \"cells\"")

-- roofline_leaves_out_first_runs_and_repeats: all = true one row per call; by default the
-- first runs left out and one row (the fastest) per repeated call, labelled action, space
-- and order, strategy
local calls = perf.history()
local f = perf.roofline{out = path("roof"), title = "test roofline", all = true}
local _, roof = read_csv(path("roof.csv"))
check(#roof == #calls, "roof.csv with all = true has %d rows, the session %d calls", #roof, #calls)
for i, r in ipairs(roof) do
  check(r.call == i and r.label == ("%s %s %s"):format(r.action, r.space:match("^(%S+) on "), r.strategy),
        "roof row %d: call and label %q", i, r.label)
end
check_png(f.png or path("roof.png"))
perf.roofline{out = path("roofk"), gnuplot = false}
local _, kept = read_csv(path("roofk.csv"))
local distinct, firsts = {}, 0
for _, rep in ipairs(calls) do
  if rep.first_run then firsts = firsts + 1
  else distinct[table.concat({rep.action, rep.strategy, rep.space, rep.ndofs, rep.precision}, "|")] = true end
end
local ndistinct = 0
for _ in pairs(distinct) do ndistinct = ndistinct + 1 end
check(firsts > 0 and #kept == ndistinct, "roofline: %d rows kept, want %d (of %d calls, %d first runs)",
      #kept, ndistinct, #calls, firsts)
-- a label of one's own; a ceiling that binds a call drawn beside it ("launches" binds these tiny calls)
perf.roofline{out = path("roofl"), gnuplot = false, calls = {calls[#calls]}, label = {"my point"}, all = true}
local _, labelled = read_csv(path("roofl.csv"))
check(labelled[1].label == "my point", "roofline label option: %s", tostring(labelled[1].label))
local lf = check(io.open(path("roofl.gp")))
local ltext = lf:read("a")
lf:close()
check(ltext:find("$bars << EOD", 1, true) and (ltext:find(",launches\n", 1, true) or
      ltext:find(",indexed\n", 1, true)), "roofline: no ceiling bar for the call's bound (%s)", calls[#calls].bound)
local some = {calls[1], calls[#calls]}
perf.roofline{out = path("roof2"), calls = some, all = true}
local _, roof2 = read_csv(path("roof2.csv"))
check(#roof2 == 2, "calls = a list of two reports: %d rows", #roof2)
print(("roofline: %d rows for %d calls ok"):format(#roof, #calls))

-- plot_draws_residual_histories_of_one_or_several_solves
local m = mesh.box{cells = {3, 3, 3}, cell = "hex"}
local A = fe.operator(fe.space(m, "Q1"), physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local _, i1 = solve.cg(A, {pc = "jacobi", rtol = 1e-8})
local _, i2 = solve.cg(A, {pc = "none", rtol = 1e-8})
local p1 = i1:plot{out = path("cg")}
check(exists(p1.csv) and exists(p1.gp), "info:plot writes its .csv and .gp")
check_png(path("cg.png"))
local _, hist = read_csv(path("cg.csv"))
check(#hist == #i1.history and hist[1].iteration == 0, "cg.csv: %d rows, history %d", #hist, #i1.history)
perf.plot({i1, i2}, {out = path("both"), label = {"jacobi", "none"}})
local _, both = read_csv(path("both.csv"))
check(#both == #i1.history + #i2.history and both[#both].label == "none", "two runs overlaid")
check_png(path("both.png"))
print("perf.plot and info:plot ok")

-- without_gnuplot_the_csv_and_script_are_written_and_no_png
local q = perf.plot(i1, {out = path("nognuplot"), gnuplot = false})
check(exists(path("nognuplot.csv")) and exists(path("nognuplot.gp")), "gnuplot = false: .csv and .gp written")
check(not exists(path("nognuplot.png")) and q.png == nil, "gnuplot = false: no PNG")
perf.roofline{out = path("roof3"), gnuplot = false}
check(exists(path("roof3.gp")) and not exists(path("roof3.png")), "roofline without gnuplot")
print("without gnuplot: .csv and .gp, no PNG ok")

-- bad_options_are_named
expect_error(function() perf.sweep{spaces = {"P1"}, sizes = {1}, strategies = {"nope"}, gnuplot = false,
                                   out = path("bad")} end, "unknown strategy \"nope\"")
expect_error(function() perf.sweep{sizes = {0}} end, "sizes[1] must be an integer >= 1")
expect_error(function() perf.sweep{actions = {"solve"}} end, "action \"solve\"")
expect_error(function() perf.roofline{calls = {1}} end, "calls[1] must be a report")
expect_error(function() perf.plot({}, {}) end, "a solver's info")
expect_error(function() perf.plot(i1, {colour = 1}) end, "unknown option 'colour'")
print("bad options named ok")

os.execute("rm -rf '" .. dir .. "'")
T.done()
