# 60-aarch64: the NEON kernels, on an x86 host. Cross-builds everything for
# aarch64 (make cross-aarch64: static binaries in build-aarch64/) and runs
# under qemu-aarch64 the SIMD test (NEON table against the scalar one, bit
# for bit), the kernel tests and the reference fixtures; then the aarch64
# engine on tiny-a, whose ids and logits must equal this build's bit for
# bit (same contract, same bits on every machine).
# Needs the Debian/Ubuntu packages gcc-aarch64-linux-gnu, its libc
# libc6-dev-arm64-cross (only recommended by it) and qemu-user; `sh
# scripts/deps.sh test` installs them.
# ladder: check
# (make check and CI only, not make test: a cross build and qemu)
. tests/gates/lib.sh
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
    command -v "$tool" >/dev/null ||
        die "$tool not found: install gcc-aarch64-linux-gnu, libc6-dev-arm64-cross" \
            "and qemu-user (sh scripts/deps.sh test)"
done
out="$K3_BUILD/gate-aarch64"
mkdir -p "$out"
# A clean make: a parent make (e.g. make asan) must not pass its variables
# (CC, BUILD, CFLAGS) down through MAKEFLAGS.
if ! MAKEFLAGS= MAKELEVEL= make cross-aarch64 >"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log" >&2
    die "cross build for aarch64 failed (stdio.h not found: install libc6-dev-arm64-cross)"
fi
for t in test_simd test_q8 test_kernels test_fixtures; do
    qemu-aarch64 "build-aarch64/tests/$t" || die "$t fails on aarch64"
done
dir=$(model tiny-a tiny-a)
ids=$(prompt_ids "$(vocab_of "$dir")" 24)
arm=$(qemu-aarch64 build-aarch64/bin/k3 "$dir" --ids "$ids" --gen 8 --ignore-eos --quiet \
    --dump-logits "$out/arm.f32")
host=$("$K3_BIN" "$dir" --ids "$ids" --gen 8 --ignore-eos --quiet --dump-logits "$out/host.f32")
[ "$arm" = "$host" ] || die "tiny-a: aarch64 ids $arm, host ids $host"
cmp -s "$out/arm.f32" "$out/host.f32" || die "tiny-a: aarch64 logits differ from the host's"
echo "aarch64 (NEON) and host ($(uname -m)) agree bit for bit on tiny-a"
