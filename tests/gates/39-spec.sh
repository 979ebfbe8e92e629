# 39-spec: speculative decoding (--spec N or auto, the default; the ngram and
# self drafters) changes nothing but the number of forward passes. On tiny-a
# with negative frequency and presence penalties (so the model repeats itself
# and drafts are accepted, and also rejected), every setting gives
# byte-identical printed ids, --dump-logits rows and --save-state files to
# --spec 0: several N, auto, the self drafter with 1 and 2 experts, greedy and
# sampled with a seed, one thread, a fully streamed budget, and --chat (the
# per-turn report's ids). The self drafter on a q8 draft trunk (k3 pack-trunk
# --draft q8, --draft-trunk): the same, its drafts the same at every thread
# count and budget, mostly accepted; a draft trunk of other weights (that
# the fingerprint cannot see) only lowers acceptance; one of another model,
# kind or size is exit 2. Bad --spec / --draft values are exit 2.
. tests/gates/lib.sh
work="$K3_BUILD/spec"
rm -rf "$work"
mkdir -p "$work"
dir=$(model tiny-a tiny-a)
ids="5,9,17,5,9,17,5,9,17,5,9"
# run NAME [options]: ids, logits and state of a 64-token run in $work/NAME.*
run() {
    name=$1
    shift
    "$K3_BIN" "$dir" --ids "$ids" --gen 64 --ignore-eos --frequency-penalty -1 \
        --presence-penalty -1 --out "$work/$name.json" --dump-logits "$work/$name.f32" \
        --save-state "$work/$name.state" "$@" >"$work/$name.ids" 2>"$work/$name.err" ||
        die "$name: exit $?: $(tail -3 "$work/$name.err")"
}
# same A B: B's ids, logits and state are A's, byte for byte.
same() {
    for x in ids f32 state; do
        cmp -s "$work/$1.$x" "$work/$2.$x" || die "$2 differs from $1 ($x)"
    done
}
spec_of() {
    "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1]))["spec"]
print(s["forwards"], s["drafted"], s["accepted"], s["emitted"])' "$work/$1.json"
}

run plain --spec 0
run auto
same plain auto
for n in 1 3 16; do
    run "spec$n" --spec "$n"
    same plain "spec$n"
done
set -- $(spec_of spec3)
[ "$3" -gt 0 ] || die "--spec 3 accepted no draft (forwards $1, drafted $2): the test proves nothing"
[ "$2" -gt "$3" ] || die "--spec 3 rejected no draft: the cut-back path is not exercised"
[ "$1" -lt 64 ] || die "--spec 3 took $1 forward passes for 64 tokens"
echo "ok: --spec 1, 3, 16 = --spec 0 (ids, logits, state); spec 3: $4 tokens in $1 passes, $3 of $2 drafts kept"

# The self drafter: the model with fewer experts on a state of its own.
for k in 1 2; do
    run "self$k" --spec 4 --draft self --draft-topk "$k"
    same plain "self$k"
done
set -- $(spec_of self1)
[ "$3" -gt 0 ] && [ "$2" -gt "$3" ] ||
    die "--draft self: $3 of $2 drafts kept: the test needs both kept and cut drafts"
echo "ok: --draft self (1 and 2 experts) = --spec 0; 1 expert: $3 of $2 drafts kept in $1 passes"

# The self drafter on a q8 draft trunk, held in memory: only draft.bin is
# written; ids, logits and state equal --spec 0's resident and streamed at 1
# and 2 threads, and its drafts (so the counts) are the same in every run.
"$K3_BIN" pack-trunk "$dir" "$work/dt" --draft q8 --quiet || die "pack-trunk --draft q8 failed"
[ -f "$work/dt/draft.bin" ] && [ "$(ls "$work/dt")" = draft.bin ] ||
    die "pack-trunk --draft q8 wrote: $(ls "$work/dt")"
