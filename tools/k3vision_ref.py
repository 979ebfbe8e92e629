#!/usr/bin/python3
"""k3vision_ref: an independent float64 reference of Kimi K3's vision path (docs/VISION.md).

Module and CLI. Only the standard library and numpy (plus tools/k3ref.py for the
safetensors reader and the BF16 decoder). Written from docs/VISION.md; every function
names the section it implements. Weights are decoded exactly from their stored BF16 and
every number after that is float64, except where VISION.md defines a step in integer or
float32 arithmetic (the image processor, §3).

Two halves:
  * the image processor (§3): resize plan, Pillow's BICUBIC resampling (exact, integer),
    transparency, zero padding, normalisation, patchify. Input uint8 RGB [H, W, 3] or
    RGBA [H, W, 4]; output the
    normalised patches [gh*gw, 3, p, p] and the grid (1, gh, gw).
  * the encoder and projector (§5): VisionModel(model_dir).encode(items), where items
    is a list of (patches [t*h*w, 3, p, p], (t, h, w)) in packed order; returns one
    array of projected rows [(h/2)*(w/2), text_hidden_size] per item.

CLI:
  /usr/bin/python3 tools/k3vision_ref.py MODEL_DIR --pixels FILE --grid T,H,W [--grid ...]
      [--dump FILE]
FILE holds the normalised patches of all items, float32 little-endian in packed order
(§5.1); prints the row count of each item; --dump writes every projected row, float32
little-endian, items in order.
  /usr/bin/python3 tools/k3vision_ref.py --plan WIDTH HEIGHT
prints the resize plan (§3.2) of an image of that size.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402  (SafetensorsFile, bf16_decode, K3Error)

K3Error = k3ref.K3Error

# ----------------------------------------------------------------------------
# Constants (VISION.md §1.2)
# ----------------------------------------------------------------------------

#: §3.2: the processor's patch budget per image and per side (media_proc_cfg defaults).
IN_PATCH_LIMIT = 65536
PATCH_LIMIT_ON_ONE_SIDE = 512
#: §3.5: image_mean and image_std, the same for R, G and B.
IMAGE_MEAN = 0.5
IMAGE_STD = 0.5
#: §3.3: Pillow's fixed-point coefficient precision, 32 - 8 - 2 bits.
PIL_PRECISION_BITS = 22
#: §5.1: eps of the encoder's RMSNorms (norm0, norm1, final_layernorm): nn.RMSNorm with
#: eps=None on BF16 activations uses torch.finfo(torch.bfloat16).eps = 2^-7.
VIT_NORM_EPS = 2.0 ** -7
#: §5.4: RoPE base and the side of its precomputed table (the largest grid it accepts).
ROPE_THETA = 10000.0
ROPE_MAX_SIDE = 512
#: §5.3: base of the sin-cos time embedding.
TIME_THETA = 10000.0

# ----------------------------------------------------------------------------
# Config (§1.1, §2)
# ----------------------------------------------------------------------------

_V_INT = ("patch_size", "vt_hidden_size", "vt_num_hidden_layers", "vt_num_attention_heads",
          "qkv_hidden_size", "vt_intermediate_size", "init_pos_emb_height",
          "init_pos_emb_width", "init_pos_emb_time", "mm_hidden_size", "text_hidden_size")
#: Fields whose other values would be another model than VISION.md describes.
_V_FIXED = {
    "merge_type": "sd2_tpool", "mm_projector_type": "patchmergerv2", "norm_type": "rmsnorm",
    "mlp_type": "mlp2", "pos_emb_type": "divided_fixed", "pos_emb_interpolation_mode": "bilinear",
    "activation_func": "gelu_pytorch_tanh", "projector_hidden_act": "gelu", "attn_bias": False,
    "linear_bias": False, "patch_embed_proj_bias": False,
}


class VisionConfig:
    """vision_config of config.json (§1.1), checked strictly (§2.1)."""

    def __init__(self, vc, text_hidden=None, media_id=None):
        if not isinstance(vc, dict):
            raise K3Error("config: vision_config is not an object")
        problems = []
        for k in _V_INT:
            v = vc.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                problems.append(f"{k} (positive integer)")
            else:
                setattr(self, k, v)
        for k, want in _V_FIXED.items():
            if vc.get(k) != want:
                problems.append(f"{k} must be {json.dumps(want)}, is {json.dumps(vc.get(k))}")
        mk = vc.get("merge_kernel_size")
        if mk != [2, 2]:
            problems.append(f"merge_kernel_size must be [2, 2], is {json.dumps(mk)}")
        eps = vc.get("projector_ln_eps")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
            problems.append("projector_ln_eps (positive number)")
        if problems:
            raise K3Error("config: vision_config: " + "; ".join(problems))
        self.merge = (2, 2)
        self.projector_eps = float(eps)
        if self.qkv_hidden_size % self.vt_num_attention_heads:
            raise K3Error("config: qkv_hidden_size is not a multiple of vt_num_attention_heads")
        self.head_dim = self.qkv_hidden_size // self.vt_num_attention_heads
        if self.head_dim % 4:
            raise K3Error("config: the vision head width must be a multiple of 4 (2D RoPE)")
        if self.vt_hidden_size % 2:
            raise K3Error("config: vt_hidden_size must be even (sin-cos time embedding)")
        if self.mm_hidden_size != self.vt_hidden_size:
            raise K3Error("config: mm_hidden_size must equal vt_hidden_size")
        if text_hidden is not None and self.text_hidden_size != text_hidden:
            raise K3Error(f"config: vision text_hidden_size {self.text_hidden_size} != text "
                          f"hidden_size {text_hidden}")
        self.merged_width = self.mm_hidden_size * self.merge[0] * self.merge[1]
        self.media_placeholder_token_id = media_id


def load_vision_config(model_dir):
    """VisionConfig from MODEL_DIR/config.json (release layout: nested text_config)."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, dict) or "vision_config" not in raw:
        raise K3Error("config.json has no vision_config")
    text = raw.get("text_config", raw)
    return VisionConfig(raw["vision_config"], text.get("hidden_size"),
                        raw.get("media_placeholder_token_id"))


