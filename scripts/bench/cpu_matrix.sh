#!/bin/sh
# Issue 43's cpu cases beside deal.II in one run: Q3 on 32^3 hexes (912,673 nodes) and Q7 on
# 13^3 (778,688), fp64, Jacobi-PCG ms per iteration.
#   deal.II 9.4 MatrixFree (../shared/peers/dealii_mf/bp.cc, built in .peers/dealii_mf/build):
#     uniform: the unit cube, kappa 1; --user: GridTools::distort_random(0.1, tria, true, 12345)
#     (every interior vertex moved by 0.1 x its shortest adjacent edge, h here, in a random
#     direction; the boundary kept) and kappa = 1 + 0.5 x evaluated once at the quadrature
#     points and stored (one double a point, beside MatrixFree's inverse Jacobian and JxW a
#     point of its general cells). QGauss(p + 1), MappingQ1, all nodes unknowns, no
#     constraints; CG with the inverse diagonal (MatrixFreeTools::compute_diagonal), 20 fixed
#     iterations, ms per iteration = the solve (with its first residual) / 20.
#   felab (this build's felab on the cpu): mesh.box{cells = {n, n, n}, cell = "hex"} with
#     kappa 1, and distort = 0.1 (interior vertices moved by 0.1 h / 4 times a smooth product
#     of sines, so at most 0.025 h a coordinate: milder than deal.II's, just as non-affine) with
#     kappa = "1 + 0.5 * x[0]"; Gauss p + 1, Dirichlet on the whole boundary (the dofs count
#     all nodes, as deal.II's); the default strategy (no strategy named: one warm-up apply
#     sets it up, autotunes and compiles), then solve.cg{pc = "jacobi", rtol = 1e-30,
#     maxit = 50}, the best ms per iteration; and in each round before the solve the median of
#     10 applies, the best round's kept (apply_ms).
# Both time their cases in rounds, one run of each case in turn (deal.II: a process a case),
# so that a passing load weighs on all alike; the table takes each case's best run. On this
# 2-core machine felab's two OpenMP threads are bimodal under another process's load (the
# same Q3 PCG 8.5 or 57-80 ms per iteration beside a compile): look at the rounds, or run
# OMP_NUM_THREADS=1, whose rounds stay within about 5% on the same loaded machine.
# Threads: OMP_NUM_THREADS (default 2) for felab, and bp's THREADS argument and
# DEAL_II_NUM_THREADS for deal.II. Debian 12's deal.II is built with oneTBB
# (DEAL_II_TBB_WITH_ONEAPI), where MatrixFree's task-parallel cell loop is compiled out: its
# cell loop runs on one thread whatever THREADS says (only vector operations use TBB), and its
# build has no SIMD (VectorizedArray<double> holds 1 double; felab's cpu kernels are compiled
# with -march=native). OMP_NUM_THREADS=1 compares one core with one core.
#   scripts/bench/cpu_matrix.sh [build folder]         (default build; made with make -j1 if
#                                                       it has no felab)
# Env: OUT          logs folder (default out/bench): dealii-uniform.log, dealii-user.log,
#                   felab.log, cpu_matrix.lua (felab's part), table.txt
#      REPS         felab's rounds (5); DEAL_REPS deal.II's rounds (2: a process a case, each
#                   with its own setup, Q7's 11-16 s)
#      Q3_N, Q7_N   cells per side (32, 13)
#      BP           the deal.II peer (.peers/dealii_mf/build/bp)
#      PEERS=0      felab alone
#      DEAL_TIMEOUT, FELAB_TIMEOUT  seconds (120 a deal.II process, 400)
# The peer, git-ignored (Debian: apt-get install libdeal.ii-dev cmake; about 2 minutes):
#   mkdir -p .peers/dealii_mf && cp ../shared/peers/dealii_mf/* .peers/dealii_mf/
#   cmake -S .peers/dealii_mf -B .peers/dealii_mf/build -DCMAKE_BUILD_TYPE=Release
#   make -C .peers/dealii_mf/build -j1
BUILD=${1:-build}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
LOGS=${OUT:-out/bench}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export DEAL_II_NUM_THREADS=$OMP_NUM_THREADS
REPS=${REPS:-5}
DEAL_REPS=${DEAL_REPS:-2}
Q3_N=${Q3_N:-32}
Q7_N=${Q7_N:-13}
BP=${BP:-.peers/dealii_mf/build/bp}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FELAB_CACHE=${FELAB_CACHE:-$BUILD_ABS/cache}
if [ ! -x "$BUILD/felab" ]; then
  echo "== make BUILD=$BUILD -j1"
  make BUILD="$BUILD" -j1 > "$LOGS/make.log" 2>&1 || { echo "make failed: $LOGS/make.log"; exit 1; }
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS, load $(load)"

