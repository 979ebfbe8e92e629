#!/usr/bin/python3
"""make_dspark: random DSpark drafters (model_type k3_dspark) for a target checkpoint.

  /usr/bin/python3 tools/make_dspark.py OUT_DIR --target TARGET_DIR [--seed S]
      [--layers N] [--taps 0,2,4] [--block B] [--markov-rank R] [--rope-theta T]

Writes OUT_DIR/config.json and OUT_DIR/model.safetensors in the layout of
docs/MODEL.md §10 (names, BF16, shapes: tools/dspark_ref.py expected_tensors). The
drafter's width, vocabulary and MLA dims are the target's (its hidden states are the
drafter's input and its lm_head the drafter's head); its layers, taps, block and
Markov rank are the options (defaults scaled down from the published drafter's 5
layers, taps 2/23/47/71/89 of 93, block 7, rank 256: 2 layers, taps spread over the
target's depth, block 7, rank 16). mask_token_id is vocab_size - 3 (an id of the
special range, make_checkpoint.py special_ids). The weights are scaled like
make_checkpoint.py's so that every path matters (the RoPE'd key parts carry a
comparable share of the attention scores; the Markov bias is as large as the logits'
spread).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dspark_ref  # noqa: E402
import k3ref  # noqa: E402
import make_checkpoint as mc  # noqa: E402


def default_taps(L):
    """Three taps spread over L target layers (0-based layer outputs)."""
    return sorted({0, L // 2, max(L - 2, 0)})


def draft_config(target, layers, taps, block, rank, theta):
    t = target
    return {
        "architectures": [dspark_ref.ARCHITECTURE],
        "model_type": dspark_ref.MODEL_TYPE,
        "torch_dtype": "bfloat16",
        "vocab_size": t.vocab_size, "hidden_size": t.hidden_size,
        "num_hidden_layers": layers, "num_attention_heads": t.num_attention_heads,
        "q_lora_rank": t.q_lora_rank, "kv_lora_rank": t.kv_lora_rank,
        "qk_nope_head_dim": t.qk_nope_head_dim, "qk_rope_head_dim": t.qk_rope_head_dim,
        "v_head_dim": t.v_head_dim, "intermediate_size": t.intermediate_size,
        "rms_norm_eps": t.rms_norm_eps, "activation_situ_beta": t.activation_situ_beta,
        "activation_situ_linear_beta": t.activation_situ_linear_beta,
        "rope_theta": theta, "block_size": block, "mask_token_id": t.vocab_size - 3,
        "target_layer_ids": taps, "markov_rank": rank, "markov_head_type": "vanilla",
    }


def init(name, shape, p, rng):
    """float64 values of drafter tensor `name` (p: make_checkpoint-style dims)."""
    if name == "fc.weight":
        return mc._normal(rng, shape, 1.0 / np.sqrt(shape[1]))
    if name == "markov_head.embed.weight":
        return mc._normal(rng, shape, 1.0)
    if name == "markov_head.proj.weight":           # bias std ~2, like the logits
        return mc._normal(rng, shape, 2.0 / np.sqrt(shape[1]))
    return mc.init_tensor(name, shape, p, rng)


def make_dspark(out_dir, target_dir, seed=0, layers=2, taps=None, block=7, rank=16,
                theta=10000.0):
    t = k3ref.load_config(target_dir)
    taps = default_taps(t.num_hidden_layers) if taps is None else taps
    cfg_json = draft_config(t, layers, taps, block, rank, theta)
    c = dspark_ref.DraftConfig(cfg_json, t)
    p = dict(cfg_json)
    rng = np.random.default_rng(seed)
    entries = [(n, d, s) for n, (d, s) in sorted(dspark_ref.expected_tensors(c).items())]
    os.makedirs(out_dir, exist_ok=True)
    fd, offsets = mc.open_safetensors(os.path.join(out_dir, dspark_ref.WEIGHTS_FILE), entries)
    try:
        for name, _, shape in entries:
            mc._pwrite_all(fd, mc.bf16_encode(init(name, shape, p, rng)).tobytes(),
                           offsets[name])
    finally:
        os.close(fd)
    mc._write_json(os.path.join(out_dir, "config.json"), cfg_json)


def main(argv=None):
    ap = argparse.ArgumentParser(description="random DSpark drafter for a K3 checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--target", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--taps", help="0-based target layers, comma-separated")
    ap.add_argument("--block", type=int, default=7)
    ap.add_argument("--markov-rank", type=int, default=16)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    a = ap.parse_args(argv)
    taps = [int(x) for x in a.taps.split(",")] if a.taps else None
    try:
        make_dspark(a.out_dir, a.target, a.seed, a.layers, taps, a.block, a.markov_rank,
                    a.rope_theta)
    except (k3ref.K3Error, OSError, ValueError) as e:
        print(f"make_dspark: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.out_dir}: a random DSpark drafter for {a.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
