# 66-chat-terminal: `k3 MODEL --chat` on a real terminal (a pty,
# tests/gates/chat_pty.py) edits like a terminal program (issue 33):
#  - the line editor (a build with libedit, Makefile EDIT=1): "wrld" with
#    three Lefts and an "o" sends "world"; Up recalls it to send "world!";
#    a bracketed paste of three lines is ONE message with its newlines; the
#    messages go to the line history ($XDG_STATE_HOME/k3/history, here
#    under the gate's folder), and the next session's Ctrl-R finds
#    "world!" there; --no-history-file recalls nothing and writes nothing.
#  - the thinking shows dimmed by default on a terminal (no counter), and
#    a reply cut by --gen inside its thinking says so.
#  - scripts are untouched: with stdin a pipe the same messages give the
#    same bytes on stdout as before (no prompt, no escape sequences: the
#    thinking hidden, the pipe defaults), and no history file is written.
# Ctrl-C during a reply and at the prompt is gate 36's pty check (it runs
# through the line editor too).
. tests/gates/lib.sh
tok=${K3_RELEASE_DIR:-../shared/k3-release} # the release files beside the clone
if [ ! -f "$tok/tiktoken.model" ]; then
    echo "skip: no release tokenizer at $tok"
    exit 0
fi
dir=$(model chat-tiny tiny-a --vocab 163840)
work="$K3_BUILD/chat-terminal"
rm -rf "$work"
mkdir -p "$work"

"$PYTHON" tests/gates/chat_pty.py visible "$work" "$K3_BIN" "$dir" "$tok" ||
    die "pty: visible thinking"

if ! ldd "$K3_BIN" 2>/dev/null | grep -q libedit; then
    echo "skip (line editor): $K3_BIN is built without libedit (EDIT=0)"
    exit 0
fi
"$PYTHON" tests/gates/chat_pty.py edit "$work" "$K3_BIN" "$dir" "$tok" || die "pty: editing"
"$PYTHON" - "$work/edit.jsonl" <<'PY' || die "the edited messages"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
users = [m["content"] for m in msgs if m["role"] == "user"]
want = ["world", "world!", "line one\nline two\nline three", "world!"]
assert users == want, "the user's messages: %r, wanted %r" % (users, want)
print("ok: the messages typed were %r" % users)
PY
hist="$work/state/k3/history"
[ -f "$hist" ] || die "no line history at $hist"
grep -qx 'world!' "$hist" || die "the line history lacks world!: $(cat "$hist")"
grep -q 'line\\040one\\012line\\040two' "$hist" || die "the paste is not one history entry"
cp "$hist" "$work/hist.before"
"$PYTHON" tests/gates/chat_pty.py edit-nofile "$work" "$K3_BIN" "$dir" "$tok" ||
    die "pty: --no-history-file"
cmp -s "$hist" "$work/hist.before" || die "--no-history-file changed the history file"
"$PYTHON" - "$work/nofile.jsonl" <<'PY' || die "--no-history-file recalled something"
import json, sys
users = [json.loads(l)["content"] for l in open(sys.argv[1]) if '"user"' in l]
assert users == ["fresh"], users
PY

# Scripts: a pipe gets no prompt, no escapes, and no history file.
rm -rf "$work/state"
printf 'hello\nworld\n' | XDG_STATE_HOME="$work/state" "$K3_BIN" "$dir" --tok "$tok" --chat \
    --gen 4 >"$work/pipe.out" 2>"$work/pipe.err" || die "the piped chat failed"
[ ! -e "$work/state" ] || die "a piped chat wrote $(find "$work/state")"
if grep -q "$(printf '\033')" "$work/pipe.out"; then die "escape sequences on a piped stdout"; fi
[ "$(wc -l <"$work/pipe.out")" -eq 2 ] || die "a piped chat printed $(wc -l <"$work/pipe.out") lines"
echo "ok: the chat edits like a terminal program; pipes are unchanged"
