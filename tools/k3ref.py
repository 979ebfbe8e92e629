#!/usr/bin/python3
"""k3ref: an independent float64 reference of the Kimi K3 text model (docs/MODEL.md §4).

Module and CLI. Only the standard library and numpy. Every number is computed in
float64 from the STORED weights (BF16 / F32 / MXFP4 decoded exactly).

Two ways to run the model, which must agree:
  * Model.forward_full(ids)  -> logits [T, V]: the whole sequence at once. MLA
    expands per-head keys/values and uses a full causal score matrix; KDA runs its
    recurrence in transition-matrix form S = (I - b k k^T) diag(a) S + b k v^T.
  * Model.step(state, id)    -> logits [V]: one token, explicit State. MLA keeps a
    576-wide-style latent cache and absorbs kv_b_proj into the query/output; KDA keeps
    the short-conv history and S and applies decay, delta rule and read as rank-1
    updates.

CLI:
  /usr/bin/python3 tools/k3ref.py MODEL_DIR --ids 1,2,3 --gen N
      [--dump-logits FILE] [--dump-prompt-logits FILE] [--full]
prints the N greedily generated ids (argmax, ties -> lowest id) on one line.
--dump-logits: N rows of vocab_size little-endian float32; row 0 is the logits after
the whole prompt (they chose the first generated token), row j after feeding
generated token j-1. --dump-prompt-logits: T rows, row t after prompt token t.
--full recomputes the whole sequence with forward_full at every step.
Generation never stops early (an EOS id is generated like any other token).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np


class K3Error(Exception):
    """A malformed model directory, config or tensor."""


# ----------------------------------------------------------------------------
# Stored dtypes
# ----------------------------------------------------------------------------

#: E2M1 magnitudes indexed by the low 3 bits of an MXFP4 nibble.
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])

#: The dtype of weights and states, hence of the arithmetic. float64 is the
#: reference. float32 (--dtype float32) is a yardstick, not a reference: the same
#: model evaluated by numpy in single precision shows how far any correct fp32
#: implementation may drift from float64 on a given checkpoint.
DTYPE = np.float64
#: Elements sharing one E8M0 scale byte.
MXFP4_GROUP = 32


def bf16_decode(bits):
    """uint16 BF16 bit patterns (any shape) -> float64 (exact: bits << 16 is an f32)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(DTYPE)


def mxfp4_decode(packed, scale):
    """MXFP4 rows -> float64 [rows, 2*cols].

    packed [rows, cols] uint8: byte j of row r holds element 2j in its LOW nibble and
    element 2j+1 in its HIGH nibble; nibble = sign (bit 3) | E2M1 index (bits 0-2).
    scale [rows, 2*cols/32] uint8: E8M0 byte e scales elements 32g..32g+31 by 2^(e-127);
    e == 255 (NaN) is an error.
    """
    packed = np.asarray(packed, dtype=np.uint8)
    scale = np.asarray(scale, dtype=np.uint8)
    if packed.ndim != 2:
        raise K3Error(f"mxfp4: packed must be 2-D, got shape {packed.shape}")
    rows, n = packed.shape[0], 2 * packed.shape[1]
    if n % MXFP4_GROUP or scale.shape != (rows, n // MXFP4_GROUP):
        raise K3Error(f"mxfp4: packed {packed.shape} does not match scale {scale.shape}")
    if (scale == 255).any():
        raise K3Error("mxfp4: scale byte 255 (NaN)")
    nib = np.empty((rows, n), dtype=np.uint8)
    nib[:, 0::2] = packed & 0x0F
    nib[:, 1::2] = packed >> 4
    mag = E2M1_GRID[nib & 7]
    val = np.where(nib & 8, -mag, mag)
    factor = np.ldexp(1.0, scale.astype(np.int64) - 127)
    return (val * np.repeat(factor, MXFP4_GROUP, axis=1)).astype(DTYPE)


# ----------------------------------------------------------------------------
# Safetensors
# ----------------------------------------------------------------------------

#: dtype name -> numpy dtype of the stored little-endian element.
STORED_DTYPES = {"BF16": np.dtype("<u2"), "F32": np.dtype("<f4"), "U8": np.dtype("u1")}


class SafetensorsFile:
    """One shard: 8-byte LE header length N, N bytes of JSON, then the data section.

    data_offsets are relative to the start of the data section and need not be
    aligned. Tensors of dtypes other than BF16/F32/U8 may be listed (the engine only
    skips them) but cannot be read.
    """

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise K3Error(f"{path}: shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise K3Error(f"{path}: header length {n} exceeds the file")
            header = json.loads(f.read(n).decode("utf-8"))
        if not isinstance(header, dict):
            raise K3Error(f"{path}: header is not a JSON object")
        self.data_start = 8 + n
        data_len = size - self.data_start
        self.entries = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            begin, end = e["data_offsets"]
            if not 0 <= begin <= end <= data_len:
                raise K3Error(f"{path}: {name} offsets {begin}..{end} outside data ({data_len})")
            shape = tuple(e["shape"])
            if e["dtype"] in STORED_DTYPES:
                want = int(np.prod(shape, dtype=np.int64)) * STORED_DTYPES[e["dtype"]].itemsize
                if end - begin != want:
                    raise K3Error(f"{path}: {name} holds {end - begin} bytes, shape {shape} "
                                  f"{e['dtype']} needs {want}")
            self.entries[name] = (e["dtype"], shape, begin, end)

    def read(self, name):
        """The stored array of `name` (numpy array of its stored dtype and shape)."""
        dtype, shape, begin, end = self.entries[name]
        if dtype not in STORED_DTYPES:
            raise K3Error(f"{self.path}: {name} has unsupported dtype {dtype}")
        with open(self.path, "rb") as f:
            f.seek(self.data_start + begin)
            buf = f.read(end - begin)
        return np.frombuffer(buf, dtype=STORED_DTYPES[dtype]).reshape(shape)


# ----------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------

_INT_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "num_experts", "num_experts_per_token",
    "num_shared_experts", "moe_intermediate_size", "routed_expert_hidden_size",
    "attn_res_block_size", "first_k_dense_replace", "num_expert_group", "topk_group",
    "moe_layer_freq")
_FLOAT_FIELDS = ("rms_norm_eps", "activation_situ_beta", "activation_situ_linear_beta",
                 "routed_scaling_factor")
_BOOL_FIELDS = ("mla_use_nope", "mla_use_output_gate", "moe_renormalize",
                "latent_moe_use_norm", "tie_word_embeddings")
_STR_FIELDS = ("hidden_act", "moe_router_activation_func")
_LINEAR_INT = ("head_dim", "num_heads", "short_conv_kernel_size")
_LINEAR_FLOAT = ("gate_lower_bound",)
_LINEAR_BOOL = ("use_full_rank_gate",)
_LINEAR_LISTS = ("kda_layers", "full_attn_layers")

#: Switches whose other values would be a different model than MODEL.md §4 describes
#: (§2.2 step 4). Stricter than k3, which also computes moe_renormalize and
#: latent_moe_use_norm false and tie_word_embeddings true (MODEL.md §9).
_SUPPORTED = {
    "hidden_act": "situ", "moe_router_activation_func": "sigmoid", "mla_use_nope": True,
    "mla_use_output_gate": True, "moe_renormalize": True, "latent_moe_use_norm": True,
    "tie_word_embeddings": False, "num_expert_group": 1, "topk_group": 1,
    "moe_layer_freq": 1,
}

#: eps of q_a_layernorm and kv_a_layernorm (class default in the release), MODEL.md §4.6
#: step 2.
MLA_LORA_NORM_EPS = 1e-6
#: eps inside the KDA q/k L2 norm.
KDA_L2_EPS = 1e-6


def _typed(d, key, kind, where, problems):
    """d[key] checked to be of `kind` ('int', 'float', 'bool', 'str', 'intlist')."""
    if key not in d:
        problems.append(f"missing {where}{key}")
        return None
    v = d[key]
    ok = {
        "int": isinstance(v, int) and not isinstance(v, bool),
        "float": isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": isinstance(v, bool),
        "str": isinstance(v, str),
        "intlist": isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                               for x in v),
    }[kind]
    if not ok:
        problems.append(f"{where}{key} should be {kind}, got {v!r}")
        return None
    return float(v) if kind == "float" else v


