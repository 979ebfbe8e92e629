# 41-doctor: scripts/k3-doctor.sh exits 0 and prints every key line (CPU, ISA,
# cores, memory, cgroup, disk at the model and trunk paths, O_DIRECT bandwidth,
# preset); says "no measurements yet" without a presets table; with one, picks
# the fastest preset that fits in memory; leaves no file behind in the trunk
# directory; refuses two arguments (exit 2). scripts/odirect-bw.sh (the
# parallel O_DIRECT rate the doctor and make bench report) measures every
# reader count it is given and names the best, and refuses bad usage (exit 2).
. tests/gates/lib.sh
work="$K3_BUILD/gate-doctor"
rm -rf "$work"
mkdir -p "$work/trunk"

# doctor NAME PRESETS: runs the doctor on $work/trunk; output in $work/NAME.out.
doctor() {
    K3_PRESETS=$2 K3_DOCTOR_MB=8 K3_MODEL_DIR="$work/model" \
        bash scripts/k3-doctor.sh "$work/trunk" >"$work/$1.out" || die "$1: the doctor failed"
    cat "$work/$1.out"
    for key in cpu isa cores memory cgroup "disk model" "disk trunk" o_direct preset; do
        grep -q "^$key: " "$work/$1.out" || die "$1: no '$key:' line"
    done
    [ -z "$(ls -A "$work/trunk")" ] || die "$1: the doctor left files in the trunk directory"
}

doctor none "$work/none.tsv"
grep -Eq '^preset: +(--preset (ultra|laptop|desktop|workstation|server) \(a [0-9]+ GB budget.*no measurements yet|none: )' \
    "$work/none.out" || die "no preset recommended from memory without a table: $(grep '^preset' "$work/none.out")"
grep -q '^disk model: .* 0/96 shards here' "$work/none.out" || die "the missing release was not reported"

printf 'preset\tmin_ram_gb\ttrunk_gb\tcache_gb\texpected_s_per_token\tmeasured_on\n' >"$work/presets.tsv"
printf 'slow\t1\t1\t1\t9.5\tgate box\nfast\t2\t1\t1\t3.0\tgate box\n' >>"$work/presets.tsv"
printf 'huge\t1000000\t1\t1\t0.1\tbig box\n' >>"$work/presets.tsv"
doctor table "$work/presets.tsv"
grep -q '^preset: *fast: expect about 3.0 s/token (measured on gate box)' "$work/table.out" ||
    die "the fastest preset that fits (fast) was not recommended"

expect_exit 2 usage bash scripts/k3-doctor.sh a b

# The parallel O_DIRECT measurer, where this file system allows O_DIRECT
# (the doctor's own line says "refused" where it does not).
dd if=/dev/urandom of="$work/bw.bin" bs=1048576 count=16 2>/dev/null || die "cannot write $work/bw.bin"
if dd if="$work/bw.bin" of=/dev/null bs=4194304 count=1 iflag=direct 2>/dev/null; then
    sh scripts/odirect-bw.sh "$work/bw.bin" 1 2 4 >"$work/bw.out" || die "odirect-bw failed"
    cat "$work/bw.out"
    for p in 1 2 4; do
        grep -Eq "^readers $p [0-9]+\.[0-9]{3}$" "$work/bw.out" || die "odirect-bw: no rate for $p readers"
    done
    best=$(awk '$1 == "best" { print $3 }' "$work/bw.out")
    awk -v b="$best" '$1 == "readers" && $3 + 0 > b + 0 { bad = 1 } END { exit bad }' "$work/bw.out" ||
        die "odirect-bw: 'best' ($best) is not the highest rate"
    grep -q "^o_direct: .*parallel readers" "$work/none.out" || die "the doctor did not report the parallel rate"
    grep -Eq "^io depth: .*K3_IO_DEPTH.*best here: [0-9]+ parallel readers" "$work/none.out" ||
        die "the doctor did not report the depth to read at"
else
    echo "O_DIRECT is refused on $work: odirect-bw's measurement not checked here"
fi
expect_exit 2 usage sh scripts/odirect-bw.sh
expect_exit 2 usage sh scripts/odirect-bw.sh "$work/bw.bin" 0
expect_exit 2 'smaller than one' sh scripts/odirect-bw.sh tests/gates/41-doctor.sh
rm -f "$work/bw.bin"
