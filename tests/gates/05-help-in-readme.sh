# 05-help-in-readme: every option the three --help texts list (k3, k3 serve,
# k3 pack-trunk) is documented in README.md, and an option the parser does
# not know is refused with exit 2 and a message naming it.
. tests/gates/lib.sh
out="$K3_BUILD/gate-help"
mkdir -p "$out"
{
    "$K3_BIN" --help
    "$K3_BIN" serve --help
    "$K3_BIN" pack-trunk --help
} >"$out/help.txt" 2>&1 || die "a --help failed"
n=0
missing=""
for o in $(grep -oE -- '--[a-z][a-z0-9-]+' "$out/help.txt" | sort -u); do
    grep -q -- "$o" README.md || missing="$missing $o"
    n=$((n + 1))
done
[ -z "$missing" ] || die "in --help but not in README.md:$missing"
[ "$n" -ge 60 ] || die "only $n options found in the --help texts: is the extraction broken?"
expect_exit 2 "--no-such-option" "$K3_BIN" --no-such-option
echo "ok: all $n --help options are in README.md"