class Config:
    """The text model's fields, validated. Attribute names follow config.json; the
    linear_attn_config fields become kda_head_dim, kda_num_heads, conv_kernel,
    gate_lower_bound, use_full_rank_gate and is_kda[i] (0-based layer i)."""

    def __init__(self, text):
        if not isinstance(text, dict):
            raise K3Error("config: text config is not an object")
        problems = []
        for kind, names in (("int", _INT_FIELDS), ("float", _FLOAT_FIELDS),
                            ("bool", _BOOL_FIELDS), ("str", _STR_FIELDS)):
            for k in names:
                setattr(self, k, _typed(text, k, kind, "", problems))
        lin = text.get("linear_attn_config")
        if not isinstance(lin, dict):
            problems.append("missing linear_attn_config (object)")
            lin = {}
        w = "linear_attn_config."
        self.kda_head_dim, self.kda_num_heads, self.conv_kernel = (
            _typed(lin, k, "int", w, problems) for k in _LINEAR_INT)
        self.gate_lower_bound = _typed(lin, "gate_lower_bound", "float", w, problems)
        self.use_full_rank_gate = _typed(lin, "use_full_rank_gate", "bool", w, problems)
        kda_layers, full_layers = (_typed(lin, k, "intlist", w, problems)
                                   for k in _LINEAR_LISTS)
        if problems:
            raise K3Error("config: " + "; ".join(problems))
        for k, want in _SUPPORTED.items():
            if getattr(self, k) != want:
                problems.append(f"{k} = {getattr(self, k)!r} unsupported (need {want!r})")
        if not self.use_full_rank_gate:
            problems.append("linear_attn_config.use_full_rank_gate must be true")
        self._check_ranges(kda_layers, full_layers, problems)
        if problems:
            raise K3Error("config: " + "; ".join(problems))
        kda = set(kda_layers)
        self.is_kda = [(i + 1) in kda for i in range(self.num_hidden_layers)]

    def _check_ranges(self, kda_layers, full_layers, problems):
        sizes = {k: getattr(self, k) for k in _INT_FIELDS if k != "first_k_dense_replace"}
        sizes.update({"linear_attn_config.head_dim": self.kda_head_dim,
                      "linear_attn_config.num_heads": self.kda_num_heads,
                      "linear_attn_config.short_conv_kernel_size": self.conv_kernel})
        problems.extend(f"{k} = {v} must be positive" for k, v in sizes.items() if v <= 0)
        L = self.num_hidden_layers
        if not 0 <= self.first_k_dense_replace <= L:
            problems.append(f"first_k_dense_replace {self.first_k_dense_replace} not in 0..{L}")
        if self.num_experts_per_token > self.num_experts:
            problems.append("num_experts_per_token > num_experts")
        for k in ("routed_expert_hidden_size", "moe_intermediate_size"):
            if getattr(self, k) % MXFP4_GROUP:
                problems.append(f"{k} = {getattr(self, k)} not divisible by {MXFP4_GROUP}")
        if self.kda_num_heads > self.kda_head_dim:
            problems.append("linear_attn_config.num_heads > head_dim (A_log is [head_dim])")
        for k in ("rms_norm_eps", "activation_situ_beta", "activation_situ_linear_beta"):
            if not getattr(self, k) > 0:
                problems.append(f"{k} must be > 0")
        for name, layers in (("kda_layers", kda_layers), ("full_attn_layers", full_layers)):
            bad = [x for x in layers if not 1 <= x <= L]
            if bad:
                problems.append(f"linear_attn_config.{name} {bad} outside 1..{L}")
            if len(set(layers)) != len(layers):
                problems.append(f"linear_attn_config.{name} has duplicates")
        if set(kda_layers) & set(full_layers) or \
                set(kda_layers) | set(full_layers) != set(range(1, L + 1)):
            problems.append("kda_layers and full_attn_layers must partition 1..num_hidden_layers")


