#!/bin/sh
# pack_bench.sh - the trunk packer and the streamed trunk against this disk.
# Not a test: it reports, it does not judge. Medians of $K3_BENCH_RUNS (3).
#   1. disk ceilings with dd and direct I/O on the same file system: a
#      shard-to-file copy (iflag=direct oflag=direct) of as many bytes as the
#      pack copies, and a plain direct read (iflag=direct) of trunk.bin;
#   2. k3 pack-trunk --layers 1 --force of the slice checkpoint (layer 0 at
#      the release's widths, lm_head, embedding: ~2.6 GB): copy GB/s, verify
#      GB/s and the whole pack (copy + fsync + verify) in GB/s;
#   3. a run streaming every layer from trunk.bin (--trunk, --trunk-layers
#      0, two ring slots): trunk read GB/s while computing, and the checksum
#      time per GB.
# Caches: dropping them needs root in the initial namespace (here even root
# is refused), so every measured read bypasses the page cache instead: dd
# with iflag=direct, the packer's shard reads and verification and the
# engine's trunk.bin reads are O_DIRECT. The packer's writes are buffered
# and end in fsync, which the timing includes; dd's writes are O_DIRECT.
# Environment: K3_BIN, K3_BUILD, PYTHON as for tests/run.sh; K3_SLICE_DIR
# (default build/slice, shared with bench.sh and plots.sh: benchmarks/checkpoint.sh).
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
slice="${K3_SLICE_DIR:-build/slice}"
runs="${K3_BENCH_RUNS:-3}"
out="$K3_BUILD/pack-bench"
mkdir -p "$out"

# Made once and reused (benchmarks/checkpoint.sh, shared with bench.sh).
# shellcheck source=benchmarks/checkpoint.sh
. benchmarks/checkpoint.sh
checkpoint "$slice" slice

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
now() { "$PYTHON" -c 'import time; print(time.monotonic())'; }
# rate BYTES START END: GB/s
rate() { "$PYTHON" -c 'import sys; b,s,e=map(float,sys.argv[1:]); print("%.3f" % (b/(e-s)/1e9))' "$@"; }

echo "== pack-trunk --layers 1 --force (median of $runs)"
: >"$out/pack.txt"
for _ in $(seq "$runs"); do
    "$K3_BIN" pack-trunk "$slice" "$out/trunk1" --layers 1 --force 2>"$out/pack.log"
    line=$(grep "pack-trunk: packed" "$out/pack.log")
    echo "  $line"
    echo "$line" | sed 's/.*, \([0-9.]*\) GB, into.* in \([0-9.]*\) s: copy \([0-9.]*\) GB\/s, verify \([0-9.]*\) GB\/s/\1 \2 \3 \4/' >>"$out/pack.txt"
done
bytes=$(awk '{print $1 * 1e9; exit}' "$out/pack.txt")
pack_total=$(awk '{printf "%.3f\n", $1 / $2}' "$out/pack.txt" | median)
pack_copy=$(awk '{print $3}' "$out/pack.txt" | median)
pack_verify=$(awk '{print $4}' "$out/pack.txt" | median)

echo "== dd shard -> file, iflag=direct oflag=direct, the same bytes (median of $runs)"
shard=$(ls "$slice"/model-00001-of-*.safetensors)
count=$(awk -v b="$bytes" 'BEGIN {printf "%d", b / 16777216}')
: >"$out/dd_copy.txt"
for _ in $(seq "$runs"); do
    s=$(now)
    dd if="$shard" of="$out/dd.bin" bs=16M count="$count" iflag=direct oflag=direct 2>/dev/null
    e=$(now)
    rate "$((count * 16777216))" "$s" "$e" | tee -a "$out/dd_copy.txt" | sed 's/^/  GB\/s /'
    rm -f "$out/dd.bin"
done
dd_copy=$(median <"$out/dd_copy.txt")

echo "== dd trunk.bin -> /dev/null, iflag=direct (median of $runs)"
: >"$out/dd_read.txt"
for _ in $(seq "$runs"); do
    s=$(now)
    dd if="$out/trunk1/trunk.bin" of=/dev/null bs=16M iflag=direct 2>/dev/null
    e=$(now)
    rate "$(wc -c <"$out/trunk1/trunk.bin")" "$s" "$e" | tee -a "$out/dd_read.txt" | sed 's/^/  GB\/s /'
done
dd_read=$(median <"$out/dd_read.txt")

echo "== streaming the whole slice trunk from trunk.bin (median of $runs)"
"$K3_BIN" pack-trunk "$slice" "$out/trunk" --quiet
ids=$("$PYTHON" -c 'print(",".join(str((i*7919+13)%7936) for i in range(8)))')
: >"$out/stream.txt"
for _ in $(seq "$runs"); do
    "$K3_BIN" "$slice" --trunk "$out/trunk" --trunk-layers 0 --trunk-ring 2 --stream-lm-head \
        --ids "$ids" --gen 1 --ignore-eos --quiet --out "$out/stream.json" >/dev/null
    "$PYTHON" -c '
import json, sys
t = json.load(open(sys.argv[1]))["trunk"]
print("%.3f %.4f %.3f" % (t["bytes_read"] / t["read_seconds"] / 1e9,
                          t["verify_seconds"] / (t["bytes_read"] / 1e9), t["bytes_read"] / 1e9))
' "$out/stream.json" | tee -a "$out/stream.txt" | awk '{print "  read " $1 " GB/s, checksums " $2 " s per GB, " $3 " GB read"}'
done
stream=$(awk '{print $1}' "$out/stream.txt" | median)
verify=$(awk '{print $2}' "$out/stream.txt" | median)

echo "== report"
echo "pack-trunk (~$(awk -v b="$bytes" 'BEGIN {printf "%.2f", b / 1e9}') GB): copy $pack_copy GB/s, verify $pack_verify GB/s, whole pack $pack_total GB/s"
echo "dd direct copy of the same bytes: $dd_copy GB/s  (pack copy / dd: $(awk -v a="$pack_copy" -v b="$dd_copy" 'BEGIN {printf "%.2f", a / b}'))"
echo "streamed trunk during a run: $stream GB/s; dd direct read of trunk.bin: $dd_read GB/s  (ratio $(awk -v a="$stream" -v b="$dd_read" 'BEGIN {printf "%.2f", a / b}'))"
echo "checksum (XXH64) of streamed runs: $verify s per GB (hashing on a helper thread while the run is read)"
