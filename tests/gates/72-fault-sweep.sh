# 72-fault-sweep: every weight read and every aligned allocation of whole
# tiny-a runs made to fail, one at a time, through the test-only fault shim
# (io/fault.h: every read attempt of io/direct.c - experts, packed trunk
# runs - and of io/pread_all.c - tensors and trunk runs read from the
# shards), in a -DK3_FAULT_INJECTION build of bin/k3 in $K3_BUILD/fault,
# with the build's CC, OPT and CFLAGS, so `make asan` sanitizes every case.
#
# Configurations: experts from the shards with the trunk resident; the
# packed trunk pinned; the packed trunk streamed through one ring slot with
# a one-expert cache (every step re-reads everything); the same with a
# compressed trunk (pack-trunk --compress: a corrupted, short or failed
# read of its blocks or block table must end in RUN INVALID too, never in
# a decoded wrong token); and the streamed one again in text mode (a --merges 0 tokenizer of tiny-a's 512 ids), where tokens
# print as they are made. All on the default reader (io_uring where the
# kernel gives one, io/read_queue.h), then the streamed one on the threads
# reader (K3_IO=threads), 12 reads sampled. For each, the reads (R) and allocations (Q) of a
# clean run are counted (bisection on K3_FAULT), then for N over 1..R (all
# when R <= K3_SWEEP_MAX, default 48, else an even sample of that many with
# both ends; K3_SWEEP_MAX=0 sweeps all):
#   read:N:fail:3, read:N:short:3  exit 4, "RUN INVALID"
#   alloc:N (all of 1..Q)          exit 1, "out of memory"
#   read:N:corrupt                 exit 4 (a checksum or scale check fired)
#                                  or exit 0 (counted: see below), or exit 2
#                                  when the read was a packed trunk's source
#                                  fingerprint sample ("packed from other
#                                  weights", io/trunk_source.h)
#   read:N:fail, read:N:short, read:N:einval (every 4th N)
#                                  one bad attempt: retried or re-read
#                                  buffered, exit 0, the clean output
# Every failing case must print "k3: error: ..." and nothing from a
# sanitizer, end by exit (no signal), and print NO wrong token: stdout
# empty in --ids mode (ids print at the end), a prefix of the clean
# run's text in text mode. A case may also exit 0 with exactly the clean
# output: the fault hit a read whose bytes were never used (a prefetch
# still in flight at exit).
#
# Corruption: every read of trunk.bin made while opening a model with a
# pinned packed trunk must fail its run's checksum (exit 4). A NaN weight
# makes the logits non-finite: exit 4, no token. Inverted expert bytes are
# caught only where a scale byte becomes 255; they and tensors read from
# the shards otherwise run on (exit 0) - the release format has no
# checksum for them (docs/SECURITY.md). The last lines count every outcome
# per kind of fault.
# ladder: check
# (make check and CI only, not make test: a fault at every read and allocation of whole runs)
. tests/gates/lib.sh
W="$K3_BUILD/fault-sweep"
rm -rf "$W"
mkdir -p "$W"
A=$(model tiny-a tiny-a)
MAX=${K3_SWEEP_MAX:-48}

fb="$K3_BUILD/fault"
(
    unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL
    make -s -j2 BUILD="$fb" CC="${CC:-cc}" OPT="${OPT:--O2 -g}" \
        CFLAGS="${CFLAGS:-} -DK3_FAULT_INJECTION" "$fb/bin/k3"
) || die "the fault-injection build failed"
F="$fb/bin/k3"
"$F" pack-trunk "$A" "$W/trunk" 2>/dev/null || die "pack-trunk"
"$F" pack-trunk "$A" "$W/ctrunk" --compress 2>/dev/null || die "pack-trunk --compress"
"$PYTHON" tools/make_tokenizer.py "$W/tok" --merges $(($(vocab_of "$A") - 512)) >/dev/null ||
    die "make_tokenizer"
ids=$(prompt_ids "$(vocab_of "$A")" 6)
stream="--trunk $W/trunk --trunk-layers 0 --trunk-ring 1 --cache-experts 1"

