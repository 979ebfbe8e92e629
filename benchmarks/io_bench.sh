#!/bin/sh
# io_bench.sh - the two readers of io/read_queue.h (K3_IO=threads: the
# reader thread, one 32 MiB read at a time per streamed run; K3_IO=uring:
# 4 MiB reads, K3_IO_DEPTH in flight) against the disk's parallel O_DIRECT
# bandwidth. Not a test: it reports, it does not judge. On one trunk.bin -
# the slice's ($K3_SLICE_TRUNK_DIR, default build/slice-trunk, when
# bench.sh has packed it) else the random wide-moe's (small: a virtual
# disk's host cache may flatter it) - it measures:
#   1. the disk: scripts/odirect-bw.sh with 1, 2, 4, 8, 16 parallel dd
#      readers, before and after the rest (the faster counts);
#   2. k3's reader alone ($K3_BUILD/bench/io_depth: the whole file into a
#      256 MiB buffer reused): threads with 32 MiB reads, uring at depths
#      1, 2, 4, 8, 16, 32; the median of $K3_BENCH_RUNS (3) passes each;
#   3. decode with every layer and lm_head streamed through a ring of 2
#      slots (--trunk-layers 0 --trunk-ring 2 --stream-lm-head), $K3_IO_GEN
#      (4) tokens, threads against uring: medians of $K3_BENCH_RUNS runs of
#      the stream rate (trunk bytes over the reader's seconds, hashing
#      overlapped) and s/token, and the stream rate over the disk's.
# Environment: K3_BIN, K3_BUILD, PYTHON as for tests/run.sh.
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
runs="${K3_BENCH_RUNS:-3}"
gen="${K3_IO_GEN:-4}"
out="$K3_BUILD/io-bench"
mkdir -p "$out"
rm -f "$out"/*.json
slice="${K3_SLICE_DIR:-build/slice}"
trunk="${K3_SLICE_TRUNK_DIR:-build/slice-trunk}"
model=$slice
if [ ! -f "$trunk/trunk.bin" ] || [ ! -f "$slice/config.json" ]; then
    model="$K3_BUILD/models/wide-moe"
    [ -f "$model/config.json" ] ||
        "$PYTHON" tools/make_checkpoint.py "$model" --preset wide-moe >/dev/null
    trunk="$out/wide-moe-trunk"
    "$K3_BIN" pack-trunk "$model" "$trunk" --quiet
fi
file="$trunk/trunk.bin"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "file $file $(wc -c <"$file" | tr -d ' ') bytes"

# median: the median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

disk() {
    sh scripts/odirect-bw.sh "$file" 1 2 4 8 16 | tee "$out/disk-$1.txt" | tr '\n' ' '
    echo
}
echo "== the disk: parallel dd iflag=direct, 4 MiB reads (scripts/odirect-bw.sh)"
disk before

echo "== k3's reader alone (bench/io_depth, medians of $runs passes over the file)"
printf '%-8s %6s %10s\n' reader depth GB/s
for r in $(seq "$runs"); do
    K3_IO=threads "$K3_BUILD/bench/io_depth" "$file" 1 32
done | awk '{ print $NF }' | median | xargs printf '%-8s %6s %10.3f\n' threads 1x32MiB
for d in 1 2 4 8 16 32; do
    for r in $(seq "$runs"); do
        K3_IO=uring K3_IO_DEPTH=$d "$K3_BUILD/bench/io_depth" "$file" 1
    done >"$out/depth-$d.txt"
    if ! grep -q '^reader uring' "$out/depth-$d.txt"; then
        echo "uring: not available here (the runs fell back to threads)"
        break
    fi
    awk '{ print $NF }' "$out/depth-$d.txt" | median | xargs printf '%-8s %6s %10.3f\n' uring "$d"
done

echo "== decode, every layer and lm_head streamed ($model, $gen tokens, medians of $runs)"
for io in threads uring; do
    for r in $(seq "$runs"); do
        K3_IO=$io "$K3_BIN" "$model" --ids 1,2,3,4 --gen "$gen" --ignore-eos --quiet \
            --trunk "$trunk" --trunk-layers 0 --trunk-ring 2 --stream-lm-head \
            --out "$out/stream-$io-$r.json" >/dev/null
    done
done
disk after
"$PYTHON" - "$out" "$runs" <<'EOF_PY'
import json, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
best = 0.0
for k in ("before", "after"):
    for line in open(f"{out}/disk-{k}.txt"):
        if line.startswith("best"):
            best = max(best, float(line.split()[2]))
print("disk: %.3f GB/s (the best parallel dd rate, before or after)" % best)
print("%-8s %-14s %9s %12s %8s" % ("reader", "ran", "s/token", "stream GB/s", "of disk"))
for io in ("threads", "uring"):
    rows = []
    for r in range(1, runs + 1):
        d = json.load(open(f"{out}/stream-{io}-{r}.json"))
        t = d["trunk"]
        rows.append((d["seconds_per_token"],
                     t["bytes_read"] / t["read_seconds"] / 1e9 if t["read_seconds"] else 0))
        ran = d["io"]["reader"] + (" d%d" % d["io"]["depth"] if d["io"]["depth"] else "")
    spt = statistics.median(r[0] for r in rows)
    gbps = statistics.median(r[1] for r in rows)
    print("%-8s %-14s %9.3f %12.3f %7.0f%%" % (io, ran, spt, gbps, 100 * gbps / best if best else 0))
EOF_PY
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
