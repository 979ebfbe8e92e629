#!/usr/bin/python3
"""Self-test of tools/k3vision_ref.py (docs/VISION.md) and make_checkpoint.py --vision.
Plain python; prints one line per check; exits 1 on any failure.

  /usr/bin/python3 tests/ref/test_vision_reference.py [--keep DIR]

Independent checks: the resize against Pillow itself (same filter, exact uint8
equality), the position-table interpolation against torch's F.interpolate, and the whole
encoder + projector against a torch re-statement written the way the release's modeling
code computes (Conv2d patch embedding, complex-number RoPE, F.interpolate, F.gelu) in
float64 on the same weights.
"""

import gzip
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
import k3vision_ref as V  # noqa: E402
import make_checkpoint  # noqa: E402

RELEASE = os.path.normpath(os.path.join(ROOT, "..", "shared", "k3-release"))
FAILS = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))
    if not ok:
        FAILS.append(name)


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# ----------------------------------------------------------------------------
# §2 tensors against the release's index
# ----------------------------------------------------------------------------

def test_release_names():
    path = os.path.join(RELEASE, "model.safetensors.index.json.gz")
    with open(os.path.join(RELEASE, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    vc = V.VisionConfig(raw["vision_config"], raw["text_config"]["hidden_size"],
                        raw["media_placeholder_token_id"])
    want = V.expected_vision_tensors(vc)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        names = {n for n in json.load(f)["weight_map"] if not n.startswith("language_model.")}
    check("release: §2.2 names are exactly the index's 168 vision names",
          set(want) == names and len(names) == 168,
          f"{len(want)} expected, {len(names)} in the index, "
          f"{len(set(want) ^ names)} differ")
    n = sum(int(np.prod(s)) for _, s in want.values())
    check("release: vision parameter count 447,358,976 (VISION.md §2.3)", n == 447_358_976,
          f"{n:,} parameters, {2 * n:,} bytes BF16")
    check("release: head width 128, merged width 4096",
          vc.head_dim == 128 and vc.merged_width == 4096)


# ----------------------------------------------------------------------------
# §3 processor
# ----------------------------------------------------------------------------

def test_plan():
    cases = {(448, 448): (448, 448, 0, 0, 32, 32, 256),
             (1920, 1080): (1920, 1080, 12, 12, 78, 138, 2691),
             (10000, 300): (7168, 215, 0, 9, 16, 512, 2048),
             (1, 1): (1, 1, 27, 27, 2, 2, 1)}
    for (w, h), want in cases.items():
        p = V.resize_plan(w, h)
        got = (p["new_width"], p["new_height"], p["pad_width"], p["pad_height"], p["grid_h"],
               p["grid_w"], p["tokens"])
        check(f"plan {w}x{h}", got == want, f"{got}")
    r = np.random.default_rng(5)
    bad = []
    for _ in range(2000):
        w, h = (int(x) for x in np.exp(r.uniform(0, 10.5, 2)))
        p = V.resize_plan(max(w, 1), max(h, 1))
        pw, ph = p["new_width"] + p["pad_width"], p["new_height"] + p["pad_height"]
        if pw % 28 or ph % 28 or p["grid_w"] > 512 or p["grid_h"] > 512 \
                or p["new_width"] > max(w, 1) or p["new_height"] > max(h, 1) \
                or p["tokens"] > 65536 // 4 + 512:
            bad.append((w, h, p))
    check("plan invariants over 2000 random sizes", not bad, f"{bad[:2]}")


def test_resize_against_pillow():
    from PIL import Image
    r = np.random.default_rng(11)
    sizes = [((20, 30), (7, 11)), ((13, 17), (40, 29)), ((50, 5), (50, 3)), ((9, 9), (33, 9)),
             ((200, 3), (61, 200)), ((31, 64), (64, 13)), ((97, 45), (28, 56)),
             ((3, 400), (1, 1)), ((16, 16), (16, 16))]
    worst = 0
    for (h, w), (nw, nh) in sizes:
        a = r.integers(0, 256, (h, w, 3), dtype=np.uint8)
        a[::5] = 255                                   # saturated rows: the clamps engage
        a[:, ::7] = 0
        want = np.asarray(Image.fromarray(a, "RGB").resize((nw, nh), Image.Resampling.BICUBIC))
        got = V.pil_bicubic_resize(a, nw, nh)
        worst = max(worst, int(np.abs(want.astype(int) - got).max()))
    check("bicubic resize equals Pillow's BICUBIC exactly (9 size pairs)", worst == 0,
          f"max |diff| {worst}")
    worst = 0
    for (h, w), (nw, nh) in sizes:
        a = r.integers(0, 256, (h, w, 4), dtype=np.uint8)
        a[..., 3][r.random((h, w)) < 0.3] = 0          # a = 0 and 255 are special cases
        a[..., 3][r.random((h, w)) < 0.3] = 255
        want = np.asarray(Image.fromarray(a, "RGBA").resize((nw, nh), Image.Resampling.BICUBIC))
        worst = max(worst, int(np.abs(want.astype(int) - V.pil_bicubic_resize(a, nw, nh)).max()))
    check("RGBA resize (premultiplied) equals Pillow's exactly (9 size pairs)", worst == 0,
          f"max |diff| {worst}")
    a = np.zeros((9, 17, 4), dtype=np.uint8)
    a[..., 0] = 200
    a[:, 16, 3] = 255
    got = V.fill_transparent_background(a)
    rgb = r.integers(0, 256, (40, 90, 3), dtype=np.uint8)
    opaque = np.concatenate([rgb, np.full((40, 90, 1), 255, np.uint8)], axis=2)
    check("transparency: an opaque RGBA image resizes and composites to its RGB",
          np.array_equal(V.fill_transparent_background(V.pil_bicubic_resize(opaque, 17, 13)),
                         V.pil_bicubic_resize(rgb, 17, 13))
          and np.array_equal(V.preprocess_image(opaque, patch=7)[0],
                             V.preprocess_image(rgb, patch=7)[0]))
    check("transparency: alpha 0 shows the chessboard (white at the top left, 180 beside)",
          got[0, 0, 0] == 255 and got[0, 8, 0] == 180 and got[8, 0, 1] == 180
          and got[8, 8, 2] == 255 and got[0, 16, 0] == 200, f"{got[0, [0, 8, 16], 0]}")
    # The processor's whole path on a real image size: plan, resize, pad, normalise.
    a = r.integers(0, 256, (1100, 60, 3), dtype=np.uint8)
    patches, grid, plan = V.preprocess_image(a)
    want = np.asarray(Image.fromarray(a).resize((plan["new_width"], plan["new_height"]),
                                                Image.Resampling.BICUBIC))
    x = (np.pad(want, ((0, plan["pad_height"]), (0, plan["pad_width"]), (0, 0)))
         .astype(np.float32) / 255.0)
    x -= np.array([0.5, 0.5, 0.5])
    x *= 1.0 / np.array([0.5, 0.5, 0.5])               # the processor's numpy steps
    gh, gw = grid[1], grid[2]
    ref = x.reshape(gh, 14, gw, 14, 3).transpose(0, 2, 4, 1, 3).reshape(-1, 3, 14, 14)
    check("preprocess 60x1100: normalised patches equal the processor's numpy pipeline",
          np.array_equal(ref.astype(np.float64), patches) and grid == (1, gh, gw),
          f"grid {grid}, plan {plan}")
    check("padding normalises to -1 exactly",
          plan["pad_width"] > 0 and np.all(patches.reshape(gh, gw, 3, 14, 14)[:, -1, :, :, -1]
                                           == -1.0))


def test_patchify_order():
    x = np.arange(4 * 6 * 3, dtype=np.float64).reshape(4, 6, 3)
    p, grid = V.patchify(x, 2)
    ok = grid == (1, 2, 3)
    for gy in range(2):
        for gx in range(3):
            for c in range(3):
                for py in range(2):
                    for px in range(2):
                        ok &= p[gy * 3 + gx, c, py, px] == x[gy * 2 + py, gx * 2 + px, c]
    check("patchify: row-major patches, channel-major inside", bool(ok))


# ----------------------------------------------------------------------------
# §5 pieces
# ----------------------------------------------------------------------------

def test_interpolation_against_torch():
    import torch
    import torch.nn.functional as F
    r = np.random.default_rng(3)
    table = r.standard_normal((64, 64, 5))
    check("pos table: 64x64 is the identity", np.array_equal(V.interp_pos_table(table, 64, 64),
                                                             table))
    t6 = r.standard_normal((6, 8, 4))
    worst = 0.0
    for h, w in ((64, 64), (23, 41), (100, 7), (2, 2), (64, 130), (1, 64), (6, 8), (12, 4)):
        src = t6 if (h, w) in ((6, 8), (12, 4)) else table
        ours = V.interp_pos_table(src, h, w)
        th = F.interpolate(torch.from_numpy(src).permute(2, 0, 1).unsqueeze(0), size=(h, w),
                           mode="bilinear").squeeze(0).permute(1, 2, 0).numpy()
        worst = max(worst, float(np.abs(ours - th).max()))
    check("pos table: bilinear equals torch F.interpolate(bilinear, align_corners False)",
          worst < 1e-12, f"max |diff| {worst:.2e} over 8 sizes (up, down, non-square)")
    tw = V.time_embedding(8, 3)
    check("time embedding row 0 is [0]*D/2 ++ [1]*D/2",
          np.array_equal(tw[0], np.r_[np.zeros(4), np.ones(4)]))
    pe1 = V.pos_embedding(t6, 3, 1, 4, 6)
    pe2 = V.pos_embedding(t6, 3, 2, 4, 6)
    check("one frame: no time embedding; two frames: frame f gets time row f",
          np.array_equal(pe1, V.interp_pos_table(t6, 4, 6).reshape(24, 4))
          and np.allclose(pe2[24:], pe1 + V.time_embedding(4, 2)[1], rtol=0, atol=1e-15)
          and np.allclose(pe2[:24], pe1 + V.time_embedding(4, 2)[0], rtol=0, atol=1e-15))


def test_rope():
    r = np.random.default_rng(4)
    hd = 16
    ang = V.rope_angles(5, 7, hd)
    x = r.standard_normal((35, 2, hd))
    y = V.apply_rope(x, ang)
    check("rope: position (0,0) is the identity", np.array_equal(y[0], x[0]))
    check("rope: rotations keep every pair's length",
          np.allclose(np.hypot(y[..., 0::2], y[..., 1::2]), np.hypot(x[..., 0::2], x[..., 1::2]),
                      rtol=1e-13, atol=0))
    # q.k depends only on the offset: (y,x)=(1,2) vs (3,1) equals (2,4) vs (4,3).
    q, k = r.standard_normal(hd), r.standard_normal(hd)
    big = V.rope_angles(8, 8, hd)

    def dot(pq, pk):
        a = V.apply_rope(q[None, None, :], big[pq:pq + 1])[0, 0]
        b = V.apply_rope(k[None, None, :], big[pk:pk + 1])[0, 0]
        return a @ b
    d1, d2 = dot(1 * 8 + 2, 3 * 8 + 1), dot(2 * 8 + 4, 4 * 8 + 3)
    check("rope: q.k depends on the relative 2D offset only", abs(d1 - d2) < 1e-12,
          f"{d1:.6f} vs {d2:.6f}")
    check("rope: pair 0 turns with x (column), pair 1 with y (row)",
          ang[1, 0] == 1.0 and ang[1, 1] == 0.0 and ang[7, 0] == 0.0 and ang[7, 1] == 1.0)


# ----------------------------------------------------------------------------
# The whole path on a --vision checkpoint
# ----------------------------------------------------------------------------

def torch_restatement(model, items):
    """The release's modeling code, re-stated in torch float64 (VISION.md §7 source 1)."""
    import torch
    import torch.nn.functional as F
    w = {k: torch.from_numpy(v) for k, v in model.w.items()}
    vc = model.cfg
    pix = torch.from_numpy(np.concatenate([p for p, _ in items]))
    x = F.conv2d(pix, w["vision_tower.patch_embed.proj.weight"], stride=vc.patch_size)
    x = x.view(x.size(0), -1)
    table = w["vision_tower.patch_embed.pos_emb.weight"]
    half = vc.vt_hidden_size // 2
    omega = 1.0 / 10000 ** (torch.arange(half, dtype=torch.float64) / half)
    pos, cis = [], []
    dim = vc.head_dim
    freqs = 1.0 / (10000 ** (torch.arange(0, dim, 4, dtype=torch.float64)[:dim // 4] / dim))
    for _, (t, h, wd) in items:
        if (h, wd) == tuple(table.shape[:2]):
            p2 = table.flatten(end_dim=1)
        else:
            p2 = F.interpolate(table.permute(2, 0, 1).unsqueeze(0), size=(h, wd),
                               mode="bilinear").squeeze(0).permute(1, 2, 0).flatten(end_dim=1)
        if t > 1:
            tt = torch.arange(t, dtype=torch.float64)[:, None] * omega[None, :]
            tw = torch.cat([torch.sin(tt), torch.cos(tt)], 1)
            p2 = (p2.unsqueeze(0).repeat(t, 1, 1) + tw.unsqueeze(1)).reshape(-1, p2.shape[-1])
        pos.append(p2)
        flat = torch.arange(h * wd, dtype=torch.float64)
        xc = torch.polar(torch.ones(h * wd, dim // 4, dtype=torch.float64),
                         torch.outer(flat % wd, freqs))
        yc = torch.polar(torch.ones(h * wd, dim // 4, dtype=torch.float64),
                         torch.outer(torch.div(flat, wd, rounding_mode="floor"), freqs))
        cis.append(torch.stack([xc, yc], -1).reshape(h * wd, -1).repeat(t, 1))
    x = x + torch.cat(pos)
    cis = torch.cat(cis).unsqueeze(-2)
    seg = np.cumsum([0] + [t * h * wd for _, (t, h, wd) in items])
    eps = torch.finfo(torch.bfloat16).eps

    def norm(v, wt, e):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + e) * wt

    for i in range(vc.vt_num_hidden_layers):
        b = f"vision_tower.encoder.blocks.{i}."
        qkv = norm(x, w[b + "norm0.weight"], eps) @ w[b + "wqkv.weight"].T
        qkv = qkv.view(-1, 3, vc.vt_num_attention_heads, dim)
        q, k, v = qkv.unbind(1)
        q = torch.view_as_real(torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2).contiguous())
                               * cis).flatten(-2)
        k = torch.view_as_real(torch.view_as_complex(k.reshape(*k.shape[:-1], -1, 2).contiguous())
                               * cis).flatten(-2)
        mask = torch.zeros(x.shape[0], x.shape[0], dtype=torch.bool)
        for a0, a1 in zip(seg[:-1], seg[1:]):
            mask[a0:a1, a0:a1] = True
        s = torch.einsum("nhd,mhd->hnm", q, k) / math.sqrt(dim)
        s = s.masked_fill(~mask, float("-inf")).softmax(-1)
        o = torch.einsum("hnm,mhd->nhd", s, v).reshape(x.shape[0], -1)
        x = x + o @ w[b + "wo.weight"].T
        f = norm(x, w[b + "norm1.weight"], eps) @ w[b + "mlp.fc0.weight"].T
        x = x + F.gelu(f, approximate="tanh") @ w[b + "mlp.fc1.weight"].T
    x = norm(x, w["vision_tower.encoder.final_layernorm.weight"], eps)
    out = []
    for (a0, a1), (_, (t, h, wd)) in zip(zip(seg[:-1], seg[1:]), items):
        z = x[a0:a1].view(t, h // 2, 2, wd // 2, 2, -1).permute(0, 1, 3, 2, 4, 5).mean(0)
        z = z.reshape((h // 2) * (wd // 2), -1)
        u = F.gelu(z @ w["mm_projector.proj.0.weight"].T) @ w["mm_projector.proj.2.weight"].T
        out.append(norm(u, w["mm_projector.post_norm.weight"], vc.projector_eps).numpy())
    return out


def test_model(model_dir):
    events = {}
    model = V.VisionModel(model_dir,
                          trace=lambda kind, **kw: events.setdefault(kind, []).append(kw))
    vc = model.cfg
    p = vc.patch_size
    r = np.random.default_rng(7)
    grids = [(1, 4, 6), (2, 8, 4), (1, 6, 8), (3, 2, 2)]
    items = [(r.uniform(-1, 1, (t * h * w, 3, p, p)), (t, h, w)) for t, h, w in grids]
    out = model.encode(items)
    check("model: rows per item (h/2)(w/2), width text_hidden_size",
          [o.shape for o in out] == [((h // 2) * (w // 2), vc.text_hidden_size)
                                     for _, h, w in grids], f"{[o.shape for o in out]}")
    ref = torch_restatement(model, items)
    worst = max(rel(a, b) for a, b in zip(out, ref))
    check("model: equals the torch re-statement of the release code (4 items, t up to 3)",
          worst < 1e-12, f"max rel {worst:.2e}")
    alone = [model.encode([it])[0] for it in items]
    check("model: items do not see each other (encoded alone = encoded together)",
          max(rel(a, b) for a, b in zip(alone, out)) < 1e-13)
    swapped = model.encode(items[::-1])[::-1]
    check("model: item order only permutes the outputs",
          max(rel(a, b) for a, b in zip(swapped, out)) < 1e-13)
    rms_out = np.sqrt(np.mean(out[0] ** 2, axis=1)) / np.sqrt(
        np.mean(model.w["mm_projector.post_norm.weight"] ** 2))
    check("model: output rows are RMS-normalised (post_norm)",
          np.all((rms_out > 0.5) & (rms_out < 2)), f"{rms_out.min():.3f}..{rms_out.max():.3f}")

    # Every path matters: each variant must move the output by more than 1e-4, ten times
    # the 1e-5 relative tolerance the engine is held to (GELU tanh vs exact differ by at
    # most ~5e-4 anywhere, so their margin is the smallest).
    def variant(**patch):
        saved = {k: getattr(V, k) for k in patch}
        for k, v in patch.items():
            setattr(V, k, v)
        try:
            got = V.VisionModel.encode(model, items)
        finally:
            for k, v in saved.items():
                setattr(V, k, v)
        return max(rel(a, b) for a, b in zip(got, out))
    rope, gtanh, gerf = V.rope_angles, V.gelu_tanh, V.gelu_erf
    var = {
        "encoder eps 2^-7 vs 1e-6": variant(VIT_NORM_EPS=1e-6),
        "GELU exact in the projector vs tanh": variant(gelu_erf=gtanh),
        "GELU tanh in the MLP vs exact": variant(gelu_tanh=gerf),
        "RoPE x/y pairs swapped": variant(rope_angles=lambda h, w, d: rope(h, w, d)
                                          .reshape(h * w, -1, 2)[:, :, ::-1].reshape(h * w, -1)),
        "no time embedding": variant(time_embedding=lambda d, f: np.zeros((f, d))),
        "nearest instead of bilinear": variant(interp_pos_table=lambda t, h, w: t[
            (np.arange(h) * t.shape[0]) // h][:, (np.arange(w) * t.shape[1]) // w]),
        "align_corners true": variant(bilinear_axis=lambda n, m: [
            (int(math.floor(s)), min(int(math.floor(s)) + 1, n - 1),
             1 - (s - math.floor(s)), s - math.floor(s))
            for s in [o * (n - 1) / max(m - 1, 1) for o in range(m)]]),
    }
    for name, d in var.items():
        check(f"matters: {name}", d > 1e-4, f"rel change {d:.2e}")
    probs = [e["probs"] for e in events["attention"] if e["probs"].shape[-1] > 4]
    excess = np.mean([np.mean(pr.max(-1) - 1.0 / pr.shape[-1]) for pr in probs])
    check("matters: attention far from uniform", excess > 0.1, f"mean max-1/n {excess:.3f}")
    f = np.concatenate([np.ravel(e["values"]) for e in events["fc0"]])
    u = np.concatenate([np.ravel(e["values"]) for e in events["proj0"]])
    check("matters: GELU inputs reach both tails", np.mean(f < -2) > 0.02 and np.mean(f > 2) > 0.02
          and np.mean(u < -2) > 0.02, f"fc0 <-2 {np.mean(f < -2):.1%}, >2 {np.mean(f > 2):.1%}; "
          f"proj0 <-2 {np.mean(u < -2):.1%}")


def test_cli(model_dir, tmp):
    model = V.VisionModel(model_dir)
    p = model.cfg.patch_size
    r = np.random.default_rng(9)
    pix = r.uniform(-1, 1, (4 * 6 + 2 * 2 * 4, 3, p, p)).astype("<f4")
    pix.tofile(os.path.join(tmp, "pix.f32"))
    res = subprocess.run([sys.executable, os.path.join(TOOLS, "k3vision_ref.py"), model_dir,
                          "--pixels", os.path.join(tmp, "pix.f32"), "--grid", "1,4,6",
                          "--grid", "2,2,4", "--dump", os.path.join(tmp, "rows.f32")],
                         capture_output=True, text=True)
    rows = np.fromfile(os.path.join(tmp, "rows.f32"), dtype="<f4") if res.returncode == 0 else []
    want = np.concatenate(model.encode([(pix[:24].astype(np.float64), (1, 4, 6)),
                                        (pix[24:].astype(np.float64), (2, 2, 4))]))
    check("CLI: rows per item and dumped rows", res.stdout.strip() == "6 2"
          and np.allclose(np.reshape(rows, want.shape), want, rtol=1e-6, atol=1e-6),
          res.stdout.strip() + res.stderr.strip()[-200:])
    bad = subprocess.run([sys.executable, os.path.join(TOOLS, "k3vision_ref.py"), model_dir,
                          "--pixels", os.path.join(tmp, "pix.f32"), "--grid", "1,3,6"],
                         capture_output=True, text=True)
    check("CLI: a wrong grid is refused with exit 2", bad.returncode == 2, bad.stderr.strip())


def main():
    tmp = tempfile.mkdtemp(prefix="k3vision-")
    model_dir = os.path.join(tmp, "tiny-a-vision")
    make_checkpoint.make_checkpoint(model_dir, "tiny-a", seed=3, vision=True)
    model_b = os.path.join(tmp, "tiny-b-vision")
    make_checkpoint.make_checkpoint(model_b, "tiny-b", seed=4, n_shards=1, vision=True)
    test_release_names()
    test_plan()
    test_resize_against_pillow()
    test_patchify_order()
    test_interpolation_against_torch()
    test_rope()
    test_model(model_dir)
    out = V.VisionModel(model_b).encode([(np.zeros((4 * 6, 3, 3, 3)), (1, 4, 6))])[0]
    check("tiny-b --vision (one shard) loads and projects to its width 80", out.shape == (6, 80))
    test_cli(model_dir, tmp)
    print(f"{len(FAILS)} failed" if FAILS else "all vision reference checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
