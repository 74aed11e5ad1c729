#!/bin/sh
# The first GPU benchmark in one call on the GPU machine: the CuPy peer (assembled CSR
# matrix, cuSPARSE, Jacobi-PCG) on the same problems, then felab's scripts/bench/gpu.lua,
# which reads the peer's log and prints one table with the ratios.
#   scripts/bench/gpu.sh [build folder] [peer script]      (logs: $OUT, else out/bench)
# Build here with `make gpu`, copy ../shared/peers/cupy_cg.py to .peers/ (git-ignored) and
# carry both build-gpu and .peers.
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
PEER=${2:-.peers/cupy_cg.py}
LOGS=${OUT:-out/bench}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
command -v nvidia-smi > /dev/null && nvidia-smi -L
if [ -f "$PEER" ]; then
  # P1 tets on 192^3 cubes, Q1 hexes on 192^3, Q2 hexes on 96^3: ~7.2M dofs each
  echo "== peer: $PEER (host assembly takes minutes)"
  timeout "${PEER_TIMEOUT:-330}" python3 "$PEER" 192 192x1 96x2 > "$LOGS/peer.log" 2>&1
  echo "   peer exit $?"
  tail -n 9 "$LOGS/peer.log"
else
  echo "== no peer script at $PEER: felab alone"
fi
echo "== felab"
timeout "${FELAB_TIMEOUT:-300}" "$BUILD/felab" scripts/bench/gpu.lua cuda "${SCALE:-1}" "$LOGS/peer.log" \
  "${CASES:-}" > "$LOGS/felab.log" 2>&1
rc=$?
sed -n '/^== /,$p' "$LOGS/felab.log"
[ $rc = 0 ] || { echo "felab exit $rc"; tail -n 20 "$LOGS/felab.log"; }
exit $rc
