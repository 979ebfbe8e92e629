#!/bin/sh
# bench.sh - k3's speed against this machine's ceilings (make bench). Not a
# test: it reports, it does not judge. Steps:
#   1. ceilings: memory read bandwidth and fp32 FMA peak ($K3_BUILD/bench/peak),
#      and the kernel tables alone on the release's shapes (.../kernels);
#   2. the "slice" checkpoint (the release's real widths, 4 layers, 32
#      experts, ~7.6 GB; ~2 minutes of CPU, <0.5 GB of RAM), made once in
#      $K3_SLICE_DIR and reused;
#   3. decode: seconds per token with the weights resident, plain scalar
#      kernels vs the best SIMD table, 1 and 2 threads;
#   4. prefill: one k3_forward over 64 and 512 prompt tokens, best table,
#      all threads;
#   5. streamed: the slice's trunk packed once (k3 pack-trunk, in
#      $K3_SLICE_TRUNK_DIR), the disk's O_DIRECT read bandwidth measured on
#      that trunk.bin with 1-8 parallel readers (scripts/odirect-bw.sh),
#      then decode with every layer and lm_head streamed through a ring of
#      2 slots (--trunk-layers 0);
#   6. the report (benchmarks/report.py): medians, weight GB/s as a fraction
#      of the bandwidth, GFLOP/s as a fraction of the FMA peak, speedups; to
#      stdout and $K3_BUILD/bench/report.md;
#   7. the other benchmarks' own tables: speculation, the lossless trunk,
#      the two readers (io_uring and threads, benchmarks/io_bench.sh: the
#      reader alone at several depths, and streamed decode, against the
#      disk's parallel O_DIRECT rate) and serving.
# Environment: K3_BIN, K3_BUILD, PYTHON as for tests/run.sh; K3_SLICE_DIR
# (default build/slice); K3_SLICE_TRUNK_DIR (default build/slice-trunk);
# K3_BENCH_RUNS runs per measurement (default 3);
# K3_BENCH_GEN decode steps per run (default 8; scalar runs use 3);
# OMP_WAIT_POLICY (default passive, see below).
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
# Idle OpenMP threads sleep instead of spinning: on a machine shared with
# other work, spinning threads steal the cores the busy ones need (measured
# here: 2 threads 1.1 s/token passive vs 1.3-4 s active under load), and a
# wake-up costs microseconds next to the milliseconds of each product here.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
slice="${K3_SLICE_DIR:-build/slice}"
trunk="${K3_SLICE_TRUNK_DIR:-build/slice-trunk}"
runs="${K3_BENCH_RUNS:-3}"
gen="${K3_BENCH_GEN:-8}"
out="$K3_BUILD/bench"
mkdir -p "$out"
rm -f "$out"/*.json

# The machine, and how busy it is (numbers from a shared machine are low).
{
    echo "cpu $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
    echo "cores $(getconf _NPROCESSORS_ONLN)"
    echo "memory_gib $(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo 2>/dev/null)"
    echo "kernel $(uname -sr)"
    echo "compiler $(${CC:-cc} --version 2>/dev/null | head -n 1)"
    echo "load_before $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
} >"$out/machine.txt"

echo "== ceilings (medians of 7 runs)"
K3_KERNELS='' "$K3_BUILD/bench/peak" --runs 7 | tee "$out/peak.txt"
echo "== kernels alone (one thread, CPU seconds, best of 5)"
"$K3_BUILD/bench/kernels" --runs 5 | tee "$out/kernels.txt"

# Made once and reused while its layout is the same (benchmarks/checkpoint.sh,
# shared with pack_bench.sh and plots.sh): speed depends on the shapes, not on
# the values drawn.
# shellcheck source=benchmarks/checkpoint.sh
. benchmarks/checkpoint.sh
checkpoint "$slice" slice

# The best table: the one the engine picks by itself (K3_KERNELS unset).
best=$(sed -n 's/^kernels_default //p' "$out/peak.txt")
threads=$(sed -n 's/^threads //p' "$out/peak.txt")
echo "== best table: $best"

# N spread-out ordinary ids of the slice's vocabulary (8192, the last 256 special).
ids() { "$PYTHON" -c 'import sys; n=int(sys.argv[1]); print(",".join(str((i*7919+13)%7936) for i in range(n)))' "$1"; }

# one KIND TABLE THREADS RUN PROMPT_LEN GEN [ENGINE OPTIONS]: one engine run,
# its --out report kept as $out/KIND-TABLE-tTHREADS-pPROMPT_LEN-rRUN.json.
one() {
    f="$out/$1-$2-t$3-p$5-r$4.json"
    k=$2 t=$3 n=$5 g=$6 policy=$OMP_WAIT_POLICY
    [ "$1" = spin ] && policy=active
    shift 6
    OMP_WAIT_POLICY=$policy K3_KERNELS=$k "$K3_BIN" "$slice" --ids "$(ids "$n")" --gen "$g" --ignore-eos --threads "$t" \
        --quiet --out "$f" "$@" >/dev/null
    "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["step_seconds"]; print("  %s: first step %.3f s, then %s" % (sys.argv[1].split("/")[-1], d["prefill_seconds"], " ".join("%.3f" % x for x in s[1:])))' "$f"
}

# The first step (the prompt) is not counted. A 16-token prompt has picked
# nearly every expert once, so the steps after it rarely read one; the scalar
# runs, 20x slower, take a one-token prompt (expert reads are subtracted
# from every step anyway, see report.py).
# The thread sweep: 1, 2, 4, ... below the machine's threads, then all.
sweep=1
t=2
while [ "$t" -lt "$threads" ]; do
    sweep="$sweep $t"
    t=$((t * 2))
done
[ "$threads" -gt 1 ] && sweep="$sweep $threads"
echo "== decode (threads: $sweep)"
for th in $sweep; do
    for r in $(seq "$runs"); do
        one decode "$best" "$th" "$r" 16 "$gen"
        one decode scalar "$th" "$r" 1 3
    done
    # The scalar runs' prompt with the best table: the report checks the ids.
    one same "$best" "$th" 1 1 3
done

# All threads again with OMP_WAIT_POLICY=active (threads spin between
# parallel regions): faster on an idle machine, far slower on a busy one
# (docs/TUNING.md, "Threads"); k3's default is passive.
echo "== decode with spinning threads ($best, all $threads threads)"
for r in $(seq "$runs"); do
    one spin "$best" "$threads" "$r" 16 "$gen"
done

echo "== prefill ($best, all $threads threads)"
for n in 64 512; do
    for r in $(seq "$runs"); do
        one prefill "$best" "$threads" "$r" "$n" 1
    done
done

echo "== streamed trunk ($best, all $threads threads)"
"$K3_BIN" pack-trunk "$slice" "$trunk" --quiet
# O_DIRECT reads of the whole packed file, the bytes the streamed runs read,
# before and after them (a virtual disk's speed drifts; the report takes the
# faster), with 1, 2, 4 and 8 parallel readers (scripts/odirect-bw.sh): one
# reader under-reports a disk that serves several requests at once, and k3's
# reader keeps several in flight. KEY is the best rate, KEY_readers its reader
# count, KEY_one_reader the single reader's rate.
disk() {
    sh scripts/odirect-bw.sh "$trunk/trunk.bin" 1 2 4 8 | awk -v k="$1" '
        $1 == "readers" && $2 == 1 { one = $3 }
        $1 == "best" { printf "%s %.3f\n%s_readers %d\n%s_one_reader %.3f\n", k, $3, k, $2, k, one }'
}
disk disk_odirect_gbps_before | tee "$out/disk.txt"
for r in $(seq "$runs"); do
    one stream "$best" "$threads" "$r" 16 4 --trunk "$trunk" --trunk-layers 0
done
disk disk_odirect_gbps_after | tee -a "$out/disk.txt"

echo "load_after $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >>"$out/machine.txt"
"$PYTHON" benchmarks/report.py "$out" "$slice" "$runs" | tee "$out/report.md"
echo "== speculative decoding (benchmarks/spec_bench.sh)"
K3_SLICE_DIR=$slice K3_SLICE_TRUNK_DIR=$trunk sh benchmarks/spec_bench.sh
echo "== the lossless trunk (benchmarks/codec_bench.sh)"
K3_SLICE_DIR=$slice sh benchmarks/codec_bench.sh | tee "$out/codec.txt"
echo "== deeper reads: the io_uring reader against threads (benchmarks/io_bench.sh)"
K3_SLICE_DIR=$slice K3_SLICE_TRUNK_DIR=$trunk sh benchmarks/io_bench.sh | tee "$out/io.txt"
echo "== serving: slots (benchmarks/serve_bench.sh)"
K3_SLICE_DIR=$slice sh benchmarks/serve_bench.sh
