#!/bin/sh
# chat_reuse.sh - what keeping the state between chat turns buys. Not a
# test: it reports, it does not judge.
#
# On the demo model (random weights, the release's 163,840-id vocabulary
# so the release tokenizer fits), a scripted two-turn chat: a long first
# message (~HISTORY tokens of context once the reply is in) and a short
# second one. Turn 2's time to first token is measured
#   - with reuse: the state is kept, only turn 2's new tokens are fed;
#   - from scratch (--no-reuse): the whole conversation is fed again;
# medians of RUNS runs each, with the new and total token counts and the
# ratios. The time covers rendering, tokenizing, prefill and the first
# sample (the chat's "first token after" line).
# Environment: K3_BIN, K3_BUILD, PYTHON as for tests/run.sh; K3_BENCH_RUNS
# (default 5); K3_BENCH_THREADS (default 1: steadier on a shared machine);
# K3_TOK (default ../shared/k3-release); K3_BENCH_WORDS, the first
# message's length in words (default 400).
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
runs="${K3_BENCH_RUNS:-5}"
threads="${K3_BENCH_THREADS:-1}"
tok="${K3_TOK:-../shared/k3-release}"
words="${K3_BENCH_WORDS:-400}"
out="$K3_BUILD/bench/chat_reuse"
mkdir -p "$out"
K3_MODELS="${K3_MODELS:-$K3_BUILD/models}"
export K3_BIN K3_BUILD PYTHON K3_MODELS
mkdir -p "$K3_MODELS"
. tests/gates/lib.sh
dir=$(model demo-163840 demo --vocab 163840)

"$PYTHON" - "$words" >"$out/in.txt" <<'EOF'
import sys
n = int(sys.argv[1])
vocab = ("the river carried old stories from the mountains down to a quiet town where "
         "people listened and wrote them into long books about weather harvest and time").split()
print(" ".join(vocab[(i * 7) % len(vocab)] for i in range(n)) + ".")
print("Thanks. And in one sentence?")
EOF

# run MODE: one chat; prints "new total seconds" for turn 2.
run() {
    "$K3_BIN" "$dir" --tok "$tok" --chat --gen 32 --threads "$threads" $1 \
        <"$out/in.txt" >/dev/null 2>"$out/err.txt"
    "$PYTHON" - "$out/err.txt" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
new, reused = map(int, re.search(r"^turn 2: prefilled (\d+) new tokens, reused (\d+)$", t, re.M).groups())
secs = float(re.search(r"^turn 2: generated .* first token after ([0-9.]+) s", t, re.M).group(1))
print(new, new + reused, secs)
EOF
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

: >"$out/reuse.txt"
: >"$out/scratch.txt"
i=0
while [ "$i" -lt "$runs" ]; do
    run "" >>"$out/reuse.txt"
    run "--no-reuse" >>"$out/scratch.txt"
    i=$((i + 1))
done
new=$(head -n 1 "$out/reuse.txt" | cut -d' ' -f1)
total=$(head -n 1 "$out/reuse.txt" | cut -d' ' -f2)
reuse=$(cut -d' ' -f3 "$out/reuse.txt" | median)
scratch=$(cut -d' ' -f3 "$out/scratch.txt" | median)
echo "chat reuse on $dir ($threads thread(s), medians of $runs runs)"
echo "turn 2: $new new tokens of $total in context"
echo "  time to first token, reusing the state: $reuse s"
echo "  time to first token, from scratch:      $scratch s"
awk -v r="$reuse" -v s="$scratch" -v n="$new" -v t="$total" 'BEGIN {
    printf "  speed-up %.1fx; tokens fed %.1fx fewer (%d vs %d)\n", s / r, t / n, n, t }'