# deal.II: a process a case (bp's --user holds for every case after it on its command line)
rc=0
if [ "${PEERS:-1}" = 1 ]; then
  if [ -x "$BP" ]; then
    : > "$LOGS/dealii-uniform.log"
    : > "$LOGS/dealii-user.log"
    i=0
    while [ $i -lt "$DEAL_REPS" ]; do
      i=$((i + 1))
      for c in "uniform ${Q3_N}x3" "uniform ${Q7_N}x7" "user ${Q3_N}x3" "user ${Q7_N}x7"; do
        set -- $c
        opt=""
        [ "$1" = user ] && opt=--user
        echo "== deal.II round $i: $BP $OMP_NUM_THREADS $opt $2   (load $(load))"
        timeout "${DEAL_TIMEOUT:-120}" "$BP" "$OMP_NUM_THREADS" $opt "$2" > "$LOGS/dealii.tmp" 2>&1
        r=$?
        cat "$LOGS/dealii.tmp" >> "$LOGS/dealii-$1.log"
        [ $r = 0 ] || { echo "   exit $r"; tail -n 5 "$LOGS/dealii.tmp"; rc=$r; }
        grep '^{' "$LOGS/dealii.tmp" | sed 's/"simd_doubles".*"cg_ms_it"/... "cg_ms_it"/; s/^/   /'
      done
    done
    rm -f "$LOGS/dealii.tmp"
  else
    echo "== no deal.II peer at $BP (see this script's header to build it)"
  fi
fi

# felab: the same meshes, one process
cat > "$LOGS/cpu_matrix.lua" << 'LUA'
-- written by scripts/bench/cpu_matrix.sh: felab's part. The four cases set up first (one
-- warm-up apply each: setup, autotune, compile), then `reps` rounds of one solve each in
-- turn; one line of JSON a case at the end (the best ms per iteration).
local reps, q3, q7 = tonumber(arg[1]) or 5, tonumber(arg[2]) or 32, tonumber(arg[3]) or 13
local cases = {}
for _, c in ipairs{{"Q3", q3, false}, {"Q7", q7, false}, {"Q3", q3, true}, {"Q7", q7, true}} do
  local sp, n, user = c[1], c[2], c[3]
  local t0 = perf.clock()
  local m = mesh.box{cells = {n, n, n}, cell = "hex", distort = user and 0.1 or nil}
  local V = fe.space(m, sp)
  local kappa = user and "1 + 0.5 * x[0]" or 1
  local A = fe.operator(V, physics.poisson{kappa = kappa, source = 1}, {dirichlet = "all"})
  local w = V:interpolate(function(x) return x[1] end):to("cpu", "double")
  local _, rep = A:apply(w, {backend = "cpu"})
  cases[#cases + 1] = {sp = sp, p = tonumber(sp:sub(2)), n = n, user = user, V = V, A = A, w = w,
                       setup = perf.clock() - t0, why = tostring(rep.why), all = {}, best = math.huge,
                       apply = math.huge}
  print(("%s %d^3 %s: %d dofs, set up in %.1f s (%s)"):format(sp, n, user and "user" or "uniform",
        V.ndofs, perf.clock() - t0, rep.strategy))
  io.stdout:flush()
end
for r = 1, reps do
  local line = {}
  for _, c in ipairs(cases) do
    local t = {}
    for i = 1, 10 do
      local _, rep = c.A:apply(c.w, {backend = "cpu"})
      t[i] = 1e3 * rep.seconds
    end
    table.sort(t)
    c.apply = math.min(c.apply, (t[5] + t[6]) / 2)
    local _, info = solve.cg(c.A, {backend = "cpu", pc = "jacobi", rtol = 1e-30, maxit = 50})
    local ms = 1e3 * info.report.seconds / info.iterations
    c.all[r], c.best, c.its, c.strategy = ms, math.min(c.best, ms), info.iterations, info.report.strategy
    line[#line + 1] = ("%s %s %.3f (apply %.3f)"):format(c.sp, c.user and "user" or "uniform", ms,
                                                         (t[5] + t[6]) / 2)
  end
  print(("round %d: %s ms/it"):format(r, table.concat(line, ", ")))
  io.stdout:flush()
