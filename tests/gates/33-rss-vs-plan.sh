# 33-rss-vs-plan: the memory plan is what the process uses. On wide-moe
# (experts ~200 MB, the rest small), three budgets -- everything resident;
# a pinned prefix of 2 layers + a 2-slot ring; nothing pinned, a 1-slot
# ring, 16 cached experts, embedding and lm_head streamed -- each run's peak
# RSS (getrusage, the --out report) stays within the plan's bytes.total plus
# ALLOW_MB, and the same ids come out of all three.
#
# ALLOW_MB covers what the plan does not count: the binary, libc and
# libgomp (a whole run on tiny-a peaks at 4.7 MB), the tensor index and
# bound views of wide-moe's ~2,300 tensors, thread stacks (OpenMP workers,
# the ring's reader, the MoE fetch thread), the CLI's id and logits buffers
# and malloc's rounding. Measured: the tiny budget, whose plan is nearly all
# touched, peaks 1.4 MB above its plan (18.2 MB of 16.8 MB); the other two
# stay ~16.5 MB under theirs (experts never routed to are never read).
#
# The growth check catches a plan that under-counts what scales with the
# call (the scratch arena, the KV cache), which is smaller than ALLOW_MB on
# a model this small: between an 8-id and a 300-id prompt on the tiny
# budget, peak RSS may grow by at most the long run's planned scratch plus
# its KV cache growth plus GROW_SLACK_MB (pages, malloc rounding).
# First, tests/progs/forward_pieces: a k3_forward call longer than the
# model's max_batch runs as pieces with the bits of one call, the plan's
# scratch is k3_forward_scratch at max_batch, and the arena grows past the
# planned context (on moe64 and wide-moe). The RSS checks skip sanitizer
# builds: their shadow memory and redzones are not the engine's.
. tests/gates/lib.sh
ALLOW_MB=12
GROW_SLACK_MB=2
for m in moe64 wide-moe; do
    "$K3_BUILD/progs/forward_pieces" "$(model "$m" "$m")" || die "forward_pieces on $m"
done
if grep -q __asan_init "$K3_BIN" 2>/dev/null || grep -q __ubsan_handle "$K3_BIN" 2>/dev/null; then
    echo "skipped: $K3_BIN is a sanitizer build (RSS is not the engine's)"
    exit 0
fi
dir=$(model wide-moe wide-moe)
work="$K3_BUILD/rss-plan"
mkdir -p "$work"
vocab=$(vocab_of "$dir")
long=$(prompt_ids "$vocab" 300)
short=$(prompt_ids "$vocab" 8)
tiny="--trunk-layers 0 --trunk-ring 1 --cache-experts 16 --stream-embed --stream-lm-head"
run() { # NAME IDS ARGS...: one run, its report in $work/NAME.json
    name=$1
    ids=$2
    shift 2
    "$K3_BIN" "$dir" --ids "$ids" --gen 6 --ignore-eos --quiet --out "$work/$name.json" "$@" \
        >"$work/$name.ids" 2>"$work/$name.err" || { cat "$work/$name.err"; die "$name: exit $?"; }
}
field() { # NAME KEY: an integer field of the run's report
    "$PYTHON" -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$work/$1.json" "$2"
}
mb() { "$PYTHON" -c 'import sys; print("%.2f" % (int(sys.argv[1]) / 2**20))' "$1"; }

allow=$((ALLOW_MB * 1024 * 1024))
# shellcheck disable=SC2086 # $tiny is a list of options
for b in "resident:--preset max" "ring:--trunk-layers 2 --trunk-ring 2" "tiny:$tiny"; do
    name=${b%%:*}
    run "$name" "$long" ${b#*:}
    rss=$(field "$name" peak_rss_bytes)
    total=$(field "$name" plan.bytes.total)
    echo "$name: peak RSS $(mb "$rss") MB, plan $(mb "$total") MB (scratch" \
        "$(mb "$(field "$name" plan.bytes.scratch)") MB), allowance $ALLOW_MB MB"
    [ "$rss" -le $((total + allow)) ] ||
        die "$name: peak RSS $rss bytes exceeds the plan's $total + $allow"
    cmp -s "$work/resident.ids" "$work/$name.ids" || die "$name: ids differ"
done
[ "$(field ring plan.streamed_layers)" -gt 0 ] || die "the ring budget streams no layer"
[ "$(field tiny plan.expert_slots)" -lt "$(field tiny plan.experts_total)" ] ||
    die "the tiny budget caches every expert"

# shellcheck disable=SC2086
run tiny-short "$short" $tiny
grow=$(($(field tiny peak_rss_bytes) - $(field tiny-short peak_rss_bytes)))
bound=$(($(field tiny plan.bytes.scratch) + $(field tiny plan.bytes.kv_cache) -
    $(field tiny-short plan.bytes.kv_cache) + GROW_SLACK_MB * 1024 * 1024))
echo "8 -> 300 prompt ids: peak RSS grows $(mb "$grow") MB, at most $(mb "$bound") MB"
[ "$grow" -le "$bound" ] || die "peak RSS grew $grow bytes with the call, over the plan's $bound"
