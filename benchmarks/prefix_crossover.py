"""prefix_crossover.py - reading a prompt's snapshot back from the prefix
cache's disk tier against computing the prompt (benchmarks/agent_trace.sh
runs it after the trace; not a test: it reports).

    python3 prefix_crossover.py K3_BIN MODEL_DIR TOK_DIR WORK_DIR

One server with --prefix-cache-gb 0 and a disk tier: every snapshot goes
to disk and every hit reads it back. For completion prompts of N tokens:
the prompt computed cold (its snapshot written), a short other prompt
(the slot's own state no longer holds it), then the prompt again, now
read from disk (just written: from the page cache, unless the machine
evicted it; a cold disk adds the file's size over its read speed). Prints the server's seconds for each (its log line:
begin to the last id, one id generated) and the file's size; the ratio
says where reading beats computing on this machine and model."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

K3, MODEL, TOK, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
logname = os.path.join(WORK, "crossover.log")
pc = os.path.join(WORK, "pc-crossover")
log = open(logname, "w")
p = subprocess.Popen([K3, "serve", MODEL, "--tok", TOK, "--port", "0", "--parallel", "1",
                      "--spec", "0", "--max-context", "16384", "--alias", "x",
                      "--prefix-cache-gb", "0", "--prefix-cache-dir", pc], stderr=log)
base = None
for _ in range(3000):
    m = re.search(r"listening on http://[^ ]*:(\d+) ", open(logname).read())
    if m:
        base = "http://127.0.0.1:" + m.group(1)
        break
    time.sleep(0.1)
if not base:
    sys.exit("the server did not start")


def ask(prompt):
    body = dict(model="x", prompt=prompt, max_tokens=1, temperature=0)
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    got = json.loads(urllib.request.urlopen(req, timeout=3600).read())
    time.sleep(0.2)
    line = [x for x in open(logname).read().splitlines() if "POST /v1/completions" in x][-1]
    secs = float(re.search(r" ([0-9.]+) s$", line).group(1))
    return got["usage"], secs


for n in (32, 128, 512, 2048, 6000):  # words: about twice as many tokens
    prompt = "n%d " % n + " ".join("w%d" % (i % 997) for i in range(n))
    u1, cold = ask(prompt)
    ask("something else %d" % n)
    u2, warm = ask(prompt)
    cached = u2.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    size = max((os.path.getsize(os.path.join(pc, f)) for f in os.listdir(pc)), default=0)
    print("prompt %6d tokens: computed %.3f s, from disk %.3f s (cached %d, file up to %.1f MB): "
          "%.1fx" % (u1["prompt_tokens"], cold, warm, cached, size / 1e6, cold / warm), flush=True)
    for f in os.listdir(pc):
        os.remove(os.path.join(pc, f))
p.send_signal(signal.SIGTERM)
p.wait()
