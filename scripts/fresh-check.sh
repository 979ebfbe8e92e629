#!/bin/bash
# fresh-check.sh - proves the README's two commands on a brand-new Debian 12:
# builds a minimal root (mmdebstrap --variant=apt --include=ca-certificates
# bookworm), copies in a clean clone of HEAD (committed work only, not the
# working tree) with ../shared beside it, and runs inside it, as root,
#     sh scripts/demo.sh && make test
# A package that scripts/deps.sh fails to install is then missing and a gate
# fails, however complete this machine is.
#
# Usage: sudo bash scripts/fresh-check.sh     (root: mmdebstrap, chroot, mounts)
# Environment:
#   K3_FRESH_ROOT     where to build the root (default: a new directory under
#                     ${TMPDIR:-/var/tmp}); must not exist or be empty
#   K3_FRESH_KEEP=1   keep the root afterwards (debugging: chroot into it)
#   K3_FRESH_LOG      the full log, each line prefixed with its Unix time
#                     (default: build-fresh-check/fresh-check.log)
#   K3_FRESH_SOURCES  apt sources files for the root (default: the host's
#                     Debian sources, see below)
#   K3_FRESH_EXCLUDE  passed to the root's `make test` as K3_EXCLUDE (gates
#                     to leave out; default none). CI sets it for gates it
#                     has just run on the host that need no package the
#                     others do not (see .ci/run); a full check leaves it unset.
# Prints each phase's wall time, the test ladder's PASS/FAIL lines prefixed
# "fresh:", and on failure the log's last lines. Exit 0 when both commands
# pass, 1 when one fails (or the root cannot be built), 2 for bad usage.
# The root's mounts live in a private mount namespace and its processes in a
# private PID namespace, so they end with this script; the root itself is
# removed on every exit, interrupted or not, unless K3_FRESH_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SUITE=bookworm
keep=${K3_FRESH_KEEP:-0}
log=${K3_FRESH_LOG:-$repo/build-fresh-check/fresh-check.log}

say() { echo "fresh-check: $*"; }
usage_error() {
    echo "fresh-check: $*" >&2
    exit 2
}

[ "$(id -u)" -eq 0 ] || usage_error "must run as root (mmdebstrap, chroot, mounts)"
head=$(git -C "$repo" rev-parse HEAD 2>/dev/null) || usage_error "$repo is not a git clone"
[ -d "$repo/../shared" ] || usage_error "$repo/../shared is missing (the gates read it)"
if [ -n "${K3_FRESH_ROOT:-}" ]; then
    root=$K3_FRESH_ROOT
    if [ -e "$root" ] && [ -n "$(ls -A "$root")" ]; then
        usage_error "K3_FRESH_ROOT=$root exists and is not empty"
    fi
    mkdir -p "$root"
else
    root=$(mktemp -d "${TMPDIR:-/var/tmp}/k3-fresh.XXXXXX")
fi
root=$(readlink -f "$root")
[ "$root" != / ] || usage_error "K3_FRESH_ROOT is /"
mkdir -p "$(dirname "$log")"
: >"$log"

# mounts_under DIR: mount points at or below DIR, deepest first.
mounts_under() {
    awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo |
        sort -r
}
job=""
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    if [ -n "$job" ] && kill -0 "$job" 2>/dev/null; then
        # The whole group: mmdebstrap's parent waits for its worker child.
        kill -TERM -- "-$job" 2>/dev/null || kill -TERM "$job" 2>/dev/null || true
        for _ in $(seq 60); do
            kill -0 "$job" 2>/dev/null || break
            sleep 1
        done
        kill -KILL -- "-$job" 2>/dev/null || true
        wait "$job" 2>/dev/null || true
    fi
    # Only an interrupted mmdebstrap can leave mounts here (the test run's
    # are in its own namespace). Never delete through a mount: that would
    # delete the host's /dev or /sys entries.
    for m in $(mounts_under "$root"); do umount -l "$m" || true; done
    if [ "$keep" = 1 ]; then
        say "kept the root at $root"
    elif [ -n "$(mounts_under "$root")" ]; then
        say "NOT removing $root: still mounted: $(mounts_under "$root" | tr '\n' ' ')" >&2
        rc=1
    else
        rm -rf --one-file-system "$root"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_bg CMD...: runs CMD in the background, in a process group of its own
