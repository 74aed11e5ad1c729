#!/usr/bin/env bash
# The prompt's tests: drive felab through its standard input (a pipe, so no prompts are
# printed) and through its command line, and check what it prints.
#
#   tests/prompt/run.sh build/felab
#
# Piped sessions live in files next to this script:
#   NAME.in          the session, fed to felab's stdin
#   NAME.out         stdout must be exactly this (optional)
#   NAME.out-has     each line must appear in stdout, as a fixed string (optional)
#   NAME.out-match   each line is an extended regex that must match a line of stdout (optional)
#   NAME.err-has     each line must appear in stderr, as a fixed string; without this file
#                    stderr must be empty
#   NAME.status      the expected exit status (default 0)
# The command-line options, scripts and Ctrl-C are tested by the functions below.
# Every felab run is bounded by `timeout 20`; one line per test: "NAME: ok" or
# "NAME: FAILED (what differed)". Exits 1 if any test failed.

set -u

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 FELAB_BINARY" >&2
  exit 2
fi
FELAB="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "$0")" && pwd)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/felab-prompt.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
export HOME="$TMP/home" # no history file of the user's is read or written
mkdir -p "$HOME"
unset FELAB_TRACEBACK FELAB_BACKEND

failures=0
total=0

# Record a test result: pass NAME, or fail NAME REASON.
pass() {
  total=$((total + 1))
  echo "$1: ok"
}
fail() {
  total=$((total + 1))
  failures=$((failures + 1))
  echo "$1: FAILED ($2)"
}

# Run felab with the given arguments in directory $CWD (default: here), stdin from
# $STDIN (default /dev/null); sets $out, $err (file names) and $status.
run_felab() {
  out="$TMP/out" err="$TMP/err"
  (cd "${CWD:-.}" && exec timeout 20 "$FELAB" "$@") < "${STDIN:-/dev/null}" > "$out" 2> "$err"
  status=$?
}

# Print the first line of $2 (a file of fixed strings) not found in file $1; empty if all are.
missing_string() {
  while IFS= read -r want || [ -n "$want" ]; do
    [ -z "$want" ] && continue
    grep -qF -- "$want" "$1" || { printf '%s' "$want"; return; }
  done < "$2"
}

# The same for a file of extended regexes.
missing_match() {
  while IFS= read -r want || [ -n "$want" ]; do
    [ -z "$want" ] && continue
    grep -qE -- "$want" "$1" || { printf '%s' "$want"; return; }
  done < "$2"
}

# Print why the run does not match expectations (empty when it does):
# check_run EXPECTED_STATUS; the rest as "stdout-has TEXT", "stderr-has TEXT", "stdout-is TEXT",
# "stderr-empty".
check_run() {
  local want_status="$1"
  shift
  if [ "$status" -eq 124 ]; then echo "timed out after 20 s"; return; fi
  if [ "$status" -ne "$want_status" ]; then
    echo "exit status $status, expected $want_status; stderr: $(head -c 300 "$err")"
    return
  fi
  while [ $# -gt 0 ]; do
    case "$1" in
      stdout-has) grep -qF -- "$2" "$out" || { echo "stdout lacks '$2': $(head -c 300 "$out")"; return; }; shift 2 ;;
      stderr-has) grep -qF -- "$2" "$err" || { echo "stderr lacks '$2': $(head -c 300 "$err")"; return; }; shift 2 ;;
      stdout-is)
        [ "$(cat "$out")" = "$2" ] || { echo "stdout is '$(head -c 300 "$out")', expected '$2'"; return; }
        shift 2 ;;
      stderr-empty) [ -s "$err" ] && { echo "unexpected stderr: $(head -c 300 "$err")"; return; }; shift ;;
      *) echo "check_run: unknown check $1"; return ;;
    esac
  done
}

# Report one test from check_run's verdict.
verdict() {
  if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi
}

