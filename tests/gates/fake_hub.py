#!/usr/bin/python3
"""fake_hub: a stand-in for the Hugging Face hub's resolve endpoint, for
tests/gates/40-download.sh. Python 3 standard library only; loopback only.

  fake_hub.py ROOT --port-file F --log F [--revision REV] [--timeout S]
      [--drop NAME:N] [--slow NAME:BYTES_PER_S] [--wrong-size NAME]
      [--no-linked-size] [--no-size]

Serves the files of ROOT at /moonshotai/Kimi-K3/resolve/REV/NAME on 127.0.0.1, on a
free port that it writes to --port-file. As on the hub, an LFS file (*.safetensors)
answers 302 to /lfs/REV/NAME with an X-Linked-Size header, and any other file answers
200 with Content-Length. GET honours "Range: bytes=A-" and "bytes=A-B" (206, or 416).
If the environment has FAKE_HUB_TOKEN (never an argument: it would show in ps), the
resolve URLs want "Authorization: Bearer TOKEN" and answer 401 otherwise.

Faults:
  --drop NAME:N         the first GET of NAME whose range covers byte N stops there
                        and closes the connection (the client must resume)
  --slow NAME:BPS       NAME's bodies are sent at about BPS bytes a second
  --wrong-size NAME     GET sends NAME one byte short; HEAD still gives the full size
  --no-linked-size      LFS redirects carry no X-Linked-Size (the size is then the
                        Content-Length at the end of the redirect)
  --no-size             HEAD answers carry neither Content-Length nor X-Linked-Size

--log gets one line per request: method, path, Range, auth (ok, none, bad) and the
status; never the token. The server exits by itself after --timeout seconds (120).
"""

import argparse
import http.server
import os
import re
import sys
import threading
import time
import urllib.parse

REPO = "moonshotai/Kimi-K3"


class Hub(http.server.ThreadingHTTPServer):
    daemon_threads = True


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.serve(body=False)

    def do_GET(self):
        self.serve(body=True)

    def log_message(self, fmt, *args):
        pass  # the request log is written by log()

    def log(self, code, auth="-"):
        line = "%s %s range=%s auth=%s -> %d\n" % (
            self.command, self.path, self.headers.get("Range", "-"), auth, code)
        with self.server.log_lock, open(self.server.opts.log, "a") as f:
            f.write(line)

    def empty(self, code, auth="-", extra=()):
        """An answer without a body (errors, redirects)."""
        self.log(code, auth)
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def serve(self, body):
        opts = self.server.opts
        m = re.fullmatch(r"/(.+)/(resolve|lfs)/([^/]+)/([^/]+)", urllib.parse.unquote(self.path))
        if not m or m[1] != REPO or m[3] != opts.revision:
            return self.empty(404)
        kind, name = m[2], m[4]
        path = os.path.join(opts.root, name)
        if name.startswith(".") or not os.path.isfile(path):
            return self.empty(404)
        with open(path, "rb") as f:
            data = f.read()
        if kind == "resolve":
            auth = self.check_auth()
            if auth != "ok":
                return self.empty(401, auth)
            if name.endswith(".safetensors"):
                extra = [("Location", f"/{REPO}/lfs/{opts.revision}/{name}")]
                if not (opts.no_linked_size or opts.no_size):
                    extra.append(("X-Linked-Size", str(len(data))))
                return self.empty(302, auth, extra)
        if not body:
            self.log(200)
            self.send_response(200)
            if not opts.no_size:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return None
        if name == opts.wrong_size:
            data = data[:-1]
        return self.send_body(name, data)

    def check_auth(self):
        want = os.environ.get("FAKE_HUB_TOKEN")
        got = self.headers.get("Authorization")
        if got is None:
            return "ok" if want is None else "none"
        return "ok" if want is not None and got == "Bearer " + want else "bad"

    def send_body(self, name, data):
        size, begin, end, code = len(data), 0, len(data), 200
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m[1]) >= size:
                return self.empty(416, extra=[("Content-Range", f"bytes */{size}")])
            begin, code = int(m[1]), 206
            end = min(size, int(m[2]) + 1) if m[2] else size
        stop = end
        drop = self.server.drop
        with self.server.log_lock:
            if drop and drop[0] == name and begin <= drop[1] < end:
                stop = drop[1]
                self.server.drop = None  # once
        self.log(code)
        self.send_response(code)
        self.send_header("Content-Length", str(end - begin))
        if code == 206:
            self.send_header("Content-Range", f"bytes {begin}-{end - 1}/{size}")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        bps = self.server.slow.get(name)
        chunk = 4096
        for pos in range(begin, stop, chunk):
            self.wfile.write(data[pos:min(pos + chunk, stop)])
            if bps:
                self.wfile.flush()
                time.sleep(chunk / bps)
        self.close_connection = True
        return None


def name_and_number(text):
    name, _, n = text.rpartition(":")
    if not name or not n.isdigit():
        raise argparse.ArgumentTypeError(f"want NAME:N, got {text!r}")
    return name, int(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--revision", default="main")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--drop", type=name_and_number)
    ap.add_argument("--slow", type=name_and_number, action="append", default=[])
    ap.add_argument("--wrong-size")
    ap.add_argument("--no-linked-size", action="store_true")
    ap.add_argument("--no-size", action="store_true")
    opts = ap.parse_args()

    server = Hub(("127.0.0.1", 0), Handler)
    server.opts = opts
    server.log_lock = threading.Lock()
    server.drop = opts.drop
    server.slow = dict(opts.slow)
    open(opts.log, "a").close()
    tmp = opts.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, opts.port_file)  # appears complete or not at all
    threading.Timer(opts.timeout, server.shutdown).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
