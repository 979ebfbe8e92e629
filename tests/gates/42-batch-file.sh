# 42-batch-file: k3 MODEL --batch-file F runs every line's prompt together
# (k3_forward_multi: prefill chunks interleaved with decodes) and each line's
# ids are those of the same prompt run alone with --prompt or --ids and the
# same sampling: text and id lines, greedy and sampled, of 3 to 600 ids (a
# prompt longer than K3_PREFILL_CHUNK is fed a chunk a step beside the
# others' decodes), resident at 1 thread and fully streamed at 2 threads;
# the memory plan counts each line's state (KDA state + MLA cache).
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
    "$K3_BIN" "$dir" --tok "$REL" --ignore-eos --quiet --out "$work/alone$n.json" "$@" \
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
          b["kda_state"] + b["kv_cache"] == 5 * plan["sequence_bytes"])
    rows = [s["rows"] for s in d["steps"]]
    print(f"{name}: {len(rows)} batched steps, rows {rows}")
    ok = ok and max(rows) <= 512 + 4 and len(rows) >= 2
sys.exit(0 if ok else 1)
PY
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
