# tests/mpi/run.sh - `make test-mpi`: bin/k3-mpi against bin/k3 (issue 18).
# Not part of make test; needs mpirun (Open MPI or MPICH) and bin/k3-mpi
# (make MPI=1). Environment: K3_BIN, K3_MPI_BIN, K3_MPI_FAULT_BIN (a
# -DK3_FAULT_INJECTION k3-mpi), K3_BUILD, PYTHON; K3_MPI_NP (default
# "1 2 3 4") the rank counts.
#  1. bit-identity: tiny-a, tiny-b and random shape 2 (hidden 83, vocab 609:
#     widths that 3 does not divide, and row splits that leave some ranks no
#     rows), every product split (K3_MPI_SPLIT_MIN=0) and at the default
#     threshold: the ids, prompt and generation logits (cmp) equal bin/k3's
#     at every rank count; so does a seeded sampled run;
#  1b. speculation: --spec 3 greedy and sampled on random shape 2 (every
#     rank drafting every step), and with the ranks' own choices differing
#     (K3_SPEC_ALWAYS=1 on rank 0 only, or on all but rank 0) at --spec
#     auto and 3: the ids and logits of bin/k3 --spec 0 at every rank count
#     (the draft count is rank 0's, src/mpi/spec.c); the self drafter and
#     --batch-file with drafts at 3 ranks;
#  2. streamed budgets per rank (moe64, nothing pinned, a one-slot ring, a
#     one-expert cache on every rank): the same ids and logits, and the
#     report says it streamed;
#  2b. each rank's share of the trunk (random shape 2, every product
#     split): bin/k3's ids and logits at every rank count and 3 budgets,
#     rank 0's planned trunk bytes about 1/N; a packed trunk read whole;
#     --plan prints every rank's plan and the total;
#  2c. the routed experts split by expert id, a prompt's and one token's
#     (moe64): bin/k3's ids and logits at 2-4 ranks, each expert computed
#     by one rank, the rank's cache capped at its own experts;
#  3. chat through rank 0 (piped stdin): the same replies as bin/k3 --chat,
#     also with --spec 4 and the ranks' own draft choices differing;
#  4. faults: a read failing on rank 1 only (at open), or an expert read on
#     rank 2 of 3 mid-forward -> exit 4 with that rank's message;
#     a rank killed with SIGKILL mid-run -> the job ends within 30 s,
#     nonzero; a rank stopped (SIGSTOP) mid-run -> the others time out
#     (K3_MPI_TIMEOUT=3) and end the job naming the collective;
#     serve --draft self is refused (exit 2);
#  2d. per-rank trunks (pack-trunk --rank-of): bin/k3's ids and logits at 2
#     and 3 ranks, streamed; refused for another rank, rank count or split
#     threshold, and by bin/k3;
#  5. k3-mpi serve: tests/mpi/serve.sh.
. tests/gates/lib.sh
: "${K3_MPI_BIN:?}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
NP=${K3_MPI_NP:-1 2 3 4}
work="$K3_BUILD/mpi"
rm -rf "$work"
mkdir -p "$work"
if mpirun --version 2>&1 | grep -q "Open MPI"; then
    MPIRUN="mpirun --oversubscribe"
else
    MPIRUN=mpirun
fi
mpi() { # NP ARGS...
    np=$1
    shift
    $MPIRUN -np "$np" "$@"
}

# same_run NAME MODEL ARGS...: bin/k3 once, then k3-mpi at every rank count.
same_run() {
    name=$1
    mdir=$2
    shift 2
    "$K3_BIN" "$mdir" "$@" --dump-logits "$work/$name.f32" \
        --dump-prompt-logits "$work/$name.p.f32" >"$work/$name.ids" 2>"$work/$name.err" ||
        { cat "$work/$name.err"; die "$name: bin/k3 failed"; }
    for np in $NP; do
        for smin in 0 default; do
            tag="$name-np$np-$smin"
            unset K3_MPI_SPLIT_MIN
            [ "$smin" = default ] || export K3_MPI_SPLIT_MIN=0
            mpi "$np" "$K3_MPI_BIN" "$mdir" "$@" --dump-logits "$work/$tag.f32" \
                --dump-prompt-logits "$work/$tag.p.f32" >"$work/$tag.ids" 2>"$work/$tag.err" ||
                { cat "$work/$tag.err"; die "$tag: k3-mpi failed"; }
            cmp -s "$work/$name.ids" "$work/$tag.ids" || die "$tag: ids differ from bin/k3"
            cmp -s "$work/$name.f32" "$work/$tag.f32" || die "$tag: generation logits differ"
            cmp -s "$work/$name.p.f32" "$work/$tag.p.f32" || die "$tag: prompt logits differ"
        done
        unset K3_MPI_SPLIT_MIN
    done
    echo "ok: $name: ids and logits of bin/k3 at ranks $NP ($(cat "$work/$name.ids"))"
}

