# 32-text-end-to-end: text in, text out with the release's tokenizer, on a test
# model whose vocabulary is the release's (163,840 ids; tiny in every other
# dimension). The prompt must encode to the ids tiktoken gives
# (1008,10484,318,15383,387), 8 tokens must be generated, and what is
# printed must be exactly the generated ids' text (checked by --detokenize).
. tests/gates/lib.sh
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
dir=$(model chat-tiny tiny-a --vocab 163840) # shared with 36-chat
work="$K3_BUILD/text-e2e"
mkdir -p "$work"
"$K3_BIN" "$dir" --tok "$REL" --prompt "The capital of France is" --gen 8 --ignore-eos \
    --out "$work/report.json" >"$work/text" 2>"$work/err" || { cat "$work/err"; die "generation failed"; }
eval "$("$PYTHON" -c 'import json,sys
r=json.load(open(sys.argv[1]))
print("prompt=%s gen=%s n=%d" % (",".join(map(str,r["prompt_ids"])), ",".join(map(str,r["generated_ids"])), len(r["generated_ids"])))' "$work/report.json")"
[ "$prompt" = "1008,10484,318,15383,387" ] || die "prompt encoded as $prompt"
[ "$n" -eq 8 ] || die "$n tokens generated, not 8"
"$K3_BIN" --tok "$REL" --detokenize "$gen" >"$work/want"
cmp -s "$work/text" "$work/want" || die "printed text differs from the text of the generated ids"
echo "prompt ids $prompt; generated $gen; printed text matches"

# Special ids print no text unless --show-special: a prompt of <|media_pad|>
# tokens, boosted by negative frequency and presence penalties so the model
# generates that id too.
sp='<|media_pad|><|media_pad|><|media_pad|><|media_pad|><|media_pad|><|media_pad|>'
run_sp() {
    "$K3_BIN" "$dir" --tok "$REL" --prompt "$sp" --prompt-special --gen 6 --quiet \
        --frequency-penalty -2 --presence-penalty -2 --out "$work/sp.json" "$@"
}
run_sp >"$work/sp-hidden" || die "special run failed"
run_sp --show-special >"$work/sp-shown" || die "special run (--show-special) failed"
pad=$("$K3_BIN" --tok "$REL" --prompt '<|media_pad|>' --prompt-special --tokenize)
grep -q "\"generated_ids\": \[$pad" "$work/sp.json" || die "the boosted special id $pad was not generated: $(cat "$work/sp.json" | head -3)"
! grep -q 'media_pad' "$work/sp-hidden" || die "a special id printed its text without --show-special"
grep -q '<|media_pad|>' "$work/sp-shown" || die "--show-special did not print the special id's text"
echo "special ids: no text by default, their text with --show-special"
