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
bits_run all --preset max
[ "$(report_field all plan.streamed_layers)" -eq 0 ] || die "max preset streams layers"
layer=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); print(c.get("text_config",c)["num_experts"])' "$dir")
n=0
early=0
for cfg in 1:2 3:1 3:3 8:2 16:1 16:3 40:2; do
    slots=${cfg%:*}
    t=${cfg#*:}
    [ "$slots" -lt "$layer" ] || die "$slots slots is not smaller than a layer's $layer experts"
    name="slots$slots-t$t"
    bits_run "$name" --cache-experts "$slots" --threads "$t"
    bits_same "$name"
    [ "$(report_field "$name" experts.slots)" -eq "$slots" ] || die "$name: not $slots slots"
    [ "$(report_field "$name" experts.misses)" -gt 0 ] || die "$name: no expert was read"
    early=$((early + $(report_field "$name" experts.early)))
    n=$((n + 1))
done
K3_IO=threads bits_run thr-slots3 --cache-experts 3 --threads 2
bits_same thr-slots3
early=$((early + $(report_field thr-slots3 experts.early)))
bits_run spec-slots16 --cache-experts 16 --threads 2 --spec 4
bits_same spec-slots16
bits_run budget --budget-gb 0.0011 --threads 2
bits_same budget
[ "$(report_field budget experts.slots)" -lt "$layer" ] || die "--budget-gb 0.0011 caches a whole layer"
n=$((n + 3))
[ "$early" -gt 0 ] || die "no expert was computed while its fetch's reads ran: ready order not taken"
# The old order: the same bits, and nothing computed while reads ran.
for slots in 3; do
    K3_EXPERT_ORDER=batch bits_run "batch-slots$slots" --cache-experts "$slots" --threads 2
    bits_same "batch-slots$slots"
    [ "$(report_field "batch-slots$slots" experts.early)" -eq 0 ] ||
        die "batch-slots$slots: K3_EXPERT_ORDER=batch computed experts while reads ran"
    n=$((n + 1))
done
K3_EXPERT_ORDER=bogus expect_exit 2 "K3_EXPERT_ORDER=bogus: expected ready or batch" \
    "$K3_BIN" "$dir" --ids "$ids" --gen 1
echo "$n streamed configurations: identical ids and bit-identical logits;" \
    "$early experts computed while their fetch's reads ran"
