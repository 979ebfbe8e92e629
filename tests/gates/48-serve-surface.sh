# 48-serve-surface: what llama-server users expect around the completions
# endpoints (issue 19), on loopback with a tiny release-vocabulary model:
#  - CORS: every answer carries Access-Control-Allow-Origin (loopback default
#    "*"), an OPTIONS preflight gets 204 with the allowed methods and headers;
#  - POST /tokenize equals `k3 --tokenize` (special tokens parsed or not),
#    with_pieces gives each id's text, POST /detokenize inverts it, and bad
#    bodies are 400 naming the field;
#  - GET /v1/models/{id}: the served model, 404 model_not_found otherwise;
#  - every answer has llama-server's "timings" (predicted_n = completion tokens);
#  - GET /metrics (Prometheus text) counts the requests and tokens served;
#  - the log line of a generation names its speeds;
#  - --api-key: 401 without the bearer key (but /health, /v1/models, OPTIONS),
#    200 with it; --alias: a request's "model" may be the alias, another name is
#    404 model_not_found; --host localhost; --cors "" sends no CORS header;
#    a port in use is exit 1;
#  - logprobs (chat: logprobs + top_logprobs, completions: logprobs N), streamed
#    and not, equal the log-softmax of the CLI's --dump-logits rows;
#  - a chat without max_tokens runs generation_config.json's max_new_tokens,
#    else 2048, at most --max-tokens.
. tests/gates/lib.sh
tokdir=../shared/k3-release
[ -f "$tokdir/tiktoken.model" ] || die "no release tokenizer at $tokdir"
command -v curl >/dev/null || die "curl is needed"
work="$K3_BUILD/serve-surface"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)
. tests/gates/serve_lib.sh
start_server srv "$K3_BIN" --spec 4 || die "k3 serve did not start: $(cat "$work/srv.log")"
name=$(basename "$dir")
url="http://127.0.0.1:$port"

# call NAME WANT-STATUS METHOD PATH [BODY]: body in $work/NAME.json, head in NAME.head.
call() {
    got=$(curl -s -D "$work/$1.head" -o "$work/$1.json" -w '%{http_code}' --max-time 120 \
        -X "$3" ${5:+-H 'Content-Type: application/json' -d "$5"} "$url$4") || true
    [ "$got" = "$2" ] || die "$1: HTTP $got, wanted $2: $(head -c 300 "$work/$1.json")"
}
py() { "$PYTHON" -c "import json,sys; r=json.load(open('$work/$1.json')); $2"; }

# CORS
call models 200 GET /v1/models
grep -qi '^Access-Control-Allow-Origin: \*' "$work/models.head" || die "no CORS header on /v1/models"
call pre 204 OPTIONS /v1/chat/completions
grep -qi '^Access-Control-Allow-Methods: POST, OPTIONS' "$work/pre.head" || die "preflight: $(cat "$work/pre.head")"
grep -qi '^Access-Control-Allow-Headers: .*Authorization' "$work/pre.head" || die "preflight headers"
call nomethod 405 DELETE /v1/models
echo "ok: CORS on answers, preflight 204, other methods 405"

# /tokenize against the CLI
text='Hello, wörld! <|end_of_msg|> 你好 ꙮ'
want=$("$K3_BIN" --tok "$tokdir" --prompt "$text" --tokenize)
want_special=$("$K3_BIN" --tok "$tokdir" --prompt "$text" --prompt-special --tokenize)
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"content": sys.argv[1]}))' "$text")
call tok 200 POST /tokenize "$body"
[ "$(py tok 'print(",".join(map(str, r["tokens"])))')" = "$want_special" ] ||
    die "/tokenize (parse_special default true) differs from k3 --prompt-special --tokenize"
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"content": sys.argv[1], "parse_special": False}))' "$text")
call tok2 200 POST /tokenize "$body"
[ "$(py tok2 'print(",".join(map(str, r["tokens"])))')" = "$want" ] ||
    die "/tokenize parse_special false differs from k3 --tokenize"
