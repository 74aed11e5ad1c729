#!/bin/sh
# Issue 14's GPU runs in one device call: the CuPy peer on the Q3 and Q7 cases, felab's
# sumfact benchmark (scripts/bench/sumfact.lua) reading the peer's log, and the strategy
# layer's before/after check (scripts/bench/strategy_layer.lua) with a build of the previous
# commit in $OLD when it is there.
#   scripts/bench/sumfact_gpu.sh [build] [sections]     (logs: $OUT, else out/bench)
# Build here with `make gpu`, copy ../shared/peers/cupy_cg.py to .peers/ and carry both.
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
SECTIONS=${2:-orders,large,remacle,transpose}
OLD=${OLD:-build-gpu-old}
LOGS=${OUT:-out/bench}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FELAB_CACHE="$BUILD_ABS/cache"
command -v nvidia-smi > /dev/null && nvidia-smi -L
if [ -f .peers/cupy_cg.py ] && [ "${PEER:-1}" = 1 ]; then
  echo "== peer: cupy_cg.py 192 48x3 14x7"
  timeout 200 python3 .peers/cupy_cg.py 192 48x3 14x7 > "$LOGS/peer.log" 2>&1
  echo "   peer exit $?"; tail -n 12 "$LOGS/peer.log"
fi
if [ "${LAYER:-1}" = 1 ]; then
  echo "== strategy layer: before and after"
  [ -x "$OLD/felab" ] && FELAB_CACHE="$PWD/$OLD/cache" timeout 150 "$OLD/felab" \
    scripts/bench/strategy_layer.lua cuda before | tee "$LOGS/layer.log"
  timeout 150 "$BUILD/felab" scripts/bench/strategy_layer.lua cuda after | tee -a "$LOGS/layer.log"
fi
echo "== felab sumfact ($SECTIONS)"
timeout "${FELAB_TIMEOUT:-420}" "$BUILD/felab" scripts/bench/sumfact.lua cuda "$LOGS/peer.log" \
  "$SECTIONS" > "$LOGS/felab.log" 2>&1
rc=$?
grep -v "^  " "$LOGS/felab.log" | sed -n '/^== /,$p'
[ $rc = 0 ] || { echo "felab exit $rc"; tail -n 30 "$LOGS/felab.log"; }
exit $rc
