-- Benchmark (not a test): the csr strategy's first apply, part by part, as a user at the
-- prompt meets it (issue 46): the mesh, space, operator and field built, then the first
-- apply (its setup: pattern, element matrices, fill, format, compile, transfer), then the
-- steady apply and Jacobi-PCG per iteration (50 iterations, best of two; (p, J p) from
-- SELL's product where the backend adds it, and with a pass of its own); the memory the
-- matrix holds and the host's and the device's peaks.
-- usage: felab scripts/bench/first_csr.lua [backend] [cases] [steady applies]
--   a case: cell:space:n (a box of n^3 cubes), cell:space:n:d (its vertices moved by d of a
--   cell), or msh:space:file:k (a mesh file, .msh, refined k times), comma-separated
local backend = arg[1] or "cuda"
local list = arg[2] or "tet:P1:192,hex:Q1:192,tet:P2:96"
local reps = tonumber(arg[3]) or 10
local rows = {}
for spec in list:gmatch("[^,]+") do
  local cell, space, n, d = spec:match("^(%a+):(%w+):([^:]+):?([^:]*)$")
  collectgarbage()
  perf.memory(true)
  local t0 = perf.clock()
  local m
  if cell == "msh" then
    m = mesh.load(n)
    for _ = 1, tonumber(d) or 0 do m = m:refine() end
    n = n:match("([^/]*)$") .. (d ~= "" and (" refined " .. d) or "")
  else
    m = mesh.box{cells = {tonumber(n), tonumber(n), tonumber(n)}, cell = cell,
                 distort = tonumber(d) or 0}
    n = n .. "^3" .. (d ~= "" and (" distort " .. d) or "")
  end
  local V = fe.space(m, space)
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] - x[2] * x[3] end):to(backend)
  local built = perf.clock() - t0
  local c0 = perf.counts()
  local t1 = perf.clock()
  local _, r = A:apply(w, {backend = backend, strategy = "csr"})
  local first = perf.clock() - t1
  local c1 = perf.counts()
  local best = math.huge
  for _ = 1, reps do
    local _, s = A:apply(w, {backend = backend, strategy = "csr"})
    best = math.min(best, s.seconds)
  end
  local pcg = {}
  for _, f in ipairs({true, false}) do -- Jacobi-PCG, 50 iterations, best of two: (p, J p) from
    pcg[f] = math.huge                 -- SELL's product, or a pass of its own
    for _ = 1, 2 do
      local _, info = solve.cg(A, {pc = "jacobi", rtol = 1e-30, maxit = 50, backend = backend,
                                   strategy = "csr", fuse_pq = f})
      pcg[f] = math.min(pcg[f], info.report.seconds / info.iterations * 1e3)
    end
  end
  local mem = perf.memory()
  print(("== %s %s %s: %d cells, %d dofs"):format(space, cell, n, m.ncells, V.ndofs))
  print(r)
  local parts, held, names = r.setup_parts, r.memory, {}
  for k in pairs(parts) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    print(("  part %-10s %8.3f s  holds %8.1f MB"):format(k, parts[k], (held[k] or 0) / 1e6))
  end
  print(("  compiled %d, cached %d kernels; host peak %.0f MB, %s peak %.0f MB"):format(
        c1.compiled - c0.compiled, c1.cached - c0.cached, mem.host_peak / 1e6, backend,
        (mem[backend] and mem[backend].peak or 0) / 1e6))
  rows[#rows + 1] = {("%s %s %s"):format(space, cell, n), V.ndofs, built, first,
                     r.setup_seconds, best * 1e3, pcg[true], pcg[false], c1.compiled - c0.compiled}
  A, V, m, w = nil, nil, nil, nil
  collectgarbage()
end
print("\n| case | dofs | build s | first apply s | of which setup s | steady apply ms | " ..
      "PCG ms/it | PCG, (p, q) apart | compiled |")
print("|---|---|---|---|---|---|---|---|---|")
for _, x in ipairs(rows) do
  print(("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %d |"):format(table.unpack(x)))
end
