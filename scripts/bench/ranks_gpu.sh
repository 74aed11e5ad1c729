#!/bin/sh
# Issue 48's GPU targets on a machine of two GPUs, a GPU a rank (cuda opens the local rank's):
# weak scaling Q3 3.05M dofs a GPU, strong scaling Q7 7.65M and P1 7.19M (csr), one rank
# against two (scripts/bench/ranks.lua), two ranks twice with CG's sums on the devices and once
# through the host (FELAB_NODE_SUMS=0) between them, then once with the gather not following
# the boundary cells (FELAB_FOLLOW=0); every rank prints its last apply's exchange against the
# model's (FELAB_ALL_RANKS=1).
#   scripts/bench/ranks_gpu.sh [FELAB [MPIRUN]]
# On the GPU machine: scripts/bench/ranks_gpu.sh build-gpu/felab .carry/hypre/bin/mpirun
FELAB=${1:-build/felab}
MPIRUN=${2:-mpirun}
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMP_NUM_THREADS=4 FELAB_ALL_RANKS=1 FELAB_FOLLOW=${FELAB_FOLLOW:-1}
run() { # ranks, then ranks.lua's words
  np=$1; shift
  if [ "$np" = 1 ]; then "$FELAB" scripts/bench/ranks.lua "$@"
  else "$MPIRUN" -x OMP_NUM_THREADS -x FELAB_ALL_RANKS -x FELAB_NODE_SUMS -x FELAB_FOLLOW -x LD_LIBRARY_PATH \
         -x FELAB_CACHE -np "$np" "$FELAB" scripts/bench/ranks.lua "$@"; fi
}
for c in "48x48x48 Q3 hex cuda" "28x28x28 Q7 hex cuda" "192x192x192 P1 tet cuda csr"; do
  # shellcheck disable=SC2086 # the case's words
  set -- $c
  two="$c"
  [ "$2" = Q3 ] && two="96x48x48 Q3 hex cuda" # weak scaling: twice the cells on two
  run 1 $c
  FELAB_NODE_SUMS=1 run 2 $two
  FELAB_NODE_SUMS=0 run 2 $two
  FELAB_NODE_SUMS=1 run 2 $two
  FELAB_NODE_SUMS=1 FELAB_FOLLOW=0 run 2 $two
done
