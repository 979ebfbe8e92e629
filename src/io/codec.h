/* codec.h - the lossless BF16 block codec and the block hashes of a
 * format-3 packed trunk (io/trunk_format.h holds the file layout; this is
 * the contract of one block's bytes).
 *
 * A run image is cut into blocks of K3_CODEC_BLOCK bytes (the last one
 * shorter). The image is read as little-endian 16-bit words, BF16 values in
 * practice: bit 15 sign, bits 14..7 exponent, bits 6..0 mantissa. Trained
 * weights use a few exponents (k3-nano: 3.1 bits of entropy in 8), the sign
 * and mantissa are noise; so each word is split into its exponent byte,
 * entropy-coded, and a sign+mantissa byte (sign in bit 7, mantissa in bits
 * 6..0), kept raw.
 *
 * A stored block is one of:
 *   raw:     [0x00] then the n image bytes (n = the block's image length);
 *   huffman: [0x01] [128 bytes: code length of exponent e in the low nibble
 *            of byte e/2 for even e, the high nibble for odd e; 0 = unused,
 *            1..K3_CODEC_MAXLEN] [3 u16 little-endian: the byte lengths of
 *            bitstreams 0, 1, 2; stream 3 is the rest of the block]
 *            [n/2 sign+mantissa bytes, word order] [the 4 bitstreams back to
 *            back]. Stream j holds the canonical Huffman codes of the
 *            exponents of words j, j + 4, j + 8, ..., packed from the least
 *            significant bit of each byte up, each code's first bit lowest;
 *            exactly ceil(bits / 8) bytes, the unused high bits of the last
 *            byte zero. Four streams so that the decoder has four
 *            independent dependency chains (2-3x faster than one).
 *   nibble:  [0x02] [15 bytes: the exponents of nibble values 0..14]
 *            [n/2 sign+mantissa bytes, word order] [ceil(n/4) nibble bytes:
 *            word 2i's nibble in the low half of byte i, word 2i+1's in the
 *            high half; with an odd word count the last high half is 0]
 *            [one byte per word whose nibble is 15 (an escape): its
 *            exponent, in word order]. A word's exponent is the table's
 *            entry for its nibble, or its escape byte. Four bits a word for
 *            the 15 commonest exponents (trained BF16 uses 16-24 values and
 *            a handful carry nearly all words), so it stores ~75% of the
 *            image against huffman's ~67%, but decodes with independent
 *            table lookups instead of bit-serial chains: ~3x huffman's
 *            speed per core (docs/PERFORMANCE.md, "Lossless trunk").
 *            `k3 pack-trunk --compress-fast` writes it (trunk codec
 *            "bf16-nibble"), the smaller of it and raw per block.
 *   Canonical codes: symbols sorted by (length, value) get consecutive codes,
 *   as in DEFLATE. The lengths must form a complete prefix code (Kraft sum
 *   exactly 1): the encoder gives a block of one exponent a second, unused
 *   symbol of length 1. Huffman needs n even and n >= 2; the packer stores
 *   a block raw whenever huffman would not be smaller.
 * The decoder refuses (never reads or writes outside its buffers) a block
 * whose mode is unknown, whose stored length does not match its mode, whose
 * code lengths are not a complete code, whose bitstream is shorter or
 * longer than its symbols need, whose escape bytes are more or fewer than
 * its nibbles of 15, or whose padding nibble is not 0. Everything else decodes to SOME image; the
 * block hash says whether it is the right one.
 *
 * Block hashes: block k's hash is XXH3-64 (seed 0) of its image bytes (the
 * DECODED bytes, so a stored block that lies fails), and a run's checksum
 * is XXH3-64 of its blocks' hashes written as little-endian u64s in block
 * order. Per block, not one stream, so that blocks decode and hash in
 * parallel, each while it is hot in cache. Plain (uncompressed) runs of
 * format 3 are hashed the same way. */
#ifndef K3_IO_CODEC_H
#define K3_IO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define K3_CODEC_BLOCK 65536u
#define K3_CODEC_MAXLEN 12
#define K3_CODEC_STREAMS 4
#define K3_CODEC_HEADER 135u     /* mode byte, code lengths, 3 stream lengths */
/* Largest stored block (a raw one). */
#define K3_CODEC_MAX_STORED (K3_CODEC_BLOCK + 1u)

#define K3_CODEC_NIB_HEADER 16u /* mode byte, the 15 exponents of the nibbles */

enum { K3_CODEC_RAW = 0, K3_CODEC_HUFF = 1, K3_CODEC_NIBBLE = 2 };

/* Blocks of an image of len bytes. */
static inline uint64_t k3_codec_nblocks(uint64_t len)
{
    return (len + K3_CODEC_BLOCK - 1) / K3_CODEC_BLOCK;
}

/* Image bytes of block k of an image of len bytes. */
static inline size_t k3_codec_block_len(uint64_t len, uint64_t k)
{
    uint64_t at = k * K3_CODEC_BLOCK;
    return len - at < K3_CODEC_BLOCK ? (size_t)(len - at) : K3_CODEC_BLOCK;
}

/* Stores src[0..n) (n <= K3_CODEC_BLOCK) into dst (K3_CODEC_MAX_STORED
 * bytes), the smaller of huffman and raw; returns the stored length. */
size_t k3_codec_encode(const uint8_t *src, size_t n, uint8_t *dst);

/* The same with the nibble mode: the smaller of nibble and raw. */
size_t k3_codec_encode_nibble(const uint8_t *src, size_t n, uint8_t *dst);

/* Decodes the stored block src[0..len) into dst[0..n) (n its image length,
 * <= K3_CODEC_BLOCK). 0 on success; -1 with *why (a static string) when the
 * block is malformed (see above; dst is then undefined). Thread-safe. */
int k3_codec_decode(const uint8_t *src, size_t len, uint8_t *dst, size_t n, const char **why);

/* XXH3-64 of the block hashes h[0..n) as little-endian u64s (a run's
 * checksum). Rewrites h in place in that byte order (a no-op on
 * little-endian hosts). */
uint64_t k3_codec_fold(uint64_t *h, size_t n);

/* *out = the format-3 checksum of an image held in memory: its blocks
 * hashed (in parallel, OpenMP) and folded. -1 when the hash array (8 bytes
 * per block) cannot be allocated. */
int k3_codec_image_hash(const uint8_t *img, uint64_t len, uint64_t *out);

#endif
