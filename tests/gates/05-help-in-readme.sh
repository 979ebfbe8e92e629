# 05-help-in-readme: every option of every command (k3, k3 serve, k3 pack-trunk),
# as the binary lists it from its option table (--list-options, hidden options
# too), is documented in README.md as a whole word (--trunk does not count for
# --trunk-gb); every option a --help text names is one some command accepts;
# and an option a command does not know is refused with exit 2 naming it.
. tests/gates/lib.sh
out="$K3_BUILD/gate-help"
mkdir -p "$out"
: >"$out/all.txt"
: >"$out/help.txt"
for cmd in main serve pack-trunk; do
    sub=$cmd
    [ "$cmd" = main ] && sub=
    # shellcheck disable=SC2086 # $sub is one word or none
    "$K3_BIN" $sub --list-options >"$out/$cmd.list" || die "k3 $sub --list-options failed"
    # shellcheck disable=SC2086
    "$K3_BIN" $sub --help >"$out/$cmd.help" || die "k3 $sub --help failed"
    [ "$(wc -l <"$out/$cmd.list")" -ge 5 ] || die "k3 $sub --list-options lists almost nothing"
    grep -vqE -- '^--[a-z][a-z0-9-]+$' "$out/$cmd.list" && die "k3 $sub --list-options: not names"
    cat "$out/$cmd.list" >>"$out/all.txt"
    cat "$out/$cmd.help" >>"$out/help.txt"
    # shellcheck disable=SC2086
    expect_exit 2 "unknown option --no-such-option" "$K3_BIN" $sub --no-such-option
done
sort -u "$out/all.txt" >"$out/names.txt"
n=0
missing=""
for o in $(cat "$out/names.txt"); do
    grep -qE -- "${o}([^a-z0-9-]|\$)" README.md || missing="$missing $o"
    n=$((n + 1))
done
[ -z "$missing" ] || die "accepted but not in README.md:$missing"
unknown=""
for o in $(grep -oE -- '--[a-z][a-z0-9-]+' "$out/help.txt" | sort -u); do
    grep -qxF -- "$o" "$out/names.txt" || unknown="$unknown $o"
done
[ -z "$unknown" ] || die "named in a --help text but accepted by no command:$unknown"
[ "$n" -ge 60 ] || die "only $n options listed: is --list-options broken?"
echo "ok: all $n options of k3, k3 serve and k3 pack-trunk are in README.md"
