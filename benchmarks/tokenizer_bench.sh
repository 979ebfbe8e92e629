#!/bin/sh
# tokenizer_bench.sh - how fast the C tokenizer is (not a test):
#   * encode MB/s of `k3 --tokenize` and of the oracle (npm tiktoken, driven
#     as tools/tok_oracle.mjs drives it) on the same text, special tokens
#     disallowed;
#   * the C load time of the release's tiktoken.model + tokenizer_config.json.
# Times are medians of RUNS runs, in CPU time (user + system) so that other
# work on the machine does not skew them; wall time is shown beside. The C
# encode time is a run's time minus that of a run with an empty prompt
# (process start and load).
#
#   sh benchmarks/tokenizer_bench.sh      (env: K3_BIN, K3_BUILD, PYTHON, RUNS, MB)
set -eu
K3_BIN=${K3_BIN:-bin/k3}
PYTHON=${PYTHON:-/usr/bin/python3}
RUNS=${RUNS:-5}
MB=${MB:-8}
REL=../shared/k3-release
OUT=${K3_BUILD:-build}/bench-tokenizer
mkdir -p "$OUT"

# The text: the small test corpus (prose and code in many scripts, numbers,
# whitespace, emoji, random mixtures; no pathological runs), one case per
# line, repeated to MB megabytes.
node tools/make_tok_corpus.mjs --small | node -e '
    const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean).map(JSON.parse);
    const one = lines.join("\n") + "\n";
    const want = Number(process.argv[1]) << 20;
    process.stdout.write(one.repeat(Math.ceil(want / Buffer.byteLength(one))));
' "$MB" >"$OUT/text.txt"

"$PYTHON" - "$K3_BIN" "$REL" "$OUT/text.txt" "$RUNS" <<'PY'
import os, resource, statistics, subprocess, sys, time
k3, rel, text, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
size = os.path.getsize(text)

def median_times(args):
    """Median CPU and wall seconds of runs runs of args."""
    cpu, wall = [], []
    for _ in range(runs):
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        wall.append(t1 - t0)
    return statistics.median(cpu), statistics.median(wall)

load_cpu, load_wall = median_times([k3, "--tok", rel, "--prompt", "", "--tokenize"])
cpu, wall = median_times([k3, "--tok", rel, "--prompt-file", text, "--tokenize"])
print("text: %.1f MB" % (size / 1e6))
print("C load (tiktoken.model + config, process start included): %.1f ms CPU, %.1f ms wall"
      % (load_cpu * 1e3, load_wall * 1e3))
print("C encode: %.1f MB/s CPU (%.1f MB/s wall)"
      % (size / 1e6 / (cpu - load_cpu), size / 1e6 / (wall - load_wall)))
PY

node --input-type=module -e '
    import fs from "node:fs";
    import { loadOracle, encodeKimi } from "./tools/tok_oracle.mjs";
    const [rel, file, runs] = process.argv.slice(1);
    const text = fs.readFileSync(file, "utf8");
    const size = Buffer.byteLength(text);
    const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
    let c = cpu(), t = performance.now();
    const { enc } = loadOracle(rel);
    console.log(`oracle load: ${((cpu() - c) * 1e3).toFixed(0)} ms CPU, ${(performance.now() - t).toFixed(0)} ms wall`);
    const cpus = [], walls = [];
    for (let i = 0; i < Number(runs); i++) {
        c = cpu();
        t = performance.now();
        encodeKimi(enc, text, false);
        cpus.push(cpu() - c);
        walls.push((performance.now() - t) / 1000);
    }
    const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];
    console.log(`oracle encode: ${(size / 1e6 / median(cpus)).toFixed(1)} MB/s CPU ` +
                `(${(size / 1e6 / median(walls)).toFixed(1)} MB/s wall)`);
' "$REL" "$OUT/text.txt" "$RUNS"
