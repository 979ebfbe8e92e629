"""chat_pty.py - drives `k3 MODEL --chat` on a real terminal (a pty).

usage: chat_pty.py interrupt|counter|layers WORK K3 MODEL_DIR TOK_DIR

interrupt: --show-thinking, long replies. Sends a message, sends Ctrl-C
  once the reply is streaming, expects the interruption notice and the
  prompt back, sends a second message, expects it answered (text streams),
  Ctrl-C again, then Ctrl-C at the prompt: the chat must exit 0. Writes
  WORK/pty.out (the terminal's bytes); the caller checks the --out report
  and the history (WORK/pty.json, WORK/pty.jsonl).
counter: thinking hidden (--hide-thinking): the reply must show the dimmed
  counter "thinking... N tokens" on the terminal, then erase it; Ctrl-D
  exits 0.
edit: the line editor (libedit builds): Left moves back to insert a
  letter, Up recalls the last message to extend it, a bracketed paste of
  three lines is one message, Ctrl-R finds an earlier message; the caller
  checks the messages in WORK/edit.jsonl and the line history under
  WORK/state (XDG_STATE_HOME). edit-nofile: --no-history-file, Up recalls
  nothing from the file the edit run wrote.
visible: on a terminal the thinking shows by default, dimmed.
Every mode runs with XDG_STATE_HOME=WORK/state (never the user's own).
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
        # As a person types: a moment after the prompt showed. libedit sets
        # the terminal's mode when it starts reading a line and may flush
        # what arrived before (TCSAFLUSH), so keys sent the instant the
        # prompt appears can be lost on a loaded machine.
        time.sleep(0.25)
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


os.environ["XDG_STATE_HOME"] = work + "/state"
common = [model, "--tok", tok, "--chat"]
if mode == "interrupt":
    # --effort max: the renderer check of gate 36 renders with the pipe default
    t = Term(*spawn(common + ["--show-thinking", "--effort", "max", "--gen", "6000",
                              "--out", work + "/pty.json",
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
    t = Term(*spawn(common + ["--gen", "40", "--hide-thinking"]))
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
elif mode == "edit":
    LEFT, UP = b"\x1b[D", b"\x1b[A"
    t = Term(*spawn(common + ["--gen", "2", "--history", work + "/edit.jsonl"]))
    at = t.wait_for(b"> ", 0, "the first prompt")
    # "wrld", three Lefts (after the w), "o": "world"
    t.send(b"wrld" + LEFT * 3 + b"o\r")
    at = t.wait_for(b"turn 1: generated", at, "turn 1")
    at = t.wait_for(b"> ", at, "the prompt after turn 1")
    t.send(UP + b"!\r")  # "world!"
    at = t.wait_for(b"turn 2: generated", at, "turn 2")
    at = t.wait_for(b"> ", at, "the prompt after turn 2")
    t.send(b"\x1b[200~line one\rline two\rline three\x1b[201~")
    time.sleep(0.3)
    t.send(b"\r")
    at = t.wait_for(b"turn 3: generated", at, "turn 3 (the paste)")
    if b"turn 4:" in t.buf:
        fail("the paste became several turns", t.buf)
    at = t.wait_for(b"> ", at, "the prompt after turn 3")
    t.send(b"\x04")
    t.wait_exit("Ctrl-D")
    # A new session: Ctrl-R finds the most recent message holding "wor" in
    # the history file the first one wrote.
    t = Term(*spawn(common + ["--gen", "2", "--history", work + "/edit.jsonl"]))
    at = t.wait_for(b"> ", 0, "the first prompt of the second session")
    t.send(b"\x12wor")  # Ctrl-R, then the search text
    time.sleep(0.3)
    t.send(b"\r")
    at = t.wait_for(b"turn 1: generated", at, "turn 1 of the second session (Ctrl-R)")
    at = t.wait_for(b"> ", at, "the prompt after it")
    t.send(b"\x04")
    t.wait_exit("Ctrl-D")
    print("ok: pty: Left, Up and a bracketed paste typed three messages; Ctrl-R found one "
          "in the next session")
elif mode == "edit-nofile":
    t = Term(*spawn(common + ["--gen", "2", "--no-history-file",
                              "--history", work + "/nofile.jsonl"]))
    at = t.wait_for(b"> ", 0, "the first prompt")
    t.send(b"\x1b[Afresh\r")  # Up: nothing to recall
    at = t.wait_for(b"turn 1: generated", at, "turn 1")
    at = t.wait_for(b"> ", at, "the prompt after turn 1")
    t.send(b"\x04")
    t.wait_exit("Ctrl-D")
    print("ok: pty: --no-history-file recalls nothing")
elif mode == "visible":
    t = Term(*spawn(common + ["--gen", "12"]))
    at = t.wait_for(b"> ", 0, "the first prompt")
    t.send(b"Think about it\r")
    at = t.wait_for(b"turn 1: generated 12 tokens", at, "the reply's end")
    out = t.buf
    if b"\x1b[2m" not in out or b"thinking\xe2\x80\xa6 " in out:
        fail("the thinking did not show dimmed by default", out)
    if b"the reply ended inside its thinking (12 tokens, the --gen limit)" not in out:
        fail("a reply cut inside its thinking was not said", out)
    t.wait_for(b"> ", at, "the prompt after the reply")
    t.send(b"\x04")
    t.wait_exit("Ctrl-D")
    print("ok: pty: the thinking shows dimmed by default; the cut is said")
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