# that cleanup can end whole, and waits, so that a signal to this script is
# handled at once (bash defers traps during a foreground child). CMD gets
# SIGKILL if this script dies without cleaning up.
run_bg() {
    setpriv --pdeathsig KILL setsid "$@" &
    job=$!
    local rc=0
    wait "$job" || rc=$?
    job=""
    return "$rc"
}

t_start=$(date +%s)
if ! command -v mmdebstrap >/dev/null 2>&1; then
    say "installing mmdebstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        mmdebstrap >/dev/null
fi

# How the root reaches the package registry: the same Debian mirror as this
# machine, with the apt settings that mirror needs. Here the mirror serves a
# dated snapshot whose Release files are past their Valid-Until, so apt must
# be told not to check that (Acquire::Check-Valid-Until, in
# /etc/apt/apt.conf.d/99artifact-registry); a proxy setting would be needed
# the same way. Only such Acquire settings are copied: a fresh machine has
# none of this host's other apt configuration, pins or third-party sources
# (whose keys would be missing in the root anyway).
sources=${K3_FRESH_SOURCES:-}
if [ -z "$sources" ]; then
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        if [ -f "$f" ] && grep -qE '^[[:space:]]*(deb|URIs:)' "$f"; then
            sources=$f
            break
        fi
    done
fi
aptopts=()
for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] || continue
    if grep -qE 'Acquire::(https?|ftp)::|Proxy|Check-Valid-Until|Check-Date|CaInfo|Verify-Peer' \
        "$f"; then
        aptopts+=("--aptopt=$f")
    fi
done
say "building a $SUITE root in $root (sources: ${sources:-the default mirror};" \
    "apt options from: ${aptopts[*]#--aptopt=})"
t0=$(date +%s)
# shellcheck disable=SC2086 # $sources: one or more files
if ! run_bg mmdebstrap --variant=apt --include=ca-certificates "${aptopts[@]}" \
    "$SUITE" "$root" $sources </dev/null >>"$log" 2>&1; then
    tail -n 30 "$log" | sed 's/^/    /'
    say "FAIL: mmdebstrap could not build the root (log: $log)"
    exit 1
fi
t_debstrap=$(($(date +%s) - t0))

