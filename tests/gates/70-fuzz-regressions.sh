# 70-fuzz-regressions: every input a fuzz campaign ever flagged
# (tests/fuzz/regressions/TARGET/) and every seed (the real files
# tests/fuzz/make_seeds.py cuts from the release and tiny-a, plus
# tests/fuzz/seeds/) replayed through the same target functions
# libFuzzer runs, with the plain drivers $K3_BUILD/fuzz/replay_TARGET (no
# libFuzzer needed; under `make asan` they carry ASan + UBSan). A target
# aborts on a crash or a broken promise, so the gate fails then.
. tests/gates/lib.sh
root="$K3_BUILD/fuzz-replay"
"$PYTHON" tests/fuzz/make_seeds.py "$root" --model "$(model tiny-a tiny-a)" --k3 "$K3_BIN" >/dev/null
K3_FUZZ_DATA=$(cd "$root/data" && pwd)
export K3_FUZZ_DATA
n=0
for src in tests/fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    t=${t#fuzz_}
    bin="$K3_BUILD/fuzz/replay_$t"
    [ -x "$bin" ] || die "$bin missing (make builds it)"
    set --
    [ -d "tests/fuzz/regressions/$t" ] && set -- "$@" "tests/fuzz/regressions/$t"
    [ -d "$root/corpus/$t" ] && set -- "$@" "$root/corpus/$t"
    [ $# -gt 0 ] || continue
    "$bin" "$@" || die "replay_$t: a saved input fails (see above)"
    n=$((n + 1))
done
echo "$n fuzz targets replayed their regressions and seeds"
