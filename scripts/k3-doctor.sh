#!/usr/bin/env bash
# k3-doctor.sh - what this machine offers k3: CPU and vector ISA, cores, memory
# and its cgroup limit, free disk at the model and trunk paths, the O_DIRECT read
# bandwidth of the trunk's disk with 1-16 parallel readers (scripts/odirect-bw.sh;
# the best count is the depth to give k3's io_uring reader, K3_IO_DEPTH),
# and the preset to use with the s/token to expect.
#
#   scripts/k3-doctor.sh [TRUNK_DIR]
#
# TRUNK_DIR is where the trunk (every weight but the routed experts, ~109 GB) lives
# or will live; default $K3_TRUNK_DIR, else ".". A path that does not exist yet is
# measured at its nearest existing parent. Sizes are in GB (10^9 bytes), the unit
# of docs/presets.tsv, or without that table the largest budget that fits in
# memory. Never downloads anything; the only file it writes is the
# temporary O_DIRECT test file in TRUNK_DIR, removed on exit.
#
# Environment:
#   K3_MODEL_DIR   the release's directory (default TRUNK_DIR)
#   K3_DOCTOR_MB   size of the O_DIRECT test file in MiB (default 256; 0 skips it).
#                  A virtual disk's host may still cache the freshly written
#                  file (O_DIRECT bypasses only this kernel's cache): make it
#                  larger than the host's cache for the disk's own rate.
#   K3_PRESETS     the presets table (default docs/presets.tsv of this repo):
#                  tab-separated preset, min_ram_gb, trunk_gb, cache_gb,
#                  expected_s_per_token, measured_on; a header line and #
#                  comments are skipped
#
# Exit codes: 0 report printed (whatever it says); 2 bad usage.
set -u

RELEASE_BYTES=1560936091448
NSHARDS=96

if [ $# -gt 1 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    echo "usage: $0 [TRUNK_DIR]   (see the top of the script)" >&2
    exit 2
fi
trunk=${1:-${K3_TRUNK_DIR:-.}}
model=${K3_MODEL_DIR:-$trunk}
test_mb=${K3_DOCTOR_MB:-256}
here=$(cd "$(dirname "$0")" && pwd)
presets=${K3_PRESETS:-$here/../docs/presets.tsv}
case $test_mb in '' | *[!0-9]*)
    echo "k3-doctor: K3_DOCTOR_MB must be a number of MiB" >&2
    exit 2
    ;;
esac
os=$(uname -s)
tmpfile=
trap '[ -n "$tmpfile" ] && rm -f "$tmpfile"' EXIT
trap 'exit 1' INT TERM

# line KEY TEXT: one report line.
line() { printf '%-11s %s\n' "$1:" "$2"; }

# gb BYTES: BYTES in GB with one decimal.
gb() { awk -v b="$1" 'BEGIN { printf "%.1f GB", b / 1e9 }'; }

# existing PATH: PATH, or its nearest existing parent.
existing() {
    local p=$1
    until [ -e "$p" ]; do p=$(dirname "$p"); done
    echo "$p"
}

# free_bytes PATH: bytes available to this user on PATH's file system.
free_bytes() { df -Pk "$1" | awk 'NR == 2 { printf "%.0f\n", $4 * 1024 }'; }

# fs_type PATH: the file system type, or "?".
fs_type() {
    local t=""
    if [ "$os" = Darwin ]; then
        t=$(mount | awk -v m="$(df -P "$1" | awk 'NR == 2 { print $NF }')" \
            '$3 == m { gsub(/[(,]/, "", $4); print $4 }')
    else
        t=$(stat -f -c %T "$1" 2>/dev/null)
    fi
    echo "${t:-?}"
}

# size_sum FILE...: the files' total size in bytes (GNU or BSD stat).
size_sum() {
    { stat -c %s -- "$@" 2>/dev/null || stat -f %z -- "$@"; } | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# cpuinfo FIELD: the first value of FIELD in /proc/cpuinfo.
cpuinfo() { awk -F': *' -v f="$1" '$1 ~ "^" f "[ \t]*$" { print $2; exit }' /proc/cpuinfo; }

# has WORD LIST: "yes" if WORD is one of LIST's words, else "no".
has() { case " $2 " in *" $1 "*) echo yes ;; *) echo no ;; esac; }