def load_config(model_dir):
    """Config from MODEL_DIR/config.json: nested (text_config) or flat."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, dict):
        raise K3Error("config.json is not an object")
    if "text_config" in raw:
        if raw.get("tie_word_embeddings", False) is not False:
            raise K3Error("config: top-level tie_word_embeddings must be false")
        return Config(raw["text_config"])
    return Config(raw)


def expected_tensors(cfg):
    """MODEL.md §2.6: every text tensor name -> (dtype, shape) for this config."""
    H, V = cfg.hidden_size, cfg.vocab_size
    D, NH = cfg.kda_head_dim, cfg.kda_num_heads
    C = NH * D
    nq = cfg.num_attention_heads
    qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    lat, inter = cfg.routed_expert_hidden_size, cfg.moe_intermediate_size
    shared = inter * cfg.num_shared_experts
    g = MXFP4_GROUP
    t = {
        "language_model.model.embed_tokens.weight": ("BF16", (V, H)),
        "language_model.lm_head.weight": ("BF16", (V, H)),
        "language_model.model.norm.weight": ("BF16", (H,)),
        "language_model.model.output_attn_res_norm.weight": ("BF16", (H,)),
        "language_model.model.output_attn_res_proj.weight": ("BF16", (1, H)),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"language_model.model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm",
                  "mlp_res_norm"):
            t[p + n + ".weight"] = ("BF16", (H,))
        for n in ("self_attention_res_proj", "mlp_res_proj"):
            t[p + n + ".weight"] = ("BF16", (1, H))
        a = p + "self_attn."
        if cfg.is_kda[i]:
            for n in "qkvg":
                t[a + n + "_proj.weight"] = ("BF16", (C, H))
            for n in "qkv":
                t[a + n + "_conv1d.weight"] = ("F32", (C, 1, cfg.conv_kernel))
            t[a + "o_proj.weight"] = ("BF16", (H, C))
            t[a + "f_a_proj.weight"] = ("BF16", (D, H))
            t[a + "f_b_proj.weight"] = ("BF16", (C, D))
            t[a + "b_proj.weight"] = ("BF16", (NH, H))
            t[a + "A_log"] = ("F32", (D,))
            t[a + "dt_bias"] = ("F32", (C,))
            t[a + "o_norm.weight"] = ("F32", (D,))
        else:
            t[a + "q_a_proj.weight"] = ("BF16", (cfg.q_lora_rank, H))
            t[a + "q_a_layernorm.weight"] = ("BF16", (cfg.q_lora_rank,))
            t[a + "q_b_proj.weight"] = ("BF16", (nq * qk, cfg.q_lora_rank))
            t[a + "kv_a_proj_with_mqa.weight"] = (
                "BF16", (cfg.kv_lora_rank + cfg.qk_rope_head_dim, H))
            t[a + "kv_a_layernorm.weight"] = ("BF16", (cfg.kv_lora_rank,))
            t[a + "kv_b_proj.weight"] = (
                "BF16", (nq * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank))
            t[a + "g_proj.weight"] = ("BF16", (nq * cfg.v_head_dim, H))
            t[a + "o_proj.weight"] = ("BF16", (H, nq * cfg.v_head_dim))
        if i < cfg.first_k_dense_replace:
            t[p + "mlp.gate_proj.weight"] = ("BF16", (cfg.intermediate_size, H))
            t[p + "mlp.up_proj.weight"] = ("BF16", (cfg.intermediate_size, H))
            t[p + "mlp.down_proj.weight"] = ("BF16", (H, cfg.intermediate_size))
            continue
        m = p + "block_sparse_moe."
        t[m + "gate.weight"] = ("BF16", (cfg.num_experts, H))
        t[m + "gate.e_score_correction_bias"] = ("F32", (cfg.num_experts,))
        t[m + "routed_expert_down_proj.weight"] = ("BF16", (lat, H))
        t[m + "routed_expert_up_proj.weight"] = ("BF16", (H, lat))
        t[m + "routed_expert_norm.weight"] = ("BF16", (lat,))
        t[m + "shared_experts.gate_proj.weight"] = ("BF16", (shared, H))
        t[m + "shared_experts.up_proj.weight"] = ("BF16", (shared, H))
        t[m + "shared_experts.down_proj.weight"] = ("BF16", (H, shared))
        for e in range(cfg.num_experts):
            x = f"{m}experts.{e}."
            for w, (rows, cols) in (("w1", (inter, lat)), ("w3", (inter, lat)),
                                    ("w2", (lat, inter))):
                t[x + w + ".weight_packed"] = ("U8", (rows, cols // 2))
                t[x + w + ".weight_scale"] = ("U8", (rows, cols // g))
    return t


#: Tensor-name prefixes that are in the release's shards but not part of the text model.
SKIPPED_PREFIXES = ("vision_tower.", "mm_projector.")


def load_weights(model_dir, cfg):
    """All text tensors as float64 arrays, keyed by name without 'language_model.'.

    Routed experts are decoded and stacked per layer under
    'model.layers.{i}.block_sparse_moe.experts.{w1,w2,w3}' as [E, rows, cols].
    """
    with open(os.path.join(model_dir, "model.safetensors.index.json"), encoding="utf-8") as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    want = expected_tensors(cfg)
    missing = sorted(n for n in want if n not in weight_map)
    unexpected = sorted(n for n in weight_map
                        if n not in want and not n.startswith(SKIPPED_PREFIXES))
    if missing or unexpected:
        raise K3Error(f"tensors: {len(missing)} missing {missing[:8]}; "
                      f"{len(unexpected)} unexpected {unexpected[:8]}")
    shards = {}
    raw = {}
    for name, (dtype, shape) in want.items():
        fname = weight_map[name]
        if fname not in shards:
            shards[fname] = SafetensorsFile(os.path.join(model_dir, fname))
        shard = shards[fname]
        if name not in shard.entries:
            raise K3Error(f"{fname}: index names {name} but the shard lacks it")
        got_dtype, got_shape = shard.entries[name][:2]
        if (got_dtype, got_shape) != (dtype, shape):
            raise K3Error(f"{name}: stored {got_dtype}{list(got_shape)}, "
                          f"config needs {dtype}{list(shape)}")
        raw[name] = shard.read(name)
    w = {}
    experts = {}
    for name, arr in raw.items():
        short = name[len("language_model."):]
        if ".experts." in short:
            if short.endswith(".weight_packed"):
                base = short[:-len(".weight_packed")]
                layer_part, rest = base.split(".experts.")
                e, proj = rest.split(".")
                dec = mxfp4_decode(arr, raw[name[:-len("weight_packed")] + "weight_scale"])
                experts.setdefault((layer_part, proj), {})[int(e)] = dec
        elif arr.dtype == np.uint16:
            w[short] = bf16_decode(arr)
        else:
            w[short] = arr.astype(DTYPE)
    for (layer_part, proj), by_e in experts.items():
        w[f"{layer_part}.experts.{proj}"] = np.stack([by_e[e] for e in range(len(by_e))])
    return w


# ----------------------------------------------------------------------------
# Kernels (pure functions of float64 arrays)
# ----------------------------------------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rms(x, w, eps):
    """x / sqrt(mean(x^2 over the last dim) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def situ(gate, up, b1, b2):
    """SiTU(gate, up) = b1 tanh(gate/b1) sigmoid(gate) * b2 tanh(up/b2)."""
    return b1 * np.tanh(gate / b1) * sigmoid(gate) * (b2 * np.tanh(up / b2))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def attnres(sources, norm_w, proj, eps):
    """AttnRes over sources [S, ..., H] with norm weight [H] and proj [H] (or [1,H]).

    Returns (output [..., H], probs [S, ...]); the output mixes the RAW sources.
    """
    src = np.asarray(sources)
    key = src / np.sqrt(np.mean(src * src, axis=-1, keepdims=True) + eps)
    scores = np.sum(key * (norm_w * np.reshape(proj, -1)), axis=-1)
    probs = softmax(scores, axis=0)
    return np.sum(probs[..., None] * src, axis=0), probs


def router_topk(s, bias, k, scaling):
    """Pick the top k of s + bias (ties -> lower expert index) and weight them by the
    UNbiased s, renormalised (+1e-20) and times `scaling`.

    s [E] are the sigmoid router scores. Returns (indices [k] in selection order,
    weights [k]).
    """
    order = np.argsort(-(s + bias), kind="stable")
    idx = order[:k]
    chosen = s[idx]
    return idx, chosen / (np.sum(chosen) + 1e-20) * scaling


def situ_mlp(x, gate_w, up_w, down_w, b1, b2, trace=None):
    """Dense SiTU MLP: down_w SiTU(gate_w x, up_w x); x [T, in]."""
    g = x @ gate_w.T
    u = x @ up_w.T
    if trace:
        trace("situ", gate=g, up=u)
    return situ(g, u, b1, b2) @ down_w.T


def moe_block(x, w, top_k, scaling, eps, b1, b2, trace=None):
    """MODEL.md §4.8 MoE block on x [T, H] -> [T, H].

    w: 'gate' [E,H], 'bias' [E], 'down_latent' [Lat,H], 'w1','w3' [E,I,Lat] (gate/up),
    'w2' [E,Lat,I] (down), 'norm' [Lat], 'up_latent' [H,Lat], 'shared_gate',
    'shared_up' [S,H], 'shared_down' [H,S]. All float64 (experts already decoded).
    """
    s = sigmoid(x @ w["gate"].T)
    if trace:
        trace("router", s=s, bias=w["bias"], k=top_k)
    z = x @ w["down_latent"].T
    y = np.zeros_like(z)
    for t in range(x.shape[0]):
        idx, weights = router_topk(s[t], w["bias"], top_k, scaling)
        for e, c in zip(idx, weights):
            g = w["w1"][e] @ z[t]
            u = w["w3"][e] @ z[t]
            if trace:
                trace("situ", gate=g, up=u)
            y[t] += c * (w["w2"][e] @ situ(g, u, b1, b2))
    y = rms(y, w["norm"], eps)
    shared = situ_mlp(x, w["shared_gate"], w["shared_up"], w["shared_down"], b1, b2, trace)
    return y @ w["up_latent"].T + shared


# --- KDA -------------------------------------------------------------------

def causal_conv_silu(x, w):
    """Depthwise causal conv over time + SiLU. x [T, C], w [C, K]; tap K-1 multiplies
    the current input, tap 0 the input K-1 steps back; zero history."""
    T, K = x.shape[0], w.shape[1]
    xp = np.concatenate([np.zeros((K - 1, x.shape[1]), dtype=x.dtype), x])
    y = sum(w[:, j] * xp[j:j + T] for j in range(K))
    return silu(y)


def conv_step_silu(hist, x, w):
    """One conv step. hist [K-1, C] = previous K-1 inputs (oldest first), updated in
    place to include x [C]; returns SiLU(conv) [C]."""
    window = np.concatenate([hist, x[None]])
    hist[:] = window[1:]
    return silu(np.einsum("kc,ck->c", window, w))


def kda_alpha(graw, A_log, dt_bias, lower_bound, nh, d):
    """Per-channel decay alpha = exp(lb * sigmoid(exp(A_log[h]) * (graw + dt_bias))).
    graw [..., C] -> [..., NH, D]; A_log [D] is indexed by HEAD (entries >= NH unused)."""
    u = (graw + dt_bias).reshape(graw.shape[:-1] + (nh, d))
    return np.exp(lower_bound * sigmoid(np.exp(A_log[:nh])[:, None] * u))


def kda_qk_norm(q, k, d):
    """L2-normalise q and k over the head dim (eps 1e-6 inside the sqrt); q *= d^-0.5."""
    q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + KDA_L2_EPS) * d ** -0.5
    k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + KDA_L2_EPS)
    return q, k


