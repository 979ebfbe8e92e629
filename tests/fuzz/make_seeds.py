#!/usr/bin/python3
"""make_seeds.py - data and seed corpora for the fuzz targets (tests/fuzz/).

    /usr/bin/python3 tests/fuzz/make_seeds.py OUT [--model DIR] [--k3 BIN]
                                             [--release DIR]

Writes, under OUT (a build directory: nothing here is committed):

  data/tok/        a small tokenizer (tools/make_tokenizer.py, 1000 merges)
  data/model/      the tiny-a checkpoint: a link to --model DIR, else made
                   with tools/make_checkpoint.py --preset tiny-a (numpy)
  data/trunk/      `BIN pack-trunk data/model data/trunk` when --k3 is given
  data/state.k3    a state of data/model saved by `BIN --save-state` (--k3)
  corpus/TARGET/   seed inputs, one file each, for every fuzz_TARGET.c

Seeds come from real files: the release's config.json, tokenizer_config.json,
the first lines of tiktoken.model and index, and chat_vectors.json (--release,
default ../shared/k3-release, used when present), the tiny-a checkpoint's
config, index and shard headers, the small tokenizer, the packed trunk's
trunk.json and a saved state; plus the committed inputs of tests/fuzz/seeds/TARGET/. Standard
library only (numpy only if tiny-a has to be made). Deterministic.
"""
import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = sys.executable or "/usr/bin/python3"


