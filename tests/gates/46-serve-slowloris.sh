# 46-serve-slowloris: `k3 serve` under slow-client attacks (docs/SERVE.md,
# "Slow and greedy clients"), all on loopback (127.0.0.1 .. 127.0.0.4 are
# different client addresses), with a tiny model, --header-timeout 2 and
# --timeout 30 (so every deadline checked here is far from --timeout):
#  - 40 sockets from 127.0.0.1 and 12 each from 127.0.0.3 and .4 that send
#    only "GET /health HTTP/1.1\r\n": 16 per address are held (--max-per-client
#    16), the other 24 of 127.0.0.1 get 503 at once; with 40 held, more than
#    the 25 connection threads the server allows, /health from 127.0.0.2
#    answers 200 and a completion from 127.0.0.2 is served, both promptly;
#  - every held slow socket gets 408 and is closed by the head deadline
#    (2 s from its accept, never 30 s), including one that sends a byte every
#    0.3 s (the deadline does not move when bytes arrive);
#  - a body trickled at 20 bytes/s is cut off (408) a few seconds after its
#    head, not at --timeout;
#  - afterwards 127.0.0.1 is served again (its count went back to 0).
# The driver stops by itself (every socket has a timeout); the server is
# killed by the trap whatever happens.
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/serve-slow"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)

pid=""
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
    [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM

: >"$work/server.log"
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --exit-after 300 --timeout 30 \
    --header-timeout 2 --max-per-client 16 --max-queue 16 2>>"$work/server.log" &
pid=$!
port=""
i=0
while [ -z "$port" ]; do
    kill -0 "$pid" 2>/dev/null || die "k3 serve exited: $(cat "$work/server.log")"
    [ $i -lt 600 ] || die "k3 serve did not start listening"
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$work/server.log")
    [ -n "$port" ] || sleep 0.1
    i=$((i + 1))
done

"$PYTHON" - "$port" <<'EOF' || die "slow clients: see above: $(tail -n 5 "$work/server.log")"
import json, socket, sys, threading, time

port = int(sys.argv[1])
HEAD_TIMEOUT = 2.0
failed = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed.append(what)

def connect(src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(20)
    s.connect(("127.0.0.1", port))
    return s

def reply(s):
    """Everything until the server closes: (status or None, body, seconds)."""
    t0, data = time.time(), b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except (socket.timeout, ConnectionResetError):
        pass
    status = None
    if data.startswith(b"HTTP/1.1 "):
        status = int(data[9:12])
    return status, data.partition(b"\r\n\r\n")[2], time.time() - t0

def request(src, raw):
    t0 = time.time()
    s = connect(src)
    s.sendall(raw)
    status, body, _ = reply(s)
    s.close()
    return status, body, time.time() - t0

partial = b"GET /health HTTP/1.1\r\n"
slow = {}
t_open = time.time()
for src, n in (("127.0.0.1", 40), ("127.0.0.3", 12), ("127.0.0.4", 12)):
    slow[src] = []
    for _ in range(n):
        s = connect(src)
        s.sendall(partial)
        slow[src].append(s)
trickle = connect("127.0.0.2")
t_trickle = time.time()
time.sleep(0.5)

# 127.0.0.1 is over its limit: the sockets past 16 were refused at once.
refused = 0
for s in slow["127.0.0.1"][16:]:
    s.settimeout(2)
    status, _, _ = reply(s)
    refused += status == 503
check(refused == 24, "127.0.0.1: 24 of 40 slow sockets refused 503 at once (%d)" % refused)

status, body, took = request("127.0.0.2", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
check(status == 200 and json.loads(body)["status"] == "ok" and took < 1.5,
      "/health from 127.0.0.2 with 40 slow heads held: %s in %.2f s" % (status, took))
body = json.dumps({"prompt": "Hi", "max_tokens": 2, "temperature": 0}).encode()
# (Connection: close: request() reads to the close, and an HTTP/1.1 answer
# otherwise keeps the connection for --keep-alive-s.)
status, out, took = request("127.0.0.2", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                            b"Connection: close\r\n"
                            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                            % (len(body), body))
check(status == 200 and json.loads(out)["choices"][0]["text"] is not None and took < 10,
      "a completion from 127.0.0.2 meanwhile: %s in %.2f s" % (status, took))

# The trickler: a byte every 0.3 s, never a whole head.
def trickle_bytes():
    for c in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200:
        try:
            trickle.send(bytes([c]))
        except OSError:
            return
        time.sleep(0.3)
th = threading.Thread(target=trickle_bytes, daemon=True)
th.start()

# Every held slow socket gets 408 at the head deadline and is closed.
held = slow["127.0.0.1"][:16] + slow["127.0.0.3"] + slow["127.0.0.4"]
late = []
for s in held:
    status, _, _ = reply(s)
    late.append((status, time.time() - t_open))
worst = max(t for _, t in late)
check(all(st == 408 for st, _ in late) and worst < HEAD_TIMEOUT + 2.5,
      "40 held slow sockets: all 408 and closed, the last %.2f s after opening (%s)"
      % (worst, sorted(set(st for st, _ in late), key=str)))
status, _, _ = reply(trickle)
took = time.time() - t_trickle
check(status == 408 and took < HEAD_TIMEOUT + 2.5,
      "a head trickled a byte every 0.3 s: %s after %.2f s (the deadline did not move)"
      % (status, took))

# A body trickled at 20 bytes/s: cut off soon after its head, not at --timeout.
s = connect("127.0.0.2")
t0 = time.time()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
s.settimeout(0.05)
status = None
data = b""
while time.time() - t0 < 15 and status is None:
    try:
        s.send(b'x')
        d = s.recv(4096)
        if not d:
            break
        data += d
        if data.startswith(b"HTTP/1.1 "):
            status = int(data[9:12])
    except socket.timeout:
        pass
    except OSError:
        break
took = time.time() - t0
check(status == 408 and took < 2 * HEAD_TIMEOUT + 3,
      "a body trickled at 20 bytes/s: %s after %.2f s" % (status, took))
s.close()

status, _, _ = request("127.0.0.1", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
check(status == 200, "127.0.0.1 served again once its slow sockets are gone: %s" % status)
sys.exit(1 if failed else 0)
EOF
grep -q ' 408 The request head did not arrive' "$work/server.log" ||
    die "no head-deadline refusal logged: $(tail -n 5 "$work/server.log")"
echo "k3 serve: slow clients checks passed"
