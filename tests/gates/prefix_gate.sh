# prefix_gate.sh - the body of gates 62 (fast: PREFIX_FULL unset) and 63
# (PREFIX_FULL=1, `make check`): k3 serve's prefix cache
# (model/prefix_cache.h) against a cold server (no cache, one slot, no
# speculation), on a tiny model with the release tokenizer; every answer
# compared is text, generated and prompt ids and logprobs, bit for bit
# (prefix_check.py):
#  - warm: a conversation's later turns start from the cache although
#    another conversation ran on the one slot between them (cached_tokens
#    at least the earlier prompt), a branch from the system block too;
#    /metrics counts hits and tokens saved;
#  - evict: a RAM budget of a few snapshots with a disk tier: evictions,
#    spills and disk hits, and every second turn still hits;
#  - restart: the same --prefix-cache-dir after SIGTERM (the RAM snapshots
#    spill at shutdown): the first request is served from disk; the full
#    gate also kills a server with -9 after two turns (RAM to spare, no
#    eviction): the snapshots written behind after each answer serve the
#    third turn after the restart, equal to cold;
#  - corrupt: files truncated, renamed to another namespace, replaced by
#    another model's (found when the directory is scanned) and with a
#    flipped byte (found by the checksum when read): each skipped with its
#    log line, the answers still cold's. The fast gate damages the files
#    of one directory in all four ways at once; the full one runs a round
#    per kind (and the checksum's own bytes) over every file;
#  - the CLI: k3 --chat --prefix-cache-dir restarted over a --history
#    starts warm; its output, history and --save-state file equal a cold
#    chat's byte for byte;
#  - slots and speculation (--parallel 2 --spec 4, K3_SPEC_ALWAYS=1):
#    conversations at once;
#  - bad options: --prefix-cache-disk-gb without a dir is exit 2; --plan
#    names the cache and a snapshot's size.
. tests/gates/lib.sh
tokdir=${K3_RELEASE_DIR:-../shared/k3-release} # (K3_RELEASE_DIR: a worktree elsewhere)
work="$K3_BUILD/prefix-cache${PREFIX_FULL:+-full}"
nconv=2
[ -z "${PREFIX_FULL:-}" ] || nconv=4
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

# the cold server answers through the whole gate (the full one runs over 10 minutes on
# a loaded machine): longer than start_server's bound
start_server cold "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0 --exit-after 3000 ||
    die "cold did not start"
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
start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.002 \
    --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache (evict) did not start"
check evict "$cold" "http://127.0.0.1:$port" "$nconv"
stop_server "$pid" cache
ls "$work/pc"/k3p-*.state >/dev/null 2>&1 || die "no snapshot files in the disk tier"

# restart with the same directory
start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.002 \
    --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache (restart) did not start"
grep -q "snapshots found" "$work/cache.log" || die "the restart found no snapshots"
check restart "$cold" "http://127.0.0.1:$port"
stop_server "$pid" cache

# kill -9 (the full gate): snapshots written behind after each answer
# survive a server killed without a chance to spill; the next turn after
# the restart is served from them and equals cold.
if [ -n "${PREFIX_FULL:-}" ]; then
    start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 1 \
        --prefix-cache-dir "$work/pc-k9" --prefix-cache-disk-gb 1 || die "cache (kill) did not start"
    check killed "$cold" "http://127.0.0.1:$port" "$work/pc-k9"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 1 \
        --prefix-cache-dir "$work/pc-k9" --prefix-cache-disk-gb 1 || die "cache (after kill) did not start"
    check restart "$cold" "http://127.0.0.1:$port" k9
    stop_server "$pid" cache
    echo "ok kill -9: the restarted server found the snapshots written behind"
fi

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
modes="mixed"
[ -z "${PREFIX_FULL:-}" ] || modes="flip truncate foreign checksum othermodel"
for mode in $modes; do
    "$PYTHON" - "$mode" "$work/pc" "$work/pc-other" <<'PY'
