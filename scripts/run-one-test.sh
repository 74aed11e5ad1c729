#!/bin/sh
# One Lua script test, for scripts/run-tests.sh (which may run two at once):
#   scripts/run-one-test.sh BUILD RESULTS tests/scripts/test_x.lua
# A script passed when it exits 0 having printed T.done's line ("name: N checks passed", N > 0):
# this prints "ok" with the seconds, and any parts it skipped (its "skipped: <what>" lines),
# and leaves RESULTS/test_x.lua.ok holding those parts. A script skipped when it exits 0 having
# printed a "skipped: <why>" line and no T.done line (it could check nothing here): this prints
# "skipped" with the reason and leaves RESULTS/test_x.lua.skip holding it. Anything else
# failed: FAILED with the last lines of its output, and no file. The environment (cache,
# sanitizer options) is the caller's.
BUILD=$1 RESULTS=$2 t=$3
start=$(date +%s)
# PoCL unoptimized for the tests (scripts/run-tests.sh), but for those that run opencl at size
case " ${OPENCL_OPTIMIZED:-} " in
  *" $(basename "$t") "*) [ "${FELAB_TEST_OPENCL_UNOPTIMIZED:-0}" = 1 ] && unset FELAB_OPENCL_OPTIONS ;;
esac
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
name=$(basename "$t")
skips=$(echo "$out" | sed -n 's/^skipped: //p')
checks=$(echo "$out" | sed -n 's/^.*: \([0-9][0-9]*\) checks passed$/\1/p' | tail -1)
why=""
if [ $rc != 0 ]; then
  why="exit status $rc"
elif [ -n "$checks" ] && [ "$checks" -gt 0 ]; then
  if [ -n "$skips" ]; then
    echo "  ok      $t ($(( $(date +%s) - start )) s; skipped: $(echo "$skips" | paste -sd ';' - | sed 's/;/; /g'))"
  else
    echo "  ok      $t ($(( $(date +%s) - start )) s)"
  fi
  echo "$skips" | sed '/^$/d' > "$RESULTS/$name.ok"
  exit 0
elif [ -z "$checks" ] && [ -n "$skips" ]; then
  reason=$(echo "$skips" | head -1)
  echo "  skipped $t ($reason)"
  echo "$reason" > "$RESULTS/$name.skip"
  exit 0
elif [ -n "$checks" ]; then
  why="it made no checks"
else
  why="it ended without T.done's line or a \"skipped:\" line"
fi
echo "  FAILED  $t ($why)
$(echo "$out" | tail -20 | sed 's/^/    /')"
exit 0