def kda_sequence(q_pre, k_pre, v_pre, graw, beta_logits, conv_q, conv_k, conv_v,
                 A_log, dt_bias, lower_bound, nh, d, trace=None):
    """KDA over a whole sequence from zero state, in transition-matrix form.

    Inputs are after the projections: q_pre/k_pre/v_pre/graw [T, C] (C = nh*d,
    channel = h*d + c), beta_logits [T, NH], conv_* [C, K], A_log [D], dt_bias [C].
    Returns (o [T, NH, D] before o_norm, final S [NH, D(key), D(value)]).
    """
    T = q_pre.shape[0]
    q = causal_conv_silu(q_pre, conv_q).reshape(T, nh, d)
    k = causal_conv_silu(k_pre, conv_k).reshape(T, nh, d)
    v = causal_conv_silu(v_pre, conv_v).reshape(T, nh, d)
    q, k = kda_qk_norm(q, k, d)
    alpha = kda_alpha(graw, A_log, dt_bias, lower_bound, nh, d)
    beta = sigmoid(beta_logits)
    if trace:
        trace("kda", alpha=alpha, beta=beta)
    eye = np.eye(d, dtype=DTYPE)
    S = np.zeros((nh, d, d), dtype=DTYPE)
    o = np.empty((T, nh, d), dtype=DTYPE)
    for t in range(T):
        bk = beta[t][:, None] * k[t]                                # [NH, D]
        transition = eye - bk[:, :, None] * k[t][:, None, :]        # I - b k k^T
        S = transition @ (alpha[t][:, :, None] * S) + bk[:, :, None] * v[t][:, None, :]
        o[t] = np.einsum("hcv,hc->hv", S, q[t])
    return o, S


