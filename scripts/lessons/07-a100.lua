-- Lesson 7: what would this take on an A100? At the prompt: lesson(7); as a script:
-- build/felab scripts/lessons/07-a100.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 7,
  title = "What would this take on an A100?",
  summary = "the model's what-if: an operator's action on a datasheet GPU, against this machine",
  sizes = {n = {8, 4}, N = {16, 8}},
  steps = {
    {title = "the operator, measured here",
     say = [[
A Q3 Laplacian on hexes, applied here with the strategy felab picks: the fastest of 5
steady applies is what this machine does.]],
     look = "the strategy, the measured time and the model's prediction for this machine.",
     code = [[
V = fe.space(mesh.box{cells = {@n, @n, @n}, cell = "hex"}, "Q3")
A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
w = V:interpolate(function(x) return x[1] * x[2] + x[3] end)
here = nil
for i = 1, 6 do
  local _, rep = A:apply(w)
  if i > 1 and (not here or rep.seconds < here.seconds) then here = rep end
end
print(here)]]},
    {title = "a larger mesh, counted but not run",
     say = [[
A card is worth asking about for a problem that fills it. B is the same operator on N^3
cells: built (mesh, space, counts), never applied here. perf.predict gives the model's time
for this machine, from its calibration; the step before shows how far to trust that model
here (predicted/measured).]],
     look = "the dofs, this machine's predicted time and its bound.",
     code = [[
mB = mesh.box{cells = {@N, @N, @N}, cell = "hex"}
VB = fe.space(mB, "Q3")
B = fe.operator(VB, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
mine = perf.predict(B, {strategy = here.strategy})
print(("B: %d cells, %d dofs; here (predicted): %s %.3g s, %s bound"):format(mB.ncells, VB.ndofs,
  here.strategy, mine.predicted_seconds, mine.bound))
print(("the model on A here: predicted/measured %.2f"):format(here.predicted_seconds / here.seconds))]]},
    {title = "every strategy on the A100",
     say = [[
perf.compare asks the model for the A100 of felab's datasheet table (perf.devices()). With
no GPU calibrated here, it takes the card's datasheet peaks as they are (no launch cost, no
occupancy curve), and it counts the work of this backend's kernels: an estimate of what the
work would take, not a measurement. The last line says what it based the answer on.]],
     look = "the fastest strategy and its bound on the card, in double and in single.",
     code = [[
rows = perf.compare{B, devices = {"A100"}, precisions = {"double", "single"}}]]},
    {title = "the A100 against this machine",
     say = [[
The card's fastest double-precision row against this machine's prediction for the same
work, and the applies of a CG solve of B (its iterations measured on A, scaled by the
refinement N / n, as Jacobi's grow like 1/h: lesson 6).]],
     look = "the predicted speedup, and what the solve's applies would take on each.",
     code = [[
best = nil
for _, r in ipairs(rows) do
  if r.precision == "double" and r.seconds and (not best or r.seconds < best.seconds) then best = r end
end
print(("an apply of B: here %.3g s (%s), the A100 %.3g s (%s, %s bound): %.0fx"):format(
  mine.predicted_seconds, here.strategy, best.seconds, best.strategy, best.bound,
  mine.predicted_seconds / best.seconds))
_, info = solve.cg(A, {pc = "jacobi", rtol = 1e-8})
its = math.ceil(info.iterations * @N / @n)
print(("CG on A: %d iterations; on B about %d: its applies %.3g s here, %.3g s on the A100 (vector work aside)"):format(
  info.iterations, its, its * mine.predicted_seconds, its * best.seconds))
L.check(best.seconds < mine.predicted_seconds, "the model predicts the A100 faster than this machine on B")]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