# ---- piped sessions: NAME.in and its expectations ----
for input in "$HERE"/*.in; do
  name="$(basename "$input" .in)"
  base="${input%.in}"
  STDIN="$input" run_felab
  want_status=0
  [ -f "$base.status" ] && want_status="$(cat "$base.status")"
  why=""
  if [ "$status" -eq 124 ]; then
    why="timed out after 20 s"
  elif [ "$status" -ne "$want_status" ]; then
    why="exit status $status, expected $want_status; stderr: $(head -c 300 "$err")"
  elif [ -f "$base.out" ] && ! diff -u "$base.out" "$out" > "$TMP/diff"; then
    why="stdout differs: $(tr '\n' '|' < "$TMP/diff" | head -c 400)"
  elif [ -f "$base.out-has" ] && [ -n "$(missing_string "$out" "$base.out-has")" ]; then
    why="stdout lacks '$(missing_string "$out" "$base.out-has")'"
  elif [ -f "$base.out-match" ] && [ -n "$(missing_match "$out" "$base.out-match")" ]; then
    why="no stdout line matches '$(missing_match "$out" "$base.out-match")'"
  elif [ -f "$base.err-has" ] && [ -n "$(missing_string "$err" "$base.err-has")" ]; then
    why="stderr lacks '$(missing_string "$err" "$base.err-has")': $(head -c 300 "$err")"
  elif [ ! -f "$base.err-has" ] && [ -s "$err" ]; then
    why="unexpected stderr: $(head -c 300 "$err")"
  fi
  verdict "$name" "$why"
done

# ---- stdout and stderr keep their order in one file ----
printf 'print(1)\nerror("two")\ndo io.write("3\\n") end\nerror("four")\nprint(5)\n' > "$TMP/order.in"
timeout 20 "$FELAB" < "$TMP/order.in" > "$TMP/both" 2>&1
got="$(tr '\n' '|' < "$TMP/both")"
want="1|stdin:1: two|3|stdin:1: four|5|"
if [ "$got" = "$want" ]; then pass "stdout_and_stderr_keep_their_order"
else fail "stdout_and_stderr_keep_their_order" "got '$got', expected '$want'"; fi

# ---- -e ----
run_felab -e 'print(1+2)'
verdict "dash_e_runs_code" "$(check_run 0 stdout-is 3 stderr-empty)"
run_felab -e 'x = 2' -e 'print(x * 3)'
verdict "dash_e_repeats_in_order" "$(check_run 0 stdout-is 6)"
run_felab -e 'error("from e")'
verdict "dash_e_error_exits_1" "$(check_run 1 stderr-has '(command line):1: from e')"

# ---- scripts ----
cat > "$TMP/args.lua" <<'EOF'
print(arg[0], arg[1], arg[2], #arg, select("#", ...), ...)
EOF
cat > "$TMP/script.lua" <<'EOF'
local x = 1
print("line two runs")
error("line three fails")
print("never")
EOF
CWD="$TMP" run_felab args.lua a b
verdict "script_sees_its_arguments" "$(check_run 0 stdout-is "$(printf 'args.lua\ta\tb\t2\t2\ta\tb')")"
CWD="$TMP" run_felab script.lua
verdict "script_error_exits_1_with_position" \
  "$(check_run 1 stdout-is 'line two runs' stderr-has 'script.lua:3: line three fails')"
run_felab "$TMP/no-such-script.lua"
verdict "missing_script_exits_1" "$(check_run 1 stderr-has 'cannot open')"
printf 'print("from stdin", ...)\n' > "$TMP/dash.in"
STDIN="$TMP/dash.in" run_felab - q
verdict "dash_runs_stdin_as_a_script" "$(check_run 0 stdout-is "$(printf 'from stdin\tq')")"
printf 'v = 42\n' > "$TMP/v.lua"
printf 'v + 1\n' > "$TMP/v.in"
STDIN="$TMP/v.in" run_felab -i "$TMP/v.lua"
verdict "dash_i_stays_at_the_prompt" "$(check_run 0 stdout-is 43)"

# ---- options ----
run_felab --version
verdict "version_exits_0" "$(check_run 0 stdout-has 'felab 0.1.0' stdout-has 'Lua 5.4' stdout-has 'readline')"
run_felab --help
verdict "help_option_exits_0" "$(check_run 0 stdout-has 'usage: felab' stdout-has '--backend')"
run_felab --no-such-option
verdict "unknown_option_exits_2" "$(check_run 2 stderr-has 'usage: felab')"
run_felab --backend nonsense
verdict "unknown_backend_exits_2" \
  "$(check_run 2 stderr-has 'nonsense' stderr-has 'cpu' stderr-has 'opencl' stderr-has 'cuda')"
run_felab --backend cpu --precision single -e 'print("ok")'
verdict "backend_and_precision_options" "$(check_run 0 stdout-is ok)"
run_felab --precision quadruple
verdict "unknown_precision_exits_2" "$(check_run 2 stderr-has 'quadruple')"
run_felab -e
verdict "missing_option_argument_exits_2" "$(check_run 2 stderr-has 'needs an argument')"

# ---- Ctrl-C ----
# felab reads a pipe fed by a writer that stops after an endless loop and waits; once felab
# prints "looping" it gets SIGINT twice, then the writer sends the next lines. felab must
# report "interrupted", survive the second Ctrl-C, keep x and run what follows.
wait_for() { # wait_for TEST-COMMAND...: up to 15 s
  local i=0
  until "$@"; do
    i=$((i + 1))
    [ "$i" -ge 150 ] && return 1
    sleep 0.1
  done
}
ctrl_c_test() {
  local d="$TMP/ctrlc"
  mkdir -p "$d"
  {
    printf 'x = 7\nprint("looping")\nwhile true do end\n'
    wait_for test -e "$d/sent"
    printf 'print("after", x)\nfor i = 1, 3 do end\nprint("done")\n'
  } | timeout 20 sh -c 'echo $$ > "$1"; exec "$2"' sh "$d/pid" "$FELAB" > "$d/out" 2> "$d/err" &
  local pipeline=$!
  if ! wait_for grep -q looping "$d/out"; then
    touch "$d/sent"
    wait "$pipeline"
    fail "ctrl_c_interrupts_a_lua_loop" "felab never started the loop: $(head -c 300 "$d/err")"
    return
  fi
  sleep 0.5
  local pid i
  pid="$(cat "$d/pid")"
  kill -INT "$pid"
  kill -INT "$pid" 2> /dev/null # a second Ctrl-C right away must not kill it
  for i in 1 2 3 4 5 6 7 8 9 10; do # on a slow machine the loop may have started late
    sleep 0.3
    grep -q interrupted "$d/err" && break
    kill -INT "$pid" 2> /dev/null
  done
  touch "$d/sent"
  wait "$pipeline"
  status=$?
  out="$d/out" err="$d/err"
  verdict "ctrl_c_interrupts_a_lua_loop" \
    "$(check_run 1 stderr-has 'stdin:1: interrupted' stdout-is "$(printf 'looping\nafter\t7\ndone')")"
}
ctrl_c_test

# ---- the live progress line of long calls ----
# At a terminal (a pty, driven by pty_session.py) a long call draws one line in place on
# stderr; FELAB_PROGRESS_AFTER=0 shows it at once. After the line's last drawing it must be
# erased (\r ESC[K) before anything else is printed.
PTY="$HERE/pty_session.py"
SOLVE_SETUP='A = fe.operator(fe.space(mesh.box{cells = {6, 6, 6}}, "P1"), physics.poisson{source = 1}, {dirichlet = {"all"}})'
ENDLESS='solve.gmres(A, {pc = "none", rtol = 0, atol = 0, maxit = 1e9, restart = 2})' # stalls at rounding
SHORT='x, info = solve.gmres(A, {pc = "none", rtol = 0, atol = 0, maxit = 3000, restart = 2}); print("short", info.iterations)'

# Print why transcript $1 does not show a line drawn ($3: a regex, default a solver's) and
# then erased before the last occurrence of text $2; empty when it does.
check_erased_before() {
  python3 -c '
import re, sys
out, before = open(sys.argv[1], "rb").read(), sys.argv[2].encode()
line = (sys.argv[3] if len(sys.argv) > 3 else r"\|r\| ").encode()
at = out.rfind(before)
drawn = [m.end() for m in re.finditer(rb"\r[^\r\n]*" + line + rb"[^\r\n]*\x1b\[K", out[:at])]
if at < 0:
    print("no %r in the transcript" % before)
elif not drawn:
    print("no progress line before %r" % before)
elif not re.search(rb"\r\x1b\[K", out[drawn[-1]:at]):
    print("the progress line was not erased before %r" % before)
' "$@"
}

# Run pty_session.py in $TMP with FELAB_PROGRESS_AFTER=0: transcript $1, then the steps;
# prints why it failed (empty when every step passed).
pty_run() {
  local tr="$1"
  shift
  (cd "$TMP" && FELAB_PROGRESS_AFTER=0 timeout 20 python3 "$PTY" "$tr" "$FELAB" "$@" 2>&1) ||
    echo "$(tail -c 300 "$tr" | cat -v)"
}

progress_ctrl_c_test() {
  local tr="$TMP/progress.tr" why
  why="$(pty_run "$tr" 'send:x = 7' "send:$SOLVE_SETUP" "send:$ENDLESS" \
    'expect:gmres [0-9]+/1000000000  \|r\| ' 'sleep:0.4' 'ctrl-c' 'expect:stdin:1: interrupted' \
    'send:print("after", x)' 'expect:after\s+7' 'expect:felab> ' 'eof')"
  [ -z "$why" ] && why="$(check_erased_before "$tr" "stdin:1: interrupted")"
  verdict "progress_line_shows_and_ctrl_c_ends_it" "$why"
}
progress_ctrl_c_test

# Tab completes a global's field with '(' after a function, a table's name with '.' after
# it, a method after ':'; no __index function runs while completing (shell/complete.c).
completion_test() {
  local tr="$TMP/complete.tr" why
  why="$(pty_run "$tr" 'type:mesh.bo\t' 'expect:mesh\.box\(' 'send:{cells = 1}).ncells' \
    'send:print("n", mesh.box{cells = 1}.ncells)' 'expect:n\s+6' 'type:phy\t' 'expect:physics\.' \
    'send:poisson' 'send:V = fe.space(mesh.box{cells = 1}, "P1")' 'type:V:interp\t' \
    'expect:V:interpolate\(' 'send:1):max()' 'expect:felab> ' 'eof')"
  verdict "tab_completes_fields_tables_and_methods" "$why"
}
completion_test

# At a terminal lesson() waits for Enter between steps and stops on q, back at the prompt;
# Ctrl-C at its pause ends the lesson at once (not at the next Enter).
lesson_pause_test() {
  local tr="$TMP/lesson.tr" why
  why="$(pty_run "$tr" 'send:e = lesson(1, {quick = true, out = "lesson-plots"})' 'expect:\[Enter: the next step, q: stop here\]' \
    'send:' 'expect:step 2 of 6' 'expect:\[Enter: the next step' 'send:q' \
    'expect:stopped; lesson\(1\) starts again' 'send:print("kept", e.V.ndofs)' 'expect:kept\s+125' \
    'send:lesson(1, {quick = true, out = "lesson-plots"})' 'expect:\[Enter: the next step' 'ctrl-c' \
    'expect:lesson.lua:[0-9]+: interrupted' 'send:print("after", 7)' 'expect:after\s+7' \
    'expect:felab> ' 'eof')"
  verdict "lesson_pauses_at_a_terminal_stops_on_q_and_ctrl_c" "$why"
}
lesson_pause_test

progress_switch_test() {
  local tr="$TMP/switch.tr" why
  why="$(pty_run "$tr" "send:$SOLVE_SETUP" 'send:print("switch", perf.progress(false))' \
    'expect:switch\s+false' "send:$SHORT" 'expect:short\s+3000' \
    'send:print("switch", perf.progress(true))' 'expect:switch\s+true' "send:$SHORT" \
    'expect:short\s+3000' 'expect:felab> ' 'eof')"
  [ -z "$why" ] && why="$(python3 -c '
import sys
t = open(sys.argv[1], "rb").read()
off = t.find(b"switch\tfalse")
on = t.find(b"switch\ttrue")
if t.count(b"|r| ", off, on):
    print("a progress line while perf.progress(false)")
elif not t.count(b"|r| ", on):
    print("no progress line after perf.progress(true)")
' "$tr")"
  [ -z "$why" ] && why="$(check_erased_before "$tr" "$(printf 'short\t3000')")"
  verdict "perf_progress_false_hides_the_line" "$why"
}
progress_switch_test

progress_gmsh_test() {
  local tr="$TMP/gmsh.tr" why
  if ! "$FELAB" --version | grep -q 'Gmsh yes'; then
    pass "gmsh_meshing_shows_its_phase (skipped: no Gmsh)"
    return
  fi
  why="$(pty_run "$tr" \
    "send:m = mesh.load('$HERE/../../meshes/sphere.geo', {size = 0.07}); print('cells', m.ncells)" \
    'expect:gmsh meshing 3D' 'expect:cells\s+[0-9]+' 'expect:felab> ' 'eof')"
  [ -z "$why" ] && why="$(check_erased_before "$tr" "$(printf 'cells\t')" "gmsh ")"
  verdict "gmsh_meshing_shows_its_phase" "$why"
}
progress_gmsh_test

# Building shows its line too: the mesh, the space's dof map and an operator's device data
# (its phases, then getting its kernel), each call's line erased before its result prints.
# A call each, a pause between: the line is redrawn at most every 0.15 s.
progress_setup_test() {
  local tr="$TMP/setup.tr" why
  why="$(pty_run "$tr" \
    "send:m = mesh.box{cells = 12, cell = 'tet'}; print('mesh', m.ncells)" 'expect:mesh\.box ' \
    'expect:mesh\s+[0-9]+' 'sleep:0.3' "send:V = fe.space(m, 'P2'); print('space', V.ndofs)" \
    'expect:fe\.space the dof map' 'expect:space\s+[0-9]+' 'sleep:0.3' \
    "send:A = fe.operator(V, physics.poisson{}, {dirichlet = 'all'}); y = A:apply(V:interpolate(1), {strategy = 'transpose', block = 7}); print('built', y:norm() > 0)" \
    'expect:setting up transpose' 'expect:built\s+true' 'expect:felab> ' 'eof')"
  [ -z "$why" ] && why="$(check_erased_before "$tr" "$(printf 'built\t')" "setting up")"
  verdict "setup_shows_its_progress" "$why"
}
progress_setup_test

# A script run (not a terminal) never holds the line, even with FELAB_PROGRESS_AFTER=0.
printf '%s\n%s\n' "$SOLVE_SETUP" "$SHORT" > "$TMP/quiet.lua"
CWD="$TMP" FELAB_PROGRESS_AFTER=0 run_felab quiet.lua
why="$(check_run 0 stdout-is "$(printf 'short\t3000')" stderr-empty)"
[ -z "$why" ] && grep -q "$(printf '\r')" "$out" && why="a carriage return in stdout"
verdict "script_output_has_no_progress_line" "$why"

echo "prompt tests: $((total - failures)) of $total passed"
[ "$failures" -eq 0 ]
