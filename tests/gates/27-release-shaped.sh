#!/bin/sh
# 27-release-shaped.sh - the real-scale rehearsal: a sparse checkpoint with the
# release's 96 shards, 497,220 tensors, true shapes and dtypes, and the real
# config (tools/make_release_shaped.py; data are file holes, a few MB on disk).
#  - `k3 --plan` indexes and binds all of it under every preset and prints
#    plans whose numbers match the release: trunk ~108.8 GB over 93 layers,
#    lm_head and embedding V*H*2, 82,432 experts of 17,547,264 bytes (+ slack),
#    KDA state of 69 layers, a KV cache of 24 MLA layers; pinned layers grow
#    with the budget and every budgeted plan fits its budget. The index/bind
#    time is printed (the CLI's "indexed and bound N tensors in X s").
#    A ring slot is a MoE layer's run (~1.17 GB): layer 0 and lm_head
#    (~2.2 GB each) are cut into sub-runs (model/weights.h).
#  - pack-trunk --layers 2 packs real-sized runs (~7.9 GB of images) and the
#    holes stay holes, layer 0 and lm_head cut (format 4); the engine
#    accepts the trunk.
# ladder: check
# (make check and CI only, not make test: 497,220 tensors at true shapes: I/O-bound)
. tests/gates/lib.sh

REL=../shared/k3-release
[ -f "$REL/config.json" ] || die "no $REL/config.json (the release files beside the repository)"
D="$K3_MODELS/release-shaped"
T="$K3_BUILD/gate-release-shaped"
rm -rf "$T"
mkdir -p "$T"
stamp=$(cat tools/make_release_shaped.py "$REL/config.json" | cksum | cut -d' ' -f1)
if [ ! -f "$D/.stamp" ] || [ "$(cat "$D/.stamp")" != "$stamp" ]; then
    rm -rf "$D"
    "$PYTHON" tools/make_release_shaped.py "$D" >&2 || die "make_release_shaped failed"
    echo "$stamp" >"$D/.stamp"
fi
kb=$(du -sk "$D" | cut -f1)
[ "$kb" -lt 300000 ] || die "the release-shaped checkpoint takes $kb KB: its data should be holes"

for p in ultra laptop desktop workstation server max auto; do
    # Plans larger than this machine are printed anyway (the point is the numbers).
    set +e
    "$K3_BIN" "$D" --plan --preset "$p" --max-context 4096 >"$T/plan-$p.txt" 2>"$T/plan-$p.err"
    rc=$?
    set -e
    if [ "$rc" -eq 3 ]; then
        echo "$p: over this machine's memory ($(cut -c1-120 "$T/plan-$p.err")); --no-mem-check"
        "$K3_BIN" "$D" --plan --preset "$p" --max-context 4096 --no-mem-check >"$T/plan-$p.txt" ||
            die "--plan --preset $p --no-mem-check failed"
    elif [ "$rc" -ne 0 ]; then
        cat "$T/plan-$p.err" >&2
        die "--plan --preset $p failed ($rc)"
    fi
    grep "indexed and bound" "$T/plan-$p.txt" | sed "s/^/$p: /"
done
# Everything streamed, layer 0 and lm_head included: the ring is still two
# slots of a MoE layer's run (their sub-runs are smaller).
"$K3_BIN" "$D" --plan --trunk-layers 0 --stream-lm-head --cache-experts 16 --max-context 4096 \
    --no-mem-check >"$T/plan-streamed.txt" 2>&1 || die "--plan with everything streamed failed"

"$PYTHON" - "$T" <<'EOF'
import re, sys
T = sys.argv[1]
GIB = 2 ** 30
V, H, L, E = 163840, 7168, 93, 896
EXPERT = 17547264
BUDGET = {"ultra": 8, "laptop": 16, "desktop": 32, "workstation": 64, "server": 256}
bad = []
def want(ok, what):
    if not ok:
        bad.append(what)
