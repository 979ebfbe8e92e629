#!/usr/bin/python3
"""train_nano: trains k3-nano, a small Kimi K3 text model, on the Python standard library.

  nice -n 10 /usr/bin/python3 tools/train_nano.py OUT_DIR --k3 BUILD/bin/k3
      [--seed 0] [--steps 560] [--qat-steps 100] [--preset nano|micro] [--threads 1]
  /usr/bin/python3 tools/train_nano.py --eval MODEL_DIR --k3 BIN --file F
      [--max-tokens N] [--losses OUT]

The model is the whole K3 text architecture of docs/MODEL.md §4 at small widths,
written here in torch (float32, autograd) from that page alone: layer 0 KDA with the
dense SiTU MLP, KDA layers (short conv, per-channel decay, the delta-rule state), gated
MLA with the last layer MLA, attention-residual blocks closing every `attn_res_block_size`
layers, latent MoE (sigmoid router, selection bias, renormalised top-k, latent norm,
shared experts). The routed experts are MXFP4 in the checkpoint; the last --qat-steps
steps train through their quantisation (straight-through: the forward pass uses the
quantised values, the gradient goes to the float weights), so the shipped model is the
one that was evaluated. The selection bias is not trained by gradient: after each step
it moves by BIAS_RATE towards equal load (up for experts chosen less than average, down
for the others; the aux-loss-free balance of the release's `noaux_tc`).

Data (corpus_files): every *.py under /usr/lib/python3.11/ except dist-packages/ and
site-packages/, sorted by path, valid UTF-8 only; file j of that list is held out when
j % HOLDOUT_EVERY == HOLDOUT_EVERY - 1. Held-out files are never seen by the tokenizer
or the trainer. The tokenizer is learned on the training files with
tools/make_tokenizer.py --corpus-list; the files are tokenized by k3 itself
(--tokenize-jsonl), so the ids are exactly those k3 will see.

Determinism: the seed draws the init and the batches (torch.manual_seed and one
torch.Generator); with a fixed --threads (and one OpenBLAS thread) the run is
repeatable on one machine: torch's CPU kernels are deterministic for a given thread
count and BLAS. Another BLAS or CPU may round differently and give other weights.

Output: OUT_DIR gets the checkpoint in the release's format (written with
tools/make_checkpoint.py's writers: nested config, index, shards, names, BF16 trunk,
MXFP4 experts), tiktoken.model, tokenizer_config.json and train_log.json (steps, losses,
seconds, the held-out list). After export the stored weights are read back (k3ref's
decoders) and evaluated in float32 on the first EVAL_TOKENS predicted tokens of every
held-out file (and of 16 training files), each from empty state. --eval runs a file
through the stored weights in float64 and writes per-token log-loss (nats) and greedy
ids to --losses (JSON).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# One BLAS thread: torch's own threads are set by --threads (default 1; spinning
# OpenMP threads on a shared machine cost more than they give).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402
import make_checkpoint as mc  # noqa: E402

CORPUS_ROOT = "/usr/lib/python3.11"
HOLDOUT_EVERY = 10
#: Selection-bias step per training step (aux-loss-free balance).
BIAS_RATE = 1e-3

_COMMON = dict(rms_norm_eps=1e-5, activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
               gate_lower_bound=-5.0, routed_scaling_factor=1.0, first_k_dense_replace=1,
               short_conv_kernel_size=4)

#: Model dims (make_checkpoint.build_config's preset keys); vocab_size is set from
#: the tokenizer (merges + 256 bytes + 256 special ids). kda_layers are ONE-based.
PRESETS = {
    "nano": dict(_COMMON, merges=2560, hidden_size=128, num_hidden_layers=6,
                 kda_layers=[1, 2, 3, 5], kda_num_heads=4, kda_head_dim=32,
                 num_attention_heads=4, qk_nope_head_dim=32, qk_rope_head_dim=16,
                 v_head_dim=32, q_lora_rank=64, kv_lora_rank=64, num_experts=32,
                 num_experts_per_token=4, num_shared_experts=2, moe_intermediate_size=64,
                 routed_expert_hidden_size=64, intermediate_size=256, attn_res_block_size=2,
                 batch=8, seq=128, lr=3e-3),
    # For checking the pipeline end to end in a minute.
    "micro": dict(_COMMON, merges=512, hidden_size=32, num_hidden_layers=4,
                  kda_layers=[1, 2, 3], kda_num_heads=2, kda_head_dim=16,
                  num_attention_heads=2, qk_nope_head_dim=16, qk_rope_head_dim=8,
                  v_head_dim=16, q_lora_rank=32, kv_lora_rank=32, num_experts=8,
                  num_experts_per_token=2, num_shared_experts=1, moe_intermediate_size=32,
                  routed_expert_hidden_size=32, intermediate_size=64, attn_res_block_size=2,
                  batch=8, seq=64, lr=3e-3),
}
MLA_EPS = 1e-6
KDA_L2_EPS = 1e-6


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------

def corpus_files(root=CORPUS_ROOT):
    """(train, held_out): sorted lists of absolute paths (see the module doc)."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("dist-packages", "site-packages",
                                                      "__pycache__"))
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                try:
                    with open(path, "rb") as g:
                        g.read().decode("utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                found.append(path)
    found.sort()
    train = [p for j, p in enumerate(found) if j % HOLDOUT_EVERY != HOLDOUT_EVERY - 1]
    held = [p for j, p in enumerate(found) if j % HOLDOUT_EVERY == HOLDOUT_EVERY - 1]
    return train, held


def read_text(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def tokenize(k3, tok_dir, texts):
    """Token ids of each text, by k3 --tokenize-jsonl (the engine's own encoder)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False,
                                     encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
        name = f.name
    try:
        out = subprocess.run([k3, "--tok", tok_dir, "--tokenize-jsonl", name], check=True,
                             stdout=subprocess.PIPE).stdout.decode("ascii")
    finally:
        os.unlink(name)
    rows = out.split("\n")[:len(texts)]
    return [[int(x) for x in r.split(",")] if r else [] for r in rows]


# ----------------------------------------------------------------------------
# The model (docs/MODEL.md §4), batched over [B, T]
# ----------------------------------------------------------------------------

def rms(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def situ(g, u, b1, b2):
    return b1 * torch.tanh(g / b1) * torch.sigmoid(g) * (b2 * torch.tanh(u / b2))


def attnres(sources, norm_w, proj, eps):
    """§4.4: softmax over sources of rms(s)·(w∘p), mixing the raw sources."""
    src = torch.stack(sources)
    key = src * torch.rsqrt((src * src).mean(-1, keepdim=True) + eps)
    scores = (key * (norm_w * proj.reshape(-1))).sum(-1)
    probs = torch.softmax(scores, dim=0)
    return (probs.unsqueeze(-1) * src).sum(0)


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
_E2M1_MID = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def mxfp4_fake(w):
    """The values make_checkpoint.mxfp4_quantize stores for w [..., n] (groups of 32
    along the last dim: exponent floor(log2(roundpow2(amax))) - 2, nearest E2M1 point,
    ties to the even code, clipped to 6), as floats of w's dtype."""
    shape = w.shape
    g = w.reshape(-1, shape[-1] // 32, 32)
    amax = g.abs().amax(-1)
    mant, ex = torch.frexp(amax)
    e = ex - 1 + (2 * mant >= 1.75).to(ex.dtype) - 2
    e = torch.where(amax == 0, torch.zeros_like(e), e)
    scale = torch.ldexp(torch.ones_like(amax), e).unsqueeze(-1)
    v = g.abs() / scale
    mid = torch.tensor(_E2M1_MID, dtype=w.dtype)
    idx = torch.searchsorted(mid, v.contiguous(), right=False)      # midpoints < v
    tie = (idx < 7) & (mid[idx.clamp(max=6)] == v) & (idx % 2 == 1)
    code = idx + tie.to(idx.dtype)
    mag = torch.tensor(_E2M1, dtype=w.dtype)[code]
    return (torch.where(g < 0, -mag, mag) * scale).reshape(shape)


def ste(w, fn):
    """Straight-through: fn(w) forward, identity gradient."""
    return w + (fn(w) - w).detach()


class K3Torch:
    """The K3 forward pass over a name -> tensor dict whose names and shapes are
    tools/k3ref.load_weights's (experts stacked as experts.w1 [E, F, Z], ...)."""

    def __init__(self, cfg, w):
        self.c = cfg
        self.w = w
        self.quant = False
        self.last_selected = {}

    def lw(self, i, name):
        return self.w[f"model.layers.{i}.{name}"]

    def kda(self, i, x):
        c = self.c
        a = f"model.layers.{i}.self_attn."
        w = self.w
        B, T, _ = x.shape
        nh, d = c.kda_num_heads, c.kda_head_dim

        def conv(y, name):                       # §4.5 step 2, zero history
            taps = w[a + name + "_conv1d.weight"][:, 0, :]   # [C, K]
            K = taps.shape[1]
            yp = torch.nn.functional.pad(y, (0, 0, K - 1, 0))
            return torch.nn.functional.silu(sum(taps[:, j] * yp[:, j:j + T] for j in range(K)))

        q = conv(x @ w[a + "q_proj.weight"].T, "q").reshape(B, T, nh, d)
        k = conv(x @ w[a + "k_proj.weight"].T, "k").reshape(B, T, nh, d)
        v = conv(x @ w[a + "v_proj.weight"].T, "v").reshape(B, T, nh, d)
        graw = (x @ w[a + "f_a_proj.weight"].T) @ w[a + "f_b_proj.weight"].T
        alpha = torch.exp(c.gate_lower_bound * torch.sigmoid(
            torch.exp(w[a + "A_log"][:nh]).unsqueeze(-1)
            * (graw + w[a + "dt_bias"]).reshape(B, T, nh, d)))
        beta = torch.sigmoid(x @ w[a + "b_proj.weight"].T)                  # [B, T, NH]
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + KDA_L2_EPS) * d ** -0.5
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + KDA_L2_EPS)
        S = x.new_zeros(B, nh, d, d)                                        # [key c, value j]
        outs = []
        for t in range(T):
            S = S * alpha[:, t].unsqueeze(-1)
            kt = k[:, t]
            u = v[:, t] - (kt.unsqueeze(-2) @ S).squeeze(-2)          # S^T k
            S = S + (beta[:, t].unsqueeze(-1) * kt).unsqueeze(-1) * u.unsqueeze(-2)
            outs.append((q[:, t].unsqueeze(-2) @ S).squeeze(-2))      # S^T q
        o = rms(torch.stack(outs, 1), w[a + "o_norm.weight"], c.rms_norm_eps)
        o = o.reshape(B, T, nh * d) * torch.sigmoid(x @ w[a + "g_proj.weight"].T)
        return o @ w[a + "o_proj.weight"].T

    def mla(self, i, x):
        c = self.c
        a = f"model.layers.{i}.self_attn."
        w = self.w
        B, T, _ = x.shape
        na, dn, dr, dv, R = (c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim,
                             c.v_head_dim, c.kv_lora_rank)
        cq = rms(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], MLA_EPS)
        q = (cq @ w[a + "q_b_proj.weight"].T).reshape(B, T, na, dn + dr)
        ckv = x @ w[a + "kv_a_proj_with_mqa.weight"].T
        lat = rms(ckv[..., :R], w[a + "kv_a_layernorm.weight"], MLA_EPS)
        kv = (lat @ w[a + "kv_b_proj.weight"].T).reshape(B, T, na, dn + dv)
        rope = ckv[..., R:].unsqueeze(2).expand(B, T, na, dr)
        key = torch.cat([kv[..., :dn], rope], -1)
        scores = torch.einsum("bthd,bshd->bhts", q, key) * (dn + dr) ** -0.5
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        o = torch.einsum("bhts,bshd->bthd", probs, kv[..., dn:]).reshape(B, T, na * dv)
        o = o * torch.sigmoid(x @ w[a + "g_proj.weight"].T)
        return o @ w[a + "o_proj.weight"].T

    def mlp(self, i, x):
        c = self.c
        b1, b2 = c.activation_situ_beta, c.activation_situ_linear_beta
        if i < c.first_k_dense_replace:
            return situ(x @ self.lw(i, "mlp.gate_proj.weight").T,
                        x @ self.lw(i, "mlp.up_proj.weight").T,
                        b1, b2) @ self.lw(i, "mlp.down_proj.weight").T
        p = f"model.layers.{i}.block_sparse_moe."
        w = self.w
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        s = torch.sigmoid(xf @ w[p + "gate.weight"].T)                      # §4.8 step 1
        sel = torch.topk(s + w[p + "gate.e_score_correction_bias"], c.num_experts_per_token,
                         dim=-1).indices                                    # step 2
        chosen = torch.gather(s, 1, sel)
        wts = chosen / (chosen.sum(-1, keepdim=True) + 1e-20) * c.routed_scaling_factor
        self.last_selected[i] = sel.detach()
        z = xf @ w[p + "routed_expert_down_proj.weight"].T                  # step 4
        w1, w2, w3 = w[p + "experts.w1"], w[p + "experts.w2"], w[p + "experts.w3"]
        if self.quant:
            w1, w2, w3 = (ste(t, mxfp4_fake) for t in (w1, w2, w3))
        y = torch.zeros_like(z)
        for e in range(c.num_experts):                                      # step 5
            tok, slot = (sel == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            ze = z[tok]
            h = situ(ze @ w1[e].T, ze @ w3[e].T, b1, b2) @ w2[e].T
            y = y.index_add(0, tok, h * wts[tok, slot].unsqueeze(-1))
        y = rms(y, w[p + "routed_expert_norm.weight"], c.rms_norm_eps)     # step 6
        shared = situ(xf @ w[p + "shared_experts.gate_proj.weight"].T,
                      xf @ w[p + "shared_experts.up_proj.weight"].T,
                      b1, b2) @ w[p + "shared_experts.down_proj.weight"].T
        return (y @ w[p + "routed_expert_up_proj.weight"].T + shared).reshape(shape)

    def forward(self, ids):
        """Logits [B, T, V] for ids [B, T], every sequence from empty state (§4.3)."""
        c = self.c
        w = self.w
        eps = c.rms_norm_eps
        h = w["model.embed_tokens.weight"][ids]
        bank = []
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            prefix = h
            if bank:
                h = attnres(bank + [prefix], w[p + "self_attention_res_norm.weight"],
                            w[p + "self_attention_res_proj.weight"], eps)
            if i % c.attn_res_block_size == 0:
                bank.append(prefix)
                prefix = None
            x = rms(h, w[p + "input_layernorm.weight"], eps)
            a = self.kda(i, x) if c.is_kda[i] else self.mla(i, x)
            prefix = a if prefix is None else prefix + a
            h = attnres(bank + [prefix], w[p + "mlp_res_norm.weight"],
                        w[p + "mlp_res_proj.weight"], eps)
            m = self.mlp(i, rms(h, w[p + "post_attention_layernorm.weight"], eps))
            h = prefix + m
        h = attnres(bank + [h], w["model.output_attn_res_norm.weight"],
                    w["model.output_attn_res_proj.weight"], eps)
        h = rms(h, w["model.norm.weight"], eps)
        return h @ w["lm_head.weight"].T


# ----------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------

def param_shapes(cfg):
    """name (k3ref.load_weights's) -> shape, experts stacked."""
    out = {}
    for name, (_, shape) in k3ref.expected_tensors(cfg).items():
        name = name[len("language_model."):]
        if ".experts." in name:
            head, rest = name.split(".experts.")
            m, mat = rest.split(".")[:2]
            if not rest.endswith("weight_packed") or m != "0":
                continue
            E = cfg.num_experts
            rows, cols = shape[0], shape[1] * 2
            out[f"{head}.experts.{mat}"] = (E, rows, cols)
        else:
            out[name] = tuple(shape)
    return out


def init_params(cfg, gen):
    """Initial float32 weights: unit-scale activations through every path."""
    L = cfg.num_hidden_layers
    w = {}
    for name, shape in param_shapes(cfg).items():
        leaf = name.split(".")[-1] if not name.endswith(".weight") else name.split(".")[-2]
        fan_in = shape[-1]
        if name.endswith(("norm.weight", "layernorm.weight")):
            t = torch.ones(shape)
        elif name.endswith("res_proj.weight") or name.endswith("e_score_correction_bias"):
            t = torch.zeros(shape)
        elif "conv1d" in name:
            t = torch.randn(shape, generator=gen) * 0.1
            t[..., -1] += 1.0
        elif leaf == "A_log":
            t = torch.zeros(shape)
        elif leaf == "dt_bias":
            t = -6.0 * torch.rand(shape, generator=gen)
        elif name == "model.embed_tokens.weight":
            t = torch.randn(shape, generator=gen)
        else:
            std = fan_in ** -0.5
            if leaf in ("o_proj", "down_proj", "w2", "routed_expert_up_proj"):
                std /= math.sqrt(2 * L)
            t = torch.randn(shape, generator=gen) * std
        w[name] = t.float()
    return w


def load_params(model_dir, dtype=torch.float64):
    """(cfg, weights) from a checkpoint: the stored values decoded exactly (k3ref)."""
    cfg = k3ref.load_config(model_dir)
    raw = k3ref.load_weights(model_dir, cfg)
    want = param_shapes(cfg)
    w = {n: torch.from_numpy(np.ascontiguousarray(raw[n])).to(dtype).reshape(want[n])
         for n in want}
    return cfg, w


# ----------------------------------------------------------------------------
# Export (make_checkpoint's writers)
# ----------------------------------------------------------------------------

def export(out_dir, p, w, seed):
    """Writes the checkpoint of weights w (float32) into out_dir in the release's format:
    matrices BF16, vectors as MODEL.md §2.6 lists, experts MXFP4."""
    top, text = mc.build_config(p)
    cfg = k3ref.Config(text)
    specs = k3ref.expected_tensors(cfg)
    shards, extras = mc.plan_shards(specs, 2, p["hidden_size"])
    os.makedirs(out_dir, exist_ok=True)
    weight_map, total = {}, 0
    rng = np.random.default_rng(seed)
    for k, entries in enumerate(shards, start=1):
        fname = mc.shard_name(k, len(shards))
        fd, offsets = mc.open_safetensors(os.path.join(out_dir, fname), entries)
        try:
            for name, dtype, shape in entries:
                weight_map[name] = fname
                total += mc._nbytes(dtype, shape)
                data = _tensor_bytes(name, dtype, shape, w)
                if data is not None:
                    mc._pwrite_all(fd, data, offsets[name])
            for name, draw in extras:
                if name in offsets:
                    mc._pwrite_all(fd, draw(rng), offsets[name])
        finally:
            os.close(fd)
    mc._write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": weight_map})
    mc._write_json(os.path.join(out_dir, "config.json"), top)
    mc._write_json(os.path.join(out_dir, "generation_config.json"),
                   {"max_length": 1048576, "eos_token_id": text["eos_token_id"]})
    return cfg


def _tensor_bytes(name, dtype, shape, w):
    if not name.startswith("language_model."):
        return None
    n = name[len("language_model."):]
    if ".experts." in n:
        head, rest = n.split(".experts.")
        m, mat, kind = rest.split(".")
        arr = w[f"{head}.experts.{mat}"][int(m)].detach().numpy().astype(np.float32)
        packed, scale = mc.mxfp4_quantize(arr)
        return (packed if kind == "weight_packed" else scale).tobytes()
    arr = w[n].detach().numpy().astype(np.float32).reshape(shape)
    if dtype == "BF16":
        return mc.bf16_encode(arr).tobytes()
    return np.asarray(arr, dtype="<f4").tobytes()


# ----------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------

def batches(stream, n_tok, B, T, gen):
    """B random windows of T+1 tokens from stream (a 1-D LongTensor)."""
    start = torch.randint(0, n_tok - T - 1, (B,), generator=gen)
    idx = start.unsqueeze(1) + torch.arange(T + 1)
    return stream[idx]


def seq_loss(model, seqs):
    logits = model.forward(seqs[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             seqs[:, 1:].reshape(-1))


#: Evaluation: the first EVAL_TOKENS predicted tokens of each file.
EVAL_TOKENS = 1024


def token_bytes(path):
    """id -> bytes of the ordinary tokens of a tiktoken.model."""
    import base64
    out = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            b64, rank = line.split()
            out[int(rank)] = base64.b64decode(b64)
    return out


def eval_segments(model, files_ids, seg, batch=64):
    """Total log-loss (nats) and predicted-token count over files, each cut into
    segments of at most seg+1 tokens (a segment starts from empty state; the first
    token of each segment is context only)."""
    segs = []
    for ids in files_ids:
        for s in range(0, max(len(ids) - 1, 0), seg):
            part = ids[s:s + seg + 1]
            if len(part) >= 2:
                segs.append(part)
    segs.sort(key=len)
    total, count = 0.0, 0
    with torch.no_grad():
        for j in range(0, len(segs), batch):
            group = segs[j:j + batch]
            n = max(len(g) for g in group)
            ids = torch.zeros(len(group), n, dtype=torch.long)
            valid = torch.zeros(len(group), n - 1, dtype=torch.bool)
            for r, g in enumerate(group):
                ids[r, :len(g)] = torch.tensor(g)
                valid[r, :len(g) - 1] = True
            logits = model.forward(ids[:, :-1]).double()
            lp = torch.log_softmax(logits, -1)
            nll = -lp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            total += float(nll[valid].sum())
            count += int(valid.sum())
    return total, count


def train(args):
    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    p = dict(PRESETS[args.preset])
    out = args.out_dir
    os.makedirs(out, exist_ok=True)
    train_files, held_files = corpus_files()
    work = tempfile.mkdtemp(prefix="train_nano.")
    listing = os.path.join(work, "train.txt")
    with open(listing, "w", encoding="utf-8") as f:
        f.write("".join(x + "\n" for x in train_files))
    mt = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_tokenizer.py")
    subprocess.run([sys.executable, mt, out, "--merges", str(p["merges"]),
                    "--corpus-list", listing], check=True)
    t_tok = time.time()
    texts = [read_text(x) for x in train_files]
    held_texts = [read_text(x) for x in held_files]
    ids = tokenize(args.k3, out, texts)
    held_ids = tokenize(args.k3, out, held_texts)
    ranks = sum(1 for _ in open(os.path.join(out, "tiktoken.model"), encoding="ascii"))
    p["vocab_size"] = ranks + 256
    eos_doc = ranks + 1                                 # [EOS] separates the files
    stream = []
    for x in ids:
        stream.extend(x)
        stream.append(eos_doc)
    stream = torch.tensor(stream, dtype=torch.long)
    train_bytes = sum(len(t.encode("utf-8")) for t in texts)
    held_bytes = sum(len(t.encode("utf-8")) for t in held_texts)
    print(f"train_nano: {len(train_files)} training files, {train_bytes} bytes, "
          f"{len(stream)} tokens ({train_bytes / len(stream):.2f} bytes/token); "
          f"{len(held_files)} held out, {held_bytes} bytes; vocab {p['vocab_size']}",
          flush=True)

    _, text = mc.build_config(p)
    cfg = k3ref.Config(text)
    gen = torch.Generator().manual_seed(args.seed)
    w = init_params(cfg, gen)
    for t in w.values():
        t.requires_grad_(True)
    bias_names = [n for n in w if n.endswith("e_score_correction_bias")]
    for n in bias_names:
        w[n].requires_grad_(False)
    model = K3Torch(cfg, w)
    decay = [t for n, t in w.items() if t.requires_grad and t.dim() >= 2]
    no_decay = [t for n, t in w.items() if t.requires_grad and t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=p["lr"], betas=(0.9, 0.95))
    steps, qat_from = args.steps, args.steps - args.qat_steps
    warm = min(100, steps // 10 + 1)
    log = []
    ema = None
    t_train = time.time()
    for step in range(steps):
        lr = p["lr"] * min(1.0, (step + 1) / warm) * (
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        model.quant = step >= qat_from
        seqs = batches(stream, len(stream), p["batch"], p["seq"], gen)
        loss = seq_loss(model, seqs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decay + no_decay, 1.0)
        opt.step()
        with torch.no_grad():
            for n in bias_names:
                i = int(n.split(".")[2])
                load = torch.bincount(model.last_selected[i].reshape(-1),
                                      minlength=cfg.num_experts).float()
                w[n] += BIAS_RATE * torch.sign(load.mean() - load)
        v = float(loss)
        ema = v if ema is None else 0.98 * ema + 0.02 * v
        if step % 50 == 0 or step == steps - 1:
            el = time.time() - t_train
            print(f"step {step:5d}  loss {v:.4f}  ema {ema:.4f}  lr {lr:.2e}  "
                  f"{'qat ' if model.quant else ''}{el:.0f}s", flush=True)
            log.append({"step": step, "loss": v, "ema": ema, "seconds": round(el, 1)})
    t_done = time.time()
    export(out, p, {n: t.detach() for n, t in w.items()}, args.seed)
    # Evaluate what was written: the stored values, decoded exactly, in float64.
    cfg2, w2 = load_params(out, torch.float32)
    check_experts(w, w2, cfg2)
    m2 = K3Torch(cfg2, w2)
    tb = token_bytes(os.path.join(out, "tiktoken.model"))
    sub = list(range(0, len(ids), max(1, len(ids) // 16)))[:16]
    tr_nll, tr_n = eval_segments(m2, [ids[j][:EVAL_TOKENS + 1] for j in sub], EVAL_TOKENS)
    held_pre = [x[:EVAL_TOKENS + 1] for x in held_ids]
    ho_nll, ho_n = eval_segments(m2, held_pre, EVAL_TOKENS)
    ho_bytes = sum(len(tb[t]) for x in held_pre for t in x[1:])
    result = {
        "preset": args.preset, "seed": args.seed, "steps": steps, "qat_steps": args.qat_steps,
        "threads": args.threads, "batch": p["batch"], "seq": p["seq"], "lr": p["lr"],
        "train_files": len(train_files), "held_out_files": len(held_files),
        "train_tokens": len(stream), "train_bytes": train_bytes,
        "held_out_tokens": sum(len(x) for x in held_ids), "held_out_bytes": held_bytes,
        "final_train_loss_ema": ema,
        "eval_tokens_per_file": EVAL_TOKENS,
        "train_sample_loss": tr_nll / tr_n, "held_out_loss": ho_nll / ho_n,
        "held_out_predicted_tokens": ho_n, "held_out_predicted_bytes": ho_bytes,
        "held_out_bits_per_byte": ho_nll / math.log(2) / ho_bytes,
        "held_out_prefix_bytes": [sum(len(tb[t]) for t in x) for x in held_pre],
        "seconds_tokenizer": round(t_tok - t_start, 1),
        "seconds_train": round(t_done - t_train, 1),
        "seconds_total": round(time.time() - t_start, 1),
        "held_out": [os.path.relpath(x, CORPUS_ROOT) for x in held_files],
        "log": log,
    }
    with open(os.path.join(out, "train_log.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("log", "held_out")},
                     indent=1))
    return 0


def check_experts(w, w2, cfg):
    """The shipped experts are the values QAT trained through (mxfp4_fake)."""
    for n in w:
        if ".experts." in n:
            a = mxfp4_fake(w[n].detach()).to(w2[n].dtype)
            if not torch.equal(a, w2[n]):
                raise SystemExit(f"train_nano: {n}: stored MXFP4 differs from mxfp4_fake")


def evaluate(args):
    """Per-token log-loss (nats, float64) and greedy ids of one file's first tokens."""
    torch.set_num_threads(args.threads)
    cfg, w = load_params(args.eval)
    ids = tokenize(args.k3, args.eval, [read_text(args.file)])[0][:args.max_tokens]
    model = K3Torch(cfg, w)
    with torch.no_grad():
        logits = model.forward(torch.tensor([ids]))[0]
    lp = torch.log_softmax(logits, -1)
    nll = -lp[:-1].gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1)
    res = {"ids": ids, "nll": [float(x) for x in nll],
           "greedy": [int(x) for x in logits.argmax(-1)]}
    with open(args.losses, "w", encoding="utf-8") as f:
        json.dump(res, f)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="train k3-nano")
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--k3", required=True, help="the k3 binary (its tokenizer encodes the data)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=560)
    ap.add_argument("--qat-steps", type=int, default=100)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="nano")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval", metavar="MODEL_DIR")
    ap.add_argument("--file")
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--losses", help="--eval: JSON output {ids, nll, greedy}")
    args = ap.parse_args(argv)
    if args.eval:
        if not args.file or not args.losses:
            ap.error("--eval needs --file and --losses")
        return evaluate(args)
    if not args.out_dir:
        ap.error("give OUT_DIR")
    if args.qat_steps > args.steps:
        ap.error("--qat-steps must be <= --steps")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
