-- Benchmark (not a test): the model against the measurement, case by case (issue 17). For
-- each case of the GPU benchmark tables (spaces, strategies, both precisions) the Poisson
-- Jacobian action, best of `reps` applies: measured, predicted, their ratio, the ceiling that
-- binds, the occupancy and the time of each ceiling alone; then the what-if prediction for
-- another device (`predict_for`, default H200) from this device's calibration, to be
-- checked against a run there. Writes a CSV.
-- usage: felab scripts/bench/model.lua [backend] [out.csv] [predict_for] [cases] [scale] [passes] [each]
--   cases: a comma list of names below (default all); scale: 1 = the table sizes, 0.5 = half;
--   passes (default 1): the whole table again, each pass after a new calibration; a case's row
--   is that of its pass of the median ratio (the lower middle one of an even count), and the
--   table shows every pass's ratio. A machine whose speed moves in phases (the 2-core virtual
--   machine: up to 2x, for a second or more, in the calibration and in the applies alike) then
--   has one slow phase outvoted.
--   each: "each" calibrates again before every case and precision (the cpu: 0.3 s each), so
--   that a case's prediction and its measurement come from the same stretch of the machine's
--   speed, not one a minute apart.
local backend = arg[1] or "cuda"
local out = arg[2] or "model.csv"
local predict_for = arg[3] or "H200"
if predict_for == "" then predict_for = nil end -- "": no what-if
local only = arg[4] and arg[4] ~= "" and arg[4] or nil
local scale = tonumber(arg[5]) or 1
local passes = math.max(1, math.floor(tonumber(arg[6]) or 1))
local each = arg[7] == "each"
local reps = 10

-- name, cell, space, cells per side, strategies, options
local cases = {
  {"P1-tet", "tet", "P1", 96, {"patch", "transpose", "csr"}},
  {"Q1-hex", "hex", "Q1", 128, {"transpose", "patch", "sumfact"}},
  {"P2-tet", "tet", "P2", 48, {"patch", "transpose", "csr"}},
  {"Q2-hex", "hex", "Q2", 64, {"sumfact", "transpose"}},
  {"Q3-hex", "hex", "Q3", 48, {"sumfact"}, {geometry = "vertices"}},
  {"Q3s-hex", "hex", "Q3", 48, {"sumfact"}, {geometry = "stored"}},
  {"Q5-hex", "hex", "Q5", 29, {"sumfact"}, {geometry = "vertices"}},
  {"Q7-hex", "hex", "Q7", 28, {"sumfact"}, {geometry = "vertices"}},
}
local wanted = {}
if only then for name in only:gmatch("[^,]+") do wanted[name] = true end end

