#!/bin/sh
# Issue 46's benchmark in one call on the GPU machine: the CuPy peer's device assembly (P1
# tets and Q1 hexes on 192^3 cubes: element matrices and COO triplets on the device, sorted
# into CSR), then felab's first csr apply on the same meshes, the P1 box distorted, P2 tets on
# 96^3 and P2 on the torso (a Gmsh mesh of four regions, written by the cpu build into
# .peers/matrix-meshes by scripts/bench/matrix.lua write-meshes, refined twice here)
# (scripts/bench/first_csr.lua) from an empty kernel cache, then again with the cache warm.
#   scripts/bench/first_csr.sh [build folder] [cases]       (logs: $OUT, else out/bench)
# Build here with `make gpu`, copy ../shared/peers/cupy_cg.py to .peers/ and carry both.
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
CASES=${2:-tet:P1:192,tet:P1:192:0.1,hex:Q1:192,tet:P2:96,msh:P2:.peers/matrix-meshes/torso-0.063.msh:2}
LOGS=${OUT:-out/bench}
BACKEND=${BACKEND:-cuda}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -f .peers/cupy_cg.py ] && [ "${PEER:-1}" = 1 ]; then
  echo "== peer: CuPy's device assembly"
  timeout "${PEER_TIMEOUT:-300}" python3 .peers/cupy_cg.py 192 192x1 > "$LOGS/peer.log" 2>&1
  echo "   peer exit $?"
  tail -n 4 "$LOGS/peer.log"
fi
# the cold pass: an empty kernel cache on a calibrated device (the calibration, measured
# once per device and kept, apart: it takes about a second on the H200)
cache=$(mktemp -d)
echo 'device.calibrate(arg[1], "double"); device.calibrate(arg[1], "single")' > "$cache/cal.lua"
FELAB_CACHE=$cache "$BUILD/felab" "$cache/cal.lua" "$BACKEND" > /dev/null 2>&1
find "$cache" -mindepth 1 -maxdepth 1 ! -name calibration -exec rm -rf {} +
for pass in cold warm; do
  echo "== felab, $pass kernel cache"
  FELAB_CACHE=$cache timeout "${FELAB_TIMEOUT:-300}" "$BUILD/felab" scripts/bench/first_csr.lua \
    "$BACKEND" "$CASES" > "$LOGS/felab-$pass.log" 2>&1
  echo "   felab exit $?"
  grep -E '^(==|  built|  part|  compiled)' "$LOGS/felab-$pass.log"
  sed -n '/^| case/,$p' "$LOGS/felab-$pass.log"
done
rm -rf "$cache"
