-- The model of a split space's exchange (engine/perf/model.c's fe_perf_exchange and
-- fe_perf_reduction, issue 48), on one rank: each term from its inputs (the calibration's
-- launches, copies and indexed rate, the link's latency, rate and measured points); a part's
-- exchange counted from a partition without the ranks (P:exchange(V)); a report's share
-- (perf.share); perf.compare's ranks: each row the formula of its parts (the largest part's
-- share of the cells, its exchange, a CG's reductions), ranks = 1 the one-rank model, and what
-- it does not model said. Under mpirun a split apply's report carries its predicted exchange
-- (test_ranks.lua).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check, close = T.check, T.close
local TOL = 1e-12

-- a calibration and a link given as tables: every term from them
local cal = {sync_us = 2, launch_us = 1, gbytes = 10, l2_gbytes = 40, indexed_gops = 0.5,
             indexed_llc_gops = 2, read_us = 3, read_gbytes = 4, write_us = 5, write_gbytes = 8,
             gpu = false}
local link = {latency_us = 1.5, gbytes = 2, allreduce_us = 3, ranks = 2}
local x = {messages = 2, bytes = 8000, entries = 1000, word = 8, shared = 600, sources = 1600}
local t = perf.exchange(x, cal, link)
check(close(t.gather, 2e-6 + 1000 / 2e9, TOL), "gather %g: a launch waited for and its entries at "
      .. "the indexed rate", t.gather)
check(close(t.read, 3e-6 + 8000 / 4e9, TOL), "read %g", t.read)
check(close(t.write, 5e-6 + 8000 / 8e9, TOL), "write %g", t.write)
check(close(t.sum, 1e-6 + (600 + 1600) / 2e9, TOL), "sums %g: a launch queued, the entries and "
      .. "their sources at the indexed rate", t.sum)
check(close(t.link, 2 * (1.5e-6 + 4000 / 2e9), TOL), "link %g: messages x (latency + size / rate)",
      t.link)
check(close(t.total, t.gather + t.read + t.link + t.write + t.sum, TOL), "total %g", t.total)
-- device to device (ranks of one machine on cuda): no read or write by the host, a one-value
-- message a neighbour, a copy launched a neighbour with both ends' bytes at the memory rate
local dx = {messages = 2, bytes = 8000, entries = 1000, word = 8, shared = 600, sources = 1600,
            direct = true}
local d = perf.exchange(dx, cal, link)
check(d.read == 0 and close(d.gather, t.gather, TOL) and close(d.sum, t.sum, TOL), "direct: "
      .. "no read (%g), the same gather and sums", d.read)
check(close(d.link, 2 * (1.5e-6 + 8 / 2e9), TOL), "direct: a value a message %g", d.link)
check(close(d.write, 2 * 1e-6 + 2 * 8000 / 10e9, TOL), "direct: the copies %g", d.write)
-- a GPU: its exchange kernels' bytes at the cached rate, not the cpu's indexed loops
cal.gpu = true
local g = perf.exchange(x, cal, link)
check(close(g.gather, 2e-6 + 1000 * (4 + 16) / 40e9, TOL), "a GPU's gather %g", g.gather)
check(close(g.sum, 1e-6 + (600 * (12 + 16) + 1600 * (4 + 8)) / 40e9, TOL), "a GPU's sums %g", g.sum)
cal.gpu = false
-- no link: the device's part alone; no messages: nothing
check(perf.exchange(x, cal, false).link == 0, "no link: no messages' time")
check(perf.exchange({messages = 0, bytes = 0}, cal, link).total == 0, "no neighbours: no exchange")
-- a link of measured points: a message's time read off them (linear between two, the rate
-- beyond the last)
local pl = {latency_us = 1, gbytes = 4, allreduce_us = 3, ranks = 2,
            points = {{8, 1}, {4096, 5}, {32768, 9}}}
local function msg(bytes) return perf.exchange({messages = 1, bytes = bytes}, cal, pl).link end
check(close(msg(8), 1e-6, TOL) and close(msg(4096), 5e-6, TOL), "the points: %g, %g", msg(8), msg(4096))
check(close(msg(18432), 7e-6, TOL), "half-way between two points: %g", msg(18432))
check(close(msg(32768 + 4000), 9e-6 + 4000 / 4e9, TOL), "beyond the last: %g", msg(32768 + 4000))
check(close(msg(4), 1e-6, TOL), "below the first: the first %g", msg(4))
-- a cpu's whole exchange through the host, where the link measured it (host points: entries,
-- warm us, cold us): its time at these entries (linear between two points, proportional
-- beyond), between warm and cold by the share 1 - exp(-touched / llc_keep_bytes) an action
-- took out of the cache, the two kernels' launches (sync_us + launch_us), a message more for
-- each further neighbour; the terms in their proportions
local hl = {latency_us = 1, gbytes = 4, allreduce_us = 3, ranks = 2,
            points = {{8, 1}, {4096, 5}, {32768, 9}}, host = {{1000, 10, 30}, {4000, 40, 90}}}
