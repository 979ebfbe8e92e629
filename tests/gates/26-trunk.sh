#!/bin/sh
# 26-trunk.sh - the packed trunk: k3 pack-trunk and k3 --trunk.
#  - packing tiny-a and moe64 copies every run byte for byte (checked by
#    trunk_check.py, which reads the shards itself) and a rerun does nothing;
#  - generation from the trunk, pinned or everything streamed through one
#    slot (or two, with the reader thread), gives the same ids and
#    bit-identical logits as from the shards, on the default reader
#    (io_uring where the kernel gives one) and on threads (K3_IO=threads);
#  - another model's trunk, or one packed before config.json was edited, is
#    refused (exit 2, naming what differs); a run the trunk lacks (packed
#    with --layers) is refused too;
#  - a flipped byte in trunk.bin is caught by the run's checksum (exit 4,
#    RUN INVALID, no token printed), under either reader; the --verbose
#    report names the reader; a bad K3_IO or K3_IO_DEPTH is exit 2;
#  - a pack killed midway leaves no trunk.json claiming completeness (and a
#    killed repack leaves the previous trunk intact); the next pack finishes
#    and removes the killed one's temporary files;
#  - another checkpoint of the same config (same config.json and tensor
#    table, other weights) is refused by the runs' source fingerprints
#    (exit 2) and repacked by pack-trunk; --verify compares every byte with
#    the model, so it finds what the sampled fingerprint cannot; a version 1
#    trunk is refused with a hint to repack;
#  - a pack that fails (file size limit, full tmpfs) leaves no temporary
#    file and no partial trunk, and a failed repack keeps the old trunk;
#  - a compressed trunk (pack-trunk --compress, format 3 codec
#    bf16-huffman) decodes (trunk_check.py, its own decoder) to the same
#    runs and gives bit-identical logits pinned and streamed through one or
#    two slots; a plain pack over it (or a compressed one over a plain
#    trunk) repacks; a format 2 trunk (XXH64 checksums) is still read,
#    bit-identical, and its flipped byte still caught; its lying block
#    table, a flipped byte in a compressed block, a block that does not
#    decode and a truncated trunk.bin: exit 4 at read time (2 at open
#    when the size shows it), no token.
. tests/gates/lib.sh

T="$K3_BUILD/gate-trunk"
rm -rf "$T"
mkdir -p "$T"
A=$(model tiny-a tiny-a)
B=$(model moe64 moe64)

inode() { ls -i "$1" | cut -d' ' -f1; }

# gen DIR OUT [options...]: 6 tokens from a fixed prompt; ids to OUT.ids,
# logits to OUT.logits.
gen() {
    dir=$1
    out=$2
    shift 2
    ids=$(prompt_ids "$(vocab_of "$dir")" 12)
    "$K3_BIN" "$dir" --ids "$ids" --gen 6 --ignore-eos --quiet --dump-logits "$out.logits" "$@" \
        >"$out.ids" || die "generation failed: $K3_BIN $dir $*"
}

