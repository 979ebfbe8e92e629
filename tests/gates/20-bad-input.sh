# 20-bad-input: broken checkpoints, configs and arguments each get exit 2
# (exit 4 for corruption only visible when an expert is read) and a one-line
# message that names the file, tensor or field at fault -- never a crash,
# never a run on a guess.
. tests/gates/lib.sh
good=$(model tiny-a tiny-a)
work="$K3_BUILD/bad-input"
mkdir -p "$work"
n=0
check() { # CASE PATTERN
    "$PYTHON" tests/gates/corrupt.py "$1" "$good" "$work/$1"
    printf '%-26s ' "$1"
    expect_exit 2 "$2" "$K3_BIN" "$work/$1" --ids 1,2,3 --gen 2
    n=$((n + 1))
}
check missing-shard            'model-00002-of-000003.safetensors: cannot open: No such file'
check truncated-shard          'model-00003-of-000003.safetensors: truncated'
check offsets-past-end         'input_layernorm.weight ends at data byte'
check overlap                  'overlap'
check wrong-dtype              'post_attention_layernorm.weight is F16 .* config implies BF16'
check wrong-shape              'mlp.down_proj.weight is BF16 \[96,64\] but the config implies BF16 \[64,96\]'
check missing-tensor           'missing tensor language_model.model.layers.2.self_attention_res_proj.weight'
check duplicate-tensor         'tensor .*layernorm.weight appears in two shards \(.*model-0000[13]-of-000003.safetensors and .*model-0000[13]-of-000003.safetensors\)'
check index-missing-shard      'model-00009-of-000009.safetensors: cannot open: No such file'
check index-wrong-shard        'index puts tensor .* in .*model-00001-of-000003.safetensors but it is in'
check header-not-json          'model-00001-of-000003.safetensors: header is not valid JSON: byte [0-9]+'
check header-too-long          'header length 1099511627776 exceeds'
check config-missing-fields    'config.json: missing required fields: hidden_size, rms_norm_eps'
check config-layer-out-of-range 'kda_layers \(a layer index outside'
check config-not-json          'config.json: not valid JSON'
# Corruption inside an expert is found when the expert is read, mid-run:
# exit 4 (run invalid), naming the tensor; no id is printed.
"$PYTHON" tests/gates/corrupt.py nan-scale "$good" "$work/nan-scale"
printf '%-26s ' nan-scale
expect_exit 4 'RUN INVALID.*layers\.1\.block_sparse_moe\.experts\.[0-9]+\.w2\.weight_scale.*255' \
    "$K3_BIN" "$work/nan-scale" --ids 1,2,3 --gen 2
[ ! -s "$K3_BUILD/expect.out" ] || die "nan-scale: ids were printed after the failure"
# Arguments.
printf '%-26s ' id-out-of-range; expect_exit 2 'token id 512 is outside the vocabulary' "$K3_BIN" "$good" --ids 1,512
printf '%-26s ' ids-malformed;   expect_exit 2 'entry 2 "" is not a token id' "$K3_BIN" "$good" --ids 1,,2
printf '%-26s ' ids-negative;    expect_exit 2 'entry 1 "-1" is not a token id' "$K3_BIN" "$good" --ids -1
printf '%-26s ' no-model-dir;    expect_exit 2 'no such|cannot open|does not exist' "$K3_BIN" "$work/nonexistent" --ids 1
printf '%-26s ' unknown-option;  expect_exit 2 'unknown option --frobnicate' "$K3_BIN" "$good" --frobnicate
printf '%-26s ' bad-gen;         expect_exit 2 '--gen expects an integer' "$K3_BIN" "$good" --ids 1 --gen x
printf '%-26s ' layers-too-many; expect_exit 2 '--layers 9: the model has 6 layers' "$K3_BIN" "$good" --ids 1 --layers 9
echo "$((n + 8)) bad inputs refused with exit 2 and a message naming the culprit"
# Config integers whose products wrap 64 bits, so that the wrapped shapes
# equal tiny-a's real tensors (heads x head widths, moe_intermediate x
# shared experts) or the bank count overflows: each is refused, naming the
# field, before any tensor is bound (they crashed, or ran on with the shared
# experts skipped, before every integer field had a limit).
wrap() { # FIELD VALUE
    rm -rf "$work/wrap-$1"
    cp -R "$good" "$work/wrap-$1"
    "$PYTHON" - "$work/wrap-$1/config.json" "$1" "$2" <<'EOF_WRAP'
import json, sys
path, field, value = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = json.load(open(path))
c["text_config"][field] = value
json.dump(c, open(path, "w"), indent=1)
EOF_WRAP
    printf '%-26s ' "wrap-$1"
    expect_exit 2 "config.json: $1 \($2 is over the limit [0-9]+\)" \
        "$K3_BIN" "$work/wrap-$1" --ids 1,2,3 --gen 2
    [ ! -s "$K3_BUILD/expect.out" ] || die "wrap-$1: ids were printed"
}
wrap num_attention_heads 2305843009213693956
wrap v_head_dim 4611686018427387920
wrap num_shared_experts 4611686018427387904
wrap attn_res_block_size 9223372036854775807
echo "4 wrapping config integers refused with exit 2 naming the field"
