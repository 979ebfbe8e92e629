# 36-chat: `k3 MODEL --chat`, scripted through stdin on a tiny model with
# the release tokenizer.
#  (a) state reuse: turn 2 prefills only what turn 1 did not already feed
#      (the stderr line "turn N: prefilled X new tokens, reused Y"); the
#      totals agree with the renderer (--render-chat --tokenize of the same
#      conversation); with an empty reply the reuse is exact; --no-reuse
#      (everything refed every turn) prints the same replies.
#  (b) the history file holds the two turns; replaying it reproduces the
#      same context: the state saved after replaying is byte-identical to the
#      one saved at the end of the live chat (same ids, caches and logits).
#  (c) bad input: a malformed history line -> exit 2 naming FILE:LINE and the
#      file untouched; an unknown role; an effort outside low/high/max; a
#      conversation over --max-context; a message that is not UTF-8.
#  (e) on a real terminal (a pty, tests/gates/chat_pty.py): Ctrl-C during a
#      reply stops it and the prompt comes back, a second message is
#      answered, Ctrl-C at the prompt exits 0; the replies cut short are kept
#      as said (finish_reason "cancelled"), and turn 2's prompt is exactly
#      the renderer's tokens of the history the user saw. The hidden
#      thinking shows a dimmed counter on the terminal, nothing in a pipe.
. tests/gates/lib.sh
tok=${K3_RELEASE_DIR:-../shared/k3-release} # the release files beside the clone
if [ ! -f "$tok/tiktoken.model" ]; then
    echo "skip: no release tokenizer at $tok"
    exit 0
fi
dir=$(model chat-tiny tiny-a --vocab 163840)
work="$K3_BUILD/chat"
rm -rf "$work"
mkdir -p "$work"
chat() { "$K3_BIN" "$dir" --tok "$tok" --chat "$@"; }
# counts TURN LOG: "X Y" from "turn N: prefilled X new tokens, reused Y"
counts() {
    sed -n "s/^$1: prefilled \([0-9]*\) new tokens, reused \([0-9]*\)$/\1 \2/p" "$2"
}
# rendered_total HISTORY [USER]: token count of the history (plus a user
# message and the generation prompt) by the renderer itself.
rendered_total() {
    "$PYTHON" - "$@" >"$work/conv.json" <<'EOF'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
for m in msgs:  # the conversation reader allows reasoning only on the assistant
    if m["role"] != "assistant":
        m.pop("reasoning_content", None)
if len(sys.argv) > 2:
    msgs.append({"role": "user", "content": sys.argv[2]})
print(json.dumps({"messages": msgs, "tools": None,
                  "options": {"thinking": True, "thinking_effort": "max",
                              "add_generation_prompt": len(sys.argv) > 2}}))
EOF
    "$K3_BIN" --tok "$tok" --render-chat "$work/conv.json" --tokenize | tr ',' '\n' | grep -c .
}

# --- (a) two turns, reuse ---------------------------------------------------
printf 'Hello there\nWhat is 2+2?\n/exit\nnever read\n' >"$work/in.txt"
chat --gen 8 --history "$work/h.jsonl" --save-state "$work/live.state" \
    <"$work/in.txt" >"$work/out.txt" 2>"$work/err.txt" || { cat "$work/err.txt"; die "chat failed"; }
grep -E '^(start|turn|chat)' "$work/err.txt"
set -- $(counts "turn 1" "$work/err.txt")
t1_new=$1 t1_reused=$2
set -- $(counts "turn 2" "$work/err.txt")
t2_new=$1 t2_reused=$2
[ -n "$t1_new" ] && [ -n "$t2_new" ] || die "no per-turn prefill lines"
! grep -q "^turn 3" "$work/err.txt" || die "a line after /exit was read"
t1_total=$((t1_new + t1_reused))
head -n 2 "$work/h.jsonl" >"$work/h1.jsonl"
want1=$(rendered_total "$work/h1.jsonl" "What is 2+2?")
[ "$((t2_new + t2_reused))" -eq "$want1" ] ||
    die "turn 2 context: $t2_new + $t2_reused tokens, the renderer says $want1"
[ "$t2_reused" -ge "$t1_total" ] || die "turn 2 reused $t2_reused < turn 1's $t1_total tokens"
[ "$t2_new" -lt "$want1" ] || die "turn 2 refed everything"
echo "ok: turn 2 fed $t2_new of $want1 tokens (reused $t2_reused; turn 1 had $t1_total)"