dt="--spec 4 --draft self --draft-topk 2 --draft-trunk $work/dt"
# shellcheck disable=SC2086 # dt is options
{
    run dt $dt
    run dt-t1 $dt --threads 1
    run dt-streamed $dt --trunk-layers 0 --trunk-ring 2 --cache-experts 1
    run dt-streamed-t1 $dt --trunk-layers 0 --trunk-ring 1 --threads 1
    run self-streamed --spec 4 --draft self --draft-topk 2 --trunk-layers 0 --trunk-ring 2 \
        --cache-experts 1
    # The trunk bound without sub-runs (as a packed trunk of format 3 is):
    # the draft trunk, packed from the cut runs, is the same file to it.
    export K3_SUBRUNS=0
    run dt-nosub $dt --trunk-layers 0 --trunk-ring 2
    unset K3_SUBRUNS
}
for r in dt dt-t1 dt-streamed dt-streamed-t1 dt-nosub; do
    same plain "$r"
    [ "$(spec_of "$r")" = "$(spec_of dt)" ] ||
        die "$r: drafts differ from the resident run's: $(spec_of "$r") vs $(spec_of dt)"
done
set -- $(spec_of dt)
[ $((100 * $3)) -ge $((70 * $2)) ] && [ "$2" -gt "$3" ] ||
    die "--draft-trunk q8: $3 of $2 drafts kept: want most (>= 70%) but not all"
"$PYTHON" -c 'import json,sys
r = [json.load(open(p)) for p in sys.argv[1:]]
a, b = (x["trunk"]["bytes_read"] for x in r)
assert a < b, "with the draft trunk %d trunk bytes read, without %d" % (a, b)
assert r[0]["plan"]["bytes"]["draft_trunk"] > 0, r[0]["plan"]["bytes"]'     "$work/dt-streamed.json" "$work/self-streamed.json" 2>"$work/dt.err" ||
    die "the draft trunk's drafts read the exact trunk, or the plan misses it: $(cat "$work/dt.err")"
echo "ok: --draft-trunk q8 = --spec 0 (resident, streamed, 1 and 2 threads, runs cut or not): $3 of $2 drafts kept, the same drafts in every run"

# A draft trunk packed from other weights of the same layout whose
# differences the fingerprint does not sample (the middle of every trunk
# matrix zeroed): it is accepted, and it only lowers how many drafts are
# kept (the penalties, which the drafter's pick applies too, make repeats
# likely whatever the matrices: acceptance stays well above zero).
"$PYTHON" tests/gates/corrupt.py middles "$dir" "$work/middles" ||
    die "corrupt.py middles failed"
"$K3_BIN" pack-trunk "$work/middles" "$work/dtm" --draft q8 --quiet || die "pack of middles failed"
run dtm --spec 4 --draft self --draft-topk 2 --draft-trunk "$work/dtm"
same plain dtm
kept=$(spec_of dt | cut -d' ' -f3)
set -- $(spec_of dtm)
[ "$3" -lt "$kept" ] ||
    die "a draft trunk of other weights kept $3 of $2 drafts (the right one $kept): the draft trunk does not reach the drafter"
echo "ok: a draft trunk of other weights (zeros inside): the same ids, $3 of $2 drafts kept (the right one: $kept)"

# q4 on the trained k3-nano (tiny-a has 16-column matrices, which q4
# refuses): the same ids and logits as --spec 0 at 1 and 2 threads, the
# same drafts at both, most of them kept.
nano=models/k3-nano
"$K3_BIN" pack-trunk "$nano" "$work/nq4" --draft q4 --quiet || die "pack-trunk --draft q4 failed"
nids=$(prompt_ids "$(vocab_of "$nano")" 24)
nrun() {
    name=$1
    shift
    "$K3_BIN" "$nano" --ids "$nids" --gen 48 --ignore-eos --out "$work/$name.json" \
        --dump-logits "$work/$name.f32" "$@" >"$work/$name.ids" 2>"$work/$name.err" ||
        die "$name: exit $?: $(tail -3 "$work/$name.err")"
}
nrun n0 --spec 0
for th in 1 2; do
    nrun "nq4-$th" --spec 4 --draft self --draft-topk 2 --draft-trunk "$work/nq4" --threads "$th"
    cmp -s "$work/n0.ids" "$work/nq4-$th.ids" && cmp -s "$work/n0.f32" "$work/nq4-$th.f32" ||
        die "q4 draft trunk, $th threads: ids or logits differ from --spec 0"