# The registries are reached through this machine's extra CA certificates
# (apt over https, npm); npm is pointed at them by /etc/npmrc.
mkdir -p "$root/usr/local/share/ca-certificates"
for c in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$c" ] && cp "$c" "$root/usr/local/share/ca-certificates/"
done
chroot "$root" update-ca-certificates >>"$log" 2>&1
[ -f /etc/npmrc ] && cp /etc/npmrc "$root/etc/npmrc"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The root is thrown away: dpkg's fsync of every unpacked file (most of the
# time deps.sh takes here, ~400 packages for npm alone) buys nothing. This
# changes how fast packages land, not which.
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/k3-fresh-check"
[ -s "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n' \
    >"$root/etc/hosts"

mkdir -p "$root/work"
git clone --quiet --no-hardlinks --no-checkout "$repo" "$root/work/k3"
git -C "$root/work/k3" checkout --quiet --detach "$head"
cp -a "$repo/../shared" "$root/work/shared"
say "mmdebstrap: $t_debstrap s; testing commit $(git -C "$repo" rev-parse --short HEAD)"

# stamp: prefixes each line with its Unix time (the log), and prints the
# lines that tell progress, prefixed "fresh:".
stamp() {
    local line
    while IFS= read -r line; do
        printf '%(%s)T %s\n' -1 "$line" >>"$1"
        case "$line" in
        k3:* | k3-fresh:* | "PASS "* | "FAIL "* | failed:* | *" passed, "*" failed"* | \
            "make: ***"* | "make["*"]: ***"* | "E: "*)
            printf 'fresh: %s\n' "$line"
            ;;
        esac
    done
}
# run_inside ROOT LOG: in new mount and PID namespaces, binds /dev and /sys
# into ROOT (gate 31 makes a cgroup under /sys/fs/cgroup) and runs the
# README's two commands there with a fresh machine's environment.
run_inside() {
    local root=$1
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    # shellcheck disable=SC2016 # expanded inside the root
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb K3_EXCLUDE="${K3_FRESH_EXCLUDE:-}" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/sh -c 'cd /work/k3 || exit 1
            echo "k3-fresh: begin demo"; sh scripts/demo.sh; rc=$?
            echo "k3-fresh: end demo rc=$rc"; [ "$rc" -eq 0 ] || exit "$rc"
            echo "k3-fresh: begin test"; make test; rc=$?
            echo "k3-fresh: end test rc=$rc"; exit "$rc"' </dev/null 2>&1 |
        stamp "$2"
}
t0=$(date +%s)
rc=0
export K3_FRESH_EXCLUDE="${K3_FRESH_EXCLUDE:-}"
[ -z "$K3_FRESH_EXCLUDE" ] || say "leaving out of make test: $K3_FRESH_EXCLUDE"
run_bg unshare --mount --propagation private --pid --fork --kill-child \
    --mount-proc="$root/proc" \
    bash -c "$(declare -f stamp run_inside); set -euo pipefail; run_inside \"\$@\"" \
    _ "$root" "$log" || rc=$?
t_inside=$(($(date +%s) - t0))

# Phases from the log: deps.sh reports its own install times; compile lines
# start with the compiler or ar; the ladder starts where make runs tests/run.sh.
# shellcheck disable=SC2016
read -r p_demo p_test p_deps p_build p_ladder < <(awk '
    / k3-fresh: begin demo$/ { cmd = "demo"; begin[cmd] = $1 }
    / k3-fresh: begin test$/ { cmd = "test"; begin[cmd] = $1 }
    / k3-fresh: end (demo|test) rc=/ { end[cmd] = $1; if (bs != "") build += be - bs; bs = "" }
    / k3: deps: (installed|npm ci) in [0-9]+ s$/ { deps[cmd] += $(NF - 1) }
    $2 ~ /^(cc|gcc|clang|ar|aarch64-linux-gnu-gcc)$/ { if (bs == "") bs = $1; be = $1 }
    / sh tests\/run\.sh$/ { ladder = $1; if (bs != "") build += be - bs; bs = "" }
    END {
        d = end["demo"] - begin["demo"]; t = end["test"] - begin["test"]
        printf "%d %d %d %d %d\n", d, t,
            deps["demo"] + deps["test"], build, (ladder ? end["test"] - ladder : 0)
    }' "$log")
summary=$(sed -n 's/^[0-9]* \([0-9]* passed, [0-9]* failed.*\)$/\1/p' "$log" | tail -n 1)
say "phases (s): mmdebstrap $t_debstrap, deps install $p_deps (apt + npm ci)," \
    "build $p_build, sh scripts/demo.sh $p_demo, make test $p_test (ladder $p_ladder)," \
    "inside the root $t_inside," \
    "total $(($(date +%s) - t_start))"
if [ "$rc" -ne 0 ]; then
    echo "fresh-check: the log's last lines:"
    tail -n 40 "$log" | cut -d' ' -f2- | sed 's/^/    /'
    say "FAIL (${summary:-the ladder did not finish}; exit $rc; log: $log)"
    exit 1
fi
say "PASS ($summary; log: $log)"
