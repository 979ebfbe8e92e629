# 75-valgrind: bin/k3 under valgrind memcheck (a plain -O1 -g build in
# $K3_BUILD/valgrind: no sanitizer, whatever the build under test uses) on
# tiny-a generation with everything resident, with everything streamed
# from the shards and from a packed trunk (one ring slot, a one-expert
# cache), and on tokenizer runs (encode, decode, a chat rendered and
# tokenized). Any memcheck error or leak (definite, indirect or possible)
# fails the run (--error-exitcode=99). One thread (--threads 1, and
# OMP_NUM_THREADS=1 for the tokenizer runs) keeps libgomp from starting its
# pool, whose thread stacks memcheck would otherwise count; the engine's own
# threads (trunk reader, read batches) still run. No suppressions are used.
# Reads go through the threads reader (K3_IO=threads): memcheck does not see
# what the kernel writes into a buffer through io_uring's shared rings (only
# what a read syscall returns), so every byte read by the uring reader would
# look uninitialised. Gates 25 and 26 run both readers; ASan has no such gap.
# Fails when valgrind is not installed (.ci/run and scripts/deps.sh install it).
# ladder: check
# (make check and CI only, not make test: memcheck runs)
. tests/gates/lib.sh
command -v valgrind >/dev/null 2>&1 || die "valgrind is not installed (apt-get install valgrind)"
W="$K3_BUILD/valgrind-gate"
rm -rf "$W"
mkdir -p "$W"
A=$(model tiny-a tiny-a)
vb="$K3_BUILD/valgrind"
(
    unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL
    make -s -j2 BUILD="$vb" CC="${CC:-cc}" OPT="-O1 -g" CFLAGS= "$vb/bin/k3"
) || die "the -O1 build failed"
V="$vb/bin/k3"
"$V" pack-trunk "$A" "$W/trunk" 2>/dev/null || die "pack-trunk"
"$V" pack-trunk "$A" "$W/ctrunk" --compress 2>/dev/null || die "pack-trunk --compress"
"$PYTHON" tools/make_tokenizer.py "$W/tok" >/dev/null || die "make_tokenizer"
ids=$(prompt_ids "$(vocab_of "$A")" 8)
export K3_IO=threads

# vg NAME ARGS...: k3 ARGS under memcheck; must exit 0 with no error.
vg() {
    name=$1
    shift
    # OMP_WAIT_POLICY set: k3 would otherwise start itself again to set it
    # (src/cli/main.c), and the new image would run outside valgrind.
    if ! OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive valgrind -q --error-exitcode=99 --leak-check=full \
        --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible \
        "$V" "$@" >"$W/$name.out" 2>"$W/$name.err"; then
        cat "$W/$name.err"
        die "$name: valgrind reports errors or k3 failed"
    fi
    echo "ok: $name"
}

vg resident "$A" --ids "$ids" --gen 4 --ignore-eos --quiet --threads 1
vg streamed "$A" --ids "$ids" --gen 4 --ignore-eos --quiet --threads 1 \
    --trunk-layers 0 --trunk-ring 1 --cache-experts 1 --stream-embed --stream-lm-head
vg streamed-trunk "$A" --ids "$ids" --gen 4 --ignore-eos --quiet --threads 1 \
    --trunk "$W/trunk" --trunk-layers 0 --trunk-ring 1 --cache-experts 1
# A compressed trunk: its decoder thread and staging (io/read_coded.c).
vg streamed-codec "$A" --ids "$ids" --gen 4 --ignore-eos --quiet --threads 1 \
    --trunk "$W/ctrunk" --trunk-layers 0 --trunk-ring 1 --cache-experts 1
cmp -s "$W/resident.out" "$W/streamed.out" && cmp -s "$W/resident.out" "$W/streamed-trunk.out" &&
    cmp -s "$W/resident.out" "$W/streamed-codec.out" ||
    die "streamed runs give other ids than the resident run"
vg tokenize --tok "$W/tok" --tokenize --prompt "Hello, world! It's <|open|> 你好 😀"
vg detokenize --tok "$W/tok" --detokenize "$(cat "$W/tokenize.out")"
[ "$(cat "$W/detokenize.out")" = "Hello, world! It's <|open|> 你好 😀" ] || die "detokenize"
chat=../shared/k3-release/chat_vectors.json
if [ -f "$chat" ]; then
    "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][-1]
print(json.dumps({k: c[k] for k in ("messages","tools","options") if k in c}))' "$chat" \
        >"$W/conv.json"
else
    cp tests/fuzz/seeds/chat/tools.json "$W/conv.json"
fi
vg render-chat --tok "$W/tok" --render-chat "$W/conv.json" --tokenize
echo "valgrind memcheck: no errors, no leaks in 6 runs"