def put(out, target, name, data):
    d = os.path.join(out, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def shard_header(path):
    """(header dict, data bytes) of a safetensors file."""
    raw = read(path)
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def small_shard(header, data, budget=16384):
    """A valid shard holding the header's tensors (in file order) whose data
    fits the budget, re-laid contiguously with their real bytes."""
    out_h, out_d = {}, b""
    if "__metadata__" in header:
        out_h["__metadata__"] = header["__metadata__"]
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        if len(out_d) + (e - b) > budget:
            continue
        out_h[name] = {"dtype": t["dtype"], "shape": t["shape"],
                       "data_offsets": [len(out_d), len(out_d) + e - b]}
        out_d += data[b:e]
    text = json.dumps(out_h, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + out_d


def st_file(header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def chat_inputs(vectors_path):
    doc = json.loads(read(vectors_path))
    for case in doc["cases"]:
        conv = {k: case[k] for k in ("messages", "tools", "options") if k in case}
        yield case["name"], json.dumps(conv, ensure_ascii=False)


def image_seeds(out):
    """png and jpeg seeds: every mode src/vision/image.h handles, small (Pillow when
    importable; otherwise one hand-built PNG)."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\x00" + bytes((x * 40 + y * 3) % 256 for x in range(12)) for y in range(4))
    put(out, "png", "gray-4x4-handmade.png", b"\x89PNG\r\n\x1a\n" +
        chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)) +
        chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    try:
        from PIL import Image
    except ImportError:
        return
    import io
    base = Image.new("RGB", (9, 7))
    base.putdata([((x * 29) % 256, (y * 37) % 256, (x * y * 11) % 256)
                  for y in range(7) for x in range(9)])
    alpha = base.convert("RGBA")
    alpha.putalpha(Image.new("L", (9, 7), 128))
    pngs = {"rgb": (base, {}), "rgba": (alpha, {}), "gray": (base.convert("L"), {}),
            "la": (alpha.convert("LA"), {}), "bilevel": (base.convert("1"), {}),
            "palette": (base.quantize(8), {}), "palette-trns": (base.quantize(8),
                                                                 {"transparency": 2}),
            "interlaced": (base, {"interlace": 1})}
    for name, (img, kw) in pngs.items():
        b = io.BytesIO()
        img.save(b, "PNG", **kw)
        put(out, "png", name + ".png", b.getvalue())
    jpegs = {"rgb": (base, {}), "gray": (base.convert("L"), {}),
             "progressive": (base, {"progressive": True}), "444": (base, {"subsampling": 0}),
             "cmyk": (base.convert("CMYK"), {})}
    for name, (img, kw) in jpegs.items():
        b = io.BytesIO()
        img.save(b, "JPEG", **kw)
        put(out, "jpeg", name + ".jpg", b.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--model")
    ap.add_argument("--k3")
    ap.add_argument("--release", default=os.path.join(ROOT, "..", "shared", "k3-release"))
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    data = os.path.join(out, "data")
    shutil.rmtree(os.path.join(out, "corpus"), ignore_errors=True)
    os.makedirs(data, exist_ok=True)
    rel = a.release if os.path.isfile(os.path.join(a.release, "config.json")) else None

    # Data: small tokenizer, tiny-a, packed trunk.
    tok = os.path.join(data, "tok")
    if not os.path.isfile(os.path.join(tok, "tiktoken.model")):
        subprocess.check_call([PYTHON, os.path.join(ROOT, "tools", "make_tokenizer.py"), tok],
                              stdout=subprocess.DEVNULL)
    model = os.path.join(data, "model")
    if a.model:
        if os.path.islink(model) or os.path.isfile(model):
            os.unlink(model)
        elif os.path.isdir(model):
            shutil.rmtree(model)
        os.symlink(os.path.abspath(a.model), model)
    elif not os.path.isfile(os.path.join(model, "config.json")):
        subprocess.check_call([PYTHON, os.path.join(ROOT, "tools", "make_checkpoint.py"), model,
                               "--preset", "tiny-a"], stdout=subprocess.DEVNULL)
    trunk = os.path.join(data, "trunk")
    if a.k3:
        subprocess.check_call([a.k3, "pack-trunk", model, trunk, "--force"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # Committed seeds first (hand-written edge cases).
    seeds = os.path.join(HERE, "seeds")
    for target in sorted(os.listdir(seeds)) if os.path.isdir(seeds) else []:
        for name in sorted(os.listdir(os.path.join(seeds, target))):
            put(out, target, name, read(os.path.join(seeds, target, name)))

    # config: tiny-a's and the release's, nested and flat.
    configs = [("tiny-a", read(os.path.join(model, "config.json")))]
    if rel:
        configs.append(("release", read(os.path.join(rel, "config.json"))))
    for name, text in configs:
        put(out, "config", name + ".json", text)
        put(out, "json", "config-" + name + ".json", text)
        flat = json.loads(text)
        flat.update(flat.pop("text_config", {}))
        put(out, "config", name + "-flat.json", json.dumps(flat, indent=1))
    # config: tiny-a's with one integer field at 2^61 + 4, 2^32 or 2^31 - 1,
    # where products of fields wrap to small sizes (each refused, naming it).
    tiny = json.loads(configs[0][1])
    for field in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                  "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                  "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace", "num_experts",
                  "num_experts_per_token", "num_shared_experts", "moe_intermediate_size",
                  "routed_expert_hidden_size", "attn_res_block_size", "bos_token_id",
                  "pad_token_id", "linear_attn_config.head_dim", "linear_attn_config.num_heads",
                  "linear_attn_config.short_conv_kernel_size"):
        for value in (2 ** 61 + 4, 2 ** 32, 2 ** 31 - 1):
            c = json.loads(json.dumps(tiny))
            obj = c.get("text_config", c)
            if field.startswith("linear_attn_config."):
                obj, key = obj["linear_attn_config"], field.split(".", 1)[1]
            else:
                key = field
            obj[key] = value
            put(out, "config", "tiny-a-%s-%d.json" % (field, value), json.dumps(c))

    # safetensors: each tiny-a shard cut down to its small tensors, and edges.
    shards = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    for i, f in enumerate(shards):
        h, d = shard_header(os.path.join(model, f))
        put(out, "safetensors", "tiny-a-%d" % i, small_shard(h, d))
        put(out, "json", "header-%d.json" % i, json.dumps(h)[:8192])
    put(out, "safetensors", "empty-header", st_file({}, b""))
    put(out, "safetensors", "metadata-only", st_file({"__metadata__": {"format": "pt"}}, b""))
    put(out, "safetensors", "every-dtype", st_file(
        {dt: {"dtype": dt, "shape": [1, 2], "data_offsets": [16 * i, 16 * i + 2 * size]}
         for i, (dt, size) in enumerate([("BOOL", 1), ("U8", 1), ("I8", 1), ("F8_E4M3", 1),
                                          ("F8_E5M2", 1), ("U16", 2), ("I16", 2), ("F16", 2),
                                          ("BF16", 2), ("U32", 4), ("I32", 4), ("F32", 4),
                                          ("U64", 8), ("I64", 8), ("F64", 8)])},
        bytes(16 * 15)))

    # st_index: tiny-a's index cut to 40 entries, the release's first entries.
    idx = json.loads(read(os.path.join(model, "model.safetensors.index.json")))
    wm = dict(list(idx["weight_map"].items())[:40])
    put(out, "st_index", "tiny-a-40", json.dumps({"metadata": idx.get("metadata", {}),
                                                  "weight_map": wm}, indent=1))
    if rel:
        with gzip.open(os.path.join(rel, "model.safetensors.index.json.gz"), "rt") as f:
            head = f.read(4096)
        # Cut after the last complete entry and close the objects.
        cut = head.rfind('",')
        put(out, "st_index", "release-head", head[:cut + 1] + "}}")
        put(out, "json", "index-release-head.json", head[:cut + 1] + "}}")

    # tiktoken: the small model; the release's first 600 lines (bytes first).
    small_model = read(os.path.join(tok, "tiktoken.model"))
    put(out, "tiktoken", "small", small_model)
    put(out, "tiktoken", "small-no-final-newline", small_model.rstrip(b"\n"))
    if rel:
        with open(os.path.join(rel, "tiktoken.model"), "rb") as f:
            put(out, "tiktoken", "release-600", b"".join(f.readline() for _ in range(600)))

    # tok_config: the small tokenizer's, and the release's renumbered for it.
    nranks = small_model.count(b"\n")
    put(out, "tok_config", "small", read(os.path.join(tok, "tokenizer_config.json")))
    put(out, "json", "tok-config-small.json", read(os.path.join(tok, "tokenizer_config.json")))
    if rel:
        cfg = json.loads(read(os.path.join(rel, "tokenizer_config.json")))
        first = min(int(k) for k in cfg["added_tokens_decoder"])
        cfg["added_tokens_decoder"] = {str(int(k) - first + nranks): v
                                       for k, v in cfg["added_tokens_decoder"].items()}
        put(out, "tok_config", "release-renumbered", json.dumps(cfg, indent=2))

    # encode: byte 0 = allow_special (bit 0), then text.
    texts = [
        "Hello world", "It's a test: we'll, they're, I'd've DON'T",
        "  leading spaces\n\n\ttabs\r\n and trailing   ",
        "numbers 1234567 3.14159 ¼½ ١٢٣", "你好，世界！中文文本测试",
        "emoji 😀👍🏽 and ZWJ 👨‍👩‍👧", "ʰʷ ǅungla Ǆ mixed-case ÀÉÎõü",
        "<|open|>message<|sep|>user text<|close|>message<|sep|><|end_of_msg|>",
        "<|open|<|sep|>>[BOS][EOS]<|reserved_token_9|>",
        "code: def f(x):\n    return x**2  # comment\n", "A" * 300 + " " * 40 + "!" * 50,
        "\x00\x01\x1c\x1d\x1e\x1f\x85\u2028\u3000 mixed space",
    ]
    for i, t in enumerate(texts):
        for flag in (0, 1):
            put(out, "encode", "text-%02d-%d" % (i, flag), bytes([flag]) + t.encode())
    put(out, "encode", "invalid-utf8", b"\x00ab\xc3\x28\xed\xa0\x80\xf4\x90\x80\x80")

    # chat: every chat_vectors case, in the reader's input shape.
    if rel:
        for name, text in chat_inputs(os.path.join(rel, "chat_vectors.json")):
            put(out, "chat", name + ".json", text)
            put(out, "json", "chat-" + name + ".json", text)

    # api (byte 0: 0 chat, 1 completions) and history, from the same cases.
    if rel:
        for name, text in chat_inputs(os.path.join(rel, "chat_vectors.json")):
            conv = json.loads(text)
            body = {"model": "k3", "messages": conv["messages"], "max_tokens": 16,
                    "temperature": 0.6, "top_p": 0.95, "stop": ["\n\n", "END"], "seed": 7,
                    "stream": name.startswith("tools"), "stream_options": None}
            if conv.get("tools"):
                body["tools"] = conv["tools"]
            opts = conv.get("options") or {}
            if "tool_choice" in opts:
                body["tool_choice"] = opts["tool_choice"]
            if "response_format" in opts:
                body["response_format"] = opts["response_format"]
            if opts.get("thinking") is False:
                body["reasoning_effort"] = "none"
            put(out, "api", "chat-" + name, b"\x00" + json.dumps(body).encode())
            lines = [json.dumps({k: m[k] for k in ("role", "content", "reasoning_content")
                                 if k in m}, ensure_ascii=False)
                     for m in conv["messages"] if m["role"] in ("system", "user", "assistant")
                     and isinstance(m.get("content"), str) and not m.get("tool_calls")]
            if lines:
                put(out, "history", name + ".jsonl", "\n".join(lines) + "\n")
    put(out, "api", "completion", b"\x01" + json.dumps(
        {"model": "k3", "prompt": "Once upon a time <|open|>", "max_tokens": 8, "top_k": 40,
         "min_p": 0.05, "repetition_penalty": 1.1, "stop": "\n", "n": 1, "echo": False,
         "logprobs": None, "user": "u"}).encode())
    # agent_api (byte 0 bit 0: 0 messages, 1 responses; bit 1: count_tokens).
    tool = {"name": "get_weather", "description": "weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    put(out, "agent_api", "messages", b"\x00" + json.dumps(
        {"model": "k3", "max_tokens": 8, "system": [{"type": "text", "text": "be brief"}],
         "tools": [tool], "tool_choice": {"type": "auto"}, "stop_sequences": ["END"],
         "thinking": {"type": "enabled", "budget_tokens": 4000},
         "messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": [
                          {"type": "thinking", "thinking": "t", "signature": ""},
                          {"type": "tool_use", "id": "t1", "name": "get_weather",
                           "input": {"city": "x"}}]},
                      {"role": "user", "content": [
                          {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                          {"type": "image", "source": {"type": "base64",
                                                       "media_type": "image/png", "data": "AA=="}},
                          {"type": "text", "text": "and?"}]}]}).encode())
    put(out, "agent_api", "count", b"\x02" + json.dumps(
        {"model": "k3", "messages": [{"role": "user", "content": "hi"}],
         "output_config": {"effort": "high"}}).encode())
    put(out, "agent_api", "responses", b"\x01" + json.dumps(
        {"model": "k3", "instructions": "be brief", "max_output_tokens": 8,
         "reasoning": {"effort": "low"}, "text": {"format": {"type": "json_schema", "name": "o",
                                                            "schema": {"type": "object"}}},
         "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}},
                   {"type": "web_search"}],
         "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                   {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]},
                   {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c", "output": "ok"}]}).encode())
    put(out, "api", "chat-parts", b"\x00" + json.dumps(
        {"model": "k3", "messages": [{"role": "developer", "content": "be brief"},
                                     {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                  {"type": "text", "text": "b"}]}],
         "max_completion_tokens": 4, "thinking": False}).encode())
    put(out, "history", "turns.jsonl",
        '{"role": "system", "content": "You are terse."}\n'
        '{"role": "user", "content": "Hi <|sep|>"}\n'
        '{"role": "assistant", "content": "Hello.", "reasoning_content": "greet"}\n\n'
        '{"role": "user", "content": "\\u0000 and \\ud83d\\ude00"}\n'
        '{"role": "assistant", "content": "ok", "reasoning_content": null}')

    # state (byte 0: bit 0 fix the checksum, bit 1 feed a token): tiny-a's.
    if a.k3:
        st = os.path.join(data, "state.k3")
        subprocess.check_call([a.k3, model, "--ids", "1,2,3,4,5", "--gen", "3", "--quiet",
                               "--save-state", st], stdout=subprocess.DEVNULL)
        raw = read(st)
        for flag in (0, 1, 3):
            put(out, "state", "tiny-a-%d" % flag, bytes([flag]) + raw)
        put(out, "state", "tiny-a-truncated", b"\x01" + raw[:len(raw) // 2])

    # png, jpeg: small images of the modes the decoders expand (image.h).
    image_seeds(out)

    # trunk_json: the packed trunk's manifest.
    if os.path.isfile(os.path.join(trunk, "trunk.json")):
        put(out, "trunk_json", "tiny-a", read(os.path.join(trunk, "trunk.json")))
        put(out, "json", "trunk-tiny-a.json", read(os.path.join(trunk, "trunk.json")))

    n = sum(len(fs) for _, _, fs in os.walk(os.path.join(out, "corpus")))
    print("make_seeds: %d seeds under %s/corpus, data in %s" % (n, out, data))


if __name__ == "__main__":
    main()
