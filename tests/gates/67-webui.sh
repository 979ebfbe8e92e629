# 67-webui: the chat page of `k3 serve` (src/server/webui/index.html) in a
# real browser: Debian's chromium, headless, driven by playwright-core
# (tests/gates/webui_check.mjs) against a random-weight model with the
# release's vocabulary: the page loads from the binary, a message gets a
# streamed reply with its tokens/s and cached tokens, Stop aborts a long
# reply (the server cancels it), a reload lists the conversation, a stored
# assistant message with <script> and <img onerror> renders as text through
# the page's own renderer, phone width has no horizontal scroll, and the page
# asks nothing of any other host. Screenshots: $K3_BUILD/artifacts/webui-*.png.
# Also: /chat/props; --no-webui is a 404 at /; with --api-key the page and
# /chat/props are served without the key, the API is not.
# ladder: check
. tests/gates/lib.sh
tokdir=${K3_RELEASE_DIR:-../shared/k3-release} # the release files beside the clone
[ -f "$tokdir/tiktoken.model" ] || { echo "skip: no release tokenizer at $tokdir"; exit 0; }
[ -x /usr/bin/chromium ] || die "no /usr/bin/chromium (sh scripts/deps.sh test installs it)"
[ -d node_modules/playwright-core ] || die "no node_modules/playwright-core (npm ci)"
dir=$(model chat-tiny tiny-a --vocab 163840)
work="$K3_BUILD/webui"
rm -rf "$work"
mkdir -p "$work" "$K3_BUILD/artifacts"
. tests/gates/serve_lib.sh
start_server page "$K3_BIN" || die "k3 serve did not start: $(cat "$work/page.log")"
base="http://127.0.0.1:$port"
curl -s "$base/chat/props" | grep -q '"vision":false,"api_key":false' ||
    die "/chat/props: $(curl -s "$base/chat/props")"
node tests/gates/webui_check.mjs "$base" "$K3_BUILD/artifacts" || die "the page in chromium"
grep -q 'POST /v1/chat/completions' "$work/page.log" || die "the page sent no chat request"
start_server off "$K3_BIN" --no-webui || die "k3 serve --no-webui did not start"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")" = 404 ] ||
    die "--no-webui still serves /"
start_server key "$K3_BIN" --api-key sekret || die "k3 serve --api-key did not start"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")" = 200 ] ||
    die "with --api-key the page itself needs the key"
curl -s "http://127.0.0.1:$port/chat/props" | grep -q '"api_key":true' || die "props: no api_key"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' \
    "http://127.0.0.1:$port/v1/chat/completions")" = 401 ] || die "the API without the key"
echo "ok: the chat page in chromium; --no-webui; --api-key"
