"""Gate 18: images in --chat, --history and saved states (see
tests/gates/18-vision-chat.sh for what is checked and why).

  vision_chat_check.py K3 MODEL TOKDIR WORKDIR
"""
import base64
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image

PAD, BEGIN, CONTENT, END = 163605, 163602, 163603, 163604


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(args, stdin="", want=0):
    r = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if r.returncode != want:
        fail(f"{' '.join(args[:6])}...: exit {r.returncode} (wanted {want}): {r.stderr[-800:]}")
    return r


def computed(state):
    """A state file's logits, KDA states and MLA cache: what follows the ids and
    the image spans (src/model/state_file.c, version 2), whose hashes differ for
    different images whatever the model computed."""
    layers = int.from_bytes(state[12:16], "little")
    at = 8 + 4 + 4 + 8 * 6 + layers
    pos = int.from_bytes(state[at:at + 8], "little")
    nimg = int.from_bytes(state[at + 8:at + 16], "little")
    return state[at + 16 + pos * 4 + nimg * 24:-8]  # not the checksum


def main(k3, model, tok, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.RandomState(18)
    a, b = os.path.join(work, "a.png"), os.path.join(work, "b.png")
    for path in (a, b):  # the same size, different pixels: equal ids
        Image.fromarray(rng.randint(0, 256, (20, 31, 3)).astype(np.uint8)).save(path)
    url = {p: "data:image/png;base64," + base64.b64encode(open(p, "rb").read()).decode()
           for p in (a, b)}
    W = os.path.join
    chat = [k3, model, "--tok", tok, "--chat", "--gen", "3", "--ignore-eos"]

    # (a) the rendering of an image part, and its ids.
    conv = W(work, "conv.json")
    json.dump({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Look: "},
        {"type": "image_url", "image_url": {"url": url[a]}},
        {"type": "text", "text": "What is it?"}]}]}, open(conv, "w"))
    text = run([k3, "--render-chat", conv]).stdout
    mark = "<|media_begin|>image 31x20<|media_content|><|media_pad|><|media_end|>"
    if "Look: " + mark + "What is it?" not in text:
        fail(f"--render-chat: the image part is not §4's markup between the text parts: {text!r}")
    ids = [int(v) for v in run([k3, "--tok", tok, "--render-chat", conv, "--tokenize"])
           .stdout.strip().split(",")]
    if ids.count(PAD) != 1:
        fail(f"--render-chat --tokenize: {ids.count(PAD)} pads for one image")
    rep = W(work, "turn1.json")
    hist = W(work, "hA.jsonl")
    state = W(work, "sA.bin")
    run(chat + ["--image", a, "--out", rep, "--history", hist, "--save-state", state],
        "What is it?\n")
    got = json.load(open(rep))["turns"][0]["prompt_ids"]
    prep = W(work, "prompt.json")
    run([k3, model, "--tok", tok, "--image", a, "--prompt", "x", "--gen", "1", "--quiet",
         "--ignore-eos", "--out", prep])
    want = json.load(open(prep))["prompt_ids"]
    want = want[:want.index(END) + 1]  # the image's markup ids, pads expanded
    start = got.index(BEGIN) if BEGIN in got else -1
    if start < 0 or got[start:start + len(want)] != want or got.count(PAD) != want.count(PAD):
        fail(f"--chat --image: the image's ids in the prompt differ from --prompt --image's "
             f"({got.count(PAD)} pads, wanted {want.count(PAD)})")
    print(f"(a) an image part renders as §4's markup; --chat --image puts its "
          f"{want.count(PAD)} rows in the first message, ids as --prompt --image")

    # (a') /image FILE in the chat: what --image gives the first message; a file
    # that is no usable image is said and the chat goes on.
    bad = W(work, "trunc.png")
    open(bad, "wb").write(open(a, "rb").read()[:90])
    rep2 = W(work, "turn1-cmd.json")
    r = run(chat + ["--out", rep2], f"/image {bad}\n/image {a}\nWhat is it?\n")
    if "truncated" not in r.stderr or "31x20" not in r.stderr:
        fail(f"/image: no word of the truncated file or of the image: {r.stderr[-400:]}")
    if json.load(open(rep2))["turns"] != json.load(open(rep))["turns"]:
        fail("/image FILE then the message: not the turn --chat --image gives")
    print("(a') /image FILE attaches the image to the next message: the turn --image gives; "
          "a truncated file is said and the chat goes on")

    # (b) the history reloads with the image and continues exactly.
    line = open(hist).readline()
    if url[a] not in line:
        fail("the history's user message does not hold the image as a data URL")
    hB = open(hist).read().replace(url[a], url[b])

    def cont(history_text, name, load):
        h = W(work, name + ".jsonl")
        open(h, "w").write(history_text)
        out = W(work, name + ".bin")
        r = run(chat + ["--history", h, "--save-state", out, "--out", W(work, name + ".json")]
                + (["--load-state", state] if load else []), "And now?\n")
        return open(out, "rb").read(), r.stderr, json.load(open(W(work, name + ".json")))
    hA = open(hist).read()
    warm_a, err_a, rep_a = cont(hA, "warmA", True)
    cold_a, _, crep_a = cont(hA, "coldA", False)
    if "start: prefilled 0 new tokens" not in err_a:
        fail(f"reloading the history with its state did not reuse all of it: {err_a[-400:]}")
    if warm_a != cold_a or rep_a["turns"] != crep_a["turns"]:
        fail("reloading the history with images and its state does not continue as a cold "
             "replay does")
    print("(b) the history with the image reloads: its state reused whole, the continuation "
          "byte-identical to a cold replay")

    # (c) the trap: another image of the same size, the first image's state.
    warm_b, err_b, rep_b = cont(hB, "warmB", True)
    cold_b, _, crep_b = cont(hB, "coldB", False)
    if warm_b != cold_b or rep_b["turns"] != crep_b["turns"]:
        fail("another image of the same size with the first image's state: not what a cold "
             "run gives (the state was reused past the image)")
    if "an image differs" not in err_b:
        fail(f"another image of the same size: no word that the image differs: {err_b[-400:]}")
    if computed(cold_b) == computed(cold_a):
        fail("the two images give the same logits and caches: the image rows did not reach "
             "the model")
    print("(c) another image of the same size: the saved state is not reused past it; "
          "the result byte-identical to a cold run, and not the first image's")

    # (d) refusals.
    def refused(content, code, pat, role="user"):
        h = W(work, "bad.jsonl")
        open(h, "w").write(json.dumps({"role": role, "content": content}) + "\n")
        r = run(chat + ["--history", h], "x\n", want=code)
        if pat not in r.stderr:
            fail(f"{pat!r} not in the message: {r.stderr[-300:]}")
        if open(h).read().count("\n") != 1:
            fail("a refused history was changed")
    part = lambda u: [{"type": "image_url", "image_url": {"url": u}}]
    refused(part("https://example.com/cat.png"), 2, "never fetches")
    refused(part("data:image/png;base64,iVBO!!!!"), 2, "invalid byte")
    trunc = "data:image/png;base64," + base64.b64encode(open(a, "rb").read()[:90]).decode()
    refused(part(trunc), 2, "truncated")
    refused(part(url[a]), 2, "only a system or user message has content parts", "assistant")
    r = run([k3, model, "--tok", tok, "--image", a, "--prompt", "x", "--budget-gb", "0.0001"],
            want=3)
    if "encoding the images needs" not in r.stderr:
        fail(f"the vision plan over the budget: {r.stderr[-300:]}")
    print("(d) a remote URL, bad base64, a truncated image, an image in an assistant "
          "message: exit 2 naming it; the vision plan over --budget-gb: exit 3")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
