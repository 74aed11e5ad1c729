#!/bin/sh
# Run every felab test against one build folder: Criterion unit tests, Lua script tests
# through the shell, and the prompt tests. Exits nonzero if any fails. A script test passes,
# is skipped (it printed "skipped: <why>" and checked nothing: no device, no Gmsh SDK here) or
# fails (scripts/run-one-test.sh); the last line counts passes and skips apart.
# FELAB_ASAN=1: the build is sanitized (leak checking on, with tests/lsan.supp).
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
# FELAB_TEST_CACHE: another build's kernel cache to read (the sanitized pass after the plain
# one: the kernels are the same), else this build's own
export FELAB_CACHE="${FELAB_TEST_CACHE:-$ROOT/$BUILD/cache}"
# two test processes of two OpenMP threads on two cores: do not spin while waiting
export OMP_WAIT_POLICY=passive
# OpenCL on PoCL (this machine's stand-in for a GPU's driver) builds without optimizing
# (-cl-opt-disable): the tests check the OpenCL source, the host side and the results, none
# of which PoCL's optimizer changes, and no user's GPU runs PoCL's code; its optimizer was
# most of a cold run's time there (sumfact Q2 and Q3 on opencl: 39 s built, 17 s unoptimized).
# Not for the tests in OPENCL_OPTIMIZED, whose time is running opencl on a large mesh
# (test_amg_gmsh's million dofs: 132 s optimized, 468 s not; scripts/run-one-test.sh).
# FELAB_OPENCL_OPTIONS, when set, is used as given.
export OPENCL_OPTIMIZED="test_amg_gmsh.lua"
if [ -z "${FELAB_OPENCL_OPTIONS+set}" ] && command -v clinfo > /dev/null &&
   clinfo -l 2> /dev/null | grep -q "Portable Computing Language"; then
  export FELAB_OPENCL_OPTIONS=-cl-opt-disable FELAB_TEST_OPENCL_UNOPTIMIZED=1
fi
if [ "${FELAB_ASAN:-0}" = 1 ]; then
  # intercept_tls_get_addr=0: no tracking of the dynamic thread-local storage of the modules
  # dlopen'ed (the kernels' objects, PoCL's), which LeakSanitizer's tracer then misread and
  # crashed on at exit (seen: "DTLS 10 at 0x000000000822-...", every run of one sequence of
  # test_cache.lua's, moved by nothing but the heap's layout). Fewer roots could only add
  # reports, never hide a leak.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0:${ASAN_OPTIONS:-}"
  export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
fail=0
echo "== the house ($BUILD)"
sh scripts/check-house.sh "$ROOT" || fail=1
# the cpu's and opencl's calibrations, in double and single, measured now on a quiet machine
# (stored in the cache, then read by every test, the unit tests first: two at a time, each
# measured again, unstored, some 40 times in all) rather than inside a test beside another,
# where felab would not store them (engine/perf/calibrate.c) and each test would measure again;
# with the default threads and with one (a calibration is a thread count's: the ranks of
# test_ranks and a few children run one thread each)
for threads in "" 1; do
  env ${threads:+OMP_NUM_THREADS=$threads} "$BUILD/felab" -e 'local V = fe.space(mesh.box{cells = 2}, "P1")
local A = fe.operator(V, physics.poisson{kappa = 1, source = 1})
for _, b in ipairs{"cpu", "opencl"} do
  for _, p in ipairs{"double", "single"} do
    pcall(A.apply, A, V:interpolate(1):to(b, p), {backend = b, precision = p})
  end
end' > /dev/null 2>&1
done
# FELAB_TEST_BESIDE: a command (make test's: the sanitized build) run meanwhile at the lowest
# priority, from after the calibrations (which must run on a quiet machine) to before the
# SERIAL tests (which time strategies): the two test lanes leave a core idle at times (a
# child waited for, the Lua between compiles, a lane's tail), and the build takes that time
# alone; its output in a log, shown if it fails
beside_pid=""
if [ -n "${FELAB_TEST_BESIDE:-}" ]; then
  BESIDE_LOG=$(mktemp "${TMPDIR:-/tmp}/felab-beside.XXXXXX")
  idle="nice -n 19"
  chrt -i 0 true 2> /dev/null && idle="chrt -i 0 nice -n 19"
  $idle sh -c "$FELAB_TEST_BESIDE" > "$BESIDE_LOG" 2>&1 &
  beside_pid=$!
