#!/bin/sh
# One Lua script test, for scripts/run-tests.sh (which may run two at once):
#   scripts/run-one-test.sh BUILD RESULTS tests/scripts/test_x.lua
# prints "ok" with the seconds, or FAILED with the last lines of its output, and leaves
# RESULTS/test_x.lua.ok when it passed. The environment (cache, sanitizer options) is the
# caller's.
BUILD=$1 RESULTS=$2 t=$3
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
  : > "$RESULTS/$(basename "$t").ok"
else
  echo "  FAILED  $t
$(echo "$out" | tail -20 | sed 's/^/    /')"
fi
exit 0
