#!/bin/sh
# ladder: check
# 52-grammar-sweep: gate 51's schema conformance, bigger (make check only):
# 2000 schemas of tests/gates/schema_conformance.py with 4 walks each on the
# small vocabulary (another seed than gate 51's), then 60 schemas with the
# release's 163,840-id vocabulary under a tight budget of 200 ids (every
# output must still be complete and valid: the end budget at work with the
# real vocabulary's long ids).
#
# Run from the repository root by tests/run.sh (env K3_BUILD, PYTHON).
set -eu
: "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
CHECK="$K3_BUILD/progs/grammar_check"
[ -x "$CHECK" ] || { echo "FAIL: $CHECK not built (make)"; exit 1; }
"$PYTHON" -W ignore tests/gates/schema_conformance.py "$CHECK" 2000 4 7
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || { echo "FAIL: $REL/tiktoken.model missing"; exit 1; }
K3_GRAMMAR_VOCAB=$REL "$PYTHON" -W ignore tests/gates/schema_conformance.py "$CHECK" 60 2 8 200
echo "52-grammar-sweep: ok"
