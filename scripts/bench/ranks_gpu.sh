#!/bin/sh
# Issue 48's GPU targets on a machine of two GPUs, a GPU a rank (cuda opens the local rank's):
# weak scaling Q3 3.05M dofs a GPU, strong scaling Q7 7.65M and P1 7.19M (csr), one rank
# against two, each case twice alternating (scripts/bench/ranks.lua).
#   scripts/bench/ranks_gpu.sh [FELAB [MPIRUN]]
# On the GPU machine: scripts/bench/ranks_gpu.sh build-gpu/felab .carry/hypre/bin/mpirun
FELAB=${1:-build/felab}
MPIRUN=${2:-mpirun}
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMP_NUM_THREADS=4
run() { # ranks, then ranks.lua's words
  np=$1; shift
  if [ "$np" = 1 ]; then "$FELAB" scripts/bench/ranks.lua "$@"
  else "$MPIRUN" -x OMP_NUM_THREADS -np "$np" "$FELAB" scripts/bench/ranks.lua "$@"; fi
}
for rep in 1 2; do
  echo "round $rep"
  run 1 48x48x48 Q3 hex cuda
  run 2 96x48x48 Q3 hex cuda
  run 1 28x28x28 Q7 hex cuda
  run 2 28x28x28 Q7 hex cuda
  run 1 192x192x192 P1 tet cuda csr
  run 2 192x192x192 P1 tet cuda csr
done
