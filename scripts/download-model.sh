#!/usr/bin/env bash
# download-model.sh - fetch the Kimi K3 release into DIR and verify it.
#
#   scripts/download-model.sh DIR
#
# Fetches, with curl, from $HF_ENDPOINT/moonshotai/Kimi-K3/resolve/$K3_REVISION/FILE:
# config.json, generation_config.json, tokenizer_config.json, tiktoken.model,
# model.safetensors.index.json and the 96 shards model-00001-of-000096.safetensors ..
# model-00096-of-000096.safetensors (1,560,936,091,448 bytes). Then verifies: every
# file's size against the hub's (HEAD: X-Linked-Size for LFS files, else
# Content-Length), every shard's safetensors header and its agreement with the index
# (scripts/check-shards.py), and the shards' byte total.
#
# Re-running resumes: a file already in DIR with the hub's size is kept, and a
# partial FILE.part is continued with an HTTP Range request. Transient failures are
# retried with backoff (1, 2, 4 ... 60 s); the count restarts whenever a retry made
# progress, so a flaky link never abandons a shard that is still moving.
#
# Environment:
#   HF_TOKEN             access token. Written to a mode-600 header file in a private
#                        temp dir and passed as curl -H @file: it never appears in a
#                        command line, a log or the output. Unset for curl itself.
#   HF_ENDPOINT          the hub (default https://huggingface.co)
#   K3_REVISION          branch, tag or commit (default main; pin a commit for a
#                        reproducible download)
#   K3_DOWNLOAD_JOBS     parallel transfers (default 4)
#   K3_RETRIES           retries per file without progress (default 6)
#   K3_PROGRESS_SECONDS  seconds between progress lines when stderr is not a terminal
#                        (default 30; on a terminal one line updates every second)
#   K3_EXPECT_TOTAL      expected byte total of the shards (default 1560936091448)
#   PYTHON               python3 that runs check-shards.py (default /usr/bin/python3)
#
# Exit codes:
#   0  everything downloaded and verified
#   1  network or I/O failure (re-run to resume)
#   2  bad usage (or curl or python3 missing), or a verification failure (a
#      file's size, a shard's header, the shards' total)
set -u

REPO=moonshotai/Kimi-K3
NSHARDS=96

usage() {
    echo "usage: $0 DIR   (see the top of the script)" >&2
    exit 2
}

# say MSG: one message on stderr, first clearing the progress line on a terminal.
say() {
    if [ "$K3_DL_TTY" = 1 ]; then printf '\r\033[K' >&2; fi
    printf '%s\n' "$*" >&2
}

# sizes_of FILE...: the sizes of the files, one a line (GNU or BSD stat).
sizes_of() {
    if [ "$K3_DL_STAT" = gnu ]; then stat -c %s -- "$@"; else stat -f %z -- "$@"; fi
}

# curl_err NAME: curl's error message for NAME's last attempt, one line.
curl_err() {
    sed -n 's/^curl: //p' "$K3_DL_TMP/err.$1" | head -n 1
}

# hub_head NAME [CURL OPTION...]: a HEAD request for NAME, its response headers
# into head.NAME; prints the HTTP status.
hub_head() {
    curl -sS -f -I "${@:2}" --retry "$K3_DL_RETRIES" --retry-connrefused \
        -H "@$K3_DL_TMP/headers" --connect-timeout 30 --max-time 300 \
        -o /dev/null -D "$K3_DL_TMP/head.$1" -w '%{http_code}' \
        "$K3_DL_URL/$1" 2>"$K3_DL_TMP/err.$1"
}

# head_one NAME: asks the hub for NAME's size; writes size/NAME (bytes, or "?" when
# the hub gives none) or, on failure, status/NAME ("net MESSAGE"). Like the hub's
# own client it does not follow the redirect of an LFS file: the hub puts the size
# on the redirect (X-Linked-Size), and the storage it points to may refuse a HEAD.
# Other redirects are followed, and the final answer's Content-Length is the size.
head_one() {
    local name=$1 code ok=1
    code=$(hub_head "$name") || ok=0
    if [ $ok = 1 ] && [[ $code == 3* ]] && ! grep -qi '^x-linked-size:' "$K3_DL_TMP/head.$name"; then
        code=$(hub_head "$name" -L) || ok=0
    fi
    if [ $ok = 0 ]; then
        echo "net $name: $(http_problem "$code" "$name")" >"$K3_DL_TMP/status/$name"
        return 0
    fi
    awk '/^HTTP\// { cl = "" }
         { sub(/\r$/, "") }
         tolower($1) == "x-linked-size:" { xl = $2 }
         tolower($1) == "content-length:" { cl = $2 }
         END { s = xl != "" ? xl : cl; print (s ~ /^[0-9]+$/) ? s : "?" }' \
        "$K3_DL_TMP/head.$name" >"$K3_DL_TMP/size/$name"
}

