"""parallel_check.py - gate 44's client: answers from a server with slots
(k3 serve --parallel N) against the same requests served alone.

    python3 parallel_check.py ALONE_URL SLOTS_URL NSLOTS

ALONE_URL serves one answer at a time (--parallel 1), SLOTS_URL has
NSLOTS slots. Every answer compared is content + token ids + logprobs
(ids and timestamps of the response aside). Checks:
 1. a mix of requests (short and multi-chunk prompts, greedy and seeded
    sampling, stop strings, max_tokens, logprobs, chat and completions,
    whole and streamed, two whose drafts are kept and cut) sent at once, with one client that disconnects
    mid-stream and one prompt over the context (400, the others unharmed):
    each answer equals the one served alone; more requests than slots, so
    some waited (/health showed a full set of slots and a queue);
 2. after the disconnect, the freed slot serves again, identically;
 3. a repeated system prompt: once two prompts departed after it, a third
    starts from there: cached_tokens > 0 (whole and in the streamed usage
    chunk) and the answer equals a cold one.
Prints one line per check; exit 0 when all hold."""
import json
import socket
import sys
import threading
import time
import urllib.request

ALONE, SLOTS, NSLOTS = sys.argv[1], sys.argv[2], int(sys.argv[3])


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


from serve_post import post  # noqa: E402 (the gates' folder is on the path)


def essence(kind, stream, got):
    """What must be identical: text, ids, logprobs, finish reasons."""
    if not stream:
        ch = got["choices"][0]
        text = ch["message"]["content"] if kind == "chat" else ch["text"]
        return [text, ch.get("logprobs"), ch["finish_reason"], ch.get("token_ids"),
                got["usage"]["completion_tokens"]]
    text, lps, fin = "", [], None
    for ev in got:
        for ch in ev.get("choices", []):
            d = ch.get("delta", {}) if kind == "chat" else ch
            text += d.get("content") or d.get("text") or ""
            if ch.get("logprobs"):
                lps.append(ch["logprobs"])
            fin = ch.get("finish_reason") or fin
    return [text, lps, fin]


def chat(msgs, **kw):
    return ("chat", "/v1/chat/completions", dict(model="serve-tiny", messages=msgs, **kw))


def comp(prompt, **kw):
    return ("comp", "/v1/completions", dict(model="serve-tiny", prompt=prompt, **kw))


words = " ".join("w%d" % i for i in range(300))  # over a chunk of ids
MIX = [
    chat([{"role": "user", "content": "hello"}], max_tokens=20, temperature=0),
    chat([{"role": "user", "content": "tell me about " + words}], max_tokens=12,
         temperature=0.9, seed=7, logprobs=True, top_logprobs=3),
    comp("The quick brown fox", max_tokens=25, temperature=0.7, top_p=0.9, seed=3,
         return_token_ids=True),
    comp("one two three four", max_tokens=30, temperature=0, stop=["e", "x"]),
    chat([{"role": "user", "content": "stream me"}], max_tokens=18, temperature=1.0,
         seed=11, stream=True),
    comp("a b c", max_tokens=7, temperature=0.5, seed=1, stream=True, logprobs=2),
    chat([{"role": "user", "content": "think"}], max_tokens=15, temperature=0,
         thinking=True),
    # repeats itself: a speculating server keeps its drafts (the others cut theirs)
    comp("one two one two one two one two", max_tokens=40, temperature=0,
         frequency_penalty=-2, presence_penalty=-2, ignore_eos=True, return_token_ids=True),
    # ... and two whose drafts are kept and cut all along (greedy and sampled)
    comp("one two one two one two one two", max_tokens=40, temperature=0,
         frequency_penalty=-1.2, presence_penalty=-1.2, ignore_eos=True,
         return_token_ids=True),
    comp("one two one two one two one two", max_tokens=40, temperature=0.8, seed=5,
         frequency_penalty=-1.8, presence_penalty=-1.8, ignore_eos=True,
         return_token_ids=True),
]
TOO_LONG = comp(" ".join(["z"] * 9000), max_tokens=4)


def run(base, item):
    kind, path, body = item
    st, got = post(base, path, body)
    if st != 200:
        fail("%s %s: HTTP %d %s" % (base, path, st, got))
    return essence(kind, body.get("stream", False), got)


