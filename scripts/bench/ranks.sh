#!/bin/sh
# Issue 48's cpu target: two ranks of one thread against one rank of two threads, within 15%
# (scripts/bench/ranks.lua), each case twice, alternating.
#   scripts/bench/ranks.sh [FELAB]
FELAB=${1:-build/felab}
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
for c in "20 Q3 hex" "96 P1 tet"; do
  for rep in 1 2; do
    # shellcheck disable=SC2086 # the case's words
    OMP_NUM_THREADS=2 "$FELAB" scripts/bench/ranks.lua $c
    OMP_NUM_THREADS=1 mpirun --oversubscribe -x OMP_NUM_THREADS -np 2 "$FELAB" scripts/bench/ranks.lua $c
  done
done
