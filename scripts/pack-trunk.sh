#!/bin/sh
# pack-trunk.sh MODEL_DIR TRUNK_DIR [options] - packs the model's dense trunk
# into TRUNK_DIR/trunk.bin + trunk.json (k3 pack-trunk; see k3 pack-trunk
# --help). Then run k3 with --trunk TRUNK_DIR. K3_BIN overrides the binary.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: scripts/pack-trunk.sh MODEL_DIR TRUNK_DIR [--layers N] [--force] [--verify] [--compress] [--quiet]" >&2
    exit 2
fi
k3="${K3_BIN:-$(dirname "$0")/../bin/k3}"
[ -x "$k3" ] || { echo "pack-trunk.sh: $k3 not found: build it first (make)" >&2; exit 2; }
exec "$k3" pack-trunk "$@"
