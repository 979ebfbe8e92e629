"""serve_same.py - tests/mpi/serve.sh's client: the same requests, one at a
time, to bin/k3 serve and to k3-mpi serve; every answer's text, token ids,
logprobs and finish reason must be equal (ids and timings of the response
aside).

    python3 serve_same.py K3_URL MPI_URL

Requests: greedy and seeded sampling, chat and completions, whole and
streamed, logprobs, two that repeat themselves (drafts kept and cut when
the server speculates; one with a "spec" field), a prompt over one prefill
chunk, and a repeat of it that reuses the cached prefix (a rewind of the
state on every rank)."""
import json
import sys
import urllib.request

K3, MPI = sys.argv[1], sys.argv[2]
words = " ".join("w%d" % i for i in range(300))


def post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        raw = r.read().decode()
    if not body.get("stream"):
        got = json.loads(raw)
        ch = got["choices"][0]
        text = ch["message"]["content"] if "message" in ch else ch["text"]
        return [text, ch.get("logprobs"), ch["finish_reason"], ch.get("token_ids"),
                got.get("prompt_token_ids"), got["usage"]]
    out = []
    for line in raw.split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            ev = json.loads(line[6:])
            for k in ("id", "created", "timings", "system_fingerprint"):
                ev.pop(k, None)
            out.append(ev)
    return out


CHAT_LP = dict(logprobs=True, top_logprobs=3)  # the logprobs show any change of the logits
REQS = [
    ("/v1/completions", dict(prompt="The quick brown fox", max_tokens=16, temperature=0,
                             return_token_ids=True, logprobs=3)),
    ("/v1/chat/completions", dict(messages=[{"role": "user", "content": "hello"}],
                                  max_tokens=12, temperature=0.9, top_p=0.95, seed=7,
                                  **CHAT_LP)),
    ("/v1/completions", dict(prompt="a b c", max_tokens=10, temperature=0.7, seed=3,
                             stream=True, logprobs=2)),
    ("/v1/chat/completions", dict(messages=[{"role": "user", "content": "stream me"}],
                                  max_tokens=10, temperature=0, stream=True, **CHAT_LP)),
    # repeats itself: drafts kept and cut (greedy and sampled; "spec" per request)
    ("/v1/completions", dict(prompt="one two one two one two one two", max_tokens=40,
                             temperature=0, frequency_penalty=-1.2, presence_penalty=-1.2,
                             ignore_eos=True, return_token_ids=True, spec=2)),
    ("/v1/completions", dict(prompt="one two one two one two one two", max_tokens=40,
                             temperature=0.8, seed=5, frequency_penalty=-1.8,
                             presence_penalty=-1.8, ignore_eos=True, return_token_ids=True,
                             stream=True)),
    ("/v1/chat/completions", dict(messages=[{"role": "system", "content": words},
                                            {"role": "user", "content": "one"}],
                                  max_tokens=6, temperature=0, **CHAT_LP)),
    ("/v1/chat/completions", dict(messages=[{"role": "system", "content": words},
                                            {"role": "user", "content": "two"}],
                                  max_tokens=6, temperature=0.8, seed=5, **CHAT_LP)),
]
for path, body in REQS:
    a, b = post(K3, path, body), post(MPI, path, body)
    if a != b:
        print("FAIL: %s %s:\n  bin/k3: %s\n  k3-mpi: %s" % (path, json.dumps(body)[:80],
                                                          json.dumps(a)[:400],
                                                          json.dumps(b)[:400]))
        sys.exit(1)
last = post(MPI, *REQS[-1])
cached = last[5].get("prompt_tokens_details", {}).get("cached_tokens", 0)
if not cached:
    print("FAIL: the repeated system prompt reused no cached tokens: %s" % last[5])
    sys.exit(1)
print("ok: %d requests (greedy, seeded, streamed, logprobs, repeating, a multi-chunk prompt, "
      "prefix reuse: cached_tokens %d) answered as bin/k3 serve" % (len(REQS), cached))
