/* codec.c - see codec.h.
 *
 * The decoder in two passes per huffman block: (1) the four bitstreams'
 * exponents into a byte array in word order, one lookup of a 12-bit table
 * yielding up to 3 of them (build_tables); (2) join_words, a loop the
 * compiler vectorises, puts each exponent back between its sign and
 * mantissa. Measured (benchmarks/codec_decode.c on the packed trunks of
 * k3-nano and a random wide-moe, docs/PERFORMANCE.md "Lossless trunk"):
 * ~2.2-2.3 GB/s of image per CPU-second of one core, against ~1.3 for
 * the one-symbol-per-lookup decoder that wrote the words directly. About
 * half of what remains is building the tables (per block; lengths rarely
 * repeat), half the lookups. Nibble blocks (decode_nibble) trade ~8% more
 * bytes for lookups with no chain between them: ~3x the speed. */
#include "io/codec.h"

#include <stdlib.h>
#include <string.h>

#include "util/xxh3.h"

#define TABLE_BITS K3_CODEC_MAXLEN
#define TABLE_SIZE (1u << TABLE_BITS)

/* ---- encoding (the packer's side) ---- */

typedef struct {
    uint64_t f;
    int sym;
} leaf;

static int by_freq(const void *a, const void *b)
{
    const leaf *x = a, *y = b;
    if (x->f != y->f)
        return x->f < y->f ? -1 : 1;
    return x->sym - y->sym;
}

/* Huffman code lengths of freq[0..256) into len (0 for unused symbols),
 * limited to K3_CODEC_MAXLEN by flattening the frequencies until they fit.
 * Two-queue construction over the sorted leaves: O(n log n). */
static void code_lengths(const uint64_t *freq_in, uint8_t *len)
{
    uint64_t freq[256];
    memcpy(freq, freq_in, sizeof freq);
    for (;;) {
        leaf lv[256];
        int n = 0;
        for (int s = 0; s < 256; s++)
            if (freq[s])
                lv[n++] = (leaf){ freq[s], s };
        memset(len, 0, 256);
        if (n == 1) {
            len[lv[0].sym] = 1;
            len[lv[0].sym ^ 1] = 1; /* unused: completes the code (codec.h) */
            return;
        }
        qsort(lv, (size_t)n, sizeof *lv, by_freq);
        /* Nodes 0..n-1 the leaves in order, n.. the internal nodes. */
        uint64_t w[511];
        int parent[511], depth[511];
        for (int i = 0; i < n; i++)
            w[i] = lv[i].f;
        int li = 0, ni = n, next = n;
        for (int k = 0; k < n - 1; k++) {
            int pick[2];
            for (int j = 0; j < 2; j++)
                pick[j] = li < n && (ni >= next || w[li] <= w[ni]) ? li++ : ni++;
            w[next] = w[pick[0]] + w[pick[1]];
            parent[pick[0]] = parent[pick[1]] = next;
            next++;
        }
        depth[next - 1] = 0;
        int maxd = 0;
        for (int i = next - 2; i >= 0; i--) {
            depth[i] = depth[parent[i]] + 1;
            if (i < n && depth[i] > maxd)
                maxd = depth[i];
        }
        if (maxd <= K3_CODEC_MAXLEN) {
            for (int i = 0; i < n; i++)
                len[lv[i].sym] = (uint8_t)depth[i];
            return;
        }
        for (int s = 0; s < 256; s++)
            if (freq[s])
                freq[s] = freq[s] / 2 + 1;
    }
}

static uint32_t reverse_bits(uint32_t c, int n)
{
    uint32_t r = 0;
    for (int i = 0; i < n; i++)
        r = r << 1 | (c >> i & 1);
    return r;
}

/* Canonical codes (bit-reversed, first bit lowest) of len into code.
 * Returns the Kraft sum scaled by 2^MAXLEN (TABLE_SIZE for a complete
 * code), or 0 when a length exceeds K3_CODEC_MAXLEN. */
