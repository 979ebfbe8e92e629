# 54-structured-serve: structured outputs in `k3 serve` (docs/SERVE.md
# "Structured outputs"), on a random-weight model with the release's
# vocabulary and tokenizer and on the trained models/k3-nano:
#  - the official `openai` npm client (structured_client.mjs) gets JSON valid
#    under a strict response_format json_schema, and forced tool calls
#    (tool_choice "required" and a named function) whose arguments are valid
#    under the tool's parameters, streamed and not; an unsupported keyword
#    with strict is a 400 naming it and its pointer, without strict a warning
#    in the answer; every output is validated here by python3-jsonschema;
#  - llama-server's grammar / json_schema, vLLM's guided_json / guided_choice,
#    /v1/completions with response_format: outputs in the language;
#  - --parallel 2: two requests with different grammars in the same steps
#    each get the answer they get alone.
# ladder: check
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/structured-serve"
rm -rf "$work"
mkdir -p "$work"
command -v node >/dev/null || die "node is needed for the OpenAI client (npm ci)"
command -v curl >/dev/null || die "curl is needed"
[ -f node_modules/openai/package.json ] || die "the openai npm package is missing: run npm ci"
"$PYTHON" -c 'import jsonschema' 2>/dev/null || die "python3-jsonschema is missing (scripts/deps.sh)"
dir=$(model serve-tiny tiny-a --vocab 163840) # shared with 45
. tests/gates/serve_lib.sh

# validate DIR: every NAME.json the client wrote is valid under its schema.
validate() {
    "$PYTHON" - "$1" <<'EOF' || die "an answer is not valid under its schema"
import glob, json, sys, jsonschema
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    items = [d] if d["schema"] is not None else d["value"]
    for it in items:
        jsonschema.validate(it["value"], it["schema"])
        n += 1
print("ok: %d answers valid under their schemas (python3-jsonschema)" % n)
EOF
}

# post NAME PATH BODY: the answer body to $work/NAME.json (HTTP 200 wanted).
post() {
    got=$(curl -s -o "$work/$1.json" -w '%{http_code}' --max-time 300 \
        -H 'Content-Type: application/json' --data-binary "$3" "http://127.0.0.1:$port$2") || true
    [ "$got" = 200 ] || die "$1: HTTP $got: $(head -c 400 "$work/$1.json")"
}
content() { "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))["choices"][0]; print(r["message"]["content"] if "message" in r else r["text"])' "$work/$1.json"; }

for target in tiny nano; do
    case $target in
    tiny) tokdir=../shared/k3-release; mname=serve-tiny ;;
    nano) dir=models/k3-nano; tokdir=models/k3-nano; mname=k3-nano ;;
    esac
    echo "== $target: the openai client"
    start_server "$target" "$K3_BIN" --max-tokens 400 || die "$target: k3 serve exited: $(cat "$work/$target.log")"
    mkdir -p "$work/$target-out"
    node tests/gates/structured_client.mjs "http://127.0.0.1:$port" "$mname" "$work/$target-out" ||
        die "$target: the openai client failed (log: $(tail -5 "$work/$target.log"))"
    validate "$work/$target-out"
    grep -q "warning: structured output not fully enforced.*patternProperties" "$work/$target.log" ||
        die "$target: the server did not log the warning"
    stop_server "$pid" "$target"
done

echo "== the other fields (serve-tiny)"
dir=$(model serve-tiny tiny-a --vocab 163840)
tokdir=../shared/k3-release
start_server other "$K3_BIN" --max-tokens 400 || die "other: $(cat "$work/other.log")"
ask='"messages":[{"role":"user","content":"Answer."}],"max_tokens":120,"temperature":0,"thinking":false'
post gbnf /v1/chat/completions "{$ask,\"grammar\":\"root ::= \\\"(\\\" [a-z]+ (\\\",\\\" [a-z]+)* \\\")\\\"\"}"
content gbnf | "$PYTHON" -c 'import re,sys; t=sys.stdin.read().rstrip("\n"); sys.exit(0 if re.fullmatch(r"\([a-z]+(,[a-z]+)*\)", t) else 1)' ||
    die "grammar: $(content gbnf)"
post choice /v1/chat/completions "{$ask,\"guided_choice\":[\"yes\",\"no\",\"maybe so\"]}"
case "$(content choice)" in yes | no | "maybe so") ;; *) die "guided_choice: $(content choice)" ;; esac
post gjson /v1/chat/completions "{$ask,\"guided_json\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":2}}"
content gjson | "$PYTHON" -c 'import json,sys,jsonschema; jsonschema.validate(json.loads(sys.stdin.read()), {"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2})' ||
    die "guided_json: $(content gjson)"
post comp /v1/completions '{"prompt":"JSON:","max_tokens":60,"temperature":0,"response_format":{"type":"json_object"}}'
content comp | "$PYTHON" -c 'import json,sys; v=json.loads(sys.stdin.read()); sys.exit(0 if isinstance(v, dict) else 1)' ||
    die "completions json_object: $(content comp)"
echo "ok: grammar $(content gbnf), guided_choice $(content choice), guided_json $(content gjson), completions json_object $(content comp)"
stop_server "$pid" other

echo "== --parallel 2: different grammars in one step each equal their lone answer"
start_server par "$K3_BIN" --parallel 2 --max-tokens 400 || die "par: $(cat "$work/par.log")"
ask='"messages":[{"role":"user","content":"Answer."}],"thinking":false'
b1="{$ask,\"max_tokens\":60,\"seed\":5,\"temperature\":0.9,\"guided_json\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}}"
b2="{$ask,\"max_tokens\":60,\"temperature\":0,\"grammar\":\"root ::= [a-z]+ (\\\" \\\" [a-z]+)*\"}"
post lone1 /v1/chat/completions "$b1"
post lone2 /v1/chat/completions "$b2"
post both1 /v1/chat/completions "$b1" &
p1=$!
post both2 /v1/chat/completions "$b2" &
p2=$!
wait "$p1" || die "both1 failed"
wait "$p2" || die "both2 failed"
[ "$(content lone1)" = "$(content both1)" ] || die "slot 1 differs from its lone answer: $(content lone1) vs $(content both1)"
[ "$(content lone2)" = "$(content both2)" ] || die "slot 2 differs from its lone answer: $(content lone2) vs $(content both2)"
echo "ok: two grammars in two slots = their lone answers: $(content both1) / $(content both2)"
stop_server "$pid" par
echo "ok: structured outputs in k3 serve"
