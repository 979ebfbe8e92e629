# 45-serve: `k3 serve`, the OpenAI-compatible HTTP server, on loopback with a
# tiny model (vocabulary of the release) and the release tokenizer.
#  - docs/SERVE.md's Node example (its ```js block) runs against the server;
#  - a real client, the official `openai` npm package (openai_client.mjs):
#    chat and text completions, whole and streamed, a burst of 8 concurrent
#    requests answered as when sent alone, an aborted stream;
#  - curl: /health, /v1/models, and every refusal as a JSON error with the
#    right status (malformed JSON, wrong-typed or unknown field, unknown role,
#    max_tokens over --max-tokens, body over --max-body, prompt over the
#    context, chunked body, 404, 405);
#  - a client that disconnects mid-stream cancels its generation, and the
#    next answer is still right; one that leaves while queued leaves the
#    queue; a full queue (--max-queue 0) answers 503;
#    a client too slow to send its request gets 408 while others are served;
#  - a continued conversation reuses the previous prompt's state and gets
#    the same answer as from scratch;
#  - --exit-after stops an orphaned server; SIGTERM stops it cleanly (exit 0,
#    which under ASan also means no leaks).
# Every server listens on 127.0.0.1 only, on a port it picks (--port 0), and
# is killed by the trap whatever happens.
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/serve"
rm -rf "$work"
mkdir -p "$work"
command -v node >/dev/null || die "node is needed for the OpenAI client (npm ci)"
command -v curl >/dev/null || die "curl is needed"
[ -f node_modules/openai/package.json ] || die "the openai npm package is missing: run npm ci"
dir=$(model serve-tiny tiny-a --vocab 163840)

. tests/gates/serve_lib.sh

# req NAME STATUS URL-PATH [curl args]: the response body goes to $work/NAME.json.
req() {
    name=$1
    want=$2
    path=$3
    shift 3
    got=$(curl -s -o "$work/$name.json" -w '%{http_code}' --max-time 120 "$@" \
        "http://127.0.0.1:$port$path") || true
    [ "$got" = "$want" ] || die "$name: HTTP $got, wanted $want: $(head -c 400 "$work/$name.json")"
}

# json NAME EXPR: evaluates the Python expression EXPR over the body `r` of NAME.
json() {
    "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
        "$work/$1.json" "$2"
}

# refused NAME STATUS PATH BODY PARAM [CODE]: an OpenAI error naming PARAM ("None": no param).
refused() {
    req "$1" "$2" "$3" -H 'Content-Type: application/json' --data-binary "$4"
    [ "$(json "$1" 'r["error"]["type"]')" = invalid_request_error ] || die "$1: not an error body"
    [ "$(json "$1" 'r["error"]["param"]')" = "$5" ] ||
        die "$1: param $(json "$1" 'r["error"]["param"]'), wanted $5"
    [ -z "${6:-}" ] || [ "$(json "$1" 'r["error"]["code"]')" = "$6" ] ||
        die "$1: code $(json "$1" 'r["error"]["code"]'), wanted $6"
    printf 'ok %-16s %s %s\n' "$1" "$2" "$(json "$1" 'r["error"]["message"][:90]')"
}

chat() { # chat MAX_TOKENS THINKING EXTRA: a one-message chat request body
    printf '{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":%s,"temperature":0,"thinking":%s%s}' "$1" "$2" "${3:-}"
}

echo "== command line"
expect_exit 2 "no MODEL_DIR given" "$K3_BIN" serve --tok "$tokdir" --port 0
expect_exit 2 "not an address this machine resolves" "$K3_BIN" serve "$dir" --tok "$tokdir" \
    --port 0 --host no-such-host.invalid
expect_exit 2 "unknown option --gen" "$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --gen 5

echo "== server A: endpoints and refusals"
start_server a "$K3_BIN" --max-body 65536 --max-tokens 3000 --timeout 3 --max-queue 8 ||
    die "a: k3 serve exited: $(cat "$work/a.log")"
a_pid=$pid
req health 200 /health
[ "$(json health 'r["status"]')" = ok ] || die "health: $(cat "$work/health.json")"
req models 200 /v1/models
[ "$(json models 'r["data"][0]["id"]')" = serve-tiny ] || die "models: $(cat "$work/models.json")"
echo "ok health, models"

refused malformed 400 /v1/chat/completions '{"messages": [' None invalid_json
refused not-object 400 /v1/chat/completions '[1,2]' None
refused wrong-type 400 /v1/chat/completions "$(chat '"many"' false)" max_tokens invalid_type
refused wrong-type-2 400 /v1/completions '{"prompt":"x","stream":"yes"}' stream invalid_type
refused unknown-field 400 /v1/chat/completions "$(chat 4 false ',"bogus":1')" bogus unknown_parameter
refused no-messages 400 /v1/chat/completions '{"max_tokens":4}' messages missing_required_parameter
refused bad-role 400 /v1/chat/completions '{"messages":[{"role":"robot","content":"x"}]}' 'messages[0].role'
refused image-part 400 /v1/chat/completions \
    '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}' \
    'messages[0].content[0]'
