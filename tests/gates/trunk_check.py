#!/usr/bin/python3
"""trunk_check: checks a packed trunk against its model with nothing from k3.

  trunk_check.py MODEL_DIR TRUNK_DIR

Reads trunk.json, the model's shard headers and trunk.bin (stdlib only) and checks
that every run starts 4096-aligned, the file size is the padded sum, every tensor's
bytes equal its bytes in the shards, and every other byte (alignment gaps, padding)
is zero. Exits 1 naming the first fault."""

import json
import os
import struct
import sys


def shard_index(model_dir):
    """tensor name -> (path, absolute offset, nbytes)."""
    wm = json.load(open(os.path.join(model_dir, "model.safetensors.index.json")))["weight_map"]
    out = {}
    for shard in sorted(set(wm.values())):
        path = os.path.join(model_dir, shard)
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name != "__metadata__":
                b, e = t["data_offsets"]
                out[name] = (path, 8 + n + b, e - b, t["dtype"], t["shape"])
    return out


def main(model_dir, trunk_dir):
    m = json.load(open(os.path.join(trunk_dir, "trunk.json")))
    src = shard_index(model_dir)
    data = open(os.path.join(trunk_dir, "trunk.bin"), "rb").read()
    if len(data) != m["file_size"] or m["file_size"] % 4096:
        sys.exit(f"trunk.bin is {len(data)} bytes, trunk.json says {m['file_size']}")
    spans = []  # (start, end) of every tensor's bytes in trunk.bin
    end = 0
    for run in m["runs"]:
        off, length = run["offset"], run["length"]
        if off % 4096 or off < end:
            sys.exit(f"run {run['name']} at {off} is misaligned or overlaps")
        end = off + (length + 4095) // 4096 * 4096
        for t in run["tensors"]:
            path, soff, n, dtype, shape = src[t["name"]]
            if (dtype, shape) != (t["dtype"], t["shape"]):
                sys.exit(f"{t['name']}: {t['dtype']} {t['shape']} in trunk.json, {dtype} {shape} in the model")
            if t["offset"] % 64 or t["offset"] + n > length:
                sys.exit(f"{t['name']}: offset {t['offset']} misaligned or past the run")
            with open(path, "rb") as f:
                f.seek(soff)
                want = f.read(n)
            at = off + t["offset"]
            if data[at:at + n] != want:
                sys.exit(f"{t['name']} in run {run['name']}: bytes differ from the shard")
            spans.append((at, at + n))
    if end != len(data):
        sys.exit(f"the runs end at {end} but trunk.bin is {len(data)} bytes")
    at = 0
    for lo, hi in sorted(spans) + [(len(data), len(data))]:
        if data[at:lo].count(0) != lo - at:
            sys.exit(f"trunk.bin has non-zero bytes in [{at}, {lo}), outside every tensor")
        at = max(at, hi)
    print(f"trunk_check: {len(m['runs'])} runs, {sum(len(r['tensors']) for r in m['runs'])} tensors match the shards")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
