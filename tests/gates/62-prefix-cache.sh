# 62-prefix-cache: k3 serve's prefix cache (model/prefix_cache.h) against a
# cold server (no cache, one slot, no speculation), on a tiny model with
# the release tokenizer; every answer compared is text, generated and
# prompt ids and logprobs, bit for bit (prefix_check.py):
#  - warm: a conversation's later turns start from the cache although
#    another conversation ran on the one slot between them (cached_tokens
#    at least the earlier prompt), a branch from the system block too;
#    /metrics counts hits and tokens saved;
#  - evict: a RAM budget of a few snapshots with a disk tier: evictions,
#    spills and disk hits, and every second turn still hits;
#  - restart: the same --prefix-cache-dir after SIGTERM (the RAM snapshots
#    spill at shutdown): the first request is served from disk;
#  - corrupt: the files truncated, one byte flipped, renamed to another
#    namespace, and another model's file put in their place: each skipped
#    with its log line, the answers still cold's;
#  - --parallel 2 --spec 4 (K3_SPEC_ALWAYS): concurrent conversations;
#  - the CLI: k3 --chat with --prefix-cache-dir restarted over --history
#    starts warm and prints what the cold chat prints;
#  - bad options: --prefix-cache-disk-gb without a dir is exit 2;
#    --plan names the cache.
. tests/gates/lib.sh
tokdir=${K3_RELEASE_DIR:-../shared/k3-release} # (K3_RELEASE_DIR: a worktree elsewhere)
work="$K3_BUILD/prefix-cache"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)
other=$(model serve-tiny-seed1 tiny-a --vocab 163840 --seed 1)
. tests/gates/serve_lib.sh
check() { "$PYTHON" tests/gates/prefix_check.py "$@" || die "prefix_check $1 failed: $(tail -5 "$work/cache.log")"; }

expect_exit 2 "goes with --prefix-cache-dir" "$K3_BIN" serve "$dir" --tok "$tokdir" \
    --prefix-cache-disk-gb 1
"$K3_BIN" serve "$dir" --tok "$tokdir" --plan --prefix-cache-gb 0.5 >"$work/plan.out"
grep -q "prefix cache: *0.500 GiB RAM" "$work/plan.out" || die "--plan: $(cat "$work/plan.out")"
echo "ok options: --prefix-cache-disk-gb alone exit 2, --plan names the cache"

start_server cold "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0 || die "cold did not start"
cold="http://127.0.0.1:$port"
cold_pid=$pid

# warm: RAM only, one slot
start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 1 ||
    die "cache did not start: $(cat "$work/cache.log")"
check warm "$cold" "http://127.0.0.1:$port"
stop_server "$pid" cache

# evict: room for about three snapshots of these prompts (~1.3 MB each)
snap=$(sed -n 's/.*a snapshot of the full context takes \([0-9.]*\) GiB.*/\1/p' "$work/plan.out")
[ -n "$snap" ] || die "--plan gave no snapshot size"
start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.004 \
    --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache (evict) did not start"
check evict "$cold" "http://127.0.0.1:$port" 4
stop_server "$pid" cache
ls "$work/pc"/k3p-*.state >/dev/null 2>&1 || die "no snapshot files in the disk tier"

# restart with the same directory
start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.004 \
    --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache (restart) did not start"
grep -q "snapshots found" "$work/cache.log" || die "the restart found no snapshots"
check restart "$cold" "http://127.0.0.1:$port"
stop_server "$pid" cache

# corrupt: each round damages every file one way, restarts on the
# directory and asks for the same turns: the answers are cold's and the
# log names each skipped file (the next round gets the files the round's
# server wrote afresh). A file of another model: one saved by a server of
# a tiny-a with other weights, under this tokenizer's namespace.
dir_main=$dir
dir=$other
start_server otherm "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0 \
    --prefix-cache-dir "$work/pc-other" --alias serve-tiny || die "the other model's server did not start"
dir=$dir_main
"$PYTHON" - "http://127.0.0.1:$port" <<'PY'
import json, sys, urllib.request
body = dict(model="serve-tiny", max_tokens=2, messages=[{"role": "user", "content": "other"}])
urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v1/chat/completions",
    json.dumps(body).encode(), {"Content-Type": "application/json"}), timeout=60).read()
PY
stop_server "$pid" otherm
ls "$work/pc-other"/k3p-*.state >/dev/null 2>&1 || die "the other model wrote no snapshot"
for mode in flip truncate foreign checksum othermodel; do
    "$PYTHON" - "$mode" "$work/pc" "$work/pc-other" <<'PY'
import os, shutil, sys
mode, d, other = sys.argv[1:]
files = sorted(f for f in os.listdir(d) if f.startswith("k3p-"))
assert files, "no snapshot files to damage"
for f in files:
    p = os.path.join(d, f)
    data = bytearray(open(p, "rb").read())
    if mode == "flip":
        data[len(data) // 2] ^= 0x10
        open(p, "wb").write(data)
    elif mode == "truncate":
        open(p, "wb").write(data[: len(data) - 100])
    elif mode == "foreign":
        os.rename(p, os.path.join(d, "k3p-0123456789abcdef" + f[20:]))
    elif mode == "checksum":
        data[-1] ^= 1
        open(p, "wb").write(data)
    else:  # another model's files under these names
        src = sorted(x for x in os.listdir(other) if x.startswith("k3p-"))[0]
        shutil.copy(os.path.join(other, src), p)
PY
    start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.004 \
        --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache ($mode) did not start"
    check corrupt "$cold" "http://127.0.0.1:$port" 4
    stop_server "$pid" cache
    case $mode in
    flip | checksum) want="checksum mismatch" ;;
    truncate) want="truncated" ;;
    foreign) want="foreign: another tokenizer" ;;
    othermodel) want="another checkpoint" ;;
    esac
    grep -q "prefix cache: .*$want" "$work/cache.log" ||
        die "$mode: no log line says '$want': $(grep 'prefix cache' "$work/cache.log" | head -5)"
    rm -f "$work/pc"/k3p-0123456789abcdef-*
    echo "ok corrupt $mode: skipped with a log line ($want), answers equal cold"
done

# slots and speculation
export K3_SPEC_ALWAYS=1
start_server cache "$K3_BIN" --max-context 4096 --parallel 2 --spec 4 --prefix-cache-gb 1 ||
    die "cache (parallel) did not start"
check parallel "$cold" "http://127.0.0.1:$port"
stop_server "$pid" cache
unset K3_SPEC_ALWAYS
stop_server "$cold_pid" cold
