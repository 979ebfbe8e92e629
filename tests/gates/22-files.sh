# 22-files: what the engine does with the paths it is given, end to end.
#  (a) the context cap applies without --max-context: --gen past the default
#      4096 positions is exit 2 before anything runs, and a chat history
#      holding one 1 MB message is refused at once instead of prefilling it;
#  (b) every output path is checked before the model is opened (exit 2
#      naming the path and the errno; the plan is never printed), and a
#      write that fails (a full disk, simulated with ulimit -f) leaves the
#      old report byte for byte and no dump or temporary file behind;
#  (c) a FIFO or a directory in the place of config.json, the index, a
#      shard, --load-state, --history or --prompt-file is exit 2 naming the
#      path, at once (a FIFO used to block open() forever);
#  (d) temporary files of a killed run are removed by the next write, and
#      --history through a symbolic link appends to the link's target.
. tests/gates/lib.sh
dir=$(model tiny-a tiny-a)
work="$K3_BUILD/files"
rm -rf "$work"
mkdir -p "$work"
# Every command here must end by itself: a hang is a failure, not a wait.
run() { timeout 60 "$K3_BIN" "$@"; }

# --- (a) the default context cap ---------------------------------------------
expect_exit 2 "5003 tokens exceeds --max-context 4096" run "$dir" --ids 1,2,3 --gen 5000 --quiet
expect_exit 2 "exceeds --max-context 4096" run "$dir" --ids 1,2,3 --gen 4094 --quiet
tok=../shared/k3-release
if [ -f "$tok/tiktoken.model" ]; then
    cdir=$(model chat-tiny tiny-a --vocab 163840)
    "$PYTHON" - "$work/big.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"role": "user", "content": "hello " * 180000,
                        "reasoning_content": None}) + "\n")
    f.write(json.dumps({"role": "assistant", "content": "ok",
                        "reasoning_content": None}) + "\n")
EOF
    start=$(date +%s)
    echo hi | expect_exit 2 "more than --max-context 4096" \
        run "$cdir" --tok "$tok" --chat --history "$work/big.jsonl" --gen 4
    [ $(($(date +%s) - start)) -lt 30 ] || die "refusing the long history took too long"
else
    die "no release tokenizer at $tok (the chat half of this gate needs it)"
fi

# --- (b) outputs checked first, written atomically ----------------------------
for opt in --out --dump-logits --dump-prompt-logits --save-state; do
    expect_exit 2 "$work/no/such/f: cannot create a file next to it: No such file" \
        run "$dir" --ids 1,2,3 --gen 2 "$opt" "$work/no/such/f"
    ! grep -q "allowed" "$K3_BUILD/expect.err" || die "$opt: the model was opened first"
done
expect_exit 2 "$work: exists and is not a regular file" \
    run "$dir" --ids 1,2,3 --gen 2 --out "$work"
expect_exit 2 "cannot create: No such file" \
    run "$dir" --ids 1,2,3 --gen 2 --dump-cache-trace "$work/no/such/dir"
run "$dir" --ids 1,2,3 --gen 2 --quiet --out "$work/r.json" >/dev/null
cp "$work/r.json" "$work/r.before"
# ulimit -f 1: any file past 1 KiB fails with EFBIG (SIGXFSZ ignored), as
# on a full disk; the report is larger than that.
set +e
(trap '' XFSZ; ulimit -f 1; exec "$K3_BIN" "$dir" --ids 1,2,3 --gen 40 --ignore-eos --quiet \
    --out "$work/r.json" --dump-logits "$work/d.f32") >/dev/null 2>"$work/full.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat "$work/full.err" >&2; die "a full disk: exit $rc, not 1"; }
grep -q "File too large" "$work/full.err" || die "a full disk: the errno is not named"
cmp -s "$work/r.json" "$work/r.before" || die "a failed write replaced the old report"
[ ! -e "$work/d.f32" ] || die "a failed run left a logits dump"
ls "$work" | grep -q "\.tmp-" && die "a failed write left a temporary file: $(ls "$work")"
echo "ok: a failed write keeps the old report and leaves nothing behind"

# --- (c) FIFOs and directories where files belong -----------------------------
mkfifo "$work/fifo"
mkdir "$work/adir"
fake() { # fake NAME: a copy of the model with NAME replaced by $kind
    rm -rf "$work/m"
    cp -r "$dir" "$work/m"
    rm -f "$work/m/$1"
    if [ "$kind" = FIFO ]; then mkfifo "$work/m/$1"; else mkdir "$work/m/$1"; fi
}
shard=$(cd "$dir" && ls model-*.safetensors | sed -n 2p)
for kind in FIFO directory; do
    for f in config.json model.safetensors.index.json "$shard"; do
        fake "$f"
        expect_exit 2 "m/$f: is a.* $kind, not a regular file" run "$work/m" --ids 1,2 --gen 2
    done
    if [ $kind = FIFO ]; then p="$work/fifo"; else p="$work/adir"; fi
    expect_exit 2 "is a.* $kind, not a regular file" run "$dir" --ids 1,2 --gen 2 --load-state "$p"
    expect_exit 2 "is a.* $kind" run "$dir" --prompt-file "$p" --gen 2
    if [ -f "$tok/tiktoken.model" ]; then
        expect_exit 2 "not a regular file" run "$cdir" --tok "$tok" --chat --history "$p" </dev/null
    fi
done

# --- (d) stale temporary files, links -----------------------------------------
if [ -f "$tok/tiktoken.model" ]; then
    # A PID that is not running: a finished child's.
    sh -c 'exit 0' &
    dead=$!
    wait "$dead" || true
    : >"$work/target.jsonl"
    ln -s target.jsonl "$work/link.jsonl"
    : >"$work/target.jsonl.tmp-$dead-Xy12Zq"
    echo hello | run "$cdir" --tok "$tok" --chat --gen 2 --history "$work/link.jsonl" \
        >/dev/null 2>"$work/link.err" || { cat "$work/link.err" >&2; die "chat through a link"; }
    [ -L "$work/link.jsonl" ] || die "--history replaced the symbolic link with a file"
    [ "$(wc -l <"$work/target.jsonl")" -eq 2 ] || die "the link's target did not get the turn"
    [ ! -e "$work/target.jsonl.tmp-$dead-Xy12Zq" ] || die "a dead run's temporary file stayed"
    echo "ok: --history writes through a link; a dead run's temporary file is removed"
fi
