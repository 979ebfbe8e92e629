# 65-first-hour: what a new user meets first (issue 33), each with its
# message checked:
#  (a) a MODEL_DIR that does not exist is said so (with the closest
#      sibling: "did you mean models/k3-nano?"), not "has no tiktoken.model";
#      a .gguf file (or any file starting with the GGUF magic) is "GGUF is
#      not supported"; another file is "a file, not a model directory";
#  (b) a mistyped option gets "did you mean"; llama.cpp's short options
#      (-m -p -n -c -t -s) give the same ids as the long ones;
#  (c) --version names the VERSION file's release, never "unknown"; a copy
#      of the tree outside git builds a binary that says the version alone;
#  (d) --verbose: the step table's header starts a line of its own even
#      when stdout and stderr are one pipe;
#  (e) the CORS preflight is "204 No Content"; k3 serve on a text-only
#      model says "text only" and no "cannot read images";
#  (f) /reset in the chat goes back to the start's mark: the turn after it
#      prefills what the first turn did, reuses the start, and replies the
#      same bytes; no "re-encodes" line;
#  (g) tools/make_checkpoint.py without numpy: exit 2 naming numpy;
#  (h) LICENSE is MIT, "the k3 authors", and README.md says so.
. tests/gates/lib.sh
work="$K3_BUILD/first-hour"
rm -rf "$work"
mkdir -p "$work"
nano=models/k3-nano

# (a)
expect_exit 2 "MODEL_DIR models/k3-nan does not exist \(did you mean models/k3-nano\?\)" \
    "$K3_BIN" models/k3-nan --prompt x
expect_exit 2 "MODEL_DIR $work/nothing does not exist$" "$K3_BIN" "$work/nothing" --prompt x
printf 'GGUF\003\000\000\000' >"$work/model.gguf"
expect_exit 2 "GGUF is not supported: k3 reads the release's safetensors checkpoint" \
    "$K3_BIN" "$work/model.gguf" --prompt x
cp "$work/model.gguf" "$work/renamed.bin"
expect_exit 2 "GGUF is not supported" "$K3_BIN" "$work/renamed.bin" --prompt x
expect_exit 2 "GGUF is not supported" "$K3_BIN" serve "$work/model.gguf"
echo hi >"$work/notes.txt"
expect_exit 2 "is a file, not a model directory" "$K3_BIN" "$work/notes.txt" --prompt x
expect_exit 2 "\-\-tok $work/tok does not exist" "$K3_BIN" --tok "$work/tok" --prompt x --tokenize

# (b)
expect_exit 2 "unknown option --promt \(did you mean --prompt\? see k3 --help\)" \
    "$K3_BIN" "$nano" --promt x
expect_exit 2 "unknown option --prot \(did you mean --port\? see k3 serve --help\)" \
    "$K3_BIN" serve "$nano" --prot 1
"$K3_BIN" "$nano" --prompt "def f" --gen 6 --max-context 64 --threads 1 --seed 3 \
    --temperature 0.8 -q >"$work/long.txt"
"$K3_BIN" -m "$nano" -p "def f" -n 6 -c 64 -t 1 -s 3 --temperature 0.8 -q >"$work/short.txt"
cmp -s "$work/long.txt" "$work/short.txt" || die "llama.cpp's short options give another text"
"$K3_BIN" -m "$nano" -p "def f" -n 6 -c 64 -t 1 -s 4 --temperature 0.8 -q >"$work/seed4.txt"
cmp -s "$work/long.txt" "$work/seed4.txt" && die "-s did not reach the seed (same text as 3)"
"$K3_BIN" --help | grep -q "llama.cpp's short options work too: -m DIR" ||
    die "--help does not document the short options"
echo "ok: short options, did-you-mean"

