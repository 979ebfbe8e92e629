#!/usr/bin/python3
"""make_checkpoint: random Kimi K3 checkpoints in exactly the release's on-disk format.

  /usr/bin/python3 tools/make_checkpoint.py OUT_DIR --preset NAME [--seed S]
      [--vocab V] [--shards N] [--check] [--vision]

Writes OUT_DIR/config.json (nested like the release: text fields under text_config),
model.safetensors.index.json, N shards model-%05d-of-%06d.safetensors (default 3) and
generation_config.json. Tensors follow MODEL.md §2.6 (names, dtypes, shapes); a few
vision_tower.* / mm_projector.* tensors are mixed in for the engine to skip, and odd-sized
ones make many tensor data offsets odd. Special ids: bos = V-256, eos = V-254, pad = V-1.

Weights are NOT a generic scaled-normal init: every projection is scaled so that each
path of the model matters (router bias flips picks, both SiTU caps engage, KDA decays
and betas spread over (0,1), AttnRes and MLA softmaxes are far from uniform, logits
spread widely). --check runs the reference (tools/k3ref.py) on a short prompt, prints
one diagnostic line per property and exits 1 if any does not hold.

The shard layout is planned from the tensor shapes first and each tensor is written
into place as soon as it is drawn (large ones in blocks of rows), so memory stays near
one block whatever the checkpoint's size. The `slice` preset has the release's real
widths with 4 layers and 32 experts (~7.6 GB, for benchmarks/bench.sh); it draws its
normals in float32 to be generated in minutes, and has no --check (the float64
reference would need hours on it).

--vision replaces the skipped stand-in vision tensors by the release's complete vision
tower and projector (docs/VISION.md §2.2: names, BF16, shapes) at the small dims of
VISION_DIMS, and vision_config by those dims, for tools/k3vision_ref.py. The learned
position table is 6 x 8, not square and not a grid the tests use, so its interpolation
always runs. Without --vision the output is the same, byte for byte, as before the
option existed.
"""

import argparse
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    # The first thing a new user may meet: say what is missing and how to
    # get it, not a traceback (exit 2: this interpreter cannot run it).
    sys.stderr.write(
        "make_checkpoint.py: numpy is missing for %s (%s).\n"
        "Run it with Debian's /usr/bin/python3 after `sudo apt-get install python3-numpy`\n"
        "(or `sh scripts/deps.sh demo`), or install numpy for this interpreter.\n"
        % (sys.executable, sys.version.split()[0]))
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402
import k3vision_ref  # noqa: E402

# ----------------------------------------------------------------------------
# Presets: text dims. kda_layers are ONE-based; the rest of 1..L is MLA.
# ----------------------------------------------------------------------------

_COMMON = dict(rms_norm_eps=1e-5, activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
               gate_lower_bound=-5.0, routed_scaling_factor=1.0, first_k_dense_replace=1,
               short_conv_kernel_size=4)

PRESETS = {
    "tiny-a": dict(_COMMON, vocab_size=512, hidden_size=64, num_hidden_layers=6,
                   kda_layers=[1, 2, 4, 5], kda_num_heads=4, kda_head_dim=16,
                   num_attention_heads=4, qk_nope_head_dim=16, qk_rope_head_dim=8,
                   v_head_dim=16, q_lora_rank=32, kv_lora_rank=32, num_experts=16,
                   num_experts_per_token=4, num_shared_experts=2, moe_intermediate_size=32,
                   routed_expert_hidden_size=64, intermediate_size=96, attn_res_block_size=2),
    # tiny-b moves every free number away from tiny-a and from the release's values
    # (eps, SiTU betas, gate bound, scaling factor, two dense layers) so that nothing
    # hard-coded survives.
    "tiny-b": dict(_COMMON, vocab_size=777, hidden_size=80, num_hidden_layers=7,
                   kda_layers=[1, 3, 4, 6], kda_num_heads=5, kda_head_dim=16,
                   num_attention_heads=3, qk_nope_head_dim=24, qk_rope_head_dim=8,
                   v_head_dim=20, q_lora_rank=48, kv_lora_rank=40, num_experts=12,
                   num_experts_per_token=3, num_shared_experts=1, moe_intermediate_size=64,
                   routed_expert_hidden_size=96, intermediate_size=112, attn_res_block_size=3,
                   first_k_dense_replace=2, rms_norm_eps=1e-6, activation_situ_beta=3.0,
                   activation_situ_linear_beta=20.0, gate_lower_bound=-4.0,
                   routed_scaling_factor=2.5),
    "moe64": dict(_COMMON, vocab_size=1024, hidden_size=64, num_hidden_layers=8,
                  kda_layers=[1, 2, 3, 5, 6, 7], kda_num_heads=4, kda_head_dim=16,
                  num_attention_heads=4, qk_nope_head_dim=16, qk_rope_head_dim=8,
                  v_head_dim=16, q_lora_rank=32, kv_lora_rank=32, num_experts=64,
                  num_experts_per_token=8, num_shared_experts=2, moe_intermediate_size=32,
                  routed_expert_hidden_size=64, intermediate_size=96, attn_res_block_size=3),
    "demo": dict(_COMMON, vocab_size=4096, hidden_size=128, num_hidden_layers=8,
                 kda_layers=[1, 2, 3, 5, 6, 7], kda_num_heads=4, kda_head_dim=32,
                 num_attention_heads=4, qk_nope_head_dim=32, qk_rope_head_dim=16,
                 v_head_dim=32, q_lora_rank=64, kv_lora_rank=64, num_experts=32,
                 num_experts_per_token=4, num_shared_experts=2, moe_intermediate_size=64,
                 routed_expert_hidden_size=128, intermediate_size=256, attn_res_block_size=3),
    # Experts big enough that keeping them all resident costs ~200 MB while the
    # rest of the model is small: the model for memory-ceiling tests.
    "wide-moe": dict(_COMMON, vocab_size=2048, hidden_size=256, num_hidden_layers=6,
                     kda_layers=[1, 2, 4, 5], kda_num_heads=4, kda_head_dim=64,
                     num_attention_heads=4, qk_nope_head_dim=32, qk_rope_head_dim=16,
                     v_head_dim=32, q_lora_rank=64, kv_lora_rank=64, num_experts=96,
                     num_experts_per_token=8, num_shared_experts=1, moe_intermediate_size=512,
                     routed_expert_hidden_size=512, intermediate_size=256,
                     attn_res_block_size=2, float32_draws=True),
    # The release's widths (MODEL.md §1.1) on 4 layers (KDA, KDA, KDA, MLA) and 32
    # experts: a benchmark model whose every matrix has its real shape.
    "slice": dict(_COMMON, vocab_size=8192, hidden_size=7168, num_hidden_layers=4,
                  kda_layers=[1, 2, 3], kda_num_heads=96, kda_head_dim=128,
                  num_attention_heads=96, qk_nope_head_dim=128, qk_rope_head_dim=64,
                  v_head_dim=128, q_lora_rank=1536, kv_lora_rank=512, num_experts=32,
                  num_experts_per_token=16, num_shared_experts=2, moe_intermediate_size=3072,
                  routed_expert_hidden_size=3584, intermediate_size=33792,
                  attn_res_block_size=12, float32_draws=True),
}

