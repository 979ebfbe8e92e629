# 34-run-report: what a run prints at its end.
#  (a) by default one summary line on stderr (prompt tok/s, generated tok/s,
#      s/token, peak RSS) and no per-step table or I/O report;
#  (b) --verbose adds the per-step table with an `emitted` column: under
#      --spec its sum is the ids generated and its non-zero rows are the
#      forward passes plus step 0 (the prompt's); --out's steps agree;
#  (c) --out holds the generated text as printed and the summary's rates
#      (the prompt rate over the prompt's own seconds, not step 0);
#  (d) on a terminal (a pty), with the threshold forced to 0
#      (K3_PROGRESS_AFTER_MS=0), each forward call shows the "layer i/L" line
#      and erases it; in a pipe, nothing.
. tests/gates/lib.sh
work="$K3_BUILD/run-report"
rm -rf "$work"
mkdir -p "$work"
dir=$(model tiny-a tiny-a)
ids="5,9,17,5,9,17,5,9,17,5,9"
run() {
    name=$1
    shift
    "$K3_BIN" "$dir" --ids "$ids" --gen 48 --ignore-eos --frequency-penalty -1 \
        --presence-penalty -1 --spec 3 --out "$work/$name.json" "$@" >"$work/$name.out" \
        2>"$work/$name.err" || die "$name: exit $?: $(tail -3 "$work/$name.err")"
}
run plain
n='[0-9.]+'
tail -n 1 "$work/plain.err" | grep -Eq "^k3: prompt 11 tokens at $n tok/s; generated 48 at $n \
tok/s \\($n s/token\\); peak RSS $n GB\$" ||
    die "no summary line: $(tail -n 2 "$work/plain.err")"
[ "$(grep -c '^k3: prompt' "$work/plain.err")" -eq 1 ] || die "more than one summary line"
! grep -Eq '^ *step +token|^trunk:|^experts:|^time:|^speculation:' "$work/plain.err" ||
    die "the per-step table or the I/O report without --verbose"
echo "ok: one summary line, no table"

run verbose --verbose
cmp -s "$work/plain.out" "$work/verbose.out" || die "--verbose changed the ids"
"$PYTHON" - "$work/verbose.err" "$work/verbose.json" <<'EOF' || die "--verbose table"
import json, re, sys
err = open(sys.argv[1]).read().splitlines()
head = [i for i, l in enumerate(err) if re.match(r"^ *step +token +seconds .* tok/s +emitted$", l)]
assert len(head) == 1, "no table header"
rows = [l.split() for l in err[head[0] + 1:head[0] + 49]]
assert [int(r[0]) for r in rows] == list(range(48)), "not 48 steps"
emitted = [int(r[-1]) for r in rows]
rep = json.load(open(sys.argv[2]))
spec = rep["spec"]
assert spec["accepted"] > 0, "no draft accepted: the test proves nothing"
assert sum(emitted) == 48, emitted
assert sum(1 for x in emitted if x) == spec["forwards"] + 1, (emitted, spec)
assert max(emitted) > 1, emitted
assert [s["emitted"] for s in rep["steps"]] == emitted, "--out steps differ from the table"
print("ok: --verbose: %d steps, %d forward passes, emitted %s" % (len(rows), spec["forwards"],
                                                                 ",".join(map(str, emitted))))
EOF

"$PYTHON" - "$work/plain.json" <<'EOF' || die "--out rates"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["text"] is None, "text without a tokenizer"
assert 0 < r["prompt_seconds"] <= r["prefill_seconds"], r
p = r["prompt_tokens_per_second"]
assert abs(p - 11 / r["prompt_seconds"]) <= 1e-3 * p + 1e-3, p
dec = sum(r["step_seconds"]) - r["prompt_seconds"]
spt = r["seconds_per_token"]
assert abs(spt - dec / 48) <= 1e-5 + 1e-3 * dec / 48, (spt, dec)
print("ok: --out: prompt %.0f tok/s over %.6f s (step 0 %.6f s), %.6f s/token"
      % (p, r["prompt_seconds"], r["prefill_seconds"], spt))
EOF

tok=../shared/k3-release
if [ -f "$tok/tiktoken.model" ]; then
    cdir=$(model chat-tiny tiny-a --vocab 163840)
    "$K3_BIN" "$cdir" --tok "$tok" --prompt "Hello there" --gen 12 --out "$work/text.json" \
        >"$work/text.out" 2>"$work/text.err" || die "text run: $(tail -3 "$work/text.err")"
    "$PYTHON" - "$work/text.json" "$work/text.out" <<'EOF' || die "--out text"
import json, sys
r = json.load(open(sys.argv[1]))
shown = open(sys.argv[2], "rb").read().decode("utf-8", "replace")
assert shown == r["text"] + "\n", (shown, r["text"])
print("ok: --out text = the printed text (%d characters)" % len(r["text"]))
EOF
fi
# (d) the layer line
"$PYTHON" tests/gates/chat_pty.py layers "$work" "$K3_BIN" "$dir" - || die "pty: the layer line"
K3_PROGRESS_AFTER_MS=0 "$K3_BIN" "$dir" --ids "$ids" --gen 4 >/dev/null 2>"$work/pipe.err" ||
    die "pipe run failed"
! grep -q "layer [0-9]*/" "$work/pipe.err" || die "a layer line in a pipe"
echo PASS
