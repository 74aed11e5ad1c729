-- Kiss, Badics, Gyimothy and Pavo, "High locality and increased intra-node parallelism for
-- solving finite element models on GPUs by novel element-by-element implementation"
-- (shared/papers/kiss-ebe-bicg-coloring).
--
-- The paper's central experiment (section III, Table I): the ECG forward problem on the Utah
-- torso, div(sigma grad phi) = 0 with a conductivity per organ, P1 tets, solved by
-- Jacobi-preconditioned BiCG to 1e-8 without assembling the matrix: each iteration
-- recomputes the element matrices and adds their products color by color (EbE), against an
-- assembled CPU solver (MKL). It reports, per mesh, the iterations, the colors, the memory
-- and the run times.
--
-- felab reruns it on meshes/torso.geo (four regions: body, lungs, heart; Gmsh) at sizes that
-- fit here: BiCG with strategy ebe (recompute = true, scatter = "color": the paper's
-- kernel) and BiCG on the assembled matrix (strategy csr), both Jacobi. What compares: the
-- colors a P1 tet mesh needs, how the iterations grow with the unknowns (the exponent of a
-- fit), and that EbE and assembled are the same iteration (the paper's two codes are not:
-- 322 against 79 iterations on mesh #1). The paper's speedup is a GTX 590 against a
-- quad-core Xeon; on a cpu the time per iteration is printed, not compared, and where a GPU
-- backend is present the ebe solve runs there too and its speedup over the cpu's csr is
-- compared. Without the Gmsh SDK a box of tets with a conductivity of x stands in.
--
-- usage: felab scripts/papers/kiss.lua [quick] [backend=cpu]
local P = dofile((arg[0]:match("^(.*/)") or "") .. "paper.lua")("kiss",
  "Kiss et al., element-by-element BiCG with coloring (Table I)")

local sigma = {body = 0.2, lung_left = 0.05, lung_right = 0.05, heart = 0.4}
local sizes = P.size({0.16, 0.08, 0.05}, {0.3, 0.16})
-- the torso beside the script's folder, wherever felab is started from; without the Gmsh SDK
-- (its .geo needs it) the box stands in, and any other failure is an error
local torso = (arg[0]:match("^(.-)scripts/papers/[^/]*$") or "") .. "meshes/torso.geo"
local have_gmsh, err = pcall(mesh.load, torso, {size = 0.5})
if not have_gmsh and not tostring(err):find("Gmsh SDK", 1, true) then error(err, 0) end

-- the mesh of one size, its operator (P1, conductivity per region, skin held at 0)
local function problem(h)
  local m, A
  if have_gmsh then
    m = mesh.load(torso, {size = h})
    A = fe.operator(fe.space(m, "P1"), physics.poisson{kappa = sigma, source = 1},
                    {dirichlet = "skin", value = 0})
  else
    local n = math.floor(1.2 / h + 0.5)
    m = mesh.box{cells = {n, n, n}, cell = "tet", distort = 0.3}
    A = fe.operator(fe.space(m, "P1"), physics.poisson{kappa = "0.2 + 0.2 * x[0] * x[1]", source = 1},
                    {dirichlet = "all", value = 0})
  end
  return m, A
end

print(have_gmsh and "mesh: meshes/torso.geo (the Utah torso's four regions), Gmsh"
      or "mesh: no Gmsh SDK here; a distorted box of tets with sigma(x) stands in for the torso")
print("solver: BiCG, Jacobi, rtol 1e-8 (the paper's target residual), on " .. P.backend)
local rows, runs = {}, {}
for _, h in ipairs(sizes) do
  local m, A = problem(h)
  local ncolors, csizes = m:color()
  local total = 0
  for _, s in ipairs(csizes) do total = total + s end
  P.check(total == m.ncells and ncolors == #csizes, "size %g: the %d colors hold each of the %d cells once",
          h, ncolors, m.ncells)
  local o = {pc = "jacobi", rtol = 1e-8, maxit = 5000, backend = P.backend}
  o.strategy, o.scatter, o.recompute = "ebe", "color", true
  local xe, ie = solve.bicg(A, o)
  o.strategy, o.scatter, o.recompute = "csr", nil, nil
  local xc, ic = solve.bicg(A, o)
  P.check(ie.converged and ic.converged, "size %g: both BiCG solves converge (%s, %s)", h, ie.reason, ic.reason)
  local diff = xe:copy():axpy(-1, xc):norm() / xc:norm()
  local r = {h = h, cells = m.ncells, dofs = A.space and A.space.ndofs or xe:size(), colors = ncolors,
             its_ebe = ie.iterations, its_csr = ic.iterations, diff = diff,
             t_ebe = ie.report.seconds / ie.iterations, t_csr = ic.report.seconds / ic.iterations}
  runs[#runs + 1] = r
  rows[#rows + 1] = {h, r.cells, r.dofs, r.colors, r.its_ebe, r.its_csr, r.diff, r.t_ebe * 1e3, r.t_csr * 1e3}
end
print()
P.table({"size", "tets", "unknowns", "colors", "its ebe", "its csr", "|x_ebe-x_csr|/|x|", "ms/it ebe",
         "ms/it csr"}, {"%g", "%d", "%d", "%d", "%d", "%d", "%.1e", "%.3g", "%.3g"}, rows)

-- the checks: one iteration, two implementations; the colors; the growth with the unknowns
for _, r in ipairs(runs) do
  P.check(math.abs(r.its_ebe - r.its_csr) <= 1 and r.diff < 1e-8,
          "size %g: EbE and assembled BiCG take the same iterations (%d, %d, within 1) to the same x (%.1e < 1e-8)",
          r.h, r.its_ebe, r.its_csr, r.diff)
end
local lo, hi = math.huge, 0
for _, r in ipairs(runs) do lo, hi = math.min(lo, r.colors), math.max(hi, r.colors) end
-- Table I: 41, 45, 53, 56 colors on meshes #1-#4
P.check(lo >= 41 / 2 and hi <= 56 * 2, "the colors (%d-%d) are within a factor 2 of the paper's 41-56", lo, hi)
local xs, ys = {}, {}
for i, r in ipairs(runs) do xs[i], ys[i] = r.dofs, r.its_ebe end
local k = P.slope(xs, ys)
-- Table I, GPU row: 322, 671, 978, 1111 iterations at 91K .. 6,064K unknowns
local kp = P.slope({91e3, 1339e3, 3836e3, 6064e3}, {322, 671, 978, 1111})
local kc = P.slope({91e3, 1339e3, 3836e3, 6064e3}, {79, 248, 338, 391})
P.check(k > 0.15 and k < 0.6, "iterations grow like unknowns^%.2f, within 0.15-0.6 (the paper's %.2f GPU, %.2f CPU; "
        .. "Jacobi-BiCG on a 3D mesh: about 1/3)", k, kp, kc)

local last = runs[#runs]
P.compare("colors (largest mesh here)", 41, "Table I, mesh #1 (560K tets)", last.colors,
          "the colors a P1 tet mesh needs depend little on its size: 41-56 in the paper from 560K to 30M tets")
P.compare("iterations ~ unknowns^k: k", kp, "Table I, GPU rows, fitted here", k,
          ("fitted over %d-%d unknowns here, 91K-6M in the paper; its CPU rows give %.2f"):format(
            runs[1].dofs, last.dofs, kc))
P.compare("iterations, EbE / assembled", 322 / 79, "Table I, mesh #1: 322 / 79", last.its_ebe / last.its_csr,
          "the paper's GPU EbE and CPU MKL solvers differ; felab's ebe and csr run the same BiCG")
P.compare("EbE time per iteration / assembled's", (2.8 / 322) / (5.9 / 79), "Table I, mesh #1, 1 GPU vs CPU",
          last.t_ebe / last.t_csr, "the paper's EbE ran on a GTX 590 against a quad-core Xeon; here both "
          .. "ran on " .. P.backend .. " (on a cpu the assembled matrix is expected to win: not checked)")

-- where a GPU is present: the ebe solve there against the cpu's assembled one (the paper's speedup)
if P.gpu and not P.quick then
  local m, A = problem(last.h)
  local _, ig = solve.bicg(A, {pc = "jacobi", rtol = 1e-8, maxit = 5000, backend = P.gpu,
                               strategy = "ebe", scatter = "color", recompute = true})
  local _, ic = solve.bicg(A, {pc = "jacobi", rtol = 1e-8, maxit = 5000, backend = "cpu", strategy = "csr"})
  local speedup = ic.report.seconds / ig.report.seconds
  print(("%s: ebe BiCG %.3g s (%d its) against the cpu's csr BiCG %.3g s (%d its): %.2fx"):format(
    P.gpu, ig.report.seconds, ig.iterations, ic.report.seconds, ic.iterations, speedup))
  P.compare("speedup, GPU EbE over CPU assembled", 5.9 / 2.8, "Table I, mesh #1 (91K unknowns)", speedup,
            ("%s here against this machine's cpu at %d unknowns; not checked: at the cpu's sizes a GPU "
             .. "is launch-bound (the H200 against its host's 16 cores, a box of 15.6K unknowns: 0.06x)")
              :format(P.gpu, last.dofs))
  P.check(ig.converged and math.abs(ig.iterations - ic.iterations) <= 1,
          "the GPU's EbE BiCG converges in the cpu's iterations (%d and %d)", ig.iterations, ic.iterations)
end

P.print_comparison("Kiss et al., Table I")
P.done()
