# 47-serve-stop-fail: how `k3 serve` ends answers it cannot finish, and
# what it says about itself (docs/SERVE.md, "Stopping and failing"); all on
# loopback with a tiny model:
#  - a request ended by bare LF gets 400 at once, not 408 after --timeout;
#  - a --host that is not loopback prints a WARNING, even with --quiet
#    (192.0.2.1, a documentation address this machine does not have, so
#    nothing is ever exposed: the bind then fails, exit 1);
#  - SIGTERM with a stream running and a request waiting: the stream ends
#    with an error event (code server_stopping) and "data: [DONE]", the
#    waiting request gets 503; SIGTERM with a non-streaming request running:
#    it gets 503 server_stopping, not an empty 200; both servers exit 0;
#  - SIGTERM with --parallel 2, a chat completions and a messages stream
#    running and a responses stream waiting: each ends in its own API's
#    error event (never its "finished" event), the server exits 0;
#  - a run that is invalid (a weight read fails for good, injected by the
#    fault shim of a -DK3_FAULT_INJECTION build, as in gate 72): the request
#    gets 500, then /health answers 503 {"status": "error", "reason": ...},
#    the next request 503 run_invalid, and the server exits 4 on SIGTERM.
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/serve-stop"
rm -rf "$work"
mkdir -p "$work"
command -v curl >/dev/null || die "curl is needed"
dir=$(model serve-tiny tiny-a --vocab 163840)

. tests/gates/serve_lib.sh

# get NAME URL-PATH [curl args]: the status; the body goes to $work/NAME.json.
get() {
    name=$1
    path=$2
    shift 2
    curl -s -o "$work/$name.json" -w '%{http_code}' --max-time 60 "$@" \
        "http://127.0.0.1:$port$path" || true
}

json() {
    "$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
        "$work/$1.json" "$2"
}