# http_problem CODE NAME: a message for a failed request.
http_problem() {
    case $1 in
    401 | 403) echo "HTTP $1: HF_TOKEN is missing or not accepted (is access to $REPO granted?)" ;;
    404) echo "HTTP 404: no such file at revision $K3_DL_REV" ;;
    *) echo "$(curl_err "$2") (HTTP $1)" ;;
    esac
}

# fetch_one NAME SIZE: downloads NAME into DIR/NAME.part, resuming it, then renames
# it to DIR/NAME. SIZE is the hub's size or "?". Writes status/NAME: "ok", "net
# MESSAGE" (gave up) or "bad MESSAGE" (the transfer ended at a wrong size).
fetch_one() {
    local name=$1 want=$2 part="$K3_DL_DIR/$1.part" have code rc delay
    local tries=0 last=-1 status="$K3_DL_TMP/status/$1"
    while :; do
        have=0
        if [ -f "$part" ]; then have=$(sizes_of "$part"); fi
        if [ "$want" != "?" ]; then
            [ "$have" -eq "$want" ] && break # complete, stopped before the rename
            if [ "$have" -gt "$want" ]; then # not a prefix of this file
                rm -f "$part"
                have=0
            fi
        fi
        [ "$have" -gt "$last" ] && tries=0 # progress since the last try
        last=$have
        code=$(curl -sS -f -L -C - -H "@$K3_DL_TMP/headers" --connect-timeout 30 \
            --speed-limit 4096 --speed-time 120 -w '%{http_code}' \
            -o "$part" "$K3_DL_URL/$name" 2>"$K3_DL_TMP/err.$name")
        rc=$?
        if [ $rc -eq 0 ]; then
            [ -f "$part" ] || : >"$part" # curl writes no file for an empty body
            have=$(sizes_of "$part")
            [ "$want" = "?" ] || [ "$have" -eq "$want" ] && break
            echo "bad $name: received $have bytes, the hub says $want" >"$status"
            rm -f "$part"
            return 0
        fi
        case $rc/$code in
        22/401 | 22/403 | 22/404)
            echo "net $name: $(http_problem "$code" "$name")" >"$status"
            return 0
            ;;
        22/416 | 33/*) rm -f "$part" ;; # the partial file cannot be resumed: restart
        esac
        tries=$((tries + 1))
        if [ $tries -gt "$K3_DL_RETRIES" ]; then
            echo "net $name: $(http_problem "$code" "$name"); gave up after $K3_DL_RETRIES retries" >"$status"
            return 0
        fi
        delay=$((1 << (tries - 1)))
        [ $delay -gt 60 ] && delay=60
        say "$name: $(http_problem "$code" "$name"); retry $tries/$K3_DL_RETRIES in $delay s"
        sleep "$delay"
    done
    mv -f "$part" "$K3_DL_DIR/$name" && echo ok >"$status" ||
        echo "net $name: cannot rename $part" >"$status"
}

# bytes_on_disk: the bytes of the release in DIR, complete files and .part files.
bytes_on_disk() {
    local f present=()
    for f in "${FILES[@]}"; do
        [ -f "$DIR/$f" ] && present+=("$DIR/$f")
        [ -f "$DIR/$f.part" ] && present+=("$DIR/$f.part")
    done
    [ ${#present[@]} -gt 0 ] || { echo 0; return; }
    sizes_of "${present[@]}" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# progress_line START BASE TOTAL: bytes on disk / total, rate since START (of the
# bytes beyond BASE, what was there at START), ETA. TOTAL 0 means unknown.
progress_line() {
    awk -v d="$(bytes_on_disk)" -v b="$2" -v t="$3" -v s=$(($(date +%s) - $1)) '
        function h(x) { return x >= 2^30 ? sprintf("%.2f GiB", x / 2^30) : sprintf("%.1f MiB", x / 2^20) }
        BEGIN {
            rate = s > 0 ? (d - b) / s : 0
            line = h(d) (t > 0 ? sprintf(" / %s (%.1f%%)", h(t), 100 * d / t) : " (total unknown)")
            line = line "  " h(rate) "/s"
            if (t > 0 && rate > 0) {
                e = int((t - d) / rate)
                line = line sprintf("  ETA %dh%02dm%02ds", e / 3600, e % 3600 / 60, e % 60)
            }
            print line
        }'
}

# progress START BASE TOTAL: prints progress until killed.
progress() {
    local every=$K3_PROGRESS_SECONDS
    [ "$K3_DL_TTY" = 1 ] && every=1
    while sleep "$every" >/dev/null 2>&1; do
        if [ "$K3_DL_TTY" = 1 ]; then
            printf '\r%s\033[K' "$(progress_line "$@")" >&2
        else
            printf 'progress: %s\n' "$(progress_line "$@")" >&2
        fi
    done
}

# pool FUNCTION: runs FUNCTION on each line of stdin (its words are the arguments),
# at most $K3_DOWNLOAD_JOBS at a time.
pool() {
    xargs -P "$K3_DOWNLOAD_JOBS" -L 1 "$BASH" -c "$1"' "$@"' "$1"
}

# report_failures: the failures recorded in status/, at most 5 of them.
report_failures() {
    cat "$K3_DL_TMP"/status/* | grep -v '^ok$' |
        awk '{ sub(/^[a-z]+ /, "download-model: ") }
             NR <= 5 { print }
             END { if (NR > 5) printf "download-model: ... and %d more failures\n", NR - 5 }' >&2
}

cleanup() {
    [ -n "${progress_pid:-}" ] && kill "$progress_pid" 2>/dev/null
    rm -rf "$K3_DL_TMP"
}

# ---------------------------------------------------------------------------
if [ $# -ne 1 ] || [ -z "$1" ]; then usage; fi
DIR=$1
K3_DOWNLOAD_JOBS=${K3_DOWNLOAD_JOBS:-4}
K3_DL_RETRIES=${K3_RETRIES:-6}
K3_PROGRESS_SECONDS=${K3_PROGRESS_SECONDS:-30}
expect_total=${K3_EXPECT_TOTAL:-1560936091448}
python=${PYTHON:-/usr/bin/python3}
for v in K3_DOWNLOAD_JOBS K3_DL_RETRIES K3_PROGRESS_SECONDS expect_total; do
    case ${!v} in '' | *[!0-9]*)
        echo "download-model: $v must be a number, not '${!v}'" >&2
        exit 2
        ;;
    esac
done
[ "$K3_DOWNLOAD_JOBS" -ge 1 ] || K3_DOWNLOAD_JOBS=1
for tool in curl awk xargs "$python"; do
    command -v "$tool" >/dev/null || { echo "download-model: $tool not found" >&2; exit 2; }
done

FILES=(config.json generation_config.json tokenizer_config.json tiktoken.model
    model.safetensors.index.json)
SHARDS=()
for ((i = 1; i <= NSHARDS; i++)); do
    SHARDS+=("$(printf 'model-%05d-of-%06d.safetensors' "$i" "$NSHARDS")")
done
FILES+=("${SHARDS[@]}")

mkdir -p "$DIR" || exit 1
K3_DL_DIR=$DIR
K3_DL_REV=${K3_REVISION:-main}
endpoint=${HF_ENDPOINT:-https://huggingface.co}
endpoint=${endpoint%/}
K3_DL_URL="$endpoint/$REPO/resolve/$K3_DL_REV"
K3_DL_TTY=0
[ -t 2 ] && K3_DL_TTY=1
K3_DL_STAT=bsd
stat -c %s / >/dev/null 2>&1 && K3_DL_STAT=gnu
K3_DL_TMP=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/k3-download.XXXXXX") || exit 1
trap cleanup EXIT
trap 'say "download-model: interrupted; re-run to resume"; exit 1' INT TERM
mkdir "$K3_DL_TMP/size" "$K3_DL_TMP/status" || exit 1

# The token goes into a header file only this user can read; printf is a shell
# builtin, so it is never in any process's arguments.
(umask 077 && : >"$K3_DL_TMP/headers") || exit 1
if [ -n "${HF_TOKEN:-}" ]; then
    case $HF_TOKEN in *[[:space:]]*)
        echo "download-model: HF_TOKEN contains white space" >&2
        exit 2
        ;;
    esac
    printf 'Authorization: Bearer %s\n' "$HF_TOKEN" >"$K3_DL_TMP/headers" || exit 1
fi
unset HF_TOKEN
export K3_DOWNLOAD_JOBS K3_DL_RETRIES K3_PROGRESS_SECONDS K3_DL_DIR K3_DL_REV K3_DL_URL \
    K3_DL_TTY K3_DL_STAT K3_DL_TMP REPO
export -f say sizes_of curl_err hub_head head_one http_problem fetch_one

echo "download-model: $REPO at revision $K3_DL_REV from $endpoint into $DIR"

# 1. Sizes: config.json alone first, so that a refused token or a wrong revision
# is one message, then the rest in parallel.
head_one config.json
if [ -z "$(ls -A "$K3_DL_TMP/status")" ]; then
    printf '%s\n' "${FILES[@]:1}" | pool head_one
fi
if [ -n "$(ls -A "$K3_DL_TMP/status")" ]; then
    report_failures
    exit 1
fi
# HUB[i]: the hub's size of FILES[i], or "?" when it gave none.
HUB=()
total=0
nosize=()
for i in "${!FILES[@]}"; do
    read -r "HUB[i]" <"$K3_DL_TMP/size/${FILES[i]}"
    if [ "${HUB[i]}" = "?" ]; then nosize+=("${FILES[i]}"); else total=$((total + HUB[i])); fi
done
if [ ${#nosize[@]} -gt 0 ]; then
    echo "download-model: the hub gave no size (neither X-Linked-Size nor Content-Length) for" \
        "${#nosize[@]} files, e.g. ${nosize[0]}: their sizes cannot be checked, only their contents" >&2
    total=0
fi

# disk_sizes: sets DISK[i] to the size of DIR/FILES[i], or -1 when it is absent.
disk_sizes() {
    local i=0 s present=() at=()
    DISK=()
    for i in "${!FILES[@]}"; do
        DISK[i]=-1
        [ -f "$DIR/${FILES[i]}" ] && present+=("$DIR/${FILES[i]}") && at+=("$i")
    done
    [ ${#present[@]} -gt 0 ] || return 0
    i=0
    while read -r s; do
        DISK[at[i]]=$s
        i=$((i + 1))
    done < <(sizes_of "${present[@]}")
}

# 2. Downloads: keep what is complete, fetch the rest.
todo=()
disk_sizes
for i in "${!FILES[@]}"; do
    f=${FILES[i]}
    if [ "${DISK[i]}" -ge 0 ]; then
        [ "${HUB[i]}" = "?" ] || [ "${DISK[i]}" -eq "${HUB[i]}" ] && continue
        say "$f: ${DISK[i]} bytes on disk, the hub says ${HUB[i]}: fetching it again"
        rm -f "$DIR/$f" || exit 1
    fi
    todo+=("$f ${HUB[i]}")
done
echo "download-model: ${#FILES[@]} files, $((${#FILES[@]} - ${#todo[@]})) already complete," \
    "${#todo[@]} to fetch with $K3_DOWNLOAD_JOBS parallel transfers"
if [ ${#todo[@]} -gt 0 ]; then
    start=$(date +%s)
    base=$(bytes_on_disk)
    progress "$start" "$base" "$total" &
    progress_pid=$!
    printf '%s\n' "${todo[@]}" | pool fetch_one
    kill "$progress_pid" 2>/dev/null
    wait "$progress_pid" 2>/dev/null
    progress_pid=
    [ "$K3_DL_TTY" = 1 ] && printf '\r\033[K' >&2
    echo "download-model: fetched in $(($(date +%s) - start)) s: $(progress_line "$start" "$base" "$total")"
    if cat "$K3_DL_TMP"/status/* | grep -qv '^ok$'; then
        report_failures
        cat "$K3_DL_TMP"/status/* | grep -q '^bad ' && exit 2
        exit 1
    fi
fi

# 3. Verification.
rc=0
disk_sizes
for i in "${!FILES[@]}"; do
    if [ "${DISK[i]}" -lt 0 ]; then
        echo "download-model: ${FILES[i]}: missing" >&2
        rc=2
    elif [ "${HUB[i]}" != "?" ] && [ "${DISK[i]}" -ne "${HUB[i]}" ]; then
        echo "download-model: ${FILES[i]}: ${DISK[i]} bytes, the hub says ${HUB[i]}" >&2
        rc=2
    fi
done
[ $rc -eq 0 ] || exit $rc
"$python" "$(dirname "$0")/check-shards.py" "$DIR" || exit $?
shard_bytes=$(cd "$DIR" && sizes_of "${SHARDS[@]}" | awk '{ s += $1 } END { printf "%.0f", s }')
echo "download-model: $NSHARDS shards, $shard_bytes bytes in all (expected $expect_total)"
if [ "$shard_bytes" != "$expect_total" ]; then
    echo "download-model: the shards total $shard_bytes bytes, not $expect_total" >&2
    exit 2
fi
echo "download-model: $DIR is complete and verified"
