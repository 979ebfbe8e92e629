# 39-spec: speculative decoding (--spec N or auto, the default; the ngram and
# self drafters) changes nothing but the number of forward passes. On tiny-a
# with negative frequency and presence penalties (so the model repeats itself
# and drafts are accepted, and also rejected), every setting gives
# byte-identical printed ids, --dump-logits rows and --save-state files to
# --spec 0: several N, auto, the self drafter with 1 and 2 experts, greedy and
# sampled with a seed, one thread, a fully streamed budget, and --chat (the
# per-turn report's ids). Bad --spec / --draft values are exit 2.
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

run sampled --temperature 0.8 --seed 7 --spec 0
run sampled-spec --temperature 0.8 --seed 7 --spec 4
same sampled sampled-spec
run sampled-self --temperature 0.8 --seed 7 --spec 3 --draft self
same sampled sampled-self
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
for n in 0 4 auto "4 --draft self"; do
    f=$(echo "$n" | tr -d ' -')
    # shellcheck disable=SC2086 # n is options
    printf 'say it again and again and again\nand again\n' |
        "$K3_BIN" "$cdir" --tok "$tok" --chat --gen 24 --quiet --spec $n --frequency-penalty -2 \
            --presence-penalty -2 --out "$work/chat$f.json" >"$work/chat$f.txt" 2>"$work/chat$f.err" ||
        die "chat --spec $n failed: $(tail -3 "$work/chat$f.err")"
    [ "$f" = 0 ] && continue
    cmp -s "$work/chat0.txt" "$work/chat$f.txt" || die "--chat printed other text with --spec $n"
    cmp -s "$work/chat0.json" "$work/chat$f.json" || die "--chat's turns differ with --spec $n"
done
echo "ok: --chat with --spec 4, auto and 4 --draft self = without (text and every turn's ids)"

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
[ "$h1" -lt 24 ] || die "--draft-topk 1 hit all 24 generated ids: the expert count does not reach the drafter"
expect_exit 2 "give --ids, --prompt" "$K3_BIN" "$dir" --tf-check
expect_exit 2 "at least 2 ids" "$K3_BIN" "$dir" --ids 5 --tf-check
echo "ok: --tf-check"

# k3 serve with the self drafter: a request's ids equal --spec 0's on the CLI.
command -v curl >/dev/null || die "curl is needed"
tokdir=$tok
dir=$cdir
. tests/gates/serve_lib.sh
start_server srv "$K3_BIN" --spec 4 --draft self --draft-topk 2 ||
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
echo "ok: k3 serve --spec 4 --draft self = the CLI's --spec 0 (sampled, 24 ids)"
dir=$(model tiny-a tiny-a)

expect_exit 2 "--spec expects" "$K3_BIN" "$dir" --ids 1 --spec -1
expect_exit 2 "--spec expects" "$K3_BIN" "$dir" --ids 1 --spec 17
expect_exit 2 "the drafters are ngram" "$K3_BIN" "$dir" --ids 1 --spec 2 --draft oracle
expect_exit 2 "--draft goes with --spec" "$K3_BIN" "$dir" --ids 1 --draft ngram --spec 0
expect_exit 2 "--draft-topk goes with --draft self" "$K3_BIN" "$dir" --ids 1 --draft-topk 2
expect_exit 2 "routed experts per token" "$K3_BIN" "$dir" --ids 1 --draft self --draft-topk 9
expect_exit 2 "--draft-topk expects" "$K3_BIN" "$dir" --ids 1 --draft self --draft-topk 0
expect_exit 2 "do not go together" "$K3_BIN" "$dir" --ids 1 --spec 2 --recompute
echo "ok: speculation is exact"
