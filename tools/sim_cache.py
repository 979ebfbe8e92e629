#!/usr/bin/python3
"""sim_cache: replay expert-cache traces under several eviction policies and capacities.

  /usr/bin/python3 tools/sim_cache.py TRACE... [--capacity N,N,...] [--gb X,X,...]
      [--expert-bytes B] [--policy lru,belady,prefix] [--pin-layers P,P,...]
      [--experts E] [--tokens N] [--verify-lru C]

TRACE is a trace file or a directory of them (every file in it, in name order). A trace
file is what the engine writes when a trace is set (k3_ec_set_trace): one line per
requested expert, "layer expert hit|miss", in request order. Blank lines and lines starting
with '#' are ignored. Each file is one run: it is replayed from an empty cache, and the
totals add up over files.

Batches. The cache pins the experts of one fetch together, but the trace does not mark
fetches. A batch here is a maximal run of consecutive lines of one layer in which no expert
repeats, cut into chunks of at most the capacity: that is what the engine fetches (a
layer's experts at once, in chunks of the capacity). In a batch, resident experts are
pinned first; each miss then takes an empty slot or evicts a victim that the policy picks
among the unpinned ones. After the batch its experts count as used, in request order.

Policies:
  lru     evict the least recently used: exactly what src/resid/expert_cache.c does.
  belady  evict the one whose next request is furthest away (never requested again =
          infinitely far; ties go to the lowest (layer, expert)): the offline optimum, a
          bound for every online policy at that capacity.
  prefix  pinned prefix + LRU: all E experts of the first P MoE layers of the trace (the P
          lowest layer numbers in it) are loaded once before the run and never evicted; they
          take P*E of the capacity, their requests are hits, and their one-time load is shown
          as "preload" and left out of GB/token. The other capacity - P*E slots run lru for
          the other layers ("n/a" when nothing is left for them). P from --pin-layers.

Capacities are in experts (--capacity) or in GB (--gb, 1e9 bytes, divided by
--expert-bytes: default 17547264, one release expert; the engine's slot is 48 KiB larger).
Tokens: a pass starts at each line whose layer is below the previous line's (and at each
file's start); in a decode trace a pass is one token. --tokens N overrides the count.

Output: a header, then one row per policy and capacity:
  policy capacity GB requests hits misses hit% GB/token preload_GB
The first row, "recorded", counts the hit|miss that the trace itself holds.

--verify-lru C replays lru at capacity C and compares every line's hit|miss with the
recorded one; it prints the first difference and exits 1 (the gate ties simulator and cache
together with it). Standard library only.
"""

import argparse
import heapq
import os
import sys
from collections import OrderedDict

RELEASE_EXPERT_BYTES = 17547264


def read_trace(path):
    """[(layer, expert, recorded_hit)] of one trace file."""
    reqs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3 or parts[2] not in ("hit", "miss"):
                sys.exit(f"sim_cache: {path}:{n}: expected 'layer expert hit|miss', got {line!r}")
            try:
                reqs.append((int(parts[0]), int(parts[1]), parts[2] == "hit"))
            except ValueError:
                sys.exit(f"sim_cache: {path}:{n}: layer and expert must be integers: {line!r}")
    return reqs


def trace_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in sorted(os.listdir(p))
                      if os.path.isfile(os.path.join(p, f))]
        else:
            files.append(p)
    if not files:
        sys.exit("sim_cache: no trace files")
    return files


def batches(reqs, cap):
    """Lists of request indices: same-layer runs without repeats, chunked by cap."""
    out, run, seen = [], [], set()
    for i, (layer, expert, _) in enumerate(reqs):
        if run and (layer != reqs[run[-1]][0] or expert in seen):
            out += [run[j:j + cap] for j in range(0, len(run), cap)]
            run, seen = [], set()
        run.append(i)
        seen.add(expert)
    out += [run[j:j + cap] for j in range(0, len(run), cap)]
    return out


def passes(reqs):
    return sum(1 for i, r in enumerate(reqs) if i == 0 or r[0] < reqs[i - 1][0])


def replay_lru(reqs, cap):
    """Per-request hit flags under lru with cap slots, and the eviction count."""
    hit = [False] * len(reqs)
    lru = OrderedDict()          # key -> None, least recently used first
    evictions = 0
    for b in batches(reqs, cap):
        keys = [reqs[i][:2] for i in b]
        pinned = {k for k in keys if k in lru}
        for i, k in zip(b, keys):
            if k in pinned:
                hit[i] = True
                continue
            if len(lru) >= cap:
                victim = next(v for v in lru if v not in pinned)
                del lru[victim]
                evictions += 1
            lru[k] = None
            pinned.add(k)
        for k in keys:
            lru.move_to_end(k)
    return hit, evictions