#: --vision: the vision tower at small dims (docs/VISION.md §1.1). Every width differs
#: from the others and from the release's; the head width 12 is a multiple of 4 (2D
#: RoPE), qkv_hidden_size differs from vt_hidden_size, the position table is 6 x 8 (not
#: square) and allows 3 frames.
VISION_DIMS = dict(patch_size=3, vt_hidden_size=24, vt_num_attention_heads=3,
                   qkv_hidden_size=36, vt_intermediate_size=40, vt_num_hidden_layers=2,
                   init_pos_emb_height=6, init_pos_emb_width=8, init_pos_emb_time=3)


def vision_config(p):
    """vision_config for --vision: the release's fields with VISION_DIMS (text width H)."""
    v = {
        "_attn_implementation": "flash_attention_2", "activation_func": "gelu_pytorch_tanh",
        "attn_bias": False, "linear_bias": False, "merge_kernel_size": [2, 2],
        "merge_type": "sd2_tpool", "mlp_type": "mlp2", "mm_projector_type": "patchmergerv2",
        "norm_type": "rmsnorm", "patch_embed_proj_bias": False,
        "pos_emb_interpolation_mode": "bilinear", "pos_emb_type": "divided_fixed",
        "projector_hidden_act": "gelu", "projector_ln_eps": 1e-05,
        "text_hidden_size": p["hidden_size"], "mm_hidden_size": VISION_DIMS["vt_hidden_size"],
    }
    v.update(VISION_DIMS)
    return v