refused zero-tokens 400 /v1/chat/completions "$(chat 0 false)" max_tokens # over --max-tokens is clamped (gate 55)
refused n-two 400 /v1/chat/completions "$(chat 4 false ',"n":2')" n
"$PYTHON" -c 'import json; print(json.dumps({"prompt": "hello " * 5000, "max_tokens": 4}))' >"$work/long.json"
refused long-prompt 400 /v1/completions "@$work/long.json" prompt context_length_exceeded
"$PYTHON" -c 'print("{\"prompt\": \"" + "x" * 70000 + "\"}")' >"$work/big.json"
req oversize 413 /v1/completions -H 'Content-Type: application/json' --data-binary "@$work/big.json"
req chunked 411 /v1/completions -H 'Transfer-Encoding: chunked' --data-binary '{"prompt":"x"}'
req no-endpoint 404 /v1/embeddings -d '{}'
req wrong-method 405 /v1/chat/completions
echo "ok oversize 413, chunked 411, unknown path 404, GET on a POST endpoint 405"

echo "== server A: the OpenAI client"
node tests/gates/openai_client.mjs "http://127.0.0.1:$port" serve-tiny || die "openai client checks failed"
# docs/SERVE.md's Node example, as written there (its only ```js block)
sed -n '/^```js$/,/^```$/p' docs/SERVE.md | sed '1d;$d' >"$work/serve-example.mjs"
[ -s "$work/serve-example.mjs" ] || die "no Node example in docs/SERVE.md"
ln -sfn "$(pwd)/node_modules" "$work/node_modules" # its import, wherever K3_BUILD is
K3_URL="http://127.0.0.1:$port/v1" node "$work/serve-example.mjs" >"$work/serve-example.out" 2>&1 ||
    die "docs/SERVE.md's Node example failed: $(tail -5 "$work/serve-example.out")"
grep -q "completion_tokens" "$work/serve-example.out" || die "the Node example printed no usage"
echo "ok: docs/SERVE.md's Node example runs"
grep -q ' 499 .*finish=cancelled' "$work/a.log" || die "the aborted stream was not cancelled: $(cat "$work/a.log")"

echo "== server A: curl disconnects mid-stream"
req reference 200 /v1/chat/completions -d "$(chat 8 false)"
set +e
curl -s -N --max-time 2 -o "$work/cut.txt" -d "$(chat 3000 false ',"stream":true')" \
    "http://127.0.0.1:$port/v1/chat/completions"
rc=$?
set -e
[ "$rc" -eq 28 ] || die "curl --max-time should have cut the stream (exit $rc)"
grep -q '^data: {' "$work/cut.txt" || die "no chunk arrived before the cut"
grep -q 'DONE' "$work/cut.txt" && die "the stream finished before the cut: not a disconnect test"
i=0
until req idle 200 /health && [ "$(json idle 'r["running"]')" = 0 ]; do
    [ $i -lt 300 ] || die "the server is still generating for the client that left"
    sleep 0.1
    i=$((i + 1))
done
[ "$(grep -c ' 499 .*finish=cancelled' "$work/a.log")" = 2 ] ||
    die "the disconnected stream was not cancelled: $(tail -n 3 "$work/a.log")"
req after-cut 200 /v1/chat/completions -d "$(chat 8 false)"
[ "$(json after-cut 'r["choices"]')" = "$(json reference 'r["choices"]')" ] ||
    die "the answer after the disconnect differs: $(cat "$work/after-cut.json")"
echo "ok disconnect: generation cancelled, next answer identical"

# A client that leaves while its request waits in the queue: the request
# leaves the queue at once (the running one goes on).
curl -s -N --max-time 120 -o "$work/long-a.txt" -d "$(chat 3000 false ',"stream":true')" \
    "http://127.0.0.1:$port/v1/chat/completions" &
long=$!
pids="$pids $long"
i=0
until grep -q '"content"' "$work/long-a.txt" 2>/dev/null; do
    [ $i -lt 300 ] || die "the long stream never started"
    sleep 0.1
    i=$((i + 1))
