# Sourced by the cpu benchmarks (cpu_peer.sh, cpu_assembly.sh) after they cd to the repository
# root with N set: the log folder ($OUT or out/bench) in LOGS, Debian's PETSc in PETSC_DIR, then
# the peer's run, PETSc 3.18 CG + Jacobi on N^3 cells (.peers/petsc_cpu.py), logged to
# $LOGS/petsc.log.
LOGS=${OUT:-out/bench}
mkdir -p "$LOGS"
PETSC_DIR=${PETSC_DIR:-$(ls -d /usr/lib/petscdir/petsc3.*/x86_64-linux-gnu-real 2> /dev/null | head -n 1)}
export PETSC_DIR
echo "== PETSc: petsc_cpu.py $N"
/usr/bin/python3 .peers/petsc_cpu.py "$N" 2>&1 | tee "$LOGS/petsc.log"
