#!/bin/sh
# Issue 15's cpu benchmark in one run: PETSc 3.18 CG + Jacobi on the assembled P1 tet and Q1
# hex matrices (../shared/peers/petsc_cpu.py, copied to .peers/ with the cupy_cg.py it reads),
# then felab's assembly and csr strategy on the same meshes (scripts/bench/assembly.lua).
#   scripts/bench/cpu_assembly.sh [N]      (default 128: P1 and Q1 at about 2.15M dofs)
# Needs python3-petsc4py and python3-scipy (Debian), run with /usr/bin/python3.
# FELAB: the felab binary (default build/felab).
N=${1:-128}
FELAB=${FELAB:-build/felab}
cd "$(dirname "$0")/../.." || exit 1
. scripts/bench/petsc-peer.sh
for c in "tet P1" "hex Q1"; do
  set -- $c
  echo "== felab cpu assembly and csr, $2 on $N^3 ${1}s"
  "$FELAB" scripts/bench/assembly.lua cpu "$N" "$1" "$2" 30 1 none 2>&1 | tee -a "$LOGS/felab-cpu.log"
done
