# 71-limits: the command line's caps on what a user can ask for, each
# refused with exit 2 and a message before any token is computed: a prompt file
# over 64 MiB, a prompt plus --gen beyond --max-context, --gen and
# --max-context beyond their ranges, an id beyond 32 bits. (File-format
# limits are in tests/unit/test_limits.c, the server's in gate 45.)
. tests/gates/lib.sh
A=$(model tiny-a tiny-a)
W="$K3_BUILD/limits"
rm -rf "$W"
mkdir -p "$W"
# A sparse file: 64 MiB + 1 byte of zeros, read until the cap is passed.
dd if=/dev/zero of="$W/big.txt" bs=1 count=0 seek=67108865 2>/dev/null
printf '%-22s ' prompt-file-64MiB
expect_exit 2 'big.txt: larger than the 67108864-byte limit' "$K3_BIN" "$A" --tok "$A" --prompt-file "$W/big.txt"
printf '%-22s ' max-context
expect_exit 2 '6 prompt tokens \+ --gen 4 = 10 tokens exceeds --max-context 8' \
    "$K3_BIN" "$A" --ids 1,2,3,4,5,6 --gen 4 --max-context 8 --quiet
printf '%-22s ' gen-range
expect_exit 2 '--gen expects an integer from 0 to 1073741824' "$K3_BIN" "$A" --ids 1 --gen 1073741825
printf '%-22s ' max-context-range
expect_exit 2 '--max-context expects an integer from 1 to 16777216' \
    "$K3_BIN" "$A" --ids 1 --max-context 16777217
printf '%-22s ' id-over-32-bits
expect_exit 2 'entry 2 "4294967296" is not a token id' "$K3_BIN" "$A" --ids 1,4294967296
echo "5 limits refused with exit 2 before any token is computed"