fi
echo "== unit tests ($BUILD)"
# sanitized, four at a time: each test a process forked from a large one and checked for leaks
# at its exit, which waits more than it computes (its unit tests in 32 s at two, 27 s at four)
jobs=2
[ "${FELAB_ASAN:-0}" = 1 ] && jobs=4
"$BUILD/unit-tests" --jobs $jobs || fail=1
echo "== script tests ($BUILD)"
# Two at a time (most of a script test's time is the C compiler, one core each), the longest
# first so that the two lanes end together; the tests that time strategies against each
# other (SERIAL) then run alone, on a quiet machine. LONGEST: the tests over about 15 s in
# either pass of a clean clone's make test, longest first (a long test left for the end, as
# test_ranks was, runs alone on one lane while the other waits)
SERIAL="test_autotune.lua"
LONGEST="test_sumfact.lua test_amg_gmsh.lua test_patch.lua test_strategies_run.lua test_lessons.lua
test_ranks.lua test_fold.lua test_convergence_high.lua test_papers.lua test_cache.lua
test_elemat_variants.lua test_matrix.lua test_amg_cycle.lua test_api_fuzz.lua test_heat.lua
test_backends.lua test_calibration_load.lua test_assembly.lua test_mesh_order.lua
test_patch_options.lua"
RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/felab-tests.XXXXXX")
trap 'rm -rf "$RESULTS"' EXIT
# The prompt tests meanwhile, their output kept for after: they mostly wait (pipes, a pty,
# Ctrl-C's pauses; some 7 s of CPU in 11-25 s), which the lanes' compiles fill. One OpenMP
# thread: a felab of two beside the two lanes waits at every barrier for a thread the lanes
# took (the 3000 GMRES steps of perf_progress_false_hides_the_line passed its 15 s wait);
# they check the prompt, not the threads.
OMP_NUM_THREADS=1 sh tests/prompt/run.sh "$BUILD/felab" > "$RESULTS/prompt.log" 2>&1 &
prompt_pid=$!
{
  for t in $LONGEST; do [ -f "tests/scripts/$t" ] && echo "tests/scripts/$t"; done
  for t in tests/scripts/test_*.lua; do
    b=$(basename "$t")
    case " $(echo $LONGEST $SERIAL) " in *" $b "*) ;; *) echo "$t" ;; esac
  done
} | xargs -P 2 -n 1 sh scripts/run-one-test.sh "$BUILD" "$RESULTS"
wait "$prompt_pid"
prompt_rc=$?
if [ -n "$beside_pid" ]; then
  if ! wait "$beside_pid"; then
    echo "== FAILED beside the tests: $FELAB_TEST_BESIDE"
    tail -40 "$BESIDE_LOG"
    fail=1
  fi
  rm -f "$BESIDE_LOG"
fi
for t in $SERIAL; do sh scripts/run-one-test.sh "$BUILD" "$RESULTS" "tests/scripts/$t"; done
# passed (RESULTS/x.ok, holding the parts it skipped), skipped (x.skip) or failed (neither)
passed=0 skipped=0 failed=0 partial=""
for t in tests/scripts/test_*.lua; do
  b=$(basename "$t")
  if [ -f "$RESULTS/$b.ok" ]; then
    passed=$((passed + 1))
    [ -s "$RESULTS/$b.ok" ] && partial="$partial$(sed "s|^|  $b: |" "$RESULTS/$b.ok")
"
  elif [ -f "$RESULTS/$b.skip" ]; then
    skipped=$((skipped + 1))
  else
    echo "  FAILED  $t (see above)"
    failed=$((failed + 1))
    fail=1
  fi
done
echo "== prompt tests ($BUILD), run beside the script tests"
cat "$RESULTS/prompt.log"
[ "$prompt_rc" = 0 ] || fail=1
[ -n "$partial" ] && printf "== parts of passed scripts skipped here:\n%s" "$partial"
counts="$passed passed, $skipped skipped"
[ $failed -gt 0 ] && counts="$counts, $failed failed"
[ $fail = 0 ] && echo "== all tests passed ($BUILD): $counts" || echo "== SOME TESTS FAILED ($BUILD): $counts"
exit $fail
