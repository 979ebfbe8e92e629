"""mpi_cost.py CONFIG.json N [SPLIT_MIN [--row]]: the cost model of bin/k3-mpi's row
partition (src/mpi/part.h) for one decoded token (T = 1), from a config's
dimensions (docs/MODEL.md §2.6): every product k3_matmul gets, which are
split (rows x cols >= SPLIT_MIN, default 65536), and per rank the floats it
contributes and receives in the one MPI_Allgatherv per split product.
Prints a JSON object: products, collectives, bytes_in / bytes_own per rank
(lists), bytes_in_max, and per block kind the same. Routed experts of a
one-token call run as k3_matvec inside moe.c's parallel loop, so they are
not products here: they are split by expert id (src/model/moe_part.h), one
gather per MoE layer (expert_gathers), in which a rank receives the outputs
of the chosen experts it does not own: expert_bytes_in_mean is its
expectation under uniform routing, k x (N-1)/N x Z floats a layer (the
measured value depends on the routing)."""
import json
import sys

UNIT = 16  # K3_MPI_ROW_UNIT


def rows_of(rows, r, n):
    units = (rows + UNIT - 1) // UNIT
    lo, hi = units * r // n * UNIT, units * (r + 1) // n * UNIT
    return min(lo, rows), min(hi, rows)


def products(c):
    """(block, rows, cols) of every k3_matmul of one token, in forward order."""
    H, L = c["hidden_size"], c["num_hidden_layers"]
    la = c["linear_attn_config"]
    kda = set(la["kda_layers"])  # one-based
    NH, D = la["num_heads"], la["head_dim"]
    C = NH * D
    NA = c["num_attention_heads"]
    QL, R, DR = c["q_lora_rank"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    DQ, DV = c["qk_nope_head_dim"] + DR, c["v_head_dim"]
    E, Z = c["num_experts"], c["routed_expert_hidden_size"]
    S = c["moe_intermediate_size"] * c.get("num_shared_experts", 0)
    I = c["intermediate_size"]
    out = []
    for i in range(L):
        if i + 1 in kda:
            out += [("kda", C, H)] * 3 + [("kda", C, H), ("kda", D, H), ("kda", C, D),
                                          ("kda", NH, H), ("kda", H, C)]
        else:
            if QL:
                out += [("mla", QL, H), ("mla", NA * DQ, QL)]
            else:
                out += [("mla", NA * DQ, H)]
            out += [("mla", R + DR, H), ("mla", NA * DV, H), ("mla", H, NA * DV)]
        if i < c["first_k_dense_replace"]:
            out += [("dense", I, H), ("dense", I, H), ("dense", H, I)]
        else:
            out += [("moe", E, H), ("moe", Z, H)]
            if S:
                out += [("moe", S, H), ("moe", S, H), ("moe", H, S)]
            out += [("moe", H, Z)]
    out.append(("lm_head", c["vocab_size"], H))
    return out


def main():
    cfg = json.load(open(sys.argv[1]))
    c = cfg.get("text_config", cfg)
    n = int(sys.argv[2])
    smin = int(sys.argv[3]) if len(sys.argv) > 3 else 65536
    res = {"ranks": n, "split_min": smin, "products": 0, "collectives": 0,
           "bytes_own": [0] * n, "bytes_in": [0] * n, "blocks": {}}
    for block, rows, cols in products(c):
        res["products"] += 1
        b = res["blocks"].setdefault(block, {"collectives": 0, "bytes_in_max": 0})
        if n < 2 or rows * cols < smin:
            continue
        res["collectives"] += 1
        b["collectives"] += 1
        worst = 0
        for r in range(n):
            lo, hi = rows_of(rows, r, n)
            res["bytes_own"][r] += 4 * (hi - lo)
            res["bytes_in"][r] += 4 * (rows - (hi - lo))
            worst = max(worst, 4 * (rows - (hi - lo)))
        b["bytes_in_max"] += worst
    res["bytes_in_max"] = max(res["bytes_in"])
    moe = c["num_hidden_layers"] - c["first_k_dense_replace"]
    k, Z = c["num_experts_per_token"], c["routed_expert_hidden_size"]
    res["moe_layers"] = moe
    res["experts_per_token"] = k * moe
    res["expert_gathers"] = moe if n >= 2 else 0
    res["expert_bytes_in_mean"] = 4 * k * Z * moe * (n - 1) / n
    if sys.argv[4:] == ["--row"]:  # a markdown table row (benchmarks/mpi.sh)
        b, mb = res["blocks"], lambda x: "%.2f" % (x / 1e6)
        print("| %d | %d + %d | %s | %s | %s |" % (
            n, res["collectives"], res["expert_gathers"], mb(res["bytes_in_max"]), " | ".join(
                mb(b[k]["bytes_in_max"]) for k in ("kda", "mla", "dense", "moe", "lm_head")),
            mb(res["expert_bytes_in_mean"])))
    else:
        print(json.dumps(res))


main()
