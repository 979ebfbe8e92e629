# 16-vision-reference: the float64 vision reference (tools/k3vision_ref.py, written
# from docs/VISION.md) checks itself: Pillow-exact BICUBIC resize, the resize plan,
# torch's bilinear for the position table, RoPE identities, the whole encoder and
# projector against a torch re-statement of the release's code on a
# make_checkpoint.py --vision model, and that every step of the path matters.
# See tests/ref/test_vision_reference.py.
# ladder: check
# (make check and CI only, not make test: the python vision reference checking itself (torch); C changes cannot move it)
. tests/gates/lib.sh
"$PYTHON" -c 'import torch, PIL' 2>/dev/null || die "gate 16 needs python3-torch and python3-pil"
"$PYTHON" tests/ref/test_vision_reference.py
