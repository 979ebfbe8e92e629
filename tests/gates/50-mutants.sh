# 50-mutants: each deliberate corruption of the engine named in the engine
# issue (swapped nibbles, router bias in the weights, per-expert latent norm,
# skipped AttnRes, dropped rope part, KDA decay after the delta update) is
# built from a copy of the source and must FAIL the reference gate: its
# teacher-forced logits on tiny-a and tiny-b must exceed the 1e-4 bound.
# Proves the gate of 10-reference can fail. The mutants change the plain
# (scalar) kernels, the reference path every SIMD path must equal bit for
# bit (15-kernels-identical), so they run with K3_KERNELS=scalar.
# ladder: check
# (make check and CI only, not make test: six rebuilds of the engine)
. tests/gates/lib.sh
work="$K3_BUILD/mutants"
mkdir -p "$work"
ids_for() { prompt_ids "$(vocab_of "$1")" 24; }
for preset in tiny-a tiny-b; do
    dir=$(model "$preset" "$preset")
    "$PYTHON" tools/k3ref.py "$dir" --ids "$(ids_for "$dir")" --gen 1 \
        --dump-prompt-logits "$work/ref-$preset.f32" >/dev/null
done
for m in $("$PYTHON" tests/gates/mutants.py list); do
    "$PYTHON" tests/gates/mutants.py apply "$m" . "$work/$m"
    # A clean make: the parent make (e.g. make asan) must not pass its
    # variables down through MAKEFLAGS.
    MAKEFLAGS= MAKELEVEL= make -s -C "$work/$m" BUILD=build bin/k3 OPT=-O1 WERROR= CFLAGS= \
        >"$work/$m.build.log" 2>&1 || { tail -n 20 "$work/$m.build.log"; die "mutant $m did not build"; }
    caught=""
    for preset in tiny-a tiny-b; do
        dir="$K3_MODELS/$preset"
        K3_KERNELS=scalar "$work/$m/bin/k3" "$dir" --ids "$(ids_for "$dir")" --gen 1 \
            --dump-prompt-logits "$work/$m.f32" >/dev/null
        if ! "$PYTHON" tools/compare_logits.py "$work/ref-$preset.f32" "$work/$m.f32" \
            --vocab "$(vocab_of "$dir")" >"$work/$m.log"; then
            caught="$caught $preset($(grep -o 'ratio [^ ]*' "$work/$m.log"))"
        fi
    done
    [ -n "$caught" ] || die "mutant $m was NOT caught by the reference gate"
    echo "mutant $m caught on:$caught"
done
