#!/usr/bin/python3
"""dspark_ref: an independent float64 reference of the DSpark drafter (docs/MODEL.md §10).

Module and CLI. Only the standard library, numpy and tools/k3ref.py (the target model).
Written from the layout in docs/MODEL.md §10, not from the C code. Every number is
float64 from the STORED weights.

The drafter (model_type "k3_dspark") guesses the block of `block_size` ids that follow
a sequence seq[0..n) while the target has consumed seq[0..n-1) (the last id is still
pending, as in k3's speculative step):
  * context: for every position j < n-1, the target's hidden states at the tap layers
    (the outputs of 0-based layers target_layer_ids), concatenated, through fc and
    hidden_norm: f_j [H];
  * block: rows k = 0..B-1 at positions n-1+k, inputs the target's embeddings of
    [seq[n-1], mask, ..., mask];
  * layers: pre-norm residual; gated MLA with RoPE on the rope parts (half-split
    rotation, theta = rope_theta), whose keys/values are the context rows' (projected
    from f_j by the same kv_a_proj_with_mqa, without input_layernorm) followed by the
    block rows' own; every block row sees every context and block row (non-causal);
    dense SiTU MLP;
  * head: rms(h, norm) @ the TARGET's lm_head, plus the vanilla Markov bias
    markov_head.proj @ markov_head.embed[prev], prev = seq[n-1] for row 0 and the
    id picked at row k-1 for row k (picked greedily here: argmax, ties to the lowest).

CLI:
  /usr/bin/python3 tools/dspark_ref.py TARGET_DIR DRAFT_DIR --ids 1,2,3 --dump FILE
      [--taps FILE] [--dump-taps FILE]
prints the B greedily picked draft ids on one line and writes the B logit rows (vocab
little-endian float32 each) to FILE. --taps takes the context's taps from FILE (rows of
ntaps*H float32, position-major: e.g. the engine's, to check the drafter alone) instead
of computing them with the float64 target; --dump-taps writes the taps used.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402
from k3ref import K3Error, rms, sigmoid, situ, softmax  # noqa: E402

MODEL_TYPE = "k3_dspark"
ARCHITECTURE = "K3DSparkModel"
WEIGHTS_FILE = "model.safetensors"

_INT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
               "v_head_dim", "intermediate_size", "block_size", "mask_token_id",
               "markov_rank")
_FLOAT_FIELDS = ("rms_norm_eps", "activation_situ_beta", "activation_situ_linear_beta",
                 "rope_theta")


class DraftConfig:
    """config.json of a drafter directory, validated against its target's config."""

    def __init__(self, d, target=None):
        problems = []
        if d.get("model_type") != MODEL_TYPE:
            problems.append(f"model_type {d.get('model_type')!r} is not {MODEL_TYPE!r}")
        for k in _INT_FIELDS:
            v = d.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                problems.append(f"{k} must be a positive integer")
            setattr(self, k, v)
        for k in _FLOAT_FIELDS:
            v = d.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                problems.append(f"{k} must be a positive number")
            setattr(self, k, float(v) if isinstance(v, (int, float)) else v)
        if d.get("markov_head_type", "vanilla") != "vanilla":
            problems.append("markov_head_type: only 'vanilla' is implemented")
        taps = d.get("target_layer_ids")
        if (not isinstance(taps, list) or not taps
                or not all(isinstance(t, int) and t >= 0 for t in taps)):
            problems.append("target_layer_ids must be a non-empty list of layer indices")
            taps = []
        self.target_layer_ids = taps
        if not problems and self.qk_rope_head_dim % 2:
            problems.append("qk_rope_head_dim must be even (RoPE rotates pairs)")
        if target is not None and not problems:
            if self.hidden_size != target.hidden_size or self.vocab_size != target.vocab_size:
                problems.append("hidden_size and vocab_size must be the target's")
            if max(taps) >= target.num_hidden_layers:
                problems.append("a target_layer_ids entry is not a layer of the target")
            if self.mask_token_id >= self.vocab_size:
                problems.append("mask_token_id is outside the vocabulary")
        if problems:
            raise K3Error("draft config: " + "; ".join(problems))