cal.llc_keep_bytes = 1e6
local x1 = {messages = 1, bytes = 8000, entries = 1000, word = 8, shared = 1000, sources = 2000}
local function host(work, touched)
  local w = {}
  for key, v in pairs(work) do w[key] = v end
  w.touched = touched
  return perf.exchange(w, cal, hl)
end
local terms = perf.exchange(x1, cal, pl)
local warm, cold = host(x1, 0), host(x1, 1e12)
check(close(warm.total, 13e-6, TOL) and close(cold.total, 33e-6, TOL), "host points: warm %g "
      .. "(want 13 us), cold %g (33 us)", warm.total, cold.total)
check(close(host(x1, 1e6 * math.log(2)).total, 23e-6, TOL), "half the data out of the cache: "
      .. "half-way between warm and cold %g", host(x1, 1e6 * math.log(2)).total)
-- the link's own keep_bytes (what the cache kept of its exchange's data) where the
-- calibration's llc_keep_bytes is 0: half-way at 4e6 ln 2 bytes touched; the calibration's
-- where it has one (half-way at 1e6 ln 2)
hl.keep_bytes = 4e6
check(close(host(x1, 1e6 * math.log(2)).total, 23e-6, TOL), "the calibration's llc_keep_bytes "
      .. "before the link's: half-way %g (want 23 us)", host(x1, 1e6 * math.log(2)).total)
cal.llc_keep_bytes = 0
local kept = host(x1, 4e6 * math.log(2)).total
check(close(kept, 23e-6, TOL), "the link's keep_bytes: half-way %g (want 23 us)", kept)
check(close(host(x1, 1e6 * math.log(2)).total, (10 + 20 * (1 - 2 ^ -0.25)) * 1e-6 + 3e-6, TOL),
      "the link's keep_bytes, no llc_keep_bytes: %g", host(x1, 1e6 * math.log(2)).total)
cal.llc_keep_bytes, hl.keep_bytes = 1e6, nil
local mid = {messages = 1, bytes = 20000, entries = 2500, word = 8, shared = 2500, sources = 5000}
check(close(host(mid, 0).total, 28e-6, TOL), "between two sizes, linear: %g", host(mid, 0).total)
local big = {messages = 1, bytes = 64000, entries = 8000, word = 8, shared = 8000, sources = 16000}
check(close(host(big, 1e12).total, 183e-6, TOL), "beyond the last, proportional: %g", host(big, 1e12).total)
check(close(host(x, 0).total, 13e-6 + 1e-6 * (1 + (4000 - 8) / (4096 - 8) * 4), TOL),
      "a message more for a second neighbour: %g", host(x, 0).total)
check(close(warm.gather / warm.total, terms.gather / terms.total, 1e-9) and
      close(warm.sum / warm.total, terms.sum / terms.total, 1e-9) and
      close(warm.gather + warm.read + warm.link + warm.write + warm.sum, warm.total, 1e-9),
      "host points: the terms in their proportions (gather %g of %g)", warm.gather, warm.total)
-- lines past contiguous entries' (entries / 4: the gather's and the sums' 8-byte values, 8 a
-- line), each at the link's cost of a line, warm to cold alike
hl.lines = {2, 6}
local spread = {messages = 1, bytes = 8000, entries = 1000, word = 8, shared = 1000,
                sources = 2000, lines = 1000}
check(close(host(spread, 0).total, 13e-6 + 750 * 2e-9, TOL) and
      close(host(spread, 1e12).total, 33e-6 + 750 * 6e-9, TOL), "750 lines more: warm %g, cold %g",
      host(spread, 0).total, host(spread, 1e12).total)
spread.lines = 200
check(close(host(spread, 0).total, 13e-6, TOL), "fewer lines than contiguous entries': none more")
check(close(host(x1, 0).total, 13e-6, TOL), "lines unknown: none more")
-- single precision: 16 values a line, contiguous entries' lines entries / 8
local single = {messages = 1, bytes = 8000, entries = 1000, word = 4, shared = 1000,
                sources = 2000, lines = 1000}
