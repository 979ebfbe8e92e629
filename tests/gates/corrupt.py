#!/usr/bin/python3
"""corrupt.py - makes broken copies of a checkpoint for 20-bad-input.sh.

  corrupt.py CASE SRC DST    copy checkpoint SRC to DST, then break it as CASE

Standard library only. Each case breaks one thing the engine must refuse
with a message naming the file, tensor or field (see CASES below).
"""
import json
import os
import shutil
import struct
import sys


def shards(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_shard(path, header, data, raw_header=None):
    hb = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)


def edit_header(d, fn):
    """Applies fn(header, data) -> data to the first shard holding a tensor
    that fn accepts (fn returns None to pass)."""
    for s in shards(d):
        p = os.path.join(d, s)
        h, data = read_header(p)
        out = fn(h, data)
        if out is not None:
            write_shard(p, h, out)
            return
    sys.exit("corrupt.py: no shard matched")


def find(h, suffix):
    for k in h:
        if k.endswith(suffix):
            return k
    return None


def with_tensor(suffix, fn):
    def apply(h, data):
        k = find(h, suffix)
        if k is None:
            return None
        fn(h, k)
        return data
    return apply


def edit_json(path, fn):
    with open(path) as f:
        j = json.load(f)
    fn(j)
    with open(path, "w") as f:
        json.dump(j, f, indent=1)


def text_config(j):
    return j.get("text_config", j)


def case_missing_shard(d):
    os.remove(os.path.join(d, shards(d)[1]))


def case_truncated_shard(d):
    p = os.path.join(d, shards(d)[-1])
    os.truncate(p, os.path.getsize(p) - 1000)


def case_offsets_past_end(d):
    def f(h, k):
        b, e = h[k]["data_offsets"]
        h[k]["data_offsets"] = [b + 10**6, e + 10**6]
    edit_header(d, with_tensor("layers.1.input_layernorm.weight", f))


def case_overlap(d):
    def f(h, data):
        names = [k for k in h if k != "__metadata__"]
        by_size = {}
        for k in names:
            b, e = h[k]["data_offsets"]
            by_size.setdefault(e - b, []).append(k)
        for ks in by_size.values():
            if len(ks) >= 2 and h[ks[0]]["data_offsets"][1] > h[ks[0]]["data_offsets"][0]:
                h[ks[1]]["data_offsets"] = list(h[ks[0]]["data_offsets"])
                return data
        return None
    edit_header(d, f)


def case_wrong_dtype(d):
    edit_header(d, with_tensor("layers.1.post_attention_layernorm.weight",
                               lambda h, k: h[k].__setitem__("dtype", "F16")))


def case_wrong_shape(d):
    def f(h, k):
        h[k]["shape"] = list(reversed(h[k]["shape"]))
    edit_header(d, with_tensor("layers.0.mlp.down_proj.weight", f))


def case_missing_tensor(d):
    name = None

    def f(h, data):
        nonlocal name
        name = find(h, "layers.2.self_attention_res_proj.weight")
        if name is None:
            return None
        del h[name]
        return data
    edit_header(d, f)
    edit_json(os.path.join(d, "model.safetensors.index.json"),
              lambda j: j["weight_map"].pop(name))


def case_duplicate_tensor(d):
    """A small tensor of the first shard also stored, bytes and all, at the
    end of the last shard's data."""
    first, last = os.path.join(d, shards(d)[0]), os.path.join(d, shards(d)[-1])
    h, data = read_header(first)
    name = next(k for k in sorted(h) if k != "__metadata__" and k.endswith("layernorm.weight"))
    a, b = h[name]["data_offsets"]
    h2, data2 = read_header(last)
    h2[name] = dict(h[name], data_offsets=[len(data2), len(data2) + b - a])
    write_shard(last, h2, data2 + data[a:b])


def case_index_missing_shard(d):
    def f(j):
        k = sorted(j["weight_map"])[0]
        j["weight_map"][k] = "model-00009-of-000009.safetensors"
    edit_json(os.path.join(d, "model.safetensors.index.json"), f)


def case_index_wrong_shard(d):
    def f(j):
        wm = j["weight_map"]
        first = shards(d)[0]
        k = next(k for k in sorted(wm) if wm[k] != first)
        wm[k] = first
    edit_json(os.path.join(d, "model.safetensors.index.json"), f)


def case_header_not_json(d):
    p = os.path.join(d, shards(d)[0])
    h, data = read_header(p)
    write_shard(p, h, data, raw_header=json.dumps(h).encode()[:-1] + b",}")


def case_header_too_long(d):
    p = os.path.join(d, shards(d)[0])
    with open(p, "r+b") as f:
        f.write(struct.pack("<Q", 2**40))


def case_nan_scale(d):
    """Scale byte 5 of every layer-1 expert's w2 becomes 255 (E8M0 NaN), so
    whichever experts the router picks, a corrupted one is loaded."""
    for s in shards(d):
        p = os.path.join(d, s)
        h, data = read_header(p)
        hit = [k for k in h if ".layers.1.block_sparse_moe.experts." in k
               and k.endswith(".w2.weight_scale")]
        for k in hit:
            b = h[k]["data_offsets"][0]
            data = data[:b + 5] + b"\xff" + data[b + 6:]
        if hit:
            write_shard(p, h, data)


def case_middles(d):
    """Not bad input: every BF16 matrix of the layers and lm_head gets
    zeros between its first and last 512 bytes, in place (headers and offsets untouched), where a packed trunk's sampled
    fingerprint does not look (io/trunk_source.h): other weights the engine
    cannot tell from the original's (39-spec.sh: a draft trunk of them)."""
    for s in shards(d):
        p = os.path.join(d, s)
        with open(p, "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
            for k, t in h.items():
                if k == "__metadata__" or t["dtype"] != "BF16" or len(t["shape"]) != 2:
                    continue
                if ".experts." in k or "embed_tokens" in k:
                    continue
                b, e = t["data_offsets"]
                if e - b <= 1024:
                    continue
                f.seek(8 + n + b + 512)
                f.write(bytes(e - b - 1024))


def case_config_missing_fields(d):
    def f(j):
        del text_config(j)["hidden_size"]
        del text_config(j)["rms_norm_eps"]
    edit_json(os.path.join(d, "config.json"), f)


def case_config_layer_out_of_range(d):
    def f(j):
        lac = text_config(j)["linear_attn_config"]
        lac["kda_layers"][-1] = 99
    edit_json(os.path.join(d, "config.json"), f)


def case_config_not_json(d):
    with open(os.path.join(d, "config.json"), "a") as f:
        f.write("}")


CASES = {k[5:].replace("_", "-"): v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    if sys.argv[1:2] == ["list"]:
        print("\n".join(CASES))
        sys.exit(0)
    if len(sys.argv) != 4 or sys.argv[1] not in CASES:
        sys.exit(__doc__ + "\ncases: " + ", ".join(CASES))
    case, src, dst = sys.argv[1:]
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    CASES[case](dst)
