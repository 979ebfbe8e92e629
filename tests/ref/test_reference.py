#!/usr/bin/python3
"""Self-test of tools/k3ref.py, make_checkpoint.py, make_kernel_fixtures.py and
compare_logits.py. Plain python; prints one line per check; exits 1 on any failure.

  /usr/bin/python3 tests/ref/test_reference.py
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
import k3ref  # noqa: E402
import make_checkpoint  # noqa: E402
import make_kernel_fixtures  # noqa: E402

PY = sys.executable
FAILS = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))
    if not ok:
        FAILS.append(name)


def rel_diff(a, b):
    return np.abs(a - b).max() / np.abs(a).max()


def prompt(vocab, n=24):
    return [(3 + 17 * j + 29 * j * j) % vocab for j in range(n)]


def run(*args):
    return subprocess.run([PY] + list(args), capture_output=True, text=True)


# ----------------------------------------------------------------------------

def test_modes(model_dir, label):
    """Full vs incremental: prompt logits, greedy ids and generation logits."""
    t0 = time.time()
    model = k3ref.Model(model_dir)
    ids = prompt(model.cfg.vocab_size)
    full = model.forward_full(ids)
    state = model.new_state()
    inc = np.array([model.step(state, t) for t in ids])
    check(f"{label}: prompt logits full vs incremental", rel_diff(full, inc) <= 1e-9,
          f"rel {rel_diff(full, inc):.2e}")
    gi, _, li = k3ref.generate(model, ids, 16, full=False)
    gf, _, lf = k3ref.generate(model, ids, 16, full=True)
    check(f"{label}: greedy 16 tokens equal in both modes", gi == gf, f"{gi}")
    check(f"{label}: generation logits full vs incremental", rel_diff(lf, li) <= 1e-9,
          f"rel {rel_diff(lf, li):.2e}")
    check(f"{label}: generation is not a constant loop", len(set(gi)) > 4, f"{len(set(gi))}")
    elapsed = time.time() - t0
    check(f"{label}: 24+16 tokens in both modes fast", elapsed < 30, f"{elapsed:.1f} s")


def test_cli(model_dir, tmp, label):
    vocab = k3ref.load_config(model_dir).vocab_size
    ids = ",".join(map(str, prompt(vocab)))
    outs = {}
    for mode in ("inc", "full"):
        extra = ["--full"] if mode == "full" else []
        r = run(os.path.join(TOOLS, "k3ref.py"), model_dir, "--ids", ids, "--gen", "5",
                "--dump-logits", os.path.join(tmp, mode + ".f32"),
                "--dump-prompt-logits", os.path.join(tmp, mode + "_p.f32"), *extra)
        outs[mode] = r.stdout.strip()
        check(f"{label}: CLI {mode} runs", r.returncode == 0, r.stderr.strip()[-200:])
    check(f"{label}: CLI ids equal in both modes", outs["inc"] == outs["full"], outs["inc"])
    rows = os.path.getsize(os.path.join(tmp, "inc.f32")) // (4 * vocab)
    prow = os.path.getsize(os.path.join(tmp, "inc_p.f32")) // (4 * vocab)
    check(f"{label}: dump row counts", (rows, prow) == (5, 24), f"{rows}, {prow}")
    first = np.fromfile(os.path.join(tmp, "inc.f32"), "<f4").reshape(-1, vocab)
    plog = np.fromfile(os.path.join(tmp, "inc_p.f32"), "<f4").reshape(-1, vocab)
    check(f"{label}: gen row 0 = last prompt row and chose token 0",
          np.array_equal(first[0], plog[-1]) and
          int(np.argmax(first[0])) == int(outs["inc"].split(",")[0]))
    for suffix in ("", "_p"):
        r = run(os.path.join(TOOLS, "compare_logits.py"), os.path.join(tmp, f"inc{suffix}.f32"),
                os.path.join(tmp, f"full{suffix}.f32"), "--vocab", str(vocab))
        check(f"{label}: compare_logits inc{suffix} vs full{suffix}", r.returncode == 0,
              r.stdout.strip().splitlines()[0] if r.stdout else r.stderr)
    bad = np.fromfile(os.path.join(tmp, "inc.f32"), "<f4")
    bad[7] += 1.0
    bad.tofile(os.path.join(tmp, "bad.f32"))
    r = run(os.path.join(TOOLS, "compare_logits.py"), os.path.join(tmp, "inc.f32"),
            os.path.join(tmp, "bad.f32"), "--vocab", str(vocab))
    check(f"{label}: compare_logits rejects a perturbed dump", r.returncode == 1)


def test_diagnostics(model_dir, label):
    for name, ok, msg in make_checkpoint.run_check(model_dir):
        check(f"{label}: --check {name}", ok, msg)


def test_kernels():
    rng = np.random.default_rng(5)
    T, nh, d, K = 7, 3, 8, 4
    C = nh * d
    args = [rng.standard_normal((T, C)) for _ in range(4)] + [rng.standard_normal((T, nh))]
    params = [rng.standard_normal((C, K)) * 0.5 for _ in range(3)] + [
        rng.standard_normal(d) * 0.3, rng.standard_normal(C) - 1.0, -5.0, nh, d]
    o_seq, S_seq = k3ref.kda_sequence(*args, *params)
    st = k3ref.KdaState(C, K, nh, d)
    o_tok = np.array([k3ref.kda_token(st, *(a[t] for a in args), *params) for t in range(T)])
    check("kda_sequence (transition form) vs kda_token (rank-1 form)",
          rel_diff(o_seq, o_tok) < 1e-12 and rel_diff(S_seq, st.S) < 1e-12,
          f"{rel_diff(o_seq, o_tok):.1e}")

    nope, rope, dv, R = 6, 4, 5, 12
    q = rng.standard_normal((T, nh, nope + rope))
    cache = rng.standard_normal((T, R + rope))
    kv_b = rng.standard_normal((nh * (nope + dv), R))
    kv = (cache[:, :R] @ kv_b.T).reshape(T, nh, nope + dv)
    k = np.concatenate([kv[..., :nope], np.broadcast_to(cache[:, None, R:], (T, nh, rope))], 2)
    scale = (nope + rope) ** -0.5
    o_exp = k3ref.mla_attention_expanded(q, k, kv[..., nope:], scale)
    o_lat = np.array([k3ref.mla_attention_latent(q[t], cache[:t + 1], kv_b, nope, dv, scale)
                      for t in range(T)])
    check("MLA expanded vs latent-absorbed attention", rel_diff(o_exp, o_lat) < 1e-12)

    s = np.array([0.5, 0.7, 0.6, 0.7, 0.1])
    idx, w = k3ref.router_topk(s, np.zeros(5), 2, 1.0)
    check("router top-k tie -> lower index", idx.tolist() == [1, 3] and abs(w.sum() - 1) < 1e-15)


def test_mxfp4():
    rng = np.random.default_rng(7)
    packed = rng.integers(0, 256, (16, 48), dtype=np.uint8)
    scale = rng.integers(100, 150, (16, 3), dtype=np.uint8)
    vals = k3ref.mxfp4_decode(packed, scale)
    p2, s2 = make_checkpoint.mxfp4_quantize(vals)
    check("mxfp4 quantise -> decode round-trip of grid values is exact",
          np.array_equal(k3ref.mxfp4_decode(p2, s2), vals))
    # rounding rules: amax mantissa 1.75 rounds the scale up (ties to even: 3.5 -> 4);
    # amax 1.7 keeps exponent -2 and clips 6.8 to 6; 0.75*0.25 is a tie -> code 2 (1.0)
    g = np.zeros((1, 32))
    g[0, :4] = [1.75, -0.3, 0.0, 0.1]
    g2 = np.zeros((1, 32))
    g2[0, :3] = [1.7, -0.1875, 0.3125]
    got = [k3ref.mxfp4_decode(*make_checkpoint.mxfp4_quantize(x))[0, :4] for x in (g, g2)]
    check("mxfp4 quantiser rounding rules",
          got[0].tolist() == [2.0, -0.25, 0.0, 0.0] and got[1].tolist() == [1.5, -0.25, 0.25, 0],
          f"{got[0].tolist()} {got[1].tolist()}")
    bad = np.zeros((1, 1), dtype=np.uint8) + 255
    try:
        k3ref.mxfp4_decode(np.zeros((1, 16), dtype=np.uint8), bad)
        check("mxfp4 scale 255 is an error", False)
    except k3ref.K3Error:
        check("mxfp4 scale 255 is an error", True)
    bits = make_checkpoint.bf16_encode(np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -2.0 ** -130]))
    check("bf16 encode rounds to nearest even",
          k3ref.bf16_decode(bits).tolist() == [1.0, 1 + 2.0 ** -6, -2.0 ** -130])


def test_format(tmp):
    """Release-format details: 96-shard naming, odd offsets, index total, flat config,
    missing-field errors, skipped vision tensors."""
    d96 = os.path.join(tmp, "a96")
    make_checkpoint.make_checkpoint(d96, "tiny-a", seed=0, n_shards=96)
    names = sorted(f for f in os.listdir(d96) if f.endswith(".safetensors"))
    check("96 shards named model-%05d-of-000096", len(names) == 96 and
          names[0] == "model-00001-of-000096.safetensors" and
          names[-1] == "model-00096-of-000096.safetensors")
    with open(os.path.join(d96, "model.safetensors.index.json")) as f:
        index = json.load(f)
    odd = total = 0
    for n in names:
        st = k3ref.SafetensorsFile(os.path.join(d96, n))
        odd += sum(e[2] % 2 for e in st.entries.values())
        total += sum(e[3] - e[2] for e in st.entries.values())
    check("many tensors at odd data offsets", odd > 100, f"{odd}")
    check("index total_size = sum of tensor bytes", index["metadata"]["total_size"] == total)
    wm = index["weight_map"]
    check("vision/mm tensors present", any(k.startswith("vision_tower.") for k in wm)
          and any(k.startswith("mm_projector.") for k in wm))

    d3 = os.path.join(tmp, "a3")
    make_checkpoint.make_checkpoint(d3, "tiny-a", seed=0, n_shards=3)
    ids = prompt(512, 6)
    ref = k3ref.Model(d3).forward_full(ids)
    check("96-shard and 3-shard checkpoints give identical logits",
          np.array_equal(ref, k3ref.Model(d96).forward_full(ids)))

    with open(os.path.join(d3, "config.json")) as f:
        top = json.load(f)
    flat = copy.deepcopy(top["text_config"])
    with open(os.path.join(d3, "config.json"), "w") as f:
        json.dump(flat, f)
    check("flat config accepted, same logits",
          np.array_equal(ref, k3ref.Model(d3).forward_full(ids)))
    for k in ("hidden_size", "rms_norm_eps"):
        del flat[k]
    del flat["linear_attn_config"]["kda_layers"]
    flat["num_experts"] = "16"
    try:
        k3ref.Config(flat)
        check("missing/mistyped config fields are all named", False)
    except k3ref.K3Error as e:
        msg = str(e)
        check("missing/mistyped config fields are all named",
              all(s in msg for s in ("hidden_size", "rms_norm_eps", "kda_layers", "num_experts")),
              msg)
    with open(os.path.join(d3, "config.json"), "w") as f:
        json.dump(dict(top, text_config=dict(top["text_config"], kv_lora_rank=48)), f)
    try:
        k3ref.Model(d3)
        check("config/tensor shape mismatch fails loudly", False)
    except k3ref.K3Error as e:
        check("config/tensor shape mismatch fails loudly", "kv_a_proj" in str(e), str(e))


def test_fixtures(tmp):
    out = [os.path.join(tmp, f"k{i}.json") for i in range(2)]
    for o in out:
        make_kernel_fixtures.main(["x", o])
    a, b = (open(o, "rb").read() for o in out)
    check("kernel fixtures byte-reproducible", a == b and len(a) < 200_000, f"{len(a)} bytes")
    committed = os.path.join(ROOT, "tests", "fixtures", "kernels.json")
    if os.path.exists(committed):
        check("committed kernels.json is up to date", open(committed, "rb").read() == a)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_kernels()
        test_mxfp4()
        for preset in ("tiny-a", "tiny-b"):
            d = os.path.join(tmp, preset)
            make_checkpoint.make_checkpoint(d, preset, seed=1)
            test_modes(d, preset)
            test_diagnostics(d, preset)
            os.makedirs(os.path.join(tmp, preset + "-cli"))
            test_cli(d, os.path.join(tmp, preset + "-cli"), preset)
        r = run(os.path.join(TOOLS, "make_checkpoint.py"), os.path.join(tmp, "c"),
                "--preset", "tiny-b", "--seed", "3", "--check")
        check("make_checkpoint --check CLI exits 0", r.returncode == 0,
              f"{r.stdout.count(' ok ')} diagnostics ok")
        test_format(tmp)
        test_fixtures(tmp)
    print(f"{len(FAILS)} failed" + (f": {FAILS}" if FAILS else ""))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
