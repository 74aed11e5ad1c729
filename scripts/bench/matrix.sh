#!/bin/sh
# Issue 43's matrix on the GPU machine: the libCEED peer (BP3 and BP5, uniform and with -d, its
# distorted mesh), the CuPy peer (assembled CSR, cuSPARSE, Jacobi-PCG; uniform, kappa 1) on
# the matrix's sizes, then felab's scripts/bench/matrix.lua on cuda; logs under $OUT (else
# out/bench), felab's table, the peers' tables, and a short table last (fp64 PCG ms per
# iteration side by side).
#   scripts/bench/matrix.sh [build folder]                        (default build-gpu)
# Env: SCALE    matrix.lua's scale (3: the issue's sizes: Q1, P1 7.19M dofs, Q3 3.05M, Q7 7.65M)
#      FILTER   matrix.lua's filter ("Q3,Q7,fp64", "d0.1,kx", knobs "its=50,skip=0,setup=10"...):
#               the whole matrix does not fit one 10-minute call; split it by spaces or meshes
#      MESHES   folder of the Gmsh meshes that `matrix.lua write-meshes` wrote (default
#               .peers/matrix-meshes); a felab without the Gmsh SDK cannot read them yet, and
#               then skips the gmsh rows, saying why
#      PEERS    0: felab alone; CEED=0 or CUPY=0: without that peer
#      CEED_CASES  N:p list (default from SCALE: 192:1 72:2 48:3 24:5 28:7)
#      CUPY_ARGS   cupy_cg.py's arguments (default from SCALE: P1 192^3, 192x1 72x2 48x3 24x5;
#                  no Q7: its CSR at 28^3, ~4G nonzeros, does not fit)
#      FELAB_TIMEOUT, CEED_TIMEOUT, CUPY_TIMEOUT  seconds (540, 150 a process, 330)
# Made here, all git-ignored, and carried with the build:
#   make gpu                                   # build-gpu (or GPU_BUILD=...)
#   cp ../shared/peers/cupy_cg.py .peers/
#   mkdir -p .peers/peers && cp -r ../shared/peers/ceed_bp .peers/peers/
#   .peers/peers/ceed_bp/build.sh [libCEED git dir]   # .gpu/ceed/run (or carry .gpu/ceed/src:
#                                                     # run.sh builds it there first)
#   build/felab scripts/bench/matrix.lua write-meshes .peers/matrix-meshes
#   run: carry build-gpu, .peers, .gpu/ceed/run; command: SCALE=3 FILTER=Q3 sh scripts/bench/matrix.sh
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
LOGS=${OUT:-out/bench}
SCALE=${SCALE:-3}
MESHES=${MESHES:-.peers/matrix-meshes}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FELAB_CACHE=${FELAB_CACHE:-$BUILD_ABS/cache}
command -v nvidia-smi > /dev/null && nvidia-smi -L
# cells per side at this scale of the issue's n (matrix.lua's rule: n * SCALE / 3, rounded)
n() { awk -v n="$1" -v s="$SCALE" 'BEGIN { m = int(n * s / 3 + 0.5); print (m < 2 ? 2 : m) }'; }

if [ "${PEERS:-1}" = 1 ] && [ "${CEED:-1}" = 1 ]; then
  if [ -f .peers/peers/ceed_bp/run.sh ]; then
    cases=${CEED_CASES:-"$(n 192):1 $(n 72):2 $(n 48):3 $(n 24):5 $(n 28):7"}
    for d in uniform distorted; do
      opts=""; [ $d = distorted ] && opts=-d
      echo "== libCEED $d ($cases; BP3 and BP5)"
      OUT="$LOGS/ceed-$d" BP_OPTS="$opts" CASES="$cases" REF_CASES="" BACKENDS="${CEED_BACKENDS:-/gpu/cuda/gen}" \
        BP_TIMEOUT="${CEED_TIMEOUT:-150}" sh .peers/peers/ceed_bp/run.sh > "$LOGS/ceed-$d.log" 2>&1
      echo "   exit $?"
    done
  else
    echo "== no libCEED peer at .peers/peers/ceed_bp/run.sh"
  fi
fi
if [ "${PEERS:-1}" = 1 ] && [ "${CUPY:-1}" = 1 ]; then
  if [ -f .peers/cupy_cg.py ]; then
    args=${CUPY_ARGS:-"$(n 192) $(n 192)x1 $(n 72)x2 $(n 48)x3 $(n 24)x5"}
    echo "== CuPy: cupy_cg.py $args"
    timeout "${CUPY_TIMEOUT:-330}" python3 .peers/cupy_cg.py $args > "$LOGS/cupy.log" 2>&1
    echo "   exit $?"
  else
    echo "== no CuPy peer at .peers/cupy_cg.py"
  fi