[ "$want" != "$want_special" ] || die "the test text should tokenize differently with specials"
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"content": sys.argv[1], "with_pieces": True}))' "$text")
call pieces 200 POST /tokenize "$body"
py pieces "
t = r['tokens']
assert all(set(x) == {'id', 'piece'} for x in t), t
b = b''.join(x['piece'].encode() if isinstance(x['piece'], str) else bytes(x['piece']) for x in t)
assert b.decode() == '''$text''', b
assert any(isinstance(x['piece'], list) for x in t), 'a character split over ids should give bytes'
" || die "with_pieces"
ids=$(py tok 'print(json.dumps(r["tokens"]))')
call detok 200 POST /detokenize "{\"tokens\": $ids}"
[ "$(py detok 'print(r["content"])')" = "$text" ] || die "/detokenize does not invert /tokenize"
call bad1 400 POST /tokenize '{"content": 5}'
py bad1 'assert r["error"]["param"] == "content"' || die "bad content"
call bad2 400 POST /tokenize '{"content": "x", "frobnicate": true}'
call bad3 400 POST /detokenize '{"tokens": [1, 999999999]}'
call bad4 400 POST /detokenize '{"tokens": "1,2"}'
call bad5 400 POST /tokenize 'not json'
echo "ok: /tokenize = k3 --tokenize, pieces, /detokenize inverts it, bad bodies 400"

# /v1/models/{id}
call one 200 GET "/v1/models/$name"
py one "assert r['id'] == '$name' and r['object'] == 'model'" || die "/v1/models/$name"
call other 404 GET /v1/models/gpt-4o
py other 'assert r["error"]["code"] == "model_not_found"' || die "model_not_found"
echo "ok: /v1/models/{id}"

# timings and metrics
call chat 200 POST /v1/chat/completions \
    '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0}'
py chat '
t, u = r["timings"], r["usage"]
assert t["predicted_n"] == u["completion_tokens"], (t, u)
assert t["prompt_n"] == u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"], (t, u)
assert t["predicted_ms"] > 0 and t["predicted_per_second"] > 0, t
' || die "timings"
call cmpl 200 POST /v1/completions '{"prompt": "Once upon", "max_tokens": 3, "temperature": 0}'
# frequency and presence penalties: negative ones boost the window's ids (the
# prompt's "a"s, 8 times: +18), which then take over a greedy answer, the same way twice
pen='{"prompt": "a a a a a a a a", "max_tokens": 24, "temperature": 0'
call p0 200 POST /v1/completions "$pen}"
call p1 200 POST /v1/completions "$pen, \"frequency_penalty\": -2, \"presence_penalty\": -2, \"spec\": 0}"
call p2 200 POST /v1/completions "$pen, \"frequency_penalty\": -2, \"presence_penalty\": -2}"
[ "$(py p1 'print(r["choices"][0]["text"])')" = "$(py p2 'print(r["choices"][0]["text"])')" ] ||
    die "penalties: the same request gave two answers"
py p0 'assert r["choices"][0]["text"].count("a") < 6, r' || die "penalties: p0 should not repeat"
py p1 'assert r["choices"][0]["text"].count("a") >= 12, r' ||
    die "penalties: frequency/presence_penalty -2 did not boost the prompt's ids"
call p3 400 POST /v1/completions "$pen, \"presence_penalty\": 2.5}"
# speculative decoding (the server's --spec 4; p1 asked for none): the same
# answer (its drafts are accepted here)
call p4 200 POST /v1/completions "$pen, \"frequency_penalty\": -2, \"presence_penalty\": -2, \"spec\": 4}"
[ "$(py p1 'print(r["choices"][0]["text"])')" = "$(py p4 'print(r["choices"][0]["text"])')" ] ||
    die "spec 4 changed the answer"