class KdaState:
    """Incremental KDA state of one layer: conv histories [3 (q,k,v), K-1, C] of the
    pre-conv inputs and the recurrent S [NH, D(key), D(value)]."""

    def __init__(self, c, k, nh, d):
        self.conv = np.zeros((3, k - 1, c), dtype=DTYPE)
        self.S = np.zeros((nh, d, d), dtype=DTYPE)


def kda_token(st, q_pre, k_pre, v_pre, graw, beta_logit, conv_q, conv_k, conv_v,
              A_log, dt_bias, lower_bound, nh, d):
    """One KDA token with rank-1 updates; st (KdaState) is advanced in place.

    Shapes as kda_sequence without T. Returns o [NH, D] before o_norm.
    """
    q = conv_step_silu(st.conv[0], q_pre, conv_q).reshape(nh, d)
    k = conv_step_silu(st.conv[1], k_pre, conv_k).reshape(nh, d)
    v = conv_step_silu(st.conv[2], v_pre, conv_v).reshape(nh, d)
    q, k = kda_qk_norm(q, k, d)
    alpha = kda_alpha(graw, A_log, dt_bias, lower_bound, nh, d)
    beta = sigmoid(beta_logit)
    S = alpha[:, :, None] * st.S                                  # decay row c by alpha_c
    recalled = np.einsum("hcv,hc->hv", S, k)                      # S^T k
    S = S + (beta[:, None] * k)[:, :, None] * (v - recalled)[:, None, :]
    st.S = S
    return np.einsum("hcv,hc->hv", S, q)                          # S^T q


