# 69-dspark-spec: `--draft dspark --draft-model DIR` (gen/draft_dspark.c)
# changes nothing but the number of forward passes. On tiny-a and tiny-b
# with random drafters (tools/make_dspark.py; tiny-b's drafts blocks of 5),
# with negative frequency and presence penalties (the model repeats itself,
# and the run's own sampler picks the drafts with the same penalties, so
# drafts are accepted and rejected): greedy and sampled with a seed, every
# step drafting (K3_SPEC_ALWAYS=1) at N = 7, 3 (fewer than a block) and
# auto, and one thread, give byte-identical printed ids, --dump-logits rows
# and --save-state files to --spec 0; some drafts are accepted (checked: a
# run that reports none accepted fails). A drafter for another target is
# exit 2 naming the field; --draft dspark without --draft-model and the
# modes it does not go with are exit 2 (also gate 76).
. tests/gates/lib.sh
work="$K3_BUILD/dspark-spec"
rm -rf "$work"
mkdir -p "$work"

ta=$(model tiny-a tiny-a)
tb=$(model tiny-b tiny-b)
da=$(drafter dspark-a "$ta")
db=$(drafter dspark-b "$tb" --layers 3 --taps 1,2,5 --block 5 --markov-rank 8 --rope-theta 500)
ids="5,9,17,5,9,17,5,9,17,5,9"

# run NAME TARGET [options]: ids, logits and state of a 48-token run in $work/NAME.*
run() {
    name=$1
    target=$2
    shift 2
    "$K3_BIN" "$target" --ids "$ids" --gen 48 --ignore-eos --frequency-penalty -1 \
        --presence-penalty -1 --dump-logits "$work/$name.f32" --save-state "$work/$name.state" \
        --verbose "$@" >"$work/$name.ids" 2>"$work/$name.err" ||
        die "$name: exit $?: $(tail -3 "$work/$name.err")"
}
# same A B: B's ids, logits and state are A's, byte for byte.
same() {
    for x in ids f32 state; do
        cmp -s "$work/$1.$x" "$work/$2.$x" || die "$2: its .$x differs from $1's"
    done
}
accepted() {
    sed -n 's/.*drafted, \([0-9]*\) accepted.*/\1/p' "$work/$1.err"
}

for pair in "a $ta $da" "b $tb $db"; do
    set -- $pair
    tag=$1 target=$2 draft=$3
    for mode in greedy sampled; do
        samp=""
        [ "$mode" = sampled ] && samp="--temperature 0.9 --top-p 0.95 --seed 7"
        # shellcheck disable=SC2086 # $samp is several options
        run "$tag-$mode-0" "$target" $samp --spec 0
        for n in 7 3; do
            # shellcheck disable=SC2086
            K3_SPEC_ALWAYS=1 run "$tag-$mode-$n" "$target" $samp --spec "$n" --draft dspark \
                --draft-model "$draft"
            same "$tag-$mode-0" "$tag-$mode-$n"
            echo "$tag $mode spec $n: $(grep '^speculation' "$work/$tag-$mode-$n.err")"
        done
        # shellcheck disable=SC2086
        run "$tag-$mode-auto" "$target" $samp --draft dspark --draft-model "$draft"
        same "$tag-$mode-0" "$tag-$mode-auto"
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 K3_SPEC_ALWAYS=1 run "$tag-$mode-t1" "$target" $samp --spec 7 \
            --draft dspark --draft-model "$draft" --threads 1
        same "$tag-$mode-0" "$tag-$mode-t1"
        [ "$(accepted "$tag-$mode-7")" -gt 0 ] || die "$tag $mode: no draft was accepted"
    done
done
echo "every run = --spec 0, byte for byte (ids, logits, state)"

expect_exit 2 'hidden_size' "$K3_BIN" "$ta" --ids "$ids" --gen 4 --spec 2 --draft dspark \
    --draft-model "$db"
expect_exit 2 'needs --draft-model' "$K3_BIN" "$ta" --ids "$ids" --draft dspark
expect_exit 2 'generation run only' "$K3_BIN" "$ta" --chat --draft dspark --draft-model "$da"
echo "PASS 69-dspark-spec"
