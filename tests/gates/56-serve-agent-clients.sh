# 56-serve-agent-clients: the agents' own npm clients against k3 serve (issue 31).
# ladder: check
# A random-weight model with the release vocabulary, made to end its turns
# (agent_model.py: the end id's lm_head row so an answer stops after a few ids
# - agents treat an answer cut at max_tokens as a failure), a big context for
# the agents' system prompts. Checks:
#  - @anthropic-ai/sdk and openai (agent_sdks.mjs): messages whole/streamed,
#    tool_use/tool_result, countTokens; responses whole/streamed,
#    function_call/function_call_output;
#  - `claude -p`, `codex exec` and `opencode run` each exit 0 and print the text
#    k3 serve generated (read back from a recording proxy: record_proxy.py).
. tests/gates/lib.sh
tokdir=../shared/k3-release
[ -f "$tokdir/tiktoken.model" ] || die "no release tokenizer at $tokdir"
nbin=node_modules/.bin
# opencode: its linux-x64 binary package, pinned directly (package.json:
# opencode-ai's other-platform packages are not all served, so npm ci
# could not install a lock file naming them).
opencode_bin=node_modules/opencode-linux-x64/bin/opencode
for c in "$nbin/claude" "$nbin/codex" "$opencode_bin"; do [ -x "$c" ] || die "no $c: run npm ci"; done
work="$(cd "$K3_BUILD" && pwd)/serve-agent-clients" # absolute: clients run elsewhere
rm -rf "$work"
mkdir -p "$work"
base=$(model serve-tiny tiny-a --vocab 163840)
end_id=$("$K3_BIN" --tok "$tokdir" --prompt "<|end_of_msg|>" --prompt-special --tokenize)
dir="$work/agent-tiny"
"$PYTHON" tests/gates/agent_model.py "$base" "$dir" "$end_id" 60 >/dev/null
. tests/gates/serve_lib.sh
# --exit-after 3000: the agents' prompts (Claude Code's ~17,500 tokens) take minutes on a
# loaded machine, and serve_lib's 600 s default stopped the server under Codex.
start_server srv "$K3_BIN" --alias k3 --max-context 65536 --max-tokens 256 --exit-after 3000 ||
    die "k3 serve did not start: $(cat "$work/srv.log")"
node tests/gates/agent_sdks.mjs "http://127.0.0.1:$port" k3 || die "SDK checks failed"

proxy_port=$((port + 1))
"$PYTHON" tests/gates/record_proxy.py "$proxy_port" "http://127.0.0.1:$port" "$work/rec" \
    >"$work/proxy.log" 2>&1 &
pids="$pids $!"
i=0
until grep -q listening "$work/proxy.log"; do
    [ $i -lt 100 ] || die "the recording proxy did not start: $(cat "$work/proxy.log")"
    sleep 0.1
    i=$((i + 1))
done
purl="http://127.0.0.1:$proxy_port"

# last_text API: the text of the last recorded answer of that API.
last_text() {
    "$PYTHON" - "$work/rec" "$1" <<'PY'
import glob, json, sys
d, api = sys.argv[1], sys.argv[2]
for resp in sorted(glob.glob(d + "/*.resp"), reverse=True):
    req = open(resp[:-5] + ".req").read().split("\n", 1)[0]
    if api not in req:
        continue
    body = open(resp, encoding="utf-8").read().split("\n", 1)[1]
    text = ""
    for line in body.split("\n"):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        e = json.loads(line[6:])
        if api == "messages" and e.get("type") == "content_block_delta" and e["delta"]["type"] == "text_delta":
            text += e["delta"]["text"]
        elif api == "responses" and e.get("type") == "response.output_text.delta":
            text += e["delta"]
        elif api == "chat" and e.get("choices") and e["choices"][0]["delta"].get("content"):
            text += e["choices"][0]["delta"]["content"]
    print(text)
    break
PY
}

# agent NAME API CMD...: runs the client in $work/NAME (HOME there), bounded.
agent() {
    name=$1
    api=$2
    shift 2
    mkdir -p "$work/$name/home" "$work/$name/work"
    set +e
    (cd "$work/$name/work" && HOME="$work/$name/home" timeout 600 "$@" \
        >"$work/$name/out.txt" 2>"$work/$name/err.txt" </dev/null)
    rc=$?
    set -e
    [ "$rc" -eq 0 ] || die "$name exited $rc: $(tail -c 1500 "$work/$name/err.txt")"
    want=$(last_text "$api")
    [ -n "$want" ] || die "$name: no answer recorded"
    grep -qF -- "$want" "$work/$name/out.txt" ||
        die "$name printed $(head -c 300 "$work/$name/out.txt"), not the generated $want"
    echo "ok $name: exit 0, printed the generated text: $want"
}

agent claude messages env ANTHROPIC_BASE_URL="$purl" ANTHROPIC_API_KEY=dummy \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 MAX_THINKING_TOKENS=0 \
    "$(pwd)/$nbin/claude" -p "Say hello" --model k3

mkdir -p "$work/codex/codex-home"
cat >"$work/codex/codex-home/config.toml" <<TOML
model = "k3"
model_provider = "k3"
model_reasoning_effort = "none"

[model_providers.k3]
name = "k3 serve"
base_url = "$purl/v1"
wire_api = "responses"
TOML
agent codex responses env CODEX_HOME="$work/codex/codex-home" \
    "$(pwd)/$nbin/codex" exec --skip-git-repo-check "Say hello"

oc="$work/opencode"
mkdir -p "$oc/config/opencode"
cat >"$oc/config/opencode/opencode.json" <<JSON
{
  "provider": {
    "k3": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "k3 serve",
      "options": { "baseURL": "$purl/v1", "apiKey": "dummy" },
      "models": { "k3": { "name": "k3", "options": { "thinking": false } } }
    }
  },
  "model": "k3/k3",
  "autoupdate": false,
  "share": "disabled"
}
JSON
agent opencode chat env XDG_CONFIG_HOME="$oc/config" XDG_DATA_HOME="$oc/data" \
    XDG_CACHE_HOME="$oc/cache" XDG_STATE_HOME="$oc/state" OPENCODE_DISABLE_MODELS_FETCH=1 \
    OPENCODE_DISABLE_AUTOUPDATE=1 "$(pwd)/$opencode_bin" run "Say hello" -m k3/k3
stop_server "$pid" srv
