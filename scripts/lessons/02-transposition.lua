-- Lesson 2: quadrature per cell and thread transposition. At the prompt: lesson(2); as a
-- script: build/felab scripts/lessons/02-transposition.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 2,
  title = "Quadrature per cell and thread transposition",
  summary = "one residual, two kernel shapes (transpose, patch): what each counts, what binds",
  sizes = {n = {6, 3}},
  steps = {
    {title = "an operator on P2 tets",
     say = [[
A residual integrates, in every cell, the physics at each quadrature point against every
basis function. P2 on a tet has NB basis functions and NQ quadrature points, and NB > NQ:
the two loops have different lengths, and a GPU's threads must be mapped onto both.]],
     look = "the cells and the dofs; the next step gives NB and NQ.",
     code = [[
m = mesh.box{cells = {@n, @n, @n}, cell = "tet"}
V = fe.space(m, "P2")
A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
u = V:interpolate(function(x) return x[1] * x[2] end)
print(("%d cells, %d dofs"):format(m.ncells, V.ndofs))]]},
    {title = "the thread mapping of transpose",
     say = [[
transpose (Knepley, Rupp and Terrel) gives a work group a block of cells. Its threads first
take one (cell, quadrature point) each, then switch roles to one (cell, basis function)
each; what crosses between the phases goes through shared memory, with a barrier.
A:explain says it in words (its first sections are printed here; the whole text also has
the occupancy, what binds, what-if rows and the generated source).]],
     look = "the block, the items per group, and the three phases: gather, quadrature, basis.",
     code = [[
text = A:explain("residual", {strategy = "transpose", quiet = true})
print(text:match("== Thread mapping ==.-\n(.-)\n== Occupancy"))]]},
    {title = "transpose against patch: what each counts",
     say = [[
patch (felab's own) groups cells into patches with a local numbering of their nodes and
sums into shared memory, so a node shared by the patch's cells is added to global memory
once. Each action is run 5 times after its first (compile, setup); the table keeps the
fastest steady time. On the cpu the shared bytes and atomics are counted as a GPU would see
them (a cpu's shared memory is its L1 cache, and it adds color by color).]],
     look = [[
flops (the same integral), patch's shared bytes and atomic adds per cell against
transpose's, the bound, and predicted against measured.]],
     code = [[
reps = {}
print(("%-10s %9s %9s %9s %9s %9s %-9s %11s %11s"):format("strategy", "flop/cell",
  "byte/cell", "shm/cell", "atom/cell", "idx/cell", "bound", "predicted", "measured"))
for _, s in ipairs{"transpose", "patch"} do
  local best, rep = math.huge
  for i = 1, 6 do
    r, rep = A:residual(u, {strategy = s})
    if i > 1 then best = math.min(best, rep.seconds) end
  end
  reps[s] = rep
  local c = m.ncells
  print(("%-10s %9.0f %9.1f %9.0f %9.1f %9.1f %-9s %9.3g s %9.3g s"):format(s, rep.flops / c,
    rep.bytes / c, (rep.shared_bytes or 0) / c, (rep.atomics or 0) / c, (rep.indexed or 0) / c,
    rep.bound, rep.predicted_seconds, best))
end
print(("patch/transpose: shared bytes %.2fx, atomic adds %.2fx"):format(
  reps.patch.shared_bytes / reps.transpose.shared_bytes, reps.patch.atomics / reps.transpose.atomics))
L.check(reps.patch.atomics < reps.transpose.atomics, "patch counts fewer atomic adds than transpose")]]},
    {title = "the same two on a GPU (predicted)",
     say = [[
Where the two shapes differ is on a GPU, where shared memory and atomics are real pipes.
perf.compare asks the model for a card that is not here (its datasheet scales this
machine's calibration where it can; lesson 7 says more).]],
     look = "the predicted time and the bound of each strategy on the H100.",
     code = [[
rows = perf.compare{A, action = "residual", devices = {"H100"}, strategies = {"transpose", "patch"},
                    precisions = {"double"}}]]},
    {title = "both on the roofline",
     say = [[
A roofline places each call at its arithmetic intensity (flops per byte) and its measured
rate, under the machine's ceilings: the sloped line is the memory bandwidth, the flat one
the FMA rate.]],
     look = "where the two points sit against the lines (lesson 5 reads a roofline).",
     code = [[
files = perf.roofline{out = @out/transposition, calls = {reps.transpose, reps.patch}}
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