def init_vision_tensor(name, shape, rng):
    """float64 values of vision tensor `name`, scaled so that every step of
    docs/VISION.md §5 matters: position rows as large as the patch signal, attention far
    from uniform, GELU inputs well into both tails, RMSNorm inputs small enough that
    eps 2^-7 is visible."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if name.endswith("norm0.weight") or name.endswith("norm1.weight") \
            or name.endswith("final_layernorm.weight") or name.endswith("post_norm.weight"):
        return _norm_weight(rng, shape)
    if name.endswith("pos_emb.weight"):
        return _normal(rng, shape, 0.5)
    if name.endswith("patch_embed.proj.weight"):
        return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
    if name.endswith("wqkv.weight"):                   # q, k std ~2: peaked softmax
        w = _normal(rng, shape, 2.0 / np.sqrt(fan_in))
        w[2 * shape[0] // 3:] *= 0.5
        return w
    if name.endswith("mlp.fc0.weight") or name.endswith("proj.0.weight"):
        return _normal(rng, shape, 2.0 / np.sqrt(fan_in))
    if name.endswith("wo.weight"):                     # attention branch ~0.5
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))
    if name.endswith("mlp.fc1.weight"):                # MLP branch ~1: GELU's form shows
        return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
    if name.endswith("proj.2.weight"):
        return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
    raise ValueError(f"no init rule for {name}")


def plan_vision_shards(shards, vision_specs):
    """--vision: the vision tensors (name -> (dtype, shape)) appended to the shards the
    release keeps them in, scaled down: mm_projector.* in the next-to-last shard,
    vision_tower.* in the last (one shard: both there). Returns the extras list
    (name, draw) in that order."""
    extras = []
    for name, (dtype, shape) in vision_specs.items():
        s = -1 if name.startswith("vision_tower.") or len(shards) == 1 else -2
        shards[s].append((name, dtype, tuple(shape)))
        extras.append((name, lambda rng, name=name, shape=tuple(shape):
                       bf16_encode(init_vision_tensor(name, shape, rng)).tobytes()))
    return extras


def random_preset(seed):
    """Dims drawn from `seed` anywhere the config allows (small, so the float64
    reference stays fast): odd widths that are not multiples of 16, one or
    several KDA and MLA heads, zero to two dense layers, one or two shared experts,
    top-1 up to top-8, blocks of 1 to 4 layers. The layer map interleaves KDA
    and MLA at random, with the last layer MLA and at least two MLA layers."""
    r = np.random.default_rng(1_000_003 * seed + 7)
    L = int(r.integers(3, 10))
    mla = {L} | {int(x) for x in r.choice(np.arange(1, L), size=int(r.integers(1, max(2, L // 2))),
                                          replace=False)}
    D = int(r.choice([8, 12, 16, 20, 24]))
    E = int(r.integers(4, 41))
    moe_inter = int(r.choice([32, 64]))
    return dict(
        vocab_size=int(r.integers(512, 1501)), hidden_size=int(r.integers(20, 101)),
        num_hidden_layers=L, kda_layers=sorted(set(range(1, L + 1)) - mla),
        kda_num_heads=int(r.integers(1, min(6, D) + 1)), kda_head_dim=D,
        num_attention_heads=int(r.integers(1, 6)), qk_nope_head_dim=int(r.integers(4, 25)),
        qk_rope_head_dim=int(r.integers(2, 13)), v_head_dim=int(r.integers(4, 25)),
        q_lora_rank=int(r.integers(8, 49)), kv_lora_rank=int(r.integers(8, 49)),
        num_experts=E, num_experts_per_token=int(r.integers(1, min(8, E) + 1)),
        num_shared_experts=int(r.integers(1, 3)), moe_intermediate_size=moe_inter,
        routed_expert_hidden_size=int(r.choice([32, 64, 96])),
        intermediate_size=int(r.integers(16, 129)),
        attn_res_block_size=int(r.integers(1, min(4, L - 1) + 1)),
        first_k_dense_replace=int(r.integers(0, min(2, L - 1) + 1)),
        rms_norm_eps=float(r.choice([1e-5, 1e-6])),
        activation_situ_beta=float(r.choice([2.0, 3.0, 4.0, 6.0])),
        activation_situ_linear_beta=float(r.choice([10.0, 20.0, 25.0, 30.0])),
        gate_lower_bound=float(r.choice([-6.0, -5.0, -4.0, -3.0])),
        routed_scaling_factor=float(r.choice([1.0, 2.5])), short_conv_kernel_size=4)


#: Presets too large for the float64 reference of --check.
NO_CHECK = {"slice"}


# ----------------------------------------------------------------------------
# Config files
# ----------------------------------------------------------------------------

def _quantization_config():
    """The release's quantization_config (compressed-tensors MXFP4, experts only)."""
    weights = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": 32,
               "num_bits": 4, "observer": "minmax", "observer_kwargs": {},
               "scale_dtype": "torch.uint8", "strategy": "group", "symmetric": True,
               "type": "float", "zp_dtype": None}
    return {
        "config_groups": {"group_0": {"format": "mxfp4-pack-quantized",
                                      "input_activations": None, "output_activations": None,
                                      "targets": ["Linear"], "weights": weights}},
        "format": "mxfp4-pack-quantized", "global_compression_ratio": None,
        "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*",
                   "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
                   "re:.*vision_tower.*", "re:.*mm_projector.*"],
        "kv_cache_scheme": None, "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }


def special_ids(vocab):
    """bos/eos/pad mirroring 163584/163586/163839 relative to 163840."""
    if vocab < 512:
        raise SystemExit("make_checkpoint: --vocab must be >= 512")
    return vocab - 256, vocab - 254, vocab - 1


