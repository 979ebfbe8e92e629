#!/bin/sh
# demo.sh - the README's first command on a fresh Debian machine: installs
# what is missing (scripts/deps.sh), builds k3 and runs k3-nano, the small
# trained Kimi K3 committed at models/k3-nano (make demo).
#   sh scripts/demo.sh              deps, build, run (what a newcomer types)
#   sh scripts/demo.sh --run K3     run and report with the binary K3 (the
#                                   Makefile's demo target, after building)
# The run continues the prompt $DEMO_PROMPT (default "def fibonacci(n):") for
# $DEMO_GEN tokens (default 64; sampling --temperature $DEMO_TEMP with a fixed
# seed, so the text is the same on every machine), then says what was seen:
# the model's size on disk, decode tokens/s and peak RSS from k3's --out report.
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--run" ]; then
    sh scripts/deps.sh demo
    exec make demo
fi
k3=${2:?usage: sh scripts/demo.sh [--run K3_BIN]}
model=models/k3-nano
prompt=${DEMO_PROMPT:-"def fibonacci(n):"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s' "$prompt"
"$k3" "$model" --prompt "$prompt" --gen "${DEMO_GEN:-64}" --temperature "${DEMO_TEMP:-0.5}" \
    --top-k 40 --seed 1 --ignore-eos --out "$tmp/report.json" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; exit 1; }
bytes=$(cat "$model"/* | wc -c)
/usr/bin/python3 - "$tmp/report.json" "$bytes" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
steps = r["step_seconds"]
decode = sum(steps[1:])
tps = (len(steps) - 1) / decode if decode > 0 else 0.0
print("\n" + "-" * 72)
print("That was k3-nano (models/k3-nano): a Kimi K3 trained in under an hour on two")
print("cores on the Python standard library, %.1f MB with its tokenizer. Kimi K3's own"
      % (int(sys.argv[2]) / 1e6))
print("architecture at small widths: KDA and MLA layers, attention residuals, latent")
print("MoE with MXFP4 experts, in the release's checkpoint format.")
print("%d prompt tokens, %d generated at %.0f tokens/s on %d threads; peak RSS %.1f MB."
      % (len(r["prompt_ids"]), len(steps), tps, r["threads"], r["peak_rss_bytes"] / 1e6))
print("The 1.56 TB Kimi K3 runs through the same code: see \"The real model\" in README.md.")
EOF
