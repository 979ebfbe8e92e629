"""keep_alive_check.py PORT - gate 58's checks of HTTP keep-alive against a
k3 serve on 127.0.0.1:PORT started with --keep-alive-s 1,
--keep-alive-requests 4, --max-queue 2, --max-per-client 16. Prints one line
per check; exits 1 when any failed."""
import json
import socket
import sys
import time

PORT = int(sys.argv[1])
IDLE = 1.0
CAP = 4
failed = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed.append(what)


class Conn:
    """One connection from the loopback address src: sends requests, reads
    responses framed as their heads say."""

    def __init__(self, src="127.0.0.1"):
        self.s, self.buf = socket.create_connection(("127.0.0.1", PORT), 20, (src, 0)), b""

    def send(self, data):
        self.s.sendall(data)

    def close(self):
        self.s.close()

    def more(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        out, _, self.buf = self.buf.partition(b"\r\n")
        return out

    def response(self):
        """(status, {lower-case header: value}, body, framing)."""
        while b"\r\n\r\n" not in self.buf:
            self.more()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            h[k.strip().lower()] = v.strip()
        if "content-length" in h:
            return status, h, self.take(int(h["content-length"])), "length"
        if h.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                n = int(self.line(), 16)
                if n == 0:
                    self.line()  # the blank line after the last chunk
                    return status, h, body, "chunked"
                body += self.take(n)
                self.line()
        body = self.buf  # to the close
        try:
            while True:
                self.more()
        except EOFError:
            pass
        body, self.buf = self.buf, b""
        return status, h, body, "close"

    def closed(self, within):
        """Whether the server closes (EOF, no bytes) within `within` seconds,
        and after how long."""
        t0 = time.time()
        self.s.settimeout(within)
        try:
            d = self.s.recv(1)
            return d == b"" and not self.buf, time.time() - t0
        except (socket.timeout, ConnectionResetError) as e:
            return isinstance(e, ConnectionResetError), time.time() - t0


def req(method, path, body=None, version="1.1", extra=""):
    data = json.dumps(body).encode() if body is not None else b""
    head = "%s %s HTTP/%s\r\nHost: x\r\n%s" % (method, path, version, extra)
    if body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
    return head.encode() + b"\r\n" + data


COMPLETION = {"prompt": "Hi", "max_tokens": 2, "temperature": 0}
TOKENIZE = {"content": "hello"}

# 1. Sequential requests on one socket up to the cap.
r = Conn()
seen = []
for i, (m, p, b) in enumerate([("GET", "/v1/models", None), ("POST", "/tokenize", TOKENIZE),
                               ("POST", "/v1/completions", COMPLETION),
                               ("GET", "/v1/models", None)]):
    r.send(req(m, p, b))
    st, h, body, _ = r.response()
    seen.append((st, h.get("connection"), h.get("keep-alive")))
check(all(x[0] == 200 for x in seen) and [x[1] for x in seen] == ["keep-alive"] * 3 + ["close"],
      "4 requests on one socket: %s" % seen)
check(seen[0][2] == "timeout=1, max=3" and seen[2][2] == "timeout=1, max=1",
      "the Keep-Alive hint counts down the requests left: %s" % [x[2] for x in seen])
gone, took = r.closed(3)
check(gone and took < 1.5, "after the %d-th answer the server closes (%.2f s)" % (CAP, took))
r.close()

# 2. Pipelined: two requests in one write.
r = Conn()
r.send(req("POST", "/tokenize", {"content": "one"}) + req("POST", "/v1/completions", COMPLETION))
a, b = r.response(), r.response()
check(a[0] == 200 and "tokens" in json.loads(a[2]) and b[0] == 200 and
      "choices" in json.loads(b[2]) and b[1].get("connection") == "keep-alive",
      "two pipelined requests answered in order: %d %d" % (a[0], b[0]))

# 3. Idle: the server closes a kept connection after --keep-alive-s, silently.
gone, took = r.closed(IDLE + 3)
check(gone and IDLE - 0.3 < took < IDLE + 1.5,
      "an idle kept connection is closed after %.2f s (--keep-alive-s %g)" % (took, IDLE))
r.close()

# 4. Connection: close; HTTP/1.0 with and without keep-alive.
for version, extra, keep in (("1.1", "Connection: close\r\n", False), ("1.0", "", False),
                             ("1.0", "Connection: keep-alive\r\n", True)):
    r = Conn()
    r.send(req("POST", "/tokenize", TOKENIZE, version, extra))
    st, h, _, _ = r.response()
    ok = st == 200 and h.get("connection") == ("keep-alive" if keep else "close")
    if keep:
        r.send(req("POST", "/tokenize", TOKENIZE, version, extra))
        st2, h2, _, _ = r.response()
        ok = ok and st2 == 200
    else:
        gone, _ = r.closed(2)
        ok = ok and gone
    check(ok, "HTTP/%s %s: %s" % (version, extra.strip() or "(no Connection)",
                                  "kept, a second request answered" if keep else "closed"))
    r.close()

# 5. Streams: chunked and kept on HTTP/1.1, to the close on HTTP/1.0.
stream = dict(COMPLETION, stream=True)
r = Conn()
r.send(req("POST", "/v1/completions", stream))
st, h, body, framing = r.response()
r.send(req("POST", "/tokenize", TOKENIZE))
st2, _, _, _ = r.response()
check(st == 200 and framing == "chunked" and body.rstrip().endswith(b"data: [DONE]") and st2 == 200,
      "an HTTP/1.1 stream is chunked (%s) and the connection takes the next request (%d)"
      % (framing, st2))
r.close()
r = Conn()
r.send(req("POST", "/v1/completions", stream, "1.0", "Connection: keep-alive\r\n"))
st, h, body, framing = r.response()
check(st == 200 and framing == "close" and h.get("connection") == "close" and
      body.rstrip().endswith(b"data: [DONE]"),
      "an HTTP/1.0 stream runs to the close (%s, Connection: %s)" % (framing, h.get("connection")))
r.close()

# 6. Idle kept connections hold no thread: 30 of them (more than the 11
# connection threads --max-queue 2 allows) from 127.0.0.1 and .2, then a
# new client from 127.0.0.3 is answered at once.
idle = []
for src in ("127.0.0.1", "127.0.0.2"):
    for _ in range(15):
        c = Conn(src)
        c.send(req("POST", "/tokenize", TOKENIZE))
        st, h, _, _ = c.response()
        if st == 200 and h.get("connection") == "keep-alive":
            idle.append(c)
t0 = time.time()
r = Conn("127.0.0.3")
r.send(req("POST", "/v1/completions", COMPLETION, extra="Connection: close\r\n"))
st, _, _, _ = r.response()
took = time.time() - t0
check(len(idle) == 30 and st == 200 and took < 5,
      "%d idle kept connections, a new client answered %d in %.2f s" % (len(idle), st, took))
r.close()
# 127.0.0.1 holds 15 idle connections: each takes one more request (in order,
# so idle[0] is the one idle longest, all far from the 1 s idle limit); one
# more connection fills its --max-per-client 16, and the 17th is still
# served: idle[0] is closed for it, idle[1] stays.
mine = idle[:15]
for c in mine:
    c.send(req("POST", "/tokenize", TOKENIZE))
    c.response()
extra = Conn("127.0.0.1")
extra.send(req("POST", "/tokenize", TOKENIZE))
st1, _, _, _ = extra.response()
r = Conn("127.0.0.1")
r.send(req("POST", "/tokenize", TOKENIZE))
st, h, _, _ = r.response()
gone, _ = mine[0].closed(0.3)
kept, _ = mine[1].closed(0.05)
check(st1 == 200 and st == 200 and gone and not kept,
      "at --max-per-client the client's oldest idle connection makes room (%d, %d, oldest "
      "closed %s, the next kept %s)" % (st1, st, gone, not kept))
for x in idle + [extra, r]:
    x.close()

if failed:
    print("%d check(s) failed" % len(failed))
    sys.exit(1)
print("ok: keep-alive")