for preset in tiny-a tiny-b; do
    dir=$(model "$preset" "$preset")
    same_run "$preset" "$dir" --ids "$(prompt_ids "$(vocab_of "$dir")" 24)" --gen 12 \
        --ignore-eos --quiet
done
dir=$(model random-2 --random-shape 2)
H=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json"));
c=c.get("text_config",c); print(c["hidden_size"] % 3, c["vocab_size"])' "$dir")
[ "${H%% *}" != 0 ] || die "random shape 2: hidden size divisible by 3 (the maker changed)"
same_run random-2 "$dir" --ids "$(prompt_ids "$(vocab_of "$dir")" 20)" --gen 12 --ignore-eos \
    --quiet
same_run random-2-sampled "$dir" --ids "$(prompt_ids "$(vocab_of "$dir")" 20)" --gen 12 \
    --ignore-eos --quiet --temperature 0.9 --top-p 0.95 --seed 7

# 1b. speculation over MPI. Negative penalties make the model repeat itself,
# so the ngram drafter's drafts are kept and cut. --spec 3 greedy and
# sampled (K3_SPEC_ALWAYS=1: drafts every step on every rank) on random
# shape 2: the ids and logits of bin/k3 --spec 0 at every rank count.
pen="--frequency-penalty -1 --presence-penalty -1"
rid=$(prompt_ids "$(vocab_of "$dir")" 20)
# shellcheck disable=SC2086
"$K3_BIN" "$dir" --ids "$rid" --gen 40 --ignore-eos --quiet $pen --spec 0 \
    --dump-logits "$work/spec0.f32" >"$work/spec0.ids" 2>/dev/null || die "spec: bin/k3 failed"
export K3_SPEC_ALWAYS=1
# shellcheck disable=SC2086
same_run random-2-spec3 "$dir" --ids "$rid" --gen 40 --ignore-eos --quiet $pen --spec 3
cmp -s "$work/spec0.ids" "$work/random-2-spec3.ids" || die "spec: --spec 3 ids differ from --spec 0"
cmp -s "$work/spec0.f32" "$work/random-2-spec3.f32" || die "spec: --spec 3 logits differ"
# shellcheck disable=SC2086
same_run random-2-spec3-sampled "$dir" --ids "$rid" --gen 40 --ignore-eos --quiet $pen --spec 3 \
    --temperature 0.9 --seed 7
