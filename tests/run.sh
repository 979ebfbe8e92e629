#!/bin/sh
# The k3 test ladder. Runs, in order:
#   1. every unit test program  $K3_BUILD/tests/test_*   (kernels, parsers)
#   2. every gate script        tests/gates/NN-*.sh      (engine vs reference,
#      bad input, mutation checks, ...), sorted by name so cheap gates come first.
# A step passes when it exits 0. The last line is "N passed, N failed".
# K3_ONLY=pattern runs only the steps whose name contains pattern;
# K3_EXCLUDE="pat1 pat2" leaves out the steps whose name contains any of them
# (CI's sanitizer pass leaves out gates that run no engine code of its build).
#
# Two ladders (docs/TESTING.md): K3_LADDER=test (`make test`, the default
# here) leaves out every gate whose file holds a line `# ladder: check`
# (the long runs: release-shaped, valgrind, mutants, fault sweep, ...);
# K3_LADDER=check (`make check`, CI) runs every step. A gate named by
# K3_ONLY runs whatever its tag: asking for it is asking for it. The end
# prints the elapsed time and the steps left to `make check`.
set -u
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
K3_MODELS="${K3_MODELS:-$K3_BUILD/models}"
K3_LADDER="${K3_LADDER:-test}"
case "$K3_LADDER" in test | check) ;; *)
    echo "run.sh: K3_LADDER=$K3_LADDER: expected test or check" >&2
    exit 2
    ;;
esac
export K3_BIN K3_BUILD PYTHON K3_MODELS K3_LADDER
mkdir -p "$K3_MODELS"
t_begin=$(date +%s)

pass=0
fail=0
failed=""
left=""
# check_only FILE: the gate is tagged for `make check` alone.
check_only() {
    grep -Eq '^# ladder: check([[:space:]]|$)' "$1"
}
run_step() {
    name=$1
    shift
    case "$name" in *"${K3_ONLY:-}"*) ;; *) return ;; esac
    for x in ${K3_EXCLUDE:-}; do
        case "$name" in *"$x"*) return ;; esac
    done
    start=$(date +%s)
    if "$@" >"$K3_BUILD/step.log" 2>&1; then
        pass=$((pass + 1))
        echo "PASS $name ($(($(date +%s) - start)) s)"
    else
        fail=$((fail + 1))
        failed="$failed $name"
        echo "FAIL $name ($(($(date +%s) - start)) s)"
        sed 's/^/    /' "$K3_BUILD/step.log" | tail -n 40
    fi
}

for t in "$K3_BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d) continue ;; esac
    run_step "unit/$(basename "$t")" "$t"
done
for g in tests/gates/[0-9]*.sh; do
    [ -f "$g" ] || continue
    if [ "$K3_LADDER" = test ] && [ -z "${K3_ONLY:-}" ] && check_only "$g"; then
        left="$left gate/$(basename "$g" .sh)"
        continue
    fi
    run_step "gate/$(basename "$g" .sh)" sh "$g"
done

[ -n "$failed" ] && echo "failed:$failed"
el=$(($(date +%s) - t_begin))
echo "ladder '$K3_LADDER': $((el / 60)) min $((el % 60)) s"
[ -z "$left" ] || echo "left to make check:$left"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
