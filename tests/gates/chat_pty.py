"""chat_pty.py - drives `k3 MODEL --chat` on a real terminal (a pty).

usage: chat_pty.py interrupt|counter|layers WORK K3 MODEL_DIR TOK_DIR

interrupt: --show-thinking, long replies. Sends a message, sends Ctrl-C
  once the reply is streaming, expects the interruption notice and the
  prompt back, sends a second message, expects it answered (text streams),
  Ctrl-C again, then Ctrl-C at the prompt: the chat must exit 0. Writes
  WORK/pty.out (the terminal's bytes); the caller checks the --out report
  and the history (WORK/pty.json, WORK/pty.jsonl).
counter: thinking hidden: the reply must show the dimmed counter
  "thinking... N tokens" on the terminal, then erase it; Ctrl-D exits 0.
"""
import os
import pty
import select
import sys
import time

mode, work, k3, model, tok = sys.argv[1:6]
TIMEOUT = 30.0


def fail(msg, buf=b""):
    tail = buf[-600:].decode("utf-8", "replace")
    sys.exit("FAIL: chat_pty %s: %s\n--- terminal tail ---\n%s" % (mode, msg, tail))


def spawn(args):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(k3, [k3] + args)
    return pid, fd


class Term:
    def __init__(self, pid, fd):
        self.pid, self.fd, self.buf, self.status = pid, fd, b"", None

    def read_some(self, until):
        r, _, _ = select.select([self.fd], [], [], max(0.0, min(0.2, until - time.time())))
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                self.reap(until)
                return False
            self.buf += data
        return True

    def wait_for(self, pattern, start, what):
        """Waits until pattern appears in buf[start:]; returns its end."""
        until = time.time() + TIMEOUT
        while time.time() < until:
            at = self.buf.find(pattern, start)
            if at >= 0:
                return at + len(pattern)
            if not self.read_some(until):
                break
        fail("no %r (%s)" % (pattern, what), self.buf)

    def wait_growth(self, start, n, what):
        until = time.time() + TIMEOUT
        while time.time() < until and len(self.buf) - start < n:
            if not self.read_some(until):
                break
        if len(self.buf) - start < n:
            fail("fewer than %d bytes after %s" % (n, what), self.buf)

    def send(self, b):
        os.write(self.fd, b)

    def reap(self, until):
        while self.status is None and time.time() < until:
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.status = st
            else:
                time.sleep(0.05)

    def wait_exit(self, what):
        until = time.time() + TIMEOUT
        while self.status is None and time.time() < until:
            if not self.read_some(until):
                break
        self.reap(until)
        if self.status is None:
            os.kill(self.pid, 9)
            fail("still running after %s" % what, self.buf)
        if not os.WIFEXITED(self.status) or os.WEXITSTATUS(self.status) != 0:
            fail("%s: exit status %r" % (what, self.status), self.buf)


common = [model, "--tok", tok, "--chat"]
if mode == "interrupt":
    t = Term(*spawn(common + ["--show-thinking", "--gen", "6000", "--out", work + "/pty.json",
                              "--history", work + "/pty.jsonl"]))
    at = t.wait_for(b"> ", 0, "the first prompt")
    t.send(b"Tell me a very long story\r")
    t.wait_growth(t.wait_for(b"prefilled", at, "turn 1's feed"), 200, "the first message")
    t.send(b"\x03")
    at = t.wait_for(b"turn 1: interrupted (Ctrl-C)", at, "Ctrl-C during reply 1")
    at = t.wait_for(b"> ", at, "the prompt after Ctrl-C")
    t.send(b"And another one\r")
    t.wait_growth(t.wait_for(b"prefilled", at, "turn 2's feed"), 200, "the second message")
    t.send(b"\x03")
    at = t.wait_for(b"turn 2: interrupted (Ctrl-C)", at, "Ctrl-C during reply 2")
    at = t.wait_for(b"> ", at, "the prompt after the second Ctrl-C")
    t.send(b"\x03")
    t.wait_exit("Ctrl-C at an empty prompt")
    print("ok: pty: Ctrl-C stopped two replies, the prompt came back each time, "
          "Ctrl-C at the prompt exited 0")
elif mode == "counter":
    t = Term(*spawn(common + ["--gen", "40"]))
    at = t.wait_for(b"> ", 0, "the first prompt")
    t.send(b"Think about it\r")
    at = t.wait_for(b"turn 1: generated 40 tokens", at, "the reply's end")
    out = t.buf
    if b"\x1b[2mthinking\xe2\x80\xa6 " not in out or b" tokens\x1b[0m" not in out:
        fail("no dimmed thinking counter", out)
    last = out.rfind(b"thinking\xe2\x80\xa6 ")
    if out.find(b"\r\x1b[K", last) < 0:
        fail("the counter was not erased", out)
    t.wait_for(b"> ", at, "the prompt after the reply")
    t.send(b"\x04")
    t.wait_exit("Ctrl-D")
    print("ok: pty: the thinking counter was drawn dimmed and erased")
elif mode == "layers":
    os.environ["K3_PROGRESS_AFTER_MS"] = "0"
    t = Term(*spawn([model, "--ids", "5,9,17", "--gen", "4"]))
    t.wait_exit("a --gen 4 run")
    out = t.buf
    import re
    lines = re.findall(rb"\r\x1b\[2mlayer (\d+)/(\d+)\x1b\[0m\x1b\[K", out)
    if len(lines) < 4 or any(int(i) < 1 or int(i) > int(n) for i, n in lines):
        fail("no layer line for each forward call (%d)" % len(lines), out)
    if out.count(b"\r\x1b[K") < 4:
        fail("the layer line was not erased", out)
    print("ok: pty: the layer line showed %d times (%s) and was erased"
          % (len(lines), lines[-1][1].decode()))
else:
    fail("unknown mode")
with open(os.path.join(work, "pty-%s.out" % mode), "wb") as f:
    f.write(t.buf)
