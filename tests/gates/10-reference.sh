# 10-reference: the C engine against the float64 reference (tools/k3ref.py)
# on checkpoints of different shapes in the release format:
#   - logits at every prompt position (teacher forcing) and at every
#     generated step within max|diff| <= 1e-4 * max|logit|;
#   - 16+ greedy tokens identical to the reference's;
#   - incremental decoding identical to --recompute, token for token and
#     bit for bit in the logits;
#   - thread count does not change a bit.
. tests/gates/lib.sh
out="$K3_BUILD/gate-reference"
mkdir -p "$out"
for preset in tiny-a tiny-b; do
    dir=$(model "$preset" "$preset")
    V=$(vocab_of "$dir")
    ids=$(prompt_ids "$V" 24)
    echo "== $preset (vocab $V), prompt of 24 ids, 20 generated"
    c_ids=$("$K3_BIN" "$dir" --ids "$ids" --gen 20 --ignore-eos \
        --dump-prompt-logits "$out/c-prompt.f32" --dump-logits "$out/c-gen.f32" --out "$out/c.json")
    r_ids=$("$PYTHON" tools/k3ref.py "$dir" --ids "$ids" --gen 20 \
        --dump-prompt-logits "$out/r-prompt.f32" --dump-logits "$out/r-gen.f32")
    echo "engine:    $c_ids"
    echo "reference: $r_ids"
    [ "$c_ids" = "$r_ids" ] || die "$preset: greedy tokens differ from the reference"
    "$PYTHON" tools/compare_logits.py "$out/r-prompt.f32" "$out/c-prompt.f32" --vocab "$V" --rel 1e-4 ||
        die "$preset: prompt logits differ from the reference"
    "$PYTHON" tools/compare_logits.py "$out/r-gen.f32" "$out/c-gen.f32" --vocab "$V" --rel 1e-4 ||
        die "$preset: generation logits differ from the reference"

    rc_ids=$("$K3_BIN" "$dir" --ids "$ids" --gen 20 --ignore-eos --recompute --dump-logits "$out/c-rec.f32")
    [ "$rc_ids" = "$c_ids" ] || die "$preset: --recompute gives other tokens than incremental"
    cmp -s "$out/c-gen.f32" "$out/c-rec.f32" || die "$preset: --recompute logits differ in some bit"
    t1_ids=$("$K3_BIN" "$dir" --ids "$ids" --gen 20 --ignore-eos --threads 1 --dump-logits "$out/c-t1.f32")
    [ "$t1_ids" = "$c_ids" ] && cmp -s "$out/c-gen.f32" "$out/c-t1.f32" ||
        die "$preset: one thread gives other bits than all threads"
    echo "incremental = recompute = 1 thread, bit for bit"
done
