#!/usr/bin/python3
"""report.py - the markdown summary of benchmarks/bench.sh.

  report.py OUT_DIR SLICE_DIR RUNS

Reads OUT_DIR/peak.txt (ceilings) and the engine's --out reports
OUT_DIR/{decode,prefill,stream}-TABLE-tTHREADS-pPROMPT-rRUN.json, and the slice's config.

Bytes and FLOPs per token come from the tensor shapes (tools/k3ref.py):
  weight bytes touched by one decode token = every stored tensor except the routed
  experts and the embedding, plus top-k experts per MoE layer and one embedding row;
  weight FLOPs per token = 2 x the weight elements those bytes hold (each is one
  multiply-add per token); attention over positions and the KDA state update are
  not counted (they are <1% of the weight FLOPs at these lengths).
Weights resident: every run keeps all weights in memory, but the engine reads each
routed expert from disk the first time a token picks it, so the time spent reading is
taken out: per step, its expert bytes times the run's read seconds per byte (the
engine's --out report has both).
Decode time per token = median over a run's generation steps (the first step, the
prompt, excluded), then median over runs. Prefill time = the first step of a --gen 1
run (one k3_forward over the prompt plus its last-position logits), median over runs.
Streamed decode: the steps after the first of runs with every layer and lm_head
streamed from the packed trunk, reads included (they are what is measured); stream
GB/s = the step's bytes read (the engine's count) / its seconds.
"""
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import k3ref  # noqa: E402

BYTES = {"BF16": 2, "F32": 4, "U8": 1}


def weight_costs(slice_dir):
    """(bytes touched, weight elements multiplied, trunk bytes) per decode token;
    the trunk is every tensor but the routed experts and the embedding: what a
    token streams with no layer pinned."""
    with open(os.path.join(slice_dir, "config.json"), encoding="utf-8") as f:
        top = json.load(f)
    cfg = k3ref.Config(top.get("text_config", top))
    share = cfg.num_experts_per_token / cfg.num_experts
    nbytes = elems = trunk = 0.0
    for name, (dtype, shape) in k3ref.expected_tensors(cfg).items():
        n = 1
        for d in shape:
            n *= d
        b = n * BYTES[dtype]
        e = 2 * n if name.endswith(".weight_packed") else 0 if name.endswith(".weight_scale") else n
        if "embed_tokens" in name:
            b, e = b / shape[0], 0                      # one row, looked up
        elif ".experts." in name:
            b, e = b * share, e * share
        else:
            trunk += b
        nbytes += b
        elems += e
    return nbytes, elems, trunk


def read_peak(path):
    peak = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            k, v = line.split()
            peak[k] = v
    return peak


def kernel_table(path, peak):
    """Markdown rows of benchmarks/kernels.c's lines against the one-core ceilings."""
    rows = []
    bw = float(peak.get("read_core_gbps", "nan"))
    with open(path, encoding="utf-8") as f:
        for line in f:
            _, table, kind, shape, T, gbps, gflops = line.split()
            fma = float(peak.get(f"fma_core_gflops_{table}", "nan"))
            rows.append(f"| {table} | {kind} {shape} | {T} | {float(gbps):.1f} ({float(gbps) / bw:.0%}) "
                        f"| {float(gflops):.1f} ({float(gflops) / fma:.0%}) |")
    return rows


def compute_seconds(report):
    """Each step's seconds without its expert reads (see the module doc)."""
    ex = report.get("experts", {})
    per_byte = ex["read_seconds"] / ex["bytes_read"] if ex.get("bytes_read") else 0.0
    steps = report.get("steps") or [{"seconds": s, "bytes_read": 0} for s in report["step_seconds"]]
    return [st["seconds"] - st.get("bytes_read", 0) * per_byte for st in steps]


def runs_of(out_dir):
    """{(kind, table, threads, prompt): [report dicts]}"""
    groups = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        m = re.match(r"(decode|prefill|stream|same|spin)-(\w+)-t(\d+)-p(\d+)-r\d+\.json$", os.path.basename(path))
        if m:
            with open(path, encoding="utf-8") as f:
                groups.setdefault((m[1], m[2], int(m[3]), int(m[4])), []).append(json.load(f))
    return groups


