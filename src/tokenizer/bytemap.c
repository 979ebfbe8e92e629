/* bytemap.c - see bytemap.h. */
#include "tokenizer/bytemap.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* A multiply-xorshift hash over 8-byte words: keys are short (BPE pairs are
 * a few bytes), so per-call overhead matters more than bulk speed. Word
 * order is the host's: hashes never leave the process. */
static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15u ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDu;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53u;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDu;
    return h ^ (h >> 32);
}

int k3_bytemap_init(k3_bytemap *m, size_t count, const unsigned char *base,
                    const uint32_t *off, k3_err *e)
{
    size_t cap = 16;
    while (cap < 2 * count)
        cap *= 2;
    m->slot = k3_calloc(e, cap, sizeof *m->slot, "token hash table");
    if (!m->slot)
        return e->code;
    m->mask = cap - 1;
    m->base = base;
    m->off = off;
    return K3_OK;
}

void k3_bytemap_free(k3_bytemap *m)
{
    free(m->slot);
    m->slot = NULL;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const k3_bytemap *m, const unsigned char *key, size_t len, uint64_t h)
{
    uint64_t tag = h & 0xFFFFFFFF00000000u;
    for (size_t i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t s = m->slot[i];
        if (s == 0)
            return i;
        if ((s & 0xFFFFFFFF00000000u) != tag)
            continue;
        uint32_t id = (uint32_t)s - 1;
        uint32_t o = m->off[id];
        if (m->off[id + 1] - o == len && memcmp(m->base + o, key, len) == 0)
            return i;
    }
}

uint32_t k3_bytemap_add(k3_bytemap *m, uint32_t id)
{
    const unsigned char *key = m->base + m->off[id];
    size_t len = m->off[id + 1] - m->off[id];
    uint64_t h = hash_bytes(key, len);
    size_t i = find(m, key, len, h);
    if (m->slot[i])
        return (uint32_t)m->slot[i] - 1;
    m->slot[i] = (h & 0xFFFFFFFF00000000u) | ((uint64_t)id + 1);
    return K3_BYTEMAP_NONE;
}

uint32_t k3_bytemap_get(const k3_bytemap *m, const unsigned char *key, size_t len)
{
    uint64_t s = m->slot[find(m, key, len, hash_bytes(key, len))];
    return s ? (uint32_t)s - 1 : K3_BYTEMAP_NONE;
}
