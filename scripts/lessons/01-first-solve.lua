-- Lesson 1: a first mesh and solve. At the prompt: lesson(1); as a script:
-- build/felab scripts/lessons/01-first-solve.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 1,
  title = "A first mesh and solve",
  summary = "mesh.box, fe.space, fe.operator, solve.cg, and what the numbers of a report mean",
  sizes = {n = {8, 4}},
  steps = {
    {title = "a mesh",
     say = [[
mesh.box makes a unit cube of n x n x n small cubes; cell = "tet" splits each into 6
tetrahedra. Its faces carry the boundary tags xmin .. zmax, which boundary conditions name.]],
     look = "the number of cells (6 n^3) and vertices ((n + 1)^3), and the six tags.",
     code = [[
m = mesh.box{cells = {@n, @n, @n}, cell = "tet"}
print(m)
print(("cells %d = 6 x %d^3, vertices %d = %d^3"):format(m.ncells, @n, m.nvertices, @n + 1))
L.check(m.ncells == 6 * @n ^ 3 and m.nvertices == (@n + 1) ^ 3, "6 n^3 tets on (n + 1)^3 vertices")]]},
    {title = "a space",
     say = [[
A space is an element on the mesh: P1 has one unknown (a dof) per vertex, P2 adds one per
edge. The space owns the map from each cell's basis functions to the global dofs.]],
     look = "P1's dofs against the vertices, and how many more P2 has on the same mesh.",
     code = [[
V = fe.space(m, "P1")
V2 = fe.space(m, "P2")
print(("P1: %d dofs (%d vertices); P2: %d dofs, %.1fx as many"):format(
  V.ndofs, m.nvertices, V2.ndofs, V2.ndofs / V.ndofs))]]},
    {title = "an operator",
     say = [[
The physics is pointwise: Poisson's -div(kappa grad u) = f at each quadrature point. An
operator is a space, the physics and boundary conditions (here u = 0 on every face). It can
act in several ways, the strategies; felab picks one by its performance model.]],
     look = "which strategies apply to P1 on tets, and the one marked default.",
     code = [[
A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
names, why = A:strategies()
for _, s in ipairs(names) do print(("  %-10s %s"):format(s, why[s].why)) end]]},
    {title = "a solve",
     say = [[
solve.cg solves residual(u) = 0 by conjugate gradients, here preconditioned by the diagonal
(Jacobi). Each iteration applies the operator once.]],
     look = [[
the iterations and why it stopped (rtol: the residual fell by 1e-8), the solution's
maximum (the centre of the cube), and the solve's report: its strategy and its time.]],
     code = [[
u, info = solve.cg(A, {pc = "jacobi", rtol = 1e-8})
print(("%d iterations, converged %s (%s), max u = %.5f"):format(
  info.iterations, tostring(info.converged), info.reason, u:max()))
print(info.report)
L.check(info.converged, "CG converged")]]},
    {title = "the report of one action",
     say = [[
Every call returns a report. 'counted' is the work: flops, and the minimal bytes the
algorithm must move. 'measured' is the kernel's time and the rates it makes. 'predicted' is
the model's time and the ceiling that binds it (dram, fma, launches, ...); 'ceilings' is the
time each ceiling alone would take. The first call of an action builds and compiles; repeat
it to see the steady time.]],
     look = "flops and bytes per dof, their ratio (the arithmetic intensity), and predicted/measured.",
     code = [[
y, rep = A:apply(u)
y, rep = A:apply(u)
print(rep)
print(("per dof: %.1f flops, %.1f bytes; intensity %.3f flop/byte; bound by %s"):format(
  rep.flops / V.ndofs, rep.bytes / V.ndofs, rep.flops / rep.bytes, rep.bound))
print(("measured %.3g s, predicted %.3g s: predicted/measured %.2f"):format(
  rep.seconds, rep.predicted_seconds, rep.predicted_seconds / rep.seconds))]]},
    {title = "the residual history, drawn",
     say = [[
info.history holds the residual norm of every iteration; info:plot draws it (log scale).
On a finer mesh CG needs more iterations (lesson 6 counts them).]],
     look = "the files written, and the last residual against the first.",
     code = [[
files = info:plot{out = @out/residuals}
print(("residual %.3g -> %.3g in %d iterations"):format(info.history[1],
  info.history[#info.history], info.iterations))
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
