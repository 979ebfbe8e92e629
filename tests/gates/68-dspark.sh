# 68-dspark: the DSpark drafter's block (model/dspark.c, docs/MODEL.md §10)
# against its float64 reference (tools/dspark_ref.py), on random drafters
# (tools/make_dspark.py) for two target shapes:
#   - the drafter alone: from the taps the engine's target kept (its layer
#     outputs, taken by its own forward), the block's logit rows (Markov
#     bias included) within max|diff| <= 1e-5 * max|logit|, and the same
#     greedy draft ids;
#   - the whole pipeline: those taps within 1e-4 of the float64 target's
#     layer outputs (gate 10's bound for the target), and the rows from the
#     float64 target's taps within 1e-4;
#   - one thread gives the same bits as all threads;
#   - tests/progs/dspark_check's own checks: a drafter cache reused from a
#     shorter pass, or one that saw other ids, gives the same bits;
#   - the comparison can fail: the reference with another rope_theta (the
#     RoPE of the drafter's keys and queries) or another mask id differs;
#   - a drafter made for another target is refused, naming the field.
. tests/gates/lib.sh
out="$K3_BUILD/gate-dspark"
mkdir -p "$out"
check="$K3_BUILD/progs/dspark_check"
[ -x "$check" ] || die "$check is not built (make)"

ta=$(model tiny-a tiny-a)
tb=$(model tiny-b tiny-b)
da=$(drafter dspark-a "$ta")
# tiny-b's drafter moves every free number: layers, taps, block, rank, theta
db=$(drafter dspark-b "$tb" --layers 3 --taps 1,2,5 --block 5 --markov-rank 8 --rope-theta 500)

for pair in "a $ta $da" "b $tb $db"; do
    set -- $pair
    tag=$1 target=$2 draft=$3
    V=$(vocab_of "$target")
    ids=$(prompt_ids "$V" 21)
    echo "== drafter $tag (vocab $V), context of 20 ids"
    c_ids=$("$check" "$target" "$draft" "$ids" "$out/c-$tag.f32" "$out/c-$tag.taps") ||
        die "$tag: dspark_check failed"
    r_ids=$("$PYTHON" tools/dspark_ref.py "$target" "$draft" --ids "$ids" --taps "$out/c-$tag.taps" \
        --dump "$out/r-$tag.f32")
    echo "engine:    $c_ids"
    echo "reference: $r_ids"
    [ "$c_ids" = "$r_ids" ] || die "$tag: greedy drafts differ from the reference"
    "$PYTHON" tools/compare_logits.py "$out/r-$tag.f32" "$out/c-$tag.f32" --vocab "$V" --rel 1e-5 ||
        die "$tag: the drafter's rows differ from the reference"
    "$PYTHON" tools/dspark_ref.py "$target" "$draft" --ids "$ids" --dump "$out/r64-$tag.f32" \
        --dump-taps "$out/r64-$tag.taps" >/dev/null
    W=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); print(len(c["target_layer_ids"])*c["hidden_size"])' "$draft")
    "$PYTHON" tools/compare_logits.py "$out/r64-$tag.taps" "$out/c-$tag.taps" --vocab "$W" --rel 1e-4 ||
        die "$tag: the target's taps differ from the float64 target's layer outputs"
    "$PYTHON" tools/compare_logits.py "$out/r64-$tag.f32" "$out/c-$tag.f32" --vocab "$V" --rel 1e-4 ||
        die "$tag: the rows differ from the float64 pipeline's"
    OMP_NUM_THREADS=1 "$check" "$target" "$draft" "$ids" "$out/c1-$tag.f32" >/dev/null ||
        die "$tag: dspark_check failed on one thread"
    cmp -s "$out/c-$tag.f32" "$out/c1-$tag.f32" || die "$tag: one thread gives other bits"
    echo "one thread = all threads, bit for bit"
done

# The comparison can fail: the same weights under another config.
V=$(vocab_of "$ta")
ids=$(prompt_ids "$V" 21)
for change in 'rope_theta=2000.0' 'mask_token_id=7'; do
    rm -rf "$out/mut"
    cp -r "$da" "$out/mut"
    "$PYTHON" - "$out/mut/config.json" "$change" <<'EOF'
import json, sys
path, (k, v) = sys.argv[1], sys.argv[2].split("=")
c = json.load(open(path))
c[k] = float(v) if "." in v else int(v)
json.dump(c, open(path, "w"))
EOF
    "$PYTHON" tools/dspark_ref.py "$ta" "$out/mut" --ids "$ids" --taps "$out/c-a.taps" \
        --dump "$out/r-mut.f32" >/dev/null
    if "$PYTHON" tools/compare_logits.py "$out/r-mut.f32" "$out/c-a.f32" --vocab "$V" --rel 1e-5 \
        >"$out/mut.log"; then
        die "the comparison does not see $change"
    fi
    echo "a reference with $change differs: $(head -n 1 "$out/mut.log")"
done

expect_exit 1 'hidden_size' "$check" "$ta" "$db" "$ids" "$out/x.f32"
echo "PASS 68-dspark"