# run SPEC ARGS...: K3_FAULT=SPEC k3 ARGS; sets rc, out and err files.
run() {
    spec=$1
    shift
    set +e
    K3_FAULT="$spec" "$F" "$@" >"$W/out" 2>"$W/err"
    rc=$?
    set -e
}

# count PATTERN ARGS...: the largest N for which K3_FAULT=PATTERN (@ = N)
# changes the exit code of the run from the clean one; 0 when none does.
count() {
    pat=$1
    shift
    run "" "$@"
    base=$rc
    lo=0
    hi=1
    while run "${pat%%@*}$hi${pat#*@}" "$@" && [ "$rc" -ne "$base" ]; do
        lo=$hi
        hi=$((hi * 2))
        [ "$hi" -le 1048576 ] || die "$pat: no end to the faults"
    done
    while [ $((hi - lo)) -gt 1 ]; do
        mid=$(((lo + hi) / 2))
        run "${pat%%@*}$mid${pat#*@}" "$@"
        if [ "$rc" -ne "$base" ]; then lo=$mid; else hi=$mid; fi
    done
    echo "$lo"
}

# sample R: the N to sweep, 1..R or MAX of them spread evenly.
sample() {
    if [ "$MAX" -eq 0 ] || [ "$1" -le "$MAX" ]; then
        seq 1 "$1"
    else
        awk -v r="$1" -v m="$MAX" 'BEGIN { for (i = 0; i < m; i++) print 1 + int(i * (r - 1) / (m - 1)) }'
    fi
}

cases=0
# tally KIND OUTCOME: counts outcomes per kind of fault in t_KIND_OUTCOME.
tally() {
    eval "t_$1_$2=\$((\${t_$1_$2:-0} + 1))"
}
# check NAME SPEC KIND CODE PATTERN MODE ARGS...: one case. CODE is the exit
# a failure must have: 4 or 1; 0 when only the clean outcome is acceptable;
# "corrupt" when exit 4 (a check fired) and running on are both possible.
check() {
    name=$1
    spec=$2
    kind=$3
    want=$4
    pat=$5
    text=$6
    shift 6
    run "$spec" "$@"
    cases=$((cases + 1))
    what="$name K3_FAULT=$spec: exit $rc"
    ! grep -Eq 'Sanitizer|runtime error:|LeakSanitizer' "$W/err" || { cat "$W/err"; die "$what: sanitizer report"; }
    if [ "$rc" -eq 0 ]; then
        if cmp -s "$W/out" "$W/clean"; then
            tally "$kind" clean
            return 0
        fi
        [ "$want" = corrupt ] || die "$what, but the output differs from the clean run"
        tally "$kind" changed
        return 0
    fi
    if [ "$want" = corrupt ] && [ "$rc" -eq 2 ] &&
        grep -Eq 'packed from other weights|small vectors must be finite' "$W/err"; then
        [ ! -s "$W/out" ] || die "$what: printed output after the fault"
        tally "$kind" exit2
        return 0
    fi
    [ "$want" = corrupt ] && want=4
    [ "$rc" -eq "$want" ] || { cat "$W/err"; die "$what, expected $want"; }
    head -n 1 "$W/err" | grep -Eq "^k3: error: .*($pat)" || { cat "$W/err"; die "$what: no clear message"; }
    if [ "$text" = text ]; then
        size=$(wc -c <"$W/out")
        head -c "$size" "$W/clean" | cmp -s - "$W/out" ||
            die "$what: printed text that is not the clean run's"
    else
        [ ! -s "$W/out" ] || die "$what: printed ids after the fault"
    fi
    tally "$kind" "exit$rc"
}