# wait_health FIELD N WHAT: until /health's FIELD (running, waiting) is N;
# dies naming WHAT after 15 s.
wait_health() {
    i=0
    until [ "$(get h /health -s)" = 200 ] && [ "$(json h "r[\"$1\"]")" = "$2" ]; do
        [ $i -lt 300 ] || die "$3"
        sleep 0.05
        i=$((i + 1))
    done
}

long_chat='{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":3000,'
long_chat="$long_chat"'"temperature":0,"thinking":false'

echo "== a warning for a non-loopback --host"
expect_exit 1 "WARNING: --host 192.0.2.1 is not a loopback address" \
    "$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --host 192.0.2.1 --quiet

echo "== bare LF: 400 at once"
start_server lf "$K3_BIN" --timeout 30 || die "lf: $(cat "$work/lf.log")"
lf_pid=$pid
grep -q WARNING "$work/lf.log" && die "a warning for 127.0.0.1: $(cat "$work/lf.log")"
"$PYTHON" - "$port" <<'EOF' || die "bare LF"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
t0 = time.time()
s.sendall(b"GET /health HTTP/1.1\n\n")
line = s.recv(4096).split(b"\r\n")[0].decode()
took = time.time() - t0
print("bare LF:", line, "after %.2f s" % took)
sys.exit(0 if line.startswith("HTTP/1.1 400 ") and took < 2 else 1)
EOF
echo "== SIGTERM: a running stream, a waiting request"
wait_stream_start() {
    i=0
    until grep -q '"content"' "$1" 2>/dev/null; do
        [ $i -lt 300 ] || die "the stream never started"
        sleep 0.05
        i=$((i + 1))
    done
}
curl -s -N --max-time 60 -o "$work/stream.txt" -d "$long_chat,\"stream\":true}" \
    "http://127.0.0.1:$port/v1/chat/completions" &
pids="$pids $!"
stream=$!
wait_stream_start "$work/stream.txt"
curl -s -o "$work/waiting.json" -w '%{http_code}' --max-time 60 -d "$long_chat}" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$work/waiting.code" &
pids="$pids $!"
waiting=$!
wait_health waiting 1 "the second request never queued"
stop_server "$lf_pid" lf 0
wait "$stream" || true
wait "$waiting" || true
# The events: chunks, then {"error": {... "code": "server_stopping"}}, then [DONE].
"$PYTHON" - "$work/stream.txt" <<'EOF' || die "the cut stream: $(tail -c 300 "$work/stream.txt")"
import json, sys
ev = [l[6:] for l in open(sys.argv[1]).read().split("\n\n") if l.startswith("data: ")]
ok = len(ev) >= 3 and ev[-1] == "[DONE]" and "choices" in json.loads(ev[0])
ok = ok and "error" in ev[-2] and json.loads(ev[-2])["error"]["code"] == "server_stopping"
print("stream events:", len(ev), "last:", ev[-2:])
sys.exit(0 if ok else 1)
EOF
[ "$(cat "$work/waiting.code")" = 503 ] || die "waiting request: $(cat "$work/waiting.code")"
echo "ok stream ended: $(grep -c '^data: {' "$work/stream.txt") events, error event, [DONE]"
echo "ok waiting request: 503"

echo "== SIGTERM: a running non-streaming request"
start_server run "$K3_BIN" || die "run: $(cat "$work/run.log")"
curl -s -o "$work/running.json" -w '%{http_code}' --max-time 60 -d "$long_chat}" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$work/running.code" &
pids="$pids $!"
running=$!
wait_health running 1 "no generation started"
stop_server "$pid" run 0
wait "$running" || true
[ "$(cat "$work/running.code")" = 503 ] &&
    [ "$(json running 'r["error"]["code"]')" = server_stopping ] ||
    die "running request: $(cat "$work/running.code") $(head -c 300 "$work/running.json")"
echo "ok running request: 503 server_stopping"

echo "== SIGTERM with --parallel 2: two streams of two APIs running, a third waiting"
start_server par "$K3_BIN" --parallel 2 || die "par: $(cat "$work/par.log")"
par_pid=$pid
model_name=$(basename "$dir")
curl -s -N --max-time 60 -o "$work/par-chat.txt" -d "$long_chat,\"stream\":true}" \
    "http://127.0.0.1:$port/v1/chat/completions" &
pids="$pids $!"
c_chat=$!
curl -s -N --max-time 60 -o "$work/par-msg.txt" -H 'content-type: application/json' \
    -d '{"model":"'"$model_name"'","messages":[{"role":"user","content":"Hello there"}],"max_tokens":3000,"temperature":0,"stream":true}' \
    "http://127.0.0.1:$port/v1/messages" &
pids="$pids $!"
c_msg=$!
wait_health running 2 "par: two generations never ran at once"
curl -s -N --max-time 60 -o "$work/par-resp.txt" \
    -d '{"model":"'"$model_name"'","input":"Hello there","max_output_tokens":3000,"stream":true}' \
    "http://127.0.0.1:$port/v1/responses" &
pids="$pids $!"
c_resp=$!
wait_health waiting 1 "par: the third request never queued"
wait_stream_start "$work/par-chat.txt"
stop_server "$par_pid" par 0
wait "$c_chat" "$c_msg" "$c_resp" || true
# Each ends in its own API's error event, none as if it had finished.
"$PYTHON" - "$work" <<'EOF' || die "par: a cut stream ended wrongly"
import json, sys
w = sys.argv[1]
def events(name):
    out = []
    for block in open(f"{w}/par-{name}.txt").read().split("\n\n"):
        ev = [l[7:] for l in block.split("\n") if l.startswith("event: ")]
        data = [l[6:] for l in block.split("\n") if l.startswith("data: ")]
        if data:
            out.append((ev[0] if ev else None, data[0]))
    return out
chat, msg, resp = events("chat"), events("msg"), events("resp")
ok = chat[-1][1] == "[DONE]" and json.loads(chat[-2][1])["error"]["code"] == "server_stopping"
ok = ok and len(chat) > 3 and "choices" in json.loads(chat[0][1])
ok = ok and msg[0][0] == "message_start" and msg[-1][0] == "error"
ok = ok and json.loads(msg[-1][1])["error"]["type"] == "overloaded_error"
ok = ok and not any(e == "message_stop" for e, _ in msg)
ok = ok and resp[-1][0] == "error" and json.loads(resp[-1][1])["code"] == "server_stopping"
ok = ok and not any(e == "response.completed" for e, _ in resp)
print("chat:", len(chat), "events, last", chat[-2:])
print("messages:", len(msg), "events, last", msg[-1])
print("responses:", len(resp), "events, last", resp[-1])
sys.exit(0 if ok else 1)
EOF
echo "ok --parallel 2: each stream ended by its API's error event, server exit 0"

echo "== RUN INVALID: /health reports it"
fb="$K3_BUILD/fault"
(
    unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL
    make -s -j2 BUILD="$fb" CC="${CC:-cc}" OPT="${OPT:--O2 -g}" \
        CFLAGS="${CFLAGS:-} -DK3_FAULT_INJECTION" "$fb/bin/k3"
) || die "the fault-injection build failed"
# Every weight read from the Nth on fails: the smallest power of two N that
# lets the model load is within the first request's reads (a one-expert
# cache re-reads experts at every token).
n=1
while :; do
    [ $n -le 1048576 ] || die "no N lets the model load and then fails a request"
    export K3_FAULT="read:$n:fail:1000000000"
    if start_server fault "$fb/bin/k3" --cache-experts 1; then
        unset K3_FAULT
        break
    fi
    unset K3_FAULT
    wait "$pid" 2>/dev/null || true
    n=$((n * 2))
done
fault_pid=$pid
code=$(get first /v1/completions -d '{"prompt":"Hello","max_tokens":64,"temperature":0}')
[ "$code" = 500 ] || die "read $n on fails, but the request got $code: $(cat "$work/first.json")"
grep -q 'RUN INVALID' "$work/fault.log" || die "no RUN INVALID logged: $(cat "$work/fault.log")"
code=$(get health /health -s)
[ "$code" = 503 ] && [ "$(json health 'r["status"]')" = error ] &&
    json health 'r["reason"]' | grep -q 'RUN INVALID' ||
    die "/health after an invalid run: $code $(cat "$work/health.json")"
code=$(get next /v1/completions -d '{"prompt":"Hello","max_tokens":4,"temperature":0}')
[ "$code" = 503 ] && [ "$(json next 'r["error"]["code"]')" = run_invalid ] ||
    die "a request after an invalid run: $code $(cat "$work/next.json")"
stop_server "$fault_pid" fault 4
echo "ok run invalid (reads from $n on fail): 500, then /health 503, requests 503, exit 4"
echo "   reason: $(json health 'r["reason"][:90]')"
echo "k3 serve: stop and failure checks passed"
