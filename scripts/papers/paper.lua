-- What the paper scripts share (not a paper itself): their arguments, their checks, and the
-- table that sets the paper's figures beside felab's. A script loads it with
--   local P = dofile((arg[0]:match("^(.*/)") or "") .. "paper.lua")("kiss", "Kiss et al. ...")
-- and is run as `felab scripts/papers/kiss.lua [quick] [backend=cuda]`: quick takes the test's
-- small sizes (tests/scripts/test_papers.lua); the cpu is what CI runs, and a GPU backend
-- (cuda) is used besides it where it is present and the run is not quick.
--
-- A paper's figure is quoted from its text, with where it is (table, figure, section), and
-- labelled "paper"; everything in the felab column is measured or counted by this run.
return function(name, title)
  local P = {name = name, checked = {}, rows = {}, quick = false, backend = "cpu"}
  for _, a in ipairs(arg or {}) do
    local k, v = a:match("^(%w+)=(.*)$")
    if a == "quick" then
      P.quick = true
    elseif k == "backend" then
      P.backend = v
    else
      error(("%s: unknown argument '%s' (quick, backend=cpu|opencl|cuda)"):format(name, a), 0)
    end
  end
  -- a GPU backend present here (its name), or nil: device.list() says which are available
  for _, d in ipairs(device.list()) do
    if d.name == "cuda" and d.available then P.gpu = "cuda" end
  end
  P.t0 = perf.clock()
  print(("%s, rerun by felab on %s%s"):format(title, P.backend,
    P.quick and " (quick: the test's small sizes)" or ""))

  -- v for quick runs, else full
  function P.size(full, quick) return P.quick and quick or full end

  -- A claim of the script, measured: printed as "checked: ..." when it holds, an error that
  -- names it (felab exits nonzero) when it does not.
  function P.check(cond, fmt, ...)
    local msg = select("#", ...) > 0 and fmt:format(...) or fmt
    if not cond then error(("%s: the check '%s' does not hold here"):format(name, msg), 2) end
    P.checked[#P.checked + 1] = msg
    print("checked: " .. msg)
  end

  -- The report with the fewest seconds of n calls of fn after a first one (compile, setup):
  -- on a shared machine the fastest run is the least disturbed. fn returns (result, report).
  function P.best(n, fn)
    local best, result
    for i = 0, n do
      local r, rep = fn()
      if i > 0 and (not best or rep.seconds < best.seconds) then best, result = rep, r end
    end
    return best, result
  end

  -- The least-squares slope of log(ys) against log(xs): y ~ x^slope.
  function P.slope(xs, ys)
    local n, sx, sy, sxx, sxy = #xs, 0, 0, 0, 0
    for i = 1, n do
      local x, y = math.log(xs[i]), math.log(ys[i])
      sx, sy, sxx, sxy = sx + x, sy + y, sxx + x * x, sxy + x * y
    end
    return (n * sxy - sx * sy) / (n * sxx - sx * sx)
  end

  -- Print a table: a header row of names and rows of values formatted by fmts (one per column).
  function P.table(header, fmts, rows)
    local widths = {}
    for i, h in ipairs(header) do widths[i] = math.max(#h, 8) end
    local cells = {}
    for r, row in ipairs(rows) do
      cells[r] = {}
      for i, v in ipairs(row) do
        local s = type(v) == "number" and fmts[i]:format(v) or tostring(v)
        cells[r][i] = s
        widths[i] = math.max(widths[i], #s)
      end
    end
    local function line(t)
      local out = {}
      for i = 1, #header do
        local left = i == 1 or (i == #header and fmts[i] == "%s") -- names left, numbers right
        out[i] = ("%" .. (left and "-" or "") .. widths[i] .. "s"):format(t[i] or "")
      end
      print((table.concat(out, "  "):gsub("%s+$", "")))
    end
    line(header)
    for _, c in ipairs(cells) do line(c) end
  end

  -- One row of the comparison: what, the paper's figure (a number) and where it is, felab's
  -- (a number), and how they compare (a short note: what differs between the two).
  function P.compare(what, paper, where, felab, note)
    P.rows[#P.rows + 1] = {what = what, paper = paper, where = where, felab = felab, note = note}
  end

  -- The comparison's table: paper, felab, felab / paper, where in the paper; notes below.
  function P.print_comparison(heading)
    print(("\n== %s: the paper's figures (quoted) beside felab's (measured or counted here)"):format(
      heading or name))
    local rows, notes = {}, {}
    for i, r in ipairs(P.rows) do
      local ratio = (type(r.paper) == "number" and type(r.felab) == "number" and r.paper ~= 0)
        and ("%.3g"):format(r.felab / r.paper) or "-"
      local function num(v) return type(v) == "number" and ("%.4g"):format(v) or tostring(v) end
      rows[i] = {r.what, num(r.paper), num(r.felab), ratio, r.where}
      if r.note then notes[#notes + 1] = ("  (%d) %s"):format(i, r.note) end
      rows[i][1] = ("(%d) %s"):format(i, r.what)
    end
    P.table({"quantity", "paper", "felab", "felab/paper", "where in the paper"},
            {"%s", "%s", "%s", "%s", "%s"}, rows)
    if #notes > 0 then
      print("notes:")
      for _, n in ipairs(notes) do print(n) end
    end
  end

  -- The closing line, which tests/scripts/test_papers.lua looks for.
  function P.done()
    print(("\n%s: %d checks passed, %.1f s%s"):format(name, #P.checked, perf.clock() - P.t0,
      P.quick and " (quick)" or ""))
    return P
  end
  return P
end
