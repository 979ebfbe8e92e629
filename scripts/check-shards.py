#!/usr/bin/python3
"""check-shards: do the safetensors shards in a model directory parse, and do they
agree with the directory's model.safetensors.index.json?

  /usr/bin/python3 scripts/check-shards.py DIR

Checks every shard the index names plus every model-*.safetensors in DIR (python3
standard library only; reads the headers, never the tensor data):
  - 8-byte little-endian header length N that fits in the file;
  - N bytes of JSON that parse into an object of tensors, each with a known dtype,
    a shape and data_offsets [begin, end] whose length is shape x dtype size;
  - the tensors tile the data section exactly: contiguous from 0, no overlap, and
    the last one ends at the end of the file (a truncated or padded file fails);
  - every tensor of the index is in the shard the index names, and every tensor of
    a shard is in the index under that shard.
One line per problem on stderr, naming the file; a summary on stdout.

Exit codes: 0 all good; 1 a file could not be read; 2 a check failed or bad usage.
"""

import json
import os
import re
import struct
import sys

# Bytes per element of each safetensors dtype.
DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
              "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
              "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}
MAX_HEADER = 100 << 20          # the safetensors library refuses larger headers
SHARD_RE = re.compile(r"^model-\d+-of-\d+\.safetensors$")


class Problem(Exception):
    """A verification failure in one file."""


def read_header(path):
    """Returns ({tensor: (begin, end)}, file size); raises Problem or OSError."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise Problem(f"{size} bytes: too short for a safetensors header")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8 or n > MAX_HEADER:
            raise Problem(f"header length {n} does not fit in a file of {size} bytes")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Problem(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise Problem("header is not a JSON object")
    data_len = size - 8 - n
    spans = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        spans[name] = tensor_span(name, t)
    pos = 0
    for name, (begin, end) in sorted(spans.items(), key=lambda kv: kv[1]):
        if begin != pos:
            raise Problem(f"tensor {name} starts at {begin}, expected {pos} "
                          "(gap or overlap in the data section)")
        pos = end
    if pos != data_len:
        how = "truncated" if pos > data_len else "has trailing bytes"
        raise Problem(f"{how}: tensors end at data byte {pos}, the data section "
                      f"holds {data_len} bytes")
    return spans, size


def tensor_span(name, t):
    """Validates one header entry; returns its (begin, end)."""
    if not isinstance(t, dict):
        raise Problem(f"tensor {name}: entry is not an object")
    dtype, shape, offs = t.get("dtype"), t.get("shape"), t.get("data_offsets")
    if dtype not in DTYPE_SIZE:
        raise Problem(f"tensor {name}: unknown dtype {dtype!r}")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise Problem(f"tensor {name}: bad shape {shape!r}")
    if not (isinstance(offs, list) and len(offs) == 2
            and all(isinstance(o, int) for o in offs) and 0 <= offs[0] <= offs[1]):
        raise Problem(f"tensor {name}: bad data_offsets {offs!r}")
    count = 1
    for d in shape:
        count *= d
    if offs[1] - offs[0] != count * DTYPE_SIZE[dtype]:
        raise Problem(f"tensor {name}: {offs[1] - offs[0]} bytes for {dtype} {shape}")
    return offs[0], offs[1]


def load_index(d):
    """The index's weight_map, or None when DIR has no index; raises Problem."""
    path = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            wm = json.load(f).get("weight_map")
    except (ValueError, AttributeError) as e:
        raise Problem(f"not a valid index: {e}") from None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise Problem("weight_map is missing or not an object of file names")
    return wm


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check-shards.py DIR", file=sys.stderr)
        return 2
    d = argv[1]
    failed = io_failed = False

    def report(name, msg):
        nonlocal failed
        failed = True
        print(f"check-shards: {name}: {msg}", file=sys.stderr)

    try:
        wm = load_index(d)
    except Problem as e:
        report("model.safetensors.index.json", e)
        wm = None
    except OSError as e:
        print(f"check-shards: model.safetensors.index.json: {e}", file=sys.stderr)
        return 1
    by_shard = {}
    for tensor, shard in (wm or {}).items():
        by_shard.setdefault(shard, set()).add(tensor)
    shards = sorted(set(by_shard) | {f for f in os.listdir(d) if SHARD_RE.match(f)})
    total = tensors = 0
    for shard in shards:
        path = os.path.join(d, shard)
        if not os.path.exists(path):
            report(shard, f"missing (the index puts {len(by_shard[shard])} tensors in it)")
            continue
        try:
            spans, size = read_header(path)
        except Problem as e:
            report(shard, e)
            continue
        except OSError as e:
            print(f"check-shards: {shard}: {e}", file=sys.stderr)
            io_failed = True
            continue
        total += size
        tensors += len(spans)
        if wm is not None:
            want = by_shard.get(shard, set())
            missing, extra = sorted(want - spans.keys()), sorted(spans.keys() - want)
            if missing:
                report(shard, f"{len(missing)} tensors of the index are not in it, "
                       f"e.g. {missing[0]}")
            if extra:
                report(shard, f"{len(extra)} of its tensors are not in the index under "
                       f"this shard, e.g. {extra[0]}")
    print(f"check-shards: {len(shards)} shards, {total} bytes, {tensors} tensors"
          f"{'' if wm is not None else ' (no index in the directory)'}")
    if failed:
        return 2
    return 1 if io_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
