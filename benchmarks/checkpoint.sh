# shellcheck shell=sh
# checkpoint.sh - sourced by bench.sh, pack_bench.sh and plots.sh (not run):
# the one way they make or reuse a benchmark checkpoint, so that a checkpoint
# one of them made (build/slice, ~7.6 GB, a few minutes) is reused by the
# others instead of made again.
#
#   checkpoint DIR PRESET
#
# makes DIR with tools/make_checkpoint.py --preset PRESET unless DIR/.stamp
# holds the stamp of what the maker would write now. The stamp is a checksum
# of the layout: the preset's dimensions, the config.json and every tensor's
# name, dtype, shape and shard (make_checkpoint.build_config and
# plan_shards). The drawn values are not in it (speed depends on the shapes):
# after a change to how values are drawn, remove DIR to make it again. The
# stamp is written last, so an interrupted make is made again. Needs $PYTHON
# and the repository root as the working directory.

# The stamp of PRESET as tools/make_checkpoint.py would write it now.
checkpoint_stamp() {
    _ck_layout=$("$PYTHON" -c '
import json, sys
sys.path.insert(0, "tools")
import make_checkpoint as m
p = dict(m.PRESETS[sys.argv[1]])
top, text = m.build_config(p)
shards, _ = m.plan_shards(m.k3ref.expected_tensors(m.k3ref.Config(text)), 3, p["hidden_size"])
print(json.dumps([sorted(p.items()), top, shards], sort_keys=True))' "$1") || return 1
    _ck_sum=$(printf '%s\n' "$_ck_layout" | cksum | cut -d' ' -f1)
    echo "layout $_ck_sum $1"
}

checkpoint() {
    _ck_stamp=$(checkpoint_stamp "$2") || { echo "checkpoint: no stamp for preset $2" >&2; return 1; }
    if [ "$(cat "$1/.stamp" 2>/dev/null || true)" != "$_ck_stamp" ]; then
        echo "== making the $2 checkpoint in $1 (once; the slice takes a few minutes)"
        rm -rf "$1"
        "$PYTHON" tools/make_checkpoint.py "$1" --preset "$2" || return 1
        echo "$_ck_stamp" >"$1/.stamp"
    fi
}