for m in "a:$A" "b:$B"; do
    name=${m%%:*}
    dir=${m#*:}
    trunk="$T/$name"
    "$K3_BIN" pack-trunk "$dir" "$trunk" 2>"$T/pack.err" || { cat "$T/pack.err"; die "pack $name"; }
    grep -q "packed" "$T/pack.err" || die "pack $name printed no summary"
    "$PYTHON" tests/gates/trunk_check.py "$dir" "$trunk" || die "trunk.bin of $name is not the model's runs"
    node=$(inode "$trunk/trunk.bin")
    "$K3_BIN" pack-trunk "$dir" "$trunk" 2>"$T/repack.err" || die "rerun of pack $name failed"
    grep -q "is up to date" "$T/repack.err" || die "rerun of pack $name did not see the trunk is up to date"
    [ "$(inode "$trunk/trunk.bin")" = "$node" ] || die "rerun of pack $name rewrote trunk.bin"
    "$K3_BIN" pack-trunk "$dir" "$trunk" --verify 2>/dev/null || die "pack $name --verify failed"

    "$K3_BIN" pack-trunk "$dir" "$trunk-c" --compress 2>"$T/pack.err" ||
        { cat "$T/pack.err"; die "pack $name --compress"; }
    grep -q "compressed: .* fewer bytes to read" "$T/pack.err" || die "pack $name --compress: no ratio"
    "$PYTHON" tests/gates/trunk_check.py "$dir" "$trunk-c" | grep -q "bf16-huffman" ||
        die "the compressed trunk.bin of $name does not decode to the model's runs"
    "$K3_BIN" pack-trunk "$dir" "$trunk-c" --compress 2>"$T/repack.err" || die "rerun of pack $name --compress"
    grep -q "is up to date" "$T/repack.err" || die "rerun of pack $name --compress was not a no-op"
    "$K3_BIN" pack-trunk "$dir" "$trunk-c" --compress --verify 2>/dev/null ||
        die "pack $name --compress --verify failed"

    gen "$dir" "$T/$name-shards"
    for t in "$trunk" "$trunk-c"; do
        for opts in "" "--trunk-layers 0 --trunk-ring 1" "--trunk-layers 1 --trunk-ring 2 --stream-lm-head" \
            "io=threads --trunk-layers 0 --trunk-ring 2 --stream-lm-head"; do
            # io=threads: the reader thread in place of the default (io_uring
            # where the kernel gives one), io/read_queue.h
            io=""
            case $opts in io=*) io=${opts%% *} opts=${opts#* } io=${io#io=} ;; esac
            # shellcheck disable=SC2086
            K3_IO=$io gen "$dir" "$T/$name-trunk" --trunk "$t" $opts
            cmp -s "$T/$name-shards.ids" "$T/$name-trunk.ids" || die "$name --trunk $t $opts: other ids"
            cmp -s "$T/$name-shards.logits" "$T/$name-trunk.logits" ||
                die "$name --trunk $t $opts ${io:+(K3_IO=$io)}: logits not bit-identical"
        done
    done
    echo "ok: $name packed plain and compressed, reruns no-ops, --trunk bit-identical ($(cat "$T/$name-shards.ids"))"
done

ids=$(prompt_ids "$(vocab_of "$A")" 4)
expect_exit 2 "stale or another model's: config.json differs" \
    "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/b"

# An edit that changes no tensor (eps) is exactly what only the config hash sees.
cp -R "$A" "$T/a-edited"
"$PYTHON" -c 'import json,sys; p=sys.argv[1]+"/config.json"; c=json.load(open(p)); c["text_config"]["rms_norm_eps"]=2e-5; json.dump(c,open(p,"w"),indent=2)' "$T/a-edited"
expect_exit 2 "config.json differs" "$K3_BIN" "$T/a-edited" --ids "$ids" --gen 2 --trunk "$T/a"
expect_exit 2 "no trunk.json" "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/nothing-here"

"$K3_BIN" pack-trunk "$A" "$T/a3" --layers 3 --quiet || die "pack --layers 3"
gen "$A" "$T/a3-shards" --layers 3
gen "$A" "$T/a3-trunk" --layers 3 --trunk "$T/a3" --trunk-layers 0 --trunk-ring 1
cmp -s "$T/a3-shards.logits" "$T/a3-trunk.logits" || die "--layers 3 trunk: logits differ"
expect_exit 2 "no run \"layer 3\"" "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/a3"

# A flipped byte inside layer 3's first tensor.
cp -R "$T/a" "$T/a-flipped"
"$PYTHON" -c '
import json, sys
d = sys.argv[1]
run = [r for r in json.load(open(d + "/trunk.json"))["runs"] if r["name"] == "layer 3"][0]
at = run["offset"] + run["tensors"][0]["offset"] + 5
with open(d + "/trunk.bin", "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x10]))
' "$T/a-flipped"
for io in threads uring; do
    for opts in "" "--trunk-layers 0 --trunk-ring 1" "--trunk-layers 2 --trunk-ring 2"; do
        # shellcheck disable=SC2086
        expect_exit 4 "RUN INVALID: layer 3 of trunk.bin fails its checksum" \
            env K3_IO=$io "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-flipped" $opts
        [ ! -s "$K3_BUILD/expect.out" ] || die "tokens were printed from a corrupt trunk ($opts)"
    done
done
# Which reader the default is here, and that K3_IO=threads is obeyed.
for io in "" threads; do
    K3_IO=$io "$K3_BIN" "$A" --ids "$ids" --gen 1 --trunk "$T/a" --trunk-layers 0 --verbose \
        2>"$T/io.err" >/dev/null || die "verbose run"
    grep '^io: the ' "$T/io.err" || die "the report names no reader"
done
grep -q '^io: the threads reader$' "$T/io.err" || die "K3_IO=threads: $(grep '^io:' "$T/io.err")"
expect_exit 2 "K3_IO=fast: expected uring or threads" env K3_IO=fast "$K3_BIN" "$A" --ids "$ids"
expect_exit 2 "K3_IO_DEPTH=0: expected" env K3_IO_DEPTH=0 "$K3_BIN" "$A" --ids "$ids"
expect_exit 1 "damaged" "$K3_BIN" pack-trunk "$A" "$T/a-flipped" --verify

# Interrupted packs (the test hook kills the packer after N runs).
if K3_PACK_TEST_KILL_AFTER=3 "$K3_BIN" pack-trunk "$A" "$T/a-killed" 2>/dev/null; then
    die "the kill hook did not kill the packer"
fi
[ ! -e "$T/a-killed/trunk.json" ] || die "a killed pack left a trunk.json"
[ ! -e "$T/a-killed/trunk.bin" ] || die "a killed pack left a trunk.bin"
expect_exit 2 "no trunk.json" "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/a-killed"
"$K3_BIN" pack-trunk "$A" "$T/a-killed" --quiet || die "pack after a killed pack"
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/a-killed" >/dev/null || die "pack after a killed pack is wrong"

node=$(inode "$T/a/trunk.bin")
if K3_PACK_TEST_KILL_AFTER=8 "$K3_BIN" pack-trunk "$A" "$T/a" --force 2>/dev/null; then
    die "the kill hook did not kill the repack"
fi
[ "$(inode "$T/a/trunk.bin")" = "$node" ] || die "a killed repack replaced trunk.bin"
gen "$A" "$T/a-after-kill" --trunk "$T/a"
cmp -s "$T/a-shards.logits" "$T/a-after-kill.logits" || die "the trunk changed under a killed repack"
"$K3_BIN" pack-trunk "$A" "$T/a" 2>"$T/repack.err" || die "pack after a killed repack"
grep -q "removed the leftovers" "$T/repack.err" || die "the killed repack's trunk.bin.tmp stayed"
echo "ok: killed packs leave no false trunk.json"

# Another checkpoint of the same config (another seed): the config hash and
# the tensor table are equal, only the weights differ. The runs' source
# fingerprints bind a trunk to the weights it was packed from:
#  - the engine refuses it (exit 2, naming the trunk, the model and a run)
#    instead of computing with the other checkpoint's trunk;
#  - pack-trunk sees it is stale and repacks (never "up to date"), and
#    --verify on it does too, ending with a trunk of this model's bytes;
#  - what sampling cannot see (a byte in the middle of a tensor) is found by
#    --verify, which compares every byte of trunk.bin with the model.
A1=$(model tiny-a-seed1 tiny-a --seed 1)
"$K3_BIN" pack-trunk "$A1" "$T/s1" --quiet || die "pack tiny-a --seed 1"
cp -R "$T/s1" "$T/s1-verify"
# 16 runs: 6 layers, layer 0's MLP matrices (3), lm_head's 6 row blocks, the embedding.
other="it was packed from other weights than $A's: 16 of 16 runs differ, the first \"layer 0\""
expect_exit 2 "--trunk $T/s1 is stale or another model's: $other" \
    "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/s1"
[ ! -s "$K3_BUILD/expect.out" ] || die "tokens were printed from another checkpoint's trunk"
"$K3_BIN" pack-trunk "$A" "$T/s1" 2>"$T/repack.err" || die "pack over another checkpoint's trunk"
! grep -q "up to date" "$T/repack.err" || die "another checkpoint's trunk was taken as up to date"
grep -q "packed from other weights" "$T/repack.err" || die "the repack did not say why"
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/s1" >/dev/null ||
    die "the repacked trunk is not tiny-a's"
gen "$A" "$T/s1-trunk" --trunk "$T/s1"
cmp -s "$T/a-shards.logits" "$T/s1-trunk.logits" || die "the repacked trunk: logits differ"
"$K3_BIN" pack-trunk "$A" "$T/s1-verify" --verify 2>"$T/repack.err" ||
    die "pack --verify over another checkpoint's trunk"
! grep -q "up to date" "$T/repack.err" ||
    die "--verify took another checkpoint's trunk as up to date"
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/s1-verify" >/dev/null ||
    die "pack --verify left another checkpoint's trunk"

cp -R "$A" "$T/a-middle"
"$PYTHON" - "$T/a-middle" "$T/a" <<'EOF_MID' || die "could not change a middle byte"
import json, struct, sys
d, t = sys.argv[1], sys.argv[2]
run = [r for r in json.load(open(t + "/trunk.json"))["runs"] if r["name"] == "layer 2"][0]
name = run["tensors"][0]["name"]  # not the run's last tensor: only its head is sampled
path = d + "/" + json.load(open(d + "/model.safetensors.index.json"))["weight_map"][name]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    b, e = json.loads(f.read(n))[name]["data_offsets"]
    assert e - b >= 3 * 256, "the tensor is too small to have an unsampled middle"
    at = 8 + n + (b + e) // 2
    f.seek(at); x = f.read(1); f.seek(at); f.write(bytes([x[0] ^ 0x10]))
EOF_MID
"$K3_BIN" pack-trunk "$T/a-middle" "$T/a" 2>&1 | grep -q "is up to date" ||
    die "a middle byte changed the sampled fingerprint: the gate no longer tests --verify"
at="at byte [0-9]+ of tensor language_model.model.layers.2.self_attn"
expect_exit 1 "run \"layer 2\" differs from the model's tensors $at" \
    "$K3_BIN" pack-trunk "$T/a-middle" "$T/a" --verify
echo "ok: another checkpoint's trunk refused (exit 2) and repacked; --verify compares every byte"

# An older trunk format: a clear refusal telling the user to repack, and
# pack-trunk repacks it.
cp -R "$T/a" "$T/a-v1"
"$PYTHON" -c '
import json, sys
p = sys.argv[1] + "/trunk.json"
m = json.load(open(p))
m["version"] = 1
for r in m["runs"]:
    del r["source"]
json.dump(m, open(p, "w"))
' "$T/a-v1"
expect_exit 2 "format version 1, but this k3 reads versions 2 to 4: repack it" \
    "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/a-v1"
"$K3_BIN" pack-trunk "$A" "$T/a-v1" --quiet || die "pack over a version 1 trunk"
gen "$A" "$T/a-v1-trunk" --trunk "$T/a-v1"
echo "ok: a version 1 trunk is refused with a repack hint, and repacked"

# Format 3 (the runs whole: what k3 packed before runs were cut into
# sub-runs, model/weights.h) is still read, bit-identically, streamed
# through one slot or two, and repacked to format 4. K3_SUBRUNS=0 binds
# (and so packs) the runs whole.
K3_SUBRUNS=0 "$K3_BIN" pack-trunk "$A" "$T/a-v3" --quiet || die "pack a whole-run trunk"
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/a-v3" | grep -q "format 3" || die "the whole-run trunk is not format 3"
grep -q '"layer 0/gate"' "$T/a/trunk.json" || die "the format 4 trunk does not cut layer 0"
grep -q '"lm_head/1"' "$T/a/trunk.json" || die "the format 4 trunk does not cut lm_head"
! grep -q '"lm_head/1"' "$T/a-v3/trunk.json" || die "the format 3 trunk cuts lm_head"
for opts in "--trunk-layers 0 --trunk-ring 1 --stream-lm-head" "--trunk-layers 0 --trunk-ring 2"; do
    # shellcheck disable=SC2086
    gen "$A" "$T/a-v3-trunk" --trunk "$T/a-v3" $opts
    cmp -s "$T/a-shards.logits" "$T/a-v3-trunk.logits" || die "version 3 trunk ($opts): logits differ"
done
cp -R "$T/a-v3" "$T/a-v3b"
"$K3_BIN" pack-trunk "$A" "$T/a-v3b" 2>"$T/repack.err" || die "pack over a version 3 trunk"
grep -q "older format (version 3)" "$T/repack.err" || die "a version 3 trunk was not repacked"
grep -q '"version": 4' "$T/a-v3b/trunk.json" || die "a version 3 trunk was not repacked to 4"
echo "ok: a version 3 trunk (whole runs) is read bit-identically, and repacked to version 4"

# Format 2 (XXH64 of each run image, no codec) is still read: made here
# from the whole-run format-3 trunk with trunk_check.py's own XXH64.
cp -R "$T/a-v3" "$T/a-v2"
"$PYTHON" - "$T/a-v2" <<'EOF_V2' || die "could not make a version 2 trunk"
import json, sys
sys.path.insert(0, "tests/gates")
from trunk_check import xxh64
d = sys.argv[1]
m = json.load(open(d + "/trunk.json"))
data = open(d + "/trunk.bin", "rb").read()
m["version"], m["checksum"] = 2, "xxh64"
del m["codec"]
for r in m["runs"]:
    del r["stored"]
    r["checksum"] = "%016x" % xxh64(data[r["offset"]:r["offset"] + r["length"]])
json.dump(m, open(d + "/trunk.json", "w"))
EOF_V2
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/a-v2" | grep -q "format 2" || die "the version 2 trunk is not one"
gen "$A" "$T/a-v2-trunk" --trunk "$T/a-v2" --trunk-layers 0 --trunk-ring 1
cmp -s "$T/a-shards.logits" "$T/a-v2-trunk.logits" || die "version 2 trunk: logits differ"
"$PYTHON" -c '
import json, sys
d = sys.argv[1]
run = [r for r in json.load(open(d + "/trunk.json"))["runs"] if r["name"] == "layer 3"][0]
at = run["offset"] + run["tensors"][0]["offset"] + 5
with open(d + "/trunk.bin", "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x10]))
' "$T/a-v2"
expect_exit 4 "RUN INVALID: layer 3 of trunk.bin fails its checksum .*xxh64" \
    "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-v2" --trunk-layers 0 --trunk-ring 1
"$K3_BIN" pack-trunk "$A" "$T/a-v2" 2>"$T/repack.err" || die "pack over a version 2 trunk"
grep -q "older format" "$T/repack.err" || die "a version 2 trunk was not repacked"
"$K3_BIN" pack-trunk "$A" "$T/a-c" 2>"$T/repack.err" || die "plain pack over a compressed trunk"
grep -q "it is compressed and --compress was not given" "$T/repack.err" ||
    die "a plain pack over a compressed trunk did not repack"
"$K3_BIN" pack-trunk "$A" "$T/a-c" --compress --quiet || die "pack --compress over a plain trunk"
echo "ok: a version 2 trunk is read bit-identically and checked, and repacked to version 4"

# A compressed trunk that lies. corrupt.py-like edits of layer 3's stored
# form (its blocks, then the block table of K u32 at its end):
#  flip     a sign+mantissa byte of the first block: it decodes, to other
#           bytes, and the block hash fails (checksum);
#  swap     the first two table entries moved by one byte each way (the sum
#           holds): blocks are cut at the wrong place and do not decode;
#  table    the first entry one larger: the table no longer sums;
#  lengths  the code lengths of exponents 124 and 125 zeroed: not a
#           complete code;
#  cut      trunk.bin truncated inside layer 3: refused at open (exit 2,
#           its size), and with trunk.json's file_size edited to match
#           (the run then ends past it): refused at open too.
for lie in flip swap table lengths; do
    rm -rf "$T/a-lie"
    cp -R "$T/a-c" "$T/a-lie"
    "$PYTHON" - "$T/a-lie" "$lie" <<'EOF_LIE' || die "could not make the $lie lie"
import json, struct, sys
d, lie = sys.argv[1], sys.argv[2]
run = [r for r in json.load(open(d + "/trunk.json"))["runs"] if r["name"] == "layer 3"][0]
nb = (run["length"] + 65535) // 65536
tab = run["offset"] + run["stored"] - 4 * nb
with open(d + "/trunk.bin", "r+b") as f:
    f.seek(run["offset"]); head = f.read(200)
    f.seek(tab); t = list(struct.unpack(f"<{nb}I", f.read(4 * nb)))
    assert head[0] == 1, "layer 3's first block is not huffman-coded"
    if lie == "flip":
        f.seek(run["offset"] + 135); f.write(bytes([head[135] ^ 0x01]))
    elif lie == "lengths":
        assert head[63] != 0, "exponents 124 and 125 unused"
        f.seek(run["offset"] + 1 + 62); f.write(bytes([0]))  # their codes gone
    else:
        assert nb >= 2, "layer 3 has one block"
        t[0] += 1
        if lie == "swap":
            t[1] -= 1
        f.seek(tab); f.write(struct.pack(f"<{nb}I", *t))
EOF_LIE
    case $lie in
    flip) why="RUN INVALID: layer 3 of trunk.bin fails its checksum .*xxh3 blocks" ;;
    table) why="RUN INVALID: layer 3 of trunk.bin: the block table lies" ;;
    lengths) why="RUN INVALID: layer 3 of trunk.bin: block 0 of [0-9]+ does not decode: the code lengths" ;;
    *) why="RUN INVALID: layer 3 of trunk.bin: block [0-9]+ of [0-9]+ does not decode" ;;
    esac
    for opts in "" "--trunk-layers 0 --trunk-ring 1"; do
        # shellcheck disable=SC2086
        expect_exit 4 "$why" "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-lie" $opts
        [ ! -s "$K3_BUILD/expect.out" ] || die "tokens were printed from a lying trunk ($lie $opts)"
    done
    expect_exit 1 "damaged" "$K3_BIN" pack-trunk "$A" "$T/a-lie" --compress --verify