call p5 400 POST /v1/completions "$pen, \"spec\": 17}"
echo "ok: frequency and presence penalties change the answer, reproducibly"
call metrics 200 GET /metrics
m="$work/metrics.json"
grep -q '^# TYPE k3_requests_total counter' "$m" || die "metrics: no TYPE line"
grep -q '^k3_requests_total{endpoint="chat_completions"} 2$' "$m" || die "metrics: chat count (the preflight and the chat): $(grep requests_total "$m")"
grep -q '^k3_requests_total{endpoint="tokenize"} 6$' "$m" || die "metrics: tokenize count: $(grep requests_total "$m")"
grep -q '^k3_request_errors_total{endpoint="tokenize"} 3$' "$m" || die "metrics: tokenize errors"
gen=0
for a in chat cmpl p0 p1 p2 p4; do gen=$((gen + $(py $a 'print(r["usage"]["completion_tokens"])'))); done
grep -q "^k3_generated_tokens_total $gen\$" "$m" || die "metrics: generated tokens, wanted $gen: $(grep generated "$m")"
grep -q '^k3_requests_running 0$' "$m" || die "metrics: running"
echo "ok: timings, /metrics counts ($gen tokens generated)"
grep -q 'POST /v1/chat/completions 200 prompt=.* gen_tok/s=' "$work/srv.log" || die "log line: $(tail -3 "$work/srv.log")"

# logprobs: greedy answers, checked against the CLI's --dump-logits of the
# same prompt ids (tests/gates/logprobs_check.py), streamed and not
lp_check() { # NAME PATH BODY TOP
    call "$1" 200 POST "/v1/$2" "$3"
    curl -s -N --max-time 120 -H 'Content-Type: application/json' \
        -d "$(printf '%s' "$3" | sed 's/^{/{"stream": true, /')" "$url/v1/$2" >"$work/$1.sse" ||
        die "logprobs: the $2 stream failed"
    "$K3_BIN" "$dir" --ids "$(py "$1" 'print(",".join(map(str, r["prompt_token_ids"])))')" \
        --gen "$(py "$1" 'print(len(r["choices"][0]["token_ids"]))')" --ignore-eos --quiet \
        --dump-logits "$work/$1.f32" >/dev/null || die "logprobs: the CLI run failed"
    "$PYTHON" tests/gates/logprobs_check.py "$1" "$work/$1.json" "$work/$1.sse" "$work/$1.f32" \
        "$4" || die "logprobs: $2"
}
lp_check chat chat/completions '{"messages": [{"role": "user", "content": "Name a colour"}],
    "max_tokens": 6, "temperature": 0, "ignore_eos": true, "return_token_ids": true,
    "logprobs": true, "top_logprobs": 5}' 5
lp_check completion completions '{"prompt": "The capital of France is", "max_tokens": 6,
    "temperature": 0, "ignore_eos": true, "return_token_ids": true, "logprobs": 3}' 3
call lp-bad 400 POST /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}],
    "top_logprobs": 2}'
py lp-bad 'assert r["error"]["param"] == "top_logprobs", r' || die "top_logprobs without logprobs"
call lp-bad2 400 POST /v1/completions '{"prompt": "x", "logprobs": 6}'
call lp-none 200 POST /v1/completions '{"prompt": "x", "max_tokens": 2}'
py lp-none 'assert r["choices"][0]["logprobs"] is None, r' || die "logprobs without asking"
stop_server "$pid" srv

# --api-key, --alias, --host localhost, --cors ""
start_server srv2 "$K3_BIN" --api-key s3cret --alias gpt-4o-mini --host localhost --cors "" ||
    die "k3 serve did not start: $(cat "$work/srv2.log")"
url="http://localhost:$port" # localhost may be ::1 (a fresh Debian root) or 127.0.0.1
grep -q "listening on http://localhost:$port" "$work/srv2.log" || die "--host localhost: $(cat "$work/srv2.log")"
body='{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}'
call noauth 401 POST /v1/chat/completions "$body"
py noauth 'assert r["error"]["code"] == "invalid_api_key" and r["error"]["type"] == "authentication_error"' ||
    die "401 body"
