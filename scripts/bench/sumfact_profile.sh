#!/bin/sh
# Nsight Compute profile of the sumfact apply on the GPU machine (one device call): the Q3 and
# Q7 Poisson Jacobian action in double, geometry from the vertices and stored, one launch each
# (scripts/bench/one_case.lua with reps = 1), then the same cases timed without the profiler.
#   scripts/bench/sumfact_profile.sh [build]        (logs: $OUT, else out/profile)
BUILD=${1:-build-gpu}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac # the cache and libraries by an absolute path
LOGS=${OUT:-out/profile}
cd "$(dirname "$0")/../.." || exit 1
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$BUILD_ABS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FELAB_CACHE="$BUILD_ABS/cache"
CASES=${CASES:-"Q3:48:vertices Q3:48:stored Q7:14:vertices Q7:28:vertices"}
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
  --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats
  --section InstructionStats --section SourceCounters"
for c in $CASES; do
  space=${c%%:*}; rest=${c#*:}; n=${rest%%:*}; geo=${rest#*:}
  name="$space-$n-$geo"
  echo "== $name: timed"
  timeout 120 "$BUILD/felab" scripts/bench/one_case.lua cuda hex "$space" "$n" sumfact double 20 100 0 0 "$geo" \
    2>&1 | tee "$LOGS/$name.time"
  if command -v ncu > /dev/null && [ "${PROFILE:-1}" = 1 ]; then
    echo "== $name: ncu"
    FELAB_CUDA_OPTIONS=-lineinfo timeout 300 ncu --clock-control none -k regex:fe_sumfact -c 1 $SECTIONS \
      "$BUILD/felab" scripts/bench/one_case.lua cuda hex "$space" "$n" sumfact double 1 0 0 0 "$geo" \
      > "$LOGS/$name.ncu" 2>&1
    echo "   ncu exit $?"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Shared Memory Configuration Size|Achieved Occupancy|Theoretical Occupancy|Block Limit|L1/TEX Hit|Executed Ipc A|Issue Slots Busy|Stall|Warp Cycles Per Issued" "$LOGS/$name.ncu" | head -40
  fi
done
