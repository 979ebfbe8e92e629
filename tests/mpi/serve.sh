# tests/mpi/serve.sh - `k3-mpi serve` (run by tests/mpi/run.sh, same
# environment): rank 0 serves HTTP, the other ranks replay its model
# operations (src/server/engine.h, src/mpi/serve.h), on a tiny model with
# the release tokenizer:
#  1. against bin/k3 serve --parallel 1: 2 ranks, 1 slot, every product
#     split: serve_same.py (greedy and seeded sampling, chat and
#     completions, whole and streamed, logprobs, a multi-chunk prompt,
#     prefix reuse, requests that repeat themselves with a "spec" field);
#     3 ranks, 3 slots (k3_forward_multi over several states): gate 44's
#     client parallel_check.py (the above at once, stop strings, a client
#     that disconnects, a prompt over the context): the same answers, token
#     ids and logprobs; both speculating (--spec auto, K3_SPEC_ALWAYS=1:
#     the verify rows and their cuts relayed to the followers), with drafts
#     kept and cut (/metrics);
#  2. SIGTERM to rank 0 ends the job in order: exit 0, every rank finalized;
#  3. a follower, then rank 0, killed (SIGKILL) while an answer streams
#     ends the job within 30 s, nonzero, not a hang; the client's stream
#     is cut or ends in an error event, never a bare [DONE];
#  4. a weight read failing on a follower mid-answer ends the job, exit 4,
#     with that rank's message (the fault-shim k3-mpi).
. tests/gates/lib.sh
: "${K3_MPI_BIN:?}" "${MPIRUN:?}"
tokdir=../shared/k3-release
if [ ! -f "$tokdir/tiktoken.model" ]; then
    echo "skip: serve (no release tokenizer at $tokdir)"
    exit 0