def expected_tensors(c):
    """name -> (dtype, shape) of every tensor the drafter reads (MODEL.md §10.2)."""
    H, NA = c.hidden_size, c.num_attention_heads
    DQ = c.qk_nope_head_dim + c.qk_rope_head_dim
    t = {"fc.weight": ("BF16", (H, len(c.target_layer_ids) * H)),
         "hidden_norm.weight": ("BF16", (H,)),
         "norm.weight": ("BF16", (H,)),
         "markov_head.embed.weight": ("BF16", (c.vocab_size, c.markov_rank)),
         "markov_head.proj.weight": ("BF16", (c.vocab_size, c.markov_rank))}
    for i in range(c.num_hidden_layers):
        p = f"layers.{i}."
        t[p + "input_layernorm.weight"] = ("BF16", (H,))
        t[p + "post_attention_layernorm.weight"] = ("BF16", (H,))
        a = p + "self_attn."
        t[a + "q_a_proj.weight"] = ("BF16", (c.q_lora_rank, H))
        t[a + "q_a_layernorm.weight"] = ("BF16", (c.q_lora_rank,))
        t[a + "q_b_proj.weight"] = ("BF16", (NA * DQ, c.q_lora_rank))
        t[a + "kv_a_proj_with_mqa.weight"] = ("BF16", (c.kv_lora_rank + c.qk_rope_head_dim, H))
        t[a + "kv_a_layernorm.weight"] = ("BF16", (c.kv_lora_rank,))
        t[a + "kv_b_proj.weight"] = ("BF16", (NA * (c.qk_nope_head_dim + c.v_head_dim),
                                               c.kv_lora_rank))
        t[a + "g_proj.weight"] = ("BF16", (NA * c.v_head_dim, H))
        t[a + "o_proj.weight"] = ("BF16", (H, NA * c.v_head_dim))
        t[p + "mlp.gate_proj.weight"] = ("BF16", (c.intermediate_size, H))
        t[p + "mlp.up_proj.weight"] = ("BF16", (c.intermediate_size, H))
        t[p + "mlp.down_proj.weight"] = ("BF16", (H, c.intermediate_size))
    return t


def load_draft(draft_dir, target_cfg=None):
    """(DraftConfig, {name: float64 array}) of a drafter directory."""
    with open(os.path.join(draft_dir, "config.json"), encoding="utf-8") as f:
        c = DraftConfig(json.load(f), target_cfg)
    st = k3ref.SafetensorsFile(os.path.join(draft_dir, WEIGHTS_FILE))
    w = {}
    for name, (dtype, shape) in expected_tensors(c).items():
        if name not in st.entries:
            raise K3Error(f"{WEIGHTS_FILE}: no tensor {name}")
        got = st.entries[name][:2]
        if got != (dtype, shape):
            raise K3Error(f"{name}: stored {got[0]}{list(got[1])}, needs {dtype}{list(shape)}")
        w[name] = k3ref.bf16_decode(st.read(name))
    return c, w


def rope(x, pos, theta):
    """Half-split RoPE of x [..., D] at positions pos (broadcast over the leading axis):
    pair (x_i, x_{i+D/2}) rotated by pos * theta^(-2i/D)."""
    D = x.shape[-1]
    half = D // 2
    inv = theta ** (-2.0 * np.arange(half) / D)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    if x.ndim == 3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


