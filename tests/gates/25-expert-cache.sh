# 25-expert-cache: the expert cache returns exactly the shards' bytes under
# every capacity, evicts in LRU order, never evicts a pinned expert, and turns
# every unreadable or broken expert into RUN INVALID (exit 4) with nothing
# half-read left behind; tools/sim_cache.py reproduces the cache's own
# hits and misses and gets a hand trace's numbers exactly.
#
# Faults are injected by a second build of the library with
# -DK3_FAULT_INJECTION in $K3_BUILD/fault, with the CC, OPT and CFLAGS of
# the build under test (make exports its command-line variables to the
# test ladder), so `make asan` sanitizes the fault paths too.
# ladder: check
# (make check and CI only, not make test: every capacity x both readers x every fault)
. tests/gates/lib.sh
prog="$K3_BUILD/progs/expert_cache_check"
[ -x "$prog" ] || die "$prog is not built"
work="$K3_BUILD/expert-cache"
rm -rf "$work"
mkdir -p "$work"
moe=$(model moe64 moe64)
tiny=$(model tiny-a tiny-a)
sim() { "$PYTHON" tools/sim_cache.py "$@"; }
# run OUT CMD...: runs CMD, shows its output (also kept in OUT), dies if it fails.
run() {
    out=$1
    shift
    "$@" >"$out" 2>&1 || {
        cat "$out"
        die "$*"
    }
    cat "$out"
}

echo "== simulator: a hand trace with known numbers"
# Layers alternate, so every request is a batch of its own. Keys A=(1,0)
# B=(2,0) C=(1,1) D=(2,1) E=(1,2); sequence A B C D A B E D A B C D.
# 3 slots: LRU misses all 12 (a cycle one longer than the cache); Belady
# hits A B at 5-6, D A at 8-9 and D at 12 (evicting C at 4, B at 7, A at 10,
# E at 11: ties between never-again keys go to the lowest key). 5 slots:
# 5 cold misses. prefix1 on 5 slots pins layer 1 (3 experts) and leaves 2
# slots for B D: 2 misses. 6 passes (tokens); 1 GB per expert.
printf '%s\n' "1 0 miss" "2 0 miss" "1 1 miss" "2 1 miss" "1 0 miss" "2 0 miss" \
    "1 2 miss" "2 1 miss" "1 0 miss" "2 0 miss" "1 1 miss" "2 1 miss" >"$work/hand.txt"
sim "$work/hand.txt" --capacity 3,5 --experts 3 --expert-bytes 1000000000 \
    --pin-layers 1 | tr -s ' ' >"$work/hand.out"
cat "$work/hand.out"
for row in "recorded - - 12 0 12 0.00 2.0000 0.000" \
    "lru 3 3.000 12 0 12 0.00 2.0000 0.000" \
    "belady 3 3.000 12 5 7 41.67 1.1667 0.000" \
    "lru 5 5.000 12 7 5 58.33 0.8333 0.000" \
    "belady 5 5.000 12 7 5 58.33 0.8333 0.000" \
    "prefix1 5 5.000 12 10 2 83.33 0.3333 3.000"; do
    grep -qx "$row" "$work/hand.out" || die "sim_cache: no row \"$row\""
done

echo "== simulator: Belady >= LRU on a synthetic skewed trace"
"$PYTHON" -c '
import random
r = random.Random(5)
for t in range(300):
    for layer in (1, 2, 3):
        ids = set()
        while len(ids) < 8:
            ids.add(min(int(r.paretovariate(1.2)) - 1, 63))
        for x in sorted(ids):
            print(layer, x, "miss")
' >"$work/synth.txt"
belady_ge_lru() { # TRACE CAPS: every capacity's Belady hits >= its LRU hits
    sim "$1" --capacity "$2" --policy lru,belady | awk '
        $1 == "lru" { lru[$2] = $5 } $1 == "belady" { bel[$2] = $5 }
        END { for (c in lru) { n++; if (bel[c] < lru[c]) { print "capacity " c ": belady " bel[c] " < lru " lru[c]; bad = 1 } }
              if (!n) { print "no rows"; bad = 1 } exit bad }' || die "sim_cache: Belady below LRU on $1"
}
belady_ge_lru "$work/synth.txt" 1,4,8,16,24,48,96,192
sim "$work/synth.txt" --capacity 8,24,96 --pin-layers 1

echo "== I/O layer: random unaligned spans vs pread"
"$prog" "$moe" io --direct 0 --expect-direct 0 --expect-fallbacks 0
run "$work/io.out" "$prog" "$moe" io --direct 1
# Where the file system gives direct I/O (ext4: alignment enforced), the
# cache's reads must never have needed the buffered fallback.
fallbacks=""
grep -q 'direct reads' "$work/io.out" && fallbacks="--expect-fallbacks 0"