done
# The nibble blocks of --compress-fast (io/codec.h): repacking across
# codecs, and two lies in layer 3's first block: a flipped sign+mantissa
# byte (decodes, fails its checksum) and a nibble turned into an escape or
# out of one (the escape bytes no longer match: does not decode).
"$K3_BIN" pack-trunk "$A" "$T/a-c" --compress-fast 2>"$T/repack.err" ||
    die "pack --compress-fast over a --compress trunk"
grep -q "compressed with the other codec" "$T/repack.err" ||
    die "a --compress-fast pack over a --compress trunk did not repack"
grep -q '"codec": "bf16-nibble"' "$T/a-c/trunk.json" || die "--compress-fast: codec not bf16-nibble"
"$PYTHON" tests/gates/trunk_check.py "$A" "$T/a-c" >/dev/null ||
    die "the --compress-fast trunk.bin does not decode to the model's runs"
for lie in nflip nescape; do
    rm -rf "$T/a-lie"
    cp -R "$T/a-c" "$T/a-lie"
    "$PYTHON" - "$T/a-lie" "$lie" <<'EOF_NIB' || die "could not make the $lie lie"
import json, sys
d, lie = sys.argv[1], sys.argv[2]
run = [r for r in json.load(open(d + "/trunk.json"))["runs"] if r["name"] == "layer 3"][0]
words = min(run["length"], 65536) // 2
with open(d + "/trunk.bin", "r+b") as f:
    f.seek(run["offset"]); head = f.read(16 + words + 1)
    assert head[0] == 2, "layer 3's first block is not in nibbles"
    at = 16 if lie == "nflip" else 16 + words
    b = head[at] ^ 0x01 if lie == "nflip" else (head[at] & 0xF0) | (0 if head[at] & 15 == 15 else 15)
    f.seek(run["offset"] + at); f.write(bytes([b]))
