#!/bin/sh
# odirect-bw.sh - a disk's O_DIRECT read bandwidth with 1..N parallel readers.
#
#   scripts/odirect-bw.sh FILE [READERS ...]      (default READERS: 1 2 4 8)
#
# For each reader count P, FILE is cut into P contiguous pieces (whole 4 MiB
# blocks; the tail past the last whole block is not read) and P `dd
# iflag=direct bs=4M` processes read one piece each at the same time. The
# bandwidth is the bytes all of them read divided by the wall time from the
# first start to the last end, so it is the disk's, not one reader's.
#
# Why parallel: one sequential dd keeps one request in flight, which
# under-reports a virtual or NVMe disk by up to 2x; k3's reader keeps several
# in flight, so the ratio "stream GB/s / disk GB/s" in the benchmarks is only
# honest against the disk's parallel rate.
#
# Output, one line per reader count, then the best:
#   readers P GBPS
#   best P GBPS
# GB is 10^9 bytes. FILE should be much larger than any cache in front of the
# disk that O_DIRECT does not bypass (a virtual disk's host cache).
#
# Exit codes: 0 measured; 1 a read failed (or O_DIRECT is refused: the
# message is dd's); 2 bad usage.
set -u

usage() {
    echo "usage: $0 FILE [READERS ...]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
file=$1
shift
[ -f "$file" ] && [ -r "$file" ] || {
    echo "odirect-bw: $file is not a readable file" >&2
    exit 2
}
[ $# -gt 0 ] || set -- 1 2 4 8
for p in "$@"; do
    case $p in '' | *[!0-9]* | 0) usage ;; esac
done

block=4194304
size=$(wc -c <"$file" | tr -d ' ')
nblocks=$((size / block))
[ "$nblocks" -ge 1 ] || {
    echo "odirect-bw: $file is smaller than one 4 MiB block" >&2
    exit 2
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/odirect-bw.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# now: seconds since the epoch with nanoseconds (GNU date), else whole seconds.
now() { date +%s.%N 2>/dev/null | sed 's/\.N$//'; }

best_p=0
best=0
for p in "$@"; do
    [ "$p" -le "$nblocks" ] || continue
    per=$((nblocks / p))
    start=$(now)
    i=0
    pids=""
    while [ "$i" -lt "$p" ]; do
        dd if="$file" of=/dev/null bs=$block iflag=direct skip=$((i * per)) count=$per \
            2>"$tmp/dd.$i" &
        pids="$pids $!"
        i=$((i + 1))
    done
    # Waited for by process id: `$(jobs -p)` runs in a subshell, which in
    # dash knows no jobs, so nothing was waited for and the rate was absurd.
    failed=0
    for pid in $pids; do
        wait "$pid" || failed=1
    done
    end=$(now)
    if [ "$failed" -ne 0 ]; then
        cat "$tmp"/dd.* | grep -v -e records -e copied | head -n 1 >&2
        exit 1
    fi
    gbps=$(awk -v b="$((p * per * block))" -v s0="$start" -v s1="$end" \
        'BEGIN { s = s1 - s0; printf "%.3f", (s > 0 ? b / s / 1e9 : 0) }')
    echo "readers $p $gbps"
    if awk -v a="$gbps" -v b="$best" 'BEGIN { exit !(a > b) }'; then
        best=$gbps
        best_p=$p
    fi
done
[ "$best_p" -gt 0 ] || {
    echo "odirect-bw: no reader count fits in $nblocks blocks of 4 MiB" >&2
    exit 2
}
echo "best $best_p $best"
