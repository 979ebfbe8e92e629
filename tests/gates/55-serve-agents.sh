# 55-serve-agents: k3 serve as the backend of coding agents (issue 31), fast
# checks with curl-like Python on a tiny release-vocabulary model:
#  - POST /v1/messages (Anthropic), /v1/messages/count_tokens and
#    /v1/responses (OpenAI) are front ends over the chat request: one
#    conversation through the three APIs renders the same prompt ids and
#    generates the same greedy ids (return_token_ids), a tool round trip in
#    each API's words renders alike, usage agrees with count_tokens;
#  - their streams follow each API's event sequence and equal the whole answer;
#  - hostile bodies are 400 (401, 404) in each API's error shape, naming the field;
#    a forced tool choice is a clear 400 until constrained decoding enforces it;
#  - the K3 contract on chat completions: the thinking object, reasoning_effort
#    over thinking.effort, tools on system messages, tool_choice rules;
#  - llama-server/vLLM fields accepted (or ignored and logged), prompt lists,
#    max_tokens clamped to --max-tokens and to the context, /v1/models aliases,
#    X-Api-Key beside Bearer.
. tests/gates/lib.sh
tokdir=../shared/k3-release
[ -f "$tokdir/tiktoken.model" ] || die "no release tokenizer at $tokdir"
work="$K3_BUILD/serve-agents"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)
. tests/gates/serve_lib.sh
start_server srv "$K3_BIN" --alias k3 --api-key gate55-key --max-tokens 24 --max-context 400 ||
    die "k3 serve did not start: $(cat "$work/srv.log")"
"$PYTHON" tests/gates/agents_api_check.py "http://127.0.0.1:$port" gate55-key "$work/srv.log" ||
    die "agents API checks failed (server log: $work/srv.log)"
stop_server "$pid" srv
