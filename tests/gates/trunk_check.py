#!/usr/bin/python3
"""trunk_check: checks a packed trunk against its model with nothing from k3.

  trunk_check.py MODEL_DIR TRUNK_DIR

Reads trunk.json, the model's shard headers and trunk.bin (stdlib only) and checks
that every run starts 4096-aligned, the file size is the padded sum, every tensor's
bytes equal its bytes in the shards, every other byte (alignment gaps, padding)
is zero (a tensor entry with "rows" holds only those rows: a format 4 lm_head block or a
per-rank share), every run's checksum is XXH64 of its image (format 2) or the folded
XXH3-64 block hashes of src/io/codec.h (formats 3 and 4, XXH3 from Debian's libxxhash
through ctypes, not k3's), and its source fingerprint is the one
src/io/trunk_source.h describes (computed here from that text alone). A
compressed trunk (codec bf16-huffman or bf16-nibble) is decoded here from the description in
src/io/codec.h and src/io/trunk_format.h alone, and its images checked the same.
Exits 1 naming the first fault."""

import ctypes

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


def tensor_bytes(t, src):
    """(path, absolute offset, nbytes, dtype, shape) of the bytes tensor entry t holds:
    the whole tensor, or with "rows": [LO, HI] only those rows of it."""
    path, soff, n, dtype, shape = src[t["name"]]
    if "rows" in t:
        lo, hi = t["rows"]
        row = n // shape[0]
        soff, n = soff + lo * row, (hi - lo) * row
    return path, soff, n, dtype, shape


def source_fingerprint(run, src):
    """The run's "source" by the recipe of src/io/trunk_source.h."""
    text = b""
    for k, t in enumerate(run["tensors"]):
        path, soff, n, dtype, shape = tensor_bytes(t, src)
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


BLOCK = 65536  # K3_CODEC_BLOCK
_xxh = None


def xxh3(data):
    global _xxh
    if _xxh is None:
        _xxh = ctypes.CDLL("libxxhash.so.0")
        _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _xxh.XXH3_64bits.restype = ctypes.c_uint64
    return _xxh.XXH3_64bits(bytes(data), len(data))


def block_hashes(img):
    hs = [xxh3(img[a:a + BLOCK]) for a in range(0, len(img), BLOCK)]
    return xxh3(b"".join(struct.pack("<Q", h) for h in hs))


