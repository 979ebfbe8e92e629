#!/bin/sh
# serve_bench.sh - `k3 serve --parallel` (make bench runs it after bench.sh's
# sections; alone: sh benchmarks/serve_bench.sh). Not a test: it reports.
# For 1, 2, 4, 8 concurrent clients, each streaming a greedy completion of
# K3_SERVE_GEN ids (ignore_eos) from its own short prompt, on a server with
# 8 slots, weights resident and trunk streamed (--trunk-layers 0): the
# aggregate generated ids/s (all ids over the wall time from the first
# request to the last answer) and the median time to first token; then the
# time to first token of a short request sent while a 2,000-id prompt is
# being prefilled, against one chunk's time (the long prompt's prefill
# over its K3_PREFILL_CHUNK = 512-id chunks; the prompt's length is set by
# the server's own /tokenize). One warm-up answer runs first (the weights'
# first touch is not the 1-client rate). K3_SERVE_MODES picks the modes
# (default "resident streamed"), K3_SERVE_LONG the long prompt's ids (0: no long prompt). On the release-width slice when it exists
# (K3_SLICE_DIR, default build/slice, made by benchmarks/checkpoint.sh);
# else on the "demo" preset (say so when quoting the numbers). Streamed
# reads the shards through the page cache, which holds the whole slice on a
# machine with more memory than 7.6 GB; K3_SLICE_TRUNK_DIR (a packed trunk of
# the slice, k3 pack-trunk) streams from its trunk.bin with O_DIRECT, as a
# model larger than memory would.
set -eu
: "${K3_BIN:=bin/k3}" "${K3_BUILD:=build}" "${PYTHON:=/usr/bin/python3}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
slice="${K3_SLICE_DIR:-build/slice}"
gen="${K3_SERVE_GEN:-16}"
tok=../shared/k3-release
out="$K3_BUILD/bench/serve"
mkdir -p "$out"
if [ -f "$slice/config.json" ]; then
    dir=$slice
    # The slice has 8,192 ids, too few for the release's tokenizer: k3-nano's
    # 3,072-id one encodes the prompts (every id it yields is in the slice's
    # vocabulary; the text is random anyway).
    tok=models/k3-nano
    what="release-width slice"
else
    dir="$K3_BUILD/models/serve-bench-demo"
    [ -f "$dir/config.json" ] ||
        "$PYTHON" tools/make_checkpoint.py "$dir" --preset demo --vocab 163840 >&2
    what="demo preset (no slice at $slice)"
fi
echo "serve bench on the $what; load: $(uptime | sed 's/.*load/load/')"
for mode in ${K3_SERVE_MODES:-resident streamed}; do
    extra=""
    [ $mode = streamed ] && extra="--trunk-layers 0"
    [ $mode = streamed ] && [ -n "${K3_SLICE_TRUNK_DIR:-}" ] && [ "$dir" = "$slice" ] &&
        extra="$extra --trunk $K3_SLICE_TRUNK_DIR"
    log="$out/$mode.log"
    # (a log left by an earlier run would give its port before the server
    # truncates the file)
    rm -f "$log"
    # shellcheck disable=SC2086 # $extra is zero to four words
    "$K3_BIN" serve "$dir" --tok "$tok" --port 0 --parallel 8 --max-context 4096 --quiet \
        --exit-after 3600 $extra 2>"$log" &
    spid=$!
    port=""
    while [ -z "$port" ]; do
        kill -0 $spid 2>/dev/null || { cat "$log"; exit 1; }
        port=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9]*\) .*/\1/p' "$log" 2>/dev/null || true)
        [ -n "$port" ] || sleep 0.2
    done
    "$PYTHON" - "$port" "$gen" "$mode" "${K3_SERVE_LONG:-2000}" <<'PY'
import json, sys, threading, time, urllib.request
port, gen, mode, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
url = "http://127.0.0.1:%s/v1/completions" % port
MODEL = json.load(urllib.request.urlopen(url.replace("completions", "models")))["data"][0]["id"]

def stream(prompt, n, res):
    body = json.dumps(dict(model=MODEL, prompt=prompt, max_tokens=n, temperature=0,
                           ignore_eos=True, stream=True)).encode()
    t0 = time.time()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    first = None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            if first is None and line.startswith(b"data: {"):
                first = time.time() - t0
    res.append((first, time.time() - t0))

def run(c):
    res, th = [], []
    t0 = time.time()
    for i in range(c):
        th.append(threading.Thread(target=stream, args=("client %d says hello" % i, gen, res)))
    for t in th: t.start()
    for t in th: t.join()
    wall = time.time() - t0
    ttft = sorted(r[0] for r in res)[len(res) // 2]
    return c * gen / wall, ttft
def count(text):
    body = json.dumps(dict(content=text)).encode()
    req = urllib.request.Request(url.replace("v1/completions", "tokenize"), body,
                                 {"Content-Type": "application/json"})
    return len(json.load(urllib.request.urlopen(req))["tokens"])

stream("warm up", gen, [])
base = None
for c in (1, 2, 4, 8):
    rate, ttft = run(c)
    base = base or rate
    print("%-9s %d clients: %8.2f ids/s aggregate (%.2fx of 1), median TTFT %.3f s"
          % (mode, c, rate, rate / base, ttft))
if want <= 0:  # K3_SERVE_LONG=0: the client sweep only
    sys.exit(0)
words = want // 2
for _ in range(3):  # the tokenizer's ids per word, measured
    words = max(1, words * want // max(1, count(" ".join("w%d" % i for i in range(words)))))
long_prompt = " ".join("w%d" % i for i in range(words))
n_long = count(long_prompt)
res_long, res_short = [], []
tl = threading.Thread(target=stream, args=(long_prompt, 1, res_long))
tl.start()
time.sleep(0.05)
stream("short one", 1, res_short)
tl.join()
# the long prompt's chunks plus the step the short one's prompt shared
chunks = (n_long + 511) // 512 + 1
chunk = res_long[0][0] / chunks
print("%-9s short request during a %d-id prefill: TTFT %.3f s = %.2f chunk times; the long "
      "prompt's first token after %.3f s (%.3f s a chunk)"
      % (mode, n_long, res_short[0][0], res_short[0][0] / chunk, res_long[0][0], chunk))
PY
    kill $spid
    wait $spid || true
done
