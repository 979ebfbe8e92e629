# 38-turn-parity: one turn driver for every front end (src/chat/turn.c).
# The same conversation through `k3 MODEL --chat` (its --out report) and
# through POST /v1/chat/completions (return_token_ids) gives the same
# prompt ids, the same generated ids and the same finish reason:
#  (a) two turns with thinking (length-limited), the second carrying the
#      first reply back as the client sends it;
#  (b) a copy of the model whose config eos is an id the model generates:
#      both stop at that id ("stop"), and with --ignore-eos / "ignore_eos"
#      both run on to the limit with exactly the ids of (a);
#  (c) without thinking, a stop string cut from the reply text: both end on
#      it ("stop") at the same id;
#  (d) POST /v1/completions and `k3 MODEL --prompt` with the same text.
. tests/gates/lib.sh
tokdir=../shared/k3-release
[ -f "$tokdir/tiktoken.model" ] || die "no release tokenizer at $tokdir"
command -v curl >/dev/null || die "curl is needed"
work="$K3_BUILD/turn-parity"
rm -rf "$work"
mkdir -p "$work"
dir=$(model chat-tiny tiny-a --vocab 163840)
. tests/gates/serve_lib.sh

GEN=12
# cli NAME MODEL [options] < lines: the chat's --out report in $work/NAME.json.
cli() {
    name=$1
    mdir=$2
    shift 2
    "$K3_BIN" "$mdir" --tok "$tokdir" --chat --gen "$GEN" --quiet --out "$work/$name.json" "$@" \
        >"$work/$name.txt" 2>"$work/$name.err" || die "$name: exit $?: $(cat "$work/$name.err")"
}
# post NAME PATH BODY: the server's answer in $work/NAME.json.
post() {
    got=$(curl -s -o "$work/$1.json" -w '%{http_code}' --max-time 300 \
        -H 'Content-Type: application/json' -d "$3" "http://127.0.0.1:$port$2") || true
    [ "$got" = 200 ] || die "$1: HTTP $got: $(head -c 400 "$work/$1.json")"
}
# same CLI_REPORT TURN SERVER_ANSWER: ids and finish reason agree.
same() {
    "$PYTHON" - "$work/$1.json" "$2" "$work/$3.json" <<'EOF' || die "$1 turn $2 vs $3"
import json, sys
cli = json.load(open(sys.argv[1]))["turns"][int(sys.argv[2])]
srv = json.load(open(sys.argv[3]))
ch = srv["choices"][0]
for what, a, b in (("prompt ids", cli["prompt_ids"], srv["prompt_token_ids"]),
                   ("generated ids", cli["generated_ids"], ch["token_ids"]),
                   ("finish reason", cli["finish_reason"], ch["finish_reason"])):
    if a != b:
        sys.exit("%s differ:\n  --chat %s\n  server %s" % (what, a, b))
print("ok: %d prompt ids, %d generated, finish %s (%s)"
      % (len(cli["prompt_ids"]), len(cli["generated_ids"]), cli["finish_reason"], cli["end"]))
EOF
}
# body MESSAGES-JSON [EXTRA-JSON-MEMBERS]: a greedy chat request.
body() {
    echo "{\"messages\": $1, \"max_tokens\": $GEN, \"temperature\": 0, \"reasoning_effort\": \"max\"," \
        "\"return_token_ids\": true${2:+, $2}}"
}
# field NAME EXPR: Python expression over the answer r of NAME.
field() {
    "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
        "$work/$1.json" "$2"
}