def decode_block(b, n, where):
    """One stored block (src/io/codec.h) to its n image bytes."""
    if b[0] == 0:
        if len(b) != 1 + n:
            sys.exit(f"{where}: raw block of {len(b)} bytes for {n}")
        return bytes(b[1:])
    if b[0] == 2 and n % 2 == 0 and n >= 2:
        return decode_nibble(b, n, where)
    if b[0] != 1 or n % 2 or n < 2:
        sys.exit(f"{where}: mode {b[0]} for {n} bytes")
    lens = [(b[1 + e // 2] >> (4 * (e % 2))) & 15 for e in range(256)]
    if sum(1 << (12 - ln) for ln in lens if ln) != 4096:
        sys.exit(f"{where}: code lengths not a complete code")
    codes, code, prev = {}, 0, 0
    for ln, sym in sorted((ln, sym) for sym, ln in enumerate(lens) if ln):
        code <<= ln - prev
        prev = ln
        codes[(ln, code)] = sym
        code += 1
    words = n // 2
    slen = [struct.unpack_from("<H", b, 129 + 2 * j)[0] for j in range(3)]
    at = 135 + words
    slen.append(len(b) - at - sum(slen))
    sm = b[135:at]
    exps = [0] * words
    for j in range(4):
        st = b[at:at + slen[j]]
        at += slen[j]
        bit = 0
        for i in range(j, words, 4):
            c = ln = 0
            while (ln, c) not in codes:
                if bit >= 8 * len(st):
                    sys.exit(f"{where}: stream {j} ends early")
                c = c << 1 | (st[bit >> 3] >> (bit & 7) & 1)
                bit += 1
                ln += 1
            exps[i] = codes[(ln, c)]
        if (bit + 7) // 8 != len(st):
            sys.exit(f"{where}: stream {j} has {len(st)} bytes for {bit} bits")
    out = bytearray(n)
    for i in range(words):
        s, e = sm[i], exps[i]
        out[2 * i] = (e & 1) << 7 | (s & 0x7F)
        out[2 * i + 1] = (s & 0x80) | e >> 1
    return bytes(out)


def decode_nibble(b, n, where):
    """A nibble block: 15 exponents, sign+mantissa bytes, nibbles, escapes."""
    words = n // 2
    table = b[1:16]
    sm = b[16:16 + words]
    nibs = b[16 + words:16 + words + (words + 1) // 2]
    esc = b[16 + words + (words + 1) // 2:]
    if len(nibs) != (words + 1) // 2:
        sys.exit(f"{where}: nibble block too short")
    if words % 2 and nibs[-1] >> 4:
        sys.exit(f"{where}: padding nibble not 0")
    out, k = bytearray(n), 0
    for i in range(words):
        v = nibs[i // 2] >> (4 * (i % 2)) & 15
        if v == 15:
            if k >= len(esc):
                sys.exit(f"{where}: more escapes than escape bytes")
            e, k = esc[k], k + 1
        else:
            e = table[v]
        s = sm[i]
        out[2 * i] = (e & 1) << 7 | (s & 0x7F)
        out[2 * i + 1] = (s & 0x80) | e >> 1
    if k != len(esc):
        sys.exit(f"{where}: {len(esc)} escape bytes for {k} escapes")
    return bytes(out)


def run_image(data, run, codec):
    """The run's image and the bytes it stores in trunk.bin."""
    off, length = run["offset"], run["length"]
    stored = run.get("stored", length)
    if codec == "none":
        if stored != length:
            sys.exit(f"run {run['name']}: stored {stored} != length {length} uncompressed")
        return data[off:off + length], stored
    nb = (length + BLOCK - 1) // BLOCK
    table = struct.unpack_from(f"<{nb}I", data, off + stored - 4 * nb)
    if sum(table) + 4 * nb != stored:
        sys.exit(f"run {run['name']}: block table sums to {sum(table)} of {stored}")
    img, at = bytearray(), off
    for k, ln in enumerate(table):
        img += decode_block(data[at:at + ln], min(BLOCK, length - k * BLOCK),
                            f"run {run['name']} block {k}")
        at += ln
    return bytes(img), stored


def main(model_dir, trunk_dir):
    m = json.load(open(os.path.join(trunk_dir, "trunk.json")))
    if m["version"] not in (2, 3, 4):
        sys.exit(f"trunk.json is version {m['version']}, this check reads versions 2 to 4")
    codec = m.get("codec", "none")
    src = shard_index(model_dir)
    data = open(os.path.join(trunk_dir, "trunk.bin"), "rb").read()
    if len(data) != m["file_size"] or m["file_size"] % 4096:
        sys.exit(f"trunk.bin is {len(data)} bytes, trunk.json says {m['file_size']}")
    spans = []  # (start, end) of every run's stored bytes in trunk.bin
    end = 0
    for run in m["runs"]:
        off, length = run["offset"], run["length"]
        if off % 4096 or off < end:
            sys.exit(f"run {run['name']} at {off} is misaligned or overlaps")
        img, stored = run_image(data, run, codec)
        end = off + (stored + 4095) // 4096 * 4096
        if m["version"] == 2 and int(run["checksum"], 16) != xxh64(img):
            sys.exit(f"run {run['name']}: checksum {run['checksum']} is not XXH64 of its image")
        if m["version"] >= 3 and int(run["checksum"], 16) != block_hashes(img):
            sys.exit(f"run {run['name']}: checksum {run['checksum']} is not its block hashes")
        if int(run["source"], 16) != source_fingerprint(run, src):
            sys.exit(f"run {run['name']}: source {run['source']} is not its tensors' fingerprint")
        for t in run["tensors"]:
            path, soff, n, dtype, shape = tensor_bytes(t, src)
            if (dtype, shape) != (t["dtype"], t["shape"]):
                sys.exit(f"{t['name']}: {t['dtype']} {t['shape']} in trunk.json, "
                         f"{dtype} {shape} in the model")
            if t["offset"] % 64 or t["offset"] + n > length:
                sys.exit(f"{t['name']}: offset {t['offset']} misaligned or past the run")
            with open(path, "rb") as f:
                f.seek(soff)
                want = f.read(n)
            at = t["offset"]
            if img[at:at + n] != want:
                sys.exit(f"{t['name']} in run {run['name']}: bytes differ from the shard")
        covered = bytearray(img)
        for t in run["tensors"]:
            n = tensor_bytes(t, src)[2]
            covered[t["offset"]:t["offset"] + n] = bytes(n)
        if covered.count(0) != len(covered):
            sys.exit(f"run {run['name']}: non-zero image bytes outside every tensor")
        spans.append((off, off + stored))
    if end != len(data):
        sys.exit(f"the runs end at {end} but trunk.bin is {len(data)} bytes")
    at = 0
    for lo, hi in sorted(spans) + [(len(data), len(data))]:
        if data[at:lo].count(0) != lo - at:
            sys.exit(f"trunk.bin has non-zero bytes in [{at}, {lo}), outside every run")
        at = max(at, hi)
    nt = sum(len(r["tensors"]) for r in m["runs"])
    print(f"trunk_check: format {m['version']} ({codec}), {len(m['runs'])} runs, {nt} tensors "
          "match the shards, checksums and source fingerprints as specified")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
