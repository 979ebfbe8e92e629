#!/bin/sh
# 26-trunk.sh - the packed trunk: k3 pack-trunk and k3 --trunk.
#  - packing tiny-a and moe64 copies every run byte for byte (checked by
#    trunk_check.py, which reads the shards itself) and a rerun does nothing;
#  - generation from the trunk, pinned or everything streamed through one
#    slot (or two, with the reader thread), gives the same ids and
#    bit-identical logits as from the shards;
#  - another model's trunk, or one packed before config.json was edited, is
#    refused (exit 2, naming what differs); a run the trunk lacks (packed
#    with --layers) is refused too;
#  - a flipped byte in trunk.bin is caught by the run's checksum (exit 4,
#    RUN INVALID, no token printed);
#  - a pack killed midway leaves no trunk.json claiming completeness (and a
#    killed repack leaves the previous trunk intact); the next pack finishes.
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

    gen "$dir" "$T/$name-shards"
    for opts in "" "--trunk-layers 0 --trunk-ring 1" "--trunk-layers 1 --trunk-ring 2 --stream-lm-head"; do
        # shellcheck disable=SC2086
        gen "$dir" "$T/$name-trunk" --trunk "$trunk" $opts
        cmp -s "$T/$name-shards.ids" "$T/$name-trunk.ids" || die "$name --trunk $opts: other ids"
        cmp -s "$T/$name-shards.logits" "$T/$name-trunk.logits" ||
            die "$name --trunk $opts: logits not bit-identical"
    done
    echo "ok: $name packed, rerun a no-op, --trunk bit-identical ($(cat "$T/$name-shards.ids"))"
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
for opts in "" "--trunk-layers 0 --trunk-ring 1" "--trunk-layers 2 --trunk-ring 2"; do
    # shellcheck disable=SC2086
    expect_exit 4 "RUN INVALID: layer 3 of trunk.bin fails its checksum" \
        "$K3_BIN" "$A" --ids "$ids" --gen 4 --quiet --trunk "$T/a-flipped" $opts
    [ ! -s "$K3_BUILD/expect.out" ] || die "tokens were printed from a corrupt trunk ($opts)"
done
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