def replay_belady(reqs, cap):
    """Per-request hit flags when the victim is the one needed furthest ahead."""
    inf = len(reqs)
    nxt, last = [inf] * len(reqs), {}
    for i in range(len(reqs) - 1, -1, -1):
        k = reqs[i][:2]
        nxt[i] = last.get(k, inf)
        last[k] = i
    hit = [False] * len(reqs)
    resident = {}                # key -> index of its next request
    heap = []                    # (-next request, key); stale entries skipped
    for b in batches(reqs, cap):
        keys = [reqs[i][:2] for i in b]
        pinned = {k for k in keys if k in resident}
        for i, k in zip(b, keys):
            if k in pinned:
                hit[i] = True
            elif len(resident) >= cap:
                aside = []
                while True:
                    nu, v = heapq.heappop(heap)
                    if resident.get(v) != -nu:
                        continue
                    if v in pinned:
                        aside.append((nu, v))
                        continue
                    del resident[v]
                    break
                for a in aside:
                    heapq.heappush(heap, a)
            pinned.add(k)
            resident[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
    return hit


def replay_prefix(reqs, cap, p_layers, n_experts):
    """(hit flags, preload experts), or None when the prefix leaves no lru slot."""
    layers = sorted({r[0] for r in reqs})[:p_layers]
    pinned_layers = set(layers)
    lru_cap = cap - len(layers) * n_experts
    rest = [i for i, r in enumerate(reqs) if r[0] not in pinned_layers]
    if lru_cap < 1 and rest:
        return None
    hit = [r[0] in pinned_layers for r in reqs]
    sub = [reqs[i] for i in rest]
    sub_hit, _ = replay_lru(sub, lru_cap) if sub else ([], 0)
    for i, h in zip(rest, sub_hit):
        hit[i] = h
    return hit, len(layers) * n_experts


def parse_list(s, conv):
    return [conv(x) for x in s.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description="replay expert-cache traces")
    ap.add_argument("traces", nargs="+", help="trace files or directories of them")
    ap.add_argument("--capacity", help="capacities in experts, comma separated")
    ap.add_argument("--gb", help="capacities in GB (1e9 bytes), comma separated")
    ap.add_argument("--expert-bytes", type=int, default=RELEASE_EXPERT_BYTES)
    ap.add_argument("--policy", default="lru,belady,prefix")
    ap.add_argument("--pin-layers", default="1", help="P for the prefix policy (list)")
    ap.add_argument("--experts", type=int, help="experts per layer (default: largest id + 1)")
    ap.add_argument("--tokens", type=int, help="tokens in all traces together")
    ap.add_argument("--verify-lru", type=int, metavar="C")
    a = ap.parse_args(argv)

    runs = [(f, read_trace(f)) for f in trace_files(a.traces)]
    runs = [(f, r) for f, r in runs if r]
    if not runs:
        sys.exit("sim_cache: the traces hold no requests")

    if a.verify_lru is not None:
        for f, reqs in runs:
            hit, _ = replay_lru(reqs, a.verify_lru)
            for n, (r, h) in enumerate(zip(reqs, hit)):
                if r[2] != h:
                    print(f"{f}: request {n + 1} ({r[0]} {r[1]}) was a "
                          f"{'hit' if r[2] else 'miss'} in the trace, lru at {a.verify_lru} "
                          f"makes it a {'hit' if h else 'miss'}")
                    return 1
        print(f"lru at capacity {a.verify_lru} reproduces all "
              f"{sum(len(r) for _, r in runs)} recorded hits and misses")
        return 0

    n_experts = a.experts or 1 + max(r[1] for _, reqs in runs for r in reqs)
    distinct = max(len({r[:2] for r in reqs}) for _, reqs in runs)
    caps = []
    if a.capacity:
        caps += parse_list(a.capacity, int)
    if a.gb:
        caps += [int(g * 1e9 // a.expert_bytes) for g in parse_list(a.gb, float)]
    if not caps:
        caps = [1 << i for i in range(distinct.bit_length() + 1) if 1 << i <= 2 * distinct]
    if min(caps) < 1:
        sys.exit("sim_cache: every capacity must hold at least one expert")
    policies = parse_list(a.policy, str)
    for p in policies:
        if p not in ("lru", "belady", "prefix"):
            sys.exit(f"sim_cache: unknown policy {p}")
    tokens = a.tokens or sum(passes(reqs) for _, reqs in runs)
    total = sum(len(reqs) for _, reqs in runs)
    eb = a.expert_bytes

    print(f"# {len(runs)} trace file(s), {total} requests, {tokens} tokens, "
          f"{n_experts} experts per layer, {eb} bytes per expert")
    print(f"{'policy':<12} {'capacity':>8} {'GB':>9} {'requests':>9} {'hits':>9} "
          f"{'misses':>9} {'hit%':>7} {'GB/token':>9} {'preload_GB':>10}")

    def row(name, cap, hits, preload=0):
        misses = total - hits
        cap_s = "-" if cap is None else str(cap)
        gb_s = "-" if cap is None else f"{cap * eb / 1e9:.3f}"
        print(f"{name:<12} {cap_s:>8} {gb_s:>9} {total:>9} {hits:>9} {misses:>9} "
              f"{100.0 * hits / total:>7.2f} {misses * eb / 1e9 / tokens:>9.4f} "
              f"{preload * eb / 1e9:>10.3f}")

    row("recorded", None, sum(r[2] for _, reqs in runs for r in reqs))
    for cap in caps:
        for p in policies:
            if p == "lru":
                row("lru", cap, sum(sum(replay_lru(reqs, cap)[0]) for _, reqs in runs))
            elif p == "belady":
                row("belady", cap, sum(sum(replay_belady(reqs, cap)) for _, reqs in runs))
            else:
                for pl in parse_list(a.pin_layers, int):
                    res = [replay_prefix(reqs, cap, pl, n_experts) for _, reqs in runs]
                    name = f"prefix{pl}"
                    if any(r is None for r in res):
                        print(f"{name:<12} {cap:>8} {cap * eb / 1e9:>9.3f}   n/a: {pl} layers "
                              f"of {n_experts} experts fill the capacity")
                        continue
                    row(name, cap, sum(sum(h) for h, _ in res), sum(pre for _, pre in res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
