#!/bin/sh
# spec_bench.sh - speculative decoding on the release-width slice (make bench
# runs it after bench.sh's sections; alone: sh benchmarks/spec_bench.sh).
# Not a test: it reports. For two continuations of one 64-id prompt:
#   grounded  the continuation repeats what came before (a frequency and
#             presence penalty of -1 make the random-weight slice repeat
#             itself: the shape of "rewrite this with one change", which
#             random weights cannot produce on their own);
#   free      the slice's own greedy continuation;
# with the weights resident and with the trunk streamed (--trunk-layers 0),
# it runs --spec 0, --spec auto (ngram), --spec 8 --draft self and the same
# on the q8 draft trunk (selfq8: --draft-trunk, k3 pack-trunk --draft q8), and
# reports per emitted token: forward passes, trunk and expert bytes (the
# run report's "spec"), decode seconds (the steps after the prompt's), and
# whether the ids equal --spec 0's (they must). Medians of K3_SPEC_RUNS
# runs (default 3 resident, 1 streamed: a streamed token costs seconds;
# K3_SPEC_RUNS sets both). Environment as bench.sh: K3_BIN, K3_BUILD,
# PYTHON, K3_SLICE_DIR, K3_SLICE_TRUNK_DIR, K3_SLICE_DRAFT_DIR (the draft
# trunk, packed there when missing); K3_SPEC_GEN ids generated (default 16);
# K3_SPEC_TEXTS the continuations (default "grounded free").
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
slice="${K3_SLICE_DIR:-build/slice}"
trunk="${K3_SLICE_TRUNK_DIR:-build/slice-trunk}"
draft="${K3_SLICE_DRAFT_DIR:-build/slice-draft}"
gen="${K3_SPEC_GEN:-16}"
out="$K3_BUILD/bench/spec"
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.ids
# shellcheck source=benchmarks/checkpoint.sh
. benchmarks/checkpoint.sh
checkpoint "$slice" slice
[ -f "$trunk/trunk.bin" ] || "$K3_BIN" pack-trunk "$slice" "$trunk" --quiet
[ -f "$draft/draft.bin" ] || "$K3_BIN" pack-trunk "$slice" "$draft" --draft q8 --quiet
prompt=$("$PYTHON" -c 'print(",".join(str((i*7919+13)%7936) for i in range(64)))')
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/load.txt"

# one MODE TEXT SPEC RUN [options]
one() {
    mode=$1 text=$2 spec=$3 r=$4
    shift 4
    case $text in grounded) tx="--frequency-penalty -1 --presence-penalty -1" ;; *) tx="" ;; esac
    case $spec in
    off) sp="--spec 0" ;;
    ngram) sp="--spec auto" ;;
    self) sp="--spec 8 --draft self" ;;
    selfq8) sp="--spec 8 --draft self --draft-trunk $draft" ;;
    esac
    f="$out/$mode-$text-$spec-r$r"
    # shellcheck disable=SC2086 # tx and sp are options
    "$K3_BIN" "$slice" --ids "$prompt" --gen "$gen" --ignore-eos --quiet $tx $sp "$@" \
        --out "$f.json" >"$f.ids"
    echo "  $mode $text $spec run $r: $(tr -d '\n' <"$f.ids" | cut -c1-60)..."
}
for text in ${K3_SPEC_TEXTS:-grounded free}; do
    for spec in off ngram self selfq8; do
        for r in $(seq "${K3_SPEC_RUNS:-3}"); do one resident "$text" "$spec" "$r"; done
        for r in $(seq "${K3_SPEC_RUNS:-1}"); do
            one streamed "$text" "$spec" "$r" --trunk "$trunk" --trunk-layers 0 --trunk-ring 2
        done
    done
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/load.txt"
"$PYTHON" - "$out" <<'EOF' | tee "$out/report.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    mode, text, spec, _ = os.path.basename(f)[:-5].split("-")
    d = json.load(open(f))
    s = d["spec"]
    dec = d["step_seconds"][1:]
    ids = open(f[:-5] + ".ids").read().split()
    rows.setdefault((mode, text, spec), []).append(
        (sum(dec) / len(dec), (s["emitted"] - 1) / max(1, s["forwards"]), s["trunk_bytes_per_token"],
         s["expert_bytes_per_token"], s["accepted"], s["drafted"], ids))
print("| trunk | text | drafter | tokens/forward | s/token | vs off | trunk MB/token | "
      "expert MB/token | drafts kept | ids = off |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (mode, text, spec), v in sorted(rows.items()):
    off = rows.get((mode, text, "off"))
    st = statistics.median(x[0] for x in v)
    base = statistics.median(x[0] for x in off) if off else float("nan")
    same = all(x[6] == off[0][6] for x in v) if off else False
    x = v[0]
    print("| %s | %s | %s | %.2f | %.3f | %.2fx | %.1f | %.1f | %d/%d | %s |" % (
        mode, text, spec, x[1], st, base / st, x[2] / 1e6, x[3] / 1e6, x[4], x[5],
        "yes" if same else "NO"))
print()
print(open(os.path.join(out, "load.txt")).read().strip().replace("\n", "; "))
EOF