import os, shutil, sys
mode, d, other = sys.argv[1:]
files = sorted(f for f in os.listdir(d) if f.startswith("k3p-"))
assert len(files) >= 4, "too few snapshot files to damage: %s" % files
for f in files:
    p = os.path.join(d, f)
    data = bytearray(open(p, "rb").read())
    if mode == "mixed":  # the first three each one way found by the scan, the rest flipped
        kind = ["truncate", "foreign", "othermodel"][files.index(f)] if files.index(f) < 3 else "flip"
    else:
        kind = mode
    if kind == "flip":
        data[len(data) // 2] ^= 0x10
        open(p, "wb").write(data)
    elif kind == "truncate":
        open(p, "wb").write(data[: len(data) - 100])
    elif kind == "foreign":
        os.rename(p, os.path.join(d, "k3p-0123456789abcdef" + f[20:]))
    elif kind == "checksum":
        data[-1] ^= 1
        open(p, "wb").write(data)
    else:  # another model's files under these names
        src = sorted(x for x in os.listdir(other) if x.startswith("k3p-"))[0]
        shutil.copy(os.path.join(other, src), p)
PY
    start_server cache "$K3_BIN" --max-context 4096 --spec 0 --prefix-cache-gb 0.002 \
        --prefix-cache-dir "$work/pc" --prefix-cache-disk-gb 1 || die "cache ($mode) did not start"
    check corrupt "$cold" "http://127.0.0.1:$port" "$nconv"
    stop_server "$pid" cache
    case $mode in
    mixed) want="truncated|foreign: another tokenizer|another checkpoint|checksum mismatch" ;;
    flip | checksum) want="checksum mismatch" ;;
    truncate) want="truncated" ;;
    foreign) want="foreign: another tokenizer" ;;
    othermodel) want="another checkpoint" ;;
    esac
    IFS='|'
    for w in $want; do
        grep -q "prefix cache: .*$w" "$work/cache.log" ||
            die "$mode: no log line says '$w': $(grep 'prefix cache' "$work/cache.log" | head -5)"
    done
    unset IFS
    rm -f "$work/pc"/k3p-0123456789abcdef-*
    echo "ok corrupt $mode: skipped with a log line ($want), answers equal cold"
done

# the CLI: a --chat over a --history, restarted: cold, then with the
# directory twice (the second starts warm); the same output and history
sys=$("$PYTHON" -c 'print(" ".join("sys%d" % i for i in range(300)))')
printf 'hello there, how are you\nsecond question here\n' >"$work/in1"
printf 'third one\n' >"$work/in2"
"$K3_BIN" "$dir" --tok "$tokdir" --chat --gen 8 --seed 3 --history "$work/h0.jsonl" \
    --system "$sys" <"$work/in1" >"$work/chat0.out" 2>"$work/chat0.err" || die "chat: $(cat "$work/chat0.err")"
for run in cold warm1 warm2; do
    cp "$work/h0.jsonl" "$work/h-$run.jsonl"
    cache=""
    [ $run = cold ] || cache="--prefix-cache-dir $work/pc-chat"
    # shellcheck disable=SC2086 # $cache is zero or two words
    "$K3_BIN" "$dir" --tok "$tokdir" --chat --gen 8 --seed 3 --history "$work/h-$run.jsonl" \
        --system "$sys" --save-state "$work/chat-$run.state" $cache <"$work/in2" \
        >"$work/chat-$run.out" 2>"$work/chat-$run.err" ||
        die "chat $run: $(cat "$work/chat-$run.err")"
done
cmp -s "$work/chat-cold.out" "$work/chat-warm2.out" && cmp -s "$work/h-cold.jsonl" "$work/h-warm2.jsonl" &&
    cmp -s "$work/chat-cold.state" "$work/chat-warm2.state" ||
    die "the warm chat's output, history or saved state differs from the cold one's"
grep -q "start: prefilled 0 new tokens, reused [1-9]" "$work/chat-warm2.err" ||
    die "the restarted chat did not start warm: $(cat "$work/chat-warm2.err")"
grep -q "start: prefilled [1-9][0-9]* new tokens, reused 0" "$work/chat-cold.err" ||
    die "the cold chat reused something: $(cat "$work/chat-cold.err")"
echo "ok chat: restarted over its history with --prefix-cache-dir: $(grep '^start:' "$work/chat-warm2.err"); output, history and --save-state file equal the cold run's"

# slots and speculation
export K3_SPEC_ALWAYS=1
start_server cache "$K3_BIN" --max-context 4096 --parallel 2 --spec 4 --prefix-cache-gb 1 ||
    die "cache (parallel) did not start"
check parallel "$cold" "http://127.0.0.1:$port" "$nconv"
stop_server "$pid" cache
unset K3_SPEC_ALWAYS
stop_server "$cold_pid" cold