# --- MLA -------------------------------------------------------------------

def mla_attention_expanded(q, k, v, scale, trace=None):
    """Causal softmax attention with a full score matrix.
    q, k [T, NH, dqk], v [T, NH, dv] -> [T, NH, dv]."""
    T = q.shape[0]
    scores = np.einsum("thd,shd->hts", q, k) * scale
    scores = np.where(np.tri(T, dtype=bool)[None], scores, -np.inf)
    probs = softmax(scores, axis=-1)
    if trace:
        trace("mla", probs=probs)
    return np.einsum("hts,shd->thd", probs, v)


def mla_attention_latent(q, cache, kv_b, nope, dv, scale):
    """One query against a latent cache, kv_b_proj absorbed.

    q [NH, nope+rope]; cache [P, R+rope] rows = [rms-normed latent (R) | raw rope];
    kv_b [NH*(nope+dv), R] (per head: nope key rows then dv value rows).
    Returns [NH, dv].
    """
    nh = q.shape[0]
    R = kv_b.shape[1]
    wkv = kv_b.reshape(nh, nope + dv, R)
    q_lat = np.einsum("hn,hnr->hr", q[:, :nope], wkv[:, :nope])          # [NH, R]
    scores = (q_lat @ cache[:, :R].T + q[:, nope:] @ cache[:, R:].T) * scale
    probs = softmax(scores, axis=-1)                                      # [NH, P]
    ctx = probs @ cache[:, :R]                                            # [NH, R]
    return np.einsum("hr,hvr->hv", ctx, wkv[:, nope:])


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

class State:
    """Incremental decoding state: per layer a KdaState or an MLA latent cache
    (list of rows [kv_lora_rank + qk_rope_head_dim])."""

    def __init__(self, cfg):
        C = cfg.kda_num_heads * cfg.kda_head_dim
        self.layers = [KdaState(C, cfg.conv_kernel, cfg.kda_num_heads, cfg.kda_head_dim)
                       if kda else [] for kda in cfg.is_kda]