def build_config(p):
    """(config.json dict, text_config dict) for preset dims p, every field the release has."""
    V, L = p["vocab_size"], p["num_hidden_layers"]
    bos, eos, pad = special_ids(V)
    kda = sorted(p["kda_layers"])
    text = {
        "_name_or_path": "", "add_cross_attention": False,
        "architectures": ["KimiLinearForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiLinearConfig",
                     "AutoModel": "modeling_kimi_linear.KimiLinearModel",
                     "AutoModelForCausalLM": "modeling_kimi_linear.KimiLinearForCausalLM"},
        "bad_words_ids": None, "begin_suppress_tokens": None, "bos_token_id": bos,
        "chunk_size_feed_forward": 0, "cross_attention_hidden_size": None,
        "decoder_start_token_id": None, "diversity_penalty": 0.0, "do_sample": False,
        "dtype": "bfloat16", "early_stopping": False, "encoder_no_repeat_ngram_size": 0,
        "eos_token_id": eos, "exponential_decay_length_penalty": None,
        "finetuning_task": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
        "hidden_act": "situ", "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "initializer_range": 0.02, "is_decoder": False, "is_encoder_decoder": False,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "latent_moe_use_norm": True,
        "length_penalty": 1.0,
        "linear_attn_config": {
            "full_attn_layers": [i for i in range(1, L + 1) if i not in kda],
            "gate_lower_bound": p["gate_lower_bound"], "head_dim": p["kda_head_dim"],
            "kda_layers": kda, "num_heads": p["kda_num_heads"],
            "short_conv_kernel_size": p["short_conv_kernel_size"], "use_full_rank_gate": True},
        "max_length": 20, "max_position_embeddings": 1048576, "min_length": 0,
        "mla_use_nope": True, "mla_use_output_gate": True, "model_type": "kimi_linear",
        "moe_layer_freq": 1, "moe_renormalize": True, "moe_router_activation_func": "sigmoid",
        "no_repeat_ngram_size": 0, "num_beam_groups": 1, "num_beams": 1,
        "num_expert_group": 1, "num_key_value_heads": p["num_attention_heads"],
        "num_nextn_predict_layers": 0, "num_return_sequences": 1, "output_attentions": False,
        "output_hidden_states": False, "output_scores": False, "pad_token_id": pad,
        "prefix": None, "problem_type": None, "pruned_heads": {},
        "quantization_config": _quantization_config(), "remove_invalid_values": False,
        "repetition_penalty": 1.0, "return_dict": True, "return_dict_in_generate": False,
        "sep_token_id": None, "suppress_tokens": None, "task_specific_params": None,
        "temperature": 1.0, "tf_legacy_loss": False, "tie_encoder_decoder": False,
        "tie_word_embeddings": False, "tokenizer_class": None, "top_k": 50, "top_p": 1.0,
        "topk_group": 1, "topk_method": "noaux_tc", "torchscript": False,
        "transformers_version": "4.56.2", "typical_p": 1.0, "use_bfloat16": False,
        "use_cache": True, "use_grouped_topk": True,
    }
    for k in ("activation_situ_beta", "activation_situ_linear_beta", "attn_res_block_size",
              "first_k_dense_replace", "hidden_size", "intermediate_size", "kv_lora_rank",
              "moe_intermediate_size", "num_attention_heads", "num_experts",
              "num_experts_per_token", "num_hidden_layers", "num_shared_experts",
              "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "rms_norm_eps",
              "routed_expert_hidden_size", "routed_scaling_factor", "v_head_dim",
              "vocab_size"):
        text[k] = p[k]
    vision = {
        "_attn_implementation": "flash_attention_2", "activation_func": "gelu_pytorch_tanh",
        "attn_bias": False, "init_pos_emb_height": 4, "init_pos_emb_time": 2,
        "init_pos_emb_width": 4, "linear_bias": False, "merge_kernel_size": [2, 2],
        "merge_type": "sd2_tpool", "mlp_type": "mlp2", "mm_hidden_size": 8,
        "mm_projector_type": "patchmergerv2", "norm_type": "rmsnorm",
        "patch_embed_proj_bias": False, "patch_size": 2, "pos_emb_interpolation_mode": "bilinear",
        "pos_emb_type": "divided_fixed", "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-05, "qkv_hidden_size": 24, "text_hidden_size": p["hidden_size"],
        "vt_hidden_size": 8, "vt_intermediate_size": 16, "vt_num_attention_heads": 2,
        "vt_num_hidden_layers": 1,
    }
    top = {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiK3Config",
                     "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
                     "AutoModelForCausalLM": "modeling_kimi_k3.KimiK3ForConditionalGeneration"},
        "bos_token_id": bos, "dtype": "bfloat16", "eos_token_id": eos, "ignore_index": -100,
        "image_placeholder": "<|kimi_image_placeholder|>",
        "media_placeholder_token_id": V - 235, "model_type": "kimi_k3", "pad_token_id": pad,
        "text_config": text, "tie_word_embeddings": False, "vision_config": vision,
    }
    return top, text


# ----------------------------------------------------------------------------
# Encoders
# ----------------------------------------------------------------------------

def bf16_encode(x):
    """float values -> uint16 BF16 bits: round the float32 value to nearest, ties even.
    (In uint32 a sum can wrap only for NaN bit patterns, and wrapping changes nothing
    that survives the final cut to 16 bits.)"""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


#: Midpoints between consecutive E2M1 magnitudes.
_E2M1_MID = (k3ref.E2M1_GRID[1:] + k3ref.E2M1_GRID[:-1]) / 2


def _e2m1_code_table():
    """Magnitude code by 2*floor(q) + (q is whole), for q = 4 * value / 2^exponent.

    4x the midpoints are the integers 1, 3, 5, 7, 10, 14, 20 and q < 28 (the group max
    is below 7 * 2^exponent), so floor(q) and whether q is whole tell how many
    midpoints lie below the value and whether it sits on one (a tie, which goes to the
    even code). One table lookup instead of a search per element.
    """
    mid4 = (4 * _E2M1_MID).astype(np.int64)
    table = np.zeros(64, dtype=np.uint8)
    for i in range(32):
        below = np.count_nonzero(mid4 < i)
        table[2 * i] = np.count_nonzero(mid4 <= i)              # q in (i, i+1)
        table[2 * i + 1] = below + (i in mid4 and below % 2 == 1)  # q == i
    return table