# sysctl_val NAME: a sysctl value, or empty.
sysctl_val() { sysctl -n "$1" 2>/dev/null; }

report_cpu() {
    local arch name flags
    arch=$(uname -m)
    if [ "$os" = Darwin ]; then
        name=$(sysctl_val machdep.cpu.brand_string)
        line cpu "${name:-unknown} ($arch)"
        if [ "$arch" = arm64 ]; then
            line isa "NEON: $([ "$(sysctl_val hw.optional.neon)" = 1 ] && echo yes || echo no)  BF16: $([ "$(sysctl_val hw.optional.arm.FEAT_BF16)" = 1 ] && echo yes || echo no)"
        else
            line isa "AVX2: $([ "$(sysctl_val hw.optional.avx2_0)" = 1 ] && echo yes || echo no)  AVX-512F: $([ "$(sysctl_val hw.optional.avx512f)" = 1 ] && echo yes || echo no)"
        fi
        return
    fi
    name=$(cpuinfo 'model name')
    [ -n "$name" ] || name=$(cpuinfo 'Hardware')
    line cpu "${name:-unknown} ($arch)"
    case $arch in
    x86_64 | i?86)
        flags=$(cpuinfo flags)
        line isa "AVX2: $(has avx2 "$flags")  FMA: $(has fma "$flags")  AVX-512F: $(has avx512f "$flags")  AVX-512BW: $(has avx512bw "$flags")  AVX-512-BF16: $(has avx512_bf16 "$flags")"
        ;;
    aarch64 | arm*)
        flags=$(cpuinfo Features)
        line isa "NEON: $(has asimd "$flags")  dotprod: $(has asimddp "$flags")  BF16: $(has bf16 "$flags")  I8MM: $(has i8mm "$flags")  SVE: $(has sve "$flags")"
        ;;
    *) line isa "no vector ISA known to k3 on $arch" ;;
    esac
}

# cgroup_dirs CONTROLLER: the directories of this process's cgroup for CONTROLLER
# ("" = cgroup v2), from its own up to the mount's root, one a line.
cgroup_dirs() {
    local want=$1 mnt rel d
    if [ -z "$want" ]; then
        mnt=$(awk '{ for (i = 7; i < NF && $i != "-"; i++); if ($(i + 1) == "cgroup2") { print $5; exit } }' /proc/self/mountinfo)
        rel=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
    else
        mnt=$(awk -v c="$want" '{ for (i = 7; i < NF && $i != "-"; i++); if ($(i + 1) == "cgroup" && ("," $(i + 3) ",") ~ ("," c ",")) { print $5; exit } }' /proc/self/mountinfo)
        rel=$(awk -F: -v c="$want" '("," $2 ",") ~ ("," c ",") { print $3 }' /proc/self/cgroup)
    fi
    [ -n "$mnt" ] || return 0
    d=$mnt${rel%/}
    [ -d "$d" ] || d=$mnt # a cgroup namespace: the mount is our own cgroup
    while :; do
        echo "$d"
        [ "$d" = "$mnt" ] || [ "$d" = / ] && break
        d=$(dirname "$d")
    done
}

# mem_limit: sets limit (the tightest cgroup memory limit in bytes, "" if none)
# and limit_text (what to say about it).
mem_limit() {
    local d v best=""
    limit_text="no cgroup memory controller found"
    for d in $(cgroup_dirs ""); do
        [ -f "$d/memory.max" ] || continue
        limit_text="v2 memory.max: no limit"
        v=$(cat "$d/memory.max")
        [ "$v" = max ] && continue
        [ -z "$best" ] || [ "$v" -lt "$best" ] && best=$v
    done
    if [ -z "$best" ] && [ "$limit_text" = "no cgroup memory controller found" ]; then
        d=$(cgroup_dirs memory | head -n 1)
        if [ -n "$d" ] && [ -f "$d/memory.limit_in_bytes" ]; then
            limit_text="v1 memory.limit_in_bytes: no limit"
            v=$(awk '$1 == "hierarchical_memory_limit" { print $2 }' "$d/memory.stat" 2>/dev/null)
            [ -n "$v" ] || v=$(cat "$d/memory.limit_in_bytes")
            [ "$v" -lt 1152921504606846976 ] && best=$v # >= 2^60 means none
        fi
    fi
    if [ -n "$best" ]; then limit_text="${limit_text%%:*}: $(gb "$best")"; fi
    limit=$best
}