class Model:
    """The K3 text model. `trace`, if given, is called as trace(kind, **arrays) with
    intermediate values for diagnostics: 'attnres', 'router', 'situ' in both modes,
    'kda' and 'mla' from the full-sequence attention kernels."""

    def __init__(self, model_dir, trace=None):
        self.cfg = load_config(model_dir)
        self.w = load_weights(model_dir, self.cfg)
        self.trace = trace
        #: Called as on_hidden(i, h) with layer i's output rows h [T, H] (the next
        #: layer's input), when set.
        self.on_hidden = None

    # --- shared pieces -------------------------------------------------------

    def _lw(self, i, name):
        return self.w[f"model.layers.{i}.{name}"]

    def _attnres(self, sources, norm, proj):
        out, probs = attnres(sources, self.w[norm], self.w[proj], self.cfg.rms_norm_eps)
        if self.trace:
            self.trace("attnres", probs=probs)
        return out

    def _mlp(self, i, x):
        c = self.cfg
        b1, b2 = c.activation_situ_beta, c.activation_situ_linear_beta
        if i < c.first_k_dense_replace:
            return situ_mlp(x, self._lw(i, "mlp.gate_proj.weight"),
                            self._lw(i, "mlp.up_proj.weight"),
                            self._lw(i, "mlp.down_proj.weight"), b1, b2, self.trace)
        p = f"model.layers.{i}.block_sparse_moe."
        w = {
            "gate": self.w[p + "gate.weight"], "bias": self.w[p + "gate.e_score_correction_bias"],
            "down_latent": self.w[p + "routed_expert_down_proj.weight"],
            "up_latent": self.w[p + "routed_expert_up_proj.weight"],
            "norm": self.w[p + "routed_expert_norm.weight"],
            "w1": self.w[p + "experts.w1"], "w2": self.w[p + "experts.w2"],
            "w3": self.w[p + "experts.w3"],
            "shared_gate": self.w[p + "shared_experts.gate_proj.weight"],
            "shared_up": self.w[p + "shared_experts.up_proj.weight"],
            "shared_down": self.w[p + "shared_experts.down_proj.weight"],
        }
        return moe_block(x, w, c.num_experts_per_token, c.routed_scaling_factor,
                         c.rms_norm_eps, b1, b2, self.trace)

    def _decoder_stack(self, h, attention):
        """Embeddings h [T, H] through all layers and the final AttnRes (MODEL.md §4.3,
        §4.9 step 1).
        attention(i, x) computes layer i's attention for the rows of x [T, H]."""
        c = self.cfg
        eps = c.rms_norm_eps
        bank = []
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            prefix = h
            if bank:
                h = self._attnres(bank + [prefix], p + "self_attention_res_norm.weight",
                                  p + "self_attention_res_proj.weight")
            if i % c.attn_res_block_size == 0:
                bank.append(prefix)
                prefix = None
            a = attention(i, rms(h, self._lw(i, "input_layernorm.weight"), eps))
            prefix = a if prefix is None else prefix + a
            h = self._attnres(bank + [prefix], p + "mlp_res_norm.weight",
                              p + "mlp_res_proj.weight")
            m = self._mlp(i, rms(h, self._lw(i, "post_attention_layernorm.weight"), eps))
            h = prefix + m
            if self.on_hidden:  # layer i's output rows (a drafter's taps, dspark_ref.py)
                self.on_hidden(i, h)
        return self._attnres(bank + [h], "model.output_attn_res_norm.weight",
                             "model.output_attn_res_proj.weight")

    def _logits(self, h):
        h = rms(h, self.w["model.norm.weight"], self.cfg.rms_norm_eps)
        return h @ self.w["lm_head.weight"].T

    def _embed(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.cfg.vocab_size):
            raise K3Error(f"token id out of range 0..{self.cfg.vocab_size - 1}")
        return self.w["model.embed_tokens.weight"][ids]

    def _kda_inputs(self, i, x):
        """Projections feeding KDA for rows x [T, H]."""
        a = f"model.layers.{i}.self_attn."
        graw = (x @ self.w[a + "f_a_proj.weight"].T) @ self.w[a + "f_b_proj.weight"].T
        return (x @ self.w[a + "q_proj.weight"].T, x @ self.w[a + "k_proj.weight"].T,
                x @ self.w[a + "v_proj.weight"].T, graw, x @ self.w[a + "b_proj.weight"].T)

    def _kda_params(self, i):
        a = f"model.layers.{i}.self_attn."
        c = self.cfg
        return ([self.w[a + n + "_conv1d.weight"][:, 0, :] for n in "qkv"]
                + [self.w[a + "A_log"], self.w[a + "dt_bias"], c.gate_lower_bound,
                   c.kda_num_heads, c.kda_head_dim])

    def _kda_output(self, i, x, o):
        """o [T, NH, D] -> o_proj(rms(o, o_norm) * sigmoid(W_g x)) [T, H]."""
        a = f"model.layers.{i}.self_attn."
        o = rms(o, self.w[a + "o_norm.weight"], self.cfg.rms_norm_eps)
        o = o.reshape(x.shape[0], -1) * sigmoid(x @ self.w[a + "g_proj.weight"].T)
        return o @ self.w[a + "o_proj.weight"].T

    def _mla_qc(self, i, x):
        """MLA projections for rows x [T, H]: q [T, NH, nope+rope] and the cache rows
        [T, R + rope] = [rms(latent, kv_a_layernorm, 1e-6) | raw rope]."""
        c = self.cfg
        a = f"model.layers.{i}.self_attn."
        cq = rms(x @ self.w[a + "q_a_proj.weight"].T, self.w[a + "q_a_layernorm.weight"],
                 MLA_LORA_NORM_EPS)
        q = (cq @ self.w[a + "q_b_proj.weight"].T).reshape(
            x.shape[0], c.num_attention_heads, -1)
        ckv = x @ self.w[a + "kv_a_proj_with_mqa.weight"].T
        R = c.kv_lora_rank
        latent = rms(ckv[:, :R], self.w[a + "kv_a_layernorm.weight"], MLA_LORA_NORM_EPS)
        return q, np.concatenate([latent, ckv[:, R:]], axis=1)

    def _mla_output(self, i, x, o):
        """o [T, NH, dv] -> o_proj(o * sigmoid(W_g x)) [T, H]."""
        a = f"model.layers.{i}.self_attn."
        o = o.reshape(x.shape[0], -1) * sigmoid(x @ self.w[a + "g_proj.weight"].T)
        return o @ self.w[a + "o_proj.weight"].T

    def _mla_scale(self):
        return (self.cfg.qk_nope_head_dim + self.cfg.qk_rope_head_dim) ** -0.5

    # --- (a) full sequence ---------------------------------------------------

    def _attention_full(self, i, x):
        c = self.cfg
        if c.is_kda[i]:
            o, _ = kda_sequence(*self._kda_inputs(i, x), *self._kda_params(i),
                                trace=self.trace)
            return self._kda_output(i, x, o)
        q, rows = self._mla_qc(i, x)
        T, nh, nope, R = x.shape[0], c.num_attention_heads, c.qk_nope_head_dim, c.kv_lora_rank
        kv = (rows[:, :R] @ self.w[f"model.layers.{i}.self_attn.kv_b_proj.weight"].T)
        kv = kv.reshape(T, nh, nope + c.v_head_dim)
        rope = np.broadcast_to(rows[:, None, R:], (T, nh, c.qk_rope_head_dim))
        k = np.concatenate([kv[:, :, :nope], rope], axis=2)
        o = mla_attention_expanded(q, k, kv[:, :, nope:], self._mla_scale(), self.trace)
        return self._mla_output(i, x, o)

    def forward_full(self, ids):
        """Logits [T, V] at every position of ids (from empty state)."""
        if len(ids) == 0:
            raise K3Error("empty sequence")
        return self._logits(self._decoder_stack(self._embed(ids), self._attention_full))

    # --- (b) incremental -----------------------------------------------------

    def new_state(self):
        return State(self.cfg)

    def step(self, state, token):
        """Feed one token; returns its logits [V] and advances state."""
        c = self.cfg

        def attention(i, x):
            if c.is_kda[i]:
                inputs = [arr[0] for arr in self._kda_inputs(i, x)]
                o = kda_token(state.layers[i], *inputs, *self._kda_params(i))
                return self._kda_output(i, x, o[None])
            q, row = self._mla_qc(i, x)
            state.layers[i].append(row[0])
            o = mla_attention_latent(
                q[0], np.array(state.layers[i]),
                self.w[f"model.layers.{i}.self_attn.kv_b_proj.weight"],
                c.qk_nope_head_dim, c.v_head_dim, self._mla_scale())
            return self._mla_output(i, x, o[None])

        return self._logits(self._decoder_stack(self._embed([token]), attention))[0]