fi

echo "== felab: matrix.lua cuda $SCALE (filter '${FILTER:-}')"
timeout "${FELAB_TIMEOUT:-540}" "$BUILD/felab" scripts/bench/matrix.lua cuda "$SCALE" "$LOGS/matrix.csv" \
  "${FILTER:-}" "$MESHES" > "$LOGS/felab.log" 2>&1
rc=$?
sed -n '/^== matrix/,$p' "$LOGS/felab.log"
[ $rc = 0 ] || { echo "felab exit $rc"; tail -n 20 "$LOGS/felab.log"; }
for d in uniform distorted; do
  [ -f "$LOGS/ceed-$d.log" ] && { echo "== libCEED $d"; sed -n '/^backend /,$p' "$LOGS/ceed-$d.log"; }
done
[ -f "$LOGS/cupy.log" ] && { echo "== CuPy"; sed -n '/^== ceilings/,$p' "$LOGS/cupy.log"; }

# the short table: fp64 PCG ms per iteration of felab's default (and fastest) beside the peers'
python3 - "$LOGS" << 'EOF' || true
import csv, json, os, sys
logs = sys.argv[1]
felab = {}
try:
    for r in csv.DictReader(open(os.path.join(logs, "matrix.csv"))):
        if r["precision"] == "fp64":
            felab[(r["space"], r["mesh"], r["kappa"])] = r
except OSError:
    pass
ceed = {}  # (p, bp, distorted) -> best cg_ms_it over backends
for d in ("uniform", "distorted"):
    try:
        for line in open(os.path.join(logs, "ceed-" + d, "results.jsonl")):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            k = (j["p"], j["bp"], j["distorted"])
            if j.get("cg_ms_it", 0) > 0 and (k not in ceed or j["cg_ms_it"] < ceed[k]):
                ceed[k] = j["cg_ms_it"]
    except OSError:
        pass
cupy = {}
try:
    for line in open(os.path.join(logs, "cupy.log")):
        if line.startswith("{") and '"case"' in line:
            j = json.loads(line)
            if j["dtype"] == "float64":
                cupy[j["case"].split()[0]] = j["ms_per_iter"]
except OSError:
    pass
def f(x):
    return "-" if x in (None, "") else "%.3f" % float(x)
def cell(sp, m, k, what="default"):
    r = felab.get((sp, m, k))
    if not r:
        return "-"
    return f(r[what + "_pcg_ms"])
print("\n== fp64 Jacobi-PCG ms per iteration (felab: default strategy; 'fast': the fastest, on d0.1 kx)")
print("%-3s %9s | %8s %8s %8s %8s %8s %8s %-9s | %8s %8s %8s %8s | %8s" % ("sp", "dofs", "uni k1", "d0.1 k1",
      "d0.1 kx", "d0.3 kx", "gmsh kx", "fast", "(which)", "BP3 uni", "BP3 -d", "BP5 uni", "BP5 -d", "CuPy"))
for sp in ("P1", "P2", "Q1", "Q2", "Q3", "Q5", "Q7"):
    rows = [r for (s, _, _), r in felab.items() if s == sp]
    if not rows:
        continue
    dofs = felab.get((sp, "d0.1", "kx"), rows[0])["dofs"]
    p = int(sp[1:])
    fast = felab.get((sp, "d0.1", "kx"), {})
    hexes = sp[0] == "Q"
    print("%-3s %9s | %8s %8s %8s %8s %8s %8s %-9s | %8s %8s %8s %8s | %8s" % (sp, dofs,
          cell(sp, "uniform", "k1"), cell(sp, "d0.1", "k1"), cell(sp, "d0.1", "kx"), cell(sp, "d0.3", "kx"),
          cell(sp, "gmsh", "kx"), f(fast.get("fastest_pcg_ms")), fast.get("fastest", "-"),
          f(ceed.get((p, 3, 0))) if hexes else "-", f(ceed.get((p, 3, 1))) if hexes else "-",
          f(ceed.get((p, 5, 0))) if hexes else "-", f(ceed.get((p, 5, 1))) if hexes else "-",
          f(cupy.get(sp)) if sp in ("P1", "Q1", "Q2", "Q3", "Q5") else "-"))
print("libCEED: its own mesh (-d: its smooth distortion, not felab's distort = 0.1), kappa 1, all nodes "
      "unknowns; CuPy: uniform, kappa 1")
EOF
exit $rc
