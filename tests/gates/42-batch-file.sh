# 42-batch-file: k3 MODEL --batch-file F runs every line's prompt together
# (k3_forward_multi: prefill chunks interleaved with decodes) and each line's
# ids are those of the same prompt run alone with --prompt or --ids and the
# same sampling: text and id lines, greedy and sampled, of 3 to 600 ids (a
# prompt longer than K3_PREFILL_CHUNK is fed a chunk a step beside the
# others' decodes), resident at 1 thread and fully streamed at 2 threads;
# the memory plan counts each line's state (KDA state + MLA cache), and
# its speculation journal when the lines draft (--spec auto is the default;
# the lone runs are --spec 0). With speculation forced to matter (--spec 4,
# negative penalties so the model repeats itself): one round carries a
# line's verify rows beside another's prompt chunk and a third's plain
# decode, drafts are kept and cut, and every line's ids are still its lone
# --spec 0 run's and the batch's --spec 0 run's; --draft self is refused.
# A text line's section of stdout is the text the lone run prints. Bad
# input is exit 2 naming the line: not JSON, an unknown key, both prompt and
# ids, an empty file, --batch-file with --prompt.
. tests/gates/lib.sh
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
dir=$(model chat-tiny tiny-a --vocab 163840)
work="$K3_BUILD/batch-file"
mkdir -p "$work"
long=$(prompt_ids 163840 600)
cat >"$work/in.jsonl" <<JSONL
{"prompt": "The capital of France is", "gen": 8}
{"ids": [1008, 10484, 318], "gen": 5, "temperature": 0.8, "seed": 7}
{"prompt": "Once upon a time, in a land far away, there lived a", "gen": 12, "temperature": 1.0, "top_p": 0.9, "top_k": 40, "seed": 3}
{"ids": [$long], "gen": 4}
{"prompt": "Hi", "gen": 0}
JSONL
# shellcheck disable=SC2086 # $2 is a list of options
batch() { # NAME OPTIONS: the batch run; stdout NAME.txt, report NAME.json
    OMP_NUM_THREADS=$3 "$K3_BIN" "$dir" --tok "$REL" --batch-file "$work/in.jsonl" --ignore-eos \
        --quiet --out "$work/$1.json" $2 >"$work/$1.txt" 2>"$work/$1.err" ||
        { cat "$work/$1.err"; die "batch $1: exit $?"; }
}
batch resident "" 1
batch streamed "--trunk-layers 0 --trunk-ring 1 --cache-experts 4 --stream-embed --stream-lm-head" 2
alone() { # N ARGS...: line N run alone
    n=$1
    shift
    "$K3_BIN" "$dir" --tok "$REL" --ignore-eos --quiet --spec 0 --out "$work/alone$n.json" "$@" \
        >"$work/alone$n.txt" 2>"$work/alone$n.err" || { cat "$work/alone$n.err"; die "alone $n"; }
}
alone 1 --prompt "The capital of France is" --gen 8
alone 2 --ids 1008,10484,318 --gen 5 --temperature 0.8 --seed 7
alone 3 --prompt "Once upon a time, in a land far away, there lived a" --gen 12 \
    --temperature 1.0 --top-p 0.9 --top-k 40 --seed 3
alone 4 --ids "$long" --gen 4
alone 5 --prompt "Hi" --gen 0
"$PYTHON" - "$work" <<'PY' || die "batch results differ from the lone runs"
import json, sys
w = sys.argv[1]
ok = True
for name in ("resident", "streamed"):
    d = json.load(open(f"{w}/{name}.json"))
    out = open(f"{w}/{name}.txt", "rb").read()
    sections = out.split(b"==> line ")[1:]
    res = d["results"]
    assert len(res) == 5 and len(sections) == 5, (len(res), len(sections))
    for i, r in enumerate(res):
        a = json.load(open(f"{w}/alone{i + 1}.json"))
        same = (r["line"] == i + 1 and r["prompt_ids"] == a["prompt_ids"] and
                r["generated_ids"] == a["generated_ids"] and r["end"] == a["end"])
        body = sections[i].split(b" <==\n", 1)[1]
        if i < 4:
            body = body[:-1]  # the empty line before the next heading
        if r["text"] is not None:
            same = same and body == open(f"{w}/alone{i + 1}.txt", "rb").read()
        print(f"{name} line {i + 1}: {len(r['prompt_ids'])} prompt ids, "
              f"{len(r['generated_ids'])} generated, {'same' if same else 'DIFFERENT'}")
        ok = ok and same
    ok = ok and d["generated_ids"] == res[0]["generated_ids"] and len(d["step_seconds"]) > 0
    plan = d["plan"]  # the plan counts one state per line
    b = plan["bytes"]
    ok = (ok and plan["sequences"] == 5 and
          b["kda_state"] + b["kv_cache"] + b["speculation"] == 5 * plan["sequence_bytes"] and
          b["speculation"] > 0 and d["spec"]["auto"])
    rows = [s["rows"] for s in d["steps"]]
    print(f"{name}: {len(rows)} batched steps, rows {rows}")
    ok = ok and max(rows) <= 512 + 4 and len(rows) >= 2
sys.exit(0 if ok else 1)
PY

