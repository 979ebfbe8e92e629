# 35-chat-vectors: every conversation of k3-release/chat_vectors.json (the
# release encoder's own output) renders through `k3 --render-chat` to
# exactly its rendered string, and tokenizes (--tokenize) to exactly the ids
# the official tiktoken core gives for the vector's segments
# (tools/chat_oracle.mjs). Also: a bad conversation is refused with exit 2
# and a message naming the file and the field.
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/chat-vectors"
rm -rf "$work"
mkdir -p "$work"
command -v node >/dev/null || die "node is needed for the tiktoken oracle (npm ci)"
node tools/chat_oracle.mjs "$tokdir" "$tokdir/chat_vectors.json" "$work" || die "oracle failed"

n=0
while read -r id name; do
    in="$work/$id.json"
    "$K3_BIN" --tok "$tokdir" --render-chat "$in" >"$work/$id.got-rendered" ||
        die "$name: k3 --render-chat $in failed"
    cmp -s "$work/$id.got-rendered" "$work/$id.rendered" ||
        die "$name: rendered string differs ($work/$id.got-rendered vs $work/$id.rendered)"
    "$K3_BIN" --tok "$tokdir" --render-chat "$in" --tokenize >"$work/$id.got-ids" ||
        die "$name: k3 --render-chat $in --tokenize failed"
    cmp -s "$work/$id.got-ids" "$work/$id.ids" ||
        die "$name: token ids differ from the oracle ($work/$id.got-ids vs $work/$id.ids)"
    printf '%-32s %s ids\n' "$name" "$(tr ',' '\n' <"$work/$id.ids" | wc -l)"
    n=$((n + 1))
done <"$work/cases.txt"
[ "$n" -ge 12 ] || die "only $n chat vectors found"

printf '{"messages":[{"role":"robot","content":"x"}]}' >"$work/bad-role.json"
printf '%-32s ' bad-role
expect_exit 2 "bad-role.json: messages\\[0\\]\\.role: \"robot\" is not a known role" \
    "$K3_BIN" --tok "$tokdir" --render-chat "$work/bad-role.json"
echo "$n chat vectors: rendered strings and token ids match the release"