u1='Hello there, who are you?'
u2='And what else?'
# (a) two turns with thinking.
printf '%s\n%s\n' "$u1" "$u2" | cli a "$dir"
start_server srv-a "$K3_BIN" || die "k3 serve did not start: $(cat "$work/srv-a.log")"
m1="[{\"role\": \"user\", \"content\": \"$u1\"}]"
post a1 /v1/chat/completions "$(body "$m1")"
same a 0 a1
reply=$("$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1]))["choices"][0]["message"]
print(json.dumps({"role": "assistant", "content": m["content"] or "",
                  "reasoning_content": m.get("reasoning_content") or ""}))' "$work/a1.json")
m2="[{\"role\": \"user\", \"content\": \"$u1\"}, $reply, {\"role\": \"user\", \"content\": \"$u2\"}]"
post a2 /v1/chat/completions "$(body "$m2")"
same a 1 a2
[ "$(field a1 'r["choices"][0]["finish_reason"]')" = length ] || die "(a) should end at the limit"
# (d) text completions beside `k3 --prompt`.
post d1 /v1/completions "{\"prompt\": \"$u1\", \"max_tokens\": $GEN, \"temperature\": 0, \"return_token_ids\": true}"
"$K3_BIN" "$dir" --tok "$tokdir" --prompt "$u1" --gen "$GEN" --quiet --out "$work/d.json" \
    >"$work/d.txt" 2>"$work/d.err" || die "(d) k3 --prompt failed: $(cat "$work/d.err")"
"$PYTHON" - "$work/d.json" "$work/d1.json" "$work/d.txt" <<'EOF' || die "(d) --prompt vs /v1/completions"
import json, sys
cli, srv = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ch = srv["choices"][0]
assert cli["prompt_ids"] == srv["prompt_token_ids"], "prompt ids differ"
assert cli["generated_ids"] == ch["token_ids"], "generated ids differ"
assert cli["finish_reason"] == ch["finish_reason"], "finish reasons differ"
text = open(sys.argv[3], "rb").read().decode("utf-8", "replace").rstrip("\n")
assert text == ch["text"], "text differs: %r vs %r" % (text, ch["text"])
print("ok: --prompt and /v1/completions: %d ids, finish %s" % (len(cli["generated_ids"]), cli["finish_reason"]))
EOF
stop_server "$pid" srv-a

# (b) an eos the model reaches: a copy of the model whose config names the
# 5th id (a) generated.
eos=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"][0]["generated_ids"][4])' "$work/a.json")
dir2="$work/model-eos"
mkdir -p "$dir2"
for f in "$dir"/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$dir2/"; done
rm "$dir2/config.json"
"$PYTHON" - "$dir/config.json" "$dir2/config.json" "$eos" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
(c["text_config"] if "text_config" in c else c)["eos_token_id"] = int(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
printf '%s\n' "$u1" | cli b "$dir2"
printf '%s\n' "$u1" | cli bi "$dir2" --ignore-eos
dir_a=$dir
dir=$dir2
start_server srv-b "$K3_BIN" || die "k3 serve did not start: $(cat "$work/srv-b.log")"
post b1 /v1/chat/completions "$(body "$m1")"
same b 0 b1
[ "$(field b1 'r["choices"][0]["finish_reason"]')" = stop ] || die "(b) should stop at eos $eos"
[ "$(field b1 'r["choices"][0]["token_ids"][-1]')" = "$eos" ] || die "(b) should end on $eos"
post bi1 /v1/chat/completions "$(body "$m1" '"ignore_eos": true')"
same bi 0 bi1
"$PYTHON" - "$work/a.json" "$work/bi.json" <<'EOF' || die "(b) --ignore-eos should give (a)'s ids"
import json, sys
a, b = (json.load(open(p))["turns"][0]["generated_ids"] for p in sys.argv[1:])
assert a == b, "%s vs %s" % (a, b)
print("ok: --ignore-eos ran past eos to the same %d ids as the original model" % len(b))
EOF
stop_server "$pid" srv-b
dir=$dir_a

# (c) no thinking, and a stop string taken from the reply's text.
printf '%s\n' "$u1" | cli c0 "$dir" --no-thinking
start_server srv-c "$K3_BIN" || die "k3 serve did not start: $(cat "$work/srv-c.log")"
post c0s /v1/chat/completions "$(body "$m1" '"thinking": false')"
same c0 0 c0s
stop=$("$PYTHON" - "$work/c0s.json" <<'EOF'
import json, re, sys
text = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"] or ""
m = re.search(r"[A-Za-z]{3}", text[3:])
print(m.group(0) if m else "")
EOF
)
[ -n "$stop" ] || die "(c) the reply has no run of 3 ASCII letters to stop on: $(field c0s 'r["choices"][0]["message"]')"
printf '%s\n' "$u1" | cli c "$dir" --no-thinking --stop "$stop"
post c1 /v1/chat/completions "$(body "$m1" "\"thinking\": false, \"stop\": \"$stop\"")"
same c 0 c1
[ "$(field c1 'r["choices"][0]["finish_reason"]')" = stop ] || die "(c) should stop at \"$stop\""
"$PYTHON" - "$work/c.txt" "$work/c1.json" "$stop" <<'EOF' || die "(c) shown text"
import json, sys
shown = open(sys.argv[1], "rb").read().decode("utf-8", "replace").rstrip("\n")
content = json.load(open(sys.argv[2]))["choices"][0]["message"]["content"] or ""
assert shown == content, "%r vs %r" % (shown, content)
assert sys.argv[3] not in content
print("ok: both show %d characters and stop before %r" % (len(content), sys.argv[3]))
EOF
stop_server "$pid" srv-c
echo "ok: --chat and the server agree turn for turn"