EOF_NIB
    why="RUN INVALID: layer 3 of trunk.bin: block 0 of [0-9]+ does not decode: a nibble block has more"
    [ "$lie" = nflip ] && why="RUN INVALID: layer 3 of trunk.bin fails its checksum .*xxh3 blocks"
    for opts in "" "--trunk-layers 0 --trunk-ring 1"; do
        # shellcheck disable=SC2086
        expect_exit 4 "$why" "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-lie" $opts
        [ ! -s "$K3_BUILD/expect.out" ] || die "tokens were printed from a lying trunk ($lie $opts)"
    done
done
"$K3_BIN" pack-trunk "$A" "$T/a-c" --compress --quiet || die "pack --compress over a nibble trunk"
rm -rf "$T/a-lie"
cp -R "$T/a-c" "$T/a-lie"
"$PYTHON" - "$T/a-lie" <<'EOF_CUT' || die "could not cut trunk.bin"
import json, os, sys
d = sys.argv[1]
run = [r for r in json.load(open(d + "/trunk.json"))["runs"] if r["name"] == "layer 3"][0]
os.truncate(d + "/trunk.bin", run["offset"] + 4096)
EOF_CUT
expect_exit 2 "trunk.bin is [0-9]+ bytes but trunk.json says" \
    "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-lie"