check(close(host(single, 0).total, 13e-6 + 875 * 2e-9, TOL), "4-byte values: 875 lines more: %g",
      host(single, 0).total)
-- pages past contiguous entries' (entries word / 2048: 4 KiB pages), each at the link's cost
-- of a page, warm to cold alike; a link without pages measured (an older store): none
hl.pages = {10, 70}
spread.lines, spread.pages = nil, 100
check(close(host(spread, 0).total, 13e-6 + (100 - 1000 / 256) * 10e-9, TOL) and
      close(host(spread, 1e12).total, 33e-6 + (100 - 1000 / 256) * 70e-9, TOL),
      "96 pages more: warm %g, cold %g", host(spread, 0).total, host(spread, 1e12).total)
spread.lines = 1000
check(close(host(spread, 1e12).total, 33e-6 + 750 * 6e-9 + (100 - 1000 / 256) * 70e-9, TOL),
      "lines and pages more, each at its cost: %g", host(spread, 1e12).total)
spread.pages = 3
check(close(host(spread, 1e12).total, 33e-6 + 750 * 6e-9, TOL), "fewer pages than contiguous "
      .. "entries': none more")
hl.pages, spread.pages = nil, 100
check(close(host(spread, 1e12).total, 33e-6 + 750 * 6e-9, TOL), "no pages measured: none more")
cal.gpu = true
check(close(host(x1, 0).total, perf.exchange(x1, cal, pl).total, TOL), "a GPU: the terms, not "
      .. "the cpu's host points")
cal.gpu = false
local dx1 = {messages = 1, bytes = 8000, entries = 1000, word = 8, shared = 1000, sources = 2000,
             direct = true}
check(close(perf.exchange(dx1, cal, hl).total, perf.exchange(dx1, cal, pl).total, TOL),
      "device to device: the terms")
-- a reduction: the entries others own summed on the device (a group a 1024, two sums each
-- read), and the Allreduce, whose tree deepens as ceil(log2 ranks)
local r2 = perf.reduction(500, 8, 2, cal, link)
check(close(r2, 2e-6 + 500 / 2e9 + 3e-6 + 16 / 4e9 + 3e-6, TOL), "a reduction on 2 ranks %g", r2)
check(close(perf.reduction(5000, 8, 2, cal, link) - r2, 4500 / 2e9 + 4 * 16 / 4e9, TOL),
      "5000 entries: five groups' sums read")
check(close(perf.reduction(500, 8, 8, cal, link) - r2, 2 * 3e-6, TOL), "on 8 ranks: 3 levels")
check(close(perf.reduction(0, 8, 2, cal, link), 3e-6, TOL), "nothing owned elsewhere: the "
      .. "Allreduce alone")
check(perf.reduction(500, 8, 1, cal, link) > 0 and perf.reduction(0, 8, 1, cal, link) == 0,
      "one rank: no Allreduce")

-- the calibration measures the host's copies (read and write: latency and rate)
local c = T.cpu_calibration()
check(c.read_us >= 0 and c.write_us >= 0 and c.read_gbytes >= 0 and c.write_gbytes >= 0 and
      c.read_us + c.read_gbytes > 0, "the calibration's copies: read %g us %g GB/s, write %g us %g GB/s",
      c.read_us, c.read_gbytes, c.write_us, c.write_gbytes)

