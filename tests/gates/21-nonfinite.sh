# 21-nonfinite: a NaN or an infinity in a small tensor read at load (norms,
# the router's e_score_correction_bias, KDA's conv taps, A_log, dt_bias) is
# refused with exit 2 and a message naming the shard, the tensor and the
# element, before any token is computed. Fails if one of them is accepted (a
# NaN router bias silently removes its expert from every choice: exit 0 with
# other tokens), reaches the logits instead (exit 4), or is not named.
. tests/gates/lib.sh
good=$(model tiny-a tiny-a)
work="$K3_BUILD/nonfinite"
rm -rf "$work"
mkdir -p "$work"
n=0
# poison CASE TENSOR INDEX VALUE WORD: a copy of tiny-a whose TENSOR has
# VALUE (nan, inf, -inf) at element INDEX; the run must be refused naming
# it, with WORD (NaN or infinite).
poison() {
    rm -rf "$work/$1"
    cp -R "$good" "$work/$1"
    "$PYTHON" - "$work/$1" "$2" "$3" "$4" <<'EOF' || die "$1: could not write the value"
import json, struct, sys
d, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
path = d + "/" + json.load(open(d + "/model.safetensors.index.json"))["weight_map"][name]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
t = json.loads(raw[8:8 + n])[name]
at = 8 + n + t["data_offsets"][0]
if t["dtype"] == "F32":
    raw[at + 4 * index:at + 4 * index + 4] = struct.pack("<f", value)
elif t["dtype"] == "BF16":
    raw[at + 2 * index:at + 2 * index + 2] = struct.pack("<f", value)[2:]
else:
    sys.exit("unexpected dtype " + t["dtype"])
open(path, "wb").write(raw)
EOF
    shard=$("$PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["weight_map"][sys.argv[2]])' \
        "$work/$1/model.safetensors.index.json" "$2")
    printf '%-22s ' "$1"
    expect_exit 2 "$shard: tensor $2: element $3 is $5" \
        "$K3_BIN" "$work/$1" --ids 1,2,3 --gen 2
    [ ! -s "$K3_BUILD/expect.out" ] || die "$1: ids were printed"
    n=$((n + 1))
}
L=language_model.model
poison router-bias-nan  $L.layers.1.block_sparse_moe.gate.e_score_correction_bias 3 nan NaN
poison input-norm-inf   $L.layers.2.input_layernorm.weight 0 inf infinite
poison final-norm-nan   $L.norm.weight 63 nan NaN
poison kv-norm-inf      $L.layers.2.self_attn.kv_a_layernorm.weight 5 -inf infinite
poison latent-norm-nan  $L.layers.3.block_sparse_moe.routed_expert_norm.weight 1 nan NaN
poison res-proj-inf     $L.layers.4.mlp_res_proj.weight 7 inf infinite
poison conv-tap-inf     $L.layers.0.self_attn.k_conv1d.weight 9 -inf infinite
poison a-log-nan        $L.layers.0.self_attn.A_log 2 nan NaN
poison dt-bias-nan      $L.layers.1.self_attn.dt_bias 17 nan NaN
poison o-norm-inf       $L.layers.4.self_attn.o_norm.weight 0 inf infinite
echo "$n non-finite small tensors refused with exit 2, naming shard, tensor and element"
