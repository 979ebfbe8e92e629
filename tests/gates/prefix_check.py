"""prefix_check.py - gate 62's client: answers of a server with a prefix
cache (k3 serve --prefix-cache-*) against a cold server's.

    python3 prefix_check.py PHASE COLD_URL CACHE_URL [ARG]

Every answer compared is its text, generated token ids, the prompt's ids
(return_token_ids) and logprobs (with top_logprobs): bit for bit, as JSON.
The conversations are agents' shape: a long shared system block (over a
prefill chunk, over a snapshot gap), messages, each turn resending it all.
PHASE:
  warm     one conversation's turns, with another conversation between
           them (so the slot's own state no longer holds the prefix): each
           later turn starts from the cache (cached_tokens >= the earlier
           turn's prompt less its generation prompt), a branch from the
           system block too; /metrics counts hits and tokens saved
  evict    ARG conversations through a cache too small for them: /metrics
           shows evictions and spills, and later turns still hit (RAM or
           disk), all equal to cold
  killed   two turns of a conversation with RAM to spare: all their
           snapshots are written behind to the disk tier ARG (files, no
           eviction)
  restart  after a restart with the same --prefix-cache-dir: the first
           request of a known conversation (ARG k9: killed's third turn,
           from at least the second turn's whole prompt) is served from
           disk (prefix_cache_disk_hits_total >= 1, cached_tokens > 0),
           equal
  corrupt  after the cache files were damaged: the answers equal cold (a
           damaged file is never used; the gate checks the log lines)
  parallel concurrent conversations on a server with slots and speculation
Prints one line per check; exit 0 when all hold."""
import json
import os
import re
import sys
import threading
import time
import urllib.request

PHASE, COLD, CACHE = sys.argv[1], sys.argv[2], sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else ""


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


from serve_post import post  # noqa: E402


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^k3_(prefix_cache_\w+) (\S+)$", text, re.M)}


def system_block(tag):
    words = " ".join("%s%d" % (tag, i) for i in range(350))
    return "You are agent %s. Tools and rules follow. %s" % (tag, words)


def req(msgs, seed):
    return dict(model="serve-tiny", messages=msgs, max_tokens=10, temperature=0.8,
                seed=seed, logprobs=True, top_logprobs=3, return_token_ids=True)


def essence(got):
    ch = got["choices"][0]
    return [ch["message"]["content"], ch.get("logprobs"), ch["finish_reason"],
            ch.get("token_ids"), got.get("prompt_token_ids"),
            got["usage"]["prompt_tokens"], got["usage"]["completion_tokens"]]


def ask(base, body):
    st, got = post(base, "/v1/chat/completions", body)
    if st != 200:
        fail("%s: HTTP %d %s" % (base, st, got))
    return got


def same(what, body):
    """Cold and cached answers of body: equal; returns the cached one."""
    cold = ask(COLD, body)
    hot = ask(CACHE, body)
    if essence(cold) != essence(hot):
        fail("%s: the cached server's answer differs from the cold one:\n%s\n%s"
             % (what, json.dumps(essence(cold))[:600], json.dumps(essence(hot))[:600]))
    return hot


