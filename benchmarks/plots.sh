#!/bin/sh
# plots.sh - k3's performance plots (make plots). Not a test: it reports, it
# does not judge, and nothing in make test runs it. Two sweeps:
#   1. seconds per token against the memory budget, on the "slice"
#      checkpoint (the release's real widths, 4 layers, 32 experts, ~7.6 GB;
#      made once in $K3_SLICE_DIR and reused, as by bench.sh). For each
#      budget (GiB, like a preset's) the engine's own planner splits it
#      ($K3_BUILD/bench/plan_budget, benchmarks/plan_budget.c: the k3
#      command line reaches a total budget only through the presets), then
#      k3 runs that exact plan (--trunk-layers, --cache-experts, --stream-*)
#      on a short prompt and a few tokens. s/token = median of the steps
#      after the first (the prompt); a budget below the smallest plan (the
#      plan would exceed it) is recorded as "does not fit". The plan's
#      split (layers pinned, expert slots, bytes per consumer) and the
#      measured peak RSS are kept too. The budget bounds k3's memory, not
#      the OS page cache: where the checkpoint stays in the page cache,
#      streamed layers are read at memory-copy speed, not disk speed (the
#      bytes read per token are kept to work out the disk's share);
#   2. expert-cache hit rate against the cache capacity: one run of the
#      "wide-moe" checkpoint (6 layers, 5 of them MoE with 96 experts,
#      top-8; made once in $K3_WIDE_DIR) with --dump-cache-trace over a long
#      generation, replayed by tools/sim_cache.py under every policy it has
#      (lru, belady, prefix1, prefix2) at a range of capacities. The run's
#      own cache (lru at $K3_PLOTS_TRACE_CAP slots) is checked against the
#      simulator (--verify-lru) and drawn as the measured point.
# Outputs in $K3_PLOTS_DIR (default $K3_BUILD/plots): budget.dat and
# cache.dat (tab-separated, '#' header), budget.svg/.png and cache.svg/.png
# (gnuplot), machine.txt, the engine's --out reports and the trace. With
# K3_PLOTS_DOCS=1 the SVGs and .dat files are copied into docs/plots/.
# Needs gnuplot (Debian: gnuplot-nox; `sh scripts/deps.sh plots`); exit 2
# without it. Environment: K3_BIN, K3_BUILD, PYTHON as for bench.sh;
# K3_SLICE_DIR (default build/slice), K3_WIDE_DIR (default
# $K3_BUILD/wide-moe); K3_PLOTS_BUDGETS (GiB list, default below);
# K3_PLOTS_PROMPT prompt tokens (default 4); K3_PLOTS_GEN tokens per budget
# run (default 6: 5 steady steps); K3_PLOTS_RUNS runs per budget, in
# rounds over the budgets, their steady steps pooled (default 1);
# K3_PLOTS_THREADS (default: the engine's, all cores); K3_PLOTS_TRACE_GEN
# tokens of the trace run (default 512); K3_PLOTS_TRACE_CAP the trace run's
# cache slots (default 120); OMP_WAIT_POLICY (default passive, see
# bench.sh). With one run per budget about 4 minutes on 2 cores, plus the
# checkpoints the first time. K3_PLOTS_ONLY=1 measures nothing: it draws
# the plots again from the .dat files and trace.json already in the
# directory (to change how they look).
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plots.sh: gnuplot is missing; install it with: apt-get install gnuplot-nox" \
        "(or: sh scripts/deps.sh plots)" >&2
    exit 2
