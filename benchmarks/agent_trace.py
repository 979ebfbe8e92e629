"""agent_trace.py - an agent-shaped trace against k3 serve's prefix cache
(benchmarks/agent_trace.sh runs it; not a test: it reports).

    python3 agent_trace.py K3_BIN MODEL_DIR TOK_DIR WORK_DIR MODE

3 sessions x 12 turns on a server with 2 slots. Every request resends the
whole conversation: a shared system+tools prefix of about 6,000 tokens (a
system message and tool declarations, the same in every session), then
the session's turns; each turn adds a user message of 150-600 tokens
(deterministic random words) and the assistant's reply (32 tokens,
greedy). The three sessions send each turn at once (interleaved on the 2
slots: one waits). After turn 6 the server is stopped (SIGTERM) and
started again on the same --prefix-cache-dir. MODE: "cache" (the prefix
cache: 1 GiB RAM and the disk tier) or "nocache" (--prefix-cache-gb 0: only
the slots' own reuse). Prints per turn the prompt tokens received and
computed (received less usage.prompt_tokens_details.cached_tokens) and
the time to first token (streamed), then the totals after each session's
first turn, and turn 12's TTFT against turn 2's."""
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

K3, MODEL, TOK, WORK, MODE = sys.argv[1:6]
# K3_TRACE_SHAPE scales the trace down (for a slow model; say what ran):
# sessions, turns, restart after, system words, tools, words a tool,
# fewest and most user words a turn, reply tokens.
SHAPE = [int(x) for x in os.environ.get("K3_TRACE_SHAPE", "3,12,6,2600,8,300,150,600,32").split(",")]
SESSIONS, TURNS, RESTART_AFTER, SYS_WORDS, NTOOLS, TOOL_WORDS, UMIN, UMAX, GEN = SHAPE
os.makedirs(WORK, exist_ok=True)


def start():
    log = open(os.path.join(WORK, "server-%s.log" % MODE), "a")
    args = [K3, "serve", MODEL, "--tok", TOK, "--port", "0", "--parallel", "2",
            "--max-context", "16384", "--spec", "0", "--alias", "agent", "--exit-after", "7200"]
    if MODE == "cache":
        args += ["--prefix-cache-gb", "1", "--prefix-cache-dir", os.path.join(WORK, "pc")]
    else:
        args += ["--prefix-cache-gb", "0"]
    mark = log.tell()
    p = subprocess.Popen(args, stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(6000):
        with open(log.name) as f:
            f.seek(mark)
            m = re.search(r"listening on http://[^ ]*:(\d+) ", f.read())
        if m:
            return p, "http://127.0.0.1:%s" % m.group(1)
        if p.poll() is not None:
            sys.exit("the server exited: see %s" % log.name)
        time.sleep(0.1)
    sys.exit("the server did not start")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=600)


rng = random.Random(7)
WORDS = ["alpha", "build", "check", "delta", "error", "field", "graph", "heap", "index",
         "json", "kernel", "lambda", "merge", "node", "object", "parse", "query", "route",
         "state", "token", "update", "value", "write", "yield", "zone"]


def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


# the shared prefix: system prompt and tools, about 6,000 tokens
SYSTEM = "You are a coding agent. Follow the rules. " + text(SYS_WORDS)
TOOLS = [{"type": "function", "function": {
    "name": "tool_%d" % i, "description": text(TOOL_WORDS),
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
    for i in range(NTOOLS)]
USER = [[text(rng.randint(UMIN, UMAX)) for _ in range(TURNS)] for _ in range(SESSIONS)]


def ask(base, msgs):
    body = dict(model="agent", messages=msgs, tools=TOOLS, max_tokens=GEN, temperature=0,
                stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.time()
    ttft, content, usage = None, "", None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                d = ch.get("delta", {})
                if ttft is None and (d.get("content") or d.get("reasoning_content") or
                                     d.get("tool_calls")):
                    ttft = time.time() - t0
                content += d.get("content") or ""
    if ttft is None:
        ttft = time.time() - t0
    return content, usage, ttft


convs = [[{"role": "system", "content": SYSTEM}] for _ in range(SESSIONS)]
rows = []
proc, base = start()
for t in range(TURNS):
    if t == RESTART_AFTER:
        stop(proc)
        proc, base = start()
    out = [None] * SESSIONS

    def turn(s):
        convs[s].append({"role": "user", "content": USER[s][t]})
        out[s] = ask(base, convs[s])
        convs[s].append({"role": "assistant", "content": out[s][0]})

    ths = [threading.Thread(target=turn, args=(s,)) for s in range(SESSIONS)]
    for th in ths:
        th.start()
        time.sleep(0.05)  # a fixed arrival order
    for th in ths:
        th.join()
    for s in range(SESSIONS):
        u = out[s][1]
        got = u["prompt_tokens"]
        cached = u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        rows.append((s, t + 1, got, got - cached, out[s][2]))
        print("%s session %d turn %2d: prompt %6d, computed %6d (%5.1f%% from cache), "
              "TTFT %.3f s" % (MODE, s, t + 1, got, got - cached, 100.0 * cached / got,
                               out[s][2]), flush=True)
stop(proc)
later = [r for r in rows if r[1] > 1]
recv = sum(r[2] for r in later)
comp = sum(r[3] for r in later)
after = [r for r in rows if r[1] > RESTART_AFTER]
print("%s: after each session's first turn: %d prompt tokens received, %d computed: "
      "%.1f%% from cache (turns after the restart: %.1f%%)" %
      (MODE, recv, comp, 100.0 * (recv - comp) / recv,
       100.0 * (sum(r[2] for r in after) - sum(r[3] for r in after)) / sum(r[2] for r in after)))
t2 = sorted(r[4] for r in rows if r[1] == 2)[SESSIONS // 2]
t12 = sorted(r[4] for r in rows if r[1] == TURNS)[SESSIONS // 2]
print("%s: median TTFT turn 2 %.3f s, turn %d %.3f s: %.2fx" % (MODE, t2, TURNS, t12, t12 / t2))
