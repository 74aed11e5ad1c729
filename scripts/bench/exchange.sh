#!/bin/sh
# Issue 48's exchange target (scripts/bench/exchange.lua): P1 and Q3 on 2 and 3 ranks, every
# rank's measured exchange against the model's. The backend is calibrated first, alone (ranks
# calibrating side by side measure each other), then the link under mpirun; both stored.
#   scripts/bench/exchange.sh [FELAB [BACKEND [MPIRUN]]]
# On the GPU machine: scripts/bench/exchange.sh build/felab cuda .carry/hypre/bin/mpirun
FELAB=${1:-build/felab}
BACKEND=${2:-cpu}
MPIRUN=${3:-mpirun}
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMP_NUM_THREADS=1 FELAB_ALL_RANKS=1
# the backend alone, as a rank runs it (one thread), then the link with the ranks
"$FELAB" -e "device.calibrate('$BACKEND', 'double')"
for np in 2 3; do
  "$MPIRUN" --oversubscribe -x OMP_NUM_THREADS -x FELAB_ALL_RANKS -np $np "$FELAB" \
    -e "local l = device.calibrate('link'); print('LINK', mpi.rank, mpi.size, l.latency_us, l.gbytes, l.allreduce_us)"
  for c in "40 P1 tet" "12 Q3 hex"; do
    # shellcheck disable=SC2086 # the case's words
    "$MPIRUN" --oversubscribe -x OMP_NUM_THREADS -x FELAB_ALL_RANKS -np $np "$FELAB" \
      scripts/bench/exchange.lua $c "$BACKEND"
  done
done