fi
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
slice="${K3_SLICE_DIR:-build/slice}"
wide="${K3_WIDE_DIR:-$K3_BUILD/wide-moe}"
out="${K3_PLOTS_DIR:-$K3_BUILD/plots}"
budgets="${K3_PLOTS_BUDGETS:-4 4.5 5 5.5 6 6.5 7 7.5 8 9 10 11 11.5 12 13}"
plen="${K3_PLOTS_PROMPT:-4}"
gen="${K3_PLOTS_GEN:-6}"
runs="${K3_PLOTS_RUNS:-1}"
tgen="${K3_PLOTS_TRACE_GEN:-512}"
tcap="${K3_PLOTS_TRACE_CAP:-120}"
threads=""
[ -z "${K3_PLOTS_THREADS:-}" ] || threads="--threads $K3_PLOTS_THREADS"
planner="$K3_BUILD/bench/plan_budget"
[ -x "$planner" ] || { echo "plots.sh: $planner missing (make plots builds it)" >&2; exit 2; }
mkdir -p "$out"
# N spread-out ordinary ids of the model in DIR (its last 256 ids are special).
ids() { "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); v=c.get("text_config",c)["vocab_size"]; n=int(sys.argv[2]); print(",".join(str((i*7919+13)%(v-256)) for i in range(n)))' "$1" "$2"; }

# A checkpoint made once and reused while its stamp holds. The slice is
# shared with bench.sh and pack_bench.sh, which stamp it differently (the
# preset's dimensions; the maker's checksum): either stamp means current.
checkpoint() {
    dir=$1 preset=$2
    s1=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tools"); import make_checkpoint as m; print(sorted(m.PRESETS[sys.argv[1]].items()))' "$preset" | cksum | cut -d' ' -f1)
    s2="$(cksum <tools/make_checkpoint.py | cut -d' ' -f1)-$preset"
    have=$(cat "$dir/.stamp" 2>/dev/null || true)
    if [ "$have" != "$s1" ] && [ "$have" != "$s2" ]; then
        echo "== making the $preset checkpoint in $dir (once)"
        rm -rf "$dir"
        "$PYTHON" tools/make_checkpoint.py "$dir" --preset "$preset"
        echo "$s1" >"$dir/.stamp"
    fi
}

# The measurements (all but the drawing).
measure() {
    rm -f "$out"/*.json "$out"/*.plan "$out"/*.dat "$out"/*.svg "$out"/*.png "$out"/*.gp
    {
        echo "cpu $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
        echo "cores $(getconf _NPROCESSORS_ONLN)"
        echo "memory_gib $(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo 2>/dev/null)"
        echo "kernel $(uname -sr)"
        echo "k3 $("$K3_BIN" --version 2>&1 | head -n 1)"
        echo "threads ${K3_PLOTS_THREADS:-all}"
        echo "load_before $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
    } >"$out/machine.txt"

    # ---------------------------------------------------------------- sweep 1
    checkpoint "$slice" slice
    pids=$(ids "$slice" "$plen")
    tokens=$((plen + gen))
    echo "== seconds per token against the memory budget ($slice, $plen prompt tokens, $gen generated)"
    printf '# budget_gib\tfits\ts_per_token\tplan_gib\tpinned_trunk_gib\tring_gib\texpert_cache_gib\tother_gib\tpeak_rss_gib\tpinned_layers\tlayers\texpert_slots\texperts_total\tread_gb_per_token\thit_pct\tlabel\n' >"$out/budget.dat"
    for b in $budgets; do
        rc=0
        "$planner" "$slice" "$b" "$tokens" >"$out/budget-$b.plan" || rc=$?
        [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "plots.sh: plan_budget $b failed (exit $rc)" >&2; exit 1; }
        grep -q '^fits' "$out/budget-$b.plan" || echo "  $b GiB: more than this machine has; left out"
    done
    # Rounds over all budgets rather than runs of one budget back to back, so
    # that a busy minute of a shared machine spreads over the budgets.
    for r in $(seq "$runs"); do
        for b in $budgets; do
            grep -q '^fits 1' "$out/budget-$b.plan" || continue
            # shellcheck disable=SC2046,SC2086 # the plan's options are words
            "$K3_BIN" "$slice" --ids "$pids" --gen "$gen" --ignore-eos $threads --quiet \
                --out "$out/budget-$b-r$r.json" $(sed -n 's/^options //p' "$out/budget-$b.plan") >/dev/null
        done
    done
    for b in $budgets; do
        p="$out/budget-$b.plan"
        grep -q '^fits' "$p" || continue
        # shellcheck disable=SC2046 # no run files when it does not fit
        "$PYTHON" - "$p" $(ls "$out/budget-$b"-r*.json 2>/dev/null) >>"$out/budget.dat" <<'EOF'
import json, statistics, sys
plan = dict(l.split(" ", 1) for l in open(sys.argv[1]).read().splitlines())
G = 2 ** 30
tot = int(plan["total_bytes"])
parts = [int(plan[k]) for k in ("pinned_trunk_bytes", "ring_bytes", "expert_cache_bytes")]
layers = int(plan["pinned_layers"]) + int(plan["streamed_layers"])
label = "%sL+%sE" % (plan["pinned_layers"], plan["expert_slots"])
fits = plan["fits"] == "1"
s = rss = read = hit = "NaN"
if fits:
    runs = [json.load(open(f)) for f in sys.argv[2:]]
    for d in runs:
        if d["plan"]["bytes"]["total"] != tot:
            sys.exit("plots.sh: the run's plan (%d bytes) is not plan_budget's (%d)" % (d["plan"]["bytes"]["total"], tot))
    steady = [x for d in runs for x in d["steps"][1:]]
    s = "%.4f" % statistics.median(x["seconds"] for x in steady)
    read = "%.3f" % (statistics.median(x["bytes_read"] for x in steady) / 1e9)
    req = sum(x["expert_requests"] for x in steady)
    hit = "%.1f" % (100.0 * sum(x["expert_hits"] for x in steady) / req if req else 100.0)
    rss = "%.3f" % (max(d["peak_rss_bytes"] for d in runs) / G)
else:
    label = "does not fit"
print("\t".join([plan["budget_gb"], "1" if fits else "0", s, "%.3f" % (tot / G)]
                + ["%.3f" % (x / G) for x in parts] + ["%.3f" % ((tot - sum(parts)) / G), rss,
                plan["pinned_layers"], str(layers), plan["expert_slots"], plan["experts_total"],
                read, hit, '"%s"' % label]))
EOF
        tail -n 1 "$out/budget.dat" | tr -d '"' | awk -F'\t' '{ printf "  %5s GiB: %-12s plan %s GiB, peak RSS %s GiB, %s s/token, %s GB read/token, hit %s%%\n", $1, $16, $4, $9, $3, $14, $15 }'
    done

    # ---------------------------------------------------------------- sweep 2
    checkpoint "$wide" wide-moe
    echo "== expert-cache hit rate against capacity ($wide, 16 prompt tokens, $tgen generated, cache $tcap)"
    rm -rf "$out/trace"
    # shellcheck disable=SC2086
    "$K3_BIN" "$wide" --ids "$(ids "$wide" 16)" --gen "$tgen" --ignore-eos $threads --quiet \
        --cache-experts "$tcap" --dump-cache-trace "$out/trace" --out "$out/trace.json" >/dev/null
    "$PYTHON" tools/sim_cache.py "$out/trace" --verify-lru "$tcap"
    total=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["experts_total"])' "$out/trace.json")
    caps=$("$PYTHON" -c 'import sys; t=int(sys.argv[1]); c=sorted({x for x in [8,16,24,32,40,48,56,64,80,96,112,128,int(sys.argv[2])]+list(range(160,t,32))+[t] if x<=t}); print(",".join(map(str,c)))' "$total" "$tcap")
    "$PYTHON" tools/sim_cache.py "$out/trace" --capacity "$caps" --policy lru,belady,prefix \
        --pin-layers 1,2 --expert-bytes 1 >"$out/sim.txt"
    "$PYTHON" - "$out/sim.txt" "$tcap" "$total" >"$out/cache.dat" <<'EOF'
import sys
rows, rec = {}, None
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0] in ("#", "policy"):
        continue
    if f[0] == "recorded":
        rec = f[6]
        continue
    rows.setdefault(int(f[1]), {})[f[0]] = f[6] if f[3] != "n/a:" else "NaN"
pols = ["lru", "belady", "prefix1", "prefix2"]
print("# capacity_experts\tcapacity_pct\t" + "\t".join(p + "_hit_pct" for p in pols) + "\tengine_hit_pct")
for cap in sorted(rows):
    eng = rec if cap == int(sys.argv[2]) else "NaN"
    print("\t".join([str(cap), "%.1f" % (100.0 * cap / int(sys.argv[3]))]
                    + [rows[cap].get(p, "NaN") for p in pols] + [eng]))
EOF
    awk -F'\t' '!/^#/ { printf "  %4s experts: lru %6s%%  belady %6s%%  prefix1 %6s%%  prefix2 %6s%%%s\n", $1, $3, $4, $5, $6, ($7 != "NaN" ? "  engine " $7 "%" : "") }' "$out/cache.dat"
    echo "load_after $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >>"$out/machine.txt"
}

if [ "${K3_PLOTS_ONLY:-0}" = 1 ]; then
    echo "== drawing again from $out/budget.dat and $out/cache.dat"
else
    measure
fi

# ---------------------------------------------------------------- plots
total=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["experts_total"])' "$out/trace.json")
tgen=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["generated_ids"]))' "$out/trace.json")
tcap=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["expert_slots"])' "$out/trace.json")
experts_total=$(awk -F'\t' '!/^#/ && $2 == 1 { print $13; exit }' "$out/budget.dat")
n_layers=$(awk -F'\t' '!/^#/ { print $11; exit }' "$out/budget.dat")
xr=$(awk -F'\t' '!/^#/ { if (n++ == 0 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 } END { print lo - 0.5 ":" hi + 0.5 }' "$out/budget.dat")
# The presets inside the swept range, marked on the budget axis.
presets=$(awk -F'\t' '!/^#/ { if (n++ == 0 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
    END { split("ultra 8 laptop 16 desktop 32 workstation 64", p, " ")
          for (i = 1; i < 8; i += 2) if (p[i + 1] >= lo && p[i + 1] <= hi)
              printf "set arrow from %s, graph 0 to %s, graph 1 nohead lc rgb \"gray\"; set label \"preset %s\" at %s, graph 0.95 offset 0.5,0 font \",9\"\n", p[i + 1], p[i + 1], p[i], p[i + 1] }' "$out/budget.dat")
top_k=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); c=c.get("text_config",c); print(c["num_experts_per_token"] * (c["num_hidden_layers"] - c.get("first_k_dense_replace", 1)))' "$wide")
cat >"$out/budget.gp" <<EOF
set datafile separator "\t"
set datafile missing "NaN"
set multiplot layout 2,1 title "k3 on the slice checkpoint (release widths, $n_layers layers, $experts_total routed experts): the plan at each budget"
set lmargin 10
set rmargin 3
set grid
set xrange [$xr]
set key top right
set ylabel "seconds per token"
set yrange [0:*]
set offsets 0.3, 0.3, 0.4, 0
$presets
plot "budget.dat" using 1:(\$2 == 1 ? \$3 : NaN) with linespoints lw 2 pt 7 title "s/token (median of steady steps)", \
     "" using 1:(\$2 == 1 ? \$3 : NaN):16 with labels rotate by 60 left offset 0,0.7 font ",8" notitle, \
     "" using 1:(\$2 == 0 ? 0 : NaN) with points pt 2 ps 2 lc rgb "red" title "does not fit (plan > budget)"
set xlabel "memory budget (GiB, as a preset's); labels: layers pinned + expert slots of $experts_total"
unset label
set ylabel "GiB"
set key top left
set style fill solid 0.6 border -1
set boxwidth 0.3
plot "budget.dat" using 1:(\$5 + \$6 + \$7 + \$8) with boxes lc rgb "#bbbbbb" title "other (embedding, lm_head, state, scratch)", \
     "" using 1:(\$5 + \$6 + \$7) with boxes lc rgb "#66aa66" title "expert cache", \
     "" using 1:(\$5 + \$6) with boxes lc rgb "#dd9944" title "ring (streamed layers)", \
     "" using 1:5 with boxes lc rgb "#4477aa" title "pinned trunk", \
     "" using 1:(\$2 == 1 ? \$9 : NaN) with points pt 9 ps 1.3 lc rgb "black" title "measured peak RSS", \
     x with lines dt 2 lc rgb "red" title "budget"
unset multiplot
EOF
cat >"$out/cache.gp" <<EOF
set datafile separator "\t"
set datafile missing "NaN"
set title "Expert-cache hit rate, wide-moe ($total experts, $top_k requested per token), $tgen tokens replayed by tools/sim_cache.py"
set xlabel "cache capacity (experts; $total = all)"
set ylabel "hit rate (%)"
set grid
set key bottom right
set xrange [0:$total]
set yrange [0:100]
set arrow from $top_k, 0 to $top_k, 100 nohead lc rgb "gray"
set label "one token's $top_k" at $top_k, 95 offset 0.5,0 font ",9"
plot "cache.dat" using 1:4 with linespoints lw 2 pt 7 title "belady (offline optimum)", \
     "" using 1:3 with linespoints lw 2 pt 5 title "lru (the engine's policy)", \
     "" using 1:5 with linespoints lw 1 pt 4 title "prefix1 (first MoE layer pinned + lru; its preload not counted)", \
     "" using 1:6 with linespoints lw 1 pt 6 title "prefix2 (first two MoE layers pinned + lru)", \
     "" using 1:7 with points pt 3 ps 2.5 lc rgb "black" title "the engine's own run (lru at $tcap), measured"
EOF
for f in budget cache; do
    (cd "$out" && gnuplot -e 'set terminal svg size 900,800 dynamic noenhanced background rgb "white" font "sans,11"; set output "'"$f"'.svg"' "$f.gp" &&
        gnuplot -e 'set terminal pngcairo size 900,800 noenhanced font "sans,10"; set output "'"$f"'.png"' "$f.gp")
done
echo "== plots: $out/budget.svg $out/cache.svg (and .png, .dat)"
if [ "${K3_PLOTS_DOCS:-0}" = 1 ]; then
    mkdir -p docs/plots
    cp "$out/budget.svg" "$out/cache.svg" "$out/budget.dat" "$out/cache.dat" docs/plots/
    echo "== copied to docs/plots/"
fi
