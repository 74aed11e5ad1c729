-- Lesson 5: the roofline and what binds. At the prompt: lesson(5); as a script:
-- build/felab scripts/lessons/05-roofline.lua [quick] (the format: shell/lib/lesson.lua).
local t = {
  number = 5,
  title = "The roofline and what binds",
  summary = "this machine's ceilings, four actions under them, and the model's binding ceiling",
  sizes = {n1 = {16, 6}, n3 = {6, 3}},
  steps = {
    {title = "four actions of different intensity",
     say = [[
Arithmetic intensity is flops per byte moved. An assembled P1 product does a couple of
flops per matrix entry it reads; a high-order matrix-free kernel does many flops per dof it
reads. Four steady applies (each the fastest of 5 after a first) span that range.]],
     look = "flops/byte from left to right, and the measured GF/s beside it.",
     code = [[
pde = physics.poisson{kappa = 1, source = 1}
V1 = fe.space(mesh.box{cells = {@n1, @n1, @n1}, cell = "tet"}, "P1")
V3 = fe.space(mesh.box{cells = {@n3, @n3, @n3}, cell = "hex"}, "Q3")
cases = {{"P1 csr", V1, "csr"}, {"Q3 ebe", V3, "ebe"}, {"Q3 sumfact", V3, "sumfact"},
         {"Q3 transpose", V3, "transpose"}}
reps = {}
print(("%-13s %10s %10s %10s %-9s"):format("", "flop/byte", "GF/s", "GB/s", "bound"))
for _, c in ipairs(cases) do
  local A = fe.operator(c[2], pde, {dirichlet = "all"})
  local w = c[2]:interpolate(function(x) return x[1] * x[2] + x[3] end)
  local best
  for i = 1, 6 do
    local _, rep = A:apply(w, {strategy = c[3]})
    if i > 1 and (not best or rep.seconds < best.seconds) then best = rep end
  end
  reps[#reps + 1] = best
  print(("%-13s %10.3g %10.3g %10.3g %-9s"):format(c[1], best.flops / best.bytes, best.gflops,
    best.gbytes, best.bound))
end
function intensity(i) return reps[i].flops / reps[i].bytes end
L.check(intensity(1) < intensity(3) and intensity(1) < intensity(4),
        "the assembled P1 product counts fewer flops per byte than the matrix-free Q3 kernels")]]},
    {title = "this machine's ceilings",
     say = [[
felab measured this backend's ceilings once (device.calibrate: a streaming copy for the
bandwidth, an FMA loop for the flop rate, and more: indexed loads, launches). Where the
memory line meets the flat FMA line is the ridge: a kernel left of it cannot reach the
flop peak, whatever its code, because the bytes arrive too slowly.]],
     look = "the two ceilings, the ridge, and which side of it each action sits on.",
     code = [[
cal = device.info().calibration.double
ridge = cal.gflops / cal.gbytes
print(("memory %.1f GB/s, FMA %.1f GF/s: ridge at %.2f flop/byte; launch %.2f us"):format(
  cal.gbytes, cal.gflops, ridge, cal.launch_us))
for i, c in ipairs(cases) do
  local r = reps[i]
  local roof = math.min(cal.gflops, cal.gbytes * r.flops / r.bytes)
  print(("%-13s %s of the ridge; its roof %.3g GF/s, measured %.3g GF/s (%.0f%%)"):format(c[1],
    r.flops / r.bytes < ridge and "left" or "right", roof, r.gflops, 100 * r.gflops / roof))
end]]},
    {title = "what binds, by the model",
     say = [[
The roofline has two lines; the model has more ceilings: each is a time the action would
take if that pipe alone limited it (DRAM, L2, FMA, indexed loads through the dof map,
launches, ...). The largest binds. A small problem is often bound by the launches alone.]],
     look = "each action's ceilings in order; the first is rep.bound.",
     code = [[
for i, c in ipairs(cases) do
  local r, list = reps[i], {}
  for k, s in pairs(r.ceilings) do if s > 0 then list[#list + 1] = {k, s} end end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  local parts = {}
  for j = 1, math.min(4, #list) do parts[j] = ("%s %.3g us"):format(list[j][1], list[j][2] * 1e6) end
  print(("%-13s predicted %.3g us, measured %.3g us: %s"):format(c[1], r.predicted_seconds * 1e6,
    r.seconds * 1e6, table.concat(parts, ", ")))
end]]},
    {title = "the roofline, drawn",
     look = "the points against the ceilings drawn for this backend and precision.",
     code = [[
files = perf.roofline{out = @out/roofline, calls = reps, title = "four applies on the roofline"}
print("written: " .. (files.png or files.csv))]]},
    {title = "the model's words for one of them",
     say = [[
A:explain says why a ceiling binds. Printed here: its section on the binding ceiling for
Q3 transpose (the whole text also has the thread mapping, the what-if rows and the source).]],
     look = "the shares of the prediction each ceiling takes.",
     code = [[
A3 = fe.operator(V3, pde, {dirichlet = "all"})
text = A3:explain("apply", {strategy = "transpose", quiet = true})
print(text:match("(== Which ceiling binds ==.-)\n== "))]]},
  },
}
if ... ~= "felab.lesson" then return lesson(t, {quick = ... == "quick"}) end
return t
