# 53-structured-cli: grammar-constrained decoding on the command line
# (--json-schema FILE, --grammar FILE; structured/constrain.h through the
# turn driver's mask, chat/turn.h), on a random-weight model with the
# release's vocabulary and tokenizer (so the masks cover 163,840 ids):
#  - the turn driver with a toy constraint (tests/progs/constraint_check.c):
#    every id allowed, end ids only where it may end, --spec = --spec 0 with
#    drafts cut and rolled back (greedy, sampled, every sampler filter);
#  - JSON Schemas (properties/required, enums, arrays with bounds, nesting,
#    anyOf, numbers with bounds), greedy and sampled with a seed: every output
#    is COMPLETE (the end budget closes it within --gen) and valid under the
#    schema by an independent validator (python3-jsonschema);
#  - a GBNF grammar: every output matches the same language written as a
#    Python regular expression;
#  - speculative decoding under a grammar (K3_SPEC_ALWAYS=1: drafts every
#    step, some cut by the grammar before verification): the ids are --spec 0's
#    byte for byte, greedy and sampled; the report counts cut drafts;
#  - --save-state / --load-state under a grammar: 8 + 8 ids continue the
#    grammar and equal 16 uninterrupted; another grammar on load is exit 2;
#  - --batch-file lines with their own "grammar" / "json_schema" each equal
#    their lone run;
#  - bad input is exit 2 naming the problem: a GBNF syntax error (line and
#    column), a schema keyword decoding cannot enforce (keyword and JSON
#    pointer), both options, --ignore-eos with a grammar.
. tests/gates/lib.sh
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
"$PYTHON" -c 'import jsonschema' 2>/dev/null || die "python3-jsonschema is missing (scripts/deps.sh)"
dir=$(model chat-tiny tiny-a --vocab 163840) # shared with 32, 36, 42
work="$K3_BUILD/structured-cli"
rm -rf "$work"
mkdir -p "$work"
k3() { "$K3_BIN" "$dir" --tok "$REL" --quiet "$@"; }

# --- the turn driver's side, apart from the engine (tests/progs/constraint_check.c):
# a toy constraint; every id allowed, end ids only where it may end, spec = spec 0,
# drafts cut and rolled back.
OMP_NUM_THREADS=1 "$K3_BUILD/progs/constraint_check" "$(model tiny-a tiny-a)" ||
    die "constraint_check failed"

# --- schemas: complete and valid ------------------------------------------
cat >"$work/s1.json" <<'EOF'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
 "age": {"type": "integer", "minimum": 0, "maximum": 120},
 "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3}},
 "required": ["name", "age", "tags"], "additionalProperties": false}
EOF
cat >"$work/s2.json" <<'EOF'
{"type": "object", "properties": {"ok": {"type": "boolean"},
 "v": {"anyOf": [{"type": "null"}, {"type": "number"}, {"type": "string", "maxLength": 5}]},
 "inner": {"type": "object", "properties": {"k": {"const": "x"}}, "required": ["k"]}},
 "required": ["ok", "inner"]}
EOF
cat >"$work/s3.json" <<'EOF'
{"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}
EOF
# valid SCHEMA FILE: FILE is one complete JSON text valid under SCHEMA.
valid() {
    "$PYTHON" - "$1" "$2" <<'EOF' || die "$2 is not valid under $1: $(head -c 300 "$2")"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
text = open(sys.argv[2], encoding="utf-8").read().rstrip("\n")
jsonschema.validate(json.loads(text), schema)
EOF
}
n=0
for s in s1 s2 s3; do
    case $s in # every sampler filter on one schema; greedy and plain sampling on all
    s1) modes='x|--temperature 0.9 --seed 5|--temperature 1.2 --top-k 50 --top-p 0.95 --min-p 0.01 --seed 11' ;;
    *) modes='x|--temperature 0.9 --seed 5' ;;
    esac
    old_ifs=$IFS
    IFS='|'
    # shellcheck disable=SC2086
    set -- $modes
    IFS=$old_ifs
    for how in "$@"; do
        [ "$how" = x ] && how=""
        n=$((n + 1))
        # shellcheck disable=SC2086 # $how is a list of options
        k3 --prompt "Give me JSON:" --json-schema "$work/$s.json" --gen 60 $how \
            --out "$work/run$n.json" >"$work/out$n.txt" 2>"$work/err$n" ||
            die "$s ($how): exit $?: $(cat "$work/err$n")"
        valid "$work/$s.json" "$work/out$n.txt"
    done
