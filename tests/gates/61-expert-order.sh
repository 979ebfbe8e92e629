# 61-expert-order: ready-order expert compute (model/moe.c) changes no
# bit. On moe64 (64 experts a layer, top 8) with the experts streamed from
# the shards through caches smaller than one layer's experts (1, 3, 8, 16
# and 40 slots: chunked fetches, all-miss layers, some hits), at 1-3
# threads (the "all" run caches every expert: --preset max), on both readers (io/read_queue.h), with speculation (--spec 4:
# verification calls of several tokens) and under total budgets, every run
# must generate the ids of the all-in-memory run with bit-identical logits.
# The path must really have been taken: summed over the streamed runs, the
# run report counts experts computed while their fetch's reads were still
# running (experts.early), and K3_EXPERT_ORDER=batch (the compute waits
# for the whole fetch, as before) counts none, with the same bits.
# K3_EXPERT_ORDER=bogus is a usage error (exit 2).
. tests/gates/lib.sh
dir=$(model moe64 moe64)
work="$K3_BUILD/expert-order"
rm -rf "$work"
mkdir -p "$work"
ids=$(prompt_ids "$(vocab_of "$dir")" 12)
run() { # NAME ARGS...: one run; ids to $work/NAME.ids, logits to NAME.f32
    name=$1
    shift
    "$K3_BIN" "$dir" --ids "$ids" --gen 10 --ignore-eos --dump-logits "$work/$name.f32" \
        --out "$work/$name.json" "$@" >"$work/$name.ids" 2>"$work/$name.err" ||
        { cat "$work/$name.err"; die "$name: exit $?"; }
}
same() { # NAME: identical to the all-in-memory run
    cmp -s "$work/all.ids" "$work/$1.ids" || die "$1: ids differ: $(cat "$work/$1.ids")"
    cmp -s "$work/all.f32" "$work/$1.f32" || die "$1: logits differ in some bit"
}
field() { # NAME KEY: a field of the run's JSON report
    "$PYTHON" -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$work/$1.json" "$2"
}
run all --preset max
[ "$(field all plan.streamed_layers)" -eq 0 ] || die "max preset streams layers"
layer=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); print(c.get("text_config",c)["num_experts"])' "$dir")
n=0
early=0
for cfg in 1:2 3:1 3:3 8:2 16:1 16:3 40:2; do
    slots=${cfg%:*}
    t=${cfg#*:}
    [ "$slots" -lt "$layer" ] || die "$slots slots is not smaller than a layer's $layer experts"
    name="slots$slots-t$t"
    run "$name" --cache-experts "$slots" --threads "$t"
    same "$name"
    [ "$(field "$name" experts.slots)" -eq "$slots" ] || die "$name: not $slots slots"
    [ "$(field "$name" experts.misses)" -gt 0 ] || die "$name: no expert was read"
    early=$((early + $(field "$name" experts.early)))
    n=$((n + 1))
done
K3_IO=threads run thr-slots3 --cache-experts 3 --threads 2
same thr-slots3
early=$((early + $(field thr-slots3 experts.early)))
run spec-slots16 --cache-experts 16 --threads 2 --spec 4
same spec-slots16
run budget --budget-gb 0.0011 --threads 2
same budget
[ "$(field budget experts.slots)" -lt "$layer" ] || die "--budget-gb 0.0011 caches a whole layer"
n=$((n + 3))
[ "$early" -gt 0 ] || die "no expert was computed while its fetch's reads ran: ready order not taken"
# The old order: the same bits, and nothing computed while reads ran.
for slots in 3; do
    K3_EXPERT_ORDER=batch run "batch-slots$slots" --cache-experts "$slots" --threads 2
    same "batch-slots$slots"
    [ "$(field "batch-slots$slots" experts.early)" -eq 0 ] ||
        die "batch-slots$slots: K3_EXPERT_ORDER=batch computed experts while reads ran"
    n=$((n + 1))
done
K3_EXPERT_ORDER=bogus expect_exit 2 "K3_EXPERT_ORDER=bogus: expected ready or batch" \
    "$K3_BIN" "$dir" --ids "$ids" --gen 1
echo "$n streamed configurations: identical ids and bit-identical logits;" \
    "$early experts computed while their fetch's reads ran"
