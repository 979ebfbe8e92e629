#!/bin/sh
# demo.sh - the README's first command on a fresh Debian machine: installs
# what is missing (scripts/deps.sh), builds k3, makes the small demo model in
# the release's format and generates from it (make demo).
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh demo
exec make demo