grep -qi '^WWW-Authenticate: Bearer' "$work/noauth.head" || die "401 without WWW-Authenticate"
! grep -qi '^Access-Control-Allow-Origin' "$work/noauth.head" || die "--cors \"\" still sends CORS"
call health2 200 GET /health
call models2 200 GET /v1/models
call metrics2 401 GET /metrics
got=$(curl -s -o "$work/auth.json" -w '%{http_code}' --max-time 120 -H 'Authorization: Bearer s3cret' \
    -H 'Content-Type: application/json' -d "$body" "$url/v1/chat/completions")
[ "$got" = 200 ] || die "with the key: HTTP $got: $(cat "$work/auth.json")"
got=$(curl -s -o "$work/wrongkey.json" -w '%{http_code}' --max-time 120 -H 'Authorization: Bearer s3creT' \
    -H 'Content-Type: application/json' -d "$body" "$url/v1/chat/completions")
[ "$got" = 401 ] || die "a wrong key: HTTP $got"
other='{"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}'
got=$(curl -s -o "$work/wrongmodel.json" -w '%{http_code}' --max-time 120 -H 'Authorization: Bearer s3cret' \
    -H 'Content-Type: application/json' -d "$other" "$url/v1/chat/completions")
[ "$got" = 404 ] || die "an unknown model: HTTP $got: $(cat "$work/wrongmodel.json")"
py wrongmodel 'assert r["error"]["code"] == "model_not_found" and r["error"]["param"] == "model"' ||
    die "model_not_found body"
echo "ok: --api-key (401 / 200), --alias, model_not_found, --host localhost, --cors \"\""
expect_exit 1 "cannot listen on localhost port $port" "$K3_BIN" serve "$dir" --tok "$tokdir" \
    --host localhost --port "$port" --exit-after 5
stop_server "$pid" srv2

# A chat without max_tokens: generation_config.json's max_new_tokens (here 7),
# else 2048, at most --max-tokens (here 9). A bad max_new_tokens is exit 2.
gdir="$work/gen-config"
mkdir -p "$gdir"
for f in "$dir"/*; do ln -sf "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$gdir/"; done
rm "$gdir/generation_config.json"
printf '{"max_length": 1048576, "max_new_tokens": 7, "eos_token_id": 163586}\n' \
    >"$gdir/generation_config.json"
nomax='{"messages": [{"role": "user", "content": "Hi"}], "ignore_eos": true}'
dir_saved=$dir
dir=$gdir
start_server srv3 "$K3_BIN" || die "k3 serve did not start: $(cat "$work/srv3.log")"
url="http://127.0.0.1:$port"
call nomax 200 POST /v1/chat/completions "$nomax"
py nomax 'assert r["usage"]["completion_tokens"] == 7, r["usage"]' ||
    die "without max_tokens: not generation_config's max_new_tokens"
stop_server "$pid" srv3
dir=$dir_saved
start_server srv4 "$K3_BIN" --max-tokens 9 || die "k3 serve did not start: $(cat "$work/srv4.log")"
url="http://127.0.0.1:$port"
call nomax2 200 POST /v1/chat/completions "$nomax"
py nomax2 'assert r["usage"]["completion_tokens"] == 9, r["usage"]' ||
    die "without max_tokens and max_new_tokens: not capped by --max-tokens"
stop_server "$pid" srv4
printf '{"max_new_tokens": 0}\n' >"$gdir/generation_config.json"
expect_exit 2 "max_new_tokens must be a positive integer" "$K3_BIN" serve "$gdir" \
    --tok "$tokdir" --port 0 --exit-after 5
echo "ok: the default answer length (max_new_tokens, --max-tokens)"
echo "ok: the server's surface"