def disconnecter(base, out):
    """Streams a long answer, reads a little, then drops the connection."""
    host, port = base.split("//")[1].split(":")
    body = json.dumps(dict(model="serve-tiny", prompt="never ending", max_tokens=1500,
                           temperature=0, ignore_eos=True, stream=True)).encode()
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 4:
        piece = s.recv(4096)
        if not piece:
            break
        got += piece
    s.close()
    out.append(got.count(b"data: "))


def health(base):
    with urllib.request.urlopen(base + "/health", timeout=30) as r:
        return json.loads(r.read().decode())


alone = [run(ALONE, it) for it in MIX]

results = [None] * len(MIX)
errs, dropped, seen = [], [], []
stop_watch = threading.Event()


def one(i):
    try:
        results[i] = run(SLOTS, MIX[i])
    except SystemExit:
        errs.append(i)


def watch():
    while not stop_watch.is_set():
        seen.append(health(SLOTS))
        time.sleep(0.02)


def too_long(out):
    st, got = post(SLOTS, TOO_LONG[1], TOO_LONG[2])
    out.append((st, got))


long_out = []
threads = [threading.Thread(target=disconnecter, args=(SLOTS, dropped)),
           threading.Thread(target=watch), threading.Thread(target=too_long, args=(long_out,))]
threads += [threading.Thread(target=one, args=(i,)) for i in range(len(MIX))]
for t in threads:
    t.start()
for t in threads[2:]:
    t.join()
stop_watch.set()
threads[0].join()
threads[1].join()
if errs:
    fail("requests %s failed on the slots server" % errs)
for i, (a, b) in enumerate(zip(alone, results)):
    if a != b:
        fail("request %d: with slots %r, alone %r" % (i, b, a))
print("ok mix: %d concurrent answers (chat, completions, streamed, sampled, stop, logprobs) "
      "equal the ones served alone" % len(MIX))
st, got = long_out[0]
if st != 400 or got["error"].get("code") != "context_length_exceeded":
    fail("the prompt over the context: HTTP %d %s" % (st, got))
print("ok too long: 400 context_length_exceeded, the others unaffected")
most = max(h["running"] for h in seen)
queued = max(h["waiting"] for h in seen)
if most > NSLOTS or most < NSLOTS or queued < 1:
    fail("slots: at most %d running (of %d), at most %d waiting" % (most, NSLOTS, queued))
print("ok slots: %d running at once, up to %d waiting, then all done" % (most, queued))
if not dropped or dropped[0] < 1:
    fail("the disconnecting client got no events")
for _ in range(300):
    h = health(SLOTS)
    if h["running"] == 0 and h["waiting"] == 0:
        break
    time.sleep(0.05)
else:
    fail("the server is still generating for the client that left: %s" % h)
again = [run(SLOTS, MIX[0]), run(SLOTS, MIX[4])]
if again != [alone[0], alone[4]]:
    fail("after the disconnect: %r" % again)
print("ok disconnect: its slot was freed and serves again, identically")

system = "You are a careful assistant. " + " ".join("rule%d." % i for i in range(60))
def sys_chat(user, **kw):
    return chat([{"role": "system", "content": system}, {"role": "user", "content": user}],
                max_tokens=10, temperature=0, **kw)


# q1 then q2: the slot learns where they depart (the end of the system
# prompt); q3 and the streamed q4 start from there.
q3 = sys_chat("third", seed=5)
q4 = sys_chat("fourth", stream=True, stream_options={"include_usage": True})
cold3, cold4 = run(ALONE, q3), run(ALONE, q4)
run(SLOTS, sys_chat("first"))
run(SLOTS, sys_chat("second"))
st, warm = post(SLOTS, q3[1], q3[2])
cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
if st != 200 or cached < 60 or essence("chat", False, warm) != cold3:
    fail("repeated system prompt: cached %d, %r vs cold %r" % (cached, warm, cold3))
st, ev = post(SLOTS, q4[1], q4[2])
usage = [e["usage"] for e in ev if e.get("usage")]
if not usage or usage[-1]["prompt_tokens_details"]["cached_tokens"] < 60:
    fail("streamed usage: %r" % usage)
if essence("chat", True, ev) != cold4:
    fail("streamed warm answer %r vs cold %r" % (essence("chat", True, ev), cold4))
print("ok reuse: cached_tokens %d of %d (and %d streamed); the answers equal cold ones"
      % (cached, warm["usage"]["prompt_tokens"],
         usage[-1]["prompt_tokens_details"]["cached_tokens"]))
print("parallel check: all passed")
