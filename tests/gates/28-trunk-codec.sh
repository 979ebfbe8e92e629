#!/bin/sh
# 28-trunk-codec: the budget invariant (gate 30) on a compressed trunk. On
# moe64, packed with k3 pack-trunk --compress (huffman blocks) and again
# with --compress-fast (nibble blocks), every preset, a grid of
# pinned layers x ring slots x expert slots and a range of total budgets
# must give the same ids and bit-identical logits as the all-in-memory run
# from the shards (with sub-runs: layer 0's MLP and lm_head's row blocks
# streamed through slots smaller than them): decoding (io/read_coded.h) rebuilds every run image
# exactly, whether it is pinned (decoded once) or streamed (decoded at every
# read). Checks that the streamed runs really read compressed bytes (the
# report's bytes_read below image_bytes) and that the plan says so.
. tests/gates/lib.sh
dir=$(model moe64 moe64)
work="$K3_BUILD/trunk-codec"
rm -rf "$work"
mkdir -p "$work"
ids=$(prompt_ids "$(vocab_of "$dir")" 12)
bits_run all --preset max
n=0
for codec in compress compress-fast; do
rm -rf "$work/trunk"
"$K3_BIN" pack-trunk "$dir" "$work/trunk" "--$codec" --quiet || die "pack-trunk --$codec"
want=bf16-huffman
[ "$codec" = compress ] || want=bf16-nibble
grep -q "\"codec\": \"$want\"" "$work/trunk/trunk.json" || die "--$codec did not write $want"
for p in ultra laptop desktop workstation server max auto; do
    bits_run "preset-$p" --preset "$p" --trunk "$work/trunk"
    bits_same "preset-$p"
    n=$((n + 1))
done
for pin in 0 1 4; do
    for ring in 1 2 3; do
        for slots in 1 512; do
            name="pin$pin-ring$ring-slots$slots"
            bits_run "$name" --trunk "$work/trunk" --trunk-layers "$pin" --trunk-ring "$ring" \
                --cache-experts "$slots"
            bits_same "$name"
            n=$((n + 1))
        done
    done
done
# Sub-runs (format 4): layer 0's MLP matrices and lm_head's row blocks are
# compressed runs of their own, streamed through slots smaller than them.
for ring in 1 2; do
    name="subruns-ring$ring"
    bits_run "$name" --trunk "$work/trunk" --trunk-layers 0 --trunk-ring "$ring" --cache-experts 8 \
        --stream-lm-head
    bits_same "$name"
    n=$((n + 1))
done
grep -q '"lm_head/10"' "$work/trunk/trunk.json" || die "the compressed trunk does not cut lm_head"
bits_run streamed-ends --trunk "$work/trunk" --trunk-layers 0 --trunk-ring 1 --cache-experts 1 \
    --stream-embed --stream-lm-head
bits_same streamed-ends
n=$((n + 1))
read=$(report_field streamed-ends trunk.bytes_read)
img=$(report_field streamed-ends trunk.image_bytes)
[ "$read" -gt 0 ] && [ "$read" -lt "$img" ] ||
    die "streamed runs read $read bytes for $img of images: not compressed"
"$K3_BIN" "$dir" --plan --trunk "$work/trunk" --trunk-layers 0 | grep -q "trunk streamed .* compressed runs" ||
    die "the plan does not count the compressed bytes"
for b in 0.0015 0.002 0.005 0.012 0.03; do
    bits_run "budget-$b" --budget-gb "$b" --trunk "$work/trunk"
    bits_same "budget-$b"
    n=$((n + 1))
done
echo "--$codec: $read bytes read for $img of run images when all streams"
done
echo "$n configurations on compressed trunks (huffman and nibble blocks): identical ids and bit-identical logits"
