# 37-state-sampling: state files and sampling.
#  - A run interrupted by --save-state and continued by --load-state in a new
#    process generates exactly what one uninterrupted run does (with and
#    without a prompt after the load), and so does a saved prompt prefix.
#  - A state file of another model (configuration, --layers, or weights), a
#    truncated one, a corrupted byte and a future version are refused (exit 2).
#  - Sampling: the same --seed gives the same ids across --threads 1/2 and
#    across memory budgets (one-expert cache, nothing pinned); another seed
#    or greedy differ; --stop cuts the text before the stop string;
#    --max-context is a hard cap (exit 2).
. tests/gates/lib.sh
dir=$(model tiny-a tiny-a)
other=$(model tiny-b tiny-b)
reseed=$(model tiny-a-seed1 tiny-a --seed 1)
work="$K3_BUILD/state-sampling"
rm -rf "$work"
mkdir -p "$work"
ids=$(prompt_ids "$(vocab_of "$dir")" 10)
more=$(prompt_ids 300 5)
k3() { "$K3_BIN" "$dir" --quiet --ignore-eos "$@"; }

# --- round trips -------------------------------------------------------
whole=$(k3 --ids "$ids" --gen 16)
first=$(k3 --ids "$ids" --gen 8 --save-state "$work/s8")
rest=$(k3 --load-state "$work/s8" --gen 8)
[ "$first,$rest" = "$whole" ] || die "save/load: $first + $rest != $whole"
echo "ok: 8 + 8 after save/load = 16 uninterrupted: $whole"
# A saved prompt continued by more prompt.
k3 --ids "$ids" --gen 0 --save-state "$work/prompt" >/dev/null
a=$(k3 --load-state "$work/prompt" --ids "$more" --gen 8)
b=$(k3 --ids "$ids,$more" --gen 8)
[ "$a" = "$b" ] || die "load + prompt: $a != $b"
echo "ok: loaded prefix + prompt = whole prompt: $a"
# Saving is atomic: no temporary file is left behind.
[ "$(ls "$work" | grep -c tmp)" -eq 0 ] || die "temporary files left: $(ls "$work")"

# --- refusals ------------------------------------------------------------
cp "$work/s8" "$work/corrupt"
"$PYTHON" - "$work/corrupt" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x10
open(p, "wb").write(bytes(b))
EOF
expect_exit 2 "checksum" k3 --load-state "$work/corrupt" --gen 1
head -c 2000 "$work/s8" >"$work/truncated"
expect_exit 2 "truncated" k3 --load-state "$work/truncated" --gen 1
"$PYTHON" - "$work/s8" "$work/future" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8] = 99  # a future version (the checksum is checked after the header)
open(sys.argv[2], "wb").write(bytes(b))
EOF
expect_exit 2 "newer than this k3" k3 --load-state "$work/future" --gen 1
expect_exit 2 "another model" "$K3_BIN" "$other" --quiet --load-state "$work/s8" --gen 1
expect_exit 2 "layers" k3 --layers 3 --load-state "$work/s8" --gen 1
expect_exit 2 "weights differ" "$K3_BIN" "$reseed" --quiet --load-state "$work/s8" --gen 1
expect_exit 2 "not a k3 state file" k3 --load-state "$dir/config.json" --gen 1
expect_exit 2 "cannot open" k3 --load-state "$work/missing" --gen 1

# --- sampling ------------------------------------------------------------
samp="--temperature 0.9 --top-p 0.95 --top-k 40 --min-p 0.01 --repeat-penalty 1.1 --gen 24"
ref=$(k3 --ids "$ids" $samp --seed 5 --threads 2)
for alt in "--threads 1" "--cache-experts 1 --trunk-layers 0" \
    "--threads 1 --cache-experts 1 --trunk-layers 0 --stream-embed"; do
    got=$(k3 --ids "$ids" $samp --seed 5 $alt)
    [ "$got" = "$ref" ] || die "seed 5 with $alt: $got != $ref"
done
echo "ok: seed 5 gives the same ids across threads and budgets: $ref"
[ "$(k3 --ids "$ids" $samp --seed 6)" != "$ref" ] || die "seed 6 = seed 5"
[ "$(k3 --ids "$ids" --gen 24)" != "$ref" ] || die "sampling = greedy"
expect_exit 2 "top-p expects a number in \(0, 1\]" k3 --ids "$ids" --top-p 0
expect_exit 2 "top-p expects a number in \(0, 1\], got \"1e-300\"" k3 --ids "$ids" --top-p 1e-300
expect_exit 2 "temperature" k3 --ids "$ids" --temperature -1

# --- --max-context -------------------------------------------------------
k3 --ids "$ids" --gen 6 --max-context 16 >/dev/null || die "10 + 6 <= 16 refused"
expect_exit 2 "exceeds --max-context 15" k3 --ids "$ids" --gen 6 --max-context 15
expect_exit 2 "loaded sequence" k3 --load-state "$work/s8" --gen 8 --max-context 20

# --- --stop (text) -------------------------------------------------------
tdir=$(model chat-tiny tiny-a --vocab 163840)
tok=../shared/k3-release
if [ -f "$tok/tiktoken.model" ]; then
    text=$("$K3_BIN" "$tdir" --tok "$tok" --quiet --prompt "Once upon a time" --gen 24 --ignore-eos)
    stop=$("$PYTHON" -c 'import sys; t=sys.argv[1]; print(t[len(t)//2:len(t)//2+3])' "$text")
    want=$("$PYTHON" -c 'import sys; t,s=sys.argv[1:3]; print(t[:t.index(s)])' "$text" "$stop")
    got=$("$K3_BIN" "$tdir" --tok "$tok" --quiet --prompt "Once upon a time" --gen 24 \
        --ignore-eos --stop "$stop" --stop "never-generated-zzz")
    [ "$got" = "$want" ] || die "--stop '$stop': got '$got', want '$want'"
    echo "ok: --stop '$stop' cuts '$text' to '$got'"
else
    echo "skip --stop: no release tokenizer at $tok"
fi
echo "PASS"
