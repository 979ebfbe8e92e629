/* xxh64.c - see xxh64.h. Follows the XXH64 specification (xxhash.h,
 * doc/xxhash_spec.md): four 64-bit lanes over 32-byte stripes, then the
 * merge, the tail and the avalanche. Loads are assembled byte by byte as
 * little-endian, which compilers turn into single loads on little-endian
 * machines and which stays correct on big-endian ones. */
#include "util/xxh64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t input)
{
    acc += input * P2;
    return rotl(acc, 31) * P1;
}

static uint64_t merge(uint64_t acc, uint64_t v)
{
    acc ^= round64(0, v);
    return acc * P1 + P4;
}

/* Consumes whole 32-byte stripes of p[0..n); returns the bytes consumed. */
static size_t stripes(uint64_t v[4], const unsigned char *p, size_t n)
{
    uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = round64(a, le64(p + i));
        b = round64(b, le64(p + i + 8));
        c = round64(c, le64(p + i + 16));
        d = round64(d, le64(p + i + 24));
    }
    v[0] = a;
    v[1] = b;
    v[2] = c;
    v[3] = d;
    return i;
}

void k3_xxh64_init(k3_xxh64_state *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
}

void k3_xxh64_update(k3_xxh64_state *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->total += n;
    if (s->nbuf) {
        size_t take = 32 - s->nbuf < n ? 32 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        n -= take;
        if (s->nbuf < 32)
            return;
        stripes(s->v, s->buf, 32);
        s->nbuf = 0;
    }
    size_t done = stripes(s->v, p, n);
    memcpy(s->buf, p + done, n - done);
    s->nbuf = n - done;
}

uint64_t k3_xxh64_digest(const k3_xxh64_state *s)
{
    uint64_t h;
    if (s->total >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++)
            h = merge(h, s->v[i]);
    } else {
        h = s->v[2] + P5; /* v[2] is the seed until a stripe was consumed */
    }
    h += s->total;
    const unsigned char *p = s->buf, *end = s->buf + s->nbuf;
    for (; p + 8 <= end; p += 8)
        h = rotl(h ^ round64(0, le64(p)), 27) * P1 + P4;
    if (p + 4 <= end) {
        h = rotl(h ^ (uint64_t)le32(p) * P1, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; p++)
        h = rotl(h ^ *p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t k3_xxh64(const void *data, size_t n, uint64_t seed)
{
    k3_xxh64_state s;
    k3_xxh64_init(&s, seed);
    k3_xxh64_update(&s, data, n);
    return k3_xxh64_digest(&s);
}