# sweep NAME MODE ARGS...: the whole sweep over one configuration.
sweep() {
    name=$1
    mode=$2
    shift 2
    run "" "$@"
    [ "$rc" -eq 0 ] || { cat "$W/err"; die "$name: the clean run fails"; }
    cp "$W/out" "$W/clean"
    R=$(count "read:@:fail:3" "$@")
    Q=$(count "alloc:@" "$@")
    [ "$R" -gt 0 ] && [ "$Q" -gt 0 ] || die "$name: no reads ($R) or allocations ($Q) to fault"
    n0=$cases
    k=0
    for N in $(sample "$R"); do
        check "$name" "read:$N:fail:3" fail3 4 'RUN INVALID.*Input/output error' "$mode" "$@"
        check "$name" "read:$N:short:3" short3 4 'RUN INVALID.*short read' "$mode" "$@"
        check "$name" "read:$N:corrupt" corrupt corrupt 'RUN INVALID' "$mode" "$@"
        if [ $((k % 4)) -eq 0 ]; then
            for t in fail short einval; do
                check "$name" "read:$N:$t" once 0 '' "$mode" "$@"
            done
        fi
        k=$((k + 1))
    done
    for N in $(seq 1 "$Q"); do
        check "$name" "alloc:$N" alloc 1 'out of memory' "$mode" "$@"
    done
    printf '%-13s %4d reads %3d allocations: %4d cases\n' "$name" "$R" "$Q" $((cases - n0))
}

sweep resident ids "$A" --ids "$ids" --gen 4 --ignore-eos --quiet
sweep pinned-trunk ids "$A" --ids "$ids" --gen 4 --ignore-eos --quiet --trunk "$W/trunk"
# shellcheck disable=SC2086
sweep streamed ids "$A" --ids "$ids" --gen 4 --ignore-eos --quiet $stream
# shellcheck disable=SC2086
sweep streamed-codec ids "$A" --ids "$ids" --gen 4 --ignore-eos --quiet \
    --trunk "$W/ctrunk" --trunk-layers 0 --trunk-ring 1 --cache-experts 1
# shellcheck disable=SC2086
sweep text text "$A" --tok "$W/tok" --prompt "Hello, fault sweep" --gen 6 --ignore-eos --quiet $stream
# Those ran on the default reader (io_uring where the kernel gives one:
# io/read_queue.h); the streamed configuration again on the threads reader,
# sampled (both run io/direct.h's retry policy, k3_read_op).
# shellcheck disable=SC2086
"$F" "$A" --ids "$ids" --gen 1 --verbose $stream 2>&1 >/dev/null | grep '^io: ' ||
    die "the report names no reader"
MAX0=$MAX
MAX=$((MAX < 12 && MAX > 0 ? MAX : 12))
export K3_IO=threads
# shellcheck disable=SC2086
sweep streamed-thr ids "$A" --ids "$ids" --gen 4 --ignore-eos --quiet $stream
unset K3_IO
MAX=$MAX0

# The pinned trunk is read while opening the model, before the prompt is
# checked (an id beyond the vocabulary stops the run there, exit 2). Each
# read at open is told apart by the file its failure names: every read of
# trunk.bin, corrupted, must fail its run's checksum (exit 4); a tensor read
# from the shards (norms, small tensors: no checksum in the release) runs
# on to the vocabulary error, or, when it was a sample of the trunk's
# source fingerprint, is refused as other weights (exit 2).
R0=$(count "read:@:fail:3" "$A" --ids 1,1000000 --quiet --trunk "$W/trunk")
[ "$R0" -gt 0 ] || die "no reads at open"
T0=0
for N in $(seq 1 "$R0"); do
    run "read:$N:fail:3" "$A" --ids 1,1000000 --quiet --trunk "$W/trunk"
    [ "$rc" -eq 4 ] || { cat "$W/err"; die "read $N at open, failed: exit $rc"; }
    of_trunk=0
    grep -q "trunk.bin" "$W/err" && of_trunk=1
    run "read:$N:corrupt" "$A" --ids 1,1000000 --quiet --trunk "$W/trunk"
    [ ! -s "$W/out" ] || die "corrupted read $N at open: ids printed"
    cases=$((cases + 1))
    if [ "$of_trunk" -eq 1 ]; then
        [ "$rc" -eq 4 ] && grep -q 'fails its checksum' "$W/err" ||
            { cat "$W/err"; die "corrupted trunk read $N not caught by its checksum (exit $rc)"; }
        T0=$((T0 + 1))
    else
        [ "$rc" -eq 2 ] &&
            grep -Eq 'outside the vocabulary|packed from other weights|must be finite' "$W/err" ||
            { cat "$W/err"; die "corrupted shard read $N at open: exit $rc"; }
    fi