# An empty reply (--gen 0) re-renders exactly: reuse is all of turn 1.
chat --gen 0 <"$work/in.txt" >/dev/null 2>"$work/err0.txt" || die "--gen 0 chat failed"
set -- $(counts "turn 1" "$work/err0.txt")
z1=$(($1 + $2))
set -- $(counts "turn 2" "$work/err0.txt")
[ "$2" -eq "$z1" ] || die "empty reply: turn 2 reused $2, turn 1 fed $z1"
! grep -q "re-encodes" "$work/err0.txt" || die "empty reply: the cache departed from the rendering"
echo "ok: empty reply: turn 2 reused exactly turn 1's $z1 tokens and fed $1"

chat --gen 8 --no-reuse <"$work/in.txt" >"$work/out-noreuse.txt" 2>"$work/err-noreuse.txt" ||
    die "--no-reuse failed"
cmp -s "$work/out.txt" "$work/out-noreuse.txt" || die "--no-reuse changed the replies"
set -- $(counts "turn 2" "$work/err-noreuse.txt")
[ "$2" -eq 0 ] || die "--no-reuse reused $2 tokens"
echo "ok: --no-reuse (refeeding everything) gives the same replies"

# No terminal: no escape codes even with --show-thinking.
chat --gen 8 --show-thinking <"$work/in.txt" >"$work/out-think.txt" 2>/dev/null ||
    die "--show-thinking failed"
! grep -q "$(printf '\033')" "$work/out-think.txt" || die "escape codes on a pipe"
! grep -q "$(printf '\033')\|thinking…" "$work/err.txt" || die "a thinking counter on a pipe"
[ "$(wc -c <"$work/out-think.txt")" -gt "$(wc -c <"$work/out.txt")" ] ||
    die "--show-thinking showed nothing more"

# --- (b) history and replay ---------------------------------------------------
"$PYTHON" - "$work/h.jsonl" <<'EOF' || die "history file"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
roles = [l["role"] for l in lines]
assert roles == ["user", "assistant", "user", "assistant"], roles
assert [lines[0]["content"], lines[2]["content"]] == ["Hello there", "What is 2+2?"], lines
assert all(set(l) == {"role", "content", "reasoning_content"} for l in lines), lines
assert all(isinstance(l["reasoning_content"], str) for l in lines[1::2]), lines
print("ok: history holds the two turns")
EOF
cp "$work/h.jsonl" "$work/h.before"
chat --history "$work/h.jsonl" --save-state "$work/replay.state" </dev/null >/dev/null \
    2>"$work/err-replay.txt" || { cat "$work/err-replay.txt"; die "replay failed"; }
cmp -s "$work/live.state" "$work/replay.state" ||
    die "the replayed context differs from the live one (state files differ)"
cmp -s "$work/h.jsonl" "$work/h.before" || die "a replay without turns changed the history"
echo "ok: replaying the history reproduces the live context bit for bit"
# A third turn appends and keeps the first four lines byte for byte.
printf 'And 3+3?\n' | chat --gen 4 --history "$work/h.jsonl" >/dev/null 2>"$work/err3.txt" ||
    die "third turn failed"
set -- $(counts "turn 1" "$work/err3.txt")
set -- $(counts "start" "$work/err3.txt") "$@"
[ "$2" -eq 0 ] && [ "$4" -eq "$1" ] || die "replay then turn: start $1+$2, turn $3+$4"
[ "$(wc -l <"$work/h.jsonl")" -eq 6 ] || die "history has $(wc -l <"$work/h.jsonl") lines, not 6"
head -n 4 "$work/h.jsonl" | cmp -s - "$work/h.before" || die "earlier turns were rewritten"
ls "$work" | grep -q tmp && die "temporary files left behind"
echo "ok: a new turn appends two lines; the replay was prefilled once and reused"

# --- (d) commands and multi-line messages ---------------------------------------
printf '/help\nHello \\\nthere\n/reset\nHi\n/save %s\n/bogus\n/exit\nnever sent\n' "$work/saved.state" |
    chat --gen 3 --history "$work/cmd.jsonl" --out "$work/cmd.json" >/dev/null 2>"$work/cmd.err" ||
    die "commands: $(cat "$work/cmd.err")"
