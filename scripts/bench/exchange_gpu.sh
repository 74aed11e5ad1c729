#!/bin/sh
# Issue 48's exchange on a machine of two GPUs, a GPU a rank: exchange_parts.lua for the
# seventeen cases of docs/benchmarks.md section 8 (sumfact's Q2-Q7, csr's P1-P3, Q1 and Q2; a
# distorted box with kappa(x)), each twice in one call: the gather following the boundary
# cells (FELAB_FOLLOW=1, where the device can) and not (0), a process each, then
# exchange_table.py's table of the ready rank's measured and predicted exchange.
#   [CASES="cells space cell [strategy];..."] [FOLLOWS="1 0"] scripts/bench/exchange_gpu.sh
#     [FELAB [MPIRUN [OUT]]]
# On the GPU machine: scripts/bench/exchange_gpu.sh build-gpu/felab .carry/hypre/bin/mpirun
FELAB=${1:-build/felab}
MPIRUN=${2:-mpirun}
OUT=${3:-/tmp/felab-exchange.txt}
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMP_NUM_THREADS=4 FELAB_ALL_RANKS=1 PMIX_MCA_pcompress_base_silence_warning=1
: > "$OUT"
CASES=${CASES:-"96x48x48 Q3 hex;48 Q3 hex;28 Q7 hex;24 Q5 hex;72 Q2 hex;36 Q4 hex;20 Q6 hex;\
192 P1 tet csr;192 Q1 hex csr;96 P2 tet csr;128 P2 tet csr;64 P2 tet csr;48 P3 tet csr;\
32 P3 tet csr;80 P2 tet csr;40 P3 tet csr;72 Q2 hex csr"}
IFS=';'
for c in $CASES; do
  IFS=' '
  # shellcheck disable=SC2086 # the case's words
  set -- $c
  for f in ${FOLLOWS:-1 0}; do
    echo "round $f" >> "$OUT"
    FELAB_FOLLOW=$f timeout 100 "$MPIRUN" -x LD_LIBRARY_PATH -x FELAB_CACHE -x OMP_NUM_THREADS \
      -x FELAB_ALL_RANKS -x FELAB_FOLLOW -x PMIX_MCA_pcompress_base_silence_warning -np 2 \
      "$FELAB" scripts/bench/exchange_parts.lua "$1" "$2" "$3" cuda "${4:--}" 200 >> "$OUT" 2>&1
  done
done
unset IFS
python3 scripts/bench/exchange_table.py "$OUT"
