#!/bin/sh
# Run every felab test against one build folder: Criterion unit tests, Lua script tests
# through the shell, and the prompt tests. Exits nonzero if any fails.
# FELAB_ASAN=1: the build is sanitized (leak checking on, with tests/lsan.supp).
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
# FELAB_TEST_CACHE: another build's kernel cache to read (the sanitized pass after the plain
# one: the kernels are the same), else this build's own
export FELAB_CACHE="${FELAB_TEST_CACHE:-$ROOT/$BUILD/cache}"
# two test processes of two OpenMP threads on two cores: do not spin while waiting
export OMP_WAIT_POLICY=passive
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
echo "== unit tests ($BUILD)"
"$BUILD/unit-tests" --jobs 2 || fail=1
echo "== script tests ($BUILD)"
for t in tests/scripts/test_*.lua; do
  start=$(date +%s)
  out=$("$BUILD/felab" "$t" 2>&1)
  rc=$?
  # LeakSanitizer's tracer itself sometimes crashes at exit (signal 11 while it stops the
  # threads, seen under ASan after every check of a script had passed): that is the tool,
  # not a finding, so such a run is made once more and must then pass
  if [ $rc != 0 ] && echo "$out" | grep -q "LeakSanitizer has encountered a fatal error"; then
    echo "  (LeakSanitizer's tracer crashed in $t: running it again)"
    out=$("$BUILD/felab" "$t" 2>&1)
    rc=$?
  fi
  if [ $rc = 0 ]; then
    echo "  ok      $t ($(( $(date +%s) - start )) s)"
  else
    echo "  FAILED  $t"
    echo "$out" | tail -20 | sed 's/^/    /'
    fail=1
  fi
done
echo "== prompt tests ($BUILD)"
sh tests/prompt/run.sh "$BUILD/felab" || fail=1
[ $fail = 0 ] && echo "== all tests passed ($BUILD)" || echo "== SOME TESTS FAILED ($BUILD)"
exit $fail