"$PYTHON" -c '
import json, os, sys
p = sys.argv[1] + "/trunk.json"
m = json.load(open(p)); m["file_size"] = os.path.getsize(sys.argv[1] + "/trunk.bin")
json.dump(m, open(p, "w"))' "$T/a-lie"
expect_exit 2 "\"layer 3\" at [0-9]+ .* ends past file_size" \
    "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-lie"
echo "ok: a compressed trunk (huffman or nibble blocks) whose blocks, block table or size lie is refused (exit 4 at read, 2 at open)"

# A pack that fails leaves no temporary file and nothing under the final
# names; a repack that fails leaves the previous trunk as it was.
#  - a file size limit (RLIMIT_FSIZE): sizing trunk.bin.tmp fails with
#    EFBIG; k3 ignores SIGXFSZ, so the pack ends with exit 1, not a signal;
#  - a full disk (a 1 MB tmpfs, root only): writing trunk.bin.tmp fails
#    with ENOSPC midway, in a first pack and in a --force repack;
#  - the temporary files of a killed pack are removed by the next pack.
no_temps() {
    [ ! -e "$1/trunk.bin.tmp" ] && [ ! -e "$1/trunk.json.tmp" ] || die "$2 left a temporary file"
}
mkdir -p "$T/fsize"
set +e
(ulimit -f 64 && exec "$K3_BIN" pack-trunk "$A" "$T/fsize" --quiet) 2>"$T/fsize.err"
rc=$?
set -e
[ "$rc" -eq 1 ] ||
    { cat "$T/fsize.err"; die "pack past the file size limit: exit $rc, expected 1"; }
