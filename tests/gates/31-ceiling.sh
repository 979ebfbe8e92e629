# 31-ceiling: under a hard memory ceiling (a cgroup of our own: v2 memory.max
# where the v2 hierarchy has the memory controller, else v1
# memory.limit_in_bytes), a model whose experts alone need ~200 MB runs
# streamed inside 64 MB: same ids as the unconstrained all-resident run, peak
# RSS inside the ceiling. The all-resident plan under the same ceiling is
# refused before allocating (exit 3, naming the shortfall), not OOM-killed.
# Swap must be off (else the ceiling would not be hard). This needs a
# writable cgroup (root); without one the gate fails and says why.
. tests/gates/lib.sh
dir=$(model wide-moe wide-moe)
work="$K3_BUILD/ceiling"
mkdir -p "$work"
limit=$((64 * 1024 * 1024))
[ "$(wc -l </proc/swaps)" -le 1 ] || die "swap is on: a memory ceiling would not be hard"

cg=""
v2=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
if grep -qw memory "$v2/cgroup.controllers" 2>/dev/null && mkdir "$v2/k3-ceiling-$$" 2>/dev/null; then
    cg="$v2/k3-ceiling-$$"
    echo "$limit" >"$cg/memory.max"
    echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
else
    v1=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
    mkdir "$v1/k3-ceiling-$$" 2>/dev/null ||
        die "no writable cgroup (v2 memory controller or v1 memory hierarchy) to set a ceiling in"
    cg="$v1/k3-ceiling-$$"
    echo "$limit" >"$cg/memory.limit_in_bytes"
fi
trap 'rmdir "$cg" 2>/dev/null' EXIT
echo "ceiling: $limit bytes in $cg"
in_cgroup() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }

ids=$(prompt_ids "$(vocab_of "$dir")" 8)
"$K3_BIN" "$dir" --ids "$ids" --gen 6 --ignore-eos --quiet >"$work/free.ids"
echo "unconstrained, all resident: $(cat "$work/free.ids")"

in_cgroup "$K3_BIN" "$dir" --ids "$ids" --gen 6 --ignore-eos --out "$work/capped.json" \
    --trunk-layers 0 --trunk-ring 1 --cache-experts 16 --stream-embed --stream-lm-head \
    >"$work/capped.ids" 2>"$work/capped.err" || { cat "$work/capped.err"; die "streamed run failed under the ceiling"; }
grep -q "cgroup limit set" "$work/capped.err" || die "the plan did not see the ceiling"
cmp -s "$work/free.ids" "$work/capped.ids" || die "ids differ under the ceiling: $(cat "$work/capped.ids")"
rss=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_rss_bytes"])' "$work/capped.json")
[ "$rss" -le "$limit" ] || die "peak RSS $rss exceeds the ceiling $limit"
echo "streamed under the ceiling: same ids, peak RSS $rss of $limit bytes"

printf 'all-resident under the ceiling: '
expect_exit 3 'memory plan needs .* GB but this machine allows .* GB \(the cgroup memory limit\)' \
    in_cgroup "$K3_BIN" "$dir" --ids "$ids" --gen 6
