#!/bin/sh
# tests/windows/run.sh - the Windows build (make windows: build-win/, static
# mingw-w64 executables) under Wine, against this machine's Linux build
# (`make test-windows`; not part of `make test`). Every comparison is of
# bytes: the Windows k3.exe must print the same ids and text and dump the
# same logits as the Linux k3, because the summation contract and the own
# exp/tanh leave no room for the platform (docs/ARCHITECTURE.md).
#
#   1. the kernel and reference tests (test_simd: every SIMD table against
#      the scalar one; test_kernels; test_fixtures: the reference's numbers)
#      and the parsers, as Windows programs;
#   2. the engine on tiny-a and moe64: ids and --dump-logits bit-identical;
#   3. moe64 with everything streamed (--trunk-layers 0, one ring slot, one
#      expert slot, streamed embedding and lm_head), and a trunk packed by
#      the Windows pack-trunk read back with --trunk (direct reads through
#      FILE_FLAG_NO_BUFFERING): the same logits again;
#   4. tokenizer cases (k3-nano's vocabulary: ASCII, accents, CJK, emoji,
#      specials as text, CRLF) through --tokenize-jsonl: the same ids;
#   5. a prompt with non-ASCII text read with --prompt-file from a file whose
#      name is not ASCII either (UTF-8 path -> wide-character open);
#   6. k3.exe serve answering /health and one /v1/completions request from
#      curl on 127.0.0.1, with the Linux server's answer to the same request.
#
# What Wine cannot show: the speed of unbuffered reads (Wine maps them onto
# Linux files), job-object memory limits (none are set), console code pages
# and Ctrl-C (no console here), SetConsoleCtrlHandler; see README "Windows".
#
# Environment: K3_BIN (the Linux k3), PYTHON, WIN_TESTS (test programs, from
# the Makefile), WINE (default: wine64, or Debian's /usr/lib/wine/wine64).
set -eu
: "${K3_BIN:=bin/k3}" "${PYTHON:=/usr/bin/python3}" "${K3_BUILD:=build}"
: "${WIN_TESTS:=test_simd test_kernels test_fixtures test_xxh64 test_parsers}"
K3_MODELS="${K3_MODELS:-$K3_BUILD/models}"
export K3_BIN K3_BUILD PYTHON K3_MODELS
mkdir -p "$K3_MODELS"
. tests/gates/lib.sh

if [ -z "${WINE:-}" ]; then
    WINE=$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)
fi
[ -x "$WINE" ] || command -v "$WINE" >/dev/null ||
    die "wine64 not found: install wine64 (sh scripts/deps.sh windows)"
EXE=build-win/bin/k3.exe
[ -f "$EXE" ] || die "$EXE is not built (make windows)"
work=build-win/suite
rm -rf "$work"
mkdir -p "$work"
WINEPREFIX="$(pwd)/build-win/wine"
WINEDEBUG=-all
export WINEPREFIX WINEDEBUG
win() { "$WINE" "$@"; }
t0=$(date +%s)

echo "== 1. kernel, reference and parser tests as Windows programs"
win "$EXE" --version >"$work/version.txt" 2>&1 ||
    { cat "$work/version.txt"; die "k3.exe does not start"; }
for t in $WIN_TESTS; do
    win "build-win/tests/$t.exe" >"$work/$t.out" 2>&1 ||
        { tail -n 20 "$work/$t.out"; die "$t.exe fails"; }
    echo "ok $(tail -n 1 "$work/$t.out")"
done

# same NAME MODEL ARGS...: k3.exe and k3 on MODEL with ARGS; ids (stdout) and
# dumped logits must be the same bytes.
same() {
    name=$1
    mdir=$2
    shift 2
    win "$EXE" "$mdir" --dump-logits "$work/$name.win.f32" "$@" >"$work/$name.win.out" \
        2>"$work/$name.win.err" || { cat "$work/$name.win.err"; die "$name: k3.exe failed"; }
    "$K3_BIN" "$mdir" --dump-logits "$work/$name.lin.f32" "$@" >"$work/$name.lin.out" \
        2>"$work/$name.lin.err" || { cat "$work/$name.lin.err"; die "$name: k3 failed"; }
    cmp -s "$work/$name.win.out" "$work/$name.lin.out" ||
        die "$name: Windows printed $(head -c 200 "$work/$name.win.out")," \
            "Linux $(head -c 200 "$work/$name.lin.out")"
    [ -s "$work/$name.lin.f32" ] || die "$name: no logits dumped"
    cmp -s "$work/$name.win.f32" "$work/$name.lin.f32" || die "$name: logits differ in some bit"
    echo "ok $name: $(wc -c <"$work/$name.lin.f32") bytes of logits identical;" \
        "$(head -c 80 "$work/$name.lin.out")"
}

echo "== 2. the engine: ids and logits, Windows against Linux"
tiny=$(model tiny-a tiny-a)
same tiny-a "$tiny" --ids "$(prompt_ids "$(vocab_of "$tiny")" 24)" --gen 8 --ignore-eos --quiet
moe=$(model moe64 moe64)
mids=$(prompt_ids "$(vocab_of "$moe")" 12)
same moe64 "$moe" --ids "$mids" --gen 10 --ignore-eos --quiet --preset max

