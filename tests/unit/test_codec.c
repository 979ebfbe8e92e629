/* test_codec.c - util/xxh3 against libxxhash 0.8.1's XXH3_64bits (values
 * taken by linking -lxxhash), and the BF16 block codec (io/codec.h): every
 * kind of block round-trips exactly, every malformed block is refused
 * without reading or writing outside its buffers (huffman and nibble
 * blocks); prints both decoders' and the hash's single-core speed on
 * trained-like BF16 and the ratios. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "io/codec.h"
#include "util/xxh3.h"

static const struct { size_t n; uint64_t h; } VEC[] = {
    { 0, 0x2d06800538d394c2ull },     { 1, 0x13e608bc156defedull },
    { 3, 0xa9088dda485b481cull },     { 4, 0x6d9253b16c8b1ed3ull },
    { 8, 0x60539db630471163ull },     { 9, 0xfeff668361d723a8ull },
    { 16, 0xb8c859b0f030b585ull },    { 17, 0x714a04408e79b80full },
    { 128, 0x67425a03650261bfull },   { 129, 0xc664bf3311c6abc4ull },
    { 240, 0x64556dc6b462a6cfull },   { 241, 0x8beadd3a8874fe17ull },
    { 1000, 0x6c4f14bd97bd9e82ull },  { 65536, 0x5d03b43b14c75500ull },
    { 70000, 0x1d77e8fd7db4e024ull },
};

/* This thread's CPU time: the speeds are per CPU-second, so a loaded
 * machine (other processes on the core) does not understate them. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* BF16 words shaped like trained weights: exponents around 2^-4 with a
 * geometric spread, random sign and mantissa. */
static void trained_like(uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned e = 123;
        while (next() % 3 == 0 && e > 100)
            e--;
        unsigned v = (next() & 1) << 15 | e << 7 | (next() & 0x7f);
        p[i] = (uint8_t)v;
        p[i + 1] = (uint8_t)(v >> 8);
    }
    if (n % 2)
        p[n - 1] = (uint8_t)next();
}

/* A block of BF16 words over twenty exponents, uniform: more than the
 * nibble mode's 15 codes, so a quarter of the words are escapes. */
static void twenty_exponents(uint8_t *p)
{
    for (size_t i = 0; i < K3_CODEC_BLOCK; i += 2) {
        unsigned e = 100 + next() % 20;
        p[i] = (uint8_t)((e & 1) << 7 | (next() & 0x7f));
        p[i + 1] = (uint8_t)(e >> 1 | (next() & 0x80));
    }
}

/* Encodes src with enc, checks the stored form decodes back exactly;
 * returns the stored length. */
static size_t round_trip_by(size_t (*enc)(const uint8_t *, size_t, uint8_t *),
                            const uint8_t *src, size_t n, uint8_t *st, const char *what)
{
    static uint8_t out[K3_CODEC_BLOCK + 64];
    size_t len = enc(src, n, st);
    const char *why = "";
    CHECK(len <= 1 + n, "%s: stored %zu > raw %zu", what, len, 1 + n);
    memset(out, 0xa5, sizeof out);
    CHECK(k3_codec_decode(st, len, out, n, &why) == 0, "%s: refused: %s", what, why);
    CHECK(!memcmp(out, src, n), "%s: decodes to other bytes", what);
    CHECK(out[n] == 0xa5, "%s: wrote past the image", what);
    return len;
}

/* The nibble mode's stored length and mode of the last round_trip. */
static size_t nib_len;
static int nib_mode;

/* Both encoders' round trips; returns huffman's stored length (st holds
 * huffman's block). */
static size_t round_trip(const uint8_t *src, size_t n, uint8_t *st, const char *what)
{
    static uint8_t st_nib[K3_CODEC_MAX_STORED];
    nib_len = round_trip_by(k3_codec_encode_nibble, src, n, st_nib, what);
    nib_mode = st_nib[0];
    return round_trip_by(k3_codec_encode, src, n, st, what);
}

