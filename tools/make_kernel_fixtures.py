#!/usr/bin/python3
"""make_kernel_fixtures: small deterministic test vectors for each K3 kernel.

  /usr/bin/python3 tools/make_kernel_fixtures.py [OUT]    (default tests/fixtures/kernels.json)

Inputs come from a self-written splitmix64 PRNG as k / 2^m with |k| <= 255, so every
input is exact in BF16 and float32 and the file is the same on any machine. Outputs are
computed in float64 by tools/k3ref.py and written rounded to 12 significant digits (so
last-ulp differences between libm/BLAS builds cannot change a byte); exact outputs
(BF16 / MXFP4 decodes, indices) are written exactly. Running twice gives identical bytes.

Layout: {"doc": ..., "fixtures": {name: {"doc", "params", "inputs", "outputs"}}}; every
array is {"shape": [...], "data": [...]} with data flattened row-major.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402

MASK64 = (1 << 64) - 1


class SplitMix64:
    """splitmix64; values() draws k / 2^m with k uniform in [-255, 255]."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def ints(self, shape, lo, hi):
        n = int(np.prod(shape))
        return np.array([lo + self.next() % (hi - lo + 1) for _ in range(n)],
                        dtype=np.int64).reshape(shape)

    def values(self, shape, m, offset=0.0):
        """float64 array of k/2^m (+ offset, itself a short dyadic), k in [-255, 255]."""
        return np.ldexp(self.ints(shape, -255, 255).astype(np.float64), -m) + offset


def arr(x, exact=False):
    """JSON array record; computed values are rounded to 12 significant digits."""
    a = np.asarray(x)
    if a.dtype.kind in "iub":
        data = [int(v) for v in a.ravel()]
    elif exact:
        data = [float(v) for v in a.ravel()]
    else:
        data = [float("%.12g" % v) for v in a.ravel()]
    return {"shape": list(a.shape), "data": data}


def fixture(doc, params, inputs, outputs):
    return {"doc": doc, "params": params,
            "inputs": {k: arr(v, exact=True) for k, v in inputs.items()},
            "outputs": outputs}


# ----------------------------------------------------------------------------

def fx_bf16(rng):
    bits = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x4049, 0x0001, 0x007F, 0x0080, 0x7F7F, 0xFF7F,
            0x3F81, 0x4000, 0xC2F7, 0x3E80]
    bits += [int(b) for b in rng.ints((10,), 0, 0xFFFF) if (b >> 7) & 0xFF != 0xFF]
    bits = np.array(bits, dtype=np.uint16)
    return fixture("bf16 bit patterns (uint16) -> value: float32 with bits << 16. Includes "
                   "+-0, subnormals (0x0001 = 2^-133), min normal, +-max finite.",
                   {}, {"bits": bits}, {"value": arr(k3ref.bf16_decode(bits), exact=True)})


def fx_mxfp4(rng):
    row0 = [(j & 15) | (((7 * j + 3) & 15) << 4) for j in range(32)]
    packed = np.array([row0, list(rng.ints((32,), 0, 255))], dtype=np.uint8)
    scale = np.array([[127, 120], [131, 100]], dtype=np.uint8)
    return fixture(
        "MXFP4 decode. packed [rows, n/2] u8: byte j holds element 2j in the LOW nibble, "
        "2j+1 in the HIGH nibble; nibble bit3 = sign, bits0-2 index E2M1 "
        "{0,.5,1,1.5,2,3,4,6}. scale [rows, n/32] u8 e: elements 32g..32g+31 times "
        "2^(e-127). value [rows, n] exact.",
        {}, {"packed": packed, "scale": scale},
        {"value": arr(k3ref.mxfp4_decode(packed, scale), exact=True)})


def fx_mxfp4_order():
    packed = np.zeros((1, 16), dtype=np.uint8)
    packed[0, 0] = 0x71
    packed[0, 1] = 0x9A
    scale = np.array([[127]], dtype=np.uint8)
    return fixture(
        "Nibble order: byte 0 = 0x71 -> element 0 = +0.5 (LOW nibble 1), element 1 = +6 "
        "(HIGH nibble 7); byte 1 = 0x9A -> element 2 = -1 (nibble A), element 3 = -0.5 "
        "(nibble 9); the rest 0; scale 127 (x1). Same layout as mxfp4_decode.",
        {}, {"packed": packed, "scale": scale},
        {"value": arr(k3ref.mxfp4_decode(packed, scale), exact=True)})


