-- Lesson 6: two-scale against Jacobi. At the prompt: lesson(6); as a script:
-- build/felab scripts/lessons/06-twoscale.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 6,
  title = "Two-scale against Jacobi",
  summary = "CG's iterations under refinement: Jacobi against Schwarz + a coarse solve",
  sizes = {sizes = {{2, 4, 6, 8}, {2, 4, 6}}},
  steps = {
    {title = "two preconditioners",
     say = [[
Jacobi divides the residual by the operator's diagonal: cheap, local, and blind to the
smooth part of the error, so CG's iterations grow as the mesh is refined (like 1/h).
twoscale (Remacle, Gandham and Warburton) adds two scales: overlapping Schwarz solves on
each element's patch, by fast diagonalization, for the rough part, and a Q1 solve on the
coarse mesh for the smooth part.]],
     look = "the iterations of each as n (cells per side) grows, and the time of each solve.",
     code = [[
pde = physics.poisson{kappa = 1, source = 1}
rows = {}
print(("%3s %7s %10s %10s %12s %12s"):format("n", "dofs", "jacobi", "twoscale", "jacobi", "twoscale"))
print(("%3s %7s %10s %10s %12s %12s"):format("", "", "iterations", "iterations", "seconds", "seconds"))
for _, n in ipairs(@sizes) do
  local V = fe.space(mesh.box{cells = {n, n, n}, cell = "hex"}, "Q3")
  local A = fe.operator(V, pde, {dirichlet = "all"})
  local t0 = perf.clock()
  local _, ij = solve.cg(A, {pc = "jacobi", rtol = 1e-8})
  local t1 = perf.clock()
  local _, it = solve.cg(A, {pc = "twoscale", rtol = 1e-8})
  local t2 = perf.clock()
  rows[#rows + 1] = {n = n, dofs = V.ndofs, jacobi = ij, twoscale = it}
  print(("%3d %7d %10d %10d %10.3g s %10.3g s"):format(n, V.ndofs, ij.iterations, it.iterations,
    t1 - t0, t2 - t1))
end]]},
    {title = "the growth, measured",
     say = [[
From the coarsest to the finest mesh h shrank by the ratio of their n. A count that grows
like 1/h grows by that ratio; one that does not depend on h stays put.]],
     look = "each preconditioner's growth factor against the refinement factor.",
     code = [[
a, b = rows[1], rows[#rows]
gj = b.jacobi.iterations / a.jacobi.iterations
gt = b.twoscale.iterations / a.twoscale.iterations
print(("h / %d: jacobi's iterations x %.2f, twoscale's x %.2f"):format(b.n // a.n, gj, gt))
L.check(gj > gt, "jacobi's iterations grow faster under refinement than twoscale's")
L.check(b.twoscale.iterations < b.jacobi.iterations, "on the finest mesh twoscale takes fewer iterations")]]},
    {title = "the residual histories, drawn",
     look = "how fast each residual falls on the finest mesh.",
     code = [[
files = perf.plot({b.jacobi, b.twoscale}, {out = @out/twoscale, label = {"jacobi", "twoscale"},
                  title = ("Q3, %d^3 cells: CG's residual"):format(b.n)})
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
