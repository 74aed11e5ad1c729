#!/bin/sh
# felab's tests on the GPU machine, which has no Lua, Gmsh, readline or Criterion: build
# here with `make gpu` (static Lua; GPU_BUILD=folder to build elsewhere), carry the build
# folder, and run there
#   scripts/gpu-test.sh [build folder] [log folder]
# It registers NVIDIA's OpenCL driver (so the opencl backend runs on the GPU too), then runs
#   cuda.log     tests/scripts/test_cuda.lua: cuda vs cpu vs opencl, PCG, vectors, rates;
#                test_cuda_fault.lua: raw C that faults, tried in another process: an
#                error, and cuda goes on (untried, in a child: the context lost, the cpu
#                goes on); the API fuzz with cuda among the backends;
#                test_patch.lua: strategy patch against transpose on every backend;
#                test_matrix.lua: element matrices, assembly and csr on every backend;
#                test_elemat_variants, test_elemat_tensor, test_ebe_variants, test_sell,
#                test_device_pattern: the element-matrix variants, tensor, ebe's variants,
#                SELL-C-sigma, the assembly's pattern on the device;
#                test_sumfact.lua: strategy sumfact against transpose on every backend;
#                test_model.lua, test_explain.lua: the model and A:explain on every backend
#                (last; SUMFACT=0 leaves it out)
#   scripts.log  test_krylov.lua: BiCG, BiCGStab, GMRES; test_precond, test_amg,
#                test_twoscale, test_heat: the preconditioners and time stepping
#   scripts.log  test_backends.lua and test_convergence.lua: cpu and opencl on the GPU
#   checks.log   scripts/gpu-checks.lua twice on one fresh cache (cold JIT, then cached),
#                the second time also running out of device memory
#   sanitizer.log compute-sanitizer memcheck and racecheck on test_cuda.lua, if installed
#                (its quick part: FELAB_TEST_QUICK=1), with -lineinfo in the kernels
# and prints one line per step; exits nonzero if any step failed. GPU_STEPS picks the groups
# to run (default all: "cuda scripts checks sanitizer sumfact"; the whole takes over ten minutes
# on an H200 with a cold kernel cache, test_sumfact some 200-300 s of it), e.g.
#   GPU_STEPS="cuda scripts" scripts/gpu-test.sh; GPU_STEPS="checks sanitizer sumfact" ...
BUILD=${1:-build-gpu}
LOGS=${2:-${OUT:-out/gpu}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
mkdir -p "$LOGS"
FELAB="$ROOT/$BUILD/felab"
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$ROOT/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${OCL_ICD_VENDORS:-}" ]; then
  mkdir -p /tmp/felab-icd
  echo libnvidia-opencl.so.1 > /tmp/felab-icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/felab-icd
fi
export FELAB_CACHE="${FELAB_CACHE:-$(mktemp -d /tmp/felab-cache.XXXXXX)}"
command -v nvidia-smi > /dev/null && nvidia-smi -L
fail=0

# want GROUP: whether GPU_STEPS names it
want() {
  case " ${GPU_STEPS:-cuda scripts checks sanitizer sumfact} " in *" $1 "*) return 0 ;; esac
  return 1
}

# step NAME LOG COMMAND...: run (at most STEP_TIMEOUT seconds: test_sumfact takes 300 on the
# H200 with a cold kernel cache), append to LOG, print the
# status and the time
step() {
  name=$1 log=$2
  shift 2
  start=$(date +%s)
  echo "==== $name" >> "$LOGS/$log"
  timeout "${STEP_TIMEOUT:-450}" "$@" >> "$LOGS/$log" 2>&1
  rc=$?
  [ $rc = 0 ] && s=ok || { s="FAILED (rc $rc)"; fail=1; }
  echo "  $s  $name ($(( $(date +%s) - start )) s)"
}

if want cuda; then
  step "test_cuda.lua" cuda.log "$FELAB" tests/scripts/test_cuda.lua
  step "test_cuda_fault.lua (a kernel fault: an error, the session goes on)" cuda.log \
    "$FELAB" tests/scripts/test_cuda_fault.lua
  step "api fuzz on cuda (3000 calls, backends cuda, opencl and cpu)" cuda.log env FELAB_FUZZ_CUDA=1 \
    FELAB_FUZZ_CALLS=3000 FELAB_FUZZ_SEED=7 FELAB_FUZZ_VERBOSE=0 "$FELAB" tests/fuzz/api_fuzz.lua
  step "test_patch.lua (patch = transpose on cpu, opencl, cuda)" cuda.log "$FELAB" tests/scripts/test_patch.lua
  step "test_patch_options.lua" cuda.log "$FELAB" tests/scripts/test_patch_options.lua
  step "test_matrix.lua (element matrices, assembly, csr on cpu, opencl, cuda)" cuda.log "$FELAB" \
    tests/scripts/test_matrix.lua
  for t in test_elemat_variants test_elemat_tensor test_ebe_variants test_sell test_device_pattern; do
    step "$t.lua (cpu, opencl, cuda)" cuda.log "$FELAB" tests/scripts/$t.lua
  done
  for t in test_model test_explain; do
    step "$t.lua (the model's counts and ceilings, what-if, explain; cpu, opencl, cuda)" cuda.log \
      "$FELAB" tests/scripts/$t.lua
  done
fi
if want scripts; then
  step "test_krylov.lua (BiCG, BiCGStab, GMRES)" scripts.log "$FELAB" tests/scripts/test_krylov.lua
  for t in test_precond test_amg test_amg_cycle test_twoscale test_heat; do
    step "$t.lua (preconditioners, time steps; cuda where it applies)" scripts.log "$FELAB" tests/scripts/$t.lua
  done
  step "test_backends.lua (opencl on the GPU)" scripts.log "$FELAB" tests/scripts/test_backends.lua
  step "test_convergence.lua (opencl on the GPU)" scripts.log "$FELAB" tests/scripts/test_convergence.lua
fi
if want checks; then
  CHECKS_CACHE=$(mktemp -d /tmp/felab-cache.XXXXXX) # cold: nothing compiled yet
  step "gpu-checks.lua (cold JIT)" checks.log env FELAB_CACHE="$CHECKS_CACHE" "$FELAB" \
    scripts/gpu-checks.lua
  step "gpu-checks.lua (cached JIT, out of memory)" checks.log env FELAB_CACHE="$CHECKS_CACHE" \
    "$FELAB" scripts/gpu-checks.lua oom
fi
if want sanitizer; then
  SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
  if [ -n "$SANITIZER" ]; then
    STEP_TIMEOUT=${SANITIZER_TIMEOUT:-150}
    for tool in memcheck racecheck; do
      step "compute-sanitizer --tool $tool test_cuda.lua" sanitizer.log env FELAB_TEST_QUICK=1 \
        FELAB_CUDA_OPTIONS=-lineinfo "$SANITIZER" --tool $tool \
        --error-exitcode 99 --print-limit 20 "$FELAB" tests/scripts/test_cuda.lua
    done
  else
    echo "  compute-sanitizer not found: memcheck and racecheck not run"
  fi
fi
# last: it compiles transpose's dense tables on three backends (7.7 minutes on the H100 machine)
STEP_TIMEOUT=${SUMFACT_TIMEOUT:-900}
[ "${SUMFACT:-1}" = 1 ] && want sumfact && step "test_sumfact.lua (sumfact = transpose on cpu, opencl, cuda)" cuda.log "$FELAB" \
  tests/scripts/test_sumfact.lua
[ $fail = 0 ] && echo "== all GPU steps passed" || echo "== SOME GPU STEPS FAILED"
exit $fail