def fx_rms(rng):
    x = rng.values((3, 24), 7)
    x[2] = np.ldexp(x[2], -9)                         # tiny row: eps matters
    w = rng.values((24,), 8, 1.0)
    eps = 1e-5
    return fixture("rms(x, w, eps) = x / sqrt(mean(x^2) + eps) * w per row; x [3,24] "
                   "(row 2 is tiny so eps matters), w [24] -> out [3,24].",
                   {"eps": eps}, {"x": x, "w": w}, {"out": arr(k3ref.rms(x, w, eps))})


def fx_situ(b1, b2):
    gate = np.arange(49) * 0.5 - 12.0
    up = np.arange(49)[::-1] * 4.0 - 96.0
    return fixture("SiTU(gate, up) = b1 tanh(gate/b1) sigmoid(gate) * b2 tanh(up/b2), "
                   "elementwise over [49]; both caps engage at the ends.",
                   {"b1": b1, "b2": b2}, {"gate": gate, "up": up},
                   {"out": arr(k3ref.situ(gate, up, b1, b2))})


def fx_attnres(rng):
    src = rng.values((3, 16), 6)
    src[1] *= 4.0
    w = rng.values((16,), 8, 1.0)
    p = rng.values((16,), 8)
    eps = 1e-5
    out, probs = k3ref.attnres(src, w, p, eps)
    return fixture("AttnRes over 3 sources [3,16] with norm w [16], proj p [16]: "
                   "key_s = s / sqrt(mean(s^2)+eps); score_s = sum(key_s*w*p); "
                   "probs = softmax over sources [3]; out = sum probs_s * s (raw) [16].",
                   {"eps": eps}, {"sources": src, "norm_w": w, "proj": p},
                   {"probs": arr(probs), "out": arr(out)})


def fx_router(rng):
    logits = rng.values((8,), 7)
    s = k3ref.sigmoid(logits)
    k = 3
    order = np.argsort(-s, kind="stable")
    bias = np.zeros(8)
    bias[order[4]] = 0.5                              # the 5th-best expert gets picked
    idx, weights = k3ref.router_topk(s, bias, k, 1.0)
    plain, _ = k3ref.router_topk(s, np.zeros(8), k, 1.0)
    assert set(idx.tolist()) != set(plain.tolist())
    return fixture("Router: s = sigmoid(logits) [8]; pick top k of s + bias (ties -> lower "
                   "index), weights = s[picked] / (sum + 1e-20) * scaling. Here the bias "
                   "changes the pick (indices_without_bias is the unbiased top k). indices "
                   "are in selection order (descending s + bias).",
                   {"k": k, "scaling": 1.0}, {"logits": logits, "bias": bias},
                   {"s": arr(s), "indices": arr(idx), "weights": arr(weights),
                    "indices_without_bias": arr(plain)})


def fx_router_tie():
    logits = np.array([0.0, 1.0, 0.5, 1.0, 2.0, -1.0])
    bias = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 0.0])
    s = k3ref.sigmoid(logits)
    idx, weights = k3ref.router_topk(s, bias, 2, 2.5)
    assert idx.tolist() == [4, 1]
    return fixture("Router tie: expert 4 is first; experts 1 and 3 tie for the second and "
                   "last place; the lower index (1) wins. Same layout as router_topk; "
                   "scaling 2.5.",
                   {"k": 2, "scaling": 2.5}, {"logits": logits, "bias": bias},
                   {"s": arr(s), "indices": arr(idx), "weights": arr(weights)})