done
echo "ok: $n schema runs (3 schemas, greedy and sampled) complete and valid (python3-jsonschema)"

# --- GBNF -------------------------------------------------------------------
cat >"$work/list.gbnf" <<'EOF'
# a parenthesised, comma-separated list of lower-case words
root ::= "(" word ("," word)* ")"
word ::= [a-z]+
EOF
for seed in 0 3; do
    k3 --prompt "A list:" --grammar "$work/list.gbnf" --gen 24 --temperature 0.8 --seed "$seed" \
        >"$work/g$seed.txt" 2>"$work/gerr" || die "gbnf: $(cat "$work/gerr")"
    "$PYTHON" -c 'import re,sys; t=open(sys.argv[1]).read().rstrip("\n")
sys.exit(0 if re.fullmatch(r"\([a-z]+(,[a-z]+)*\)", t) else 1)' "$work/g$seed.txt" ||
        die "gbnf output outside the language: $(cat "$work/g$seed.txt")"
done
echo "ok: GBNF outputs in the language: $(cat "$work/g0.txt") $(cat "$work/g3.txt")"

# --- speculative decoding: the ids of --spec 0 -------------------------------
gen_ids() { "$PYTHON" -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["generated_ids"])))' "$1"; }
spec_of() { "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1]))["spec"]; print(s["drafted"], s["accepted"], s["cut"])' "$1"; }
cut_total=0
for how in "" "--temperature 0.9 --seed 7"; do
    for s in s1 list; do
        case $s in list) g="--grammar $work/list.gbnf" ;; *) g="--json-schema $work/$s.json" ;; esac
        # The prompt's words, favoured by negative penalties, make the model
        # repeat them and the ngram drafter propose the prompt's continuations,
        # some of which the grammar refuses (" Again").
        p='(abc,def) Again (abc,def) Again {"name": "abc", "age": 7} Again'
        # shellcheck disable=SC2086
        k3 --prompt "$p" $g --gen 40 --frequency-penalty -2 --presence-penalty -2 \
            $how --spec 0 --out "$work/p0.json" >"$work/p0.txt" || die "spec 0 ($s $how)"
        # shellcheck disable=SC2086
        K3_SPEC_ALWAYS=1 k3 --prompt "$p" $g --gen 40 --frequency-penalty -2 \
            --presence-penalty -2 $how --spec 4 --out "$work/p4.json" >"$work/p4.txt" ||
            die "spec 4 ($s $how)"
        [ "$(gen_ids "$work/p0.json")" = "$(gen_ids "$work/p4.json")" ] ||
            die "spec 4 under $s ($how) differs from spec 0: $(gen_ids "$work/p0.json") vs $(gen_ids "$work/p4.json")"
        cmp -s "$work/p0.txt" "$work/p4.txt" || die "spec 4 text differs ($s $how)"
        set -- $(spec_of "$work/p4.json")
        echo "ok: spec 4 = spec 0 under $s ($how): drafted $1, kept $2, cut by the grammar $3"
        cut_total=$((cut_total + $3))
    done
done
[ "$cut_total" -gt 0 ] || die "no draft was ever cut by the grammar: the cut path is not exercised"

# --- save / load continue the grammar ---------------------------------------
cat >"$work/words.gbnf" <<'EOF'
root ::= ([a-z]+ " ")*
EOF
k3 --prompt "Words:" --grammar "$work/words.gbnf" --gen 16 --out "$work/w16.json" >/dev/null ||
    die "whole run"