unset K3_SPEC_ALWAYS
# The cost gate's choice is rank 0's (src/mpi/spec.c): with each rank
# choosing by its own rule, rank 0 by the gate and the others drafting
# every step (K3_SPEC_ALWAYS=1), or the reverse, the ranks would verify
# different rows and the job would end in a mismatched collective; so the
# ids and logits of bin/k3 --spec 0, at 2-4 ranks, --spec auto (the
# default) and --spec 3, and the report (rank 0's) drafts all it could when
# rank 0 drafts every step. K3_MPI_TIMEOUT: a divergence fails fast.
# mixed NP WHO ARGS...: WHO (first or rest) ranks run with K3_SPEC_ALWAYS=1.
mixed() {
    np=$1
    who=$2
    shift 2
    a=env
    b="env K3_SPEC_ALWAYS=1"
    [ "$who" = rest ] || { a=$b; b=env; }
    # shellcheck disable=SC2086
    K3_MPI_TIMEOUT=20 $MPIRUN -np 1 $a "$K3_MPI_BIN" "$@" : -np $((np - 1)) $b "$K3_MPI_BIN" "$@"
}
drafted() { "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1]))["spec"]
print(s["drafted"], s["accepted"], s["forwards"])' "$1"; }
shown=none
for np in $NP; do
    [ "$np" -gt 1 ] || continue
    for who in first rest; do
        for sp in auto 3; do
            tag="mixed-np$np-$who-$sp"
            # shellcheck disable=SC2086
            K3_MPI_SPLIT_MIN=0 mixed "$np" "$who" "$dir" --ids "$rid" --gen 40 --ignore-eos \
                --quiet $pen --spec $sp --dump-logits "$work/$tag.f32" --out "$work/$tag.json" \
                >"$work/$tag.ids" 2>"$work/$tag.err" ||
                { tail -5 "$work/$tag.err"; die "$tag: k3-mpi failed"; }
            cmp -s "$work/spec0.ids" "$work/$tag.ids" || die "$tag: ids differ from bin/k3"
            cmp -s "$work/spec0.f32" "$work/$tag.f32" || die "$tag: logits differ from bin/k3"
            [ "$who" = rest ] && continue
            # shellcheck disable=SC2046
            set -- $(drafted "$work/$tag.json")
            [ "$2" -gt 0 ] && [ "$1" -gt "$2" ] ||
                die "$tag: rank 0 drafted $1 and kept $2: wanted drafts kept and cut"
            shown="$tag: $1 drafted, $2 kept, $3 forwards"
        done
    done
done
echo "ok: speculation, the draft count rank 0's: ids and logits of bin/k3 --spec 0 at ranks" \
    "$NP, the others' own choice differing either way ($shown)"
# The self drafter (its passes run on every rank), greedy and sampled, and
# --batch-file (several sequences a step, each its own gate), 3 ranks.
tiny=$(model tiny-a tiny-a)
rep="5,9,17,5,9,17,5,9,17,5,9"
for smp in "" "--temperature 0.8 --seed 7"; do
    # shellcheck disable=SC2086
    "$K3_BIN" "$tiny" --ids "$rep" --gen 40 --ignore-eos --quiet $pen $smp --spec 0 \
        --dump-logits "$work/self0.f32" >"$work/self0.ids" 2>/dev/null || die "self: bin/k3 failed"
    # shellcheck disable=SC2086
    K3_MPI_SPLIT_MIN=0 mixed 3 rest "$tiny" --ids "$rep" --gen 40 --ignore-eos --quiet $pen $smp \
        --spec 4 --draft self --dump-logits "$work/self3.f32" --out "$work/self3.json" \
        >"$work/self3.ids" 2>"$work/self3.err" || { tail -5 "$work/self3.err"; die "self failed"; }
    cmp -s "$work/self0.ids" "$work/self3.ids" || die "self ($smp): ids differ from bin/k3"
    cmp -s "$work/self0.f32" "$work/self3.f32" || die "self ($smp): logits differ from bin/k3"
done
cat >"$work/batch.jsonl" <<JSONL
{"ids": [$rep], "gen": 40}
{"ids": [$rep], "gen": 30, "temperature": 0.8, "seed": 7}
{"ids": [3, 4, 5, 6, 7, 8], "gen": 10}
JSONL
# shellcheck disable=SC2086
"$K3_BIN" "$tiny" --batch-file "$work/batch.jsonl" --ignore-eos --quiet $pen --spec 0 \
    --out "$work/batch1.json" >"$work/batch1.txt" 2>/dev/null || die "batch: bin/k3 failed"
for who in first rest; do
    # shellcheck disable=SC2086
    K3_MPI_SPLIT_MIN=0 mixed 3 "$who" "$tiny" --batch-file "$work/batch.jsonl" --ignore-eos \
        --quiet $pen --spec 4 --out "$work/batch3.json" >"$work/batch3.txt" \
        2>"$work/batch3.err" || { tail -5 "$work/batch3.err"; die "batch ($who) failed"; }
    cmp -s "$work/batch1.txt" "$work/batch3.txt" || die "batch ($who): output differs from bin/k3"
    "$PYTHON" - "$work/batch1.json" "$work/batch3.json" <<'PY' || die "batch ($who): ids differ"
import json, sys
a, b = (json.load(open(f))["results"] for f in sys.argv[1:])
assert [r["generated_ids"] for r in a] == [r["generated_ids"] for r in b]
assert sum(r["drafted"] for r in b) > 0
PY
done
echo "ok: --draft self (greedy, sampled) and --batch-file with drafts over 3 ranks: bin/k3's"

# 2. streamed budgets, the same on every rank.
dir=$(model moe64 moe64)
ids=$(prompt_ids "$(vocab_of "$dir")" 12)
stream="--trunk-layers 0 --trunk-ring 1 --cache-experts 1 --stream-embed --stream-lm-head"
# shellcheck disable=SC2086
"$K3_BIN" "$dir" --ids "$ids" --gen 8 --ignore-eos --preset max \
    --dump-logits "$work/all.f32" >"$work/all.ids" 2>/dev/null || die "moe64: bin/k3 failed"
for np in 2 3; do
    # shellcheck disable=SC2086
    mpi "$np" "$K3_MPI_BIN" "$dir" --ids "$ids" --gen 8 --ignore-eos $stream \
        --dump-logits "$work/st$np.f32" --out "$work/st$np.json" >"$work/st$np.ids" \
        2>"$work/st$np.err" || { cat "$work/st$np.err"; die "streamed np $np failed"; }
    cmp -s "$work/all.ids" "$work/st$np.ids" || die "streamed np $np: ids differ"
    cmp -s "$work/all.f32" "$work/st$np.f32" || die "streamed np $np: logits differ"
    "$PYTHON" - "$work/st$np.json" <<'PY' || die "streamed np $np: the report does not stream"
import json, sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["pinned_layers"] == 0 and p["streamed_layers"] > 0, p
PY
done
echo "ok: moe64 streamed (0 pinned, 1-slot ring, 1-expert cache) per rank at 2, 3 ranks"

# 2b. each rank's share: every product split (K3_MPI_SPLIT_MIN=0), budgets
# that pin all, some or none of the trunk; at 1-4 ranks the ids and logits
# of bin/k3, and each rank's planned trunk bytes (its rows only) shrink
# about 1/N: at most the whole / N plus the matrices kept whole (kv_b) and
# one 16-row unit per matrix. --plan prints every rank's plan and the total.
trunk_bytes() { # REPORT: pinned + ring + lm_head bytes of the plan
    "$PYTHON" -c 'import json,sys; b=json.load(open(sys.argv[1]))["plan"]["bytes"]
print(b["pinned_trunk"] + b["ring"] + b["lm_head"])' "$1"
}
dir=$(model random-2 --random-shape 2)
rid=$(prompt_ids "$(vocab_of "$dir")" 10)
for budget in "--preset max" "--trunk-layers 2 --trunk-ring 2" "$stream"; do
    # shellcheck disable=SC2086
    "$K3_BIN" "$dir" --ids "$rid" --gen 6 --ignore-eos $budget --dump-logits "$work/b1.f32" \
        --out "$work/b1.json" >"$work/b1.ids" 2>/dev/null || die "share: bin/k3 failed ($budget)"
    whole=$(trunk_bytes "$work/b1.json")
    for np in $NP; do
        # shellcheck disable=SC2086
        K3_MPI_SPLIT_MIN=0 mpi "$np" "$K3_MPI_BIN" "$dir" --ids "$rid" --gen 6 --ignore-eos \
            $budget --dump-logits "$work/b$np.f32" --out "$work/b$np.json" >"$work/b$np.ids" \
            2>"$work/b$np.err" || { cat "$work/b$np.err"; die "share np $np ($budget) failed"; }
        cmp -s "$work/b1.ids" "$work/b$np.ids" || die "share np $np ($budget): ids differ"
        cmp -s "$work/b1.f32" "$work/b$np.f32" || die "share np $np ($budget): logits differ"
        mine=$(trunk_bytes "$work/b$np.json")
        "$PYTHON" - "$whole" "$mine" "$np" "$dir" <<'PY' ||
import json, sys
whole, mine, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = json.load(open(sys.argv[4] + "/config.json"))
c = c.get("text_config", c)
la = c["linear_attn_config"]
L = c["num_hidden_layers"]
# Whole on every rank: kv_b of each MLA layer. Per matrix (at most 13 a
# layer) a rank may get one 16-row unit more than 1/N, and 64 bytes of
# alignment: 16 rows x 2 bytes x the widest input W.
kvb = len(la["full_attn_layers"]) * c["num_attention_heads"] * (c["qk_nope_head_dim"] +
      c["v_head_dim"]) * c["kv_lora_rank"] * 2
W = max(c["hidden_size"], c["intermediate_size"], la["num_heads"] * la["head_dim"],
        c["num_attention_heads"] * c["v_head_dim"], c["q_lora_rank"], c["kv_lora_rank"],
        c["moe_intermediate_size"] * c["num_shared_experts"], c["routed_expert_hidden_size"])
slack = (13 * L + 1) * (64 + 16 * 2 * W)
assert n == 1 and mine == whole or mine <= whole / n + kvb + slack, (whole, mine, n, kvb, slack)
assert n == 1 or mine < whole, (whole, mine)
PY
            die "share np $np ($budget): rank 0 plans $mine of $whole trunk bytes"
    done
done
echo "ok: each rank holds its share: ids and logits of bin/k3 at ranks $NP, 3 budgets" \
    "(trunk bytes of rank 0: $whole whole, $mine at the last count)"
# A packed trunk (whole runs, checksummed) is read whole on every rank:
# the same logits, and the report says the shares are off.
"$K3_BIN" pack-trunk "$dir" "$work/trunk" --quiet || die "share: pack-trunk failed"
K3_MPI_SPLIT_MIN=0 mpi 2 "$K3_MPI_BIN" "$dir" --trunk "$work/trunk" --ids "$rid" --gen 6 \
    --ignore-eos --preset max --dump-logits "$work/bt.f32" --out "$work/bt.json" >/dev/null \
    2>"$work/bt.err" || { cat "$work/bt.err"; die "share: --trunk over 2 ranks failed"; }
"$K3_BIN" "$dir" --ids "$rid" --gen 6 --ignore-eos --preset max --dump-logits "$work/b1.f32" \
    >/dev/null 2>&1 || die "share: bin/k3 failed"
cmp -s "$work/b1.f32" "$work/bt.f32" || die "share: --trunk over 2 ranks: logits differ"
grep -q '"trunk_shares": false' "$work/bt.json" || die "share: --trunk: the shares are not off"
echo "ok: a packed trunk is read whole on every rank (2 ranks): the logits of bin/k3"
# 2d. per-rank trunks (k3 pack-trunk --rank-of R/N, every product split):
# each rank streams its own rows from its own trunk (--trunk DIR-{rank}),
# the ids and logits of bin/k3 at 2 and 3 ranks; rank 0's trunk.bin is
# smaller than a whole trunk's; bin/k3 refuses a per-rank trunk, k3-mpi
# one packed for another rank or rank count (exit 2).
fsize() { "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["file_size"])' "$1"; }
for np in 2 3; do
    for r in $(seq 0 $((np - 1))); do
        K3_MPI_SPLIT_MIN=0 "$K3_BIN" pack-trunk "$dir" "$work/rt$np-$r" --rank-of "$r/$np" \
            --quiet || die "pack-trunk --rank-of $r/$np failed"
    done
    # shellcheck disable=SC2086
    K3_MPI_SPLIT_MIN=0 mpi "$np" "$K3_MPI_BIN" "$dir" --trunk "$work/rt$np-{rank}" --ids "$rid" \
        --gen 6 --ignore-eos $stream --dump-logits "$work/rt$np.f32" --out "$work/rt$np.json" \
        >"$work/rt$np.ids" 2>"$work/rt$np.err" ||
        { cat "$work/rt$np.err"; die "per-rank trunks over $np ranks failed"; }
    cmp -s "$work/b1.ids" "$work/rt$np.ids" || die "per-rank trunks np $np: ids differ"
    cmp -s "$work/b1.f32" "$work/rt$np.f32" || die "per-rank trunks np $np: logits differ"
    grep -q '"trunk_shares": true' "$work/rt$np.json" || die "per-rank trunks: shares are off"
    "$PYTHON" - "$work/rt$np.json" <<'PY' || die "per-rank trunks np $np: the run did not stream"
import json, sys
p = json.load(open(sys.argv[1]))["plan"]
assert p["pinned_layers"] == 0 and p["streamed_layers"] > 0, p
PY
    [ "$(fsize "$work/rt$np-0/trunk.json")" -lt "$(fsize "$work/trunk/trunk.json")" ] ||
        die "per-rank trunk of rank 0 of $np is not smaller than the whole trunk"
done
echo "ok: per-rank trunks, streamed: the ids and logits of bin/k3 at 2 and 3 ranks (rank 0's" \
    "trunk.bin $(fsize "$work/rt3-0/trunk.json") of $(fsize "$work/trunk/trunk.json") bytes at 3)"
expect_exit 2 "packed for rank 0 of 2" "$K3_BIN" "$dir" --trunk "$work/rt2-0" --ids "$rid" \
    --gen 1 || die "bin/k3 with a per-rank trunk: not refused"
expect_exit 2 "packed for rank 1 of 2, but this is rank 0 of 2" env K3_MPI_SPLIT_MIN=0 \
    $MPIRUN -np 2 "$K3_MPI_BIN" "$dir" --trunk "$work/rt2-1" --ids "$rid" --gen 1 ||
    die "k3-mpi with another rank's trunk: not refused"
expect_exit 2 "packed for rank 0 of 3, but this is rank 0 of 2" env K3_MPI_SPLIT_MIN=0 \
    $MPIRUN -np 2 "$K3_MPI_BIN" "$dir" --trunk "$work/rt3-{rank}" --ids "$rid" --gen 1 ||
    die "k3-mpi with trunks of another rank count: not refused"
expect_exit 2 "rows 0..16 only" $MPIRUN -np 2 "$K3_MPI_BIN" "$dir" --trunk "$work/rt2-{rank}" \
    --ids "$rid" --gen 1 || die "k3-mpi at another split threshold than packed: not refused"
echo "ok: a per-rank trunk is refused by bin/k3, for another rank, another rank count and" \
    "another split threshold (exit 2)"
K3_MPI_SPLIT_MIN=0 mpi 3 "$K3_MPI_BIN" "$dir" --plan >"$work/plan3.txt" 2>"$work/plan3.err" ||
    { cat "$work/plan3.err"; die "--plan over 3 ranks failed"; }
for r in 0 1 2; do
    grep -q "^memory plan of rank $r of 3" "$work/plan3.txt" || die "--plan: no plan of rank $r"
done
grep -q "^all 3 ranks: total" "$work/plan3.txt" || die "--plan: no total over ranks"
echo "ok: --plan over 3 ranks: $(grep '^all 3 ranks' "$work/plan3.txt")"

# 2c. the routed experts split by expert id (id % N), the prompt's (one
# 12-token call) and each decoded token's: the same ids, prompt and
# generation logits as bin/k3 at 2-4 ranks, with a cache that streams and
# one that holds every expert of the rank (the plan's experts_here: about
# 1/N of them, and no more slots); K3_MPI_STATS counts one gather per MoE
# layer a call, each rank computes only its experts (none of another
# rank's), every output is computed once: sum over ranks = the outputs
# gathered, more than k a gather (the prompt's T x k).
dir=$(model moe64 moe64)
kpt=$("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]+"/config.json"));
print(c.get("text_config",c)["num_experts_per_token"])' "$dir")
for budget in "--preset max" "--cache-experts 1 --trunk-layers 0 --trunk-ring 1"; do
    # shellcheck disable=SC2086
    "$K3_BIN" "$dir" --ids "$ids" --gen 8 --ignore-eos $budget --dump-logits "$work/e1.f32" \
        --dump-prompt-logits "$work/e1.p.f32" --out "$work/e1.json" >"$work/e1.ids" \
        2>/dev/null || die "experts: bin/k3 failed"
    for np in $NP; do
        [ "$np" -gt 1 ] || continue
        # shellcheck disable=SC2086
        K3_MPI_STATS=1 mpi "$np" "$K3_MPI_BIN" "$dir" --ids "$ids" --gen 8 --ignore-eos $budget \
            --dump-logits "$work/e$np.f32" --dump-prompt-logits "$work/e$np.p.f32" \
            --out "$work/e$np.json" >"$work/e$np.ids" 2>"$work/e$np.err" ||
            { cat "$work/e$np.err"; die "experts np $np failed"; }
        cmp -s "$work/e1.ids" "$work/e$np.ids" || die "experts np $np ($budget): ids differ"
        cmp -s "$work/e1.f32" "$work/e$np.f32" || die "experts np $np ($budget): logits differ"
        cmp -s "$work/e1.p.f32" "$work/e$np.p.f32" ||
            die "experts np $np ($budget): prompt logits differ"
        sed -n 's/^k3-mpi: \([0-9]\)/\1/p' "$work/e$np.err" >"$work/e$np.stats"
        "$PYTHON" - "$work/e$np.stats" "$np" "$kpt" "$work/e1.json" "$work/e$np.json" <<'PY' ||
import json, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
n, k = int(sys.argv[2]), int(sys.argv[3])
assert len(rows) == n, rows
g, outs = rows[0][7], rows[0][10]
assert g > 0 and all(r[7] == g and r[10] == outs for r in rows), "gathers differ or none"
assert outs > k * g, ("the prompt's experts were not split by id", outs, k, g)
here = [r[8] for r in rows]
assert sum(here) == outs, (here, outs)
assert all(h < outs for h in here), here
one = json.load(open(sys.argv[4]))["experts"]["requests"]
r0 = json.load(open(sys.argv[5]))["experts"]["requests"]
assert r0 < one, ("rank 0 asked its cache for no fewer experts", r0, one)
plan = json.load(open(sys.argv[5]))["plan"]
E = plan["experts_total"]
assert plan["experts_here"] * n <= E + n * 8, plan  # its ids, per MoE layer at most one more
assert plan["expert_slots"] <= plan["experts_here"], plan
print("gathers %d of %d outputs, computed per rank %s, rank 0's cache requests %d of %d"
      % (g, outs, "/".join("%d" % h for h in here), r0, one))
PY
            die "experts np $np ($budget): the split by expert is not what it should be"
    done
done
echo "ok: the routed experts split by expert id (prompt and decode): ids and logits of bin/k3" \
    "at 2-4 ranks"

# 3. chat through rank 0.
tok=../shared/k3-release
if [ -f "$tok/tiktoken.model" ]; then
    dir=$(model chat-tiny tiny-a --vocab 163840)
    printf 'Hello there\nWhat is 2+2?\n' >"$work/in.txt"
    "$K3_BIN" "$dir" --tok "$tok" --chat --gen 6 --history "$work/h1.jsonl" <"$work/in.txt" \
        >"$work/chat1.out" 2>/dev/null || die "chat: bin/k3 failed"
    mpi 3 "$K3_MPI_BIN" "$dir" --tok "$tok" --chat --gen 6 --history "$work/h3.jsonl" \
        <"$work/in.txt" >"$work/chat3.out" 2>"$work/chat3.err" ||
        { cat "$work/chat3.err"; die "chat: k3-mpi failed"; }
    cmp -s "$work/chat1.out" "$work/chat3.out" || die "chat: replies differ from bin/k3"
    cmp -s "$work/h1.jsonl" "$work/h3.jsonl" || die "chat: histories differ from bin/k3"
    [ "$(grep -c . "$work/h3.jsonl")" -eq 4 ] || die "chat: the history has not 4 messages"
    # speculating (gate 39's chat: the model repeats itself), each rank's
    # own choice differing (the others draft every step): rank 0's counts
    printf 'say it again and again and again\nand again\n' >"$work/in2.txt"
    chat=" --chat --gen 24 --frequency-penalty -2 --presence-penalty -2"
    # shellcheck disable=SC2086
    "$K3_BIN" "$dir" --tok "$tok" $chat --spec 0 --history "$work/hs1.jsonl" <"$work/in2.txt" \
        >"$work/chats1.out" 2>/dev/null || die "chat: bin/k3 --spec 0 failed"
    # shellcheck disable=SC2086
    mixed 3 rest "$dir" --tok "$tok" $chat --spec 4 --history "$work/hs3.jsonl" \
        <"$work/in2.txt" >"$work/chats3.out" 2>"$work/chats3.err" ||
        { tail -5 "$work/chats3.err"; die "chat --spec 4: k3-mpi failed"; }
    cmp -s "$work/chats1.out" "$work/chats3.out" || die "chat --spec 4: replies differ"
    cmp -s "$work/hs1.jsonl" "$work/hs3.jsonl" || die "chat --spec 4: histories differ"
    echo "ok: chat through rank 0 (3 ranks): the replies and history of bin/k3, also" \
        "speculating with the ranks' own choices differing"
else
    echo "skip: chat (no release tokenizer at $tok)"
fi

# 4. faults. A read failing on rank 1 only (the fault shim's plan given to
# that rank alone), every weight read from the 5th on, retries included.
dir=$(model moe64 moe64)
if [ -n "${K3_MPI_FAULT_BIN:-}" ]; then
    set +e
    # shellcheck disable=SC2086
    $MPIRUN -np 1 "$K3_MPI_FAULT_BIN" "$dir" --ids "$ids" --gen 4 $stream : \
        -np 1 env K3_FAULT=read:5:fail:100000 "$K3_MPI_FAULT_BIN" "$dir" --ids "$ids" --gen 4 \
        $stream >/dev/null 2>"$work/fault.err"
    rc=$?
    set -e
    [ "$rc" -eq 4 ] || { cat "$work/fault.err"; die "a failed read on rank 1: exit $rc, not 4"; }
    grep -q "k3-mpi: rank 1: .*error" "$work/fault.err" ||
        { cat "$work/fault.err"; die "a failed read on rank 1: no message of rank 1"; }
    echo "ok: a failed read on rank 1 ends the job with exit 4:" \
        "$(grep -m1 'rank 1' "$work/fault.err")"
    # Mid-forward: an expert read of rank 2 of 3 (its 300th weight read: the
    # trunk is resident, read at open, so every later read is an expert's
    # into the one-slot cache), while the other ranks wait in a collective.
    set +e
    $MPIRUN -np 2 "$K3_MPI_FAULT_BIN" "$dir" --ids "$ids" --gen 4 --cache-experts 1 : \
        -np 1 env K3_FAULT=read:300:fail:100000 "$K3_MPI_FAULT_BIN" "$dir" --ids "$ids" \
        --gen 4 --cache-experts 1 >/dev/null 2>"$work/fault2.err"
    rc=$?
    set -e
    [ "$rc" -eq 4 ] || { cat "$work/fault2.err"; die "an expert read failing on rank 2: exit $rc"; }
    grep -q "k3-mpi: rank 2: .*RUN INVALID.*expert" "$work/fault2.err" ||
        { cat "$work/fault2.err"; die "an expert read failing on rank 2: no message of rank 2"; }
    echo "ok: an expert read failing mid-forward on rank 2 ends the job with exit 4"
fi

# serve --draft self: its passes would run on rank 0 alone.
expect_exit 2 "serve --draft self is not available over MPI" mpi 2 "$K3_MPI_BIN" serve "$dir" \
    --draft self || die "k3-mpi serve --draft self: not refused with exit 2"
echo "ok: k3-mpi serve --draft self is refused (exit 2)"

# pids_of_ranks JOB N: the k3-mpi processes of background job JOB (its
# children and grandchildren: mpirun's ranks), once N of them run; only
# this job's (another k3-mpi on the machine is not a victim).
pids_of_ranks() {
    for _ in $(seq 50); do
        p=""
        for c in $(pgrep -P "$1" || true); do
            for q in $c $(pgrep -P "$c" || true); do
                case "$(tr '\0' ' ' <"/proc/$q/cmdline" 2>/dev/null || true)" in
                "$K3_MPI_BIN "*) p="$p $q" ;;
                esac
            done
        done
        # shellcheck disable=SC2086
        [ "$(echo $p | wc -w)" -ge "$2" ] && { echo $p | tr ' ' '\n'; return; }
        sleep 0.2
    done
}
# A rank killed with SIGKILL mid-run (collectives in flight).
big=$(prompt_ids "$(vocab_of "$dir")" 200)
mpi 3 "$K3_MPI_BIN" "$dir" --ids "$big" --gen 2000 --ignore-eos --recompute \
    >/dev/null 2>"$work/kill.err" &
job=$!
victim=$(pids_of_ranks "$job" 3 | tail -1)
[ -n "$victim" ] || die "killed rank: the ranks did not start"
sleep 2
kill -0 "$job" 2>/dev/null || die "killed rank: the job ended before the kill"
kill -9 "$victim"
t0=$(date +%s)
set +e
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { kill "$job"; die "killed rank: the job still runs after 30 s"; }
wait "$job"
rc=$?
set -e
[ "$rc" -ne 0 ] || die "killed rank: the job exited 0"
echo "ok: a rank killed with SIGKILL ends the job in $(($(date +%s) - t0)) s (exit $rc):" \
    "$(grep -m1 -i 'signal\|killed\|exited' "$work/kill.err" || true)"

# A stopped (hung) rank mid-run: the others' collectives time out.
K3_MPI_TIMEOUT=3 mpi 2 "$K3_MPI_BIN" "$dir" --ids "$big" --gen 2000 --ignore-eos --recompute \
    >/dev/null 2>"$work/hang.err" &
job=$!
victim=$(pids_of_ranks "$job" 2 | tail -1)
[ -n "$victim" ] || die "hung rank: the ranks did not start"
sleep 2
kill -0 "$job" 2>/dev/null || die "hung rank: the job ended before the stop"
kill -STOP "$victim"
t0=$(date +%s)
set +e
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then
    kill -CONT "$victim"
    kill "$job"
    die "hung rank: the job still runs 30 s after a rank stopped"
fi
wait "$job"
rc=$?
set -e
kill -CONT "$victim" 2>/dev/null || true
grep -q "no answer from the other ranks" "$work/hang.err" ||
    { cat "$work/hang.err"; die "hung rank: no timeout message (exit $rc)"; }
echo "ok: a stopped rank ends the job in $(($(date +%s) - t0)) s (exit $rc): the timeout"
# 5. k3-mpi serve (tests/mpi/serve.sh).
MPIRUN="$MPIRUN" sh tests/mpi/serve.sh || die "k3-mpi serve failed"
echo "test-mpi: all passed"
