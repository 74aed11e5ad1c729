-- Q7 Gauss on a distorted box with kappa(x) (issue 43): the sumfact apply (best of 15) and
-- the Jacobi-PCG under the options a user can turn; TAG labels a run made with other NVRTC
-- options (FELAB_CUDA_OPTIONS=-maxrregcount=128). Run on the GPU machine:
--   felab scripts/bench/q7_shape.lua; TAG=r128 FELAB_CUDA_OPTIONS=-maxrregcount=128 felab ...
local be = "cuda"
local m = mesh.box{cells = {28, 28, 28}, cell = "hex", distort = 0.1}
local V = fe.space(m, "Q7")
local A = fe.operator(V, physics.poisson{kappa = "1 + 0.5 * x[0]", source = 1}, {dirichlet = "all"})
local v = V:interpolate(1)
local function one(label, o, pcg)
  o.backend = be
  local ok, err = pcall(function()
    local y, rep = A:apply(v, o)
    local best = 1e9
    for i = 1, 15 do y, rep = A:apply(v, o); best = math.min(best, rep.seconds) end
    local line = ("%-28s apply %6.3f ms  %s"):format(label, best * 1e3, rep.strategy)
    if pcg then
      local so = {pc = "jacobi", rtol = 1e-30, maxit = 100, backend = be}
      for k, x in pairs(o) do so[k] = x end
      local cg = 1e9
      for i = 1, 3 do local u, info = solve.cg(A, so); cg = math.min(cg, info.report.seconds / info.iterations) end
      line = line .. ("  pcg %6.3f ms/it"):format(cg * 1e3)
    end
    print(line)
  end)
  if not ok then print(label .. " failed: " .. tostring(err)) end
  io.stdout:flush()
end
local tag = os.getenv("TAG") or ""
one(tag .. " default", {}, true)
one(tag .. " block 1", {block = 1}, true)
if tag == "" then
  one(tag .. " vertices nofold", {fold = false, geometry = "vertices"})
  one(tag .. " scatter nodes", {scatter = "nodes"})
  one(tag .. " block 4", {block = 4})
end