device.use(backend)
local runs_of, order = {}, {} -- each case's rows, one a pass; the cases in order
for pass = 1, passes do
  if passes > 1 then print(("-- pass %d of %d"):format(pass, passes)) end
  for _, p in ipairs({"double", "single"}) do
    local c = device.calibrate(backend, p)
    local k = device.info(backend).calibration[p]
    print(("calibration %s %s: dram %.0f GB/s, l2 %.0f GB/s, shared %.0f GB/s, fma %.0f GF/s, " ..
           "div %.1f G/s, atomics %.1f G/s, constant %.1f G/s, indexed %.2f G/s, rows %.1f GB/s, launch %.1f us, sync %.1f us, " ..
           "latency: dram %.3f us, l2 %.3f us, phase %.3f us (%.1f s)"):format(backend, p, k.gbytes,
      k.l2_gbytes, k.shared_gbytes, k.gflops, k.nonfma_gops, k.atomic_gops, k.constant_gops, k.indexed_gops,
      k.rows_gbytes or 0,
      k.launch_us, k.sync_us, k.dram_latency_us, k.l2_latency_us, k.phase_latency_us, c.seconds))
    if k.curves then
      for _, name in ipairs({"dram", "shared", "fma"}) do
        local v = {}
        for i, x in ipairs(k.curves[name]) do v[i] = ("%d:%.2f"):format(2 ^ i, x) end
        print(("  %-6s at warps/unit %s"):format(name, table.concat(v, " ")))
      end
    end
  end

  for _, c in ipairs(cases) do
    if not only or wanted[c[1]] then
      local n = math.max(2, math.floor(c[4] * scale + 0.5))
      local m = mesh.box{cells = n, cell = c[2]}
      local V = fe.space(m, c[3])
      local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
      for _, prec in ipairs({"double", "single"}) do
        local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to(backend, prec)
        if each then device.calibrate(backend, prec) end
        for _, s in ipairs(c[5]) do
          local o = {backend = backend, precision = prec, strategy = s}
          for k, v in pairs(c[6] or {}) do o[k] = v end
          local ok, err = pcall(function()
            local _, best = A:apply(w, o)
            for _ = 2, reps do
              local _, rep = A:apply(w, o)
              if rep.seconds < best.seconds then best = rep end
            end
            local wi = {predicted_seconds = 0}
            if predict_for then
              local po = {device = predict_for}
              for k, v in pairs(o) do po[k] = v end -- the case's options too (geometry, ...)
              wi = perf.predict(A, po)
            end
            local t = best.ceilings
            local r = {c[1], prec, s, V.ndofs, best.seconds * 1e3, best.predicted_seconds * 1e3,
                       best.ratio, best.bound, best.occupancy, t.dram * 1e3, t.l2 * 1e3,
                       t.shared * 1e3, t.fma * 1e3, t.nonfma * 1e3, t.atomics * 1e3, t.constant * 1e3,
                       t.indexed * 1e3, t.launches * 1e3, predict_for or "", wi.predicted_seconds * 1e3,
                       t.latency * 1e3, best.groups, best.resident, best.dram_trips, best.l2_trips,
                       best.phases, (best.l1_tag_seconds or 0) * 1e3, best.l1_requests or 0,
                       best.l1_lines or 0, best.l1_wavefronts or 0, best.shared_bytes or 0,
                       (best.serial_seconds or 0) * 1e3, best.group_items or 0,
                       (best.stagger_seconds or 0) * 1e3, best.waits_hidden or 0,
                       (best.loop_seconds or 0) * 1e3, best.loop_cycles or 0}
            local ph = best.phase_seconds or {}
            for p = 1, 4 do r[#r + 1] = (ph[p] or 0) * 1e3 end
            local key = table.concat({c[1], prec, s}, " ")
            if not runs_of[key] then runs_of[key], order[#order + 1] = {}, key end
            table.insert(runs_of[key], r)
            print(best)
          end)
          if not ok then print(("%s %s %s: %s"):format(c[1], prec, s, err)) end
        end
      end
    end
  end
end -- passes

local f = assert(io.open(out, "w"))
local cols = {"case", "precision", "strategy", "dofs", "measured_ms", "predicted_ms", "ratio",
              "bound", "occupancy", "dram_ms", "l2_ms", "shared_ms", "fma_ms", "nonfma_ms",
              "atomics_ms", "constant_ms", "indexed_ms", "launches_ms", "whatif_device", "whatif_ms",
              "latency_ms", "groups", "resident", "dram_trips", "l2_trips", "phases", "l1_tag_ms",
              "l1_requests", "l1_lines", "l1_wavefronts", "shared_bytes", "serial_ms", "group_items",
              "stagger_ms", "waits_hidden", "loop_ms", "loop_cycles", "phase1_ms", "phase2_ms",
              "phase3_ms", "phase4_ms"}
f:write(table.concat(cols, ","), "\n")
local rows, ratios = {}, {} -- each case's row of the median ratio; every pass's ratios
for i, key in ipairs(order) do
  local runs = runs_of[key]
  local by = {}
  for j, r in ipairs(runs) do by[j] = ("%.2f"):format(r[7]) end
  ratios[i] = table.concat(by, " ")
  table.sort(runs, function(a, b) return a[7] < b[7] end)
  rows[i] = runs[(#runs + 1) // 2]
  f:write(table.concat(rows[i], ","), "\n")
end
f:close()

print(("\n%-8s %-6s %-9s %8s %9s %9s %6s %-8s %5s  %s"):format("case", "prec", "strategy",
      "dofs", "meas ms", "pred ms", "ratio", "bound", "occ", (predict_for or "-") .. " ms"))
local within, within25 = 0, 0
for i, r in ipairs(rows) do
  print(("%-8s %-6s %-9s %8d %9.4f %9.4f %6.2f %-8s %4.0f%%  %.4f%s"):format(r[1], r[2], r[3], r[4],
        r[5], r[6], r[7], r[8], 100 * r[9], r[20], passes > 1 and "  passes: " .. ratios[i] or ""))
  if math.abs(r[7] - 1) <= 0.15 then within = within + 1 end
  if math.abs(r[7] - 1) <= 0.25 then within25 = within25 + 1 end
end
print(("%d of %d cases within 15%%, %d within 25%% (csv: %s)"):format(within, #rows, within25, out))
