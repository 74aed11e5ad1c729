#!/bin/sh
# Install what felab needs to build and test on Debian/Ubuntu, if it is missing.
# Idempotent: installs nothing when everything is there. apt-get runs as root (or via sudo).
set -e
PKGS="build-essential pkg-config liblua5.4-dev libreadline-dev libcriterion-dev \
ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo gmsh libgmsh-dev python3-scipy \
libhypre-dev libmetis-dev openmpi-bin patchelf gnuplot-nox llvm universal-ctags"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "felab: installing$missing"
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
  echo "felab: need root to install:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
