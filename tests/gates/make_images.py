"""Gate 77's images, written by hand (no imaging library needed), into DIR:
  m448.png, big.png   448x448 and 10000x10000 RGB PNGs of zeros (big.png is
                      ~290 KB: 300 MB of pixels compressed), and h_NAME.jsonl,
                      a --history line holding NAME as a data URL
  small.png           28x28 with varied pixels (runs under any context)
  noiend.png          small.png without its IEND chunk (cut after its IDAT)
  scans190.jpg        a valid progressive JPEG (3 components, 64x64): a DC
                      scan, then one scan per component and AC coefficient (190)
  manyscans.jpg       the same frame in 2647 scans: each coefficient's first
                      scan at Al=13 then 13 refinement scans (a valid
                      successive-approximation progression), each scan a few
                      bytes of EOB runs over 65,536 blocks per component
                      (manyscans.n, manyscans.size: the scan count, the frame)
Usage: make_images.py DIR"""
import base64
import json
import os
import struct
import sys
import zlib


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)


def png(w, h, row_of, iend=True):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    c = zlib.compressobj(9)
    parts = [c.compress(b"\x00" + row_of(y)) for y in range(h)]
    parts.append(c.flush())
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts))
    return out + (chunk(b"IEND", b"") if iend else b"")


def seg(marker, body):
    return b"\xff" + bytes([marker]) + struct.pack(">H", len(body) + 2) + body


class Bits:
    def __init__(self):
        self.bits = []

    def put(self, value, n):
        for i in range(n - 1, -1, -1):
            self.bits.append((value >> i) & 1)

    def data(self):
        b = self.bits + [1] * (-len(self.bits) % 8)
        out = bytearray()
        for i in range(0, len(b), 8):
            v = int("".join(map(str, b[i:i + 8])), 2)
            out.append(v)
            if v == 0xFF:
                out.append(0)  # byte stuffing
        return bytes(out)


def eob_runs(nblocks):
    """An AC scan where every block ends at once: EOBRUN symbols (r << 4,
    r <= 14, run = 2^r + r extra bits), 4-bit codes (code = r)."""
    bits = Bits()
    left = nblocks
    while left:
        run = min(left, 32767)
        r = run.bit_length() - 1
        bits.put(r, 4)
        bits.put(run - (1 << r), r)
        left -= run
    return bits.data()


def jpeg(side, al_top):
    """A progressive 3-component JPEG of side x side zero coefficients."""
    nb = (side // 8) ** 2
    out = b"\xff\xd8"
    out += seg(0xDB, b"\x00" + bytes([1] * 64))
    out += seg(0xC2, struct.pack(">BHHB", 8, side, side, 3) + b"\x01\x11\x00\x02\x11\x00\x03\x11\x00")
    # DC table 0: one code "0" for category 0; AC table 0: EOBRUN symbols
    # r << 4, r = 0..14, all 4-bit codes.
    out += seg(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\x00")
    out += seg(0xC4, b"\x10" + bytes([0, 0, 0, 15] + [0] * 12) + bytes(r << 4 for r in range(15)))
    n = 1
    dc = bytes(3 * nb // 8)  # 3 blocks per MCU, 1 bit each (all "0")
    out += seg(0xDA, b"\x03\x01\x00\x02\x00\x03\x00\x00\x00\x00") + dc
    ac = eob_runs(nb)
    for comp in (1, 2, 3):
        for k in range(1, 64):
            steps = [(0, al_top)] + [(a + 1, a) for a in range(al_top - 1, -1, -1)]
            for ah, al in steps:
                out += seg(0xDA, bytes([1, comp, 0x00, k, k, (ah << 4) | al])) + ac
                n += 1
    return out + b"\xff\xd9", n


def main():
    d = sys.argv[1]
    W = lambda name: os.path.join(d, name)
    for name, side in (("m448.png", 448), ("big.png", 10000)):
        zero = bytes(side * 3)
        data = png(side, side, lambda y: zero)
        open(W(name), "wb").write(data)
        url = "data:image/png;base64," + base64.b64encode(data).decode()
        line = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                            {"type": "text", "text": "what is it?"}]}
        open(W("h_" + name + ".jsonl"), "w").write(json.dumps(line) + "\n")
    small = lambda y: bytes((x * 9 + y * 5 + c * 80) % 256 for x in range(28) for c in range(3))
    open(W("small.png"), "wb").write(png(28, 28, small))
    open(W("noiend.png"), "wb").write(png(28, 28, small, iend=False))
    data, n = jpeg(64, 0)
    open(W("scans190.jpg"), "wb").write(data)
    data, n = jpeg(2048, 13)
    open(W("manyscans.jpg"), "wb").write(data)
    open(W("manyscans.n"), "w").write(str(n))
    open(W("manyscans.size"), "w").write("2048x2048")


main()
