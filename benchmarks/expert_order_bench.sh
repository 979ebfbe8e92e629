#!/bin/sh
# expert_order_bench.sh - `make bench-experts`: ready-order expert compute
# (model/moe.c) against the batch order, by benchmarks/expert_order.c in one
# process, on the "slice" checkpoint (the release's widths, 4 layers of
# which 3 MoE, 32 experts, top 16; benchmarks/checkpoint.sh) with the trunk
# resident and the routed experts streamed through a cache of
# K3_BENCH_SLOTS (default 16) slots, smaller than one layer's 32 experts,
# so nearly every step reads every pick of every layer. Expert reads are
# O_DIRECT (io/direct.h): real disk reads, not the page cache's.
#
# Environment: K3_BUILD (default build), PYTHON (default /usr/bin/python3),
# K3_SLICE_DIR (default build/slice), K3_BENCH_SLOTS, K3_BENCH_ROUNDS
# (default 3), K3_BENCH_STEPS (default 5), K3_BENCH_THREADS (default: all).
# Run from the repository root. Not a test: the numbers depend on the
# machine and its load (`uptime` is printed before and after).
set -eu
K3_BUILD=${K3_BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
slice=${K3_SLICE_DIR:-build/slice}
. benchmarks/checkpoint.sh
checkpoint "$slice" slice
echo "load before: $(uptime)"
"$K3_BUILD/bench/expert_order" "$slice" "${K3_BENCH_SLOTS:-16}" "${K3_BENCH_ROUNDS:-3}" \
    "${K3_BENCH_STEPS:-5}" ${K3_BENCH_THREADS:+"$K3_BENCH_THREADS"}
echo "load after: $(uptime)"
