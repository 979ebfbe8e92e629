# serve_lib.sh - starting and stopping `k3 serve` in the serve gates (sourced
# after lib.sh). The gate sets work (its scratch folder), dir (the model) and
# tokdir (the tokenizer) first. Every server and background client goes into
# pids, and the EXIT trap ends them all whatever happens.
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_server NAME BIN [options]: BIN serve on a free port, logging to
# $work/NAME.log; sets pid and port. Returns 1 when the server exits before
# it listens (the caller says why); --exit-after 600 bounds a stuck gate.
# One slot unless the options say --parallel: gates 45-48 test one answer
# at a time (a second request waits), gate 44 the slots.
start_server() {
    name=$1
    bin=$2
    shift 2
    : >"$work/$name.log" # exists before the background job opens it
    slots="--parallel 1"
    case " $* " in *" --parallel "*) slots="" ;; esac
    # shellcheck disable=SC2086 # $slots is zero or two words
    "$bin" serve "$dir" --tok "$tokdir" --port 0 --exit-after 600 $slots "$@" \
        2>>"$work/$name.log" &
    pid=$!
    pids="$pids $pid"
    port=""
    i=0
    while [ -z "$port" ]; do
        kill -0 "$pid" 2>/dev/null || return 1
        [ $i -lt 600 ] || die "$name: k3 serve did not start listening"
        port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$work/$name.log")
        [ -n "$port" ] || sleep 0.1
        i=$((i + 1))
    done
}

# stop_server PID NAME [WANT]: SIGTERM, then it must exit WANT (default 0)
# within 30 s.
stop_server() {
    kill -TERM "$1"
    i=0
    while kill -0 "$1" 2>/dev/null; do
        [ $i -lt 300 ] || die "$2: still running 30 s after SIGTERM"
        sleep 0.1
        i=$((i + 1))
    done
    set +e
    wait "$1"
    rc=$?
    set -e
    [ "$rc" -eq "${3:-0}" ] ||
        die "$2: exit $rc after SIGTERM, wanted ${3:-0}: $(tail -n 20 "$work/$2.log")"
}