echo "== cache vs shards: every capacity, random sequences, LRU as simulated"
for m in "$moe" "$tiny"; do
    for slots in 1 3 k 2k all; do
        for direct in 1 0; do
            t="$work/trace-$(basename "$m")-$slots-$direct.txt"
            run "$work/verify.out" "$prog" "$m" verify --slots "$slots" --direct "$direct" \
                --seed "$direct$slots" --trace "$t" $fallbacks
            cap=$(sed -n 's/^verify: \([0-9]*\) slots.*/\1/p' "$work/verify.out" | head -n 1)
            grep -Evq '^[0-9]+ [0-9]+ (hit|miss)$' "$t" && die "$t: a line is not 'layer expert hit|miss'"
            sim "$t" --verify-lru "$cap" || die "the cache's hits and misses are not LRU's at $cap"
        done
    done
done
belady_ge_lru "$work/trace-moe64-2k-1.txt" 8,16,32,64,128
# Those ran on the default reader (io_uring where the kernel gives one: the
# report says which); the other reader must give the same bytes.
reader=$(sed -n 's/^verify: read by the \([a-z+]*\) reader.*/\1/p' "$work/verify.out")
echo "the default reader: $reader"
for slots in 3 2k; do
    run "$work/verify.out" env K3_IO=threads "$prog" "$moe" verify --slots "$slots" --direct 1 \
        --seed "7$slots" $fallbacks
    grep -q '^verify: read by the threads reader' "$work/verify.out" || die "K3_IO=threads ignored"
done

echo "== LRU order and pinning"
"$prog" "$moe" lru
"$prog" "$moe" pin

echo "== broken shards: truncated after opening, a 255 scale byte"
cp -R "$moe" "$work/trunc"
run "$work/trunc.out" "$prog" "$work/trunc" truncate --expect-code 4 --expect-msg "short read"
grep -q 'refused as expected (4): RUN INVALID: reading bytes .* failed after 3 attempts' \
    "$work/trunc.out" || die "truncated shard: no RUN INVALID"
"$PYTHON" tests/gates/corrupt.py nan-scale "$moe" "$work/nan"
run "$work/nan.out" "$prog" "$work/nan" nan --slots 2k --expect-code 4 \
    --expect-msg "w2.weight_scale: scale byte 5 is 255"
grep -q 'refused as expected (4): RUN INVALID: tensor ' "$work/nan.out" ||
    die "255 scale: no RUN INVALID naming the tensor"

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    echo "== a model on /dev/shm (tmpfs: direct I/O refused or not enforced)"
    shm="/dev/shm/k3-expert-cache-$$"
    trap 'rm -rf "$shm"' EXIT
    cp -R "$moe" "$shm"
    "$prog" "$shm" io --direct 1
    "$prog" "$shm" verify --slots 2k --direct 1
    rm -rf "$shm"
fi

echo "== fault injection build"
fb="$K3_BUILD/fault"
# The parent make's variables (BUILD, CFLAGS, ...) must not leak in.
(
    unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL
    make -s -j2 BUILD="$fb" CC="${CC:-cc}" OPT="${OPT:--O2 -g}" \
        CFLAGS="${CFLAGS:-} -DK3_FAULT_INJECTION" "$fb/progs/expert_cache_check"
) || die "the fault-injection build failed"
fprog="$fb/progs/expert_cache_check"
run_fault() { # SPEC ARGS...: the run must succeed
    spec=$1
    shift
    env K3_FAULT="$spec" "$fprog" "$@" >"$work/fault.out" 2>&1 || {
        cat "$work/fault.out"
        die "K3_IO=${K3_IO:-} K3_FAULT=$spec $*"
    }
    printf 'K3_FAULT=%-18s %s\n' "$spec" "$(tail -n 2 "$work/fault.out" | tr '\n' ' ')"
}
# The faults once with each reader (io/read_queue.h): both run the same
# retry policy (io/direct.h k3_read_op).
for K3_IO in threads uring; do
    export K3_IO
    echo "-- K3_IO=$K3_IO"
    # One read of one expert fails or comes back short all 3 attempts: RUN
    # INVALID, no view, and the expert is read whole on the next fetch.
    run_fault read:1:fail:3 "$moe" fault --expect-code 4 \
        --expect-msg "failed after 3 attempts (Input/output error) [layer"
    run_fault read:1:short:3 "$moe" fault --expect-code 4 --expect-msg "short read"
    # A single bad attempt is retried, invisibly.
    run_fault read:5:fail "$moe" verify --slots k --steps 4
    run_fault read:3:short "$moe" verify --slots 3 --steps 4
    # EINVAL from a direct read: the file falls back to buffered reads.
    run_fault read:1:einval "$moe" verify --slots k --steps 4 --direct 1 --expect-fallbacks +
    run_fault read:2:einval "$moe" io --direct 1 --expect-fallbacks +
    # Silent corruption is what the byte comparison catches (the check is live).
    printf 'K3_FAULT=%-18s ' read:2:corrupt
    expect_exit 9 'differs from the shard' env K3_FAULT=read:2:corrupt "$fprog" "$moe" verify --steps 4
    # A slot allocation fails: a clean error, nothing leaked (under ASan).
    printf 'K3_FAULT=%-18s ' alloc:3
    expect_exit 1 'out of memory allocating .* for an expert slot' \
        env K3_FAULT=alloc:3 "$fprog" "$moe" verify --slots 2k --steps 1
done
unset K3_IO

echo "== read pattern and lookup cost (moe64; numbers for the record)"
"$prog" "$moe" bench --slots k --steps 16
echo "expert cache: all checks passed"
