#!/usr/bin/python3
"""vision_c_check: the C vision path (src/vision, through tests/progs/vision_check)
against Pillow and the float64 reference tools/k3vision_ref.py (docs/VISION.md §10).

  vision_c_check.py images VISION_CHECK WORKDIR
      decoding: every PNG and JPEG mode Pillow writes decodes to Pillow's own pixels
      (RGB, or RGBA where the image has transparency), byte for byte; the processor
      (§3: plan, BICUBIC, transparency, padding, normalisation, patches) equals
      k3vision_ref.preprocess_image bit for bit on shrinking, one-axis, unchanged and
      RGBA images at patch sides 3 and 14; hostile files (100k x 100k header, zero
      size, truncated PNG and JPEG, CMYK, 16-bit, animated, not an image, empty) are
      exit 2 with a message naming the problem.

  vision_c_check.py encode VISION_CHECK MODEL WORKDIR
      the encoder and projector (§5) on a make_checkpoint.py --vision model, against
      k3vision_ref.VisionModel (float64): images of three sizes through the processor
      (grids 4x6 and 8x10: the position table interpolated; 6x8: the table as
      stored), two images in one call, and a 3-frame item (t > 1: the time embedding
      and the temporal mean), each item within 1e-5 of max|reference| (BOUND); the
      rows of the two-image call bit-identical to each image alone; every call
      bit-identical at 1 and 2 threads and under every kernel table the CPU runs
      (K3_KERNELS).

  vision_c_check.py cli K3 VISION_CHECK EMBEDS_CHECK MODEL TEXT_MODEL TOKDIR WORKDIR
      `k3 MODEL --image A.png --image B.jpg --prompt TEXT`: the prompt ids are each
      image's markup (§4 steps 1-2: <|media_begin|>, "image WxH" of the decoded size,
      <|media_content|>, the pad repeated for the image's rows, <|media_end|>) then the
      text (one image resized: the markup shows the decoded size); the prompt's last
      logits (the first row of --dump-logits) are byte-identical to feeding those
      ids with the images' rows from vision_check (embeds_check --feed); refusals exit
      2 naming the problem: a truncated image, a model without vision_config, --image
      with --ids, --image without a prompt.

Exit 0 when every check holds; 1 naming the first that fails.
"""