done
set +e
curl -s --max-time 1 -o /dev/null -d "$(chat 4 false)" "http://127.0.0.1:$port/v1/chat/completions"
rc=$?
set -e
[ "$rc" -eq 28 ] || die "the queued request should still have been waiting (curl exit $rc)"
i=0
until req queue-left 200 /health && [ "$(json queue-left 'r["waiting"]')" = 0 ]; do
    [ $i -lt 300 ] || die "the request of a client that left is still queued"
    sleep 0.1
    i=$((i + 1))
done
[ "$(json queue-left 'r["running"]')" = 1 ] || die "the long stream should still be running"
kill "$long" 2>/dev/null || true
wait "$long" 2>/dev/null || true
echo "ok queued client left: its request left the queue, the running one went on"

echo "== server A: state reuse"
req turn1 200 /v1/chat/completions -d "$(chat 1 false)"
turn2='{"messages":[{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi!"},{"role":"user","content":"Tell me more."}],"max_tokens":8,"temperature":0,"thinking":false}'
req turn2 200 /v1/chat/completions -d "$turn2"
cached=$(json turn2 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ "$cached" = "$(json turn1 'r["usage"]["prompt_tokens"]')" ] ||
    die "turn 2 reused $cached prompt tokens, wanted turn 1's whole prompt"
req other 200 /v1/completions -d '{"prompt":"Something else entirely","max_tokens":2,"temperature":0}'
req turn2-fresh 200 /v1/chat/completions -d "$turn2"
# the slot's state now holds the other prompt, but the prefix cache (on by
# default, docs/SERVE.md) kept turn 2's whole prompt: it starts from there
[ "$(json turn2-fresh 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')" = \
    "$(json turn2 'r["usage"]["prompt_tokens"]')" ] ||
    die "turn 2 after another prompt should start from the prefix cache's snapshot of it"
[ "$(json turn2-fresh 'r["choices"]')" = "$(json turn2 'r["choices"]')" ] ||
    die "the answer with reuse differs from the one from scratch"
echo "ok reuse: $cached prompt tokens reused, same answer as from scratch"

echo "== server A: a slow client"
"$PYTHON" - "$port" >"$work/slow.txt" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and nothing more
s.settimeout(20)
t0 = time.time()
data = s.recv(4096)
print(data.split(b"\r\n")[0].decode(), round(time.time() - t0, 1))
EOF
slow=$!
pids="$pids $slow"
sleep 0.5
req while-slow 200 /v1/completions -d '{"prompt":"Hi","max_tokens":2,"temperature":0}'
kill -0 "$slow" 2>/dev/null || die "the other request was answered only after the slow client's timeout"
wait "$slow" || die "slow client: $(cat "$work/slow.txt")"
grep -q '^HTTP/1.1 408 ' "$work/slow.txt" || die "slow client: $(cat "$work/slow.txt")"
echo "ok slow client: $(cat "$work/slow.txt") while another request was served"

stop_server "$a_pid" a
echo "ok server A stopped cleanly"

echo "== server B: a full queue"
start_server b "$K3_BIN" --max-queue 0 ||
    die "b: k3 serve exited: $(cat "$work/b.log")"
b_pid=$pid
curl -s -N --max-time 120 -o "$work/long-stream.txt" -d "$(chat 3000 false ',"stream":true')" \
    "http://127.0.0.1:$port/v1/chat/completions" &
long=$!
pids="$pids $long"
i=0
until grep -q '"content"' "$work/long-stream.txt" 2>/dev/null; do
    [ $i -lt 300 ] || die "the long stream never started"
    sleep 0.1
    i=$((i + 1))
done
req busy 503 /v1/chat/completions -d "$(chat 4 false)"
[ "$(json busy 'r["error"]["code"]')" = server_busy ] || die "busy: $(cat "$work/busy.json")"
kill "$long" 2>/dev/null || true
wait "$long" 2>/dev/null || true
i=0
until req b-idle 200 /health && [ "$(json b-idle 'r["running"]')" = 0 ]; do
    [ $i -lt 300 ] || die "server B still busy after its client left"
    sleep 0.1
    i=$((i + 1))
done
req not-busy 200 /v1/chat/completions -d "$(chat 4 false)"
echo "ok queue: 503 while full, served again once free"
stop_server "$b_pid" b

echo "== server C: --exit-after"
start_server c "$K3_BIN" --exit-after 1 ||
    die "c: k3 serve exited: $(cat "$work/c.log")"
c_pid=$pid
i=0
while kill -0 "$c_pid" 2>/dev/null; do
    [ $i -lt 200 ] || die "server C did not exit by itself"
    sleep 0.1
    i=$((i + 1))
done
wait "$c_pid" || die "server C: exit $? after --exit-after: $(cat "$work/c.log")"
grep -q 'exit-after' "$work/c.log" || die "server C: $(cat "$work/c.log")"
echo "ok exit-after: the server stopped by itself"
echo "k3 serve: all checks passed"