def fx_kda(rng):
    T, nh, d, K = 4, 2, 8, 4
    C = nh * d
    q_pre, k_pre, v_pre = (rng.values((T, C), 7) for _ in range(3))
    graw = rng.values((T, C), 7)
    beta_logits = rng.values((T, nh), 6)
    conv = [rng.values((C, 1, K), 8) for _ in range(3)]
    A_log = rng.values((d,), 8)
    A_log[nh:] = 3.0                                  # padding: must never be used
    dt_bias = rng.values((C,), 8, -1.5)
    lb = -5.0
    o, S = k3ref.kda_sequence(q_pre, k_pre, v_pre, graw, beta_logits,
                              *(c[:, 0, :] for c in conv), A_log, dt_bias, lb, nh, d)
    alpha = k3ref.kda_alpha(graw, A_log, dt_bias, lb, nh, d)
    qn, kn = k3ref.kda_qk_norm(
        k3ref.causal_conv_silu(q_pre, conv[0][:, 0]).reshape(T, nh, d),
        k3ref.causal_conv_silu(k_pre, conv[1][:, 0]).reshape(T, nh, d), d)
    v = k3ref.causal_conv_silu(v_pre, conv[2][:, 0]).reshape(T, nh, d)
    return fixture(
        "KDA over T=4 tokens, NH=2 heads, D=8 (C=16, channel = h*D + c), conv K=4, from "
        "zero state. Inputs are after the projections: q_pre/k_pre/v_pre/graw [T,C], "
        "beta_logits [T,NH], conv_q/k/v [C,1,K] (tap K-1 = current input), A_log [D] "
        "(only the first NH entries are used; the padding is 3.0 on purpose), dt_bias [C]. "
        "q,k,v = SiLU(causal conv); q,k L2-normalised per head (eps 1e-6 in the sqrt), "
        "q *= D^-0.5; alpha = exp(lb * sigmoid(exp(A_log[h]) * (graw + dt_bias))); "
        "beta = sigmoid(beta_logits); S = diag(alpha) S; S += outer(beta k, v - S^T k); "
        "o = S^T q. Outputs: o [T,NH,D] (before o_norm), S_final [NH,D(key),D(value)], "
        "intermediates alpha [T,NH,D], beta [T,NH], q [T,NH,D], k [T,NH,D], v [T,NH,D].",
        {"lower_bound": lb, "num_heads": nh, "head_dim": d},
        {"q_pre": q_pre, "k_pre": k_pre, "v_pre": v_pre, "graw": graw,
         "beta_logits": beta_logits, "conv_q": conv[0], "conv_k": conv[1], "conv_v": conv[2],
         "A_log": A_log, "dt_bias": dt_bias},
        {"o": arr(o), "S_final": arr(S), "alpha": arr(alpha),
         "beta": arr(k3ref.sigmoid(beta_logits)), "q": arr(qn), "k": arr(kn), "v": arr(v)})


def fx_mla(rng):
    T, nh, nope, rope, dv, R = 5, 2, 8, 4, 8, 16
    q = rng.values((T, nh, nope + rope), 7)
    c_raw = rng.values((T, R + rope), 7)
    ln = rng.values((R,), 8, 1.0)
    kv_b = rng.values((nh * (nope + dv), R), 8)
    eps = k3ref.MLA_LORA_NORM_EPS
    scale = (nope + rope) ** -0.5
    cache = np.concatenate([k3ref.rms(c_raw[:, :R], ln, eps), c_raw[:, R:]], axis=1)
    o = np.array([k3ref.mla_attention_latent(q[t], cache[:t + 1], kv_b, nope, dv, scale)
                  for t in range(T)])
    return fixture(
        "MLA attention over T=5 positions, NH=2, nope 8, rope 4, v 8, kv_lora_rank R=16. "
        "q [T,NH,nope+rope] per head [q_nope | q_rope]; c_raw [T,R+rope] = kv_a_proj_with_mqa "
        "output [latent | rope]; kv_a_layernorm [R]; kv_b [NH*(nope+v), R] per head "
        "[k_nope rows | v rows]. cache = [rms(latent, kv_a_layernorm, eps) | rope (raw, "
        "shared by all heads, unrotated)]; key_h = [kv_b k_nope rows . latent_normed | rope], "
        "value_h = kv_b v rows . latent_normed; position t attends 0..t with softmax(q.k * "
        "scale); o [T,NH,v] (before the output gate).",
        {"eps": eps, "scale": scale, "num_heads": nh, "qk_nope_head_dim": nope,
         "qk_rope_head_dim": rope, "v_head_dim": dv, "kv_lora_rank": R},
        {"q": q, "c_raw": c_raw, "kv_a_layernorm": ln, "kv_b": kv_b},
        {"cache": arr(cache), "o": arr(o)})


