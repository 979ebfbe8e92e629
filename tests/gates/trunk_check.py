#!/usr/bin/python3
"""trunk_check: checks a packed trunk against its model with nothing from k3.

  trunk_check.py MODEL_DIR TRUNK_DIR

Reads trunk.json, the model's shard headers and trunk.bin (stdlib only) and checks
that every run starts 4096-aligned, the file size is the padded sum, every tensor's
bytes equal its bytes in the shards, every other byte (alignment gaps, padding)
is zero, every run's checksum is XXH64 of its image and its source fingerprint
is the one src/io/trunk_source.h describes (computed here from that text alone).
Exits 1 naming the first fault."""

import json
import os
import struct
import sys

M64 = (1 << 64) - 1
P1, P2, P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
P4, P5 = 9650029242287828579, 2870177450012600261
SAMPLE = 256  # K3_TRUNK_SAMPLE


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh64(data, seed=0):
    """XXH64 from its public specification (seed 0 by default)."""
    def rnd(acc, lane):
        return rotl((acc + lane * P2) & M64, 31) * P1 & M64

    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        lanes = struct.unpack_from("<%dQ" % (n // 32 * 4), data)
        for k in range(0, len(lanes), 4):
            v = [rnd(v[j], lanes[k + j]) for j in range(4)]
        i = n // 32 * 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = rotl(h ^ (data[i] * P5 & M64), 11) * P1 & M64
        i += 1
    h = (h ^ (h >> 33)) * P2 & M64
    h = (h ^ (h >> 29)) * P3 & M64
    return h ^ (h >> 32)


def source_fingerprint(run, src):
    """The run's "source" by the recipe of src/io/trunk_source.h."""
    text = b""
    for k, t in enumerate(run["tensors"]):
        path, soff, n, dtype, shape = src[t["name"]]
        dims = "x".join(str(d) for d in shape)
        text += f"source {t['name']} {dtype} {dims} {os.path.basename(path)} {soff} {n}\n".encode()
        with open(path, "rb") as f:
            f.seek(soff)
            text += f.read(min(n, SAMPLE))
            if k + 1 == len(run["tensors"]) and n > SAMPLE:
                f.seek(soff + n - SAMPLE)
                text += f.read(SAMPLE)
    return xxh64(text)


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
    if m["version"] != 2:
        sys.exit(f"trunk.json is version {m['version']}, this check reads version 2")
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
        if int(run["checksum"], 16) != xxh64(data[off:off + length]):
            sys.exit(f"run {run['name']}: checksum {run['checksum']} is not XXH64 of its image")
        if int(run["source"], 16) != source_fingerprint(run, src):
            sys.exit(f"run {run['name']}: source {run['source']} is not its tensors' fingerprint")
        for t in run["tensors"]:
            path, soff, n, dtype, shape = src[t["name"]]
            if (dtype, shape) != (t["dtype"], t["shape"]):
                sys.exit(f"{t['name']}: {t['dtype']} {t['shape']} in trunk.json, "
                         f"{dtype} {shape} in the model")
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
    nt = sum(len(r["tensors"]) for r in m["runs"])
    print(f"trunk_check: {len(m['runs'])} runs, {nt} tensors match the shards, "
          "checksums and source fingerprints as specified")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
