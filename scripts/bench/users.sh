#!/bin/sh
# Issue 43's cases on the GPU machine in one call: libCEED's BP3 and BP5 on its distorted mesh
# (`bp -d`, /gpu/cuda/gen: Q3 3.05M, Q7 7.65M, Q5 1.77M dofs), then felab's
# scripts/bench/users.lua on cuda (the same sizes, uniform and distorted with kappa(x), Gmsh
# meshes, two fp32 rows); logs under $OUT (else out/bench), the tables last.
#   scripts/bench/users.sh [build folder]                         (default build-gpu)
# Made here and carried (all git-ignored): build-gpu (make gpu), .peers/peers/ceed_bp (a copy
# of ../shared/peers/ceed_bp), .gpu/ceed/run (its build.sh), .peers/matrix-meshes (`felab
# scripts/bench/matrix.lua write-meshes .peers/matrix-meshes`).
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
LOGS=${OUT:-out/bench}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
export FELAB_CACHE=${FELAB_CACHE:-$BUILD_ABS/cache}
command -v nvidia-smi > /dev/null && nvidia-smi -L
if [ -f .peers/peers/ceed_bp/run.sh ]; then
  OUT="$LOGS" BP_OPTS=-d CASES="48:3 28:7 24:5" REF_CASES="" BACKENDS="/gpu/cuda/gen" BP_TIMEOUT=60 \
    timeout "${CEED_TIMEOUT:-150}" sh .peers/peers/ceed_bp/run.sh > "$LOGS/ceed.log" 2>&1
  echo "== libCEED, distorted (exit $?)"
  grep -E "^backend|^/gpu" "$LOGS/ceed.log" | tail -7
else
  echo "== libCEED: .peers/peers/ceed_bp not here (see the top of this script)"
fi
timeout "${FELAB_TIMEOUT:-400}" "$BUILD/felab" scripts/bench/users.lua cuda > "$LOGS/felab.log" 2>&1
echo "== felab (exit $?)"
sed -n '/== table/,$p' "$LOGS/felab.log" | cut -c1-200