-- a part's exchange from a partition: a box of 4 x 2 x 2 hexes in two halves shares the
-- 3 x 3 nodes of the plane between them (P1 on hexes: Q1), each way in one message; the part
-- above owns none of them
local m = mesh.box{cells = {4, 2, 2}, cell = "hex"}
local V = fe.space(m, "Q1")
local P = m:partition(2, {method = "lattice"})
local parts = P:exchange(V)
check(#parts == 2, "two parts: %d", #parts)
for k, p in ipairs(parts) do
  check(p.cells == 8 and p.nodes == 27 and p.messages == 1 and p.entries == 9 and p.bytes == 72 and
        p.shared == 9 and p.sources == 18 and p.notowned == (k == 1 and 0 or 9), "part %d: cells %d, "
        .. "nodes %d, messages %d, entries %d, bytes %d, shared %d, sources %d, not owned %d", k - 1,
        p.cells, p.nodes, p.messages, p.entries, p.bytes, p.shared, p.sources, p.notowned)
end
-- three components: three entries a node; in single precision a word of 4 bytes on the device
local E = P:exchange(fe.space(m, {family = "Q", order = 1, components = 3}), "single")
check(E[2].entries == 27 and E[2].bytes == 216 and E[2].word == 4 and E[2].notowned == 27,
      "three components in single: %d entries, %d bytes, word %d", E[2].entries, E[2].bytes, E[2].word)
-- four parts of a box of 4 x 4 x 1: each part its neighbours (the lattice's 2 x 2 blocks meet
-- at the middle line: every part touches the three others)
local P4 = fe.space(mesh.box{cells = {4, 4, 1}, cell = "hex"}, "Q1")
local q4 = P4.mesh:partition(4, {method = "lattice"}):exchange(P4)
for k, p in ipairs(q4) do check(p.messages == 3, "part %d of 4: %d neighbours", k - 1, p.messages) end

-- perf.share: the work scaled, the launches kept
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local rep = A:model("apply", {backend = "cpu", strategy = "transpose"})
local half = perf.share(rep, 0.5)
check(close(half.flops, rep.flops / 2, TOL) and close(half.bytes, rep.bytes / 2, TOL) and
      half.launches == rep.launches, "a half share: flops %g of %g, bytes %g of %g, launches %d of %d",
      half.flops, rep.flops, half.bytes, rep.bytes, half.launches, rep.launches)

-- perf.compare's ranks: each row its largest part's share, its exchange, and for a CG its
-- reductions; ranks = 1 the one-rank model
local Vb = fe.space(mesh.box{cells = {8, 8, 8}, cell = "tet"}, "P1")
local Ab = fe.operator(Vb, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
local _, info_cg = solve.cg(Ab, {rtol = 1e-6, backend = "cpu"})
local rows = perf.compare{Ab, ranks = {1, 2, 4}, report = info_cg.report, link = link, method = "lattice"}
local units = device.info("cpu").compute_units
check(#rows == 3, "three rows: %d", #rows)
local cg = info_cg.report
local one = perf.model(cg, c, units).predicted_seconds
check(close(rows[1].seconds, one, 1e-9) and rows[1].exchange == 0 and rows[1].reductions == 0,
      "one rank: the one-rank model %g, got %g", one, rows[1].seconds)
for i = 2, 3 do
  local row, n = rows[i], ({1, 2, 4})[i]
  local px = Vb.mesh:partition(n, {method = "lattice"}):exchange(Vb)
  local p = px[row.part + 1]
  local compute = perf.model(perf.share(cg, p.cells / Vb.mesh.ncells), c, units).predicted_seconds
  local xch = cg.iterations * perf.exchange(p, c, link).total
  local red = 2 * cg.iterations * perf.reduction(2 * p.notowned, 8, n, c, link)
  check(close(row.compute, compute, 1e-9) and close(row.exchange, xch, 1e-9) and
        close(row.reductions, red, 1e-9) and close(row.seconds, compute + xch + red, 1e-9),
        "%d ranks: compute %g (want %g), exchange %g (%g), reductions %g (%g)", n, row.compute,
        compute, row.exchange, xch, row.reductions, red)
  check(row.exchange > 0 and row.reductions > 0 and row.cells == p.cells and
        close(row.per_step, row.seconds / cg.iterations, 1e-12), "%d ranks: a row of its part", n)
  -- the slowest part binds
  for _, q in ipairs(px) do
    local t = perf.model(perf.share(cg, q.cells / Vb.mesh.ncells), c, units).predicted_seconds +
              cg.iterations * perf.exchange(q, c, link).total +
              2 * cg.iterations * perf.reduction(2 * q.notowned, 8, n, c, link)
    check(t <= row.seconds * (1 + 1e-9), "%d ranks: part of %g s beyond the row's %g", n, t, row.seconds)
  end
end
check(rows[3].compute < rows[2].compute and rows[2].compute < rows[1].compute,
      "the compute falls with the ranks: %g, %g, %g", rows[1].compute, rows[2].compute, rows[3].compute)
-- what it does not model is said, on its output
local said = {}
local print0 = print
print = function(...) said[#said + 1] = table.concat({...}, " ") end
local ok, err = pcall(perf.compare, {Ab, ranks = 2, link = false})
print = print0
said = table.concat(said, "\n")
check(ok, "perf.compare with ranks and no link: %s", tostring(err))
check(said:find("not modelled: the exchange beside the interior", 1, true) and said:find("link: none calibrated", 1, true),
      "the output says what is not modelled: %s", said)
check(not pcall(perf.compare, {Ab, ranks = 0}), "ranks = 0 is refused")
T.done()