grep -q "File too large" "$T/fsize.err" || { cat "$T/fsize.err"; die "no EFBIG message"; }
no_temps "$T/fsize" "a pack past the file size limit"
[ ! -e "$T/fsize/trunk.bin" ] && [ ! -e "$T/fsize/trunk.json" ] || die "a failed pack left a trunk"
echo "ok: a pack past the file size limit fails (exit 1) and leaves nothing"

mkdir -p "$T/full"
if mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
    trap 'umount "$T/full" 2>/dev/null || :' EXIT
    set +e
    "$K3_BIN" pack-trunk "$A1" "$T/full/first" --quiet 2>/dev/null &&
        "$K3_BIN" pack-trunk "$A" "$T/full/first" --quiet 2>"$T/full.err"
    rc=$?
    set -e
    no_temps "$T/full/first" "a pack that filled the disk"
    [ "$rc" -eq 1 ] && grep -q "No space left" "$T/full.err" || {
        cat "$T/full.err"; die "a pack into a full disk: exit $rc, expected 1 (ENOSPC)"; }
    expect_exit 2 "packed from other weights" \
        "$K3_BIN" "$A" --ids "$ids" --gen 2 --trunk "$T/full/first"
    rm -rf "$T/full/first"
    "$K3_BIN" pack-trunk "$A" "$T/full/t" --quiet || die "pack into the tmpfs"
    set +e
    "$K3_BIN" pack-trunk "$A" "$T/full/t" --force --quiet 2>"$T/full.err"
    rc=$?
    set -e
    no_temps "$T/full/t" "a --force repack that filled the disk"
    [ "$rc" -eq 1 ] || die "a repack into a full disk: exit $rc"
    gen "$A" "$T/full-trunk" --trunk "$T/full/t"
    umount "$T/full"
    trap - EXIT
    cmp -s "$T/a-shards.logits" "$T/full-trunk.logits" || die "a failed repack changed the trunk"
    echo "ok: packs that fill the disk fail (exit 1), leave no temporary file, keep the old trunk"
