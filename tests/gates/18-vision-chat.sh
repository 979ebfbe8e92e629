# 18-vision-chat: images in --chat, in a chat history and in saved states
# (docs/VISION.md §4 step 4, §10.5, §10.6), on the gate-17 vision model with the
# release tokenizer (tests/ref/vision_chat_check.py):
#   (a) an image_url part (data URL) renders as §4's markup, one <|media_pad|>,
#       between the message's text parts; --chat --image puts it in the first
#       message with the pad expanded to the image's rows, the same markup ids
#       as --prompt --image;
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
# Fails if any of these does not hold.
. tests/gates/lib.sh
"$PYTHON" -c 'import PIL' 2>/dev/null || die "gate 18 needs python3-pil"
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
big=$(model vision-163k tiny-a --vocab 163840 --vision)
"$PYTHON" tests/ref/vision_chat_check.py "$K3_BIN" "$big" "$REL" "$K3_BUILD/vision-chat"
