# 15-kernels-identical: the engine's results do not depend on which kernel
# table runs them (K3_KERNELS) nor on the thread count. On tiny-a, tiny-b and
# demo, every table this CPU runs, with 1 and 2 threads, must give the same
# generated ids and the same prompt and generation logits, bit for bit, as
# the plain scalar kernels on one thread. A table the CPU cannot run is
# listed as skipped; the scalar one always runs.
. tests/gates/lib.sh
out="$K3_BUILD/gate-kernels"
mkdir -p "$out"

# run TABLE THREADS DIR IDS TAG: generated ids on stdout, dumps in $out/TAG.*
run() {
    K3_KERNELS=$1 "$K3_BIN" "$3" --ids "$4" --gen 12 --ignore-eos --threads "$2" --quiet \
        --dump-prompt-logits "$out/$5.prompt.f32" --dump-logits "$out/$5.gen.f32"
}

tables=""
probe=$(model tiny-a tiny-a)
for k in scalar avx2 avx512 neon; do
    set +e
    K3_KERNELS=$k "$K3_BIN" "$probe" --ids 1 --gen 1 --quiet >/dev/null 2>"$out/probe.err"
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        tables="$tables $k"
    elif [ "$rc" -eq 2 ] && grep -q "cannot run these kernels" "$out/probe.err"; then
        echo "skipped: $k (not available on this CPU/build)"
    else
        cat "$out/probe.err" >&2
        die "K3_KERNELS=$k failed (exit $rc)"
    fi
done
case "$tables" in *scalar*) ;; *) die "the scalar kernels must always run" ;; esac
echo "tables:$tables"

for preset in tiny-a tiny-b demo; do
    dir=$(model "$preset" "$preset")
    ids=$(prompt_ids "$(vocab_of "$dir")" 24)
    want=$(run scalar 1 "$dir" "$ids" ref)
    for k in $tables; do
        for th in 1 2; do
            got=$(run "$k" "$th" "$dir" "$ids" "$k-$th")
            [ "$got" = "$want" ] || die "$preset: $k, $th threads: ids $got, scalar: $want"
            cmp -s "$out/ref.prompt.f32" "$out/$k-$th.prompt.f32" ||
                die "$preset: $k, $th threads: prompt logits differ from scalar"
            cmp -s "$out/ref.gen.f32" "$out/$k-$th.gen.f32" ||
                die "$preset: $k, $th threads: generation logits differ from scalar"
        done
    done
    echo "$preset: identical ids and logits for$tables x {1, 2} threads"
done

# OpenMP's wait policy: passive unless the user set one (k3 starts itself
# again with it, src/cli/main.c); the --out report says which ran.
policy() {
    "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["omp_wait_policy"])' "$1"
}
env -u OMP_WAIT_POLICY "$K3_BIN" "$probe" --ids 1 --gen 1 --quiet --out "$out/policy.json" >/dev/null
[ "$(policy "$out/policy.json")" = passive ] || die "OMP_WAIT_POLICY unset: ran $(policy "$out/policy.json"), not passive"
OMP_WAIT_POLICY=active "$K3_BIN" "$probe" --ids 1 --gen 1 --quiet --out "$out/policy.json" >/dev/null
[ "$(policy "$out/policy.json")" = active ] || die "OMP_WAIT_POLICY=active was not kept"
echo "ok: OpenMP wait policy passive by default, the user's when set"