# ----------------------------------------------------------------------------
# Generation and CLI
# ----------------------------------------------------------------------------

def greedy(logits):
    """argmax; ties -> lowest id."""
    return int(np.argmax(logits))


_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z):
    """splitmix64's finalizer on a 64-bit integer."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def sample_bits53(seed, position):
    """The 53-bit integer k of the sampler's uniform u = k / 2^53 for (seed, position),
    as include/k3/sample.h defines it: key = mix(seed + G), bits = mix(key +
    (position + 1) G), k = bits >> 11, all modulo 2^64."""
    key = _mix64((seed + _GOLDEN) & _M64)
    return _mix64((key + (position + 1) * _GOLDEN) & _M64) >> 11


def sample(logits, recent, seed, position, temperature, top_k=0, top_p=1.0, min_p=0.0,
           repeat_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0):
    """The token include/k3/sample.h chooses, in float64 (k3 uses float weights summed
    in double). Returns (token, margin): margin is the smallest relative distance of a
    threshold decision (top-p mass, min-p ratio, the draw against a cumulative weight)
    from its threshold, so the caller knows whether float rounding could flip it."""
    x = np.array(logits, dtype=np.float64)
    window = [int(r) for r in recent if 0 <= r < len(x)]
    for i in sorted(set(window)):
        # The penalties of sample.h step 1: repeat, then frequency (per occurrence) and presence.
        x[i] = x[i] / repeat_penalty if x[i] > 0 else x[i] * repeat_penalty
        x[i] -= window.count(i) * frequency_penalty + presence_penalty
    if temperature == 0:
        return greedy(x), np.inf
    order = sorted(range(len(x)), key=lambda i: (-x[i], i))
    n = len(order) if top_k <= 0 else min(top_k, len(order))
    margin = np.inf
    if top_p < 1.0:
        w = np.exp(x[order[:n]] - x[order[0]])
        mass, total = np.cumsum(w), np.sum(w)
        cut = next((i + 1 for i in range(n) if mass[i] >= top_p * total), n)
        margin = min(margin, np.min(np.abs(mass[:cut] - top_p * total)) / total)
        n = cut
    if min_p > 0.0:
        ratio = np.exp(x[order[1:n]] - x[order[0]])
        keep = 1 + next((i for i in range(n - 1) if ratio[i] < min_p), n - 1)
        if n > 1:
            margin = min(margin, np.min(np.abs(ratio[:keep] - min_p)))
        n = keep
    w = np.exp((x[order[:n]] - x[order[0]]) / temperature)
    edges = np.cumsum(w)[:-1] / np.sum(w)
    u = sample_bits53(seed, position) / 2.0 ** 53
    pick = next((i for i in range(n - 1) if u < edges[i]), n - 1)
    if n > 1:
        margin = min(margin, np.min(np.abs(edges - u)))
    return order[pick], margin


def generate(model, prompt, n, full=False):
    """Greedy generation of n tokens. Returns (generated ids, prompt logits [T, V],
    generation logits [n, V] where row j chose generated token j)."""
    if full:
        prompt_logits = model.forward_full(prompt)
        step_logits = [prompt_logits[-1]]
    else:
        state = model.new_state()
        prompt_logits = np.array([model.step(state, t) for t in prompt])
        step_logits = [prompt_logits[-1]]
    out = []
    for j in range(n):
        out.append(greedy(step_logits[-1]))
        if j + 1 == n:
            break
        if full:
            step_logits.append(model.forward_full(list(prompt) + out)[-1])
        else:
            step_logits.append(model.step(state, out[-1]))
    return out, prompt_logits, np.array(step_logits[:n]).reshape(n, model.cfg.vocab_size)


def _write_f32(path, rows):
    np.asarray(rows, dtype="<f4").tofile(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference of the Kimi K3 text model")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--gen", type=int, required=True, help="tokens to generate")
    ap.add_argument("--dump-logits", help="float32 rows, one per generated token")
    ap.add_argument("--dump-prompt-logits", help="float32 rows, one per prompt token")
    ap.add_argument("--full", action="store_true",
                    help="recompute the whole sequence each step (no incremental state)")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                    help="float32: a single-precision yardstick, not the reference (see DTYPE)")
    args = ap.parse_args(argv)
    global DTYPE
    DTYPE = np.dtype(args.dtype).type
    try:
        prompt = [int(x) for x in args.ids.split(",") if x.strip()]
    except ValueError:
        ap.error("--ids must be comma-separated integers")
    if not prompt:
        ap.error("--ids is empty")
    if args.gen < 0:
        ap.error("--gen must be >= 0")
    try:
        model = Model(args.model_dir)
        ids, prompt_logits, gen_logits = generate(model, prompt, args.gen, args.full)
    except (K3Error, OSError, ValueError, KeyError) as e:
        print(f"k3ref: {e}", file=sys.stderr)
        return 1
    if args.dump_logits:
        _write_f32(args.dump_logits, gen_logits)
    if args.dump_prompt_logits:
        _write_f32(args.dump_prompt_logits, prompt_logits)
    print(",".join(str(t) for t in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
