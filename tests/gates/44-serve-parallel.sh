# 44-serve-parallel: `k3 serve --parallel N`, several answers per forward
# call (src/server/slots.c), against the same requests served one at a
# time (--parallel 1 --spec 0), on a tiny model with the release tokenizer;
# the slots speculate (--spec auto, the default, with K3_SPEC_ALWAYS=1 so
# that every step verifies what the ngram drafter finds, the cost gate's
# timings aside: a mix of verify rows, prompt chunks and plain decodes):
#  - parallel_check.py: a concurrent mix (prompt lengths over a chunk,
#    sampling, stop strings, max_tokens, logprobs, streams, a client that
#    disconnects, a prompt over the context) answered exactly as alone,
#    more requests than slots waiting in the queue, the freed slot reused,
#    and prefix reuse (cached_tokens) giving the cold answer;
#  - the official openai npm client's checks (a burst of 8 concurrent
#    answers equal the sequential ones, an aborted stream) on 3 slots;
#  - /metrics: drafts were verified in the slots, some kept, some cut;
#  - --parallel 0 and --parallel 2 with --draft self are exit 2; more
#    slots than the memory plan affords is exit 3 naming the shortfall;
#  - a --budget-gb computed from `k3 serve --plan`'s own per-slot cost
#    ("per sequence": KDA state, MLA cache, speculation, marks) so that
#    auto gives exactly 2 slots: 3 requests at once, only 2 run, the third
#    waits and completes, all equal to lone answers (slots_wait_check.py).
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
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --parallel 2 --draft self 2>"$work/spec.err"
rc2=$?
"$K3_BIN" serve "$dir" --tok "$tokdir" --port 0 --parallel 256 --max-context 16777216 \
    --budget-gb 1 2>"$work/big.err"
rc3=$?
set -e
[ $rc = 2 ] || die "--parallel 0: exit $rc, wanted 2: $(cat "$work/p0.err")"
[ $rc2 = 2 ] || die "--parallel 2 --draft self: exit $rc2, wanted 2: $(cat "$work/spec.err")"
grep -q "parallel 1" "$work/spec.err" || die "--draft self with slots: $(cat "$work/spec.err")"
[ $rc3 = 3 ] || die "256 slots over the budget: exit $rc3, wanted 3: $(cat "$work/big.err")"
grep -q "does not fit" "$work/big.err" || die "256 slots: no shortfall named: $(cat "$work/big.err")"
echo "ok refusals: --parallel 0 exit 2, with --draft self exit 2, over the plan exit 3"

start_server alone "$K3_BIN" --max-context 4096 --max-queue 16 --spec 0 ||
    die "alone did not start"
alone=$port
export K3_SPEC_ALWAYS=1
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
curl -s "http://127.0.0.1:$slots/metrics" >"$work/metrics.txt"
drafted=$(sed -n 's/^k3_draft_tokens_total //p' "$work/metrics.txt")
kept=$(sed -n 's/^k3_draft_tokens_accepted_total //p' "$work/metrics.txt")
[ "${kept:-0}" -gt 0 ] && [ "$drafted" -gt "$kept" ] ||
    die "the slots kept ${kept:-?} of ${drafted:-?} drafts: wanted some kept and some cut"
echo "ok speculation in the slots: $kept of $drafted drafts kept, every answer as alone"

# The budget case: one slot's cost from the plan, at a context that makes it
# dominate (the MLA cache), then a budget of the plan's 1-slot total plus
# two more slots: 2 fit and 4 cannot (90% of a budget is planned).
ctx=400000
"$K3_BIN" serve "$dir" --tok "$tokdir" --plan --parallel 1 --max-context $ctx \
    >"$work/plan1.txt" 2>&1 || die "serve --plan: $(cat "$work/plan1.txt")"
per=$(sed -n 's/^ *per sequence *\([0-9.]*\) GB.*/\1/p' "$work/plan1.txt")
total=$(sed -n 's/^ *total *\([0-9.]*\) GB.*/\1/p' "$work/plan1.txt")
"$K3_BIN" serve "$dir" --tok "$tokdir" --plan --parallel 3 --max-context $ctx \
    >"$work/plan3.txt" 2>&1 || die "serve --plan --parallel 3: $(cat "$work/plan3.txt")"
total3=$(sed -n 's/^ *total *\([0-9.]*\) GB.*/\1/p' "$work/plan3.txt")
# every per-slot buffer is in the per-slot cost: 2 more slots add 2 of them
"$PYTHON" -c 'import sys; p, t1, t3 = map(float, sys.argv[1:]); sys.exit(abs(t3 - t1 - 2 * p) > 0.003)' \
    "$per" "$total" "$total3" ||
    die "3 slots' plan ($total3 GB) is not 1 slot's ($total GB) + 2 x $per GB: a per-slot part uncounted"
budget=$("$PYTHON" -c 'import sys; p, t = map(float, sys.argv[1:]); print("%.4f" % ((t + 2 * p) / 0.9))' "$per" "$total")
"$K3_BIN" serve "$dir" --tok "$tokdir" --plan --max-context $ctx --budget-gb "$budget" \
    >"$work/plan2.txt" 2>&1 || die "serve --plan --budget-gb $budget: $(cat "$work/plan2.txt")"
grep -q "^k3 serve: 2 slots" "$work/plan2.txt" ||
    die "a $budget GB budget (slot $per GB, 1-slot total $total GB): $(head -1 "$work/plan2.txt")"
# (--parallel auto: start_server means --parallel 1 otherwise)
start_server budget "$K3_BIN" --max-context $ctx --budget-gb "$budget" --parallel auto ||
    die "the budget server did not start: $(cat "$work/budget.log")"
grep -q "2 slots" "$work/budget.log" || die "the budget server: $(head -3 "$work/budget.log")"
"$PYTHON" tests/gates/slots_wait_check.py "http://127.0.0.1:$alone" "http://127.0.0.1:$port" ||
    die "slots_wait_check failed (server log: $(tail -5 "$work/budget.log"))"
echo "ok budget: a slot costs $per GB, a $budget GB budget gives 2 slots"
unset K3_SPEC_ALWAYS
