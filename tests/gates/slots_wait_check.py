"""slots_wait_check.py - gate 44's budget case: a server whose memory
budget affords exactly 2 slots gets 3 requests at once.

    python3 slots_wait_check.py ALONE_URL SLOTS_URL

ALONE_URL serves one answer at a time with --spec 0; SLOTS_URL is the
2-slot server. The 3 completions are sent together while /health is
polled: at most 2 ever run, the third is seen waiting, all 3 complete
(200), and each answer (text, token ids, finish reason) equals the one
served alone. Exit 0 when all hold."""
import json
import sys
import threading
import time
import urllib.request

ALONE, SLOTS = sys.argv[1], sys.argv[2]


def post(base, body):
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        got = json.loads(r.read().decode())
        ch = got["choices"][0]
        return r.status, [ch["text"], ch.get("token_ids"), ch["finish_reason"]]


def health(base):
    with urllib.request.urlopen(base + "/health", timeout=30) as r:
        return json.loads(r.read().decode())


# Long enough answers that the three overlap: the third must wait.
REQS = [dict(model="serve-tiny", prompt=p, max_tokens=40, temperature=t, seed=s,
             ignore_eos=True, return_token_ids=True)
        for p, t, s in (("first of three", 0, 1), ("second of three", 0.8, 2),
                        ("third of three", 0, 3))]
alone = [post(ALONE, r) for r in REQS]
got = [None] * 3
seen = []
stop = threading.Event()


def one(i):
    got[i] = post(SLOTS, REQS[i])


def watch():
    while not stop.is_set():
        seen.append(health(SLOTS))
        time.sleep(0.01)


w = threading.Thread(target=watch)
w.start()
ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
for t in ts:
    t.join()
stop.set()
w.join()
most = max(h["running"] for h in seen)
queued = max(h["waiting"] for h in seen)
print(f"budget slots: at most {most} running, at most {queued} waiting, "
      f"{len(seen)} /health polls")
if most != 2 or queued < 1:
    sys.exit("FAIL: wanted exactly 2 running at once and the third waiting")
for i in range(3):
    if got[i] is None or got[i][0] != 200 or got[i][1] != alone[i][1]:
        sys.exit(f"FAIL: request {i + 1}: {got[i]} vs alone {alone[i]}")
print("ok budget: 2 slots, the third request waited and completed; all 3 equal lone answers")
