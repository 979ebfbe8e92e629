#!/bin/sh
# agent_trace.sh - the prefix cache on an agent-shaped trace (not a test: it
# reports; sh benchmarks/agent_trace.sh). 3 sessions x 12 turns, a shared
# ~6,000-token system+tools prefix, 150-600 new tokens a turn, interleaved
# on 2 slots, a server restart after turn 6 (benchmarks/agent_trace.py says
# what it measures). K3_TRACE_MODES: "cache nocache" by default (the cache,
# then the slots' own reuse alone, for comparison). On the release-
# vocabulary tiny model (tiny-a with 163,840 ids, the release tokenizer);
# K3_TRACE_MODEL=DIR another checkpoint whose vocabulary holds the
# tokenizer's ids (K3_TRACE_TOK another tokenizer: models/k3-nano's 3,072
# ids fit the release-width slice's 8,192; K3_TRACE_SHAPE scales the trace
# down, agent_trace.py). Then benchmarks/prefix_crossover.py: a snapshot
# read back from the disk tier against computing its prompt, by prompt
# length (K3_TRACE_CROSSOVER=0: not).
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
tok=${K3_TRACE_TOK:-${K3_RELEASE_DIR:-../shared/k3-release}}
dir=${K3_TRACE_MODEL:-$K3_BUILD/models/trace-tiny}
[ -f "$dir/config.json" ] ||
    "$PYTHON" tools/make_checkpoint.py "$dir" --preset tiny-a --vocab 163840 >&2
out="$K3_BUILD/bench/agent_trace"
rm -rf "$out"
mkdir -p "$out"
echo "agent trace on $dir; load: $(uptime | sed 's/.*load/load/')"
for mode in ${K3_TRACE_MODES:-cache nocache}; do
    "$PYTHON" benchmarks/agent_trace.py "$K3_BIN" "$dir" "$tok" "$out" "$mode"
done
[ "${K3_TRACE_CROSSOVER:-1}" = 0 ] ||
    "$PYTHON" benchmarks/prefix_crossover.py "$K3_BIN" "$dir" "$tok" "$out"
echo "load after: $(uptime | sed 's/.*load/load/')"