def expected_vision_tensors(vc):
    """§2.2: every vision tensor name -> (dtype, shape)."""
    D, Q, Iv, p = vc.vt_hidden_size, vc.qkv_hidden_size, vc.vt_intermediate_size, vc.patch_size
    M, T = vc.merged_width, vc.text_hidden_size
    t = {
        "vision_tower.patch_embed.proj.weight": ("BF16", (D, 3, p, p)),
        "vision_tower.patch_embed.pos_emb.weight":
            ("BF16", (vc.init_pos_emb_height, vc.init_pos_emb_width, D)),
    }
    for i in range(vc.vt_num_hidden_layers):
        b = f"vision_tower.encoder.blocks.{i}."
        t[b + "norm0.weight"] = ("BF16", (D,))
        t[b + "wqkv.weight"] = ("BF16", (3 * Q, D))
        t[b + "wo.weight"] = ("BF16", (D, Q))
        t[b + "norm1.weight"] = ("BF16", (D,))
        t[b + "mlp.fc0.weight"] = ("BF16", (Iv, D))
        t[b + "mlp.fc1.weight"] = ("BF16", (D, Iv))
    t["vision_tower.encoder.final_layernorm.weight"] = ("BF16", (D,))
    t["mm_projector.proj.0.weight"] = ("BF16", (M, M))
    t["mm_projector.proj.2.weight"] = ("BF16", (T, M))
    t["mm_projector.post_norm.weight"] = ("BF16", (T,))
    return t