end
for _, c in ipairs(cases) do
  local s = {}
  for i, v in ipairs(c.all) do s[i] = ("%.3f"):format(v) end
  print(('{"code": "felab", "p": %d, "cells": %d, "dofs": %d, "threads": %s, "setup_s": %.3f, ' ..
         '"cg_ms_it": %.3f, "cg_ms_all": [%s], "cg_its": %d, "apply_ms": %.3f, "strategy": "%s", ' ..
         '"user": %d, "why": "%s"}')
        :format(c.p, c.n, c.V.ndofs, os.getenv("OMP_NUM_THREADS") or "?", c.setup, c.best,
                table.concat(s, ", "), c.its, c.apply, c.strategy, c.user and 1 or 0,
                (c.why:gsub('[\\"]', "'"))))
end
LUA
echo "== felab: $BUILD/felab $LOGS/cpu_matrix.lua $REPS $Q3_N $Q7_N   (load $(load))"
timeout "${FELAB_TIMEOUT:-400}" "$BUILD/felab" "$LOGS/cpu_matrix.lua" "$REPS" "$Q3_N" "$Q7_N" > "$LOGS/felab.log" 2>&1
r=$?
[ $r = 0 ] || { echo "   exit $r"; tail -n 5 "$LOGS/felab.log"; rc=$r; }
grep -v '^{' "$LOGS/felab.log" | sed 's/^/   /'
grep '^{' "$LOGS/felab.log" | sed 's/"why".*/.../; s/^/   /'
echo "   (load $(load))"

# the short table: each case's best ms per CG iteration
python3 - "$LOGS" << 'PY' | tee "$LOGS/table.txt"
import json, os, sys
logs = sys.argv[1]
best = {}  # (code, p, user) -> (ms, dofs)
apply = {}  # (code, p, user) -> the best round's median apply ms (felab), deal.II's vmult median
for f in ("dealii-uniform.log", "dealii-user.log", "felab.log"):
    try:
        lines = open(os.path.join(logs, f)).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        code = "felab" if j["code"] == "felab" else "dealii"
        k = (code, j["p"], j["user"])
        if k not in best or j["cg_ms_it"] < best[k][0]:
            best[k] = (j["cg_ms_it"], j["dofs"])
        a = j.get("apply_ms", j.get("vmult_ms"))
        if a is not None and (k not in apply or a < apply[k]):
            apply[k] = a
def f(x, fmt="%.3f"):
    return "-" if x is None else fmt % x
def get(code, p, u):
    return best.get((code, p, u), (None, None))
print("\n== Jacobi-PCG ms per iteration, fp64, best run (OMP_NUM_THREADS %s; deal.II's cell loop: "
      "1 thread, no SIMD)" % os.environ.get("OMP_NUM_THREADS", "?"))
print("%-12s %8s | %10s %9s | %13s | %18s | %13s %11s | %12s" % ("case", "dofs", "deal.II ms", "felab ms",
      "deal.II/felab", "felab user/uniform", "deal.II apply", "felab apply", "apply ratios"))
for p in (3, 7):
    for u in (0, 1):
        d, dd = get("dealii", p, u)
        e, ed = get("felab", p, u)
        e0 = get("felab", p, 0)[0]
        ratio = d / e if d and e else None
        uu = e / e0 if u and e and e0 else None
        da, ea, ea0 = apply.get(("dealii", p, u)), apply.get(("felab", p, u)), apply.get(("felab", p, 0))
        ar = "%s%s" % (f(da / ea, "%.2f") if da and ea else "-",
                       " / " + f(ea / ea0, "%.2f") if u and ea and ea0 else "")
        print("%-12s %8s | %10s %9s | %13s | %18s | %13s %11s | %12s" % ("Q%d %s" % (p, "user" if u else "uniform"),
              dd or ed or "-", f(d), f(e), f(ratio, "%.2f"), f(uu, "%.2f") if u else "", f(da), f(ea), ar))
print("user: deal.II distort_random(0.1) + kappa(x) stored a point; felab distort = 0.1 + "
      "kappa = \"1 + 0.5 * x[0]\"; apply: deal.II's vmult (median of 10), felab's median of 10 "
      "(the best round); apply ratios: deal.II/felab, and felab user/uniform")
PY
exit $rc
