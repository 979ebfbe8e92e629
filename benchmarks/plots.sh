#!/bin/sh
# plots.sh - k3's performance plots (make plots). Not a test: it reports, it
# does not judge, and nothing in make test runs it. Two sweeps:
#   1. seconds per token against the memory budget, on the "slice"
#      checkpoint (the release's real widths, 4 layers, 32 experts, ~7.6 GB;
#      made once in $K3_SLICE_DIR and reused, shared with bench.sh and
#      pack_bench.sh through benchmarks/checkpoint.sh). For each budget (GiB,
#      like a preset's) k3 runs with --budget-gb on a short prompt and a few
#      tokens: the engine's planner splits the budget as it splits a
#      preset's, and the plan it chose (layers pinned, expert slots, bytes
#      per consumer) is read from the run's --out report, with the measured
#      peak RSS. s/token = median of the steps after the first (the prompt).
#      A budget below the smallest plan is refused with exit 3 ("does not
#      fit this model: its smallest plan needs ..."), recorded as "does not
#      fit" with that plan's size; a budget whose plan exceeds what the
#      machine allows (exit 3 too) is left out. The budget bounds k3's
#      memory, not the OS page cache: where the checkpoint stays in the page
#      cache, streamed layers are read at memory-copy speed, not disk speed.
#      So the disk's O_DIRECT read bandwidth is measured too (dd on the
#      first shard), and s/token + GB read per token / that bandwidth is
#      kept as an estimate for a cold cache;
#   2. expert-cache hit rate against the cache capacity: one run of the
#      "wide-moe" checkpoint (6 layers, 5 of them MoE with 96 experts,
#      top-8; made once in $K3_WIDE_DIR) with --dump-cache-trace over a long
#      generation, replayed by tools/sim_cache.py under every policy it has
#      (lru, belady, prefix1, prefix2) at a range of capacities. The run's
#      own cache (lru at $K3_PLOTS_TRACE_CAP slots) is checked against the
#      simulator (--verify-lru) and drawn as the measured point.
# Outputs in $K3_PLOTS_DIR (default $K3_BUILD/plots): budget.dat and
# cache.dat (tab-separated, '#' header), budget.svg/.png and cache.svg/.png
# (gnuplot), machine.txt, the engine's --out reports (and stderr of refused
# budgets) and the trace. With K3_PLOTS_DOCS=1 the SVGs and .dat files are
# copied into docs/plots/. Needs gnuplot (Debian: gnuplot-nox;
# `sh scripts/deps.sh plots`); exit 2 without it. Environment: K3_BIN,
# K3_BUILD, PYTHON as for bench.sh; K3_SLICE_DIR (default build/slice),
# K3_WIDE_DIR (default $K3_BUILD/wide-moe); K3_PLOTS_BUDGETS (GiB list,
# default below); K3_PLOTS_PROMPT prompt tokens (default 4); K3_PLOTS_GEN
# tokens per budget run (default 6: 5 steady steps); K3_PLOTS_RUNS runs per
# budget, in rounds over the budgets, their steady steps pooled (default
# 1); K3_PLOTS_THREADS (default: the engine's, all cores);
# K3_PLOTS_TRACE_GEN tokens of the trace run (default 512);
# K3_PLOTS_TRACE_CAP the trace run's cache slots (default 120);
# OMP_WAIT_POLICY (default passive, see bench.sh). One round over the
# budgets takes about 3 minutes on one core of a busy 2-core machine (three
# rounds and the trace: 9 minutes), plus the checkpoints the first time.
# K3_PLOTS_ONLY=1 measures nothing: it draws the plots again from the .dat
# files and trace.json already in the directory (to change how they look).
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
budgets="${K3_PLOTS_BUDGETS:-4 4.5 5 5.25 5.5 5.75 6 6.25 6.5 7 7.5 7.75 8 9 10 11 12 13}"
plen="${K3_PLOTS_PROMPT:-4}"
gen="${K3_PLOTS_GEN:-6}"
runs="${K3_PLOTS_RUNS:-1}"
tgen="${K3_PLOTS_TRACE_GEN:-512}"
tcap="${K3_PLOTS_TRACE_CAP:-120}"
threads=""
[ -z "${K3_PLOTS_THREADS:-}" ] || threads="--threads $K3_PLOTS_THREADS"
mkdir -p "$out"
# shellcheck source=benchmarks/checkpoint.sh
. benchmarks/checkpoint.sh
# N spread-out ordinary ids of the model in DIR (its last 256 ids are special).
ids() { "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); v=c.get("text_config",c)["vocab_size"]; n=int(sys.argv[2]); print(",".join(str((i*7919+13)%(v-256)) for i in range(n)))' "$1" "$2"; }

# The measurements (all but the drawing).
measure() {
    rm -f "$out"/*.json "$out"/*.err "$out"/*.log "$out"/*.dat "$out"/*.svg "$out"/*.png "$out"/*.gp
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
    # The disk under the checkpoint, bypassing the page cache (dd prints
    # "N bytes ... copied, S s, ..." on its last line); 0 if O_DIRECT fails.
    disk=$(dd if="$(ls "$slice"/model-00001-of-*.safetensors)" of=/dev/null bs=4194304 count=256 \
        iflag=direct 2>&1 | awk '/copied/ { printf "%.3f", $1 / $(NF - 3) / 1e9 }')
    echo "disk_odirect_gbps ${disk:=0}" >>"$out/machine.txt"
    echo "== seconds per token against the memory budget ($slice, $plen prompt tokens, $gen generated; disk $disk GB/s O_DIRECT)"
    printf '# budget_gib\tfits\ts_per_token\tplan_gib\tpinned_trunk_gib\tring_gib\texpert_cache_gib\tother_gib\tpeak_rss_gib\tpinned_layers\tlayers\texpert_slots\texperts_total\tread_gb_per_token\thit_pct\tlabel\tcold_s_per_token_est\tmin_budget_gib\n' >"$out/budget.dat"
    # Rounds over all budgets rather than runs of one budget back to back, so
    # that a busy minute of a shared machine spreads over the budgets. A
    # budget refused once is not run again.
    for r in $(seq "$runs"); do
        for b in $budgets; do
            [ ! -f "$out/budget-$b.err" ] || continue
            rc=0
            # shellcheck disable=SC2086 # $threads is empty or two words
            "$K3_BIN" "$slice" --budget-gb "$b" --ids "$pids" --gen "$gen" --ignore-eos $threads \
                --quiet --out "$out/budget-$b-r$r.json" >/dev/null 2>"$out/budget-$b-r$r.log" || rc=$?
            if [ "$rc" -eq 3 ]; then
                mv "$out/budget-$b-r$r.log" "$out/budget-$b.err"
                rm -f "$out/budget-$b-r$r.json"
            elif [ "$rc" -ne 0 ]; then
                cat "$out/budget-$b-r$r.log" >&2
                echo "plots.sh: k3 --budget-gb $b failed (exit $rc)" >&2
                exit 1
            else
                rm -f "$out/budget-$b-r$r.log"
            fi
        done
    done
    for b in $budgets; do
        if [ -f "$out/budget-$b.err" ] && ! grep -q 'does not fit this model' "$out/budget-$b.err"; then
            echo "  $b GiB: $(cat "$out/budget-$b.err"); left out"
            continue
        fi
        # shellcheck disable=SC2046 # no run files when it does not fit
        "$PYTHON" - "$b" "$out/budget-$b.err" "$disk" $(ls "$out/budget-$b"-r*.json 2>/dev/null) >>"$out/budget.dat" <<'EOF'
import json, os, re, statistics, sys
b, err, disk = sys.argv[1], sys.argv[2], float(sys.argv[3])
G = 2 ** 30
N = "NaN"
if os.path.exists(err):
    # k3: error: a B GB budget does not fit this model: its smallest plan needs
    # P GB (with 10% kept free for the system, a budget of M GB)
    m = re.search(r"smallest plan needs ([0-9.]+) GB .*a budget of ([0-9.]+) GB", open(err).read())
    if not m:
        sys.exit("plots.sh: %s: no smallest plan in the message" % err)
    print("\t".join([b, "0", N, m.group(1)] + [N] * 11 + ['"does not fit"', N, m.group(2)]))
    sys.exit(0)
runs = [json.load(open(f)) for f in sys.argv[4:]]
plan = runs[0]["plan"]
same = lambda p: {k: v for k, v in p.items() if k not in ("mem_available", "cgroup_limit")}
for d in runs[1:]:
    if same(d["plan"]) != same(plan):
        sys.exit("plots.sh: the runs of %s GiB have different plans" % b)
by = plan["bytes"]
tot = by["total"]
parts = [by["pinned_trunk"], by["ring"], by["expert_cache"]]
layers = plan["pinned_layers"] + plan["streamed_layers"]
steady = [x for d in runs for x in d["steps"][1:]]
s = statistics.median(x["seconds"] for x in steady)
read = statistics.median(x["bytes_read"] for x in steady) / 1e9
req = sum(x["expert_requests"] for x in steady)
hit = 100.0 * sum(x["expert_hits"] for x in steady) / req if req else 100.0
rss = max(d["peak_rss_bytes"] for d in runs) / G
label = "%dL+%dE" % (plan["pinned_layers"], plan["expert_slots"])
cold = "%.4f" % (s + read / disk) if disk > 0 else N
print("\t".join([b, "1", "%.4f" % s, "%.3f" % (tot / G)] + ["%.3f" % (x / G) for x in parts]
                + ["%.3f" % ((tot - sum(parts)) / G), "%.3f" % rss, str(plan["pinned_layers"]),
                   str(layers), str(plan["expert_slots"]), str(plan["experts_total"]),
                   "%.3f" % read, "%.1f" % hit, '"%s"' % label, cold, N]))
EOF
        tail -n 1 "$out/budget.dat" | tr -d '"' | awk -F'\t' '$2 == 0 { printf "  %5s GiB: does not fit (smallest plan %s GiB, exit 3 below a %s GiB budget)\n", $1, $4, $18 }
            $2 == 1 { printf "  %5s GiB: %-10s plan %s GiB, peak RSS %s GiB, %s s/token, %s GB read/token, hit %s%%, cold cache ~%s s/token\n", $1, $16, $4, $9, $3, $14, $15, $17 }'
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
n_layers=$(awk -F'\t' '!/^#/ && $2 == 1 { print $11; exit }' "$out/budget.dat")
disk=$(sed -n 's/^disk_odirect_gbps //p' "$out/machine.txt")
xr=$(awk -F'\t' '!/^#/ { if (n++ == 0 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 } END { print lo - 0.5 ":" hi + 0.5 }' "$out/budget.dat")
# The presets inside the swept range, marked on the budget axis, and the
# budget below which k3 exits 3 (from the refusals' message), if swept.
presets=$(awk -F'\t' '!/^#/ { if (n++ == 0 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
    END { split("ultra 8 laptop 16 desktop 32 workstation 64", p, " ")
          for (i = 1; i < 8; i += 2) if (p[i + 1] >= lo && p[i + 1] <= hi)
              printf "set arrow from %s, graph 0 to %s, graph 1 nohead lc rgb \"gray\"; set label \"preset %s\" at %s, graph 0.05 offset 0.5,0 font \",9\"\n", p[i + 1], p[i + 1], p[i], p[i + 1] }' "$out/budget.dat")
refused=$(awk -F'\t' '!/^#/ && $2 == 0 && $18 != "NaN" { m = $18 }
    END { if (m != "") printf "set arrow from %s, graph 0 to %s, graph 1 nohead dt 3 lc rgb \"red\"; set label \"exit 3 below %s GiB\" at %s, graph 0.25 right offset -0.5,0 font \",9\" tc rgb \"red\"\n", m, m, m, m }' "$out/budget.dat")
top_k=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); c=c.get("text_config",c); print(c["num_experts_per_token"] * (c["num_hidden_layers"] - c.get("first_k_dense_replace", 1)))' "$wide")
cat >"$out/budget.gp" <<EOF
set datafile separator "\t"
set datafile missing "NaN"
set multiplot layout 2,1 title "k3 --budget-gb on the slice checkpoint (release widths, $n_layers layers, $experts_total routed experts)"
set lmargin 10
set rmargin 3
set grid
set xrange [$xr]
set key top right
set ylabel "seconds per token (log)"
set logscale y
set yrange [0.1:*]
set offsets 0.3, 0.3, 0, 0
$presets
$refused
# A plan's label where it changes (not at every budget of the same plan).
prev = ""
plot "budget.dat" using 1:(\$2 == 1 ? \$3 : NaN) with linespoints lw 2 pt 7 title "s/token, measured (checkpoint in the page cache)", \
     "" using 1:(\$2 == 1 ? \$3 : NaN):(l = stringcolumn(16), s = (l eq prev ? "" : l), prev = l, s) with labels rotate by 60 left offset 0,0.7 font ",8" notitle, \
     "" using 1:(\$2 == 1 ? \$17 : NaN) with linespoints lw 1 dt 2 pt 6 title "+ GB read per token / disk's $disk GB/s (cold cache, estimate)", \
     "" using 1:(\$2 == 0 ? 0.13 : NaN) with points pt 2 ps 2 lc rgb "red" title "does not fit (exit 3)"
unset logscale y
set xlabel "memory budget (GiB, as a preset's); labels: layers pinned + expert slots of $experts_total"
unset label
set ylabel "GiB"
set yrange [0:*]
set key top left
set style fill solid 0.6 border -1
set boxwidth 0.3
plot "budget.dat" using 1:(\$5 + \$6 + \$7 + \$8) with boxes lc rgb "#bbbbbb" title "other (embedding, lm_head, state, scratch)", \
     "" using 1:(\$5 + \$6 + \$7) with boxes lc rgb "#66aa66" title "expert cache", \
     "" using 1:(\$5 + \$6) with boxes lc rgb "#dd9944" title "ring (streamed layers)", \
     "" using 1:5 with boxes lc rgb "#4477aa" title "pinned trunk", \
     "" using 1:(\$2 == 1 ? \$9 : NaN) with points pt 9 ps 1.3 lc rgb "black" title "measured peak RSS", \
     "" using 1:(\$2 == 0 ? \$4 : NaN) with points pt 2 ps 1.5 lc rgb "red" title "smallest plan (refused)", \
     x with lines dt 2 lc rgb "red" title "budget", \
     0.9 * x with lines dt 3 lc rgb "black" title "90% of it (what the planner fills)"
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