def load_vision_weights(model_dir, vc):
    """All vision tensors as float64 arrays (BF16 decoded exactly), checked against §2.2."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    else:
        single = k3ref.SafetensorsFile(os.path.join(model_dir, "model.safetensors"))
        weight_map = {n: "model.safetensors" for n in single.entries}
    want = expected_vision_tensors(vc)
    missing = sorted(n for n in want if n not in weight_map)
    unexpected = sorted(n for n in weight_map if n.startswith(("vision_tower.", "mm_projector."))
                        and n not in want)
    if missing or unexpected:
        raise K3Error(f"vision tensors: {len(missing)} missing {missing[:6]}; "
                      f"{len(unexpected)} unexpected {unexpected[:6]}")
    shards, w = {}, {}
    for name, (dtype, shape) in want.items():
        fname = weight_map[name]
        st = shards.get(fname) or shards.setdefault(
            fname, k3ref.SafetensorsFile(os.path.join(model_dir, fname)))
        if name not in st.entries:
            raise K3Error(f"{fname}: index names {name} but the shard lacks it")
        got = st.entries[name][:2]
        if got != (dtype, shape):
            raise K3Error(f"{name}: stored {got[0]}{list(got[1])}, needs {dtype}{list(shape)}")
        w[name] = k3ref.bf16_decode(st.read(name))
    return w


# ----------------------------------------------------------------------------
# §3 The image processor
# ----------------------------------------------------------------------------

def resize_plan(width, height, patch=14, merge=2, in_patch_limit=IN_PATCH_LIMIT,
                side_limit=PATCH_LIMIT_ON_ONE_SIDE):
    """§3.2: the resized size, the padding and the grids of a width x height image.

    Python float64 arithmetic exactly as specified (int() truncates)."""
    if width < 1 or height < 1:
        raise K3Error(f"image size {width}x{height}: both sides must be at least 1")
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch) * max(1.0, height // patch)))
    s2 = side_limit * patch / width
    s3 = side_limit * patch / height
    scale = min(1.0, s1, s2, s3)
    new_w = min(max(1, int(width * scale)), side_limit * patch)
    new_h = min(max(1, int(height * scale)), side_limit * patch)
    factor = merge * patch
    pad_w = (factor - new_w % factor) % factor
    pad_h = (factor - new_h % factor) % factor
    gw, gh = (new_w + pad_w) // patch, (new_h + pad_h) // patch
    return {"new_width": new_w, "new_height": new_h, "pad_width": pad_w, "pad_height": pad_h,
            "grid_h": gh, "grid_w": gw, "tokens": (gh // merge) * (gw // merge)}


def _bicubic(x):
    """§3.3 step 3: Pillow's cubic convolution kernel, a = -0.5, support 2."""
    a = -0.5
    if x < 0.0:
        x = -x
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


