# 18-vision-chat: images in --chat, in a chat history and in saved states
# (docs/VISION.md §4 step 4, §10.5, §10.6), on the gate-17 vision model with the
# release tokenizer (tests/ref/vision_chat_check.py):
#   (a) an image_url part (data URL) renders as §4's markup, one <|media_pad|>,
#       between the message's text parts; --chat --image puts it in the first
#       message with the pad expanded to the image's rows, the same markup ids
#       as --prompt --image; the chat's /image FILE gives the next message the
#       same turn (a truncated file is said and the chat goes on);
#   (b) the history holds the image as a data URL: reloading it with the state
#       saved at the end of the chat reuses every position and continues to the
#       same state, byte for byte, as a cold replay;
#   (c) the prefix-reuse trap: the same history with ANOTHER image of the same
#       size (equal ids) and that saved state is not reused past the image
#       (the state file records its images): the state it ends in equals a cold
#       run's, byte for byte, and differs from the first image's;
#   (d) refusals, exit 2: a remote URL (k3 never fetches), bad base64, a
#       truncated image, an image part in an assistant message; exit 3: the
#       vision plan over the run's --budget-gb.
# And in k3 serve (tests/ref/vision_serve_check.py, tests/gates/vision_client.mjs):
#   (e) /v1/chat/completions with an image_url part (a data URL) gives the prompt
#       ids and the generated ids (return_token_ids) of k3 --chat --image for the
#       same conversation, whole and streamed, through curl-like HTTP and the
#       official openai npm client;
#   (f) the prefix-reuse trap in the slots: requests with another image of the
#       same size in sequence each equal a cold run, never reused past the image;
#       both images at once on the 2 slots each equal a cold run too (the server
#       runs --spec 4 throughout: verify rows after the images change nothing);
#   (g) a remote URL, bad base64, a truncated PNG, not an image, an image in an
#       assistant message, each of gate 17's hostile files (100k x 100k header,
#       zero size, truncated, CMYK, 16-bit, animated, ...): 400 naming it and
#       the problem, and the server goes on exactly;
#   (h) an image whose encoding needs more than --budget-gb leaves beside the text
#       plan: 400 before anything runs (judged before the context), a small one fits;
#   (i) a model without a vision tower: 400 saying so.
# Fails if any of these does not hold.
. tests/gates/lib.sh
"$PYTHON" -c 'import PIL' 2>/dev/null || die "gate 18 needs python3-pil"
command -v node >/dev/null || die "node is needed for the OpenAI client (npm ci)"
[ -f node_modules/openai/package.json ] || die "the openai npm package is missing: run npm ci"
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
big=$(model vision-163k tiny-a --vocab 163840 --vision)
"$PYTHON" tests/ref/vision_chat_check.py "$K3_BIN" "$big" "$REL" "$K3_BUILD/vision-chat"
plain=$(model plain-163k tiny-a --vocab 163840)
"$PYTHON" tests/ref/vision_serve_check.py "$K3_BIN" "$big" "$REL" "$K3_BUILD/vision-serve" "$plain"
