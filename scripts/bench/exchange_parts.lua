-- Benchmark (not a test), issue 48: a split space's exchange beside the interior cells, part
-- by part, measured against the model's terms (rep.exchange_parts and rep.exchange_terms:
-- the gather queued and its mark waited for, the messages, the neighbours' shares' copies, the
-- sums queued), over k applies of Poisson with kappa(x) on a distorted box. Each rank prints
-- its medians and least (run with FELAB_ALL_RANKS=1 to see every rank's), then the model's
-- terms and what they read: the action's groups, groups resident a compute unit, its waves.
-- usage: mpirun -np 2 felab scripts/bench/exchange_parts.lua [cells NxMxK] [space] [cell]
--          [backend] [strategy] [k]
local here = arg[0] and arg[0]:match("^(.*/)") or "scripts/bench/"
local V, A = dofile(here .. "ranks_case.lua")(arg[1], arg[2], arg[3])
local k = tonumber(arg[6]) or 300
local v = V:interpolate("1 + x[0]", {backend = arg[4]})
local ao = {backend = arg[4], strategy = arg[5] ~= "" and arg[5] ~= "-" and arg[5] or nil}
for _ = 1, 5 do A:apply(v, ao) end
local names = {"gather", "messages", "copies", "sums"}
local got = {total = {}}
for _, n in ipairs(names) do got[n] = {} end
local rep
for i = 1, k do
  _, rep = A:apply(v, ao)
  got.total[i] = rep.exchange_seconds
  local p = rep.exchange_parts
  for _, n in ipairs(names) do got[n][i] = p[n] end
end
local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  return s[(#s + 1) // 2], s[1]
end
local line = {}
for _, n in ipairs{"total", table.unpack(names)} do
  local med, least = median(got[n])
  line[#line + 1] = ("%s %.1f (%.1f)"):format(n, 1e6 * med, 1e6 * least)
end
local spread = {} -- each one's quartiles and mean: where the whole's median passes its parts'
for _, n in ipairs{"total", table.unpack(names)} do
  local s, sum = {table.unpack(got[n])}, 0
  table.sort(s)
  for _, v in ipairs(s) do sum = sum + v end
  spread[#spread + 1] = ("%s %.1f-%.1f mean %.1f"):format(n, 1e6 * s[(#s + 3) // 4],
                                                          1e6 * s[(3 * #s + 3) // 4], 1e6 * sum / #s)
end
local terms = rep.exchange_terms
local tl = {("total %.1f"):format(1e6 * rep.exchange_predicted)}
for _, n in ipairs(names) do tl[#tl + 1] = ("%s %.1f"):format(n, 1e6 * terms[n]) end
local cu = device.info(rep.backend).compute_units
local waves = rep.groups / (cu * math.max(rep.resident, 1))
print(("%s %s %d dofs, rank %d of %d, %s: measured us, median (least) of %d: %s"):format(
  V.name, rep.strategy, V.ndofs, mpi.rank, mpi.size, rep.exchange_direct and
  (rep.exchange_follows and "device to device, the gather following" or "device to device")
  or "through the host", k, table.concat(line, ", ")))
print("  quartiles us: " .. table.concat(spread, ", "))
-- the gather's wait for a place is modelled where it does not follow the boundary cells
local wave = rep.exchange_follows and "no wait for a place"
             or ("the first wave %.2f of an even one"):format(rep.exchange_wave)
print(("  predicted us: %s | apply %.3f ms (predicted %.3f), %.1f MB%s, groups %d, resident %d, waves %.1f, %s")
      :format(table.concat(tl, ", "), 1e3 * rep.seconds, 1e3 * rep.predicted_seconds,
              rep.bytes / 1e6, rep.exchange_cold > 0 and
              (" (%.0f%% cold)"):format(100 * rep.exchange_cold) or "", rep.groups,
              rep.resident, waves, wave))
