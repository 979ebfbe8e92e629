# 44-serve-parallel: `k3 serve --parallel N`, several answers per forward
# call (src/server/slots.c), against the same requests served one at a
# time (--parallel 1), on a tiny model with the release tokenizer:
#  - parallel_check.py: a concurrent mix (prompt lengths over a chunk,
#    sampling, stop strings, max_tokens, logprobs, streams, a client that
#    disconnects, a prompt over the context) answered exactly as alone,
#    more requests than slots waiting in the queue, the freed slot reused,
#    and prefix reuse (cached_tokens) giving the cold answer;
#  - the official openai npm client's checks (a burst of 8 concurrent
#    answers equal the sequential ones, an aborted stream) on 3 slots;
#  - --parallel 0 and --parallel with --spec are exit 2; more slots than
#    the memory plan affords is exit 3 naming the shortfall.
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/serve-parallel"
rm -rf "$work"
mkdir -p "$work"
command -v node >/dev/null || die "node is needed for the OpenAI client (npm ci)"
[ -f node_modules/openai/package.json ] || die "the openai npm package is missing: run npm ci"
dir=$(model serve-tiny tiny-a --vocab 163840)

. tests/gates/serve_lib.sh

set +e
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --parallel 0 2>"$work/p0.err"
rc=$?
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --parallel 2 --spec 2 2>"$work/spec.err"
rc2=$?
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --parallel 256 --max-context 16777216 \
    --budget-gb 1 2>"$work/big.err"
rc3=$?
set -e
[ $rc = 2 ] || die "--parallel 0: exit $rc, wanted 2: $(cat "$work/p0.err")"
[ $rc2 = 2 ] || die "--parallel 2 --spec 2: exit $rc2, wanted 2: $(cat "$work/spec.err")"
grep -q "parallel 1" "$work/spec.err" || die "--spec with slots: $(cat "$work/spec.err")"
[ $rc3 = 3 ] || die "256 slots over the budget: exit $rc3, wanted 3: $(cat "$work/big.err")"
grep -q "does not fit" "$work/big.err" || die "256 slots: no shortfall named: $(cat "$work/big.err")"
echo "ok refusals: --parallel 0 exit 2, with --spec exit 2, over the plan exit 3"

start_server alone "$K3_BIN" --max-context 4096 --max-queue 16 || die "alone did not start"
alone=$port
start_server slots "$K3_BIN" --max-context 4096 --max-queue 16 --parallel 3 ||
    die "slots did not start: $(cat "$work/slots.log")"
slots=$port
grep -q "3 slots" "$work/slots.log" || die "the start-up plan does not say the slots"
grep -q "per sequence" "$work/slots.log" || die "the start-up plan does not say a slot's cost"
"$PYTHON" tests/gates/parallel_check.py "http://127.0.0.1:$alone" "http://127.0.0.1:$slots" 3 ||
    die "parallel_check failed (server log: $(tail -5 "$work/slots.log"))"
node tests/gates/openai_client.mjs "http://127.0.0.1:$slots" serve-tiny >"$work/node.out" 2>&1 ||
    die "openai client on 3 slots: $(cat "$work/node.out")"
echo "ok openai client on 3 slots: $(tail -1 "$work/node.out")"
grep -q "cancelled" "$work/slots.log" || die "no cancelled answer logged"