_E2M1_CODE = _e2m1_code_table()


def mxfp4_quantize(w):
    """w [rows, n] (n % 32 == 0) -> (packed [rows, n/2], scale [rows, n/32]) uint8.

    Per group of 32: exponent = floor(log2(roundpow2(amax))) - 2, where roundpow2 rounds
    an amax whose mantissa (in [1,2)) is >= 1.75 up to the next power of two; each
    value/2^exponent goes to the nearest E2M1 magnitude (ties to the even code), clipped
    to 6. An all-zero group gets exponent 0. float32 input is worked on in float32 (same
    codes: the scaling by a power of two is exact in either width, and 3x faster);
    anything else in float64.
    """
    w = np.asarray(w)
    if w.dtype != np.float32:
        w = w.astype(np.float64)
    rows, n = w.shape
    g = w.reshape(rows, n // 32, 32)
    amax = np.abs(g).max(axis=-1)
    mant, exp = np.frexp(amax.astype(np.float64))    # amax = mant * 2^exp, mant in [0.5, 1)
    e = exp - 1 + (2 * mant >= 1.75) - 2
    e = np.where(amax == 0, 0, e)
    if (e < -127).any() or (e > 127).any():
        raise ValueError("mxfp4_quantize: group scale out of E8M0 range")
    q = np.abs(g) * np.ldexp(4.0, -e).astype(w.dtype)[..., None]
    whole = q.astype(np.uint8)                         # floor(q), then 2*floor + is-whole
    code = _E2M1_CODE[(whole << 1) | (q == whole)]
    nib = (code | np.where(g < 0, 8, 0).astype(np.uint8)).reshape(rows, n)
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return packed, (e + 127).astype(np.uint8)


# ----------------------------------------------------------------------------
# Weights: deliberate scales (a unit-RMS input gives the stated output std)
# ----------------------------------------------------------------------------

def _normal(rng, shape, std):
    return rng.standard_normal(shape) * std


def _norm_weight(rng, shape):
    return 1.0 + _normal(rng, shape, 0.15)


def init_tensor(name, shape, p, rng):
    """float64 values for text tensor `name` of `shape` under preset dims p."""
    H = p["hidden_size"]
    b1, b2 = p["activation_situ_beta"], p["activation_situ_linear_beta"]
    fan_in = shape[-1]
    if name.endswith("norm.weight"):                   # every RMSNorm weight incl. o_norm
        return _norm_weight(rng, shape)
    if name.endswith("_res_proj.weight"):              # AttnRes scores with std ~2
        return _normal(rng, shape, 2.0 / np.sqrt(H))
    if name.endswith("embed_tokens.weight"):
        return _normal(rng, shape, 1.0)
    if name.endswith("lm_head.weight"):                # logits std ~2
        return _normal(rng, shape, 2.0 / np.sqrt(H))
    if ".experts." in name or ".mlp." in name or "shared_experts." in name:
        # SiTU: gate std 0.75*b1 (the b1 cap engages), up std 0.6*b2 (tanh(up/b2) is
        # visibly nonlinear); down brings the product (rms ~0.6*b1*b2/4) back to ~1.
        if name.endswith(("w1", "gate_proj.weight")):
            return _normal(rng, shape, 0.75 * b1 / np.sqrt(fan_in))
        if name.endswith(("w3", "up_proj.weight")):
            return _normal(rng, shape, 0.6 * b2 / np.sqrt(fan_in))
        return _normal(rng, shape, 1.0 / (0.15 * b1 * b2 * np.sqrt(fan_in)))
    if name.endswith("gate.weight"):                   # router: sigmoid scores spread
        return _normal(rng, shape, 1.5 / np.sqrt(H))
    if name.endswith("e_score_correction_bias"):       # comparable to the score gaps,
        return _normal(rng, shape, 1.2 / shape[0])     # which shrink as experts grow
    if name.endswith(("routed_expert_down_proj.weight", "routed_expert_up_proj.weight")):
        return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
    if "self_attn." not in name:
        raise ValueError(f"no init rule for {name}")
    return _init_attention(name.split("self_attn.")[-1], shape, p, rng)


def _init_attention(leaf, shape, p, rng):
    fan_in = shape[-1]
    if leaf in ("q_proj.weight", "k_proj.weight", "v_proj.weight", "f_a_proj.weight",
                "q_a_proj.weight"):
        return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
    if leaf.endswith("_conv1d.weight"):
        return _normal(rng, shape, 0.6)
    if leaf == "f_b_proj.weight":                      # graw std ~1.2
        return _normal(rng, shape, 1.2 / np.sqrt(fan_in))
    if leaf in ("b_proj.weight", "g_proj.weight"):     # sigmoid inputs std ~2
        return _normal(rng, shape, 2.0 / np.sqrt(fan_in))
    if leaf == "o_proj.weight":
        return _normal(rng, shape, 1.5 / np.sqrt(fan_in))
    if leaf == "A_log":                                # real for the first NH entries
        a = np.zeros(shape)
        nh = p["kda_num_heads"]
        a[:nh] = np.log(rng.uniform(0.7, 1.5, nh))
        return a
    if leaf == "dt_bias":                              # centres the gate's sigmoid near -1.5
        return -1.5 + _normal(rng, shape, 0.5)
    if leaf == "q_b_proj.weight":                      # q std ~1.5
        return _normal(rng, shape, 1.5 / np.sqrt(fan_in))
    if leaf == "kv_a_proj_with_mqa.weight":            # latent part is normed; rope raw ~1.5
        w = _normal(rng, shape, 1.0 / np.sqrt(fan_in))
        w[p["kv_lora_rank"]:] *= 1.5
        return w
    if leaf == "kv_b_proj.weight":                     # k_nope std ~1.5, v std ~1
        nope, dv = p["qk_nope_head_dim"], p["v_head_dim"]
        w = _normal(rng, (p["num_attention_heads"], nope + dv, fan_in), 1.0 / np.sqrt(fan_in))
        w[:, :nope] *= 1.5
        return w.reshape(shape)
    raise ValueError(f"no init rule for self_attn.{leaf}")


def encode_tensor(name, dtype, shape, p, rng):
    """Stored bytes of one text tensor (expert packed/scale pairs share one draw)."""
    values = init_tensor(name, shape, p, rng)
    if dtype == "BF16":
        return bf16_encode(values).tobytes()
    return np.asarray(values, dtype="<f4").tobytes()


#: Tensors above this many elements are drawn in blocks of rows, to bound memory.
ROW_BLOCK_ELEMENTS = 1 << 24
#: Init rules that look at the whole tensor (never block these).
_WHOLE_TENSOR_RULES = ("A_log", "kv_b_proj.weight", "kv_a_proj_with_mqa.weight")


def _row_blocks(name, shape):
    """[(r0, r1)] covering the rows of a tensor: one block unless it is large. The
    values of a block depend only on its rows, so the blocks' draws in order give
    the tensor."""
    rows, per_row = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    if rows * per_row <= ROW_BLOCK_ELEMENTS:
        return [(0, rows)]
    if name.endswith(_WHOLE_TENSOR_RULES):
        raise ValueError(f"{name}: too large to draw whole and its rule needs every row")
    step = max(1, ROW_BLOCK_ELEMENTS // per_row)
    return [(r, min(r + step, rows)) for r in range(0, rows, step)]


def _nbytes(dtype, shape):
    return int(np.prod(shape, dtype=np.int64)) * {"BF16": 2, "F32": 4, "U8": 1}[dtype]


def draw_text_tensors(cfg, p, rng):
    """Yields (name, byte offset in the tensor, bytes) for every MODEL.md §2.6 tensor, in the
    order the values are drawn from rng (expert packed/scale pairs share one draw)."""
    want = k3ref.expected_tensors(cfg)
    for name, (dtype, shape) in want.items():
        if name.endswith(".weight_scale"):
            continue
        if name.endswith(".weight_packed"):
            base = name[:-len(".weight_packed")]
            cols = shape[1] * 2
            for r0, r1 in _row_blocks(base, (shape[0], cols)):
                packed, scale = mxfp4_quantize(init_tensor(base, (r1 - r0, cols), p, rng))
                yield name, r0 * shape[1], packed.tobytes()
                yield base + ".weight_scale", r0 * (cols // 32), scale.tobytes()
        else:
            row_bytes = _nbytes(dtype, shape) // shape[0]
            for r0, r1 in _row_blocks(name, shape):
                yield name, r0 * row_bytes, encode_tensor(name, dtype, (r1 - r0,) + tuple(shape[1:]),
                                                          p, rng)


class _Float32Draws:
    """rng whose standard normals are float32: ~3x faster to draw, encode and quantize,
    for presets of billions of values (their values differ from float64 draws)."""

    def __init__(self, rng):
        self._rng = rng

    def standard_normal(self, shape):
        return self._rng.standard_normal(shape, dtype=np.float32)

    def __getattr__(self, attr):
        return getattr(self._rng, attr)


# ----------------------------------------------------------------------------
# Shards
# ----------------------------------------------------------------------------

def _layer_key(name):
    """Sort key: layers in order, global tensors last (the release keeps them late)."""
    parts = name.split(".")
    if "layers" in parts:
        return (int(parts[parts.index("layers") + 1]), name)
    return (1 << 30, name)


def plan_shards(specs, n_shards, hidden):
    """Split text tensors (name -> (dtype, shape)) into n_shards by bytes and mix in
    vision tensors: each shard starts with an odd-sized U8 vision tensor (so the
    following offsets are odd) and has another one in its middle (flipping parity
    again). Returns (shards, extras): shards is a list of shard lists of (name, dtype,
    shape); extras lists (name, draw) for the non-text tensors, where draw(rng) returns
    the bytes; they are drawn after the text tensors, in this order."""
    names = sorted(specs, key=_layer_key)
    if n_shards < 1 or n_shards > len(names):
        raise SystemExit(f"make_checkpoint: --shards must be in 1..{len(names)}")
    size = {n: _nbytes(*specs[n]) for n in names}
    total = sum(size.values())
    shards = [[] for _ in range(n_shards)]
    extras = []
    acc = 0
    s = 0
    for k, name in enumerate(names):
        s = min(acc * n_shards // total, s + 1)       # by bytes, never skipping a shard
        s = max(s, n_shards - (len(names) - k))       # leave one tensor for each later shard
        shards[s].append((name,) + tuple(specs[name]))
        acc += size[name]
    for s, shard in enumerate(shards):
        odd = 2 * s + 3
        name = f"vision_tower.encoder.blocks.{s}.wqkv.weight"
        shard.insert(0, (name, "U8", (odd,)))
        extras.append((name, lambda rng, odd=odd: rng.integers(0, 256, odd, dtype=np.uint8).tobytes()))
        name = f"vision_tower.encoder.blocks.{s}.norm0.weight"
        shard.insert(len(shard) // 2 + 1, (name, "U8", (7,)))
        extras.append((name, lambda rng: bytes(range(7))))
    shards[0].append(("mm_projector.proj.0.weight", "BF16", (hidden, 8)))
    extras.append(("mm_projector.proj.0.weight",
                   lambda rng: bf16_encode(rng.standard_normal((hidden, 8))).tobytes()))
    shards[-1].append(("mm_projector.post_norm.weight", "F32", (8,)))
    extras.append(("mm_projector.post_norm.weight", lambda rng: np.ones(8, dtype="<f4").tobytes()))
    return shards, extras


def open_safetensors(path, entries):
    """Creates a safetensors file for entries (name, dtype, shape), laid out unaligned in
    that order, with its data section still to be written. Returns (fd, {name: absolute
    offset of the tensor's data})."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in entries:
        n = _nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, struct.pack("<Q", len(blob)) + blob)
    base = 8 + len(blob)
    os.ftruncate(fd, base + offset)
    return fd, {name: base + header[name]["data_offsets"][0] for name, _, _ in entries}


def _pwrite_all(fd, data, offset):
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def shard_name(k, n):
    return "model-%05d-of-%06d.safetensors" % (k, n)


def make_checkpoint(out_dir, preset, seed=0, vocab=None, n_shards=3, vision=False):
    p = dict(PRESETS[preset]) if isinstance(preset, str) else dict(preset)
    if vocab is not None:
        p["vocab_size"] = vocab
    top, text = build_config(p)
    cfg = k3ref.Config(text)
    rng = np.random.default_rng(seed)
    if p.get("float32_draws"):
        rng = _Float32Draws(rng)
    specs = k3ref.expected_tensors(cfg)
    if vision:
        top["vision_config"] = vision_config(p)
        vc = k3vision_ref.VisionConfig(top["vision_config"], p["hidden_size"])
        shards, _ = plan_shards(specs, n_shards, p["hidden_size"])
        shards = [[e for e in sh if not e[0].startswith(k3ref.SKIPPED_PREFIXES)]
                  for sh in shards]
        extras = plan_vision_shards(shards, k3vision_ref.expected_vision_tensors(vc))
    else:
        shards, extras = plan_shards(specs, n_shards, p["hidden_size"])
    os.makedirs(out_dir, exist_ok=True)
    weight_map, where, fds = {}, {}, []
    total = 0
    try:
        for k, entries in enumerate(shards, start=1):
            fname = shard_name(k, len(shards))
            fd, offsets = open_safetensors(os.path.join(out_dir, fname), entries)
            fds.append(fd)
            for name, dtype, shape in entries:
                weight_map[name] = fname
                where[name] = (fd, offsets[name])
                total += _nbytes(dtype, shape)
        for name, offset, data in draw_text_tensors(cfg, p, rng):
            fd, base = where[name]
            _pwrite_all(fd, data, base + offset)
        for name, draw in extras:
            fd, base = where[name]
            _pwrite_all(fd, draw(rng), base)
    finally:
        for fd in fds:
            os.close(fd)
    _write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                {"metadata": {"total_size": total}, "weight_map": weight_map})
    _write_json(os.path.join(out_dir, "config.json"), top)
    _write_json(os.path.join(out_dir, "generation_config.json"),
                {"max_length": 1048576, "eos_token_id": text["eos_token_id"]})
def _write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


# ----------------------------------------------------------------------------
# --check: does every path matter?
# ----------------------------------------------------------------------------

def check_prompt(vocab, n=16):
    """A fixed, spread-out prompt for the diagnostics."""
    return [(5 + 11 * j + 37 * j * j) % vocab for j in range(n)]


def _topk_set(x, k):
    return frozenset(np.argsort(-x, kind="stable")[:k].tolist())


def run_check(model_dir):
    """Run the reference on check_prompt with tracing. Returns [(name, ok, message)]."""
    events = {}
    model = k3ref.Model(model_dir, trace=lambda kind, **kw: events.setdefault(kind, []).append(kw))
    cfg = model.cfg
    logits = model.forward_full(check_prompt(cfg.vocab_size))
    b1, b2 = cfg.activation_situ_beta, cfg.activation_situ_linear_beta
    res = []

    changed = total = 0
    for ev in events["router"]:
        for s in ev["s"]:
            total += 1
            changed += _topk_set(s + ev["bias"], ev["k"]) != _topk_set(s, ev["k"])
    res.append(("router-bias", 0 < changed,
                f"{changed}/{total} token-layer top-k sets changed by e_score_correction_bias"))

    gate = np.concatenate([np.ravel(e["gate"]) for e in events["situ"]])
    up = np.concatenate([np.ravel(e["up"]) for e in events["situ"]])
    fg = np.mean(np.abs(gate) > b1)
    res.append(("situ-gate-cap", fg >= 0.01,
                f"|gate| > b1={b1:g} for {fg:.1%}, max |gate| {np.abs(gate).max():.2f}"))
    fu = np.mean(np.abs(up) > b2 / 2)
    res.append(("situ-up-cap", fu >= 0.05 and np.abs(up).max() > b2,
                f"|up| > b2/2={b2 / 2:g} for {fu:.1%}, > b2 for {np.mean(np.abs(up) > b2):.1%}, "
                f"max |up| {np.abs(up).max():.2f}"))

    res.append(_check_mxfp4(model_dir))

    srt = np.sort(logits, axis=1)
    spread = srt[:, -1] - srt[:, 0]
    gap = (srt[:, -1] - srt[:, -2]) / np.abs(logits).max(axis=1)
    res.append(("logit-spread", spread.min() > 4 and np.median(gap) > 1e-3
                and np.mean(gap > 1e-3) >= 0.75,
                f"row max-min >= {spread.min():.2f}; top1-top2 gap / max|logit|: median "
                f"{np.median(gap):.3g}, min {gap.min():.3g}, {np.mean(gap > 1e-3):.0%} > 1e-3"))

    excess = [np.max(e["probs"], axis=0) - 1.0 / e["probs"].shape[0]
              for e in events["attnres"] if e["probs"].shape[0] > 1]
    excess = np.concatenate([np.ravel(x) for x in excess])
    res.append(("attnres-nonuniform", excess.mean() > 0.1,
                f"max prob - 1/S: mean {excess.mean():.3f}, max {excess.max():.3f} "
                f"over {excess.size} mixes"))

    alpha = np.concatenate([np.ravel(e["alpha"]) for e in events["kda"]])
    beta = np.concatenate([np.ravel(e["beta"]) for e in events["kda"]])
    qa, qb = np.percentile(alpha, [5, 50, 95]), np.percentile(beta, [5, 50, 95])
    res.append(("kda-alpha-spread", qa[0] < 0.2 and qa[2] > 0.8,
                "alpha p5/p50/p95 " + "/".join(f"{v:.3f}" for v in qa)))
    res.append(("kda-beta-spread", qb[0] < 0.3 and qb[2] > 0.7,
                "beta p5/p50/p95 " + "/".join(f"{v:.3f}" for v in qb)))

    mla = []
    for e in events["mla"]:
        P = e["probs"]                                  # [NH, T, T], row t sees t+1 keys
        for t in range(2, P.shape[1]):
            mla.append(P[:, t, :t + 1].max(axis=1) - 1.0 / (t + 1))
    mla = np.concatenate(mla)
    res.append(("mla-nonuniform", mla.mean() > 0.1,
                f"max prob - 1/n: mean {mla.mean():.3f} over {mla.size} rows"))
    return res


def _check_mxfp4(model_dir):
    with open(os.path.join(model_dir, "model.safetensors.index.json"), encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    hist = np.zeros(16, dtype=np.int64)
    scales = []
    files = {}
    for name, fname in weight_map.items():
        if not name.endswith((".weight_packed", ".weight_scale")):
            continue
        st = files.setdefault(fname, k3ref.SafetensorsFile(os.path.join(model_dir, fname)))
        a = st.read(name)
        if name.endswith(".weight_packed"):
            hist += np.bincount(np.concatenate([np.ravel(a & 15), np.ravel(a >> 4)]),
                                minlength=16)
        else:
            scales.append(np.ravel(a))
    scales = np.concatenate(scales)
    used = int(np.count_nonzero(hist))
    zero = (hist[0] + hist[8]) / hist.sum()
    return ("mxfp4-nibbles", used >= 15 and zero < 0.5,
            f"{used}/16 nibble values used, {zero:.1%} zero magnitude, scale bytes "
            f"{scales.min()}..{scales.max()}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a random K3 checkpoint")
    ap.add_argument("out_dir")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--preset", choices=sorted(PRESETS))
    which.add_argument("--random-shape", type=int, metavar="SEED",
                       help="dims drawn from SEED anywhere the config allows (random_preset)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--check", action="store_true",
                    help="run the reference and print path diagnostics (exit 1 if any fails)")
    ap.add_argument("--vision", action="store_true",
                    help="add the vision tower and projector at VISION_DIMS (docs/VISION.md)")
    args = ap.parse_args(argv)
    if args.check and args.preset in NO_CHECK:
        ap.error(f"--check is not available for the {args.preset} preset (too large for "
                 "the float64 reference)")
    preset = args.preset if args.preset else random_preset(args.random_shape)
    make_checkpoint(args.out_dir, preset, args.seed, args.vocab, args.shards, args.vision)
    size = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(f"wrote {args.out_dir}: a random K3 checkpoint ({args.preset or 'random shape'}"
          f"{', vision' if args.vision else ''}), {size / 1e6:.1f} MB; run it with "
          f"bin/k3 {args.out_dir} --ids 1,2,3 (or --tok DIR --prompt TEXT)")
    if not args.check:
        return 0
    failed = 0
    for name, ok, msg in run_check(args.out_dir):
        print(f"check {name:20s} {'ok  ' if ok else 'FAIL'} {msg}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
