#!/usr/bin/python3
"""make_release_shaped: a sparse checkpoint with the Kimi K3 release's exact shape.

  /usr/bin/python3 tools/make_release_shaped.py OUT_DIR [--release DIR]

Writes OUT_DIR/config.json (the release's, copied at run time from
../shared/k3-release/config.json next to the repository, or --release DIR: never commit
it), model.safetensors.index.json, and the 96 shards model-%05d-of-%06d.safetensors of
../shared/k3-release/model.safetensors.index.json.gz: every one of the 497,220 tensors in
its release shard, with its true dtype and shape (MODEL.md §2.6 and the config) in a valid
safetensors header. The data sections are file holes (the files are truncated to size),
so the 1.56 TB checkpoint takes a few MB of disk; reading it yields zeros. For the engine's
real-scale rehearsal: --plan on every preset, index/bind timing, packing trunk layers.

vision_tower.* / mm_projector.* are not part of the text model (MODEL.md §2.1; the engine
skips them): their shapes are plausible ones from the config's vision_config, BF16. Within a
shard, tensors are laid out in natural order (layer, expert, name). Stdlib only; runs in
well under a minute.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RELEASE = os.path.join(HERE, "..", "..", "shared", "k3-release")
DTYPE_SIZE = {"BF16": 2, "F32": 4, "U8": 1}


def text_shapes(c):
    """suffix rule -> (dtype, shape) for the text model (MODEL.md §2.6)."""
    H, V = c["hidden_size"], c["vocab_size"]
    la = c["linear_attn_config"]
    D, NH = la["head_dim"], la["num_heads"]
    C, K = NH * D, la["short_conv_kernel_size"]
    MH, nope, rope, v = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                         c["v_head_dim"])
    QL, R = c["q_lora_rank"], c["kv_lora_rank"]
    E, Z, F = c["num_experts"], c["routed_expert_hidden_size"], c["moe_intermediate_size"]
    S = F * c["num_shared_experts"]
    I = c["intermediate_size"]
    bf = lambda *s: ("BF16", list(s))  # noqa: E731
    f32 = lambda *s: ("F32", list(s))  # noqa: E731
    u8 = lambda *s: ("U8", list(s))  # noqa: E731
    glob = {
        "language_model.model.embed_tokens.weight": bf(V, H),
        "language_model.lm_head.weight": bf(V, H),
        "language_model.model.norm.weight": bf(H),
        "language_model.model.output_attn_res_norm.weight": bf(H),
        "language_model.model.output_attn_res_proj.weight": bf(1, H),
    }
    common = {
        "input_layernorm.weight": bf(H), "post_attention_layernorm.weight": bf(H),
        "self_attention_res_norm.weight": bf(H), "mlp_res_norm.weight": bf(H),
        "self_attention_res_proj.weight": bf(1, H), "mlp_res_proj.weight": bf(1, H),
    }
    kda = {
        "self_attn.q_proj.weight": bf(C, H), "self_attn.k_proj.weight": bf(C, H),
        "self_attn.v_proj.weight": bf(C, H), "self_attn.g_proj.weight": bf(C, H),
        "self_attn.o_proj.weight": bf(H, C),
        "self_attn.q_conv1d.weight": f32(C, 1, K), "self_attn.k_conv1d.weight": f32(C, 1, K),
        "self_attn.v_conv1d.weight": f32(C, 1, K),
        "self_attn.f_a_proj.weight": bf(D, H), "self_attn.f_b_proj.weight": bf(C, D),
        "self_attn.b_proj.weight": bf(NH, H), "self_attn.A_log": f32(D),
        "self_attn.dt_bias": f32(C), "self_attn.o_norm.weight": f32(D),
    }
    mla = {
        "self_attn.q_a_proj.weight": bf(QL, H), "self_attn.q_a_layernorm.weight": bf(QL),
        "self_attn.q_b_proj.weight": bf(MH * (nope + rope), QL),
        "self_attn.kv_a_proj_with_mqa.weight": bf(R + rope, H),
        "self_attn.kv_a_layernorm.weight": bf(R),
        "self_attn.kv_b_proj.weight": bf(MH * (nope + v), R),
        "self_attn.g_proj.weight": bf(MH * v, H), "self_attn.o_proj.weight": bf(H, MH * v),
    }
    dense = {"mlp.gate_proj.weight": bf(I, H), "mlp.up_proj.weight": bf(I, H),
             "mlp.down_proj.weight": bf(H, I)}
    moe = {
        "block_sparse_moe.gate.weight": bf(E, H),
        "block_sparse_moe.gate.e_score_correction_bias": f32(E),
        "block_sparse_moe.routed_expert_down_proj.weight": bf(Z, H),
        "block_sparse_moe.routed_expert_up_proj.weight": bf(H, Z),
        "block_sparse_moe.routed_expert_norm.weight": bf(Z),
        "block_sparse_moe.shared_experts.gate_proj.weight": bf(S, H),
        "block_sparse_moe.shared_experts.up_proj.weight": bf(S, H),
        "block_sparse_moe.shared_experts.down_proj.weight": bf(H, S),
    }
    # MXFP4: two elements per byte, one E8M0 scale per 32 elements.
    expert = {"w1.weight_packed": u8(F, Z // 2), "w1.weight_scale": u8(F, Z // 32),
              "w3.weight_packed": u8(F, Z // 2), "w3.weight_scale": u8(F, Z // 32),
              "w2.weight_packed": u8(Z, F // 2), "w2.weight_scale": u8(Z, F // 32)}
    kda_layers = set(la["kda_layers"])

    def layer(i, suffix):
        m = re.fullmatch(r"block_sparse_moe\.experts\.(\d+)\.(.*)", suffix)
        if m and int(m.group(1)) < E:
            return expert.get(m.group(2))
        table = dict(common)
        table.update(kda if i + 1 in kda_layers else mla)
        table.update(dense if i < c["first_k_dense_replace"] else moe)
        return table.get(suffix)

    return glob, layer


def vision_shape(name, v, text_hidden):
    """Plausible BF16 shapes for the vision tower and projector (not part of the text
    model, MODEL.md §2.1)."""
    Hv, Iv, P = v["vt_hidden_size"], v["vt_intermediate_size"], v["patch_size"]
    merged = Hv * v["merge_kernel_size"][0] * v["merge_kernel_size"][1]
    rules = [
        (r".*\.wqkv\.weight", [3 * Hv, Hv]), (r".*\.wo\.weight", [Hv, Hv]),
        (r".*\.mlp\.fc0\.weight", [Iv, Hv]), (r".*\.mlp\.fc1\.weight", [Hv, Iv]),
        (r".*\.norm\d\.weight", [Hv]), (r".*final_layernorm\.weight", [Hv]),
        (r".*pos_emb\.weight", [v["init_pos_emb_height"], v["init_pos_emb_width"], Hv]),
        (r".*patch_embed\.proj\.weight", [Hv, 3, P, P]),
        (r"mm_projector\.proj\.0\.weight", [merged, merged]),
        (r"mm_projector\.proj\.2\.weight", [text_hidden, merged]),
        (r"mm_projector\.post_norm\.weight", [merged]),
    ]
    for pat, shape in rules:
        if re.fullmatch(pat, name):
            return "BF16", shape
    return None


def natural_key(name):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def write_shard(path, entries):
    """entries: [(name, dtype, shape)]; header padded to 8 bytes like the
    reference writer; data left as a hole."""
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, dtype, shape in entries:
        n = DTYPE_SIZE[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + off)
    return off


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--release", default=DEFAULT_RELEASE,
                    help="directory with the release's config.json and index (default: %(default)s)")
    a = ap.parse_args(argv)
    cfg_path = os.path.join(a.release, "config.json")
    top = json.load(open(cfg_path))
    text = top.get("text_config", top)
    wm = json.load(gzip.open(os.path.join(a.release, "model.safetensors.index.json.gz")))
    wm = wm["weight_map"]
    glob, layer_shape = text_shapes(text)
    shards = {}
    for name, shard in wm.items():
        m = re.fullmatch(r"language_model\.model\.layers\.(\d+)\.(.*)", name)
        spec = (glob.get(name) if not m else layer_shape(int(m.group(1)), m.group(2))
                if int(m.group(1)) < text["num_hidden_layers"] else None)
        if spec is None and name.startswith(("vision_tower.", "mm_projector.")):
            spec = vision_shape(name, top["vision_config"], text["hidden_size"])
        if spec is None:
            sys.exit(f"make_release_shaped: no shape rule for {name}")
        shards.setdefault(shard, []).append((name,) + spec)
    os.makedirs(a.out_dir, exist_ok=True)
    total = 0
    for shard, entries in sorted(shards.items()):
        entries.sort(key=lambda t: natural_key(t[0]))
        total += write_shard(os.path.join(a.out_dir, shard), entries)
    with open(os.path.join(a.out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f)
    shutil.copyfile(cfg_path, os.path.join(a.out_dir, "config.json"))
    print(f"make_release_shaped: {len(wm)} tensors in {len(shards)} shards, {total} data bytes "
          f"(release index says 1560860324864), all holes, in {a.out_dir}")


if __name__ == "__main__":
    main()