# (c)
v=$(cat VERSION)
"$K3_BIN" --version >"$work/version.txt"
# What the Makefile bakes in: "VERSION COMMIT" in a git checkout with git
# installed, "VERSION " where there is none (a release tarball, or a root
# without git, as fresh-check's): --version says exactly that.
id=$(make -s --no-print-directory build-id)
commit=${id#"$v "}
if [ -n "$commit" ]; then want="k3 $v (commit $commit)"; else want="k3 $v"; fi
grep -qx "$want" "$work/version.txt" ||
    die "--version: $(cat "$work/version.txt"), wanted: $want"
grep -q unknown "$work/version.txt" && die "--version says unknown"
# Outside git (GIT_DIR pointing nowhere makes git fail as it does there)
# the Makefile bakes the VERSION file and no commit.
nogit=$(GIT_DIR=/nonexistent make -s --no-print-directory build-id)
[ "$nogit" = "$v " ] || die "outside git the build names \"$nogit\", not \"$v \""
echo "ok: --version says k3 $v; outside git the commit is left out"

# (d)
"$K3_BIN" "$nano" --prompt "def f" --gen 3 --verbose >"$work/verbose.txt" 2>&1
grep -q '^  step    token' "$work/verbose.txt" ||
    die "--verbose: the step header is not on a line of its own: $(grep 'step    token' "$work/verbose.txt")"
echo "ok: --verbose header on its own line"

# (e)
tokdir=$nano
dir=$nano
. tests/gates/serve_lib.sh
start_server text "$K3_BIN" || die "k3 serve did not start: $(cat "$work/text.log")"
curl -s -i -X OPTIONS "http://127.0.0.1:$port/v1/chat/completions" \
    -H 'Origin: http://example.test' -H 'Access-Control-Request-Method: POST' \
    >"$work/preflight.txt"
head -1 "$work/preflight.txt" | tr -d '\r' | grep -qx 'HTTP/1.1 204 No Content' ||
    die "preflight: $(head -1 "$work/preflight.txt")"
grep -q "k3 serve: text only: image_url parts are refused" "$work/text.log" ||
    die "serve: no text-only line: $(cat "$work/text.log")"
grep -q "cannot read images: " "$work/text.log" && grep -q "image_url parts: this model" \
    "$work/text.log" && die "serve: the text-only model is reported as a failure"
echo "ok: preflight 204 No Content; text only said as such"

# (f)
tok=${K3_RELEASE_DIR:-../shared/k3-release} # the release files beside the clone
if [ -f "$tok/tiktoken.model" ]; then
    chatdir=$(model chat-tiny tiny-a --vocab 163840)
    printf 'hello there\n/reset\nhello there\n' |
        "$K3_BIN" "$chatdir" --tok "$tok" --chat --gen 6 --system "be brief" \
            >"$work/reset.out" 2>"$work/reset.err"
    t1=$(sed -n 's/^turn 1: prefilled \([0-9]* new tokens, reused [0-9]*\)$/\1/p' "$work/reset.err")
    t2=$(sed -n 's/^turn 2: prefilled \([0-9]* new tokens, reused [0-9]*\)$/\1/p' "$work/reset.err")
    s=$(sed -n 's/^start: prefilled \([0-9]*\) new tokens.*/\1/p' "$work/reset.err")
    [ -n "$t1" ] && [ "$t1" = "$t2" ] || die "/reset: turn 1 \"$t1\", turn 2 \"$t2\""
    case "$t2" in *"reused $s") ;; *) die "/reset: turn 2 reused not the start ($s): $t2" ;; esac
    grep -q "re-encodes\|recomputed" "$work/reset.err" && die "/reset: $(cat "$work/reset.err")"
    [ "$(sed -n 1p "$work/reset.out")" = "$(sed -n 2p "$work/reset.out")" ] ||
        die "/reset: the same message got another reply"
    echo "ok: /reset reuses the start ($t2)"
else
    echo "skip (f): no release tokenizer at $tok"
fi

# (g)
mkdir -p "$work/nonumpy/numpy"
echo 'raise ImportError("no numpy here (gate 65)")' >"$work/nonumpy/numpy/__init__.py"
expect_exit 2 "numpy is missing" env PYTHONPATH="$work/nonumpy" "$PYTHON" \
    tools/make_checkpoint.py "$work/ckpt" --preset tiny-a

# (h)
head -1 LICENSE | grep -qx "MIT License" || die "LICENSE is not MIT"
grep -q "Copyright (c) .* the k3 authors" LICENSE || die "LICENSE: no k3 authors"
grep -q "MIT License (LICENSE)" README.md || die "README.md does not name the license"
echo "ok: first-hour snags"