done
[ "$T0" -gt 0 ] || die "no trunk.bin read at open"
echo "pinned trunk: $R0 reads at open; all $T0 of trunk.bin, corrupted, failed their checksum (exit 4)"
# The same for a compressed trunk: every read of its trunk.bin at open (the
# block tables, then the blocks), corrupted, must end in RUN INVALID: the
# table lies, a block does not decode, or the decoded bytes fail the
# checksum. Never a run on.
R1=$(count "read:@:fail:3" "$A" --ids 1,1000000 --quiet --trunk "$W/ctrunk")
T1=0
for N in $(seq 1 "$R1"); do
    run "read:$N:fail:3" "$A" --ids 1,1000000 --quiet --trunk "$W/ctrunk"
    grep -q "trunk.bin" "$W/err" || continue
    run "read:$N:corrupt" "$A" --ids 1,1000000 --quiet --trunk "$W/ctrunk"
    cases=$((cases + 1))
    [ ! -s "$W/out" ] || die "corrupted compressed trunk read $N at open: ids printed"
    [ "$rc" -eq 4 ] && grep -Eq 'RUN INVALID: .*(fails its checksum|does not decode|block table lies)' "$W/err" ||
        { cat "$W/err"; die "corrupted compressed trunk read $N not caught (exit $rc)"; }
    T1=$((T1 + 1))
done
[ "$T1" -gt 0 ] || die "no compressed trunk.bin read at open"
echo "compressed pinned trunk: $R1 reads at open; all $T1 of trunk.bin, corrupted, ended in RUN INVALID (exit 4)"
# A weight that is NaN (a corrupted download: most weights have no
# checksum) must not yield tokens: non-finite logits make the run invalid.
# (A small vector is refused at load instead: gate 21.)
rm -rf "$W/nan"
cp -R "$A" "$W/nan"
"$PYTHON" - "$W/nan" <<'EOF_NAN' || die "could not write the NaN weight"
import json, struct, sys
d = sys.argv[1]
name = "language_model.lm_head.weight"
path = d + "/" + json.load(open(d + "/model.safetensors.index.json"))["weight_map"][name]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
b, e = json.loads(raw[8:8 + n])[name]["data_offsets"]
raw[8 + n + b:8 + n + e] = b"\xc0\x7f" * ((e - b) // 2)  # BF16 NaN
open(path, "wb").write(raw)
EOF_NAN
printf '%-26s ' nan-weight
expect_exit 4 'RUN INVALID: logit .* is not finite' "$F" "$W/nan" --ids "$ids" --gen 4 --quiet
[ ! -s "$K3_BUILD/expect.out" ] || die "nan-weight: ids printed"
cases=$((cases + 1))
echo "$cases fault cases, no crash, no sanitizer report, no wrong token:"
echo "  read fails 3 attempts:   ${t_fail3_exit4:-0} exit 4, ${t_fail3_clean:-0} clean (an unused prefetch)"
echo "  read short 3 attempts:   ${t_short3_exit4:-0} exit 4, ${t_short3_clean:-0} clean (an unused prefetch)"
echo "  allocation fails:        ${t_alloc_exit1:-0} exit 1"
echo "  one bad attempt:         ${t_once_clean:-0} clean (retried or re-read buffered)"
echo "  read corrupted:          ${t_corrupt_exit4:-0} exit 4 (checksum or scale)," \
    "${t_corrupt_exit2:-0} exit 2 (a trunk's source fingerprint, a non-finite small vector)," \
    "${t_corrupt_clean:-0} clean," \
    "${t_corrupt_changed:-0} ran on with other tokens (experts, tensors from the shards: no checksum exists)"
