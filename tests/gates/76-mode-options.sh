# 76-mode-options: every option against every mode (issue 35 F2). An option
# that does not apply to a mode is exit 2 naming both, never silently
# ignored (`--tf-check --save-state F` used to exit 0 and write nothing,
# `--tf-check --load-state /nonexistent` exit 0).
#
# The options come from `k3 --list-options` (the option table itself), so
# an option added later is tried here without anyone editing this file: in
# a narrow mode (--render-chat, --detokenize, --tokenize-jsonl, --tokenize,
# --tf-check) it must be refused until both src/cli/options.c and the lists
# below say it applies. For each (mode, option) pair:
#   - listed below as applying: the run must not be refused for the mode;
#   - not listed: exit 2, the message naming the option and the mode.
# The wide modes (a generation run, --chat, --batch-file) take most
# options; their refusals (the options that belong to another mode) are
# checked from the lists at the end.
# Fails on today's main: --tf-check with --save-state, --load-state, --gen,
# --seed, --temperature, --dump-logits, ... exit 0.
. tests/gates/lib.sh

REL=../shared/k3-release
dir=$(model tiny-a tiny-a)
work="$K3_BUILD/mode-options"
rm -rf "$work"
mkdir -p "$work"
K3=$(cd "$(dirname "$K3_BIN")" && pwd)/$(basename "$K3_BIN")
tok=$(cd "$REL" && pwd)
model_dir=$(cd "$dir" && pwd)
printf '{"messages": [{"role": "user", "content": "hi"}]}\n' >"$work/conv.json"
printf '{"text": "hi"}\n' >"$work/corpus.jsonl"
printf '{"prompt": "hi"}\n' >"$work/batch.jsonl"

# What applies to each narrow mode besides its own flag: the spec this gate
# holds the code to (docs: README "Options", docs/TESTING.md).
tokenizer_common="--tok --quiet --verbose"
applies_render="$tokenizer_common --tokenize"
applies_detok="$tokenizer_common"
applies_tokjsonl="$tokenizer_common --prompt-special"
applies_tokenize="$tokenizer_common --prompt --prompt-file --prompt-special"
applies_tfcheck="--ids --prompt --prompt-file --prompt-special --tok --spec --draft --draft-topk
    --out --threads --max-context --quiet --verbose --preset --budget-gb --trunk-gb
    --trunk-ring --cache-gb --stream-embed --stream-lm-head --no-mem-check --trunk
    --draft-trunk --trunk-layers --cache-experts --layers --dump-cache-trace"
# Never tried as an extra option: they end the command line's meaning
# before any mode (help, version, the option list).
skip="--help --version --list-options"

opts=$("$K3" --list-options) || die "--list-options failed"
[ "$(echo "$opts" | wc -l)" -ge 50 ] || die "--list-options lists too few options: $opts"
# The options that expect a value (the parser says so when it is missing).
valued=""
for opt in $opts; do
    if "$K3" "$opt" 2>&1 | grep -q "expects a value"; then valued="$valued $opt"; fi
done

in_list() {
    for x in $2; do [ "$x" = "$1" ] && return 0; done
    return 1
}

pairs=0
refused=0
# try MODE_FLAG APPLIES: every option against the mode, after $base_args
# (which holds the mode).
try_mode() {
    mode=$1
    applies=$2
    for opt in $opts; do
        in_list "$opt" "$skip" && continue
        # The base arguments already hold these: a repeat says nothing.
        case " $base_args " in *" $opt "*) continue ;; esac
        # shellcheck disable=SC2086 # base_args: words without spaces
        set -- $base_args "$opt"
        if in_list "$opt" "$valued"; then set -- "$@" 1; fi
        rc=0
        (cd "$work" && "$K3" "$@" </dev/null >out.txt 2>err.txt) || rc=$?
        msg=$(cat "$work/err.txt")
        pairs=$((pairs + 1))
        if in_list "$opt" "$applies"; then
            case "$msg" in *"does not apply to $mode"*)
                die "$mode $opt: refused, but $opt applies to $mode: $msg" ;;
            esac
        else
            [ "$rc" -eq 2 ] || die "$mode with $opt: exit $rc, expected 2 (the option does not" \
                "apply to the mode and must not be ignored); stderr: $msg"
            # Named both ways round: "--opt does not apply to --mode", or
            # for an option that is a mode of its own which comes first
            # (--render-chat before --tokenize), the base's option named as
            # not applying to it.
            case "$msg" in *"$opt does not apply to $mode"* | *"does not apply to $opt"*) ;;
            *"$opt"*"$mode"* | *"$mode"*"$opt"*) ;;
            *) die "$mode with $opt: the message does not name both: $msg" ;;
            esac
            refused=$((refused + 1))
        fi
    done
}

base_args="--tok $tok --render-chat $work/conv.json"
try_mode --render-chat "$applies_render"
base_args="--tok $tok --detokenize 1,2,3"
try_mode --detokenize "$applies_detok"
base_args="--tok $tok --tokenize-jsonl $work/corpus.jsonl"
try_mode --tokenize-jsonl "$applies_tokjsonl"
base_args="--tok $tok --prompt hi --tokenize"
try_mode --tokenize "$applies_tokenize"
base_args="$model_dir --ids 5,9,17,5,9,17 --tf-check"
try_mode --tf-check "$applies_tfcheck"
echo "narrow modes: $pairs (mode, option) pairs tried, $refused refused naming both"

# The issue's two cases by name, and that nothing was written.
expect_exit 2 "--save-state does not apply to --tf-check" "$K3" "$model_dir" --ids 5,9,17 \
    --tf-check --save-state "$work/never.bin"
[ ! -e "$work/never.bin" ] || die "--tf-check --save-state wrote the file"
expect_exit 2 "--load-state does not apply to --tf-check" "$K3" "$model_dir" --ids 5,9,17 \
    --tf-check --load-state /nonexistent

# The wide modes' refusals: options of another mode, exit 2 naming the option.
wide() {
    what=$1
    shift
    expect_exit 2 "$what" "$K3" "$@"
}
for o in --prompt --ids --chat --load-state --save-state --recompute --dump-logits \
    --dump-prompt-logits; do
    case $o in --prompt | --ids | --load-state | --save-state | --dump-logits | \
        --dump-prompt-logits) v=1 ;; *) v= ;; esac
    wide "$o" "$model_dir" --batch-file "$work/batch.jsonl" $o $v
done
for o in --ids --prompt --dump-logits --dump-prompt-logits --recompute --batch-file; do
    case $o in --recompute) v= ;; *) v=1 ;; esac
    wide "$o" "$model_dir" --chat $o $v
done
for o in --system --history --no-thinking --effort --show-thinking --no-reuse; do
    case $o in --system | --history | --effort) v=1 ;; *) v= ;; esac
    wide "$o" "$model_dir" --ids 5,9,17 $o $v
done
# --draft dspark reads hidden states kept from a state's first position:
# a generation run only, for now (src/cli/options.c check_combinations).
for mode in --chat "--batch-file $work/batch.jsonl" "--load-state $work/none.bin"; do
    # shellcheck disable=SC2086 # $mode is an option and its value
    wide "--draft dspark drafts for a generation run only" "$model_dir" $mode --spec 2 \
        --draft dspark --draft-model "$work"
done
wide "--draft-model goes with --draft dspark" "$model_dir" --ids 5,9,17 --draft-model "$work"
wide "--draft dspark needs --draft-model" "$model_dir" --ids 5,9,17 --draft dspark
echo "wide modes: the other modes' options refused naming them"
echo "PASS"
