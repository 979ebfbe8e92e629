"""logprobs_check.py - the server's logprobs against the model's own logits.

usage: logprobs_check.py chat|completion ANSWER.json STREAM.sse LOGITS.f32 TOP

ANSWER.json: a greedy answer with logprobs (and return_token_ids); STREAM.sse:
the same request streamed; LOGITS.f32: `k3 MODEL --ids PROMPT --gen N
--ignore-eos --dump-logits` of the answer's prompt ids (one float32 row per
generated id). Every logprob must be the log-softmax of its row (computed here
in float64) to 1e-6, the top list the row's TOP largest logits (ties to the
lower id) with their logprobs, and the stream's entries, joined, the answer's.
"""
import json
import math
import struct
import sys

kind, answer_path, sse_path, logits_path, top = sys.argv[1:6]
top = int(top)
r = json.load(open(answer_path))
choice = r["choices"][0]
ids = choice["token_ids"]
raw = open(logits_path, "rb").read()
V = len(raw) // 4 // len(ids)
assert V * 4 * len(ids) == len(raw), (len(raw), len(ids))


def row_stats(i):
    row = struct.unpack_from("<%df" % V, raw, i * V * 4)
    m = max(row)
    lse = m + math.log(math.fsum(math.exp(x - m) for x in row))
    best = sorted(range(V), key=lambda j: (-row[j], j))[:top]
    return row, lse, best


lp = choice["logprobs"]
if kind == "chat":
    content = lp["content"]
    assert len(content) == len(ids), (len(content), len(ids))  # no end id here
    entries = [(c["logprob"], [t["logprob"] for t in c["top_logprobs"]], c) for c in content]
else:
    assert len(lp["tokens"]) == len(ids) == len(lp["token_logprobs"]) == len(lp["top_logprobs"])
    entries = [(lp["token_logprobs"][i], sorted(lp["top_logprobs"][i].values(), reverse=True),
                None) for i in range(len(ids))]
    offs = lp["text_offset"]
    text = "".join(lp["tokens"])
    assert text == choice["text"], (text, choice["text"])
    assert offs[0] == 0 and all(b >= a for a, b in zip(offs, offs[1:])), offs
worst = 0.0
for i, (got, tops, c) in enumerate(entries):
    row, lse, best = row_stats(i)
    want = row[ids[i]] - lse
    worst = max(worst, abs(got - want))
    assert abs(got - want) <= 1e-6, (i, got, want)
    assert len(tops) == top, (i, tops)
    for k, j in enumerate(best):
        assert abs(tops[k] - (row[j] - lse)) <= 1e-6, (i, k, tops[k], row[j] - lse)
        worst = max(worst, abs(tops[k] - (row[j] - lse)))
    assert best[0] == ids[i], "greedy: the top id is the generated one"
    if c is not None:
        assert c["top_logprobs"][0]["bytes"] == c["bytes"], (i, c)
        assert bytes(c["bytes"]).decode("utf-8", "replace") == c["token"] or \
            "\ufffd" in c["token"], (i, c)

# The stream: every chunk's entries, joined, are the answer's.
joined = {"content": []} if kind == "chat" else \
    {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
for line in open(sse_path, encoding="utf-8"):
    if not line.startswith("data: ") or line.strip() == "data: [DONE]":
        continue
    ev = json.loads(line[6:])
    for ch in ev["choices"]:
        if ch["logprobs"] is None:
            continue
        for k in joined:
            joined[k] += ch["logprobs"][k]
assert joined == lp, "the streamed logprobs differ from the answer's"
print("ok: %s logprobs: %d ids, top %d, within %.1e of the dumped logits' log-softmax; "
      "the stream's equal" % (kind, len(ids), top, worst))