def fx_moe(rng):
    T, H, E, k, lat, inter, shared = 2, 8, 4, 2, 32, 32, 32
    eps, b1, b2, scaling = 1e-5, 4.0, 25.0, 1.0
    x = rng.values((T, H), 7)
    packed = {w: rng.ints((E, r, c // 2), 0, 255).astype(np.uint8)
              for w, (r, c) in (("w1", (inter, lat)), ("w3", (inter, lat)), ("w2", (lat, inter)))}
    scale = {w: np.full((E, packed[w].shape[1], packed[w].shape[2] * 2 // 32), e, np.uint8)
             for w, e in (("w1", 125), ("w3", 128), ("w2", 120))}
    inp = {"x": x, "gate": rng.values((E, H), 8), "bias": rng.values((E,), 10),
           "down_latent": rng.values((lat, H), 8), "norm": rng.values((lat,), 8, 1.0),
           "up_latent": rng.values((H, lat), 9), "shared_gate": rng.values((shared, H), 7),
           "shared_up": rng.values((shared, H), 4), "shared_down": rng.values((H, shared), 12)}
    for w in packed:
        inp[w + "_packed"], inp[w + "_scale"] = packed[w], scale[w]
    w = {n: v for n, v in inp.items() if n != "x" and not n.endswith(("_packed", "_scale"))}
    for n in packed:
        w[n] = np.stack([k3ref.mxfp4_decode(packed[n][e], scale[n][e]) for e in range(E)])
    out = k3ref.moe_block(x, w, k, scaling, eps, b1, b2)
    s = k3ref.sigmoid(x @ w["gate"].T)
    picks = [k3ref.router_topk(s[t], w["bias"], k, scaling) for t in range(T)]
    return fixture(
        "One MoE block on T=2 tokens, H=8, E=4 experts top 2, latent 32, expert width 32, "
        "shared width 32 (1 shared expert). gate [E,H], bias [E], down_latent [lat,H], "
        "w1/w3 (gate/up) packed [E,32,16] + scale [E,32,1], w2 (down) packed [E,32,16] + "
        "scale [E,32,1] (MXFP4 as in mxfp4_decode, per expert), norm [lat] "
        "(routed_expert_norm), up_latent [H,lat], shared_gate/shared_up [32,H], shared_down "
        "[H,32]. s = sigmoid(gate x); top k of s + bias; weights s/sum*scaling; "
        "z = down_latent x; y = sum w_j w2_j SiTU(w1_j z, w3_j z); y = rms(y, norm, eps); "
        "out = up_latent y + shared_down SiTU(shared_gate x, shared_up x). Outputs: indices "
        "[T,k] (selection order), weights [T,k], out [T,H]. Float inputs are BF16-exact.",
        {"k": k, "scaling": scaling, "eps": eps, "b1": b1, "b2": b2},
        inp,
        {"indices": arr(np.array([p[0] for p in picks])),
         "weights": arr(np.array([p[1] for p in picks])), "out": arr(out)})


SAMPLE_POSITIONS = [0, 1, 2, 3, 4, 5, 6, 7, 1 << 20, (1 << 20) + 1, 1 << 32, 1 << 40,
                    (1 << 40) + 1, (1 << 53) + 3, 1 << 62]
SAMPLE_SEEDS = [0, 5, 42, (1 << 63) - 1]
# temperature, top_k, top_p, min_p, repeat_penalty, frequency_penalty, presence_penalty
# (each exact in float32).
SAMPLE_CONFIGS = [(1.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0), (0.875, 6, 0.9375, 0.03125, 2.0, 0.0, 0.0),
                  (0.5, 0, 0.75, 0.0, 1.0, 0.0, 0.0), (1.5, 0, 1.0, 0.0625, 2.0, 0.0, 0.0),
                  (0.0, 0, 1.0, 0.0, 2.0, 0.0, 0.0), (1.0, 0, 1.0, 0.0, 1.0, 1.5, 0.75),
                  (0.0, 0, 1.0, 0.0, 1.25, 2.0, -0.5), (0.75, 4, 1.0, 0.0, 1.0, -1.0, 2.0)]
SAMPLE_MARGIN = 1e-5


def fx_sample(rng):
    V = 12
    logits = rng.values((3, V), 7)
    logits[2, 7] = logits[2, 3]                       # a tie, broken by the lower id
    recent = np.array([2, 7, 2, 99], dtype=np.int64)  # repeated and out-of-vocabulary ids
    uniform = [[seed, pos, k3ref.sample_bits53(seed, pos)]
               for seed in SAMPLE_SEEDS for pos in SAMPLE_POSITIONS]
    cases, dropped = [], 0
    for c, (t, k, tp, mp, rp, fp, pp) in enumerate(SAMPLE_CONFIGS):
        for row in range(len(logits)):
            for seed in SAMPLE_SEEDS[:2]:
                for pos in SAMPLE_POSITIONS:
                    tok, margin = k3ref.sample(logits[row], recent, seed, pos, t, k, tp, mp, rp,
                                               fp, pp)
                    if margin < SAMPLE_MARGIN:
                        dropped += 1
                        continue
                    cases.append([c, row, seed, pos, tok])
    # The position must matter: every sampling (config, row, seed) sees several tokens.
    for key in {tuple(x[:3]) for x in cases if SAMPLE_CONFIGS[x[0]][0] > 0}:
        assert len({x[4] for x in cases if tuple(x[:3]) == key}) > 1, key
    return fixture(
        "Sampler (include/k3/sample.h). uniform [N,3] rows (seed, position, k): the draw "
        "for (seed, position) is u = k / 2^53, k = mix(mix(seed + G) + (position + 1) G) "
        ">> 11 modulo 2^64 (G = 0x9E3779B97F4A7C15, mix = splitmix64's finalizer). "
        "configs [C,7] rows (temperature, top_k, top_p, min_p, repeat_penalty, "
        "frequency_penalty, presence_penalty); cases "
        "[M,5] rows (config, row of logits [R,V], seed, position, token): the token "
        "k3_sample picks with recent[] as the penalty window. Cases whose float64 "
        "decision lies within %g of a threshold are left out (%d here)."
        % (SAMPLE_MARGIN, dropped),
        {}, {"logits": logits, "recent": recent, "configs": np.array(SAMPLE_CONFIGS)},
        {"uniform": arr(np.array(uniform, dtype=np.int64)),
         "cases": arr(np.array(cases, dtype=np.int64))})


def build():
    rng = SplitMix64(0x4B33)
    fx = {
        "bf16_decode": fx_bf16(rng),
        "mxfp4_decode": fx_mxfp4(rng),
        "mxfp4_nibble_order": fx_mxfp4_order(),
        "rms": fx_rms(rng),
        "situ": fx_situ(4.0, 25.0),
        "situ_other_betas": fx_situ(3.0, 20.0),
        "attnres": fx_attnres(rng),
        "router_topk": fx_router(rng),
        "router_topk_tie": fx_router_tie(),
        "kda": fx_kda(rng),
        "mla": fx_mla(rng),
        "moe": fx_moe(rng),
        "sample": fx_sample(SplitMix64(0x53414D50)),
    }
    doc = ("K3 kernel test vectors from tools/make_kernel_fixtures.py (reference: "
           "tools/k3ref.py, float64). Each fixture: doc, params (scalars), inputs and "
           "outputs; every array is {shape, data} flattened row-major. Computed outputs "
           "are rounded to 12 significant digits.")
    lines = ['{"doc": %s,' % json.dumps(doc), '"fixtures": {']
    for i, (name, f) in enumerate(fx.items()):
        sep = "," if i + 1 < len(fx) else ""
        lines.append("%s: %s%s" % (json.dumps(name), json.dumps(f, separators=(",", ":")), sep))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    out = argv[1] if len(argv) > 1 else os.path.normpath(
        os.path.join(here, "..", "tests", "fixtures", "kernels.json"))
    text = build()
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {out} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
