#!/bin/sh
# House rules a grep can check, run before the tests (make check-house):
#   scripts/check-house.sh [ROOT]
# The engine and the shell ask a backend for what it can do (fe_device_info's capabilities,
# backends/backend.h), never which one it is: a comparison of a backend's name with "cpu",
# "cuda" or "opencl" (strcmp, strncmp, strcasecmp, memcmp, == or !=) in a .c or .h under
# engine/ or shell/ is reported as file:line and the script exits 1. A name in a message,
# a backend asked for by name (fe_backend_get("cpu", ...)) or an option's value
# (o.backend = "cpu") is fine; backends/ may compare its own names.
# Sizes: no .c or .h file under engine/, shell/ or backends/ over 800 lines, and no function
# there over 100 (universal-ctags gives each function's first and last line); each is
# reported with its length and the script exits 1.
cd "${1:-.}" || exit 2
names='(cpu|cuda|opencl)'
# the literal as a compare function's argument: first, or after a comma and closing it (or
# followed by strncmp's length); or either side of == / !=
pattern="(str|strn|strcase|strncase|mem)cmp[[:space:]]*\\([[:space:]]*\"$names\""
pattern="$pattern|(str|strn|strcase|strncase|mem)cmp[[:space:]]*\\([^;\"]*,[[:space:]]*\"$names\"[[:space:]]*[,)]"
pattern="$pattern|[!=]=[[:space:]]*\"$names\"|\"$names\"[[:space:]]*[!=]="
found=$(grep -rnE --include='*.c' --include='*.h' "$pattern" engine shell)
if [ -n "$found" ]; then
  echo "check-house: the engine and the shell test capabilities (fe_device_info), not backend names:"
  echo "$found" | sed 's/^/  /'
  exit 1
fi
# sizes: no file of engine/, shell/ or backends/ over 800 lines, no function there over 100
# (universal-ctags gives each function's first and last line; scripts/install-deps.sh
# installs it)
dirs="engine shell backends"
long=$(find $dirs \( -name '*.c' -o -name '*.h' \) | sort | xargs wc -l | awk '$2 != "total" && $1 > 800 {print "  " $2 ": " $1 " lines"}')
if command -v ctags > /dev/null; then
  long="$long$(find $dirs \( -name '*.c' -o -name '*.h' \) | sort | xargs ctags --fields=+ne --c-kinds=f -o - 2> /dev/null |
    awk -F'\t' '{l = 0; e = 0; for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6);
      if ($i ~ /^end:/) e = substr($i, 5) } if (e - l + 1 > 100) printf "\n  %s: %s, %d lines", $2, $1, e - l + 1}')"
else
  echo "check-house: no ctags here: the functions' lengths are not checked"
fi
if [ -n "$long" ]; then
  echo "check-house: files of engine/, shell/ and backends/ stay under 800 lines and functions under 100 (split by concern, or by phase):"
  echo "$long" | sed '/^$/d'
  exit 1
fi
echo "check-house: ok (no backend name compared under engine/ or shell/; files of engine/, shell/ and backends/ <= 800 lines, functions <= 100)"