static uint32_t canonical(const uint8_t *len, uint32_t *code)
{
    uint32_t count[K3_CODEC_MAXLEN + 1] = { 0 }, next[K3_CODEC_MAXLEN + 2];
    uint32_t kraft = 0;
    memset(code, 0, 256 * sizeof *code); /* unused symbols: 0, never read uninitialised */
    for (int s = 0; s < 256; s++) {
        if (len[s] > K3_CODEC_MAXLEN)
            return 0;
        if (len[s]) {
            count[len[s]]++;
            kraft += TABLE_SIZE >> len[s];
        }
    }
    uint32_t c = 0;
    for (int l = 1; l <= K3_CODEC_MAXLEN; l++) {
        c = (c + (l > 1 ? count[l - 1] : 0)) << (l > 1 ? 1 : 0);
        next[l] = c;
    }
    for (int s = 0; s < 256; s++)
        if (len[s])
            code[s] = reverse_bits(next[len[s]]++, len[s]);
    return kraft;
}

/* One bitstream being written: LSB first (codec.h). */
typedef struct {
    uint8_t *p;
    uint64_t acc;
    int nb;
} bit_writer;

static void put_code(bit_writer *w, uint32_t code, int len)
{
    w->acc |= (uint64_t)code << w->nb;
    w->nb += len;
    while (w->nb >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nb -= 8;
    }
}

size_t k3_codec_encode(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t words = n / 2;
    if (n >= 2 && n % 2 == 0) {
        uint64_t freq[256] = { 0 }, bits[K3_CODEC_STREAMS] = { 0 };
        for (size_t i = 0; i < words; i++)
            freq[(src[2 * i + 1] & 0x7f) << 1 | src[2 * i] >> 7]++;
        uint8_t len[256];
        uint32_t code[256];
        code_lengths(freq, len);
        canonical(len, code);
        for (size_t i = 0; i < words; i++)
            bits[i % K3_CODEC_STREAMS] += len[(src[2 * i + 1] & 0x7f) << 1 | src[2 * i] >> 7];
        size_t total = K3_CODEC_HEADER + words;
        for (int j = 0; j < K3_CODEC_STREAMS; j++)
            total += (size_t)((bits[j] + 7) / 8);
        if (total < 1 + n) {
            dst[0] = K3_CODEC_HUFF;
            for (int s = 0; s < 256; s += 2)
                dst[1 + s / 2] = (uint8_t)(len[s] | len[s + 1] << 4);
            uint8_t *sm = dst + K3_CODEC_HEADER;
            bit_writer w[K3_CODEC_STREAMS];
            uint8_t *at = sm + words;
            for (int j = 0; j < K3_CODEC_STREAMS; j++) {
                size_t bytes = (size_t)((bits[j] + 7) / 8);
                if (j < K3_CODEC_STREAMS - 1) { /* u16 LE: <= 8192 codes of 12 bits */
                    dst[129 + 2 * j] = (uint8_t)bytes;
                    dst[130 + 2 * j] = (uint8_t)(bytes >> 8);
                }
                w[j] = (bit_writer){ at, 0, 0 };
                at += bytes;
            }
            for (size_t i = 0; i < words; i++) {
                uint8_t lo = src[2 * i], hi = src[2 * i + 1];
                int e = (hi & 0x7f) << 1 | lo >> 7;
                sm[i] = (uint8_t)((hi & 0x80) | (lo & 0x7f));
                put_code(&w[i % K3_CODEC_STREAMS], code[e], len[e]);
            }
            for (int j = 0; j < K3_CODEC_STREAMS; j++)
                if (w[j].nb)
                    *w[j].p++ = (uint8_t)w[j].acc;
            return total;
        }
    }
    dst[0] = K3_CODEC_RAW;
    memcpy(dst + 1, src, n);
    return 1 + n;
}

/* The exponent byte of word i of an image (codec.h). */
static inline int word_exp(const uint8_t *src, size_t i)
{
    return (src[2 * i + 1] & 0x7f) << 1 | src[2 * i] >> 7;
}