def main(out_dir, slice_dir, runs):
    peak = read_peak(os.path.join(out_dir, "peak.txt"))
    bw = float(peak["read_gbps"])
    best = peak["kernels_default"]
    fma = float(peak.get(f"fma_gflops_{best}", peak["fma_gflops_scalar"]))
    nbytes, elems, trunk = weight_costs(slice_dir)
    groups = runs_of(out_dir)
    machine = os.path.join(out_dir, "machine.txt")
    if os.path.exists(machine):
        print("## Machine\n")
        with open(machine, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(" ")
                print(f"- {key.replace('_', ' ')}: {value}")
        print(f"- OpenMP wait policy: {os.environ.get('OMP_WAIT_POLICY', 'default')}\n")
    print("## Ceilings\n")
    print(f"- memory read bandwidth: **{bw:.1f} GB/s** ({peak['threads']} threads, "
          f"{peak['read_buffer_mib']} MiB buffer, median of {peak['runs']} runs)")
    for k, v in peak.items():
        if k.startswith("fma_gflops_"):
            print(f"- fp32 FMA peak, {k[len('fma_gflops_'):]}: **{float(v):.1f} GFLOP/s** "
                  f"(all threads, median of {peak['runs']} runs)")
    kernels = os.path.join(out_dir, "kernels.txt")
    if os.path.exists(kernels):
        print("\n## Kernels alone (one thread, its CPU seconds, best of 5)\n")
        print(f"- one core reads {float(peak['read_core_gbps']):.1f} GB/s")
        for k, v in peak.items():
            if k.startswith("fma_core_gflops_"):
                print(f"- one core's FMA peak, {k[len('fma_core_gflops_'):]}: {float(v):.1f} GFLOP/s")
        print("\n| kernels | matrix | tokens | weight GB/s (of one core's reads) "
              "| GFLOP/s (of one core's FMA peak, same table) |")
        print("|---|---|---|---|---|")
        print("\n".join(kernel_table(kernels, peak)))
    print(f"\nPer decode token the slice touches {nbytes / 1e9:.3f} GB of weights "
          f"({2 * elems / 1e9:.2f} GFLOP of weight products).\n")

    print(f"## Decode (medians of {runs} runs; per run the median of its steps after the "
          f"first: 2 for scalar, more for {best})\n")
    print("| kernels | threads | s/token | weight GB/s | of bandwidth | speedup vs scalar |")
    print("|---|---|---|---|---|---|")
    dec = {}
    for (kind, table, th, _), reps in sorted(groups.items()):
        if kind == "decode":
            dec[(table, th)] = statistics.median(
                statistics.median(compute_seconds(r)[1:]) for r in reps)
    for (kind, table, th, _), reps in sorted(groups.items()):
        if kind == "spin":
            dec[(table + " (spinning threads)", th)] = statistics.median(
                statistics.median(compute_seconds(r)[1:]) for r in reps)
    for (table, th), s in sorted(dec.items(), key=lambda kv: (kv[0][1], kv[0][0] != "scalar", kv[0][0])):
        sp = dec.get(("scalar", th), float("nan")) / s
        print(f"| {table} | {th} | {s:.3f} | {nbytes / s / 1e9:.1f} | {nbytes / s / 1e9 / bw:.0%} "
              f"| {sp:.1f}x |")

    # Same prompt, same ids: every table and thread count, resident or streamed.
    ids = {}
    for (kind, table, th, n), reps in groups.items():
        for r in reps:
            ids.setdefault(n, {})[f"{kind} {table} {th}t"] = r["generated_ids"]
    for n, got in sorted(ids.items()):
        shortest = min(len(v) for v in got.values())
        same = len({tuple(v[:shortest]) for v in got.values()}) == 1
        print(f"\nToken ids with the {n}-token prompt: **{'identical' if same else 'DIFFERENT'}** "
              f"(first {shortest} generated) across {', '.join(sorted(got))}.")
        if not same:
            for k, v in sorted(got.items()):
                print(f"- {k}: {v}")

    print(f"\n## Prefill (one k3_forward over the prompt; medians of {runs} runs)\n")
    print(f"| kernels | threads | tokens | seconds | tokens/s | weight GFLOP/s | of {best} FMA peak |")
    print("|---|---|---|---|---|---|---|")
    for (kind, table, th, n), reps in sorted(groups.items(), key=lambda kv: (kv[0][3], kv[0][2])):
        if kind != "prefill":
            continue
        s = statistics.median(compute_seconds(r)[0] for r in reps)
        gf = 2 * elems * n / s / 1e9
        print(f"| {table} | {th} | {n} | {s:.2f} | {n / s:.1f} | {gf:.1f} | {gf / fma:.0%} |")


    disk = os.path.join(out_dir, "disk.txt")
    if os.path.exists(disk):
        d = read_peak(disk)
        before, after = float(d["disk_odirect_gbps_before"]), float(d["disk_odirect_gbps_after"])
        odirect = max(before, after)
        print(f"\n## Decode with the trunk streamed from disk (medians of {runs} runs)\n")
        key = "disk_odirect_gbps_before" if before >= after else "disk_odirect_gbps_after"
        readers = d.get(key + "_readers", "1")
        one = d.get(key + "_one_reader")
        print(f"- the disk: **{odirect:.2f} GB/s** O_DIRECT reads of the whole trunk.bin "
              f"(scripts/odirect-bw.sh: dd iflag=direct, 4 MiB reads, the best of 1, 2, 4 and 8 "
              f"parallel readers at {readers}" + (f"; one reader {float(one):.2f}" if one else "") +
              f"; {before:.2f} before the runs, {after:.2f} after, the faster counts)")
        print(f"- every layer and lm_head stream through a ring of 2 slots (--trunk-layers 0); "
              f"the trunk is {trunk / 1e9:.3f} GB, and GB read per token is the engine's own "
              f"count (a run still in a ring slot is not read again)\n")
        print("| kernels | threads | s/token | GB read/token | stream GB/s | of the disk's O_DIRECT bandwidth |")
        print("|---|---|---|---|---|---|")
        for (kind, table, th, _), reps in sorted(groups.items()):
            if kind == "stream":
                s = statistics.median(statistics.median(r["step_seconds"][1:]) for r in reps)
                b = statistics.median(statistics.median(st["bytes_read"] for st in r["steps"][1:])
                                      for r in reps)
                print(f"| {table} | {th} | {s:.3f} | {b / 1e9:.2f} | {b / s / 1e9:.2f} "
                      f"| {b / s / 1e9 / odirect:.0%} |")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
