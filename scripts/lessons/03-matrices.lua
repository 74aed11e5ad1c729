-- Lesson 3: element matrices against matrix-free. At the prompt: lesson(3); as a script:
-- build/felab scripts/lessons/03-matrices.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 3,
  title = "Element matrices against matrix-free",
  summary = "csr and ebe store matrices, transpose and sumfact recompute: setup against apply",
  sizes = {n = {6, 3}},
  steps = {
    {title = "element matrices",
     say = [[
An element matrix is the operator restricted to one cell: NB x NB numbers (Q2 on a hex:
27 x 27). ebe applies the operator from them without assembling; csr assembles them into
one sparse matrix first. Both pay a setup, then read the stored numbers at every apply.]],
     look = "how many numbers the element matrices hold, per cell and in all, and their time.",
     code = [[
m = mesh.box{cells = {@n, @n, @n}, cell = "hex"}
V = fe.space(m, "Q2")
pde = physics.poisson{kappa = 1, source = 1}
A = fe.operator(V, pde, {dirichlet = "all"})
E, rep = A:element_matrices()
print(rep)
nb = 3 ^ 3 -- Q2: 3 nodes a direction
print(("%d cells x %d x %d = %d numbers (%.2f MB in double) for %d dofs"):format(
  m.ncells, nb, nb, m.ncells * nb * nb, m.ncells * nb * nb * 8 / 1e6, V.ndofs))]]},
    {title = "setup against steady apply",
     say = [[
Each strategy gets an operator of its own, so that its first apply pays its whole setup
(element matrices, assembly, geometric factors; a kernel compile too unless it is cached:
the 'kernel' column). Then 5 steady applies; the table keeps the fastest.]],
     look = [[
the setup column against the steady column: how many steady applies the setup costs, and
the bytes each apply must move (stored matrices are read at every apply).]],
     code = [[
u = V:interpolate(function(x) return x[1] * x[2] * x[3] end)
rows = {}
print(("%-10s %10s %-9s %11s %11s %10s %10s"):format("strategy", "setup", "kernel", "first",
  "steady", "bytes", "flops"))
for _, s in ipairs{"csr", "ebe", "transpose", "sumfact"} do
  local B = fe.operator(V, pde, {dirichlet = "all"})
  local y, first = B:apply(u, {strategy = s})
  local best, rep = math.huge
  for i = 1, 5 do
    y, rep = B:apply(u, {strategy = s})
    best = math.min(best, rep.seconds)
  end
  rows[s] = {setup = first.setup_seconds or 0, first = first.seconds, steady = best, rep = rep}
  print(("%-10s %8.3g s %-9s %9.3g s %9.3g s %10.3g %10.3g"):format(s, rows[s].setup,
    tostring(first.kernel), first.seconds, best, rep.bytes, rep.flops))
end]]},
    {title = "what the numbers say",
     say = [[
Stored matrices move more bytes per apply than matrix-free kernels, which recompute from
the geometry; the matrix-free kernels do more flops instead. Which wins depends on the
device's ratio of flops to bandwidth (lesson 5) and on how many applies the setup is spread
over (a solve of many iterations, or a time loop).]],
     look = "bytes per apply against sumfact's, and setup in units of sumfact's steady apply.",
     code = [[
sf = rows.sumfact
for _, s in ipairs{"csr", "ebe", "transpose", "sumfact"} do
  local r = rows[s]
  print(("%-10s bytes %6.2fx sumfact's, flops %6.2fx, setup = %8.0f of sumfact's steady applies"):format(
    s, r.rep.bytes / sf.rep.bytes, r.rep.flops / sf.rep.flops, r.setup / sf.steady))
end
L.check(rows.csr.rep.bytes > sf.rep.bytes and rows.ebe.rep.bytes > sf.rep.bytes,
        "the stored matrices (csr, ebe) move more bytes per apply than sumfact")]]},
    {title = "the steady applies on the roofline",
     look = "the stored strategies at low intensity (left), the matrix-free ones to the right.",
     code = [[
files = perf.roofline{out = @out/matrices, calls = {rows.csr.rep, rows.ebe.rep, rows.transpose.rep, rows.sumfact.rep}}
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
