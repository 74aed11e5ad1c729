-- Lesson 8: coloring against atomics. At the prompt: lesson(8); as a script:
-- build/felab scripts/lessons/08-coloring.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 8,
  title = "Coloring against atomics",
  summary = "atomic adds into shared nodes, or colors of cells that share none",
  sizes = {n = {8, 4}},
  steps = {
    {title = "the colors of a mesh",
     say = [[
Cells that share a node add into the same entry of the result. Run side by side, they race:
either every add is atomic, or the cells are colored so that no two cells of one color
share a node, and the colors run one after another with plain adds (Kiss et al. compare
both for their element-by-element BiCG).]],
     look = "how many colors this mesh needs and how evenly the cells fall into them.",
     code = [[
m = mesh.box{cells = {@n, @n, @n}, cell = "tet"}
ncolors, sizes = m:color()
lo, hi = math.huge, 0
for _, s in ipairs(sizes) do lo, hi = math.min(lo, s), math.max(hi, s) end
print(("%d cells in %d colors: %d to %d cells a color (%.0f on average)"):format(m.ncells,
  ncolors, lo, hi, m.ncells / ncolors))]]},
    {title = "ebe with each scatter",
     say = [[
ebe multiplies each cell's element matrix by the cell's values of w and adds the product
into y: scatter = "atomic" (the default) adds with atomics in one launch, scatter = "color"
launches the colors one after another. Each is applied once, then 5 times: the table keeps
the fastest.]],
     look = [[
the atomic adds counted (every (cell, node) pair, or none), the launches (one per color
more), the measured times, and the difference between the two results.]],
     code = [[
V = fe.space(m, "P2")
A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
w = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] * x[3] end)
reps, ys = {}, {}
print(("%-8s %10s %9s %12s %12s %-9s"):format("scatter", "atomics", "launches", "measured",
  "predicted", "bound"))
for _, sc in ipairs{"atomic", "color"} do
  local best
  for i = 1, 6 do
    local y, rep = A:apply(w, {strategy = "ebe", scatter = sc})
    if i > 1 and (not best or rep.seconds < best.seconds) then best, ys[sc] = rep, y end
  end
  reps[sc] = best
  print(("%-8s %10d %9d %10.3g s %10.3g s %-9s"):format(sc, best.atomics, best.launches,
    best.seconds, best.predicted_seconds, best.bound))
end
print(("|y_atomic - y_color| / |y_color| = %.2e"):format(ys.atomic:copy():axpy(-1, ys.color):norm()
  / ys.color:norm()))
L.check(reps.color.atomics == 0 and reps.atomic.atomics > 0, "coloring removes every atomic add")
L.check(reps.color.launches > reps.atomic.launches, "coloring pays in launches (one per color)")]]},
    {title = "what decides it",
     say = [[
Atomics cost where many threads add into the same entries at once, and on devices whose
atomics are slow (fp64 atomics on older GPUs, a compare-and-swap loop in OpenCL); colors
cost a launch and a wait per color, and each color's cells lie scattered through memory.
On the cpu felab counts no atomics ceiling (its groups add color by color anyway); the
model's ceilings here and its prediction for an H100 say what it expects to bind.]],
     look = "each scatter's ceilings here, and the H100's predicted time and bound for each.",
     code = [[
for _, sc in ipairs{"atomic", "color"} do
  local c = reps[sc].ceilings
  local gpu = perf.predict(A, {device = "H100", strategy = "ebe", scatter = sc})
  print(("%-8s here: atomics %.3g us, launches %.3g us, dram %.3g us; H100: %.3g us, %s bound, %d atomics"):format(
    sc, c.atomics * 1e6, c.launches * 1e6, c.dram * 1e6, gpu.predicted_seconds * 1e6, gpu.bound,
    gpu.atomics))
end
files = perf.roofline{out = @out/coloring, calls = {reps.atomic, reps.color}}
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
