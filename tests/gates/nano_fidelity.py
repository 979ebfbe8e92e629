#!/usr/bin/python3
"""nano_fidelity: k3 on the trained k3-nano against the torch model and the reference.

  nano_fidelity.py K3_BIN MODEL_DIR TEXT_FILE WORK_DIR [--tokens N] [--perturb X]

Takes the first N tokens of TEXT_FILE (k3's own encoder), runs them through k3 by
teacher forcing (--ids ... --dump-prompt-logits), through the torch model of
tools/train_nano.py on the stored weights in float64, and through the float64
reference tools/k3ref.py (forward_full). Checks:
  * per-token log-loss of the next token, k3 against torch:
    |k3 - torch| <= 1e-4 * |torch| + 1e-7 for every position (the absolute 1e-7
    only matters for tokens predicted with loss below 1e-3 nats);
  * k3's greedy token (argmax) at every position equals the reference's;
  * (sanity of the torch model itself) torch and reference log-losses agree to 1e-9.
Prints the largest deviations and k3's bits per byte on the excerpt (total log-loss
of tokens 1..N-1 over the UTF-8 bytes of those tokens). --perturb X adds X times
a fixed pattern to k3's logits before the checks (the gate uses it to show a
deviation is caught). Exit 0 when every check holds, 1 otherwise.
"""

import argparse
import math
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import k3ref  # noqa: E402
import train_nano  # noqa: E402
import torch  # noqa: E402

REL_TOL = 1e-4
ABS_FLOOR = 1e-7


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("k3")
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("work")
    ap.add_argument("--tokens", type=int, default=384)
    ap.add_argument("--perturb", type=float, default=0.0)
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    with open(a.text, encoding="utf-8", newline="") as f:
        text = f.read()
    ids = train_nano.tokenize(a.k3, a.model, [text])[0][:a.tokens]
    T = len(ids)
    if T < 2:
        print(f"{a.text}: fewer than 2 tokens")
        return 1
    cfg = k3ref.load_config(a.model)
    V = cfg.vocab_size

    dump = os.path.join(a.work, "k3-logits.f32")
    subprocess.run([a.k3, a.model, "--ids", ",".join(map(str, ids)), "--gen", "1",
                    "--ignore-eos", "--quiet", "--dump-prompt-logits", dump],
                   check=True, stdout=subprocess.DEVNULL)
    k3 = np.fromfile(dump, dtype="<f4")
    if k3.size != T * V:
        print(f"k3 wrote {k3.size} logits, want {T} x {V}")
        return 1
    k3 = k3.reshape(T, V).astype(np.float64)
    if a.perturb:
        k3 = k3 + a.perturb * np.sin(np.arange(V))[None, :] * np.abs(k3).max()

    _, w = train_nano.load_params(a.model, torch.float64)
    with torch.no_grad():
        tl = train_nano.K3Torch(cfg, w).forward(torch.tensor([ids]))[0].numpy()
    ref = k3ref.Model(a.model).forward_full(ids)

    nxt = np.array(ids[1:])
    pos = np.arange(T - 1)
    nll_k3 = -log_softmax(k3)[pos, nxt]
    nll_t = -log_softmax(tl)[pos, nxt]
    nll_r = -log_softmax(ref)[pos, nxt]
    dev = np.abs(nll_k3 - nll_t)
    bound = REL_TOL * np.abs(nll_t) + ABS_FLOOR
    worst = int(np.argmax(dev / bound))
    ok_loss = bool((dev <= bound).all())
    torch_ref = float(np.abs(nll_t - nll_r).max())
    ok_tr = torch_ref <= 1e-9
    g_k3, g_ref = k3.argmax(axis=1), ref.argmax(axis=1)
    diff = np.nonzero(g_k3 != g_ref)[0]
    ok_greedy = diff.size == 0

    nbytes = len(token_bytes(a.k3, a.model, ids[1:]))
    bpb = float(nll_k3.sum()) / math.log(2) / nbytes
    print(f"{a.text}: {T} tokens, {nbytes} predicted bytes")
    print(f"log-loss k3 vs torch: max |d| {dev.max():.3g}, max |d|/|torch| "
          f"{float((dev / np.maximum(np.abs(nll_t), 1e-30)).max()):.3g} "
          f"(worst at {worst}: k3 {nll_k3[worst]:.9g} torch {nll_t[worst]:.9g}) "
          f"{'ok' if ok_loss else 'FAIL'}")
    print(f"log-loss torch vs reference (float64 both): max |d| {torch_ref:.3g} "
          f"{'ok' if ok_tr else 'FAIL'}")
    print(f"greedy k3 vs reference: {T - diff.size}/{T} identical "
          f"{'ok' if ok_greedy else 'FAIL at ' + str(diff[:8].tolist())}")
    print(f"k3 mean log-loss {nll_k3.mean():.4f} nats/token, {bpb:.4f} bits per byte")
    return 0 if ok_loss and ok_tr and ok_greedy else 1


def token_bytes(k3, model, ids):
    """The UTF-8 bytes of ids (k3 --detokenize; the excerpt's ids are ordinary)."""
    out = subprocess.run([k3, "--tok", model, "--detokenize", ",".join(map(str, ids))],
                         check=True, stdout=subprocess.PIPE).stdout
    return out[:-1] if out.endswith(b"\n") else out           # the command ends its line


if __name__ == "__main__":
    sys.exit(main())