# cpu_quota: the cgroup CPU quota as a number of CPUs, or "none".
cpu_quota() {
    local d q p
    for d in $(cgroup_dirs ""); do
        if [ -f "$d/cpu.max" ]; then
            read -r q p <"$d/cpu.max"
            [ "$q" != max ] && awk -v q="$q" -v p="$p" 'BEGIN { printf "%.2f CPUs\n", q / p }' && return
        fi
    done
    d=$(cgroup_dirs cpu | head -n 1)
    if [ -n "$d" ] && [ -f "$d/cpu.cfs_quota_us" ]; then
        q=$(cat "$d/cpu.cfs_quota_us")
        p=$(cat "$d/cpu.cfs_period_us")
        [ "$q" -gt 0 ] && awk -v q="$q" -v p="$p" 'BEGIN { printf "%.2f CPUs\n", q / p }' && return
    fi
    echo none
}

# report_memory: sets usable (bytes for the preset choice).
report_memory() {
    local total avail
    if [ "$os" = Darwin ]; then
        line cores "$(sysctl_val hw.ncpu) logical, $(sysctl_val hw.physicalcpu) physical"
        total=$(sysctl_val hw.memsize)
        avail=$(vm_stat | awk -v ps="$(sysctl_val hw.pagesize)" '/Pages (free|inactive|speculative)/ { gsub(/\./, "", $NF); n += $NF } END { printf "%.0f\n", n * ps }')
        line memory "$(gb "$avail") available (free + inactive) of $(gb "$total")"
        line cgroup "none on macOS"
        usable=$avail
        return
    fi
    line cores "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) usable of $(getconf _NPROCESSORS_ONLN) online; cgroup CPU quota: $(cpu_quota)"
    total=$(awk '$1 == "MemTotal:" { printf "%.0f\n", $2 * 1024 }' /proc/meminfo)
    avail=$(awk '$1 == "MemAvailable:" { printf "%.0f\n", $2 * 1024 }' /proc/meminfo)
    line memory "MemAvailable $(gb "$avail") of $(gb "$total") total"
    mem_limit
    line cgroup "$limit_text"
    usable=$avail
    if [ -n "$limit" ] && [ "$limit" -lt "$usable" ]; then usable=$limit; fi
}

