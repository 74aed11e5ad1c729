-- A:explain(action [, opts]): the strategy that would run an operator's action, told in words
-- for teaching (felab issue 17). Everything it says comes from the model's view of the call
-- (A:model: the counts, the occupancy, the ceilings), from the generated source (A:source:
-- its #defines give the block and the sizes) and from the templates' own phases
-- (engine/kernels/*.knl); nothing runs the action unless measure = true asks.
--
-- Sections, in order: the thread mapping (what a work group and an item are), the cost of
-- each strategy as the order grows, the phases with the counts per cell, the occupancy, the
-- ceiling that binds and why, what a change of block, precision or strategy would do
-- (predicted; with measure = true also measured, each row's direction checked), and with
-- source = true the source with its phases marked.
-- The counts per cell are the whole kernel's; the model also takes each of the strategy's
-- phases' share of them (rep.phase_seconds), which the ceiling section tells.
local ops = ... -- {methods = the table felab.operator's __index reads, meta = its metatable}

-- The options A:model takes; explain adds `at` (A:apply's, ignored by the model) and `quiet`.
local model_keys = {"backend", "precision", "strategy", "block", "walk", "lanes", "geometry",
                    "scatter", "recompute", "format", "chunk", "sigma"}
local actions = {residual = true, apply = true, diagonal = true}

-- A time with a unit that keeps three significant digits (as the engine's reports print it).
local function time(s)
  if s >= 1 then return ("%.3g s"):format(s) end
  if s >= 1e-3 then return ("%.3g ms"):format(s * 1e3) end
  return ("%.3g us"):format(s * 1e6)
end

local function num(x) return ("%.4g"):format(x) end

-- "1 group", "4 groups"
local function count(n, word) return ("%d %s%s"):format(n, word, n == 1 and "" or "s") end

-- The message of a caught engine or binding error without its "file:line: " prefix.
local function bare(msg)
  return (tostring(msg):gsub("^[^\n:]*:%d+: ", ""))
end

-- The #defines at the head of a generated source: sizes, switches, the block.
local function defines(src)
  local d = {}
  for name, value in src:gmatch("#define ([%w_]+) (%-?%d+)") do
    if d[name] == nil then d[name] = math.tointeger(tonumber(value)) end
  end
  return d
end

-- What the strategies share: how an item of a group runs on this backend.
local function backend_sentence(rep)
  if rep.backend == "cpu" then
    return "On the cpu a work group is what one OpenMP thread takes at a time (FE_OUTER is an " ..
           "`omp for` over the groups) and an item is one iteration of an inner loop (FE_INNER, " ..
           "a plain SIMD-friendly loop); a barrier is just the end of one loop."
  end
  return ("On %s a work group is %s and an item %s; FE_INNER strides the items over the " ..
          "loop, and FE_BARRIER waits for the whole group."):format(rep.backend,
          rep.backend == "cuda" and "a CUDA block" or "an OpenCL work-group",
          rep.backend == "cuda" and "a thread" or "a work-item")
end

-- The text of each strategy: mapping(c) -> paragraph, phases(c) -> list of {name, what,
-- marker}, kernel(c) -> the entry whose body the markers are searched in. c holds rep, d
-- (the source's defines), action, opts, block, items, groups.
local strategies = {}

strategies.transpose = {
  template = "engine/codegen/kernels/integrate.knl and diagonal.knl",
  kernel = function(c) return c.action == "diagonal" and "FE_KERNEL(fe_diagonal)" or "FE_KERNEL(fe_integrate)" end,
  mapping = function(c)
    local d = c.d
    if c.action == "diagonal" then
      return ("A work group holds %d cells (the block) and has %d items; %s for the " ..
              "%d cells. Item t owns (cell t / NB, basis function b = t %% NB), %d pairs a group " ..
              "(NB = %d): it walks all NQ = %d points itself, reads the geometry, applies the " ..
              "linearized physics to basis function b alone and keeps the b part, then adds it " ..
              "into y. No shared memory and no barrier: the diagonal is one phase."):format(
              c.block, c.items, count(c.groups, "group"), c.rep.ncells, c.block * d.NB, d.NB, d.NQ)
    end
    return ("A work group holds %d cells (the block) and has %d items; %s for the %d " ..
            "cells (padded to whole blocks with cells of zero measure, so no item tests bounds). " ..
            "An item changes role from phase to phase (thread transposition, Knepley-Rupp-" ..
            "Terrel): in the gather and the basis phase item t owns (cell t / NB, basis function " ..
            "t %% NB), %d pairs a group (NB = %d); in the quadrature phase it owns (cell t / NQ, " ..
            "point t %% NQ), %d pairs (NQ = %d). What one phase leaves for the next crosses in " ..
            "shared memory, with a barrier between phases. The group is sized for max(NB, NQ) x " ..
            "block items in whole warps; a loop longer than the group strides."):format(
            c.block, c.items, count(c.groups, "group"), c.rep.ncells, c.block * d.NB, d.NB,
            c.block * d.NQ, d.NQ)
  end,
  phases = function(c)
    if c.action == "diagonal" then
      return {{"diagonal (points and basis in one)", "item (cell, basis function b): at each point " ..
               "the geometry, the linearized physics applied to b, the b part summed over the " ..
               "points; one add into y per (cell, basis function, component)", "FE_INNER(t, BLOCK * NB)"}}
    end
    local d, what = c.d, {}
    if c.action == "apply" then what[#what + 1] = "the direction w" end
    if d.NEED_U == 1 then what[#what + 1] = "the state u" end
    local vertices = d.GEO_RECOMPUTE == 1 -- geometry = "vertices"
    if d.NEED_X == 1 or vertices then what[#what + 1] = "the node coordinates" end
    what = #what > 0 and table.concat(what, " and ") or "nothing (this physics needs no cell values)"
    local geometry = vertices and "makes J, J^-1 and det J from the cell's coordinates (geometry = " ..
                                  "\"vertices\": nothing stored)"
                              or "reads the geometric factors (J^-1, det J" ..
                                 (d.GEO_AFFINE == 1 and ", one set per cell: affine cells)" or ")")
    return {
      {"gather", "item (cell, basis function) copies " .. what .. " into shared memory", "/* gather phase"},
      {"quadrature", "item (cell, point) evaluates the fields and their gradients, " .. geometry ..
                     ", calls the physics, multiplies by the weight and |J|, pulls f1 back with " ..
                     "J^-T and stores the result in shared memory", "/* quadrature phase"},
      {"basis (and scatter)", "item (cell, basis function) sums over the points against the basis " ..
                              "values and reference derivatives and adds into y (atomic on a GPU; " ..
                              "plain adds on the cpu, whose groups run color by color)", "/* basis phase"},
    }
  end,
}

strategies.sumfact = {
  template = "engine/codegen/kernels/sumfact.knl",
  kernel = function() return "FE_KERNEL(fe_sumfact)" end,
  mapping = function(c)
    local d = c.d
    local n = math.max(d.P1 or 0, d.Q1 or 0)
    local plane = d.DIM == 3 and n * n or n
    local s = ("A work group holds %d cells (the block) and has %d items; %s for the %d " ..
               "cells. Within a cell the items form a plane of max(P1, Q1)^%d = %d items (P1 = %d " ..
               "nodes and Q1 = %d points per direction): in the phases along z (%s) an item owns a column (i, j) of nodes " ..
               "or (qx, qy) of points of one cell and walks it in registers; in the contractions " ..
               "along x and y an item owns one output entry. Every shared array holds entry n of " ..
               "cell e at [n * BLOCK + e], the cell fastest. Only 1D tables are used (B1, G1, DQ, " ..
               "W1): O(p^(DIM+1)) work per cell."):format(c.block, c.items, count(c.groups, "group"), c.rep.ncells,
               d.DIM - 1, plane, d.P1 or 0, d.Q1 or 0, c.action == "diagonal" and
               "the gather, the quadrature phase and its pass along z" or
               "the gather, the quadrature phase, the transposed derivatives")
    if d.DIM ~= 3 then s = s .. " On quads a column is one point." end
    if c.rep.backend == "cpu" then
      s = s .. (" On the cpu every phase loops with the cell innermost (SF_CELLS): the SIMD " ..
                "lanes are the %d cells of the group at consecutive addresses."):format(c.block)
    end
    return s
  end,
  phases = function(c)
    local d, p = c.d, {}
    local function add(name, what, marker) p[#p + 1] = {name, what, marker} end
    add("tables (once per group)", "the 1D tables copied into shared memory", "/* tables: the work group's copy")
    if d.GEO_VERTICES == 1 then
      add("gather (corners)", "the half edge vectors of each cell's corners, for the map " ..
          "(geometry = \"vertices\")", "/* gather: the half edge vectors")
    end
    local diag = c.action == "diagonal"
    local nv = diag and ((d.NEED_U == 1 or d.NEED_X == 1) and 1 or 0) or 1
    if nv > 0 then
      add(d.DIM == 3 and d.COLLOCATED ~= 1 and "gather (+ z interpolation)" or "gather",
          "item (i, j) reads its column of nodes" .. (d.DIM == 3 and d.COLLOCATED ~= 1 and
          " and interpolates it along z in registers" or ""), "/* gather: item (i, j)")
      if d.COLLOCATED ~= 1 then
        add("interpolation in x", "one item per output entry: B = sum_i B1[qx][i] A", "/* interpolation in x")
        add("interpolation in y", "one item per output entry: V = sum_j B1[qy][j] B", "/* interpolation in y")
      end
    end
    if diag then
      add("quadrature (column walk) and the z pass", "item (qx, qy) walks its column of points: the " ..
          "(1+DIM)^2 pulled-back linearization per point, folded into pairs and contracted along z " ..
          "(10 -> 6 pairs)", "/* quadrature phase: item (qx, qy) walks its column of points; at each")
      add("pass along y", "6 pairs -> 3, one item per output entry", "/* pass along y")
      add("pass along x", "3 pairs -> the diagonal entry of each node", "/* pass along x")
      add("scatter", "one add per (cell, node, component) into y", "/* scatter: component k")
      return p
    end
    add("quadrature (column walk)", "item (qx, qy) walks its column of points: the geometry (stored, " ..
        "or from the corners), values and gradients by DQ, the physics, the pulled-back fluxes " ..
        "along x and y to shared memory, W detJ f0 and the z flux summed in registers (S0)",
        "/* quadrature phase: item (qx, qy) walks its column of points (on quads")
    add("transposed x/y derivatives (+ z)", "S = S0 + DQ_x^T FX + DQ_y^T FY at each point, and the " ..
        "transposed interpolation along z in registers", "/* transposed derivatives")
    if d.COLLOCATED ~= 1 then
      add("transposed y", "one item per output entry: D = sum_qy B1[qy][j] C", "/* transposed y")
      add("transposed x", "one item per output entry: R = sum_qx B1[qx][i] D", "/* transposed x")
    end
    add("scatter", d.SF_NODESUM == 1 and "the cells store their entries in an E-vector; a second " ..
        "kernel (fe_nodesum) sums each node's entries" or "one add per (cell, node, component) " ..
        "into y (atomic on a GPU, plain on the cpu); padding cells and constrained nodes add nothing",
        "/* scatter: R")
    return p
  end,
}

strategies.patch = {
  template = "engine/codegen/kernels/patch.knl",
  kernel = function() return "FE_KERNEL(fe_patch)" end,
  mapping = function(c)
    local d = c.d
    local s = ("A work group owns a patch of up to %d consecutive cells (the block, cut from a Morton " ..
               "order) and the nodes they touch, numbered locally; %s for the %d cells, " ..
               "each group with %d items. In the gather and the scatter an item owns one of the " ..
               "patch's nodes (items stride over them). "):format(c.block, (count(c.groups, "patch"):gsub("patchs", "patches")),
               c.rep.ncells, c.items)
    if (d.WALK or 0) > 0 then
      s = s .. ("In the integration an item owns a walk of %d cells that follow each other across " ..
                "facets, keeping the nodes in register slots (%d walks a patch)."):format(
                d.WALK_CELLS or 0, d.ITEMS or 0)
    else
      s = s .. ("In the integration an item owns one cell at a time (up to %d cells over %d items) and " ..
                "integrates it whole in registers; its contributions go to fixed places in their " ..
                "nodes' runs in shared memory."):format(c.block, c.items)
    end
    return s
  end,
  phases = function(c)
    local walk = (c.d.WALK or 0) > 0
    return {
      {"gather", "the patch's nodes (state, direction, coordinates) into shared memory, once each",
       "/* gather: the patch's nodes"},
      {"integrate", walk and "one item per walk, its cells' nodes in register slots" or
       "one item per cell, each contribution to its place in its node's run",
       walk and "/* integrate: one item per walk" or "/* integrate: one item per cell"},
      {"scatter", "one item per patch node sums its run and adds it to y: one atomic per patch " ..
       "node, not one per (cell, basis function)", "/* scatter: each node's run"},
    }
  end,
}

-- The product of csr (CSR or SELL-C-sigma): its layout from the options and the backend.
local function csr_sell(c)
  local f = c.opts.format
  if f then return f == "sell" end
  return c.rep.backend == "cuda"
end

strategies.csr = {
  template = "engine/codegen/kernels/sparse.knl (fe_spmv, fe_spmv_sell)",
  kernel = function(c) return csr_sell(c) and "FE_KERNEL(fe_spmv_sell)" or "FE_KERNEL(fe_spmv)" end,
  mapping = function(c)
    local lanes = c.d.EM_LANES or 1
    local s = (c.rep.backend == "cpu"
               and "The Jacobian was assembled once on the host (the CSR pattern, then each row " ..
                   "summing its cells' element-matrix entries: no atomics)"
               or "The Jacobian was assembled once on the device (element matrices, their " ..
                  "entries summed into the CSR rows)") ..
              "; each action is one sparse matrix-vector product, and no cell appears: " ..
              ("the unit of work is a row (a dof), %d rows. "):format(c.rep.ndofs)
    if csr_sell(c) then
      return s .. "SELL-C-sigma (fe_spmv_sell): a work group is 128 items, one item per row; the C " ..
             "items of a chunk read consecutive slots at each step, each adding up its row's " ..
             "16-bit column differences as it walks (32-bit columns where a chunk's do not " ..
             "fit); the matrix's exact zeros are left out of the copy."
    end
    local groups = count((c.rep.ndofs * lanes + 127) // 128, "group")
    if lanes == 1 then
      return s .. ("CSR (fe_spmv): a work group is 128 items, one item per row: the item sums its " ..
                   "row's entries times x and writes y[row]; %s."):format(groups)
    end
    return s .. ("CSR (fe_spmv): a work group is 128 items = %d rows, %d items (lanes) per row: each " ..
                 "lane sums every %d-th entry of its row times x, and the lanes' sums meet in " ..
                 "shared memory; %s."):format(128 // lanes, lanes, lanes, groups)
  end,
  phases = function(c)
    if csr_sell(c) then
      return {{"row products (SELL)", "one item per row walks its chunk's slots, y[perm[p]] = the sum",
               "FE_INNER(t, EM_ITEMS)"}}
    end
    return {
      {"row products", "item (row, lane) sums vals[k] * x[cols[k]] over its share of the row " ..
       "into shared memory", "FE_INNER(t, EM_ITEMS)"},
      {"lane sums", "one item per row adds its lanes' sums and writes y[row]", "FE_INNER(t, EM_ITEMS / EM_LANES)"},
    }
  end,
}

strategies.ebe = {
  template = "engine/codegen/kernels/elemat.knl (fe_ebe)",
  kernel = function() return "FE_KERNEL(fe_ebe)" end,
  mapping = function(c)
    local n = (c.d.NB or 0) * (c.d.NC or 1)
    return ("The element matrices were computed once (or, with recompute = true, in every action); " ..
            "the action multiplies each cell's %d x %d matrix by the cell's entries of the " ..
            "direction. An item owns one (cell, row i): it reads the row and the cell's entries of " ..
            "w and adds the product into y at the row's dof (atomically, or with scatter = " ..
            "\"color\" color by color with plain adds). A work group is 128 items, about %.1f cells."):format(
            n, n, 128 / math.max(n, 1))
  end,
  phases = function()
    return {{"row times direction, scatter", "item (cell, row): sum_j K[i][j] w[dof j], added into y",
             "FE_INNER(t, EM_ITEMS)"}}
  end,
}

-- The strategy text for (strategy, action): csr and ebe run transpose's kernels for the
-- residual and the diagonal.
local function text_for(name, action)
  if (name == "csr" or name == "ebe") and action ~= "apply" then return strategies.transpose, true end
  return strategies[name]
end

-- Insert "/* ==== phase: NAME ==== */" before each phase's first line (searched in order from
-- the kernel's entry); markers not found are left out. Returns the text and how many it put.
local function mark(src, kernel, phases)
  local lines, i = {}, 1
  while i <= #src do
    local j = src:find("\n", i, true) or #src + 1
    lines[#lines + 1] = src:sub(i, j - 1)
    i = j + 1
  end
  local at, from = {}, 1
  if kernel then
    from = nil
    for k, l in ipairs(lines) do
      if l:find(kernel, 1, true) then from = k break end
    end
    if not from then return src, 0 end
    at[from] = "/* ==== kernel " .. kernel:match("%((.-)%)") .. ": the one this action runs ==== */"
  end
  local n = 0
  for _, p in ipairs(phases) do
    for k = from, #lines do
      if lines[k]:find(p[3], 1, true) and not at[k] then
        at[k] = ("%s/* ==== phase: %s ==== */"):format(lines[k]:match("^%s*"), p[1])
        from, n = k + 1, n + 1
        break
      end
    end
  end
  local out = {}
  for k, l in ipairs(lines) do
    if at[k] then out[#out + 1] = at[k] end
    out[#out + 1] = l
  end
  return table.concat(out, "\n") .. "\n", n
end

-- What the minimal bytes are, per strategy: what the DRAM ceiling streams.
local function dram_words(rep)
  local data = rep.strategy == "csr" and "the matrix's row offsets, column indices and values, " ..
                                          "and the vectors x and y once"
               or rep.strategy == "ebe" and "the stored element matrices, the cell map and the " ..
                                            "vectors once"
               or "the cell map, the geometric factors and the vectors once"
  local s = ("the minimal bytes (rep.bytes: %s) at the calibrated DRAM bandwidth"):format(data)
  if rep.backend == "cpu" and rep.strategy == "csr" then
    s = s .. " (the matrix's rows, rep.rows, at the calibrated rate of csr's row loop: rows_gbytes)"
  end
  return s .. ": the kernel is memory bound"
end

local ceiling_words = {
  l2 = "the global loads beyond the minimal bytes (rep.l2_bytes: re-reads of nodes shared by " ..
       "cells) at the L2 rate",
  shared = "the shared-memory wavefronts (rep.shared_bytes, 128 bytes each: a warp's access costs " ..
           "one per 32 banks' worth, more on bank conflicts), with the global loads' wavefronts " ..
           "through L1, the same data pipe (rep.l1_wavefronts, rep.table_wavefronts), at the " ..
           "calibrated shared-memory rate; or, where longer, the L1's lookups of those loads " ..
           "(rep.l1_tag_seconds)",
  fma = "the floating-point operations (rep.flops) at the calibrated FMA rate: compute bound",
  nonfma = "divisions and square roots (rep.nonfma), which do not issue as FMAs",
  atomics = "the scatter's atomic adds to global memory (rep.atomics) at the calibrated atomic rate",
  constant = "the constant-table loads (rep.constant_loads), one per distinct word a warp reads " ..
             "from a constant cache",
  indexed = "the values gathered and added back one at a time through an index (rep.indexed: " ..
            "an index, a load and a store or an add each), at the cpu's calibrated rates for " ..
            "such loops (a node's first touch in a call from beyond L1, the rest from L1)",
  latency = "the waits on each group's path (dependent loads and barrier-separated phases at " ..
            "the calibrated latencies), once per wave of resident groups: many small groups " ..
            "with many phases wait longer than their pipes work",
  launches = "the fixed cost of each kernel launch and of the host's wait at the end: the " ..
             "problem is too small for its work to matter; a larger mesh is bound by the next ceiling",
}

local function words_for(rep, name)
  if name == "dram" then return dram_words(rep) end
  return ceiling_words[name] or name
end

local limit_words = {
  threads = "the unit's thread slots are full",
  registers = "the registers each item holds: the unit's register file fits no more groups",
  shared = "the shared memory each group declares: the unit fits no more groups",
  groups = "the unit's limit on resident groups (small groups)",
}

-- The asymptotic cost of each operator strategy as the order p grows (DIM the dimension), as
-- the kernels do it (engine/codegen/kernels/*.knl): {name, per what, big-O, how}.
local cost_words = {
  transpose = {"O(p^(2*DIM)) per cell", "every point sums over every basis function and back " ..
               "(NB x NQ products, DIM+1 of them per pair)"},
  patch = {"O(p^(2*DIM)) per cell", "like transpose, each cell integrated whole (NB x NQ)"},
  sumfact = {"O(p^(DIM+1)) per cell", "1D contractions, one direction at a time (DIM passes " ..
             "of (p+1)^(DIM+1)); hexes and quads only"},
  csr = {"O(nnz) per apply", "2 flops and a value and a column index read per stored entry; " ..
         "nnz ~ (2p+1)^DIM a row on hexes, so O(p^(2*DIM)) a cell, all of it from memory; the " ..
         "assembly (once) O(p^(3*DIM)) per cell"},
  ebe = {"O(p^(2*DIM)) per cell", "the cell's (NB*NC) x (NB*NC) matrix times its entries, the " ..
         "matrix read from memory every action (recompute = true: O(p^(3*DIM)) per cell instead)"},
}

-- The cost section: this call's sizes and each strategy's order of growth.
local function cost_section(say, rep, d)
  local p = tonumber(rep.space:match("^%a+(%d+)")) or 0
  local nb, nq, nc = d.NB or d.P1 and d.P1 ^ (d.DIM or 3), d.NQ, d.NC or 1
  if nb and nq then
    say("This call: order p = %d, NB = %d basis functions and NQ = %d points a cell%s.",
        p, math.tointeger(nb) or nb, math.tointeger(nq) or nq, nc > 1 and (", %d components"):format(nc) or "")
  end
  say("Work per action as the order p grows (DIM = %d here):", d.DIM or (rep.space:find("hex") and 3 or 2))
  for _, name in ipairs{"transpose", "patch", "sumfact", "csr", "ebe"} do
    local w = cost_words[name]
    say("  %-9s %-22s %s%s", name, w[1], w[2], name == rep.strategy and "   <- this one" or "")
  end
end

-- The model of action `a` with options o, or nil and why not.
local function try_model(A, a, o)
  local ok, rep = pcall(A.model, A, a, o)
  if ok then return rep end
  return nil, bare(rep)
end

-- The ceilings section: the bound, each ceiling alone and its share, and why they overlap.
local function ceiling_section(say, rep)
  local ceil, sum = {}, 0
  for name, s in pairs(rep.ceilings) do
    if s > 0 then ceil[#ceil + 1] = {name, s} end
  end
  table.sort(ceil, function(a, b) return a[2] > b[2] end)
  local pred = rep.predicted_seconds
  say("predicted %s, bound by %s: %s.", time(pred), rep.bound, words_for(rep, rep.bound))
  if rep.l1_tag_seconds > 0 and rep.l1_tag_seconds >= rep.ceilings.shared then
    say("Here the L1's lookups take the shared pipe's time: %.3g warp requests of global " ..
        "loads touch %.3g lines (%.1f a request), %s.", rep.l1_requests, rep.l1_lines,
        rep.l1_lines / rep.l1_requests, time(rep.l1_tag_seconds))
  end
  say("Each ceiling alone: the time the call would take if that resource were the only one " ..
      "it used, and that time as a share of the prediction:")
  for _, e in ipairs(ceil) do
    local share = pred > 0 and 100 * e[2] / pred or 0
    sum = sum + share
    say("  %-9s %10s  %5.1f%%", e[1], time(e[2]), share)
  end
  local cpu = rep.backend == "cpu"
  say("The shares add to %.0f%%%s: the resources work side by side, so the bounds overlap and " ..
      "the prediction is about the largest of them, not their sum (%s), plus the launches.",
      sum, sum > 100.5 and ", more than 100%" or "",
      cpu and "on the cpu the multiply-adds, divisions and indexed loops of one thread run one " ..
              "after another, so their sum where that is larger"
          or "stretched by the last wave's fill, plus what the resident groups do not overlap " ..
             "of a group's serial time and the waves' waits; the atomics where longer")
  local ph = rep.phase_seconds
  if (rep.resident or 0) > 0 and #ph > 0 then
    local parts = {}
    for i, s in ipairs(ph) do parts[i] = time(s) end
    say("A group's serial time %s (its phases %s); the %d groups resident overlap what it " ..
        "has beyond the largest ceiling %d-fold.", time(rep.serial_seconds),
        table.concat(parts, ", "), rep.resident, rep.resident)
  end
  if (rep.loop_cycles or 0) > 0 then
    say("The hot loop as llvm-mca simulates it: %.1f cycles an iteration, %.0f iterations, %s " ..
        "over the threads; %s", rep.loop_cycles, rep.loop_trips, time(rep.loop_seconds),
        rep.loop_binds and "longer than the multiply-adds at the calibrated rates, so it sets " ..
                           "the FMA ceiling." or "shorter than the multiply-adds, which set it.")
  end
  if (rep.waits_hidden or 0) > 0 then
    say("The longest phase on the L1's pipe (%s) staggers the resident groups: %.0f%% of the " ..
        "waits are hidden.", time(rep.stagger_seconds), 100 * rep.waits_hidden)
  end
end

-- A ratio of two times in words: within SAME of 1 they are "the same".
local SAME = 1.15
local function ratio_words(ratio)
  if ratio < SAME and ratio > 1 / SAME then return "the same (within 15%)" end
  if ratio <= 1 then return ("%.2fx faster"):format(1 / ratio) end
  return ("%.2fx slower"):format(ratio)
end

-- -1 faster, 0 the same (within 15%), 1 slower.
local function direction(ratio)
  if ratio < SAME and ratio > 1 / SAME then return 0 end
  return ratio < 1 and -1 or 1
end

-- The key a report of this call (measured or modelled) is found by in perf.history().
local function call_key(r)
  return table.concat({r.action, r.backend, r.precision, r.strategy, r.space, r.ncells, r.ndofs,
                       r.groups}, "|")
end

-- The session's fastest steady measurement of each call (first runs left out), by call_key.
local function measured_calls()
  local best = {}
  for _, r in ipairs(perf.history()) do
    if r.seconds > 0 and not r.first_run and actions[r.action] then
      local k = call_key(r)
      local b = best[k]
      if not b then best[k] = {seconds = r.seconds, n = 1}
      else b.seconds, b.n = math.min(b.seconds, r.seconds), b.n + 1 end
    end
  end
  return best
end

-- Run action once with each of the options in `configs` (reports: the backend and precision
-- of each), then `times` rounds of all of them in turn, so that a busy spell of the machine
-- slows every configuration alike. The first run of each (a compile or a cold run) is flagged
-- first_run and left out of measured_calls.
local function run_action(A, action, configs, at, times)
  local calls = {}
  for i, cf in ipairs(configs) do
    local o, rep = cf[1], cf[2]
    local ro = {}
    for k, val in pairs(o) do ro[k] = val end
    if action == "apply" and at then ro.at = at:to(rep.backend, rep.precision) end
    local v = A.space:interpolate(1):to(rep.backend, rep.precision)
    calls[i] = function()
      if action == "apply" then A:apply(v, ro)
      elseif action == "residual" then A:residual(v, ro)
      else A:diagonal(ro) end
    end
    calls[i]()
  end
  for _ = 1, times do
    for _, call in ipairs(calls) do call() end
  end
end

-- The options of each what-if row: {label, options}. `whatif` names the families ("block",
-- "precision", "strategy") or gives option tables; the precision row keeps the block (the
-- other precision's default block would change two things at once).
local function whatif_rows(A, rep, o, c, whatif)
  local function with(changes)
    local t = {}
    for k, v in pairs(o) do t[k] = v end
    for k, v in pairs(changes) do t[k] = v end
    return t
  end
  local blocked = rep.strategy == "transpose" or rep.strategy == "sumfact" or rep.strategy == "patch"
  local rows, notes = {}, {}
  for _, w in ipairs(whatif) do
    if type(w) == "table" then
      local parts = {}
      for k, v in pairs(w) do parts[#parts + 1] = ("%s %s"):format(k, tostring(v)) end
      table.sort(parts)
      rows[#rows + 1] = {table.concat(parts, ", "), with(w), precision = w.precision ~= nil}
    elseif w == "block" then
      if blocked and c.block > 0 then
        if c.block > 1 then rows[#rows + 1] = {("block %d (halved)"):format(c.block // 2), with{block = c.block // 2}} end
        rows[#rows + 1] = {("block %d (doubled)"):format(2 * c.block), with{block = 2 * c.block}}
      else
        notes[#notes + 1] = ("(block: %s takes no block for this action's kernel)"):format(rep.strategy)
      end
    elseif w == "precision" then
      local other = rep.precision == "double" and "single" or "double"
      rows[#rows + 1] = {("precision %s%s"):format(other, blocked and c.block > 0 and
                         (", block %d"):format(c.block) or ""),
                         with{precision = other, block = blocked and c.block > 0 and c.block or nil},
                         precision = true}
    elseif w == "strategy" then
      local ok, names, info = pcall(A.strategies, A, {backend = o.backend, precision = o.precision})
      if ok then
        local seen = {}
        for _, name in ipairs(names) do
          seen[name] = true
          if name ~= rep.strategy then
            rows[#rows + 1] = {"strategy " .. name, {backend = o.backend, precision = o.precision, strategy = name}}
          end
        end
        local rest = {}
        for name in pairs(info) do if not seen[name] then rest[#rest + 1] = name end end
        table.sort(rest)
        for _, name in ipairs(rest) do
          notes[#notes + 1] = ("%-28s cannot run: %s"):format("strategy " .. name, info[name].why)
        end
      else
        notes[#notes + 1] = ("(the other strategies: %s)"):format(bare(names))
      end
    else
      error(("A:explain: whatif entries are \"block\", \"precision\", \"strategy\" or option " ..
             "tables, got %s"):format(tostring(w)), 4)
    end
  end
  return rows, notes
end

-- The model's time of a row. The other precision's report is priced with its own rates but
-- this precision's launch and wait (a launch costs the same in either precision; the two
-- calibrations measure it apart, and one measured on a busy machine once put a cpu's single
-- precision rows hundreds of times slower, "launches bound").
local function row_model(A, action, row, rep)
  local r, err = try_model(A, action, row[2])
  if not r or not row.precision then return r, err end
  local info = device.info(r.backend)
  local cal = info.calibration
  if not (cal and cal[r.precision] and cal[rep.precision]) then return r end
  local ceil = {}
  for k, v in pairs(cal[r.precision]) do ceil[k] = v end
  ceil.launch_us, ceil.sync_us = cal[rep.precision].launch_us, cal[rep.precision].sync_us
  return perf.model(r, ceil, info.compute_units)
end

-- The what-if section: each row's prediction against now, and where measured (measure =
-- true, or calls of this session) the measurement and whether it bears the row out.
local function whatif_section(say, A, action, rep, o, c, opts)
  local gpu = device.info(rep.backend).is_gpu
  local rows, notes = whatif_rows(A, rep, o, c, opts.whatif or
                                  (gpu and {"block", "precision", "strategy"} or {"precision", "strategy"}))
  if not opts.whatif and not gpu then
    notes[#notes + 1] = "(block: left out on the cpu, where it only sets how many cells share " ..
                        "the SIMD lanes and the model's rows for it were not borne out when " ..
                        "measured (docs/explain.md); whatif = {\"block\"} asks for them)"
  end
  local modelled = {}
  for i, row in ipairs(rows) do
    local r, err = row_model(A, action, row, rep)
    modelled[i] = r or err
  end
  if opts.measure then
    local configs = {{o, rep}}
    for i, row in ipairs(rows) do
      if type(modelled[i]) ~= "string" then configs[#configs + 1] = {row[2], modelled[i]} end
    end
    run_action(A, action, configs, opts.at, math.tointeger(opts.measure) or 5)
  end
  local seen = measured_calls()
  local now = seen[call_key(rep)]
  local pred = rep.predicted_seconds
  say("== What a change would do (the model's prediction%s) ==",
      now and "; measured: this session's fastest steady call" or "; measure = true also runs each row")
  say("%s", "A ratio within 15% of 1 is \"the same\": the model does not tell such rows apart " ..
      "from the spread of a measurement here.")
  local blocked = rep.strategy == "transpose" or rep.strategy == "sumfact" or rep.strategy == "patch"
  local label = ("now: %s %s%s"):format(rep.strategy, rep.precision,
                                        blocked and (", block %d"):format(c.block) or "")
  say("  %-30s %10s  %-22s %10s", "", "predicted", "", now and "measured" or "")
  say("  %-30s %10s  %-22s %10s", label, time(pred), "", now and time(now.seconds) or "")
  if now and pred > 0 then
    local miss = now.seconds / pred
    if miss > 2 or miss < 0.5 then
      say("  The model misses this call %.1fx (measured over predicted): a row that only moves " ..
          "the ceiling it models may not move the time; the measured column says.", miss)
    end
  end
  local out = {}
  for i, row in ipairs(rows) do
    local r = modelled[i]
    if type(r) == "string" then
      say("  %-30s cannot run: %s", row[1], r)
    else
      local ratio = r.predicted_seconds / pred
      local m = seen[call_key(r)]
      local e = {label = row[1], options = row[2], predicted_seconds = r.predicted_seconds,
                 predicted_ratio = ratio, bound = r.bound}
      local mtext = ""
      if m and now then
        e.measured_seconds, e.measured_ratio = m.seconds, m.seconds / now.seconds
        local dp, dm = direction(ratio), direction(e.measured_ratio)
        e.borne_out = dp == 0 or dm == dp
        mtext = ("%10s  %s%s"):format(time(m.seconds), ratio_words(e.measured_ratio),
                                      dp == 0 and "" or (e.borne_out and ": borne out" or ": NOT borne out"))
      end
      say("  %-30s %10s  %-22s %s", row[1], time(r.predicted_seconds),
          ratio_words(ratio) .. ", " .. r.bound, mtext)
      out[#out + 1] = e
    end
  end
  for _, n in ipairs(notes) do say("  %s", n) end
  return out
end

local valid_extra = {at = true, quiet = true, source = true, measure = true, whatif = true}

-- The options of explain: checked; returns the model's options.
local function explain_options(opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("A:explain: the options must be a table, got " .. type(opts), 3)
  end
  opts = opts or {}
  local o, valid = {}, {}
  for _, k in ipairs(model_keys) do valid[k] = true end
  for k, v in pairs(opts) do
    if not valid[k] and not valid_extra[k] then
      error(("A:explain: unknown option '%s' (valid options: %s, at, quiet, source, measure, " ..
             "whatif)"):format(tostring(k), table.concat(model_keys, ", ")), 3)
    end
    if valid[k] then o[k] = v end
  end
  if opts.whatif ~= nil and opts.whatif ~= false and type(opts.whatif) ~= "table" then
    error("A:explain: whatif must be a list (\"block\", \"precision\", \"strategy\" or option " ..
          "tables) or false, got " .. type(opts.whatif), 3)
  end
  return opts, o
end

-- The counts per cell of the whole kernel (the Phases section's second half).
local function counts_section(say, rep, c)
  local ncells = math.max(rep.ncells, 1)
  say("The model counts the whole kernel, not each phase; per cell (%d cells) for the whole kernel:", rep.ncells)
  say("  flops          %s", num(rep.flops / ncells))
  say("  DRAM bytes     %s   (minimal: what the algorithm must move)", num(rep.bytes / ncells))
  say("  L2 bytes       %s   (loads beyond the minimal bytes)", num(rep.l2_bytes / ncells))
  say("  shared bytes   %s   (wavefront bytes: %s wavefronts of 128 bytes)", num(rep.shared_bytes / ncells),
      num(rep.shared_bytes / ncells / 128))
  say("  atomics        %s", num(rep.atomics / ncells))
  say("  non-FMA ops    %s   (divisions, square roots)", num(rep.nonfma / ncells))
  say("  indexed        %s   (values gathered or added through an index; %s first touches)",
      num(rep.indexed / ncells), num((rep.indexed_first or 0) / ncells))
  if rep.backend == "cpu" and ((rep.factor_lanes or 0) > 0 or (rep.factor_gathers or 0) > 0) then
    say("  factors        %s lanes selected or copied, %s values gathered   (the group's geometry, " ..
        "at the FMA rates)", num(rep.factor_lanes / ncells), num(rep.factor_gathers / ncells))
  end
  if (rep.shared_per_group or 0) > 0 and c.block > 0 then
    say("  shared memory  %s bytes declared per cell (%d a group of %d cells)",
        num(rep.shared_per_group / c.block), rep.shared_per_group, c.block)
  end
  if rep.backend == "cpu" and (rep.shared_bytes > 0 or rep.atomics > 0) then
    say("(On the cpu a group's shared arrays live in L1 and the groups add color by color: the " ..
        "shared bytes and the atomics are counted as a GPU would see them, but they are no ceiling here.)")
  end
end

local function occupancy_section(say, rep)
  if (rep.occupancy or 0) > 0 then
    say("%.0f%% of the compute unit's threads are resident: %d items a group, %d registers an item, " ..
        "%d bytes of shared memory a group.", 100 * rep.occupancy, rep.group_items, rep.registers,
        rep.shared_per_group)
    say("It is bound by %s: %s.", rep.occupancy_limit, limit_words[rep.occupancy_limit] or "?")
    say("The calibrated curve at this occupancy (times the last wave's fill) gives an efficiency of %.2f.",
        rep.efficiency)
  elseif rep.backend == "cpu" then
    say("None: the cpu runs one work group per OpenMP thread at a time, its items as a loop, so " ..
        "there are no resident groups to count (rep.occupancy is 0).")
  else
    say("Not known: %s does not say how many registers and how much shared memory its kernel " ..
        "uses, so the model takes the ceilings as calibrated (rep.occupancy is 0).", rep.backend)
  end
end

-- A:explain(action [, opts]) -> the text (printed unless opts.quiet), the what-if rows
local function explain(A, action, opts)
  if type(action) ~= "string" or not actions[action] then
    error(("A:explain: argument 1 must be an action name (\"residual\", \"apply\", \"diagonal\"), got %s"):format(
          type(action) == "string" and ("'" .. action .. "'") or type(action)), 2)
  end
  local o
  opts, o = explain_options(opts)
  local rep, why = try_model(A, action, o)
  if not rep then error("A:explain: " .. why, 2) end
  o.strategy = rep.strategy -- the variations below keep the strategy that would run
  local src = A:source(action, o)
  local d = defines(src)
  local st, delegated = text_for(rep.strategy, action)
  local c = {rep = rep, d = d, action = action, opts = o, block = d.BLOCK or 0,
             items = rep.group_items or 0, groups = rep.groups or 0}
  if c.items == 0 and d.GROUP_ITEMS then c.items = d.GROUP_ITEMS end
  if c.items == 0 and delegated and d.NB and d.NQ then -- transpose's group: whole warps
    c.items = (c.block * math.max(d.NB, d.NQ) + 31) // 32 * 32
  end
  if c.groups == 0 and c.block > 0 then c.groups = (rep.ncells + c.block - 1) // c.block end
  local out = {}
  local function say(fmt, ...) out[#out + 1] = select("#", ...) > 0 and fmt:format(...) or fmt end

  say("A:explain(\"%s\"): strategy %s on %s (%s), %s; %s, quadrature %s; %d cells, %d dofs",
      action, rep.strategy, rep.backend, rep.device, rep.precision, rep.space, rep.quadrature,
      rep.ncells, rep.ndofs)
  say("  why this strategy: %s", rep.why)
  say("")
  say("== Thread mapping ==")
  if not st then
    say("(felab has no words for strategy %s yet)", rep.strategy)
  else
    if delegated then
      say("%s keeps no kernel of its own for the %s: it runs transpose's (%s).", rep.strategy,
          action, st.template)
    end
    say("%s", st.mapping(c))
    say("%s", backend_sentence(rep))
  end
  say("")
  say("== Cost as the order grows ==")
  cost_section(say, rep, d)
  say("")
  say("== Phases (the template's, %s) ==", st and st.template or "?")
  local phases = st and st.phases(c) or {}
  for i, p in ipairs(phases) do say("  %d. %s: %s", i, p[1], p[2]) end
  counts_section(say, rep, c)
  say("")
  say("== Occupancy ==")
  occupancy_section(say, rep)
  say("")
  say("== Which ceiling binds ==")
  ceiling_section(say, rep)
  say("")
  local rows = {}
  if opts.whatif ~= false then
    rows = whatif_section(say, A, action, rep, o, c, opts)
    say("")
  end
  if opts.source then
    say("== Source (A:source(\"%s\"), phases marked) ==", action)
    local marked, n = src, 0
    if st then marked, n = mark(src, st.kernel(c), phases) end
    if n == 0 then say("(no phase comments found in this source; it is printed as it is)") end
    out[#out + 1] = marked
  else
    say("(The generated source, %d lines, with its phases marked: A:explain(\"%s\", {source = true}).)",
        select(2, src:gsub("\n", "")), action)
  end
  local text = table.concat(out, "\n")
  if not opts.quiet then print(text) end
  return text, rows
end

ops.methods.explain = explain
ops.meta.explain = explain

-- A:strategies' info table printed as a table: the model's prediction and this session's
-- measurement (the fastest steady apply of each strategy on this operator, where one ran) in
-- columns of their own, the ranking by the measurement where every strategy that applies has
-- one, else by the prediction, and the notes (the rules, from docs/benchmarks.md's runs).
local strategies_c = ops.methods.strategies

local function strategies_table(info, order, backend, precision)
  local lines = {("A:strategies() on %s, %s: the apply's time"):format(backend, precision)}
  lines[#lines + 1] = ("  %-10s %-8s %12s %22s  %s"):format("strategy", "applies", "predicted",
                                                         "measured (this session)", "note")
  local ranked, measured_all = {}, true
  for _, name in ipairs(order) do
    local f = info[name]
    local m = f.measured_seconds
    lines[#lines + 1] = ("  %-10s %-8s %12s %22s  %s"):format(name,
      f.applies and (f.default and "default" or "yes") or "no",
      f.predicted_seconds and time(f.predicted_seconds) or "-",
      m and ("%s (%d calls)"):format(time(m), f.measured_calls) or "-", f.why)
    if f.applies then
      ranked[#ranked + 1] = name
      measured_all = measured_all and m ~= nil
    end
  end
  local measured = {}
  for _, name in ipairs(ranked) do
    if info[name].measured_seconds then measured[#measured + 1] = name end
  end
  local function by(key) return function(a, b) return info[a][key] < info[b][key] end end
  table.sort(measured, by("measured_seconds"))
  table.sort(ranked, by("predicted_seconds"))
  if measured_all then
    lines[#lines + 1] = "Fastest first, as measured this session: " .. table.concat(measured, ", ")
  else
    if #measured > 1 then
      lines[#lines + 1] = "Fastest first of those measured this session: " .. table.concat(measured, ", ")
    end
    lines[#lines + 1] = "Fastest first as the model predicts: " .. table.concat(ranked, ", ")
  end
  return table.concat(lines, "\n")
end

local function strategies(A, o)
  local names, info = strategies_c(A, o)
  local backend = o and o.backend or device.info().backend
  local precision = o and o.precision or "double"
  local space, ndofs = A.space.name, A.ndofs
  for _, r in ipairs(perf.history()) do
    local f = info[r.strategy]
    if f and r.action == "apply" and r.backend == backend and r.precision == precision and
       r.ndofs == ndofs and r.space:sub(1, #space + 1) == space .. " " and r.seconds > 0 and not r.first_run then
      f.measured_seconds = math.min(f.measured_seconds or math.huge, r.seconds)
      f.measured_calls = (f.measured_calls or 0) + 1
    end
  end
  local order = {}
  for _, name in ipairs(names) do order[#order + 1] = name end
  local rest = {}
  for name in pairs(info) do
    if not info[name].applies then rest[#rest + 1] = name end
  end
  table.sort(rest)
  for _, name in ipairs(rest) do order[#order + 1] = name end
  return names, setmetatable(info, {__tostring = function(t)
    return strategies_table(t, order, backend, precision)
  end})
end

ops.methods.strategies = strategies

return {
  {"felab.operator:explain",
   "A:explain(action [, {backend =, precision =, strategy =, block =, ..., source =, measure =, whatif =, quiet =}])",
   "Says in words how the strategy that would run an action works, for teaching: the thread\n" ..
   "mapping, each strategy's cost as the order grows, the phases with the model's counts per\n" ..
   "cell, the occupancy, the ceiling that binds and why, and what another block, precision or\n" ..
   "strategy would take (predicted; ratios within 15% are \"the same\"). source = true adds the\n" ..
   "generated source with its phases marked; measure = true (or a count) runs the action and\n" ..
   "each what-if row and says whether the measurement bears the row out; whatif = {\"block\",\n" ..
   "\"precision\", \"strategy\"} (the default) or option tables ({strategy = \"csr\"}) picks the\n" ..
   "rows, false none (each row compiles its kernel). Returns the text, printed unless quiet =\n" ..
   "true, and the rows {label, predicted_seconds, predicted_ratio, measured_seconds,\n" ..
   "measured_ratio, borne_out}.\n" ..
   "example: A:explain(\"apply\", {strategy = \"sumfact\"})"},
}
