#!/bin/sh
# run.sh FUZZ_BUILD TARGET... - runs the libFuzzer binaries FUZZ_BUILD/fuzz/fuzz_TARGET
# (made by `make fuzz`) for FUZZ_SECONDS each (default 60), FUZZ_JOBS at a
# time (default 2: the machine's two cores; each target at nice 19 with one
# OpenMP thread), over the seeds of
# tests/fuzz/make_seeds.py (FUZZ_BUILD/corpus/TARGET) and a working corpus
# that grows across runs (FUZZ_BUILD/corpus-work/TARGET).
#
# Prints, per target, the executions of this run and the total over every run
# recorded in FUZZ_BUILD/stats/TARGET. A finding (crash, sanitizer report,
# leak, timeout, out-of-memory, broken FZ_ASSERT) stops that target; its input
# is copied to tests/fuzz/regressions/TARGET/ (commit it once fixed: the gate
# 70-fuzz-regressions replays it) and the script exits 1 at the end.
set -u
B=${1:?usage: run.sh FUZZ_BUILD TARGET...}
shift
S=${FUZZ_SECONDS:-60}
B=$(cd "$B" && pwd)
export K3_FUZZ_DATA="$B/data"
export OMP_NUM_THREADS=1
mkdir -p "$B/stats"
J=${FUZZ_JOBS:-2}
# one TARGET: runs it and writes its table row to $B/row-TARGET (and the
# target's name to $B/found-TARGET on a finding).
one() {
    t=$1
    bin="$B/fuzz/fuzz_$t"
    work="$B/corpus-work/$t"
    arts="$B/artifacts/$t"
    mkdir -p "$work" "$arts" "$B/corpus/$t"
    rm -f "$arts"/* "$B/found-$t"
    log="$B/fuzz-$t.log"
    nice -n 19 "$bin" -max_total_time="$S" -timeout=20 -rss_limit_mb=2560 \
        -print_final_stats=1 -dict=tests/fuzz/k3.dict -artifact_prefix="$arts/" \
        "$work" "$B/corpus/$t" >"$log" 2>&1
    rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    n=${n:-0}
    total=$(( $(cat "$B/stats/$t" 2>/dev/null || echo 0) + n ))
    echo "$total" >"$B/stats/$t"
    result=ok
    if [ "$rc" -ne 0 ] || [ -n "$(ls "$arts")" ]; then
        result="FINDING (exit $rc, log $log)"
        echo "$t" >"$B/found-$t"
        mkdir -p "tests/fuzz/regressions/$t"
        for f in "$arts"/*; do
            [ -f "$f" ] && cp "$f" "tests/fuzz/regressions/$t/" && result="$result: $(basename "$f")"
        done
    fi
    printf '%-12s %14s %16s  %s\n' "$t" "$n" "$total" "$result" >"$B/row-$t"
}
# J targets at a time (each runs exactly S seconds, so lanes stay even).
i=0
for t in "$@"; do
    one "$t" &
    i=$((i + 1))
    [ $((i % J)) -eq 0 ] && wait
done
wait
found=""
printf '%-12s %14s %16s  %s\n' target "execs (run)" "execs (total)" result
for t in "$@"; do
    cat "$B/row-$t"
    [ -f "$B/found-$t" ] && found="$found $t"
done
if [ -n "$found" ]; then
    echo "fuzz: findings in:$found (inputs copied to tests/fuzz/regressions/)"
    exit 1
fi
echo "fuzz: no findings"