done
[ "$(spec_of nq4-1)" = "$(spec_of nq4-2)" ] || die "q4: drafts differ between 1 and 2 threads"
set -- $(spec_of nq4-1)
[ $((100 * $3)) -ge $((50 * $2)) ] || die "--draft-trunk q4 on k3-nano: $3 of $2 drafts kept"
echo "ok: --draft-trunk q4 on k3-nano = --spec 0 at 1 and 2 threads: $3 of $2 drafts kept"

run sampled --temperature 0.8 --seed 7 --spec 0
run sampled-spec --temperature 0.8 --seed 7 --spec 4
same sampled sampled-spec
run sampled-self --temperature 0.8 --seed 7 --spec 3 --draft self
same sampled sampled-self
run sampled-dt --temperature 0.8 --seed 7 --spec 4 --draft self --draft-trunk "$work/dt"
same sampled sampled-dt
run threads1 --spec 4 --threads 1
same plain threads1
run streamed --spec 4 --trunk-layers 0 --trunk-ring 1 --cache-experts 1 --stream-embed \
    --stream-lm-head
same plain streamed
run streamed-self --spec 4 --draft self --trunk-layers 0 --trunk-ring 1 --cache-experts 1
same plain streamed-self
echo "ok: sampled with a seed, one thread and a streamed budget: identical with --spec 4 and self"

# --chat: the release tokenizer's chat format on a release-vocabulary model.
tok=../shared/k3-release
[ -f "$tok/tiktoken.model" ] || die "no release tokenizer at $tok"
cdir=$(model chat-tiny tiny-a --vocab 163840)
cdt="$work/cdt"
"$K3_BIN" pack-trunk "$cdir" "$cdt" --draft q8 --quiet || die "pack-trunk --draft q8 (chat model)"
for n in 0 4 auto "4 --draft self" "4 --draft self --draft-trunk $cdt"; do
    f=$(echo "$n" | tr -d ' -/.')
    # shellcheck disable=SC2086 # n is options
    printf 'say it again and again and again\nand again\n' |
        "$K3_BIN" "$cdir" --tok "$tok" --chat --gen 24 --quiet --spec $n --frequency-penalty -2 \
            --presence-penalty -2 --out "$work/chat$f.json" >"$work/chat$f.txt" 2>"$work/chat$f.err" ||
        die "chat --spec $n failed: $(tail -3 "$work/chat$f.err")"
    [ "$f" = 0 ] && continue
    cmp -s "$work/chat0.txt" "$work/chat$f.txt" || die "--chat printed other text with --spec $n"
    cmp -s "$work/chat0.json" "$work/chat$f.json" || die "--chat's turns differ with --spec $n"
done
echo "ok: --chat with --spec 4, auto, 4 --draft self (+ --draft-trunk) = without (text and every turn's ids)"

# --tf-check: the drafter on a given sequence, no model. For 5,9,17 three
# times (worked by hand): positions 1-3 have no earlier match; from 4 on the
# latest match proposes the rest of the cycle, runs 3,3,3,2,1; the replay
# emits 1,1,1, then 4 (run 3 + the model's id), then the last id: 8 in 5.
"$K3_BIN" "$dir" --ids 5,9,17,5,9,17,5,9,17 --tf-check --spec 4 --out "$work/tf.json" \
    >"$work/tf.txt" || die "--tf-check failed"
[ "$(awk '$4 == "hit" {printf "%s:%s ", $1, $5}' "$work/tf.txt")" = "4:3 5:3 6:3 7:2 8:1 " ] ||
    die "--tf-check per position: $(cat "$work/tf.txt")"
