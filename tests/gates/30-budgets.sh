# 30-budgets: THE invariant. Memory only buys speed: on a model with many
# experts per layer (moe64: 64 experts, top 8, 8 layers), every preset and a
# grid of trunk/cache splits -- zero pinned layers, a one-slot ring, a cache
# of one expert (smaller than a layer's top-k), streamed embedding and
# lm_head, sub-runs (layer 0's MLP and lm_head's row blocks streamed through
# slots smaller than them) and runs bound whole -- must generate the same
# ids with bit-identical logits as the all-in-memory run. Also checks that the splits really stream (the report's
# pinned layers, slots and bytes read) so the grid is not vacuous.
. tests/gates/lib.sh
dir=$(model moe64 moe64)
work="$K3_BUILD/budgets"
mkdir -p "$work"
ids=$(prompt_ids "$(vocab_of "$dir")" 12)
bits_run all --preset max
echo "all-in-memory: $(cat "$work/all.ids")"
[ "$(report_field all plan.streamed_layers)" -eq 0 ] || die "max preset streams layers"
n=0
for p in ultra laptop desktop workstation server auto; do
    bits_run "preset-$p" --preset "$p"
    bits_same "preset-$p"
    n=$((n + 1))
done
for pin in 0 1 4; do
    for ring in 1 2 3; do
        for slots in 1 3 8 16 512; do
            name="pin$pin-ring$ring-slots$slots"
            bits_run "$name" --trunk-layers "$pin" --trunk-ring "$ring" --cache-experts "$slots"
            bits_same "$name"
            [ "$(report_field "$name" plan.pinned_layers)" -eq "$pin" ] || die "$name: not $pin pinned"
            want=$slots
            [ "$want" -le "$(report_field all plan.experts_total)" ] || want=$(report_field all plan.experts_total)
            [ "$(report_field "$name" experts.slots)" -eq "$want" ] || die "$name: not $want slots"
            n=$((n + 1))
        done
    done
done
bits_run streamed-ends --trunk-layers 0 --trunk-ring 1 --cache-experts 1 --stream-embed --stream-lm-head
bits_same streamed-ends
[ "$(report_field streamed-ends trunk.bytes_read)" -gt "$(report_field all trunk.bytes_read)" ] ||
    die "streaming read no more than the resident run: the grid is not streaming"
# Sub-runs (model/weights.h): layer 0's MLP matrices and lm_head's 11 row
# blocks are runs of their own, so the ring's slot is a MoE layer's, not
# lm_head's; streamed through 1-3 slots, with and without the layer
# pinned, and bound whole (K3_SUBRUNS=0) for comparison.
for ring in 1 2 3; do
    for pin in 0 1; do
        name="subruns-pin$pin-ring$ring"
        bits_run "$name" --trunk-layers "$pin" --trunk-ring "$ring" --cache-experts 8 --stream-lm-head
        bits_same "$name"
        n=$((n + 1))
    done
done
K3_SUBRUNS=0 bits_run whole-runs --trunk-layers 0 --trunk-ring 2 --cache-experts 8 --stream-lm-head
bits_same whole-runs
cut=$(report_field subruns-pin0-ring2 plan.ring_slot_bytes)
whole=$(report_field whole-runs plan.ring_slot_bytes)
[ "$cut" -lt "$whole" ] || die "sub-runs: a ring slot of $cut bytes, not below whole runs' $whole"
# Through one slot every pass reads every run: 8 layers, layer 0's 3 MLP
# runs and the 11 lm_head blocks.
reads=$(report_field subruns-pin0-ring1 trunk.runs_read)
[ "$reads" -ge 22 ] && [ $((reads % 22)) -eq 0 ] || die "sub-runs: $reads runs read, not 22 a pass"
n=$((n + 1))
echo "sub-runs: a ring slot of $cut bytes (whole runs: $whole), $reads runs read through one slot"
bits_run gb-split --trunk-gb 0.0001 --cache-gb 0.0005
bits_same gb-split
# Total budgets from the smallest plan that fits up to everything: the
# planner's choices (pinned layers grow with the budget), same answer.
last=-1
for b in 0.0011 0.0013 0.0015 0.002 0.005 0.012 0.03; do
    bits_run "budget-$b" --budget-gb "$b"
    bits_same "budget-$b"
    pin=$(report_field "budget-$b" plan.pinned_layers)
    [ "$pin" -ge "$last" ] || die "--budget-gb $b pins $pin layers, fewer than a smaller budget"
    last=$pin
    n=$((n + 1))
done
[ "$last" -eq "$(report_field all plan.pinned_layers)" ] || die "the largest budget does not pin every layer"
expect_exit 3 "budget does not fit this model: its smallest plan needs" \
    "$K3_BIN" "$dir" --ids "$ids" --gen 1 --budget-gb 0.0001
expect_exit 2 "both set a total budget" "$K3_BIN" "$dir" --ids "$ids" --preset max --budget-gb 1
expect_exit 2 "--budget-gb expects a number" "$K3_BIN" "$dir" --ids "$ids" --budget-gb lots
echo "$((n + 2)) budget configurations: identical ids and bit-identical logits"
