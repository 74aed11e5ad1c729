-- Lesson 4: sum factorization, O(p^4) against O(p^6). At the prompt: lesson(4); as a script:
-- build/felab scripts/lessons/04-sumfact.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 4,
  title = "Sum factorization: O(p^4) against O(p^6)",
  summary = "Q1 and up on hexes, transpose against sumfact: counted flops and time by order",
  sizes = {n = {3, 2}, orders = {{1, 2, 3, 4, 5}, {1, 2, 3, 4}}},
  steps = {
    {title = "why the order matters",
     say = [[
On a hex of order p there are (p+1)^3 basis functions and about as many quadrature points.
transpose sums every basis function at every point: (p+1)^3 x (p+1)^3 per cell, O(p^6).
sumfact uses the tensor structure: the basis is a product of 1D bases, so the sums run one
direction at a time, (p+1) terms each for (p+1)^3 outputs: O(p^4). Both give the same
numbers; the step below checks that on Q3.]],
     look = "the difference between the two results (rounding only).",
     code = [[
m = mesh.box{cells = {@n, @n, @n}, cell = "hex"}
pde = physics.poisson{kappa = 1, source = 1}
V = fe.space(m, "Q3")
A = fe.operator(V, pde, {dirichlet = "all"})
w = V:interpolate(function(x) return math.sin(3 * x[1]) + x[2] * x[3] end)
yt = A:apply(w, {strategy = "transpose"})
ys = A:apply(w, {strategy = "sumfact"})
print(("|transpose - sumfact| / |transpose| = %.2e"):format(yt:copy():axpy(-1, ys):norm() / yt:norm()))]]},
    {title = "a sweep over the order",
     say = [[
For each order, one operator on the same mesh; each strategy applies it once (compile and
setup), then 5 times: the table keeps the fastest. flop/cell is what the strategy counts.]],
     look = "how flop/cell grows from row to row for each strategy, and the time ratio.",
     code = [[
orders, res, reps = @orders, {}, {}
print(("%-4s %7s %13s %13s %11s %11s %8s"):format("", "dofs", "transpose", "sumfact",
  "transpose", "sumfact", "t/s"))
print(("%-4s %7s %13s %13s %11s %11s %8s"):format("", "", "flop/cell", "flop/cell", "seconds",
  "seconds", "time"))
for _, p in ipairs(orders) do
  local Vp = fe.space(m, "Q" .. p)
  local Ap = fe.operator(Vp, pde, {dirichlet = "all"})
  local wp = Vp:interpolate(function(x) return math.sin(3 * x[1]) + x[2] * x[3] end)
  local r = {p = p, dofs = Vp.ndofs}
  for _, s in ipairs{"transpose", "sumfact"} do
    local best, rep = math.huge
    for i = 1, 6 do
      local _, rp = Ap:apply(wp, {strategy = s})
      if i > 1 and rp.seconds < best then best, rep = rp.seconds, rp end
    end
    r[s] = {seconds = best, flops = rep.flops / m.ncells}
    reps[#reps + 1] = rep
  end
  res[#res + 1] = r
  print(("Q%-3d %7d %13.4g %13.4g %11.3g %11.3g %8.2f"):format(p, r.dofs, r.transpose.flops,
    r.sumfact.flops, r.transpose.seconds, r.sumfact.seconds, r.transpose.seconds / r.sumfact.seconds))
end]]},
    {title = "the growth, measured",
     say = [[
If flop/cell grows like (p+1)^k, then k = log(f(p) / f(q)) / log((p+1) / (q+1)) for two
orders p > q. Here k is taken from Q2 to the highest order of the sweep.]],
     look = [[
transpose's k against the theory's 6 and sumfact's against its 4, and at the highest order which strategy is
faster, by how much, on this machine.]],
     code = [[
lo, hi = res[2], res[#res]
function growth(s) return math.log(hi[s].flops / lo[s].flops) / math.log((hi.p + 1) / (lo.p + 1)) end
kt, ks = growth("transpose"), growth("sumfact")
print(("flop/cell grows like (p+1)^%.2f for transpose, (p+1)^%.2f for sumfact"):format(kt, ks))
ratio = hi.transpose.seconds / hi.sumfact.seconds
print(("Q%d: transpose %.3g s, sumfact %.3g s: sumfact %.1fx faster (counted flops: %.1fx fewer)"):format(
  hi.p, hi.transpose.seconds, hi.sumfact.seconds, ratio, hi.transpose.flops / hi.sumfact.flops))
L.check(kt > ks + 1, "transpose's flops grow faster with the order than sumfact's (by more than one power)")
L.check(hi.transpose.flops > 4 * hi.sumfact.flops, "at Q%d sumfact counts over 4x fewer flops a cell",
        hi.p)
if L.quick then
  -- a handful of cells times the call's overhead more than the sums: no claim on it
  print(("(quick sizes, %d cells: the times are mostly the call's overhead; the full size checks them)")
        :format(m.ncells))
else
  L.check(ratio > 1, "at Q%d sumfact's measured time is below transpose's", hi.p)
end]]},
    {title = "on the roofline",
     say = "Every steady apply of the sweep, placed by its intensity and its rate.",
     look = [[
transpose's points moving right (more flops per byte) as the order grows; a point's label
names its action, space and strategy ("apply Q3 sumfact"); first runs and repeats are left out.]],
     code = [[
files = perf.roofline{out = @out/sumfact, calls = reps, title = "transpose and sumfact, Q1 and up"}
print("written: " .. (files.png or files.csv))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