report_disks() {
    local m t i f n=0 parts=0 need free files=()
    m=$(existing "$model")
    free=$(free_bytes "$m")
    for ((i = 1; i <= NSHARDS; i++)); do
        f=$model/$(printf 'model-%05d-of-%06d.safetensors' "$i" "$NSHARDS")
        [ -f "$f" ] && n=$((n + 1)) && files+=("$f")
        [ -f "$f.part" ] && parts=$((parts + 1)) && files+=("$f.part")
    done
    if [ $n -eq $NSHARDS ]; then
        line "disk model" "$model: $(gb "$free") free ($(fs_type "$m")); all $NSHARDS shards here, $(gb "$(size_sum "${files[@]}")")"
    else
        need=$RELEASE_BYTES
        [ ${#files[@]} -gt 0 ] && need=$((need - $(size_sum "${files[@]}")))
        line "disk model" "$model: $(gb "$free") free ($(fs_type "$m")); $n/$NSHARDS shards here ($parts partial), about $(gb "$need") still to download: $([ "$free" -ge "$need" ] && echo fits || echo "does NOT fit")"
    fi
    t=$(existing "$trunk")
    trunk_free=$(free_bytes "$t")
    line "disk trunk" "$trunk: $(gb "$trunk_free") free ($(fs_type "$t"))"
}

report_odirect() {
    local t out bytes secs
    t=$(existing "$trunk")
    if [ "$test_mb" -eq 0 ]; then
        line o_direct "not measured (K3_DOCTOR_MB=0)"
        return
    fi
    if [ "$(free_bytes "$t")" -lt $((test_mb * 2 * 1048576)) ]; then
        line o_direct "not measured: less than $((test_mb * 2)) MiB free on $t"
        return
    fi
    if ! tmpfile=$(mktemp "$t/.k3-doctor.XXXXXX" 2>/dev/null); then
        line o_direct "not measured: cannot create a file in $t"
        return
    fi
    # Random data (zeros could be compressed away), flushed to the disk first.
    if ! dd if=/dev/urandom of="$tmpfile" bs=1048576 count="$test_mb" conv=fsync 2>/dev/null; then
        line o_direct "not measured: cannot write $test_mb MiB in $t"
    elif ! out=$(dd if="$tmpfile" of=/dev/null bs=4194304 iflag=direct 2>&1); then
        case $out in
        *"Invalid argument"*) line o_direct "refused on $t ($(fs_type "$t")): reads there go through the page cache" ;;
        *operand* | *iflag*) line o_direct "not measured: this dd has no iflag=direct" ;;
        *) line o_direct "not measured: $(echo "$out" | head -n 1)" ;;
        esac
    elif ! out=$(sh "$here/odirect-bw.sh" "$tmpfile" 1 2 4 8 16 2>&1); then
        line o_direct "not measured: $(echo "$out" | tail -n 1)"
    else
        # One reader keeps one request in flight; k3's reader keeps several,
        # so the parallel rate is the one to compare k3's stream rate with.
        echo "$out" | awk -v t="$t" -v fs="$(fs_type "$t")" -v mb="$test_mb" '
            $1 == "readers" { tried = tried (tried == "" ? "" : ", ") $2 }
            $1 == "readers" && $2 == 1 { one = $3 }
            $1 == "best" { p = $2; best = $3 }
            END { printf "o_direct:   %.0f MB/s with %d parallel readers, the best of %s (1 reader: %.0f MB/s) on %s (%s; %s MiB, 4 MiB reads, dd iflag=direct)\n", best * 1000, p, tried, one * 1000, t, fs, mb
                  printf "io depth:   k3 reads a streamed run as 4 MiB reads, K3_IO_DEPTH of them in flight (io_uring; default 8); best here: %d parallel readers\n", p }'
    fi
    rm -f "$tmpfile"
    tmpfile=
}

report_preset() {
    if [ ! -f "$presets" ]; then
        # No measured table: the largest named budget (k3 --list-presets) that
        # fits in usable memory, with 10% kept for the system as the plan does.
        awk -v ram="$usable" 'BEGIN {
            split("ultra laptop desktop workstation server", name, " ")
            split("8 16 32 64 256", gb, " ")
            for (i = 1; i <= 5; i++) if (gb[i] * 1073741824 <= ram * 0.9) best = i
            if (!best) {
                printf "preset:     none: %.1f GB of usable memory is under the smallest budget (ultra, 8 GB); try --budget-gb\n", ram / 1e9
                exit
            }
            printf "preset:     --preset %s (a %s GB budget, the largest that fits in %.1f GB usable); no measurements yet of its s/token\n", name[best], gb[best], ram / 1e9
        }'
        return
    fi
    awk -F'\t' -v ram="$usable" -v disk="$trunk_free" '
        /^#/ || NF < 6 || $2 !~ /^[0-9.]+$/ { next }
        { n++
          if (min == "" || $2 + 0 < min) min = $2 + 0
          if ($2 * 1e9 <= ram && (best == "" || $5 + 0 < bs)) { best = $1; bs = $5 + 0; row = $0 } }
        END {
            if (n == 0) { print "preset:     no measurements yet (the table has no rows)"; exit }
            if (best == "") {
                printf "preset:     none of the %d presets fits in %.1f GB of usable memory (the smallest needs %s GB)\n", n, ram / 1e9, min
                exit
            }
            split(row, c, "\t")
            printf "preset:     %s: expect about %s s/token (measured on %s); needs %s GB RAM, trunk %s GB, cache %s GB\n", c[1], c[5], c[6], c[2], c[3], c[4]
            if (c[3] * 1e9 > disk) printf "            but the trunk (%s GB) does NOT fit in the %.1f GB free on the trunk disk\n", c[3], disk / 1e9
        }' "$presets"
}

echo "k3 doctor: $(uname -srm)"
report_cpu
report_memory
report_disks
report_odirect
report_preset