"$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))
assert (r["positions"], r["first_hits"], r["replay_passes"], r["replay_emitted"]) == (8, 5, 5, 8), r' \
    "$work/tf.json" || die "--tf-check summary: $(cat "$work/tf.json")"
# The self drafter teacher-forced on the model's own greedy continuation:
# with all 4 experts it is the exact model, so from the first generated
# position on every first draft is a hit (its state kept in step through
# the cut-backs); with 1 expert it is an approximation and misses some.
"$K3_BIN" "$dir" --ids "$ids" --gen 24 --ignore-eos --spec 0 --quiet >"$work/greedy.ids" ||
    die "greedy run failed"
seq="$ids,$(tr -d ' \n' <"$work/greedy.ids")"
for k in 4 1; do
    "$K3_BIN" "$dir" --ids "$seq" --tf-check --spec 4 --draft self --draft-topk "$k" \
        --out "$work/tfself$k.json" >"$work/tfself$k.txt" 2>"$work/tfself$k.err" ||
        die "--tf-check --draft self --draft-topk $k failed: $(tail -3 "$work/tfself$k.err")"
done
np=$(echo "$ids" | tr ',' '\n' | wc -l)
miss=$(awk -v np="$np" '$1 ~ /^[0-9]+$/ && $1 + 0 >= np && $4 != "hit"' "$work/tfself4.txt" | head -3)
[ -z "$miss" ] || die "--draft self with every expert missed the model's own ids: $miss"
"$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))
assert r["drafter"] == "self" and r["positions"] == 34 and r["proposed"] == 34, r
assert r["replay_emitted"] == 34 and r["tokens_per_pass"] > 2, r' "$work/tfself4.json" ||
    die "--tf-check --draft self summary: $(cat "$work/tfself4.json")"
h1=$(awk -v np="$np" '$1 ~ /^[0-9]+$/ && $1 + 0 >= np && $4 == "hit"' "$work/tfself1.txt" | wc -l)
# With the q8 draft trunk and every expert: many of the model's own ids.
# About half on this random model: its logits are close, and its layers
# amplify differences (one layer's logits are 0.4% off with q8, six layers'
# up to a third), so q8 there is a harder test than on trained weights.
"$K3_BIN" "$dir" --ids "$seq" --tf-check --spec 4 --draft self --draft-topk 4 \
    --draft-trunk "$work/dt" >"$work/tfdt.txt" 2>"$work/tfdt.err" ||
    die "--tf-check --draft-trunk failed: $(tail -3 "$work/tfdt.err")"
hq=$(awk -v np="$np" '$1 ~ /^[0-9]+$/ && $1 + 0 >= np && $4 == "hit"' "$work/tfdt.txt" | wc -l)
[ "$hq" -ge 6 ] || die "--tf-check --draft-trunk q8: $hq of 24 generated ids hit"
[ "$h1" -lt 24 ] || die "--draft-topk 1 hit all 24 generated ids: the expert count does not reach the drafter"
expect_exit 2 "give --ids, --prompt" "$K3_BIN" "$dir" --tf-check
expect_exit 2 "at least 2 ids" "$K3_BIN" "$dir" --ids 5 --tf-check
echo "ok: --tf-check"

# k3 serve with the self drafter: a request's ids equal --spec 0's on the CLI.
command -v curl >/dev/null || die "curl is needed"
tokdir=$tok
dir=$cdir
. tests/gates/serve_lib.sh
start_server srv "$K3_BIN" --spec 4 --draft self --draft-topk 2 --draft-trunk "$cdt" ||
    die "k3 serve --draft self did not start: $(cat "$work/srv.log")"
body='{"prompt": "a a a a a a a a", "max_tokens": 24, "temperature": 0.7, "seed": 3,
 "frequency_penalty": -2, "presence_penalty": -2, "ignore_eos": true, "return_token_ids": true}'
curl -s --max-time 120 -H 'Content-Type: application/json' -d "$body" \
    "http://127.0.0.1:$port/v1/completions" >"$work/srv.json" || die "the request failed"
