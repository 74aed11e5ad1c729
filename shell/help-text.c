/* felab's help texts: one entry for each function, object type and method of the Lua
 * contract (its key, how to call it, and a few lines on what it does, the last an example),
 * in the order of the surface: help, meshes, spaces, vectors and operators, physics, element
 * and assembled matrices, solvers, devices and performance, output. Finding and printing them
 * is shell/help.c's; binding files add or replace entries with felab_help_add. */
#include <stddef.h>

#include "shell/help-private.h"
#include "shell/shell.h"

/* The contract's texts. */
const help_entry felab_help_builtin[] = {
    {"help", "help([x])",
     "Explains felab. help() lists the modules, help(mesh) one module's functions,\n"
     "help(mesh.box) or help(\"mesh.box\") one function, help(m) an object's type and methods.\n"
     "example: help(fe.operator)"},

    /* meshes */
    {"mesh.box",
     "mesh.box{cells = {nx, ny, nz}, cell = \"tet\", lower = {0, 0, 0}, upper = {1, 1, 1}, "
     "distort = 0}",
     "A structured mesh of the box [lower, upper]: cell \"tet\" or \"hex\" in 3D, \"tri\" or\n"
     "\"quad\" in 2D (cells = {nx, ny}). distort in [0, 1] moves interior vertices by a\n"
     "deterministic amount (the same mesh every run). Boundary tags xmin xmax ymin ymax zmin\n"
     "zmax; every cell is in the region \"domain\".\n"
     "example: m = mesh.box{cells = {16, 16, 16}, cell = \"tet\"}; print(m)"},
    {FELAB_MESH, "m.dim, m.ncells, m.nvertices; m:tags()",
     "A mesh: vertices, cells of one type, tagged boundary facets and cell regions.\n"
     "print(m) gives a summary; dim, ncells and nvertices are numbers.\n"
     "example: m = mesh.box{cells = {4, 4, 4}}; print(m.ncells, m:tags().boundary[1])"},
    {FELAB_MESH ":tags", "m:tags()",
     "The tag names: {boundary = {\"xmin\", ...}, cells = {\"domain\", ...}}, to use in\n"
     "fe.operator's dirichlet list.\n"
     "example: for _, t in ipairs(m:tags().boundary) do print(t) end"},

    /* spaces, vectors, operators */
    {"fe.space", "fe.space(m, \"P2\") or fe.space(m, {family =, order =, components =, nodes =})",
     "A finite-element space on mesh m: \"P1\"..\"P7\" on triangles, tets and prisms (prisms:\n"
     "triangle x line), \"Q1\"..\"Q9\" on quads and hexes with GLL nodes (spectral elements;\n"
     "nodes = \"equispaced\" for the other kind). components = 2 or 3 makes a vector space\n"
     "(dofs interleaved per node). Edge and face nodes are shared between neighbouring cells\n"
     "whatever their orientation. The space keeps its mesh alive.\n"
     "example: V = fe.space(m, \"P3\"); print(V, V.ndofs, V.nbasis)\n"
     "         W = fe.space(m, {family = \"P\", order = 2, components = 3})"},
    {FELAB_SPACE, "V.ndofs; V:interpolate(f)",
     "A function space: its reference element, its dof map, its mesh.\n"
     "ndofs is the number of global degrees of freedom.\n"
     "example: V = fe.space(m, \"P1\"); u = V:interpolate(0)"},
    {FELAB_SPACE ":interpolate",
     "V:interpolate(f [, {backend = \"cpu\", precision = \"double\"}])",
     "A vector holding f at every node: f a number or function(x) with x = {x, y, z}\n"
     "(1-based) returning a number, or on a vector space a table with one per component;\n"
     "or f a C expression of x[0], x[1], x[2] (0-based; sin, exp, pow, M_PI, ...), a table\n"
     "of them on a vector space, computed by a generated kernel where the vector lives\n"
     "(compiled once, then cached: much faster than a Lua call per node on large meshes).\n"
     "A function made of arithmetic and math.* on x is traced once into such a kernel (in\n"
     "double) and checked against calls at four nodes; one that branches on x, keeps state or\n"
     "calls math.random is called at every node instead (FELAB_TRACE_FIELDS=0: always).\n"
     "The vector lives on the session's default backend unless told otherwise.\n"
     "example: u = V:interpolate(function(x) return x[1] * x[2] end)\n"
     "         u = V:interpolate(\"x[0] * x[1] + sin(M_PI * x[2])\", {backend = \"cuda\"})"},
    {"fe.operator", "fe.operator(V, pde, {dirichlet = {\"xmin\", \"xmax\"}, value = 0, quadrature = {...}})",
     "An operator: space V, physics pde and boundary conditions. dirichlet lists boundary\n"
     "tag names (\"all\" for the whole boundary) where u = value is imposed strongly.\n"
     "Each action picks the quadrature that is exact for its integrand (symmetric rules on\n"
     "simplices where they are cheaper); quadrature = {degree = k, rule = \"auto\"|\"gauss\"|\"gll\"}\n"
     "overrides it (reports name the rule). docs/quadrature.md lists the rules.\n"
     "Its actions (A:residual, A:apply, A:diagonal) each return (vector, report).\n"
     "example: A = fe.operator(V, physics.poisson{source = 1}, {dirichlet = \"all\"})"},
    {FELAB_OPERATOR, "A:residual(u, opts), A:apply(w, opts), A:diagonal(opts), A:source(action), "
                     "A:strategies()",
     "A matrix-free operator. Every action takes opts {backend = \"cpu\"|\"opencl\"|\"cuda\",\n"
     "precision = \"double\"|\"single\", strategy = \"transpose\"|\"patch\"|\"sumfact\"|\"csr\"|\n"
     "\"ebe\", autotune = true|false|\"again\"} and the chosen strategy's own options: block = cells\n"
     "per group (all), geometry = \"stored\"|\"vertices\"|\"unshared\" (transpose, patch,\n"
     "sumfact), fold = true|false (transpose, sumfact), scatter = \"atomic\"|\"nodes\"\n"
     "(sumfact)|\"color\" (ebe), recompute = true (ebe), walk, lanes (patch), lanes, format,\n"
     "chunk, sigma, deltas = true|false, zeros = \"drop\"|\"keep\" (csr; the last two: SELL's\n"
     "copy, its columns as 16-bit differences and its exact zeros left out, both on by\n"
     "default); A:strategies() lists each one's (info.patch.options).\n"
     "An option the strategy named does not take is an error naming the strategies that\n"
     "take it; without strategy, the default runs when it takes every option given, else\n"
     "the model's fastest of those that do (walk = 4 alone runs patch).\n"
     "Each strategy's set-up data on a backend (a realization) is made once per effective\n"
     "options and kept (A.realizations counts them, at most 8): options in another order or\n"
     "defaults spelled out share one. Each action returns (vector, report);\n"
     "the report compares measured and predicted\n"
     "rates and says which strategy ran and why (rep.why). Without strategy the model's\n"
     "fastest runs (A:strategies() shows each one's prediction); with autotune (by default\n"
     "from 200k dofs) the one measured fastest here, each candidate timed once and the\n"
     "choice kept in the cache per device and operator shape (\"again\": measured now,\n"
     "the cached choice replaced: after a driver or a machine's change).\n"
     "fold: the Jacobian action of a linear physics reads per-point data made once at setup,\n"
     "the geometry and every coefficient of x, regions and constants folded together (a\n"
     "scalar diffusion: 6 words a point, W|J| Jinv kappa Jinv^T, as libCEED's qdata); by\n"
     "default where that reads less than the factors it replaces, or the physics reads x;\n"
     "a physics whose Jacobian reads u is evaluated at every point (transpose, sumfact).\n"
     "\"sumfact\" (quads, hexes Q1..Q8) contracts 1D tables one direction at a time, with the\n"
     "geometry stored per point or recomputed from the cell's corners (straight cells);\n"
     "stored factors are shared by congruent cells (a box's hexes: one set, its tets: six)\n"
     "unless geometry = \"unshared\" asks a set a cell (or point);\n"
     "its results go into y by an atomic add per cell and node, or (scatter = \"nodes\") into\n"
     "a cells x nodes array that a second kernel sums per node.\n"
     "\"patch\" (the default on cuda for P1/Q1 on straight cells and P2 simplices) gathers\n"
     "each patch's nodes once, recomputes first-order geometry and adds once per patch node\n"
     "(docs/kernels.md);\n"
     "with walk = n (first-order cells) each item walks n cells that share nodes, keeping\n"
     "them in registers, and the sums are the same bits at every call; lanes = n interleaves\n"
     "the runs of n nodes (a power of two; default 1, on a GPU in double 16).\n"
     "\"ebe\" (Jacobians that do not depend on the state) multiplies the element matrices\n"
     "cell by cell (Kiss et al.), adding rows atomically or, with scatter = \"color\", color\n"
     "by color with plain adds; recompute = true computes the matrices in every action.\n"
     "example: r, rep = A:residual(u); print(rep)"},
    {FELAB_OPERATOR ":residual",
     "A:residual(u, {backend = \"opencl\", precision = \"double\", strategy = \"transpose\"})",
     "The residual F(u): integrates f0 v + f1 . grad v over every cell, with the Dirichlet\n"
     "rows replaced by u - g. Returns (r, report).\n"
     "example: r, rep = A:residual(u, {backend = \"cpu\"}); print(r:norm(), rep.gflops)"},
    {FELAB_OPERATOR ":apply",
     "A:apply(w, {at = u, backend = ..., precision = ..., strategy = ...})",
     "The Jacobian action J(u) w at state `at` (default: zero), matrix-free; Dirichlet rows\n"
     "act as the identity. Returns (y, report).\n"
     "example: y, rep = A:apply(w, {at = u})"},
    {FELAB_OPERATOR ":diagonal", "A:diagonal({at = u, backend = ..., precision = ...})",
     "The diagonal of the Jacobian (what the Jacobi preconditioner divides by).\n"
     "Returns (d, report).\n"
     "example: d, rep = A:diagonal(); print(d:min(), d:max())"},
    {FELAB_OPERATOR ":source", "A:source(\"residual\" [, {backend = ..., precision = ...}])",
     "The complete generated kernel source of an action (\"residual\", \"apply\" or\n"
     "\"diagonal\") as the backend compiles it, preamble included.\n"
     "example: print(A:source(\"residual\", {backend = \"opencl\"}))"},
    {FELAB_OPERATOR ":strategies", "A:strategies([{backend =, precision =}])",
     "The strategies that apply to this operator on a backend, as a list of names, then a\n"
     "table of every strategy: applies, why (why not, or why it is the default), default,\n"
     "predicted_seconds (the model's apply time), measured_seconds and measured_calls (this\n"
     "session's fastest steady apply with it, where one ran), summary and options (the names\n"
     "of the options it takes). Printed, the table shows predicted and measured side by side\n"
     "and ranks by the measurement where every strategy has one.\n"
     "example: names, info = A:strategies(); print(info.sumfact.why)"},
    {FELAB_VECTOR,
     "u:size(), u:norm(), u:dot(v), u:axpy(a, v), u:copy(), u:to(backend), u:min(), u:max(), "
     "u:get(i), u:error(f, norm)",
     "A vector of reals living on one backend in one precision; print(u) says where.\n"
     "Combining two vectors needs the same length; u:to moves it explicitly.\n"
     "example: u = V:interpolate(1); print(u:norm(), u:size())"},
    {FELAB_VECTOR ":norm", "u:norm()",
     "The Euclidean norm sqrt(sum u_i^2).\nexample: print(u:norm())"},
    {FELAB_VECTOR ":dot", "u:dot(v)",
     "The dot product sum u_i v_i (same length).\nexample: print(u:dot(v))"},
    {FELAB_VECTOR ":axpy", "u:axpy(a, v)",
     "u <- u + a v in place; returns u.\nexample: r:axpy(-1, b)"},
    {FELAB_VECTOR ":copy", "u:copy()",
     "A new vector equal to u, on the same backend.\nexample: w = u:copy()"},
    {FELAB_VECTOR ":to", "u:to(\"cuda\" [, precision])",
     "A copy of u on another backend (and precision); the copy is timed.\n"
     "example: ug = u:to(\"opencl\")"},
    {FELAB_VECTOR ":min", "u:min()", "The smallest entry.\nexample: print(u:min(), u:max())"},
    {FELAB_VECTOR ":max", "u:max()", "The largest entry.\nexample: print(u:max())"},
    {FELAB_VECTOR ":get", "u:get(i)",
     "Entry i (1-based), read back from the device.\nexample: print(u:get(1))"},
    {FELAB_VECTOR ":size", "u:size()",
     "The number of entries (also #u).\nexample: print(u:size())"},
    {FELAB_VECTOR ":error", "u:error(f, \"L2\"|\"H1\")",
     "The error of the finite-element function u against the exact f(x) (x = {x, y, z}),\n"
     "by quadrature: the L2 norm or the H1 seminorm.\n"
     "example: print(u:error(function(x) return x[1] * (1 - x[1]) / 2 end, \"L2\"))"},

    /* physics */
    {"physics.new", "physics.new{f0 = function(u, du, x, a, t) ... end, f1 = ...}",
     "Pointwise physics: the residual is the integral of f0 v + f1 : grad v. f0 and f1 are\n"
     "called once on symbols (u, du = grad u, x, a = named values, t) and traced: felab derives\n"
     "the Jacobian blocks g0..g3, shares common subexpressions, counts the flops per point and\n"
     "writes the kernel code. + - * / ^, math.sin cos tan exp log sqrt abs tanh pow min max,\n"
     "u[i], du[i] (a row), physics.dot inner outer transpose sym tr det identity norm grad,\n"
     "physics.select(physics.gt(a, b), x, y) for conditions (not if). Options: components =\n"
     "n or \"dim\", constants = {dt = 0.1} (pde:set{dt = 0.05} needs no recompiling),\n"
     "regions = {kappa = {heart = 0.4, lung = 0.05}} (a.kappa per cell), fields = {uold = v}\n"
     "(a vector of a space on the same mesh; physics.grad(a.uold)). Raw C: f0, f1, g0..g3 as\n"
     "strings of C statements, C as written (5 / 2 is 2 there; compiled at once; errors quote\n"
     "the line). pde:show() prints it all.\n"
     "example: pde = physics.new{f1 = function(u, du) return (1 + u^2) * du end, f0 = function() return -1 end}"},
    {"physics.poisson", "physics.poisson{kappa = 1, source = 1}",
     "-div(kappa grad u) = source. kappa and source are numbers, C expressions of x[0..2]\n"
     "(e.g. \"1 + x[0]*x[1]\"), functions of x (traced), or {region = value} per cell region.\n"
     "In a C expression numbers are reals: \"1/2\" is 0.5 (see physics.cexpr). A coefficient\n"
     "that is not finite where it is evaluated (\"1/0\", \"log(x[0] - 0.5)\") is an error\n"
     "naming the value, the point and the cell, at physics.poisson or fe.operator.\n"
     "Also physics.reaction_diffusion{c, kappa, source}, physics.elasticity{E, nu | lambda, mu,\n"
     "force} (components = dim), physics.heat{c, kappa, source, dt, u_old} (one backward-Euler\n"
     "step: pde:set{u_old = u} between steps), physics.p_laplacian{p = 3, eps = 0.1, source},\n"
     "physics.convection_diffusion{kappa, velocity = {bx, by, bz}, source} (nonsymmetric:\n"
     "solve.bicgstab, gmres, bicg).\n"
     "example: pde = physics.poisson{kappa = 1, source = \"sin(x[0])\"}"},
    {FELAB_PHYSICS, "print(pde)",
     "Pointwise physics f0(u, grad u, x) and f1(u, grad u, x) with their Jacobian blocks\n"
     "and flop counts; an operator combines it with a space.\n"
     "example: pde = physics.poisson{source = 1}; print(pde)"},
    {FELAB_PHYSICS ":show", "pde:show([dim])",
     "Prints f0, f1 and the Jacobian blocks as mathematics and as C, with flops per point.\n"
     "With dim, the trace of that dimension.\n"
     "example: physics.poisson{source = 1}:show()"},
    {FELAB_PHYSICS ":set", "pde:set{name = value, field = vector}",
     "Changes named constants (no recompiling) or rebinds fields to other vectors.\n"
     "A field's new vector must be of the same space; every entry is checked first, so a set\n"
     "that fails changes nothing.\n"
     "example: pde:set{dt = 0.05, u_old = u}"},
    {"physics.reaction_diffusion", "physics.reaction_diffusion{c = 1, kappa = 1, source = 0}",
     "The physics of c u - div(kappa grad u) = source.\n"
     "Each coefficient is a number, a C expression of x[0..2], a function of x or\n"
     "{region = value}.\n"
     "example: pde = physics.reaction_diffusion{c = 10, source = 1}"},
    {"physics.convection_diffusion",
     "physics.convection_diffusion{kappa = 1, velocity = {bx, by, bz}, source = 0}",
     "The physics of b . grad u - div(kappa grad u) = source, b a constant velocity.\n"
     "Its Jacobian is nonsymmetric: solve it with solve.bicgstab, solve.gmres or solve.bicg.\n"
     "example: pde = physics.convection_diffusion{velocity = {1, 0, 0}, kappa = 0.01, source = 1}"},
    {"physics.elasticity",
     "physics.elasticity{E = 1, nu = 0.3 | lambda =, mu =, force = {fx, fy, fz}}",
     "Linear elasticity: -div sigma(u) = force for a displacement u (dim components).\n"
     "sigma = lambda tr(eps) I + 2 mu eps, eps = sym(grad u), from Young's modulus and\n"
     "Poisson's ratio or the Lame constants (each may be per region); use a vector space.\n"
     "example: pde = physics.elasticity{E = 200, nu = 0.3, force = {0, 0, -1}}"},
    {"physics.heat", "physics.heat{c = 1, kappa = 1, source = 0, dt = 0.1, u_old = u}",
     "One backward-Euler step of c du/dt - div(kappa grad u) = source.\n"
     "The constant dt and the field u_old (the previous step, a vector of the space) change\n"
     "with pde:set between steps.\n"
     "example: pde = physics.heat{dt = 0.01, u_old = u0}; pde:set{u_old = u1}"},
    {"physics.p_laplacian", "physics.p_laplacian{p = 3, eps = 0.1, source = 1}",
     "The regularized p-Laplacian: -div((eps^2 + |grad u|^2)^((p-2)/2) grad u) = source.\n"
     "It is nonlinear: solve it with solve.newton.\n"
     "example: pde = physics.p_laplacian{p = 4}"},
    {"physics.dot", "physics.dot(a, b)",
     "The dot product sum_i a_i b_i of two vectors of the same length (symbols inside f0, f1).\n"
     "example: f1 = function(u, du) return physics.dot(du, du) * du end"},
    {"physics.inner", "physics.inner(A, B)",
     "The sum of the products of matching entries of two values of the same shape (A : B for\n"
     "matrices).\n"
     "example: f0 = function(u, du) return physics.inner(du, du) end"},
    {"physics.outer", "physics.outer(a, b)",
     "The outer product of two vectors: the matrix with entries a_i b_j.\n"
     "example: M = physics.outer(du, du)"},
    {"physics.transpose", "physics.transpose(A)",
     "The transpose of a matrix symbol.\n"
     "example: f1 = function(u, du) return physics.transpose(du) end"},
    {"physics.sym", "physics.sym(A)",
     "The symmetric part (A + A^T) / 2 of a square matrix, e.g. the strain of a displacement\n"
     "gradient.\n"
     "example: eps = physics.sym(du)"},
    {"physics.tr", "physics.tr(A)",
     "The trace of a square matrix: the sum of its diagonal entries.\n"
     "example: s = physics.tr(physics.sym(du))"},
    {"physics.det", "physics.det(A)",
     "The determinant of a 1x1, 2x2 or 3x3 matrix symbol, written out as products.\n"
     "example: J = physics.det(physics.identity() + du)"},
    {"physics.identity", "physics.identity([n])",
     "The n x n identity matrix (n in 1..9; the mesh's dimension by default).\n"
     "example: sigma = lam * physics.tr(eps) * physics.identity() + 2 * mu * eps"},
    {"physics.norm", "physics.norm(a)",
     "The Euclidean norm sqrt(a . a) of a vector (Frobenius for a matrix, |a| for a scalar).\n"
     "example: f1 = function(u, du) return physics.norm(du) * du end"},
    {"physics.grad", "physics.grad(a.field)",
     "The gradient of an auxiliary field (fields = {...}); the gradient of u is du.\n"
     "A scalar field gives a vector, a vector field a matrix with a row per component.\n"
     "example: f0 = function(u, du, x, a) return physics.dot(physics.grad(a.uold), du) end"},
    {"physics.cexpr", "physics.cexpr(\"1 + x[0]*x[1]\")",
     "An opaque C expression of x[0..2] and a[..] (never of u), computed as written except\n"
     "that its numbers are reals: \"1/2 + x[0]\" is 0.5 + x[0], \"1/0\" is inf (an error before\n"
     "any solve). Integers stay only inside [ ] (x[0], a[i + 1]) and around % << >> & | ^ ~.\n"
     "The tracer treats it as a constant of the state (its derivative in u is 0).\n"
     "example: f0 = function() return -physics.cexpr(\"sin(x[0])\") end"},
    {"physics.select", "physics.select(cond, a, b)",
     "a where cond is nonzero, else b (scalars): the traced form of if.\n"
     "Make cond with physics.lt, le, gt, ge, eq or ne.\n"
     "example: k = physics.select(physics.gt(u, 0.5), u, 0.5 * u)"},
    {"physics.lt", "physics.lt(a, b)",
     "1 where a < b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.lt(u, 0), 0, u)"},
    {"physics.le", "physics.le(a, b)",
     "1 where a <= b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.le(u, 0), 0, u)"},
    {"physics.gt", "physics.gt(a, b)",
     "1 where a > b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.gt(u, 1), 1, u)"},
    {"physics.ge", "physics.ge(a, b)",
     "1 where a >= b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.ge(u, 1), 1, u)"},
    {"physics.eq", "physics.eq(a, b)",
     "1 where a == b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.eq(u, 0), 1, u)"},
    {"physics.ne", "physics.ne(a, b)",
     "1 where a ~= b, else 0, for scalar symbols (a condition for physics.select).\n"
     "example: physics.select(physics.ne(u, 0), u, 1)"},
    {"felab.symbol", "u, du, x, a.name inside f0 and f1",
     "A symbol of traced physics: a scalar, vector or matrix of expression nodes that\n"
     "physics.new hands to f0 and f1; + - * / ^ and math.* on it build the expression.\n"
     "example: physics.new{f1 = function(u, du) print(du); return du end}"},

    /* element matrices and assembled matrices */
    {FELAB_SPACE ":cell_dofs", "V:cell_dofs(c)",
     "The global dofs (1-based) of cell c in the element's order, basis function b's\n"
     "component k at position b * ncomp + k + 1: the rows of A:element_matrices' K:get(c).\n"
     "example: print(table.concat(V:cell_dofs(1), \" \"))"},
    {FELAB_ELEMATS, "K.ncells, K.n, K.backend, K.precision; K:get(c), K:to(backend)",
     "Element matrices from A:element_matrices: K.ncells matrices of K.n x K.n on a backend.\n"
     "example: K = A:element_matrices(); print(K, K:get(1)[1][1])"},
    {FELAB_ELEMATS ":get", "K:get(c)",
     "The matrix of cell c (1-based) as a Lua table of rows.\n"
     "example: row = K:get(1)[1]"},
    {FELAB_ELEMATS ":to", "K:to(backend [, precision])",
     "A copy of the element matrices on another backend (and precision).\n"
     "example: Kc = K:to(\"cpu\")"},
    {FELAB_MATRIX, "M.n, M.nnz, M.format, M.backend, M.precision, M.bytes, M.product_bytes; "
                   "M:apply(x), M:get()",
     "A sparse matrix assembled by A:assemble (CSR, or SELL-C-sigma) on a backend. M.bytes:\n"
     "what it holds there; M.product_bytes: its arrays one product reads. SELL (format =\n"
     "\"sell\", deltas =, zeros =): M.chunk, M.sigma, M.padding (the share of padded slots),\n"
     "M.dropped (exact zeros left out of the copy), M.chunks, M.wide (chunks of 32-bit\n"
     "columns), M.deltas.\n"
     "example: M = A:assemble(); print(M, M.nnz)"},
    {FELAB_MATRIX ":apply", "y, rep = M:apply(x)",
     "The product M x on the matrix's backend, with the report of the call.\n"
     "example: y, rep = M:apply(x); print(rep.seconds)"},
    {FELAB_MATRIX ":get", "t = M:get()",
     "The CSR arrays on the host as Lua tables: t.rowptr (n + 1), t.cols, t.vals (nnz),\n"
     "row pointers and columns from 0 as stored, the values in double (for small matrices).\n"
     "example: t = M:get(); print(t.cols[t.rowptr[1] + 1], t.vals[1])"},
    {"show", "show(...)",
     "Prints its values like print, but writes tables out: keys sorted, arrays on one line,\n"
     "nested tables indented, 3 levels deep ({...} below), cycles as <cycle>. The prompt\n"
     "prints an expression's values this way.\n"
     "example: show(device.info())"},

    {"lesson", "lesson([n | \"name\" [, {pause =, quick = false, out =}]])",
     "The lessons (scripts/lessons/): lesson() lists them (number, name, title, one line\n"
     "each); lesson(n) or lesson(\"name\") runs one step by step: each step says what it shows\n"
     "and what to look at, prints the felab calls as you would type them, runs them and prints\n"
     "what they measured. At the prompt it waits for Enter between steps (q stops); when stdin\n"
     "is not a terminal, or with pause = false, it runs straight through. quick = true: small\n"
     "sizes (seconds, for tests). Plots go to out (default: a new folder under /tmp, named at\n"
     "the end). Returns the table of the lesson's variables (e = lesson(1); e.A). A claim a\n"
     "lesson makes about its measurements is checked (\"checked: ...\"), an error if it fails.\n"
     "Also: build/felab scripts/lessons/01-first-solve.lua runs one as a script.\n"
     "example: lesson(); lesson(4, {quick = true, pause = false})"},

    /* solvers */
    {"solve.cg",
     "solve.cg(A [, b], {pc = \"jacobi\", rtol = 1e-8, atol = 0, maxit = 1000, backend = ..., "
     "precision = ...})",
     "Preconditioned conjugate gradients, matrix-free: without b solves residual(u) = 0\n"
     "(linear physics), with b solves J x = b. pc: \"jacobi\" (default), \"none\",\n"
     "\"chebyshev\" (degree = 3, lanczos = 10, ratio = 0), \"amg\" and \"twoscale\" (cycles,\n"
     "parts; amg: cycle_on = \"device\" or \"host\", cycle_values, aggressive) where built,\n"
     "or a P made by solve.precond\n"
     "(every solver takes the same pc options).\n"
     "With jacobi or none on the cpu or cuda, (p, J p) comes from the apply's own quadrature\n"
     "where it can (sumfact, csr's SELL; r zero on the constrained rows): no pass of its own,\n"
     "and info.pq_from_apply says so; fuse_pq = false keeps the pass.\n"
     "Returns u, info: info.iterations, converged, reason, history, report, pc (which\n"
     "preconditioner ran, how), pc_setup_seconds (its setup, apart from the iterations).\n"
     "example: u, info = solve.cg(A, {pc = \"jacobi\", rtol = 1e-10}); print(info.iterations)"},
    {"solve.bicgstab",
     "solve.bicgstab(A [, b], {pc = \"jacobi\", rtol = 1e-8, atol = 0, maxit = 1000, x0 = ..., "
     "monitor = false, backend = ..., precision = ..., strategy = ...})",
     "BiCGStab for nonsymmetric J (convection, ...): two Jacobian actions per iteration,\n"
     "right-preconditioned (pc as solve.cg's), stops on the true |b - J x| as CG does.\n"
     "A breakdown is a result: converged = false, reason \"breakdown: ...\" (never convergence).\n"
     "Also solve.gmres(A [, b], {restart = 30, ...}) and solve.bicg(A [, b], {...}), which runs\n"
     "J^T too (the transposed traced physics; solve.transpose_apply(A, v, {at = u}) shows it).\n"
     "Returns x, info: info.iterations, converged, reason, history, report.\n"
     "example: pde = physics.convection_diffusion{kappa = 0.05, velocity = {1, 0, 0}, source = 1}"},
    {"solve.gmres",
     "solve.gmres(A [, b], {restart = 30, pc = \"jacobi\", rtol = 1e-8, maxit = 1000, x0 = ..., "
     "monitor = false, backend = ..., precision = ..., strategy = ...})",
     "Restarted GMRES(restart): minimizes |b - J x| over the Krylov space, one Jacobian action\n"
     "per iteration, restart + 1 stored vectors. Right-preconditioned; the history holds its\n"
     "residual estimates, confirmed on the true residual at each restart. A singular Hessenberg\n"
     "matrix is reason \"breakdown: ...\", converged = false. Returns x, info as solve.cg.\n"
     "example: u, info = solve.gmres(A, {restart = 20, rtol = 1e-10}); print(info.reason)"},
    {"solve.bicg",
     "solve.bicg(A [, b], {pc = \"jacobi\", rtol = 1e-8, maxit = 1000, x0 = ..., monitor = false, "
     "backend = ..., precision = ..., strategy = ...})",
     "BiCG: one action of J and one of J^T per iteration. J^T is the transposed pointwise\n"
     "Jacobian of the traced physics (A itself when the physics is symmetric); raw C physics\n"
     "has none and is refused. Breakdowns ((M^-1 r, r~) = 0, (p~, J p) = 0) are reason\n"
     "\"breakdown: ...\", converged = false. Returns x, info as solve.cg.\n"
     "example: u, info = solve.bicg(A, {pc = \"none\"}); print(info.iterations, info.reason)"},
    {"solve.transpose_apply",
     "solve.transpose_apply(A, v, {at = u, backend = ..., precision = ...})",
     "J(u)^T v: the transposed Jacobian action solve.bicg runs, e.g. to check\n"
     "v:dot(A:apply(w)) == solve.transpose_apply(A, v):dot(w).\n"
     "example: y = solve.transpose_apply(A, v)"},
    {"solve.precond",
     "P = solve.precond(A, {pc = \"chebyshev\", degree = 3, lanczos = 10, ratio = 0, "
     "cycles = 1, cycle_on = \"device\", cycle_values = \"single\", aggressive = 1, theta = 0.5, "
     "parts = \"both\", verbose = false, at = u, "
     "backend = ..., "
     "precision = ...})",
     "A preconditioner z = M^-1 r for J(at), set up once on that backend and precision and\n"
     "passed to any number of solves of A as pc = P (time steps: the setup is paid once). pc:\n"
     "none, jacobi (diag J), chebyshev (a degree-k Chebyshev polynomial in D^-1 J: k - 1\n"
     "Jacobian actions per application, its interval [a, b] from lanczos Jacobi-PCG steps,\n"
     "b = 1.1 x the largest Ritz value, a = the smallest or ratio * b), amg (BoomerAMG's setup;\n"
     "cycle_on = \"device\", the default: its hierarchy moved to the solve's backend once and\n"
     "cycled there, two weighted Jacobi sweeps down and up, no copy to the host; in a double\n"
     "solve its level matrices' values single (cycle_values = \"single\": 8 bytes an entry for\n"
     "12; \"double\" keeps them), its vectors and sums double; \"host\":\n"
     "BoomerAMG's own V-cycle on the host; aggressive = levels coarsened aggressively, 1 for a\n"
     "scalar 3D problem, else 0; theta = its strong threshold, 0.5 in 3D, 0.25 in 2D, 0.7 for\n"
     "twoscale's coarse scale), twoscale (where built). P:apply(r) -> z; P.name, P.describe,\n"
     "P.setup_seconds, P.setup_parts (amg: assembly, transfer, hypre, to_device; twoscale: its\n"
     "scales' parts too), P.levels (the device cycle's: rows, nnz, seconds of one timed\n"
     "cycle a level; merged: cycled in the launch of the first level of at most 256 rows, the\n"
     "cycle's tail, and timed there), P.applications,\n"
     "P.apply_seconds, P.flops, P.bytes, P.launches (per application), P.backend, P.precision.\n"
     "A P of another operator, backend or precision is refused by the solve, saying which.\n"
     "example: P = solve.precond(A, {pc = \"chebyshev\", verbose = true}); u = solve.cg(A, {pc = P})"},
    {"felab.precond",
     "P.name, P.describe, P.setup_seconds, P.setup_parts, P.applications, P.apply_seconds, "
     "P.flops, P.bytes, "
     "P.launches, P.backend, P.precision; P:apply(r)",
     "A preconditioner made by solve.precond, set up once for one operator, backend and\n"
     "precision; solves of that operator take it as pc = P.\n"
     "example: P = solve.precond(A, {pc = \"jacobi\"}); print(P, P.setup_seconds)"},
    {"felab.precond:apply", "z = P:apply(r)",
     "The preconditioner's action z = M^-1 r on P's backend and precision (r is converted\n"
     "when it lives elsewhere).\n"
     "example: z = P:apply(r); print(z:norm())"},
    {"solve.newton",
     "solve.newton(A, {linear = \"cg\", pc = \"jacobi\", rtol = 1e-10, atol = 0, maxit = 50, "
     "linear_rtol = 1e-12, linear_maxit = 1000, linesearch = \"backtrack\", monitor = false, "
     "x0 = u0, backend = ..., precision = ...})",
     "Newton's method for residual(u) = 0 (nonlinear physics): each step solves J(u) du = -r\n"
     "by CG (linear = \"cg\"; \"gmres\" (restart = 30), \"bicgstab\" or \"bicg\" for a\n"
     "nonsymmetric J) with the Jacobian and its preconditioner at u (pc = \"jacobi\",\n"
     "\"chebyshev\", ... with its options; made anew at every step),\n"
     "to linear_rtol, then halves the step until |r| decreases (linesearch = \"none\": full\n"
     "steps). Starts from x0 or the boundary values; linear physics converges in one step.\n"
     "Returns u, info: iterations, converged, reason, history, linear_iterations, report.\n"
     "example: u, info = solve.newton(A, {rtol = 1e-10, monitor = true}); print(info.iterations)"},
    {"solve.heat",
     "u, info = solve.heat(A, u0, {steps = 70, dt = ..., t0 = 0, pc = \"jacobi\" | P, rtol = 1e-8, "
     "maxit =, backend =, precision =, strategy =, monitor = false, out = \"frames\", every = 1, "
     "name = \"u\", on_step = function(k, t, u, info) end})",
     "Backward Euler from u0 with ONE operator A (of physics.heat: constant dt, field u_old) and\n"
     "ONE preconditioner (made once from pc and its options, or the P given) for every step:\n"
     "pde:set{t = t0 + k dt, u_old = u}, then CG from the last u. dt given is set on the physics.\n"
     "out writes out/name_0000.vtu every `every` steps (and the last) with out/name.pvd, the\n"
     "series ParaView opens, rewritten after each frame. on_step returning false stops.\n"
     "info: steps, iterations (per step), total_iterations, seconds (CG, setup apart),\n"
     "setup_seconds (the preconditioner's), flops, gflops, wall_seconds, precond, t, report.\n"
     "example: u, info = solve.heat(A, u0, {steps = 70, pc = \"chebyshev\", out = \"heat\"})"},

    /* devices and performance */
    {"device.list", "device.list()",
     "Every backend compiled in (cpu, opencl, cuda), whether it can be used here, and if\n"
     "not, why.\n"
     "example: device.list()"},
    {"device.use", "device.use(\"opencl\")",
     "Set the session's default backend (the one actions and vectors use unless an opts\n"
     "table says otherwise). Also settable with felab --backend NAME.\n"
     "example: device.use(\"cpu\")"},
    {"device.calibrate", "device.calibrate([backend [, precision]])",
     "Measure the ceilings of a backend with micro-benchmarks: DRAM and L2 bandwidth, shared\n"
     "memory, FMA and division rates, atomics, constant tables, launch and wait costs, the\n"
     "waits of dependent loads and the L1's lookups of global loads (GPUs), the cpu's SIMD\n"
     "lanes and its indexed loops (first touches and from L1), the host's small copies each\n"
     "way (a split space's exchange); stored in the cache and used by every prediction\n"
     "(docs/model.md).\n"
     "On a machine whose speed moves, calibrate again just before comparing. Returns a report.\n"
     "Under mpirun with more than one rank (every rank calls it) it also measures the link\n"
     "between the ranks and returns it second (device.link); device.calibrate(\"link\"): the\n"
     "link alone (the backend is best calibrated alone: ranks side by side measure each other).\n"
     "example: print(device.calibrate(\"cpu\", \"double\"))"},
    {"device.info", "device.info([backend])",
     "What the backend's device is: name, vendor, compute units, memory, fp64, calibration.\n"
     "example: print(device.info(\"opencl\").name)"},
    {"perf.log", "perf.log()",
     "Every call of the session, one line each: action, strategy, space (order and cell),\n"
     "backend, precision, cells, GF/s, GB/s, measured and predicted time and their ratio, the\n"
     "bound; a kernel's first run (compile or cold: not a steady figure) is marked.\n"
     "example: perf.log()"},
    {"perf.clear", "perf.clear()", "Empty the session's performance log.\nexample: perf.clear()"},
    {FELAB_REPORT,
     "rep.flops, rep.bytes, rep.seconds, rep.gflops, rep.gbytes, rep.predicted_seconds, "
     "rep.bound, ...",
     "What one call did: counted flops and minimal bytes, measured seconds and rates, the\n"
     "model's predicted seconds, the ceiling that binds (rep.bound: dram, l2, shared, fma,\n"
     "nonfma, atomics, constant, indexed, launches, latency), each ceiling's time alone\n"
     "(rep.ceilings), the work counted against them (rep.l2_bytes, rep.shared_bytes,\n"
     "rep.l1_wavefronts, rep.l1_requests, rep.l1_lines, rep.indexed, ...), and the backend,\n"
     "device, precision and strategy it ran with. print(rep) shows the block.\n"
     "An operator's first call also says what it built (rep.setup_seconds, rep.setup_parts),\n"
     "how it got the kernel (rep.kernel: compiled, cached, ready) and whether seconds is the\n"
     "kernel's first run (rep.first_run: one-time work included; later calls are steady).\n"
     "On a space split over mpirun's ranks: its exchange measured (rep.exchange_bytes,\n"
     "rep.exchange_messages, rep.exchange_seconds) and predicted (rep.exchange_predicted, of\n"
     "it rep.exchange_link and rep.exchange_device; in predicted_seconds), whether it ran\n"
     "beside the interior cells (rep.exchange_beside), device to device\n"
     "(rep.exchange_direct) and its gather following the boundary cells' kernel\n"
     "(rep.exchange_follows: placed before the interior's, device.info().follows), a CG's\n"
     "also its reductions (rep.reduce_predicted):\n"
     "docs/parallel.md. Beside the interior, its parts measured (rep.exchange_parts) and\n"
     "predicted (rep.exchange_terms): {gather =, messages =, copies =, sums =} seconds;\n"
     "rep.exchange_wave: when the gather's groups find places beside the interior's first\n"
     "wave, over an even wave's time (1: its groups alike; 0: the gather follows, no wait).\n"
     "rep.exchange_cold: the share of the cpu's exchange data its action took out of the\n"
     "last-level cache (1 - exp(-bytes / llc_keep_bytes)); rep.exchange_host: the prediction\n"
     "is the link's whole host exchange (device.link().host), between warm and cold by it.\n"
     "rep.device_sharers: the ranks of this machine on this rank's device; rep.device_turns:\n"
     "they take turns on it (a GPU's several ranks, or a CPU's ranks times threads,\n"
     "rep.device_threads each, past its rep.device_cores), which the prediction leaves out.\n"
     "A solve's report (cg, bicg, bicgstab, gmres, newton): rep.iterations, rep.calls (the\n"
     "operator's calls it made) and its vector kernels' work (rep.extra_flops,\n"
     "rep.extra_bytes); the model takes each call at one call's model and adds the vectors'.\n"
     "example: r, rep = A:residual(u); print(rep.gflops, rep.predicted_seconds / rep.seconds)"},

    /* output */
    {"export.vtu", "export.vtu(\"out/u.vtu\", m, {u = u, ...})",
     "Write the mesh with named fields (vectors of the mesh's vertices, or of its cells) as\n"
     "a VTK XML file for ParaView; cell regions are always written. A vector of a scalar\n"
     "space of higher order (P2, Q3, ...) on m is written at the vertices.\n"
     "example: export.vtu(\"u.vtu\", m, {u = u})"},
    {"export.pvd", "export.pvd(\"out/u.pvd\", {{file = \"u_0000.vtu\", time = 0}, ...})",
     "Write a ParaView collection (.pvd): the frames, files relative to the .pvd's folder, as one\n"
     "time series. Written whole or not at all (a temporary file renamed). solve.heat's out\n"
     "writes one.\n"
     "example: export.pvd(\"out/u.pvd\", {{file = \"u_0000.vtu\", time = 0}, {file = \"u_0001.vtu\", time = 0.1}})"},
    {"fe.integral", "a [, b, c] = fe.integral(u)",
     "The integral over the mesh of the finite-element function u: sum_j u_j int phi_j (the\n"
     "weights are the residual of f0 = 1 on u's space, made once per space, backend and\n"
     "precision). One number per component.\n"
     "example: print(fe.integral(V:interpolate(function(x) return x[1] end)))"},
};
const size_t felab_help_nbuiltin = sizeof felab_help_builtin / sizeof felab_help_builtin[0];