plans = {}
for p in ["ultra", "laptop", "desktop", "workstation", "server", "max", "auto", "streamed"]:
    text = open(f"{T}/plan-{p}.txt").read()
    g = lambda pat: re.search(pat, text)
    n = int(g(r"indexed and bound (\d+) tensors")[1])
    want(n == 497220, f"{p}: bound {n} tensors, not 497,220")
    r = {k: float(g(rf"{k}\s+([\d.]+) GB")[1]) for k in
         ["trunk pinned", "trunk ring", "lm_head", "embedding", "expert cache", "KDA state",
          "MLA KV cache", "total"]}
    r["layers"] = int(g(r"trunk pinned\s+[\d.]+ GB\s+(\d+) layers")[1])
    m = g(r"(\d+) of (\d+) experts")
    r["slots"], r["experts"] = int(m[1]), int(m[2])
    plans[p] = r
    want(r["experts"] == 92 * E, f"{p}: {r['experts']} experts, not 82,432")
    # 69 KDA layers: conv history 3*(K-1)*C floats + state NH*D*D floats each.
    kda = 69 * (3 * 3 * 12288 + 96 * 128 * 128) * 4
    want(abs(r["KDA state"] * GIB - kda) < 0.0006 * GIB, f"{p}: KDA state {r['KDA state']} GB")
    mla = 24 * 4096 * (512 + 64) * 4  # 24 MLA layers, latent + rope per position
    want(abs(r["MLA KV cache"] * GIB - mla) < 0.0006 * GIB, f"{p}: MLA KV cache {r['MLA KV cache']} GB")
    for k in ("lm_head", "embedding"):
        want(r[k] == 0 or abs(r[k] * GIB - V * H * 2) < 0.0006 * GIB, f"{p}: {k} {r[k]} GB")
    if p in BUDGET:
        want(r["total"] <= BUDGET[p], f"{p}: plan {r['total']} GB over its {BUDGET[p]} GB budget")
    # Sub-runs (model/weights.h): a ring slot is the largest streamed run, a
    # MoE layer's (~1.17 GB), never layer 0 or lm_head whole (~2.2 GB).
    s = g(r"(\d+) slots for .*, ([\d.]+) GB each \(the largest streamed run: ([^)]*)\)")
    if s:
        r["slot"], r["slot_run"] = float(s[2]), s[3]
        want(re.fullmatch(r"layer [1-9]\d*", s[3]) is not None and r["slot"] < 1.25,
             f"{p}: ring slots of {s[2]} GB for {s[3]}, not a MoE layer's")
        want(abs(int(s[1]) * r["slot"] - r["trunk ring"]) < 0.002,
             f"{p}: ring {r['trunk ring']} GB is not {s[1]} slots of {s[2]} GB")
    if p == "streamed":
        want(r["layers"] == 0 and r["lm_head"] == 0 and "slot" in r,
             f"streamed: {r['layers']} layers pinned, lm_head {r['lm_head']} GB")
mx = plans["max"]
want(mx["layers"] == L and mx["slots"] == 92 * E, "max: not everything resident")
trunk = mx["trunk pinned"] * GIB
want(abs(trunk - 108.8e9) < 0.1e9, f"max: trunk {trunk / 1e9:.2f} GB, MODEL.md §2.7 says 108.8 GB")
slot = mx["expert cache"] * GIB / (92 * E)
want(EXPERT <= slot <= EXPERT + 128 * 1024, f"expert slot ~{slot:.0f} bytes, expert is {EXPERT}")
order = ["ultra", "laptop", "desktop", "workstation", "server", "max"]
layers = [plans[p]["layers"] for p in order]
want(layers == sorted(layers), f"pinned layers do not grow with the budget: {layers}")
want(plans["server"]["layers"] == L, "server (256 GB) does not pin the whole trunk")
for p in order:
    r = plans[p]
    print(f"{p:12s} pinned {r['layers']:2d} layers {r['trunk pinned']:8.3f} GB, ring {r['trunk ring']:.3f} GB"
          f"{' (slots for ' + r['slot_run'] + ')' if 'slot_run' in r else ''}, lm_head {r['lm_head']:.3f} GB, "
          f"experts {r['slots']}/{r['experts']}, total {r['total']:.3f} GB")
print(f"trunk {trunk / 1e9:.2f} GB, expert slot ~{slot:.0f} bytes")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
EOF

# Two real-sized layers, lm_head and the embedding: ~7.9 GB of images, all holes.
"$K3_BIN" pack-trunk "$D" "$T/trunk" --layers 2 || die "pack-trunk --layers 2 failed"
kb=$(du -sk "$T/trunk/trunk.bin" | cut -f1)
[ "$kb" -lt 1024 ] || die "trunk.bin of a sparse checkpoint takes $kb KB: holes were written"
"$K3_BIN" "$D" --plan --layers 2 --trunk "$T/trunk" --no-mem-check >/dev/null ||
    die "the engine refused the trunk it was packed for"
# Format 4's sub-runs at real size: layer 0's MLP matrices (33,792 x 7,168) a
# run each, lm_head in 5 row blocks of 32,768 rows (the last a run of its own).
for run in "layer 0/gate" "layer 0/up" "layer 0/down" "lm_head/0" "lm_head/4"; do
    grep -q "\"$run\"" "$T/trunk/trunk.json" || die "the release-sized trunk has no run \"$run\""
done
grep -q '"rows": \[131072, 163840\]' "$T/trunk/trunk.json" || die "lm_head/4 does not hold rows 131072-163840"
expect_exit 2 "no run \"layer 2\"" "$K3_BIN" "$D" --plan --layers 3 --trunk "$T/trunk" --no-mem-check
echo "ok: packed 2 release-sized layers, trunk.bin $(ls -l "$T/trunk/trunk.bin" | awk '{print $5}') bytes in $kb KB of disk"
