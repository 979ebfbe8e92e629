# 50-mutants: each deliberate corruption of the engine named in the engine
# issue (swapped nibbles, router bias in the weights, per-expert latent norm,
# skipped AttnRes, dropped rope part, KDA decay after the delta update) is
# built from a copy of the source and must FAIL the reference gate: its
# teacher-forced logits on tiny-a and tiny-b must exceed the 1e-4 bound.
# Proves the gate of 10-reference can fail. The mutants change the plain
# (scalar) kernels, the reference path every SIMD path must equal bit for
# bit (15-kernels-identical), so they run with K3_KERNELS=scalar.
# ladder: check
# (make check and CI only, not make test: a build of the engine and six
# partial rebuilds)
. tests/gates/lib.sh
work="$K3_BUILD/mutants"
mkdir -p "$work"
ids_for() { prompt_ids "$(vocab_of "$1")" 24; }
for preset in tiny-a tiny-b; do
    dir=$(model "$preset" "$preset")
    "$PYTHON" tools/k3ref.py "$dir" --ids "$(ids_for "$dir")" --gen 1 \
        --dump-prompt-logits "$work/ref-$preset.f32" >/dev/null
done
# One copy of the source, built once; each mutant is written into it, built
# (make recompiles only its files) and run, then its files are restored.
# A clean make: the parent make (e.g. make asan) must not pass its
# variables down through MAKEFLAGS.
tree="$work/tree"
"$PYTHON" tests/gates/mutants.py copy . "$tree"
build_tree() {
    MAKEFLAGS= MAKELEVEL= make -s -j2 -C "$tree" BUILD=build bin/k3 OPT=-O1 WERROR= CFLAGS= \
        >"$work/$1.build.log" 2>&1 || { tail -n 20 "$work/$1.build.log"; die "$1 did not build"; }
}
build_tree pristine
# logits_fail NAME PRESET: 0 when the tree's logits on PRESET miss the bound.
logits_fail() {
    dir="$K3_MODELS/$2"
    K3_KERNELS=scalar "$tree/bin/k3" "$dir" --ids "$(ids_for "$dir")" --gen 1 \
        --dump-prompt-logits "$work/$1.f32" >/dev/null
    ! "$PYTHON" tools/compare_logits.py "$work/ref-$2.f32" "$work/$1.f32" \
        --vocab "$(vocab_of "$dir")" >"$work/$1.log"
}
# The copy unmutated passes: a catch below is the mutation's doing.
for preset in tiny-a tiny-b; do
    ! logits_fail pristine "$preset" || die "the unmutated copy fails on $preset: $(cat "$work/pristine.log")"
done
for m in $("$PYTHON" tests/gates/mutants.py list); do
    "$PYTHON" tests/gates/mutants.py apply "$m" . "$tree"
    build_tree "$m"
    caught=""
    for preset in tiny-a tiny-b; do
        if logits_fail "$m" "$preset"; then
            caught="$caught $preset($(grep -o 'ratio [^ ]*' "$work/$m.log"))"
        fi
    done
    "$PYTHON" tests/gates/mutants.py restore "$m" . "$tree"
    [ -n "$caught" ] || die "mutant $m was NOT caught by the reference gate"
    echo "mutant $m caught on:$caught"
done