# Speculation in the rounds: line 1 repeats itself (drafts kept and cut),
# line 2 is sampled, line 3 has nothing for the ngram drafter to copy,
# line 4's 2600 ids go in over six rounds while the others decode. On
# tiny-a (gate 39's model: with these penalties it repeats itself), and
# K3_SPEC_ALWAYS=1 so that every step drafts what the ngram drafter finds
# (the cost gate's timings would make the mix machine-dependent).
tiny=$(model tiny-a tiny-a)
rep="5,9,17,5,9,17,5,9,17,5,9"
cat >"$work/spec.jsonl" <<JSONL
{"ids": [$rep], "gen": 40}
{"ids": [$rep], "gen": 30, "temperature": 0.8, "seed": 7}
{"ids": [3, 4, 5, 6, 7, 8], "gen": 10}
{"ids": [$(prompt_ids 512 2600)], "gen": 6}
JSONL
pen="--frequency-penalty -1 --presence-penalty -1"
# shellcheck disable=SC2086 # $pen is a list of options
for sp in 0 4; do
    K3_SPEC_ALWAYS=1 "$K3_BIN" "$tiny" --batch-file "$work/spec.jsonl" --ignore-eos --quiet \
        $pen --spec $sp \
        --out "$work/spec$sp.json" >"$work/spec$sp.txt" 2>"$work/spec$sp.err" ||
        { cat "$work/spec$sp.err"; die "batch --spec $sp: exit $?"; }
done
"$PYTHON" - "$work/spec.jsonl" "$work/lone.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        opts = ["--ids", ",".join(map(str, d["ids"])), "--gen", str(d["gen"])]
        if "seed" in d:
            opts += ["--temperature", str(d["temperature"]), "--seed", str(d["seed"])]
        f.write(json.dumps(opts) + "\n")
PY
i=0
while IFS= read -r opts; do
    i=$((i + 1))
    eval "set -- $("$PYTHON" -c 'import json,shlex,sys; print(" ".join(map(shlex.quote, json.loads(sys.argv[1]))))' "$opts")"
    # shellcheck disable=SC2086
    "$K3_BIN" "$tiny" --ignore-eos --quiet $pen --spec 0 --out "$work/lone$i.json" "$@" \
        >/dev/null 2>"$work/lone$i.err" || { cat "$work/lone$i.err"; die "lone $i"; }
done <"$work/lone.jsonl"
"$PYTHON" - "$work" <<'PY' || die "speculating batch lines differ from their lone --spec 0 runs"
import json, sys
w = sys.argv[1]
s0, s4 = (json.load(open(f"{w}/spec{n}.json")) for n in (0, 4))
ok = True
for i, (r0, r4) in enumerate(zip(s0["results"], s4["results"])):
    lone = json.load(open(f"{w}/lone{i + 1}.json"))["generated_ids"]
    same = r4["generated_ids"] == lone == r0["generated_ids"]
    print(f"spec line {i + 1}: {len(lone)} ids, {r4['forwards']} forwards, "
          f"{r4['accepted']} of {r4['drafted']} drafts kept: {'same' if same else 'DIFFERENT'}")
    ok = ok and same and r0["drafted"] == 0
r1 = s4["results"][0]
if not (0 < r1["accepted"] < r1["drafted"]):
    sys.exit("line 1 must keep some drafts and cut others: the test proves nothing")
steps = s4["steps"]
mixed = [s["step"] for s in steps if s["verifying"] and s["prompting"]
         and s["sequences"] > s["verifying"] + s["prompting"]]
print(f"steps with verify rows, a prompt chunk and a plain decode together: {mixed}")
if not mixed:
    sys.exit("no step mixed verify rows with a prompt chunk and a plain decode")
sys.exit(0 if ok else 1)
PY
expect_exit 2 "drafts with ngram only" "$K3_BIN" "$tiny" --batch-file "$work/spec.jsonl" \
    --draft self

printf '{"ids": [1, 2]}\n{"ids": [1, 2}\n' >"$work/bad1.jsonl"
expect_exit 2 "bad1.jsonl:2: not JSON" "$K3_BIN" "$dir" --batch-file "$work/bad1.jsonl"
printf '{"ids": [1]}\n{"ids": [1]}\n{"ids": [3], "max_tokens": 4}\n' >"$work/bad2.jsonl"
expect_exit 2 'bad2.jsonl:3: unknown key "max_tokens"' "$K3_BIN" "$dir" --batch-file "$work/bad2.jsonl"
printf '{"ids": [1], "prompt": "x"}\n' >"$work/bad3.jsonl"
expect_exit 2 "bad3.jsonl:1: give one of" "$K3_BIN" "$dir" --batch-file "$work/bad3.jsonl"
: >"$work/empty.jsonl"
expect_exit 2 "empty.jsonl: no lines" "$K3_BIN" "$dir" --batch-file "$work/empty.jsonl"
printf '{"ids": [1], "top_p": 1.5}\n' >"$work/bad4.jsonl"
expect_exit 2 "bad4.jsonl:1: top_p" "$K3_BIN" "$dir" --batch-file "$work/bad4.jsonl"
expect_exit 2 "does not go with --prompt" "$K3_BIN" "$dir" --batch-file "$work/in.jsonl" --prompt x