size_t k3_codec_encode_nibble(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t words = n / 2, nib_bytes = (words + 1) / 2;
    if (n >= 2 && n % 2 == 0) {
        uint64_t freq[256] = { 0 }, kept = 0;
        for (size_t i = 0; i < words; i++)
            freq[word_exp(src, i)]++;
        /* The 15 commonest exponents, most frequent first (ties: the lower
         * value); every other exponent is an escape (nibble 15). */
        uint8_t nib[256];
        memset(nib, 15, sizeof nib);
        dst[0] = K3_CODEC_NIBBLE;
        for (int r = 0; r < 15; r++) {
            int best = -1;
            for (int e = 0; e < 256; e++)
                if (nib[e] == 15 && freq[e] && (best < 0 || freq[e] > freq[best]))
                    best = e;
            dst[1 + r] = (uint8_t)(best < 0 ? 0 : best);
            if (best >= 0) {
                nib[best] = (uint8_t)r;
                kept += freq[best];
            }
        }
        size_t total = K3_CODEC_NIB_HEADER + words + nib_bytes + (size_t)(words - kept);
        if (total < 1 + n) {
            uint8_t *sm = dst + K3_CODEC_NIB_HEADER, *nb = sm + words, *esc = nb + nib_bytes;
            memset(nb, 0, nib_bytes);
            for (size_t i = 0; i < words; i++) {
                int e = word_exp(src, i);
                sm[i] = (uint8_t)((src[2 * i + 1] & 0x80) | (src[2 * i] & 0x7f));
                nb[i / 2] |= (uint8_t)(nib[e] << (4 * (i & 1)));
                if (nib[e] == 15)
                    *esc++ = (uint8_t)e;
            }
            return total;
        }
    }
    dst[0] = K3_CODEC_RAW;
    memcpy(dst + 1, src, n);
    return 1 + n;
}

/* ---- decoding (the reader's side: a parser of untrusted bytes) ---- */

static inline uint64_t load64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

/* One bitstream being read: bytes [0, len) of p; past the end it reads as
 * zeros, and pos counts those too, so overrunning shows in the bits used. */
typedef struct {
    const uint8_t *p;
    size_t len, pos;
    uint64_t acc;
    unsigned nb;
} bit_reader;

/* Refills r to >= 56 bits held. */
static inline void refill(bit_reader *r)
{
    if (r->pos + 8 <= r->len) {
        r->acc |= load64(r->p + r->pos) << r->nb;
        r->pos += (63 - r->nb) >> 3;
        r->nb |= 56;
    } else {
        while (r->nb <= 56) {
            r->acc |= (uint64_t)(r->pos < r->len ? r->p[r->pos] : 0) << r->nb;
            r->pos++;
            r->nb += 8;
        }
    }
}

/* The decoding tables of one block, from its code lengths (a complete code,
 * so every index matches exactly one code). k is the next TABLE_BITS bits
 * of a stream, its first bit lowest.
 *   one[k]:   the symbol of the code k starts with | that code's length << 8.
 *   multi[k]: up to 3 symbols whose codes all lie within those bits, the
 *             first in bits 0..7, the next in 8..15 and 16..23; the codes'
 *             total length in bits 24..27, how many (1..3) in bits 28..29.
 *             Symbol slots past the count hold junk: the decoder stores all
 *             three and the next lookup overwrites the junk.
 * multi is what lets one lookup yield 2-3 exponents (trained BF16's codes
 * average ~3.3 bits). Built in two steps to keep its cost per block small
 * next to the block's 32768 symbols: what follows a first code of length l
 * depends only on the TABLE_BITS - l bits after it, so for each length
 * present, tail[m] = the (up to 2) further symbols in those bits m, with
 * the total length and count already including the first code; then
 * multi[code | m << l] = symbol | tail[m] is a plain strided fill. (Code
 * lengths rarely repeat between blocks - 51 distinct of 55 in k3-nano - so
 * a cache of tables would not pay.) tail: scratch of TABLE_SIZE entries. */
static void build_tables(const uint8_t *lens, const uint32_t *code, uint16_t *one,
                         uint32_t *multi, uint32_t *tail)
{
    uint32_t off[K3_CODEC_MAXLEN + 1], have[K3_CODEC_MAXLEN + 1] = { 0 };
    for (int s = 0; s < 256; s++) {
        have[lens[s]] = 1;
        for (uint32_t k = code[s]; lens[s] && k < TABLE_SIZE; k += 1u << lens[s])
            one[k] = (uint16_t)(s | lens[s] << 8);
    }
    uint32_t at = 0; /* sum over l of 2^(TABLE_BITS - l) < TABLE_SIZE */
    for (uint32_t l = 1; l <= K3_CODEC_MAXLEN; l++) {
        if (!have[l])
            continue;
        off[l] = at;
        uint32_t room = TABLE_BITS - l; /* bits known after the first code */
        for (uint32_t m = 0; m < 1u << room; m++) {
            uint32_t t2 = one[m], l2 = t2 >> 8, t3 = one[m >> l2], l3 = t3 >> 8;
            /* A further code counts only if it lies in the known bits (the
             * high bits of the index past them are zeros, not stream bits). */
            uint32_t ok2 = l2 <= room, ok3 = ok2 & (l2 + l3 <= room);
            uint32_t len = l + (l2 & (0u - ok2)) + (l3 & (0u - ok3));
            tail[at + m] = (t2 & 0xff) << 8 | (t3 & 0xff) << 16 | len << 24 | (1 + ok2 + ok3)
                                                                                 << 28;
        }
        at += 1u << room;
    }
    for (int s = 0; s < 256; s++) {
        uint32_t l = lens[s];
        if (!l)
            continue;
        const uint32_t *t = tail + off[l];
        for (uint32_t m = 0; m < 1u << (TABLE_BITS - l); m++)
            multi[code[s] | m << l] = (uint32_t)s | t[m];
    }
}