import io
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import k3vision_ref  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def test_image(w, h, mode, seed):
    """A deterministic picture: smooth gradients plus noise, so both the resize's
    smoothing and its clamping matter."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(1, w - 1)), (y * 255 // max(1, h - 1)),
                     ((x + y) * 7) % 256], axis=2).astype(np.int64)
    noise = rng.integers(-60, 61, size=(h, w, 3))
    rgb = np.clip(base + noise, 0, 255).astype(np.uint8)
    if mode == "RGBA":
        a = rng.integers(0, 256, size=(h, w, 1)).astype(np.uint8)
        a[: h // 3] = 255
        a[h // 3: h // 2] = 0
        return Image.fromarray(np.concatenate([rgb, a], axis=2), "RGBA")
    return Image.fromarray(rgb, "RGB").convert(mode) if mode != "RGB" else \
        Image.fromarray(rgb, "RGB")


def decode_cases():
    """(name, file bytes, Pillow's expected pixels)."""
    cases = []

    def add(name, img, fmt, expect_mode, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        data = buf.getvalue()
        want = np.asarray(Image.open(io.BytesIO(data)).convert(expect_mode))
        cases.append((name, data, want))

    add("rgb.png", test_image(37, 23, "RGB", 1), "PNG", "RGB")
    add("rgba.png", test_image(31, 29, "RGBA", 2), "PNG", "RGBA")
    add("gray.png", test_image(19, 17, "L", 3), "PNG", "RGB")
    add("la.png", test_image(21, 13, "RGBA", 4).convert("LA"), "PNG", "RGBA")
    add("bilevel.png", test_image(33, 9, "1", 5), "PNG", "RGB")
    add("palette.png", test_image(25, 20, "RGB", 6).quantize(16), "PNG", "RGB")
    pt = test_image(25, 20, "RGB", 7).quantize(16)
    add("palette-trns.png", pt, "PNG", "RGBA", transparency=3)
    add("rgb-trns.png", test_image(16, 16, "RGB", 8), "PNG", "RGBA",
        transparency=(0, 0, 0))
    add("gray-trns.png", test_image(16, 16, "L", 9), "PNG", "RGBA", transparency=5)
    add("rgb.jpg", test_image(45, 31, "RGB", 10), "JPEG", "RGB", quality=90)
    add("rgb444.jpg", test_image(40, 30, "RGB", 11), "JPEG", "RGB", quality=75,
        subsampling=0)
    add("progressive.jpg", test_image(50, 34, "RGB", 12), "JPEG", "RGB", progressive=True)
    add("gray.jpg", test_image(23, 41, "L", 13), "JPEG", "RGB")
    return cases


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def png_header_only(w, h, depth=8, color=2):
    return (b"\x89PNG\r\n\x1a\n" +
            png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + png_chunk(b"IEND", b""))


def jpeg_with_size(data, w, h):
    """The JPEG with its SOF0 frame size replaced."""
    i = data.index(b"\xff\xc0")
    return data[:i + 5] + struct.pack(">HH", h, w) + data[i + 9:]


def hostile_cases():
    """(name, bytes, pattern the message must contain)."""
    jpg = io.BytesIO()
    test_image(32, 32, "RGB", 20).save(jpg, "JPEG")
    jpg = jpg.getvalue()
    png = io.BytesIO()
    test_image(64, 64, "RGB", 21).save(png, "PNG")
    png = png.getvalue()
    cmyk = io.BytesIO()
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save(cmyk, "JPEG")
    p16 = io.BytesIO()
    Image.fromarray(np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000).save(p16, "PNG")
    apng = io.BytesIO()
    frames = [test_image(8, 8, "RGB", 30 + i) for i in range(3)]
    frames[0].save(apng, "PNG", save_all=True, append_images=frames[1:])
    return [
        ("huge.png", png_header_only(100000, 100000), "above k3's limit"),
        ("huge.jpg", jpeg_with_size(jpg, 60000, 60000), "above k3's limit"),
        ("zero.png", png_header_only(0, 10), "PNG: .*IHDR"),
        ("zero.jpg", jpeg_with_size(jpg, 0, 32), "JPEG: Empty"),
        ("truncated.png", png[:len(png) // 2], "truncated"),
        ("truncated.jpg", jpg[:len(jpg) // 2], "JPEG: .*(Premature|premature)"),
        ("cmyk.jpg", cmyk.getvalue(), "CMYK"),
        ("16bit.png", p16.getvalue(), "16-bit"),
        ("animated.png", apng.getvalue(), "animated"),
        ("text.png", b"hello, this is not an image", "not a PNG or JPEG"),
        ("empty.png", b"", "empty"),
    ]


def check_images(tool, work):
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "out.bin")
    for name, data, want in decode_cases():
        path = os.path.join(work, name)
        open(path, "wb").write(data)
        r = run(tool, "decode", path, out)
        if r.returncode != 0:
            fail(f"decode {name}: exit {r.returncode}: {r.stderr.strip()}")
        w, h, c = (int(v) for v in r.stdout.split())
        got = np.fromfile(out, dtype=np.uint8)
        if (h, w, c) != want.shape or not np.array_equal(got.reshape(h, w, c), want):
            diff = "shape" if (h, w, c) != want.shape else \
                int(np.count_nonzero(got.reshape(want.shape) != want))
            fail(f"decode {name}: {w}x{h}x{c} differs from Pillow's {want.shape} ({diff})")
    print(f"decode: {len(decode_cases())} PNG/JPEG files equal Pillow's pixels")

    import re
    for i, (name, data, pat) in enumerate(hostile_cases()):
        path = os.path.join(work, f"hostile{i}")   # no hint in the name: the message says it
        open(path, "wb").write(data)
        r = run(tool, "decode", path, out)
        if r.returncode != 2 or not re.search(pat, r.stderr):
            fail(f"hostile {name}: wanted exit 2 matching /{pat}/, got {r.returncode}: "
                 f"{r.stderr.strip()}")
        print(f"  refused {name}: {r.stderr.strip()[:110]}")

    sizes = [(1, 1, "RGB", 3), (17, 9, "RGB", 3), (900, 800, "RGB", 3),
             (2000, 1, "RGB", 3), (1, 2000, "RGB", 3), (2000, 50, "RGB", 3),
             (800, 900, "RGBA", 3), (30, 20, "RGBA", 3), (640, 480, "RGB", 14),
             (300, 7300, "RGB", 14)]
    for i, (w, h, mode, p) in enumerate(sizes):
        img = test_image(w, h, mode, 100 + i)
        path = os.path.join(work, f"pre{i}.png")
        img.save(path, "PNG")
        arr = np.asarray(Image.open(path))
        r = run(tool, "preprocess", path, str(p), out)
        if r.returncode != 0:
            fail(f"preprocess {w}x{h} {mode}: exit {r.returncode}: {r.stderr.strip()}")
        want, grid, plan = k3vision_ref.preprocess_image(arr, patch=p)
        got_plan = [int(v) for v in r.stdout.split()]
        ref_plan = [plan[k] for k in ("new_width", "new_height", "pad_width", "pad_height",
                                      "grid_h", "grid_w", "tokens")]
        if got_plan != ref_plan:
            fail(f"preprocess {w}x{h}: plan {got_plan} != reference {ref_plan}")
        got = np.fromfile(out, dtype="<f4").astype(np.float64)
        if got.size != want.size or not np.array_equal(got, want.reshape(-1)):
            n = -1 if got.size != want.size else int(np.count_nonzero(got != want.reshape(-1)))
            fail(f"preprocess {w}x{h} {mode} p={p}: {n} values differ from the reference")
        print(f"  preprocess {w}x{h} {mode} p={p}: {plan['new_width']}x{plan['new_height']}"
              f" grid {grid[1]}x{grid[2]}, identical")
    print(f"preprocess: {len(sizes)} images bit-identical to k3vision_ref.preprocess_image")


BOUND = 1e-5


def c_encode(tool, model, work, pixels, grids, env_extra=None, tag="c"):
    """Runs vision_check encode; returns the projected rows (float32 as float64)."""
    pix = os.path.join(work, f"{tag}.pixels")
    out = os.path.join(work, f"{tag}.rows")
    np.concatenate([p.reshape(-1) for p in pixels]).astype("<f4").tofile(pix)
    env = dict(os.environ)
    env.update(env_extra or {})
    r = subprocess.run([tool, "encode", model, pix, out] + [f"{t},{h},{w}" for t, h, w in grids],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"encode {grids} {env_extra}: exit {r.returncode}: {r.stderr.strip()}")
    return np.fromfile(out, dtype="<f4")


def check_encode(tool, model, work):
    os.makedirs(work, exist_ok=True)
    ref = k3vision_ref.VisionModel(model)
    vc = ref.cfg
    p = vc.patch_size
    items = []
    for i, (w, h) in enumerate([(17, 9), (24, 18), (30, 24)]):
        patches, grid, _ = k3vision_ref.preprocess_image(
            np.asarray(test_image(w, h, "RGB", 200 + i)), patch=p)
        items.append((patches, grid))
    rng = np.random.default_rng(7)
    video = (rng.uniform(-1, 1, size=(3 * 4 * 4, 3, p, p)).astype(np.float32)
             .astype(np.float64), (3, 4, 4))
    calls = [[items[0]], [items[1]], [items[2]], [items[0], items[2]], [video]]
    tables = []
    probe = os.path.join(work, "probe.pixels")
    np.zeros(4 * 3 * p * p, dtype="<f4").tofile(probe)
    for k in ("scalar", "avx2", "avx512", "neon"):
        r = subprocess.run([tool, "encode", model, probe, probe + ".out", "1,2,2"],
                           capture_output=True, text=True, env=dict(os.environ, K3_KERNELS=k))
        if r.returncode == 2 and "cannot run these kernels" in r.stderr:
            print(f"  skipped kernel table {k} (not on this CPU/build)")
        elif r.returncode != 0:
            fail(f"K3_KERNELS={k}: exit {r.returncode}: {r.stderr.strip()}")
        else:
            tables.append(k)
    solo = {}
    for ci, call in enumerate(calls):
        grids = [g for _, g in call]
        pixels = [pt.astype(np.float32) for pt, _ in call]
        want = ref.encode([(pt.astype(np.float32).astype(np.float64), g) for pt, g in call])
        base = c_encode(tool, model, work, pixels, grids, {"OMP_NUM_THREADS": "1",
                                                          "K3_KERNELS": "scalar"})
        r0 = 0
        for (pt, g), wnt in zip(call, want):
            got = base[r0:r0 + wnt.size].astype(np.float64).reshape(wnt.shape)
            r0 += wnt.size
            err = float(np.max(np.abs(got - wnt)) / np.max(np.abs(wnt)))
            if not err <= BOUND:
                fail(f"encode grid {g}: max error {err:.3g} of max|ref| > {BOUND}")
            print(f"  grid {g}: {wnt.shape[0]} rows x {wnt.shape[1]}, error {err:.2e} of "
                  f"max|ref| (bound {BOUND})")
            if len(call) == 1:
                solo[g] = got.astype(np.float32).tobytes()
            elif got.astype(np.float32).tobytes() != solo[g]:
                fail(f"encode grid {g}: rows in a two-image call differ from the image alone")
        if base.size != r0:
            fail(f"encode {grids}: {base.size} floats, expected {r0}")
        for k in tables:
            for th in ("1", "2"):
                other = c_encode(tool, model, work, pixels, grids,
                                 {"OMP_NUM_THREADS": th, "K3_KERNELS": k}, tag=f"c{k}{th}")
                if other.tobytes() != base.tobytes():
                    fail(f"encode {grids}: K3_KERNELS={k} at {th} threads differs from scalar "
                         f"at 1 thread")
    print(f"encode: {len(calls)} calls within {BOUND} of the float64 reference; two images in "
          f"one call = each alone; bit-identical at 1 and 2 threads under {' '.join(tables)}")


def check_cli(k3, tool, feeder, model, text_model, tokdir, work):
    os.makedirs(work, exist_ok=True)
    vc = k3vision_ref.load_vision_config(model)
    p = vc.patch_size
    files = []
    for name, (w, h), fmt in (("a.png", (52, 40), "PNG"), ("b.jpg", (31, 20), "JPEG"),
                              ("c.png", (1600, 4), "PNG")):  # c: resized (§3.2)
        path = os.path.join(work, name)
        test_image(w, h, "RGB", 300 + len(files)).save(path, fmt)
        files.append(path)
    prompt = "What is in the picture?"
    rep, dump = os.path.join(work, "rep.json"), os.path.join(work, "gen.f32")
    # --dump-logits: the row each generated id is drawn from; the first is the
    # prompt's last position, which every image row reaches (a full
    # --dump-prompt-logits is 0.6 MB a position at 163,840 ids: too slow here).
    args = [k3, model, "--tok", tokdir, "--prompt", prompt, "--gen", "1", "--ignore-eos",
            "--quiet", "--out", rep, "--dump-logits", dump]
    for f in files:
        args += ["--image", f]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"k3 --image: exit {r.returncode}: {r.stderr.strip()}")
    import json
    got_ids = json.load(open(rep))["prompt_ids"]

    def tokenize(text):
        t = subprocess.run([k3, "--tok", tokdir, "--tokenize", "--prompt", text],
                           capture_output=True, text=True, check=True).stdout.strip()
        return [int(v) for v in t.split(",")] if t else []
    want_ids, pixels, grids = [], [], []
    for f in files:
        arr = np.asarray(Image.open(f).convert("RGB"))
        patches, grid, plan = k3vision_ref.preprocess_image(arr, patch=p)
        pixels.append(patches.astype(np.float32))
        grids.append(grid)
        want_ids += [163602] + tokenize(f"image {arr.shape[1]}x{arr.shape[0]}") + [163603] + \
            [163605] * plan["tokens"] + [163604]
    want_ids += tokenize(prompt)
    if got_ids != want_ids:
        fail(f"k3 --image: prompt ids {got_ids[:16]}... ({len(got_ids)}) differ from the "
             f"expected {want_ids[:16]}... ({len(want_ids)})")
    rows = c_encode(tool, model, work, pixels, grids, tag="cli")
    ids_file, rows_file = os.path.join(work, "ids.csv"), os.path.join(work, "rows.f32")
    open(ids_file, "w").write(",".join(map(str, want_ids)))
    rows.astype("<f4").tofile(rows_file)
    fed = os.path.join(work, "fed.f32")
    r = subprocess.run([feeder, model, "--feed", ids_file, rows_file, "163605", fed],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"embeds_check --feed: {r.stderr.strip()}")
    if open(fed, "rb").read() != open(dump, "rb").read():
        fail("k3 --image: the prompt's last logits differ from feeding the images' rows "
             "directly")
    print(f"cli: {len(files)} images, {sum(i == 163605 for i in want_ids)} image rows in "
          f"{len(want_ids)} prompt ids as §4 says; the prompt's last logits identical to the "
          f"rows fed directly")
    bad = os.path.join(work, "bad.png")
    open(bad, "wb").write(open(files[0], "rb").read()[:200])
    for what, extra, pat in (
            ("truncated image", [model, "--image", bad, "--prompt", "x"], "truncated"),
            ("no vision_config", [text_model, "--image", files[0], "--prompt", "x"],
             "no vision_config|vision tensor .* missing"),
            ("--image with --ids", [model, "--image", files[0], "--ids", "1,2"],
             "does not go with --ids"),
            ("--image without a prompt", [model, "--image", files[0]], "goes with --prompt")):
        r = subprocess.run([k3] + extra + ["--tok", tokdir, "--quiet"], capture_output=True,
                           text=True)
        import re
        if r.returncode != 2 or not re.search(pat, r.stderr):
            fail(f"k3 {what}: wanted exit 2 matching /{pat}/, got {r.returncode}: "
                 f"{r.stderr.strip()}")
        print(f"  refused {what}: {r.stderr.strip()[:100]}")


def main():
    if len(sys.argv) >= 9 and sys.argv[1] == "cli":
        check_cli(*sys.argv[2:9])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "images":
        check_images(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "encode":
        check_encode(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