int main(void)
{
    static uint8_t d[70000], st[K3_CODEC_MAX_STORED], st2[K3_CODEC_MAX_STORED + 8],
        out[K3_CODEC_BLOCK];
    for (int i = 0; i < 70000; i++)
        d[i] = (uint8_t)((i * 7 + 3) & 255);
    for (size_t i = 0; i < sizeof VEC / sizeof *VEC; i++) {
        CHECK(k3_xxh3_64(d, VEC[i].n) == VEC[i].h, "xxh3 of %zu bytes", VEC[i].n);
        CHECK(k3_xxh3_64_baseline(d, VEC[i].n) == VEC[i].h, "baseline xxh3 of %zu bytes",
              VEC[i].n);
    }
    /* The vector path (xxh3.c) against the baseline on random bytes, every
     * length around its 240-byte switch and the stripe and block edges. */
    {
        static uint8_t r[70000];
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = (uint8_t)next();
        for (size_t n = 0; n < sizeof r; n += n < 1100 ? 1 : 997)
            CHECK(k3_xxh3_64(r + n % 7, n - n % 7) == k3_xxh3_64_baseline(r + n % 7, n - n % 7),
                  "xxh3 %s path against the baseline at %zu bytes", k3_xxh3_path(), n - n % 7);
    }

    /* Round trips: trained-like, random, zeros, one exponent, odd, tiny. */
    uint8_t *src = malloc(K3_CODEC_BLOCK);
    trained_like(src, K3_CODEC_BLOCK);
    size_t tl = round_trip(src, K3_CODEC_BLOCK, st, "trained-like");
    CHECK(st[0] == K3_CODEC_HUFF && tl < K3_CODEC_BLOCK * 3 / 4, "trained-like stored %zu", tl);
    CHECK(nib_mode == K3_CODEC_NIBBLE && nib_len == K3_CODEC_NIB_HEADER + K3_CODEC_BLOCK * 3 / 4,
          "trained-like as nibbles: mode %d, %zu bytes (no escapes expected)", nib_mode, nib_len);
    for (size_t n = 0; n < 40; n++)
        round_trip(src, n, st, "short prefix");
    round_trip(src, 12345, st, "odd length");
    for (size_t i = 0; i < K3_CODEC_BLOCK; i++)
        src[i] = (uint8_t)next();
    CHECK(round_trip(src, K3_CODEC_BLOCK, st, "random") == 1 + K3_CODEC_BLOCK,
          "random bytes not stored raw");
    memset(src, 0, K3_CODEC_BLOCK);
    CHECK(round_trip(src, K3_CODEC_BLOCK, st, "zeros") < K3_CODEC_BLOCK * 6 / 10, "zeros");
    for (size_t i = 0; i < K3_CODEC_BLOCK; i += 2) {
        src[i] = (uint8_t)(next() | 0x80);
        src[i + 1] = (uint8_t)(0x3d | (next() & 0x80));
    }
    round_trip(src, K3_CODEC_BLOCK, st, "one exponent");
    /* Skewed enough to need the length limit (a geometric spread of 60). */
    for (size_t i = 0; i < K3_CODEC_BLOCK; i += 2) {
        unsigned e = 0;
        while (next() & 1 && e < 250)
            e++;
        src[i] = (uint8_t)((e & 1) << 7);
        src[i + 1] = (uint8_t)(e >> 1);
    }
    round_trip(src, K3_CODEC_BLOCK, st, "length-limited");
    CHECK(nib_mode == K3_CODEC_NIBBLE, "length-limited as nibbles: mode %d", nib_mode);
    /* Twenty exponents, uniform: a quarter of the words are escapes. */
    twenty_exponents(src);
    round_trip(src, K3_CODEC_BLOCK, st, "twenty exponents");
    size_t esc_words = nib_len - (K3_CODEC_NIB_HEADER + K3_CODEC_BLOCK * 3 / 4);
    CHECK(nib_mode == K3_CODEC_NIBBLE && esc_words > K3_CODEC_BLOCK / 2 / 5 &&
              esc_words < K3_CODEC_BLOCK / 2 / 3,
          "twenty exponents: mode %d, %zu escapes", nib_mode, esc_words);
    for (size_t n = 0; n < 40; n++)
        round_trip(src, n, st, "short prefix of escapes");
    round_trip(src, 12346, st, "odd word count");
    /* Every exponent: more escapes than the nibbles save, so raw. */
    for (size_t i = 0; i < K3_CODEC_BLOCK; i++)
        src[i] = (uint8_t)next();
    round_trip(src, K3_CODEC_BLOCK, st, "uniform");
    CHECK(nib_mode == K3_CODEC_RAW, "uniform exponents as nibbles: mode %d", nib_mode);

    /* Refusals. */
    trained_like(src, K3_CODEC_BLOCK);
    size_t len = k3_codec_encode(src, K3_CODEC_BLOCK, st);
    const char *why = "";
    CHECK(k3_codec_decode(st, len - 1, out, K3_CODEC_BLOCK, &why) != 0, "one byte short");
    memcpy(st2, st, len);
    st2[len] = 0;
    CHECK(k3_codec_decode(st2, len + 1, out, K3_CODEC_BLOCK, &why) != 0, "one byte long");
    CHECK(k3_codec_decode(st, 100, out, K3_CODEC_BLOCK, &why) != 0, "header only");
    CHECK(k3_codec_decode(st, 0, out, K3_CODEC_BLOCK, &why) != 0, "empty");
    memcpy(st2, st, len);
    st2[0] = 7;
    CHECK(k3_codec_decode(st2, len, out, K3_CODEC_BLOCK, &why) != 0, "bad mode");
    memcpy(st2, st, len);
    st2[1 + 123 / 2] ^= 0x10; /* a length changes: the code is no longer complete */
    CHECK(k3_codec_decode(st2, len, out, K3_CODEC_BLOCK, &why) != 0, "incomplete code");
    memcpy(st2, st, len);
    st2[K3_CODEC_HEADER] ^= 1; /* a sign+mantissa byte: decodes, hashes differently */
    CHECK(k3_codec_decode(st2, len, out, K3_CODEC_BLOCK, &why) == 0 &&
              k3_xxh3_64(out, K3_CODEC_BLOCK) != k3_xxh3_64(src, K3_CODEC_BLOCK),
          "a flipped byte goes unnoticed by the block hash");
    /* Nibble blocks: an escape byte missing or extra, too short, a padding
     * nibble that is not 0. */
    twenty_exponents(src);
    len = k3_codec_encode_nibble(src, K3_CODEC_BLOCK, st);
    CHECK(st[0] == K3_CODEC_NIBBLE && k3_codec_decode(st, len, out, K3_CODEC_BLOCK, &why) == 0,
          "nibble block: %s", why);
    CHECK(k3_codec_decode(st, len - 1, out, K3_CODEC_BLOCK, &why) != 0 && strstr(why, "escape"),
          "nibble: an escape byte missing: %s", why);
    memcpy(st2, st, len);
    st2[len] = 0;
    CHECK(k3_codec_decode(st2, len + 1, out, K3_CODEC_BLOCK, &why) != 0 && strstr(why, "escape"),
          "nibble: an escape byte extra: %s", why);
    CHECK(k3_codec_decode(st, K3_CODEC_NIB_HEADER + 100, out, K3_CODEC_BLOCK, &why) != 0,
          "nibble: header only");
    memcpy(st2, st, len);
    st2[K3_CODEC_NIB_HEADER + K3_CODEC_BLOCK / 2] ^= 0x0f; /* a nibble changes: 15 <-> not */
    int esc_change = (st[K3_CODEC_NIB_HEADER + K3_CODEC_BLOCK / 2] & 15) == 15 ||
                     (st2[K3_CODEC_NIB_HEADER + K3_CODEC_BLOCK / 2] & 15) == 15;
    CHECK(!esc_change || k3_codec_decode(st2, len, out, K3_CODEC_BLOCK, &why) != 0,
          "nibble: an escape appears or vanishes unnoticed");
    {
        /* Three words: the last nibble byte's high half pads. */
        uint8_t b[K3_CODEC_NIB_HEADER + 3 + 2] = { K3_CODEC_NIBBLE, 120, 121, 122 };
        b[K3_CODEC_NIB_HEADER + 3] = 0x21;
        b[K3_CODEC_NIB_HEADER + 4] = 0x00;
        CHECK(k3_codec_decode(b, sizeof b, out, 6, &why) == 0 && (out[1] & 0x7f) == 121 >> 1 &&
                  (out[3] & 0x7f) == 122 >> 1 && (out[5] & 0x7f) == 120 >> 1,
              "nibble: three words: %s", why);
        b[K3_CODEC_NIB_HEADER + 4] = 0x10;
        CHECK(k3_codec_decode(b, sizeof b, out, 6, &why) != 0 && strstr(why, "padding"),
              "nibble: a padding nibble of 1: %s", why);
        CHECK(k3_codec_decode(b, sizeof b, out, 7, &why) != 0, "nibble: an odd image");
    }
    uint8_t raw[5] = { K3_CODEC_RAW, 1, 2, 3, 4 };
    CHECK(k3_codec_decode(raw, 5, out, 5, &why) != 0, "raw of the wrong length");
    /* Random garbage: refused or decoded, never out of bounds (ASan). */
    for (int t = 0; t < 2000; t++) {
        size_t n = next() % 600, sl = next() % 800;
        for (size_t i = 0; i < sl; i++)
            st2[i] = (uint8_t)next();
        st2[0] = (uint8_t)(next() % 3);
        k3_codec_decode(st2, sl, out, n, &why);
    }

    /* Speed on trained-like BF16 (one core): 64 blocks = 4 MiB. */
    enum { NB = 64 };
    uint8_t *img = malloc((size_t)NB * K3_CODEC_BLOCK), *dec = malloc((size_t)NB * K3_CODEC_BLOCK);
    uint8_t *stored = malloc((size_t)NB * K3_CODEC_MAX_STORED);
    size_t slen[NB], total = 0;
    trained_like(img, (size_t)NB * K3_CODEC_BLOCK);
    for (int k = 0; k < NB; k++)
        total += slen[k] = k3_codec_encode(img + (size_t)k * K3_CODEC_BLOCK, K3_CODEC_BLOCK,
                                           stored + (size_t)k * K3_CODEC_MAX_STORED);
    int reps = 0;
    double t0 = now(), dt;
    do {
        for (int k = 0; k < NB; k++)
            CHECK(k3_codec_decode(stored + (size_t)k * K3_CODEC_MAX_STORED, slen[k],
                                  dec + (size_t)k * K3_CODEC_BLOCK, K3_CODEC_BLOCK, &why) == 0,
                  "speed block %d", k);
        reps++;
    } while ((dt = now() - t0) < 0.3);
    double dec_gbs = (double)reps * NB * K3_CODEC_BLOCK / dt / 1e9;
    CHECK(!memcmp(img, dec, (size_t)NB * K3_CODEC_BLOCK), "speed image round trip");
    size_t nib_total = 0;
    for (int k = 0; k < NB; k++)
        nib_total += slen[k] = k3_codec_encode_nibble(img + (size_t)k * K3_CODEC_BLOCK,
                                                      K3_CODEC_BLOCK,
                                                      stored + (size_t)k * K3_CODEC_MAX_STORED);
    memset(dec, 0, (size_t)NB * K3_CODEC_BLOCK);
    reps = 0;
    t0 = now();
    do {
        for (int k = 0; k < NB; k++)
            CHECK(k3_codec_decode(stored + (size_t)k * K3_CODEC_MAX_STORED, slen[k],
                                  dec + (size_t)k * K3_CODEC_BLOCK, K3_CODEC_BLOCK, &why) == 0,
                  "nibble speed block %d", k);
        reps++;
    } while ((dt = now() - t0) < 0.3);
    double nib_gbs = (double)reps * NB * K3_CODEC_BLOCK / dt / 1e9;
    CHECK(!memcmp(img, dec, (size_t)NB * K3_CODEC_BLOCK), "nibble speed image round trip");
    uint64_t sink = 0;
    double hash_gbs[2];
    for (int path = 0; path < 2; path++) {
        reps = 0;
        t0 = now();
        do {
            for (int k = 0; k < NB; k++)
                sink += (path ? k3_xxh3_64_baseline : k3_xxh3_64)(
                        dec + (size_t)k * K3_CODEC_BLOCK, K3_CODEC_BLOCK);
            reps++;
        } while ((dt = now() - t0) < 0.3);
        hash_gbs[path] = (double)reps * NB * K3_CODEC_BLOCK / dt / 1e9;
    }
    printf("codec: trained-like bf16 stored at %.1f%% (huffman) and %.1f%% (nibble) of its "
           "bytes; decoders %.2f and %.2f GB/s, xxh3 %.2f GB/s (%s; baseline %.2f) of image per "
           "CPU-second of one core (%llx)\n",
           100.0 * (double)total / (NB * (double)K3_CODEC_BLOCK),
           100.0 * (double)nib_total / (NB * (double)K3_CODEC_BLOCK), dec_gbs, nib_gbs,
           hash_gbs[0], k3_xxh3_path(), hash_gbs[1], (unsigned long long)(sink & 0xf));
    free(img);
    free(dec);
    free(stored);
    free(src);
    return check_report("codec");
}