want=$("$K3_BIN" "$cdir" --tok "$tok" --prompt "a a a a a a a a" --gen 24 --temperature 0.7 --seed 3 \
    --frequency-penalty -2 --presence-penalty -2 --ignore-eos --spec 0 --quiet --out "$work/cli.json" \
    >/dev/null && "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' \
    "$work/cli.json")
got=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["token_ids"])' \
    "$work/srv.json") || die "no token_ids: $(head -c 300 "$work/srv.json")"
[ "$got" = "$want" ] || die "k3 serve --draft self: $got, the CLI with --spec 0: $want"
stop_server "$pid" srv
echo "ok: k3 serve --spec 4 --draft self --draft-trunk = the CLI's --spec 0 (sampled, 24 ids)"
dir=$(model tiny-a tiny-a)

expect_exit 2 "--spec expects" "$K3_BIN" "$dir" --ids 1 --spec -1
expect_exit 2 "--spec expects" "$K3_BIN" "$dir" --ids 1 --spec 17
expect_exit 2 "the drafters are ngram" "$K3_BIN" "$dir" --ids 1 --spec 2 --draft oracle
expect_exit 2 "--draft goes with --spec" "$K3_BIN" "$dir" --ids 1 --draft ngram --spec 0
expect_exit 2 "--draft-topk goes with --draft self" "$K3_BIN" "$dir" --ids 1 --draft-topk 2
expect_exit 2 "routed experts per token" "$K3_BIN" "$dir" --ids 1 --draft self --draft-topk 9
expect_exit 2 "--draft-topk expects" "$K3_BIN" "$dir" --ids 1 --draft self --draft-topk 0
expect_exit 2 "do not go together" "$K3_BIN" "$dir" --ids 1 --spec 2 --recompute
# Draft trunks that do not fit: another checkpoint's, another kind, cut
# short, damaged, missing, not one at all; and the options' combinations.
other=$(model tiny-a-seed5 tiny-a --seed 5)
"$K3_BIN" pack-trunk "$other" "$work/dto" --draft q8 --quiet || die "pack of another model failed"
sd="--ids 1 --spec 2 --draft self --draft-trunk"
# shellcheck disable=SC2086 # sd is options
{
    expect_exit 2 "another checkpoint" "$K3_BIN" "$dir" $sd "$work/dto"
    mkdir -p "$work/bad"
    cp "$work/dt/draft.bin" "$work/bad/draft.bin"
    printf '\003' | dd of="$work/bad/draft.bin" bs=1 seek=12 conv=notrunc 2>/dev/null
    expect_exit 2 "kind 3" "$K3_BIN" "$dir" $sd "$work/bad"
    cp "$work/dt/draft.bin" "$work/bad/draft.bin"
    truncate -s -100 "$work/bad/draft.bin"
    expect_exit 2 "truncated" "$K3_BIN" "$dir" $sd "$work/bad"
    cp "$work/dt/draft.bin" "$work/bad/draft.bin"
    printf '\177' | dd of="$work/bad/draft.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
    expect_exit 2 "damaged" "$K3_BIN" "$dir" $sd "$work/bad"
    printf 'not a draft trunk at all, but long enough? no.' >"$work/bad/draft.bin"
    expect_exit 2 "not a draft trunk" "$K3_BIN" "$dir" $sd "$work/bad"
    expect_exit 2 "cannot open" "$K3_BIN" "$dir" $sd "$work/nowhere"
    expect_exit 2 "needs [0-9]+ in" "$K3_BIN" "$dir" --layers 1 $sd "$work/dt"
}
expect_exit 2 "--draft-trunk goes with --draft self" "$K3_BIN" "$dir" --ids 1 --spec 2 \
    --draft-trunk "$work/dt"
expect_exit 2 "kinds are q8 and q4" "$K3_BIN" pack-trunk "$dir" "$work/dt4" --draft q5
expect_exit 2 "multiple of 32" "$K3_BIN" pack-trunk "$dir" "$work/dt4" --draft q4
echo "ok: speculation is exact"
