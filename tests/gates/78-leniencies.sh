# 78-leniencies: what the chat reader (k3 --render-chat, --history and
# k3 serve share it) decides on the red team's lenient cases (issue 35,
# docs/SECURITY.md "Decided leniencies"): a tool of another type than
# "function" is refused (the docs' 400), a body starting with a UTF-8 byte
# order mark is named as such (not "bad number"), base64 with more padding
# than a group needs is named as padding (not "stray last digit"); a data
# URL whose MIME type disagrees with its bytes (image/gif holding a PNG) is
# accepted: the bytes' signature decides the format, as documented.
# Fails on the code before: tools [{"type": "x"}] exit 0, the other two
# messages differ.
. tests/gates/lib.sh

work="$K3_BUILD/leniencies"
rm -rf "$work"
mkdir -p "$work"
"$PYTHON" - "$work" <<'PY'
import base64, json, os, struct, sys, zlib
d = sys.argv[1]
def chunk(t, b):
    return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) +
       chunk(b"IDAT", zlib.compress(b"\x00" + bytes(6) + b"\x00" + bytes(6))) + chunk(b"IEND", b""))
b64 = base64.b64encode(png).decode().rstrip("=")
pad = "=" * (-len(b64) % 4)
def conv(name, url=None, tools=None, raw=None):
    m = {"messages": [{"role": "user", "content": "hi" if url is None else
                       [{"type": "image_url", "image_url": {"url": url}}]}]}
    if tools is not None:
        m["tools"] = tools
    text = raw if raw is not None else json.dumps(m).encode()
    open(os.path.join(d, name), "wb").write(text)
conv("tool_x.json", tools=[{"type": "x"}])
conv("tool_fn.json", tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
conv("bom.json", raw=b"\xef\xbb\xbf" + json.dumps({"messages": []}).encode())
conv("pad.json", url="data:image/png;base64," + b64 + pad + "===")
conv("gif.json", url="data:image/gif;base64," + b64 + pad)
PY
expect_exit 2 'tools\[0\]\.type: only "function" tools' "$K3_BIN" --render-chat "$work/tool_x.json"
"$K3_BIN" --render-chat "$work/tool_fn.json" >/dev/null || die "a function tool was refused"
expect_exit 2 "byte 0: a UTF-8 byte order mark" "$K3_BIN" --render-chat "$work/bom.json"
expect_exit 2 "base64 ends in [0-9]+ '='" "$K3_BIN" --render-chat "$work/pad.json"
"$K3_BIN" --render-chat "$work/gif.json" | grep -q "image 2x2" ||
    die "image/gif holding PNG bytes: not read as the PNG it is"
echo "PASS"
