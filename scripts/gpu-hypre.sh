#!/bin/sh
# Prepare hypre for a machine that has neither hypre nor MPI (the GPU machine), from this
# machine's Debian packages (libhypre-dev and its OpenMPI):
#   scripts/gpu-hypre.sh [folder]        (default .carry/hypre; git ignores .carry/)
# The folder gets
#   include/hypre/  hypre's headers; include/mpi.h (what engine/solve/precond/amg.c compiles with)
#   lib/            libHYPRE, libmpi and every shared library they load, found with ldd, but
#                   those every Linux has (glibc, libstdc++, libgcc_s, libgomp)
#   lib/openmpi3/   the OpenMPI plugins a singleton MPI_Init opens (found by running one
#                   with the settings of amg.c's mpi_start, under LD_DEBUG=files), and theirs
#   share/openmpi/  OpenMPI's help texts (its error messages)
# Each library's run path is set to its own folder ($ORIGIN, with patchelf), so one library
# finds the next wherever the folder lands; `make gpu` links felab against it with a run path
# relative to the binary, and amg.c points OpenMPI at lib/openmpi3 and share/openmpi when it
# finds them beside the libmpi it loaded. Carry the folder with the GPU build.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/.carry/hypre}
HYPRE_H=/usr/include/hypre/HYPRE.h
[ -f "$HYPRE_H" ] || { echo "gpu-hypre: no $HYPRE_H: install libhypre-dev (scripts/install-deps.sh)" >&2; exit 1; }
command -v patchelf > /dev/null || { echo "gpu-hypre: patchelf is missing (scripts/install-deps.sh)" >&2; exit 1; }
MPI_INC=$(pkg-config --variable=includedir ompi-c)
[ -f "$MPI_INC/mpi.h" ] || { echo "gpu-hypre: no mpi.h in '$MPI_INC' (pkg-config ompi-c)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The probe: MPI started and stopped as amg.c does; the plugins it opens are the ones to carry.
cat > "$TMP/probe.c" << 'EOF'
#include <HYPRE_utilities.h>
#include <mpi.h>
int main(void)
{
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return 1;
  HYPRE_Init();
  HYPRE_Finalize();
  return MPI_Finalize() != MPI_SUCCESS;
}
EOF
# shellcheck disable=SC2046 # the flags are words
cc -isystem /usr/include/hypre -isystem "$MPI_INC" -o "$TMP/probe" "$TMP/probe.c" -lHYPRE \
  $(pkg-config --libs ompi-c)
OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_btl=self OMPI_MCA_pml=ob1 LD_DEBUG=files \
  "$TMP/probe" 2> "$TMP/loads"
PLUGINS=$(sed -n 's|.*file=\([^ ]*/openmpi3/mca_[a-z0-9_]*\.so\).*|\1|p' "$TMP/loads" | sort -u)
[ -n "$PLUGINS" ] || { echo "gpu-hypre: the MPI probe opened no OpenMPI plugin" >&2; exit 1; }
HYPRE_SO=$(ldd "$TMP/probe" | awk '/libHYPRE/ {print $3}')
MPI_SO=$(ldd "$TMP/probe" | awk '/libmpi\.so/ {print $3}')

rm -rf "$DEST"
mkdir -p "$DEST/include/hypre" "$DEST/lib/openmpi3" "$DEST/share/openmpi"
cp /usr/include/hypre/*.h "$DEST/include/hypre/"
cp "$MPI_INC/mpi.h" "$MPI_INC/mpi_portable_platform.h" "$DEST/include/"
[ -d /usr/share/openmpi ] && cp /usr/share/openmpi/help-*.txt "$DEST/share/openmpi/"

# lib/: the two libraries and what they and the plugins need, under their sonames.
SYSTEM='^(ld-linux.*|linux-vdso.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libgomp)\.so'
for f in $HYPRE_SO $MPI_SO $PLUGINS; do ldd "$f"; done | awk '/=>/ {print $1, $3}' | sort -u |
  while read -r name path; do
    echo "$name" | grep -Eq "$SYSTEM" && continue
    [ -f "$DEST/lib/$name" ] || cp -L "$path" "$DEST/lib/$name"
  done
cp -L "$HYPRE_SO" "$DEST/lib/$(basename "$HYPRE_SO")"
cp -L "$MPI_SO" "$DEST/lib/$(basename "$MPI_SO")"
for p in $PLUGINS; do cp -L "$p" "$DEST/lib/openmpi3/"; done
chmod u+w "$DEST"/lib/*.so* "$DEST"/lib/openmpi3/*.so
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
for f in "$DEST"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
# shellcheck disable=SC2016
for f in "$DEST"/lib/openmpi3/*.so; do patchelf --set-rpath '$ORIGIN/..' "$f"; done

# Every library of the closure resolves inside the folder (or is a system one).
missing=$(for f in "$DEST"/lib/*.so* "$DEST"/lib/openmpi3/*.so; do ldd "$f"; done |
  awk '/=>/ {print $1, $3}' | sort -u | grep -Ev "$SYSTEM" | grep -v " $DEST/lib/" || true)
[ -z "$missing" ] || { echo "gpu-hypre: resolved outside $DEST:" >&2; echo "$missing" >&2; exit 1; }
echo "gpu-hypre: $DEST: $(find "$DEST/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries, $(echo "$PLUGINS" | wc -l)" \
  "OpenMPI plugins, $(du -sh "$DEST" | cut -f1)"
