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
#   bin/mpirun      OpenMPI's launcher (orterun) behind a script that points it, and the ranks
#                   it starts, at this folder's libraries and plugins (issue 48: felab on
#                   several ranks there); lib/openmpi3 and lib/pmix then also hold the plugins
#                   `mpirun -np 2` of an MPI program opens (found the same way)
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
# and the probe on two ranks under mpirun: what the launcher and its ranks open (but the
# components of fabrics the GPU machine has not: psm, psm2, ofi)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^psm,psm2,ofi LD_DEBUG=files \
  mpirun -np 2 --oversubscribe "$TMP/probe" 2>> "$TMP/loads" > /dev/null
PLUGINS=$(sed -n 's|.*file=\([^ ]*/openmpi3/mca_[a-z0-9_]*\.so\).*|\1|p' "$TMP/loads" |
  grep -Ev 'mca_(mtl|pml_cm)' | sort -u)
PMIX_PLUGINS=$(sed -n 's|.*file=\([^ ]*/pmix_mca_[a-z0-9_]*\.so\).*|\1|p' "$TMP/loads" | sort -u)
ORTERUN=$(readlink -f "$(command -v mpirun)")
[ -n "$PLUGINS" ] || { echo "gpu-hypre: the MPI probe opened no OpenMPI plugin" >&2; exit 1; }
HYPRE_SO=$(ldd "$TMP/probe" | awk '/libHYPRE/ {print $3}')
MPI_SO=$(ldd "$TMP/probe" | awk '/libmpi\.so/ {print $3}')

rm -rf "$DEST"
mkdir -p "$DEST/include/hypre" "$DEST/lib/openmpi3" "$DEST/lib/pmix" "$DEST/share/openmpi" \
  "$DEST/bin"
cp /usr/include/hypre/*.h "$DEST/include/hypre/"
cp "$MPI_INC/mpi.h" "$MPI_INC/mpi_portable_platform.h" "$DEST/include/"
[ -d /usr/share/openmpi ] && cp /usr/share/openmpi/help-*.txt "$DEST/share/openmpi/"

# lib/: the two libraries and what they and the plugins need, under their sonames.
SYSTEM='^(ld-linux.*|linux-vdso.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libgomp)\.so'
for f in $HYPRE_SO $MPI_SO $PLUGINS $PMIX_PLUGINS $ORTERUN; do ldd "$f"; done | awk '/=>/ {print $1, $3}' | sort -u |
  while read -r name path; do
    echo "$name" | grep -Eq "$SYSTEM" && continue
    [ -f "$DEST/lib/$name" ] || cp -L "$path" "$DEST/lib/$name"
  done
cp -L "$HYPRE_SO" "$DEST/lib/$(basename "$HYPRE_SO")"
cp -L "$MPI_SO" "$DEST/lib/$(basename "$MPI_SO")"
for p in $PLUGINS; do cp -L "$p" "$DEST/lib/openmpi3/"; done
for p in $PMIX_PLUGINS; do cp -L "$p" "$DEST/lib/pmix/"; done
cp -L "$ORTERUN" "$DEST/bin/orterun"
chmod u+w "$DEST"/lib/*.so* "$DEST"/lib/openmpi3/*.so "$DEST"/bin/orterun
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
for f in "$DEST"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
# shellcheck disable=SC2016
for f in "$DEST"/lib/openmpi3/*.so "$DEST"/lib/pmix/*.so "$DEST"/bin/orterun; do
  patchelf --set-rpath '$ORIGIN/..:$ORIGIN/../lib' "$f"
done
# mpirun: the launcher with OpenMPI's and PMIx's paths set to the folder (the ranks inherit
# them), shared memory between the ranks, as root where the machine runs so
cat > "$DEST/bin/mpirun" << 'EOF'
#!/bin/sh
D=$(cd "$(dirname "$0")/.." && pwd)
export OPAL_PREFIX="$D" OPAL_PKGDATADIR="$D/share/openmpi"
export OMPI_MCA_mca_base_component_path="$D/lib/openmpi3"
export PMIX_MCA_mca_base_component_path="$D/lib/pmix" PMIX_INSTALL_PREFIX="$D"
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
export OMPI_MCA_mtl="${OMPI_MCA_mtl:-^psm,psm2,ofi}"
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$D/bin/orterun" "$@"
EOF
chmod +x "$DEST/bin/mpirun"

# Every library of the closure resolves inside the folder (or is a system one).
missing=$(for f in "$DEST"/lib/*.so* "$DEST"/lib/openmpi3/*.so "$DEST"/lib/pmix/*.so \
  "$DEST"/bin/orterun; do ldd "$f"; done |
  awk '/=>/ {print $1, $3}' | sort -u | grep -Ev "$SYSTEM" | grep -v " $DEST/" || true)
[ -z "$missing" ] || { echo "gpu-hypre: resolved outside $DEST:" >&2; echo "$missing" >&2; exit 1; }
echo "gpu-hypre: $DEST: $(find "$DEST/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries, $(echo "$PLUGINS" | wc -l)" \
  "OpenMPI plugins, $(du -sh "$DEST" | cut -f1)"
