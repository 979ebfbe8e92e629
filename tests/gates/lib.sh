# lib.sh - shared by the gate scripts (sourced, POSIX sh).
# Environment from tests/run.sh: K3_BIN, K3_BUILD, K3_MODELS, PYTHON.
set -eu

die() {
    echo "FAIL: $*" >&2
    exit 1
}

# model NAME PRESET [maker args...] or model NAME --random-shape SEED:
# makes $K3_MODELS/NAME with the
# checkpoint maker unless an identical one (same maker, same arguments) is
# already there. Prints the directory.
model() {
    name=$1
    preset=$2
    shift 2
    dir="$K3_MODELS/$name"
    stamp=$(cat tools/make_checkpoint.py | cksum | cut -d' ' -f1)-$preset-$*
    if [ ! -f "$dir/.stamp" ] || [ "$(cat "$dir/.stamp")" != "$stamp" ]; then
        rm -rf "$dir"
        case "$preset" in
        --random-shape) "$PYTHON" tools/make_checkpoint.py "$dir" --random-shape "$@" >&2 ;;
        *) "$PYTHON" tools/make_checkpoint.py "$dir" --preset "$preset" "$@" >&2 ;;
        esac
        echo "$stamp" >"$dir/.stamp"
    fi
    echo "$dir"
}

# drafter NAME TARGET_DIR [make_dspark args...]: a random DSpark drafter for
# the target (tools/make_dspark.py), made unless an identical one (same
# maker and reference, same arguments) is already there. Prints the directory.
drafter() {
    name=$1
    target=$2
    shift 2
    dir="$K3_MODELS/$name"
    stamp=$(cat tools/make_dspark.py tools/dspark_ref.py | cksum | cut -d' ' -f1)-$target-$*
    if [ ! -f "$dir/.stamp" ] || [ "$(cat "$dir/.stamp")" != "$stamp" ]; then
        rm -rf "$dir"
        "$PYTHON" tools/make_dspark.py "$dir" --target "$target" "$@" >&2
        echo "$stamp" >"$dir/.stamp"
    fi
    echo "$dir"
}

# vocab_of DIR: the model's vocab_size.
vocab_of() {
    "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json")); print(c.get("text_config",c)["vocab_size"])' "$1"
}

# prompt_ids VOCAB N: N deterministic ids spread over the ordinary vocabulary.
prompt_ids() {
    "$PYTHON" -c 'import sys; v,n=int(sys.argv[1]),int(sys.argv[2]); print(",".join(str((i*7919+13)%(v-256)) for i in range(n)))' "$1" "$2"
}

# expect_exit CODE PATTERN CMD...: CMD must exit with CODE and print a
# message on stderr matching PATTERN (grep -E).
expect_exit() {
    want=$1
    pat=$2
    shift 2
    set +e
    "$@" >"$K3_BUILD/expect.out" 2>"$K3_BUILD/expect.err"
    got=$?
    set -e
    if [ "$got" -ne "$want" ] || ! grep -Eq -- "$pat" "$K3_BUILD/expect.err"; then
        echo "command: $*" >&2
        echo "wanted exit $want and stderr matching /$pat/; got exit $got:" >&2
        cat "$K3_BUILD/expect.err" >&2
        return 1
    fi
    echo "ok ($got): $(head -c 200 "$K3_BUILD/expect.err")"
}

# Bit-identity runs (gates 28, 30, 61): set dir (the model), ids (the
# prompt) and work (a directory) first; every run generates 10 ids.
# bits_run NAME ARGS...: one run; ids to $work/NAME.ids, logits to
# NAME.f32, the --out report to NAME.json; dies (showing stderr) if it fails.
bits_run() {
    name=$1
    shift
    "$K3_BIN" "$dir" --ids "$ids" --gen 10 --ignore-eos --dump-logits "$work/$name.f32" \
        --out "$work/$name.json" "$@" >"$work/$name.ids" 2>"$work/$name.err" ||
        { cat "$work/$name.err"; die "$name: exit $?"; }
}
# bits_same NAME: ids and logits identical to the run named "all".
bits_same() {
    cmp -s "$work/all.ids" "$work/$1.ids" || die "$1: ids differ: $(cat "$work/$1.ids")"
    cmp -s "$work/all.f32" "$work/$1.f32" || die "$1: logits differ in some bit"
}
# report_field NAME KEY: a field of run NAME's report (KEY dotted: plan.pinned_layers).
report_field() {
    "$PYTHON" -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$work/$1.json" "$2"
}
