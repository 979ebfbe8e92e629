#!/bin/sh
# 51-grammar: the grammar engine (src/grammar, docs/GRAMMAR.md) against an
# independent JSON Schema validator (Debian's python3-jsonschema).
#
#   1. Conformance (tests/gates/schema_conformance.py): 300 schemas of the
#      script's own making (every supported keyword, nesting, recursive
#      $ref, unions); for each, 3 seeded random walks through its grammar
#      (tests/progs/grammar_check: the mask with the end budget, a uniform
#      pick among the allowed ids) must be complete and validate; every
#      mutant of those outputs that the validator rejects must be refused
#      by the matcher; unsupported keywords must be refused in strict mode
#      naming keyword and JSON pointer, and warned about otherwise.
#   2. The same with the release's 163,840-id vocabulary (6 schemas, 2
#      walks each) under a tight budget of 160 ids: the end budget must
#      close every output in time although the walk picks ids uniformly
#      (a stand-in for a random-weight model).
# The unit test build/tests/test_grammar (masks against brute force,
# rollback, the end budget, hostile grammars) runs with the other unit
# tests. Gate 52 runs a bigger sweep (make check).
#
# Run from the repository root by tests/run.sh (env K3_BUILD, PYTHON).
set -eu
: "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
CHECK="$K3_BUILD/progs/grammar_check"
[ -x "$CHECK" ] || { echo "FAIL: $CHECK not built (make)"; exit 1; }
"$PYTHON" -c 'import jsonschema' 2>/dev/null ||
    { echo "FAIL: python3-jsonschema missing (sh scripts/deps.sh test)"; exit 1; }
"$PYTHON" -W ignore tests/gates/schema_conformance.py "$CHECK" 300 3 1
REL=../shared/k3-release
if [ -f "$REL/tiktoken.model" ]; then
    K3_GRAMMAR_VOCAB=$REL "$PYTHON" -W ignore tests/gates/schema_conformance.py "$CHECK" 6 2 2 160
else
    echo "FAIL: $REL/tiktoken.model missing"
    exit 1
fi
echo "51-grammar: ok"
