/* fuzz_codec.c - the BF16 block decoder of a compressed trunk
 * (io/codec.c, k3_codec_decode) on arbitrary stored blocks, and the
 * encoder's round trip on arbitrary images. The decoder is a parser of
 * trunk.bin's bytes: it must refuse or decode, never read or write outside
 * its buffers.
 *
 * Input: byte 0 even - decode: bytes 1..3 the image length n (24-bit
 * little-endian, taken modulo K3_CODEC_BLOCK + 1), the rest one stored
 * block. Byte 0 odd - round trip: the rest (at most K3_CODEC_BLOCK bytes)
 * an image. Seeds (tests/fuzz/seeds/codec/): blocks of a compressed tiny-a
 * trunk, hand-made edge blocks, and images.
 *
 * Promises checked: an accepted raw block decodes to its bytes; any
 * accepted block's image, encoded again by either encoder (huffman,
 * nibble), decodes to itself; an encoded
 * image is at most one byte longer than the image and decodes to exactly
 * it, writing nothing past it. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Encodes img[0..n) with enc, decodes it back, checks the round trip. */
static void round_trip_by(size_t (*enc)(const uint8_t *, size_t, uint8_t *), const uint8_t *img,
                          size_t n)
{
    uint8_t *st = malloc(K3_CODEC_MAX_STORED), *back = malloc(n + 1);
    FZ_ASSERT(st && back, "out of memory");
    size_t len = enc(img, n, st);
    FZ_ASSERT(len >= 1 && len <= n + 1, "stored %zu bytes for %zu", len, n);
    const char *why = "";
    back[n] = 0x5a;
    FZ_ASSERT(k3_codec_decode(st, len, back, n, &why) == 0, "own block refused: %s", why);
    FZ_ASSERT(!memcmp(back, img, n), "round trip changed the image (%zu bytes)", n);
    FZ_ASSERT(back[n] == 0x5a, "decoder wrote past the image");
    free(st);
    free(back);
}

/* Both encoders (huffman and nibble blocks). */
static void round_trip(const uint8_t *img, size_t n)
{
    round_trip_by(k3_codec_encode, img, n);
    round_trip_by(k3_codec_encode_nibble, img, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1) {
        size_t n = size - 1 < K3_CODEC_BLOCK ? size - 1 : K3_CODEC_BLOCK;
        round_trip(data + 1, n);
        return 0;
    }
    if (size < 4)
        return 0;
    size_t n = ((size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16) %
               (K3_CODEC_BLOCK + 1);
    /* An exact-size copy, so ASan sees a read past the block. */
    size_t len = size - 4;
    uint8_t *block = malloc(len ? len : 1), *img = malloc(n ? n : 1);
    FZ_ASSERT(block && img, "out of memory");
    memcpy(block, data + 4, len);
    const char *why = "";
    if (k3_codec_decode(block, len, img, n, &why) == 0) {
        if (block[0] == K3_CODEC_RAW)
            FZ_ASSERT(len == n + 1 && !memcmp(img, block + 1, n), "raw block changed");
        round_trip(img, n);
    } else {
        FZ_ASSERT(why && why[0], "refusal without a reason");
    }
    free(block);
    free(img);
    return 0;
}