/* Slack after the exponents: a multi lookup stores 3 slots 4 apart. */
#define EX_SLACK 64u

/* Pass 2 of the decoder: the words d[0..2 words) from their sign+mantissa
 * bytes s and exponents e (none of the three overlap). Word i,
 * little-endian: low byte = exponent bit 0 (as bit 7) and the mantissa,
 * high byte = the sign and exponent bits 7..1. In chunks of a fixed 32
 * words through a local buffer, so that compilers vectorise it at -O2
 * (GCC's cheap cost model wants a known trip count and no aliasing). */
static void join_words(uint8_t *restrict d, const uint8_t *restrict s,
                       const uint8_t *restrict e, size_t words)
{
    size_t q = 0;
    for (; q + 32 <= words; q += 32) {
        uint8_t w[64];
        for (int g = 0; g < 32; g++) {
            w[2 * g] = (uint8_t)(e[q + g] << 7 | (s[q + g] & 0x7f));
            w[2 * g + 1] = (uint8_t)((s[q + g] & 0x80) | e[q + g] >> 1);
        }
        memcpy(d + 2 * q, w, sizeof w);
    }
    for (; q < words; q++) {
        d[2 * q] = (uint8_t)(e[q] << 7 | (s[q] & 0x7f));
        d[2 * q + 1] = (uint8_t)((s[q] & 0x80) | e[q] >> 1);
    }
}

/* A nibble block (codec.h), n even and >= 2 checked here. Pass 1 looks up
 * each nibble byte's two exponents in a 256-entry table (independent
 * lookups, no chain between them); pass 2 puts each escape's byte in place,
 * finding nibbles of 15 eight bytes at a time; then join_words. */
static int decode_nibble(const uint8_t *src, size_t len, uint8_t *dst, size_t n,
                         const char **why)
{
    size_t words = n / 2, nib_bytes = (words + 1) / 2;
    if (n % 2 || n < 2 || len < K3_CODEC_NIB_HEADER + words + nib_bytes)
        return *why = "a nibble block shorter than its header, sign+mantissa and nibble bytes",
               -1;
    const uint8_t *sm = src + K3_CODEC_NIB_HEADER, *nb = sm + words, *esc = nb + nib_bytes;
    size_t n_esc = len - (K3_CODEC_NIB_HEADER + words + nib_bytes), k = 0;
    if (words % 2 && nb[nib_bytes - 1] >> 4)
        return *why = "a nibble block's padding nibble is not 0", -1;
    uint8_t pair[256][2]; /* a nibble byte's two exponents, in word order */
    for (int b = 0; b < 256; b++) { /* nibble 15: 0 until its escape byte lands */
        pair[b][0] = (b & 15) < 15 ? src[1 + (b & 15)] : 0;
        pair[b][1] = (b >> 4) < 15 ? src[1 + (b >> 4)] : 0;
    }
    uint8_t ex[K3_CODEC_BLOCK / 2 + 2]; /* + 1 for the odd count's padding */
    for (size_t i = 0; i < nib_bytes; i++)
        memcpy(ex + 2 * i, pair[nb[i]], 2);
    size_t i = 0;
    for (; i + 8 <= nib_bytes; i += 8) {
        uint64_t x = load64(nb + i);
        uint64_t t = x & x >> 1 & x >> 2 & x >> 3 & 0x1111111111111111ull; /* nibbles of 15 */
        for (size_t j = 0; t; j++, t >>= 4) /* word 2i + j, in order */
            if (t & 1) {
                if (k == n_esc)
                    return *why = "a nibble block has more escapes than escape bytes", -1;
                ex[2 * i + j] = esc[k++];
            }
    }
    for (; i < nib_bytes; i++)
        for (int h = 0; h < 2; h++)
            if ((nb[i] >> (4 * h) & 15) == 15) {
                if (k == n_esc)
                    return *why = "a nibble block has more escapes than escape bytes", -1;
                ex[2 * i + (size_t)h] = esc[k++];
            }
    if (k != n_esc)
        return *why = "a nibble block has more escape bytes than escapes", -1;
    join_words(dst, sm, ex, words);
    return 0;
}

