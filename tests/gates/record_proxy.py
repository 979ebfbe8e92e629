"""record_proxy.py PORT UPSTREAM DIR - a loopback HTTP proxy for gate 56 that
forwards every request to UPSTREAM (http://127.0.0.1:N) unchanged and writes
each exchange to DIR/NNN.req (method, path, body) and DIR/NNN.resp (status,
body), so the gate can check that what an agent client printed is what k3
serve generated. Responses are passed on whole once they are complete (the
clients take a buffered event stream as they take a live one). Prints
"listening" when ready."""
import http.server
import os
import sys
import threading
import urllib.error
import urllib.request

port, upstream, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
lock = threading.Lock()
count = [0]
HOP = ("host", "content-length", "accept-encoding", "connection", "transfer-encoding")


class Proxy(http.server.BaseHTTPRequestHandler):
    def forward(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else None
        with lock:
            count[0] += 1
            k = count[0]
        with open(os.path.join(out, "%03d.req" % k), "wb") as f:
            f.write(("%s %s\n" % (self.command, self.path)).encode() + (body or b""))
        headers = {h: v for h, v in self.headers.items() if h.lower() not in HOP}
        req = urllib.request.Request(upstream + self.path, data=body, method=self.command,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=900) as r:
                status, data, ctype = r.status, r.read(), r.headers.get("content-type")
        except urllib.error.HTTPError as e:
            status, data, ctype = e.code, e.read(), e.headers.get("content-type")
        with open(os.path.join(out, "%03d.resp" % k), "wb") as f:
            f.write(("%d\n" % status).encode() + data)
        self.send_response(status)
        self.send_header("Content-Type", ctype or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_HEAD = do_DELETE = forward

    def log_message(self, fmt, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Proxy)
print("listening", flush=True)
srv.serve_forever()
