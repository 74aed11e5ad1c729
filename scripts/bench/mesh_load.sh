#!/bin/sh
# Benchmark (issue 3): loading a 1M-tet .msh with mesh.load against `gmsh -0` reading and
# writing the same file. usage: scripts/bench/mesh_load.sh [build/felab] [cubes per side]
FELAB=${1:-build/felab}
N=${2:-56}
DIR=$(mktemp -d)
$FELAB -e "export.msh('$DIR/box.msh', mesh.box{cells = {$N, $N, $N}, cell = 'tet'})" || exit 1
ls -la "$DIR/box.msh"
best() { # best wall time of 3 runs of a command, seconds
  b=999999
  for i in 1 2 3; do
    s=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; e=$(date +%s.%N)
    b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1 < b) ? $1 : b}')
  done
  echo "$b"
}
tg=$(best gmsh "$DIR/box.msh" -0 -o "$DIR/out.msh")
tf=$(best $FELAB -e "m = mesh.load('$DIR/box.msh'); assert(m.ncells == 6 * $N^3)")
tn=$(best $FELAB -e "m = 1")
echo "cells $((6 * N * N * N)): gmsh -0 ${tg} s, felab mesh.load ${tf} s (felab start-up ${tn} s), ratio $(echo "$tf / $tg" | bc -l | cut -c1-5)"
rm -rf "$DIR"
