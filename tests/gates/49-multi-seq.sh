# 49-multi-seq: one k3_forward_multi call advances several sequences, each
# on its own state, and every sequence's logits are byte-identical to that
# sequence run alone (tests/progs/multi_seq: S = 1..4 sequences of different
# prompt lengths, prefill chunks and decodes in one call, and past its
# prompt a sequence verifies 2-4 ids most rounds, keeping 1 to all of them,
# beside other sequences' prompt chunks and plain decodes; resident, split
# into pieces of max_batch 5, and everything streamed). On tiny-b (two dense layers, odd widths) and moe64 (64 experts,
# top 8: rows of different sequences choose overlapping experts), at 1 and
# 2 threads. OMP_WAIT_POLICY=passive as bin/k3 sets it (src/cli/main.c): spinning
# threads on a busy machine made the 2-thread runs 10x slower.
. tests/gates/lib.sh
for m in tiny-b moe64; do
    dir=$(model "$m" "$m")
    for th in 1 2; do
        OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$th "$K3_BUILD/progs/multi_seq" "$dir" ||
            die "multi_seq on $m, $th threads"
    done
done
