# tests/mpi/mpich.sh - `make test-mpich`: bin/k3-mpi built with MPICH
# (Debian's mpich: mpicc.mpich, mpirun.mpich) gives bin/k3's ids and logits
# (issue 18: "it must also build with MPICH"). The full `make test-mpi`
# runs with Open MPI; this is the portability check, kept short: random
# shape 2 (hidden not divisible by 3) greedy with every product split, and
# sampled with speculation (rank 0 drafting every step, the others left to
# their own cost gates: rank 0's count must be broadcast), and moe64 streamed (one ring slot, one cached expert per
# rank) with the experts split by id, at 2 and 3 ranks; cmp of ids, prompt
# and generation logits. Environment: K3_BIN, K3_MPI_BIN (the MPICH
# build), K3_BUILD, PYTHON.
. tests/gates/lib.sh
: "${K3_MPI_BIN:?}"
command -v mpirun.mpich >/dev/null || die "mpirun.mpich is missing (apt-get install mpich)"
export OMP_NUM_THREADS=1
work="$K3_BUILD/mpich"
rm -rf "$work"
mkdir -p "$work"

# same NAME MODEL ARGS...: bin/k3 once, k3-mpi (MPICH) at 2 and 3 ranks.
same() {
    name=$1
    mdir=$2
    shift 2
    "$K3_BIN" "$mdir" "$@" --spec 0 --dump-logits "$work/$name.f32" \
        --dump-prompt-logits "$work/$name.p.f32" >"$work/$name.ids" 2>"$work/$name.err" ||
        { cat "$work/$name.err"; die "$name: bin/k3 failed"; }
    for np in 2 3; do
        tag="$name-np$np"
        out="--dump-logits $work/$tag.f32 --dump-prompt-logits $work/$tag.p.f32"
        if [ -n "${RANK0_DRAFTS:-}" ]; then # rank 0 drafts every step, the others as
            # their own cost gates choose: the count must be rank 0's (MPMD launch)
            # shellcheck disable=SC2086
            timeout 600 mpirun.mpich -n 1 -env K3_SPEC_ALWAYS 1 "$K3_MPI_BIN" "$mdir" "$@" \
                $out : -n $((np - 1)) "$K3_MPI_BIN" "$mdir" "$@" $out \
                >"$work/$tag.ids" 2>"$work/$tag.err"
        else
            # shellcheck disable=SC2086
            timeout 600 mpirun.mpich -np "$np" "$K3_MPI_BIN" "$mdir" "$@" $out \
                >"$work/$tag.ids" 2>"$work/$tag.err"
        fi ||
            { cat "$work/$tag.err"; die "$tag: k3-mpi (MPICH) failed"; }
        cmp -s "$work/$name.ids" "$work/$tag.ids" || die "$tag: ids differ from bin/k3"
        cmp -s "$work/$name.f32" "$work/$tag.f32" || die "$tag: generation logits differ"
        cmp -s "$work/$name.p.f32" "$work/$tag.p.f32" || die "$tag: prompt logits differ"
    done
    echo "ok: $name: bin/k3's ids and logits at 2 and 3 MPICH ranks ($(cat "$work/$name.ids"))"
}

dir=$(model random-2 --random-shape 2)
ids=$(prompt_ids "$(vocab_of "$dir")" 20)
K3_MPI_SPLIT_MIN=0 same random-2 "$dir" --ids "$ids" --gen 12 --ignore-eos --quiet
RANK0_DRAFTS=1 same random-2-spec "$dir" --ids "$ids" --gen 24 --ignore-eos --quiet \
    --frequency-penalty -1 --presence-penalty -1 --temperature 0.9 --seed 7 --spec 3
moe=$(model moe64 moe64)
same moe64-streamed "$moe" --ids "$(prompt_ids "$(vocab_of "$moe")" 12)" --gen 8 \
    --ignore-eos --quiet --trunk-layers 0 --trunk-ring 1 --cache-experts 1
echo "test-mpich: all passed"
