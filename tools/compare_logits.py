#!/usr/bin/python3
"""compare_logits: compare two float32 logit dumps (rows of vocab_size LE float32).

  /usr/bin/python3 tools/compare_logits.py A B --vocab V [--rel 1e-4]

A is the reference. Prints max|A-B|, max|A|, their ratio and per-row argmax agreement.
Exit 0 iff max|A-B| <= rel * max|A| (argmax disagreement is reported, not judged);
exit 1 on a mismatch, 2 on unusable input (sizes differ or not a multiple of V).
"""

import argparse
import sys

import numpy as np


def load_rows(path, vocab):
    x = np.fromfile(path, dtype="<f4").astype(np.float64)
    if x.size == 0 or x.size % vocab:
        raise ValueError(f"{path}: {x.size} floats is not a positive multiple of vocab {vocab}")
    return x.reshape(-1, vocab)


def main(argv=None):
    ap = argparse.ArgumentParser(description="compare two float32 logit dumps")
    ap.add_argument("a", help="reference dump")
    ap.add_argument("b", help="dump under test")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--rel", type=float, default=1e-4)
    args = ap.parse_args(argv)
    try:
        a, b = load_rows(args.a, args.vocab), load_rows(args.b, args.vocab)
    except (OSError, ValueError) as e:
        print(f"compare_logits: {e}", file=sys.stderr)
        return 2
    if a.shape != b.shape:
        print(f"compare_logits: {a.shape[0]} rows vs {b.shape[0]} rows", file=sys.stderr)
        return 2
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        print("compare_logits: non-finite values", file=sys.stderr)
        return 1
    diff = np.abs(a - b).max()
    ref = np.abs(a).max()
    ratio = diff / ref if ref > 0 else float("inf")
    agree = np.argmax(a, axis=1) == np.argmax(b, axis=1)
    print(f"rows {a.shape[0]}  max|diff| {diff:.6g}  max|ref| {ref:.6g}  ratio {ratio:.3g}  "
          f"(limit {args.rel:g})")
    print(f"argmax agrees on {int(agree.sum())}/{agree.size} rows"
          + ("" if agree.all() else f"; differs at rows {np.flatnonzero(~agree).tolist()}"))
    ok = diff <= args.rel * ref
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