int k3_codec_decode(const uint8_t *src, size_t len, uint8_t *dst, size_t n, const char **why)
{
    if (len < 1 || n > K3_CODEC_BLOCK)
        return *why = "empty block", -1;
    if (src[0] == K3_CODEC_RAW) {
        if (len != 1 + n)
            return *why = "a raw block's stored length is not its image length + 1", -1;
        memcpy(dst, src + 1, n);
        return 0;
    }
    if (src[0] == K3_CODEC_NIBBLE)
        return decode_nibble(src, len, dst, n, why);
    if (src[0] != K3_CODEC_HUFF)
        return *why = "unknown block mode", -1;
    size_t words = n / 2;
    if (n % 2 || n < 2 || len < K3_CODEC_HEADER + words)
        return *why = "a huffman block shorter than its header and sign+mantissa bytes", -1;
    uint8_t lens[256];
    uint32_t code[256];
    for (int s = 0; s < 256; s += 2) {
        lens[s] = src[1 + s / 2] & 15;
        lens[s + 1] = src[1 + s / 2] >> 4;
    }
    if (canonical(lens, code) != TABLE_SIZE)
        return *why = "the code lengths are not a complete prefix code", -1;
    const uint8_t *sm = src + K3_CODEC_HEADER;
    bit_reader r[K3_CODEC_STREAMS];
    size_t at = K3_CODEC_HEADER + words, left = len - at;
    for (int j = 0; j < K3_CODEC_STREAMS; j++) {
        size_t bytes = left;
        if (j < K3_CODEC_STREAMS - 1)
            bytes = (size_t)src[129 + 2 * j] | (size_t)src[130 + 2 * j] << 8;
        if (bytes > left)
            return *why = "the bitstreams' lengths exceed the block", -1;
        r[j] = (bit_reader){ src + at, bytes, 0, 0, 0 };
        at += bytes;
        left -= bytes;
    }
    uint16_t one[TABLE_SIZE];
    uint32_t multi[TABLE_SIZE];
    /* The exponents of pass 1 (below); before it, build_tables' scratch. */
    union {
        uint8_t ex[K3_CODEC_BLOCK / 2 + EX_SLACK];
        uint32_t tail[TABLE_SIZE];
    } u;
    uint8_t *ex = u.ex;
    build_tables(lens, code, one, multi, u.tail);
    /* Pass 1: the exponents, in word order, into ex[0..words) (word i's
     * is the (i / 4)-th code of stream i % 4). Pass 2 joins them with the
     * sign+mantissa bytes into the words. */
    size_t cnt[K3_CODEC_STREAMS], k[K3_CODEC_STREAMS] = { 0 };
    for (int j = 0; j < K3_CODEC_STREAMS; j++)
        cnt[j] = (words + K3_CODEC_STREAMS - 1 - (size_t)j) / K3_CODEC_STREAMS;
    {
        /* Each stream refilled (>= 56 bits) then read by 4 multi lookups of
         * <= 12 bits and <= 3 symbols; so only while 12 more symbols are
         * due (cnt[3] is the least), never decoding past a stream's count:
         * the bits used, checked below, are those of exactly cnt[j] codes.
         * A lookup stores its 3 slots at ex[4k + j], ex[4k + 4 + j],
         * ex[4k + 8 + j]: past the count they are junk that the next lookup
         * or the tail overwrites, or they land in the slack (k + 2 < cnt[j]
         * + 12, so 4k + 8 + j < words + 48 <= words + EX_SLACK).
         * The readers live in locals whose address is never taken, so the
         * stores to ex cannot alias them (they stay in registers). */
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        unsigned n0 = 0, n1 = 0, n2 = 0, n3 = 0;
        size_t p0 = 0, p1 = 0, p2 = 0, p3 = 0, k0 = 0, k1 = 0, k2 = 0, k3 = 0;
        const uint8_t *s0 = r[0].p, *s1 = r[1].p, *s2 = r[2].p, *s3 = r[3].p;
        size_t l0 = r[0].len, l1 = r[1].len, l2 = r[2].len, l3 = r[3].len;
        size_t lim = cnt[3] >= 12 ? cnt[3] - 12 : 0;
#define FAST_REFILL(a, n, p, s, l)                                                      \
    if ((p) + 8 <= (l)) {                                                           \
        (a) |= load64((s) + (p)) << (n);                                            \
        (p) += (63 - (n)) >> 3;                                                     \
        (n) |= 56;                                                                  \
    } else {                                                                        \
        while ((n) <= 56) {                                                         \
            (a) |= (uint64_t)((p) < (l) ? (s)[p] : 0) << (n);                       \
            (p)++;                                                                  \
            (n) += 8;                                                               \
        }                                                                           \
    }
#define LOOK(a, n, kk, j)                                                               \
    do {                                                                                \
        uint32_t t_ = multi[(a) & (TABLE_SIZE - 1)];                                    \
        unsigned b_ = t_ >> 24 & 15;                                                    \
        uint8_t *e_ = ex + 4 * (kk) + (j);                                              \
        e_[0] = (uint8_t)t_;                                                            \
        e_[4] = (uint8_t)(t_ >> 8);                                                     \
        e_[8] = (uint8_t)(t_ >> 16);                                                    \
        (kk) += t_ >> 28;                                                               \
        (a) >>= b_;                                                                     \
        (n) -= b_;                                                                      \
    } while (0)
        if (cnt[3] >= 12)
            while (k0 <= lim && k1 <= lim && k2 <= lim && k3 <= lim) {
                FAST_REFILL(a0, n0, p0, s0, l0)
                FAST_REFILL(a1, n1, p1, s1, l1)
                FAST_REFILL(a2, n2, p2, s2, l2)
                FAST_REFILL(a3, n3, p3, s3, l3)
                for (int g = 0; g < 4; g++) {
                    LOOK(a0, n0, k0, 0);
                    LOOK(a1, n1, k1, 1);
                    LOOK(a2, n2, k2, 2);
                    LOOK(a3, n3, k3, 3);
                }
            }
#undef LOOK
#undef FAST_REFILL
        r[0] = (bit_reader){ s0, l0, p0, a0, n0 };
        r[1] = (bit_reader){ s1, l1, p1, a1, n1 };
        r[2] = (bit_reader){ s2, l2, p2, a2, n2 };
        r[3] = (bit_reader){ s3, l3, p3, a3, n3 };
        k[0] = k0, k[1] = k1, k[2] = k2, k[3] = k3;
    }
    for (int j = 0; j < K3_CODEC_STREAMS; j++) { /* the rest, one code at a time */
        bit_reader *rj = &r[j];
        for (; k[j] < cnt[j]; k[j]++) {
            if (rj->nb < K3_CODEC_MAXLEN)
                refill(rj);
            unsigned t = one[rj->acc & (TABLE_SIZE - 1)], l = t >> 8;
            ex[4 * k[j] + (size_t)j] = (uint8_t)t;
            rj->acc >>= l;
            rj->nb -= l;
        }
        uint64_t used = (uint64_t)rj->pos * 8 - rj->nb; /* bits its codes took */
        if (used > (uint64_t)rj->len * 8)
            return *why = "a bitstream ends before its symbols do", -1;
        if ((used + 7) / 8 != rj->len)
            return *why = "a bitstream is longer than its symbols", -1;
    }
    join_words(dst, sm, ex, words);
    return 0;
}

/* ---- block hashes ---- */

uint64_t k3_codec_fold(uint64_t *h, size_t n)
{
    const uint16_t probe = 1;
    if (!*(const uint8_t *)&probe) /* big-endian: swap in place */
        for (size_t i = 0; i < n; i++) {
            uint8_t b[8];
            for (int j = 0; j < 8; j++)
                b[j] = (uint8_t)(h[i] >> (8 * j));
            memcpy(&h[i], b, 8);
        }
    return k3_xxh3_64(h, n * sizeof *h);
}

int k3_codec_image_hash(const uint8_t *img, uint64_t len, uint64_t *out)
{
    uint64_t nb = k3_codec_nblocks(len);
    uint64_t *h = malloc((size_t)(nb ? nb : 1) * sizeof *h);
    if (!h)
        return -1;
    long long nbl = (long long)nb;
#pragma omp parallel for schedule(static)
    for (long long k = 0; k < nbl; k++)
        h[k] = k3_xxh3_64(img + (uint64_t)k * K3_CODEC_BLOCK,
                          k3_codec_block_len(len, (uint64_t)k));
    *out = k3_codec_fold(h, (size_t)nb);
    free(h);
    return 0;
}
