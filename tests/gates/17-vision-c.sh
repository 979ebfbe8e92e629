# 17-vision-c: the C vision path (src/vision, docs/VISION.md §10) against Pillow
# and the float64 reference tools/k3vision_ref.py, through tests/progs/vision_check
# (tests/ref/vision_c_check.py):
#   - decoding: 13 PNG and JPEG files of every mode Pillow writes (RGB, RGBA, gray,
#     gray+alpha, 1-bit, palette with and without tRNS, RGB/gray tRNS, baseline,
#     4:4:4, progressive and gray JPEG) give Pillow's own pixels byte for byte;
#   - hostile files are exit 2 with a message naming the problem: a 100000 x 100000
#     PNG header and a 60000 x 60000 JPEG frame (refused before any pixel buffer),
#     zero width or height, truncated PNG and JPEG, CMYK JPEG, 16-bit PNG, animated
#     PNG, a text file, an empty file;
#   - the processor (§3): 10 images (shrunk on both axes, on one axis only,
#     unchanged, 1 x 1, RGBA with alpha 0..255, patch sides 3 and 14) give exactly
#     the reference's plan and float32 patches.
# Fails if a decoder or the processor differs in one byte or value, or a hostile
# file is accepted or crashes; if an encoded row is off by more than 1e-5 of the
# reference, or changes with threads, kernels or the other image of the call. A
# build without image support (IMAGE=0) fails here.
. tests/gates/lib.sh
"$PYTHON" -c 'import PIL' 2>/dev/null || die "gate 17 needs python3-pil"
tool="$K3_BUILD/progs/vision_check"
[ -x "$tool" ] || die "$tool missing (make builds it)"
"$PYTHON" tests/ref/vision_c_check.py images "$tool" "$K3_BUILD/vision-c"
# The encoder and projector (§5) on a random vision checkpoint: three image sizes,
# two images in one call, a 3-frame item; 1e-5 of max|float64 reference|; the same
# bits for two images together as alone, at 1 and 2 threads and every kernel table.
m=$(model tiny-a-vision tiny-a --vision)
"$PYTHON" tests/ref/vision_c_check.py encode "$tool" "$m" "$K3_BUILD/vision-c"
# The placeholder path (k3_forward_embeds, §4 step 3): rows equal to tokens'
# embeddings in place of placeholder ids give the text prompt's logits, byte for
# byte, resident and in pieces of 3 with streamed embeddings (tests/progs/embeds_check.c).
"$K3_BUILD/progs/embeds_check" "$m" || die "embeds_check failed"
# k3 MODEL --image ... --prompt: the prompt ids of §4 and the last logits of the rows fed
# directly (release tokenizer, a 163,840-id vision model); refusals exit 2.
REL=../shared/k3-release
[ -f "$REL/tiktoken.model" ] || die "$REL/tiktoken.model is missing (CI provides ../shared)"
big=$(model vision-163k tiny-a --vocab 163840 --vision)
plain=$(model tiny-a tiny-a)
"$PYTHON" tests/ref/vision_c_check.py cli "$K3_BIN" "$tool" "$K3_BUILD/progs/embeds_check" \
    "$big" "$plain" "$REL" "$K3_BUILD/vision-c/cli"
