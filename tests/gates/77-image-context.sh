# 77-image-context: an image whose rows exceed --max-context is refused
# from its header's size before any pixel is decoded (issue 35 F1), by
# `k3 MODEL --image F --prompt` and by a `--chat --history` replay, as
# k3 serve refuses it; and the image leniencies docs/SECURITY.md decides:
# a PNG without IEND (cut after its last IDAT) and a progressive JPEG of
# more than 500 scans are refused naming the problem.
# On the code before: a 448x448 PNG over a 64-token context encoded the
# whole image first (minutes at the release's tower size, 20+ s on this
# small one) and a 10000x10000 PNG ran past 300 s: the time bound fails.
. tests/gates/lib.sh

REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
vis=$(model vision-163k tiny-a --vocab 163840 --vision)
work="$K3_BUILD/image-context"
rm -rf "$work"
mkdir -p "$work"
"$PYTHON" tests/gates/make_images.py "$work"

# within SECONDS CMD...: CMD exits 2 naming --max-context within SECONDS
# (a generous bound for a loaded 2-core machine; the refusal itself is
# the tokenizer's and the model's load time, ~1 s quiet).
within() {
    limit=$1
    shift
    t0=$(date +%s)
    rc=0
    timeout $((limit * 3)) "$@" </dev/null >"$work/out.txt" 2>"$work/err.txt" || rc=$?
    el=$(($(date +%s) - t0))
    [ "$rc" -eq 2 ] || die "exit $rc (wanted 2) after $el s: $*: $(tail -3 "$work/err.txt")"
    grep -q "max-context" "$work/err.txt" || die "no word of --max-context: $(tail -3 "$work/err.txt")"
    grep -q "vision plan" "$work/err.txt" && die "the vision plan was printed: the images were" \
        "being encoded before the refusal"
    [ "$el" -le "$limit" ] || die "refused only after $el s (bound $limit s): $*"
    echo "ok: refused in $el s: $(tail -1 "$work/err.txt")"
}
for f in m448.png big.png; do
    within 15 "$K3_BIN" "$vis" --tok "$REL" --image "$work/$f" --prompt hi --max-context 64
    cp "$work/h_$f.jsonl" "$work/h.jsonl"
    within 15 "$K3_BIN" "$vis" --tok "$REL" --chat --history "$work/h.jsonl" --max-context 64
    cmp -s "$work/h.jsonl" "$work/h_$f.jsonl" || die "a refused history was changed"
done

# A small image under a context that holds it still runs (the header's plan
# and the decoded image agree).
"$K3_BIN" "$vis" --tok "$REL" --image "$work/small.png" --prompt hi --gen 1 --quiet \
    >"$work/small.out" 2>"$work/small.err" || die "a 28x28 image: $(tail -3 "$work/small.err")"

# The progressive JPEG writer's control: 190 scans (under the limit), the
# same tables and EOB runs as manyscans.jpg, decode and run.
"$K3_BIN" "$vis" --tok "$REL" --image "$work/scans190.jpg" --prompt hi --gen 1 --quiet \
    >"$work/s190.out" 2>"$work/s190.err" || die "a 190-scan JPEG: $(tail -3 "$work/s190.err")"

# The leniencies (docs/SECURITY.md): refused, named.
expect_exit 2 "noiend.png: PNG: .*(truncated|IEND)" "$K3_BIN" "$vis" --tok "$REL" \
    --image "$work/noiend.png" --prompt hi --gen 1 --quiet
t0=$(date +%s)
expect_exit 2 "manyscans.jpg: JPEG: more than 500 scans" "$K3_BIN" "$vis" --tok "$REL" \
    --image "$work/manyscans.jpg" --prompt hi --gen 1 --quiet --max-context 100000
echo "a progressive JPEG of $(cat "$work/manyscans.n") scans over a" \
    "$(cat "$work/manyscans.size") frame: refused in $(($(date +%s) - t0)) s"
echo "PASS"