else
    echo "SKIP: full-disk case: cannot mount a tmpfs here (not root?); the file size limit case ran"
fi

if K3_PACK_TEST_KILL_AFTER=2 "$K3_BIN" pack-trunk "$A" "$T/killed2" 2>/dev/null; then
    die "the kill hook did not kill the packer"
fi
[ -e "$T/killed2/trunk.bin.tmp" ] || die "the killed pack left no trunk.bin.tmp to clean"
"$K3_BIN" pack-trunk "$A" "$T/killed2" --layers 3 2>"$T/repack.err" ||
    die "pack after a killed pack"
grep -q "removed the leftovers" "$T/repack.err" ||
    die "the next pack did not clean the killed one's files"
no_temps "$T/killed2" "a pack after a killed pack"
echo "ok: a killed pack's temporary files are cleaned by the next pack"

# A model bound with fewer layers than were packed checks only the runs it
# uses (source fingerprints are per run).
gen "$A" "$T/a3-of-a" --layers 3 --trunk "$T/a"
cmp -s "$T/a3-shards.logits" "$T/a3-of-a.logits" || die "--layers 3 on a 6-layer trunk: logits differ"

# The directory lock: while another process holds it (flock(1) stands in for
# a running pack), a pack refuses and leaves that pack's temporary file.
if command -v flock >/dev/null 2>&1; then
    mkdir -p "$T/locked"
    : >"$T/locked/trunk.bin.tmp"
    expect_exit 1 "another k3 pack-trunk is packing into it" \
        flock -n "$T/locked" "$K3_BIN" pack-trunk "$A" "$T/locked"
    [ -e "$T/locked/trunk.bin.tmp" ] || die "a pack removed the temporary file of a running one"
    "$K3_BIN" pack-trunk "$A" "$T/locked" --quiet || die "pack once the lock is free"
    no_temps "$T/locked" "a pack after the lock was freed"
    echo "ok: a second pack into a locked directory refuses and touches nothing"
else
    echo "SKIP: directory lock case: no flock(1) here"
fi