echo "== 3. streamed: every layer, expert, embedding row and lm_head from disk"
same moe64-streamed "$moe" --ids "$mids" --gen 10 --ignore-eos --quiet --trunk-layers 0 \
    --trunk-ring 1 --cache-experts 1 --stream-embed --stream-lm-head
cmp -s "$work/moe64.lin.f32" "$work/moe64-streamed.lin.f32" || die "streaming changed the logits"
win "$EXE" pack-trunk "$moe" "$work/trunk" >"$work/pack.out" 2>&1 ||
    { cat "$work/pack.out"; die "k3.exe pack-trunk failed"; }
same moe64-trunk "$moe" --ids "$mids" --gen 10 --ignore-eos --quiet --trunk "$work/trunk" \
    --trunk-layers 0 --trunk-ring 1
cmp -s "$work/moe64.lin.f32" "$work/moe64-trunk.win.f32" || die "the trunk changed the logits"

echo "== 4. tokenizer cases"
nano=models/k3-nano
"$PYTHON" - "$work/tok.jsonl" <<'PY'
import json, sys
cases = ["def f(x):\n    return x + 1\n", "Grüße aus Köln, naïve café",
         "東京は日本の首都です。", "emoji 🙂👍🏽 and ZWJ 👩‍💻",
         "tabs\tand\r\nCRLF\r\n",
         "<|im_end|> as text", "  leading spaces and trailing  ", "числа 12345 и 3.14159",
         "مرحبا بالعالم", "a" * 300]
with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
    for c in cases:
        f.write(json.dumps(c) + "\n")
PY
win "$EXE" --tok "$nano" --tokenize-jsonl "$work/tok.jsonl" >"$work/tok.win" \
    2>"$work/tok.win.err" ||
    { cat "$work/tok.win.err"; die "k3.exe --tokenize-jsonl failed"; }
"$K3_BIN" --tok "$nano" --tokenize-jsonl "$work/tok.jsonl" >"$work/tok.lin"
cmp -s "$work/tok.win" "$work/tok.lin" || die "tokenizer: Windows ids differ from Linux"
echo "ok $(wc -l <"$work/tok.lin") tokenizer cases, the same ids"

echo "== 5. a non-ASCII prompt from a non-ASCII file name"
pf="$work/prompt-Grüße-東京.txt"
printf 'Über den Wolken: 東京 — “quotes” — 🙂\n' >"$pf"
same text-file "$nano" --prompt-file "$pf" --gen 12 --ignore-eos --quiet

echo "== 6. k3.exe serve: one request from curl"
command -v curl >/dev/null || die "curl is needed"
body='{"prompt":"def add(a, b):","max_tokens":12,"temperature":0}'
# serve_one NAME CMD...: starts the server on a free port, asks /health and
# one completion, saves the completion's text to $work/NAME.txt, stops it.
serve_one() {
    name=$1
    shift
    : >"$work/$name.log"
    "$@" serve "$nano" --host 127.0.0.1 --port 0 --exit-after 300 2>>"$work/$name.log" &
    spid=$!
    port=""
    i=0
    while [ -z "$port" ]; do
        kill -0 "$spid" 2>/dev/null || { cat "$work/$name.log"; die "$name: server exited"; }
        [ $i -lt 1200 ] || die "$name: server did not start listening"
        port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$work/$name.log")
        [ -n "$port" ] || sleep 0.1
        i=$((i + 1))
    done
    code=$(curl -s -o "$work/$name.health" -w '%{http_code}' --max-time 60 \
        "http://127.0.0.1:$port/health") || true
    [ "$code" = 200 ] || die "$name: /health answered $code"
    code=$(curl -s -o "$work/$name.json" -w '%{http_code}' --max-time 120 \
        -H 'Content-Type: application/json' --data-binary "$body" \
        "http://127.0.0.1:$port/v1/completions") || true
    [ "$code" = 200 ] ||
        die "$name: /v1/completions answered $code: $(head -c 300 "$work/$name.json")"
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    "$PYTHON" -c 'import json, sys
sys.stdout.write(json.load(open(sys.argv[1]))["choices"][0]["text"])' \
        "$work/$name.json" >"$work/$name.txt"
}
serve_one serve-win "$WINE" "$EXE"
serve_one serve-lin "$K3_BIN"
[ -s "$work/serve-lin.txt" ] || die "the Linux server answered no text"
cmp -s "$work/serve-win.txt" "$work/serve-lin.txt" ||
    die "serve: Windows answered $(cat "$work/serve-win.txt"), Linux $(cat "$work/serve-lin.txt")"
echo "ok serve: /health 200; /v1/completions the same text as Linux:" \
    "$(head -c 60 "$work/serve-lin.txt")"

echo "Windows build (under Wine) agrees with Linux byte for byte ($(($(date +%s) - t0)) s)"