grep -q '^commands:' "$work/cmd.err" || die "/help printed no command list"
grep -q 'unknown command /bogus' "$work/cmd.err" || die "/bogus was not refused"
grep -q 'chat: a new conversation' "$work/cmd.err" || die "/reset said nothing"
[ -s "$work/saved.state" ] || die "/save wrote no state"
"$PYTHON" - "$work/cmd.jsonl" "$work/cmd.json" <<'EOF2' || die "commands: the turns are wrong"
import json, sys
hist = [json.loads(l) for l in open(sys.argv[1])]
users = [m["content"] for m in hist if m["role"] == "user"]
assert users == ["Hello \nthere", "Hi"], users  # joined lines; nothing after /exit
turns = json.load(open(sys.argv[2]))["turns"]
assert len(turns) == 2, len(turns)
# after /reset the second prompt holds only the new message, not turn 1
assert len(turns[1]["prompt_ids"]) < len(turns[0]["prompt_ids"]), [len(t["prompt_ids"]) for t in turns]
EOF2
echo "ok: /help, a continued line, /reset, /save, an unknown command, /exit"

# --- (e) a real terminal: Ctrl-C, the thinking counter ---------------------------
"$PYTHON" tests/gates/chat_pty.py interrupt "$work" "$K3_BIN" "$dir" "$tok" || die "pty: Ctrl-C"
"$PYTHON" - "$work/pty.jsonl" "And another one" >"$work/pty-conv.json" <<'EOF'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
assert [m["role"] for m in msgs] == ["user", "assistant"] * 2, msgs
for m in msgs:
    if m["role"] != "assistant":
        m.pop("reasoning_content", None)
print(json.dumps({"messages": msgs[:2] + [{"role": "user", "content": sys.argv[2]}],
                  "tools": None, "options": {"thinking": True, "thinking_effort": "max",
                                             "add_generation_prompt": True}}))
EOF
"$K3_BIN" --tok "$tok" --render-chat "$work/pty-conv.json" --tokenize >"$work/pty-want.txt"
"$PYTHON" - "$work/pty.json" "$work/pty-want.txt" <<'EOF' || die "pty: the report after Ctrl-C"
import json, sys
turns = json.load(open(sys.argv[1]))["turns"]
want = [int(x) for x in open(sys.argv[2]).read().strip().split(",")]
assert [t["finish_reason"] for t in turns] == ["cancelled"] * 2, turns
assert all(0 < len(t["generated_ids"]) < 6000 for t in turns), "replies not cut short"
assert turns[1]["prompt_ids"] == want, "turn 2's prompt is not the rendering of what was kept"
print("ok: pty: both replies kept as shown (%d and %d ids); turn 2's prompt = the rendering"
      % (len(turns[0]["generated_ids"]), len(turns[1]["generated_ids"])))
EOF
"$PYTHON" tests/gates/chat_pty.py counter "$work" "$K3_BIN" "$dir" "$tok" || die "pty: counter"

# --- (c) bad input ------------------------------------------------------------
cp "$work/h.before" "$work/bad.jsonl"
sed -i '3s/.*/{"role": "user", "content": "unterminated/' "$work/bad.jsonl"
sum=$(cksum <"$work/bad.jsonl")
printf 'hi\n' >"$work/hi.txt"
expect_exit 2 "bad.jsonl:3: not valid JSON" chat --history "$work/bad.jsonl" <"$work/hi.txt"
[ "$(cksum <"$work/bad.jsonl")" = "$sum" ] || die "the malformed history was modified"
printf '{"role": "user", "content": "a"}\n{"role": "robot", "content": "b"}\n' >"$work/role.jsonl"
expect_exit 2 "role.jsonl:2: unknown role \"robot\"" chat --history "$work/role.jsonl" <"$work/hi.txt"
printf '{"role": "user", "content": "a", "extra": 1}\n' >"$work/key.jsonl"
expect_exit 2 "key.jsonl:1: unknown key \"extra\"" chat --history "$work/key.jsonl" </dev/null
expect_exit 2 "--effort medium: expected low, high or max" chat --effort medium </dev/null
expect_exit 2 "cannot go with --no-thinking" chat --effort low --no-thinking </dev/null
expect_exit 2 "more than --max-context 40" chat --max-context 40 <"$work/hi.txt"
printf 'caf\351\n' >"$work/latin1.txt"
expect_exit 2 "turn 1: the message is not valid UTF-8" chat <"$work/latin1.txt"
expect_exit 2 "go with --chat" "$K3_BIN" "$dir" --tok "$tok" --prompt hi --history "$work/h.jsonl"
expect_exit 2 "drop --prompt" chat --prompt hi
echo "PASS"