k3 --prompt "Words:" --grammar "$work/words.gbnf" --gen 8 --save-state "$work/w8" \
    --out "$work/w8a.json" >/dev/null || die "first half"
[ -f "$work/w8.grammar" ] || die "--save-state under a grammar wrote no $work/w8.grammar"
k3 --load-state "$work/w8" --grammar "$work/words.gbnf" --gen 8 --out "$work/w8b.json" \
    >/dev/null || die "second half"
[ "$(gen_ids "$work/w8a.json"),$(gen_ids "$work/w8b.json")" = "$(gen_ids "$work/w16.json")" ] ||
    die "save/load under a grammar: $(gen_ids "$work/w8a.json") + $(gen_ids "$work/w8b.json") != $(gen_ids "$work/w16.json")"
echo "ok: 8 + 8 after save/load under a grammar = 16 uninterrupted"
expect_exit 2 "saved under another grammar" k3 --load-state "$work/w8" --grammar "$work/list.gbnf" --gen 4

# --- batch lines ------------------------------------------------------------
schema_line=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$work/s3.json")
cat >"$work/in.jsonl" <<JSONL
{"prompt": "Give me JSON:", "gen": 30, "json_schema": $schema_line}
{"prompt": "A list:", "gen": 20, "grammar": "root ::= \"(\" [a-z]+ (\",\" [a-z]+)* \")\"", "temperature": 0.8, "seed": 3}
{"prompt": "Free text", "gen": 6}
JSONL
K3_SPEC_ALWAYS=1 k3 --batch-file "$work/in.jsonl" --spec 3 >"$work/batch.txt" || die "batch"
k3 --prompt "Give me JSON:" --gen 30 --json-schema "$work/s3.json" --spec 0 >"$work/b1.txt"
k3 --prompt "A list:" --gen 20 --grammar "$work/list.gbnf" --temperature 0.8 --seed 3 --spec 0 >"$work/b2.txt"
k3 --prompt "Free text" --gen 6 --spec 0 >"$work/b3.txt"
"$PYTHON" - "$work" <<'EOF' || die "a batch line differs from its lone run"
import re, sys
w = sys.argv[1]
parts = re.split(r"(?:^|\n)==> line \d+ <==\n", open(w + "/batch.txt").read())[1:]
for i, p in enumerate(parts):
    alone = open("%s/b%d.txt" % (w, i + 1)).read()
    if p.rstrip("\n") != alone.rstrip("\n"):
        print("line %d: %r != %r" % (i + 1, p, alone))
        sys.exit(1)
EOF
valid "$work/s3.json" "$work/b1.txt"
echo "ok: batch lines with their own grammar and schema = their lone runs"

# --- bad input --------------------------------------------------------------
printf 'root ::= "a" (\n' >"$work/bad.gbnf"
expect_exit 2 "bad.gbnf.*[0-9]+:[0-9]+" k3 --prompt x --grammar "$work/bad.gbnf" --gen 2
printf '{"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {"type": "string"}}}\n' >"$work/bad2.json"
expect_exit 2 "patternProperties.*at /" k3 --prompt x --json-schema "$work/bad2.json" --gen 2
printf '{"type": ' >"$work/bad3.json"
expect_exit 2 "bad3.json" k3 --prompt x --json-schema "$work/bad3.json" --gen 2
expect_exit 2 "not both" k3 --prompt x --grammar "$work/list.gbnf" --json-schema "$work/s1.json"
expect_exit 2 "ignore-eos" k3 --prompt x --grammar "$work/list.gbnf" --ignore-eos
printf '{"prompt": "x", "grammar": "root ::= (("}\n' >"$work/in.bad.jsonl"
expect_exit 2 "in.bad.jsonl:1" k3 --batch-file "$work/in.bad.jsonl"
echo "ok: structured outputs on the command line"