class Drafter:
    """The drafter over a k3ref.Model target."""

    def __init__(self, target, draft_dir):
        self.t = target
        self.c, self.w = load_draft(draft_dir, target.cfg)

    def target_taps(self, ids):
        """Concatenated tap rows [len(ids), ntaps*H] of the target over ids."""
        got = {}
        self.t.on_hidden = lambda i, h: got.__setitem__(i, h.copy())
        try:
            self.t.forward_full(ids)
        finally:
            self.t.on_hidden = None
        return np.concatenate([got[i] for i in self.c.target_layer_ids], axis=1)

    def _layer(self, i, h, f, pos_ctx, pos_blk):
        c, w = self.c, self.w
        p, a = f"layers.{i}.", f"layers.{i}.self_attn."
        NA, DN, DR, DV, R = (c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim,
                             c.v_head_dim, c.kv_lora_rank)
        x = rms(h, w[p + "input_layernorm.weight"], c.rms_norm_eps)
        cq = rms(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"],
                 k3ref.MLA_LORA_NORM_EPS)
        q = (cq @ w[a + "q_b_proj.weight"].T).reshape(len(x), NA, DN + DR)
        q = np.concatenate([q[:, :, :DN], rope(q[:, :, DN:], pos_blk, c.rope_theta)], axis=2)
        # keys/values: the context rows (from f, no input norm) then the block rows
        src = np.concatenate([f, x], axis=0)
        pos = np.concatenate([pos_ctx, pos_blk])
        ckv = src @ w[a + "kv_a_proj_with_mqa.weight"].T
        cn = rms(ckv[:, :R], w[a + "kv_a_layernorm.weight"], k3ref.MLA_LORA_NORM_EPS)
        kr = rope(ckv[:, R:], pos, c.rope_theta)
        kv = (cn @ w[a + "kv_b_proj.weight"].T).reshape(len(src), NA, DN + DV)
        k = np.concatenate([kv[:, :, :DN], np.broadcast_to(kr[:, None, :], (len(src), NA, DR))],
                           axis=2)
        scores = np.einsum("thd,shd->hts", q, k) * (DN + DR) ** -0.5   # non-causal
        o = np.einsum("hts,shd->thd", softmax(scores, axis=-1), kv[:, :, DN:])
        o = o.reshape(len(x), NA * DV) * sigmoid(x @ w[a + "g_proj.weight"].T)
        h = h + o @ w[a + "o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
        m = situ(x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T,
                 c.activation_situ_beta, c.activation_situ_linear_beta)
        return h + m @ w[p + "mlp.down_proj.weight"].T

    def block(self, seq, taps=None):
        """(B logit rows [B, V], B greedy ids, taps) drafted after seq (len >= 2); taps
        [len(seq)-1, ntaps*H]: given, or the float64 target's."""
        c, w = self.c, self.w
        n = len(seq)
        if n < 2:
            raise K3Error("the drafter needs a context: at least 2 ids")
        if taps is None:
            taps = self.target_taps(seq[:n - 1])
        elif taps.shape != (n - 1, len(c.target_layer_ids) * c.hidden_size):
            raise K3Error(f"taps: shape {taps.shape} is not that of {n - 1} positions")
        f = rms(taps @ w["fc.weight"].T, w["hidden_norm.weight"], c.rms_norm_eps)
        B = c.block_size
        h = self.t._embed([seq[n - 1]] + [c.mask_token_id] * (B - 1))
        pos_ctx = np.arange(n - 1, dtype=np.float64)
        pos_blk = np.arange(n - 1, n - 1 + B, dtype=np.float64)
        for i in range(c.num_hidden_layers):
            h = self._layer(i, h, f, pos_ctx, pos_blk)
        base = rms(h, w["norm.weight"], c.rms_norm_eps) @ self.t.w["lm_head.weight"].T
        rows, ids, prev = [], [], seq[n - 1]
        for k in range(B):
            row = base[k] + w["markov_head.proj.weight"] @ w["markov_head.embed.weight"][prev]
            rows.append(row)
            prev = int(np.argmax(row))
            ids.append(prev)
        return np.array(rows), ids, taps


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference of the DSpark drafter")
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--ids", required=True, help="comma-separated sequence (>= 2 ids)")
    ap.add_argument("--dump", help="write the block's logit rows (float32) here")
    ap.add_argument("--taps", help="the context's taps (float32 rows) instead of the target's")
    ap.add_argument("--dump-taps", help="write the taps used (float32 rows) here")
    args = ap.parse_args(argv)
    try:
        d = Drafter(k3ref.Model(args.target), args.draft)
        seq = [int(x) for x in args.ids.split(",")]
        taps = None
        if args.taps:
            taps = np.fromfile(args.taps, dtype="<f4").astype(np.float64)
            taps = taps.reshape(len(seq) - 1, -1) if taps.size % max(len(seq) - 1, 1) == 0 \
                else taps
        rows, ids, taps = d.block(seq, taps)
        if args.dump_taps:
            taps.astype("<f4").tofile(args.dump_taps)
    except (K3Error, OSError, ValueError) as e:
        print(f"dspark_ref: {e}", file=sys.stderr)
        return 2
    if args.dump:
        rows.astype("<f4").tofile(args.dump)
    print(" ".join(str(i) for i in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