def cached(got):
    return got["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)


def turns(tag, n, seed):
    """The requests of one conversation's n turns (replies from the cold server)."""
    msgs = [{"role": "system", "content": system_block(tag)}]
    out = []
    for t in range(n):
        msgs.append({"role": "user", "content": "turn %d of %s: %s" % (t, tag, "x y " * (20 + 7 * t))})
        body = req(list(msgs), seed + t)
        out.append(body)
        reply = ask(COLD, body)["choices"][0]["message"]["content"]
        msgs.append({"role": "assistant", "content": reply})
    return out


def warm():
    a = turns("alpha", 3, 10)
    other = turns("beta", 1, 50)
    prev = None
    for t, body in enumerate(a):
        got = same("alpha turn %d" % t, body)
        c = cached(got)
        if prev is not None and c < prev - 16:
            fail("alpha turn %d: cached_tokens %d, the previous prompt had %d" % (t, c, prev))
        print("ok warm: alpha turn %d prompt %d cached %d (equal to cold)"
              % (t, got["usage"]["prompt_tokens"], c))
        prev = got["usage"]["prompt_tokens"]
        same("beta between", other[0])  # the slot now holds another prefix
    branch = req([{"role": "system", "content": system_block("alpha")},
                  {"role": "user", "content": "a branch from the system block"}], 99)
    got = same("alpha branch", branch)
    if cached(got) < 500:
        fail("the branch from the system block: cached_tokens %d" % cached(got))
    print("ok warm: a branch from the system block starts from it (cached %d)" % cached(got))
    m = metrics(CACHE)
    if m.get("prefix_cache_hits_total", 0) < 3 or m.get("prefix_cache_tokens_saved_total", 0) < 2000:
        fail("metrics: %s" % m)
    print("ok warm: /metrics hits %d, tokens saved %d, %d bytes in RAM"
          % (m["prefix_cache_hits_total"], m["prefix_cache_tokens_saved_total"],
             m["prefix_cache_ram_bytes"]))


def evict():
    convs = [turns("ev%d" % i, 2, 100 + 10 * i) for i in range(int(ARG or 3))]
    for i, c in enumerate(convs):
        same("ev%d turn 0" % i, c[0])
    hits = 0
    for i, c in enumerate(convs):
        got = same("ev%d turn 1" % i, c[1])
        hits += cached(got) > 0
    m = metrics(CACHE)
    if m.get("prefix_cache_evictions_total", 0) < 1 or m.get("prefix_cache_spills_total", 0) < 1:
        fail("no eviction or spill with a tiny budget: %s" % m)
    if hits < len(convs) or m.get("prefix_cache_disk_hits_total", 0) < 1:
        fail("after eviction: %d of %d second turns hit, metrics %s" % (hits, len(convs), m))
    print("ok evict: %d evictions, %d spills, %d disk hits; every second turn hit and equals cold"
          % (m["prefix_cache_evictions_total"], m["prefix_cache_spills_total"],
             m["prefix_cache_disk_hits_total"]))


def killed():
    """Two turns of conversation k9 on a server with a disk tier (ARG) and
    RAM to spare (so nothing is evicted): every snapshot taken must reach
    the directory, written behind, with no shutdown (the gate then kills
    the server with -9)."""
    c = turns("k9", 3, 300)
    for t in range(2):
        same("k9 turn %d" % t, c[t])
    m = metrics(CACHE)  # published when the answer ended: its snapshots counted
    want = m.get("prefix_cache_snapshots_total", 0)
    files = []
    for _ in range(300):  # the writer thread follows the answer: a moment
        files = [f for f in os.listdir(ARG) if f.startswith("k3p-") and f.endswith(".state")]
        if len(files) >= want:
            break
        time.sleep(0.1)
    if m.get("prefix_cache_evictions_total", 0) != 0 or want < 2 or len(files) < want:
        fail("write-behind: %d files for %d snapshots, metrics %s" % (len(files), want, m))
    print("ok killed: all %d snapshots written behind with no eviction" % want)


def restart():
    tag, seed, t = ("k9", 300, 2) if ARG == "k9" else ("ev0", 100, 1)
    c = turns(tag, t + 1, seed)
    got = same("after the restart", c[t])
    prev = ask(COLD, c[t - 1])["usage"]["prompt_tokens"] if ARG == "k9" else 0
    if cached(got) < prev:
        fail("after kill -9: cached %d, the last answer's prompt had %d (its snapshot lost)"
             % (cached(got), prev))
    m = metrics(CACHE)
    if cached(got) == 0 or m.get("prefix_cache_disk_hits_total", 0) < 1:
        fail("after the restart: cached %d, metrics %s" % (cached(got), m))
    print("ok restart: served from the disk tier (cached %d), equal to cold" % cached(got))


def corrupt():
    for i in range(int(ARG or 3)):
        c = turns("ev%d" % i, 2, 100 + 10 * i)
        got = same("corrupt ev%d" % i, c[1])
        print("ok corrupt: ev%d equals cold (cached %d)" % (i, cached(got)))


def parallel():
    nc = int(ARG or 3)  # three conversations on two slots: a slot changes hands
    convs = [turns("par%d" % i, 2 if nc < 3 else 3, 200 + 10 * i) for i in range(3)]
    colds = {(i, t): essence(ask(COLD, b)) for i, c in enumerate(convs) for t, b in enumerate(c)}
    errors = []

    def run(i):
        for t, b in enumerate(convs[i]):
            got = ask(CACHE, b)
            if essence(got) != colds[(i, t)]:
                errors.append("par%d turn %d differs" % (i, t))
            if t > 0 and cached(got) == 0:
                errors.append("par%d turn %d: nothing cached" % (i, t))

    ths = [threading.Thread(target=run, args=(i,)) for i in range(len(convs))]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    if errors:
        fail("; ".join(errors))
    m = metrics(CACHE)
    if m.get("prefix_cache_hits_total", 0) < 1:
        fail("parallel: no cache hit (%s)" % m)
    print("ok parallel: %d conversations x %d turns at once equal cold (hits %d)"
          % (len(convs), len(convs[0]), m.get("prefix_cache_hits_total", 0)))


{"warm": warm, "evict": evict, "killed": killed, "restart": restart, "corrupt": corrupt,
 "parallel": parallel}[PHASE]()
