-- A:explain(action [, opts]): the strategy that would run an operator's action, told in words
-- for teaching (felab issue 17). Everything it says comes from the model's view of the call
-- (A:model: the counts, the occupancy, the ceilings), from the generated source (A:source:
-- its #defines give the block and the sizes) and from the templates' own phases
-- (engine/kernels/*.knl); nothing runs the action.
--
-- Sections, in order: the thread mapping (what a work group and an item are), the phases with
-- the counts per cell, the occupancy, the ceiling that binds and why, what a change of block,
-- precision or strategy would do (predicted times), and the source with its phases marked.
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
  template = "engine/codegen/kernels/elemat.knl (fe_spmv, fe_spmv_sell)",
  kernel = function(c) return csr_sell(c) and "FE_KERNEL(fe_spmv_sell)" or "FE_KERNEL(fe_spmv)" end,
  mapping = function(c)
    local lanes = c.d.EM_LANES or 1
    local s = "The Jacobian was assembled once (element matrices, then atomic adds into a CSR " ..
              "pattern); each action is one sparse matrix-vector product, and no cell appears: " ..
              ("the unit of work is a row (a dof), %d rows. "):format(c.rep.ndofs)
    if csr_sell(c) then
      return s .. "SELL-C-sigma (fe_spmv_sell): a work group is 128 items, one item per row; the C " ..
             "items of a chunk read consecutive slots at each step."
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

local ceiling_words = {
  dram = "the minimal bytes (rep.bytes: cell map, geometry, the vectors once) at the calibrated " ..
         "DRAM bandwidth (on the cpu a sparse matrix's rows, rep.rows, at the calibrated rate of " ..
         "csr's row loop: rows_gbytes): the kernel is memory bound",
  l2 = "the global loads beyond the minimal bytes (rep.l2_bytes: re-reads of nodes shared by " ..
       "cells) at the L2 rate",
  shared = "the shared-memory wavefronts (rep.shared_bytes, 128 bytes each: a warp's access costs " ..
           "one per 32 banks' worth, more on bank conflicts), with the global loads' wavefronts " ..
           "through L1, the same data pipe (rep.l1_wavefronts: stored factors, gathers; " ..
           "rep.table_wavefronts: the tables, where they are global memory), at the calibrated " ..
           "shared-memory rate; or, where longer, the L1's lookups of those global loads " ..
           "(rep.l1_requests warp requests touching rep.l1_lines 128-byte lines: the longer of " ..
           "all the requests' time and all their lines' at the calibrated rates, " ..
           "rep.l1_tag_seconds)",
  fma = "the floating-point operations (rep.flops) at the calibrated FMA rate: compute bound " ..
        "(on the cpu with a group's shared geometric factors put in its lanes: rep.factor_lanes " ..
        "SIMD selects or copies, rep.factor_gathers values gathered one at a time)",
  nonfma = "divisions and square roots (rep.nonfma), which do not issue as FMAs",
  atomics = "the scatter's atomic adds to global memory (rep.atomics) at the calibrated atomic rate",
  constant = "the constant-table loads (rep.constant_loads), one per distinct word a warp reads " ..
             "from a constant cache",
  indexed = "the values gathered and added back through the cell map one at a time " ..
            "(rep.indexed: each an index, a load and a store or an add), at the cpu's calibrated " ..
            "rates for such loops: each node's first touch in a call (rep.indexed_first) from " ..
            "beyond L1, the rest from L1, where the group before left them; on the cpu they run " ..
            "after the multiply-adds and divisions of the same thread, so those three add up",
  latency = "the waits on each group's path (rep.dram_trips and rep.l2_trips dependent loads, " ..
            "rep.phases barrier-separated phases, at the calibrated latencies), once per wave of the " ..
            "groups resident at once, which run the same code and wait together (unless a phase long " ..
            "on the L1's pipe staggers them: rep.waits_hidden): many small groups with many phases " ..
            "wait longer than their pipes work",
  launches = "the fixed cost of each kernel launch and of the host's wait at the end: the " ..
             "problem is too small for its work to matter; a larger mesh is bound by the next ceiling",
}

local limit_words = {
  threads = "the unit's thread slots are full",
  registers = "the registers each item holds: the unit's register file fits no more groups",
  shared = "the shared memory each group declares: the unit fits no more groups",
  groups = "the unit's limit on resident groups (small groups)",
}

-- The model of action `a` with options o, or nil and why not.
local function try_model(A, a, o)
  local ok, rep = pcall(A.model, A, a, o)
  if ok then return rep end
  return nil, bare(rep)
end

-- A:explain(action [, opts]) -> the text (printed unless opts.quiet)
local function explain(A, action, opts)
  if type(action) ~= "string" or not actions[action] then
    error(("A:explain: argument 1 must be an action name (\"residual\", \"apply\", \"diagonal\"), got %s"):format(
          type(action) == "string" and ("'" .. action .. "'") or type(action)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("A:explain: the options must be a table, got " .. type(opts), 2)
  end
  opts = opts or {}
  local o, valid = {}, {at = true, quiet = true}
  for _, k in ipairs(model_keys) do valid[k] = true end
  for k, v in pairs(opts) do
    if not valid[k] then
      error(("A:explain: unknown option '%s' (valid options: %s, at, quiet)"):format(tostring(k),
            table.concat(model_keys, ", ")), 2)
    end
    if k ~= "at" and k ~= "quiet" then o[k] = v end
  end
  local rep, why = try_model(A, action, o)
  if not rep then error("A:explain: " .. why, 2) end
  o.strategy = rep.strategy -- the variations below keep the strategy that would run
  local src = A:source(action, o)
  local d = defines(src)
  local st, delegated = text_for(rep.strategy, action)
  local ncells = math.max(rep.ncells, 1)
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
  say("== Phases (the template's, %s) ==", st and st.template or "?")
  local phases = st and st.phases(c) or {}
  for i, p in ipairs(phases) do say("  %d. %s: %s", i, p[1], p[2]) end
  say("The model counts the whole kernel, not each phase; per cell (%d cells) for the whole kernel:", rep.ncells)
  say("  flops          %s", num(rep.flops / ncells))
  say("  DRAM bytes     %s   (minimal: what the algorithm must move)", num(rep.bytes / ncells))
  say("  L2 bytes       %s   (loads beyond the minimal bytes)", num(rep.l2_bytes / ncells))
  say("  shared bytes   %s   (wavefront bytes: %s wavefronts of 128 bytes)", num(rep.shared_bytes / ncells),
      num(rep.shared_bytes / ncells / 128))
  say("  atomics        %s", num(rep.atomics / ncells))
  say("  non-FMA ops    %s   (divisions, square roots)", num(rep.nonfma / ncells))
  say("  indexed        %s   (values gathered or added through the cell map; %s first touches)",
      num(rep.indexed / ncells), num((rep.indexed_first or 0) / ncells))
  if rep.backend == "cpu" and ((rep.factor_lanes or 0) > 0 or (rep.factor_gathers or 0) > 0) then
    say("  factors        %s lanes selected or copied, %s values gathered   (the group's geometry, " ..
        "at the FMA rates)", num(rep.factor_lanes / ncells), num(rep.factor_gathers / ncells))
  end
  if (rep.shared_per_group or 0) > 0 and c.block > 0 then
    say("  shared memory  %s bytes declared per cell (%d a group of %d cells)",
        num(rep.shared_per_group / c.block), rep.shared_per_group, c.block)
  end
  if rep.backend == "cpu" and rep.shared_bytes > 0 then
    say("(On the cpu a group's shared arrays live in L1 and the groups add color by color: the " ..
        "shared bytes and the atomics are counted as a GPU would see them, but they are no ceiling here.)")
  end
  say("")
  say("== Occupancy ==")
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
  say("")
  say("== Which ceiling binds ==")
  local ceil = {}
  for name, s in pairs(rep.ceilings) do
    if s > 0 then ceil[#ceil + 1] = {name, s} end
  end
  table.sort(ceil, function(a, b) return a[2] > b[2] end)
  local pred = rep.predicted_seconds
  say("predicted %s, bound by %s: %s.", time(pred), rep.bound, ceiling_words[rep.bound] or rep.bound)
  if rep.l1_tag_seconds > 0 and rep.l1_tag_seconds >= rep.ceilings.shared then
    say("Here the L1's lookups take the shared pipe's time: %.3g warp requests of global " ..
        "loads touch %.3g lines (%.1f a request), %s.", rep.l1_requests, rep.l1_lines,
        rep.l1_lines / rep.l1_requests, time(rep.l1_tag_seconds))
  end
  say("Each ceiling alone, as a share of the prediction (the largest of the pipes a group " ..
      "waits for, stretched by the last wave's fill, plus the part of a group's serial time " ..
      "(its phases one after another, each phase's pipes side by side in its warps) that the " ..
      "resident groups do not overlap, plus on a GPU the waves' waits; the atomic adds instead " ..
      "where they take longer; on the cpu the FMA, division and indexed parts summed where that " ..
      "is larger; plus the launches):")
  for _, e in ipairs(ceil) do
    say("  %-9s %10s  %5.1f%%", e[1], time(e[2]), pred > 0 and 100 * e[2] / pred or 0)
  end
  local ph = rep.phase_seconds
  if (rep.resident or 0) > 0 and #ph > 0 then
    local parts = {}
    for i, s in ipairs(ph) do parts[i] = time(s) end
    say("A group's serial time %s (its phases %s); the %d groups resident overlap what it " ..
        "has beyond the largest ceiling %d-fold.", time(rep.serial_seconds),
        table.concat(parts, ", "), rep.resident, rep.resident)
  end
  if (rep.loop_cycles or 0) > 0 then
    say("The hot loop (the innermost loop of the compiled code with the most floating-point " ..
        "work), as llvm-mca simulates it in its model of this core: %.1f cycles an iteration, " ..
        "%.0f iterations, %s over the threads at the calibrated cycle; %s", rep.loop_cycles,
        rep.loop_trips, time(rep.loop_seconds),
        rep.loop_binds
          and "longer than the multiply-adds and divisions at the calibrated rates, so it sets " ..
              "the FMA ceiling (its instructions wait on one chain in a full scheduler)."
          or "shorter than the multiply-adds and divisions at the calibrated rates, which set " ..
              "the FMA ceiling.")
  end
  if (rep.waits_hidden or 0) > 0 then
    say("The longest phase on the L1's pipe (%s) staggers the resident groups by more than a " ..
        "path: %.0f%% of the waits fall in other groups' pipe work and are hidden.",
        time(rep.stagger_seconds), 100 * rep.waits_hidden)
  end
  say("")
  say("== What a change would do (predicted) ==")
  local blocked = (rep.strategy == "transpose" or rep.strategy == "sumfact" or rep.strategy == "patch")
  say("  now: %s %s%s: %s", rep.strategy, rep.precision, blocked and (", block %d"):format(c.block) or "",
      time(pred))
  local function variant(label, vo)
    local r, err = try_model(A, action, vo)
    if r then
      local ratio = r.predicted_seconds / pred
      say("  %-28s %s  (%s, %s bound)", label, time(r.predicted_seconds),
          ratio <= 1 and ("%.2fx faster"):format(1 / ratio) or ("%.2fx slower"):format(ratio), r.bound)
    else
      say("  %-28s cannot run: %s", label, err)
    end
  end
  local function with(k, v)
    local t = {}
    for kk, vv in pairs(o) do t[kk] = vv end
    t[k] = v
    return t
  end
  if blocked and c.block > 0 then
    if c.block > 1 then variant(("block %d (halved)"):format(c.block // 2), with("block", c.block // 2)) end
    variant(("block %d (doubled)"):format(2 * c.block), with("block", 2 * c.block))
  else
    say("  (block: %s takes no block for this action's kernel)", rep.strategy)
  end
  local other = rep.precision == "double" and "single" or "double"
  variant("precision " .. other, with("precision", other))
  local base = {backend = o.backend, precision = o.precision}
  local ok, names, info = pcall(A.strategies, A, base)
  if ok then
    local seen = {}
    for _, name in ipairs(names) do
      seen[name] = true
      if name ~= rep.strategy then variant("strategy " .. name, {backend = o.backend, precision = o.precision, strategy = name}) end
    end
    local rest = {}
    for name in pairs(info) do
      if not seen[name] then rest[#rest + 1] = name end
    end
    table.sort(rest)
    for _, name in ipairs(rest) do say("  %-28s cannot run: %s", "strategy " .. name, info[name].why) end
  else
    say("  (the other strategies: %s)", bare(names))
  end
  say("")
  say("== Source (A:source(\"%s\"), phases marked) ==", action)
  local marked, n = src, 0
  if st then marked, n = mark(src, st.kernel(c), phases) end
  if n == 0 then say("(no phase comments found in this source; it is printed as it is)") end
  out[#out + 1] = marked
  local text = table.concat(out, "\n")
  if not opts.quiet then print(text) end
  return text
end

ops.methods.explain = explain
ops.meta.explain = explain

return {
  {"felab.operator:explain", "A:explain(action [, {backend =, precision =, strategy =, block =, ..., quiet =}])",
   "Says in words how the strategy that would run an action works, for teaching: the thread\n" ..
   "mapping, the phases with the model's counts per cell, the occupancy, the ceiling that binds\n" ..
   "and why, what another block, precision or strategy would take (predicted), and the generated\n" ..
   "source with its phases marked. Returns the text, printed unless quiet = true.\n" ..
   "example: A:explain(\"apply\", {strategy = \"sumfact\"})"},
}
