#!/bin/sh
# Issue 14's cpu benchmark in one run: PETSc 3.18 CG + Jacobi on the assembled matrices
# (../shared/peers/petsc_cpu.py, copied to .peers/ with the cupy_cg.py it reads), then
# felab's sumfact on the same meshes and dofs (scripts/bench/one_case.lua): Q1 on N^3
# hexes, Q3 on (N/3)^3.
#   scripts/bench/cpu_peer.sh [N]          (default 126: Q1 and Q3 at about 2.05M dofs)
# Needs python3-petsc4py and python3-scipy (Debian), run with /usr/bin/python3.
N=${1:-126}
cd "$(dirname "$0")/../.." || exit 1
. scripts/bench/petsc-peer.sh
for c in "Q1 $N vertices" "Q1 $N stored" "Q3 $((N / 3)) vertices" "Q3 $((N / 3)) stored"; do
  set -- $c
  echo "== felab cpu sumfact $1, $2^3 hexes, geometry $3"
  build/felab scripts/bench/one_case.lua cpu hex "$1" "$2" sumfact double 5 20 0 0 "$3" 2>&1 |
    tee -a "$LOGS/felab-cpu.log"
done
