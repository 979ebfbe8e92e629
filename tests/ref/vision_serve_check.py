"""Gate 18, k3 serve: image_url content parts in /v1/chat/completions (see
tests/gates/18-vision-chat.sh for what is checked and why).

  vision_serve_check.py K3 MODEL TOKDIR WORKDIR TEXT_ONLY_MODEL
"""
import base64
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
from PIL import Image

from vision_c_check import hostile_cases  # tests/ref, beside this file

GEN = 6
SYSTEM = "You are terse."


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Server:
    """k3 serve on a free port, its log in WORK/NAME.log; ended by stop()."""

    def __init__(self, k3, model, tok, work, name, *opts):
        self.log = os.path.join(work, name + ".log")
        self.name = name
        self.proc = subprocess.Popen(
            [k3, "serve", model, "--tok", tok, "--port", "0", "--exit-after", "120", *opts],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        self.port = None
        for _ in range(600):
            m = re.search(r"listening on http://[^ ]*:(\d+) ", open(self.log).read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                fail(f"{name}: k3 serve exited {self.proc.returncode}: {open(self.log).read()}")
            time.sleep(0.1)
        self.stop()
        fail(f"{name}: k3 serve did not listen")

    def post(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("POST", "/v1/chat/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        return r.status, data

    def answer(self, body):
        """(prompt ids, generated ids) of a 200 answer, whole or streamed."""
        status, data = self.post(body)
        if status != 200:
            fail(f"{self.name}: status {status}: {data[:400]}")
        if not body.get("stream"):
            r = json.loads(data)
            return r["prompt_token_ids"], r["choices"][0]["token_ids"]
        prompt, ids = None, []
        for line in data.split("\n"):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                fail(f"{self.name}: an error event: {ev}")
            prompt = ev.get("prompt_token_ids", prompt)
            for ch in ev.get("choices", []):
                ids = ch.get("token_ids", ids)
        return prompt, ids

    def refused(self, body, status, pat):
        got, data = self.post(body)
        if got != status or pat not in data:
            fail(f"{self.name}: wanted {status} with {pat!r}, got {got}: {data[:400]}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def main(k3, model, tok, work, plain):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    W = os.path.join
    rng = np.random.RandomState(18)
    a, b = W(work, "a.png"), W(work, "b.png")
    for path in (a, b):  # the same size, different pixels: equal ids
        Image.fromarray(rng.randint(0, 256, (20, 31, 3)).astype(np.uint8)).save(path)
    url = {p: "data:image/png;base64," + base64.b64encode(open(p, "rb").read()).decode()
           for p in (a, b)}

    def cli(img):
        """--chat --image's prompt and generated ids (greedy)."""
        out = W(work, "cli.json")
        r = subprocess.run([k3, model, "--tok", tok, "--chat", "--system", SYSTEM, "--image", img,
                            "--gen", str(GEN), "--ignore-eos", "--quiet", "--out", out],
                           input="What is it?\n", capture_output=True, text=True)
        if r.returncode:
            fail(f"k3 --chat --image: exit {r.returncode}: {r.stderr[-400:]}")
        t = json.load(open(out))["turns"][0]
        return t["prompt_ids"], t["generated_ids"]

    def req(img, stream=False, **extra):
        body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url[img], "detail": "auto"}},
            {"type": "text", "text": "What is it?"}]}],
            "max_tokens": GEN, "temperature": 0, "ignore_eos": True, "return_token_ids": True,
            "reasoning_effort": "max", "stream": stream}  # --chat's default effort
        body.update(extra)
        return body

    want = {a: cli(a), b: cli(b)}
    if want[a][1] == want[b][1]:
        fail("the two images give the same answer: the checks below could not tell them apart")
    with open(W(work, "want.json"), "w") as f:  # for the OpenAI client (vision_client.mjs)
        json.dump({"url": url[a], "system": SYSTEM, "gen": GEN, "prompt": want[a][0],
                   "ids": want[a][1]}, f)

    s = Server(k3, model, tok, work, "vs", "--parallel", "2", "--spec", "4")
    try:
        # (e) the same conversation as --chat --image: the same ids, whole and streamed.
        for stream in (False, True):
            got = s.answer(req(a, stream))
            if got != want[a]:
                fail(f"/v1/chat/completions (stream {stream}) with the image: prompt or "
                     f"answer differs from k3 --chat --image: {got[1]} vs {want[a][1]}")
        print(f"(e) /v1/chat/completions with an image_url part: the prompt's "
              f"{len(want[a][0])} ids and the {GEN} generated equal k3 --chat --image's, "
              f"whole and streamed")
        client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gates",
                              "vision_client.mjs")
        r = subprocess.run(["node", client, f"http://127.0.0.1:{s.port}", W(work, "want.json")],
                           capture_output=True, text=True)
        if r.returncode:
            fail(f"the OpenAI client: {r.stdout[-300:]} {r.stderr[-600:]}")
        print(r.stdout.strip())

        # (f) the trap: another image of the same size after it (equal ids up to the
        # end) is not reused past the image; then the first image again.
        for img in (b, a, b):
            got = s.answer(req(img))
            if got != want[img]:
                fail(f"image {os.path.basename(img)} after the other one: the answer "
                     f"{got[1]} is not a cold run's {want[img][1]} (reused past the image?)")
        for _ in range(100):  # a request's log line follows its response
            reused = [int(v) for v in re.findall(r"reused=(\d+)", open(s.log).read())]
            if len(reused) >= 7:
                break
            time.sleep(0.05)
        start = want[a][0].index(163605)  # the image's first row
        # (the prefix cache, on by default, keeps each image's prompt: only the
        # first request with image b, request 4, has no snapshot holding it)
        if len(reused) != 7 or reused[4] > start or reused[1] != len(want[a][0]):
            fail(f"the reuse of each request {reused}: wanted the whole prompt for the same "
                 f"image, at most {start} (the image's start) for another one")
        print(f"(f) another image of the same size in sequence: reused {reused[4:]} "
              f"positions (at most up to the image at {start} for the image not seen "
              f"before), each answer a cold run's")

        # Both images at once, on the 2 slots: their rows share forward calls.
        got = {}
        ts = [threading.Thread(target=lambda i=img: got.__setitem__(i, s.answer(req(i, i == b))))
              for img in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if got.get(a) != want[a] or got.get(b) != want[b]:
            fail("two image requests at once on two slots: not each one's cold answer")
        print("(f) both images at once on the 2 slots: each answer its cold run's")

        # (g) refusals, 400 naming the problem; the server goes on serving.
        def part(u, role="user"):
            return {"messages": [{"role": role, "content": [
                {"type": "image_url", "image_url": {"url": u}}]}], "max_tokens": 2}
        s.refused(part("https://example.com/cat.png"), 400, "never fetches")
        s.refused(part("data:image/png;base64,iVBO!!!!"), 400, "invalid byte")
        trunc = "data:image/png;base64," + base64.b64encode(open(a, "rb").read()[:90]).decode()
        s.refused(part(trunc), 400, "truncated")
        s.refused(part("data:image/png;base64," + base64.b64encode(b"GIF89a....").decode()),
                  400, "messages[0].content[0]")
        s.refused(part(url[a], "assistant"), 400, "messages[0].content: expected a string")
        for name, data, pat in hostile_cases():  # gate 17's hostile files
            got, body = s.post(part("data:image/png;base64," + base64.b64encode(data).decode()))
            if got != 400 or not re.search(pat, body) or "messages[0].content[0]" not in body:
                fail(f"{name}: wanted a 400 naming the part and matching {pat!r}: {got} "
                     f"{body[:300]}")
        if s.answer(req(a)) != want[a]:
            fail("after the refusals the server answers differently")
        print(f"(g) a remote URL, bad base64, a truncated PNG, not an image, an image in an "
              f"assistant message, gate 17's {len(hostile_cases())} hostile files: 400 naming "
              f"it; the server goes on answering exactly")
    finally:
        s.stop()

    # (h) a budget the images do not fit: the text plan takes 0.06 of 0.08 GB, an
    # 1800 x 1800 image's encoding 0.047 GB (16384 rows, beyond the 4096 context
    # too: the budget is judged first, and without it the 400 would say context):
    # a 400 before anything runs; the small image still fits and is answered exactly.
    big = W(work, "big.png")
    x = np.linspace(0, 255, 1800).astype(np.uint8)
    Image.fromarray(np.stack([np.tile(x, (1800, 1)), np.tile(x[:, None], (1, 1800)),
                              np.full((1800, 1800), 7, np.uint8)], -1)).save(big)
    url[big] = "data:image/png;base64," + base64.b64encode(open(big, "rb").read()).decode()
    g = Server(k3, model, tok, work, "budget", "--parallel", "1", "--budget-gb", "0.08")
    try:
        g.refused(req(big), 400, "more than the 0.0")
        if g.answer(req(a)) != want[a]:
            fail("the budget server's answer with the small image differs from the CLI's")
    finally:
        g.stop()
    print("(h) an image whose encoding exceeds what --budget-gb leaves beside the text plan: "
          "400 before anything runs; a small one is answered exactly")

    # (i) a model without a vision tower.
    p = Server(k3, plain, tok, work, "plain")
    try:
        p.refused(req(a), 400, "this model cannot read images")
        got, data = p.post({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
        if got != 200:
            fail(f"the text-only server after an image request: {got} {data[:300]}")
    finally:
        p.stop()
    r = subprocess.run([k3, plain, "--tok", tok, "--chat", "--gen", "2", "--quiet"],
                       input=f"/image {a}\nhello\n", capture_output=True, text=True)
    if r.returncode or "vision tensor" not in r.stderr:
        fail(f"k3 --chat's /image on a model without a vision tower: exit {r.returncode}, "
             f"{r.stderr[-300:]}")
    print("(i) a model without a vision tower: 400 saying so, then it serves text (and the "
          "chat's /image says so and goes on)")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