def pil_bicubic_coeffs(in_size, out_size):
    """§3.3 steps 1-5: per output index, the first input index, the tap count and the
    fixed-point taps (Python ints). The double arithmetic follows the stated order."""
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = 2.0 * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    ss = 1.0 / filterscale
    one = 1 << PIL_PRECISION_BITS
    firsts, taps = [], []
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        k = [_bicubic((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        ww = 0.0
        for v in k:
            ww += v
        if ww != 0.0:
            k = [v / ww for v in k]
        fixed = [int(-0.5 + v * one) if v < 0 else int(0.5 + v * one) for v in k]
        firsts.append(xmin)
        taps.append(fixed)
    assert max(len(k) for k in taps) <= ksize
    return firsts, taps


def _resample_axis(img, out_size, axis):
    """§3.3 step 6: one pass along `axis` (1 = horizontal, 0 = vertical) of a uint8
    [H, W, C] image: integer multiply-adds, + 2^21, >> 22, clamped to 0..255."""
    in_size = img.shape[axis]
    firsts, taps = pil_bicubic_coeffs(in_size, out_size)
    src = np.moveaxis(img, axis, 0).astype(np.int64)
    out = np.empty((out_size,) + src.shape[1:], dtype=np.uint8)
    half = 1 << (PIL_PRECISION_BITS - 1)
    for o in range(out_size):
        acc = np.full(src.shape[1:], half, dtype=np.int64)
        for j, k in enumerate(taps[o]):
            acc += src[firsts[o] + j] * k
        out[o] = np.clip(acc >> PIL_PRECISION_BITS, 0, 255)
    return np.moveaxis(out, 0, axis)


def pil_bicubic_resize(img, new_w, new_h):
    """§3.3: Pillow's Image.resize((new_w, new_h), BICUBIC) of a uint8 RGB [H, W, 3]
    or RGBA [H, W, 4]: the horizontal pass first (when the width changes) into uint8,
    then the vertical. RGBA is resized premultiplied (§3.1 step 2)."""
    img = np.asarray(img, dtype=np.uint8)
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise K3Error(f"expected uint8 [H, W, 3 or 4], got {img.shape}")
    if img.shape[:2] == (new_h, new_w):
        return img.copy()
    rgba = img.shape[2] == 4
    if rgba:
        img = premultiply(img)
    if img.shape[1] != new_w:
        img = _resample_axis(img, new_w, 1)
    if img.shape[0] != new_h:
        img = _resample_axis(img, new_h, 0)
    return unpremultiply(img) if rgba else img


def premultiply(rgba):
    """§3.1 step 2a: Pillow's RGBA -> RGBa: c' = ((t >> 8) + t) >> 8, t = c * a + 128."""
    out = np.asarray(rgba, dtype=np.int64).copy()
    t = out[..., :3] * out[..., 3:4] + 128
    out[..., :3] = ((t >> 8) + t) >> 8
    return out.astype(np.uint8)


def unpremultiply(rgba):
    """§3.1 step 2b: Pillow's RGBa -> RGBA: c unchanged where a is 0 or 255, else
    min(255, (255 * c) // a)."""
    x = np.asarray(rgba, dtype=np.int64)
    a = x[..., 3:4]
    c = np.where((a == 0) | (a == 255), x[..., :3],
                 np.minimum(255, (255 * x[..., :3]) // np.maximum(a, 1)))
    return np.concatenate([c, a], axis=2).astype(np.uint8)


def fill_transparent_background(rgba, square=8, white=255, gray=180):
    """§3.1 step 2c: composite a uint8 RGBA [H, W, 4] onto the chessboard (top-left
    square white), in float32 as the processor computes it, truncated to uint8 RGB."""
    H, W = rgba.shape[:2]
    y = np.arange(H)[:, None] // square
    x = np.arange(W)[None, :] // square
    bg = np.full((H, W, 3), white, dtype=np.uint8)
    bg[(x + y) % 2 == 1] = gray
    alpha = rgba[:, :, 3:4].astype(np.float32) / np.float32(255.0)
    out = alpha * rgba[:, :, :3].astype(np.float32) \
        + (np.float32(1.0) - alpha) * bg.astype(np.float32)
    return out.astype(np.uint8)


def pad_and_normalize(img, pad_w, pad_h):
    """§3.4-§3.5: zero padding (bottom, right) of the uint8 image, then per value
    2 * fl32(fl32(u / 255) - 0.5) in float32 (as float64 of those float32 values)."""
    img = np.pad(np.asarray(img, dtype=np.uint8), ((0, pad_h), (0, pad_w), (0, 0)))
    x = img.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(IMAGE_MEAN)) * np.float32(1.0 / IMAGE_STD)
    return x.astype(np.float64)


def patchify(x, patch):
    """§3.6: [H, W, 3] (H, W multiples of patch) -> [gh*gw, 3, patch, patch], patches
    in row-major grid order, each channel-major then row then column."""
    H, W, C = x.shape
    gh, gw = H // patch, W // patch
    p = x.reshape(gh, patch, gw, patch, C).transpose(0, 2, 4, 1, 3)
    return p.reshape(gh * gw, C, patch, patch), (1, gh, gw)


def preprocess_image(rgb, patch=14, merge=2):
    """§3: uint8 RGB [H, W, 3] or RGBA [H, W, 4] -> (normalised patches [gh*gw, 3, p, p],
    (1, gh, gw), plan). RGBA is resized, then composited (§3.1 step 2)."""
    rgb = np.asarray(rgb, dtype=np.uint8)
    plan = resize_plan(rgb.shape[1], rgb.shape[0], patch, merge)
    small = pil_bicubic_resize(rgb, plan["new_width"], plan["new_height"])
    if small.shape[2] == 4:
        small = fill_transparent_background(small)
    x = pad_and_normalize(small, plan["pad_width"], plan["pad_height"])
    patches, grid = patchify(x, patch)
    return patches, grid, plan


def image_prompt(width, height):
    """§4 step 1: the text of one image's prompt (ORIGINAL width and height)."""
    return (f"<|media_begin|>image {width}x{height}<|media_content|><|media_pad|>"
            "<|media_end|>")


# ----------------------------------------------------------------------------
# §5 The encoder and projector
# ----------------------------------------------------------------------------

def rms(x, w, eps):
    """§5.1: x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    """§5.1: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def gelu_erf(x):
    """§5.1: 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def patch_embed(patches, w):
    """§5.2: [N, 3, p, p] x proj.weight [D, 3, p, p] -> [N, D] (one dot product of the
    3*p*p values per output channel)."""
    n = patches.shape[0]
    return patches.reshape(n, -1) @ w.reshape(w.shape[0], -1).T


def bilinear_axis(n_in, n_out):
    """§5.3 step 2: per output index (i0, i1, l0, l1) of half-pixel bilinear resampling
    without antialiasing (align_corners false)."""
    out = []
    for o in range(n_out):
        src = (o + 0.5) * n_in / n_out - 0.5
        if src < 0.0:
            src = 0.0
        i0 = int(math.floor(src))
        i1 = i0 + 1 if i0 < n_in - 1 else i0
        l1 = src - i0
        out.append((i0, i1, 1.0 - l1, l1))
    return out


def interp_pos_table(table, h, w):
    """§5.3 steps 1-2: the learned [H0, W0, D] table resampled to [h, w, D]."""
    H0, W0, _ = table.shape
    if (h, w) == (H0, W0):
        return table.copy()
    rows = bilinear_axis(H0, h)
    cols = bilinear_axis(W0, w)
    out = np.empty((h, w, table.shape[2]))
    for y, (a0, a1, la0, la1) in enumerate(rows):
        for x, (b0, b1, lb0, lb1) in enumerate(cols):
            out[y, x] = (la0 * (lb0 * table[a0, b0] + lb1 * table[a0, b1])
                         + la1 * (lb0 * table[a1, b0] + lb1 * table[a1, b1]))
    return out


def time_embedding(dim, frames):
    """§5.3 step 3: [frames, dim] sin-cos rows: row f = [sin(f w_k)]_k ++ [cos(f w_k)]_k,
    w_k = 10000^(-k / (dim/2)), k = 0..dim/2-1."""
    half = dim // 2
    omega = TIME_THETA ** (-np.arange(half) / half)
    ang = np.arange(frames)[:, None] * omega[None, :]
    return np.concatenate([np.sin(ang), np.cos(ang)], axis=1)


def pos_embedding(table, n_frames_max, t, h, w):
    """§5.3: [t*h*w, D] position rows of one item, frame-major then row-major."""
    if t > n_frames_max:
        raise K3Error(f"item has {t} frames; init_pos_emb_time allows {n_frames_max}")
    spatial = interp_pos_table(table, h, w).reshape(h * w, -1)
    if t == 1:
        return spatial
    tw = time_embedding(table.shape[2], t)
    return (spatial[None, :, :] + tw[:, None, :]).reshape(t * h * w, -1)


def rope_angles(h, w, head_dim):
    """§5.4: [h*w, head_dim/2] rotation angles of the patches of one frame (row-major):
    pair 2i turns by x * f_i, pair 2i+1 by y * f_i, f_i = 10000^(-4i/head_dim)."""
    if not (1 <= h <= ROPE_MAX_SIDE and 1 <= w <= ROPE_MAX_SIDE):
        raise K3Error(f"grid {h}x{w} exceeds the {ROPE_MAX_SIDE}x{ROPE_MAX_SIDE} RoPE table")
    freqs = ROPE_THETA ** (-4.0 * np.arange(head_dim // 4) / head_dim)
    ys, xs = np.divmod(np.arange(h * w), w)
    ang = np.empty((h * w, head_dim // 2))
    ang[:, 0::2] = xs[:, None] * freqs[None, :]
    ang[:, 1::2] = ys[:, None] * freqs[None, :]
    return ang


def apply_rope(x, ang):
    """§5.4: rotate the pairs (x[2j], x[2j+1]) of every head of x [N, heads, hd] by
    ang [N, hd/2]: (a cos - b sin, a sin + b cos)."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def attention(q, k, v, trace=None):
    """§5.5 step 4: bidirectional attention within one item; q, k, v [n, heads, hd]."""
    hd = q.shape[-1]
    scores = np.einsum("nhd,mhd->hnm", q, k) / math.sqrt(hd)
    probs = softmax(scores, axis=-1)
    if trace is not None:
        trace("attention", probs=probs)
    return np.einsum("hnm,mhd->nhd", probs, v)


def encoder_layer(x, lw, vc, items, angles, trace=None):
    """§5.5: one pre-norm block over the packed rows x [N, D]."""
    Q, nh, hd = vc.qkv_hidden_size, vc.vt_num_attention_heads, vc.head_dim
    qkv = rms(x, lw["norm0"], VIT_NORM_EPS) @ lw["wqkv"].T          # step 1-2
    q = apply_rope(qkv[:, :Q].reshape(-1, nh, hd), angles)          # step 3
    k = apply_rope(qkv[:, Q:2 * Q].reshape(-1, nh, hd), angles)
    v = qkv[:, 2 * Q:].reshape(-1, nh, hd)
    o = np.empty((x.shape[0], nh, hd))
    for r0, r1 in items:                                             # step 4
        o[r0:r1] = attention(q[r0:r1], k[r0:r1], v[r0:r1], trace)
    x = x + o.reshape(-1, Q) @ lw["wo"].T                            # step 5
    f = rms(x, lw["norm1"], VIT_NORM_EPS) @ lw["fc0"].T              # step 6
    if trace is not None:
        trace("fc0", values=f)
    return x + gelu_tanh(f) @ lw["fc1"].T                            # step 7


def merge_item(z, t, h, w):
    """§5.7: [t*h*w, D] encoder rows of one item -> [(h/2)*(w/2), 4*D]: each 2x2 window
    (row-major over windows), its four patches in the order (0,0), (0,1), (1,0), (1,1),
    each the mean over the t frames."""
    D = z.shape[1]
    g = z.reshape(t, h // 2, 2, w // 2, 2, D).transpose(0, 1, 3, 2, 4, 5).mean(axis=0)
    return g.reshape((h // 2) * (w // 2), 4 * D)


def projector(m, w, eps, trace=None):
    """§5.8: [n, 4D] -> [n, text_hidden]: proj.0, exact GELU, proj.2, RMSNorm (eps)."""
    u = m @ w["mm_projector.proj.0.weight"].T
    if trace is not None:
        trace("proj0", values=u)
    p = gelu_erf(u) @ w["mm_projector.proj.2.weight"].T
    return rms(p, w["mm_projector.post_norm.weight"], eps)


class VisionModel:
    """The vision tower and projector of one checkpoint (§5)."""

    def __init__(self, model_dir, trace=None):
        self.cfg = load_vision_config(model_dir)
        self.w = load_vision_weights(model_dir, self.cfg)
        self.trace = trace

    def _layer(self, i):
        b = f"vision_tower.encoder.blocks.{i}."
        return {k: self.w[b + n] for k, n in (("norm0", "norm0.weight"), ("wqkv", "wqkv.weight"),
                                               ("wo", "wo.weight"), ("norm1", "norm1.weight"),
                                               ("fc0", "mlp.fc0.weight"),
                                               ("fc1", "mlp.fc1.weight"))}

    def check_item(self, patches, grid):
        t, h, w = grid
        vc = self.cfg
        if t < 1 or h < 2 or w < 2 or h % 2 or w % 2:
            raise K3Error(f"grid {grid}: t >= 1 and even h, w >= 2 required (§5.7)")
        want = (t * h * w, 3, vc.patch_size, vc.patch_size)
        if tuple(patches.shape) != want:
            raise K3Error(f"grid {grid}: patches {patches.shape}, expected {want}")

    def encoder_rows(self, items):
        """§5.2-§5.6: items [(patches, (t, h, w))] -> packed final-norm rows [N, D]."""
        vc, w = self.cfg, self.w
        for patches, grid in items:
            self.check_item(patches, grid)
        pix = np.concatenate([p for p, _ in items]).astype(np.float64)
        x = patch_embed(pix, w["vision_tower.patch_embed.proj.weight"])           # §5.2
        table = w["vision_tower.patch_embed.pos_emb.weight"]
        x = x + np.concatenate([pos_embedding(table, vc.init_pos_emb_time, *g)   # §5.3
                                for _, g in items])
        angles = np.concatenate([np.tile(rope_angles(h, wd, vc.head_dim), (t, 1))  # §5.4
                                 for _, (t, h, wd) in items])
        bounds, r = [], 0
        for _, (t, h, wd) in items:
            bounds.append((r, r + t * h * wd))
            r += t * h * wd
        for i in range(vc.vt_num_hidden_layers):                                  # §5.5
            x = encoder_layer(x, self._layer(i), vc, bounds, angles, self.trace)
        return rms(x, w["vision_tower.encoder.final_layernorm.weight"], VIT_NORM_EPS), bounds

    def encode(self, items):
        """§5: items [(patches [t*h*w, 3, p, p], (t, h, w))] -> [rows [(h/2)(w/2), T]]."""
        z, bounds = self.encoder_rows(items)
        out = []
        for (r0, r1), (_, (t, h, wd)) in zip(bounds, items):
            m = merge_item(z[r0:r1], t, h, wd)                                     # §5.7
            out.append(projector(m, self.w, self.cfg.projector_eps, self.trace))  # §5.8
        return out


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------

def _grid(s):
    try:
        t, h, w = (int(v) for v in s.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--grid wants T,H,W, got {s!r}") from e
    return t, h, w


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 reference of the K3 vision path")
    ap.add_argument("model_dir", nargs="?")
    ap.add_argument("--pixels", help="float32 LE normalised patches, packed order")
    ap.add_argument("--grid", type=_grid, action="append", default=[])
    ap.add_argument("--dump", help="write the projected rows (float32 LE) here")
    ap.add_argument("--plan", type=int, nargs=2, metavar=("WIDTH", "HEIGHT"))
    args = ap.parse_args(argv)
    if args.plan:
        print(json.dumps(resize_plan(*args.plan), sort_keys=True))
        return 0
    if not args.model_dir or not args.pixels or not args.grid:
        ap.error("MODEL_DIR, --pixels and at least one --grid are needed")
    try:
        model = VisionModel(args.model_dir)
        p = model.cfg.patch_size
        flat = np.fromfile(args.pixels, dtype="<f4").astype(np.float64)
        need = sum(t * h * w for t, h, w in args.grid) * 3 * p * p
        if flat.size != need:
            raise K3Error(f"{args.pixels}: {flat.size} floats, the grids need {need}")
        items, r = [], 0
        for t, h, w in args.grid:
            n = t * h * w
            items.append((flat[r * 3 * p * p:(r + n) * 3 * p * p].reshape(n, 3, p, p), (t, h, w)))
            r += n
        rows = model.encode(items)
    except K3Error as e:
        print(f"k3vision_ref: {e}", file=sys.stderr)
        return 2
    print(" ".join(str(r.shape[0]) for r in rows))
    if args.dump:
        np.concatenate(rows).astype("<f4").tofile(args.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
