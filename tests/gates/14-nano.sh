# 14-nano: fidelity on trained weights. The committed k3-nano (models/k3-nano,
# trained by tools/train_nano.py; never retrained here) must be byte for byte
# the model its README records (sha256 of every file), and on the first 384
# tokens of a held-out standard-library file k3's per-token log-loss must
# equal the torch model's (float64, same stored weights) within 1e-4
# relative, and k3's greedy token at every position must be the float64
# reference's (tests/gates/nano_fidelity.py). Prints k3's bits per byte on
# the excerpt. Then shows both checks can fail: a copy of the model with one
# byte flipped fails the sha256 check, and logits perturbed by 1e-4 of
# their range fail the comparison.
# Needs python3-torch (Debian's) besides numpy.
. tests/gates/lib.sh
nano=models/k3-nano
work="$K3_BUILD/nano"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
"$PYTHON" -c 'import torch' 2>/dev/null ||
    die "python3-torch is missing (apt-get install python3-torch)"

# sha256 lines (sha256sum format) are the fenced block of the README.
sums() {
    grep -E '^[0-9a-f]{64}  [A-Za-z0-9._-]+$' "$1/README.md"
}
sums "$nano" >"$work/SHA256SUMS"
[ "$(wc -l <"$work/SHA256SUMS")" -ge 6 ] || die "$nano/README.md records fewer than 6 sha256 lines"
for f in "$nano"/*; do
    b=$(basename "$f")
    [ "$b" = README.md ] && continue
    grep -q "  $b\$" "$work/SHA256SUMS" || die "$nano/$b has no recorded sha256"
done
(cd "$nano" && sha256sum -c --quiet "$work/SHA256SUMS") ||
    die "$nano differs from its README's sha256"
echo "models/k3-nano: $(wc -l <"$work/SHA256SUMS") files match their recorded sha256"

# The held-out file: named in the training log's held-out list.
held=asyncio/locks.py
file=/usr/lib/python3.11/$held
grep -q "\"$held\"" "$nano/train_log.json" || die "$held is not in the training log's held-out list"
[ -f "$file" ] || die "$file is missing (python3.11's standard library)"
"$PYTHON" tests/gates/nano_fidelity.py "$K3_BIN" "$nano" "$file" "$work/ok" ||
    die "k3 on k3-nano differs from the torch model or the reference"

# The checks can fail.
cp -r "$nano" "$work/corrupt"
"$PYTHON" - "$work/corrupt/model-00001-of-000002.safetensors" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-1000, 2)
    b = f.read(1)
    f.seek(-1000, 2)
    f.write(bytes([b[0] ^ 0x10]))
EOF
if (cd "$work/corrupt" && sha256sum -c --quiet "$work/SHA256SUMS") >/dev/null 2>&1; then
    die "a flipped byte passed the sha256 check"
fi
echo "ok: a flipped byte in a shard fails the sha256 check"
if "$PYTHON" tests/gates/nano_fidelity.py "$K3_BIN" "$nano" "$file" "$work/bad" \
    --perturb 1e-4 >"$work/perturbed.out"; then
    cat "$work/perturbed.out"
    die "logits perturbed by 1e-4 passed the comparison"
fi
echo "ok: logits perturbed by 1e-4 of their range fail: $(grep 'k3 vs torch' "$work/perturbed.out")"
