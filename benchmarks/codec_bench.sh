#!/bin/sh
# codec_bench.sh - the lossless trunk (k3 pack-trunk --compress, huffman
# blocks, and --compress-fast, nibble blocks) against the plain one, with every layer and lm_head streamed from trunk.bin (two ring
# slots; experts as the default plan caches them).
# Not a test: it reports, it does not judge. For each model - the trained
# k3-nano (models/k3-nano, real trained BF16 weights), a random wide-moe
# (float32 normal draws, the draw path of the slice) and the slice when
# K3_SLICE_DIR holds one (benchmarks/checkpoint.sh; not made here, 7.6 GB) -
# and each of plain, compressed and nibble: the stored/image ratio of the pack, and
# over $K3_BENCH_RUNS (3) runs of --gen $K3_CODEC_GEN (16) tokens the median
# trunk bytes read per generated token (the prefill's pass included, so
# the same overcount for both kinds), s/token, the stream rate (bytes off the disk
# over the reader's time), decoder GB/s per core (image bytes over decode
# CPU seconds) and the hash's share of a core while reading. Then the
# decoder alone on each compressed trunk (bench/codec_decode, median of 5)
# and the decoder and XXH3 on one core (build/tests/test_codec). trunk.bin reads are
# O_DIRECT, so the page cache does not flatter the plain run.
# Environment: K3_BIN, K3_BUILD, PYTHON as for tests/run.sh.
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
runs="${K3_BENCH_RUNS:-3}"
gen="${K3_CODEC_GEN:-16}"
out="$K3_BUILD/codec-bench"
mkdir -p "$out"
models="models/k3-nano"
wm="$K3_BUILD/models/wide-moe"
[ -f "$wm/config.json" ] || "$PYTHON" tools/make_checkpoint.py "$wm" --preset wide-moe >/dev/null
models="$models $wm"
slice="${K3_SLICE_DIR:-build/slice}"
[ -f "$slice/config.json" ] && models="$models $slice"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
printf '%-10s %-10s %9s %12s %9s %10s %11s %7s\n' model trunk stored% "MB/token" s/token \
    "stream GB/s" "decode GB/s" hash%
for m in $models; do
    name=$(basename "$m")
    for kind in plain compressed nibble; do
        t="$out/$name-$kind"
        flag=""
        [ "$kind" = compressed ] && flag=--compress
        [ "$kind" = nibble ] && flag=--compress-fast
        # shellcheck disable=SC2086
        "$K3_BIN" pack-trunk "$m" "$t" $flag --quiet
        for r in $(seq "$runs"); do
            "$K3_BIN" "$m" --ids 1,2,3,4 --gen "$gen" --ignore-eos --quiet --trunk "$t" \
                --trunk-layers 0 --trunk-ring 2 --stream-lm-head --out "$out/$name-$kind-$r.json" \
                >/dev/null
        done
        "$PYTHON" - "$t" "$out/$name-$kind" "$runs" "$gen" "$name" "$kind" <<'EOF_PY'
import json, statistics, sys
t, pre, runs, gen, name, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
m = json.load(open(t + "/trunk.json"))
stored = sum(r["stored"] for r in m["runs"]) / sum(r["length"] for r in m["runs"])
rows = []
for r in range(1, runs + 1):
    d = json.load(open(f"{pre}-{r}.json"))
    tr = d["trunk"]
    rows.append((tr["bytes_read"] / gen / 1e6,
                 d["seconds_per_token"],
                 tr["bytes_read"] / tr["read_seconds"] / 1e9 if tr["read_seconds"] else 0,
                 tr["image_bytes"] / tr["decode_seconds"] / 1e9 if tr["decode_seconds"] else 0,
                 100 * tr["hash_share"]))
med = [statistics.median(c) for c in zip(*rows)]
print("%-10s %-10s %8.1f%% %12.3f %9.4f %10.2f %11s %6.2f%%" % (
    name, kind, 100 * stored, med[0], med[1], med[2], "%.2f" % med[3] if med[3] else "-", med[4]))
EOF_PY
    done
done
echo "decoder alone, one core, on each compressed trunk ($K3_BUILD/bench/codec_decode, median of 5):"
for m in $models; do
    name=$(basename "$m")
    for kind in compressed nibble; do
        t="$out/$name-$kind"
        "$PYTHON" -c 'import json, sys
for r in json.load(open(sys.argv[1]))["runs"]: print(r["offset"], r["stored"], r["length"])' \
            "$t/trunk.json" >"$t.runs"
        if [ -x "$K3_BUILD/bench/codec_decode" ]; then
            printf '%-10s %-10s ' "$name" "$kind"
            "$K3_BUILD/bench/codec_decode" "$t/trunk.bin" "$t.runs" 5
        fi
    done
done
echo "one core (build/tests/test_codec, trained-like BF16 blocks):"
if [ -x "$K3_BUILD/tests/test_codec" ]; then "$K3_BUILD/tests/test_codec" | head -1; fi
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