fi
work="$K3_BUILD/mpi-serve"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)
. tests/gates/serve_lib.sh
# On the way out, whatever happened: every job's ranks and mpirun itself
# are killed outright (a rank stuck in a collective would not stop for a
# SIGTERM, and the gate must end, not wait for the collectives' timeout).
cleanup_jobs() {
    for p in $pids; do
        for c in $(pgrep -P "$p" 2>/dev/null || true); do
            kill -9 $(pgrep -P "$c" 2>/dev/null || true) "$c" 2>/dev/null || true
        done
        kill -9 "$p" 2>/dev/null || true
    done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup_jobs EXIT

# k3-mpi over N ranks as one command start_server can run (mpirun is its
# pid: a SIGTERM to it is mpirun's, so the test signals rank 0 itself).
# Over 2 ranks every product is split (K3_MPI_SPLIT_MIN=0); over 3 the
# default threshold splits lm_head and the routed experts (by id), which
# keeps the 3-slot check quick on a loaded machine.
# K3_MPI_TIMEOUT: ranks that diverge (one waits in a collective the others
# skipped) end the job in 2 minutes, not 15 (tiny models: no legitimate
# wait comes near).
for np in 2 3; do
    split="env K3_MPI_TIMEOUT=${K3_MPI_TIMEOUT:-120}"
    [ "$np" != 2 ] || split="$split K3_MPI_SPLIT_MIN=0"
    printf '#!/bin/sh\nexec %s -np %s %s %s "$@"\n' "$MPIRUN" "$np" "$split" "$K3_MPI_BIN" \
        >"$work/k3-mpi-$np"
    chmod +x "$work/k3-mpi-$np"
done

# rank_pid MPIRUN_PID R: the pid of rank R of that job (its environment
# names the rank: Open MPI's OMPI_COMM_WORLD_RANK, MPICH's PMI_RANK).
rank_pid() {
    for _ in $(seq 100); do
        for c in $(pgrep -P "$1" || true); do
            for p in $c $(pgrep -P "$c" || true); do
                tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
                    grep -Eqx "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$2" && { echo "$p"; return; }
            done
        done
        sleep 0.1
    done
}

# wait_gone PID SECONDS: 0 when PID ended within SECONDS.
wait_gone() {
    i=0
    while kill -0 "$1" 2>/dev/null; do
        [ $i -lt $(($2 * 10)) ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}

# 1. the answers of bin/k3 serve, without the prefix cache (k3-mpi serve
# has none: a restore is not relayed to the other ranks), so the two do the
# same prefills and their usage (cached_tokens) compares too.
start_server alone "$K3_BIN" --max-context 4096 --max-queue 16 --prefix-cache-gb 0 ||
    die "bin/k3 serve did not start"
alone=$port
# k3-mpi speculating (--spec auto, the default), drafting every step it can
export K3_SPEC_ALWAYS=1
for cfg in "2 1" "3 3"; do
    np=${cfg% *}
    nslots=${cfg#* }
    start_server "np$np" "$work/k3-mpi-$np" --max-context 4096 --max-queue 16 \
        --parallel "$nslots" ||
        die "k3-mpi serve over $np ranks did not start: $(cat "$work/np$np.log")"
    job=$pid
    grep -q "memory plan of rank 0 of $np" "$work/np$np.log" ||
        die "np $np: rank 0's plan is not of $np ranks: $(head "$work/np$np.log")"
    if [ "$nslots" = 1 ]; then
        check="tests/mpi/serve_same.py"
    else
        check="tests/gates/parallel_check.py"
    fi
    "$PYTHON" $check "http://127.0.0.1:$alone" "http://127.0.0.1:$port" $nslots \
        >"$work/check$np.out" 2>&1 ||
        die "np $np, $nslots slots: $(cat "$work/check$np.out") (log: $(tail -5 "$work/np$np.log"))"
    curl -s "http://127.0.0.1:$port/metrics" >"$work/metrics$np.txt"
    drafted=$(sed -n 's/^k3_draft_tokens_total //p' "$work/metrics$np.txt")
    kept=$(sed -n 's/^k3_draft_tokens_accepted_total //p' "$work/metrics$np.txt")
    [ "${kept:-0}" -gt 0 ] && [ "$drafted" -gt "$kept" ] ||
        die "np $np: kept ${kept:-?} of ${drafted:-?} drafts: wanted some kept and some cut"
    echo "ok: k3-mpi serve over $np ranks, $nslots slot(s), $kept of $drafted drafts kept: the" \
        "answers of bin/k3 serve: $(grep '^ok' "$work/check$np.out" | cut -c4-60 | tr '\n' ';')"
    # 2. rank 0 stopped by SIGTERM: the stop reaches every rank, exit 0.
    r0=$(rank_pid "$job" 0)
    [ -n "$r0" ] || die "np $np: rank 0 not found"
    kill -TERM "$r0"
    wait_gone "$job" 30 || die "np $np: still running 30 s after SIGTERM to rank 0"
    set +e
    wait "$job"
    rc=$?
    set -e
    [ "$rc" -eq 0 ] || die "np $np: exit $rc after SIGTERM to rank 0: $(tail -5 "$work/np$np.log")"
done
unset K3_SPEC_ALWAYS
echo "ok: SIGTERM to rank 0 ends k3-mpi serve with exit 0 (2 and 3 ranks)"

# 3. a rank killed (SIGKILL) while an answer streams: a follower (rank 2),
# then rank 0 itself (the HTTP side: the client's stream is cut, and the
# followers, waiting in a collective for rank 0's next operation, must not
# wait forever).
kill_mid_answer() {
    start_server "kill$1" "$work/k3-mpi-3" --max-context 4096 --parallel 2 ||
        die "kill rank $1: did not start"
    job=$pid
    victim=$(rank_pid "$job" "$1")
    [ -n "$victim" ] || die "kill: rank $1 not found"
    curl -s -N -m 120 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Count", "max_tokens": 4000, "ignore_eos": true, "stream": true}' \
        >"$work/kill$1.stream" 2>/dev/null &
    client=$!
    pids="$pids $client"
    i=0
    while :; do
        n=$(grep -c '^data:' "$work/kill$1.stream" 2>/dev/null) || n=0
        [ "$n" -lt 5 ] || break
        [ $i -lt 300 ] || die "kill rank $1: the stream did not start"
        sleep 0.1
        i=$((i + 1))
    done
    kill -9 "$victim"
    t0=$(date +%s)
    wait_gone "$job" 30 || die "kill: k3-mpi serve still runs 30 s after rank $1 was killed"
    set +e
    wait "$job"
    rc=$?
    set -e
    [ "$rc" -ne 0 ] || die "kill: exit 0 after rank $1 was killed"
    wait_gone "$client" 30 || die "kill rank $1: the client still waits 30 s after"
    # Cut, or ended by an error event: never a [DONE] as if it had finished.
    if grep -q '\[DONE\]' "$work/kill$1.stream"; then
        grep -q '"error"' "$work/kill$1.stream" ||
            die "kill rank $1: the cut stream ends in [DONE] without an error event"
        how="ended by an error event"
    else
        how="cut"
    fi
    echo "ok: rank $1 killed mid-answer ends k3-mpi serve in $(($(date +%s) - t0)) s" \
        "(exit $rc); the client's stream is $how"
}
kill_mid_answer 2
kill_mid_answer 0

# 4. a read failing on a follower (rank 1 of 2) mid-answer: every weight
# read from its 400th on fails, so the model opens and the first answer's
# streamed expert reads fail there.
if [ -n "${K3_MPI_FAULT_BIN:-}" ]; then
    cat >"$work/k3-mpi-fault" <<EOF
#!/bin/sh
exec $MPIRUN -np 1 $K3_MPI_FAULT_BIN "\$@" : -np 1 env K3_FAULT=read:400:fail:100000 \
    $K3_MPI_FAULT_BIN "\$@"
EOF
    chmod +x "$work/k3-mpi-fault"
    start_server fault "$work/k3-mpi-fault" --max-context 4096 --cache-experts 1 \
        --trunk-layers 0 --trunk-ring 1 || die "fault: did not start: $(cat "$work/fault.log")"
    job=$pid
    curl -s -m 40 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Count", "max_tokens": 64, "ignore_eos": true}' >/dev/null 2>&1 || true
    wait_gone "$job" 30 || die "fault: still running 30 s after a follower's read failed"
    set +e
    wait "$job"
    rc=$?
    set -e
    [ "$rc" -eq 4 ] || die "fault: exit $rc, not 4: $(tail -5 "$work/fault.log")"
    grep -q "k3-mpi: rank 1: .*error" "$work/fault.log" ||
        die "fault: no message of rank 1: $(tail -5 "$work/fault.log")"
    echo "ok: a read failing on rank 1 mid-answer ends k3-mpi serve with exit 4:" \
        "$(grep -m1 'k3-mpi: rank 1: .*error' "$work/fault.log" | cut -c1-120)"
fi
echo "mpi serve: all passed"
