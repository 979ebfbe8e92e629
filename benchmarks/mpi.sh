# benchmarks/mpi.sh - bin/k3-mpi's communication per decoded token, measured
# (K3_MPI_STATS=1, counted in the partition hook) against the cost model
# (benchmarks/mpi_cost.py), then the model at the release's dimensions.
# Not a timed test: ranks share this machine's cores, so only counts are
# compared; each must match the model exactly (exit 1 otherwise).
#   K3_BIN=bin/k3 K3_MPI_BIN=bin/k3-mpi K3_BUILD=build sh benchmarks/mpi.sh
# Per token = (run with --gen 9) - (run with --gen 5), over 4 tokens: the
# prompt's share cancels. --spec 0: one one-row forward per decoded token,
# what the model counts (a verify call would carry several rows).
set -eu
K3_BUILD=${K3_BUILD:-build}
K3_MPI_BIN=${K3_MPI_BIN:-bin/k3-mpi}
PYTHON=${PYTHON:-/usr/bin/python3}
export K3_MODELS=${K3_MODELS:-$K3_BUILD/models} PYTHON
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 K3_MPI_STATS=1
. tests/gates/lib.sh
MPIRUN="mpirun"
mpirun --version 2>&1 | grep -q "Open MPI" && MPIRUN="mpirun --oversubscribe"
out="$K3_BUILD/bench-mpi"
mkdir -p "$out"
stats() { # NP SMIN MODEL GEN -> "rank products split tokens own in wait gathers here ebytes"
    K3_MPI_SPLIT_MIN=$2 $MPIRUN -np "$1" "$K3_MPI_BIN" "$3" --ids 1,2,3,4 --gen "$4" \
        --ignore-eos --quiet --spec 0 2>&1 >/dev/null | sed -n 's/^k3-mpi: \([0-9]\)/\1/p'
}
echo "| model | ranks | split min | k3_matmul/token | collectives/token |" \
    "bytes in/token/rank (measured) | (model) | expert gathers/token |" \
    "experts computed/token by rank | expert bytes in/token/rank (measured) | (mean, model) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for name in tiny-a moe64; do
    dir=$(model "$name" "$name")
    for np in 2 3 4; do
        for smin in 0 65536; do
            stats "$np" "$smin" "$dir" 5 >"$out/a"
            stats "$np" "$smin" "$dir" 9 >"$out/b"
            "$PYTHON" benchmarks/mpi_cost.py "$dir/config.json" "$np" "$smin" >"$out/m.json"
            "$PYTHON" - "$out" "$name" "$np" "$smin" <<'PY'
import json, sys
d, name, np_, smin = sys.argv[1:]
rd = lambda f: [list(map(float, l.split())) for l in open(f"{d}/{f}") if l.strip()]
a, b, m = rd("a"), rd("b"), json.load(open(f"{d}/m.json"))
prod = (b[0][1] - a[0][1]) / 4
coll = (b[0][2] - a[0][2]) / 4
bin_ = [(b[r][5] - a[r][5]) / 4 for r in range(len(a))]
ok = prod == m["products"] and coll == m["collectives"]
ok = ok and bin_ == [float(x) for x in m["bytes_in"]]
# The experts of one token: one gather per MoE layer, each chosen expert
# computed by exactly one rank (the split depends on the routing).
gat = (b[0][7] - a[0][7]) / 4
here = [(b[r][8] - a[r][8]) / 4 for r in range(len(a))]
ebin = [(b[r][9] - a[r][9]) / 4 for r in range(len(a))]
ok = ok and gat == m["expert_gathers"] and sum(here) == m["experts_per_token"]
print(f"| {name} | {np_} | {smin} | {prod:.0f} | {coll:.0f} | "
      f"{' / '.join('%.0f' % x for x in bin_)} | {' / '.join(map(str, m['bytes_in']))} | "
      f"{gat:.0f} | {' / '.join('%.1f' % x for x in here)} | "
      f"{' / '.join('%.0f' % x for x in ebin)} | {m['expert_bytes_in_mean']:.0f} |")
if not ok:
    sys.exit(f"{name} at {np_} ranks: measured counts differ from the cost model")
PY
        done
    done
done
echo
echo "The release's dimensions (../shared/k3-release/config.json), one decoded token:"
echo "| ranks | collectives/token (products + expert gathers) | MB in/token/rank (max) |" \
    "kda | mla | dense | moe | lm_head (MB max) | routed experts (MB, mean) |"
echo "|---|---|---|---|---|---|---|---|---|"
for np in 2 4 8 16 32; do
    "$PYTHON" benchmarks/mpi_cost.py ../shared/k3-release/config.json "$np" 65536 --row
done

# Time and memory at 1 and 2 ranks (one OpenMP thread a rank) on wide-moe:
# this machine's two cores are shared, so the times say little about a
# cluster; the per-rank bytes are the point (rank 0's plan and peak RSS).
echo
echo "wide-moe, 32 decoded tokens, one thread a rank (load: $(cut -d' ' -f1-3 /proc/loadavg)):"
echo "| ranks | ms/token | rank 0 trunk planned (MB) | rank 0 expert slots (of) |" \
    "rank 0 peak RSS (MB) |"
echo "|---|---|---|---|---|"
dir=$(model wide-moe wide-moe)
for np in 1 2; do
    if [ "$np" = 1 ]; then
        "${K3_BIN:-bin/k3}" "$dir" --ids 1,2,3,4 --gen 32 --ignore-eos --quiet --spec 0 \
            --out "$out/t1.json" >/dev/null 2>&1
    else
        $MPIRUN -np "$np" "$K3_MPI_BIN" "$dir" --ids 1,2,3,4 --gen 32 --ignore-eos --quiet \
            --spec 0 --out "$out/t$np.json" >/dev/null 2>&1
    fi
    "$PYTHON" - "$out/t$np.json" "$np" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p, b = r["plan"], r["plan"]["bytes"]
trunk = b["pinned_trunk"] + b["ring"] + b["lm_head"]
print("| %s | %.2f | %.2f | %d (%d) | %.1f |" % (
    sys.argv[2], 1000 * r["seconds_per_token"], trunk / 1e6,
    p["expert_slots"], p.get("experts_here", p["experts_total"]), r["peak_rss_bytes"] / 1e6))
PY
done
